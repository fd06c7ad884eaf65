//! Modulo indices on `"cpu"` with Warp's own CPU code (issue 36, item 5):
//! `tests/warp/modulo.py` compiled by warp-build. The histogram kernel
//! `out[i % out.shape[0]] += 1` runs through the checked launch for any
//! `dim` and counts every work item; an empty `out` is refused with
//! `Error::OutOfBounds` naming the kernel, the array and the axis (Warp's
//! CPU code would divide by 0: SIGFPE); the kernels whose dividend may be
//! negative, or whose modulo is another array's extent, are unproven.

use sdk_tests::warp::refused_as_unproven;
use warp_corpus::modulo::MODULO;
use warp_launch::{AotModule, Array, AxisIndex, Error};

fn module() -> AotModule {
    AotModule::from_embedded(&MODULO).unwrap()
}

#[test]
fn the_histogram_runs_for_any_dim_and_counts_every_work_item() {
    let m = module();
    let hist = m.kernel("hist").unwrap();
    for (bins, dim) in [(1usize, 1i64), (4, 10), (7, 1000), (5, 3)] {
        let out = Array::zeros::<i32>("cpu", &[bins]).unwrap();
        hist.launch(dim).outputs(&out).device("cpu").run().unwrap();
        let want: Vec<i32> = (0..bins)
            .map(|b| (0..dim).filter(|i| *i as usize % bins == b).count() as i32)
            .collect();
        assert_eq!(out.to_vec::<i32>().unwrap(), want, "{bins} bins, dim {dim}");
    }
    // 2-d: out[i] += x[j % x.shape[0], i % x.shape[1]].
    let wrap = m.kernel("wrap2d").unwrap();
    let x = Array::from_slice("cpu", &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let out = Array::zeros::<f32>("cpu", &[4]).unwrap();
    wrap.launch([4, 5])
        .inputs(&x)
        .outputs(&out)
        .device("cpu")
        .run()
        .unwrap();
    let want: Vec<f32> = (0..4)
        .map(|i| {
            (0..5)
                .map(|j| [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0][(j % 2) * 3 + i % 3])
                .sum()
        })
        .collect();
    assert_eq!(out.to_vec::<f32>().unwrap(), want);
    // An unsigned dividend: x[n % uint32(x.shape[0])] = i.
    let u = m.kernel("wrap_unsigned").unwrap();
    let x = Array::zeros::<f32>("cpu", &[3]).unwrap();
    u.launch(1).inputs((&x, 7u32)).device("cpu").run().unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [0.0, 0.0, 0.0]);
    let x = Array::from_slice("cpu", &[9.0f32; 3], &[3]).unwrap();
    u.launch(1)
        .inputs((&x, u32::MAX))
        .device("cpu")
        .run()
        .unwrap();
    // u32::MAX % 3 == 0.
    assert_eq!(x.to_vec::<f32>().unwrap(), [0.0, 9.0, 9.0]);
}

#[test]
fn an_empty_divisor_is_refused_before_the_cpu_divides_by_zero() {
    let m = module();
    let hist = m.kernel("hist").unwrap();
    let empty = Array::zeros::<i32>("cpu", &[0]).unwrap();
    let e = hist
        .launch(5)
        .outputs(&empty)
        .device("cpu")
        .run()
        .unwrap_err();
    let shown = e.to_string();
    let Error::OutOfBounds(b) = e else {
        panic!("expected OutOfBounds: {shown}")
    };
    assert_eq!(
        (b.kernel.as_str(), b.param.as_str(), b.axis, b.index),
        ("hist", "out", 0, Some(AxisIndex::Modulo { axis: 0 }))
    );
    for part in ["kernel 'hist'", "array 'out'", "axis 0", "modulo by 0"] {
        assert!(shown.contains(part), "{part}: {shown}");
    }
    // A domain of size 0 runs no work item: nothing divides.
    hist.launch(0).outputs(&empty).device("cpu").run().unwrap();
    // The modulo by axis 1 of a 1-d array: always 0, always refused.
    let out = Array::zeros::<i32>("cpu", &[8]).unwrap();
    let e = m
        .kernel("wrap_axis1")
        .unwrap()
        .launch(3)
        .outputs(&out)
        .device("cpu")
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::OutOfBounds(ref b) if b.axis == 1), "{e}");
    assert_eq!(out.to_vec::<i32>().unwrap(), [0; 8]);
    // A 2-d array empty on the axis that divides its second index.
    let x = Array::zeros::<f32>("cpu", &[2, 0]).unwrap();
    let out = Array::zeros::<f32>("cpu", &[4]).unwrap();
    let e = m
        .kernel("wrap2d")
        .unwrap()
        .launch([4, 5])
        .inputs(&x)
        .outputs(&out)
        .device("cpu")
        .run()
        .unwrap_err();
    assert!(
        matches!(e, Error::OutOfBounds(ref b) if b.param == "x" && b.axis == 1),
        "{e}"
    );
}

#[test]
fn a_dividend_that_may_be_negative_or_another_arrays_extent_is_unproven() {
    let m = module();
    let out = Array::zeros::<i32>("cpu", &[4]).unwrap();
    let run = |name: &str, n: Option<i32>| {
        let k = m.kernel(name).unwrap();
        let b = k.launch(4).device("cpu");
        match (name, n) {
            ("wrap_other", _) => b.inputs((&out, &out)).run(),
            (_, Some(n)) => b.inputs((&out, n)).run(),
            _ => b.inputs(&out).run(),
        }
    };
    for (name, says) in [
        ("wrap_shifted", "may be negative"),
        ("wrap_other", "another array"),
    ] {
        let shown = refused_as_unproven(run(name, None));
        assert!(shown.contains(says), "{name}: {shown}");
    }
    let shown = refused_as_unproven(run("wrap_signed", Some(-3)));
    assert!(shown.contains("`var_n`"), "{shown}");
    let k = m.kernel("wrap_uint8").unwrap();
    let shown = refused_as_unproven(k.launch(4).inputs((&out, 3u8)).device("cpu").run());
    assert!(shown.contains("not an array's extent"), "{shown}");
    assert_eq!(out.to_vec::<i32>().unwrap(), [0; 4]);
}
