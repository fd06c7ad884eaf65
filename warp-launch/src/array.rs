//! Arrays of 1 to 4 dimensions with Warp's layout (byte strides, row-major
//! by default), an element type known at run time, an optional gradient
//! array, and typed views ([`TypedArray`]). Storage is shared through an
//! `Arc` ([`Storage`]: device, page-locked host, managed or plain host
//! memory), so a recorded launch that holds an array keeps it alive.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, Range};
use std::sync::Arc;

use cuda_api::{Allocation, MemoryKind};

use crate::storage::{Memory, Storage};

use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::generated::abi::ArrayT;

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

fn check_shape(shape: &[usize], call: &'static str) -> Result<(usize, [usize; MAX_DIMS])> {
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
        if e > i32::MAX as usize {
            return Err(Error::Shape {
                call,
                message: format!(
                    "extent {i} is {e}, more than Warp's int32 shape can hold ({}); split the array",
                    i32::MAX
                ),
            });
        }
        s[i] = e;
    }
    Ok((shape.len(), s))
}

fn contiguous_strides(ndim: usize, shape: &[usize; MAX_DIMS], elem: usize) -> [isize; MAX_DIMS] {
    let mut st = [0isize; MAX_DIMS];
    let mut acc = elem as isize;
    for i in (0..ndim).rev() {
        st[i] = acc;
        acc *= shape[i].max(1) as isize;
    }
    st
}

impl Array {
    /// A zeroed array of `dtype` with `shape` in `device`'s memory (device
    /// memory for CUDA, host memory for the CPU).
    pub fn zeros(device: Device, dtype: &'static DType, shape: &[usize]) -> Result<Array> {
        Self::zeros_in(device, dtype, shape, MemoryKind::Device)
    }

    /// A zeroed array of `dtype` with `shape` in `kind` memory: for a CUDA
    /// device, of its primary context; for the CPU, `Device` means plain host
    /// memory and page-locked or managed memory comes from `cuda:0`'s
    /// context (reachable from the host and from CUDA kernels, as Warp's
    /// pinned CPU arrays).
    pub fn zeros_in(
        device: Device,
        dtype: &'static DType,
        shape: &[usize],
        kind: MemoryKind,
    ) -> Result<Array> {
        let (ndim, shape) = check_shape(shape, "Array::zeros")?;
        let count = shape[..ndim]
            .iter()
            .try_fold(1usize, |a, &e| a.checked_mul(e));
        let bytes = count
            .and_then(|c| c.checked_mul(dtype.size))
            .ok_or_else(|| Error::Shape {
                call: "Array::zeros",
                message: format!(
                    "{:?} elements of {} B overflow the address space",
                    &shape[..ndim],
                    dtype.size
                ),
            })?;
        let storage = match (device, kind) {
            (Device::Cpu, MemoryKind::Device) => Storage::host(bytes),
            (Device::Cpu, _) => Storage::cuda(Allocation::zeroed(
                &Device::Cuda(0).context()?,
                bytes,
                kind,
            )?),
            (_, _) => Storage::cuda(Allocation::zeroed(&device.context()?, bytes, kind)?),
        };
        let storage = Arc::new(storage);
        Ok(Array {
            storage,
            offset: 0,
            dtype,
            ndim,
            strides: contiguous_strides(ndim, &shape, dtype.size),
            shape,
            device,
            grad: None,
        })
    }

    /// An array of `shape` holding `data` (row-major), in device memory.
    pub fn from_slice<T: Element>(device: Device, data: &[T], shape: &[usize]) -> Result<Array> {
        Self::from_slice_in(device, data, shape, MemoryKind::Device)
    }

    /// An array of `shape` holding `data` (row-major), in `kind` memory.
    pub fn from_slice_in<T: Element>(
        device: Device,
        data: &[T],
        shape: &[usize],
        kind: MemoryKind,
    ) -> Result<Array> {
        let a = Self::zeros_in(device, T::dtype(), shape, kind)?;
        if a.len() != data.len() {
            return Err(Error::Shape {
                call: "Array::from_slice",
                message: format!(
                    "shape {shape:?} holds {} elements but the slice has {}; pass a slice of {} elements",
                    a.len(),
                    data.len(),
                    a.len()
                ),
            });
        }
        a.storage.copy_from_host(0, as_bytes(data))?;
        Ok(a)
    }

    /// A view of `storage` on `device`: `dtype` elements of `shape` with
    /// byte `strides`, starting `offset` bytes in. Every element it reaches
    /// must lie inside the storage, and each stride must fit Warp's `int`.
    pub fn from_parts(
        storage: Arc<Storage>,
        device: Device,
        offset: usize,
        dtype: &'static DType,
        shape: &[usize],
        strides: &[isize],
    ) -> Result<Array> {
        let (ndim, shape) = check_shape(shape, "Array::from_parts")?;
        if strides.len() != ndim || strides.iter().any(|s| i32::try_from(*s).is_err()) {
            return Err(Error::Shape {
                call: "Array::from_parts",
                message: format!(
                    "{} strides {strides:?} for a shape of {ndim} dimensions; give one byte stride per dimension, each within int32",
                    strides.len()
                ),
            });
        }
        let mut st = [0isize; MAX_DIMS];
        st[..ndim].copy_from_slice(strides);
        let a = Array {
            storage,
            offset,
            dtype,
            ndim,
            shape,
            strides: st,
            device,
            grad: None,
        };
        let (lo, hi) = a.span();
        if !a.is_empty() && (lo < 0 || hi > a.storage.bytes() as isize) {
            return Err(Error::Shape {
                call: "Array::from_parts",
                message: format!(
                    "the view reaches bytes {lo}..{hi} but the storage holds {} B; keep every element inside it",
                    a.storage.bytes()
                ),
            });
        }
        Ok(a)
    }

    /// The same array with a zeroed gradient array of the same shape and
    /// dtype (contiguous, same device and memory kind).
    pub fn with_grad(mut self) -> Result<Array> {
        let kind = match self.storage.memory() {
            Memory::Cuda(k) => k,
            _ => MemoryKind::Device,
        };
        let g = Array::zeros_in(self.device, self.dtype, self.shape(), kind)?;
        self.grad = Some(Box::new(g));
        Ok(self)
    }

    /// The gradient array, if any.
    pub fn grad(&self) -> Option<&Array> {
        self.grad.as_deref()
    }

    /// The element type.
    pub fn dtype(&self) -> &'static DType {
        self.dtype
    }

    /// Number of dimensions (1 to 4).
    pub fn ndim(&self) -> usize {
        self.ndim
    }

    /// Extent of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.shape[..self.ndim]
    }

    /// Byte stride of each dimension.
    pub fn strides(&self) -> &[isize] {
        &self.strides[..self.ndim]
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape().iter().product()
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
    pub fn data_address(&self) -> u64 {
        if self.storage.bytes() == 0 {
            0
        } else {
            self.storage.address() + self.offset as u64
        }
    }

    /// Whether the elements are packed row-major with no gaps.
    pub fn is_contiguous(&self) -> bool {
        contiguous_strides(self.ndim, &self.shape, self.dtype.size)[..self.ndim]
            == self.strides[..self.ndim]
            || self.len() <= 1
    }

    /// The view of indices `range` along `axis` (same number of dimensions).
    pub fn slice(&self, axis: usize, range: Range<usize>) -> Result<Array> {
        self.slice_step(axis, range, 1)
    }

    /// Every `step`-th index of `range` along `axis`: a non-contiguous view.
    pub fn slice_step(&self, axis: usize, range: Range<usize>, step: usize) -> Result<Array> {
        if axis >= self.ndim || range.start > range.end || range.end > self.shape[axis] || step == 0
        {
            return Err(Error::Shape {
                call: "Array::slice",
                message: format!(
                    "axis {axis}, range {range:?}, step {step} do not fit shape {:?}; use an axis below {}, a range inside 0..extent and a step of at least 1",
                    self.shape(),
                    self.ndim
                ),
            });
        }
        let mut v = self.clone();
        v.offset = (self.offset as isize + range.start as isize * self.strides[axis]) as usize;
        v.shape[axis] = range.len().div_ceil(step);
        v.strides[axis] = self.strides[axis] * step as isize;
        v.grad = match &self.grad {
            Some(g) => Some(Box::new(g.slice_step(axis, range, step)?)),
            None => None,
        };
        Ok(v)
    }

    /// The view with axes `a` and `b` swapped (non-contiguous).
    pub fn transpose(&self, a: usize, b: usize) -> Result<Array> {
        if a >= self.ndim || b >= self.ndim {
            return Err(Error::Shape {
                call: "Array::transpose",
                message: format!(
                    "axes {a} and {b} do not exist in an array of {} dimensions",
                    self.ndim
                ),
            });
        }
        let mut v = self.clone();
        v.shape.swap(a, b);
        v.strides.swap(a, b);
        v.grad = match &self.grad {
            Some(g) => Some(Box::new(g.transpose(a, b)?)),
            None => None,
        };
        Ok(v)
    }

    /// The same elements with another shape (contiguous arrays only).
    pub fn reshape(&self, shape: &[usize]) -> Result<Array> {
        let (ndim, s) = check_shape(shape, "Array::reshape")?;
        let n: usize = s[..ndim].iter().product();
        if n != self.len() || !self.is_contiguous() {
            return Err(Error::Shape {
                call: "Array::reshape",
                message: format!(
                    "cannot view {} elements of shape {:?}{} as shape {shape:?} ({n} elements); reshape a contiguous array to the same element count",
                    self.len(),
                    self.shape(),
                    if self.is_contiguous() {
                        ""
                    } else {
                        " (not contiguous)"
                    }
                ),
            });
        }
        let mut v = self.clone();
        v.ndim = ndim;
        v.shape = s;
        v.strides = contiguous_strides(ndim, &s, self.dtype.size);
        v.grad = match &self.grad {
            Some(g) => Some(Box::new(g.reshape(shape)?)),
            None => None,
        };
        Ok(v)
    }

    /// The byte range of the storage the view reaches: (first byte, end).
    fn span(&self) -> (isize, isize) {
        let (mut lo, mut hi) = (self.offset as isize, self.offset as isize);
        if self.is_empty() {
            return (lo, hi);
        }
        for i in 0..self.ndim {
            let ext = (self.shape[i] as isize - 1) * self.strides[i];
            if ext < 0 { lo += ext } else { hi += ext }
        }
        (lo, hi + self.dtype.size as isize)
    }

    /// The elements as bytes, row-major (gathering a non-contiguous view).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let (lo, hi) = self.span();
        let (lo, hi) = (lo as usize, hi as usize);
        let mut raw = vec![0u8; hi - lo];
        self.storage.copy_to_host(lo, &mut raw)?;
        if self.is_contiguous() {
            return Ok(raw);
        }
        let es = self.dtype.size;
        let mut out = Vec::with_capacity(self.len() * es);
        let mut idx = [0usize; MAX_DIMS];
        for _ in 0..self.len() {
            let mut at = self.offset as isize - lo as isize;
            at += idx[..self.ndim]
                .iter()
                .zip(&self.strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>();
            out.extend_from_slice(&raw[at as usize..at as usize + es]);
            for d in (0..self.ndim).rev() {
                idx[d] += 1;
                if idx[d] < self.shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Ok(out)
    }

    fn check_element<T: Element>(&self, call: &'static str) -> Result<()> {
        if !std::ptr::eq(T::dtype(), self.dtype) {
            return Err(Error::ElementType {
                call,
                array: self.dtype.name,
                requested: T::DTYPE,
                rust: std::any::type_name::<T>(),
            });
        }
        Ok(())
    }

    /// The elements, row-major, as `T` (which must be the array's dtype).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_element::<T>("Array::to_vec")?;
        let bytes = self.to_bytes()?;
        let mut v = Vec::<T>::with_capacity(self.len());
        // SAFETY: `bytes` holds len() elements of T's size; T is plain data valid for any bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), bytes.len());
            v.set_len(self.len());
        }
        Ok(v)
    }

    /// Copies `data` (row-major) into a contiguous array.
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

    /// Sets every byte of the array's storage range to zero (contiguous arrays).
    pub fn zero(&self) -> Result<()> {
        if self.is_contiguous()
            && self.offset == 0
            && self.storage.bytes() == self.len() * self.dtype.size
        {
            return self.storage.zero();
        }
        let zeros = vec![0u8; self.len() * self.dtype.size];
        if self.is_contiguous() {
            return self.storage.copy_from_host(self.offset, &zeros);
        }
        Err(Error::Shape {
            call: "Array::zero",
            message: "zeroing a non-contiguous view is not supported; zero the array it views"
                .into(),
        })
    }

    /// Copies all of `src` into `self` (same dtype, shape, contiguous both;
    /// any devices or memory kinds).
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
        )
    }

    /// The array as the kernel receives it (`wp::array_t<T>`).
    pub fn abi(&self) -> ArrayT {
        let mut shape = [0i32; MAX_DIMS];
        let mut strides = [0i32; MAX_DIMS];
        for i in 0..self.ndim {
            shape[i] = self.shape[i] as i32;
            strides[i] = self.strides[i] as i32;
        }
        ArrayT {
            data: self.data_address(),
            grad: self.grad.as_ref().map_or(0, |g| g.data_address()),
            shape,
            strides,
            ndim: self.ndim as _,
            flags: 0,
        }
    }

    /// A typed view: `T` must be the array's dtype.
    pub fn typed<T: Element>(&self) -> Result<TypedArray<T>> {
        self.check_element::<T>("Array::typed")?;
        Ok(TypedArray {
            array: self.clone(),
            _t: PhantomData,
        })
    }
}

fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: T is plain data; the byte view covers exactly `data`.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), size_of_val(data)) }
}

/// An [`Array`] whose element type is known at compile time.
#[derive(Clone, Debug)]
pub struct TypedArray<T: Element> {
    array: Array,
    _t: PhantomData<T>,
}

impl<T: Element> TypedArray<T> {
    /// A zeroed array of `shape` in device memory.
    pub fn zeros(device: Device, shape: &[usize]) -> Result<Self> {
        Array::zeros(device, T::dtype(), shape)?.typed()
    }
    /// An array of `shape` holding `data`.
    pub fn from_slice(device: Device, data: &[T], shape: &[usize]) -> Result<Self> {
        Array::from_slice(device, data, shape)?.typed()
    }
    /// The elements, row-major.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.array.to_vec()
    }
    /// The untyped array.
    pub fn untyped(&self) -> &Array {
        &self.array
    }
    /// The same array with a zeroed gradient.
    pub fn with_grad(self) -> Result<Self> {
        self.array.with_grad()?.typed()
    }
}

impl<T: Element> Deref for TypedArray<T> {
    type Target = Array;
    fn deref(&self) -> &Array {
        &self.array
    }
}
