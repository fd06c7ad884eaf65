//! Which Warp wrote a module: the module header Warp 1.19.0 writes at the
//! top of every CUDA source, and the keys of its `.meta`.

use crate::source::{Meta, SourceError};

/// The Warp release whose output this crate reads: its kernel ABI
/// (`launch_bounds_t`, `array_t`), the forms of its generated code that the
/// access analysis reads, and the module header below are Warp 1.19.0's.
pub const WARP_VERSION: &str = "1.19.0";

/// The module header Warp 1.19.0 writes at the top of every CUDA source
/// (`warp/_src/codegen.py`'s `cuda_module_header`, after an optional
/// `#define WP_NO_BFLOAT16` and an empty line), `{block_dim}` standing for
/// the module's block size. Warp records its version nowhere in its AOT
/// output (not in the `.cu`, the `.meta`, nor the cubin), so this header is
/// the best evidence of which Warp wrote a module: it changes between
/// releases (1.16.0's differs at line 13, and lacks the `WP_MAXNREG` and
/// `WP_ENABLE_SMEM_SPILLING` blocks). It does not tell every release apart:
/// Warp 1.17.0 and 1.18.0 write `tests/warp/kernels.py`'s `.cu` and `.meta`
/// byte for byte as 1.19.0 does (`cargo xtask warp-other-versions`), and
/// such a module loads. Their kernel ABI is 1.19.0's: `array_t` and
/// `launch_bounds_t` are the same structs (in 1.17.0 `launch_bounds_t`'s
/// `shape` is `int[N]`, not `uint32_t[N]`: the same layout, and the same
/// values for the extents a launch allows).
const WARP_CUDA_HEADER: &str = r#"#define WP_TILE_BLOCK_DIM {block_dim}
#define WP_NO_CRT
#include "builtin.h"
#include "deterministic.h"

// Map wp.breakpoint() to a device brkpt at the call site so cuda-gdb attributes the stop to the generated .cu line
#if defined(__CUDACC__) && !defined(_MSC_VER)
#define __debugbreak() __brkpt()
#endif

#define builtin_tid1d() wp::tid(_idx, dim)
#define builtin_tid2d(x, y) wp::tid(x, y, _idx, dim)
#define builtin_tid3d(x, y, z) wp::tid(x, y, z, _idx, dim)
#define builtin_tid4d(x, y, z, w) wp::tid(x, y, z, w, _idx, dim)

#define builtin_block_dim() wp::block_dim()

// CUDA Thread Block Cluster shape declaration. Expands to __cluster_dims__
// only on devices that support clusters (compute capability 9.0+); otherwise
// expands to nothing so the same source compiles cleanly for any target arch.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#define WP_CLUSTER_DIMS(x, y, z) __cluster_dims__(x, y, z)
#else
#define WP_CLUSTER_DIMS(x, y, z)
#endif

// Maximum registers per thread. __maxnreg__ was added in CUDA Toolkit 12.4;
// older toolkits ignore the opt-in so the same source remains compilable.
#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define WP_MAXNREG(n) __maxnreg__(n)
#else
#define WP_MAXNREG(n)
#endif

// Allow PTXAS to spill registers into shared memory. CUDA Toolkit 13.0
// introduced the pragma, which is unavailable in device-debug compilation.
#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ >= 13) && !defined(_DEBUG)
#define WP_ENABLE_SMEM_SPILLING() asm volatile(".pragma \"enable_smem_spilling\";");
#else
#define WP_ENABLE_SMEM_SPILLING()
#endif
"#;

/// Refuses a source not written by Warp [`WARP_VERSION`]: its module
/// header must be 1.19.0's, line for line.
pub(super) fn check_warp_version(text: &str, file: &str) -> Result<(), SourceError> {
    let mut lines = text.lines().map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut line_no = 1;
    let mut first = lines.next();
    if first == Some("#define WP_NO_BFLOAT16") {
        first = lines.next();
        line_no += 1;
    }
    let refuse = |line: usize, expected: &str, found: Option<&str>| {
        SourceError::new(
            file,
            line,
            format!(
                "not written by Warp {WARP_VERSION}, the version this crate's kernel ABI is pinned to: line {line} of the module header is {} where Warp {WARP_VERSION} writes `{expected}`. Warp records no version in its AOT output, so the other version is known only as \"not {WARP_VERSION}\"; recompile the module with warp-lang=={WARP_VERSION} (wp.compile_aot_module(..., arch=90, use_ptx=False, strip_hash=True))",
                found.map_or("missing (the file ends)".to_string(), |f| format!("`{f}`")),
            ),
        )
    };
    if first != Some("") {
        return Err(refuse(line_no, "", first));
    }
    for expected in WARP_CUDA_HEADER.lines() {
        line_no += 1;
        let found = lines.next();
        let ok = match expected.strip_suffix("{block_dim}") {
            Some(prefix) => found
                .and_then(|f| f.strip_prefix(prefix))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
            None => found == Some(expected),
        };
        if !ok {
            return Err(refuse(line_no, expected, found));
        }
    }
    Ok(())
}

/// Refuses `.meta` keys Warp 1.19.0 does not write (it writes only
/// `<kernel>_smem_bytes`); a `warp_version` key, if some tool adds one,
/// must say 1.19.0.
pub(super) fn check_meta_version(meta: &Meta, file: &str) -> Result<(), SourceError> {
    let Some((key, value)) = meta.other.iter().next() else {
        return Ok(());
    };
    let found = match (key.as_str(), value) {
        ("warp_version" | "version", serde_json::Value::String(v)) if v == WARP_VERSION => {
            return Ok(());
        }
        ("warp_version" | "version", serde_json::Value::String(v)) => {
            format!("it says it was written by Warp {v}")
        }
        _ => format!(
            "it has the key \"{key}\", which Warp {WARP_VERSION} does not write (it writes only \"<kernel>_smem_bytes\")"
        ),
    };
    Err(SourceError::new(
        file,
        0,
        format!(
            "not written by Warp {WARP_VERSION}, the version this crate's kernel ABI is pinned to: {found}; recompile the module with warp-lang=={WARP_VERSION}"
        ),
    ))
}
