//! [`Launch`]: the one executable unit. An immediate launch builds one and
//! runs it; `record_cmd` returns it; the tape stores them. It owns its
//! argument block and the arrays it uses (so their memory stays alive), is
//! checked when built, and re-checks only what a setter changes.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;

use cuda_api::{ArgBlock, Context, LaunchConfig, Stream};

use crate::array::{AccessMode, Array, Storage};
use crate::device::Device;
use crate::error::{BoundsError, Error, Result, UnprovenError};
use crate::launch::bind::{self, Arg, IntoArg, IntoArgs, Site};
use crate::launch::domain::{self, Plan};
use crate::signature::{AccessTarget, AxisIndex, Pass};

use super::domain::{Dim, MaxBlocks};
use super::kernel::{Kernel, Rules};
use super::prepare;

/// Everything that decides a launch besides its arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    pub device: Device,
    pub pass: Pass,
    pub block_dim: u32,
    pub max_blocks: MaxBlocks,
    pub mode: AccessMode,
    pub cooperative: bool,
    /// Built through `unsafe` [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked): the kernel's
    /// access rules are not checked.
    pub unchecked: bool,
    /// Built by [`Kernel::launch_tiled`](crate::Kernel::launch_tiled):
    /// [`Launch::set_dim`] appends the block dimension.
    pub tiled: bool,
}

impl Options {
    /// The extent a tiled launch appends: the block size (1 on the CPU,
    /// as Warp's `launch_tiled` resolves it there).
    pub(crate) fn tile_extent(&self) -> u32 {
        if self.device == Device::Cpu {
            1
        } else {
            self.block_dim
        }
    }
}

/// A checked, reusable launch of one kernel (Warp's `Launch`, from
/// `record_cmd=True`): dimension, arguments, device and stream are set;
/// setters check like a fresh launch and re-check only what they change;
/// [`Launch::launch`] allocates nothing.
pub struct Launch {
    kernel: Kernel,
    opts: Options,
    dim: Dim,
    plan: Plan,
    cfg: LaunchConfig,
    args: std::mem::ManuallyDrop<Vec<Arg>>,
    block: Option<Box<ArgBlock<'static>>>,
    stream: Option<Stream>,
    /// The context a CUDA launch was checked for (the device's primary
    /// context); every stream it runs on must belong to it.
    ctx: Option<Context>,
    /// Inside [`Launch::edit_unchecked`]: setters of an unchecked launch
    /// are allowed.
    editing: bool,
    /// `cfg` checked once for the kernel in `ctx`, at the first run
    /// ([`prepare::enqueue_checked`]); made again after `cfg` changes.
    checked: std::sync::OnceLock<cuda_api::CheckedConfig>,
}

impl fmt::Debug for Launch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Launch")
            .field("kernel", &self.kernel.name())
            .field("pass", &self.opts.pass)
            .field("device", &self.opts.device)
            .field("dim", &self.dim)
            .field("grid", &self.cfg.grid)
            .field("block", &self.cfg.block)
            .finish()
    }
}

/// Checks `arg` for parameter `index` and writes its bytes into `block`.
fn write_arg(
    kernel: &Kernel,
    opts: &Options,
    block: Option<&mut ArgBlock<'static>>,
    index: usize,
    arg: &Arg,
) -> Result<()> {
    let Some((name, kind)) = kernel.param_at(index) else {
        return Err(kernel.no_such_param(format!("index {index}")));
    };
    let site = Site {
        kernel: kernel.name(),
        index,
        name: &name,
    };
    let bound = bind::check(&site, kind, arg, opts.device, opts.mode)?;
    if let Some(block) = block {
        // SAFETY: `bind::check` matched the argument to the declared
        // parameter type (dtype, kind, struct layout), and the declaration
        // was checked against the driver's layout; array addresses stay
        // valid because the launch keeps the arrays in its arguments.
        bound.with_bytes(|b| unsafe { block.set_bytes(index + 1, b) })?;
    }
    Ok(())
}

/// Checks the kernel's array access rules for a launch with `plan` and the
/// arguments `arg(i)` (forward parameters, then adjoints), refusing a
/// launch that could leave an array. `only`: check just the rules of that
/// argument. Nothing is checked for unchecked launches, CPU launches of a
/// Rust implementation (safe Rust, bounds-checked) and launches of size 0;
/// CPU launches of a module's compiled CPU code are checked as CUDA ones
/// (Warp's C++ indexes host memory without bounds checks).
pub(crate) fn check_accesses<'a>(
    kernel: &Kernel,
    opts: &Options,
    dim: &[i64],
    plan: &Plan,
    arg: impl Fn(usize) -> Option<&'a Arg>,
    only: Option<usize>,
) -> Result<()> {
    check_access_rules(kernel, opts, dim, plan, |i| Extents::of(arg(i)), only)
}

/// What an argument shows the access rules: an array's extents, a null
/// array, or something that is no array (the argument check reports it).
#[derive(Clone, Copy)]
pub(crate) enum Extents<'a> {
    /// An array of these extents.
    Array(&'a [usize]),
    /// Warp's `None` for an array.
    Null,
    /// A struct value's bytes (the `array_t`s of the arrays it holds).
    Struct(&'a [u8]),
    /// Not an array, or no argument.
    Other,
}

impl<'a> Extents<'a> {
    fn of(arg: Option<&'a Arg>) -> Extents<'a> {
        match arg {
            Some(Arg::Array(a)) => Extents::Array(a.shape()),
            Some(Arg::Null) => Extents::Null,
            Some(Arg::Struct(s)) => Extents::Struct(s.bytes()),
            _ => Extents::Other,
        }
    }
}

/// The extents of the `array_t` at byte `offset` of a struct value's
/// `bytes` (its first `ndim` extents, a negative one as 0), as the kernel
/// receives them: `None` for a null array (`data` 0); no extent at all when
/// the bytes end early.
fn held_extents(bytes: &[u8], offset: usize) -> Option<([usize; 4], usize)> {
    use std::mem::offset_of;
    let field = |at: usize, n: usize| {
        offset
            .checked_add(at)
            .and_then(|s| bytes.get(s..s.checked_add(n)?))
    };
    let Some(data) = field(offset_of!(crate::abi::ArrayT, data), 8) else {
        return Some(([0; 4], 0));
    };
    if data.iter().all(|&b| b == 0) {
        return None;
    }
    let ndim = field(offset_of!(crate::abi::ArrayT, ndim), 2)
        .map_or(0, |b| usize::from(u16::from_le_bytes([b[0], b[1]])).min(4));
    let mut shape = [0usize; 4];
    for (k, e) in shape.iter_mut().enumerate().take(ndim) {
        *e = field(offset_of!(crate::abi::ArrayT, shape) + 4 * k, 4).map_or(0, |b| {
            usize::try_from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0)
        });
    }
    Some((shape, ndim))
}

/// [`check_accesses`] over the arguments' extents (`arg(i)` for parameter
/// `i`, adjoints after the forward parameters).
pub(crate) fn check_access_rules<'a>(
    kernel: &Kernel,
    opts: &Options,
    dim: &[i64],
    plan: &Plan,
    arg: impl Fn(usize) -> Extents<'a>,
    only: Option<usize>,
) -> Result<()> {
    if opts.unchecked
        || (opts.device == Device::Cpu && !kernel.runs_native_on_cpu())
        || plan.size == 0
    {
        return Ok(());
    }
    let cpu_unproven = (opts.device == Device::Cpu)
        .then(|| kernel.cpu_unproven())
        .flatten();
    let rules = match (&kernel.inner.rules[opts.pass.index()], cpu_unproven) {
        (Rules::Unproven(u), _) | (_, Some(u)) => {
            return Err(Error::Unproven(Box::new(UnprovenError {
                kernel: kernel.name().to_string(),
                pass: opts.pass,
                unproven: u.clone(),
            })));
        }
        (Rules::Checked(rules), None) => rules,
    };
    let tiles = rules.iter().any(|r| {
        r.indices
            .iter()
            .any(|i| matches!(i, AxisIndex::Tile { .. }))
    });
    let block_dim = plan.block[0].max(1);
    if tiles && !(plan.size as u64).is_multiple_of(u64::from(block_dim)) {
        return Err(Error::PartialTileBlock {
            kernel: kernel.name().to_string(),
            dim: dim.to_vec(),
            size: plan.size as u64,
            block_dim,
        });
    }
    let n = kernel.params().len();
    for r in rules {
        let slot = match (r.target, opts.pass) {
            (AccessTarget::Param, _) => r.index,
            (AccessTarget::Adjoint, Pass::Adjoint) => n + r.index,
            (AccessTarget::Adjoint, Pass::Forward) => continue,
        };
        if only.is_some_and(|o| o != slot) {
            continue;
        }
        let held;
        let shape: &[usize] = match (arg(slot), &r.held) {
            (Extents::Array(shape), None) => shape,
            (Extents::Null, None) if r.null_ok => continue,
            (Extents::Null, None) => &[],
            (Extents::Struct(bytes), Some((offset, _))) => match held_extents(bytes, *offset) {
                Some(h) => {
                    held = h;
                    &held.0[..held.1]
                }
                None if r.null_ok => continue,
                None => &[],
            },
            // Not an array (or not a struct): the argument check reports it.
            _ => continue,
        };
        let refuse = |axis: usize, index: Option<AxisIndex>, needed: u64| {
            let param = match (&r.held, kernel.param_at(slot)) {
                (Some((_, path)), _) => path.clone(),
                (None, Some((name, _))) => name.into_owned(),
                (None, None) => String::new(),
            };
            Err(Error::OutOfBounds(Box::new(BoundsError {
                kernel: kernel.name().to_string(),
                param,
                axis,
                index,
                dim: dim.to_vec(),
                needed,
                shape: shape.to_vec(),
                line: r.line,
            })))
        };
        for axis in 0..r.indices.len().max(shape.len()) {
            let extent = shape.get(axis).map_or(0, |&e| e as u64);
            let Some(&index) = r.indices.get(axis) else {
                if extent == 0 {
                    return refuse(axis, None, 1);
                }
                continue;
            };
            let (ok, needed) = match index {
                AxisIndex::Thread(k) => {
                    let runs = plan.bounds.shape.get(k).map_or(u64::MAX, |&e| u64::from(e));
                    (runs <= extent, runs)
                }
                AxisIndex::WorkItem => {
                    let runs = plan.size as u64;
                    (runs <= extent, runs)
                }
                AxisIndex::Block => {
                    let runs = plan.blocks();
                    (runs <= extent, runs)
                }
                AxisIndex::Tile {
                    thread,
                    scale,
                    offset,
                    len,
                } => {
                    // The kernel skips elements past the extent itself; only
                    // its 32-bit index must not wrap.
                    let runs = thread.map_or(1, |k| {
                        plan.bounds.shape.get(k).map_or(u64::MAX, |&e| u64::from(e))
                    });
                    let last = AxisIndex::tile_last(scale, offset, len, runs);
                    let limit = i32::MAX as u128;
                    (last <= limit, u64::try_from(last).unwrap_or(u64::MAX))
                }
                AxisIndex::Modulo { axis: by } => {
                    // x % extent(by), x >= 0: in [0, extent(by)); by 0 undefined.
                    let divisor = shape.get(by).map_or(0, |&e| e as u64);
                    if divisor == 0 {
                        return refuse(by, Some(index), 1);
                    }
                    (divisor <= extent, divisor)
                }
                AxisIndex::Constant(c) => {
                    // c in [-extent, extent): c + 1 elements, or |c| from the end.
                    let needed = if c >= 0 {
                        c.unsigned_abs().saturating_add(1)
                    } else {
                        c.unsigned_abs()
                    };
                    (needed <= extent, needed)
                }
                // A rule of a kind this crate does not know (warp-proof's
                // enums are `#[non_exhaustive]`): refused.
                _ => (false, u64::MAX),
            };
            if !ok {
                return refuse(axis, Some(index), needed);
            }
        }
    }
    Ok(())
}

/// The plan and the access check of a CUDA launch of `kernel` over `dim`,
/// made without a device (`max_blocks` 0: no cap): the differential
/// fuzzer's question (`fuzzing::cuda_c_accepts`). `shapes` holds one entry
/// per parameter after the launch bounds: an array's shape, `None` for a
/// value.
pub(crate) fn check_host(
    kernel: &Kernel,
    dim: &[i64],
    block_dim: u32,
    max_blocks: u64,
    shapes: &[Option<Vec<usize>>],
) -> Result<Plan> {
    let opts = Options {
        device: Device::Cuda(0),
        pass: Pass::Forward,
        block_dim,
        max_blocks: NonZeroU64::new(max_blocks).map_or(MaxBlocks::Unlimited, MaxBlocks::Cap),
        mode: AccessMode::Checked,
        cooperative: false,
        unchecked: false,
        tiled: false,
    };
    let plan = Launch::plan_for(kernel, dim, &opts)?;
    let arg = |i: usize| match shapes.get(i) {
        Some(Some(s)) => Extents::Array(s.as_slice()),
        _ => Extents::Other,
    };
    check_access_rules(kernel, &opts, dim, &plan, arg, None)?;
    Ok(plan)
}

/// The checks of a safe forward launch of `kernel` on `"cpu"` over `dim`,
/// without arguments or CPU code: the plan Warp's CPU runs (one block of
/// one thread at a time, every work item in turn), `cpu_unproven` (the
/// kernel's CPU verdict, which a loaded module keeps with its CPU code)
/// refused as such a launch refuses it, then every access rule against
/// `args` (one entry per parameter: an array's extents, a struct's bytes).
/// For `warp_launch::fuzzing`, whose Warp kernels run on the host.
pub(crate) fn check_host_cpu(
    kernel: &Kernel,
    dim: &[i64],
    cpu_unproven: Option<&crate::signature::Unproven>,
    args: &[Extents<'_>],
) -> Result<Plan> {
    let mut opts = Options {
        device: Device::Cpu,
        pass: Pass::Forward,
        block_dim: 1,
        max_blocks: MaxBlocks::Unlimited,
        mode: AccessMode::Checked,
        cooperative: false,
        unchecked: false,
        tiled: false,
    };
    let plan = Launch::plan_for(kernel, dim, &opts)?;
    if let Some(u) = cpu_unproven
        && plan.size > 0
    {
        return Err(Error::Unproven(Box::new(UnprovenError {
            kernel: kernel.name().to_string(),
            pass: Pass::Forward,
            unproven: u.clone(),
        })));
    }
    // The rules a CPU launch of compiled CPU code checks: as a CUDA
    // device's, its CPU verdict handled above.
    opts.device = Device::Cuda(0);
    let arg = |i: usize| args.get(i).copied().unwrap_or(Extents::Other);
    check_access_rules(kernel, &opts, dim, &plan, arg, None)?;
    Ok(plan)
}

fn unchecked_setter(kernel: &Kernel, setter: &'static str) -> Error {
    Error::UncheckedSetter {
        kernel: kernel.name().to_string(),
        setter,
    }
}

impl Launch {
    pub(crate) fn build(
        kernel: &Kernel,
        dim: &[i64],
        args: Vec<Arg>,
        opts: Options,
        stream: Option<Stream>,
    ) -> Result<Launch> {
        prepare::check_count(kernel, opts.pass, args.len())?;
        if let Some(s) = &stream {
            prepare::check_stream_device(kernel, s, opts.device)?;
        }
        let ctx = match opts.device {
            Device::Cuda(_) => Some(opts.device.context()?),
            Device::Cpu => None,
        };
        let block = match opts.device {
            Device::Cpu => {
                kernel.cpu(opts.pass)?;
                None
            }
            Device::Cuda(ordinal) => {
                let k = kernel.cuda(ordinal, opts.pass)?;
                if let Some(ctx) = &ctx {
                    if let Some(s) = &stream {
                        prepare::check_stream_context(kernel, s, ctx)?;
                    }
                    prepare::opt_in_shared_mem(k, ctx, kernel.shared_mem(opts.pass))?;
                }
                Some(
                    match kernel.inner.cuda.as_ref().and_then(|c| c.loaded(ordinal)) {
                        Some(c) => c.take_block(opts.pass, k),
                        None => Box::new(k.args()),
                    },
                )
            }
        };
        let plan = Self::plan_for(kernel, dim, &opts)?;
        let mut launch = Launch {
            ctx,
            kernel: kernel.clone(),
            cfg: Self::config(kernel, &plan, &opts),
            opts,
            dim: Dim::from(dim),
            plan,
            args: std::mem::ManuallyDrop::new(args),
            block,
            stream,
            editing: false,
            checked: std::sync::OnceLock::new(),
        };
        launch.write_bounds()?;
        for (i, a) in launch.args.iter().enumerate() {
            write_arg(
                &launch.kernel,
                &launch.opts,
                launch.block.as_deref_mut(),
                i,
                a,
            )?;
        }
        // After the argument checks, so that a wrong argument is named as
        // such; a refused launch is dropped unrun.
        check_accesses(
            &launch.kernel,
            &launch.opts,
            dim,
            &launch.plan,
            |i| launch.args.get(i),
            None,
        )?;
        Ok(launch)
    }

    fn plan_for(kernel: &Kernel, dim: &[i64], opts: &Options) -> Result<Plan> {
        let dim_err = |error| Error::Dim {
            kernel: kernel.name().to_string(),
            error,
        };
        let block_dim = if opts.device == Device::Cpu {
            1
        } else {
            if let Some(n) = kernel.fixed_block_dim()
                && n != opts.block_dim
            {
                return Err(Error::CompiledBlockDim {
                    kernel: kernel.name().to_string(),
                    given: opts.block_dim,
                    compiled: n,
                });
            }
            opts.block_dim
        };
        if opts.max_blocks == MaxBlocks::Resident && !kernel.is_grid_stride() {
            return Err(Error::ResidentLean {
                kernel: kernel.name().to_string(),
            });
        }
        let max_blocks = opts.max_blocks.cap(|| {
            if opts.device == Device::Cpu {
                // The CPU runs one thread at a time: one block of one.
                return Ok(NonZeroU64::MIN);
            }
            let ctx = opts.device.context()?;
            let f = kernel
                .cuda(opts.device.ordinal().unwrap_or(0), opts.pass)?
                .function();
            let grid = f.max_cooperative_grid(&ctx, block_dim, kernel.shared_mem(opts.pass))?;
            NonZeroU64::new(u64::from(grid)).ok_or_else(|| Error::NoResidentGrid {
                kernel: kernel.name().to_string(),
                block_dim,
            })
        })?;
        domain::plan_with(
            dim,
            domain::KernelShape {
                ndim: kernel.kernel_dim(),
                grid_stride: kernel.is_grid_stride(),
            },
            block_dim,
            max_blocks,
        )
        .map_err(dim_err)
    }

    fn config(kernel: &Kernel, plan: &Plan, opts: &Options) -> LaunchConfig {
        LaunchConfig::new(
            (plan.grid[0], plan.grid[1], plan.grid[2]),
            (plan.block[0], plan.block[1], plan.block[2]),
        )
        .with_shared_mem(kernel.shared_mem(opts.pass))
    }

    fn write_bounds(&mut self) -> Result<()> {
        match &mut self.block {
            Some(block) => prepare::write_bounds(block, &self.plan),
            None => Ok(()),
        }
    }

    fn write_arg(&mut self, index: usize, arg: &Arg) -> Result<()> {
        write_arg(
            &self.kernel,
            &self.opts,
            self.block.as_deref_mut(),
            index,
            arg,
        )
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Whether it runs the forward or the backward kernel.
    pub fn pass(&self) -> Pass {
        self.opts.pass
    }

    /// The device it runs on.
    pub fn device(&self) -> Device {
        self.opts.device
    }

    /// The launch domain as given (with the block dimension appended for a
    /// launch made by [`Kernel::launch_tiled`](crate::Kernel::launch_tiled)).
    pub fn dim(&self) -> &[i64] {
        self.dim.as_slice()
    }

    /// The plan: bounds, grid and block.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The arguments (forward, then adjoints for an adjoint launch).
    pub fn args(&self) -> &[Arg] {
        &self.args
    }

    /// The stream it was built for ([`LaunchBuilder::stream`](crate::LaunchBuilder::stream)), if
    /// any: where [`Launch::launch`] runs it, and where array operations go
    /// to stay in order with it (`None` means the device's current stream,
    /// [`Device::stream`], for both).
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// // GPU: zero the output on the launch's stream before each replay.
    /// use warp_launch::{AotModule, Array, Device, Stream};
    /// // SAFETY: the directory is one wp.compile_aot_module output, unchanged.
    /// let saxpy = unsafe { AotModule::load("target/warp-aot/aot") }?.kernel("saxpy")?;
    /// let stream = Stream::new(&Device::Cuda(0).context()?)?;
    /// let (x, y) = (Array::zeros::<f32>("cuda:0", &[64])?, Array::zeros::<f32>("cuda:0", &[64])?);
    /// let l = saxpy.launch(64).inputs((2.0f32, &x, &y)).stream(&stream).record_cmd()?;
    /// y.zero_on(l.stream())?;
    /// l.launch()?;
    /// # Ok(()) }
    /// ```
    pub fn stream(&self) -> Option<&Stream> {
        self.stream.as_ref()
    }

    /// Sets the domain (checked as a fresh launch, the kernel's array
    /// access rules included). A launch made by
    /// [`Kernel::launch_tiled`](crate::Kernel::launch_tiled) takes the domain
    /// without the block dimension and appends it, as `launch_tiled` does
    /// ([`Launch::dim`] shows it appended).
    ///
    /// # Errors
    ///
    /// [`Error::Dim`], [`Error::OutOfBounds`], [`Error::PartialTileBlock`] or
    /// [`Error::Unproven`] as a fresh launch over `dim`; [`Error::UncheckedSetter`] on an unchecked launch outside
    /// [`Launch::edit_unchecked`]. The launch keeps its domain on error.
    pub fn set_dim(&mut self, dim: &[i64]) -> Result<&mut Self> {
        if self.opts.unchecked && !self.editing {
            return Err(unchecked_setter(&self.kernel, "set_dim"));
        }
        let tiled;
        let dim = if self.opts.tiled {
            let (e, n) =
                domain::tiled_dim(dim, self.opts.tile_extent()).map_err(|error| Error::Dim {
                    kernel: self.kernel.name().to_string(),
                    error,
                })?;
            tiled = e;
            &tiled[..n]
        } else {
            dim
        };
        let plan = Self::plan_for(&self.kernel, dim, &self.opts)?;
        check_accesses(
            &self.kernel,
            &self.opts,
            dim,
            &plan,
            |i| self.args.get(i),
            None,
        )?;
        self.cfg = Self::config(&self.kernel, &plan, &self.opts);
        self.checked = std::sync::OnceLock::new();
        self.plan = plan;
        self.dim = Dim::from(dim);
        self.write_bounds()?;
        Ok(self)
    }

    /// Sets parameter `index` (0 is the kernel's first parameter after the
    /// bounds; adjoints follow the forward parameters), checked as in a
    /// fresh launch. An index the kernel does not have is an error.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchParam`] for an index the kernel does not have; [`Error::Argument`],
    /// [`Error::Access`] or [`Error::OutOfBounds`] when the value fails a launch's checks;
    /// [`Error::UncheckedSetter`] as [`Launch::set_dim`]. The launch keeps its argument on
    /// error.
    pub fn set_param_at_index(&mut self, index: usize, value: impl IntoArg) -> Result<&mut Self> {
        if index >= self.args.len() {
            return Err(self.kernel.no_such_param(format!("index {index}")));
        }
        if self.opts.unchecked && !self.editing {
            return Err(unchecked_setter(&self.kernel, "set_param_at_index"));
        }
        let arg = value.into_arg();
        // The argument's own checks first (nothing written), then the
        // access rules, then the write: a refused value changes nothing.
        write_arg(&self.kernel, &self.opts, None, index, &arg)?;
        check_accesses(
            &self.kernel,
            &self.opts,
            self.dim.as_slice(),
            &self.plan,
            |i| {
                if i == index {
                    Some(&arg)
                } else {
                    self.args.get(i)
                }
            },
            Some(index),
        )?;
        self.write_arg(index, &arg)?;
        self.args[index] = arg;
        Ok(self)
    }

    /// Sets parameter `name` (`adj_<name>` for an adjoint), checked as in a
    /// fresh launch. A name the kernel does not have is an error.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchParam`] for a name the kernel does not have; otherwise those of
    /// [`Launch::set_param_at_index`].
    pub fn set_param_by_name(&mut self, name: &str, value: impl IntoArg) -> Result<&mut Self> {
        let index = self.kernel.param_index(name)?;
        self.set_param_at_index(index, value)
    }

    /// Sets every parameter from `values` (as many as the launch takes).
    ///
    /// # Errors
    ///
    /// [`Error::ArgumentCount`] when `values` has another count; otherwise those of
    /// [`Launch::set_param_at_index`].
    pub fn set_params(&mut self, values: impl IntoArgs) -> Result<&mut Self> {
        if self.opts.unchecked && !self.editing {
            return Err(unchecked_setter(&self.kernel, "set_params"));
        }
        let mut args = Vec::with_capacity(self.args.len());
        values.push_into(&mut args);
        if args.len() != self.args.len() {
            return Err(prepare::count_error(
                &self.kernel,
                Pass::Forward,
                "set_params",
                args.len(),
            ));
        }
        for (i, a) in args.iter().enumerate() {
            write_arg(&self.kernel, &self.opts, None, i, a)?;
        }
        check_accesses(
            &self.kernel,
            &self.opts,
            self.dim.as_slice(),
            &self.plan,
            |i| args.get(i),
            None,
        )?;
        for (i, a) in args.into_iter().enumerate() {
            self.write_arg(i, &a)?;
            self.args[i] = a;
        }
        Ok(self)
    }

    /// Runs the launch (Warp's `Launch.launch()`) on the stream it was
    /// built for ([`LaunchBuilder::stream`](crate::LaunchBuilder::stream)), else the device's current
    /// stream ([`Device::stream`]: a [`ScopedStream`](crate::ScopedStream)'s, or the default
    /// one); on the CPU device, runs it on this thread. Allocates nothing;
    /// a domain of size 0 launches nothing.
    ///
    /// # Errors
    ///
    /// [`Error::StreamContext`] for a stream of another context than the
    /// launch's; [`Error::Lent`] for an array lent to cudarc
    /// ([`Array::to_cudarc`](crate::Array::to_cudarc)); the driver's
    /// refusal (or its failure to order the stream after a pool array's
    /// zeroing) as [`Error::Cuda`]; on the CPU, the implementation's error.
    pub fn launch(&self) -> Result<()> {
        self.run_on(self.stream.as_ref())
    }

    /// Runs the launch on `stream` instead (which must belong to the
    /// context the launch was checked for, its device's primary context).
    /// Allocates nothing; a domain of size 0 launches nothing.
    ///
    /// # Errors
    ///
    /// As [`Launch::launch`].
    pub fn launch_on(&self, stream: &Stream) -> Result<()> {
        self.run_on(Some(stream))
    }

    pub(crate) fn run_on(&self, stream: Option<&Stream>) -> Result<()> {
        if self.plan.size == 0 {
            return Ok(());
        }
        let Some(block) = &self.block else {
            return prepare::run_cpu(&self.kernel, self.opts.pass, &self.plan.bounds, &self.args);
        };
        // A CUDA launch always has its context (`build` sets it with the
        // block); the device's is the same one.
        let owned;
        let ctx = match &self.ctx {
            Some(c) => c,
            None => {
                owned = self.opts.device.context()?;
                &owned
            }
        };
        let mut slot = None;
        let stream =
            prepare::launch_stream(&self.kernel, self.opts.device, ctx, stream, &mut slot)?;
        // Held until the launch is queued (page-locked and managed arrays).
        let _locks = self.note_uses(stream)?;
        let k = self.kernel.cuda(self.ordinal(), self.opts.pass)?;
        let checked = match self.checked.get() {
            Some(c) => c,
            None => {
                let c = k.check_config(ctx, self.cfg, self.opts.cooperative)?;
                self.checked.get_or_init(|| c)
            }
        };
        prepare::enqueue_checked(k, stream, checked, block)
    }

    /// The launch's CUDA device ordinal (0 for a CPU launch, which has no
    /// CUDA functions).
    fn ordinal(&self) -> i32 {
        self.opts.device.ordinal().unwrap_or(0)
    }

    /// Notes that work about to be queued on `stream` uses this launch's
    /// arrays (and their gradients), at each run and replay
    /// ([`prepare::note_uses`]: host reads and frees wait for it, `stream`
    /// waits for a pool array's zeroing on another stream, lent arrays are
    /// refused); the storage locks it returns are held until the launch is
    /// queued.
    pub(crate) fn note_uses(&self, stream: &Stream) -> Result<crate::array::StorageLocks> {
        prepare::note_uses(
            &self.kernel,
            self.args.iter().map(|a| (a.as_array(), a.held())),
            stream,
        )
    }

    /// The storages of this launch's arrays (the arguments and the arrays
    /// struct arguments hold) and of their gradients (what
    /// [`Launch::note_uses`] notes; a graph collects them once).
    pub(crate) fn storages(&self) -> impl Iterator<Item = &Arc<Storage>> {
        self.args
            .iter()
            .flat_map(|a| {
                a.as_array()
                    .into_iter()
                    .chain(a.held().iter().map(|h| &h.array))
            })
            .flat_map(|a| std::iter::once(a).chain(a.grad()))
            .map(Array::storage)
    }

    /// What a CUDA graph node running this launch needs: the kernel, the
    /// configuration, the argument block and whether it is cooperative.
    /// Every launch enters a graph through here, so this is where it is
    /// checked for the graph's context `graph` (the context of the stream
    /// it is captured on, or of the executable graph it updates): a graph
    /// runs in one context, the one its launches were checked for and its
    /// arrays live in, which host reads and frees of them wait for. `call`
    /// names the graph call in the error.
    ///
    /// # Errors
    ///
    /// [`Error::CpuGraphNode`] for a CPU launch, [`Error::StreamContext`]
    /// when `graph` is not the launch's context.
    pub(crate) fn graph_parts(
        &self,
        graph: &Context,
        call: &str,
    ) -> Result<prepare::NodeParts<'_>> {
        let (Some(block), Some(ctx)) = (&self.block, &self.ctx) else {
            return Err(Error::CpuGraphNode {
                kernel: self.kernel.name().to_string(),
            });
        };
        prepare::check_context(
            || format!("{call}: launch of kernel '{}'", self.kernel.name()),
            graph,
            ctx,
        )?;
        Ok(prepare::NodeParts {
            kernel: self.kernel.cuda(self.ordinal(), self.opts.pass)?,
            cfg: self.cfg,
            block,
            cooperative: self.opts.cooperative,
            empty: self.plan.size == 0,
        })
    }

    /// The same launch for the backward kernel, with `adjoints` (one per
    /// parameter, in order: gradients of arrays, zeros of values).
    pub(crate) fn adjoint_of(&self, adjoints: Vec<Arg>) -> Result<Launch> {
        let mut args = self.args[..self.kernel.params().len()].to_vec();
        args.extend(adjoints);
        let mut opts = self.opts;
        opts.pass = Pass::Adjoint;
        Launch::build(
            &self.kernel,
            self.dim.as_slice(),
            args,
            opts,
            self.stream.clone(),
        )
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        if let (Some(block), Some(c)) = (
            self.block.take(),
            self.kernel
                .inner
                .cuda
                .as_ref()
                .and_then(|c| c.loaded(self.ordinal())),
        ) {
            c.give_block(self.opts.pass, block);
        }
        // SAFETY: `drop` runs once and `args` is not used after this.
        let args = unsafe { std::mem::ManuallyDrop::take(&mut self.args) };
        self.kernel.inner.give_args(args);
    }
}
impl Launch {
    /// Changes a launch built with the `unsafe`
    /// [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked): inside `change`, its setters work as
    /// on any launch but skip the kernel's access rules.
    ///
    /// # Safety
    ///
    /// The launch after `change` must meet the contract of
    /// [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked) (the kernel stays inside its arrays over
    /// the new domain with the new arguments, in every later run).
    ///
    /// # Errors
    ///
    /// Whatever `change` returns; its setters' errors are those of [`Launch::set_dim`] and
    /// [`Launch::set_param_at_index`] less their access-rule checks.
    pub unsafe fn edit_unchecked(
        &mut self,
        change: impl FnOnce(&mut Launch) -> Result<()>,
    ) -> Result<()> {
        self.editing = true;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| change(&mut *self)));
        self.editing = false;
        match result {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Whether the launch was built with the `unsafe`
    /// [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked) (its access rules are not checked).
    pub fn is_unchecked(&self) -> bool {
        self.opts.unchecked
    }

    /// A copy of this launch (its argument block rebuilt and re-checked).
    ///
    /// # Errors
    ///
    /// [`Error::Cuda`] when a new argument block cannot be made, or any check of the launch (as
    /// [`LaunchBuilder::record_cmd`](crate::LaunchBuilder::record_cmd)).
    pub fn try_clone(&self) -> Result<Launch> {
        let mut l = Launch::build(
            &self.kernel,
            self.dim.as_slice(),
            self.args.to_vec(),
            self.opts,
            self.stream.clone(),
        )?;
        l.cfg = self.cfg;
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::DType;
    use crate::array::Array;
    use crate::launch::KernelSpec;
    use crate::signature::AxisIndex;

    const ACCESS_CU: &str = include_str!("../../tests/fixtures/wp_access.cu");
    const ACCESS_META: &str = include_str!("../../tests/fixtures/wp_access.meta");
    const KERNELS_CU: &str = include_str!("../../tests/fixtures/wp_kernels.cu");
    const KERNELS_META: &str = include_str!("../../tests/fixtures/wp_kernels.meta");
    const TILES_CU: &str = include_str!("../../tests/fixtures/wp_tiles.cu");
    const TILES_META: &str = include_str!("../../tests/fixtures/wp_tiles.meta");

    /// Kernel `key` of a fixture module as AotModule declares it, with a
    /// do-nothing CPU body (no GPU here: only its rules are used).
    fn warp_kernel(cu: &str, meta: &str, key: &str) -> Kernel {
        crate::aot::declarations(cu, "wp_access.cu", meta, "m.meta")
            .unwrap()
            .into_iter()
            .find(|d| d.key == key)
            .unwrap()
            .spec
            .declare()
            .unwrap()
            .with_cpu(
                crate::cpu::cpu_each_fn(|_, each| each.run(|_| Ok(()))),
                None,
            )
    }

    fn opts(adjoint: bool, unchecked: bool) -> Options {
        Options {
            device: Device::Cuda(0),
            pass: if adjoint {
                Pass::Adjoint
            } else {
                Pass::Forward
            },
            block_dim: 256,
            max_blocks: MaxBlocks::Unlimited,
            mode: AccessMode::Checked,
            cooperative: false,
            unchecked,
            tiled: false,
        }
    }

    fn check(k: &Kernel, dim: &[i64], args: &[Arg], o: Options) -> Result<()> {
        let plan = Launch::plan_for(k, dim, &o).unwrap();
        check_accesses(k, &o, dim, &plan, |i| args.get(i), None)
    }

    fn f32s(shape: &[usize]) -> Arg {
        Arg::Array(Array::zeros::<f32>(Device::Cpu, shape).unwrap())
    }

    fn bounds(e: Error) -> BoundsError {
        match e {
            Error::OutOfBounds(b) => *b,
            other => panic!("expected OutOfBounds, got {other}"),
        }
    }

    const MODULO_CU: &str = include_str!("../../tests/fixtures/modulo/wp_modulo.cu");
    const MODULO_META: &str = include_str!("../../tests/fixtures/modulo/wp_modulo.meta");

    fn i32s(shape: &[usize]) -> Arg {
        Arg::Array(Array::zeros::<i32>(Device::Cpu, shape).unwrap())
    }

    /// `a[x % a.shape[k]]` (tests/warp/modulo.py): any dim over a non-empty
    /// axis `k`; an empty one is refused (a modulo by 0), naming the axis;
    /// a launch of size 0 divides by nothing. (The CPU's compiled code is
    /// checked by the same function: `warp-corpus`'s `cpu_modulo` test.)
    #[test]
    fn modulo_rules_refuse_an_empty_divisor_only() {
        let hist = warp_kernel(MODULO_CU, MODULO_META, "hist");
        let o = opts(false, false);
        for dim in [1, 3, 1_000_000] {
            check(&hist, &[dim], &[i32s(&[3])], o).unwrap();
        }
        let b = bounds(check(&hist, &[5], &[i32s(&[0])], o).unwrap_err());
        assert_eq!(
            (
                b.kernel.as_str(),
                b.param.as_str(),
                b.axis,
                b.index,
                b.needed
            ),
            ("hist", "out", 0, Some(AxisIndex::Modulo { axis: 0 }), 1)
        );
        let shown = Error::OutOfBounds(Box::new(b)).to_string();
        for part in [
            "kernel 'hist'",
            "array 'out'",
            "axis 0",
            "modulo by 0",
            "SIGFPE",
        ] {
            assert!(shown.contains(part), "{part}: {shown}");
        }
        check(&hist, &[0], &[i32s(&[0])], o).unwrap();
        // x[j % x.shape[0], i % x.shape[1]]: both axes must be non-empty.
        let wrap = warp_kernel(MODULO_CU, MODULO_META, "wrap2d");
        check(&wrap, &[4, 9], &[f32s(&[2, 3]), f32s(&[4])], o).unwrap();
        let b = bounds(check(&wrap, &[4, 9], &[f32s(&[2, 0]), f32s(&[4])], o).unwrap_err());
        assert_eq!((b.param.as_str(), b.axis), ("x", 1));
        // out[i % out.shape[1]] on a 1-d out: axis 1 has extent 0.
        let axis1 = warp_kernel(MODULO_CU, MODULO_META, "wrap_axis1");
        let b = bounds(check(&axis1, &[4], &[i32s(&[8])], o).unwrap_err());
        assert_eq!((b.axis, b.index), (1, Some(AxisIndex::Modulo { axis: 1 })));
        // A declared rule dividing by a longer axis than the indexed one.
        let k = KernelSpec::new("wide", 1)
            .array::<f32>("a", 2)
            .access(
                "a",
                &[AxisIndex::Modulo { axis: 1 }, AxisIndex::Constant(0)],
            )
            .declare()
            .unwrap()
            .with_cpu(
                crate::cpu::cpu_each_fn(|_, each| each.run(|_| Ok(()))),
                None,
            );
        check(&k, &[7], &[f32s(&[3, 3])], o).unwrap();
        let b = bounds(check(&k, &[7], &[f32s(&[2, 3])], o).unwrap_err());
        assert_eq!((b.axis, b.needed), (0, 3));
        assert!(
            Error::OutOfBounds(Box::new(b))
                .to_string()
                .contains("which reaches 2")
        );
    }

    /// `through_struct` (access.py) reads `h.data[i]`: the rule of the
    /// array the struct holds is checked against the bytes the kernel gets
    /// (a value made by `with_arrays`, or one from raw bytes), per axis,
    /// named `h.data`; a null held array is refused.
    #[test]
    fn held_array_rules_are_checked_against_the_struct_value() {
        use crate::launch::bind::StructValue;
        let k = warp_kernel(ACCESS_CU, ACCESS_META, "through_struct");
        let Some((_, crate::signature::ParamKind::Struct(st))) = k.param_at(0) else {
            panic!("through_struct takes a struct first")
        };
        let st = st.clone();
        let holder = |n: usize| {
            let data = Array::zeros::<f32>(Device::Cpu, &[n]).unwrap();
            Arg::Struct(StructValue::with_arrays(&st, vec![0; st.size], vec![data]).unwrap())
        };
        let o = opts(false, false);
        check(&k, &[4], &[holder(4), f32s(&[4])], o).unwrap();
        check(&k, &[3], &[holder(4), f32s(&[4])], o).unwrap();
        let b = bounds(check(&k, &[5], &[holder(4), f32s(&[8])], o).unwrap_err());
        assert_eq!(
            (
                b.param.as_str(),
                b.axis,
                b.index,
                b.needed,
                b.shape.as_slice()
            ),
            ("h.data", 0, Some(AxisIndex::Thread(0)), 5, &[4][..])
        );
        assert!(
            Error::OutOfBounds(Box::new(b))
                .to_string()
                .contains("array 'h.data'")
        );
        // A value from raw bytes: the extents its array_t says.
        let Arg::Struct(v) = holder(6) else {
            unreachable!()
        };
        // SAFETY: never launched; only its bytes are read by the check.
        let raw = unsafe { StructValue::from_bytes(v.name(), v.bytes()) };
        check(&k, &[6], &[Arg::Struct(raw.clone()), f32s(&[6])], o).unwrap();
        let b = bounds(check(&k, &[7], &[Arg::Struct(raw), f32s(&[7])], o).unwrap_err());
        assert_eq!((b.param.as_str(), b.needed), ("h.data", 7));
        // Zeroed bytes: a null held array.
        // SAFETY: as above.
        let null = unsafe { StructValue::from_bytes(v.name(), &vec![0; st.size]) };
        let b = bounds(check(&k, &[1], &[Arg::Struct(null), f32s(&[1])], o).unwrap_err());
        assert_eq!((b.param.as_str(), b.shape.len()), ("h.data", 0));
        // A declared rule names a held array by its path; another path, or
        // a path into a parameter that is no struct, is no parameter.
        let spec = |name: &str| {
            KernelSpec::new("held", 1)
                .param("h", crate::signature::ParamKind::Struct(st.clone()))
                .array::<f32>("x", 1)
                .access(name, &[AxisIndex::Thread(0)])
                .declare()
        };
        assert!(spec("h.data").is_ok());
        for bad in ["h.scale", "h.nope", "x.data"] {
            let e = spec(bad).unwrap_err();
            assert!(matches!(e, Error::AccessRule(_)), "{bad}: {e}");
        }
    }

    #[test]
    fn max_blocks_keeps_the_cap_as_given() {
        assert_eq!(MaxBlocks::from_warp(0), MaxBlocks::Unlimited);
        assert_eq!(MaxBlocks::from_warp(-7), MaxBlocks::Unlimited);
        assert_eq!(MaxBlocks::from_warp(i64::MIN), MaxBlocks::Unlimited);
        let big = 5_000_000_000u64;
        assert_eq!(
            MaxBlocks::from(big as i64),
            MaxBlocks::Cap(NonZeroU64::new(big).unwrap())
        );
        assert_eq!(MaxBlocks::from(u64::MAX), MaxBlocks::Cap(NonZeroU64::MAX));
        assert_eq!(MaxBlocks::from(0u32), MaxBlocks::Unlimited);
        assert_eq!(
            MaxBlocks::from(3),
            MaxBlocks::Cap(NonZeroU64::new(3).unwrap())
        );
        // A launch refuses a cap above the grid limit naming the value given
        // (not 4294967295, what a u32 would have made of it).
        let k = KernelSpec::new("fill", 1)
            .array::<f32>("x", 1)
            .indexed_by_thread("x")
            .declare()
            .unwrap()
            .with_cpu(
                crate::cpu::cpu_each_fn(|_, each| each.run(|_| Ok(()))),
                None,
            );
        let x = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
        for (cap, shown) in [
            (MaxBlocks::from(big as i64), "5000000000"),
            (MaxBlocks::from(u64::MAX), "18446744073709551615"),
        ] {
            let e = k
                .launch(4)
                .device("cpu")
                .max_blocks(cap)
                .inputs(&x)
                .record_cmd()
                .unwrap_err();
            assert!(
                matches!(&e, Error::Dim { error: crate::launch::domain::DimError::MaxBlocksTooLarge { max_blocks }, .. } if MaxBlocks::from(*max_blocks) == cap),
                "{e}"
            );
            assert!(e.to_string().contains(shown), "{e}");
        }
        k.launch(4)
            .device("cpu")
            .max_blocks(2)
            .inputs(&x)
            .record_cmd()
            .unwrap();
        // Resident caps a loop: a lean kernel refuses it, by name.
        let lean = KernelSpec::new("lean_fill", 1)
            .array::<f32>("x", 1)
            .grid_stride(false)
            .declare()
            .unwrap()
            .with_cpu(
                crate::cpu::cpu_each_fn(|_, each| each.run(|_| Ok(()))),
                None,
            );
        let e = lean
            .launch(4)
            .device("cpu")
            .max_blocks(MaxBlocks::Resident)
            .inputs(&x)
            .record_cmd()
            .unwrap_err();
        assert!(
            matches!(&e, Error::ResidentLean { kernel } if kernel == "lean_fill"),
            "{e}"
        );
    }

    /// The launch vocabulary's typed refusals: a kernel without the
    /// function a pass needs, and a safe setter on an unchecked launch.
    #[test]
    fn missing_functions_and_unchecked_setters_are_typed() {
        let spec = KernelSpec::new("k", 1)
            .array::<f32>("x", 1)
            .indexed_by_thread("x");
        let x = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
        // Declared only: no CPU function for either pass.
        let bare = spec.clone().declare().unwrap();
        let e = bare.launch(4).device("cpu").inputs(&x).run().unwrap_err();
        assert!(
            matches!(&e, Error::NoCpuFunction { kernel, pass: Pass::Forward } if kernel == "k"),
            "{e}"
        );
        assert!(e.to_string().contains("Kernel::with_cpu"), "{e}");
        assert!(matches!(
            bare.cuda_function(Pass::Forward),
            Err(Error::NoCudaFunction {
                pass: Pass::Forward,
                ..
            })
        ));
        // A forward-only CPU implementation refuses the adjoint pass.
        let fwd = bare.with_cpu(
            crate::cpu::cpu_each_fn(|_, each| each.run(|_| Ok(()))),
            None,
        );
        let e = fwd
            .launch(4)
            .device("cpu")
            .pass(Pass::Adjoint)
            .inputs(&x)
            .adj_inputs(&x)
            .record_cmd()
            .unwrap_err();
        assert!(
            matches!(
                &e,
                Error::NoCpuFunction {
                    pass: Pass::Adjoint,
                    ..
                }
            ),
            "{e}"
        );
        let l = fwd.launch(4).device("cpu").inputs(&x).record_cmd().unwrap();
        assert_eq!(l.pass(), Pass::Forward);
        l.launch().unwrap();
        // SAFETY: the body touches nothing.
        let mut u = unsafe { fwd.launch(4).device("cpu").inputs(&x).unchecked() }
            .record_cmd()
            .unwrap();
        let e = u.set_dim(&[2]).map(|_| ()).unwrap_err();
        assert!(
            matches!(&e, Error::UncheckedSetter { kernel, setter: "set_dim" } if kernel == "k"),
            "{e}"
        );
        assert!(e.to_string().contains("edit_unchecked"), "{e}");
    }

    #[test]
    fn fill_over_65536_on_4_elements_is_refused() {
        let fill = warp_kernel(ACCESS_CU, ACCESS_META, "fill");
        let args = [f32s(&[4]), Arg::Value(crate::abi::Value::of(1.0f32))];
        let e = check(&fill, &[65_536], &args, opts(false, false)).unwrap_err();
        let shown = e.to_string();
        let b = bounds(e);
        assert_eq!(
            (
                b.kernel.as_str(),
                b.param.as_str(),
                b.axis,
                b.needed,
                b.shape.as_slice()
            ),
            ("fill", "x", 0, 65_536, &[4][..])
        );
        assert_eq!(b.index, Some(AxisIndex::Thread(0)));
        assert_eq!(b.line, 384);
        for part in [
            "kernel 'fill'",
            "[65536]",
            "array 'x'",
            "axis 0",
            "extent 4",
            "at most 4",
        ] {
            assert!(shown.contains(part), "{part}: {shown}");
        }
        // In bounds: dim 4, dim 3, and extra dimensions folded into one coordinate.
        for dim in [&[4][..], &[3], &[4, 1000], &[0], &[65_536, 0]] {
            check(&fill, dim, &args, opts(false, false)).unwrap();
        }
        check(&fill, &[5], &args, opts(false, false)).unwrap_err();
        // A null array has no elements.
        let null = [Arg::Null, args[1].clone()];
        assert!(
            bounds(check(&fill, &[1], &null, opts(false, false)).unwrap_err())
                .shape
                .is_empty()
        );
        // The backward kernel: x and adj_x (a null adjoint is skipped by Warp's adjoint code).
        let bwd = [
            args[0].clone(),
            args[1].clone(),
            Arg::Null,
            Arg::Value(crate::abi::Value::of(0.0f32)),
        ];
        check(&fill, &[4], &bwd, opts(true, false)).unwrap();
        check(&fill, &[5], &bwd, opts(true, false)).unwrap_err();
        let bwd_big_adj = [f32s(&[8]), args[1].clone(), f32s(&[4]), bwd[3].clone()];
        let b = bounds(check(&fill, &[6], &bwd_big_adj, opts(true, false)).unwrap_err());
        assert_eq!((b.param.as_str(), b.shape.as_slice()), ("adj_x", &[4][..]));
        // Unchecked launches and CPU launches check nothing here.
        check(&fill, &[65_536], &args, opts(false, true)).unwrap();
        let mut cpu = opts(false, false);
        cpu.device = Device::Cpu;
        check(&fill, &[65_536], &args, cpu).unwrap();
    }

    #[test]
    fn every_kernels_py_kernel_checks_its_shapes() {
        let v = |x: f32| Arg::Value(crate::abi::Value::of(x));
        let k = |key| warp_kernel(KERNELS_CU, KERNELS_META, key);
        // add2d over [3, 5]: arrays of [3, 5] fit, [5, 3] does not.
        let add2d = k("add2d");
        check(
            &add2d,
            &[3, 5],
            &[f32s(&[3, 5]), f32s(&[3, 5]), f32s(&[3, 5])],
            opts(false, false),
        )
        .unwrap();
        let b = bounds(
            check(
                &add2d,
                &[3, 5],
                &[f32s(&[3, 5]), f32s(&[3, 5]), f32s(&[5, 3])],
                opts(false, false),
            )
            .unwrap_err(),
        );
        assert_eq!((b.param.as_str(), b.axis, b.needed), ("out", 1, 5));
        // chain_loss: loss[0] needs one element whatever the domain.
        let loss = k("chain_loss");
        check(
            &loss,
            &[100],
            &[f32s(&[100]), f32s(&[1])],
            opts(false, false),
        )
        .unwrap();
        let b = bounds(
            check(&loss, &[1], &[f32s(&[100]), f32s(&[0])], opts(false, false)).unwrap_err(),
        );
        assert_eq!(
            (b.param.as_str(), b.index, b.needed),
            ("loss", Some(AxisIndex::Constant(0)), 1)
        );
        assert!(
            bounds(
                check(
                    &loss,
                    &[101],
                    &[f32s(&[100]), f32s(&[1])],
                    opts(false, false)
                )
                .unwrap_err()
            )
            .param
                == "y"
        );
        // saxpy: both arrays.
        let saxpy = k("saxpy");
        let b = bounds(
            check(
                &saxpy,
                &[10],
                &[v(2.0), f32s(&[10]), f32s(&[9])],
                opts(false, false),
            )
            .unwrap_err(),
        );
        assert_eq!(b.param, "y");
        let _ = v;
    }

    #[test]
    fn access_fixture_rules_at_launch() {
        let ends = warp_kernel(ACCESS_CU, ACCESS_META, "ends");
        // x[0] and x[-1] need one element; out[i] needs the domain.
        check(&ends, &[3], &[f32s(&[1]), f32s(&[3])], opts(false, false)).unwrap();
        let b =
            bounds(check(&ends, &[3], &[f32s(&[0]), f32s(&[3])], opts(false, false)).unwrap_err());
        assert_eq!(
            (b.param.as_str(), b.index),
            ("x", Some(AxisIndex::Constant(0)))
        );
        // out[j, i] = a[i, j]: out's axis 0 follows the launch's dimension 1.
        let t = warp_kernel(ACCESS_CU, ACCESS_META, "transpose");
        check(
            &t,
            &[2, 3],
            &[f32s(&[2, 3]), f32s(&[3, 2])],
            opts(false, false),
        )
        .unwrap();
        let b = bounds(
            check(
                &t,
                &[2, 3],
                &[f32s(&[2, 3]), f32s(&[2, 3])],
                opts(false, false),
            )
            .unwrap_err(),
        );
        assert_eq!(
            (b.param.as_str(), b.axis, b.index, b.needed),
            ("out", 0, Some(AxisIndex::Thread(1)), 3)
        );
        // Unproven kernels: refused, naming kernel, parameter, line and the way out.
        let gather = warp_kernel(ACCESS_CU, ACCESS_META, "gather");
        let args = [f32s(&[4]), f32s(&[4]), f32s(&[4])];
        let e = check(&gather, &[4], &args, opts(false, false)).unwrap_err();
        let shown = e.to_string();
        assert!(
            matches!(e, Error::Unproven(ref u) if u.kernel == "gather" && u.unproven.param == "x" && u.pass == Pass::Forward)
        );
        for part in [
            "kernel 'gather'",
            "wp_access.cu:192",
            "parameter 'x'",
            "`var_2` is computed",
            "unchecked()",
            "Safety",
        ] {
            assert!(shown.contains(part), "{part}: {shown}");
        }
        // Warp's debug mode stops neither a shape read nor native code past
        // an array, so the message does not offer it.
        assert!(!shown.contains("mode = \"debug\""), "{shown}");
        check(&gather, &[4], &args, opts(false, true)).unwrap();
        // Size 0 runs nothing.
        check(&gather, &[0], &args, opts(false, false)).unwrap();
    }

    #[test]
    fn declared_rules_of_cuda_c_kernels() {
        let body = || crate::cpu::cpu_each_fn(|_, each| each.run(|_| Ok(())));
        // grid_sum: x[idx] (work items), partial[blockIdx.x], out[0].
        let k = KernelSpec::new("grid_sum", 1)
            .array::<f32>("x", 1)
            .array::<f32>("partial", 1)
            .array::<f32>("out", 1)
            .access("x", &[AxisIndex::WorkItem])
            .access("partial", &[AxisIndex::Block])
            .access("out", &[AxisIndex::Constant(0)])
            .declare()
            .unwrap()
            .with_cpu(body(), None);
        // 1000 items at 256 per block: 4 blocks.
        check(
            &k,
            &[1000],
            &[f32s(&[1000]), f32s(&[4]), f32s(&[1])],
            opts(false, false),
        )
        .unwrap();
        let b = bounds(
            check(
                &k,
                &[1000],
                &[f32s(&[1000]), f32s(&[3]), f32s(&[1])],
                opts(false, false),
            )
            .unwrap_err(),
        );
        assert_eq!((b.param.as_str(), b.needed), ("partial", 4));
        let b = bounds(
            check(
                &k,
                &[10, 100],
                &[f32s(&[999]), f32s(&[4]), f32s(&[1])],
                opts(false, false),
            )
            .unwrap_err(),
        );
        assert_eq!((b.param.as_str(), b.needed), ("x", 1000));
        // indexed_by_thread: every axis; an empty axis the kernel does not index is refused too.
        let k = KernelSpec::new("scale2d", 2)
            .array::<f32>("a", 2)
            .indexed_by_thread("a")
            .declare()
            .unwrap()
            .with_cpu(body(), None);
        check(&k, &[2, 3], &[f32s(&[2, 3])], opts(false, false)).unwrap();
        check(&k, &[2, 4], &[f32s(&[2, 3])], opts(false, false)).unwrap_err();
        let k = KernelSpec::new("rows", 1)
            .param(
                "a",
                crate::signature::ParamKind::Array {
                    dtype: DType::FLOAT32,
                    ndim: None,
                },
            )
            .access("a", &[AxisIndex::Thread(0)])
            .declare()
            .unwrap()
            .with_cpu(body(), None);
        let b = bounds(check(&k, &[2], &[f32s(&[2, 0])], opts(false, false)).unwrap_err());
        assert_eq!((b.axis, b.index), (1, None));
        // Declaration mistakes are errors at load, naming the rule.
        for (spec, says) in [
            (
                KernelSpec::new("k", 1).indexed_by_thread("x"),
                "no parameter 'x'",
            ),
            (
                KernelSpec::new("k", 1)
                    .value::<f32>("x")
                    .access("x", &[AxisIndex::Thread(0)]),
                "not an array",
            ),
            (
                KernelSpec::new("k", 1)
                    .array::<f32>("x", 1)
                    .access("x", &[AxisIndex::Thread(1)]),
                "thread coordinate 1",
            ),
            (
                KernelSpec::new("k", 1)
                    .array::<f32>("x", 1)
                    .access("x", &[]),
                "0 index(es)",
            ),
        ] {
            let e = spec.declare().unwrap_err().to_string();
            assert!(e.contains(says), "{says}: {e}");
        }
        // unproven(): safe launches refused.
        let k = KernelSpec::new("k", 1)
            .array::<f32>("x", 1)
            .unproven("x", "x[idx[i]]")
            .declare()
            .unwrap()
            .with_cpu(body(), None);
        let e = check(&k, &[1], &[f32s(&[4])], opts(false, false))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the declaration") && e.contains("x[idx[i]]"),
            "{e}"
        );
    }

    /// The options of a forward launch at `block_dim` (tile modules are
    /// compiled for 64 or 128).
    fn at_block(block_dim: u32) -> Options {
        Options {
            block_dim,
            ..opts(false, false)
        }
    }

    #[test]
    fn tile_kernels_declare_from_the_generated_source() {
        let decls = |text: &str| {
            crate::aot::declarations(text, "wp_tiles.cu", TILES_META, "m.meta").unwrap()
        };
        let d = decls(TILES_CU);
        let keys: Vec<&str> = d.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "scale_unchecked",
                "row_sums",
                "shifted_rows",
                "total_sum",
                "scale_shared",
                "scale_tiles"
            ]
        );
        let get = |k: &str| &d.iter().find(|d| d.key == k).unwrap().spec;
        let s = get("scale_tiles");
        assert_eq!(s.fixed_block_dim(), Some(64));
        assert_eq!(
            s.params()
                .iter()
                .map(|p| format!("{}: {}", p.name, p.kind.describe()))
                .collect::<Vec<_>>(),
            [
                "a: an array of float32 with 2 dimension(s)",
                "s: a float32 value",
                "out: an array of float32 with 2 dimension(s)"
            ]
        );
        assert!(matches!(s.accesses(Pass::Forward), crate::Accesses::Checked(l) if l.len() == 2));
        assert!(matches!(
            s.accesses(Pass::Adjoint),
            crate::Accesses::Unproven(_)
        ));
        // Register tiles use no dynamic shared memory; the shared tile does.
        assert_eq!(
            warp_kernel(TILES_CU, TILES_META, "scale_tiles").shared_mem(Pass::Forward),
            0
        );
        let k = warp_kernel(TILES_CU, TILES_META, "scale_shared");
        assert_eq!(
            (k.shared_mem(Pass::Forward), k.shared_mem(Pass::Adjoint)),
            (512, 1024)
        );
        // The block_dim 128 module differs in its first define only.
        let d128 = decls(&TILES_CU.replace(
            "#define WP_TILE_BLOCK_DIM 64\n",
            "#define WP_TILE_BLOCK_DIM 128\n",
        ));
        assert!(d128.iter().all(|d| d.spec.fixed_block_dim() == Some(128)));
    }

    #[test]
    fn tile_kernels_run_whole_blocks_and_keep_their_index_in_int32() {
        let v = Arg::Value(crate::abi::Value::of(0.75f32));
        let k = warp_kernel(TILES_CU, TILES_META, "scale_tiles");
        let args = [f32s(&[37, 50]), v.clone(), f32s(&[37, 50])];
        // launch_tiled([5, 4]) at block_dim 64 is the domain [5, 4, 64].
        check(&k, &[5, 4, 64], &args, at_block(64)).unwrap();
        // Arrays smaller than the tiles, empty or null: the kernel skips what is past their ends.
        check(
            &k,
            &[5, 4, 64],
            &[f32s(&[1, 1]), v.clone(), f32s(&[0, 3])],
            at_block(64),
        )
        .unwrap();
        check(
            &k,
            &[5, 4, 64],
            &[Arg::Null, v.clone(), Arg::Null],
            at_block(64),
        )
        .unwrap();
        // Another block size than the module's: refused naming both.
        let e = Launch::plan_for(&k, &[5, 4, 128], &at_block(128)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::CompiledBlockDim {
                    given: 128,
                    compiled: 64,
                    ..
                }
            ),
            "{e}"
        );
        // Not whole blocks: 20 work items at 64 per block.
        let e = check(&k, &[5, 4], &args, at_block(64)).unwrap_err();
        let shown = e.to_string();
        assert!(
            matches!(&e, Error::PartialTileBlock { kernel, size: 20, block_dim: 64, dim } if kernel == "scale_tiles" && dim == &[5, 4]),
            "{e}"
        );
        for part in ["barriers", "[5, 4]", "launch_tiled", "multiple of 64"] {
            assert!(shown.contains(part), "{part}: {shown}");
        }
        // Any domain of whole blocks is fine (the launch shape is the user's choice).
        check(&k, &[5, 4, 128], &args, at_block(64)).unwrap();
        check(&k, &[64], &args, at_block(64)).unwrap();
        // i * 8 + 7 must fit in int32: i runs below 2^28 at most.
        check(&k, &[1 << 28, 1, 64], &args, at_block(64)).unwrap();
        let e = check(&k, &[(1 << 28) + 1, 1, 64], &args, at_block(64)).unwrap_err();
        let shown = e.to_string();
        let b = bounds(e);
        assert_eq!(
            (b.param.as_str(), b.axis, b.index, b.needed, b.line),
            (
                "a",
                0,
                Some(AxisIndex::Tile {
                    thread: Some(0),
                    scale: 8,
                    offset: 0,
                    len: 8
                }),
                (1 << 31) + 7,
                702
            )
        );
        for part in [
            "tile of 8",
            "8 * thread coordinate 0 + 0",
            "2147483655",
            "2147483647",
        ] {
            assert!(shown.contains(part), "{part}: {shown}");
        }
        // The reductions: one row or one chunk per block.
        let rows = warp_kernel(TILES_CU, TILES_META, "row_sums");
        check(
            &rows,
            &[37, 64],
            &[f32s(&[37, 100]), f32s(&[37])],
            at_block(64),
        )
        .unwrap();
        let total = warp_kernel(TILES_CU, TILES_META, "total_sum");
        check(&total, &[4, 64], &[f32s(&[1000]), f32s(&[1])], at_block(64)).unwrap();
        // The offset 0 reaches element 0 of an axis the tile does not cover: a 2-D total is
        // refused when its second axis is empty.
        let b = bounds(
            check(
                &total,
                &[4, 64],
                &[f32s(&[1000]), f32s(&[1, 0])],
                at_block(64),
            )
            .unwrap_err(),
        );
        assert_eq!((b.param.as_str(), b.axis, b.index), ("total", 1, None));
        // Refused kernels: safe launches name the tile call; unchecked ones run.
        for (key, says) in [
            ("scale_shared", "shared-memory tile"),
            ("scale_unchecked", "bounds_check=False"),
            ("shifted_rows", "`var_5` is computed"),
        ] {
            let k = warp_kernel(TILES_CU, TILES_META, key);
            let n = k.params().len();
            let args: Vec<Arg> = (0..n).map(|_| f32s(&[37, 50])).collect();
            let e = check(&k, &[5, 4, 64], &args, at_block(64)).unwrap_err();
            assert!(
                matches!(e, Error::Unproven(_)) && e.to_string().contains(says),
                "{key}: {e}"
            );
            check(
                &k,
                &[5, 4, 64],
                &args,
                Options {
                    unchecked: true,
                    ..at_block(64)
                },
            )
            .unwrap();
        }
        // Backward tile kernels are refused too.
        let e = check(
            &k,
            &[5, 4, 64],
            &[
                args[0].clone(),
                v.clone(),
                args[2].clone(),
                Arg::Null,
                v,
                Arg::Null,
            ],
            Options {
                pass: Pass::Adjoint,
                ..at_block(64)
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("adj_tile_store"), "{e}");
    }

    #[test]
    fn launch_tiled_appends_the_block_dimension() {
        let k = warp_kernel(TILES_CU, TILES_META, "scale_tiles");
        let a = Array::zeros::<f32>(Device::Cpu, &[37, 50]).unwrap();
        let out = Array::zeros::<f32>(Device::Cpu, &[37, 50]).unwrap();
        // On the CPU the block is one thread, as in Warp without enable_cpu_blocks.
        let mut l = k
            .launch_tiled([5, 4])
            .device("cpu")
            .inputs((&a, 0.75f32))
            .outputs(&out)
            .record_cmd()
            .unwrap();
        assert_eq!(l.dim(), &[5, 4, 1]);
        assert_eq!(l.plan().bounds.coord_mult, 1);
        l.set_dim(&[3]).unwrap();
        assert_eq!(l.dim(), &[3, 1]);
        let e = l.set_dim(&[1, 2, 3, 4]).map(|_| ()).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Dim {
                    error: crate::launch::domain::DimError::TiledTooManyDims { given: 4 },
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(l.dim(), &[3, 1]);
        // A plain launch keeps its domain as given.
        let l = k
            .launch([5, 4])
            .device("cpu")
            .inputs((&a, 0.75f32))
            .outputs(&out)
            .record_cmd()
            .unwrap();
        assert_eq!(l.dim(), &[5, 4]);
        // Four extents cannot take a fifth, on any device (refused before the device is touched).
        for dev in [Device::Cpu, Device::Cuda(0)] {
            let e = k
                .launch_tiled([1, 2, 3, 4])
                .device(dev)
                .inputs((&a, 0.75f32))
                .outputs(&out)
                .record_cmd()
                .unwrap_err();
            let shown = e.to_string();
            assert!(
                matches!(&e, Error::Dim { kernel, error: crate::launch::domain::DimError::TiledTooManyDims { given: 4 } } if kernel == "scale_tiles"),
                "{e}"
            );
            assert!(shown.contains("at most 3 extents"), "{shown}");
        }
        // The CUDA extent is the block size of the launch.
        assert_eq!(at_block(64).tile_extent(), 64);
        assert_eq!(
            Options {
                device: Device::Cpu,
                ..at_block(64)
            }
            .tile_extent(),
            1
        );
    }
}
