//! Device memory: owned buffers, borrowed views, typed device pointers, and
//! host↔device copies (blocking, or asynchronous with a guard that waits).

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use cuda_sys::CUdeviceptr;

use crate::context::Context;
use crate::driver;
use crate::error::{Error, Result};
use crate::stream::Stream;

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

/// A typed device address, as a kernel receives it (8 bytes).
#[repr(transparent)]
pub struct DevicePtr<T> {
    raw: CUdeviceptr,
    _t: PhantomData<*mut T>,
}

impl<T> DevicePtr<T> {
    /// Wraps a raw device address.
    pub const fn from_raw(raw: CUdeviceptr) -> Self {
        DevicePtr {
            raw,
            _t: PhantomData,
        }
    }
    /// The raw address.
    pub const fn raw(self) -> CUdeviceptr {
        self.raw
    }
    /// The null device pointer.
    pub const fn null() -> Self {
        DevicePtr::from_raw(0)
    }
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}
impl<T> fmt::Debug for DevicePtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DevicePtr({:#x})", self.raw)
    }
}
// SAFETY: a device address is plain data.
unsafe impl<T> Send for DevicePtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for DevicePtr<T> {}

fn bytes_of<T>(len: usize, call: &'static str) -> Result<usize> {
    len.checked_mul(size_of::<T>()).ok_or_else(|| {
        Error::invalid_argument(
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
) -> Result<()> {
    if expected == given {
        Ok(())
    } else {
        Err(Error::invalid_argument(
            call,
            parameter,
            format!(
                "the device side has {expected} elements but the host slice has {given}; pass a slice of {expected} elements"
            ),
        ))
    }
}

/// An owned allocation of `len` values of `T` in device memory, freed on drop.
pub struct DeviceBuffer<T: DeviceRepr> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Context,
    _t: PhantomData<T>,
}

impl<T: DeviceRepr> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>({:#x}, len {})",
            std::any::type_name::<T>(),
            self.ptr,
            self.len
        )
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// `len` zeroed values.
    pub fn zeroed(ctx: &Context, len: usize) -> Result<Self> {
        let bytes = bytes_of::<T>(len, "DeviceBuffer::zeroed")?;
        ctx.bind()?;
        let ptr = if bytes == 0 {
            0
        } else {
            driver::mem_alloc(bytes)?
        };
        let buf = DeviceBuffer {
            ptr,
            len,
            ctx: ctx.clone(),
            _t: PhantomData,
        };
        if bytes > 0 {
            // SAFETY: `ptr` is a fresh allocation of `bytes` bytes.
            unsafe { driver::memset_d8(ptr, 0, bytes)? };
        }
        Ok(buf)
    }

    /// A copy of `data` (blocking).
    pub fn from_slice(ctx: &Context, data: &[T]) -> Result<Self> {
        let bytes = bytes_of::<T>(data.len(), "DeviceBuffer::from_slice")?;
        ctx.bind()?;
        let ptr = if bytes == 0 {
            0
        } else {
            driver::mem_alloc(bytes)?
        };
        let buf = DeviceBuffer {
            ptr,
            len: data.len(),
            ctx: ctx.clone(),
            _t: PhantomData,
        };
        if bytes > 0 {
            // SAFETY: both sides hold `bytes` bytes.
            unsafe { driver::memcpy_htod(ptr, data.as_ptr().cast::<c_void>(), bytes)? };
        }
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

    /// The device address of the first element.
    pub fn as_ptr(&self) -> DevicePtr<T> {
        DevicePtr::from_raw(self.ptr)
    }

    /// The context that owns the memory.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// A view of `range` (element indices).
    pub fn slice(&self, range: Range<usize>) -> Result<DeviceView<'_, T>> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::invalid_argument(
                "DeviceBuffer::slice",
                "range",
                format!("{range:?} is outside 0..{}", self.len),
            ));
        }
        Ok(DeviceView {
            ptr: self.ptr + (range.start * size_of::<T>()) as u64,
            len: range.len(),
            ctx: &self.ctx,
            _t: PhantomData,
        })
    }

    /// A view of the whole buffer.
    pub fn view(&self) -> DeviceView<'_, T> {
        DeviceView {
            ptr: self.ptr,
            len: self.len,
            ctx: &self.ctx,
            _t: PhantomData,
        }
    }

    /// Copies `src` into the buffer (blocking); lengths must match.
    pub fn copy_from(&mut self, src: &[T]) -> Result<()> {
        same_len("DeviceBuffer::copy_from", "src", self.len, src.len())?;
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both sides hold len * size_of::<T>() bytes.
        unsafe { driver::memcpy_htod(self.ptr, src.as_ptr().cast(), self.len * size_of::<T>()) }
    }

    /// Copies the buffer into `dst` (blocking); lengths must match.
    pub fn copy_to(&self, dst: &mut [T]) -> Result<()> {
        self.view().copy_to(dst)
    }

    /// The contents as a `Vec` (blocking).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.view().to_vec()
    }

    /// Queues a copy of `src` into the buffer on `stream`. The returned guard
    /// keeps `src` and the buffer borrowed and waits for the stream when
    /// dropped (or at [`PendingCopy::wait`]).
    pub fn copy_from_async<'a>(
        &'a mut self,
        src: &'a [T],
        stream: &'a Stream,
    ) -> Result<PendingCopy<'a>> {
        same_len("DeviceBuffer::copy_from_async", "src", self.len, src.len())?;
        self.ctx.bind()?;
        if self.len > 0 {
            // SAFETY: sizes match; the guard keeps both sides alive until the stream passes the copy.
            unsafe {
                driver::memcpy_htod_async(
                    self.ptr,
                    src.as_ptr().cast(),
                    self.len * size_of::<T>(),
                    stream.raw(),
                )?
            };
        }
        Ok(PendingCopy {
            stream,
            done: false,
            _borrow: PhantomData,
        })
    }

    /// Queues a copy of the buffer into `dst` on `stream`; see [`Self::copy_from_async`].
    pub fn copy_to_async<'a>(
        &'a self,
        dst: &'a mut [T],
        stream: &'a Stream,
    ) -> Result<PendingCopy<'a>> {
        same_len("DeviceBuffer::copy_to_async", "dst", self.len, dst.len())?;
        self.ctx.bind()?;
        if self.len > 0 {
            // SAFETY: sizes match; the guard keeps both sides alive until the stream passes the copy.
            unsafe {
                driver::memcpy_dtoh_async(
                    dst.as_mut_ptr().cast(),
                    self.ptr,
                    self.len * size_of::<T>(),
                    stream.raw(),
                )?
            };
        }
        Ok(PendingCopy {
            stream,
            done: false,
            _borrow: PhantomData,
        })
    }

    /// Sets every byte to `byte` (blocking).
    pub fn fill_bytes(&mut self, byte: u8) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the allocation holds len * size_of::<T>() bytes.
        unsafe { driver::memset_d8(self.ptr, byte, self.len * size_of::<T>()) }
    }

    /// Sets every element to `value` on `stream`, for 1-, 2- and 4-byte `T`.
    pub fn fill_async(&mut self, value: T, stream: &Stream) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        let s = stream.raw();
        // SAFETY: `value` is plain data of the matching width; the allocation holds len elements.
        unsafe {
            match size_of::<T>() {
                1 => driver::memset_d8_async(
                    self.ptr,
                    std::mem::transmute_copy::<T, u8>(&value),
                    self.len,
                    s,
                ),
                2 => driver::memset_d16_async(
                    self.ptr,
                    std::mem::transmute_copy::<T, u16>(&value),
                    self.len,
                    s,
                ),
                4 => driver::memset_d32_async(
                    self.ptr,
                    std::mem::transmute_copy::<T, u32>(&value),
                    self.len,
                    s,
                ),
                n => Err(Error::invalid_argument(
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

impl<T: DeviceRepr> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        // cuMemFree waits for work using the memory, so in-flight kernels are safe.
        let r = self.ctx.bind().and_then(|_| {
            // SAFETY: we own the allocation and free it once.
            unsafe { driver::mem_free(self.ptr) }
        });
        if let Err(e) = r {
            crate::report_drop_error("device buffer", &e);
        }
    }
}

/// A borrowed range of a [`DeviceBuffer`].
pub struct DeviceView<'a, T: DeviceRepr> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: &'a Context,
    _t: PhantomData<&'a T>,
}

impl<'a, T: DeviceRepr> DeviceView<'a, T> {
    /// A view of `len` elements at `ptr`, in `ctx`.
    ///
    /// # Safety
    ///
    /// `ptr` must address `len` initialised values of `T` in `ctx`, valid for `'a`.
    pub unsafe fn from_raw_parts(ctx: &'a Context, ptr: CUdeviceptr, len: usize) -> Self {
        DeviceView {
            ptr,
            len,
            ctx,
            _t: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device address of the first element.
    pub fn as_ptr(&self) -> DevicePtr<T> {
        DevicePtr::from_raw(self.ptr)
    }
    /// Copies the view into `dst` (blocking); lengths must match.
    pub fn copy_to(&self, dst: &mut [T]) -> Result<()> {
        same_len("DeviceView::copy_to", "dst", self.len, dst.len())?;
        if self.len == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: both sides hold len * size_of::<T>() bytes.
        unsafe { driver::memcpy_dtoh(dst.as_mut_ptr().cast(), self.ptr, self.len * size_of::<T>()) }
    }
    /// The contents as a `Vec` (blocking).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v: Vec<T> = Vec::with_capacity(self.len);
        if self.len > 0 {
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

/// An asynchronous copy in flight; waits for its stream when dropped.
#[must_use = "dropping the guard waits for the copy at once"]
pub struct PendingCopy<'a> {
    stream: &'a Stream,
    done: bool,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl PendingCopy<'_> {
    /// Waits for the stream and reports its outcome.
    pub fn wait(mut self) -> Result<()> {
        self.done = true;
        self.stream.synchronize()
    }
}

impl Drop for PendingCopy<'_> {
    fn drop(&mut self) {
        if !self.done
            && let Err(e) = self.stream.synchronize()
        {
            crate::report_drop_error("asynchronous copy", &e);
        }
    }
}
