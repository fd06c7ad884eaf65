//! CUDA C++ compiled at run time by NVRTC (`cuda_api::Program`), loaded
//! through `Module`/`Library`, declared as a `TypedKernel` with bounds and
//! launched checked; PTX or cubin as the NVRTC and driver versions allow;
//! `Linker` over two relocatable programs; the cache hit on the second
//! compile (times printed). NVRTC is the one cuda-sys finds
//! (`CUDA_SYS_NVRTC_LIBRARY`, else `libnvrtc.so.13`/`.12` on the search
//! path); without one each test says SKIPPED. Run with `--include-ignored`
//! on a GPU machine.

use std::time::Instant;

use cuda_api::{
    CacheOutcome, ConstDevicePtr, Context, CudaDevice, CudaError, DeviceBuffer, DevicePtr, Extent,
    LaunchConfig, LaunchError, Linker, Output, Program, Stream, driver_version,
};

const SCALE_ADD: &str = r#"
template <typename T>
__global__ void scale_add(T a, const T *x, T *y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

/// The device's context and a stream, or `None` (after SKIPPED) without NVRTC.
fn setup(test: &str) -> Option<(CudaDevice, Context, Stream)> {
    if let Err(e) = cuda_api::nvrtc::version() {
        sdk_tests::skip(test, &format!("no NVRTC: {e}"));
        return None;
    }
    let dev = CudaDevice::get(0).expect("device 0");
    let ctx = Context::primary(&dev).expect("primary context");
    let stream = Stream::new(&ctx).expect("stream");
    Some((dev, ctx, stream))
}

fn nvrtc_version() -> u32 {
    let (major, minor) = cuda_api::nvrtc::version().unwrap();
    (major * 1000 + minor * 10) as u32
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_templated_kernel_compiled_at_run_time_launches_checked() {
    let Some((dev, ctx, stream)) =
        setup("a_templated_kernel_compiled_at_run_time_launches_checked")
    else {
        return;
    };
    let compiled = Program::new("scale_add.cu", SCALE_ADD)
        .name_expression("scale_add<float>")
        .cache(false)
        .for_device(&dev)
        .unwrap()
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "NVRTC {} wrote {:?} for sm_{}{} (driver {})",
        compiled.nvrtc_version(),
        compiled.output(),
        compiled.arch().major,
        compiled.arch().minor,
        driver_version().unwrap()
    );
    let module = compiled.load(&ctx).unwrap_or_else(|e| panic!("{e}"));
    let name = compiled.lowered_name("scale_add<float>").unwrap();
    // SAFETY: scale_add<float>(float a, const float *x, float *y, unsigned n)
    // touches x[i] and y[i] only for i < n (the source above): in bounds
    // when x and y hold n elements.
    let kernel = unsafe { module.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>(name) }
        .unwrap()
        .bound(1, Extent::Param(3))
        .unwrap()
        .bound(2, Extent::Param(3))
        .unwrap();
    let n = 10_000u32;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&ctx, &xs).unwrap();
    let mut y = DeviceBuffer::from_slice(&ctx, &vec![1.0f32; n as usize]).unwrap();
    kernel
        .launch(
            &stream,
            LaunchConfig::for_elements(n, 256),
            (2.0f32, &x, &mut y, n),
        )
        .unwrap();
    let got = y.to_vec().unwrap();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(*v, 2.0 * i as f32 + 1.0, "y[{i}]");
    }
    // The same kernel with its arguments chosen at run time (DynKernel).
    let mut args = kernel.as_dyn().args();
    args.push(1.0f32)
        .unwrap()
        .push(&x)
        .unwrap()
        .push(&mut y)
        .unwrap()
        .push(n)
        .unwrap();
    kernel
        .as_dyn()
        .launch(&stream, LaunchConfig::for_elements(n, 256), &args)
        .unwrap();
    drop(args);
    let got = y.to_vec().unwrap();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(*v, 3.0 * i as f32 + 1.0, "y[{i}] after the second launch");
    }
    // n past the buffers is refused before the driver sees it.
    let e = kernel
        .launch(
            &stream,
            LaunchConfig::for_elements(n + 1, 256),
            (2.0f32, &x, &mut y, n + 1),
        )
        .unwrap_err();
    assert!(
        matches!(e, CudaError::Launch(LaunchError::BufferTooShort { .. })),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ptx_or_cubin_as_the_nvrtc_and_driver_versions_allow() {
    let Some((dev, ctx, _stream)) = setup("ptx_or_cubin_as_the_nvrtc_and_driver_versions_allow")
    else {
        return;
    };
    let nvrtc = nvrtc_version();
    let driver = driver_version().unwrap();
    let program = Program::new("scale_add.cu", SCALE_ADD)
        .name_expression("scale_add<double>")
        .cache(false)
        .for_device(&dev)
        .unwrap();
    // A cubin always loads, as a module and as a library.
    let cubin = program.clone().output(Output::Cubin).compile().unwrap();
    let name = cubin.lowered_name("scale_add<double>").unwrap();
    cubin.load(&ctx).unwrap().function(name).unwrap();
    cubin.load_library().unwrap().function(name).unwrap();
    // PTX: loads when NVRTC is no newer than the driver, else refused with
    // both versions.
    match program.clone().output(Output::Ptx).compile() {
        Ok(ptx) => {
            eprintln!("NVRTC {nvrtc} PTX loads on driver {driver}");
            assert_eq!(
                Output::choose(nvrtc, Some(driver), None).unwrap(),
                Output::Ptx
            );
            ptx.load(&ctx)
                .unwrap_or_else(|e| panic!("{e}"))
                .function(name)
                .unwrap();
            assert_eq!(program.compile().unwrap().output(), Output::Ptx);
        }
        Err(e) => {
            eprintln!("{e}");
            assert!(matches!(e, CudaError::PtxRefused(_)), "{e}");
            assert!(nvrtc as i32 > driver, "{e}");
            assert_eq!(program.compile().unwrap().output(), Output::Cubin);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_compile_error_shows_its_line() {
    let Some((dev, _ctx, _stream)) = setup("a_compile_error_shows_its_line") else {
        return;
    };
    let e = Program::new("typo.cu", "__global__ void k(float *x) {\n  x[0] = y;\n}\n")
        .cache(false)
        .for_device(&dev)
        .unwrap()
        .compile()
        .unwrap_err();
    eprintln!("{e}");
    let CudaError::Compile(c) = &e else {
        panic!("{e}")
    };
    let first = c.first_error().unwrap();
    assert_eq!((first.file.as_str(), first.line), ("typo.cu", 2));
    assert!(
        e.to_string()
            .contains("typo.cu:2: error: identifier \"y\" is undefined"),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_linker_joins_two_relocatable_programs() {
    let Some((dev, ctx, stream)) = setup("the_linker_joins_two_relocatable_programs") else {
        return;
    };
    // Cubins: linkable whatever the NVRTC and driver versions.
    let lib = Program::new(
        "twice.cu",
        "__device__ float twice(float v) { return 2.0f * v; }",
    )
    .option("-rdc=true")
    .output(Output::Cubin)
    .cache(false)
    .for_device(&dev)
    .unwrap()
    .compile()
    .unwrap();
    let main = Program::new(
        "main.cu",
        "extern __device__ float twice(float);\n\
         extern \"C\" __global__ void double_all(float *x, unsigned n) {\n\
             unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n\
             if (i < n) x[i] = twice(x[i]);\n\
         }\n",
    )
    .option("-rdc=true")
    .output(Output::Cubin)
    .cache(false)
    .for_device(&dev)
    .unwrap()
    .compile()
    .unwrap();
    let mut linker = Linker::new(&ctx).unwrap();
    linker
        .add(lib.image(), "twice.cu")
        .unwrap()
        .add(main.image(), "main.cu")
        .unwrap();
    let module = linker.load().unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: double_all(float *x, unsigned n) touches x[i] only for i < n.
    let kernel = unsafe { module.kernel::<(DevicePtr<f32>, u32)>("double_all") }
        .unwrap()
        .bound(0, Extent::Param(1))
        .unwrap();
    let mut x = DeviceBuffer::from_slice(&ctx, &[1.0f32, 2.0, 3.0]).unwrap();
    kernel
        .launch(&stream, LaunchConfig::for_elements(3, 32), (&mut x, 3u32))
        .unwrap();
    assert_eq!(x.to_vec().unwrap(), vec![2.0, 4.0, 6.0]);
    // A symbol no input defines: the link fails with the linker's log.
    let orphan = Program::new(
        "orphan.cu",
        "extern __device__ float missing(float);\n\
         extern \"C\" __global__ void k(float *x) { x[0] = missing(x[0]); }\n",
    )
    .option("-rdc=true")
    .output(Output::Cubin)
    .cache(false)
    .for_device(&dev)
    .unwrap()
    .compile()
    .unwrap();
    let mut linker = Linker::new(&ctx).unwrap();
    linker.add(orphan.image(), "orphan.cu").unwrap();
    let e = linker.complete().unwrap_err();
    eprintln!("{e}");
    assert!(e.to_string().contains("missing"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_cache_is_hit_on_the_second_compile() {
    let Some((dev, ctx, _stream)) = setup("the_cache_is_hit_on_the_second_compile") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("gpu_program_cache_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: a fresh directory of this process under the temporary directory.
    let program = unsafe {
        Program::new("scale_add.cu", SCALE_ADD)
            .name_expression("scale_add<float>")
            .cache_dir(&dir)
    }
    .for_device(&dev)
    .unwrap();
    let t = Instant::now();
    let first = program.compile().unwrap();
    let cold = t.elapsed();
    let t = Instant::now();
    let second = program.compile().unwrap();
    let warm = t.elapsed();
    eprintln!("compile: {cold:?} with NVRTC, {warm:?} from the cache");
    assert_eq!(first.cache(), CacheOutcome::Miss);
    assert_eq!(second.cache(), CacheOutcome::Hit);
    assert_eq!(first.image(), second.image());
    second.load(&ctx).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
