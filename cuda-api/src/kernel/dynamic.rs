//! Kernels whose parameters are declared at run time ([`DynKernel`]):
//! names and types checked against the driver's layout, buffer bounds
//! resolved once, launches that take an [`ArgBlock`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::args::ArgBlock;
use super::bounds::{self, Bound, Extent, Resolved};
use super::decl::Decl;
use crate::context::Context;
use crate::error::CudaResult;
use crate::function::Function;
use crate::launch::{LaunchConfig, LaunchError, check_nonzero, check_shape};
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
                bounds: Vec::new(),
            }),
            func: Arc::new(func),
            programmatic: false,
        })
    }

    pub(crate) fn decl(&self) -> &Decl {
        &self.decl
    }

    /// Adds a bound: the buffer passed for parameter `buffer` must hold at
    /// least `at_least` elements, checked at every launch (see
    /// [`Bound`]). Refused when `buffer` is not a pointer parameter,
    /// or an [`Extent::Param`] names no integer parameter. Argument blocks
    /// made before the call belong to the old declaration and are refused.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`](crate::CudaError::InvalidArgument) (call `Bound`) when `buffer` is no
    /// pointer parameter, or `at_least` is an [`Extent::Param`] that names no
    /// integer parameter.
    pub fn bound(self, buffer: usize, at_least: Extent) -> CudaResult<DynKernel> {
        let mut list: Vec<Bound> = self.bounds();
        list.push(Bound::new(buffer, at_least));
        let resolved = bounds::resolve(&self.decl.name, &self.decl.params, &list)?;
        let d = &self.decl;
        Ok(DynKernel {
            decl: Arc::new(Decl {
                id: NEXT_KERNEL_ID.fetch_add(1, Ordering::Relaxed),
                name: d.name.clone(),
                params: d.params.clone(),
                layout: d.layout.clone(),
                space: d.space,
                bounds: resolved,
            }),
            func: self.func,
            programmatic: self.programmatic,
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
        self.decl.bounds.iter().map(Resolved::bound).collect()
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

    #[inline]
    pub(crate) fn launch_impl(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        args: &ArgBlock<'_>,
        cooperative: bool,
    ) -> CudaResult<()> {
        self.check_programmatic(cfg)?;
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
