//! The memory behind arrays: a `cuda-api` allocation (device, page-locked
//! host or managed memory) or plain host memory for the CPU device. Shared
//! through `Arc` by every array view and recorded launch that uses it.

use std::fmt;
use std::ptr::NonNull;
use std::sync::OnceLock;

use cuda_api::{Allocation, MemoryKind};

use crate::access::Location;
use crate::error::{Error, Result};

/// Where an array's bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Memory {
    /// CUDA memory of a context: device, page-locked host or managed.
    Cuda(MemoryKind),
    /// Ordinary host memory, for the CPU device.
    Host,
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Memory::Cuda(k) => write!(f, "{k}"),
            Memory::Host => f.write_str("host memory"),
        }
    }
}

/// Host memory for the CPU device: 16-byte aligned, zeroed, written through
/// raw addresses by CPU kernels.
pub struct HostMemory {
    ptr: NonNull<u128>,
    words: usize,
    bytes: usize,
}

// SAFETY: the memory is owned; concurrent writes through addresses are the
// same contract as device memory (kernels write disjoint elements).
unsafe impl Send for HostMemory {}
// SAFETY: as above.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// `bytes` zeroed bytes (at least one 16-byte word), or `None` when the
    /// size cannot be laid out or the allocator refuses: never an abort.
    fn zeroed(bytes: usize) -> Option<HostMemory> {
        let words = bytes.div_ceil(16).max(1);
        // `Layout::array` refuses sizes above `isize::MAX`.
        let layout = std::alloc::Layout::array::<u128>(words).ok()?;
        // SAFETY: the layout has a non-zero size (at least one word).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        Some(HostMemory {
            // A null pointer is the allocator's refusal.
            ptr: NonNull::new(ptr.cast::<u128>())?,
            words,
            bytes,
        })
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: `zeroed` allocated `words` u128s with the global
        // allocator and the layout of `[u128; words]`, as a Vec of that
        // capacity does; the Vec frees it with the same layout.
        drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.words, self.words) });
    }
}

thread_local! {
    /// Whether this thread holds [`HOST_LOCK`] (CPU kernels may copy arrays
    /// while their launch holds it).
    static HOLDS_HOST_LOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Serialises CPU launches with each other and with host-side copies of
/// plain host memory, so writes through array addresses never race.
static HOST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held while a CPU launch runs or host memory is copied; re-entrant on the
/// thread that holds it.
pub(crate) struct HostLock(Option<std::sync::MutexGuard<'static, ()>>);

impl Drop for HostLock {
    fn drop(&mut self) {
        if self.0.take().is_some() {
            HOLDS_HOST_LOCK.with(|h| h.set(false));
        }
    }
}

/// Takes the host lock (or nothing, if this thread holds it already).
pub(crate) fn host_lock() -> HostLock {
    if HOLDS_HOST_LOCK.with(|h| h.get()) {
        return HostLock(None);
    }
    let guard = HOST_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    HOLDS_HOST_LOCK.with(|h| h.set(true));
    HostLock(Some(guard))
}

/// An array's storage: CUDA memory or host memory, and where the driver
/// says it lives (asked once, for CHECKED launches).
pub struct Storage {
    backing: Backing,
    located: OnceLock<Location>,
}

enum Backing {
    Cuda(Allocation),
    Host(HostMemory),
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Storage({} B, {})", self.bytes(), self.memory())
    }
}

impl Storage {
    /// Zeroed host memory of `bytes` bytes; [`Error::Alloc`] naming the
    /// bytes when the allocator refuses or the size exceeds `isize::MAX`.
    pub fn host(bytes: usize) -> Result<Storage> {
        let memory = HostMemory::zeroed(bytes).ok_or_else(|| Error::Alloc {
            call: "Storage::host",
            bytes,
            memory: Memory::Host.to_string(),
        })?;
        Ok(Storage {
            backing: Backing::Host(memory),
            located: OnceLock::new(),
        })
    }

    /// CUDA memory.
    pub fn cuda(allocation: Allocation) -> Storage {
        Storage {
            backing: Backing::Cuda(allocation),
            located: OnceLock::new(),
        }
    }

    /// The CUDA allocation, `None` for host memory.
    pub fn allocation(&self) -> Option<&Allocation> {
        match &self.backing {
            Backing::Cuda(a) => Some(a),
            Backing::Host(_) => None,
        }
    }

    /// Where the driver says the memory lives (asked on first use, then
    /// cached: an allocation does not move). `None` for host memory.
    pub fn location(&self) -> Result<Option<Location>> {
        let Backing::Cuda(a) = &self.backing else {
            return Ok(None);
        };
        if let Some(l) = self.located.get() {
            return Ok(Some(*l));
        }
        let l = crate::access::locate(a.device_address())?;
        Ok(Some(*self.located.get_or_init(|| l)))
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        match &self.backing {
            Backing::Cuda(a) => a.bytes(),
            Backing::Host(h) => h.bytes,
        }
    }

    /// Where it lives.
    pub fn memory(&self) -> Memory {
        match &self.backing {
            Backing::Cuda(a) => Memory::Cuda(a.kind()),
            Backing::Host(_) => Memory::Host,
        }
    }

    /// The address kernels use: a device address for CUDA memory, a host
    /// address for host memory.
    pub fn address(&self) -> u64 {
        match &self.backing {
            Backing::Cuda(a) => a.device_address(),
            Backing::Host(h) => h.ptr.as_ptr() as u64,
        }
    }

    fn check(&self, offset: usize, len: usize, call: &'static str) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.bytes()) {
            return Err(Error::Shape {
                call,
                message: format!(
                    "bytes {offset}..{} are outside the storage of {} B; stay inside the array",
                    offset.saturating_add(len),
                    self.bytes()
                ),
            });
        }
        Ok(())
    }

    /// Copies `dst.len()` bytes from `offset` into host memory (waits).
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len(), "Storage::copy_to_host")?;
        match &self.backing {
            Backing::Cuda(a) => Ok(a.copy_to_host(offset, dst)?),
            Backing::Host(h) => {
                let _serial = host_lock();
                // SAFETY: the range was checked to lie inside the memory.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        h.ptr.as_ptr().cast::<u8>().add(offset),
                        dst.as_mut_ptr(),
                        dst.len(),
                    )
                };
                Ok(())
            }
        }
    }

    /// Copies `src` to `offset` (waits).
    pub fn copy_from_host(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len(), "Storage::copy_from_host")?;
        match &self.backing {
            Backing::Cuda(a) => Ok(a.copy_from_host(offset, src)?),
            Backing::Host(h) => {
                let _serial = host_lock();
                // SAFETY: the range was checked to lie inside the memory.
                unsafe {
                    std::ptr::copy(
                        src.as_ptr(),
                        h.ptr.as_ptr().cast::<u8>().add(offset),
                        src.len(),
                    )
                };
                Ok(())
            }
        }
    }

    /// Copies `len` bytes from `src` at `src_offset` to `offset` (any pair
    /// of memories; waits).
    pub fn copy_from(
        &self,
        offset: usize,
        src: &Storage,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.check(offset, len, "Storage::copy_from")?;
        src.check(src_offset, len, "Storage::copy_from")?;
        match (&self.backing, &src.backing) {
            (Backing::Cuda(d), Backing::Cuda(s)) => Ok(d.copy_from(offset, s, src_offset, len)?),
            (_, Backing::Host(h)) => {
                let _serial = host_lock();
                // SAFETY: the source range was checked.
                let bytes = unsafe {
                    std::slice::from_raw_parts(h.ptr.as_ptr().cast::<u8>().add(src_offset), len)
                };
                self.copy_from_host(offset, bytes)
            }
            (Backing::Host(h), Backing::Cuda(_)) => {
                let _serial = host_lock();
                // SAFETY: the destination range was checked.
                let bytes = unsafe {
                    std::slice::from_raw_parts_mut(h.ptr.as_ptr().cast::<u8>().add(offset), len)
                };
                src.copy_to_host(src_offset, bytes)
            }
        }
    }

    /// Sets every byte to zero (waits).
    pub fn zero(&self) -> Result<()> {
        match &self.backing {
            Backing::Cuda(a) => Ok(a.fill_bytes(0)?),
            Backing::Host(h) => {
                let _serial = host_lock();
                // SAFETY: the whole allocation is written.
                unsafe { std::ptr::write_bytes(h.ptr.as_ptr(), 0, h.words) };
                Ok(())
            }
        }
    }
}
