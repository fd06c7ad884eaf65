//! NVIDIA Warp's `warp.launch` for Rust, built on `cuda-api`.
//!
//! Kernels come from two sources that share Warp's kernel ABI
//! (`launch_bounds_t<N>` first, arrays as `array_t<T>` by value: [`LaunchBounds1`]
//! to [`LaunchBounds4`], [`ArrayT`]):
//! - kernels written in Warp and compiled ahead of time by Warp
//!   (`wp.compile_aot_module(module, arch=90, module_dir=DIR, use_ptx=False,
//!   strip_hash=True)`), loaded with [`AotModule::from_embedded`] when
//!   compiled into the program, or the `unsafe` [`AotModule::load`] from a
//!   directory (the caller vouches that its files belong together); their parameters
//!   are read from the generated `.cu`, no Python at run time;
//! - CUDA C kernels written against `include/warp_launch.h` (or any image),
//!   declared in Rust with [`KernelSpec`].
//!
//! A launch covers a domain of 1 to 4 dimensions with Warp's semantics
//! (padding, extra dimensions folded into `coord_mult`, grid-stride or lean
//! grids, `max_blocks`, `block_dim` 256 by default), and checks every
//! argument before the driver sees it: count, kind, dtype, dimensions and
//! where each array lives ([`AccessMode`]). [`Launch`] is the reusable,
//! allocation-free form ([`LaunchBuilder::record_cmd`], as Warp's
//! `record_cmd=True`; [`Launch::launch`] runs it on its stream,
//! [`Launch::launch_on`] on another); [`Tape`] records launches and
//! runs their backward kernels; [`Graph`] captures launches into a CUDA graph
//! whose kernel nodes can be updated in place, with stream-ordered array
//! operations between them ([`Graph::capture_with`]); array operations
//! ([`Array::zero_on`], [`Array::fill_on`], [`Array::assign_on`],
//! [`Array::to_on`], ...) are queued on a stream as launches are, on the
//! current one ([`Device::stream`], [`ScopedStream`]) when none is named;
//! the `"cpu"` device runs
//! a Warp module's kernels from its CPU code (Warp's generated C++, compiled
//! by the compile step and linked into the program: [`EmbeddedCpu`]) and
//! kernels that have a Rust implementation ([`Kernel::with_cpu`]). A module
//! loads, lists its kernels and runs them on `"cpu"` without a GPU: its
//! CUDA image is loaded on the first CUDA use.
//!
//! Typed launchers generated from a module's source call the positional
//! form, [`Kernel::launch_args`] / [`Kernel::record_args`] with
//! [`TypedArg`]s (after [`Kernel::check_signature`] once): the same checks
//! without name lookups or allocations, arrays typed by dtype and number
//! of dimensions ([`TypedArray<T, N>`](TypedArray)).
//!
//! Every public item has one path, at the crate root. The `cuda-api` types a
//! Warp user handles ([`Stream`], [`Event`], [`Context`], [`MemoryKind`],
//! [`Location`], [`MemoryType`], [`CudaDevice`], [`CudaError`]) are re-exported
//! here, so one dependency is enough; so are those of `warp-proof`, the
//! crate that reads kernel text and proves access rules without GPU code
//! (the dtype table [`DTYPES`], the ABI layouts, [`Accesses`] and the other
//! signature types, [`WarpFeature`], [`UnmodelledError`]).
//!
//! # Safety contract
//!
//! Safe code cannot make a launch read or write outside the arrays it is
//! given. Besides the arguments' types and where they live, a kernel trusts
//! the launch shape, so every launch also checks the kernel's array access
//! rules ([`Accesses`]): for a Warp kernel they are read from the generated
//! code (an access indexed by `wp.tid()` coordinates and integer constants
//! becomes a rule; the launch refuses a domain larger than the array with
//! [`Error::OutOfBounds`]); a kernel with any access no rule expresses is
//! refused with [`Error::Unproven`] and runs only through the `unsafe`
//! [`LaunchBuilder::unchecked`]. The `unsafe` promise of
//! [`KernelSpec::load_cuda`] covers the declared parameter types and that
//! the kernel stays in bounds whenever its declared rules hold (modules
//! loaded by [`AotModule`] meet it when written by Warp
//! [`WARP_VERSION`], which `AotModule` checks). On the CPU device, Rust
//! implementations are bounds-checked; a module's compiled CPU code is not
//! (Warp's C++ indexes host memory directly), so its launches check the
//! access rules exactly as CUDA launches do, after its argument struct's
//! layout was checked against the declaration when the module loaded.
//!
//! Tile kernels launch with [`Kernel::launch_tiled`] (the block size
//! appended to the domain, at the block size the module was compiled
//! for); their register-tile loads and stores become
//! [`AxisIndex::Tile`] rules, other tile code is [`Error::Unproven`].
//! Modules compiled in a mode the launch does not model (deterministic
//! mode, thread block clusters, external entry points: [`WarpFeature`])
//! are refused at load with [`Error::Unmodelled`]; native code
//! (`wp.func_native`) and preambles make a module's kernels unproven, as
//! the facts warp-build records from Warp's objects say
//! ([`EmbeddedModule::with_facts`]).
//!
//! On a GPU, after `cargo xtask warp-aot` (which compiles
//! `tests/warp/kernels.py` into `target/warp-aot/aot`):
//!
//! ```no_run
//! use warp_launch::{AotModule, Array, Device, Stream, Tape};
//!
//! fn main() -> warp_launch::Result<()> {
//!     // A directory written by wp.compile_aot_module for a module holding
//!     //   @wp.kernel
//!     //   def saxpy(a: float, x: wp.array(dtype=float), y: wp.array(dtype=float)):
//!     //       i = wp.tid()
//!     //       y[i] = a * x[i] + y[i]
//!     // SAFETY: the directory is one wp.compile_aot_module output, unchanged.
//!     let module = unsafe { AotModule::load("target/warp-aot/aot") }?;
//!     let saxpy = module.kernel("saxpy")?;
//!
//!     let dev = Device::Cuda(0);
//!     let x = Array::from_slice(dev, &[1.0f32, 2.0, 3.0, 4.0], &[4])?.with_grad()?;
//!     let y = Array::zeros::<f32>(dev, &[4])?.with_grad()?;
//!
//!     // wp.launch(saxpy, dim=4, inputs=[2.0, x], outputs=[y]), recorded by the tape.
//!     let mut tape = Tape::new();
//!     tape.record(|| saxpy.launch(4).inputs((2.0f32, &x)).outputs(&y).run())?;
//!     println!("y = {:?}", y.to_vec::<f32>()?);
//!
//!     // Gradients: dy/dx = a for each element. y has 4 elements, so its
//!     // gradient is seeded explicitly (backward(&loss) takes a one-element loss).
//!     let ones = Array::from_slice(dev, &[1.0f32; 4], &[4])?;
//!     tape.backward_with(&[(&y, &ones)])?;
//!     println!("dy/dx = {:?}", x.grad().unwrap().to_vec::<f32>()?);
//!
//!     // A reusable launch: checked once, replayed without allocating.
//!     let stream = Stream::new(&dev.context()?)?;
//!     let mut launch = saxpy.launch(4).inputs((0.0f32, &x, &y)).stream(&stream).record_cmd()?;
//!     for i in 0..10 {
//!         launch.set_param_by_name("a", i as f32)?;
//!         launch.launch()?; // on `stream`, the one it was recorded for
//!     }
//!     stream.synchronize()?;
//!     Ok(())
//! }
//! ```
//!
//! Anywhere, with no GPU: a kernel declared in Rust with a Rust body for
//! the `"cpu"` device, over a 2-D domain (`i, j = wp.tid()`). (Warp
//! modules compiled by warp-build bring Warp's own CPU code instead, forward
//! and backward: `examples/warp-tape`.)
//!
//! ```
//! use warp_launch::{Array, KernelSpec, cpu_each_fn};
//!
//! fn main() -> warp_launch::Result<()> {
//!     // out[i, j] = a * x[i, j]
//!     let scale = KernelSpec::new("scale", 2)
//!         .value::<f32>("a")
//!         .array::<f32>("x", 2)
//!         .array::<f32>("out", 2)
//!         .declare()?
//!         .with_cpu(
//!             cpu_each_fn(|args, each| {
//!                 // The arguments, decoded once per launch...
//!                 let a: f32 = args.value(0)?;
//!                 let (x, out) = (args.array::<f32>(1)?, args.array::<f32>(2)?);
//!                 // ...and the body, once per thread.
//!                 each.run(|t| out.set(t.tid2(), a * x.get(t.tid2())?))
//!             }),
//!             None,
//!         );
//!     let x = Array::from_slice("cpu", &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
//!     let out = Array::zeros::<f32>("cpu", &[2, 3])?;
//!     scale.launch([2, 3]).inputs((3.0f32, &x)).outputs(&out).device("cpu").run()?;
//!     assert_eq!(out.to_vec::<f32>()?, [3.0, 6.0, 9.0, 12.0, 15.0, 18.0]);
//!
//!     // An index outside the array is an error naming the kernel, not a crash.
//!     let small = Array::zeros::<f32>("cpu", &[1, 1])?;
//!     assert!(scale.launch([2, 3]).inputs((3.0f32, &x)).outputs(&small).device("cpu").run().is_err());
//!     Ok(())
//! }
//! ```

#![deny(missing_docs)]
// Messages go through `log` (users route or silence them), never
// straight to stdout or stderr; tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![warn(clippy::missing_errors_doc)]

mod abi;
mod aot;
mod array;
mod autodiff;
mod conditional;
mod cpu;
mod cuda_c;
mod cuda_embedded;
mod device;
mod error;
mod facts;
#[doc(hidden)]
pub mod fuzzing;
mod graph;
mod images;
mod launch;
mod proof;
#[cfg(test)]
mod proof_tests;

use proof::{signature, source};

// Devices, and the cuda-api types a Warp user handles (streams, events,
// contexts, where memory lives), so one dependency is enough.
pub use cuda_api::{
    CacheOutcome, CompileError, Context, CudaDevice, CudaError, Event, ImageSet, Location,
    MemoryKind, MemoryType, NoImageError, Stream,
};
pub use device::{Device, IntoDevice, ScopedDevice, ScopedStream, cuda_available, wait_stream};

// Errors.
pub use error::{
    AccessError, AccessRuleError, AccessRuleProblem, ArgumentError, BoundsError, CpuIndexError,
    CpuLayoutError, DeclarationError, DeclarationProblem, Error, Result, UnprovenError,
};
pub use launch::DimError;
pub use warp_proof::UnmodelledError;

// A launch's domain and the grid it becomes (pure arithmetic, no GPU).
pub use launch::{Bounds, Dim, MaxBlocks, Plan};

// Warp's kernel ABI: dtypes, values, structs and the layouts a kernel
// receives (the dtype table and the layouts are warp-proof's).
pub use abi::{Element, INLINE_VALUE_BYTES, Value, WarpStruct};
/// The half crate (the `half` feature): `half::f16` and `half::bf16` are
/// the [`Element`]s of Warp's float16 and bfloat16, as typed launchers
/// name them.
#[cfg(feature = "half")]
pub use half;
pub use warp_proof::{
    ARRAY_FLAG_RETAIN_GRAD, ARRAY_MAX_DIMS, ArrayT, DTYPES, DType, Kind, LAUNCH_MAX_DIMS,
    LaunchBounds1, LaunchBounds2, LaunchBounds3, LaunchBounds4, Scalar,
};

// Arrays, their memory and the access checks of a launch.
pub use array::{
    AccessMode, Array, HostMemory, Memory, Storage, TypedArray, enable_peer_access,
    set_thread_access_mode, thread_access_mode,
};
// Zero-copy exchange with cudarc (feature `cudarc`).
#[cfg(feature = "cudarc")]
pub use array::CudarcSlice;

// Kernels: their signatures, Warp modules compiled ahead of time, CUDA C declarations.
pub use aot::{AotModule, WARP_VERSION};
pub use cpu::{
    CpuAssertFn, CpuBackwardFn, CpuForwardFn, CpuLayoutFn, EmbeddedCpu, EmbeddedCpuKernel,
};
pub use cuda_c::{CudaModule, EmbeddedCudaModule};
pub use images::{EmbeddedImage, EmbeddedModule};
pub use launch::{Kernel, KernelSpec};
// Their access rules and signatures (warp-proof's).
pub use warp_proof::{
    AccessTarget, Accesses, ArrayAccess, AxisIndex, KernelParam, ParamKind, Pass, StructField,
    StructType, Unproven, WarpFeature,
};

// Launching: arguments, the builder, the reusable launch, CUDA graphs.
pub use conditional::{GraphStep, run_if, run_steps, run_while};
pub use graph::{Graph, GraphCapture};
pub use launch::{
    Arg, ArgSlot, IntoArg, IntoArgs, Launch, LaunchBuilder, StructRef, StructValue, TypedArg,
};

// The CPU device: kernels implemented in Rust, or a module's compiled CPU code.
pub use cpu::{
    Block, CpuArgs, CpuArray, CpuBlockArgs, CpuFn, CpuIndex, EachThread, Ran, Thread, cpu_block_fn,
    cpu_each_fn, cpu_threads, set_cpu_threads,
};
// Kept for old code; its deprecation note says what to use.
#[allow(deprecated)]
pub use cpu::cpu_fn;

// Automatic differentiation.
pub use autodiff::{GradientCheck, Recording, Tape, check_gradients};

/// What a build script uses (feature `build`): the compile step, the
/// `warp-build` crate, which runs Warp's AOT compiler on a Python file of
/// kernels and writes the code that embeds the images ([`build::WarpModule`]),
/// and the launcher generator (warp-proof's, through warp-build), which
/// writes typed Rust launchers for the module's kernels
/// ([`build::Launchers`], [`build::write_launchers`]). The same items are
/// at `warp_build::` for build scripts that depend on warp-build alone.
///
/// ```no_run
/// // build.rs, with warp-launch (feature "build") in [build-dependencies]:
/// use warp_launch::build::{WarpModule, write_launchers};
/// let compiled = WarpModule::new("kernels.py")
///     .embed(true)
///     .compile()
///     .unwrap_or_else(|e| panic!("{e}"));
/// write_launchers(&compiled).unwrap_or_else(|e| panic!("{e}"));
/// // src/main.rs:
/// // include!(concat!(env!("OUT_DIR"), "/warp/kernels/kernels.rs"));
/// // include!(concat!(env!("OUT_DIR"), "/warp/kernels/kernels_launchers.rs"));
/// // let kernels = Kernels::new(&warp_launch::AotModule::from_embedded(&KERNELS)?)?;
/// // kernels.saxpy.launch(n, 2.0, &x, &y)?;
/// ```
#[cfg(feature = "build")]
pub mod build {
    pub use warp_build::*;
}
