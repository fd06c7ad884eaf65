//! Contexts (a device's primary context, or a separate one), making one
//! current on the calling thread, and the first sticky error each one saw.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use cuda_sys::CUcontext;

use crate::device::CudaDevice;
use crate::driver;
use crate::error::{CudaError, CudaResult};

/// The separate contexts [`Context::new`] made, for [`Context::current`]
/// (dead entries are pruned when a new one is added).
static SEPARATE: Mutex<Vec<Weak<ContextInner>>> = Mutex::new(Vec::new());

struct ContextInner {
    raw: CUcontext,
    device: CudaDevice,
    primary: bool,
    /// The first sticky error seen in this context (the context is unusable after it).
    sticky: OnceLock<CudaError>,
    /// Releases that failed after the sticky error and were not printed.
    silenced: AtomicUsize,
}

// SAFETY: a CUcontext may be used from any thread; the driver serialises access.
unsafe impl Send for ContextInner {}
// SAFETY: as above.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        let r = if self.primary {
            // SAFETY: this retain is released once.
            unsafe { driver::device_primary_ctx_release(self.device.raw()) }
        } else {
            // SAFETY: we created this context and destroy it once; every
            // resource of it holds a Context clone, so none is left.
            unsafe { driver::ctx_destroy(self.raw) }
        };
        if let Err(e) = r {
            if e.is_sticky() || self.sticky.get().is_some() {
                return;
            }
            log::warn!("releasing a context failed: {e}");
        }
    }
}

/// A CUDA context: a device's primary context (shared with the runtime API
/// and other libraries) or a separate one. Cheap to clone. A device's
/// primary context is one value per process ([`CudaDevice::primary_context`]),
/// retained until the process exits; a separate context ([`Context::new`])
/// is destroyed when the last clone (and every resource made in it) is
/// dropped. Two values are equal when they are the same driver context.
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.device)
            .field("primary", &self.inner.primary)
            .finish()
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.inner.device;
        let kind = if self.inner.primary {
            "primary context"
        } else {
            "context"
        };
        write!(
            f,
            "{kind} {:p} of cuda:{} ({})",
            self.inner.raw,
            d.ordinal(),
            d.name()
        )
    }
}

impl PartialEq for Context {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.inner.raw == other.inner.raw
    }
}
impl Eq for Context {}

/// A device's primary context, here with the rest of what makes contexts.
impl CudaDevice {
    /// The device's primary context (the one the runtime API and most
    /// libraries use), retained on the first call and then kept for the
    /// life of the process: every call returns the same [`Context`] (one
    /// record of its sticky error), a lock-free read after the first.
    /// Does not make it current; [`Context::bind`] does, and so does every
    /// cuda-api call that works in it. [`Context::primary`] is this plus
    /// [`Context::bind`].
    ///
    /// # Errors
    ///
    /// The driver's failure of `cuDevicePrimaryCtxRetain` on the first call.
    pub fn primary_context(&self) -> CudaResult<Context> {
        /// One slot per device the driver reports (as `CudaDevice::get`
        /// has), filled on first use.
        static PRIMARY: OnceLock<Box<[OnceLock<Context>]>> = OnceLock::new();
        let table = match PRIMARY.get() {
            Some(t) => t,
            None => {
                let n = usize::try_from(CudaDevice::count()?).unwrap_or(0);
                PRIMARY.get_or_init(|| (0..n).map(|_| OnceLock::new()).collect())
            }
        };
        let Some(slot) = usize::try_from(self.ordinal())
            .ok()
            .and_then(|i| table.get(i))
        else {
            // Not reached: a `CudaDevice` is made only for an ordinal below
            // the count. A second record of the context would break the
            // promise above, so this is an error, not a fresh retain.
            return Err(CudaError::invalid_argument(
                "CudaDevice::primary_context",
                "self",
                format!(
                    "device {} is not below the {} devices the driver reported; restart the process",
                    self.ordinal(),
                    table.len()
                ),
            ));
        };
        if let Some(c) = slot.get() {
            return Ok(c.clone());
        }
        let c = Context::retain_primary(self)?;
        // A thread that lost the race drops its `c`, releasing its retain.
        Ok(slot.get_or_init(|| c).clone())
    }
}

impl Context {
    /// `device`'s primary context, made current on this thread: the one
    /// [`CudaDevice::primary_context`] keeps for the process (so every call
    /// returns the same context), plus [`Context::bind`].
    ///
    /// # Errors
    ///
    /// The driver's failure to retain the primary context or to make it current.
    pub fn primary(device: &CudaDevice) -> CudaResult<Context> {
        let ctx = device.primary_context()?;
        ctx.bind()?;
        Ok(ctx)
    }

    /// Retains `device`'s primary context, without making it current: for
    /// [`CudaDevice::primary_context`], which keeps the one result.
    pub(crate) fn retain_primary(device: &CudaDevice) -> CudaResult<Context> {
        let raw = driver::device_primary_ctx_retain(device.raw())?;
        Ok(Self::wrap(raw, device, true))
    }

    /// Creates a separate context on `device` (`cuCtxCreate`), destroyed when
    /// the last clone is dropped, and makes it current on this thread. Most
    /// programs want [`Context::primary`]; a separate context isolates its
    /// modules, memory and faults from the primary one.
    ///
    /// # Errors
    ///
    /// The driver's failure to create the context or to make it current.
    pub fn new(device: &CudaDevice) -> CudaResult<Context> {
        // SAFETY: no creation parameters (null), no flags, a valid device.
        let raw = unsafe { driver::ctx_create(std::ptr::null_mut(), 0, device.raw()) }?;
        let ctx = Self::wrap(raw, device, false);
        let mut known = SEPARATE.lock().unwrap_or_else(|p| p.into_inner());
        known.retain(|w| w.strong_count() > 0);
        known.push(Arc::downgrade(&ctx.inner));
        drop(known);
        ctx.bind()?;
        Ok(ctx)
    }

    /// The context current on the calling thread as a cuda-api [`Context`],
    /// or `None` when none is current. Reads the driver's thread-local
    /// record (`cuCtxGetCurrent`): the primary context of its device
    /// (whoever made it current) is the one [`CudaDevice::primary_context`]
    /// keeps; a separate context is found when [`Context::new`] made it and
    /// a clone of it is still alive. Makes nothing current; the only state
    /// it may touch is the first [`CudaDevice::primary_context`] retain of an
    /// already active primary context.
    ///
    /// # Errors
    ///
    /// [`CudaError::ForeignContext`] for a context made outside cuda-api (it
    /// cannot be held safely: its maker may destroy it), or the driver's
    /// failure.
    pub fn current() -> CudaResult<Option<Context>> {
        let Some(device) = CudaDevice::current()? else {
            return Ok(None);
        };
        let raw = driver::ctx_get_current()?;
        if raw.is_null() {
            // Popped by another call between the two reads.
            return Ok(None);
        }
        let (_, active) = driver::device_primary_ctx_get_state(device.raw())?;
        if active != 0 {
            // The primary context exists, so retaining it creates nothing.
            let primary = device.primary_context()?;
            if primary.raw() == raw {
                return Ok(Some(primary));
            }
        }
        let known = SEPARATE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(inner) = known
            .iter()
            .filter_map(Weak::upgrade)
            .find(|c| c.raw == raw)
        {
            return Ok(Some(Context { inner }));
        }
        Err(CudaError::ForeignContext {
            device: device.ordinal(),
        })
    }

    fn wrap(raw: CUcontext, device: &CudaDevice, primary: bool) -> Context {
        Context {
            inner: Arc::new(ContextInner {
                raw,
                device: device.clone(),
                primary,
                sticky: OnceLock::new(),
                silenced: AtomicUsize::new(0),
            }),
        }
    }

    /// Makes this context current on the calling thread. Cheap when it
    /// already is: the driver's own record is asked (`cuCtxGetCurrent`, a
    /// thread-local read), never a copy of it, so a context changed behind
    /// cuda-api's back (the thin layer's safe `driver::ctx_pop_current`,
    /// cudarc's `bind_to_thread`, the runtime API) cannot leave work in the
    /// wrong context.
    ///
    /// # Errors
    ///
    /// [`CudaError::Driver`] when the driver cannot read or set the current
    /// context (after a sticky error, every call fails this way).
    #[inline]
    pub fn bind(&self) -> CudaResult<()> {
        if driver::ctx_get_current()? == self.inner.raw {
            return Ok(());
        }
        // SAFETY: `self.inner.raw` is this context, alive while `self` is.
        unsafe { driver::ctx_set_current(self.inner.raw) }
    }

    /// The raw handle.
    pub fn raw(&self) -> CUcontext {
        self.inner.raw
    }

    /// The device.
    pub fn device(&self) -> &CudaDevice {
        &self.inner.device
    }

    /// Whether this is the device's primary context.
    pub fn is_primary(&self) -> bool {
        self.inner.primary
    }

    /// Waits for all work in the context.
    ///
    /// # Errors
    ///
    /// [`CudaError::Driver`] with the first failure of queued work
    /// (`cuCtxSynchronize`); a sticky one is also kept as the context's
    /// [`Context::sticky_error`].
    pub fn synchronize(&self) -> CudaResult<()> {
        self.bind()?;
        driver::ctx_synchronize().map_err(|e| self.note(e))
    }

    /// The first sticky error this context saw (from a synchronisation, or
    /// from releasing a resource), if any. After one, every call on the
    /// context fails; the process must be restarted to use the device again.
    pub fn sticky_error(&self) -> Option<&CudaError> {
        self.inner.sticky.get()
    }

    /// Records `e` as the context's sticky error when it is the first one;
    /// returns it unchanged.
    pub(crate) fn note(&self, e: CudaError) -> CudaError {
        if e.is_sticky() {
            let _ = self.inner.sticky.set(e.clone());
        }
        e
    }

    /// Reports a failure to release `what` in `Drop` (where it cannot be
    /// returned), through the `log` crate, never panicking. After a sticky
    /// error, the first failure logs one line for the whole context and
    /// later ones are counted silently: one fault, one line.
    pub(crate) fn report_release_error(&self, what: &str, e: &CudaError) {
        if e.is_sticky() || self.inner.sticky.get().is_some() {
            let first = self.inner.sticky.set(e.clone()).is_ok();
            let n = self.inner.silenced.fetch_add(1, Ordering::Relaxed);
            if first || n == 0 {
                log::error!(
                    "{self} is unusable after a sticky error ({}); releasing its resources fails from here on and is not reported again (Context::sticky_error holds the error)",
                    self.inner.sticky.get().unwrap_or(e)
                );
            }
            return;
        }
        log::warn!("releasing a {what} in {self} failed: {e}");
    }
}
