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

use std::collections::HashMap;

use super::modulo::{Chains, Step};
use super::tokens::{Tok, TokKind};
use super::{SourceParam, SourceStruct};

/// What the pass found.
#[derive(Debug, Default)]
pub(super) struct Held<'t> {
    /// Each copy of a held array: its label (`p.a`).
    pub aliases: HashMap<&'t str, String>,
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
        let Some(st) = structs.iter().find(|s| s.name == p.cpp_type) else {
            continue;
        };
        if field_kind(&st.name, structs, 0) == FieldKind::Value {
            continue;
        }
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
    let mut pointers: HashMap<&'t str, (usize, &'t str)> = HashMap::new();
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
        if u == def || declared || chains.is_load_arg(u) {
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
