//! The CPU device with CUDA host memory, and the access modes, on a GPU:
//! a CPU kernel and a copy from another thread on a page-locked or managed
//! array do not interleave (38e7deb's host lock covered only plain host
//! memory: 3,722 + 374 of 4,096 seen); overlapping copies inside one CUDA
//! allocation move like `memmove`; RELAXED still refuses ordinary host
//! memory for a CUDA kernel before launch (38e7deb launched it and the
//! kernel killed the context).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cuda_api::MemoryKind;
use sdk_tests::warp::data_dir;
use warp_launch::{
    AccessMode, AotModule, Array, DType, Device, Error, Kernel, KernelSpec, cpu_each_fn,
};

fn f32t() -> &'static DType {
    DType::FLOAT32
}

/// `x[i] = v`; at index `pause_at` it sets `started` and sleeps, so another
/// thread can act in the middle of the launch.
fn fill(pause_at: i32, started: Arc<AtomicBool>) -> Kernel {
    KernelSpec::new("fill", 1)
        .value::<f32>("v")
        .array::<f32>("x", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(move |args, each| {
                each.run(|t| {
                    let x = args.array::<f32>(1)?;
                    x.set(t.tid(), args.value(0)?)?;
                    if t.tid() == pause_at {
                        started.store(true, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    Ok(())
                })
            }),
            None,
        )
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_copy_into_a_page_locked_or_managed_array_waits_for_the_cpu_kernel_writing_it() {
    const N: usize = 4096;
    for kind in [MemoryKind::PinnedHost, MemoryKind::Managed] {
        let a = Array::zeros_dtype_in(Device::Cpu, f32t(), &[N], kind).unwrap();
        let started = Arc::new(AtomicBool::new(false));
        let k = fill(N as i32 / 2, started.clone());
        std::thread::scope(|s| {
            let launch = s.spawn(|| k.launch(N).inputs((1.0f32, &a)).device("cpu").run());
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            a.copy_from_slice(&[2.0f32; N]).unwrap();
            launch.join().unwrap().unwrap();
        });
        let v = a.to_vec::<f32>().unwrap();
        let ones = v.iter().filter(|&&x| x == 1.0).count();
        let twos = v.iter().filter(|&&x| x == 2.0).count();
        println!("{kind}: {ones} ones, {twos} twos of {N}");
        assert!(
            ones == N || twos == N,
            "{kind}: interleaved writes: {ones} ones and {twos} twos of {N}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn overlapping_copies_inside_one_cuda_allocation_move_like_memmove() {
    const N: usize = 64;
    let init: Vec<f32> = (0..N).map(|i| i as f32).collect();
    for (device, kind) in [
        (Device::Cuda(0), MemoryKind::Device),
        (Device::Cuda(0), MemoryKind::Managed),
        (Device::Cpu, MemoryKind::PinnedHost),
    ] {
        for shift in [1usize, 7, 32] {
            for forward in [true, false] {
                let a = Array::from_slice_in(device, &init, &[N], kind).unwrap();
                let len = N - shift;
                let (dst, src) = if forward {
                    (0..len, shift..N)
                } else {
                    (shift..N, 0..len)
                };
                a.slice(0, dst.clone())
                    .unwrap()
                    .copy_from(&a.slice(0, src.clone()).unwrap())
                    .unwrap();
                let mut want = init.clone();
                want.copy_within(src, dst.start);
                assert_eq!(
                    a.to_vec::<f32>().unwrap(),
                    want,
                    "{kind}, shift {shift}, forward {forward}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn relaxed_refuses_a_host_array_for_a_cuda_kernel_before_launch() {
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let k = unsafe { AotModule::load(data_dir().join("aot")) }
        .expect("Warp AOT module loads")
        .kernel("saxpy")
        .unwrap();
    let gpu = Device::Cuda(0);
    let x = Array::from_slice(gpu, &[1.0f32; 8], &[8]).unwrap();
    let host = Array::zeros_dtype(Device::Cpu, f32t(), &[8]).unwrap();
    for mode in [AccessMode::Relaxed, AccessMode::Strict, AccessMode::Checked] {
        let e = k
            .launch(8)
            .inputs((3.0f32, &x, &host))
            .device(gpu)
            .access_mode(mode)
            .run()
            .unwrap_err();
        assert!(
            matches!(&e, Error::Access(a) if a.reason.contains("ordinary host memory")),
            "{mode}: {e}"
        );
        println!("{mode}: {e}");
    }
    // Also when RELAXED is this thread's default, and for a recorded launch.
    let before = warp_launch::set_thread_access_mode(AccessMode::Relaxed);
    let e = k
        .launch(8)
        .inputs((3.0f32, &x, &host))
        .device(gpu)
        .record_cmd()
        .unwrap_err();
    assert!(matches!(e, Error::Access(_)), "{e}");
    warp_launch::set_thread_access_mode(before);
    // Nothing reached the GPU: the context still works.
    let y = Array::zeros_dtype(gpu, f32t(), &[8]).unwrap();
    k.launch(8)
        .inputs((3.0f32, &x, &y))
        .device(gpu)
        .access_mode(AccessMode::Relaxed)
        .run()
        .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0; 8]);
}
