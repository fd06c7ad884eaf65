//! The test binary finds the CUDA libraries candle links (cuBLAS, cuBLASLt,
//! cuRAND, NVRTC, the CUDA runtime) where the GPU machine's toolkit keeps
//! them: an rpath to `/usr/local/cuda/lib64` (or `$CANDLE_INTEROP_RPATH`,
//! colon-separated). At link time cudarc finds them under `$CUDA_HOME/lib`
//! (`cargo xtask candle-bundle` points it at stubs of the pinned libraries).
fn main() {
    println!("cargo::rerun-if-env-changed=CANDLE_INTEROP_RPATH");
    let rpath = std::env::var("CANDLE_INTEROP_RPATH").unwrap_or_else(|_| {
        "/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib".into()
    });
    for dir in rpath.split(':').filter(|d| !d.is_empty()) {
        println!("cargo::rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
