//! candle tensors as arrays, without copying (feature `candle`; CUDA
//! tensors with feature `candle-cuda`, which builds candle's CUDA kernels
//! with nvcc). The array's storage holds a clone of the tensor, so candle's
//! memory lives as long as the array does.

use crate::abi::DType;
use crate::array::Array;
use crate::error::{Error, Result};

fn interop(what: &'static str, message: String) -> Error {
    Error::Interop {
        call: "Array::from_candle",
        what,
        message,
    }
}

/// The Warp dtype of a candle dtype (candle's 8-, 6- and 4-bit float
/// formats have none).
fn warp_dtype(d: candle_core::DType) -> Option<&'static DType> {
    use candle_core::DType as C;
    Some(match d {
        C::U8 => DType::UINT8,
        C::U32 => DType::UINT32,
        C::I16 => DType::INT16,
        C::I32 => DType::INT32,
        C::I64 => DType::INT64,
        C::BF16 => DType::BFLOAT16,
        C::F16 => DType::FLOAT16,
        C::F32 => DType::FLOAT32,
        C::F64 => DType::FLOAT64,
        _ => return None,
    })
}

/// The array shape and byte strides of a candle layout (strides in
/// elements; a 0-d tensor is one element of shape `[1]`), and the byte
/// offset of its first element.
fn layout(
    dims: &[usize],
    stride: &[usize],
    start: usize,
    size: usize,
) -> Result<(Vec<usize>, Vec<isize>, usize)> {
    if dims.is_empty() {
        return Ok((vec![1], vec![size as isize], start.saturating_mul(size)));
    }
    let mut strides = Vec::with_capacity(stride.len());
    for (axis, &s) in stride.iter().enumerate() {
        let b = s
            .checked_mul(size)
            .and_then(|b| isize::try_from(b).ok())
            .ok_or_else(|| {
                interop(
                    "strides",
                    format!(
                        "axis {axis} has an element stride of {s}, whose bytes do not fit isize"
                    ),
                )
            })?;
        strides.push(b);
    }
    let offset = start.checked_mul(size).ok_or_else(|| {
        interop(
            "offset",
            format!("start offset {start} elements does not fit usize bytes"),
        )
    })?;
    Ok((dims.to_vec(), strides, offset))
}

impl Array {
    /// A candle CUDA tensor as an array, without copying: same dtype
    /// (`u8`, `u32`, `i16`, `i32`, `i64`, `bf16`, `f16`, `f32`, `f64`),
    /// shape and strides (candle's element strides become byte strides,
    /// its start offset the first element), on `cuda:<ordinal>`. The
    /// array's storage holds a clone of the tensor, so candle's memory
    /// lives until the last array, view or recorded launch that uses it
    /// drops and its queued work is done. candle's stream is synchronised
    /// first, so its pending writes are visible to launches on any stream.
    ///
    /// Arrays are writable and candle treats tensors as immutable: a
    /// launch that writes the array changes every tensor that shares the
    /// storage. CPU tensors are refused (a Rust reference in candle could
    /// alias the writes): copy them with `Array::from_slice`.
    ///
    /// Built only with feature `candle-cuda` can a tensor be on CUDA; with
    /// `candle` alone every tensor is refused for its device.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dev = candle_core::Device::new_cuda(0)?;
    /// let t = candle_core::Tensor::arange(0f32, 6.0, &dev)?.reshape((2, 3))?;
    /// let a = warp_launch::Array::from_candle(&t.t()?)?; // the transpose: strided
    /// assert_eq!(a.shape(), &[3, 2]);
    /// assert_eq!(a.to_vec::<f32>()?, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Interop`] for a dtype Warp has no type for (`"dtype"`), a
    /// CPU or Metal tensor (`"device"`), a stride whose bytes overflow, or
    /// a candle stream that cannot be synchronised (`"stream"`);
    /// [`Error::Shape`] for more than 4 dimensions or extents and strides
    /// above `int32`; [`Error::Cuda`] when the driver cannot say where the
    /// memory is.
    pub fn from_candle(tensor: &candle_core::Tensor) -> Result<Array> {
        let dtype = warp_dtype(tensor.dtype()).ok_or_else(|| {
            interop(
                "dtype",
                format!(
                    "candle's {:?} has no Warp type; convert the tensor to one of u8, u32, i16, i32, i64, bf16, f16, f32, f64",
                    tensor.dtype()
                ),
            )
        })?;
        let l = tensor.layout();
        let plan = layout(l.dims(), l.stride(), l.start_offset(), dtype.size)?;
        match tensor.device() {
            #[cfg(feature = "candle-cuda")]
            candle_core::Device::Cuda(_) => from_cuda(tensor, dtype, plan),
            other => {
                drop(plan);
                Err(interop(
                    "device",
                    format!(
                        "the tensor is on {:?}; only candle CUDA tensors are shared (build with the candle-cuda feature); copy a CPU tensor with Array::from_slice(\"cpu\", &tensor.flatten_all()?.to_vec1()?, shape)",
                        other.location()
                    ),
                ))
            }
        }
    }
}

#[cfg(feature = "candle-cuda")]
fn from_cuda(
    tensor: &candle_core::Tensor,
    dtype: &'static DType,
    (shape, strides, offset): (Vec<usize>, Vec<isize>, usize),
) -> Result<Array> {
    use candle_core::cuda::cudarc::driver::DevicePtr as _;
    use std::sync::Arc;
    let (storage, _) = tensor.storage_and_layout();
    let candle_core::Storage::Cuda(cs) = &*storage else {
        return Err(interop(
            "device",
            "a CUDA tensor without CUDA storage".into(),
        ));
    };
    macro_rules! base {
        ($($t:ty),*) => {
            match tensor.dtype() {
                $(d if d == <$t as candle_core::WithDType>::DTYPE => {
                    let s = cs
                        .as_cuda_slice::<$t>()
                        .map_err(|e| interop("dtype", e.to_string()))?;
                    let (ptr, _record) = s.device_ptr(s.stream());
                    (ptr, s.ordinal(), s.stream().clone())
                })*
                d => return Err(interop("dtype", format!("{d:?}"))),
            }
        };
    }
    let (base, ordinal, stream) = base!(u8, u32, i16, i32, i64, half::bf16, half::f16, f32, f64);
    stream.synchronize().map_err(|e| {
        interop(
            "stream",
            format!("waiting for candle's work on the tensor failed ({e})"),
        )
    })?;
    drop(storage);
    let address = base + offset as u64;
    // SAFETY: the tensor clone, held as the owner, keeps candle's CUDA
    // storage (a cudarc slice in the primary context of `ordinal`, which
    // candle makes with CudaContext::new) alive; the view is the tensor's
    // own layout inside it, checked against the driver's allocation; its
    // pending work is done.
    unsafe {
        Array::from_external(
            crate::device::Device::Cuda(ordinal as i32),
            address,
            dtype,
            &shape,
            Some(&strides),
            Arc::new(tensor.clone()),
            "Array::from_candle",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candle_dtypes_map_to_warp_scalars_and_mx_formats_are_refused() {
        use candle_core::DType as C;
        assert!(std::ptr::eq(warp_dtype(C::F32).unwrap(), DType::FLOAT32));
        assert!(std::ptr::eq(warp_dtype(C::BF16).unwrap(), DType::BFLOAT16));
        assert!(warp_dtype(C::F8E4M3).is_none());
        assert!(warp_dtype(C::F4).is_none());
    }

    #[test]
    fn a_candle_layout_becomes_byte_strides_and_offset() {
        let (shape, strides, offset) = layout(&[3, 2], &[1, 3], 2, 4).unwrap();
        assert_eq!((shape, strides, offset), (vec![3, 2], vec![4, 12], 8));
        let (shape, strides, offset) = layout(&[], &[], 5, 8).unwrap();
        assert_eq!((shape, strides, offset), (vec![1], vec![8], 40));
        let m = layout(&[2], &[usize::MAX / 2], 0, 4)
            .unwrap_err()
            .to_string();
        assert!(m.starts_with("Array::from_candle: strides: axis 0"), "{m}");
    }

    #[test]
    fn a_cpu_tensor_is_refused_naming_its_device() {
        let t = candle_core::Tensor::new(&[1f32, 2.0, 3.0], &candle_core::Device::Cpu).unwrap();
        let m = Array::from_candle(&t).unwrap_err().to_string();
        assert!(
            m.starts_with("Array::from_candle: device: the tensor is on Cpu"),
            "{m}"
        );
        let t = t.to_dtype(candle_core::DType::F8E4M3).unwrap();
        let m = Array::from_candle(&t).unwrap_err().to_string();
        assert!(
            m.starts_with("Array::from_candle: dtype: candle's F8E4M3"),
            "{m}"
        );
    }
}
