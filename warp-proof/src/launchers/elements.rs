//! The Rust types a launcher spells for each dtype that has one: the
//! `Element` types of warp-launch, as source text. warp-launch's tests
//! check this list against its `Element` impls, both ways, so they cannot
//! drift.

use crate::abi::DType;

/// Every dtype with an `Element` type in warp-launch without features, and
/// that type as Rust source (`[f32; 3]`).
pub const ELEMENT_TYPES: &[(&DType, &str)] = &[
    (DType::INT8, "i8"),
    (DType::UINT8, "u8"),
    (DType::INT16, "i16"),
    (DType::UINT16, "u16"),
    (DType::INT32, "i32"),
    (DType::UINT32, "u32"),
    (DType::INT64, "i64"),
    (DType::UINT64, "u64"),
    (DType::FLOAT32, "f32"),
    (DType::FLOAT64, "f64"),
    (DType::VEC2F, "[f32; 2]"),
    (DType::VEC3F, "[f32; 3]"),
    (DType::VEC4F, "[f32; 4]"),
    (DType::VEC2D, "[f64; 2]"),
    (DType::VEC3D, "[f64; 3]"),
    (DType::VEC4D, "[f64; 4]"),
    (DType::VEC2I, "[i32; 2]"),
    (DType::VEC3I, "[i32; 3]"),
    (DType::VEC4I, "[i32; 4]"),
    (DType::MAT22F, "[[f32; 2]; 2]"),
    (DType::MAT33F, "[[f32; 3]; 3]"),
    (DType::MAT44F, "[[f32; 4]; 4]"),
    (DType::MAT22D, "[[f64; 2]; 2]"),
    (DType::MAT33D, "[[f64; 3]; 3]"),
    (DType::MAT44D, "[[f64; 4]; 4]"),
];

/// The `Element` types of warp-launch's `half` feature, spelled through
/// warp-launch's re-export of the `half` crate (so a crate using the
/// launchers needs only warp-launch's `half` feature).
pub const HALF_ELEMENT_TYPES: &[(&DType, &str)] = &[
    (DType::FLOAT16, "::warp_launch::half::f16"),
    (DType::BFLOAT16, "::warp_launch::half::bf16"),
    (DType::VEC2H, "[::warp_launch::half::f16; 2]"),
    (DType::VEC3H, "[::warp_launch::half::f16; 3]"),
    (DType::VEC4H, "[::warp_launch::half::f16; 4]"),
    (DType::MAT22H, "[[::warp_launch::half::f16; 2]; 2]"),
    (DType::MAT33H, "[[::warp_launch::half::f16; 3]; 3]"),
    (DType::MAT44H, "[[::warp_launch::half::f16; 4]; 4]"),
];
