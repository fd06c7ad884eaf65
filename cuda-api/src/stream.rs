//! Streams and events.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cuda_sys::{CUevent, CUevent_flags, CUstream, CUstream_flags, CUstreamCaptureStatus};

use crate::context::Context;
use crate::driver;
use crate::error::{CudaError, CudaResult};

struct StreamInner {
    raw: CUstream,
    ctx: Context,
    owned: bool,
    /// Set while [`Stream::capture`] captures this stream into a graph
    /// (only to refuse a second capture through the same handle; whether
    /// work is captured is asked of the driver, see
    /// [`Stream::capture_state`]).
    capturing: AtomicBool,
    /// For the handle a [`Capture`](crate::Capture) queues through: the
    /// driver's id of that capture, the one capture whose graph holds the
    /// work queued through this handle; 0 for every other handle.
    capture_id: AtomicU64,
    /// The event [`Stream::wait_stream`] records on this stream, made on
    /// first use.
    event: std::sync::OnceLock<Event>,
    /// Keeps a borrowed stream's owner (e.g. a cudarc stream) alive.
    _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: streams may be used from any thread.
unsafe impl Send for StreamInner {}
// SAFETY: as above; the driver serialises enqueues.
unsafe impl Sync for StreamInner {}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let r = self.ctx.bind().and_then(|_| {
            // SAFETY: we own the stream and destroy it once, when the last clone goes.
            unsafe { driver::stream_destroy(self.raw) }
        });
        if let Err(e) = r {
            self.ctx.report_release_error("stream", &e);
        }
    }
}

/// A stream of work on one context. Cheap to clone: clones share the stream,
/// which is destroyed when the last one is dropped.
#[derive(Clone)]
pub struct Stream {
    inner: Arc<StreamInner>,
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.inner.raw)
            .field("owned", &self.inner.owned)
            .finish()
    }
}

impl Stream {
    fn wrap(
        raw: CUstream,
        ctx: &Context,
        owned: bool,
        keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
    ) -> Stream {
        Stream {
            inner: Arc::new(StreamInner {
                raw,
                ctx: ctx.clone(),
                owned,
                capturing: AtomicBool::new(false),
                capture_id: AtomicU64::new(0),
                event: std::sync::OnceLock::new(),
                _keep: keep,
            }),
        }
    }

    /// A new non-blocking stream (it does not synchronise with the null stream).
    ///
    /// # Errors
    ///
    /// The driver's failure of `cuStreamCreate`, or of making `ctx` current.
    pub fn new(ctx: &Context) -> CudaResult<Stream> {
        ctx.bind()?;
        let raw = driver::stream_create(CUstream_flags::CU_STREAM_NON_BLOCKING.0)?;
        Ok(Self::wrap(raw, ctx, true, None))
    }

    /// A new non-blocking stream with `priority` (lower numbers first; see
    /// [`Context::stream_priority_range`]). Work of a higher-priority
    /// stream is scheduled before pending work of lower-priority ones.
    ///
    /// # Errors
    ///
    /// [`CudaError::PriorityOutOfRange`]
    /// naming the context's range when `priority` lies outside it (the
    /// driver would clamp it silently), or a driver failure.
    pub fn with_priority(ctx: &Context, priority: i32) -> CudaResult<Stream> {
        ctx.stream_priority_range()?
            .check(priority, &ctx.device().to_string())?;
        let raw = driver::stream_create_with_priority(
            CUstream_flags::CU_STREAM_NON_BLOCKING.0,
            priority,
        )?;
        Ok(Self::wrap(raw, ctx, true, None))
    }

    /// The stream's priority (`cuStreamGetPriority`).
    ///
    /// # Errors
    ///
    /// A driver failure.
    pub fn priority(&self) -> CudaResult<i32> {
        self.inner.ctx.bind()?;
        // SAFETY: the stream is alive while `self` is; its context is current.
        unsafe { driver::stream_get_priority(self.inner.raw) }
    }

    pub(crate) fn null(ctx: Context) -> Stream {
        Self::wrap(std::ptr::null_mut(), &ctx, false, None)
    }

    /// Wraps a stream created elsewhere (for example by cudarc) without taking
    /// ownership: it is not destroyed on drop.
    ///
    /// # Safety
    ///
    /// `raw` must be a live stream of `ctx` (or null) and outlive this value.
    pub unsafe fn borrow_raw(ctx: &Context, raw: CUstream) -> Stream {
        Self::wrap(raw, ctx, false, None)
    }

    /// Like [`Stream::borrow_raw`], keeping `owner` alive as long as the stream.
    ///
    /// # Safety
    ///
    /// `raw` must be a live stream of `ctx` that `owner` keeps alive.
    pub unsafe fn borrow_raw_with_owner(
        ctx: &Context,
        raw: CUstream,
        owner: Arc<dyn std::any::Any + Send + Sync>,
    ) -> Stream {
        Self::wrap(raw, ctx, false, Some(owner))
    }

    /// A second handle on the same driver stream, keeping `self` alive:
    /// the one through which the capture of driver id `capture_id` queues
    /// work (whose graph holds it), while every other handle on the stream
    /// is refused ([`Stream::refuse_if_capturing`]).
    pub(crate) fn alias_for_capture(&self, capture_id: u64) -> Stream {
        let alias = Self::wrap(
            self.inner.raw,
            &self.inner.ctx,
            false,
            Some(Arc::new(self.clone())),
        );
        alias.inner.capture_id.store(capture_id, Ordering::Relaxed);
        alias
    }

    /// Marks the stream as captured by [`Stream::capture`] (`true`) or not;
    /// `false` when it already was in the state asked for.
    pub(crate) fn set_capturing(&self, on: bool) -> bool {
        self.inner
            .capturing
            .compare_exchange(!on, on, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Whether the driver is capturing this stream into a graph, and the
    /// capture's id (`cuStreamIsCapturing`, then `cuStreamGetCaptureInfo`
    /// while capturing): `None` when work queued on
    /// it runs, `Some(id)` while a capture is active (or was invalidated
    /// and not yet ended). Asked of the driver on every call, so it holds
    /// for every handle on the stream (a clone, [`Stream::borrow_raw`],
    /// [`Stream::from_cudarc`](crate::Stream)), for captures begun by other
    /// libraries, and for a stream that joined a capture by waiting for an
    /// event of a captured stream. The legacy default stream (the null
    /// handle) cannot be captured: `None` without a driver call.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: a stream is captured only inside `capture`.
    /// let ctx = cuda_api::CudaDevice::get(0)?.primary_context()?;
    /// let stream = cuda_api::Stream::new(&ctx)?;
    /// assert_eq!(stream.capture_state()?, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The driver's failure of `cuStreamIsCapturing` or
    /// `cuStreamGetCaptureInfo` (for example
    /// `CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`).
    #[inline]
    pub fn capture_state(&self) -> CudaResult<Option<u64>> {
        if self.inner.raw.is_null() {
            return Ok(None);
        }
        // The status alone first (`cuStreamIsCapturing`, the cheaper call
        // between launches: docs/launch-profile.md); the capture's id only
        // while there is one.
        // SAFETY: the stream is alive while `self` is (owned, or kept by the
        // borrower's promise).
        let status = unsafe { driver::stream_is_capturing(self.inner.raw) }?;
        if status == CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            return Ok(None);
        }
        // SAFETY: as above; both optional out-arrays are null.
        let (status, id, _, _) = unsafe {
            driver::stream_get_capture_info(
                self.inner.raw,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }?;
        Ok((status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE).then_some(id))
    }

    /// Whether the driver is capturing this stream into a graph
    /// ([`Stream::capture_state`]); `true` when the driver cannot say.
    #[inline]
    pub fn is_capturing(&self) -> bool {
        self.capture_state().map_or(true, |s| s.is_some())
    }

    /// Refuses work queued through this handle while the driver captures
    /// the stream into a graph ([`Stream::capture_state`], one driver call),
    /// unless this handle is the one a [`Capture`](crate::Capture) of that
    /// very capture queues through: only that capture's graph holds what
    /// its work uses.
    ///
    /// The common case (no capture) is one driver call decided here; a
    /// capture, or a failing query, goes to
    /// [`Stream::refuse_if_captured_by_another`], which asks again.
    #[inline]
    pub(crate) fn refuse_if_capturing(&self, call: impl FnOnce() -> String) -> CudaResult<()> {
        if self.inner.raw.is_null() {
            return Ok(());
        }
        // SAFETY: the stream is alive while `self` is (owned, or kept by
        // the borrower's promise).
        let status = unsafe { driver::stream_is_capturing(self.inner.raw) };
        if let Ok(CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE) = status {
            return Ok(());
        }
        self.refuse_if_captured_by_another(call)
    }

    /// [`Stream::refuse_if_capturing`] when the stream may be captured:
    /// the capture's id ([`Stream::capture_state`]) against the one this
    /// handle queues for.
    #[cold]
    #[inline(never)]
    fn refuse_if_captured_by_another(&self, call: impl FnOnce() -> String) -> CudaResult<()> {
        let id = match self.capture_state() {
            Ok(None) => return Ok(()),
            Ok(Some(id)) => id,
            Err(e) => return Err(e),
        };
        if id != 0 && self.inner.capture_id.load(Ordering::Relaxed) == id {
            return Ok(());
        }
        Err(CudaError::invalid_argument(
            call(),
            "stream",
            format!(
                "the stream is being captured into a graph (the driver's capture {id}), and this handle is not the capture's own, so the graph would not hold the memory this work uses; queue the work through the Capture (or GraphCapture) of that capture, or after it ends"
            ),
        ))
    }

    /// The raw handle.
    #[inline]
    pub fn raw(&self) -> CUstream {
        self.inner.raw
    }

    /// The context the stream belongs to.
    #[inline]
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Waits until all work queued so far has finished. A sticky error is
    /// also kept by the context ([`Context::sticky_error`]).
    ///
    /// # Errors
    ///
    /// [`CudaError::Driver`] with the first failure of the stream's work
    /// (`cuStreamSynchronize`).
    pub fn synchronize(&self) -> CudaResult<()> {
        self.inner.ctx.bind()?;
        // SAFETY: the stream is alive while `self` is; its context is current.
        unsafe { driver::stream_synchronize(self.inner.raw) }.map_err(|e| self.inner.ctx.note(e))
    }

    /// The event [`Stream::wait_stream`] records on this stream (made once,
    /// without timing).
    pub(crate) fn cached_event(&self) -> CudaResult<&Event> {
        if let Some(e) = self.inner.event.get() {
            return Ok(e);
        }
        let e = Event::without_timing(&self.inner.ctx)?;
        // Another thread may have made one meanwhile: the loser is dropped.
        Ok(self.inner.event.get_or_init(|| e))
    }

    /// Makes later work on this stream wait for `event`.
    ///
    /// # Errors
    ///
    /// The driver's failure of `cuStreamWaitEvent`, or of making the stream's
    /// context current.
    pub fn wait(&self, event: &Event) -> CudaResult<()> {
        self.inner.ctx.bind()?;
        // SAFETY: the stream and the event are alive while `self` and `event`
        // are borrowed; the stream's context is current.
        unsafe { driver::stream_wait_event(self.inner.raw, event.raw, 0) }
    }
}

/// A marker in a stream, for ordering and timing.
pub struct Event {
    raw: CUevent,
    ctx: Context,
}

// SAFETY: events may be used from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// A new event that records timing.
    ///
    /// # Errors
    ///
    /// The driver's failure of `cuEventCreate`, or of making `ctx` current.
    pub fn new(ctx: &Context) -> CudaResult<Event> {
        ctx.bind()?;
        let raw = driver::event_create(CUevent_flags::CU_EVENT_DEFAULT.0)?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// A new event without timing (`CU_EVENT_DISABLE_TIMING`), for ordering
    /// only: cheaper to record and wait for.
    pub(crate) fn without_timing(ctx: &Context) -> CudaResult<Event> {
        ctx.bind()?;
        let raw = driver::event_create(CUevent_flags::CU_EVENT_DISABLE_TIMING.0)?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// Records the event at the current end of `stream`.
    ///
    /// # Errors
    ///
    /// A driver error; [`CudaError::InvalidArgument`] while `stream` is being
    /// captured ([`Stream::capture`]): another stream waiting for such an
    /// event would join the capture, and its work would escape the checks
    /// that tie a graph to its buffers.
    pub fn record(&self, stream: &Stream) -> CudaResult<()> {
        stream.refuse_if_capturing(|| "Event::record".into())?;
        self.ctx.bind()?;
        // SAFETY: the event and the stream are alive while borrowed; the
        // event's context is current.
        unsafe { driver::event_record(self.raw, stream.raw()) }
    }

    /// Waits until the event has completed.
    ///
    /// # Errors
    ///
    /// [`CudaError::Driver`] with the first failure of the work before the
    /// event (`cuEventSynchronize`).
    pub fn synchronize(&self) -> CudaResult<()> {
        self.ctx.bind()?;
        // SAFETY: the event is alive while `self` is.
        unsafe { driver::event_synchronize(self.raw) }.map_err(|e| self.ctx.note(e))
    }

    /// Milliseconds from `self` to `end` (both recorded and completed).
    ///
    /// # Errors
    ///
    /// The driver's failure of `cuEventElapsedTime`: `CUDA_ERROR_NOT_READY`
    /// when either event has not completed, `CUDA_ERROR_INVALID_HANDLE` when
    /// one was not recorded.
    pub fn elapsed_ms(&self, end: &Event) -> CudaResult<f32> {
        self.ctx.bind()?;
        // SAFETY: both events are alive while borrowed.
        unsafe { driver::event_elapsed_time(self.raw, end.raw) }
    }

    /// The raw handle.
    pub fn raw(&self) -> CUevent {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let r = self.ctx.bind().and_then(|_| {
            // SAFETY: we own the event and destroy it once.
            unsafe { driver::event_destroy(self.raw) }
        });
        if let Err(e) = r {
            self.ctx.report_release_error("event", &e);
        }
    }
}

// Beside the stream it makes, so the context room needs no stream.
impl Context {
    /// The context's legacy default stream (the null stream).
    pub fn default_stream(&self) -> Stream {
        Stream::null(self.clone())
    }
}
