//! The CPU device: a kernel with a Rust implementation, or a Warp kernel
//! with its module's compiled CPU code (`cpu::native`), runs over the
//! domain with block_dim 1 on host-reachable arrays, through the same
//! checks, `Launch` commands and tape as CUDA launches.
//!
//! Per-element Rust bodies ([`cpu_each_fn`], the deprecated [`cpu_fn`]) run serially on purpose: kernels
//! write through shared arrays without synchronisation (Warp's model);
//! running indices on several threads would make overlapping writes data
//! races in Rust's sense. Block bodies ([`cpu_block_fn`], `block`) get typed
//! slices whose aliasing the launch checks byte by byte, so they run at
//! the speed of a plain loop and, for large launches, on several threads
//! (each writes only its own block). (Compiled Warp code runs on several
//! threads only where its declaration proves that the work items touch
//! disjoint elements; see `cpu::native`.) A launch holds the locks of the storages it uses
//! while it runs (see [`crate::array`]): a launch or copy on another thread
//! that uses one of them waits; launches on unrelated arrays do not.
//!
//! The room: this file (Rust bodies, [`cpu_each_fn`], the runner `run`),
//! `block` (block bodies, their slices and threads), `native` (compiled Warp code, threading) and `native_types` (the entry
//! points warp-build links in). The launch road calls `run` from
//! `launch::prepare` alone, with a checked launch; of `launch` this room
//! uses only leaves that import nothing of it back: the arguments and
//! their checks (`launch::bind`) and the domain's [`Bounds`].
//!
//! A kernel body must not wait for another thread (join, channel, a mutex)
//! that uses one of the launch's own arrays: that thread waits for the
//! launch, and the launch for it.

use std::marker::PhantomData;
use std::ops::Add;
use std::sync::Arc;

use crate::abi::{Element, Value};
use crate::error::{Error, Result};
use crate::launch::bind::{Arg, Params};
use crate::launch::domain::Bounds;
use crate::signature::Pass;

mod block;
mod native;
mod native_types;

use block::BlockFn;
pub use block::{Block, CpuBlockArgs};

pub(crate) use native::{NativeKernel, is_elementwise};
pub use native::{cpu_threads, set_cpu_threads};
pub use native_types::{
    CpuAssertFn, CpuBackwardFn, CpuForwardFn, CpuLayoutFn, EmbeddedCpu, EmbeddedCpuKernel,
};

/// A CPU kernel body, made by [`cpu_block_fn`] (called once per block of
/// work items with typed slices: the fast one) or [`cpu_each_fn`] (a
/// per-element closure, its arguments decoded once per launch), given to
/// [`Kernel::with_cpu`](crate::Kernel::with_cpu). ([`cpu_fn`], which
/// decodes the arguments per element, is deprecated.)
#[derive(Clone)]
pub struct CpuFn(RustBody);

/// The three kinds of Rust body.
#[derive(Clone)]
enum RustBody {
    Element(Arc<ElementFn>),
    Each(Arc<EachFn>),
    Block(Arc<BlockFn>),
}

/// A per-element body (see the deprecated [`cpu_fn`]).
type ElementFn = dyn Fn(&Thread, &CpuArgs<'_>) -> Result<()> + Send + Sync;

/// A body that decodes its arguments once and runs the element loop (see
/// [`cpu_each_fn`]).
type EachFn = dyn for<'r> Fn(&CpuArgs<'_>, EachThread<'r>) -> Result<Ran<'r>> + Send + Sync;

/// A body called once per index of the domain with the thread's
/// coordinates and the launch's arguments, read and written element by
/// element through [`CpuArray`] (bounds-checked copies, any layout). Runs
/// serially, in index order.
///
/// Deprecated: every call goes through a `dyn` closure and decodes its
/// arguments again (a lookup, a type check and a view per array per
/// element), which no compiler can take out of the loop: a saxpy body
/// costs 35–180 ns per element, 55–180 times a plain loop. Nothing is lost
/// by moving: [`cpu_each_fn`] runs the same closure on the same threads in
/// the same order with the same errors, decoding once per launch (about
/// 4.5 times a plain loop on a 2-core machine), and [`cpu_block_fn`] runs
/// at loop speed, on several threads. The move is mechanical:
/// `cpu_fn(|t, args| body)` becomes
/// `cpu_each_fn(|args, each| each.run(|t| body))`, and reading the arrays
/// and values before `each.run` makes it fast.
#[deprecated(
    since = "0.1.0",
    note = "decodes the arguments per element (55-180x a plain loop); use cpu_each_fn (the same closure inside `each.run`, arguments decoded once per launch) or cpu_block_fn (loop speed)"
)]
pub fn cpu_fn(f: impl Fn(&Thread, &CpuArgs<'_>) -> Result<()> + Send + Sync + 'static) -> CpuFn {
    CpuFn(RustBody::Element(Arc::new(f)))
}

/// A per-element body that decodes its arguments once per launch: `f` is
/// called once, reads its values and arrays from [`CpuArgs`], and hands
/// the per-element closure to [`EachThread::run`], which calls it for every
/// thread of the domain in index order, serially (as [`cpu_fn`]). The
/// closure captures typed [`CpuArray`]s and values, so per element it pays
/// only the bounds-checked reads and writes, and the compiler inlines it
/// into the loop: several times faster than [`cpu_fn`], which decodes its
/// arguments in every call.
///
/// ```
/// use warp_launch::{Array, KernelSpec, cpu_each_fn};
/// # fn main() -> warp_launch::Result<()> {
/// // out[i, j] = a * x[i, j]
/// let scale = KernelSpec::new("scale", 2)
///     .value::<f32>("a")
///     .array::<f32>("x", 2)
///     .array::<f32>("out", 2)
///     .declare()?
///     .with_cpu(
///         cpu_each_fn(|args, each| {
///             let a: f32 = args.value(0)?;
///             let (x, out) = (args.array::<f32>(1)?, args.array::<f32>(2)?);
///             each.run(|t| out.set(t.tid2(), a * x.get(t.tid2())?))
///         }),
///         None,
///     );
/// let x = Array::from_slice("cpu", &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// let out = Array::zeros::<f32>("cpu", &[2, 3])?;
/// scale.launch([2, 3]).inputs((3.0f32, &x)).outputs(&out).device("cpu").run()?;
/// assert_eq!(out.to_vec::<f32>()?, [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]);
/// # Ok(()) }
/// ```
///
/// The body must end with `each.run(..)`: its result, [`Ran`], is the only
/// value of the type the body returns, so a body that forgets the loop does
/// not compile. An error from the closure stops the loop and is the
/// launch's error; an index outside an array names the kernel, the
/// parameter, the thread being run, the index and the shape.
pub fn cpu_each_fn(
    f: impl for<'r> Fn(&CpuArgs<'_>, EachThread<'r>) -> Result<Ran<'r>> + Send + Sync + 'static,
) -> CpuFn {
    CpuFn(RustBody::Each(Arc::new(f)))
}

/// The element loop of a [`cpu_each_fn`] launch, handed to its body once:
/// [`EachThread::run`] calls a closure for every thread of the domain.
pub struct EachThread<'r> {
    bounds: &'r Bounds,
    /// Ties [`Ran`] to this launch: invariant in `'r`.
    _launch: PhantomData<fn(&'r ()) -> &'r ()>,
}

/// Proof that a [`cpu_each_fn`] body ran its element loop (returned by
/// [`EachThread::run`] only).
pub struct Ran<'r>(PhantomData<fn(&'r ()) -> &'r ()>);

impl<'r> EachThread<'r> {
    /// Calls `f` for every thread of the launch's domain, in index order
    /// on the launch's thread (Warp's `wp.tid()` in [`Thread`]), stopping at
    /// the first error.
    ///
    /// # Errors
    ///
    /// The first error `f` returns.
    #[inline]
    pub fn run(self, mut f: impl FnMut(&Thread) -> Result<()>) -> Result<Ran<'r>> {
        // The domain copied into locals: the body writes through raw
        // pointers, which could otherwise alias it and force a reload per
        // element.
        let nd = self.bounds.ndim.min(4);
        let shape: [u32; 4] = self.bounds.shape;
        let (size, repeat) = (self.bounds.size, self.bounds.coord_mult.max(1));
        // The coordinates advance as an odometer over `shape` (each held
        // `coord_mult` times, as `launch_coord` unravels a task index),
        // with no division per element. The loop writes no memory of its
        // own per element: an index error takes the thread's coordinates
        // on its way out (`name_thread`).
        let mut coords = [0i32; 4];
        // Nested loops: the innermost axis (each coordinate held
        // `coord_mult` times) in a plain loop, the outer axes advanced as
        // an odometer once per row, with no division per element.
        let last = nd.max(1) - 1;
        // A 1-D kernel's coordinate grows without bound (as `launch_coord`
        // gives it): its row is the whole domain.
        let inner = if last == 0 {
            size.div_ceil(repeat).min(i32::MAX as usize) as i32
        } else {
            shape[last].max(1) as i32
        };
        let mut left = size;
        while left > 0 {
            // A row: `inner` coordinates, each held `repeat` times. One
            // call site of `f`, so that the compiler inlines it; each
            // call's `Thread` is made from locals (the row's outer
            // coordinates, `j` on the innermost axis), so that it lives in
            // registers rather than in memory written every element.
            let row = (inner as usize).saturating_mul(repeat).min(left);
            let outer = coords;
            let (mut j, mut held) = (0, 0);
            for _ in 0..row {
                let here = Thread {
                    coords: with_last(outer, last, j),
                    ndim: nd,
                };
                if let Err(e) = f(&here) {
                    // The thread made again from the row's values, so
                    // that the loop keeps only the coordinates `f` reads.
                    return Err(name_thread(e, with_last(outer, last, j), nd));
                }
                held += 1;
                if held == repeat {
                    held = 0;
                    j += 1;
                }
            }
            left -= row;
            advance(&mut coords, &shape[..last]);
        }
        Ok(Ran(PhantomData))
    }

    /// The number of threads [`EachThread::run`] calls its closure for.
    pub fn len(&self) -> usize {
        self.bounds.size
    }

    /// Whether the domain has no thread (never: a launch of size 0 runs no
    /// body).
    pub fn is_empty(&self) -> bool {
        self.bounds.size == 0
    }
}

/// A body called once per [`Block`], a contiguous range of linear task
/// indices, with the arrays as typed slices ([`CpuBlockArgs`]): its loop
/// is plain Rust over `&[T]`/`&mut [T]`, which the compiler vectorises,
/// instead of one call and bounds-checked copy per element.
///
/// ```
/// use warp_launch::{Array, Device, KernelSpec, cpu_block_fn};
/// # fn main() -> warp_launch::Result<()> {
/// let saxpy = KernelSpec::new("saxpy", 1)
///     .value::<f32>("a")
///     .array::<f32>("x", 1)
///     .array::<f32>("y", 1)
///     .indexed_by_thread("x")
///     .indexed_by_thread("y")
///     .declare()?
///     .with_cpu(
///         cpu_block_fn(|_block, args| {
///             let a = args.value::<f32>(0)?;
///             let x = args.slice::<f32>(1)?;
///             let y = args.slice_mut::<f32>(2)?;
///             for (y, x) in y.iter_mut().zip(x) {
///                 *y += a * x;
///             }
///             Ok(())
///         }),
///         None,
///     );
/// let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0, 3.0], &[3])?;
/// let y = Array::from_slice(Device::Cpu, &[1.0f32; 3], &[3])?;
/// saxpy.launch(3).device("cpu").inputs((2.0f32, &x, &y)).run()?;
/// assert_eq!(y.to_vec::<f32>()?, [3.0, 5.0, 7.0]);
/// # Ok(()) }
/// ```
///
/// What a block gets:
/// - [`CpuBlockArgs::slice`] / [`CpuBlockArgs::slice_mut`]: the block's
///   elements of an array with one element per work item (`s[k]` is task
///   index `block.start() + k`); [`CpuBlockArgs::whole`]: every element of
///   an array, read-only. Contiguous arrays only: a strided one is refused
///   with [`Error::Argument`] (pass `Array::contiguous()`, or use
///   [`cpu_each_fn`]).
/// - Launches of at least 2^18 work items whose arrays are contiguous and
///   do not overlap (unless they are the same view) run as contiguous
///   blocks, four per thread, on [`cpu_threads`] threads, each thread
///   taking the next block in index order when it finishes one; others as
///   one block on the launch's thread. A body must compute each task index's elements from
///   that index alone (not from where its block starts or ends), so that
///   every split gives the serial result.
///
/// Soundness (the slices are real references into array memory): the
/// launch holds its storages' locks until every block has returned; a
/// body's thread is sealed so that a copy or CPU launch from it on the
/// launch's own memory is refused ([`Error::WouldDeadlock`]) rather than
/// reaching bytes it holds slices of; every slice handed out is noted with
/// its byte range for the whole launch, and one whose bytes overlap
/// another's while either is mutable is refused ([`Error::Argument`]), so
/// `&mut` never aliases (an array passed as input and output, or two
/// overlapping views, cannot be a `slice` and a `slice_mut`); `slice_mut`
/// covers only the block's own range, so threads write disjoint bytes; and
/// slices cannot outlive the body call (its lifetime is the call's).
pub fn cpu_block_fn(
    f: impl Fn(Block, &mut CpuBlockArgs<'_>) -> Result<()> + Send + Sync + 'static,
) -> CpuFn {
    CpuFn(RustBody::Block(Arc::new(f)))
}

/// A kernel's implementation on the CPU device.
#[derive(Clone)]
pub(crate) enum CpuKernel {
    /// Rust closures ([`Kernel::with_cpu`](crate::Kernel::with_cpu)).
    Rust {
        forward: CpuFn,
        backward: Option<CpuFn>,
    },
    /// The module's CPU code, compiled from Warp's generated C++.
    Native(NativeKernel),
    /// The module has CPU code, but none for this kernel: why.
    Unsupported(String),
}

impl CpuKernel {
    pub(crate) fn has_backward(&self) -> bool {
        match self {
            CpuKernel::Rust { backward, .. } => backward.is_some(),
            CpuKernel::Native(n) => n.has_backward(),
            CpuKernel::Unsupported(_) => false,
        }
    }
}

impl std::fmt::Debug for CpuKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuKernel::Rust { backward, .. } => {
                write!(f, "rust (backward: {})", backward.is_some())
            }
            CpuKernel::Native(n) => write!(
                f,
                "compiled (backward: {}, parallel forward: {})",
                n.has_backward(),
                n.is_elementwise()
            ),
            CpuKernel::Unsupported(why) => write!(f, "unsupported ({why})"),
        }
    }
}

/// The function a CPU launch runs.
pub(crate) enum CpuBody<'a> {
    Rust(&'a CpuFn),
    Native(&'a NativeKernel),
}

/// One thread of a CPU launch: `wp.tid()`.
#[derive(Debug, Clone, Copy)]
pub struct Thread {
    coords: [i32; 4],
    ndim: usize,
}

impl Thread {
    /// The first coordinate (`i = wp.tid()`).
    pub fn tid(&self) -> i32 {
        self.coords[0]
    }
    /// Two coordinates (`i, j = wp.tid()`).
    pub fn tid2(&self) -> (i32, i32) {
        (self.coords[0], self.coords[1])
    }
    /// Three coordinates.
    pub fn tid3(&self) -> (i32, i32, i32) {
        (self.coords[0], self.coords[1], self.coords[2])
    }
    /// Four coordinates.
    pub fn tid4(&self) -> (i32, i32, i32, i32) {
        (
            self.coords[0],
            self.coords[1],
            self.coords[2],
            self.coords[3],
        )
    }
    /// The kernel's coordinates.
    pub fn coords(&self) -> &[i32] {
        &self.coords[..self.ndim]
    }
}

/// Warp's `launch_coord`: a linear index to up to 4 coordinates, dividing
/// by `coord_mult` first (folded extra dimensions share coordinates).
pub fn launch_coord(linear: usize, shape: &[u32], coord_mult: usize) -> [i32; 4] {
    let mut c = [0i32; 4];
    let mut l = if coord_mult > 1 {
        linear / coord_mult
    } else {
        linear
    };
    for d in (1..shape.len()).rev() {
        let e = shape[d].max(1) as usize;
        c[d] = (l % e) as i32;
        l /= e;
    }
    if !shape.is_empty() {
        c[0] = l as i32;
    }
    c
}

/// The arguments of a CPU launch, by parameter index (adjoints after the
/// forward parameters) or name.
pub struct CpuArgs<'a> {
    /// The kernel, for parameter names and messages.
    kernel: Params<'a>,
    /// The arguments: forward, then adjoints for an adjoint launch.
    args: &'a [Arg],
    /// The function running, for messages.
    pass: Pass,
    /// The coordinates of the thread the arguments were made for (a
    /// block's first), for messages; `ndim` 0 in the element loop, whose
    /// index errors name the thread being run on their way out of it
    /// (`name_thread`).
    coords: [i32; 4],
    /// The number of coordinates.
    ndim: usize,
    /// Not `Sync`: the arguments stay on the launch's thread, so a kernel
    /// body cannot hand them to other threads that would write concurrently.
    _local: PhantomData<*const ()>,
}

impl<'a> CpuArgs<'a> {
    /// The arguments of a launch, made for the thread at `coords` (`ndim`
    /// of them, 0 for none yet; for messages).
    fn new(
        kernel: Params<'a>,
        args: &'a [Arg],
        pass: Pass,
        (coords, ndim): ([i32; 4], usize),
    ) -> CpuArgs<'a> {
        CpuArgs {
            kernel,
            args,
            pass,
            coords,
            ndim,
            _local: PhantomData,
        }
    }

    #[inline]
    fn arg(&self, index: usize) -> Result<&'a Arg> {
        self.args
            .get(index)
            .ok_or_else(|| self.kernel.no_such_param(format!("index {index}")))
    }

    fn wrong(&self, index: usize, want: String) -> Error {
        self.wrong_with(
            index,
            want,
            "the CPU implementation reads the parameter as another type than declared; fix the closure".into(),
        )
    }

    fn wrong_with(&self, index: usize, want: String, hint: String) -> Error {
        let name = self
            .kernel
            .at(index)
            .map_or(format!("#{index}"), |p| p.0.into_owned());
        Error::Argument(Box::new(crate::error::ArgumentError {
            kernel: self.kernel.name.to_string(),
            index,
            param: name,
            expected: want,
            given: self
                .args
                .get(index)
                .map_or("nothing".into(), |a| a.describe()),
            hint,
        }))
    }

    /// Where an array of parameter `index` is read: for its messages.
    #[inline]
    fn site(&self, index: usize) -> ArraySite<'a> {
        ArraySite {
            kernel: self.kernel,
            pass: self.pass,
            param: index,
            thread: self.coords,
            ndim: self.ndim,
        }
    }

    /// Index of parameter `name`.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchParam`] when the kernel has no parameter `name` (the message lists them).
    pub fn index(&self, name: &str) -> Result<usize> {
        self.kernel.index(name)
    }

    /// Array parameter `index` as elements of `T` (its dtype's Rust type).
    /// A null array has no elements.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] when parameter `index` is not an array of `T`'s dtype (nor null),
    /// [`Error::NoSuchParam`] for an index past the last parameter.
    pub fn array<T: Element>(&self, index: usize) -> Result<CpuArray<'a, T>> {
        match self.arg(index)? {
            // The extents and strides copied into the view: values in
            // registers, which no store through an element's address can
            // be taken to change, so a loop checks them without reloading.
            Arg::Array(a) if std::ptr::eq(a.dtype(), T::DTYPE) => {
                let (shape, strides) = (a.shape(), a.strides());
                let mut view = CpuArray {
                    base: a.data_address() as usize,
                    shape: [0; 4],
                    strides: [0; 4],
                    ndim: shape.len().min(4),
                    null: false,
                    site: self.site(index),
                    _t: PhantomData,
                };
                // Four fixed steps, not a copy of `ndim` (a call to memcpy).
                for d in 0..4 {
                    view.shape[d] = shape.get(d).copied().unwrap_or(0);
                    view.strides[d] = strides.get(d).copied().unwrap_or(0);
                }
                Ok(view)
            }
            Arg::Null => Ok(CpuArray {
                base: 0,
                shape: [0; 4],
                strides: [0; 4],
                ndim: 1,
                null: true,
                site: self.site(index),
                _t: PhantomData,
            }),
            _ => Err(self.wrong(index, format!("an array of {}", T::DTYPE))),
        }
    }

    /// Array parameter `name`.
    ///
    /// # Errors
    ///
    /// The errors of [`CpuArgs::index`] and [`CpuArgs::array`].
    pub fn array_named<T: Element>(&self, name: &str) -> Result<CpuArray<'a, T>> {
        self.array(self.index(name)?)
    }

    /// Value parameter `index` as `T`.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] when parameter `index` is not a value that converts to `T`'s dtype,
    /// [`Error::NoSuchParam`] for an index past the last parameter.
    pub fn value<T: Element>(&self, index: usize) -> Result<T> {
        match self.arg(index)? {
            // The declared dtype (what a checked launch passes): its bytes
            // as they are, no converted copy per call.
            Arg::Value(v) if std::ptr::eq(v.dtype(), T::DTYPE) => {
                crate::abi::encode::element_from(v.bytes())
                    .ok_or_else(|| self.wrong(index, format!("a {} value", T::DTYPE)))
            }
            Arg::Value(v) => {
                let v: Value = v.try_convert(T::DTYPE).map_err(|why| {
                    self.wrong_with(
                        index,
                        format!("a {} value", T::DTYPE),
                        crate::launch::bind::conversion_hint(T::DTYPE, why),
                    )
                })?;
                crate::abi::encode::element_from(v.bytes())
                    .ok_or_else(|| self.wrong(index, format!("a {} value", T::DTYPE)))
            }
            _ => Err(self.wrong(index, format!("a {} value", T::DTYPE))),
        }
    }

    /// Value parameter `name`.
    ///
    /// # Errors
    ///
    /// The errors of [`CpuArgs::index`] and [`CpuArgs::value`].
    pub fn value_named<T: Element>(&self, name: &str) -> Result<T> {
        self.value(self.index(name)?)
    }
}

/// An index into a [`CpuArray`]: `i32` or 1 to 4 coordinates.
pub trait CpuIndex {
    /// The coordinates.
    fn coords(&self) -> ([i32; 4], usize);
}
impl CpuIndex for i32 {
    #[inline]
    fn coords(&self) -> ([i32; 4], usize) {
        ([*self, 0, 0, 0], 1)
    }
}
impl CpuIndex for (i32, i32) {
    #[inline]
    fn coords(&self) -> ([i32; 4], usize) {
        ([self.0, self.1, 0, 0], 2)
    }
}
impl CpuIndex for (i32, i32, i32) {
    #[inline]
    fn coords(&self) -> ([i32; 4], usize) {
        ([self.0, self.1, self.2, 0], 3)
    }
}
impl CpuIndex for (i32, i32, i32, i32) {
    #[inline]
    fn coords(&self) -> ([i32; 4], usize) {
        ([self.0, self.1, self.2, self.3], 4)
    }
}

/// An array seen by a CPU kernel: bounds-checked element reads and writes
/// through its host address (elements are copied, never borrowed). It lives
/// only for the kernel call that made it and stays on its thread (neither
/// `Send` nor `Sync`), so its writes cannot race or outlive the launch.
pub struct CpuArray<'a, T> {
    base: usize,
    /// Extents and strides (the first `ndim`; `MAX_DIMS` is 4).
    shape: [usize; 4],
    strides: [isize; 4],
    ndim: usize,
    /// Warp's `None`: no array at all.
    null: bool,
    site: ArraySite<'a>,
    _t: PhantomData<(&'a (), *const T)>,
}

/// The kernel, function, parameter and thread a [`CpuArray`] was made
/// for: what its index errors name.
#[derive(Clone, Copy)]
struct ArraySite<'a> {
    kernel: Params<'a>,
    pass: Pass,
    param: usize,
    /// The coordinates of the thread the view was made for (a message
    /// only; `ndim` 0: none, the element loop names the thread it runs).
    thread: [i32; 4],
    ndim: usize,
}

/// `e`, naming the thread at `coords` (`ndim` of them) when it is an index
/// error that names no thread yet: one a view of the element loop made
/// (those leave the thread to the loop, which knows it, so that the loop
/// stores nothing per element). An error of a launch made inside the body
/// already names its own thread and is left as it is.
#[cold]
#[inline(never)]
fn name_thread(mut e: Error, coords: [i32; 4], ndim: usize) -> Error {
    if let Error::CpuIndex(c) = &mut e
        && c.thread.is_empty()
    {
        c.thread = coords[..ndim.min(4)].to_vec();
    }
    e
}

impl<T: Element> CpuArray<'_, T> {
    /// Extents.
    #[inline]
    pub fn shape(&self) -> &[usize] {
        &self.shape[..self.ndim]
    }

    /// The element address of `idx`, checked against the shape. Per
    /// element this is the whole cost of an access, so it keeps the array's
    /// fields in registers: the coordinates stay values (the error path
    /// takes copies) and the checks of every axis are combined into one
    /// branch.
    #[inline]
    fn address(&self, idx: impl CpuIndex) -> Result<*mut T> {
        let (c, n) = idx.coords();
        let mut inside = n == self.ndim && self.base != 0;
        let mut off = 0isize;
        for ((&c, &extent), &stride) in c.iter().zip(&self.shape).zip(&self.strides).take(n) {
            inside &= (c as usize) < extent;
            off = off.wrapping_add((c as isize).wrapping_mul(stride));
        }
        if !inside {
            return Err(outside(
                self.site,
                self.shape,
                self.ndim,
                self.null,
                (c[0], c[1], c[2], c[3]),
                n,
            ));
        }
        Ok((self.base as isize).wrapping_add(off) as usize as *mut T)
    }
}

/// The error of index `c` (`n` coordinates) outside an array of `shape`
/// (the coordinates as four scalars: the element path never stores them).
#[cold]
#[inline(never)]
fn outside(
    site: ArraySite<'_>,
    shape: [usize; 4],
    ndim: usize,
    null: bool,
    c: (i32, i32, i32, i32),
    n: usize,
) -> Error {
    let c = [c.0, c.1, c.2, c.3];
    let shape = &shape[..ndim.min(4)];
    let param = site
        .kernel
        .at(site.param)
        .map_or(format!("#{}", site.param), |p| p.0.into_owned());
    Error::CpuIndex(Box::new(crate::error::CpuIndexError {
        kernel: site.kernel.name.to_string(),
        pass: site.pass,
        param_index: site.param,
        param,
        thread: site.thread[..site.ndim.min(4)].to_vec(),
        index: c[..n.min(4)].to_vec(),
        shape: if null { Vec::new() } else { shape.to_vec() },
    }))
}

impl<T: Element> CpuArray<'_, T> {
    /// The element at `idx`.
    ///
    /// # Errors
    ///
    /// [`Error::CpuIndex`] when `idx` lies outside the array (the message names the kernel,
    /// the parameter, the thread, the index and the shape).
    #[inline]
    pub fn get(&self, idx: impl CpuIndex) -> Result<T> {
        let p = self.address(idx)?;
        // SAFETY: the index is inside the shape; the array's view was
        // checked to lie inside its host-reachable storage, which the
        // launch keeps alive; the read copies the element.
        Ok(unsafe { p.read_unaligned() })
    }

    /// Writes `v` at `idx`.
    ///
    /// # Errors
    ///
    /// [`Error::CpuIndex`] as [`CpuArray::get`].
    #[inline]
    pub fn set(&self, idx: impl CpuIndex, v: T) -> Result<()> {
        let p = self.address(idx)?;
        // SAFETY: as in `get`; the launch holds the storage's lock and
        // `CpuArray` stays on its thread, so no other thread touches the
        // element.
        unsafe { p.write_unaligned(v) };
        Ok(())
    }

    /// Adds `v` at `idx` (Warp's `atomic_add`; serial, so a plain add).
    ///
    /// # Errors
    ///
    /// [`Error::CpuIndex`] as [`CpuArray::get`].
    #[inline]
    pub fn add(&self, idx: impl CpuIndex + Copy, v: T) -> Result<()>
    where
        T: Add<Output = T>,
    {
        let old = self.get(idx)?;
        self.set(idx, old + v)
    }
}

/// Runs `body`, the `pass` function of `kernel`, on the CPU once per work
/// item of `bounds` (block_dim 1) on `args` (checked by the launch): a Rust
/// body in order, compiled Warp code as `cpu::native` decides. `kernel`
/// names the parameters in messages.
pub(crate) fn run(
    kernel: Params<'_>,
    body: CpuBody<'_>,
    pass: Pass,
    bounds: &Bounds,
    args: &[Arg],
) -> Result<()> {
    if bounds.size == 0 {
        return Ok(());
    }
    // The locks of every storage the launch uses (arrays and gradients),
    // held while the kernel runs: kernels write arrays through their
    // addresses, so a launch or copy on another thread using one of them
    // waits. Launches on unrelated arrays run side by side.
    let arrays = || {
        args.iter()
            .flat_map(|a| {
                a.as_array()
                    .into_iter()
                    .chain(a.held().iter().map(|h| &h.array))
            })
            .flat_map(|a| std::iter::successors(Some(a), |a| a.grad()))
    };
    let _locks = crate::array::lock_storages(arrays().map(|a| &**a.storage()), "CPU launch")?;
    // Page-locked and managed arrays may still be used by CUDA work queued
    // on a stream, in any context: the kernel reads and writes them after it
    // is done. GPU work queued later waits for the locks taken above. Memory
    // lent to cudarc is refused, as GPU launches refuse it: its work on the
    // memory is not seen here.
    for a in arrays() {
        if let Some(alloc) = a.storage().allocation() {
            if alloc.is_lent() {
                return Err(Error::Lent {
                    call: format!("CPU launch of '{}'", kernel.name),
                    array: format!("{a:?}"),
                });
            }
            alloc.wait_idle()?;
        }
    }
    let f = match body {
        CpuBody::Rust(CpuFn(RustBody::Element(f))) => ElementBody::Dyn(&**f),
        CpuBody::Rust(CpuFn(RustBody::Each(f))) => ElementBody::Each(&**f),
        CpuBody::Rust(CpuFn(RustBody::Block(f))) => {
            return block::run(kernel, &**f, pass, bounds, args);
        }
        CpuBody::Native(n) => return n.run(kernel, pass, bounds, args),
    };
    // No thread yet: the loop names the one it runs in an index error.
    let cpu_args = CpuArgs::new(kernel, args, pass, ([0; 4], 0));
    let each = EachThread {
        bounds,
        _launch: PhantomData,
    };
    let ran = match f {
        ElementBody::Each(f) => f(&cpu_args, each).map(|_| ()),
        ElementBody::Dyn(f) => each.run(|t| f(t, &cpu_args)).map(|_| ()),
    };
    // An index error outside the loop (a `cpu_each_fn` body reading
    // before it) names the first thread.
    ran.map_err(|e| name_thread(e, [0; 4], bounds.ndim))
}

/// The per-element bodies of [`run`].
enum ElementBody<'f> {
    /// [`cpu_fn`]: called through the closure per element.
    Dyn(&'f ElementFn),
    /// [`cpu_each_fn`]: called once, running the element loop itself.
    Each(&'f EachFn),
}

/// `c` with `j` on axis `last` (no indexing by a variable: the result
/// stays in registers).
#[inline(always)]
fn with_last(c: [i32; 4], last: usize, j: i32) -> [i32; 4] {
    [
        if last == 0 { j } else { c[0] },
        if last == 1 { j } else { c[1] },
        if last == 2 { j } else { c[2] },
        if last == 3 { j } else { c[3] },
    ]
}

/// The coordinates after `c` in row-major order over `shape` (the first
/// coordinate grows without bound, as `launch_coord` gives it), written
/// to `c`.
#[inline]
fn advance(c: &mut [i32; 4], shape: &[u32]) {
    for d in (1..shape.len()).rev() {
        c[d] += 1;
        if (c[d] as u32) < shape[d].max(1) {
            return;
        }
        c[d] = 0;
    }
    c[0] += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_element_loops_odometer_gives_the_coordinates_launch_coord_gives() {
        for (shape, mult) in [
            (&[7u32][..], 1),
            (&[3, 4], 1),
            (&[2, 3, 4], 1),
            (&[2, 3, 4, 5], 1),
            (&[4], 5),
            (&[2, 0, 3], 1),
            (&[3, 2], 4),
        ] {
            let size = shape.iter().map(|&e| e.max(1) as usize).product::<usize>() * mult;
            let (mut c, mut held) = ([0i32; 4], 0);
            for idx in 0..size {
                assert_eq!(
                    c,
                    launch_coord(idx, shape, mult),
                    "{shape:?} x{mult} at {idx}"
                );
                held += 1;
                if held == mult {
                    held = 0;
                    advance(&mut c, shape);
                }
            }
        }
    }

    #[test]
    fn coordinates_unravel_row_major_and_fold_extra_dims() {
        assert_eq!(launch_coord(7, &[10], 1), [7, 0, 0, 0]);
        assert_eq!(launch_coord(7, &[3, 4], 1), [1, 3, 0, 0]);
        assert_eq!(launch_coord(23, &[2, 3, 4], 1), [1, 2, 3, 0]);
        // dim (4, 5) on a 1-D kernel: coord_mult 5, five threads per i.
        assert_eq!(launch_coord(19, &[4], 5), [3, 0, 0, 0]);
        assert_eq!(launch_coord(119, &[2, 3, 4, 5], 1), [1, 2, 3, 4]);
    }
}
