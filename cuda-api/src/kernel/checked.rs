//! [`CheckedConfig`]: a launch configuration checked once for one kernel in
//! one context, so that a prepared launch does not check it again at every
//! launch ([`DynKernel::check_config`], [`DynKernel::launch_checked`]).
//!
//! What never changes between launches of one configuration, it checks
//! once: zero and too large extents, the block and shared memory against
//! the function's and the device's limits, and for a cooperative launch
//! whether the grid fits. What may change, every launch still checks:
//! whether the driver captures the stream, the stream's context, that the
//! argument block is this kernel's and complete, the declared bounds, and
//! the buffers' contexts and loans.

use std::fmt;
use std::sync::Arc;

use cuda_sys::CUfunction;

use super::args::ArgBlock;
use super::dynamic::DynKernel;
use crate::context::Context;
use crate::error::CudaResult;
use crate::function::Function;
use crate::launch::LaunchConfig;
use crate::stream::Stream;

/// A launch configuration checked once for one kernel in one context:
/// made by [`DynKernel::check_config`], launched by
/// [`DynKernel::launch_checked`].
///
/// It holds the context (a strong reference, so its handle cannot be
/// reused by another context while the configuration exists) and the
/// kernel's function. A launch through another kernel, or on a stream of
/// another context, runs every check instead, as [`DynKernel::launch`]
/// does.
///
/// ```no_run
/// # fn main() -> cuda_api::CudaResult<()> {
/// // GPU: check once, launch many times.
/// use cuda_api::{CudaDevice, DynKernel, LaunchConfig, Module, Stream};
/// let ctx = CudaDevice::get(0)?.primary_context()?;
/// let stream = Stream::new(&ctx)?;
/// let m = Module::from_file(&ctx, "kernels.ptx")?;
/// // SAFETY: `empty` takes no parameters.
/// let k: DynKernel = unsafe { m.dyn_kernel("empty", Vec::new()) }?;
/// let args = k.args();
/// let checked = k.check_config(&ctx, LaunchConfig::new(1, 32), false)?;
/// for _ in 0..100 {
///     k.launch_checked(&stream, &checked, &args)?;
/// }
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CheckedConfig {
    cfg: LaunchConfig,
    cooperative: bool,
    ctx: Context,
    func: Arc<Function>,
    /// The driver's function in `ctx`; `None` when the configuration has
    /// launch attributes (a cluster, a programmatic launch) that every
    /// launch checks and writes on the full road.
    handle: Option<CUfunction>,
}

// SAFETY: a function handle may be used from any thread; the other fields
// are Send and Sync.
unsafe impl Send for CheckedConfig {}
// SAFETY: as above.
unsafe impl Sync for CheckedConfig {}

impl fmt::Debug for CheckedConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckedConfig")
            .field("cfg", &self.cfg)
            .field("cooperative", &self.cooperative)
            .field("ctx", &self.ctx)
            .finish()
    }
}

impl CheckedConfig {
    /// The configuration that was checked.
    pub fn config(&self) -> LaunchConfig {
        self.cfg
    }

    /// Whether it was checked for a cooperative launch.
    pub fn is_cooperative(&self) -> bool {
        self.cooperative
    }

    /// The context it was checked in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }
}

impl DynKernel {
    /// Checks `cfg` once for launches of this kernel in `ctx` (plain, or
    /// cooperative when `cooperative`): what [`DynKernel::launch`] and
    /// [`DynKernel::launch_cooperative`] check of the configuration at
    /// every launch. Launch the result with [`DynKernel::launch_checked`].
    ///
    /// # Errors
    ///
    /// The [`LaunchError`](crate::LaunchError) of the first check that
    /// fails (zero or too large extents, a block or shared memory over the
    /// limits, a cooperative grid that does not fit, a programmatic launch
    /// the kernel was not declared for), a function of another context, or
    /// the driver's failure to answer a query.
    pub fn check_config(
        &self,
        ctx: &Context,
        cfg: LaunchConfig,
        cooperative: bool,
    ) -> CudaResult<CheckedConfig> {
        self.check_programmatic(&cfg)?;
        let handle = self.function_arc().check_config(ctx, &cfg, cooperative)?;
        let short = cfg.cluster.is_none() && !cfg.programmatic;
        Ok(CheckedConfig {
            cfg,
            cooperative,
            ctx: ctx.clone(),
            func: self.function_arc().clone(),
            handle: short.then_some(handle),
        })
    }

    /// Launches with a configuration checked by
    /// [`DynKernel::check_config`]: every check of [`DynKernel::launch`]
    /// runs except those of the configuration. A configuration checked for
    /// another kernel or in another context than `stream`'s is checked
    /// again, as [`DynKernel::launch`] (or
    /// [`DynKernel::launch_cooperative`]) checks it.
    ///
    /// # Errors
    ///
    /// As for [`DynKernel::launch`]: an argument block of another kernel
    /// or with a parameter unset, a declared bound that does not hold, a
    /// buffer of another context or lent, a stream being captured, or the
    /// driver's failure of the launch.
    pub fn launch_checked(
        &self,
        stream: &Stream,
        checked: &CheckedConfig,
        args: &ArgBlock<'_>,
    ) -> CudaResult<()> {
        let handle = checked
            .handle
            .filter(|_| Arc::ptr_eq(&checked.func, self.function_arc()))
            .filter(|_| stream.context() == &checked.ctx);
        match handle {
            // SAFETY: `handle` is this kernel's function in the stream's
            // context (checked above), and `cfg` was checked for it there.
            Some(h) => unsafe {
                self.launch_prechecked(stream, h, &checked.cfg, args, checked.cooperative)
            },
            None => self.launch_impl(stream, &checked.cfg, args, checked.cooperative),
        }
    }
}
