use cuda_api::{DeviceBuffer, DevicePtr, TypedKernel, LaunchConfig, Stream};

fn launch(k: &TypedKernel<(DevicePtr<i32>, u32)>, s: &Stream, data: &mut DeviceBuffer<i32>) {
    // A read-only view cannot stand for a writable parameter.
    let view = data.view();
    let _ = k.launch(s, LaunchConfig::new(1, 32), (&view, 3u32));
}

fn main() {}
