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

use std::path::Path;

use crate::{BuildError, WarpModule};

pub use crate::module::{HostKernel, HostSources};

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
