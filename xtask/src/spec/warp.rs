//! `specs/warp/abi.yaml`: NVIDIA Warp's kernel ABI as facts (launch bounds,
//! arrays, the dtype table), and the checks that keep those facts consistent
//! with each other before anything is generated from them.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::error::SpecError;
use super::text::Str;
use crate::names::is_ident;

/// The whole Warp ABI spec.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarpAbi {
    /// The Warp release the facts describe, e.g. `1.19.0`.
    pub warp_version: String,
    /// Integer constants of Warp's headers.
    pub constants: Spanned<Vec<WarpConstant>>,
    /// `launch_bounds_t<N>`, the first kernel parameter.
    pub launch_bounds: LaunchBoundsSpec,
    /// `array_t<T>`, an array parameter.
    pub array: ArraySpec,
    /// Scalar dtypes, in table order.
    pub scalars: Vec<ScalarSpec>,
    /// Vector, matrix, quaternion and transform dtypes, in table order.
    pub composites: Vec<CompositeSpec>,
}

/// One integer constant.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarpConstant {
    /// The header's name, also the Rust name.
    pub name: Str,
    /// The header that defines it (under `warp/native/`).
    pub header: String,
    /// The Rust type of the generated constant.
    pub rust_type: String,
    /// The value.
    pub value: u64,
    /// Rustdoc and header comment.
    pub doc: String,
}

/// One field of an ABI struct.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    /// Field name (the same in C++ and Rust).
    pub name: Str,
    /// C++ element type (`T*` for a pointer to the element type).
    pub c_type: String,
    /// Rust element type.
    pub rust_type: String,
    /// Array length: a number, or `N` for the launch dimension count.
    #[serde(default)]
    pub len: Option<FieldLen>,
    /// Rustdoc and header comment.
    pub doc: String,
}

/// The length of an array field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldLen {
    /// A fixed length.
    Fixed(u32),
    /// A template parameter (`N`).
    Param(String),
}

impl<'de> Deserialize<'de> for FieldLen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = FieldLen;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a length (a number, or N)")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FieldLen, E> {
                u32::try_from(v)
                    .map(FieldLen::Fixed)
                    .map_err(|_| E::custom(format!("length {v} is too large")))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FieldLen, E> {
                u32::try_from(v)
                    .map(FieldLen::Fixed)
                    .map_err(|_| E::custom(format!("length {v} is not a count")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FieldLen, E> {
                Ok(FieldLen::Param(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `launch_bounds_t<N>`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchBoundsSpec {
    /// C++ template name.
    pub c_name: Str,
    /// Rust struct name prefix; `N` is appended.
    pub rust_prefix: Str,
    /// The dimension counts that exist.
    pub dims: Spanned<Vec<u32>>,
    /// Rustdoc and header comment.
    pub doc: String,
    /// Fields in order.
    pub fields: Vec<FieldSpec>,
    /// `sizeof` for each entry of `dims`.
    pub sizes: Spanned<Vec<usize>>,
    /// `alignof` (the same for every N).
    pub align: usize,
}

/// `array_t<T>`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArraySpec {
    /// C++ template name.
    pub c_name: Str,
    /// Rust struct name.
    pub rust_name: Str,
    /// Rustdoc and header comment.
    pub doc: String,
    /// Fields in order.
    pub fields: Vec<FieldSpec>,
    /// `sizeof`.
    pub size: Spanned<usize>,
    /// `alignof`.
    pub align: usize,
}

/// One scalar dtype.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalarSpec {
    /// Warp's name (`float32`).
    pub name: Str,
    /// The Rust enum variant (`Float32`).
    pub variant: Str,
    /// The spelling in Warp-generated code (`wp::float32`).
    pub cpp: String,
    /// The type Warp's typedef names (`float`), or `cpp` itself.
    pub c_type: String,
    /// Other spellings of the same type.
    pub aliases: Vec<String>,
    /// `sizeof`.
    pub size: usize,
    /// `alignof`.
    pub align: usize,
}

impl ScalarSpec {
    /// Every other spelling: `c_type` (when it differs from `cpp`), then `aliases`.
    pub fn all_aliases(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.c_type != self.cpp {
            out.push(self.c_type.clone());
        }
        out.extend(self.aliases.iter().cloned());
        out
    }
}

/// The kind of a composite dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompositeKind {
    /// `vec_t<N, T>`.
    Vector,
    /// `mat_t<R, C, T>`.
    Matrix,
    /// `quat_t<T>`.
    Quaternion,
    /// `transform_t<T>`.
    Transform,
}

impl CompositeKind {
    /// The Rust `Kind` variant name.
    pub fn variant(self) -> &'static str {
        match self {
            CompositeKind::Vector => "Vector",
            CompositeKind::Matrix => "Matrix",
            CompositeKind::Quaternion => "Quaternion",
            CompositeKind::Transform => "Transform",
        }
    }
}

/// One vector, matrix, quaternion or transform dtype.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompositeSpec {
    /// Warp's name (`vec3f`).
    pub name: Str,
    /// What it is.
    pub kind: CompositeKind,
    /// Warp's name of the scalar type.
    pub scalar: String,
    /// Rows (the length of a vector).
    pub rows: u8,
    /// Columns (1 unless a matrix).
    pub cols: u8,
    /// The spelling in Warp-generated code.
    pub cpp: String,
    /// Other names of the same type in Warp's headers.
    pub aliases: Vec<String>,
    /// `sizeof`.
    pub size: usize,
    /// `alignof`.
    pub align: usize,
}

/// Size and alignment of a field's Rust element type on a 64-bit target.
pub fn rust_scalar_layout(t: &str) -> Option<(usize, usize)> {
    Some(match t {
        "u8" | "i8" => (1, 1),
        "u16" | "i16" => (2, 2),
        "u32" | "i32" => (4, 4),
        "u64" | "i64" | "usize" | "isize" => (8, 8),
        _ => return None,
    })
}

/// C layout of a struct of `fields`, with `n` for `len: N`:
/// (size, align, offset of each field).
pub fn c_layout(fields: &[FieldSpec], n: u32) -> Option<(usize, usize, Vec<usize>)> {
    let mut offset = 0usize;
    let mut align = 1usize;
    let mut offsets = Vec::new();
    for f in fields {
        let (size, a) = rust_scalar_layout(&f.rust_type)?;
        let count = match &f.len {
            None => 1,
            Some(FieldLen::Fixed(k)) => *k as usize,
            Some(FieldLen::Param(p)) if p == "N" => n as usize,
            Some(FieldLen::Param(_)) => return None,
        };
        offset = offset.next_multiple_of(a);
        offsets.push(offset);
        offset += size * count;
        align = align.max(a);
    }
    Some((offset.next_multiple_of(align), align, offsets))
}

/// An error at any spanned value's position.
fn at<T>(file: &str, v: &Spanned<T>, message: impl Into<String>) -> SpecError {
    SpecError {
        file: file.to_string(),
        line: v.referenced.line(),
        col: v.referenced.column(),
        message: message.into(),
    }
}

/// Every problem in the Warp spec; `file` is its display path.
pub fn validate(abi: &WarpAbi, file: &str) -> Vec<SpecError> {
    let mut errs = Vec::new();

    let constant = |name: &str| {
        abi.constants
            .value
            .iter()
            .find(|c| c.name.value == name)
            .map(|c| c.value)
    };
    let mut names = BTreeSet::new();
    for c in &abi.constants.value {
        if !is_ident(&c.name.value) || !names.insert(c.name.value.clone()) {
            errs.push(SpecError::at(
                file,
                &c.name,
                format!(
                    "constant `{}` is not a unique Rust identifier (ASCII letters, digits and _, not a keyword)",
                    c.name.value
                ),
            ));
        }
        let fits = match c.rust_type.as_str() {
            "u8" => c.value <= u8::MAX as u64,
            "u16" => c.value <= u16::MAX as u64,
            "u32" | "i32" => c.value <= i32::MAX as u64,
            "u64" | "usize" => true,
            _ => false,
        };
        if !fits {
            errs.push(SpecError::at(
                file,
                &c.name,
                format!(
                    "constant `{}`: {} does not fit rust_type `{}` (one of u8, u16, u32, i32, u64, usize)",
                    c.name.value, c.value, c.rust_type
                ),
            ));
        }
    }

    // Struct fields: known element types, layouts that match the stated sizes.
    let check_fields = |errs: &mut Vec<SpecError>, fields: &[FieldSpec]| {
        for f in fields {
            if !is_ident(&f.name.value) {
                errs.push(SpecError::at(
                    file,
                    &f.name,
                    format!(
                        "field name `{}` is not a Rust identifier (ASCII letters, digits and _, not a keyword)",
                        f.name.value
                    ),
                ));
            }
            if rust_scalar_layout(&f.rust_type).is_none() {
                errs.push(SpecError::at(
                    file,
                    &f.name,
                    format!(
                        "field `{}`: rust_type `{}` is not a fixed-size integer type",
                        f.name.value, f.rust_type
                    ),
                ));
            }
            if let Some(FieldLen::Param(p)) = &f.len
                && p != "N"
            {
                errs.push(SpecError::at(
                    file,
                    &f.name,
                    format!(
                        "field `{}`: len must be a number or N, not `{p}`",
                        f.name.value
                    ),
                ));
            }
        }
    };
    let lb = &abi.launch_bounds;
    let a = &abi.array;
    check_fields(&mut errs, &lb.fields);
    check_fields(&mut errs, &a.fields);
    for (what, name) in [
        ("launch_bounds.rust_prefix", &lb.rust_prefix),
        ("array.rust_name", &a.rust_name),
    ] {
        if !is_ident(&name.value) {
            errs.push(SpecError::at(
                file,
                name,
                format!(
                    "{what} `{}` is not a Rust identifier (ASCII letters, digits and _, not a keyword)",
                    name.value
                ),
            ));
        }
    }
    for (what, name) in [
        ("launch_bounds.c_name", &lb.c_name),
        ("array.c_name", &a.c_name),
    ] {
        if !is_ident(&name.value) {
            errs.push(SpecError::at(
                file,
                name,
                format!("{what} `{}` is not a C++ identifier", name.value),
            ));
        }
    }
    if let Some(max) = constant("LAUNCH_MAX_DIMS") {
        let want: Vec<u32> = (1..=max.min(64) as u32).collect();
        if lb.dims.value != want {
            errs.push(at(
                file,
                &lb.dims,
                format!(
                    "launch_bounds.dims is {:?} but LAUNCH_MAX_DIMS = {max} asks for {want:?}",
                    lb.dims.value
                ),
            ));
        }
    } else {
        errs.push(at(
            file,
            &abi.constants,
            "constant LAUNCH_MAX_DIMS is missing; add it to constants",
        ));
    }
    if lb.sizes.value.len() != lb.dims.value.len() {
        errs.push(at(
            file,
            &lb.sizes,
            format!(
                "launch_bounds.sizes has {} entries for {} dims",
                lb.sizes.value.len(),
                lb.dims.value.len()
            ),
        ));
    }
    for (n, want) in lb.dims.value.iter().zip(&lb.sizes.value) {
        if let Some((size, align, _)) = c_layout(&lb.fields, *n)
            && (size != *want || align != lb.align)
        {
            errs.push(at(
                file,
                &lb.sizes,
                format!(
                    "{}<{n}>: the fields lay out to size {size}, align {align}, but the spec says size {want}, align {}",
                    lb.c_name.value, lb.align
                ),
            ));
        }
    }
    if let Some((size, align, _)) = c_layout(&a.fields, 0)
        && (size != a.size.value || align != a.align)
    {
        errs.push(at(
            file,
            &a.size,
            format!(
                "{}: the fields lay out to size {size}, align {align}, but the spec says size {}, align {}",
                a.c_name.value, a.size.value, a.align
            ),
        ));
    }
    match constant("ARRAY_MAX_DIMS") {
        Some(max) => {
            for f in &a.fields {
                if let Some(FieldLen::Fixed(k)) = f.len
                    && k as u64 != max
                {
                    errs.push(SpecError::at(
                        file,
                        &f.name,
                        format!(
                            "array field `{}` has len {k}, not ARRAY_MAX_DIMS = {max}",
                            f.name.value
                        ),
                    ));
                }
            }
        }
        None => errs.push(at(
            file,
            &abi.constants,
            "constant ARRAY_MAX_DIMS is missing; add it to constants",
        )),
    }

    // Dtypes: unique names, scalar sizes, composite sizes from their shape.
    let mut dtype_names = BTreeSet::new();
    let mut variants = BTreeSet::new();
    for s in &abi.scalars {
        if !dtype_names.insert(s.name.value.clone()) {
            errs.push(SpecError::at(
                file,
                &s.name,
                format!("duplicate dtype `{}`", s.name.value),
            ));
        }
        if !is_ident(&s.variant.value) || !variants.insert(s.variant.value.clone()) {
            errs.push(SpecError::at(
                file,
                &s.variant,
                format!(
                    "scalar `{}`: variant `{}` is not a unique Rust identifier",
                    s.name.value, s.variant.value
                ),
            ));
        }
        if ![1, 2, 4, 8].contains(&s.size) || s.align != s.size {
            errs.push(SpecError::at(
                file,
                &s.name,
                format!(
                    "scalar `{}`: size {} and align {} must be equal and one of 1, 2, 4, 8",
                    s.name.value, s.size, s.align
                ),
            ));
        }
        if s.c_type.starts_with("wp::") && s.size != 2 {
            errs.push(SpecError::at(
                file,
                &s.name,
                format!(
                    "scalar `{}`: a struct c_type (`{}`) is rendered as a 16-bit payload, so size must be 2",
                    s.name.value, s.c_type
                ),
            ));
        }
    }
    for c in &abi.composites {
        if !dtype_names.insert(c.name.value.clone()) {
            errs.push(SpecError::at(
                file,
                &c.name,
                format!("duplicate dtype `{}`", c.name.value),
            ));
        }
        if !is_ident(&c.name.value) {
            errs.push(SpecError::at(
                file,
                &c.name,
                "dtype name is not an identifier",
            ));
        }
        let Some(s) = abi.scalars.iter().find(|s| s.name.value == c.scalar) else {
            errs.push(SpecError::at(
                file,
                &c.name,
                format!(
                    "`{}`: scalar `{}` is not in scalars",
                    c.name.value, c.scalar
                ),
            ));
            continue;
        };
        let shape_ok = match c.kind {
            CompositeKind::Vector => c.rows >= 1 && c.cols == 1,
            CompositeKind::Matrix => c.rows >= 1 && c.cols >= 1,
            CompositeKind::Quaternion => c.rows == 4 && c.cols == 1,
            CompositeKind::Transform => c.rows == 7 && c.cols == 1,
        };
        if !shape_ok {
            errs.push(SpecError::at(
                file,
                &c.name,
                format!(
                    "`{}`: a {:?} cannot be {}x{}",
                    c.name.value, c.kind, c.rows, c.cols
                ),
            ));
        }
        let want = c.rows as usize * c.cols as usize * s.size;
        if c.size != want || c.align != s.align {
            errs.push(SpecError::at(
                file,
                &c.name,
                format!(
                    "`{}`: size {} / align {} differ from {}x{} {} (size {want}, align {})",
                    c.name.value, c.size, c.align, c.rows, c.cols, s.name.value, s.align
                ),
            ));
        }
    }
    errs
}
