use cuda_api::{DeviceBuffer, DevicePtr};

// A device pointer detached from its buffer's borrow could outlive the
// buffer: every way to make one is `unsafe` (the argument traits' methods
// cannot be called from outside cuda-api either: see
// `argument_traits_key_is_private.rs`).
fn detach(buf: &mut DeviceBuffer<f32>) -> (DevicePtr<f32>, DevicePtr<f32>) {
    let a = DevicePtr::<f32>::from_raw(buf.device_address());
    let b = buf.as_mut_ptr();
    (a, b)
}

fn main() {}
