//! Warp 1.19.0's own examples as a corpus for warp-launch's launcher
//! generator: every Warp module of the wheel's `warp/examples` that imports
//! without optional packages, compiled for sm_90 by `tests/warp/corpus.py`
//! in the build script, and its typed launchers generated and included
//! here. That this crate builds is the test that every generated launcher
//! compiles.
//!
//! `warp_corpus::<example>::<module>` holds the generated launchers of one
//! Warp module (the module struct, e.g. `example_wave::example_wave::ExampleWave`,
//! and one struct per kernel). [`CORPUS_DIR`] holds the compiled modules and
//! `manifest.json` (what was compiled, each kernel's parameters, which
//! kernels take ids of `wp.Mesh`, `wp.Volume`, `wp.HashGrid` or `wp.Bvh`
//! objects, and every skip with its reason); [`LAUNCHERS_DIR`] the
//! generated files.

include!(concat!(env!("OUT_DIR"), "/corpus.rs"));

/// Where the build script compiled the corpus: `<example>/<module>/wp_<module>.{cu,meta,sm90.cubin}`
/// and `manifest.json`.
pub const CORPUS_DIR: &str = concat!(env!("OUT_DIR"), "/corpus");

/// Where the build script wrote the launchers: `<example>/<module>.rs`.
pub const LAUNCHERS_DIR: &str = concat!(env!("OUT_DIR"), "/launchers");
