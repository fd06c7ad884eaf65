//! Arrays held in `wp.struct` parameters: which locals of a kernel body are
//! copies of a held array, so that the access passes read their accesses
//! as a held array's (`p.a`, checked per launch against the array the
//! struct value holds).
//!
//! Warp 1.19.0 emits `p.a[i]` for a struct parameter `p` as
//!
//! ```text
//! var_2 = &((var_p).a);        // P: a pointer to the field
//! var_4 = wp::load(var_2);     // L: a copy of the held array_t
//! var_3 = wp::address(var_4, var_0);
//! ```
//!
//! `L` is then an array like a parameter, labelled `p.a`. What this pass
//! proves, and refuses otherwise (noting the first bad place):
//! - a struct parameter that holds arrays (directly or in a nested struct)
//!   is used only as `&((var_p).FIELD)` (a pointer to a value field is
//!   harmless: only a read of the value, a copy); its adjoint (`adj_p`, in
//!   the backward kernel) is not used at all;
//! - a pointer to an array field is defined once and used only as the
//!   argument of `wp::load`, or declared (`T* P;`); a field that is a
//!   struct holding arrays, or another array type, is refused;
//! - each `L = wp::load(P)` of such a pointer is `L`'s only definition,
//!   runs before every use of `L`, and `P`'s definition runs before it;
//!   `L`'s declaration and definition are no uses, every other use is left
//!   to the access passes (an access builtin, `.shape`, `.ndim`; anything
//!   else, a second assignment included, is refused there).

use crate::hash::HashMap;

use super::modulo::{Chains, Step};
use super::tokens::{Tok, TokKind};
use super::{SourceParam, SourceStruct};

/// What the pass found.
#[derive(Debug, Default)]
pub(super) struct Held<'t> {
    /// Each copy of a held array: its label (`p.a`).
    pub aliases: HashMap<&'t str, String>,
    /// Each pointer to a held array's field: its label (the modulo of its
    /// shape, `&(P->shape)`, is the held array's own extent).
    pub pointers: HashMap<&'t str, String>,
    /// Positions the access passes must not look at again (definitions and
    /// declarations of copies and pointers, and the struct parameters'
    /// field reads).
    pub handled: Vec<usize>,
    /// The first bad place: position, parameter label, reason.
    pub bad: Option<(usize, String, String)>,
}

impl Held<'_> {
    fn note_bad(&mut self, pos: usize, label: &str, reason: String) {
        if self.bad.as_ref().is_none_or(|(p, _, _)| pos < *p) {
            self.bad = Some((pos, label.to_owned(), reason));
        }
    }
}

/// What a field of a struct is, for this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldKind {
    /// A `wp::array_t`.
    Array,
    /// Something holding arrays this pass does not read (a nested struct
    /// holding arrays, another array type).
    Opaque,
    /// A value (or a struct holding no arrays).
    Value,
}

/// The kind of a field of C++ type `ty` (structs looked up in `structs`,
/// at most 8 deep).
fn field_kind(ty: &str, structs: &[SourceStruct], depth: usize) -> FieldKind {
    if ty.starts_with("wp::array_t<") {
        return FieldKind::Array;
    }
    if ty.contains("array") {
        return FieldKind::Opaque;
    }
    match structs.iter().find(|s| s.name == ty) {
        Some(_) if depth > 8 => FieldKind::Opaque,
        Some(s)
            if s.fields
                .iter()
                .any(|f| field_kind(&f.cpp_type, structs, depth + 1) != FieldKind::Value) =>
        {
            FieldKind::Opaque
        }
        _ => FieldKind::Value,
    }
}

/// Pass: the copies of arrays held by the struct parameters of a body.
pub(super) fn held_arrays<'t>(
    body: &[Tok<'t>],
    chains: &Chains<'t>,
    params: &[SourceParam],
    structs: &[SourceStruct],
) -> Held<'t> {
    let mut held = Held::default();
    for p in params {
        // A struct's type (Warp names them `<Key>_<8 hex>`) that no struct
        // read before the kernel has might hold arrays: read as a struct
        // with no known field, so every use of it is refused.
        let unknown;
        let st = match structs.iter().find(|s| s.name == p.cpp_type) {
            Some(st) if field_kind(&st.name, structs, 0) == FieldKind::Value => continue,
            Some(st) => st,
            None if crate::signature::struct_key(&p.cpp_type) == p.cpp_type => continue,
            None => {
                unknown = SourceStruct {
                    name: p.cpp_type.clone(),
                    fields: Vec::new(),
                    line: p.line,
                };
                &unknown
            }
        };
        let label = p.label();
        if p.is_adjoint() {
            if let Some(&pos) = chains.uses_of(&p.name).first() {
                held.note_bad(
                    pos,
                    label,
                    format!(
                        "the adjoint of struct '{label}', which holds arrays, is used: backward code through held arrays is not analysed"
                    ),
                );
            }
            continue;
        }
        struct_param(body, chains, (&p.name, label, st), structs, &mut held);
    }
    held
}

/// [`held_arrays`] for the forward struct parameter `name` (label
/// `label`) of struct `st`.
fn struct_param<'t>(
    body: &[Tok<'t>],
    chains: &Chains<'t>,
    (name, label, st): (&str, &str, &SourceStruct),
    structs: &[SourceStruct],
    held: &mut Held<'t>,
) {
    // Pointers to its fields: position of the pointer's name -> field.
    let mut pointers: HashMap<&'t str, (usize, &'t str)> = HashMap::default();
    for (p, step, pos) in chains.defined() {
        if let Step::FieldOf(s, f) = step
            && s == name
        {
            pointers.insert(p, (pos, f));
        }
    }
    for &pos in chains.uses_of(name) {
        // `P = & ( ( var_p ) . f ) ;`: var_p sits 5 tokens after P.
        let field_read = pos >= 5
            && super::modulo::field_definition(body, pos)
                .is_some_and(|(p, _)| pointers.get(body[p].text).is_some_and(|&(at, _)| at == p));
        if field_read {
            held.handled.push(pos);
        } else {
            held.note_bad(
                pos,
                label,
                format!(
                    "struct '{label}' holds arrays and is used otherwise than reading a field (`&(({name}).f)`), e.g. passed to a function or assigned"
                ),
            );
        }
    }
    for (&pointer, &(pos, field)) in &pointers {
        let kind = st
            .fields
            .iter()
            .find(|f| f.name == field)
            .map_or(FieldKind::Opaque, |f| field_kind(&f.cpp_type, structs, 0));
        match kind {
            FieldKind::Value => {}
            FieldKind::Opaque => held.note_bad(
                pos,
                label,
                format!(
                    "`{label}.{field}` is a struct holding arrays or another array type: arrays held in nested structs are not analysed"
                ),
            ),
            FieldKind::Array => {
                array_field(body, chains, pointer, pos, &format!("{label}.{field}"), held);
            }
        }
    }
}

/// The pointer `pointer` (defined at `def`) to the held array `label`:
/// each of its loads makes a copy; any other use is bad.
fn array_field<'t>(
    body: &[Tok<'t>],
    chains: &Chains<'t>,
    pointer: &str,
    def: usize,
    label: &str,
    held: &mut Held<'t>,
) {
    for &u in chains.uses_of(pointer) {
        let declared =
            super::tokens::is_punct(body.get(u + 1), ";") && u > 0 && body[u - 1].text == "*";
        let shape =
            super::modulo::arrow_shape_definition(body, u).is_some() && chains.dominates(def, u);
        if u == def || declared || chains.is_load_arg(u) || shape {
            held.handled.push(u);
            continue;
        }
        held.note_bad(
            u,
            label,
            format!(
                "the pointer `{pointer}` to held array '{label}' is used otherwise than loaded"
            ),
        );
    }
    held.pointers.insert(body[def].text, label.to_owned());
    let copies: Vec<(&'t str, usize)> = chains
        .defined()
        .filter_map(|(n, step, pos)| match step {
            Step::Load(p) if p == pointer => Some((n, pos)),
            _ => None,
        })
        .collect();
    for (copy, at) in copies {
        if !chains.dominates(def, at) {
            held.note_bad(
                at,
                label,
                format!("`{pointer}`, a pointer to held array '{label}', is not defined before every load of it"),
            );
            continue;
        }
        for &u in chains.uses_of(copy) {
            let declared = super::tokens::is_punct(body.get(u + 1), ";")
                && u > 0
                && body[u - 1].kind == TokKind::Punct
                && body[u - 1].text == ">";
            if u == at || declared {
                held.handled.push(u);
            } else if !chains.dominates(at, u) {
                held.note_bad(
                    u,
                    label,
                    format!("`{copy}`, a copy of held array '{label}', is used where its definition may not have run"),
                );
            }
        }
        held.aliases.insert(copy, label.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use crate::signature::{Accesses, AxisIndex};
    use crate::source::parse_cu;

    /// Warp 1.19.0's output for `tests/warp/held.py`.
    const HELD_CU: &str = include_str!("../../../warp-launch/tests/fixtures/wp_held.cu");

    fn verdict(text: &str, kernel: &str) -> Accesses {
        let src = parse_cu(text, "wp_held.cu").unwrap();
        src.kernel(kernel).unwrap().accesses.clone()
    }

    fn reason(text: &str, kernel: &str) -> String {
        match verdict(text, kernel) {
            Accesses::Unproven(u) => format!("{}: {}", u.param, u.reason),
            Accesses::Checked(l) => panic!("{kernel}: proven: {l:?}"),
        }
    }

    use AxisIndex::Thread as T;

    #[test]
    fn held_arrays_of_real_warp_output_get_rules_of_their_own() {
        let Accesses::Checked(l) = verdict(HELD_CU, "scale_pair_cuda_kernel_forward") else {
            panic!("scale_pair is proven")
        };
        let rules: Vec<(&str, &[AxisIndex])> = l
            .iter()
            .map(|a| (a.param.as_str(), a.indices.as_slice()))
            .collect();
        assert_eq!(
            rules,
            [
                ("p.a", &[T(0)][..]),
                ("p.b", &[T(0), T(1)][..]),
                ("out", &[T(0), T(1)][..])
            ]
        );
        // The backward kernel reaches the held arrays' gradients through
        // local adjoint arrays and the struct's adjoint: unproven.
        let r = reason(HELD_CU, "scale_pair_cuda_kernel_backward");
        assert!(
            r.contains("`adj_11`, which is not an array parameter"),
            "{r}"
        );
    }

    #[test]
    fn other_uses_of_a_struct_holding_arrays_are_unproven() {
        let f = |k: &str| reason(HELD_CU, &format!("{k}_cuda_kernel_forward"));
        let passed = f("pass_struct");
        assert!(
            passed.contains("used otherwise than reading a field"),
            "{passed}"
        );
        let nested = f("nested");
        assert!(nested.starts_with("o: "), "{nested}");
        let gather = f("held_gather");
        assert!(
            gather.contains("indexes 'p.a'") && gather.contains("computed"),
            "{gather}"
        );
    }

    /// `held_hist`'s forward body with `from` replaced by `to`.
    fn hist_edited(from: &str, to: &str) -> String {
        forward_edited("held_hist", from, to)
    }

    /// Kernel `name`'s forward body in `HELD_CU` with `from` replaced by
    /// `to` (its first occurrence there).
    fn forward_edited(name: &str, from: &str, to: &str) -> String {
        let start = HELD_CU
            .find(&format!("void {name}_cuda_kernel_forward"))
            .unwrap();
        let end = start
            + HELD_CU[start..]
                .find(&format!("void {name}_cuda_kernel_backward"))
                .unwrap();
        let body = &HELD_CU[start..end];
        assert!(body.contains(from), "{from}");
        format!(
            "{}{}{}",
            &HELD_CU[..start],
            body.replacen(from, to, 1),
            &HELD_CU[end..]
        )
    }

    #[test]
    fn a_held_arrays_modulo_by_its_own_extent_is_proven_through_the_field_pointer() {
        let k = "held_hist_cuda_kernel_forward";
        // p.a[i % p.a.shape[0]]: the shape read through `&(var_2->shape)`.
        let Accesses::Checked(l) = verdict(HELD_CU, k) else {
            panic!("held_hist is proven")
        };
        assert_eq!(
            (l[0].param.as_str(), l[0].indices.as_slice()),
            ("p.a", &[AxisIndex::Modulo { axis: 0 }][..])
        );
        for (from, to, says) in [
            // The extent of another held array.
            (
                "var_2 = &((var_p).a);",
                "var_2 = &((var_p).b);",
                "modulo the extent of `var_2`, another array",
            ),
            // The held array's shape written through its pointer.
            (
                "var_3 = &(var_2->shape);",
                "var_2->shape = var_6; var_3 = &(var_2->shape);",
                "used otherwise than loaded",
            ),
            // The pointer's definition after its shape is taken.
            (
                "var_2 = &((var_p).a);\n        var_3 = &(var_2->shape);",
                "var_3 = &(var_2->shape);\n        var_2 = &((var_p).a);",
                "used otherwise than loaded",
            ),
        ] {
            let r = reason(&hist_edited(from, to), k);
            assert!(r.contains(says), "{to}: {r}");
        }
    }

    /// A struct parameter whose type the reader did not read (no struct of
    /// that name before the kernel) counts as holding arrays: every use of
    /// it is refused.
    #[test]
    fn a_struct_type_not_read_is_taken_to_hold_arrays() {
        let text = HELD_CU.replacen("struct Pair_21864bdd\n", "struct Other_21864bdd\n", 1);
        assert_ne!(text, HELD_CU);
        for k in ["scale_pair", "pass_struct"] {
            let r = reason(&text, &format!("{k}_cuda_kernel_forward"));
            assert!(r.starts_with("p: "), "{k}: {r}");
        }
    }

    /// `scale_pair`'s forward body with `from` replaced by `to`.
    fn edited(from: &str, to: &str) -> String {
        forward_edited("scale_pair", from, to)
    }

    #[test]
    fn every_step_from_the_struct_to_the_copy_is_needed() {
        let k = "scale_pair_cuda_kernel_forward";
        for (from, to, says) in [
            // The copy replaced by another array after its load.
            (
                "var_4 = wp::load(var_2);",
                "var_4 = wp::load(var_2); var_4 = var_out;",
                "uses array 'p.a' in a way a launch cannot check",
            ),
            // The copy's address taken.
            (
                "var_4 = wp::load(var_2);",
                "var_4 = wp::load(var_2); f(&var_4);",
                "uses array 'p.a'",
            ),
            // The field pointer written through.
            (
                "var_4 = wp::load(var_2);",
                "wp::store(var_2, var_out); var_4 = wp::load(var_2);",
                "used otherwise than loaded",
            ),
            // The load inside a block, the use after it.
            (
                "var_4 = wp::load(var_2);",
                "if (var_0 > 1) { var_4 = wp::load(var_2); }",
                "may not have run",
            ),
            // A label between the load and the use (Warp's `while` loops
            // jump to labels): the use may be reached without the load.
            (
                "var_3 = wp::address(var_4, var_0);",
                "end_while_0:; var_3 = wp::address(var_4, var_0);",
                "may not have run",
            ),
            // Loaded twice into one name: no single definition.
            (
                "var_4 = wp::load(var_2);",
                "var_4 = wp::load(var_2); var_4 = wp::load(var_9);",
                "var_4",
            ),
            // The struct parameter assigned.
            (
                "var_2 = &((var_p).a);",
                "var_p = var_q; var_2 = &((var_p).a);",
                "used otherwise than reading a field",
            ),
        ] {
            let r = reason(&edited(from, to), k);
            assert!(r.contains(says), "{to}: {r}");
        }
        assert!(matches!(verdict(&edited("", ""), k), Accesses::Checked(_)));
    }
}
