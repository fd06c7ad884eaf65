use cuda_reduction_example::kernels::axpy::Axpy;
use warp_launch::{Device, TypedArray};

fn main() -> warp_launch::Result<()> {
    let module = cuda_reduction_example::kernels::axpy::load(Device::Cuda(0))?;
    let axpy = Axpy::new(&module)?;
    let x = TypedArray::<f32, 2>::zeros(Device::Cuda(0), [2, 2])?;
    let y = TypedArray::<f32, 1>::zeros(Device::Cuda(0), [4])?;
    // The kernel indexes `x` with one coordinate: a 2-D array is refused.
    axpy.launch(4, &x, &y, 2.0)
}
