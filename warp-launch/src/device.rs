//! Devices: `"cpu"`, `"cuda:N"`, `"cuda"`.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use cuda_api::{Context, Stream};

use crate::error::{Error, Result};

/// Whether CUDA can be used in this process: a driver loads and reports at
/// least one device (asked once, then remembered). On `false`,
/// [`Device::current`] is `"cpu"`.
pub fn cuda_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| cuda_api::CudaDevice::count().is_ok_and(|n| n > 0))
}

/// Where a launch runs and arrays live: the CPU or a CUDA device by ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Device {
    /// The host (`"cpu"`): kernels with a Rust implementation, host memory.
    Cpu,
    /// CUDA device `N` (`"cuda:N"`).
    Cuda(i32),
}

impl Device {
    /// The default device, by Warp's rule (`wp.get_device()` with no
    /// argument): the device of the CUDA context current on this thread if
    /// there is one, else `cuda:0` when a CUDA driver loads and reports a
    /// device, else `"cpu"`. A launch that names no device and no stream
    /// runs here, so on a machine without a GPU it runs on the CPU. The
    /// driver is asked once per process whether it has a device. Changes
    /// nothing.
    ///
    /// ```
    /// use warp_launch::Device;
    /// let d = Device::current();
    /// // cuda:0 on a machine with a GPU, "cpu" without one.
    /// assert_eq!(d.is_cuda(), warp_launch::cuda_available());
    /// ```
    pub fn current() -> Device {
        match cuda_api::CudaDevice::current() {
            Ok(Some(d)) => Device::from(&d),
            _ if cuda_available() => Device::Cuda(0),
            _ => Device::Cpu,
        }
    }

    /// Makes sure a context is current on this thread (the driver needs one
    /// to read a library kernel's parameters): the current one if any, else
    /// `cuda:0`'s primary context.
    pub(crate) fn ensure_context() -> Result<()> {
        if cuda_api::CudaDevice::current()?.is_none() {
            Device::Cuda(0).context()?.bind()?;
        }
        Ok(())
    }

    /// The CUDA ordinal, `None` for the CPU.
    pub fn ordinal(self) -> Option<i32> {
        match self {
            Device::Cpu => None,
            Device::Cuda(n) => Some(n),
        }
    }

    /// Whether this is a CUDA device.
    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }

    /// The device's primary context ([`cuda_api::CudaDevice::primary_context`]:
    /// retained once per process and shared, a lock-free read after the
    /// first call). Does not make it current: [`Context::bind`] does, and
    /// every cuda-api call that works in it binds it itself.
    ///
    /// # Errors
    ///
    /// [`Error::NotCuda`] for the CPU, which has no CUDA context;
    /// [`Error::NoSuchDevice`] for an ordinal the driver does not have; or
    /// the driver's failure to retain the context.
    pub fn context(self) -> Result<Context> {
        let Some(n) = self.ordinal() else {
            return Err(Error::NotCuda {
                call: "Device::context",
                device: self,
            });
        };
        match cuda_api::CudaDevice::get(n) {
            Ok(d) => Ok(d.primary_context()?),
            Err(e) => {
                let count = cuda_api::CudaDevice::count()?;
                if n >= count {
                    return Err(Error::NoSuchDevice {
                        device: self.to_string(),
                        count,
                    });
                }
                Err(e.into())
            }
        }
    }

    /// The device's default stream: the legacy null stream of its primary
    /// context, which Warp also launches on when no stream is given.
    ///
    /// # Errors
    ///
    /// [`Error::NotCuda`] for the CPU device; [`Error::NoSuchDevice`] or [`Error::Cuda`] when
    /// the device's primary context cannot be made current.
    pub fn default_stream(self) -> Result<Stream> {
        /// One handle per device (the first 64 ordinals), made once: a
        /// launch on the default stream then allocates nothing.
        static STREAMS: [OnceLock<Stream>; 64] = [const { OnceLock::new() }; 64];
        let slot = self
            .ordinal()
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| STREAMS.get(n));
        if let Some(s) = slot.and_then(OnceLock::get) {
            return Ok(s.clone());
        }
        let stream = self.context()?.default_stream();
        Ok(match slot {
            Some(slot) => slot.get_or_init(|| stream).clone(),
            None => stream,
        })
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl FromStr for Device {
    type Err = Error;
    /// `"cpu"`, `"cuda:N"`, or `"cuda"` for `cuda:0`.
    fn from_str(s: &str) -> Result<Device> {
        let bad = || Error::BadDevice {
            given: s.to_string(),
        };
        match s.trim() {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            t => {
                let n = t.strip_prefix("cuda:").ok_or_else(bad)?;
                n.parse::<i32>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .map(Device::Cuda)
                    .ok_or_else(bad)
            }
        }
    }
}

/// A device given by value or by name (`"cpu"`, `"cuda:1"`).
pub trait IntoDevice {
    /// The device, or [`Error::BadDevice`] for a name that is none.
    ///
    /// # Errors
    ///
    /// [`Error::BadDevice`] for a name that is not `"cpu"`, `"cuda"` or `"cuda:N"`.
    fn into_device(self) -> Result<Device>;
}

impl IntoDevice for Device {
    fn into_device(self) -> Result<Device> {
        Ok(self)
    }
}

impl IntoDevice for &str {
    fn into_device(self) -> Result<Device> {
        self.parse()
    }
}

impl IntoDevice for &String {
    fn into_device(self) -> Result<Device> {
        self.parse()
    }
}

impl From<&cuda_api::CudaDevice> for Device {
    fn from(d: &cuda_api::CudaDevice) -> Device {
        Device::Cuda(d.ordinal())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_strings() {
        assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::Cuda(1));
        assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::Cpu);
        assert_eq!(Device::Cpu.to_string(), "cpu");
        assert_eq!(Device::Cuda(3).to_string(), "cuda:3");
        for bad in ["gpu", "cuda:-1", "cuda:x", "cuda1", ""] {
            let e = bad.parse::<Device>().unwrap_err();
            assert!(matches!(e, Error::BadDevice { .. }), "{bad}: {e}");
        }
        insta::assert_snapshot!(
            "bad_device",
            "cuda:x".parse::<Device>().unwrap_err().to_string()
        );
    }
}
