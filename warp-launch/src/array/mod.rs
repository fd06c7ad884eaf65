//! Arrays and their memory: [`Array`] (Warp's `wp.array`), the storage
//! that keeps an allocation alive ([`Storage`]), where it lives
//! ([`Memory`]), and the access checks a launch makes under an
//! [`AccessMode`].

mod access;
#[allow(clippy::module_inception)]
mod array;
#[cfg(feature = "candle")]
mod candle;
#[cfg(feature = "cudarc")]
mod cudarc;
#[cfg(feature = "dlpack")]
mod dlpack;
mod external;
mod mode;
mod ordered;
mod storage;

pub(crate) use access::check;
pub use access::{enable_peer_access, set_thread_access_mode, thread_access_mode};
pub(crate) use array::set_copy_recorder;
pub use array::{Array, TypedArray};
#[cfg(feature = "cudarc")]
pub use cudarc::CudarcSlice;
pub use mode::AccessMode;
pub(crate) use ordered::{Queue, assign, fill, note_use_on, value_bytes};
pub use storage::{HostMemory, Memory, Storage};
pub(crate) use storage::{
    StorageLocks, launch_owner, lock_for_gpu, lock_storages, seal_launch_storages,
};
