//! The CPU code of a Warp module, as the compile step (`warp-build`) links
//! it into the program: per kernel, the `extern "C"` entry points it
//! generates around Warp's CPU C++ (`wpl_<module>__<key>__forward`,
//! `__backward`, `__layout`), and the module's assertion record
//! (`wpl_take_assert`). The types are plain function pointers and `'static`
//! tables, so the generated `<module>.rs` builds them in a `static`.

use std::ffi::{c_char, c_void};
use std::fmt;

/// Runs task indices `[first, last)` of a kernel's forward function,
/// serially, on the calling thread: `dim` points at Warp's
/// `launch_bounds_t<N>`, `args` at the kernel's `wp_args_<key>` struct.
pub type CpuForwardFn =
    unsafe extern "C" fn(dim: *const c_void, args: *mut c_void, first: usize, last: usize);

/// Runs task indices `[first, last)` of a kernel's backward function: as
/// [`CpuForwardFn`], with the adjoints in a second `wp_args_<key>` (`adj`).
pub type CpuBackwardFn = unsafe extern "C" fn(
    dim: *const c_void,
    args: *mut c_void,
    adj: *mut c_void,
    first: usize,
    last: usize,
);

/// Writes `sizeof(wp_args_<key>)`, `alignof(wp_args_<key>)`, then the
/// offset of each field in order into `out[0..cap]`; returns how many values
/// that is (2 + the field count), even when `cap` is smaller.
pub type CpuLayoutFn = unsafe extern "C" fn(out: *mut usize, cap: usize) -> usize;

/// Returns the first kernel assertion that failed on the calling thread
/// since the last call (one NUL-terminated string; null when none failed),
/// and clears it.
pub type CpuAssertFn = unsafe extern "C" fn() -> *const c_char;

/// One kernel's CPU entry points, compiled from Warp's generated C++
/// (`warp-build` writes these into the module's generated Rust file).
/// Its fields are private: it is built only by the `unsafe`
/// [`EmbeddedCpuKernel::new`], and launched only as part of an
/// [`EmbeddedModule`](crate::EmbeddedModule).
#[derive(Clone, Copy)]
pub struct EmbeddedCpuKernel {
    key: &'static str,
    forward: CpuForwardFn,
    backward: Option<CpuBackwardFn>,
    layout: CpuLayoutFn,
}

impl EmbeddedCpuKernel {
    /// Kernel `key`'s entry points.
    ///
    /// # Safety
    ///
    /// The functions are the `wpl_` functions `warp-build` generated for
    /// kernel `key` of one Warp module's compile: `forward` and `backward`
    /// run that kernel over the `wp_args_<key>` layout that `layout`
    /// reports, and `layout` writes at most `cap` values.
    ///
    /// Which source they run is not this call's promise: the entry points
    /// reach a launch only inside an [`EmbeddedCpu`] inside an
    /// [`EmbeddedModule`](crate::EmbeddedModule), whose `unsafe`
    /// constructor promises that they were compiled with that module's
    /// source.
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

    /// The kernel's key (the Python function's name).
    pub fn key(&self) -> &'static str {
        self.key
    }

    pub(crate) fn forward(&self) -> CpuForwardFn {
        self.forward
    }

    pub(crate) fn backward(&self) -> Option<CpuBackwardFn> {
        self.backward
    }

    pub(crate) fn layout(&self) -> CpuLayoutFn {
        self.layout
    }
}

impl fmt::Debug for EmbeddedCpuKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedCpuKernel")
            .field("key", &self.key)
            .field("backward", &self.backward.is_some())
            .finish()
    }
}

/// A module's CPU code: its kernels' entry points, the kernels that have
/// none (with the reason the compile step recorded: tile code, cooperative
/// lane functions), and the module's assertion record.
#[derive(Clone, Copy)]
pub struct EmbeddedCpu {
    kernels: &'static [EmbeddedCpuKernel],
    unsupported: &'static [(&'static str, &'static str)],
    take_assert: CpuAssertFn,
}

impl EmbeddedCpu {
    /// The module's CPU code.
    ///
    /// # Safety
    ///
    /// Every kernel's entry points are one module compile's (as
    /// [`EmbeddedCpuKernel::new`] promises), and `take_assert` is
    /// `warp-build`'s `wpl_take_assert` linked with them, the record the
    /// kernels' failed assertions go to: it returns null or a
    /// NUL-terminated string that stays valid until the calling thread's
    /// next record. As for the kernels, the pairing with a source is
    /// [`EmbeddedModule::new`](crate::EmbeddedModule::new)'s promise.
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

    /// The kernels without: `(key, why)`.
    pub fn unsupported(&self) -> &'static [(&'static str, &'static str)] {
        self.unsupported
    }

    pub(crate) fn take_assert(&self) -> CpuAssertFn {
        self.take_assert
    }
}

impl fmt::Debug for EmbeddedCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedCpu")
            .field("kernels", &self.kernels)
            .field("unsupported", &self.unsupported)
            .finish()
    }
}
