//! One launch road in a loop, for a sampling profiler (`perf record` on
//! the GPU machine): `profile ROAD SECONDS` launches Warp's AOT `saxpy`
//! (or, for the `api*` roads, the CUDA C `saxpy` of `kernels.ptx`) through
//! ROAD for SECONDS, in batches of 500 (`SDK_PROFILE_BATCH`) with a stream synchronisation
//! between batches so the host never waits for a full queue, then prints
//! `profile: ROAD median X us/launch over N launches`.
//!
//! Roads: `raw` (`cuLaunchKernel` with the builder's argument bytes),
//! `builder` (`kernel.launch(..).run()`), `replay` (`Launch::launch_on`),
//! `set_param` (`set_param_by_name` then a replay), `typed`
//! (`Kernel::launch_args`), `typed_replay` (`record_args` replayed),
//! `api_raw` (`cuLaunchKernel` of the CUDA C saxpy), `api`
//! (`TypedKernel::launch`), `api_coop` (`TypedKernel::launch_cooperative`).
//! The `q_*` roads time one driver query per call, no launch:
//! `cuStreamGetCaptureInfo` with every output (`q_capture_info`), with the
//! status and id only (`q_capture_id`), `cuStreamIsCapturing`
//! (`q_is_capturing`) and `cuCtxGetCurrent` (`q_ctx_current`).
//! `raw_q_info`, `raw_q_id` and `raw_q_is` are `raw` with that query
//! before each launch: what asking the driver costs between launches.
//! `raw_ex` and `api_raw_ex` are `raw` and `api_raw` through
//! `cuLaunchKernelEx` with no attributes, the entry point the SDK's
//! launches call. `raw_floor` and `api_floor` are the least a launch
//! must ask under the owners issue's rules, in raw driver calls:
//! `cuStreamIsCapturing`, `cuCtxGetCurrent`, then `cuLaunchKernelEx`; their
//! ratio to `raw` / `api_raw` is the floor of any validated road.
//! `api_fn` is cuda-api's `Function::launch_raw` with the same parameter
//! pointers as `api_raw`: the validated launch without the typed layer.
//! `api_raw_cluster`, `api_floor_cluster`, `api_fn_cluster` and
//! `api_cluster` are the same four steps for a grid of 2 blocks in
//! clusters of 2 (`cuLaunchKernelEx` with the cluster attribute; the floor
//! asks the two queries first). `api_floor_touch16` and
//! `api_floor_touch64` read 16 or 64 cache lines of host memory before
//! each floor launch, and `api_floor_spin` runs a few dozen multiplies:
//! what a given amount of host work costs between two launches. `hot_*`
//! time that work alone, in a loop.
//! The fill roads take the stream-ordered sequence of the `stream_ops`
//! bench apart: `raw_memset` is one `cuMemsetD32Async` of 256 floats,
//! `floor_memset` the same after the two queries of the floor,
//! `api_memset` cuda-api's `Stream::fill_2d_raw` of one row, `zero` and
//! `fill` warp-launch's `Array::zero_on` and `Array::fill_on`, and
//! `raw_seq` / `seq` the whole sequence (two memsets and a launch) raw
//! and through warp-launch.
//! Without arguments every road runs for 0.2 s (what the bundle's run
//! does). `profile first [ROUNDS]` times the phases of a first launch of
//! a fresh kernel, each round on a freshly loaded module: ours
//! (`module.kernel`, then `launch_args`) and the raw driver's
//! (`cuLibraryGetKernel`, `cuKernelGetFunction`, the two function
//! attributes and the parameter queries the SDK asks, `cuLaunchKernel`),
//! and prints the median microseconds of each phase; also the context's
//! function launched through `cuLaunchKernel` and `cuLaunchKernelEx`, the
//! raw sequence right after an `AotModule::load` of the same directory,
//! ours from warp-build's static (no source read), and the bench's first
//! launch: the raw road and ours (from the static, and after a load of the
//! directory) each right after `sdk_tests::warp::settle`; and the raw road
//! settled after two threads were spawned and joined, or after 20 MB of
//! heap was allocated and freed (what a load does before it); and both
//! roads "twin-loaded" as the bench's first launch loads them (the module
//! from the static with its image, then a raw library), then settled.
//! `profile first_only ours|raw [ROUNDS]` runs only that road's settled,
//! twin-loaded first launch, for `perf record`. `profile load
//! [ROUNDS]` times `AotModule::load` and `AotModule::from_embedded` of the
//! 64-kernel module without loading its image (no driver call: it runs
//! without a GPU too). The table of where each road's time goes is
//! `docs/launch-profile.md`.
//!
//! Build with `cargo xtask gpu-bundle`; run on a GPU machine.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use cuda_api::FillWord;
use cuda_api::{ConstDevicePtr, DevicePtr, LaunchConfig, Module};
use warp_launch::{AotModule, Array, Device, Pass, TypedArg, Value};

const BATCH: usize = 500;

/// A road's name and one launch through it.
type Road<'a> = (&'a str, Box<dyn FnMut() + 'a>);
const N: usize = 256;
const ROADS: &[&str] = &[
    "raw",
    "builder",
    "replay",
    "set_param",
    "typed",
    "typed_replay",
    "api_raw",
    "api",
    "api_coop",
    "q_capture_info",
    "q_capture_id",
    "q_is_capturing",
    "q_ctx_current",
    "raw_q_info",
    "raw_q_id",
    "raw_q_is",
    "raw_ex",
    "api_raw_ex",
    "raw_floor",
    "api_floor",
    "api_fn",
    "api_raw_cluster",
    "api_floor_cluster",
    "api_fn_cluster",
    "api_cluster",
    "api_floor_touch16",
    "api_floor_touch64",
    "api_floor_spin",
    "hot_touch16",
    "hot_touch64",
    "hot_spin",
    "raw_memset",
    "floor_memset",
    "api_memset",
    "zero",
    "fill",
    "raw_seq",
    "seq",
];
/// Iterations of [`spin`] in the `*_spin` roads: about 100 ns.
const SPIN: u64 = 80;

/// The raw driver launch every `raw*` road times: `grid` blocks of 256
/// threads of `f` on `stream`.
///
/// # Safety
///
/// `params` holds one pointer per parameter of `f`, each to a live value
/// of that parameter's type.
unsafe fn launch_raw(
    f: cuda_sys::CUfunction,
    grid: u32,
    stream: cuda_sys::CUstream,
    params: *mut *mut c_void,
) {
    // SAFETY: the caller's promise.
    let r = unsafe {
        cuda_sys::cuLaunchKernel(
            f,
            grid,
            1,
            1,
            256,
            1,
            1,
            0,
            stream,
            params,
            std::ptr::null_mut(),
        )
    };
    assert!(r.is_success());
}

/// [`launch_raw`] through `cuLaunchKernelEx` with no attributes.
///
/// # Safety
///
/// As for [`launch_raw`].
unsafe fn launch_raw_ex(
    f: cuda_sys::CUfunction,
    grid: u32,
    stream: cuda_sys::CUstream,
    params: *mut *mut c_void,
) {
    let config = ex_config(grid, stream, &mut []);
    // SAFETY: the caller's promise; `config` outlives the call.
    let r = unsafe { cuda_sys::cuLaunchKernelEx(&config, f, params, std::ptr::null_mut()) };
    assert!(r.is_success());
}

/// The `cuLaunchKernelEx` configuration of `grid` blocks of 256 threads
/// on `stream` with `attrs`, which must outlive its use.
fn ex_config(
    grid: u32,
    stream: cuda_sys::CUstream,
    attrs: &mut [cuda_sys::CUlaunchAttribute],
) -> cuda_sys::CUlaunchConfig {
    cuda_sys::CUlaunchConfig {
        gridDimX: grid,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 256,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        hStream: stream,
        attrs: if attrs.is_empty() {
            std::ptr::null_mut()
        } else {
            attrs.as_mut_ptr()
        },
        numAttrs: attrs.len() as u32,
    }
}

/// `launch_raw_ex` after the two queries every validated launch makes:
/// whether the stream is captured, and which context is current.
///
/// # Safety
///
/// As for `launch_raw_ex`.
unsafe fn launch_floor(
    f: cuda_sys::CUfunction,
    grid: u32,
    stream: cuda_sys::CUstream,
    params: *mut *mut c_void,
) {
    // SAFETY: the caller's promise covers `stream`.
    unsafe { floor_queries(stream) };
    // SAFETY: the caller's promise.
    unsafe { launch_raw_ex(f, grid, stream, params) }
}

/// `cuMemsetD32Async` of `N` zero words at `dst` on `stream`.
///
/// # Safety
///
/// `dst` is the address of `N` words of live device memory, and `stream`
/// a live stream.
unsafe fn memset_raw(dst: cuda_sys::CUdeviceptr, stream: cuda_sys::CUstream) {
    // SAFETY: the caller's promise.
    let r = unsafe { cuda_sys::cuMemsetD32Async(dst, 0, N, stream) };
    assert!(r.is_success());
}

/// The two queries every validated launch makes before it queues:
/// whether `stream` is captured, and which context is current.
///
/// # Safety
///
/// `stream` is a live stream (the driver may crash on a stale handle).
unsafe fn floor_queries(stream: cuda_sys::CUstream) {
    let mut st = cuda_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut c = std::ptr::null_mut();
    // SAFETY: out-pointers to locals; the caller's promise for `stream`.
    unsafe {
        assert!(cuda_sys::cuStreamIsCapturing(stream, &mut st).is_success());
        assert!(cuda_sys::cuCtxGetCurrent(&mut c).is_success());
    }
    std::hint::black_box((st, c));
}

/// `cuLaunchKernelEx` of `grid` blocks in clusters of 2 (compute
/// capability 9.0), after the two queries of [`launch_floor`] when
/// `floor`: the least a validated cluster launch asks of the driver.
///
/// # Safety
///
/// As for [`launch_raw`].
unsafe fn launch_cluster(
    f: cuda_sys::CUfunction,
    stream: cuda_sys::CUstream,
    params: *mut *mut c_void,
    floor: bool,
) {
    let mut attr = cuda_sys::CUlaunchAttribute {
        id: cuda_sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        ..Default::default()
    };
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    let config = ex_config(2, stream, std::slice::from_mut(&mut attr));
    if floor {
        // SAFETY: the caller's promise covers `stream`.
        unsafe { floor_queries(stream) };
    }
    // SAFETY: the caller's promise, with `config` and `attr` alive for the
    // call.
    let r = unsafe { cuda_sys::cuLaunchKernelEx(&config, f, params, std::ptr::null_mut()) };
    assert!(r.is_success());
}

/// Reads one word from each of `lines` cache lines spread over `buf` (a
/// fixed 4-KiB stride, so the same lines every call): what touching that
/// many lines of memory costs between two launches.
fn touch(buf: &[u64], lines: usize) -> u64 {
    let mut sum = 0u64;
    for i in 0..lines {
        sum = sum.wrapping_add(buf[(i * 4096 / 8 + i * 8) % buf.len()]);
    }
    std::hint::black_box(sum)
}

/// About `n` dependent integer operations: a fixed amount of host work
/// that touches no memory.
fn spin(n: u64) -> u64 {
    let mut x = std::hint::black_box(1u64);
    for _ in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    std::hint::black_box(x)
}

/// Runs `f` in batches for `seconds`, synchronising `stream` after each;
/// the median microseconds per call of the batches.
fn run_for(stream: &cuda_api::Stream, seconds: f64, f: &mut dyn FnMut()) -> (f64, usize) {
    let batch = std::env::var("SDK_PROFILE_BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(BATCH);
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut times = Vec::new();
    while Instant::now() < end || times.is_empty() {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        times.push(t.elapsed().as_secs_f64() * 1e6 / batch as f64);
        stream.synchronize().unwrap();
    }
    let launches = times.len() * batch;
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], launches)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "load") {
        let rounds = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(51);
        load_parts(rounds);
        return;
    }
    if args.first().is_some_and(|a| a == "declare") {
        let rounds = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(201);
        declare_only(rounds);
        return;
    }
    if args.first().is_some_and(|a| a == "first_only") {
        let road = args.get(1).map(String::as_str).unwrap_or("ours");
        let rounds = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(101);
        first_only(road, rounds);
        return;
    }
    if args.first().is_some_and(|a| a == "first") {
        let rounds = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(51);
        first_phases(rounds);
        return;
    }
    // `profile interleave ROAD...`: the roads in interleaved rounds, each
    // a ratio to the first road's time in the same round.
    let interleave = args.first().is_some_and(|a| a == "interleave");
    let args: Vec<String> = if interleave { args[1..].to_vec() } else { args };
    let (roads, seconds): (Vec<&str>, f64) = match args.as_slice() {
        _ if interleave => (args.iter().map(String::as_str).collect(), 0.0),
        [road, secs, ..] => (vec![road.as_str()], secs.parse().expect("SECONDS")),
        [road] => (vec![road.as_str()], 2.0),
        [] => (ROADS.to_vec(), 0.2),
    };
    for r in &roads {
        assert!(ROADS.contains(r), "unknown road {r}; roads: {ROADS:?}");
    }

    let dir = sdk_tests::warp::data_dir().join("aot");
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let module =
        unsafe { AotModule::load(&dir) }.expect("Warp AOT module (cargo xtask gpu-bundle)");
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    let ctx = dev.context().unwrap();
    let stream = cuda_api::Stream::new(&ctx).unwrap();
    let x = Array::zeros::<f32>(dev, &[N]).unwrap();
    let y = Array::zeros::<f32>(dev, &[N]).unwrap();
    let two = Value::of(2.0f32);
    let ya = cuda_api::Allocation::zeroed(&ctx, 4 * N, cuda_api::MemoryKind::Device).unwrap();
    let recorded = saxpy
        .launch(N)
        .inputs((2.0f32, &x, &y))
        .stream(&stream)
        .record_cmd()
        .unwrap();
    let grid = recorded.plan().grid;
    let func = saxpy.cuda_function(Pass::Forward).unwrap();
    let mut raw_args = sdk_tests::warp::RawSaxpy::new(N, 2.0f32, &x, &y);
    let mut params = raw_args.params();
    let (handle, raw_stream, pp) = (func.launch_handle(), stream.raw(), params.as_mut_ptr());
    let a_typed = 2.0f32;
    let typed_args = [TypedArg::value(&a_typed), (&x).into(), (&y).into()];
    let typed_recorded = saxpy.record_args(Pass::Forward, N, &typed_args).unwrap();

    let kdir = std::env::var("SDK_TEST_KERNELS").unwrap_or_else(|_| "target/kernels".into());
    let m = Module::from_file(&ctx, format!("{kdir}/kernels.ptx")).unwrap();
    // SAFETY: saxpy(float a, const float *x, float *y, unsigned int n)
    let k = unsafe {
        m.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")
            .unwrap()
    };
    let cx = cuda_api::DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap();
    let cy = cuda_api::DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap();
    let cy2 = std::cell::RefCell::new(cuda_api::DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap());
    let (mut ca, mut cxp, mut cyp, mut cn) =
        (2.0f32, cx.device_address(), cy.device_address(), 0u32);
    let mut cparams: [*mut c_void; 4] = [
        (&mut ca as *mut f32).cast(),
        (&mut cxp as *mut u64).cast(),
        (&mut cyp as *mut u64).cast(),
        (&mut cn as *mut u32).cast(),
    ];
    let (chandle, cpp) = (k.function().launch_handle(), cparams.as_mut_ptr());
    let cfg = LaunchConfig::new(1, 256);
    let cy = std::cell::RefCell::new(cy);
    let cluster_cfg = LaunchConfig::new(2, 256).with_cluster(2);
    let cy3 = std::cell::RefCell::new(cuda_api::DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap());
    // 4 MiB of host memory for the `touch` roads.
    let scattered = vec![1u64; 1 << 19];

    // A second recorded launch for the setter road, so that `replay` and
    // `set_param` can run in one process.
    let set_rec = std::cell::RefCell::new(
        saxpy
            .launch(N)
            .inputs((2.0f32, &x, &y))
            .stream(&stream)
            .record_cmd()
            .unwrap(),
    );
    let mut fns: Vec<Road> = Vec::new();
    for &road in &roads {
        let f: Box<dyn FnMut() + '_> = match road {
            // SAFETY: the saxpy forward kernel's parameters (bounds, float,
            // array_t, array_t) at live locals.
            "raw" => Box::new(|| unsafe { launch_raw(handle, grid[0], raw_stream, pp) }),
            "builder" => Box::new(|| {
                saxpy
                    .launch(N)
                    .inputs((2.0f32, &x, &y))
                    .stream(&stream)
                    .run()
                    .unwrap()
            }),
            "replay" => Box::new(|| recorded.launch_on(&stream).unwrap()),
            "set_param" => Box::new(|| {
                let mut l = set_rec.borrow_mut();
                l.set_param_by_name("a", 2.0f32).unwrap();
                l.launch_on(&stream).unwrap()
            }),
            "typed" => Box::new(|| {
                saxpy
                    .launch_args(Pass::Forward, N, Some(&stream), &typed_args)
                    .unwrap()
            }),
            "typed_replay" => Box::new(|| typed_recorded.launch_on(&stream).unwrap()),
            // SAFETY: the CUDA C saxpy's parameters at live locals.
            "api_raw" => Box::new(|| unsafe { launch_raw(chandle, 1, raw_stream, cpp) }),
            "api" => Box::new(|| {
                k.launch(&stream, cfg, (2.0f32, &cx, &mut *cy.borrow_mut(), 0u32))
                    .unwrap()
            }),
            "api_coop" => Box::new(|| {
                k.launch_cooperative(&stream, cfg, (2.0f32, &cx, &mut *cy2.borrow_mut(), 0u32))
                    .unwrap()
            }),
            "q_capture_info" => Box::new(|| {
                let (mut st, mut id, mut g, mut n) = (
                    cuda_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
                    0u64,
                    std::ptr::null_mut(),
                    0usize,
                );
                // SAFETY: a live stream and out-pointers to locals.
                let r = unsafe {
                    cuda_sys::cuStreamGetCaptureInfo(
                        raw_stream,
                        &mut st,
                        &mut id,
                        &mut g,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        &mut n,
                    )
                };
                assert!(r.is_success());
                std::hint::black_box((st, id, g, n));
            }),
            "q_capture_id" => Box::new(|| {
                let (mut st, mut id) = (
                    cuda_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
                    0u64,
                );
                // SAFETY: a live stream and out-pointers to locals; the
                // other outputs are optional.
                let r = unsafe {
                    cuda_sys::cuStreamGetCaptureInfo(
                        raw_stream,
                        &mut st,
                        &mut id,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                assert!(r.is_success());
                std::hint::black_box((st, id));
            }),
            "q_is_capturing" => Box::new(|| {
                let mut st = cuda_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
                // SAFETY: a live stream and an out-pointer to a local.
                let r = unsafe { cuda_sys::cuStreamIsCapturing(raw_stream, &mut st) };
                assert!(r.is_success());
                std::hint::black_box(st);
            }),
            "q_ctx_current" => Box::new(|| {
                let mut c = std::ptr::null_mut();
                // SAFETY: an out-pointer to a local.
                let r = unsafe { cuda_sys::cuCtxGetCurrent(&mut c) };
                assert!(r.is_success());
                std::hint::black_box(c);
            }),
            "raw_q_info" | "raw_q_id" | "raw_q_is" => Box::new(move || {
                let (mut st, mut id, mut g, mut n) = (
                    cuda_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
                    0u64,
                    std::ptr::null_mut(),
                    0usize,
                );
                // SAFETY: a live stream and out-pointers to locals (the
                // optional ones null where the road asks less); then the
                // saxpy forward kernel's parameters at live locals.
                unsafe {
                    let q = match road {
                        "raw_q_info" => cuda_sys::cuStreamGetCaptureInfo(
                            raw_stream,
                            &mut st,
                            &mut id,
                            &mut g,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            &mut n,
                        ),
                        "raw_q_id" => cuda_sys::cuStreamGetCaptureInfo(
                            raw_stream,
                            &mut st,
                            &mut id,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        ),
                        _ => cuda_sys::cuStreamIsCapturing(raw_stream, &mut st),
                    };
                    assert!(q.is_success());
                    launch_raw(handle, grid[0], raw_stream, pp);
                }
                std::hint::black_box((st, id, g, n));
            }),
            // SAFETY: as for `raw` and `api_raw`.
            "raw_ex" => Box::new(|| unsafe { launch_raw_ex(handle, grid[0], raw_stream, pp) }),
            // SAFETY: as for `api_raw`.
            "api_raw_ex" => Box::new(|| unsafe { launch_raw_ex(chandle, 1, raw_stream, cpp) }),
            // SAFETY: as for `raw_ex` / `api_raw_ex`.
            "raw_floor" => Box::new(|| unsafe { launch_floor(handle, grid[0], raw_stream, pp) }),
            // SAFETY: as for `api_raw_ex`.
            "api_floor" => Box::new(|| unsafe { launch_floor(chandle, 1, raw_stream, cpp) }),
            "api_fn" => Box::new(|| {
                // SAFETY: `cpp` holds the CUDA C saxpy's parameters at live
                // locals, and `cfg` is a plain launch.
                unsafe { k.function().launch_raw(&stream, &cfg, cpp, false) }.unwrap()
            }),
            "api_raw_cluster" => Box::new(|| {
                // SAFETY: as for `api_raw`.
                unsafe { launch_cluster(chandle, raw_stream, cpp, false) }
            }),
            "api_floor_cluster" => Box::new(|| {
                // SAFETY: as for `api_raw`.
                unsafe { launch_cluster(chandle, raw_stream, cpp, true) }
            }),
            // SAFETY: as for `api_fn`; the cluster configuration is checked
            // by the call.
            "api_fn_cluster" => Box::new(|| unsafe {
                k.function()
                    .launch_raw(&stream, &cluster_cfg, cpp, false)
                    .unwrap()
            }),
            "api_cluster" => Box::new(|| {
                k.launch(
                    &stream,
                    cluster_cfg,
                    (2.0f32, &cx, &mut *cy3.borrow_mut(), 0u32),
                )
                .unwrap()
            }),
            // SAFETY: as for `api_floor`.
            "api_floor_touch16" => Box::new(|| unsafe {
                touch(&scattered, 16);
                launch_floor(chandle, 1, raw_stream, cpp)
            }),
            // SAFETY: as for `api_floor`.
            "api_floor_touch64" => Box::new(|| unsafe {
                touch(&scattered, 64);
                launch_floor(chandle, 1, raw_stream, cpp)
            }),
            // SAFETY: as for `api_floor`.
            "api_floor_spin" => Box::new(|| unsafe {
                spin(SPIN);
                launch_floor(chandle, 1, raw_stream, cpp)
            }),
            "hot_touch16" => Box::new(|| {
                touch(&scattered, 16);
            }),
            "hot_touch64" => Box::new(|| {
                touch(&scattered, 64);
            }),
            "hot_spin" => Box::new(|| {
                spin(SPIN);
            }),
            // SAFETY: y holds N floats and lives for the whole run.
            "raw_memset" => Box::new(|| unsafe { memset_raw(y.data_address(), raw_stream) }),
            "floor_memset" => Box::new(|| {
                // SAFETY: as for `raw_memset`; the stream is live.
                unsafe {
                    floor_queries(raw_stream);
                    memset_raw(y.data_address(), raw_stream)
                }
            }),
            "api_memset" => Box::new(|| {
                ya.record_use_on(&stream).unwrap();
                // SAFETY: one row of N words inside `ya`, whose free waits
                // for the stream (the use was noted).
                unsafe { stream.fill_2d_raw(ya.device_address(), 4 * N, FillWord::U32(0), N, 1) }
                    .unwrap()
            }),
            "zero" => Box::new(|| y.zero_on(&stream).unwrap()),
            "fill" => Box::new(|| x.fill_on(&two, &stream).unwrap()),
            "raw_seq" => Box::new(|| {
                // SAFETY: as for `raw_memset` and `raw`.
                unsafe {
                    memset_raw(y.data_address(), raw_stream);
                    memset_raw(x.data_address(), raw_stream);
                    launch_raw(handle, grid[0], raw_stream, pp)
                }
            }),
            "seq" => Box::new(|| {
                y.zero_on(&stream).unwrap();
                x.fill_on(&two, &stream).unwrap();
                recorded.launch_on(&stream).unwrap()
            }),
            _ => unreachable!("checked above"),
        };
        fns.push((road, f));
    }
    if interleave {
        let ratios = interleaved(&stream, &mut fns);
        for ((road, _), (t, r)) in fns.iter().zip(ratios) {
            println!(
                "profile interleaved: {road} median {t:.3} us/launch, {r:.4}x {}",
                roads[0]
            );
        }
        return;
    }
    for (road, f) in &mut fns {
        let (t, launches) = run_for(&stream, seconds, f);
        println!("profile: {road} median {t:.3} us/launch over {launches} launches");
    }
}

/// 41 rounds, each one batch of every road in turn: per road the median
/// microseconds per call and the median over rounds of its ratio to the
/// first road's time in the same round.
fn interleaved(stream: &cuda_api::Stream, fns: &mut [Road<'_>]) -> Vec<(f64, f64)> {
    const ROUNDS: usize = 41;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (_, f) in fns.iter_mut() {
        run_for(stream, 0.05, f);
    }
    let n = fns.len();
    let (mut times, mut ratios) = (vec![Vec::new(); n], vec![Vec::new(); n]);
    for _ in 0..ROUNDS {
        let mut round = vec![0.0; n];
        for (i, (_, f)) in fns.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..BATCH {
                f();
            }
            round[i] = t.elapsed().as_secs_f64() * 1e6 / BATCH as f64;
            stream.synchronize().unwrap();
        }
        for i in 0..n {
            times[i].push(round[i]);
            ratios[i].push(round[i] / round[0]);
        }
    }
    (0..n)
        .map(|i| (median(times[i].clone()), median(ratios[i].clone())))
        .collect()
}

/// `profile first ROUNDS`: the phases of a first launch, ours and raw, in
/// alternating rounds on freshly loaded modules; median microseconds of
/// each phase.
/// What the raw first launch of `profile first` follows.
#[derive(Clone, Copy, PartialEq)]
enum Before {
    /// An `AotModule::load` of the directory, not settled.
    Load,
    /// Nothing but the settle.
    Nothing,
    /// Two threads spawned and joined, then the settle.
    Threads,
    /// 20 MB of heap allocated and freed in 1 KiB pieces, then the settle.
    Heap,
    /// The module from warp-build's static with its image, as ours loads
    /// it, then the raw library and the settle: the bench's first launch.
    Twin,
}

fn first_phases(rounds: usize) {
    let dir = sdk_tests::warp::data_dir().join("aot");
    let image = std::fs::read(dir.join("wp_kernels.sm90.cubin")).unwrap();
    let dev = Device::Cuda(0);
    let ctx = dev.context().unwrap();
    let stream = cuda_api::Stream::new(&ctx).unwrap();
    let x = Array::zeros::<f32>(dev, &[N]).unwrap();
    let y = Array::zeros::<f32>(dev, &[N]).unwrap();
    let a = 2.0f32;
    let us = |t: Instant| t.elapsed().as_secs_f64() * 1e6;
    let names = [
        "ours module.kernel",
        "ours launch_args",
        "ours total",
        "raw cuLibraryGetKernel",
        "raw cuKernelGetFunction",
        "raw 2 attributes",
        "raw param queries (4 + the refused 5th)",
        "raw cuLaunchKernel",
        "raw total",
        "raw cuLibraryGetKernel + cuLaunchKernel only",
        "raw cuLibraryGetKernel + cuKernelGetFunction + cuLaunchKernel(function)",
        "raw cuLibraryGetKernel + cuKernelGetFunction + cuLaunchKernelEx(function)",
        "raw cuLibraryGetKernel + cuLaunchKernel, right after an AotModule::load of the directory",
        "ours, the module from_embedded with carried declarations",
        "raw cuLibraryGetKernel + cuLaunchKernel, settled",
        "ours from_embedded with carried declarations, settled (the bench's first launch)",
        "ours after AotModule::load of the directory, settled",
        "raw cuLibraryGetKernel + cuLaunchKernel, settled after 2 threads spawned and joined",
        "raw cuLibraryGetKernel + cuLaunchKernel, settled after 20 MB of heap allocated and freed",
        "raw, twin-loaded and settled (the bench's first launch)",
        "ours, twin-loaded and settled (the bench's first launch)",
    ];
    let mut t = vec![Vec::new(); names.len()];
    // Warp-build's static of the same module (declarations carried).
    let embedded = &sdk_tests::warp::embedded("aot", "kernels").1;
    for round in 0..rounds {
        // SAFETY: a module directory of the bundle's Warp data.
        let module = unsafe { AotModule::load(&dir) }.unwrap();
        module.image().unwrap();
        let t0 = Instant::now();
        let k = module.kernel("saxpy").unwrap();
        let t1 = us(t0);
        let t2 = Instant::now();
        k.launch_args(
            Pass::Forward,
            N,
            Some(&stream),
            &[TypedArg::value(&a), (&x).into(), (&y).into()],
        )
        .unwrap();
        let (l, total) = (us(t2), us(t0));
        stream.synchronize().unwrap();
        if round > 0 {
            t[0].push(t1);
            t[1].push(l);
            t[2].push(total);
        }
        for (phased, slot) in [(true, 3), (false, 9)] {
            let lib = cuda_api::Library::from_image(&image).unwrap();
            let mut raw_args = sdk_tests::warp::RawSaxpy::new(N, a, &x, &y);
            let mut params = raw_args.params();
            let mut times = [0.0; 6];
            let start = Instant::now();
            let kernel: cuda_sys::CUkernel;
            // SAFETY: the saxpy kernel of a live library; the
            // kernel's function in the current context; its attributes
            // and parameters; then saxpy's parameters at the live
            // locals above.
            unsafe {
                let s = Instant::now();
                kernel = sdk_tests::warp::saxpy_kernel(&lib);
                times[0] = us(s);
                if phased {
                    let s = Instant::now();
                    let mut f: cuda_sys::CUfunction = std::ptr::null_mut();
                    assert!(cuda_sys::cuKernelGetFunction(&mut f, kernel).is_success());
                    times[1] = us(s);
                    let s = Instant::now();
                    let mut v = 0i32;
                    for attr in [
                        cuda_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                        cuda_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    ] {
                        assert!(cuda_sys::cuFuncGetAttribute(&mut v, attr, f).is_success());
                    }
                    times[2] = us(s);
                    let s = Instant::now();
                    for i in 0..5 {
                        let (mut off, mut size) = (0usize, 0usize);
                        let r = cuda_sys::cuKernelGetParamInfo(kernel, i, &mut off, &mut size);
                        assert_eq!(r.is_success(), i < 4);
                    }
                    times[3] = us(s);
                }
                let s = Instant::now();
                let r = cuda_sys::cuLaunchKernel(
                    kernel.cast(),
                    (N as u32).div_ceil(256),
                    1,
                    1,
                    256,
                    1,
                    1,
                    0,
                    stream.raw(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                );
                assert!(r.is_success());
                times[4] = us(s);
            }
            times[5] = us(start);
            stream.synchronize().unwrap();
            if round == 0 {
                continue;
            }
            if phased {
                for (i, v) in times.iter().enumerate() {
                    t[slot + i].push(*v);
                }
            } else {
                t[slot].push(times[5]);
            }
        }
        // The raw road after the same source read as ours (the load that
        // precedes ours' timer): whether the read, not the road, is what
        // the first launch pays for.
        // Also the raw road settled as the bench settles it.
        // And settled after what a load does before it: threads spawned
        // and joined (the body analyses), or heap allocated and freed.
        for (slot, before) in [
            (12, Before::Load),
            (14, Before::Nothing),
            (17, Before::Threads),
            (18, Before::Heap),
            (19, Before::Twin),
        ] {
            // SAFETY: a module directory of the bundle's Warp data.
            let read = (before == Before::Load).then(|| unsafe { AotModule::load(&dir) }.unwrap());
            match before {
                Before::Threads => std::thread::scope(|s| {
                    let spin = || std::hint::black_box((0..200_000u64).sum::<u64>());
                    let h: Vec<_> = (0..2).map(|_| s.spawn(spin)).collect();
                    h.into_iter().for_each(|h| drop(h.join()));
                }),
                Before::Heap => {
                    let v: Vec<Vec<u8>> = (0..20_000).map(|i| vec![i as u8; 1024]).collect();
                    drop(std::hint::black_box(v));
                }
                Before::Load | Before::Nothing | Before::Twin => {}
            }
            let twin = (before == Before::Twin).then(|| {
                let m = AotModule::from_embedded(embedded).unwrap();
                m.image().unwrap();
                m
            });
            let lib = cuda_api::Library::from_image(&image).unwrap();
            let mut raw_args = sdk_tests::warp::RawSaxpy::new(N, a, &x, &y);
            let mut params = raw_args.params();
            if before != Before::Load {
                sdk_tests::warp::settle(&stream);
            }
            let start = Instant::now();
            // SAFETY: the saxpy kernel of a live library; saxpy's
            // parameters at the live locals above.
            unsafe {
                let kernel = sdk_tests::warp::saxpy_kernel(&lib);
                launch_raw(
                    kernel.cast(),
                    (N as u32).div_ceil(256),
                    stream.raw(),
                    params.as_mut_ptr(),
                );
            }
            let dt = us(start);
            stream.synchronize().unwrap();
            drop((read, twin));
            if round > 0 {
                t[slot].push(dt);
            }
        }
        // Ours from warp-build's static (declarations carried: no source
        // read), then settled as the bench's first launch, then after a
        // load of the directory, settled.
        for (slot, settled) in [(13, false), (15, true), (16, true), (20, true)] {
            let module = if slot == 16 {
                // SAFETY: a module directory of the bundle's Warp data.
                unsafe { AotModule::load(&dir) }.unwrap()
            } else {
                AotModule::from_embedded(embedded).unwrap()
            };
            module.image().unwrap();
            // The bench's first launch loads a raw library too (the raw
            // road's), kept until after the launch.
            let twin = (slot == 20).then(|| cuda_api::Library::from_image(&image).unwrap());
            if settled {
                sdk_tests::warp::settle(&stream);
            }
            let start = Instant::now();
            let k = module.kernel("saxpy").unwrap();
            k.launch_args(
                Pass::Forward,
                N,
                Some(&stream),
                &[TypedArg::value(&a), (&x).into(), (&y).into()],
            )
            .unwrap();
            let dt = us(start);
            stream.synchronize().unwrap();
            drop(twin);
            if round > 0 {
                t[slot].push(dt);
            }
        }
        // The handle the SDK launches: the context's function, through
        // either entry point.
        for (ex, slot) in [(false, 10), (true, 11)] {
            let lib = cuda_api::Library::from_image(&image).unwrap();
            let mut raw_args = sdk_tests::warp::RawSaxpy::new(N, a, &x, &y);
            let mut params = raw_args.params();
            let start = Instant::now();
            let kernel: cuda_sys::CUkernel;
            let mut f: cuda_sys::CUfunction = std::ptr::null_mut();
            let grid = (N as u32).div_ceil(256);
            // SAFETY: the saxpy kernel of a live library; its
            // function in the current context; saxpy's parameters at the
            // live locals above.
            unsafe {
                kernel = sdk_tests::warp::saxpy_kernel(&lib);
                assert!(cuda_sys::cuKernelGetFunction(&mut f, kernel).is_success());
                if ex {
                    launch_raw_ex(f, grid, stream.raw(), params.as_mut_ptr());
                } else {
                    launch_raw(f, grid, stream.raw(), params.as_mut_ptr());
                }
            }
            let dt = us(start);
            stream.synchronize().unwrap();
            if round > 0 {
                t[slot].push(dt);
            }
        }
    }
    for (name, mut v) in names.iter().zip(t) {
        v.sort_by(f64::total_cmp);
        println!("profile first: {name} median {:.2} us", v[v.len() / 2]);
    }
}

/// `profile declare ROUNDS`: `module.kernel("saxpy")` on a fresh module
/// from warp-build's static each round (no driver call: it runs without a
/// GPU); median microseconds.
fn declare_only(rounds: usize) {
    let embedded = &sdk_tests::warp::embedded("aot", "kernels").1;
    let mut t = Vec::new();
    for _ in 0..rounds {
        let module = AotModule::from_embedded(embedded).unwrap();
        let start = Instant::now();
        let k = module.kernel("saxpy").unwrap();
        t.push(start.elapsed().as_secs_f64() * 1e6);
        drop(std::hint::black_box(k));
    }
    t.sort_by(f64::total_cmp);
    println!(
        "profile declare: module.kernel median {:.2} us over {rounds} rounds",
        t[t.len() / 2]
    );
}

/// `profile first_only ours|raw ROUNDS`: only the bench's first launch of
/// one road (twin-loaded and settled), ROUNDS times, for `perf record`:
/// the samples outside the loads and the settle are that road's first
/// launch. Prints the median microseconds.
fn first_only(road: &str, rounds: usize) {
    let dir = sdk_tests::warp::data_dir().join("aot");
    let image = std::fs::read(dir.join("wp_kernels.sm90.cubin")).unwrap();
    let dev = Device::Cuda(0);
    let ctx = dev.context().unwrap();
    let stream = cuda_api::Stream::new(&ctx).unwrap();
    let x = Array::zeros::<f32>(dev, &[N]).unwrap();
    let y = Array::zeros::<f32>(dev, &[N]).unwrap();
    let a = 2.0f32;
    let embedded = &sdk_tests::warp::embedded("aot", "kernels").1;
    let mut t = Vec::new();
    for _ in 0..rounds {
        let module = AotModule::from_embedded(embedded).unwrap();
        module.image().unwrap();
        let lib = cuda_api::Library::from_image(&image).unwrap();
        let mut raw_args = sdk_tests::warp::RawSaxpy::new(N, a, &x, &y);
        let mut params = raw_args.params();
        sdk_tests::warp::settle(&stream);
        let start = Instant::now();
        if road == "ours" {
            let k = module.kernel("saxpy").unwrap();
            k.launch_args(
                Pass::Forward,
                N,
                Some(&stream),
                &[TypedArg::value(&a), (&x).into(), (&y).into()],
            )
            .unwrap();
        } else {
            // SAFETY: the saxpy kernel of a live library; saxpy's
            // parameters at the live locals above.
            unsafe {
                let kernel = sdk_tests::warp::saxpy_kernel(&lib);
                launch_raw(
                    kernel.cast(),
                    (N as u32).div_ceil(256),
                    stream.raw(),
                    params.as_mut_ptr(),
                );
            }
        }
        t.push(start.elapsed().as_secs_f64() * 1e6);
        stream.synchronize().unwrap();
    }
    t.sort_by(f64::total_cmp);
    println!(
        "profile first_only: {road} median {:.2} us over {rounds} rounds",
        t[t.len() / 2]
    );
}

/// `profile load ROUNDS`: median milliseconds of `AotModule::load` and
/// `AotModule::from_embedded` of `many/` (64 kernels), the image left
/// unloaded: without carried declarations (Warp's own directory, a static
/// without rules) and with them (as warp-build writes both).
fn load_parts(rounds: usize) {
    let f = sdk_tests::warp::many_forms("profile");
    let mut t = [(); 4].map(|()| Vec::new());
    for _ in 0..rounds {
        for (i, d) in [&f.warp_dir, &f.built_dir].into_iter().enumerate() {
            let s = Instant::now();
            // SAFETY: many/ is one Warp compile (tests/warp/build.py
            // build_many); the copy adds the declarations derived from it.
            let m = unsafe { AotModule::load(d) }.expect("many/ (tests/warp/build.py build_many)");
            t[i].push(s.elapsed().as_secs_f64() * 1e3);
            drop(m);
        }
        for (i, e) in [(2, &f.plain), (3, &f.carried)] {
            let s = Instant::now();
            let m = AotModule::from_embedded(e).unwrap();
            t[i].push(s.elapsed().as_secs_f64() * 1e3);
            drop(m);
        }
    }
    let _ = std::fs::remove_dir_all(&f.built_dir);
    let [a, b, c, d] = t.map(|mut v| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    });
    println!(
        "profile load: 64 kernels, image not loaded, medians: AotModule::load {a:.3} ms, with carried declarations {b:.3} ms; from_embedded {c:.3} ms, with carried declarations {d:.3} ms"
    );
}
