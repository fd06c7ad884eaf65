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
//!   [`Event`], memory ([`Allocation`], [`DeviceBuffer`] in device,
//!   page-locked or managed memory, asynchronous copies in a [`Scope`]),
//!   [`Module`], [`Library`], [`Function`], typed [`Kernel`]s and run-time
//!   [`DynKernel`]s with [`ArgBlock`]s.
//!
//! Images (cubin, fatbin, PTX) are checked in Rust against their length
//! before the driver reads them ([`image::check`], used by
//! [`Module::from_image`] and [`Library::from_image`]): the driver takes a
//! pointer with no length and trusts every offset inside, so a truncated or
//! corrupted file is refused with [`Error::InvalidImage`] instead.
//!
//! Declaring a kernel's parameter types is the one `unsafe` promise; it is
//! checked against the parameter layout the driver reports (count, sizes,
//! offsets), and every launch after that is safe and validated (cooperative
//! launches against device support and occupancy times SM count) from facts
//! cached per context. `&buffer` passes a read-only pointer, `&mut buffer` a
//! writable one. Kernels whose parameters are known only at run time are
//! declared as a [`DynKernel`] and launched with an owned, reusable
//! [`ArgBlock`]:
//!
//! ```no_run
//! use cuda_api::{ConstDevicePtr, Context, Device, DevicePtr, LaunchConfig, Module, Stream, DeviceBuffer};
//! # fn main() -> cuda_api::Result<()> {
//! let ctx = Context::primary(&Device::get(0)?)?;
//! let module = Module::from_file(&ctx, "saxpy.ptx")?;
//! // SAFETY: saxpy(float a, const float* x, float* y, unsigned n)
//! let saxpy = unsafe { module.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")? };
//! let x = DeviceBuffer::from_slice(&ctx, &[1.0f32; 1024])?;
//! let mut y = DeviceBuffer::<f32>::zeroed(&ctx, 1024)?;
//! let stream = Stream::new(&ctx)?;
//! saxpy.launch(&stream, LaunchConfig::for_elements(1024, 256), (2.0f32, &x, &mut y, 1024u32))?;
//!
//! // The same kernel with arguments chosen at run time, relaunched without allocating.
//! let mut args = saxpy.as_dyn().args();
//! args.push(3.0f32)?.push(&x)?.push(y.as_mut_ptr())?.push(1024u32)?;
//! for a in 0..10 {
//!     args.set(0, a as f32)?;
//!     saxpy.as_dyn().launch(&stream, LaunchConfig::for_elements(1024, 256), &args)?;
//! }
//! stream.synchronize()?;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

#[rustfmt::skip]
#[allow(clippy::all, deprecated)]
mod generated;

pub mod args;
pub mod context;
#[cfg(feature = "cudarc")]
pub mod cudarc_interop;
pub mod device;
pub mod error;
pub mod function;
#[doc(hidden)]
pub mod fuzzing;
pub mod image;
pub mod kernel;
pub mod launch;
pub mod memory;
pub mod module;
pub mod params;
pub mod stream;

pub use args::{Arg, ArgBlock, ArgError, DynKernel};
pub use context::Context;
pub use cuda_sys as sys;
pub use device::{Device, driver_version, init};
pub use error::{DriverError, Error, Result, SignatureError};
pub use function::Function;
pub use generated::driver;
pub use image::{ImageError, ImageKind};
pub use kernel::{Kernel, KernelArg, KernelArgs, KernelSignature, MAX_TYPED_PARAMS};
pub use launch::{DeviceLimits, Dim3, FunctionLimits, LaunchConfig, LaunchError};
pub use memory::{
    Allocation, ConstDevicePtr, DeviceBuffer, DevicePtr, DeviceRepr, DeviceView, DeviceViewMut,
    MemoryKind, Scope,
};
pub use module::{Library, Module};
pub use params::{KernelParam, Param, ParamSlot, ParamType};
pub use stream::{Event, Stream};

/// Reports a failure to unload a library (which belongs to no context) in
/// `Drop`: after a sticky error, once per process.
pub(crate) fn report_library_release_error(e: &Error) {
    static STICKY_SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if e.is_sticky() && STICKY_SEEN.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    eprintln!("cuda-api: unloading a library failed: {e}");
}
