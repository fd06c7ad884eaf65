//! The safe CUDA driver API.
//!
//! Two layers on the raw bindings of [`cuda_sys`]:
//!
//! - [`driver`], generated from the specs: one snake_case function per driver
//!   function (for example [`driver::launch_cooperative_kernel`],
//!   [`driver::occupancy_max_active_blocks_per_multiprocessor`],
//!   [`driver::library_get_kernel`], [`driver::func_get_param_info`]), with
//!   out-parameters returned in `Ok`, pointer-and-length pairs as slices, and
//!   every failure an [`Error`] naming the call.
//! - Hand-written types: [`init`], [`Device`], [`Context`], [`Stream`],
//!   [`Event`], [`DeviceBuffer`], [`Module`], [`Library`], [`Function`] and
//!   typed [`Kernel`]s.
//!
//! Declaring a kernel's parameter types is the one `unsafe` promise; it is
//! checked against the parameter sizes the driver reports, and every launch
//! after that is safe and validated (cooperative launches against device
//! support and occupancy times SM count) from cached facts:
//!
//! ```no_run
//! use cuda_api::{Context, Device, DevicePtr, LaunchConfig, Module, Stream, DeviceBuffer};
//! # fn main() -> cuda_api::Result<()> {
//! let ctx = Context::primary(&Device::get(0)?)?;
//! let module = Module::from_file(&ctx, "saxpy.ptx")?;
//! // SAFETY: saxpy(float a, const float* x, float* y, unsigned n)
//! let saxpy = unsafe { module.kernel::<(f32, DevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")? };
//! let x = DeviceBuffer::from_slice(&ctx, &[1.0f32; 1024])?;
//! let mut y = DeviceBuffer::<f32>::zeroed(&ctx, 1024)?;
//! let stream = Stream::new(&ctx)?;
//! saxpy.launch(&stream, LaunchConfig::for_elements(1024, 256), (2.0f32, &x, &mut y, 1024u32))?;
//! stream.synchronize()?;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

#[rustfmt::skip]
#[allow(clippy::all, non_snake_case, deprecated)]
mod generated;

pub mod context;
#[cfg(feature = "cudarc")]
pub mod cudarc_interop;
pub mod device;
pub mod error;
pub mod kernel;
pub mod launch;
pub mod memory;
pub mod module;
pub mod stream;

pub use context::Context;
pub use cuda_sys as sys;
pub use device::{Device, driver_version, init};
pub use error::{DriverError, Error, Result, SignatureError};
pub use generated::driver;
pub use kernel::{Function, Kernel, KernelArg, KernelArgs, KernelParam, KernelSignature};
pub use launch::{DeviceLimits, Dim3, FunctionLimits, LaunchConfig, LaunchError};
pub use memory::{DeviceBuffer, DevicePtr, DeviceRepr, DeviceView, PendingCopy};
pub use module::{Library, Module};
pub use stream::{Event, Stream};

/// Reports a failure while releasing a resource in `Drop` (where it cannot be
/// returned): one line on stderr, never a panic. A sticky error here usually
/// means an earlier kernel faulted and the context is unusable.
pub(crate) fn report_drop_error(what: &str, e: &Error) {
    eprintln!("cuda-api: releasing a {what} failed: {e}");
}
