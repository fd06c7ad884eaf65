//! One spare of a reusable heap value, kept lock-free for the next user.
//!
//! A finished launch gives its argument block and argument vector back to
//! the kernel; the next launch takes them instead of allocating, so an
//! immediate launch allocates nothing and takes no lock. [`Spare`] is that
//! one slot: `take` swaps the parked value out (or finds none), `put` parks
//! a value when the slot is empty and drops it otherwise.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};

/// An owned heap value that can be parked as one thin pointer.
///
/// # Safety
///
/// `park` returns either `None` (the value was dropped) or a pointer that
/// owns the value; `unpark(p, shape)` with such a pointer and the same
/// `shape`, called once, gives the value back.
pub(crate) unsafe trait Park: Sized {
    /// What the pointer points at.
    type Target;
    /// What the slot must know to rebuild the value (a vector's capacity).
    type Shape: Copy;
    /// Gives up `self` as a pointer, or drops it (`None`) when it does not
    /// have `shape`.
    fn park(self, shape: Self::Shape) -> Option<NonNull<Self::Target>>;
    /// The value parked at `p`.
    ///
    /// # Safety
    ///
    /// `p` came from [`Park::park`] with this `shape` and is unparked once.
    unsafe fn unpark(p: NonNull<Self::Target>, shape: Self::Shape) -> Self;
}

// SAFETY: `Box::into_raw` / `Box::from_raw` round-trip one owned box.
unsafe impl<T> Park for Box<T> {
    type Target = T;
    type Shape = ();

    fn park(self, (): ()) -> Option<NonNull<T>> {
        Some(NonNull::from(Box::leak(self)))
    }

    unsafe fn unpark(p: NonNull<T>, (): ()) -> Box<T> {
        // SAFETY: `p` came from `Box::leak` in `park` and is unparked once.
        unsafe { Box::from_raw(p.as_ptr()) }
    }
}

// SAFETY: an emptied vector of exactly `shape` capacity is its buffer
// pointer; `Vec::from_raw_parts(p, 0, shape)` rebuilds it. A vector of any
// other capacity is dropped, never parked.
unsafe impl<T> Park for Vec<T> {
    type Target = T;
    /// The capacity every parked vector has.
    type Shape = usize;

    fn park(mut self, capacity: usize) -> Option<NonNull<T>> {
        self.clear();
        if self.capacity() != capacity || size_of::<T>() == 0 {
            return None;
        }
        let mut v = std::mem::ManuallyDrop::new(self);
        NonNull::new(v.as_mut_ptr())
    }

    unsafe fn unpark(p: NonNull<T>, capacity: usize) -> Vec<T> {
        // SAFETY: `p` is the buffer of an empty vector of this capacity,
        // given up by `park` and unparked once.
        unsafe { Vec::from_raw_parts(p.as_ptr(), 0, capacity) }
    }
}

/// One parked value of type `P` (or none), shared between threads without
/// a lock.
pub(crate) struct Spare<P: Park> {
    slot: AtomicPtr<P::Target>,
    shape: P::Shape,
    /// The slot owns the parked value.
    _owns: PhantomData<P>,
}

impl<P: Park> Spare<P> {
    /// An empty slot for values of `shape`.
    pub(crate) fn new(shape: P::Shape) -> Self {
        Spare {
            slot: AtomicPtr::new(std::ptr::null_mut()),
            shape,
            _owns: PhantomData,
        }
    }

    /// The shape every parked value has.
    pub(crate) fn shape(&self) -> P::Shape {
        self.shape
    }

    /// The parked value, if there is one; the slot is empty afterwards.
    pub(crate) fn take(&self) -> Option<P> {
        let p = NonNull::new(self.slot.swap(std::ptr::null_mut(), Ordering::AcqRel))?;
        // SAFETY: a non-null slot pointer came from `park` with this
        // shape, and the swap gave this thread its only copy.
        Some(unsafe { P::unpark(p, self.shape) })
    }

    /// Parks `value` when the slot is empty (and `value` has the slot's
    /// shape); drops it otherwise.
    pub(crate) fn put(&self, value: P) {
        let Some(p) = value.park(self.shape) else {
            return;
        };
        if self
            .slot
            .compare_exchange(
                std::ptr::null_mut(),
                p.as_ptr(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: `p` was not stored, so this is still its only owner.
            drop(unsafe { P::unpark(p, self.shape) });
        }
    }
}

impl<P: Park> Drop for Spare<P> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

// SAFETY: the slot hands a parked `P` from one thread to another, as
// sending it would; `P: Send` is required for both.
unsafe impl<P: Park + Send> Send for Spare<P> where P::Shape: Send {}
// SAFETY: shared access only swaps the pointer atomically (each value is
// taken by one thread), so `&Spare` moves values between threads: `P: Send`.
unsafe impl<P: Park + Send> Sync for Spare<P> where P::Shape: Sync {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn box_round_trip_and_one_spare_only() {
        let s: Spare<Box<u64>> = Spare::new(());
        assert!(s.take().is_none());
        s.put(Box::new(7));
        s.put(Box::new(8)); // slot full: dropped
        assert_eq!(s.take().as_deref(), Some(&7));
        assert!(s.take().is_none());
    }

    #[test]
    fn vec_keeps_its_buffer_empty_and_refuses_other_capacities() {
        let s: Spare<Vec<String>> = Spare::new(4);
        let mut v = Vec::with_capacity(4);
        v.push("a".to_string());
        let buffer = v.as_ptr();
        s.put(v);
        let back = s.take().unwrap();
        assert!(back.is_empty());
        assert_eq!((back.capacity(), back.as_ptr()), (4, buffer));
        s.put(Vec::with_capacity(5)); // another capacity: dropped
        assert!(s.take().is_none());
    }

    #[test]
    fn drop_frees_the_parked_value() {
        let counted = Arc::new(());
        let s: Spare<Box<Arc<()>>> = Spare::new(());
        s.put(Box::new(counted.clone()));
        assert_eq!(Arc::strong_count(&counted), 2);
        drop(s);
        assert_eq!(Arc::strong_count(&counted), 1);
    }

    #[test]
    fn kernels_holding_spares_stay_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Spare<Box<cuda_api::ArgBlock<'static>>>>();
        send_sync::<Spare<Vec<crate::launch::bind::Arg>>>();
        send_sync::<crate::Kernel>();
    }

    #[test]
    fn threads_share_one_slot() {
        let s = Arc::new(Spare::<Box<usize>>::new(()));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        let b = s.take().unwrap_or_else(|| Box::new(0));
                        s.put(Box::new(*b + t + i));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(s.take().is_some());
    }
}
