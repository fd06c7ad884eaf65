//! Arrays held in a `wp.struct` on `"cpu"` with Warp's own CPU code
//! (issue 36, item 5): `tests/warp/held.py` compiled by warp-build, launched
//! through its generated typed launchers (`sdk_tests::launchers::held`).
//! `scale_pair` reads `p.a[i]` and writes `p.b[i, j]` and `out[i, j]`: it
//! runs through the safe launch where `dim` fits the held arrays, and a
//! `dim` past a held array's extent is refused with `Error::OutOfBounds`
//! naming the held array and the axis, per axis, before anything runs.
//! Other uses of the struct stay unproven.

use sdk_tests::launchers::held::{Held, Pair};
use sdk_tests::warp::refused_as_unproven;
use warp_corpus::held::HELD;
use warp_launch::{AotModule, AxisIndex, Error, TypedArray};

fn pair(a: &[f32], b: [usize; 2], s: f32) -> Pair {
    Pair {
        a: TypedArray::from_slice("cpu", a, [a.len()]).unwrap(),
        b: TypedArray::zeros("cpu", b).unwrap(),
        s,
    }
}

#[test]
fn a_kernel_reading_and_writing_held_arrays_runs_through_its_typed_launcher() {
    let module = AotModule::from_embedded(&HELD).unwrap();
    let k = Held::new(&module).unwrap();
    let p = pair(&[1.0, 2.0, 3.0], [3, 4], 2.0);
    let out = TypedArray::<f32, 2>::zeros("cpu", [3, 4]).unwrap();
    k.scale_pair.launch([3, 4], &p, &out).unwrap();
    let b = p.b.to_vec().unwrap();
    let want: Vec<f32> = (0..12).map(|e| [2.0, 4.0, 6.0][e / 4]).collect();
    assert_eq!(b, want);
    let o = out.to_vec().unwrap();
    assert_eq!(o, want.iter().map(|v| v + 1.0).collect::<Vec<_>>());
    // A smaller domain touches only its part.
    let p = pair(&[1.0, 1.0, 1.0], [3, 4], 1.0);
    k.scale_pair.launch([2, 1], &p, &out).unwrap();
    let b = p.b.to_vec().unwrap();
    assert_eq!((b[0], b[4], b[1], b[8]), (1.0, 1.0, 0.0, 0.0));
}

#[test]
fn a_dim_past_a_held_arrays_extent_is_refused_per_axis() {
    let module = AotModule::from_embedded(&HELD).unwrap();
    let k = Held::new(&module).unwrap();
    let refused = |p: &Pair, out: &TypedArray<f32, 2>, dim: [i64; 2]| match k
        .scale_pair
        .launch(dim, p, out)
        .unwrap_err()
    {
        Error::OutOfBounds(b) => (b.param.clone(), b.axis, b.index, b.needed),
        e => panic!("expected OutOfBounds: {e}"),
    };
    let out = TypedArray::<f32, 2>::zeros("cpu", [8, 8]).unwrap();
    // p.a has 3 elements: dim[0] = 4 is past it (axis 0 of p.a).
    let p = pair(&[1.0; 3], [8, 8], 1.0);
    assert_eq!(
        refused(&p, &out, [4, 2]),
        ("p.a".into(), 0, Some(AxisIndex::Thread(0)), 4)
    );
    // p.b is 8 x 2: dim[1] = 3 is past its axis 1.
    let p = pair(&[1.0; 8], [8, 2], 1.0);
    assert_eq!(
        refused(&p, &out, [4, 3]),
        ("p.b".into(), 1, Some(AxisIndex::Thread(1)), 3)
    );
    // p.b is 2 x 8: dim[0] = 3 is past its axis 0 (p.a is long enough).
    let p = pair(&[1.0; 8], [2, 8], 1.0);
    assert_eq!(
        refused(&p, &out, [3, 1]),
        ("p.b".into(), 0, Some(AxisIndex::Thread(0)), 3)
    );
    // Nothing ran.
    assert!(p.b.to_vec().unwrap().iter().all(|&v| v == 0.0));
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 0.0));
    let shown = k
        .scale_pair
        .launch([3, 1], &p, &out)
        .unwrap_err()
        .to_string();
    for part in ["kernel 'scale_pair'", "array 'p.b'", "axis 0"] {
        assert!(shown.contains(part), "{part}: {shown}");
    }
}

/// `p.a[i % p.a.shape[0]] += 1.0`: the histogram into a held array runs
/// for any `dim`; an empty `p.a` is refused (a modulo by 0).
#[test]
fn the_histogram_into_a_held_array_runs_and_an_empty_one_is_refused() {
    let module = AotModule::from_embedded(&HELD).unwrap();
    let k = Held::new(&module).unwrap();
    let p = pair(&[0.0; 3], [1, 1], 1.0);
    k.held_hist.launch(10, &p).unwrap();
    assert_eq!(p.a.to_vec().unwrap(), [4.0, 3.0, 3.0]);
    let p = pair(&[], [1, 1], 1.0);
    match k.held_hist.launch(2, &p).unwrap_err() {
        Error::OutOfBounds(b) => assert_eq!(
            (b.param.as_str(), b.axis, b.index),
            ("p.a", 0, Some(AxisIndex::Modulo { axis: 0 }))
        ),
        e => panic!("expected OutOfBounds: {e}"),
    }
}

#[test]
fn other_uses_of_a_struct_holding_arrays_are_unproven() {
    let module = AotModule::from_embedded(&HELD).unwrap();
    let k = Held::new(&module).unwrap();
    let p = pair(&[1.0; 4], [4, 4], 1.0);
    let out = TypedArray::<f32, 1>::zeros("cpu", [4]).unwrap();
    let shown = refused_as_unproven(k.pass_struct.launch(4, &p, &out));
    assert!(
        shown.contains("used otherwise than reading a field"),
        "{shown}"
    );
    let idx = TypedArray::<i32, 1>::from_slice("cpu", &[0, 1, 2, 1 << 20], [4]).unwrap();
    let shown = refused_as_unproven(k.held_gather.launch(4, &p, &idx, &out));
    assert!(shown.contains("'p.a'"), "{shown}");
    assert_eq!(out.to_vec().unwrap(), [0.0; 4]);
}
