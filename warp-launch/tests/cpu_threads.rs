//! The CPU device and host copies under threads (no GPU needed): storage
//! locks instead of one process-wide lock (no deadlock with helper threads
//! or user mutexes over unrelated arrays; a lock cycle between two kernels
//! is an error, not a hang), copies between overlapping views, and tape
//! guards dropped out of order.
//!
//! Tests that would hang on a regression run in a child process (this test
//! binary, filtered to the one test) with a time limit.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use warp_launch::{Array, DType, Device, Error, Kernel, KernelSpec, Tape, cpu_each_fn};

const CHILD: &str = "WARP_LAUNCH_CPU_THREADS_CHILD";
const LIMIT: Duration = Duration::from_secs(30);

/// Runs `body` in a child process (this binary, filtered to test `name`)
/// and fails if it does not pass within [`LIMIT`]: a deadlock fails the
/// test instead of hanging the runner.
fn in_child(name: &str, body: impl FnOnce()) {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        body();
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > LIMIT {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{name}: no result within {LIMIT:?}: it deadlocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(status.success(), "{name} failed in the child:\n{text}");
    assert!(
        text.contains("1 passed"),
        "{name} did not run in the child:\n{text}"
    );
}

fn f32t() -> &'static DType {
    DType::FLOAT32
}

/// `x[i] = v`; at index `pause_at` it sets `started` and sleeps, so another
/// thread can act in the middle of the launch.
fn fill(pause_at: i32, started: Arc<AtomicBool>) -> Kernel {
    KernelSpec::new("fill", 1)
        .value::<f32>("v")
        .array::<f32>("x", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(move |args, each| {
                each.run(|t| {
                    let x = args.array::<f32>(1)?;
                    x.set(t.tid(), args.value(0)?)?;
                    if t.tid() == pause_at {
                        started.store(true, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    Ok(())
                })
            }),
            None,
        )
}

/// A one-element kernel whose body runs `f` once (index 0).
fn body(f: impl Fn() -> warp_launch::Result<()> + Send + Sync + 'static) -> Kernel {
    KernelSpec::new("body", 1)
        .array::<f32>("x", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(move |args, each| {
                each.run(|t| {
                    args.array::<f32>(0)?.set(t.tid(), 1.0)?;
                    if t.tid() == 0 { f() } else { Ok(()) }
                })
            }),
            None,
        )
}

/// A CPU kernel writes every element while another thread copies into the
/// same array mid-launch: the copy waits for the launch, so the result is
/// all one value or all the other, never a mix. (Plain host memory; the
/// page-locked and managed cases, which 38e7deb's lock missed, are in
/// `tests/tests/gpu_cpu_device.rs`.)
#[test]
fn a_copy_into_an_array_waits_for_the_cpu_kernel_writing_it() {
    const N: usize = 4096;
    let a = Array::zeros_dtype(Device::Cpu, f32t(), &[N]).unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let k = fill(N as i32 / 2, started.clone());
    std::thread::scope(|s| {
        let launch = s.spawn(|| k.launch(N).inputs((1.0f32, &a)).device("cpu").run());
        while !started.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        a.copy_from_slice(&[2.0f32; N]).unwrap();
        launch.join().unwrap().unwrap();
    });
    let v = a.to_vec::<f32>().unwrap();
    let ones = v.iter().filter(|&&x| x == 1.0).count();
    let twos = v.iter().filter(|&&x| x == 2.0).count();
    assert!(
        ones == N || twos == N,
        "interleaved writes: {ones} ones and {twos} twos of {N}"
    );
}

/// [`a_copy_into_an_array_waits_for_the_cpu_kernel_writing_it`] through a
/// second handle of the same memory: an array made over the original's
/// bytes (`Array::from_ptr`, as a DLPack import of its export does). On
/// 8fa438c that was a second storage with its own lock, and the copy
/// interleaved with the launch (3,726 + 370 of 4,096); now the import is a
/// view of the original's storage, one record with one lock.
#[test]
fn a_copy_into_a_second_handle_waits_for_the_cpu_kernel_writing_the_first() {
    const N: usize = 4096;
    let a = Array::zeros_dtype(Device::Cpu, f32t(), &[N]).unwrap();
    // SAFETY: `a`, the owner, holds N float32 at its data address.
    let alias = unsafe {
        Array::from_ptr(
            "cpu",
            a.data_address(),
            f32t(),
            &[N],
            None,
            Arc::new(a.clone()),
        )
    }
    .unwrap();
    assert!(
        Arc::ptr_eq(alias.storage(), a.storage()),
        "one owner record"
    );
    let started = Arc::new(AtomicBool::new(false));
    let k = fill(N as i32 / 2, started.clone());
    std::thread::scope(|s| {
        let launch = s.spawn(|| k.launch(N).inputs((1.0f32, &a)).device("cpu").run());
        while !started.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        alias.copy_from_slice(&[2.0f32; N]).unwrap();
        launch.join().unwrap().unwrap();
    });
    let v = a.to_vec::<f32>().unwrap();
    let ones = v.iter().filter(|&&x| x == 1.0).count();
    let twos = v.iter().filter(|&&x| x == 2.0).count();
    assert!(
        ones == N || twos == N,
        "interleaved writes: {ones} ones and {twos} twos of {N}"
    );
}

/// Host locks are over address ranges, not storage handles: a raw storage
/// over the second half of an array's bytes (used directly, never made an
/// array, so it is no view of the array's storage) waits for a CPU kernel
/// writing the array.
#[test]
fn a_raw_storage_over_an_arrays_bytes_waits_for_the_cpu_kernel_writing_it() {
    const N: usize = 4096;
    let a = Array::zeros_dtype(Device::Cpu, f32t(), &[N]).unwrap();
    let half = (N / 2 * 4) as u64;
    // SAFETY: `a`, the owner, holds the N / 2 float32 from its middle; the
    // storage's lock is what is tested.
    let raw = unsafe {
        warp_launch::Storage::from_raw_host(
            (a.data_address() + half) as *mut u8,
            N / 2 * 4,
            Arc::new(a.clone()),
        )
    }
    .unwrap();
    let started = Arc::new(AtomicBool::new(false));
    // Pauses at the first element, before it writes the second half.
    let k = fill(0, started.clone());
    std::thread::scope(|s| {
        let launch = s.spawn(|| k.launch(N).inputs((1.0f32, &a)).device("cpu").run());
        while !started.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let twos: Vec<u8> = [2.0f32; N / 2]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        raw.copy_from_host(0, &twos).unwrap();
        launch.join().unwrap().unwrap();
    });
    let v = a.to_vec::<f32>().unwrap();
    let twos = v[N / 2..].iter().filter(|&&x| x == 2.0).count();
    let ones = v[N / 2..].iter().filter(|&&x| x == 1.0).count();
    assert!(
        twos == N / 2 && v[..N / 2].iter().all(|&x| x == 1.0),
        "the copy did not wait for the launch: {ones} ones and {twos} twos in the second half"
    );
}

/// A CPU kernel's helper thread copies into and reads an array the launch
/// does not use. Under 38e7deb's process-wide lock the helper waited for
/// the launch, which waited for the helper: a deadlock.
#[test]
fn a_cpu_kernels_helper_thread_may_use_other_arrays() {
    in_child("a_cpu_kernels_helper_thread_may_use_other_arrays", || {
        let other = Array::zeros_dtype(Device::Cpu, f32t(), &[4]).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (o, s) = (other.clone(), seen.clone());
        let k = body(move || {
            std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        o.copy_from_slice(&[5.0f32; 4])?;
                        *s.lock().unwrap() = o.to_vec::<f32>()?;
                        Ok(())
                    })
                    .join()
                    .unwrap()
            })
        });
        let x = Array::zeros_dtype(Device::Cpu, f32t(), &[1]).unwrap();
        k.launch(1).inputs(&x).device("cpu").run().unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![5.0; 4]);
        assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0]);
    });
}

/// Thread 1 holds a user mutex and copies into array B; thread 2's CPU
/// kernel on array A takes the same mutex. Under 38e7deb's process-wide
/// lock the two waited for each other (lock-order deadlock); with a lock
/// per storage they do not touch the same lock.
#[test]
fn a_user_mutex_taken_in_the_other_order_does_not_deadlock() {
    in_child(
        "a_user_mutex_taken_in_the_other_order_does_not_deadlock",
        || {
            let m = Arc::new(Mutex::new(0));
            let both = Arc::new(Barrier::new(2));
            let (m2, both2) = (m.clone(), both.clone());
            let k = body(move || {
                // Inside the launch (its locks held): wait until thread 1
                // holds the mutex, then take it.
                both2.wait();
                *m2.lock().unwrap() += 1;
                Ok(())
            });
            let a = Array::zeros_dtype(Device::Cpu, f32t(), &[1]).unwrap();
            let b = Array::zeros_dtype(Device::Cpu, f32t(), &[4]).unwrap();
            std::thread::scope(|s| {
                let launch = s.spawn(|| k.launch(1).inputs(&a).device("cpu").run());
                {
                    let mut g = m.lock().unwrap();
                    both.wait();
                    b.copy_from_slice(&[3.0f32; 4]).unwrap();
                    *g += 1;
                }
                launch.join().unwrap().unwrap();
            });
            assert_eq!(*m.lock().unwrap(), 2);
            assert_eq!(b.to_vec::<f32>().unwrap(), vec![3.0; 4]);
        },
    );
}

/// Two CPU launches on unrelated arrays run at the same time (each waits,
/// inside its kernel, for the other to be inside its own).
#[test]
fn cpu_launches_on_unrelated_arrays_run_side_by_side() {
    in_child("cpu_launches_on_unrelated_arrays_run_side_by_side", || {
        let both = Arc::new(Barrier::new(2));
        let b2 = both.clone();
        let k = body(move || {
            b2.wait();
            Ok(())
        });
        let a = Array::zeros_dtype(Device::Cpu, f32t(), &[1]).unwrap();
        let b = Array::zeros_dtype(Device::Cpu, f32t(), &[1]).unwrap();
        std::thread::scope(|s| {
            let l1 = s.spawn(|| k.launch(1).inputs(&a).device("cpu").run());
            let l2 = s.spawn(|| k.launch(1).inputs(&b).device("cpu").run());
            l1.join().unwrap().unwrap();
            l2.join().unwrap().unwrap();
        });
    });
}

/// Two CPU kernels, each on its own array, each copying into the other's
/// array once both are running: a lock cycle. One copy is refused with
/// `Error::WouldDeadlock`, the other kernel then finishes.
#[test]
fn a_lock_cycle_between_two_cpu_kernels_is_an_error_not_a_hang() {
    in_child(
        "a_lock_cycle_between_two_cpu_kernels_is_an_error_not_a_hang",
        || {
            let a = Array::zeros_dtype(Device::Cpu, f32t(), &[1]).unwrap();
            let b = Array::zeros_dtype(Device::Cpu, f32t(), &[1]).unwrap();
            let both = Arc::new(Barrier::new(2));
            let copying_into = |target: &Array| {
                let (t, both) = (target.clone(), both.clone());
                body(move || {
                    both.wait();
                    t.copy_from_slice(&[7.0f32])
                })
            };
            let (ka, kb) = (copying_into(&b), copying_into(&a));
            let (ra, rb) = std::thread::scope(|s| {
                let la = s.spawn(|| ka.launch(1).inputs(&a).device("cpu").run());
                let lb = s.spawn(|| kb.launch(1).inputs(&b).device("cpu").run());
                (la.join().unwrap(), lb.join().unwrap())
            });
            let errors: Vec<&Error> = [&ra, &rb]
                .into_iter()
                .filter_map(|r| r.as_ref().err())
                .collect();
            assert_eq!(errors.len(), 1, "{ra:?} {rb:?}");
            assert!(
                matches!(errors[0], Error::WouldDeadlock { .. }),
                "{}",
                errors[0]
            );
            assert!(
                errors[0].to_string().contains("would deadlock"),
                "{}",
                errors[0]
            );
        },
    );
}

/// `Array::copy_from` between overlapping views of one CPU array gives
/// `memmove`'s result, forward and backward, at several overlaps. (The
/// aliasing fault of 38e7deb, a `&[u8]` over bytes being written, gave
/// right values too; only Miri would see it, and Miri is not installed
/// here. The copy now uses raw pointers only.)
#[test]
fn overlapping_copies_within_one_array_move_like_memmove() {
    const N: usize = 32;
    let init: Vec<f32> = (0..N).map(|i| i as f32).collect();
    for shift in [1usize, 3, 8, 16, 31] {
        for forward in [true, false] {
            let a = Array::from_slice(Device::Cpu, &init, &[N]).unwrap();
            let len = N - shift;
            let (dst, src) = if forward {
                (0..len, shift..N)
            } else {
                (shift..N, 0..len)
            };
            a.slice(0, dst.clone())
                .unwrap()
                .copy_from(&a.slice(0, src.clone()).unwrap())
                .unwrap();
            let mut want = init.clone();
            want.copy_within(src, dst.start);
            assert_eq!(
                a.to_vec::<f32>().unwrap(),
                want,
                "shift {shift}, forward {forward}"
            );
        }
    }
    // The same copy through the storage, and a copy onto itself.
    let a = Array::from_slice(Device::Cpu, &init, &[N]).unwrap();
    a.storage().copy_from(4, a.storage(), 0, 64).unwrap();
    a.copy_from(&a).unwrap();
    let mut want = init.clone();
    want.copy_within(0..16, 1);
    assert_eq!(a.to_vec::<f32>().unwrap(), want);
}

/// A kernel that does nothing, for the tape.
fn noop() -> Kernel {
    KernelSpec::new("noop", 1)
        .array::<f32>("x", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|_, each| each.run(|_| Ok(()))),
            Some(cpu_each_fn(|_, each| each.run(|_| Ok(())))),
        )
}

/// Recording guards dropped out of order: each takes its own launches (a
/// launch goes to the most recent guard still alive). 38e7deb popped the
/// top of the stack whichever guard was dropped: t1 got 2, t2 got 0.
#[test]
fn recording_guards_dropped_out_of_order_keep_their_own_launches() {
    let k = noop();
    let x = Array::zeros_dtype(Device::Cpu, f32t(), &[4]).unwrap();
    let run = || k.launch(4).inputs(&x).device("cpu").run().unwrap();
    let (mut t1, mut t2) = (Tape::new(), Tape::new());
    let g1 = t1.recording();
    let g2 = t2.recording();
    assert_ne!(g1.id(), g2.id());
    run();
    run();
    drop(g1);
    drop(g2);
    assert_eq!((t1.launches().len(), t2.launches().len()), (0, 2));

    // The outer guard dropped first: later launches go to the inner one,
    // which is still alive; after both, nothing records.
    let (mut t1, mut t2) = (Tape::new(), Tape::new());
    let g1 = t1.recording();
    run();
    let g2 = t2.recording();
    run();
    drop(g1);
    run();
    drop(g2);
    run();
    assert_eq!((t1.launches().len(), t2.launches().len()), (1, 2));

    // In order, nested, as before.
    let (mut t1, mut t2) = (Tape::new(), Tape::new());
    let g1 = t1.recording();
    run();
    {
        let _g2 = t2.recording();
        run();
        run();
    }
    run();
    drop(g1);
    assert_eq!((t1.launches().len(), t2.launches().len()), (2, 2));
}
