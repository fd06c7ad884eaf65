//! Entry points for `cargo xtask fuzz` and the fuzz test in `tests/`: each
//! takes arbitrary bytes, returns nothing and never panics. Not part of the
//! API; the names stay stable for the fuzzer.

use crate::launch::Extents;
use crate::signature::{Accesses, AxisIndex, ParamKind, Pass};
use crate::source;

/// Reads bytes as a Warp-generated `.cu` (`source::parse_cu`) and, when
/// that succeeds, declares each forward kernel as `AotModule::load` does
/// (no GPU, no image).
pub fn cu(data: &[u8]) {
    warp_proof::fuzz_cu(data);
}

/// Reads bytes as a Warp `.meta` file (`source::parse_meta`) and asks it
/// for a kernel's shared memory.
pub fn meta(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(m) = source::parse_meta(&text, "fuzz.meta") {
        let _ = m.shared_memory_bytes("k_cuda_kernel_forward");
    }
}

pub use crate::source::cuda_c::Weaken;

/// What the CUDA C reader makes of a text ([`cuda_c_read`]).
#[derive(Clone, Debug)]
pub struct CudaCRead {
    /// The text NVRTC compiles: the reader's re-emission of the tokens it
    /// read (no comments; each token on its own line, so line numbers are
    /// the text's), or `None` when the text does not lex (every kernel is
    /// then unproven and `CudaModule` compiles the text as given).
    pub emitted: Option<String>,
    /// Each kernel's name and verdict: `Ok(())` when proven, else
    /// `Err("file:line: reason")`.
    pub kernels: Vec<(String, Result<(), String>)>,
}

/// Reads `text` (file name `fuzz.cu`) as `CudaModule` does, with the
/// refusal `weaken` names turned off. `Err` when the text does not lex or
/// a kernel's head does not parse (the message `CudaModule` gives).
///
/// # Errors
///
/// The reader's error message.
pub fn cuda_c_read(text: &str, weaken: Weaken) -> Result<CudaCRead, String> {
    let read = crate::source::cuda_c::read_text(text, "fuzz.cu", weaken)
        .map_err(|e| crate::error::src_err(e).to_string())?;
    let kernels = read
        .kernels
        .iter()
        .map(|k| {
            let verdict = match &k.accesses {
                crate::signature::Accesses::Checked(_) => Ok(()),
                crate::signature::Accesses::Unproven(u) => {
                    Err(format!("{}: {}", u.location, u.reason))
                }
            };
            (k.name.clone(), verdict)
        })
        .collect();
    Ok(CudaCRead {
        emitted: read.emitted,
        kernels,
    })
}

/// The grid a checked launch runs ([`cuda_c_accepts`]): what the host
/// build of a kernel must emulate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostLaunch {
    /// Blocks in `x`, `y`, `z` (`gridDim`).
    pub grid: [u32; 3],
    /// Threads per block in `x`, `y`, `z` (`blockDim`).
    pub block: [u32; 3],
    /// `launch_bounds_t<N>::shape` (the first `ndim` entries are used).
    pub shape: [u32; 4],
    /// `N` of `launch_bounds_t<N>`.
    pub ndim: usize,
    /// `launch_bounds_t<N>::size`.
    pub size: usize,
    /// `launch_bounds_t<N>::coord_mult`.
    pub coord_mult: usize,
}

/// Whether the safe launch of `kernel` (read from `text` as by
/// [`cuda_c_read`]) over `dim`, `block_dim` threads a block and at most
/// `max_blocks` blocks (0: no cap) passes every check a launch makes before
/// the driver, on arrays of the given `shapes` (one entry per parameter
/// after the launch bounds: the array's shape, `None` for a value). `Ok`
/// holds the grid it would run.
///
/// # Errors
///
/// The launch's refusal (or the reader's error) as text.
pub fn cuda_c_accepts(
    text: &str,
    weaken: Weaken,
    kernel: &str,
    dim: &[i64],
    block_dim: u32,
    max_blocks: u64,
    shapes: &[Option<Vec<usize>>],
) -> Result<HostLaunch, String> {
    let specs =
        crate::cuda_c::declarations_weakened(text, "fuzz.cu", weaken).map_err(|e| e.to_string())?;
    let spec = specs
        .into_iter()
        .find(|s| s.name() == kernel)
        .ok_or_else(|| format!("no kernel `{kernel}`"))?;
    let k = spec.declare().map_err(|e| e.to_string())?;
    crate::launch::check_host(&k, dim, block_dim, max_blocks, shapes)
        .map(|p| HostLaunch {
            grid: p.grid,
            block: p.block,
            shape: p.bounds.shape,
            ndim: p.bounds.ndim,
            size: p.bounds.size,
            coord_mult: p.bounds.coord_mult,
        })
        .map_err(|e| e.to_string())
}

/// A refusal of the Warp proof turned off, to show the Warp fuzzer catches
/// it ([`WarpProof::read`]; never used outside fuzzing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WarpWeaken {
    /// Everything as the loader does it.
    #[default]
    None,
    /// Every access rule whose first axis is indexed by a thread
    /// coordinate is dropped: a launch no longer checks those arrays'
    /// first axis against its domain (`b[i]` with `dim` past `b`'s extent
    /// passes).
    DropThreadRules,
}

/// A parameter of a Warp kernel as the proof declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WarpParam {
    /// A `wp::array_t<T>`: `T`'s name and size.
    Array {
        /// `T`'s Warp name (`float32`, `vec3f`, ...).
        dtype: String,
        /// `sizeof(T)`.
        size: usize,
    },
    /// A value: its type's name and size.
    Value {
        /// The type's Warp name.
        dtype: String,
        /// Its size in bytes.
        size: usize,
    },
    /// A `wp.struct` value: its C++ name and its fields.
    Struct {
        /// The generated struct name (`Params_1a2b3c4d`).
        name: String,
        /// Each field's name and, for an array, its element size (`None`
        /// for anything else).
        fields: Vec<(String, Option<usize>)>,
    },
}

/// One kernel of a module as the proof reads it ([`WarpProof::kernels`]).
#[derive(Clone, Debug)]
pub struct WarpKernelRead {
    /// The kernel's key (`wp_args_<key>`, `<key>_cpu_kernel_forward`).
    pub key: String,
    /// The coordinates `wp.tid()` returns (`N` of `launch_bounds_t<N>`).
    pub dim: usize,
    /// The forward parameters in order.
    pub params: Vec<(String, WarpParam)>,
    /// The verdict of a safe forward launch on `"cpu"`: `Ok(())` when its
    /// access rules are checked, else `Err("file:line: reason")` (the
    /// source's verdict or the facts' CPU one).
    pub verdict: Result<(), String>,
}

/// An argument of a launch asked of [`WarpProof::accepts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WarpArg {
    /// A value (or anything that is no array or struct).
    Value,
    /// Warp's `None` for an array.
    Null,
    /// An array of this shape.
    Array(Vec<usize>),
    /// A struct value: the shape of each array field by name (`None`: a
    /// null array; a field not named: a null array).
    Struct(Vec<(String, Option<Vec<usize>>)>),
}

/// The domain a checked CPU launch runs ([`WarpProof::accepts`]): Warp's
/// `launch_bounds_t<N>`, whose work items `0..size` the CPU runs in turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarpHostLaunch {
    /// `N`.
    pub ndim: usize,
    /// `shape` (the first `ndim` entries are used).
    pub shape: [u32; 4],
    /// Work items.
    pub size: usize,
    /// `coord_mult`.
    pub coord_mult: usize,
}

struct WarpKernel {
    read: WarpKernelRead,
    kernel: Option<crate::launch::Kernel>,
    cpu_unproven: Option<crate::signature::Unproven>,
}

/// A Warp module's kernels as `AotModule::from_embedded` declares them:
/// the proof of the generated `.cu` (`warp_proof::declarations`), the
/// compile step's facts applied (native code, preambles, the CPU body),
/// with a refusal turned off when `weaken` says so.
pub struct WarpProof {
    kernels: Vec<WarpKernel>,
}

impl WarpProof {
    /// Reads module `module`'s `.cu`, `.meta` and facts (`None`: a module
    /// without facts, vouched for by its loader's caller) as the loader
    /// does.
    ///
    /// # Errors
    ///
    /// The loader's refusal of the module, as text.
    pub fn read(
        module: &str,
        cu: &str,
        meta: &str,
        facts: Option<&str>,
        weaken: WarpWeaken,
    ) -> Result<WarpProof, String> {
        let cu_file = format!("wp_{module}.cu");
        let mut decls = crate::aot::declarations(cu, &cu_file, meta, &format!("wp_{module}.meta"))
            .map_err(|e| e.to_string())?;
        let facts_file = crate::facts::file_name(module);
        let cpu =
            crate::aot::apply_facts(module, &mut decls, facts.map(|f| (f, facts_file.as_str())))
                .map_err(|e| e.to_string())?;
        let mut kernels = Vec::new();
        for d in decls {
            let mut spec = d.spec;
            if weaken == WarpWeaken::DropThreadRules
                && let Accesses::Checked(rules) = spec.accesses(Pass::Forward)
            {
                let kept: Vec<_> = rules
                    .iter()
                    .filter(|r| !matches!(r.indices.first(), Some(AxisIndex::Thread(_))))
                    .cloned()
                    .collect();
                let backward = spec.accesses(Pass::Adjoint).clone();
                spec = spec.with_accesses(Accesses::Checked(kept), backward);
            }
            let cpu_unproven = cpu.get(&d.key).cloned();
            let verdict = match (spec.accesses(Pass::Forward), &cpu_unproven) {
                (Accesses::Unproven(u), _) | (_, Some(u)) => {
                    Err(format!("{}: {}", u.location, u.reason))
                }
                (Accesses::Checked(_), None) => Ok(()),
            };
            let params = spec
                .params()
                .iter()
                .map(|p| (p.name.clone(), warp_param(&p.kind)))
                .collect();
            let read = WarpKernelRead {
                key: d.key,
                dim: spec.kernel_dim(),
                params,
                verdict,
            };
            kernels.push(WarpKernel {
                read,
                kernel: spec.declare().ok(),
                cpu_unproven,
            });
        }
        Ok(WarpProof { kernels })
    }

    /// Every forward kernel, in the source's order.
    pub fn kernels(&self) -> impl Iterator<Item = &WarpKernelRead> {
        self.kernels.iter().map(|k| &k.read)
    }

    /// Whether a safe forward launch of kernel `key` on `"cpu"` over `dim`
    /// with `args` (one per parameter) passes every check it makes before
    /// the kernel runs; `Ok` holds the domain it would run.
    ///
    /// # Errors
    ///
    /// The launch's refusal as text (or no such kernel).
    pub fn accepts(
        &self,
        key: &str,
        dim: &[i64],
        args: &[WarpArg],
    ) -> Result<WarpHostLaunch, String> {
        let k = self
            .kernels
            .iter()
            .find(|k| k.read.key == key)
            .ok_or_else(|| format!("no kernel `{key}`"))?;
        let kernel = k
            .kernel
            .as_ref()
            .ok_or_else(|| format!("kernel `{key}` does not declare"))?;
        let bytes: Vec<Option<Vec<u8>>> = kernel
            .params()
            .iter()
            .zip(args)
            .map(|(p, a)| match (&p.kind, a) {
                (ParamKind::Struct(st), WarpArg::Struct(held)) => Some(struct_bytes(st, held)),
                _ => None,
            })
            .collect();
        let extents: Vec<Extents<'_>> = args
            .iter()
            .enumerate()
            .map(|(i, a)| match (a, bytes.get(i).and_then(Option::as_ref)) {
                (WarpArg::Array(s), _) => Extents::Array(s),
                (WarpArg::Null, _) => Extents::Null,
                (WarpArg::Struct(_), Some(b)) => Extents::Struct(b),
                _ => Extents::Other,
            })
            .collect();
        let plan = crate::launch::check_host_cpu(kernel, dim, k.cpu_unproven.as_ref(), &extents)
            .map_err(|e| e.to_string())?;
        Ok(WarpHostLaunch {
            ndim: plan.bounds.ndim,
            shape: plan.bounds.shape,
            size: plan.bounds.size,
            coord_mult: plan.bounds.coord_mult,
        })
    }
}

fn warp_param(kind: &ParamKind) -> WarpParam {
    match kind {
        ParamKind::Array { dtype, .. } => WarpParam::Array {
            dtype: dtype.name.to_string(),
            size: dtype.size,
        },
        ParamKind::Value(d) => WarpParam::Value {
            dtype: d.name.to_string(),
            size: d.size,
        },
        ParamKind::Struct(s) => WarpParam::Struct {
            name: s.name.clone(),
            fields: s
                .fields
                .iter()
                .map(|f| {
                    let elem = match &f.kind {
                        ParamKind::Array { dtype, .. } => Some(dtype.size),
                        _ => None,
                    };
                    (f.name.clone(), elem)
                })
                .collect(),
        },
        other => WarpParam::Value {
            dtype: other.type_name(),
            size: other.size(),
        },
    }
}

/// A struct value's bytes as a launch passes them: each named array field
/// an `array_t` of that shape (packed strides, a non-null `data` that is
/// never read), every other byte zero.
fn struct_bytes(
    st: &crate::signature::StructType,
    held: &[(String, Option<Vec<usize>>)],
) -> Vec<u8> {
    use std::mem::offset_of;
    let mut bytes = vec![0u8; st.size];
    for f in &st.fields {
        let (ParamKind::Array { dtype, .. }, Some((_, Some(shape)))) =
            (&f.kind, held.iter().find(|(n, _)| *n == f.name))
        else {
            continue;
        };
        let mut put = |at: usize, b: &[u8]| {
            if let Some(slot) = f
                .offset
                .checked_add(at)
                .and_then(|s| bytes.get_mut(s..s.checked_add(b.len())?))
            {
                slot.copy_from_slice(b);
            }
        };
        put(
            offset_of!(crate::abi::ArrayT, data),
            &0x1000u64.to_le_bytes(),
        );
        let ndim = shape.len().min(4);
        put(
            offset_of!(crate::abi::ArrayT, ndim),
            &(ndim as u16).to_le_bytes(),
        );
        let mut stride = dtype.size;
        for k in (0..ndim).rev() {
            let e = i32::try_from(shape[k]).unwrap_or(i32::MAX);
            put(
                offset_of!(crate::abi::ArrayT, shape) + 4 * k,
                &e.to_le_bytes(),
            );
            let s = i32::try_from(stride).unwrap_or(i32::MAX);
            put(
                offset_of!(crate::abi::ArrayT, strides) + 4 * k,
                &s.to_le_bytes(),
            );
            stride = stride.saturating_mul(shape[k]);
        }
    }
    bytes
}
