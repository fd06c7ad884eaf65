//! Rust names for spec items.

use heck::ToSnakeCase;

use crate::spec::model::Function;

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// Whether `s` is a plain Rust identifier (not a keyword).
pub fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        && !KEYWORDS.contains(&s)
}

/// A C name usable as a Rust identifier: keywords get a trailing `_`.
pub fn escape(name: &str) -> String {
    if KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

/// Copy directions and dimensionalities that `heck` splits wrongly
/// (`cuMemcpyHtoD` would become `memcpy_hto_d`).
const TOKENS: &[(&str, &str)] = &[
    ("D2D8", "_d2d8_"),
    ("D2D16", "_d2d16_"),
    ("D2D32", "_d2d32_"),
    ("HtoD", "_htod_"),
    ("DtoH", "_dtoh_"),
    ("DtoD", "_dtod_"),
    ("HtoA", "_htoa_"),
    ("AtoH", "_atoh_"),
    ("AtoD", "_atod_"),
    ("DtoA", "_dtoa_"),
    ("AtoA", "_atoa_"),
    ("2D", "_2d_"),
    ("3D", "_3d_"),
    ("D8", "_d8_"),
    ("D16", "_d16_"),
    ("D32", "_d32_"),
    ("UUID", "_uuid_"),
    ("Uuid", "_uuid_"),
    ("NvSci", "_nvsci_"),
    ("LUID", "_luid_"),
    ("Luid", "_luid_"),
    ("PCI", "_pci_"),
    ("EGL", "_egl_"),
    ("GL", "_gl_"),
    ("VDPAU", "_vdpau_"),
];

/// `heck`'s snake case of the name without its `cu` prefix.
pub fn heck_name(c_name: &str) -> String {
    c_name.strip_prefix("cu").unwrap_or(c_name).to_snake_case()
}

/// The name we propose where `heck` gets it wrong (`cuMemcpyHtoD` → `memcpy_htod`).
pub fn proposed_name(c_name: &str) -> String {
    let mut s = c_name.strip_prefix("cu").unwrap_or(c_name).to_string();
    for (from, to) in TOKENS {
        s = s.replace(from, to);
    }
    let snake = s.to_snake_case();
    snake
        .split('_')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

/// The snake_case name of a function in the safe layer.
pub fn rust_fn_name(f: &Function) -> String {
    f.rust_name
        .clone()
        .unwrap_or_else(|| heck_name(&f.name.value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heck_mangles_copy_directions_and_we_fix_them() {
        assert_eq!(heck_name("cuMemcpyHtoD"), "memcpy_hto_d");
        assert_eq!(proposed_name("cuMemcpyHtoD"), "memcpy_htod");
        assert_eq!(proposed_name("cuMemcpy3DPeerAsync"), "memcpy_3d_peer_async");
        assert_eq!(proposed_name("cuMemsetD2D32Async"), "memset_d2d32_async");
        assert_eq!(proposed_name("cuMemsetD8"), "memset_d8");
        assert_eq!(
            proposed_name("cuLaunchCooperativeKernel"),
            heck_name("cuLaunchCooperativeKernel")
        );
    }

    #[test]
    fn keywords_are_escaped() {
        assert_eq!(escape("fn"), "fn_");
        assert_eq!(escape("type"), "type_");
        assert!(!is_ident("type"));
        assert!(is_ident("launch_kernel"));
    }
}
