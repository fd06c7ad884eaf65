//! Provisioning of the pinned inputs the generator and the tests need: the real
//! `cuda.h` and a libclang for bindgen. Nothing here needs root: a system
//! install is used when present, otherwise pinned PyPI wheels are fetched with
//! `python3 -m pip download` into a cache under `target/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

/// One pinned CUDA release whose `cuda.h` and `cudaTypedefs.h` the importer
/// reads, from a PyPI wheel pinned by exact version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedRelease {
    /// The CUDA release, e.g. `"12.0"` (the header's `CUDA_VERSION`).
    pub release: &'static str,
    /// The wheel, pinned, e.g. `nvidia-cuda-runtime-cu12==12.0.107`.
    pub wheel: &'static str,
    /// Where the wheel keeps the headers.
    pub include: &'static str,
}

/// The releases the specs merge, oldest first: CUDA 12.0 (the oldest 12.x
/// whose runtime wheel ships both `cuda.h` and `cudaTypedefs.h`), 12.4, 12.8,
/// 13.0 and 13.5. The last is the newest: its declarations are the specs'.
pub const PINNED_RELEASES: &[PinnedRelease] = &[
    PinnedRelease {
        release: "12.0",
        wheel: "nvidia-cuda-runtime-cu12==12.0.107",
        include: "nvidia/cuda_runtime/include",
    },
    PinnedRelease {
        release: "12.4",
        wheel: "nvidia-cuda-runtime-cu12==12.4.127",
        include: "nvidia/cuda_runtime/include",
    },
    PinnedRelease {
        release: "12.8",
        wheel: "nvidia-cuda-runtime-cu12==12.8.90",
        include: "nvidia/cuda_runtime/include",
    },
    PinnedRelease {
        release: "13.0",
        wheel: "nvidia-cuda-runtime==13.0.96",
        include: "nvidia/cu13/include",
    },
    PinnedRelease {
        release: "13.5",
        wheel: "nvidia-cuda-runtime==13.5.37",
        include: "nvidia/cu13/include",
    },
];

/// The newest pinned release: the header the ABI probe and `cargo xtask
/// test` use.
pub fn newest_release() -> &'static PinnedRelease {
    &PINNED_RELEASES[PINNED_RELEASES.len() - 1]
}

/// The wheel that carries the newest pinned `cuda.h` (CUDA 13.5).
pub const CUDA_RUNTIME_WHEEL: &str = "nvidia-cuda-runtime==13.5.37";

/// The include directory of one pinned release's headers, fetched with pip
/// into `target/cuda-cache/cuda-runtime-<wheel version>` on first use.
///
/// # Errors
///
/// pip failing, or a wheel without `cuda.h` / `cudaTypedefs.h`.
pub fn release_include_dir(r: &PinnedRelease) -> Result<PathBuf> {
    let version = r.wheel.split("==").nth(1).unwrap_or(r.release);
    let dir = cache_dir().join(format!("cuda-runtime-{version}"));
    let inc = dir.join(r.include);
    let complete =
        |inc: &Path| inc.join("cuda.h").is_file() && inc.join("cudaTypedefs.h").is_file();
    if !complete(&inc) {
        fetch_wheel_with(r.wheel, &dir, None, Some(r.include))?;
    }
    if !complete(&inc) {
        return Err(format!(
            "{} unpacked to {} but has no cuda.h and cudaTypedefs.h in {}",
            r.wheel,
            dir.display(),
            r.include
        )
        .into());
    }
    Ok(inc)
}

/// One pinned NVRTC release whose `nvrtc.h` the importer reads, from a PyPI
/// wheel pinned by exact version (one per release of [`PINNED_RELEASES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedNvrtc {
    /// The CUDA release, e.g. `"12.0"`; the wheel's version starts with it.
    pub release: &'static str,
    /// The wheel, pinned, e.g. `nvidia-cuda-nvrtc-cu12==12.0.76`.
    pub wheel: &'static str,
    /// Where the wheel keeps `nvrtc.h`.
    pub include: &'static str,
}

/// The NVRTC releases the NVRTC specs merge, oldest first: the same CUDA
/// releases as [`PINNED_RELEASES`] (`nvrtc.h` has no version macro: the
/// wheel's version names the release).
pub const PINNED_NVRTC: &[PinnedNvrtc] = &[
    PinnedNvrtc {
        release: "12.0",
        wheel: "nvidia-cuda-nvrtc-cu12==12.0.76",
        include: "nvidia/cuda_nvrtc/include",
    },
    PinnedNvrtc {
        release: "12.4",
        wheel: "nvidia-cuda-nvrtc-cu12==12.4.127",
        include: "nvidia/cuda_nvrtc/include",
    },
    PinnedNvrtc {
        release: "12.8",
        wheel: "nvidia-cuda-nvrtc-cu12==12.8.93",
        include: "nvidia/cuda_nvrtc/include",
    },
    PinnedNvrtc {
        release: "13.0",
        wheel: "nvidia-cuda-nvrtc==13.0.88",
        include: "nvidia/cu13/include",
    },
    PinnedNvrtc {
        release: "13.5",
        wheel: "nvidia-cuda-nvrtc==13.5.37",
        include: "nvidia/cu13/include",
    },
];

/// The include directory holding one pinned release's `nvrtc.h`, fetched
/// with pip into `target/cuda-cache/cuda-nvrtc-<wheel version>` on first use
/// (only the headers are unpacked).
///
/// # Errors
///
/// pip failing, or a wheel without `nvrtc.h`.
pub fn nvrtc_include_dir(r: &PinnedNvrtc) -> Result<PathBuf> {
    let version = r.wheel.split("==").nth(1).unwrap_or(r.release);
    let dir = cache_dir().join(format!("cuda-nvrtc-{version}"));
    let inc = dir.join(r.include);
    if !inc.join("nvrtc.h").is_file() {
        fetch_wheel_with(r.wheel, &dir, None, Some(r.include))?;
    }
    if !inc.join("nvrtc.h").is_file() {
        return Err(format!(
            "{} unpacked to {} but has no nvrtc.h in {}",
            r.wheel,
            dir.display(),
            r.include
        )
        .into());
    }
    Ok(inc)
}

/// The NVRTC release whose library the CPU tests compile with: 13.0, the
/// GPU machine's driver release (its PTX loads there).
pub const TEST_NVRTC_RELEASE: &str = "13.0";

/// The directory holding the test NVRTC's `libnvrtc.so.13` and its
/// builtins ([`TEST_NVRTC_RELEASE`]'s pinned wheel, unpacked into
/// `target/cuda-cache/cuda-nvrtc-<version>` on first use; the wheel is the
/// one the importer already fetched for `nvrtc.h`).
///
/// # Errors
///
/// pip failing, or a wheel without the library.
pub fn nvrtc_library_dir() -> Result<PathBuf> {
    let r = PINNED_NVRTC
        .iter()
        .find(|r| r.release == TEST_NVRTC_RELEASE)
        .ok_or("no pinned NVRTC wheel for the test release")?;
    let version = r.wheel.split("==").nth(1).unwrap_or(r.release);
    let dir = cache_dir().join(format!("cuda-nvrtc-{version}"));
    let lib = dir.join("nvidia/cu13/lib");
    if !lib.join("libnvrtc.so.13").is_file() {
        fetch_wheel_with(r.wheel, &dir, None, Some("nvidia/cu13/lib/libnvrtc"))?;
    }
    if !lib.join("libnvrtc.so.13").is_file() {
        return Err(format!(
            "{} unpacked to {} but has no libnvrtc.so.13",
            r.wheel,
            dir.display()
        )
        .into());
    }
    Ok(lib)
}

/// The pinned CCCL headers (`nv/target`, `cuda/std/...`) that CUDA 13's
/// `cooperative_groups.h` includes: the `nvidia-cuda-cccl` wheel of
/// [`NVCC_WHEELS`], its `nvidia/cu13/include` unpacked into
/// `target/cuda-cache/cuda-cccl-<version>` on first use. NVRTC needs it and
/// its `cccl/` subdirectory on the include path (nvcc adds them itself).
///
/// # Errors
///
/// pip failing, or a wheel without `nv/target`.
pub fn cccl_include_dir() -> Result<PathBuf> {
    let wheel = NVCC_WHEELS
        .iter()
        .find(|w| w.starts_with("nvidia-cuda-cccl=="))
        .ok_or("no pinned nvidia-cuda-cccl wheel")?;
    let version = wheel.split("==").nth(1).unwrap_or("");
    let dir = cache_dir().join(format!("cuda-cccl-{version}"));
    let inc = dir.join("nvidia/cu13/include");
    if !inc.join("nv/target").is_file() {
        fetch_wheel_with(wheel, &dir, None, Some("nvidia/cu13/include"))?;
    }
    if !inc.join("nv/target").is_file() {
        return Err(format!("{wheel} unpacked to {} but has no nv/target", dir.display()).into());
    }
    Ok(inc)
}

/// The wheel that carries Warp's native headers (`warp/native/*.h`).
pub const WARP_WHEEL: &str = "warp-lang==1.19.0";
/// The platform whose `WARP_WHEEL` build is fetched (the headers are the
/// same in every build; pinning one keeps the download the same everywhere).
pub const WARP_WHEEL_PLATFORM: &str = "manylinux_2_28_x86_64";

/// The wheel that carries a libclang shared library for bindgen.
pub const LIBCLANG_WHEEL: &str = "libclang==18.1.1";

/// Root of the workspace (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

pub(crate) fn cache_dir() -> PathBuf {
    workspace_root().join("target").join("cuda-cache")
}

/// The directory holding `cuda.h`: `$CUDA_HOME/include` or `$CUDA_PATH/include`
/// when set, otherwise the newest pinned release's include directory (fetched
/// on first use).
pub fn cuda_include_dir() -> Result<PathBuf> {
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            let inc = PathBuf::from(root).join("include");
            if inc.join("cuda.h").is_file() {
                return Ok(inc);
            }
            return Err(format!(
                "{var} is set but {} has no cuda.h; unset it to use the pinned wheel {CUDA_RUNTIME_WHEEL}",
                inc.display()
            )
            .into());
        }
    }
    release_include_dir(newest_release())
}

/// The directory holding a `libclang.so` for bindgen: `LIBCLANG_PATH` when set,
/// a system libclang when one is installed, otherwise the pinned wheel's.
pub fn libclang_dir() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("LIBCLANG_PATH") {
        return Ok(PathBuf::from(p));
    }
    let system = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ];
    for dir in system {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name == "libclang.so"
                    || name.starts_with("libclang.so.")
                    || name.starts_with("libclang-") && name.ends_with(".so")
                {
                    return Ok(PathBuf::from(dir));
                }
            }
        }
    }
    let dir = cache_dir().join("libclang");
    let native = dir.join("clang").join("native");
    if !native.join("libclang.so").is_file() {
        fetch_wheel(LIBCLANG_WHEEL, &dir)?;
    }
    if !native.join("libclang.so").is_file() {
        return Err(format!(
            "{LIBCLANG_WHEEL} unpacked to {} but has no libclang.so",
            dir.display()
        )
        .into());
    }
    Ok(native)
}

/// The directory that holds `warp/native/builtin.h`, `array.h` and the other
/// headers of Warp's kernels: `WARP_NATIVE_INCLUDE_DIR` when set, otherwise the
/// pinned wheel `warp-lang==1.19.0`, of which only `warp/native/` is unpacked
/// into `target/cuda-cache/warp-lang` (fetched on first use).
pub fn warp_native_include_dir() -> Result<PathBuf> {
    let has_headers = |dir: &Path| dir.join("warp/native/builtin.h").is_file();
    if let Some(dir) = std::env::var_os("WARP_NATIVE_INCLUDE_DIR") {
        let dir = PathBuf::from(dir);
        if has_headers(&dir) {
            return Ok(dir);
        }
        return Err(format!(
            "WARP_NATIVE_INCLUDE_DIR is set but {} has no warp/native/builtin.h; unset it to use the pinned wheel {WARP_WHEEL}",
            dir.display()
        )
        .into());
    }
    let dir = cache_dir().join("warp-lang");
    if !has_headers(&dir) {
        fetch_wheel_with(
            WARP_WHEEL,
            &dir,
            Some(WARP_WHEEL_PLATFORM),
            Some("warp/native/"),
        )?;
    }
    if !has_headers(&dir) {
        return Err(format!(
            "{WARP_WHEEL} unpacked to {} but has no warp/native/builtin.h",
            dir.display()
        )
        .into());
    }
    Ok(dir)
}

/// The C compiler's own include directory (for `stddef.h` and friends), which
/// the wheel's libclang lacks.
pub fn cc_builtin_include_dir() -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg("-print-file-name=include")
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    path.join("stddef.h").is_file().then_some(path)
}

/// Downloads one pinned wheel with pip and unpacks it into `dest`.
fn fetch_wheel(requirement: &str, dest: &Path) -> Result<()> {
    fetch_wheel_with(requirement, dest, None, None)
}

/// Downloads one pinned wheel with pip (for `platform` when given, else for
/// this machine) and unpacks it into `dest`: only the members whose path
/// starts with `only` when given, else all of it.
pub(crate) fn fetch_wheel_with(
    requirement: &str,
    dest: &Path,
    platform: Option<&str>,
    only: Option<&str>,
) -> Result<()> {
    let wheels = cache_dir().join("wheels");
    std::fs::create_dir_all(&wheels)?;
    println!(
        "xtask: fetching {requirement} with pip into {} (pip shows its progress) ...",
        wheels.display()
    );
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"]);
    if let Some(platform) = platform {
        pip.args(["--platform", platform]);
    }
    let status = pip
        .arg("-d")
        .arg(&wheels)
        .arg(requirement)
        .status()
        .map_err(|e| format!("could not run python3 -m pip to fetch {requirement}: {e}"))?;
    if !status.success() {
        return Err(format!("python3 -m pip download {requirement} failed ({status})").into());
    }
    let stem = requirement
        .split("==")
        .next()
        .unwrap_or(requirement)
        .replace('-', "_");
    let version = requirement.split("==").nth(1).unwrap_or("");
    let wheel = std::fs::read_dir(&wheels)?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            n.starts_with(&format!("{stem}-{version}")) && n.ends_with(".whl")
        })
        .ok_or_else(|| {
            format!(
                "pip reported success but no wheel for {requirement} is in {}",
                wheels.display()
            )
        })?;
    std::fs::create_dir_all(dest)?;
    println!(
        "xtask: unpacking {}{} into {} ...",
        wheel.display(),
        only.map(|p| format!(" ({p} only)")).unwrap_or_default(),
        dest.display()
    );
    let status = match only {
        None => Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(dest)
            .status()?,
        Some(prefix) => Command::new("python3")
            .args([
                "-c",
                "import sys, zipfile\n\
                 z = zipfile.ZipFile(sys.argv[1])\n\
                 z.extractall(sys.argv[2], [m for m in z.namelist() if m.startswith(sys.argv[3])])",
            ])
            .arg(&wheel)
            .arg(dest)
            .arg(prefix)
            .status()?,
    };
    if !status.success() {
        return Err(format!("could not unpack {}", wheel.display()).into());
    }
    // The libclang wheel keeps its files under NAME.data/platlib/.
    if let Ok(entries) = std::fs::read_dir(dest) {
        for e in entries.flatten() {
            let platlib = e.path().join("platlib");
            if e.file_name().to_string_lossy().ends_with(".data") && platlib.is_dir() {
                for inner in std::fs::read_dir(&platlib)?.flatten() {
                    let target = dest.join(inner.file_name());
                    if !target.exists() {
                        std::fs::rename(inner.path(), target)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The pinned nvcc 13.0 set (every part pinned: an unpinned `nvidia-nvvm`
/// pulls 13.5, whose PTX ISA 9.5 a CUDA 13.0 driver refuses).
pub const NVCC_WHEELS: &[&str] = &[
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-cccl==13.0.85",
    "nvidia-cuda-runtime==13.0.96",
];

/// nvcc: `$NVCC` when set, otherwise the pinned PyPI set installed under
/// `target/cuda-cache/nvcc` on first use.
pub fn nvcc() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("NVCC") {
        return Ok(PathBuf::from(p));
    }
    let dir = cache_dir().join("nvcc");
    let bin = dir.join("nvidia").join("cu13").join("bin").join("nvcc");
    if !bin.is_file() {
        println!(
            "xtask: installing nvcc 13.0 ({}) with pip into {} (pip shows its progress) ...",
            NVCC_WHEELS.join(" "),
            dir.display()
        );
        let status = Command::new("python3")
            .args(["-m", "pip", "install", "--no-deps", "--target"])
            .arg(&dir)
            .args(NVCC_WHEELS)
            .status()
            .map_err(|e| format!("could not run python3 -m pip to install nvcc: {e}"))?;
        if !status.success() || !bin.is_file() {
            return Err(format!(
                "installing nvcc with pip failed ({status}); set NVCC to an nvcc 13.0"
            )
            .into());
        }
    }
    Ok(bin)
}
