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
    let proven = match cuda_reduction_example::proven::run_proven_on_gpu(0) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cuda-reduction (warp_launch.h kernels): {e}");
            std::process::exit(2);
        }
    };
    println!("warp_launch.h kernels: image chosen {}", proven.image);
    let axpy_ok = proven.axpy.0.len() == proven.axpy.1.len()
        && proven
            .axpy
            .0
            .iter()
            .zip(&proven.axpy.1)
            .all(|(g, c)| (g - c).abs() <= c.abs() * 1e-6 + 1e-6);
    let gather_ok = proven.gather.0 == proven.gather.1;
    let out_of_bounds = matches!(proven.past_extent, Err(warp_launch::Error::OutOfBounds(_)));
    match &proven.past_extent {
        Err(e) => println!("axpy one element past x: {e}"),
        Ok(()) => println!("axpy one element past x: NOT REFUSED"),
    }
    println!("axpy {axpy_ok}, gather {gather_ok}, OutOfBounds {out_of_bounds}");
    if !(sum_ok && hist_ok && refused && axpy_ok && gather_ok && out_of_bounds) {
        std::process::exit(1);
    }
}
