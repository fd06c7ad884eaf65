//! CUDA C kernels written against `warp_launch.h`, compiled at run time by
//! `CudaModule` (NVRTC) and declared from the same text (issue 30, item 4):
//! they run with Warp's ABI and match a CPU reference, their bounds are
//! checked on launch, a body outside the checked subset is refused on the
//! safe road and runs unchecked, a compile error names its line, and the
//! second compile of a text is a cache hit.
//!
//! NVRTC comes from `CUDA_SYS_NVRTC_LIBRARY` or the system's search path
//! (the bundle's run script sets it to the machine's CUDA 13.0 NVRTC).

use std::time::{Duration, Instant};

use warp_launch::{Array, CacheOutcome, CudaError, CudaModule, Device, Error, Stream};

const DEV: Device = Device::Cuda(0);

const TEXT: &str = r#"
#include "warp_launch.h"

// a[i, j] = a[i, j] * s + i - j (grid-stride, 2-D).
extern "C" __global__ void scale2d(wl::launch_bounds_t<2> dim, wl::array_t<float> a, float s) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        wl::index(a, c.i, c.j) = wl::index(a, c.i, c.j) * s + float(c.i - c.j);
    }
}

// v[i] += d (lean).
extern "C" __global__ void lean_add(wl::launch_bounds_t<1> dim, wl::array_t<int> v, int d) {
    size_t idx = wl::lean_index();
    if (idx >= dim.size) return;
    wl::coord_t c = wl::coord(idx, dim);
    wl::index(v, c.i) += d;
}

// out[0] += sum of x (work items and a constant, atomically).
extern "C" __global__ void total(wl::launch_bounds_t<1> dim, wl::array_t<float> x, wl::array_t<float> out) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        atomicAdd(wl::address(out, 0), wl::index(x, int(idx)));
    }
}

// Waits about `cycles` clock cycles, then out[i] = i + 1 (a launch still
// running when the host moves on).
extern "C" __global__ void spin_fill(wl::launch_bounds_t<1> dim, wl::array_t<int> out, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        wl::index(out, c.i) = c.i + 1;
    }
}

// y[i] = x[idx[i]]: an index read from data, which no rule covers.
extern "C" __global__ void gather(wl::launch_bounds_t<1> dim, wl::array_t<int> idx, wl::array_t<float> x, wl::array_t<float> y) {
    WL_GRID_STRIDE_LOOP(i, dim) {
        wl::coord_t c = wl::coord(i, dim);
        wl::index(y, c.i) = wl::index(x, wl::index(idx, c.i));
    }
}
"#;

fn module() -> CudaModule {
    CudaModule::compile(DEV, "text.cu", TEXT).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn compiled_kernels_match_a_cpu_reference() {
    let m = module();
    let (rows, cols) = (300usize, 70usize);
    let init: Vec<f32> = (0..rows * cols).map(|v| v as f32 * 0.5).collect();
    let a = Array::from_slice(DEV, &init, &[rows, cols]).unwrap();
    m.kernel("scale2d")
        .unwrap()
        .launch([rows, cols])
        .inputs((&a, 3.0f32))
        .run()
        .unwrap();
    let want: Vec<f32> = (0..rows * cols)
        .map(|k| init[k] * 3.0 + (k / cols) as f32 - (k % cols) as f32)
        .collect();
    assert_eq!(a.to_vec::<f32>().unwrap(), want);

    let v = Array::from_slice(DEV, &vec![1i32; 1000], &[1000]).unwrap();
    m.kernel("lean_add")
        .unwrap()
        .launch(1000)
        .inputs((&v, 41i32))
        .run()
        .unwrap();
    assert!(v.to_vec::<i32>().unwrap().iter().all(|&x| x == 42));

    let x = Array::from_slice(DEV, &vec![0.25f32; 4096], &[4096]).unwrap();
    let out = Array::zeros::<f32>(DEV, &[1]).unwrap();
    m.kernel("total")
        .unwrap()
        .launch(4096)
        .inputs((&x, &out))
        .run()
        .unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [1024.0]);
    println!(
        "compiled_kernels_match_a_cpu_reference: scale2d {rows}x{cols}, lean_add 1000, total 4096 equal the CPU reference"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bounds_read_from_the_text_are_checked_on_launch() {
    let m = module();
    let a = Array::zeros::<f32>(DEV, &[10, 10]).unwrap();
    let e = m
        .kernel("scale2d")
        .unwrap()
        .launch([10, 11])
        .inputs((&a, 1.0f32))
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::OutOfBounds(_)), "{e}");
    assert!(e.to_string().contains("scale2d"), "{e}");
    let x = Array::zeros::<f32>(DEV, &[100]).unwrap();
    let empty = Array::zeros::<f32>(DEV, &[0]).unwrap();
    let e = m
        .kernel("total")
        .unwrap()
        .launch(100)
        .inputs((&x, &empty))
        .run()
        .unwrap_err();
    assert!(matches!(e, Error::OutOfBounds(_)), "{e}");
    println!("bounds_read_from_the_text_are_checked_on_launch: {e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_body_outside_the_subset_runs_only_unchecked() {
    let m = module();
    let gather = m.kernel("gather").unwrap();
    let idx = Array::from_slice(DEV, &[2i32, 0, 1], &[3]).unwrap();
    let x = Array::from_slice(DEV, &[10.0f32, 20.0, 30.0], &[3]).unwrap();
    let y = Array::zeros::<f32>(DEV, &[3]).unwrap();
    let e = gather.launch(3).inputs((&idx, &x, &y)).run().unwrap_err();
    assert!(matches!(e, Error::Unproven(_)), "{e}");
    assert!(e.to_string().contains("text.cu:"), "names the line: {e}");
    // SAFETY: every idx value is below x's extent (3).
    unsafe { gather.launch(3).inputs((&idx, &x, &y)).unchecked() }
        .run()
        .unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [30.0, 10.0, 20.0]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_compile_error_names_its_line() {
    let bad = "#include \"warp_launch.h\"\nextern \"C\" __global__ void k(wl::launch_bounds_t<1> dim, wl::array_t<float> a) {\n    WL_GRID_STRIDE_LOOP(idx, dim) { undeclared_name = 1; }\n}\n";
    let e = CudaModule::compile(DEV, "bad.cu", bad).unwrap_err();
    let Error::Cuda(CudaError::Compile(c)) = &e else {
        panic!("not a compile error: {e}")
    };
    assert!(e.to_string().contains("bad.cu:3"), "{e}");
    println!("a_compile_error_names_its_line: {c}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_second_compile_of_a_text_is_a_cache_hit() {
    // A text of its own (a comment with the time), so the first compile
    // misses whatever an earlier run left in the cache.
    // (not a comment: NVRTC compiles the reader's re-emission, without
    // comments).
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let text = TEXT.replacen(
        "extern",
        &format!(
            "extern \"C\" __global__ void stamp_{nanos}(wl::launch_bounds_t<1> dim) {{}}\nextern"
        ),
        1,
    );
    let t0 = Instant::now();
    let first = CudaModule::compile(DEV, "cached.cu", &text).unwrap();
    let t1 = Instant::now();
    let second = CudaModule::compile(DEV, "cached.cu", &text).unwrap();
    let t2 = Instant::now();
    assert_eq!(first.cache(), Some(CacheOutcome::Miss));
    assert_eq!(second.cache(), Some(CacheOutcome::Hit));
    println!(
        "the_second_compile_of_a_text_is_a_cache_hit: compile {:.1} ms, cached {:.1} ms",
        (t1 - t0).as_secs_f64() * 1e3,
        (t2 - t1).as_secs_f64() * 1e3
    );
}

/// A kernel outlives the module it came from, and dropping the only
/// handle of an array while the kernel still runs on it (on a stream of its
/// own, about 50 ms) waits for the kernel: the drop takes at least half that,
/// and arrays made right after hold their own values, not the late writes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_kernel_outlives_its_module_and_a_drop_waits_for_its_launch() {
    let spin = module().kernel("spin_fill").unwrap();
    let n = 1 << 20;
    let khz = warp_launch::CudaDevice::get(0)
        .unwrap()
        .attribute(cuda_api::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .unwrap() as i64;
    let stream = Stream::new(&DEV.context().unwrap()).unwrap();
    let out = Array::zeros::<i32>(DEV, &[n]).unwrap();
    spin.launch(n)
        .inputs((&out, 50 * khz))
        .stream(&stream)
        .run()
        .unwrap();
    let t = Instant::now();
    drop(out);
    let waited = t.elapsed();
    let fresh: Vec<Array> = (0..4)
        .map(|_| Array::from_slice(DEV, &vec![-7i32; n], &[n]).unwrap())
        .collect();
    stream.synchronize().unwrap();
    DEV.stream().unwrap().synchronize().unwrap();
    for a in &fresh {
        assert!(a.to_vec::<i32>().unwrap().iter().all(|&v| v == -7));
    }
    assert!(
        waited >= Duration::from_millis(25),
        "the drop took {waited:?}, less than the kernel runs: the array was freed under it"
    );
    println!(
        "a_kernel_outlives_its_module_and_a_drop_waits_for_its_launch: the drop waited {:.1} ms",
        waited.as_secs_f64() * 1e3
    );
}

/// The same text read without a GPU: what the GPU tests rely on.
#[test]
fn the_text_declares_what_the_gpu_tests_expect() {
    use warp_launch::{Accesses, Pass};
    let specs = CudaModule::declarations("text.cu", TEXT).unwrap();
    let verdicts: Vec<(&str, bool)> = specs
        .iter()
        .map(|s| {
            (
                s.name(),
                matches!(s.accesses(Pass::Forward), Accesses::Checked(_)),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            ("scale2d", true),
            ("lean_add", true),
            ("total", true),
            ("spin_fill", true),
            ("gather", false)
        ]
    );
    assert!(!specs[1].is_grid_stride());
}

/// The attack texts of `tests/fuzz-regressions/cuda-c/`, embedded (the GPU
/// bundle runs where the checkout is not): the eight that
/// `tests/tests/cuda_c_attacks.rs` checks the folder holds.
const ATTACKS: &[(&str, &str)] = &[
    (
        "blockidx-parameter.cu",
        include_str!("../fuzz-regressions/cuda-c/blockidx-parameter.cu"),
    ),
    (
        "comma-declarator-shadow.cu",
        include_str!("../fuzz-regressions/cuda-c/comma-declarator-shadow.cu"),
    ),
    (
        "define-after-comment.cu",
        include_str!("../fuzz-regressions/cuda-c/define-after-comment.cu"),
    ),
    (
        "paren-call-memset.cu",
        include_str!("../fuzz-regressions/cuda-c/paren-call-memset.cu"),
    ),
    (
        "paren-write-coordinate.cu",
        include_str!("../fuzz-regressions/cuda-c/paren-write-coordinate.cu"),
    ),
    (
        "rvalue-ref-alias.cu",
        include_str!("../fuzz-regressions/cuda-c/rvalue-ref-alias.cu"),
    ),
    (
        "splice-ends-block-comment.cu",
        include_str!("../fuzz-regressions/cuda-c/splice-ends-block-comment.cu"),
    ),
    (
        "switch-into-loop.cu",
        include_str!("../fuzz-regressions/cuda-c/switch-into-loop.cu"),
    ),
];

/// The attack texts (`tests/fuzz-regressions/cuda-c/`, one per class an
/// earlier reader proved and that wrote outside `a`): each compiles, its
/// safe launch over `a` (16 elements at the start of a 1,040-element
/// allocation) is refused as unproven naming the text's line, and none of
/// the 1,024 guard elements after `a` changes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_attack_text_is_refused_and_writes_nothing() {
    for &(name, text) in ATTACKS {
        let module = CudaModule::compile(DEV, name, text).unwrap();
        let k = module.kernel("k").unwrap();
        let whole = Array::zeros::<f32>(DEV, &[16 + 1024]).unwrap();
        let a = whole.slice(0, 0..16).unwrap();
        let base = whole.data_address();
        let run = match k.params()[1].name.as_str() {
            "blockIdx" => {
                // A wl::quatf with x = 21 (the index the text writes at).
                let bytes: Vec<u8> = [21.0f32, 0.0, 0.0, 1.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect();
                let q = warp_launch::Value::from_bytes(warp_launch::DType::QUATF, &bytes).unwrap();
                k.launch(16).inputs((&a, q)).run()
            }
            _ if k.params()[1].name == "addr" => k.launch(16).inputs((&a, base + 64 * 4)).run(),
            _ => k.launch(16).inputs((&a, 16i32)).run(),
        };
        let e = run.expect_err(name);
        assert!(matches!(e, Error::Unproven(_)), "{name}: {e}");
        assert!(e.to_string().contains(&format!("{name}:")), "{name}: {e}");
        DEV.stream().unwrap().synchronize().unwrap();
        let after = whole.to_vec::<f32>().unwrap();
        assert!(after.iter().all(|&v| v == 0.0), "{name}: memory changed");
        println!("every_attack_text_is_refused_and_writes_nothing: {name}: {e}");
    }
}

/// The guard check of the test above can fail: the same kernel of
/// `paren-write-coordinate.cu` launched unchecked (the caller's promise
/// broken on purpose, inside a guard the test owns) writes elements past
/// `a`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn an_unchecked_attack_writes_into_the_guard() {
    let (name, text) = ATTACKS[4];
    assert_eq!(name, "paren-write-coordinate.cu");
    let module = CudaModule::compile(DEV, name, text).unwrap();
    let k = module.kernel("k").unwrap();
    let whole = Array::zeros::<f32>(DEV, &[16 + 1024]).unwrap();
    let a = whole.slice(0, 0..16).unwrap();
    // SAFETY: not kept: `a` is a view of `whole`, so the kernel's writes at
    // a[16..32] land in `whole`'s guard, memory this test owns.
    unsafe { k.launch(16).inputs((&a, 16i32)).unchecked() }
        .run()
        .unwrap();
    let after = whole.to_vec::<f32>().unwrap();
    let written = after[16..].iter().filter(|&&v| v == 7.0).count();
    assert_eq!(written, 16, "the unchecked run wrote a[16..32]");
}
