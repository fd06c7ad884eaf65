//! A launch layer modelled on NVIDIA Warp's `warp.launch`, built on `cuda-api`.
//!
//! This crate is being built; it has no items yet.

/// Warp's kernel ABI (launch bounds, arrays, constants, the dtype table),
/// generated from `specs/warp/abi.yaml`; the C++ side is `include/warp_launch.h`.
#[rustfmt::skip]
pub mod generated;
