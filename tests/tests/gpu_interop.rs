//! Zero-copy interop on a GPU, each path with values read back: cudarc
//! slices as arrays (`Array::from_cudarc`) and arrays as cudarc slices
//! (`Array::to_cudarc`), DLPack export and import of CUDA arrays and of a
//! foreign CUDA tensor, and `Array::from_ptr` over CUDA memory owned
//! elsewhere with its extent checked against the driver's allocation. A
//! Warp-ABI kernel (`wl_scale2d`: `a[i, j] *= s`) runs on the shared memory
//! in each case, and every owner is checked to outlive the handle it came
//! from.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::{CudaContext, CudaSlice, DevicePtr as _};
use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use dlpark::metadata::Dynamic;
use warp_launch::{Array, DType, Device, Error};

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

fn scale(a: &Array, s: f32) {
    let k = sdk_tests::warp::header_kernels().unwrap();
    let shape = [a.shape()[0], a.shape()[1]];
    k.scale2d.launch(shape).inputs((a, s)).run().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cudarc_slice_becomes_an_array_that_owns_it() {
    let stream = CudaContext::new(0).unwrap().default_stream();
    let slice = stream.clone_htod(&seq(12)).unwrap();
    let address = {
        let (p, _g) = slice.device_ptr(&stream);
        p
    };
    let a = Array::from_cudarc(slice, &[3, 4]).unwrap();
    assert_eq!(a.device(), Device::Cuda(0));
    assert_eq!(
        a.data_address(),
        address,
        "no copy: the array is the slice's memory"
    );
    assert!(
        a.owner()
            .and_then(|o| o.downcast_ref::<CudaSlice<f32>>())
            .is_some(),
        "the storage owns the cudarc slice"
    );
    scale(&a, 2.0);
    // The slice lives while a view does, after the array it came with is gone.
    let row = a.slice(0, 2..3).unwrap();
    drop(a);
    assert_eq!(row.to_vec::<f32>().unwrap(), vec![16.0, 18.0, 20.0, 22.0]);
    println!("cudarc -> Array: scaled in place, row 2 read back after the array dropped");

    // Refusals: a shape of another size, a Rust type of another dtype.
    let e = Array::from_cudarc(stream.clone_htod(&seq(6)).unwrap(), &[4])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("Array::from_cudarc: shape: shape [4] holds 4 elements but the slice has 6"),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_array_lends_its_memory_to_cudarc_and_stays_alive_while_lent() {
    let stream = CudaContext::new(0).unwrap().default_stream();
    let a = Array::from_slice("cuda:0", &seq(8), &[2, 4]).unwrap();
    scale(&a, 3.0);
    let s = a.to_cudarc::<f32>(&stream).unwrap();
    {
        let (p, _g) = s.device_ptr(&stream);
        assert_eq!(p, a.data_address(), "no copy");
    }
    assert_eq!(
        stream.clone_dtoh(&*s).unwrap(),
        seq(8).iter().map(|x| x * 3.0).collect::<Vec<_>>(),
        "cudarc reads what the kernel wrote"
    );
    // cudarc writes; the array sees it after the lent slice drops.
    let mut s = s;
    stream
        .memcpy_htod(
            &[1.0f32, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0],
            &mut s.as_view_mut(),
        )
        .unwrap();
    drop(s);
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        vec![1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]
    );
    // The lent slice keeps the storage alive after the array is dropped.
    let s = a.to_cudarc::<f32>(&stream).unwrap();
    drop(a);
    // Allocate and free around it: the lent memory must not be reused.
    drop(Array::from_slice("cuda:0", &[9.0f32; 8], &[8]).unwrap());
    assert_eq!(
        stream.clone_dtoh(&*s).unwrap(),
        vec![1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]
    );
    drop(s);
    println!("Array -> cudarc: kernel output read by cudarc, cudarc's write read by the array");

    let b = Array::zeros::<f32>("cuda:0", &[4, 4]).unwrap();
    let e = b.to_cudarc::<i32>(&stream).unwrap_err();
    assert!(matches!(e, Error::ElementType { .. }), "{e}");
    let e = b
        .slice(1, 0..2)
        .unwrap()
        .to_cudarc::<f32>(&stream)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("Array::to_cudarc: strides:"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cuda_array_round_trips_through_dlpack_without_copying() {
    let a = Array::from_slice("cuda:0", &seq(6), &[2, 3]).unwrap();
    let address = a.data_address();
    let t = a.to_dlpack().unwrap();
    {
        let r = t.validate().unwrap();
        assert_eq!(r.device(), DLDevice::cuda(0));
        assert_eq!(r.dtype(), DLDataType::scalar(DLDataTypeCode::FLOAT, 32));
        assert_eq!(
            (r.shape(), r.strides()),
            (&[2i64, 3][..], Some(&[3i64, 1][..]))
        );
        assert_eq!(r.data_ptr() as u64, address);
    }
    drop(a);
    // The export kept the storage alive; the import shares it.
    let b = Array::from_dlpack(t, None, None).unwrap();
    assert_eq!((b.device(), b.data_address()), (Device::Cuda(0), address));
    scale(&b, 10.0);
    assert_eq!(
        b.to_vec::<f32>().unwrap(),
        vec![0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    );
    // A strided view exports its element strides and imports back to it.
    let col = b.slice(1, 1..2).unwrap();
    let c = Array::from_dlpack(col.to_dlpack().unwrap(), None, None).unwrap();
    assert_eq!((c.shape(), c.strides()), (&[2, 1][..], &[12isize, 4][..]));
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![10.0, 40.0]);
    // One owner record: the import of an export is a view of the
    // exporter's storage, so a launch through it is seen by a host read
    // through the exporter.
    let x = Array::from_slice("cuda:0", &seq(4), &[2, 2]).unwrap();
    let y = Array::from_dlpack(x.to_dlpack().unwrap(), None, None).unwrap();
    assert!(Arc::ptr_eq(x.storage(), y.storage()));
    assert_eq!(x.to_vec::<f32>().unwrap(), seq(4));
    scale(&y, 5.0);
    assert_eq!(
        x.to_vec::<f32>().unwrap(),
        vec![0.0, 5.0, 10.0, 15.0],
        "the exporter reads the import's launch"
    );
    println!("DLPack export/import on cuda:0: shared memory scaled and read back");
}

/// A foreign CUDA tensor: a cudarc slice exported through dlpark as another
/// library would, with a flag set when its deleter runs.
struct Held {
    _slice: CudaSlice<f32>,
    dropped: Arc<AtomicBool>,
}
impl Drop for Held {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_foreign_cuda_dlpack_tensor_imports_with_its_strides_and_is_freed_after_use() {
    let stream = CudaContext::new(0).unwrap().default_stream();
    let slice = stream.clone_htod(&seq(16)).unwrap();
    stream.synchronize().unwrap();
    let ptr = {
        let (p, _g) = slice.device_ptr(&stream);
        p
    };
    let dropped = Arc::new(AtomicBool::new(false));
    // Every other element of rows of 8, from element 1: [[1,3,5,7],[9,11,13,15]].
    let mut init = Dynamic::new(vec![2i64, 4], vec![8i64, 2])
        .initialize(Box::new(Held {
            _slice: slice,
            dropped: dropped.clone(),
        }))
        .unwrap();
    init.set_data(ptr as *mut std::ffi::c_void)
        .set_device(DLDevice::cuda(0))
        .set_dtype(DLDataType::scalar(DLDataTypeCode::FLOAT, 32))
        .set_byte_offset(4);
    // SAFETY: the slice, moved into the context, holds 16 float32 at `ptr`
    // until the deleter runs; the view reaches elements 1..=15.
    let t = unsafe { init.finish() };
    let a = Array::from_dlpack(t, None, None).unwrap();
    assert_eq!((a.shape(), a.strides()), (&[2, 4][..], &[32isize, 8][..]));
    scale(&a, 2.0);
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        vec![2.0, 6.0, 10.0, 14.0, 18.0, 22.0, 26.0, 30.0]
    );
    drop(a);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the deleter ran after the last array"
    );

    // A tensor that reaches past its allocation is refused (the driver
    // knows the extent).
    let slice = stream.clone_htod(&seq(256)).unwrap();
    let ptr = {
        let (p, _g) = slice.device_ptr(&stream);
        p
    };
    // One element past the allocation the driver reports for the slice.
    let (base, size) = Device::Cuda(0)
        .context()
        .unwrap()
        .address_range(ptr)
        .unwrap()
        .expect("the driver knows cudarc's allocation");
    println!("cudarc slice of 1024 B: the driver's allocation is {base:#x}, {size} B");
    let n = ((base + size as u64 - ptr) / 4 + 1) as i64;
    let mut init = Dynamic::new(vec![n], vec![1i64])
        .initialize(Box::new(slice))
        .unwrap();
    init.set_data(ptr as *mut std::ffi::c_void)
        .set_device(DLDevice {
            device_type: DLDeviceType::CUDA,
            device_id: 0,
        })
        .set_dtype(DLDataType::scalar(DLDataTypeCode::FLOAT, 32));
    // SAFETY: refused before anything is read (the shape escapes the slice).
    let t = unsafe { init.finish() };
    let e = Array::from_dlpack(t, None, None).unwrap_err().to_string();
    if n > i64::from(i32::MAX) {
        // The driver reports a range wider than an array can reach: the
        // shape is refused for int32 first.
        assert!(e.contains("int32"), "{e}");
    } else {
        assert!(e.starts_with("Array::from_dlpack: extent:"), "{e}");
    }
    println!(
        "foreign CUDA DLPack tensor: strided view scaled and read back; escaping view refused: {e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn from_ptr_over_cuda_memory_checks_the_extent_and_keeps_the_owner() {
    let src = Array::from_slice("cuda:0", &seq(256), &[256]).unwrap();
    let owner: Arc<dyn std::any::Any + Send + Sync> = Arc::new(src.clone());
    // SAFETY: `src` (the owner) holds 256 float32 at its data address.
    let a = unsafe {
        Array::from_ptr(
            "cuda:0",
            src.data_address() + 16,
            DType::FLOAT32,
            &[2, 8],
            Some(&[64, 4][..]),
            owner.clone(),
        )
    }
    .unwrap();
    drop(src);
    scale(&a, -1.0);
    let got = a.to_vec::<f32>().unwrap();
    let want: Vec<f32> = [
        4.0f32, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0,
    ]
    .iter()
    .map(|x| -x)
    .collect();
    assert_eq!(got, want);
    // One element past the allocation the driver reports: refused, naming
    // both ranges.
    let base = a.data_address() - 16;
    let (start, size) = Device::Cuda(0)
        .context()
        .unwrap()
        .address_range(base)
        .unwrap()
        .expect("the driver knows the array's allocation");
    assert_eq!(start, base);
    assert!(size >= 1024, "the allocation holds 256 float32: {size} B");
    let n = size / 4 + 1;
    // SAFETY: refused before anything is read.
    let e = unsafe { Array::from_ptr("cuda:0", base, DType::FLOAT32, &[n], None, owner.clone()) }
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("Array::from_ptr: extent:") && e.contains("driver's allocation"),
        "{e}"
    );
    // Host memory the driver does not know is refused for a CUDA array.
    let host = Arc::new(vec![0f32; 4]);
    // SAFETY: refused before anything is read.
    let e = unsafe {
        Array::from_ptr(
            "cuda:0",
            host.as_ptr() as u64,
            DType::FLOAT32,
            &[4],
            None,
            host.clone(),
        )
    }
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("Array::from_ptr: device:"), "{e}");
    println!(
        "from_ptr on cuda:0: strided view scaled; escaping view and unknown host memory refused"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_api_memory_owned_elsewhere_is_bounded_by_the_drivers_allocation() {
    use cuda_api::{Allocation, DeviceBuffer, MemoryKind};
    let ctx = Device::Cuda(0).context().unwrap();
    let buf = DeviceBuffer::from_slice(&ctx, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let addr = buf.device_address();
    let (base, size) = ctx.address_range(addr + 4).unwrap().unwrap();
    assert_eq!(
        base, addr,
        "the range of an inner address starts at the allocation"
    );
    assert!(size >= 16, "{size}");
    assert_eq!(
        ctx.address_range(0x10).unwrap(),
        None,
        "no allocation at 0x10"
    );
    let owner = Arc::new(buf);
    // SAFETY: refused before anything is read (one byte past the range).
    let e = unsafe {
        Allocation::from_raw_parts(&ctx, addr, size + 1, MemoryKind::Device, owner.clone())
    }
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("Allocation::from_raw_parts") && e.contains("run past the driver's allocation"),
        "{e}"
    );
    // SAFETY: elements 1 and 2 of the buffer, which the owner holds.
    let a =
        unsafe { Allocation::from_raw_parts(&ctx, addr + 4, 8, MemoryKind::Device, owner.clone()) }
            .unwrap();
    assert!(a.is_shared() && a.owner().is_some());
    let mut out = [0u8; 8];
    a.copy_to_host(0, &mut out).unwrap();
    assert_eq!(
        [
            f32::from_ne_bytes(out[..4].try_into().unwrap()),
            f32::from_ne_bytes(out[4..].try_into().unwrap())
        ],
        [2.0, 3.0]
    );
    assert_eq!(
        Arc::strong_count(&owner),
        2,
        "the allocation holds the owner"
    );
    drop(a);
    assert_eq!(
        Arc::strong_count(&owner),
        1,
        "and lets it go on drop, without freeing"
    );
    assert_eq!(
        owner.to_vec().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0],
        "the memory is still the buffer's"
    );
}

/// A page-locked array exported through DLPack (kDLCUDAHost) comes back as
/// a `"cpu"` array. On 8fa438c that was a second storage, plain host memory
/// with its own lock and no ordering: read right after launches on the
/// original it saw 0 of 1,048,576 elements written. Now it is a view of
/// the original's storage, whose host read waits for the launches.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_page_locked_import_read_right_after_launches_on_the_original_waits() {
    const SIDE: usize = 1024;
    let y =
        Array::zeros_in::<f32>("cuda:0", &[SIDE, SIDE], cuda_api::MemoryKind::PinnedHost).unwrap();
    y.copy_from_slice(&vec![1.0f32; SIDE * SIDE]).unwrap();
    let t = y.to_dlpack().unwrap();
    assert_eq!(
        t.validate().unwrap().device().device_type,
        DLDeviceType::CUDAHOST
    );
    let b = Array::from_dlpack(t, None, None).unwrap();
    assert_eq!(b.device(), Device::Cpu);
    assert!(Arc::ptr_eq(b.storage(), y.storage()), "one owner record");
    // Twelve passes over 4 MiB of page-locked memory, across the bus: a
    // few milliseconds of queued work, read through the import at once.
    for _ in 0..12 {
        scale(&y, 2.0);
    }
    let v = b.to_vec::<f32>().unwrap();
    let written = v.iter().filter(|&&x| x == 4096.0).count();
    assert_eq!(written, SIDE * SIDE, "{written} of {} written", SIDE * SIDE);
}

/// A `"cpu"` label over device memory: on 8fa438c `from_parts` took it,
/// `to_dlpack` exported it as kDLCPU, `from_dlpack` made host storage over
/// the device address and `to_vec` died with SIGSEGV. Each step is refused
/// now, naming the device memory.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cpu_label_over_device_memory_is_refused_without_a_fault() {
    let a = Array::from_slice("cuda:0", &seq(4), &[4]).unwrap();
    let e =
        Array::from_parts(a.storage().clone(), "cpu", 0, DType::FLOAT32, &[4], &[4]).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Interop {
                call: "Array::from_parts",
                what: "device",
                ..
            }
        ),
        "{e}"
    );
    // Raw host storage over the device address: the driver says what it is.
    // SAFETY: refused before anything is read.
    let e = unsafe {
        warp_launch::Storage::from_raw_host(a.data_address() as *mut u8, 16, Arc::new(a.clone()))
    }
    .unwrap_err();
    assert!(matches!(&e, Error::Interop { what: "device", .. }), "{e}");
    // A foreign tensor labelled kDLCPU over device memory.
    let stream = CudaContext::new(0).unwrap().default_stream();
    let slice = stream.clone_htod(&seq(4)).unwrap();
    stream.synchronize().unwrap();
    let ptr = {
        let (p, _g) = slice.device_ptr(&stream);
        p
    };
    let mut init = Dynamic::new(vec![4i64], vec![1i64])
        .initialize(Box::new(slice))
        .unwrap();
    init.set_data(ptr as *mut std::ffi::c_void)
        .set_device(DLDevice::CPU)
        .set_dtype(DLDataType::scalar(DLDataTypeCode::FLOAT, 32));
    // SAFETY: refused before anything is read.
    let t = unsafe { init.finish() };
    let e = Array::from_dlpack(t, None, None).unwrap_err().to_string();
    assert!(e.starts_with("Array::from_dlpack: device:"), "{e}");
    // The array itself still reads.
    assert_eq!(a.to_vec::<f32>().unwrap(), seq(4));
}

/// A foreign DLPack tensor whose producer's writes are still queued on a
/// stream: `ready_on` names it, and a copy of the import on another
/// non-blocking stream sees every value written. (Without it the copy
/// would run beside the producer's kernel.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_foreign_import_is_ordered_after_its_ready_on_stream() {
    use cuda_api::{DeviceBuffer, DevicePtr, Extent, LaunchConfig, Module, Stream};
    let ctx = Device::Cuda(0).context().unwrap();
    let ptx = std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx"))
        .expect("kernels.ptx (run cargo xtask gpu-bundle)");
    let m = Module::from_ptx(&ctx, &ptx).unwrap();
    // SAFETY: spin_write(unsigned *out, unsigned n, long long cycles) waits,
    // then writes out[i] = i + 1 for i < n.
    let k = unsafe {
        m.kernel::<(DevicePtr<u32>, u32, i64)>("spin_write")
            .unwrap()
    }
    .bound(0, Extent::Param(1))
    .unwrap();
    let khz = cuda_api::CudaDevice::get(0)
        .unwrap()
        .attribute(cuda_api::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .unwrap() as i64;
    let n = 1u32 << 20;
    let producer = Stream::new(&ctx).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, n as usize).unwrap();
    let ptr = out.device_address();
    k.launch(
        &producer,
        LaunchConfig::new(264, 256),
        (&mut out, n, khz * 20),
    )
    .unwrap();
    let mut init = Dynamic::new(vec![i64::from(n)], vec![1i64])
        .initialize(Box::new(out))
        .unwrap();
    init.set_data(ptr as *mut std::ffi::c_void)
        .set_device(DLDevice::cuda(0))
        .set_dtype(DLDataType::scalar(DLDataTypeCode::UINT, 32));
    // SAFETY: the buffer, moved into the context, holds n u32 at `ptr`
    // until the deleter runs; its writer is named as `ready_on`.
    let t = unsafe { init.finish() };
    let a = Array::from_dlpack(t, None, Some(&producer)).unwrap();
    let copy = Array::zeros::<u32>("cuda:0", &[n as usize]).unwrap();
    let other = Stream::new(&ctx).unwrap();
    copy.assign_on(&a, &other).unwrap();
    other.synchronize().unwrap();
    let v = copy.to_vec::<u32>().unwrap();
    let written = v
        .iter()
        .enumerate()
        .filter(|&(i, &x)| x == i as u32 + 1)
        .count();
    assert_eq!(written, n as usize, "{written} of {n} written");
}
