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
