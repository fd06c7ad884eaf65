//! What a forward kernel body does to its array parameters (writes,
//! accumulates into, or hands to code this reader does not follow) and
//! whether it uses tiles: facts for the launcher generator's documentation
//! and its choice of `launch_tiled` launchers, read from the same tokens as
//! the access rules. They decide no safety check.

use std::collections::BTreeMap;

use crate::hash::HashMap;

use super::tokens::{Tok, TokKind, call_args, is_punct, match_brackets, skip_balanced, tokenize};
use super::{Direction, Source, SourceError};

/// What a kernel does to one array parameter, besides reading it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Effect {
    /// Stores into it (`a[i] = v`, `wp.tile_store`, an atomic exchange,
    /// min, max or bitwise operation, or a store through an element's
    /// address or a view): `(builtin, line)` of the first store.
    Writes(String, usize),
    /// Adds into it (`wp.atomic_add`, `a[i] += v`, `wp.tile_atomic_add`).
    Accumulates(String, usize),
    /// Hands it (or a view of it) to a function this reader does not
    /// follow, which may write it.
    MayWrite(String, usize),
}

impl Effect {
    /// How strong the claim is: a known write beats a possible one, and an
    /// accumulation (which also reads) beats a plain store.
    fn rank(&self) -> u8 {
        match self {
            Effect::MayWrite(..) => 0,
            Effect::Writes(..) => 1,
            Effect::Accumulates(..) => 2,
        }
    }
}

/// The effects of one forward kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// By parameter label (`x` for `var_x`); parameters only read are absent.
    pub arrays: BTreeMap<String, Effect>,
    /// Whether the body uses Warp's tile builtins (`wp::tile_*`, besides the
    /// shared-memory allocator every kernel declares).
    pub tiles: bool,
}

/// Builtins whose first argument is the array (or element address) they store into.
const WRITES: &[&str] = &[
    "array_store",
    "store",
    "assign_inplace",
    "atomic_exch",
    "atomic_cas",
    "atomic_min",
    "atomic_max",
    "atomic_and",
    "atomic_or",
    "atomic_xor",
    "bit_and_inplace",
    "bit_or_inplace",
    "bit_xor_inplace",
    "tile_store",
    "tile_store_indexed",
];

/// Builtins whose first argument is the array (or address) they add into.
const ACCUMULATES: &[&str] = &[
    "atomic_add",
    "atomic_sub",
    "add_inplace",
    "sub_inplace",
    "tile_atomic_add",
    "tile_atomic_add_indexed",
];

/// Builtins that only read an array given to them.
const READS: &[&str] = &[
    "address",
    "view",
    "load",
    "len",
    "tile_load",
    "tile_load_indexed",
];

/// Builtins whose result points into their first argument: an element's
/// address or a view of the array.
const DERIVES: &[&str] = &["address", "view"];

/// The effects of every forward kernel of `src` (by kernel name), read
/// from `text`, the source `src` was parsed from. Linear in the size of
/// the text.
///
/// # Errors
///
/// A [`SourceError`] where `text` does not tokenize.
pub fn kernel_effects(
    text: &str,
    file: &str,
    src: &Source,
) -> Result<HashMap<String, Effects>, SourceError> {
    let toks = tokenize(text, file)?;
    let close = match_brackets(&toks);
    let wanted: HashMap<&str, usize> = src
        .kernels
        .iter()
        .enumerate()
        .filter(|(_, k)| k.direction() == Some(Direction::Forward))
        .map(|(i, k)| (k.name.as_str(), i))
        .collect();
    let mut out = HashMap::default();
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        let found = (t.kind == TokKind::Word && is_punct(toks.get(i + 1), "("))
            .then(|| wanted.get(t.text))
            .flatten()
            .filter(|_| !out.contains_key(t.text));
        let Some(&k) = found else {
            i += 1;
            continue;
        };
        // NAME ( params ) { body }
        let Some(after_params) = skip_balanced(&close, i + 1) else {
            i += 1;
            continue;
        };
        if !is_punct(toks.get(after_params), "{") {
            i += 1;
            continue;
        }
        let Some(end) = skip_balanced(&close, after_params) else {
            i += 1;
            continue;
        };
        let kernel = &src.kernels[k];
        let arrays: HashMap<&str, &str> = kernel
            .params
            .iter()
            .filter(|p| p.cpp_type.contains("array"))
            .map(|p| (p.name.as_str(), p.label()))
            .collect();
        let effects = body_effects(&toks, &close, after_params + 1, end - 1, &arrays);
        out.insert(kernel.name.clone(), effects);
        i = end;
    }
    Ok(out)
}

/// The effects of the body `toks[start..end]` on the arrays `arrays`
/// (spelled name to label).
fn body_effects(
    toks: &[Tok<'_>],
    close: &[usize],
    start: usize,
    end: usize,
    arrays: &HashMap<&str, &str>,
) -> Effects {
    let mut effects = Effects::default();
    // Names holding an element address or a view of an array parameter.
    let mut derived: HashMap<&str, &str> = HashMap::default();
    let text_at = |j: usize| toks.get(j).map_or("", |t| t.text);
    let mut note = |label: &str, effect: Effect| {
        let e = effects
            .arrays
            .entry(label.to_string())
            .or_insert(effect.clone());
        if effect.rank() > e.rank() {
            *e = effect;
        }
    };
    let mut tiles = false;
    for j in start..end.min(toks.len()) {
        let t = &toks[j];
        if t.kind != TokKind::Word {
            continue;
        }
        let builtin = j >= 2 && text_at(j - 1) == "::" && text_at(j - 2) == "wp";
        if builtin && t.text.starts_with("tile_") && t.text != "tile_shared_storage_t" {
            tiles = true;
        }
        // A call: NAME ( or, for a builtin, NAME < template args > (.
        let open = if is_punct(toks.get(j + 1), "(") {
            j + 1
        } else if builtin && is_punct(toks.get(j + 1), "<") {
            match template_end(toks, j + 1) {
                Some(o) if is_punct(toks.get(o), "(") => o,
                _ => continue,
            }
        } else {
            continue;
        };
        // Member calls and qualified names other than wp:: are not
        // function calls of the generated code's own.
        let qualified = j >= 1 && matches!(text_at(j - 1), "." | "->" | "::");
        if qualified && !builtin {
            continue;
        }
        let Some(args) = call_args(toks, close, open) else {
            continue;
        };
        let name = t.text;
        let line = t.line;
        for (pos, &(a, b)) in args.iter().enumerate() {
            if b != a + 1 || toks[a].kind != TokKind::Word {
                continue;
            }
            let arg = toks[a].text;
            let Some(label) = arrays
                .get(arg)
                .copied()
                .or_else(|| derived.get(arg).copied())
            else {
                continue;
            };
            let first = pos == 0;
            if builtin && first && WRITES.contains(&name) {
                note(label, Effect::Writes(format!("wp::{name}"), line));
            } else if builtin && first && ACCUMULATES.contains(&name) {
                note(label, Effect::Accumulates(format!("wp::{name}"), line));
            } else if builtin && first && READS.contains(&name) {
                if DERIVES.contains(&name)
                    && j >= 4
                    && text_at(j - 3) == "="
                    && toks[j - 4].kind == TokKind::Word
                {
                    derived.insert(toks[j - 4].text, label);
                }
            } else {
                let callee = if builtin {
                    format!("wp::{name}")
                } else {
                    name.to_string()
                };
                note(label, Effect::MayWrite(callee, line));
            }
        }
    }
    effects.tiles = tiles;
    effects
}

/// Index just past the `>` closing the template argument list that opens
/// at `open` (a `<`), looking at most 64 tokens ahead.
fn template_end(toks: &[Tok<'_>], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open).take(64) {
        if t.kind != TokKind::Punct {
            continue;
        }
        match t.text {
            "<" => depth += 1,
            ">" => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            ";" | "{" | "}" => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::parse_cu;

    fn effects_of(text: &str, file: &str) -> HashMap<String, Effects> {
        let src = parse_cu(text, file).unwrap();
        kernel_effects(text, file, &src).unwrap()
    }

    fn summary(e: &Effects) -> Vec<String> {
        e.arrays
            .iter()
            .map(|(p, e)| match e {
                Effect::Writes(b, _) => format!("{p}: writes ({b})"),
                Effect::Accumulates(b, _) => format!("{p}: accumulates ({b})"),
                Effect::MayWrite(b, _) => format!("{p}: may write ({b})"),
            })
            .collect()
    }

    #[test]
    fn kernels_py_writes_and_accumulations() {
        let text = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.cu");
        let all = effects_of(text, "wp_kernels.cu");
        let get = |k: &str| summary(&all[&format!("{k}_cuda_kernel_forward")]);
        assert_eq!(get("saxpy"), ["y: writes (wp::array_store)"]);
        assert_eq!(get("add2d"), ["out: writes (wp::array_store)"]);
        assert_eq!(get("chain_loss"), ["loss: accumulates (wp::atomic_add)"]);
        assert_eq!(get("count_visits"), ["count: accumulates (wp::atomic_add)"]);
        assert_eq!(get("use_struct"), ["out: writes (wp::array_store)"]);
        assert!(all.values().all(|e| !e.tiles));
        // Forward kernels only.
        assert!(!all.contains_key("saxpy_cuda_kernel_backward"));
        assert_eq!(all.len(), 10);
        // The line is the generated source's.
        let Effect::Writes(_, line) = &all["saxpy_cuda_kernel_forward"].arrays["y"] else {
            panic!("saxpy writes y");
        };
        assert!(
            text.lines()
                .nth(line - 1)
                .unwrap()
                .contains("array_store(var_y")
        );
    }

    #[test]
    fn tile_kernels_are_found_and_their_stores_are_writes() {
        let text = include_str!("../../../warp-launch/tests/fixtures/wp_tiles.cu");
        let all = effects_of(text, "wp_tiles.cu");
        for (k, e) in &all {
            assert!(e.tiles, "{k}");
        }
        let get = |k: &str| summary(&all[&format!("{k}_cuda_kernel_forward")]);
        assert_eq!(get("scale_tiles"), ["out: writes (wp::tile_store)"]);
        assert_eq!(
            get("total_sum"),
            ["total: accumulates (wp::tile_atomic_add)"]
        );
        let kernels = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.cu");
        assert!(
            effects_of(kernels, "k.cu").values().all(|e| !e.tiles),
            "the per-kernel shared-memory allocator is not tile code"
        );
    }

    #[test]
    fn calls_views_and_addresses_are_followed() {
        let text = include_str!("../../../warp-launch/tests/fixtures/wp_access.cu");
        let all = effects_of(text, "wp_access.cu");
        let get = |k: &str| summary(&all[&format!("{k}_cuda_kernel_forward")]);
        // row_view writes through a view of its array; call_func hands an
        // array to a wp.func.
        let row_view = get("row_view");
        assert!(
            row_view.iter().any(|s| s.contains("writes")),
            "{row_view:?}"
        );
        let call = get("call_func");
        assert!(call.iter().any(|s| s.contains("may write")), "{call:?}");
    }

    #[test]
    fn stores_through_an_element_address_are_writes() {
        let body = "extern \"C\" __global__ void k_cuda_kernel_forward(wp::launch_bounds_t<1> dim, wp::array_t<wp::vec_t<3,wp::float32>> var_v, wp::array_t<wp::float32> var_s)\n{\n var_0 = builtin_tid1d();\n var_1 = wp::address(var_v, var_0);\n wp::assign_inplace(var_1, 0, var_2);\n var_3 = wp::address(var_s, var_0);\n var_4 = wp::load(var_3);\n}\n";
        let all = effects_of(body, "k.cu");
        assert_eq!(
            summary(&all["k_cuda_kernel_forward"]),
            ["v: writes (wp::assign_inplace)"]
        );
    }
}
