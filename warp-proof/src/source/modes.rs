//! Warp compile modes and kernel features that change the generated code or
//! the launch contract, read from a module's `.cu`: the ones a launch here
//! does not model are refused when the module is loaded ([`refuse_unmodelled`]),
//! the ones that put user C++ beside the generated code make kernels
//! unproven (from the compile step's facts, [`Facts`](super::Facts): the
//! text cannot tell Warp's code from the user's), the rest are harmless.
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
//! | `@wp.func_native` snippets | a function whose body is the snippet (parameters without Warp's `var_` prefix, no `// primal vars`) | every kernel of the module unproven, from warp-build's facts ([`Facts`](super::Facts)), never from the text: a snippet can begin with the comment Warp's own functions begin with |
//! | `ModuleBuildOptions(extra_cuda_preamble=...)` | the preamble between Warp's header and its cast macros | every kernel unproven on that device, from the facts, as for snippets (a preamble can redefine the macros the analysis reads) |
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
