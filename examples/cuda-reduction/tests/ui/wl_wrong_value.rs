use cuda_reduction_example::kernels::axpy::Axpy;
use warp_launch::{Device, TypedArray};

fn main() -> warp_launch::Result<()> {
    let module = cuda_reduction_example::kernels::axpy::load(Device::Cuda(0))?;
    let axpy = Axpy::new(&module)?;
    let x = TypedArray::<f32, 1>::zeros(Device::Cuda(0), [4])?;
    // `a` is `float`: an f64 is refused.
    axpy.launch(4, &x, &x, 2.0f64)
}
