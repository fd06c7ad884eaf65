//! Warp-style saxpy from Rust: `y = a * x + y` with Warp's `saxpy` kernel
//! (compiled ahead of time by Warp), then the gradient of
//! `loss = sum((sin(x) * a)^2)` through the tape with Warp's `chain_sin`
//! and `chain_loss` kernels.
//!
//! `cargo run -p sdk-tests --example warp_saxpy -- DIR` (default:
//! `$SDK_WARP_DATA/aot`, else `target/warp-aot/aot`: run it after
//! `cargo xtask warp-aot`). Without a GPU driver it prints the
//! driver-not-found error.
//!
//! DIR must hold the files of one Warp compile, unchanged: the launches'
//! safety rests on the source and the images belonging together, which
//! loading cannot check (`AotModule::load` is `unsafe`).

use std::process::ExitCode;

use warp_launch::{AotModule, Array, Device, Tape};

fn run(dir: &std::path::Path) -> warp_launch::Result<()> {
    // SAFETY: the example's contract (module doc): DIR is one Warp compile.
    let module = unsafe { AotModule::load(dir) }?;
    let saxpy = module.kernel("saxpy")?;
    let dev = Device::Cuda(0);
    let n = 8;
    let x = Array::from_slice(dev, &(0..n).map(|i| i as f32).collect::<Vec<_>>(), &[n])?;
    let y = Array::from_slice(dev, &vec![1.0f32; n], &[n])?;
    saxpy.launch(n).inputs((2.0f32, &x, &y)).run()?;
    println!("saxpy: y = 2 x + 1 = {:?}", y.to_vec::<f32>()?);

    let (sin, loss_k) = (module.kernel("chain_sin")?, module.kernel("chain_loss")?);
    let x = x.with_grad()?;
    let s = Array::zeros::<f32>(dev, &[n])?.with_grad()?;
    let loss = Array::zeros::<f32>(dev, &[1])?.with_grad()?;
    let mut tape = Tape::new();
    tape.record(|| -> warp_launch::Result<()> {
        sin.launch(n).inputs((&x, 0.5f32)).outputs(&s).run()?;
        loss_k.launch(n).inputs(&s).outputs(&loss).run()
    })?;
    tape.backward(&loss)?;
    println!("loss = {:?}", loss.to_vec::<f32>()?);
    println!(
        "d loss / d x = {:?}",
        x.grad().expect("x has a gradient").to_vec::<f32>()?
    );
    Ok(())
}

fn main() -> ExitCode {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| sdk_tests::warp::data_dir().join("aot"));
    match run(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("warp_saxpy: {e}");
            ExitCode::FAILURE
        }
    }
}
