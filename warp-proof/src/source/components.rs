//! Indices into local values: components of vectors, matrices,
//! quaternions and transforms, and the dimensions of an array's shape
//! (`x.shape[k]`: `wp::extract(shape_t, k)`). Warp checks these indices
//! only in debug builds (`NDEBUG` unset), and `shape_t`'s not even there;
//! warp-build builds release, so an index the reader cannot bound reads or
//! writes the thread's stack at a caller-chosen offset. Every such index
//! must be a constant inside the value's extent, or the body is unproven.
//!
//! The same holds for the `@wp.func` functions a body calls: a function
//! body is covered when its own component indices are constants in range
//! and every function it calls is covered ([`user_functions`]). A function
//! body is not proven with its arguments: a call of a function that indexes
//! with a parameter makes the kernel unproven.

use crate::hash::HashMap;

use super::known::{known_facts, local_types};
use super::tokens::{
    Tok, TokKind, UNMATCHED, call_args, close_local, code_around, is_punct, skip_balanced, spell,
};
use crate::signature::AxisIndex;

/// Warp builtins that index a local value: the name, the value arguments
/// after the indices, and whether the adjoint form ends with `adj_ret`
/// (the forms as in [`super::accesses`]'s array builtins).
const COMPONENT_CALLS: &[(&str, usize, bool)] = &[
    ("extract", 0, true),
    ("index", 0, true),
    ("indexref", 0, true),
    ("assign_inplace", 1, false),
    ("assign_copy", 1, true),
    ("add_inplace", 1, false),
    ("sub_inplace", 1, false),
    ("bit_and_inplace", 1, false),
    ("bit_or_inplace", 1, false),
    ("bit_xor_inplace", 1, false),
];

/// The extents a value of C++ type `ty` (spelled as [`spell`] writes it)
/// has per index: `vec_t<N, T>` `[N]`, `mat_t<R, C, T>` `[R, C]`,
/// `quat_t<T>` `[4]`, `transform_t<T>` `[7]`, `shape_t` `[4]` (Warp's
/// array dimensions). A pointer or reference is to such a value.
pub(super) fn extents(ty: &str) -> Option<Vec<i64>> {
    let ty = ty.strip_prefix("const ").unwrap_or(ty);
    let ty = ty.trim_end_matches(['*', '&']);
    let ty = ty.strip_prefix("wp::").unwrap_or(ty);
    let args = |rest: &str| -> Option<Vec<i64>> {
        let inner = rest.strip_prefix('<')?.strip_suffix('>')?;
        inner
            .split(',')
            .map_while(|a| a.parse().ok())
            .collect::<Vec<i64>>()
            .into()
    };
    if ty == "shape_t" {
        return Some(vec![4]);
    }
    if let Some(rest) = ty.strip_prefix("vec_t") {
        let n = args(rest)?;
        return (n.len() == 1).then_some(n);
    }
    if let Some(rest) = ty.strip_prefix("mat_t") {
        let n = args(rest)?;
        return (n.len() == 2).then_some(n);
    }
    if ty.starts_with("quat_t<") {
        return Some(vec![4]);
    }
    if ty.starts_with("transform_t<") {
        return Some(vec![7]);
    }
    None
}

/// Each `@wp.func` of a module by C++ name: `None` when its body is
/// covered, else why not ([`user_functions`]).
pub(super) type Functions<'t> = HashMap<&'t str, Option<String>>;

/// What a component pass needs about one body.
pub(super) struct Components<'a, 't> {
    pub body: &'a [Tok<'t>],
    pub close: &'a [usize],
    /// Each name's declared type ([`local_types`]).
    pub types: &'a HashMap<&'t str, Option<String>>,
    /// The value of an index argument when it is a constant.
    pub constant: &'a dyn Fn(&[Tok<'_>]) -> Option<i64>,
    /// Each `@wp.func` of the module by C++ name: `None` when its body is
    /// covered, else why not ([`user_functions`]).
    pub functions: &'a Functions<'t>,
    /// The function whose body this is (`None` for a kernel): a call of
    /// itself is uncovered.
    pub this: Option<&'t str>,
}

/// The first place in the body that indexes a local value with anything
/// but a constant in range, or calls a function whose body does: its
/// position and why.
pub(super) fn first_uncovered(c: &Components<'_, '_>) -> Option<(usize, String)> {
    let body = c.body;
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word || !is_punct(body.get(j + 1), "(") {
            continue;
        }
        let in_wp = j >= 2 && body[j - 1].text == "::" && body[j - 2].text == "wp";
        let qualified = j >= 1 && body[j - 1].text == "::";
        let why = if in_wp {
            component_call(c, j)
        } else if qualified {
            None
        } else {
            function_call(c, j)
        };
        if let Some(why) = why {
            return Some((j, why));
        }
    }
    None
}

/// The call of a `@wp.func` (or its adjoint) at `j`: why it is uncovered.
fn function_call(c: &Components<'_, '_>, j: usize) -> Option<String> {
    let name = c.body[j].text;
    if c.this
        .is_some_and(|this| name == this || name.strip_prefix("adj_") == Some(this))
    {
        return Some(format!(
            "`{}` calls the function it is in (a recursion the reader does not follow)",
            code_around(c.body, j)
        ));
    }
    let (func, why) = c
        .functions
        .get_key_value(name)
        .or_else(|| c.functions.get_key_value(name.strip_prefix("adj_")?))?;
    let why = why.as_ref()?;
    Some(format!(
        "`{}` calls the @wp.func `{func}`, whose body is not covered: {why} (function bodies are not proven with their arguments)",
        code_around(c.body, j)
    ))
}

/// The call of Warp builtin `wp::NAME` at `j`: why its component index is
/// not covered, if it indexes a local value.
fn component_call(c: &Components<'_, '_>, j: usize) -> Option<String> {
    let body = c.body;
    let (name, adjoint_form) = match body[j].text.strip_prefix("adj_") {
        Some(n) => (n, true),
        None => (body[j].text, false),
    };
    let &(_, values, ret) = COMPONENT_CALLS.iter().find(|e| e.0 == name)?;
    let code = code_around(body, j);
    let Some(args) = call_args(body, c.close, j + 1) else {
        return Some(format!("`{code}`: its arguments are not closed"));
    };
    let n = args.len();
    let k = if adjoint_form {
        n.checked_sub(usize::from(ret))
            .filter(|p| p % 2 == 0)
            .and_then(|p| (p / 2).checked_sub(1 + values))
    } else {
        n.checked_sub(1 + values)
    };
    let Some(k) = k.filter(|k| (1..=2).contains(k)) else {
        return Some(format!(
            "`{code}` has {n} argument(s), not a form of wp::{name} the reader knows"
        ));
    };
    let (a, b) = args[0];
    let container = (b == a + 1 && body[a].kind == TokKind::Word).then(|| body[a].text);
    let ty = container.and_then(|v| c.types.get(v).cloned().flatten());
    let Some(ext) = ty.as_deref().and_then(extents).filter(|e| e.len() >= k) else {
        return Some(format!(
            "`{code}` indexes `{}`, whose type ({}) the reader does not bound",
            spell(&body[a..b]),
            ty.as_deref().unwrap_or("not declared in the body")
        ));
    };
    for (axis, &(x, y)) in args[1..=k].iter().enumerate() {
        let index = &body[x..y];
        match (c.constant)(index) {
            Some(v) if (0..ext[axis]).contains(&v) => {}
            got => {
                return Some(format!(
                    "`{code}` indexes the local `{}` (a {}) with `{}`, {}: Warp checks such indices only in debug builds (never for a shape), and warp-build builds release",
                    spell(&body[a..b]),
                    ty.as_deref().unwrap_or_default(),
                    spell(index),
                    match got {
                        Some(v) => format!("the constant {v}, outside 0..{}", ext[axis]),
                        None => format!("not a constant (it must be one below {})", ext[axis]),
                    }
                ));
            }
        }
    }
    None
}

/// Every `static CUDA_CALLABLE ... NAME(PARAMS) { BODY }` at the top level
/// of a Warp-generated file (the `@wp.func`s, their adjoints and native
/// snippets), in file order, each with `None` when its body is covered or
/// why not. Warp emits callees before callers: a call of a function not
/// yet seen reads as a builtin, which is sound because a C++ function must
/// be declared before its call and Warp declares none ahead; a call of
/// itself is uncovered, and so is a function of a form not read.
pub(super) fn user_functions<'t>(toks: &[Tok<'t>], close: &[usize]) -> Functions<'t> {
    let mut functions: Functions<'t> = HashMap::default();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        match (t.kind, t.text) {
            (TokKind::Punct, "{") => depth += 1,
            (TokKind::Punct, "}") => depth = depth.saturating_sub(1),
            (TokKind::Word, "CUDA_CALLABLE") if depth == 0 => {
                if let Some((name, verdict, next)) = function_at(toks, close, i, &functions) {
                    functions.insert(name, verdict);
                    i = next;
                    continue;
                }
                // A head or body of another form: its calls are uncovered.
                if let Some(name) = (i + 1..toks.len().min(i + 64))
                    .find(|&k| is_punct(toks.get(k), "("))
                    .and_then(|k| toks.get(k - 1))
                    .filter(|n| n.kind == TokKind::Word)
                {
                    functions.insert(
                        name.text,
                        Some("its definition is not in a form the reader reads".into()),
                    );
                }
            }
            _ => {}
        }
        i += 1;
    }
    functions
}

/// The function whose head holds `CUDA_CALLABLE` at `at`: its name, its
/// verdict and the index after its body; `None` for a declaration or a
/// form not read.
fn function_at<'t>(
    toks: &[Tok<'t>],
    close: &[usize],
    at: usize,
    seen: &Functions<'t>,
) -> Option<(&'t str, Option<String>, usize)> {
    let open = (at + 1..toks.len().min(at + 64)).find(|&k| is_punct(toks.get(k), "("))?;
    let name = toks.get(open - 1).filter(|n| n.kind == TokKind::Word)?.text;
    let params_end = skip_balanced(close, open)?;
    if !is_punct(toks.get(params_end), "{") || close[params_end] == UNMATCHED {
        return None;
    }
    let body_end = close[params_end];
    let params: Vec<(&str, String)> =
        super::tokens::split_top_level_commas(&toks[open + 1..params_end - 1])
            .into_iter()
            .filter_map(|p| {
                let (last, ty) = p.split_last()?;
                (last.kind == TokKind::Word).then(|| (last.text, spell(ty)))
            })
            .collect();
    let body = &toks[params_end + 1..body_end];
    let local_close = close_local(close, params_end + 1, body.len());
    let known = known_facts(body, &local_close, 1, &params);
    let constant = |arg: &[Tok<'_>]| match known.index(arg) {
        Ok(AxisIndex::Constant(v)) => Some(v),
        _ => None,
    };
    let types = local_types(body, &params);
    let verdict = first_uncovered(&Components {
        body,
        close: &local_close,
        types: &types,
        constant: &constant,
        functions: seen,
        this: Some(name),
    })
    .map(|(_, why)| why);
    Some((name, verdict, body_end + 1))
}

#[cfg(test)]
mod tests {
    use super::extents;
    use crate::signature::Accesses;
    use crate::source::parse_cu;

    /// Warp 1.19.0's output for `tests/warp/attacks/local_components.py`.
    const ATTACK: &str =
        include_str!("../../../warp-launch/tests/fixtures/attacks/wp_local_components.cu");

    fn reason(text: &str, kernel: &str) -> Option<String> {
        let src = parse_cu(text, "wp_m.cu").unwrap();
        match &src
            .kernels
            .iter()
            .find(|k| k.name == kernel)
            .unwrap()
            .accesses
        {
            Accesses::Unproven(u) => Some(u.reason.clone()),
            Accesses::Checked(_) => None,
        }
    }

    #[test]
    fn the_attack_kernels_are_unproven_forward_and_backward() {
        for (kernel, says) in [
            ("vec_local_write_cuda_kernel_forward", "the local `var_4`"),
            ("vec_local_write_cuda_kernel_backward", "the local `var_4`"),
            (
                "shape_index_cuda_kernel_forward",
                "the local `var_3` (a wp::shape_t)",
            ),
            (
                "shape_index_cuda_kernel_backward",
                "the local `var_3` (a wp::shape_t)",
            ),
        ] {
            let why = reason(ATTACK, kernel).unwrap_or_else(|| panic!("{kernel} proven"));
            assert!(why.contains(says), "{kernel}: {why}");
            assert!(why.contains("with `var_k`, not a constant"), "{why}");
        }
    }

    /// A kernel body around one statement, with a vec3 `v`, a mat22 `m`,
    /// a shape `s` and a parameter `var_k`.
    fn kernel(stmt: &str, functions: &str) -> String {
        format!(
            r#"{functions}
extern "C" __global__ void k_cuda_kernel_forward(
    wp::launch_bounds_t<1> dim,
    wp::array_t<wp::float32> var_x,
    wp::int32 var_k)
{{
    for (size_t _idx = 0; _idx < dim.size; _idx += 1)
    {{
        wp::int32 var_0;
        const wp::int32 var_1 = 1;
        const wp::int32 var_2 = 3;
        wp::vec_t<3, wp::float32> var_v;
        wp::mat_t<2, 2, wp::float32> var_m;
        wp::shape_t var_s;
        wp::float32 var_f;
        var_0 = builtin_tid1d();
        {stmt}
        wp::array_store(var_x, var_0, var_f);
    }}
}}
"#
        )
    }

    #[test]
    fn constant_indices_inside_the_value_are_proven_and_others_not() {
        for ok in [
            "var_f = wp::extract(var_v, 0);",
            "var_f = wp::extract(var_v, var_1);",
            "var_f = wp::extract(var_m, 1, var_1);",
            "wp::assign_inplace(var_v, 2, var_f);",
            "var_f = wp::extract(var_s, 3);",
            "var_f = wp::length(var_v);",
        ] {
            assert_eq!(
                reason(&kernel(ok, ""), "k_cuda_kernel_forward"),
                None,
                "{ok}"
            );
        }
        for (bad, says) in [
            ("var_f = wp::extract(var_v, var_k);", "not a constant"),
            (
                "var_f = wp::extract(var_v, var_2);",
                "the constant 3, outside 0..3",
            ),
            ("var_f = wp::extract(var_v, -1);", "the constant -1"),
            ("var_f = wp::extract(var_m, 0, var_k);", "not a constant"),
            (
                "var_f = wp::extract(var_m, 2, 0);",
                "the constant 2, outside 0..2",
            ),
            ("wp::assign_inplace(var_v, var_k, var_f);", "not a constant"),
            ("wp::add_inplace(var_v, var_0, var_f);", "not a constant"),
            (
                "var_f = wp::extract(var_s, 4);",
                "the constant 4, outside 0..4",
            ),
            ("var_f = wp::extract(var_s, var_k);", "not a constant"),
            ("var_f = wp::extract(var_q, 0);", "does not bound"),
            (
                "var_f = wp::extract(wp::vec_t<3, wp::float32>(), 0);",
                "does not bound",
            ),
            ("var_f = wp::index(var_v, var_k);", "not a constant"),
            ("var_f = wp::extract(var_v);", "not a form"),
        ] {
            let why = reason(&kernel(bad, ""), "k_cuda_kernel_forward")
                .unwrap_or_else(|| panic!("{bad} proven"));
            assert!(why.contains(says), "{bad}: {why}");
        }
    }

    const PICK: &str = r#"
static CUDA_CALLABLE wp::float32 pick_0(
    wp::vec_t<3, wp::float32> var_v,
    wp::int32 var_i)
{
    wp::float32 var_0;
    var_0 = wp::extract(var_v, var_i);
    return var_0;
}
static CUDA_CALLABLE wp::float32 first_0(
    wp::vec_t<3, wp::float32> var_v)
{
    const wp::int32 var_0 = 0;
    wp::float32 var_1;
    var_1 = wp::extract(var_v, var_0);
    return var_1;
}
static CUDA_CALLABLE wp::float32 via_0(
    wp::vec_t<3, wp::float32> var_v)
{
    wp::float32 var_1;
    var_1 = pick_0(var_v, 0);
    return var_1;
}
"#;

    #[test]
    fn calls_of_functions_whose_indices_are_not_covered_are_unproven() {
        let ok = kernel("var_f = first_0(var_v);", PICK);
        assert_eq!(reason(&ok, "k_cuda_kernel_forward"), None);
        for (bad, says) in [
            ("var_f = pick_0(var_v, 0);", "the @wp.func `pick_0`"),
            ("var_f = via_0(var_v);", "the @wp.func `via_0`"),
            (
                "adj_pick_0(var_v, 0, var_v, var_k, var_f);",
                "the @wp.func `pick_0`",
            ),
        ] {
            let why = reason(&kernel(bad, PICK), "k_cuda_kernel_forward")
                .unwrap_or_else(|| panic!("{bad} proven"));
            assert!(why.contains(says), "{bad}: {why}");
            assert!(why.contains("`var_i`, not a constant"), "{why}");
        }
    }

    #[test]
    fn recursion_and_functions_of_other_forms_are_uncovered() {
        let recursive = r#"
static CUDA_CALLABLE wp::float32 again_0(
    wp::float32 var_x)
{
    wp::float32 var_0;
    var_0 = again_0(var_x);
    return var_0;
}
static CUDA_CALLABLE wp::float32 declared_0(wp::float32 var_x);
"#;
        for (call, says) in [
            ("var_f = again_0(var_f);", "calls the function it is in"),
            (
                "var_f = declared_0(var_f);",
                "not in a form the reader reads",
            ),
        ] {
            let why = reason(&kernel(call, recursive), "k_cuda_kernel_forward")
                .unwrap_or_else(|| panic!("{call} proven"));
            assert!(why.contains(says), "{call}: {why}");
        }
    }

    #[test]
    fn extents_of_warps_value_types() {
        assert_eq!(extents("wp::vec_t<3,wp::float32>"), Some(vec![3]));
        assert_eq!(
            extents("const wp::mat_t<2,4,wp::float64>&"),
            Some(vec![2, 4])
        );
        assert_eq!(extents("wp::quat_t<wp::float32>*"), Some(vec![4]));
        assert_eq!(extents("wp::transform_t<wp::float32>"), Some(vec![7]));
        assert_eq!(extents("wp::shape_t"), Some(vec![4]));
        for none in [
            "wp::float32",
            "wp::vec_t<N,float>",
            "wp::array_t<wp::float32>",
            "vec_t<3>x",
        ] {
            assert_eq!(extents(none), None, "{none}");
        }
    }
}
