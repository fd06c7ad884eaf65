//! Arrays of 1 to 4 dimensions with Warp's layout (byte strides, row-major
//! by default), an element type known at run time, an optional gradient
//! array, and typed views ([`TypedArray`]). Storage is shared through an
//! `Arc` ([`Storage`]: device, page-locked host, managed or plain host
//! memory), so a recorded launch that holds an array keeps it alive.
//!
//! What every [`Array`] holds, checked when it is made (`zeros`,
//! `from_slice`, `from_parts`, `slice`, `slice_step`, `transpose`,
//! `reshape`, `with_grad`), with exact arithmetic (no wrap, no overflow
//! panic): each extent and byte stride fits Warp's `array_t` (`int32`;
//! never truncated), so a kernel indexes what the view describes; the
//! offset and strides are multiples of the dtype's alignment; the element
//! count's bytes fit `isize`; every byte the view reaches lies inside its
//! storage (negative and zero strides included; an empty view's offset
//! too); and a gradient has the array's shape and strides, because Warp
//! indexes a gradient with the array's own strides. Host memory is
//! allocated fallibly: a refusal is [`Error::Alloc`], never an abort.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

use cuda_api::{Allocation, MemoryKind, Stream};

use crate::array::{Memory, Storage};

use crate::abi::ArrayT;
use crate::abi::{DType, Element};
use crate::device::{Device, IntoDevice};
use crate::error::{Error, Result};

/// Most dimensions an array has (Warp's `ARRAY_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// An array: a typed window (dtype, shape, byte strides, offset) onto shared
/// storage, on one device, with an optional gradient of the same shape.
/// Cloning shares the storage.
#[derive(Clone)]
pub struct Array {
    storage: Arc<Storage>,
    offset: usize,
    dtype: &'static DType,
    ndim: usize,
    shape: [usize; MAX_DIMS],
    strides: [isize; MAX_DIMS],
    device: Device,
    grad: Option<Box<Array>>,
    /// Warp's `retain_grad`: sets `ARRAY_FLAG_RETAIN_GRAD` in the `array_t`.
    retain_grad: bool,
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Array(dtype={}, shape={:?}, strides={:?}, device={}, {}{})",
            self.dtype.name,
            self.shape(),
            self.strides(),
            self.device,
            self.storage.memory(),
            if self.grad.is_some() {
                ", with grad"
            } else {
                ""
            }
        )
    }
}

/// Largest shape entry and largest byte stride Warp's `array_t` holds
/// (`int shape[4]; int strides[4]`).
const INT32_MAX: i128 = i32::MAX as i128;
/// Smallest byte stride `array_t` holds.
const INT32_MIN: i128 = i32::MIN as i128;

pub(crate) fn check_shape(
    shape: &[usize],
    call: &'static str,
) -> Result<(usize, [usize; MAX_DIMS])> {
    if shape.is_empty() || shape.len() > MAX_DIMS {
        return Err(Error::Shape {
            call,
            message: format!(
                "an array has 1 to {MAX_DIMS} dimensions but shape {shape:?} has {}; pass 1 to {MAX_DIMS} extents",
                shape.len()
            ),
        });
    }
    let mut s = [0usize; MAX_DIMS];
    for (i, &e) in shape.iter().enumerate() {
        if e as u128 > INT32_MAX as u128 {
            return Err(Error::Shape {
                call,
                message: format!(
                    "axis {i} has extent {e}, above the limit {} of Warp's array_t (int32 shape); split the array",
                    i32::MAX
                ),
            });
        }
        s[i] = e;
    }
    Ok((shape.len(), s))
}

/// Row-major byte strides for `shape` (exact: at most 2^8 * (2^31)^3).
fn contiguous_strides(ndim: usize, shape: &[usize; MAX_DIMS], elem: usize) -> [i128; MAX_DIMS] {
    let mut st = [0i128; MAX_DIMS];
    let mut acc = elem as i128;
    for i in (0..ndim).rev() {
        st[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1) as i128);
    }
    st
}

/// `strides` as Warp's `array_t` holds them: each within int32, or an
/// error naming the call, the axis, the stride and the limit.
fn fit_strides(strides: &[i128], call: &'static str) -> Result<[isize; MAX_DIMS]> {
    let mut out = [0isize; MAX_DIMS];
    for (i, &st) in strides.iter().enumerate().take(MAX_DIMS) {
        if !(INT32_MIN..=INT32_MAX).contains(&st) {
            return Err(Error::Shape {
                call,
                message: format!(
                    "axis {i} would have a byte stride of {st}, outside {}..={} that Warp's array_t (int32 strides) holds, so a kernel would index the wrong memory; use smaller extents after axis {i}, a smaller step, or split the array",
                    i32::MIN,
                    i32::MAX
                ),
            });
        }
        out[i] = st as isize;
    }
    Ok(out)
}

/// `n` copies of `v` in a vector, or [`Error::Alloc`] naming the bytes
/// when the allocator refuses (never an abort).
fn try_vec<T: Clone>(n: usize, v: T, call: &'static str) -> Result<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| Error::Alloc {
        call,
        bytes: n.saturating_mul(size_of::<T>()),
        memory: Memory::Host.to_string(),
    })?;
    out.resize(n, v);
    Ok(out)
}

/// Number of elements of `shape`, refused unless their bytes fit `isize`.
fn element_count(shape: &[usize], dtype: &DType, call: &'static str) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &e| a.checked_mul(e))
        .filter(|n| {
            n.checked_mul(dtype.size)
                .is_some_and(|b| b <= isize::MAX as usize)
        })
        .ok_or_else(|| Error::Shape {
            call,
            message: format!(
                "shape {shape:?} of {} ({} B elements) holds more bytes than the address space ({} B); use a smaller shape",
                dtype.name,
                dtype.size,
                isize::MAX
            ),
        })
}

/// Refuses memory that host code cannot reach for an array on `"cpu"`:
/// device memory, by its kind or (for other CUDA memory, whose kind was
/// promised by whoever made the allocation) by the driver's answer, asked
/// once per allocation.
fn host_reachable(storage: &Storage, call: &'static str) -> Result<()> {
    let refuse = |what: String| {
        Err(Error::Interop {
            call,
            what: "device",
            message: format!(
                "the storage at {:#x} is {what}, which host code (\"cpu\") cannot read or write; label the array with the CUDA device that holds it",
                storage.address()
            ),
        })
    };
    match storage.memory() {
        Memory::Cuda(MemoryKind::Device) if storage.bytes() > 0 => {
            refuse(MemoryKind::Device.to_string())
        }
        Memory::Cuda(_) => match storage.location()? {
            Some(l) if l.memory_type == cuda_api::MemoryType::Device && !l.managed => {
                refuse(l.to_string())
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Zeroed storage of `bytes` bytes for an array on `device` in `kind` memory.
fn allocate(
    device: Device,
    bytes: usize,
    kind: MemoryKind,
    call: &'static str,
) -> Result<Arc<Storage>> {
    let storage = match (device, kind) {
        (Device::Cpu, MemoryKind::Device) => Storage::host(bytes).map_err(|e| match e {
            Error::Alloc { bytes, memory, .. } => Error::Alloc {
                call,
                bytes,
                memory,
            },
            e => e,
        })?,
        (Device::Cpu, _) => Storage::cuda(
            Device::Cuda(0)
                .context()
                .and_then(|context| Ok(Allocation::zeroed(&context, bytes, kind)?))
                .map_err(|e| e.for_allocation(call, device, kind))?,
        ),
        (_, _) => Storage::cuda(
            device
                .context()
                .and_then(|context| Ok(Allocation::zeroed(&context, bytes, kind)?))
                .map_err(|e| e.for_allocation(call, device, kind))?,
        ),
    };
    let storage = Arc::new(storage);
    // Fresh memory: no live record holds it, so this enters the storage
    // as the record of its bytes (imports of them join it).
    crate::array::storage::track(&storage, call)?;
    Ok(storage)
}

impl Array {
    /// A zeroed array of `T` elements with `shape` in `device`'s memory
    /// (device memory for CUDA, host memory for the CPU); `device` is a
    /// [`Device`] or a name such as `"cuda:0"` or `"cpu"`.
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// let y = warp_launch::Array::zeros::<f32>("cuda:0", &[1024])?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::BadDevice`] for a name that is no device; refused, before
    /// anything is allocated, with [`Error::Shape`] when an extent or a byte
    /// stride does not fit Warp's `array_t` (`int32`), or the size does not
    /// fit the address space; an allocation the allocator refuses is
    /// [`Error::Alloc`] (host memory) or [`Error::Cuda`], never an abort;
    /// [`Error::NoDriverForArray`] (naming the libraries tried and
    /// suggesting `"cpu"`) for CUDA memory where no CUDA driver loads.
    pub fn zeros<T: Element>(device: impl IntoDevice, shape: &[usize]) -> Result<Array> {
        Self::zeros_dtype_in(device, T::DTYPE, shape, MemoryKind::Device)
    }

    /// A zeroed array of `dtype` (a constant such as [`DType::VEC3F`], or
    /// one read at run time) with `shape` in `device`'s memory.
    ///
    /// # Errors
    ///
    /// As [`Array::zeros`].
    pub fn zeros_dtype(
        device: impl IntoDevice,
        dtype: &'static DType,
        shape: &[usize],
    ) -> Result<Array> {
        Self::zeros_dtype_in(device, dtype, shape, MemoryKind::Device)
    }

    /// A zeroed array of `T` elements with `shape` in `kind` memory, as
    /// [`Array::zeros_dtype_in`] says.
    ///
    /// # Errors
    ///
    /// As [`Array::zeros`].
    pub fn zeros_in<T: Element>(
        device: impl IntoDevice,
        shape: &[usize],
        kind: MemoryKind,
    ) -> Result<Array> {
        Self::zeros_dtype_in(device, T::DTYPE, shape, kind)
    }

    /// A zeroed array of `dtype` with `shape` in `kind` memory: for a CUDA
    /// device, of its primary context; for the CPU, `Device` means plain host
    /// memory and page-locked or managed memory comes from `cuda:0`'s
    /// context (reachable from the host and from CUDA kernels, as Warp's
    /// pinned CPU arrays).
    ///
    /// # Errors
    ///
    /// As [`Array::zeros`].
    pub fn zeros_dtype_in(
        device: impl IntoDevice,
        dtype: &'static DType,
        shape: &[usize],
        kind: MemoryKind,
    ) -> Result<Array> {
        Self::zeros_for(device.into_device()?, dtype, shape, kind, "Array::zeros")
    }

    fn zeros_for(
        device: Device,
        dtype: &'static DType,
        shape: &[usize],
        kind: MemoryKind,
        call: &'static str,
    ) -> Result<Array> {
        let (ndim, shape) = check_shape(shape, call)?;
        let strides = fit_strides(&contiguous_strides(ndim, &shape, dtype.size)[..ndim], call)?;
        let bytes = element_count(&shape[..ndim], dtype, call)? * dtype.size;
        let storage = allocate(device, bytes, kind, call)?;
        Array {
            storage,
            offset: 0,
            dtype,
            ndim,
            strides,
            shape,
            device,
            grad: None,
            retain_grad: false,
        }
        .checked(call)
    }

    /// An array of `shape` holding `data` (row-major), in `device`'s memory
    /// (a [`Device`] or a name such as `"cuda:0"`).
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `shape` does not hold `data.len()` elements;
    /// otherwise as [`Array::zeros`].
    pub fn from_slice<T: Element>(
        device: impl IntoDevice,
        data: &[T],
        shape: &[usize],
    ) -> Result<Array> {
        Self::from_slice_in(device, data, shape, MemoryKind::Device)
    }

    /// An array of `shape` holding `data` (row-major), in `kind` memory.
    ///
    /// # Errors
    ///
    /// As [`Array::from_slice`].
    pub fn from_slice_in<T: Element>(
        device: impl IntoDevice,
        data: &[T],
        shape: &[usize],
        kind: MemoryKind,
    ) -> Result<Array> {
        let device = device.into_device()?;
        let call = "Array::from_slice";
        let (ndim, s) = check_shape(shape, call)?;
        let n = element_count(&s[..ndim], T::DTYPE, call)?;
        if n != data.len() {
            return Err(Error::Shape {
                call,
                message: format!(
                    "shape {shape:?} holds {n} elements but the slice has {}; pass a slice of {n} elements",
                    data.len(),
                ),
            });
        }
        let a = Self::zeros_for(device, T::DTYPE, shape, kind, call)?;
        a.storage.copy_from_host(0, as_bytes(data))?;
        Ok(a)
    }

    /// A view of `storage` on `device`: `dtype` elements of `shape` with
    /// byte `strides` (negative and zero strides allowed), starting
    /// `offset` bytes in.
    ///
    /// Refused unless every extent and stride fits Warp's `array_t`
    /// (`int32`), the offset and strides are multiples of the dtype's
    /// alignment, the element count fits the address space, and every byte
    /// the view reaches (computed exactly, without overflow) lies inside the
    /// storage; an empty view's offset must lie inside it too.
    ///
    /// One memory has one owner record (lock and ordering state): when an
    /// array's storage already holds the bytes of `storage` (a storage over
    /// memory owned elsewhere, [`Storage::from_raw_host`] or
    /// [`Allocation::from_raw_parts`]), the array is a view of that storage
    /// instead, at the same address, and keeps it alive; `storage` is not
    /// kept. A storage that overlaps an array's storage without lying
    /// inside it is refused.
    ///
    /// `"cpu"` arrays are read and written by host code, so device memory
    /// is refused for them (the driver is asked about other CUDA memory;
    /// [`Storage::from_raw_host`] asks about host storage when it is made).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use warp_launch::{Array, DType, Storage};
    /// let a = Array::from_slice("cpu", &[1.0f32, 2.0, 3.0, 4.0], &[4])?;
    /// // SAFETY: `a`, kept alive as the owner, holds these 16 bytes.
    /// let alias = unsafe {
    ///     Storage::from_raw_host(a.data_address() as *mut u8, 16, Arc::new(a.clone()))?
    /// };
    /// let b = Array::from_parts(Arc::new(alias), "cpu", 4, DType::FLOAT32, &[2], &[4])?;
    /// // One record: `b` views `a`'s storage.
    /// assert!(Arc::ptr_eq(b.storage(), a.storage()));
    /// assert_eq!(b.to_vec::<f32>()?, vec![2.0, 3.0]);
    /// # Ok::<(), warp_launch::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when the shape, strides or offset break any rule above (the message
    /// names the rule and the values); [`Error::BadDevice`] for a device name that is none;
    /// [`Error::Interop`] for a storage that overlaps an array's storage without lying inside
    /// it (`what` is `"overlap"`), or device memory for `"cpu"` (`"device"`); [`Error::Cuda`]
    /// when the driver cannot say where CUDA memory for `"cpu"` lives.
    pub fn from_parts(
        storage: Arc<Storage>,
        device: impl IntoDevice,
        offset: usize,
        dtype: &'static DType,
        shape: &[usize],
        strides: &[isize],
    ) -> Result<Array> {
        let call = "Array::from_parts";
        let device = device.into_device()?;
        let (ndim, shape) = check_shape(shape, call)?;
        if strides.len() != ndim {
            return Err(Error::Shape {
                call,
                message: format!(
                    "{} strides {strides:?} for a shape of {ndim} dimensions; give one byte stride per dimension",
                    strides.len()
                ),
            });
        }
        let mut wide = [0i128; MAX_DIMS];
        for (w, &s) in wide.iter_mut().zip(strides) {
            *w = s as i128;
        }
        let st = fit_strides(&wide[..ndim], call)?;
        let (storage, offset) = match crate::array::storage::track(&storage, call)? {
            None => (storage, offset),
            Some((record, at)) => {
                let offset = at.checked_add(offset).ok_or_else(|| Error::Shape {
                    call,
                    message: format!(
                        "offset {offset} B passes the end of the address space; use an offset inside the storage"
                    ),
                })?;
                (record, offset)
            }
        };
        if device == Device::Cpu {
            host_reachable(&storage, call)?;
        }
        Array {
            storage,
            offset,
            dtype,
            ndim,
            shape,
            strides: st,
            device,
            grad: None,
            retain_grad: false,
        }
        .checked(call)
    }

    /// Checks what every array holds (the shape and strides were fitted to
    /// `int32` by the caller): aligned offset and strides, an element count
    /// whose bytes fit `isize`, a byte range inside the storage, and a
    /// gradient of the same layout.
    fn checked(self, call: &'static str) -> Result<Array> {
        let fail = |message: String| Err(Error::Shape { call, message });
        let align = self.dtype.align.max(1);
        if !self.offset.is_multiple_of(align) {
            return fail(format!(
                "offset {} B is not a multiple of {}'s alignment ({align} B); kernels would read misaligned elements, so use an aligned offset",
                self.offset, self.dtype.name
            ));
        }
        if let Some(i) = (0..self.ndim).find(|&i| self.strides[i] % align as isize != 0) {
            return fail(format!(
                "axis {i} has a byte stride of {}, not a multiple of {}'s alignment ({align} B); use aligned strides",
                self.strides[i], self.dtype.name
            ));
        }
        element_count(self.shape(), self.dtype, call)?;
        let (lo, hi) = self.span_exact();
        let bytes = self.storage.bytes() as i128;
        if lo < 0 || hi > bytes {
            return fail(format!(
                "the view (offset {}, shape {:?}, strides {:?}, {} B elements) reaches bytes {lo}..{hi} but the storage holds 0..{bytes}; keep every element inside it",
                self.offset,
                self.shape(),
                self.strides(),
                self.dtype.size
            ));
        }
        if let Some(g) = &self.grad
            && (g.shape() != self.shape()
                || g.strides() != self.strides()
                || !std::ptr::eq(g.dtype, self.dtype))
        {
            return fail(
                "the gradient's shape or strides differ from the array's; Warp indexes a gradient with the array's strides".into(),
            );
        }
        Ok(self)
    }

    /// The same array with a zeroed gradient: an array of the same dtype,
    /// shape and byte strides, in fresh memory of the same kind and device
    /// that covers exactly the bytes this view reaches (at the same relative
    /// offset). Warp kernels index a gradient with the array's own strides,
    /// so the gradient of a strided view is strided the same way, as Warp
    /// does. Views of an array with a gradient ([`Array::slice`],
    /// [`Array::transpose`], [`Array::reshape`], [`Array::typed`]) view its
    /// gradient the same way; a gradient already present is replaced.
    ///
    /// # Errors
    ///
    /// [`Error::Alloc`] when the gradient's memory cannot be allocated, [`Error::Cuda`] when
    /// the driver refuses the allocation or the zeroing.
    pub fn with_grad(mut self) -> Result<Array> {
        let call = "Array::with_grad";
        let kind = match self.storage.memory() {
            Memory::Cuda(k) => k,
            _ => MemoryKind::Device,
        };
        let (lo, hi) = self.span();
        let storage = allocate(self.device, hi - lo, kind, call)?;
        let g = Array {
            storage,
            offset: self.offset - lo,
            dtype: self.dtype,
            ndim: self.ndim,
            shape: self.shape,
            strides: self.strides,
            device: self.device,
            grad: None,
            retain_grad: false,
        }
        .checked(call)?;
        self.grad = Some(Box::new(g));
        Ok(self)
    }

    /// Warp's `retain_grad`: with `true`, the array's `array_t` carries
    /// `ARRAY_FLAG_RETAIN_GRAD`, so backward kernels keep its gradient where
    /// they would consume it (the adjoint of an overwrite `a[i] = ...`
    /// zeroes `a.grad[i]` otherwise), and a tape's copy adjoint keeps the
    /// destination's gradient. As in Warp, a view made from the array
    /// ([`Array::slice`], [`Array::transpose`], [`Array::reshape`]) is a new
    /// array that does not retain its gradient unless told so; clones and
    /// [`Array::typed`] are the same array and keep the setting.
    ///
    /// ```
    /// use warp_launch::{ARRAY_FLAG_RETAIN_GRAD, Array, Device};
    /// # fn main() -> warp_launch::Result<()> {
    /// let y = Array::zeros::<f32>(Device::Cpu, &[4])?
    ///     .with_grad()?
    ///     .with_retain_grad(true)?;
    /// assert!(y.retain_grad());
    /// assert_eq!(y.abi().flags, ARRAY_FLAG_RETAIN_GRAD);
    /// assert!(!y.slice(0, 0..2)?.retain_grad()); // a view, as in Warp
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NoGradient`] when `retain` is `true` and the array has no
    /// gradient (Warp: "retain_grad=True requires requires_grad=True").
    pub fn with_retain_grad(mut self, retain: bool) -> Result<Array> {
        if retain && self.grad.is_none() {
            return Err(Error::NoGradient {
                call: "Array::with_retain_grad",
                array: format!("{self:?} (make it with Array::with_grad first)"),
            });
        }
        self.retain_grad = retain;
        Ok(self)
    }

    /// Whether the array keeps its gradient in backward passes
    /// ([`Array::with_retain_grad`]).
    ///
    /// ```
    /// use warp_launch::{Array, Device};
    /// # fn main() -> warp_launch::Result<()> {
    /// assert!(!Array::zeros::<f32>(Device::Cpu, &[2])?.retain_grad());
    /// # Ok(()) }
    /// ```
    pub fn retain_grad(&self) -> bool {
        self.retain_grad
    }
    /// The gradient array, if any.
    pub fn grad(&self) -> Option<&Array> {
        self.grad.as_deref()
    }

    /// The element type.
    #[inline]
    pub fn dtype(&self) -> &'static DType {
        self.dtype
    }

    /// Number of dimensions (1 to 4).
    #[inline]
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// Extent of each dimension.
    #[inline]
    pub fn shape(&self) -> &[usize] {
        &self.shape[..self.ndim]
    }

    /// Byte stride of each dimension.
    #[inline]
    pub fn strides(&self) -> &[isize] {
        &self.strides[..self.ndim]
    }

    /// Number of elements (its bytes fit `isize`: checked when the array
    /// was made).
    pub fn len(&self) -> usize {
        self.shape()
            .iter()
            .fold(1usize, |n, &e| n.saturating_mul(e))
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device it lives on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Where its memory lives.
    pub fn memory(&self) -> Memory {
        self.storage.memory()
    }

    /// Byte offset of the first element in the storage.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The shared storage.
    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// Address of the first element (a device address for CUDA memory, a
    /// host address for host memory); 0 for an empty array.
    #[inline]
    pub fn data_address(&self) -> u64 {
        if self.storage.bytes() == 0 {
            0
        } else {
            // The offset lies inside the storage (checked when the view was made).
            self.storage.address().saturating_add(self.offset as u64)
        }
    }

    /// Whether the elements are packed row-major with no gaps.
    pub fn is_contiguous(&self) -> bool {
        let want = contiguous_strides(self.ndim, &self.shape, self.dtype.size);
        want[..self.ndim]
            .iter()
            .zip(self.strides())
            .all(|(&w, &s)| w == s as i128)
            || self.len() <= 1
    }

    /// The view of indices `range` along `axis` (same number of dimensions).
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `axis` is not an axis of the array or `range` does not lie inside
    /// it.
    pub fn slice(&self, axis: usize, range: Range<usize>) -> Result<Array> {
        self.slice_for(axis, range, 1, "Array::slice")
    }

    /// Every `step`-th index of `range` along `axis`: a non-contiguous view
    /// whose stride along `axis` is `step` times the array's. Refused when
    /// that stride does not fit Warp's `int32` (for a result of at most one
    /// index along `axis` the stride is never used and stays the array's).
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `axis` is not an axis, `range` leaves the array, `step` is 0, or
    /// the new stride does not fit Warp's `int32`.
    pub fn slice_step(&self, axis: usize, range: Range<usize>, step: usize) -> Result<Array> {
        self.slice_for(axis, range, step, "Array::slice_step")
    }

    fn slice_for(
        &self,
        axis: usize,
        range: Range<usize>,
        step: usize,
        call: &'static str,
    ) -> Result<Array> {
        if axis >= self.ndim || range.start > range.end || range.end > self.shape[axis] || step == 0
        {
            return Err(Error::Shape {
                call,
                message: format!(
                    "axis {axis}, range {range:?}, step {step} do not fit shape {:?}; use an axis below {}, a range inside 0..extent and a step of at least 1",
                    self.shape(),
                    self.ndim
                ),
            });
        }
        let extent = range.len().div_ceil(step);
        let stride = self.strides[axis] as i128;
        let mut v = self.clone();
        v.retain_grad = false; // a view is a new Warp array: it does not retain
        if extent > 0 {
            // Exact: start <= 2^31 and |stride| <= 2^31.
            let offset = self.offset as i128 + range.start as i128 * stride;
            v.offset = usize::try_from(offset).map_err(|_| Error::Shape {
                call,
                message: format!(
                    "the view would start at byte {offset}, outside the storage; slice inside the array"
                ),
            })?;
        }
        v.shape[axis] = extent;
        if extent > 1 {
            let mut wide = [0i128; MAX_DIMS];
            wide[axis] = stride.saturating_mul(step as i128);
            v.strides[axis] = fit_strides(&wide, call)?[axis];
        }
        v.grad = match &self.grad {
            Some(g) => Some(Box::new(g.slice_for(axis, range, step, call)?)),
            None => None,
        };
        v.checked(call)
    }

    /// The view with axes `a` and `b` swapped (non-contiguous).
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `a` or `b` is not an axis of the array.
    pub fn transpose(&self, a: usize, b: usize) -> Result<Array> {
        if a >= self.ndim || b >= self.ndim {
            return Err(Error::Shape {
                call: "Array::transpose",
                message: format!(
                    "axes {a} and {b} do not exist in an array of {} dimensions; use axes below {}",
                    self.ndim, self.ndim
                ),
            });
        }
        let mut v = self.clone();
        v.retain_grad = false; // a view is a new Warp array: it does not retain
        v.shape.swap(a, b);
        v.strides.swap(a, b);
        v.grad = match &self.grad {
            Some(g) => Some(Box::new(g.transpose(a, b)?)),
            None => None,
        };
        v.checked("Array::transpose")
    }

    /// The same elements with another shape (contiguous arrays only).
    /// Refused when a new byte stride does not fit Warp's `int32`.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when the array is not contiguous, the element counts differ, the shape
    /// has more than 4 dimensions, or a stride does not fit Warp's `int32`.
    pub fn reshape(&self, shape: &[usize]) -> Result<Array> {
        let call = "Array::reshape";
        let (ndim, s) = check_shape(shape, call)?;
        let n = s[..ndim].iter().try_fold(1usize, |a, &e| a.checked_mul(e));
        if n != Some(self.len()) || !self.is_contiguous() {
            return Err(Error::Shape {
                call,
                message: format!(
                    "cannot view {} elements of shape {:?}{} as shape {shape:?} ({}); reshape a contiguous array to the same element count",
                    self.len(),
                    self.shape(),
                    if self.is_contiguous() {
                        ""
                    } else {
                        " (not contiguous)"
                    },
                    n.map_or("more elements than fit usize".to_string(), |n| format!(
                        "{n} elements"
                    ))
                ),
            });
        }
        let mut v = self.clone();
        v.retain_grad = false; // a view is a new Warp array: it does not retain
        v.ndim = ndim;
        v.shape = s;
        v.strides = fit_strides(&contiguous_strides(ndim, &s, self.dtype.size)[..ndim], call)?;
        v.grad = match &self.grad {
            Some(g) => Some(Box::new(g.reshape(shape)?)),
            None => None,
        };
        v.checked(call)
    }

    /// The byte range of the storage the view reaches, exactly: (first
    /// byte, end); (offset, offset) for an empty view.
    fn span_exact(&self) -> (i128, i128) {
        let (mut lo, mut hi) = (self.offset as i128, self.offset as i128);
        if self.is_empty() {
            return (lo, hi);
        }
        for i in 0..self.ndim {
            // Exact: extents and strides fit int32.
            let ext = (self.shape[i] as i128 - 1) * self.strides[i] as i128;
            if ext < 0 { lo += ext } else { hi += ext }
        }
        (lo, hi + self.dtype.size as i128)
    }

    /// [`Array::span_exact`] as storage offsets (inside the storage: checked
    /// when the view was made).
    fn span(&self) -> (usize, usize) {
        let (lo, hi) = self.span_exact();
        let clamp = |v: i128| usize::try_from(v.max(0)).unwrap_or(usize::MAX);
        let (lo, hi) = (clamp(lo), clamp(hi));
        (lo, hi.max(lo))
    }

    /// Storage offsets of the elements, row-major (inside the storage:
    /// checked when the view was made).
    fn element_offsets(&self) -> impl Iterator<Item = usize> + '_ {
        let mut idx = [0usize; MAX_DIMS];
        (0..self.len()).map(move |_| {
            let at = self.offset as i128
                + idx[..self.ndim]
                    .iter()
                    .zip(&self.strides)
                    .map(|(&i, &s)| i as i128 * s as i128)
                    .sum::<i128>();
            for d in (0..self.ndim).rev() {
                idx[d] += 1;
                if idx[d] < self.shape[d] {
                    break;
                }
                idx[d] = 0;
            }
            usize::try_from(at).unwrap_or(usize::MAX)
        })
    }

    /// The elements as bytes, row-major (gathering a non-contiguous view).
    ///
    /// # Errors
    ///
    /// [`Error::Alloc`] when the host buffer cannot be allocated, [`Error::Cuda`] when the copy
    /// from device memory fails, [`Error::WouldDeadlock`] when this thread holds the storage in
    /// a running CPU launch.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let call = "Array::to_bytes";
        let (lo, hi) = self.span();
        let mut raw = try_vec(hi - lo, 0u8, call)?;
        self.storage.copy_to_host(lo, &mut raw)?;
        if self.is_contiguous() {
            return Ok(raw);
        }
        let es = self.dtype.size;
        let mut out = try_vec(0, 0u8, call)?;
        let want = self.len().saturating_mul(es);
        out.try_reserve_exact(want).map_err(|_| Error::Alloc {
            call,
            bytes: want,
            memory: Memory::Host.to_string(),
        })?;
        for at in self.element_offsets() {
            let part = at
                .checked_sub(lo)
                .and_then(|a| raw.get(a..a.checked_add(es)?))
                .ok_or_else(|| Error::Shape {
                    call,
                    message: format!(
                        "element at byte {at} lies outside the view's bytes {lo}..{hi}"
                    ),
                })?;
            out.extend_from_slice(part);
        }
        Ok(out)
    }

    fn check_element<T: Element>(&self, call: &'static str) -> Result<()> {
        if !std::ptr::eq(T::DTYPE, self.dtype) {
            return Err(Error::ElementType {
                call,
                array: self.dtype.name,
                requested: T::DTYPE.name,
                rust: std::any::type_name::<T>(),
            });
        }
        Ok(())
    }

    /// The elements, row-major, as `T` (which must be the array's dtype).
    ///
    /// # Errors
    ///
    /// [`Error::ElementType`] when `T` is not the array's dtype; the errors of
    /// [`Array::to_bytes`].
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_element::<T>("Array::to_vec")?;
        let bytes = self.to_bytes()?;
        let n = self.len();
        if bytes.len() != n.saturating_mul(size_of::<T>()) {
            return Err(Error::Shape {
                call: "Array::to_vec",
                message: format!(
                    "{} B read for {n} elements of {} B; the view is inconsistent",
                    bytes.len(),
                    size_of::<T>()
                ),
            });
        }
        let mut v = Vec::<T>::new();
        v.try_reserve_exact(n).map_err(|_| Error::Alloc {
            call: "Array::to_vec",
            bytes: bytes.len(),
            memory: Memory::Host.to_string(),
        })?;
        // SAFETY: `bytes` holds exactly n elements of T's size (checked
        // above) and `v` has room for n; T is plain data valid for any bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), bytes.len());
            v.set_len(n);
        }
        Ok(v)
    }

    /// Copies `data` (row-major) into a contiguous array. Synchronous: a
    /// blocking copy outside any stream, after the queued work that uses
    /// the array (on any stream), done when it returns (work queued on any
    /// stream afterwards sees the data); [`Array::copy_from_slice_on`] is the
    /// stream-ordered form (any strides).
    ///
    /// # Errors
    ///
    /// [`Error::ElementType`] when `T` is not the array's dtype, [`Error::Shape`] when the
    /// array is not contiguous or `data` has another length, [`Error::Cuda`] when the copy
    /// fails.
    pub fn copy_from_slice<T: Element>(&self, data: &[T]) -> Result<()> {
        self.check_element::<T>("Array::copy_from_slice")?;
        if data.len() != self.len() || !self.is_contiguous() {
            return Err(Error::Shape {
                call: "Array::copy_from_slice",
                message: format!(
                    "the array has {} elements{} but the slice {}; copy into a contiguous array of the slice's length",
                    self.len(),
                    if self.is_contiguous() {
                        ""
                    } else {
                        " and is not contiguous"
                    },
                    data.len()
                ),
            });
        }
        self.storage.copy_from_host(self.offset, as_bytes(data))
    }

    /// Sets every element to zero (bytes 0); for a non-contiguous view,
    /// only its elements (runs of adjacent elements are written at once).
    /// Synchronous: blocking writes outside any stream, after the queued
    /// work that uses the array; [`Array::zero_on`] is the stream-ordered,
    /// capturable form (Warp's `zero_`).
    ///
    /// # Errors
    ///
    /// [`Error::Cuda`] when the driver refuses the write to device memory;
    /// [`Error::WouldDeadlock`] when this thread holds the storage in a running CPU launch.
    pub fn zero(&self) -> Result<()> {
        let es = self.dtype.size;
        let bytes = self.len().saturating_mul(es);
        if self.is_contiguous() && self.offset == 0 && self.storage.bytes() == bytes {
            return self.storage.zero();
        }
        // Zeroes bytes `from..to` of the storage from a bounded buffer.
        const CHUNK: usize = 1 << 20;
        let zeros = try_vec(bytes.clamp(1, CHUNK), 0u8, "Array::zero")?;
        let write = |from: usize, to: usize| -> Result<()> {
            let mut at = from;
            while at < to {
                let n = (to - at).min(zeros.len());
                self.storage.copy_from_host(at, &zeros[..n])?;
                at += n;
            }
            Ok(())
        };
        if self.is_contiguous() {
            return write(self.offset, self.offset + bytes);
        }
        let mut run: Option<(usize, usize)> = None;
        for at in self.element_offsets() {
            run = match run {
                Some((from, to)) if to == at => Some((from, at + es)),
                Some((from, to)) => {
                    write(from, to)?;
                    Some((at, at + es))
                }
                None => Some((at, at + es)),
            };
        }
        match run {
            Some((from, to)) => write(from, to),
            None => Ok(()),
        }
    }

    /// Copies all of `src` into `self` (same dtype, shape, contiguous both;
    /// any devices or memory kinds). Synchronous: a blocking copy outside
    /// any stream, after the queued work that uses either array, done when
    /// it returns; [`Array::assign_on`] is the stream-ordered, capturable form (any
    /// strides; Warp's `assign` and `wp.copy`). When both arrays have
    /// gradients, `src`'s gradient is copied into `self`'s too, as Warp's
    /// `wp.copy` does. While a [`Tape`](crate::Tape)
    /// records on this thread and both arrays have gradients, the tape
    /// records the copy: its backward pass adds `self`'s gradient into
    /// `src`'s and then zeroes `self`'s (unless [`Array::retain_grad`]), as
    /// Warp's `wp.copy`.
    ///
    /// # Errors
    ///
    /// [`Error::ElementType`] or [`Error::Shape`] when `src` has another dtype or shape or
    /// either array is not contiguous; [`Error::Cuda`] when the copy fails.
    pub fn copy_from(&self, src: &Array) -> Result<()> {
        if src.dtype != self.dtype
            || src.shape() != self.shape()
            || !src.is_contiguous()
            || !self.is_contiguous()
        {
            return Err(Error::Shape {
                call: "Array::copy_from",
                message: format!(
                    "copying {} {:?} into {} {:?} needs equal dtypes and shapes and contiguous arrays",
                    src.dtype.name,
                    src.shape(),
                    self.dtype.name,
                    self.shape()
                ),
            });
        }
        self.storage.copy_from(
            self.offset,
            &src.storage,
            src.offset,
            self.len() * self.dtype.size,
        )?;
        // As Warp's `wp.copy`: when both arrays have gradients, the source's
        // gradient is copied too.
        if let (Some(sg), Some(dg)) = (&src.grad, &self.grad) {
            dg.copy_from(sg)?;
        }
        record_copy(src, self, None);
        Ok(())
    }

    /// The array as the kernel receives it (`wp::array_t<T>`).
    pub fn abi(&self) -> ArrayT {
        let mut shape = [0i32; MAX_DIMS];
        let mut strides = [0i32; MAX_DIMS];
        for i in 0..self.ndim {
            // Both fit int32: checked when the view was made (never truncated).
            shape[i] = i32::try_from(self.shape[i]).unwrap_or(0);
            strides[i] = i32::try_from(self.strides[i]).unwrap_or(0);
        }
        ArrayT {
            data: self.data_address(),
            grad: self.grad.as_ref().map_or(0, |g| g.data_address()),
            shape,
            strides,
            ndim: self.ndim as _,
            flags: if self.retain_grad {
                crate::abi::ARRAY_FLAG_RETAIN_GRAD
            } else {
                0
            },
            ..ArrayT::default()
        }
    }

    /// A typed view with `N` dimensions: `T` must be the array's dtype and
    /// `N` its number of dimensions (`array.typed::<f32, 2>()`).
    ///
    /// # Errors
    ///
    /// [`Error::ElementType`] when `T` is not the array's dtype;
    /// [`Error::Shape`] when the array does not have `N` dimensions (both
    /// name what the array holds and what was asked for).
    pub fn typed<T: Element, const N: usize>(&self) -> Result<TypedArray<T, N>> {
        self.check_element::<T>("Array::typed")?;
        check_ndim::<T, N>(self, "Array::typed")?;
        Ok(TypedArray {
            array: self.clone(),
            _t: PhantomData,
        })
    }
}

/// Refuses an array without `N` dimensions for a `TypedArray<T, N>`.
fn check_ndim<T: Element, const N: usize>(array: &Array, call: &'static str) -> Result<()> {
    if array.ndim == N {
        return Ok(());
    }
    Err(Error::Shape {
        call,
        message: format!(
            "TypedArray<{}, {N}> takes an array with {N} dimension(s) but the array has {} (shape {:?}); reshape it, or use TypedArray<{}, {}>",
            T::DTYPE.name,
            array.ndim,
            array.shape(),
            T::DTYPE.name,
            array.ndim
        ),
    })
}

fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    crate::abi::encode::element_bytes(data)
}

/// An [`Array`] whose element type `T` and number of dimensions `N` (1 to
/// 4) are known at compile time: what typed launchers take
/// (`&TypedArray<f32, 2>` for a `wp.array2d(dtype=float)` parameter), so a
/// wrong dtype or ndim fails to compile. Made with [`TypedArray::zeros`],
/// [`TypedArray::from_slice`] or [`Array::typed`], which check both.
pub struct TypedArray<T: Element, const N: usize> {
    array: Array,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element, const N: usize> Clone for TypedArray<T, N> {
    fn clone(&self) -> Self {
        TypedArray {
            array: self.array.clone(),
            _t: PhantomData,
        }
    }
}

impl<T: Element, const N: usize> fmt::Debug for TypedArray<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TypedArray<{}, {N}>({:?})", T::DTYPE.name, self.array)
    }
}

impl<T: Element, const N: usize> TypedArray<T, N> {
    /// A zeroed array of `shape` in `device`'s memory (device memory for
    /// CUDA, host memory for the CPU).
    ///
    /// # Errors
    ///
    /// As [`Array::zeros`]; [`Error::Shape`] when `N` is not 1 to 4.
    pub fn zeros(device: impl IntoDevice, shape: [usize; N]) -> Result<Self> {
        Array::zeros::<T>(device, &shape)?.typed()
    }

    /// An array of `shape` holding `data` (row-major).
    ///
    /// # Errors
    ///
    /// As [`Array::from_slice`]; [`Error::Shape`] when `N` is not 1 to 4.
    pub fn from_slice(device: impl IntoDevice, data: &[T], shape: [usize; N]) -> Result<Self> {
        Array::from_slice(device, data, &shape)?.typed()
    }

    /// The elements, row-major.
    ///
    /// # Errors
    ///
    /// The errors of [`Array::to_bytes`].
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.array.to_vec()
    }

    /// Extent of each dimension.
    pub fn shape(&self) -> [usize; N] {
        let mut s = [0usize; N];
        s.copy_from_slice(self.array.shape());
        s
    }

    /// The untyped array (what [`TypedArg::Array`](crate::TypedArg::Array)
    /// takes).
    pub fn as_array(&self) -> &Array {
        &self.array
    }

    /// The same array with a zeroed gradient.
    ///
    /// # Errors
    ///
    /// The errors of [`Array::with_grad`].
    pub fn with_grad(self) -> Result<Self> {
        Ok(TypedArray {
            array: self.array.with_grad()?,
            _t: PhantomData,
        })
    }
}

impl<T: Element, const N: usize> Deref for TypedArray<T, N> {
    type Target = Array;
    fn deref(&self) -> &Array {
        &self.array
    }
}

impl<T: Element, const N: usize> AsRef<Array> for TypedArray<T, N> {
    fn as_ref(&self) -> &Array {
        &self.array
    }
}

/// The tape's recorder of array copies (`launch::record::record_copy`),
/// set when the first recording opens in the process: array operations
/// hand their copies to it without naming the tape, which knows arrays
/// (not the other way round).
static COPY_RECORDER: OnceLock<fn(&Array, &Array, Option<&Stream>)> = OnceLock::new();

/// Sets the recorder of [`record_copy`] (the first call wins: there is one).
pub(crate) fn set_copy_recorder(recorder: fn(&Array, &Array, Option<&Stream>)) {
    let _ = COPY_RECORDER.set(recorder);
}

/// Hands a copy of `src` into `dst`, queued on `stream` (`None`: done by
/// the host or on the device's current stream), to the tape's recorder,
/// which keeps it when a recording is open on this thread and both arrays
/// have gradients. Before any recording has opened, there is none.
pub(crate) fn record_copy(src: &Array, dst: &Array, stream: Option<&Stream>) {
    if let Some(record) = COPY_RECORDER.get() {
        record(src, dst, stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const CHILD: &str = "WARP_LAUNCH_ARRAY_TEST_CHILD";

    /// Runs `body` in a child process (this test binary, running only the
    /// test `name` of this module), so that an abort or a crash fails the
    /// test instead of killing the runner; in the parent, returns the
    /// child's output after checking it exited successfully within 60 s.
    fn in_child(name: &str, body: impl FnOnce()) -> String {
        // This module's path as the test harness names it (no crate prefix).
        let here = module_path!();
        let here = here.strip_prefix("warp_launch::").unwrap_or(here);
        let test = format!("{here}::{name}");
        if std::env::var(CHILD).as_deref() == Ok(test.as_str()) {
            body();
            return String::new();
        }
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, &test)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > Duration::from_secs(60) {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("{test}: the child process ran over 60 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            status.success(),
            "{test}: the child process failed ({status}):\n{text}"
        );
        text
    }

    fn dt(name: &str) -> &'static DType {
        DType::by_name(name).unwrap()
    }

    fn host(bytes: usize) -> Arc<Storage> {
        Arc::new(Storage::host(bytes).unwrap())
    }

    fn message(r: Result<Array>) -> String {
        match r {
            Ok(a) => panic!("accepted: {a:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// Finding: huge extents x strides wrapped in `from_parts`' span (a CPU
    /// kernel then wrote into another array), `offset = isize::MAX` was
    /// accepted (SIGSEGV), and the span panicked on overflow in debug.
    #[test]
    fn from_parts_spans_are_exact_and_offsets_inside_the_storage() {
        let u8t = dt("uint8");
        let big = i32::MAX as usize;
        let bigs = i32::MAX as isize;
        // Element counts beyond the address space (their spans wrapped isize too).
        for (shape, strides) in [
            (vec![big; 4], vec![bigs; 4]),
            (vec![big; 3], vec![bigs; 3]),
            (vec![big; 4], vec![-bigs - 1; 4]),
        ] {
            let m = message(Array::from_parts(
                host(16),
                Device::Cpu,
                0,
                u8t,
                &shape,
                &strides,
            ));
            assert!(m.starts_with("Array::from_parts: shape ["), "{m}");
            assert!(m.contains("holds more bytes than the address space"), "{m}");
        }
        let cases: Vec<(usize, Vec<usize>, Vec<isize>)> = vec![
            // offset + sum of (extent - 1) * stride: about 2^63 + 2^62, wraps isize.
            (1 << 62, vec![big, big], vec![bigs, bigs]),
            (1 << 62, vec![big, big, 2], vec![bigs, bigs, bigs]),
            (0, vec![big, big], vec![bigs, -bigs]),
            // Offsets past the storage, for empty and non-empty views.
            (isize::MAX as usize, vec![1], vec![1]),
            (isize::MAX as usize, vec![0], vec![1]),
            (usize::MAX, vec![1], vec![1]),
            (usize::MAX, vec![0], vec![1]),
            (17, vec![0], vec![1]),
            (16, vec![1], vec![1]),
            // One byte past either end.
            (0, vec![17], vec![1]),
            (15, vec![17], vec![-1]),
            (0, vec![2, 2], vec![8, 9]),
        ];
        for (offset, shape, strides) in cases {
            let m = message(Array::from_parts(
                host(16),
                Device::Cpu,
                offset,
                u8t,
                &shape,
                &strides,
            ));
            assert!(m.starts_with("Array::from_parts: "), "{m}");
            assert!(m.contains("storage holds 0..16"), "{m}");
        }
        // The exact limits are accepted: a reversed view over all 16 bytes,
        // a broadcast one, an empty one at the end.
        let s = host(16);
        s.copy_from_host(0, &(0u8..16).collect::<Vec<_>>()).unwrap();
        let rev = Array::from_parts(s.clone(), Device::Cpu, 15, u8t, &[16], &[-1]).unwrap();
        assert_eq!(
            rev.to_vec::<u8>().unwrap(),
            (0u8..16).rev().collect::<Vec<_>>()
        );
        let bc = Array::from_parts(s.clone(), Device::Cpu, 3, u8t, &[big, 2], &[0, 1]).unwrap();
        assert_eq!(bc.len(), big * 2);
        let end = Array::from_parts(s, Device::Cpu, 16, u8t, &[0], &[1]).unwrap();
        assert_eq!(end.to_vec::<u8>().unwrap(), Vec::<u8>::new());
    }

    /// Offsets and strides that are not multiples of the dtype's alignment
    /// would make kernels read misaligned elements.
    #[test]
    fn misaligned_views_are_refused() {
        let f32t = dt("float32");
        let m = message(Array::from_parts(
            host(64),
            Device::Cpu,
            2,
            f32t,
            &[2],
            &[4],
        ));
        assert!(
            m.contains("offset 2 B is not a multiple of float32's alignment (4 B)"),
            "{m}"
        );
        let m = message(Array::from_parts(
            host(64),
            Device::Cpu,
            0,
            f32t,
            &[2],
            &[6],
        ));
        assert!(m.contains("axis 0 has a byte stride of 6"), "{m}");
    }

    /// A broadcast view whose element count overflows (old: `len()` wrapped
    /// or panicked).
    #[test]
    fn element_counts_beyond_the_address_space_are_refused() {
        let big = i32::MAX as usize;
        let m = message(Array::from_parts(
            host(16),
            Device::Cpu,
            0,
            dt("float32"),
            &[big; 4],
            &[0; 4],
        ));
        assert!(m.contains("holds more bytes than the address space"), "{m}");
    }

    /// Finding: byte strides above `i32::MAX` were accepted by `zeros`,
    /// `reshape` and `slice_step` and truncated in `array_t` (on the H200 a
    /// write went 4 GiB away).
    #[test]
    fn strides_beyond_int32_are_refused_by_zeros_and_reshape() {
        let f32t = dt("float32");
        // Row stride 2^30 * 4 B = 4 GiB (the array is empty: nothing allocated).
        let m = message(Array::zeros_dtype(Device::Cpu, f32t, &[0, 1 << 30]));
        assert!(
            m.starts_with("Array::zeros: axis 0 would have a byte stride of 4294967296, outside -2147483648..=2147483647"),
            "{m}"
        );
        let e = Array::zeros_dtype(Device::Cpu, f32t, &[0]).unwrap();
        let m = message(e.reshape(&[0, 1 << 29]));
        assert!(
            m.starts_with("Array::reshape: axis 0 would have a byte stride of 2147483648"),
            "{m}"
        );
        // The largest stride that fits is accepted.
        let ok = Array::zeros_dtype(Device::Cpu, f32t, &[0, (1 << 29) - 1, 1]).unwrap();
        assert_eq!(ok.strides(), &[(1 << 31) - 4, 4, 4]);
        let m = message(Array::zeros_dtype(Device::Cpu, f32t, &[1 << 31]));
        assert!(
            m.contains("axis 0 has extent 2147483648, above the limit 2147483647"),
            "{m}"
        );
    }

    /// The audit's `zeros(cpu, f32, [2, 2^30])` (8 GiB, row stride 4 GiB),
    /// in a child: the old code allocated it (or aborted).
    #[test]
    fn zeros_with_a_4_gib_row_is_refused_before_allocating() {
        let out = in_child(
            "zeros_with_a_4_gib_row_is_refused_before_allocating",
            || {
                let m = message(Array::zeros_dtype(
                    Device::Cpu,
                    dt("float32"),
                    &[2, 1 << 30],
                ));
                println!("CHILD: {m}");
            },
        );
        if !out.is_empty() {
            assert!(
                out.contains("CHILD: Array::zeros: axis 0 would have a byte stride of 4294967296"),
                "{out}"
            );
        }
    }

    /// `slice_step` with a step whose stride leaves int32: refused for two
    /// or more indices (a 2 GiB array, in a child); for one index the stride
    /// is never used and stays; no overflow panic for any step (the old
    /// code panicked in debug for `step = 2^62`).
    #[test]
    fn slice_step_strides_are_checked_and_never_overflow() {
        let f32t = dt("float32");
        let a = Array::from_slice(Device::Cpu, &[1f32, 2., 3., 4., 5., 6., 7., 8.], &[8]).unwrap();
        for step in [1 << 29, 1 << 62, usize::MAX] {
            let v = a.slice_step(0, 1..8, step).unwrap();
            assert_eq!(
                (v.shape(), v.strides(), v.offset()),
                (&[1][..], &[4][..], 4)
            );
            assert_eq!(v.to_vec::<f32>().unwrap(), vec![2.0]);
        }
        let v = a.slice_step(0, 8..8, usize::MAX).unwrap();
        assert!(v.is_empty() && v.offset() == 0);
        let v = a.slice_step(0, 1..8, 3).unwrap();
        assert_eq!(v.strides(), &[12]);
        assert_eq!(v.to_vec::<f32>().unwrap(), vec![2.0, 5.0, 8.0]);
        // A negative-stride view sliced again stays exact.
        let rev =
            Array::from_parts(a.storage().clone(), Device::Cpu, 28, f32t, &[8], &[-4]).unwrap();
        let r2 = rev.slice_step(0, 1..8, 2).unwrap();
        assert_eq!(r2.to_vec::<f32>().unwrap(), vec![7.0, 5.0, 3.0, 1.0]);
        assert_eq!(r2.abi().strides[0], -8);
    }

    #[test]
    fn slice_step_of_a_2_gib_array_refuses_a_2_gib_stride() {
        let out = in_child("slice_step_of_a_2_gib_array_refuses_a_2_gib_stride", || {
            let n = (1usize << 29) + 1;
            let a = Array::zeros_dtype(Device::Cpu, dt("float32"), &[n]).unwrap();
            let m = message(a.slice_step(0, 0..n, 1 << 29));
            println!("CHILD: {m}");
        });
        if !out.is_empty() {
            assert!(
                out.contains(
                    "CHILD: Array::slice_step: axis 0 would have a byte stride of 2147483648"
                ),
                "{out}"
            );
        }
    }

    /// Finding: `zeros(cpu, f32, [2^20, 2^20])` aborted on allocation
    /// failure. A size no machine can map (about 2^62 B) must be an error
    /// naming the bytes, in a child so that an abort fails the test.
    #[test]
    fn host_allocation_failure_is_an_error() {
        let out = in_child("host_allocation_failure_is_an_error", || {
            let n = i32::MAX as usize;
            let m = message(Array::zeros_dtype(Device::Cpu, dt("uint8"), &[n, n]));
            println!("CHILD: {m}");
            let m = Storage::host(isize::MAX as usize).unwrap_err().to_string();
            println!("CHILD: {m}");
        });
        if !out.is_empty() {
            let n = (i32::MAX as usize).pow(2);
            assert!(
                out.contains(&format!(
                    "CHILD: Array::zeros: cannot allocate {n} B of host memory"
                )),
                "{out}"
            );
            assert!(
                out.contains(&format!(
                    "CHILD: Storage::host: cannot allocate {} B of host memory",
                    isize::MAX
                )),
                "{out}"
            );
        }
    }

    /// Finding: `with_grad()` on a strided view gave a contiguous gradient,
    /// while Warp indexes a gradient with the array's strides: the adjoint
    /// of the last element landed past the gradient's memory.
    #[test]
    fn gradients_of_views_have_the_views_strides() {
        let f32t = dt("float32");
        let a = Array::zeros_dtype(Device::Cpu, f32t, &[8]).unwrap();
        let views = [
            a.slice_step(0, 1..8, 2).unwrap(),
            a.reshape(&[2, 4]).unwrap().transpose(0, 1).unwrap(),
            Array::from_parts(a.storage().clone(), Device::Cpu, 28, f32t, &[4], &[-8]).unwrap(),
        ];
        for v in views {
            let v = v.with_grad().unwrap();
            let g = v.grad().unwrap();
            assert_eq!((g.shape(), g.strides()), (v.shape(), v.strides()));
            // Every element Warp's index_grad reaches lies in the gradient's memory.
            let abi = v.abi();
            let (lo, hi) = (
                g.storage().address(),
                g.storage().address() + g.storage().bytes() as u64,
            );
            for at in v.element_offsets() {
                let rel = at as i64 - v.offset() as i64;
                let addr = (abi.grad as i64 + rel) as u64;
                assert!(
                    addr >= lo && addr + 4 <= hi,
                    "{v:?}: {addr:#x} outside {lo:#x}..{hi:#x}"
                );
            }
            // The gradient covers exactly the bytes the view reaches.
            let (vlo, vhi) = v.span();
            assert_eq!(g.storage().bytes(), vhi - vlo);
        }
    }

    /// Views of an array that has a gradient view its gradient the same
    /// way, and zeroing a strided gradient zeroes only its elements (the
    /// old `zero` refused non-contiguous views, so `Tape::zero` failed).
    #[test]
    fn views_keep_the_gradient_and_zero_only_their_elements() {
        let a = Array::from_slice(Device::Cpu, &[0f32; 8], &[2, 4])
            .unwrap()
            .with_grad()
            .unwrap();
        a.grad().unwrap().copy_from_slice(&[1f32; 8]).unwrap();
        let v = a.slice_step(1, 1..4, 2).unwrap();
        let g = v.grad().unwrap();
        assert_eq!((g.offset(), g.strides()), (v.offset(), v.strides()));
        assert!(Arc::ptr_eq(g.storage(), a.grad().unwrap().storage()));
        g.zero().unwrap();
        assert_eq!(
            a.grad().unwrap().to_vec::<f32>().unwrap(),
            vec![1., 0., 1., 0., 1., 0., 1., 0.]
        );
        let t = a.transpose(0, 1).unwrap();
        assert_eq!(t.grad().unwrap().strides(), t.strides());
        let r = a.reshape(&[8]).unwrap();
        assert_eq!(r.grad().unwrap().strides(), &[4]);
    }
}
