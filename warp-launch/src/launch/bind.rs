//! Arguments ([`Arg`], and [`TypedArg`] for positional launches) and their
//! checks against a kernel's parameters:
//! kind (array, value, struct), dtype, dimensions, device and access mode,
//! with messages that name the kernel, the parameter, what it takes, what
//! was given, and what to do.

use std::sync::Arc;

use crate::abi::{ArrayT, DType, Element, Refusal, Value, WarpStruct, encode};
use crate::array::{AccessMode, Array, TypedArray};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::signature::{KernelParam, ParamKind, StructType};

/// An array a struct value holds: where its `array_t` sits in the struct's
/// bytes, the field's name (`inner.data` inside a nested struct), and the
/// array, which the value keeps alive.
#[derive(Clone, Debug)]
pub(crate) struct HeldArray {
    pub offset: usize,
    pub path: Arc<str>,
    pub array: Array,
}

/// The array fields of `st`, nested structs' included, in field order
/// (a nested struct's where it sits): offset, name (`inner.data`), kind.
pub(crate) fn array_fields(st: &StructType) -> Vec<(usize, String, &ParamKind)> {
    fn walk<'a>(
        st: &'a StructType,
        base: usize,
        prefix: &str,
        out: &mut Vec<(usize, String, &'a ParamKind)>,
    ) {
        for f in &st.fields {
            let path = format!("{prefix}{}", f.name);
            match &f.kind {
                ParamKind::Array { .. } => out.push((base + f.offset, path, &f.kind)),
                ParamKind::Struct(inner) => walk(inner, base + f.offset, &format!("{path}."), out),
                // Values, and kinds this crate does not know (warp-proof's
                // enums are `#[non_exhaustive]`; warp-proof's reader reads
                // only `wp::array_t` fields: an access through another is
                // unproven, `source/held.rs`).
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(st, 0, "", &mut out);
    out
}

/// Whether `st` or a struct nested in it has an array field (without
/// allocating, unlike [`array_fields`]).
fn holds_arrays(st: &StructType) -> bool {
    st.fields.iter().any(|f| match &f.kind {
        ParamKind::Array { .. } => true,
        ParamKind::Struct(inner) => holds_arrays(inner),
        ParamKind::Value(_) => false,
        // A kind this crate does not know: treat it as holding arrays, so
        // the full check runs (and refuses what it cannot check).
        _ => true,
    })
}

/// A struct value for a `wp.struct` parameter: its bytes in the C layout of
/// the struct, the struct's name, and the arrays it holds (kept alive by
/// the value, checked and noted by every launch that passes it).
#[derive(Clone, Debug)]
pub struct StructValue {
    name: Arc<str>,
    bytes: Arc<[u8]>,
    arrays: Arc<[HeldArray]>,
    /// Made by the `unsafe` [`StructValue::from_bytes`]: its caller vouches
    /// for any address in the bytes.
    vouched: bool,
}

impl PartialEq for StructValue {
    /// The same struct name and bytes (an array field's bytes are its
    /// `array_t`: the same addresses, shape and strides).
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.bytes == other.bytes && self.vouched == other.vouched
    }
}

impl Eq for StructValue {}

impl StructValue {
    /// The value of a Rust struct with the Warp struct's layout.
    pub fn of<S: WarpStruct>(value: &S) -> StructValue {
        StructValue {
            name: S::NAME.into(),
            bytes: crate::abi::encode::struct_bytes(value).into(),
            arrays: Arc::new([]),
            vouched: false,
        }
    }

    /// A value of the struct `ty` holding arrays, safely: `bytes` (exactly
    /// `ty.size` of them) give its value fields, and `arrays` its array
    /// fields, one per array field in field order (a nested struct's where
    /// it sits), each of the field's dtype and dimensions (where the struct
    /// declares them). Each array's `array_t` is written over the bytes of
    /// its field, and the value keeps the arrays alive: a launch passing it
    /// checks where each lives (device, context, access mode) as it checks
    /// an array argument, and notes its use, so frees and host reads wait
    /// for the kernel. What typed launchers' generated structs with array
    /// fields make (their `to_value`).
    ///
    /// # Errors
    ///
    /// [`Error::StructArrays`] for bytes of another size, another number
    /// of arrays, or an array of another dtype or dimensions than its
    /// field's.
    pub fn with_arrays(ty: &StructType, bytes: Vec<u8>, arrays: Vec<Array>) -> Result<StructValue> {
        let call = "StructValue::with_arrays";
        let refuse = |field: String, expected: String, given: String| Error::StructArrays {
            call,
            structure: ty.name.clone(),
            field,
            expected,
            given,
        };
        let mut bytes = bytes;
        if bytes.len() != ty.size {
            return Err(refuse(
                "its bytes".into(),
                format!("{} byte(s)", ty.size),
                format!("{} byte(s)", bytes.len()),
            ));
        }
        let fields = array_fields(ty);
        if fields.len() != arrays.len() {
            return Err(refuse(
                "its array fields".into(),
                format!(
                    "{} array(s) ({})",
                    fields.len(),
                    fields
                        .iter()
                        .map(|f| f.1.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                format!("{} array(s)", arrays.len()),
            ));
        }
        let mut held = Vec::with_capacity(arrays.len());
        for ((offset, path, kind), array) in fields.into_iter().zip(arrays) {
            if let ParamKind::Array { dtype, ndim } = kind
                && (!std::ptr::eq(array.dtype(), *dtype)
                    || ndim.is_some_and(|n| usize::from(n) != array.ndim()))
            {
                return Err(refuse(
                    format!("field '{path}'"),
                    kind.describe(),
                    Arg::Array(array).describe(),
                ));
            }
            let t = encode::array_t(&array.abi());
            match bytes.get_mut(offset..offset + t.len()) {
                Some(dst) => dst.copy_from_slice(&t),
                None => {
                    return Err(refuse(
                        format!("field '{path}'"),
                        format!("an array_t at byte {offset}"),
                        format!("{} byte(s)", ty.size),
                    ));
                }
            }
            held.push(HeldArray {
                offset,
                path: path.into(),
                array,
            });
        }
        Ok(StructValue {
            name: ty.name.as_str().into(),
            bytes: bytes.into(),
            arrays: held.into(),
            vouched: false,
        })
    }

    /// A value of struct `name` from its bytes (for structs known only at
    /// run time; [`StructValue::with_arrays`] makes one holding arrays
    /// safely; see [`StructType`] for the layout). The size is checked
    /// against the kernel's struct when it is passed.
    ///
    /// # Safety
    ///
    /// The bytes are handed to the kernel as they are: any device address
    /// inside (an `array_t`'s `data` or `grad`) must address live memory of
    /// the launch's device that holds what the `array_t` says (shape,
    /// strides, dtype), for every launch that receives the value and until
    /// those launches finish, and no one else may use that memory meanwhile
    /// where the kernel writes it; the same holds for each `grad` address
    /// when a [`Tape`](crate::Tape) runs the backward kernel with it.
    pub unsafe fn from_bytes(name: &str, bytes: &[u8]) -> StructValue {
        StructValue {
            name: name.into(),
            bytes: bytes.into(),
            arrays: Arc::new([]),
            vouched: true,
        }
    }

    /// A vouched value (as [`StructValue::from_bytes`] makes) that keeps
    /// `arrays` alive and has launches note their use: the tape's adjoint
    /// of a struct holding arrays (their gradients).
    pub(crate) fn vouched_with(name: &str, bytes: &[u8], arrays: Vec<HeldArray>) -> StructValue {
        StructValue {
            name: name.into(),
            bytes: bytes.into(),
            arrays: arrays.into(),
            vouched: true,
        }
    }

    /// The struct's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The arrays it holds (made by [`StructValue::with_arrays`]).
    pub(crate) fn held(&self) -> &[HeldArray] {
        &self.arrays
    }

    /// Whether it was made from raw bytes ([`StructValue::from_bytes`]):
    /// the arrays its bytes address are not known.
    pub(crate) fn is_vouched(&self) -> bool {
        self.vouched
    }

    /// An owned copy of a borrowed struct value.
    pub(crate) fn from_ref(r: StructRef<'_>) -> StructValue {
        StructValue {
            name: r.name.into(),
            bytes: r.bytes.into(),
            arrays: r.arrays.into(),
            vouched: r.vouched,
        }
    }
}

/// A borrowed `wp.struct` value, as a positional launch takes it: the
/// struct's name and its bytes, made from a [`WarpStruct`] (no copy) or a
/// [`StructValue`] (with the arrays it holds).
#[derive(Clone, Copy, Debug)]
pub struct StructRef<'a> {
    name: &'a str,
    bytes: &'a [u8],
    arrays: &'a [HeldArray],
    vouched: bool,
}

impl<'a> StructRef<'a> {
    /// The value of a Rust struct with the Warp struct's layout, borrowed.
    pub fn of<S: WarpStruct>(value: &'a S) -> StructRef<'a> {
        StructRef {
            name: S::NAME,
            bytes: crate::abi::encode::struct_bytes(value),
            arrays: &[],
            vouched: false,
        }
    }

    /// The struct's name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// Its bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The arrays it holds.
    pub(crate) fn held(&self) -> &'a [HeldArray] {
        self.arrays
    }

    /// Whether its maker vouched for the addresses in its bytes
    /// ([`StructValue::from_bytes`]).
    pub(crate) fn vouched(&self) -> bool {
        self.vouched
    }
}

impl<'a> From<&'a StructValue> for StructRef<'a> {
    fn from(v: &'a StructValue) -> Self {
        StructRef {
            name: v.name(),
            bytes: v.bytes(),
            arrays: &v.arrays,
            vouched: v.vouched,
        }
    }
}

/// Checks the arrays struct value `s` holds against the declared struct
/// `st` of the parameter at `site`: one per array field at its offset, of
/// its dtype and dimensions, each where the launch on `device` can reach
/// it under `mode` (`crate::array::check`, the check of every array
/// argument, naming the parameter `h.data`). A value made by the `unsafe`
/// [`StructValue::from_bytes`] is its caller's promise and checked for
/// nothing more; any other value must hold exactly the struct's arrays
/// (a [`WarpStruct`] value holds none, so it cannot stand for a struct
/// with array fields).
pub(crate) fn check_held(
    site: &Site<'_>,
    st: &StructType,
    s: StructRef<'_>,
    device: Device,
    mode: AccessMode,
) -> Result<()> {
    // A struct without array fields (the common by-value case) holds
    // nothing to check: no allocation on the launch path.
    if s.vouched || (s.arrays.is_empty() && !holds_arrays(st)) {
        return Ok(());
    }
    let fields = array_fields(st);
    let fits = fields.len() == s.arrays.len()
        && fields.iter().zip(s.arrays).all(|((offset, _, kind), h)| {
            *offset == h.offset
                && matches!(kind, ParamKind::Array { dtype, ndim }
                    if std::ptr::eq(h.array.dtype(), *dtype)
                        && ndim.is_none_or(|n| usize::from(n) == h.array.ndim()))
        });
    if !fits {
        return Err(site.error(
            format!(
                "a value of struct '{}' holding {} array(s) ({})",
                st.name,
                fields.len(),
                fields.iter().map(|f| format!("{}: {}", f.1, f.2.describe())).collect::<Vec<_>>().join(", ")
            ),
            format!(
                "a value of struct '{}' holding {} array(s) ({})",
                s.name,
                s.arrays.len(),
                s.arrays.iter().map(|h| format!("{} at byte {}: {} {}-D", h.path, h.offset, h.array.dtype().name, h.array.ndim())).collect::<Vec<_>>().join(", ")
            ),
            "make the value with StructValue::with_arrays (a typed launcher's struct: its to_value) from the struct's own type",
        ));
    }
    for h in s.arrays {
        let name = format!("{}.{}", site.name, h.path);
        crate::array::check(site.kernel, &name, &h.array, device, mode)?;
    }
    Ok(())
}

/// One argument of a launch.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Arg {
    /// An array (any device; the launch checks where it lives).
    Array(Array),
    /// No array (Warp's `None`): the kernel sees a null array.
    Null,
    /// A scalar, vector or matrix by value.
    Value(Value),
    /// A `wp.struct` by value.
    Struct(StructValue),
}

impl Arg {
    /// What the argument is, for messages.
    pub fn describe(&self) -> String {
        match self {
            Arg::Array(a) => format!(
                "an array of {} with {} dimension(s) {:?} on {}",
                a.dtype().name,
                a.ndim(),
                a.shape(),
                a.device()
            ),
            Arg::Null => "None (a null array)".into(),
            Arg::Value(v) => format!("the {} value {}", v.dtype().name, v.show()),
            Arg::Struct(s) => format!("a struct '{}' of {} B", s.name(), s.bytes().len()),
        }
    }

    /// The array, if it is one.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Arg::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The arrays a struct argument holds (none for other arguments).
    pub(crate) fn held(&self) -> &[HeldArray] {
        match self {
            Arg::Struct(s) => s.held(),
            _ => &[],
        }
    }
}

/// Anything that can be passed as a kernel argument.
///
/// # Values and the parameter's dtype
///
/// A value passed for a scalar parameter of another dtype is converted to
/// the parameter's dtype when the launch is checked, by Warp's rule for
/// values known at run time ([`Value::convert`]): an integer to an integer
/// type when it fits, any number to a float type, rounded to nearest
/// (precision may be lost: `0.1f64` becomes the nearest `float32`);
/// infinities and NaN pass as themselves. Refused with
/// [`Error::Argument`](crate::Error::Argument), naming the kernel, the
/// parameter, its dtype and the value: an integer out of the parameter
/// type's range (`300` for `uint8`), a float for an integer parameter, and
/// a finite number the float type cannot hold (`1e40` for `float32`,
/// `70000` for `float16`), which would otherwise become infinity in
/// silence. Vectors, matrices and structs are never converted: pass the
/// parameter's own type.
pub trait IntoArg {
    /// The argument.
    fn into_arg(self) -> Arg;

    /// The argument as a [`LaunchBuilder`](crate::LaunchBuilder) holds it
    /// until it runs: an array passed by reference stays borrowed (no
    /// handle cloned and dropped per launch); anything else is
    /// [`IntoArg::into_arg`]. Implementations outside this crate keep the
    /// default.
    fn into_slot<'a>(self) -> ArgSlot<'a>
    where
        Self: Sized + 'a,
    {
        ArgSlot::Owned(self.into_arg())
    }
}

/// An argument as a [`LaunchBuilder`](crate::LaunchBuilder) holds it: its
/// own, or an array borrowed for as long as the builder lives.
#[derive(Debug)]
#[non_exhaustive]
pub enum ArgSlot<'a> {
    /// An argument the builder owns.
    Owned(Arg),
    /// An array passed by reference.
    Array(&'a Array),
}

impl ArgSlot<'_> {
    /// The owned argument (a borrowed array's handle cloned).
    pub(crate) fn into_owned(self) -> Arg {
        match self {
            ArgSlot::Owned(a) => a,
            ArgSlot::Array(a) => Arg::Array(a.clone()),
        }
    }

    /// The argument, borrowed.
    pub(crate) fn as_typed(&self) -> TypedArg<'_> {
        match self {
            ArgSlot::Array(a) => TypedArg::Array(a),
            ArgSlot::Owned(Arg::Array(a)) => TypedArg::Array(a),
            ArgSlot::Owned(Arg::Null) => TypedArg::Null,
            ArgSlot::Owned(Arg::Value(v)) => TypedArg::Value(v.bytes()),
            ArgSlot::Owned(Arg::Struct(s)) => TypedArg::Struct(s.into()),
        }
    }

    /// The value, if the argument is one.
    pub(crate) fn as_value(&self) -> Option<&Value> {
        match self {
            ArgSlot::Owned(Arg::Value(v)) => Some(v),
            _ => None,
        }
    }
}

/// `slots` emptied, its buffer kept for arguments of any lifetime: an empty
/// vector borrows nothing, so its buffer is taken over as it is, with no
/// allocation (`unborrowed_slots_keep_their_buffer`).
pub(crate) fn unborrowed(mut slots: Vec<ArgSlot<'_>>) -> Vec<ArgSlot<'static>> {
    slots.clear();
    let mut slots = std::mem::ManuallyDrop::new(slots);
    let (ptr, capacity) = (slots.as_mut_ptr(), slots.capacity());
    // SAFETY: the vector is empty, so it holds no borrow; `ArgSlot<'_>` and
    // `ArgSlot<'static>` differ in a lifetime only (one layout); the buffer
    // was allocated by a `Vec` of this element type and capacity, and is
    // given up by `slots`, which is not dropped.
    unsafe { Vec::from_raw_parts(ptr.cast::<ArgSlot<'static>>(), 0, capacity) }
}

impl IntoArg for Arg {
    fn into_arg(self) -> Arg {
        self
    }
}
impl IntoArg for Array {
    fn into_arg(self) -> Arg {
        Arg::Array(self)
    }
}
impl IntoArg for &Array {
    fn into_arg(self) -> Arg {
        Arg::Array(self.clone())
    }

    fn into_slot<'a>(self) -> ArgSlot<'a>
    where
        Self: 'a,
    {
        ArgSlot::Array(self)
    }
}
impl<T: Element, const N: usize> IntoArg for TypedArray<T, N> {
    fn into_arg(self) -> Arg {
        Arg::Array(self.as_array().clone())
    }
}
impl<T: Element, const N: usize> IntoArg for &TypedArray<T, N> {
    fn into_arg(self) -> Arg {
        Arg::Array(self.as_array().clone())
    }

    fn into_slot<'a>(self) -> ArgSlot<'a>
    where
        Self: 'a,
    {
        ArgSlot::Array(self.as_array())
    }
}
impl IntoArg for Option<&Array> {
    fn into_arg(self) -> Arg {
        self.map_or(Arg::Null, |a| Arg::Array(a.clone()))
    }

    fn into_slot<'a>(self) -> ArgSlot<'a>
    where
        Self: 'a,
    {
        self.map_or(ArgSlot::Owned(Arg::Null), ArgSlot::Array)
    }
}
impl IntoArg for Value {
    fn into_arg(self) -> Arg {
        Arg::Value(self)
    }
}
impl IntoArg for StructValue {
    fn into_arg(self) -> Arg {
        Arg::Struct(self)
    }
}
impl<T: Element> IntoArg for T {
    fn into_arg(self) -> Arg {
        Arg::Value(Value::of(self))
    }
}

/// A list of arguments: one [`IntoArg`] value, a tuple of them (up to 16),
/// a `Vec<Arg>`, or `()`.
pub trait IntoArgs {
    /// Appends the arguments to `out`.
    fn push_into(self, out: &mut Vec<Arg>);

    /// Appends the arguments as a [`LaunchBuilder`](crate::LaunchBuilder)
    /// holds them ([`IntoArg::into_slot`]). Implementations outside this
    /// crate keep the default.
    fn push_slots<'a>(self, out: &mut Vec<ArgSlot<'a>>)
    where
        Self: Sized + 'a,
    {
        let mut owned = Vec::new();
        self.push_into(&mut owned);
        out.extend(owned.into_iter().map(ArgSlot::Owned));
    }
}

impl<T: IntoArg> IntoArgs for T {
    fn push_into(self, out: &mut Vec<Arg>) {
        out.push(self.into_arg());
    }

    fn push_slots<'a>(self, out: &mut Vec<ArgSlot<'a>>)
    where
        Self: 'a,
    {
        out.push(self.into_slot());
    }
}

impl IntoArgs for Vec<Arg> {
    fn push_into(self, out: &mut Vec<Arg>) {
        out.extend(self);
    }

    fn push_slots<'a>(self, out: &mut Vec<ArgSlot<'a>>)
    where
        Self: 'a,
    {
        out.extend(self.into_iter().map(ArgSlot::Owned));
    }
}

impl IntoArgs for () {
    fn push_into(self, _out: &mut Vec<Arg>) {}

    fn push_slots<'a>(self, _out: &mut Vec<ArgSlot<'a>>)
    where
        Self: 'a,
    {
    }
}

/// Appends the slot `$make` builds to `$out`, built straight into the
/// vector's buffer when there is room (the tuple's `push_slots` reserves
/// it): the slot is made after its place is known, so it is not built on
/// the stack and copied.
macro_rules! push_in_place {
    ($out:expr, $make:expr) => {
        match $out.spare_capacity_mut().first_mut() {
            Some(room) => {
                room.write($make);
                // SAFETY: the element at `len` was just written.
                unsafe { $out.set_len($out.len() + 1) };
            }
            None => $out.push($make),
        }
    };
}

macro_rules! tuple_args {
    ($($n:ident)+) => {
        impl<$($n: IntoArg),+> IntoArgs for ($($n,)+) {
            #[allow(non_snake_case)]
            fn push_into(self, out: &mut Vec<Arg>) {
                let ($($n,)+) = self;
                $( out.push($n.into_arg()); )+
            }

            #[allow(non_snake_case)]
            fn push_slots<'a>(self, out: &mut Vec<ArgSlot<'a>>)
            where
                Self: 'a,
            {
                let ($($n,)+) = self;
                // Room for all first, then each slot written in place: no
                // slot is built on the stack and copied (its narrow stores
                // read back as wide loads stalled the builder's launch).
                out.reserve([$(stringify!($n)),+].len());
                $( push_in_place!(out, $n.into_slot()); )+
            }
        }
    };
}
tuple_args!(A);
tuple_args!(A B);
tuple_args!(A B C);
tuple_args!(A B C D);
tuple_args!(A B C D E);
tuple_args!(A B C D E F);
tuple_args!(A B C D E F G);
tuple_args!(A B C D E F G H);
tuple_args!(A B C D E F G H I);
tuple_args!(A B C D E F G H I J);
tuple_args!(A B C D E F G H I J K);
tuple_args!(A B C D E F G H I J K L);
tuple_args!(A B C D E F G H I J K L M);
tuple_args!(A B C D E F G H I J K L M N);
tuple_args!(A B C D E F G H I J K L M N O);
tuple_args!(A B C D E F G H I J K L M N O P);

/// The bytes one checked argument puts in the parameter space.
pub(crate) enum Bound<'a> {
    /// A checked array, encoded as `array_t` when written (so the 56 bytes
    /// are built in place, not moved through the check's result).
    Array(&'a Array),
    /// Warp's `None` for an array: a null `array_t`.
    NullArray,
    Bytes(&'a [u8]),
    Value(Value),
}

impl Bound<'_> {
    pub(crate) fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Bound::Array(a) => f(&crate::abi::encode::array_t(&a.abi())),
            Bound::NullArray => f(&crate::abi::encode::array_t(&ArrayT::default())),
            Bound::Bytes(b) => f(b),
            Bound::Value(v) => f(v.bytes()),
        }
    }
}

/// A kernel's name and forward parameters, as a launch looks its
/// parameters up: by index (the adjoints, `adj_<name>`, after the forward
/// ones) or by name. What the CPU device needs of a kernel to name its
/// parameters, without the kernel itself.
#[derive(Clone, Copy)]
pub(crate) struct Params<'a> {
    pub name: &'a str,
    pub params: &'a [KernelParam],
}

impl<'a> Params<'a> {
    /// Index of parameter `name` (`adj_<name>` for an adjoint).
    pub(crate) fn index(&self, name: &str) -> Result<usize> {
        let n = self.params.len();
        if let Some(i) = self.params.iter().position(|p| p.name == name) {
            return Ok(i);
        }
        if let Some(base) = name.strip_prefix("adj_")
            && let Some(i) = self.params.iter().position(|p| p.name == base)
        {
            return Ok(n + i);
        }
        Err(self.no_such_param(format!("'{name}'")))
    }

    /// The error of a parameter `given` that the kernel does not have.
    pub(crate) fn no_such_param(&self, given: String) -> Error {
        Error::NoSuchParam {
            kernel: self.name.to_string(),
            given,
            known: self.params.iter().map(|p| p.name.clone()).collect(),
        }
    }

    /// Parameter `index` of a launch (adjoints after the forward ones):
    /// its name and kind.
    pub(crate) fn at(&self, index: usize) -> Option<(std::borrow::Cow<'a, str>, &'a ParamKind)> {
        let n = self.params.len();
        if index < n {
            let p = &self.params[index];
            Some((p.name.as_str().into(), &p.kind))
        } else if index < 2 * n {
            let p = &self.params[index - n];
            Some((format!("adj_{}", p.name).into(), &p.kind))
        } else {
            None
        }
    }
}

/// Where a parameter is, for messages.
pub(crate) struct Site<'a> {
    pub kernel: &'a str,
    pub index: usize,
    pub name: &'a str,
}

impl Site<'_> {
    pub(crate) fn error(&self, expected: String, given: String, hint: impl Into<String>) -> Error {
        Error::Argument(Box::new(crate::error::ArgumentError {
            kernel: self.kernel.to_string(),
            index: self.index,
            param: self.name.to_string(),
            expected,
            given,
            hint: hint.into(),
        }))
    }
}

/// Checks `arg` against a parameter of kind `kind` for a launch on
/// `device` under `mode`, and returns the bytes it passes.
pub(crate) fn check<'a>(
    site: &Site<'_>,
    kind: &ParamKind,
    arg: &'a Arg,
    device: Device,
    mode: AccessMode,
) -> Result<Bound<'a>> {
    match (kind, arg) {
        (ParamKind::Array { dtype, ndim }, Arg::Array(a)) => {
            if !std::ptr::eq(a.dtype(), *dtype) {
                return Err(site.error(
                    kind.describe(),
                    arg.describe(),
                    format!(
                        "pass an array of {dtype} (Array::zeros_dtype(device, DType::{}, shape) or a TypedArray of its Rust type)",
                        dtype.name.to_uppercase()
                    ),
                ));
            }
            if let Some(n) = ndim
                && a.ndim() != *n as usize
            {
                return Err(site.error(
                    kind.describe(),
                    arg.describe(),
                    format!("pass an array with {n} dimension(s) (reshape or slice it)"),
                ));
            }
            crate::array::check(site.kernel, site.name, a, device, mode)?;
            Ok(Bound::Array(a))
        }
        (ParamKind::Array { .. }, Arg::Null) => Ok(Bound::NullArray),
        // The dtype the kernel takes: its bytes as they are.
        (ParamKind::Value(dtype), Arg::Value(v)) if std::ptr::eq(v.dtype(), *dtype) => {
            Ok(Bound::Bytes(v.bytes()))
        }
        (ParamKind::Value(dtype), Arg::Value(v)) => match v.try_convert(dtype) {
            Ok(c) => Ok(Bound::Value(c)),
            Err(why) => {
                Err(site.error(kind.describe(), arg.describe(), conversion_hint(dtype, why)))
            }
        },
        (ParamKind::Struct(st), Arg::Struct(s)) => {
            if (s.name() != st.name && s.name() != st.key()) || s.bytes().len() != st.size {
                return Err(site.error(
                    kind.describe(),
                    arg.describe(),
                    format!(
                        "pass a value of struct '{}' ({} B): StructValue::of(&v) for a #[repr(C)] type implementing WarpStruct with that layout",
                        st.name, st.size
                    ),
                ));
            }
            check_held(site, st, s.into(), device, mode)?;
            Ok(Bound::Bytes(s.bytes()))
        }
        (_, _) => Err(site.error(kind.describe(), arg.describe(), kind_hint(kind))),
    }
}

/// What to do about a value that does not convert to `dtype` (see
/// [`Value::convert`] for the rule).
pub(crate) fn conversion_hint(dtype: &DType, why: Refusal) -> String {
    match why {
        Refusal::Kind => format!(
            "pass a {dtype} value (integers convert to integer types when they fit, numbers to float types, as Warp converts Python numbers)"
        ),
        Refusal::Range { lo, hi } => format!(
            "{dtype} holds integers from {lo} to {hi}; pass a value in that range, or give the kernel a wider integer parameter"
        ),
        Refusal::Overflow { value, max } => format!(
            "{value:e} is finite but beyond the largest finite {dtype} ({max:e}), so it would become infinity; pass a value within -{max:e}..={max:e} (infinity and NaN pass as themselves), or give the kernel a wider float parameter (float64)"
        ),
    }
}

pub(crate) fn kind_hint(kind: &ParamKind) -> String {
    match kind {
        ParamKind::Array { dtype, .. } => {
            format!("pass an Array of {dtype}, or None for a null array")
        }
        ParamKind::Value(d) => format!("pass a {d} value, not an array or struct"),
        ParamKind::Struct(st) => describe_struct_hint(st),
        // A kind this crate does not know (warp-proof's enums are `#[non_exhaustive]`).
        other => format!("pass {}", other.describe()),
    }
}

fn describe_struct_hint(st: &StructType) -> String {
    format!(
        "pass a StructValue of '{}' (fields: {})",
        st.name,
        st.fields
            .iter()
            .map(|f| format!("{}: {}", f.name, f.kind.describe()))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// One positional argument of [`Kernel::launch_args`](crate::Kernel::launch_args) and
/// [`Kernel::record_args`](crate::Kernel::record_args): borrowed, so passing it copies nothing.
#[derive(Clone, Copy, Debug)]
pub enum TypedArg<'a> {
    /// A forward or adjoint array argument (any device; the launch checks
    /// where it lives).
    Array(&'a Array),
    /// No array (Warp's `None`): the kernel sees a null `array_t`. What an
    /// adjoint launch passes for the adjoint of an input that needs no
    /// gradient: Warp's backward code then adds into the input's own
    /// gradient if it has one, else nowhere.
    Null,
    /// A scalar, vector or matrix: its little-endian bytes, exactly the
    /// parameter's dtype size ([`TypedArg::value`] makes them from a Rust
    /// value).
    Value(&'a [u8]),
    /// A `wp.struct` by value, borrowed ([`TypedArg::of_struct`], or
    /// from a [`StructValue`]).
    Struct(StructRef<'a>),
}

impl<'a> TypedArg<'a> {
    /// The bytes of `v` (an [`Element`]: `f32`, `[f32; 3]`, ...) as a
    /// value argument.
    pub fn value<T: Element>(v: &'a T) -> TypedArg<'a> {
        TypedArg::Value(encode::element_bytes(std::slice::from_ref(v)))
    }

    /// A Rust struct with a Warp struct's layout ([`WarpStruct`]) as a
    /// struct argument, borrowed: nothing is copied.
    pub fn of_struct<S: WarpStruct>(v: &'a S) -> TypedArg<'a> {
        TypedArg::Struct(StructRef::of(v))
    }
}

impl<'a, T: Element, const N: usize> From<Option<&'a TypedArray<T, N>>> for TypedArg<'a> {
    /// The array, or [`TypedArg::Null`] for `None`.
    fn from(a: Option<&'a TypedArray<T, N>>) -> Self {
        a.map_or(TypedArg::Null, |a| TypedArg::Array(a.as_array()))
    }
}

impl<'a> From<&'a Array> for TypedArg<'a> {
    fn from(a: &'a Array) -> Self {
        TypedArg::Array(a)
    }
}

impl<'a, T: Element, const N: usize> From<&'a TypedArray<T, N>> for TypedArg<'a> {
    fn from(a: &'a TypedArray<T, N>) -> Self {
        TypedArg::Array(a.as_array())
    }
}

impl<'a> From<&'a StructValue> for TypedArg<'a> {
    fn from(s: &'a StructValue) -> Self {
        TypedArg::Struct(s.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{LaunchBounds1, LaunchBounds2, LaunchBounds3, LaunchBounds4};

    /// A builder's emptied argument vector is kept as the kernel's spare
    /// without a new allocation: the same buffer, the same capacity.
    #[test]
    fn unborrowed_slots_keep_their_buffer() {
        let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0], &[2]).unwrap();
        let mut slots: Vec<ArgSlot<'_>> = Vec::with_capacity(8);
        (2.0f32, &x, None::<&Array>).push_slots(&mut slots);
        let (ptr, cap) = (slots.as_ptr() as usize, slots.capacity());
        let kept = unborrowed(slots);
        assert_eq!((kept.as_ptr() as usize, kept.capacity()), (ptr, cap));
        assert!(kept.is_empty());
    }

    /// Arrays passed by reference stay borrowed in a builder's slots (no
    /// handle cloned); owned ones, values and `None` are owned, and every
    /// slot reads as the argument `push_into` would have made.
    #[test]
    fn slots_borrow_referenced_arrays_and_own_the_rest() {
        let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0], &[2]).unwrap();
        let t = crate::TypedArray::<f32, 1>::zeros(Device::Cpu, [3]).unwrap();
        let mut slots = Vec::new();
        (2.0f32, &x, &t, None::<&Array>, x.clone()).push_slots(&mut slots);
        assert!(matches!(slots[1], ArgSlot::Array(a) if std::ptr::eq(a, &x)));
        assert!(matches!(slots[2], ArgSlot::Array(a) if std::ptr::eq(a, t.as_array())));
        assert!(matches!(slots[3], ArgSlot::Owned(Arg::Null)));
        assert!(matches!(slots[4], ArgSlot::Owned(Arg::Array(_))));
        assert_eq!(
            slots[0].as_value().map(|v| v.bytes().to_vec()),
            Some(2.0f32.to_le_bytes().to_vec())
        );
        let mut owned = Vec::new();
        (2.0f32, &x, &t, None::<&Array>, x.clone()).push_into(&mut owned);
        for (slot, arg) in slots.into_iter().zip(owned) {
            assert_eq!(slot.into_owned().describe(), arg.describe());
        }
        // A list built elsewhere (`Vec<Arg>`) is owned whole.
        let mut from_vec = Vec::new();
        vec![Arg::Null, (&x).into_arg()].push_slots(&mut from_vec);
        assert!(from_vec.iter().all(|s| matches!(s, ArgSlot::Owned(_))));
    }

    /// The arrays a struct value holds are checked where the launch runs,
    /// as array arguments are (`crate::array::check`, here: host memory for
    /// a CUDA launch, refused before any driver call), named
    /// `<param>.<field>`; the value writes their `array_t`s and keeps them.
    #[test]
    fn a_struct_held_array_is_checked_for_the_launch_device() {
        let st = Arc::new(StructType::new(
            "Holder_1a66b4b0",
            vec![
                (
                    "data".into(),
                    ParamKind::Array {
                        dtype: DType::FLOAT32,
                        ndim: None,
                    },
                ),
                ("scale".into(), ParamKind::Value(DType::FLOAT32)),
            ],
        ));
        let data = Array::from_slice(Device::Cpu, &[1.0f32, 2.0], &[2]).unwrap();
        let v = StructValue::with_arrays(&st, vec![0; st.size], vec![data.clone()]).unwrap();
        assert_eq!(&v.bytes()[..56], &encode::array_t(&data.abi())[..]);
        assert_eq!(v.held().len(), 1);
        let site = Site {
            kernel: "through_struct",
            index: 0,
            name: "h",
        };
        let kind = ParamKind::Struct(st.clone());
        let arg = Arg::Struct(v);
        for mode in [AccessMode::Relaxed, AccessMode::Checked, AccessMode::Strict] {
            let e = check(&site, &kind, &arg, Device::Cuda(0), mode)
                .err()
                .expect("a host array in a struct for a CUDA launch is refused");
            assert!(
                matches!(&e, Error::Access(a) if a.param == "h.data" && a.kernel == "through_struct"),
                "{e}"
            );
        }
        assert!(check(&site, &kind, &arg, Device::Cpu, AccessMode::Checked).is_ok());
        // Refused when made: an array of another dtype, or none.
        let ints = Array::zeros::<i32>(Device::Cpu, &[2]).unwrap();
        for arrays in [vec![ints], vec![]] {
            let e = StructValue::with_arrays(&st, vec![0; st.size], arrays).unwrap_err();
            assert!(matches!(e, Error::StructArrays { .. }), "{e}");
        }
        // A value without the struct's arrays (a WarpStruct value, or one of
        // a look-alike type) is refused at the launch.
        let bare = StructValue {
            name: st.name.as_str().into(),
            bytes: vec![0xffu8; st.size].into(),
            arrays: Arc::new([]),
            vouched: false,
        };
        let e = check(
            &site,
            &kind,
            &Arg::Struct(bare),
            Device::Cpu,
            AccessMode::Relaxed,
        )
        .err()
        .expect("refused");
        assert!(matches!(&e, Error::Argument(a) if a.param == "h"), "{e}");
    }

    /// The ABI types have no implicit padding: every byte is a field (the
    /// C layout's gaps are explicit `_pad` fields), so a struct embedding
    /// them can be read byte by byte.
    #[test]
    fn abi_types_have_no_implicit_padding() {
        let a = ArrayT::default();
        let fields = size_of_val(&a.data)
            + size_of_val(&a.grad)
            + size_of_val(&a.shape)
            + size_of_val(&a.strides)
            + size_of_val(&a.ndim)
            + size_of_val(&a.flags)
            + size_of_val(&a._pad0);
        assert_eq!(fields, size_of::<ArrayT>());
        macro_rules! bounds {
            ($($t:ty),*) => {$({
                let b = <$t>::default();
                let pads = size_of::<$t>() - size_of_val(&b.shape) - size_of_val(&b.size) - size_of_val(&b.coord_mult);
                assert_eq!(pads, 0, "{}", stringify!($t));
            })*};
        }
        bounds!(LaunchBounds2, LaunchBounds4);
        assert_eq!(size_of_val(&LaunchBounds1::default()._pad0), 4);
        assert_eq!(size_of_val(&LaunchBounds3::default()._pad0), 4);
    }
}
