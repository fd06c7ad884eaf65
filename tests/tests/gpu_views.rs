//! Array views against Warp's `array_t` on a GPU: byte strides that do not
//! fit its `int32` strides are refused when the view is made, before any
//! launch (the audit's kernel wrote 4 GiB away, into another array, when a
//! row stride of 4 GiB was truncated), and the largest stride that fits
//! reaches the right element.

use warp_launch::{Array, DType, Device};

#[test]
#[ignore = "needs a CUDA GPU"]
fn strides_beyond_int32_are_refused_before_launch() {
    let gpu = Device::Cuda(0);
    let f32t = DType::FLOAT32;
    // The audit's array: [2, 2^30] float32, row stride 4 GiB (refused
    // before the 8 GiB are allocated).
    let e = Array::zeros_dtype(gpu, f32t, &[2, 1 << 30])
        .unwrap_err()
        .to_string();
    println!("zeros [2, 2^30] f32: {e}");
    assert!(
        e.starts_with("Array::zeros: axis 0 would have a byte stride of 4294967296, outside -2147483648..=2147483647"),
        "{e}"
    );
    // 2^30 float32 (4 GiB): reshaping or stepping to a 2 GiB stride.
    let n = 1usize << 30;
    let a = Array::zeros_dtype(gpu, f32t, &[n]).unwrap();
    let e = a.reshape(&[2, n / 2]).unwrap_err().to_string();
    println!("reshape [2, 2^29]: {e}");
    assert!(
        e.starts_with("Array::reshape: axis 0 would have a byte stride of 2147483648"),
        "{e}"
    );
    let e = a.slice_step(0, 0..n, n / 2).unwrap_err().to_string();
    println!("slice_step step 2^29: {e}");
    assert!(
        e.starts_with("Array::slice_step: axis 0 would have a byte stride of 2147483648"),
        "{e}"
    );
    // The largest row stride that fits (2^31 - 4 B) reaches the last
    // element, and an array allocated after it stays untouched.
    let sentinel = Array::from_slice(gpu, &[7.0f32; 1024], &[1024]).unwrap();
    let row = (i32::MAX as usize) / 4;
    let v = a.slice(0, 0..2 * row).unwrap().reshape(&[2, row]).unwrap();
    assert_eq!(v.strides(), &[(i32::MAX - 3) as isize, 4]);
    let last = a.slice(0, 2 * row - 1..2 * row).unwrap();
    last.copy_from_slice(&[3.0f32]).unwrap();
    let k = sdk_tests::warp::header_kernels().unwrap();
    k.scale2d
        .launch([2, row])
        .inputs((&v, 2.0f32))
        .run()
        .unwrap();
    assert_eq!(last.to_vec::<f32>().unwrap(), vec![6.0]);
    assert_eq!(sentinel.to_vec::<f32>().unwrap(), vec![7.0f32; 1024]);
    println!(
        "row stride {} B: last element scaled, neighbour intact",
        v.strides()[0]
    );
}
