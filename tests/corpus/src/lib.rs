//! Warp 1.19.0's own examples as a corpus for warp-launch's launcher
//! generator: every Warp module of the wheel's `warp/examples` that imports
//! without optional packages, compiled for sm_90 by `tests/warp/corpus.py`
//! in the build script, and its typed launchers generated and included
//! here. That this crate builds is the test that every generated launcher
//! compiles.
//!
//! `warp_corpus::<example>` holds the generated launchers of the example's
//! Warp module of the same name (the module struct, e.g.
//! `example_wave::ExampleWave`, and one struct per kernel);
//! `warp_corpus::<example>::<module>` those of its other Warp modules (e.g.
//! `example_fft_poisson_navier_stokes_2d::dft_kernels`). [`CORPUS_DIR`]
//! holds the compiled modules and `manifest.json` (what was compiled, each
//! kernel's parameters, which kernels take ids of `wp.Mesh`, `wp.Volume`,
//! `wp.HashGrid` or `wp.Bvh` objects, and every skip with its reason);
//! [`LAUNCHERS_DIR`] the generated files.

include!(concat!(env!("OUT_DIR"), "/corpus.rs"));

/// Where the build script wrote the launchers: `<example>/<module>.rs`.
pub const LAUNCHERS_DIR: &str = concat!(env!("OUT_DIR"), "/launchers");
