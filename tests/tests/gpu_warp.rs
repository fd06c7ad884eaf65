//! `warp-launch` end to end on a GPU: kernels written in Warp, compiled
//! ahead of time by Warp 1.19.0 (`tests/warp/kernels.py`, built by
//! `cargo xtask gpu-bundle`), launched from Rust and compared with Warp's
//! own CPU results; the tape against Warp's tape; the same program on our
//! CPU device; max_blocks caps; access modes with page-locked and managed
//! memory; a `Launch` replayed 10,000 times.

use std::path::Path;

use cuda_api::MemoryKind;
use sdk_tests::warp::{
    arg_from, array_from, chain_cpu, compare, data_dir, manifest, run_cases, storage_bytes,
    with_cpu,
};
use serde_json::Value as Json;
use warp_launch::{AccessMode, AotModule, Arg, Array, DType, Device, Error, Tape};

fn module(dir: &Path) -> AotModule {
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    unsafe { AotModule::load(dir.join("aot")) }.expect("Warp AOT module loads")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn warp_kernels_give_warps_results() {
    let dir = data_dir();
    let checked = run_cases(&dir, &manifest(&dir), &module(&dir), Device::Cuda(0));
    assert!(checked >= 15, "only {checked} outputs compared");
}

fn tape_case(dir: &Path, m: &Json, device: Device, cpu: bool) -> (Json, Vec<(String, Array)>) {
    let case = m["tape_cases"][0].clone();
    let module = module(dir);
    let imps = chain_cpu();
    let arrays: Vec<(String, Array)> = case["arrays"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, a)| {
            let arr = array_from(dir, device, a, "file");
            let arr = if a["requires_grad"].as_bool().unwrap() {
                arr.with_grad().unwrap()
            } else {
                arr
            };
            (id.clone(), arr)
        })
        .collect();
    let find = |id: &str| arrays.iter().find(|(i, _)| i == id).unwrap().1.clone();
    let mut tape = Tape::new();
    {
        let _rec = tape.recording();
        for l in case["launches"].as_array().unwrap() {
            let key = l["kernel"].as_str().unwrap();
            let mut kernel = module.kernel(key).unwrap();
            if cpu {
                kernel = with_cpu(&kernel, &imps[if key == "chain_sin" { 0 } else { 1 }]);
            }
            let args: Vec<Arg> = l["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| match a.get("array").and_then(Json::as_str) {
                    Some(id) => Arg::Array(find(id)),
                    None => arg_from(dir, device, a),
                })
                .collect();
            let dim: Vec<i64> = l["dim"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_i64().unwrap())
                .collect();
            kernel
                .launch(dim)
                .inputs(args)
                .device(device)
                .run()
                .unwrap();
        }
    }
    assert_eq!(tape.launches().len(), 2);
    tape.backward(&find(case["loss"].as_str().unwrap()))
        .unwrap();
    (case, arrays)
}

fn check_tape(dir: &Path, case: &Json, arrays: &[(String, Array)], grads_of: &[&str]) {
    for (id, a) in arrays {
        let spec = &case["arrays"][id];
        let want = std::fs::read(dir.join(spec["expected_file"].as_str().unwrap())).unwrap();
        compare(a.dtype(), &storage_bytes(a), &want, 1e-5).unwrap_or_else(|e| panic!("{id}: {e}"));
        if grads_of.contains(&id.as_str())
            && let Some(g) = spec["grad_expected_file"].as_str()
        {
            let want = std::fs::read(dir.join(g)).unwrap();
            compare(a.dtype(), &storage_bytes(a.grad().unwrap()), &want, 1e-5)
                .unwrap_or_else(|e| panic!("{id}.grad: {e}"));
            println!("tape: {id}.grad matches Warp's tape");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_tape_gives_warps_gradients_on_cuda_and_on_the_cpu() {
    let dir = data_dir();
    let m = manifest(&dir);
    let (case, arrays) = tape_case(&dir, &m, Device::Cuda(0), false);
    check_tape(&dir, &case, &arrays, &["x", "y", "loss"]);
    // The same program on our CPU device (Rust implementations of the two
    // kernels): the same values and input gradient. (y.grad differs by
    // design: Warp's backward kernel zeroes an overwritten array's gradient.)
    let (case, arrays) = tape_case(&dir, &m, Device::Cpu, true);
    check_tape(&dir, &case, &arrays, &["x", "loss"]);
}

/// The tape-parity programs (copies inside a tape, retain_grad, arrays in
/// nested structs, a host step with its own backward, backward_with) on
/// CUDA with `tests/warp/tape.py` compiled by Warp for sm_90, against
/// Warp's tape on its CPU device (within 1e-5: sin and the atomic sum are
/// computed in another order on the GPU).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_tape_matches_warps_tape_on_cuda() {
    let dir = data_dir();
    let m = manifest(&dir);
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let tape = unsafe { AotModule::load(dir.join("tape")) }.expect("tape.py's AOT module loads");
    let grads = sdk_tests::warp_tape::run_tape_parity(&dir, &m, &tape, Device::Cuda(0), Some(1e-5));
    println!("cuda tape parity: {grads} gradients match Warp's tape");
    assert!(grads >= 18, "only {grads} gradients compared");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn capped_grids_visit_every_index_once() {
    let dir = data_dir();
    let k = module(&dir).kernel("count_visits").unwrap();
    let int32 = DType::INT32;
    for (n, max_blocks) in [
        (100_000usize, 1i64),
        (100_000, 7),
        (1 << 20, 3),
        (5, 0),
        (1 << 20, 1000),
    ] {
        let c = Array::zeros_dtype(Device::Cuda(0), int32, &[n]).unwrap();
        k.launch(n).inputs(&c).max_blocks(max_blocks).run().unwrap();
        let v = c.to_vec::<i32>().unwrap();
        assert!(
            v.iter().all(|&x| x == 1),
            "n {n} max_blocks {max_blocks}: not all 1"
        );
    }
    // Warp compiled the module for block_dim 256 (WP_TILE_BLOCK_DIM): a
    // bigger block would write past its shared tile storage (seen as an
    // illegal address on the H200), so other sizes are refused.
    assert_eq!(k.fixed_block_dim(), Some(256));
    let small = Array::zeros_dtype(Device::Cuda(0), int32, &[8]).unwrap();
    for block in [1024u32, 128, 1] {
        let e = k
            .launch(8)
            .inputs(&small)
            .block_dim(block)
            .run()
            .unwrap_err();
        assert!(
            matches!(e, Error::CompiledBlockDim { given, .. } if given == block),
            "{e}"
        );
    }
    println!(
        "{}",
        k.launch(8)
            .inputs(&small)
            .block_dim(1024)
            .run()
            .unwrap_err()
    );
    let c = Array::zeros_dtype(Device::Cuda(0), int32, &[50_000]).unwrap();
    let l = k
        .launch(50_000)
        .inputs(&c)
        .max_blocks(warp_launch::MaxBlocks::Resident)
        .cooperative(true)
        .record_cmd()
        .unwrap();
    println!(
        "resident grid for count_visits at 256 threads: {:?} blocks",
        l.plan().grid
    );
    l.launch().unwrap();
    assert!(c.to_vec::<i32>().unwrap().iter().all(|&x| x == 1));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn access_modes_with_page_locked_and_managed_memory() {
    let dir = data_dir();
    let k = module(&dir).kernel("saxpy").unwrap();
    let f32t = DType::FLOAT32;
    let gpu = Device::Cuda(0);
    let x = Array::from_slice(gpu, &[1.0f32; 8], &[8]).unwrap();
    // Managed memory of cuda:0: fine under STRICT and CHECKED.
    let managed = Array::zeros_dtype_in(gpu, f32t, &[8], MemoryKind::Managed).unwrap();
    for mode in [AccessMode::Strict, AccessMode::Checked] {
        k.launch(8)
            .inputs((1.0f32, &x, &managed))
            .access_mode(mode)
            .run()
            .unwrap();
    }
    assert_eq!(managed.to_vec::<f32>().unwrap(), vec![2.0; 8]);
    // A CPU array in page-locked memory: STRICT refuses (not on cuda:0);
    // CHECKED asks the driver, which says it is page-locked memory of
    // cuda:0's context, and launches.
    let pinned = Array::zeros_dtype_in(Device::Cpu, f32t, &[8], MemoryKind::PinnedHost).unwrap();
    let e = k
        .launch(8)
        .inputs((3.0f32, &x, &pinned))
        .device(gpu)
        .access_mode(AccessMode::Strict)
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::Access(_)), "{e}");
    println!("STRICT: {e}");
    k.launch(8)
        .inputs((3.0f32, &x, &pinned))
        .device(gpu)
        .access_mode(AccessMode::Checked)
        .run()
        .unwrap();
    assert_eq!(pinned.to_vec::<f32>().unwrap(), vec![3.0; 8]);
    // Ordinary host memory: CHECKED refuses it for a CUDA launch.
    let host = Array::zeros_dtype(Device::Cpu, f32t, &[8]).unwrap();
    let e = k
        .launch(8)
        .inputs((3.0f32, &x, &host))
        .device(gpu)
        .access_mode(AccessMode::Checked)
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::Access(_)), "{e}");
    println!("CHECKED: {e}");
    // Device memory for a CPU launch: refused whatever the mode.
    let k_cpu = with_cpu(&k, &chain_cpu()[0]);
    let e = k_cpu
        .launch(8)
        .inputs((3.0f32, &x, &host))
        .device("cpu")
        .access_mode(AccessMode::Relaxed)
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::Access(_)), "{e}");
    println!("CPU launch: {e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_launch_replayed_ten_thousand_times_with_changing_parameters() {
    let dir = data_dir();
    let k = module(&dir).kernel("saxpy").unwrap();
    let gpu = Device::Cuda(0);
    let stream = cuda_api::Stream::new(&gpu.context().unwrap()).unwrap();
    let x = Array::from_slice(gpu, &[1.0f32; 64], &[64]).unwrap();
    let y = Array::zeros::<f32>(gpu, &[64]).unwrap();
    let mut l = k
        .launch(64)
        .inputs((0.0f32, &x, &y))
        .stream(&stream)
        .record_cmd()
        .unwrap();
    let mut expected = vec![0.0f64; 64];
    for i in 0..10_000 {
        let a = (i % 7) as f32;
        let n = 1 + (i % 64);
        l.set_param_by_name("a", a).unwrap();
        l.set_dim(&[n as i64]).unwrap();
        l.launch_on(&stream).unwrap();
        for e in expected.iter_mut().take(n) {
            *e += a as f64;
        }
    }
    stream.synchronize().unwrap();
    let got = y.to_vec::<f32>().unwrap();
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(*g as f64, *e);
    }
    println!(
        "replay: 10000 launches, y[0] = {}, y[63] = {}",
        got[0], got[63]
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn argument_errors_on_cuda_name_kernel_parameter_and_remedy() {
    let dir = data_dir();
    let k = module(&dir).kernel("add2d").unwrap();
    let f32t = DType::FLOAT32;
    let a1 = Array::zeros_dtype(Device::Cuda(0), f32t, &[4]).unwrap();
    let a2 = Array::zeros_dtype(Device::Cuda(0), f32t, &[4, 5]).unwrap();
    let e = k
        .launch([4, 5])
        .inputs((&a2, &a2))
        .outputs(&a1)
        .run()
        .unwrap_err();
    println!("{e}");
    assert!(matches!(e, Error::Argument(_)), "{e}");
    let lean = module(&dir).kernel("lean_fill").unwrap();
    let i2 = Array::zeros::<i32>(Device::Cuda(0), &[3, 3]).unwrap();
    let e = lean
        .launch([3, 3])
        .inputs((1i32, &i2))
        .max_blocks(2)
        .run()
        .unwrap_err();
    println!("{e}");
    assert!(matches!(e, Error::Dim { .. }), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_captured_graph_of_100_launches_replays_and_updates_in_place() {
    let dir = data_dir();
    let k = module(&dir).kernel("saxpy").unwrap();
    let gpu = Device::Cuda(0);
    let stream = cuda_api::Stream::new(&gpu.context().unwrap()).unwrap();
    let x = Array::from_slice(gpu, &[1.0f32; 32], &[32]).unwrap();
    let y = Array::zeros::<f32>(gpu, &[32]).unwrap();
    let launches: Vec<_> = (0..100)
        .map(|i| {
            k.launch(32)
                .inputs(((i % 3) as f32, &x, &y))
                .stream(&stream)
                .record_cmd()
                .unwrap()
        })
        .collect();
    let per_replay: f32 = (0..100).map(|i| (i % 3) as f32).sum();
    let mut graph = warp_launch::Graph::capture(&stream, launches).unwrap();
    graph.launch(&stream).unwrap();
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0 * per_replay; 32]);
    // Launch 50 had a = 2; make it 100 and cover only 16 elements.
    graph
        .update(50, |l| {
            l.set_param_by_name("a", 100.0f32)?;
            l.set_dim(&[16])?;
            Ok(())
        })
        .unwrap();
    graph.launch(&stream).unwrap();
    stream.synchronize().unwrap();
    let got = y.to_vec::<f32>().unwrap();
    let first = 3.0 * per_replay - 2.0 + 100.0;
    let rest = 3.0 * per_replay - 2.0;
    assert!(got[..16].iter().all(|&v| v == first), "{got:?}");
    assert!(got[16..].iter().all(|&v| v == rest), "{got:?}");
    // A refused change leaves the graph as it was.
    let e = graph
        .update(50, |l| l.set_param_by_name("a", &x).map(|_| ()))
        .unwrap_err();
    println!("graph update refused: {e}");
    println!("graph: 100 launches captured, replayed 3 times, launch 50 updated in place");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_c_kernels_written_against_our_header() {
    let k = sdk_tests::warp::header_kernels().unwrap();
    let gpu = Device::Cuda(0);
    // 2-D grid-stride with a cap, on a transposed (non-contiguous) view.
    let base: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let a = Array::from_slice(gpu, &base, &[3, 4]).unwrap();
    let t = a.transpose(0, 1).unwrap();
    k.scale2d
        .launch([4, 3])
        .inputs((&t, 2.0f32))
        .max_blocks(1)
        .block_dim(5)
        .run()
        .unwrap();
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        base.iter().map(|v| v * 2.0).collect::<Vec<_>>()
    );
    // 4-D coordinates.
    let out = Array::zeros::<i32>(gpu, &[2, 3, 4, 5]).unwrap();
    k.fill4d.launch([2, 3, 4, 5]).inputs(&out).run().unwrap();
    assert_eq!(out.to_vec::<i32>().unwrap(), (0..120).collect::<Vec<i32>>());
    // Lean over 1000 vec3f with a vec3f value.
    let v = Array::from_slice(gpu, &vec![[1.0f32, 2.0, 3.0]; 1000], &[1000]).unwrap();
    k.lean_add
        .launch(1000)
        .inputs((&v, [0.5f32, 0.5, 0.5]))
        .block_dim(128)
        .run()
        .unwrap();
    assert!(
        v.to_vec::<[f32; 3]>()
            .unwrap()
            .iter()
            .all(|e| *e == [1.5, 2.5, 3.5])
    );
    // Cooperative reduction on the resident grid.
    let n = 1 << 20;
    let x = Array::from_slice(gpu, &vec![1.0f32; n], &[n]).unwrap();
    let grid = k
        .grid_sum
        .cuda_function(warp_launch::Pass::Forward)
        .unwrap()
        .max_cooperative_grid(&gpu.context().unwrap(), 256, 0)
        .unwrap();
    let partial = Array::zeros::<f32>(gpu, &[grid as usize]).unwrap();
    let total = Array::zeros::<f32>(gpu, &[1]).unwrap();
    k.grid_sum
        .launch(n)
        .inputs((&x, &partial, &total))
        .max_blocks(warp_launch::MaxBlocks::Resident)
        .cooperative(true)
        .run()
        .unwrap();
    assert_eq!(total.to_vec::<f32>().unwrap(), vec![n as f32]);
    println!("header kernels: scale2d, fill4d, lean_add, grid_sum over {grid} resident blocks");
}

/// The audit's finding: `fill` (`x[i] = v`) over 65,536 on a 4-element
/// array wrote 65,408 elements of the next allocation. Now the launch is
/// refused (kernel, parameter, axis, dim and extent named) and the
/// neighbour keeps its zeros; the same on replay (`set_dim`).
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_launch_larger_than_its_array_is_refused_and_the_neighbour_is_untouched() {
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let access =
        unsafe { AotModule::load(data_dir().join("access")) }.expect("access module loads");
    let fill = access.kernel("fill").unwrap();
    let gpu = Device::Cuda(0);
    let f32t = DType::FLOAT32;
    let x = Array::zeros_dtype(gpu, f32t, &[4]).unwrap();
    let neighbour = Array::zeros_dtype(gpu, f32t, &[65_536]).unwrap();
    let e = fill.launch(65_536).inputs((&x, 7.0f32)).run().unwrap_err();
    println!("refused: {e}");
    let Error::OutOfBounds(b) = &e else {
        panic!("expected OutOfBounds, got {e}");
    };
    assert_eq!(
        (
            b.kernel.as_str(),
            b.param.as_str(),
            b.axis,
            b.needed,
            b.shape.as_slice()
        ),
        ("fill", "x", 0, 65_536, &[4][..])
    );
    fill.launch(4).inputs((&x, 7.0f32)).run().unwrap();
    let mut l = fill.launch(4).inputs((&x, 8.0f32)).record_cmd().unwrap();
    assert!(matches!(l.set_dim(&[65_536]), Err(Error::OutOfBounds(_))));
    assert!(matches!(
        l.set_param_by_name("x", Array::zeros_dtype(gpu, f32t, &[3]).unwrap()),
        Err(Error::OutOfBounds(_))
    ));
    l.launch().unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![8.0; 4]);
    let n = neighbour.to_vec::<f32>().unwrap();
    assert!(
        n.iter().all(|&v| v == 0.0),
        "{} neighbour elements overwritten",
        n.iter().filter(|&&v| v != 0.0).count()
    );
}

/// A kernel whose index comes from data is refused by the safe launch
/// (naming kernel, parameter and line) and runs through the unsafe
/// unchecked launch.
#[test]
#[ignore = "needs a CUDA GPU"]
fn unproven_kernels_need_the_unchecked_launch() {
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let access =
        unsafe { AotModule::load(data_dir().join("access")) }.expect("access module loads");
    let gather = access.kernel("gather").unwrap();
    let gpu = Device::Cuda(0);
    let idx = Array::from_slice(gpu, &[3i32, 2, 1, 0], &[4]).unwrap();
    let x = Array::from_slice(gpu, &[10.0f32, 11.0, 12.0, 13.0], &[4]).unwrap();
    let out = Array::zeros::<f32>(gpu, &[4]).unwrap();
    let e = gather
        .launch(4)
        .inputs((&idx, &x))
        .outputs(&out)
        .run()
        .unwrap_err();
    println!("refused: {e}");
    assert!(matches!(e, Error::Unproven(_)), "{e}");
    assert!(e.to_string().contains("wp_access.cu:192"), "{e}");
    // SAFETY: every idx is in 0..4, x and out have 4 elements, the domain is 4.
    let builder = unsafe {
        gather
            .launch(4)
            .inputs((&idx, &x))
            .outputs(&out)
            .unchecked()
    };
    builder.run().unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![13.0, 12.0, 11.0, 10.0]);
    // SAFETY: as above.
    let mut l = unsafe {
        gather
            .launch(4)
            .inputs((&idx, &x))
            .outputs(&out)
            .unchecked()
    }
    .record_cmd()
    .unwrap();
    assert!(
        l.set_dim(&[2]).is_err(),
        "safe setters of an unchecked launch are refused"
    );
    // SAFETY: a smaller domain reads and writes fewer of the same elements.
    unsafe { l.edit_unchecked(|l| l.set_dim(&[2]).map(|_| ())) }.unwrap();
    l.launch().unwrap();
}
