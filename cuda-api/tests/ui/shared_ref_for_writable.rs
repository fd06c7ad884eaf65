use cuda_api::{ConstDevicePtr, DeviceBuffer, DevicePtr, TypedKernel, LaunchConfig, Stream};

fn launch(
    k: &TypedKernel<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>,
    s: &Stream,
    x: &DeviceBuffer<f32>,
    y: &DeviceBuffer<f32>,
) {
    // `y` is written by the kernel: it must be passed as `&mut y`.
    let _ = k.launch(s, LaunchConfig::new(1, 256), (2.0f32, x, y, 256u32));
}

fn main() {}
