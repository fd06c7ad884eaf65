//! Kernel heads read from a `.cu` file: each `__global__` function's name,
//! template parameters and parameters, and the Rust type each parameter's C
//! type maps to. Only heads are read (bodies are skipped by brace depth);
//! a type outside the mapping is an error naming the line, unless the
//! build script maps it ([`CudaBuild::map_type`](super::CudaBuild::map_type)).

use std::collections::BTreeMap;

/// A `__global__` function's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub name: String,
    pub line: u32,
    pub extern_c: bool,
    /// The template's parameter names (empty: not a template).
    pub template: Vec<String>,
    /// The parameters' C types and names, unmapped.
    pub params: Vec<(String, String)>,
}

/// The C scalars and their Rust types, by size and signedness.
const SCALARS: &[(&str, &str)] = &[
    ("float", "f32"),
    ("double", "f64"),
    ("bool", "bool"),
    ("char", "i8"),
    ("signed char", "i8"),
    ("unsigned char", "u8"),
    ("short", "i16"),
    ("unsigned short", "u16"),
    ("int", "i32"),
    ("signed", "i32"),
    ("unsigned", "u32"),
    ("unsigned int", "u32"),
    ("long long", "i64"),
    ("long long int", "i64"),
    ("unsigned long long", "u64"),
    ("unsigned long long int", "u64"),
    ("size_t", "usize"),
    ("ptrdiff_t", "isize"),
    ("int8_t", "i8"),
    ("uint8_t", "u8"),
    ("int16_t", "i16"),
    ("uint16_t", "u16"),
    ("int32_t", "i32"),
    ("uint32_t", "u32"),
    ("int64_t", "i64"),
    ("uint64_t", "u64"),
];

/// The text with comments and string contents blanked, newlines kept
/// (so that offsets still give lines).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                out.push(if b[i] == b'\n' { '\n' } else { ' ' });
                i += 1;
            }
            i += 2;
        } else {
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Tokens: identifiers and numbers, string literals, single punctuation;
/// each with its line.
fn tokens(text: &str) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    let mut line = 1u32;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\n' {
            line += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_alphanumeric() || d == '_' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            out.push((text[i..end].to_string(), line));
        } else if c == '"' {
            let mut s = String::from('"');
            for (_, d) in chars.by_ref() {
                s.push(d);
                if d == '"' {
                    break;
                }
            }
            out.push((s, line));
        } else if c == '#' {
            // A directive: skip to the end of the line.
            for (_, d) in chars.by_ref() {
                if d == '\n' {
                    line += 1;
                    break;
                }
            }
        } else if !c.is_whitespace() {
            out.push((c.to_string(), line));
        }
    }
    out
}

/// Every `__global__` head of `text`, in order.
pub(crate) fn heads(text: &str) -> Vec<Head> {
    let toks = tokens(&strip(text));
    let mut out = Vec::new();
    for (i, (t, line)) in toks.iter().enumerate() {
        if t != "__global__" {
            continue;
        }
        let before: Vec<&str> = toks[i.saturating_sub(24)..i]
            .iter()
            .map(|(t, _)| t.as_str())
            .collect();
        let extern_c = before.ends_with(&["extern", "\"C\""]);
        let template = template_params(&before);
        let mut j = i + 1;
        if toks.get(j).is_some_and(|(t, _)| t == "__launch_bounds__") {
            j = skip_group(&toks, j + 1);
        }
        if toks.get(j).is_none_or(|(t, _)| t != "void") {
            continue;
        }
        // `__launch_bounds__` may also come after the return type.
        if toks
            .get(j + 1)
            .is_some_and(|(t, _)| t == "__launch_bounds__")
        {
            j = skip_group(&toks, j + 2) - 1;
        }
        let Some((name, _)) = toks.get(j + 1) else {
            continue;
        };
        if toks.get(j + 2).is_none_or(|(t, _)| t != "(") {
            continue;
        }
        let end = skip_group(&toks, j + 2);
        let inner = &toks[(j + 3).min(end)..end.saturating_sub(1).max(j + 3)];
        let params = split_params(inner);
        out.push(Head {
            name: name.clone(),
            line: *line,
            extern_c,
            template,
            params,
        });
    }
    out
}

/// The index after the bracketed group starting at `start` (`(`).
fn skip_group(toks: &[(String, u32)], start: usize) -> usize {
    let mut depth = 0i32;
    for (k, (t, _)) in toks.iter().enumerate().skip(start) {
        match t.as_str() {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The parameter names of a `template <...>` just before a head.
fn template_params(before: &[&str]) -> Vec<String> {
    let Some(t) = before.iter().rposition(|t| *t == "template") else {
        return Vec::new();
    };
    let rest = &before[t..];
    if rest.iter().any(|t| *t == ";" || *t == "}") {
        return Vec::new();
    }
    let Some(close) = rest.iter().position(|t| *t == ">") else {
        return Vec::new();
    };
    rest[2..close]
        .split(|t| *t == ",")
        .filter_map(|p| p.last().map(|s| (*s).to_string()))
        .collect()
}

/// `(type, name)` of each comma-separated parameter (commas inside `<>`
/// kept).
fn split_params(inner: &[(String, u32)]) -> Vec<(String, String)> {
    let mut params = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut depth = 0;
    let mut flush = |cur: &mut Vec<&str>| {
        if let Some((name, ty)) = cur.split_last()
            && !ty.is_empty()
        {
            params.push((normalise(ty), (*name).to_string()));
        }
        cur.clear();
    };
    for (t, _) in inner {
        match t.as_str() {
            "<" => depth += 1,
            ">" => depth -= 1,
            "," if depth == 0 => {
                flush(&mut cur);
                continue;
            }
            _ => {}
        }
        cur.push(t);
    }
    flush(&mut cur);
    params
}

/// Type tokens joined by single spaces, `__restrict__` dropped.
fn normalise(ty: &[&str]) -> String {
    ty.iter()
        .filter(|t| !matches!(**t, "__restrict__" | "__restrict" | "restrict"))
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The Rust type of C type `c` (normalised), with the build script's
/// `structs` mapping; `None` when it maps to nothing.
pub(crate) fn rust_type(c: &str, structs: &BTreeMap<String, String>) -> Option<String> {
    let words: Vec<&str> = c.split(' ').collect();
    let stars = words.iter().filter(|w| **w == "*").count();
    match stars {
        0 => {
            let base: Vec<&str> = words.into_iter().filter(|w| *w != "const").collect();
            scalar(&base.join(" "), structs)
        }
        1 if words.last() == Some(&"*") => {
            let star = words.len() - 1;
            let pointee: Vec<&str> = words[..star]
                .iter()
                .filter(|w| **w != "const")
                .copied()
                .collect();
            let is_const = words[..star].contains(&"const");
            let elem = scalar(&pointee.join(" "), structs)?;
            let wrapper = if is_const {
                "ConstDevicePtr"
            } else {
                "DevicePtr"
            };
            Some(format!("::cuda_api::{wrapper}<{elem}>"))
        }
        _ => None,
    }
}

fn scalar(c: &str, structs: &BTreeMap<String, String>) -> Option<String> {
    let c = c.strip_prefix("std :: ").unwrap_or(c);
    SCALARS
        .iter()
        .find(|(name, _)| *name == c)
        .map(|(_, r)| (*r).to_string())
        .or_else(|| structs.get(c).cloned())
}

/// The head's parameters with template arguments `args` put in for its
/// template parameters, by position.
pub(crate) fn instantiate(head: &Head, args: &[String]) -> Vec<(String, String)> {
    head.params
        .iter()
        .map(|(ty, name)| {
            let ty = ty
                .split(' ')
                .map(|w| {
                    head.template
                        .iter()
                        .position(|p| p == w)
                        .and_then(|k| args.get(k))
                        .map_or(w.to_string(), |a| a.trim().to_string())
                })
                .collect::<Vec<_>>()
                .join(" ");
            (ty, name.clone())
        })
        .collect()
}

/// `histogram<64, float>` as (`histogram`, [`64`, `float`]); a plain name
/// as itself with no arguments.
pub(crate) fn split_expression(expr: &str) -> (String, Vec<String>) {
    let expr = expr.trim();
    let Some(open) = expr.find('<') else {
        return (expr.to_string(), Vec::new());
    };
    let base = expr[..open].trim().to_string();
    let inner = expr[open + 1..].trim_end().strip_suffix('>').unwrap_or("");
    let mut args = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for c in inner.chars() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ',' if depth == 0 => {
                args.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        args.push(cur.trim().to_string());
    }
    (base, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
#include <cub/cub.cuh>
// __global__ void commented(int x) {}
template <typename T, unsigned int BINS>
__global__ void hist(const T* __restrict__ data, unsigned int n, unsigned int* bins) {
    if (n) { bins[0] = 1; }
}
struct Params { float a; int b; };
extern "C" __global__ __launch_bounds__(128) void first(int* a) { }
extern "C" __global__ void __launch_bounds__(256, 2)
step(Params p, float* out, const double* in, size_t n, long bad) { }
"#;

    #[test]
    fn heads_and_types() {
        let h = heads(TEXT);
        assert_eq!(h.len(), 3, "{h:?}");
        assert_eq!((h[1].name.as_str(), h[1].params.len()), ("first", 1));
        let h = [h[0].clone(), h[2].clone()];
        assert_eq!(
            (h[0].name.as_str(), h[0].line, h[0].extern_c),
            ("hist", 5, false)
        );
        assert_eq!(h[0].template, ["T", "BINS"]);
        assert_eq!(
            h[0].params[0],
            ("const T *".to_string(), "data".to_string())
        );
        let inst = instantiate(&h[0], &["unsigned char".into(), "64".into()]);
        let none = BTreeMap::new();
        let types: Vec<Option<String>> = inst.iter().map(|(t, _)| rust_type(t, &none)).collect();
        assert_eq!(
            types,
            [
                Some("::cuda_api::ConstDevicePtr<u8>".to_string()),
                Some("u32".to_string()),
                Some("::cuda_api::DevicePtr<u32>".to_string()),
            ]
        );
        assert_eq!(
            (h[1].name.as_str(), h[1].extern_c, h[1].line),
            ("step", true, 10)
        );
        let mut structs = BTreeMap::new();
        assert_eq!(
            rust_type("Params", &structs),
            None,
            "a struct needs a mapping"
        );
        structs.insert("Params".to_string(), "crate::Params".to_string());
        assert_eq!(
            rust_type("Params", &structs).as_deref(),
            Some("crate::Params")
        );
        assert_eq!(
            rust_type("long", &structs),
            None,
            "long's size differs by platform"
        );
        assert_eq!(rust_type("float * *", &structs), None);
        assert_eq!(
            rust_type("const double *", &structs).as_deref(),
            Some("::cuda_api::ConstDevicePtr<f64>")
        );
    }

    #[test]
    fn name_expressions_split() {
        assert_eq!(
            split_expression("hist<unsigned char, 64>"),
            (
                "hist".to_string(),
                vec!["unsigned char".to_string(), "64".to_string()]
            )
        );
        assert_eq!(split_expression("k"), ("k".to_string(), vec![]));
    }
}
