//! Rustdoc text for generated items: our words plus facts, with links to
//! NVIDIA's reference pages.

use proc_macro2::TokenStream;
use quote::quote;

use crate::spec::model::*;

/// Base of NVIDIA's driver API reference.
pub const NVIDIA_DOCS: &str = "https://docs.nvidia.com/cuda/cuda-driver-api";

/// The reference page of a `\defgroup` (`CUDA_MEM` → `group__CUDA__MEM.html`).
pub fn group_url(group: &str) -> String {
    format!("{NVIDIA_DOCS}/group__{}.html", group.replace('_', "__"))
}

/// The reference page for the data types (enums, structs, typedefs).
pub fn types_url() -> String {
    group_url("CUDA_TYPES")
}

/// Escapes text for Markdown where it is not meant as markup (`[DEPRECATED]`).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => in_code = !in_code,
            '[' | ']' if !in_code => out.push('\\'),
            _ => {}
        }
        out.push(c);
    }
    out
}

/// One inner `#![doc]` attribute per line (module docs).
pub fn inner_attrs(text: &str) -> TokenStream {
    let lines = text.lines().map(|l| {
        if l.is_empty() {
            String::new()
        } else {
            format!(" {l}")
        }
    });
    quote! { #( #![doc = #lines] )* }
}

/// One `#[doc]` attribute per line, so the output reads as `///` comments.
pub fn attrs(text: &str) -> TokenStream {
    let lines = text.lines().map(|l| {
        if l.is_empty() {
            String::new()
        } else {
            format!(" {l}")
        }
    });
    quote! { #( #[doc = #lines] )* }
}

/// The rustdoc of a raw binding.
pub fn raw_function(f: &Function, g: &GroupFile) -> String {
    let mut s = String::new();
    match &f.summary {
        Some(sum) => s.push_str(&escape(sum.trim())),
        None => s.push_str(&format!(
            "Raw binding to `{}` from the driver's {} API.",
            f.name.value,
            escape(&g.title)
        )),
    }
    s.push_str("\n\n");
    if f.deprecated {
        s.push_str("Deprecated by NVIDIA; kept so existing programs still link.\n\n");
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
        s.push_str("The header documents: ");
        let links: Vec<String> = f
            .errors
            .iter()
            .map(|e| format!("[`{0}`](crate::CUresult::{0})", e.value))
            .collect();
        s.push_str(&links.join(", "));
        s.push('.');
    }
    s.push_str(
        " When the driver library or this entry point cannot be loaded, returns \
         [`CUDA_ERROR_NOT_FOUND`](crate::CUresult::CUDA_ERROR_NOT_FOUND) without calling anything; \
         [`crate::loader::resolve`] says why; so does a driver older than the ABI's CUDA version, \
         which is not asked for the entry point at all.\n\n",
    );
    s.push_str("# Safety\n\n");
    s.push_str(
        "This calls the driver directly. Every pointer must be valid for the access its role implies \
         (read for `in`, written for `out`) and for the element count the driver will use, every handle \
         must be live and belong to the current context where the driver requires one, and the function's \
         documented preconditions must hold.\n\n",
    );
    let mut version = match &f.since {
        Some(v) => format!("; first in CUDA {v}"),
        None => String::new(),
    };
    if let Some(r) = &f.removed {
        version.push_str(&format!(
            "; no longer declared by the CUDA {r} header (the declaration is the last header's that had it)"
        ));
    }
    for a in &f.abi {
        version.push_str(&format!(
            "; in the CUDA {} header: symbol `{}` (ABI of CUDA {}){}",
            a.release,
            a.symbol,
            crate::import::header::version_string(a.proc_version),
            if a.params.is_some() {
                ", other parameters"
            } else {
                ""
            }
        ));
    }
    s.push_str(&format!(
        "Resolves symbol `{}` (ABI of CUDA {}){version}. NVIDIA reference: [{}]({}) (`{}`).",
        f.symbol,
        crate::import::header::version_string(f.proc_version),
        escape(&g.title),
        group_url(&g.group),
        f.name.value
    ));
    s
}
