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
//!
//! The examples of [`CPU_EXAMPLES`] and [`TILE_EXAMPLES`] are also compiled
//! by warp-build with their CPU code, linked into this crate:
//! `warp_corpus::<example>::<EXAMPLE>` (an `EmbeddedModule`, also
//! [`embedded`]), with the launch sequences of [`CPU_EXAMPLES`] recorded on
//! Warp's CPU device under [`CPU_CASES_DIR`] (`tests/cpu_corpus.rs` replays
//! them on `"cpu"`).

include!(concat!(env!("OUT_DIR"), "/corpus.rs"));

/// The Warp test module `tests/warp/kernels.py`, compiled by warp-build for
/// sm_90 and for the CPU (its CPU code linked into this crate):
/// `pub static KERNELS: warp_launch::EmbeddedModule`.
pub mod kernels {
    include!(concat!(env!("OUT_DIR"), "/warp/kernels/kernels.rs"));
}

/// The Warp test module `tests/warp/tape.py` (the programs of the tape-parity
/// cases), compiled by warp-build for sm_90 and for the CPU (its CPU code
/// linked into this crate): `pub static TAPE: warp_launch::EmbeddedModule`.
pub mod tape {
    include!(concat!(env!("OUT_DIR"), "/warp/tape/tape.rs"));
}

/// The Warp test module `tests/warp/access.py` (among others, a kernel
/// taking a `wp.struct` that holds an array), compiled by warp-build for
/// sm_90 and for the CPU (its CPU code linked into this crate):
/// `pub static ACCESS: warp_launch::EmbeddedModule`.
pub mod access {
    include!(concat!(env!("OUT_DIR"), "/warp/access/access.rs"));
}

/// The Warp test module `tests/warp/kinds.py` (every parameter kind a
/// typed launcher maps to Rust, a float16 value among them), compiled by
/// warp-build for sm_90 and for the CPU (its CPU code linked into this
/// crate): `pub static KINDS: warp_launch::EmbeddedModule`.
pub mod kinds {
    include!(concat!(env!("OUT_DIR"), "/warp/kinds/kinds.rs"));
}

/// The attack modules of `tests/warp/attacks/` (copied from the project's
/// shared attacks, see their README), each compiled by warp-build for sm_90
/// and for the CPU, CPU code linked into this crate:
/// `tests/cpu_attacks.rs` holds what each must do.
pub mod attacks {
    /// `native_poke.py`: a `@wp.func_native` snippet that starts with the
    /// comment Warp's own functions start with (`NATIVE_POKE`).
    pub mod native_poke {
        include!(concat!(
            env!("OUT_DIR"),
            "/warp/attacks/native_poke/native_poke.rs"
        ));
    }
    /// `local_components.py`: a local vector and a shape indexed by a
    /// parameter (`LOCAL_COMPONENTS`).
    pub mod local_components {
        include!(concat!(
            env!("OUT_DIR"),
            "/warp/attacks/local_components/local_components.rs"
        ));
    }
    /// `contiguous_cpu.py`: a 1-D kernel of block_dim 1 that fills its
    /// array, for Warp's contiguous CPU path (`CONTIGUOUS_CPU`).
    pub mod contiguous_cpu {
        include!(concat!(
            env!("OUT_DIR"),
            "/warp/attacks/contiguous_cpu/contiguous_cpu.rs"
        ));
    }
    /// `contiguous_views.py`: the same path with a backward pass that adds
    /// into an adjoint (`CONTIGUOUS_VIEWS`).
    pub mod contiguous_views {
        include!(concat!(
            env!("OUT_DIR"),
            "/warp/attacks/contiguous_views/contiguous_views.rs"
        ));
    }
}

/// The Warp test module `tests/warp/modulo.py` (modulo indices,
/// `out[i % out.shape[0]]`), compiled by warp-build for sm_90 and for the
/// CPU (its CPU code linked into this crate): `pub static MODULO:
/// warp_launch::EmbeddedModule`. `tests/cpu_modulo.rs` launches it.
pub mod modulo {
    include!(concat!(env!("OUT_DIR"), "/warp/modulo/modulo.rs"));
}

/// The Warp test module `tests/warp/held.py` (kernels reading and writing
/// arrays held in a `wp.struct`), compiled by warp-build for sm_90 and for
/// the CPU (its CPU code linked into this crate): `pub static HELD:
/// warp_launch::EmbeddedModule`. `tests/cpu_held.rs` launches it through
/// its typed launchers (`sdk_tests::launchers::held`).
pub mod held {
    include!(concat!(env!("OUT_DIR"), "/warp/held/held.rs"));
}

/// Warp's CPU results for `tests/warp/kernels.py`'s cases and tape cases
/// and `tests/warp/tape.py`'s tape-parity programs (`manifest.json`, `cases/`), computed at build time by
/// `tests/warp/build.py --cpu`.
pub const KERNELS_REF_DIR: &str = concat!(env!("OUT_DIR"), "/kernels-ref");

/// Where the build script wrote the launchers: `<example>/<module>.rs`.
pub const LAUNCHERS_DIR: &str = concat!(env!("OUT_DIR"), "/launchers");
