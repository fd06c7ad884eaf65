//! Kernels: named, typed parameters (arrays, values, structs), the domain
//! dimension of `wp.tid()`, grid-stride or lean, and the functions that run
//! them (CUDA forward and backward, each declared against the driver's
//! parameter layout).

use std::fmt;
use std::sync::{Arc, OnceLock};

use cuda_api::{ArgBlock, DynKernel, Library, Param, ParamType};

use super::bind::{ArgSlot, Params, unborrowed};
use super::memo::TypedBlock;
use super::spare::Spare;
use crate::abi::Element;
use crate::device::{Device, PerDevice};
use crate::error::{
    AccessRuleError, AccessRuleProblem, DeclarationError, DeclarationProblem, Error, Result,
};
use crate::signature::{
    AccessTarget, Accesses, ArrayAccess, AxisIndex, KernelParam, ParamKind, Pass, Unproven,
};

/// A resolved access: the parameter's position instead of its name.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    pub index: usize,
    /// For an array held in a struct parameter: where its `array_t` sits
    /// in the struct's bytes (the launch reads the extents there, in what
    /// the kernel receives) and its name (`h.data`).
    pub held: Option<(usize, String)>,
    pub target: AccessTarget,
    pub indices: Vec<AxisIndex>,
    pub null_ok: bool,
    pub line: usize,
}

/// The rules of one kernel function: checked ones, or why there are none.
#[derive(Clone, Debug)]
pub(crate) enum Rules {
    Checked(Vec<Rule>),
    Unproven(Unproven),
}

/// A kernel's declaration: its name, the number of coordinates `wp.tid()`
/// returns (the `N` of `launch_bounds_t<N>`), its parameters, grid-stride
/// or lean, dynamic shared memory, and how it indexes its arrays (the
/// [`Accesses`] every launch checks). Turned into a [`Kernel`] by loading
/// its functions.
///
/// A CUDA C kernel states its indexing with [`KernelSpec::indexed_by_thread`]
/// and [`KernelSpec::access`] (e.g. `x[i]` with `i` the thread coordinate);
/// the launch then refuses a domain larger than the arrays. A kernel that
/// indexes in a way no rule expresses is marked with
/// [`KernelSpec::unproven`], and only the `unsafe`
/// [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked) launches it.
#[derive(Clone, Debug)]
pub struct KernelSpec {
    name: String,
    kernel_dim: usize,
    params: Vec<KernelParam>,
    grid_stride: bool,
    shared_mem: (u32, u32),
    block_dim: Option<u32>,
    /// Forward, backward.
    accesses: [Accesses; 2],
}

impl KernelSpec {
    /// A kernel `name` whose `wp.tid()` has `kernel_dim` coordinates (1 to 4).
    pub fn new(name: impl Into<String>, kernel_dim: usize) -> KernelSpec {
        KernelSpec {
            name: name.into(),
            kernel_dim,
            params: Vec::new(),
            grid_stride: true,
            shared_mem: (0, 0),
            block_dim: None,
            accesses: [Accesses::default(), Accesses::default()],
        }
    }

    /// The spec of a kernel warp-proof declared from Warp's source.
    pub(crate) fn from_decl(d: warp_proof::KernelDecl) -> KernelSpec {
        KernelSpec {
            name: d.name,
            kernel_dim: d.kernel_dim,
            params: d.params,
            grid_stride: d.grid_stride,
            shared_mem: d.shared_mem,
            block_dim: d.block_dim,
            accesses: [d.forward, d.backward],
        }
    }

    /// Adds a parameter.
    pub fn param(mut self, name: impl Into<String>, kind: ParamKind) -> Self {
        self.params.push(KernelParam {
            name: name.into(),
            kind,
        });
        self
    }

    /// Adds an array parameter of `T` with `ndim` dimensions.
    pub fn array<T: Element>(self, name: impl Into<String>, ndim: u8) -> Self {
        self.param(
            name,
            ParamKind::Array {
                dtype: T::DTYPE,
                ndim: Some(ndim),
            },
        )
    }

    /// Adds a by-value parameter of `T`.
    pub fn value<T: Element>(self, name: impl Into<String>) -> Self {
        self.param(name, ParamKind::Value(T::DTYPE))
    }

    /// Grid-stride (`true`, the default: the kernel loops over the domain
    /// with a stride of the whole grid) or lean (`false`: one thread per
    /// index, no loop), as Warp's `@wp.kernel(grid_stride=...)`.
    pub fn grid_stride(mut self, yes: bool) -> Self {
        self.grid_stride = yes;
        self
    }

    /// Dynamic shared memory of the forward and backward kernels, in bytes.
    pub fn shared_mem(mut self, forward: u32, backward: u32) -> Self {
        self.shared_mem = (forward, backward);
        self
    }

    /// Fixes the block size: the kernel was compiled for exactly `n`
    /// threads per block (Warp compiles a module for one `block_dim`,
    /// `WP_TILE_BLOCK_DIM`, and its kernels keep one shared-memory slot per
    /// thread of that many; more threads write past it). Launches default to
    /// it and refuse any other.
    pub fn compiled_block_dim(mut self, n: u32) -> Self {
        self.block_dim = Some(n);
        self
    }

    /// Declares that the kernel indexes array `name` with the thread
    /// coordinate, axis by axis (`x[i]`, `a[i, j]` with `i, j = wp.tid()`):
    /// axis `k` of the array with coordinate `k`, for every axis of the
    /// array (declare the array, with its dimensions, first). In adjoint
    /// launches the rule covers `adj_<name>` too (a null adjoint is allowed).
    /// Launches then refuse a domain whose extent `k` exceeds the array's.
    pub fn indexed_by_thread(self, name: impl Into<String>) -> Self {
        let name = name.into();
        let ndim = self.params.iter().find_map(|p| match p.kind {
            ParamKind::Array { ndim, .. } if p.name == name => Some(ndim),
            _ => None,
        });
        let indices = match ndim {
            Some(Some(n)) => (0..usize::from(n)).map(AxisIndex::Thread).collect(),
            // Checked (and reported) when the kernel is loaded.
            _ => Vec::new(),
        };
        self.access(name, &indices)
    }

    /// Declares one way the kernel indexes array `name`: `indices[a]` for
    /// axis `a` (e.g. `[AxisIndex::Constant(0)]` for `out[0]`,
    /// `[AxisIndex::Block]` for `partial[blockIdx.x]`). In adjoint launches
    /// the rule covers `adj_<name>` too (a null adjoint is allowed). An
    /// array held in a struct parameter is named by its path (`h.data`,
    /// `h.inner.data`): the launch checks the rule against the `array_t` in
    /// the struct value's bytes. Every launch checks every declared access.
    pub fn access(mut self, name: impl Into<String>, indices: &[AxisIndex]) -> Self {
        let name = name.into();
        let access = |target| ArrayAccess {
            param: name.clone(),
            target,
            indices: indices.to_vec(),
            null_ok: target == AccessTarget::Adjoint,
            line: 0,
        };
        let (fwd, bwd) = (access(AccessTarget::Param), access(AccessTarget::Param));
        let adj = access(AccessTarget::Adjoint);
        let [f, b] = &mut self.accesses;
        if let Accesses::Checked(list) = f {
            list.push(fwd);
        }
        if let Accesses::Checked(list) = b {
            list.push(bwd);
            list.push(adj);
        }
        self
    }

    /// Declares that the kernel accesses memory in a way no
    /// [`AxisIndex`] rule states (`x[idx[i]]`, loops, pointers): safe
    /// launches are refused with `reason`, and only the `unsafe`
    /// [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked) runs it.
    pub fn unproven(mut self, param: impl Into<String>, reason: impl Into<String>) -> Self {
        let u = Unproven {
            param: param.into(),
            location: "the declaration".into(),
            reason: reason.into(),
        };
        self.accesses = [Accesses::Unproven(u.clone()), Accesses::Unproven(u)];
        self
    }

    /// Replaces the access facts of the forward and backward functions (as
    /// read from Warp's generated code by [`crate::AotModule`]).
    pub fn with_accesses(mut self, forward: Accesses, backward: Accesses) -> Self {
        self.accesses = [forward, backward];
        self
    }

    /// The access facts of the forward or backward function.
    pub fn accesses(&self, pass: Pass) -> &Accesses {
        &self.accesses[pass.index()]
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Coordinates of `wp.tid()`.
    pub(crate) fn kernel_dim(&self) -> usize {
        self.kernel_dim
    }

    /// The parameters.
    pub fn params(&self) -> &[KernelParam] {
        &self.params
    }

    /// Whether the kernel loops grid-stride (else it is lean).
    pub fn is_grid_stride(&self) -> bool {
        self.grid_stride
    }

    /// The block size it was compiled for, if fixed.
    pub fn fixed_block_dim(&self) -> Option<u32> {
        self.block_dim
    }

    /// Refuses a declaration no kernel can have: an empty kernel or
    /// parameter name, two parameters of one name (or one named as
    /// another's adjoint, `adj_<name>`), an array of no dimension or more
    /// than Warp's [`ARRAY_MAX_DIMS`](crate::ARRAY_MAX_DIMS).
    fn check_params(&self) -> Result<()> {
        let bad = |problem| {
            Err(Error::Declaration(Box::new(DeclarationError {
                kernel: self.name.clone(),
                problem,
            })))
        };
        if self.name.trim().is_empty() {
            return bad(DeclarationProblem::EmptyKernelName);
        }
        for (index, p) in self.params.iter().enumerate() {
            if p.name.trim().is_empty() {
                return bad(DeclarationProblem::EmptyParamName { index });
            }
            let clash = self.params[..index].iter().position(|q| {
                q.name == p.name
                    || p.name.strip_prefix("adj_") == Some(q.name.as_str())
                    || q.name.strip_prefix("adj_") == Some(p.name.as_str())
            });
            if let Some(first) = clash {
                return bad(DeclarationProblem::DuplicateParam {
                    first,
                    first_name: self.params[first].name.clone(),
                    index,
                    name: p.name.clone(),
                });
            }
            if let ParamKind::Array { ndim: Some(n), .. } = p.kind
                && !(1..=crate::abi::ARRAY_MAX_DIMS).contains(&usize::from(n))
            {
                return bad(DeclarationProblem::ArrayDims {
                    index,
                    name: p.name.clone(),
                    ndim: n,
                });
            }
        }
        Ok(())
    }

    /// The struct parameter and byte offset of the held array `path`
    /// (`h.data`, `h.inner.data`: the parameter, then the field path of
    /// `bind::array_fields`).
    fn held_array(&self, path: &str) -> Option<(usize, Option<(usize, String)>)> {
        let (param, field) = path.split_once('.')?;
        let index = self.params.iter().position(|p| p.name == param)?;
        let ParamKind::Struct(st) = &self.params[index].kind else {
            return None;
        };
        crate::launch::bind::array_fields(st)
            .into_iter()
            .find(|(_, p, _)| p == field)
            .map(|(offset, _, _)| (index, Some((offset, path.to_owned()))))
    }

    fn check(&self) -> Result<[Rules; 2]> {
        self.check_params()?;
        if !(1..=4).contains(&self.kernel_dim) {
            return Err(Error::KernelDim {
                kernel: self.name.clone(),
                given: self.kernel_dim,
            });
        }
        let resolve = |accesses: &Accesses| -> Result<Rules> {
            let list = match accesses {
                Accesses::Unproven(u) => return Ok(Rules::Unproven(u.clone())),
                Accesses::Checked(list) => list,
            };
            let mut rules = Vec::with_capacity(list.len());
            for a in list {
                let bad = |problem| {
                    Error::AccessRule(Box::new(AccessRuleError {
                        kernel: self.name.clone(),
                        param: a.param.clone(),
                        problem,
                    }))
                };
                let found = match self.params.iter().position(|p| p.name == a.param) {
                    Some(index) => Some((index, None)),
                    None => self.held_array(&a.param),
                };
                let Some((index, held)) = found else {
                    return Err(bad(AccessRuleProblem::NoSuchParam {
                        known: self.params.iter().map(|p| p.name.clone()).collect(),
                    }));
                };
                let ndim = match (&self.params[index].kind, &held) {
                    (ParamKind::Array { ndim, .. }, None) => *ndim,
                    (ParamKind::Struct(_), Some(_)) => None,
                    _ => {
                        return Err(bad(AccessRuleProblem::NotAnArray {
                            kind: self.params[index].kind.describe(),
                        }));
                    }
                };
                if !(1..=4).contains(&a.indices.len()) {
                    return Err(bad(AccessRuleProblem::IndexCount {
                        given: a.indices.len(),
                        ndim,
                    }));
                }
                if let Some(k) = a.indices.iter().find_map(|i| match i {
                    AxisIndex::Thread(k)
                    | AxisIndex::Tile {
                        thread: Some(k), ..
                    } if *k >= self.kernel_dim => Some(*k),
                    _ => None,
                }) {
                    return Err(bad(AccessRuleProblem::NoSuchCoordinate {
                        coordinate: k,
                        kernel_dim: self.kernel_dim,
                    }));
                }
                rules.push(Rule {
                    index,
                    held,
                    target: a.target,
                    indices: a.indices.clone(),
                    null_ok: a.null_ok,
                    line: a.line,
                });
            }
            Ok(Rules::Checked(rules))
        };
        Ok([resolve(&self.accesses[0])?, resolve(&self.accesses[1])?])
    }

    fn declaration(&self, adjoint: bool) -> Vec<Param> {
        let (size, align) = crate::launch::domain::bounds_layout(self.kernel_dim);
        let mut out = vec![Param::new(
            "dim",
            ParamType::opaque(format!("launch_bounds_t<{}>", self.kernel_dim), size, align),
        )];
        let mut push = |prefix: &str| {
            for p in &self.params {
                out.push(Param::new(
                    format!("{prefix}{}", p.name),
                    ParamType::opaque(p.kind.type_name(), p.kind.size(), p.kind.align()),
                ));
            }
        };
        push("");
        if adjoint {
            push("adj_");
        }
        out
    }

    /// Loads the kernel's CUDA functions from `library`: `forward` and, if
    /// given, `backward` (which takes the forward parameters, then one
    /// adjoint per parameter). Each declaration is checked against the
    /// driver's parameter layout (count, size, offset): the forward one
    /// here, the backward one when it is first used (the first adjoint
    /// launch, or [`Kernel::cuda_function`] of [`Pass::Adjoint`]), so that
    /// a program that never differentiates never looks it up.
    ///
    /// # Safety
    ///
    /// - The declared parameter types must be the functions' real parameter
    ///   types (the layout check catches counts, sizes and offsets, not
    ///   meaning).
    /// - The functions must stay inside every array argument, and touch no
    ///   other memory, whenever the declared access rules hold, for any
    ///   launch domain, block size and grid a launch may choose: every
    ///   access to an array parameter is one that a rule of
    ///   [`KernelSpec::indexed_by_thread`] / [`KernelSpec::access`] states
    ///   (a launch checks exactly those against the domain and the arrays'
    ///   extents), or the declaration says [`KernelSpec::unproven`] (then
    ///   safe launches are refused). A null array (extent 0) is passed for
    ///   an adjoint that has no gradient, and must then not be touched.
    ///
    /// Declarations read from a Warp-generated source, as
    /// [`crate::AotModule`] makes them (types and access rules both come
    /// from the source), meet this when the source and the cubin come from
    /// the same compile by Warp 1.19.0.
    ///
    /// # Errors
    ///
    /// [`Error::Declaration`] for an empty kernel or parameter name, two parameters of one
    /// name, or an array of 0 or more than 4 dimensions; [`Error::KernelDim`] when the kernel
    /// dimension is not 1 to 4; [`Error::AccessRule`] when a declared access rule names a
    /// parameter the kernel does not have or one that is not an array; [`Error::Cuda`] when the driver has no function named `forward`, or
    /// the declared parameters do not match its parameter layout (for `backward`, the first
    /// adjoint launch reports these).
    pub unsafe fn load_cuda(
        self,
        library: &Library,
        forward: &str,
        backward: Option<&str>,
    ) -> Result<Kernel> {
        let rules = self.check()?;
        crate::device::Device::ensure_context()?;
        // SAFETY: the caller's promise covers the declared types.
        let fwd =
            unsafe { DynKernel::declare(library.function(forward)?, self.declaration(false)) }?;
        // The backward function is looked up and declared on its first use
        // (an adjoint launch): a forward-only program never pays for it.
        let bwd = backward.map(|b| LazyBackward {
            library: library.clone(),
            name: b.to_string(),
            declared: OnceLock::new(),
        });
        Ok(Kernel {
            inner: Arc::new(KernelInner::new(
                self,
                rules,
                Some(CudaSlot::ready(CudaFunctions::new(fwd, bwd))),
                None,
            )),
        })
    }

    /// The kernel of a Warp module: its CUDA functions are looked up in
    /// the module's image and declared against the driver's layout on
    /// their first use (the image itself is chosen and loaded then), so
    /// making it touches no driver; `cpu` is its CPU implementation (the
    /// module's compiled CPU code), if any.
    ///
    /// # Safety
    ///
    /// As for [`KernelSpec::load_cuda`], for the functions `deferred`
    /// names in the library it loads; and `cpu`, when native, runs this
    /// declaration's kernel.
    pub(crate) unsafe fn declare_deferred(
        self,
        deferred: Option<DeferredCuda>,
        cpu: Option<crate::cpu::CpuKernel>,
    ) -> Result<Kernel> {
        let rules = self.check()?;
        Ok(Kernel {
            inner: Arc::new(KernelInner::new(
                self,
                rules,
                deferred.map(CudaSlot::deferred),
                cpu,
            )),
        })
    }

    /// The kernel with this declaration and no functions yet: give it a
    /// Rust implementation for the CPU device with [`Kernel::with_cpu`] (a
    /// launch of a function it lacks is refused with
    /// [`Error::NoCpuFunction`] or [`Error::NoCudaFunction`]).
    ///
    /// ```
    /// use warp_launch::{KernelSpec, cpu_each_fn};
    /// # fn main() -> warp_launch::Result<()> {
    /// let scale = KernelSpec::new("scale", 1)
    ///     .array::<f32>("x", 1)
    ///     .indexed_by_thread("x")
    ///     .declare()?
    ///     .with_cpu(cpu_each_fn(|_args, each| each.run(|_thread| Ok(()))), None);
    /// # let _ = scale; Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Declaration`] for an empty kernel or parameter name, two
    /// parameters of one name, or an array of 0 or more than 4 dimensions
    /// (Warp's `ARRAY_MAX_DIMS`); [`Error::KernelDim`] or
    /// [`Error::AccessRule`] for a declaration whose `wp.tid()` arity or
    /// access rules do not fit.
    pub fn declare(self) -> Result<Kernel> {
        let rules = self.check()?;
        Ok(Kernel {
            inner: Arc::new(KernelInner::new(self, rules, None, None)),
        })
    }
}

/// How a kernel's CUDA functions are made on first use on a device: the
/// module's library for that device (its image chosen for the device's
/// architecture and loaded on the first call of `library` with the
/// device's ordinal, which may fail: no driver, no image for the device),
/// and the functions' names.
#[derive(Clone)]
pub(crate) struct DeferredCuda {
    pub library: Arc<dyn Fn(i32) -> Result<Library> + Send + Sync>,
    pub forward: String,
    pub backward: Option<String>,
}

/// A kernel's CUDA functions: given when the kernel was made (one library
/// for every device), or declared from its module's image on first use on
/// each device (on a host with GPUs of two architectures, each device runs
/// the image chosen for it).
pub(crate) struct CudaSlot {
    /// Functions given when the kernel was made ([`KernelSpec::load_cuda`]).
    given: Option<CudaFunctions>,
    /// A Warp module's functions, declared per device on first use there.
    deferred: Option<(DeferredCuda, PerDevice<CudaFunctions>)>,
}

impl CudaSlot {
    fn ready(functions: CudaFunctions) -> CudaSlot {
        CudaSlot {
            given: Some(functions),
            deferred: None,
        }
    }

    fn deferred(deferred: DeferredCuda) -> CudaSlot {
        CudaSlot {
            given: None,
            deferred: Some((deferred, PerDevice::new())),
        }
    }

    /// The same source of functions, with fresh spare blocks (the
    /// functions declared so far are kept).
    fn fresh(&self) -> CudaSlot {
        let copy = |c: &CudaFunctions| CudaFunctions::new(c.forward.clone(), c.backward.clone());
        CudaSlot {
            given: self.given.as_ref().map(copy),
            deferred: self
                .deferred
                .as_ref()
                .map(|(d, made)| (d.clone(), made.map_made(copy))),
        }
    }

    /// The functions of device `ordinal` if they are declared already.
    pub(crate) fn loaded(&self, ordinal: i32) -> Option<&CudaFunctions> {
        match (&self.given, &self.deferred) {
            (Some(c), _) => Some(c),
            (None, Some((_, made))) => made.get(ordinal),
            (None, None) => None,
        }
    }

    /// Whether the functions are declared on some device.
    fn declared_anywhere(&self) -> bool {
        self.given.is_some()
            || self
                .deferred
                .as_ref()
                .is_some_and(|(_, made)| made.made().next().is_some())
    }

    /// Whether the kernel has a backward CUDA function.
    fn has_backward(&self) -> bool {
        match (&self.given, &self.deferred) {
            (Some(c), _) => c.backward.is_some(),
            (None, Some((d, _))) => d.backward.is_some(),
            (None, None) => false,
        }
    }

    /// The functions of device `ordinal`, declared now if they are not yet
    /// (the module's image for that device chosen and loaded first if no
    /// kernel of it did so yet). A failure is not kept: the next call tries
    /// again.
    pub(crate) fn get(&self, spec: &KernelSpec, ordinal: i32) -> Result<&CudaFunctions> {
        if let Some(c) = &self.given {
            return Ok(c);
        }
        let Some((d, made)) = &self.deferred else {
            // `given` is set whenever `deferred` is not.
            return Err(Error::NoCudaFunction {
                kernel: spec.name.clone(),
                pass: Pass::Forward,
            });
        };
        if let Some(c) = made.get(ordinal) {
            return Ok(c);
        }
        // The library first: a module without images says so before the
        // driver is asked anything.
        let library = (d.library)(ordinal)?;
        made.get_or_make(ordinal, || {
            crate::device::Device::ensure_context()?;
            // SAFETY: `KernelSpec::declare_deferred`'s caller promised the
            // declared types for the functions `d` names in this library.
            let fwd = unsafe {
                DynKernel::declare(library.function(&d.forward)?, spec.declaration(false))
            }?;
            let bwd = d.backward.as_ref().map(|b| LazyBackward {
                library: library.clone(),
                name: b.clone(),
                declared: OnceLock::new(),
            });
            Ok(CudaFunctions::new(fwd, bwd))
        })
    }
}

/// A backward function, declared on first use.
#[derive(Clone)]
pub(crate) struct LazyBackward {
    library: Library,
    name: String,
    declared: OnceLock<DynKernel>,
}

pub(crate) struct CudaFunctions {
    pub forward: DynKernel,
    backward: Option<LazyBackward>,
    /// One argument block of a finished launch per direction (forward,
    /// backward), reused by the next launch: an immediate launch then
    /// allocates no block and takes no lock.
    spare: [Spare<Box<ArgBlock<'static>>>; 2],
    /// The same for immediate positional launches, each block with what
    /// its last launch checked ([`TypedBlock`]).
    typed: [Spare<Box<TypedBlock>>; 2],
}

impl CudaFunctions {
    fn new(forward: DynKernel, backward: Option<LazyBackward>) -> CudaFunctions {
        CudaFunctions {
            forward,
            backward,
            spare: [Spare::new(()), Spare::new(())],
            typed: [Spare::new(()), Spare::new(())],
        }
    }

    /// An argument block for the forward or backward kernel: the spare one
    /// (every parameter is written again by the launch that takes it) or a
    /// new one.
    pub(crate) fn take_block(&self, pass: Pass, kernel: &DynKernel) -> Box<ArgBlock<'static>> {
        self.spare[pass.index()]
            .take()
            .unwrap_or_else(|| Box::new(kernel.args()))
    }

    /// Keeps `block` as the spare if there is none.
    pub(crate) fn give_block(&self, pass: Pass, block: Box<ArgBlock<'static>>) {
        self.spare[pass.index()].put(block);
    }

    /// The function of `pass`, if the kernel has one (the backward one
    /// is looked up and its declaration checked against the driver's
    /// parameter layout on its first use; `spec` declares it).
    pub(crate) fn function(&self, pass: Pass, spec: &KernelSpec) -> Result<Option<&DynKernel>> {
        let Some(b) = (match pass {
            Pass::Forward => return Ok(Some(&self.forward)),
            Pass::Adjoint => &self.backward,
        }) else {
            return Ok(None);
        };
        if let Some(k) = b.declared.get() {
            return Ok(Some(k));
        }
        // SAFETY: `KernelSpec::load_cuda`'s caller promised the declared
        // types; the backward kernel takes the forward parameters, then
        // one adjoint per parameter.
        let k =
            unsafe { DynKernel::declare(b.library.function(&b.name)?, spec.declaration(true)) }?;
        Ok(Some(b.declared.get_or_init(|| k)))
    }

    /// The spare block of positional launches (with what its last launch
    /// checked), or a new one that remembers nothing.
    pub(crate) fn take_typed(&self, pass: Pass, kernel: &DynKernel) -> Box<TypedBlock> {
        self.typed[pass.index()]
            .take()
            .unwrap_or_else(|| Box::new(TypedBlock::new(kernel.args())))
    }

    /// Keeps `block` as the spare of positional launches if there is none.
    pub(crate) fn give_typed(&self, pass: Pass, block: Box<TypedBlock>) {
        self.typed[pass.index()].put(block);
    }
}

pub(crate) struct KernelInner {
    pub spec: KernelSpec,
    /// The access rules of the forward and backward functions, resolved.
    pub rules: [Rules; 2],
    pub cuda: Option<CudaSlot>,
    pub cpu: Option<crate::cpu::CpuKernel>,
    /// The argument vector of a finished launch, reused (emptied) by the
    /// next one: immediate launches then allocate nothing.
    spare_args: Spare<Vec<crate::launch::bind::Arg>>,
    /// The same for a [`crate::LaunchBuilder`]'s arguments.
    spare_slots: Spare<Vec<ArgSlot<'static>>>,
}

impl KernelInner {
    fn new(
        spec: KernelSpec,
        rules: [Rules; 2],
        cuda: Option<CudaSlot>,
        cpu: Option<crate::cpu::CpuKernel>,
    ) -> KernelInner {
        // Capacity of reusable argument vectors: every parameter and its
        // adjoint.
        let capacity = (2 * spec.params.len()).max(4);
        KernelInner {
            spec,
            rules,
            cuda,
            cpu,
            spare_args: Spare::new(capacity),
            spare_slots: Spare::new(capacity),
        }
    }

    /// An empty argument vector: the spare one or a new one.
    pub(crate) fn take_args(&self) -> Vec<crate::launch::bind::Arg> {
        self.spare_args
            .take()
            .unwrap_or_else(|| Vec::with_capacity(self.spare_args.shape()))
    }

    /// Empties `args` and keeps its buffer as the spare if it has the
    /// reusable capacity and there is no spare yet.
    pub(crate) fn give_args(&self, args: Vec<crate::launch::bind::Arg>) {
        self.spare_args.put(args);
    }

    /// An empty vector of builder arguments: the spare one or a new one.
    pub(crate) fn take_slots<'k>(&self) -> Vec<ArgSlot<'k>> {
        self.spare_slots
            .take()
            .unwrap_or_else(|| Vec::with_capacity(self.spare_slots.shape()))
    }

    /// Empties `slots` (ending its borrows) and keeps its buffer as the
    /// spare, as [`KernelInner::give_args`].
    pub(crate) fn give_slots(&self, slots: Vec<ArgSlot<'_>>) {
        self.spare_slots.put(unborrowed(slots));
    }
}

/// A loaded kernel, cheap to clone: its declaration plus the functions that
/// run it (CUDA forward/backward, and/or a CPU implementation).
#[derive(Clone)]
pub struct Kernel {
    pub(crate) inner: Arc<KernelInner>,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name())
            .field("kernel_dim", &self.kernel_dim())
            .field("params", &self.inner.spec.params.len())
            .field("grid_stride", &self.is_grid_stride())
            .field("cuda", &self.inner.cuda.is_some())
            .field("cpu", &self.inner.cpu)
            .finish()
    }
}

impl Kernel {
    /// The kernel's name (Warp's key).
    pub fn name(&self) -> &str {
        &self.inner.spec.name
    }

    /// Coordinates of `wp.tid()` (the `N` of `launch_bounds_t<N>`).
    pub fn kernel_dim(&self) -> usize {
        self.inner.spec.kernel_dim
    }

    /// The forward parameters (the backward kernel takes these, then one
    /// adjoint each, named `adj_<name>`).
    pub fn params(&self) -> &[KernelParam] {
        &self.inner.spec.params
    }

    /// Whether the kernel loops grid-stride (else it is lean).
    pub fn is_grid_stride(&self) -> bool {
        self.inner.spec.grid_stride
    }

    /// Dynamic shared memory of the forward or backward kernel.
    pub fn shared_mem(&self, pass: Pass) -> u32 {
        match pass {
            Pass::Forward => self.inner.spec.shared_mem.0,
            Pass::Adjoint => self.inner.spec.shared_mem.1,
        }
    }

    /// The block size the kernel was compiled for, if fixed (Warp kernels:
    /// their module's `block_dim`).
    pub fn fixed_block_dim(&self) -> Option<u32> {
        self.inner.spec.block_dim
    }

    /// Whether it has a backward function (CUDA, or CPU: a Rust one or the
    /// module's compiled CPU code).
    pub fn has_backward(&self) -> bool {
        self.inner.cuda.as_ref().is_some_and(CudaSlot::has_backward)
            || self
                .inner
                .cpu
                .as_ref()
                .is_some_and(crate::cpu::CpuKernel::has_backward)
    }

    /// Whether its CUDA forward function is declared against the driver
    /// (a kernel of a Warp module declares it on its first CUDA use).
    pub(crate) fn is_cuda_declared(&self) -> bool {
        self.inner
            .cuda
            .as_ref()
            .is_some_and(CudaSlot::declared_anywhere)
    }

    /// The same kernel with a CPU implementation (forward and, for adjoint
    /// launches and the tape, backward, which sees the forward arguments,
    /// then one adjoint per parameter; see [`cpu_each_fn`](crate::cpu_each_fn)): the one way to
    /// give a kernel a CPU implementation, whether it was declared with
    /// [`KernelSpec::declare`], loaded with [`KernelSpec::load_cuda`] or
    /// from an [`crate::AotModule`]. An implementation it had is replaced.
    pub fn with_cpu(
        &self,
        forward: crate::cpu::CpuFn,
        backward: Option<crate::cpu::CpuFn>,
    ) -> Kernel {
        let old = &self.inner;
        let cuda = old.cuda.as_ref().map(CudaSlot::fresh);
        Kernel {
            inner: Arc::new(KernelInner::new(
                old.spec.clone(),
                old.rules.clone(),
                cuda,
                Some(crate::cpu::CpuKernel::Rust { forward, backward }),
            )),
        }
    }

    /// Index of parameter `name` (forward names, or `adj_<name>` for
    /// adjoints after them).
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchParam`] when the kernel has no parameter `name` (the message lists them).
    pub fn param_index(&self, name: &str) -> Result<usize> {
        self.declared().index(name)
    }

    /// The kernel's name and parameters, as launches look them up.
    pub(crate) fn declared(&self) -> Params<'_> {
        Params {
            name: self.name(),
            params: self.params(),
        }
    }

    pub(crate) fn no_such_param(&self, given: String) -> Error {
        self.declared().no_such_param(given)
    }

    /// Parameter `index` of a launch (adjoints after the forward ones):
    /// its name and kind.
    pub(crate) fn param_at(&self, index: usize) -> Option<(std::borrow::Cow<'_, str>, &ParamKind)> {
        self.declared().at(index)
    }

    /// The CUDA function of the forward or backward kernel on this
    /// thread's current CUDA device (the innermost
    /// [`ScopedDevice`](crate::ScopedDevice), else the current context's
    /// device, else `cuda:0`: [`Device::current`]): attributes, occupancy,
    /// limits, and its launch handle for raw driver calls. For a kernel of
    /// a Warp module, its first CUDA use on that device: the module's image
    /// for the device is chosen and loaded (if no kernel of it did so yet)
    /// and the function declared against the driver's parameter layout.
    /// [`Kernel::cuda_function_on`] names the device.
    ///
    /// # Errors
    ///
    /// As [`Kernel::cuda_function_on`].
    pub fn cuda_function(&self, pass: Pass) -> Result<&cuda_api::Function> {
        self.cuda_function_on(Device::current(), pass)
    }

    /// The CUDA function of the forward or backward kernel on `device`
    /// (`"cpu"` counts as `cuda:0`): on a host with GPUs of two
    /// architectures, a Warp module's kernel has one function per device,
    /// each from the image chosen for that device.
    ///
    /// # Errors
    ///
    /// [`Error::NoCudaFunction`] when the kernel has no such function; for
    /// a kernel of a Warp module, the errors of loading its image
    /// ([`Error::Cuda`] without a driver or an image for the device,
    /// [`Error::NoSuchDevice`], [`Error::Source`] for a module without
    /// images) and of declaring the function.
    pub fn cuda_function_on(&self, device: Device, pass: Pass) -> Result<&cuda_api::Function> {
        Ok(self.cuda(device.ordinal().unwrap_or(0), pass)?.function())
    }

    /// The CUDA function of `pass` on device `ordinal`, declared on its
    /// first use there.
    pub(crate) fn cuda(&self, ordinal: i32, pass: Pass) -> Result<&DynKernel> {
        let missing = || Error::NoCudaFunction {
            kernel: self.name().to_string(),
            pass,
        };
        let c = self.inner.cuda.as_ref().ok_or_else(missing)?;
        c.get(&self.inner.spec, ordinal)?
            .function(pass, &self.inner.spec)?
            .ok_or_else(missing)
    }

    /// The CPU function of the forward or backward kernel: a Rust
    /// implementation or the module's compiled CPU code.
    pub(crate) fn cpu(&self, pass: Pass) -> Result<crate::cpu::CpuBody<'_>> {
        use crate::cpu::{CpuBody, CpuKernel};
        let missing = || Error::NoCpuFunction {
            kernel: self.name().to_string(),
            pass,
        };
        match self.inner.cpu.as_ref().ok_or_else(missing)? {
            CpuKernel::Rust { forward, backward } => match pass {
                Pass::Forward => Ok(CpuBody::Rust(forward)),
                Pass::Adjoint => backward.as_ref().map(CpuBody::Rust).ok_or_else(missing),
            },
            CpuKernel::Native(n) => {
                if pass == Pass::Adjoint && !n.has_backward() {
                    return Err(missing());
                }
                Ok(CpuBody::Native(n))
            }
            CpuKernel::Unsupported(reason) => Err(Error::CpuUnsupported {
                kernel: self.name().to_string(),
                reason: reason.clone(),
            }),
        }
    }

    /// Whether a launch on `"cpu"` runs the module's compiled CPU code
    /// (whose array accesses are not bounds-checked, so the launch-shape
    /// rules apply as on CUDA) rather than a Rust implementation.
    pub(crate) fn runs_native_on_cpu(&self) -> bool {
        matches!(self.inner.cpu, Some(crate::cpu::CpuKernel::Native(_)))
    }

    /// Whether an access rule of `pass` reads an array's extents out of
    /// the struct bytes of launch slot `slot` (a parameter's, or in the
    /// adjoint pass an adjoint's at the parameter count plus its index);
    /// `true` for unproven rules, which a memo must not reason about.
    pub(crate) fn rules_read_struct(&self, pass: Pass, slot: usize) -> bool {
        let n = self.params().len();
        match &self.inner.rules[pass.index()] {
            Rules::Checked(rules) => rules
                .iter()
                .any(|r| r.held.is_some() && (r.index == slot || n + r.index == slot)),
            Rules::Unproven(_) => true,
        }
    }

    /// Why the kernel's compiled CPU code is unproven (from the compile
    /// step's facts), when it is.
    pub(crate) fn cpu_unproven(&self) -> Option<&Unproven> {
        match &self.inner.cpu {
            Some(crate::cpu::CpuKernel::Native(n)) => n.unproven(),
            _ => None,
        }
    }
}
