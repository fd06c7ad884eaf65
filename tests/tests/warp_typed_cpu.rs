//! Positional launches (`Kernel::launch_args`, `record_args`: what typed
//! launchers call) on the CPU device, from outside the crate: the same
//! results and gradients as `LaunchBuilder::run`, and the same refusals.

use sdk_tests::warp::chain_cpu;
use warp_launch::{Array, Device, Error, Kernel, KernelSpec, Pass, Tape, TypedArg, TypedArray};

/// Warp's chain_sin and chain_loss as declared by kernels.py (parameter
/// order and dimensions), with the CPU bodies of `sdk_tests::warp`.
fn chain() -> (Kernel, Kernel) {
    let [(sin_f, sin_b), (loss_f, loss_b)] = chain_cpu();
    let sin = KernelSpec::new("chain_sin", 1)
        .array::<f32>("x", 1)
        .value::<f32>("a")
        .array::<f32>("y", 1)
        .indexed_by_thread("x")
        .indexed_by_thread("y")
        .declare()
        .unwrap()
        .with_cpu(sin_f, Some(sin_b));
    let loss = KernelSpec::new("chain_loss", 1)
        .array::<f32>("y", 1)
        .array::<f32>("loss", 1)
        .indexed_by_thread("y")
        .access("loss", &[warp_launch::AxisIndex::Constant(0)])
        .declare()
        .unwrap()
        .with_cpu(loss_f, Some(loss_b));
    (sin, loss)
}

/// Forward through both kernels and backward through the tape; returns
/// y, loss and x's gradient.
fn run(positional: bool) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (sin, loss_k) = chain();
    let xs: Vec<f32> = (0..16).map(|i| (i as f32 - 8.0) * 0.2).collect();
    let x = TypedArray::<f32, 1>::from_slice(Device::Cpu, &xs, [16])
        .unwrap()
        .with_grad()
        .unwrap();
    let y = TypedArray::<f32, 1>::zeros(Device::Cpu, [16])
        .unwrap()
        .with_grad()
        .unwrap();
    let loss = TypedArray::<f32, 1>::zeros(Device::Cpu, [1])
        .unwrap()
        .with_grad()
        .unwrap();
    let a = 1.5f32;
    let mut tape = Tape::new();
    tape.record(|| -> warp_launch::Result<()> {
        if positional {
            sin.launch_args(
                Pass::Forward,
                16,
                None,
                &[(&x).into(), TypedArg::value(&a), (&y).into()],
            )?;
            loss_k.launch_args(Pass::Forward, 16, None, &[(&y).into(), (&loss).into()])
        } else {
            sin.launch(16)
                .inputs((&x, a))
                .outputs(&y)
                .device("cpu")
                .run()?;
            loss_k
                .launch(16)
                .inputs(&y)
                .outputs(&loss)
                .device("cpu")
                .run()
        }
    })
    .unwrap();
    assert_eq!(tape.launches().len(), 2);
    tape.backward(loss.as_array()).unwrap();
    (
        y.to_vec().unwrap(),
        loss.to_vec().unwrap(),
        x.grad().unwrap().to_vec::<f32>().unwrap(),
    )
}

#[test]
fn positional_launches_equal_the_builders_forward_and_backward() {
    let (p, b) = (run(true), run(false));
    assert_eq!(p, b);
    // And they are right: loss = sum((1.5 sin x)^2), dloss/dx = 2 * 2.25 sin x cos x.
    let xs: Vec<f32> = (0..16).map(|i| (i as f32 - 8.0) * 0.2).collect();
    let want: f32 = xs.iter().map(|x| (1.5 * x.sin()).powi(2)).sum();
    assert!((p.1[0] - want).abs() < 1e-4, "{} vs {want}", p.1[0]);
    for (g, x) in p.2.iter().zip(&xs) {
        let exact = 2.0 * 2.25 * x.sin() * x.cos();
        assert!((g - exact).abs() < 1e-5, "{g} vs {exact}");
    }
}

#[test]
fn positional_refusals_are_the_builders() {
    let (sin, _) = chain();
    let x = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    let x2 = Array::zeros::<f32>(Device::Cpu, &[2, 2]).unwrap();
    let xi = Array::zeros::<i32>(Device::Cpu, &[4]).unwrap();
    let a = 1.0f32;
    let cases: [(&str, Error, Error); 4] = [
        (
            "count",
            sin.launch_args(Pass::Forward, 4, None, &[(&x).into()])
                .unwrap_err(),
            sin.launch(4).inputs(&x).device("cpu").run().unwrap_err(),
        ),
        (
            "dtype",
            sin.launch_args(
                Pass::Forward,
                4,
                None,
                &[(&xi).into(), TypedArg::value(&a), (&x).into()],
            )
            .unwrap_err(),
            sin.launch(4)
                .inputs((&xi, a, &x))
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "ndim",
            sin.launch_args(
                Pass::Forward,
                4,
                None,
                &[(&x).into(), TypedArg::value(&a), (&x2).into()],
            )
            .unwrap_err(),
            sin.launch(4)
                .inputs((&x, a, &x2))
                .device("cpu")
                .run()
                .unwrap_err(),
        ),
        (
            "adjoint count",
            sin.launch_args(
                Pass::Adjoint,
                4,
                None,
                &[(&x).into(), TypedArg::value(&a), (&x).into()],
            )
            .unwrap_err(),
            Error::ArgumentCount {
                kernel: "chain_sin".into(),
                list: "inputs + outputs + adj_inputs + adj_outputs",
                expected: ["x", "a", "y", "adj_x", "adj_a", "adj_y"]
                    .map(String::from)
                    .to_vec(),
                given: 3,
            },
        ),
    ];
    for (what, p, b) in cases {
        assert_eq!(p.to_string(), b.to_string(), "{what}");
    }
}
