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
pub mod warp_tape;

use std::path::PathBuf;

/// The include directory of an older pinned release's `cuda.h` (`"12.0"`,
/// `"12.4"`, `"12.8"`, `"13.0"`): from `CUDA_RELEASE_INCLUDE_DIRS`
/// (`12.0=DIR;12.4=DIR;...`, set by `cargo xtask test`), else the wheel
/// cache that `cargo xtask import` and `cargo xtask test` fill.
pub fn release_include_dir(release: &str) -> Result<PathBuf, String> {
    if let Ok(list) = std::env::var("CUDA_RELEASE_INCLUDE_DIRS") {
        for entry in list.split(';') {
            if let Some((r, dir)) = entry.split_once('=')
                && r == release
            {
                return Ok(PathBuf::from(dir));
            }
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/cuda-cache");
    let dir = match release {
        "12.0" => root.join("cuda-runtime-12.0.107/nvidia/cuda_runtime/include"),
        "12.4" => root.join("cuda-runtime-12.4.127/nvidia/cuda_runtime/include"),
        "12.8" => root.join("cuda-runtime-12.8.90/nvidia/cuda_runtime/include"),
        "13.0" => root.join("cuda-runtime-13.0.96/nvidia/cu13/include"),
        other => return Err(format!("CUDA {other} is no older pinned release")),
    };
    if dir.join("cuda.h").is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "no cuda.h of CUDA {release} in {}: run the tests through `cargo xtask test` (or run `cargo xtask import --check` once), which fetches the pinned headers",
            dir.display()
        ))
    }
}

/// The include directory of one pinned release's `nvrtc.h` (`"12.0"` …
/// `"13.5"`): `NVRTC_RELEASE_INCLUDE_DIRS` (`12.0=DIR;12.4=DIR;...`) when it
/// names the release, else the pinned wheel's headers that `cargo xtask
/// import` unpacks into target/cuda-cache.
pub fn nvrtc_include_dir(release: &str) -> Result<PathBuf, String> {
    if let Ok(list) = std::env::var("NVRTC_RELEASE_INCLUDE_DIRS") {
        for entry in list.split(';') {
            if let Some((r, dir)) = entry.split_once('=')
                && r == release
            {
                return Ok(PathBuf::from(dir));
            }
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/cuda-cache");
    let dir = match release {
        "12.0" => root.join("cuda-nvrtc-12.0.76/nvidia/cuda_nvrtc/include"),
        "12.4" => root.join("cuda-nvrtc-12.4.127/nvidia/cuda_nvrtc/include"),
        "12.8" => root.join("cuda-nvrtc-12.8.93/nvidia/cuda_nvrtc/include"),
        "13.0" => root.join("cuda-nvrtc-13.0.88/nvidia/cu13/include"),
        "13.5" => root.join("cuda-nvrtc-13.5.37/nvidia/cu13/include"),
        other => return Err(format!("CUDA {other} is no pinned NVRTC release")),
    };
    if dir.join("nvrtc.h").is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "no nvrtc.h of CUDA {release} in {}: run the tests through `cargo xtask test` (or run `cargo xtask import --check` once), which fetches the pinned NVRTC headers",
            dir.display()
        ))
    }
}

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

/// The tool injected into the CUDA driver of this process, if any: its
/// library path or the variable that shows it. compute-sanitizer 2025.3
/// (CUDA 13.0) does not set `CUDA_INJECTION64_PATH`, as Nsight tools do:
/// measured on the H100, its target sees `NV_SANITIZER_INJECTION_PORT_BASE`,
/// `NV_SANITIZER_INJECTION_TRANSPORT_TYPE` and `NVTX_INJECTION64_PATH=
/// libsanitizer-collection.so` instead, so the tests asked only for
/// `CUDA_INJECTION64_PATH` judged timing under the tool. Such a tool
/// instruments every launch and may run it to its end before the launch
/// returns, so timing (overlap, how long a wait lasted) cannot be judged
/// under it; results still can.
pub fn injected_tool() -> Option<String> {
    ["CUDA_INJECTION64_PATH", "NV_SANITIZER_INJECTION_PORT_BASE"]
        .iter()
        .find_map(|v| std::env::var_os(v).map(|p| format!("{v}={}", p.to_string_lossy())))
}

/// The README's Rust examples, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;
