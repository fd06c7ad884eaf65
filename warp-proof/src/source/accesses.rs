//! How a kernel body indexes its array parameters: the [`Accesses`] a
//! launch checks, read from the tokens of a Warp-generated body.

use crate::hash::{HashMap, HashSet};

use super::components::{Components, Functions, first_uncovered, local_types};
use super::tokens::{Tok, TokKind, call_args, close_local, code_around, is_punct, spell};
use super::{SourceParam, SourceStruct};
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
///
/// The reading is a row of passes, each a function below with its own
/// tests: [`kernel_dim`] and [`array_params`] read the parameters;
/// [`known_facts`] derives what the body's names hold ([`definitions`],
/// [`scaled_definitions`], [`written_names`]); [`Known::index`] and
/// [`Known::tile_offset`] classify one index expression with those facts;
/// [`builtin_accesses`] turns Warp's array builtins into rules; and
/// [`other_uses`] refuses every other use of an array parameter.
pub(super) fn analyse_body<'t>(
    toks: &[Tok<'t>],
    close: &[usize],
    (start, end): (usize, usize),
    params: &[SourceParam],
    (functions, structs): (&Functions<'t>, &[SourceStruct]),
    file: &str,
) -> Accesses {
    let mut arrays = match array_params(params) {
        Ok(arrays) => arrays,
        Err((label, line, reason)) => return unproven(file, label, line, reason),
    };
    let body = &toks[start.min(toks.len())..end.min(toks.len())];
    let local_close = close_local(close, start, body.len());
    let typed: Vec<(&str, String)> = params
        .iter()
        .map(|p| (p.name.as_str(), p.cpp_type.clone()))
        .collect();
    let known = known_facts(body, &local_close, kernel_dim(params), &typed);
    let held = super::held::held_arrays(body, &known.chains, params, structs);
    for (&copy, label) in &held.aliases {
        arrays.insert(copy, (label.as_str(), false));
    }
    let scan = Scan {
        body,
        held_pointers: &held.pointers,
        close: &local_close,
        arrays: &arrays,
        known: &known,
        tiles: super::tiles::tile_declarations(body),
    };
    let mut found = Findings::default();
    found.handled.extend(held.handled.iter().copied());
    if let Some((pos, label, reason)) = &held.bad {
        found.bad(*pos, label, reason.clone());
    }
    builtin_accesses(&scan, &mut found);
    other_uses(&scan, &mut found);
    local_indices(&scan, params, functions, &mut found);
    match found.first_bad {
        Some((pos, param, reason)) => unproven(file, &param, body[pos].line, reason),
        None => Accesses::Checked(found.accesses),
    }
}

/// Pass: every index into a local value (a vector's component, a shape's
/// dimension) and every `@wp.func` call is covered, else noted bad
/// ([`super::components`]).
fn local_indices<'t>(
    scan: &Scan<'_, 't, '_>,
    params: &[SourceParam],
    functions: &Functions<'t>,
    found: &mut Findings,
) {
    let typed: Vec<(&str, String)> = params
        .iter()
        .map(|p| (p.name.as_str(), p.cpp_type.clone()))
        .collect();
    let types = local_types(scan.body, &typed);
    let constant = |arg: &[Tok<'_>]| match scan.known.index(arg) {
        Ok(AxisIndex::Constant(v)) => Some(v),
        _ => None,
    };
    let components = Components {
        body: scan.body,
        close: scan.close,
        types: &types,
        constant: &constant,
        functions,
        this: None,
    };
    if let Some((pos, why)) = first_uncovered(&components) {
        found.bad(pos, "", why);
    }
}

/// The verdict for a body whose first uncheckable place is `file:line`.
fn unproven(file: &str, param: &str, line: usize, reason: String) -> Accesses {
    Accesses::Unproven(Unproven {
        param: param.to_owned(),
        location: format!("{file}:{line}"),
        reason,
    })
}

/// The text of token `j` of `body`, `""` past its end.
fn text_at<'t>(body: &[Tok<'t>], j: usize) -> &'t str {
    body.get(j).map_or("", |t| t.text)
}

/// Pass: how many thread coordinates the kernel has, the `N` of its first
/// parameter's `wp::launch_bounds_t<N>` (1 when there is none).
fn kernel_dim(params: &[SourceParam]) -> usize {
    params
        .first()
        .and_then(|p| p.cpp_type.strip_prefix("wp::launch_bounds_t<"))
        .and_then(|n| n.strip_suffix('>'))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
}

/// The array parameters by spelled name (`var_x`, `adj_x`): their label
/// and whether the parameter is an adjoint.
type ArrayParams<'p> = HashMap<&'p str, (&'p str, bool)>;

/// Pass: the kernel's `wp::array_t` parameters. A parameter of any other
/// array type (indexed, fabric) refuses the kernel: `Err` holds its label,
/// line and the reason.
fn array_params(params: &[SourceParam]) -> Result<ArrayParams<'_>, (&str, usize, String)> {
    let mut arrays = HashMap::default();
    for p in params {
        if p.cpp_type.starts_with("wp::array_t<") {
            arrays.insert(p.name.as_str(), (p.label(), p.is_adjoint()));
        } else if p.cpp_type.contains("array") {
            return Err((
                p.label(),
                p.line,
                format!(
                    "parameter '{}' is a {}; only wp::array_t accesses are analysed",
                    p.label(),
                    p.cpp_type
                ),
            ));
        }
    }
    Ok(arrays)
}

/// What the body's definitions establish.
#[derive(Debug, Default)]
struct Facts<'t> {
    /// What each name holds.
    of: HashMap<String, Fact>,
    /// Positions of the names whose `=` defines them (as a thread
    /// coordinate, a constant or a scaled coordinate): not a write.
    defining: HashSet<usize>,
    /// For each scaled coordinate, the coordinate variable it came from.
    scaled_from: HashMap<&'t str, &'t str>,
}

impl Facts<'_> {
    /// Records that `name` holds `fact`; a name given two different facts
    /// holds [`Fact::Conflict`].
    fn note(&mut self, name: &str, fact: Fact) {
        self.of
            .entry(name.to_owned())
            .and_modify(|f| {
                if *f != fact {
                    *f = Fact::Conflict;
                }
            })
            .or_insert(fact);
    }
}

/// Pass: the thread coordinates (`NAME = builtin_tid1d()`,
/// `builtin_tidNd(a, b, ...)`) and integer constants (`const TYPE NAME =
/// [-]NUMBER;`) the body defines.
fn definitions<'t>(body: &[Tok<'t>], close: &[usize]) -> Facts<'t> {
    let mut facts = Facts::default();
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word {
            continue;
        }
        if t.text == "builtin_tid1d" {
            if j >= 2
                && text_at(body, j - 1) == "="
                && body.get(j - 2).is_some_and(|n| n.kind == TokKind::Word)
            {
                facts.note(body[j - 2].text, Fact::Tid(0));
                facts.defining.insert(j - 2);
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
            if let Some(args) = call_args(body, close, j + 1) {
                for (c, &(a, b)) in args.iter().enumerate().take(n) {
                    if b == a + 1 && body[a].kind == TokKind::Word {
                        facts.note(body[a].text, Fact::Tid(c));
                    }
                }
            }
            continue;
        }
        if t.text == "const"
            && let Some((name, value)) = const_definition(body, j)
        {
            facts.note(body[name].text, Fact::Const(value));
            facts.defining.insert(name);
        }
    }
    facts
}

/// The `const TYPE NAME = [-]NUMBER;` at `const` token `j`, with an integer
/// type: the position of `NAME` and the value.
fn const_definition(body: &[Tok<'_>], j: usize) -> Option<(usize, i64)> {
    let at = |k: usize| body.get(k);
    let mut k = j + 1;
    let mut last_type_word = "";
    while k < body.len().min(j + 16) && !is_punct(at(k + 1), "=") {
        if body[k].kind == TokKind::Word {
            last_type_word = body[k].text;
        }
        k += 1;
    }
    let name_ok = at(k).is_some_and(|n| n.kind == TokKind::Word) && is_punct(at(k + 1), "=");
    if !name_ok || !INT_TYPES.contains(&last_type_word) {
        return None;
    }
    let (neg, num) = if text_at(body, k + 2) == "-" {
        (true, k + 3)
    } else {
        (false, k + 2)
    };
    let value = at(num)
        .filter(|n| n.kind == TokKind::Number)
        .and_then(|n| n.text.parse::<i64>().ok())
        .filter(|_| is_punct(at(num + 1), ";"))?;
    Some((k, if neg { -value } else { value }))
}

/// Pass: `NAME = wp::mul(a, b);` with a thread coordinate and a
/// non-negative constant makes `NAME` a scaled coordinate (tile offsets),
/// remembering which coordinate variable it came from.
fn scaled_definitions<'t>(body: &[Tok<'t>], close: &[usize], facts: &mut Facts<'t>) {
    for j in 0..body.len() {
        if let Some((at, k, c, from)) = scaled_definition(body, close, &facts.of, j) {
            let name = body[at].text;
            facts.note(name, Fact::Scaled(k, c));
            facts.scaled_from.insert(name, from);
            facts.defining.insert(at);
        }
    }
}

/// The scaled coordinate defined at token `j` (the `mul` of `NAME =
/// wp::mul(a, b)`): the position of `NAME`, the coordinate, the constant,
/// and the coordinate variable.
fn scaled_definition<'t>(
    body: &[Tok<'t>],
    close: &[usize],
    facts: &HashMap<String, Fact>,
    j: usize,
) -> Option<(usize, usize, u32, &'t str)> {
    let is_mul = body[j].text == "mul"
        && j >= 4
        && text_at(body, j - 1) == "::"
        && text_at(body, j - 2) == "wp"
        && text_at(body, j - 3) == "="
        && body[j - 4].kind == TokKind::Word
        && is_punct(body.get(j + 1), "(");
    if !is_mul {
        return None;
    }
    let args = call_args(body, close, j + 1)?;
    let single = |(a, b): (usize, usize)| (b == a + 1).then(|| &body[a]);
    let [Some(x), Some(y)] = [args.first(), args.get(1)].map(|a| a.copied().and_then(single))
    else {
        return None;
    };
    if args.len() != 2 {
        return None;
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
    let (k, c, from) = match (tid(x), constant(y), tid(y), constant(x)) {
        (Some(k), Some(c), _, _) => (k, c, x.text),
        (_, _, Some(k), Some(c)) => (k, c, y.text),
        _ => return None,
    };
    Some((j - 4, k, c, from))
}

/// Pass: every name the body changes outside its defining `=` (the
/// positions in `defining`).
fn written_names<'t>(body: &[Tok<'t>], defining: &HashSet<usize>) -> HashSet<&'t str> {
    body.iter()
        .enumerate()
        .filter(|&(j, t)| t.kind == TokKind::Word && !defining.contains(&j) && is_written(body, j))
        .map(|(_, t)| t.text)
        .collect()
}

/// Whether the name at `j` is changed there: assigned (`=`, `op=`, `<<=`,
/// `>>=`), incremented or decremented, address-taken (`&`, not `&&`), or the first
/// argument of a `*assign*` builtin.
pub(super) fn is_written(body: &[Tok<'_>], j: usize) -> bool {
    let (n1, n2, n3) = (
        text_at(body, j + 1),
        text_at(body, j + 2),
        text_at(body, j + 3),
    );
    let prev = |k: usize| if j >= k { text_at(body, j - k) } else { "" };
    let assigned = (n1 == "=" && n2 != "=")
        || (matches!(n1, "+" | "-" | "*" | "/" | "%" | "&" | "|" | "^") && n2 == "=")
        || (matches!(n1, "<" | ">") && n2 == n1 && n3 == "=")
        || (n1 == "+" && n2 == "+")
        || (n1 == "-" && n2 == "-");
    // `&x` takes its address; `&& x` is a logical and.
    let touched = (prev(1) == "&" && prev(2) != "&")
        || (prev(1) == "+" && prev(2) == "+")
        || (prev(1) == "-" && prev(2) == "-")
        || (prev(1) == "(" && prev(2).contains("assign"));
    assigned || touched
}

/// Everything the index classifiers know about a body's names.
#[derive(Debug)]
pub(super) struct Known<'t> {
    facts: Facts<'t>,
    /// The names the body changes ([`written_names`]).
    written: HashSet<&'t str>,
    /// The kernel's thread-coordinate count ([`kernel_dim`]).
    kernel_dim: usize,
    /// The modulo chains ([`super::modulo`]).
    chains: super::modulo::Chains<'t>,
    /// Each name's declared type ([`local_types`]).
    types: HashMap<&'t str, Option<String>>,
}

/// Passes [`definitions`], [`scaled_definitions`], the modulo chains
/// ([`super::modulo::chains`]) and [`written_names`] over one body whose
/// parameters are `params` (name and C++ type).
pub(super) fn known_facts<'t>(
    body: &[Tok<'t>],
    close: &[usize],
    kernel_dim: usize,
    params: &[(&'t str, String)],
) -> Known<'t> {
    let mut facts = definitions(body, close);
    scaled_definitions(body, close, &mut facts);
    let chains = super::modulo::chains(body, close);
    // A chain's defining `=` is no write, unless the name holds another
    // fact too (then each definition counts as a write of the other).
    let mut defining = facts.defining.clone();
    defining.extend(
        chains
            .defining
            .iter()
            .filter(|&&p| !facts.of.contains_key(body[p].text)),
    );
    let written = written_names(body, &defining);
    Known {
        facts,
        written,
        kernel_dim,
        chains,
        types: local_types(body, params),
    }
}

impl<'t> Known<'t> {
    /// Pass: one index argument of an array builtin at position `at` of the
    /// body, as the axis rule it makes, with the array (its spelled name)
    /// whose extent a [`AxisIndex::Modulo`] divides by; or why it makes
    /// none.
    fn access_index(
        &self,
        arg: &[Tok<'_>],
        at: usize,
    ) -> Result<(AxisIndex, Option<&'t str>), String> {
        if let [w] = arg
            && w.kind == TokKind::Word
            && !self.facts.of.contains_key(w.text)
        {
            let constant = |t: &Tok<'_>| match self.index(std::slice::from_ref(t)) {
                Ok(AxisIndex::Constant(c)) => Some(c),
                _ => None,
            };
            let coordinate = |t: &Tok<'_>| {
                matches!(
                    self.index(std::slice::from_ref(t)),
                    Ok(AxisIndex::Thread(_))
                )
            };
            let env = super::modulo::Env {
                written: &self.written,
                constant: &constant,
                coordinate: &coordinate,
                types: &self.types,
            };
            if let Some(r) = self.chains.resolve(w.text, at, &env) {
                return r.map(|(array, axis)| (AxisIndex::Modulo { axis }, Some(array)));
            }
        }
        self.index(arg).map(|i| (i, None))
    }

    /// Pass: one index argument of an array builtin, as the axis rule it
    /// makes (a thread coordinate or a constant), or why it makes none.
    pub(super) fn index(&self, arg: &[Tok<'_>]) -> Result<AxisIndex, String> {
        let kernel_dim = self.kernel_dim;
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
                let fact = self.facts.of.get(w.text);
                if fact.is_some() && self.written.contains(w.text) {
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
    }

    /// Pass: one tile offset argument, as `(coordinate, scale, offset)`: a
    /// thread coordinate (times a constant) or a constant, never below 0;
    /// or why it is none.
    fn tile_offset(&self, arg: &[Tok<'_>]) -> Result<(Option<usize>, u32, u32), String> {
        let kernel_dim = self.kernel_dim;
        match arg {
            [n] if n.kind == TokKind::Number => {
                n.text.parse::<u32>().map(|v| (None, 0, v)).map_err(|_| {
                    format!("the offset {} is not a decimal integer below 2^32", n.text)
                })
            }
            [w] if w.kind == TokKind::Word => {
                let fact = self.facts.of.get(w.text);
                let from = self.facts.scaled_from.get(w.text).copied();
                if fact.is_some()
                    && (self.written.contains(w.text)
                        || from.is_some_and(|f| self.written.contains(f)))
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
    }
}

/// One body under scan, with what the earlier passes found.
struct Scan<'s, 't, 'p> {
    body: &'s [Tok<'t>],
    /// Pointers to held arrays' fields, with the held array's label
    /// ([`super::held`]).
    held_pointers: &'s HashMap<&'t str, String>,
    /// The body's bracket table ([`close_local`]).
    close: &'s [usize],
    arrays: &'s ArrayParams<'p>,
    known: &'s Known<'t>,
    tiles: HashMap<&'t str, super::tiles::TileDecl>,
}

/// What the scanning passes found.
#[derive(Debug, Default)]
struct Findings {
    /// The rules, in body order, each once.
    accesses: Vec<ArrayAccess>,
    seen: HashSet<(String, bool, Vec<AxisIndex>, bool)>,
    /// Positions of the array-parameter names a builtin pass dealt with.
    handled: HashSet<usize>,
    /// The first uncheckable place: position, parameter label, reason.
    first_bad: Option<(usize, String, String)>,
}

impl Findings {
    /// Notes an uncheckable place; the earliest in the body wins.
    fn bad(&mut self, pos: usize, param: &str, reason: String) {
        if self.first_bad.as_ref().is_none_or(|(p, _, _)| pos < *p) {
            self.first_bad = Some((pos, param.to_owned(), reason));
        }
    }

    /// Adds a rule unless the same one is already there.
    fn rule(
        &mut self,
        label: &str,
        adjoint: bool,
        indices: Vec<AxisIndex>,
        null_ok: bool,
        line: usize,
    ) {
        let key = (label.to_owned(), adjoint, indices.clone(), null_ok);
        if self.seen.insert(key) {
            self.accesses.push(ArrayAccess {
                param: label.to_owned(),
                target: if adjoint {
                    AccessTarget::Adjoint
                } else {
                    AccessTarget::Param
                },
                indices,
                null_ok,
                line,
            });
        }
    }
}

/// Pass: Warp's array builtins, and arrays built in the body. Each
/// checkable access becomes a rule; each array parameter a builtin takes is
/// marked handled; each uncheckable one is noted bad.
fn builtin_accesses(scan: &Scan<'_, '_, '_>, found: &mut Findings) {
    let body = scan.body;
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word {
            continue;
        }
        if builds_array(body, j) {
            found.bad(
                j,
                "",
                format!(
                    "`{}` builds an array in the kernel (from a raw address or another array)",
                    code_around(body, j)
                ),
            );
            continue;
        }
        let in_wp = j >= 2 && text_at(body, j - 1) == "::" && text_at(body, j - 2) == "wp";
        if in_wp && is_punct(body.get(j + 1), "<") && tile_template_call(scan, found, j) {
            continue;
        }
        let is_call = in_wp && is_punct(body.get(j + 1), "(");
        let tile_builtin = t.text.starts_with("tile_") || t.text.starts_with("adj_tile_");
        if !is_call && !tile_builtin {
            continue;
        }
        if in_wp && tile_builtin {
            refuse_tile_arrays(scan, found, j, is_call);
        } else if t.text == "len" {
            len_call(scan, found, j);
        } else {
            access_call(scan, found, j);
        }
    }
}

/// The templated `wp::NAME<...>(...)` at `j` as a tile load or store;
/// `true` when that settles the token (any other templated call but a
/// `tile_*` one is no array access).
fn tile_template_call(scan: &Scan<'_, '_, '_>, found: &mut Findings, j: usize) -> bool {
    use super::tiles::TileCall;
    let body = scan.body;
    let is_array =
        |pos: usize| body[pos].kind == TokKind::Word && scan.arrays.contains_key(body[pos].text);
    let offset = |a: usize, b: usize| scan.known.tile_offset(&body[a..b]);
    match super::tiles::read_tile_call(body, scan.close, j, &scan.tiles, is_array, offset) {
        // Another templated tile builtin: refused by the caller.
        TileCall::NotTile => !body[j].text.starts_with("tile_"),
        TileCall::Refused { array, reason } => {
            let (label, _) = scan.arrays[body[array].text];
            found.handled.insert(array);
            found.bad(array, label, reason);
            true
        }
        TileCall::Access { array, indices } => {
            let (label, adjoint) = scan.arrays[body[array].text];
            found.handled.insert(array);
            found.rule(label, adjoint, indices, false, body[array].line);
            true
        }
    }
}

/// Any other tile builtin at `j`: every array parameter it takes is
/// refused.
fn refuse_tile_arrays(scan: &Scan<'_, '_, '_>, found: &mut Findings, j: usize, is_call: bool) {
    let body = scan.body;
    let open = if is_call {
        Some(j + 1)
    } else {
        super::tiles::template_call_open(body, j)
    };
    let Some(args) = open.and_then(|open| call_args(body, scan.close, open)) else {
        return;
    };
    for (a, b) in args {
        if b == a + 1
            && let Some(&(label, _)) = scan.arrays.get(body[a].text)
        {
            found.handled.insert(a);
            found.bad(a, label, super::tiles::refused_builtin(body[j].text));
        }
    }
}

/// `wp::len(ARRAY)` at `j`: harmless.
fn len_call(scan: &Scan<'_, '_, '_>, found: &mut Findings, j: usize) {
    let body = scan.body;
    if let Some(args) = call_args(body, scan.close, j + 1)
        && let [(a, b)] = args[..]
        && b == a + 1
        && scan.arrays.contains_key(body[a].text)
    {
        found.handled.insert(a);
    }
}

/// How many indices a call of an [`ACCESS_CALLS`] builtin with `n`
/// arguments has (`values` value arguments, `ret` whether the adjoint form
/// ends with `adj_ret`): 1 to 4, else `None` (0 is the pointer form
/// `atomic_add(T* p, v)`, not an array).
fn index_count(n: usize, values: usize, ret: bool, adjoint_form: bool) -> Option<usize> {
    let k = if adjoint_form {
        let primal = n.checked_sub(usize::from(ret)).filter(|p| p % 2 == 0);
        primal.and_then(|p| (p / 2).checked_sub(1 + values))
    } else {
        n.checked_sub(1 + values)
    };
    k.filter(|k| (1..=4).contains(k))
}

/// A call of an [`ACCESS_CALLS`] builtin (or its `adj_` form) at `j`: a
/// rule for its array (and, in the adjoint form, the adjoint array), or why
/// there is none.
fn access_call(scan: &Scan<'_, '_, '_>, found: &mut Findings, j: usize) {
    let body = scan.body;
    let (name, adjoint_form) = match body[j].text.strip_prefix("adj_") {
        Some(n) => (n, true),
        None => (body[j].text, false),
    };
    let Some(&(_, values, ret)) = ACCESS_CALLS.iter().find(|c| c.0 == name) else {
        return;
    };
    let Some(args) = call_args(body, scan.close, j + 1) else {
        return;
    };
    let Some(k) = index_count(args.len(), values, ret, adjoint_form) else {
        return;
    };
    let mut slots = vec![args[0]];
    if adjoint_form {
        slots.push(args[1 + k + values]);
    }
    let indices: Result<Vec<(AxisIndex, Option<&str>)>, String> = args[1..=k]
        .iter()
        .map(|&(a, b)| scan.known.access_index(&body[a..b], a))
        .collect();
    for &(a, b) in &slots {
        let single = b == a + 1 && body[a].kind == TokKind::Word;
        let target = if single {
            scan.arrays.get(body[a].text).copied()
        } else {
            None
        };
        let Some((label, adjoint)) = target else {
            found.bad(
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
        found.handled.insert(a);
        // The divisor's array: an array (parameter or held copy) with the
        // same label and target, or a pointer to the same held array.
        let same = |d: &str| {
            d == body[a].text
                || scan.arrays.get(d) == Some(&(label, adjoint))
                || (!adjoint && scan.held_pointers.get(d).is_some_and(|l| l == label))
        };
        let foreign = indices.as_ref().ok().and_then(|list| {
            list.iter()
                .find_map(|&(_, divisor)| divisor.filter(|d| !same(d)))
        });
        match (&indices, foreign) {
            (Err(e), _) => found.bad(
                a,
                label,
                format!("`{}` indexes '{label}': {e}", code_around(body, j)),
            ),
            (Ok(_), Some(d)) => found.bad(
                a,
                label,
                format!(
                    "`{}` indexes `{}` modulo the extent of `{d}`, another array (only an array's own extent is checked)",
                    code_around(body, j),
                    body[a].text
                ),
            ),
            (Ok(indices), None) => found.rule(
                label,
                adjoint,
                indices.iter().map(|&(i, _)| i).collect(),
                adjoint_form,
                body[a].line,
            ),
        }
    }
}

/// Pass: every use of an array parameter no builtin pass dealt with,
/// except reading its `.shape` or `.ndim`, is noted bad.
fn other_uses(scan: &Scan<'_, '_, '_>, found: &mut Findings) {
    let body = scan.body;
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word || found.handled.contains(&j) {
            continue;
        }
        let Some(&(label, _)) = scan.arrays.get(t.text) else {
            continue;
        };
        if text_at(body, j + 1) == "." && matches!(text_at(body, j + 2), "shape" | "ndim") {
            continue;
        }
        found.bad(
            j,
            label,
            format!(
                "`{}` uses array '{label}' in a way a launch cannot check (a view, a copy, a call of another function, or a field other than shape)",
                code_around(body, j)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::signature::{Accesses, AxisIndex};
    use crate::source::{Source, parse_cu};

    const FIXTURE_CU: &str = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.cu");
    const CU: &str = "wp_kernels.cu";

    const ACCESS_CU: &str = include_str!("../../../warp-launch/tests/fixtures/wp_access.cu");

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
        // h.data[i] * h.scale: the array held in the struct, as `h.data`.
        assert_eq!(
            f("through_struct_cuda_kernel_forward"),
            [
                ("h.data", false, &[T(0)][..], false),
                ("out", false, &[T(0)][..], false)
            ]
        );
        // Its backward kernel reaches the held array's gradient through the
        // struct's adjoint: unproven.
        let Accesses::Unproven(u) = accesses(&src, "through_struct_cuda_kernel_backward") else {
            panic!("through_struct's backward kernel should be unproven")
        };
        assert!(
            u.reason
                .contains("backward code through held arrays is not analysed"),
            "{}",
            u.reason
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

    // ---- One test per pass, on tokens of real Warp-shaped code.

    use super::{
        ArrayParams, Fact, Findings, Known, Scan, array_params, builtin_accesses, definitions,
        index_count, kernel_dim, known_facts, other_uses, scaled_definitions, written_names,
    };
    use crate::hash::HashSet;
    use crate::source::SourceParam;
    use crate::source::tokens::{Tok, match_brackets, tokenize};

    fn param(name: &str, cpp_type: &str) -> SourceParam {
        SourceParam {
            name: name.to_owned(),
            cpp_type: cpp_type.to_owned(),
            line: 7,
        }
    }

    /// `dim` of a 2-d kernel, array `var_x` and its adjoint `adj_x`.
    fn params() -> Vec<SourceParam> {
        vec![
            param("dim", "wp::launch_bounds_t<2>"),
            param("var_x", "wp::array_t<wp::float32>"),
            param("adj_x", "wp::array_t<wp::float32>"),
            param("var_v", "wp::float32"),
        ]
    }

    fn toks(text: &str) -> (Vec<Tok<'_>>, Vec<usize>) {
        let t = tokenize(text, "t.cu").unwrap();
        let close = match_brackets(&t);
        (t, close)
    }

    /// Position of the `n`th token spelled `text`.
    fn pos(body: &[Tok<'_>], text: &str, n: usize) -> usize {
        body.iter()
            .enumerate()
            .filter(|(_, t)| t.text == text)
            .nth(n)
            .unwrap()
            .0
    }

    /// Runs the scanning passes over `text` as a body of [`params`].
    fn scan(text: &str, passes: &[fn(&Scan<'_, '_, '_>, &mut Findings)]) -> Findings {
        let (body, close) = toks(text);
        let params = params();
        let arrays: ArrayParams<'_> = array_params(&params).unwrap();
        let known = known_facts(&body, &close, kernel_dim(&params), &[]);
        let pointers = crate::hash::HashMap::default();
        let scan = Scan {
            body: &body,
            held_pointers: &pointers,
            close: &close,
            arrays: &arrays,
            known: &known,
            tiles: crate::source::tiles::tile_declarations(&body),
        };
        let mut found = Findings::default();
        for pass in passes {
            pass(&scan, &mut found);
        }
        found
    }

    #[test]
    fn kernel_dim_is_the_launch_bounds_count() {
        assert_eq!(kernel_dim(&params()), 2);
        assert_eq!(kernel_dim(&[param("dim", "wp::launch_bounds_t<4>")]), 4);
        // No bounds parameter first, or no number: one coordinate.
        assert_eq!(kernel_dim(&params()[1..]), 1);
        assert_eq!(kernel_dim(&[param("dim", "wp::launch_bounds_t<N>")]), 1);
        assert_eq!(kernel_dim(&[]), 1);
    }

    #[test]
    fn array_params_are_labelled_and_other_array_types_refused() {
        let p = params();
        let arrays = array_params(&p).unwrap();
        assert_eq!(arrays.len(), 2);
        assert_eq!(arrays["var_x"], ("x", false));
        assert_eq!(arrays["adj_x"], ("x", true));
        let mut p = params();
        p.push(param("var_i", "wp::indexedarray_t<wp::float32>"));
        let (label, line, reason) = array_params(&p).unwrap_err();
        assert_eq!((label, line), ("i", 7));
        assert_eq!(
            reason,
            "parameter 'i' is a wp::indexedarray_t<wp::float32>; only wp::array_t accesses are analysed"
        );
    }

    #[test]
    fn definitions_find_thread_coordinates_and_integer_constants() {
        let (body, close) = toks(
            "var_0 = builtin_tid1d(); builtin_tid3d(var_1, var_2, var_3); \
             const wp::int32 var_4 = -5; const wp::float32 var_5 = 2; \
             const wp::int64 var_6 = 9 + 1; const wp::int32 var_1 = 3;",
        );
        let facts = definitions(&body, &close);
        let of = |n: &str| facts.of.get(n).copied();
        assert_eq!(of("var_0"), Some(Fact::Tid(0)));
        assert_eq!(of("var_2"), Some(Fact::Tid(1)));
        assert_eq!(of("var_3"), Some(Fact::Tid(2)));
        assert_eq!(of("var_4"), Some(Fact::Const(-5)));
        // A float constant and a constant expression are no facts.
        assert_eq!((of("var_5"), of("var_6")), (None, None));
        // A coordinate and a constant under one name.
        assert_eq!(of("var_1"), Some(Fact::Conflict));
        let defining: HashSet<usize> = [
            pos(&body, "var_0", 0),
            pos(&body, "var_4", 0),
            pos(&body, "var_1", 1),
        ]
        .into_iter()
        .collect();
        assert_eq!(facts.defining, defining);
    }

    #[test]
    fn scaled_definitions_are_a_coordinate_times_a_non_negative_constant() {
        let (body, close) = toks(
            "var_0 = builtin_tid1d(); const wp::int32 var_1 = 16; const wp::int32 var_9 = -2; \
             var_2 = wp::mul(var_0, var_1); var_3 = wp::mul(4, var_0); \
             var_4 = wp::mul(var_0, var_0); var_5 = wp::mul(var_0, var_9); \
             var_6 = wp::mul(var_0, 2, 3); var_7 = wp::add(var_0, 2);",
        );
        let mut facts = definitions(&body, &close);
        scaled_definitions(&body, &close, &mut facts);
        let of = |n: &str| facts.of.get(n).copied();
        assert_eq!(of("var_2"), Some(Fact::Scaled(0, 16)));
        assert_eq!(of("var_3"), Some(Fact::Scaled(0, 4)));
        for n in ["var_4", "var_5", "var_6", "var_7"] {
            assert_eq!(of(n), None, "{n}");
        }
        assert_eq!(facts.scaled_from.get("var_2"), Some(&"var_0"));
        assert_eq!(facts.scaled_from.get("var_3"), Some(&"var_0"));
        assert!(facts.defining.contains(&pos(&body, "var_2", 0)));
    }

    #[test]
    fn written_names_are_assigned_stepped_or_address_taken() {
        let (body, _) = toks(
            "var_0 = 1; var_1 += 2; var_2 <<= 1; var_3++; --var_4; f(&var_5); \
             wp::assign(var_6, 1); var_7 == var_8; var_9 <= 1; var_a < var_b;",
        );
        let written = written_names(&body, &HashSet::default());
        let want: HashSet<&str> = [
            "var_0", "var_1", "var_2", "var_3", "var_4", "var_5", "var_6",
        ]
        .into_iter()
        .collect();
        assert_eq!(written, want);
        // The defining `=` of a name is not a write.
        let written = written_names(&body, &[0].into_iter().collect());
        assert!(!written.contains("var_0") && written.contains("var_1"));
    }

    fn known(text: &str) -> (Known<'_>, impl Fn(&str) -> Vec<Tok<'_>>) {
        let (body, close) = toks(text);
        let k = known_facts(&body, &close, 2, &[]);
        (k, |arg: &str| tokenize(arg, "a.cu").unwrap())
    }

    #[test]
    fn an_index_is_a_coordinate_a_constant_or_refused_with_why() {
        let (k, arg) = known(
            "builtin_tid3d(var_0, var_1, var_2); const wp::int32 var_c = 6; \
             var_w = builtin_tid1d(); var_w += 1; var_d = wp::load(var_y, 0);",
        );
        assert_eq!(k.index(&arg("var_0")), Ok(AxisIndex::Thread(0)));
        assert_eq!(k.index(&arg("var_1")), Ok(AxisIndex::Thread(1)));
        assert_eq!(k.index(&arg("var_c")), Ok(C(6)));
        assert_eq!(k.index(&arg("3")), Ok(C(3)));
        assert_eq!(k.index(&arg("- 2")), Ok(C(-2)));
        for (a, says) in [
            (
                "var_2",
                "the index `var_2` is thread coordinate 2 of a kernel with 2",
            ),
            (
                "var_w",
                "the index `var_w` is assigned again in the kernel (a loop variable or a changed value)",
            ),
            (
                "var_d",
                "the index `var_d` is computed (from data or arithmetic), not a thread coordinate or a constant",
            ),
            ("var_0 + 1", "the index `var_0+1` is an expression"),
            ("0x10", "the index 0x10 is not a decimal integer"),
        ] {
            assert_eq!(k.index(&arg(a)), Err(says.to_owned()), "{a}");
        }
    }

    #[test]
    fn a_tile_offset_is_a_scaled_coordinate_or_a_non_negative_constant() {
        let (k, arg) = known(
            "builtin_tid2d(var_0, var_1); const wp::int32 var_8 = 8; const wp::int32 var_n = -1; \
             var_2 = wp::mul(var_1, var_8); var_3 = builtin_tid1d(); var_4 = wp::mul(var_3, 2); \
             var_3 = var_3 + 1;",
        );
        assert_eq!(k.tile_offset(&arg("var_0")), Ok((Some(0), 1, 0)));
        assert_eq!(k.tile_offset(&arg("var_2")), Ok((Some(1), 8, 0)));
        assert_eq!(k.tile_offset(&arg("var_8")), Ok((None, 0, 8)));
        assert_eq!(k.tile_offset(&arg("12")), Ok((None, 0, 12)));
        for (a, says) in [
            (
                "var_n",
                "the offset `var_n` is the constant -1, below 0 or past 2^32",
            ),
            // Scaled from a coordinate the body changes.
            (
                "var_4",
                "the offset `var_4` is assigned again in the kernel (a loop variable or a changed value)",
            ),
            ("-1", "the offset `-1` is an expression"),
            (
                "4294967296",
                "the offset 4294967296 is not a decimal integer below 2^32",
            ),
        ] {
            assert_eq!(k.tile_offset(&arg(a)), Err(says.to_owned()), "{a}");
        }
    }

    #[test]
    fn index_count_follows_each_builtins_arguments() {
        // address(a, i, j): 0 values; adj_address(a, i, j, adj_a, adj_i, adj_j, adj_ret).
        assert_eq!(index_count(3, 0, true, false), Some(2));
        assert_eq!(index_count(7, 0, true, true), Some(2));
        // atomic_cas(a, i, compare, value) and its adjoint.
        assert_eq!(index_count(4, 2, true, false), Some(1));
        assert_eq!(index_count(9, 2, true, true), Some(1));
        // adj_array_store has no adj_ret: an odd count is no call of it.
        assert_eq!(index_count(6, 1, false, true), Some(1));
        assert_eq!(index_count(7, 1, false, true), None);
        // The pointer form atomic_add(p, v), and more than 4 indices.
        assert_eq!(index_count(2, 1, true, false), None);
        assert_eq!(index_count(7, 1, true, false), None);
    }

    #[test]
    fn builtin_accesses_make_rules_and_note_the_first_bad_place() {
        let text = "builtin_tid2d(var_0, var_1); wp::array_store(var_x, var_0, var_1, var_v); \
             wp::adj_atomic_add(var_x, var_1, var_v, adj_x, adj_1, adj_v, adj_ret); \
             var_2 = wp::len(var_x); wp::array_store(var_x, var_0, var_1, var_v); \
             var_3 = wp::tile_sum(var_x); wp::address(var_y, var_0); var_4 = var_x;";
        let found = scan(text, &[builtin_accesses]);
        let rules: Vec<_> = found
            .accesses
            .iter()
            .map(|a| {
                (
                    a.param.as_str(),
                    a.target == crate::signature::AccessTarget::Adjoint,
                    a.indices.clone(),
                    a.null_ok,
                )
            })
            .collect();
        // The repeated store makes no second rule.
        assert_eq!(
            rules,
            [
                ("x", false, vec![T(0), T(1)], false),
                ("x", false, vec![T(1)], true),
                ("x", true, vec![T(1)], true),
            ]
        );
        let (body, _) = toks(text);
        // Every var_x a builtin took, and adj_x; not the copy at the end.
        let mut handled: HashSet<usize> = (0..5).map(|n| pos(&body, "var_x", n)).collect();
        handled.insert(pos(&body, "adj_x", 0));
        assert_eq!(found.handled, handled);
        let (at, param, reason) = found.first_bad.unwrap();
        assert_eq!((at, param.as_str()), (pos(&body, "var_x", 4), "x"));
        assert!(reason.contains("wp::tile_sum"), "{reason}");
        // Without the tile builtin, the first bad place is the foreign array.
        let found = scan(&text.replace("wp::tile_sum", "f"), &[builtin_accesses]);
        let (_, param, reason) = found.first_bad.unwrap();
        assert_eq!(param, "");
        assert!(
            reason.contains("indexes `var_y`, which is not an array parameter"),
            "{reason}"
        );
    }

    #[test]
    fn other_uses_refuse_what_no_builtin_took_except_shape_and_ndim() {
        let fine = scan(
            "var_0 = var_x.shape[0]; var_1 = var_x.ndim; var_x2 = 3;",
            &[other_uses],
        );
        assert_eq!(fine.first_bad, None);
        let found = scan(
            "var_0 = var_x.shape[0];\nvar_5 = adj_x;\nvar_6 = var_x.data;",
            &[other_uses],
        );
        let (at, param, reason) = found.first_bad.unwrap();
        assert_eq!((at, param.as_str()), (11, "x"));
        assert_eq!(
            reason,
            "`var_5=adj_x;` uses array 'x' in a way a launch cannot check (a view, a copy, a call of another function, or a field other than shape)"
        );
        // What a builtin pass handled is not looked at again.
        let both = scan(
            "builtin_tid1d(); wp::address(var_x, 0); var_1 = var_x.shape[0];",
            &[builtin_accesses, other_uses],
        );
        assert_eq!((both.first_bad, both.accesses.len()), (None, 1));
    }
}
