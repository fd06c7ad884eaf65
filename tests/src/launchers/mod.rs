//! Typed launchers of the Warp test modules, written by warp-launch's
//! launcher generator (`warp_launch::build::Launchers`) from Warp 1.19.0's
//! output checked in under `warp-launch/tests/fixtures/` and checked in
//! here (a drift test compares them with the generator's output; regenerate
//! with `UPDATE_LAUNCHERS=1 cargo test -p sdk-tests --test launchers`).
//! Not formatted by rustfmt: `prettyplease` formats them.

/// `tests/warp/kernels.py`.
pub mod kernels;
/// `tests/warp/tiles.py` (compiled with block_dim 64).
pub mod tiles;
/// `tests/warp/kinds.py`.
pub mod kinds;
/// `tests/warp/access.py` (a struct holding an array, unproven kernels).
pub mod access;
/// `tests/warp/held.py` (kernels reading and writing arrays held in a
/// `wp.struct`).
pub mod held;
