//! Kernel parameter types and declarations, and the check of a declaration
//! against the parameter layout the driver reports (count, size, offset).

use std::any::{TypeId, type_name};
use std::borrow::Cow;
use std::fmt;

use crate::error::SignatureError;
use crate::memory::{ConstDevicePtr, DevicePtr};

/// A Rust type that is, byte for byte, one kernel parameter.
///
/// # Safety
///
/// The type must be plain data with the size and alignment of the C
/// parameter it stands for (`#[repr(C)]` for structs, with `align(N)` where
/// the C type is over-aligned).
pub unsafe trait ParamRepr: Copy + Send + Sync + 'static {
    /// Another parameter type whose values may be passed for this one
    /// (a writable pointer for a read-only one); `None` for most types.
    fn also_accepts() -> Option<TypeId> {
        None
    }
}

macro_rules! kernel_param {
    ($($t:ty),*) => { $( // SAFETY: primitives are passed by value with their own layout.
        unsafe impl ParamRepr for $t {} )* };
}
kernel_param!(
    u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool
);
// SAFETY: a device pointer is one 8-byte address.
unsafe impl<T: 'static> ParamRepr for DevicePtr<T> {}
// SAFETY: as above.
unsafe impl<T: 'static> ParamRepr for ConstDevicePtr<T> {
    fn also_accepts() -> Option<TypeId> {
        Some(TypeId::of::<DevicePtr<T>>())
    }
}
// SAFETY: arrays of parameters are laid out as the C array.
unsafe impl<T: ParamRepr, const N: usize> ParamRepr for [T; N] {}

/// A Rust type name without module paths: `DevicePtr<f32>` for
/// `cuda_api::memory::DevicePtr<f32>`.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut word = String::new();
    for c in full.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or(&word));
            word.clear();
            out.push(c);
        }
    }
    out.push_str(word.rsplit("::").next().unwrap_or(&word));
    out
}

/// The type of one kernel parameter: a Rust [`ParamRepr`] type, or an
/// opaque block of bytes of a given size and alignment (a C struct known only
/// at run time, whose bytes can only be set through `unsafe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamType {
    name: Cow<'static, str>,
    size: usize,
    align: usize,
    id: Option<TypeId>,
    also: Option<TypeId>,
}

impl ParamType {
    /// The Rust type `T`.
    pub fn of<T: ParamRepr>() -> Self {
        ParamType {
            name: Cow::Owned(short_type_name(type_name::<T>())),
            size: size_of::<T>(),
            align: align_of::<T>(),
            id: Some(TypeId::of::<T>()),
            also: T::also_accepts(),
        }
    }

    /// An opaque type called `name` of `size` bytes aligned to `align`.
    pub fn opaque(name: impl Into<Cow<'static, str>>, size: usize, align: usize) -> Self {
        ParamType {
            name: name.into(),
            size,
            align: align.max(1),
            id: None,
            also: None,
        }
    }

    /// The type's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }
    /// Alignment in bytes.
    pub fn align(&self) -> usize {
        self.align
    }
    /// Whether a value of Rust type `T` may be passed for this parameter.
    pub fn accepts<T: 'static>(&self) -> bool {
        let t = Some(TypeId::of::<T>());
        self.id.is_some() && (self.id == t || self.also == t)
    }
    /// Whether this is an opaque type (bytes only).
    pub fn is_opaque(&self) -> bool {
        self.id.is_none()
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// One declared parameter: a name (for messages and setting by name; may be
/// empty) and a type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The parameter's name.
    pub name: String,
    /// Its type.
    pub ty: ParamType,
}

impl Param {
    /// A parameter `name` of type `ty`.
    pub fn new(name: impl Into<String>, ty: ParamType) -> Self {
        Param {
            name: name.into(),
            ty,
        }
    }
    /// A parameter `name` of Rust type `T`.
    pub fn of<T: ParamRepr>(name: impl Into<String>) -> Self {
        Self::new(name, ParamType::of::<T>())
    }
}

/// Where one parameter sits in the kernel's parameter space, as the driver
/// reports it (`cuFuncGetParamInfo` / `cuKernelGetParamInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParamSlot {
    /// Byte offset.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// The label of parameter `index` in messages: its name, else its index.
pub(crate) fn label(index: usize, name: &str) -> String {
    if name.is_empty() {
        format!("#{index}")
    } else {
        name.to_string()
    }
}

/// Checks declared parameters against the driver's layout: the count, then
/// for each parameter its size and its offset (the C layout the declared
/// sizes and alignments imply must put it where the driver says it is).
pub(crate) fn check_params(
    kernel: &str,
    params: &[Param],
    layout: &[ParamSlot],
) -> Result<(), SignatureError> {
    if layout.len() != params.len() {
        return Err(SignatureError::Count {
            kernel: kernel.to_string(),
            expected: layout.len(),
            declared: params.len(),
        });
    }
    let mut end = 0usize;
    for (index, (p, slot)) in params.iter().zip(layout).enumerate() {
        if p.ty.size != slot.size {
            return Err(SignatureError::Size {
                kernel: kernel.to_string(),
                index,
                expected: slot.size,
                declared: p.ty.size,
                declared_type: p.ty.name.to_string(),
                name: label(index, &p.name),
            });
        }
        let declared = end.next_multiple_of(p.ty.align);
        if declared != slot.offset {
            return Err(SignatureError::Offset {
                kernel: kernel.to_string(),
                index,
                name: label(index, &p.name),
                expected: slot.offset,
                declared,
                declared_type: p.ty.name.to_string(),
                declared_align: p.ty.align,
            });
        }
        end = slot.offset + slot.size;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(v: &[(usize, usize)]) -> Vec<ParamSlot> {
        v.iter()
            .map(|&(offset, size)| ParamSlot { offset, size })
            .collect()
    }

    fn saxpy() -> Vec<Param> {
        vec![
            Param::of::<f32>("a"),
            Param::of::<ConstDevicePtr<f32>>("x"),
            Param::of::<DevicePtr<f32>>("y"),
            Param::of::<u32>("n"),
        ]
    }

    #[test]
    fn a_matching_declaration_passes() {
        // saxpy(float a, const float* x, float* y, unsigned n): the pointer after a float is padded to 8.
        assert_eq!(
            check_params(
                "saxpy",
                &saxpy(),
                &slots(&[(0, 4), (8, 8), (16, 8), (24, 4)])
            ),
            Ok(())
        );
    }

    #[test]
    fn count_size_and_offset_are_named() {
        let e = check_params("saxpy", &saxpy(), &slots(&[(0, 4), (8, 8), (16, 8)])).unwrap_err();
        insta::assert_snapshot!("count", e.to_string());
        let e = check_params(
            "saxpy",
            &saxpy(),
            &slots(&[(0, 4), (8, 8), (16, 8), (24, 8)]),
        )
        .unwrap_err();
        insta::assert_snapshot!("size", e.to_string());
    }

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Loose {
        v: [f32; 4],
    }
    // SAFETY: plain data, C layout.
    unsafe impl ParamRepr for Loose {}

    #[repr(C, align(16))]
    #[derive(Clone, Copy)]
    struct Aligned {
        v: [f32; 4],
    }
    // SAFETY: plain data, C layout with the float4 alignment.
    unsafe impl ParamRepr for Aligned {}

    #[test]
    fn a_struct_with_the_wrong_alignment_is_refused() {
        // k(int n, float4 v): the driver puts the 16-byte-aligned float4 at 16.
        let layout = slots(&[(0, 4), (16, 16)]);
        let ok = [Param::of::<i32>("n"), Param::of::<Aligned>("v")];
        assert_eq!(check_params("k", &ok, &layout), Ok(()));
        let bad = [Param::of::<i32>("n"), Param::of::<Loose>("v")];
        let e = check_params("k", &bad, &layout).unwrap_err();
        assert!(
            matches!(
                e,
                SignatureError::Offset {
                    index: 1,
                    expected: 16,
                    declared: 4,
                    ..
                }
            ),
            "{e}"
        );
        insta::assert_snapshot!("offset", e.to_string());
    }

    #[test]
    fn type_names_lose_their_paths() {
        assert_eq!(
            short_type_name("cuda_api::memory::DevicePtr<f32>"),
            "DevicePtr<f32>"
        );
        assert_eq!(short_type_name("[a::B; 4]"), "[B; 4]");
        assert_eq!(short_type_name("(u32, x::y::Z<a::b::C>)"), "(u32, Z<C>)");
    }

    #[test]
    fn read_only_parameters_accept_writable_pointers_not_the_reverse() {
        let ro = ParamType::of::<ConstDevicePtr<f32>>();
        let rw = ParamType::of::<DevicePtr<f32>>();
        assert!(ro.accepts::<ConstDevicePtr<f32>>() && ro.accepts::<DevicePtr<f32>>());
        assert!(rw.accepts::<DevicePtr<f32>>() && !rw.accepts::<ConstDevicePtr<f32>>());
        assert!(!ro.accepts::<ConstDevicePtr<u32>>());
        let opaque = ParamType::opaque("Foo", 12, 4);
        assert!(opaque.is_opaque() && !opaque.accepts::<[u32; 3]>());
    }
}
