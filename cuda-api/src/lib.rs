//! The safe CUDA driver API, built on [`cuda_sys`].
//!
//! This crate is being built; for now it re-exports the raw bindings it will
//! wrap.

pub use cuda_sys as sys;
