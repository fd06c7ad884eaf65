//! Reinterpreting views of plain data: a buffer or view of `T` seen as
//! values of another plain type `U` (`f32` as `[f32; 4]` for a kernel that
//! reads `float4`, bytes as `u32`), the way `bytemuck::cast_slice` does on the
//! host. The new view keeps the borrow, the allocation and its ordering; its
//! length counts `U`s, so the bounds declared on a kernel are checked in
//! those.

use std::any::type_name;

use crate::error::{CudaError, CudaResult};
use crate::memory::{DeviceBuffer, DeviceRepr, DeviceView, DeviceViewMut};

// Sealed on purpose: only the types below are plain data for casting.
#[allow(unnameable_types)]
mod sealed {
    /// Implemented by cuda-api for the types of [`Plain`](super::Plain) only.
    pub trait Sealed {}
}

/// Plain data that may be viewed as other plain data: no padding bytes and
/// every bit pattern a valid value, so any bytes a kernel writes as one
/// `Plain` type read back as valid values of another. Implemented by
/// cuda-api for the primitive numbers (`u8` to `u64`, `i8` to `i64`,
/// `usize`, `isize`, `f32`, `f64`) and arrays of them (`[f32; 4]` for a
/// `float4`); sealed.
///
/// # Safety
///
/// Implemented only inside cuda-api: the type has no padding and is valid
/// for every bit pattern.
pub unsafe trait Plain: DeviceRepr + sealed::Sealed {}

macro_rules! plain {
    ($($t:ty),*) => { $(
        impl sealed::Sealed for $t {}
        // SAFETY: primitive numbers have no padding and every bit pattern is a value.
        unsafe impl Plain for $t {}
    )* };
}
plain!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);
impl<T: Plain, const N: usize> sealed::Sealed for [T; N] {}
// SAFETY: an array of padding-free, always-valid values has no padding and
// every bit pattern is N values.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

/// The alignment a kernel reading `U` needs: Rust's, raised to CUDA's
/// for vector types of `U`'s size. CUDA aligns `char2`, `short2`,
/// `float2`/`int2`, `float4`/`int4`/`double2`/`longlong2` and
/// `double4_32a` to their size (2, 4, 8, 16, 32 bytes), while `[f32; 4]`
/// has Rust's alignment 4: a `float4` load from an address that is not a
/// multiple of 16 is a sticky `CUDA_ERROR_MISALIGNED_ADDRESS` that ends the
/// context. So a view as `U` must start at the largest power of two (up to
/// 32) that divides `U`'s size (`float3`, 12 bytes: 4).
pub(crate) fn cuda_align<U>() -> usize {
    let size = size_of::<U>();
    let vector = if size == 0 {
        1
    } else {
        (1usize << size.trailing_zeros()).min(32)
    };
    vector.max(align_of::<U>())
}

/// How many `U`s the `len` values of `T` at `addr` are; refused when
/// `U` is empty, the bytes do not split into whole `U`s, or `addr` is not
/// aligned for `U` as CUDA aligns a vector of its size ([`cuda_align`]).
fn cast_len<T: Plain, U: Plain>(call: &'static str, addr: u64, len: usize) -> CudaResult<usize> {
    let (t, u) = (type_name::<T>(), type_name::<U>());
    let refuse = |what: String| Err(CudaError::invalid_argument(call, "U", what));
    let (size, align) = (size_of::<U>(), cuda_align::<U>());
    // Fits: the view's bytes were allocated.
    let bytes = len * size_of::<T>();
    if size == 0 {
        return refuse(format!(
            "{u} has no bytes, so {len} {t} cannot be counted in it; view as a type of at least one byte"
        ));
    }
    if !bytes.is_multiple_of(size) {
        return refuse(format!(
            "{len} {t} are {bytes} bytes, not a whole number of {u} ({size} bytes each); slice the view to a multiple of {size} bytes first"
        ));
    }
    if !addr.is_multiple_of(align as u64) {
        return refuse(format!(
            "the view starts at {addr:#x}, which is not aligned for {u} (alignment {align}: CUDA aligns a vector type such as float4 to its size); start the view at a multiple of {align} bytes"
        ));
    }
    Ok(bytes / size)
}

impl<'a, T: Plain> DeviceView<'a, T> {
    /// The same memory as values of `U`: `len * size_of::<T>() /
    /// size_of::<U>()` of them.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] (call `DeviceView::cast`) when the
    /// bytes are not a whole number of `U`s or the view's address is not
    /// aligned for `U`.
    pub fn cast<U: Plain>(self) -> CudaResult<DeviceView<'a, U>> {
        let len = cast_len::<T, U>("DeviceView::cast", self.addr(), self.len())?;
        Ok(self.retyped(len))
    }
}

impl<'a, T: Plain> DeviceViewMut<'a, T> {
    /// The same memory, writable, as values of `U` (see [`DeviceView::cast`]).
    ///
    /// # Errors
    ///
    /// As for [`DeviceView::cast`] (call `DeviceViewMut::cast`).
    pub fn cast<U: Plain>(self) -> CudaResult<DeviceViewMut<'a, U>> {
        let len = cast_len::<T, U>("DeviceViewMut::cast", self.addr(), self.len())?;
        Ok(self.retyped(len))
    }
}

impl<T: Plain> DeviceBuffer<T> {
    /// The whole buffer, read-only, as values of `U` (a `DeviceBuffer<f32>`
    /// of 4n values as n `[f32; 4]`).
    ///
    /// # Errors
    ///
    /// As for [`DeviceView::cast`] (call `DeviceBuffer::view_as`).
    pub fn view_as<U: Plain>(&self) -> CudaResult<DeviceView<'_, U>> {
        let v = self.view();
        let len = cast_len::<T, U>("DeviceBuffer::view_as", v.addr(), v.len())?;
        Ok(v.retyped(len))
    }

    /// The whole buffer, writable, as values of `U`.
    ///
    /// # Errors
    ///
    /// As for [`DeviceView::cast`] (call `DeviceBuffer::view_as_mut`).
    pub fn view_as_mut<U: Plain>(&mut self) -> CudaResult<DeviceViewMut<'_, U>> {
        let len = self.len();
        let v = self.slice_mut(0..len)?;
        let n = cast_len::<T, U>("DeviceBuffer::view_as_mut", v.addr(), v.len())?;
        Ok(v.retyped(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_count_the_new_type() {
        assert_eq!(cast_len::<f32, [f32; 4]>("c", 0x1000, 1024), Ok(256));
        assert_eq!(cast_len::<u8, u32>("c", 0x1000, 12), Ok(3));
        assert_eq!(cast_len::<[f32; 4], f32>("c", 0x1010, 3), Ok(12));
        assert_eq!(cast_len::<u8, u64>("c", 0x1000, 0), Ok(0));
        // float3 (12 bytes) needs 4; float4 at a multiple of 16 is fine.
        assert_eq!(cast_len::<f32, [f32; 3]>("c", 0x1004, 3), Ok(1));
        assert_eq!(cast_len::<f32, [f32; 4]>("c", 0x1010, 4), Ok(1));
        assert_eq!(
            [
                cuda_align::<[f32; 4]>(),
                cuda_align::<[f32; 2]>(),
                cuda_align::<[f32; 3]>()
            ],
            [16, 8, 4]
        );
        assert_eq!(
            [
                cuda_align::<[f64; 4]>(),
                cuda_align::<[u8; 2]>(),
                cuda_align::<u64>()
            ],
            [32, 2, 8]
        );
    }

    #[test]
    fn lengths_and_alignments_that_do_not_fit_are_refused_with_the_numbers() {
        let e = cast_len::<f32, [f32; 4]>("DeviceBuffer::view_as", 0x1000, 1023).unwrap_err();
        assert_eq!(
            e.to_string(),
            "DeviceBuffer::view_as: argument `U`: 1023 f32 are 4092 bytes, not a whole number of [f32; 4] (16 bytes each); slice the view to a multiple of 16 bytes first"
        );
        let e = cast_len::<u8, u32>("DeviceView::cast", 0x1001, 8).unwrap_err();
        assert!(
            e.to_string()
                .contains("starts at 0x1001, which is not aligned for u32 (alignment 4"),
            "{e}"
        );
        // CUDA's vector alignment, not Rust's: a float4 view 4 bytes in.
        let e = cast_len::<f32, [f32; 4]>("DeviceView::cast", 0x1004, 1020).unwrap_err();
        assert!(
            e.to_string()
                .contains("starts at 0x1004, which is not aligned for [f32; 4] (alignment 16"),
            "{e}"
        );
        let e = cast_len::<f64, [f64; 2]>("DeviceView::cast", 0x1008, 2).unwrap_err();
        assert!(e.to_string().contains("(alignment 16"), "{e}");
        let e = cast_len::<f32, [f32; 2]>("DeviceView::cast", 0x1004, 2).unwrap_err();
        assert!(e.to_string().contains("(alignment 8"), "{e}");
        let e = cast_len::<u8, [u8; 0]>("DeviceView::cast", 0x1000, 8).unwrap_err();
        assert!(e.to_string().contains("has no bytes"), "{e}");
    }
}
