//! How a kernel body indexes its array parameters: the [`Accesses`] a
//! launch checks, read from the tokens of a Warp-generated body.

use crate::hash::{HashMap, HashSet};

use super::components::{Components, Functions, first_uncovered};
use super::known::{Known, known_facts, local_types};
use super::tokens::{Tok, TokKind, call_args, close_local, code_around, is_punct, spell, text_at};
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
        ArrayParams, Findings, Scan, array_params, builtin_accesses, index_count, kernel_dim,
        known_facts, other_uses,
    };
    use crate::hash::HashSet;
    use crate::source::SourceParam;
    use crate::source::tokens::test_support::{pos, toks};

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
