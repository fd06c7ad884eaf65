//! `cpu_each_fn`: a per-element CPU body that decodes its arguments once
//! per launch. It must give what `cpu_fn` gives (same threads, same order,
//! same errors), name the thread being run in an index error although its
//! arrays were decoded at the first thread, and refuse what `cpu_fn`
//! refuses.

// `cpu_each_fn` is checked against the deprecated `cpu_fn` it replaces.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use warp_launch::{Array, CpuIndexError, Device, Error, Kernel, KernelSpec, cpu_each_fn, cpu_fn};

/// The index error `e` holds (the test fails on any other error).
fn index_error(e: &Error) -> &CpuIndexError {
    match e {
        Error::CpuIndex(i) => i,
        _ => panic!("an index error, got {e}"),
    }
}

/// `out[i, j] = a * x[i, j] + (i * 100 + j)` on a 2-D kernel, as both kinds
/// of body.
fn kernels() -> (Kernel, Kernel) {
    let spec = || {
        KernelSpec::new("affine", 2)
            .value::<f32>("a")
            .array::<f32>("x", 2)
            .array::<f32>("out", 2)
            .declare()
            .unwrap()
    };
    let each = spec().with_cpu(
        cpu_each_fn(|args, each| {
            let a: f32 = args.value(0)?;
            let (x, out) = (args.array::<f32>(1)?, args.array::<f32>(2)?);
            each.run(|t| {
                let (i, j) = t.tid2();
                out.set((i, j), a * x.get((i, j))? + (i * 100 + j) as f32)
            })
        }),
        None,
    );
    let element = spec().with_cpu(
        cpu_fn(|t, args| {
            let a: f32 = args.value(0)?;
            let (i, j) = t.tid2();
            let v = a * args.array::<f32>(1)?.get((i, j))? + (i * 100 + j) as f32;
            args.array::<f32>(2)?.set((i, j), v)
        }),
        None,
    );
    (each, element)
}

#[test]
fn an_each_body_computes_what_the_per_element_body_computes() -> warp_launch::Result<()> {
    let (each, element) = kernels();
    for (rows, cols) in [(1, 1), (3, 5), (7, 2), (16, 16)] {
        let xs: Vec<f32> = (0..rows * cols).map(|v| v as f32 * 0.5).collect();
        let x = Array::from_slice(Device::Cpu, &xs, &[rows, cols])?;
        let (o1, o2) = (
            Array::zeros::<f32>(Device::Cpu, &[rows, cols])?,
            Array::zeros::<f32>(Device::Cpu, &[rows, cols])?,
        );
        let dim = [rows as i64, cols as i64];
        each.launch(dim)
            .device("cpu")
            .inputs((3.0f32, &x))
            .outputs(&o1)
            .run()?;
        element
            .launch(dim)
            .device("cpu")
            .inputs((3.0f32, &x))
            .outputs(&o2)
            .run()?;
        let want: Vec<f32> = (0..rows * cols)
            .map(|k| 3.0 * xs[k] + ((k / cols) * 100 + k % cols) as f32)
            .collect();
        assert_eq!(o1.to_vec::<f32>()?, want, "{rows}x{cols}");
        assert_eq!(o2.to_vec::<f32>()?, want, "{rows}x{cols}");
    }
    Ok(())
}

/// Every thread once, in index order, with the coordinates `launch_coord`
/// gives, for a domain with more dimensions than the kernel (folded).
#[test]
fn the_loop_visits_every_thread_in_order_with_folded_dimensions() -> warp_launch::Result<()> {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let k = KernelSpec::new("visit", 2)
        .array::<i32>("out", 1)
        .declare()?
        .with_cpu(
            cpu_each_fn(move |_args, each| {
                let mut v = log.lock().unwrap();
                each.run(|t| {
                    v.push(t.tid2());
                    Ok(())
                })
            }),
            None,
        );
    let out = Array::zeros::<i32>(Device::Cpu, &[1])?;
    // A 2-D kernel over (2, 3, 2): the extra dimension folds into the
    // second coordinate's repeats (coord_mult 2).
    k.launch([2, 3, 2]).device("cpu").inputs(&out).run()?;
    let want: Vec<(i32, i32)> = (0..12).map(|l| ((l / 2) / 3, (l / 2) % 3)).collect();
    assert_eq!(*seen.lock().unwrap(), want);
    Ok(())
}

/// `y[i + 1] = x[i]`: the last thread writes past `y`. Its arrays were
/// decoded at thread 0; the error names thread 3, the one that ran.
#[test]
fn an_index_error_names_the_thread_being_run_not_the_first() {
    let k = KernelSpec::new("shift", 1)
        .array::<f32>("x", 1)
        .array::<f32>("y", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                let (x, y) = (args.array::<f32>(0)?, args.array::<f32>(1)?);
                each.run(|t| y.set(t.tid() + 1, x.get(t.tid())?))
            }),
            None,
        );
    let x = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    let y = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    let e = k
        .launch(4)
        .device("cpu")
        .inputs(&x)
        .outputs(&y)
        .run()
        .unwrap_err();
    let i = index_error(&e);
    assert_eq!(
        (i.thread.as_slice(), i.index.as_slice()),
        (&[3][..], &[4][..]),
        "{e}"
    );
    assert!(
        e.to_string().contains("shift") && e.to_string().contains("'y'"),
        "{e}"
    );
}

/// The first error stops the loop and is the launch's.
#[test]
fn an_error_stops_the_loop() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let k = KernelSpec::new("stops", 1)
        .array::<f32>("y", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(move |args, each| {
                let y = args.array::<f32>(0)?;
                each.run(|t| {
                    counted.fetch_add(1, Ordering::Relaxed);
                    // Thread 5 reads far outside the array.
                    let i = if t.tid() == 5 { 1000 } else { t.tid() };
                    y.set(t.tid(), y.get(i)?)
                })
            }),
            None,
        );
    let y = Array::zeros::<f32>(Device::Cpu, &[64]).unwrap();
    let e = k.launch(64).device("cpu").inputs(&y).run().unwrap_err();
    assert!(matches!(e, Error::CpuIndex(_)), "{e}");
    assert_eq!(calls.load(Ordering::Relaxed), 6);
}

/// A body that reads a parameter as another type is refused once, before
/// any element runs.
#[test]
fn a_wrong_type_is_refused_before_the_loop() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let k = KernelSpec::new("typed", 1)
        .array::<f32>("y", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(move |args, each| {
                let y = args.array::<i32>(0)?;
                each.run(|t| {
                    counted.fetch_add(1, Ordering::Relaxed);
                    y.set(t.tid(), 1)
                })
            }),
            None,
        );
    let y = Array::zeros::<f32>(Device::Cpu, &[8]).unwrap();
    let e = k.launch(8).device("cpu").inputs(&y).run().unwrap_err();
    assert!(matches!(e, Error::Argument(_)), "{e}");
    assert_eq!(calls.load(Ordering::Relaxed), 0);
    assert_eq!(y.to_vec::<f32>().unwrap(), [0.0; 8]);
}

/// Attack: a launch from inside the body on the body's own array, on the
/// launch's thread (which holds the array's lock). Per-element bodies hold
/// no reference into array memory (every read and write is a copy), so the
/// nested launch runs in order, as a call would: no deadlock, no aliasing,
/// and the outer body reads what the inner launch wrote.
#[test]
fn a_nested_launch_on_the_bodys_own_array_runs_in_order() {
    let inner = KernelSpec::new("inner", 1)
        .array::<f32>("y", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                let y = args.array::<f32>(0)?;
                each.run(|t| y.set(t.tid(), y.get(t.tid())? + 1.0))
            }),
            None,
        );
    let y = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    let nested = y.clone();
    let outer = KernelSpec::new("outer", 1)
        .array::<f32>("y", 1)
        .array::<f32>("seen", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(move |args, each| {
                let (y, seen) = (args.array::<f32>(0)?, args.array::<f32>(1)?);
                each.run(|t| {
                    inner.launch(4).device("cpu").inputs(&nested).run()?;
                    seen.set(t.tid(), y.get(0)?)
                })
            }),
            None,
        );
    let seen = Array::zeros::<f32>(Device::Cpu, &[3]).unwrap();
    outer
        .launch(3)
        .device("cpu")
        .inputs((&y, &seen))
        .run()
        .unwrap();
    assert_eq!(seen.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    assert_eq!(y.to_vec::<f32>().unwrap(), [3.0; 4]);
}

/// Attack on the thread an index error names: the outer body's own view
/// fails at its thread 1 and the error is swallowed (so the launch's note
/// of its last error goes stale), then at thread 2 a launch made inside the
/// body fails at the inner kernel's thread 3 and is returned. The error
/// keeps the inner kernel's name and thread: the outer loop names its own
/// thread only in errors its own views made.
#[test]
fn an_index_error_of_a_nested_launch_keeps_its_own_thread() {
    let inner = KernelSpec::new("inner", 1)
        .array::<f32>("v", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                let v = args.array::<f32>(0)?;
                // Thread 3 of 4 reads past the end of `v` (3 elements).
                each.run(|t| v.set(t.tid().min(2), v.get(t.tid())?))
            }),
            None,
        );
    let v = Array::zeros::<f32>(Device::Cpu, &[3]).unwrap();
    let outer = KernelSpec::new("outer", 1)
        .array::<f32>("y", 1)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(move |args, each| {
                let y = args.array::<f32>(0)?;
                each.run(|t| {
                    if t.tid() == 1 {
                        // The outer view's own error, swallowed.
                        assert!(y.get(100).is_err());
                    }
                    if t.tid() == 2 {
                        inner.launch(4).device("cpu").inputs(&v).run()?;
                    }
                    y.set(t.tid(), 1.0)
                })
            }),
            None,
        );
    let y = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
    let e = outer.launch(4).device("cpu").inputs(&y).run().unwrap_err();
    let i = index_error(&e);
    assert_eq!(
        (i.kernel.as_str(), i.thread.as_slice(), i.index.as_slice()),
        ("inner", &[3][..], &[3][..]),
        "{e}"
    );
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 1.0, 0.0, 0.0]);
}

/// The thread an index error names, on every axis of a 3-D launch: the
/// element loop rebuilds it from the row it runs.
#[test]
fn an_index_error_names_every_coordinate_of_a_3d_thread() {
    let k = KernelSpec::new("cube", 3)
        .array::<f32>("x", 3)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                let x = args.array::<f32>(0)?;
                each.run(|t| {
                    let (i, j, k) = t.tid3();
                    let skew = i32::from((i, j, k) == (1, 2, 3));
                    x.set((i, j, k + skew), 1.0)
                })
            }),
            None,
        );
    let x = Array::zeros::<f32>(Device::Cpu, &[2, 3, 4]).unwrap();
    let e = k
        .launch([2, 3, 4])
        .device("cpu")
        .inputs(&x)
        .run()
        .unwrap_err();
    let i = index_error(&e);
    assert_eq!(
        (i.thread.as_slice(), i.index.as_slice()),
        (&[1, 2, 3][..], &[1, 2, 4][..]),
        "{e}"
    );
}

/// The deprecated `cpu_fn`, which makes its views inside every call, names
/// the thread being run too (its views leave the thread to the loop).
#[test]
fn a_cpu_fn_index_error_names_the_thread_being_run() {
    let k = KernelSpec::new("shift2", 2)
        .array::<f32>("y", 2)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_fn(|t, args| {
                let (i, j) = t.tid2();
                args.array::<f32>(0)?.set((i, j + i), 1.0)
            }),
            None,
        );
    let y = Array::zeros::<f32>(Device::Cpu, &[3, 3]).unwrap();
    let e = k.launch([3, 3]).device("cpu").inputs(&y).run().unwrap_err();
    let i = index_error(&e);
    // Row 1 first steps outside at (1, 2) -> index (1, 3).
    assert_eq!(
        (i.thread.as_slice(), i.index.as_slice()),
        (&[1, 2][..], &[1, 3][..]),
        "{e}"
    );
}

/// An index error before the loop (a body reading while it decodes) has
/// no thread being run: it names the first, with the launch's dimensions.
#[test]
fn an_index_error_before_the_loop_names_the_first_thread() {
    let k = KernelSpec::new("early", 2)
        .array::<f32>("y", 2)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                let y = args.array::<f32>(0)?;
                let corner = y.get((5, 5))?;
                each.run(|t| y.set(t.tid2(), corner))
            }),
            None,
        );
    let y = Array::zeros::<f32>(Device::Cpu, &[2, 2]).unwrap();
    let e = k.launch([2, 2]).device("cpu").inputs(&y).run().unwrap_err();
    let i = index_error(&e);
    assert_eq!(
        (i.thread.as_slice(), i.index.as_slice()),
        (&[0, 0][..], &[5, 5][..]),
        "{e}"
    );
}
