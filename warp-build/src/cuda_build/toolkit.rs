//! Where the NVRTCs and CUDA headers of a [`CudaBuild`](super::CudaBuild)
//! come from: pinned PyPI wheels installed once per user beside Warp, or an
//! NVRTC and headers named by environment variables (offline builds).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::CudaBuildError;
use crate::python::{self, CacheEnv, InstallNote, Place, Python};

/// The wheels installed for a CUDA C build (`pip install --no-deps`):
/// NVRTC 13.0 with the CUDA 13.0 runtime headers (`cooperative_groups.h`)
/// and CCCL (`<nv/target>`, CUB, libcu++), for the cubins; NVRTC 12.0 with
/// the CUDA 12.0 headers, for the PTX fallback (ISA 8.0).
pub const CUDA_WHEELS: &[&str] = &[
    "nvidia-cuda-nvrtc==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-cccl==13.0.85",
    "nvidia-cuda-nvrtc-cu12==12.0.76",
    "nvidia-cuda-runtime-cu12==12.0.107",
    "nvidia-cuda-cccl-cu12==12.0.140",
];

/// The NVRTC for cubins: a directory holding `libnvrtc.so.13` (or
/// `libnvrtc.so.12`), or the library itself. Set, nothing is installed.
pub const ENV_NVRTC: &str = "WARP_BUILD_NVRTC";
/// The include directories for [`ENV_NVRTC`] (a path list: the runtime
/// headers, then CCCL).
pub const ENV_CUDA_INCLUDE: &str = "WARP_BUILD_CUDA_INCLUDE";
/// The NVRTC 12.0 of the PTX fallback, with [`ENV_NVRTC`]; unset, an
/// offline build has no PTX fallback.
pub const ENV_NVRTC_PTX: &str = "WARP_BUILD_NVRTC_PTX";
/// The include directories for [`ENV_NVRTC_PTX`] (the CUDA 12.0 runtime
/// headers, then its CCCL).
pub const ENV_CUDA_INCLUDE_PTX: &str = "WARP_BUILD_CUDA_INCLUDE_PTX";

/// One NVRTC and the include directories its compiles get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Compiler {
    pub nvrtc: PathBuf,
    pub include: Vec<PathBuf>,
}

/// The compilers of one build and where they came from.
#[derive(Debug, Clone)]
pub(crate) struct Toolkit {
    pub cubin: Compiler,
    /// NVRTC 12.0 for the PTX fallback, when there is one.
    pub ptx: Option<Compiler>,
    /// `the pinned wheels in <dir>` or `WARP_BUILD_NVRTC`.
    pub origin: String,
}

/// The variables [`find`] reads (printed as `rerun-if-env-changed`).
pub(crate) const ENV_VARS: [&str; 7] = [
    ENV_NVRTC,
    ENV_CUDA_INCLUDE,
    ENV_NVRTC_PTX,
    ENV_CUDA_INCLUDE_PTX,
    crate::ENV_CACHE,
    crate::ENV_CACHE_DIR,
    crate::ENV_PYTHON,
];

/// `cuda-13.0.88-<hash>`: the shared install's name, from the wheels and
/// the platform they are for.
pub(crate) fn install_name() -> String {
    let mut h = Sha256::new();
    for w in CUDA_WHEELS {
        h.update(w.as_bytes());
        h.update(b"\n");
    }
    h.update(std::env::consts::OS.as_bytes());
    h.update(std::env::consts::ARCH.as_bytes());
    let hash: String = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("cuda-13.0.88-{hash}")
}

/// The compilers inside an install directory of the wheels.
pub(crate) fn in_install(dir: &Path) -> Toolkit {
    let nv = dir.join("nvidia");
    Toolkit {
        cubin: Compiler {
            nvrtc: nv.join("cu13").join("lib"),
            include: vec![
                nv.join("cu13").join("include"),
                nv.join("cu13").join("include").join("cccl"),
            ],
        },
        ptx: Some(Compiler {
            nvrtc: nv.join("cuda_nvrtc").join("lib"),
            include: vec![
                nv.join("cuda_runtime").join("include"),
                nv.join("cuda_cccl").join("include"),
            ],
        }),
        origin: format!("the pinned wheels in {}", dir.display()),
    }
}

/// Whether `dir` holds a complete install (both NVRTCs and the headers
/// a compile looks for first).
fn complete(dir: &Path) -> bool {
    let t = in_install(dir);
    let lib = |d: &Path, n: &str| d.join(n).is_file();
    lib(&t.cubin.nvrtc, "libnvrtc.so.13")
        && t.cubin.include[0].join("cooperative_groups.h").is_file()
        && t.cubin.include[1].join("nv").join("target").is_file()
        && t.ptx.as_ref().is_some_and(|p| {
            lib(&p.nvrtc, "libnvrtc.so.12") && p.include[0].join("cooperative_groups.h").is_file()
        })
}

/// Finds the compilers: from the environment ([`ENV_NVRTC`] and the
/// others) when set, else the shared install of [`CUDA_WHEELS`], installed
/// with pip on first use (`say` gets one line when it was).
pub(crate) fn find(out_dir: &Path, say: &mut dyn FnMut(&str)) -> Result<Toolkit, CudaBuildError> {
    let var = |v: &str| std::env::var_os(v).filter(|x| !x.is_empty());
    if let Some(nvrtc) = var(ENV_NVRTC) {
        return from_env(
            nvrtc,
            var(ENV_CUDA_INCLUDE),
            var(ENV_NVRTC_PTX),
            var(ENV_CUDA_INCLUDE_PTX),
        );
    }
    let name = install_name();
    let env = CacheEnv::from_env(false);
    let (dir, once) = match python::choose_place(&env, &name).map_err(toolkit_err)? {
        Place::Shared(dir) => (dir, "once per user and machine".to_string()),
        Place::Target(why) => {
            let target = python::target_dir(out_dir).ok_or_else(|| CudaBuildError::Toolkit {
                problem: format!(
                    "the CUDA wheels go into the target directory ({why}) but none was found above {}",
                    out_dir.display()
                ),
                remedy: "set CARGO_TARGET_DIR or WARP_BUILD_CACHE_DIR".into(),
            })?;
            (
                target.join("warp-build").join(&name),
                format!("once per target directory: {why}"),
            )
        }
    };
    let exe = std::env::var_os(crate::ENV_PYTHON)
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let py = Python {
        exe,
        origin: "WARP_BUILD_PYTHON, else python3",
        pythonpath: None,
    };
    let command = format!(
        "{} -m pip install --target {} --no-deps {}",
        py.exe.display(),
        dir.display(),
        CUDA_WHEELS.join(" ")
    );
    let mut requirements = vec!["--no-deps"];
    requirements.extend_from_slice(CUDA_WHEELS);
    let note = InstallNote {
        label: "NVRTC 13.0 and 12.0 with the CUDA 13.0 and 12.0 headers and CCCL",
        size: "about 200 MB, well under a minute",
        once: &once,
    };
    python::install_once(
        &dir,
        &note,
        &mut |d: &Path| Ok(complete(d)),
        &mut |staging: &Path| {
            python::pip_install_into(&py, staging, command.clone(), &requirements)
        },
        say,
    )
    .map_err(toolkit_err)?;
    Ok(in_install(&dir))
}

fn toolkit_err(e: crate::BuildError) -> CudaBuildError {
    let remedy = if matches!(e, crate::BuildError::PipFailed { .. }) {
        format!(
            "check the network (pip needs PyPI the first time), or build offline: set {ENV_NVRTC} to an \
             NVRTC 13 library directory and {ENV_CUDA_INCLUDE} to its CUDA headers and CCCL"
        )
    } else {
        "see the message".into()
    };
    CudaBuildError::Toolkit {
        problem: e.to_string(),
        remedy,
    }
}

fn paths(v: Option<OsString>) -> Vec<PathBuf> {
    v.map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default()
}

fn from_env(
    nvrtc: OsString,
    include: Option<OsString>,
    ptx: Option<OsString>,
    ptx_include: Option<OsString>,
) -> Result<Toolkit, CudaBuildError> {
    let nvrtc = PathBuf::from(nvrtc);
    if !nvrtc.exists() {
        return Err(CudaBuildError::InvalidEnv {
            var: ENV_NVRTC,
            value: nvrtc.display().to_string(),
            allowed: "an existing directory holding libnvrtc.so.13 (or the library file)".into(),
        });
    }
    Ok(Toolkit {
        cubin: Compiler {
            nvrtc: nvrtc.clone(),
            include: paths(include),
        },
        ptx: ptx.map(|p| Compiler {
            nvrtc: PathBuf::from(p),
            include: paths(ptx_include),
        }),
        origin: format!("{ENV_NVRTC}={}", nvrtc.display()),
    })
}
