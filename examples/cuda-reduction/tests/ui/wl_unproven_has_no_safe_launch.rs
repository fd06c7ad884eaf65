use cuda_reduction_example::kernels::axpy::Gather;
use warp_launch::{Device, TypedArray};

fn main() -> warp_launch::Result<()> {
    let module = cuda_reduction_example::kernels::axpy::load(Device::Cuda(0))?;
    let gather = Gather::new(&module)?;
    let x = TypedArray::<f32, 1>::zeros(Device::Cuda(0), [4])?;
    let i = TypedArray::<i32, 1>::zeros(Device::Cuda(0), [4])?;
    // `gather`'s index comes from data: it has no safe `launch`.
    gather.launch(4, &x, &i, &x)
}
