//! The generated typed launchers (`sdk_tests::launchers`, checked in) on a
//! GPU, against the modules `tests/warp/build.py` compiles (`aot/` from
//! kernels.py, `kinds/` from kinds.py, `tiles/bd64` from tiles.py): every
//! kind of argument the generator encodes (scalars of each width, bool,
//! vectors, row-major matrices, quaternions, transforms, structs with
//! padding, nested), the adjoint, a recorded launch, a stream, the tape and
//! tiled launches. The expected results are computed here, exactly: the
//! inputs are small integers and halves, so every result is exact in the
//! kernel's precision, and a wrong encoding (a transposed matrix, a shifted
//! struct field, a bool read as another byte) changes it.

use sdk_tests::launchers::{kernels::Kernels, kinds, tiles::Tiles};
use sdk_tests::warp::data_dir;
use warp_launch::{AotModule, Device, Error, Stream, Tape, TypedArray};

#[global_allocator]
static GLOBAL: sdk_tests::alloc::CountingAlloc = sdk_tests::alloc::CountingAlloc;

const DEV: Device = Device::Cuda(0);

fn load(sub: &str) -> AotModule {
    let dir = data_dir().join(sub);
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    unsafe { AotModule::load(&dir) }.unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run tests/warp/build.py, or cargo xtask gpu-bundle)",
            dir.display()
        )
    })
}

fn kernels() -> Kernels {
    Kernels::new(&load("aot")).expect("the launchers match kernels.py's module")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn values_arrays_and_structs_reach_the_kernels_of_kernels_py() {
    let k = kernels();
    let n = 1000usize;

    // saxpy: y = a x + y.
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let x = TypedArray::<f32, 1>::from_slice(DEV, &xs, [n]).unwrap();
    let y = TypedArray::<f32, 1>::from_slice(DEV, &vec![1.0; n], [n]).unwrap();
    k.saxpy.launch(n, 2.0, &x, &y).unwrap();
    let want: Vec<f32> = xs.iter().map(|x| 2.0 * x + 1.0).collect();
    assert_eq!(y.to_vec().unwrap(), want, "saxpy");

    // add2d over a 2-D domain: out = 2 a + b.
    let (r, c) = (13usize, 29usize);
    let av: Vec<f32> = (0..r * c).map(|i| (i % 17) as f32).collect();
    let bv: Vec<f32> = (0..r * c).map(|i| (i % 5) as f32 - 2.0).collect();
    let a = TypedArray::<f32, 2>::from_slice(DEV, &av, [r, c]).unwrap();
    let b = TypedArray::<f32, 2>::from_slice(DEV, &bv, [r, c]).unwrap();
    let out = TypedArray::<f32, 2>::zeros(DEV, [r, c]).unwrap();
    k.add2d.launch([r, c], &a, &b, &out).unwrap();
    let want: Vec<f32> = av.iter().zip(&bv).map(|(a, b)| 2.0 * a + b).collect();
    assert_eq!(out.to_vec().unwrap(), want, "add2d");

    // index4d: every element its linear index.
    let shape = [2usize, 3, 4, 5];
    let idx = TypedArray::<i32, 4>::zeros(DEV, shape).unwrap();
    k.index4d.launch(shape, &idx).unwrap();
    assert_eq!(
        idx.to_vec().unwrap(),
        (0..120).collect::<Vec<i32>>(),
        "index4d"
    );

    // use_struct: out = p.scale * x + p.offset * count (Params by value).
    let p = sdk_tests::launchers::kernels::Params {
        scale: 2.0,
        offset: [1.0, -2.0, 0.5],
        count: 3,
    };
    let pts: Vec<[f32; 3]> = (0..n)
        .map(|i| [i as f32, 2.0 * i as f32, -(i as f32)])
        .collect();
    let v = TypedArray::<[f32; 3], 1>::from_slice(DEV, &pts, [n]).unwrap();
    let moved = TypedArray::<[f32; 3], 1>::zeros(DEV, [n]).unwrap();
    k.use_struct.launch(n, &p, &v, &moved).unwrap();
    let want: Vec<[f32; 3]> = pts
        .iter()
        .map(|q| std::array::from_fn(|c| 2.0 * q[c] + p.offset[c] * 3.0))
        .collect();
    assert_eq!(moved.to_vec().unwrap(), want, "use_struct");
    // A struct argument is borrowed, not copied: repeated launches with a
    // struct allocate nothing (other tests may allocate meanwhile: a launch
    // that allocated would add at least 100).
    let before = sdk_tests::alloc::allocations();
    for _ in 0..100 {
        k.use_struct.launch(n, &p, &v, &moved).unwrap();
    }
    let allocs = sdk_tests::alloc::allocations() - before;
    assert!(
        allocs < 100,
        "{allocs} allocations in 100 launches with a struct"
    );

    // transform: out = m (t v), m not symmetric (a transposed m differs).
    let m = [[1.0f32, 2.0, 0.0], [0.0, 1.0, 3.0], [4.0, 0.0, 1.0]];
    let ts: Vec<[[f32; 3]; 3]> = (0..n)
        .map(|i| {
            let d = (i % 4) as f32;
            [[1.0, 0.0, 0.0], [0.0, d, 0.0], [1.0, 0.0, 2.0]]
        })
        .collect();
    let t = TypedArray::<[[f32; 3]; 3], 1>::from_slice(DEV, &ts, [n]).unwrap();
    let out = TypedArray::<[f32; 3], 1>::zeros(DEV, [n]).unwrap();
    k.transform.launch(n, m, &t, &v, &out).unwrap();
    let mul = |a: &[[f32; 3]; 3], v: &[f32; 3]| -> [f32; 3] {
        std::array::from_fn(|r| (0..3).map(|c| a[r][c] * v[c]).sum())
    };
    let want: Vec<[f32; 3]> = ts
        .iter()
        .zip(&pts)
        .map(|(t, v)| mul(&m, &mul(t, v)))
        .collect();
    assert_eq!(out.to_vec().unwrap(), want, "transform");

    // lean_fill (grid_stride=False): value + 1000 i + j.
    let fill = TypedArray::<i32, 2>::zeros(DEV, [7, 11]).unwrap();
    k.lean_fill.launch([7, 11], 5, &fill).unwrap();
    let want: Vec<i32> = (0..7)
        .flat_map(|i| (0..11).map(move |j| 5 + 1000 * i + j))
        .collect();
    assert_eq!(fill.to_vec().unwrap(), want, "lean_fill");

    // count_visits: atomics, each index once.
    let count = TypedArray::<i32, 1>::zeros(DEV, [n]).unwrap();
    k.count_visits.launch(n, &count).unwrap();
    assert_eq!(count.to_vec().unwrap(), vec![1; n], "count_visits");
    println!("typed launchers of kernels.py: 7 kernels equal their closed forms");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn adjoint_replay_stream_and_tape_through_the_launchers() {
    let k = kernels();
    let n = 512usize;
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let x = TypedArray::<f32, 1>::from_slice(DEV, &xs, [n]).unwrap();
    let y = TypedArray::<f32, 1>::zeros(DEV, [n]).unwrap();

    // The backward kernel of saxpy: adj_x += a * adj_y.
    let adj_x = TypedArray::<f32, 1>::zeros(DEV, [n]).unwrap();
    let adj_y = TypedArray::<f32, 1>::from_slice(DEV, &vec![1.0; n], [n]).unwrap();
    k.saxpy
        .launch_adjoint(n, 3.0, &x, &y, 0.0, Some(&adj_x), Some(&adj_y))
        .unwrap();
    assert_eq!(adj_x.to_vec().unwrap(), vec![3.0; n], "adj_x = a adj_y");
    // None for x's adjoint (issue 31): a null array, which Warp's backward
    // code skips, or, when x has a gradient, adds into that instead. (A
    // fresh adj_y each time: the backward kernel of `y[i] = .. + y[i]`
    // adds into adj_y too.)
    let ones = || TypedArray::<f32, 1>::from_slice(DEV, &vec![1.0; n], [n]).unwrap();
    k.saxpy
        .launch_adjoint(n, 3.0, &x, &y, 0.0, None, Some(&ones()))
        .unwrap();
    assert_eq!(
        adj_x.to_vec().unwrap(),
        vec![3.0; n],
        "None: adj_x untouched"
    );
    let xg = x.clone().with_grad().unwrap();
    k.saxpy
        .launch_adjoint(n, 3.0, &xg, &y, 0.0, None, Some(&ones()))
        .unwrap();
    assert_eq!(
        xg.grad().unwrap().to_vec::<f32>().unwrap(),
        vec![3.0; n],
        "None: into x's own gradient"
    );

    // A recorded launch, replayed twice: y = 2 x.
    let launch = k.saxpy.record(n, 1.0, &x, &y).unwrap();
    launch.launch().unwrap();
    launch.launch().unwrap();
    let want: Vec<f32> = xs.iter().map(|x| 2.0 * x).collect();
    assert_eq!(y.to_vec().unwrap(), want, "record + 2 replays");

    // On a stream of the device.
    let stream = Stream::new(&DEV.context().unwrap()).unwrap();
    k.saxpy.launch_on(&stream, n, -2.0, &x, &y).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![0.0; n], "launch_on");

    // The tape records typed launches and runs their backward kernels:
    // loss = sum((a sin x)^2), d loss / dx = a^2 sin 2x.
    let a = 1.5f32;
    let x = TypedArray::<f32, 1>::from_slice(DEV, &xs, [n])
        .unwrap()
        .with_grad()
        .unwrap();
    let s = TypedArray::<f32, 1>::zeros(DEV, [n])
        .unwrap()
        .with_grad()
        .unwrap();
    let loss = TypedArray::<f32, 1>::zeros(DEV, [1])
        .unwrap()
        .with_grad()
        .unwrap();
    let mut tape = Tape::new();
    tape.record(|| -> warp_launch::Result<()> {
        k.chain_sin.launch(n, &x, a, &s)?;
        k.chain_loss.launch(n, &s, &loss)
    })
    .unwrap();
    assert_eq!(tape.launches().len(), 2, "both typed launches recorded");
    tape.backward(&loss).unwrap();
    let grad = x.grad().unwrap().to_vec::<f32>().unwrap();
    let err = xs
        .iter()
        .zip(&grad)
        .map(|(x, g)| (f64::from(*g) - f64::from(a * a) * (2.0 * f64::from(*x)).sin()).abs())
        .fold(0.0f64, f64::max);
    assert!(err < 1e-4, "max |grad - a^2 sin 2x| = {err:e}");
    println!("typed adjoint, replay, stream and tape: max gradient error {err:.2e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_parameter_kind_of_kinds_py() {
    let module = load("kinds");
    let k = kinds::Kinds::new(&module).expect("the launchers match kinds.py's module");
    let n = 300usize;

    // mixed: a nested struct with padding, a double matrix (row-major), a
    // quaternion, a transform, a bool, an int64 and an int8.
    let o = kinds::Outer {
        inner: kinds::Inner {
            flag: 9,
            value: 1.5,
            ..Default::default()
        },
        count: 3,
        weights: [1.0, 2.0, 7.0],
        ..Default::default()
    };
    let m = [[1.0, 2.0], [3.0, 4.0]];
    let q = [0.0, 0.0, 0.0, 0.25];
    let t = [5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    let big = -(1i64 << 40);
    let out = TypedArray::<f64, 1>::zeros(DEV, [n]).unwrap();
    k.mixed.launch(n, &o, m, q, t, true, big, -3, &out).unwrap();
    // o.inner.value * count + m[0][1] + weights[2] + q.w + t.p.x + big + small
    let want = 1.5 * 3.0 + 2.0 + 7.0 + 0.25 + 5.0 + big as f64 - 3.0;
    assert_eq!(out.to_vec().unwrap(), vec![want; n], "mixed");
    let off = TypedArray::<f64, 1>::zeros(DEV, [n]).unwrap();
    k.mixed
        .launch(n, &o, m, q, t, false, big, -3, &off)
        .unwrap();
    assert_eq!(off.to_vec().unwrap(), vec![0.0; n], "mixed with on = false");

    // names: parameters called type, match, dim and stream.
    let ty = TypedArray::<i32, 1>::zeros(DEV, [n]).unwrap();
    let st = TypedArray::<u32, 1>::zeros(DEV, [n]).unwrap();
    k.names.launch(n, &ty, 7, 9, &st).unwrap();
    assert_eq!(ty.to_vec().unwrap(), vec![7; n], "names: type = match");
    assert_eq!(st.to_vec().unwrap(), vec![9; n], "names: stream = dim");

    // shape_only: a 3-D array whose dimensions the signature gives.
    let a3 = TypedArray::<f32, 3>::zeros(DEV, [5, 2, 3]).unwrap();
    let shape = TypedArray::<i32, 1>::zeros(DEV, [n]).unwrap();
    k.shape_only.launch(n, &a3, &shape).unwrap();
    assert_eq!(shape.to_vec().unwrap(), vec![5; n], "shape_only");

    // elements: vec3i, mat44f, uint64 and uint8 arrays.
    let (rows, cols) = (40usize, 6usize);
    let ids: Vec<[i32; 3]> = (0..rows * cols)
        .map(|e| [(10 * (e / cols) + e % cols) as i32, -1, -1])
        .collect();
    let ids = TypedArray::<[i32; 3], 2>::from_slice(DEV, &ids, [rows, cols]).unwrap();
    let frames: Vec<[[f32; 4]; 4]> = (0..rows)
        .map(|i| {
            let mut f = [[0.0; 4]; 4];
            f[0][0] = (i + 1) as f32;
            f[0][1] = 99.0;
            f
        })
        .collect();
    let frames = TypedArray::<[[f32; 4]; 4], 1>::from_slice(DEV, &frames, [rows]).unwrap();
    let counts = TypedArray::<u64, 1>::zeros(DEV, [rows]).unwrap();
    let bytes = TypedArray::<u8, 1>::zeros(DEV, [rows]).unwrap();
    k.elements
        .launch([rows, cols], &ids, &frames, &counts, &bytes)
        .unwrap();
    let want: Vec<u64> = (0..rows as u64)
        .map(|i| 10 * i * cols as u64 + (cols as u64 * (cols as u64 - 1)) / 2)
        .collect();
    assert_eq!(counts.to_vec().unwrap(), want, "elements: counts");
    let want: Vec<u8> = (1..=rows as u8).collect();
    assert_eq!(bytes.to_vec().unwrap(), want, "elements: bytes_");
    // Kernels named like Rust's prelude (`Ok`, `Clone` launchers).
    let flags = TypedArray::<i32, 1>::zeros(DEV, [n]).unwrap();
    k.ok.launch(n, &flags).unwrap();
    assert_eq!(flags.to_vec().unwrap(), vec![1; n], "ok");
    let src: Vec<f32> = (0..n).map(|i| i as f32 - 7.5).collect();
    let src = TypedArray::<f32, 1>::from_slice(DEV, &src, [n]).unwrap();
    let dst = TypedArray::<f32, 1>::zeros(DEV, [n]).unwrap();
    k.clone.launch(n, &src, &dst).unwrap();
    assert_eq!(dst.to_vec().unwrap(), src.to_vec().unwrap(), "clone");
    // A float16 value (issue 31: half's f16): Warp's `wp.float32(h)` is
    // exact, so each result has the bits of the value's float32.
    let halves = TypedArray::<f32, 1>::zeros(DEV, [n]).unwrap();
    for bits in [0x3c00u16, 0xc500, 0x7bff, 0x0001, 0x8000, 0x3555] {
        let h = warp_launch::half::f16::from_bits(bits);
        k.half_value.launch(n, h, &halves).unwrap();
        for v in halves.to_vec().unwrap() {
            assert_eq!(v.to_bits(), h.to_f32().to_bits(), "half_value {bits:#06x}");
        }
    }
    println!("typed launchers of kinds.py: every parameter kind arrives as Rust wrote it");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tiled_launches_and_refusals_through_the_launchers() {
    let tl = Tiles::new(&load("tiles/bd64")).expect("the launchers match tiles.py's module");
    // scale_tiles: out = s a, 8 x 16 tiles over a 37 x 50 array.
    let (r, c) = (37usize, 50usize);
    let av: Vec<f32> = (0..r * c).map(|i| (i % 23) as f32 - 11.0).collect();
    let a = TypedArray::<f32, 2>::from_slice(DEV, &av, [r, c]).unwrap();
    let out = TypedArray::<f32, 2>::zeros(DEV, [r, c]).unwrap();
    tl.scale_tiles.launch_tiled([5, 4], &a, 0.5, &out).unwrap();
    let want: Vec<f32> = av.iter().map(|a| 0.5 * a).collect();
    assert_eq!(out.to_vec().unwrap(), want, "scale_tiles");

    // row_sums: one row of at most 128 per block.
    let (rows, cols) = (6usize, 100usize);
    let rv: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32).collect();
    let m = TypedArray::<f32, 2>::from_slice(DEV, &rv, [rows, cols]).unwrap();
    let sums = TypedArray::<f32, 1>::zeros(DEV, [rows]).unwrap();
    tl.row_sums.launch_tiled([rows], &m, &sums).unwrap();
    let want: Vec<f32> = rv.chunks(cols).map(|row| row.iter().sum()).collect();
    assert_eq!(sums.to_vec().unwrap(), want, "row_sums");

    // A kernel the launch cannot prove is refused through its launcher too.
    let shifted = TypedArray::<f32, 1>::zeros(DEV, [rows]).unwrap();
    let e = tl
        .shifted_rows
        .launch_tiled([rows], &m, &shifted)
        .unwrap_err();
    assert!(matches!(e, Error::Unproven(_)), "{e}");
    println!("typed tiled launches: scale_tiles and row_sums exact; shifted_rows refused: {e}");
}
