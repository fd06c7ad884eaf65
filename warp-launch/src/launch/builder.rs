//! [`LaunchBuilder`]: a launch being described (Warp's `wp.launch` keyword
//! arguments as methods, its domain a [`Dim`] and grid-stride cap a
//! [`MaxBlocks`]); it checks everything once and becomes a [`Launch`].
//! Its entries, [`Kernel::launch`] and [`Kernel::launch_tiled`], live here
//! with it, so that `kernel` does not import the builder back.

use cuda_api::Stream;

use super::bind::{Arg, ArgSlot, IntoArgs, TypedArg};
use super::domain::{self, Dim, MaxBlocks};
use super::kernel::Kernel;
use super::launch::{Launch, Options};
use super::memo::How;
use super::prepare;
use super::record;
use crate::abi::Value;
use crate::array::{AccessMode, thread_access_mode};
use crate::device::{Device, IntoDevice};
use crate::error::{Error, Result};
use crate::signature::{ParamKind, Pass};

/// The most arguments an immediate builder launch passes the positional
/// road ([`LaunchBuilder::run_direct`]); more take the full road.
const DIRECT_MAX: usize = 16;

/// A launch being described: [`Kernel::launch`] starts one; `inputs`,
/// `outputs` and the other settings follow; [`LaunchBuilder::run`] checks
/// and launches, [`LaunchBuilder::record_cmd`] checks and returns the
/// [`Launch`] for replay (Warp's `record_cmd=True`).
#[must_use = "a launch does nothing until .run() or .record_cmd()"]
pub struct LaunchBuilder<'k> {
    kernel: &'k Kernel,
    dim: Dim,
    /// Inputs, then outputs (`n_inputs` of the first); arrays passed by
    /// reference stay borrowed.
    args: Vec<ArgSlot<'k>>,
    n_inputs: usize,
    /// Adjoints of the inputs, then of the outputs.
    adj: Vec<Arg>,
    n_adj_inputs: usize,
    device: Option<Device>,
    stream: Option<&'k Stream>,
    pass: Pass,
    record_tape: bool,
    block_dim: Option<u32>,
    max_blocks: MaxBlocks,
    mode: Option<AccessMode>,
    cooperative: bool,
    unchecked: bool,
    tiled: bool,
    bad_device: Option<Box<Error>>,
}

impl Kernel {
    /// Starts a launch over `dim`: an integer, or 1 to 4 extents
    /// (`[n]`, `[rows, cols]`, `vec![...]`); see [`LaunchBuilder`].
    pub fn launch(&self, dim: impl Into<Dim>) -> LaunchBuilder<'_> {
        LaunchBuilder::new(self, dim.into())
    }

    /// Starts a tiled launch over `dim` (Warp's `wp.launch_tiled`): the
    /// block size is appended to `dim` as one more extent, so the threads of
    /// a block share every coordinate of `wp.tid()` and work on one tile
    /// together (`launch_tiled([m, n])` launches `[m, n, block_dim]`; a
    /// kernel whose `wp.tid()` has 2 coordinates folds the third into
    /// `coord_mult`, as Warp does). The block size is the one the kernel was
    /// compiled for (a Warp module's `block_dim`, `WP_TILE_BLOCK_DIM`), else
    /// [`LaunchBuilder::block_dim`] or 256; the CPU device appends 1, as Warp
    /// does without `enable_cpu_blocks`. Everything else is as
    /// [`Kernel::launch`]; the domain may have at most 3 extents.
    ///
    /// Unlike Warp, which takes `block_dim` as an argument and compiles a
    /// module for it on the fly, an ahead-of-time module runs only at the
    /// block size it was compiled for: asking for another one with
    /// [`LaunchBuilder::block_dim`] is refused with
    /// [`Error::CompiledBlockDim`] (naming both); compile one module per
    /// block size (`wp.set_module_options({"block_dim": n})`). Safe launches
    /// of tile kernels check Warp's tile loads and stores as
    /// [`AxisIndex::Tile`](crate::AxisIndex::Tile) rules.
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// use warp_launch::{AotModule, Array, Device};
    /// // tiles.py: i, j = wp.tid(); t = wp.tile_load(a, shape=(8, 16), offset=(i * 8, j * 16)); ...
    /// // SAFETY: the directory is one wp.compile_aot_module output, unchanged.
    /// let module = unsafe { AotModule::load("target/warp-aot/tiles/bd64") }?;
    /// let scale = module.kernel("scale_tiles")?;
    /// let a = Array::zeros::<f32>(Device::Cuda(0), &[37, 50])?;
    /// let out = Array::zeros::<f32>(Device::Cuda(0), &[37, 50])?;
    /// // 5 x 4 tiles of 8 x 16: the domain [5, 4, 64], 64 threads per tile.
    /// scale.launch_tiled([5, 4]).inputs((&a, 0.5f32)).outputs(&out).run()?;
    /// # Ok(()) }
    /// ```
    pub fn launch_tiled(&self, dim: impl Into<Dim>) -> LaunchBuilder<'_> {
        LaunchBuilder::new_tiled(self, dim.into())
    }
}

impl<'k> LaunchBuilder<'k> {
    /// A launch of `kernel` over `dim` with Warp's defaults (forward pass,
    /// recorded by a tape, no grid-stride cap); [`Kernel::launch`] calls it.
    #[inline]
    pub(crate) fn new(kernel: &'k Kernel, dim: Dim) -> Self {
        LaunchBuilder {
            kernel,
            dim,
            args: kernel.inner.take_slots(),
            n_inputs: 0,
            adj: Vec::new(),
            n_adj_inputs: 0,
            device: None,
            stream: None,
            pass: Pass::Forward,
            record_tape: true,
            block_dim: None,
            max_blocks: MaxBlocks::Unlimited,
            mode: None,
            cooperative: false,
            unchecked: false,
            tiled: false,
            bad_device: None,
        }
    }

    /// A tiled launch of `kernel` over `dim` ([`Kernel::launch_tiled`]).
    #[inline]
    pub(crate) fn new_tiled(kernel: &'k Kernel, dim: Dim) -> Self {
        let mut b = Self::new(kernel, dim);
        b.tiled = true;
        b
    }

    /// Input arguments (a tuple of arrays and values, or a `Vec<Arg>`).
    /// An array passed by reference (`&x`) stays borrowed until the launch
    /// runs (no handle is cloned); pass it by value to let the builder own
    /// a handle. Values are converted to their parameters' dtypes when the launch is
    /// checked, and refused when they do not fit (an integer out of range,
    /// a finite number that a float parameter would turn into infinity):
    /// see [`IntoArg`](crate::IntoArg) for the rule.
    ///
    /// A builder cannot outlive an array it borrows: this does not compile
    /// (`x` is dropped while the builder still holds it).
    ///
    /// ```compile_fail,E0597
    /// use warp_launch::{Array, Device, Kernel};
    /// fn build(k: &Kernel) {
    ///     let b = {
    ///         let x = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    ///         k.launch(4).inputs((2.0f32, &x))
    ///     };
    ///     drop(b);
    /// }
    /// ```
    ///
    /// Passed by value, the builder owns a handle and the array may go:
    ///
    /// ```
    /// use warp_launch::{Array, Device, Kernel};
    /// fn build(k: &Kernel) {
    ///     let b = {
    ///         let x = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    ///         k.launch(4).inputs((2.0f32, x.clone()))
    ///     };
    ///     drop(b);
    /// }
    /// ```
    #[inline]
    pub fn inputs(mut self, args: impl IntoArgs + 'k) -> Self {
        let outputs = self.args.split_off(self.n_inputs);
        args.push_slots(&mut self.args);
        self.n_inputs = self.args.len();
        self.args.extend(outputs);
        self
    }

    /// Output arguments (after the inputs, in the kernel's order),
    /// borrowed or owned as for [`LaunchBuilder::inputs`].
    #[inline]
    pub fn outputs(mut self, args: impl IntoArgs + 'k) -> Self {
        args.push_slots(&mut self.args);
        self
    }

    /// Adjoints of the inputs, for an adjoint launch.
    #[inline]
    pub fn adj_inputs(mut self, args: impl IntoArgs) -> Self {
        let outputs = self.adj.split_off(self.n_adj_inputs);
        args.push_into(&mut self.adj);
        self.n_adj_inputs = self.adj.len();
        self.adj.extend(outputs);
        self
    }

    /// Adjoints of the outputs, for an adjoint launch.
    #[inline]
    pub fn adj_outputs(mut self, args: impl IntoArgs) -> Self {
        args.push_into(&mut self.adj);
        self
    }

    /// The device (`Device`, or a string such as `"cuda:0"` or `"cpu"`).
    /// Default: the stream's device if a stream is given, else the default
    /// device ([`Device::current`]: `cuda:0` when a CUDA driver has a device,
    /// else `"cpu"`, as in Warp; the arrays do not choose it).
    #[inline]
    pub fn device(mut self, device: impl IntoDevice) -> Self {
        match device.into_device() {
            Ok(d) => self.device = Some(d),
            Err(e) => self.bad_device = Some(Box::new(e)),
        }
        self
    }

    /// The stream (default: the device's current stream, [`Device::stream`](crate::Device::stream): a [`ScopedStream`](crate::ScopedStream)'s or the default one).
    #[inline]
    pub fn stream(mut self, stream: &'k Stream) -> Self {
        self.stream = Some(stream);
        self
    }

    /// Which kernel runs (default [`Pass::Forward`]); an adjoint launch
    /// takes the adjoints of its arguments too (`adj_inputs`,
    /// `adj_outputs`), as Warp's `wp.launch(..., adjoint=True)`.
    #[inline]
    pub fn pass(mut self, pass: Pass) -> Self {
        self.pass = pass;
        self
    }

    /// Whether a recording tape records it (default true).
    #[inline]
    pub fn record_tape(mut self, yes: bool) -> Self {
        self.record_tape = yes;
        self
    }

    /// Threads per block (default: the block size the kernel was compiled
    /// for if fixed, else 256; the CPU uses 1). A kernel compiled for one
    /// block size refuses any other ([`Error::CompiledBlockDim`], naming
    /// both); for [`Kernel::launch_tiled`] this is also the extent appended
    /// to the domain.
    #[inline]
    pub fn block_dim(mut self, n: u32) -> Self {
        self.block_dim = Some(n);
        self
    }

    /// Caps the grid of a grid-stride kernel: a [`MaxBlocks`] (e.g.
    /// [`MaxBlocks::Resident`]) or Warp's integer (0 or less is unlimited;
    /// a cap is kept exactly as given and checked when the launch is
    /// built); lean kernels refuse a cap.
    #[inline]
    pub fn max_blocks(mut self, max_blocks: impl Into<MaxBlocks>) -> Self {
        self.max_blocks = max_blocks.into();
        self
    }

    /// The access mode for this launch (default: this thread's, see
    /// [`crate::set_thread_access_mode`]). Every mode refuses memory the
    /// launch device is known not to reach; [`AccessMode::Relaxed`] only
    /// skips the driver query.
    #[inline]
    pub fn access_mode(mut self, mode: AccessMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Launches cooperatively through `cuda-api`'s validated path (the grid
    /// must be resident: combine with `max_blocks(MaxBlocks::Resident)`
    /// for a grid-stride kernel).
    #[inline]
    pub fn cooperative(mut self, yes: bool) -> Self {
        self.cooperative = yes;
        self
    }

    /// Skips the kernel's array access rules for this launch: the launch no
    /// longer refuses a domain larger than the arrays the kernel indexes
    /// with it, nor a kernel whose accesses no launch can check (an index
    /// read from data, arithmetic on indices, loops, views, arrays passed to
    /// functions; see [`Error::Unproven`]). Everything else is still checked
    /// (argument kinds, dtypes, dimensions, devices, grid and block).
    ///
    /// # Safety
    ///
    /// The caller promises that the kernel, run over this launch's domain
    /// with these arguments, reads and writes only elements inside the
    /// arrays it is given (for every thread the grid runs, whatever the
    /// block size), and no other memory. The promise covers every later run
    /// of the launch: its replays ([`Launch::launch`], [`Launch::launch_on`],
    /// graphs captured from it), and, when a recording tape records it, the
    /// backward kernel that [`crate::Tape::backward`] runs with the same
    /// domain, the same arguments and their gradients (a null array for an
    /// array without one). A [`Launch`] built this way refuses its safe
    /// setters; change it with [`Launch::edit_unchecked`].
    ///
    /// Warp's debug mode (`wp.config.mode = "debug"`) is no guard for the
    /// promise: it asserts on array indices and on vector and matrix
    /// components, but `x.shape[k]` is unchecked in every build, and
    /// native code (`@wp.func_native`) and preambles are the user's C++,
    /// which no mode checks.
    pub unsafe fn unchecked(mut self) -> Self {
        self.unchecked = true;
        self
    }

    /// The launch; it keeps a handle to the stream when `keep_stream` (a
    /// recorded launch runs later on it).
    fn into_launch(self, keep_stream: bool) -> Result<Launch> {
        if let Some(e) = self.bad_device {
            return Err(*e);
        }
        let device = match (self.device, self.stream) {
            (Some(d), _) => d,
            (None, Some(s)) => Device::from(s.context().device()),
            (None, None) => Device::current(),
        };
        let kernel = self.kernel;
        self.build_launch(keep_stream, device)
            .map_err(|e| e.for_launch(kernel.name(), device))
    }

    fn build_launch(self, keep_stream: bool, device: Device) -> Result<Launch> {
        let n_fwd = self.args.len();
        let mut args = self.kernel.inner.take_args();
        let mut slots = self.args;
        args.extend(slots.drain(..).map(ArgSlot::into_owned));
        self.kernel.inner.give_slots(slots);
        if self.pass == Pass::Adjoint {
            let n_adj = self.adj.len();
            if n_fwd != self.kernel.params().len() {
                return Err(prepare::count_error(
                    self.kernel,
                    Pass::Forward,
                    "inputs + outputs",
                    n_fwd,
                ));
            }
            if n_adj != n_fwd {
                return Err(prepare::count_error(
                    self.kernel,
                    Pass::Adjoint,
                    "adj_inputs + adj_outputs",
                    n_adj,
                ));
            }
            args.extend(self.adj);
        }
        let opts = Options {
            device,
            pass: self.pass,
            block_dim: self
                .block_dim
                .or(self.kernel.fixed_block_dim())
                .unwrap_or(domain::DEFAULT_BLOCK_DIM),
            max_blocks: self.max_blocks,
            mode: self.mode.unwrap_or_else(thread_access_mode),
            cooperative: self.cooperative,
            unchecked: self.unchecked,
            tiled: self.tiled,
        };
        let stream = if keep_stream {
            self.stream.cloned()
        } else {
            None
        };
        if let Some(s) = self.stream {
            prepare::check_stream_device(self.kernel, s, device)?;
        }
        if self.tiled {
            let (e, n) =
                domain::tiled_dim(self.dim.as_slice(), opts.tile_extent()).map_err(|error| {
                    Error::Dim {
                        kernel: self.kernel.name().to_string(),
                        error,
                    }
                })?;
            return Launch::build(self.kernel, &e[..n], args, opts, stream);
        }
        Launch::build(self.kernel, self.dim.as_slice(), args, opts, stream)
    }

    /// Checks everything and launches (Warp's `wp.launch`). Recorded by a
    /// recording tape unless `record_tape(false)`.
    ///
    /// # Errors
    ///
    /// Every check of the launch ([`Error`]'s variants name each), then the
    /// launch's own errors ([`Launch::launch`]).
    pub fn run(mut self) -> Result<()> {
        let stream = self.stream;
        let recording = self.record_tape && self.pass == Pass::Forward && record::is_recording();
        if !recording && let Some(done) = self.run_direct() {
            let args = std::mem::take(&mut self.args);
            self.kernel.inner.give_slots(args);
            return done;
        }
        let (kernel, device) = (self.kernel, self.device);
        let launch = self.into_launch(recording)?;
        launch
            .run_on(stream)
            .map_err(|e| e.for_launch(kernel.name(), device.unwrap_or(launch.device())))?;
        if recording {
            record::record(launch);
        }
        Ok(())
    }

    /// The immediate CUDA launch of a forward pass with Warp's launch
    /// options, run the way positional launches run
    /// ([`Kernel::run_typed_at`]): the builder's arguments are checked and
    /// written where they are, with no [`Launch`] built, filled and dropped
    /// (most of the builder's cost over the raw launch:
    /// `docs/launch-profile.md`). Every check of [`LaunchBuilder::run`]
    /// runs there, in the same form. `None` for what only the full road
    /// takes: a CPU launch, a kernel without CUDA code, a process without a
    /// CUDA driver, an adjoint pass, a block size, a grid cap or a
    /// cooperative launch asked for, a stream of another device than the
    /// one named, more than [`DIRECT_MAX`] arguments, or a value that does
    /// not convert to its parameter's dtype (the full road's check names
    /// it).
    fn run_direct(&self) -> Option<Result<()>> {
        if self.bad_device.is_some()
            || self.pass != Pass::Forward
            || self.block_dim.is_some()
            || self.max_blocks != MaxBlocks::Unlimited
            || self.cooperative
            || self.args.len() > DIRECT_MAX
        {
            return None;
        }
        let device = match (self.device, self.stream) {
            (Some(d), Some(s)) if Device::from(s.context().device()) != d => return None,
            (Some(d), _) => d,
            (None, Some(s)) => Device::from(s.context().device()),
            (None, None) => Device::current(),
        };
        // The full road asks for the device's context before it checks an
        // argument; without a driver, or for a kernel with no CUDA code, it
        // names that first, so those launches take it.
        if device == Device::Cpu
            || self.kernel.inner.cuda.is_none()
            || !crate::device::cuda_available()
        {
            return None;
        }
        let params = self.kernel.params();
        // Values of their parameter's dtype are passed as they are; only
        // others are converted (a rare case: no array of conversions is
        // made or dropped otherwise).
        let mut typed = [TypedArg::Null; DIRECT_MAX];
        let mut convert = false;
        for (i, a) in self.args.iter().enumerate() {
            if let Some(v) = a.as_value() {
                let ParamKind::Value(d) = &params.get(i)?.kind else {
                    return None;
                };
                convert |= !std::ptr::eq(v.dtype(), *d);
            }
            typed[i] = a.as_typed();
        }
        let converted: [Option<Value>; DIRECT_MAX];
        if convert {
            converted = self.converted_values()?;
            for (t, c) in typed.iter_mut().zip(&converted) {
                if let Some(c) = c {
                    *t = TypedArg::Value(c.bytes());
                }
            }
        }
        let how = How {
            tiled: self.tiled,
            unchecked: self.unchecked,
        };
        let mode = self.mode.unwrap_or_else(thread_access_mode);
        Some(
            self.kernel
                .run_typed_at(
                    Pass::Forward,
                    &self.dim,
                    self.stream,
                    &typed[..self.args.len()],
                    how,
                    device,
                    mode,
                )
                .map_err(|e| e.for_launch(self.kernel.name(), device)),
        )
    }

    /// The builder's values converted to their parameters' dtypes, where
    /// they are of another (`None` where not, or for other arguments);
    /// `None` when one does not convert (the full road's check names it).
    #[cold]
    fn converted_values(&self) -> Option<[Option<Value>; DIRECT_MAX]> {
        let params = self.kernel.params();
        let mut converted: [Option<Value>; DIRECT_MAX] = [const { None }; DIRECT_MAX];
        for (i, a) in self.args.iter().enumerate() {
            if let Some(v) = a.as_value()
                && let ParamKind::Value(d) = &params.get(i)?.kind
                && !std::ptr::eq(v.dtype(), *d)
            {
                converted[i] = Some(v.try_convert(d).ok()?);
            }
        }
        Some(converted)
    }

    /// Checks everything and returns the launch without running it (Warp's
    /// `wp.launch(..., record_cmd=True)`): run it with [`Launch::launch`]
    /// (on the stream given here, or the device's current stream, [`Device::stream`](crate::Device::stream)) or
    /// [`Launch::launch_on`]. A tape does not record it.
    ///
    /// # Errors
    ///
    /// Every check of the launch, as [`LaunchBuilder::run`].
    pub fn record_cmd(self) -> Result<Launch> {
        self.into_launch(true)
    }
}
