//! Reading what Warp's ahead-of-time compile writes: the CUDA source
//! (`wp_<module>.cu`) and the module metadata (`wp_<module>.meta`).
//!
//! The driver reports only the sizes and offsets of a kernel's parameters, so
//! the parameter *types* come from the source Warp generated. Warp 1.19.0 emits
//! every CUDA kernel as
//!
//! ```text
//! extern "C" __global__ void saxpy_cuda_kernel_forward(
//!     wp::launch_bounds_t<1> dim,
//!     wp::float32 var_a,
//!     wp::array_t<wp::float32> var_x,
//!     wp::array_t<wp::float32> var_y)
//! {
//! ```
//!
//! optionally with `__launch_bounds__(..)`, `WP_CLUSTER_DIMS(..)` before
//! `__global__` and `WP_MAXNREG(..)` before the name, and every `wp.struct` as
//! a C++ `struct <Key>_<8 hex> { <type> <field>; ... }` followed by member
//! functions. [`parse_cu`] returns the kernels with their parameters in order
//! and the structs with their fields in order; [`parse_meta`] returns the
//! per-kernel dynamic shared memory sizes.
//!
//! The reader is a small C++ tokenizer, not a compiler: it skips comments,
//! string literals and preprocessor lines, and understands exactly the forms
//! Warp emits. Only `extern "C" ... __global__` functions are kernels; Warp's
//! CPU entry points (`extern "C" { WP_API void <key>_cpu_forward(...) }`) are
//! not. Nothing here panics on malformed input: every problem is a
//! [`SourceError`] naming the file and line.
//!
//! The reader is split by what it reads: `tokens` (a C++ tokenizer), `cu`
//! (the kernel and struct declarations), `accesses` (how a kernel body
//! indexes its arrays) and `meta` (the `.meta` JSON, read with
//! `serde_json`).
//!
//! Every function here stays short enough to check by reading (the
//! workspace's `clippy.toml` sets the limit).
#![deny(clippy::too_many_lines)]

use std::fmt;

use crate::signature::Accesses;

mod accesses;
mod components;
mod cu;
pub(crate) mod cuda_c;
pub(crate) mod effects;
mod facts;
mod held;
mod known;
mod meta;
mod modes;
mod modulo;
mod tiles;
mod tokens;

pub use cu::parse_cu;
pub use facts::{DeviceFacts, Facts, KernelFacts, NativeFunction, Target, parse_facts};
pub use meta::{Meta, parse_meta};
pub use modes::{UnmodelledError, WarpFeature, refuse_unmodelled};
pub use tokens::list_items;

/// Everything [`parse_cu`] found in one Warp-generated CUDA source file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Source {
    /// Every `extern "C" __global__` function, in file order.
    pub kernels: Vec<SourceKernel>,
    /// Every top-level `struct NAME { ... }` definition, in file order.
    pub structs: Vec<SourceStruct>,
    /// 1-based line of the first place the file builds an array (Warp's
    /// `wp.array(ptr=...)`: `wp::array_t<T>(ptr, ...)`) or calls a builtin
    /// that dereferences a `uint64` handle (`wp::mesh_*`, `wp::bvh_*`,
    /// `wp::hash_grid_*`, `wp::volume_*`): memory no launch can check, in
    /// any function of the file.
    pub raw_addresses: Option<usize>,
}

impl Source {
    /// The kernel with this exact (mangled) name, e.g. `saxpy_cuda_kernel_forward`.
    #[cfg(test)]
    pub fn kernel(&self, name: &str) -> Option<&SourceKernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// The struct with this exact C++ name, e.g. `Params_acca3b2c` (the
    /// spelling kernel parameters use).
    #[cfg(test)]
    pub fn struct_named(&self, name: &str) -> Option<&SourceStruct> {
        self.structs.iter().find(|s| s.name == name)
    }
}

/// One CUDA kernel (`extern "C" __global__ void NAME(...)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceKernel {
    /// The symbol name, e.g. `saxpy_cuda_kernel_forward`.
    pub name: String,
    /// The parameters in declaration order, the launch bounds first.
    pub params: Vec<SourceParam>,
    /// 1-based line of the kernel's name.
    pub line: usize,
    /// Which loop shape the body has (decides the grid Warp launches).
    pub body: KernelBody,
    /// How the body indexes its array parameters: the facts a launch
    /// checks, or the first access no launch can check. An access is
    /// checkable when it is one of Warp's array builtins (`wp::address`,
    /// `wp::array_store`, `wp::atomic_*`, their `wp::adj_*` forms) on an
    /// array parameter, every index a `wp.tid()` coordinate (a variable
    /// assigned only by `builtin_tid*d`) or an integer constant; reading
    /// `.shape`/`.ndim` and `wp::len` is harmless; anything else (views,
    /// copies, calls, computed indices, arrays not passed as parameters)
    /// makes the body [`Accesses::Unproven`].
    pub accesses: Accesses,
}

/// The loop shape of a kernel body, as Warp's code generator writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KernelBody {
    /// `for (size_t _idx = ...; _idx < dim.size; _idx += ...)`: the default;
    /// launched on a 1-D grid that `max_blocks` may cap.
    GridStride,
    /// `const size_t _idx = ...; if (_idx >= dim.size) return;`: a kernel
    /// built with `grid_stride=False`; launched on a 3-D grid, one thread per
    /// index, and `max_blocks > 0` is refused.
    Lean,
    /// A body with neither form (not a Warp-generated launch kernel).
    Other,
    /// A declaration without a body (`...);`).
    Declaration,
}

/// Forward or backward half of a Warp kernel, from the name suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `<key>_cuda_kernel_forward`.
    Forward,
    /// `<key>_cuda_kernel_backward`: forward parameters, then one adjoint per
    /// parameter.
    Backward,
}

const FORWARD_SUFFIX: &str = "_cuda_kernel_forward";
const BACKWARD_SUFFIX: &str = "_cuda_kernel_backward";

impl SourceKernel {
    /// Whether this is the forward or backward kernel, from Warp's name
    /// suffix; `None` for any other name.
    pub fn direction(&self) -> Option<Direction> {
        if self.name.ends_with(FORWARD_SUFFIX) {
            Some(Direction::Forward)
        } else if self.name.ends_with(BACKWARD_SUFFIX) {
            Some(Direction::Backward)
        } else {
            None
        }
    }

    /// The Warp kernel key: the name without `_cuda_kernel_forward` /
    /// `_cuda_kernel_backward` (the whole name when neither suffix is there).
    pub fn key(&self) -> &str {
        self.name
            .strip_suffix(FORWARD_SUFFIX)
            .or_else(|| self.name.strip_suffix(BACKWARD_SUFFIX))
            .unwrap_or(&self.name)
    }

    /// `N` of the first parameter when it is `wp::launch_bounds_t<N>`.
    pub fn launch_ndim(&self) -> Option<usize> {
        let first = self.params.first()?;
        let n = first
            .cpp_type
            .strip_prefix("wp::launch_bounds_t<")?
            .strip_suffix('>')?;
        n.parse().ok()
    }
}

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceParam {
    /// The spelled name: `dim`, `var_<label>` or `adj_<label>` in Warp's output.
    pub name: String,
    /// The type with whitespace removed except between two words, e.g.
    /// `wp::array_t<wp::float32>`, `wp::vec_t<3,wp::float32>`,
    /// `wp::launch_bounds_t<1>`, `Params_acca3b2c`, `const float*`.
    pub cpp_type: String,
    /// 1-based line where the parameter starts.
    pub line: usize,
}

impl SourceParam {
    /// The Warp argument label: the name without its `var_` / `adj_` prefix.
    pub fn label(&self) -> &str {
        self.name
            .strip_prefix("var_")
            .or_else(|| self.name.strip_prefix("adj_"))
            .unwrap_or(&self.name)
    }

    /// Whether the name marks an adjoint (`adj_<label>`).
    pub fn is_adjoint(&self) -> bool {
        self.name.starts_with("adj_")
    }
}

/// One `struct NAME { ... };` definition (how Warp emits a `wp.struct`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceStruct {
    /// The C++ name, e.g. `Params_acca3b2c` (Warp's key plus 8 hex digits
    /// of the struct's hash; kept even with `strip_hash=True`).
    pub name: String,
    /// The data members in declaration order (C layout order).
    pub fields: Vec<SourceField>,
    /// 1-based line of the struct's name.
    pub line: usize,
}

impl SourceStruct {
    /// The Warp struct key: the name without a trailing `_` plus 8 hex digits
    /// (the whole name when it has no such suffix).
    #[cfg(test)]
    pub fn warp_key(&self) -> &str {
        crate::signature::struct_key(&self.name)
    }
}

/// One data member of a [`SourceStruct`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceField {
    /// The member name. An empty `wp.struct` has a single `char _dummy_`.
    pub name: String,
    /// The type, spelled as in [`SourceParam::cpp_type`].
    pub cpp_type: String,
    /// 1-based line of the member.
    pub line: usize,
}

/// A problem reading a `.cu` or `.meta` file: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceError {
    file: String,
    line: usize,
    message: String,
}

impl SourceError {
    pub(crate) fn new(file: &str, line: usize, message: impl Into<String>) -> Self {
        SourceError {
            file: file.to_owned(),
            line,
            message: message.into(),
        }
    }

    /// The file name given to the parser.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based line of the problem.
    pub fn line(&self) -> usize {
        self.line
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for SourceError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Set in a child test process started by [`run_in_child`].
    const CHILD_ENV: &str = "WARP_LAUNCH_TEST_CHILD";

    /// Whether this process is a child started by [`run_in_child`].
    fn is_child() -> bool {
        std::env::var_os(CHILD_ENV).is_some()
    }

    /// Runs test `name` of this test binary in a child process and fails
    /// if it fails or runs longer than `limit` (then it is killed): a
    /// regression to super-linear time fails instead of hanging the run.
    fn run_in_child(name: &str, limit: Duration) {
        let exe = std::env::current_exe().unwrap();
        let mut child = std::process::Command::new(exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let out = child.wait_with_output().unwrap();
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(status.success(), "child test {name} failed:\n{text}");
                assert!(
                    text.contains("1 passed"),
                    "child test {name} did not run:\n{text}"
                );
                return;
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("child test {name} ran longer than {limit:?}: super-linear time?");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Parses `text` and fails if it takes a second or more.
    fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        let took = start.elapsed();
        println!("{what}: {took:?}");
        assert!(took < Duration::from_secs(1), "{what} took {took:?}");
        out
    }

    const FIXTURE_CU: &str = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.cu");

    /// Texts of about 1 MB that were slow on 38e7deb, and depth floods.
    fn big_inputs() -> Vec<(&'static str, String)> {
        const MB: usize = 1 << 20;
        let fill = |unit: &str| unit.repeat(MB / unit.len() + 1);
        let start = FIXTURE_CU
            .find("extern \"C\" __global__ void saxpy_cuda_kernel_forward")
            .unwrap();
        let end = FIXTURE_CU
            .find("extern \"C\" __global__ void add2d_cuda_kernel_forward")
            .unwrap();
        let saxpy = &FIXTURE_CU[start..end];
        let mut kernels = FIXTURE_CU[..start].to_string();
        let mut i = 0;
        while kernels.len() < MB {
            kernels.push_str(&saxpy.replace("saxpy", &format!("saxpy{i}")));
            i += 1;
        }
        let n = MB / 16;
        vec![
            ("repeated kernels", kernels),
            ("extern \"C\" { flood", fill("extern \"C\" {\n")),
            (
                "balanced extern \"C\" { }",
                format!("{}{}", "extern \"C\" {\n".repeat(n), "}\n".repeat(n)),
            ),
            ("struct flood", fill("struct ")),
            (
                "template struct flood",
                format!("template <typename T> {}", fill("struct ")),
            ),
            ("struct S { flood", fill("struct S {\n")),
            (
                "nested attribute macros",
                format!("{}{}", "extern \"C\" WP_MAXNREG(".repeat(n), ")".repeat(n)),
            ),
            (
                "parenthesised parameters",
                format!("extern \"C\" __global__ void k({}", "(".repeat(MB)),
            ),
            (
                "kernel body floods",
                format!(
                    "extern \"C\" __global__ void k(wp::launch_bounds_t<1> dim, wp::array_t<wp::float32> var_x) {{ {} {} {} {} }}",
                    "wp::address(".repeat(n / 4),
                    "builtin_tid2d(var_0, ".repeat(n / 4),
                    "wp::array_t<".repeat(n / 4),
                    "const wp::int32 ".repeat(n / 4),
                ),
            ),
            (
                "kernel body of accesses",
                format!(
                    "extern \"C\" __global__ void k(wp::launch_bounds_t<1> dim, wp::array_t<wp::float32> var_x) {{ var_0 = builtin_tid1d(); {} }}",
                    "wp::array_store(var_x, var_0, var_v); var_x.shape = var_1; ".repeat(n / 4),
                ),
            ),
            (
                "meta",
                format!(
                    "{{{}\"a_smem_bytes\": 1}}",
                    "\"k\": [1, 2, {\"x\": null}],\n".repeat(n / 2)
                ),
            ),
        ]
    }

    #[test]
    fn big_inputs_child() {
        if !is_child() {
            return;
        }
        for (what, text) in big_inputs() {
            println!("{what}: {} bytes", text.len());
            timed(what, || {
                let _ = parse_cu(&text, "big.cu");
                let _ = parse_meta(&text, "big.meta");
            });
        }
        let src = parse_cu(&big_inputs()[0].1, "big.cu").unwrap();
        assert!(src.kernels.len() > 400, "{}", src.kernels.len());
    }

    #[test]
    fn one_megabyte_inputs_parse_in_under_a_second_each() {
        run_in_child("source::tests::big_inputs_child", Duration::from_secs(60));
    }
}
