//! End-to-end tests of cuda-api on a real GPU, with kernels compiled by nvcc
//! 13.0 (`cargo xtask gpu-bundle`). Run with `--include-ignored` on a GPU machine.

use cuda_api::{
    ConstDevicePtr, Context, CudaDevice, CudaError, DeviceBuffer, DevicePtr, LaunchConfig,
    LaunchError, Library, Module, SignatureError, Stream, driver,
};

fn setup() -> (Context, Stream) {
    let dev = CudaDevice::get(0).expect("device 0");
    let ctx = Context::primary(&dev).expect("primary context");
    let stream = Stream::new(&ctx).expect("stream");
    (ctx, stream)
}

fn ptx() -> String {
    std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx"))
        .expect("kernels.ptx (run cargo xtask gpu-bundle)")
}

fn module(ctx: &Context) -> Module {
    Module::from_ptx(ctx, &ptx()).expect("PTX loads")
}

type CoopSum = (ConstDevicePtr<u32>, DevicePtr<u64>, DevicePtr<u64>, u32);

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_facts() {
    let (ctx, _s) = setup();
    let d = ctx.device();
    let (major, minor) = d.compute_capability().unwrap();
    eprintln!(
        "{}: sm_{major}{minor}, {} SMs, cooperative {}",
        d.name(),
        d.sm_count().unwrap(),
        d.supports_cooperative_launch().unwrap()
    );
    assert!(d.sm_count().unwrap() > 0);
    assert!(d.supports_cooperative_launch().unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn copies_round_trip() {
    let (ctx, stream) = setup();
    let host: Vec<u32> = (0..10_000).collect();
    let mut buf = DeviceBuffer::from_slice(&ctx, &host).unwrap();
    assert_eq!(buf.to_vec().unwrap(), host);
    assert_eq!(
        buf.slice(10..20).unwrap().to_vec().unwrap(),
        (10..20).collect::<Vec<u32>>()
    );
    let back: Vec<u32> = host.iter().map(|x| x * 3).collect();
    let mut out = vec![0u32; host.len()];
    let other = DeviceBuffer::from_slice(&ctx, &back).unwrap();
    stream
        .scope(|s| {
            s.copy_to_device(&mut buf, &back)?;
            s.copy_to_host(&other, &mut out)
        })
        .unwrap();
    assert_eq!(out, back);
    assert_eq!(buf.to_vec().unwrap(), back);
    buf.fill_async(7, &stream).unwrap();
    stream.synchronize().unwrap();
    assert!(buf.to_vec().unwrap().iter().all(|v| *v == 7));
    let e = buf.copy_from(&[1, 2, 3]).unwrap_err();
    assert!(matches!(e, CudaError::InvalidArgument { .. }), "{e}");
    assert_eq!(
        DeviceBuffer::<f64>::zeroed(&ctx, 0)
            .unwrap()
            .to_vec()
            .unwrap(),
        Vec::<f64>::new()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn saxpy_computes() {
    let (ctx, stream) = setup();
    let m = module(&ctx);
    // SAFETY: saxpy(float a, const float *x, float *y, unsigned int n)
    let saxpy = unsafe {
        m.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")
            .unwrap()
    };
    let n = 100_000u32;
    let x = DeviceBuffer::from_slice(&ctx, &vec![1.5f32; n as usize]).unwrap();
    let mut y = DeviceBuffer::from_slice(&ctx, &vec![1.0f32; n as usize]).unwrap();
    saxpy
        .launch(
            &stream,
            LaunchConfig::for_elements(n, 256),
            (2.0f32, &x, &mut y, n),
        )
        .unwrap();
    stream.synchronize().unwrap();
    assert!(y.to_vec().unwrap().iter().all(|v| *v == 4.0));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn grid_sync_at_the_largest_cooperative_grid() {
    let (ctx, stream) = setup();
    let m = module(&ctx);
    // SAFETY: coop_sum(const unsigned *in, unsigned long long *partial, unsigned long long *out, unsigned n)
    let k = unsafe { m.kernel::<CoopSum>("coop_sum").unwrap() };
    let max = k.max_cooperative_grid(&ctx, 256, 0).unwrap();
    let per_sm = k.function().occupancy(&ctx, 256, 0).unwrap();
    eprintln!(
        "coop_sum: {per_sm} blocks per SM x {} SMs = {max} blocks",
        ctx.device().sm_count().unwrap()
    );
    assert_eq!(max, per_sm * ctx.device().sm_count().unwrap());
    let n = 3_000_000u32;
    let input: Vec<u32> = (0..n).map(|i| i % 1000).collect();
    let expected: u64 = input.iter().map(|v| *v as u64).sum();
    let inp = DeviceBuffer::from_slice(&ctx, &input).unwrap();
    let mut partial = DeviceBuffer::<u64>::zeroed(&ctx, max as usize).unwrap();
    let mut out = DeviceBuffer::<u64>::zeroed(&ctx, 1).unwrap();
    k.launch_cooperative(
        &stream,
        LaunchConfig::new(max, 256),
        (&inp, &mut partial, &mut out, n),
    )
    .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![expected]);

    // One block more is refused before the driver sees it.
    let e = k
        .launch_cooperative(
            &stream,
            LaunchConfig::new(max + 1, 256),
            (&inp, &mut partial, &mut out, n),
        )
        .unwrap_err();
    eprintln!("{e}");
    match &e {
        CudaError::Launch(LaunchError::CooperativeLaunchTooLarge {
            blocks,
            max_blocks,
            per_sm: p,
            ..
        }) => {
            assert_eq!(
                (*blocks, *max_blocks, *p),
                (max as u64 + 1, max as u64, per_sm)
            );
        }
        other => panic!("expected CooperativeLaunchTooLarge, got {other}"),
    }
    let msg = e.to_string();
    assert!(msg.starts_with(&format!("cooperative launch of 'coop_sum' asks for {} blocks but at most {max} can be resident on {}", max + 1, ctx.device().name())), "{msg}");

    // The same grid through the raw thin layer: the driver refuses with 720.
    let mut args = [
        inp.device_address(),
        partial.device_address(),
        out.device_address(),
    ];
    let mut n_arg = n;
    let mut params: [*mut std::ffi::c_void; 4] = [
        (&mut args[0] as *mut u64).cast(),
        (&mut args[1] as *mut u64).cast(),
        (&mut args[2] as *mut u64).cast(),
        (&mut n_arg as *mut u32).cast(),
    ];
    let f = k.function().launch_handle();
    // SAFETY: four valid parameter pointers for coop_sum.
    let raw = unsafe {
        driver::launch_cooperative_kernel(
            f,
            max + 1,
            1,
            1,
            256,
            1,
            1,
            0,
            stream.raw(),
            params.as_mut_ptr(),
        )
    };
    let raw_err = raw.unwrap_err();
    assert_eq!(raw_err.driver().map(|d| d.number()), Some(720), "{raw_err}");
    // And at the maximum the raw call works too.
    // SAFETY: as above.
    unsafe {
        driver::launch_cooperative_kernel(
            f,
            max,
            1,
            1,
            256,
            1,
            1,
            0,
            stream.raw(),
            params.as_mut_ptr(),
        )
    }
    .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![expected]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn too_much_dynamic_shared_memory_is_refused() {
    let (ctx, stream) = setup();
    let m = module(&ctx);
    // SAFETY: smem_user(unsigned int *out)
    let k = unsafe { m.kernel::<(DevicePtr<u32>,)>("smem_user").unwrap() };
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 4).unwrap();
    let max = k.function().limits(&ctx).unwrap().max_dynamic_shared_bytes;
    k.launch(
        &stream,
        LaunchConfig::new(4, 128).with_shared_mem(max),
        (&mut out,),
    )
    .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![1; 4]);
    for coop in [false, true] {
        let cfg = LaunchConfig::new(1, 128).with_shared_mem(max + 1);
        let e = if coop {
            k.launch_cooperative(&stream, cfg, (&mut out,))
        } else {
            k.launch(&stream, cfg, (&mut out,))
        }
        .unwrap_err();
        assert!(
            matches!(e, CudaError::Launch(LaunchError::SharedMemoryTooLarge { requested, .. }) if requested == max + 1),
            "{e}"
        );
    }
    // Raising the limit lets a larger request through.
    k.function()
        .set_max_dynamic_shared_memory(&ctx, 100 * 1024)
        .unwrap();
    k.launch(
        &stream,
        LaunchConfig::new(1, 128).with_shared_mem(max + 1),
        (&mut out,),
    )
    .unwrap();
    stream.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn wrong_declarations_are_refused() {
    let (ctx, _s) = setup();
    let m = module(&ctx);
    // SAFETY: deliberately wrong; refused before any launch.
    let e = unsafe { m.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>)>("saxpy") }.unwrap_err();
    assert_eq!(
        e,
        CudaError::Signature(SignatureError::Count {
            kernel: "saxpy".into(),
            expected: 4,
            declared: 3
        })
    );
    // SAFETY: as above.
    let e = unsafe { m.kernel::<(f64, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy") }
        .unwrap_err();
    assert!(
        matches!(
            &e,
            CudaError::Signature(SignatureError::Size {
                index: 0,
                expected: 4,
                declared: 8,
                ..
            })
        ),
        "{e}"
    );
    eprintln!("{e}");
    let e = m.function("no_such_kernel").unwrap_err();
    assert!(e.to_string().contains("no_such_kernel"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn library_kernel_launches_on_a_stream() {
    let (ctx, stream) = setup();
    let cubin = std::fs::read(sdk_tests::kernels_dir().join("kernels.cubin")).unwrap();
    let lib = Library::from_image(&cubin).unwrap();
    // SAFETY: add_one(int *data, unsigned int n)
    let k = unsafe { lib.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() };
    let mut data = DeviceBuffer::from_slice(&ctx, &[1i32, 2, 3, 4, 5]).unwrap();
    k.launch(&stream, LaunchConfig::new(1, 32), (&mut data, 5u32))
        .unwrap();
    k.launch_cooperative(&stream, LaunchConfig::new(1, 32), (&mut data, 5u32))
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(data.to_vec().unwrap(), vec![3, 4, 5, 6, 7]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ptx_newer_than_the_driver_is_named() {
    let (ctx, _s) = setup();
    let text = ptx().replacen(".version 9.0", ".version 9.5", 1);
    let e = Module::from_ptx(&ctx, &text)
        .err()
        .expect("PTX 9.5 must not load on this driver");
    eprintln!("{e}");
    match &e {
        CudaError::PtxTooNew {
            ptx_isa,
            driver_max_isa,
            ..
        } => {
            assert_eq!(ptx_isa, "9.5");
            assert_eq!(driver_max_isa.as_deref(), Some("9.0"));
        }
        other => panic!("expected PtxTooNew, got {other:?}"),
    }
}

/// A configuration checked once (`DynKernel::check_config`) launches as the
/// full road does, and every check that can change between launches still
/// runs: a stream of another context is refused, a configuration checked
/// for another kernel is checked again, and a bad configuration is refused
/// when it is checked.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_checked_config_launches_and_every_other_check_still_runs() {
    let (ctx, stream) = setup();
    let m = module(&ctx);
    // SAFETY: saxpy(float a, const float *x, float *y, unsigned int n)
    let saxpy = unsafe {
        m.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")
            .unwrap()
    };
    let n = 10_000u32;
    let x = DeviceBuffer::from_slice(&ctx, &vec![1.5f32; n as usize]).unwrap();
    let mut y = DeviceBuffer::from_slice(&ctx, &vec![1.0f32; n as usize]).unwrap();
    let dk = saxpy.as_dyn();
    let mut block = dk.args();
    block
        .push(2.0f32)
        .unwrap()
        .push(&x)
        .unwrap()
        .push(&mut y)
        .unwrap()
        .push(n)
        .unwrap();
    let cfg = LaunchConfig::for_elements(n, 256);
    let checked = dk.check_config(&ctx, cfg, false).unwrap();
    assert_eq!(checked.config().grid, cfg.grid);
    dk.launch_checked(&stream, &checked, &block).unwrap();
    stream.synchronize().unwrap();
    // A configuration checked for the same kernel of another module
    // instance: checked again, and launched.
    let m2 = module(&ctx);
    // SAFETY: as above.
    let saxpy2 = unsafe {
        m2.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")
            .unwrap()
    };
    let other_kernels = saxpy2.as_dyn().check_config(&ctx, cfg, false).unwrap();
    dk.launch_checked(&stream, &other_kernels, &block).unwrap();
    stream.synchronize().unwrap();
    drop(block);
    // y = 2 * 1.5 + (2 * 1.5 + 1) after the two launches.
    assert!(y.to_vec().unwrap().iter().all(|v| *v == 7.0));

    // A stream of another context: buffers of the checked context are
    // refused there, and with buffers of that context the function is
    // still the primary context's.
    let mut block = dk.args();
    block
        .push(2.0f32)
        .unwrap()
        .push(&x)
        .unwrap()
        .push(&mut y)
        .unwrap()
        .push(n)
        .unwrap();
    let other = Context::new(ctx.device()).unwrap();
    let other_stream = Stream::new(&other).unwrap();
    let e = dk
        .launch_checked(&other_stream, &checked, &block)
        .unwrap_err();
    assert!(e.to_string().contains("the launch runs in context"), "{e}");
    drop(block);
    let ox = DeviceBuffer::from_slice(&other, &vec![1.5f32; n as usize]).unwrap();
    let mut oy = DeviceBuffer::from_slice(&other, &vec![1.0f32; n as usize]).unwrap();
    let mut block = dk.args();
    block
        .push(2.0f32)
        .unwrap()
        .push(&ox)
        .unwrap()
        .push(&mut oy)
        .unwrap()
        .push(n)
        .unwrap();
    let e = dk
        .launch_checked(&other_stream, &checked, &block)
        .unwrap_err();
    assert!(
        matches!(e, CudaError::Launch(LaunchError::ContextMismatch { .. })),
        "{e}"
    );
    drop(block);
    // A configuration that cannot launch is refused when it is checked.
    let e = dk
        .check_config(&ctx, LaunchConfig::new(0, 256), false)
        .unwrap_err();
    assert!(
        matches!(e, CudaError::Launch(LaunchError::ZeroDimension { .. })),
        "{e}"
    );
    let e = dk
        .check_config(&ctx, LaunchConfig::new(1, 4096), false)
        .unwrap_err();
    assert!(matches!(e, CudaError::Launch(_)), "{e}");
}
