//! The memory behind arrays: a `cuda-api` allocation (device, page-locked
//! host or managed memory) or plain host memory for the CPU device. Shared
//! through `Arc` by every array view and recorded launch that uses it.
//!
//! # One owner record per memory
//!
//! A storage is the owner record of its bytes: their lock (below), the
//! ordering state of their CUDA allocation (queued use, shared, pool
//! stream), their kind and their context. Memory reached through two
//! storages would have two of each, and neither would wait for work noted
//! on the other. So every storage an array is made over is entered in a
//! process-wide table of address ranges (weak references: the table keeps
//! nothing alive), and a new storage whose bytes an entered one already
//! holds is not entered: arrays made over it become views of the entered
//! storage, which they keep alive ([`tracked_record`], used by
//! `Array::from_parts` and by every import). A new storage that overlaps an
//! entered one without lying inside it is refused. The table is touched
//! when arrays are made over a new storage and when a storage drops, never
//! per launch.
//!
//! # Storage locks
//!
//! Host code writes host-reachable memory (plain host, page-locked, managed)
//! in two ways: CPU kernels through array addresses, and copies. Two writers
//! on one storage from two threads would be a data race, so each such
//! storage has a lock over its address range, re-entrant on the thread
//! that holds it; two storages whose ranges overlap (which the table above
//! keeps from arrays, but raw storages may do) take the same lock: a CPU launch
//! holds the locks of every storage its arguments use (arrays and their
//! gradients) for the whole launch; a copy, zeroing or read holds those of
//! its source and destination. Device memory is not locked: host code never
//! dereferences it.
//!
//! There is no process-wide lock: launches and copies on different storages
//! never wait for each other. A set of locks is taken all at once (none is
//! held while waiting for the others), so two acquisitions cannot deadlock
//! on each other whatever the order of their arrays. A thread that already
//! holds locks (a CPU kernel body copying an array) and must wait for more
//! would deadlock if the holder in turn waits, through other holders, for a
//! lock it holds: that cycle is detected and refused with
//! [`Error::WouldDeadlock`] instead of waiting.
//!
//! What remains is what any lock has, and is the caller's to avoid: a CPU
//! kernel body that waits for another thread (a join, a channel, a user
//! mutex) which needs one of the launch's own storages waits forever, as
//! does a thread that holds a user mutex while copying into a storage whose
//! running CPU kernel takes that mutex. Unrelated arrays never block each
//! other, whatever user locks are held.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Weak};

use cuda_api::{Allocation, MemoryKind};

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
    /// Memory owned elsewhere ([`Storage::from_raw_host`]): kept alive
    /// while this lives, never freed here.
    owner: Option<Arc<dyn Any + Send + Sync>>,
}

// SAFETY: the memory is owned and reached only through raw pointers, by
// copies and CPU kernels, each holding the storage's lock (see
// `lock_storages`), so no two threads write it at once.
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
            owner: None,
        })
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        if self.owner.is_some() {
            // Owned elsewhere: the owner goes after this, nothing is freed.
            return;
        }
        // SAFETY: `zeroed` allocated `words` u128s with the global
        // allocator and the layout of `[u128; words]`, as a Vec of that
        // capacity does; the Vec frees it with the same layout.
        drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.words, self.words) });
    }
}

/// A byte range `start..end` of the address space (device addresses and
/// host addresses share one space under CUDA's unified addressing).
type Span = (u64, u64);

/// Whether two byte ranges share a byte.
fn overlaps(a: Span, b: Span) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// The lock table: which thread holds which address range (and how many
/// times), and which ranges each waiting thread waits for. Only ever held
/// for bookkeeping, never while user code runs or while waiting.
struct LockTable {
    /// (range, owner thread, depth).
    held: Vec<(Span, u64, usize)>,
    /// (waiting thread, the ranges it waits for).
    waiting: Vec<(u64, Vec<Span>)>,
}

static LOCKS: std::sync::Mutex<LockTable> = std::sync::Mutex::new(LockTable {
    held: Vec::new(),
    waiting: Vec::new(),
});
static LOCK_FREED: std::sync::Condvar = std::sync::Condvar::new();

/// A number for the calling thread, unique in the process.
fn thread_token() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

impl LockTable {
    /// The threads holding a range that overlaps `span`.
    fn owners(&self, span: Span) -> impl Iterator<Item = u64> + '_ {
        self.held
            .iter()
            .filter(move |h| overlaps(h.0, span))
            .map(|h| h.1)
    }

    /// Whether waiting for `spans` would close a cycle back to `me`: some
    /// owner of an overlapping range waits, directly or through other
    /// waiters, for a range that overlaps one `me` holds.
    fn would_deadlock(&self, me: u64, spans: &[Span]) -> bool {
        let mut todo: Vec<u64> = spans
            .iter()
            .flat_map(|&k| self.owners(k))
            .filter(|&o| o != me)
            .collect();
        let mut seen: Vec<u64> = Vec::new();
        while let Some(t) = todo.pop() {
            if t == me {
                return true;
            }
            if seen.contains(&t) {
                continue;
            }
            seen.push(t);
            if let Some((_, wants)) = self.waiting.iter().find(|w| w.0 == t) {
                todo.extend(
                    wants
                        .iter()
                        .flat_map(|&k| self.owners(k))
                        .filter(|&o| o != t),
                );
            }
        }
        false
    }

    fn stop_waiting(&mut self, me: u64) {
        self.waiting.retain(|w| w.0 != me);
    }
}

fn lock_table() -> std::sync::MutexGuard<'static, LockTable> {
    // Poisoning cannot leave the table half-updated: no code that can panic
    // runs while it is held, except allocation, which aborts.
    LOCKS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The locks of a set of storages, held until dropped (see the section
/// comment above).
pub(crate) struct StorageLocks {
    keys: Keys,
}

/// Address ranges, sorted and deduplicated; up to 8 without allocating (a
/// CPU launch takes its locks on every run).
enum Keys {
    Inline([Span; 8], usize),
    Heap(Vec<Span>),
}

impl Keys {
    fn new(it: impl Iterator<Item = Span>) -> Keys {
        let mut keys = Keys::Inline([(0, 0); 8], 0);
        for k in it {
            match &mut keys {
                Keys::Inline(buf, n) if *n < buf.len() => {
                    buf[*n] = k;
                    *n += 1;
                }
                Keys::Inline(buf, n) => {
                    let mut v = buf[..*n].to_vec();
                    v.push(k);
                    keys = Keys::Heap(v);
                }
                Keys::Heap(v) => v.push(k),
            }
        }
        match &mut keys {
            Keys::Inline(buf, n) => {
                let s = &mut buf[..*n];
                s.sort_unstable();
                let mut w = 0;
                for r in 0..s.len() {
                    if w == 0 || s[r] != s[w - 1] {
                        s[w] = s[r];
                        w += 1;
                    }
                }
                *n = w;
            }
            Keys::Heap(v) => {
                v.sort_unstable();
                v.dedup();
            }
        }
        keys
    }

    fn as_slice(&self) -> &[Span] {
        match self {
            Keys::Inline(buf, n) => &buf[..*n],
            Keys::Heap(v) => v,
        }
    }
}

impl StorageLocks {
    /// No lock: what a launch on device memory alone holds.
    #[inline]
    pub(crate) fn none() -> StorageLocks {
        StorageLocks {
            keys: Keys::Inline([(0, 0); 8], 0),
        }
    }
}

impl Drop for StorageLocks {
    fn drop(&mut self) {
        if self.keys.as_slice().is_empty() {
            return;
        }
        let me = thread_token();
        let mut t = lock_table();
        for &k in self.keys.as_slice() {
            if let Some(i) = t.held.iter().position(|h| h.0 == k && h.1 == me) {
                t.held[i].2 -= 1;
                if t.held[i].2 == 0 {
                    t.held.swap_remove(i);
                }
            }
        }
        drop(t);
        LOCK_FREED.notify_all();
    }
}

thread_local! {
    /// The thread token of the launch whose block body runs on this thread
    /// (0: none): see [`seal_launch_storages`].
    static SEALED_BY: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The thread a CPU launch runs on, for [`seal_launch_storages`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct LaunchOwner(u64);

/// The calling thread as a launch's owner.
pub(crate) fn launch_owner() -> LaunchOwner {
    LaunchOwner(thread_token())
}

/// Seals this thread for a block body of the launch running on thread
/// `owner` until the guard drops: a lock request from it for a range that
/// `owner` holds (a copy, or a CPU launch, on the launch's own memory) is
/// refused with [`Error::WouldDeadlock`] instead of re-entering the lock
/// (on the launch's thread) or waiting for it (on its worker threads, which
/// the launch's thread waits for): the body may hold references into that
/// memory, which nothing else may touch while they live.
pub(crate) fn seal_launch_storages(owner: LaunchOwner) -> Sealed {
    Sealed(SEALED_BY.with(|s| s.replace(owner.0)))
}

/// A sealed thread ([`seal_launch_storages`]); unsealed when dropped.
pub(crate) struct Sealed(u64);

impl Drop for Sealed {
    fn drop(&mut self) {
        SEALED_BY.with(|s| s.set(self.0));
    }
}

/// Takes the locks of the address ranges of the host-reachable storages
/// among `storages` (all at once; duplicates, storages over the same bytes
/// and ranges already held by this thread are fine). Waits while another
/// thread holds an overlapping range; refuses with [`Error::WouldDeadlock`]
/// when that thread waits for one this thread holds.
pub(crate) fn lock_storages<'a>(
    storages: impl IntoIterator<Item = &'a Storage>,
    call: &'static str,
) -> Result<StorageLocks> {
    lock_as(storages, call, Holder::Host)
}

/// Takes the locks of the host-reachable storages among `storages` for
/// GPU work about to be queued on them (a launch, a graph replay, a fill or
/// copy on a stream), held until that work is queued: the work waits for a
/// CPU launch (or a host copy) that holds one on another thread, and a
/// CPU launch taking the lock afterwards waits for the queued work before
/// its kernel runs (`cpu::run`, [`Allocation::wait_idle`]). Unlike
/// [`lock_storages`], a range this thread already holds is refused with
/// [`Error::WouldDeadlock`]: the holder is a CPU launch whose kernel body
/// runs on this thread and may hold references into the memory, and
/// waiting for it would never end. Device memory takes no lock (and costs
/// nothing here).
pub(crate) fn lock_for_gpu<'a>(
    storages: impl IntoIterator<Item = &'a Storage>,
    call: &'static str,
) -> Result<StorageLocks> {
    lock_as(storages, call, Holder::Gpu)
}

/// Who takes a lock: host code (re-entrant on its thread), or GPU work
/// being queued (refused on a thread that holds the range).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holder {
    Host,
    Gpu,
}

fn lock_as<'a>(
    storages: impl IntoIterator<Item = &'a Storage>,
    call: &'static str,
    holder: Holder,
) -> Result<StorageLocks> {
    let keys = Keys::new(
        storages
            .into_iter()
            .filter(|s| s.host_reachable())
            .map(Storage::span),
    );
    if keys.as_slice().is_empty() {
        return Ok(StorageLocks { keys });
    }
    let me = thread_token();
    let mut t = lock_table();
    if holder == Holder::Gpu
        && keys
            .as_slice()
            .iter()
            .any(|&k| t.owners(k).any(|o| o == me))
    {
        return Err(Error::WouldDeadlock {
            call,
            message: "it queues GPU work on page-locked or managed memory that a CPU launch running on this thread holds (its kernel body may hold references into that memory, and the work cannot wait for the launch it is called from); queue the GPU work before or after the CPU launch".into(),
        });
    }
    let sealer = SEALED_BY.with(std::cell::Cell::get);
    if sealer != 0
        && keys
            .as_slice()
            .iter()
            .any(|&k| t.owners(k).any(|o| o == sealer))
    {
        return Err(Error::WouldDeadlock {
            call,
            message: "it uses memory of the CPU launch whose block body (cpu_block_fn) runs on this thread, and that body may hold slices of it; copy or launch on those arrays before or after the launch, not from its body".into(),
        });
    }
    loop {
        let wanted = keys.as_slice();
        let busy = wanted.iter().any(|&k| t.owners(k).any(|o| o != me));
        if !busy {
            for &k in wanted {
                match t.held.iter_mut().find(|h| h.0 == k && h.1 == me) {
                    Some(h) => h.2 += 1,
                    None => t.held.push((k, me, 1)),
                }
            }
            t.stop_waiting(me);
            return Ok(StorageLocks { keys });
        }
        if t.would_deadlock(me, wanted) {
            t.stop_waiting(me);
            return Err(Error::WouldDeadlock {
                call,
                message: "an array it uses is held by a CPU launch or copy on another thread that waits for an array this thread holds (a CPU kernel copying into another kernel's array while that kernel copies into its own); do such copies outside the kernel bodies".into(),
            });
        }
        if !t.waiting.iter().any(|w| w.0 == me) {
            t.waiting.push((me, wanted.to_vec()));
        }
        t = LOCK_FREED.wait(t).unwrap_or_else(|p| p.into_inner());
    }
}

/// One entry of the owner-record table: the end of the storage's range
/// (the key holds its start) and a weak reference to it.
struct Record {
    end: u64,
    storage: Weak<Storage>,
}

/// The owner records: every storage an array was made over, by (start
/// address, storage identity); entries of live storages never overlap.
static RECORDS: std::sync::Mutex<BTreeMap<(u64, usize), Record>> =
    std::sync::Mutex::new(BTreeMap::new());

fn records() -> std::sync::MutexGuard<'static, BTreeMap<(u64, usize), Record>> {
    // Poisoning cannot leave the map half-updated: no code that can panic
    // runs while it is held, except allocation, which aborts.
    RECORDS.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the owner-record table holds for `span`: `Ok(None)` when no live
/// storage is entered over any of its bytes; the entered storage and the
/// byte offset of `span` in it when one holds all of `span`; a refusal
/// naming both ranges when one holds only part of it. Empty ranges have no
/// bytes: `Ok(None)`.
///
/// Called in one lock with `enter`, so two threads cannot both enter
/// storages over the same new bytes.
fn find_record(
    map: &BTreeMap<(u64, usize), Record>,
    span: Span,
    call: &'static str,
) -> Result<Option<(Arc<Storage>, usize)>> {
    if span.0 >= span.1 {
        return Ok(None);
    }
    // Live entries are disjoint: scanning down from the last entry that
    // starts before the end of `span`, the first live one that ends at or
    // before its start means no earlier one can reach it.
    for (&(start, _), r) in map.range(..(span.1, 0)).rev() {
        if r.storage.strong_count() == 0 {
            // Dropping: its own drop removes it.
            continue;
        }
        if r.end <= span.0 {
            break;
        }
        if start <= span.0 && span.1 <= r.end {
            // `upgrade` fails only if the last reference went since
            // `strong_count`: then it is dropping, as above.
            if let Some(s) = r.storage.upgrade() {
                return Ok(Some((s, (span.0 - start) as usize)));
            }
            continue;
        }
        return Err(Error::Interop {
            call,
            what: "overlap",
            message: format!(
                "bytes {:#x}..{:#x} overlap the array memory {start:#x}..{:#x} without lying inside it, and one memory has one owner record (lock and ordering); make the array over bytes inside that memory (or over all of it first), or drop the arrays over it",
                span.0, span.1, r.end
            ),
        });
    }
    Ok(None)
}

/// The storage that already holds the bytes `start..start + bytes` (and
/// their offset in it) when an array was made over one, so that an import
/// of memory this process tracks joins its record instead of making a
/// second one; `Ok(None)` for bytes no live array's storage holds.
///
/// # Errors
///
/// [`Error::Interop`] (`what` is `"overlap"`) when a tracked storage holds
/// some of the bytes but not all.
pub(crate) fn tracked_record(
    start: u64,
    bytes: usize,
    call: &'static str,
) -> Result<Option<(Arc<Storage>, usize)>> {
    let span = (start, start.saturating_add(bytes as u64));
    let map = records();
    find_record(&map, span, call)
}

/// Enters `storage` as the owner record of its bytes, or finds the record
/// that already holds them: `Ok(None)` when `storage` is the record (it was
/// entered before, is empty, or is entered now), the record and the byte
/// offset of `storage`'s first byte in it otherwise. Cheap for a storage
/// entered before (one atomic load).
///
/// # Errors
///
/// As [`tracked_record`].
pub(crate) fn track(
    storage: &Arc<Storage>,
    call: &'static str,
) -> Result<Option<(Arc<Storage>, usize)>> {
    if storage.entered.load(AtomicOrdering::Acquire) || storage.bytes() == 0 {
        return Ok(None);
    }
    let span = storage.span();
    let mut map = records();
    if storage.entered.load(AtomicOrdering::Acquire) {
        return Ok(None);
    }
    if let Some(found) = find_record(&map, span, call)? {
        return Ok(Some(found));
    }
    map.insert(
        (span.0, storage.key()),
        Record {
            end: span.1,
            storage: Arc::downgrade(storage),
        },
    );
    storage.entered.store(true, AtomicOrdering::Release);
    Ok(None)
}

/// Checks that host code may reach `bytes` bytes at `address`: when a CUDA
/// driver can be loaded, asks it where the address lives and refuses device
/// memory (host code reading it faults). Without a driver no device memory
/// can exist, and the memory is taken as host memory.
pub(crate) fn refuse_device_memory(address: u64, bytes: usize, call: &'static str) -> Result<()> {
    if bytes == 0 || cuda_api::init().is_err() {
        return Ok(());
    }
    match cuda_api::pointer_location(address)? {
        Some(l) if l.memory_type == cuda_api::MemoryType::Device && !l.managed => {
            Err(Error::Interop {
                call,
                what: "device",
                message: format!(
                    "the memory at {address:#x} is {l}, which host code (\"cpu\") cannot read or write; make the array on the CUDA device that holds it"
                ),
            })
        }
        _ => Ok(()),
    }
}

/// An array's storage: CUDA memory or host memory.
pub struct Storage {
    backing: Backing,
    /// Whether the storage is in the owner-record table ([`track`]); its
    /// drop then takes it out.
    entered: AtomicBool,
}

impl Drop for Storage {
    fn drop(&mut self) {
        if *self.entered.get_mut() {
            records().remove(&(self.span().0, self.key()));
        }
    }
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
    ///
    /// # Errors
    ///
    /// [`Error::Alloc`] as described above.
    pub fn host(bytes: usize) -> Result<Storage> {
        let memory = HostMemory::zeroed(bytes).ok_or_else(|| Error::Alloc {
            call: "Storage::host",
            bytes,
            memory: Memory::Host.to_string(),
        })?;
        Ok(Storage {
            backing: Backing::Host(memory),
            entered: AtomicBool::new(false),
        })
    }

    /// CUDA memory.
    pub fn cuda(allocation: Allocation) -> Storage {
        Storage {
            backing: Backing::Cuda(allocation),
            entered: AtomicBool::new(false),
        }
    }

    /// Host memory owned elsewhere, for arrays on the CPU device: `bytes`
    /// bytes at `ptr`, kept alive by `owner` (a `Vec`, a DLPack deleter,
    /// anything that holds the memory) until the storage drops; never
    /// freed here. CUDA memory owned elsewhere is
    /// [`Storage::cuda`]`(`[`Allocation::from_raw_parts`]`(..))`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use warp_launch::Storage;
    /// let data: Arc<Vec<f32>> = Arc::new(vec![1.0, 2.0, 3.0]);
    /// // SAFETY: the Vec, kept alive as the owner, holds 12 bytes at that
    /// // address, written by nothing else while the storage is used.
    /// let s = unsafe { Storage::from_raw_host(data.as_ptr() as *mut u8, 12, data.clone())? };
    /// let mut back = [0u8; 4];
    /// s.copy_to_host(4, &mut back)?;
    /// assert_eq!(f32::from_ne_bytes(back), 2.0);
    /// # Ok::<(), warp_launch::Error>(())
    /// ```
    ///
    /// # Safety
    ///
    /// `ptr..ptr + bytes` must be valid to read and write for as long as
    /// `owner` lives, and be reached by nothing else (no Rust reference,
    /// no other thread) while the storage's arrays are used.
    ///
    /// When a CUDA driver can be loaded it is asked where `ptr` lives, and
    /// device memory is refused: host code cannot reach it.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `ptr` is null for a non-empty range or the
    /// range passes the end of the address space; [`Error::Interop`]
    /// (`what` is `"device"`) when the driver reports device memory there;
    /// [`Error::Cuda`] when it cannot answer.
    pub unsafe fn from_raw_host(
        ptr: *mut u8,
        bytes: usize,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Result<Storage> {
        let call = "Storage::from_raw_host";
        let ptr = match NonNull::new(ptr.cast::<u128>()) {
            Some(p) => p,
            None if bytes == 0 => NonNull::dangling(),
            None => {
                return Err(Error::Shape {
                    call,
                    message: format!(
                        "a null pointer for {bytes} bytes; pass the address of live memory"
                    ),
                });
            }
        };
        if (ptr.as_ptr() as usize).checked_add(bytes).is_none() || bytes > isize::MAX as usize {
            return Err(Error::Shape {
                call,
                message: format!(
                    "{bytes} bytes at {:#x} pass the end of the address space; pass the memory's real length",
                    ptr.as_ptr() as usize
                ),
            });
        }
        refuse_device_memory(ptr.as_ptr() as u64, bytes, call)?;
        Ok(Storage {
            backing: Backing::Host(HostMemory {
                ptr,
                words: 0,
                bytes,
                owner: Some(owner),
            }),
            entered: AtomicBool::new(false),
        })
    }

    /// What keeps memory owned elsewhere alive ([`Storage::from_raw_host`],
    /// [`Allocation::from_raw_parts`]); `None` for memory the storage
    /// allocated itself.
    ///
    /// ```
    /// assert!(warp_launch::Storage::host(64)?.owner().is_none());
    /// # Ok::<(), warp_launch::Error>(())
    /// ```
    pub fn owner(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        match &self.backing {
            Backing::Cuda(a) => a.owner(),
            Backing::Host(h) => h.owner.as_ref(),
        }
    }

    /// The CUDA allocation, `None` for host memory.
    pub fn allocation(&self) -> Option<&Allocation> {
        match &self.backing {
            Backing::Cuda(a) => Some(a),
            Backing::Host(_) => None,
        }
    }

    /// Where the driver says the memory lives
    /// ([`cuda_api::Allocation::location`]: asked on first use, then cached,
    /// since an allocation does not move). `None` for host memory and for
    /// empty storage, which has no address.
    ///
    /// # Errors
    ///
    /// The driver's failure to answer.
    pub fn location(&self) -> Result<Option<cuda_api::Location>> {
        match &self.backing {
            Backing::Cuda(a) if a.bytes() > 0 => Ok(Some(a.location()?)),
            _ => Ok(None),
        }
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

    /// Whether host code may touch the memory (plain host, page-locked or
    /// managed): such storages are locked while CPU kernels or copies
    /// write them.
    pub(crate) fn host_reachable(&self) -> bool {
        !matches!(self.memory(), Memory::Cuda(MemoryKind::Device)) && self.bytes() > 0
    }

    /// The storage's identity in the owner-record table: its address
    /// (stable while it is borrowed; an `Arc`'s for shared storages).
    fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// The bytes it holds, as an address range (empty for empty storage).
    pub(crate) fn span(&self) -> (u64, u64) {
        let start = self.address();
        (start, start.saturating_add(self.bytes() as u64))
    }

    /// Whether this storage and `other` hold a byte in common (the same
    /// storage does, unless it is empty): launches and copies compare
    /// memory, not handles.
    pub(crate) fn shares_bytes_with(&self, other: &Storage) -> bool {
        overlaps(self.span(), other.span())
    }

    /// Copies `dst.len()` bytes from `offset` into host memory (waits; and
    /// waits for a CPU launch or copy on another thread that holds the
    /// storage's bytes, through this storage or another over them).
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `offset..offset + dst.len()` leaves the storage, [`Error::Cuda`]
    /// when the device copy fails, [`Error::WouldDeadlock`] when this thread already holds the
    /// storage in a running CPU launch.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len(), "Storage::copy_to_host")?;
        let _lock = lock_storages([self], "Storage::copy_to_host")?;
        match &self.backing {
            Backing::Cuda(a) => Ok(a.copy_to_host(offset, dst)?),
            Backing::Host(h) => {
                // SAFETY: the range was checked to lie inside the memory;
                // `dst` is caller memory, which no reference into this
                // storage can be (none is ever handed out); the lock keeps
                // CPU kernels and other copies off these bytes.
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

    /// Copies `src` to `offset` (waits, as [`Storage::copy_to_host`]).
    ///
    /// # Errors
    ///
    /// As [`Storage::copy_to_host`], for the range written.
    pub fn copy_from_host(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len(), "Storage::copy_from_host")?;
        let _lock = lock_storages([self], "Storage::copy_from_host")?;
        match &self.backing {
            Backing::Cuda(a) => Ok(a.copy_from_host(offset, src)?),
            Backing::Host(h) => {
                // SAFETY: the range was checked to lie inside the memory;
                // `src` is caller memory, never inside this storage; the
                // lock keeps CPU kernels and other copies off these bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
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
    /// of memories; waits, as [`Storage::copy_to_host`]). Overlapping
    /// ranges (judged by address, so of one storage or of two storages
    /// over the same memory) are copied as `memmove` does: as if through a
    /// temporary buffer.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when either range leaves its storage; [`Error::Cuda`] when the copy
    /// fails; [`Error::WouldDeadlock`] as [`Storage::copy_to_host`].
    pub fn copy_from(
        &self,
        offset: usize,
        src: &Storage,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.check(offset, len, "Storage::copy_from")?;
        src.check(src_offset, len, "Storage::copy_from")?;
        if len == 0 {
            return Ok(());
        }
        let _lock = lock_storages([self, src], "Storage::copy_from")?;
        // Whether the two ranges share bytes, by address: also across two
        // storages over the same memory.
        let at = |s: &Storage, o: usize| s.address().saturating_add(o as u64);
        let (d, s) = (at(self, offset), at(src, src_offset));
        let overlap = overlaps(
            (d, d.saturating_add(len as u64)),
            (s, s.saturating_add(len as u64)),
        );
        match (&self.backing, &src.backing) {
            (Backing::Host(d), Backing::Host(s)) => {
                // SAFETY: both ranges were checked to lie inside their
                // memories; raw pointers only (no reference over either
                // range, which may overlap when `same`), and `ptr::copy`
                // allows overlap; the locks keep other writers off both.
                unsafe {
                    std::ptr::copy(
                        s.ptr.as_ptr().cast::<u8>().add(src_offset),
                        d.ptr.as_ptr().cast::<u8>().add(offset),
                        len,
                    )
                };
                Ok(())
            }
            (Backing::Cuda(_), Backing::Host(_)) | (Backing::Host(_), Backing::Cuda(_))
                if overlap =>
            {
                // One memory reached as host and as CUDA memory: no slice
                // over bytes the driver writes; through a host buffer.
                let mut tmp = host_buffer(len)?;
                src.copy_to_host(src_offset, &mut tmp)?;
                self.copy_from_host(offset, &tmp)
            }
            (Backing::Cuda(d), Backing::Host(s)) => {
                // SAFETY: the source range was checked; the destination
                // does not overlap it (checked by address above), so
                // nothing writes these bytes while the shared slice lives
                // (the lock keeps CPU kernels and copies off them).
                let bytes = unsafe {
                    std::slice::from_raw_parts(s.ptr.as_ptr().cast::<u8>().add(src_offset), len)
                };
                Ok(d.copy_from_host(offset, bytes)?)
            }
            (Backing::Host(d), Backing::Cuda(s)) => {
                // SAFETY: the destination range was checked; the source
                // does not overlap it (checked by address above), so this
                // is the only access to these bytes while the slice lives
                // (the lock keeps CPU kernels and copies off them).
                let bytes = unsafe {
                    std::slice::from_raw_parts_mut(d.ptr.as_ptr().cast::<u8>().add(offset), len)
                };
                Ok(s.copy_to_host(src_offset, bytes)?)
            }
            (Backing::Cuda(d), Backing::Cuda(s)) => {
                if !overlap {
                    return Ok(d.copy_from(offset, s, src_offset, len)?);
                }
                // The driver's copies do not promise memmove semantics:
                // go through host memory.
                let mut tmp = host_buffer(len)?;
                s.copy_to_host(src_offset, &mut tmp)?;
                Ok(d.copy_from_host(offset, &tmp)?)
            }
        }
    }

    /// Sets every byte to zero (waits, as [`Storage::copy_to_host`]).
    ///
    /// # Errors
    ///
    /// [`Error::Cuda`] when the device write fails; [`Error::WouldDeadlock`] as
    /// [`Storage::copy_to_host`].
    pub fn zero(&self) -> Result<()> {
        let _lock = lock_storages([self], "Storage::zero")?;
        match &self.backing {
            Backing::Cuda(a) => Ok(a.fill_bytes(0)?),
            Backing::Host(h) => {
                // SAFETY: the whole memory is written, bytewise through its
                // pointer (memory owned elsewhere need not be 16-byte
                // aligned); the lock keeps CPU kernels and copies off it.
                unsafe { std::ptr::write_bytes(h.ptr.as_ptr().cast::<u8>(), 0, h.bytes) };
                Ok(())
            }
        }
    }
}

/// A zeroed host buffer of `len` bytes for a copy between overlapping
/// ranges, or a refusal when it cannot be allocated.
fn host_buffer(len: usize) -> Result<Vec<u8>> {
    let mut tmp = Vec::new();
    tmp.try_reserve_exact(len).map_err(|_| Error::Shape {
        call: "Storage::copy_from",
        message: format!(
            "overlapping ranges of one memory are copied through a host buffer of {len} B, which cannot be allocated; copy through a separate array"
        ),
    })?;
    tmp.resize(len, 0u8);
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host storage over `bytes` bytes of a buffer the caller keeps too,
    /// so that its addresses are not reused by other tests while it lives.
    fn raw(buf: &Arc<Vec<u128>>, from: usize, bytes: usize) -> Arc<Storage> {
        let ptr = buf.as_ptr().cast::<u8>().wrapping_add(from).cast_mut();
        // SAFETY: the buffer, kept alive as the owner, holds these bytes;
        // the tests only read and write them through the storage.
        Arc::new(unsafe { Storage::from_raw_host(ptr, bytes, buf.clone()) }.unwrap())
    }

    #[test]
    fn the_record_table_joins_bytes_inside_refuses_partial_overlaps_and_forgets_drops() {
        let buf = Arc::new(vec![0u128; 16]);
        let base = buf.as_ptr() as u64;
        let s = raw(&buf, 64, 64);
        assert!(track(&s, "t").unwrap().is_none(), "entered");
        assert!(track(&s, "t").unwrap().is_none(), "entered once");
        // Bytes inside: the entered storage and the offset in it.
        let (r, at) = tracked_record(base + 80, 16, "t").unwrap().unwrap();
        assert!(Arc::ptr_eq(&r, &s));
        assert_eq!(at, 16);
        drop(r);
        // A second storage over bytes inside joins rather than enters.
        let inner = raw(&buf, 96, 32);
        let (r, at) = track(&inner, "t").unwrap().unwrap();
        assert!(Arc::ptr_eq(&r, &s) && at == 32);
        drop(r);
        // Partial overlaps and supersets: refused, naming the call.
        for (from, bytes) in [(48, 32), (112, 32), (0, 256)] {
            let e = tracked_record(base + from, bytes, "t").unwrap_err();
            assert!(
                matches!(
                    &e,
                    Error::Interop {
                        call: "t",
                        what: "overlap",
                        ..
                    }
                ),
                "{from}+{bytes}: {e}"
            );
        }
        // Beside it, and empty ranges: nothing tracked.
        assert!(tracked_record(base, 64, "t").unwrap().is_none());
        assert!(tracked_record(base + 128, 64, "t").unwrap().is_none());
        assert!(tracked_record(base + 80, 0, "t").unwrap().is_none());
        drop((s, inner));
        assert!(
            tracked_record(base + 80, 16, "t").unwrap().is_none(),
            "a dropped storage leaves the table"
        );
    }

    #[test]
    fn dead_entries_are_skipped_and_the_scan_stops_at_the_first_live_one_below() {
        let buf = Arc::new(vec![0u128; 16]);
        let live = raw(&buf, 0, 32);
        let (a, b) = live.span();
        let mut map = BTreeMap::new();
        map.insert(
            (a, 1),
            Record {
                end: b,
                storage: Arc::downgrade(&live),
            },
        );
        // A dropping storage over the same bytes, entered later: skipped.
        map.insert(
            (a + 8, 2),
            Record {
                end: b + 64,
                storage: Weak::new(),
            },
        );
        let (r, at) = find_record(&map, (a + 16, a + 24), "t").unwrap().unwrap();
        assert!(Arc::ptr_eq(&r, &live) && at == 16);
        // Past the live entry: nothing, though the dead one spans it.
        assert!(find_record(&map, (b, b + 16), "t").unwrap().is_none());
    }

    #[test]
    fn two_storages_over_one_memory_share_bytes_and_copy_between_them_as_memmove() {
        let buf = Arc::new(vec![0u128; 4]);
        let (x, y) = (raw(&buf, 0, 32), raw(&buf, 8, 32));
        assert!(x.shares_bytes_with(&y) && y.shares_bytes_with(&x));
        assert!(!x.shares_bytes_with(&raw(&buf, 32, 32)));
        let bytes: Vec<u8> = (0..32).collect();
        x.copy_from_host(0, &bytes).unwrap();
        // y's bytes 0..24 are x's 8..32; copy them onto x's 0..24.
        x.copy_from(0, &y, 0, 24).unwrap();
        let mut got = [0u8; 32];
        x.copy_to_host(0, &mut got).unwrap();
        let want: Vec<u8> = (8..32).chain(24..32).collect();
        assert_eq!(got.as_slice(), want.as_slice());
    }
}
