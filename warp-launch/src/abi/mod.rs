//! Warp's kernel ABI: the structs a kernel receives (`launch_bounds_t<N>`,
//! `array_t<T>`), Warp's constants and the dtype table (all in
//! `generated/`, written by `cargo xtask codegen` from
//! `specs/warp/abi.yaml`; the C++ side is `include/warp_launch.h`), the
//! Rust types and values that stand for dtypes and structs (`values`), and
//! every byte this crate hands to a kernel or reads back (`encode`, one
//! byte order).

pub(crate) mod encode;
pub(crate) mod half;
#[rustfmt::skip]
mod generated;
mod values;

pub use generated::dtypes::{DTYPES, DType, Kind, Scalar};
pub use generated::layout::{
    ARRAY_FLAG_RETAIN_GRAD, ARRAY_MAX_DIMS, ArrayT, LAUNCH_MAX_DIMS, LaunchBounds1, LaunchBounds2,
    LaunchBounds3, LaunchBounds4,
};
pub(crate) use values::Refusal;
#[cfg(feature = "build")]
pub(crate) use values::{ELEMENT_TYPES, HALF_ELEMENT_TYPES};
pub use values::{Element, INLINE_VALUE_BYTES, Value, WarpStruct};
