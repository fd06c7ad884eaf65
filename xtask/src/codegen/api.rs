//! Renders `cuda-api/src/generated/driver.rs`: the thin layer, one snake_case
//! function per driver function. A classification pass labels each parameter
//! (value, out-value, array with length, caller-sized output, in-out
//! reference, C string, raw) and the labels drive the signature: out-values
//! become the `Ok` value, a pointer with its length becomes a slice,
//! `CUresult` becomes `CudaResult`.
//!
//! The safety rule: a wrapper is safe only when the spec marks the function
//! `safe` *and* no argument can make the driver touch memory or an object
//! that safe Rust cannot vouch for. Raw handles (`CUstream`, `CUgraph`, …),
//! device addresses and other integer handles (`CUdeviceptr`, `CUtexObject`,
//! …), callbacks, raw pointers, and references or slices of records that hold
//! any of those all make the wrapper `unsafe` ([`unchecked_params`]).

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Literal, TokenStream};
use quote::{ToTokens, format_ident, quote};

use super::{docs, safety_mark};
use crate::Result;
use crate::ctype::CType;
use crate::names::{self, snake};
use crate::spec::model::*;

/// Which API a thin layer wraps: the driver (`cuda-api/src/generated/driver.rs`
/// over `cuda_sys`) or NVRTC (`nvrtc.rs` over `cuda_sys::nvrtc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `cuda.h`.
    Driver,
    /// `nvrtc.h`.
    Nvrtc,
}

impl Target {
    /// The raw module's path.
    fn sys(self) -> &'static str {
        match self {
            Target::Driver => "cuda_sys",
            Target::Nvrtc => "cuda_sys::nvrtc",
        }
    }
}

/// How one parameter appears in the safe signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Passed through by value (scalars, enums, handles, callbacks).
    Value,
    /// Written by the driver; returned in `Ok` (as `bool` when `boolean`).
    OutValue { boolean: bool },
    /// Exactly `n` elements written by the driver; returned as `[T; n]`.
    OutArray { n: u32 },
    /// A `char *` buffer whose size is passed in `len`; returned as `String`.
    OutString { len: String, capacity: u32 },
    /// The size of an [`Shape::OutString`] buffer; computed, not passed.
    StringLen { capacity: u32 },
    /// `&mut T` (read and written).
    InOutRef,
    /// `&T` to a plain value (a const pointer to one struct).
    InRef { optional: bool },
    /// `&CStr` for a `const char *` input.
    CStr { optional: bool },
    /// A slice whose length is passed in parameter `len`.
    Slice {
        len: String,
        mutable: bool,
        optional: bool,
    },
    /// The element count of slices; computed from them (each checked), not passed.
    LenOf(Vec<String>),
    /// A caller-sized output array whose capacity goes in (and whose filled
    /// count comes back) through the in-out count `len`.
    Filled { len: String, optional: bool },
    /// The in-out count of [`Shape::Filled`] arrays: computed from the slices,
    /// and what the driver writes back is returned.
    FilledCount(Vec<String>),
    /// A raw pointer, passed through (makes the wrapper `unsafe`).
    Raw,
}

/// Integer typedefs that are really handles or device addresses: a made-up
/// value makes the driver touch memory or an object nobody vouched for.
pub const INTEGER_HANDLES: &[&str] = &[
    "CUdeviceptr",
    "CUdeviceptr_v2",
    "CUtexObject",
    "CUtexObject_v1",
    "CUsurfObject",
    "CUsurfObject_v1",
    "CUmemGenericAllocationHandle",
    "CUmemGenericAllocationHandle_v1",
    "CUgraphConditionalHandle",
];

/// Why a parameter's value cannot be vouched for by safe Rust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unchecked {
    /// An opaque driver handle (`CUstream`).
    Handle(String),
    /// A device address or integer handle (`CUdeviceptr`, `CUtexObject`).
    IntegerHandle(String),
    /// A function pointer.
    Callback(String),
    /// A raw pointer.
    Pointer,
    /// A record (by reference or in a slice) with a field of the kinds above.
    Record(String),
}

/// What the generator knows about the spec's types, for the safety rule.
pub struct TypeInfo {
    handles: BTreeSet<String>,
    callbacks: BTreeSet<String>,
    typedefs: BTreeMap<String, String>,
    records: BTreeMap<String, Vec<String>>,
}

impl TypeInfo {
    /// Collects handles, callbacks, typedefs and record fields.
    pub fn new(specs: &Specs) -> TypeInfo {
        let mut records = BTreeMap::new();
        for r in specs.records() {
            let fields: Vec<String> = r.fields.iter().map(|f| f.ty.value.clone()).collect();
            records.insert(r.name.value.clone(), fields.clone());
            if let Some(c) = &r.c_name {
                records.insert(c.clone(), fields);
            }
        }
        TypeInfo {
            handles: specs.handles().map(|h| h.name.value.clone()).collect(),
            callbacks: specs.callbacks().map(|c| c.name.value.clone()).collect(),
            typedefs: specs
                .typedefs()
                .map(|t| (t.name.value.clone(), t.ty.value.clone()))
                .collect(),
            records,
        }
    }

    /// Why a value of C type `t` is unchecked, or `None` for plain data.
    pub fn unchecked(&self, t: &CType) -> Option<Unchecked> {
        self.unchecked_depth(t, 0)
    }

    fn unchecked_depth(&self, t: &CType, depth: usize) -> Option<Unchecked> {
        if t.is_pointer() {
            return Some(Unchecked::Pointer);
        }
        let mut name = t.base.clone();
        for _ in 0..16 {
            if self.handles.contains(&name) {
                return Some(Unchecked::Handle(name));
            }
            if INTEGER_HANDLES.contains(&name.as_str()) {
                return Some(Unchecked::IntegerHandle(name));
            }
            if self.callbacks.contains(&name) {
                return Some(Unchecked::Callback(name));
            }
            if let Some(fields) = self.records.get(&name) {
                if depth > 8 {
                    return None;
                }
                let bad = fields.iter().any(|f| {
                    CType::parse(f)
                        .map(|ft| self.unchecked_depth(&ft, depth + 1).is_some())
                        .unwrap_or(true)
                });
                return bad.then(|| Unchecked::Record(t.base.clone()));
            }
            match self.typedefs.get(&name) {
                Some(next) => match CType::parse(next) {
                    Ok(nt) if nt.is_pointer() => return Some(Unchecked::Pointer),
                    Ok(nt) => name = nt.base,
                    Err(_) => return Some(Unchecked::Pointer),
                },
                None => return None,
            }
        }
        None
    }
}

fn is_plain(t: &CType) -> bool {
    t.ptrs.len() == 1 && t.dims.is_empty() && t.base != "void" && t.base != "char"
}

/// The thin layer's snake_case name of a parameter: the spec's `rust_name`,
/// else `heck`'s snake case, keywords escaped (`hStream` → `h_stream`).
pub fn param_name(p: &Param) -> String {
    names::param_name(&p.name, p.rust_name.as_deref())
}

/// The thin layer's name of a function: the spec's `rust_name`, else
/// `heck`'s snake case without the `cu` prefix.
pub fn fn_name(f: &Function) -> String {
    names::fn_name(&f.name.value, f.rust_name.as_deref())
}

/// Labels every parameter of `f`.
pub fn classify(f: &Function) -> Vec<Shape> {
    let types: Vec<Option<CType>> = f
        .params
        .iter()
        .map(|p| CType::parse(&p.ty.value).ok())
        .collect();
    let index: BTreeMap<&str, usize> = f
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();
    let mut shapes = vec![Shape::Value; f.params.len()];
    // Arrays with their length. A length passed by value must be an `in`
    // integer; a length passed by pointer is an in-out count of a
    // caller-sized output.
    let mut lens: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut filled: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (i, p) in f.params.iter().enumerate() {
        let (Some(len), Some(t)) = (&p.len, &types[i]) else {
            continue;
        };
        let Some(&li) = index.get(len.value.as_str()) else {
            continue;
        };
        let Some(lt) = types[li].as_ref() else {
            continue;
        };
        let elem_ok = t.is_pointer() && !(t.ptrs.len() == 1 && t.base == "void");
        if !elem_ok {
            continue;
        }
        let by_value =
            !lt.is_pointer() && is_integer(&lt.base) && f.params[li].role.value == Role::In;
        let by_pointer = lt.ptrs.len() == 1
            && is_integer(&lt.base)
            && !lt.pointee_is_const()
            && f.params[li].role.value == Role::Inout
            && p.role.value == Role::Out;
        if by_value {
            if p.role.value == Role::Out && t.ptrs.len() == 1 && t.base == "char" {
                let capacity = p.fixed.unwrap_or(256);
                shapes[i] = Shape::OutString {
                    len: len.value.clone(),
                    capacity,
                };
                shapes[li] = Shape::StringLen { capacity };
                continue;
            }
            lens.entry(li).or_default().push(p.name.clone());
            shapes[i] = Shape::Slice {
                len: len.value.clone(),
                mutable: p.role.value != Role::In,
                optional: p.optional,
            };
        } else if by_pointer {
            filled.entry(li).or_default().push(p.name.clone());
            shapes[i] = Shape::Filled {
                len: len.value.clone(),
                optional: p.optional,
            };
        }
    }
    for (li, users) in lens {
        shapes[li] = Shape::LenOf(users);
    }
    for (li, users) in filled {
        shapes[li] = Shape::FilledCount(users);
    }
    for (i, p) in f.params.iter().enumerate() {
        if shapes[i] != Shape::Value {
            continue;
        }
        let Some(t) = &types[i] else {
            shapes[i] = Shape::Raw;
            continue;
        };
        if !t.is_pointer() {
            continue;
        }
        // An array whose length could not be used, or whose count no
        // parameter holds (`array`), stays a raw pointer: it is never a
        // single value.
        if p.len.is_some() || p.array {
            shapes[i] = Shape::Raw;
            continue;
        }
        shapes[i] = match p.role.value {
            Role::Out if p.fixed.is_some() && t.ptrs.len() == 1 && !t.pointee_is_const() => {
                Shape::OutArray {
                    n: p.fixed.unwrap_or(1),
                }
            }
            Role::Out if is_plain(t) && !t.pointee_is_const() => {
                Shape::OutValue { boolean: p.boolean }
            }
            Role::Inout if is_plain(t) && !t.pointee_is_const() && !p.optional => Shape::InOutRef,
            Role::In if t.ptrs.len() == 1 && t.base == "char" && t.base_const => Shape::CStr {
                optional: p.optional,
            },
            Role::In if is_plain(t) && t.pointee_is_const() => Shape::InRef {
                optional: p.optional,
            },
            _ => Shape::Raw,
        };
    }
    shapes
}

fn is_integer(base: &str) -> bool {
    matches!(
        base,
        "int"
            | "unsigned int"
            | "short"
            | "unsigned short"
            | "long"
            | "unsigned long"
            | "long long"
            | "unsigned long long"
            | "size_t"
            | "int32_t"
            | "uint32_t"
            | "int64_t"
            | "uint64_t"
            | "cuuint32_t"
            | "cuuint64_t"
    )
}

/// The parameters of `f` whose values safe Rust cannot vouch for, with why.
/// Out-values are never unchecked (the driver writes into our local), nor
/// are lengths, C strings or plain data by reference.
pub fn unchecked_params<'f>(
    f: &'f Function,
    shapes: &[Shape],
    types: &TypeInfo,
) -> Vec<(&'f Param, Unchecked)> {
    let mut out = Vec::new();
    for (p, shape) in f.params.iter().zip(shapes) {
        let Ok(t) = CType::parse(&p.ty.value) else {
            out.push((p, Unchecked::Pointer));
            continue;
        };
        let why = match shape {
            Shape::Raw => Some(types.unchecked(&t).unwrap_or(Unchecked::Pointer)),
            Shape::Value => types.unchecked(&t),
            Shape::InRef { .. } | Shape::InOutRef => t.pointee().and_then(|e| types.unchecked(&e)),
            Shape::Slice { mutable, .. } => {
                // An output slice of handles is fine (the driver writes them);
                // an input one hands the driver values nobody vouched for.
                let elem = t.pointee();
                match (mutable, p.role.value, elem) {
                    // Pointers in an output array are still addresses the
                    // driver writes through (`cuPointerGetAttributes`' data).
                    (true, Role::Out, Some(e)) if e.is_pointer() => Some(Unchecked::Pointer),
                    (true, Role::Out, _) => None,
                    (_, _, e) => e.and_then(|e| types.unchecked(&e)),
                }
            }
            Shape::OutValue { .. }
            | Shape::OutArray { .. }
            | Shape::OutString { .. }
            | Shape::StringLen { .. }
            | Shape::CStr { .. }
            | Shape::LenOf(_)
            | Shape::Filled { .. }
            | Shape::FilledCount(_) => None,
        };
        if let Some(why) = why {
            out.push((p, why));
        }
    }
    out
}

/// Whether the wrapper for `f` is a safe `fn`: the spec marks it `safe` and
/// no parameter is unchecked.
pub fn is_safe(f: &Function, shapes: &[Shape], types: &TypeInfo) -> bool {
    f.safety == Safety::Safe && unchecked_params(f, shapes, types).is_empty()
}

fn rust_ty(c: &str) -> Result<TokenStream> {
    let t = CType::parse(c)?;
    let s = t.to_rust(&|n| n.to_string());
    Ok(syn::parse_str::<syn::Type>(&s)?.to_token_stream())
}

fn pointee_ty(c: &str) -> Result<TokenStream> {
    let t = CType::parse(c)?.pointee().ok_or("not a pointer")?;
    rust_ty(&t.to_string())
}

/// Counts for the README: (functions, safe wrappers, unsafe wrappers).
pub fn coverage(specs: &Specs) -> (usize, usize, usize) {
    let types = TypeInfo::new(specs);
    let mut safe = 0;
    let mut total = 0;
    for (_, _, f) in specs.functions() {
        total += 1;
        if is_safe(f, &classify(f), &types) {
            safe += 1;
        }
    }
    (total, safe, total - safe)
}

/// `generated/driver.rs`.
pub fn driver(specs: &Specs) -> Result<TokenStream> {
    let types = TypeInfo::new(specs);
    let mut all: Vec<(&GroupFile, &Function)> = specs.functions().map(|(_, g, f)| (g, f)).collect();
    all.sort_by_key(|a| fn_name(a.1));
    let mut fns = Vec::new();
    for (g, f) in all {
        fns.push(wrapper(g, f, &types, Target::Driver)?);
    }
    let (total, safe, unsafe_) = coverage(specs);
    let doc = format!(
        "The thin layer: one function per driver function ({total} in all: {safe} safe, {unsafe_} `unsafe`), \
         named in snake_case after the C name (which rustdoc search also finds: each carries it as a `doc(alias)`), \
         with snake_case parameters.\n\n\
         A wrapper is safe only when no argument can make the driver touch memory or an object that safe Rust \
         cannot vouch for: plain values, references and length-checked slices of plain data, and `&CStr`. A raw \
         handle (`CUstream`, `CUgraph`, …), a device address or other integer handle, a callback or a raw \
         pointer makes it `unsafe`, with a `# Safety` section naming what the caller promises; the owned types of \
         this crate are the safe way to use handles.\n\n\
         Out-parameters are returned in `Ok`, a pointer with its count is a slice (several slices sharing one \
         count are each checked against it), an optional array is an `Option` (`None` passes null), a \
         caller-sized output fills a `&mut` slice and returns the count, and a failing `CUresult` is an \
         [`CudaError`](crate::CudaError) naming the call."
    );
    let doc = docs::inner_attrs(&doc);
    Ok(quote! {
        #doc
        use cuda_sys::*;
        use crate::error::{check, shared_len, CudaResult};
        #(#fns)*
    })
}

/// `generated/nvrtc.rs`: the thin layer over `cuda_sys::nvrtc`, by the same
/// classification and safety rule as the driver's. Its wording says NVRTC
/// where the driver's says the driver.
pub fn nvrtc(specs: &Specs) -> Result<TokenStream> {
    let types = TypeInfo::new(specs);
    let mut all: Vec<(&GroupFile, &Function)> = specs.functions().map(|(_, g, f)| (g, f)).collect();
    all.sort_by_key(|a| fn_name(a.1));
    let mut fns = Vec::new();
    for (g, f) in all {
        fns.push(wrapper(g, f, &types, Target::Nvrtc)?);
    }
    let (total, safe, unsafe_) = coverage(specs);
    let doc = format!(
        "The thin layer over NVRTC: one function per NVRTC function ({total} in all: {safe} safe, {unsafe_} `unsafe`), \
         named in snake_case after the C name (each carries it as a `doc(alias)`), by the same rules as \
         [`driver`](crate::driver): a wrapper is safe only when no argument can make NVRTC touch memory or an \
         object that safe Rust cannot vouch for; a program handle (`nvrtcProgram`), a callback or a raw pointer \
         makes it `unsafe`. Out-parameters are returned in `Ok`, a pointer with its count is a slice, and a failing \
         `nvrtcResult` is a [`CudaError::Nvrtc`](crate::CudaError::Nvrtc) naming the call; no NVRTC, or one older \
         than the function, is [`CudaError::NvrtcUnavailable`](crate::CudaError::NvrtcUnavailable).\n\n\
         NVIDIA reference: <{}>.",
        super::nvrtc::NVRTC_DOCS
    );
    let doc = docs::inner_attrs(&doc);
    let tokens = quote! {
        #doc
        use cuda_sys::nvrtc::*;
        use crate::error::{check_nvrtc, shared_len, CudaResult};
        #(#fns)*
    };
    // The driver's wording, said of NVRTC.
    let text = tokens
        .to_string()
        .replace("a driver thread", "an NVRTC thread")
        .replace("obtained from the driver", "obtained from NVRTC")
        .replace("before the driver is called", "before NVRTC is called")
        .replace("the driver", "NVRTC");
    Ok(syn::parse_str::<syn::File>(&text)
        .map_err(|e| format!("the NVRTC thin layer does not parse: {e}"))?
        .into_token_stream())
}

/// The sentence-level summary and the rest of a spec summary: the summary is
/// the first sentence (up to `. ` or `; `), the rest one list item per sentence.
pub fn split_summary(text: &str) -> (String, Vec<String>) {
    let text = text.trim();
    let mut parts = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut in_code = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'`' {
            in_code = !in_code;
        }
        if !in_code && (c == b'.' || c == b';') && bytes.get(i + 1) == Some(&b' ') {
            // Not after an abbreviation such as `e.g.` / `i.e.`.
            let before = &text[start..i];
            let abbrev =
                before.ends_with("e.g") || before.ends_with("i.e") || before.ends_with("etc");
            if !abbrev {
                parts.push(text[start..i].trim().to_string());
                start = i + 2;
            }
        }
        i += 1;
    }
    let tail = text[start..].trim().trim_end_matches('.').to_string();
    if !tail.is_empty() {
        parts.push(tail);
    }
    let mut it = parts.into_iter().map(|s| {
        let mut c = s.chars();
        match c.next() {
            Some(f) => format!("{}{}.", f.to_uppercase(), c.as_str()),
            None => s,
        }
    });
    let first = it.next().unwrap_or_default();
    (first, it.collect())
}

/// The words a `# Safety` section uses for a handle type's liveness.
fn handle_phrase(ty: &str) -> String {
    let what = match ty {
        "CUcontext" => "a context that has not been destroyed",
        "CUstream" => {
            "a stream of a live context that has not been destroyed, or null (or \
             `CU_STREAM_LEGACY` / `CU_STREAM_PER_THREAD`) for a default stream"
        }
        "CUevent" => "an event that has not been destroyed",
        "CUmodule" => "a module that is still loaded",
        "CUfunction" => "a function of a module that is still loaded",
        "CUlibrary" => "a library that is still loaded",
        "CUkernel" => "a kernel of a library that is still loaded",
        "CUgraph" => "a graph that has not been destroyed",
        "CUgraphExec" => "an executable graph that has not been destroyed",
        "CUgraphNode" => "a node of a graph that has not been destroyed",
        "CUarray" | "CUmipmappedArray" => "an array that has not been destroyed",
        "CUmemoryPool" => "a memory pool that has not been destroyed (or a device's default pool)",
        "CUlinkState" => "a link state that has not been destroyed",
        "CUdeviceptr" | "CUdeviceptr_v2" => {
            "a device address inside an allocation that is still live, valid for every byte this call touches"
        }
        _ => "",
    };
    if what.is_empty() {
        format!("a live `{ty}` obtained from the driver and not yet destroyed")
    } else {
        what.to_string()
    }
}

/// The `# Safety` text of an `unsafe` wrapper: the spec's own contract for
/// the function, then one item per unchecked parameter.
fn safety_section(f: &Function, shapes: &[Shape], types: &TypeInfo) -> String {
    let unchecked = unchecked_params(f, shapes, types);
    let is_async =
        f.name.value.ends_with("Async") || f.params.iter().any(|p| p.ty.value.trim() == "CUstream");
    let mut s = String::from("# Safety\n\n");
    if let Some(own) = &f.safety_doc {
        // The spec names parameters as C does; the docs use the Rust names.
        let mut own = docs::escape(own.trim());
        for p in &f.params {
            own = own.replace(&format!("`{}`", p.name), &format!("`{}`", param_name(p)));
        }
        s.push_str(&own);
        s.push_str("\n\n");
    } else if unchecked.is_empty() {
        s.push_str(&format!(
            "Every argument is checked by its type, but `{}` has a precondition the types cannot express; \
             see NVIDIA's page below.\n\n",
            f.name.value
        ));
    }
    if !unchecked.is_empty() {
        s.push_str("The caller promises:\n\n");
        for (p, why) in &unchecked {
            let n = param_name(p);
            let opt = if p.optional { " (or null)" } else { "" };
            let line = match why {
                Unchecked::Handle(h) | Unchecked::IntegerHandle(h) => {
                    format!("- `{n}` is {}{opt}.", handle_phrase(h))
                }
                Unchecked::Callback(c) => format!(
                    "- `{n}` (`{c}`) is safe to call from a driver thread with the user data passed with it{opt}."
                ),
                Unchecked::Record(r) => format!(
                    "- every handle and pointer inside `{n}` (`{r}`) is live and valid for the accesses it \
                     describes{opt}."
                ),
                Unchecked::Pointer => {
                    let access = match p.role.value {
                        Role::In => "readable",
                        Role::Out => "writable",
                        Role::Inout => "readable and writable",
                    };
                    let extent = match &p.len {
                        Some(l) => format!("for `{}` elements", snake(&l.value)),
                        None => "for everything the driver accesses through it".to_string(),
                    };
                    let lasting = if is_async {
                        " until the work this call enqueues has finished"
                    } else {
                        " for the duration of the call"
                    };
                    format!(
                        "- `{n}` (`{}`) is {access} {extent}{lasting}{opt}.",
                        p.ty.value.trim()
                    )
                }
            };
            s.push_str(&line);
            s.push('\n');
        }
        s.push('\n');
    }
    s
}

fn wrapper(g: &GroupFile, f: &Function, types: &TypeInfo, target: Target) -> Result<TokenStream> {
    let sys = target.sys();
    let shapes = classify(f);
    let safe = is_safe(f, &shapes, types);
    let c_name = &f.name.value;
    let sys_fn = format_ident!("{}", c_name);
    let name = format_ident!("{}", fn_name(f));
    let rust_of = |c: &str| -> String {
        f.params
            .iter()
            .find(|q| q.name == c)
            .map(param_name)
            .unwrap_or_else(|| snake(c))
    };
    let mut args = Vec::new();
    let mut pre = Vec::new();
    let mut post = Vec::new();
    let mut call = Vec::new();
    let mut outs: Vec<(TokenStream, TokenStream)> = Vec::new();
    let mut param_docs = Vec::new();
    let zero_mark = safety_mark("every cuda-sys value type is valid when all bits are zero.");
    for (p, shape) in f.params.iter().zip(&shapes) {
        let rname = param_name(p);
        let id = format_ident!("{}", rname);
        let cty = &p.ty.value;
        let c_note = if rname == p.name {
            String::new()
        } else {
            format!(" (C `{}`)", p.name)
        };
        match shape {
            Shape::Value | Shape::Raw => {
                let t = rust_ty(cty)?;
                args.push(quote!(#id: #t));
                call.push(quote!(#id));
                let null = if p.optional { ", may be null" } else { "" };
                param_docs.push(format!(
                    "- `{rname}`{c_note}: `{}` ({}{null})",
                    cty.trim(),
                    p.role.value.word()
                ));
            }
            Shape::OutValue { boolean } => {
                let t = pointee_ty(cty)?;
                pre.push(quote! {
                    #zero_mark
                    let mut #id: #t = unsafe { ::core::mem::zeroed() };
                });
                call.push(quote!(&mut #id));
                if *boolean {
                    outs.push((quote!(#id != 0), quote!(bool)));
                    param_docs.push(format!(
                        "- `{rname}`{c_note}: returned in `Ok` as `bool` (the driver writes 0 or 1)"
                    ));
                } else {
                    outs.push((quote!(#id), t));
                    param_docs.push(format!("- `{rname}`{c_note}: returned in `Ok`"));
                }
            }
            Shape::OutArray { n } => {
                let t = pointee_ty(cty)?;
                let n_lit = Literal::usize_unsuffixed(*n as usize);
                pre.push(quote! {
                    #zero_mark
                    let mut #id: [#t; #n_lit] = unsafe { ::core::mem::zeroed() };
                });
                call.push(quote!(#id.as_mut_ptr()));
                outs.push((quote!(#id), quote!([#t; #n_lit])));
                param_docs.push(format!(
                    "- `{rname}`{c_note}: the {n} elements the driver writes, returned in `Ok`"
                ));
            }
            Shape::OutString { len, capacity } => {
                let cap = Literal::usize_unsuffixed(*capacity as usize);
                pre.push(quote! {
                    let mut #id = [0 as ::core::ffi::c_char; #cap];
                });
                call.push(quote!(#id.as_mut_ptr()));
                post.push(quote! {
                    let #id: ::std::string::String = {
                        let end = #id.iter().position(|&c| c == 0).unwrap_or(#id.len());
                        let bytes: ::std::vec::Vec<u8> = #id[..end].iter().map(|&c| c as u8).collect();
                        ::std::string::String::from_utf8_lossy(&bytes).into_owned()
                    };
                });
                outs.push((quote!(#id), quote!(::std::string::String)));
                param_docs.push(format!(
                    "- `{rname}`{c_note}: returned in `Ok` as a `String` (a {capacity}-byte buffer is passed, \
                     its size in `{}`)",
                    rust_of(len)
                ));
            }
            Shape::StringLen { capacity } => {
                let t = rust_ty(cty)?;
                let cap = Literal::usize_unsuffixed(*capacity as usize);
                pre.push(quote! { let #id: #t = #cap; });
                call.push(quote!(#id));
                param_docs.push(format!(
                    "- `{rname}`{c_note}: the buffer size, {capacity}, passed by the wrapper"
                ));
            }
            Shape::InOutRef => {
                let t = pointee_ty(cty)?;
                args.push(quote!(#id: &mut #t));
                call.push(quote!(#id));
                param_docs.push(format!("- `{rname}`{c_note}: `&mut` (read and written)"));
            }
            Shape::InRef { optional } => {
                let t = pointee_ty(cty)?;
                if *optional {
                    args.push(quote!(#id: ::core::option::Option<&#t>));
                    call.push(quote!(#id.map_or(::core::ptr::null(), |r| r as *const #t)));
                } else {
                    args.push(quote!(#id: &#t));
                    call.push(quote!(#id));
                }
                param_docs.push(format!(
                    "- `{rname}`{c_note}: `{}` by reference{}",
                    cty.trim(),
                    if *optional { ", optional" } else { "" }
                ));
            }
            Shape::CStr { optional } => {
                if *optional {
                    args.push(quote!(#id: ::core::option::Option<&::core::ffi::CStr>));
                    call.push(quote!(#id.map_or(::core::ptr::null(), |s| s.as_ptr())));
                } else {
                    args.push(quote!(#id: &::core::ffi::CStr));
                    call.push(quote!(#id.as_ptr()));
                }
                param_docs.push(format!(
                    "- `{rname}`{c_note}: C string{}",
                    if *optional { ", optional" } else { "" }
                ));
            }
            Shape::Slice {
                len,
                mutable,
                optional,
            } => {
                let t = pointee_ty(cty)?;
                let c_mut = !CType::parse(cty)?.pointee_is_const();
                let (ref_ty, as_ptr, null) = if *mutable {
                    (
                        quote!(&mut [#t]),
                        quote!(as_mut_ptr()),
                        quote!(::core::ptr::null_mut()),
                    )
                } else if c_mut {
                    // Read-only input whose C pointer lacks `const`.
                    (
                        quote!(&[#t]),
                        quote!(as_ptr().cast_mut()),
                        quote!(::core::ptr::null_mut()),
                    )
                } else {
                    (quote!(&[#t]), quote!(as_ptr()), quote!(::core::ptr::null()))
                };
                if *optional {
                    args.push(quote!(#id: ::core::option::Option<#ref_ty>));
                    call.push(quote!(match #id { Some(s) => s.#as_ptr, None => #null }));
                } else {
                    args.push(quote!(#id: #ref_ty));
                    call.push(quote!(#id.#as_ptr));
                }
                param_docs.push(format!(
                    "- `{rname}`{c_note}: {}slice; its length is checked and passed as `{}`{}",
                    if *mutable { "writable " } else { "" },
                    rust_of(len),
                    if *optional {
                        " (`None` passes null)"
                    } else {
                        ""
                    }
                ));
            }
            Shape::LenOf(users) | Shape::FilledCount(users) => {
                let filled = matches!(shape, Shape::FilledCount(_));
                let t = if filled {
                    pointee_ty(cty)?
                } else {
                    rust_ty(cty)?
                };
                let mut entries = Vec::new();
                for u in users {
                    let up = f.params.iter().find(|q| &q.name == u);
                    let uname = up.map(param_name).unwrap_or_else(|| snake(u));
                    let ui = format_ident!("{}", uname);
                    let optional = up.is_some_and(|q| q.optional);
                    entries.push(if optional {
                        quote!((#uname, #ui.as_ref().map(|s| s.len())))
                    } else {
                        quote!((#uname, ::core::option::Option::Some(#ui.len())))
                    });
                }
                let mutability = if filled { quote!(mut) } else { quote!() };
                pre.push(quote! {
                    let #mutability #id: #t = shared_len(#c_name, #rname, &[#(#entries),*])?;
                });
                let list = users
                    .iter()
                    .map(|u| rust_of(u))
                    .collect::<Vec<_>>()
                    .join("`, `");
                if filled {
                    call.push(quote!(&mut #id));
                    outs.push((quote!(#id), t));
                    param_docs.push(format!(
                        "- `{rname}`{c_note}: in, the length of `{list}` (each checked against it); \
                         out, the count the driver reports, returned in `Ok`"
                    ));
                } else {
                    call.push(quote!(#id));
                    param_docs.push(format!(
                        "- `{rname}`{c_note}: the length of `{list}`, each checked against it"
                    ));
                }
            }
            Shape::Filled { len, optional } => {
                let t = pointee_ty(cty)?;
                if *optional {
                    args.push(quote!(#id: ::core::option::Option<&mut [#t]>));
                    call.push(quote!(match #id { Some(s) => s.as_mut_ptr(), None => ::core::ptr::null_mut() }));
                } else {
                    args.push(quote!(#id: &mut [#t]));
                    call.push(quote!(#id.as_mut_ptr()));
                }
                param_docs.push(format!(
                    "- `{rname}`{c_note}: filled by the driver; its length is passed in `{}`{}",
                    rust_of(len),
                    if *optional {
                        " (`None` passes null and asks only for the count)"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    let (ret_ty, ret_val) = match outs.len() {
        0 => (quote!(()), quote!(())),
        1 => {
            let (v, t) = &outs[0];
            (quote!(#t), quote!(#v))
        }
        _ => {
            let vs = outs.iter().map(|(v, _)| v);
            let ts = outs.iter().map(|(_, t)| t);
            (quote!((#(#ts),*)), quote!((#(#vs),*)))
        }
    };
    let (summary, rest) = match &f.summary {
        Some(s) => split_summary(&docs::escape(s.trim())),
        None => (format!("Calls `{c_name}`."), Vec::new()),
    };
    let mut doc = summary;
    if !rest.is_empty() {
        let heading = if g.group == "CUDA_EXEC" && c_name.starts_with("cuLaunch") {
            "\n\n# Rules\n\n"
        } else {
            "\n\n"
        };
        doc.push_str(heading);
        for r in &rest {
            doc.push_str(&format!("- {r}\n"));
        }
        doc.pop();
    }
    doc.push_str(&format!("\n\nThin wrapper over [`{sys}::{c_name}`]"));
    if !param_docs.is_empty() {
        doc.push_str(":\n\n");
        doc.push_str(&param_docs.join("\n"));
    } else {
        doc.push('.');
    }
    doc.push_str(&match target {
        Target::Driver => format!(
            "\n\n# Errors\n\nA failing `CUresult` is [`CudaError::Driver`](crate::CudaError::Driver) naming `{c_name}`; a driver without it gives \
             [`CudaError::DriverNotFound`](crate::CudaError::DriverNotFound) or [`CudaError::NotSupported`](crate::CudaError::NotSupported)."
        ),
        Target::Nvrtc => format!(
            "\n\n# Errors\n\nA failing `nvrtcResult` is [`CudaError::Nvrtc`](crate::CudaError::Nvrtc) naming `{c_name}`; no NVRTC, or one older than \
             `{c_name}`, gives [`CudaError::NvrtcUnavailable`](crate::CudaError::NvrtcUnavailable)."
        ),
    });
    if shapes
        .iter()
        .any(|s| matches!(s, Shape::LenOf(_) | Shape::FilledCount(_)))
    {
        doc.push_str(
            " Slices whose lengths differ, or a length the C count cannot hold, give \
             [`CudaError::InvalidArgument`](crate::CudaError::InvalidArgument) before the driver is called.",
        );
    }
    let codes: Vec<String> = f
        .errors
        .iter()
        .filter(|e| e.value != "CUDA_SUCCESS")
        .filter(|e| e.value != "NVRTC_SUCCESS")
        .map(|e| match target {
            Target::Driver => format!("[`{0}`](cuda_sys::CUresult::{0})", e.value),
            Target::Nvrtc => format!("[`{0}`](cuda_sys::nvrtc::nvrtcResult::{0})", e.value),
        })
        .collect();
    if !codes.is_empty() {
        doc.push_str(&format!(
            " The header documents these codes for it: {}.",
            codes.join(", ")
        ));
    }
    if !safe {
        doc.push_str("\n\n");
        doc.push_str(safety_section(f, &shapes, types).trim_end());
    }
    doc.push_str(&format!(
        "\n\nNVIDIA reference: `{c_name}` in [{}]({}).",
        docs::escape(&g.title),
        match target {
            Target::Driver => docs::group_url(&g.group),
            Target::Nvrtc => super::nvrtc::NVRTC_DOCS.to_string(),
        }
    ));
    let doc = docs::attrs(&doc);
    let deprecated = if f.deprecated {
        let note = match target {
            Target::Driver => "deprecated in cuda.h",
            Target::Nvrtc => "deprecated in nvrtc.h",
        };
        quote!(#[deprecated(note = #note)] #[allow(deprecated)])
    } else {
        quote!()
    };
    let lit = Literal::string(c_name);
    let call_mark = if safe {
        safety_mark(
            "every argument is a plain value, a reference, a length-checked slice or a C string, and each \
             output points to a local of the pointee type.",
        )
    } else {
        safety_mark(
            "the caller upholds this function's `# Safety` contract for its handles and raw pointers; the \
             other arguments are references, length-checked slices or locals.",
        )
    };
    let check = match target {
        Target::Driver => quote!(check),
        Target::Nvrtc => quote!(check_nvrtc),
    };
    let body = quote! {
        #(#pre)*
        #call_mark
        let __r = unsafe { #sys_fn(#(#call),*) };
        #check(__r, #lit)?;
        #(#post)*
        Ok(#ret_val)
    };
    let unsafety = if safe { quote!() } else { quote!(unsafe) };
    let clippy = if args.len() > 7 {
        quote!(#[allow(clippy::too_many_arguments)])
    } else {
        quote!()
    };
    Ok(quote! {
        #doc
        #[doc(alias = #lit)]
        #deprecated
        #clippy
        pub #unsafety fn #name(#(#args),*) -> CudaResult<#ret_ty> {
            #body
        }
    })
}

/// The lines of `driver.rs`'s public signatures, for snapshots.
pub fn signatures(specs: &Specs) -> Result<String> {
    let file: syn::File = syn::parse2(driver(specs)?)?;
    let mut out = String::new();
    for item in file.items {
        if let syn::Item::Fn(f) = item {
            let sig = &f.sig;
            out.push_str(
                &prettyplease::unparse(&syn::parse_quote!(#sig {})).replace(" {}\n", ";\n"),
            );
        }
    }
    Ok(out)
}

/// Every safe wrapper that takes an unchecked parameter, as
/// `function(parameter: why)`; empty when the safety rule holds.
pub fn safe_wrappers_with_unchecked_params(specs: &Specs) -> Vec<String> {
    let types = TypeInfo::new(specs);
    let mut bad = Vec::new();
    for (_, _, f) in specs.functions() {
        let shapes = classify(f);
        if !is_safe(f, &shapes, &types) {
            continue;
        }
        // Re-derive independently of `is_safe`: any pointer-typed argument
        // or handle among the signature's arguments.
        for (p, s) in f.params.iter().zip(&shapes) {
            let Ok(t) = CType::parse(&p.ty.value) else {
                continue;
            };
            let passes_value = matches!(s, Shape::Value | Shape::Raw);
            if passes_value && types.unchecked(&t).is_some() {
                bad.push(format!("{}({})", f.name.value, p.name));
            }
        }
    }
    bad
}
