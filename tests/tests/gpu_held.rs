//! Arrays held in a `wp.struct` on cuda:0 (issue 36, item 5): Warp 1.19.0's
//! output for `tests/warp/held.py` (sm_90 cubin, `.cu`, `.meta` and
//! warp-build's facts, checked in under `warp-launch/tests/fixtures/` and
//! embedded here, so the GPU bundle needs no checkout), launched through
//! its generated typed launchers. `scale_pair` reads `p.a[i]` and writes
//! `p.b[i, j]` and `out[i, j]`; a `dim` past a held array's extent is
//! refused with `Error::OutOfBounds` per axis before anything runs.

use sdk_tests::launchers::held::{Held, Pair};
use warp_launch::{AotModule, AxisIndex, Device, EmbeddedImage, EmbeddedModule, Error, TypedArray};

const DEV: Device = Device::Cuda(0);

/// Reads `warp-launch/tests/fixtures/wp_held.<ext>`.
macro_rules! fixture {
    ($ext:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../warp-launch/tests/fixtures/wp_held.",
            $ext
        ))
    };
}

// SAFETY: the source, metadata, image and facts are the files of one
// warp-build compile of tests/warp/held.py.
static HELD: EmbeddedModule = unsafe {
    EmbeddedModule::new(
        "held",
        fixture!("cu"),
        fixture!("meta"),
        &[EmbeddedImage {
            file: "wp_held.sm90.cubin",
            bytes: include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../warp-launch/tests/fixtures/wp_held.sm90.cubin"
            )),
        }],
        None,
    )
    .with_facts(fixture!("facts.json"))
};

fn pair(a: &[f32], b: [usize; 2], s: f32) -> Pair {
    Pair {
        a: TypedArray::from_slice(DEV, a, [a.len()]).unwrap(),
        b: TypedArray::zeros(DEV, b).unwrap(),
        s,
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn held_arrays_are_read_written_and_checked_per_axis_on_cuda() {
    let module = AotModule::from_embedded(&HELD).unwrap();
    let k = Held::new(&module).unwrap();
    let p = pair(&[1.0, 2.0, 3.0], [3, 4], 2.0);
    let out = TypedArray::<f32, 2>::zeros(DEV, [3, 4]).unwrap();
    k.scale_pair.launch([3, 4], &p, &out).unwrap();
    let want: Vec<f32> = (0..12).map(|e| [2.0, 4.0, 6.0][e / 4]).collect();
    assert_eq!(p.b.to_vec().unwrap(), want);
    assert_eq!(
        out.to_vec().unwrap(),
        want.iter().map(|v| v + 1.0).collect::<Vec<_>>()
    );
    let refused = |p: &Pair, dim: [i64; 2]| match k.scale_pair.launch(dim, p, &out).unwrap_err() {
        Error::OutOfBounds(b) => (b.param.clone(), b.axis, b.index),
        e => panic!("expected OutOfBounds: {e}"),
    };
    // p.a too short on axis 0; p.b too short on axis 1, then on axis 0.
    let p = pair(&[1.0; 2], [8, 8], 1.0);
    assert_eq!(
        refused(&p, [3, 1]),
        ("p.a".into(), 0, Some(AxisIndex::Thread(0)))
    );
    let p = pair(&[1.0; 8], [3, 2], 1.0);
    assert_eq!(
        refused(&p, [3, 3]),
        ("p.b".into(), 1, Some(AxisIndex::Thread(1)))
    );
    let p = pair(&[1.0; 8], [2, 4], 1.0);
    assert_eq!(
        refused(&p, [3, 4]),
        ("p.b".into(), 0, Some(AxisIndex::Thread(0)))
    );
    // Nothing ran; the context is still usable.
    assert!(p.b.to_vec().unwrap().iter().all(|&v| v == 0.0));
    // The histogram into a held array, modulo its own extent; an empty one
    // is refused.
    let p = pair(&[0.0; 3], [1, 1], 1.0);
    k.held_hist.launch(10, &p).unwrap();
    assert_eq!(p.a.to_vec().unwrap(), [4.0, 3.0, 3.0]);
    let p = pair(&[], [1, 1], 1.0);
    let e = k.held_hist.launch(2, &p).unwrap_err();
    assert!(
        matches!(&e, Error::OutOfBounds(b) if b.param == "p.a" && b.index == Some(AxisIndex::Modulo { axis: 0 })),
        "{e}"
    );
}
