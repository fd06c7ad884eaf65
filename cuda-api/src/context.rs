//! Primary contexts, and making one current on the calling thread.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

use cuda_sys::CUcontext;

use crate::device::Device;
use crate::driver;
use crate::error::Result;
use crate::stream::Stream;

struct ContextInner {
    raw: CUcontext,
    device: Device,
}

// SAFETY: a CUcontext may be used from any thread; the driver serialises access.
unsafe impl Send for ContextInner {}
// SAFETY: as above.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: this retain is released once.
        if let Err(e) = unsafe { driver::device_primary_ctx_release(self.device.raw()) } {
            crate::report_drop_error("primary context", &e);
        }
    }
}

/// A device's primary context (retained while any clone lives).
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.device)
            .finish()
    }
}

thread_local! {
    static CURRENT: Cell<CUcontext> = const { Cell::new(std::ptr::null_mut()) };
}

impl Context {
    /// Retains `device`'s primary context and makes it current on this thread.
    pub fn primary(device: &Device) -> Result<Context> {
        let raw = driver::device_primary_ctx_retain(device.raw())?;
        let ctx = Context {
            inner: Arc::new(ContextInner {
                raw,
                device: device.clone(),
            }),
        };
        ctx.bind()?;
        Ok(ctx)
    }

    /// Makes this context current on the calling thread. Cheap when it already
    /// is: the last context bound by cuda-api on each thread is remembered.
    /// (Binding with `cuCtxSetCurrent` directly bypasses that memory.)
    #[inline]
    pub fn bind(&self) -> Result<()> {
        if CURRENT.with(Cell::get) == self.inner.raw {
            return Ok(());
        }
        driver::ctx_set_current(self.inner.raw)?;
        CURRENT.with(|c| c.set(self.inner.raw));
        Ok(())
    }

    /// The raw handle.
    pub fn raw(&self) -> CUcontext {
        self.inner.raw
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Waits for all work in the context.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        driver::ctx_synchronize()
    }

    /// The context's legacy default stream (the null stream).
    pub fn default_stream(&self) -> Stream {
        Stream::null(self.clone())
    }
}
