//! A kernel's run-time declaration, shared by a [`DynKernel`](crate::DynKernel)
//! and the argument blocks made for it: its name, parameters and the
//! driver's layout of them, and the buffer bounds and launch-shape rules
//! resolved once.

use std::ffi::c_void;
use std::sync::Arc;

use super::bounds::Rules;
use crate::error::{CudaError, CudaResult};
use crate::launch::LaunchConfig;
use crate::params::{Param, ParamSlot};

/// One declaration of a kernel (each [`DynKernel::bound`](crate::DynKernel::bound)
/// makes a new one, with a new `id`).
pub(crate) struct Decl {
    pub(super) id: u64,
    pub(super) name: String,
    pub(super) params: Arc<[Param]>,
    pub(super) layout: Arc<[ParamSlot]>,
    /// Bytes of the parameter space (end of the last parameter).
    pub(super) space: usize,
    /// The buffer bounds and launch-shape rules declared with the kernel.
    pub(super) rules: Rules,
}

impl Decl {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether a launch has declared rules to check.
    #[inline]
    pub(crate) fn has_bounds(&self) -> bool {
        !self.rules.is_empty()
    }

    /// Checks the declared bounds and launch-shape rules of a launch.
    ///
    /// # Safety
    ///
    /// `values[i]` must point to parameter `i`'s value for every parameter
    /// a bound reads.
    pub(crate) unsafe fn check_bounds(
        &self,
        cfg: &LaunchConfig,
        lens: &[Option<usize>],
        values: &[*mut c_void],
    ) -> CudaResult<()> {
        // SAFETY: the caller's promise is passed on.
        unsafe {
            self.rules
                .check(&self.name, &self.params, cfg, lens, values)
        }
        .map_err(CudaError::from)
    }
}
