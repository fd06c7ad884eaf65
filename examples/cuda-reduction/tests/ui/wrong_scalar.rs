use cuda_api::{Context, CudaDevice, DeviceBuffer, LaunchConfig, Stream};

fn main() -> cuda_api::CudaResult<()> {
    let device = CudaDevice::get(0)?;
    let ctx = Context::primary(&device)?;
    let stream = Stream::new(&ctx)?;
    let (lib, _) = cuda_reduction_example::kernels::reduce::load(&device)?;
    let reduce = cuda_reduction_example::reduce_sum(&lib)?;
    let cfg = LaunchConfig::new(1, 256);
    let x = DeviceBuffer::<f32>::zeroed(&ctx, 8)?;
    let mut partial = DeviceBuffer::<f32>::zeroed(&ctx, 1)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&ctx, 1)?;
    // n is `unsigned int`: a u64 is refused.
    reduce.launch_cooperative(&stream, cfg, &x, &mut partial, &mut out, 8u64)?;
    Ok(())
}
