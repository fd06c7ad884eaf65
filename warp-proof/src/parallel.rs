//! Work spread over the available cores: the analyses of a module's
//! kernels are independent, and loading a module of many kernels is mostly
//! them (`docs/launch-profile.md`).

/// The fewest items worth threads. Spawning and joining threads costs
/// more than a few short analyses, and leaves the driver's next lazy load
/// slower (`docs/launch-profile.md`). Measured on an H100 host (16 cores,
/// 3 runs of 31 loads each): a module of 10 kernels (20 bodies) loaded in
/// 1.4-2.1 ms whether on one thread or on 2-3, and a module of 64 kernels
/// in 4.7-5.5 ms at 8 items a thread, 5.0-6.2 ms at 32, and 7.2-9.4 ms on
/// one thread. So small modules stay on one thread and large ones spread.
pub(crate) const MIN_ITEMS: usize = 32;

/// `f` of every item, in order, on up to the available cores, at least
/// `per_thread` items a thread (a thread's start costs more than a short
/// item); one thread when that is all there is, or when there are fewer
/// than [`MIN_ITEMS`]. A panic in `f` is raised
/// again here, as it would be on one thread.
pub(crate) fn map<T: Sync, R: Send>(
    items: &[T],
    per_thread: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if items.len() < MIN_ITEMS {
        return items.iter().map(&f).collect();
    }
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

    #[test]
    fn fewer_than_min_items_stay_on_the_calling_thread() {
        let here = std::thread::current().id();
        let small: Vec<usize> = (0..super::MIN_ITEMS - 1).collect();
        let threads = super::map(&small, 1, |_| std::thread::current().id());
        assert!(threads.iter().all(|t| *t == here));
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let large: Vec<usize> = (0..super::MIN_ITEMS).collect();
        let threads = super::map(&large, 8, |_| std::thread::current().id());
        assert_eq!(threads.iter().any(|t| *t != here), cores > 1);
    }
}
