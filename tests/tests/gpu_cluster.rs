//! GPU tests of cuda-api's launch attributes for compute capability 9.0:
//! thread-block clusters refused and accepted at the device's limits (the
//! kernel reports the cluster it ran in), streams of the highest and lowest
//! priority, and a programmatic dependent launch pair. Kernels:
//! tests/kernels/cluster.cu, compiled by `cargo xtask gpu-bundle`. Run with
//! `--include-ignored` on a GPU machine.

use cuda_api::{
    ClusterLimits, ConstDevicePtr, Context, CudaDevice, CudaError, DeviceBuffer, DevicePtr, Dim3,
    Extent, LaunchConfig, LaunchError, Module, PORTABLE_CLUSTER_SIZE, Stream, TypedKernel,
};

/// What one block saw (see `report_cluster` in cluster.cu): rank, blocks,
/// cluster x, y, z, and the next block's shared-memory value.
type Seen = [u32; 6];
type ClusterId = (DevicePtr<Seen>,);
type Primary = (DevicePtr<u32>, u32, u64, DevicePtr<u64>);
type Secondary = (ConstDevicePtr<u32>, DevicePtr<u32>, u32, DevicePtr<u64>);

fn setup() -> (Context, Stream, Module) {
    let dev = CudaDevice::get(0).expect("device 0");
    let ctx = Context::primary(&dev).expect("primary context");
    let stream = Stream::new(&ctx).expect("stream");
    let cubin = sdk_tests::kernels_dir().join("cluster.cubin");
    let module =
        Module::from_file(&ctx, &cubin).expect("cluster.cubin (run cargo xtask gpu-bundle)");
    let (major, _) = dev.compute_capability().unwrap();
    assert!(
        major >= 9,
        "these tests need compute capability 9.0 or later"
    );
    (ctx, stream, module)
}

fn cluster_kernel(m: &Module, name: &str) -> TypedKernel<ClusterId> {
    // SAFETY: cluster_id and cluster_fixed take `unsigned (*out)[6]` and
    // write out[b] for each block b of the grid, nothing else.
    unsafe { m.kernel::<ClusterId>(name) }
        .unwrap()
        .bound(0, Extent::Blocks)
        .unwrap()
}

/// Launches `k` with `cfg` and returns what each block saw.
fn run(
    k: &TypedKernel<ClusterId>,
    ctx: &Context,
    s: &Stream,
    cfg: LaunchConfig,
) -> cuda_api::CudaResult<Vec<Seen>> {
    let blocks = cfg.grid.product().unwrap() as usize;
    let mut out = DeviceBuffer::<Seen>::zeroed(ctx, blocks)?;
    k.launch(s, cfg, (&mut out,))?;
    out.to_vec()
}

/// Checks every block's report against clusters of `cluster` tiling `grid`
/// (ranks x fastest, as `%cluster_ctarank` counts).
fn expect_clusters(seen: &[Seen], grid: Dim3, cluster: Dim3) {
    let n = cluster.x * cluster.y * cluster.z;
    assert_eq!(seen.len() as u64, grid.product().unwrap());
    for (b, s) in seen.iter().enumerate() {
        let b = b as u32;
        let (bx, by, bz) = (b % grid.x, (b / grid.x) % grid.y, b / (grid.x * grid.y));
        let rank = bx % cluster.x + cluster.x * (by % cluster.y + cluster.y * (bz % cluster.z));
        let next = (rank + 1) % n * 10 + 1;
        assert_eq!(
            *s,
            [rank, n, cluster.x, cluster.y, cluster.z, next],
            "block {b} of grid {grid} with clusters of {cluster}"
        );
    }
}

fn launch_error(r: cuda_api::CudaResult<Vec<Seen>>) -> LaunchError {
    match r {
        Err(CudaError::Launch(e)) => e,
        other => panic!("expected a refused launch, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn portable_clusters_run_and_one_block_more_is_refused() {
    let (ctx, s, m) = setup();
    let k = cluster_kernel(&m, "cluster_id");
    let limits = k
        .function()
        .cluster_limits(&ctx, &LaunchConfig::new(64, 32))
        .unwrap();
    eprintln!("cluster_id at 32 threads: {limits:?}");
    assert_eq!(
        limits,
        ClusterLimits {
            non_portable_allowed: false,
            required: None,
            max_size: PORTABLE_CLUSTER_SIZE,
        }
    );

    for (grid, cluster) in [
        (Dim3::new(64, 1, 1), Dim3::new(8, 1, 1)),
        (Dim3::new(4, 4, 2), Dim3::new(2, 2, 2)),
        (Dim3::new(6, 4, 1), Dim3::new(3, 2, 1)),
    ] {
        let cfg = LaunchConfig::new(grid, 32).with_cluster(cluster);
        expect_clusters(&run(&k, &ctx, &s, cfg).unwrap(), grid, cluster);
        let active = k.function().max_active_clusters(&ctx, &cfg).unwrap();
        eprintln!("clusters of {cluster}: {active} resident at once");
        assert!(active > 0);
    }

    // 16 blocks without non-portable sizes: refused before the driver.
    let cfg = LaunchConfig::new(64, 32).with_cluster(16);
    let e = launch_error(run(&k, &ctx, &s, cfg));
    assert!(
        matches!(
            e,
            LaunchError::ClusterTooLarge {
                size: 16,
                max: 8,
                non_portable_allowed: false,
                ..
            }
        ),
        "{e}"
    );
    // A grid that is not a multiple of the cluster.
    let e = launch_error(run(&k, &ctx, &s, LaunchConfig::new(60, 32).with_cluster(8)));
    assert_eq!(
        e,
        LaunchError::ClusterDoesNotDivideGrid {
            kernel: "cluster_id".into(),
            axis: "x",
            grid: 60,
            cluster: 8,
        }
    );
    // The stream still works after the refusals.
    let cfg = LaunchConfig::new(8, 32).with_cluster(4);
    expect_clusters(
        &run(&k, &ctx, &s, cfg).unwrap(),
        Dim3::new(8, 1, 1),
        Dim3::new(4, 1, 1),
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn non_portable_clusters_reach_the_device_maximum_and_no_further() {
    let (ctx, s, m) = setup();
    let k = cluster_kernel(&m, "cluster_id");
    let f = k.function();
    f.allow_non_portable_cluster_size(&ctx, true).unwrap();
    let limits = f.cluster_limits(&ctx, &LaunchConfig::new(1, 32)).unwrap();
    eprintln!("cluster_id at 32 threads, non-portable: {limits:?}");
    assert!(limits.non_portable_allowed);
    let max = limits.max_size;
    assert!(max > PORTABLE_CLUSTER_SIZE, "{limits:?}");
    if ctx.device().name().contains("H200") {
        assert_eq!(max, 16, "the H200 runs clusters of up to 16 blocks");
    }

    let grid = Dim3::new(4 * max, 1, 1);
    let cfg = LaunchConfig::new(grid, 32).with_cluster(max);
    expect_clusters(&run(&k, &ctx, &s, cfg).unwrap(), grid, Dim3::new(max, 1, 1));

    let cfg = LaunchConfig::new(2 * (max + 1), 32).with_cluster(max + 1);
    let e = launch_error(run(&k, &ctx, &s, cfg));
    assert!(
        matches!(e, LaunchError::ClusterTooLarge { size, max: m, non_portable_allowed: true, .. } if size == u64::from(max) + 1 && m == max),
        "{e}"
    );

    // Forbidden again: 16 is refused with the portable limit.
    f.allow_non_portable_cluster_size(&ctx, false).unwrap();
    let cfg = LaunchConfig::new(grid, 32).with_cluster(max);
    let e = launch_error(run(&k, &ctx, &s, cfg));
    assert!(
        matches!(e, LaunchError::ClusterTooLarge { max: 8, .. }),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_compile_time_cluster_is_used_and_must_be_matched() {
    let (ctx, s, m) = setup();
    let k = cluster_kernel(&m, "cluster_fixed");
    let limits = k
        .function()
        .cluster_limits(&ctx, &LaunchConfig::new(8, 32))
        .unwrap();
    assert_eq!(limits.required, Some(Dim3::new(2, 1, 1)));
    let grid = Dim3::new(8, 1, 1);
    // No cluster asked: the kernel's own clusters of 2.
    let seen = run(&k, &ctx, &s, LaunchConfig::new(grid, 32)).unwrap();
    expect_clusters(&seen, grid, Dim3::new(2, 1, 1));
    // The same cluster asked explicitly.
    let seen = run(&k, &ctx, &s, LaunchConfig::new(grid, 32).with_cluster(2)).unwrap();
    expect_clusters(&seen, grid, Dim3::new(2, 1, 1));
    // Another one: refused before the driver.
    let e = launch_error(run(
        &k,
        &ctx,
        &s,
        LaunchConfig::new(grid, 32).with_cluster(4),
    ));
    assert_eq!(
        e,
        LaunchError::ClusterMismatch {
            kernel: "cluster_fixed".into(),
            cluster: Dim3::new(4, 1, 1),
            required: Dim3::new(2, 1, 1),
        }
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn streams_of_the_highest_and_lowest_priority_run_and_others_are_refused() {
    let (ctx, _s, m) = setup();
    let k = cluster_kernel(&m, "cluster_id");
    let range = ctx.stream_priority_range().unwrap();
    eprintln!("stream priorities of {}: {range}", ctx.device());
    assert!(range.greatest < range.least, "{range:?}");
    assert_eq!(Stream::new(&ctx).unwrap().priority().unwrap(), range.least);

    for p in [range.greatest, range.least] {
        let s = Stream::with_priority(&ctx, p).unwrap();
        assert_eq!(s.priority().unwrap(), p);
        // A plain launch on sm_90 is a cluster of one block.
        let seen = run(&k, &ctx, &s, LaunchConfig::new(4, 32)).unwrap();
        expect_clusters(&seen, Dim3::new(4, 1, 1), Dim3::new(1, 1, 1));
    }
    for p in [range.greatest - 1, range.least + 1] {
        let e = Stream::with_priority(&ctx, p).unwrap_err();
        assert_eq!(
            e,
            CudaError::PriorityOutOfRange {
                priority: p,
                least: range.least,
                greatest: range.greatest,
                device: ctx.device().to_string(),
            }
        );
    }
}

/// The primary and secondary kernels of the programmatic pair.
fn pdl_pair(m: &Module) -> (TypedKernel<Primary>, TypedKernel<Secondary>) {
    // SAFETY: pdl_primary writes data[i] for i < n and end[0] only.
    let primary = unsafe { m.kernel::<Primary>("pdl_primary") }
        .unwrap()
        .bound(0, Extent::Param(1))
        .unwrap()
        .bound(3, Extent::Elements(1))
        .unwrap();
    // SAFETY: pdl_secondary reads data[i] and writes out[i] for i < n, and
    // writes start[0] only.
    let secondary = unsafe { m.kernel::<Secondary>("pdl_secondary") }
        .unwrap()
        .bound(0, Extent::Param(2))
        .unwrap()
        .bound(1, Extent::Param(2))
        .unwrap()
        .bound(3, Extent::Elements(1))
        .unwrap();
    (primary, secondary)
}

/// Runs the pair once; returns the secondary's output, when its block 0
/// started and when the primary's block 0 ended (globaltimer, ns).
fn run_pair(
    ctx: &Context,
    s: &Stream,
    (primary, secondary): &(TypedKernel<Primary>, TypedKernel<Secondary>),
    programmatic: bool,
) -> cuda_api::CudaResult<(Vec<u32>, u64, u64)> {
    const N: u32 = 1 << 20;
    let sms = ctx.device().sm_count()?;
    let mut data = DeviceBuffer::<u32>::zeroed(ctx, N as usize)?;
    let mut out = DeviceBuffer::<u32>::zeroed(ctx, N as usize)?;
    let mut start = DeviceBuffer::<u64>::zeroed(ctx, 1)?;
    let mut end = DeviceBuffer::<u64>::zeroed(ctx, 1)?;
    // One resident block per SM, so the primary's trigger fires at once
    // and the secondary's blocks find room beside it.
    let cfg = LaunchConfig::new(sms, 256);
    // About 2 ms of spinning at H200 clocks.
    primary.launch(s, cfg, (&mut data, N, 4_000_000u64, &mut end))?;
    let cfg2 = if programmatic {
        cfg.with_programmatic_launch()
    } else {
        cfg
    };
    secondary.launch(s, cfg2, (&data, &mut out, N, &mut start))?;
    Ok((out.to_vec()?, start.to_vec()?[0], end.to_vec()?[0]))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_programmatic_pair_overlaps_and_computes_the_same() {
    let (ctx, s, m) = setup();
    let pair = pdl_pair(&m);
    let expected: Vec<u32> = (0..1u32 << 20).map(|i| 3 * i + 2).collect();

    // Undeclared: refused before the driver, by the typed and the dynamic launch.
    let e = run_pair(&ctx, &s, &pair, true).unwrap_err();
    assert_eq!(
        e,
        CudaError::Launch(LaunchError::ProgrammaticNotDeclared {
            kernel: "pdl_secondary".into()
        })
    );
    let args = pair.1.as_dyn().args();
    let cfg = LaunchConfig::new(1, 32).with_programmatic_launch();
    assert!(matches!(
        pair.1.as_dyn().launch(&s, cfg, &args),
        Err(CudaError::Launch(
            LaunchError::ProgrammaticNotDeclared { .. }
        ))
    ));
    drop(args);

    // Serialised (no attribute): the secondary starts after the primary ended.
    let (out, start, end) = run_pair(&ctx, &s, &pair, false).unwrap();
    assert_eq!(out, expected);
    eprintln!(
        "plain pair: secondary started {}",
        relative_start(start, end)
    );
    assert!(
        start >= end,
        "a plain launch started before the one before it ended"
    );

    // SAFETY: every block of pdl_secondary executes griddepcontrol.wait
    // before it reads `data` or writes `out`, and before it exits; before
    // the wait it writes only start[0], which the primary does not use.
    let pair = (pair.0, unsafe { pair.1.allow_programmatic_launch() });
    assert!(pair.1.as_dyn().allows_programmatic_launch());
    let (out, start, end) = run_pair(&ctx, &s, &pair, true).unwrap();
    assert_eq!(out, expected);
    eprintln!(
        "programmatic pair: secondary started {}",
        relative_start(start, end)
    );
    // A tool injected into the driver (compute-sanitizer, Nsight)
    // instruments every launch, which serialises the pair: overlap cannot
    // be judged then, only the results. compute-sanitizer does not set
    // CUDA_INJECTION64_PATH (the only variable this asked for before, so the
    // test failed under every tool): `sdk_tests::injected_tool` knows its own.
    if let Some(tool) = sdk_tests::injected_tool() {
        eprintln!(
            "programmatic pair: overlap not judged: a tool is injected into the driver ({tool}), \
             which serialises launches"
        );
        return;
    }
    assert!(
        start < end,
        "the programmatic launch did not overlap: the secondary started {}",
        relative_start(start, end)
    );
}

/// When the secondary's block 0 started relative to the primary's end, in
/// words: `N ns before the primary's end` or `N ns after the primary's end`.
fn relative_start(start: u64, end: u64) -> String {
    if start < end {
        format!("{} ns before the primary's end", end - start)
    } else {
        format!("{} ns after the primary's end", start - end)
    }
}
