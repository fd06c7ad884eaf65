//! One owner record per memory, whatever its kind, its context and the
//! stream handle (issue 37), attacked with safe code on a GPU:
//!
//! - page-locked and managed arrays used by work of their own context or of
//!   another one, on each road that queues GPU work (a launch, `fill_on`, a
//!   copy, a graph replay): a host read right after sees every element the
//!   work wrote (74e46c6 synchronised only the memory's own context: a
//!   read after a launch in another context saw 0 of 1,048,576), and the
//!   free waits for the work;
//! - a second handle on a stream being captured (`Stream::from_cudarc`)
//!   cannot queue work the graph does not hold, and `from_cudarc` refuses a
//!   stream of another context;
//! - GPU work and CPU kernels on one page-locked array exclude each other:
//!   a launch waits for a CPU kernel on another thread (74e46c6 ran them
//!   interleaved), is refused from inside the kernel's body, and a CPU
//!   kernel waits for queued GPU work in another context; a CPU launch on
//!   memory lent to cudarc is refused.
//!
//! Cross-device use of portable page-locked memory needs two GPUs, which no
//! machine lent to this project has: these tests use one device and two of
//! its contexts (the primary one and a separate one).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuda_api::{Allocation, Context, CudaDevice, DeviceBuffer, MemoryKind, Stream};
use warp_launch::{
    AccessMode, Array, DType, Device, Error, Graph, Kernel, KernelSpec, Storage, Value, cpu_each_fn,
};

const N: usize = 1 << 20;
const DEV: Device = Device::Cuda(0);

fn primary() -> Context {
    CudaDevice::get(0).unwrap().primary_context().unwrap()
}

fn separate() -> Context {
    Context::new(&CudaDevice::get(0).unwrap()).unwrap()
}

/// An int32 array of `n` elements in `kind` memory of `ctx`, for launches
/// on device 0.
fn array_in(ctx: &Context, kind: MemoryKind, n: usize) -> Array {
    let alloc = Allocation::zeroed(ctx, n * 4, kind).unwrap();
    Array::from_parts(
        Arc::new(Storage::cuda(alloc)),
        DEV,
        0,
        DType::INT32,
        &[n],
        &[4],
    )
    .unwrap()
}

/// Keeps `stream` busy for tens of milliseconds with safe work of its own
/// context (memsets of 1 GiB); the buffer is returned so that its free
/// comes after the reads under test.
fn busy(stream: &Stream) -> DeviceBuffer<u8> {
    let mut b = DeviceBuffer::<u8>::zeroed(stream.context(), 1 << 30).unwrap();
    for i in 0..100u8 {
        b.fill_async(i, stream).unwrap();
    }
    b
}

/// `wl_spin_fill`: spins `cycles`, then writes out[i] = i + 1.
fn spin() -> Kernel {
    sdk_tests::warp::header_kernels().unwrap().spin_fill
}

/// Clock cycles for about `ms` milliseconds at the device's clock.
fn cycles(ms: i64) -> i64 {
    let khz = CudaDevice::get(0)
        .unwrap()
        .attribute(cuda_api::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .unwrap() as i64;
    khz * ms
}

/// How many elements of `v` are not `want(i)`.
fn wrong(v: &[i32], want: impl Fn(usize) -> i32) -> usize {
    v.iter().enumerate().filter(|&(i, &x)| x != want(i)).count()
}

#[derive(Clone, Copy, Debug)]
enum Road {
    Launch,
    FillOn,
    Copy,
    Replay,
}

/// Queues `road`'s work on `a` (of `kind`, in the primary context when
/// `other` is false, else in a separate context) behind slow work, reads
/// `a` on the host at once and checks every element; then queues the work
/// again, drops `a` at once, and checks that the drop waited for it.
/// Warp launches and graphs run in the primary context, so for them the
/// other context is the memory's; `fill_on` and the copy run on a stream
/// of the separate context over primary-context memory (the direction the
/// audit found).
fn check(kind: MemoryKind, road: Road, other: bool) {
    let p = primary();
    let s = if other { separate() } else { p.clone() };
    let (mem_ctx, stream_ctx) = match road {
        Road::Launch | Road::Replay => (&s, &p),
        Road::FillOn | Road::Copy => (&p, &s),
    };
    let stream = Stream::new(stream_ctx).unwrap();
    let k = spin();
    let src = Array::from_slice_in(
        DEV,
        &(1..=N as i32).collect::<Vec<_>>(),
        &[N],
        MemoryKind::PinnedHost,
    );
    // The copy's source lives in the stream's context.
    let src = match road {
        Road::Copy => {
            let a = array_in(stream_ctx, MemoryKind::PinnedHost, N);
            a.assign(&src.unwrap()).unwrap();
            Some(a)
        }
        _ => None,
    };
    let want: fn(usize) -> i32 = match road {
        Road::FillOn => |_| 7,
        _ => |i| i as i32 + 1,
    };
    let queue = |a: &Array, graph: Option<&Graph>| match road {
        Road::Launch => k
            .launch(N)
            .inputs((a, 0i64))
            .stream(&stream)
            .access_mode(AccessMode::Relaxed)
            .run()
            .unwrap(),
        Road::FillOn => a.fill_on(&Value::of(7i32), &stream).unwrap(),
        Road::Copy => a.assign_on(src.as_ref().unwrap(), &stream).unwrap(),
        Road::Replay => graph.unwrap().launch(&stream).unwrap(),
    };
    let capture = |a: &Array| {
        Graph::capture_with(&stream, |g| {
            g.launch(
                k.launch(N)
                    .inputs((a, 0i64))
                    .access_mode(AccessMode::Relaxed)
                    .record_cmd()?,
            )
        })
        .unwrap()
    };
    let what = format!("{kind}, {road:?}, other context: {other}");

    // A host read right after the work sees all of it.
    let a = array_in(mem_ctx, kind, N);
    let graph = matches!(road, Road::Replay).then(|| capture(&a));
    let b = busy(&stream);
    queue(&a, graph.as_ref());
    let v = a.to_vec::<i32>().unwrap();
    let bad = wrong(&v, want);
    assert_eq!(
        bad, 0,
        "{what}: a host read right after the work saw {bad} of {N} elements stale"
    );

    // The free waits for the work (the busy stream runs for tens of ms).
    let a2 = array_in(mem_ctx, kind, N);
    let graph2 = matches!(road, Road::Replay).then(|| capture(&a2));
    a2.to_vec::<i32>().unwrap();
    let b2 = busy(&stream);
    queue(&a2, graph2.as_ref());
    let t = Instant::now();
    drop(graph2);
    drop(a2);
    let waited = t.elapsed();
    let slow = stream.synchronize().map(|_| t.elapsed()).unwrap();
    println!("{what}: the drop took {waited:?}; the stream was done after {slow:?}");
    if sdk_tests::injected_tool().is_none() {
        assert!(
            waited + Duration::from_millis(1) >= slow,
            "{what}: the drop took {waited:?}, but the work on the memory ran until {slow:?}: it was freed under the work"
        );
    }
    drop((b, b2, graph));
}

macro_rules! cases {
    ($($name:ident: $kind:ident, $road:ident, $other:expr;)*) => {$(
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn $name() {
            check(MemoryKind::$kind, Road::$road, $other);
        }
    )*};
}

cases! {
    pinned_launch_same_context: PinnedHost, Launch, false;
    pinned_launch_other_context: PinnedHost, Launch, true;
    pinned_fill_on_same_context: PinnedHost, FillOn, false;
    pinned_fill_on_other_context: PinnedHost, FillOn, true;
    pinned_copy_same_context: PinnedHost, Copy, false;
    pinned_copy_other_context: PinnedHost, Copy, true;
    pinned_graph_replay_same_context: PinnedHost, Replay, false;
    pinned_graph_replay_other_context: PinnedHost, Replay, true;
    managed_launch_same_context: Managed, Launch, false;
    managed_launch_other_context: Managed, Launch, true;
    managed_fill_on_same_context: Managed, FillOn, false;
    managed_fill_on_other_context: Managed, FillOn, true;
    managed_copy_same_context: Managed, Copy, false;
    managed_copy_other_context: Managed, Copy, true;
    managed_graph_replay_same_context: Managed, Replay, false;
    managed_graph_replay_other_context: Managed, Replay, true;
}

/// A second handle on the stream a graph captures (74e46c6: its launch and
/// `fill_on` became nodes the graph did not hold, and a replay after both
/// arrays dropped wrote 2,097,152 elements of new arrays): both are
/// refused, since the driver says the stream is being captured.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_second_handle_on_a_capturing_stream_is_refused() {
    let cctx = cudarc::driver::CudaContext::new(0).unwrap();
    let cs = cctx.new_stream().unwrap();
    let ctx = Context::from_cudarc(&cctx).unwrap();
    let one = Stream::from_cudarc(&ctx, cs.clone()).unwrap();
    let two = Stream::from_cudarc(&ctx, cs.clone()).unwrap();
    let a = Array::zeros::<i32>(DEV, &[N]).unwrap();
    let k = spin();
    let mut errors = Vec::new();
    let graph = Graph::capture_with(&one, |_g| {
        errors.push(
            k.launch(N)
                .inputs((&a, 0i64))
                .stream(&two)
                .run()
                .map(|_| "launch"),
        );
        errors.push(a.fill_on(&Value::of(3i32), &two).map(|_| "fill_on"));
        Ok(())
    });
    graph.unwrap();
    for e in errors {
        let e = e.expect_err("work through a second handle of a capturing stream");
        assert!(
            e.to_string().contains("is being captured into a graph"),
            "{e}"
        );
    }
    // After the capture, the second handle works again.
    a.fill_on(&Value::of(3i32), &two).unwrap();
    assert!(a.to_vec::<i32>().unwrap().iter().all(|&x| x == 3));
}

/// A stream that joins a capture by waiting for an event of the captured
/// stream (here through cudarc's safe API, as another library would) is
/// captured too: the driver says so at the next enqueue, and work queued
/// through it is refused as work through a second handle is. Written for
/// issue 37's list of ways into a capture; first run on the GPU machine in
/// the session after it was written.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_stream_that_joined_a_capture_through_an_event_is_refused() {
    let cctx = cudarc::driver::CudaContext::new(0).unwrap();
    let cs = cctx.new_stream().unwrap();
    let joiner = cctx.new_stream().unwrap();
    let ctx = Context::from_cudarc(&cctx).unwrap();
    let one = Stream::from_cudarc(&ctx, cs.clone()).unwrap();
    let other = Stream::from_cudarc(&ctx, joiner.clone()).unwrap();
    let a = Array::zeros::<i32>(DEV, &[N]).unwrap();
    let k = spin();
    let mut errors = Vec::new();
    let graph = Graph::capture_with(&one, |_g| {
        // The joiner waits for the captured stream: the driver captures it
        // into the same graph from here on.
        let joined = cs.record_event(None).unwrap();
        joiner.wait(&joined).unwrap();
        errors.push(
            k.launch(N)
                .inputs((&a, 0i64))
                .stream(&other)
                .run()
                .map(|_| "launch"),
        );
        errors.push(a.fill_on(&Value::of(3i32), &other).map(|_| "fill_on"));
        // Joined back before the capture ends, as the driver requires.
        let back = joiner.record_event(None).unwrap();
        cs.wait(&back).unwrap();
        Ok(())
    });
    graph.unwrap();
    for e in errors {
        let e = e.expect_err("work through a stream that joined a capture");
        assert!(
            e.to_string().contains("is being captured into a graph"),
            "{e}"
        );
    }
    // After the capture, the joiner works again.
    a.fill_on(&Value::of(3i32), &other).unwrap();
    assert!(a.to_vec::<i32>().unwrap().iter().all(|&x| x == 3));
}

/// Page-locked memory made outside the SDK without the portable flag, in
/// a separate context. The reach check asks the driver
/// (`CU_POINTER_ATTRIBUTE_DEVICE_POINTER` in the using context) instead
/// of trusting the flag. Under unified addressing (every 64-bit process
/// here), the driver maps page-locked memory from `cuMemHostAlloc` into
/// every context of the device, flags or not, and answers with the same
/// address. So the check accepts it, and the use is noted in the other
/// context: a `fill_on` on the primary context's stream is waited for by
/// the host read. The check's refusal (memory the driver does not map
/// into the using context) needs a second device, or a system without
/// unified addressing; no machine lent here has either. The first run of
/// this test (issue 37) expected a refusal, and the H100 showed the
/// driver's answer.
#[test]
#[ignore = "needs a CUDA GPU"]
fn page_locked_memory_of_one_context_is_reached_from_another_when_the_driver_maps_it() {
    /// Page-locked memory of `ctx` from `cuMemHostAlloc`, freed on drop.
    struct Pinned {
        ptr: *mut std::ffi::c_void,
        ctx: Context,
    }
    // SAFETY: the pointer is only freed, once, in drop.
    unsafe impl Send for Pinned {}
    // SAFETY: as above.
    unsafe impl Sync for Pinned {}
    impl Drop for Pinned {
        fn drop(&mut self) {
            self.ctx.bind().unwrap();
            // SAFETY: allocated by cuMemHostAlloc below, freed once.
            unsafe { cuda_sys::cuMemFreeHost(self.ptr) };
        }
    }
    let own = separate();
    own.bind().unwrap();
    let bytes = 4096usize;
    let mut host = std::ptr::null_mut();
    // SAFETY: an out-pointer to a local; mapped, not portable.
    let r =
        unsafe { cuda_sys::cuMemHostAlloc(&mut host, bytes, cuda_sys::CU_MEMHOSTALLOC_DEVICEMAP) };
    assert!(r.is_success(), "{r:?}");
    let mut device = 0;
    // SAFETY: `host` is mapped page-locked memory of the current context.
    let r = unsafe { cuda_sys::cuMemHostGetDevicePointer(&mut device, host, 0) };
    assert!(r.is_success(), "{r:?}");
    let owner = Arc::new(Pinned {
        ptr: host,
        ctx: own.clone(),
    });
    // SAFETY: `bytes` of page-locked memory of `own`, mapped there at
    // `device`, alive while `owner` is, written by nothing else.
    let alloc =
        unsafe { Allocation::from_raw_parts(&own, device, bytes, MemoryKind::PinnedHost, owner) }
            .unwrap();
    // The driver maps it into the primary context at the same address.
    let mut mapped: cuda_sys::CUdeviceptr = 0;
    primary().bind().unwrap();
    // SAFETY: one out-pointer to a local of the attribute's size.
    let r = unsafe {
        cuda_sys::cuPointerGetAttribute(
            (&raw mut mapped).cast(),
            cuda_sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
            device,
        )
    };
    assert!(r.is_success(), "{r:?}");
    assert_eq!(mapped, device);
    alloc.record_use_in(&primary()).unwrap();
    alloc.record_use_in(&own).unwrap();
    // Through warp-launch: a fill on the primary context's stream, then a
    // host read, which waits for it.
    let a = Array::from_parts(
        Arc::new(Storage::cuda(alloc)),
        DEV,
        0,
        DType::INT32,
        &[bytes / 4],
        &[4],
    )
    .unwrap();
    let stream = DEV.stream().unwrap();
    a.fill_on(&Value::of(7i32), &stream).unwrap();
    let v = a.to_vec::<i32>().unwrap();
    assert_eq!(v.len(), bytes / 4);
    assert!(v.iter().all(|&x| x == 7), "a host read missed the fill");
}

/// `Stream::from_cudarc` asks the driver for the stream's context and
/// refuses a mismatch, naming the call (74e46c6 took any stream for any
/// context).
#[test]
#[ignore = "needs a CUDA GPU"]
fn from_cudarc_refuses_a_stream_of_another_context() {
    let cctx = cudarc::driver::CudaContext::new(0).unwrap();
    let cs = cctx.new_stream().unwrap();
    let e = Stream::from_cudarc(&separate(), cs).unwrap_err();
    assert!(e.to_string().contains("Stream::from_cudarc"), "{e}");
}

/// `x[i] = -1` for each i; at `pause_at` it sets `started` and sleeps
/// 100 ms; at 0 it runs `inside` (once).
fn cpu_fill(
    pause_at: i32,
    started: Arc<AtomicBool>,
    inside: Arc<dyn Fn() + Send + Sync>,
) -> Kernel {
    KernelSpec::new("cpu_fill", 1)
        .array::<i32>("x", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(move |args, each| {
                each.run(|t| {
                    let x = args.array::<i32>(0)?;
                    x.set(t.tid(), -1)?;
                    if t.tid() == 0 {
                        inside();
                    }
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

/// A GPU launch on a page-locked array that a CPU kernel on another thread
/// is writing waits for that kernel (74e46c6 ran them interleaved: 3,717 of
/// 4,096): afterwards every element is the GPU's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_launch_waits_for_a_cpu_kernel_writing_its_page_locked_array() {
    const M: usize = 4096;
    for kind in [MemoryKind::PinnedHost, MemoryKind::Managed] {
        let a = array_in(&primary(), kind, M);
        let started = Arc::new(AtomicBool::new(false));
        let cpu = cpu_fill(M as i32 / 2, started.clone(), Arc::new(|| {}));
        let k = spin();
        let stream = Stream::new(&primary()).unwrap();
        std::thread::scope(|s| {
            let launch = s.spawn(|| {
                cpu.launch(M)
                    .inputs((&a,))
                    .device("cpu")
                    .access_mode(AccessMode::Relaxed)
                    .run()
            });
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            k.launch(M)
                .inputs((&a, 0i64))
                .stream(&stream)
                .access_mode(AccessMode::Relaxed)
                .run()
                .unwrap();
            launch.join().unwrap().unwrap();
        });
        let v = a.to_vec::<i32>().unwrap();
        let bad = wrong(&v, |i| i as i32 + 1);
        assert_eq!(
            bad, 0,
            "{kind}: {bad} of {M} elements were the CPU kernel's after the GPU launch that followed it"
        );
    }
}

/// A GPU launch from inside a CPU kernel's body on the kernel's own
/// page-locked array is refused (waiting for the kernel would never end);
/// 74e46c6 queued it while the body ran.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_launch_from_a_cpu_kernel_body_on_its_array_is_refused() {
    const M: usize = 64;
    let a = array_in(&primary(), MemoryKind::PinnedHost, M);
    let seen: Arc<Mutex<Option<Result<(), Error>>>> = Arc::new(Mutex::new(None));
    let (inner, out) = (a.clone(), seen.clone());
    let k = spin();
    let cpu = cpu_fill(
        -1,
        Arc::new(AtomicBool::new(false)),
        Arc::new(move || {
            let r = k
                .launch(M)
                .inputs((&inner, 0i64))
                .access_mode(AccessMode::Relaxed)
                .run();
            *out.lock().unwrap() = Some(r);
        }),
    );
    cpu.launch(M)
        .inputs((&a,))
        .device("cpu")
        .access_mode(AccessMode::Relaxed)
        .run()
        .unwrap();
    let r = seen.lock().unwrap().take().expect("the body ran");
    let e = r.expect_err("a GPU launch on the CPU kernel's own array from its body");
    assert!(matches!(e, Error::WouldDeadlock { .. }), "{e}");
    // Nothing the GPU could write: all elements are the CPU kernel's.
    assert!(a.to_vec::<i32>().unwrap().iter().all(|&x| x == -1));
}

/// A CPU kernel on page-locked memory of a separate context waits for a
/// GPU launch queued on it in the primary context (74e46c6 synchronised
/// only the separate context: the kernel read zeros).
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cpu_kernel_waits_for_gpu_work_of_another_context_on_its_array() {
    const M: usize = 4096;
    let a = array_in(&separate(), MemoryKind::PinnedHost, M);
    let stream = Stream::new(&primary()).unwrap();
    spin()
        .launch(M)
        .inputs((&a, cycles(50)))
        .stream(&stream)
        .access_mode(AccessMode::Relaxed)
        .run()
        .unwrap();
    let double = KernelSpec::new("double", 1)
        .array::<i32>("x", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                each.run(|t| {
                    let x = args.array::<i32>(0)?;
                    x.set(t.tid(), 2 * x.get(t.tid())?)
                })
            }),
            None,
        );
    double
        .launch(M)
        .inputs((&a,))
        .device("cpu")
        .access_mode(AccessMode::Relaxed)
        .run()
        .unwrap();
    let v = a.to_vec::<i32>().unwrap();
    let bad = wrong(&v, |i| 2 * (i as i32 + 1));
    assert_eq!(
        bad, 0,
        "{bad} of {M} elements were read by the CPU kernel before the GPU wrote them"
    );
}

/// A `cpu_each_fn` body (its arrays decoded once, before its loop) on
/// page-locked or managed memory, of the launch's context or another,
/// waits for a GPU launch queued on that memory: every element it doubles
/// is the GPU's, whatever the memory kind and context.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cpu_each_fn_body_waits_for_gpu_work_on_its_array_in_every_host_memory_kind() {
    const M: usize = 4096;
    let double = KernelSpec::new("double_each", 1)
        .array::<i32>("x", 1)
        .declare()
        .unwrap()
        .with_cpu(
            warp_launch::cpu_each_fn(|args, each| {
                let x = args.array::<i32>(0)?;
                each.run(|t| x.set(t.tid(), 2 * x.get(t.tid())?))
            }),
            None,
        );
    let stream = Stream::new(&primary()).unwrap();
    for kind in [MemoryKind::PinnedHost, MemoryKind::Managed] {
        for (label, ctx) in [("same context", primary()), ("another context", separate())] {
            let a = array_in(&ctx, kind, M);
            spin()
                .launch(M)
                .inputs((&a, cycles(50)))
                .stream(&stream)
                .access_mode(AccessMode::Relaxed)
                .run()
                .unwrap();
            double
                .launch(M)
                .inputs((&a,))
                .device("cpu")
                .access_mode(AccessMode::Relaxed)
                .run()
                .unwrap();
            let v = a.to_vec::<i32>().unwrap();
            let bad = wrong(&v, |i| 2 * (i as i32 + 1));
            assert_eq!(
                bad, 0,
                "{kind}, {label}: {bad} of {M} elements were read by the body before the GPU wrote them"
            );
        }
    }
}

/// A CPU launch on memory lent to cudarc is refused, as GPU work is
/// (74e46c6 ran it).
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cpu_launch_on_memory_lent_to_cudarc_is_refused() {
    let cctx = cudarc::driver::CudaContext::new(0).unwrap();
    let cs = cctx.new_stream().unwrap();
    let a = Array::zeros_dtype_in(DEV, DType::INT32, &[64], MemoryKind::PinnedHost).unwrap();
    let lent = a.to_cudarc::<i32>(&cs).unwrap();
    let cpu = cpu_fill(-1, Arc::new(AtomicBool::new(false)), Arc::new(|| {}));
    let e = cpu
        .launch(64)
        .inputs((&a,))
        .device("cpu")
        .access_mode(AccessMode::Relaxed)
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::Lent { .. }), "{e}");
    drop(lent);
    assert!(a.to_vec::<i32>().unwrap().iter().all(|&x| x == 0));
}
