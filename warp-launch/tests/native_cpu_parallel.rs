//! Which launches of compiled Warp CPU code run on several threads: only
//! forward launches whose work items cannot touch the same element (no
//! atomics, every array indexed by the thread's coordinates, no folded
//! extent, contiguous arrays that do not overlap, at least 2^18 work
//! items), split into contiguous ranges; everything else on the launch's
//! thread. The entry points are the test doubles of `native/mod.rs`, which
//! note the threads and ranges they ran on. One test: the thread count is
//! process-wide and the notes are shared.

mod native;

use native::*;
use warp_launch::{
    AotModule, Array, Device, Pass, TypedArg, TypedArray, cpu_threads, set_cpu_threads,
};

const N: usize = 1 << 18;

/// Runs `f`, returns (threads noted, ranges noted in order).
fn noted(f: impl FnOnce()) -> (usize, Vec<(usize, usize)>) {
    reset_notes();
    f();
    let mut ranges = RANGES.lock().unwrap().clone();
    ranges.sort_unstable();
    (threads_noted(), ranges)
}

fn ones(n: usize) -> Array {
    Array::from_slice(Device::Cpu, &vec![1.0f32; n], &[n]).unwrap()
}

#[test]
fn only_elementwise_forward_launches_of_enough_work_run_on_several_threads() {
    let m = AotModule::from_embedded(&KERNELS).unwrap();
    let saxpy = m.kernel("saxpy").unwrap();
    set_cpu_threads(4);
    assert_eq!(cpu_threads(), 4);
    let (x, y) = (ones(N), ones(N));
    let run = |n: usize, x: &Array, y: &Array| {
        saxpy
            .launch(n)
            .device("cpu")
            .inputs((2.0f32, x, y))
            .run()
            .unwrap()
    };

    // saxpy over 2^18: four contiguous quarters, on four threads.
    let (threads, ranges) = noted(|| run(N, &x, &y));
    assert_eq!(threads, 4);
    let q = N / 4;
    assert_eq!(ranges, [(0, q), (q, 2 * q), (2 * q, 3 * q), (3 * q, N)]);
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 3.0));

    // The same through a positional launch and a replayed one.
    let (xt, yt) = (x.typed::<f32, 1>().unwrap(), y.typed::<f32, 1>().unwrap());
    let a = 1.0f32;
    let args = [TypedArg::value(&a), (&xt).into(), (&yt).into()];
    let (threads, _) = noted(|| saxpy.launch_args(Pass::Forward, N, None, &args).unwrap());
    assert_eq!(threads, 4);
    let l = saxpy.record_args(Pass::Forward, N, &args).unwrap();
    let (threads, _) = noted(|| l.launch().unwrap());
    assert_eq!(threads, 4);
    assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 5.0));

    // Forced serial.
    set_cpu_threads(1);
    let (threads, ranges) = noted(|| run(N, &x, &y));
    assert_eq!((threads, ranges), (1, vec![(0, N)]));
    set_cpu_threads(4);

    // Too little work: serial.
    let (small_x, small_y) = (ones(1000), ones(1000));
    let (threads, ranges) = noted(|| run(1000, &small_x, &small_y));
    assert_eq!((threads, ranges), (1, vec![(0, 1000)]));
    // One work item short of 2^18: serial.
    let (threads, _) = noted(|| {
        run(
            N - 1,
            &x.slice(0, 0..N - 1).unwrap(),
            &y.slice(0, 0..N - 1).unwrap(),
        )
    });
    assert_eq!(threads, 1);

    // The same array as input and output (one view): still disjoint.
    let (threads, _) = noted(|| run(N, &y, &y));
    assert_eq!(threads, 4);
    // Overlapping views of one storage (y[i] is x[i + 1]): serial, and the
    // result is the serial one (each element reads its updated neighbour).
    let both = ones(N + 1);
    let (xv, yv) = (
        both.slice(0, 0..N).unwrap(),
        both.slice(0, 1..N + 1).unwrap(),
    );
    let (threads, _) = noted(|| run(N, &xv, &yv));
    assert_eq!(threads, 1);
    let v = both.to_vec::<f32>().unwrap();
    // y[i] = 2 x[i] + y[i] with y[i] = x[i + 1], in order: element k + 1 = 2 * element k + 1.
    assert_eq!(&v[..4], [1.0, 3.0, 7.0, 15.0]);
    // The same through a second handle of the memory (an array over its
    // bytes, as a DLPack import of its export is): one record, so serial
    // with the serial result. On 8fa438c the handles were two storages and
    // the race check, comparing storages, ran this on four threads.
    let both = ones(N + 1);
    // SAFETY: `both`, the owner, holds N + 1 float32 at its data address.
    let alias = unsafe {
        Array::from_ptr(
            Device::Cpu,
            both.data_address(),
            warp_launch::DType::FLOAT32,
            &[N + 1],
            None,
            std::sync::Arc::new(both.clone()),
        )
    }
    .unwrap();
    let (xv, yv) = (
        both.slice(0, 0..N).unwrap(),
        alias.slice(0, 1..N + 1).unwrap(),
    );
    let (threads, _) = noted(|| run(N, &xv, &yv));
    assert_eq!(threads, 1);
    assert_eq!(&both.to_vec::<f32>().unwrap()[..4], [1.0, 3.0, 7.0, 15.0]);
    // A strided view: not contiguous, serial.
    let wide = ones(2 * N);
    let strided = wide.slice_step(0, 0..2 * N, 2).unwrap();
    let (threads, _) = noted(|| run(N, &strided, &y));
    assert_eq!(threads, 1);

    // 2-D, indexed [i, j] with i, j = wp.tid(): threads; a folded third
    // extent (coord_mult 2: two work items per element): serial.
    let fill = m.kernel("lean_fill").unwrap();
    let out = Array::zeros::<i32>(Device::Cpu, &[512, 512]).unwrap();
    let (threads, _) = noted(|| {
        fill.launch([512, 512])
            .device("cpu")
            .inputs(3i32)
            .outputs(&out)
            .run()
            .unwrap()
    });
    assert_eq!(threads, 4);
    assert_eq!(out.to_vec::<i32>().unwrap()[512 + 7], 3 + 1000 + 7);
    let (threads, _) = noted(|| {
        fill.launch([512, 512, 2])
            .device("cpu")
            .inputs(3i32)
            .outputs(&out)
            .run()
            .unwrap()
    });
    assert_eq!(threads, 1);

    // Atomics in the forward body: serial, even when identity-indexed.
    let count = m.kernel("count_visits").unwrap();
    let c = Array::zeros::<i32>(Device::Cpu, &[N]).unwrap();
    let (threads, _) = noted(|| count.launch(N).device("cpu").outputs(&c).run().unwrap());
    assert_eq!(threads, 1);
    assert!(c.to_vec::<i32>().unwrap().iter().all(|&v| v == 1));
    // A constant index (loss[0]) and an atomic: serial, so the plain add of
    // the double is exact.
    let loss_k = m.kernel("chain_loss").unwrap();
    let loss = Array::zeros::<f32>(Device::Cpu, &[1]).unwrap();
    let (threads, _) = noted(|| {
        loss_k
            .launch(N)
            .device("cpu")
            .inputs(ones(N))
            .outputs(&loss)
            .run()
            .unwrap()
    });
    assert_eq!(threads, 1);
    assert_eq!(loss.to_vec::<f32>().unwrap(), [N as f32]);

    // Backward passes: serial.
    let gx = TypedArray::<f32, 1>::zeros(Device::Cpu, [N]).unwrap();
    let gy = TypedArray::<f32, 1>::from_slice(Device::Cpu, &vec![1.0; N], [N]).unwrap();
    let zero = 0.0f32;
    let (threads, ranges) = noted(|| {
        saxpy
            .launch_args(
                Pass::Adjoint,
                N,
                None,
                &[
                    TypedArg::value(&a),
                    (&xt).into(),
                    (&yt).into(),
                    TypedArg::value(&zero),
                    (&gx).into(),
                    (&gy).into(),
                ],
            )
            .unwrap()
    });
    assert_eq!((threads, ranges), (1, vec![(0, N)]));
    assert!(gx.to_vec().unwrap().iter().all(|&v| v == 1.0));

    // 0 restores the default (the machine's parallelism without the
    // environment variable).
    set_cpu_threads(0);
    if std::env::var_os("WARP_LAUNCH_CPU_THREADS").is_none() {
        assert_eq!(
            cpu_threads(),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
    }
}
