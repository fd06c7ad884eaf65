//! Stream-ordered array operations (Warp's `zero_`, `fill_`, `assign`,
//! `wp.copy`, `to`, `contiguous`, `view`): queued on a stream after the
//! work already there, or captured into a [`Graph`](crate::Graph) through
//! a [`GraphCapture`](crate::GraphCapture), as launches are.
//!
//! One function per operation does the work for both destinations
//! ([`zero`], [`fill`], [`assign`] over a [`Queue`]); the public methods on
//! [`Array`] and [`GraphCapture`](crate::GraphCapture) only pick the queue.
//!
//! # How the driver does it (and the limits)
//!
//! Without a kernel (none is compiled into this crate: that needs nvcc at
//! build time), every operation is made of the driver's pitched memsets
//! (`cuMemsetD2D8/16/32Async`) and pitched copies (`cuMemcpy2DAsync`, or
//! `cuMemcpyAsync` for one row), with unified addresses, so one call covers
//! a run of contiguous bytes repeated at a constant pitch:
//!
//! - a view is first simplified: axes of extent 1 dropped, negative strides
//!   turned around (for a copy, only where both sides run backwards),
//!   adjacent axes that are contiguous in each other merged;
//! - a contiguous array is one call; a 2-D strided view (a column slice, a
//!   padded row) is one call; each further axis multiplies the calls by its
//!   extent; a view whose innermost axis is not contiguous (a transpose, a
//!   `slice_step`) copies one element per row, `height` rows per call;
//! - a fill writes the value as one 1-, 2- or 4-byte word when its bytes
//!   repeat with that period (zero, `1.0f32`, a vector of equal words), else
//!   as one memset per 4-byte word of the element (`vec3f` with three
//!   different components: 3 memsets), each at the element's pitch.
//!
//! So the number of driver calls (graph nodes) is small for the layouts
//! Warp makes, and grows with the product of the outer extents for views
//! that are strided on three or four axes. Plain host memory (the `"cpu"`
//! device's arrays) is written by the host, synchronously; copies between
//! it and CUDA memory are staged through page-locked memory and wait for
//! the stream (as CUDA's own copies from pageable memory do), and cannot be
//! captured into a graph: use page-locked arrays
//! ([`MemoryKind::PinnedHost`]) there, which every operation reaches
//! asynchronously. Copies between two ranges of one allocation that overlap
//! are refused (the driver does not order their bytes).

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use cuda_api::{Allocation, FillWord, MemoryKind, Stream};

use crate::abi::{DType, Element, Value};
use crate::array::{Array, Memory, Storage};
use crate::device::Device;
use crate::error::{Error, Result};

/// Notes that work about to be queued on `stream` uses `storage`, the one
/// step every road that queues CUDA work takes for each array (launches,
/// typed launches, replays, graph launches, array operations):
/// [`cuda_api::Allocation::record_use_on`], so the free and host reads wait
/// for the work, the stream waits for a pool allocation's allocation and
/// zeroing on its own stream, and memory lent to cudarc is refused
/// ([`Error::Lent`], naming the call `call` gives and the array `what`
/// describes; both are asked only for the error).
///
/// # Errors
///
/// [`Error::Lent`] while the memory is lent; [`Error::Cuda`] when the
/// driver cannot make `stream` wait.
pub(crate) fn note_use_on(
    storage: &Storage,
    stream: &Stream,
    call: impl FnOnce() -> String,
    what: impl FnOnce() -> String,
) -> Result<()> {
    let Some(a) = storage.allocation() else {
        return Ok(());
    };
    a.record_use_on(stream)
        .map_err(|e| use_error(e, call, what))
}

/// The error of a refused [`note_use_on`]: [`Error::Lent`] naming the call
/// and the array for lent memory, the driver's error as it is otherwise.
fn use_error(
    e: cuda_api::CudaError,
    call: impl FnOnce() -> String,
    what: impl FnOnce() -> String,
) -> Error {
    match e {
        cuda_api::CudaError::Lent { .. } => Error::Lent {
            call: call(),
            array: what(),
        },
        e => Error::Cuda(e),
    }
}

/// Where an operation's driver work goes.
pub(crate) enum Queue<'q> {
    /// Queued on a stream now.
    Stream(&'q Stream),
    /// Captured into a graph, which keeps the storages alive.
    Capture {
        /// The capture.
        capture: &'q cuda_api::Capture<'static>,
        /// The storages the graph must keep (and note as used on launch).
        keep: &'q RefCell<Vec<Arc<Storage>>>,
    },
}

impl Queue<'_> {
    fn context(&self) -> &cuda_api::Context {
        match self {
            Queue::Stream(s) => s.context(),
            Queue::Capture { capture, .. } => capture.context(),
        }
    }

    fn capturing(&self) -> bool {
        matches!(self, Queue::Capture { .. })
    }

    /// Keeps `array`'s storage alive for the work about to be queued: for
    /// a stream, notes the use ([`note_use_on`]: its free and host reads
    /// wait, the stream is ordered after a pool allocation's zeroing, lent
    /// memory is refused); for a capture, hands it to the graph (whose
    /// launches note it).
    fn hold(&self, array: &Array, call: &'static str, role: &str) -> Result<()> {
        let storage = array.storage();
        match self {
            Queue::Stream(s) => note_use_on(
                storage,
                s,
                || call.to_string(),
                || format!("{role} ({array:?})"),
            )?,
            Queue::Capture { keep, .. } => {
                let mut k = keep.borrow_mut();
                if !k.iter().any(|x| Arc::ptr_eq(x, storage)) {
                    k.push(storage.clone());
                }
            }
        }
        Ok(())
    }

    /// Queues one pitched fill of CUDA memory held by [`Queue::hold`].
    fn fill_2d(&self, job: &FillJob) -> Result<()> {
        // SAFETY: every byte written lies inside the destination view's
        // storage (the plan covers exactly the view's elements, which
        // `Array` keeps inside its storage), which is CUDA memory with a
        // unified address, kept allocated until the work has run (held
        // above: the free waits for the stream, or the graph owns it).
        unsafe {
            match self {
                Queue::Stream(s) => {
                    s.fill_2d_raw(job.address, job.pitch, job.word, job.width, job.height)?
                }
                Queue::Capture { capture, .. } => {
                    capture.fill_2d_raw(job.address, job.pitch, job.word, job.width, job.height)?
                }
            }
        }
        Ok(())
    }

    /// Queues one pitched copy between CUDA memories held by [`Queue::hold`].
    fn copy_2d(&self, job: &CopyJob) -> Result<()> {
        // SAFETY: both ranges lie inside their views' storages (the plan
        // covers exactly the views' elements), CUDA memory with unified
        // addresses kept allocated until the work has run (held by
        // `Queue::hold`, or page-locked staging memory that `assign` keeps
        // until it has waited for the stream); overlapping ranges of one
        // storage were refused by the caller.
        unsafe {
            match self {
                Queue::Stream(s) => s.copy_2d_raw(
                    job.dst,
                    job.dst_pitch,
                    job.src,
                    job.src_pitch,
                    job.width,
                    job.height,
                )?,
                Queue::Capture { capture, .. } => capture.copy_2d_raw(
                    job.dst,
                    job.dst_pitch,
                    job.src,
                    job.src_pitch,
                    job.width,
                    job.height,
                )?,
            }
        }
        Ok(())
    }
}

/// Where a plan hands its jobs, in order; a job's error ends the plan.
type Emit<'e, J> = &'e mut dyn FnMut(J) -> Result<()>;

/// One pitched memset: `height` rows of `width` words at `address`, `pitch` apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FillJob {
    pub address: u64,
    pub pitch: usize,
    pub word: FillWord,
    pub width: usize,
    pub height: usize,
}

/// One pitched copy: `height` rows of `width` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CopyJob {
    pub dst: u64,
    pub dst_pitch: usize,
    pub src: u64,
    pub src_pitch: usize,
    pub width: usize,
    pub height: usize,
}

/// An axis of a simplified view: extent, then byte stride(s).
type Axis1 = (usize, i128);
type Axis2 = (usize, i128, i128);

/// Calls `f` with the byte offsets (one per side, [`Axis::steps`]) of
/// every combination of `axes` (outermost first), from `at`.
fn for_each_offset<A: Axis>(
    at: (i128, i128),
    axes: &[A],
    f: &mut dyn FnMut((i128, i128)) -> Result<()>,
) -> Result<()> {
    match axes.split_first() {
        None => f(at),
        Some((a, rest)) => {
            let (d, s) = a.steps();
            for i in 0..a.extent() as i128 {
                for_each_offset((at.0 + i * d, at.1 + i * s), rest, f)?;
            }
            Ok(())
        }
    }
}

/// The largest word (4, 2, 1 bytes) that divides `size` and every value of
/// `also`.
fn word_size(size: usize, also: impl Iterator<Item = i128> + Clone) -> usize {
    // A power of two divides `v` when `v`'s low bits are 0 (two's
    // complement: negative offsets too), without an i128 division.
    [4usize, 2, 1]
        .into_iter()
        .find(|&u| size.is_multiple_of(u) && also.clone().all(|v| v & (u as i128 - 1) == 0))
        .unwrap_or(1)
}

fn word_of(bytes: &[u8]) -> FillWord {
    match bytes.len() {
        4 => FillWord::U32(u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        2 => FillWord::U16(u16::from_ne_bytes([bytes[0], bytes[1]])),
        _ => FillWord::U8(bytes.first().copied().unwrap_or(0)),
    }
}

/// The word of `u` bytes that `value` repeats, when all its `u`-byte
/// words are equal (zero, `1.0f32`, a vector of equal components).
fn repeated_word(value: &[u8], u: usize) -> Option<FillWord> {
    // Period `u`: each byte equals the one `u` bytes on (`u` divides the
    // length, so the words are whole).
    let first = value.get(..u)?;
    let rest = value.get(u..)?;
    (value.len().is_multiple_of(u) && rest == &value[..rest.len()]).then(|| word_of(first))
}

/// The number of elements of a view whose elements of `size` bytes lie
/// packed in C order (each axis of extent above 1 strides over all of the
/// axes inside it); `None` for any other layout.
fn packed_len(shape: &[usize], strides: &[isize], size: usize) -> Option<usize> {
    let mut n = 1usize;
    for (&e, &s) in shape.iter().zip(strides).rev() {
        let step = n.checked_mul(size)?;
        if e > 1 && isize::try_from(step).ok()? != s {
            return None;
        }
        n = n.checked_mul(e)?;
    }
    // The run's bytes fit `isize` too (an `Array`'s always do).
    isize::try_from(n.checked_mul(size)?).ok()?;
    Some(n)
}

/// The pitched memsets that write `value` (one element's bytes) into every
/// element of the view `at` of `shape`, in order. Pure arithmetic:
/// unit-tested without a GPU.
pub(crate) fn fill_plan(
    at: Layout<'_>,
    shape: &[usize],
    value: &[u8],
    emit: Emit<'_, FillJob>,
) -> Result<()> {
    let size = value.len();
    if size == 0 || shape.contains(&0) {
        return Ok(());
    }
    if shape.len() > MAX_AXES {
        return Err(too_many_axes("fill", shape.len()));
    }
    // A packed view in C order, what most fills write, with a value that
    // repeats one word: one memset of the whole run. This is the job the
    // strided plan gives such a view, without its sorting and merging.
    if let Some(n) = packed_len(shape, at.strides, size) {
        let u = word_size(size, std::iter::once(at.offset as i128));
        if let Some(word) = repeated_word(value, u) {
            return emit(FillJob {
                address: at.start(),
                pitch: n * size,
                word,
                width: n * size / u,
                height: 1,
            });
        }
    }
    strided_fill_plan(at, shape, value, emit)
}

/// [`fill_plan`] for any view (at most [`MAX_AXES`] axes, none of extent 0).
#[inline(never)]
fn strided_fill_plan(
    at: Layout<'_>,
    shape: &[usize],
    value: &[u8],
    emit: Emit<'_, FillJob>,
) -> Result<()> {
    let size = value.len();
    // Simplify: drop extents 1 and strides 0 (the same bytes again), turn
    // negative strides around (every element gets the same value, so the
    // order does not matter), innermost last by stride, merge contiguous.
    // On the stack: a fill allocates nothing.
    let mut off = at.offset as i128;
    let mut axes = Axes::<Axis1>::default();
    for (&e, &s) in shape.iter().zip(at.strides) {
        let s = s as i128;
        if e <= 1 || s == 0 {
            continue;
        }
        if s < 0 {
            off += (e as i128 - 1) * s;
        }
        axes.push((e, s.abs()));
    }
    axes.sort_outer_first();
    axes.merge_contiguous();
    let strides_iter = axes
        .as_ref()
        .iter()
        .map(|a| a.1)
        .chain(std::iter::once(off));
    let u = word_size(size, strides_iter);
    let repeated = repeated_word(value, u);
    // The row: a contiguous run of whole elements when the value repeats
    // one word, one element's word otherwise.
    let (row_bytes, width) = if repeated.is_some() {
        match axes.as_ref().last() {
            Some(&(e, s)) if s == size as i128 => {
                axes.pop();
                (e * size, e * size / u)
            }
            _ => (size, size / u),
        }
    } else {
        (u, 1)
    };
    let (height, pitch) = match axes.take_height(row_bytes) {
        Some((e, s)) => (e, s as usize),
        None => (1, row_bytes),
    };
    for_each_offset((off, 0), axes.as_ref(), &mut |(o, _)| {
        let mut job = |j: usize, word: FillWord| {
            emit(FillJob {
                address: at.base + (o + (j * u) as i128) as u64,
                pitch,
                word,
                width,
                height,
            })
        };
        match repeated {
            Some(word) => job(0, word),
            // One memset per word of the element, at the element's pitch.
            None => value
                .chunks(u)
                .enumerate()
                .try_for_each(|(j, w)| job(j, word_of(w))),
        }
    })
}

/// The most axes a fill or copy plans for (an [`Array`] has at most 4).
const MAX_AXES: usize = 8;

/// The refusal of a view of `n` dimensions, more than a plan takes
/// ([`MAX_AXES`]; an [`Array`] has at most 4), by the plan `call`.
fn too_many_axes(call: &'static str, n: usize) -> Error {
    Error::Shape {
        call,
        message: format!("a view of {n} dimensions; at most {MAX_AXES} are planned"),
    }
}

/// An axis of a simplified view, as [`Axes`] sorts and merges it.
trait Axis: Copy + Default {
    /// The extent.
    fn extent(&self) -> usize;
    /// The byte strides: the view's and 0 for a fill, the destination's
    /// and the source's for a copy.
    fn steps(&self) -> (i128, i128);
    /// The sort key, largest outermost: the byte stride(s), absolute.
    fn order(&self) -> (i128, i128) {
        let (d, s) = self.steps();
        (d.abs(), s.abs())
    }
    /// Whether rows of `row` bytes, one per index of this axis, do not
    /// overlap on any side (the driver's pitch is at least the row).
    fn pitches_fit(&self, row: usize) -> bool;
    /// The axis that `outer` and `inner` (the next axis inside it) make
    /// together when they are contiguous: `outer`'s stride is `inner`'s
    /// extent times `inner`'s stride (on both sides of a copy).
    fn join(outer: &Self, inner: &Self) -> Option<Self>;
}

impl Axis for Axis1 {
    fn extent(&self) -> usize {
        self.0
    }

    fn steps(&self) -> (i128, i128) {
        (self.1, 0)
    }

    fn pitches_fit(&self, row: usize) -> bool {
        self.1 >= row as i128
    }

    fn join(outer: &Self, inner: &Self) -> Option<Self> {
        (outer.1 == inner.0 as i128 * inner.1).then_some((outer.0 * inner.0, inner.1))
    }
}

impl Axis for Axis2 {
    fn extent(&self) -> usize {
        self.0
    }

    fn steps(&self) -> (i128, i128) {
        (self.1, self.2)
    }

    fn pitches_fit(&self, row: usize) -> bool {
        self.1 >= row as i128 && self.2 >= row as i128
    }

    fn join(outer: &Self, inner: &Self) -> Option<Self> {
        (outer.1 == inner.0 as i128 * inner.1 && outer.2 == inner.0 as i128 * inner.2).then_some((
            outer.0 * inner.0,
            inner.1,
            inner.2,
        ))
    }
}

/// Up to [`MAX_AXES`] axes of a fill or copy plan, on the stack: a plan
/// allocates nothing.
#[derive(Default)]
struct Axes<A> {
    axes: [A; MAX_AXES],
    len: usize,
}

impl<A: Axis> Axes<A> {
    /// Appends an axis (at most [`MAX_AXES`]: the caller checked the
    /// dimension count, and merging only removes axes).
    fn push(&mut self, a: A) {
        if let Some(slot) = self.axes.get_mut(self.len) {
            *slot = a;
            self.len += 1;
        }
    }

    fn pop(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    /// Removes axis `i` (`i < len`), keeping the order of the others.
    fn remove(&mut self, i: usize) -> A {
        let a = self.axes[i];
        self.axes.copy_within(i + 1..self.len, i);
        self.len -= 1;
        a
    }

    /// Removes and returns the height axis of a plan whose rows are `row`
    /// bytes: the axis of largest extent (the innermost of equals) whose
    /// pitches fit the row ([`Axis::pitches_fit`]); the plan loops over
    /// the others. `None` when no axis fits.
    fn take_height(&mut self, row: usize) -> Option<A> {
        let pick = (0..self.len)
            .filter(|&i| self.axes[i].pitches_fit(row))
            .max_by_key(|&i| (self.axes[i].extent(), i))?;
        Some(self.remove(pick))
    }

    /// Orders the axes outermost first: by [`Axis::order`], largest first,
    /// axes of equal order in their order (an insertion sort: there are at
    /// most [`MAX_AXES`], and a view usually has one or two).
    fn sort_outer_first(&mut self) {
        let a = self.as_mut();
        for i in 1..a.len() {
            let mut j = i;
            while j > 0 && a[j - 1].order() < a[j].order() {
                a.swap(j - 1, j);
                j -= 1;
            }
        }
    }

    /// Merges each axis with the next inner one when together they are
    /// contiguous ([`Axis::join`]), in place; the axes are ordered
    /// outermost first.
    fn merge_contiguous(&mut self) {
        let mut n = 0usize;
        for i in 0..self.len {
            let a = self.axes[i];
            let last = n.checked_sub(1);
            match last.and_then(|l| A::join(&self.axes[l], &a).map(|j| (l, j))) {
                Some((l, joined)) => self.axes[l] = joined,
                None => {
                    self.axes[n] = a;
                    n += 1;
                }
            }
        }
        self.len = n;
    }

    fn as_ref(&self) -> &[A] {
        &self.axes[..self.len]
    }

    fn as_mut(&mut self) -> &mut [A] {
        &mut self.axes[..self.len]
    }
}

/// Where a view's elements are: the address of its storage, the byte
/// offset of its first element there, and its byte strides (the view of a
/// fill, each side of a copy).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout<'s> {
    pub base: u64,
    pub offset: usize,
    pub strides: &'s [isize],
}

impl<'s> Layout<'s> {
    /// The layout of `a` at its storage's address (a device address for
    /// CUDA memory).
    fn of(a: &'s Array) -> Layout<'s> {
        Layout {
            base: a.storage().address(),
            offset: a.offset(),
            strides: a.strides(),
        }
    }

    /// The address of the view's first element.
    fn start(&self) -> u64 {
        self.base + self.offset as u64
    }
}

/// The pitched copies that copy every element of the source view into the
/// destination view of the same shape (element `i` to element `i`).
pub(crate) fn copy_plan(
    dst: Layout<'_>,
    src: Layout<'_>,
    shape: &[usize],
    size: usize,
    emit: Emit<'_, CopyJob>,
) -> Result<()> {
    if size == 0 || shape.contains(&0) {
        return Ok(());
    }
    if shape.len() > MAX_AXES {
        return Err(too_many_axes("copy", shape.len()));
    }
    // Both views packed in C order, what most copies are: one copy of the
    // whole run. This is the job the strided plan gives such views,
    // without its sorting and merging.
    if let (Some(n), Some(_)) = (
        packed_len(shape, dst.strides, size),
        packed_len(shape, src.strides, size),
    ) {
        let row = n * size;
        return emit(CopyJob {
            dst: dst.start(),
            dst_pitch: row,
            src: src.start(),
            src_pitch: row,
            width: row,
            height: 1,
        });
    }
    strided_copy_plan(dst, src, shape, size, emit)
}

/// [`copy_plan`] for any pair of views (at most [`MAX_AXES`] axes, none of
/// extent 0).
#[inline(never)]
fn strided_copy_plan(
    dst: Layout<'_>,
    src: Layout<'_>,
    shape: &[usize],
    size: usize,
    emit: Emit<'_, CopyJob>,
) -> Result<()> {
    let (mut doff, mut soff) = (dst.offset as i128, src.offset as i128);
    let mut axes = Axes::<Axis2>::default();
    for (i, &e) in shape.iter().enumerate() {
        let (mut d, mut s) = (dst.strides[i] as i128, src.strides[i] as i128);
        if e <= 1 {
            continue;
        }
        if d < 0 && s < 0 {
            // Both backwards: walk both forwards (pairs stay pairs).
            doff += (e as i128 - 1) * d;
            soff += (e as i128 - 1) * s;
            d = -d;
            s = -s;
        }
        axes.push((e, d, s));
    }
    // Outermost first by destination stride (loop order only: pairs stay).
    axes.sort_outer_first();
    axes.merge_contiguous();
    let row = match axes.as_ref().last() {
        Some(&(e, d, s)) if d == size as i128 && s == size as i128 => {
            axes.pop();
            e * size
        }
        _ => size,
    };
    let (height, dp, sp) = match axes.take_height(row) {
        Some((e, d, s)) => (e, d as usize, s as usize),
        None => (1, row, row),
    };
    for_each_offset((doff, soff), axes.as_ref(), &mut |(d, s)| {
        emit(CopyJob {
            dst: dst.base + d as u64,
            dst_pitch: dp,
            src: src.base + s as u64,
            src_pitch: sp,
            width: row,
            height,
        })
    })
}

/// The stream an operation on arrays of `devices` goes on when none is
/// given: the current stream ([`Device::stream`]) of the first CUDA
/// memory's device; `None` when all memory is plain host memory.
fn default_stream(arrays: &[&Array]) -> Result<Option<Stream>> {
    for a in arrays.iter().filter(|a| !is_host(a)) {
        let device = match a.storage().allocation() {
            Some(alloc) => Device::from(alloc.context().device()),
            None => a.device(),
        };
        if device.is_cuda() {
            return Ok(Some(device.stream()?));
        }
    }
    Ok(None)
}

/// Refuses device memory of another context than the queue's (a memset or
/// copy there would run in the wrong context).
fn check_context(a: &Array, q: &Queue, call: &'static str) -> Result<()> {
    if let Some(alloc) = a.storage().allocation()
        && alloc.kind() == MemoryKind::Device
        && alloc.context() != q.context()
    {
        return Err(Error::StreamContext {
            launch: call.to_string(),
            stream: q.context().to_string(),
            expected: alloc.context().to_string(),
        });
    }
    Ok(())
}

/// Whether the array is in plain host memory, which the host writes
/// (anything else is CUDA memory with a unified address).
fn is_host(a: &Array) -> bool {
    matches!(a.memory(), Memory::Host)
}

/// The bytes of `value` for `dst`'s dtype: the value itself (borrowed, not
/// copied), or a scalar converted by Warp's rule for numbers.
pub(crate) fn value_bytes<'v>(
    dst: &Array,
    value: &'v Value,
    call: &'static str,
) -> Result<Cow<'v, Value>> {
    if std::ptr::eq(value.dtype(), dst.dtype()) {
        return Ok(Cow::Borrowed(value));
    }
    let v = value.convert(dst.dtype()).ok_or_else(|| Error::Shape {
        call,
        message: format!(
            "a value of {} cannot fill an array of {} (only a value of the array's dtype, or a number that converts to its scalar type, can); pass Value::of of a {}",
            value.dtype().name,
            dst.dtype().name,
            dst.dtype().name
        ),
    })?;
    Ok(Cow::Owned(v))
}

/// Writes `value` into every element of `dst` (the one fill: zero is a fill
/// of zero bytes).
pub(crate) fn fill(dst: &Array, value: &[u8], q: Option<&Queue>, call: &'static str) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    if is_host(dst) {
        if q.is_some_and(Queue::capturing) {
            return Err(host_in_graph(call));
        }
        return host_fill(dst, value, call);
    }
    let Some(q) = q else {
        return Err(no_stream(call));
    };
    check_context(dst, q, call)?;
    // Page-locked and managed memory: not while a CPU launch on another
    // thread holds it (that launch waits for queued work before it runs).
    let _lock = lock_for(q, [&**dst.storage()], call)?;
    q.hold(dst, call, "the destination")?;
    fill_plan(Layout::of(dst), dst.shape(), value, &mut |job| {
        q.fill_2d(&job)
    })
}

fn no_stream(call: &'static str) -> Error {
    Error::Shape {
        call,
        message: "work on CUDA memory is queued on a stream, and none was found; pass a stream"
            .into(),
    }
}

fn host_in_graph(call: &'static str) -> Error {
    Error::Shape {
        call,
        message: "plain host memory (the \"cpu\" device's arrays) cannot be captured into a CUDA graph: the graph would read or write it later without the host's locks; use a page-locked array (MemoryKind::PinnedHost) or do this outside the graph".into(),
    }
}

/// The host's fill of plain host memory (synchronous).
fn host_fill(dst: &Array, value: &[u8], call: &'static str) -> Result<()> {
    let size = value.len();
    let n = dst.len();
    if dst.is_contiguous() {
        let mut buf = Vec::new();
        buf.try_reserve_exact(n * size).map_err(|_| Error::Alloc {
            call,
            bytes: n * size,
            memory: Memory::Host.to_string(),
        })?;
        for _ in 0..n {
            buf.extend_from_slice(value);
        }
        return dst.storage().copy_from_host(dst.offset(), &buf);
    }
    let at = Layout {
        base: 0,
        ..Layout::of(dst)
    };
    fill_plan(at, dst.shape(), value, &mut |job| {
        let w = job.word.size();
        let bytes: Vec<u8> = match job.word {
            FillWord::U8(v) => vec![v; job.width],
            FillWord::U16(v) => v.to_ne_bytes().repeat(job.width),
            FillWord::U32(v) => v.to_ne_bytes().repeat(job.width),
        };
        debug_assert_eq!(bytes.len(), job.width * w);
        for r in 0..job.height {
            dst.storage()
                .copy_from_host(job.address as usize + r * job.pitch, &bytes)?;
        }
        Ok(())
    })
}

/// Copies every element of `src` into `dst` (same dtype size and shape;
/// any strides, devices and memories): Warp's `assign` and `wp.copy`; when
/// both have gradients, `src`'s gradient is copied into `dst`'s too (as
/// `wp.copy` does). Every
/// array-to-array copy goes through here, so a [`Tape`](crate::Tape)
/// recording on this thread records it (when both arrays have gradients)
/// with its adjoint, as Warp's `wp.copy` is recorded.
pub(crate) fn assign(
    dst: &Array,
    src: &Array,
    q: Option<&Queue>,
    call: &'static str,
) -> Result<()> {
    copy_elements(dst, src, q, call)?;
    // As Warp's `wp.copy`: the gradients travel with the values.
    if let (Some(sg), Some(dg)) = (src.grad(), dst.grad()) {
        copy_elements(dg, sg, q, call)?;
    }
    // A captured copy's adjoint runs on the device's current stream.
    let stream = match q {
        Some(Queue::Stream(s)) => Some(*s),
        _ => None,
    };
    super::array::record_copy(src, dst, stream);
    Ok(())
}

/// The copy of [`assign`], without the tape.
fn copy_elements(dst: &Array, src: &Array, q: Option<&Queue>, call: &'static str) -> Result<()> {
    if dst.dtype().size != src.dtype().size
        || !std::ptr::eq(dst.dtype(), src.dtype())
        || dst.shape() != src.shape()
    {
        return Err(Error::Shape {
            call,
            message: format!(
                "copying {} {:?} into {} {:?} needs the same dtype and shape; view or reshape one of them first",
                src.dtype().name,
                src.shape(),
                dst.dtype().name,
                dst.shape()
            ),
        });
    }
    if dst.is_empty() {
        return Ok(());
    }
    let (dh, sh) = (is_host(dst), is_host(src));
    if dh && sh {
        if q.is_some_and(Queue::capturing) {
            return Err(host_in_graph(call));
        }
        return host_assign(dst, &src.to_bytes()?);
    }
    let Some(q) = q else {
        return Err(no_stream(call));
    };
    if (dh || sh) && q.capturing() {
        return Err(host_in_graph(call));
    }
    let Queue::Stream(stream) = q else {
        return cuda_assign(dst, src, q, call, Hold::Both);
    };
    if sh {
        // Host to CUDA: gather, stage in page-locked memory, copy on the
        // stream, wait (the staging memory is freed after the copy).
        let bytes = src.to_bytes()?;
        let staging = staging(stream, &bytes)?;
        let staged = contiguous_view(&staging, src)?;
        // Wait even when queueing failed part way: queued copies read the
        // staging memory, which is not held (it goes when this returns).
        let queued = cuda_assign(dst, &staged, q, call, Hold::Dst);
        let waited = stream.synchronize();
        queued?;
        return Ok(waited?);
    }
    if dh {
        // CUDA to host: copy into page-locked memory on the stream, wait,
        // scatter on the host.
        let staging = staging_zeroed(stream, src.len() * src.dtype().size)?;
        let staged = contiguous_view(&staging, src)?;
        let queued = cuda_assign(&staged, src, q, call, Hold::Src);
        let waited = stream.synchronize();
        queued?;
        waited?;
        return host_assign(dst, &staged.to_bytes()?);
    }
    cuda_assign(dst, src, q, call, Hold::Both)
}

/// Page-locked memory of the stream's context holding `bytes`.
fn staging(stream: &Stream, bytes: &[u8]) -> Result<Arc<Storage>> {
    let s = staging_zeroed(stream, bytes.len())?;
    s.copy_from_host(0, bytes)?;
    Ok(s)
}

fn staging_zeroed(stream: &Stream, bytes: usize) -> Result<Arc<Storage>> {
    Ok(Arc::new(Storage::cuda(Allocation::zeroed(
        stream.context(),
        bytes,
        MemoryKind::PinnedHost,
    )?)))
}

/// A contiguous array over `storage` with `like`'s dtype and shape.
fn contiguous_view(storage: &Arc<Storage>, like: &Array) -> Result<Array> {
    let (shape, strides) = packed(like.shape(), like.dtype());
    Array::from_parts(
        storage.clone(),
        Device::Cpu,
        0,
        like.dtype(),
        like.shape(),
        &strides[..shape],
    )
}

/// Row-major byte strides (the array's shape was checked when it was made).
fn packed(shape: &[usize], dtype: &DType) -> (usize, [isize; 4]) {
    let mut st = [0isize; 4];
    let mut acc = dtype.size as isize;
    for i in (0..shape.len()).rev() {
        st[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1) as isize);
    }
    (shape.len(), st)
}

/// Scatters row-major element bytes into a plain host array.
fn host_assign(dst: &Array, bytes: &[u8]) -> Result<()> {
    if dst.is_contiguous() {
        return dst.storage().copy_from_host(dst.offset(), bytes);
    }
    let size = dst.dtype().size;
    let (n, st) = packed(dst.shape(), dst.dtype());
    copy_plan(
        Layout {
            base: 0,
            offset: dst.offset(),
            strides: dst.strides(),
        },
        Layout {
            base: 0,
            offset: 0,
            strides: &st[..n],
        },
        dst.shape(),
        size,
        &mut |job| {
            for r in 0..job.height {
                let s = job.src as usize + r * job.src_pitch;
                let part = bytes.get(s..s + job.width).ok_or_else(|| Error::Shape {
                    call: "Array::assign",
                    message: format!(
                        "{} B of elements for a view of {} B",
                        bytes.len(),
                        s + job.width
                    ),
                })?;
                dst.storage()
                    .copy_from_host(job.dst as usize + r * job.dst_pitch, part)?;
            }
            Ok(())
        },
    )
}

/// The storage locks of host-reachable memory while work on it is queued
/// on a stream (see `lock_for_gpu`: refused on the thread of a CPU launch
/// that holds it); none while capturing (nothing runs), and none for
/// device memory, which host code cannot reach (asked first, without the
/// lock table: most operations are on device memory).
fn lock_for<const N: usize>(
    q: &Queue,
    storages: [&Storage; N],
    call: &'static str,
) -> Result<Option<crate::array::storage::StorageLocks>> {
    if q.capturing() || !storages.iter().any(|s| s.host_reachable()) {
        return Ok(None);
    }
    Ok(Some(crate::array::lock_for_gpu(storages, call)?))
}

/// Which side of a copy [`Queue::hold`] keeps: both, or only the user's
/// array when the other is staging memory that the caller keeps until it
/// has waited for the stream (so its drop need not wait for the context).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hold {
    Both,
    Dst,
    Src,
}

/// Copies between two CUDA memories on `q`, holding the sides `hold` names.
fn cuda_assign(dst: &Array, src: &Array, q: &Queue, call: &'static str, hold: Hold) -> Result<()> {
    if dst.storage().shares_bytes_with(src.storage()) {
        // By address: two handles of one memory overlap as one does.
        let at = |x: &Array| {
            let (lo, hi) = x.byte_span();
            let base = x.storage().address() as i128;
            (base + lo as i128, base + hi as i128)
        };
        let (a, b) = (at(dst), at(src));
        if a.0 < b.1 && b.0 < a.1 {
            return Err(Error::Shape {
                call,
                message: format!(
                    "the source (bytes {:#x}..{:#x}) and the destination (bytes {:#x}..{:#x}) overlap in one memory, and the driver does not order overlapping copies; copy the source first (src.contiguous_on(stream))",
                    b.0, b.1, a.0, a.1
                ),
            });
        }
    }
    check_context(dst, q, call)?;
    let _lock = lock_for(q, [&**dst.storage(), &**src.storage()], call)?;
    if hold != Hold::Src {
        q.hold(dst, call, "the destination")?;
    }
    if hold != Hold::Dst {
        q.hold(src, call, "the source")?;
    }
    copy_plan(
        Layout::of(dst),
        Layout::of(src),
        dst.shape(),
        dst.dtype().size,
        &mut |job| q.copy_2d(&job),
    )
}

/// Runs `op` on the queue `stream` names, or the default one.
fn on_stream(
    stream: Option<&Stream>,
    arrays: &[&Array],
    op: impl FnOnce(Option<&Queue>) -> Result<()>,
) -> Result<()> {
    let default;
    let stream = match stream {
        Some(s) => Some(s),
        None => {
            default = default_stream(arrays)?;
            default.as_ref()
        }
    };
    match stream {
        Some(s) => op(Some(&Queue::Stream(s))),
        None => op(None),
    }
}

impl Array {
    /// The same view without a gradient.
    fn without_grad(&self) -> Result<Array> {
        Array::from_parts(
            self.storage().clone(),
            self.device(),
            self.offset(),
            self.dtype(),
            self.shape(),
            self.strides(),
        )
    }

    /// The byte range of the storage the view reaches (first byte, end).
    fn byte_span(&self) -> (usize, usize) {
        let mut lo = self.offset() as i128;
        let mut hi = lo;
        if !self.is_empty() {
            for (&e, &s) in self.shape().iter().zip(self.strides()) {
                let ext = (e as i128 - 1) * s as i128;
                if ext < 0 { lo += ext } else { hi += ext }
            }
            hi += self.dtype().size as i128;
        }
        (lo.max(0) as usize, hi.max(0) as usize)
    }

    /// Sets every element to zero on `stream`, after the work queued there
    /// (Warp's `zero_`): pitched memsets, no host wait; `None` for the
    /// current stream of the array's device ([`Device::stream`]). Plain host
    /// memory (the `"cpu"` device) is zeroed by the host, synchronously.
    /// [`Array::zero`] is the synchronous form. Capture it into a graph with
    /// [`GraphCapture::zero`](crate::GraphCapture::zero).
    ///
    /// # How, and the limits (all stream-ordered operations)
    ///
    /// These operations use no kernel of their own (the crate's few PTX
    /// kernels, compiled ahead of time and checked in, serve conditional
    /// graphs and the copy adjoint), so they are the driver's pitched memsets
    /// (`cuMemsetD2D8/16/32Async`) and pitched copies (`cuMemcpy2DAsync`,
    /// `cuMemcpyAsync` for one row) on unified addresses. A view is first
    /// simplified (extents of 1 dropped, negative strides walked forwards,
    /// for a copy only where both sides run backwards, contiguous axes
    /// merged); then a contiguous array is one driver call, a 2-D strided
    /// view (a column block, padded rows) one call, and each further
    /// strided axis multiplies the calls by its extent; a view whose
    /// innermost axis is strided (a transpose, `slice_step`) moves one
    /// element per row, many rows per call. A fill writes the value as one
    /// 1-, 2- or 4-byte word when its bytes repeat with that period (zero,
    /// `1.0f32`, `[2.0f32; 3]`), else as one memset per word of the element
    /// at the element's pitch (`[1.0f32, 2.0, 3.0]`: three memsets; a
    /// `float64` such as `0.1`: two). Each call is a node in a captured
    /// graph. Plain host memory is written by the host; copies between it
    /// and CUDA memory are staged through page-locked memory and wait for
    /// the stream, and cannot be captured (use
    /// [`MemoryKind::PinnedHost`] arrays there). Copies between overlapping
    /// ranges of one CUDA allocation are refused.
    ///
    /// ```
    /// # fn main() -> warp_launch::Result<()> {
    /// let a = warp_launch::Array::from_slice("cpu", &[1.0f32, 2.0, 3.0], &[3])?;
    /// a.zero_on(None)?; // "cpu": done when it returns
    /// assert_eq!(a.to_vec::<f32>()?, [0.0; 3]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::StreamContext`] for device memory of another context than
    /// the stream's; [`Error::Lent`] while the array is lent to cudarc;
    /// [`Error::Cuda`] when the driver refuses a memset.
    pub fn zero_on<'s>(&self, stream: impl Into<Option<&'s Stream>>) -> Result<()> {
        // Zero bytes of one element, from a static buffer when it is large
        // enough (every dtype but the largest matrices): no allocation.
        static ZEROS: [u8; 256] = [0; 256];
        let size = self.dtype().size;
        let heap;
        let zeros = match ZEROS.get(..size) {
            Some(z) => z,
            None => {
                heap = vec![0u8; size];
                &heap[..]
            }
        };
        on_stream(stream.into(), &[self], |q| {
            fill(self, zeros, q, "Array::zero_on")
        })
    }

    /// Sets every element to `value` on `stream` (Warp's `fill_`): a value
    /// of the array's dtype ([`Value::of`]`([1.0f32, 2.0, 3.0])` for a
    /// `vec3f` array), or a number converted to its scalar type by Warp's
    /// rule. Queued as [`Array::zero_on`] is (see there for the memsets a
    /// value wider than 4 bytes takes); `None` for the current
    /// stream. [`Array::fill`] is the synchronous form.
    ///
    /// ```
    /// use warp_launch::{Array, Value};
    /// # fn main() -> warp_launch::Result<()> {
    /// let a = Array::zeros::<[f32; 3]>("cpu", &[2])?;
    /// a.fill_on(&Value::of([1.0f32, 2.0, 3.0]), None)?;
    /// assert_eq!(a.to_vec::<[f32; 3]>()?, [[1.0, 2.0, 3.0]; 2]);
    /// // A value of another dtype that is not a number of the scalar type is refused.
    /// assert!(a.fill_on(&Value::of(1.0f64), None).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] for a value that is not of the array's dtype and does
    /// not convert to it; otherwise as [`Array::zero_on`].
    pub fn fill_on<'s>(&self, value: &Value, stream: impl Into<Option<&'s Stream>>) -> Result<()> {
        let v = value_bytes(self, value, "Array::fill_on")?;
        on_stream(stream.into(), &[self], |q| {
            fill(self, v.bytes(), q, "Array::fill_on")
        })
    }

    /// [`Array::fill_on`] on the current stream, then waits for that stream
    /// (synchronous).
    ///
    /// ```
    /// # fn main() -> warp_launch::Result<()> {
    /// let a = warp_launch::Array::zeros::<i32>("cpu", &[4])?;
    /// a.fill(&warp_launch::Value::of(7i32))?;
    /// assert_eq!(a.to_vec::<i32>()?, [7; 4]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Array::fill_on`], and a failure of the stream's work.
    pub fn fill(&self, value: &Value) -> Result<()> {
        let s = default_stream(&[self])?;
        self.fill_on(value, s.as_ref())?;
        sync(s.as_ref())
    }

    /// Copies every element of `src` into this array on `stream`, after the
    /// work queued there (Warp's `assign` and `wp.copy`): the same dtype and
    /// shape, any strides, devices and memories. Between CUDA memories
    /// (device, page-locked, managed; one device or two) it is queued with
    /// no host wait; to or from plain host memory it is staged through
    /// page-locked memory and waits for the stream. `None` for the current
    /// stream of the destination's device (else the source's). The one
    /// copy entry point; [`Array::assign`] is the synchronous form. How
    /// many driver copies a layout takes: [`Array::zero_on`]. When both
    /// arrays have gradients, `src`'s gradient is copied into this array's
    /// too, and a recording [`Tape`](crate::Tape) records the copy with its
    /// adjoint (both as Warp's `wp.copy`).
    ///
    /// ```
    /// use warp_launch::Array;
    /// # fn main() -> warp_launch::Result<()> {
    /// let src = Array::from_slice("cpu", &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// let dst = Array::zeros::<f32>("cpu", &[3, 2])?;
    /// // Across strides: the transpose of src into dst.
    /// dst.assign_on(&src.transpose(0, 1)?, None)?;
    /// assert_eq!(dst.to_vec::<f32>()?, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// // Another shape is refused.
    /// assert!(dst.assign_on(&src, None).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] for another dtype or shape, or overlapping ranges of
    /// one CUDA allocation; [`Error::StreamContext`] for device memory of
    /// another context than the stream's; [`Error::Lent`] while either array
    /// is lent to cudarc; [`Error::Cuda`] when the driver refuses a copy.
    pub fn assign_on<'s>(&self, src: &Array, stream: impl Into<Option<&'s Stream>>) -> Result<()> {
        on_stream(stream.into(), &[self, src], |q| {
            assign(self, src, q, "Array::assign_on")
        })
    }

    /// [`Array::assign_on`] on the current stream, then waits for it
    /// (synchronous).
    ///
    /// ```
    /// # fn main() -> warp_launch::Result<()> {
    /// let a = warp_launch::Array::zeros::<f32>("cpu", &[2])?;
    /// a.assign(&warp_launch::Array::from_slice("cpu", &[1.0f32, 2.0], &[2])?)?;
    /// assert_eq!(a.to_vec::<f32>()?, [1.0, 2.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Array::assign_on`], and a failure of the stream's work.
    pub fn assign(&self, src: &Array) -> Result<()> {
        let s = default_stream(&[self, src])?;
        self.assign_on(src, s.as_ref())?;
        sync(s.as_ref())
    }

    /// Copies `count` elements of `src`, from its flat (row-major) element
    /// `src_offset` on, into this array from element `dst_offset` on, on
    /// `stream` (Warp's `wp.copy(dest, src, dest_offset, src_offset,
    /// count)`; `count` 0 copies from `src_offset` to the end of `src`).
    /// Both arrays are contiguous and of the same dtype; the ranges may lie
    /// on any devices and memories, as [`Array::assign_on`], which does the
    /// copy.
    ///
    /// ```
    /// # fn main() -> warp_launch::Result<()> {
    /// let src = warp_launch::Array::from_slice("cpu", &[1i32, 2, 3, 4], &[2, 2])?;
    /// let dst = warp_launch::Array::zeros::<i32>("cpu", &[6])?;
    /// dst.copy_range_on(3, &src, 1, 3, None)?;
    /// assert_eq!(dst.to_vec::<i32>()?, [0, 0, 0, 2, 3, 4]);
    /// // A range past either end is refused, naming both.
    /// assert!(dst.copy_range_on(4, &src, 0, 3, None).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] for another dtype, an array that is not contiguous,
    /// or a range past the end of either array; as [`Array::assign_on`].
    pub fn copy_range_on<'s>(
        &self,
        dst_offset: usize,
        src: &Array,
        src_offset: usize,
        count: usize,
        stream: impl Into<Option<&'s Stream>>,
    ) -> Result<()> {
        let call = "Array::copy_range_on";
        let count = if count == 0 {
            src.len().saturating_sub(src_offset)
        } else {
            count
        };
        let fits = |a: &Array, at: usize| at.checked_add(count).is_some_and(|e| e <= a.len());
        if !std::ptr::eq(self.dtype(), src.dtype())
            || !self.is_contiguous()
            || !src.is_contiguous()
            || !fits(self, dst_offset)
            || !fits(src, src_offset)
        {
            return Err(Error::Shape {
                call,
                message: format!(
                    "copying elements {src_offset}..{} of {} {:?}{} into elements {dst_offset}..{} of {} {:?}{} needs the same dtype, contiguous arrays and ranges inside both; use assign_on for strided arrays",
                    src_offset.saturating_add(count),
                    src.dtype().name,
                    src.shape(),
                    if src.is_contiguous() {
                        ""
                    } else {
                        " (not contiguous)"
                    },
                    dst_offset.saturating_add(count),
                    self.dtype().name,
                    self.shape(),
                    if self.is_contiguous() {
                        ""
                    } else {
                        " (not contiguous)"
                    },
                ),
            });
        }
        if count == 0 {
            return Ok(());
        }
        let d = self
            .reshape(&[self.len()])?
            .slice(0, dst_offset..dst_offset + count)?;
        let s = src
            .reshape(&[src.len()])?
            .slice(0, src_offset..src_offset + count)?;
        let stream = stream.into();
        on_stream(stream, &[&d, &s], |q| assign(&d, &s, q, call))
    }

    /// Copies `data` (row-major) into this array on `stream` (any strides),
    /// staged through page-locked memory; waits for the stream, since the
    /// slice is borrowed only for this call (Warp's `assign` of a NumPy
    /// array).
    ///
    /// ```
    /// # fn main() -> warp_launch::Result<()> {
    /// let a = warp_launch::Array::zeros::<u16>("cpu", &[4])?;
    /// a.slice_step(0, 0..4, 2)?.copy_from_slice_on(&[5u16, 6], None)?;
    /// assert_eq!(a.to_vec::<u16>()?, [5, 0, 6, 0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::ElementType`] when `T` is not the array's dtype,
    /// [`Error::Shape`] when `data` has another length; as
    /// [`Array::assign_on`].
    pub fn copy_from_slice_on<'s, T: Element>(
        &self,
        data: &[T],
        stream: impl Into<Option<&'s Stream>>,
    ) -> Result<()> {
        let call = "Array::copy_from_slice_on";
        if !std::ptr::eq(T::DTYPE, self.dtype()) {
            return Err(Error::ElementType {
                call,
                array: self.dtype().name,
                requested: T::DTYPE.name,
                rust: std::any::type_name::<T>(),
            });
        }
        if data.len() != self.len() {
            return Err(Error::Shape {
                call,
                message: format!(
                    "the array has {} elements but the slice {}; pass a slice of {} elements",
                    self.len(),
                    data.len(),
                    self.len()
                ),
            });
        }
        let src = Array::from_slice(Device::Cpu, data, self.shape())?;
        let stream = stream.into();
        on_stream(stream, &[self], |q| assign(self, &src, q, call))
    }

    /// A copy of the array on `device`, queued on `stream` (Warp's `to`):
    /// the array itself (sharing its memory) when it already lives there;
    /// on a CUDA device, device memory; on `"cpu"` from CUDA memory,
    /// page-locked host memory, so the copy stays queued (reading it, as
    /// [`Array::to_vec`] does, waits for it). The copy has no gradient.
    /// [`Array::to`] is the synchronous form.
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// // GPU: to cuda:0 and back to the host.
    /// let h = warp_launch::Array::from_slice("cpu", &[1.0f32, 2.0], &[2])?;
    /// let stream = warp_launch::Stream::new(&warp_launch::Device::Cuda(0).context()?)?;
    /// let d = h.to_on("cuda:0", &stream)?;
    /// let back = d.to_on("cpu", &stream)?;
    /// assert_eq!(back.to_vec::<f32>()?, [1.0, 2.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::BadDevice`] for a name that is no device; the allocation's
    /// errors (as [`Array::zeros`]); the copy's (as [`Array::assign_on`]).
    pub fn to_on<'s>(
        &self,
        device: impl crate::device::IntoDevice,
        stream: impl Into<Option<&'s Stream>>,
    ) -> Result<Array> {
        let device = device.into_device()?;
        if device == self.device() {
            return self.without_grad();
        }
        let kind = if device == Device::Cpu && !is_host(self) {
            MemoryKind::PinnedHost
        } else {
            MemoryKind::Device
        };
        let out = Array::zeros_dtype_in(device, self.dtype(), self.shape(), kind)?;
        out.assign_on(self, stream)?;
        Ok(out)
    }

    /// [`Array::to_on`] on the current stream, then waits for it
    /// (synchronous).
    ///
    /// ```
    /// # fn main() -> warp_launch::Result<()> {
    /// let a = warp_launch::Array::from_slice("cpu", &[1u8, 2], &[2])?;
    /// assert_eq!(a.to("cpu")?.to_vec::<u8>()?, [1, 2]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Array::to_on`], and a failure of the stream's work.
    pub fn to(&self, device: impl crate::device::IntoDevice) -> Result<Array> {
        let out = self.to_on(device, None)?;
        sync(default_stream(&[&out, self])?.as_ref())?;
        Ok(out)
    }

    /// The array with its elements packed row-major (Warp's `contiguous`):
    /// itself when it already is; else a new array on the same device, in
    /// the same kind of memory, filled on `stream` ([`Array::assign_on`]).
    /// No gradient. [`Array::contiguous`] is the synchronous form.
    ///
    /// ```
    /// # fn main() -> warp_launch::Result<()> {
    /// let a = warp_launch::Array::from_slice("cpu", &[1i32, 2, 3, 4, 5, 6], &[2, 3])?;
    /// let t = a.transpose(0, 1)?.contiguous_on(None)?;
    /// assert!(t.is_contiguous());
    /// assert_eq!(t.to_vec::<i32>()?, [1, 4, 2, 5, 3, 6]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Array::to_on`].
    pub fn contiguous_on<'s>(&self, stream: impl Into<Option<&'s Stream>>) -> Result<Array> {
        if self.is_contiguous() {
            return self.without_grad();
        }
        let kind = match self.memory() {
            Memory::Cuda(k) => k,
            _ => MemoryKind::Device,
        };
        let out = Array::zeros_dtype_in(self.device(), self.dtype(), self.shape(), kind)?;
        out.assign_on(self, stream)?;
        Ok(out)
    }

    /// [`Array::contiguous_on`] on the current stream, then waits for it
    /// (synchronous).
    ///
    /// ```
    /// # fn main() -> warp_launch::Result<()> {
    /// let a = warp_launch::Array::from_slice("cpu", &[1i32, 2, 3, 4], &[4])?;
    /// assert_eq!(a.slice_step(0, 0..4, 2)?.contiguous()?.to_vec::<i32>()?, [1, 3]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Array::contiguous_on`], and a failure of the stream's work.
    pub fn contiguous(&self) -> Result<Array> {
        let out = self.contiguous_on(None)?;
        sync(default_stream(&[&out])?.as_ref())?;
        Ok(out)
    }

    /// The same memory seen as elements of `dtype` (Warp's `view`): no copy,
    /// no stream. `dtype` must have the byte size of the array's dtype (as
    /// Warp requires; `float32` as `int32` or `uint32`, `vec2f` as `float64`
    /// or `int64`), and the offset and strides must suit its alignment
    /// (`vec2f` data at a 4-byte offset cannot be seen as `float64`). The
    /// view has no gradient.
    ///
    /// ```
    /// use warp_launch::{Array, DType};
    /// # fn main() -> warp_launch::Result<()> {
    /// let a = Array::from_slice("cpu", &[1.0f32, -2.0], &[2])?;
    /// let bits = a.view(DType::UINT32)?;
    /// assert_eq!(bits.to_vec::<u32>()?, [1.0f32.to_bits(), (-2.0f32).to_bits()]);
    /// // Another size is refused, naming both.
    /// assert!(a.view(DType::FLOAT64).unwrap_err().to_string().contains("4 B"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when the sizes differ or the view would be
    /// misaligned for `dtype`.
    pub fn view(&self, dtype: &'static DType) -> Result<Array> {
        let call = "Array::view";
        if dtype.size != self.dtype().size {
            return Err(Error::Shape {
                call,
                message: format!(
                    "{} has {} B elements but {} has {} B; view as a dtype of the same size (as Warp's view)",
                    self.dtype().name,
                    self.dtype().size,
                    dtype.name,
                    dtype.size
                ),
            });
        }
        Array::from_parts(
            self.storage().clone(),
            self.device(),
            self.offset(),
            dtype,
            self.shape(),
            self.strides(),
        )
        .map_err(|e| match e {
            Error::Shape { message, .. } => Error::Shape { call, message },
            e => e,
        })
    }

    /// A zeroed array of `T` from the stream-ordered memory pool of
    /// `stream`'s device (Warp's mempool allocation): allocated and zeroed
    /// in order on `stream` (`cuMemAllocAsync`), so work queued there after
    /// this call may use it, and freed in stream order on `stream` when the
    /// last handle (array, view, recorded launch, graph) drops, without a
    /// host wait unless another stream used it (then the free waits for
    /// the device first). Work on another stream waits for the allocation
    /// and the zeroing before its first use of the array (an event recorded
    /// after them on `stream`, [`cuda_api::Allocation::order_after`]), as
    /// do host reads. The pool keeps freed
    /// memory up to its release threshold
    /// ([`Device::set_mempool_release_threshold`]).
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// // GPU: a scratch array that lives and dies on one stream.
    /// let stream = warp_launch::Stream::new(&warp_launch::Device::Cuda(0).context()?)?;
    /// let tmp = warp_launch::Array::zeros_on::<f32>(&stream, &[1 << 20])?;
    /// tmp.fill_on(&warp_launch::Value::of(1.0f32), &stream)?;
    /// drop(tmp); // freed after the fill, in stream order
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Array::zeros`]; [`Error::Cuda`] when the device has no memory
    /// pools or `stream` is being captured.
    pub fn zeros_on<T: Element>(stream: &Stream, shape: &[usize]) -> Result<Array> {
        Self::zeros_dtype_on(stream, T::DTYPE, shape)
    }

    /// [`Array::zeros_on`] for a dtype known at run time.
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// // GPU
    /// let s = warp_launch::Stream::new(&warp_launch::Device::Cuda(0).context()?)?;
    /// let v = warp_launch::Array::zeros_dtype_on(&s, warp_launch::DType::VEC3F, &[8])?;
    /// assert_eq!(v.dtype().name, "vec3f");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Array::zeros_on`].
    pub fn zeros_dtype_on(
        stream: &Stream,
        dtype: &'static DType,
        shape: &[usize],
    ) -> Result<Array> {
        let call = "Array::zeros_on";
        let device = Device::from(stream.context().device());
        // Refused before allocating, as `zeros` does: 1 to 4 extents, each
        // and each byte stride within Warp's int32, the bytes within isize.
        let too_big = || Error::Shape {
            call,
            message: format!(
                "shape {shape:?} of {} ({} B elements) does not fit Warp's array_t (1 to 4 extents, int32 extents and byte strides) or the address space; use a smaller shape",
                dtype.name, dtype.size
            ),
        };
        if shape.is_empty() || shape.len() > 4 {
            return Err(too_big());
        }
        let mut stride = dtype.size as u128;
        for &e in shape.iter().rev() {
            if e as u128 > i32::MAX as u128 || stride > i32::MAX as u128 && e > 1 {
                return Err(too_big());
            }
            stride = stride.saturating_mul(e.max(1) as u128);
        }
        let n = shape
            .iter()
            .try_fold(1usize, |a, &e| a.checked_mul(e))
            .and_then(|n| n.checked_mul(dtype.size))
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(too_big)?;
        let (nd, st) = packed(shape, dtype);
        let storage = Arc::new(Storage::cuda(Allocation::zeroed_on(stream, n)?));
        Array::from_parts(storage, device, 0, dtype, shape, &st[..nd])
    }
}

/// Waits for `stream` (nothing for host-only work).
fn sync(stream: Option<&Stream>) -> Result<()> {
    if let Some(s) = stream {
        s.synchronize()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_use_of_lent_memory_names_the_call_and_the_array() {
        let lent = cuda_api::CudaError::Lent {
            call: "Allocation::record_use_on".into(),
            address: 0x1000,
            bytes: 64,
        };
        let e = use_error(
            lent,
            || "launch of 'saxpy'".into(),
            || "argument 'y' (Array(dtype=float32, shape=[16]))".into(),
        );
        assert!(matches!(e, Error::Lent { .. }), "{e}");
        let m = e.to_string();
        assert!(
            m.starts_with("launch of 'saxpy': argument 'y' (Array(dtype=float32, shape=[16])) is lent to cudarc"),
            "{m}"
        );
        assert!(m.contains("drop the slice first"), "{m}");
        // Other failures (a driver's refusal to wait) pass through as they are.
        let other = cuda_api::CudaError::invalid_argument("c", "p", "m".into());
        let e = use_error(other.clone(), || unreachable!(), || unreachable!());
        assert!(matches!(e, Error::Cuda(ref c) if *c == other), "{e}");
    }

    /// The jobs a plan emits.
    fn jobs<J>(plan: impl FnOnce(&mut dyn FnMut(J) -> Result<()>) -> Result<()>) -> Vec<J> {
        let mut v = Vec::new();
        plan(&mut |j| {
            v.push(j);
            Ok(())
        })
        .unwrap();
        v
    }

    fn fills(offset: usize, shape: &[usize], strides: &[isize], value: &[u8]) -> Vec<FillJob> {
        jobs(|e| fill_plan(layout(0, offset, strides), shape, value, e))
    }

    fn copies(dst: Layout<'_>, src: Layout<'_>, shape: &[usize], size: usize) -> Vec<CopyJob> {
        jobs(|e| copy_plan(dst, src, shape, size, e))
    }

    #[test]
    fn a_contiguous_zero_is_one_memset_of_words() {
        let j = fills(0, &[4, 8], &[32, 4], &[0; 4]);
        assert_eq!(
            j,
            [FillJob {
                address: 0,
                pitch: 128,
                word: FillWord::U32(0),
                width: 32,
                height: 1
            }]
        );
    }

    #[test]
    fn a_column_slice_is_one_pitched_memset() {
        // Columns 1..3 of a 4x8 float32 array: rows of 2 floats, 32 B apart.
        let one = 1.0f32.to_ne_bytes();
        let j = fills(4, &[4, 2], &[32, 4], &one);
        assert_eq!(
            j,
            [FillJob {
                address: 4,
                pitch: 32,
                word: FillWord::U32(u32::from_ne_bytes(one)),
                width: 2,
                height: 4
            }]
        );
    }

    #[test]
    fn a_wide_value_is_one_memset_per_word_at_the_element_pitch() {
        let v: Vec<u8> = [1.0f32, 2.0, 3.0]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let j = fills(0, &[5], &[12], &v);
        assert_eq!(j.len(), 3);
        for (k, job) in j.iter().enumerate() {
            assert_eq!(
                (job.address, job.pitch, job.width, job.height),
                (4 * k as u64, 12, 1, 5)
            );
        }
        // A float64 of equal 4-byte halves is periodic: one memset.
        let j = fills(0, &[5], &[8], &[0xAB; 8]);
        assert_eq!(j.len(), 1);
        assert_eq!((j[0].width, j[0].word), (10, FillWord::U32(0xABAB_ABAB)));
    }

    /// Calls `f` with every index of `shape`, last axis fastest (none when
    /// an extent is 0).
    fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
        if shape.contains(&0) {
            return;
        }
        let mut idx = vec![0usize; shape.len()];
        loop {
            f(&idx);
            let mut k = shape.len();
            loop {
                if k == 0 {
                    return;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < shape[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
    }

    /// The byte at which the element at `idx` of a view starts.
    fn element_at(idx: &[usize], strides: &[isize], offset: usize) -> usize {
        let at = offset as isize
            + idx
                .iter()
                .zip(strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>();
        at as usize
    }

    /// Random views (1 to 4 dimensions, positive, negative and zero
    /// strides, gaps, wide and narrow values): replaying the planned
    /// memsets on a byte buffer writes exactly what writing each element
    /// writes, and nothing else.
    #[test]
    fn planned_memsets_write_every_element_and_nothing_else() {
        let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
        let mut next = |n: u64| rng.u64(..n);
        for case in 0..2000 {
            let size = [1usize, 2, 4, 8, 12, 16][next(6) as usize];
            let ndim = 1 + next(4) as usize;
            let shape: Vec<usize> = (0..ndim).map(|_| next(5) as usize).collect();
            // Packed strides in a random axis order, sometimes with gaps,
            // reversed or zero.
            let mut strides = vec![0isize; ndim];
            let mut order: Vec<usize> = (0..ndim).collect();
            for i in (1..ndim).rev() {
                order.swap(i, next(i as u64 + 1) as usize);
            }
            let mut step = size as isize;
            for &a in order.iter().rev() {
                strides[a] = match next(6) {
                    0 => 0,
                    1 => -step,
                    _ => step,
                };
                step *= shape[a].max(1) as isize + next(2) as isize;
            }
            // The offset that keeps every element inside the buffer.
            let low: isize = shape
                .iter()
                .zip(&strides)
                .map(|(&e, &s)| {
                    if s < 0 {
                        (e.max(1) as isize - 1) * s
                    } else {
                        0
                    }
                })
                .sum();
            let offset = (-low) as usize + next(3) as usize * size;
            let value: Vec<u8> = (0..size)
                .map(|_| if next(2) == 0 { 0xAB } else { next(256) as u8 })
                .collect();
            let len = offset + step.unsigned_abs() * 2 + size;
            let mut want = vec![0u8; len];
            for_each_index(&shape, |idx| {
                let at = element_at(idx, &strides, offset);
                want[at..at + size].copy_from_slice(&value);
            });
            let mut got = vec![0u8; len];
            for job in fills(offset, &shape, &strides, &value) {
                let bytes: Vec<u8> = match job.word {
                    FillWord::U8(b) => vec![b],
                    FillWord::U16(w) => w.to_ne_bytes().to_vec(),
                    FillWord::U32(w) => w.to_ne_bytes().to_vec(),
                };
                let w = bytes.len();
                assert!(
                    job.pitch >= job.width * w,
                    "case {case}: rows overlap: {job:?}"
                );
                for row in 0..job.height {
                    for k in 0..job.width {
                        let at = job.address as usize + row * job.pitch + k * w;
                        got[at..at + w].copy_from_slice(&bytes);
                    }
                }
            }
            assert_eq!(
                got, want,
                "case {case}: shape {shape:?} strides {strides:?} offset {offset} value {value:?}"
            );
        }
    }

    /// Axes that together are contiguous merge into one memset whatever
    /// their order in the view and the signs of their strides: a view that
    /// permutes (or flips) the axes of a packed array is one run of bytes.
    #[test]
    fn a_permuted_packed_view_is_one_memset() {
        let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
        for case in 0..5000 {
            let ndim = rng.usize(1..=4);
            let shape: Vec<usize> = (0..ndim).map(|_| rng.usize(1..=5)).collect();
            let mut order: Vec<usize> = (0..ndim).collect();
            rng.shuffle(&mut order);
            let mut strides = vec![0isize; ndim];
            let mut step = 4isize;
            for &a in order.iter().rev() {
                strides[a] = if rng.bool() { step } else { -step };
                step *= shape[a] as isize;
            }
            let low: isize = shape
                .iter()
                .zip(&strides)
                .map(|(&e, &s)| (e as isize - 1) * s.min(0))
                .sum();
            let j = fills((-low) as usize, &shape, &strides, &[7; 4]);
            let n: usize = shape.iter().product();
            assert_eq!(
                j,
                [FillJob {
                    address: 0,
                    pitch: 4 * n,
                    word: FillWord::U32(u32::from_ne_bytes([7; 4])),
                    width: n,
                    height: 1,
                }],
                "case {case}: shape {shape:?} strides {strides:?}"
            );
        }
    }

    #[test]
    fn negative_and_zero_strides_fill_the_same_bytes_forwards() {
        let j = fills(12, &[4, 3], &[-4, 0], &[0; 4]);
        assert_eq!(j.len(), 1);
        assert_eq!((j[0].address, j[0].width), (0, 4));
    }

    /// Strides of a view of `shape` that reach each element once: packed in
    /// a random axis order, with gaps, some axes walked backwards; and the
    /// offset that keeps every element at or above byte 0, and the bytes
    /// the view spans from there.
    fn injective_view(
        rng: &mut fastrand::Rng,
        shape: &[usize],
        size: usize,
    ) -> (Vec<isize>, usize, usize) {
        let mut order: Vec<usize> = (0..shape.len()).collect();
        rng.shuffle(&mut order);
        let mut strides = vec![0isize; shape.len()];
        let mut step = size as isize;
        for &a in order.iter().rev() {
            strides[a] = if rng.u8(..3) == 0 { -step } else { step };
            step *= shape[a].max(1) as isize + rng.usize(..2) as isize;
        }
        let low: isize = shape
            .iter()
            .zip(&strides)
            .map(|(&e, &s)| (e.max(1) as isize - 1) * s.min(0))
            .sum();
        let offset = (-low) as usize + rng.usize(..3) * size;
        (strides, offset, offset + step.unsigned_abs() + size)
    }

    /// Random pairs of views of one shape (1 to 4 dimensions, any axis
    /// order, gaps, backward axes on either side): replaying the planned
    /// copies on byte buffers writes exactly what copying each element
    /// writes, and every copy of several rows has pitches of at least a row.
    #[test]
    fn planned_copies_copy_every_element_and_nothing_else() {
        let mut rng = fastrand::Rng::with_seed(0x5851_f42d_4c95_7f2d);
        for case in 0..3000 {
            let size = [1usize, 2, 4, 8, 12][rng.usize(..5)];
            let shape: Vec<usize> = (0..rng.usize(1..=4)).map(|_| rng.usize(..5)).collect();
            let (ds, doff, dlen) = injective_view(&mut rng, &shape, size);
            let (ss, soff, slen) = injective_view(&mut rng, &shape, size);
            let src: Vec<u8> = (0..slen).map(|_| rng.u8(1..)).collect();
            let mut want = vec![0u8; dlen];
            for_each_index(&shape, |idx| {
                let (d, s) = (element_at(idx, &ds, doff), element_at(idx, &ss, soff));
                want[d..d + size].copy_from_slice(&src[s..s + size]);
            });
            let mut got = vec![0u8; dlen];
            for j in copies(layout(0, doff, &ds), layout(0, soff, &ss), &shape, size) {
                if j.height > 1 {
                    assert!(
                        j.dst_pitch >= j.width && j.src_pitch >= j.width,
                        "case {case}: rows overlap: {j:?}"
                    );
                }
                for r in 0..j.height {
                    let (d, s) = (
                        j.dst as usize + r * j.dst_pitch,
                        j.src as usize + r * j.src_pitch,
                    );
                    got[d..d + j.width].copy_from_slice(&src[s..s + j.width]);
                }
            }
            assert_eq!(
                got, want,
                "case {case}: shape {shape:?} dst {ds:?}+{doff} src {ss:?}+{soff} size {size}"
            );
        }
    }

    fn layout(base: u64, offset: usize, strides: &[isize]) -> Layout<'_> {
        Layout {
            base,
            offset,
            strides,
        }
    }

    /// The offset that keeps every element of a view at or above byte 0.
    fn lowest_offset(shape: &[usize], strides: &[isize]) -> usize {
        let low: isize = shape
            .iter()
            .zip(strides)
            .map(|(&e, &s)| (e as isize - 1) * s.min(0))
            .sum();
        (-low) as usize
    }

    /// A view of `shape` packed in C order for elements of `size` bytes
    /// (an axis of extent 1 takes any stride), or, one time in three, such
    /// a view with one stride broken: a gap, a backward axis, or two axes
    /// swapped.
    fn nearly_packed_strides(rng: &mut fastrand::Rng, shape: &[usize], size: usize) -> Vec<isize> {
        let mut strides = vec![0isize; shape.len()];
        let mut step = size as isize;
        for a in (0..shape.len()).rev() {
            strides[a] = if shape[a] == 1 && rng.bool() {
                rng.isize(-64..64)
            } else {
                step
            };
            step *= shape[a] as isize;
        }
        if !strides.is_empty() && rng.u8(..3) == 0 {
            let a = rng.usize(..strides.len());
            match rng.u8(..3) {
                0 => strides[a] *= 2,
                1 => strides[a] = -strides[a],
                _ => {
                    let b = rng.usize(..strides.len());
                    strides.swap(a, b);
                }
            }
        }
        strides
    }

    /// The shortcut for packed views gives the jobs the strided plan gives,
    /// for fills of any value at any offset, and for views that are almost
    /// packed (which the shortcut must leave to the strided plan).
    #[test]
    fn packed_fills_plan_what_the_strided_plan_does() {
        let mut rng = fastrand::Rng::with_seed(0x94d0_49bb_1331_11eb);
        let mut one_run = 0;
        for case in 0..20_000 {
            let size = [1usize, 2, 3, 4, 6, 8, 12, 16][rng.usize(..8)];
            let shape: Vec<usize> = (0..rng.usize(..=4)).map(|_| rng.usize(1..=5)).collect();
            let strides = nearly_packed_strides(&mut rng, &shape, size);
            let offset =
                lowest_offset(&shape, &strides) + rng.usize(..4) * [1, 2, 4, size][rng.usize(..4)];
            let value: Vec<u8> = match rng.u8(..3) {
                0 => vec![0; size],
                1 => {
                    let w = rng.u8(..);
                    vec![w; size]
                }
                _ => (0..size).map(|_| rng.u8(..)).collect(),
            };
            let base = rng.u64(..1 << 40) & !0xff;
            let at = layout(base, offset, &strides);
            let got = jobs(|e| fill_plan(at, &shape, &value, e));
            let want = jobs(|e| strided_fill_plan(at, &shape, &value, e));
            assert_eq!(
                got, want,
                "case {case}: shape {shape:?} strides {strides:?} offset {offset} value {value:?}"
            );
            one_run += usize::from(packed_len(&shape, &strides, size).is_some() && got.len() == 1);
        }
        // The draws reach the shortcut often.
        assert!(one_run > 5_000, "{one_run}");
    }

    /// As [`packed_fills_plan_what_the_strided_plan_does`], for copies:
    /// either side packed, almost packed or both.
    #[test]
    fn packed_copies_plan_what_the_strided_plan_does() {
        let mut rng = fastrand::Rng::with_seed(0xbf58_476d_1ce4_e5b9);
        let mut both_packed = 0;
        for case in 0..20_000 {
            let size = [1usize, 2, 4, 8, 12][rng.usize(..5)];
            let shape: Vec<usize> = (0..rng.usize(..=4)).map(|_| rng.usize(1..=5)).collect();
            let ds = nearly_packed_strides(&mut rng, &shape, size);
            let ss = nearly_packed_strides(&mut rng, &shape, size);
            let (doff, soff) = (
                lowest_offset(&shape, &ds) + rng.usize(..4) * size,
                lowest_offset(&shape, &ss) + rng.usize(..4) * size,
            );
            let (db, sb) = (rng.u64(..1 << 40) & !0xff, rng.u64(..1 << 40) & !0xff);
            let (dst, src) = (layout(db, doff, &ds), layout(sb, soff, &ss));
            let got = copies(dst, src, &shape, size);
            let want = jobs(|e| strided_copy_plan(dst, src, &shape, size, e));
            assert_eq!(
                got, want,
                "case {case}: shape {shape:?} dst {ds:?}+{doff} src {ss:?}+{soff} size {size}"
            );
            both_packed += usize::from(
                packed_len(&shape, &ds, size).is_some() && packed_len(&shape, &ss, size).is_some(),
            );
        }
        assert!(both_packed > 5_000, "{both_packed}");
    }

    #[test]
    fn a_packed_view_whose_bytes_overflow_is_not_packed() {
        assert_eq!(packed_len(&[3, 4], &[16, 4], 4), Some(12));
        assert_eq!(packed_len(&[1 << 62], &[4], 4), None);
        assert_eq!(packed_len(&[usize::MAX, 2], &[8, 4], 4), None);
        assert_eq!(packed_len(&[], &[], 4), Some(1));
        // Extents of 1 take any stride; a broadcast (stride 0) is not packed.
        assert_eq!(packed_len(&[1, 5, 1], &[-7, 4, 99], 4), Some(5));
        assert_eq!(packed_len(&[5], &[0], 4), None);
    }

    #[test]
    fn copies_merge_contiguous_axes_and_pitch_the_next() {
        // 3x4 float32 into the left 3x4 of a 3x8 array.
        let v = copies(
            layout(0, 0, &[32, 4]),
            layout(1000, 0, &[16, 4]),
            &[3, 4],
            4,
        );
        assert_eq!(
            v,
            [CopyJob {
                dst: 0,
                dst_pitch: 32,
                src: 1000,
                src_pitch: 16,
                width: 16,
                height: 3
            }]
        );
        // A transpose: one element per row, a pitched copy per outer index.
        let v = copies(layout(0, 0, &[8, 4]), layout(1000, 0, &[4, 12]), &[3, 2], 4);
        assert_eq!(v.len(), 2);
        assert!(v.iter().all(|j| j.width == 4 && j.height == 3), "{v:?}");
        assert_eq!(
            (v[1].dst, v[1].dst_pitch, v[1].src, v[1].src_pitch),
            (4, 8, 1012, 4)
        );
    }
}
