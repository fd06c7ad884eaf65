//! This thread's recordings of immediate launches and copies: a stack of
//! open recordings, innermost last. A [`crate::Tape`]'s guard opens one and
//! takes what was recorded when it closes; [`super::LaunchBuilder::run`]
//! hands each forward launch to the innermost one, and array copies hand
//! themselves over with [`record_copy`] (through the hook
//! `crate::array::set_copy_recorder` sets, so arrays name no recording).
//! Kept beside the launch so the launch path and the arrays need nothing
//! from the tape.

use std::cell::{Cell, RefCell};
use std::fmt;

use cuda_api::Stream;

use super::launch::Launch;
use crate::array::Array;
use crate::error::Result;

/// A host step's backward, as [`crate::Tape::record_func`] keeps it.
pub(crate) type BackwardFn = Box<dyn Fn() -> Result<()> + Send + Sync>;

/// One operation of a recording, in the order it happened.
pub(crate) enum Recorded {
    /// A forward kernel launch.
    Launch(Launch),
    /// A copy of `src` into `dst`, both with gradients (Warp's `wp.copy`
    /// records its adjoint only then).
    Copy {
        /// The source.
        src: Array,
        /// The destination.
        dst: Array,
        /// The stream the copy was queued on, if it named one (the
        /// adjoint runs there, as Warp's runs on the copy's stream).
        stream: Option<Stream>,
    },
    /// A host step's backward function and the arrays whose gradients it uses.
    Func(BackwardFn, Vec<Array>),
}

impl fmt::Debug for Recorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recorded::Launch(l) => write!(f, "Launch({})", l.kernel().name()),
            Recorded::Copy { src, dst, .. } => write!(f, "Copy({src:?} -> {dst:?})"),
            Recorded::Func(_, arrays) => write!(f, "Func({} arrays)", arrays.len()),
        }
    }
}

thread_local! {
    /// The recordings in progress on this thread, innermost last: each
    /// guard's id and what was recorded for it.
    static RECORDING: RefCell<Vec<(u64, Vec<Recorded>)>> = const { RefCell::new(Vec::new()) };
    /// The next guard id on this thread.
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// Called by immediate launches: the innermost recording of this thread
/// (the most recent guard still alive) keeps the launch.
pub(crate) fn record(launch: Launch) {
    push(Recorded::Launch(launch));
}

/// The one hook for copies: every array copy (`Array::copy_from` and any
/// other copy of one array into another) calls it after copying `src` into
/// `dst`. When a recording is open on this thread and both arrays have
/// gradients, the innermost recording keeps the copy, and the tape's
/// backward pass runs its adjoint (the gradient of `dst` flows into that of
/// `src`, as Warp's `wp.copy` records it) on `stream`, the stream the copy
/// was queued on (`None`: the device's current stream then); otherwise
/// nothing happens.
pub(crate) fn record_copy(src: &Array, dst: &Array, stream: Option<&Stream>) {
    if src.grad().is_some() && dst.grad().is_some() {
        push(Recorded::Copy {
            src: src.clone(),
            dst: dst.clone(),
            stream: stream.cloned(),
        });
    }
}

/// Adds `op` to recording `id` (when it is still open on this thread).
pub(crate) fn record_in(id: u64, op: Recorded) {
    RECORDING.with(|r| {
        if let Some((_, ops)) = r.borrow_mut().iter_mut().rfind(|(rid, _)| *rid == id) {
            ops.push(op);
        }
    });
}

/// Adds `op` to the innermost recording, if any.
fn push(op: Recorded) {
    // `try_with`: nothing to record into while the thread is torn down.
    let _ = RECORDING.try_with(|r| {
        if let Some((_, top)) = r.borrow_mut().last_mut() {
            top.push(op);
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
    // Array copies reach the recording through this hook from now on.
    crate::array::set_copy_recorder(record_copy);
    RECORDING.with(|r| r.borrow_mut().push((id, Vec::new())));
    id
}

/// Closes recording `id` wherever it stands in the stack and returns what
/// it recorded (nothing when the thread's state is already torn down).
pub(crate) fn close(id: u64) -> Vec<Recorded> {
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
