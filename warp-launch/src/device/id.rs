//! The device a launch runs on and an array lives on, as a value:
//! `"cpu"` or `"cuda:N"`. What a device does (its current stream, its
//! context) is in the parent module.

use std::fmt;

/// Where a launch runs and arrays live: the CPU or a CUDA device by ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Device {
    /// The host (`"cpu"`): kernels with a Rust implementation, host memory.
    Cpu,
    /// CUDA device `N` (`"cuda:N"`).
    Cuda(i32),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl From<&cuda_api::CudaDevice> for Device {
    fn from(d: &cuda_api::CudaDevice) -> Device {
        Device::Cuda(d.ordinal())
    }
}
