//! Hand annotations: kept across imports, or proposed for new functions from
//! the header's parameter docs (a proposal to review, not a fact).

use std::collections::BTreeMap;

use crate::ctype::CType;
use crate::spec::model::*;

/// Copies the annotations of `old` onto `new` (matched by parameter name).
pub fn keep(new: &mut Function, old: &Function) {
    new.rust_name = old.rust_name.clone();
    new.safety = old.safety;
    new.summary = old.summary.clone();
    new.safety_doc = old.safety_doc.clone();
    for p in &mut new.params {
        if let Some(op) = old.params.iter().find(|op| op.name == p.name) {
            p.role = op.role.clone();
            p.len = op.len.clone();
            p.optional = op.optional;
            p.rust_name = op.rust_name.clone();
            p.fixed = op.fixed;
            p.boolean = op.boolean;
            p.array = op.array;
        }
    }
}

/// For a new ABI spelling of an annotated function (`cuGraphAddNode_v3`
/// beside `cuGraphAddNode`): after [`propose`], copies the sibling's safety
/// class, safety contract and the annotations of every parameter with the same
/// name and C type (a `len` only when it names a parameter of `new`). The
/// summary stays unset: the new ABI may do more.
pub fn inherit(new: &mut Function, sibling: &Function) {
    new.safety = sibling.safety;
    new.safety_doc = sibling.safety_doc.clone();
    let names: Vec<String> = new.params.iter().map(|p| p.name.clone()).collect();
    for p in &mut new.params {
        if let Some(op) = sibling
            .params
            .iter()
            .find(|op| op.name == p.name && op.ty.value == p.ty.value)
        {
            p.role = op.role.clone();
            p.len = op.len.clone().filter(|l| names.contains(&l.value));
            p.optional = op.optional;
            p.rust_name = op.rust_name.clone();
            p.fixed = op.fixed;
            p.boolean = op.boolean;
            p.array = op.array;
        }
    }
}

fn spanned<T>(v: T) -> serde_saphyr::Spanned<T> {
    serde_saphyr::Spanned::new(
        v,
        serde_saphyr::Location::UNKNOWN,
        serde_saphyr::Location::UNKNOWN,
    )
}

/// Proposes roles, lengths, optionality and a safety class for a new function.
pub fn propose(f: &mut Function, docs: &BTreeMap<String, String>) {
    let names: Vec<String> = f.params.iter().map(|p| p.name.clone()).collect();
    for i in 0..f.params.len() {
        let ty = CType::parse(&f.params[i].ty.value).ok();
        let doc = docs
            .get(&f.params[i].name)
            .map(|d| d.to_lowercase())
            .unwrap_or_default();
        let writable = ty
            .as_ref()
            .is_some_and(|t| t.is_pointer() && !t.pointee_is_const());
        let role = if writable
            && (doc.contains("returned")
                || doc.starts_with("return")
                || doc.contains("pointer to return"))
        {
            if doc.contains("in/out") || doc.contains("input") {
                Role::Inout
            } else {
                Role::Out
            }
        } else {
            Role::In
        };
        f.params[i].role = spanned(role);
        f.params[i].optional = ty.as_ref().is_some_and(|t| t.is_pointer())
            && (doc.contains("may be null")
                || doc.contains("can be null")
                || doc.contains("optional"));
        // A pointer followed by a count parameter is an array with its length.
        if let (Some(t), Some(next)) = (ty.as_ref(), names.get(i + 1)) {
            let lower = next.to_lowercase();
            let is_count = lower.starts_with("num") || lower.ends_with("count");
            let elementy = t.is_pointer() && t.base != "void" && t.base != "char";
            if is_count && elementy {
                f.params[i].len = Some(str(next.clone()));
            }
        }
    }
    let proposed = crate::names::proposed_name(&f.name.value);
    if proposed != crate::names::heck_name(&f.name.value) {
        f.rust_name = Some(proposed);
    }
    f.safety = if is_safe_shape(f) {
        Safety::Safe
    } else {
        Safety::Unsafe
    };
}

/// Safe when every argument is a value (scalar, enum, handle) or an out-pointer
/// to a plain value, and the function does not end a handle's life.
fn is_safe_shape(f: &Function) -> bool {
    let ends_life = [
        "Destroy",
        "Free",
        "Unload",
        "Release",
        "Reset",
        "Unregister",
        "Unmap",
        "Detach",
    ]
    .iter()
    .any(|w| f.name.value.contains(w));
    !ends_life
        && f.params.iter().all(|p| {
            let Ok(t) = CType::parse(&p.ty.value) else {
                return false;
            };
            match t.ptrs.len() {
                0 => true,
                1 => {
                    p.role.value == Role::Out
                        && t.base != "void"
                        && t.base != "char"
                        && p.len.is_none()
                }
                _ => false,
            }
        })
}

/// A first one-line description from an error's name, until a person writes one.
pub fn humanize_error(name: &str) -> String {
    let words = name
        .trim_start_matches("CUDA_ERROR_")
        .trim_start_matches("CUDA_")
        .to_lowercase()
        .replace('_', " ");
    let mut c = words.chars();
    match c.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), c.as_str()),
        None => String::new(),
    }
}
