//! A launch from start to end: the kernel ([`Kernel`], [`KernelSpec`]), the
//! domain arithmetic (`domain`, no CUDA), arguments and their checks
//! ([`Arg`]), the builder ([`LaunchBuilder`]), the checked reusable
//! [`Launch`] and this thread's recordings for the tape. A launch on the
//! CPU device runs through [`crate::cpu`], called from `prepare` alone.

pub(crate) mod bind;
mod builder;
pub(crate) mod domain;
pub(crate) mod kernel;
#[allow(clippy::module_inception)]
mod launch;
pub(crate) mod memo;
pub(crate) mod prepare;
pub(crate) mod record;
mod spare;
mod typed;

pub use bind::{Arg, ArgSlot, IntoArg, IntoArgs, StructRef, StructValue, TypedArg};
pub use builder::LaunchBuilder;
pub use domain::{Bounds, Dim, DimError, MaxBlocks, Plan};
pub use kernel::{Kernel, KernelSpec};
pub use launch::Launch;
pub(crate) use launch::{Extents, check_host, check_host_cpu};
pub(crate) use prepare::check_context;
