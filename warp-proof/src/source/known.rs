//! What a kernel body's names are known to hold, for the index readers:
//! thread coordinates (`builtin_tid*`), integer constants, coordinates
//! scaled by a constant, modulo chains ([`super::modulo`]), declared types,
//! and which names the body changes; and the classifier of one index
//! argument against them ([`Known::index`]).

use crate::hash::{HashMap, HashSet};

use super::tokens::{Tok, TokKind, call_args, is_punct, spell, text_at};
use crate::signature::AxisIndex;

/// Integer types a constant index may have.
const INT_TYPES: &[&str] = &[
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "int", "long",
    "short", "size_t", "unsigned",
];

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
    pub(super) chains: super::modulo::Chains<'t>,
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
    pub(super) fn access_index(
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
    pub(super) fn tile_offset(&self, arg: &[Tok<'_>]) -> Result<(Option<usize>, u32, u32), String> {
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

/// The declared type of each name a body declares as `[const] TYPE NAME;`
/// or `[const] TYPE NAME = ...;` at the start of a statement, and of each
/// parameter; a name declared with two types has none (`None`).
pub(super) fn local_types<'t>(
    body: &[Tok<'t>],
    params: &[(&'t str, String)],
) -> HashMap<&'t str, Option<String>> {
    let mut types: HashMap<&str, Option<String>> = HashMap::default();
    let mut note = |name: &'t str, ty: String| {
        types
            .entry(name)
            .and_modify(|t| {
                if t.as_deref() != Some(ty.as_str()) {
                    *t = None;
                }
            })
            .or_insert(Some(ty));
    };
    for (name, ty) in params {
        note(name, ty.clone());
    }
    let mut start = 0;
    for (j, t) in body.iter().enumerate() {
        let ends = t.kind == TokKind::Punct && matches!(t.text, ";" | "=");
        if ends && j > start + 1 && body[j - 1].kind == TokKind::Word {
            let ty = &body[start..j - 1];
            let type_like = ty.iter().all(|x| match x.kind {
                TokKind::Word | TokKind::Number => true,
                TokKind::Punct => matches!(x.text, "::" | "<" | ">" | "," | "*" | "&"),
                TokKind::Str => false,
            });
            if type_like && ty.iter().any(|x| x.kind == TokKind::Word) {
                note(body[j - 1].text, spell(ty));
            }
        }
        if t.kind == TokKind::Punct && matches!(t.text, ";" | "{" | "}") {
            start = j + 1;
        }
    }
    types
}

#[cfg(test)]
mod tests {
    use super::{Fact, Known, definitions, known_facts, scaled_definitions, written_names};
    use crate::hash::HashSet;
    use crate::signature::AxisIndex::{self, Constant as C};
    use crate::source::tokens::test_support::{pos, toks};
    use crate::source::tokens::{Tok, tokenize};

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
}
