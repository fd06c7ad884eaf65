//! Naming rules shared by the importer, the spec checks and the generator:
//! which C names are valid Rust identifiers, how keywords are escaped (and
//! how bindgen's escaping is undone), and how a C function or parameter name
//! becomes the thin layer's snake_case name.
//!
//! This module sits below `import`, `spec` and `codegen` and depends on none of
//! them, so the name `import` proposes for a function is by construction the
//! one `codegen` renders.

use heck::ToSnakeCase;

/// Rust's strict and reserved keywords (2024 edition, `gen` included).
pub const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// Whether `s` is a C identifier: ASCII letters, digits and `_`, not starting
/// with a digit. Keywords are allowed: the generator escapes them
/// (`type` → `type_`), so every such name makes a valid Rust identifier.
pub fn is_c_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Whether `s` is a plain Rust identifier (a C identifier that is not a keyword).
pub fn is_ident(s: &str) -> bool {
    is_c_ident(s) && !KEYWORDS.contains(&s)
}

/// A C name usable as a Rust identifier: keywords get a trailing `_`, as
/// bindgen does.
pub fn escape(name: &str) -> String {
    if KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

/// The C name behind a Rust identifier that [`escape`] (or bindgen) produced:
/// `type_` → `type`; any other name is returned as it is.
pub fn unescape(rust: &str) -> &str {
    match rust.strip_suffix('_') {
        Some(stem) if KEYWORDS.contains(&stem) => stem,
        _ => rust,
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

/// `heck`'s snake case of a function name without its `cu` prefix: the name
/// the generator uses when the spec gives no `rust_name`.
pub fn heck_name(c_name: &str) -> String {
    c_name
        .strip_prefix("cu")
        .or_else(|| c_name.strip_prefix("nvrtc"))
        .unwrap_or(c_name)
        .to_snake_case()
}

/// The name the importer proposes where `heck` gets it wrong
/// (`cuMemcpyHtoD` → `memcpy_htod`); the importer writes it into the spec as
/// `rust_name` only when it differs from [`heck_name`].
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

/// The thin layer's name of a function: the spec's `rust_name` where it
/// gives one, else [`heck_name`].
pub fn fn_name(c_name: &str, rust_name: Option<&str>) -> String {
    match rust_name {
        Some(n) => n.to_string(),
        None => heck_name(c_name),
    }
}

/// The thin layer's snake_case name of a C parameter (or any other C name):
/// `heck`'s snake case, keywords escaped (`hStream` → `h_stream`).
pub fn snake(c_name: &str) -> String {
    escape(&c_name.to_snake_case())
}

/// The thin layer's name of a parameter: the spec's `rust_name` where it
/// gives one, else [`snake`] of the C name.
pub fn param_name(c_name: &str, rust_name: Option<&str>) -> String {
    match rust_name {
        Some(n) => n.to_string(),
        None => snake(c_name),
    }
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
    fn keywords_are_escaped_and_unescaped() {
        assert_eq!(escape("fn"), "fn_");
        assert_eq!(escape("type"), "type_");
        assert!(!is_ident("type"));
        assert!(is_c_ident("type"));
        assert!(is_ident("launch_kernel"));
        assert!(!is_c_ident("2d"));
        for k in KEYWORDS {
            assert_eq!(unescape(&escape(k)), *k);
        }
        assert_eq!(unescape("flags_"), "flags_");
        assert_eq!(unescape("hStream"), "hStream");
    }

    #[test]
    fn function_and_parameter_names() {
        assert_eq!(fn_name("cuCtxCreate", None), "ctx_create");
        assert_eq!(fn_name("cuMemcpyHtoD", Some("memcpy_htod")), "memcpy_htod");
        assert_eq!(param_name("hStream", None), "h_stream");
        assert_eq!(param_name("type", None), "type_");
        assert_eq!(param_name("dstDevice", Some("dst")), "dst");
    }
}
