//! Warp 1.19.0's own examples on `"cpu"`, through Warp's own CPU code
//! compiled by warp-build, equal to Warp's CPU device. No GPU.
//!
//! The build script compiled the Warp modules of five examples
//! ([`warp_corpus::CPU_EXAMPLES`]: wave, fluid, fdtd_3d, graph_capture,
//! alloc_tracker) with `WarpModule` and their CPU code (linked into
//! warp-corpus, embedded as `warp_corpus::<example>::<EXAMPLE>`), at the
//! block dimension the corpus recorded and with the corpus's CUDA source
//! (asserted equal there, so the launchers generated from the corpus declare
//! these modules' kernels), and recorded the launch sequences of the same
//! examples on Warp's CPU device (`corpus.py --cases`, references for a
//! generic x86-64 like warp-build's code: no `-march`, no FMA). Here the
//! harness `gpu_corpus.rs` uses (`tests/tests/corpus_replay/mod.rs`) replays
//! every recorded launch on `"cpu"` through the generated typed launchers
//! (`launch`, or `launch_unchecked` after the safe launch refused an
//! unproven kernel) and compares every array argument after every launch
//! with Warp's CPU state, bit for bit ([`tolerance`]).
//!
//! The three tile examples ([`warp_corpus::TILE_EXAMPLES`]) are compiled
//! the same way, but their kernels are tile code, which warp-build builds no
//! CPU entry points for: their typed launchers are refused on `"cpu"` with
//! the compile step's reason (`Error::CpuUnsupported`).

use warp_corpus::{
    CPU_CASES_DIR, CPU_EXAMPLES, TILE_EXAMPLES, example_alloc_tracker, example_fdtd_3d,
    example_fluid, example_graph_capture, example_tile_convolution, example_tile_fft,
    example_tile_filtering, example_wave,
};
use warp_launch::{AotModule, DType, Device, Error, TypedArray};

#[path = "../../tests/corpus_replay/mod.rs"]
mod replay;

use replay::{Modules, Tol, load_cases, replay_all, tape_all};

/// The tolerance of each kernel the cases launch: none. Both sides run
/// Warp's generated C++ for the same kernel, compiled for a generic x86-64
/// (no FMA instructions, so no contraction either way) with the same libm.
fn tolerance(_module: &str, _kernel: &str) -> (Tol, &'static str) {
    (
        Tol::Exact,
        "Warp's own CPU code on both sides, generic x86-64, no FMA",
    )
}

/// Kernels of the five examples that use tile code (no CPU entry points):
/// `example_fdtd_3d`'s energy diagnostic sums with `wp.tile_sum`. Their
/// launches must be refused on `"cpu"` with `Error::CpuUnsupported`.
const CPU_UNSUPPORTED: &[(&str, &str)] = &[("example_fdtd_3d", "compute_em_energy")];

/// Each embedded module of [`CPU_EXAMPLES`] and [`TILE_EXAMPLES`], made
/// without a GPU.
fn modules() -> Modules {
    Modules::load(|name| {
        let embedded =
            warp_corpus::embedded(name).unwrap_or_else(|| panic!("{name} is not embedded"));
        assert!(
            embedded.cpu().is_some(),
            "{name}: compiled without CPU code"
        );
        AotModule::from_embedded(embedded).unwrap_or_else(|e| panic!("{name}: {e}"))
    })
}

#[test]
fn warp_examples_run_on_cpu_through_warps_cpu_code_equal_to_warps_cpu_device() {
    let corpus = std::path::Path::new(CPU_CASES_DIR);
    let (cases, _) = load_cases(corpus);
    let examples: Vec<&str> = cases.iter().map(|c| c.example.as_str()).collect();
    assert_eq!(examples, CPU_EXAMPLES, "the recorded cases");
    let modules = modules();
    let r = replay_all(
        &cases,
        &modules,
        Device::Cpu,
        tolerance,
        "cpu",
        CPU_UNSUPPORTED,
    );
    let launched = r.tally.len() - r.unsupported.len();
    let refused_launches: usize = r.tally.values().map(|t| t.unsupported).sum();
    println!(
        "cpu corpus: {} examples, {launched} kernels, {} launches on cpu: bit-exact {}, within tolerance {}",
        cases.len(),
        r.launches - refused_launches,
        r.bit_exact.len(),
        r.within.len()
    );
    println!(
        "cpu corpus: {} kernels through the checked typed launch, {} unproven ones refused by it and run through launch_unchecked; refused on cpu (tile code, no CPU entry points): {} ({refused_launches} launches)",
        r.tally
            .values()
            .filter(|t| t.unchecked == 0 && t.unsupported == 0)
            .count(),
        r.tally.values().filter(|t| t.unchecked > 0).count(),
        r.unsupported.join(", ")
    );
    assert_eq!(cases.len(), 5);
    assert_eq!(launched, 18, "kernels run on cpu");
    assert!(
        r.launches - refused_launches >= 100,
        "only {} launches",
        r.launches
    );
    assert_eq!(
        r.bit_exact.len(),
        launched,
        "kernels not bit-exact: {:?}",
        r.within
    );
    assert_eq!(r.unsupported, ["example_fdtd_3d.compute_em_energy"]);
    let reason =
        &r.tally[&("example_fdtd_3d".into(), "compute_em_energy".into())].unsupported_reason;
    assert!(
        reason.contains("cooperative block runtime"),
        "compute_em_energy: {reason}"
    );
}

/// The examples backward: the first launches of each case as one program
/// under our [`Tape`](warp_launch::Tape) on `"cpu"` and under Warp's tape on
/// its CPU device (`corpus.py`'s `tape_case`), seeded alike: every value and
/// every gradient equal, bit for bit. `example_fdtd_3d` turns Warp's
/// backward off (`wp.config.enable_backward = False`): it has no adjoints.
#[test]
fn warp_examples_run_backward_on_cpu_equal_to_warps_tape() {
    let corpus = std::path::Path::new(CPU_CASES_DIR);
    let (cases, _) = load_cases(corpus);
    let modules = modules();
    let (taped, not_run) = tape_all(&cases, &modules, Device::Cpu, 0.0);
    for t in &taped {
        println!(
            "{}: {} launches forward and backward on cpu, {} of {} gradients equal to Warp's tape bit for bit ({} changed by the adjoints)",
            t.example, t.launches, t.exact, t.grads, t.moved
        );
        assert_eq!(t.exact, t.grads, "{}: worst {}", t.example, t.worst);
        assert!(
            t.moved > 0,
            "{}: the adjoints changed no gradient",
            t.example
        );
    }
    println!("not run backward: {}", not_run.join("; "));
    let examples: Vec<&str> = taped.iter().map(|t| t.example.as_str()).collect();
    assert_eq!(
        examples,
        [
            "example_wave",
            "example_fluid",
            "example_graph_capture",
            "example_alloc_tracker"
        ]
    );
    assert_eq!(not_run.len(), 1);
    assert!(not_run[0].starts_with("example_fdtd_3d: "), "{not_run:?}");
}

/// A zeroed `[f64; 2]` (`vec2d`) array on `"cpu"`, of the shape the tile
/// example's `__main__` block launches with (`TILE_M` x `TILE_N`).
fn vec2d(rows: usize, cols: usize) -> TypedArray<[f64; 2], 2> {
    warp_launch::Array::zeros_dtype(Device::Cpu, DType::VEC2D, &[rows, cols])
        .expect("allocate")
        .typed::<[f64; 2], 2>()
        .expect("vec2d")
}

#[test]
fn tile_examples_are_refused_on_cpu_with_the_reason() {
    let m = modules();
    // Shapes and dims of the examples' launches as corpus.py records them
    // (launch_tiled over [1, 1]): fft 1 x 32, convolution 1 x 128,
    // filtering 1 x 512.
    let (x, y) = (vec2d(1, 32), vec2d(1, 32));
    let fft = m.fft.fft_tiled.launch_tiled([1, 1], &x, &y);
    let (x, y) = (vec2d(1, 128), vec2d(1, 128));
    let conv = m.conv.conv_tiled.launch_tiled([1, 1], &x, &y);
    let (x, f, y) = (vec2d(1, 512), vec2d(1, 512), vec2d(1, 512));
    let filter = m.filter.conv_tiled.launch_tiled([1, 1], &x, &f, &y);
    let results = [
        (TILE_EXAMPLES[0], "fft_tiled", fft),
        (TILE_EXAMPLES[1], "conv_tiled", conv),
        (TILE_EXAMPLES[2], "conv_tiled", filter),
    ];
    for (example, kernel, r) in results {
        match r {
            Err(Error::CpuUnsupported { kernel: k, reason }) => {
                assert_eq!(k, kernel, "{example}");
                assert!(
                    reason.contains("cooperative block runtime") && reason.contains("tile"),
                    "{example}.{kernel}: reason {reason:?}"
                );
                println!("{example}.{kernel}: refused on cpu: {reason}");
            }
            other => panic!("{example}.{kernel}: must be refused on cpu: {other:?}"),
        }
    }
    // The same reason is what the embedded module lists.
    for example in TILE_EXAMPLES {
        let cpu = warp_corpus::embedded(example)
            .and_then(|e| e.cpu())
            .unwrap_or_else(|| panic!("{example}: no CPU code"));
        assert_eq!(cpu.unsupported().len(), 1, "{example}");
    }
}
