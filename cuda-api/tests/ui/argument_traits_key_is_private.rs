use cuda_api::{DeviceBuffer, DevicePtr, KernelArg};

// The argument traits' methods take a key only cuda-api can make; where it
// is defined (the private `kernel` module) no one outside can name it, so
// no one can call `to_param` to get a device pointer detached from a
// buffer's borrow.
fn detach(buf: &mut DeviceBuffer<f32>) -> DevicePtr<f32> {
    KernelArg::<DevicePtr<f32>>::to_param(&buf, cuda_api::kernel::args::sealed::Token(()))
}

fn main() {}
