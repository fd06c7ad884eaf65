//! Block bodies ([`cpu_block_fn`](super::cpu_block_fn)): a Rust CPU kernel
//! called once per contiguous block of linear task indices with typed
//! slices of its arrays, so that its loop compiles as a plain Rust loop
//! (vectorised, no per-element call or bounds-checked copy).
//!
//! # Soundness
//!
//! A slice handed to a body is a real `&[T]` or `&mut [T]` into array
//! memory, so the launch must guarantee what Rust's references promise:
//! no other access to a `&mut [T]`'s bytes, and no write to a `&[T]`'s
//! bytes, while the slice lives. Slices live at most as long as the body
//! call that took them (the body is `for<'a> Fn(Block, &mut CpuBlockArgs<'a>)`
//! and `'static`, so it can keep nothing of lifetime `'a`). During the
//! launch:
//!
//! - **Other threads and copies.** The launch holds the locks of every
//!   storage its arrays use (`array::lock_storages`) until every block has
//!   returned: no copy, and no CPU launch on another thread, touches them.
//! - **The body itself** (and the launch's worker threads) cannot reach
//!   those storages through other handles either: while a block body runs,
//!   its thread is *sealed* (`array::seal_launch_storages`), and a copy or
//!   CPU launch from it on memory the launch holds is refused with
//!   [`Error::WouldDeadlock`](crate::Error::WouldDeadlock) instead of re-entering the lock.
//! - **Slices of one launch.** Every slice handed out is noted with its
//!   byte range in one table per launch, shared by all its blocks and kept
//!   until the launch ends. A slice is refused ([`Error::Argument`](crate::Error::Argument)) when
//!   its bytes overlap those of a slice already handed out and either of
//!   the two is mutable: two arguments over the same memory (`y` passed
//!   twice, or overlapping views) cannot be one `&mut` and one `&`, nor two
//!   `&mut`. The check is on bytes, not on parameters or storages, so it is
//!   exact: blocks of one array on different threads get disjoint ranges
//!   and never conflict; a whole-array read ([`CpuBlockArgs::whole`]) of
//!   an array another block writes always does.
//! - **Threads.** A launch runs its blocks on several threads only when it
//!   is large (at least 2^18 work items, as compiled Warp code) and its
//!   arrays pass `native::disjoint` (contiguous, and two arrays that share
//!   memory are the same view); [`CpuBlockArgs::slice_mut`] gives each
//!   block `&mut` over its own sub-range of the array only, so blocks on
//!   different threads write disjoint bytes. Anything else runs as one
//!   block on the launch's thread. Because the table is on bytes, a body
//!   that takes conflicting slices is refused in every block and on any
//!   thread count, never silently racing.
//! - **Layout.** Slices are made only of contiguous arrays (strided ones
//!   are refused with [`Error::Argument`](crate::Error::Argument): make a contiguous copy with
//!   `Array::contiguous`, or use the per-element [`cpu_each_fn`](super::cpu_each_fn),
//!   whose [`CpuArray`](super::CpuArray) reads any layout), of the dtype of
//!   `T` ([`Element`]: every bit pattern valid), aligned for `T`, inside
//!   their host-reachable storage (checked when the view was made and by
//!   the launch).

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{CpuArgs, Thread, launch_coord, native};
use crate::abi::Element;
use crate::array::Array;
use crate::error::Result;
use crate::launch::bind::{Arg, Params};
use crate::launch::domain::Bounds;
use crate::signature::Pass;

/// A block body (see [`cpu_block_fn`](super::cpu_block_fn)).
pub(crate) type BlockFn = dyn Fn(Block, &mut CpuBlockArgs<'_>) -> Result<()> + Send + Sync;

/// Fewest task indices per block, and the multiple every block but the
/// last is cut at (whole cache lines of any element type, and vector
/// loops without a remainder except at the end).
const BLOCK_ALIGN: usize = 64;

/// Blocks per thread of a threaded launch: threads claim them as they
/// finish, which evens out threads that run slower than others.
const BLOCKS_PER_THREAD: usize = 4;

/// A contiguous range of a CPU launch's linear task indices (`0..size` of
/// the domain, row-major: Warp's task index), given to a block body.
#[derive(Debug, Clone)]
pub struct Block {
    range: Range<usize>,
    shape: [u32; 4],
    ndim: usize,
    coord_mult: usize,
}

impl Block {
    /// The linear task indices of this block.
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }
    /// The first task index.
    pub fn start(&self) -> usize {
        self.range.start
    }
    /// How many task indices it has.
    pub fn len(&self) -> usize {
        self.range.len()
    }
    /// Whether it has none (never, for a block given to a body).
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
    /// The launch's kernel coordinates (`wp.tid()`) of task index `linear`.
    pub fn thread(&self, linear: usize) -> Thread {
        Thread {
            coords: launch_coord(linear, &self.shape[..self.ndim], self.coord_mult),
            ndim: self.ndim,
        }
    }
}

/// A slice handed out in a launch: its bytes, whether mutable, and for
/// messages its parameter and how it was taken.
struct Lent {
    span: (usize, usize),
    mutable: bool,
    param: usize,
    how: &'static str,
}

/// The arguments of a block body: values, and arrays as typed slices. Its
/// slices live as long as the body call (see the module's soundness notes
/// in the [`cpu_block_fn`](super::cpu_block_fn) docs).
pub struct CpuBlockArgs<'a> {
    args: CpuArgs<'a>,
    /// The block's task indices.
    block: Range<usize>,
    /// The launch's work items.
    size: usize,
    /// Every slice handed out in this launch (all blocks).
    lent: &'a Mutex<Vec<Lent>>,
    /// Not `Send`: a body cannot hand its arguments to another thread.
    _local: PhantomData<*const ()>,
}

impl<'a> CpuBlockArgs<'a> {
    /// Index of parameter `name`.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchParam`](crate::Error::NoSuchParam) when the kernel has no parameter `name` (the message lists them).
    pub fn index(&self, name: &str) -> Result<usize> {
        self.args.index(name)
    }

    /// Value parameter `index` as `T`.
    ///
    /// # Errors
    ///
    /// As [`CpuArgs::value`].
    pub fn value<T: Element>(&self, index: usize) -> Result<T> {
        self.args.value(index)
    }

    /// Value parameter `name`.
    ///
    /// # Errors
    ///
    /// As [`CpuArgs::value_named`].
    pub fn value_named<T: Element>(&self, name: &str) -> Result<T> {
        self.args.value_named(name)
    }

    /// The elements of array parameter `index` at this block's task
    /// indices: `s[k]` is element `block.start() + k` of the array in
    /// row-major order (the element of the thread at that task index, for
    /// an array of the launch's shape). The array must be contiguous and
    /// have exactly one element per work item.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`](crate::Error::Argument) when parameter `index` is not an array of `T`'s dtype, is null,
    /// strided, misaligned for `T`, has another element count than the launch has work items,
    /// or shares bytes with a mutable slice already handed out in this launch;
    /// [`Error::NoSuchParam`](crate::Error::NoSuchParam) for an index past the last parameter.
    pub fn slice<T: Element>(&self, index: usize) -> Result<&'a [T]> {
        let (ptr, len) = self.lend::<T>(index, false, true)?;
        // SAFETY: `lend` checked that `len` elements of `T` (dtype equal,
        // aligned, inside the host-reachable storage the launch holds
        // locked) start at `ptr`, and noted them: no mutable slice of
        // these bytes exists in this launch or will be handed out, and the
        // launch keeps every other writer off them (module docs).
        Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
    }

    /// [`CpuBlockArgs::slice`], mutable: each block gets only its own
    /// elements, so blocks on different threads never share one.
    ///
    /// # Errors
    ///
    /// As [`CpuBlockArgs::slice`], and when the elements share bytes with any slice already
    /// handed out in this launch (this parameter taken twice, or another argument over the
    /// same memory).
    #[allow(clippy::mut_from_ref)]
    pub fn slice_mut<T: Element>(&self, index: usize) -> Result<&'a mut [T]> {
        let (ptr, len) = self.lend::<T>(index, true, true)?;
        // SAFETY: as in `slice`; noted mutable, so no other slice of these
        // bytes exists in this launch or will be handed out.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }

    /// Every element of array parameter `index`, row-major, for reading
    /// (a gather, a stencil, a table): any shape, contiguous.
    ///
    /// # Errors
    ///
    /// As [`CpuBlockArgs::slice`], except that any element count is accepted; a launch whose
    /// blocks write this memory (a [`CpuBlockArgs::slice_mut`] over it in any block) refuses
    /// one of the two.
    pub fn whole<T: Element>(&self, index: usize) -> Result<&'a [T]> {
        let (ptr, len) = self.lend::<T>(index, false, false)?;
        // SAFETY: as in `slice`.
        Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
    }

    /// Checks parameter `index` for a slice of `T` (the block's part when
    /// `part`, else every element) and notes it: its first element and
    /// length.
    fn lend<T: Element>(&self, index: usize, mutable: bool, part: bool) -> Result<(*mut T, usize)> {
        let how = match (part, mutable) {
            (true, false) => "slice",
            (true, true) => "slice_mut",
            _ => "whole",
        };
        let a: &Array = match self.args.arg(index)? {
            Arg::Array(a) if std::ptr::eq(a.dtype(), T::DTYPE) => a,
            _ => {
                return Err(self.args.wrong(
                    index,
                    format!("an array of {} (CpuBlockArgs::{how})", T::DTYPE),
                ));
            }
        };
        let want = |what: String, hint: &str| self.args.wrong_with(index, what, hint.into());
        if !a.is_contiguous() {
            return Err(want(
                format!("a contiguous array of {} (CpuBlockArgs::{how})", T::DTYPE),
                "block bodies get slices of contiguous arrays only; pass a contiguous copy (Array::contiguous) or use the per-element cpu_each_fn, whose CpuArray reads any layout",
            ));
        }
        let elem = size_of::<T>();
        let base = a.data_address() as usize;
        if !a.is_empty() && !base.is_multiple_of(align_of::<T>()) {
            return Err(want(
                format!("an array aligned to {} bytes", align_of::<T>()),
                "the view starts at an address not aligned for its element type; pass a contiguous copy (Array::contiguous)",
            ));
        }
        let range = if part {
            if a.len() != self.size {
                return Err(want(
                    format!(
                        "an array of {} element(s), one per work item (CpuBlockArgs::{how})",
                        self.size
                    ),
                    "slice and slice_mut give the block's elements of an array of the launch's size; read other arrays with CpuBlockArgs::whole",
                ));
            }
            self.block.clone()
        } else {
            0..a.len()
        };
        if range.is_empty() {
            return Ok((std::ptr::NonNull::<T>::dangling().as_ptr(), 0));
        }
        let span = (base + range.start * elem, base + range.end * elem);
        let mut lent = self.lent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(other) = lent
            .iter()
            .find(|l| l.span.0 < span.1 && span.0 < l.span.1 && (l.mutable || mutable))
        {
            let other_name = self
                .args
                .kernel
                .at(other.param)
                .map_or(format!("#{}", other.param), |p| p.0.into_owned());
            let (m1, m2) = (
                if mutable { "mutable" } else { "shared" },
                if other.mutable { "mutable" } else { "shared" },
            );
            return Err(want(
                format!(
                    "memory no other slice of this launch holds while one of them is mutable (CpuBlockArgs::{how})"
                ),
                &format!(
                    "a {m1} slice of it would overlap the {m2} slice of '{other_name}' (CpuBlockArgs::{}) handed out in this launch: Rust references may not alias a mutable one; pass arrays over separate memory, take each array once, or use the per-element cpu_each_fn",
                    other.how
                ),
            ));
        }
        lent.push(Lent {
            span,
            mutable,
            param: index,
            how,
        });
        Ok(((base + range.start * elem) as *mut T, range.len()))
    }
}

/// How many blocks (threads) a block body's launch over `bounds` with
/// `args` runs as: several only for a large launch whose arrays pass
/// `native::disjoint`, at most [`native::cpu_threads`].
fn threads_for(bounds: &Bounds, args: &[Arg]) -> usize {
    if bounds.size < native::PARALLEL_MIN_TASKS {
        return 1;
    }
    let want = native::cpu_threads();
    if want <= 1 || !native::disjoint(args) {
        return 1;
    }
    want.min(bounds.size / native::MIN_CHUNK).max(1)
}

/// Runs block body `f` over the task indices of `bounds` (see the module
/// docs): one block on this thread, or contiguous blocks (four per thread)
/// that this thread and scoped threads take in index order as they finish.
/// The caller holds the storages' locks. The first failing block's error,
/// in index order, is returned; a body's panic is resumed on this thread
/// once every block has ended.
pub(crate) fn run(
    kernel: Params<'_>,
    f: &BlockFn,
    pass: Pass,
    bounds: &Bounds,
    args: &[Arg],
) -> Result<()> {
    let lent = Mutex::new(Vec::new());
    let owner = crate::array::launch_owner();
    let threads = threads_for(bounds, args);
    log::trace!(
        "warp-launch: kernel '{}' on cpu (block body): {} work item(s) on {threads} thread(s)",
        kernel.name,
        bounds.size
    );
    let block_at = |range: Range<usize>| -> Result<()> {
        let _sealed = crate::array::seal_launch_storages(owner);
        let block = Block {
            range: range.clone(),
            shape: bounds.shape,
            ndim: bounds.ndim,
            coord_mult: bounds.coord_mult,
        };
        let first = block.thread(range.start);
        let mut a = CpuBlockArgs {
            args: CpuArgs::new(kernel, args, pass, (first.coords, first.ndim)),
            block: range,
            size: bounds.size,
            lent: &lent,
            _local: PhantomData,
        };
        f(block, &mut a)
    };
    if threads <= 1 {
        return block_at(0..bounds.size);
    }
    let size = bounds.size;
    // More blocks than threads, claimed in index order by whichever thread
    // is free: a thread slowed by another process, or a core shared with
    // one, no longer holds up the launch's end by a whole share.
    let chunk = size
        .div_ceil(threads * BLOCKS_PER_THREAD)
        .next_multiple_of(BLOCK_ALIGN);
    let blocks = size.div_ceil(chunk);
    let next = AtomicUsize::new(0);
    // Runs blocks until none is left: the failures, with each block's start.
    let worker = || {
        let mut failed = Vec::new();
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= blocks {
                return failed;
            }
            let first = b * chunk;
            if let Err(e) = block_at(first..(first + chunk).min(size)) {
                failed.push((first, e));
            }
        }
    };
    let worker = &worker;
    std::thread::scope(|s| {
        let mut spawned = Vec::with_capacity(threads);
        for _ in 1..threads {
            match std::thread::Builder::new()
                .name("warp-launch-cpu".into())
                .spawn_scoped(s, worker)
            {
                Ok(h) => spawned.push(h),
                Err(e) => {
                    // The other threads take its blocks.
                    log::debug!("warp-launch: no thread for CPU blocks ({e})");
                }
            }
        }
        let mut failed = worker();
        let mut panicked = None;
        for h in spawned {
            match h.join() {
                Ok(f) => failed.extend(f),
                Err(p) => panicked = panicked.or(Some(p)),
            }
        }
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
        match failed.into_iter().min_by_key(|f| f.0) {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::cpu::{cpu_block_fn, cpu_each_fn, set_cpu_threads};
    use crate::{Array, Device, Error, Kernel, KernelSpec};

    /// Held by the tests that set the process-wide thread count.
    static THREADS: Mutex<()> = Mutex::new(());

    fn threads_lock() -> std::sync::MutexGuard<'static, ()> {
        THREADS.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn saxpy_spec() -> KernelSpec {
        KernelSpec::new("saxpy", 1)
            .value::<f32>("a")
            .array::<f32>("x", 1)
            .array::<f32>("y", 1)
    }

    /// saxpy as a block body: x through `slice`, y through `slice_mut`.
    fn block_saxpy() -> Kernel {
        saxpy_spec().declare().unwrap().with_cpu(
            cpu_block_fn(|_, args| {
                let a = args.value::<f32>(0)?;
                let x = args.slice::<f32>(1)?;
                let y = args.slice_mut::<f32>(2)?;
                for (y, x) in y.iter_mut().zip(x) {
                    *y += a * x;
                }
                Ok(())
            }),
            None,
        )
    }

    fn cpu(v: &[f32]) -> Array {
        Array::from_slice(Device::Cpu, v, &[v.len()]).unwrap()
    }

    fn run(k: &Kernel, n: usize, x: &Array, y: &Array) -> crate::Result<()> {
        k.launch(n).device("cpu").inputs((2.0f32, x, y)).run()
    }

    #[test]
    fn a_block_body_computes_what_the_per_element_body_does() {
        let element = saxpy_spec().declare().unwrap().with_cpu(
            cpu_each_fn(|args, each| {
                each.run(|t| {
                    let a = args.value::<f32>(0)?;
                    let i = t.tid();
                    let y = args.array::<f32>(2)?;
                    y.set(i, a * args.array::<f32>(1)?.get(i)? + y.get(i)?)
                })
            }),
            None,
        );
        let n = 1000;
        let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 3.0).collect();
        let ys: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
        let (x, y1, y2) = (cpu(&xs), cpu(&ys), cpu(&ys));
        run(&block_saxpy(), n, &x, &y1).unwrap();
        run(&element, n, &x, &y2).unwrap();
        let (a, b) = (y1.to_vec::<f32>().unwrap(), y2.to_vec::<f32>().unwrap());
        assert_eq!(a, b);
        assert_eq!(a[5], 2.0 * xs[5] + ys[5]);
        // The whole array through `whole`, and the block's coordinates: a
        // 2-D gather out[i, j] = table[(i + j) % 3] + j.
        let gather = KernelSpec::new("gather", 2)
            .array::<f32>("table", 1)
            .array::<f32>("out", 2)
            .declare()
            .unwrap()
            .with_cpu(
                cpu_block_fn(|block, args| {
                    let table = args.whole::<f32>(0)?;
                    let out = args.slice_mut::<f32>(1)?;
                    for (o, task) in out.iter_mut().zip(block.range()) {
                        let (i, j) = block.thread(task).tid2();
                        *o = table[(i + j) as usize % table.len()] + j as f32;
                    }
                    Ok(())
                }),
                None,
            );
        let table = cpu(&[10.0, 20.0, 30.0]);
        let out = Array::zeros::<f32>(Device::Cpu, &[4, 5]).unwrap();
        gather
            .launch([4, 5])
            .device("cpu")
            .inputs(&table)
            .outputs(&out)
            .run()
            .unwrap();
        let got = out.to_vec::<f32>().unwrap();
        assert_eq!(got[2 * 5 + 3], 30.0 + 3.0); // (2 + 3) % 3 = 2
        assert_eq!(got[3 * 5 + 4], 20.0 + 4.0); // 7 % 3 = 1
    }

    #[test]
    fn overlapping_arguments_are_refused_when_one_of_them_is_written() {
        let k = block_saxpy();
        // y as input and output: a shared and a mutable slice of one memory.
        let y = cpu(&[1.0; 8]);
        let e = run(&k, 8, &y, &y).unwrap_err();
        assert!(matches!(e, Error::Argument(_)), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("'y'") && msg.contains("'x'"), "{msg}");
        assert!(msg.contains("overlap"), "{msg}");
        assert_eq!(y.to_vec::<f32>().unwrap(), [1.0; 8], "nothing ran");
        // Overlapping views of one storage (y[i] is x[i + 1]).
        let both = cpu(&[1.0; 9]);
        let (xv, yv) = (both.slice(0, 0..8).unwrap(), both.slice(0, 1..9).unwrap());
        assert!(matches!(run(&k, 8, &xv, &yv), Err(Error::Argument(_))));
        // Disjoint views of one storage are fine.
        let (xv, yv) = (both.slice(0, 0..4).unwrap(), both.slice(0, 4..8).unwrap());
        run(&k, 4, &xv, &yv).unwrap();
        assert_eq!(both.to_vec::<f32>().unwrap()[4..8], [3.0; 4]);
        // One parameter taken mutably twice; read twice is fine.
        let twice = |mutable: bool| {
            saxpy_spec().declare().unwrap().with_cpu(
                cpu_block_fn(move |_, args| {
                    if mutable {
                        let a = args.slice_mut::<f32>(2)?;
                        let b = args.slice_mut::<f32>(2)?;
                        a[0] = b[0];
                    } else {
                        let a = args.slice::<f32>(1)?;
                        let b = args.whole::<f32>(1)?;
                        assert_eq!(a, b);
                    }
                    Ok(())
                }),
                None,
            )
        };
        let (x, y) = (cpu(&[1.0; 8]), cpu(&[1.0; 8]));
        assert!(matches!(
            run(&twice(true), 8, &x, &y),
            Err(Error::Argument(_))
        ));
        run(&twice(false), 8, &x, &y).unwrap();
    }

    #[test]
    fn strided_and_mis_sized_arrays_are_refused_with_what_to_do() {
        let k = block_saxpy();
        let wide = cpu(&[1.0; 16]);
        let strided = wide.slice_step(0, 0..16, 2).unwrap();
        let y = cpu(&[1.0; 8]);
        let e = run(&k, 8, &strided, &y).unwrap_err();
        assert!(matches!(e, Error::Argument(_)), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("contiguous") && msg.contains("Array::contiguous"),
            "{msg}"
        );
        // Its contiguous copy runs.
        run(&k, 8, &strided.contiguous().unwrap(), &y).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), [3.0; 8]);
        // slice wants one element per work item.
        let e = run(&k, 4, &cpu(&[1.0; 8]), &cpu(&[1.0; 4])).unwrap_err();
        assert!(e.to_string().contains("one per work item"), "{e}");
        // A dtype other than the slice's.
        let ints = Array::zeros::<i32>(Device::Cpu, &[8]).unwrap();
        assert!(matches!(
            k.launch(8).device("cpu").inputs((2.0f32, &ints, &y)).run(),
            Err(Error::Argument(_))
        ));
    }

    #[test]
    fn a_body_cannot_copy_into_its_own_launchs_memory() {
        let _threads = threads_lock();
        // Serially (the launch's thread re-enters its own lock) and on four
        // threads (a worker would wait for the launch's thread, which waits
        // for it: without the seal this hangs).
        let n = 1 << 18;
        for threads in [1, 4] {
            let y = Array::zeros::<f32>(Device::Cpu, &[n]).unwrap();
            let seen = Arc::new(Mutex::new(Vec::new()));
            let (ys, s) = (y.clone(), seen.clone());
            let k = saxpy_spec().declare().unwrap().with_cpu(
                cpu_block_fn(move |_, args| {
                    let out = args.slice_mut::<f32>(2)?;
                    // The launch's own y, through another handle: refused.
                    s.lock().unwrap().push(ys.to_vec::<f32>().map(|_| ()));
                    out[0] = 5.0;
                    Ok(())
                }),
                None,
            );
            set_cpu_threads(threads);
            let r = run(&k, n, &Array::zeros::<f32>(Device::Cpu, &[n]).unwrap(), &y);
            set_cpu_threads(0);
            r.unwrap();
            let got = std::mem::take(&mut *seen.lock().unwrap());
            // One body call per block: one serially, four per thread.
            let blocks = if threads == 1 {
                1
            } else {
                threads * super::BLOCKS_PER_THREAD
            };
            assert_eq!(got.len(), blocks);
            for g in got {
                assert!(matches!(g, Err(Error::WouldDeadlock { .. })), "{g:?}");
            }
            // After the launch, the thread is no longer sealed.
            assert_eq!(y.to_vec::<f32>().unwrap()[0], 5.0);
        }
    }

    #[test]
    fn threaded_runs_split_into_disjoint_blocks_and_equal_the_serial_run() {
        let _threads = threads_lock();
        // A compute-heavy 2-D kernel over 1024 x 512 (2^19 work items).
        let ranges = Arc::new(Mutex::new(Vec::new()));
        let r = ranges.clone();
        let k = KernelSpec::new("poly", 2)
            .array::<f32>("x", 2)
            .array::<f32>("out", 2)
            .declare()
            .unwrap()
            .with_cpu(
                cpu_block_fn(move |block, args| {
                    r.lock().unwrap().push(block.range());
                    let x = args.slice::<f32>(0)?;
                    let out = args.slice_mut::<f32>(1)?;
                    for ((o, &x), task) in out.iter_mut().zip(x).zip(block.range()) {
                        let (i, j) = block.thread(task).tid2();
                        let mut v = x;
                        for _ in 0..8 {
                            v = v * 0.5 + (i as f32) * 0.001 - (j as f32) * 0.002;
                        }
                        *o = v;
                    }
                    Ok(())
                }),
                None,
            );
        let (m, n) = (1024, 512);
        let xs: Vec<f32> = (0..m * n).map(|i| (i % 101) as f32).collect();
        let x = Array::from_slice(Device::Cpu, &xs, &[m, n]).unwrap();
        let go = |threads: usize| {
            set_cpu_threads(threads);
            ranges.lock().unwrap().clear();
            let out = Array::zeros::<f32>(Device::Cpu, &[m, n]).unwrap();
            k.launch([m, n])
                .device("cpu")
                .inputs(&x)
                .outputs(&out)
                .run()
                .unwrap();
            let mut rs = ranges.lock().unwrap().clone();
            rs.sort_by_key(|r| r.start);
            (out.to_vec::<f32>().unwrap(), rs)
        };
        let (serial, one) = go(1);
        let (threaded, four) = go(4);
        set_cpu_threads(0);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0], 0..m * n);
        // Four blocks per thread, claimed by whichever thread is free;
        // together they cover the domain once, in order.
        assert_eq!(four.len(), 16, "{four:?}");
        assert!(four.windows(2).all(|w| w[0].end == w[1].start), "{four:?}");
        assert_eq!((four[0].start, four[15].end), (0, m * n));
        assert_eq!(serial, threaded);
        // A launch below 2^18 work items runs as one block.
        ranges.lock().unwrap().clear();
        set_cpu_threads(4);
        let small = Array::zeros::<f32>(Device::Cpu, &[16, 16]).unwrap();
        let out = Array::zeros::<f32>(Device::Cpu, &[16, 16]).unwrap();
        k.launch([16, 16])
            .device("cpu")
            .inputs(&small)
            .outputs(&out)
            .run()
            .unwrap();
        set_cpu_threads(0);
        assert_eq!(ranges.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_whole_read_of_memory_another_block_writes_is_refused_on_any_thread_count() {
        let _threads = threads_lock();
        // out[i] = x[n - 1 - i] with x and out the same array: every split
        // refuses it (the whole read overlaps every block's mutable part).
        let k = KernelSpec::new("reverse", 1)
            .array::<f32>("x", 1)
            .array::<f32>("out", 1)
            .declare()
            .unwrap()
            .with_cpu(
                cpu_block_fn(|block, args| {
                    let x = args.whole::<f32>(0)?;
                    let out = args.slice_mut::<f32>(1)?;
                    for (o, i) in out.iter_mut().zip(block.range()) {
                        *o = x[x.len() - 1 - i];
                    }
                    Ok(())
                }),
                None,
            );
        let n = 1 << 18;
        let y = Array::zeros::<f32>(Device::Cpu, &[n]).unwrap();
        for threads in [1, 4] {
            set_cpu_threads(threads);
            let r = k.launch(n).device("cpu").inputs(&y).outputs(&y).run();
            set_cpu_threads(0);
            assert!(matches!(r, Err(Error::Argument(_))), "{threads}: {r:?}");
        }
        // Separate arrays run, threaded or not.
        let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let x = Array::from_slice(Device::Cpu, &xs, &[n]).unwrap();
        set_cpu_threads(4);
        k.launch(n)
            .device("cpu")
            .inputs(&x)
            .outputs(&y)
            .run()
            .unwrap();
        set_cpu_threads(0);
        let got = y.to_vec::<f32>().unwrap();
        assert_eq!((got[0], got[n - 1]), ((n - 1) as f32, 0.0));
    }
}
