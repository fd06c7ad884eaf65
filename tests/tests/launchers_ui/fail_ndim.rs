//! An array with the wrong number of dimensions: `a` of add2d is 2-D.

#[allow(dead_code)]
#[path = "../../src/launchers/kernels.rs"]
mod kernels;

use warp_launch::{AotModule, Device, TypedArray};

fn run(module: &AotModule) -> warp_launch::Result<()> {
    let k = kernels::Kernels::new(module)?;
    let flat = TypedArray::<f32, 1>::zeros(Device::Cuda(0), [32])?;
    let grid = TypedArray::<f32, 2>::zeros(Device::Cuda(0), [4, 8])?;
    k.add2d.launch([4, 8], &flat, &grid, &grid)
}

fn main() {
    let _ = run;
}
