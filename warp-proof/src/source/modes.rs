//! Warp compile modes and kernel features that change the generated code or
//! the launch contract, read from a module's `.cu`: the ones a launch here
//! does not model are refused when the module is loaded ([`refuse_unmodelled`]),
//! the ones that put native code beside the generated code make every
//! kernel's accesses unproven ([`native_code`]), the rest are harmless.
//!
//! What Warp 1.19.0 writes for each (compiled with `wp.compile_aot_module`,
//! no GPU; `tests/fixtures/modes/` holds the output and `modes.py`, the
//! Python that made it):
//!
//! | Warp option | In the `.cu` | Here |
//! |---|---|---|
//! | `deterministic=RUN_TO_RUN` / `GPU_TO_GPU` (module) | extra kernel parameters `_wp_det_phase`, `_wp_det_debug`, `_wp_det_overflow`, `_wp_det_scatter_*`, `_wp_det_counter_*`; Warp launches such a kernel twice and sorts and reduces the scattered records between | refused ([`WarpFeature::Deterministic`]) |
//! | `cluster_dim=N` (kernel) | `WP_CLUSTER_DIMS(N, 1, 1)` before `__global__`: on sm_90 and up the grid must be a multiple of `N` blocks, and Warp checks that and sets the non-portable cluster attribute | refused ([`WarpFeature::Cluster`]) |
//! | `entry_point_abi="external_constant_params"` (kernel) | `extern "C" __global__ void KEY()` with no parameters, its struct argument in `__constant__ ... params[]` | refused ([`WarpFeature::ExternalConstantParams`]) |
//! | `launch_bounds=(T, B)` (kernel) | `__launch_bounds__(T, B)` | refused when `T` is below the module's `block_dim` ([`WarpFeature::LaunchBounds`]: the kernel could never launch); otherwise harmless (the driver accounts for it) |
//! | `cuda_max_registers=R` (kernel) | `WP_MAXNREG(R)` before the name | harmless: a register cap, which the driver's occupancy answers include |
//! | `enable_cuda_smem_spilling=True` (kernel) | `WP_ENABLE_SMEM_SPILLING();` first in the body | harmless: a compiler pragma |
//! | `mode="debug"`, `lineinfo=True` (module) | `#line` directives (identical `.cu` in both; debug differs only in the compile flags of the cubin) | harmless: the reader skips preprocessor lines; debug builds add bounds asserts |
//! | `enable_backward=False` (module or kernel) | no `_cuda_kernel_backward`; as a module option, each `@wp.func`'s adjoint is a stub whose body is `// reverse mode disabled ...` | harmless: no backward function (adjoint launches and the tape say so); the stubs are generated code, not native code |
//! | `fast_math`, `fuse_fp`, `optimization_level`, `max_unroll` | the same `.cu` | harmless: compile flags and unrolling |
//! | generic kernels (`typing.Any`, `wp.overload`) | one overload with `strip_hash=True`: an ordinary kernel; several (`strip_hash=False`): `KEY_<hash>_cuda_kernel_forward` each | harmless: each overload is a kernel keyed `KEY_<hash>`, typed from its own source |
//! | `@wp.func_native` snippets | a function whose body is the snippet (parameters without Warp's `var_` prefix, no `// primal vars`) | every kernel of the module unproven ([`native_code`]): no launch can read what native code touches |
//! | `ModuleBuildOptions(extra_cuda_preamble=...)` | the preamble between Warp's header and its cast macros | every kernel unproven, as for snippets (a preamble can redefine the macros the analysis reads) |
//!
//! The `.meta` shows none of these (it holds `<kernel>_smem_bytes` only; an
//! external entry point's key is `<key>_smem_bytes`).

use std::fmt;

use super::{Source, SourceKernel};

/// A Warp compile mode or kernel feature that changes how a kernel must be
/// launched in a way warp-launch does not model, found in a module's source
/// ([`UnmodelledError`]; warp-launch's `Error::Unmodelled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WarpFeature {
    /// Deterministic atomics (the module option `deterministic`, Warp's
    /// `DeterministicMode.RUN_TO_RUN` or `GPU_TO_GPU`): the kernel takes
    /// extra scatter and counter buffers, and Warp runs it in two phases
    /// with a sort and a reduction between.
    Deterministic,
    /// Thread block clusters (`@wp.kernel(cluster_dim=ctas)`): compiled in
    /// as `__cluster_dims__(ctas, 1, 1)`, so every grid must be a multiple
    /// of `ctas` blocks.
    Cluster {
        /// Blocks per cluster.
        ctas: u32,
    },
    /// An external entry point
    /// (`@wp.kernel(entry_point_abi="external_constant_params")`): no launch
    /// bounds and no parameters, its argument in a `__constant__` symbol,
    /// for runtimes such as OptiX.
    ExternalConstantParams,
    /// `@wp.kernel(launch_bounds=max_threads)` below the module's
    /// `block_dim`: the kernel can never launch at the one block size the
    /// module runs at.
    LaunchBounds {
        /// The kernel's `__launch_bounds__` maximum threads per block.
        max_threads: u32,
        /// The module's block size (`WP_TILE_BLOCK_DIM`).
        block_dim: u32,
    },
}

impl fmt::Display for WarpFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WarpFeature::Deterministic => f.write_str(
                "in deterministic mode (module option deterministic=RUN_TO_RUN or GPU_TO_GPU): it takes extra scatter and counter buffers (_wp_det_* parameters) and Warp launches it in two phases with a sort and a reduction between, which warp-launch does not do; compile the module without deterministic mode (wp.config.deterministic, or wp.set_module_options({\"deterministic\": wp.DeterministicMode.NOT_GUARANTEED}))",
            ),
            WarpFeature::Cluster { ctas } => write!(
                f,
                "with thread block clusters of {ctas} blocks (cluster_dim={ctas}: __cluster_dims__({ctas}, 1, 1)): its grids must be a multiple of {ctas} blocks and larger clusters need an attribute set before launch, which warp-launch does not model; compile the kernel without cluster_dim, or launch it through cuda-api's cluster launch"
            ),
            WarpFeature::ExternalConstantParams => f.write_str(
                "as an external entry point (entry_point_abi=\"external_constant_params\"): it has no launch bounds and no parameters, and reads its argument from the __constant__ symbol `params`, which runtimes such as OptiX fill; warp-launch launches only Warp's own entry points: compile the kernel with the default entry_point_abi",
            ),
            WarpFeature::LaunchBounds {
                max_threads,
                block_dim,
            } => write!(
                f,
                "with launch_bounds {max_threads} (__launch_bounds__({max_threads})), below the module's block_dim {block_dim}: a Warp module runs only at its block_dim, so the kernel can never launch; raise launch_bounds to at least {block_dim}, or compile the module with block_dim {max_threads} or less"
            ),
        }
    }
}

/// A kernel compiled in a mode warp-launch does not model, found by
/// [`refuse_unmodelled`] (warp-launch wraps it in its `Error::Unmodelled`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmodelledError {
    /// The mode or feature.
    pub feature: WarpFeature,
    /// The kernel (Warp's key).
    pub kernel: String,
    /// The generated source.
    pub file: String,
    /// 1-based line where the source shows it.
    pub line: usize,
}

impl fmt::Display for UnmodelledError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: kernel '{}' was compiled {}",
            self.file, self.line, self.kernel, self.feature
        )
    }
}

impl std::error::Error for UnmodelledError {}

/// The block size of the module (`#define WP_TILE_BLOCK_DIM N`).
fn block_dim(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("#define WP_TILE_BLOCK_DIM "))
        .and_then(|v| v.trim().parse().ok())
}

/// The integers of the first `NAME(a, b, ...)` on `line`.
fn macro_args(line: &str, name: &str) -> Option<Vec<u32>> {
    let at = line.find(name)? + name.len();
    let rest = line[at..].trim_start().strip_prefix('(')?;
    let args = &rest[..rest.find(')')?];
    args.split(',').map(|a| a.trim().parse().ok()).collect()
}

/// Refuses a module compiled in a mode, or holding a kernel feature, that a
/// warp-launch launch does not model ([`WarpFeature`]), naming the feature,
/// the kernel, `file` and the line. `text` is the source `src` was parsed
/// from ([`parse_cu`](crate::parse_cu)).
///
/// # Errors
///
/// An [`UnmodelledError`] for the first such kernel in file order.
pub fn refuse_unmodelled(text: &str, src: &Source, file: &str) -> Result<(), UnmodelledError> {
    let lines: Vec<&str> = text.lines().collect();
    let refuse = |feature, kernel: &SourceKernel, line: usize| {
        Err(UnmodelledError {
            feature,
            kernel: kernel.key().to_string(),
            file: file.to_string(),
            line,
        })
    };
    let constant_params = lines
        .iter()
        .any(|l| l.contains("__constant__") && l.contains("params["));
    let module_block = block_dim(text);
    for k in &src.kernels {
        if let Some(p) = k.params.iter().find(|p| p.name.starts_with("_wp_det_")) {
            return refuse(WarpFeature::Deterministic, k, p.line);
        }
        let head = lines.get(k.line.wrapping_sub(1)).copied().unwrap_or("");
        if let Some(ctas) = ["WP_CLUSTER_DIMS", "__cluster_dims__"]
            .iter()
            .find_map(|m| macro_args(head, m))
            .map(|a| a.iter().product::<u32>())
            .filter(|&n| n != 1)
        {
            return refuse(WarpFeature::Cluster { ctas }, k, k.line);
        }
        if let (Some(args), Some(block_dim)) = (macro_args(head, "__launch_bounds__"), module_block)
            && let Some(&max_threads) = args.first()
            && max_threads < block_dim
        {
            return refuse(
                WarpFeature::LaunchBounds {
                    max_threads,
                    block_dim,
                },
                k,
                k.line,
            );
        }
        let bounds_first = k
            .params
            .first()
            .is_some_and(|p| p.cpp_type.starts_with("wp::launch_bounds_t<"));
        if constant_params && !bounds_first {
            return refuse(WarpFeature::ExternalConstantParams, k, k.line);
        }
    }
    Ok(())
}

/// Native code in a module: what it is and its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NativeCode {
    /// What the code is, for messages.
    pub what: String,
    /// Where it starts.
    pub line: usize,
}

/// The first native code in a Warp-generated source: a `@wp.func_native`
/// snippet (a function Warp emits as `// <file>:<line>` then `static
/// CUDA_CALLABLE ... NAME(` whose body is not Warp's generated
/// `//---------` / `// primal vars` form), or an `extra_cuda_preamble`
/// (anything but blank lines between Warp's module header and its cast
/// macros).
pub(crate) fn native_code(text: &str) -> Option<NativeCode> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    // The preamble: after the header's last line (the #else branch of
    // WP_ENABLE_SMEM_SPILLING and its #endif), before the cast macros.
    if let Some(end) = lines
        .iter()
        .position(|l| *l == "#define WP_ENABLE_SMEM_SPILLING()")
    {
        for (i, l) in lines.iter().enumerate().skip(end + 2) {
            if l.starts_with("// avoid namespacing of float type") {
                break;
            }
            if !l.trim().is_empty() {
                return Some(NativeCode {
                    what: "an extra CUDA preamble (ModuleBuildOptions(extra_cuda_preamble=...)) between Warp's header and the generated code".into(),
                    line: i + 1,
                });
            }
        }
    }
    let is_location = |l: &str| {
        l.strip_prefix("// ")
            .and_then(|r| r.rsplit_once(':'))
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut i = 0;
    while i < lines.len() {
        if !is_location(lines[i]) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while lines.get(j).is_some_and(|l| l.starts_with("#line")) {
            j += 1;
        }
        let Some(head) = lines.get(j) else { break };
        if !(head.starts_with("static ") && head.contains("CUDA_CALLABLE") && head.ends_with('(')) {
            i = j;
            continue;
        }
        let name = head
            .trim_end_matches('(')
            .rsplit(' ')
            .next()
            .unwrap_or("")
            .to_string();
        // The parameter list ends with `)`; the body opens on the next line.
        let Some(close) = (j..lines.len()).find(|&k| lines[k].trim_end().ends_with(')')) else {
            break;
        };
        if lines.get(close + 1).map(|l| l.trim()) != Some("{") {
            i = close + 1;
            continue;
        }
        let first = lines[close + 2..]
            .iter()
            .position(|l| !l.trim().is_empty() && !l.starts_with("#line"))
            .map(|p| close + 2 + p);
        // Warp's functions open with `//---------` (the primal variables); in a
        // module without a backward pass the adjoint of a function is a stub
        // whose body is one comment.
        let generated = first.is_some_and(|f| {
            let l = lines[f].trim();
            l == "//---------" || l.starts_with("// reverse mode disabled")
        });
        if !generated {
            return Some(NativeCode {
                what: format!("native code from @wp.func_native (function `{name}`)"),
                line: j + 1,
            });
        }
        i = close + 2;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::native_code;
    use crate::signature::Accesses;
    use crate::source::parse_cu;

    /// Warp 1.19.0's output for `tests/warp/modes.py`, module by module.
    macro_rules! fixture {
        ($name:literal) => {
            (
                include_str!(concat!(
                    "../../../warp-launch/tests/fixtures/modes/wp_",
                    $name,
                    ".cu"
                )),
                concat!("wp_", $name, ".cu"),
            )
        };
    }

    /// The reader's half of warp-launch's
    /// `proof_tests::native_code_makes_every_kernel_unproven` (which
    /// checks the declarations a module load makes of the same texts).
    #[test]
    fn native_code_is_found_at_its_line_and_makes_every_kernel_unproven() {
        for ((cu, file), line, says) in [
            (
                fixture!("modes_native"),
                55,
                "native code from @wp.func_native (function `twice_into_0`)",
            ),
            (fixture!("modes_preamble"), 45, "extra CUDA preamble"),
        ] {
            let n = native_code(cu).unwrap();
            assert_eq!(n.line, line, "{file}");
            assert!(n.what.contains(says), "{}", n.what);
            let src = parse_cu(cu, file).unwrap();
            assert!(!src.kernels.is_empty(), "{file}");
            for k in &src.kernels {
                let Accesses::Unproven(u) = &k.accesses else {
                    panic!("{file} {}: {:?}", k.name, k.accesses);
                };
                assert_eq!(u.location, format!("{file}:{line}"));
                assert!(u.reason.contains(says), "{}", u.reason);
            }
        }
        // Warp's own functions (a @wp.func in wp_access.cu, and its adjoint
        // stub in a module without a backward pass) are not native code.
        for cu in [
            fixture!("modes_forward_only").0,
            include_str!("../../../warp-launch/tests/fixtures/wp_kernels.cu"),
            include_str!("../../../warp-launch/tests/fixtures/wp_access.cu"),
            include_str!("../../../warp-launch/tests/fixtures/wp_tiles.cu"),
            fixture!("modes_debug").0,
            fixture!("modes_harmless").0,
        ] {
            assert_eq!(native_code(cu), None);
        }
    }
}
