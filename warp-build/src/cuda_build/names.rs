//! The Rust names of generated launchers: identifiers and type names made
//! from C names.

use heck::ToUpperCamelCase;
use quote::format_ident;

/// `name` as a Rust identifier: itself, `r#name` for a keyword (a file
/// `macro.cu`, a parameter `type`), `name_` for the keywords that cannot
/// be raw (`self`, `Self`, `super`, `crate`).
pub(crate) fn ident(name: &str) -> syn::Ident {
    if syn::parse_str::<syn::Ident>(name).is_ok() {
        return format_ident!("{}", name);
    }
    match name {
        "self" | "Self" | "super" | "crate" | "_" => format_ident!("{}_", name),
        _ => syn::Ident::new_raw(name, proc_macro2::Span::call_site()),
    }
}

/// The launcher type of `expression`: `histogram<64>` -> `Histogram64`.
pub(crate) fn type_name(expression: &str) -> String {
    let cleaned: String = expression
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    cleaned.to_upper_camel_case()
}
