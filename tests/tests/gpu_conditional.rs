//! Conditional CUDA graphs through warp-launch (Warp's `capture_while` and
//! `capture_if`, [`Graph::build`]): a while loop that runs until a kernel of
//! its body clears the device-side condition, an if with both outcomes, and
//! nested steps (an if in a while body, a while in a while, a while in an if),
//! with Warp kernels (`tests/warp/conditional.py`, compiled by Warp 1.19.0 in
//! `cargo xtask gpu-bundle`). Every value is read back from the GPU. And a
//! graph's context and ordering, for [`Graph::build`] and
//! [`Graph::capture_with`] alike: a graph on a stream of another context
//! than its launches' is refused, and host reads and frees of a graph's
//! arrays wait for a replay (a slow CUDA C kernel, `wl_spin_fill` of
//! `tests/kernels/warp_header.cu`).

use std::time::{Duration, Instant};

use cuda_api::Context;
use sdk_tests::warp::data_dir;
use warp_launch::{AotModule, Array, Device, Error, Graph, GraphStep, Kernel, Launch, Stream};

fn module() -> AotModule {
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    unsafe { AotModule::load(data_dir().join("conditional")) }
        .expect("conditional.py's AOT module loads (run cargo xtask gpu-bundle)")
}

fn gpu() -> (Device, Stream) {
    let gpu = Device::Cuda(0);
    let stream = Stream::new(&gpu.context().expect("context")).expect("stream");
    (gpu, stream)
}

fn ints(gpu: Device, v: &[i32]) -> Array {
    Array::from_slice(gpu, v, &[v.len()]).unwrap()
}

fn add(m: &AotModule, x: &Array, v: i32) -> Launch {
    m.kernel("add_value")
        .unwrap()
        .launch(x.len())
        .inputs((x, v))
        .record_cmd()
        .unwrap()
}

fn parity(m: &AotModule, counter: &Array, flag: &Array) -> Launch {
    let k = m.kernel("parity").unwrap();
    let b = k.launch(1).inputs((counter, flag));
    // SAFETY: parity runs one thread reading counter[0] and writing flag[0]
    // (each array has an element).
    unsafe { b.unchecked() }.record_cmd().unwrap()
}

fn count_down(m: &AotModule, counter: &Array, cond: &Array, log: &Array) -> Launch {
    let k = m.kernel("count_down").unwrap();
    let b = k.launch(1).inputs((counter, cond, log));
    // SAFETY: count_down runs one thread touching counter[0], cond[0] and
    // log[c - 1] for 0 < c <= log.shape[0] only (each array has those).
    unsafe { b.unchecked() }.record_cmd().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_while_graph_iterates_until_a_kernel_clears_the_device_side_condition() {
    let m = module();
    let (gpu, stream) = gpu();
    let counter = ints(gpu, &[5]);
    let cond = ints(gpu, &[1]);
    let log = ints(gpu, &[0; 8]);
    let x = ints(gpu, &[0; 64]);
    let before = ints(gpu, &[0; 64]);
    let after = ints(gpu, &[0; 64]);
    let graph = Graph::build(
        &stream,
        vec![
            GraphStep::Launch(add(&m, &before, 7)),
            GraphStep::capture_while(
                &cond,
                vec![
                    add(&m, &x, 1).into(),
                    count_down(&m, &counter, &cond, &log).into(),
                ],
            ),
            GraphStep::Launch(add(&m, &after, 3)),
        ],
    )
    .unwrap();
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        counter.to_vec::<i32>().unwrap(),
        vec![0],
        "counter after the loop"
    );
    assert_eq!(
        cond.to_vec::<i32>().unwrap(),
        vec![0],
        "condition after the loop"
    );
    assert_eq!(
        log.to_vec::<i32>().unwrap(),
        vec![1, 2, 3, 4, 5, 0, 0, 0],
        "one log entry per pass, counting 5 down to 1"
    );
    assert_eq!(
        x.to_vec::<i32>().unwrap(),
        vec![5; 64],
        "the body ran 5 times"
    );
    assert_eq!(
        before.to_vec::<i32>().unwrap(),
        vec![7; 64],
        "the launch before the loop ran once"
    );
    assert_eq!(
        after.to_vec::<i32>().unwrap(),
        vec![3; 64],
        "the launch after the loop ran once"
    );

    // The condition is read on the device at every launch of the graph: with
    // the counter at 3 and the condition set again, three more passes.
    counter.copy_from_slice(&[3i32]).unwrap();
    cond.copy_from_slice(&[1i32]).unwrap();
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        x.to_vec::<i32>().unwrap(),
        vec![8; 64],
        "3 more passes on the second launch"
    );
    assert_eq!(counter.to_vec::<i32>().unwrap(), vec![0]);
    // A condition already 0: the body does not run at all.
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        x.to_vec::<i32>().unwrap(),
        vec![8; 64],
        "no pass with the condition at 0"
    );
    assert_eq!(
        before.to_vec::<i32>().unwrap(),
        vec![21; 64],
        "three graph launches"
    );
    println!("capture_while: 5, 3 and 0 passes as the device-side condition said");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_if_graph_takes_the_branch_the_device_side_condition_says() {
    let m = module();
    let (gpu, stream) = gpu();
    let cond = ints(gpu, &[1]);
    let yes = ints(gpu, &[0; 32]);
    let no = ints(gpu, &[0; 32]);
    let only_true = ints(gpu, &[0; 32]);
    let graph = Graph::build(
        &stream,
        vec![
            GraphStep::capture_if(
                &cond,
                vec![add(&m, &yes, 1).into()],
                vec![add(&m, &no, 10).into()],
            ),
            GraphStep::capture_if(&cond, vec![add(&m, &only_true, 100).into()], vec![]),
        ],
    )
    .unwrap();
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        yes.to_vec::<i32>().unwrap(),
        vec![1; 32],
        "condition 1: on_true ran"
    );
    assert_eq!(
        no.to_vec::<i32>().unwrap(),
        vec![0; 32],
        "condition 1: on_false did not run"
    );
    assert_eq!(only_true.to_vec::<i32>().unwrap(), vec![100; 32]);

    // Any nonzero value is true (Warp's rule); 0 takes the other branch.
    for (value, want_yes, want_no, want_only) in [(-4, 2, 0, 200), (0, 2, 10, 200), (0, 2, 20, 200)]
    {
        cond.copy_from_slice(&[value]).unwrap();
        graph.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            yes.to_vec::<i32>().unwrap(),
            vec![want_yes; 32],
            "condition {value}: on_true"
        );
        assert_eq!(
            no.to_vec::<i32>().unwrap(),
            vec![want_no; 32],
            "condition {value}: on_false"
        );
        assert_eq!(
            only_true.to_vec::<i32>().unwrap(),
            vec![want_only; 32],
            "condition {value}: if without else"
        );
    }
    println!("capture_if: both outcomes taken as the device-side condition said");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_condition_that_is_not_one_int32_on_the_device_is_refused() {
    let m = module();
    let (gpu, stream) = gpu();
    let x = ints(gpu, &[0; 4]);
    let float = Array::from_slice(gpu, &[1.0f32], &[1]).unwrap();
    let e = Graph::build(
        &stream,
        vec![GraphStep::capture_while(
            &float,
            vec![add(&m, &x, 1).into()],
        )],
    )
    .unwrap_err();
    assert!(e.to_string().contains("float32"), "{e}");
    let host = Array::from_slice(Device::Cpu, &[1i32], &[1]).unwrap();
    let e = Graph::build(
        &stream,
        vec![GraphStep::capture_if(
            &host,
            vec![add(&m, &x, 1).into()],
            vec![],
        )],
    )
    .unwrap_err();
    assert!(e.to_string().contains("is on cpu"), "{e}");
    // Nested conditions are checked too, named by their step path.
    let ok = ints(gpu, &[1]);
    let e = Graph::build(
        &stream,
        vec![
            add(&m, &x, 1).into(),
            GraphStep::capture_while(
                &ok,
                vec![
                    add(&m, &x, 1).into(),
                    GraphStep::capture_if(
                        &ok,
                        vec![],
                        vec![GraphStep::capture_while(&host, vec![])],
                    ),
                ],
            ),
        ],
    )
    .unwrap_err();
    assert!(
        e.to_string().contains(
            "step 1 > while body step 1 > if on_false step 0: the condition array is on cpu"
        ),
        "{e}"
    );
    assert_eq!(x.to_vec::<i32>().unwrap(), vec![0; 4], "nothing ran");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_if_nested_in_a_while_body_picks_a_kernel_by_a_device_side_flag_on_every_pass() {
    let m = module();
    let (gpu, stream) = gpu();
    let counter = ints(gpu, &[5]);
    let cond = ints(gpu, &[1]);
    let flag = ints(gpu, &[0]);
    let log = ints(gpu, &[0; 8]);
    let odd = ints(gpu, &[0; 32]);
    let even = ints(gpu, &[0; 32]);
    let passes = ints(gpu, &[0]);
    // while cond: count the counter down (clearing cond at 0), flag =
    // counter % 2, count the pass, then if flag: odd += 1 else even += 10.
    let graph = Graph::build(
        &stream,
        vec![
            add(&m, &passes, 100).into(),
            GraphStep::capture_while(
                &cond,
                vec![
                    count_down(&m, &counter, &cond, &log).into(),
                    parity(&m, &counter, &flag).into(),
                    add(&m, &passes, 1).into(),
                    GraphStep::capture_if(
                        &flag,
                        vec![add(&m, &odd, 1).into()],
                        vec![add(&m, &even, 10).into()],
                    ),
                ],
            ),
        ],
    )
    .unwrap();
    // (counter before the launch, odd, even, passes) after each launch: the
    // counter after each pass is 4 3 2 1 0 (odd twice, even three times),
    // then 3 2 1 0 (twice each), then no pass with the condition at 0.
    for (launch, start, want_odd, want_even, want_passes) in [
        (1, Some(5), 2, 30, 105),
        (2, Some(4), 4, 50, 209),
        (3, None, 4, 50, 309),
    ] {
        if let Some(start) = start {
            counter.copy_from_slice(&[start]).unwrap();
            cond.copy_from_slice(&[1i32]).unwrap();
        }
        graph.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        let what = match start {
            Some(s) => format!("launch {launch}, counter from {s}"),
            None => format!("launch {launch}, condition already 0"),
        };
        assert_eq!(
            odd.to_vec::<i32>().unwrap(),
            vec![want_odd; 32],
            "{what}: odd (on_true of the nested if)"
        );
        assert_eq!(
            even.to_vec::<i32>().unwrap(),
            vec![want_even; 32],
            "{what}: even (on_false of the nested if)"
        );
        assert_eq!(
            passes.to_vec::<i32>().unwrap(),
            vec![want_passes],
            "{what}: 100 per launch + 1 per pass"
        );
        assert_eq!(counter.to_vec::<i32>().unwrap(), vec![0], "{what}: counter");
        assert_eq!(cond.to_vec::<i32>().unwrap(), vec![0], "{what}: condition");
        assert_eq!(
            flag.to_vec::<i32>().unwrap(),
            vec![0],
            "{what}: flag (0 % 2)"
        );
    }
    assert_eq!(
        log.to_vec::<i32>().unwrap(),
        vec![1, 2, 3, 4, 5, 0, 0, 0],
        "count_down logged counters 5..1"
    );
    println!("nested if in while: odd 4, even 50, passes 309 after three launches");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_while_nested_in_a_while_runs_its_inner_loop_on_every_outer_pass() {
    let m = module();
    let (gpu, stream) = gpu();
    let outer = ints(gpu, &[4]);
    let outer_cond = ints(gpu, &[1]);
    let outer_log = ints(gpu, &[0; 8]);
    // The inner loop leaves its counter and condition at 0; each outer pass
    // arms it again by adding 3 and 1.
    let inner = ints(gpu, &[0]);
    let inner_cond = ints(gpu, &[0]);
    let inner_log = ints(gpu, &[0; 8]);
    let x = ints(gpu, &[0; 64]);
    let outer_passes = ints(gpu, &[0]);
    let graph = Graph::build(
        &stream,
        vec![GraphStep::capture_while(
            &outer_cond,
            vec![
                add(&m, &inner, 3).into(),
                add(&m, &inner_cond, 1).into(),
                GraphStep::capture_while(
                    &inner_cond,
                    vec![
                        add(&m, &x, 1).into(),
                        count_down(&m, &inner, &inner_cond, &inner_log).into(),
                    ],
                ),
                add(&m, &outer_passes, 1).into(),
                count_down(&m, &outer, &outer_cond, &outer_log).into(),
            ],
        )],
    )
    .unwrap();
    // (outer counter before the launch, x, outer passes): 4 outer passes of
    // 3 inner ones, then 2 more of 3.
    for (launch, start, want_x, want_passes) in [(1, 4, 12, 4), (2, 2, 18, 6)] {
        outer.copy_from_slice(&[start]).unwrap();
        outer_cond.copy_from_slice(&[1i32]).unwrap();
        graph.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        let what = format!("launch {launch}, outer counter from {start}, inner 3 per pass");
        assert_eq!(
            x.to_vec::<i32>().unwrap(),
            vec![want_x; 64],
            "{what}: x (one per inner pass)"
        );
        assert_eq!(
            outer_passes.to_vec::<i32>().unwrap(),
            vec![want_passes],
            "{what}: outer passes"
        );
        assert_eq!(
            outer.to_vec::<i32>().unwrap(),
            vec![0],
            "{what}: outer counter"
        );
        assert_eq!(
            outer_cond.to_vec::<i32>().unwrap(),
            vec![0],
            "{what}: outer condition"
        );
        assert_eq!(
            inner.to_vec::<i32>().unwrap(),
            vec![0],
            "{what}: inner counter"
        );
        assert_eq!(
            inner_cond.to_vec::<i32>().unwrap(),
            vec![0],
            "{what}: inner condition"
        );
        assert_eq!(
            inner_log.to_vec::<i32>().unwrap(),
            vec![1, 2, 3, 0, 0, 0, 0, 0],
            "{what}: the inner count_down logged 3..1"
        );
    }
    assert_eq!(
        outer_log.to_vec::<i32>().unwrap(),
        vec![1, 2, 3, 4, 0, 0, 0, 0],
        "the outer count_down logged 4..1"
    );
    println!("while in while: 4 x 3 then 2 x 3 inner passes");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_while_nested_in_an_if_branch_runs_only_when_the_branch_is_taken() {
    let m = module();
    let (gpu, stream) = gpu();
    let take = ints(gpu, &[1]);
    let counter = ints(gpu, &[3]);
    let cond = ints(gpu, &[1]);
    let log = ints(gpu, &[0; 8]);
    let x = ints(gpu, &[0; 16]);
    let other = ints(gpu, &[0; 16]);
    let graph = Graph::build(
        &stream,
        vec![GraphStep::capture_if(
            &take,
            vec![GraphStep::capture_while(
                &cond,
                vec![
                    add(&m, &x, 1).into(),
                    count_down(&m, &counter, &cond, &log).into(),
                ],
            )],
            vec![add(&m, &other, 5).into()],
        )],
    )
    .unwrap();
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        x.to_vec::<i32>().unwrap(),
        vec![3; 16],
        "take 1: the while ran 3 passes"
    );
    assert_eq!(
        other.to_vec::<i32>().unwrap(),
        vec![0; 16],
        "take 1: on_false did not run"
    );
    // The branch not taken: the loop's condition is set again, but no pass runs.
    take.copy_from_slice(&[0i32]).unwrap();
    counter.copy_from_slice(&[2i32]).unwrap();
    cond.copy_from_slice(&[1i32]).unwrap();
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        x.to_vec::<i32>().unwrap(),
        vec![3; 16],
        "take 0: the while did not run"
    );
    assert_eq!(
        other.to_vec::<i32>().unwrap(),
        vec![5; 16],
        "take 0: on_false ran"
    );
    assert_eq!(
        counter.to_vec::<i32>().unwrap(),
        vec![2],
        "take 0: counter untouched"
    );
    // Taken again: 2 passes.
    take.copy_from_slice(&[7i32]).unwrap();
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        x.to_vec::<i32>().unwrap(),
        vec![5; 16],
        "take 7: 2 more passes"
    );
    assert_eq!(
        other.to_vec::<i32>().unwrap(),
        vec![5; 16],
        "take 7: on_false did not run"
    );
    assert_eq!(cond.to_vec::<i32>().unwrap(), vec![0]);
    println!("while in if: 3, 0 and 2 passes as the branch condition said");
}

/// A stream of a second context on cuda:0, a context of its own (not the
/// primary context the launches are checked for and the arrays live in).
fn foreign_stream(gpu: Device) -> (Context, Stream) {
    let other = Context::new(gpu.context().unwrap().device()).unwrap();
    let stream = Stream::new(&other).unwrap();
    (other, stream)
}

/// The two ways to make a graph of launches.
#[derive(Debug, Clone, Copy)]
enum Make {
    Build,
    CaptureWith,
}

impl Make {
    fn graph(self, stream: &Stream, launch: Launch) -> warp_launch::Result<Graph> {
        match self {
            Make::Build => Graph::build(stream, vec![launch.into()]),
            Make::CaptureWith => Graph::capture_with(stream, |g| g.launch(launch)),
        }
    }
}

/// Elements of the slow tests' arrays.
const SLOW_N: usize = 1 << 20;

/// About `ms` milliseconds of clock64 cycles on cuda:0 (at its top clock:
/// at least that long).
fn cycles(ms: i64) -> i64 {
    let d = cuda_api::CudaDevice::get(0).unwrap();
    let khz = d
        .attribute(cuda_api::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .unwrap() as i64;
    khz * ms
}

/// `wl_spin_fill` over all of `out`: every thread waits about `ms`
/// milliseconds, then writes out[i] = i + 1.
fn spin_fill(k: &Kernel, out: &Array, ms: i64) -> Launch {
    k.launch(out.len())
        .inputs((out, cycles(ms)))
        .record_cmd()
        .unwrap()
}

/// How many elements hold what `wl_spin_fill` writes (i + 1).
fn written(v: &[i32]) -> usize {
    v.iter()
        .enumerate()
        .filter(|&(i, &x)| x as usize == i + 1)
        .count()
}

/// A graph runs in one context, the one its launches were checked for
/// (where their arrays live). On 8fa438c, `Graph::build` and
/// `Graph::capture_with` compared devices only and returned `Ok` here: the
/// graph's replays then ran in the other context, where nothing that waits
/// for the arrays' context (host reads, frees) waits for them.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_graph_on_a_stream_of_another_context_is_refused() {
    let m = module();
    let (gpu, stream) = gpu();
    let (other, foreign) = foreign_stream(gpu);
    let primary = gpu.context().unwrap();
    let x = ints(gpu, &[0; 64]);
    let cond = ints(gpu, &[0]);
    for make in [Make::Build, Make::CaptureWith] {
        let e = make.graph(&foreign, add(&m, &x, 1)).unwrap_err();
        let msg = e.to_string();
        let call = match make {
            Make::Build => "Graph::build",
            Make::CaptureWith => "Graph::capture_with",
        };
        assert!(matches!(e, Error::StreamContext { .. }), "{make:?}: {e}");
        assert!(
            msg.contains(call)
                && msg.contains("'add_value'")
                && msg.contains(&other.to_string())
                && msg.contains(&primary.to_string()),
            "{make:?}: {msg}"
        );
        println!("{make:?} on another context's stream: {msg}");
    }
    // A conditional step alone: the launch that sets its condition is
    // checked for the graph's context too.
    let e = Graph::build(&foreign, vec![GraphStep::capture_while(&cond, vec![])]).unwrap_err();
    assert!(matches!(e, Error::StreamContext { .. }), "{e}");
    // A graph of the device's context: replayed on its own context's
    // stream only.
    let graph = Graph::build(&stream, vec![add(&m, &x, 1).into()]).unwrap();
    let e = graph.launch(&foreign).unwrap_err();
    assert!(
        matches!(e, Error::StreamContext { .. }) && e.to_string().contains("Graph::launch"),
        "{e}"
    );
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(x.to_vec::<i32>().unwrap(), vec![1; 64], "nothing else ran");
}

/// A host read right after a replay of a slow kernel waits for it, as
/// after a launch: each replay notes the graph's arrays as used on its
/// stream. The graph is tried on another context's stream first, where it
/// must be refused: on 8fa438c it was made, and a read right after its
/// replay saw 0 of 1,048,576 elements written (the read waited for the
/// arrays' context, not the graph's).
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_host_read_right_after_a_replay_sees_every_write() {
    let k = sdk_tests::warp::header_kernels().unwrap().spin_fill;
    let (gpu, stream) = gpu();
    let (_other, foreign) = foreign_stream(gpu);
    for make in [Make::Build, Make::CaptureWith] {
        for (place, s) in [
            ("another context", &foreign),
            ("the device's context", &stream),
        ] {
            let out = Array::zeros::<i32>(gpu, &[SLOW_N]).unwrap();
            let graph = match make.graph(s, spin_fill(&k, &out, 50)) {
                Ok(graph) => graph,
                Err(e) => {
                    assert!(
                        std::ptr::eq(s, &foreign) && matches!(e, Error::StreamContext { .. }),
                        "{make:?} on {place}: {e}"
                    );
                    continue;
                }
            };
            graph.launch(s).unwrap();
            // No synchronize.
            let n = written(&out.to_vec::<i32>().unwrap());
            assert_eq!(
                n, SLOW_N,
                "{make:?} on {place}: a read right after the replay saw {n} of {SLOW_N} written"
            );
            println!("{make:?} on {place}: the read right after the replay saw all {n} writes");
        }
    }
}

/// Dropping a graph and its array right after a replay of a slow kernel
/// waits for the replay (the array's free waits, as after a launch; the
/// executable graph the driver frees when the replay ends), so new arrays
/// are not written by it. On 8fa438c the graph on another context's stream
/// was made; dropping it and its array took 0.3 ms while the kernel still
/// ran, and all 1,048,576 late writes landed in newly allocated arrays.
#[test]
#[ignore = "needs a CUDA GPU"]
fn dropping_a_graph_and_its_array_during_a_replay_waits_for_it() {
    let k = sdk_tests::warp::header_kernels().unwrap().spin_fill;
    let (gpu, stream) = gpu();
    let (_other, foreign) = foreign_stream(gpu);
    for make in [Make::Build, Make::CaptureWith] {
        for (place, s) in [
            ("another context", &foreign),
            ("the device's context", &stream),
        ] {
            let out = Array::zeros::<i32>(gpu, &[SLOW_N]).unwrap();
            let graph = match make.graph(s, spin_fill(&k, &out, 50)) {
                Ok(graph) => graph,
                Err(e) => {
                    assert!(
                        std::ptr::eq(s, &foreign) && matches!(e, Error::StreamContext { .. }),
                        "{make:?} on {place}: {e}"
                    );
                    continue;
                }
            };
            let t = Instant::now();
            graph.launch(s).unwrap();
            drop(graph);
            drop(out);
            // From the replay's start (a tool that serialises launches may
            // hold the launch call itself until the replay ends).
            let waited = t.elapsed();
            // Likely in the memory just freed.
            let fresh: Vec<Array> = (0..8)
                .map(|_| Array::zeros::<i32>(gpu, &[SLOW_N]).unwrap())
                .collect();
            s.synchronize().unwrap();
            let late: usize = fresh
                .iter()
                .map(|a| {
                    a.to_vec::<i32>()
                        .unwrap()
                        .iter()
                        .filter(|&&v| v != 0)
                        .count()
                })
                .sum();
            assert_eq!(
                late, 0,
                "{make:?} on {place}: {late} late writes of the replay landed in new arrays (the drop took {waited:?})"
            );
            // Every thread spins 50 ms at least before it writes: the
            // replay had ended when the drop returned (the array's free
            // waited for it).
            assert!(
                waited >= Duration::from_millis(25),
                "{make:?} on {place}: the replay and the drop took {waited:?}, less than the replay runs"
            );
            println!("{make:?} on {place}: the replay and the drop took {waited:?}; no late write");
        }
    }
}
