//! cudarc values used by cuda-api without copies: a cudarc context, stream,
//! slice and function drive a validated, typed cuda-api launch.

use cuda_api::{
    Context, DevicePtr, Function, LaunchConfig, Module, Stream, TypedKernel, cudarc_view,
    cudarc_view_mut,
};
use cudarc::driver::CudaContext;

#[test]
#[ignore = "needs a CUDA GPU"]
fn cudarc_values_launch_through_cuda_api() {
    let cctx = CudaContext::new(0).unwrap();
    let cstream = cctx.new_stream().unwrap();
    let ctx = Context::from_cudarc(&cctx).unwrap();
    let stream = Stream::from_cudarc(&ctx, cstream.clone());
    let mut data = cstream.clone_htod(&[10i32, 20, 30]).unwrap();

    // A kernel loaded by cuda-api, launched on cudarc's stream and memory.
    let ptx = std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx")).unwrap();
    let m = Module::from_ptx(&ctx, &ptx).unwrap();
    // SAFETY: add_one(int *data, unsigned int n)
    let k = unsafe { m.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() };
    {
        let (mut view, _guard) = cudarc_view_mut(&ctx, &mut data, &cstream);
        k.launch(&stream, LaunchConfig::new(1, 32), (&mut view, 3u32))
            .unwrap();
    }
    // A kernel loaded by cudarc, declared and launched through cuda-api.
    let cmodule = cctx
        .load_module(cudarc::nvrtc::Ptx::from_src(ptx.clone()))
        .unwrap();
    let cfunc = cmodule.load_function("add_one").unwrap();
    // SAFETY: add_one(int *data, unsigned int n)
    let k2: TypedKernel<(DevicePtr<i32>, u32)> =
        unsafe { TypedKernel::declare(Function::from_cudarc(&ctx, &cfunc, "add_one")).unwrap() };
    {
        let (mut view, _guard) = cudarc_view_mut(&ctx, &mut data, &cstream);
        k2.launch_cooperative(&stream, LaunchConfig::new(1, 32), (&mut view, 3u32))
            .unwrap();
    }
    {
        // A read-only view cannot be passed for the writable parameter (a
        // compile error); it can be read back.
        let (view, _guard) = cudarc_view(&ctx, &data, &cstream);
        assert_eq!(view.len(), 3);
    }
    assert_eq!(cstream.clone_dtoh(&data).unwrap(), vec![12, 22, 32]);
}
