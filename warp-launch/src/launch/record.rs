//! This thread's recordings of immediate launches: a stack of open
//! recordings, innermost last. A [`crate::Tape`]'s guard opens one and
//! takes its launches when it closes; [`super::LaunchBuilder::run`] hands
//! each forward launch to the innermost one. Kept beside the launch so the
//! launch path needs nothing from the tape.

use std::cell::{Cell, RefCell};

use super::launch::Launch;

thread_local! {
    /// The recordings in progress on this thread, innermost last: each
    /// guard's id and the launches recorded for it.
    static RECORDING: RefCell<Vec<(u64, Vec<Launch>)>> = const { RefCell::new(Vec::new()) };
    /// The next guard id on this thread.
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// Called by immediate launches: the innermost recording of this thread
/// (the most recent guard still alive) keeps the launch.
pub(crate) fn record(launch: Launch) {
    RECORDING.with(|r| {
        if let Some((_, top)) = r.borrow_mut().last_mut() {
            top.push(launch);
        }
    });
}

/// Whether a recording is open on this thread.
pub(crate) fn is_recording() -> bool {
    RECORDING.with(|r| !r.borrow().is_empty())
}

/// Opens a recording on this thread and returns its id, unique among this
/// thread's recordings.
pub(crate) fn open() -> u64 {
    let id = NEXT_ID.with(|n| {
        let id = n.get();
        n.set(id.wrapping_add(1));
        id
    });
    RECORDING.with(|r| r.borrow_mut().push((id, Vec::new())));
    id
}

/// Closes recording `id` wherever it stands in the stack and returns its
/// launches (none when the thread's state is already torn down).
pub(crate) fn close(id: u64) -> Vec<Launch> {
    // `try_with`: a guard dropped while the thread's state is torn down
    // has nothing left to collect.
    RECORDING
        .try_with(|r| {
            let mut r = r.borrow_mut();
            let at = r.iter().rposition(|(rid, _)| *rid == id);
            at.map(|i| r.remove(i).1)
        })
        .ok()
        .flatten()
        .unwrap_or_default()
}
