//! Peer access: whether kernels on one device can read and write another
//! device's memory ([`CudaDevice::can_access_peer`]), and turning it on between
//! two contexts ([`Context::enable_peer_access`]).
//!
//! Access is one way: enabling it from `a` to `b` lets kernels in `a` reach
//! memory of `b`, not the reverse. A device is not its own peer: its
//! kernels reach its memory without peer access (see NVIDIA's
//! [peer context memory access](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html)).

use cuda_sys::CUresult;

use crate::context::Context;
use crate::device::CudaDevice;
use crate::driver;
use crate::error::{CudaError, CudaResult, PeerError};

impl CudaDevice {
    /// Whether kernels on this device can be given access to `peer`'s
    /// memory (`cuDeviceCanAccessPeer`). For the same device the answer is
    /// `false` without asking the driver (which also answers 0): a device is
    /// not its own peer, and needs no peer access to reach its own memory.
    ///
    /// # Errors
    ///
    /// The driver's failure of `cuDeviceCanAccessPeer`.
    pub fn can_access_peer(&self, peer: &CudaDevice) -> CudaResult<bool> {
        if self == peer {
            return Ok(false);
        }
        driver::device_can_access_peer(self.raw(), peer.raw())
    }
}

impl Context {
    /// Lets kernels running in this context read and write memory allocated
    /// in `peer` (`cuCtxEnablePeerAccess`), one way. Idempotent: access that
    /// is already on (the driver's `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`,
    /// recognised by its code) is success. Makes this context current on the
    /// calling thread, as the driver call needs.
    ///
    /// # Errors
    ///
    /// [`PeerError::SameDevice`] when both contexts are on one device,
    /// [`PeerError::Unsupported`] when [`CudaDevice::can_access_peer`] says no,
    /// or the driver's failure (for example `CUDA_ERROR_TOO_MANY_PEERS`).
    pub fn enable_peer_access(&self, peer: &Context) -> CudaResult<()> {
        let (from, to) = (self.device(), peer.device());
        if from == to {
            return Err(PeerError::SameDevice {
                call: "Context::enable_peer_access",
                device: from.ordinal(),
            }
            .into());
        }
        if !from.can_access_peer(to)? {
            return Err(PeerError::Unsupported {
                from: from.ordinal(),
                to: to.ordinal(),
            }
            .into());
        }
        self.bind()?;
        // SAFETY: `peer.raw()` is a live context, kept alive by `peer` for
        // the call; no flags (the driver requires 0).
        match unsafe { driver::ctx_enable_peer_access(peer.raw(), 0) } {
            Err(e) if already_enabled(&e) => Ok(()),
            r => r,
        }
    }
}

/// Whether `e` is the driver saying that peer access is already on.
fn already_enabled(e: &CudaError) -> bool {
    e.driver()
        .is_some_and(|d| d.code == CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DriverError;

    #[test]
    fn already_enabled_is_told_by_the_code() {
        let e = |code| CudaError::Driver(DriverError::new("cuCtxEnablePeerAccess", code));
        assert!(already_enabled(&e(
            CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
        )));
        assert!(!already_enabled(&e(CUresult::CUDA_ERROR_TOO_MANY_PEERS)));
        assert!(!already_enabled(&e(
            CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
        )));
        // Not a driver error at all.
        assert!(!already_enabled(&CudaError::invalid_argument(
            "x",
            "y",
            "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED".into()
        )));
    }

    #[test]
    fn peer_errors_name_the_devices_and_what_to_do() {
        let e = CudaError::from(PeerError::SameDevice {
            call: "Context::enable_peer_access",
            device: 0,
        });
        let s = e.to_string();
        assert!(s.starts_with("Context::enable_peer_access: "), "{s}");
        assert!(s.contains("cuda:0") && s.contains("another device"), "{s}");
        let s = CudaError::from(PeerError::Unsupported { from: 1, to: 0 }).to_string();
        assert!(s.contains("cuda:1 cannot access cuda:0"), "{s}");
    }
}
