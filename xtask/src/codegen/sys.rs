//! Renders `cuda-sys/src/generated/`: types, the function table and the
//! `CUresult` catalogue.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use super::docs;
use crate::Result;
use crate::ctype::CType;
use crate::names::escape;
use crate::spec::model::*;
use crate::spec::validate::RESULT_ENUM;

fn ty(c: &str) -> Result<TokenStream> {
    let t = CType::parse(c)?;
    let rust = t.to_rust(&|n| n.to_string());
    Ok(syn::parse_str::<syn::Type>(&rust)
        .map_err(|e| format!("C type `{c}` gives Rust `{rust}`: {e}"))?
        .to_token_stream())
}

use quote::ToTokens;

fn ident(name: &str) -> proc_macro2::Ident {
    format_ident!("{}", escape(name))
}

/// The Rust name of each C enum: its plain typedef (`cudaError_enum` →
/// `CUresult`), so `CUresult(500)` and `CUresult::CUDA_SUCCESS` both work;
/// the tag becomes the alias.
pub fn enum_names(specs: &Specs) -> BTreeMap<String, String> {
    let tags: BTreeSet<&str> = specs.enums().map(|e| e.name.value.as_str()).collect();
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for t in specs.typedefs() {
        let name = &t.name.value;
        let versioned = name
            .rsplit_once("_v")
            .is_some_and(|(_, v)| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()));
        if tags.contains(t.ty.value.as_str()) && !versioned {
            let e = out
                .entry(t.ty.value.clone())
                .or_insert_with(|| name.clone());
            if name.len() < e.len() {
                *e = name.clone();
            }
        }
    }
    out
}

/// Which API a set of types belongs to, for their rustdoc.
#[derive(Debug, Clone, Copy)]
pub struct Api {
    /// The header, e.g. `cuda.h`.
    pub header: &'static str,
    /// Who owns handles and calls callbacks: `the driver`, `NVRTC`.
    pub owner: &'static str,
    /// The library, as in "from a newer driver": `driver`, `NVRTC`.
    pub library: &'static str,
    /// NVIDIA's reference page for the types.
    pub types_url: fn() -> String,
}

/// The driver API (`cuda.h`).
pub const DRIVER: Api = Api {
    header: "cuda.h",
    owner: "the driver",
    library: "driver",
    types_url: docs::types_url,
};

/// `generated/types.rs`.
pub fn types(specs: &Specs) -> Result<TokenStream> {
    types_of(specs, DRIVER)
}

/// The types of `specs` (a `types.rs`), documented as `api`'s.
pub fn types_of(specs: &Specs, api: Api) -> Result<TokenStream> {
    let mut out = TokenStream::new();
    let enum_names = enum_names(specs);
    let renamed: BTreeSet<&str> = enum_names.values().map(String::as_str).collect();
    let types_url = (api.types_url)();
    let owner = api.owner;
    let header = api.header;

    let opaque: BTreeSet<&str> = specs.handles().map(|h| h.opaque.as_str()).collect();
    for o in opaque {
        let name = ident(o);
        let doc = docs::attrs(&format!(
            "The {}-owned object behind a handle; never created or read from Rust.\n\nSee [{o}]({types_url}).",
            api.library
        ));
        out.extend(quote! {
            #doc
            #[repr(C)]
            pub struct #name { _unused: [u8; 0] }
        });
    }
    for h in specs.handles() {
        let name = ident(&h.name.value);
        let opaque = ident(&h.opaque);
        let doc = docs::attrs(&format!(
            "Handle `{}`: a pointer to the {}-owned `{}`.\n\nSee [{}]({types_url}).",
            h.name.value, api.library, h.opaque, h.name.value
        ));
        out.extend(quote! { #doc pub type #name = *mut #opaque; });
    }
    for t in specs.typedefs() {
        if renamed.contains(t.name.value.as_str())
            && enum_names.get(&t.ty.value) == Some(&t.name.value)
        {
            // This typedef names the enum's newtype itself; the tag is the alias.
            let alias = ident(&t.ty.value);
            let target = ident(&t.name.value);
            let doc = docs::attrs(&format!(
                "The C enum tag `{}`; the same type as [`{}`].",
                t.ty.value, t.name.value
            ));
            out.extend(quote! { #doc pub type #alias = #target; });
            continue;
        }
        let name = ident(&t.name.value);
        let target = ty(&t.ty.value)?;
        let doc = docs::attrs(&format!(
            "C typedef `{}` = `{}`.\n\nSee [{}]({types_url}).",
            t.name.value, t.ty.value, t.name.value
        ));
        out.extend(quote! { #doc pub type #name = #target; });
    }
    for e in specs.enums() {
        let rust = enum_names
            .get(&e.name.value)
            .cloned()
            .unwrap_or_else(|| e.name.value.clone());
        out.extend(enum_item(e, &rust, api)?);
    }
    for r in specs.records() {
        out.extend(record_item(r, api)?);
    }
    for c in specs.callbacks() {
        let name = ident(&c.name.value);
        let params = c
            .params
            .iter()
            .map(|p| {
                let t = ty(&p.ty.value)?;
                Ok(if p.name.is_empty() {
                    quote!(#t)
                } else {
                    let n = ident(&p.name);
                    quote!(#n: #t)
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let ret = if c.returns.value == "void" {
            quote!()
        } else {
            let t = ty(&c.returns.value)?;
            quote!(-> #t)
        };
        let doc = docs::attrs(&format!(
            "Callback type `{}` that {owner} calls; `None` is a null function pointer.\n\nSee [{}]({types_url}).",
            c.name.value, c.name.value
        ));
        out.extend(quote! { #doc pub type #name = ::core::option::Option<unsafe extern "C" fn(#(#params),*) #ret>; });
    }
    for c in specs.constants() {
        let name = ident(&c.name.value);
        let t = ty(&c.ty)?;
        let v = Literal::i64_unsuffixed(c.value);
        let doc = docs::attrs(&format!(
            "`#define {} {}` from `{header}`{}.",
            c.name.value,
            c.value,
            dates(&c.since, &c.removed)
        ));
        out.extend(quote! { #doc pub const #name: #t = #v; });
    }
    Ok(out)
}

/// ` (since CUDA 13.5)`, ` (CUDA 12.4 to 12.8; not in the 13.0 header)`,
/// or nothing for an item of every pinned header.
fn dates(since: &Option<String>, removed: &Option<String>) -> String {
    match (since, removed) {
        (None, None) => String::new(),
        (Some(s), None) => format!(" (since CUDA {s})"),
        (None, Some(r)) => format!(" (not in the CUDA {r} header and later)"),
        (Some(s), Some(r)) => format!(" (since CUDA {s}; not in the CUDA {r} header and later)"),
    }
}

/// The same as sentences after a summary: ` First in CUDA 13.5.`
fn dates_sentence(since: &Option<String>, removed: &Option<String>) -> String {
    let mut out = String::new();
    if let Some(s) = since {
        out.push_str(&format!(" First in CUDA {s}."));
    }
    if let Some(r) = removed {
        out.push_str(&format!(" Not in the CUDA {r} header and later."));
    }
    out
}

fn enum_item(e: &Enum, rust_name: &str, api: Api) -> Result<TokenStream> {
    let name = ident(rust_name);
    let repr = format_ident!("{}", e.repr);
    let summary = e
        .summary
        .clone()
        .unwrap_or_else(|| format!("The C enum `{}`.", e.name.value));
    let doc = docs::attrs(&format!(
        "{summary}{}\n\nA transparent newtype over the C value: a value this crate does not know (from a newer {}) \
         is kept as it is, never undefined behaviour. See [{}]({}).",
        dates_sentence(&e.since, &e.removed),
        api.library,
        e.name.value,
        (api.types_url)()
    ));
    let mut consts = Vec::new();
    let mut arms = Vec::new();
    let mut seen = BTreeSet::new();
    for v in &e.values {
        let vn = ident(&v.name.value);
        let lit = literal(&e.repr, v.value);
        let d = docs::attrs(&format!(
            "`{}` = {}{}.",
            v.name.value,
            v.value,
            dates(&v.since, &v.removed)
        ));
        consts.push(quote! { #d pub const #vn: Self = Self(#lit); });
        if seen.insert(v.value) {
            let s = &v.name.value;
            arms.push(quote! { #lit => Some(#s), });
        }
    }
    // The enum name is a C identifier, so it holds no `{` or `}`.
    let unknown_fmt = format!("{rust_name}({{}})");
    Ok(quote! {
        #doc
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct #name(pub #repr);
        impl #name {
            #(#consts)*
            /// The enumerator's name, or `None` for a value this crate does not know.
            pub const fn variant_name(self) -> ::core::option::Option<&'static str> {
                match self.0 { #(#arms)* _ => None }
            }
        }
        impl ::core::fmt::Debug for #name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match self.variant_name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, #unknown_fmt, self.0),
                }
            }
        }
    })
}

fn literal(repr: &str, v: i64) -> Literal {
    match repr {
        "u32" => Literal::u32_unsuffixed(v as u32),
        "u64" => Literal::u64_unsuffixed(v as u64),
        _ => Literal::i64_unsuffixed(v),
    }
}

/// `12.0–12.8` (or `12.4`): the pinned releases whose headers have an
/// earlier field, from its `since` (else the record's, else the oldest
/// pinned release) to the last pinned release before its `removed`.
fn release_range(r: &Record, e: &EarlierField) -> String {
    let releases: Vec<&str> = crate::provision::PINNED_RELEASES
        .iter()
        .map(|p| p.release)
        .collect();
    let first = e
        .since
        .as_deref()
        .or(r.since.as_deref())
        .unwrap_or(releases[0]);
    let last = releases
        .iter()
        .position(|x| *x == e.removed)
        .and_then(|i| i.checked_sub(1))
        .map_or(e.removed.as_str(), |i| releases[i]);
    if first == last {
        first.to_string()
    } else {
        format!("{first}–{last}")
    }
}

/// The record doc's paragraph on the fields older headers had and the newest
/// lacks (`earlier_fields`): removed ones, and ones with another type.
fn earlier_layouts(r: &Record) -> Result<String> {
    let mut out = String::new();
    for e in &r.earlier_fields {
        let decl = CType::parse(&e.ty.value)?.declare(&e.name);
        let range = release_range(r, e);
        if r.fields.iter().any(|f| f.name == e.name) {
            out.push_str(&format!(
                " In CUDA {range} the field `{}` was `{decl}`; CUDA {} changed its type.",
                e.name, e.removed
            ));
        } else if let Some(m) = &e.moved_to {
            out.push_str(&format!(
                " In CUDA {range} `{decl}` was a direct member; since CUDA {} it is in the unnamed member `{m}` (C still writes `.{}`).",
                e.removed, e.name
            ));
        } else {
            out.push_str(&format!(
                " Before CUDA {} this record also had `{decl}` ({range}).",
                e.removed
            ));
        }
    }
    if out.is_empty() {
        return Ok(out);
    }
    Ok(format!(
        "\n\nEarlier layouts, from the pinned headers:{out}"
    ))
}

fn record_item(r: &Record, api: Api) -> Result<TokenStream> {
    let name = ident(&r.name.value);
    let kind = match r.kind {
        RecordKind::Struct => "struct",
        RecordKind::Union => "union",
    };
    let summary = r.summary.clone().unwrap_or_else(|| match &r.c_path {
        Some(p) => format!("The anonymous C {kind} at `{}`.", p.replace(".*", "")),
        None => format!("The C {kind} `{}`.", r.name.value),
    });
    let doc = docs::attrs(&format!(
        "{summary}{}\n\n`#[repr(C)]` with the newest header's field order; `Default` is all-zero bytes. See [{}]({}).{}",
        dates_sentence(&r.since, &r.removed),
        r.name.value,
        (api.types_url)(),
        earlier_layouts(r)?
    ));
    let fields = r
        .fields
        .iter()
        .map(|f| {
            let n = ident(&f.name);
            let t = ty(&f.ty.value)?;
            // A field that older headers declared with another type.
            let before = r
                .earlier_fields
                .iter()
                .filter(|e| e.name == f.name)
                .map(|e| {
                    Ok(format!(
                        "`{}` in CUDA {}",
                        CType::parse(&e.ty.value)?.declare(&e.name),
                        release_range(r, e)
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            let (dated, before) = match (&f.since, before.is_empty()) {
                (_, true) => (dates(&f.since, &None), String::new()),
                (Some(s), false) => (
                    format!(" (this type since CUDA {s})"),
                    format!("; before: {}", before.join(", ")),
                ),
                (None, false) => (String::new(), format!("; before: {}", before.join(", "))),
            };
            let d = docs::attrs(&format!(
                "C field `{}`{dated}{before}.",
                CType::parse(&f.ty.value)?.declare(&f.name),
            ));
            Ok(quote! { #d pub #n: #t, })
        })
        .collect::<Result<Vec<_>>>()?;
    let repr = match r.align {
        Some(a) => {
            let a = Literal::u32_unsuffixed(a);
            quote!(#[repr(C, align(#a))])
        }
        None => quote!(#[repr(C)]),
    };
    let body = match r.kind {
        RecordKind::Struct => {
            quote! { #repr #[derive(Clone, Copy)] pub struct #name { #(#fields)* } }
        }
        RecordKind::Union => {
            quote! { #repr #[derive(Clone, Copy)] pub union #name { #(#fields)* } }
        }
    };
    let zero_mark = super::safety_mark(
        "a C struct or union of integers, floats, raw pointers, nullable function pointers and such records is valid all-zero.",
    );
    Ok(quote! {
        #doc
        #body
        impl ::core::default::Default for #name {
            fn default() -> Self {
                #zero_mark
                unsafe { ::core::mem::zeroed() }
            }
        }
    })
}

/// `generated/functions.rs`: one `unsafe fn` per driver function and the symbol table.
pub fn functions(specs: &Specs) -> Result<TokenStream> {
    let mut all: Vec<(&GroupFile, &Function)> = specs.functions().map(|(_, g, f)| (g, f)).collect();
    all.sort_by(|a, b| a.1.name.value.cmp(&b.1.name.value));
    let count = all.len();
    let mut table = Vec::new();
    let mut fns = Vec::new();
    for (i, (g, f)) in all.iter().enumerate() {
        let name = &f.name.value;
        let sym = cstr(&f.symbol);
        let pt_sym = match &f.per_thread_symbol {
            Some(s) => {
                let c = cstr(s);
                quote!(Some(#c))
            }
            None => quote!(None),
        };
        let ver = f.proc_version;
        let pt_ver = f.per_thread_version.unwrap_or(f.proc_version);
        let pname = cstr(crate::import::header::proc_name(&f.symbol));
        let since = f
            .since
            .as_deref()
            .map(crate::import::merge::release_number)
            .unwrap_or(0);
        let removed = f
            .removed
            .as_deref()
            .map(crate::import::merge::release_number)
            .unwrap_or(0);
        // Earlier ABIs a driver older than `proc_version` is asked for: same
        // parameter list, newest first.
        let mut older: Vec<(&str, u32)> = f
            .abi
            .iter()
            .filter(|a| a.params.is_none() && a.proc_version < f.proc_version)
            .map(|a| (a.symbol.as_str(), a.proc_version))
            .collect();
        older.sort_by_key(|a| std::cmp::Reverse(a.1));
        older.dedup();
        let older = if older.is_empty() {
            quote!()
        } else {
            let items = older.iter().map(|(s, v)| {
                let c = cstr(s);
                quote!((#c, #v))
            });
            quote!(.older_abis(&[#(#items),*]))
        };
        table.push(
            quote! { Symbol::new(#name, #pname, #sym, #ver, #pt_sym, #pt_ver).dated(#since, #removed)#older },
        );

        let fname = ident(name);
        let params: Vec<proc_macro2::Ident> = f.params.iter().map(|p| ident(&p.name)).collect();
        let ptypes = f
            .params
            .iter()
            .map(|p| ty(&p.ty.value))
            .collect::<Result<Vec<_>>>()?;
        let doc = docs::attrs(&docs::raw_function(f, g));
        let deprecated = if f.deprecated {
            quote!(#[deprecated(note = "deprecated in cuda.h; see the NVIDIA reference for its replacement")])
        } else {
            quote!()
        };
        let idx = Literal::usize_unsuffixed(i);
        let entry_mark = super::safety_mark(
            "`__entry` was resolved for this function at the ABI version whose signature this declaration copies from cuda.h.",
        );
        let call_mark =
            super::safety_mark("the caller upholds this function's contract (see # Safety).");
        fns.push(quote! {
            #doc
            #deprecated
            #[inline]
            pub unsafe fn #fname(#(#params: #ptypes),*) -> CUresult {
                let Some(__entry) = SYMBOLS[#idx].get() else { return CUresult::CUDA_ERROR_NOT_FOUND };
                #entry_mark
                let __driver_fn = unsafe { ::core::mem::transmute::<*mut ::core::ffi::c_void, unsafe extern "C" fn(#(#ptypes),*) -> CUresult>(__entry) };
                #call_mark
                unsafe { __driver_fn(#(#params),*) }
            }
        });
    }
    let count_lit = Literal::usize_unsuffixed(count);
    Ok(quote! {
        use super::types::*;
        use crate::loader::Symbol;

        /// Every driver function of the specs, sorted by C name: where each is
        /// resolved from and its resolution state. [`crate::loader::resolve`] looks
        /// entries up by name.
        pub static SYMBOLS: [Symbol; #count_lit] = [ #(#table),* ];

        #(#fns)*
    })
}

fn cstr(s: &str) -> Literal {
    let c = std::ffi::CString::new(s).expect("C names have no NUL");
    Literal::c_string(&c)
}

/// `generated/errors.rs`: names, descriptions and stickiness of `CUresult`.
pub fn errors(specs: &Specs) -> Result<TokenStream> {
    let result = specs
        .enums()
        .find(|e| e.name.value == RESULT_ENUM)
        .ok_or("the specs have no cudaError_enum")?;
    let values: BTreeMap<&str, i64> = result
        .values
        .iter()
        .map(|v| (v.name.value.as_str(), v.value))
        .collect();
    let mut desc = Vec::new();
    let mut sticky = Vec::new();
    let mut seen = BTreeSet::new();
    for e in &specs.errors.errors {
        let Some(&v) = values.get(e.name.value.as_str()) else {
            continue;
        };
        if !seen.insert(v) {
            continue;
        }
        let lit = literal(&result.repr, v);
        let s = e.summary.trim();
        desc.push(quote! { #lit => Some(#s), });
        if e.sticky {
            sticky.push(lit);
        }
    }
    let sticky_body = if sticky.is_empty() {
        quote!(self.0 != self.0)
    } else {
        quote!(matches!(self.0, #(#sticky)|*))
    };
    Ok(quote! {
        use super::types::*;

        impl CUresult {
            /// The code's name (`CUDA_ERROR_INVALID_VALUE`), or `None` for a code
            /// this crate does not know (from a newer driver).
            pub const fn name(self) -> ::core::option::Option<&'static str> {
                self.variant_name()
            }
            /// One line saying what the code means, from our catalogue
            /// (`specs/errors.yaml`), or `None` for an unknown code.
            pub const fn description(self) -> ::core::option::Option<&'static str> {
                match self.0 { #(#desc)* _ => None }
            }
            /// Whether the error leaves the context unusable: every later call on
            /// it fails, and only a new process recovers.
            pub const fn is_sticky(self) -> bool {
                #sticky_body
            }
            /// Whether this is `CUDA_SUCCESS`.
            pub const fn is_success(self) -> bool {
                self.0 == 0
            }
        }

        impl ::core::fmt::Display for CUresult {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match (self.name(), self.description()) {
                    (Some(n), Some(d)) => write!(f, "{n} ({}): {d}", self.0),
                    (Some(n), None) => write!(f, "{n} ({})", self.0),
                    _ => write!(f, "CUresult {} (not known to this crate; the driver may be newer than CUDA 13.5)", self.0),
                }
            }
        }

        impl ::std::error::Error for CUresult {}
    })
}
