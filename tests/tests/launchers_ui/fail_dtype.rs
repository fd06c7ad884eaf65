//! An array of the wrong dtype: `x` of saxpy takes float32.

#[allow(dead_code)]
#[path = "../../src/launchers/kernels.rs"]
mod kernels;

use warp_launch::{AotModule, Device, TypedArray};

fn run(module: &AotModule) -> warp_launch::Result<()> {
    let k = kernels::Kernels::new(module)?;
    let x = TypedArray::<i32, 1>::zeros(Device::Cuda(0), [4])?;
    let y = TypedArray::<f32, 1>::zeros(Device::Cuda(0), [4])?;
    k.saxpy.launch(4, 2.0, &x, &y)
}

fn main() {
    let _ = run;
}
