//! Compiles the kernels with NVRTC from pinned wheels (no CUDA toolkit).
fn main() {
    warp_build::CudaBuild::new()
        .file("kernels/reduce.cu")
        .file("kernels/histogram.cu")
        .file("kernels/axpy.cu")
        .name_expression("kernels/histogram.cu", "histogram<64>")
        .name_expression("kernels/histogram.cu", "histogram<256>")
        .archs(["80", "90"])
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
}
