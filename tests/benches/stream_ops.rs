//! Host cost of a stream-ordered zero + fill + launch sequence with
//! `warp-launch` (`Array::zero_on`, `Array::fill_on`, a recorded `Launch`
//! of Warp's AOT `saxpy`) against the raw driver calls for the same work
//! (`cuMemsetD32Async` twice, `cuLaunchKernel`), measured in the same run,
//! interleaved: queued one by one, and as one CUDA graph
//! (`Graph::capture_with` against a raw `cuStreamBeginCapture` ..
//! `cuGraphInstantiate` graph, each replayed with `cuGraphLaunch`).
//! Results as a Markdown table in `$SDK_BENCH_OUT` (default
//! `bench-results/`).
//!
//! Build with `cargo xtask gpu-bundle`; run on a GPU machine.

use std::path::PathBuf;
use std::time::Instant;

use warp_launch::{AotModule, Array, Device, Graph, Pass, Value};

const BATCH: usize = 200;
const ROUNDS: usize = 41;
const N: usize = 256;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Interleaved rounds of every variant (one batch each per round); per
/// variant: median microseconds per call and the median over rounds of
/// its ratio to the variant `base[i]` of the same round.
fn interleaved(
    stream: &cuda_api::Stream,
    variants: &mut [&mut dyn FnMut()],
    base: &[usize],
) -> Vec<(f64, f64)> {
    for v in variants.iter_mut() {
        for _ in 0..BATCH {
            v();
        }
    }
    stream.synchronize().unwrap();
    let n = variants.len();
    let mut times = vec![Vec::with_capacity(ROUNDS); n];
    let mut ratios = vec![Vec::with_capacity(ROUNDS); n];
    for _ in 0..ROUNDS {
        let mut round = vec![0.0; n];
        for (i, v) in variants.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..BATCH {
                v();
            }
            round[i] = t.elapsed().as_secs_f64() * 1e6 / BATCH as f64;
            stream.synchronize().unwrap();
        }
        for i in 0..n {
            times[i].push(round[i]);
            ratios[i].push(round[i] / round[base[i]]);
        }
    }
    (0..n)
        .map(|i| (median(times[i].clone()), median(ratios[i].clone())))
        .collect()
}

fn check(r: cuda_sys::CUresult, what: &str) {
    assert_eq!(r, cuda_sys::CUresult::CUDA_SUCCESS, "{what}");
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
    let two = Value::of(2.0f32);
    let recorded = saxpy
        .launch(N)
        .inputs((2.0f32, &x, &y))
        .stream(&stream)
        .record_cmd()
        .unwrap();

    // Raw: the same memsets and the same kernel with the same argument bytes.
    let func = saxpy.cuda_function(Pass::Forward).unwrap();
    let grid = recorded.plan().grid;
    let mut raw_args = sdk_tests::warp::RawSaxpy::new(N, 2.0f32, &x, &y);
    let mut params = raw_args.params();
    let handle = func.launch_handle();
    let pp = params.as_mut_ptr();
    let (xd, yd) = (x.data_address(), y.data_address());
    let raw_sequence = |s: cuda_sys::CUstream| {
        // SAFETY: x and y hold N floats and live for the whole bench; the
        // saxpy forward kernel's parameters (bounds, float, array_t,
        // array_t) lie at the addresses above, alive for the calls.
        unsafe {
            check(
                cuda_sys::cuMemsetD32Async(yd, 0, N, s),
                "cuMemsetD32Async y",
            );
            check(
                cuda_sys::cuMemsetD32Async(xd, 2.0f32.to_bits(), N, s),
                "cuMemsetD32Async x",
            );
            check(
                cuda_sys::cuLaunchKernel(
                    handle,
                    grid[0],
                    1,
                    1,
                    256,
                    1,
                    1,
                    0,
                    s,
                    pp,
                    std::ptr::null_mut(),
                ),
                "cuLaunchKernel",
            );
        }
    };
    let raw_stream = stream.raw();

    // The raw graph: the same three calls captured on the bench's stream.
    let mut raw_graph: cuda_sys::CUgraph = std::ptr::null_mut();
    let mut raw_exec: cuda_sys::CUgraphExec = std::ptr::null_mut();
    stream.context().bind().unwrap();
    // SAFETY: the stream is live and not captured; the graph and its
    // executable graph are destroyed at the end of main.
    unsafe {
        check(
            cuda_sys::cuStreamBeginCapture(
                raw_stream,
                cuda_sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            ),
            "cuStreamBeginCapture",
        );
        raw_sequence(raw_stream);
        check(
            cuda_sys::cuStreamEndCapture(raw_stream, &mut raw_graph),
            "cuStreamEndCapture",
        );
        check(
            cuda_sys::cuGraphInstantiate(&mut raw_exec, raw_graph, 0),
            "cuGraphInstantiate",
        );
    }
    let graph = Graph::capture_with(&stream, |g| {
        g.zero(&y)?;
        g.fill(&x, &two)?;
        g.launch(recorded.try_clone()?)
    })
    .unwrap();

    // Same results first: y = 2 * 2 + 0 after each form.
    for run in [
        &mut (|| raw_sequence(raw_stream)) as &mut dyn FnMut(),
        &mut || {
            y.zero_on(&stream).unwrap();
            x.fill_on(&two, &stream).unwrap();
            recorded.launch_on(&stream).unwrap();
        },
        &mut || graph.launch(&stream).unwrap(),
    ] {
        y.fill(&Value::of(-1.0f32)).unwrap();
        run();
        stream.synchronize().unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![4.0f32; N]);
    }

    let mut raw_one = || raw_sequence(raw_stream);
    let mut ours_one = || {
        y.zero_on(&stream).unwrap();
        x.fill_on(&two, &stream).unwrap();
        recorded.launch_on(&stream).unwrap();
    };
    let mut raw_g = || {
        // SAFETY: the executable graph is live; the stream is of its context.
        check(
            unsafe { cuda_sys::cuGraphLaunch(raw_exec, raw_stream) },
            "cuGraphLaunch",
        )
    };
    let mut ours_g = || graph.launch(&stream).unwrap();
    let m = interleaved(
        &stream,
        &mut [&mut raw_one, &mut ours_one, &mut raw_g, &mut ours_g],
        &[0, 0, 2, 2],
    );
    let rows = [
        ("raw: 2 x cuMemsetD32Async + cuLaunchKernel", m[0].0, 1.0),
        (
            "warp-launch: zero_on + fill_on + Launch::launch_on",
            m[1].0,
            m[1].1,
        ),
        ("raw: cuGraphLaunch of the same 3 nodes", m[2].0, 1.0),
        ("warp-launch: Graph::launch (capture_with)", m[3].0, m[3].1),
    ];
    for (name, t, r) in rows {
        println!("bench streams: {name:<52} median {t:.3} us/sequence ({r:.3}x raw)");
    }
    // The launch-cost goals: ratios to the raw sequence and graph.
    const G_ONE_BY_ONE: f64 = 1.05;
    const G_GRAPH: f64 = 1.02;
    let verdict = |met: bool| if met { "ok" } else { "MISSED" };
    println!(
        "bench streams goals: zero + fill + launch one by one <= {G_ONE_BY_ONE}x raw, as one graph <= {G_GRAPH}x raw graph"
    );
    println!(
        "bench streams summary: zero + fill + launch one by one {:.3}x raw {}, as one graph {:.3}x raw graph {}; graph {:.3}x one by one (ours); {ROUNDS} interleaved rounds x {BATCH} sequences, medians of per-round ratios",
        m[1].1,
        verdict(m[1].1 <= G_ONE_BY_ONE),
        m[3].1,
        verdict(m[3].1 <= G_GRAPH),
        m[3].0 / m[1].0
    );
    write_results(&rows);
    // SAFETY: made above, used no more (the stream was synchronised).
    unsafe {
        check(cuda_sys::cuGraphExecDestroy(raw_exec), "cuGraphExecDestroy");
        check(cuda_sys::cuGraphDestroy(raw_graph), "cuGraphDestroy");
    }
}

fn write_results(rows: &[(&str, f64, f64)]) {
    let out = std::env::var_os("SDK_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("bench-results"));
    let mut md = String::from(
        "| sequence (zero + fill + saxpy, 256 floats) | median us | x raw |\n|---|---:|---:|\n",
    );
    for (name, t, r) in rows {
        md += &format!("| {name} | {t:.3} | {r:.3} |\n");
    }
    let ok = std::fs::create_dir_all(&out).is_ok()
        && std::fs::write(out.join("stream_ops.md"), md).is_ok();
    println!(
        "bench streams: results {} in {}",
        if ok { "written" } else { "NOT written" },
        out.display()
    );
}
