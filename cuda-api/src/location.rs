//! Where memory lives: the driver's answer for a device address
//! ([`pointer_location`]) and, cached, for an allocation
//! (`Allocation::location`, in the memory room).
//!
//! The facts come from `cuPointerGetAttributes` (see NVIDIA's
//! [driver API reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html)):
//! the physical memory type, the device the memory belongs to, whether it
//! is managed, and whether the address range is mapped to a backing
//! allocation.

use std::fmt;

use cuda_sys::{CUdeviceptr, CUmemorytype, CUpointer_attribute};

use crate::driver;
use crate::error::CudaResult;

/// The physical kind of memory behind an address, as the driver reports it
/// (`CUmemorytype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemoryType {
    /// Host memory the driver knows: page-locked (`cuMemHostAlloc`,
    /// `cuMemAllocHost`) or registered (`cuMemHostRegister`)
    /// (`CU_MEMORYTYPE_HOST`).
    Host,
    /// Device memory (`CU_MEMORYTYPE_DEVICE`); managed memory reports this
    /// type too, with [`Location::managed`] set.
    Device,
    /// A CUDA array (`CU_MEMORYTYPE_ARRAY`).
    Array,
    /// Unified device or host memory (`CU_MEMORYTYPE_UNIFIED`).
    Unified,
    /// A `CUmemorytype` value this build does not name (from a newer
    /// driver), kept as the driver gave it.
    Other(u32),
}

impl MemoryType {
    /// The Rust value for a driver `CUmemorytype`, matched by its named
    /// constants; `None` for the driver's default (no type: an address the
    /// driver does not know).
    pub fn from_raw(raw: CUmemorytype) -> Option<MemoryType> {
        Some(match raw {
            CUmemorytype::CU_MEMORYTYPE_HOST => MemoryType::Host,
            CUmemorytype::CU_MEMORYTYPE_DEVICE => MemoryType::Device,
            CUmemorytype::CU_MEMORYTYPE_ARRAY => MemoryType::Array,
            CUmemorytype::CU_MEMORYTYPE_UNIFIED => MemoryType::Unified,
            r if r == CUmemorytype::default() => return None,
            r => MemoryType::Other(r.0),
        })
    }
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryType::Host => f.write_str("host memory known to CUDA"),
            MemoryType::Device => f.write_str("device memory"),
            MemoryType::Array => f.write_str("a CUDA array"),
            MemoryType::Unified => f.write_str("unified memory"),
            MemoryType::Other(n) => write!(f, "memory of CUmemorytype {n}"),
        }
    }
}

/// Where the driver says an address lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Location {
    /// The physical memory type.
    pub memory_type: MemoryType,
    /// The ordinal of the device the memory belongs to (for host memory,
    /// the device of the context that allocated or registered it); `None`
    /// when the driver reports none.
    pub device: Option<i32>,
    /// Whether it is managed memory (`cuMemAllocManaged`), which the
    /// driver migrates to whichever processor touches it.
    pub managed: bool,
    /// Whether the address lies in a range mapped to a backing allocation
    /// (`CU_POINTER_ATTRIBUTE_MAPPED`).
    pub mapped: bool,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.managed {
            f.write_str("managed ")?;
        }
        write!(f, "{}", self.memory_type)?;
        if let Some(d) = self.device {
            write!(f, " of cuda:{d}")?;
        }
        Ok(())
    }
}

/// Asks the driver where `address` lives (`cuPointerGetAttributes`). Any
/// address may be asked about: one the driver does not know (ordinary host
/// memory from the Rust allocator, a stack address, 0) gives `Ok(None)`.
/// Nothing is cached here; `Allocation::location` caches its answer.
///
/// # Errors
///
/// The driver's failure (for example [`CudaError::DriverNotFound`](crate::CudaError::DriverNotFound), or
/// `CUDA_ERROR_INVALID_VALUE` for an address of a context that does not
/// use unified addressing).
pub fn pointer_location(address: CUdeviceptr) -> CudaResult<Option<Location>> {
    crate::init()?;
    use CUpointer_attribute as P;
    let attrs = [
        P::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        P::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        P::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        P::CU_POINTER_ATTRIBUTE_MAPPED,
    ];
    let mut memory_type = CUmemorytype::default();
    let mut device: i32 = -1;
    // The two flags are C booleans; zeroed u32s read the same whether the
    // driver writes one byte or four.
    let mut managed: u32 = 0;
    let mut mapped: u32 = 0;
    let mut data = [
        (&raw mut memory_type).cast(),
        (&raw mut device).cast(),
        (&raw mut managed).cast(),
        (&raw mut mapped).cast(),
    ];
    // SAFETY: one out-pointer per attribute, each to a local at least as
    // large as what the driver writes for it (CUmemorytype: unsigned int;
    // device ordinal: int; the flags: a bool into a zeroed u32), all alive
    // for the call. The driver
    // accepts any address and writes defaults for one it does not know.
    unsafe { driver::pointer_get_attributes(&attrs, &mut data, address) }?;
    let Some(memory_type) = MemoryType::from_raw(memory_type) else {
        return Ok(None);
    };
    Ok(Some(Location {
        memory_type,
        device: (device >= 0).then_some(device),
        managed: managed != 0,
        mapped: mapped != 0,
    }))
}

impl crate::context::Context {
    /// The driver's allocation that holds device address `address`: its
    /// base address and size in bytes (`cuMemGetAddressRange`, asked with
    /// this context current), or `None` when the driver knows no
    /// allocation there (memory of another API, host memory it does not
    /// map, a stale or made-up address). A query only: nothing is read or
    /// written at `address`.
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// use cuda_api::{Context, CudaDevice, DeviceBuffer};
    /// let ctx = Context::primary(&CudaDevice::get(0)?)?;
    /// let b = DeviceBuffer::<f32>::zeroed(&ctx, 100)?;
    /// let (base, size) = ctx.address_range(b.device_address() + 8)?.unwrap();
    /// assert_eq!(base, b.device_address());
    /// assert!(size >= 400);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The driver's failure to make the context current or to answer,
    /// other than "not found" / "invalid value" (which give `None`).
    pub fn address_range(&self, address: CUdeviceptr) -> CudaResult<Option<(CUdeviceptr, usize)>> {
        use cuda_sys::CUresult as R;
        self.bind()?;
        // SAFETY: cuMemGetAddressRange only looks `address` up in the
        // driver's tables; it never dereferences it, whatever its value.
        match unsafe { driver::mem_get_address_range(address) } {
            Ok(r) => Ok(Some(r)),
            Err(e)
                if e.driver().is_some_and(|d| {
                    d.code == R::CUDA_ERROR_NOT_FOUND || d.code == R::CUDA_ERROR_INVALID_VALUE
                }) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_types_are_matched_by_name() {
        assert_eq!(
            MemoryType::from_raw(CUmemorytype::CU_MEMORYTYPE_HOST),
            Some(MemoryType::Host)
        );
        assert_eq!(
            MemoryType::from_raw(CUmemorytype::CU_MEMORYTYPE_DEVICE),
            Some(MemoryType::Device)
        );
        assert_eq!(
            MemoryType::from_raw(CUmemorytype::CU_MEMORYTYPE_ARRAY),
            Some(MemoryType::Array)
        );
        assert_eq!(
            MemoryType::from_raw(CUmemorytype::CU_MEMORYTYPE_UNIFIED),
            Some(MemoryType::Unified)
        );
        // The driver's default (an address it does not know) is no type.
        assert_eq!(MemoryType::from_raw(CUmemorytype::default()), None);
        // A value from a newer driver is kept, not mistaken for another.
        assert_eq!(
            MemoryType::from_raw(CUmemorytype(77)),
            Some(MemoryType::Other(77))
        );
    }

    #[test]
    fn a_location_reads_as_words() {
        let at = |memory_type, managed, device| Location {
            memory_type,
            device,
            managed,
            mapped: true,
        };
        assert_eq!(
            at(MemoryType::Device, true, Some(0)).to_string(),
            "managed device memory of cuda:0"
        );
        assert_eq!(
            at(MemoryType::Host, false, None).to_string(),
            "host memory known to CUDA"
        );
    }
}
