//! cuda-api's safe CUDA graphs on a real GPU: capture, instantiate, launch
//! and upload; kernel nodes listed; in-place kernel updates checked like a
//! launch; child graphs; conditional if and while nodes, nested ones built
//! in place, and bodies of two graphs built in nested closures. Kernels from `tests/kernels/graph.cu` (`cargo xtask gpu-bundle`).

use cuda_api::{
    CaptureMode, ConditionalBody, Context, CudaDevice, CudaError, CudaGraph, CudaResult,
    DeviceBuffer, DevicePtr, Event, Extent, GraphNode, LaunchConfig, Library, Module, Stream,
    TypedKernel,
};

type AddStep = (DevicePtr<i32>, i32, u32);
type CountDown = (u64, DevicePtr<u32>, DevicePtr<u32>, u32);
type SetCondition = (u64, cuda_api::ConstDevicePtr<i32>);

fn setup() -> (Context, Stream, Module) {
    let ctx = Context::primary(&CudaDevice::get(0).expect("device 0")).expect("primary context");
    let stream = Stream::new(&ctx).expect("stream");
    let ptx = std::fs::read_to_string(sdk_tests::kernels_dir().join("graph.ptx"))
        .expect("graph.ptx (run cargo xtask gpu-bundle)");
    let module = Module::from_ptx(&ctx, &ptx).expect("graph.ptx loads");
    (ctx, stream, module)
}

fn add_step(module: &Module) -> TypedKernel<AddStep> {
    // SAFETY: add_step(int *data, int step, unsigned n) touches data[i] for i < n only.
    unsafe { module.kernel::<AddStep>("add_step") }
        .unwrap()
        .bound(0, Extent::Param(2))
        .unwrap()
}

const N: u32 = 256;

fn cfg(n: u32) -> LaunchConfig {
    LaunchConfig::for_elements(n, 128)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn capture_instantiate_upload_launch_and_list_kernel_nodes() {
    let (ctx, stream, module) = setup();
    let k = add_step(&module);
    let mut data = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    let other_stream = stream.clone();
    let event = Event::new(&ctx).unwrap();
    let mut spare = DeviceBuffer::<i32>::zeroed(&ctx, 4).unwrap();
    {
        let mut args = k.as_dyn().args();
        args.push(&mut data)
            .unwrap()
            .push(1i32)
            .unwrap()
            .push(N)
            .unwrap();
        let graph = stream
            .capture(CaptureMode::ThreadLocal, |c| -> cuda_api::CudaResult<()> {
                c.launch(k.as_dyn(), cfg(N), &args)?;
                // Work queued on the captured stream any other way is refused
                // before the driver sees it (and the capture goes on).
                let e = k.as_dyn().launch(&other_stream, cfg(N), &args).unwrap_err();
                assert!(matches!(e, CudaError::InvalidArgument { .. }), "{e}");
                let e = event.record(&other_stream).unwrap_err();
                assert!(e.to_string().contains("captured"), "{e}");
                let e = other_stream.scope(|_| Ok(())).unwrap_err();
                assert!(matches!(e, CudaError::InvalidArgument { .. }), "{e}");
                // A memset would become a node the graph does not keep alive.
                let e = spare.fill_async(7, &other_stream).unwrap_err();
                assert!(e.to_string().contains("captured"), "{e}");
                c.launch(k.as_dyn(), cfg(N), &args)?;
                Ok(())
            })
            .unwrap();
        assert!(!stream.is_capturing());
        let nodes = graph.kernel_nodes().unwrap();
        assert_eq!(nodes.len(), 2, "{nodes:?}");
        for n in &nodes {
            assert_eq!(n.name(), "add_step");
            assert_eq!(n.config().grid.x, 2);
            assert_eq!(n.config().block.x, 128);
        }
        let exec = graph.instantiate().unwrap();
        exec.upload(&stream).unwrap();
        exec.launch(&stream).unwrap();
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
    }
    // Two nodes, each adding 1, launched twice.
    assert_eq!(data.to_vec().unwrap(), vec![4; N as usize]);
    // The stream works normally again after the capture.
    k.launch(&stream, cfg(N), (&mut data, 1, N)).unwrap();
    assert_eq!(data.to_vec().unwrap(), vec![5; N as usize]);
    // The legacy default stream cannot be captured.
    let e = ctx
        .default_stream()
        .capture(CaptureMode::Global, |_| Ok::<(), CudaError>(()))
        .unwrap_err();
    assert!(e.to_string().contains("legacy default stream"), "{e}");
    // A failing closure ends the capture and returns its error.
    let e = stream
        .capture(CaptureMode::Relaxed, |_| {
            Err::<(), CudaError>(CudaError::invalid_argument(
                "test",
                "closure",
                "fails".into(),
            ))
        })
        .unwrap_err();
    assert!(e.to_string().contains("fails"), "{e}");
    assert!(!stream.is_capturing());
    k.launch(&stream, cfg(N), (&mut data, 1, N)).unwrap();
    assert_eq!(data.to_vec().unwrap(), vec![6; N as usize]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn kernel_updates_are_checked_like_launches_and_change_the_result() {
    let (ctx, stream, module) = setup();
    let k = add_step(&module);
    let mut data = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    let mut other = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    let mut small = DeviceBuffer::<i32>::zeroed(&ctx, 64).unwrap();
    {
        let mut args = k.as_dyn().args();
        args.push(&mut data)
            .unwrap()
            .push(1i32)
            .unwrap()
            .push(N)
            .unwrap();
        let mut node = None;
        let graph = stream
            .capture(CaptureMode::ThreadLocal, |c| -> cuda_api::CudaResult<()> {
                node = Some(c.launch(k.as_dyn(), cfg(N), &args)?);
                Ok(())
            })
            .unwrap();
        let node = node.unwrap();
        assert_eq!(graph.kernel_nodes().unwrap()[0].node(), node);
        let mut exec = graph.instantiate().unwrap();

        // Refused: 128 elements asked of a 64-element buffer (the bound).
        let mut bad = k.as_dyn().args();
        bad.push(&mut small)
            .unwrap()
            .push(5i32)
            .unwrap()
            .push(128u32)
            .unwrap();
        let e = exec
            .update_kernel(&node, k.as_dyn(), cfg(128), &bad)
            .unwrap_err();
        println!("refused update: {e}");
        assert!(matches!(e, CudaError::Launch(_)), "{e}");
        // Refused: a block missing an argument.
        let mut partial = k.as_dyn().args();
        partial.push(5i32).ok();
        let e = exec
            .update_kernel(&node, k.as_dyn(), cfg(N), &partial)
            .unwrap_err();
        assert!(matches!(e, CudaError::Argument(_)), "{e}");
        // Refused: a node of another graph.
        let mut elsewhere = CudaGraph::new(&ctx).unwrap();
        let child = elsewhere.add_child_graph(&graph, &[]).unwrap();
        let e = exec
            .update_kernel(&child, k.as_dyn(), cfg(N), &args)
            .unwrap_err();
        assert!(matches!(e, CudaError::InvalidArgument { .. }), "{e}");
        // Refused: a zero grid.
        let e = exec
            .update_kernel(&node, k.as_dyn(), LaunchConfig::new(0, 128), &args)
            .unwrap_err();
        assert!(matches!(e, CudaError::Launch(_)), "{e}");

        // The refusals left the node as it was.
        exec.launch(&stream).unwrap();
        // A good update: step 10 over the first 128 elements of `other`.
        let mut good = k.as_dyn().args();
        good.push(&mut other)
            .unwrap()
            .push(10i32)
            .unwrap()
            .push(128u32)
            .unwrap();
        exec.update_kernel(&node, k.as_dyn(), cfg(128), &good)
            .unwrap();
        drop(good); // the executable graph keeps its own copy of the bytes
        exec.launch(&stream).unwrap();
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
    }
    assert_eq!(data.to_vec().unwrap(), vec![1; N as usize]);
    let got = other.to_vec().unwrap();
    assert!(got[..128].iter().all(|&v| v == 20), "{got:?}");
    assert!(got[128..].iter().all(|&v| v == 0), "{got:?}");
    assert_eq!(small.to_vec().unwrap(), vec![0; 64]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn library_kernels_are_listed_and_updated() {
    let (ctx, stream, _module) = setup();
    let cubin = std::fs::read(sdk_tests::kernels_dir().join("graph.cubin")).unwrap();
    let library = Library::from_image(&cubin).unwrap();
    // SAFETY: as in `add_step`.
    let k = unsafe { library.kernel::<AddStep>("add_step") }
        .unwrap()
        .bound(0, Extent::Param(2))
        .unwrap();
    let mut data = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    let mut other = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    {
        let mut args = k.as_dyn().args();
        args.push(&mut data)
            .unwrap()
            .push(2i32)
            .unwrap()
            .push(N)
            .unwrap();
        let graph = stream
            .capture(CaptureMode::Global, |c| {
                c.launch(k.as_dyn(), cfg(N), &args).map(|_| ())
            })
            .unwrap();
        let nodes = graph.kernel_nodes().unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].name(), "add_step");
        let mut exec = graph.instantiate().unwrap();
        exec.launch(&stream).unwrap();
        let mut good = k.as_dyn().args();
        good.push(&mut other)
            .unwrap()
            .push(3i32)
            .unwrap()
            .push(N)
            .unwrap();
        exec.update_kernel(&nodes[0].node(), k.as_dyn(), cfg(N), &good)
            .unwrap();
        exec.launch(&stream).unwrap();
    }
    assert_eq!(data.to_vec().unwrap(), vec![2; N as usize]);
    assert_eq!(other.to_vec().unwrap(), vec![3; N as usize]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn child_graphs_run_in_dependency_order() {
    let (ctx, stream, module) = setup();
    let k = add_step(&module);
    let mut data = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    {
        let mut args = k.as_dyn().args();
        args.push(&mut data)
            .unwrap()
            .push(3i32)
            .unwrap()
            .push(N)
            .unwrap();
        let child = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(k.as_dyn(), cfg(N), &args).map(|_| ())
            })
            .unwrap();
        let mut parent = CudaGraph::new(&ctx).unwrap();
        let first = parent.add_child_graph(&child, &[]).unwrap();
        let second = parent.add_child_graph(&child, &[first]).unwrap();
        parent.add_child_graph(&child, &[second]).unwrap();
        // A node of another graph is no dependency here.
        let foreign = child.kernel_nodes().unwrap()[0].node();
        let e = parent.add_child_graph(&child, &[foreign]).unwrap_err();
        assert!(matches!(e, CudaError::InvalidArgument { .. }), "{e}");
        // Only the top level is listed: the kernels are inside the children.
        assert!(parent.kernel_nodes().unwrap().is_empty());
        let exec = parent.instantiate().unwrap();
        exec.launch(&stream).unwrap();
    }
    assert_eq!(data.to_vec().unwrap(), vec![9; N as usize]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn if_nodes_run_their_body_when_the_condition_holds() {
    let (ctx, stream, module) = setup();
    let k = add_step(&module);
    // SAFETY: set_condition(handle, const int *flag) reads flag[0] only.
    let set = unsafe { module.kernel::<SetCondition>("set_condition") }
        .unwrap()
        .bound(1, Extent::Elements(1))
        .unwrap();
    let mut ran = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    let mut skipped = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    let one = DeviceBuffer::from_slice(&ctx, &[1i32]).unwrap();
    {
        // Set on the device from a flag of 1: the body runs.
        let mut g = CudaGraph::new(&ctx).unwrap();
        let cond = g.condition(None).unwrap();
        let mut set_args = set.as_dyn().args();
        set_args.push(cond.raw()).unwrap().push(&one).unwrap();
        let setter = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(set.as_dyn(), LaunchConfig::new(1, 32), &set_args)
                    .map(|_| ())
            })
            .unwrap();
        let mut body_args = k.as_dyn().args();
        body_args
            .push(&mut ran)
            .unwrap()
            .push(1i32)
            .unwrap()
            .push(N)
            .unwrap();
        let body = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(k.as_dyn(), cfg(N), &body_args).map(|_| ())
            })
            .unwrap();
        let first = g.add_child_graph(&setter, &[]).unwrap();
        g.add_if(&cond, &body, &[first]).unwrap();

        // A default of 0 and nothing setting it: the body never runs.
        let mut h = CudaGraph::new(&ctx).unwrap();
        let off = h.condition(Some(0)).unwrap();
        // A condition of another graph is refused.
        let e = h.add_if(&cond, &body, &[]).unwrap_err();
        assert!(matches!(e, CudaError::InvalidArgument { .. }), "{e}");
        let mut skip_args = k.as_dyn().args();
        skip_args
            .push(&mut skipped)
            .unwrap()
            .push(1i32)
            .unwrap()
            .push(N)
            .unwrap();
        let skip_body = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(k.as_dyn(), cfg(N), &skip_args).map(|_| ())
            })
            .unwrap();
        h.add_if(&off, &skip_body, &[]).unwrap();

        let (ge, he) = (g.instantiate().unwrap(), h.instantiate().unwrap());
        for _ in 0..2 {
            ge.launch(&stream).unwrap();
            he.launch(&stream).unwrap();
        }
    }
    assert_eq!(ran.to_vec().unwrap(), vec![2; N as usize]);
    assert_eq!(skipped.to_vec().unwrap(), vec![0; N as usize]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn while_nodes_repeat_their_body_until_a_kernel_clears_the_condition() {
    let (ctx, stream, module) = setup();
    // SAFETY: count_down(handle, unsigned *counter, unsigned *log, unsigned len)
    // touches counter[0] and log[i] for i < len only.
    let k = unsafe { module.kernel::<CountDown>("count_down") }
        .unwrap()
        .bound(1, Extent::Elements(1))
        .unwrap()
        .bound(2, Extent::Param(3))
        .unwrap();
    let mut counter = DeviceBuffer::from_slice(&ctx, &[5u32]).unwrap();
    let mut log = DeviceBuffer::<u32>::zeroed(&ctx, 8).unwrap();
    {
        let mut g = CudaGraph::new(&ctx).unwrap();
        let cond = g.condition(Some(1)).unwrap();
        let mut args = k.as_dyn().args();
        args.push(cond.raw())
            .unwrap()
            .push(&mut counter)
            .unwrap()
            .push(&mut log)
            .unwrap()
            .push(8u32)
            .unwrap();
        let body = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(k.as_dyn(), LaunchConfig::new(1, 32), &args)
                    .map(|_| ())
            })
            .unwrap();
        g.add_while(&cond, &body, &[]).unwrap();
        g.instantiate().unwrap().launch(&stream).unwrap();
    }
    assert_eq!(counter.to_vec().unwrap(), vec![0]);
    assert_eq!(log.to_vec().unwrap(), vec![1, 2, 3, 4, 5, 0, 0, 0]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn conditional_bodies_built_in_place_hold_nested_if_nodes() {
    let (ctx, stream, module) = setup();
    let k = add_step(&module);
    // SAFETY: count_down(handle, unsigned *counter, unsigned *log, unsigned len)
    // touches counter[0] and log[i] for i < len only.
    let count = unsafe { module.kernel::<CountDown>("count_down") }
        .unwrap()
        .bound(1, Extent::Elements(1))
        .unwrap()
        .bound(2, Extent::Param(3))
        .unwrap();
    // SAFETY: set_condition(handle, const int *flag) reads flag[0] only.
    let set = unsafe { module.kernel::<SetCondition>("set_condition") }
        .unwrap()
        .bound(1, Extent::Elements(1))
        .unwrap();
    let mut counter = DeviceBuffer::from_slice(&ctx, &[4u32]).unwrap();
    let mut log = DeviceBuffer::<u32>::zeroed(&ctx, 8).unwrap();
    let mut ran = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    let mut skipped = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    let one = DeviceBuffer::from_slice(&ctx, &[1i32]).unwrap();
    let zero = DeviceBuffer::from_slice(&ctx, &[0i32]).unwrap();
    {
        let mut g = CudaGraph::new(&ctx).unwrap();
        let outer = g.condition(Some(1)).unwrap();
        let mut count_args = count.as_dyn().args();
        count_args
            .push(outer.raw())
            .unwrap()
            .push(&mut counter)
            .unwrap()
            .push(&mut log)
            .unwrap()
            .push(8u32)
            .unwrap();
        let counting = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(count.as_dyn(), LaunchConfig::new(1, 32), &count_args)
                    .map(|_| ())
            })
            .unwrap();
        let mut ran_args = k.as_dyn().args();
        ran_args
            .push(&mut ran)
            .unwrap()
            .push(1i32)
            .unwrap()
            .push(N)
            .unwrap();
        let ran_body = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(k.as_dyn(), cfg(N), &ran_args).map(|_| ())
            })
            .unwrap();
        let mut skip_args = k.as_dyn().args();
        skip_args
            .push(&mut skipped)
            .unwrap()
            .push(1i32)
            .unwrap()
            .push(N)
            .unwrap();
        let skip_body = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(k.as_dyn(), cfg(N), &skip_args).map(|_| ())
            })
            .unwrap();
        // while outer (4 passes): count down; if (one) ran += 1, built in
        // place; if (zero) skipped += 1, a copied body. Each nested
        // condition is made by the body and set by a kernel inside it.
        g.add_while_with(&outer, &[], |b| -> cuda_api::CudaResult<()> {
            let first = b.add_child_graph(&counting, &[])?;
            let (yes, no) = (b.condition(None)?, b.condition(None)?);
            // A condition of the enclosing graph is refused for a nested node.
            let e = b.add_if(&outer, &ran_body, &[first]).unwrap_err();
            assert!(matches!(e, CudaError::InvalidArgument { .. }), "{e}");
            let mut set_yes = set.as_dyn().args();
            set_yes.push(yes.raw())?.push(&one)?;
            let mut set_no = set.as_dyn().args();
            set_no.push(no.raw())?.push(&zero)?;
            let setters = stream.capture(CaptureMode::ThreadLocal, |c| {
                c.launch(set.as_dyn(), LaunchConfig::new(1, 32), &set_yes)?;
                c.launch(set.as_dyn(), LaunchConfig::new(1, 32), &set_no)
                    .map(|_| ())
            })?;
            let set_node = b.add_child_graph(&setters, &[first])?;
            let if_node = b.add_if_with(&yes, &[set_node], |inner| {
                inner.add_child_graph(&ran_body, &[]).map(|_| ())
            })?;
            b.add_if(&no, &skip_body, &[if_node])?;
            Ok(())
        })
        .unwrap();
        let exec = g.instantiate().unwrap();
        exec.launch(&stream).unwrap();
        stream.synchronize().unwrap();
    }
    assert_eq!(counter.to_vec().unwrap(), vec![0], "counter after 4 passes");
    assert_eq!(
        log.to_vec().unwrap(),
        vec![1, 2, 3, 4, 0, 0, 0, 0],
        "count_down logged 4..1"
    );
    assert_eq!(
        ran.to_vec().unwrap(),
        vec![4; N as usize],
        "the nested if on a flag of 1 ran on each of the 4 passes"
    );
    assert_eq!(
        skipped.to_vec().unwrap(),
        vec![0; N as usize],
        "the nested if on a flag of 0 never ran"
    );
}

/// Adds `child` to a conditional body: a function that takes a body names
/// its brand lifetime (here elided) besides the buffers' `'a`.
fn add_to_body<'a>(
    body: &mut ConditionalBody<'a, '_>,
    child: &CudaGraph<'a>,
    deps: &[GraphNode],
) -> CudaResult<GraphNode> {
    body.add_child_graph(child, deps)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bodies_of_two_graphs_built_in_nested_closures_stay_in_their_graphs() {
    let (ctx, stream, module) = setup();
    let k = add_step(&module);
    let mut first = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    let mut second = DeviceBuffer::<i32>::zeroed(&ctx, N as usize).unwrap();
    {
        let mut add1_args = k.as_dyn().args();
        add1_args
            .push(&mut first)
            .unwrap()
            .push(1i32)
            .unwrap()
            .push(N)
            .unwrap();
        let add1 = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(k.as_dyn(), cfg(N), &add1_args).map(|_| ())
            })
            .unwrap();
        let mut add10_args = k.as_dyn().args();
        add10_args
            .push(&mut second)
            .unwrap()
            .push(10i32)
            .unwrap()
            .push(N)
            .unwrap();
        let add10 = stream
            .capture(CaptureMode::ThreadLocal, |c| {
                c.launch(k.as_dyn(), cfg(N), &add10_args).map(|_| ())
            })
            .unwrap();
        let mut g1 = CudaGraph::new(&ctx).unwrap();
        let c1 = g1.condition(Some(1)).unwrap();
        // g1's body is filled before and after a second graph, made, filled
        // in place, run and dropped inside g1's build closure: each body
        // gets the nodes of its own closure, and g1's body stays usable once
        // g2 (with its body) is gone.
        g1.add_if_with(&c1, &[], |b1| -> CudaResult<()> {
            let before = add_to_body(b1, &add1, &[])?;
            let mut g2 = CudaGraph::new(&ctx)?;
            let c2 = g2.condition(Some(1))?;
            g2.add_if_with(&c2, &[], |b2| -> CudaResult<()> {
                // Conditions are `Copy` values without a brand: one of the
                // other graph is refused at run time.
                let e = b2.add_if(&c1, &add10, &[]).unwrap_err();
                assert!(matches!(e, CudaError::InvalidArgument { .. }), "{e}");
                add_to_body(b2, &add10, &[])?;
                Ok(())
            })?;
            let exec2 = g2.instantiate()?;
            exec2.launch(&stream)?;
            stream.synchronize()?;
            drop(exec2);
            drop(g2);
            add_to_body(b1, &add1, &[before])?;
            Ok(())
        })
        .unwrap();
        let exec1 = g1.instantiate().unwrap();
        exec1.launch(&stream).unwrap();
        exec1.launch(&stream).unwrap();
        stream.synchronize().unwrap();
    }
    assert_eq!(
        first.to_vec().unwrap(),
        vec![4; N as usize],
        "g1's body held both of its adds of 1 and ran on each of 2 launches"
    );
    assert_eq!(
        second.to_vec().unwrap(),
        vec![10; N as usize],
        "g2's body held its add of 10 and ran on g2's one launch, never in g1"
    );
}
