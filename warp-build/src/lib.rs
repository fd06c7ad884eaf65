//! Compiles [NVIDIA Warp](https://nvidia.github.io/warp/) kernels ahead of
//! time from a Cargo build script, for `warp-launch` to run without Python.
//!
//! [`WarpModule`] runs Warp's own AOT compiler
//! ([`wp.compile_aot_module`](https://nvidia.github.io/warp/modules/runtime.html),
//! warp-lang 1.19.0, no GPU needed) on a Python file or package of Warp
//! kernels and writes one directory: `wp_<module>.cu` and `.meta` (the
//! generated source and metadata `warp_launch::AotModule` reads),
//! `wp_<module>.facts.json` (what Warp's own objects said, during the
//! compile, about native code, user preambles and whether the CPU code is
//! the CUDA code: `warp_proof::Facts`), a
//! `wp_<module>.sm<arch>.cubin` per architecture, and PTX for the lowest
//! architecture as the fallback a driver can compile for a GPU no cubin
//! fits. The PTX is not Warp's (ISA 9.4, from its CUDA 13.4 NVRTC, which
//! a CUDA 13.0 driver refuses): warp-build compiles Warp's `.cu` itself
//! with NVRTC 12.0 (`nvidia-cuda-nvrtc-cu12==12.0.76`, installed with
//! Warp, called through cuda-sys and cuda-api) and Warp's own NVRTC
//! options, to PTX ISA 8.0, which every driver from CUDA 12.0 on takes. A
//! module calling MathDx gets no PTX (see the README). With
//! [`WarpModule::embed`] it also writes `<module>.rs`, a
//! `warp_launch::EmbeddedModule` static that puts all of them into the
//! binary (`AotModule::from_embedded`).
//!
//! ```no_run
//! // build.rs (with `warp-launch = { features = ["build"] }` in
//! // [build-dependencies], this crate is `warp_launch::build`), in `main`:
//! let compiled = warp_build::WarpModule::new("kernels.py")
//!     .archs([80, 90])
//!     .block_dim(256)
//!     .embed(true)
//!     .compile()
//!     .unwrap_or_else(|e| panic!("{e}"));
//! // Nothing printed: a `cargo:warning` here would show on every build
//! // (Cargo replays a build script's warnings until it runs again).
//! assert!(!compiled.kernels().is_empty());
//! // src/main.rs:
//! // include!(concat!(env!("OUT_DIR"), "/warp/kernels/kernels.rs"));
//! // let module = warp_launch::AotModule::from_embedded(&KERNELS)?;
//! ```
//!
//! # Where Python and Warp come from
//!
//! The interpreter is [`WarpModule::python`], else `WARP_BUILD_PYTHON`, else
//! `python3` (3.10 or newer). Warp is imported from `WARP_BUILD_PYTHONPATH`
//! when set (a directory holding warp-lang 1.19.0 and numpy, as
//! `pip install --target` writes it); else from the interpreter's own
//! packages when they hold warp-lang 1.19.0; else warp-build installs it
//! with `python3 -m pip install --target <dir> warp-lang==1.19.0
//! numpy==2.2.6 nvidia-cuda-nvrtc-cu12==12.0.76` and reuses it:
//!
//! - by default once per user and machine, shared by every crate and target
//!   directory: `<dir>` is `<cache>/warp-build/1.19.0-<hash>`, where
//!   `<cache>` is the user's cache directory (`$XDG_CACHE_HOME`, else
//!   `~/.cache` on Linux; `~/Library/Caches` on macOS; the local application
//!   data folder on Windows) and `<hash>` is of the pip requirements and the
//!   interpreter's version, ABI and platform. `WARP_BUILD_CACHE_DIR=<abs dir>`
//!   replaces `<cache>/warp-build`. Builds running at once install it once:
//!   the first takes the lock file `<dir>.lock`, installs into a staging
//!   directory beside it and renames it to `<dir>`; the others wait and
//!   reuse it. About 525 MB; `cargo clean` does not remove it (delete the
//!   directory to);
//! - into `<target>/warp-build/python`, once per Cargo target directory
//!   (`CARGO_TARGET_DIR`, else the directory holding `CACHEDIR.TAG` above the
//!   output; removed by `cargo clean`), with `WARP_BUILD_CACHE=off` or when
//!   the interpreter is your own choice (`WARP_BUILD_PYTHON` or
//!   [`WarpModule::python`]).
//!
//! The first install prints one `cargo:warning` when it is done (what it
//! installed, where, and how long it took); later builds print nothing. A
//! warning is shown once: the run that warns writes `$OUT_DIR/warp-build.notice`
//! and watches it (`cargo:rerun-if-changed`), so Cargo runs the script once
//! more on the next build (quietly, its compile reused) instead of
//! replaying the warning on every build after. Warp's kernel
//! cache stays in `<target>/warp-build/kernel-cache`, not in the home
//! directory.
//!
//! # CPU code
//!
//! By default ([`WarpModule::cpu`]) the module is also compiled for the CPU:
//! Warp writes its generated C++ (`wp_<module>.cpp`), warp-build adds
//! `wp_<module>.cpu.cpp` with C entry points per kernel
//! (`wpl_<module>__<kernel>__forward`, `__backward`, `__layout`) and
//! compiles both, with a small runtime of its own, into
//! `<out_dir>/cpu/libwpl_<module>.a` using the [`cc`](https://docs.rs/cc)
//! crate (a C++17 compiler: g++ 9 or newer, or clang 10 or newer). Kernels
//! that use tiles get no CPU entry points ([`Compiled::cpu_unsupported`]).
//! `.cpu(false)` needs no C++ compiler.
//!
//! `WARP_BUILD_ARCHS` (`90,80`) overrides [`WarpModule::archs`], for example
//! to compile fewer architectures in CI.
//!
//! # Incremental builds
//!
//! In a build script, [`WarpModule::compile`] prints `cargo:rerun-if-changed`
//! for every `.py` file of the source (and those beside it that it imports)
//! and `cargo:rerun-if-env-changed` for the `WARP_BUILD_*` variables. The output
//! directory keeps a stamp (SHA-256 of the sources, the options, the Warp
//! version and the compile script): when it matches and the outputs exist,
//! nothing runs and [`Compiled::reused`] is `true`.

#![deny(missing_docs)]
#![warn(clippy::missing_errors_doc)]
// Messages go through `log`: users route or silence them. Only Cargo's
// instructions are printed (`cargo_instruction`); tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

mod cpu_library;
mod cpu_parse;
mod cpu_shim;
#[cfg(feature = "cuda-c")]
mod cuda_build;
mod embed;
mod error;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "launchers")]
mod launchers;
mod module;
mod notice;
mod ptx;
mod python;
mod rules;
mod stamp;

pub use error::{BuildError, WarpStage};

/// Prints one instruction to Cargo (`cargo:<line>`) for the build script
/// running the compile: the one place this crate writes to stdout, where
/// Cargo reads a build script's instructions. Messages go through `log`.
#[allow(
    clippy::print_stdout,
    reason = "Cargo reads a build script's instructions from its stdout"
)]
pub(crate) fn cargo_instruction(line: std::fmt::Arguments<'_>) {
    println!("cargo:{line}");
}
#[cfg(feature = "cuda-c")]
pub use cuda_build::{
    CUDA_WHEELS, CudaBuild, CudaBuildError, CudaCompiled, CudaDiagnostic, CudaFile, CudaKernel,
    ENV_CUDA_INCLUDE, ENV_CUDA_INCLUDE_PTX, ENV_NVRTC, ENV_NVRTC_PTX, WlKernel, WlParam,
};
pub use module::{Compiled, WarpModule, WarpPython};

// Typed launchers for the compiled module (warp-proof's generator).
#[cfg(feature = "launchers")]
pub use launchers::{LauncherError, Launchers, write_launchers};

/// The Warp version whose compiler warp-build runs and whose kernel ABI
/// `warp-launch` pins.
pub const WARP_VERSION: &str = "1.19.0";

/// What warp-build installs with pip when Warp is not importable.
/// `nvidia-cuda-nvrtc-cu12==12.0.76` is the NVRTC of the PTX fallback
/// (Warp's `.cu` compiled to PTX ISA 8.0, for drivers from CUDA 12.0 on).
pub const PIP_REQUIREMENTS: &[&str] = &["warp-lang==1.19.0", "numpy==2.2.6", NVRTC_WHEEL];

/// The NVRTC the PTX fallback compiles with.
pub(crate) const NVRTC_WHEEL: &str = "nvidia-cuda-nvrtc-cu12==12.0.76";

/// The PTX ISA NVRTC 12.0 writes, the most a CUDA 12.0 driver takes.
pub(crate) const PTX_ISA: &str = "8.0";

/// Overrides [`WarpModule::archs`]: a comma-separated list such as `90,80`.
pub const ENV_ARCHS: &str = "WARP_BUILD_ARCHS";

/// The Python interpreter to run (default `python3`).
pub const ENV_PYTHON: &str = "WARP_BUILD_PYTHON";

/// A directory holding warp-lang 1.19.0 and numpy, put first on `PYTHONPATH`.
pub const ENV_PYTHONPATH: &str = "WARP_BUILD_PYTHONPATH";

/// `off`: install Warp into each target directory (`<target>/warp-build/python`)
/// instead of once per user.
pub const ENV_CACHE: &str = "WARP_BUILD_CACHE";

/// An absolute directory for the shared Warp install instead of the user's
/// cache directory (`<dir>/1.19.0-<hash>`).
pub const ENV_CACHE_DIR: &str = "WARP_BUILD_CACHE_DIR";
