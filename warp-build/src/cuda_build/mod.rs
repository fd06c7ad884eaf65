//! [`CudaBuild`]: CUDA C `.cu` files compiled from a build script with
//! NVRTC from pinned wheels (no CUDA toolkit), embedded with the image
//! choice per device, and typed launchers for their kernels.

mod error;
mod generate;
mod grid_sync;
mod names;
mod nvrtc;
mod record;
mod run;
mod signature;
mod toolkit;
mod wl_kernels;
mod wl_launchers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use error::{CudaBuildError, CudaDiagnostic};
pub use record::{CudaFile, CudaKernel};
pub use toolkit::{CUDA_WHEELS, ENV_CUDA_INCLUDE, ENV_CUDA_INCLUDE_PTX, ENV_NVRTC, ENV_NVRTC_PTX};
pub use wl_kernels::{WlKernel, WlParam};

/// The most architectures NVRTC 13.0 compiles cubins for start here.
const MIN_ARCH: u32 = 75;

/// CUDA C `.cu` files to compile from a build script, as `bindgen_cuda`
/// does with nvcc, but with NVRTC from pinned PyPI wheels installed once
/// per user (no CUDA toolkit): a cubin per architecture asked for (`90`,
/// `90a`, `100f`), PTX from NVRTC 12.0 (ISA 8.0) for the lowest one as the
/// fallback for other GPUs, and one Rust file with, per `.cu` file, a
/// `cuda_api::ImageSet` of the images and a typed launcher per kernel
/// (`extern "C"` kernels, and template instances named by
/// [`CudaBuild::name_expression`]). See the README's "CUDA C in the build".
///
/// ```no_run
/// // build.rs
/// let built = warp_build::CudaBuild::new()
///     .file("kernels/reduce.cu")
///     .archs(["80", "90"])
///     .compile()
///     .unwrap_or_else(|e| panic!("{e}"));
/// // src/lib.rs: include!(concat!(env!("OUT_DIR"), "/cuda/kernels.rs"));
/// assert!(built.rust_file().ends_with("kernels.rs"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct CudaBuild {
    files: Vec<PathBuf>,
    archs: Vec<String>,
    include_dirs: Vec<PathBuf>,
    defines: Vec<(String, Option<String>)>,
    options: Vec<String>,
    names: BTreeMap<PathBuf, Vec<String>>,
    types: BTreeMap<String, String>,
    no_ptx: bool,
    out_dir: Option<PathBuf>,
}

impl CudaBuild {
    /// An empty build: add files with [`CudaBuild::file`].
    pub fn new() -> CudaBuild {
        CudaBuild::default()
    }

    /// Adds a `.cu` file (relative paths from the package's directory).
    pub fn file(&mut self, path: impl Into<PathBuf>) -> &mut CudaBuild {
        self.files.push(path.into());
        self
    }

    /// The architectures to compile cubins for: `"80"`, `"sm_90"`, `"90a"`
    /// (only that GPU, all its features), `"100f"` (its family). Default
    /// `80, 90`; `WARP_BUILD_ARCHS` overrides.
    pub fn archs<S: Into<String>>(&mut self, archs: impl IntoIterator<Item = S>) -> &mut CudaBuild {
        self.archs = archs.into_iter().map(Into::into).collect();
        self
    }

    /// Adds an include directory (before the pinned CUDA headers).
    pub fn include_dir(&mut self, dir: impl Into<PathBuf>) -> &mut CudaBuild {
        self.include_dirs.push(dir.into());
        self
    }

    /// Defines a macro, `-D name` or `-D name=value`.
    pub fn define(&mut self, name: &str, value: Option<&str>) -> &mut CudaBuild {
        self.defines
            .push((name.to_string(), value.map(ToString::to_string)));
        self
    }

    /// Passes another NVRTC option (such as `--use_fast_math`) to every compile.
    pub fn option(&mut self, option: impl Into<String>) -> &mut CudaBuild {
        self.options.push(option.into());
        self
    }

    /// Asks for template instance `expression` (`"histogram<64>"`) of
    /// `file`'s kernels: NVRTC instantiates it, and it gets a launcher
    /// named after it (`Histogram64`) that calls its lowered name.
    pub fn name_expression(
        &mut self,
        file: impl Into<PathBuf>,
        expression: &str,
    ) -> &mut CudaBuild {
        self.names
            .entry(file.into())
            .or_default()
            .push(expression.to_string());
        self
    }

    /// Maps a C struct type a kernel takes by value to a Rust type of the
    /// same layout (`"Params"` to `"crate::Params"`, which must implement
    /// `cuda_api::ParamRepr`).
    pub fn map_type(&mut self, c_type: &str, rust_type: &str) -> &mut CudaBuild {
        self.types.insert(c_type.to_string(), rust_type.to_string());
        self
    }

    /// Whether to write the PTX fallback (default `true`).
    pub fn ptx(&mut self, ptx: bool) -> &mut CudaBuild {
        self.no_ptx = !ptx;
        self
    }

    /// Where to write (default `$OUT_DIR/cuda`).
    pub fn out_dir(&mut self, dir: impl Into<PathBuf>) -> &mut CudaBuild {
        self.out_dir = Some(dir.into());
        self
    }

    /// Compiles every file, or reuses the last compile in the output
    /// directory when nothing that decides it changed (the sources, the
    /// files of the include directories, the options, the compilers).
    ///
    /// # Errors
    ///
    /// [`CudaBuildError`]: a bad option or `WARP_BUILD_ARCHS`, no NVRTC
    /// (pip failing, with the command; or a bad `WARP_BUILD_NVRTC`), NVRTC
    /// refusing a file (its diagnostics at their lines), a kernel parameter
    /// whose C type maps to no Rust type, file errors.
    pub fn compile(&self) -> Result<CudaCompiled, CudaBuildError> {
        run::compile(self)
    }
}

/// What a [`CudaBuild`] wrote.
#[derive(Debug, Clone)]
pub struct CudaCompiled {
    dir: PathBuf,
    files: Vec<CudaFile>,
    reused: bool,
}

impl CudaCompiled {
    /// The output directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The generated Rust file (`<dir>/kernels.rs`), to `include!`.
    pub fn rust_file(&self) -> PathBuf {
        self.dir.join(run::RUST_FILE)
    }

    /// Each `.cu` file's images and kernels.
    pub fn files(&self) -> &[CudaFile] {
        &self.files
    }

    /// Whether nothing was compiled (the stamp matched).
    pub fn reused(&self) -> bool {
        self.reused
    }
}
