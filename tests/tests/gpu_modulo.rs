//! Modulo indices on cuda:0 (issue 36, item 5): Warp 1.19.0's output for
//! `tests/warp/modulo.py` (sm_90 cubin, `.cu`, `.meta` and warp-build's
//! facts, checked in under `warp-launch/tests/fixtures/modulo/` and
//! embedded here, so the GPU bundle needs no checkout). The histogram
//! kernel `out[i % out.shape[0]] += 1` runs through the checked launch and
//! counts every work item; an empty `out` is refused with
//! `Error::OutOfBounds` before anything runs; a dividend that may be
//! negative, or another array's extent, is unproven.

use sdk_tests::warp::refused_as_unproven;
use warp_launch::{AotModule, Array, AxisIndex, Device, EmbeddedImage, EmbeddedModule, Error};

const DEV: Device = Device::Cuda(0);

/// Reads `warp-launch/tests/fixtures/modulo/wp_modulo.<ext>`.
macro_rules! fixture {
    (str $ext:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../warp-launch/tests/fixtures/modulo/wp_modulo.",
            $ext
        ))
    };
}

// SAFETY: the source, metadata, image and facts are the files of one
// warp-build compile of tests/warp/modulo.py.
static MODULO: EmbeddedModule = unsafe {
    EmbeddedModule::new(
        "modulo",
        fixture!(str "cu"),
        fixture!(str "meta"),
        &[EmbeddedImage {
            file: "wp_modulo.sm90.cubin",
            bytes: include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../warp-launch/tests/fixtures/modulo/wp_modulo.sm90.cubin"
            )),
        }],
        None,
    )
    .with_facts(fixture!(str "facts.json"))
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_histogram_runs_on_cuda_and_an_empty_array_is_refused() {
    let m = AotModule::from_embedded(&MODULO).unwrap();
    let hist = m.kernel("hist").unwrap();
    for (bins, dim) in [(1usize, 1i64), (7, 1000), (5, 100_003)] {
        let out = Array::zeros::<i32>(DEV, &[bins]).unwrap();
        hist.launch(dim).outputs(&out).device(DEV).run().unwrap();
        let want: Vec<i32> = (0..bins)
            .map(|b| (0..dim).filter(|i| *i as usize % bins == b).count() as i32)
            .collect();
        assert_eq!(out.to_vec::<i32>().unwrap(), want, "{bins} bins, dim {dim}");
    }
    let empty = Array::zeros::<i32>(DEV, &[0]).unwrap();
    let e = hist
        .launch(5)
        .outputs(&empty)
        .device(DEV)
        .run()
        .unwrap_err();
    match &e {
        Error::OutOfBounds(b) => assert_eq!(
            (b.kernel.as_str(), b.param.as_str(), b.axis, b.index),
            ("hist", "out", 0, Some(AxisIndex::Modulo { axis: 0 }))
        ),
        other => panic!("expected OutOfBounds: {other}"),
    }
    // Axis 1 of a 1-d array is empty: refused whatever its length.
    let out = Array::zeros::<i32>(DEV, &[8]).unwrap();
    let e = m
        .kernel("wrap_axis1")
        .unwrap()
        .launch(3)
        .outputs(&out)
        .device(DEV)
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::OutOfBounds(ref b) if b.axis == 1), "{e}");
    // The context is still usable: nothing ran.
    assert_eq!(out.to_vec::<i32>().unwrap(), [0; 8]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_dividend_that_may_be_negative_is_unproven_on_cuda() {
    let m = AotModule::from_embedded(&MODULO).unwrap();
    let out = Array::zeros::<i32>(DEV, &[4]).unwrap();
    let shown = refused_as_unproven(
        m.kernel("wrap_signed")
            .unwrap()
            .launch(4)
            .inputs((&out, -3i32))
            .device(DEV)
            .run(),
    );
    assert!(shown.contains("`var_n`"), "{shown}");
    let x = Array::zeros::<i32>(DEV, &[2]).unwrap();
    let shown = refused_as_unproven(
        m.kernel("wrap_other")
            .unwrap()
            .launch(4)
            .inputs((&out, &x))
            .device(DEV)
            .run(),
    );
    assert!(shown.contains("another array"), "{shown}");
    assert_eq!(out.to_vec::<i32>().unwrap(), [0; 4]);
}
