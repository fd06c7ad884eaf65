//! Warp 1.19.0's own examples, end to end on the GPU through the typed
//! launchers generated from them, equal to Warp's CPU device.
//!
//! `tests/warp/corpus.py` (run by `tests/warp/build.py`, which
//! `cargo xtask gpu-bundle` runs) compiled every example's Warp modules for
//! sm_90 into `<data>/corpus/<example>/<module>/` and ran the launch
//! sequences of eight examples on Warp's CPU device, recording every launch
//! (kernel, dims, argument values) and each array argument's content before
//! and after it (`<data>/corpus/cases/`). Here each module is loaded
//! (`AotModule::load`), its checked-in typed launchers
//! (`gpu_corpus/<example>/<module>.rs`, kept equal to the generator's output
//! by `cargo test -p warp-corpus --test drift`) take their kernels, and the
//! launches are replayed by the harness of `corpus_replay/mod.rs` (shared
//! with warp-corpus's `cpu_corpus.rs`, which replays them on `"cpu"`): in the
//! same order on the same data, every array argument compared with the CPU's
//! content after each launch: bit for bit where the kernel only moves data
//! or computes with integers, else within a tolerance stated per kernel
//! ([`tolerance`]). Kernels whose array accesses the launch cannot check are
//! refused by their safe typed launcher (`Error::Unproven`): the harness
//! asserts that refusal for exactly the kernels of `replay::UNPROVEN`, then
//! runs them through the same typed launcher's `unsafe` `launch_unchecked`.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use sdk_tests::warp::data_dir;
use serde_json::Value as Json;
use warp_launch::{AotModule, Device};

// The launchers are generated (prettyplease formats them); the test uses
// only some of each module's methods.
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_wave/example_wave.rs"]
mod example_wave;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_fluid/example_fluid.rs"]
mod example_fluid;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_fdtd_3d/example_fdtd_3d.rs"]
mod example_fdtd_3d;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_graph_capture/example_graph_capture.rs"]
mod example_graph_capture;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_tile_fft/example_tile_fft.rs"]
mod example_tile_fft;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_tile_convolution/example_tile_convolution.rs"]
mod example_tile_convolution;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_tile_filtering/example_tile_filtering.rs"]
mod example_tile_filtering;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_alloc_tracker/example_alloc_tracker.rs"]
mod example_alloc_tracker;

#[path = "corpus_replay/mod.rs"]
mod replay;

use replay::{Case, Modules, Tol, load_cases, replay_all};

/// NVRTC contracts `a * b + c` into one FMA (`--fmad=true`, Warp's
/// `fuse_fp`), Warp's CPU compiler (LLVM) fuses other pairs or none: results
/// of float arithmetic may differ in the last bits.
const FMA: &str = "float arithmetic: NVRTC and Warp's CPU compiler (LLVM) contract different multiply-adds into FMAs";

/// The tolerance of each kernel the cases launch, and why.
fn tolerance(module: &str, kernel: &str) -> (Tol, &'static str) {
    match (module, kernel) {
        ("example_wave", "grid_update") => (Tol::Exact, "moves heights into vertices"),
        ("example_wave", "wave_displace") => (
            Tol::Rel(1e-5),
            "mag * sin(t): CUDA's sinf and the CPU's libm may differ in the last bit",
        ),
        ("example_wave", "wave_solve") => (Tol::Rel(1e-5), FMA),
        ("example_fluid", "init") => (
            Tol::Exact,
            "integer coordinates: the squares, their sum and the correctly rounded sqrt are exact; stores constants",
        ),
        ("example_fluid", _) => (Tol::Rel(1e-5), FMA),
        ("example_fdtd_3d", "increment_timestep") => (Tol::Exact, "integer increment"),
        ("example_fdtd_3d", "extract_e_x_center_plane") => (Tol::Exact, "copies a plane"),
        ("example_fdtd_3d", "update_h") => (Tol::Rel(1e-5), FMA),
        ("example_fdtd_3d", "update_e") => (
            Tol::Rel(1e-2),
            "the point source's envelope 1 - exp(-(t/3)^2) at t = 0.018 to 0.09 cancels: one ulp of expf \
             (CUDA's is within 2 ulp, the CPU's libm within 1) is 1e-3 of the result at the source cell, \
             the largest value of the field after the first steps; elsewhere FMA contraction as above",
        ),
        ("example_fdtd_3d", "compute_em_energy") => (
            Tol::Rel(1e-4),
            "two sums over 128^3 cells: 256-thread tile sums and atomic adds in any order on the GPU, one thread a block on Warp's CPU; float addition is not associative",
        ),
        ("example_graph_capture", "slide") => (
            Tol::Exact,
            "one float addition per element, correctly rounded on both",
        ),
        ("example_graph_capture", "fbm") => (Tol::Rel(1e-5), FMA),
        ("example_alloc_tracker", "enforce_ground") => (
            Tol::Exact,
            "moves values and multiplies once (|v| * restitution): correctly rounded on both",
        ),
        ("example_alloc_tracker", _) => (Tol::Rel(1e-6), FMA),
        ("example_tile_fft" | "example_tile_convolution" | "example_tile_filtering", _) => (
            Tol::Rel(1e-12),
            "float64 FFTs: cuFFTDx (libmathdx, linked into Warp's cubin) on the GPU and Warp's own FFT on the CPU round differently",
        ),
        _ => panic!("no tolerance stated for {module}.{kernel}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn warp_examples_run_through_typed_launchers_equal_to_warps_cpu() {
    let corpus = data_dir().join("corpus");
    let (cases, cases_manifest) = load_cases(&corpus);
    assert!(cases.len() >= 5, "only {} cases", cases.len());
    let device = Device::Cuda(0);
    let dirs: HashMap<&str, (&str, &Path)> = cases
        .iter()
        .flat_map(|c| {
            c.modules
                .iter()
                .map(|(m, (dir, _))| (m.as_str(), (c.example.as_str(), dir.as_path())))
        })
        .collect();
    let modules = Modules::load(|name| {
        let (example, dir) = dirs
            .get(name)
            .unwrap_or_else(|| panic!("no case loads module {name}"));
        // SAFETY: a module directory of the corpus: one Warp compile (tests/warp/corpus.py).
        let m =
            unsafe { AotModule::load(dir) }.unwrap_or_else(|e| panic!("{example}: {name}: {e}"));
        assert_eq!(
            m.image().unwrap_or_else(|e| panic!("{name}: {e}")),
            format!("wp_{name}.sm90.cubin"),
            "{name}"
        );
        m
    });
    let r = replay_all(&cases, &modules, device, tolerance, "GPU", &[]);
    assert!(
        r.unsupported.is_empty(),
        "refused on the GPU: {:?}",
        r.unsupported
    );
    let checked_kernels = r.tally.values().filter(|t| t.unchecked == 0).count();
    println!(
        "corpus: {} examples, {} kernels launched, all equal Warp's CPU results (bit-exact: {}, within tolerance: {})",
        cases.len(),
        r.tally.len(),
        r.bit_exact.len(),
        r.within.len()
    );
    println!(
        "corpus: {} launches, every one through a typed launcher: {checked_kernels} kernels through the checked launch, {} unproven ones refused by it and run through their unsafe launch_unchecked; examples: {} ({})",
        r.launches,
        r.tally.len() - checked_kernels,
        cases.len(),
        cases
            .iter()
            .map(|c| c.example.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    print_skipped(&corpus, &cases_manifest, &cases);
}

/// What the corpus compiled but does not run here, and what it skipped, with
/// the reasons `corpus.py` recorded.
fn print_skipped(corpus: &Path, cases_manifest: &Json, cases: &[Case]) {
    let path = corpus.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let m: Json = serde_json::from_str(&text).expect("manifest.json parses");
    let run: BTreeSet<&str> = cases.iter().map(|c| c.example.as_str()).collect();
    println!("skipped:");
    for nr in cases_manifest["not_run"].as_array().into_iter().flatten() {
        println!("  {} (no reference run): {}", nr["example"], nr["reason"]);
    }
    for e in m["examples"].as_array().expect("examples") {
        let file = e["file"].as_str().unwrap_or_default();
        let example = e["example"].as_str().unwrap_or_default();
        if let Some(reason) = e["skip_reason"].as_str() {
            println!("  {file}: {reason}");
        }
        for s in e["skipped"].as_array().into_iter().flatten() {
            println!(
                "  {file}: kernel {}: {}",
                s["kernel"].as_str().or(s["module"].as_str()).unwrap_or("?"),
                s["reason"].as_str().unwrap_or_default()
            );
        }
        for module in e["modules"].as_array().into_iter().flatten() {
            for k in module["kernels"].as_array().into_iter().flatten() {
                if k["takes_ids"].as_bool() == Some(true) {
                    println!(
                        "  {file}: kernel {}: compile-only, takes ids of {} objects ({})",
                        k["kernel"].as_str().unwrap_or_default(),
                        k["id_kinds"],
                        k["id_params"]
                    );
                }
            }
        }
        if !run.contains(example) && e["modules"].as_array().is_some_and(|m| !m.is_empty()) {
            println!("  {file}: compiled (its launchers compile in warp-corpus), no reference run");
        }
    }
}
