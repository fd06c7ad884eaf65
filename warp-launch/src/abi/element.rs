//! Element types: the Rust types that stand for the dtypes of Warp's dtype
//! table (warp-proof's, with its lookups by Warp name and by C++ spelling)
//! ([`Element`]), and the Rust structs that stand for `wp.struct`s
//! ([`WarpStruct`]). Their bytes are read as they lie ([`super::encode`]).

use super::DType;

/// A Rust type that has the layout of a Warp dtype, for typed arrays and
/// values passed by value.
///
/// # Safety
///
/// The type must have exactly the size and alignment of [`Element::DTYPE`],
/// and every bit pattern of that size must be a valid value.
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The dtype, one of the constants of [`DType`] (e.g. [`DType::FLOAT32`]).
    const DTYPE: &'static DType;
}

/// A `#[repr(C)]` Rust type that has the layout of a `wp.struct`.
///
/// # Safety
///
/// The type must have the size, alignment and field offsets of the Warp
/// struct `NAME` as Warp generates it, and no padding bytes (declare any
/// padding as explicit fields): its bytes are read as they are. It must
/// hold no device addresses (no `ArrayT` fields, which [`StructValue::of`](crate::StructValue::of)
/// could not keep alive or check): a struct with arrays goes through the
/// `unsafe` [`StructValue::from_bytes`](crate::StructValue::from_bytes).
pub unsafe trait WarpStruct: Copy + 'static {
    /// The struct's name in the Warp-generated source.
    const NAME: &'static str;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(
            // SAFETY: the Rust type has the size and alignment of the Warp dtype
            // (checked against the table by `every_element_has_its_dtypes_layout`),
            // and plain numbers are valid for every bit pattern.
            unsafe impl Element for $t {
                const DTYPE: &'static DType = DType::$d;
            }
        )*
        /// Every dtype with an [`Element`] type, and that type as Rust
        /// source (`[f32; 3]`), from the same list as the impls: the
        /// tests check warp-proof's launcher element types against it.
        #[cfg(test)]
        pub(crate) const ELEMENT_TYPES: &[(&DType, &str)] = &[$((DType::$d, stringify!($t))),*];
    };
}
element!(
    i8 => INT8, u8 => UINT8, i16 => INT16, u16 => UINT16, i32 => INT32, u32 => UINT32,
    i64 => INT64, u64 => UINT64, f32 => FLOAT32, f64 => FLOAT64,
    [f32; 2] => VEC2F, [f32; 3] => VEC3F, [f32; 4] => VEC4F,
    [f64; 2] => VEC2D, [f64; 3] => VEC3D, [f64; 4] => VEC4D,
    [i32; 2] => VEC2I, [i32; 3] => VEC3I, [i32; 4] => VEC4I,
    [[f32; 2]; 2] => MAT22F, [[f32; 3]; 3] => MAT33F, [[f32; 4]; 4] => MAT44F,
    [[f64; 2]; 2] => MAT22D, [[f64; 3]; 3] => MAT33D, [[f64; 4]; 4] => MAT44D,
);

#[cfg(feature = "half")]
macro_rules! half_element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(
            // SAFETY: half's `f16` and `bf16` are `#[repr(transparent)]`
            // over `u16` (2 bytes, aligned to 2, every bit pattern a value),
            // the layout of Warp's float16 and bfloat16 (checked against the
            // table by `every_half_element_has_its_dtypes_layout`).
            unsafe impl Element for $t {
                const DTYPE: &'static DType = DType::$d;
            }
        )*
        /// The dtypes of the `half` feature's [`Element`] impls, for the
        /// test against warp-proof's launcher element types.
        #[cfg(test)]
        pub(crate) const HALF_ELEMENT_DTYPES: &[&DType] = &[$(DType::$d),*];
    };
}
#[cfg(feature = "half")]
half_element!(
    half::f16 => FLOAT16, half::bf16 => BFLOAT16,
    [half::f16; 2] => VEC2H, [half::f16; 3] => VEC3H, [half::f16; 4] => VEC4H,
    [[half::f16; 2]; 2] => MAT22H, [[half::f16; 3]; 3] => MAT33H, [[half::f16; 4]; 4] => MAT44H,
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The launchers (warp-proof's generator) spell exactly the element
    /// types this crate implements: the same dtypes, the same Rust types.
    #[test]
    fn the_launchers_element_types_are_the_impls() {
        let theirs = warp_proof::elements::ELEMENT_TYPES;
        assert_eq!(theirs.len(), ELEMENT_TYPES.len());
        for ((d, t), (ours_d, ours_t)) in theirs.iter().zip(ELEMENT_TYPES) {
            assert!(std::ptr::eq(*d, *ours_d), "{} vs {}", d.name, ours_d.name);
            assert_eq!(t.replace(' ', ""), ours_t.replace(' ', ""), "{}", d.name);
        }
        #[cfg(feature = "half")]
        {
            let theirs = warp_proof::elements::HALF_ELEMENT_TYPES;
            assert_eq!(theirs.len(), HALF_ELEMENT_DTYPES.len());
            for ((d, _), ours) in theirs.iter().zip(HALF_ELEMENT_DTYPES) {
                assert!(std::ptr::eq(*d, *ours), "{} vs {}", d.name, ours.name);
            }
        }
    }

    #[test]
    fn every_element_has_its_dtypes_layout() {
        fn check<T: Element>(name: &str) {
            let d = T::DTYPE;
            assert_eq!(d.name, name);
            assert!(std::ptr::eq(d, DType::by_name(name).unwrap()), "{name}");
            assert_eq!(d.size, size_of::<T>(), "{}", d.name);
            assert_eq!(d.align, align_of::<T>(), "{}", d.name);
        }
        check::<i8>("int8");
        check::<u8>("uint8");
        check::<i16>("int16");
        check::<u16>("uint16");
        check::<i32>("int32");
        check::<u32>("uint32");
        check::<i64>("int64");
        check::<u64>("uint64");
        check::<f32>("float32");
        check::<f64>("float64");
        check::<[f32; 2]>("vec2f");
        check::<[f32; 3]>("vec3f");
        check::<[f32; 4]>("vec4f");
        check::<[f64; 2]>("vec2d");
        check::<[f64; 3]>("vec3d");
        check::<[f64; 4]>("vec4d");
        check::<[i32; 2]>("vec2i");
        check::<[i32; 3]>("vec3i");
        check::<[i32; 4]>("vec4i");
        check::<[[f32; 2]; 2]>("mat22f");
        check::<[[f32; 3]; 3]>("mat33f");
        check::<[[f32; 4]; 4]>("mat44f");
        check::<[[f64; 2]; 2]>("mat22d");
        check::<[[f64; 3]; 3]>("mat33d");
        check::<[[f64; 4]; 4]>("mat44d");
    }

    #[cfg(feature = "half")]
    #[test]
    fn every_half_element_has_its_dtypes_layout() {
        fn check<T: Element>(name: &str) {
            let d = T::DTYPE;
            assert_eq!(d.name, name);
            assert_eq!(d.size, size_of::<T>(), "{name}");
            assert_eq!(d.align, align_of::<T>(), "{name}");
        }
        check::<half::f16>("float16");
        check::<half::bf16>("bfloat16");
        check::<[half::f16; 2]>("vec2h");
        check::<[half::f16; 3]>("vec3h");
        check::<[half::f16; 4]>("vec4h");
        check::<[[half::f16; 2]; 2]>("mat22h");
        check::<[[half::f16; 3]; 3]>("mat33h");
        check::<[[half::f16; 4]; 4]>("mat44h");
    }
}
