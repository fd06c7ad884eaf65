//! Conditional CUDA graphs through warp-launch (Warp's `capture_while` and
//! `capture_if`, [`Graph::build`]): a while loop that runs until a kernel of
//! its body clears the device-side condition, and an if with both outcomes,
//! with Warp kernels (`tests/warp/conditional.py`, compiled by Warp 1.19.0 in
//! `cargo xtask gpu-bundle`). Every value is read back from the GPU.

use sdk_tests::warp::data_dir;
use warp_launch::{AotModule, Array, Device, Graph, GraphStep, Launch, Stream};

fn module() -> AotModule {
    AotModule::load(data_dir().join("conditional"))
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
                vec![add(&m, &x, 1), count_down(&m, &counter, &cond, &log)],
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
            GraphStep::capture_if(&cond, vec![add(&m, &yes, 1)], vec![add(&m, &no, 10)]),
            GraphStep::capture_if(&cond, vec![add(&m, &only_true, 100)], vec![]),
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
        vec![GraphStep::capture_while(&float, vec![add(&m, &x, 1)])],
    )
    .unwrap_err();
    assert!(e.to_string().contains("float32"), "{e}");
    let host = Array::from_slice(Device::Cpu, &[1i32], &[1]).unwrap();
    let e = Graph::build(
        &stream,
        vec![GraphStep::capture_if(&host, vec![add(&m, &x, 1)], vec![])],
    )
    .unwrap_err();
    assert!(e.to_string().contains("is on cpu"), "{e}");
    assert_eq!(x.to_vec::<i32>().unwrap(), vec![0; 4], "nothing ran");
}
