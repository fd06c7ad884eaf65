//! A Warp module's compiled CPU code on the `"cpu"` device, without a GPU:
//! the module loads from its real declarations (Warp 1.19.0's output for
//! `tests/warp/kernels.py`) without touching the driver, binds its CPU code
//! (the argument layout checked), and runs it through every launch path:
//! the builder, recorded launches, the tape, typed positional launches.
//! The CPU code is `extern "C"` test doubles of the generated entry points
//! (see `native/mod.rs`); the access rules apply as on CUDA.

mod native;

use native::*;
use warp_launch::{
    AotModule, Array, Device, EmbeddedCpu, EmbeddedCpuKernel, Error, Pass, Tape, TypedArg,
    TypedArray,
};

fn module() -> AotModule {
    AotModule::from_embedded(&KERNELS).expect("the module loads without a driver")
}

fn host(v: &[f32]) -> Array {
    Array::from_slice(Device::Cpu, v, &[v.len()]).unwrap()
}

#[test]
fn a_module_loads_lists_and_runs_on_the_cpu_without_the_driver() {
    let m = module();
    assert!(m.has_cpu_code());
    assert_eq!(m.keys().count(), 10);
    let saxpy = m.kernel("saxpy").unwrap();
    assert!(saxpy.has_backward());
    let x = host(&[1.0, 2.0, 3.0, 4.0]);
    let y = host(&[10.0, 20.0, 30.0, 40.0]);
    saxpy
        .launch(4)
        .device("cpu")
        .inputs((2.0f32, &x, &y))
        .run()
        .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [12.0, 24.0, 36.0, 48.0]);
    // An integer argument converts to the float32 parameter, as on CUDA.
    saxpy
        .launch(4)
        .device("cpu")
        .inputs((1, &x, &y))
        .run()
        .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [13.0, 26.0, 39.0, 52.0]);
    // Nothing touched the driver: the kernel's CUDA function is undeclared,
    // and the first CUDA use reports that the module has no image.
    assert!(!m.is_declared("saxpy"));
    let e = m.image().map(str::to_string).unwrap_err();
    assert!(e.to_string().contains("no image"), "{e}");
    let e = saxpy.cuda_function(Pass::Forward).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("no image"), "{e}");
}

#[test]
fn the_2d_bounds_reach_the_kernel_and_an_empty_domain_calls_nothing() {
    let m = module();
    let fill = m.kernel("lean_fill").unwrap();
    let out = Array::zeros::<i32>(Device::Cpu, &[3, 4]).unwrap();
    fill.launch([3, 4])
        .device("cpu")
        .inputs(7i32)
        .outputs(&out)
        .run()
        .unwrap();
    let want: Vec<i32> = (0..3)
        .flat_map(|i| (0..4).map(move |j| 7 + i * 1000 + j))
        .collect();
    assert_eq!(out.to_vec::<i32>().unwrap(), want);
    // A third extent folds into coord_mult: each (i, j) runs twice, same values.
    fill.launch([3, 4, 2])
        .device("cpu")
        .inputs(5i32)
        .outputs(&out)
        .run()
        .unwrap();
    assert_eq!(out.to_vec::<i32>().unwrap()[5], 5 + 1000 + 1);
    let empty = Array::zeros::<i32>(Device::Cpu, &[0, 4]).unwrap();
    fill.launch([0, 4])
        .device("cpu")
        .inputs(1i32)
        .outputs(&empty)
        .run()
        .unwrap();
    // Every forward double notes its range when called; no launch of any
    // test here called one with an empty range.
    assert!(RANGES.lock().unwrap().iter().all(|r| r.0 < r.1));
}

#[test]
fn the_access_rules_apply_on_the_cpu_before_the_code_runs() {
    let m = module();
    let saxpy = m.kernel("saxpy").unwrap();
    let x = host(&[1.0; 8]);
    let y = host(&[0.0; 4]);
    // y has 4 elements, the domain 8: Warp's C++ would write past it.
    let e = saxpy
        .launch(8)
        .device("cpu")
        .inputs((2.0f32, &x, &y))
        .run()
        .unwrap_err();
    let Error::OutOfBounds(b) = &e else {
        panic!("expected OutOfBounds, got {e}");
    };
    assert_eq!(
        (b.param.as_str(), b.needed, b.shape.as_slice()),
        ("y", 8, &[4][..])
    );
    assert_eq!(y.to_vec::<f32>().unwrap(), [0.0; 4]);
    // The same for a recorded launch and its setters.
    let mut l = saxpy
        .launch(4)
        .device("cpu")
        .inputs((2.0f32, &x, &y))
        .record_cmd()
        .unwrap();
    assert!(matches!(
        l.set_dim(&[5]).map(|_| ()),
        Err(Error::OutOfBounds(_))
    ));
    l.launch().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0; 4]);
    // And for positional launches.
    let (a, xt, yt) = (
        2.0f32,
        x.typed::<f32, 1>().unwrap(),
        y.typed::<f32, 1>().unwrap(),
    );
    let args = [TypedArg::value(&a), (&xt).into(), (&yt).into()];
    let e = saxpy
        .launch_args(Pass::Forward, 8, None, &args)
        .unwrap_err();
    assert!(matches!(e, Error::OutOfBounds(_)), "{e}");
    saxpy.launch_args(Pass::Forward, 4, None, &args).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [4.0; 4]);
}

#[test]
fn unproven_kernels_are_refused_on_the_cpu_unless_unchecked() {
    // wp_access.cu: gather reads out[i] = x[idx[i]], an index from data.
    // SAFETY: no image and no CPU code: nothing to pair with the source.
    let bare =
        unsafe { warp_launch::EmbeddedModule::new("access", ACCESS_CU, ACCESS_META, &[], None) };
    let keys: Vec<String> = AotModule::from_embedded(&bare)
        .unwrap()
        .keys()
        .map(str::to_string)
        .collect();
    assert!(keys.iter().any(|k| k == "gather"));
    let others: Vec<(&'static str, &'static str)> = keys
        .iter()
        .filter(|k| *k != "gather")
        .map(|k| (&*String::leak(k.clone()), "no test double"))
        .collect();
    // SAFETY: the gather double implements wp_access.cu's gather over its layout.
    let cpu = unsafe {
        EmbeddedCpu::new(
            Box::leak(Box::new([EmbeddedCpuKernel::new(
                "gather",
                gather_forward,
                None,
                gather_layout,
            )])),
            Vec::leak(others),
            take_assert,
        )
    };
    // SAFETY: the gather double runs wp_access.cu's gather as that source
    // declares it (the pairing a Warp compile gives); there is no image.
    let m = AotModule::from_embedded(&unsafe {
        warp_launch::EmbeddedModule::new(
            "access",
            ACCESS_CU,
            ACCESS_META,
            &[],
            Some(Box::leak(Box::new(cpu))),
        )
    })
    .unwrap();
    let gather = m.kernel("gather").unwrap();
    let idx = Array::from_slice(Device::Cpu, &[3i32, 0, 2], &[3]).unwrap();
    let x = host(&[10.0, 11.0, 12.0, 13.0]);
    let out = host(&[0.0; 3]);
    let e = gather
        .launch(3)
        .device("cpu")
        .inputs((&idx, &x))
        .outputs(&out)
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::Unproven(_)), "{e}");
    assert_eq!(out.to_vec::<f32>().unwrap(), [0.0; 3]);
    let b = gather
        .launch(3)
        .device("cpu")
        .inputs((&idx, &x))
        .outputs(&out);
    // SAFETY: every idx[i] is below x's 4 elements.
    unsafe { b.unchecked() }.run().unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [13.0, 10.0, 12.0]);
    let (it, xt, ot) = (
        idx.typed::<i32, 1>().unwrap(),
        x.typed::<f32, 1>().unwrap(),
        out.typed::<f32, 1>().unwrap(),
    );
    let args = [(&it).into(), (&xt).into(), (&ot).into()];
    assert!(matches!(
        gather.launch_args(Pass::Forward, 3, None, &args),
        Err(Error::Unproven(_))
    ));
    out.zero().unwrap();
    // SAFETY: as above.
    unsafe { gather.launch_args_unchecked(Pass::Forward, 3, None, &args) }.unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [13.0, 10.0, 12.0]);
}

#[test]
fn the_tape_runs_the_backward_entry_point() {
    let m = module();
    let saxpy = m.kernel("saxpy").unwrap();
    let x = host(&[1.0, 2.0, 3.0]).with_grad().unwrap();
    let y = host(&[0.0; 3]).with_grad().unwrap();
    let mut tape = Tape::new();
    tape.record(|| {
        saxpy
            .launch(3)
            .device("cpu")
            .inputs((3.0f32, &x))
            .outputs(&y)
            .run()
    })
    .unwrap();
    assert_eq!(tape.launches().len(), 1);
    assert_eq!(y.to_vec::<f32>().unwrap(), [3.0, 6.0, 9.0]);
    // y has 3 elements: Warp's backward takes a one-element loss.
    let e = tape.backward(&y).unwrap_err();
    assert!(
        matches!(&e, warp_launch::Error::LossShape { shape, .. } if shape == &[3]),
        "{e}"
    );
    tape.backward_with(&[(&y, &host(&[1.0; 3]))]).unwrap();
    // dy/dx = a, y's gradient seeded with ones.
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), [3.0; 3]);
    // A kernel whose CPU code has no backward entry point: the tape says so.
    let fill = m.kernel("lean_fill").unwrap();
    let out = Array::zeros::<i32>(Device::Cpu, &[2, 2]).unwrap();
    let e = fill
        .launch([2, 2])
        .device("cpu")
        .pass(Pass::Adjoint)
        .inputs(1i32)
        .outputs(&out)
        .adj_inputs(0i32)
        .adj_outputs(None::<&Array>)
        .run()
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::NoCpuFunction {
                pass: Pass::Adjoint,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn typed_launches_and_their_replays_run_the_compiled_code() {
    let m = module();
    let saxpy = m.kernel("saxpy").unwrap();
    let x = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[1.0, 2.0], [2]).unwrap();
    let y = TypedArray::<f32, 1>::zeros(Device::Cpu, [2]).unwrap();
    let a = 0.5f32;
    saxpy
        .launch_args(
            Pass::Forward,
            2,
            None,
            &[TypedArg::value(&a), (&x).into(), (&y).into()],
        )
        .unwrap();
    assert_eq!(y.to_vec().unwrap(), [0.5, 1.0]);
    let l = saxpy
        .record_args(
            Pass::Forward,
            2,
            &[TypedArg::value(&a), (&x).into(), (&y).into()],
        )
        .unwrap();
    assert_eq!(l.device(), Device::Cpu);
    l.launch().unwrap();
    l.launch().unwrap();
    assert_eq!(y.to_vec().unwrap(), [1.5, 3.0]);
    // Recorded by a tape, differentiated through the backward entry point.
    let xg = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[1.0, 2.0], [2])
        .unwrap()
        .with_grad()
        .unwrap();
    let yg = TypedArray::<f32, 1>::zeros(Device::Cpu, [2])
        .unwrap()
        .with_grad()
        .unwrap();
    let mut tape = Tape::new();
    let two = 2.0f32;
    tape.record(|| {
        saxpy.launch_args(
            Pass::Forward,
            2,
            None,
            &[TypedArg::value(&two), (&xg).into(), (&yg).into()],
        )
    })
    .unwrap();
    let ones = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[1.0, 1.0], [2]).unwrap();
    tape.backward_with(&[(yg.as_array(), ones.as_array())])
        .unwrap();
    assert_eq!(xg.grad().unwrap().to_vec::<f32>().unwrap(), [2.0, 2.0]);
    // The backward pass positionally: forward arguments, then adjoints.
    let gx = TypedArray::<f32, 1>::zeros(Device::Cpu, [2]).unwrap();
    let gy = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[1.0, 10.0], [2]).unwrap();
    let zero = 0.0f32;
    saxpy
        .launch_args(
            Pass::Adjoint,
            2,
            None,
            &[
                TypedArg::value(&two),
                (&x).into(),
                (&y).into(),
                TypedArg::value(&zero),
                (&gx).into(),
                (&gy).into(),
            ],
        )
        .unwrap();
    assert_eq!(gx.to_vec().unwrap(), [2.0, 20.0]);
}

#[test]
fn a_failed_kernel_assertion_is_an_error_naming_the_kernel() {
    let m = module();
    let fill = m.kernel("lean_fill").unwrap();
    let out = Array::zeros::<i32>(Device::Cpu, &[2, 3]).unwrap();
    let e = fill
        .launch([2, 3])
        .device("cpu")
        .inputs(-1i32)
        .outputs(&out)
        .run()
        .unwrap_err();
    let shown = e.to_string();
    assert!(
        matches!(&e, Error::KernelAssert { kernel, pass: Pass::Forward, message } if kernel == "lean_fill" && message.contains("value >= 0")),
        "{e:?}"
    );
    assert!(
        shown.contains("lean_fill") && shown.contains("assertion failed"),
        "{shown}"
    );
    // The record was taken: the next launch succeeds.
    fill.launch([2, 3])
        .device("cpu")
        .inputs(1i32)
        .outputs(&out)
        .run()
        .unwrap();
}

#[test]
fn unsupported_kernels_are_refused_on_the_cpu_with_the_recorded_reason() {
    let m = module();
    let k = m.kernel("chain_sin").unwrap();
    let x = host(&[1.0; 2]);
    let y = host(&[0.0; 2]);
    let e = k
        .launch(2)
        .device("cpu")
        .inputs((&x, 1.0f32))
        .outputs(&y)
        .run()
        .unwrap_err();
    assert!(
        matches!(&e, Error::CpuUnsupported { kernel, reason } if kernel == "chain_sin" && reason.contains("uses tiles")),
        "{e:?}"
    );
    assert!(e.to_string().contains("Kernel::with_cpu"), "{e}");
    // A Rust implementation still replaces it.
    let rust = k.with_cpu(
        warp_launch::cpu_each_fn(|args, each| {
            each.run(|t| {
                let i = t.tid();
                let v = args.array::<f32>(0)?.get(i)?;
                args.array::<f32>(2)?.set(i, v.sin())
            })
        }),
        None,
    );
    rust.launch(2)
        .device("cpu")
        .inputs((&x, 1.0f32))
        .outputs(&y)
        .run()
        .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.0f32.sin(); 2]);
}

#[test]
fn cpu_code_that_does_not_match_the_declarations_is_refused_at_load() {
    let err = |cpu: EmbeddedCpu| {
        // SAFETY: not kept: the CPU code differs from the source on purpose,
        // the load must refuse it, and nothing is run.
        AotModule::from_embedded(&unsafe { module_with(cpu) })
            .map(|_| ())
            .unwrap_err()
    };
    let with = |kernels: &'static [EmbeddedCpuKernel], unsupported: &'static [(&str, &str)]| {
        // SAFETY: the doubles implement the kernels of their keys (the
        // layouts are what these tests check).
        unsafe { EmbeddedCpu::new(kernels, unsupported, take_assert) }
    };
    let others: &'static [(&str, &str)] = Vec::leak(
        OTHERS
            .iter()
            .copied()
            .chain([
                ("lean_fill", "-"),
                ("chain_loss", "-"),
                ("count_visits", "-"),
            ])
            .collect(),
    );
    // y reported 8 bytes late.
    // SAFETY: a double whose layout is wrong on purpose; never run.
    let shifted: &'static [EmbeddedCpuKernel] = Box::leak(Box::new([unsafe {
        EmbeddedCpuKernel::new("saxpy", saxpy_forward, None, saxpy_layout_shifted)
    }]));
    let e = err(with(shifted, others));
    let Error::CpuLayout(l) = &e else {
        panic!("expected CpuLayout, got {e:?}");
    };
    assert_eq!(
        (l.kernel.as_str(), l.field.as_str(), l.declared, l.compiled),
        ("saxpy", "y", 64, 72)
    );
    let shown = e.to_string();
    for part in [
        "Warp module 'kernels'",
        "'saxpy'",
        "field 'y' at offset 72",
        "gives 64",
        "rebuild",
    ] {
        assert!(shown.contains(part), "{part}: {shown}");
    }
    // Two fields where saxpy has three.
    // SAFETY: as above.
    let short: &'static [EmbeddedCpuKernel] = Box::leak(Box::new([unsafe {
        EmbeddedCpuKernel::new("saxpy", saxpy_forward, None, saxpy_layout_short)
    }]));
    let e = err(with(short, others)).to_string();
    assert!(
        e.contains("2 field(s)") && e.contains("3 parameter(s) (a, x, y)"),
        "{e}"
    );
    // A key the source does not declare.
    // SAFETY: as above.
    let stray: &'static [EmbeddedCpuKernel] = Box::leak(Box::new([
        unsafe { EmbeddedCpuKernel::new("saxpy", saxpy_forward, None, saxpy_layout) },
        unsafe { EmbeddedCpuKernel::new("saxpy2", saxpy_forward, None, saxpy_layout) },
    ]));
    let e = err(with(stray, others));
    assert!(
        matches!(&e, Error::CpuCode { kernel, message, .. } if kernel == "saxpy2" && message.contains("declares no kernel 'saxpy2'")),
        "{e:?}"
    );
    // A declared kernel the CPU code does not mention.
    let e = err(with(&[], OTHERS));
    assert!(
        matches!(&e, Error::CpuCode { message, .. } if message.contains("neither runs it nor lists it")),
        "{e:?}"
    );
}
