//! The generator and developer tasks of the CUDA launch SDK workspace.
//!
//! Data flows one way: the real `cuda.h` → `cargo xtask import` → `specs/*.yaml`
//! → `cargo xtask codegen` → `cuda-sys/src/generated/` (and the ABI probe in
//! `tests/`). xtask never depends on the crates it generates.

pub mod bundle;
pub mod candle;
pub mod cli;
pub mod codegen;
pub mod ctype;
pub mod fuzz;
pub mod import;
pub mod layers;
pub mod names;
pub mod provision;
pub mod public_api;
pub mod roads;
pub mod spec;
pub mod use_circles;
pub mod warp_aot;
pub mod warp_other;

/// xtask's result type: any error, reported by `main` as one message.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;
