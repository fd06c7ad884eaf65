use cuda_api::{ConstDevicePtr, DeviceBuffer, DevicePtr, TypedKernel, LaunchConfig, Stream};

fn launch(
    k: &TypedKernel<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>,
    s: &Stream,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
) {
    // The first parameter is an f32, not an f64; the buffers hold f32, not u32.
    let _ = k.launch(s, LaunchConfig::new(1, 256), (2.0f64, x, y, 256u32));
}

fn launch_wrong_element(
    k: &TypedKernel<(ConstDevicePtr<u32>,)>,
    s: &Stream,
    x: &DeviceBuffer<f32>,
) {
    let _ = k.launch(s, LaunchConfig::new(1, 256), (x,));
}

fn main() {}
