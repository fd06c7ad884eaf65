//! Zero-copy exchange with cudarc (feature `cudarc`): a cudarc
//! [`CudaSlice`] becomes an [`Array`] that owns it
//! ([`Array::from_cudarc`]), and a CUDA array lends its memory to cudarc as
//! a [`CudarcSlice`] that keeps the array's storage alive
//! ([`Array::to_cudarc`]).

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaViewMut, DevicePtr as _};

use crate::abi::Element;
use crate::array::Array;
use crate::device::Device;
use crate::error::{Error, Result};

/// Refuses a shape that does not hold exactly `len` elements.
fn check_len(len: usize, shape: &[usize], call: &'static str) -> Result<()> {
    let n = shape.iter().try_fold(1usize, |a, &e| a.checked_mul(e));
    if n != Some(len) {
        return Err(Error::Interop {
            call,
            what: "shape",
            message: format!(
                "shape {shape:?} holds {} elements but the slice has {len}; pass a shape of {len} elements",
                n.map_or_else(|| "more than usize::MAX".to_string(), |n| n.to_string())
            ),
        });
    }
    Ok(())
}

/// Refuses a cudarc context other than the primary context of its device
/// (the only context arrays use).
fn check_context(ctx: &Arc<cudarc::driver::CudaContext>, call: &'static str) -> Result<()> {
    cuda_api::Context::from_cudarc(ctx).map_err(|e| Error::Interop {
        call,
        what: "context",
        message: format!(
            "arrays live in the primary context of cuda:{}, and this cudarc context is not it ({e}); make it with CudaContext::new",
            ctx.ordinal()
        ),
    })?;
    Ok(())
}

/// Ends the loan of `alloc` to cudarc, whose work on it ends on `stream`
/// ([`cuda_api::Allocation::end_loan`]). `to_cudarc` checked that the
/// stream is of the memory's context; should the driver not confirm it
/// now, the context is synchronised first and the loan ends on a new
/// stream of it (every borrowed use is then done). Should that fail too,
/// the memory stays lent, and later uses are refused rather than
/// unordered.
///
/// # Safety
///
/// As [`cuda_api::Allocation::end_loan`].
unsafe fn end_loan_on(alloc: &cuda_api::Allocation, stream: Arc<cudarc::driver::CudaStream>) {
    let borrower = cuda_api::Stream::from_cudarc(alloc.context(), stream).or_else(|_| {
        alloc.context().synchronize()?;
        cuda_api::Stream::new(alloc.context())
    });
    match borrower {
        // SAFETY: the caller's promise.
        Ok(b) => unsafe { alloc.end_loan(&b) },
        Err(e) => log::warn!(
            "ending the loan of {} bytes at {:#x} to cudarc failed ({e}); the memory stays lent, and warp-launch refuses work on it",
            alloc.bytes(),
            alloc.device_address()
        ),
    }
}

impl Array {
    /// The memory of a cudarc slice as an array of `shape` (row-major),
    /// without copying: the array's storage owns `slice` and drops it (so
    /// cudarc frees the memory, in its stream's order) after the last
    /// array, view or recorded launch that uses it, once the work queued
    /// on it is done. The element type is `T`'s dtype.
    ///
    /// cudarc's pending writes to the slice are waited for first (its
    /// stream is synchronised), so launches on any stream see them.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use cudarc::driver::CudaContext;
    /// use warp_launch::Array;
    /// let stream = CudaContext::new(0)?.default_stream();
    /// let slice = stream.clone_htod(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// let a = Array::from_cudarc(slice, &[2, 3])?; // the slice moves in: no copy
    /// assert_eq!(a.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Interop`] when `shape` does not hold `slice.len()` elements
    /// (`what` is `"shape"`), the slice's context is not its device's
    /// primary context (`"context"`), or its stream cannot be synchronised
    /// (`"stream"`); [`Error::Shape`] for a shape no array has (more than 4
    /// dimensions, an extent above `int32`); [`Error::Cuda`] when the
    /// driver cannot say where the memory is.
    pub fn from_cudarc<T: Element + cudarc::driver::DeviceRepr>(
        slice: CudaSlice<T>,
        shape: &[usize],
    ) -> Result<Array> {
        let call = "Array::from_cudarc";
        check_len(slice.len(), shape, call)?;
        check_context(slice.context(), call)?;
        let address = {
            // Orders cudarc's stream after the slice's last write.
            let (ptr, _record) = slice.device_ptr(slice.stream());
            ptr
        };
        slice.stream().synchronize().map_err(|e| Error::Interop {
            call,
            what: "stream",
            message: format!(
                "waiting for cudarc's work on the slice failed ({e}); the context may hold a sticky error"
            ),
        })?;
        let device = Device::Cuda(slice.ordinal() as i32);
        // SAFETY: the slice, moved into the owner, holds `len` values of T
        // at `address` in the primary context of `device` for as long as
        // it lives; it was moved in, so no other cudarc handle writes it,
        // and its pending work is done.
        unsafe {
            Array::from_external(
                device,
                address,
                T::DTYPE,
                shape,
                None,
                Arc::new(slice),
                call,
            )
        }
    }

    /// Lends this array's memory to cudarc without copying: a
    /// [`CudarcSlice`] that derefs to a [`CudaSlice<T>`] on `stream` and
    /// keeps the array's storage alive until it drops; it never frees the
    /// memory. The array must be a contiguous CUDA array of `T`'s dtype on
    /// `stream`'s device.
    ///
    /// Ordering, both ways, without the caller's help:
    ///
    /// - **Before the loan.** Work queued on the array (launches and
    ///   operations on any stream, a pool array's zeroing) is waited for on
    ///   the host before the slice is made, so cudarc sees it on every
    ///   stream.
    /// - **During the loan.** While the slice lives, every launch, replay,
    ///   graph launch and stream-ordered operation of this crate on the
    ///   array's storage (this array, its views, its other handles) is
    ///   refused with [`Error::Lent`] ([`cuda_api::Allocation::lend`]).
    ///   Ordering such work after the fact is not possible: cudarc 0.19
    ///   keeps a slice's read and write events to itself, so an event this
    ///   crate recorded could make only the slice's own stream wait, while
    ///   cudarc may read the slice from any of its streams. Refusing keeps
    ///   one rule that covers them all. Blocking host reads and writes stay
    ///   allowed: they synchronise the device's context (the storage is
    ///   marked shared, [`cuda_api::Allocation::share`]), cudarc's work
    ///   included.
    /// - **After the loan.** Dropping the slice orders later work of this
    ///   crate on the array, on any stream, after cudarc's work on the
    ///   slice: cudarc's drop of the slice makes its stream wait for the
    ///   slice's last uses on other cudarc streams (with cudarc's event
    ///   tracking on, its default), and this crate's next use of the array
    ///   on another stream waits for an event recorded on that stream then.
    ///
    /// To interleave the two crates' work, drop the slice and lend again
    /// (each loan waits for the array's queued work on the host).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use cudarc::driver::CudaContext;
    /// use warp_launch::Array;
    /// let stream = CudaContext::new(0)?.default_stream();
    /// let a = Array::from_slice("cuda:0", &[1i32, 2, 3], &[3])?;
    /// let s = a.to_cudarc::<i32>(&stream)?;
    /// assert_eq!(stream.clone_dtoh(&*s)?, vec![1, 2, 3]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotCuda`] for an array on the CPU; [`Error::ElementType`]
    /// when `T` is not the array's dtype; [`Error::Interop`] for an array
    /// that is not contiguous (`"strides"`), a stream of another device
    /// (`"device"`) or of a context other than the primary one
    /// (`"context"`), or memory that is not CUDA memory (`"memory"`);
    /// [`Error::Cuda`] when waiting for the array's queued work fails.
    /// Work of this crate on the array while the slice lives:
    /// [`Error::Lent`].
    pub fn to_cudarc<T: Element + cudarc::driver::DeviceRepr>(
        &self,
        stream: &Arc<CudaStream>,
    ) -> Result<CudarcSlice<T>> {
        let call = "Array::to_cudarc";
        let Device::Cuda(ordinal) = self.device() else {
            return Err(Error::NotCuda {
                call,
                device: self.device(),
            });
        };
        if !std::ptr::eq(self.dtype(), T::DTYPE) {
            return Err(Error::ElementType {
                call,
                array: self.dtype().name,
                requested: T::DTYPE.name,
                rust: std::any::type_name::<T>(),
            });
        }
        if !self.is_contiguous() {
            return Err(Error::Interop {
                call,
                what: "strides",
                message: format!(
                    "a cudarc slice is contiguous but the array has shape {:?} and byte strides {:?}; copy it into a contiguous array first",
                    self.shape(),
                    self.strides()
                ),
            });
        }
        if stream.context().ordinal() != ordinal as usize {
            return Err(Error::Interop {
                call,
                what: "device",
                message: format!(
                    "the array is on cuda:{ordinal} but the stream on cuda:{}; pass a stream of cuda:{ordinal}",
                    stream.context().ordinal()
                ),
            });
        }
        check_context(stream.context(), call)?;
        let Some(alloc) = self.storage().allocation() else {
            return Err(Error::Interop {
                call,
                what: "memory",
                message: format!(
                    "the array's memory is {}, not CUDA memory; make the array with a CUDA memory kind",
                    self.memory()
                ),
            });
        };
        // Lent first, then waited for: a use noted after this is refused,
        // and the wait covers every one noted before.
        alloc.lend();
        if let Err(e) = alloc.wait_idle() {
            // SAFETY: nothing was lent out; no borrower queued work.
            unsafe { end_loan_on(alloc, stream.clone()) };
            return Err(e.into());
        }
        // SAFETY: the array's storage, held by the returned value, keeps
        // `len` contiguous values of T at the data address alive in the
        // primary context of the stream's device; the slice is never
        // dropped as a CudaSlice (it is leaked on drop), so cudarc never
        // frees memory it does not own.
        let slice = unsafe { stream.upgrade_device_ptr::<T>(self.data_address(), self.len()) };
        Ok(CudarcSlice {
            slice: ManuallyDrop::new(slice),
            array: self.clone(),
        })
    }
}

/// An array's memory lent to cudarc ([`Array::to_cudarc`]): derefs to a
/// [`CudaSlice<T>`] for cudarc's copies and launches (writable through
/// [`CudarcSlice::as_view_mut`]); holds the array, so its storage lives at
/// least as long. While it lives, this crate's stream work on the storage
/// is refused ([`Error::Lent`]); dropping it ends the loan, orders later
/// work after cudarc's, and never frees the memory.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cudarc::driver::CudaContext;
/// use warp_launch::Array;
/// let stream = CudaContext::new(0)?.default_stream();
/// let a = Array::zeros::<f32>("cuda:0", &[4])?;
/// let mut s = a.to_cudarc::<f32>(&stream)?;
/// stream.memcpy_htod(&[1.0f32, 2.0, 3.0, 4.0], &mut s.as_view_mut())?;
/// drop(s);
/// assert_eq!(a.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
/// # Ok(()) }
/// ```
pub struct CudarcSlice<T> {
    slice: ManuallyDrop<CudaSlice<T>>,
    array: Array,
}

impl<T> CudarcSlice<T> {
    /// A writable cudarc view of the whole slice (a `&mut CudaSlice` is
    /// not handed out: swapping it would let cudarc free memory it does
    /// not own).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let stream = cudarc::driver::CudaContext::new(0)?.default_stream();
    /// let a = warp_launch::Array::zeros::<u32>("cuda:0", &[8])?;
    /// let mut s = a.to_cudarc::<u32>(&stream)?;
    /// stream.memset_zeros(&mut s.as_view_mut())?;
    /// # Ok(()) }
    /// ```
    pub fn as_view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.slice.as_view_mut()
    }

    /// The array whose memory this is.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let stream = cudarc::driver::CudaContext::new(0)?.default_stream();
    /// let a = warp_launch::Array::zeros::<u32>("cuda:0", &[8])?;
    /// assert_eq!(a.to_cudarc::<u32>(&stream)?.array().shape(), &[8]);
    /// # Ok(()) }
    /// ```
    pub fn array(&self) -> &Array {
        &self.array
    }
}

impl<T> Deref for CudarcSlice<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.slice
    }
}

impl<T> std::fmt::Debug for CudarcSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudarcSlice({:?})", self.array)
    }
}

impl<T> Drop for CudarcSlice<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; the field is not used again.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        let stream = slice.stream().clone();
        // Orders cudarc's stream after the slice's reads and writes, and
        // gives the memory back without freeing it.
        let _ = slice.leak();
        if let Some(a) = self.array.storage().allocation() {
            // cudarc's work may still run: host reads and the free wait for it.
            a.record_use();
            // SAFETY: one loan, taken by `to_cudarc` for this slice, which
            // is gone: cudarc no longer reaches the memory, and its stream
            // was just ordered after the slice's last uses.
            unsafe { end_loan_on(a, stream) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_must_hold_the_slice_exactly() {
        assert!(check_len(6, &[2, 3], "t").is_ok());
        let m = check_len(6, &[4], "Array::from_cudarc")
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("Array::from_cudarc: shape:")
                && m.contains("4 elements")
                && m.contains("has 6"),
            "{m}"
        );
        let m = check_len(6, &[usize::MAX, 2], "t").unwrap_err().to_string();
        assert!(m.contains("more than usize::MAX"), "{m}");
    }
}
