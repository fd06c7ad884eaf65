//! How a kernel body indexes its array parameters: the [`Accesses`] a
//! launch checks, read from the tokens of a Warp-generated body.

use std::collections::{HashMap, HashSet};

use super::SourceParam;
use super::tokens::{Tok, TokKind, UNMATCHED, is_punct, skip_balanced, spell};
use crate::signature::{AccessTarget, Accesses, ArrayAccess, AxisIndex, Unproven};

/// Warp builtins that index an array: the name, how many value arguments
/// follow the indices, and whether the adjoint form (`adj_<name>`) ends
/// with an `adj_ret` argument. The forward form is `(array, indices...,
/// values...)`; the adjoint form is the forward arguments, then one adjoint
/// per forward argument (the array's adjoint at the same place), then
/// `adj_ret` if the function returns a value.
const ACCESS_CALLS: &[(&str, usize, bool)] = &[
    ("address", 0, true),
    ("array_store", 1, false),
    ("atomic_add", 1, true),
    ("atomic_sub", 1, true),
    ("atomic_min", 1, true),
    ("atomic_max", 1, true),
    ("atomic_and", 1, true),
    ("atomic_or", 1, true),
    ("atomic_xor", 1, true),
    ("atomic_exch", 1, true),
    ("atomic_cas", 2, true),
];

/// Warp's array types; one followed by `(` or `{` after its template
/// arguments builds an array (possibly from a raw address).
const ARRAY_TYPES: &[&str] = &[
    "array_t",
    "indexedarray_t",
    "fabricarray_t",
    "indexedfabricarray_t",
];

/// Prefixes of Warp builtins that dereference a `uint64` handle (meshes,
/// BVHs, hash grids, volumes).
const HANDLE_PREFIXES: &[&str] = &[
    "mesh_",
    "bvh_",
    "hash_grid_",
    "volume_",
    "tile_bvh_",
    "tile_mesh_",
];

/// Integer types a constant index may have.
const INT_TYPES: &[&str] = &[
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "int", "long",
    "short", "size_t", "unsigned",
];

/// Whether `toks[i]` is an array type followed by template arguments and
/// then `(` or `{`: an array built in the code. Looks at most 64 tokens
/// ahead (longer template arguments count as a construction).
fn builds_array(toks: &[Tok<'_>], i: usize) -> bool {
    let t = &toks[i];
    if t.kind != TokKind::Word || !ARRAY_TYPES.contains(&t.text) || !is_punct(toks.get(i + 1), "<")
    {
        return false;
    }
    let mut depth = 0usize;
    for j in i + 1..toks.len().min(i + 65) {
        match toks[j].text {
            "<" => depth += 1,
            ">" => {
                depth -= 1;
                if depth == 0 {
                    return is_punct(toks.get(j + 1), "(") || is_punct(toks.get(j + 1), "{");
                }
            }
            _ => {}
        }
    }
    true
}

/// Line of the first place the token stream builds an array (e.g. Warp's
/// `wp.array(ptr=...)`) or calls a builtin that dereferences a handle.
pub(super) fn raw_address_line(toks: &[Tok<'_>]) -> Option<usize> {
    (0..toks.len()).find_map(|i| {
        let t = &toks[i];
        if t.kind != TokKind::Word {
            return None;
        }
        let handle = i >= 2
            && toks[i - 1].text == "::"
            && toks[i - 2].text == "wp"
            && HANDLE_PREFIXES
                .iter()
                .any(|p| t.text.strip_prefix("adj_").unwrap_or(t.text).starts_with(p));
        (handle || builds_array(toks, i)).then_some(t.line)
    })
}

/// What one name in a kernel body is known to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fact {
    /// Component `k` of `wp.tid()` (assigned only by `builtin_tid*`).
    Tid(usize),
    /// A `const` integer.
    Const(i64),
    /// Component `k` of `wp.tid()` times a non-negative constant
    /// (`wp::mul(tid, c)`): only a tile offset may use it.
    Scaled(usize, u32),
    /// Assigned in more than one way.
    Conflict,
}

fn note(facts: &mut HashMap<String, Fact>, name: &str, fact: Fact) {
    facts
        .entry(name.to_owned())
        .and_modify(|f| {
            if *f != fact {
                *f = Fact::Conflict;
            }
        })
        .or_insert(fact);
}

/// The arguments of the call whose `(` is at `open` (its `)` at
/// `close[open]`), split at top-level commas; nested brackets are skipped
/// in constant time, so every token is looked at by one call only.
pub(super) fn call_args(
    toks: &[Tok<'_>],
    close: &[usize],
    open: usize,
) -> Option<Vec<(usize, usize)>> {
    let end = *close.get(open)?;
    if end == UNMATCHED {
        return None;
    }
    let mut args = Vec::new();
    let mut start = open + 1;
    let mut j = open + 1;
    while j < end {
        let t = &toks[j];
        if t.kind == TokKind::Punct {
            match t.text {
                "(" | "[" | "{" => {
                    j = skip_balanced(close, j)?;
                    continue;
                }
                "," => {
                    args.push((start, j));
                    start = j + 1;
                }
                _ => {}
            }
        }
        j += 1;
    }
    if start < end || !args.is_empty() {
        args.push((start, end));
    }
    Some(args)
}

/// A short text of the code around token `at` (its line, at most 24
/// tokens either side), for messages.
fn code_around(toks: &[Tok<'_>], at: usize) -> String {
    let line = toks[at].line;
    let mut from = at;
    while from > 0 && at - from < 24 && toks[from - 1].line == line {
        from -= 1;
    }
    let mut to = at + 1;
    while to < toks.len() && to - at < 24 && toks[to].line == line {
        to += 1;
    }
    spell(&toks[from..to])
}

/// Reads how a kernel body (tokens `start..end`) indexes its array
/// parameters.
///
/// An access is checkable when it is one of Warp's array builtins
/// (`wp::address`, `wp::array_store`, `wp::atomic_*`, or their `wp::adj_*`
/// forms in the backward kernel) applied to an array parameter, with every
/// index either a thread coordinate (a variable assigned only by
/// `builtin_tid*d`, never assigned again, never address-taken) or an
/// integer constant (`const` integer variable or literal). Reading an
/// array's `.shape` / `.ndim`, and `wp::len`, is harmless. Any other use of
/// an array parameter (a view, a copy, another function, a field other than
/// `shape`/`ndim`), any index built otherwise (from data, arithmetic, a
/// loop), and any array access to something that is not an array parameter
/// (a view, a struct's array, an array built from an address) makes the
/// body [`Accesses::Unproven`], naming the first such place.
pub(super) fn analyse_body(
    toks: &[Tok<'_>],
    close: &[usize],
    start: usize,
    end: usize,
    params: &[SourceParam],
    file: &str,
) -> Accesses {
    let unproven = |param: &str, line: usize, reason: String| {
        Accesses::Unproven(Unproven {
            param: param.to_owned(),
            location: format!("{file}:{line}"),
            reason,
        })
    };
    let kernel_dim = params
        .first()
        .and_then(|p| p.cpp_type.strip_prefix("wp::launch_bounds_t<"))
        .and_then(|n| n.strip_suffix('>'))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1);
    let mut arrays: HashMap<&str, (&str, bool)> = HashMap::new();
    for p in params {
        if p.cpp_type.starts_with("wp::array_t<") {
            arrays.insert(p.name.as_str(), (p.label(), p.is_adjoint()));
        } else if p.cpp_type.contains("array") {
            return unproven(
                p.label(),
                p.line,
                format!(
                    "parameter '{}' is a {}; only wp::array_t accesses are analysed",
                    p.label(),
                    p.cpp_type
                ),
            );
        }
    }
    let body = &toks[start.min(toks.len())..end.min(toks.len())];
    let at = |j: usize| body.get(j);
    let text_at = |j: usize| body.get(j).map_or("", |t| t.text);

    let local_close = close_local(close, start, body.len());
    // Pass 1: what each name holds, and which names are written.
    let mut facts: HashMap<String, Fact> = HashMap::new();
    // Positions of names whose `=` is their tid or const definition.
    let mut defining: HashSet<usize> = HashSet::new();
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word {
            continue;
        }
        if t.text == "builtin_tid1d" {
            if j >= 2 && text_at(j - 1) == "=" && at(j - 2).is_some_and(|n| n.kind == TokKind::Word)
            {
                note(&mut facts, body[j - 2].text, Fact::Tid(0));
                defining.insert(j - 2);
            }
            continue;
        }
        if let Some(n) = t
            .text
            .strip_prefix("builtin_tid")
            .and_then(|r| r.strip_suffix('d'))
            .and_then(|n| n.parse::<usize>().ok())
        {
            // builtin_tidNd(a, b, ...): the names receive the coordinates.
            if let Some(args) = call_args(body, &local_close, j + 1) {
                for (c, &(a, b)) in args.iter().enumerate().take(n) {
                    if b == a + 1 && body[a].kind == TokKind::Word {
                        note(&mut facts, body[a].text, Fact::Tid(c));
                    }
                }
            }
            continue;
        }
        if t.text == "const" {
            // const TYPE NAME = [-]NUMBER ;
            let mut k = j + 1;
            let mut last_type_word = "";
            while k < body.len().min(j + 16) && !is_punct(at(k + 1), "=") {
                if body[k].kind == TokKind::Word {
                    last_type_word = body[k].text;
                }
                k += 1;
            }
            let name_ok =
                at(k).is_some_and(|n| n.kind == TokKind::Word) && is_punct(at(k + 1), "=");
            if !name_ok || !INT_TYPES.contains(&last_type_word) {
                continue;
            }
            let (neg, num) = if text_at(k + 2) == "-" {
                (true, k + 3)
            } else {
                (false, k + 2)
            };
            let value = at(num)
                .filter(|n| n.kind == TokKind::Number)
                .and_then(|n| n.text.parse::<i64>().ok())
                .filter(|_| is_punct(at(num + 1), ";"));
            if let Some(v) = value {
                note(
                    &mut facts,
                    body[k].text,
                    Fact::Const(if neg { -v } else { v }),
                );
                defining.insert(k);
            }
        }
    }
    // `NAME = wp::mul(a, b);` with a thread coordinate and a non-negative
    // constant: a scaled coordinate (tile offsets), remembering which
    // coordinate variable it came from.
    let mut scaled_from: HashMap<&str, &str> = HashMap::new();
    for (j, t) in body.iter().enumerate() {
        let is_mul = t.text == "mul"
            && j >= 4
            && text_at(j - 1) == "::"
            && text_at(j - 2) == "wp"
            && text_at(j - 3) == "="
            && body[j - 4].kind == TokKind::Word
            && is_punct(at(j + 1), "(");
        if !is_mul {
            continue;
        }
        let Some(args) = call_args(body, &local_close, j + 1) else {
            continue;
        };
        let single = |(a, b): (usize, usize)| (b == a + 1).then(|| &body[a]);
        let [Some(x), Some(y)] = [args.first(), args.get(1)].map(|a| a.copied().and_then(single))
        else {
            continue;
        };
        if args.len() != 2 {
            continue;
        }
        let constant = |t: &Tok<'_>| -> Option<u32> {
            if t.kind == TokKind::Number {
                return t.text.parse::<u32>().ok();
            }
            match facts.get(t.text) {
                Some(Fact::Const(c)) => u32::try_from(*c).ok(),
                _ => None,
            }
        };
        let tid = |t: &Tok<'_>| match facts.get(t.text) {
            Some(Fact::Tid(k)) if t.kind == TokKind::Word => Some(*k),
            _ => None,
        };
        let found = match (tid(x), constant(y), tid(y), constant(x)) {
            (Some(k), Some(c), _, _) => Some((k, c, x.text)),
            (_, _, Some(k), Some(c)) => Some((k, c, y.text)),
            _ => None,
        };
        if let Some((k, c, from)) = found {
            let name = body[j - 4].text;
            note(&mut facts, name, Fact::Scaled(k, c));
            scaled_from.insert(name, from);
            defining.insert(j - 4);
        }
    }
    let tiles = super::tiles::tile_declarations(body);
    let mut written: HashSet<&str> = HashSet::new();
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word || defining.contains(&j) {
            continue;
        }
        let (n1, n2, n3) = (text_at(j + 1), text_at(j + 2), text_at(j + 3));
        let prev = |k: usize| if j >= k { text_at(j - k) } else { "" };
        let assigned = (n1 == "=" && n2 != "=")
            || (matches!(n1, "+" | "-" | "*" | "/" | "%" | "&" | "|" | "^") && n2 == "=")
            || (matches!(n1, "<" | ">") && n2 == n1 && n3 == "=")
            || (n1 == "+" && n2 == "+")
            || (n1 == "-" && n2 == "-");
        let touched = prev(1) == "&"
            || (prev(1) == "+" && prev(2) == "+")
            || (prev(1) == "-" && prev(2) == "-")
            || (prev(1) == "(" && prev(2).contains("assign"));
        if assigned || touched {
            written.insert(t.text);
        }
    }
    let index_of = |a: usize, b: usize| -> std::result::Result<AxisIndex, String> {
        let arg = &body[a..b];
        match arg {
            [n] if n.kind == TokKind::Number => n
                .text
                .parse::<i64>()
                .map(AxisIndex::Constant)
                .map_err(|_| format!("the index {} is not a decimal integer", n.text)),
            [m, n] if m.text == "-" && n.kind == TokKind::Number => n
                .text
                .parse::<i64>()
                .map(|v| AxisIndex::Constant(-v))
                .map_err(|_| format!("the index -{} is not a decimal integer", n.text)),
            [w] if w.kind == TokKind::Word => {
                let fact = facts.get(w.text);
                if fact.is_some() && written.contains(w.text) {
                    return Err(format!(
                        "the index `{}` is assigned again in the kernel (a loop variable or a changed value)",
                        w.text
                    ));
                }
                match fact {
                    Some(Fact::Tid(k)) if *k < kernel_dim => Ok(AxisIndex::Thread(*k)),
                    Some(Fact::Tid(k)) => Err(format!(
                        "the index `{}` is thread coordinate {k} of a kernel with {kernel_dim}",
                        w.text
                    )),
                    Some(Fact::Const(c)) => Ok(AxisIndex::Constant(*c)),
                    _ => Err(format!(
                        "the index `{}` is computed (from data or arithmetic), not a thread coordinate or a constant",
                        w.text
                    )),
                }
            }
            _ => Err(format!("the index `{}` is an expression", spell(arg))),
        }
    };

    // A tile offset: a thread coordinate (times a constant) or a constant,
    // never below 0.
    let tile_offset = |a: usize,
                       b: usize|
     -> std::result::Result<(Option<usize>, u32, u32), String> {
        let arg = &body[a..b];
        match arg {
            [n] if n.kind == TokKind::Number => {
                n.text.parse::<u32>().map(|v| (None, 0, v)).map_err(|_| {
                    format!("the offset {} is not a decimal integer below 2^32", n.text)
                })
            }
            [w] if w.kind == TokKind::Word => {
                let fact = facts.get(w.text);
                let from = scaled_from.get(w.text).copied();
                if fact.is_some()
                    && (written.contains(w.text) || from.is_some_and(|f| written.contains(f)))
                {
                    return Err(format!(
                        "the offset `{}` is assigned again in the kernel (a loop variable or a changed value)",
                        w.text
                    ));
                }
                match fact {
                    Some(Fact::Tid(k)) if *k < kernel_dim => Ok((Some(*k), 1, 0)),
                    Some(Fact::Scaled(k, m)) if *k < kernel_dim => Ok((Some(*k), *m, 0)),
                    Some(Fact::Const(c)) => u32::try_from(*c).map(|c| (None, 0, c)).map_err(|_| {
                        format!(
                            "the offset `{}` is the constant {c}, below 0 or past 2^32",
                            w.text
                        )
                    }),
                    _ => Err(format!(
                        "the offset `{}` is computed (from data, or arithmetic other than a thread coordinate times a constant)",
                        w.text
                    )),
                }
            }
            _ => Err(format!("the offset `{}` is an expression", spell(arg))),
        }
    };

    // Pass 2: Warp's array builtins.
    let mut accesses: Vec<ArrayAccess> = Vec::new();
    let mut seen: HashSet<(String, bool, Vec<AxisIndex>, bool)> = HashSet::new();
    let mut handled: HashSet<usize> = HashSet::new();
    let mut first_bad: Option<(usize, String, String)> = None;
    let mut bad = |pos: usize, param: &str, reason: String| {
        if first_bad.as_ref().is_none_or(|(p, _, _)| pos < *p) {
            first_bad = Some((pos, param.to_owned(), reason));
        }
    };
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word {
            continue;
        }
        if builds_array(body, j) {
            bad(
                j,
                "",
                format!(
                    "`{}` builds an array in the kernel (from a raw address or another array)",
                    code_around(body, j)
                ),
            );
            continue;
        }
        let in_wp = j >= 2 && text_at(j - 1) == "::" && text_at(j - 2) == "wp";
        if in_wp && is_punct(at(j + 1), "<") {
            let is_array =
                |pos: usize| body[pos].kind == TokKind::Word && arrays.contains_key(body[pos].text);
            match super::tiles::read_tile_call(body, &local_close, j, &tiles, is_array, tile_offset)
            {
                // Another templated tile builtin: below.
                super::tiles::TileCall::NotTile if t.text.starts_with("tile_") => {}
                super::tiles::TileCall::NotTile => continue,
                super::tiles::TileCall::Refused { array, reason } => {
                    let (label, _) = arrays[body[array].text];
                    handled.insert(array);
                    bad(array, label, reason);
                    continue;
                }
                super::tiles::TileCall::Access { array, indices } => {
                    let (label, adjoint) = arrays[body[array].text];
                    handled.insert(array);
                    let key = (label.to_owned(), adjoint, indices.clone(), false);
                    if seen.insert(key) {
                        accesses.push(ArrayAccess {
                            param: label.to_owned(),
                            target: if adjoint {
                                AccessTarget::Adjoint
                            } else {
                                AccessTarget::Param
                            },
                            indices,
                            null_ok: false,
                            line: body[array].line,
                        });
                    }
                    continue;
                }
            }
        }
        let is_call = in_wp && is_punct(at(j + 1), "(");
        let tile_builtin = t.text.starts_with("tile_") || t.text.starts_with("adj_tile_");
        if !is_call && !tile_builtin {
            continue;
        }
        if in_wp && tile_builtin {
            // Other tile builtins: any array parameter they take is refused.
            let open = if is_call {
                Some(j + 1)
            } else {
                super::tiles::template_call_open(body, j)
            };
            if let Some(args) = open.and_then(|open| call_args(body, &local_close, open)) {
                for (a, b) in args {
                    if b == a + 1
                        && let Some(&(label, _)) = arrays.get(body[a].text)
                    {
                        handled.insert(a);
                        bad(a, label, super::tiles::refused_builtin(t.text));
                    }
                }
            }
            continue;
        }
        if t.text == "len" {
            if let Some(args) = call_args(body, &local_close, j + 1)
                && let [(a, b)] = args[..]
                && b == a + 1
                && arrays.contains_key(body[a].text)
            {
                handled.insert(a);
            }
            continue;
        }
        let (name, adjoint_form) = match t.text.strip_prefix("adj_") {
            Some(n) => (n, true),
            None => (t.text, false),
        };
        let Some(&(_, values, ret)) = ACCESS_CALLS.iter().find(|c| c.0 == name) else {
            continue;
        };
        let Some(args) = call_args(body, &local_close, j + 1) else {
            continue;
        };
        let n = args.len();
        let k = if adjoint_form {
            let primal = n.checked_sub(usize::from(ret)).filter(|p| p % 2 == 0);
            primal.and_then(|p| (p / 2).checked_sub(1 + values))
        } else {
            n.checked_sub(1 + values)
        };
        // k == 0 is the pointer form (`atomic_add(T* p, v)`): not an array.
        let Some(k) = k.filter(|k| (1..=4).contains(k)) else {
            continue;
        };
        let mut slots = vec![args[0]];
        if adjoint_form {
            slots.push(args[1 + k + values]);
        }
        let mut indices = Vec::with_capacity(k);
        let mut index_error = None;
        for &(a, b) in &args[1..=k] {
            match index_of(a, b) {
                Ok(i) => indices.push(i),
                Err(e) => {
                    index_error = Some(e);
                    break;
                }
            }
        }
        for &(a, b) in &slots {
            let single = b == a + 1 && body[a].kind == TokKind::Word;
            let target = if single {
                arrays.get(body[a].text).copied()
            } else {
                None
            };
            let Some((label, adjoint)) = target else {
                bad(
                    a,
                    "",
                    format!(
                        "`{}` indexes `{}`, which is not an array parameter (a view, an array field of a struct, or an array built in the kernel)",
                        code_around(body, j),
                        spell(&body[a..b])
                    ),
                );
                continue;
            };
            handled.insert(a);
            if let Some(e) = &index_error {
                bad(
                    a,
                    label,
                    format!("`{}` indexes '{label}': {e}", code_around(body, j)),
                );
                continue;
            }
            let null_ok = adjoint_form;
            let key = (label.to_owned(), adjoint, indices.clone(), null_ok);
            if seen.insert(key) {
                accesses.push(ArrayAccess {
                    param: label.to_owned(),
                    target: if adjoint {
                        AccessTarget::Adjoint
                    } else {
                        AccessTarget::Param
                    },
                    indices: indices.clone(),
                    null_ok,
                    line: body[a].line,
                });
            }
        }
    }
    // Pass 3: every other use of an array parameter.
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word || handled.contains(&j) {
            continue;
        }
        let Some(&(label, _)) = arrays.get(t.text) else {
            continue;
        };
        if text_at(j + 1) == "." && matches!(text_at(j + 2), "shape" | "ndim") {
            continue;
        }
        bad(
            j,
            label,
            format!(
                "`{}` uses array '{label}' in a way a launch cannot check (a view, a copy, a call of another function, or a field other than shape)",
                code_around(body, j)
            ),
        );
    }
    match first_bad {
        Some((pos, param, reason)) => unproven(&param, body[pos].line, reason),
        None => Accesses::Checked(accesses),
    }
}

/// The bracket table of `toks[start..start + len]`, indices relative to
/// `start` (a bracket closed outside the span counts as unmatched).
fn close_local(close: &[usize], start: usize, len: usize) -> Vec<usize> {
    close[start..start + len]
        .iter()
        .map(|&c| {
            if c == UNMATCHED || c < start || c - start >= len {
                UNMATCHED
            } else {
                c - start
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::signature::{Accesses, AxisIndex};
    use crate::source::{Source, parse_cu};

    const FIXTURE_CU: &str = include_str!("../../tests/fixtures/wp_kernels.cu");
    const CU: &str = "wp_kernels.cu";

    const ACCESS_CU: &str = include_str!("../../tests/fixtures/wp_access.cu");

    fn accesses<'s>(src: &'s Source, name: &str) -> &'s Accesses {
        &src.kernel(name).unwrap().accesses
    }

    fn checked(a: &Accesses) -> Vec<(&str, bool, &[AxisIndex], bool)> {
        let Accesses::Checked(list) = a else {
            panic!("expected checked accesses, got {a:?}");
        };
        list.iter()
            .map(|a| {
                (
                    a.param.as_str(),
                    a.target == crate::signature::AccessTarget::Adjoint,
                    a.indices.as_slice(),
                    a.null_ok,
                )
            })
            .collect()
    }

    use AxisIndex::{Constant as C, Thread as T};

    #[test]
    fn every_kernel_of_kernels_py_has_checkable_accesses() {
        let src = parse_cu(FIXTURE_CU, CU).unwrap();
        assert_eq!(src.raw_addresses, None);
        for k in &src.kernels {
            assert!(
                matches!(k.accesses, Accesses::Checked(ref l) if !l.is_empty()),
                "{}: {:?}",
                k.name,
                k.accesses
            );
        }
        let f = |n: &str| checked(accesses(&src, n));
        assert_eq!(
            f("saxpy_cuda_kernel_forward"),
            [
                ("x", false, &[T(0)][..], false),
                ("y", false, &[T(0)][..], false)
            ]
        );
        assert_eq!(
            f("add2d_cuda_kernel_forward"),
            [
                ("a", false, &[T(0), T(1)][..], false),
                ("b", false, &[T(0), T(1)][..], false),
                ("out", false, &[T(0), T(1)][..], false)
            ]
        );
        // index4d reads out.shape: harmless.
        assert_eq!(
            f("index4d_cuda_kernel_forward"),
            [("out", false, &[T(0), T(1), T(2), T(3)][..], false)]
        );
        // atomic_add(loss, 0, ...): a constant index.
        assert_eq!(
            f("chain_loss_cuda_kernel_forward"),
            [
                ("y", false, &[T(0)][..], false),
                ("loss", false, &[C(0)][..], false)
            ]
        );
        assert_eq!(
            f("count_visits_cuda_kernel_forward"),
            [("count", false, &[T(0)][..], false)]
        );
        // The struct parameter is not an array; its x and out are.
        assert_eq!(
            f("use_struct_cuda_kernel_forward"),
            [
                ("x", false, &[T(0)][..], false),
                ("out", false, &[T(0)][..], false)
            ]
        );
        assert_eq!(
            f("lean_fill_cuda_kernel_forward"),
            [("out", false, &[T(0), T(1)][..], false)]
        );
        // Backward: the adjoint forms reach the primal (its grad) and the
        // adjoint array, both guarded by a null test; the replayed forward
        // reads are not guarded.
        assert_eq!(
            f("count_visits_cuda_kernel_backward"),
            [
                ("count", false, &[T(0)][..], true),
                ("count", true, &[T(0)][..], true)
            ]
        );
        assert_eq!(
            f("chain_loss_cuda_kernel_backward"),
            [
                ("y", false, &[T(0)][..], false),
                ("loss", false, &[C(0)][..], true),
                ("loss", true, &[C(0)][..], true),
                ("y", false, &[T(0)][..], true),
                ("y", true, &[T(0)][..], true)
            ]
        );
        let Accesses::Checked(l) = accesses(&src, "saxpy_cuda_kernel_forward") else {
            unreachable!()
        };
        assert_eq!((l[0].line, l[1].line), (1027, 1030));
    }

    #[test]
    fn access_fixture_checkable_kernels() {
        let src = parse_cu(ACCESS_CU, "wp_access.cu").unwrap();
        let f = |n: &str| checked(accesses(&src, n));
        assert_eq!(
            f("fill_cuda_kernel_forward"),
            [("x", false, &[T(0)][..], false)]
        );
        // x[0], x[-1] and x.shape[0].
        assert_eq!(
            f("ends_cuda_kernel_forward"),
            [
                ("x", false, &[C(0)][..], false),
                ("x", false, &[C(-1)][..], false),
                ("out", false, &[T(0)][..], false)
            ]
        );
        // out[j, i]: the second coordinate indexes axis 0.
        assert_eq!(
            f("transpose_cuda_kernel_forward"),
            [
                ("a", false, &[T(0), T(1)][..], false),
                ("out", false, &[T(1), T(0)][..], false)
            ]
        );
        assert_eq!(
            f("guarded_cuda_kernel_forward"),
            [("x", false, &[T(0)][..], false)]
        );
    }

    #[test]
    fn access_fixture_unproven_kernels_name_parameter_and_line() {
        let src = parse_cu(ACCESS_CU, "wp_access.cu").unwrap();
        for (kernel, param, line, says) in [
            ("gather", "x", 192, "`var_2` is computed"),
            ("shifted", "x", 595, "`var_2` is computed"),
            ("row_sum", "a", 706, "`var_8` is computed"),
            ("call_func", "x", 1028, "first_0(var_x)"),
            ("row_view", "a", 290, "wp::view(var_a,var_0)"),
            ("through_struct", "", 1112, "not an array parameter"),
        ] {
            for dir in ["forward", "backward"] {
                let name = format!("{kernel}_cuda_kernel_{dir}");
                let Accesses::Unproven(u) = accesses(&src, &name) else {
                    panic!("{name} should be unproven: {:?}", accesses(&src, &name));
                };
                assert_eq!(u.param, param, "{name}");
                assert!(u.reason.contains(says), "{name}: {}", u.reason);
                if dir == "forward" {
                    assert_eq!(u.location, format!("wp_access.cu:{line}"), "{name}");
                }
            }
        }
    }

    fn one_kernel(body: &str) -> Accesses {
        let text = format!(
            "extern \"C\" __global__ void k(wp::launch_bounds_t<2> dim, wp::array_t<wp::float32> var_x, wp::uint64 var_p)\n{{\n{body}\n}}\n"
        );
        let src = parse_cu(&text, "k.cu").unwrap();
        src.kernels[0].accesses.clone()
    }

    #[test]
    fn indices_that_change_or_escape_are_unproven() {
        let ok = "wp::int32 var_0; var_0 = builtin_tid1d(); wp::array_store(var_x, var_0, var_v);";
        assert!(matches!(one_kernel(ok), Accesses::Checked(ref l) if l.len() == 1));
        for (body, says) in [
            // a loop writes the coordinate back
            (
                "var_0 = builtin_tid1d(); wp::assign(var_0, var_3); wp::array_store(var_x, var_0, var_v);",
                "assigned again",
            ),
            (
                "var_0 = builtin_tid1d(); var_0 += 1; wp::address(var_x, var_0);",
                "assigned again",
            ),
            (
                "var_0 = builtin_tid1d(); var_0++; wp::address(var_x, var_0);",
                "assigned again",
            ),
            (
                "var_0 = builtin_tid1d(); f(&var_0); wp::address(var_x, var_0);",
                "assigned again",
            ),
            // a tid and a constant under one name
            (
                "var_0 = builtin_tid1d(); const wp::int32 var_0 = 3; wp::address(var_x, var_0);",
                "computed",
            ),
            // a coordinate the kernel does not have
            (
                "builtin_tid4d(var_0, var_1, var_2, var_3); wp::address(var_x, var_3);",
                "thread coordinate 3",
            ),
            // expressions
            (
                "var_0 = builtin_tid1d(); wp::address(var_x, var_0 + 1);",
                "expression",
            ),
            // a copy, a field, a raw address
            ("var_5 = var_x;", "cannot check"),
            ("var_5 = var_x.data;", "cannot check"),
            (
                "var_2 = wp::array_t<wp::float32>(var_p, var_n); wp::address(var_2, var_0);",
                "builds an array",
            ),
            // an array the kernel did not get as a parameter
            (
                "var_0 = builtin_tid1d(); wp::array_store(var_9, var_0, var_v);",
                "not an array parameter",
            ),
        ] {
            match one_kernel(body) {
                Accesses::Unproven(u) => assert!(u.reason.contains(says), "{body}: {}", u.reason),
                other => panic!("{body}: expected unproven, got {other:?}"),
            }
        }
        // Shape reads, len, comparisons and untouched constants are fine.
        let fine = "builtin_tid2d(var_0, var_1); const wp::int32 var_2 = 7; var_3 = (var_0 <= var_2); var_4 = &(var_x.shape); var_5 = wp::len(var_x); wp::atomic_cas(var_x, var_1, var_0, var_2, var_9); wp::atomic_add(var_x, var_2, var_9);";
        assert_eq!(
            checked(&one_kernel(fine)),
            [
                ("x", false, &[T(1), T(0)][..], false),
                ("x", false, &[C(7)][..], false)
            ]
        );
    }

    #[test]
    fn raw_addresses_are_found_anywhere() {
        let f = |t: &str| parse_cu(t, "r.cu").unwrap().raw_addresses;
        assert_eq!(
            f("static void g(wp::uint64 p) {\n var_1 = wp::mesh_get_point(p, 0); }"),
            Some(2)
        );
        assert_eq!(
            f("void g() {\n\n var_2 = wp::array_t<wp::float32>(var_p, var_n); }"),
            Some(3)
        );
        assert_eq!(f("struct S { wp::array_t<wp::float32> data; };"), None);
        assert_eq!(f(FIXTURE_CU), None);
    }
}
