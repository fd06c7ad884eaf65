//! A global allocator that counts allocations, for the benchmarks' "heap
//! allocations per launch" (each bench binary installs it with
//! `#[global_allocator] static GLOBAL: CountingAlloc = CountingAlloc;`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Allocations made so far by [`CountingAlloc`].
pub static ALLOCS: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting calls to `alloc`.
pub struct CountingAlloc;

// SAFETY: forwards to the system allocator, counting calls.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `alloc` above with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
}

/// Allocations counted so far.
pub fn allocations() -> usize {
    ALLOCS.load(Ordering::Relaxed)
}
