//! cudarc values used by cuda-api without copies: a cudarc context, stream,
//! slice and function drive a validated, typed cuda-api launch; and an
//! array lent to cudarc (`Array::to_cudarc`) is ordered with cudarc's
//! streams both ways.

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
    let stream = Stream::from_cudarc(&ctx, cstream.clone()).unwrap();
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

/// About `ms` milliseconds of clock64 cycles on device 0.
fn cycles(ms: i64) -> i64 {
    let khz = cuda_api::CudaDevice::get(0)
        .unwrap()
        .attribute(cuda_api::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .unwrap() as i64;
    khz * ms
}

/// Issue 29, lent memory: on 8fa438c cudarc reading the slice right after
/// a warp-launch launch on another stream saw 0 of 1,048,576 written. Now:
/// the loan waits for the array's queued work (cudarc reads it all, from
/// the slice's stream and from a second cudarc stream); while the slice
/// lives, every warp-launch road refuses work on the array
/// (`Error::Lent`), so nothing can race with cudarc; after the slice
/// drops, warp-launch work on a third stream waits for cudarc's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn an_array_lent_to_cudarc_is_ordered_with_cudarcs_streams_both_ways() {
    use warp_launch::{Array, Error, Graph, Pass, TypedArg, Value};
    const N: usize = 1 << 20;
    let cctx = CudaContext::new(0).unwrap();
    let (c1, c2) = (cctx.new_stream().unwrap(), cctx.new_stream().unwrap());
    let ctx = Context::from_cudarc(&cctx).unwrap();
    let s3 = Stream::new(&ctx).unwrap();
    // SAFETY: the directory is one `wp.compile_aot_module` output written by
    // the bundle's build.py, unchanged.
    let k = unsafe { warp_launch::AotModule::load(sdk_tests::warp::data_dir().join("aot")) }
        .expect("Warp AOT module loads (cargo xtask gpu-bundle)")
        .kernel("saxpy")
        .unwrap();
    let x = Array::from_slice("cuda:0", &vec![1.0f32; N], &[N]).unwrap();
    let y = Array::zeros::<f32>("cuda:0", &[N]).unwrap();
    let other = Array::zeros::<f32>("cuda:0", &[N]).unwrap();
    // Recorded before the loan, replayed during it.
    let replay = k
        .launch(N)
        .inputs((1.0f32, &x, &y))
        .stream(&s3)
        .record_cmd()
        .unwrap();
    let graph = Graph::capture_with(&s3, |g| g.launch(replay.try_clone()?)).unwrap();

    // Before the loan: 50 launches on s3, then the loan at once.
    for _ in 0..50 {
        k.launch(N)
            .inputs((1.0f32, &x, &y))
            .stream(&s3)
            .run()
            .unwrap();
    }
    let lent = y.to_cudarc::<f32>(&c1).unwrap();
    for (name, c) in [("the slice's stream", &c1), ("a second cudarc stream", &c2)] {
        let got = c.clone_dtoh(&*lent).unwrap();
        let done = got.iter().filter(|&&v| v == 50.0).count();
        assert_eq!(done, N, "cudarc read from {name}: {done} of {N} written");
    }

    // During the loan: every road refuses, naming the array.
    let lent_error = |what: &str, e: Error| {
        let m = e.to_string();
        assert!(matches!(e, Error::Lent { .. }), "{what}: {m}");
        assert!(
            m.contains("lent to cudarc") && m.contains("drop the slice first"),
            "{what}: {m}"
        );
        m
    };
    let m = lent_error(
        "builder",
        k.launch(N)
            .inputs((1.0f32, &x, &y))
            .stream(&s3)
            .run()
            .unwrap_err(),
    );
    assert!(
        m.starts_with("launch of 'saxpy': argument 'y' (Array(dtype=float32"),
        "{m}"
    );
    let (a, xs, ys) = (1.0f32, TypedArg::Array(&x), TypedArg::Array(&y));
    lent_error(
        "positional",
        k.launch_args(Pass::Forward, N, Some(&s3), &[TypedArg::value(&a), xs, ys])
            .unwrap_err(),
    );
    lent_error("replay", replay.launch().unwrap_err());
    lent_error("graph", graph.launch(&s3).unwrap_err());
    let m = lent_error("fill", y.fill_on(&Value::of(3.0f32), &s3).unwrap_err());
    assert!(m.contains("the destination"), "{m}");
    let m = lent_error("copy from", other.assign_on(&y, &s3).unwrap_err());
    assert!(m.contains("the source"), "{m}");
    lent_error("copy into", y.assign_on(&other, &s3).unwrap_err());
    lent_error(
        "a view",
        y.slice(0, 0..16).unwrap().zero_on(&s3).unwrap_err(),
    );
    // Nothing ran: cudarc still reads 50 everywhere.
    s3.synchronize().unwrap();
    let got = c2.clone_dtoh(&*lent).unwrap();
    assert!(got.iter().all(|&v| v == 50.0));
    drop(lent);
    // The loan is over: launches run again.
    replay.launch().unwrap();
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 51.0));

    // After the loan: cudarc writes on its second stream behind a ~300 ms
    // kernel; the slice drops; a copy on s3 sees cudarc's writes.
    let z = Array::zeros::<u32>("cuda:0", &[N]).unwrap();
    let mut zs = z.to_cudarc::<u32>(&c1).unwrap();
    let ptx = std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx")).unwrap();
    let spin = cctx
        .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
        .unwrap()
        .load_function("spin_write")
        .unwrap();
    {
        use cudarc::driver::PushKernelArg;
        let mut view = zs.as_view_mut();
        let (n, c) = (N as u32, cycles(300));
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (264, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = c2.launch_builder(&spin);
        b.arg(&mut view).arg(&n).arg(&c);
        // SAFETY: spin_write(unsigned *out, unsigned n, long long cycles)
        // writes out[i] for i < n only; the view holds n u32s.
        unsafe { b.launch(cfg) }.unwrap();
    }
    drop(zs);
    let out = Array::zeros::<u32>("cuda:0", &[N]).unwrap();
    out.assign_on(&z, &s3).unwrap();
    s3.synchronize().unwrap();
    let got = out.to_vec::<u32>().unwrap();
    let written = got
        .iter()
        .enumerate()
        .filter(|&(i, &v)| v == i as u32 + 1)
        .count();
    assert_eq!(
        written, N,
        "copy on s3 after the slice dropped: {written} of {N} of cudarc's writes"
    );
}
