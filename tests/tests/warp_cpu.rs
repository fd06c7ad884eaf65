//! The whole launch path on the CPU device (no GPU needed): domains of 1, 2
//! and 4 dimensions, every index visited once, max_blocks and folded
//! dimensions, `Launch` replays, the tape against finite differences, and
//! every argument error (snapshotted).

use warp_launch::{
    Array, DType, Device, Error, Kernel, KernelSpec, MaxBlocks, ParamKind, StructType, StructValue,
    Tape, TypedArray, check_gradients, cpu_each_fn,
};

use sdk_tests::warp::chain_cpu;

fn saxpy() -> Kernel {
    KernelSpec::new("saxpy", 1)
        .value::<f32>("a")
        .array::<f32>("x", 1)
        .array::<f32>("y", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                each.run(|t| {
                    let i = t.tid();
                    let a: f32 = args.value(0)?;
                    let x = args.array::<f32>(1)?;
                    let y = args.array::<f32>(2)?;
                    y.set(i, a * x.get(i)? + y.get(i)?)
                })
            }),
            None,
        )
}

fn visits(kernel_dim: usize) -> Kernel {
    KernelSpec::new(format!("visits{kernel_dim}d"), kernel_dim)
        .array::<i32>("count", kernel_dim as u8)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(move |args, each| {
                each.run(|t| {
                    let c = args.array::<i32>(0)?;
                    match t.coords() {
                        [i] => c.add(*i, 1),
                        [i, j] => c.add((*i, *j), 1),
                        [i, j, k] => c.add((*i, *j, *k), 1),
                        [i, j, k, l] => c.add((*i, *j, *k, *l), 1),
                        _ => unreachable!(),
                    }
                })
            }),
            None,
        )
}

#[test]
fn saxpy_on_the_cpu_in_one_dimension() {
    let k = saxpy();
    let x = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[1.0, 2.0, 3.0, 4.0], [4]).unwrap();
    let y = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[10.0, 20.0, 30.0, 40.0], [4]).unwrap();
    k.launch(4)
        .inputs((2.0f32, &x))
        .outputs(&y)
        .device("cpu")
        .run()
        .unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![12.0, 24.0, 36.0, 48.0]);
    // A Python-style float literal (f64) converts to float32 as in Warp.
    k.launch(4)
        .inputs((1.0, &x, &y))
        .device("cpu")
        .run()
        .unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![13.0, 26.0, 39.0, 52.0]);
}

/// saxpy over any domain of 1 to 4 dimensions: y[c] = a * x[c] + y[c].
fn saxpy_nd(kernel_dim: usize) -> Kernel {
    KernelSpec::new(format!("saxpy{kernel_dim}d"), kernel_dim)
        .value::<f32>("a")
        .array::<f32>("x", kernel_dim as u8)
        .array::<f32>("y", kernel_dim as u8)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                each.run(|t| {
                    let a: f32 = args.value(0)?;
                    let (x, y) = (args.array::<f32>(1)?, args.array::<f32>(2)?);
                    match *t.coords() {
                        [i] => y.set(i, a * x.get(i)? + y.get(i)?),
                        [i, j] => y.set((i, j), a * x.get((i, j))? + y.get((i, j))?),
                        [i, j, k, l] => {
                            let c = (i, j, k, l);
                            y.set(c, a * x.get(c)? + y.get(c)?)
                        }
                        _ => unreachable!(),
                    }
                })
            }),
            None,
        )
}

#[test]
fn saxpy_over_1_2_and_4_dimensional_domains() {
    for dims in [vec![7usize], vec![3, 5], vec![2, 3, 2, 4]] {
        let n: usize = dims.iter().product();
        let xs: Vec<f32> = (0..n).map(|v| v as f32).collect();
        let x = Array::from_slice(Device::Cpu, &xs, &dims).unwrap();
        let y = Array::from_slice(Device::Cpu, &vec![1.0f32; n], &dims).unwrap();
        let dim: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        saxpy_nd(dims.len())
            .launch(dim)
            .inputs((3.0f32, &x, &y))
            .device("cpu")
            .run()
            .unwrap();
        let want: Vec<f32> = xs.iter().map(|v| 3.0 * v + 1.0).collect();
        assert_eq!(y.to_vec::<f32>().unwrap(), want, "{dims:?}");
    }
}

#[test]
fn every_index_is_visited_once_in_1_2_and_4_dimensions() {
    for (dims, kd) in [
        (vec![37usize], 1usize),
        (vec![5, 7], 2),
        (vec![2, 3, 4, 5], 4),
    ] {
        let c = Array::zeros::<i32>(Device::Cpu, &dims).unwrap();
        let dim: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        visits(kd)
            .launch(dim)
            .inputs(&c)
            .device(Device::Cpu)
            .run()
            .unwrap();
        let v = c.to_vec::<i32>().unwrap();
        assert_eq!(v.len(), dims.iter().product::<usize>());
        assert!(v.iter().all(|&n| n == 1), "{dims:?}: {v:?}");
    }
}

#[test]
fn extra_dimensions_fold_into_shared_coordinates() {
    // A 1-D kernel launched over (6, 3): Warp folds the 3 into coord_mult,
    // so each of the 6 indices is visited 3 times.
    let c = Array::zeros::<i32>(Device::Cpu, &[6]).unwrap();
    visits(1)
        .launch([6, 3])
        .inputs(&c)
        .device("cpu")
        .run()
        .unwrap();
    assert_eq!(c.to_vec::<i32>().unwrap(), vec![3; 6]);
}

#[test]
fn a_size_zero_domain_launches_nothing_but_checks_arguments() {
    let k = saxpy();
    let x = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[1.0], [1]).unwrap();
    let y = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[5.0], [1]).unwrap();
    k.launch(0)
        .inputs((2.0f32, &x, &y))
        .device("cpu")
        .run()
        .unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![5.0]);
    let e = k
        .launch(0)
        .inputs((2.0f32, &x))
        .device("cpu")
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::ArgumentCount { .. }), "{e}");
}

#[test]
fn a_recorded_launch_replays_with_new_parameters() {
    let k = saxpy();
    let x = TypedArray::<f32, 1>::from_slice(Device::Cpu, &[1.0, 1.0], [2]).unwrap();
    let y = TypedArray::<f32, 1>::zeros(Device::Cpu, [2]).unwrap();
    let mut l = k
        .launch(2)
        .inputs((0.0f32, &x, &y))
        .device("cpu")
        .record_cmd()
        .unwrap();
    for i in 0..100 {
        l.set_param_by_name("a", i as f32).unwrap();
        l.launch().unwrap();
    }
    assert_eq!(y.to_vec().unwrap(), vec![4950.0, 4950.0]);
    l.set_param_at_index(0, 1.0f32)
        .unwrap()
        .set_dim(&[1])
        .unwrap();
    l.launch().unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![4951.0, 4950.0]);
    assert!(matches!(
        l.set_param_by_name("z", 1.0f32).unwrap_err(),
        Error::NoSuchParam { .. }
    ));
    assert!(matches!(
        l.set_param_at_index(3, 1.0f32).unwrap_err(),
        Error::NoSuchParam { .. }
    ));
}

/// y = sin(x) * a; loss += y * y (Warp's chain_sin and chain_loss), with
/// hand-written CPU backward functions (`sdk_tests::warp::chain_cpu`).
fn chain() -> (Kernel, Kernel) {
    let [(sin_f, sin_b), (loss_f, loss_b)] = chain_cpu();
    let sin = KernelSpec::new("chain_sin", 1)
        .array::<f32>("x", 1)
        .value::<f32>("a")
        .array::<f32>("y", 1)
        .declare()
        .unwrap()
        .with_cpu(sin_f, Some(sin_b));
    let loss = KernelSpec::new("chain_loss", 1)
        .array::<f32>("y", 1)
        .array::<f32>("loss", 1)
        .declare()
        .unwrap()
        .with_cpu(loss_f, Some(loss_b));
    (sin, loss)
}

#[test]
fn tape_gradients_match_finite_differences() {
    let (sin, loss_k) = chain();
    let f32t = DType::FLOAT32;
    let x = Array::from_slice(Device::Cpu, &[0.1f32, 0.5, 1.0, -0.7], &[4])
        .unwrap()
        .with_grad()
        .unwrap();
    let y = Array::zeros_dtype(Device::Cpu, f32t, &[4])
        .unwrap()
        .with_grad()
        .unwrap();
    let loss = Array::zeros_dtype(Device::Cpu, f32t, &[1])
        .unwrap()
        .with_grad()
        .unwrap();
    let mut tape = Tape::new();
    tape.record(|| -> warp_launch::Result<()> {
        sin.launch(4)
            .inputs((&x, 1.5f32))
            .outputs(&y)
            .device("cpu")
            .run()?;
        loss_k
            .launch(4)
            .inputs(&y)
            .outputs(&loss)
            .device("cpu")
            .run()
    })
    .unwrap();
    assert_eq!(tape.launches().len(), 2);
    tape.backward(&loss).unwrap();
    let gx = x.grad().unwrap().to_vec::<f32>().unwrap();
    let xs = x.to_vec::<f32>().unwrap();
    for (g, x) in gx.iter().zip(&xs) {
        // d/dx (1.5 sin x)^2 = 2 * 1.5^2 * sin x cos x
        let exact = 2.0 * 2.25 * x.sin() * x.cos();
        assert!((g - exact).abs() < 1e-5, "{g} vs {exact}");
    }
    tape.zero().unwrap();
    assert!(
        x.grad()
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|&g| g == 0.0)
    );
    tape.reset().unwrap();
    assert!(tape.launches().is_empty());

    let report = check_gradients(&[&x], &loss, 1e-2, || {
        sin.launch(4)
            .inputs((&x, 1.5f32))
            .outputs(&y)
            .device("cpu")
            .run()?;
        loss_k
            .launch(4)
            .inputs(&y)
            .outputs(&loss)
            .device("cpu")
            .run()
    })
    .unwrap();
    assert_eq!(report.compared, 4);
    assert!(report.max_rel < 1e-2, "{report:?}");
}

#[test]
fn max_blocks_on_the_cpu_is_accepted_and_lean_kernels_refuse_it() {
    let c = Array::zeros::<i32>(Device::Cpu, &[10]).unwrap();
    visits(1)
        .launch(10)
        .inputs(&c)
        .device("cpu")
        .max_blocks(3)
        .run()
        .unwrap();
    assert!(c.to_vec::<i32>().unwrap().iter().all(|&n| n == 1));
    let lean = KernelSpec::new("lean", 1)
        .array::<i32>("count", 1)
        .grid_stride(false)
        .declare()
        .unwrap()
        .with_cpu(cpu_each_fn(|_, each| each.run(|_| Ok(()))), None);
    let e = lean
        .launch(10)
        .inputs(&c)
        .device("cpu")
        .max_blocks(3)
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::Dim { .. }), "{e}");
    let e = lean
        .launch(10)
        .inputs(&c)
        .device("cpu")
        .max_blocks(MaxBlocks::Resident)
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::ResidentLean { .. }), "{e}");
}

/// Every argument error the launch path gives, as users see it.
#[test]
fn argument_errors() {
    let k = saxpy();
    let f32t = DType::FLOAT32;
    let x = Array::zeros_dtype(Device::Cpu, f32t, &[4]).unwrap();
    let x2 = Array::zeros_dtype(Device::Cpu, f32t, &[2, 2]).unwrap();
    let xi = Array::zeros::<i32>(Device::Cpu, &[4]).unwrap();
    let st = std::sync::Arc::new(StructType::new(
        "Params_0123abcd",
        vec![
            ("scale".into(), ParamKind::Value(f32t)),
            ("count".into(), ParamKind::Value(DType::INT32)),
        ],
    ));
    let sk = KernelSpec::new("use_struct", 1)
        .param("p", ParamKind::Struct(st))
        .declare()
        .unwrap()
        .with_cpu(cpu_each_fn(|_, each| each.run(|_| Ok(()))), None);
    let cases: Vec<(&str, Error)> = vec![
        (
            "count",
            k.launch(4)
                .inputs((2.0f32, &x))
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "array_for_value",
            k.launch(4)
                .inputs((&x, &x, &x))
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "value_for_array",
            k.launch(4)
                .inputs((2.0f32, 3.0f32, &x))
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "dtype",
            k.launch(4)
                .inputs((2.0f32, &xi, &x))
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "ndim",
            k.launch(4)
                .inputs((2.0f32, &x2, &x))
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "float_for_int",
            visits(1)
                .launch(4)
                .inputs(1.5f32)
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        ("int_out_of_range", {
            let k8 = KernelSpec::new("k8", 1)
                .value::<u8>("v")
                .declare()
                .unwrap()
                .with_cpu(cpu_each_fn(|_, each| each.run(|_| Ok(()))), None);
            k8.launch(1).inputs(300i32).device("cpu").run().unwrap_err()
        }),
        (
            "struct",
            sk.launch(1)
                .inputs(
                    // SAFETY: zero bytes hold no device address; the value is refused anyway.
                    unsafe { StructValue::from_bytes("Other", &[0; 8]) },
                )
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "struct_size",
            sk.launch(1)
                .inputs(
                    // SAFETY: zero bytes hold no device address; the value is refused anyway.
                    unsafe { StructValue::from_bytes("Params", &[0; 4]) },
                )
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "too_many_dims",
            k.launch([1, 1, 1, 1, 1])
                .inputs((2.0f32, &x, &x))
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "negative_dim",
            k.launch(-3)
                .inputs((2.0f32, &x, &x))
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "bad_device",
            k.launch(4)
                .inputs((2.0f32, &x, &x))
                .device("gpu:0")
                .run()
                .unwrap_err(),
        ),
        (
            "adjoint_count",
            k.launch(4)
                .inputs((2.0f32, &x, &x))
                .adj_inputs(&x)
                .pass(warp_launch::Pass::Adjoint)
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "cpu_without_backward",
            k.launch(4)
                .inputs((2.0f32, &x, &x))
                .adj_inputs((0.0f32, &x, &x))
                .pass(warp_launch::Pass::Adjoint)
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
    ];
    for (name, e) in cases {
        insta::assert_snapshot!(name, e.to_string());
    }
}

/// CPU launches on clones of one array from several threads are serialised
/// (kernels write through addresses; concurrent launches would race): every
/// read-modify-write lands.
#[test]
fn cpu_launches_from_several_threads_do_not_race() {
    let c = Array::zeros::<i32>(Device::Cpu, &[64]).unwrap();
    let k = visits(1);
    std::thread::scope(|s| {
        for _ in 0..4 {
            let (c, k) = (c.clone(), k.clone());
            s.spawn(move || {
                for _ in 0..50 {
                    k.launch(64).inputs(&c).device("cpu").run().unwrap();
                }
            });
        }
    });
    assert_eq!(c.to_vec::<i32>().unwrap(), vec![200; 64]);
}
