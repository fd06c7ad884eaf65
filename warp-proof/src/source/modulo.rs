//! Modulo indices: `x % a.shape[k]` indexing `a` itself, with `x` never
//! negative, becomes an [`AxisIndex::Modulo`](crate::AxisIndex::Modulo) rule.
//!
//! Warp 1.19.0 emits `a[i % a.shape[0]]` as this chain of single
//! assignments (each name defined once, by Warp's codegen):
//!
//! ```text
//! var_1 = &(var_a.shape);          // P: a pointer to the array's shape
//! var_4 = wp::load(var_1);         // S: the shape, a wp::shape_t
//! var_3 = wp::extract(var_4, var_2);   // D: extent k (var_2 a constant k)
//! var_5 = wp::mod(var_0, var_3);   // M: x % D, C's `%`
//! wp::address(var_a, var_5);
//! ```
//!
//! and `n % wp.uint32(a.shape[0])` with an unsigned `n` puts `U =
//! wp::uint32(D);` between `D` and `M`. C's `%` of a non-negative
//! dividend by a positive divisor lies in `[0, divisor)`; by 0 it is
//! undefined (SIGFPE on the CPU). So `M` is inside axis `k` of `a` when
//! that extent is at least 1, which the launch checks (with the extent of
//! the axis `M` indexes at least as large).
//!
//! What this reader proves, and nothing else:
//! - every name of the chain is defined exactly by its step (a name defined
//!   twice in different ways has no step) and changed nowhere else in the
//!   body (`written`, from the caller);
//! - `P` is used only by its definition and as the argument of
//!   `wp::load(P)`, and the array's `.shape` is read nowhere else (Warp's
//!   backward code writes `adj_a.shape = ...`: such an array is no divisor);
//! - `k` is a constant from 0 to 3;
//! - the dividend `x` is a thread coordinate (`wp.tid()`, from 0 to 2^31 -
//!   1: a launch refuses larger extents), a constant at least 0, or, for
//!   the unsigned chain, a name declared `wp::uint32` / `wp::uint64`, the
//!   type of the cast (a narrower cast could truncate a positive extent to
//!   0);
//! - the caller checks that the array indexed is the chain's array, a
//!   forward (`var_`) array parameter.

use crate::hash::{HashMap, HashSet};

use super::tokens::{Tok, TokKind, call_args, is_punct};

/// Unsigned casts a divisor may go through: the cast keeps every extent
/// (0 to 2^31 - 1) as it is.
const UNSIGNED_CASTS: &[&str] = &["uint32", "uint64"];

/// One step of the chain: what a name is defined as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step<'t> {
    /// `P = &(ARRAY.shape);`
    ShapeOf(&'t str),
    /// `S = wp::load(P);`
    Load(&'t str),
    /// `D = wp::extract(S, K);`: the shape and the index token.
    Extract(&'t str, &'t str),
    /// `U = wp::uint32(D);` (or `uint64`): the type word and `D`.
    Cast(&'t str, &'t str),
    /// `M = wp::mod(X, D);`: the dividend token and the divisor.
    Mod(&'t str, &'t str),
    /// `P = &((STRUCT).FIELD);`: a pointer to a field of a struct
    /// (`super::held` reads arrays held in struct parameters with it).
    FieldOf(&'t str, &'t str),
}

/// The chain steps of one body.
#[derive(Debug, Default)]
pub(super) struct Chains<'t> {
    /// Each defined name's step and the position of the name; `None` for a
    /// name defined twice.
    steps: HashMap<&'t str, Option<(Step<'t>, usize)>>,
    /// Every `{ ... }` of the body: its `{` and `}` positions.
    blocks: Vec<(usize, usize)>,
    /// Positions of labels (`NAME :`, Warp's `start_while_0:;` that its
    /// `goto`s jump to), and of every other `:`.
    labels: Vec<usize>,
    /// Positions of the names the steps define (their `=` is no write).
    pub(super) defining: HashSet<usize>,
    /// Positions of shape pointers used as `wp::load`'s argument.
    loads: HashSet<usize>,
    /// Positions of names declared as `wp::shape_t* NAME;`.
    declared: HashSet<usize>,
    /// Every position of a name followed by `.shape` or `->shape`, with
    /// whether it is a [`Step::ShapeOf`] definition's.
    shape_reads: Vec<(&'t str, bool)>,
    /// Every position of every name (to find other uses of a pointer).
    uses: HashMap<&'t str, Vec<usize>>,
}

/// What a name of the body is, for [`Chains::resolve`].
pub(super) struct Env<'a, 't> {
    /// Whether a name is changed outside its definition.
    pub written: &'a HashSet<&'t str>,
    /// The constant a token holds (a literal, or a `const` integer never
    /// changed), if any.
    pub constant: &'a dyn Fn(&Tok<'_>) -> Option<i64>,
    /// Whether a token is a thread coordinate of the kernel, never changed.
    pub coordinate: &'a dyn Fn(&Tok<'_>) -> bool,
    /// Each name's declared type (`None`: two types).
    pub types: &'a HashMap<&'t str, Option<String>>,
}

/// Pass: the chain steps a body defines ([`Step`]).
pub(super) fn chains<'t>(body: &[Tok<'t>], close: &[usize]) -> Chains<'t> {
    let mut c = Chains::default();
    for (j, t) in body.iter().enumerate() {
        if t.kind == TokKind::Punct
            && t.text == "{"
            && let Some(&end) = close.get(j).filter(|&&e| e != super::tokens::UNMATCHED)
        {
            c.blocks.push((j, end));
        }
        if t.kind == TokKind::Punct && t.text == ":" {
            c.labels.push(j);
        }
        if t.kind != TokKind::Word {
            continue;
        }
        c.uses.entry(t.text).or_default().push(j);
        if is_punct(body.get(j + 1), ".") && body.get(j + 2).is_some_and(|s| s.text == "shape") {
            c.shape_reads
                .push((t.text, shape_definition(body, j).is_some()));
        }
        // `Q -> shape`: the shape through a pointer.
        if is_punct(body.get(j + 1), "-")
            && is_punct(body.get(j + 2), ">")
            && body.get(j + 3).is_some_and(|s| s.text == "shape")
        {
            c.shape_reads
                .push((t.text, arrow_shape_definition(body, j).is_some()));
        }
        if is_punct(body.get(j + 1), ";")
            && j >= 4
            && ["wp", "::", "shape_t", "*"]
                .iter()
                .enumerate()
                .all(|(i, w)| body[j - 4 + i].text == *w)
        {
            // `wp::shape_t* P;`: a declaration of a shape pointer.
            c.declared.insert(j);
        }
        if let Some((name, step)) = step_at(body, close, j) {
            if let Step::Load(_) = step {
                // `wp :: load ( P )`: P is token j + 4.
                c.loads.insert(j + 4);
            }
            c.defining.insert(name);
            c.steps
                .entry(body[name].text)
                .and_modify(|s| *s = None)
                .or_insert(Some((step, name)));
        }
    }
    c
}

/// `P = & ( ARRAY . shape ) ;` with `ARRAY` at `j`: the position of `P`.
fn shape_definition(body: &[Tok<'_>], j: usize) -> Option<usize> {
    let text = |k: usize| body.get(k).map_or("", |t| t.text);
    let ok = j >= 4
        && text(j - 1) == "("
        && text(j - 2) == "&"
        && text(j - 3) == "="
        && body[j - 4].kind == TokKind::Word
        && [".", "shape", ")", ";"]
            .iter()
            .enumerate()
            .all(|(i, s)| text(j + 1 + i) == *s)
        && (j == 4 || matches!(text(j - 5), ";" | "{" | "}"));
    ok.then(|| j - 4)
}

/// `P = & ( ( STRUCT ) . FIELD ) ;` with `STRUCT` at `j`: the position of
/// `P` and the field's name.
pub(super) fn field_definition<'t>(body: &[Tok<'t>], j: usize) -> Option<(usize, &'t str)> {
    let text = |k: usize| body.get(k).map_or("", |t| t.text);
    let ok = j >= 5
        && ["=", "&", "(", "("]
            .iter()
            .enumerate()
            .all(|(i, s)| text(j - 4 + i) == *s)
        && body[j - 5].kind == TokKind::Word
        && text(j + 1) == ")"
        && text(j + 2) == "."
        && body.get(j + 3).is_some_and(|f| f.kind == TokKind::Word)
        && text(j + 4) == ")"
        && text(j + 5) == ";"
        && (j == 5 || matches!(text(j - 6), ";" | "{" | "}"));
    ok.then(|| (j - 5, body[j + 3].text))
}

/// `P = & ( Q -> shape ) ;` with the pointer `Q` at `j` (Warp's shape of
/// an array held in a struct, through the field's pointer): the position
/// of `P`.
pub(super) fn arrow_shape_definition(body: &[Tok<'_>], j: usize) -> Option<usize> {
    let text = |k: usize| body.get(k).map_or("", |t| t.text);
    let ok = j >= 4
        && text(j - 1) == "("
        && text(j - 2) == "&"
        && text(j - 3) == "="
        && body[j - 4].kind == TokKind::Word
        && ["-", ">", "shape", ")", ";"]
            .iter()
            .enumerate()
            .all(|(i, s)| text(j + 1 + i) == *s)
        && (j == 4 || matches!(text(j - 5), ";" | "{" | "}"));
    ok.then(|| j - 4)
}

/// The step defined at token `j`: `j` is `ARRAY` of a shape pointer's
/// definition, or the `wp` of `NAME = wp::F(...);` with `F` one of the
/// chain's builtins. Returns the position of the defined name and the
/// step.
fn step_at<'t>(body: &[Tok<'t>], close: &[usize], j: usize) -> Option<(usize, Step<'t>)> {
    if let Some(p) = shape_definition(body, j).or_else(|| arrow_shape_definition(body, j)) {
        return Some((p, Step::ShapeOf(body[j].text)));
    }
    if let Some((p, field)) = field_definition(body, j) {
        return Some((p, Step::FieldOf(body[j].text, field)));
    }
    let text = |k: usize| body.get(k).map_or("", |t| t.text);
    let starts = body[j].text == "wp"
        && j >= 2
        && text(j - 1) == "="
        && body[j - 2].kind == TokKind::Word
        && text(j + 1) == "::"
        && is_punct(body.get(j + 3), "(")
        && (j == 2 || matches!(text(j - 3), ";" | "{" | "}"));
    if !starts {
        return None;
    }
    let args = call_args(body, close, j + 3)?;
    let end = *close.get(j + 3)?;
    if text(end + 1) != ";" {
        return None;
    }
    let single: Vec<&'t str> = args
        .iter()
        .map(|&(a, b)| (b == a + 1).then(|| body[a].text))
        .collect::<Option<_>>()?;
    let f = text(j + 2);
    let step = match (f, single.as_slice()) {
        ("load", [p]) => Step::Load(p),
        ("extract", [s, k]) => Step::Extract(s, k),
        ("mod", [x, d]) => Step::Mod(x, d),
        (ty, [d]) if UNSIGNED_CASTS.contains(&ty) => Step::Cast(body[j + 2].text, d),
        _ => return None,
    };
    Some((j - 2, step))
}

impl<'t> Chains<'t> {
    /// Each name defined once by a step: the name, its step and the
    /// position of the name.
    pub(super) fn defined(&self) -> impl Iterator<Item = (&'t str, Step<'t>, usize)> + '_ {
        self.steps
            .iter()
            .filter_map(|(&n, s)| s.map(|(step, pos)| (n, step, pos)))
    }

    /// Every position of `name` in the body.
    pub(super) fn uses_of(&self, name: &str) -> &[usize] {
        self.uses.get(name).map_or(&[], Vec::as_slice)
    }

    /// Whether position `p` is `wp::load`'s argument.
    pub(super) fn is_load_arg(&self, p: usize) -> bool {
        self.loads.contains(&p)
    }

    /// The step defining `name`, if it is defined once, never changed,
    /// and its definition runs before position `at` whenever `at` runs.
    fn step(&self, name: &str, at: usize, env: &Env<'_, 't>) -> Option<Step<'t>> {
        if env.written.contains(name) {
            return None;
        }
        let (step, pos) = self.steps.get(name).copied().flatten()?;
        self.dominates(pos, at).then_some(step)
    }

    /// Whether the statement at `def` runs before `at` on every path to
    /// `at`: `def` comes first, the innermost block holding `def` also
    /// holds `at`, and no label (a `goto`'s target: Warp's `while` loops
    /// jump, without braces, to `start_while_N:;` and `end_while_N:;`) nor
    /// any other `:` lies between them.
    pub(super) fn dominates(&self, def: usize, at: usize) -> bool {
        let inner = self
            .blocks
            .iter()
            .filter(|&&(open, end)| open < def && def < end)
            .max_by_key(|&&(open, _)| open);
        def < at
            && inner.is_none_or(|&(_, end)| at < end)
            && !self.labels.iter().any(|&l| def < l && l < at)
    }

    /// If `name` is a proven modulo index: the array whose extent divides
    /// (its spelled name, `var_a`) and the axis; else why not (`None` when
    /// `name` is no modulo at all).
    /// `at`: the position of the index's use.
    pub(super) fn resolve(
        &self,
        name: &str,
        at: usize,
        env: &Env<'_, 't>,
    ) -> Option<Result<(&'t str, usize), String>> {
        let Some(Some((Step::Mod(x, divisor), _))) = self.steps.get(name).copied() else {
            return None;
        };
        Some(self.prove(name, at, (x, divisor), env))
    }

    /// [`Chains::resolve`] of `name = wp::mod(x, divisor)`.
    fn prove(
        &self,
        name: &str,
        at: usize,
        (x, divisor): (&'t str, &'t str),
        env: &Env<'_, 't>,
    ) -> Result<(&'t str, usize), String> {
        let why = |what: String| Err(format!("the index `{name}` is `{x} % {divisor}`: {what}"));
        let def = |n: &str| self.steps.get(n).copied().flatten().map_or(0, |(_, p)| p);
        if self.step(name, at, env).is_none() {
            return why(format!(
                "`{name}` is assigned again in the kernel, or its definition does not run before every use"
            ));
        }
        let (cast, extent) = match self.step(divisor, def(name), env) {
            Some(Step::Cast(ty, d)) => (Some(ty), self.step(d, def(divisor), env)),
            extract => (None, extract),
        };
        let Some(Step::Extract(shape, k)) = extent else {
            return why(format!(
                "the divisor `{divisor}` is not an array's extent (`a.shape[k]`, cast to `wp::uint32` or `wp::uint64` if unsigned), or is changed"
            ));
        };
        let extent = match cast {
            Some(_) => self
                .steps
                .get(divisor)
                .copied()
                .flatten()
                .map_or("", |(s, _)| match s {
                    Step::Cast(_, d) => d,
                    _ => "",
                }),
            None => divisor,
        };
        let Some(Step::Load(pointer)) = self.step(shape, def(extent), env) else {
            return why(format!("`{shape}` is not a loaded shape, or is changed"));
        };
        let Some(Step::ShapeOf(array)) = self.step(pointer, def(shape), env) else {
            return why(format!("`{pointer}` is not `&(a.shape)`, or is changed"));
        };
        let axis = self.axis(k, env).ok_or_else(|| {
            format!("the index `{name}` is `{x} % {divisor}`: the axis `{k}` is not a constant from 0 to 3")
        })?;
        if let Some(e) = self.shape_kept(pointer, array) {
            return why(e);
        }
        // C++ picks `wp::mod`'s overload, and keeps its value, by the
        // declared types: the extent is an int32, the divisor and the result
        // have the chain's type (a narrower or signed result could wrap).
        let want = cast.map_or_else(|| "wp::int32".to_owned(), |ty| format!("wp::{ty}"));
        for (n, ty) in [
            (extent, "wp::int32"),
            (divisor, want.as_str()),
            (name, want.as_str()),
        ] {
            if !matches!(env.types.get(n), Some(Some(t)) if t == ty) {
                return why(format!("`{n}` is not declared `{ty}`"));
            }
        }
        self.dividend(x, cast, env)
            .map_err(|e| format!("the index `{name}` is `{x} % {divisor}`: {e}"))?;
        Ok((array, axis))
    }

    /// The axis token `k` as a constant from 0 to 3.
    fn axis(&self, k: &str, env: &Env<'_, 't>) -> Option<usize> {
        let tok = Tok {
            kind: if k.bytes().all(|b| b.is_ascii_digit()) {
                TokKind::Number
            } else {
                TokKind::Word
            },
            text: k,
            line: 0,
        };
        (env.constant)(&tok)
            .and_then(|c| usize::try_from(c).ok())
            .filter(|c| *c < 4)
    }

    /// Why the shape read through `pointer` might not be `array`'s own
    /// (the pointer used otherwise than loaded, the array's shape read or
    /// written elsewhere), or `None`.
    fn shape_kept(&self, pointer: &str, array: &str) -> Option<String> {
        let stray = self.uses.get(pointer).into_iter().flatten().any(|&p| {
            !self.defining.contains(&p) && !self.loads.contains(&p) && !self.declared.contains(&p)
        });
        if stray {
            return Some(format!(
                "the shape pointer `{pointer}` is used otherwise than loaded"
            ));
        }
        if self
            .shape_reads
            .iter()
            .any(|&(a, defined)| a == array && !defined)
        {
            return Some(format!(
                "`{array}.shape` is used otherwise than read through a pointer (Warp's backward code writes an adjoint's shape)"
            ));
        }
        None
    }

    /// Whether the dividend `x` is never negative: a thread coordinate or a
    /// constant at least 0 (signed chain), or a name declared with the
    /// cast's unsigned type (unsigned chain).
    fn dividend(&self, x: &str, cast: Option<&str>, env: &Env<'_, 't>) -> Result<(), String> {
        let tok = Tok {
            kind: if x.bytes().all(|b| b.is_ascii_digit()) {
                TokKind::Number
            } else {
                TokKind::Word
            },
            text: x,
            line: 0,
        };
        match cast {
            None if (env.coordinate)(&tok) => Ok(()),
            None => match (env.constant)(&tok) {
                Some(c) if (0..=i64::from(i32::MAX)).contains(&c) => Ok(()),
                Some(c) => Err(format!(
                    "the dividend is the constant {c}, below 0 or past the int32 range"
                )),
                None => Err(format!(
                    "the dividend `{x}` is not a thread coordinate or a constant at least 0 (it may be negative)"
                )),
            },
            Some(ty) => {
                let want = format!("wp::{ty}");
                match env.types.get(x) {
                    Some(Some(t)) if *t == want => Ok(()),
                    _ => Err(format!(
                        "the dividend `{x}` is not declared `{want}`, the divisor's type"
                    )),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::signature::{Accesses, AxisIndex};
    use crate::source::parse_cu;

    /// Warp 1.19.0's output for `tests/warp/modulo.py`.
    const MODULO_CU: &str = include_str!("../../../warp-launch/tests/fixtures/modulo/wp_modulo.cu");

    fn verdict(text: &str, kernel: &str) -> Accesses {
        let src = parse_cu(text, "wp_modulo.cu").unwrap();
        src.kernel(kernel).unwrap().accesses.clone()
    }

    fn rules(text: &str, kernel: &str) -> Vec<(String, Vec<AxisIndex>)> {
        match verdict(text, kernel) {
            Accesses::Checked(l) => l.into_iter().map(|a| (a.param, a.indices)).collect(),
            Accesses::Unproven(u) => panic!("{kernel}: unproven: {u:?}"),
        }
    }

    fn reason(text: &str, kernel: &str) -> String {
        match verdict(text, kernel) {
            Accesses::Unproven(u) => u.reason,
            Accesses::Checked(l) => panic!("{kernel}: proven: {l:?}"),
        }
    }

    use AxisIndex::{Modulo, Thread as T};

    #[test]
    fn modulo_indices_of_real_warp_output_are_proven() {
        let f = |k: &str| rules(MODULO_CU, &format!("{k}_cuda_kernel_forward"));
        assert_eq!(f("hist"), [("out".into(), vec![Modulo { axis: 0 }])]);
        assert_eq!(
            f("wrap2d"),
            [
                ("x".into(), vec![Modulo { axis: 0 }, Modulo { axis: 1 }]),
                ("out".into(), vec![T(0)])
            ]
        );
        assert_eq!(f("wrap_unsigned"), [("x".into(), vec![Modulo { axis: 0 }])]);
        // Proven, and checked at launch: a 1-d array has no axis 1.
        assert_eq!(f("wrap_axis1"), [("out".into(), vec![Modulo { axis: 1 }])]);
    }

    #[test]
    fn a_dividend_that_may_be_negative_or_a_foreign_divisor_is_unproven() {
        let f = |k: &str| reason(MODULO_CU, &format!("{k}_cuda_kernel_forward"));
        let signed = f("wrap_signed");
        assert!(
            signed.contains(
                "the dividend `var_n` is not a thread coordinate or a constant at least 0"
            ),
            "{signed}"
        );
        let shifted = f("wrap_shifted");
        assert!(
            shifted.contains("is not a thread coordinate or a constant at least 0"),
            "{shifted}"
        );
        let other = f("wrap_other");
        assert!(
            other.contains("modulo the extent of `var_x`, another array"),
            "{other}"
        );
        let narrow = f("wrap_uint8");
        assert!(narrow.contains("is not an array's extent"), "{narrow}");
    }

    #[test]
    fn the_backward_kernel_indexes_the_adjoint_with_the_primals_extent_unproven() {
        let r = reason(MODULO_CU, "hist_cuda_kernel_backward");
        assert!(
            r.contains("modulo the extent of `var_out`, another array"),
            "{r}"
        );
    }

    /// `hist`'s forward body with `edit` applied: the chain broken one way.
    fn hist_edited(from: &str, to: &str) -> String {
        let start = MODULO_CU.find("void hist_cuda_kernel_forward").unwrap();
        let end = start
            + MODULO_CU[start..]
                .find("void hist_cuda_kernel_backward")
                .unwrap();
        let body = &MODULO_CU[start..end];
        assert!(body.contains(from), "{from}");
        format!(
            "{}{}{}",
            &MODULO_CU[..start],
            body.replacen(from, to, 1),
            &MODULO_CU[end..]
        )
    }

    #[test]
    fn every_link_of_the_chain_is_needed() {
        let k = "hist_cuda_kernel_forward";
        for (from, to, says) in [
            // The modulo changed after its definition.
            (
                "var_5 = wp::mod(var_0, var_3);",
                "var_5 = wp::mod(var_0, var_3); var_5 = var_5 + 7;",
                "assigned again",
            ),
            // The extent replaced.
            (
                "var_3 = wp::extract(var_4, var_2);",
                "var_3 = wp::extract(var_4, var_2); var_3 = 1000;",
                "not an array's extent",
            ),
            // The pointer used otherwise than loaded (written through).
            (
                "var_4 = wp::load(var_1);",
                "wp::store(var_1, var_4); var_4 = wp::load(var_1);",
                "used otherwise than loaded",
            ),
            // The array's shape written.
            (
                "var_1 = &(var_out.shape);",
                "var_out.shape = var_4; var_1 = &(var_out.shape);",
                "used otherwise than read through a pointer",
            ),
            // A shape axis that is no constant.
            (
                "var_3 = wp::extract(var_4, var_2);",
                "var_3 = wp::extract(var_4, var_0);",
                "not a constant",
            ),
            // The definition inside a block the use is outside of.
            (
                "var_5 = wp::mod(var_0, var_3);",
                "if (var_0 > 3) { var_5 = wp::mod(var_0, var_3); }",
                "does not run before every use",
            ),
            // The result narrowed to a signed type: 200 becomes -56.
            (
                "wp::int32 var_5;",
                "wp::int8 var_5;",
                "is not declared `wp::int32`",
            ),
            // A label between the definition and the use: a `goto` from
            // before the definition reaches the use without it.
            (
                "var_7 = wp::atomic_add(var_out, var_5, var_6);",
                "end_while_0:; var_7 = wp::atomic_add(var_out, var_5, var_6);",
                "does not run before every use",
            ),
            // The thread coordinate changed.
            (
                "var_0 = builtin_tid1d();",
                "var_0 = builtin_tid1d(); var_0 = var_0 - 9;",
                "may be negative",
            ),
        ] {
            let text = hist_edited(from, to);
            let r = reason(&text, k);
            assert!(r.contains(says), "{to}: {r}");
        }
        // Unchanged, it is proven.
        assert_eq!(rules(&hist_edited("", ""), k).len(), 1);
    }
}
