//! candle CUDA tensors as Warp arrays on a GPU (`Array::from_candle`, feature
//! `candle-cuda`), each with values read back: a contiguous `f32` tensor
//! scaled in place by a Warp-ABI kernel (`wl_scale2d` of
//! `tests/kernels/warp_header.cu`, loaded from `$SDK_TEST_KERNELS`) and read
//! back through warp-launch and through candle; a narrowed and a transposed
//! view (strides and start offset) of `f32`, `f16` and `i64` tensors copied
//! through warp-launch (`contiguous`, `assign`); the tensor's memory alive
//! after the candle handle drops; and the refusals (an 8-bit float dtype, more
//! than four dimensions).

use candle_core::cuda::cudarc::driver::DevicePtr as _;
use candle_core::{DType as CDType, Device as CDevice, Tensor};
use warp_launch::{Array, DType, Device, Error, Kernel, KernelSpec};

fn cuda() -> CDevice {
    CDevice::new_cuda(0).expect("candle: CUDA device 0")
}

/// The device address of the tensor's storage (not of its first element).
fn storage_address(t: &Tensor) -> u64 {
    let (storage, _) = t.storage_and_layout();
    let candle_core::Storage::Cuda(cs) = &*storage else {
        panic!("not a CUDA tensor: {:?}", t.device())
    };
    macro_rules! ptr {
        ($t:ty) => {{
            let s = cs.as_cuda_slice::<$t>().unwrap();
            let (p, _g) = s.device_ptr(s.stream());
            p
        }};
    }
    match t.dtype() {
        CDType::F32 => ptr!(f32),
        CDType::F16 => ptr!(half::f16),
        CDType::I64 => ptr!(i64),
        d => panic!("no address helper for {d:?}"),
    }
}

fn kernels_dir() -> std::path::PathBuf {
    match std::env::var_os("SDK_TEST_KERNELS") {
        Some(d) => d.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/kernels"),
    }
}

/// `a[i, j] *= s` over a 2-D `f32` array (tests/kernels/warp_header.cu).
fn scale2d() -> Kernel {
    let path = kernels_dir().join("warp_header.cubin");
    let lib = cuda_api::Library::from_file(&path)
        .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    // SAFETY: wl_scale2d's parameters in tests/kernels/warp_header.cu are the
    // launch bounds, then `array_t<float32> a` (2-D) and `float32 s`; it
    // indexes a[c.i, c.j], the thread's coordinates.
    unsafe {
        KernelSpec::new("wl_scale2d", 2)
            .array::<f32>("a", 2)
            .value::<f32>("s")
            .indexed_by_thread("a")
            .load_cuda(&lib, "wl_scale2d", None)
            .unwrap()
    }
}

fn scale(k: &Kernel, a: &Array, s: f32) {
    k.launch([a.shape()[0], a.shape()[1]])
        .inputs((a, s))
        .run()
        .unwrap();
    // candle reads on its own stream: wait for every stream of the context.
    Device::Cuda(0).context().unwrap().synchronize().unwrap();
}

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_contiguous_f32_tensor_is_shared_and_a_kernel_writes_it_for_candle() {
    let dev = cuda();
    let t = Tensor::arange(0f32, 12.0, &dev)
        .unwrap()
        .reshape((3, 4))
        .unwrap();
    let a = Array::from_candle(&t).unwrap();
    assert_eq!(a.device(), Device::Cuda(0));
    assert!(std::ptr::eq(a.dtype(), DType::FLOAT32));
    assert_eq!(a.shape(), &[3, 4]);
    assert_eq!(a.strides(), &[16, 4]);
    assert_eq!(
        a.data_address(),
        storage_address(&t),
        "no copy: the array is candle's memory"
    );
    assert!(
        a.owner().and_then(|o| o.downcast_ref::<Tensor>()).is_some(),
        "the array's storage owns a clone of the tensor"
    );
    scale(&scale2d(), &a, 2.0);
    let want: Vec<f32> = seq(12).iter().map(|x| x * 2.0).collect();
    assert_eq!(a.to_vec::<f32>().unwrap(), want, "read through warp-launch");
    assert_eq!(
        t.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        want,
        "candle sees the kernel's writes"
    );
    println!("candle f32 [3, 4] -> Array: scaled by a Warp kernel, read back by both");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn strided_and_narrowed_views_keep_their_strides_and_offset() {
    let dev = cuda();
    let k = scale2d();
    // f32 [4, 6] narrowed to rows 1..3 and columns 2..5: offset 8, strides [24, 4].
    let t = Tensor::arange(0f32, 24.0, &dev)
        .unwrap()
        .reshape((4, 6))
        .unwrap();
    let v = t.narrow(0, 1, 2).unwrap().narrow(1, 2, 3).unwrap();
    let a = Array::from_candle(&v).unwrap();
    assert_eq!(a.shape(), &[2, 3]);
    assert_eq!(a.strides(), &[24, 4]);
    assert_eq!(a.data_address(), storage_address(&t) + 8 * 4);
    assert_eq!(
        a.contiguous().unwrap().to_vec::<f32>().unwrap(),
        vec![8.0, 9.0, 10.0, 14.0, 15.0, 16.0]
    );
    scale(&k, &a, -1.0);
    let whole = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let want: Vec<f32> = (0..24)
        .map(|i| {
            let (r, c) = (i / 6, i % 6);
            let x = i as f32;
            if (1..3).contains(&r) && (2..5).contains(&c) {
                -x
            } else {
                x
            }
        })
        .collect();
    assert_eq!(whole, want, "only the view's elements are negated");

    // The transpose: strides [4, 24] (element strides [1, 6]).
    let tt = t.t().unwrap();
    let a = Array::from_candle(&tt).unwrap();
    assert_eq!(a.shape(), &[6, 4]);
    assert_eq!(a.strides(), &[4, 24]);
    assert_eq!(
        a.contiguous().unwrap().to_vec::<f32>().unwrap(),
        tt.contiguous()
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
    );

    // f16: a narrowed column view, written through warp-launch (assign).
    let h = Tensor::arange(0f32, 8.0, &dev)
        .unwrap()
        .reshape((2, 4))
        .unwrap()
        .to_dtype(CDType::F16)
        .unwrap();
    let col = h.narrow(1, 1, 2).unwrap();
    let a = Array::from_candle(&col).unwrap();
    assert!(std::ptr::eq(a.dtype(), DType::FLOAT16));
    assert_eq!(
        (a.shape(), a.strides()),
        (&[2usize, 2][..], &[8isize, 2][..])
    );
    assert_eq!(a.data_address(), storage_address(&h) + 2);
    // warp-launch has no Rust f16 element: the bits as u16, seen as float16.
    let bits: Vec<u16> = [10.0f32, 11.0, 12.0, 13.0]
        .iter()
        .map(|&x| half::f16::from_f32(x).to_bits())
        .collect();
    let src = Array::from_slice("cuda:0", &bits, &[2, 2])
        .unwrap()
        .view(DType::FLOAT16)
        .unwrap();
    a.assign(&src).unwrap();
    let back: Vec<f32> = a
        .view(DType::UINT16)
        .unwrap()
        .contiguous()
        .unwrap()
        .to_vec::<u16>()
        .unwrap()
        .into_iter()
        .map(|b| half::f16::from_bits(b).to_f32())
        .collect();
    assert_eq!(
        back,
        vec![10.0, 11.0, 12.0, 13.0],
        "read through warp-launch"
    );
    Device::Cuda(0).context().unwrap().synchronize().unwrap();
    let got: Vec<f32> = h
        .to_dtype(CDType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    assert_eq!(got, vec![0.0, 10.0, 11.0, 3.0, 4.0, 12.0, 13.0, 7.0]);

    // i64: every other element (a stride of 2 elements) of a 1-D tensor.
    let n = Tensor::arange(0i64, 10, &dev).unwrap();
    let every_other = n
        .reshape((5, 2))
        .unwrap()
        .narrow(1, 1, 1)
        .unwrap()
        .squeeze(1)
        .unwrap();
    let a = Array::from_candle(&every_other).unwrap();
    assert!(std::ptr::eq(a.dtype(), DType::INT64));
    assert_eq!((a.shape(), a.strides()), (&[5usize][..], &[16isize][..]));
    assert_eq!(
        a.contiguous().unwrap().to_vec::<i64>().unwrap(),
        vec![1, 3, 5, 7, 9]
    );
    println!(
        "candle views -> Array: f32 narrowed and transposed, f16 column written, i64 stride 2"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_tensor_memory_lives_while_the_array_does() {
    let dev = cuda();
    let t = Tensor::arange(0f32, 8.0, &dev)
        .unwrap()
        .reshape((2, 4))
        .unwrap();
    let address = storage_address(&t);
    let a = Array::from_candle(&t).unwrap();
    let row = a.slice(0, 1..2).unwrap();
    drop(t);
    drop(a);
    // Were candle's memory freed, a tensor of the same size would likely get
    // it back; it must not.
    let others: Vec<Tensor> = (0..4)
        .map(|_| Tensor::full(99f32, (2, 4), &dev).unwrap())
        .collect();
    for o in &others {
        assert_ne!(
            storage_address(o),
            address,
            "candle reused the memory of a tensor an array still holds"
        );
    }
    scale(&scale2d(), &row, 10.0);
    assert_eq!(row.to_vec::<f32>().unwrap(), vec![40.0, 50.0, 60.0, 70.0]);
    println!("candle tensor dropped: its memory stayed with the array's view");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_dtype_warp_lacks_and_five_dimensions_are_refused() {
    let dev = cuda();
    let f8 = Tensor::zeros((2, 2), CDType::F8E4M3, &dev).unwrap();
    let e = Array::from_candle(&f8).unwrap_err();
    assert!(matches!(e, Error::Interop { what: "dtype", .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.starts_with("Array::from_candle: dtype: candle's F8E4M3 has no Warp type"),
        "{m}"
    );
    let five = Tensor::zeros((1, 1, 1, 1, 2), CDType::F32, &dev).unwrap();
    let e = Array::from_candle(&five).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e:?}");
    println!("candle refusals: F8E4M3 ({m}); 5-d: {e}");
}
