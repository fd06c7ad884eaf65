//! Array access checks under the access modes: STRICT (same device only),
//! CHECKED (ask the driver where the allocation lives, refuse what the
//! launch device cannot reach, warn once per pattern where it cannot tell)
//! and RELAXED (nothing). CPU launches always require host-reachable memory:
//! a host thread dereferencing a device address would be undefined
//! behaviour, not a device fault, so no mode relaxes that.

use std::collections::HashSet;
use std::sync::Mutex;

use cuda_api::sys::{CUdeviceptr, CUpointer_attribute};

use crate::array::Array;
use crate::device::{AccessMode, Device};
use crate::error::{Error, Result};
use crate::storage::Memory;

/// Where the driver says an allocation lives (`cuPointerGetAttributes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// `CUmemorytype`: 1 host, 2 device, 3 array, 4 unified; 0 when the
    /// driver does not know the address.
    pub memory_type: u32,
    /// Ordinal of the device the allocation belongs to.
    pub device: i32,
    /// Whether it is managed memory.
    pub managed: bool,
}

/// Asks the driver where `address` lives.
pub(crate) fn locate(address: CUdeviceptr) -> Result<Location> {
    let attrs = [
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
    ];
    let mut memory_type = 0u32;
    let mut device = -1i32;
    let mut managed = 0u32;
    let mut data = [
        (&mut memory_type as *mut u32).cast(),
        (&mut device as *mut i32).cast(),
        (&mut managed as *mut u32).cast(),
    ];
    // SAFETY: three attributes, three pointers to values of at least the
    // size the driver writes for each (unsigned int, int, bool in a u32),
    // alive for the call. The driver accepts any address here.
    unsafe { cuda_api::driver::pointer_get_attributes(&attrs, &mut data, address) }?;
    Ok(Location {
        memory_type,
        device,
        managed: managed & 0xff != 0,
    })
}

fn warn_once(pattern: String) {
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if seen
        .get_or_insert_with(HashSet::new)
        .insert(pattern.clone())
    {
        eprintln!("warp-launch: warning: {pattern}");
    }
}

/// Peer access this crate turned on: (from, to) device ordinals.
static PEERS: Mutex<Vec<(i32, i32)>> = Mutex::new(Vec::new());

/// Lets kernels on `from` access memory of `to` (`cuCtxEnablePeerAccess`
/// between their primary contexts), and records it for CHECKED launches.
pub fn enable_peer_access(from: Device, to: Device) -> Result<()> {
    let (Some(a), Some(b)) = (from.ordinal(), to.ordinal()) else {
        return Err(Error::Unsupported {
            kernel: String::new(),
            message: format!("peer access is between CUDA devices, not {from} and {to}"),
        });
    };
    if !cuda_api::driver::device_can_access_peer(a, b)? {
        return Err(Error::Unsupported {
            kernel: String::new(),
            message: format!(
                "{from} cannot access {to}'s memory (cuDeviceCanAccessPeer says 0); copy the array to {from}"
            ),
        });
    }
    let target = to.context()?;
    from.context()?.bind()?;
    // SAFETY: `target` is a primary context held by `to` for as long as the
    // device exists; `from`'s context is current.
    match unsafe { cuda_api::driver::ctx_enable_peer_access(target.raw(), 0) } {
        Ok(()) => {}
        Err(e)
            if e.driver()
                .is_some_and(|d| d.name() == Some("CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED")) => {}
        Err(e) => return Err(e.into()),
    }
    let mut peers = PEERS.lock().unwrap_or_else(|p| p.into_inner());
    if !peers.contains(&(a, b)) {
        peers.push((a, b));
    }
    Ok(())
}

fn peer_enabled(from: i32, to: i32) -> bool {
    PEERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&(from, to))
}

/// Checks that a launch on `launch` may use `array` (parameter `param` of
/// `kernel`) under `mode`.
pub fn check(
    kernel: &str,
    param: &str,
    array: &Array,
    launch: Device,
    mode: AccessMode,
) -> Result<()> {
    let refuse = |reason: String| {
        Err(Error::Access(Box::new(crate::error::AccessError {
            kernel: kernel.to_string(),
            param: param.to_string(),
            mode,
            launch: launch.to_string(),
            reason,
        })))
    };
    let memory = array.memory();
    if launch == Device::Cpu {
        // Not a mode question: the host would dereference the address.
        return match memory {
            Memory::Cuda(cuda_api::MemoryKind::Device) => refuse(format!(
                "the array is in device memory of {}, which host threads cannot read; copy it to a \"cpu\" array or allocate it page-locked or managed",
                array.device()
            )),
            _ => Ok(()),
        };
    }
    match mode {
        AccessMode::Relaxed => Ok(()),
        AccessMode::Strict => {
            if array.device() == launch {
                Ok(())
            } else {
                refuse(format!(
                    "the array lives on {} and STRICT allows only arrays of the launch device; copy it to {launch} or use CHECKED",
                    array.device()
                ))
            }
        }
        AccessMode::Checked => checked(array, launch, &refuse),
    }
}

fn checked(array: &Array, launch: Device, refuse: &dyn Fn(String) -> Result<()>) -> Result<()> {
    let Some(dev) = launch.ordinal() else {
        return Ok(());
    };
    if array.is_empty() {
        return Ok(());
    }
    let Some(loc) = array.storage().location()? else {
        return refuse(
            "the array is in ordinary host memory, which CUDA kernels cannot reach; allocate it page-locked (MemoryKind::PinnedHost) or managed, or copy it to the device".into(),
        );
    };
    if loc.managed || loc.memory_type == 4 {
        return Ok(());
    }
    match loc.memory_type {
        2 if loc.device == dev => Ok(()),
        2 => {
            if peer_enabled(dev, loc.device) {
                Ok(())
            } else if !cuda_api::driver::device_can_access_peer(dev, loc.device).unwrap_or(false) {
                refuse(format!(
                    "the array is in device memory of cuda:{}, and cuda:{dev} cannot access that device's memory; copy it to {launch}",
                    loc.device
                ))
            } else {
                refuse(format!(
                    "the array is in device memory of cuda:{} and peer access from cuda:{dev} is not enabled; call warp_launch::enable_peer_access({launch}, cuda:{}) or copy it",
                    loc.device, loc.device
                ))
            }
        }
        1 if loc.device == dev => Ok(()),
        1 => {
            warn_once(format!(
                "page-locked memory of cuda:{} used by a launch on cuda:{dev}: reachable only if it was allocated portable; the launch proceeds",
                loc.device
            ));
            Ok(())
        }
        t => {
            warn_once(format!(
                "the driver reports memory type {t} for an array used on cuda:{dev}; cannot tell whether it is reachable; the launch proceeds"
            ));
            Ok(())
        }
    }
}
