//! Interop with cudarc (feature `cudarc`): its context, stream, slices and
//! functions become cuda-api values without copying, so a program that already
//! holds cudarc objects can launch validated, typed kernels on them.

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr as _, DevicePtrMut as _, SyncOnDrop,
};

use crate::context::Context;
use crate::device::CudaDevice;
use crate::error::{CudaError, CudaResult};
use crate::function::Function;
use crate::memory::{DeviceRepr, DeviceView, DeviceViewMut};
use crate::stream::Stream;

impl Context {
    /// The cuda-api context for a cudarc context: both are the device's primary context.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when the cudarc context is not the
    /// device's primary context (make it with `CudaContext::new`), or the
    /// driver's failure to open the device or retain its primary context.
    pub fn from_cudarc(ctx: &Arc<CudaContext>) -> CudaResult<Context> {
        let ours = Context::primary(&CudaDevice::get(ctx.ordinal() as i32)?)?;
        if ours.raw().cast::<std::ffi::c_void>() != ctx.cu_ctx().cast::<std::ffi::c_void>() {
            return Err(CudaError::invalid_argument(
                "Context::from_cudarc",
                "ctx",
                "the cudarc context is not the device's primary context; create it with CudaContext::new".into(),
            ));
        }
        Ok(ours)
    }
}

impl Stream {
    /// Uses a cudarc stream (kept alive, not destroyed by cuda-api), after
    /// asking the driver which context the stream belongs to
    /// (`cuStreamGetCtx`): a stream of another context than `ctx` is
    /// refused, since work queued through the handle would be checked and
    /// ordered against the wrong context.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] naming both contexts when the stream
    /// is not of `ctx`; the driver's failure to answer.
    pub fn from_cudarc(ctx: &Context, stream: Arc<CudaStream>) -> CudaResult<Stream> {
        let raw: cuda_sys::CUstream = stream.cu_stream().cast();
        ctx.bind()?;
        // SAFETY: the Arc keeps the cudarc stream alive for the call.
        let owner = unsafe { crate::driver::stream_get_ctx(raw) }?;
        if owner != ctx.raw() {
            return Err(CudaError::invalid_argument(
                "Stream::from_cudarc",
                "stream",
                format!(
                    "the cudarc stream belongs to context {owner:p}, not to {ctx} ({:p}); pass the context the stream was made in (Context::from_cudarc of its CudaContext)",
                    ctx.raw()
                ),
            ));
        }
        // SAFETY: the Arc keeps the cudarc stream, a live stream of `ctx`
        // (just checked), alive.
        Ok(unsafe { Stream::borrow_raw_with_owner(ctx, raw, stream) })
    }
}

impl Function {
    /// Uses a cudarc function (its module stays loaded while this lives).
    pub fn from_cudarc(ctx: &Context, func: &CudaFunction, name: &str) -> Function {
        let raw = func.cu_function().cast();
        // SAFETY: the clone holds cudarc's module, loaded in the primary context `ctx`, which keeps `raw` loaded.
        unsafe { Function::from_raw(raw, name, ctx, Arc::new(func.clone())) }
    }
}

/// Borrows a cudarc slice as a cuda-api view for work on `stream`, without
/// copying. The returned cudarc guard records the use on `stream` for
/// cudarc's own ordering when dropped; keep it until the work is queued.
pub fn view<'a, T: DeviceRepr + cudarc::driver::DeviceRepr>(
    ctx: &'a Context,
    slice: &'a CudaSlice<T>,
    stream: &'a CudaStream,
) -> (DeviceView<'a, T>, SyncOnDrop<'a>) {
    let (ptr, guard) = slice.device_ptr(stream);
    // SAFETY: the slice holds `len` values of T in the primary context for 'a.
    (
        unsafe { DeviceView::from_raw_parts(ctx, ptr, slice.len()) },
        guard,
    )
}

/// Borrows a cudarc slice mutably as a writable cuda-api view for work on
/// `stream`; see [`cudarc_view`](crate::cudarc_view).
pub fn view_mut<'a, T: DeviceRepr + cudarc::driver::DeviceRepr>(
    ctx: &'a Context,
    slice: &'a mut CudaSlice<T>,
    stream: &'a CudaStream,
) -> (DeviceViewMut<'a, T>, SyncOnDrop<'a>) {
    let len = slice.len();
    let (ptr, guard) = slice.device_ptr_mut(stream);
    // SAFETY: the slice holds `len` values of T, borrowed mutably for 'a.
    (
        unsafe { DeviceViewMut::from_raw_parts(ctx, ptr, len) },
        guard,
    )
}
