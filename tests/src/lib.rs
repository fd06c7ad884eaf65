//! Cross-crate tests of the CUDA launch SDK. The library part holds facts
//! generated from the specs (`generated/`), the typed launchers generated
//! from the Warp test modules (`launchers/`) and helpers the tests share.

#[rustfmt::skip]
pub mod generated;
#[rustfmt::skip]
pub mod launchers;
pub mod alloc;
pub mod chart;
pub mod logger;
pub mod warp;

use std::path::PathBuf;

/// The directory holding the real `cuda.h` the ABI test compiles against:
/// `CUDA_INCLUDE_DIR` (set by `cargo xtask test`), else `$CUDA_HOME/include`,
/// else the pinned wheel cache that `cargo xtask import`/`test` fill.
pub fn cuda_include_dir() -> Result<PathBuf, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = [
        std::env::var_os("CUDA_INCLUDE_DIR").map(PathBuf::from),
        std::env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("include")),
        Some(root.join("target/cuda-cache/cuda-runtime-13.5.37/nvidia/cu13/include")),
    ];
    for c in candidates.into_iter().flatten() {
        if c.join("cuda.h").is_file() {
            return Ok(c);
        }
    }
    Err("no cuda.h found: run the tests through `cargo xtask test`, which fetches the pinned CUDA 13.5 header, or set CUDA_INCLUDE_DIR".into())
}

/// The directory with the compiled test kernels (`kernels.ptx`, `kernels.cubin`):
/// `SDK_TEST_KERNELS` (set by the GPU bundle's run.sh), else `target/kernels`
/// (written by `cargo xtask gpu-bundle`).
pub fn kernels_dir() -> PathBuf {
    match std::env::var_os("SDK_TEST_KERNELS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/kernels"),
    }
}

/// Says that `test` cannot run on this machine and why, as one line
/// `SKIPPED: <test>: <why>` on standard output; the caller then returns.
/// libtest counts such a test as passed, so the GPU bundle's `run.sh` counts
/// these lines and reports them as skipped (`N passed, M failed, K skipped`).
pub fn skip(test: &str, why: &str) {
    println!("SKIPPED: {test}: {why}");
}

/// The README's Rust examples, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;
