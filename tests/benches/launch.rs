//! Host cost of enqueueing one small launch: cuda-api's validated launches
//! against the raw driver calls with the same arguments, measured in the same
//! run (only ratios within one run are comparable). Also counts heap
//! allocations during validated launches (there must be none).
//!
//! Build with `cargo xtask gpu-bundle`; run on a GPU machine.

use std::ffi::c_void;
use std::time::Instant;

use cuda_api::{
    ConstDevicePtr, Context, CudaDevice, DeviceBuffer, DevicePtr, Extent, LaunchConfig, Module,
    Stream,
};

#[global_allocator]
static GLOBAL: sdk_tests::alloc::CountingAlloc = sdk_tests::alloc::CountingAlloc;

const BATCH: usize = 500;
const ROUNDS: usize = 41;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let ctx = Context::primary(&CudaDevice::get(0).expect("a GPU")).unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let dir = std::env::var("SDK_TEST_KERNELS").unwrap_or_else(|_| "target/kernels".into());
    let m = Module::from_file(&ctx, format!("{dir}/kernels.ptx")).unwrap();
    // SAFETY: saxpy(float a, const float *x, float *y, unsigned int n)
    let k = unsafe {
        m.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")
            .unwrap()
    };
    // The same kernel with its bounds declared: x and y hold at least n elements.
    // SAFETY: as above; saxpy touches x[i] and y[i] only for i < n.
    let kb = unsafe {
        m.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")
            .unwrap()
    }
    .bound(1, Extent::Param(3))
    .unwrap()
    .bound(2, Extent::Param(3))
    .unwrap();
    let x = DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap();
    let (mut y1, mut y2, mut y3) = (
        DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap(),
        DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap(),
        DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap(),
    );
    let (mut a, mut xp, mut yp, mut n) = (2.0f32, x.device_address(), y.device_address(), 0u32);
    // A reused run-time argument block with the same values.
    let dk = k.as_dyn();
    let mut block = dk.args();
    block
        .push(2.0f32)
        .unwrap()
        .push(&x)
        .unwrap()
        .push(&mut y)
        .unwrap()
        .push(0u32)
        .unwrap();
    let cfg = LaunchConfig::new(1, 256);
    let f = k.function().launch_handle();
    let mut params: [*mut c_void; 4] = [
        (&mut a as *mut f32).cast(),
        (&mut xp as *mut u64).cast(),
        (&mut yp as *mut u64).cast(),
        (&mut n as *mut u32).cast(),
    ];
    let s = stream.raw();
    let pp = params.as_mut_ptr();

    // cuLaunchKernelEx with the cooperative attribute: the alternative single
    // entry point for both kinds of launch, measured to choose between them.
    let mut attr = cuda_sys::CUlaunchAttribute {
        id: cuda_sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
        ..Default::default()
    };
    attr.value.cooperative = 1;
    let ex_cfg = cuda_sys::CUlaunchConfig {
        gridDimX: 1,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 256,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        hStream: s,
        attrs: &mut attr,
        numAttrs: 1,
    };
    let plain_cfg = cuda_sys::CUlaunchConfig {
        numAttrs: 0,
        ..ex_cfg
    };
    // Clusters of 2 blocks (compute capability 9.0): the raw call and the
    // validated one, whose cluster checks are answered from its cache.
    let mut cluster_attr = cuda_sys::CUlaunchAttribute {
        id: cuda_sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        ..Default::default()
    };
    cluster_attr.value.clusterDim.x = 2;
    cluster_attr.value.clusterDim.y = 1;
    cluster_attr.value.clusterDim.z = 1;
    let raw_cluster_cfg = cuda_sys::CUlaunchConfig {
        gridDimX: 2,
        attrs: &mut cluster_attr,
        numAttrs: 1,
        ..ex_cfg
    };
    let cluster_cfg = LaunchConfig::new(2, 256).with_cluster(2);
    let mut y4 = DeviceBuffer::<f32>::zeroed(&ctx, 256).unwrap();
    // (name, index of the raw variant it is compared with, the launch)
    type Variant<'a> = (&'a str, usize, Box<dyn FnMut() + 'a>);
    let mut variants: Vec<Variant> = vec![
        (
            "raw cuLaunchKernel",
            0,
            // SAFETY: `f`, `s` and the parameter array `pp` (pointers to live
            // locals matching the kernel's parameters) outlive the benchmark.
            Box::new(|| unsafe {
                let r =
                    cuda_sys::cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, pp, std::ptr::null_mut());
                assert!(r.is_success());
            }),
        ),
        (
            "cuda-api TypedKernel::launch",
            0,
            Box::new(|| k.launch(&stream, cfg, (2.0f32, &x, &mut y1, 0u32)).unwrap()),
        ),
        (
            "raw cuLaunchCooperativeKernel",
            2,
            // SAFETY: `f`, `s` and the parameter array `pp` (pointers to live
            // locals matching the kernel's parameters) outlive the benchmark.
            Box::new(|| unsafe {
                let r = cuda_sys::cuLaunchCooperativeKernel(f, 1, 1, 1, 256, 1, 1, 0, s, pp);
                assert!(r.is_success());
            }),
        ),
        (
            "cuda-api TypedKernel::launch_cooperative",
            2,
            Box::new(|| {
                k.launch_cooperative(&stream, cfg, (2.0f32, &x, &mut y2, 0u32))
                    .unwrap()
            }),
        ),
        (
            "raw cuLaunchKernelEx (cooperative attr)",
            2,
            // SAFETY: `f`, `s` and the parameter array `pp` (pointers to live
            // locals matching the kernel's parameters) outlive the benchmark.
            Box::new(|| unsafe {
                let r = cuda_sys::cuLaunchKernelEx(&ex_cfg, f, pp, std::ptr::null_mut());
                assert!(r.is_success());
            }),
        ),
        (
            "raw cuLaunchKernelEx (no attributes)",
            0,
            // SAFETY: `f`, `s` and the parameter array `pp` (pointers to live
            // locals matching the kernel's parameters) outlive the benchmark.
            Box::new(|| unsafe {
                let r = cuda_sys::cuLaunchKernelEx(&plain_cfg, f, pp, std::ptr::null_mut());
                assert!(r.is_success());
            }),
        ),
        (
            "cuda-api DynKernel::launch (reused ArgBlock)",
            0,
            Box::new(|| {
                block.set(3, 0u32).unwrap();
                dk.launch(&stream, cfg, &block).unwrap()
            }),
        ),
        (
            "cuda-api TypedKernel::launch (2 bounds checked)",
            0,
            Box::new(|| {
                kb.launch(&stream, cfg, (2.0f32, &x, &mut y3, 0u32))
                    .unwrap()
            }),
        ),
        (
            "raw cuLaunchKernelEx (cluster 2)",
            8,
            // SAFETY: `f`, `s`, the parameter array `pp` (pointers to live
            // locals matching the kernel's parameters) and `cluster_attr`
            // outlive the benchmark.
            Box::new(|| unsafe {
                let r = cuda_sys::cuLaunchKernelEx(&raw_cluster_cfg, f, pp, std::ptr::null_mut());
                assert!(r.is_success());
            }),
        ),
        (
            "cuda-api TypedKernel::launch (cluster 2)",
            8,
            Box::new(|| {
                k.launch(&stream, cluster_cfg, (2.0f32, &x, &mut y4, 0u32))
                    .unwrap()
            }),
        ),
    ];
    // Warm up: caches filled, code paged in.
    for (_, _, run) in variants.iter_mut() {
        for _ in 0..BATCH {
            run();
        }
        stream.synchronize().unwrap();
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut allocs = vec![0usize; variants.len()];
    for _ in 0..ROUNDS {
        for (i, (_, _, run)) in variants.iter_mut().enumerate() {
            let before = sdk_tests::alloc::allocations();
            let t = Instant::now();
            for _ in 0..BATCH {
                run();
            }
            let dt = t.elapsed().as_secs_f64() * 1e6 / BATCH as f64;
            allocs[i] += sdk_tests::alloc::allocations() - before;
            stream.synchronize().unwrap();
            samples[i].push(dt);
        }
    }
    let med: Vec<f64> = samples.into_iter().map(median).collect();
    for (i, (name, base, _)) in variants.iter().enumerate() {
        let base = med[*base];
        println!(
            "bench launch: {name:<44} median {:.3} us/launch ({:.3}x raw), heap allocations {}",
            med[i],
            med[i] / base,
            allocs[i]
        );
    }
    // The launch-cost goal of every validated cuda-api road: a ratio to
    // the raw launch of the same arguments in the same rounds.
    const GOAL: f64 = 1.03;
    let verdict = |r: f64| if r <= GOAL { "ok" } else { "MISSED" };
    println!("bench goals: every validated cuda-api launch <= {GOAL}x its raw launch");
    println!(
        "bench summary: validated cooperative launch {:.3}x raw cuLaunchCooperativeKernel {}, validated plain launch {:.3}x raw cuLaunchKernel {}, with 2 bounds {:.3}x {}, validated cluster launch {:.3}x raw cuLaunchKernelEx(cluster) {}, reused ArgBlock launch {:.3}x raw cuLaunchKernel {}, raw cuLaunchKernelEx(cooperative) {:.3}x raw cuLaunchCooperativeKernel, raw cuLaunchKernelEx(plain) {:.3}x raw cuLaunchKernel ({} rounds x {} launches, medians)",
        med[3] / med[2],
        verdict(med[3] / med[2]),
        med[1] / med[0],
        verdict(med[1] / med[0]),
        med[7] / med[0],
        verdict(med[7] / med[0]),
        med[9] / med[8],
        verdict(med[9] / med[8]),
        med[6] / med[0],
        verdict(med[6] / med[0]),
        med[4] / med[2],
        med[5] / med[0],
        ROUNDS,
        BATCH
    );
}
