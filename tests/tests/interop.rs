//! Zero-copy interop on the CPU device (no GPU needed): DLPack export and
//! import of arrays on "cpu" (kDLCPU), foreign DLPack tensors made with
//! dlpark, every refusal of an import, and arrays over host memory owned
//! elsewhere (`Array::from_ptr`). The CUDA paths are in gpu_interop.rs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use dlpark::metadata::Dynamic;
use dlpark::{DlpackFlags, versioned};
use warp_launch::{Array, DType, Device, Error};

/// The memory of a foreign tensor, with a flag set when its deleter runs.
struct Foreign {
    _data: Vec<u8>,
    dropped: Arc<AtomicBool>,
}
impl Drop for Foreign {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// A DLPack tensor over `data` (bytes), as another library would export it.
struct Spec {
    shape: Vec<i64>,
    strides: Vec<i64>,
    byte_offset: u64,
    device: DLDevice,
    dtype: DLDataType,
    read_only: bool,
}

fn spec(shape: &[i64], strides: &[i64]) -> Spec {
    Spec {
        shape: shape.to_vec(),
        strides: strides.to_vec(),
        byte_offset: 0,
        device: DLDevice::CPU,
        dtype: DLDataType::scalar(DLDataTypeCode::FLOAT, 32),
        read_only: false,
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn foreign(data: Vec<u8>, s: Spec) -> (versioned::Dlpack, Arc<AtomicBool>) {
    let dropped = Arc::new(AtomicBool::new(false));
    let ptr = data.as_ptr() as *mut std::ffi::c_void;
    let mut init = Dynamic::new(s.shape, s.strides)
        .initialize(Box::new(Foreign {
            _data: data,
            dropped: dropped.clone(),
        }))
        .unwrap();
    init.set_data(ptr)
        .set_device(s.device)
        .set_dtype(s.dtype)
        .set_byte_offset(s.byte_offset);
    if s.read_only {
        init.set_flags(DlpackFlags::READ_ONLY).unwrap();
    }
    // SAFETY: the data (a Vec moved into the context, whose heap buffer
    // does not move) lives until the deleter runs; shape and strides are
    // copied into the tensor. Descriptors the tests want refused are
    // refused before the data is read.
    (unsafe { init.finish() }, dropped)
}

fn refusal(t: versioned::Dlpack, dtype: Option<&'static DType>) -> String {
    match Array::from_dlpack(t, dtype, None) {
        Ok(a) => panic!("imported as {a:?}, expected a refusal"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn an_exported_cpu_array_describes_its_view_in_elements() {
    let a = Array::from_slice(
        "cpu",
        &(0..12).map(|i| i as f32).collect::<Vec<_>>(),
        &[3, 4],
    )
    .unwrap();
    // Column 1..3 of every row: shape [3, 2], byte strides [16, 4].
    let v = a.slice(1, 1..3).unwrap();
    let t = v.to_dlpack().unwrap();
    let r = t.validate().unwrap();
    assert_eq!(r.device(), DLDevice::CPU);
    assert_eq!(r.dtype(), DLDataType::scalar(DLDataTypeCode::FLOAT, 32));
    assert_eq!(r.shape(), &[3, 2]);
    assert_eq!(
        r.strides(),
        Some(&[4i64, 1][..]),
        "DLPack strides are in elements"
    );
    assert_eq!(r.byte_offset(), 0);
    assert_eq!(r.data_ptr() as u64, v.data_address());
    assert_eq!(v.data_address(), a.data_address() + 4);
    // The transpose: strides swap.
    let t = a.transpose(0, 1).unwrap().to_dlpack_legacy().unwrap();
    let r = t.validate().unwrap();
    assert_eq!(
        (r.shape(), r.strides()),
        (&[4i64, 3][..], Some(&[1i64, 4][..]))
    );
}

#[test]
fn vector_and_matrix_dtypes_export_their_inner_dimensions() {
    let v = Array::zeros_dtype("cpu", DType::VEC3F, &[5]).unwrap();
    let t = v.to_dlpack().unwrap();
    let r = t.validate().unwrap();
    assert_eq!(
        (r.shape(), r.strides()),
        (&[5i64, 3][..], Some(&[3i64, 1][..]))
    );
    assert_eq!(r.dtype(), DLDataType::scalar(DLDataTypeCode::FLOAT, 32));
    let m = Array::zeros_dtype("cpu", DType::MAT22D, &[2, 3]).unwrap();
    let t = m.to_dlpack().unwrap();
    let r = t.validate().unwrap();
    assert_eq!(r.shape(), &[2, 3, 2, 2]);
    assert_eq!(r.strides(), Some(&[12i64, 4, 2, 1][..]));
    assert_eq!(r.dtype(), DLDataType::scalar(DLDataTypeCode::FLOAT, 64));
    // Back as the matrix type: the same array; as the scalar: 4 dimensions.
    let back = Array::from_dlpack(m.to_dlpack().unwrap(), Some(DType::MAT22D), None).unwrap();
    assert_eq!((back.shape(), back.strides()), (m.shape(), m.strides()));
    assert_eq!(back.data_address(), m.data_address());
    let flat = Array::from_dlpack(t, None, None).unwrap();
    assert_eq!(flat.shape(), &[2, 3, 2, 2]);
    assert_eq!(flat.dtype().name, "float64");
}

#[test]
fn an_export_keeps_the_storage_alive_and_an_import_shares_it() {
    let a = Array::from_slice("cpu", &[1i32, 2, 3, 4], &[4]).unwrap();
    let address = a.data_address();
    let t = a.to_dlpack().unwrap();
    drop(a);
    let b = Array::from_dlpack(t, None, None).unwrap();
    assert_eq!(b.data_address(), address, "no copy");
    assert_eq!(b.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
    // One owner record: the import is a view of the exported storage (this
    // crate's allocation, so no foreign owner), not a second storage.
    assert!(b.owner().is_none());
    // Writes through the import land in the exported memory.
    let c = Array::from_dlpack(b.to_dlpack().unwrap(), None, None).unwrap();
    assert!(Arc::ptr_eq(b.storage(), c.storage()));
    c.copy_from_slice(&[9i32, 8, 7, 6]).unwrap();
    assert_eq!(b.to_vec::<i32>().unwrap(), vec![9, 8, 7, 6]);
}

/// The audit's second owner: `from_dlpack(a.to_dlpack())` made a storage
/// with its own lock over `a`'s bytes. Now an import of memory the process
/// tracks (a view of an export included) joins the storage that holds it,
/// at the same address, and keeps it alive.
#[test]
fn an_import_of_tracked_memory_joins_its_owner_record() {
    let a = Array::from_slice(
        "cpu",
        &(0..12).map(|i| i as f32).collect::<Vec<_>>(),
        &[3, 4],
    )
    .unwrap();
    let col = a.slice(1, 2..3).unwrap();
    let b = Array::from_dlpack(col.to_dlpack().unwrap(), None, None).unwrap();
    assert!(Arc::ptr_eq(b.storage(), a.storage()));
    assert_eq!(
        (b.offset(), b.data_address()),
        (col.offset(), col.data_address())
    );
    let weak = Arc::downgrade(a.storage());
    drop((a, col));
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.0, 6.0, 10.0]);
    assert!(
        weak.upgrade().is_some(),
        "the import keeps the record alive"
    );
    drop(b);
    assert!(
        weak.upgrade().is_none(),
        "and lets it go with the last array"
    );
}

/// Foreign memory imported twice: bytes inside the first import join it;
/// bytes that overlap it without lying inside it are refused, naming both
/// ranges, since they would need a second record.
#[test]
fn overlapping_imports_join_when_inside_and_are_refused_when_not() {
    let data: Arc<Vec<f32>> = Arc::new((0..8).map(|i| i as f32).collect());
    let at = |i: usize| data.as_ptr() as u64 + 4 * i as u64;
    // SAFETY: the Vec (the owner) holds 8 float32 from `at(0)`; every view
    // below lies inside them.
    let import = |i: usize, n: usize| unsafe {
        Array::from_ptr("cpu", at(i), DType::FLOAT32, &[n], None, data.clone())
    };
    let first = import(2, 4).unwrap();
    let inner = import(3, 2).unwrap();
    assert!(Arc::ptr_eq(first.storage(), inner.storage()));
    assert_eq!(inner.to_vec::<f32>().unwrap(), vec![3.0, 4.0]);
    for (i, n) in [(0, 4), (4, 4), (0, 8)] {
        let e = import(i, n).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Interop {
                    call: "Array::from_ptr",
                    what: "overlap",
                    ..
                }
            ),
            "elements {i}..{}: {e}",
            i + n
        );
    }
    // Memory beside the first import is not tracked: its own record.
    let beside = import(6, 2).unwrap();
    assert!(!Arc::ptr_eq(first.storage(), beside.storage()));
    // Once the first record is gone, the whole buffer may be imported.
    drop((first, inner, beside));
    assert_eq!(import(0, 8).unwrap().len(), 8);
}

#[test]
fn a_foreign_tensor_is_read_with_its_strides_and_offset_and_freed_after_the_last_array() {
    // 2 x 3 float32 every other element, starting one element in.
    let data = f32_bytes(&(0..14).map(|i| i as f32).collect::<Vec<_>>());
    let mut s = spec(&[2, 3], &[6, 2]);
    s.byte_offset = 4;
    let (t, dropped) = foreign(data, s);
    let a = Array::from_dlpack(t, None, None).unwrap();
    assert_eq!((a.shape(), a.strides()), (&[2, 3][..], &[24isize, 8][..]));
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        vec![1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
    );
    let row = a.slice(0, 1..2).unwrap();
    drop(a);
    assert!(
        !dropped.load(Ordering::SeqCst),
        "a view still uses the tensor"
    );
    assert_eq!(row.to_vec::<f32>().unwrap(), vec![7.0, 9.0, 11.0]);
    drop(row);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the deleter runs with the last array"
    );
}

#[test]
fn a_zero_dimensional_tensor_is_one_element_and_vec3_rows_come_packed() {
    let (t, _) = foreign(f32_bytes(&[2.5]), spec(&[], &[]));
    let a = Array::from_dlpack(t, None, None).unwrap();
    assert_eq!(
        (a.shape(), a.to_vec::<f32>().unwrap()),
        (&[1][..], vec![2.5])
    );
    let (t, _) = foreign(
        f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        spec(&[2, 3], &[3, 1]),
    );
    let v = Array::from_dlpack(t, Some(DType::VEC3F), None).unwrap();
    assert_eq!((v.shape(), v.strides()), (&[2][..], &[12isize][..]));
    assert_eq!(v.device(), Device::Cpu);
}

#[test]
fn imports_that_do_not_match_are_refused_naming_what_differs() {
    let data = || f32_bytes(&[0.0; 16]);
    let cases: Vec<(Spec, Option<&'static DType>, &[&str])> = vec![
        (
            Spec {
                read_only: true,
                ..spec(&[4], &[1])
            },
            None,
            &["Array::from_dlpack: flags:", "READ_ONLY"],
        ),
        (
            Spec {
                device: DLDevice::metal(0),
                ..spec(&[4], &[1])
            },
            None,
            &["device:", "DLPack device type 8", "kDLCUDA (2)"],
        ),
        (
            Spec {
                device: DLDevice {
                    device_type: DLDeviceType::ROCM,
                    device_id: 1,
                },
                ..spec(&[4], &[1])
            },
            None,
            &["device:", "type 10 (id 1)"],
        ),
        (
            Spec {
                dtype: DLDataType::scalar(DLDataTypeCode::COMPLEX, 64),
                ..spec(&[4], &[1])
            },
            None,
            &["dtype:", "type code 5 with 64 bits", "no Warp scalar"],
        ),
        (
            Spec {
                dtype: DLDataType::new(DLDataTypeCode::FLOAT, 32, 4),
                ..spec(&[4], &[1])
            },
            None,
            &["dtype:", "float32 x 4 lanes"],
        ),
        (
            spec(&[4], &[1]),
            Some(DType::INT32),
            &["dtype:", "holds float32 but int32"],
        ),
        (
            spec(&[4], &[1]),
            Some(DType::VEC3I),
            &["dtype:", "vec3i is made of int32"],
        ),
        (
            spec(&[4, 2], &[2, 1]),
            Some(DType::VEC3F),
            &["shape:", "[3] packed", "[2]"],
        ),
        (
            spec(&[2, 3], &[1, 2]),
            Some(DType::VEC3F),
            &["shape:", "element strides [2]"],
        ),
        (
            spec(&[2], &[1]),
            Some(DType::MAT22F),
            &["shape:", "needs 2 inner dimension(s) [2, 2]"],
        ),
        (
            spec(&[1, 1, 1, 1, 2], &[2, 2, 2, 2, 1]),
            None,
            &["Array::from_dlpack", "1 to 4 dimensions"],
        ),
        (
            Spec {
                byte_offset: 2,
                ..spec(&[4], &[1])
            },
            None,
            &["Array::from_dlpack", "alignment (4 B)"],
        ),
        (
            spec(&[4], &[1i64 << 40]),
            None,
            &["Array::from_dlpack", "int32"],
        ),
    ];
    for (s, dtype, parts) in cases {
        let (t, dropped) = foreign(data(), s);
        let m = refusal(t, dtype);
        for p in parts {
            assert!(m.contains(p), "{p:?} not in {m:?}");
        }
        assert!(
            dropped.load(Ordering::SeqCst),
            "a refused tensor is released: {m}"
        );
    }
}

#[test]
fn a_cpu_array_over_foreign_host_memory_is_from_ptr() {
    let data: Arc<Vec<f64>> = Arc::new((0..6).map(f64::from).collect());
    // SAFETY: the Vec (the owner) holds 6 f64 at that address; nothing
    // else writes it while the array lives.
    let a = unsafe {
        Array::from_ptr(
            "cpu",
            data.as_ptr() as u64,
            DType::FLOAT64,
            &[2, 3],
            None,
            data.clone(),
        )
    }
    .unwrap();
    assert_eq!(
        a.to_vec::<f64>().unwrap(),
        vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    );
    assert_eq!(Arc::strong_count(&data), 2, "the array holds the owner");
    let t = a.transpose(0, 1).unwrap().to_dlpack().unwrap();
    drop(a);
    assert_eq!(Arc::strong_count(&data), 2, "the export holds it now");
    drop(t);
    assert_eq!(Arc::strong_count(&data), 1, "the deleter let it go");
    let e = Error::Interop {
        call: "c",
        what: "w",
        message: "m".into(),
    }
    .to_string();
    assert_eq!(e, "c: w: m");
}
