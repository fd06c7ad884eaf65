//! Array dimensions where the declaration does not state them: from the
//! Python signature Warp copies into the source, or from how the kernel
//! indexes the array.

use std::collections::BTreeMap;

use crate::source;

/// Array dimensions from the Python signature Warp copies into the source
/// as a comment (`// def key(a: wp.array2d(dtype=...), ...):`, `line`),
/// when it is on one line; arrays it cannot read stay unknown.
pub(crate) fn ndim_hints(line: &str, key: &str) -> BTreeMap<String, u8> {
    let mut out = BTreeMap::new();
    let needle = format!("// def {key}(");
    if !line.trim_start().starts_with(&needle) {
        return out;
    }
    // The parameters, up to the `)` that closes them (or the line's end).
    let Some(parts) = source::list_items(&line.trim_start()[needle.len()..]) else {
        return out;
    };
    for p in parts {
        let Some((name, ann)) = p.split_once(':') else {
            continue;
        };
        let ann = ann.trim();
        let n = if let Some(rest) = ann.strip_prefix("wp.array") {
            if let Some(d) = rest.chars().next().and_then(|c| c.to_digit(10)) {
                Some(d as u8)
            } else if rest.starts_with('(') {
                match rest.split("ndim=").nth(1) {
                    Some(v) => v
                        .chars()
                        .next()
                        .and_then(|c| c.to_digit(10))
                        .map(|d| d as u8),
                    None => Some(1),
                }
            } else if let Some(sub) = rest.strip_prefix('[') {
                subscript_ndim(sub)
            } else {
                None
            }
        } else {
            None
        };
        if let Some(n) = n {
            out.insert(name.trim().to_string(), n);
        }
    }
    out
}

/// Dimensions of Warp's subscript annotation `wp.array[dtype]` (one) or
/// `wp.array[dtype, Literal[n]]` / `wp.array[dtype, n]` (`n`), given the
/// text after `wp.array[`.
fn subscript_ndim(sub: &str) -> Option<u8> {
    match source::list_items(sub)?.as_slice() {
        [_] => Some(1),
        [_, n] => {
            let n = n.trim();
            let n = n
                .strip_prefix("typing.")
                .unwrap_or(n)
                .strip_prefix("Literal[")
                .and_then(|l| l.strip_suffix(']'))
                .unwrap_or(n);
            n.trim().parse().ok().filter(|n| (1..=4).contains(n))
        }
        _ => None,
    }
}

/// Array dimensions from how the kernel body (`body`, the lines after the
/// kernel's name up to the next kernel) indexes parameter `var`:
/// `wp::address(var, i, j)` takes one index per dimension,
/// `wp::array_store(var, i, j, value)` one per dimension and a value. Only
/// when every such call agrees.
pub(super) fn index_arity(body: &str, var: &str) -> Option<u8> {
    let mut found: Option<usize> = None;
    for line in body.lines() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        for (call, extra) in [("wp::address(", 1usize), ("wp::array_store(", 2)] {
            let mut rest = code;
            while let Some(at) = rest.find(call) {
                rest = &rest[at + call.len()..];
                let Some(close) = rest.find(')') else { break };
                let args: Vec<&str> = rest[..close].split(',').map(str::trim).collect();
                if args.first() != Some(&var) || args.len() <= extra {
                    continue;
                }
                let n = args.len() - extra;
                if found.is_some_and(|f| f != n) {
                    return None;
                }
                found = Some(n);
            }
        }
    }
    found.filter(|n| (1..=4).contains(n)).map(|n| n as u8)
}
