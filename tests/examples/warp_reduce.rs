//! A cooperative grid-sync reduction: `wl_grid_sum` (CUDA C against
//! `warp_launch.h`, in `tests/kernels/warp_header.cu`) sums 4 Mi floats in
//! one launch on the resident grid, checked by `cuda-api`'s cooperative
//! path. Kernels: `$SDK_TEST_KERNELS` or `target/kernels` (`cargo xtask
//! gpu-bundle`; without them it says so). Needs a GPU.

use std::process::ExitCode;

use warp_launch::{Array, Device, MaxBlocks};

fn run() -> warp_launch::Result<()> {
    let k = sdk_tests::warp::header_kernels()?;
    let dev = Device::Cuda(0);
    let n = 4 << 20;
    let x = Array::from_slice(dev, &vec![0.25f32; n], &[n])?;
    let blocks = k
        .grid_sum
        .cuda_function(warp_launch::Pass::Forward)?
        .max_cooperative_grid(&dev.context()?, 256, 0)?;
    let partial = Array::zeros::<f32>(dev, &[blocks as usize])?;
    let total = Array::zeros::<f32>(dev, &[1])?;
    k.grid_sum
        .launch(n)
        .inputs((&x, &partial, &total))
        .max_blocks(MaxBlocks::Resident)
        .cooperative(true)
        .run()?;
    println!(
        "sum of {n} x 0.25 = {} on {blocks} resident blocks (expected {})",
        total.to_vec::<f32>()?[0],
        n as f32 * 0.25
    );
    Ok(())
}

fn main() -> ExitCode {
    let cubin = sdk_tests::kernels_dir().join("warp_header.cubin");
    if !cubin.is_file() {
        eprintln!(
            "warp_reduce: {} is missing: the test kernels are compiled with nvcc by \
             `cargo xtask gpu-bundle` (into target/kernels; SDK_TEST_KERNELS names another directory)",
            cubin.display()
        );
        return ExitCode::FAILURE;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("warp_reduce: {e}");
            ExitCode::FAILURE
        }
    }
}
