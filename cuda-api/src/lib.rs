//! The safe CUDA driver API.
//!
//! Two layers on the raw bindings of [`cuda_sys`]:
//!
//! - [`driver`], generated from the specs: one snake_case function per driver
//!   function (for example [`driver::launch_cooperative_kernel`],
//!   [`driver::occupancy_max_active_blocks_per_multiprocessor`],
//!   [`driver::library_get_kernel`], [`driver::func_get_param_info`]), with
//!   out-parameters returned in `Ok`, pointer-and-length pairs as slices, and
//!   every failure an [`CudaError`] naming the call.
//! - Hand-written types: [`init`], [`CudaDevice`], [`Context`], [`Stream`],
//!   [`Event`], memory ([`Allocation`], [`DeviceBuffer`] in device,
//!   page-locked or managed memory, asynchronous copies in a [`Scope`]),
//!   [`Module`], [`Library`], [`Function`], [`TypedKernel`]s and run-time
//!   [`DynKernel`]s with [`ArgBlock`]s, and CUDA [`CudaGraph`]s captured from a
//!   stream ([`Stream::capture`]), instantiated ([`CudaGraphExec`]) and updated
//!   in place with the checks of a launch; stream-ordered pool memory
//!   ([`Allocation::zeroed_on`], [`MemPool`]), [`Stream::wait_stream`], raw
//!   pitched fills and copies on a stream or in a capture
//!   ([`Stream::fill_2d_raw`], [`Capture::copy_2d_raw`]); where memory lives
//!   ([`pointer_location`], [`Allocation::location`]), peer access
//!   ([`CudaDevice::can_access_peer`], [`Context::enable_peer_access`]), a
//!   device's one primary context ([`CudaDevice::primary_context`]) and the
//!   current one ([`Context::current`], [`CudaDevice::current`]).
//!
//! Library messages (a release that failed in `Drop`, where no error can be
//! returned) go through the [`log`](https://docs.rs/log) crate: install a
//! logger to see or route them.
//!
//! # The safety contract
//!
//! Safe code cannot corrupt memory, race on it, free it under a running
//! kernel or read it stale, whatever values it passes. What cuda-api cannot
//! check is stated once, where it is promised, in an `unsafe` call:
//!
//! - **Declaring a kernel** ([`Module::kernel`], [`Module::dyn_kernel`],
//!   [`TypedKernel::declare`], [`DynKernel::declare`]) promises the parameter types
//!   (count, sizes and offsets are checked against the driver's layout) *and*
//!   where the kernel reads and writes: whenever every [`Bound`] and
//!   launch-shape rule declared on the kernel holds, it touches only memory
//!   inside the buffers it is given (and the dynamic shared memory the
//!   launch gives it). Kernels index with the thread and block index and
//!   with length arguments; [`Bound`] shows how to state that (`partial`
//!   must hold one element per block, `x` at least `n` elements, a row
//!   pointer `n + 1`: an [`Extent`] sums and multiplies such quantities),
//!   [`DynKernel::max_grid`], [`DynKernel::fixed_block`] and
//!   [`DynKernel::shared_mem`] state what the kernel needs of the grid, the
//!   block and its shared memory, and every launch checks all of it.
//! - **Device pointers detached from a borrow** ([`DevicePtr::from_raw`],
//!   [`DeviceBuffer::as_mut_ptr`], views from raw parts) and **raw argument
//!   bytes** ([`ArgBlock::set_bytes`]) promise that the memory is live and
//!   unshared for every launch that receives them. Safe code passes
//!   `&buffer` (read-only) and `&mut buffer` (written), which the borrow
//!   checker ties to the launch; no one outside cuda-api can implement the
//!   argument traits.
//! - **The thin layer** ([`driver`]): every wrapper that takes a raw handle,
//!   address or pointer is `unsafe`, with its own `# Safety` section.
//!
//! What the safe types guarantee in return: images are checked against their
//! length before the driver reads them ([`check_image`], refusing with
//! [`CudaError::InvalidImage`]); a launch refuses a stream of another context than the
//! module's, and device memory of another context; every buffer a launch or
//! asynchronous copy uses is noted ([`Allocation::record_use`]), so the next
//! blocking host read or write and the free wait for the context's queued
//! work (on any stream) first (pool memory, [`Allocation::zeroed_on`], used
//! only on the stream it was allocated on, is freed in order on that stream
//! instead, with no host wait: [`Allocation::record_use_on`], which also
//! makes another stream's first use of pool memory wait for its allocation
//! and zeroing, and refuses memory lent to another library,
//! [`Allocation::lend`]); the current context is read from the driver
//! ([`Context::bind`]), never from a cache that other code could make stale;
//! cached kernel facts hold the context they were queried in.
//!
//! Kernels whose parameters are known only at run time are declared as a
//! [`DynKernel`] and launched with an owned, reusable [`ArgBlock`]:
//!
//! ```no_run
//! use cuda_api::{ConstDevicePtr, Context, CudaDevice, DevicePtr, Extent, LaunchConfig, Module, Stream, DeviceBuffer};
//! # fn main() -> cuda_api::CudaResult<()> {
//! let ctx = Context::primary(&CudaDevice::get(0)?)?;
//! let module = Module::from_file(&ctx, "saxpy.ptx")?;
//! // SAFETY: saxpy(float a, const float* x, float* y, unsigned n) touches
//! // x[i] and y[i] only for i < n: in bounds when x and y hold n elements.
//! let saxpy = unsafe { module.kernel::<(f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32)>("saxpy")? }
//!     .bound(1, Extent::Param(3))?
//!     .bound(2, Extent::Param(3))?;
//! let x = DeviceBuffer::from_slice(&ctx, &[1.0f32; 1024])?;
//! let mut y = DeviceBuffer::<f32>::zeroed(&ctx, 1024)?;
//! let stream = Stream::new(&ctx)?;
//! saxpy.launch(&stream, LaunchConfig::for_elements(1024, 256), (2.0f32, &x, &mut y, 1024u32))?;
//! // n = 2048 with 1024-element buffers is refused before the driver sees it.
//! assert!(saxpy.launch(&stream, LaunchConfig::for_elements(2048, 256), (2.0f32, &x, &mut y, 2048u32)).is_err());
//!
//! // The same kernel with arguments chosen at run time, relaunched without allocating.
//! let mut args = saxpy.as_dyn().args();
//! args.push(3.0f32)?.push(&x)?.push(&mut y)?.push(1024u32)?;
//! for a in 0..10 {
//!     args.set(0, a as f32)?;
//!     saxpy.as_dyn().launch(&stream, LaunchConfig::for_elements(1024, 256), &args)?;
//! }
//! drop(args);
//! println!("{:?}", &y.to_vec()?[..4]); // waits for the launches first
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
// Messages go through `log` (users route or silence them), never
// straight to stdout or stderr; tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

#[rustfmt::skip]
mod generated;

mod cast;
mod choice;
mod compile_error;
mod context;
#[cfg(feature = "cudarc")]
mod cudarc_interop;
mod device;
mod error;
mod function;
#[doc(hidden)]
pub mod fuzzing;
mod graph;
mod image;
mod image_set;
mod kernel;
mod launch;
mod location;
mod memory;
mod module;
mod ordered;
mod params;
mod peer;
mod pool;
mod priority;
mod program;
mod stream;
mod target;

// The two lower layers: the generated thin wrappers and the raw bindings.
pub use cuda_sys as sys;
pub use generated::driver;
pub use generated::nvrtc;

// Errors: one error type for every call, and the typed reasons it carries.
pub use error::PeerError;
pub use error::{
    ArgError, CudaError, CudaResult, DRIVER_LOG_LINES, DriverError, SignatureError, check,
    check_nvrtc, require, set_driver_log_in_errors, supports,
};
pub use image::ImageError;
pub use launch::LaunchError;

// The driver, devices and contexts.
pub use context::Context;
pub use device::{CudaDevice, driver_version, init};
pub use priority::PriorityRange;

// Streams and events.
pub use ordered::FillWord;
pub use pool::MemPool;
pub use stream::{Event, Stream};

// Device memory, pointers to it, and where memory lives.
pub use location::{Location, MemoryType, pointer_location};
pub use memory::{
    Allocation, BufferUse, ConstDevicePtr, DeviceBuffer, DevicePtr, DeviceRepr, DeviceView,
    DeviceViewMut, MemoryKind, Scope,
};

// Reinterpreting views of plain data (`DeviceBuffer::view_as`, `DeviceView::cast`).
pub use cast::Plain;

// Loading code: modules, libraries, the image validator, functions.
pub use choice::choose_image;
pub use function::Function;
pub use image::{ImageKind, check_image};
pub use image_set::ImageSet;
pub use module::{Library, Module};
pub use program::{
    CACHE_ENV as NVRTC_CACHE_ENV, CacheOutcome, CompileError, Compiled, Diagnostic, Linker, Output,
    Program, PtxRefused,
};
pub use target::{ArchVariant, ComputeCapability, ImageTarget, NoImageError, PtxIsa};

// Kernel parameters: their types and the driver's layout.
pub use params::{Param, ParamRepr, ParamSlot, ParamType};

// Kernels, typed and run-time declared, their arguments and buffer bounds.
pub use kernel::{
    ArgBlock, Axis, Bound, CheckedConfig, DynArg, DynKernel, Extent, ExtentExpr, KernelArg,
    KernelArgs, KernelSignature, MAX_TYPED_PARAMS, TypedKernel,
};

// Launch configuration and the limits it is checked against.
pub use launch::{
    ClusterLimits, DeviceLimits, Dim3, FunctionLimits, LaunchConfig, PORTABLE_CLUSTER_SIZE,
    PotentialBlockSize,
};

// CUDA graphs: captured from a stream, instantiated, updated in place.
pub use graph::{
    Capture, CaptureMode, Condition, ConditionalBody, CudaGraph, CudaGraphExec, GraphNode,
    KernelNode,
};

// Interop with cudarc (feature `cudarc`): its slices as cuda-api views.
#[cfg(feature = "cudarc")]
pub use cudarc_interop::{view as cudarc_view, view_mut as cudarc_view_mut};

/// Reports a failure to unload a library (which belongs to no context) in
/// `Drop` through the `log` crate: after a sticky error, once per process.
pub(crate) fn report_library_release_error(e: &CudaError) {
    static STICKY_SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if e.is_sticky() && STICKY_SEEN.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    log::warn!("unloading a library failed: {e}");
}
