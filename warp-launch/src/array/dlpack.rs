//! DLPack import and export (feature `dlpack`, through the `dlpark` crate),
//! without copying, as Warp's `wp.from_dlpack` / `wp.to_dlpack` do: a
//! vector, quaternion, transform or matrix dtype is its scalar type with
//! one (`rows`) or two (`rows, cols`) inner dimensions; DLPack strides are
//! in elements of the scalar type, array strides in bytes.

use std::sync::Arc;

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType};
use dlpark::metadata::Dynamic;
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};

use crate::abi::{DType, Kind, Scalar};
use crate::array::{Array, Memory};
use crate::device::Device;
use crate::error::{Error, Result};
use cuda_api::{MemoryKind, Stream};

/// The DLPack type of a Warp scalar.
fn dl_dtype(s: Scalar) -> DLDataType {
    let (code, bits) = match s {
        Scalar::Bool => (DLDataTypeCode::BOOL, 8),
        Scalar::Int8 => (DLDataTypeCode::INT, 8),
        Scalar::Int16 => (DLDataTypeCode::INT, 16),
        Scalar::Int32 => (DLDataTypeCode::INT, 32),
        Scalar::Int64 => (DLDataTypeCode::INT, 64),
        Scalar::UInt8 => (DLDataTypeCode::UINT, 8),
        Scalar::UInt16 => (DLDataTypeCode::UINT, 16),
        Scalar::UInt32 => (DLDataTypeCode::UINT, 32),
        Scalar::UInt64 => (DLDataTypeCode::UINT, 64),
        Scalar::Float16 => (DLDataTypeCode::FLOAT, 16),
        Scalar::BFloat16 => (DLDataTypeCode::BFLOAT, 16),
        Scalar::Float32 => (DLDataTypeCode::FLOAT, 32),
        Scalar::Float64 => (DLDataTypeCode::FLOAT, 64),
        // A scalar this crate does not know (warp-proof's enums are
        // `#[non_exhaustive]`): opaque bytes of its size.
        other => (DLDataTypeCode::OPAQUEHANDLE, 8 * other.size() as u8),
    };
    DLDataType::scalar(code, bits)
}

/// The Warp scalar dtype of a DLPack type, if any.
fn scalar_dtype(t: DLDataType) -> Option<&'static DType> {
    if t.lanes != 1 {
        return None;
    }
    Some(match (t.code, t.bits) {
        (DLDataTypeCode::BOOL, 8) => DType::BOOL,
        (DLDataTypeCode::INT, 8) => DType::INT8,
        (DLDataTypeCode::INT, 16) => DType::INT16,
        (DLDataTypeCode::INT, 32) => DType::INT32,
        (DLDataTypeCode::INT, 64) => DType::INT64,
        (DLDataTypeCode::UINT, 8) => DType::UINT8,
        (DLDataTypeCode::UINT, 16) => DType::UINT16,
        (DLDataTypeCode::UINT, 32) => DType::UINT32,
        (DLDataTypeCode::UINT, 64) => DType::UINT64,
        (DLDataTypeCode::FLOAT, 16) => DType::FLOAT16,
        (DLDataTypeCode::BFLOAT, 16) => DType::BFLOAT16,
        (DLDataTypeCode::FLOAT, 32) => DType::FLOAT32,
        (DLDataTypeCode::FLOAT, 64) => DType::FLOAT64,
        _ => return None,
    })
}

/// A DLPack type as words: `float32`, `int8x4` (lanes), `code 5 with 64 bits`.
fn dl_name(t: DLDataType) -> String {
    let base = scalar_dtype(DLDataType { lanes: 1, ..t })
        .map(|d| d.name.to_string())
        .unwrap_or_else(|| format!("DLPack type code {} with {} bits", t.code.0, t.bits));
    if t.lanes == 1 {
        base
    } else {
        format!("{base} x {} lanes", t.lanes)
    }
}

/// The inner (dtype) dimensions of a dtype: none for a scalar, `rows` for
/// a vector, quaternion or transform, `rows, cols` for a matrix.
fn inner_dims(dtype: &DType) -> Vec<usize> {
    match dtype.kind {
        Kind::Scalar => vec![],
        Kind::Matrix => vec![dtype.rows as usize, dtype.cols as usize],
        _ => vec![dtype.rows as usize],
    }
}

fn interop(call: &'static str, what: &'static str, message: String) -> Error {
    Error::Interop {
        call,
        what,
        message,
    }
}

/// What an import reads from a DLPack tensor before taking it over.
struct Import {
    device: Device,
    dtype: &'static DType,
    shape: Vec<usize>,
    byte_strides: Vec<isize>,
    address: u64,
}

/// Checks a DLPack tensor against `dtype` (or its own scalar type) and
/// works out the array it is.
fn plan<M: ManagedTensorBase>(
    tensor: &Managed<M>,
    dtype: Option<&'static DType>,
    call: &'static str,
) -> Result<Import> {
    let t = tensor
        .validate()
        .map_err(|e| interop(call, "tensor", format!("not a valid DLPack tensor: {e}")))?;
    if tensor.flags().contains(DlpackFlags::READ_ONLY) {
        return Err(interop(
            call,
            "flags",
            "the tensor is marked READ_ONLY, and kernels may write an array; export it writable or copy it".into(),
        ));
    }
    let dev = t.device();
    let device = match dev.device_type {
        DLDeviceType::CPU | DLDeviceType::CUDAHOST => Device::Cpu,
        DLDeviceType::CUDA | DLDeviceType::CUDAMANAGED => Device::Cuda(dev.device_id),
        other => {
            return Err(interop(
                call,
                "device",
                format!(
                    "DLPack device type {} (id {}) is neither kDLCPU (1), kDLCUDA (2), kDLCUDAHost (3) nor kDLCUDAManaged (13); copy the tensor to one of those",
                    other.0, dev.device_id
                ),
            ));
        }
    };
    let Some(scalar) = scalar_dtype(t.dtype()) else {
        return Err(interop(
            call,
            "dtype",
            format!(
                "the tensor holds {}, which is no Warp scalar type (bool, int8..uint64, float16, bfloat16, float32, float64, one lane); convert it first",
                dl_name(t.dtype())
            ),
        ));
    };
    let dtype = dtype.unwrap_or(scalar);
    if dtype.scalar != scalar.scalar {
        return Err(interop(
            call,
            "dtype",
            format!(
                "the tensor holds {} but {} is made of {}; ask for a dtype of {}",
                dl_name(t.dtype()),
                dtype.name,
                dtype.scalar.name(),
                scalar.name
            ),
        ));
    }
    let shape = t.shape();
    let strides = t.strides_or_compact().map_err(|e| {
        interop(
            call,
            "strides",
            format!("the tensor's strides cannot be read: {e}"),
        )
    })?;
    let inner = inner_dims(dtype);
    let n_outer = shape.len().checked_sub(inner.len()).ok_or_else(|| {
        interop(
            call,
            "shape",
            format!(
                "{} needs {} inner dimension(s) {inner:?} but the tensor has shape {shape:?}; pass a tensor whose last dimensions are {inner:?}",
                dtype.name,
                inner.len()
            ),
        )
    })?;
    // The dtype's own dimensions: the last ones, packed row-major.
    let mut want = 1i64;
    for (i, &n) in inner.iter().enumerate().rev() {
        let axis = n_outer + i;
        if shape[axis] != n as i64 || (n > 1 && strides[axis] != want) {
            return Err(interop(
                call,
                "shape",
                format!(
                    "{} is {inner:?} packed row-major, but the tensor's last dimensions are {:?} with element strides {:?}; pass such a tensor or a scalar dtype",
                    dtype.name,
                    &shape[n_outer..],
                    &strides[n_outer..]
                ),
            ));
        }
        want *= n as i64;
    }
    let mut out_shape = Vec::with_capacity(n_outer.max(1));
    let mut byte_strides = Vec::with_capacity(n_outer.max(1));
    for axis in 0..n_outer {
        let n = usize::try_from(shape[axis]).map_err(|_| {
            interop(
                call,
                "shape",
                format!("axis {axis} has extent {}", shape[axis]),
            )
        })?;
        let st = (strides[axis] as i128) * (dtype.scalar.size() as i128);
        let st = isize::try_from(st).map_err(|_| {
            interop(
                call,
                "strides",
                format!(
                    "axis {axis} has an element stride of {} ({st} bytes), outside the address space",
                    strides[axis]
                ),
            )
        })?;
        out_shape.push(n);
        byte_strides.push(st);
    }
    if out_shape.is_empty() {
        // A 0-d tensor (or exactly one value of the dtype): one element.
        out_shape.push(1);
        byte_strides.push(dtype.size as isize);
    }
    let address = (t.data_ptr() as u64)
        .checked_add(t.byte_offset())
        .ok_or_else(|| {
            interop(
                call,
                "byte_offset",
                format!(
                    "data {:#x} + byte_offset {} passes the end of the address space",
                    t.data_ptr() as u64,
                    t.byte_offset()
                ),
            )
        })?;
    Ok(Import {
        device,
        dtype,
        shape: out_shape,
        byte_strides,
        address,
    })
}

impl Array {
    /// A DLPack tensor as an array, without copying (Warp's
    /// `wp.from_dlpack`): the array's storage owns the tensor and calls its
    /// deleter after the last array, view or recorded launch that uses it,
    /// once the work queued on it is done.
    ///
    /// `dtype` `None` takes the tensor's scalar type; a vector, matrix,
    /// quaternion or transform dtype takes its scalar type's tensor whose
    /// last one (`rows`) or two (`rows, cols`) dimensions are the dtype's,
    /// packed row-major. DLPack's element strides become byte strides;
    /// `byte_offset` is added to the data pointer. `kDLCPU` and
    /// `kDLCUDAHost` tensors become arrays on `"cpu"`, `kDLCUDA` and
    /// `kDLCUDAManaged` ones arrays on `cuda:<device_id>`, where the driver
    /// is asked what the memory is and a view that leaves its allocation is
    /// refused. A 0-d tensor becomes one element of shape `[1]`.
    ///
    /// DLPack carries no stream, so the import states what the tensor is
    /// ordered after: `ready_on` is the stream the producer queued its
    /// writes of the memory on, and the import waits for the work queued
    /// on it so far (`cuStreamSynchronize`), so the array's uses on every
    /// stream, and host reads, come after it (Python's `__dlpack__(stream)`
    /// exchange does the same with an event). `None` states that no work
    /// on the memory is pending: the producer finished it, or the tensor
    /// is this crate's own export.
    ///
    /// Memory this process already tracks (an export of an array, a view of
    /// one, memory imported before) is not a second array memory: the
    /// array is a view of the storage that holds it, with its one lock and
    /// ordering state (see [`Array::from_ptr`]), and the tensor's deleter
    /// runs at once.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use warp_launch::{Array, DType};
    /// let a = Array::from_slice("cpu", &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// let t = a.to_dlpack()?; // keeps `a`'s storage alive
    /// let b = Array::from_dlpack(t, None, None)?;
    /// assert!(Arc::ptr_eq(b.storage(), a.storage()), "one owner record");
    /// drop(a);
    /// assert_eq!(b.shape(), &[2, 3]);
    /// assert_eq!(b.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// // Two rows of a vec3f.
    /// let v = Array::from_dlpack(b.to_dlpack()?, Some(DType::VEC3F), None)?;
    /// assert_eq!((v.shape(), v.dtype().name), (&[2][..], "vec3f"));
    /// # Ok::<(), warp_launch::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Interop`] naming what does not match: an invalid descriptor
    /// (`"tensor"`), a `READ_ONLY` tensor (`"flags"`), a device type other
    /// than the four above (`"device"`), a type that is no Warp scalar or
    /// not `dtype`'s (`"dtype"`), inner dimensions that are not the dtype's
    /// (`"shape"`), strides or an offset outside the address space, or a
    /// view that leaves the driver's allocation (`"extent"`), device memory
    /// labelled `kDLCPU` (`"device"`), memory that overlaps a tracked
    /// array's storage without lying inside it (`"overlap"`), or a
    /// `ready_on` stream that is being captured into a graph, which
    /// cannot be waited for (`"ready_on"`); [`Error::Shape`] for more than
    /// 4 outer dimensions, extents or byte strides above `int32`, or
    /// misaligned data; [`Error::Cuda`] when the driver cannot answer or
    /// the work on `ready_on` failed.
    pub fn from_dlpack<M: ManagedTensorBase>(
        tensor: Managed<M>,
        dtype: Option<&'static DType>,
        ready_on: Option<&Stream>,
    ) -> Result<Array> {
        let call = "Array::from_dlpack";
        let p = plan(&tensor, dtype, call)?;
        if let Some(s) = ready_on {
            if s.is_capturing() {
                return Err(interop(
                    call,
                    "ready_on",
                    "the stream is being captured into a graph, so the producer's work on it has not run and cannot be waited for; end the capture first, or pass the stream the work runs on".into(),
                ));
            }
            s.synchronize()?;
        }
        let owner = Arc::new(tensor.into_deleter());
        // SAFETY: a `Managed` tensor is valid by dlpark's contract (made
        // by `Managed::from_raw`'s caller or a safe producer): its data
        // stays valid until its deleter runs, which the owner does when
        // the storage drops; it was not READ_ONLY; the layout was read
        // from the validated descriptor.
        unsafe {
            Array::from_external(
                p.device,
                p.address,
                p.dtype,
                &p.shape,
                Some(&p.byte_strides),
                owner,
                call,
            )
        }
    }

    /// This array as a versioned DLPack tensor (DLPack 1.x,
    /// `DLManagedTensorVersioned`), without copying (Warp's
    /// `wp.to_dlpack`): its deleter holds a clone of the array, so the
    /// storage stays alive until the consumer calls it. The scalar type is
    /// the dtype's, with the dtype's inner dimensions last
    /// ([`Array::from_dlpack`] says how); strides are explicit, in
    /// elements; `byte_offset` is 0 and the data pointer is the first
    /// element's address. The device is `kDLCPU` for `"cpu"` (plain host,
    /// page-locked or managed memory) and `kDLCUDA`, `kDLCUDAHost` or
    /// `kDLCUDAManaged` (by memory kind) with the ordinal for `cuda:N`.
    ///
    /// Work queued on the array is waited for first. The consumer's work
    /// on the memory is not seen by this crate, so the storage is marked
    /// shared ([`cuda_api::Allocation::share`]): from then on every host
    /// read or write of it, and its free, synchronise the device's context.
    ///
    /// ```
    /// let a = warp_launch::Array::zeros::<u8>("cpu", &[4, 2])?;
    /// let t = a.slice(1, 1..2)?.to_dlpack()?;
    /// let v = t.validate().unwrap();
    /// assert_eq!((v.shape(), v.strides()), (&[4i64, 1][..], Some(&[2i64, 1][..])));
    /// # Ok::<(), warp_launch::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Interop`] when dlpark cannot lay out the descriptor
    /// (`"tensor"`); [`Error::Cuda`] when waiting for the array's queued
    /// work fails.
    pub fn to_dlpack(&self) -> Result<dlpark::versioned::Dlpack> {
        self.to_dlpack_as("Array::to_dlpack")
    }

    /// This array as a legacy DLPack tensor (`DLManagedTensor`, before
    /// DLPack 1.0), for consumers that take only that; otherwise as
    /// [`Array::to_dlpack`].
    ///
    /// ```
    /// let a = warp_launch::Array::zeros::<f64>("cpu", &[3])?;
    /// let t = a.to_dlpack_legacy()?;
    /// assert_eq!(t.validate().unwrap().shape(), &[3]);
    /// # Ok::<(), warp_launch::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Array::to_dlpack`].
    pub fn to_dlpack_legacy(&self) -> Result<dlpark::legacy::Dlpack> {
        self.to_dlpack_as("Array::to_dlpack_legacy")
    }

    fn to_dlpack_as<M: ManagedTensorBase>(&self, call: &'static str) -> Result<Managed<M>> {
        let scalar = self.dtype().scalar.size() as isize;
        let mut shape: Vec<i64> = self.shape().iter().map(|&n| n as i64).collect();
        // Byte strides are multiples of the scalar's size (its alignment):
        // checked when the array was made.
        let mut strides: Vec<i64> = self
            .strides()
            .iter()
            .map(|&s| (s / scalar) as i64)
            .collect();
        let inner = inner_dims(self.dtype());
        let mut acc = 1i64;
        let mut inner_strides = vec![0i64; inner.len()];
        for (i, &n) in inner.iter().enumerate().rev() {
            inner_strides[i] = acc;
            acc *= n as i64;
        }
        shape.extend(inner.iter().map(|&n| n as i64));
        strides.extend(inner_strides);
        let device = match (self.device(), self.memory()) {
            (Device::Cpu, _) => DLDevice::CPU,
            (Device::Cuda(n), Memory::Cuda(MemoryKind::PinnedHost)) => DLDevice {
                device_type: DLDeviceType::CUDAHOST,
                device_id: n,
            },
            (Device::Cuda(n), Memory::Cuda(MemoryKind::Managed)) => DLDevice {
                device_type: DLDeviceType::CUDAMANAGED,
                device_id: n,
            },
            (Device::Cuda(n), _) => DLDevice::cuda(n),
        };
        if let Some(a) = self.storage().allocation() {
            a.wait_idle()?;
            a.share();
        }
        let mut init = Dynamic::new(shape, strides)
            .prepare_as::<M>()
            .map_err(|e| {
                interop(
                    call,
                    "tensor",
                    format!("dlpark cannot lay out the descriptor: {e}"),
                )
            })?
            .initialize(Box::new(self.clone()));
        init.set_device(device)
            .set_dtype(dl_dtype(self.dtype().scalar))
            .set_data(self.data_address() as *mut std::ffi::c_void)
            .set_byte_offset(0);
        // SAFETY: the descriptor's data pointer is the first element of
        // this array, whose storage the context (a clone of the array)
        // keeps alive until the deleter runs; shape and strides (explicit,
        // in elements) describe exactly the view, inside the storage; the
        // flags are dlpark's defaults (writable, not copied), which holds:
        // arrays are writable and the memory is shared.
        Ok(unsafe { init.finish() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scalar_round_trips_through_its_dlpack_type() {
        for d in crate::abi::DTYPES.iter().filter(|d| d.kind == Kind::Scalar) {
            assert!(
                std::ptr::eq(scalar_dtype(dl_dtype(d.scalar)).unwrap(), d),
                "{}",
                d.name
            );
        }
        assert!(scalar_dtype(DLDataType::new(DLDataTypeCode::FLOAT, 32, 4)).is_none());
        assert!(scalar_dtype(DLDataType::scalar(DLDataTypeCode::COMPLEX, 64)).is_none());
    }
}
