//! Stream-ordered memory pools: a device's default pool
//! (`cuDeviceGetDefaultMemPool`), which [`Allocation::zeroed_on`]
//! allocates from, with its release threshold and usage counters.
//!
//! [`Allocation::zeroed_on`]: crate::Allocation::zeroed_on

use std::fmt;

use cuda_sys::{CUdevice_attribute, CUmemPool_attribute, CUmemoryPool};

use crate::device::CudaDevice;
use crate::driver;
use crate::error::{CudaError, CudaResult};

/// A device's default stream-ordered memory pool. The driver owns it (it
/// lives as long as the process): this is a handle, cheap to copy around.
///
/// ```no_run
/// # fn main() -> cuda_api::CudaResult<()> {
/// // GPU: keep up to 64 MiB of freed pool memory for reuse.
/// let dev = cuda_api::CudaDevice::get(0)?;
/// let pool = cuda_api::MemPool::default_for(&dev)?;
/// pool.set_release_threshold(64 << 20)?;
/// assert_eq!(pool.release_threshold()?, 64 << 20);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MemPool {
    raw: CUmemoryPool,
    device: CudaDevice,
}

// SAFETY: a pool handle may be used from any thread; the driver
// synchronises pool attribute access.
unsafe impl Send for MemPool {}
// SAFETY: as above.
unsafe impl Sync for MemPool {}

impl fmt::Debug for MemPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemPool(default pool of {})", self.device)
    }
}

impl MemPool {
    /// Refuses a device without memory pools, naming `call`.
    pub(crate) fn require(device: &CudaDevice, call: &str) -> CudaResult<()> {
        if Self::supported(device)? {
            return Ok(());
        }
        Err(CudaError::invalid_argument(
            call,
            "device",
            format!(
                "{device} has no stream-ordered memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0); allocate with Allocation::zeroed instead"
            ),
        ))
    }

    /// Whether `device` has stream-ordered memory pools
    /// (`CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`).
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU
    /// assert!(cuda_api::MemPool::supported(&cuda_api::CudaDevice::get(0)?)?); // an H200 has them
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The driver's failure to read the attribute.
    pub fn supported(device: &CudaDevice) -> CudaResult<bool> {
        Ok(device.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0)
    }

    /// The default pool of `device` (`cuDeviceGetDefaultMemPool`).
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU
    /// let pool = cuda_api::MemPool::default_for(&cuda_api::CudaDevice::get(0)?)?;
    /// assert_eq!(pool.device().ordinal(), 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when the device has no memory pools;
    /// the driver's failure.
    pub fn default_for(device: &CudaDevice) -> CudaResult<MemPool> {
        Self::require(device, "MemPool::default_for")?;
        let raw = driver::device_get_default_mem_pool(device.raw())?;
        Ok(MemPool {
            raw,
            device: device.clone(),
        })
    }

    /// The device whose pool this is.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    fn get(&self, attr: CUmemPool_attribute) -> CudaResult<u64> {
        let mut v: u64 = 0;
        // SAFETY: the pool is a device's default pool (never destroyed);
        // every attribute read here is a cuuint64_t, written to `v`.
        unsafe { driver::mem_pool_get_attribute(self.raw, attr, (&raw mut v).cast()) }?;
        Ok(v)
    }

    /// Sets how many bytes of freed memory the pool keeps reserved for reuse
    /// when the device synchronises, instead of returning them to the
    /// system (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`; the driver's default is
    /// 0: everything is released at each synchronisation). `u64::MAX` keeps
    /// everything.
    ///
    /// # Errors
    ///
    /// The driver's failure.
    pub fn set_release_threshold(&self, bytes: u64) -> CudaResult<()> {
        let mut v = bytes;
        // SAFETY: the pool is a device's default pool; the attribute is a
        // cuuint64_t read from `v`.
        unsafe {
            driver::mem_pool_set_attribute(
                self.raw,
                CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&raw mut v).cast(),
            )
        }
    }

    /// The release threshold in bytes ([`MemPool::set_release_threshold`],
    /// whose example reads it).
    ///
    /// # Errors
    ///
    /// The driver's failure.
    pub fn release_threshold(&self) -> CudaResult<u64> {
        self.get(CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
    }

    /// Bytes of live allocations from the pool, freed in stream order only
    /// once the stream has reached the free (`CU_MEMPOOL_ATTR_USED_MEM_CURRENT`).
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: a pool allocation counts until its stream has freed it.
    /// let dev = cuda_api::CudaDevice::get(0)?;
    /// let pool = cuda_api::MemPool::default_for(&dev)?;
    /// let stream = cuda_api::Stream::new(&dev.primary_context()?)?;
    /// let a = cuda_api::Allocation::zeroed_on(&stream, 1 << 20)?;
    /// stream.synchronize()?;
    /// assert!(pool.used()? >= 1 << 20);
    /// drop(a);
    /// stream.synchronize()?;
    /// println!("{} B used, {} B reserved", pool.used()?, pool.reserved()?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The driver's failure.
    pub fn used(&self) -> CudaResult<u64> {
        self.get(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
    }

    /// Bytes the pool holds from the system, used or kept for reuse
    /// (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`): see [`MemPool::used`].
    ///
    /// # Errors
    ///
    /// The driver's failure.
    pub fn reserved(&self) -> CudaResult<u64> {
        self.get(CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
    }

    /// Returns unused reserved memory to the system until at most `keep`
    /// bytes stay reserved (`cuMemPoolTrimTo`).
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU: give everything unused back.
    /// cuda_api::MemPool::default_for(&cuda_api::CudaDevice::get(0)?)?.trim_to(0)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The driver's failure.
    pub fn trim_to(&self, keep: usize) -> CudaResult<()> {
        // SAFETY: the pool is a device's default pool, never destroyed.
        unsafe { driver::mem_pool_trim_to(self.raw, keep) }
    }
}
