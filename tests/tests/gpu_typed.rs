//! Positional launches (`Kernel::launch_args`, `record_args`, what typed
//! launchers call) on a GPU: Warp's reference cases through them, equal to
//! Warp's CPU results; the refusals of the builder, word for word (the
//! launch-shape rule, unreachable memory, another context's stream); the
//! adjoint and the tape; no heap allocation per launch; and a 64-kernel
//! module whose kernels are declared on first use.

use std::path::Path;

use cuda_api::{Context, Stream};
use sdk_tests::warp::{arg_from, compare, data_dir, manifest, storage_bytes};
use warp_launch::{AotModule, Arg, Array, Device, Error, Pass, Tape, TypedArg, TypedArray};

#[global_allocator]
static GLOBAL: sdk_tests::alloc::CountingAlloc = sdk_tests::alloc::CountingAlloc;

fn module(dir: &Path) -> AotModule {
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    unsafe { AotModule::load(dir.join("aot")) }
        .expect("Warp AOT module loads (cargo xtask gpu-bundle)")
}

/// `args` as positional arguments (a null array has no positional form).
fn typed(args: &[Arg]) -> Vec<TypedArg<'_>> {
    args.iter()
        .map(|a| match a {
            Arg::Array(a) => TypedArg::Array(a),
            Arg::Value(v) => TypedArg::Value(v.bytes()),
            Arg::Struct(s) => s.into(),
            other => panic!("no positional form for {}", other.describe()),
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn positional_launches_give_warps_results() {
    let dir = data_dir();
    let m = manifest(&dir);
    let module = module(&dir);
    let mut checked = 0;
    for case in m["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        // Grid caps are a builder option; their results are the uncapped ones.
        let kernel = module.kernel(case["kernel"].as_str().unwrap()).unwrap();
        let specs = case["args"].as_array().unwrap();
        let args: Vec<Arg> = specs
            .iter()
            .map(|a| arg_from(&dir, Device::Cuda(0), a))
            .collect();
        let dim: Vec<i64> = case["dim"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_i64().unwrap())
            .collect();
        kernel
            .launch_args(Pass::Forward, dim, None, &typed(&args))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for (spec, arg) in specs.iter().zip(&args) {
            let Some(file) = spec["expected_file"].as_str() else {
                continue;
            };
            let want = std::fs::read(dir.join(file)).unwrap();
            let a = arg.as_array().unwrap();
            compare(a.dtype(), &storage_bytes(a), &want, 1e-5)
                .unwrap_or_else(|e| panic!("{name}: argument '{}': {e}", spec["name"]));
            checked += 1;
        }
    }
    println!("positional launches: {checked} outputs equal Warp's");
    assert!(checked >= 15, "only {checked} outputs compared");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn positional_launches_refuse_what_the_builder_refuses() {
    let module = module(&data_dir());
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    let x = TypedArray::<f32, 1>::zeros(dev, [256]).unwrap();
    let y = TypedArray::<f32, 1>::zeros(dev, [256]).unwrap();
    let short = TypedArray::<f32, 1>::zeros(dev, [100]).unwrap();
    let host = TypedArray::<f32, 1>::zeros(Device::Cpu, [256]).unwrap();
    let xi = Array::zeros::<i32>(dev, &[256]).unwrap();
    let a = 2.0f32;
    let pos = |x: &Array, y: &Array, stream: Option<&Stream>| {
        saxpy
            .launch_args(
                Pass::Forward,
                256,
                stream,
                &[TypedArg::value(&a), x.into(), y.into()],
            )
            .unwrap_err()
    };
    let built = |x: &Array, y: &Array, stream: Option<&Stream>| {
        let b = saxpy.launch(256).inputs((2.0f32, x, y)).device(dev);
        match stream {
            Some(s) => b.stream(s).run().unwrap_err(),
            None => b.run().unwrap_err(),
        }
    };
    let other = Context::new(dev.context().unwrap().device()).unwrap();
    let foreign = Stream::new(&other).unwrap();
    for (what, x, y, stream) in [
        ("launch shape", &*x, &*short, None),
        ("host memory", &*x, &*host, None),
        ("dtype", &xi, &*y, None),
        ("another context's stream", &*x, &*y, Some(&foreign)),
    ] {
        let (p, b) = (pos(x, y, stream), built(x, y, stream));
        assert_eq!(p.to_string(), b.to_string(), "{what}");
        println!("{what}: {p}");
    }
    assert!(matches!(pos(&x, &short, None), Error::OutOfBounds(_)));
    assert!(matches!(pos(&x, &host, None), Error::Access(_)));
    // The neighbour of the short array was not touched: nothing ran.
    assert!(short.to_vec().unwrap().iter().all(|&v| v == 0.0));
}

/// A positional launch without a stream runs on the device's current
/// stream; a `ScopedStream` of another context is refused as a named one
/// is, before and after the kernel remembers a launch (8fa438c launched on
/// it unchecked: a host read right after saw 0 of 1,048,576 written).
#[test]
#[ignore = "needs a CUDA GPU"]
fn positional_launches_refuse_a_current_stream_of_another_context() {
    use warp_launch::ScopedStream;
    let module = module(&data_dir());
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    let n = 1usize << 20;
    let x = TypedArray::<f32, 1>::from_slice(dev, &vec![1.0f32; n], [n]).unwrap();
    let y = TypedArray::<f32, 1>::zeros(dev, [n]).unwrap();
    let a = 2.0f32;
    let pos = || {
        saxpy.launch_args(
            Pass::Forward,
            n,
            None,
            &[TypedArg::value(&a), (&*x).into(), (&*y).into()],
        )
    };
    let other = Context::new(dev.context().unwrap().device()).unwrap();
    let foreign = Stream::new(&other).unwrap();
    for warm in [false, true] {
        if warm {
            // The kernel now remembers a checked launch with these arrays.
            pos().unwrap();
            pos().unwrap();
        }
        let scope = ScopedStream::new(&foreign).unwrap();
        let e = pos().unwrap_err();
        assert!(matches!(e, Error::StreamContext { .. }), "warm {warm}: {e}");
        let b = saxpy
            .launch(n)
            .inputs((2.0f32, &*x, &*y))
            .run()
            .unwrap_err();
        assert_eq!(e.to_string(), b.to_string(), "warm {warm}");
        let r = saxpy
            .record_args(
                Pass::Forward,
                n,
                &[TypedArg::value(&a), (&*x).into(), (&*y).into()],
            )
            .unwrap();
        assert!(matches!(
            r.launch().unwrap_err(),
            Error::StreamContext { .. }
        ));
        drop(scope);
        println!("warm {warm}: {e}");
    }
    pos().unwrap();
    // The two warm launches and this one ran, none of the refused: y = 3 * 2.
    let v = y.to_vec().unwrap();
    assert_eq!(v.iter().filter(|&&e| e == 6.0).count(), n, "{:?}", &v[..4]);
}

/// A repeated launch with the same arrays, domain, device, access mode and
/// stream context skips the checks of its arrays (the kernel remembers its
/// last launch): every change is still seen, and every refusal still comes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn repeated_positional_launches_see_every_change() {
    let module = module(&data_dir());
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    let x = TypedArray::<f32, 1>::from_slice(dev, &[1.0; 256], [256]).unwrap();
    let y = TypedArray::<f32, 1>::zeros(dev, [256]).unwrap();
    let z = TypedArray::<f32, 1>::zeros(dev, [256]).unwrap();
    let short = TypedArray::<f32, 1>::zeros(dev, [100]).unwrap();
    let stream = Stream::new(&dev.context().unwrap()).unwrap();
    let other = Context::new(dev.context().unwrap().device()).unwrap();
    let foreign = Stream::new(&other).unwrap();
    let run = |a: f32, y: &Array, n: i64, s: Option<&Stream>| {
        saxpy.launch_args(
            Pass::Forward,
            n,
            s,
            &[TypedArg::value(&a), (&*x).into(), y.into()],
        )
    };
    // The same launch twice, then with another value: y = 2 + 2 + 3.
    run(2.0, &y, 256, None).unwrap();
    run(2.0, &y, 256, None).unwrap();
    run(3.0, &y, 256, None).unwrap();
    assert!(
        y.to_vec().unwrap().iter().all(|&v| v == 7.0),
        "{:?}",
        &y.to_vec().unwrap()[..4]
    );
    // Another array, then a smaller domain over it: z = 1, then 2 on the first 128.
    run(1.0, &z, 256, None).unwrap();
    run(1.0, &z, 128, None).unwrap();
    let zv = z.to_vec().unwrap();
    assert!(zv[..128].iter().all(|&v| v == 2.0) && zv[128..].iter().all(|&v| v == 1.0));
    // An array too short for the domain right after launches that passed:
    // refused, nothing ran.
    let e = run(1.0, &short, 128, None).unwrap_err();
    assert!(matches!(e, Error::OutOfBounds(_)), "{e}");
    assert!(short.to_vec().unwrap().iter().all(|&v| v == 0.0));
    // The same arguments on a stream of the device's context, then on a
    // stream of another context: the second is refused.
    run(1.0, &z, 128, Some(&stream)).unwrap();
    run(1.0, &z, 128, Some(&stream)).unwrap();
    let e = run(1.0, &z, 128, Some(&foreign)).unwrap_err();
    assert!(matches!(e, Error::StreamContext { .. }), "{e}");
    stream.synchronize().unwrap();
    assert!(z.to_vec().unwrap()[..128].iter().all(|&v| v == 4.0));
    // The remembered array freed, a new one in its place: launched as new.
    drop(z);
    let w = TypedArray::<f32, 1>::zeros(dev, [256]).unwrap();
    run(5.0, &w, 256, None).unwrap();
    assert!(w.to_vec().unwrap().iter().all(|&v| v == 5.0));
    // A stricter access mode after a launch that passed under CHECKED:
    // host memory the thread's mode allowed is refused.
    let pinned =
        Array::zeros_in::<f32>(Device::Cpu, &[256], cuda_api::MemoryKind::PinnedHost).unwrap();
    run(1.0, &pinned, 256, None).unwrap();
    run(1.0, &pinned, 256, None).unwrap();
    let before = warp_launch::set_thread_access_mode(warp_launch::AccessMode::Strict);
    let e = run(1.0, &pinned, 256, None);
    warp_launch::set_thread_access_mode(before);
    assert!(matches!(e, Err(Error::Access(_))), "{e:?}");
    println!(
        "repeated positional launches: values, arrays, domains, streams, freed arrays and access modes all seen"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn adjoints_replays_and_the_tape_through_positional_launches() {
    let module = module(&data_dir());
    let sin = module.kernel("chain_sin").unwrap();
    let loss_k = module.kernel("chain_loss").unwrap();
    let dev = Device::Cuda(0);
    let xs = [0.1f32, 0.5, 1.0, -0.7];
    let a = 1.5f32;
    // Adjoint: params then adjoints, equal to the builder's adjoint launch.
    let run = |positional: bool| {
        let x = Array::from_slice(dev, &xs, &[4]).unwrap();
        let y = Array::zeros::<f32>(dev, &[4]).unwrap();
        let adj_x = Array::zeros::<f32>(dev, &[4]).unwrap();
        let adj_y = Array::from_slice(dev, &[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
        let zero = 0.0f32;
        if positional {
            sin.launch_args(
                Pass::Adjoint,
                4,
                None,
                &[
                    (&x).into(),
                    TypedArg::value(&a),
                    (&y).into(),
                    (&adj_x).into(),
                    TypedArg::value(&zero),
                    (&adj_y).into(),
                ],
            )
            .unwrap();
        } else {
            sin.launch(4)
                .inputs((&x, a))
                .outputs(&y)
                .adj_inputs((&adj_x, 0.0f32))
                .adj_outputs(&adj_y)
                .pass(Pass::Adjoint)
                .run()
                .unwrap();
        }
        adj_x.to_vec::<f32>().unwrap()
    };
    assert_eq!(run(true), run(false));
    // Replay of a recorded positional launch.
    let x = Array::from_slice(dev, &[1.0f32; 4], &[4]).unwrap();
    let y = Array::zeros::<f32>(dev, &[4]).unwrap();
    let saxpy = module.kernel("saxpy").unwrap();
    let l = saxpy
        .record_args(
            Pass::Forward,
            4,
            &[TypedArg::value(&a), (&x).into(), (&y).into()],
        )
        .unwrap();
    for _ in 0..10 {
        l.launch().unwrap();
    }
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![15.0; 4]);
    // The tape records forward positional launches and runs their backward kernels.
    let x = Array::from_slice(dev, &xs, &[4])
        .unwrap()
        .with_grad()
        .unwrap();
    let y = Array::zeros::<f32>(dev, &[4]).unwrap().with_grad().unwrap();
    let loss = Array::zeros::<f32>(dev, &[1]).unwrap().with_grad().unwrap();
    let mut tape = Tape::new();
    tape.record(|| -> warp_launch::Result<()> {
        sin.launch_args(
            Pass::Forward,
            4,
            None,
            &[(&x).into(), TypedArg::value(&a), (&y).into()],
        )?;
        loss_k.launch_args(Pass::Forward, 4, None, &[(&y).into(), (&loss).into()])
    })
    .unwrap();
    assert_eq!(tape.launches().len(), 2);
    tape.backward(&loss).unwrap();
    let gx = x.grad().unwrap().to_vec::<f32>().unwrap();
    for (g, x) in gx.iter().zip(xs) {
        let exact = 2.0 * 2.25 * x.sin() * x.cos();
        assert!((g - exact).abs() < 1e-4, "{g} vs {exact}");
    }
}

/// Zeroing and filling device memory on a stream plan their memsets on
/// the stack: no heap allocation per call (the zero + fill + launch
/// sequence of the stream_ops bench makes two of them). Written in the
/// launch-cost session whose device time ran out: first run in the
/// bundle after it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn zeroing_and_filling_device_memory_allocate_nothing() {
    let dev = Device::Cuda(0);
    let stream = Stream::new(&dev.context().unwrap()).unwrap();
    let a = Array::zeros::<f32>(dev, &[4096]).unwrap();
    let v = warp_launch::Value::of(2.5f32);
    a.zero_on(&stream).unwrap();
    a.fill_on(&v, &stream).unwrap();
    let before = sdk_tests::alloc::allocations();
    for _ in 0..100 {
        a.zero_on(&stream).unwrap();
        a.fill_on(&v, &stream).unwrap();
    }
    let allocs = sdk_tests::alloc::allocations() - before;
    // Other tests of this binary may allocate meanwhile: a call that
    // allocated would add at least 100.
    assert!(
        allocs < 100,
        "{allocs} allocations in 100 zero + fill pairs"
    );
    stream.synchronize().unwrap();
    assert!(a.to_vec::<f32>().unwrap().iter().all(|&x| x == 2.5));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn positional_launches_allocate_nothing_and_keep_their_arrays_alive() {
    let module = module(&data_dir());
    let saxpy = module.kernel("saxpy").unwrap();
    let dev = Device::Cuda(0);
    let stream = Stream::new(&dev.context().unwrap()).unwrap();
    let n = 1usize << 22;
    let x = Array::from_slice(dev, &vec![1.0f32; n], &[n]).unwrap();
    let y = Array::zeros::<f32>(dev, &[n]).unwrap();
    let a = 1.0f32;
    let args = [TypedArg::value(&a), (&x).into(), (&y).into()];
    for s in [Some(&stream), None] {
        saxpy.launch_args(Pass::Forward, n, s, &args).unwrap();
        let before = sdk_tests::alloc::allocations();
        for _ in 0..100 {
            saxpy.launch_args(Pass::Forward, n, s, &args).unwrap();
        }
        let allocs = sdk_tests::alloc::allocations() - before;
        // Other tests of this binary may allocate meanwhile: a launch
        // that allocated would add at least 100.
        assert!(allocs < 100, "{allocs} allocations in 100 launches");
        stream.synchronize().unwrap();
    }
    // Arrays dropped right after the launch: their memory is freed only
    // after the kernel (the free waits), and a new array never sees it
    // being written.
    for _ in 0..20 {
        let x = Array::from_slice(dev, &vec![1.0f32; n], &[n]).unwrap();
        let y = Array::zeros::<f32>(dev, &[n]).unwrap();
        saxpy
            .launch_args(
                Pass::Forward,
                n,
                Some(&stream),
                &[TypedArg::value(&a), (&x).into(), (&y).into()],
            )
            .unwrap();
    }
    let z = Array::zeros::<f32>(dev, &[n]).unwrap();
    stream.synchronize().unwrap();
    assert!(z.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    assert_eq!(y.to_vec::<f32>().unwrap()[0], 202.0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_module_of_64_kernels_declares_them_on_first_use() {
    let dir = data_dir().join("many");
    let dev = Device::Cuda(0);
    dev.context().unwrap();
    let t = std::time::Instant::now();
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let module = unsafe { AotModule::load(&dir) }.expect("many/ (tests/warp/build.py build_many)");
    let ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "AotModule::load of {} kernels: {ms:.2} ms",
        module.keys().count()
    );
    assert_eq!(module.keys().count(), 64);
    assert!(module.keys().all(|k| !module.is_declared(k)));
    let fill = module.kernel("fill_05").unwrap();
    // Declared against the driver on its first CUDA use.
    assert!(module.keys().all(|k| !module.is_declared(k)));
    let out = TypedArray::<i32, 1>::zeros(dev, [10]).unwrap();
    let (value, step) = (100i32, 3i32);
    fill.launch_args(
        Pass::Forward,
        10,
        None,
        &[
            TypedArg::value(&value),
            TypedArg::value(&step),
            (&out).into(),
        ],
    )
    .unwrap();
    let want: Vec<i32> = (0..10).map(|i| 100 + 3 * i + 5).collect();
    assert_eq!(out.to_vec().unwrap(), want);
    assert!(module.is_declared("fill_05") && !module.is_declared("fill_06"));
    // The same kernel again: the declared one.
    let again = module.kernel("fill_05").unwrap();
    assert_eq!(again.name(), "fill_05");
    // Every kernel declares against the driver's layout.
    for key in module.keys().map(str::to_string).collect::<Vec<_>>() {
        module
            .kernel(&key)
            .unwrap()
            .cuda_function(Pass::Forward)
            .unwrap();
    }
    assert!(module.keys().all(|k| module.is_declared(k)));
}
