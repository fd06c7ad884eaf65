//! The stream-ordered array operations on the `"cpu"` device, where they
//! run synchronously with the same API (`zero_on`, `fill_on`,
//! `assign_on`, `to_on`, `contiguous_on`, `view` and their synchronous
//! forms), their errors, and the scoped default device. No GPU needed.

use std::sync::Arc;

use warp_launch::{Array, DType, Device, ScopedDevice, Storage, Value};

#[test]
fn zero_and_fill_write_only_the_views_elements() {
    let a = Array::from_slice(
        "cpu",
        &(1..=12).map(|v| v as f32).collect::<Vec<_>>(),
        &[3, 4],
    )
    .unwrap();
    // Column 1 of every row, then the last row reversed.
    a.slice(1, 1..2).unwrap().zero_on(None).unwrap();
    let rev =
        Array::from_parts(a.storage().clone(), "cpu", 44, DType::FLOAT32, &[4], &[-4]).unwrap();
    rev.fill_on(&Value::of(-1.0f32), None).unwrap();
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        [1., 0., 3., 4., 5., 0., 7., 8., -1., -1., -1., -1.]
    );
    // A value wider than 4 bytes whose words differ (mat22f), strided.
    let m = Array::zeros::<[[f32; 2]; 2]>("cpu", &[5]).unwrap();
    m.slice_step(0, 1..5, 2)
        .unwrap()
        .fill(&Value::of([[1.0f32, 2.0], [3.0, 4.0]]))
        .unwrap();
    let got = m.to_vec::<[[f32; 2]; 2]>().unwrap();
    for (i, g) in got.iter().enumerate() {
        let want = if i % 2 == 1 {
            [[1.0, 2.0], [3.0, 4.0]]
        } else {
            [[0.0; 2]; 2]
        };
        assert_eq!(*g, want, "element {i}");
    }
    // A number converts to the scalar type, by Warp's rule.
    let i = Array::zeros::<i64>("cpu", &[3]).unwrap();
    i.fill(&Value::of(9i32)).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), [9, 9, 9]);
}

#[test]
fn fill_refuses_a_value_of_another_dtype_naming_both() {
    let a = Array::zeros::<[f32; 3]>("cpu", &[2]).unwrap();
    let e = a.fill_on(&Value::of(1.0f32), None).unwrap_err().to_string();
    assert!(
        e.starts_with("Array::fill_on: a value of float32 cannot fill an array of vec3f"),
        "{e}"
    );
    let i = Array::zeros::<i32>("cpu", &[2]).unwrap();
    assert!(
        i.fill(&Value::of(1.5f32)).is_err(),
        "a float does not become an int"
    );
}

#[test]
fn assign_copies_across_strides_and_refuses_other_shapes_and_dtypes() {
    let src = Array::from_slice("cpu", &[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    let dst = Array::zeros::<i32>("cpu", &[3, 2]).unwrap();
    dst.assign(&src.transpose(0, 1).unwrap()).unwrap();
    assert_eq!(dst.to_vec::<i32>().unwrap(), [1, 4, 2, 5, 3, 6]);
    // Into a strided destination.
    let wide = Array::zeros::<i32>("cpu", &[2, 6]).unwrap();
    wide.slice_step(1, 0..6, 2)
        .unwrap()
        .assign_on(&src, None)
        .unwrap();
    assert_eq!(
        wide.to_vec::<i32>().unwrap(),
        [1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0]
    );
    let e = dst.assign(&src).unwrap_err().to_string();
    assert!(
        e.starts_with("Array::assign_on: copying int32 [2, 3] into int32 [3, 2] needs the same dtype and shape"),
        "{e}"
    );
    let f = Array::zeros::<f32>("cpu", &[2, 3]).unwrap();
    let e = f.assign_on(&src, None).unwrap_err().to_string();
    assert!(
        e.contains("copying int32 [2, 3] into float32 [2, 3]"),
        "{e}"
    );
    // A slice, row-major into a strided view, with its length checked.
    let e = dst
        .copy_from_slice_on(&[1i32; 5], None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the array has 6 elements but the slice 5"),
        "{e}"
    );
    assert!(
        dst.copy_from_slice_on(&[1.0f32; 6], None).is_err(),
        "another dtype"
    );
}

#[test]
fn to_and_contiguous_share_memory_only_when_nothing_changes() {
    let a = Array::from_slice("cpu", &[1u8, 2, 3, 4, 5, 6], &[2, 3])
        .unwrap()
        .with_grad()
        .unwrap();
    let same = a.to("cpu").unwrap();
    assert!(Arc::ptr_eq(same.storage(), a.storage()));
    assert!(same.grad().is_none(), "to() carries no gradient");
    let c = a.contiguous().unwrap();
    assert!(Arc::ptr_eq(c.storage(), a.storage()));
    let t = a.transpose(0, 1).unwrap().contiguous_on(None).unwrap();
    assert!(!Arc::ptr_eq(t.storage(), a.storage()));
    assert!(t.is_contiguous());
    assert_eq!(t.to_vec::<u8>().unwrap(), [1, 4, 2, 5, 3, 6]);
    assert!(a.to("gpu").is_err(), "a name that is no device");
}

#[test]
fn view_needs_the_same_size_and_alignment() {
    let a = Array::from_slice("cpu", &[1.5f32, -2.0, 0.25, 8.0], &[2, 2]).unwrap();
    let u = a.view(DType::UINT32).unwrap();
    assert!(Arc::ptr_eq(u.storage(), a.storage()));
    assert_eq!(u.shape(), a.shape());
    assert_eq!(u.to_vec::<u32>().unwrap()[1], (-2.0f32).to_bits());
    let e = a.view(DType::FLOAT64).unwrap_err().to_string();
    assert_eq!(
        e,
        "Array::view: float32 has 4 B elements but float64 has 8 B; view as a dtype of the same size (as Warp's view)"
    );
    // vec2f (8 B, 4-byte aligned) at offset 4 is not a float64 (8-byte aligned).
    let s = Arc::new(Storage::host(24).unwrap());
    let v = Array::from_parts(s, "cpu", 4, DType::VEC2F, &[2], &[8]).unwrap();
    let e = v.view(DType::FLOAT64).unwrap_err().to_string();
    assert!(
        e.starts_with("Array::view: offset 4 B is not a multiple of float64's alignment (8 B)"),
        "{e}"
    );
    assert!(v.view(DType::INT64).is_err(), "int64 is 8-byte aligned too");
    let two = Array::from_parts(
        Arc::new(Storage::host(16).unwrap()),
        "cpu",
        0,
        DType::VEC2F,
        &[2],
        &[8],
    )
    .unwrap();
    assert_eq!(two.view(DType::FLOAT64).unwrap().len(), 2);
}

#[test]
fn scoped_devices_nest_and_stay_on_their_thread() {
    let before = Device::current();
    {
        let _outer = ScopedDevice::new("cpu").unwrap();
        assert_eq!(Device::current(), Device::Cpu);
        {
            let _inner = ScopedDevice::new(Device::Cuda(3)).unwrap();
            assert_eq!(Device::current(), Device::Cuda(3));
            let other = std::thread::spawn(Device::current).join().unwrap();
            assert_eq!(other, before, "another thread keeps its own default");
        }
        assert_eq!(
            Device::current(),
            Device::Cpu,
            "the inner guard restored the outer"
        );
    }
    assert_eq!(Device::current(), before);
    assert!(ScopedDevice::new("gpu:0").is_err());
    // The CPU device has no stream and no memory pool.
    assert!(!Device::Cpu.is_mempool_supported());
    assert!(Device::Cpu.stream().is_err());
    assert!(Device::Cpu.mempool_release_threshold().is_err());
}

#[test]
fn copy_range_is_warps_copy_with_offsets_and_count() {
    let src = Array::from_slice("cpu", &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let dst = Array::zeros::<f32>("cpu", &[4]).unwrap();
    // count 0: from src_offset to the end of src.
    dst.copy_range_on(0, &src, 2, 0, None).unwrap();
    assert_eq!(dst.to_vec::<f32>().unwrap(), [3.0, 4.0, 5.0, 6.0]);
    dst.copy_range_on(1, &src, 0, 2, None).unwrap();
    assert_eq!(dst.to_vec::<f32>().unwrap(), [3.0, 1.0, 2.0, 6.0]);
    let e = dst
        .copy_range_on(3, &src, 0, 2, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("Array::copy_range_on: copying elements 0..2 of float32 [2, 3] into elements 3..5 of float32 [4]"),
        "{e}"
    );
    let e = dst
        .copy_range_on(0, &src.transpose(0, 1).unwrap(), 0, 2, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("(not contiguous)"), "{e}");
    let ints = Array::zeros::<i32>("cpu", &[4]).unwrap();
    assert!(
        ints.copy_range_on(0, &src, 0, 1, None).is_err(),
        "another dtype"
    );
}
