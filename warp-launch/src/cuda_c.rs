//! CUDA C kernels written against `warp_launch.h`, compiled by this process
//! at run time with NVRTC ([`cuda_api::Program`]) and declared from the same
//! text: [`CudaModule`].

use std::fmt;

use cuda_api::{CacheOutcome, Library, Program};

use crate::device::IntoDevice;
use crate::error::{Error, Result};
use crate::launch::{Kernel, KernelSpec};
use crate::signature::{Accesses, ParamKind, Unproven};
use crate::source::cuda_c::{CudaCKernel, Weaken, array_element, dtype_of, read_text};

pub use crate::cuda_embedded::EmbeddedCudaModule;

/// The header every text may include as `"warp_launch.h"`: the one
/// `warp-launch/include/` ships (warp-proof holds the same generated text,
/// which build steps hand to NVRTC; a test keeps the two equal).
const WARP_LAUNCH_H: &str = warp_proof::WARP_LAUNCH_H;

/// CUDA C kernels of one text written against `warp_launch.h` (Warp's
/// kernel ABI: `wl::launch_bounds_t<N>` first, arrays as `wl::array_t<T>`),
/// compiled by this process with NVRTC, each declared from that same text.
///
/// The declaration of every `extern "C" __global__` kernel comes from its
/// source: the parameters' types and names, the launch's dimension count,
/// grid-stride or lean, and the access rules every launch checks. A body
/// in the subset the reader understands (arrays reached only through
/// `wl::index(a, ...)` / `atomicOp(wl::address(a, ...), ...)` with thread
/// coordinates, the work-item index, `blockIdx.x` or integer constants as
/// indices; no pointers, subscripts or unknown calls) gets its rules; any
/// other body is [`Accesses::Unproven`] with the first `file:line` it cannot
/// read, and only the `unsafe` [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked)
/// launches it. [`CudaModule::declarations`] gives the verdicts without a
/// GPU.
///
/// Safe, because the rules and the code come from the same text in the
/// same process: [`CudaModule::compile`] passes NVRTC the text and this
/// crate's `warp_launch.h`, no options and no other header, so nothing can
/// change what the tokens mean between the reading and the compile. Rules
/// read from a text and paired with code compiled elsewhere are
/// [`CudaModule::from_image`], which is `unsafe`.
///
/// On a GPU with NVRTC (`CUDA_SYS_NVRTC_LIBRARY` names a pip wheel's
/// `nvidia/cu13/lib` when none is installed):
///
/// ```no_run
/// use warp_launch::{Array, CudaModule, Device};
///
/// # fn main() -> warp_launch::Result<()> {
/// let src = r#"
/// #include "warp_launch.h"
/// extern "C" __global__ void scale(wl::launch_bounds_t<1> dim, wl::array_t<float> a, float s) {
///     WL_GRID_STRIDE_LOOP(idx, dim) {
///         wl::coord_t c = wl::coord(idx, dim);
///         wl::index(a, c.i) *= s;
///     }
/// }
/// "#;
/// let module = CudaModule::compile(Device::Cuda(0), "scale.cu", src)?;
/// let scale = module.kernel("scale")?;
/// let a = Array::from_slice(Device::Cuda(0), &[1.0f32, 2.0, 3.0], &[3])?;
/// scale.launch(3).inputs((&a, 2.0f32)).run()?;
/// assert_eq!(a.to_vec::<f32>()?, [2.0, 4.0, 6.0]);
/// // A domain past the array is refused before the driver sees it.
/// assert!(scale.launch(4).inputs((&a, 2.0f32)).run().is_err());
/// # Ok(()) }
/// ```
pub struct CudaModule {
    name: String,
    specs: Vec<KernelSpec>,
    library: Library,
    cache: Option<CacheOutcome>,
    image: Option<&'static str>,
}

impl fmt::Debug for CudaModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaModule")
            .field("name", &self.name)
            .field(
                "kernels",
                &self.specs.iter().map(KernelSpec::name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl CudaModule {
    /// The declarations of every kernel in `source` (its file name `name`,
    /// used in messages), as [`CudaModule::compile`] makes them; no GPU and
    /// no NVRTC needed.
    ///
    /// # Errors
    ///
    /// [`Error::Source`] naming `name` and the line where the text does not
    /// tokenize, a kernel's head or parameters do not parse, or a
    /// parameter's type is not `wl::launch_bounds_t<N>` (first),
    /// `wl::array_t<T>` or a Warp scalar, vector or matrix type.
    pub fn declarations(name: &str, source: &str) -> Result<Vec<KernelSpec>> {
        declarations_weakened(source, name, Weaken::Nothing)
    }

    /// Reads `source`, compiles it with NVRTC for `device` (its architecture;
    /// PTX or a cubin as [`cuda_api::Output::choose`] decides for the loaded
    /// NVRTC and driver; the on-disk cache of [`Program`]), and loads it.
    /// `name` is the file name diagnostics use. The text may include
    /// `"warp_launch.h"`; NVRTC gets no other header and no option.
    ///
    /// # Errors
    ///
    /// As for [`CudaModule::declarations`]; [`Error::NotCuda`] for the CPU
    /// device; [`Error::Cuda`] holding [`cuda_api::CudaError::Compile`]
    /// (NVRTC's log as `file:line` diagnostics) when NVRTC refuses the
    /// text, `NvrtcUnavailable` when no NVRTC loads (what to install), or
    /// the driver's failure to load the image.
    pub fn compile(device: impl IntoDevice, name: &str, source: &str) -> Result<CudaModule> {
        let device = device.into_device()?;
        let read = read_text(source, name, Weaken::Nothing).map_err(crate::error::src_err)?;
        let ctx = device.context()?;
        // The reader's re-emission when the text lexes: exactly the tokens
        // that were proven, line for line. A text that does not lex has no
        // proven kernel, and compiles as written.
        let text = read.emitted.as_deref().unwrap_or(source);
        let compiled = Program::new(name, text)
            .header("warp_launch.h", WARP_LAUNCH_H)
            .for_device(ctx.device())?
            .compile()?;
        let warning = first_warning(compiled.log(), name);
        let specs = specs_of(
            read.kernels,
            name,
            warning.as_ref().map(|(l, w)| (*l, w.as_str())),
        )?;
        Ok(CudaModule {
            name: name.to_string(),
            specs,
            library: compiled.load_library()?,
            cache: Some(compiled.cache()),
            image: None,
        })
    }

    /// A module compiled into the program by a build step (see
    /// [`EmbeddedCudaModule`], which `warp_build::CudaBuild` writes for
    /// every `.cu` file that includes `warp_launch.h`): the declarations
    /// are read from the embedded text as [`CudaModule::compile`] reads
    /// them, with the first warning NVRTC gave at build time, and the image
    /// `device` runs is chosen from the embedded ones
    /// ([`cuda_api::ImageSet::load`]: exact cubin, same major lower minor,
    /// else PTX) and loaded. Safe: the text and the images were paired once,
    /// by the `unsafe` [`EmbeddedCudaModule::new`].
    ///
    /// # Errors
    ///
    /// As for [`CudaModule::declarations`]; [`Error::NotCuda`] for the CPU
    /// device; [`Error::Cuda`] holding [`cuda_api::CudaError::NoImage`]
    /// (each image and why it does not run) when no image fits the device,
    /// or the driver's failure to load the one chosen.
    pub fn from_embedded(
        module: &EmbeddedCudaModule,
        device: impl IntoDevice,
    ) -> Result<CudaModule> {
        let device = device.into_device()?;
        let name = module.name();
        let read =
            read_text(module.source(), name, Weaken::Nothing).map_err(crate::error::src_err)?;
        let specs = specs_of(read.kernels, name, module.warning())?;
        let ctx = device.context()?;
        let (library, image) = module.images().load(ctx.device())?;
        Ok(CudaModule {
            name: name.to_string(),
            specs,
            library,
            cache: None,
            image: Some(image),
        })
    }

    /// The file name of the embedded image [`CudaModule::from_embedded`]
    /// chose for the device (`reduce.sm_90.cubin`, `reduce.compute_80.ptx`);
    /// `None` for the other constructors.
    pub fn image(&self) -> Option<&'static str> {
        self.image
    }

    /// The declarations read from `source`, paired with `image` (PTX,
    /// cubin or fatbin) compiled elsewhere, e.g. by nvcc at build time.
    ///
    /// # Safety
    ///
    /// `image` must be `source` compiled with this crate's `warp_launch.h`
    /// and no option or header that changes what the text means (no `-D`,
    /// no `-include`, no other `warp_launch.h`): the rules are read from the
    /// text and hold only for code compiled from exactly it.
    ///
    /// # Errors
    ///
    /// As for [`CudaModule::declarations`]; [`Error::Cuda`] when the driver
    /// refuses the image.
    pub unsafe fn from_image(name: &str, source: &str, image: &[u8]) -> Result<CudaModule> {
        let specs = CudaModule::declarations(name, source)?;
        Ok(CudaModule {
            name: name.to_string(),
            specs,
            library: Library::from_image(image)?,
            cache: None,
            image: None,
        })
    }

    /// The kernel `name`, declared from the text and checked against the
    /// driver's parameter layout.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchKernel`] naming the kernels the text has;
    /// [`Error::Cuda`] when the image has no such function or its
    /// parameter layout differs from the text's.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let Some(spec) = self.specs.iter().find(|s| s.name() == name) else {
            return Err(Error::NoSuchKernel {
                module: format!("CUDA C module '{}'", self.name),
                kernel: name.to_string(),
                known: self.specs.iter().map(|s| s.name().to_string()).collect(),
            });
        };
        // SAFETY: the declaration (types and rules) was read from the text
        // that `compile` gave NVRTC with this crate's header and no option,
        // or that the caller of the unsafe `from_image` vouched the image
        // was compiled from.
        unsafe { spec.clone().load_cuda(&self.library, name, None) }
    }

    /// The declarations, in the text's order.
    pub fn specs(&self) -> &[KernelSpec] {
        &self.specs
    }

    /// Whether [`CudaModule::compile`] found the image in the NVRTC cache
    /// ([`CacheOutcome::Hit`]) or compiled it; `None` for
    /// [`CudaModule::from_image`].
    pub fn cache(&self) -> Option<CacheOutcome> {
        self.cache
    }

    /// The module's name (the file name its messages use).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The declarations of `source` as read with the refusal `weaken` names
/// turned off (`Weaken::Nothing` for [`CudaModule::declarations`]; the
/// others only for the differential fuzzer's own test).
pub(crate) fn declarations_weakened(
    source: &str,
    name: &str,
    weaken: Weaken,
) -> Result<Vec<KernelSpec>> {
    let read = read_text(source, name, weaken).map_err(crate::error::src_err)?;
    read.kernels.iter().map(|k| spec_of(k, name)).collect()
}

/// The first warning in an NVRTC log (`name(LINE): warning #N-D: text`):
/// its line and text.
fn first_warning(log: &str, name: &str) -> Option<(usize, String)> {
    log.lines().find_map(|l| {
        let (at, rest) = l.split_once(": warning")?;
        let line = at
            .strip_prefix(name)
            .and_then(|r| r.strip_prefix('('))
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        Some((line, format!("warning{}", rest.trim_end())))
    })
}

/// The declarations of `kernels` read from file `name`; when NVRTC warned
/// about the text (`warning`: its line and text), no kernel of it counts
/// as proven.
fn specs_of(
    mut kernels: Vec<CudaCKernel>,
    name: &str,
    warning: Option<(usize, &str)>,
) -> Result<Vec<KernelSpec>> {
    if let Some((line, warning)) = warning {
        for k in &mut kernels {
            if matches!(k.accesses, Accesses::Checked(_)) {
                k.accesses = Accesses::Unproven(Unproven {
                    param: String::new(),
                    location: format!("{name}:{line}"),
                    reason: format!(
                        "NVRTC warns about the text ({warning}); a proven kernel compiles without warnings"
                    ),
                });
            }
        }
    }
    kernels.iter().map(|k| spec_of(k, name)).collect()
}

/// The declaration of one hand-written kernel.
fn spec_of(k: &CudaCKernel, file: &str) -> Result<KernelSpec> {
    let err = |line: usize, message: String| Error::Source {
        file: file.to_string(),
        line,
        message,
    };
    let Some(kernel_dim) = k.kernel_dim else {
        return Err(err(
            k.line,
            format!(
                "kernel '{}' does not start with a wl::launch_bounds_t<N> parameter (N from 1 to 4)",
                k.name
            ),
        ));
    };
    let mut spec = KernelSpec::new(&k.name, kernel_dim).grid_stride(!k.lean);
    for p in k.params.iter().skip(1) {
        let kind = param_kind(&p.cpp_type, k.ndims.get(&p.name).copied()).ok_or_else(|| {
            err(
                p.line,
                format!(
                    "parameter '{}' of kernel '{}' has type '{}': read are wl::array_t<T> and Warp's scalar, vector and matrix types (wl::float32, float, wl::vec3f, ...)",
                    p.name, k.name, p.cpp_type
                ),
            )
        })?;
        spec = spec.param(&p.name, kind);
    }
    let accesses = match &k.accesses {
        Accesses::Unproven(u) => Accesses::Unproven(Unproven {
            param: u.param.clone(),
            location: u.location.clone(),
            reason: u.reason.clone(),
        }),
        checked => checked.clone(),
    };
    Ok(spec.with_accesses(accesses, Accesses::default()))
}

/// A parameter's kind from its spelled type (`wl::` read as Warp's `wp::`,
/// C's fixed-size integer spellings as their Warp scalars).
fn param_kind(cpp: &str, ndim: Option<u8>) -> Option<ParamKind> {
    if let Some(elem) = array_element(cpp) {
        let dtype = dtype_of(elem)?;
        return Some(ParamKind::Array { dtype, ndim });
    }
    dtype_of(cpp).map(ParamKind::Value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::{AxisIndex, Pass};

    /// Kernels in the subset the reader proves: one of each index form.
    const GOOD: &str = r#"
#include "warp_launch.h"

// a[i, j] *= s (grid-stride).
extern "C" __global__ void scale2d(wl::launch_bounds_t<2> dim, wl::array_t<wl::float32> a, wl::float32 s) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        wl::index(a, c.i, c.j) *= s;
    }
}

// out[i, j, k, l] = linear index, reading dim.shape.
extern "C" __global__ void fill4d(wl::launch_bounds_t<4> dim, wl::array_t<int> out) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        int lin = ((c.i * int(dim.shape[1]) + c.j) * int(dim.shape[2]) + c.k) * int(dim.shape[3]) + c.l;
        wl::index(out, c.i, c.j, c.k, c.l) = lin;
    }
}

// v[i] += d (lean).
extern "C" __global__ void lean_add(wl::launch_bounds_t<1> dim, wl::array_t<float> v, float d) {
    size_t idx = wl::lean_index();
    if (idx >= dim.size) return;
    wl::coord_t c = wl::coord(idx, dim);
    wl::index(v, c.i) += d;
}

// out[0] = sum(x): work items, blocks, a constant, a shared scalar.
extern "C" __global__ void grid_sum(wl::launch_bounds_t<1> dim, wl::array_t<float> x,
                                    wl::array_t<float> partial, wl::array_t<float> out) {
    __shared__ float block_sum;
    if (threadIdx.x == 0) block_sum = 0.0f;
    __syncthreads();
    float mine = 0.0f;
    WL_GRID_STRIDE_LOOP(idx, dim) { mine += wl::index(x, int(idx)); }
    atomicAdd(&block_sum, mine);
    __syncthreads();
    if (threadIdx.x == 0) wl::index(partial, int(blockIdx.x)) = block_sum;
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        atomicAdd(wl::address(out, 0), wl::index(partial, 0) * 0.0f);
        wl::index(out, -1) = fmaxf(wl::index(out, 0), 0.0f);
    }
}
"#;

    #[test]
    fn the_shipped_header_is_the_one_build_steps_compile_with() {
        // Both files are written by `cargo xtask codegen` from one spec; a
        // hand edit of either would make a build-time compile and a
        // run-time one see different headers.
        assert_eq!(include_str!("../include/warp_launch.h"), WARP_LAUNCH_H);
    }

    fn specs(text: &str) -> Vec<KernelSpec> {
        CudaModule::declarations("k.cu", text).unwrap()
    }

    fn rules(spec: &KernelSpec) -> Vec<(String, Vec<AxisIndex>)> {
        match spec.accesses(Pass::Forward) {
            Accesses::Checked(list) => list
                .iter()
                .map(|a| (a.param.clone(), a.indices.clone()))
                .collect(),
            Accesses::Unproven(u) => {
                panic!("{}: unproven at {}: {}", spec.name(), u.location, u.reason)
            }
        }
    }

    fn r(p: &str, i: &[AxisIndex]) -> (String, Vec<AxisIndex>) {
        (p.to_string(), i.to_vec())
    }

    #[test]
    fn the_subset_becomes_rules_and_declarations() {
        use AxisIndex::{Block, Constant, Thread, WorkItem};
        let s = specs(GOOD);
        let names: Vec<&str> = s.iter().map(KernelSpec::name).collect();
        assert_eq!(names, ["scale2d", "fill4d", "lean_add", "grid_sum"]);
        assert_eq!(rules(&s[0]), [r("a", &[Thread(0), Thread(1)])]);
        assert_eq!(
            rules(&s[1]),
            [r("out", &[Thread(0), Thread(1), Thread(2), Thread(3)])]
        );
        assert_eq!(rules(&s[2]), [r("v", &[Thread(0)])]);
        assert_eq!(
            rules(&s[3]),
            [
                r("x", &[WorkItem]),
                r("partial", &[Block]),
                r("out", &[Constant(0)]),
                r("partial", &[Constant(0)]),
                r("out", &[Constant(-1)]),
                r("out", &[Constant(0)]),
            ]
        );
        // Kinds, dimensions (from the indices) and the loop shape.
        let kinds: Vec<String> = s[0]
            .params()
            .iter()
            .map(|p| format!("{} {}", p.name, p.kind.describe()))
            .collect();
        assert_eq!(
            kinds,
            [
                "a an array of float32 with 2 dimension(s)",
                "s a float32 value"
            ]
        );
        assert!(s[0].is_grid_stride());
        assert!(!s[2].is_grid_stride(), "lean_index makes a lean kernel");
        assert_eq!(
            s[1].params()[0].kind.describe(),
            "an array of int32 with 4 dimension(s)"
        );
    }

    /// A kernel with `body` in a 1-D grid-stride loop over `a` (float, 1-D),
    /// `b` (int, 1-D) and a value `n`.
    fn kernel(body: &str) -> String {
        format!(
            "#include \"warp_launch.h\"\nextern \"C\" __global__ void k(wl::launch_bounds_t<1> dim, wl::array_t<float> a, wl::array_t<int> b, int n) {{\n    WL_GRID_STRIDE_LOOP(idx, dim) {{\n        wl::coord_t c = wl::coord(idx, dim);\n        {body}\n    }}\n}}\n"
        )
    }

    /// The reason and `file:line` of a refused body.
    fn refusal(text: &str) -> (String, String) {
        let s = specs(text);
        match s[0].accesses(Pass::Forward) {
            Accesses::Unproven(u) => (u.location.clone(), u.reason.clone()),
            Accesses::Checked(list) => panic!("not refused: {list:?}\n{text}"),
        }
    }

    #[test]
    fn every_way_out_of_the_subset_is_refused_with_its_line() {
        let cases: &[(&str, &str)] = &[
            ("wl::index(a, c.i + 1) = 0.0f;", "index `c.i+1` of `a`"),
            ("wl::index(a, n) = 0.0f;", "index `n` of `a`"),
            (
                "wl::index(a, wl::index(b, c.i)) = 1.0f;",
                "index `wl::index(b,c.i)`",
            ),
            ("a.data[c.i] = 0.0f;", "array `a` used other than"),
            (
                "wl::array_t<float> v = a; wl::index(v, c.i) = 0.0f;",
                "the type `wl::array_t` of a local",
            ),
            (
                "float* p = wl::address(a, c.i); *p = 1.0f;",
                "`*` after the type `float`",
            ),
            (
                "float& r = wl::index(a, c.i); r = 1.0f;",
                "`&` after the type `float`",
            ),
            ("float q = 0.0f; q = *&wl::index(a, c.i);", "a unary `*`"),
            ("auto p = wl::address(a, c.i);", "`wl::address`"),
            (
                "float t[4]; t[c.i] = 1.0f;",
                "`[` after the declaration of `t`",
            ),
            (
                "idx += 1000; wl::index(a, int(idx)) = 0.0f;",
                "the assignment to `idx`",
            ),
            (
                "c.i = 1000; wl::index(a, c.i) = 0.0f;",
                "the assignment to `c.i`",
            ),
            (
                "wl::coord_t d = c; wl::index(a, d.i) = 0.0f;",
                "`c` where the grammar has `wl`",
            ),
            ("dim.size = 1u << 30;", "the assignment to `dim.size`"),
            (
                "uint3 blockIdx = threadIdx; wl::index(a, blockIdx.x) = 0.0f;",
                "`uint3` is not a name in scope",
            ),
            (
                "int blockIdx = 5; wl::index(a, blockIdx.x) = 0.0f;",
                "`blockIdx` is defined again: it is a CUDA built-in variable",
            ),
            ("(c.i) += n;", "the assignment to `(c.i)`"),
            ("(n > 0 ? n : n) = 5;", "the assignment to `(n>0?n:n)`"),
            ("auto&& r = c.i; r += n;", "`&&` after the type `auto`"),
            ("int q = 0, idx = n;", "`,` after the declaration of `q`"),
            ("int q = 0; { int q = 1; }", "`q` is defined again"),
            (
                "(sqrtf)(2.0f);",
                "a built-in function is called only as `sqrtf(...)`",
            ),
            ("switch (n) { case 0: break; }", "`switch`"),
            ("goto out;", "`goto`"),
            ("int q = 0; q++, q++;", "the comma operator"),
            ("int(q) = 5;", "`(` after the type `int`"),
            (
                "float q = n ? 1.0f : 2.0f; q = ::wl::index(a, c.i);",
                "`::` where the grammar has an expression",
            ),
            ("/* x */ #define Q 1", "a `#` after other text on its line"),
            (
                "int q = 1; /* a *\\\n/ q = 2; /* b */",
                "a backslash in a comment",
            ),
            ("int q = 0x1p3;", "the number `0x1p3`"),
            ("int q = 1'000;", "`'`"),
            ("int q = 010;", "the number `010`"),
            (
                "wl::index(a, 2147483648) = 0.0f;",
                "index `2147483648` of `a`",
            ),
            (
                "wl::index(a, wl::lean_index()) = 0.0f;",
                "index `wl::lean_index()` of `a`",
            ),
            ("int q = ??-0;", "`??`"),
            (
                "wl::index(a, unsigned(-2)) = 0.0f;",
                "index `unsigned(-2)` of `a`",
            ),
            (
                "wl::index(a, (size_t)-1) = 0.0f;",
                "index `(size_t)-1` of `a`",
            ),
            (
                "wl::vec3f v; auto w = v; n = int(w.c[1]);",
                "the member `w.c`",
            ),
            (
                "size_t idx = 5000; wl::index(a, int(idx)) = 0.0f;",
                "`idx` is defined again",
            ),
            (
                "{ int idx = 5000; wl::index(a, int(idx)) = 0.0f; }",
                "`idx` is defined again",
            ),
            ("a.x = 1;", "array `a` used other than"),
            (
                "int x = dim.shape[1];",
                "`dim.shape[1]` is past the launch's 1 dimension(s)",
            ),
            ("asm(\"trap;\");", "`asm`"),
            ("printf(\"%d\", n);", "call of `printf`"),
            ("n = sizeof(\"abcdef\");", "the string \"abcdef\""),
            ("__ldg(&n);", "`__ldg`"),
            ("my_helper(a);", "call of `my_helper`"),
            ("atomicAdd(&n, 1);", "`atomicAdd` on something other than"),
            ("atomicAdd(wl::address(a, n), 1.0f);", "index `n` of `a`"),
            ("int q = n; q = q->x;", "the member `q->x`"),
            ("k<<<1, 1>>>(dim, a, b, n);", "`k` is not a name in scope"),
            ("wl::index(a, c.i, c.j, c.k, c.l, 0) = 0.0f;", "5 indices"),
            ("float t<:4:>; t<:c.i:> = 1.0f;", "the digraph `<:`"),
            ("int q = n %: 2;", "the digraph `%:`"),
            ("n = n\\u0030;", "a backslash"),
            (
                "wl::index(a\u{200b}, c.i) = 0.0f;",
                "the non-ASCII character",
            ),
            ("float \u{e9} = 0.0f;", "non-ASCII"),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter_map(|(body, expect)| {
                let (location, reason) = refusal(&kernel(body));
                (!reason.contains(expect) || location != "k.cu:5")
                    .then(|| format!("{body}\n  {location}: {reason}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn texts_with_anything_but_kernels_are_refused_whole() {
        let helper = kernel("wl::index(a, c.i) = 0.0f;").replace(
            "\nextern",
            "\n__device__ float twice(float x) { return 2.0f * x; }\nextern",
        );
        let (location, reason) = refusal(&helper);
        assert_eq!(location, "k.cu:2");
        assert!(reason.contains("`__device__` at top level"), "{reason}");
        let mac = format!("#define c d\n{}", kernel("wl::index(a, c.i) = 0.0f;"));
        let (location, reason) = refusal(&mac);
        assert_eq!(location, "k.cu:1");
        assert!(
            reason.contains("preprocessor line `#define c d`"),
            "{reason}"
        );
        let inc = kernel("wl::index(a, c.i) = 0.0f;").replace("\"warp_launch.h\"", "\"other.h\"");
        assert!(refusal(&inc).1.contains("#include \"other.h\""));
        let cg = format!(
            "#include <cooperative_groups.h>\n{}",
            kernel("wl::index(a, c.i) = 0.0f;")
        );
        assert!(refusal(&cg).1.contains("#include <cooperative_groups.h>"));
    }

    #[test]
    fn const_parameters_and_unroll_pragmas_are_read() {
        let text = "#include \"warp_launch.h\"\nextern \"C\" __global__ void k(wl::launch_bounds_t<1> dim, const wl::array_t<float> a, const float s) {\n    WL_GRID_STRIDE_LOOP(idx, dim) {\n        wl::coord_t c = wl::coord(idx, dim);\n#pragma unroll 4\n        for (int t = 0; t < 4; ++t) { wl::index(a, c.i) *= s; }\n    }\n}\n";
        let s = specs(text);
        assert_eq!(rules(&s[0]), [r("a", &[AxisIndex::Thread(0)])]);
        assert_eq!(
            s[0].params()[1].kind.describe(),
            "a float32 value",
            "const float is a value"
        );
        let ints = text.replace("const float s", "long long s");
        assert_eq!(
            specs(&ints)[0].params()[1].kind.describe(),
            "an int64 value"
        );
        let other = text.replace("#pragma unroll 4", "#pragma unroll x");
        assert!(refusal(&other).1.contains("#pragma unroll x"));
    }

    #[test]
    fn constant_components_of_vectors_and_matrices_are_read() {
        let text = "#include \"warp_launch.h\"\nextern \"C\" __global__ void k(wl::launch_bounds_t<1> dim, wl::array_t<wl::vec3f> v, wl::array_t<wl::mat33f> m, wl::vec3f d) {\n    WL_GRID_STRIDE_LOOP(idx, dim) {\n        wl::coord_t c = wl::coord(idx, dim);\n        d.c[1] = 0.0f;\n        wl::index(v, c.i).c[2] += d.c[0] * wl::index(m, c.i).data[2][1];\n    }\n}\n";
        let s = specs(text);
        assert_eq!(
            rules(&s[0]),
            [
                r("v", &[AxisIndex::Thread(0)]),
                r("m", &[AxisIndex::Thread(0)])
            ]
        );
        for (bad, why) in [
            ("c[2] +=", "c[3] +="),
            ("data[2][1]", "data[3][1]"),
            ("d.c[0]", "d.c[3]"),
            ("d.c[0]", "d.c[c.i]"),
        ] {
            let t = text.replace(bad, why);
            assert!(
                ["below its extent", "where the grammar has an integer"]
                    .iter()
                    .any(|w| refusal(&t).1.contains(w)),
                "{why}: {:?}",
                refusal(&t)
            );
        }
    }

    /// Each form the earlier reader proved soundly stays in the grammar:
    /// both include spellings, `#pragma once`, `__launch_bounds__` before
    /// and after `void`, a declaration without initialiser, a `__shared__`
    /// scalar and an atomic on it, writes to constant components of a
    /// by-value vector and matrix, `const` parameters, `#pragma unroll`,
    /// CRLF line ends and non-ASCII text in comments.
    #[test]
    fn the_sound_forms_of_the_earlier_reader_are_in_the_grammar() {
        let text = "#pragma once\r\n#include <warp_launch.h>\r\n// d\u{e9}j\u{e0} vu: a comment may hold any character\r\nextern \"C\" __global__ __launch_bounds__(256) void k(const wl::launch_bounds_t<1> dim, wl::array_t<float> a, wl::vec3f v, wl::mat22f m, const int n) {\r\n    __shared__ float s;\r\n    float t;\r\n    if (threadIdx.x == 0) s = 0.0f;\r\n    __syncthreads();\r\n    WL_GRID_STRIDE_LOOP(idx, dim) {\r\n        wl::coord_t c = wl::coord(idx, dim);\r\n        v.c[2] = 1.0f; m.data[1][0] = 2.0f;\r\n        t = v.c[2] + m.data[1][0] + float(n);\r\n#pragma unroll\r\n        for (int r = 0; r < 2; ++r) { atomicAdd(&s, t); }\r\n        wl::index(a, c.i) = t;\r\n    }\r\n}\r\nextern \"C\" __global__ void __launch_bounds__(128, 2) k2(wl::launch_bounds_t<1> dim, wl::array_t<float> a) {\r\n    WL_GRID_STRIDE_LOOP(w, dim) { wl::index(a, int(w)) = 1.0f; }\r\n}\r\n";
        let s = specs(text);
        assert_eq!(rules(&s[0]), [r("a", &[AxisIndex::Thread(0)])]);
        assert_eq!(rules(&s[1]), [r("a", &[AxisIndex::WorkItem])]);
        let quoted = text.replace("<warp_launch.h>", "\"warp_launch.h\"");
        assert_eq!(rules(&specs(&quoted)[0]).len(), 1);
        // The re-emission NVRTC compiles: no comment, line for line.
        let read = crate::fuzzing::cuda_c_read(text, crate::fuzzing::Weaken::Nothing).unwrap();
        let emitted = read.emitted.unwrap();
        assert_eq!(emitted.lines().count(), text.lines().count());
        assert!(
            !emitted.contains("vu") && !emitted.contains('\r'),
            "{emitted}"
        );
        assert_eq!(
            emitted.lines().nth(13).unwrap(),
            "for ( int r = 0 ; r < 2 ; ++ r ) { atomicAdd ( & s , t ) ; }"
        );
        // A lone carriage return and a byte-order mark are refused.
        assert!(
            refusal(&text.replacen("\r\n", "\r", 3))
                .1
                .contains("carriage return")
        );
        assert!(
            refusal(&format!("\u{feff}{text}"))
                .1
                .contains("byte-order mark")
        );
        // `#pragma unroll` before anything but `for`, and `#pragma once` in a body.
        assert!(
            refusal(&text.replace(
                "#pragma unroll\r\n        for",
                "#pragma unroll\r\n        while (false) {}\r\n        for"
            ))
            .1
            .contains("a `for` loop after `#pragma unroll`")
        );
    }

    #[test]
    fn a_kernel_written_in_the_subset_is_checked() {
        let ok = specs(&kernel(
            "wl::index(a, c.i) = (float(n) + 1.0f) * sqrtf(2.0f); atomicAdd(wl::address(b, 0), n & 1); wl::index(a, (int)-1) = (float)(unsigned long)n;",
        ));
        assert_eq!(
            rules(&ok[0]),
            [
                r("a", &[AxisIndex::Thread(0)]),
                r("b", &[AxisIndex::Constant(0)]),
                r("a", &[AxisIndex::Constant(-1)])
            ]
        );
        // Sequential loops may reuse the index and coordinate names.
        let two = kernel(
            "wl::index(a, c.i) = 1.0f; } WL_GRID_STRIDE_LOOP(idx, dim) { wl::coord_t c = wl::coord(idx, dim); wl::index(b, c.i) = 2;",
        );
        assert_eq!(rules(&specs(&two)[0]).len(), 2);
    }

    #[test]
    fn parameter_types_outside_the_abi_are_errors_naming_the_line() {
        let bad = "#include \"warp_launch.h\"\nextern \"C\" __global__ void k(wl::launch_bounds_t<1> dim,\n    float* p) {}\n";
        let e = CudaModule::declarations("k.cu", bad)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("k.cu:3") && e.contains("parameter 'p' of kernel 'k' has type 'float*'"),
            "{e}"
        );
        let no_bounds = "extern \"C\" __global__ void k(wl::array_t<float> a) {}\n";
        let e = CudaModule::declarations("k.cu", no_bounds)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not start with a wl::launch_bounds_t<N>"),
            "{e}"
        );
    }

    /// The header and the subset compile with a real NVRTC, where
    /// `CUDA_SYS_NVRTC_LIBRARY` names one (CI sets it: `cargo xtask test`).
    #[test]
    fn the_subset_compiles_with_nvrtc_against_this_header() {
        if std::env::var_os("CUDA_SYS_NVRTC_LIBRARY").is_none() {
            eprintln!("skipped: CUDA_SYS_NVRTC_LIBRARY is not set");
            return;
        }
        let emitted = read_text(GOOD, "good.cu", Weaken::Nothing)
            .unwrap()
            .emitted
            .expect("GOOD lexes");
        let compiled = Program::new("good.cu", emitted)
            .header("warp_launch.h", WARP_LAUNCH_H)
            .arch(cuda_api::ComputeCapability::new(9, 0))
            .cache(false)
            .compile()
            .unwrap_or_else(|e| panic!("{e}"));
        // What `CudaModule::compile` gives NVRTC compiles without a warning
        // (a warning would make the kernels unproven).
        assert_eq!(
            first_warning(compiled.log(), "good.cu"),
            None,
            "{}",
            compiled.log()
        );
        let ptx = compiled.ptx().expect("PTX for an arch without a driver");
        for k in ["scale2d", "fill4d", "lean_add", "grid_sum"] {
            assert!(ptx.contains(&format!(".entry {k}(")), "{k} missing");
        }
        // A kernel the grammar proves but NVRTC warns about (a variable set
        // and never read): the warning is found at its line, which makes
        // `compile` call the kernel unproven.
        let warned = kernel("int unused = 0; wl::index(a, c.i) = 1.0f;");
        assert!(matches!(
            specs(&warned)[0].accesses(Pass::Forward),
            Accesses::Checked(_)
        ));
        let emitted = read_text(&warned, "k.cu", Weaken::Nothing)
            .unwrap()
            .emitted
            .unwrap();
        let compiled = Program::new("k.cu", emitted)
            .header("warp_launch.h", WARP_LAUNCH_H)
            .arch(cuda_api::ComputeCapability::new(9, 0))
            .cache(false)
            .compile()
            .unwrap_or_else(|e| panic!("{e}"));
        let (line, warning) =
            first_warning(compiled.log(), "k.cu").unwrap_or_else(|| panic!("{}", compiled.log()));
        assert_eq!(line, 5, "{warning}");
        assert!(warning.contains("unused"), "{warning}");
    }
}
