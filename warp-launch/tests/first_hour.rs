//! What a new user meets first, on any machine (no GPU): errors whose
//! `Debug` is their message, values that would change in silence refused,
//! CPU-kernel index errors that say where, and kernel declarations no
//! kernel can have refused when they are made.

use warp_launch::{
    Array, DType, DeclarationProblem, Device, Error, Kernel, KernelSpec, ParamKind, Pass,
    cpu_each_fn,
};

/// `y[i] = a` on the CPU: reads the `float32` value the launch converted.
fn store() -> Kernel {
    KernelSpec::new("store", 1)
        .value::<f32>("a")
        .array::<f32>("y", 1)
        .indexed_by_thread("y")
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                each.run(|t| {
                    let a: f32 = args.value(0)?;
                    args.array::<f32>(1)?.set(t.tid(), a)
                })
            }),
            None,
        )
}

/// `y[i + 1] = x[i]`: the last thread writes past `y` (no access rule
/// declares the shift, so only the CPU array's own check catches it).
fn shift() -> Kernel {
    KernelSpec::new("shift", 1)
        .array::<f32>("x", 1)
        .array::<f32>("y", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                each.run(|t| {
                    let v = args.array::<f32>(0)?.get(t.tid())?;
                    args.array::<f32>(1)?.set(t.tid() + 1, v)
                })
            }),
            None,
        )
}

/// `Debug` of an error is its message (what `fn main() -> Result<..>`,
/// `unwrap`, `anyhow` and `eyre` print), for errors of real calls.
#[test]
fn debug_of_an_error_is_its_message() {
    let mut errors: Vec<Error> = vec![
        "cuda:first".parse::<Device>().unwrap_err(),
        KernelSpec::new("k", 1)
            .array::<f32>("x", 0)
            .declare()
            .unwrap_err(),
    ];
    let x = Array::zeros::<i32>(Device::Cpu, &[4]).unwrap();
    errors.push(
        store()
            .launch(4)
            .device("cpu")
            .inputs((1.0f32, &x))
            .run()
            .unwrap_err(),
    );
    let x = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    let y = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    errors.push(
        shift()
            .launch(4)
            .device("cpu")
            .inputs((&x, &y))
            .run()
            .unwrap_err(),
    );
    errors.push(
        store()
            .launch(-1)
            .device("cpu")
            .inputs((1.0f32, &y))
            .run()
            .unwrap_err(),
    );
    for e in &errors {
        let debug = format!("{e:?}");
        assert_eq!(debug, e.to_string());
        assert!(!debug.contains(" {") && !debug.contains("(\""), "{debug}");
    }
    let inner = match &errors[0] {
        Error::BadDevice { given } => given,
        e => panic!("{e}"),
    };
    assert_eq!(inner, "cuda:first", "the fields stay public for matching");
}

/// A finite value that a float parameter cannot hold is refused, naming
/// the kernel, the parameter, its dtype and the value; the largest that
/// fit, infinity and NaN pass and reach the kernel as themselves.
#[test]
fn a_finite_value_that_overflows_a_float_parameter_is_refused() {
    let k = store();
    let y = Array::zeros::<f32>(Device::Cpu, &[2]).unwrap();
    let e = k
        .launch(2)
        .device("cpu")
        .inputs((1e40f64, &y))
        .run()
        .unwrap_err();
    let Error::Argument(a) = &e else {
        panic!("expected Error::Argument, got {e}")
    };
    assert_eq!(
        (a.kernel.as_str(), a.index, a.param.as_str()),
        ("store", 0, "a")
    );
    let text = e.to_string();
    for part in [
        "kernel 'store'",
        "argument 0 'a'",
        "float32",
        "1e40",
        "infinity",
        "3.4028234663852886e38",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    assert_eq!(y.to_vec::<f32>().unwrap(), [0.0, 0.0], "nothing ran");

    for (given, seen) in [
        (3.0e38f64, 3.0e38f32),
        (-3.0e38, -3.0e38),
        (f64::INFINITY, f32::INFINITY),
        (f64::NEG_INFINITY, f32::NEG_INFINITY),
        (0.1, 0.1f32),
    ] {
        k.launch(2).device("cpu").inputs((given, &y)).run().unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [seen, seen], "{given}");
    }
    k.launch(2)
        .device("cpu")
        .inputs((f64::NAN, &y))
        .run()
        .unwrap();
    assert!(y.to_vec::<f32>().unwrap().iter().all(|v| v.is_nan()));

    // A recorded launch's setter checks the same.
    let mut launch = k
        .launch(2)
        .device("cpu")
        .inputs((1.0f32, &y))
        .record_cmd()
        .unwrap();
    let e = launch.set_param_by_name("a", -1e39f64).unwrap_err();
    assert!(e.to_string().contains("would become infinity"), "{e}");
    launch.set_param_by_name("a", 2.5f64).unwrap();

    // float16: 65504 is its largest finite value.
    let half = KernelSpec::new("half", 1)
        .param("h", ParamKind::Value(DType::FLOAT16))
        .declare()
        .unwrap()
        .with_cpu(cpu_each_fn(|_, each| each.run(|_| Ok(()))), None);
    half.launch(1).device("cpu").inputs(65504i32).run().unwrap();
    let e = half
        .launch(1)
        .device("cpu")
        .inputs(70000i32)
        .run()
        .unwrap_err();
    assert!(
        e.to_string().contains("'h'") && e.to_string().contains("float16 (6.5504e4)"),
        "{e}"
    );
}

/// An index outside an array in a Rust CPU kernel names the kernel, the
/// function, the parameter (position and name), the thread, the index and
/// the shape.
#[test]
fn cpu_kernel_index_errors_name_kernel_parameter_and_thread() {
    let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
    let y = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    let e = shift()
        .launch(4)
        .device("cpu")
        .inputs((&x, &y))
        .run()
        .unwrap_err();
    let Error::CpuIndex(c) = &e else {
        panic!("expected Error::CpuIndex, got {e}")
    };
    assert_eq!(
        (c.kernel.as_str(), c.pass, c.param_index, c.param.as_str()),
        ("shift", Pass::Forward, 1, "y")
    );
    assert_eq!(
        (&c.thread[..], &c.index[..], &c.shape[..]),
        (&[3][..], &[4][..], &[4][..])
    );
    assert_eq!(
        e.to_string(),
        "kernel 'shift' (forward) on \"cpu\", thread [3] (wp.tid()): argument 1 'y': index [4] \
         is outside the array of shape [4]; index each axis from 0 to below its extent: launch \
         over a domain that fits the array, or pass a larger one"
    );
    // Threads before the failing one ran.
    assert_eq!(y.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0, 3.0]);

    // A null array (Warp's None): the message the issue quotes, with where.
    let e = shift()
        .launch(1)
        .device("cpu")
        .inputs((&x, None::<&Array>))
        .run()
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(
            "kernel 'shift' (forward) on \"cpu\", thread [0] (wp.tid()): argument 1 'y': index [1] is outside a null array"
        ),
        "{text}"
    );

    // An empty array is not a null one.
    let empty = Array::zeros::<f32>(Device::Cpu, &[0]).unwrap();
    let e = shift()
        .launch(1)
        .device("cpu")
        .inputs((&x, &empty))
        .run()
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("'y': index [1] is outside the array of shape [0];"),
        "{e}"
    );

    // Two coordinates, and an index with the wrong number of them.
    let k = KernelSpec::new("corner", 2)
        .array::<f32>("grid", 2)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                each.run(|t| {
                    let (i, j) = t.tid2();
                    let g = args.array::<f32>(0)?;
                    if (i, j) == (1, 2) {
                        g.set(i, 1.0)?;
                    }
                    g.set((i, j), 1.0)
                })
            }),
            None,
        );
    let grid = Array::zeros::<f32>(Device::Cpu, &[2, 3]).unwrap();
    let e = k
        .launch([2, 3])
        .device("cpu")
        .inputs(&grid)
        .run()
        .unwrap_err();
    let text = e.to_string();
    for part in [
        "kernel 'corner'",
        "thread [1, 2]",
        "argument 0 'grid'",
        "index [1]",
        "shape [2, 3]",
        "2 dimension(s) but the index has 1 coordinate(s)",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
}

/// Declarations no kernel can have are refused by `declare`, naming the
/// kernel, the parameter and the limit (before: accepted, and a launch
/// failed later advising "pass an array with 0 dimension(s)").
#[test]
fn kernel_spec_refuses_impossible_declarations() {
    let refused = |spec: KernelSpec| match spec.declare() {
        Err(Error::Declaration(d)) => (d.problem.clone(), Error::Declaration(d).to_string()),
        Err(e) => panic!("expected Error::Declaration, got {e}"),
        Ok(k) => panic!("declared {k:?}"),
    };

    let (p, text) = refused(KernelSpec::new("k", 1).array::<f32>("x", 0));
    assert_eq!(
        p,
        DeclarationProblem::ArrayDims {
            index: 0,
            name: "x".into(),
            ndim: 0
        }
    );
    for part in [
        "kernel 'k'",
        "parameter 0 'x'",
        "0 dimension(s)",
        "1 to 4",
        "ARRAY_MAX_DIMS = 4",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    let (p, text) = refused(
        KernelSpec::new("k", 1)
            .value::<f32>("a")
            .array::<f32>("x", 7)
            .indexed_by_thread("x"),
    );
    assert!(
        matches!(
            p,
            DeclarationProblem::ArrayDims {
                index: 1,
                ndim: 7,
                ..
            }
        ),
        "{text}"
    );
    assert!(
        text.contains("parameter 1 'x' is declared as an array of 7 dimension(s)"),
        "{text}"
    );
    // 4 is Warp's limit, and allowed.
    KernelSpec::new("k", 1)
        .array::<f32>("x", 4)
        .declare()
        .unwrap();

    let (p, text) = refused(
        KernelSpec::new("k", 1)
            .array::<f32>("x", 1)
            .value::<f32>("a")
            .array::<f32>("x", 1),
    );
    assert!(
        matches!(
            p,
            DeclarationProblem::DuplicateParam {
                first: 0,
                index: 2,
                ..
            }
        ),
        "{text}"
    );
    assert!(
        text.contains("kernel 'k': parameter 2 'x' has the name of parameter 0"),
        "{text}"
    );
    let (p, text) = refused(
        KernelSpec::new("k", 1)
            .array::<f32>("x", 1)
            .array::<f32>("adj_x", 1),
    );
    assert!(
        matches!(p, DeclarationProblem::DuplicateParam { .. }),
        "{text}"
    );
    assert!(
        text.contains("'adj_x' clashes with parameter 0 'x'"),
        "{text}"
    );

    let (p, text) = refused(KernelSpec::new("", 1).array::<f32>("x", 1));
    assert_eq!(p, DeclarationProblem::EmptyKernelName);
    assert!(text.contains("the kernel name is empty"), "{text}");
    let (p, text) = refused(KernelSpec::new("k", 1).value::<f32>("a").value::<f32>(" "));
    assert_eq!(p, DeclarationProblem::EmptyParamName { index: 1 });
    assert!(
        text.contains("kernel 'k': parameter 1 has an empty name"),
        "{text}"
    );
}
