//! GPU tests of candle CUDA tensors as warp-launch arrays live in
//! `tests/gpu_candle.rs`; this crate has no library code.
