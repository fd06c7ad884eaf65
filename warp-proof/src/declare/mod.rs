//! Declaring the kernels of a module Warp compiled ahead of time, from its
//! generated `wp_<module>.cu` and `wp_<module>.meta`: each forward kernel's
//! key, its CUDA functions, its parameters resolved to arrays, values and
//! structs, and the access rules of its forward and backward bodies.
//!
//! warp-launch's `AotModule::load` turns each [`Declared`] into a kernel;
//! the launcher generator ([`Launchers`](crate::Launchers), feature
//! `launchers`) renders the same declarations as typed Rust, so a launcher
//! and a load never disagree about a kernel.

use crate::hash::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::signature::{Accesses, KernelParam, ParamKind, Pass, Unproven};
use crate::source::{
    self, Direction, KernelBody, SourceError, SourceKernel, UnmodelledError, parse_cu, parse_meta,
};

mod carried;
mod context;
mod hints;
mod version;

pub use carried::{CARRIED_FORMAT, PROVER_ID, carried_declarations, carry_declarations};
pub(crate) use context::ModuleContext;
pub(crate) use hints::ndim_hints;
pub use version::WARP_VERSION;

/// One kernel's declaration as read from Warp's source: what warp-launch's
/// `KernelSpec` holds, without any GPU code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KernelDecl {
    /// The kernel's key (its Python name).
    pub name: String,
    /// The number of coordinates `wp.tid()` returns (the `N` of
    /// `launch_bounds_t<N>`).
    pub kernel_dim: usize,
    /// The parameters after the launch bounds, in order.
    pub params: Vec<KernelParam>,
    /// Grid-stride (`true`) or lean (one thread per index, no loop).
    pub grid_stride: bool,
    /// Dynamic shared memory of the forward and backward functions, in bytes.
    pub shared_mem: (u32, u32),
    /// The block size the module was compiled for (`WP_TILE_BLOCK_DIM`).
    pub block_dim: Option<u32>,
    /// The access facts of the forward function.
    pub forward: Accesses,
    /// The access facts of the backward function.
    pub backward: Accesses,
}

impl KernelDecl {
    /// The access facts of the forward or backward function.
    pub fn accesses(&self, pass: Pass) -> &Accesses {
        match pass {
            Pass::Forward => &self.forward,
            _ => &self.backward,
        }
    }
}

/// One forward kernel of a module: its key, the names of its CUDA
/// functions and its declaration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Declared {
    /// The kernel's key.
    pub key: String,
    /// The forward function's name (`<key>_cuda_kernel_forward`).
    pub forward: String,
    /// The backward function's name, when the module has one.
    pub backward: Option<String>,
    /// The kernel's declaration.
    pub decl: KernelDecl,
    /// Whether the forward body uses atomics (`wp::atomic_*`).
    pub atomics: bool,
}

/// Why a module's kernels cannot be declared.
#[derive(Debug)]
#[non_exhaustive]
pub enum DeclareError {
    /// The source or metadata is not what Warp 1.19.0 writes, or a kernel
    /// or type is not one the reader knows (the error names file and line).
    Source(SourceError),
    /// The module was compiled in a mode a launch does not model.
    Unmodelled(UnmodelledError),
}

impl fmt::Display for DeclareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeclareError::Source(e) => write!(f, "{e}"),
            DeclareError::Unmodelled(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DeclareError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DeclareError::Source(e) => Some(e),
            DeclareError::Unmodelled(e) => Some(e),
        }
    }
}

impl From<SourceError> for DeclareError {
    fn from(e: SourceError) -> Self {
        DeclareError::Source(e)
    }
}

impl From<UnmodelledError> for DeclareError {
    fn from(e: UnmodelledError) -> Self {
        DeclareError::Unmodelled(e)
    }
}

/// Every forward kernel of a module, declared: the Warp version check (the
/// module header and the `.meta` keys must be Warp 1.19.0's), the parsed
/// source and metadata, the compile modes a launch does not model refused.
/// Linear in the size of the files.
///
/// # Errors
///
/// [`DeclareError::Source`] when the files are not what Warp 1.19.0
/// writes, or a parameter's type is not one the reader knows;
/// [`DeclareError::Unmodelled`] when the module was compiled in a mode a
/// launch does not model. Each names the file and line.
pub fn declarations(
    text: &str,
    cu_file: &str,
    meta_text: &str,
    meta_file: &str,
) -> Result<Vec<Declared>, DeclareError> {
    version::check_warp_version(text, cu_file)?;
    let src = parse_cu(text, cu_file)?;
    source::refuse_unmodelled(text, &src, cu_file)?;
    let meta = parse_meta(meta_text, meta_file)?;
    version::check_meta_version(&meta, meta_file)?;
    let ctx = ModuleContext::new(text, &src);
    let backwards = backward_kernels(&src);
    let forward: Vec<&SourceKernel> = forward_kernels(&src).collect();
    // Each kernel on its own (spread over the cores); the first error in
    // source order is the one reported, as on one thread.
    let declared = crate::parallel::map(&forward, 8, |k| {
        declare_kernel(k, backwards.get(k.key()).copied(), &ctx, cu_file)
    });
    let mut out = Vec::new();
    for (k, decl) in forward.into_iter().zip(declared) {
        let backward = backwards.get(k.key()).copied();
        let mut decl = decl?;
        decl.shared_mem = (
            meta.shared_memory_bytes(&k.name).unwrap_or(0),
            backward
                .and_then(|b| meta.shared_memory_bytes(&b.name))
                .unwrap_or(0),
        );
        out.push(Declared {
            key: k.key().to_string(),
            forward: k.name.clone(),
            backward: backward.map(|b| b.name.clone()),
            decl,
            atomics: ctx.body_of(k).contains("atomic_"),
        });
    }
    Ok(out)
}

/// The backward kernels of a source, by key.
fn backward_kernels(src: &source::Source) -> HashMap<&str, &SourceKernel> {
    src.kernels
        .iter()
        .filter(|b| b.direction() == Some(Direction::Backward))
        .map(|b| (b.key(), b))
        .collect()
}

/// The forward kernels of a source, in order.
fn forward_kernels(src: &source::Source) -> impl Iterator<Item = &SourceKernel> {
    src.kernels
        .iter()
        .filter(|k| k.direction() == Some(Direction::Forward))
}

/// Reads bytes as a Warp-generated `.cu` and, when it parses, declares
/// each forward kernel as [`declarations`] does (without the version
/// checks); for `cargo xtask fuzz`. Never panics.
#[doc(hidden)]
pub fn fuzz_cu(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(src) = parse_cu(&text, "fuzz.cu") {
        let ctx = ModuleContext::new(&text, &src);
        let backwards = backward_kernels(&src);
        for k in forward_kernels(&src) {
            let backward = backwards.get(k.key()).copied();
            let _ = declare_kernel(k, backward, &ctx, "fuzz.cu");
        }
    }
}

/// The declaration of forward kernel `k`: `launch_bounds_t<N>` first, then
/// each parameter resolved to an array, value or struct type, and the
/// access rules of the forward and backward bodies.
fn declare_kernel(
    k: &SourceKernel,
    backward: Option<&SourceKernel>,
    ctx: &ModuleContext<'_>,
    file: &str,
) -> Result<KernelDecl, SourceError> {
    let ndim = k.launch_ndim().ok_or_else(|| {
        SourceError::new(
            file,
            k.line,
            format!(
                "kernel '{}' does not start with a wp::launch_bounds_t<N> parameter; not a Warp kernel",
                k.name
            ),
        )
    })?;
    let mut hints = ctx
        .signatures
        .get(k.key())
        .map(|line| ndim_hints(line, k.key()))
        .unwrap_or_default();
    let body = ctx.body_of(k);
    let source_params = k.params.get(1..).unwrap_or(&[]);
    for p in source_params {
        if !hints.contains_key(p.label())
            && let Some(n) = hints::index_arity(body, &p.name)
        {
            hints.insert(p.label().to_string(), n);
        }
    }
    // Memory no rule covers: raw addresses.
    let hidden: Option<Unproven> = ctx.src.raw_addresses.map(|line| Unproven {
        param: String::new(),
        location: format!("{file}:{line}"),
        reason: "the module builds an array from a raw address (wp.array(ptr=...)) or calls a builtin that dereferences a uint64 handle (meshes, BVHs, hash grids, volumes)".into(),
    });
    let mut params = Vec::with_capacity(source_params.len());
    for p in source_params {
        let kind = context::resolve(&p.cpp_type, ctx, 0).map_err(|m| {
            SourceError::new(
                file,
                p.line,
                format!("parameter '{}' of kernel '{}': {m}", p.label(), k.key()),
            )
        })?;
        // A struct holding arrays: the reader labels their accesses
        // `param.field` (`source/held.rs`) and refuses every other use.
        let kind = match kind {
            ParamKind::Array { dtype, .. } => ParamKind::Array {
                dtype,
                ndim: hints.get(p.label()).copied(),
            },
            other => other,
        };
        params.push(KernelParam {
            name: p.label().to_string(),
            kind,
        });
    }
    let (forward, backward) = match hidden {
        Some(u) => (Accesses::Unproven(u.clone()), Accesses::Unproven(u)),
        None => (
            k.accesses.clone(),
            backward.map_or_else(Accesses::default, |b| b.accesses.clone()),
        ),
    };
    Ok(KernelDecl {
        name: k.key().to_string(),
        kernel_dim: ndim,
        params,
        grid_stride: k.body != KernelBody::Lean,
        shared_mem: (0, 0),
        block_dim: ctx.block_dim,
        forward,
        backward,
    })
}

#[cfg(test)]
mod tests;
