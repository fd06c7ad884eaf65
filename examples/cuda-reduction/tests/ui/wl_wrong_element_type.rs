use cuda_reduction_example::kernels::axpy::Axpy;
use warp_launch::{Device, TypedArray};

fn main() -> warp_launch::Result<()> {
    let module = cuda_reduction_example::kernels::axpy::load(Device::Cuda(0))?;
    let axpy = Axpy::new(&module)?;
    let x = TypedArray::<f64, 1>::zeros(Device::Cuda(0), [4])?;
    let y = TypedArray::<f32, 1>::zeros(Device::Cuda(0), [4])?;
    // `x` is `wl::array_t<float>`: an array of f64 is refused.
    axpy.launch(4, &x, &y, 2.0)
}
