//! Array access checks under the access modes: STRICT (same device only),
//! CHECKED (ask the driver where the allocation lives, refuse what the
//! launch device cannot reach, warn once per pattern where it cannot tell)
//! and RELAXED (no driver query).
//!
//! Every mode, RELAXED included, first refuses memory the launch device is
//! known not to reach from what the crate itself knows (the memory kind and
//! the device whose context allocated it), with no driver call:
//! - device memory for a CPU launch (a host thread would dereference a
//!   device address: undefined behaviour, not a device fault);
//! - ordinary host memory for a CUDA launch;
//! - device memory of another CUDA device, unless peer access from the
//!   launch device to it was enabled with [`enable_peer_access`].
//!
//! Page-locked memory (allocated portable and mapped) and managed memory
//! are reachable from every device and the host. What RELAXED gives up is
//! the driver's opinion: CHECKED's query of where the address lives, and
//! its warnings where the driver cannot tell.

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::Mutex;

use cuda_api::{Location, MemoryType};

use super::array::Array;
use super::mode::AccessMode;
use super::storage::Memory;
use crate::device::Device;
use crate::error::{Error, Result};

thread_local! {
    /// This thread's default access mode.
    static THREAD_MODE: Cell<AccessMode> = const { Cell::new(AccessMode::Checked) };
}

/// The calling thread's default access mode, used by launches built on this
/// thread that do not choose one ([`AccessMode::Checked`] until
/// [`set_thread_access_mode`] changes it).
pub fn thread_access_mode() -> AccessMode {
    THREAD_MODE.with(Cell::get)
}

/// Sets the calling thread's default access mode and returns the previous
/// one. Other threads keep theirs (a new thread starts with
/// [`AccessMode::Checked`]); a launch may still choose its own with
/// `LaunchBuilder::access_mode`. There is no process-wide switch: one
/// thread cannot change the checks of launches that other threads build.
pub fn set_thread_access_mode(mode: AccessMode) -> AccessMode {
    THREAD_MODE.with(|m| m.replace(mode))
}

/// Logs `pattern` as a warning (through the `log` crate) the first time
/// it is seen in this process.
fn warn_once(pattern: String) {
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if seen
        .get_or_insert_with(HashSet::new)
        .insert(pattern.clone())
    {
        log::warn!("{pattern}");
    }
}

/// Peer access this crate turned on: (from, to) device ordinals.
static PEERS: Mutex<Vec<(i32, i32)>> = Mutex::new(Vec::new());

/// Lets kernels on `from` access memory of `to`
/// ([`cuda_api::Context::enable_peer_access`] between their primary
/// contexts; idempotent), and records it for the launch checks.
///
/// # Errors
///
/// [`Error::NotCuda`] when either device is the CPU;
/// [`Error::Cuda`] holding [`cuda_api::PeerError::SameDevice`] when both
/// are one device, [`cuda_api::PeerError::Unsupported`] when the hardware
/// cannot reach `to` from `from`, or the driver's failure.
pub fn enable_peer_access(from: Device, to: Device) -> Result<()> {
    let (Some(a), Some(b)) = (from.ordinal(), to.ordinal()) else {
        return Err(Error::NotCuda {
            call: "enable_peer_access",
            device: if from.ordinal().is_none() { from } else { to },
        });
    };
    from.context()?.enable_peer_access(&to.context()?)?;
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

/// Why a launch on `launch` cannot reach memory of kind `memory` allocated
/// by a context of CUDA device `owner` (`None` for host memory), from these
/// facts alone: `None` when it is not known to be unreachable. `peer(a, b)`
/// says whether kernels on `cuda:a` were given access to `cuda:b`'s memory.
/// Pure logic: no driver call.
pub(crate) fn known_unreachable(
    memory: Memory,
    owner: Option<i32>,
    launch: Device,
    peer: impl Fn(i32, i32) -> bool,
) -> Option<String> {
    use cuda_api::MemoryKind;
    match (launch, memory) {
        (Device::Cpu, Memory::Cuda(MemoryKind::Device)) => Some(format!(
            "the array is in device memory of {}, which host threads cannot read; copy it to a \"cpu\" array or allocate it page-locked or managed",
            owner.map_or("a CUDA device".to_string(), |o| format!("cuda:{o}"))
        )),
        (Device::Cpu, _) => None,
        (Device::Cuda(_), Memory::Host) => Some(
            "the array is in ordinary host memory, which CUDA kernels cannot reach; allocate it page-locked (MemoryKind::PinnedHost) or managed, or copy it to the device".into(),
        ),
        (Device::Cuda(n), Memory::Cuda(MemoryKind::Device)) => match owner {
            Some(o) if o != n && !peer(n, o) => Some(format!(
                "the array is in device memory of cuda:{o}, which kernels on cuda:{n} reach only through peer access, and warp_launch::enable_peer_access(cuda:{n}, cuda:{o}) was not called; call it or copy the array to cuda:{n}"
            )),
            _ => None,
        },
        (Device::Cuda(_), _) => None,
    }
}

/// Checks that a launch on `launch` may use `array` (parameter `param` of
/// `kernel`) under `mode`: what is known unreachable is refused in every
/// mode (see the module documentation), then the mode's own rule applies.
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
    let storage = array.storage();
    let owner = storage.allocation().map(|a| a.context().device().ordinal());
    if storage.bytes() > 0
        && let Some(reason) = known_unreachable(storage.memory(), owner, launch, peer_enabled)
    {
        return refuse(reason);
    }
    if launch == Device::Cpu {
        return Ok(());
    }
    // CUDA launches run in the devices' primary contexts; device memory of
    // a separate context is not reachable from there.
    if let Some(a) = storage.allocation()
        && a.kind() == cuda_api::MemoryKind::Device
        && !a.context().is_primary()
    {
        return refuse(format!(
            "the array is device memory of {}, a context of its own, but warp-launch runs CUDA kernels in the device's primary context, which cannot reach it; allocate the array with Array::zeros or copy it there",
            a.context()
        ));
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
    let location = array.storage().location()?;
    match judge(location, dev, peer_enabled, can_access_peer) {
        Verdict::Reachable => Ok(()),
        Verdict::Unreachable(reason) => refuse(reason),
        Verdict::Unsure(pattern) => {
            warn_once(pattern);
            Ok(())
        }
    }
}

/// What CHECKED makes of the driver's answer.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// The launch device reaches the memory.
    Reachable,
    /// It does not: why, and what to do.
    Unreachable(String),
    /// The driver's answer does not tell: the launch proceeds with a warning.
    Unsure(String),
}

/// Whether a launch on `cuda:dev` reaches memory the driver located at
/// `location` (`None`: memory the driver does not know, i.e. ordinary host
/// memory). `peer(a, b)`: whether this crate enabled access from `cuda:a`
/// to `cuda:b`; `can_peer(a, b)`: whether the hardware allows it. Pure
/// logic: no driver call.
fn judge(
    location: Option<Location>,
    dev: i32,
    peer: impl Fn(i32, i32) -> bool,
    can_peer: impl Fn(i32, i32) -> bool,
) -> Verdict {
    let Some(loc) = location else {
        return Verdict::Unreachable(
            "the array is in ordinary host memory, which CUDA kernels cannot reach; allocate it page-locked (MemoryKind::PinnedHost) or managed, or copy it to the device".into(),
        );
    };
    if loc.managed || loc.memory_type == MemoryType::Unified {
        return Verdict::Reachable;
    }
    match (loc.memory_type, loc.device) {
        (MemoryType::Device, Some(owner)) if owner == dev => Verdict::Reachable,
        (MemoryType::Device, Some(owner)) => {
            if peer(dev, owner) {
                Verdict::Reachable
            } else if !can_peer(dev, owner) {
                Verdict::Unreachable(format!(
                    "the array is in device memory of cuda:{owner}, and cuda:{dev} cannot access that device's memory; copy it to cuda:{dev}"
                ))
            } else {
                Verdict::Unreachable(format!(
                    "the array is in device memory of cuda:{owner} and peer access from cuda:{dev} is not enabled; call warp_launch::enable_peer_access(cuda:{dev}, cuda:{owner}) or copy it"
                ))
            }
        }
        (MemoryType::Host, Some(owner)) if owner == dev => Verdict::Reachable,
        (MemoryType::Host, owner) => Verdict::Unsure(format!(
            "page-locked memory of {} used by a launch on cuda:{dev}: reachable only if it was allocated portable; the launch proceeds",
            owner.map_or("no device".to_string(), |o| format!("cuda:{o}"))
        )),
        (t, _) => Verdict::Unsure(format!(
            "the driver reports {loc} ({t:?}) for an array used on cuda:{dev}; cannot tell whether it is reachable; the launch proceeds"
        )),
    }
}

/// Whether kernels on `cuda:from` can be given access to `cuda:to`'s
/// memory; `false` where the driver cannot say.
fn can_access_peer(from: i32, to: i32) -> bool {
    let (Ok(a), Ok(b)) = (
        cuda_api::CudaDevice::get(from),
        cuda_api::CudaDevice::get(to),
    ) else {
        return false;
    };
    a.can_access_peer(&b).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cuda_api::MemoryKind;

    use super::*;

    fn no_peers(_: i32, _: i32) -> bool {
        false
    }

    #[test]
    fn what_is_known_unreachable_without_asking_the_driver() {
        let cuda = |k| Memory::Cuda(k);
        // Ordinary host memory: only the CPU reaches it.
        assert!(known_unreachable(Memory::Host, None, Device::Cuda(0), no_peers).is_some());
        assert!(known_unreachable(Memory::Host, None, Device::Cuda(3), no_peers).is_some());
        assert!(known_unreachable(Memory::Host, None, Device::Cpu, no_peers).is_none());
        // Device memory: its device, a peer with access enabled, never the CPU.
        let dev = cuda(MemoryKind::Device);
        assert!(known_unreachable(dev, Some(0), Device::Cuda(0), no_peers).is_none());
        assert!(known_unreachable(dev, Some(1), Device::Cuda(0), no_peers).is_some());
        assert!(
            known_unreachable(dev, Some(1), Device::Cuda(0), |a, b| (a, b) == (0, 1)).is_none()
        );
        // Peer access is one way: 1 -> 0 does not give 0 access to 1.
        assert!(
            known_unreachable(dev, Some(1), Device::Cuda(0), |a, b| (a, b) == (1, 0)).is_some()
        );
        assert!(known_unreachable(dev, Some(0), Device::Cpu, no_peers).is_some());
        // Page-locked (portable, mapped) and managed memory: everyone.
        for k in [MemoryKind::PinnedHost, MemoryKind::Managed] {
            for launch in [Device::Cpu, Device::Cuda(0), Device::Cuda(1)] {
                assert!(
                    known_unreachable(cuda(k), Some(0), launch, no_peers).is_none(),
                    "{k} on {launch}"
                );
            }
        }
    }

    #[test]
    fn checked_judges_the_drivers_answer() {
        let at = |memory_type, device: Option<i32>, managed| {
            Some(Location {
                memory_type,
                device,
                managed,
                mapped: true,
            })
        };
        let yes = |_: i32, _: i32| true;
        let reachable = |l, peer: &dyn Fn(i32, i32) -> bool, can: &dyn Fn(i32, i32) -> bool| {
            judge(l, 0, peer, can)
        };
        // Ordinary host memory (unknown to the driver): refused.
        assert!(matches!(
            reachable(None, &yes, &yes),
            Verdict::Unreachable(r) if r.contains("ordinary host memory")
        ));
        // Device memory of the launch device: fine.
        assert_eq!(
            reachable(at(MemoryType::Device, Some(0), false), &no_peers, &no_peers),
            Verdict::Reachable
        );
        // Of another device: fine with peer access on, else refused, saying
        // whether enabling it would help.
        let other = at(MemoryType::Device, Some(1), false);
        assert_eq!(reachable(other, &yes, &no_peers), Verdict::Reachable);
        assert!(matches!(
            reachable(other, &no_peers, &yes),
            Verdict::Unreachable(r) if r.contains("enable_peer_access(cuda:0, cuda:1)")
        ));
        assert!(matches!(
            reachable(other, &no_peers, &no_peers),
            Verdict::Unreachable(r) if r.contains("cannot access")
        ));
        // Peer access is one way: 1 -> 0 does not count for a launch on 0.
        assert!(matches!(
            reachable(other, &|a, b| (a, b) == (1, 0), &yes),
            Verdict::Unreachable(_)
        ));
        // Managed and unified memory: everyone.
        assert_eq!(
            reachable(at(MemoryType::Device, Some(1), true), &no_peers, &no_peers),
            Verdict::Reachable
        );
        assert_eq!(
            reachable(at(MemoryType::Unified, None, false), &no_peers, &no_peers),
            Verdict::Reachable
        );
        // Page-locked memory: its own device is sure, another one is not.
        assert_eq!(
            reachable(at(MemoryType::Host, Some(0), false), &no_peers, &no_peers),
            Verdict::Reachable
        );
        assert!(matches!(
            reachable(at(MemoryType::Host, Some(1), false), &no_peers, &no_peers),
            Verdict::Unsure(w) if w.contains("page-locked memory of cuda:1")
        ));
        // A type this build does not name: a warning, not a guess.
        assert!(matches!(
            reachable(at(MemoryType::Other(9), Some(0), false), &no_peers, &no_peers),
            Verdict::Unsure(w) if w.contains("Other(9)")
        ));
    }

    /// RELAXED (and STRICT, which looks at the array's device label) still
    /// refuse ordinary host memory for a CUDA launch: 38e7deb let RELAXED
    /// pass it, and the kernel killed the context. No driver is needed:
    /// the refusal comes before any query.
    #[test]
    fn every_mode_refuses_host_memory_for_a_cuda_launch() {
        let f32t = crate::DType::FLOAT32;
        let host = Array::zeros_dtype(Device::Cpu, f32t, &[8]).unwrap();
        // The same host storage labelled as a cuda:0 array.
        let labelled = Array::from_parts(
            Arc::clone(host.storage()),
            Device::Cuda(0),
            0,
            f32t,
            &[8],
            &[4],
        )
        .unwrap();
        for a in [&host, &labelled] {
            for mode in [AccessMode::Relaxed, AccessMode::Strict, AccessMode::Checked] {
                let e = check("k", "x", a, Device::Cuda(0), mode).unwrap_err();
                assert!(
                    matches!(&e, Error::Access(x) if x.reason.contains("ordinary host memory")),
                    "{mode}: {e}"
                );
            }
        }
        // On the CPU it is fine in every mode.
        for mode in [AccessMode::Relaxed, AccessMode::Strict, AccessMode::Checked] {
            check("k", "x", &host, Device::Cpu, mode).unwrap();
        }
        // An empty storage has no address to reach (the kernel gets null).
        let empty = Array::zeros_dtype(Device::Cpu, f32t, &[0]).unwrap();
        assert_eq!(empty.data_address(), 0);
        check("k", "x", &empty, Device::Cuda(0), AccessMode::Relaxed).unwrap();
    }

    #[test]
    fn the_default_mode_is_per_thread() {
        assert_eq!(AccessMode::default(), AccessMode::Checked);
        assert_eq!(thread_access_mode(), AccessMode::Checked);
        assert_eq!(
            set_thread_access_mode(AccessMode::Strict),
            AccessMode::Checked
        );
        assert_eq!(thread_access_mode(), AccessMode::Strict);
        // Another thread, started before or after the change, is unaffected
        // and its own change does not reach this one.
        std::thread::spawn(|| {
            assert_eq!(thread_access_mode(), AccessMode::Checked);
            set_thread_access_mode(AccessMode::Relaxed);
            assert_eq!(thread_access_mode(), AccessMode::Relaxed);
        })
        .join()
        .unwrap();
        assert_eq!(thread_access_mode(), AccessMode::Strict);
        set_thread_access_mode(AccessMode::Checked);
        assert_eq!(thread_access_mode(), AccessMode::Checked);
    }
}
