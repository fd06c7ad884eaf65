//! Positional launches, what typed launchers call ([`TypedArg`],
//! [`Kernel::launch_args`], [`Kernel::record_args`],
//! [`Kernel::launch_tiled_args`], [`Kernel::check_signature`]).
//!
//! A typed launcher's Rust signature already fixes each argument's kind,
//! dtype and dimensions, so the launch does not look parameters up by name,
//! collect arguments into a vector or clone arrays: it compares each
//! argument with its parameter (a pointer compare for dtypes, integer
//! compares for dimensions and sizes), checks where each array lives (the
//! access mode, as every launch does), plans the domain, checks the
//! kernel's access rules against it (the launch-shape rule), and writes the
//! bytes straight into the kernel's spare argument block. The arrays'
//! memory is kept alive as an immediate [`LaunchBuilder::run`](crate::LaunchBuilder::run) keeps it:
//! every allocation the launch uses is marked as used by queued work, so
//! its free (and host reads) wait for the work to finish.
//!
//! A refusal builds the same error as the builder's checks (the message
//! names the kernel, the parameter, what it takes and what was given), only
//! on the error path.

use cuda_api::{DynKernel, LaunchConfig, Stream};

use super::bind::{self, Arg, Site, StructValue, TypedArg};
use super::domain::{self, KernelShape, Plan};
use super::domain::{Dim, MaxBlocks};
use super::kernel::Kernel;
use super::launch::{Extents, Launch, Options, check_access_rules};
use super::memo::{How, Query, TypedBlock};
use super::prepare;
use super::record;
use crate::abi::{ArrayT, Value, encode};
use crate::array::{AccessMode, thread_access_mode};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::signature::{ParamKind, Pass, StructType};

/// The device a positional launch runs on: the stream's if one is given,
/// else the first CUDA array's (arrays struct arguments hold included),
/// else the CPU when there are arrays (all on the host), else the default
/// device ([`Device::current`]). The other
/// arrays must be reachable from it
/// (checked by the access mode, as for any launch).
fn launch_device(args: &[TypedArg<'_>], stream: Option<&Stream>) -> Device {
    if let Some(s) = stream {
        return Device::from(s.context().device());
    }
    let mut host = false;
    let arrays = args.iter().flat_map(|a| {
        let (own, held) = match a {
            TypedArg::Array(a) => (Some(*a), &[][..]),
            TypedArg::Struct(s) => (None, s.held()),
            _ => (None, &[][..]),
        };
        own.into_iter().chain(held.iter().map(|h| &h.array))
    });
    for a in arrays {
        match a.device() {
            Device::Cpu => host = true,
            cuda => return cuda,
        }
    }
    if host { Device::Cpu } else { Device::current() }
}

/// Whether a struct type `given` (from a typed launcher) is the declared
/// struct `declared`: the same name (or the same name without Warp's
/// hash), size, alignment, and fields of the same names, offsets and kinds.
fn same_struct(declared: &StructType, given: &StructType) -> bool {
    (given.name == declared.name || given.key() == declared.key())
        && given.size == declared.size
        && given.align == declared.align
        && given.fields.len() == declared.fields.len()
        && declared
            .fields
            .iter()
            .zip(&given.fields)
            .all(|(d, g)| d.name == g.name && d.offset == g.offset && same_kind(&d.kind, &g.kind))
}

/// Whether `given` is the kind `declared`: the same dtype (by identity);
/// for arrays the same dimensions where the declaration knows them.
fn same_kind(declared: &ParamKind, given: &ParamKind) -> bool {
    match (declared, given) {
        (ParamKind::Array { dtype: d, ndim: dn }, ParamKind::Array { dtype: g, ndim: gn }) => {
            std::ptr::eq(*d, *g) && (dn.is_none() || gn.is_none() || dn == gn)
        }
        (ParamKind::Value(d), ParamKind::Value(g)) => std::ptr::eq(*d, *g),
        (ParamKind::Struct(d), ParamKind::Struct(g)) => same_struct(d, g),
        _ => false,
    }
}

impl Kernel {
    /// Checks that the kernel's declared parameters are exactly `params`
    /// (name and kind, in order; an array's dimensions compared where the
    /// declaration knows them): what a typed launcher, generated from a
    /// module's source, calls once when it is bound to a loaded kernel, so
    /// that its positional launches match the kernel.
    ///
    /// # Errors
    ///
    /// [`Error::Signature`] at the first difference, naming the kernel, the
    /// parameter, what the kernel declares and what the launcher expects.
    pub fn check_signature(&self, params: &[(&str, ParamKind)]) -> Result<()> {
        let declared = self.params();
        let show = |name: &str, kind: &ParamKind| format!("'{name}': {}", kind.describe());
        for i in 0..declared.len().max(params.len()) {
            let (d, g) = (declared.get(i), params.get(i));
            let same = match (d, g) {
                (Some(d), Some((name, kind))) => d.name == *name && same_kind(&d.kind, kind),
                _ => false,
            };
            if !same {
                return Err(Error::Signature {
                    kernel: self.name().to_string(),
                    index: i,
                    declared: d.map_or_else(
                        || format!("absent (the kernel has {} parameter(s))", declared.len()),
                        |d| show(&d.name, &d.kind),
                    ),
                    expected: g.map_or_else(
                        || format!("no parameter there (it has {})", params.len()),
                        |(name, kind)| show(name, kind),
                    ),
                });
            }
        }
        Ok(())
    }

    /// Launches with positional arguments, as a typed launcher does:
    /// `args` holds one argument per parameter in order ([`Pass::Forward`]),
    /// or the parameters then one adjoint per parameter
    /// ([`Pass::Adjoint`], as Warp's backward kernel takes them).
    ///
    /// The device is the stream's if `stream` is given, else the first
    /// CUDA array's, else the CPU when every array is a host array, else
    /// `cuda:0`; every other array must be reachable from it under this
    /// thread's access mode ([`crate::thread_access_mode`]). The stream
    /// is `stream`, else the device's current stream ([`Device::stream`](crate::Device::stream)); the block size is the
    /// one the kernel was compiled for (else 256; 1 on the CPU). Every
    /// check of [`LaunchBuilder::run`](crate::LaunchBuilder::run) runs: count, kind, dtype and dimensions
    /// of each argument (compared by identity and integers, no name
    /// lookup), where each array lives, the stream's context, and the
    /// kernel's access rules against the domain (the launch shape), and the
    /// arrays' memory stays alive while the kernel is queued. It allocates
    /// nothing (on a CUDA device, outside a recording [`crate::Tape`]). A
    /// recording tape records a forward launch, as it records
    /// [`LaunchBuilder::run`](crate::LaunchBuilder::run).
    ///
    /// # Errors
    ///
    /// [`Error::ArgumentCount`] for another number of arguments;
    /// [`Error::Argument`] for an argument of the wrong kind, dtype,
    /// dimensions or size (a value's bytes must be exactly its dtype's
    /// size); [`Error::Access`] for an array the launch device cannot reach;
    /// [`Error::Dim`] for a domain that cannot be launched;
    /// [`Error::OutOfBounds`], [`Error::PartialTileBlock`] or
    /// [`Error::Unproven`] when the kernel's access rules refuse the launch
    /// shape; [`Error::StreamContext`] for a stream of another context than
    /// the device's primary one, whether named or current (a
    /// [`ScopedStream`](crate::ScopedStream) of another context); [`Error::NoCudaFunction`] /
    /// [`Error::NoCpuFunction`] when the kernel has no function for the
    /// pass and device; [`Error::Lent`] for an array lent to cudarc; the
    /// driver's refusal as [`Error::Cuda`].
    pub fn launch_args(
        &self,
        pass: Pass,
        dim: impl Into<Dim>,
        stream: Option<&Stream>,
        args: &[TypedArg<'_>],
    ) -> Result<()> {
        self.run_typed(pass, &dim.into(), stream, args, How::PLAIN)
    }

    /// [`Kernel::launch_args`] with Warp's `wp.launch_tiled` semantics:
    /// the block size is appended to `dim` as one more extent (see
    /// [`Kernel::launch_tiled`]; on the CPU the extent appended is 1).
    ///
    /// # Errors
    ///
    /// As [`Kernel::launch_args`]; [`Error::Dim`] when `dim` has 4 extents.
    pub fn launch_tiled_args(
        &self,
        pass: Pass,
        dim: impl Into<Dim>,
        stream: Option<&Stream>,
        args: &[TypedArg<'_>],
    ) -> Result<()> {
        self.run_typed(pass, &dim.into(), stream, args, How::TILED)
    }

    /// [`Kernel::launch_args`] without the kernel's array access rules, as
    /// [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked) launches: for kernels whose accesses no
    /// launch can check ([`Error::Unproven`]), which typed launchers expose
    /// as their `unsafe` `launch_unchecked`. Every other check runs (count,
    /// kinds, dtypes, dimensions, where each array lives, the stream's
    /// context, the domain).
    ///
    /// # Safety
    ///
    /// As for [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked): the kernel, run over `dim` with
    /// these arguments, reads and writes only elements inside the arrays it
    /// is given, for every thread the grid runs, and no other memory (when a
    /// recording tape records the launch, its backward kernel too).
    ///
    /// # Errors
    ///
    /// As [`Kernel::launch_args`], less the access rules' refusals.
    pub unsafe fn launch_args_unchecked(
        &self,
        pass: Pass,
        dim: impl Into<Dim>,
        stream: Option<&Stream>,
        args: &[TypedArg<'_>],
    ) -> Result<()> {
        self.run_typed(pass, &dim.into(), stream, args, How::UNCHECKED)
    }

    /// [`Kernel::launch_tiled_args`] without the kernel's array access
    /// rules (see [`Kernel::launch_args_unchecked`]).
    ///
    /// # Safety
    ///
    /// As for [`Kernel::launch_args_unchecked`], over the tiled domain.
    ///
    /// # Errors
    ///
    /// As [`Kernel::launch_tiled_args`], less the access rules' refusals.
    pub unsafe fn launch_tiled_args_unchecked(
        &self,
        pass: Pass,
        dim: impl Into<Dim>,
        stream: Option<&Stream>,
        args: &[TypedArg<'_>],
    ) -> Result<()> {
        self.run_typed(
            pass,
            &dim.into(),
            stream,
            args,
            How {
                tiled: true,
                unchecked: true,
            },
        )
    }

    /// The launch [`Kernel::launch_args`] would run, checked the same way
    /// and returned for replay ([`Launch::launch`] on the device's current
    /// stream ([`Device::stream`](crate::Device::stream)), [`Launch::launch_on`] on another; no allocation per replay).
    /// A tape does not record it.
    ///
    /// # Errors
    ///
    /// As [`Kernel::launch_args`], less the driver's launch.
    pub fn record_args(
        &self,
        pass: Pass,
        dim: impl Into<Dim>,
        args: &[TypedArg<'_>],
    ) -> Result<Launch> {
        self.record_typed(pass, &dim.into(), None, args, How::PLAIN)
    }

    /// The options of a positional launch.
    fn typed_options(&self, device: Device, pass: Pass, mode: AccessMode, how: How) -> Options {
        Options {
            device,
            pass,
            block_dim: self.fixed_block_dim().unwrap_or(domain::DEFAULT_BLOCK_DIM),
            max_blocks: MaxBlocks::Unlimited,
            mode,
            cooperative: false,
            unchecked: how.unchecked,
            tiled: how.tiled,
        }
    }

    /// Checks the count of `args`, then each argument against its
    /// parameter (kind, dtype, dimensions, size, where an array lives).
    fn check_typed(
        &self,
        pass: Pass,
        device: Device,
        mode: AccessMode,
        args: &[TypedArg<'_>],
    ) -> Result<()> {
        let params = self.params();
        let n = params.len();
        prepare::check_count(self, pass, args.len())?;
        for (i, arg) in args.iter().enumerate() {
            let p = &params[i % n];
            let fits = match (&p.kind, arg) {
                (ParamKind::Array { dtype, ndim }, TypedArg::Array(a)) => {
                    std::ptr::eq(a.dtype(), *dtype)
                        && ndim.is_none_or(|d| usize::from(d) == a.ndim())
                }
                (ParamKind::Array { .. }, TypedArg::Null) => true,
                (ParamKind::Value(d), TypedArg::Value(b)) => b.len() == d.size,
                (ParamKind::Struct(st), TypedArg::Struct(s)) => {
                    s.bytes().len() == st.size && (s.name() == st.name || s.name() == st.key())
                }
                _ => false,
            };
            if !fits {
                return Err(self.refuse_typed(i, &p.kind, arg, device, mode));
            }
            if let (ParamKind::Struct(st), TypedArg::Struct(s)) = (&p.kind, arg) {
                let name: std::borrow::Cow<'_, str> = if i >= n {
                    format!("adj_{}", p.name).into()
                } else {
                    p.name.as_str().into()
                };
                let site = Site {
                    kernel: self.name(),
                    index: i,
                    name: &name,
                };
                bind::check_held(&site, st, *s, device, mode)?;
            }
            if let TypedArg::Array(a) = arg {
                crate::array::check(self.name(), &p.name, a, device, mode).map_err(|mut e| {
                    if i >= n
                        && let Error::Access(a) = &mut e
                    {
                        a.param = format!("adj_{}", a.param);
                    }
                    e
                })?;
            }
        }
        Ok(())
    }

    /// The error for argument `index` that does not fit `kind`: the
    /// builder's own (from its check of the same argument), or for value
    /// bytes of the wrong size, one in the same form.
    fn refuse_typed(
        &self,
        index: usize,
        kind: &ParamKind,
        arg: &TypedArg<'_>,
        device: Device,
        mode: AccessMode,
    ) -> Error {
        let name = self
            .param_at(index)
            .map_or_else(String::new, |p| p.0.into_owned());
        let site = Site {
            kernel: self.name(),
            index,
            name: &name,
        };
        let owned = match arg {
            TypedArg::Array(a) => Arg::Array((*a).clone()),
            TypedArg::Null => Arg::Null,
            TypedArg::Struct(s) => Arg::Struct(StructValue::from_ref(*s)),
            TypedArg::Value(b) => {
                let hint = match kind {
                    ParamKind::Value(d) => format!(
                        "pass the {d} value as its {} little-endian byte(s) (TypedArg::value(&v) with v of its Rust type)",
                        d.size
                    ),
                    other => bind::kind_hint(other),
                };
                return site.error(
                    kind.describe(),
                    format!("a value of {} byte(s)", b.len()),
                    hint,
                );
            }
        };
        match bind::check(&site, kind, &owned, device, mode) {
            Err(e) => e,
            Ok(_) => site.error(kind.describe(), owned.describe(), bind::kind_hint(kind)),
        }
    }

    /// The arguments as the builder holds them (for the CPU device and for
    /// recorded launches), after [`Kernel::check_typed`] passed.
    fn owned_args(&self, args: &[TypedArg<'_>]) -> Result<Vec<Arg>> {
        let n = self.params().len();
        let mut out = self.inner.take_args();
        for (i, a) in args.iter().enumerate() {
            out.push(match a {
                TypedArg::Array(a) => Arg::Array((*a).clone()),
                TypedArg::Null => Arg::Null,
                TypedArg::Struct(s) => Arg::Struct(StructValue::from_ref(*s)),
                TypedArg::Value(b) => {
                    let kind = &self.params()[i % n].kind;
                    match kind {
                        ParamKind::Value(d) => match Value::from_bytes(d, b) {
                            Some(v) => Arg::Value(v),
                            None => {
                                return Err(self.refuse_typed(
                                    i,
                                    kind,
                                    a,
                                    Device::Cpu,
                                    AccessMode::Relaxed,
                                ));
                            }
                        },
                        other => {
                            return Err(self.refuse_typed(
                                i,
                                other,
                                a,
                                Device::Cpu,
                                AccessMode::Relaxed,
                            ));
                        }
                    }
                }
            });
        }
        Ok(out)
    }

    /// The launch domain: `dim`, with the tile extent appended for a tiled
    /// launch (inline, no allocation).
    fn typed_dim(&self, given: &[i64], opts: &Options) -> Result<([i64; domain::MAX_DIMS], usize)> {
        if opts.tiled {
            return domain::tiled_dim(given, opts.tile_extent()).map_err(|error| Error::Dim {
                kernel: self.name().to_string(),
                error,
            });
        }
        let mut e = [0i64; domain::MAX_DIMS];
        if given.len() > domain::MAX_DIMS {
            return Err(Error::Dim {
                kernel: self.name().to_string(),
                error: domain::DimError::TooManyDims { given: given.len() },
            });
        }
        e[..given.len()].copy_from_slice(given);
        Ok((e, given.len()))
    }

    /// The plan of a positional launch over `dim` (block size: the
    /// compiled one, 1 on the CPU; no grid cap).
    fn typed_plan(&self, dim: &[i64], opts: &Options) -> Result<Plan> {
        let block_dim = if opts.device == Device::Cpu {
            1
        } else {
            opts.block_dim
        };
        domain::plan_with(
            dim,
            KernelShape {
                ndim: self.kernel_dim(),
                grid_stride: self.is_grid_stride(),
            },
            block_dim,
            None,
        )
        .map_err(|error| Error::Dim {
            kernel: self.name().to_string(),
            error,
        })
    }

    /// The kernel's access rules against the launch shape `plan` and the
    /// arrays of `args` (nothing on the CPU, as for every launch).
    pub(crate) fn check_typed_accesses(
        &self,
        opts: &Options,
        dim: &[i64],
        plan: &Plan,
        args: &[TypedArg<'_>],
    ) -> Result<()> {
        check_access_rules(
            self,
            opts,
            dim,
            plan,
            |i| match args.get(i) {
                Some(TypedArg::Array(a)) => Extents::Array(a.shape()),
                Some(TypedArg::Null) => Extents::Null,
                Some(TypedArg::Struct(s)) => Extents::Struct(s.bytes()),
                _ => Extents::Other,
            },
            None,
        )
    }

    /// The immediate positional launch.
    fn run_typed(
        &self,
        pass: Pass,
        dim: &Dim,
        stream: Option<&Stream>,
        args: &[TypedArg<'_>],
        how: How,
    ) -> Result<()> {
        self.run_typed_on(pass, dim, stream, args, how)
            .map_err(|e| e.for_launch(self.name(), launch_device(args, stream)))
    }

    fn run_typed_on(
        &self,
        pass: Pass,
        dim: &Dim,
        stream: Option<&Stream>,
        args: &[TypedArg<'_>],
        how: How,
    ) -> Result<()> {
        if pass == Pass::Forward && record::is_recording() {
            // The tape keeps a Launch (its arrays and argument block), as
            // for LaunchBuilder::run.
            let launch = self.record_typed(pass, dim, stream, args, how)?;
            launch.run_on(stream)?;
            record::record(launch);
            return Ok(());
        }
        let device = launch_device(args, stream);
        self.run_typed_at(pass, dim, stream, args, how, device, thread_access_mode())
    }

    /// An immediate positional launch on `device` under access `mode`,
    /// not recorded by a tape: what [`Kernel::launch_args`] runs, and what
    /// an immediate [`LaunchBuilder::run`](crate::LaunchBuilder::run) runs
    /// with the builder's arguments borrowed (its device and mode resolved
    /// as the builder resolves them).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_typed_at(
        &self,
        pass: Pass,
        dim: &Dim,
        stream: Option<&Stream>,
        args: &[TypedArg<'_>],
        how: How,
        device: Device,
        mode: AccessMode,
    ) -> Result<()> {
        let dim = dim.as_slice();
        let cuda = match &self.inner.cuda {
            // The first CUDA use of a Warp module's kernel declares it (and
            // loads the module's image); a failure is this launch's error.
            Some(slot) if let Device::Cuda(ordinal) = device => {
                Some(slot.get(&self.inner.spec, ordinal)?)
            }
            _ => None,
        };
        if let Some(functions) = cuda
            && let Some(k) = functions.function(pass, &self.inner.spec)?
        {
            let mut block = functions.take_typed(pass, k);
            let launch = TypedLaunch {
                pass,
                device,
                mode,
                dim,
                how,
                stream,
                args,
            };
            let result = self.launch_cuda_typed(k, &mut block, &launch);
            functions.give_typed(pass, block);
            return result;
        }
        self.check_typed(pass, device, mode, args)?;
        let opts = self.typed_options(device, pass, mode, how);
        let (e, len) = self.typed_dim(dim, &opts)?;
        let dim = &e[..len];
        let plan = self.typed_plan(dim, &opts)?;
        self.check_typed_accesses(&opts, dim, &plan, args)?;
        if let Device::Cuda(ordinal) = device {
            // No function for this pass: the refusal names it.
            self.cuda(ordinal, pass)?;
        }
        self.cpu(pass)?;
        if plan.size == 0 {
            return Ok(());
        }
        let owned = self.owned_args(args)?;
        let r = prepare::run_cpu(self, pass, &plan.bounds, &owned);
        self.inner.give_args(owned);
        r
    }

    /// The CUDA part of an immediate positional launch, in `block` (the
    /// kernel's spare one for positional launches). When the block's last
    /// launch had the same arrays, domain, device, access mode and stream
    /// context ([`TypedBlock::remembers`]), their checks passed then and
    /// their bytes are still in the block: only the values are written.
    /// Otherwise every check runs and every argument is written. Then the
    /// arrays are noted as used by queued work and the driver launches.
    fn launch_cuda_typed(
        &self,
        k: &DynKernel,
        block: &mut TypedBlock,
        l: &TypedLaunch<'_, '_>,
    ) -> Result<()> {
        if let Some(cfg) = block.remembered(l.device) {
            // The remembered launch checked its stream's context
            // (`prepare::launch_stream`); `remembers` compares this
            // stream's context with it, so a stream of another context,
            // named or current, falls through to the full checks below.
            let mut slot = None;
            let stream = match l.stream {
                Some(s) => s,
                None => slot.insert(l.device.stream()?),
            };
            let query = Query {
                dim: l.dim,
                how: l.how,
                device: l.device,
                mode: l.mode,
                ctx: stream.context().raw() as usize,
                args: l.args,
            };
            if block.remembers(&query) {
                for (i, arg) in l.args.iter().enumerate() {
                    let bytes = match arg {
                        TypedArg::Value(v) => v,
                        TypedArg::Struct(s) => s.bytes(),
                        TypedArg::Array(_) | TypedArg::Null => continue,
                    };
                    // SAFETY: the remembered launch checked a value of this
                    // size for this parameter (its dtype's size), or a
                    // struct of this name, size and voucher holding no
                    // arrays, whose bytes the access rules do not read or
                    // are the same (`memo::StructKey`).
                    unsafe { block.block.set_bytes(i + 1, bytes) }?;
                }
                let _locks = note_uses(self, l.args, stream)?;
                return match block.checked() {
                    Some(checked) => prepare::enqueue_checked(k, stream, checked, &block.block),
                    None => prepare::enqueue(k, stream, cfg, &block.block, false),
                };
            }
        }
        block.forget();
        self.check_typed(l.pass, l.device, l.mode, l.args)?;
        let opts = self.typed_options(l.device, l.pass, l.mode, l.how);
        let (e, len) = self.typed_dim(l.dim, &opts)?;
        let dim = &e[..len];
        let plan = self.typed_plan(dim, &opts)?;
        self.check_typed_accesses(&opts, dim, &plan, l.args)?;
        let ctx = l.device.context()?;
        let mut slot = None;
        let stream = prepare::launch_stream(self, l.device, &ctx, l.stream, &mut slot)?;
        let smem = self.shared_mem(l.pass);
        prepare::opt_in_shared_mem(k, &ctx, smem)?;
        if plan.size == 0 {
            return Ok(());
        }
        let cfg = LaunchConfig::new(
            (plan.grid[0], plan.grid[1], plan.grid[2]),
            (plan.block[0], plan.block[1], plan.block[2]),
        )
        .with_shared_mem(smem);
        prepare::write_bounds(&mut block.block, &plan)?;
        for (i, arg) in l.args.iter().enumerate() {
            let array;
            let bytes: &[u8] = match arg {
                TypedArg::Array(a) => {
                    array = encode::array_t(&a.abi());
                    &array
                }
                TypedArg::Null => {
                    array = encode::array_t(&ArrayT::default());
                    &array
                }
                TypedArg::Value(v) => v,
                TypedArg::Struct(s) => s.bytes(),
            };
            // SAFETY: `check_typed` matched every argument to its declared
            // parameter (an array of the dtype, a value of the dtype's
            // size, the declared struct), and the declaration was checked
            // against the driver's layout; array addresses stay valid while
            // the kernel runs because their allocations are noted as used
            // below (their frees wait for the work).
            unsafe { block.block.set_bytes(i + 1, bytes) }?;
        }
        // The configuration's checks, once: kept with the remembered
        // launch, they spare the next launches of the same shape.
        let checked = k.check_config(&ctx, cfg, false)?;
        let locks = note_uses(self, l.args, stream)?;
        prepare::enqueue_checked(k, stream, &checked, &block.block)?;
        drop(locks);
        block.remember(
            &Query {
                dim: l.dim,
                how: l.how,
                device: l.device,
                mode: l.mode,
                ctx: stream.context().raw() as usize,
                args: l.args,
            },
            cfg,
            Some(checked),
            |i| self.rules_read_struct(l.pass, i),
        );
        Ok(())
    }

    /// The checked [`Launch`] of a positional launch (replay, tape).
    fn record_typed(
        &self,
        pass: Pass,
        dim: &Dim,
        stream: Option<&Stream>,
        args: &[TypedArg<'_>],
        how: How,
    ) -> Result<Launch> {
        let device = launch_device(args, stream);
        let mode = thread_access_mode();
        self.check_typed(pass, device, mode, args)?;
        let opts = self.typed_options(device, pass, mode, how);
        let (e, len) = self.typed_dim(dim.as_slice(), &opts)?;
        let owned = self.owned_args(args)?;
        Launch::build(self, &e[..len], owned, opts, stream.cloned())
    }
}

/// An immediate positional launch as [`Kernel::launch_args`] was asked
/// for it.
struct TypedLaunch<'q, 'a> {
    pass: Pass,
    device: Device,
    mode: AccessMode,
    /// The domain as given (before a tiled launch appends its extent).
    dim: &'q [i64],
    how: How,
    stream: Option<&'q Stream>,
    args: &'q [TypedArg<'a>],
}

/// Notes that work about to be queued on `stream` uses the arrays of
/// `args` and their gradients, as a recorded launch does
/// ([`prepare::note_uses`]); the locks it returns are held until the
/// launch is queued.
fn note_uses(
    kernel: &Kernel,
    args: &[TypedArg<'_>],
    stream: &Stream,
) -> Result<crate::array::StorageLocks> {
    prepare::note_uses(
        kernel,
        args.iter().map(|a| match a {
            TypedArg::Array(a) => (Some(*a), &[][..]),
            TypedArg::Struct(s) => (None, s.held()),
            _ => (None, &[][..]),
        }),
        stream,
    )
}

#[cfg(test)]
mod tests;
