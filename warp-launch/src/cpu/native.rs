//! Warp's compiled CPU code on the `"cpu"` device: a kernel of a Warp
//! module whose CPU code the compile step linked into the program
//! ([`EmbeddedCpu`](crate::EmbeddedCpu)) runs its `wpl_` entry points.
//!
//! - **Bind** (when the module is loaded): the entry points' report of the
//!   argument struct `wp_args_<key>` (size, alignment, each field's offset)
//!   must equal the layout of the declaration read from the source (arrays
//!   as Warp's `array_t`, values as their dtype, structs as their C
//!   layout), as CUDA parameters must equal the driver's layout.
//! - **Launch**: the checked arguments are packed into a `wp_args_<key>`
//!   (values' bytes, `array_t`s of host-reachable arrays whose `data` and
//!   `grad` are host addresses, structs' bytes), the adjoints into a second
//!   one for the backward pass; Warp's `launch_bounds_t<N>` is built for the
//!   domain, and the entry point runs task indices `0..size` (on the CPU the
//!   whole domain is task indices; there are no blocks). Then the module's
//!   assertion record is taken: a failed kernel `assert` is
//!   [`Error::KernelAssert`].
//! - **Safety**: Warp's C++ indexes host memory without bounds checks, so
//!   these launches check the kernel's access rules against the launch
//!   shape exactly as CUDA launches do (`check_access_rules`); unproven
//!   kernels run only through the `unsafe` unchecked launches.
//! - **Threads**: a forward launch runs on several threads (contiguous
//!   ranges of task indices, `std::thread::scope`) only when no two work
//!   items can touch the same element: the forward body uses no atomics,
//!   every array access is indexed exactly by the thread's coordinates
//!   (`a[i]`, `a[i, j]` with `i, j = wp.tid()`, read or write), the
//!   domain folds no extra dimension into `coord_mult`, the arrays are
//!   contiguous and no two of them overlap (unless they are the same view),
//!   and the domain has at least `PARALLEL_MIN_TASKS` (2^18) work items.
//!   Everything else, and every backward pass (adjoints accumulate into
//!   shared elements), runs serially on the calling thread.
//!   [`set_cpu_threads`] (or `WARP_LAUNCH_CPU_THREADS`) sets the count.

use std::ffi::{CStr, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::native_types::{CpuAssertFn, CpuBackwardFn, CpuForwardFn, EmbeddedCpuKernel};
use crate::abi::encode;
use crate::array::AccessMode;
use crate::device::Device;
use crate::error::{CpuLayoutError, Error, Result};
use crate::launch::bind::{self, Arg, Params, Site};
use crate::launch::domain::Bounds;
use crate::signature::{
    AccessTarget, Accesses, AxisIndex, KernelParam, Pass, StructType, Unproven,
};

/// Fewest work items a forward launch runs on several threads (2^18).
/// Starting and joining the threads is not free: spawning and joining 3
/// scoped threads took a median 100 µs on the shared 2-core machine this was
/// written on (tens of µs on an idle one). Warp's compiled saxpy runs at
/// about 1.7 ns per element serially, so 2^18 elements take about 450 µs:
/// from there the start-up costs at most about a fifth of the serial time
/// even on a busy machine, and each thread gets at least 2^16 elements.
/// Smaller launches run serially.
pub(crate) const PARALLEL_MIN_TASKS: usize = 1 << 18;

/// Fewest work items per thread (a quarter of [`PARALLEL_MIN_TASKS`]).
pub(super) const MIN_CHUNK: usize = PARALLEL_MIN_TASKS / 4;

/// Largest alignment of an argument struct the buffers here provide
/// (`u128` words); a larger one is refused when the kernel is bound.
const MAX_ALIGN: usize = align_of::<u128>();

/// The environment variable that sets the default thread count.
const THREADS_ENV: &str = "WARP_LAUNCH_CPU_THREADS";

static CPU_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets how many threads a forward launch of compiled Warp code on `"cpu"`,
/// or a launch of a block body ([`cpu_block_fn`](crate::cpu_block_fn)),
/// may use when it can run in parallel (see [`cpu_threads`]); 1 runs every
/// launch serially (for benchmarks, or to compare with Warp's own CPU
/// device, which runs serially), 0 restores the default. For the whole
/// process; launches already running keep their count.
pub fn set_cpu_threads(n: usize) {
    CPU_THREADS.store(n, Ordering::Relaxed);
}

/// How many threads a forward launch of compiled Warp code on `"cpu"`, or
/// a launch of a block body ([`cpu_block_fn`](crate::cpu_block_fn)), may
/// use: the count given to [`set_cpu_threads`], else the environment
/// variable `WARP_LAUNCH_CPU_THREADS` (read once), else the machine's
/// available parallelism. Only launches whose work items cannot touch the
/// same element use more than one (compiled code: no atomics, every array
/// indexed by the thread's coordinates; block bodies: each writes only its
/// own block; both: contiguous arrays that do not overlap unless they are
/// the same view, at least 2^18 = 262144 work items, at least 2^16 per
/// thread); others, backward passes of compiled code and per-element
/// [`cpu_each_fn`](crate::cpu_each_fn) bodies run serially.
pub fn cpu_threads() -> usize {
    match CPU_THREADS.load(Ordering::Relaxed) {
        0 => default_threads(),
        n => n,
    }
}

fn default_threads() -> usize {
    static DEFAULT: OnceLock<usize> = OnceLock::new();
    *DEFAULT.get_or_init(|| {
        if let Ok(v) = std::env::var(THREADS_ENV) {
            match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => return n,
                _ => log::warn!(
                    "warp-launch: {THREADS_ENV}={v:?} is not a positive integer; using the machine's available parallelism"
                ),
            }
        }
        std::thread::available_parallelism().map_or(1, |n| n.get())
    })
}

/// A kernel's compiled CPU code, bound to its declaration.
#[derive(Clone)]
pub(crate) struct NativeKernel {
    forward: CpuForwardFn,
    backward: Option<CpuBackwardFn>,
    take_assert: CpuAssertFn,
    /// `sizeof(wp_args_<key>)`.
    size: usize,
    /// Each parameter's offset in `wp_args_<key>`.
    offsets: Vec<usize>,
    /// Whether forward launches may run on several threads (from the
    /// declaration; each launch checks its own arguments too).
    elementwise: bool,
    /// Why the compile step's facts leave this CPU code unproven (user C++
    /// in it, or a body other than the CUDA body the rules were read from).
    unproven: Option<Unproven>,
}

/// The layout of `wp_args_<key>` the declaration gives: the parameters in
/// order, laid out as a C compiler does (arrays as `array_t`).
pub(crate) fn declared_layout(params: &[KernelParam]) -> StructType {
    StructType::new(
        "wp_args",
        params
            .iter()
            .map(|p| (p.name.clone(), p.kind.clone()))
            .collect(),
    )
}

/// Whether the forward function's work items touch disjoint elements, from
/// the declaration: its accesses are checked rules, each indexes its array
/// (never the adjoint) with exactly the thread's coordinates in order
/// (`a[i]` for a 1-D kernel, `a[i, j]` for a 2-D one, ...), and the body
/// uses no atomics (`atomics`, read from the generated code).
pub(crate) fn is_elementwise(kernel_dim: usize, forward: &Accesses, atomics: bool) -> bool {
    let Accesses::Checked(list) = forward else {
        return false;
    };
    !atomics
        && list.iter().all(|a| {
            a.target == AccessTarget::Param
                && a.indices.len() == kernel_dim
                && a.indices
                    .iter()
                    .enumerate()
                    .all(|(k, i)| *i == AxisIndex::Thread(k))
        })
}

impl NativeKernel {
    /// Binds `entry` (kernel `key` of module `module`) to the declared
    /// `params`: the compiled layout of `wp_args_<key>` must be the
    /// declared one, field by field. `elementwise`: see [`is_elementwise`].
    pub(crate) fn bind(
        module: &str,
        key: &str,
        params: &[KernelParam],
        entry: &EmbeddedCpuKernel,
        take_assert: CpuAssertFn,
        elementwise: bool,
    ) -> Result<NativeKernel> {
        let declared = declared_layout(params);
        let n = params.len();
        let mut out = vec![0usize; n + 2];
        // SAFETY: `out` has `out.len()` writable values and the function
        // writes at most `cap` of them: it is warp-build's
        // `wpl_<m>__<key>__layout` (`EmbeddedCpuKernel::new`'s contract).
        let count = unsafe { (entry.layout())(out.as_mut_ptr(), out.len()) };
        if count != n + 2 {
            return Err(Error::CpuCode {
                module: module.to_string(),
                kernel: key.to_string(),
                message: format!(
                    "its argument struct wp_args_{key} has {} field(s), but the source declares {n} parameter(s) ({}); the CPU code was compiled from another Warp output than the source: rebuild the module",
                    count.saturating_sub(2),
                    params
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let mismatch = |field: &str, declared: usize, compiled: usize| {
            Error::CpuLayout(Box::new(CpuLayoutError {
                module: module.to_string(),
                kernel: key.to_string(),
                field: field.to_string(),
                declared,
                compiled,
            }))
        };
        for (i, f) in declared.fields.iter().enumerate() {
            if out[i + 2] != f.offset {
                return Err(mismatch(&f.name, f.offset, out[i + 2]));
            }
        }
        if out[0] != declared.size {
            return Err(mismatch("sizeof", declared.size, out[0]));
        }
        if out[1] != declared.align {
            return Err(mismatch("alignof", declared.align, out[1]));
        }
        if declared.align > MAX_ALIGN {
            return Err(Error::CpuCode {
                module: module.to_string(),
                kernel: key.to_string(),
                message: format!(
                    "its argument struct is aligned to {} bytes, more than the {MAX_ALIGN} this crate's argument buffers provide; report this kernel",
                    declared.align
                ),
            });
        }
        Ok(NativeKernel {
            forward: entry.forward(),
            backward: entry.backward(),
            take_assert,
            size: declared.size,
            offsets: declared.fields.iter().map(|f| f.offset).collect(),
            elementwise,
            unproven: None,
        })
    }

    /// The same code, unproven on `"cpu"` for `why` (`None`: proven as
    /// the declaration's rules say).
    pub(crate) fn with_unproven(mut self, why: Option<Unproven>) -> Self {
        self.unproven = why;
        self
    }

    /// Why safe CPU launches of this code are refused, if they are.
    pub(crate) fn unproven(&self) -> Option<&Unproven> {
        self.unproven.as_ref()
    }

    pub(crate) fn has_backward(&self) -> bool {
        self.backward.is_some()
    }

    pub(crate) fn is_elementwise(&self) -> bool {
        self.elementwise
    }

    /// One `wp_args_<key>` holding `args[base..base + n]` (the forward
    /// arguments for `base` 0, the adjoints for `base` n), each checked
    /// against its parameter again (the bytes written are exactly the
    /// declared size) and its arrays' gradients checked host-reachable.
    fn pack(&self, kernel: Params<'_>, args: &[Arg], base: usize) -> Result<Vec<u128>> {
        let mut bytes = vec![0u8; self.size];
        for (i, (p, &offset)) in kernel.params.iter().zip(&self.offsets).enumerate() {
            let index = base + i;
            let name = match kernel.at(index) {
                Some((name, _)) => name.into_owned(),
                None => return Err(kernel.no_such_param(format!("index {index}"))),
            };
            let Some(arg) = args.get(index) else {
                return Err(kernel.no_such_param(format!("index {index}")));
            };
            let site = Site {
                kernel: kernel.name,
                index,
                name: &name,
            };
            // The mode does not matter on the CPU: host-unreachable memory
            // is refused in every mode.
            let bound = bind::check(&site, &p.kind, arg, Device::Cpu, AccessMode::Relaxed)?;
            if let Arg::Array(a) = arg
                && let Some(g) = a.grad()
            {
                crate::array::check(
                    kernel.name,
                    &format!("{name} (its gradient)"),
                    g,
                    Device::Cpu,
                    AccessMode::Relaxed,
                )?;
            }
            let size = p.kind.size();
            bound.with_bytes(|b| {
                let slot = bytes
                    .get_mut(offset..offset + size)
                    .filter(|_| b.len() == size);
                match slot {
                    Some(slot) => {
                        slot.copy_from_slice(b);
                        Ok(())
                    }
                    None => Err(site.error(
                        p.kind.describe(),
                        format!("{} byte(s)", b.len()),
                        "report this: the checked argument does not fill its field",
                    )),
                }
            })?;
        }
        Ok(bytes
            .chunks(MAX_ALIGN)
            .map(|c| {
                let mut w = [0u8; MAX_ALIGN];
                w[..c.len()].copy_from_slice(c);
                u128::from_ne_bytes(w)
            })
            .collect())
    }

    /// How many threads a launch over `bounds` with `args` runs on.
    fn threads_for(&self, pass: Pass, bounds: &Bounds, args: &[Arg]) -> usize {
        if pass != Pass::Forward
            || !self.elementwise
            || bounds.coord_mult > 1
            || bounds.size < PARALLEL_MIN_TASKS
        {
            return 1;
        }
        let want = cpu_threads();
        if want <= 1 || !disjoint(args) {
            return 1;
        }
        want.min(bounds.size / MIN_CHUNK).max(1)
    }

    /// Runs the `pass` function of `kernel` over the task indices of
    /// `bounds` with `args` (checked by the launch, whose storages the
    /// caller holds locked), then takes the assertion record.
    pub(crate) fn run(
        &self,
        kernel: Params<'_>,
        pass: Pass,
        bounds: &Bounds,
        args: &[Arg],
    ) -> Result<()> {
        if bounds.size == 0 {
            return Ok(());
        }
        let dim = bounds_words(bounds);
        let mut fwd = self.pack(kernel, args, 0)?;
        // A record left by code that ran on this thread outside a launch.
        let _ = take_message(self.take_assert);
        let failed = match pass {
            Pass::Forward => {
                let threads = self.threads_for(pass, bounds, args);
                log::trace!(
                    "warp-launch: kernel '{}' on cpu: {} work item(s) on {threads} thread(s)",
                    kernel.name,
                    bounds.size
                );
                if threads > 1 {
                    self.run_parallel(&dim, &fwd, bounds.size, threads)
                } else {
                    // SAFETY: see `run_chunk`.
                    unsafe {
                        run_chunk(
                            self.forward,
                            self.take_assert,
                            &dim,
                            &mut fwd,
                            0,
                            bounds.size,
                        )
                    }
                }
            }
            Pass::Adjoint => {
                let Some(backward) = self.backward else {
                    return Err(Error::NoCpuFunction {
                        kernel: kernel.name.to_string(),
                        pass,
                    });
                };
                let mut adj = self.pack(kernel, args, kernel.params.len())?;
                // SAFETY: as for the forward function (`run_chunk`), with
                // the adjoints packed the same way into a second
                // `wp_args_<key>`, the struct the backward entry point
                // takes for them; serial: one thread.
                unsafe {
                    backward(
                        dim.as_ptr().cast::<c_void>(),
                        fwd.as_mut_ptr().cast::<c_void>(),
                        adj.as_mut_ptr().cast::<c_void>(),
                        0,
                        bounds.size,
                    );
                }
                take_message(self.take_assert)
            }
        };
        match failed {
            Some(message) => Err(Error::KernelAssert {
                kernel: kernel.name.to_string(),
                pass,
                message,
            }),
            None => Ok(()),
        }
    }

    /// The forward function over `0..size` in `threads` contiguous chunks:
    /// the calling thread runs the first, scoped threads the others (a
    /// chunk whose thread cannot be started runs on the calling thread).
    /// Each chunk has its own copy of the arguments. The first chunk's
    /// assertion failure, in index order, is returned.
    fn run_parallel(
        &self,
        dim: &[u64; 4],
        args: &[u128],
        size: usize,
        threads: usize,
    ) -> Option<String> {
        let chunk = size.div_ceil(threads);
        let (forward, take) = (self.forward, self.take_assert);
        let chunk_at = move |first: usize| {
            let mut own = args.to_vec();
            // SAFETY: see `run_chunk`; the launch (`threads_for`) found
            // that no two work items touch the same element, so chunks
            // running at once do not race.
            unsafe {
                run_chunk(
                    forward,
                    take,
                    dim,
                    &mut own,
                    first,
                    (first + chunk).min(size),
                )
            }
        };
        std::thread::scope(|s| {
            let mut spawned = Vec::with_capacity(threads);
            let mut here = vec![0];
            for first in (chunk..size).step_by(chunk) {
                match std::thread::Builder::new()
                    .name("warp-launch-cpu".into())
                    .spawn_scoped(s, move || chunk_at(first))
                {
                    Ok(h) => spawned.push((first, h)),
                    Err(e) => {
                        log::debug!(
                            "warp-launch: no thread for a CPU chunk ({e}); running it on the launch's thread"
                        );
                        here.push(first);
                    }
                }
            }
            let mut failed: Vec<(usize, String)> = here
                .into_iter()
                .filter_map(|first| chunk_at(first).map(|m| (first, m)))
                .collect();
            for (first, h) in spawned {
                match h.join() {
                    Ok(Some(m)) => failed.push((first, m)),
                    Ok(None) => {}
                    Err(_) => {
                        failed.push((first, "the thread running this chunk panicked".to_string()))
                    }
                }
            }
            failed.into_iter().min_by_key(|f| f.0).map(|f| f.1)
        })
    }
}

/// Runs `forward` over task indices `first..last`, then takes this
/// thread's assertion record.
///
/// # Safety
///
/// `forward` and `take` are a bound kernel's entry points (warp-build's
/// `wpl_` functions, `EmbeddedCpuKernel::new`'s contract); `args` holds a
/// `wp_args_<key>` as [`NativeKernel::pack`] writes it (the layout the
/// compiled code reported, checked at bind; each field from an argument
/// checked against its declared parameter: `array_t`s of host-reachable
/// arrays that the launch keeps alive and whose storages it holds locked);
/// `dim` is Warp's `launch_bounds_t<N>` of the domain, whose task indices
/// `first..last` lie in; and the kernel's access rules held for the launch
/// shape (checked, or promised by the caller of an unchecked launch), so
/// the kernel stays inside its arrays. No other thread runs the same work
/// items at the same time, nor any that touch the same elements.
unsafe fn run_chunk(
    forward: CpuForwardFn,
    take: CpuAssertFn,
    dim: &[u64; 4],
    args: &mut [u128],
    first: usize,
    last: usize,
) -> Option<String> {
    // SAFETY: the caller's promise (above).
    unsafe {
        forward(
            dim.as_ptr().cast::<c_void>(),
            args.as_mut_ptr().cast::<c_void>(),
            first,
            last,
        );
    }
    take_message(take)
}

/// The assertion record of this thread, copied (and cleared by the call).
fn take_message(take: CpuAssertFn) -> Option<String> {
    // SAFETY: `take` is warp-build's `wpl_take_assert`
    // (`EmbeddedCpu::new`'s contract): it returns null or a NUL-terminated
    // string that stays valid until this thread's next record.
    let p = unsafe { take() };
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null: a NUL-terminated string (above), copied at once.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Warp's `launch_bounds_t<N>` for `bounds`, in 8-byte words (the struct's
/// alignment).
fn bounds_words(bounds: &Bounds) -> [u64; 4] {
    let raw = encode::launch_bounds(bounds.ndim, &bounds.shape, bounds.size, bounds.coord_mult);
    let mut words = [0u64; 4];
    for (w, b) in words.iter_mut().zip(raw.chunks_exact(8)) {
        let mut le = [0u8; 8];
        le.copy_from_slice(b);
        *w = u64::from_le_bytes(le);
    }
    words
}

/// Whether the arrays of `args` give each work item elements of its own:
/// every array is contiguous (no two indices share an element), and two
/// arrays whose storages share memory (compared by address range, so two
/// handles of one memory count as one) are the same view (else `y[i]` may
/// be `x[i + 1]`). The arrays struct values hold count as arrays; a value
/// made from raw bytes (`StructValue::from_bytes`, whose arrays are not
/// known) makes the launch serial.
pub(super) fn disjoint(args: &[Arg]) -> bool {
    if args
        .iter()
        .any(|a| matches!(a, Arg::Struct(s) if s.is_vouched()))
    {
        return false;
    }
    let arrays: Vec<&crate::array::Array> = args
        .iter()
        .filter_map(Arg::as_array)
        .chain(args.iter().flat_map(|a| a.held().iter().map(|h| &h.array)))
        .collect();
    arrays.iter().all(|a| a.is_contiguous())
        && arrays.iter().enumerate().all(|(i, a)| {
            arrays[..i].iter().all(|b| {
                !a.storage().shares_bytes_with(b.storage())
                    || (a.data_address() == b.data_address()
                        && a.shape() == b.shape()
                        && a.strides() == b.strides()
                        && std::ptr::eq(a.dtype(), b.dtype()))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::ParamKind;

    /// The arrays a struct value holds count in the overlap check: a held
    /// array overlapping an argument (not the same view) makes the launch
    /// serial, a separate one does not, and a value from raw bytes (arrays
    /// unknown) always does.
    #[test]
    fn held_arrays_join_the_overlap_check() {
        use crate::array::Array;
        use crate::launch::bind::StructValue;
        let st = StructType::new(
            "Holder",
            vec![(
                "data".into(),
                ParamKind::Array {
                    dtype: crate::abi::DType::FLOAT32,
                    ndim: Some(1),
                },
            )],
        );
        let x = Array::zeros::<f32>(Device::Cpu, &[8]).unwrap();
        let held = |a: &Array| {
            Arg::Struct(StructValue::with_arrays(&st, vec![0; st.size], vec![a.clone()]).unwrap())
        };
        let other = Array::zeros::<f32>(Device::Cpu, &[8]).unwrap();
        assert!(disjoint(&[Arg::Array(x.clone()), held(&other)]));
        // The same view: each work item still has its own elements.
        assert!(disjoint(&[Arg::Array(x.clone()), held(&x)]));
        // Shifted by one: y[i] is x[i + 1].
        let shifted = x.slice(0, 1..8).unwrap();
        assert!(!disjoint(&[Arg::Array(x.clone()), held(&shifted)]));
        assert!(!disjoint(&[held(&x), held(&shifted)]));
        // SAFETY: never launched; only the overlap check looks at it.
        let raw = unsafe { StructValue::from_bytes("Holder", &vec![0; st.size]) };
        assert!(!disjoint(&[Arg::Array(x), Arg::Struct(raw)]));
    }

    const CU: &str = include_str!("../../tests/fixtures/wp_kernels.cu");
    const META: &str = include_str!("../../tests/fixtures/wp_kernels.meta");

    #[test]
    fn forward_kernels_are_elementwise_only_without_atomics_and_with_identity_indices() {
        let decls = crate::aot::declarations(CU, "wp_kernels.cu", META, "wp_kernels.meta").unwrap();
        let mut got: Vec<(String, bool)> = decls
            .iter()
            .map(|d| {
                let s = &d.spec;
                let e = is_elementwise(s.kernel_dim(), s.accesses(Pass::Forward), d.atomics);
                (d.key.clone(), e)
            })
            .collect();
        got.sort();
        let want: Vec<(String, bool)> = [
            ("add2d", true),
            // loss[0] += y[i] * y[i]: a constant index and an atomic.
            ("chain_loss", false),
            ("chain_sin", true),
            // count[i] += 1 is identity-indexed, but atomic.
            ("count_visits", false),
            ("index4d", true),
            ("lean_fill", true),
            ("normalize_scale", true),
            ("saxpy", true),
            ("transform", true),
            ("use_struct", true),
        ]
        .into_iter()
        .map(|(k, e)| (k.to_string(), e))
        .collect();
        assert_eq!(got, want);
        // The atomics come from the generated code: only those two use any.
        let mut atomic: Vec<&str> = decls
            .iter()
            .filter(|d| d.atomics)
            .map(|d| d.key.as_str())
            .collect();
        atomic.sort_unstable();
        assert_eq!(atomic, ["chain_loss", "count_visits"]);
        // Other index forms are not elementwise: a transposed 2-D access, a
        // 1-D index of a 2-D kernel, an adjoint, an unproven kernel.
        let rule = |indices: Vec<AxisIndex>, target| crate::signature::ArrayAccess {
            param: "a".into(),
            target,
            indices,
            null_ok: false,
            line: 0,
        };
        let checked = |r| Accesses::Checked(vec![r]);
        let (t0, t1) = (AxisIndex::Thread(0), AxisIndex::Thread(1));
        assert!(is_elementwise(
            2,
            &checked(rule(vec![t0, t1], AccessTarget::Param)),
            false
        ));
        assert!(!is_elementwise(
            2,
            &checked(rule(vec![t1, t0], AccessTarget::Param)),
            false
        ));
        assert!(!is_elementwise(
            2,
            &checked(rule(vec![t0], AccessTarget::Param)),
            false
        ));
        assert!(!is_elementwise(
            1,
            &checked(rule(vec![t0], AccessTarget::Adjoint)),
            false
        ));
        assert!(!is_elementwise(
            1,
            &checked(rule(vec![AxisIndex::WorkItem], AccessTarget::Param)),
            false
        ));
        assert!(!is_elementwise(
            1,
            &checked(rule(vec![t0], AccessTarget::Param)),
            true
        ));
        let unproven = Accesses::Unproven(crate::signature::Unproven {
            param: "a".into(),
            location: "x".into(),
            reason: "y".into(),
        });
        assert!(!is_elementwise(1, &unproven, false));
        assert!(is_elementwise(1, &Accesses::Checked(Vec::new()), false));
    }

    #[test]
    fn the_declared_argument_struct_is_c_layout_with_array_t() {
        let decls = crate::aot::declarations(CU, "wp_kernels.cu", META, "wp_kernels.meta").unwrap();
        let layout = |key: &str| {
            let d = decls.iter().find(|d| d.key == key).unwrap();
            let st = declared_layout(d.spec.params());
            (
                st.size,
                st.align,
                st.fields.iter().map(|f| f.offset).collect::<Vec<_>>(),
            )
        };
        // { float a; array_t x; array_t y; }: array_t is 56 bytes, 8-aligned.
        assert_eq!(layout("saxpy"), (120, 8, vec![0, 8, 64]));
        // { Params p (20 B, 4-aligned); array_t x; array_t out; }
        assert_eq!(layout("use_struct"), (136, 8, vec![0, 24, 80]));
        // { mat33 m (36 B); array_t t, v, out }
        assert_eq!(layout("transform"), (208, 8, vec![0, 40, 96, 152]));
        // { int value; array_t out; }
        assert_eq!(layout("lean_fill"), (64, 8, vec![0, 8]));
        let p = ParamKind::Value(crate::abi::DType::FLOAT64);
        let st = declared_layout(&[
            crate::signature::KernelParam {
                name: "c".into(),
                kind: ParamKind::Value(crate::abi::DType::INT8),
            },
            crate::signature::KernelParam {
                name: "d".into(),
                kind: p,
            },
        ]);
        assert_eq!((st.size, st.align, st.fields[1].offset), (16, 8, 8));
    }

    #[test]
    fn launch_bounds_words_are_warps_struct() {
        let b = Bounds {
            ndim: 2,
            shape: [3, 5, 0, 0],
            size: 30,
            coord_mult: 2,
        };
        let w = bounds_words(&b);
        // launch_bounds_t<2>: int shape[2]; size_t size; size_t coord_mult;
        assert_eq!(w[0], 3 | (5 << 32));
        assert_eq!((w[1], w[2], w[3]), (30, 2, 0));
        let b = Bounds {
            ndim: 1,
            shape: [7, 0, 0, 0],
            size: 7,
            coord_mult: 1,
        };
        // launch_bounds_t<1>: int shape[1]; (4 bytes padding) size; coord_mult.
        assert_eq!(bounds_words(&b), [7, 7, 1, 0]);
    }
}
