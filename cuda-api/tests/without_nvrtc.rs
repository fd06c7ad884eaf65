//! The error path with no NVRTC: this test binary points
//! `CUDA_SYS_NVRTC_LIBRARY` at a directory with no library before anything
//! loads one, so it runs the same with or without an NVRTC installed.

use cuda_api::{ComputeCapability, CudaError, Program};

#[test]
fn without_nvrtc_compile_says_what_to_install() {
    let empty = tempfile::tempdir().unwrap();
    // SAFETY: the only test of this binary, before any thread reads the
    // environment (the loader reads it on the first NVRTC call, below).
    unsafe { std::env::set_var(cuda_sys::nvrtc::LIBRARY_ENV, empty.path()) };
    let e = Program::new("k.cu", "extern \"C\" __global__ void k() {}")
        .arch(ComputeCapability::new(9, 0))
        .cache(false)
        .compile()
        .unwrap_err();
    assert!(matches!(e, CudaError::NvrtcUnavailable(_)), "{e}");
    let text = e.to_string();
    assert!(text.contains("pip install nvidia-cuda-nvrtc"), "{text}");
    assert!(
        text.contains(&empty.path().display().to_string()),
        "names where it looked: {text}"
    );
}
