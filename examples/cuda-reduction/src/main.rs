//! Runs the example's kernels on GPU 0 against the CPU, from any directory
//! (the images are in the binary); exits non-zero on a mismatch.

fn main() {
    let report = match cuda_reduction_example::run_on_gpu(0) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cuda-reduction: {e}");
            std::process::exit(2);
        }
    };
    println!("images chosen: {:?}", report.images);
    println!(
        "sum: GPU {} CPU {} (largest cooperative grid {})",
        report.sum.0, report.sum.1, report.max_grid
    );
    println!("one block too many: {}", report.too_large);
    println!("n past the buffer: {}", report.past_bound);
    let sum_ok = (f64::from(report.sum.0) - report.sum.1).abs() <= 1e-4 * report.sum.1.abs();
    let hist_ok = report.histograms.iter().all(|(gpu, cpu)| gpu == cpu);
    let refused =
        !report.too_large.contains("NOT REFUSED") && !report.past_bound.contains("NOT REFUSED");
    println!("sum {sum_ok}, histograms {hist_ok}, refusals {refused}");
    if !(sum_ok && hist_ok && refused) {
        std::process::exit(1);
    }
}
