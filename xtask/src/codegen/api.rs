//! Renders `cuda-api/src/generated/driver.rs`: the thin layer, one snake_case
//! function per driver function. A classification pass labels each parameter
//! (value, out-value, array with length, in-out reference, C string, raw) and
//! the labels drive the signature: out-values become the `Ok` value, a
//! pointer with its length becomes a slice, `CUresult` becomes `Result`.

use std::collections::BTreeMap;

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use super::docs;
use super::names::{escape, rust_fn_name};
use crate::Result;
use crate::ctype::CType;
use crate::spec::model::*;

/// How one parameter appears in the safe signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Passed through by value (scalars, enums, handles, callbacks).
    Value,
    /// Written by the driver; returned in `Ok`.
    OutValue,
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
    /// The element count of slices; computed, not passed.
    LenOf(Vec<String>),
    /// A raw pointer, passed through (makes the wrapper `unsafe`).
    Raw,
}

fn is_plain(t: &CType) -> bool {
    t.ptrs.len() == 1 && t.dims.is_empty() && t.base != "void" && t.base != "char"
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
    // Lengths first: a length parameter must be an `in` integer passed by value.
    let mut lens: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (i, p) in f.params.iter().enumerate() {
        let (Some(len), Some(t)) = (&p.len, &types[i]) else {
            continue;
        };
        let Some(&li) = index.get(len.value.as_str()) else {
            continue;
        };
        let len_ok = types[li]
            .as_ref()
            .is_some_and(|lt| !lt.is_pointer() && is_integer(&lt.base))
            && f.params[li].role.value == Role::In;
        let elem_ok = t.ptrs.len() == 1 && t.base != "void";
        if len_ok && elem_ok {
            lens.entry(li).or_default().push(p.name.clone());
            shapes[i] = Shape::Slice {
                len: len.value.clone(),
                mutable: !t.pointee_is_const(),
                optional: p.optional,
            };
        }
    }
    for (li, users) in lens {
        shapes[li] = Shape::LenOf(users);
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
        // An array whose length is not a plain `in` value (e.g. an in-out count)
        // stays a raw pointer: it is never a single value.
        if p.len.is_some() {
            shapes[i] = Shape::Raw;
            continue;
        }
        shapes[i] = match p.role.value {
            Role::Out if is_plain(t) && !t.pointee_is_const() => Shape::OutValue,
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

/// Whether the wrapper for `f` is a safe `fn`.
pub fn is_safe(f: &Function, shapes: &[Shape]) -> bool {
    f.safety == Safety::Safe && !shapes.contains(&Shape::Raw)
}

fn rust_ty(c: &str) -> Result<TokenStream> {
    let t = CType::parse(c)?;
    let s = t.to_rust(&|n| n.to_string());
    Ok(syn::parse_str::<syn::Type>(&s)?.to_token_stream())
}

use quote::ToTokens;

fn pointee_ty(c: &str) -> Result<TokenStream> {
    let t = CType::parse(c)?.pointee().ok_or("not a pointer")?;
    rust_ty(&t.to_string())
}

/// Counts for the README: (functions, safe wrappers, unsafe wrappers).
pub fn coverage(specs: &Specs) -> (usize, usize, usize) {
    let mut safe = 0;
    let mut total = 0;
    for (_, _, f) in specs.functions() {
        total += 1;
        if is_safe(f, &classify(f)) {
            safe += 1;
        }
    }
    (total, safe, total - safe)
}

/// `generated/driver.rs`.
pub fn driver(specs: &Specs) -> Result<TokenStream> {
    let mut all: Vec<(&GroupFile, &Function)> = specs.functions().map(|(_, g, f)| (g, f)).collect();
    all.sort_by_key(|a| rust_fn_name(a.1));
    let mut fns = Vec::new();
    for (g, f) in all {
        fns.push(wrapper(g, f)?);
    }
    let (total, safe, unsafe_) = coverage(specs);
    let doc = format!(
        "The thin layer: one function per driver function ({total} in all: {safe} safe, {unsafe_} `unsafe` \
         because a raw pointer or an unchecked contract remains), named in snake_case after the C name. \
         Out-parameters are returned in `Ok`, a pointer with its length is a slice, and a failing `CUresult` \
         is an [`Error`] naming the call."
    );
    let doc = docs::inner_attrs(&doc);
    Ok(quote! {
        #doc
        use cuda_sys::*;
        use crate::error::{check, Error, Result};
        #(#fns)*
    })
}

fn wrapper(g: &GroupFile, f: &Function) -> Result<TokenStream> {
    let shapes = classify(f);
    let safe = is_safe(f, &shapes);
    let c_name = &f.name.value;
    let sys_fn = format_ident!("{}", c_name);
    let name = format_ident!("{}", rust_fn_name(f));
    let mut args = Vec::new();
    let mut pre = Vec::new();
    let mut call = Vec::new();
    let mut outs: Vec<(Ident, TokenStream)> = Vec::new();
    let mut param_docs = Vec::new();
    for (p, shape) in f.params.iter().zip(&shapes) {
        let id = format_ident!("{}", escape(&p.name));
        let cty = &p.ty.value;
        match shape {
            Shape::Value | Shape::Raw => {
                let t = rust_ty(cty)?;
                args.push(quote!(#id: #t));
                call.push(quote!(#id));
                let null = if p.optional { ", may be null" } else { "" };
                param_docs.push(format!(
                    "- `{}`: `{}` ({}{null})",
                    p.name,
                    cty,
                    p.role.value.word()
                ));
            }
            Shape::OutValue => {
                let t = pointee_ty(cty)?;
                pre.push(quote! {
                    // SAFETY: every cuda-sys value type is valid all-zero.
                    let mut #id: #t = unsafe { ::core::mem::zeroed() };
                });
                call.push(quote!(&mut #id));
                outs.push((id, t));
                param_docs.push(format!("- `{}`: returned in `Ok`", p.name));
            }
            Shape::InOutRef => {
                let t = pointee_ty(cty)?;
                args.push(quote!(#id: &mut #t));
                call.push(quote!(#id));
                param_docs.push(format!("- `{}`: `&mut` (read and written)", p.name));
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
                    "- `{}`: `{}` by reference{}",
                    p.name,
                    cty,
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
                    "- `{}`: C string{}",
                    p.name,
                    if *optional { ", optional" } else { "" }
                ));
            }
            Shape::Slice {
                len,
                mutable,
                optional,
            } => {
                let t = pointee_ty(cty)?;
                let (ref_ty, as_ptr, null) = if *mutable {
                    (
                        quote!(&mut [#t]),
                        quote!(as_mut_ptr()),
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
                    "- `{}`: slice; its length is passed as `{len}`{}",
                    p.name,
                    if *optional {
                        " (`None` passes null and 0)"
                    } else {
                        ""
                    }
                ));
            }
            Shape::LenOf(users) => {
                let t = rust_ty(cty)?;
                let pname = &p.name;
                let mut lens = Vec::new();
                for u in users {
                    let ui = format_ident!("{}", escape(u));
                    let optional = matches!(
                        shapes[f.params.iter().position(|q| &q.name == u).unwrap_or(0)],
                        Shape::Slice { optional: true, .. }
                    );
                    lens.push(if optional {
                        quote!(#ui.as_ref().map_or(0, |s| s.len()))
                    } else {
                        quote!(#ui.len())
                    });
                }
                let first = &lens[0];
                let rest = &lens[1..];
                let users_list = users.join("`, `");
                let msg = format!("the slices `{users_list}` must have the same length");
                pre.push(quote! {
                    let __len = #first;
                    #( if #rest != __len { return Err(Error::invalid_argument(#c_name, #pname, #msg.into())); } )*
                    let #id: #t = ::core::convert::TryInto::try_into(__len)
                        .map_err(|_| Error::invalid_argument(#c_name, #pname, ::std::format!("length {} does not fit the C type", __len)))?;
                });
                call.push(quote!(#id));
            }
        }
    }
    let (ret_ty, ret_val) = match outs.len() {
        0 => (quote!(()), quote!(())),
        1 => {
            let (id, t) = &outs[0];
            (quote!(#t), quote!(#id))
        }
        _ => {
            let ids = outs.iter().map(|(i, _)| i);
            let ts = outs.iter().map(|(_, t)| t);
            (quote!((#(#ts),*)), quote!((#(#ids),*)))
        }
    };
    let mut doc = match &f.summary {
        Some(s) => docs::escape(s.trim()),
        None => format!("Calls `{c_name}`."),
    };
    doc.push_str(&format!("\n\nThin wrapper over [`cuda_sys::{c_name}`]"));
    if !param_docs.is_empty() {
        doc.push_str(":\n\n");
        doc.push_str(&param_docs.join("\n"));
    } else {
        doc.push('.');
    }
    doc.push_str(&format!(
        "\n\n# Errors\n\nA failing `CUresult` is [`Error::Driver`] naming `{c_name}`; a driver without it gives \
         [`Error::DriverNotFound`] or [`Error::NotSupported`]."
    ));
    let codes: Vec<String> = f
        .errors
        .iter()
        .filter(|e| e.value != "CUDA_SUCCESS")
        .map(|e| format!("[`{0}`](cuda_sys::CUresult::{0})", e.value))
        .collect();
    if !codes.is_empty() {
        doc.push_str(&format!(
            " The header documents these codes for it: {}.",
            codes.join(", ")
        ));
    }
    if !safe {
        doc.push_str("\n\n# Safety\n\nThe contract of [`cuda_sys::");
        doc.push_str(c_name);
        doc.push_str(
            "`] applies: raw pointers must be valid for the driver's accesses, handles live.",
        );
    }
    doc.push_str(&format!(
        "\n\nNVIDIA reference: [{}]({}).",
        docs::escape(&g.title),
        docs::group_url(&g.group)
    ));
    let doc = docs::attrs(&doc);
    let deprecated = if f.deprecated {
        quote!(#[deprecated(note = "deprecated in cuda.h")] #[allow(deprecated)])
    } else {
        quote!()
    };
    let allow = if f.deprecated {
        quote!(#[allow(deprecated)])
    } else {
        quote!()
    };
    let lit = Literal::string(c_name);
    let body = quote! {
        #(#pre)*
        #allow
        let __r = unsafe { #sys_fn(#(#call),*) };
        check(__r, #lit)?;
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
        #deprecated
        #clippy
        pub #unsafety fn #name(#(#args),*) -> Result<#ret_ty> {
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
