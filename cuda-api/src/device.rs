//! Driver initialisation and devices, with attributes queried once and cached.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cuda_sys::{CUdevice, CUdevice_attribute, CUresult};

use crate::driver;
use crate::error::{Error, Result};
use crate::launch::{DeviceLimits, Dim3};

/// Initialises the driver once per process (`cuInit(0)`); later calls return the first outcome.
///
/// Every constructor in this crate calls it, so calling it yourself is only
/// needed to learn early whether a driver is present.
///
/// # Errors
///
/// [`crate::Error::DriverNotFound`] (with the paths tried) when no driver
/// library loads, or the `cuInit` failure.
pub fn init() -> Result<()> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    INIT.get_or_init(|| driver::init(0)).clone()
}

/// The installed driver's CUDA version, e.g. 13000 for CUDA 13.0.
pub fn driver_version() -> Result<i32> {
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
pub struct Device {
    inner: Arc<DeviceInner>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("ordinal", &self.inner.ordinal)
            .field("name", &self.inner.name)
            .finish()
    }
}

impl Device {
    /// The number of CUDA devices.
    pub fn count() -> Result<i32> {
        init()?;
        driver::device_get_count()
    }

    /// The device with this ordinal: one shared instance per ordinal for the
    /// whole process, so its attribute cache is filled once.
    pub fn get(ordinal: i32) -> Result<Device> {
        static DEVICES: Mutex<Vec<Device>> = Mutex::new(Vec::new());
        init()?;
        let mut known = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = known.iter().find(|d| d.inner.ordinal == ordinal) {
            return Ok(d.clone());
        }
        let d = Self::open(ordinal)?;
        known.push(d.clone());
        Ok(d)
    }

    fn open(ordinal: i32) -> Result<Device> {
        let raw = driver::device_get(ordinal)?;
        let name = driver::device_get_name(raw)?;
        Ok(Device {
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
    pub fn attribute(&self, attr: CUdevice_attribute) -> Result<i32> {
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
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        Ok((
            self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ))
    }

    /// Streaming multiprocessors.
    pub fn sm_count(&self) -> Result<u32> {
        Ok(self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32)
    }

    /// Whether the device can launch cooperative kernels.
    pub fn supports_cooperative_launch(&self) -> Result<bool> {
        Ok(self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? != 0)
    }

    /// Whether the device can launch thread-block clusters
    /// (`CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH`; compute capability 9.0 and
    /// later). `false` on a driver too old to know the attribute.
    ///
    /// # Errors
    ///
    /// A driver failure other than the attribute being unknown.
    pub fn supports_cluster_launch(&self) -> Result<bool> {
        match self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) {
            Ok(v) => Ok(v != 0),
            // A driver older than CUDA 11.8 does not know the attribute.
            Err(Error::Driver(d)) if d.code == CUresult::CUDA_ERROR_INVALID_VALUE => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The limits launches are validated against, queried once.
    pub fn limits(&self) -> Result<&DeviceLimits> {
        if let Some(l) = self.inner.limits.get() {
            return Ok(l);
        }
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
        };
        Ok(self.inner.limits.get_or_init(|| limits))
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        self.inner.raw == other.inner.raw
    }
}
impl Eq for Device {}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cuda:{} ({})", self.inner.ordinal, self.inner.name)
    }
}
