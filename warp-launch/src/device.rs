//! Devices (`"cpu"`, `"cuda:N"`, `"cuda"`) and array access modes.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;

use cuda_api::{Context, Stream};

use crate::error::{Error, Result};

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
    /// The current device: the device of the context current on this thread
    /// if there is one ([`cuda_api::CudaDevice::current`]), else `cuda:0` (as
    /// Warp's default device). Changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::Cuda`] when the driver cannot be loaded or cannot say which
    /// context is current.
    pub fn current() -> Result<Device> {
        Ok(cuda_api::CudaDevice::current()?.map_or(Device::Cuda(0), |d| Device::from(&d)))
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
    pub fn default_stream(self) -> Result<Stream> {
        Ok(self.context()?.default_stream())
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

/// How a launch checks that each array is reachable from the launch device
/// (Warp's array access modes). Every mode refuses memory the launch device
/// is known not to reach (ordinary host memory for a CUDA kernel, device
/// memory for the CPU or for another device without peer access; see
/// [`crate::access`]), so no mode lets safe code hand a kernel memory it
/// cannot reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AccessMode {
    /// No driver query: only what is known without asking the driver is
    /// refused (the memory kind and the device that allocated it).
    Relaxed,
    /// Ask the driver where each allocation lives and refuse what the launch
    /// device cannot reach; warn once per pattern where it cannot tell.
    #[default]
    Checked,
    /// Every array must live on the launch device.
    Strict,
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AccessMode::Relaxed => "RELAXED",
            AccessMode::Checked => "CHECKED",
            AccessMode::Strict => "STRICT",
        })
    }
}

thread_local! {
    /// This thread's default access mode.
    static THREAD_MODE: Cell<AccessMode> = const { Cell::new(AccessMode::Checked) };
}

/// The calling thread's default access mode, used by launches built on this
/// thread that do not choose one ([`AccessMode::Checked`] until
/// [`set_thread_access_mode`] changes it).
pub fn thread_access_mode() -> AccessMode {
    THREAD_MODE.with(Cell::get)
}

/// Sets the calling thread's default access mode and returns the previous
/// one. Other threads keep theirs (a new thread starts with
/// [`AccessMode::Checked`]); a launch may still choose its own with
/// `LaunchBuilder::access_mode`. There is no process-wide switch: one
/// thread cannot change the checks of launches that other threads build.
pub fn set_thread_access_mode(mode: AccessMode) -> AccessMode {
    THREAD_MODE.with(|m| m.replace(mode))
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

    #[test]
    fn the_default_mode_is_per_thread() {
        assert_eq!(AccessMode::default(), AccessMode::Checked);
        assert_eq!(thread_access_mode(), AccessMode::Checked);
        assert_eq!(
            set_thread_access_mode(AccessMode::Strict),
            AccessMode::Checked
        );
        assert_eq!(thread_access_mode(), AccessMode::Strict);
        // Another thread, started before or after the change, is unaffected
        // and its own change does not reach this one.
        std::thread::spawn(|| {
            assert_eq!(thread_access_mode(), AccessMode::Checked);
            set_thread_access_mode(AccessMode::Relaxed);
            assert_eq!(thread_access_mode(), AccessMode::Relaxed);
        })
        .join()
        .unwrap();
        assert_eq!(thread_access_mode(), AccessMode::Strict);
        set_thread_access_mode(AccessMode::Checked);
        assert_eq!(thread_access_mode(), AccessMode::Checked);
    }
}
