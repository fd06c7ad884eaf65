//! Arrays over memory owned elsewhere (Warp's `wp.array(ptr=...)`): the
//! owner is kept alive by the array's storage, the memory is never freed
//! here, and a view that escapes the allocation is refused when the driver
//! knows its extent. The safe conversions (cudarc, DLPack, candle) build on
//! [`Array::from_ptr`].

use std::any::Any;
use std::sync::Arc;

use cuda_api::{Allocation, MemoryKind, MemoryType};

use crate::abi::DType;
use crate::array::{Array, Storage};
use crate::device::{Device, IntoDevice};
use crate::error::{Error, Result};

fn interop(call: &'static str, what: &'static str, message: String) -> Error {
    Error::Interop {
        call,
        what,
        message,
    }
}

/// Row-major byte strides of `shape` for elements of `size` bytes.
pub(crate) fn row_major(shape: &[usize], size: usize) -> Vec<isize> {
    let mut st = vec![0isize; shape.len()];
    let mut acc = size as i128;
    for i in (0..shape.len()).rev() {
        st[i] = isize::try_from(acc).unwrap_or(isize::MAX);
        acc = acc.saturating_mul(shape[i].max(1) as i128);
    }
    st
}

/// Bytes `lo..hi` a view of `shape` and byte `strides` reaches around its
/// first element (`lo <= 0`); `(0, 0)` for an empty view.
fn span(shape: &[usize], strides: &[isize], size: usize) -> (i128, i128) {
    if shape.contains(&0) {
        return (0, 0);
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&n, &s) in shape.iter().zip(strides) {
        let ext = (n as i128 - 1) * s as i128;
        if ext < 0 { lo += ext } else { hi += ext }
    }
    (lo, hi + size as i128)
}

/// The memory kind the driver reports for `address` on `device`, or a
/// refusal naming what it is instead.
fn cuda_kind(address: u64, device: Device, call: &'static str) -> Result<MemoryKind> {
    let Some(loc) = cuda_api::pointer_location(address)? else {
        return Err(interop(
            call,
            "device",
            format!(
                "the CUDA driver knows no memory at {address:#x}, so kernels on {device} cannot reach it; pass device memory, page-locked or managed memory, or make the array on \"cpu\""
            ),
        ));
    };
    if loc.managed {
        return Ok(MemoryKind::Managed);
    }
    match loc.memory_type {
        MemoryType::Host => Ok(MemoryKind::PinnedHost),
        MemoryType::Device if loc.device == device.ordinal() => Ok(MemoryKind::Device),
        _ => Err(interop(
            call,
            "device",
            format!(
                "the memory at {address:#x} is {loc}, not memory of {device}; make the array on the device that holds it"
            ),
        )),
    }
}

impl Array {
    /// An array over memory owned elsewhere, without copying (Warp's
    /// `wp.array(ptr=..., shape=..., strides=...)`): `dtype` elements of
    /// `shape` whose first element is at `address` (a device address for a
    /// CUDA device, a host address for `"cpu"`), with byte `strides`
    /// (row-major when `None`; negative and zero strides allowed). `owner`
    /// (any value that keeps the memory alive) is held by the array's
    /// storage until the last array, view or recorded launch that uses it
    /// drops, and for CUDA memory until the work queued on it is done; the
    /// memory is never freed by this crate.
    ///
    /// For a CUDA device the driver is asked what the memory is (device
    /// memory of this device, page-locked or managed memory; anything else
    /// is refused) and which allocation holds it (`cuMemGetAddressRange`):
    /// when it knows, the storage is that whole allocation and a view that
    /// leaves it is refused; when it does not, the storage is exactly the
    /// bytes the view reaches, and the promise below covers them.
    ///
    /// For `"cpu"`, when a CUDA driver can be loaded it is asked where the
    /// memory lives, and device memory is refused (host code cannot reach
    /// it); without a driver no device memory exists and the address is
    /// taken as host memory.
    ///
    /// Memory this process already tracks (bytes that the storage of a live
    /// array holds: one made here, imported, or exported and imported back)
    /// has one owner record: the new array is a view of that storage, with
    /// its lock, ordering state and kind, and keeps it alive; `owner` is
    /// dropped at once. Bytes that overlap such a storage without lying
    /// inside it are refused.
    ///
    /// Otherwise a new storage is made. Its host reads, writes and free
    /// synchronise the device's context (work on the memory through other
    /// handles is not seen here), and so do those of an [`Array`] given as
    /// the owner ([`cuda_api::Allocation::share`]). Any other handle to the
    /// memory orders its own host access after this array's launches.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use warp_launch::{Array, DType, MemoryKind};
    /// # fn main() -> warp_launch::Result<()> {
    /// let src = Array::from_slice("cuda:0", &[1.0f32, 2.0, 3.0, 4.0], &[4])?;
    /// // SAFETY: `src` (the owner) holds 4 float32 at its data address for as long as it lives.
    /// let every_other = unsafe {
    ///     Array::from_ptr("cuda:0", src.data_address(), DType::FLOAT32, &[2], Some(&[8][..]), Arc::new(src.clone()))?
    /// };
    /// assert_eq!(every_other.to_vec::<f32>()?, vec![1.0, 3.0]);
    /// // A view past the allocation's end is refused.
    /// // SAFETY: as above; the call is refused before anything is read.
    /// assert!(unsafe {
    ///     Array::from_ptr("cuda:0", src.data_address(), DType::FLOAT32, &[8], None, Arc::new(src))
    /// }.is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    ///
    /// Every byte the view reaches (for CUDA memory whose extent the driver
    /// knows: the whole allocation, which is then checked) must be valid
    /// to read and write as `dtype` elements for as long as `owner` lives,
    /// and no other code may write it while work on this array may run
    /// (other users order their work with it themselves, for example by
    /// synchronising their stream before the call). For `"cpu"` no Rust
    /// reference to the memory may be used while the array is.
    ///
    /// # Errors
    ///
    /// [`Error::BadDevice`] for a name that is no device; [`Error::Shape`]
    /// for a shape, strides or alignment that no array has (as
    /// [`Array::from_parts`]), a null address for a non-empty view;
    /// [`Error::Interop`] for CUDA memory of another device or memory the
    /// driver does not know, device memory for `"cpu"` (`what` is
    /// `"device"`), a view that leaves the driver's allocation
    /// (`"extent"`), or one that overlaps a tracked storage without lying
    /// inside it (`"overlap"`); [`Error::Cuda`] when the driver cannot
    /// answer.
    pub unsafe fn from_ptr(
        device: impl IntoDevice,
        address: u64,
        dtype: &'static DType,
        shape: &[usize],
        strides: Option<&[isize]>,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Result<Array> {
        let device = device.into_device()?;
        // SAFETY: the caller's promise, passed on.
        unsafe {
            Self::from_external(
                device,
                address,
                dtype,
                shape,
                strides,
                owner,
                "Array::from_ptr",
            )
        }
    }

    /// [`Array::from_ptr`] naming `call` in its errors.
    ///
    /// # Safety
    ///
    /// As [`Array::from_ptr`].
    pub(crate) unsafe fn from_external(
        device: Device,
        address: u64,
        dtype: &'static DType,
        shape: &[usize],
        strides: Option<&[isize]>,
        owner: Arc<dyn Any + Send + Sync>,
        call: &'static str,
    ) -> Result<Array> {
        crate::array::array::check_shape(shape, call)?;
        let strides = match strides {
            Some(s) if s.len() != shape.len() => {
                return Err(Error::Shape {
                    call,
                    message: format!(
                        "{} strides {s:?} for a shape of {} dimensions; give one byte stride per dimension",
                        s.len(),
                        shape.len()
                    ),
                });
            }
            Some(s) => s.to_vec(),
            None => row_major(shape, dtype.size),
        };
        let (lo, hi) = span(shape, &strides, dtype.size);
        let empty = hi == lo;
        if !empty && address == 0 {
            return Err(Error::Shape {
                call,
                message: format!(
                    "address 0 for a view of shape {shape:?}; pass the address of live memory"
                ),
            });
        }
        let align = dtype.align.max(1) as u64;
        if !empty && !address.is_multiple_of(align) {
            return Err(Error::Shape {
                call,
                message: format!(
                    "address {address:#x} is not a multiple of {}'s alignment ({align} B); kernels would read misaligned elements, so pass an aligned address",
                    dtype.name
                ),
            });
        }
        let (start, bytes) = if empty {
            (address as i128, 0i128)
        } else {
            (address as i128 + lo, hi - lo)
        };
        if start < 0 || start + bytes > u64::MAX as i128 || bytes > isize::MAX as i128 {
            return Err(interop(
                call,
                "extent",
                format!(
                    "the view (shape {shape:?}, strides {strides:?}) at {address:#x} reaches bytes {lo}..{hi} around it, outside the address space; pass the real shape and strides"
                ),
            ));
        }
        let (start, bytes) = (start as u64, bytes as usize);
        let rename = |e| match e {
            Error::Shape { message, .. } => Error::Shape { call, message },
            Error::Interop { what, message, .. } => Error::Interop {
                call,
                what,
                message,
            },
            e => e,
        };
        // The label and the extent against the driver, joined or not: what
        // the memory is, and the allocation that holds it when the driver
        // knows it (a view that leaves it is refused).
        let mut cuda = None;
        if let (Device::Cuda(_), false) = (device, empty) {
            let kind = cuda_kind(address, device, call)?;
            let ctx = device.context()?;
            let (base, size) = match ctx.address_range(address)? {
                Some((base, size)) => {
                    let end = base as u128 + size as u128;
                    if (start as u128) < base as u128 || start as u128 + bytes as u128 > end {
                        return Err(interop(
                            call,
                            "extent",
                            format!(
                                "the view (shape {shape:?}, strides {strides:?}, {} B elements) at {address:#x} reaches {start:#x}..{:#x}, but the driver's allocation there is {base:#x}..{end:#x} ({size} B); use a shape and strides inside it",
                                dtype.size,
                                start as u128 + bytes as u128
                            ),
                        ));
                    }
                    (base, size)
                }
                None => (start, bytes),
            };
            cuda = Some((ctx, kind, base, size));
        }
        if !empty {
            // One memory, one owner record: bytes an array's storage
            // already holds are a view of that storage (its lock and
            // ordering state), which keeps the memory alive; `owner` is
            // not needed for that and goes now.
            if let Some((record, at)) = crate::array::storage::tracked_record(start, bytes, call)? {
                let offset = at + (address - start) as usize;
                drop(owner);
                return Array::from_parts(record, device, offset, dtype, shape, &strides)
                    .map_err(rename);
            }
        }
        // An array as the owner of memory it does not hold: reached
        // through two storages, and launches on one are not noted on the
        // other, so its host reads and free synchronise from now on.
        if let Some(a) = owner
            .downcast_ref::<Array>()
            .and_then(|a| a.storage().allocation())
        {
            a.share();
        }
        let (storage, offset) = match device {
            Device::Cpu => {
                // SAFETY: the caller promises the bytes the view reaches
                // for as long as `owner` lives.
                let s = unsafe { Storage::from_raw_host(start as *mut u8, bytes, owner) }
                    .map_err(rename)?;
                (s, (address - start) as usize)
            }
            Device::Cuda(_) => match cuda {
                Some((ctx, kind, base, size)) => {
                    // SAFETY: the caller promises the memory (the whole
                    // driver allocation when it is known) for as long as
                    // `owner` lives; the range was checked against the
                    // driver's allocation when it knows it.
                    let a = unsafe { Allocation::from_raw_parts(&ctx, base, size, kind, owner)? };
                    (Storage::cuda(a), (address - base) as usize)
                }
                None => {
                    // SAFETY: an empty range reaches no memory.
                    let a = unsafe {
                        Allocation::from_raw_parts(
                            &device.context()?,
                            0,
                            0,
                            MemoryKind::Device,
                            owner,
                        )?
                    };
                    (Storage::cuda(a), 0)
                }
            },
        };
        Array::from_parts(Arc::new(storage), device, offset, dtype, shape, &strides).map_err(rename)
    }

    /// What keeps this array's memory alive when it is owned elsewhere
    /// ([`Array::from_ptr`], `Array::from_cudarc` with feature `cudarc`,
    /// a DLPack import); `None` for memory this crate allocated, also when
    /// reached through an import of it (which is a view of its storage).
    ///
    /// ```
    /// let a = warp_launch::Array::zeros::<f32>("cpu", &[4])?;
    /// assert!(a.owner().is_none());
    /// # Ok::<(), warp_launch::Error>(())
    /// ```
    pub fn owner(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        self.storage().owner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host buffer shared as the owner, with a drop flag.
    struct Buf {
        data: Vec<u32>,
        dropped: Arc<std::sync::atomic::AtomicBool>,
    }
    impl Drop for Buf {
        fn drop(&mut self) {
            self.dropped
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn buf(n: u32) -> (Arc<Buf>, Arc<std::sync::atomic::AtomicBool>) {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        (
            Arc::new(Buf {
                data: (0..n).collect(),
                dropped: dropped.clone(),
            }),
            dropped,
        )
    }

    #[test]
    fn a_cpu_array_over_host_memory_reads_it_and_keeps_the_owner_alive() {
        let (b, dropped) = buf(12);
        let addr = b.data.as_ptr() as u64;
        // SAFETY: `b` holds 12 u32 at `addr`, unshared while the array lives.
        let a = unsafe { Array::from_ptr("cpu", addr, DType::UINT32, &[3, 4], None, b.clone()) }
            .unwrap();
        drop(b);
        assert_eq!(a.to_vec::<u32>().unwrap(), (0..12).collect::<Vec<_>>());
        // Column 1, strided: 1, 5, 9.
        let col = a.slice(1, 1..2).unwrap();
        assert_eq!(col.to_vec::<u32>().unwrap(), vec![1, 5, 9]);
        assert!(a.owner().is_some());
        let view = a.clone();
        drop(a);
        assert!(!dropped.load(std::sync::atomic::Ordering::SeqCst));
        drop((view, col));
        assert!(
            dropped.load(std::sync::atomic::Ordering::SeqCst),
            "the owner must go with the last array"
        );
    }

    #[test]
    fn negative_and_custom_strides_are_relative_to_the_first_element() {
        let (b, _) = buf(6);
        // The last element first, stepping back: 5, 4, 3, 2, 1, 0.
        let last = b.data.as_ptr() as u64 + 5 * 4;
        // SAFETY: the view reaches the 6 u32 of `b`, which the owner holds.
        let a = unsafe {
            Array::from_ptr("cpu", last, DType::UINT32, &[6], Some(&[-4][..]), b.clone())
        }
        .unwrap();
        assert_eq!(a.to_vec::<u32>().unwrap(), vec![5, 4, 3, 2, 1, 0]);
        a.zero().unwrap();
        assert_eq!(b.data, vec![0; 6], "the array writes the owner's memory");
    }

    #[test]
    fn bad_shapes_strides_and_addresses_are_refused_by_name() {
        let (b, _) = buf(4);
        let addr = b.data.as_ptr() as u64;
        let try_ = |addr: u64, shape: &[usize], strides: Option<&[isize]>| {
            // SAFETY: every call below is refused before memory is touched,
            // or reaches only `b`'s 16 bytes.
            unsafe { Array::from_ptr("cpu", addr, DType::UINT32, shape, strides, b.clone()) }
                .unwrap_err()
                .to_string()
        };
        let m = try_(0, &[4], None);
        assert!(
            m.contains("Array::from_ptr") && m.contains("address 0"),
            "{m}"
        );
        let m = try_(addr, &[2, 2], Some(&[8][..]));
        assert!(m.contains("1 strides") && m.contains("2 dimensions"), "{m}");
        let m = try_(addr + 1, &[2], None);
        assert!(m.contains("alignment"), "{m}");
        let m = try_(addr, &[], None);
        assert!(m.contains("1 to 4 dimensions"), "{m}");
        let m = try_(addr, &[1usize << 31], None);
        assert!(m.contains("int32"), "{m}");
        let m = try_(u64::MAX - 7, &[4], None);
        assert!(m.contains("extent") && m.contains("address space"), "{m}");
        // An empty view needs no memory.
        // SAFETY: an empty view reaches no memory.
        let e = unsafe { Array::from_ptr("cpu", 0, DType::UINT32, &[0], None, b.clone()) }.unwrap();
        assert!(e.is_empty());
    }
}
