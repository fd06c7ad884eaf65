//! Warp tile kernels on a GPU (`tests/warp/tiles.py`, compiled by Warp
//! 1.19.0 at block_dim 64 and 128 into `tiles/bd64` and `tiles/bd128` of the
//! reference data): launched with `Kernel::launch_tiled` and compared bit
//! for bit with Warp's CPU results (the inputs are multiples of 1/8, so
//! every sum is exact in float32 in any order); the refusals of a launch
//! that does not fit a tile kernel; the tile kernels safe launches refuse,
//! run through `unchecked`.

use std::path::{Path, PathBuf};

use sdk_tests::warp::{arg_from, data_dir, storage_bytes};
use serde_json::Value as Json;
use warp_launch::{AotModule, Arg, Array, Device, DimError, Error, Kernel, Tape};

fn tiles_manifest(dir: &Path) -> Json {
    let path = dir.join("tiles/manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run tests/warp/build.py, or cargo xtask gpu-bundle)",
            path.display()
        )
    });
    serde_json::from_str(&text).expect("tiles/manifest.json parses")
}

/// The module directory of each block size, from the manifest.
fn modules(dir: &Path, m: &Json) -> Vec<(u32, PathBuf)> {
    let mut out: Vec<(u32, PathBuf)> = m["block_dims"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(bd, d)| (bd.parse().unwrap(), dir.join(d.as_str().unwrap())))
        .collect();
    out.sort();
    assert_eq!(out.iter().map(|(bd, _)| *bd).collect::<Vec<_>>(), [64, 128]);
    out
}

fn dims(case: &Json) -> Vec<i64> {
    case["dim"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_i64().unwrap())
        .collect()
}

/// The case's arguments on `dev`, fresh from their files.
fn args(dir: &Path, case: &Json, dev: Device) -> Vec<Arg> {
    case["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| arg_from(dir, dev, a))
        .collect()
}

/// Compares every output of `case` with Warp's bytes, exactly.
fn assert_outputs(dir: &Path, case: &Json, args: &[Arg], what: &str) -> usize {
    let mut n = 0;
    for (spec, arg) in case["args"].as_array().unwrap().iter().zip(args) {
        let Some(file) = spec["expected_file"].as_str() else {
            continue;
        };
        let want = std::fs::read(dir.join(file)).unwrap();
        let got = storage_bytes(arg.as_array().unwrap());
        if got != want {
            let f = |b: &[u8]| {
                b.chunks(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect::<Vec<_>>()
            };
            let (g, w) = (f(&got), f(&want));
            let i = g.iter().zip(&w).position(|(a, b)| a != b).unwrap_or(0);
            panic!(
                "{what}: output '{}' differs from Warp's at element {i}: {} vs {}",
                spec["name"], g[i], w[i]
            );
        }
        n += 1;
    }
    n
}

fn case<'m>(m: &'m Json, name: &str) -> &'m Json {
    m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no tile case {name}"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tile_kernels_give_warps_results_at_block_dim_64_and_128() {
    let dir = data_dir();
    let m = tiles_manifest(&dir);
    let dev = Device::Cuda(0);
    let mut compared = 0;
    for (bd, module_dir) in modules(&dir, &m) {
        // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
        let module = unsafe { AotModule::load(&module_dir) }.expect("Warp tile module loads");
        for case in m["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let kernel = module.kernel(case["kernel"].as_str().unwrap()).unwrap();
            assert_eq!(kernel.fixed_block_dim(), Some(bd), "{name}");
            let args = args(&dir, case, dev);
            let dim = dims(case);
            let launch = kernel
                .launch_tiled(dim.clone())
                .inputs(args.clone())
                .device(dev)
                .record_cmd()
                .unwrap_or_else(|e| panic!("{name} at block_dim {bd}: {e}"));
            let mut full = dim.clone();
            full.push(i64::from(bd));
            assert_eq!(launch.dim(), full.as_slice(), "{name}");
            assert_eq!(launch.plan().block, [bd, 1, 1], "{name}");
            launch.launch().unwrap();
            compared += assert_outputs(&dir, case, &args, &format!("{name} at block_dim {bd}"));
            println!(
                "tiles: {name} at block_dim {bd}: launch_tiled({dim:?}) = dim {full:?}, grid {:?}: bit for bit Warp's CPU result",
                launch.plan().grid
            );
        }
    }
    assert_eq!(compared, 6, "3 outputs at 2 block sizes");
}

fn scale_at(dir: &Path, bd: u32) -> Kernel {
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    unsafe { AotModule::load(dir.join(format!("tiles/bd{bd}"))) }
        .unwrap()
        .kernel("scale_tiles")
        .unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn launches_that_do_not_fit_a_tile_kernel_are_refused() {
    let dir = data_dir();
    let m = tiles_manifest(&dir);
    let dev = Device::Cuda(0);
    let c = case(&m, "scale_tiles");
    let k = scale_at(&dir, 64);
    let a = args(&dir, c, dev);
    // Another block size than the module's: refused, naming both.
    let e = k
        .launch_tiled([5, 4])
        .inputs(a.clone())
        .device(dev)
        .block_dim(128)
        .run()
        .unwrap_err();
    println!("block_dim 128 on the block_dim 64 module: {e}");
    assert!(
        matches!(
            e,
            Error::CompiledBlockDim {
                given: 128,
                compiled: 64,
                ..
            }
        ),
        "{e}"
    );
    // A plain launch of the tile domain leaves blocks partly empty.
    let e = k
        .launch([5, 4])
        .inputs(a.clone())
        .device(dev)
        .run()
        .unwrap_err();
    println!("launch([5, 4]) of a tile kernel: {e}");
    assert!(
        matches!(
            e,
            Error::PartialTileBlock {
                size: 20,
                block_dim: 64,
                ..
            }
        ),
        "{e}"
    );
    // Four extents cannot take the block dimension.
    let e = k
        .launch_tiled([1, 1, 1, 1])
        .inputs(a.clone())
        .device(dev)
        .run()
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Dim {
                error: DimError::TiledTooManyDims { given: 4 },
                ..
            }
        ),
        "{e}"
    );
    // A plain launch over the whole tiled domain is launch_tiled.
    k.launch([5, 4, 64])
        .inputs(a.clone())
        .device(dev)
        .run()
        .unwrap();
    assert_outputs(&dir, c, &a, "launch([5, 4, 64])");
    // Too many tiles for int32 indices: i * 8 + 7 past 2^31 - 1.
    let e = k
        .launch_tiled([(1 << 28) + 1, 1])
        .inputs(a.clone())
        .device(dev)
        .run()
        .unwrap_err();
    println!("2^28 + 1 tiles of 8 rows: {e}");
    assert!(matches!(e, Error::OutOfBounds(_)), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn refused_tile_kernels_run_only_unchecked() {
    let dir = data_dir();
    let m = tiles_manifest(&dir);
    let dev = Device::Cuda(0);
    let c = case(&m, "scale_tiles");
    for bd in [64, 128] {
        // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
        let module = unsafe { AotModule::load(dir.join(format!("tiles/bd{bd}"))) }.unwrap();
        // Same arithmetic as scale_tiles: a shared-memory tile, and bounds checks off.
        for key in ["scale_shared", "scale_unchecked"] {
            let k = module.kernel(key).unwrap();
            let a = args(&dir, c, dev);
            let e = k
                .launch_tiled([5, 4])
                .inputs(a.clone())
                .device(dev)
                .run()
                .unwrap_err();
            assert!(matches!(e, Error::Unproven(_)), "{key}: {e}");
            println!("{key} at block_dim {bd}, safe launch: {e}");
            if key == "scale_unchecked" {
                // Without bounds checks only whole tiles stay inside: 37 x 50 is not.
                continue;
            }
            // SAFETY: the shared tile load and the store are bounds-checked
            // by Warp (bounds_check=True) and every offset is i * 8 or j * 16
            // with i, j >= 0 and small; the arrays are 37 x 50 float32, far
            // below the sizes where the vectorized copy's 32-bit index wraps.
            unsafe {
                k.launch_tiled([5, 4])
                    .inputs(a.clone())
                    .device(dev)
                    .unchecked()
            }
            .run()
            .unwrap();
            assert_outputs(&dir, c, &a, &format!("{key} at block_dim {bd}"));
        }
        // scale_unchecked on whole tiles only: a 40 x 64 array of 5 x 4 tiles of 8 x 16.
        let k = module.kernel("scale_unchecked").unwrap();
        let host: Vec<f32> = (0..40 * 64).map(|i| (i % 97) as f32 / 8.0).collect();
        let a = Array::from_slice(dev, &host, &[40, 64]).unwrap();
        let out = Array::zeros::<f32>(dev, &[40, 64]).unwrap();
        // SAFETY: 5 x 4 tiles of 8 x 16 cover exactly rows 0..40 and columns
        // 0..64 of both 40 x 64 arrays: no element outside is touched.
        unsafe {
            k.launch_tiled([5, 4])
                .inputs((&a, 0.75f32))
                .outputs(&out)
                .device(dev)
                .unchecked()
        }
        .run()
        .unwrap();
        let got = out.to_vec::<f32>().unwrap();
        let want: Vec<f32> = host.iter().map(|x| x * 0.75).collect();
        assert_eq!(got, want, "scale_unchecked at block_dim {bd}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn backward_tile_kernels_are_refused_by_the_tape() {
    let dir = data_dir();
    let dev = Device::Cuda(0);
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let module = unsafe { AotModule::load(dir.join("tiles/bd64")) }.unwrap();
    let total_sum = module.kernel("total_sum").unwrap();
    let a = Array::from_slice(dev, &[0.5f32; 1000], &[1000])
        .unwrap()
        .with_grad()
        .unwrap();
    let total = Array::zeros::<f32>(dev, &[1]).unwrap().with_grad().unwrap();
    let mut tape = Tape::new();
    tape.record(|| {
        total_sum
            .launch_tiled([4])
            .inputs(&a)
            .outputs(&total)
            .device(dev)
            .run()
    })
    .unwrap();
    assert_eq!(total.to_vec::<f32>().unwrap(), [500.0]);
    let e = tape.backward(&total).unwrap_err();
    println!("tape.backward through total_sum: {e}");
    assert!(
        matches!(e, Error::Unproven(_)) && e.to_string().contains("adj_tile"),
        "{e}"
    );
}
