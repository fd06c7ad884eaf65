//! Another struct where a `wp.struct` goes: `p` of use_struct is Warp's
//! `Params`, not a look-alike.

#[allow(dead_code)]
#[path = "../../src/launchers/kernels.rs"]
mod kernels;

use warp_launch::{AotModule, Device, TypedArray};

#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Params {
    scale: f32,
    offset: [f32; 3],
    count: i32,
}

fn run(module: &AotModule) -> warp_launch::Result<()> {
    let k = kernels::Kernels::new(module)?;
    let v = TypedArray::<[f32; 3], 1>::zeros(Device::Cuda(0), [4])?;
    k.use_struct.launch(4, &Params::default(), &v, &v)
}

fn main() {
    let _ = run;
}
