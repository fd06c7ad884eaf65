//! Positional launches on the CPU device (no GPU): every refusal is the
//! builder's own error, results equal the builder's, adjoints and the tape
//! work; the CUDA-only checks (where arrays live, the launch-shape rule)
//! are pure logic, run here with a CUDA device's options.

use std::sync::Arc;

use super::*;
use crate::abi::DType;
use crate::array::{Array, TypedArray};
use crate::cpu::cpu_each_fn;
use crate::launch::builder::LaunchBuilder;
use crate::launch::launch::check_accesses;
use crate::signature::{AccessTarget, AxisIndex};
use crate::{Accesses, KernelSpec, Tape};

const KERNELS_CU: &str = include_str!("../../../tests/fixtures/wp_kernels.cu");
const KERNELS_META: &str = include_str!("../../../tests/fixtures/wp_kernels.meta");
const ACCESS_CU: &str = include_str!("../../../tests/fixtures/wp_access.cu");
const ACCESS_META: &str = include_str!("../../../tests/fixtures/wp_access.meta");
const TILES_CU: &str = include_str!("../../../tests/fixtures/wp_tiles.cu");
const TILES_META: &str = include_str!("../../../tests/fixtures/wp_tiles.meta");

/// Kernel `key` as `AotModule` declares it from a real Warp 1.19.0 source,
/// with CPU bodies (no GPU here).
fn warp_kernel(cu: &str, meta: &str, key: &str, fwd: CpuFn, bwd: Option<CpuFn>) -> Kernel {
    crate::aot::declarations(cu, "wp_fixture.cu", meta, "m.meta")
        .unwrap()
        .into_iter()
        .find(|d| d.key == key)
        .unwrap()
        .spec
        .declare()
        .unwrap()
        .with_cpu(fwd, bwd)
}

use crate::cpu::CpuFn;

/// Warp's saxpy (`y[i] = a * x[i] + y[i]`), with a CPU body.
fn saxpy() -> Kernel {
    warp_kernel(
        KERNELS_CU,
        KERNELS_META,
        "saxpy",
        cpu_each_fn(|args, each| {
            each.run(|t| {
                let i = t.tid();
                let a: f32 = args.value(0)?;
                let (x, y) = (args.array::<f32>(1)?, args.array::<f32>(2)?);
                y.set(i, a * x.get(i)? + y.get(i)?)
            })
        }),
        None,
    )
}

/// Warp's chain_sin (`y[i] = sin(x[i]) * a`), forward and backward.
fn chain_sin() -> Kernel {
    warp_kernel(
        KERNELS_CU,
        KERNELS_META,
        "chain_sin",
        cpu_each_fn(|args, each| {
            each.run(|t| {
                let i = t.tid();
                let a: f32 = args.value(1)?;
                args.array::<f32>(2)?
                    .set(i, args.array::<f32>(0)?.get(i)?.sin() * a)
            })
        }),
        Some(cpu_each_fn(|args, each| {
            each.run(|t| {
                // adj_x (3), adj_a (4), adj_y (5)
                let i = t.tid();
                let a: f32 = args.value(1)?;
                let x = args.array::<f32>(0)?.get(i)?;
                let gy = args.array::<f32>(5)?.get(i)?;
                args.array::<f32>(3)?.add(i, gy * a * x.cos())
            })
        })),
    )
}

fn f32s(data: &[f32]) -> Array {
    Array::from_slice(Device::Cpu, data, &[data.len()]).unwrap()
}

fn cuda_opts(pass: Pass) -> Options {
    Options {
        device: Device::Cuda(0),
        pass,
        block_dim: 256,
        max_blocks: MaxBlocks::Unlimited,
        mode: AccessMode::Checked,
        cooperative: false,
        unchecked: false,
        tiled: false,
    }
}

#[test]
fn saxpy_equals_the_builder_on_the_cpu() {
    let k = saxpy();
    let xs: Vec<f32> = (0..37).map(|i| i as f32 * 0.5 - 3.0).collect();
    let (x1, y1) = (f32s(&xs), f32s(&[1.5; 37]));
    let (x2, y2) = (f32s(&xs), f32s(&[1.5; 37]));
    k.launch(37)
        .inputs((2.5f32, &x1, &y1))
        .device("cpu")
        .run()
        .unwrap();
    let a = 2.5f32;
    k.launch_args(
        Pass::Forward,
        37,
        None,
        &[TypedArg::value(&a), (&x2).into(), (&y2).into()],
    )
    .unwrap();
    let want: Vec<f32> = xs.iter().map(|x| 2.5 * x + 1.5).collect();
    assert_eq!(y1.to_vec::<f32>().unwrap(), want);
    assert_eq!(y2.to_vec::<f32>().unwrap(), want);
    // A smaller domain touches a prefix only; size 0 touches nothing.
    k.launch_args(
        Pass::Forward,
        [3usize],
        None,
        &[TypedArg::value(&a), (&x2).into(), (&y2).into()],
    )
    .unwrap();
    k.launch_args(
        Pass::Forward,
        0,
        None,
        &[TypedArg::value(&a), (&x2).into(), (&y2).into()],
    )
    .unwrap();
    let got = y2.to_vec::<f32>().unwrap();
    assert_eq!(&got[3..], &want[3..]);
    assert_eq!(got[0], 2.5 * xs[0] + want[0]);
}

#[test]
fn typed_arrays_pass_as_typed_args() {
    let k = saxpy();
    let x = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[1.0, 2.0], [2]).unwrap();
    let y = TypedArray::<f32, 1>::zeros(Device::Cpu, [2]).unwrap();
    assert_eq!(y.shape(), [2]);
    let a = 3.0f32;
    k.launch_args(
        Pass::Forward,
        2,
        None,
        &[TypedArg::value(&a), (&x).into(), (&y).into()],
    )
    .unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![3.0, 6.0]);
    // TypedArray checks dtype and ndim when it is made, naming both.
    let m = Array::zeros::<f32>(Device::Cpu, &[2, 3]).unwrap();
    let e = m.typed::<f32, 1>().unwrap_err().to_string();
    assert!(
        e.contains("TypedArray<float32, 1>")
            && e.contains("has 2")
            && e.contains("[2, 3]")
            && e.contains("TypedArray<float32, 2>"),
        "{e}"
    );
    let e = m.typed::<i32, 2>().unwrap_err().to_string();
    assert!(e.contains("float32") && e.contains("i32"), "{e}");
    assert_eq!(m.typed::<f32, 2>().unwrap().shape(), [2, 3]);
}

/// Every argument fault: the typed path refuses with the builder's error,
/// word for word.
#[test]
fn refusals_are_the_builders_errors() {
    let k = saxpy();
    let x = f32s(&[1.0; 4]);
    let xi = Array::zeros::<i32>(Device::Cpu, &[4]).unwrap();
    let x2 = Array::zeros::<f32>(Device::Cpu, &[2, 2]).unwrap();
    let a = 2.0f32;
    let typed = |args: &[TypedArg<'_>]| {
        k.launch_args(Pass::Forward, 4, None, args)
            .unwrap_err()
            .to_string()
    };
    let built = |b: LaunchBuilder<'_>| b.device("cpu").run().unwrap_err().to_string();
    let cases = [
        (
            "count",
            typed(&[TypedArg::value(&a), (&x).into()]),
            built(k.launch(4).inputs((2.0f32, &x))),
        ),
        (
            "array for a value",
            typed(&[(&x).into(), (&x).into(), (&x).into()]),
            built(k.launch(4).inputs((&x, &x, &x))),
        ),
        (
            "dtype",
            typed(&[TypedArg::value(&a), (&xi).into(), (&x).into()]),
            built(k.launch(4).inputs((2.0f32, &xi, &x))),
        ),
        (
            "ndim",
            typed(&[TypedArg::value(&a), (&x2).into(), (&x).into()]),
            built(k.launch(4).inputs((2.0f32, &x2, &x))),
        ),
        (
            "dim",
            k.launch_args(
                Pass::Forward,
                -3,
                None,
                &[TypedArg::value(&a), (&x).into(), (&x).into()],
            )
            .unwrap_err()
            .to_string(),
            built(k.launch(-3).inputs((2.0f32, &x, &x))),
        ),
        (
            "too many extents",
            k.launch_args(
                Pass::Forward,
                [1, 1, 1, 1, 1],
                None,
                &[TypedArg::value(&a), (&x).into(), (&x).into()],
            )
            .unwrap_err()
            .to_string(),
            built(k.launch([1, 1, 1, 1, 1]).inputs((2.0f32, &x, &x))),
        ),
        (
            "no backward",
            k.launch_args(
                Pass::Adjoint,
                4,
                None,
                &[
                    TypedArg::value(&a),
                    (&x).into(),
                    (&x).into(),
                    TypedArg::value(&a),
                    (&x).into(),
                    (&x).into(),
                ],
            )
            .unwrap_err()
            .to_string(),
            built(
                k.launch(4)
                    .inputs((2.0f32, &x, &x))
                    .adj_inputs((0.0f32, &x, &x))
                    .pass(Pass::Adjoint),
            ),
        ),
    ];
    for (what, t, b) in cases {
        assert_eq!(t, b, "{what}");
    }
    // The messages name the kernel and the parameter.
    let e = typed(&[TypedArg::value(&a), (&xi).into(), (&x).into()]);
    assert!(
        e.contains("kernel 'saxpy', argument 1 'x'") && e.contains("int32"),
        "{e}"
    );
    // A value for an array, and value bytes of another size: the same form.
    let e = k
        .launch_args(
            Pass::Forward,
            4,
            None,
            &[TypedArg::value(&a), TypedArg::value(&a), (&x).into()],
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::Argument(a) if a.param == "x" && a.index == 1),
        "{e}"
    );
    insta::assert_snapshot!("value_for_array", e.to_string());
    let wide = 2.0f64;
    let e = k
        .launch_args(
            Pass::Forward,
            4,
            None,
            &[TypedArg::value(&wide), (&x).into(), (&x).into()],
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::Argument(a) if a.param == "a" && a.index == 0),
        "{e}"
    );
    insta::assert_snapshot!("value_size", e.to_string());
}

/// Arrays the launch device cannot reach: refused as the builder refuses
/// them (its own check of the same argument), the adjoint named as such.
#[test]
fn mixed_devices_are_refused_as_the_builder_refuses_them() {
    let k = chain_sin();
    let x = f32s(&[0.5; 4]);
    let a = 1.5f32;
    // Host arrays for a CUDA launch (the device of a stream or of another
    // array): pure logic, no driver call.
    let args = [(&x).into(), TypedArg::value(&a), (&x).into()];
    let e = k
        .check_typed(Pass::Forward, Device::Cuda(0), AccessMode::Relaxed, &args)
        .unwrap_err();
    let site = Site {
        kernel: "chain_sin",
        index: 0,
        name: "x",
    };
    let want = bind::check(
        &site,
        &k.params()[0].kind,
        &Arg::Array(x.clone()),
        Device::Cuda(0),
        AccessMode::Relaxed,
    )
    .map(|_| ())
    .unwrap_err();
    assert_eq!(e.to_string(), want.to_string());
    assert!(
        matches!(&e, Error::Access(a) if a.param == "x" && a.launch == "cuda:0"),
        "{e}"
    );
    let adj = [
        (&x).into(),
        TypedArg::value(&a),
        (&x).into(),
        (&x).into(),
        TypedArg::value(&a),
        (&x).into(),
    ];
    let e = k
        .check_typed(Pass::Adjoint, Device::Cuda(0), AccessMode::Strict, &adj)
        .unwrap_err();
    assert!(matches!(&e, Error::Access(a) if a.param == "x"), "{e}");
    // The device: the first CUDA array's, else the CPU for host arrays, else
    // the default device (cuda:0 with a driver, "cpu" without one).
    assert_eq!(launch_device(&args, None), Device::Cpu);
    assert_eq!(
        launch_device(&[TypedArg::value(&a)], None),
        Device::current()
    );
}

/// The launch-shape rule: a domain larger than an array the kernel indexes
/// with it is refused, with the builder's error; unproven kernels too.
#[test]
fn the_launch_shape_rule_is_checked() {
    let none = || cpu_each_fn(|_, each| each.run(|_| Ok(())));
    let k = warp_kernel(KERNELS_CU, KERNELS_META, "saxpy", none(), None);
    let (x, y, short) = (f32s(&[0.0; 8]), f32s(&[0.0; 8]), f32s(&[0.0; 5]));
    let a = 1.0f32;
    let opts = cuda_opts(Pass::Forward);
    let check = |dim: &[i64], args: &[TypedArg<'_>]| {
        let plan = k.typed_plan(dim, &opts).unwrap();
        k.check_typed_accesses(&opts, dim, &plan, args)
    };
    check(&[8], &[TypedArg::value(&a), (&x).into(), (&y).into()]).unwrap();
    let e = check(&[8], &[TypedArg::value(&a), (&x).into(), (&short).into()]).unwrap_err();
    let plan = k.typed_plan(&[8], &opts).unwrap();
    let owned = [
        Arg::Value(Value::of(a)),
        Arg::Array(x.clone()),
        Arg::Array(short.clone()),
    ];
    let want = check_accesses(&k, &opts, &[8], &plan, |i| owned.get(i), None).unwrap_err();
    assert_eq!(e.to_string(), want.to_string());
    assert!(
        matches!(&e, Error::OutOfBounds(b) if b.param == "y" && b.needed == 8 && b.shape == [5]),
        "{e}"
    );
    // Adjoints: adj_y shorter than the domain.
    let kb = warp_kernel(KERNELS_CU, KERNELS_META, "chain_sin", none(), Some(none()));
    let o = cuda_opts(Pass::Adjoint);
    let plan = kb.typed_plan(&[8], &o).unwrap();
    let adj = [
        (&x).into(),
        TypedArg::value(&a),
        (&y).into(),
        (&x).into(),
        TypedArg::value(&a),
        (&short).into(),
    ];
    let e = kb.check_typed_accesses(&o, &[8], &plan, &adj).unwrap_err();
    assert!(
        matches!(&e, Error::OutOfBounds(b) if b.param == "adj_y" && b.needed == 8),
        "{e}"
    );
    // A kernel whose accesses no rule states is refused outright.
    let gather = warp_kernel(ACCESS_CU, ACCESS_META, "gather", none(), None);
    let idx = Array::zeros::<i32>(Device::Cpu, &[4]).unwrap();
    let plan = gather.typed_plan(&[4], &opts).unwrap();
    let e = gather
        .check_typed_accesses(
            &opts,
            &[4],
            &plan,
            &[(&idx).into(), (&x).into(), (&y).into()],
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::Unproven(u) if u.kernel == "gather"),
        "{e}"
    );
    // Unchecked positional launches skip the access rules, and only them:
    // the unproven kernel and a domain past `short` pass, a wrong dtype
    // does not.
    let unchecked = gather.typed_options(
        Device::Cuda(0),
        Pass::Forward,
        AccessMode::Checked,
        How::UNCHECKED,
    );
    gather
        .check_typed_accesses(
            &unchecked,
            &[4],
            &plan,
            &[(&idx).into(), (&x).into(), (&y).into()],
        )
        .unwrap();
    let u = k.typed_options(
        Device::Cuda(0),
        Pass::Forward,
        AccessMode::Checked,
        How::UNCHECKED,
    );
    let plan8 = k.typed_plan(&[8], &u).unwrap();
    k.check_typed_accesses(
        &u,
        &[8],
        &plan8,
        &[TypedArg::value(&a), (&x).into(), (&short).into()],
    )
    .unwrap();
    let e = k
        .check_typed(
            Pass::Forward,
            Device::Cpu,
            AccessMode::Checked,
            &[TypedArg::value(&a), (&idx).into(), (&y).into()],
        )
        .unwrap_err();
    assert!(matches!(&e, Error::Argument { .. }), "{e}");
    // Tile kernels: whole blocks only.
    let tiles = warp_kernel(TILES_CU, TILES_META, "scale_tiles", none(), None);
    let o = Options {
        block_dim: 64,
        ..cuda_opts(Pass::Forward)
    };
    let m = Array::zeros::<f32>(Device::Cpu, &[37, 50]).unwrap();
    let plan = tiles.typed_plan(&[5, 4], &o).unwrap();
    let e = tiles
        .check_typed_accesses(
            &o,
            &[5, 4],
            &plan,
            &[(&m).into(), TypedArg::value(&a), (&m).into()],
        )
        .unwrap_err();
    assert!(matches!(e, Error::PartialTileBlock { .. }), "{e}");
}

#[test]
fn adjoint_launches_take_params_then_adjoints() {
    let k = chain_sin();
    let xs = [0.1f32, 0.5, 1.0, -0.7];
    let a = 1.5f32;
    let run = |typed: bool| {
        let x = f32s(&xs);
        let y = f32s(&[0.0; 4]);
        let adj_x = f32s(&[0.0; 4]);
        let adj_y = f32s(&[1.0, 2.0, 3.0, 4.0]);
        if typed {
            let zero = 0.0f32;
            k.launch_args(
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
            k.launch(4)
                .inputs((&x, a))
                .outputs(&y)
                .adj_inputs((&adj_x, 0.0f32))
                .adj_outputs(&adj_y)
                .pass(Pass::Adjoint)
                .device("cpu")
                .run()
                .unwrap();
        }
        adj_x.to_vec::<f32>().unwrap()
    };
    let (t, b) = (run(true), run(false));
    assert_eq!(t, b);
    for (i, (g, x)) in t.iter().zip(xs).enumerate() {
        let want = (i + 1) as f32 * a * x.cos();
        assert!((g - want).abs() < 1e-6, "{g} vs {want}");
    }
}

#[test]
fn a_recording_tape_records_forward_launches() {
    let k = chain_sin();
    let loss_k = warp_kernel(
        KERNELS_CU,
        KERNELS_META,
        "chain_loss",
        cpu_each_fn(|args, each| {
            each.run(|t| {
                let y = args.array::<f32>(0)?.get(t.tid())?;
                args.array::<f32>(1)?.add(0, y * y)
            })
        }),
        Some(cpu_each_fn(|args, each| {
            each.run(|t| {
                let i = t.tid();
                let y = args.array::<f32>(0)?.get(i)?;
                let gl = args.array::<f32>(3)?.get(0)?;
                args.array::<f32>(2)?.add(i, 2.0 * y * gl)
            })
        })),
    );
    let xs = [0.1f32, 0.5, 1.0, -0.7];
    let x = f32s(&xs).with_grad().unwrap();
    let y = f32s(&[0.0; 4]).with_grad().unwrap();
    let loss = f32s(&[0.0]).with_grad().unwrap();
    let a = 1.5f32;
    let mut tape = Tape::new();
    tape.record(|| -> Result<()> {
        k.launch_args(
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
        assert!((g - exact).abs() < 1e-5, "{g} vs {exact}");
    }
}

#[test]
fn recorded_launches_replay_and_check_their_setters() {
    let k = saxpy();
    let x = f32s(&[1.0, 1.0]);
    let y = f32s(&[0.0, 0.0]);
    let a = 0.0f32;
    let mut l = k
        .record_args(
            Pass::Forward,
            2,
            &[TypedArg::value(&a), (&x).into(), (&y).into()],
        )
        .unwrap();
    assert_eq!((l.device(), l.dim()), (Device::Cpu, &[2i64][..]));
    for i in 0..10 {
        l.set_param_by_name("a", i as f32).unwrap();
        l.launch().unwrap();
    }
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![45.0, 45.0]);
    let e = k
        .record_args(Pass::Forward, 2, &[TypedArg::value(&a), (&x).into()])
        .unwrap_err();
    assert!(matches!(e, Error::ArgumentCount { given: 2, .. }), "{e}");
}

#[test]
fn tiled_launches_append_the_block_dimension() {
    // scale_tiles (i, j = wp.tid()) on the CPU: the block dimension is 1, so
    // launch_tiled([5, 4]) visits each (i, j) of [5, 4] once.
    let k = warp_kernel(
        TILES_CU,
        TILES_META,
        "scale_tiles",
        cpu_each_fn(|args, each| {
            each.run(|t| {
                let (i, j) = t.tid2();
                args.array::<f32>(2)?.add((i, j), 1.0)
            })
        }),
        None,
    );
    let a = Array::zeros::<f32>(Device::Cpu, &[37, 50]).unwrap();
    let out = Array::zeros::<f32>(Device::Cpu, &[37, 50]).unwrap();
    let s = 0.5f32;
    let args = [(&a).into(), TypedArg::value(&s), (&out).into()];
    k.launch_tiled_args(Pass::Forward, [5, 4], None, &args)
        .unwrap();
    let v = out.to_vec::<f32>().unwrap();
    let visited: f32 = v.iter().sum();
    assert_eq!(visited, 20.0);
    assert_eq!((v[0], v[3], v[4], v[4 * 50 + 3]), (1.0, 1.0, 0.0, 1.0));
    let e = k
        .launch_tiled_args(Pass::Forward, [1, 2, 3, 4], None, &args)
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Dim {
                error: domain::DimError::TiledTooManyDims { given: 4 },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn signatures_are_checked_by_name_and_kind() {
    let k = saxpy();
    let f32_array = |ndim| ParamKind::Array {
        dtype: DType::FLOAT32,
        ndim,
    };
    k.check_signature(&[
        ("a", ParamKind::Value(DType::FLOAT32)),
        ("x", f32_array(Some(1))),
        ("y", f32_array(Some(1))),
    ])
    .unwrap();
    let refuse = |params: &[(&str, ParamKind)]| match k.check_signature(params).unwrap_err() {
        Error::Signature { index, .. } => index,
        e => panic!("{e}"),
    };
    assert_eq!(
        refuse(&[
            ("a", ParamKind::Value(DType::FLOAT64)),
            ("x", f32_array(Some(1))),
            ("y", f32_array(Some(1))),
        ]),
        0
    );
    assert_eq!(
        refuse(&[
            ("a", ParamKind::Value(DType::FLOAT32)),
            ("x", f32_array(Some(2))),
            ("y", f32_array(Some(1))),
        ]),
        1
    );
    assert_eq!(
        refuse(&[
            ("a", ParamKind::Value(DType::FLOAT32)),
            ("x", f32_array(Some(1))),
            ("z", f32_array(Some(1))),
        ]),
        2
    );
    assert_eq!(
        refuse(&[
            ("a", ParamKind::Value(DType::FLOAT32)),
            ("x", f32_array(Some(1))),
        ]),
        2
    );
    let e = k
        .check_signature(&[
            ("a", ParamKind::Value(DType::FLOAT32)),
            ("x", f32_array(Some(1))),
            ("y", f32_array(Some(1))),
            ("z", ParamKind::Value(DType::INT32)),
        ])
        .unwrap_err();
    insta::assert_snapshot!("signature_extra", e.to_string());
    let e = k
        .check_signature(&[
            ("a", ParamKind::Value(DType::FLOAT32)),
            (
                "x",
                ParamKind::Array {
                    dtype: DType::INT32,
                    ndim: Some(1),
                },
            ),
            ("y", f32_array(Some(1))),
        ])
        .unwrap_err();
    insta::assert_snapshot!("signature_dtype", e.to_string());
    // Structs: the layout computed from the same fields matches; a field at
    // another offset does not.
    let us = warp_kernel(
        KERNELS_CU,
        KERNELS_META,
        "use_struct",
        cpu_each_fn(|_, each| each.run(|_| Ok(()))),
        None,
    );
    let ParamKind::Struct(st) = &us.params()[0].kind else {
        panic!("use_struct takes a struct first");
    };
    let vec3 = |n| ParamKind::Array {
        dtype: DType::VEC3F,
        ndim: n,
    };
    let fields = |count: ParamKind| {
        vec![
            ("scale".to_string(), ParamKind::Value(DType::FLOAT32)),
            ("offset".to_string(), ParamKind::Value(DType::VEC3F)),
            ("count".to_string(), count),
        ]
    };
    let same = Arc::new(StructType::new(
        "Params",
        fields(ParamKind::Value(DType::INT32)),
    ));
    us.check_signature(&[
        ("p", ParamKind::Struct(same)),
        ("x", vec3(Some(1))),
        ("out", vec3(Some(1))),
    ])
    .unwrap();
    let wider = Arc::new(StructType::new(
        st.name.clone(),
        fields(ParamKind::Value(DType::INT64)),
    ));
    let e = us
        .check_signature(&[
            ("p", ParamKind::Struct(wider)),
            ("x", vec3(Some(1))),
            ("out", vec3(Some(1))),
        ])
        .unwrap_err();
    assert!(matches!(e, Error::Signature { index: 0, .. }), "{e}");
}

#[test]
fn struct_values_are_checked_by_name_and_size() {
    let us = warp_kernel(
        KERNELS_CU,
        KERNELS_META,
        "use_struct",
        cpu_each_fn(|args, each| {
            each.run(|t| {
                let i = t.tid();
                let x = args.array::<[f32; 3]>(1)?.get(i)?;
                args.array::<[f32; 3]>(2)?.set(i, [x[0] * 2.0, x[1], x[2]])
            })
        }),
        None,
    );
    let x = Array::from_slice(Device::Cpu, &[[1.0f32, 2.0, 3.0]; 2], &[2]).unwrap();
    let out = Array::zeros::<[f32; 3]>(Device::Cpu, &[2]).unwrap();
    // SAFETY: plain numbers, no device address.
    let p = unsafe { StructValue::from_bytes("Params", &[0u8; 20]) };
    us.launch_args(
        Pass::Forward,
        2,
        None,
        &[(&p).into(), (&x).into(), (&out).into()],
    )
    .unwrap();
    assert_eq!(out.to_vec::<[f32; 3]>().unwrap(), vec![[2.0, 2.0, 3.0]; 2]);
    // SAFETY: as above.
    let short = unsafe { StructValue::from_bytes("Params", &[0u8; 16]) };
    let typed = us
        .launch_args(
            Pass::Forward,
            2,
            None,
            &[(&short).into(), (&x).into(), (&out).into()],
        )
        .unwrap_err()
        .to_string();
    let built = us
        .launch(2)
        .inputs((short.clone(), &x, &out))
        .device("cpu")
        .run()
        .unwrap_err()
        .to_string();
    assert_eq!(typed, built);
}

/// The declared access rules of a CUDA C kernel reach positional launches
/// too (the rules come from the kernel, not from the launch path).
#[test]
fn declared_rules_apply_to_positional_launches() {
    let k = KernelSpec::new("scale2d", 2)
        .array::<f32>("a", 2)
        .indexed_by_thread("a")
        .declare()
        .unwrap()
        .with_cpu(cpu_each_fn(|_, each| each.run(|_| Ok(()))), None);
    assert!(matches!(
        k.inner.spec.accesses(Pass::Forward),
        Accesses::Checked(l) if l.len() == 1 && l[0].target == AccessTarget::Param
            && l[0].indices == [AxisIndex::Thread(0), AxisIndex::Thread(1)]
    ));
    let a = Array::zeros::<f32>(Device::Cpu, &[2, 3]).unwrap();
    let opts = cuda_opts(Pass::Forward);
    for (dim, ok) in [([2i64, 3], true), ([2, 4], false), ([3, 3], false)] {
        let plan = k.typed_plan(&dim, &opts).unwrap();
        let r = k.check_typed_accesses(&opts, &dim, &plan, &[(&a).into()]);
        assert_eq!(r.is_ok(), ok, "{dim:?}: {r:?}");
    }
}

/// Host work of one launch, without the driver: the builder's
/// build-and-check (`record_cmd`) against the positional path's checks and
/// argument encoding. Run with
/// `cargo test --release -p warp-launch --lib host_work -- --ignored --nocapture`.
#[test]
#[ignore = "timing: run in release with --ignored --nocapture"]
fn host_work_of_builder_and_positional_launches() {
    use std::hint::black_box;
    use std::time::Instant;
    const N: usize = 256;
    const CALLS: usize = 1_000_000;
    let k = saxpy();
    let x = Array::zeros::<f32>(Device::Cpu, &[N]).unwrap();
    let y = Array::zeros::<f32>(Device::Cpu, &[N]).unwrap();
    let a = 2.0f32;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let time = |f: &mut dyn FnMut()| {
        let rounds: Vec<f64> = (0..11)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..CALLS / 10 {
                    f();
                }
                t.elapsed().as_secs_f64() * 1e6 / (CALLS / 10) as f64
            })
            .collect();
        median(rounds)
    };
    let t_builder = time(&mut || {
        let l = k
            .launch(N)
            .inputs((2.0f32, &x, &y))
            .device("cpu")
            .record_cmd()
            .unwrap();
        black_box(&l);
    });
    let args = [TypedArg::value(&a), (&x).into(), (&y).into()];
    // Everything launch_args does before the driver call on a CUDA device
    // that does not need one: count and kinds, where the arrays live (on
    // the CPU device here), the plan, the launch-shape rule (with a CUDA
    // device's options: on the CPU it is skipped), the bytes of the bounds
    // and the arguments.
    let cuda = cuda_opts(Pass::Forward);
    let mut buf = [0u8; 4 * 64];
    let t_typed = time(&mut || {
        let args = black_box(&args);
        k.check_typed(Pass::Forward, Device::Cpu, thread_access_mode(), args)
            .unwrap();
        let opts = k.typed_options(
            Device::Cuda(0),
            Pass::Forward,
            AccessMode::Checked,
            How::PLAIN,
        );
        let (e, n) = k
            .typed_dim(Dim::from(black_box(N)).as_slice(), &opts)
            .unwrap();
        let plan = k.typed_plan(&e[..n], &opts).unwrap();
        k.check_typed_accesses(&cuda, &e[..n], &plan, args).unwrap();
        let b = &plan.bounds;
        let bounds = encode::launch_bounds(b.ndim, &b.shape, b.size, b.coord_mult);
        buf[..b.byte_len()].copy_from_slice(&bounds[..b.byte_len()]);
        for (i, a) in args.iter().enumerate() {
            let at = 64 * (i + 1);
            match a {
                TypedArg::Array(a) => buf[at..at + 56].copy_from_slice(&encode::array_t(&a.abi())),
                TypedArg::Null => buf[at..at + 56].fill(0),
                TypedArg::Value(v) => buf[at..at + v.len()].copy_from_slice(v),
                TypedArg::Struct(s) => buf[at..at + s.bytes().len()].copy_from_slice(s.bytes()),
            }
        }
        black_box(&buf);
    });
    let t_check = time(&mut || {
        k.check_typed(
            Pass::Forward,
            Device::Cpu,
            thread_access_mode(),
            black_box(&args),
        )
        .unwrap();
    });
    let opts = k.typed_options(
        Device::Cuda(0),
        Pass::Forward,
        AccessMode::Checked,
        How::PLAIN,
    );
    let t_plan = time(&mut || {
        let (e, n) = k
            .typed_dim(Dim::from(black_box(N)).as_slice(), &opts)
            .unwrap();
        black_box(k.typed_plan(&e[..n], &opts).unwrap());
    });
    let plan = k.typed_plan(&[N as i64], &opts).unwrap();
    let t_rules = time(&mut || {
        k.check_typed_accesses(&cuda, &[N as i64], &plan, black_box(&args))
            .unwrap();
    });
    let t_enc = time(&mut || {
        black_box(encode::array_t(&black_box(&x).abi()));
    });
    // What a repeated launch with the same arrays compares instead of all
    // of the above (its values are written, its arrays are not).
    let query = |args| crate::launch::memo::Query {
        dim: &[N as i64],
        how: How::PLAIN,
        device: Device::Cuda(0),
        mode: AccessMode::Checked,
        ctx: 0x1000,
        args,
    };
    let memo = crate::launch::memo::Memo::of(
        &query(&args),
        cuda_api::LaunchConfig::new((1, 1, 1), (256, 1, 1)),
        None,
        Vec::new(),
        |_| false,
    )
    .ok()
    .unwrap();
    let t_memo = time(&mut || {
        assert!(memo.matches(&query(black_box(&args))));
    });
    println!(
        "pieces: check {t_check:.3} plan {t_plan:.3} rules {t_rules:.3} one array_t {t_enc:.3}; a repeated launch's memo compare {t_memo:.3}"
    );
    println!(
        "host work per launch (no driver): builder build+check {t_builder:.3} us, positional checks+encode {t_typed:.3} us ({:.2}x)",
        t_typed / t_builder
    );
}
