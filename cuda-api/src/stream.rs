//! Streams and events.

use std::fmt;

use cuda_sys::{CUevent, CUevent_flags, CUstream, CUstream_flags};

use crate::context::Context;
use crate::driver;
use crate::error::Result;

/// A stream of work on one context.
pub struct Stream {
    raw: CUstream,
    ctx: Context,
    owned: bool,
    /// Keeps a borrowed stream's owner (e.g. a cudarc stream) alive.
    _keep: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: streams may be used from any thread.
unsafe impl Send for Stream {}
// SAFETY: as above; the driver serialises enqueues.
unsafe impl Sync for Stream {}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.raw)
            .field("owned", &self.owned)
            .finish()
    }
}

impl Stream {
    /// A new non-blocking stream (it does not synchronise with the null stream).
    pub fn new(ctx: &Context) -> Result<Stream> {
        ctx.bind()?;
        let raw = driver::stream_create(CUstream_flags::CU_STREAM_NON_BLOCKING.0)?;
        Ok(Stream {
            raw,
            ctx: ctx.clone(),
            owned: true,
            _keep: None,
        })
    }

    pub(crate) fn null(ctx: Context) -> Stream {
        Stream {
            raw: std::ptr::null_mut(),
            ctx,
            owned: false,
            _keep: None,
        }
    }

    /// Wraps a stream created elsewhere (for example by cudarc) without taking
    /// ownership: it is not destroyed on drop.
    ///
    /// # Safety
    ///
    /// `raw` must be a live stream of `ctx` (or null) and outlive this value.
    pub unsafe fn borrow_raw(ctx: &Context, raw: CUstream) -> Stream {
        Stream {
            raw,
            ctx: ctx.clone(),
            owned: false,
            _keep: None,
        }
    }

    /// Like [`Stream::borrow_raw`], keeping `owner` alive as long as the stream.
    ///
    /// # Safety
    ///
    /// `raw` must be a live stream of `ctx` that `owner` keeps alive.
    pub unsafe fn borrow_raw_with_owner(
        ctx: &Context,
        raw: CUstream,
        owner: std::sync::Arc<dyn std::any::Any + Send + Sync>,
    ) -> Stream {
        Stream {
            raw,
            ctx: ctx.clone(),
            owned: false,
            _keep: Some(owner),
        }
    }

    /// The raw handle.
    pub fn raw(&self) -> CUstream {
        self.raw
    }

    /// The context the stream belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Waits until all work queued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        driver::stream_synchronize(self.raw)
    }

    /// Makes later work on this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.ctx.bind()?;
        driver::stream_wait_event(self.raw, event.raw, 0)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let r = self.ctx.bind().and_then(|_| {
            // SAFETY: we own the stream and destroy it once.
            unsafe { driver::stream_destroy(self.raw) }
        });
        if let Err(e) = r {
            crate::report_drop_error("stream", &e);
        }
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
    pub fn new(ctx: &Context) -> Result<Event> {
        ctx.bind()?;
        let raw = driver::event_create(CUevent_flags::CU_EVENT_DEFAULT.0)?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.ctx.bind()?;
        driver::event_record(self.raw, stream.raw())
    }

    /// Waits until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind()?;
        driver::event_synchronize(self.raw)
    }

    /// Milliseconds from `self` to `end` (both recorded and completed).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.ctx.bind()?;
        driver::event_elapsed_time(self.raw, end.raw)
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
            crate::report_drop_error("event", &e);
        }
    }
}
