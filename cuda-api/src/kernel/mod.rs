//! Kernels and what they are given: [`TypedKernel`]s (parameter types fixed
//! at compile time as a tuple) beside [`DynKernel`]s (declared at run time),
//! both checked against the driver's parameter layout; the arguments a
//! launch passes (`args`: [`ArgBlock`], [`DynArg`]; what it learns of a buffer
//! argument is `memory`'s [`BufferUse`](crate::BufferUse)); and the
//! buffer bounds declared with a kernel and checked at every launch
//! with the launch-shape rules (`bounds`: [`Bound`], [`Extent`]).
//!
//! `typed` stands on `dynamic` (a typed kernel is a checked run-time
//! declaration plus a tuple type); both stand on `args`, which stands on
//! `decl` (the declaration an argument block is made for) and `bounds`.

pub(crate) mod args;
pub(crate) mod bounds;
pub(crate) mod checked;
pub(crate) mod decl;
pub(crate) mod dynamic;
pub(crate) mod typed;

pub use args::{ArgBlock, DynArg};
pub use bounds::{Axis, Bound, Extent, ExtentExpr};
pub use checked::CheckedConfig;
pub use dynamic::DynKernel;
pub use typed::{KernelArg, KernelArgs, KernelSignature, MAX_TYPED_PARAMS, TypedKernel};
