//! Driver initialisation and devices, with attributes queried once and cached.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use cuda_sys::{CUdevice, CUdevice_attribute, CUresult};

use crate::driver;
use crate::error::{CudaError, CudaResult};
use crate::launch::{DeviceLimits, Dim3};

/// Initialises the driver once per process (`cuInit(0)`); later calls return the first outcome.
///
/// Every constructor in this crate calls it, so calling it yourself is only
/// needed to learn early whether a driver is present.
///
/// # Errors
///
/// [`crate::CudaError::DriverNotFound`] (with the paths tried) when no driver
/// library loads, or the `cuInit` failure.
pub fn init() -> CudaResult<()> {
    static INIT: OnceLock<CudaResult<()>> = OnceLock::new();
    INIT.get_or_init(|| driver::init(0)).clone()
}

/// The installed driver's CUDA version, e.g. 13000 for CUDA 13.0.
///
/// # Errors
///
/// An initialisation failure ([`init`]: no driver library,
/// [`CudaError::DriverNotFound`]) or the driver's failure of
/// `cuDriverGetVersion`.
pub fn driver_version() -> CudaResult<i32> {
    init()?;
    driver::driver_get_version()
}

const ATTR_SLOTS: usize = 256;
const UNKNOWN: i64 = i64::MIN;

struct DeviceInner {
    ordinal: i32,
    raw: CUdevice,
    name: String,
    attrs: [AtomicI64; ATTR_SLOTS],
    limits: OnceLock<DeviceLimits>,
}

/// A CUDA device. Cheap to clone; attributes are cached after the first query.
#[derive(Clone)]
pub struct CudaDevice {
    inner: Arc<DeviceInner>,
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaDevice")
            .field("ordinal", &self.inner.ordinal)
            .field("name", &self.inner.name)
            .finish()
    }
}

impl CudaDevice {
    /// The number of CUDA devices.
    ///
    /// # Errors
    ///
    /// An initialisation failure ([`init`]) or the driver's failure of
    /// `cuDeviceGetCount`.
    pub fn count() -> CudaResult<i32> {
        init()?;
        driver::device_get_count()
    }

    /// The device with this ordinal: one shared instance per ordinal for the
    /// whole process, so its attribute cache is filled once (and its
    /// primary context, [`CudaDevice::primary_context`], retained once). After the first call for an ordinal, a lock-free read.
    ///
    /// # Errors
    ///
    /// The driver's `CUDA_ERROR_INVALID_DEVICE` for an ordinal that is not
    /// below [`CudaDevice::count`], or an initialisation failure ([`init`]).
    pub fn get(ordinal: i32) -> CudaResult<CudaDevice> {
        /// One slot per device the driver reports, made on first use.
        static DEVICES: OnceLock<Box<[OnceLock<CudaDevice>]>> = OnceLock::new();
        init()?;
        let table = match DEVICES.get() {
            Some(t) => t,
            None => {
                let n = usize::try_from(driver::device_get_count()?).unwrap_or(0);
                DEVICES.get_or_init(|| (0..n).map(|_| OnceLock::new()).collect())
            }
        };
        let Some(slot) = usize::try_from(ordinal).ok().and_then(|i| table.get(i)) else {
            // Out of range: the driver names the error.
            return Self::open(ordinal);
        };
        if let Some(d) = slot.get() {
            return Ok(d.clone());
        }
        let d = Self::open(ordinal)?;
        Ok(slot.get_or_init(|| d).clone())
    }

    /// The device of the context current on the calling thread (whoever
    /// made it current: cuda-api, the runtime API, another library), or
    /// `None` when no context is current. Reads the driver's thread-local
    /// record; changes nothing.
    ///
    /// # Errors
    ///
    /// An initialisation failure ([`init`]) or the driver's failure of
    /// `cuCtxGetCurrent`/`cuCtxGetDevice`.
    pub fn current() -> CudaResult<Option<CudaDevice>> {
        init()?;
        if driver::ctx_get_current()?.is_null() {
            return Ok(None);
        }
        Self::of_raw(driver::ctx_get_device()?).map(Some)
    }

    /// The shared [`CudaDevice`] whose raw handle is `raw`.
    pub(crate) fn of_raw(raw: CUdevice) -> CudaResult<CudaDevice> {
        // The driver's handles are the ordinals today: try that first.
        if let Ok(d) = Self::get(raw)
            && d.raw() == raw
        {
            return Ok(d);
        }
        for ordinal in 0..Self::count()? {
            let d = Self::get(ordinal)?;
            if d.raw() == raw {
                return Ok(d);
            }
        }
        Err(crate::error::CudaError::invalid_argument(
            "CudaDevice::current",
            "cuCtxGetDevice",
            format!(
                "the driver reports device handle {raw}, which none of the {} visible devices has; the driver's state is inconsistent: restart the process",
                Self::count()?
            ),
        ))
    }

    fn open(ordinal: i32) -> CudaResult<CudaDevice> {
        let raw = driver::device_get(ordinal)?;
        let name = driver::device_get_name(raw)?;
        Ok(CudaDevice {
            inner: Arc::new(DeviceInner {
                ordinal,
                raw,
                name,
                attrs: [const { AtomicI64::new(UNKNOWN) }; ATTR_SLOTS],
                limits: OnceLock::new(),
            }),
        })
    }

    /// The ordinal.
    pub fn ordinal(&self) -> i32 {
        self.inner.ordinal
    }

    /// The raw `CUdevice`.
    pub fn raw(&self) -> CUdevice {
        self.inner.raw
    }

    /// The marketing name, e.g. `NVIDIA H200`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// One attribute, queried once and then served from the cache.
    ///
    /// # Errors
    ///
    /// [`CudaError::Driver`] from `cuDeviceGetAttribute`, for example
    /// `CUDA_ERROR_INVALID_VALUE` for an attribute this driver does not know.
    pub fn attribute(&self, attr: CUdevice_attribute) -> CudaResult<i32> {
        let slot = self.inner.attrs.get(attr.0 as usize);
        if let Some(v) = slot
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|v| *v != UNKNOWN)
        {
            return Ok(v as i32);
        }
        let v = driver::device_get_attribute(attr, self.inner.raw)?;
        if let Some(s) = slot {
            s.store(v as i64, Ordering::Relaxed);
        }
        Ok(v)
    }

    /// `(major, minor)` compute capability, e.g. `(9, 0)`.
    ///
    /// # Errors
    ///
    /// [`CudaError::Driver`] when the driver cannot read the attribute.
    pub fn compute_capability(&self) -> CudaResult<(i32, i32)> {
        Ok((
            self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ))
    }

    /// Streaming multiprocessors.
    ///
    /// # Errors
    ///
    /// [`CudaError::Driver`] when the driver cannot read the attribute.
    pub fn sm_count(&self) -> CudaResult<u32> {
        Ok(self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32)
    }

    /// Whether the device can launch cooperative kernels.
    ///
    /// # Errors
    ///
    /// [`CudaError::Driver`] when the driver cannot read the attribute.
    pub fn supports_cooperative_launch(&self) -> CudaResult<bool> {
        Ok(self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? != 0)
    }

    /// Whether the device can launch thread-block clusters
    /// (`CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH`; compute capability 9.0 and
    /// later). `false` on a driver too old to know the attribute.
    ///
    /// # Errors
    ///
    /// A driver failure other than the attribute being unknown.
    pub fn supports_cluster_launch(&self) -> CudaResult<bool> {
        match self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) {
            Ok(v) => Ok(v != 0),
            // A driver older than CUDA 11.8 does not know the attribute.
            Err(CudaError::Driver(d)) if d.code == CUresult::CUDA_ERROR_INVALID_VALUE => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The limits launches are validated against, queried once.
    ///
    /// # Errors
    ///
    /// [`CudaError::Driver`] when the driver cannot read one of the attributes
    /// the limits are made of.
    #[inline]
    pub fn limits(&self) -> CudaResult<&DeviceLimits> {
        match self.inner.limits.get() {
            Some(l) => Ok(l),
            None => self.query_limits(),
        }
    }

    /// [`CudaDevice::limits`]' first call: the queries, kept once.
    #[cold]
    #[inline(never)]
    fn query_limits(&self) -> CudaResult<&DeviceLimits> {
        use CUdevice_attribute as A;
        let a = |x| self.attribute(x).map(|v| v as u32);
        let (major, minor) = self.compute_capability()?;
        let limits = DeviceLimits {
            name: self.inner.name.clone(),
            sm_count: self.sm_count()?,
            cooperative_launch: self.supports_cooperative_launch()?,
            max_block: Dim3::new(
                a(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                a(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                a(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ),
            max_grid: Dim3::new(
                a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                a(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ),
            compute_capability: (major as u32, minor as u32),
            cluster_launch: self.supports_cluster_launch()?,
            warp_size: a(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            max_threads_per_block: a(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_threads_per_sm: a(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        };
        Ok(self.inner.limits.get_or_init(|| limits))
    }
}

impl PartialEq for CudaDevice {
    fn eq(&self, other: &Self) -> bool {
        self.inner.raw == other.inner.raw
    }
}
impl Eq for CudaDevice {}

impl fmt::Display for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cuda:{} ({})", self.inner.ordinal, self.inner.name)
    }
}
