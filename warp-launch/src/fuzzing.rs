//! Entry points for `cargo xtask fuzz` and the fuzz test in `tests/`: each
//! takes arbitrary bytes, returns nothing and never panics. Not part of the
//! API; the names stay stable for the fuzzer.

use crate::source::{self, Direction};

/// Reads bytes as a Warp-generated `.cu` (`source::parse_cu`) and, when
/// that succeeds, declares each forward kernel as `AotModule::load` does
/// (no GPU, no image).
pub fn cu(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(src) = source::parse_cu(&text, "fuzz.cu") {
        let ctx = crate::aot::ModuleContext::new(&text, &src);
        let backwards: std::collections::HashMap<&str, &source::SourceKernel> = src
            .kernels
            .iter()
            .filter(|b| b.direction() == Some(Direction::Backward))
            .map(|b| (b.key(), b))
            .collect();
        for k in src
            .kernels
            .iter()
            .filter(|k| k.direction() == Some(Direction::Forward))
        {
            let backward = backwards.get(k.key()).copied();
            let _ = crate::aot::spec_of(k, backward, &ctx, "fuzz.cu");
        }
    }
}

/// Reads bytes as a Warp `.meta` file (`source::parse_meta`) and asks it
/// for a kernel's shared memory.
pub fn meta(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(m) = source::parse_meta(&text, "fuzz.meta") {
        let _ = m.shared_memory_bytes("k_cuda_kernel_forward");
    }
}
