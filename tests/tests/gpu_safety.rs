//! The audit's findings against cuda-api's safe API (issue 14), each
//! reproduced on a real GPU: on 38e7deb each of these corrupted memory, read
//! stale data, freed memory under a running kernel or used the wrong
//! context; now each is refused or ordered. Kernels from `cargo xtask
//! gpu-bundle`; run with `--include-ignored` on a GPU machine.

use std::time::{Duration, Instant};

use cuda_api::{
    ConstDevicePtr, Context, CudaDevice, CudaError, DeviceBuffer, DevicePtr, Extent, LaunchConfig,
    LaunchError, Library, MemoryKind, Module, Stream, TypedKernel, driver,
};

fn ptx() -> String {
    std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx"))
        .expect("kernels.ptx (run cargo xtask gpu-bundle)")
}

fn primary() -> Context {
    Context::primary(&CudaDevice::get(0).expect("device 0")).expect("primary context")
}

type SpinWrite = (DevicePtr<u32>, u32, i64);

/// spin_write(unsigned *out, unsigned n, long long cycles): waits, then writes out[i] = i + 1 for i < n.
fn spin_write(m: &Module) -> TypedKernel<SpinWrite> {
    // SAFETY: the signature above; out[i] is written only for i < n.
    unsafe { m.kernel::<SpinWrite>("spin_write").unwrap() }
        .bound(0, Extent::Param(1))
        .unwrap()
}

/// About `ms` milliseconds of clock64 cycles on this device.
fn cycles(ms: i64) -> i64 {
    let d = CudaDevice::get(0).unwrap();
    let khz = d
        .attribute(cuda_api::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .unwrap() as i64;
    khz * ms
}

type CoopSum = (ConstDevicePtr<u32>, DevicePtr<u64>, DevicePtr<u64>, u32);

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_readme_cooperative_sum_refuses_a_one_element_partial_buffer() {
    let ctx = primary();
    let stream = Stream::new(&ctx).unwrap();
    let m = Module::from_ptx(&ctx, &ptx()).unwrap();
    // SAFETY: coop_sum reads in[0..n), writes partial[blockIdx.x] and out[0].
    let k = unsafe { m.kernel::<CoopSum>("coop_sum").unwrap() }
        .bound(0, Extent::Param(3))
        .unwrap()
        .bound(1, Extent::Blocks)
        .unwrap()
        .bound(2, Extent::Elements(1))
        .unwrap();
    let blocks = k.max_cooperative_grid(&ctx, 256, 0).unwrap();
    let n = 1u32 << 20;
    let input = DeviceBuffer::from_slice(&ctx, &vec![1u32; n as usize]).unwrap();
    let mut partial = DeviceBuffer::<u64>::zeroed(&ctx, 1).unwrap();
    // The allocation after `partial`: 38e7deb overwrote it (928 elements on the H200).
    let neighbour = DeviceBuffer::from_slice(&ctx, &vec![7u64; 4096]).unwrap();
    let mut out = DeviceBuffer::<u64>::zeroed(&ctx, 1).unwrap();
    let cfg = LaunchConfig::new(blocks, 256);
    let e = k
        .launch_cooperative(&stream, cfg, (&input, &mut partial, &mut out, n))
        .unwrap_err();
    eprintln!("{e}");
    assert!(
        matches!(e, CudaError::Launch(LaunchError::BufferTooShort { index: 1, len: 1, needed, .. }) if needed == blocks as u64),
        "{e}"
    );
    // An input shorter than n is refused too.
    let mut partial = DeviceBuffer::<u64>::zeroed(&ctx, blocks as usize).unwrap();
    let e = k
        .launch_cooperative(&stream, cfg, (&input, &mut partial, &mut out, n + 1))
        .unwrap_err();
    assert!(
        matches!(
            e,
            CudaError::Launch(LaunchError::BufferTooShort { index: 0, .. })
        ),
        "{e}"
    );
    k.launch_cooperative(&stream, cfg, (&input, &mut partial, &mut out, n))
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![n as u64]);
    assert!(neighbour.to_vec().unwrap().iter().all(|&v| v == 7));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn host_reads_wait_for_a_launch_on_a_non_blocking_stream() {
    let ctx = primary();
    let stream = Stream::new(&ctx).unwrap(); // non-blocking: no implicit order with the null stream
    let m = Module::from_ptx(&ctx, &ptx()).unwrap();
    let k = spin_write(&m);
    let n = 1u32 << 20;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, n as usize).unwrap();
    k.launch(
        &stream,
        LaunchConfig::new(264, 256),
        (&mut out, n, cycles(20)),
    )
    .unwrap();
    // No synchronize: 38e7deb read 0 of 1,048,576 written elements here.
    let v = out.to_vec().unwrap();
    let written = v
        .iter()
        .enumerate()
        .filter(|&(i, &x)| x == i as u32 + 1)
        .count();
    assert_eq!(written, n as usize);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn memory_is_freed_after_the_kernel_that_writes_it_for_every_kind() {
    let ctx = primary();
    let stream = Stream::new(&ctx).unwrap();
    let m = Module::from_ptx(&ctx, &ptx()).unwrap();
    let k = spin_write(&m);
    for kind in [
        MemoryKind::Managed,
        MemoryKind::Device,
        MemoryKind::PinnedHost,
    ] {
        let mut buf = DeviceBuffer::<u32>::zeroed_in(&ctx, 1 << 16, kind).unwrap();
        k.launch(
            &stream,
            LaunchConfig::new(64, 256),
            (&mut buf, 1 << 16, cycles(300)),
        )
        .unwrap();
        let t = Instant::now();
        drop(buf); // 38e7deb: a managed free returned while the kernel still ran
        let waited = t.elapsed();
        eprintln!("{kind}: drop waited {waited:?}");
        assert!(
            waited >= Duration::from_millis(150),
            "{kind}: the free returned after {waited:?}, before the 300 ms kernel ended"
        );
        stream.synchronize().unwrap();
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_context_popped_behind_cuda_apis_back_is_bound_again() {
    let a = primary();
    let b = Context::new(a.device()).unwrap();
    a.bind().unwrap();
    b.bind().unwrap();
    // The safe thin-layer call changes the thread's current context.
    let popped = driver::ctx_pop_current().unwrap();
    assert_eq!(popped, b.raw());
    let buf = DeviceBuffer::<u32>::zeroed(&b, 16).unwrap();
    let mut owner: cuda_api::sys::CUcontext = std::ptr::null_mut();
    // SAFETY: `owner` is a CUcontext out-parameter; the address is a live allocation.
    unsafe {
        driver::pointer_get_attribute(
            (&mut owner as *mut cuda_api::sys::CUcontext).cast(),
            cuda_api::sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
            buf.device_address(),
        )
        .unwrap()
    };
    // 38e7deb allocated it in `a`.
    assert_eq!(owner, b.raw());
    assert_eq!(buf.context(), &b);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_library_kernel_survives_its_primary_context_being_released_and_retained() {
    let lib = Library::from_image(ptx().as_bytes()).unwrap();
    // The driver answers a CUkernel's parameter query only with a context current.
    let declaring = primary();
    // SAFETY: add_one(int *data, unsigned n) touches data[i] for i < n.
    let k = unsafe { lib.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() }
        .bound(0, Extent::Param(1))
        .unwrap();
    drop(declaring); // the last retain of the primary context goes
    for round in 0..2 {
        let ctx = primary();
        let stream = Stream::new(&ctx).unwrap();
        let mut data = DeviceBuffer::from_slice(&ctx, &[1i32, 2, 3]).unwrap();
        // 38e7deb: the second round used the CUfunction cached for the
        // released context and failed with an invalid-context error.
        k.launch(&stream, LaunchConfig::new(1, 32), (&mut data, 3u32))
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(data.to_vec().unwrap(), vec![2, 3, 4]);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_memory_of_another_context_is_refused() {
    let a = primary();
    let b = Context::new(a.device()).unwrap();
    let m = Module::from_ptx(&a, &ptx()).unwrap();
    // SAFETY: add_one(int *data, unsigned n) touches data[i] for i < n.
    let k = unsafe { m.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() }
        .bound(0, Extent::Param(1))
        .unwrap();
    let mut other = DeviceBuffer::from_slice(&b, &[1i32, 2, 3]).unwrap();
    let e = k
        .launch(
            &a.default_stream(),
            LaunchConfig::new(1, 32),
            (&mut other, 3u32),
        )
        .unwrap_err();
    assert!(e.to_string().contains("launch runs in"), "{e}");
    // Its own stream's context works; the refusal did not touch the memory.
    assert_eq!(other.to_vec().unwrap(), vec![1, 2, 3]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn many_threads_launch_in_their_own_contexts_and_streams() {
    let dev = CudaDevice::get(0).unwrap();
    let image = ptx();
    let lib = Library::from_image(image.as_bytes()).unwrap();
    let _declaring = Context::primary(&dev).unwrap();
    // SAFETY: add_one(int *data, unsigned n) touches data[i] for i < n.
    let shared = unsafe { lib.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() }
        .bound(0, Extent::Param(1))
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let (dev, shared) = (&dev, &shared);
            s.spawn(move || {
                // Odd threads use a context of their own: every launch must bind the right one.
                let ctx = if t % 2 == 0 {
                    Context::primary(dev).unwrap()
                } else {
                    Context::new(dev).unwrap()
                };
                let stream = Stream::new(&ctx).unwrap();
                let n = 4096 + t as u32;
                let mut data = DeviceBuffer::<i32>::zeroed(&ctx, n as usize).unwrap();
                for i in 0..300 {
                    if i % 50 == 0 {
                        // Another context made current behind cuda-api's back.
                        let _ = driver::ctx_pop_current();
                    }
                    shared
                        .launch(&stream, LaunchConfig::for_elements(n, 128), (&mut data, n))
                        .unwrap();
                }
                let v = data.to_vec().unwrap();
                assert!(v.iter().all(|&x| x == 300), "thread {t}: {:?}", &v[..4]);
            });
        }
    });
}

fn warp_module() -> warp_launch::AotModule {
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    unsafe { warp_launch::AotModule::load(sdk_tests::warp::data_dir().join("aot")) }
        .expect("Warp AOT module loads (run cargo xtask gpu-bundle)")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_recorded_warp_launch_refuses_a_stream_of_another_context() {
    use warp_launch::{Array, DType, Device};
    let module = warp_module();
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    let f32t = DType::FLOAT32;
    let x = Array::zeros_dtype(dev, f32t, &[256]).unwrap();
    let y = Array::zeros_dtype(dev, f32t, &[256]).unwrap();
    let primary = dev.context().unwrap();
    let other = Context::new(primary.device()).unwrap();
    let foreign = Stream::new(&other).unwrap();
    // The builder compares contexts, not devices.
    let e = saxpy
        .launch(256)
        .inputs((1.0f32, &x, &y))
        .stream(&foreign)
        .record_cmd()
        .unwrap_err();
    assert!(
        e.to_string().contains("pass a stream of that context"),
        "{e}"
    );
    // A launch recorded for the primary context, replayed on the other one (38e7deb ran it).
    let l = saxpy
        .launch(256)
        .inputs((1.0f32, &x, &y))
        .record_cmd()
        .unwrap();
    let e = l.launch_on(&foreign).unwrap_err();
    assert!(
        e.to_string().contains("pass a stream of that context"),
        "{e}"
    );
    l.launch_on(&Stream::new(&primary).unwrap()).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_warp_array_read_right_after_a_launch_on_a_non_blocking_stream_is_current() {
    use warp_launch::{Array, DType, Device};
    let module = warp_module();
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    let f32t = DType::FLOAT32;
    let n = 1usize << 22;
    let x = Array::from_slice(dev, &vec![1.0f32; n], &[n]).unwrap();
    let y = Array::zeros_dtype(dev, f32t, &[n]).unwrap();
    let stream = Stream::new(&dev.context().unwrap()).unwrap();
    for _ in 0..20 {
        saxpy
            .launch(n)
            .inputs((1.0f32, &x, &y))
            .stream(&stream)
            .run()
            .unwrap();
    }
    // No synchronize: the read waits for the 20 launches.
    let v = y.to_vec::<f32>().unwrap();
    assert!(v.iter().all(|&e| e == 20.0), "{:?}", &v[..4]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn many_threads_share_one_warp_kernel_and_its_spare_argument_blocks() {
    use warp_launch::{Array, Device};
    let module = warp_module();
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    std::thread::scope(|s| {
        for t in 0..8usize {
            let saxpy = &saxpy;
            s.spawn(move || {
                let n = 1000 + 17 * t;
                let x = Array::from_slice(dev, &vec![1.0f32; n], &[n]).unwrap();
                let y = Array::from_slice(dev, &vec![t as f32; n], &[n]).unwrap();
                let stream = Stream::new(&dev.context().unwrap()).unwrap();
                let mut replay = saxpy
                    .launch(n)
                    .inputs((1.0f32, &x, &y))
                    .stream(&stream)
                    .record_cmd()
                    .unwrap();
                for i in 0..200 {
                    // Immediate launches take and give back the kernel's spare
                    // argument blocks from every thread at once.
                    saxpy
                        .launch(n)
                        .inputs((1.0f32, &x, &y))
                        .stream(&stream)
                        .run()
                        .unwrap();
                    if i % 2 == 0 {
                        replay.set_param_by_name("a", 2.0f32).unwrap();
                        replay.launch_on(&stream).unwrap();
                    }
                }
                // y = t + 200 * 1 + 100 * 2
                let v = y.to_vec::<f32>().unwrap();
                let want = t as f32 + 400.0;
                assert!(
                    v.iter().all(|&e| e == want),
                    "thread {t}: {:?} != {want}",
                    &v[..4]
                );
            });
        }
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_warp_array_in_device_memory_of_a_separate_context_is_refused_in_every_mode() {
    use warp_launch::Storage;
    use warp_launch::{AccessMode, Array, DType, Device};
    let module = warp_module();
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    let f32t = DType::FLOAT32;
    let separate = Context::new(&cuda_api::CudaDevice::get(0).unwrap()).unwrap();
    let alloc = cuda_api::Allocation::zeroed(&separate, 1024, MemoryKind::Device).unwrap();
    let foreign = Array::from_parts(
        std::sync::Arc::new(Storage::cuda(alloc)),
        dev,
        0,
        f32t,
        &[256],
        &[4],
    )
    .unwrap();
    let x = Array::zeros_dtype(dev, f32t, &[256]).unwrap();
    for mode in [AccessMode::Relaxed, AccessMode::Checked, AccessMode::Strict] {
        let e = saxpy
            .launch(256)
            .inputs((1.0f32, &x, &foreign))
            .access_mode(mode)
            .run()
            .unwrap_err();
        assert!(
            e.to_string().contains("a context of its own"),
            "{mode:?}: {e}"
        );
    }
}
