//! Work spread over the available cores: the analyses of a module's
//! kernels are independent, and loading a module of many kernels is mostly
//! them (`docs/launch-profile.md`).

/// The fewest items a thread takes. Spawning and joining threads costs
/// more than a short analysis, and leaves the driver's next lazy load
/// slower (`docs/launch-profile.md`): a module of 10 kernels (20 bodies)
/// loaded in 1.6–1.8 ms on 2 and 3 threads and in 1.05–1.3 ms on one
/// (2-core machine, 31 loads each), so threads wait for modules of many
/// kernels.
pub(crate) const MIN_PER_THREAD: usize = 32;

/// `f` of every item, in order, on up to the available cores, at least
/// `per_thread` items a thread (a thread's start costs more than a short
/// item); one thread when that is all there is. A panic in `f` is raised
/// again here, as it would be on one thread.
pub(crate) fn map<T: Sync, R: Send>(
    items: &[T],
    per_thread: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(items.len().div_ceil(per_thread.max(1)));
    if threads <= 1 {
        return items.iter().map(&f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .skip(1)
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<_>>()))
            .collect();
        let mut out: Vec<R> = items[..chunk.min(items.len())].iter().map(f).collect();
        for h in handles {
            match h.join() {
                Ok(part) => out.extend(part),
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_keep_the_items_order_on_any_number_of_threads() {
        let items: Vec<usize> = (0..1000).collect();
        for per_thread in [1, 7, 8, 2000] {
            let out = super::map(&items, per_thread, |&i| i * 3);
            assert_eq!(out, items.iter().map(|i| i * 3).collect::<Vec<_>>());
        }
        assert!(super::map(&[] as &[u8], 8, |&b| b).is_empty());
    }
}
