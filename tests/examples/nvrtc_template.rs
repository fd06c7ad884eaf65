//! CUDA C++ compiled at run time: a templated kernel compiled by NVRTC for
//! device 0, its `float` instance found by its name expression, declared
//! with its bounds and launched checked; then a launch past the buffers,
//! refused, and a source with a typo, whose compile error names its line.
//!
//! `cargo run -p sdk-tests --example nvrtc_template` (a GPU, and NVRTC:
//! `libnvrtc.so.13`/`.12` on the library path, or `CUDA_SYS_NVRTC_LIBRARY`
//! naming it or a pip wheel's `nvidia/cu13/lib`).

use cuda_api::{
    ConstDevicePtr, Context, CudaDevice, CudaResult, DeviceBuffer, DevicePtr, Extent, LaunchConfig,
    Program, Stream,
};

const SOURCE: &str = r#"
template <typename T>
__global__ void axpy(T a, const T *x, T *y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

fn main() -> CudaResult<()> {
    let dev = CudaDevice::get(0)?;
    let ctx = Context::primary(&dev)?;
    let stream = Stream::new(&ctx)?;

    // The second run of this example reads the cache (Hit) instead.
    let started = std::time::Instant::now();
    let compiled = Program::new("axpy.cu", SOURCE)
        .name_expression("axpy<float>")
        .option("-std=c++17")
        .for_device(&dev)?
        .compile()?;
    println!(
        "NVRTC {} compiled axpy.cu to {:?} for compute capability {} in {:?} (cache: {:?})",
        compiled.nvrtc_version(),
        compiled.output(),
        compiled.arch(),
        started.elapsed(),
        compiled.cache()
    );
    let module = compiled.load(&ctx)?;
    let name = compiled.lowered_name("axpy<float>")?;
    // SAFETY: axpy<float>(float a, const float *x, float *y, unsigned n)
    // touches x[i] and y[i] only for i < n: in bounds when both hold at
    // least n elements, which the bounds check at every launch.
    let axpy = unsafe { module.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>(name)? }
        .names(&["a", "x", "y", "n"])?
        .bound(1, Extent::Param(3))?
        .bound(2, Extent::Param(3))?;

    let n = 1 << 20;
    let x = DeviceBuffer::from_slice(&ctx, &vec![1.0f32; n as usize])?;
    let mut y = DeviceBuffer::from_slice(&ctx, &vec![2.0f32; n as usize])?;
    axpy.launch(
        &stream,
        LaunchConfig::for_elements(n, 256),
        (3.0f32, &x, &mut y, n),
    )?;
    let y_host = y.to_vec()?;
    assert!(y_host.iter().all(|&v| v == 5.0), "axpy gave {}", y_host[0]);
    println!("axpy<float> over {n} elements: y = {}", y_host[0]);

    let refused = axpy
        .launch(
            &stream,
            LaunchConfig::for_elements(n + 1, 256),
            (3.0f32, &x, &mut y, n + 1),
        )
        .expect_err("n past the buffers must be refused");
    println!("refused before the driver: {refused}");

    let error = Program::new("typo.cu", SOURCE.replace("a * x[i]", "a * xs[i]"))
        .name_expression("axpy<float>")
        .for_device(&dev)?
        .compile()
        .expect_err("the typo must not compile");
    println!("a compile error: {error}");
    Ok(())
}
