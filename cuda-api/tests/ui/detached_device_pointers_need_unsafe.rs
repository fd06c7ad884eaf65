use cuda_api::{DeviceBuffer, DevicePtr, KernelArg};

// A device pointer detached from its buffer's borrow could outlive the
// buffer: every way to make one is `unsafe`, and the argument traits'
// methods cannot be called from outside cuda-api.
fn detach(buf: &mut DeviceBuffer<f32>) -> (DevicePtr<f32>, DevicePtr<f32>, DevicePtr<f32>) {
    let a = DevicePtr::<f32>::from_raw(buf.device_address());
    let b = buf.as_mut_ptr();
    let c = KernelArg::<DevicePtr<f32>>::to_param(&buf, cuda_api::kernel::sealed::Token(()));
    (a, b, c)
}

fn main() {}
