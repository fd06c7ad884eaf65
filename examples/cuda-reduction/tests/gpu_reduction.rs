//! The example's kernels on a GPU against the CPU references.

#[test]
#[ignore = "needs a CUDA GPU"]
fn reduction_and_histograms_match_the_cpu_and_bounds_refuse() {
    let r = cuda_reduction_example::run_on_gpu(0).unwrap();
    eprintln!("images chosen: {:?}", r.images);
    let (gpu, cpu) = r.sum;
    assert!(
        (f64::from(gpu) - cpu).abs() <= 1e-4 * cpu.abs(),
        "GPU sum {gpu}, CPU sum {cpu}"
    );
    for (gpu, cpu) in &r.histograms {
        assert_eq!(gpu, cpu);
    }
    assert!(
        r.too_large.contains("ooperative") && r.too_large.contains(&(r.max_grid + 1).to_string()),
        "{}",
        r.too_large
    );
    assert!(r.past_bound.contains("x"), "{}", r.past_bound);
    assert!(!r.past_bound.contains("NOT REFUSED"), "{}", r.past_bound);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn proven_warp_launch_kernels_match_the_cpu_and_a_launch_past_an_extent_is_refused() {
    use cuda_reduction_example::proven::run_proven_on_gpu;
    let r = run_proven_on_gpu(0).unwrap();
    eprintln!("image chosen: {}", r.image);
    assert!(r.image.starts_with("axpy."), "{}", r.image);
    // Exact: one fused or unfused multiply-add per element either way is
    // compared with the CPU's; allow the last bit.
    for (g, c) in r.axpy.0.iter().zip(&r.axpy.1) {
        assert!((g - c).abs() <= c.abs() * 1e-6 + 1e-6, "GPU {g}, CPU {c}");
    }
    assert_eq!(r.axpy.0.len(), r.axpy.1.len());
    assert_eq!(r.gather.0, r.gather.1, "a gather copies exactly");
    match &r.past_extent {
        Err(warp_launch::Error::OutOfBounds(b)) => {
            assert_eq!(
                (b.kernel.as_str(), b.param.as_str()),
                ("axpy", "x"),
                "{b:?}"
            );
            assert_eq!(b.shape, [10_000], "{b:?}");
        }
        other => panic!("a launch past x must be OutOfBounds, got {other:?}"),
    }
}
