//! Warp's kernel ABI as data: the structs a kernel receives
//! (`launch_bounds_t<N>`, `array_t<T>`), Warp's constants and the dtype
//! table (all in `generated/`, written by `cargo xtask codegen` from
//! `specs/warp/abi.yaml`; the C++ side is warp-launch's
//! `include/warp_launch.h`), and the lookups of a dtype by Warp name and by
//! the C++ spelling in Warp-generated sources. The Rust types and values
//! that stand for dtypes, and the bytes handed to a kernel, are
//! warp-launch's (`abi/values.rs`, `abi/encode.rs`).

use std::fmt;

#[rustfmt::skip]
mod generated;

pub use generated::dtypes::{DTYPES, DType, Kind, Scalar};

/// The text of `warp_launch.h`, the C++ side of this ABI for hand-written
/// CUDA C kernels: the file warp-launch ships in `include/`, generated
/// from the same spec by the same `cargo xtask codegen` step, for build
/// steps that hand it to NVRTC (warp-build's `CudaBuild`) and cannot read
/// a file of another crate.
pub const WARP_LAUNCH_H: &str = include_str!("generated/warp_launch.h");
pub use generated::layout::{
    ARRAY_FLAG_RETAIN_GRAD, ARRAY_MAX_DIMS, ArrayT, LAUNCH_MAX_DIMS, LaunchBounds1, LaunchBounds2,
    LaunchBounds3, LaunchBounds4,
};

impl DType {
    /// The dtype Warp calls `name` (`"float32"`, `"vec3f"`, `"mat33d"`, ...).
    pub fn by_name(name: &str) -> Option<&'static DType> {
        DTYPES.iter().find(|d| d.name == name)
    }

    /// The dtype a Warp-generated source spells `cpp` (whitespace ignored),
    /// e.g. `wp::float32` or `wp::vec_t<3,wp::float32>`.
    pub fn by_cpp(cpp: &str) -> Option<&'static DType> {
        /// Every spelling (the name and its aliases, squeezed) to its
        /// dtype, made once: a module's declarations look dtypes up once
        /// per parameter and local (`docs/launch-profile.md`). The first
        /// dtype of a spelling wins, as the table's order decided before.
        static BY_CPP: std::sync::OnceLock<crate::hash::HashMap<String, &'static DType>> =
            std::sync::OnceLock::new();
        let table = BY_CPP.get_or_init(|| {
            let mut m = crate::hash::HashMap::default();
            for d in DTYPES.iter() {
                for name in std::iter::once(&d.cpp).chain(d.aliases.iter()) {
                    m.entry(squeeze(name)).or_insert(d);
                }
            }
            m
        });
        if cpp.chars().any(char::is_whitespace) {
            table.get(&squeeze(cpp)).copied()
        } else {
            table.get(cpp).copied()
        }
    }

    /// Number of scalars in one element (`rows * cols`).
    pub fn components(&self) -> usize {
        self.rows as usize * self.cols as usize
    }

    /// Whether the scalar type is a floating-point type.
    pub fn is_float(&self) -> bool {
        matches!(
            self.scalar,
            Scalar::Float16 | Scalar::Float32 | Scalar::Float64
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every generated constant is the table entry of its name (the same
    /// address), and every table entry has a constant.
    #[test]
    fn dtype_constants_are_the_table_entries() {
        for (c, name) in [
            (DType::BOOL, "bool"),
            (DType::FLOAT16, "float16"),
            (DType::FLOAT32, "float32"),
            (DType::FLOAT64, "float64"),
            (DType::VEC3F, "vec3f"),
            (DType::MAT33D, "mat33d"),
            (DType::QUATF, "quatf"),
            (DType::TRANSFORMD, "transformd"),
            (DType::SPATIAL_MATRIXF, "spatial_matrixf"),
        ] {
            assert_eq!(c.name, name);
            assert!(std::ptr::eq(c, DType::by_name(name).unwrap()), "{name}");
        }
        // Spot-check the ends of the table: the constants follow its order.
        assert!(std::ptr::eq(DType::BOOL, &DTYPES[0]));
        assert!(std::ptr::eq(DType::TRANSFORMD, &DTYPES[DTYPES.len() - 1]));
    }

    #[test]
    fn every_dtype_is_found_by_its_spellings() {
        for d in DTYPES.iter() {
            assert_eq!(DType::by_name(d.name), Some(d));
            assert_eq!(DType::by_cpp(d.cpp), Some(d), "{}", d.cpp);
            for a in d.aliases {
                assert_eq!(DType::by_cpp(a), Some(d), "{a}");
            }
            assert_eq!(
                DType::by_cpp(&d.cpp.replace(',', ", ")),
                Some(d),
                "{}",
                d.cpp
            );
            assert_eq!(d.size, d.components() * d.scalar.size(), "{}", d.name);
        }
        assert_eq!(DType::by_name("float"), None);
        assert!(DType::FLOAT16.is_float() && !DType::INT32.is_float());
        assert_eq!(DType::VEC3F.to_string(), "vec3f");
    }
}
