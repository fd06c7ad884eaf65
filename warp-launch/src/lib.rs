//! A launch layer modelled on NVIDIA Warp's `warp.launch`, built on `cuda-api`.
//!
//! This crate is being built; it has no items yet.
