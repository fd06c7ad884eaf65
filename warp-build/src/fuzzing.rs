//! The compile step as the differential fuzzer of the Warp proof needs it
//! (`cargo xtask fuzz --target warp`, `tests/tests/fuzz_warp.rs`). Not part
//! of the API; the names stay stable for the fuzzer.
//!
//! [`compile_for_host`] runs the same Warp compile as
//! [`WarpModule::compile`] (the same script and request: `.cu`, `.meta`,
//! `wp_<module>.facts.json` and Warp's CPU code `wp_<module>.cpp`) and
//! writes warp-build's CPU entry points (`wp_<module>.cpu.cpp`, the code
//! warp-launch calls on `"cpu"`) beside them, without building the CPU
//! library: the fuzzer compiles them itself, with sanitizers, against its
//! own copy of Warp's headers.

use std::path::{Path, PathBuf};

use crate::{BuildError, WarpModule};

/// What [`compile_for_host`] wrote.
#[derive(Clone, Debug)]
pub struct HostSources {
    /// The module's name (`wp_<module>.*`).
    pub module: String,
    /// The output directory holding Warp's files and the entry points.
    pub dir: PathBuf,
    /// The imported `warp` package (its `native/` holds Warp's headers).
    pub warp_dir: PathBuf,
    /// Every kernel of Warp's CPU code, in file order.
    pub kernels: Vec<HostKernel>,
}

/// One kernel of Warp's CPU code, as warp-build's entry points see it.
#[derive(Clone, Debug)]
pub struct HostKernel {
    /// The kernel's key: the entry point is
    /// `wpl_<module>__<key>__forward(const void* bounds, void* args, size_t first, size_t last)`.
    pub key: String,
    /// `N` of `wp::launch_bounds_t<N>`.
    pub dim: u32,
    /// The fields of `wp_args_<key>`, in order.
    pub fields: Vec<String>,
    /// Why it has no CPU entry points, or `None`.
    pub unsupported: Option<String>,
}

/// Compiles the Warp module `source` (a `.py` file) into `out_dir` for
/// `arch` (one cubin; no PTX) and its CPU code, and writes warp-build's CPU
/// entry points and runtime there ([`HostSources`]).
///
/// # Errors
///
/// As [`WarpModule::compile`]'s: no Python or Warp, Warp refusing the
/// module, file errors.
pub fn compile_for_host(
    source: &Path,
    out_dir: &Path,
    arch: u32,
) -> Result<HostSources, BuildError> {
    WarpModule::new(source)
        .archs([arch])
        .ptx(false)
        .cpu(true)
        .cargo_metadata(false)
        .out_dir(out_dir)
        .compile_sources()
}
