//! Renders `cuda-sys/src/generated/nvrtc/` from `specs/nvrtc/`: NVRTC's
//! types (by [`sys::types_of`]), its function table and raw functions, and
//! the `nvrtcResult` catalogue. The loader they call is cuda-sys's
//! hand-written `nvrtc` module.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use super::docs::{self, escape};
use super::sys::{self, Api};
use crate::Result;
use crate::ctype::CType;
use crate::names::escape as escape_ident;
use crate::spec::model::*;
use crate::spec::validate::NVRTC_RESULT_ENUM;

/// NVIDIA's NVRTC reference (one page for the whole API).
pub const NVRTC_DOCS: &str = "https://docs.nvidia.com/cuda/nvrtc/index.html";

fn nvrtc_url() -> String {
    NVRTC_DOCS.to_string()
}

/// NVRTC (`nvrtc.h`).
pub const NVRTC: Api = Api {
    header: "nvrtc.h",
    owner: "NVRTC",
    library: "NVRTC",
    types_url: nvrtc_url,
};

/// `generated/nvrtc/mod.rs`.
pub fn module() -> TokenStream {
    quote! {
        //! Items generated from `specs/nvrtc/`: NVRTC's types, its function
        //! table and the `nvrtcResult` catalogue.
        pub mod errors;
        pub mod functions;
        pub mod types;
    }
}

/// `generated/nvrtc/types.rs`.
pub fn types(specs: &Specs) -> Result<TokenStream> {
    sys::types_of(specs, NVRTC)
}

fn ident(name: &str) -> proc_macro2::Ident {
    format_ident!("{}", escape_ident(name))
}

fn ty(c: &str) -> Result<TokenStream> {
    let t = CType::parse(c)?;
    let rust = t.to_rust(&|n| n.to_string());
    Ok(quote::ToTokens::to_token_stream(
        &syn::parse_str::<syn::Type>(&rust)
            .map_err(|e| format!("C type `{c}` gives Rust `{rust}`: {e}"))?,
    ))
}

fn cstr(s: &str) -> Literal {
    let c = std::ffi::CString::new(s).expect("C names have no NUL");
    Literal::c_string(&c)
}

/// The rustdoc of one raw NVRTC function.
pub fn raw_doc(f: &Function, g: &GroupFile) -> String {
    let mut s = match &f.summary {
        Some(sum) => escape(sum.trim()),
        None => format!(
            "Raw binding to `{}` from NVRTC's {} API.",
            f.name.value,
            escape(&g.title)
        ),
    };
    s.push_str("\n\n");
    if f.deprecated {
        s.push_str("Deprecated by NVIDIA; kept so existing programs still build.\n\n");
    }
    if !f.params.is_empty() {
        s.push_str("# Parameters\n\n");
        for p in &f.params {
            let mut extra = String::new();
            if let Some(len) = &p.len {
                extra.push_str(&format!(", array of `{}` elements", len.value));
            }
            if p.optional {
                extra.push_str(", may be null");
            }
            s.push_str(&format!(
                "- `{}`: {}, `{}`{extra}\n",
                p.name,
                p.role.value.word(),
                p.ty.value
            ));
        }
        s.push('\n');
    }
    s.push_str("# Errors\n\n");
    if f.errors.is_empty() {
        s.push_str("The header documents no specific codes.");
    } else {
        let links: Vec<String> = f
            .errors
            .iter()
            .map(|e| format!("[`{0}`](nvrtcResult::{0})", e.value))
            .collect();
        s.push_str(&format!("The header documents: {}.", links.join(", ")));
    }
    s.push_str(
        " When NVRTC or this function cannot be loaded, or the loaded NVRTC is older than the \
         function, returns [`NOT_AVAILABLE`](crate::nvrtc::NOT_AVAILABLE) without calling anything; \
         [`crate::nvrtc::resolve`] says why.\n\n",
    );
    s.push_str("# Safety\n\n");
    s.push_str(
        "This calls NVRTC directly. Every pointer must be valid for the access its role implies \
         (read for `in`, written for `out`) and for the size NVRTC will use, every program handle \
         must be live, and the function's documented preconditions must hold.\n\n",
    );
    let mut version = format!(
        "In NVRTC since CUDA {}",
        f.since.as_deref().unwrap_or("12.0")
    );
    if let Some(r) = &f.removed {
        version.push_str(&format!(
            "; no longer declared by the CUDA {r} header (the declaration is the last header's that had it)"
        ));
    }
    s.push_str(&format!(
        "{version}. NVIDIA reference: [{}]({NVRTC_DOCS}) (`{}`).",
        escape(&g.title),
        f.name.value
    ));
    s
}

/// `generated/nvrtc/functions.rs`: the symbol table and one `unsafe fn` per
/// NVRTC function.
pub fn functions(specs: &Specs) -> Result<TokenStream> {
    let mut all: Vec<(&GroupFile, &Function)> = specs.functions().map(|(_, g, f)| (g, f)).collect();
    all.sort_by(|a, b| a.1.name.value.cmp(&b.1.name.value));
    let count = Literal::usize_unsuffixed(all.len());
    let mut table = Vec::new();
    let mut fns = Vec::new();
    for (i, (g, f)) in all.iter().enumerate() {
        let name = &f.name.value;
        let sym = cstr(&f.symbol);
        let since = f.proc_version;
        let removed = f
            .removed
            .as_deref()
            .map(crate::import::merge::release_number)
            .unwrap_or(0);
        table.push(quote! { Symbol::new(#name, #sym, #since, #removed) });
        let fname = ident(name);
        let params: Vec<proc_macro2::Ident> = f.params.iter().map(|p| ident(&p.name)).collect();
        let ptypes = f
            .params
            .iter()
            .map(|p| ty(&p.ty.value))
            .collect::<Result<Vec<_>>>()?;
        let doc = docs::attrs(&raw_doc(f, g));
        let deprecated = if f.deprecated {
            quote!(#[deprecated(note = "deprecated in nvrtc.h; see the NVIDIA reference for its replacement")])
        } else {
            quote!()
        };
        let idx = Literal::usize_unsuffixed(i);
        let entry_mark = super::safety_mark(
            "`__entry` was resolved for this function, whose signature this declaration copies from nvrtc.h.",
        );
        let call_mark =
            super::safety_mark("the caller upholds this function's contract (see # Safety).");
        fns.push(quote! {
            #doc
            #deprecated
            #[inline]
            pub unsafe fn #fname(#(#params: #ptypes),*) -> nvrtcResult {
                let Some(__entry) = SYMBOLS[#idx].get() else { return NOT_AVAILABLE };
                #entry_mark
                let __nvrtc_fn = unsafe { ::core::mem::transmute::<*mut ::core::ffi::c_void, unsafe extern "C" fn(#(#ptypes),*) -> nvrtcResult>(__entry) };
                #call_mark
                unsafe { __nvrtc_fn(#(#params),*) }
            }
        });
    }
    Ok(quote! {
        use super::types::*;
        use crate::nvrtc::{NOT_AVAILABLE, Symbol};

        /// Every NVRTC function of the specs, sorted by C name, with the first
        /// release declaring it; [`crate::nvrtc::resolve`] looks entries up by name.
        pub static SYMBOLS: [Symbol; #count] = [ #(#table),* ];

        #(#fns)*
    })
}

/// `generated/nvrtc/errors.rs`: names and descriptions of `nvrtcResult`.
pub fn errors(specs: &Specs) -> Result<TokenStream> {
    let result = specs
        .enums()
        .find(|e| e.name.value == NVRTC_RESULT_ENUM)
        .ok_or("specs/nvrtc has no nvrtcResult")?;
    let values: BTreeMap<&str, i64> = result
        .values
        .iter()
        .map(|v| (v.name.value.as_str(), v.value))
        .collect();
    let mut desc = Vec::new();
    let mut seen = BTreeSet::new();
    for e in &specs.errors.errors {
        let Some(&v) = values.get(e.name.value.as_str()) else {
            continue;
        };
        if !seen.insert(v) {
            continue;
        }
        let lit = Literal::u32_unsuffixed(v as u32);
        let s = e.summary.trim();
        desc.push(quote! { #lit => Some(#s), });
    }
    Ok(quote! {
        use super::types::*;

        impl nvrtcResult {
            /// The code's name (`NVRTC_ERROR_COMPILATION`), or `None` for a code
            /// this crate does not know.
            pub const fn name(self) -> ::core::option::Option<&'static str> {
                self.variant_name()
            }
            /// One line saying what the code means, from our catalogue
            /// (`specs/nvrtc/errors.yaml`), or `None` for an unknown code.
            pub const fn description(self) -> ::core::option::Option<&'static str> {
                match self.0 { #(#desc)* _ => None }
            }
            /// Whether this is `NVRTC_SUCCESS`.
            pub const fn is_success(self) -> bool {
                self.0 == 0
            }
        }

        impl ::core::fmt::Display for nvrtcResult {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match (self.name(), self.description()) {
                    (Some(n), Some(d)) => write!(f, "{n} ({}): {d}", self.0),
                    (Some(n), None) => write!(f, "{n} ({})", self.0),
                    _ if *self == crate::nvrtc::NOT_AVAILABLE => f.write_str(
                        "NVRTC or this function is not available (cuda_sys::nvrtc::resolve says why)",
                    ),
                    _ => write!(f, "nvrtcResult {} (not known to this crate; NVRTC may be newer than CUDA 13.5)", self.0),
                }
            }
        }

        impl ::std::error::Error for nvrtcResult {}
    })
}
