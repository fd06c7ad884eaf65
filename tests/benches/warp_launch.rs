//! Host cost of `warp-launch` launches against the raw `cuLaunchKernel` with
//! the same arguments, measured in the same run: an immediate `launch` of
//! Warp's AOT `saxpy` (bounds + 3 arguments), a `Launch` replay, the
//! positional launches typed launchers make (`Kernel::launch_args`, and
//! `record_args` replayed), and the heap allocations of each; then
//! the load of a module of 64 kernels (Warp's directory, warp-build's
//! directory and static) and the first launch of a fresh kernel against a
//! raw first launch of a fresh function. A first launch is defined as the
//! host time of `module.kernel` + `launch_args` on a module whose image was
//! loaded before the timer (warp-build's static), against
//! `cuLibraryGetKernel` + `cuLaunchKernel` on a library loaded before its
//! timer. Both roads load the same before their timers (the module with its
//! image, then a raw library of the same image; each launches from its
//! own), and both are synchronised and left idle for the same
//! `sdk_tests::warp::SETTLE` right before their timers (`profile first`'s
//! "twin" sequences measure it the same way). The measurement of earlier runs (Warp's
//! directory loaded right before our timer, the raw road not settled) is
//! printed too. Writes the
//! results as a Markdown table and an SVG chart to `$SDK_BENCH_OUT`
//! (default `bench-results/`).
//!
//! Build with `cargo xtask gpu-bundle`; run on a GPU machine.

use std::ffi::c_void;
use std::path::PathBuf;
use std::time::Instant;

use sdk_tests::chart::{Bar, write_bars};
use warp_launch::LaunchBounds1;
use warp_launch::{AotModule, Array, Device, Pass, TypedArg};

#[global_allocator]
static GLOBAL: sdk_tests::alloc::CountingAlloc = sdk_tests::alloc::CountingAlloc;

const BATCH: usize = 500;
const ROUNDS: usize = 41;
const N: usize = 256;

// The launch-cost goals (issue "Launch cost"): ratios to the raw driver
// launch of the same arguments in the same rounds.
const G_BUILDER: f64 = 1.10;
const G_REPLAY: f64 = 1.02;
const G_SET: f64 = 1.05;
const G_TYPED: f64 = 1.03;
const G_FIRST: f64 = 1.05;
const G_LOAD_MS: f64 = 3.0;

/// `ok` when a goal is met, `MISSED` otherwise.
fn verdict(met: bool) -> &'static str {
    if met { "ok" } else { "MISSED" }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median microseconds per call of `f` over ROUNDS batches, and heap
/// allocations per call.
fn measure(stream: &cuda_api::Stream, f: impl FnMut()) -> (f64, f64) {
    measure_batch(stream, BATCH, f)
}

/// As [`measure`] with `batch` calls per round (few, for calls that queue
/// much GPU work, so the host never waits for a full queue while timed).
fn measure_batch(stream: &cuda_api::Stream, batch: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..batch {
        f();
    }
    stream.synchronize().unwrap();
    let mut times = Vec::with_capacity(ROUNDS);
    let mut allocs = 0usize;
    for _ in 0..ROUNDS {
        let a0 = sdk_tests::alloc::allocations();
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        let dt = t.elapsed().as_secs_f64();
        allocs += sdk_tests::alloc::allocations() - a0;
        stream.synchronize().unwrap();
        times.push(dt * 1e6 / batch as f64);
    }
    (median(times), allocs as f64 / (ROUNDS * batch) as f64)
}

/// Interleaved rounds: each round times one batch of every variant in turn,
/// so a slow phase of the machine slows all of them alike. Per variant:
/// median microseconds per call, median over rounds of its ratio to
/// variant 0 in the same round, heap allocations per call.
fn interleaved(
    stream: &cuda_api::Stream,
    variants: &mut [&mut dyn FnMut()],
) -> Vec<(f64, f64, f64)> {
    for v in variants.iter_mut() {
        for _ in 0..BATCH {
            v();
        }
    }
    stream.synchronize().unwrap();
    let n = variants.len();
    let mut times = vec![Vec::with_capacity(ROUNDS); n];
    let mut ratios = vec![Vec::with_capacity(ROUNDS); n];
    let mut allocs = vec![0usize; n];
    for _ in 0..ROUNDS {
        let mut round = vec![0.0; n];
        for (i, v) in variants.iter_mut().enumerate() {
            let a0 = sdk_tests::alloc::allocations();
            let t = Instant::now();
            for _ in 0..BATCH {
                v();
            }
            let dt = t.elapsed().as_secs_f64();
            allocs[i] += sdk_tests::alloc::allocations() - a0;
            stream.synchronize().unwrap();
            round[i] = dt * 1e6 / BATCH as f64;
        }
        for i in 0..n {
            times[i].push(round[i]);
            ratios[i].push(round[i] / round[0]);
        }
    }
    (0..n)
        .map(|i| {
            (
                median(times[i].clone()),
                median(ratios[i].clone()),
                allocs[i] as f64 / (ROUNDS * BATCH) as f64,
            )
        })
        .collect()
}

fn main() {
    let dir = sdk_tests::warp::data_dir().join("aot");
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let module =
        unsafe { AotModule::load(&dir) }.expect("Warp AOT module (cargo xtask gpu-bundle)");
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    let stream = cuda_api::Stream::new(&dev.context().unwrap()).unwrap();
    let x = Array::zeros::<f32>(dev, &[N]).unwrap();
    let y = Array::zeros::<f32>(dev, &[N]).unwrap();

    // Raw: the same kernel and argument bytes through cuLaunchKernel.
    let func = saxpy.cuda_function(warp_launch::Pass::Forward).unwrap();
    let recorded = saxpy
        .launch(N)
        .inputs((2.0f32, &x, &y))
        .stream(&stream)
        .record_cmd()
        .unwrap();
    recorded.launch_on(&stream).unwrap();
    let grid = recorded.plan().grid;
    let mut raw_args = sdk_tests::warp::RawSaxpy::new(N, 2.0f32, &x, &y);
    let mut params = raw_args.params();
    let handle = func.launch_handle();
    let raw_stream = stream.raw();
    let pp = params.as_mut_ptr();
    let raw = || {
        // SAFETY: the saxpy forward kernel's parameters (bounds, float,
        // array_t, array_t) at the addresses above, alive for the calls.
        let r = unsafe {
            cuda_sys::cuLaunchKernel(
                handle,
                grid[0],
                1,
                1,
                256,
                1,
                1,
                0,
                raw_stream,
                pp,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(r, cuda_sys::CUresult::CUDA_SUCCESS);
    };

    let mut raw = raw;
    let mut immediate = || {
        saxpy
            .launch(N)
            .inputs((2.0f32, &x, &y))
            .stream(&stream)
            .run()
            .unwrap();
    };
    let mut replay = || recorded.launch_on(&stream).unwrap();
    // What a typed launcher does: positional arguments, checked without
    // names, written into the kernel's spare argument block.
    let a_typed = 2.0f32;
    let typed_args = [TypedArg::value(&a_typed), (&x).into(), (&y).into()];
    let mut typed = || {
        saxpy
            .launch_args(Pass::Forward, N, Some(&stream), &typed_args)
            .unwrap();
    };
    // A typed launcher's record(): replayed on the bench's stream (the
    // device's default stream is not the one the rounds synchronise).
    let typed_recorded = saxpy.record_args(Pass::Forward, N, &typed_args).unwrap();
    let mut typed_replay = || typed_recorded.launch_on(&stream).unwrap();
    // A replay after a setter by name (`set_param_by_name`, re-checking
    // that argument).
    let mut set_rec = saxpy
        .launch(N)
        .inputs((2.0f32, &x, &y))
        .stream(&stream)
        .record_cmd()
        .unwrap();
    let mut set_param = || {
        set_rec.set_param_by_name("a", 2.0f32).unwrap();
        set_rec.launch_on(&stream).unwrap();
    };
    // A by-value struct argument (kernels.py's use_struct, Params of 20
    // bytes) through its typed launcher, against the raw launch of the
    // same bytes.
    let typed_kernels = sdk_tests::launchers::kernels::Kernels::new(&module).unwrap();
    let params = sdk_tests::launchers::kernels::Params {
        scale: 2.0,
        offset: [1.0, -2.0, 0.5],
        count: 3,
    };
    let sv = warp_launch::TypedArray::<[f32; 3], 1>::zeros(dev, [N]).unwrap();
    let sout = warp_launch::TypedArray::<[f32; 3], 1>::zeros(dev, [N]).unwrap();
    let sfunc = typed_kernels
        .use_struct
        .kernel()
        .cuda_function(Pass::Forward)
        .unwrap();
    let mut sparams_p = params;
    let mut sva = sv.as_array().abi();
    let mut souta = sout.as_array().abi();
    let mut sbounds = raw_args.bounds();
    let mut sparams: [*mut c_void; 4] = [
        (&mut sbounds as *mut LaunchBounds1).cast(),
        (&mut sparams_p as *mut sdk_tests::launchers::kernels::Params).cast(),
        (&mut sva as *mut _ as *mut c_void),
        (&mut souta as *mut _ as *mut c_void),
    ];
    let (shandle, spp) = (sfunc.launch_handle(), sparams.as_mut_ptr());
    let mut struct_raw = || {
        // SAFETY: use_struct's forward parameters (bounds, Params,
        // array_t, array_t) at live locals.
        let r = unsafe {
            cuda_sys::cuLaunchKernel(
                shandle,
                grid[0],
                1,
                1,
                256,
                1,
                1,
                0,
                raw_stream,
                spp,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(r, cuda_sys::CUresult::CUDA_SUCCESS);
    };
    let mut struct_typed = || {
        typed_kernels
            .use_struct
            .launch_on(&stream, N, &params, &sv, &sout)
            .unwrap()
    };
    let m = interleaved(
        &stream,
        &mut [
            &mut raw,
            &mut immediate,
            &mut replay,
            &mut typed,
            &mut typed_replay,
            &mut set_param,
            &mut struct_raw,
            &mut struct_typed,
        ],
    );
    let [
        (t_raw, _, al_raw),
        (t_launch, r_launch, al_launch),
        (t_replay, r_replay, al_replay),
        (t_typed, r_typed, al_typed),
        (t_typed_replay, r_typed_replay, al_typed_replay),
        (t_set, r_set, al_set),
        (t_sraw, r_sraw, _),
        (t_struct, r_struct_raw0, al_struct),
    ] = [m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]];
    // The struct launch against its own raw launch: both ratios are to
    // saxpy's raw launch of the same round.
    let r_struct = r_struct_raw0 / r_sraw;
    // The host work of an immediate launch without the driver call: build
    // and check a Launch, then drop it.
    let (t_build, al_build) = measure(&stream, || {
        let l = saxpy
            .launch(N)
            .inputs((2.0f32, &x, &y))
            .stream(&stream)
            .record_cmd()
            .unwrap();
        std::hint::black_box(&l);
    });
    // Breakdown of that host work: describing the launch only, and building
    // it without the access-mode check.
    let (t_describe, _) = measure(&stream, || {
        let b = saxpy.launch(N).inputs((2.0f32, &x, &y)).stream(&stream);
        std::hint::black_box(&b);
    });
    let (t_relaxed, _) = measure(&stream, || {
        let l = saxpy
            .launch(N)
            .inputs((2.0f32, &x, &y))
            .stream(&stream)
            .access_mode(warp_launch::AccessMode::Relaxed)
            .record_cmd()
            .unwrap();
        std::hint::black_box(&l);
    });
    println!(
        "bench warp: host work breakdown: describe {t_describe:.3} us, build RELAXED {t_relaxed:.3} us, build CHECKED {t_build:.3} us"
    );

    // 100 kernels: one by one (replayed Launches) vs one captured graph.
    const KERNELS: usize = 100;
    let launches: Vec<_> = (0..KERNELS)
        .map(|_| {
            saxpy
                .launch(N)
                .inputs((2.0f32, &x, &y))
                .stream(&stream)
                .record_cmd()
                .unwrap()
        })
        .collect();
    let (t_one_by_one, _) = measure_batch(&stream, 5, || {
        for l in &launches {
            l.launch_on(&stream).unwrap();
        }
    });
    let graph = warp_launch::Graph::capture(&stream, launches).unwrap();
    let (t_graph, al_graph) = measure_batch(&stream, 5, || graph.launch(&stream).unwrap());
    let (t_one, t_g) = (t_one_by_one / KERNELS as f64, t_graph / KERNELS as f64);
    println!(
        "bench warp: {KERNELS} kernels one by one (Launch::launch)       median {t_one:.3} us/kernel"
    );
    println!(
        "bench warp: {KERNELS} kernels as one graph (Graph::launch)      median {t_g:.3} us/kernel ({:.3}x one by one, goal <= 0.5), heap allocations {al_graph:.1}",
        t_g / t_one
    );

    // Ratios of interleaved rounds (median of per-round ratios); the
    // build-only line is its time over the raw median.
    let rows = [
        (
            "raw cuLaunchKernel (Warp saxpy, 4 params)",
            t_raw,
            1.0,
            al_raw,
        ),
        (
            "warp-launch kernel.launch(..).run()",
            t_launch,
            r_launch,
            al_launch,
        ),
        (
            "warp-launch Launch::launch (replay)",
            t_replay,
            r_replay,
            al_replay,
        ),
        (
            "warp-launch build+check only (no driver call)",
            t_build,
            t_build / t_raw,
            al_build,
        ),
        (
            "typed: kernel.launch_args(..) (positional)",
            t_typed,
            r_typed,
            al_typed,
        ),
        (
            "typed: record_args(..) replayed",
            t_typed_replay,
            r_typed_replay,
            al_typed_replay,
        ),
        ("replay + set_param_by_name", t_set, r_set, al_set),
        (
            "raw cuLaunchKernel (use_struct, Params by value)",
            t_sraw,
            1.0,
            0.0,
        ),
        (
            "typed: use_struct.launch_on (vs its raw)",
            t_struct,
            r_struct,
            al_struct,
        ),
    ];
    for (name, t, r, al) in rows {
        println!(
            "bench warp: {name:<44} median {t:.3} us/launch ({r:.3}x raw), heap allocations {al:.1}"
        );
    }
    println!(
        "bench warp goals: builder <= {G_BUILDER}, replay <= {G_REPLAY}, replay + set_param_by_name <= {G_SET}, typed immediate <= {G_TYPED} (by-value struct too), typed replay <= {G_REPLAY}, heap allocations 0"
    );
    println!(
        "bench warp summary: launch {r_launch:.3}x raw {}, replay {r_replay:.3}x raw {}, replay + set_param_by_name {r_set:.3}x raw {}, by-value struct (typed) {r_struct:.3}x its raw {} with {al_struct:.1} heap allocations, replay heap allocations {al_replay:.1} {}; {ROUNDS} interleaved rounds x {BATCH} launches, medians of per-round ratios",
        verdict(r_launch <= G_BUILDER),
        verdict(r_replay <= G_REPLAY),
        verdict(r_set <= G_SET),
        verdict(r_struct <= G_TYPED && al_struct == 0.0),
        verdict(al_replay == 0.0),
    );
    write_results(&rows);

    // Loading a module of 64 kernels (the context exists already).
    let loads = module_load();
    println!(
        "bench typed: loading 64 kernels, image included, medians: AotModule::load of Warp's directory {:.2} ms, of warp-build's (declarations carried) {:.2} ms; from_embedded {:.2} ms, with carried declarations (warp-build's static) {:.2} ms (goal <= {G_LOAD_MS} ms for warp-build's forms; context created before)",
        loads.warp_dir, loads.built_dir, loads.embedded, loads.embedded_carried
    );

    // The first launch of a fresh kernel against a raw first launch: the
    // goal's measurement (warp-build's static, both roads settled), then
    // the definition of earlier runs (Warp's directory, not settled).
    let (t_first, t_first_raw, r_first) = first_launch(&dir, &stream, &x, &y, Load::Static, true);
    let (t_old, t_old_raw, r_old) = first_launch(&dir, &stream, &x, &y, Load::WarpDir, false);
    println!(
        "bench typed: first launch of a fresh kernel of warp-build's static, both roads loading the same (the module with its image, a raw library) and settled ({} ms idle before the timer): module.kernel + launch_args median {t_first:.1} us, raw (cuLibraryGetKernel + cuLaunchKernel) {t_first_raw:.1} us ({r_first:.3}x raw)",
        sdk_tests::warp::SETTLE.as_millis()
    );
    println!(
        "bench typed: first launch as earlier runs measured it (Warp's directory loaded right before our timer, the raw road not settled) median {t_old:.1} us, raw {t_old_raw:.1} us ({r_old:.3}x raw)"
    );
    println!(
        "bench typed goals: immediate <= {G_TYPED}, replay <= {G_REPLAY}, heap allocations 0, AotModule::load of warp-build's directory of 64 kernels and from_embedded of its static <= {G_LOAD_MS} ms (declarations carried; image included), first launch <= {G_FIRST}x raw first launch (both loading the same, settled)"
    );
    println!(
        "bench typed summary: immediate {r_typed:.3}x raw {}, replay {r_typed_replay:.3}x raw {}, heap allocations per launch {al_typed:.1} immediate / {al_typed_replay:.1} replay {}, AotModule::load of 64 kernels {:.2} ms / from_embedded {:.2} ms {} (without carried declarations {:.2} / {:.2} ms), first launch {r_first:.3}x raw first launch {} (as earlier runs measured it {r_old:.3}x); builder launch {r_launch:.3}x raw in the same rounds; {ROUNDS} interleaved rounds x {BATCH} launches, medians of per-round ratios",
        verdict(r_typed <= G_TYPED),
        verdict(r_typed_replay <= G_REPLAY),
        verdict(al_typed == 0.0 && al_typed_replay == 0.0),
        loads.built_dir,
        loads.embedded_carried,
        verdict(loads.built_dir <= G_LOAD_MS && loads.embedded_carried <= G_LOAD_MS),
        loads.warp_dir,
        loads.embedded,
        verdict(r_first <= G_FIRST),
    );
}

/// Median milliseconds of loading the 64-kernel module `many/`, each
/// form timed with its image loaded: `AotModule::load` of Warp's own
/// directory (no carried declarations: the source is read) and of the
/// directory warp-build writes (the same files and
/// `wp_many.rules.json`), and `AotModule::from_embedded` of the same
/// files held in memory, without and with the carried declarations (as
/// warp-build's generated static holds them).
fn module_load() -> Loads {
    let f = sdk_tests::warp::many_forms("bench");
    let mut t = [(); 4].map(|()| Vec::new());
    for _ in 0..21 {
        for (i, d) in [&f.warp_dir, &f.built_dir].into_iter().enumerate() {
            let s = Instant::now();
            // SAFETY: many/ is one Warp compile (tests/warp/build.py
            // build_many); the copy adds the declarations derived from it.
            let m = unsafe { AotModule::load(d) }.expect("many/ (tests/warp/build.py build_many)");
            // The image is loaded on first CUDA use: timed with the load.
            m.image().unwrap();
            t[i].push(s.elapsed().as_secs_f64() * 1e3);
            assert_eq!(m.keys().count(), 64);
        }
        for (i, e) in [(2, &f.plain), (3, &f.carried)] {
            let s = Instant::now();
            let m = AotModule::from_embedded(e).unwrap();
            m.image().unwrap();
            t[i].push(s.elapsed().as_secs_f64() * 1e3);
        }
    }
    let _ = std::fs::remove_dir_all(&f.built_dir);
    let [a, b, c, d] = t.map(median);
    Loads {
        warp_dir: a,
        built_dir: b,
        embedded: c,
        embedded_carried: d,
    }
}

/// Median milliseconds of each form of module load ([`module_load`]).
struct Loads {
    warp_dir: f64,
    built_dir: f64,
    embedded: f64,
    embedded_carried: f64,
}

/// How the first-launch measurement loads its module before the timer.
#[derive(Clone, Copy)]
enum Load {
    /// `AotModule::load` of Warp's own directory: the source is read.
    WarpDir,
    /// `AotModule::from_embedded` of warp-build's static, declarations
    /// carried: no source read.
    Static,
}

/// First launch of saxpy from a freshly loaded module (`from`, loaded and
/// its image loaded before the timer), host time of the call: ours
/// (`module.kernel` declares it, `launch_args` queries its limits and
/// launches) against the raw driver (`cuLibraryGetKernel` and
/// `cuLaunchKernel` on a freshly loaded library of the same image, loaded
/// before its timer), in alternating rounds. When `settled`, both roads
/// load the same before their timers (the module with its image, then a
/// raw library of the same image; each launches from its own) and wait
/// [`sdk_tests::warp::settle`] right before them, so each starts from the
/// same host work and the same idle GPU: that is the first launch the goal
/// covers. Median microseconds of each, and the median of per-round
/// ratios.
fn first_launch(
    dir: &std::path::Path,
    stream: &cuda_api::Stream,
    x: &Array,
    y: &Array,
    from: Load,
    settled: bool,
) -> (f64, f64, f64) {
    // `dir` is the module directory itself (`<data>/aot`).
    let aot = dir.to_path_buf();
    let image = std::fs::read(aot.join("wp_kernels.sm90.cubin")).unwrap();
    let a = 2.0f32;
    let embedded = sdk_tests::warp::embedded("aot", "kernels").1;
    // The module and its image, loaded before our timer.
    let load_module = || {
        let module = match from {
            // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
            Load::WarpDir => unsafe { AotModule::load(&aot) }.unwrap(),
            Load::Static => AotModule::from_embedded(&embedded).unwrap(),
        };
        // The image is loaded on the module's first CUDA use: here, before
        // the timer, as the raw side loads its library before its timer.
        module.image().unwrap();
        module
    };
    // Settled, both roads also load the same before their timers: the
    // module with its image, then a raw library of the same image, each
    // road launching from its own. The host's heap and threads just
    // before a first launch change what the driver's lazy load costs
    // (docs/launch-profile.md), so both start from the same work.
    let ours = || {
        let module = load_module();
        let _twin = settled.then(|| cuda_api::Library::from_image(&image).unwrap());
        if settled {
            sdk_tests::warp::settle(stream);
        }
        let t = Instant::now();
        let k = module.kernel("saxpy").unwrap();
        k.launch_args(
            Pass::Forward,
            N,
            Some(stream),
            &[TypedArg::value(&a), x.into(), y.into()],
        )
        .unwrap();
        let dt = t.elapsed().as_secs_f64() * 1e6;
        stream.synchronize().unwrap();
        dt
    };
    let raw = || {
        let _twin = settled.then(load_module);
        let lib = cuda_api::Library::from_image(&image).unwrap();
        let mut raw_args = sdk_tests::warp::RawSaxpy::new(N, a, x, y);
        let mut params = raw_args.params();
        if settled {
            sdk_tests::warp::settle(stream);
        }
        let t = Instant::now();
        let kernel: cuda_sys::CUkernel;
        // SAFETY: the saxpy kernel of a live library; then the saxpy
        // forward kernel's parameters (bounds, float, array_t, array_t) at
        // the addresses above, alive for the call.
        let r = unsafe {
            kernel = sdk_tests::warp::saxpy_kernel(&lib);
            cuda_sys::cuLaunchKernel(
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
            )
        };
        let dt = t.elapsed().as_secs_f64() * 1e6;
        assert_eq!(r, cuda_sys::CUresult::CUDA_SUCCESS);
        stream.synchronize().unwrap();
        dt
    };
    let (mut t_ours, mut t_raws, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..21 {
        // Alternate which one goes first.
        let (o, r) = if round % 2 == 0 {
            let o = ours();
            (o, raw())
        } else {
            let r = raw();
            (ours(), r)
        };
        t_ours.push(o);
        t_raws.push(r);
        ratios.push(o / r);
    }
    (median(t_ours), median(t_raws), median(ratios))
}

fn write_results(rows: &[(&str, f64, f64, f64)]) {
    let out = std::env::var_os("SDK_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("bench-results"));
    if std::fs::create_dir_all(&out).is_err() {
        eprintln!("bench warp: cannot create {}", out.display());
        return;
    }
    let mut md = String::from(
        "| launch | median us/launch | x raw | heap allocations/launch |\n|---|---:|---:|---:|\n",
    );
    for (name, t, r, al) in rows {
        md += &format!("| {name} | {t:.3} | {r:.3} | {al:.1} |\n");
    }
    // Warp's own Python costs for the same saxpy on the H200 (Warp 1.19.0,
    // measured in an earlier run and recorded in shared/DESIGN.md): the peer.
    md += "| Warp 1.19.0 Python `wp.launch` (peer, earlier run) | 28-31 | - | - |\n\
           | Warp 1.19.0 Python `Launch.launch` (record_cmd; peer, earlier run) | 9.3-10 | - | - |\n";
    let mut bars: Vec<Bar> = rows
        .iter()
        .map(|(name, t, r, _)| Bar {
            label: name.to_string(),
            value: *t,
            note: format!("{r:.2}x raw"),
            peer: false,
        })
        .collect();
    for (label, value, note) in [
        (
            "Warp Python wp.launch (peer)",
            28.0,
            "28-31 us, earlier run",
        ),
        (
            "Warp Python Launch.launch (peer)",
            9.3,
            "9.3-10 us, earlier run",
        ),
    ] {
        bars.push(Bar {
            label: label.into(),
            value,
            note: note.into(),
            peer: true,
        });
    }
    let chart = write_bars(
        &out.join("warp_launch.svg"),
        "Host cost per launch of Warp's saxpy (H200)",
        &bars,
    );
    if let Err(e) = &chart {
        eprintln!("bench warp: chart not drawn: {e}");
    }
    let ok = std::fs::write(out.join("warp_launch.md"), md).is_ok() && chart.is_ok();
    println!(
        "bench warp: results {} in {}",
        if ok { "written" } else { "NOT written" },
        out.display()
    );
}
