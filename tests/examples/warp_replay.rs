//! A `Launch` replay loop: Warp's `saxpy` checked once, then replayed with
//! a new `a` each step (setters re-check only the value they change; a
//! replay allocates nothing). Module: `$SDK_WARP_DATA/aot`, else
//! `target/warp-aot/aot`: run it after `cargo xtask warp-aot`. Without a GPU
//! driver it prints the driver-not-found error.

use std::process::ExitCode;

use warp_launch::{AotModule, Array, Device};

fn run() -> warp_launch::Result<()> {
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let module = unsafe { AotModule::load(sdk_tests::warp::data_dir().join("aot")) }?;
    let saxpy = module.kernel("saxpy")?;
    let dev = Device::Cuda(0);
    let stream = warp_launch::Stream::new(&dev.context()?)?;
    let x = Array::from_slice(dev, &[1.0f32; 1024], &[1024])?;
    let y = Array::from_slice(dev, &[0.0f32; 1024], &[1024])?;
    let mut step = saxpy
        .launch(1024)
        .inputs((0.0f32, &x, &y))
        .stream(&stream)
        .record_cmd()?;
    for i in 1..=100 {
        step.set_param_by_name("a", i as f32)?;
        step.launch()?; // on `stream`, the one it was recorded for
    }
    stream.synchronize()?;
    println!(
        "after 100 replays y[0] = {} (expected 5050)",
        y.to_vec::<f32>()?[0]
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("warp_replay: {e}");
            ExitCode::FAILURE
        }
    }
}
