//! End-to-end tests of cuda-api's run-time argument blocks, typed kernels of
//! many parameters, struct alignment, per-context facts of library kernels,
//! the order of launch checks, and page-locked and managed memory.
//! Kernels: tests/kernels/kernels.cu, built by `cargo xtask gpu-bundle`.

use std::sync::Arc;

use cuda_api::{
    Allocation, ArgBlock, Axis, ConstDevicePtr, Context, CudaDevice, CudaError, DeviceBuffer,
    DevicePtr, Extent, LaunchConfig, LaunchError, Library, MemoryKind, Module, Param, ParamRepr,
    ParamType, SignatureError, Stream,
};

fn setup() -> (Context, Stream, Module) {
    let dev = CudaDevice::get(0).expect("device 0");
    let ctx = Context::primary(&dev).expect("primary context");
    let stream = Stream::new(&ctx).expect("stream");
    let ptx = std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx"))
        .expect("kernels.ptx (run cargo xtask gpu-bundle)");
    let m = Module::from_ptx(&ctx, &ptx).expect("PTX loads");
    (ctx, stream, m)
}

/// The parameter types of `params16`: the output pointer, then 15 mixed scalars.
type P16 = (
    DevicePtr<f64>,
    i8,
    i16,
    i32,
    i64,
    f32,
    f64,
    u8,
    u16,
    u32,
    u64,
    i8,
    i16,
    i32,
    i64,
    f32,
);
const V16_EXPECTED: [f64; 15] = [
    -3.0, -6.0, -9.0, -12.0, 15.5, 18.5, 21.0, 24.0, 27.0, 30.0, -33.0, -36.0, -39.0, -42.0, 45.5,
];
fn v16(out: DevicePtr<f64>) -> P16 {
    (
        out, -3i8, -6i16, -9i32, -12i64, 15.5f32, 18.5f64, 21u8, 24u16, 27u32, 30u64, -33i8,
        -36i16, -39i32, -42i64, 45.5f32,
    )
}
fn params16() -> Vec<Param> {
    let mut p = vec![Param::of::<DevicePtr<f64>>("out")];
    p.push(Param::of::<i8>("a1"));
    p.push(Param::of::<i16>("a2"));
    p.push(Param::of::<i32>("a3"));
    p.push(Param::of::<i64>("a4"));
    p.push(Param::of::<f32>("a5"));
    p.push(Param::of::<f64>("a6"));
    p.push(Param::of::<u8>("a7"));
    p.push(Param::of::<u16>("a8"));
    p.push(Param::of::<u32>("a9"));
    p.push(Param::of::<u64>("a10"));
    p.push(Param::of::<i8>("a11"));
    p.push(Param::of::<i16>("a12"));
    p.push(Param::of::<i32>("a13"));
    p.push(Param::of::<i64>("a14"));
    p.push(Param::of::<f32>("a15"));
    p
}
fn push16(b: &mut ArgBlock<'_>, out: DevicePtr<f64>) -> cuda_api::CudaResult<()> {
    b.push(out)?;
    b.push(-3i8)?;
    b.push(-6i16)?;
    b.push(-9i32)?;
    b.push(-12i64)?;
    b.push(15.5f32)?;
    b.push(18.5f64)?;
    b.push(21u8)?;
    b.push(24u16)?;
    b.push(27u32)?;
    b.push(30u64)?;
    b.push(-33i8)?;
    b.push(-36i16)?;
    b.push(-39i32)?;
    b.push(-42i64)?;
    b.push(45.5f32)?;
    Ok(())
}
/// The parameter types of `params40`: the output pointer, then 39 mixed scalars.
type P40 = (
    DevicePtr<f64>,
    i8,
    i16,
    i32,
    i64,
    f32,
    f64,
    u8,
    u16,
    u32,
    u64,
    i8,
    i16,
    i32,
    i64,
    f32,
    f64,
    u8,
    u16,
    u32,
    u64,
    i8,
    i16,
    i32,
    i64,
    f32,
    f64,
    u8,
    u16,
    u32,
    u64,
    i8,
    i16,
    i32,
    i64,
    f32,
    f64,
    u8,
    u16,
    u32,
);
const V40_EXPECTED: [f64; 39] = [
    -3.0, -6.0, -9.0, -12.0, 15.5, 18.5, 21.0, 24.0, 27.0, 30.0, -33.0, -36.0, -39.0, -42.0, 45.5,
    48.5, 51.0, 54.0, 57.0, 60.0, -63.0, -66.0, -69.0, -72.0, 75.5, 78.5, 81.0, 84.0, 87.0, 90.0,
    -93.0, -96.0, -99.0, -102.0, 105.5, 108.5, 11.0, 114.0, 117.0,
];
fn v40(out: DevicePtr<f64>) -> P40 {
    (
        out, -3i8, -6i16, -9i32, -12i64, 15.5f32, 18.5f64, 21u8, 24u16, 27u32, 30u64, -33i8,
        -36i16, -39i32, -42i64, 45.5f32, 48.5f64, 51u8, 54u16, 57u32, 60u64, -63i8, -66i16, -69i32,
        -72i64, 75.5f32, 78.5f64, 81u8, 84u16, 87u32, 90u64, -93i8, -96i16, -99i32, -102i64,
        105.5f32, 108.5f64, 11u8, 114u16, 117u32,
    )
}
fn params40() -> Vec<Param> {
    let mut p = vec![Param::of::<DevicePtr<f64>>("out")];
    p.push(Param::of::<i8>("a1"));
    p.push(Param::of::<i16>("a2"));
    p.push(Param::of::<i32>("a3"));
    p.push(Param::of::<i64>("a4"));
    p.push(Param::of::<f32>("a5"));
    p.push(Param::of::<f64>("a6"));
    p.push(Param::of::<u8>("a7"));
    p.push(Param::of::<u16>("a8"));
    p.push(Param::of::<u32>("a9"));
    p.push(Param::of::<u64>("a10"));
    p.push(Param::of::<i8>("a11"));
    p.push(Param::of::<i16>("a12"));
    p.push(Param::of::<i32>("a13"));
    p.push(Param::of::<i64>("a14"));
    p.push(Param::of::<f32>("a15"));
    p.push(Param::of::<f64>("a16"));
    p.push(Param::of::<u8>("a17"));
    p.push(Param::of::<u16>("a18"));
    p.push(Param::of::<u32>("a19"));
    p.push(Param::of::<u64>("a20"));
    p.push(Param::of::<i8>("a21"));
    p.push(Param::of::<i16>("a22"));
    p.push(Param::of::<i32>("a23"));
    p.push(Param::of::<i64>("a24"));
    p.push(Param::of::<f32>("a25"));
    p.push(Param::of::<f64>("a26"));
    p.push(Param::of::<u8>("a27"));
    p.push(Param::of::<u16>("a28"));
    p.push(Param::of::<u32>("a29"));
    p.push(Param::of::<u64>("a30"));
    p.push(Param::of::<i8>("a31"));
    p.push(Param::of::<i16>("a32"));
    p.push(Param::of::<i32>("a33"));
    p.push(Param::of::<i64>("a34"));
    p.push(Param::of::<f32>("a35"));
    p.push(Param::of::<f64>("a36"));
    p.push(Param::of::<u8>("a37"));
    p.push(Param::of::<u16>("a38"));
    p.push(Param::of::<u32>("a39"));
    p
}
fn push40(b: &mut ArgBlock<'_>, out: DevicePtr<f64>) -> cuda_api::CudaResult<()> {
    b.push(out)?;
    b.push(-3i8)?;
    b.push(-6i16)?;
    b.push(-9i32)?;
    b.push(-12i64)?;
    b.push(15.5f32)?;
    b.push(18.5f64)?;
    b.push(21u8)?;
    b.push(24u16)?;
    b.push(27u32)?;
    b.push(30u64)?;
    b.push(-33i8)?;
    b.push(-36i16)?;
    b.push(-39i32)?;
    b.push(-42i64)?;
    b.push(45.5f32)?;
    b.push(48.5f64)?;
    b.push(51u8)?;
    b.push(54u16)?;
    b.push(57u32)?;
    b.push(60u64)?;
    b.push(-63i8)?;
    b.push(-66i16)?;
    b.push(-69i32)?;
    b.push(-72i64)?;
    b.push(75.5f32)?;
    b.push(78.5f64)?;
    b.push(81u8)?;
    b.push(84u16)?;
    b.push(87u32)?;
    b.push(90u64)?;
    b.push(-93i8)?;
    b.push(-96i16)?;
    b.push(-99i32)?;
    b.push(-102i64)?;
    b.push(105.5f32)?;
    b.push(108.5f64)?;
    b.push(11u8)?;
    b.push(114u16)?;
    b.push(117u32)?;
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sixteen_and_forty_parameters_through_both_paths() {
    let (ctx, stream, m) = setup();
    let one = LaunchConfig::new(1, 32);
    // Typed tuples.
    // SAFETY: params16(double *out, signed char, short, int, long long, float, double, unsigned char, ...)
    let k16 = unsafe { m.kernel::<P16>("params16").unwrap() };
    // SAFETY: params40: as params16, 39 scalars.
    let k40 = unsafe { m.kernel::<P40>("params40").unwrap() };
    let mut out16 = DeviceBuffer::<f64>::zeroed(&ctx, 15).unwrap();
    let mut out40 = DeviceBuffer::<f64>::zeroed(&ctx, 39).unwrap();
    k16.launch(
        &stream,
        one,
        v16(
            // SAFETY: out16 outlives the launch and is read back only after a synchronize.
            unsafe { out16.as_mut_ptr() },
        ),
    )
    .unwrap();
    k40.launch(
        &stream,
        one,
        v40(
            // SAFETY: out40 outlives the launch and is read back only after a synchronize.
            unsafe { out40.as_mut_ptr() },
        ),
    )
    .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out16.to_vec().unwrap(), V16_EXPECTED);
    assert_eq!(out40.to_vec().unwrap(), V40_EXPECTED);

    // Run-time blocks, named parameters.
    // SAFETY: the same declarations, by name.
    let d16 = unsafe { m.dyn_kernel("params16", params16()).unwrap() };
    // SAFETY: as above.
    let d40 = unsafe { m.dyn_kernel("params40", params40()).unwrap() };
    let mut b16 = d16.args();
    let mut b40 = d40.args();
    out16.fill_bytes(0).unwrap();
    out40.fill_bytes(0).unwrap();
    push16(
        &mut b16,
        // SAFETY: out16 outlives the launch and is read back only after a synchronize.
        unsafe { out16.as_mut_ptr() },
    )
    .unwrap();
    push40(
        &mut b40,
        // SAFETY: out40 outlives the launch and is read back only after a synchronize.
        unsafe { out40.as_mut_ptr() },
    )
    .unwrap();
    d16.launch(&stream, one, &b16).unwrap();
    d40.launch(&stream, one, &b40).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out16.to_vec().unwrap(), V16_EXPECTED);
    assert_eq!(out40.to_vec().unwrap(), V40_EXPECTED);

    // A reused block with one value changed by name.
    b40.set_by_name("a39", 1234u32).unwrap();
    d40.launch(&stream, one, &b40).unwrap();
    stream.synchronize().unwrap();
    let got = out40.to_vec().unwrap();
    assert_eq!(got[38], 1234.0);
    assert_eq!(got[..38], V40_EXPECTED[..38]);

    // A block of one kernel is refused by another; an incomplete one too.
    let e = d16.launch(&stream, one, &b40).unwrap_err();
    assert!(e.to_string().contains("made for kernel 'params40'"), "{e}");
    let e = d16.launch(&stream, one, &d16.args()).unwrap_err();
    assert!(e.to_string().contains("16 argument(s) not set"), "{e}");
    // A value of the wrong type is refused with the parameter's name.
    let e = b16.set_by_name("a3", 1u32).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel 'params16' argument 3 ('a3') expects i32 but was given u32; pass a i32"
    );
}

#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Vec4 {
    x: f32,
    y: f32,
    z: f32,
    w: f32,
}
// SAFETY: plain data with the layout of the kernel's `struct __align__(16) vec4_t`.
unsafe impl ParamRepr for Vec4 {}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
struct LooseVec4 {
    v: [f32; 4],
}
// SAFETY: plain data (its alignment is deliberately too small: refused by the check).
unsafe impl ParamRepr for LooseVec4 {}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_16_byte_aligned_struct_parameter() {
    let (ctx, stream, m) = setup();
    // SAFETY: aligned_struct(int n, vec4_t v, float *out)
    let k = unsafe {
        m.kernel::<(i32, Vec4, DevicePtr<f32>)>("aligned_struct")
            .unwrap()
    };
    let layout = k.function().param_layout().unwrap();
    eprintln!("aligned_struct layout: {layout:?}");
    assert_eq!(layout[1].offset, 16);
    let mut out = DeviceBuffer::<f32>::zeroed(&ctx, 4).unwrap();
    let v = Vec4 {
        x: 1.0,
        y: 2.0,
        z: 3.0,
        w: 4.0,
    };
    k.launch(&stream, LaunchConfig::new(1, 1), (3, v, &mut out))
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), [3.0, 6.0, 9.0, 12.0]);
    // The same through a block, with the struct as opaque bytes.
    // SAFETY: the parameter types; the struct as 16 opaque bytes aligned to 16.
    let d = unsafe {
        m.dyn_kernel(
            "aligned_struct",
            vec![
                Param::of::<i32>("n"),
                Param::new("v", ParamType::opaque("vec4_t", 16, 16)),
                Param::of::<DevicePtr<f32>>("out"),
            ],
        )
        .unwrap()
    };
    let mut b = d.args();
    let bytes: Vec<u8> = [5.0f32, 6.0, 7.0, 8.0]
        .iter()
        .flat_map(|f| f.to_ne_bytes())
        .collect();
    b.push(2i32).unwrap();
    // SAFETY: four floats are a valid vec4_t.
    unsafe { b.set_bytes(1, &bytes).unwrap() };
    b.push(&mut out).unwrap();
    d.launch(&stream, LaunchConfig::new(1, 1), &b).unwrap();
    stream.synchronize().unwrap();
    drop(b);
    assert_eq!(out.to_vec().unwrap(), [10.0, 12.0, 14.0, 16.0]);
    // A declaration with the wrong alignment is refused before any launch.
    // SAFETY: refused by the offset check.
    let e = unsafe { m.kernel::<(i32, LooseVec4, DevicePtr<f32>)>("aligned_struct") }.unwrap_err();
    eprintln!("{e}");
    assert!(
        matches!(
            &e,
            CudaError::Signature(SignatureError::Offset {
                index: 1,
                expected: 16,
                declared: 4,
                ..
            })
        ),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_library_kernel_in_two_contexts_and_a_module_function_in_the_wrong_one() {
    let (ctx_a, stream_a, m) = setup();
    let ctx_b = Context::new(ctx_a.device()).unwrap();
    let stream_b = Stream::new(&ctx_b).unwrap();
    assert_ne!(ctx_a, ctx_b);
    let cubin = std::fs::read(sdk_tests::kernels_dir().join("kernels.cubin")).unwrap();
    let lib = Library::from_image(&cubin).unwrap();
    // SAFETY: add_one(int *data, unsigned int n)
    let k = unsafe { lib.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() };
    let mut a = DeviceBuffer::from_slice(&ctx_a, &[1i32, 2, 3]).unwrap();
    let mut b = DeviceBuffer::from_slice(&ctx_b, &[10i32, 20, 30]).unwrap();
    k.launch(&stream_a, LaunchConfig::new(1, 32), (&mut a, 3u32))
        .unwrap();
    k.launch(&stream_b, LaunchConfig::new(1, 32), (&mut b, 3u32))
        .unwrap();
    k.launch_cooperative(&stream_b, LaunchConfig::new(1, 32), (&mut b, 3u32))
        .unwrap();
    stream_a.synchronize().unwrap();
    stream_b.synchronize().unwrap();
    assert_eq!(a.to_vec().unwrap(), [2, 3, 4]);
    assert_eq!(b.to_vec().unwrap(), [12, 22, 32]);
    // Facts are kept per context: each context's limits are what the driver
    // answers there, also after raising one context's shared memory limit.
    let f = k.function();
    f.set_max_dynamic_shared_memory(&ctx_b, 100 * 1024).unwrap();
    let attr = cuda_api::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    for ctx in [&ctx_a, &ctx_b] {
        let cached = f.limits(ctx).unwrap().max_dynamic_shared_bytes;
        let driver = f.attribute(ctx, attr).unwrap() as u32;
        eprintln!("{ctx}: dynamic shared memory limit {cached} (driver {driver})");
        assert_eq!(cached, driver);
    }
    assert_eq!(
        f.limits(&ctx_b).unwrap().max_dynamic_shared_bytes,
        100 * 1024
    );
    assert!(f.max_cooperative_grid(&ctx_a, 32, 0).unwrap() > 0);
    assert!(f.max_cooperative_grid(&ctx_b, 32, 0).unwrap() > 0);

    // A module's function belongs to its context: another context's stream is refused.
    // SAFETY: add_one(int *data, unsigned int n)
    let mk = unsafe { m.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() };
    let e = mk
        .launch(&stream_b, LaunchConfig::new(1, 32), (&mut b, 3u32))
        .unwrap_err();
    eprintln!("{e}");
    assert!(
        matches!(e, CudaError::Launch(LaunchError::ContextMismatch { .. })),
        "{e}"
    );
    assert_eq!(b.to_vec().unwrap(), [12, 22, 32]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn zero_blocks_and_impossible_configurations_are_refused_before_the_driver() {
    let (ctx, stream, m) = setup();
    // SAFETY: add_one(int *data, unsigned int n)
    let k = unsafe { m.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() };
    let mut d = DeviceBuffer::<i32>::zeroed(&ctx, 4).unwrap();
    for coop in [false, true] {
        let cfg = LaunchConfig::new(1, (0, 1, 1));
        let e = if coop {
            k.launch_cooperative(&stream, cfg, (&mut d, 4u32))
        } else {
            k.launch(&stream, cfg, (&mut d, 4u32))
        }
        .unwrap_err();
        assert!(
            matches!(
                e,
                CudaError::Launch(LaunchError::ZeroDimension {
                    axis: "block.x",
                    ..
                })
            ),
            "{e}"
        );
    }
    let e = k.max_cooperative_grid(&ctx, 0, 0).unwrap_err();
    assert!(
        matches!(e, CudaError::Launch(LaunchError::ZeroDimension { .. })),
        "{e}"
    );
    // __launch_bounds__(128): 256 threads can never launch.
    // SAFETY: bounded128(unsigned int *out)
    let b = unsafe { m.kernel::<(DevicePtr<u32>,)>("bounded128").unwrap() };
    let limits = b.function().limits(&ctx).unwrap();
    assert_eq!(limits.max_threads_per_block, 128);
    let e = b.max_cooperative_grid(&ctx, 256, 0).unwrap_err();
    eprintln!("{e}");
    assert!(
        matches!(
            e,
            CudaError::Launch(LaunchError::BlockTooLarge {
                threads: 256,
                max: 128,
                ..
            })
        ),
        "{e}"
    );
    let e = b.function().occupancy(&ctx, 256, 0).unwrap_err();
    assert!(
        matches!(e, CudaError::Launch(LaunchError::BlockTooLarge { .. })),
        "{e}"
    );
    let e = b
        .max_cooperative_grid(&ctx, 128, limits.max_dynamic_shared_bytes + 1)
        .unwrap_err();
    assert!(
        matches!(
            e,
            CudaError::Launch(LaunchError::SharedMemoryTooLarge { .. })
        ),
        "{e}"
    );
    assert!(b.max_cooperative_grid(&ctx, 128, 0).unwrap() > 0);
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 256).unwrap();
    let e = b
        .launch(&stream, LaunchConfig::new(1, 256), (&mut out,))
        .unwrap_err();
    assert!(
        matches!(e, CudaError::Launch(LaunchError::BlockTooLarge { .. })),
        "{e}"
    );
    b.launch(&stream, LaunchConfig::new(2, 128), (&mut out,))
        .unwrap();
    stream.synchronize().unwrap();
    assert!(out.to_vec().unwrap().iter().all(|v| *v == 1));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn page_locked_and_managed_memory_in_kernels() {
    let (ctx, stream, m) = setup();
    // SAFETY: saxpy(float a, const float *x, float *y, unsigned int n)
    let saxpy = unsafe {
        m.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")
            .unwrap()
    };
    let n = 4096usize;
    for (xk, yk) in [
        (MemoryKind::PinnedHost, MemoryKind::Managed),
        (MemoryKind::Managed, MemoryKind::PinnedHost),
        (MemoryKind::Device, MemoryKind::Managed),
    ] {
        let x = DeviceBuffer::from_slice_in(&ctx, &vec![2.0f32; n], xk).unwrap();
        let mut y = DeviceBuffer::from_slice_in(&ctx, &vec![1.0f32; n], yk).unwrap();
        assert_eq!((x.kind(), y.kind()), (xk, yk));
        saxpy
            .launch(
                &stream,
                LaunchConfig::for_elements(n as u32, 256),
                (3.0f32, &x, &mut y, n as u32),
            )
            .unwrap();
        stream.synchronize().unwrap();
        assert!(
            y.to_vec().unwrap().iter().all(|v| *v == 7.0),
            "{xk} -> {yk}"
        );
    }
    // An untyped allocation shared through Arc, read back by bytes.
    let shared = Arc::new(Allocation::zeroed(&ctx, 16, MemoryKind::Managed).unwrap());
    let other = shared.clone();
    other.copy_from_host(4, &7u32.to_ne_bytes()).unwrap();
    let mut back = [0u8; 16];
    shared.copy_to_host(0, &mut back).unwrap();
    assert_eq!(&back[4..8], &7u32.to_ne_bytes());
    let e = shared.copy_to_host(8, &mut [0u8; 16]).unwrap_err();
    assert!(
        e.to_string().contains("run past the allocation's 16 bytes"),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_instances_are_shared_and_streams_clone() {
    let (ctx, stream, _m) = setup();
    let a = CudaDevice::get(0).unwrap();
    let b = CudaDevice::get(0).unwrap();
    assert_eq!(a, b);
    // One cache: a limit queried through one is there for the other.
    assert!(std::ptr::eq(a.limits().unwrap(), b.limits().unwrap()));
    let s2 = stream.clone();
    let mut d = DeviceBuffer::<u32>::zeroed(&ctx, 8).unwrap();
    d.fill_async(5, &s2).unwrap();
    drop(s2);
    stream.synchronize().unwrap();
    assert_eq!(d.to_vec().unwrap(), [5; 8]);
}

/// The device's warp size and thread limits, as `DeviceLimits` reads them.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_limits_carry_the_warp_and_thread_limits() {
    let (ctx, _stream, _m) = setup();
    let l = ctx.device().limits().unwrap();
    eprintln!(
        "{}: warp {}, {} threads per block, {} per SM",
        l.name, l.warp_size, l.max_threads_per_block, l.max_threads_per_sm
    );
    assert_eq!(l.warp_size, 32);
    assert_eq!(l.max_threads_per_block, 1024);
    assert!(l.max_threads_per_sm >= 1024, "{l:?}");
}

/// csr_row_lengths(const int *row_ptr, int *out, int n): row_ptr holds n + 1.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_csr_row_pointer_of_n_entries_is_refused_and_n_plus_one_runs() {
    let (ctx, stream, m) = setup();
    // SAFETY: csr_row_lengths reads row_ptr[0..=n) and writes out[0..n).
    let k = unsafe {
        m.kernel::<(ConstDevicePtr<i32>, DevicePtr<i32>, i32)>("csr_row_lengths")
            .unwrap()
    }
    .names(&["row_ptr", "out", "n"])
    .unwrap()
    .bound(0, Extent::Param(2) + 1)
    .unwrap()
    .bound(1, Extent::Param(2))
    .unwrap();
    let n = 1000i32;
    let rows: Vec<i32> = (0..=n).map(|i| i * (i % 3)).collect();
    let row_ptr = DeviceBuffer::from_slice(&ctx, &rows).unwrap();
    let short = DeviceBuffer::from_slice(&ctx, &rows[..n as usize]).unwrap();
    let mut out = DeviceBuffer::<i32>::zeroed(&ctx, n as usize).unwrap();
    let cfg = LaunchConfig::for_elements(n as u32, 256);
    let e = k.launch(&stream, cfg, (&short, &mut out, n)).unwrap_err();
    eprintln!("{e}");
    assert!(
        matches!(
            e,
            CudaError::Launch(LaunchError::BufferTooShort {
                index: 0,
                len: 1000,
                needed: 1001,
                ..
            })
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("argument 0 ('row_ptr')")
            && e.to_string().contains("argument 2 ('n') + 1 = 1001"),
        "{e}"
    );
    k.launch(&stream, cfg, (&row_ptr, &mut out, n)).unwrap();
    let got = out.to_vec().unwrap();
    let want: Vec<i32> = rows.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(got, want);
}

/// per_block(unsigned *partial, unsigned k): k values per block.
#[test]
#[ignore = "needs a CUDA GPU"]
fn an_argument_times_the_grid_is_checked_at_launch() {
    let (ctx, stream, m) = setup();
    // SAFETY: per_block writes partial[blockIdx.x * k + j] for j < k.
    let pb = unsafe { m.kernel::<(DevicePtr<u32>, u32)>("per_block").unwrap() }
        .names(&["partial", "k"])
        .unwrap()
        .bound(0, Extent::Param(1) * Extent::Blocks)
        .unwrap();
    let mut short = DeviceBuffer::<u32>::zeroed(&ctx, 16 * 8 - 1).unwrap();
    let e = pb
        .launch(&stream, LaunchConfig::new(16, 32), (&mut short, 8u32))
        .unwrap_err();
    eprintln!("{e}");
    assert!(
        matches!(
            e,
            CudaError::Launch(LaunchError::BufferTooShort { needed: 128, .. })
        ),
        "{e}"
    );
    let mut partial = DeviceBuffer::<u32>::zeroed(&ctx, 128).unwrap();
    pb.launch(&stream, LaunchConfig::new(16, 32), (&mut partial, 8u32))
        .unwrap();
    let got = partial.to_vec().unwrap();
    assert!(got.iter().enumerate().all(|(i, v)| *v == (i / 8) as u32));
}

/// tile_transpose(const float *in, float *out): blocks of exactly 32 x 32,
/// at most 64 of them, (blockDim.x + 1) x blockDim.y floats of shared memory.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_fixed_block_a_grid_limit_and_shared_memory_of_the_block_are_checked() {
    let (ctx, stream, m) = setup();
    // SAFETY: tile_transpose reads in[blockIdx.x * 1024 + 32 ty + tx], writes
    // out at the same indices, indexes tile[(blockDim.x + 1) * blockDim.y]
    // and tiles_done[blockIdx.x] (64 entries); written for 32 x 32 blocks.
    let k = unsafe {
        m.kernel::<(ConstDevicePtr<f32>, DevicePtr<f32>)>("tile_transpose")
            .unwrap()
    }
    .names(&["in", "out"])
    .unwrap()
    .fixed_block((32, 32))
    .unwrap()
    .max_grid(64)
    .unwrap()
    .shared_mem((Extent::Block(Axis::X) + 1) * Extent::Block(Axis::Y) * 4)
    .unwrap()
    .bound(0, Extent::Threads)
    .unwrap()
    .bound(1, Extent::Threads)
    .unwrap();
    let tiles = 64usize;
    let input: Vec<f32> = (0..tiles * 1024).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&ctx, &input).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&ctx, tiles * 1024).unwrap();
    let smem = 33 * 32 * 4;
    let ok = LaunchConfig::new(tiles as u32, (32, 32)).with_shared_mem(smem);
    let refused = |cfg: LaunchConfig, y: &mut DeviceBuffer<f32>| {
        let e = k.launch(&stream, cfg, (&x, y)).unwrap_err();
        eprintln!("{e}");
        e
    };
    let e = refused(
        LaunchConfig::new(16, (32, 16)).with_shared_mem(smem),
        &mut y,
    );
    assert!(
        matches!(e, CudaError::Launch(LaunchError::BlockNotDeclared { .. })),
        "{e}"
    );
    // 65 blocks need a buffer of 65 tiles too: the grid limit is named first.
    let mut big = DeviceBuffer::<f32>::zeroed(&ctx, 65 * 1024).unwrap();
    let x65 = DeviceBuffer::<f32>::zeroed(&ctx, 65 * 1024).unwrap();
    let e = k
        .launch(
            &stream,
            LaunchConfig::new(65, (32, 32)).with_shared_mem(smem),
            (&x65, &mut big),
        )
        .unwrap_err();
    eprintln!("{e}");
    assert!(
        matches!(
            e,
            CudaError::Launch(LaunchError::GridAboveDeclared {
                blocks: 65,
                max: 64,
                ..
            })
        ),
        "{e}"
    );
    let e = refused(ok.with_shared_mem(smem - 1), &mut y);
    assert!(
        matches!(
            e,
            CudaError::Launch(LaunchError::SharedMemoryBelowDeclared {
                needed: 4224,
                given: 4223,
                ..
            })
        ),
        "{e}"
    );
    k.launch(&stream, ok, (&x, &mut y)).unwrap();
    let got = y.to_vec().unwrap();
    for t in [0usize, 63] {
        for r in 0..32 {
            for c in 0..32 {
                assert_eq!(got[t * 1024 + r * 32 + c], input[t * 1024 + c * 32 + r]);
            }
        }
    }
    // The declared rules size the occupancy answer: the fixed block with
    // its shared memory.
    let p = k.max_potential_block_size(&ctx, 0).unwrap();
    assert_eq!((p.block_threads, p.shared_mem_bytes), (1024, 4224), "{p:?}");
    assert_eq!(
        p.min_grid_blocks,
        k.max_cooperative_grid(&ctx, 1024, 4224).unwrap()
    );
    assert!(k.occupancy(&ctx, 1024, 4224).unwrap() >= 1);
}

/// scale4(float4 *v, unsigned n): a float buffer viewed as float4.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_buffer_viewed_as_a_wider_type_is_bounded_in_that_type() {
    let (ctx, stream, m) = setup();
    // SAFETY: scale4 reads and writes v[0..n) (float4 values).
    let k = unsafe { m.kernel::<(DevicePtr<[f32; 4]>, u32)>("scale4").unwrap() }
        .names(&["v", "n"])
        .unwrap()
        .bound(0, Extent::Param(1))
        .unwrap();
    let data: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let mut buf = DeviceBuffer::from_slice(&ctx, &data).unwrap();
    {
        let mut v = buf.view_as_mut::<[f32; 4]>().unwrap();
        assert_eq!(v.len(), 256);
        // 257 float4 would read past the 1024 floats: refused in float4s.
        let e = k
            .launch(&stream, LaunchConfig::new(2, 256), (&mut v, 257u32))
            .unwrap_err();
        eprintln!("{e}");
        assert!(
            matches!(
                e,
                CudaError::Launch(LaunchError::BufferTooShort {
                    len: 256,
                    needed: 257,
                    ..
                })
            ),
            "{e}"
        );
        k.launch(&stream, LaunchConfig::new(1, 256), (&mut v, 256u32))
            .unwrap();
    }
    let got = buf.to_vec().unwrap();
    assert!(got.iter().enumerate().all(|(i, v)| *v == 2.0 * i as f32));
    // 1022 floats are not a whole number of float4: the view is refused.
    let odd = DeviceBuffer::<f32>::zeroed(&ctx, 1022).unwrap();
    let e = odd.view_as::<[f32; 4]>().err().expect("refused");
    assert!(
        e.to_string().contains("not a whole number of [f32; 4]"),
        "{e}"
    );
    // A view starting 4 bytes in is not aligned for float4.
    let e = buf
        .slice(1..1021)
        .unwrap()
        .cast::<[f32; 4]>()
        .err()
        .expect("refused");
    assert!(e.to_string().contains("not aligned"), "{e}");
}

/// cuda-api's max_potential_block_size (the runtime's search over the
/// occupancy query) against the driver's cuOccupancyMaxPotentialBlockSize
/// for fixed shared-memory sizes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_potential_block_size_equals_the_drivers() {
    let (ctx, _stream, m) = setup();
    for name in [
        "saxpy",
        "coop_sum",
        "bounded128",
        "smem_user",
        "tile_transpose",
    ] {
        let f = m.function(name).unwrap();
        for smem in [0u32, 4096, 40 * 1024] {
            let ours = f
                .max_potential_block_size(&ctx, 0, |_| u64::from(smem))
                .unwrap();
            let raw = f.function_in(&ctx).unwrap();
            // SAFETY: `raw` is this context's function of a loaded module;
            // no callback (a fixed shared-memory size).
            let (min_grid, block) = unsafe {
                cuda_api::driver::occupancy_max_potential_block_size(raw, None, smem as usize, 0)
            }
            .unwrap();
            eprintln!("{name} at {smem} B: ours {ours:?}, driver ({min_grid}, {block})");
            assert_eq!(
                (ours.min_grid_blocks, ours.block_threads),
                (min_grid as u32, block as u32),
                "{name} at {smem} B"
            );
        }
    }
}
