//! A value of the wrong type: `a` of saxpy is a float32, `m` of
//! transform a mat33 (`[[f32; 3]; 3]`, not nine floats).

#[allow(dead_code)]
#[path = "../../src/launchers/kernels.rs"]
mod kernels;

use warp_launch::{AotModule, Device, TypedArray};

fn run(module: &AotModule) -> warp_launch::Result<()> {
    let k = kernels::Kernels::new(module)?;
    let x = TypedArray::<f32, 1>::zeros(Device::Cuda(0), [4])?;
    let a: f64 = 2.0;
    k.saxpy.launch(4, a, &x, &x)?;
    let m = TypedArray::<[[f32; 3]; 3], 1>::zeros(Device::Cuda(0), [4])?;
    let v = TypedArray::<[f32; 3], 1>::zeros(Device::Cuda(0), [4])?;
    k.transform.launch(4, [1.0f32; 9], &m, &v, &v)
}

fn main() {
    let _ = run;
}
