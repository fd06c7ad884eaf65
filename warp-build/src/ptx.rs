//! The PTX fallback: Warp's generated `.cu` compiled with NVRTC 12.0 to PTX
//! ISA 8.0, which every driver from CUDA 12.0 on compiles (Warp 1.19's own
//! PTX is ISA 9.4, written by its CUDA 13.4 NVRTC: a CUDA 13.0 driver
//! refuses it).
//!
//! NVRTC 12.0 is the pinned wheel [`NVRTC_WHEEL`](crate::NVRTC_WHEEL), installed with Warp
//! ([`crate::PIP_REQUIREMENTS`]) and found by the compile script beside
//! it; it is called through cuda-sys's NVRTC binding and cuda-api's
//! [`Program`], with the options Warp 1.19 gives its own NVRTC for PTX
//! (`wp_cuda_compile_program` in `warp/native/warp.cu`, for a CUDA 12.0
//! NVRTC: no precompiled headers, no `--Ofast-compile`). A module whose
//! kernels call MathDx (Warp links LTO-IR made by libmathdx into its images;
//! the `.cu` only declares those `*_lto_dispatch_func`s) gets no fallback.

use std::path::Path;

use crate::error::BuildError;
#[cfg(feature = "ptx-fallback")]
use crate::{NVRTC_WHEEL, PTX_ISA};

/// Its version as NVRTC reports it (`major * 1000 + minor * 10`).
#[cfg(feature = "ptx-fallback")]
const NVRTC_VERSION: u32 = 12000;

/// Warp 1.19's NVRTC options for PTX, as a CUDA 12.0 NVRTC gets them (the
/// architecture and the include path are added per compile).
#[cfg(feature = "ptx-fallback")]
const WARP_OPTIONS: &[&str] = &[
    "--std=c++17",
    "--define-macro=NDEBUG",
    "--undefine-macro=WP_VERIFY_FP",
    "--define-macro=WP_ENABLE_MATHDX=0",
    "--device-as-default-execution-space",
    "--extra-device-vectorization",
    "--restrict",
    "--diag-suppress=177,550",
];

/// Whether Warp's generated source calls MathDx (its LTO dispatch
/// functions), which PTX cannot carry.
#[cfg(any(feature = "ptx-fallback", test))]
pub(crate) fn uses_mathdx(cu: &str) -> bool {
    cu.contains("_lto_dispatch_func")
}

/// Compiles `out_dir/wp_<module>.cu` to `out_dir/wp_<module>.sm<arch>.ptx`
/// with NVRTC 12.0 from `nvrtc_dir`, Warp's headers under `warp_dir` and
/// the module's `fast_math` and `fuse_fp` options.
/// The file's name, or `None` for a module that calls MathDx.
///
/// # Errors
///
/// [`BuildError::PtxFallback`] when NVRTC 12.0 is not there (what to
/// install, or `ptx(false)`), another NVRTC was loaded first, the compile
/// fails (NVRTC's log), or the PTX is not ISA 8.0.
#[cfg(feature = "ptx-fallback")]
pub(crate) fn compile(
    out_dir: &Path,
    module: &str,
    warp_dir: &Path,
    nvrtc_dir: Option<&Path>,
    (fast_math, fuse_fp): (bool, bool),
    arch: u32,
) -> Result<Option<String>, BuildError> {
    let fail = |message: String| BuildError::PtxFallback {
        module: module.to_string(),
        message,
    };
    let cu_name = format!("wp_{module}.cu");
    let cu_path = out_dir.join(&cu_name);
    let cu = std::fs::read_to_string(&cu_path)
        .map_err(|e| fail(format!("cannot read {}: {e}", cu_path.display())))?;
    if uses_mathdx(&cu) {
        log::info!("warp-build: {module} calls MathDx; no PTX fallback (see the README)");
        return Ok(None);
    }
    let nvrtc_dir = nvrtc_dir.ok_or_else(|| {
        fail(format!(
            "the Python that ran Warp has no NVRTC 12.0 (`pip install {NVRTC_WHEEL}` beside warp-lang)"
        ))
    })?;
    // SAFETY: `nvrtc_dir` is the `lib` (or `bin`) directory of the
    // nvidia-cuda-nvrtc-cu12 wheel installed beside warp-lang, as the
    // compile script found it; its version is checked next.
    let lib =
        unsafe { cuda_sys::nvrtc::use_library(nvrtc_dir) }.map_err(|e| fail(e.to_string()))?;
    if lib.version != NVRTC_VERSION {
        return Err(fail(format!(
            "{} is NVRTC {}.{}, not 12.0 ({NVRTC_WHEEL})",
            lib.path,
            lib.version / 1000,
            lib.version % 1000 / 10
        )));
    }
    let mut program = cuda_api::Program::new(&cu_name, cu)
        .arch(cuda_api::ComputeCapability::new(arch / 10, arch % 10))
        .output(cuda_api::Output::Ptx)
        .cache(false)
        .option(format!(
            "--include-path={}",
            warp_dir.join("native").display()
        ));
    for o in WARP_OPTIONS {
        program = program.option(*o);
    }
    if fast_math {
        program = program.option("--use_fast_math");
    }
    program = program.option(if fuse_fp {
        "--fmad=true"
    } else {
        "--fmad=false"
    });
    let compiled = program.compile().map_err(|e| fail(e.to_string()))?;
    let ptx = compiled
        .ptx()
        .ok_or_else(|| fail("NVRTC wrote no PTX".into()))?;
    // What the driver's image check reads from it (`.version`, `.target`).
    let isa = match cuda_api::ImageTarget::of(ptx.as_bytes()) {
        Ok(cuda_api::ImageTarget::Ptx { isa, .. }) => Some(isa),
        _ => None,
    };
    if isa != Some(cuda_api::PtxIsa::new(8, 0)) {
        return Err(fail(format!(
            "NVRTC 12.0 wrote PTX ISA {}, not {PTX_ISA}",
            isa.map_or("(unreadable)".to_string(), |i| i.to_string())
        )));
    }
    let name = format!("wp_{module}.sm{arch}.ptx");
    let path = out_dir.join(&name);
    std::fs::write(&path, ptx)
        .map_err(|e| fail(format!("cannot write {}: {e}", path.display())))?;
    Ok(Some(name))
}

/// Without the `ptx-fallback` feature there is no NVRTC to compile with:
/// asking for PTX is an error that says so.
#[cfg(not(feature = "ptx-fallback"))]
pub(crate) fn compile(
    _out_dir: &Path,
    module: &str,
    _warp_dir: &Path,
    _nvrtc_dir: Option<&Path>,
    _options: (bool, bool),
    _arch: u32,
) -> Result<Option<String>, BuildError> {
    Err(BuildError::PtxFallback {
        module: module.to_string(),
        message: "warp-build was built without its `ptx-fallback` feature (the NVRTC 12.0 compile)"
            .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mathdx_is_recognised() {
        assert!(uses_mathdx(
            "extern \"C\" __device__ void gemm_lto_dispatch_func(float*);"
        ));
        assert!(!uses_mathdx("wp::tile_load(var_a, 0)"));
    }
}
