//! The CPU entry points of an embedded module, as warp-build generates them
//! from Warp's generated C++ (`wp_<module>.cpu.cpp`, linked as a static
//! library): the types [`EmbeddedModule::cpu`](crate::EmbeddedModule::cpu)
//! holds.

use std::ffi::{c_char, c_void};
use std::fmt;

/// Runs task indices `[first, last)` of a kernel's forward code, one after
/// the other on the calling thread: `dim` points to Warp's
/// `launch_bounds_t<N>`, `args` to the kernel's `wp_args_<key>`.
pub type CpuForwardFn =
    unsafe extern "C" fn(dim: *const c_void, args: *mut c_void, first: usize, last: usize);

/// The same for the backward code; `adj` points to the adjoints (a second
/// `wp_args_<key>`).
pub type CpuBackwardFn = unsafe extern "C" fn(
    dim: *const c_void,
    args: *mut c_void,
    adj: *mut c_void,
    first: usize,
    last: usize,
);

/// Writes `sizeof`, `alignof` and the offset of each field of the kernel's
/// `wp_args_<key>` into `out[..cap]`; returns how many values that is
/// (2 + the field count), even when `cap` is smaller.
pub type CpuLayoutFn = unsafe extern "C" fn(out: *mut usize, cap: usize) -> usize;

/// Returns the calling thread's first failed assertion in Warp's CPU code
/// since the last call (`file:line: message`, NUL-terminated), clearing it,
/// or null when there was none.
pub type CpuAssertFn = unsafe extern "C" fn() -> *const c_char;

/// One kernel's CPU entry points, compiled from Warp's generated C++
/// (warp-build writes these).
#[derive(Clone, Copy)]
pub struct EmbeddedCpuKernel {
    key: &'static str,
    forward: CpuForwardFn,
    backward: Option<CpuBackwardFn>,
    layout: CpuLayoutFn,
}

impl EmbeddedCpuKernel {
    /// A kernel's entry points.
    ///
    /// # Safety
    ///
    /// The functions are the `wpl_` functions warp-build generated for
    /// kernel `key` of this module.
    pub const unsafe fn new(
        key: &'static str,
        forward: CpuForwardFn,
        backward: Option<CpuBackwardFn>,
        layout: CpuLayoutFn,
    ) -> Self {
        EmbeddedCpuKernel {
            key,
            forward,
            backward,
            layout,
        }
    }

    /// The kernel's key (`saxpy`).
    pub fn key(&self) -> &'static str {
        self.key
    }

    /// The forward entry point.
    pub fn forward(&self) -> CpuForwardFn {
        self.forward
    }

    /// The backward entry point, when Warp generated one.
    pub fn backward(&self) -> Option<CpuBackwardFn> {
        self.backward
    }

    /// The layout of the kernel's argument struct.
    pub fn layout(&self) -> CpuLayoutFn {
        self.layout
    }
}

impl fmt::Debug for EmbeddedCpuKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedCpuKernel")
            .field("key", &self.key)
            .field("backward", &self.backward.is_some())
            .finish_non_exhaustive()
    }
}

/// A module's CPU code: its kernels' entry points, the kernels without (and
/// why), and the runtime's assertion record.
#[derive(Clone, Copy)]
pub struct EmbeddedCpu {
    kernels: &'static [EmbeddedCpuKernel],
    unsupported: &'static [(&'static str, &'static str)],
    take_assert: CpuAssertFn,
}

impl EmbeddedCpu {
    /// A module's CPU code.
    ///
    /// # Safety
    ///
    /// As [`EmbeddedCpuKernel::new`] for every kernel, and `take_assert` is
    /// warp-build's `wpl_take_assert`.
    pub const unsafe fn new(
        kernels: &'static [EmbeddedCpuKernel],
        unsupported: &'static [(&'static str, &'static str)],
        take_assert: CpuAssertFn,
    ) -> Self {
        EmbeddedCpu {
            kernels,
            unsupported,
            take_assert,
        }
    }

    /// The kernels with CPU entry points.
    pub fn kernels(&self) -> &'static [EmbeddedCpuKernel] {
        self.kernels
    }

    /// The kernels without CPU entry points, each with the reason.
    pub fn unsupported(&self) -> &'static [(&'static str, &'static str)] {
        self.unsupported
    }

    /// The runtime's assertion record.
    pub fn take_assert(&self) -> CpuAssertFn {
        self.take_assert
    }
}

impl fmt::Debug for EmbeddedCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedCpu")
            .field("kernels", &self.kernels)
            .field("unsupported", &self.unsupported)
            .finish_non_exhaustive()
    }
}
