//! Kernels whose parameters are declared at run time ([`DynKernel`]):
//! names and types checked against the driver's layout, buffer bounds
//! resolved once, launches that take an [`ArgBlock`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::args::ArgBlock;
use super::bounds::{Bound, Extent, Rules, Shape};
use super::decl::Decl;
use crate::context::Context;
use crate::error::{CudaError, CudaResult};
use crate::function::Function;
use crate::launch::{
    Dim3, LaunchConfig, LaunchError, PotentialBlockSize, check_nonzero, check_shape,
};
use crate::params::{Param, ParamSlot, check_params};
use crate::stream::Stream;

static NEXT_KERNEL_ID: AtomicU64 = AtomicU64::new(1);

/// A kernel whose parameters were declared at run time (names and types)
/// and checked against the driver's layout (count, size, offset). Launches
/// take an [`ArgBlock`] and are safe.
#[derive(Clone)]
pub struct DynKernel {
    func: Arc<Function>,
    decl: Arc<Decl>,
    /// Declared to wait for the grids before it: may be launched with
    /// [`LaunchConfig::programmatic`].
    programmatic: bool,
}

impl fmt::Debug for DynKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynKernel")
            .field("name", &self.decl.name)
            .field("params", &self.decl.params.len())
            .finish()
    }
}

impl DynKernel {
    /// Declares `func` to take `params`, checking count, sizes and offsets
    /// against the parameter layout the driver reports.
    ///
    /// # Errors
    ///
    /// The driver's failure to report the parameter layout
    /// ([`Function::param_layout`]), or [`CudaError::Signature`](crate::CudaError::Signature) when the
    /// declared parameters differ from it in count, size or offset.
    ///
    /// # Safety
    ///
    /// Each declared type must be the kernel's real parameter type at that
    /// position (a pointer where the kernel takes a pointer, of the element
    /// type it reads or writes; `ConstDevicePtr` only where the kernel never
    /// writes through it). Count, size and offset are checked; meaning is not.
    pub unsafe fn declare(func: Function, params: Vec<Param>) -> CudaResult<DynKernel> {
        let layout = func.param_layout()?;
        check_params(func.name(), &params, &layout)?;
        let space = layout.iter().map(|s| s.offset + s.size).max().unwrap_or(0);
        Ok(DynKernel {
            decl: Arc::new(Decl {
                id: NEXT_KERNEL_ID.fetch_add(1, Ordering::Relaxed),
                name: func.name().to_string(),
                params: params.into(),
                layout,
                space,
                rules: Rules::default(),
            }),
            func: Arc::new(func),
            programmatic: false,
        })
    }

    pub(crate) fn decl(&self) -> &Decl {
        &self.decl
    }

    /// The same kernel with its parameters, bounds or launch shape changed
    /// by `change` and checked again: a new declaration (argument blocks
    /// made before belong to the old one and are refused).
    fn redeclare(
        self,
        change: impl FnOnce(&mut Vec<Param>, &mut Vec<Bound>, &mut Shape) -> CudaResult<()>,
    ) -> CudaResult<DynKernel> {
        let d = &self.decl;
        let mut params = d.params.to_vec();
        let mut list = d.rules.bounds().to_vec();
        let mut shape = d.rules.shape();
        change(&mut params, &mut list, &mut shape)?;
        let rules = Rules::resolve(&d.name, &params, list, shape)?;
        Ok(DynKernel {
            decl: Arc::new(Decl {
                id: NEXT_KERNEL_ID.fetch_add(1, Ordering::Relaxed),
                name: d.name.clone(),
                params: params.into(),
                layout: d.layout.clone(),
                space: d.space,
                rules,
            }),
            func: self.func,
            programmatic: self.programmatic,
        })
    }

    /// Adds a bound: the buffer passed for parameter `buffer` must hold at
    /// least `at_least` elements, checked at every launch (see
    /// [`Bound`]). Refused when `buffer` is not a pointer parameter,
    /// or an [`Extent`] reads a parameter that is no integer. Argument blocks
    /// made before the call belong to the old declaration and are refused.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`](crate::CudaError::InvalidArgument) (call `Bound`) when `buffer` is no
    /// pointer parameter, `at_least` reads a parameter that is no integer,
    /// or `at_least` is a combination too large to state (see [`Extent`]).
    pub fn bound(self, buffer: usize, at_least: Extent) -> CudaResult<DynKernel> {
        self.redeclare(|_, list, _| {
            list.push(Bound::new(buffer, at_least));
            Ok(())
        })
    }

    /// Names the parameters, in order, for refusals (`'row_ptr'` rather
    /// than `'#0'`): PTX and cubins name parameters `_param_N`, so names
    /// come from the declaration. An empty name leaves that parameter's
    /// name as it was.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] (call `DynKernel::names`) when the
    /// count differs from the kernel's parameter count.
    pub fn names(self, names: &[&str]) -> CudaResult<DynKernel> {
        let kernel = self.decl.name.clone();
        self.redeclare(|params, _, _| {
            if names.len() != params.len() {
                return Err(CudaError::invalid_argument(
                    "DynKernel::names",
                    "names",
                    format!(
                        "kernel '{kernel}' has {} parameter(s) but {} name(s) were given; give one name per parameter",
                        params.len(),
                        names.len()
                    ),
                ));
            }
            for (p, n) in params.iter_mut().zip(names) {
                if !n.is_empty() {
                    p.name = (*n).to_string();
                }
            }
            Ok(())
        })
    }

    /// Declares that the kernel is safe only for grids of at most `blocks`
    /// blocks (for example a merge step that indexes a fixed table per
    /// block): a launch with more is refused with
    /// [`LaunchError::GridAboveDeclared`]. A second call replaces the first.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] for 0 blocks.
    pub fn max_grid(self, blocks: u64) -> CudaResult<DynKernel> {
        self.redeclare(|_, _, shape| {
            shape.max_blocks = Some(blocks);
            Ok(())
        })
    }

    /// Declares that the kernel is written for blocks of exactly `block`
    /// (for example a 32 x 32 tile): a launch with another block is refused
    /// with [`LaunchError::BlockNotDeclared`]. A second call replaces the
    /// first.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] for a zero extent.
    pub fn fixed_block(self, block: impl Into<Dim3>) -> CudaResult<DynKernel> {
        let block = block.into();
        self.redeclare(|_, _, shape| {
            shape.fixed_block = Some(block);
            Ok(())
        })
    }

    /// Declares the dynamic shared memory the kernel indexes, in bytes, as
    /// an [`Extent`] of the launch (for example `Extent::BlockThreads * 4`
    /// for one `float` per thread): a launch that gives less is refused with
    /// [`LaunchError::SharedMemoryBelowDeclared`]. An extent that reads only
    /// the block also sizes [`DynKernel::max_potential_block_size`]'s
    /// search. A second call replaces the first.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `bytes` reads a parameter that is
    /// no integer or is too large to state.
    pub fn shared_mem(self, bytes: Extent) -> CudaResult<DynKernel> {
        self.redeclare(|_, _, shape| {
            shape.shared_mem = Some(bytes);
            Ok(())
        })
    }

    /// Declares that the kernel may be launched as a programmatic dependent
    /// launch ([`LaunchConfig::with_programmatic_launch`]): it may then
    /// start while the kernel queued before it on the stream still runs.
    /// Argument blocks made before stay valid.
    ///
    /// # Safety
    ///
    /// Every block of the kernel waits for the grids it depends on
    /// (`cudaGridDependencySynchronize()`, PTX `griddepcontrol.wait`) before
    /// it reads or writes memory that work queued before it on the stream
    /// may use, and before it exits (so that work queued after it also
    /// comes after the earlier work). A kernel that skips the wait races
    /// with the kernel before it.
    pub unsafe fn allow_programmatic_launch(mut self) -> DynKernel {
        self.programmatic = true;
        self
    }

    /// Whether the kernel was declared with
    /// [`DynKernel::allow_programmatic_launch`].
    pub fn allows_programmatic_launch(&self) -> bool {
        self.programmatic
    }

    /// Refuses a programmatic launch of a kernel not declared for it.
    #[inline]
    pub(crate) fn check_programmatic(&self, cfg: &LaunchConfig) -> CudaResult<()> {
        if cfg.programmatic && !self.programmatic {
            return Err(LaunchError::ProgrammaticNotDeclared {
                kernel: self.decl.name.clone(),
            }
            .into());
        }
        Ok(())
    }

    /// The bounds declared with the kernel.
    pub fn bounds(&self) -> Vec<Bound> {
        self.decl.rules.bounds().to_vec()
    }

    /// The most blocks declared with [`DynKernel::max_grid`], if any.
    pub fn declared_max_grid(&self) -> Option<u64> {
        self.decl.rules.shape().max_blocks
    }

    /// The block declared with [`DynKernel::fixed_block`], if any.
    pub fn declared_block(&self) -> Option<Dim3> {
        self.decl.rules.shape().fixed_block
    }

    /// The shared memory declared with [`DynKernel::shared_mem`], if any.
    pub fn declared_shared_mem(&self) -> Option<Extent> {
        self.decl.rules.shape().shared_mem
    }

    /// Resident blocks per SM in `ctx` at `block_threads` threads and
    /// `shared_mem_bytes` of dynamic shared memory (see
    /// [`Function::occupancy`]).
    ///
    /// # Errors
    ///
    /// As for [`Function::occupancy`].
    pub fn occupancy(
        &self,
        ctx: &Context,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> CudaResult<u32> {
        self.func.occupancy(ctx, block_threads, shared_mem_bytes)
    }

    /// The largest cooperative grid in `ctx` (see
    /// [`Function::max_cooperative_grid`]).
    ///
    /// # Errors
    ///
    /// As for [`Function::max_cooperative_grid`].
    pub fn max_cooperative_grid(
        &self,
        ctx: &Context,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> CudaResult<u32> {
        self.func
            .max_cooperative_grid(ctx, block_threads, shared_mem_bytes)
    }

    /// The 1-D block size with the most resident threads per SM in `ctx`
    /// (see [`Function::max_potential_block_size`]), with the dynamic shared
    /// memory declared with [`DynKernel::shared_mem`] at each size (none
    /// when none is declared), and no larger than `block_limit` threads (0:
    /// no limit). For a kernel declared with [`DynKernel::fixed_block`] the
    /// answer is that block (its threads, its occupancy).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when the declared shared memory reads
    /// more than the block (a parameter or the grid: pass a closure to
    /// [`Function::max_potential_block_size`] instead); otherwise as for
    /// [`Function::max_potential_block_size`].
    pub fn max_potential_block_size(
        &self,
        ctx: &Context,
        block_limit: u32,
    ) -> CudaResult<PotentialBlockSize> {
        let shape = self.decl.rules.shape();
        let smem = shape.shared_mem.unwrap_or(Extent::Elements(0));
        if !smem.block_only() {
            return Err(CudaError::invalid_argument(
                "DynKernel::max_potential_block_size",
                "shared_mem",
                format!(
                    "kernel '{}' declares its shared memory as {}, which reads more than the block; call Function::max_potential_block_size with a closure giving the bytes for a block size",
                    self.decl.name,
                    smem.describe(&self.decl.params)
                ),
            ));
        }
        if let Some(block) = shape.fixed_block {
            // Declared non-zero; a product past u32 is refused by occupancy.
            let threads = u32::try_from(block.product().unwrap_or(u64::MAX)).unwrap_or(u32::MAX);
            let bytes =
                u32::try_from(smem.for_block(block).unwrap_or(u64::MAX)).unwrap_or(u32::MAX);
            let per_sm = self.func.occupancy(ctx, threads, bytes)?;
            return Ok(PotentialBlockSize {
                block_threads: threads,
                min_grid_blocks: per_sm.saturating_mul(ctx.device().sm_count()?),
                shared_mem_bytes: bytes,
            });
        }
        self.func
            .max_potential_block_size(ctx, block_limit, |threads| {
                smem.for_block(threads).unwrap_or(u64::MAX)
            })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.decl.name
    }

    /// The declared parameters.
    pub fn params(&self) -> &[Param] {
        &self.decl.params
    }

    /// The driver's layout of the parameters.
    pub fn layout(&self) -> &[ParamSlot] {
        &self.decl.layout
    }

    /// The untyped function (attributes, occupancy, limits).
    pub fn function(&self) -> &Function {
        &self.func
    }

    /// A new, empty argument block for this kernel: the one allocation;
    /// values set later and launches of it allocate nothing.
    pub fn args<'a>(&self) -> ArgBlock<'a> {
        ArgBlock::new(self.decl.clone())
    }

    /// Launches on `stream` with the arguments in `args`, after checking that
    /// the block is this kernel's and complete, and the configuration.
    ///
    /// # Errors
    ///
    /// [`ArgError::WrongKernel`](crate::ArgError::WrongKernel) or [`ArgError::Missing`](crate::ArgError::Missing) (in
    /// [`CudaError::Argument`](crate::CudaError::Argument)) for a block of another declaration or with
    /// parameters unset; [`LaunchError::ProgrammaticNotDeclared`] for a
    /// programmatic launch of a kernel not declared for one;
    /// [`LaunchError::BufferTooShort`] when a declared [`Bound`] fails;
    /// [`CudaError::InvalidArgument`](crate::CudaError::InvalidArgument) for a buffer of another context or a
    /// stream being captured; any other [`LaunchError`] of the configuration
    /// checks (zero or too large extents, cluster, programmatic launch on an
    /// older device); or the driver's failure of the launch.
    pub fn launch(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: &ArgBlock<'_>,
    ) -> CudaResult<()> {
        self.launch_impl(stream, &cfg, args, false)
    }

    /// Launches a cooperative grid (see [`crate::TypedKernel::launch_cooperative`]).
    ///
    /// # Errors
    ///
    /// As for [`DynKernel::launch`], and
    /// [`LaunchError::CooperativeNotSupported`] or
    /// [`LaunchError::CooperativeLaunchTooLarge`] when the device cannot run
    /// the grid cooperatively.
    pub fn launch_cooperative(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: &ArgBlock<'_>,
    ) -> CudaResult<()> {
        self.launch_impl(stream, &cfg, args, true)
    }

    /// Checks a graph kernel node that runs this kernel in `ctx` with `cfg`
    /// and `args` as a launch is checked: the block is this kernel's and
    /// complete, the declared bounds hold, no zero dimension, the block and
    /// shared memory within the function's and the device's limits, the
    /// function and every device buffer of `ctx`.
    pub(crate) fn check_node(
        &self,
        ctx: &Context,
        cfg: &LaunchConfig,
        args: &ArgBlock<'_>,
    ) -> CudaResult<()> {
        args.ready_for(&self.decl)?;
        if self.decl.has_bounds() {
            // SAFETY: every parameter is set (checked above), so each pointer
            // addresses a value of the declared type.
            unsafe { self.decl.check_bounds(cfg, &args.lens, &args.ptrs) }?;
        }
        check_nonzero(&self.decl.name, cfg)?;
        self.func.check_context(ctx)?;
        let device = ctx.device().limits()?;
        let limits = self.func.limits(ctx)?;
        check_shape(&self.decl.name, device, &limits, cfg)?;
        for (i, b) in args.uses.iter().enumerate() {
            if let Some(b) = b {
                b.enter(&self.decl.name, i, ctx)?;
            }
        }
        Ok(())
    }

    /// The function, shared ([`crate::CheckedConfig`] holds it).
    pub(crate) fn function_arc(&self) -> &Arc<Function> {
        &self.func
    }

    /// [`DynKernel::launch_impl`] less the configuration's checks, which
    /// [`DynKernel::check_config`] ran for `func` (this kernel's function
    /// in the stream's context).
    ///
    /// # Safety
    ///
    /// `func` is this kernel's function in `stream`'s context, and `cfg`
    /// passed [`crate::Function`]'s configuration checks there (plain, or
    /// cooperative when `cooperative`), with no cluster and no programmatic
    /// launch.
    #[inline]
    pub(crate) unsafe fn launch_prechecked(
        &self,
        stream: &Stream,
        func: cuda_sys::CUfunction,
        cfg: &LaunchConfig,
        args: &ArgBlock<'_>,
        cooperative: bool,
    ) -> CudaResult<()> {
        self.check_block(stream, cfg, args)?;
        // SAFETY: as in `launch_impl` for the parameters; the caller
        // vouches for `func` and `cfg`.
        unsafe {
            self.func.launch_prechecked(
                stream,
                func,
                cfg,
                args.ptrs.as_ptr().cast_mut(),
                cooperative,
            )
        }
    }

    /// What every launch checks of its argument block: it is this
    /// kernel's and complete, the declared bounds hold under `cfg`, and
    /// each device buffer may be used on `stream` (its context, its loan).
    #[inline]
    fn check_block(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        args: &ArgBlock<'_>,
    ) -> CudaResult<()> {
        args.ready_for(&self.decl)?;
        if self.decl.has_bounds() {
            // SAFETY: every parameter is set (checked above), so each pointer
            // addresses a value of the declared type.
            unsafe { self.decl.check_bounds(cfg, &args.lens, &args.ptrs) }?;
        }
        let ctx = stream.context();
        for (i, b) in args.uses.iter().enumerate() {
            if let Some(b) = b {
                b.enter(&self.decl.name, i, ctx)?;
            }
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn launch_impl(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        args: &ArgBlock<'_>,
        cooperative: bool,
    ) -> CudaResult<()> {
        self.check_programmatic(cfg)?;
        self.check_block(stream, cfg, args)?;
        // SAFETY: the declaration (the caller's promise, checked against the
        // layout) fixed each parameter's type; every value in the block was
        // checked against it (or set through the unsafe set_bytes); the
        // pointers address the block's storage, alive for the call, and the
        // driver only reads through them.
        unsafe {
            self.func
                .launch_raw(stream, cfg, args.ptrs.as_ptr().cast_mut(), cooperative)
        }
    }
}
