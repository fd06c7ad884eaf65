//! Memory: untyped [`Allocation`]s (device, page-locked host or managed
//! memory, shareable through `Arc`), typed [`DeviceBuffer`]s and views over
//! them, the device pointers kernels receive (read-only [`ConstDevicePtr`]
//! from `&`, writable [`DevicePtr`] from `&mut`), blocking copies, and
//! asynchronous copies inside a [`Scope`] that waits before host memory can go.
//!
//! Host code never holds a Rust reference into GPU-visible memory: every read
//! and write goes through a driver copy, so a kernel running at the same time
//! cannot race with a Rust reference.

use std::any::Any;
use std::cell::Cell;
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cuda_sys::CUdeviceptr;

use crate::context::Context;
use crate::driver;
use crate::error::{CudaError, CudaResult};
use crate::location::{Location, pointer_location};
use crate::stream::{Event, Stream};

/// Plain data that can live in device memory and be copied back: `Copy`, no
/// pointers into host memory, and valid for every bit pattern.
///
/// # Safety
///
/// Implement only for `#[repr(C)]` or primitive types for which any bytes the
/// device writes are a valid value.
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static {}

macro_rules! device_repr {
    ($($t:ty),*) => { $( // SAFETY: primitive numbers are valid for every bit pattern.
        unsafe impl DeviceRepr for $t {} )* };
}
device_repr!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);
// SAFETY: arrays of plain data are plain data.
unsafe impl<T: DeviceRepr, const N: usize> DeviceRepr for [T; N] {}

macro_rules! device_pointer {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[repr(transparent)]
        pub struct $name<T> {
            raw: CUdeviceptr,
            _t: PhantomData<*mut T>,
        }

        impl<T> $name<T> {
            #[doc = concat!("Wraps a raw device address as a ", $what, " pointer.")]
            ///
            /// # Safety
            ///
            /// A pointer is what a kernel dereferences: every launch that
            /// receives it must find live memory of the declared element type
            /// there, in the launch's context, for as long as the kernel runs,
            /// and (for a writable pointer) memory no one else reads or writes
            /// meanwhile. Safe code passes buffers (`&buffer`, `&mut buffer`)
            /// instead, which keep that promise through borrows.
            pub const unsafe fn from_raw(raw: CUdeviceptr) -> Self {
                $name { raw, _t: PhantomData }
            }
            /// The raw address.
            pub const fn raw(self) -> CUdeviceptr {
                self.raw
            }
            /// The null device pointer, for parameters the kernel documents
            /// as optional.
            ///
            /// # Safety
            ///
            /// The kernel must not dereference the parameter when it is null.
            pub const unsafe fn null() -> Self {
                $name { raw: 0, _t: PhantomData }
            }
        }

        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<T> {}
        impl<T> PartialEq for $name<T> {
            fn eq(&self, other: &Self) -> bool {
                self.raw == other.raw
            }
        }
        impl<T> Eq for $name<T> {}
        impl<T> fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:#x})"), self.raw)
            }
        }
        // SAFETY: a device address is plain data.
        unsafe impl<T> Send for $name<T> {}
        // SAFETY: as above.
        unsafe impl<T> Sync for $name<T> {}
    };
}

device_pointer!(
    /// A device address a kernel may write through (`T*` in C), 8 bytes. A
    /// buffer gives one only through `&mut` ([`DeviceBuffer::as_mut_ptr`]).
    DevicePtr,
    "writable"
);
device_pointer!(
    /// A device address a kernel only reads through (`const T*` in C), 8
    /// bytes. A buffer gives one through `&` ([`DeviceBuffer::as_ptr`]).
    ConstDevicePtr,
    "read-only"
);

impl<T> From<DevicePtr<T>> for ConstDevicePtr<T> {
    fn from(p: DevicePtr<T>) -> Self {
        ConstDevicePtr {
            raw: p.raw,
            _t: PhantomData,
        }
    }
}

fn bytes_of<T>(len: usize, call: &'static str) -> CudaResult<usize> {
    len.checked_mul(size_of::<T>()).ok_or_else(|| {
        CudaError::invalid_argument(
            call,
            "len",
            format!("{len} elements of {} bytes overflow usize", size_of::<T>()),
        )
    })
}

fn same_len(
    call: &'static str,
    parameter: &'static str,
    expected: usize,
    given: usize,
) -> CudaResult<()> {
    if expected == given {
        Ok(())
    } else {
        Err(CudaError::invalid_argument(
            call,
            parameter,
            format!(
                "the device side has {expected} elements but the host slice has {given}; pass a slice of {expected} elements"
            ),
        ))
    }
}

/// Refuses a stream of another context than the memory's (asynchronous
/// work on it would be ordered against the wrong context) and a stream being
/// captured into a graph (the graph would not keep the memory alive).
fn check_stream(alloc: &Allocation, stream: &Stream, call: &'static str) -> CudaResult<()> {
    stream.refuse_if_capturing(|| call.to_string())?;
    if stream.context() == &alloc.ctx {
        Ok(())
    } else {
        Err(CudaError::invalid_argument(
            call,
            "stream",
            format!(
                "the memory belongs to {} but the stream to {}; use a stream of the memory's context",
                alloc.ctx,
                stream.context()
            ),
        ))
    }
}

fn in_bounds(call: &'static str, offset: usize, len: usize, bytes: usize) -> CudaResult<()> {
    match offset.checked_add(len) {
        Some(end) if end <= bytes => Ok(()),
        _ => Err(CudaError::invalid_argument(
            call,
            "offset",
            format!(
                "{len} bytes at offset {offset} run past the allocation's {bytes} bytes; copy at most {} bytes there",
                bytes.saturating_sub(offset)
            ),
        )),
    }
}

/// Where an allocation lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemoryKind {
    /// Device memory (`cuMemAlloc`): only the context's device reaches it
    /// (and its peers, once peer access is enabled).
    Device,
    /// Page-locked host memory mapped into the device address space
    /// (`cuMemHostAlloc` with `CU_MEMHOSTALLOC_DEVICEMAP | PORTABLE`): every
    /// device reaches it over the bus.
    PinnedHost,
    /// Managed (unified) memory (`cuMemAllocManaged`, attached globally):
    /// migrated by the driver to whichever device or host touches it.
    Managed,
}

impl fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryKind::Device => "device memory",
            MemoryKind::PinnedHost => "page-locked host memory",
            MemoryKind::Managed => "managed memory",
        })
    }
}

/// An untyped allocation of `bytes` bytes in one context, zeroed when made
/// and freed on drop. Put it in an `Arc` to share it, for example between
/// arrays whose element type is known only at run time and the recorded
/// launches that use them. All access goes through driver copies, so `&self`
/// suffices for them.
pub struct Allocation {
    ptr: CUdeviceptr,
    host: *mut c_void,
    bytes: usize,
    kind: MemoryKind,
    ctx: Context,
    /// Whether work queued on a stream may use the memory: [`IDLE`],
    /// [`ON_HOME`] (only on the home stream of a pool allocation) or
    /// [`ANYWHERE`]. The next blocking host access, and the free, wait
    /// for the home stream or the context first.
    queued: AtomicU8,
    /// For memory from a stream-ordered pool ([`Allocation::zeroed_on`]):
    /// the stream it was allocated on, on which it is freed.
    home: Option<Stream>,
    /// Where the driver says it lives, asked on first use
    /// ([`Allocation::location`]).
    pub(crate) location: OnceLock<Location>,
    /// Memory owned elsewhere ([`Allocation::from_raw_parts`]): kept alive
    /// until the drop has waited for queued work, never freed here.
    owner: Option<Arc<dyn Any + Send + Sync>>,
    /// Set when other handles reach the memory ([`Allocation::share`]):
    /// their queued work is not noted here, so every wait synchronises.
    shared: AtomicBool,
    /// What a use on a stream must check first, 0 in the common case:
    /// [`PENDING`] while `after` holds work that uses on other streams
    /// must wait for, plus [`LOAN`] for each live loan ([`Allocation::lend`]).
    order: AtomicU64,
    /// The work that uses on other streams wait for
    /// ([`Allocation::order_after`]); read only while [`PENDING`] is set.
    after: Mutex<Option<After>>,
    /// The contexts other than `ctx` whose work was noted as using the
    /// memory since the last wait ([`Allocation::record_use_in`]):
    /// page-locked and managed memory reach every context, and
    /// synchronising `ctx` does not wait for work queued in another one.
    /// Each clone keeps its context alive until the wait has seen its work
    /// done.
    foreign: Mutex<Vec<Context>>,
    /// Set when `foreign` may hold a context: the one load a wait pays.
    foreign_used: AtomicBool,
}

/// A point on one stream that work using the memory on any other stream
/// is ordered after ([`Allocation::order_after`]).
struct After {
    /// The stream the point is on (a clone: its handle stays unique).
    stream: Stream,
    /// Recorded on `stream` at the point, once: a new point gets a new
    /// event, so a host wait for this one (outside the lock) knows which
    /// point it saw done.
    event: Arc<Event>,
    /// The last other stream that waited for `event` (a clone, so that its
    /// handle cannot be reused by a new stream that never waited).
    waited: Option<Stream>,
}

impl After {
    /// Whether work queued on `stream` now is already ordered after the
    /// point: it is the point's stream, or the last one that waited.
    fn covers(&self, stream: &Stream) -> bool {
        same_stream(&self.stream, stream)
            || self.waited.as_ref().is_some_and(|w| same_stream(w, stream))
    }
}

/// Whether two live handles name one driver stream (the null handle names
/// each context's own legacy stream).
fn same_stream(a: &Stream, b: &Stream) -> bool {
    a.raw() == b.raw() && a.context() == b.context()
}

/// [`Allocation::order`]: uses on streams other than `after`'s wait for it.
const PENDING: u64 = 1;
/// [`Allocation::order`]: one live loan ([`Allocation::lend`]).
const LOAN: u64 = 2;

// SAFETY: the allocation is only reached through the driver; the handle may move between threads.
unsafe impl Send for Allocation {}
// SAFETY: as above; no method hands out references into the memory.
unsafe impl Sync for Allocation {}

impl fmt::Debug for Allocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Allocation")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("bytes", &self.bytes)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Allocation {
    /// `bytes` zeroed bytes of `kind` memory in `ctx`. Zero bytes allocate
    /// nothing (the address is 0).
    ///
    /// # Errors
    ///
    /// The driver's failure to allocate (`CUDA_ERROR_OUT_OF_MEMORY` when the
    /// memory is exhausted: free some or ask for less), to map page-locked
    /// memory, or to zero it.
    pub fn zeroed(ctx: &Context, bytes: usize, kind: MemoryKind) -> CudaResult<Allocation> {
        ctx.bind()?;
        let mut a = Allocation {
            ptr: 0,
            host: std::ptr::null_mut(),
            bytes,
            kind,
            ctx: ctx.clone(),
            queued: AtomicU8::new(IDLE),
            home: None,
            location: OnceLock::new(),
            owner: None,
            shared: AtomicBool::new(false),
            order: AtomicU64::new(0),
            after: Mutex::new(None),
            foreign: Mutex::new(Vec::new()),
            foreign_used: AtomicBool::new(false),
        };
        if bytes == 0 {
            return Ok(a);
        }
        match kind {
            MemoryKind::Device => a.ptr = driver::mem_alloc(bytes)?,
            MemoryKind::Managed => {
                a.ptr = driver::mem_alloc_managed(
                    bytes,
                    cuda_sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL.0,
                )?
            }
            MemoryKind::PinnedHost => {
                let flags =
                    cuda_sys::CU_MEMHOSTALLOC_DEVICEMAP | cuda_sys::CU_MEMHOSTALLOC_PORTABLE;
                // SAFETY: `a.host` is a valid out-pointer; the driver allocates `bytes` bytes.
                unsafe { driver::mem_host_alloc(&mut a.host, bytes, flags)? };
                // SAFETY: `a.host` was just allocated with the device-map flag.
                a.ptr = unsafe { driver::mem_host_get_device_pointer(a.host, 0)? };
            }
        }
        // SAFETY: `a.ptr` addresses `bytes` bytes just allocated.
        unsafe { driver::memset_d8(a.ptr, 0, bytes)? };
        finish_blocking_call(&a.ctx)?;
        Ok(a)
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Where it lives.
    pub fn kind(&self) -> MemoryKind {
        self.kind
    }

    /// The context it was allocated in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The device address of its first byte (0 when empty): the address
    /// kernels use, for every kind (mapped page-locked memory included). A
    /// number only: turning it into a kernel pointer is `unsafe`
    /// ([`DevicePtr::from_raw`]).
    pub fn device_address(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Notes that work queued on a stream (a launch, an asynchronous copy)
    /// may read or write this memory. The next blocking host access
    /// ([`copy_to_host`](Self::copy_to_host), [`copy_from_host`](Self::copy_from_host),
    /// [`copy_from`](Self::copy_from), [`fill_bytes`](Self::fill_bytes)) and
    /// the free on drop then wait for the allocation's context first, so host
    /// reads never see stale data and memory is never freed under a running
    /// kernel, on any stream. cuda-api's launches and asynchronous copies
    /// call this for every buffer they are given; a layer that launches
    /// through [`Function::launch_raw`](crate::Function::launch_raw) calls it
    /// for the memory it passes. One relaxed atomic store. When the stream
    /// is known, [`record_use_on`](Self::record_use_on) is finer.
    #[inline]
    pub fn record_use(&self) {
        self.queued.store(ANYWHERE, Ordering::Relaxed);
    }

    /// Notes that work queued on `stream` may use this memory, and orders
    /// that work after what the memory waits for; call it before queuing
    /// the work.
    ///
    /// - As [`record_use`](Self::record_use), except that for pool memory
    ///   ([`Allocation::zeroed_on`]) used only on the stream it was
    ///   allocated on, the free stays in stream order on that stream (no
    ///   host wait) and a blocking host access waits for that stream only,
    ///   not the context.
    /// - When the memory is ordered after work on another stream
    ///   ([`Allocation::order_after`]: a pool allocation's allocation and
    ///   zeroing on its stream), `stream` waits for that work
    ///   (`cuStreamWaitEvent`) the first time it uses the memory.
    /// - While the memory is lent ([`Allocation::lend`]), the use is refused.
    ///
    /// The common case (no ordering point, no loan) costs one atomic load
    /// and compare more than [`record_use`](Self::record_use), and never
    /// allocates.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: a layer that queues its own work on `stream` notes the use.
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let stream = cuda_api::Stream::new(&ctx)?;
    /// let a = cuda_api::Allocation::zeroed_on(&stream, 256)?;
    /// a.record_use_on(&stream)?; // still freed in order on `stream`
    /// a.wait_idle()?; // synchronises `stream` only
    ///
    /// let b = cuda_api::Allocation::zeroed_on(&stream, 256)?;
    /// let other = cuda_api::Stream::new(&ctx)?;
    /// // `other` waits for b's allocation and zeroing on `stream` first.
    /// b.record_use_on(&other)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`CudaError::Lent`] while the memory is lent;
    /// [`CudaError::InvalidArgument`] when `stream` must wait but is being
    /// captured ([`Stream::capture`]); the driver's failure to make
    /// `stream` wait.
    #[inline]
    pub fn record_use_on(&self, stream: &Stream) -> CudaResult<()> {
        if self.order.load(Ordering::Acquire) != 0 {
            return self.order_use_on(stream);
        }
        self.note_use_on(stream)
    }

    /// The note of [`Allocation::record_use_on`], without ordering.
    #[inline]
    fn note_use_on(&self, stream: &Stream) -> CudaResult<()> {
        if stream.context() != &self.ctx {
            return self.note_foreign(stream.context());
        }
        match &self.home {
            Some(h) if h.raw() == stream.raw() => {
                self.queued.fetch_max(ON_HOME, Ordering::Relaxed);
            }
            _ => self.record_use(),
        }
        Ok(())
    }

    /// Notes that work queued on any stream of `ctx` may use this memory,
    /// as [`record_use`](Self::record_use) does for the allocation's own
    /// context. For another context (page-locked and managed memory reach
    /// every context), the context is remembered (a clone, which keeps it
    /// alive) and the next blocking host access, host wait
    /// ([`Allocation::wait_idle`]) and the free synchronise it too, so
    /// host reads are current and the memory is never freed under its
    /// work. Memory made elsewhere ([`Allocation::from_raw_parts`]) that
    /// the driver says `ctx` cannot reach is refused.
    /// [`Allocation::record_use_on`] calls it for a stream of another
    /// context.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: page-locked memory of one context used by work of another.
    /// use cuda_api::{Allocation, CudaDevice, Context, MemoryKind};
    /// let dev = CudaDevice::get(0)?;
    /// let (own, other) = (Context::new(&dev)?, dev.primary_context()?);
    /// let a = Allocation::zeroed(&own, 256, MemoryKind::PinnedHost)?;
    /// a.record_use_in(&other)?;
    /// a.wait_idle()?; // synchronises `own` and `other`
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] naming both contexts when the driver
    /// says `ctx` cannot reach memory made elsewhere; the driver's failure
    /// to answer.
    #[inline]
    pub fn record_use_in(&self, ctx: &Context) -> CudaResult<()> {
        if ctx != &self.ctx {
            return self.note_foreign(ctx);
        }
        self.record_use();
        Ok(())
    }

    /// [`Allocation::record_use_in`] for another context than the
    /// allocation's.
    #[cold]
    fn note_foreign(&self, ctx: &Context) -> CudaResult<()> {
        let mut list = self.foreign.lock().unwrap_or_else(|p| p.into_inner());
        if !list.contains(ctx) {
            self.check_reach(ctx)?;
            list.push(ctx.clone());
        }
        drop(list);
        self.foreign_used.store(true, Ordering::Release);
        // The own context is waited for too: a pool allocation's free then
        // waits instead of staying in its home stream's order.
        self.record_use();
        Ok(())
    }

    /// Refuses memory made elsewhere that `ctx` cannot reach: page-locked
    /// memory registered or allocated without the portable flag is mapped
    /// only into its own context, and the driver says so
    /// (`CU_POINTER_ATTRIBUTE_DEVICE_POINTER` asked in `ctx`). The SDK's
    /// own page-locked memory is portable, and managed memory reaches every
    /// context of the process.
    fn check_reach(&self, ctx: &Context) -> CudaResult<()> {
        if self.owner.is_none() || self.kind != MemoryKind::PinnedHost || self.bytes == 0 {
            return Ok(());
        }
        ctx.bind()?;
        let mut mapped: CUdeviceptr = 0;
        // SAFETY: one out-pointer to a local of the attribute's size
        // (a device pointer); the driver accepts any address.
        let r = unsafe {
            driver::pointer_get_attribute(
                (&raw mut mapped).cast(),
                cuda_sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                self.ptr,
            )
        };
        if r.is_ok() && mapped == self.ptr {
            return Ok(());
        }
        Err(CudaError::invalid_argument(
            "Allocation::record_use_in",
            "ctx",
            format!(
                "the {} bytes of page-locked memory at {:#x} belong to {} and are not mapped into {} (the driver gives no device address for them there); use them on a stream of {}, or register the memory as portable",
                self.bytes, self.ptr, self.ctx, ctx, self.ctx
            ),
        ))
    }

    /// Synchronises the other contexts noted by
    /// [`Allocation::record_use_in`] since the last wait, then forgets them;
    /// on a failure the contexts not yet waited for are kept.
    fn wait_foreign(&self) -> CudaResult<()> {
        if !self.foreign_used.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let lock = || self.foreign.lock().unwrap_or_else(|p| p.into_inner());
        let list = std::mem::take(&mut *lock());
        for (i, c) in list.iter().enumerate() {
            if let Err(e) = c.synchronize() {
                let mut kept = lock();
                for c in &list[i..] {
                    if !kept.contains(c) {
                        kept.push(c.clone());
                    }
                }
                self.foreign_used.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }

    /// [`Allocation::record_use_on`] when the memory is lent or has an
    /// ordering point.
    #[cold]
    fn order_use_on(&self, stream: &Stream) -> CudaResult<()> {
        if self.order.load(Ordering::Acquire) >= LOAN {
            return Err(self.lent("Allocation::record_use_on"));
        }
        {
            let mut after = self.after.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(a) = after.as_mut()
                && self.order.load(Ordering::Acquire) & PENDING != 0
                && !a.covers(stream)
            {
                // A wait captured into a graph would not order its replays.
                stream.refuse_if_capturing(|| "Allocation::record_use_on".into())?;
                stream.wait(&a.event)?;
                a.waited = Some(stream.clone());
            }
        }
        self.note_use_on(stream)
    }

    /// Refuses work on lent memory ([`Allocation::lend`]), naming `call`:
    /// for the layers that note uses without a stream.
    pub(crate) fn refuse_if_lent(&self, call: impl FnOnce() -> String) -> CudaResult<()> {
        if self.is_lent() {
            return Err(self.lent(&call()));
        }
        Ok(())
    }

    /// The refusal of work on lent memory, naming `call`.
    fn lent(&self, call: &str) -> CudaError {
        CudaError::Lent {
            call: call.to_string(),
            address: self.ptr,
            bytes: self.bytes,
        }
    }

    /// Orders every later use of this memory on a stream other than
    /// `stream` ([`Allocation::record_use_on`], which the launches and
    /// operations of the layers above call for each stream they queue
    /// on) after the work queued on `stream` so far: an event recorded on
    /// `stream` now, which each other stream waits for before its first
    /// use (`cuStreamWaitEvent`), until a blocking host wait
    /// ([`Allocation::wait_idle`]) has seen it done. The new point replaces
    /// the previous one, after which it is ordered (`stream` waits for the
    /// previous one first when it is still pending).
    /// [`Allocation::zeroed_on`] calls it for its allocation and zeroing; a
    /// lender calls it when the borrower's work ends.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: work of `other` that uses `a` waits for `producer`'s work so far.
    /// use cuda_api::{Allocation, MemoryKind, Stream};
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let (producer, other) = (Stream::new(&ctx)?, Stream::new(&ctx)?);
    /// let a = Allocation::zeroed(&ctx, 256, MemoryKind::Device)?;
    /// a.order_after(&producer)?;
    /// a.record_use_on(&other)?; // `other` waits for the event
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] while `stream` is being captured
    /// ([`Stream::capture`]: the event would be part of the graph); the
    /// driver's failure to make or record the event, or to order `stream`
    /// after the previous point. The previous point stays on failure.
    pub fn order_after(&self, stream: &Stream) -> CudaResult<()> {
        stream.refuse_if_capturing(|| "Allocation::order_after".into())?;
        let event = Event::without_timing(stream.context())?;
        let mut after = self.after.lock().unwrap_or_else(|p| p.into_inner());
        // The new point comes after the previous one, which it replaces.
        if let Some(a) = after.as_ref()
            && self.order.load(Ordering::Acquire) & PENDING != 0
            && !a.covers(stream)
        {
            stream.wait(&a.event)?;
        }
        event.record(stream)?;
        *after = Some(After {
            stream: stream.clone(),
            event: Arc::new(event),
            waited: None,
        });
        self.order.fetch_or(PENDING, Ordering::AcqRel);
        Ok(())
    }

    /// Lends the memory to another library whose work on it this crate
    /// can neither see nor order (cudarc's slices keep their ordering
    /// events to themselves): until the loan ends
    /// ([`Allocation::end_loan`]), [`Allocation::record_use_on`] refuses
    /// every use with [`CudaError::Lent`], so no work queued through this
    /// allocation can race with the borrower's. Blocking host accesses stay
    /// allowed: the memory is marked shared ([`Allocation::share`]), so they
    /// synchronise the context, the borrower's work included. Loans nest.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// use cuda_api::{Allocation, MemoryKind, Stream};
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let (s, borrower) = (Stream::new(&ctx)?, Stream::new(&ctx)?);
    /// let a = Allocation::zeroed(&ctx, 256, MemoryKind::Device)?;
    /// a.lend();
    /// assert!(a.record_use_on(&s).is_err());
    /// // SAFETY: nothing borrowed reaches `a` any more; the borrower
    /// // queued its work on `borrower`.
    /// unsafe { a.end_loan(&borrower) };
    /// a.record_use_on(&s)?;
    /// # Ok(()) }
    /// ```
    pub fn lend(&self) {
        self.share();
        self.order.fetch_add(LOAN, Ordering::AcqRel);
    }

    /// Ends a loan ([`Allocation::lend`]): later uses on streams other than
    /// `borrower` wait for the work queued on `borrower` so far
    /// ([`Allocation::order_after`]), where the borrower's work on the
    /// memory ends.
    ///
    /// # Safety
    ///
    /// Called once per [`Allocation::lend`], by its lender, when nothing
    /// borrowed reaches the memory any more, with every use of the borrower
    /// queued on `borrower` or ordered before its current end.
    ///
    /// For lenders' `Drop`s, it never fails: when the point cannot be
    /// recorded, it synchronises the context instead, and a failure of that
    /// is logged (as other failures to release resources are).
    pub unsafe fn end_loan(&self, borrower: &Stream) {
        if let Err(e) = self
            .order_after(borrower)
            .or_else(|_| self.ctx.synchronize())
        {
            self.ctx.report_release_error("loan of memory", &e);
        }
        self.order.fetch_sub(LOAN, Ordering::AcqRel);
    }

    /// Whether the memory is lent ([`Allocation::lend`]).
    #[inline]
    pub fn is_lent(&self) -> bool {
        self.order.load(Ordering::Acquire) >= LOAN
    }

    /// The stream a pool allocation ([`Allocation::zeroed_on`]) was made on
    /// and is freed on; `None` for other memory.
    /// Example: [`Allocation::zeroed_on`].
    pub fn home_stream(&self) -> Option<&Stream> {
        self.home.as_ref()
    }

    /// Waits until no queued work may use the memory: when a launch or an
    /// asynchronous copy was noted ([`record_use`](Self::record_use)) since
    /// the last wait, or the memory is shared ([`Allocation::share`]),
    /// synchronises the allocation's context (or, for pool memory used only
    /// on its home stream and not shared, that stream); otherwise does
    /// nothing. For code that reads or writes page-locked or managed memory
    /// directly from the host. The blocking copies and the free call it.
    ///
    /// # Errors
    ///
    /// The driver's failure of `cuCtxSynchronize` or `cuStreamSynchronize`
    /// (a failure of the queued work; a sticky one is kept by the context).
    pub fn wait_idle(&self) -> CudaResult<()> {
        let state = self.queued.swap(IDLE, Ordering::AcqRel);
        let r = match (state, &self.home) {
            _ if self.shared.load(Ordering::Relaxed) => self.ctx.synchronize(),
            (IDLE, _) => Ok(()),
            (ON_HOME, Some(h)) => h.synchronize(),
            _ => self.ctx.synchronize(),
        }
        .and_then(|_| self.wait_for_point())
        .and_then(|_| self.wait_foreign());
        if r.is_err() {
            self.queued.fetch_max(state, Ordering::Relaxed);
        }
        r
    }

    /// Waits for the ordering point ([`Allocation::order_after`]) on the
    /// host; once it is done, uses on other streams need not wait for it.
    fn wait_for_point(&self) -> CudaResult<()> {
        if self.order.load(Ordering::Acquire) & PENDING == 0 {
            return Ok(());
        }
        let lock = || self.after.lock().unwrap_or_else(|p| p.into_inner());
        // Waited for outside the lock, so uses on other threads go on.
        let Some(event) = lock().as_ref().map(|a| a.event.clone()) else {
            return Ok(());
        };
        event.synchronize()?;
        let after = lock();
        // A point recorded meanwhile is a new event, still pending.
        if after
            .as_ref()
            .is_some_and(|a| Arc::ptr_eq(&a.event, &event))
        {
            self.order.fetch_and(!PENDING, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Copies `src` to byte `offset` (blocking).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `offset + src.len()` is past the
    /// allocation's end, a failure of the queued work waited for
    /// ([`Allocation::wait_idle`]), or the driver's failure of the copy.
    pub fn copy_from_host(&self, offset: usize, src: &[u8]) -> CudaResult<()> {
        in_bounds("Allocation::copy_from_host", offset, src.len(), self.bytes)?;
        if src.is_empty() {
            return Ok(());
        }
        self.wait_idle()?;
        self.ctx.bind()?;
        // SAFETY: the range lies inside the allocation; `src` holds its length.
        unsafe { driver::memcpy_htod(self.ptr + offset as u64, src.as_ptr().cast(), src.len())? };
        finish_blocking_call(&self.ctx)
    }

    /// Copies from byte `offset` into `dst` (blocking).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `offset + dst.len()` is past the
    /// allocation's end, a failure of the queued work waited for
    /// ([`Allocation::wait_idle`]), or the driver's failure of the copy.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> CudaResult<()> {
        in_bounds("Allocation::copy_to_host", offset, dst.len(), self.bytes)?;
        if dst.is_empty() {
            return Ok(());
        }
        self.wait_idle()?;
        self.ctx.bind()?;
        // SAFETY: the range lies inside the allocation; `dst` holds its length.
        unsafe { driver::memcpy_dtoh(dst.as_mut_ptr().cast(), self.ptr + offset as u64, dst.len()) }
    }

    /// Copies `len` bytes from `src` at `src_offset` to `self` at `offset`
    /// (blocking; any kinds, any contexts of one process).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when either range is past its
    /// allocation's end, a failure of the queued work waited for
    /// ([`Allocation::wait_idle`]), or the driver's failure of the copy.
    pub fn copy_from(
        &self,
        offset: usize,
        src: &Allocation,
        src_offset: usize,
        len: usize,
    ) -> CudaResult<()> {
        in_bounds("Allocation::copy_from", offset, len, self.bytes)?;
        in_bounds("Allocation::copy_from", src_offset, len, src.bytes)?;
        if len == 0 {
            return Ok(());
        }
        self.wait_idle()?;
        src.wait_idle()?;
        self.ctx.bind()?;
        // SAFETY: both ranges lie inside live allocations.
        unsafe { driver::memcpy(self.ptr + offset as u64, src.ptr + src_offset as u64, len)? };
        finish_blocking_call(&self.ctx)
    }

    /// Sets every byte to `byte` (blocking).
    ///
    /// # Errors
    ///
    /// A failure of the queued work waited for ([`Allocation::wait_idle`]), or
    /// the driver's failure of the memset.
    pub fn fill_bytes(&self, byte: u8) -> CudaResult<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        self.wait_idle()?;
        self.ctx.bind()?;
        // SAFETY: the allocation holds `bytes` bytes.
        unsafe { driver::memset_d8(self.ptr, byte, self.bytes)? };
        finish_blocking_call(&self.ctx)
    }
}

/// Waits until the blocking copy or memset just issued (on the context's
/// legacy default stream, which the context's current thread has bound) has
/// run. The driver may return from those calls before their work is done
/// (a memset always; a device-to-device copy; a copy from pageable host
/// memory once it is staged), and cuda-api's streams are non-blocking, so
/// work queued on them afterwards would not wait for it: a graph replayed
/// right after [`Allocation::copy_from_host`] read the old bytes on the H200.
fn finish_blocking_call(ctx: &Context) -> CudaResult<()> {
    // SAFETY: the null handle names the legacy default stream of the
    // context bound by the caller.
    unsafe { driver::stream_synchronize(std::ptr::null_mut()) }.map_err(|e| ctx.note(e))
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if self.owner.is_some() {
            // Memory owned elsewhere: wait for the work queued through this
            // allocation, then let the owner go (after this function); never
            // free. Work through other handles is their owners' to order.
            let own = if self.queued.swap(IDLE, Ordering::AcqRel) != IDLE {
                self.ctx.synchronize()
            } else {
                Ok(())
            };
            if let Err(e) = own.and_then(|_| self.wait_foreign()) {
                self.ctx.report_release_error("memory owned elsewhere", &e);
            }
            return;
        }
        if self.bytes == 0 {
            return;
        }
        if let Some(home) = &self.home {
            return self.free_pooled(home);
        }
        // NVIDIA documents only that cuMemFree *may* wait for work using the
        // memory (a managed free was measured not to): memory that queued
        // work may use is freed after the context has finished it.
        let r = self
            .wait_idle()
            .and_then(|_| self.ctx.bind())
            .and_then(|_| match self.kind {
                // SAFETY: we own the allocation and free it once.
                MemoryKind::PinnedHost => unsafe { driver::mem_free_host(self.host) },
                // SAFETY: as above.
                _ => unsafe { driver::mem_free(self.ptr) },
            });
        if let Err(e) = r {
            self.ctx.report_release_error("memory allocation", &e);
        }
    }
}

impl Allocation {
    /// The free of pool memory: in stream order on its home stream
    /// (`cuMemFreeAsync`), with no host wait when no other stream used it;
    /// after the context has finished its work when one did (the one
    /// mechanism of [`Allocation::record_use`]: other streams' work is not
    /// ordered before the home stream's free). While the home stream is
    /// being captured, a free queued on it would become a node of the
    /// graph, and waiting for the context would break the capture: the
    /// memory is then not freed (it stays with the pool's reservation until
    /// the process ends) and the context reports it.
    fn free_pooled(&self, home: &Stream) {
        if home.is_capturing() {
            self.ctx.report_release_error(
                "pool memory allocation",
                &CudaError::invalid_argument(
                    "Allocation::drop",
                    "self",
                    format!(
                        "{} bytes of pool memory were dropped while their stream is being captured into a graph; a stream-ordered free would become a node of the graph and a wait would end the capture, so the memory is not freed: drop pool memory outside the capture",
                        self.bytes
                    ),
                ),
            );
            return;
        }
        // Shared memory (reached through other handles too) waits for the
        // whole context, as every wait on it does.
        let wait = if self.queued.load(Ordering::Acquire) == ANYWHERE
            || self.shared.load(Ordering::Relaxed)
        {
            self.wait_idle()
        } else {
            Ok(())
        };
        let r = wait.and_then(|_| self.ctx.bind()).and_then(|_| {
            // SAFETY: we own the allocation and free it once, in stream
            // order after every use (all on `home`, or waited for above).
            unsafe { driver::mem_free_async(self.ptr, home.raw()) }
        });
        if let Err(e) = r {
            self.ctx.report_release_error("pool memory allocation", &e);
        }
    }

    /// `bytes` bytes of device memory from the default stream-ordered memory
    /// pool of `stream`'s device (`cuMemAllocAsync`), zeroed on `stream`
    /// (`cuMemsetD8Async`): usable by work queued on `stream` after this
    /// call; work on another stream noted with
    /// [`Allocation::record_use_on`] waits for the allocation and the
    /// zeroing first (an event recorded after them,
    /// [`Allocation::order_after`]); a blocking host access waits for them. When
    /// dropped, the memory goes back to the pool in stream order on
    /// `stream` (`cuMemFreeAsync`), without a host wait when only `stream`
    /// used it (see [`Allocation::record_use_on`]); dropped while `stream`
    /// is being captured into a graph, it is not freed (a logged warning),
    /// since neither a free on the stream nor a wait can run then. The pool keeps freed
    /// memory for reuse up to its release threshold
    /// ([`MemPool::set_release_threshold`](crate::MemPool::set_release_threshold)).
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: scratch memory that lives and dies on one stream.
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let stream = cuda_api::Stream::new(&ctx)?;
    /// let scratch = cuda_api::Allocation::zeroed_on(&stream, 1 << 20)?;
    /// assert!(scratch.home_stream().is_some());
    /// drop(scratch); // cuMemFreeAsync on `stream`: no host wait
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when the device has no memory pools
    /// (`CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED` is 0) or while
    /// `stream` is being captured (the
    /// allocation would become a node of the graph); the driver's failure to
    /// allocate (`CUDA_ERROR_OUT_OF_MEMORY`: free some or ask for less) or
    /// to queue the zeroing.
    pub fn zeroed_on(stream: &Stream, bytes: usize) -> CudaResult<Allocation> {
        const CALL: &str = "Allocation::zeroed_on";
        stream.refuse_if_capturing(|| CALL.into())?;
        let ctx = stream.context();
        crate::pool::MemPool::require(ctx.device(), CALL)?;
        // Empty until the driver has allocated (a failed allocation frees nothing).
        let mut a = Allocation {
            ptr: 0,
            host: std::ptr::null_mut(),
            bytes: 0,
            kind: MemoryKind::Device,
            ctx: ctx.clone(),
            queued: AtomicU8::new(IDLE),
            home: Some(stream.clone()),
            location: OnceLock::new(),
            owner: None,
            shared: AtomicBool::new(false),
            order: AtomicU64::new(0),
            after: Mutex::new(None),
            foreign: Mutex::new(Vec::new()),
            foreign_used: AtomicBool::new(false),
        };
        if bytes == 0 {
            return Ok(a);
        }
        ctx.bind()?;
        // SAFETY: the stream is live (borrowed) and of `ctx`, which is current.
        a.ptr = unsafe { driver::mem_alloc_async(bytes, stream.raw()) }?;
        a.bytes = bytes;
        a.note_use_on(stream)?;
        // SAFETY: `a.ptr` addresses `bytes` bytes allocated in order on this
        // stream, before this memset.
        unsafe { driver::memset_d8_async(a.ptr, 0, bytes, stream.raw()) }?;
        // Other streams' first uses wait for the allocation and the zeroing.
        a.order_after(stream)?;
        Ok(a)
    }
}

/// [`Allocation::queued`]: no queued work uses the memory.
const IDLE: u8 = 0;
/// Only work on the pool allocation's home stream uses it.
const ON_HOME: u8 = 1;
/// Work on any stream may use it.
const ANYWHERE: u8 = 2;

/// An owned allocation of `len` values of `T` (device memory by default;
/// page-locked host or managed memory through the `_in` constructors), freed
/// on drop. `&buffer` gives kernels a read-only pointer, `&mut buffer` a
/// writable one.
pub struct DeviceBuffer<T: DeviceRepr> {
    alloc: Allocation,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: DeviceRepr> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>({:#x}, len {}, {})",
            std::any::type_name::<T>(),
            self.alloc.ptr,
            self.len,
            self.alloc.kind
        )
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// `len` zeroed values in device memory.
    ///
    /// # Errors
    ///
    /// As for [`DeviceBuffer::zeroed_in`].
    pub fn zeroed(ctx: &Context, len: usize) -> CudaResult<Self> {
        Self::zeroed_in(ctx, len, MemoryKind::Device)
    }

    /// `len` zeroed values in `kind` memory.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `len` values of `T` overflow `usize`
    /// bytes, or the allocation's failure ([`Allocation::zeroed`]).
    pub fn zeroed_in(ctx: &Context, len: usize, kind: MemoryKind) -> CudaResult<Self> {
        let bytes = bytes_of::<T>(len, "DeviceBuffer::zeroed")?;
        Ok(DeviceBuffer {
            alloc: Allocation::zeroed(ctx, bytes, kind)?,
            len,
            _t: PhantomData,
        })
    }

    /// A copy of `data` in device memory (blocking).
    ///
    /// # Errors
    ///
    /// As for [`DeviceBuffer::from_slice_in`].
    pub fn from_slice(ctx: &Context, data: &[T]) -> CudaResult<Self> {
        Self::from_slice_in(ctx, data, MemoryKind::Device)
    }

    /// A copy of `data` in `kind` memory (blocking).
    ///
    /// # Errors
    ///
    /// As for [`DeviceBuffer::zeroed_in`] and [`DeviceBuffer::copy_from`].
    pub fn from_slice_in(ctx: &Context, data: &[T], kind: MemoryKind) -> CudaResult<Self> {
        let mut buf = Self::zeroed_in(ctx, data.len(), kind)?;
        buf.copy_from(data)?;
        Ok(buf)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the memory lives.
    pub fn kind(&self) -> MemoryKind {
        self.alloc.kind
    }

    /// The untyped allocation underneath.
    pub fn allocation(&self) -> &Allocation {
        &self.alloc
    }

    /// The untyped allocation, giving up the element type (to share it in an `Arc`).
    pub fn into_allocation(self) -> Allocation {
        self.alloc
    }

    /// A read-only device pointer to the first element, detached from the
    /// borrow. Launches take `&buffer` instead, which keeps the buffer alive
    /// and lets bounds be checked.
    ///
    /// # Safety
    ///
    /// As for [`ConstDevicePtr::from_raw`]: no launch may receive the
    /// pointer after the buffer is dropped or while it is written elsewhere.
    pub unsafe fn as_ptr(&self) -> ConstDevicePtr<T> {
        // SAFETY: the caller's promise is passed on.
        unsafe { ConstDevicePtr::from_raw(self.alloc.ptr) }
    }

    /// A writable device pointer to the first element, detached from the
    /// borrow. Launches take `&mut buffer` instead.
    ///
    /// # Safety
    ///
    /// As for [`DevicePtr::from_raw`]: no launch may receive the pointer
    /// after the buffer is dropped or while it is read or written elsewhere.
    pub unsafe fn as_mut_ptr(&mut self) -> DevicePtr<T> {
        // SAFETY: the caller's promise is passed on.
        unsafe { DevicePtr::from_raw(self.alloc.ptr) }
    }

    /// The device address of the first element (a number; see
    /// [`Allocation::device_address`]).
    pub fn device_address(&self) -> CUdeviceptr {
        self.alloc.ptr
    }

    /// The context that owns the memory.
    pub fn context(&self) -> &Context {
        &self.alloc.ctx
    }

    fn check_range(&self, range: &Range<usize>, call: &'static str) -> CudaResult<()> {
        if range.start > range.end || range.end > self.len {
            return Err(CudaError::invalid_argument(
                call,
                "range",
                format!(
                    "{range:?} is outside 0..{}; use a range inside the buffer",
                    self.len
                ),
            ));
        }
        Ok(())
    }

    /// A read-only view of `range` (element indices).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `range` is reversed or ends past the
    /// buffer.
    pub fn slice(&self, range: Range<usize>) -> CudaResult<DeviceView<'_, T>> {
        self.check_range(&range, "DeviceBuffer::slice")?;
        Ok(DeviceView {
            ptr: self.alloc.ptr + (range.start * size_of::<T>()) as u64,
            len: range.len(),
            ctx: &self.alloc.ctx,
            alloc: Some(&self.alloc),
            _t: PhantomData,
        })
    }

    /// A writable view of `range` (element indices).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `range` is reversed or ends past the
    /// buffer.
    pub fn slice_mut(&mut self, range: Range<usize>) -> CudaResult<DeviceViewMut<'_, T>> {
        self.check_range(&range, "DeviceBuffer::slice_mut")?;
        Ok(DeviceViewMut {
            ptr: self.alloc.ptr + (range.start * size_of::<T>()) as u64,
            len: range.len(),
            ctx: &self.alloc.ctx,
            alloc: Some(&self.alloc),
            _t: PhantomData,
        })
    }

    /// A read-only view of the whole buffer.
    pub fn view(&self) -> DeviceView<'_, T> {
        DeviceView {
            ptr: self.alloc.ptr,
            len: self.len,
            ctx: &self.alloc.ctx,
            alloc: Some(&self.alloc),
            _t: PhantomData,
        }
    }

    /// Copies `src` into the buffer (blocking); lengths must match.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when the lengths differ, or as for
    /// [`Allocation::copy_from_host`].
    pub fn copy_from(&mut self, src: &[T]) -> CudaResult<()> {
        same_len("DeviceBuffer::copy_from", "src", self.len, src.len())?;
        // SAFETY: T is plain data; the byte view covers exactly `src`.
        let bytes =
            unsafe { std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), size_of_val(src)) };
        self.alloc.copy_from_host(0, bytes)
    }

    /// Copies the buffer into `dst` (blocking); lengths must match.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when the lengths differ, a failure of the
    /// queued work waited for, or the driver's failure of the copy.
    pub fn copy_to(&self, dst: &mut [T]) -> CudaResult<()> {
        self.view().copy_to(dst)
    }

    /// The contents as a `Vec` (blocking).
    ///
    /// # Errors
    ///
    /// A failure of the queued work waited for, or the driver's failure of the
    /// copy.
    pub fn to_vec(&self) -> CudaResult<Vec<T>> {
        self.view().to_vec()
    }

    /// Sets every byte to `byte` (blocking).
    ///
    /// # Errors
    ///
    /// As for [`Allocation::fill_bytes`].
    pub fn fill_bytes(&mut self, byte: u8) -> CudaResult<()> {
        self.alloc.fill_bytes(byte)
    }

    /// Sets every element to `value` on `stream`, for 1-, 2- and 4-byte `T`.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] for a stream of another context than the
    /// buffer's or one being captured into a graph, or a `T` of another size
    /// than 1, 2 or 4 bytes; or the driver's failure of the memset.
    pub fn fill_async(&mut self, value: T, stream: &Stream) -> CudaResult<()> {
        if self.len == 0 {
            return Ok(());
        }
        check_stream(&self.alloc, stream, "DeviceBuffer::fill_async")?;
        self.alloc.ctx.bind()?;
        self.alloc.record_use_on(stream)?;
        let (p, n, s) = (self.alloc.ptr, self.len, stream.raw());
        // SAFETY: `value` is plain data of the matching width; the allocation holds len elements.
        unsafe {
            match size_of::<T>() {
                1 => driver::memset_d8_async(p, std::mem::transmute_copy::<T, u8>(&value), n, s),
                2 => driver::memset_d16_async(p, std::mem::transmute_copy::<T, u16>(&value), n, s),
                4 => driver::memset_d32_async(p, std::mem::transmute_copy::<T, u32>(&value), n, s),
                n => Err(CudaError::invalid_argument(
                    "DeviceBuffer::fill_async",
                    "value",
                    format!(
                        "elements of {n} bytes cannot be set by the driver's memset; use 1-, 2- or 4-byte elements or a kernel"
                    ),
                )),
            }
        }
    }
}

/// A read-only borrowed range of a [`DeviceBuffer`].
pub struct DeviceView<'a, T: DeviceRepr> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: &'a Context,
    /// The cuda-api allocation it lies in; `None` for memory owned elsewhere.
    alloc: Option<&'a Allocation>,
    _t: PhantomData<&'a T>,
}

impl<'a, T: DeviceRepr> DeviceView<'a, T> {
    /// A view of `len` elements at `ptr` in memory owned elsewhere (for
    /// example by cudarc), in `ctx`.
    ///
    /// # Safety
    ///
    /// `ptr` must address `len` initialised values of `T` in `ctx`, valid
    /// and not written by anyone for `'a`, with any work that writes them
    /// ordered before the work this view is used for.
    pub unsafe fn from_raw_parts(ctx: &'a Context, ptr: CUdeviceptr, len: usize) -> Self {
        DeviceView {
            ptr,
            len,
            ctx,
            alloc: None,
            _t: PhantomData,
        }
    }

    /// The cuda-api allocation the view lies in (`None` for memory owned elsewhere).
    pub fn allocation(&self) -> Option<&'a Allocation> {
        self.alloc
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &'a Context {
        self.ctx
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// A read-only device pointer to the first element, detached from the borrow.
    ///
    /// # Safety
    ///
    /// As for [`DeviceBuffer::as_ptr`].
    pub unsafe fn as_ptr(&self) -> ConstDevicePtr<T> {
        // SAFETY: the caller's promise is passed on.
        unsafe { ConstDevicePtr::from_raw(self.ptr) }
    }
    pub(crate) fn addr(&self) -> CUdeviceptr {
        self.ptr
    }
    /// Copies the view into `dst` (blocking); lengths must match.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when the lengths differ, a failure of the
    /// queued work waited for ([`Allocation::wait_idle`]), or the driver's
    /// failure of the copy.
    pub fn copy_to(&self, dst: &mut [T]) -> CudaResult<()> {
        same_len("DeviceView::copy_to", "dst", self.len, dst.len())?;
        if self.len == 0 {
            return Ok(());
        }
        if let Some(a) = self.alloc {
            a.wait_idle()?;
        }
        self.ctx.bind()?;
        // SAFETY: both sides hold len * size_of::<T>() bytes.
        unsafe { driver::memcpy_dtoh(dst.as_mut_ptr().cast(), self.ptr, self.len * size_of::<T>()) }
    }
    /// The contents as a `Vec` (blocking).
    ///
    /// # Errors
    ///
    /// A failure of the queued work waited for ([`Allocation::wait_idle`]), or
    /// the driver's failure of the copy.
    pub fn to_vec(&self) -> CudaResult<Vec<T>> {
        let mut v: Vec<T> = Vec::new();
        v.try_reserve_exact(self.len).map_err(|_| {
            CudaError::invalid_argument(
                "DeviceView::to_vec",
                "len",
                format!(
                    "cannot allocate {} bytes of host memory for {} elements; copy a smaller range",
                    self.len.saturating_mul(size_of::<T>()),
                    self.len
                ),
            )
        })?;
        if self.len > 0 {
            if let Some(a) = self.alloc {
                a.wait_idle()?;
            }
            self.ctx.bind()?;
            // SAFETY: the Vec has capacity for len elements; every bit pattern is a valid T (DeviceRepr).
            unsafe {
                driver::memcpy_dtoh(v.as_mut_ptr().cast(), self.ptr, self.len * size_of::<T>())?;
                v.set_len(self.len);
            }
        }
        Ok(v)
    }
}

/// A writable borrowed range of a [`DeviceBuffer`].
pub struct DeviceViewMut<'a, T: DeviceRepr> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: &'a Context,
    /// The cuda-api allocation it lies in; `None` for memory owned elsewhere.
    alloc: Option<&'a Allocation>,
    _t: PhantomData<&'a mut T>,
}

impl<'a, T: DeviceRepr> DeviceViewMut<'a, T> {
    /// A writable view of `len` elements at `ptr` in memory owned elsewhere
    /// (for example by cudarc), in `ctx`.
    ///
    /// # Safety
    ///
    /// `ptr` must address `len` values of `T` in `ctx`, valid and not
    /// otherwise read or written for the view's lifetime, with other work
    /// on them ordered around the work this view is used for.
    pub unsafe fn from_raw_parts(ctx: &'a Context, ptr: CUdeviceptr, len: usize) -> Self {
        DeviceViewMut {
            ptr,
            len,
            ctx,
            alloc: None,
            _t: PhantomData,
        }
    }

    /// The cuda-api allocation the view lies in (`None` for memory owned elsewhere).
    pub fn allocation(&self) -> Option<&'a Allocation> {
        self.alloc
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &'a Context {
        self.ctx
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// A writable device pointer to the first element, detached from the borrow.
    ///
    /// # Safety
    ///
    /// As for [`DeviceBuffer::as_mut_ptr`].
    pub unsafe fn as_mut_ptr(&mut self) -> DevicePtr<T> {
        // SAFETY: the caller's promise is passed on.
        unsafe { DevicePtr::from_raw(self.ptr) }
    }
    pub(crate) fn addr(&self) -> CUdeviceptr {
        self.ptr
    }
}

/// Asynchronous copies queued on one stream, made through
/// [`Stream::scope`], which waits for the stream before it returns. The
/// host slices are borrowed for the whole scope (`'env`), so no copy can
/// outlive the memory it reads or writes, whatever safe code does.
pub struct Scope<'s, 'env> {
    stream: &'s Stream,
    finished: Cell<bool>,
    /// Invariant in 'env, so borrows cannot be shortened to end inside the scope.
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'s, 'env> Scope<'s, 'env> {
    pub(crate) fn new(stream: &'s Stream) -> Self {
        Scope {
            stream,
            finished: Cell::new(false),
            _env: PhantomData,
        }
    }

    pub(crate) fn finish(self) -> CudaResult<()> {
        self.finished.set(true);
        self.stream.synchronize()
    }

    /// The stream the copies are queued on.
    pub fn stream(&self) -> &Stream {
        self.stream
    }

    /// Queues a copy of `src` into `dst`; lengths must match.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when the lengths differ, or the driver's
    /// failure to queue the copy.
    pub fn copy_to_device<T: DeviceRepr>(
        &self,
        dst: &'env mut DeviceBuffer<T>,
        src: &'env [T],
    ) -> CudaResult<()> {
        same_len("Scope::copy_to_device", "src", dst.len, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        dst.alloc.ctx.bind()?;
        dst.alloc.record_use();
        // SAFETY: sizes match; `src` and `dst` stay borrowed until the scope has synchronised.
        unsafe {
            driver::memcpy_htod_async(
                dst.alloc.ptr,
                src.as_ptr().cast(),
                size_of_val(src),
                self.stream.raw(),
            )
        }
    }

    /// Queues a copy of `src` into `dst`; lengths must match.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when the lengths differ, or the driver's
    /// failure to queue the copy.
    pub fn copy_to_host<T: DeviceRepr>(
        &self,
        src: &'env DeviceBuffer<T>,
        dst: &'env mut [T],
    ) -> CudaResult<()> {
        same_len("Scope::copy_to_host", "dst", src.len, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        src.alloc.ctx.bind()?;
        src.alloc.record_use();
        // SAFETY: sizes match; `src` and `dst` stay borrowed until the scope has synchronised.
        unsafe {
            driver::memcpy_dtoh_async(
                dst.as_mut_ptr().cast(),
                src.alloc.ptr,
                size_of_val(dst),
                self.stream.raw(),
            )
        }
    }
}

impl Drop for Scope<'_, '_> {
    fn drop(&mut self) {
        // Reached without `finish` only while unwinding from a panic in the
        // scope's closure: still wait, so no copy outlives its host memory.
        if !self.finished.get()
            && let Err(e) = self.stream.synchronize()
        {
            self.stream
                .context()
                .report_release_error("scope of asynchronous copies", &e);
        }
    }
}

/// What a launch needs to know of a buffer argument: the allocation (so host
/// reads and the free wait for the launch) and its length in elements (for
/// the kernel's [`Bound`](crate::Bound)s). Made only by cuda-api.
#[derive(Clone, Copy, Debug)]
pub struct BufferUse<'a> {
    /// `None` for memory owned elsewhere (a cudarc slice).
    pub(crate) alloc: Option<&'a Allocation>,
    pub(crate) ctx: &'a Context,
    pub(crate) len: usize,
}

impl<'a> BufferUse<'a> {
    pub(crate) fn of(alloc: Option<&'a Allocation>, ctx: &'a Context, len: usize) -> Self {
        BufferUse { alloc, ctx, len }
    }

    /// Refuses device memory of another context than the launch's, and
    /// notes that the launch uses the memory ([`Allocation::record_use`]).
    ///
    /// The common case (memory of the launch's context, not lent) is
    /// decided inline with a few loads and one store; any other goes to
    /// [`BufferUse::enter_slow`], which makes every check with its errors.
    #[inline]
    pub(crate) fn enter(&self, kernel: &str, index: usize, ctx: &Context) -> CudaResult<()> {
        if let Some(a) = self.alloc
            && self.ctx == ctx
            && a.ctx == *ctx
            && !a.is_lent()
        {
            a.record_use();
            return Ok(());
        }
        self.enter_slow(kernel, index, ctx)
    }

    /// [`BufferUse::enter`] for every case: refuses device memory of
    /// another context and lent memory, and notes the use in `ctx`
    /// ([`Allocation::record_use_in`]).
    #[cold]
    #[inline(never)]
    fn enter_slow(&self, kernel: &str, index: usize, ctx: &Context) -> CudaResult<()> {
        let device = self.alloc.is_none_or(|a| a.kind() == MemoryKind::Device);
        if device && self.ctx != ctx {
            return Err(CudaError::invalid_argument(
                format!("launch of '{kernel}'"),
                format!("argument {index}"),
                format!(
                    "the buffer is device memory of {} but the launch runs in {}; launch on a stream of the buffer's context, or copy the data there",
                    self.ctx, ctx
                ),
            ));
        }
        if let Some(a) = self.alloc {
            a.refuse_if_lent(|| format!("launch of '{kernel}', argument {index}"))?;
            a.record_use_in(ctx)?;
        }
        Ok(())
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    pub(crate) fn buffer_use(&self) -> BufferUse<'_> {
        BufferUse::of(Some(&self.alloc), &self.alloc.ctx, self.len)
    }
}

impl<'a, T: DeviceRepr> DeviceView<'a, T> {
    pub(crate) fn buffer_use(&self) -> BufferUse<'a> {
        BufferUse::of(self.alloc, self.ctx, self.len)
    }

    /// The same memory (same allocation, context and borrow) as `len`
    /// values of `U`; the caller (crate::cast) checked that they fit.
    pub(crate) fn retyped<U: DeviceRepr>(self, len: usize) -> DeviceView<'a, U> {
        DeviceView {
            ptr: self.ptr,
            len,
            ctx: self.ctx,
            alloc: self.alloc,
            _t: PhantomData,
        }
    }
}

impl<'a, T: DeviceRepr> DeviceViewMut<'a, T> {
    pub(crate) fn buffer_use(&self) -> BufferUse<'a> {
        BufferUse::of(self.alloc, self.ctx, self.len)
    }

    /// As [`DeviceView::retyped`], writable.
    pub(crate) fn retyped<U: DeviceRepr>(self, len: usize) -> DeviceViewMut<'a, U> {
        DeviceViewMut {
            ptr: self.ptr,
            len,
            ctx: self.ctx,
            alloc: self.alloc,
            _t: PhantomData,
        }
    }
}

impl Allocation {
    /// Where the driver says this allocation lives, asked once and then
    /// served from a cache (an allocation does not move). Device memory
    /// reports [`MemoryType::Device`](crate::MemoryType::Device) and the device of its context,
    /// page-locked memory [`MemoryType::Host`](crate::MemoryType::Host), managed memory
    /// [`Location::managed`].
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] for an empty allocation (it has no
    /// address), or the driver's failure from [`pointer_location`], or
    /// [`CudaError::InvalidArgument`] if the driver does not know the address
    /// (a driver fault: cuda-api allocated it).
    pub fn location(&self) -> CudaResult<Location> {
        if let Some(l) = self.location.get() {
            return Ok(*l);
        }
        if self.bytes() == 0 {
            return Err(CudaError::invalid_argument(
                "Allocation::location",
                "self",
                "the allocation is empty (0 bytes) and has no address to locate; ask only about allocations of at least one byte".into(),
            ));
        }
        let Some(l) = pointer_location(self.device_address())? else {
            return Err(CudaError::invalid_argument(
                "Allocation::location",
                "self",
                format!(
                    "the driver does not know address {:#x} of this {} of {} bytes in {}, although cuda-api allocated it there; the driver's state is inconsistent: restart the process",
                    self.device_address(),
                    self.kind(),
                    self.bytes(),
                    self.context()
                ),
            ));
        };
        Ok(*self.location.get_or_init(|| l))
    }
}

// Beside the scope it runs, so the stream room needs no memory.
impl Stream {
    /// Runs `f` with a [`Scope`] in which asynchronous copies between host
    /// slices and device memory are queued on this stream, then waits for
    /// the stream before returning (also when `f` fails or panics), so no
    /// copy can outlive the host memory it reads or writes. The result is
    /// `f`'s, or the synchronisation's error.
    ///
    /// # Errors
    ///
    /// `f`'s error; a failed synchronisation; [`CudaError::InvalidArgument`]
    /// while the stream is being captured ([`Stream::capture`]): a copy
    /// captured into a graph would read or write host memory after the
    /// scope has ended.
    pub fn scope<'env, R>(
        &self,
        f: impl FnOnce(&Scope<'_, 'env>) -> CudaResult<R>,
    ) -> CudaResult<R> {
        self.refuse_if_capturing(|| "Stream::scope".into())?;
        let scope = Scope::new(self);
        let r = f(&scope);
        let synced = scope.finish();
        let value = r?;
        synced?;
        Ok(value)
    }
}

impl Allocation {
    /// An allocation over `bytes` bytes of `kind` memory at device address
    /// `address` in `ctx`, owned elsewhere: `owner` (a cudarc slice, a DLPack
    /// deleter, any value that keeps the memory alive) is held until this
    /// allocation drops, and the memory is never freed here. Launches and
    /// copies record their use as for any allocation
    /// ([`Allocation::record_use`]), so the drop waits for the context's
    /// queued work before it lets the owner go.
    ///
    /// When the driver knows the allocation that holds `address`
    /// ([`Context::address_range`]), a range that leaves it is refused.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// use std::sync::Arc;
    /// use cuda_api::{Allocation, Context, CudaDevice, DeviceBuffer, MemoryKind};
    /// let ctx = Context::primary(&CudaDevice::get(0)?)?;
    /// let buffer = DeviceBuffer::<f32>::zeroed(&ctx, 256)?;
    /// let address = buffer.device_address();
    /// // SAFETY: `buffer`, moved into the owner, holds 1024 bytes of device
    /// // memory of `ctx` at `address` for as long as it lives.
    /// let shared = unsafe {
    ///     Allocation::from_raw_parts(&ctx, address, 1024, MemoryKind::Device, Arc::new(buffer))?
    /// };
    /// assert_eq!(shared.bytes(), 1024);
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    ///
    /// `address..address + bytes` must be `kind` memory reachable from
    /// `ctx`'s device, valid to read and write for as long as `owner`
    /// lives, and written by no one else while work that this allocation
    /// queues may run (other users order their work with it themselves).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `address` is 0 for a non-empty
    /// range, or when the driver's allocation holding `address` ends before
    /// `address + bytes` (the message gives both extents); the driver's
    /// failure to answer the range query.
    pub unsafe fn from_raw_parts(
        ctx: &Context,
        address: CUdeviceptr,
        bytes: usize,
        kind: MemoryKind,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> CudaResult<Allocation> {
        let call = "Allocation::from_raw_parts";
        if bytes > 0 && address == 0 {
            return Err(CudaError::invalid_argument(
                call,
                "address",
                format!("address 0 for {bytes} bytes; pass the address of live memory"),
            ));
        }
        if bytes > 0
            && let Some((base, size)) = ctx.address_range(address)?
        {
            let end = (base as u128) + (size as u128);
            if (address as u128) + (bytes as u128) > end {
                return Err(CudaError::invalid_argument(
                    call,
                    "bytes",
                    format!(
                        "{bytes} bytes at {address:#x} run past the driver's allocation {base:#x}..{:#x} ({size} bytes); at most {} bytes lie there",
                        end,
                        end.saturating_sub(address as u128)
                    ),
                ));
            }
        }
        Ok(Allocation {
            ptr: address,
            host: std::ptr::null_mut(),
            bytes,
            kind,
            ctx: ctx.clone(),
            queued: AtomicU8::new(IDLE),
            home: None,
            location: OnceLock::new(),
            owner: Some(owner),
            shared: AtomicBool::new(true),
            order: AtomicU64::new(0),
            after: Mutex::new(None),
            foreign: Mutex::new(Vec::new()),
            foreign_used: AtomicBool::new(false),
        })
    }

    /// Marks the memory as reached through other handles too (exported as
    /// a DLPack tensor, lent to cudarc, viewed by an allocation made with
    /// [`Allocation::from_raw_parts`]): work queued through those handles
    /// is not noted here, so from now on every blocking host access and
    /// the drop synchronise the context ([`Allocation::wait_idle`]) instead
    /// of only after a noted use. Memory owned elsewhere is marked so from
    /// the start. Irreversible.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// use cuda_api::{Allocation, Context, CudaDevice, MemoryKind};
    /// let ctx = Context::primary(&CudaDevice::get(0)?)?;
    /// let a = Allocation::zeroed(&ctx, 64, MemoryKind::Device)?;
    /// a.share();
    /// assert!(a.is_shared());
    /// # Ok(()) }
    /// ```
    pub fn share(&self) {
        self.shared.store(true, Ordering::Relaxed);
    }

    /// Whether the memory is reached through other handles too
    /// ([`Allocation::share`]).
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// use cuda_api::{Allocation, Context, CudaDevice, MemoryKind};
    /// let ctx = Context::primary(&CudaDevice::get(0)?)?;
    /// assert!(!Allocation::zeroed(&ctx, 64, MemoryKind::Device)?.is_shared());
    /// # Ok(()) }
    /// ```
    pub fn is_shared(&self) -> bool {
        self.shared.load(Ordering::Relaxed)
    }

    /// The owner of memory owned elsewhere ([`Allocation::from_raw_parts`]);
    /// `None` for memory this allocation allocated and frees.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// use cuda_api::{Allocation, Context, CudaDevice, MemoryKind};
    /// let ctx = Context::primary(&CudaDevice::get(0)?)?;
    /// assert!(Allocation::zeroed(&ctx, 64, MemoryKind::Device)?.owner().is_none());
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        self.owner.as_ref()
    }
}
