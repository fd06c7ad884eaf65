//! Checks that go beyond the YAML schema: unique names, references to types,
//! parameters and error codes that exist, and roles that fit their C types.

use std::collections::{BTreeMap, BTreeSet};

use super::error::SpecError;
use super::model::*;
use super::release::release_key;
use crate::ctype::{CType, builtin_rust};
use crate::names::{fn_name, is_c_ident, is_ident};

/// The enum whose values are the driver's result codes.
pub const RESULT_ENUM: &str = "cudaError_enum";

/// The enum whose values are NVRTC's result codes (`specs/nvrtc/`).
pub const NVRTC_RESULT_ENUM: &str = "nvrtcResult";

/// The result enum of a spec set: the driver's, else NVRTC's.
fn result_enum(specs: &Specs) -> &'static str {
    if specs.enums().any(|e| e.name.value == NVRTC_RESULT_ENUM)
        && !specs.enums().any(|e| e.name.value == RESULT_ENUM)
    {
        NVRTC_RESULT_ENUM
    } else {
        RESULT_ENUM
    }
}

/// Every name that becomes a Rust identifier, checked with its position
/// (`at`: the name itself, or the nearest positioned value of its entry).
fn identifiers(specs: &Specs, prefix: &str, errs: &mut Vec<SpecError>) {
    let c_ident = |errs: &mut Vec<SpecError>, file: &str, at: &Str, what: &str, name: &str| {
        if !is_c_ident(name) {
            errs.push(SpecError::at(
                file,
                at,
                format!(
                    "{what} `{name}` is not a C identifier (ASCII letters, digits and _, not starting with a digit); it becomes a Rust name, so fix the spelling"
                ),
            ));
        }
    };
    let rust_ident = |errs: &mut Vec<SpecError>, file: &str, at: &Str, what: &str, name: &str| {
        if !is_ident(name) {
            errs.push(SpecError::at(
                file,
                at,
                format!(
                    "{what} `{name}` is not a Rust identifier (ASCII letters, digits and _, not starting with a digit, not a keyword)"
                ),
            ));
        }
    };
    for (f, t) in &specs.types {
        let file = format!("{prefix}types/{f}");
        for h in &t.handles {
            c_ident(errs, &file, &h.name, "handle", &h.name.value);
            c_ident(
                errs,
                &file,
                &h.name,
                &format!("handle `{}`: opaque struct", h.name.value),
                &h.opaque,
            );
        }
        for x in &t.typedefs {
            c_ident(errs, &file, &x.name, "typedef", &x.name.value);
        }
        for e in &t.enums {
            c_ident(errs, &file, &e.name, "enum", &e.name.value);
            for v in &e.values {
                c_ident(
                    errs,
                    &file,
                    &v.name,
                    &format!("enum `{}` value", e.name.value),
                    &v.name.value,
                );
            }
        }
        for r in &t.records {
            c_ident(errs, &file, &r.name, "record", &r.name.value);
            for fl in &r.fields {
                c_ident(
                    errs,
                    &file,
                    &fl.ty,
                    &format!("record `{}` field", r.name.value),
                    &fl.name,
                );
            }
        }
        for c in &t.callbacks {
            c_ident(errs, &file, &c.name, "callback", &c.name.value);
            for p in c.params.iter().filter(|p| !p.name.is_empty()) {
                c_ident(
                    errs,
                    &file,
                    &p.ty,
                    &format!("callback `{}` parameter", c.name.value),
                    &p.name,
                );
            }
        }
        for c in &t.constants {
            c_ident(errs, &file, &c.name, "constant", &c.name.value);
        }
    }
    for (f, g) in &specs.groups {
        let file = format!("{prefix}functions/{f}");
        for func in &g.functions {
            let name = &func.name.value;
            rust_ident(errs, &file, &func.name, "function name", name);
            for p in &func.params {
                c_ident(errs, &file, &p.ty, &format!("`{name}` parameter"), &p.name);
                if let Some(r) = &p.rust_name {
                    rust_ident(
                        errs,
                        &file,
                        &p.ty,
                        &format!("`{name}` parameter `{}`: rust_name", p.name),
                        r,
                    );
                }
            }
        }
    }
    let errors_file = format!("{prefix}errors.yaml");
    for e in &specs.errors.errors {
        c_ident(errs, &errors_file, &e.name, "error", &e.name.value);
    }
}

/// Returns every problem found; `prefix` is the display path of the specs directory (`specs/`).
pub fn validate(specs: &Specs, prefix: &str) -> Vec<SpecError> {
    let mut errs = Vec::new();
    identifiers(specs, prefix, &mut errs);
    let types_file = |n: &str| format!("{prefix}types/{n}");
    let fn_file = |n: &str| format!("{prefix}functions/{n}");
    let errors_file = format!("{prefix}errors.yaml");

    // Type names, each defined once.
    let mut type_names: BTreeMap<String, String> = BTreeMap::new();
    let mut define = |errs: &mut Vec<SpecError>, file: &str, name: &Str, what: &str| {
        if let Some(prev) = type_names.get(&name.value) {
            errs.push(SpecError::at(
                file,
                name,
                format!(
                    "duplicate type name `{}` ({what}); it is already defined in {prev}",
                    name.value
                ),
            ));
        } else {
            type_names.insert(name.value.clone(), file.to_string());
        }
    };
    for (f, t) in &specs.types {
        let file = types_file(f);
        for h in &t.handles {
            define(&mut errs, &file, &h.name, "handle");
        }
        for x in &t.typedefs {
            define(&mut errs, &file, &x.name, "typedef");
        }
        for x in &t.enums {
            define(&mut errs, &file, &x.name, "enum");
        }
        for x in &t.records {
            define(&mut errs, &file, &x.name, "record");
        }
        for x in &t.callbacks {
            define(&mut errs, &file, &x.name, "callback");
        }
    }
    let mut known: BTreeSet<String> = type_names.keys().cloned().collect();
    for h in specs.handles() {
        known.insert(h.opaque.clone());
    }

    let check_type = |errs: &mut Vec<SpecError>,
                      file: &str,
                      ty: &Str,
                      whose: &str|
     -> Option<CType> {
        match CType::parse(&ty.value) {
            Ok(t) => {
                if builtin_rust(&t.base).is_none() && !known.contains(&t.base) {
                    errs.push(SpecError::at(
                        file,
                        ty,
                        format!("{whose} has type `{}` but no type `{}` is defined in the specs; add it under types/ or fix the name", ty.value, t.base),
                    ));
                }
                Some(t)
            }
            Err(m) => {
                errs.push(SpecError::at(file, ty, format!("{whose}: {m}")));
                None
            }
        }
    };

    // Constants and enum values share the value namespace.
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    for (f, t) in &specs.types {
        let file = types_file(f);
        for x in &t.typedefs {
            check_type(
                &mut errs,
                &file,
                &x.ty,
                &format!("typedef `{}`", x.name.value),
            );
        }
        for r in &t.records {
            if r.fields.is_empty() {
                errs.push(SpecError::at(
                    &file,
                    &r.name,
                    format!("record `{}` has no fields", r.name.value),
                ));
            }
            let mut seen = BTreeSet::new();
            for fl in &r.fields {
                if !seen.insert(&fl.name) {
                    errs.push(SpecError::at(
                        &file,
                        &fl.ty,
                        format!(
                            "record `{}` has two fields named `{}`",
                            r.name.value, fl.name
                        ),
                    ));
                }
                check_type(
                    &mut errs,
                    &file,
                    &fl.ty,
                    &format!("field `{}.{}`", r.name.value, fl.name),
                );
            }
            for e in &r.earlier_fields {
                let whose = format!(
                    "earlier field `{}.{}` (removed {})",
                    r.name.value, e.name, e.removed
                );
                check_type(&mut errs, &file, &e.ty, &whose);
                if let Some(s) = &e.since
                    && release_key(s) >= release_key(&e.removed)
                {
                    errs.push(SpecError::at(
                        &file,
                        &e.ty,
                        format!("{whose} has since {s}, not before its removed; run `cargo xtask import`"),
                    ));
                }
                if let Some(m) = &e.moved_to
                    && !r.fields.iter().any(|f| &f.name == m)
                {
                    errs.push(SpecError::at(
                        &file,
                        &e.ty,
                        format!(
                            "{whose} has moved_to `{m}` but record `{}` has no field `{m}`; name one of its unnamed members or run `cargo xtask import`",
                            r.name.value
                        ),
                    ));
                }
            }
        }
        for c in &t.callbacks {
            check_type(
                &mut errs,
                &file,
                &c.returns,
                &format!("callback `{}` return", c.name.value),
            );
            for p in &c.params {
                check_type(
                    &mut errs,
                    &file,
                    &p.ty,
                    &format!("callback `{}` parameter `{}`", c.name.value, p.name),
                );
            }
        }
        for e in &t.enums {
            if !matches!(e.repr.as_str(), "u32" | "i32" | "u64" | "i64") {
                errs.push(SpecError::at(
                    &file,
                    &e.name,
                    format!(
                        "enum `{}` has repr `{}`; use u32, i32, u64 or i64",
                        e.name.value, e.repr
                    ),
                ));
            }
            // An enum the newest header no longer declares (renamed, like
            // 13.0's `CUdevSmResourceSplit_flags`) keeps its values: C had
            // one namespace for them in its own release, Rust has one per type.
            for v in e.values.iter().filter(|_| e.removed.is_none()) {
                if let Some(prev) = values.insert(v.name.value.clone(), e.name.value.clone()) {
                    errs.push(SpecError::at(
                        &file,
                        &v.name,
                        format!("duplicate value name `{}` (also in `{prev}`)", v.name.value),
                    ));
                }
            }
        }
        for c in &t.constants {
            if let Some(prev) = values.insert(c.name.value.clone(), "constants".into()) {
                errs.push(SpecError::at(
                    &file,
                    &c.name,
                    format!("duplicate constant `{}` (also in `{prev}`)", c.name.value),
                ));
            }
        }
    }

    let result_enum = result_enum(specs);
    let results: BTreeSet<&str> = specs
        .enums()
        .filter(|e| e.name.value == result_enum)
        .flat_map(|e| e.values.iter().map(|v| v.name.value.as_str()))
        .collect();

    // Functions.
    let callbacks: BTreeSet<&str> = specs.callbacks().map(|c| c.name.value.as_str()).collect();
    let mut fn_names: BTreeMap<String, String> = BTreeMap::new();
    let mut rust_names: BTreeMap<String, String> = BTreeMap::new();
    for (f, g) in &specs.groups {
        let file = fn_file(f);
        for func in &g.functions {
            let name = &func.name.value;
            if let Some(prev) = fn_names.insert(name.clone(), file.clone()) {
                errs.push(SpecError::at(
                    &file,
                    &func.name,
                    format!("duplicate function `{name}`; it is already specified in {prev}"),
                ));
            }
            let rust = fn_name(name, func.rust_name.as_deref());
            if !is_ident(&rust) {
                errs.push(SpecError::at(
                    &file,
                    &func.name,
                    format!(
                        "function `{name}` has rust_name `{rust}`, which is not a Rust identifier"
                    ),
                ));
            } else if let Some(prev) = rust_names.insert(rust.clone(), name.clone()) {
                errs.push(SpecError::at(&file, &func.name, format!("function `{name}` has the Rust name `{rust}`, already used by `{prev}`; set rust_name")));
            }
            let param_names: Vec<&str> = func.params.iter().map(|p| p.name.as_str()).collect();
            let mut seen = BTreeSet::new();
            for p in &func.params {
                let whose = format!("parameter `{}` of `{name}`", p.name);
                if !seen.insert(&p.name) {
                    errs.push(SpecError::at(
                        &file,
                        &p.ty,
                        format!("`{name}` has two parameters named `{}`", p.name),
                    ));
                }
                let Some(t) = check_type(&mut errs, &file, &p.ty, &whose) else {
                    continue;
                };
                if p.role.value != Role::In && (!t.is_pointer() || t.pointee_is_const()) {
                    errs.push(SpecError::at(
                        &file,
                        &p.role,
                        format!("{whose} has role `{}` but its type `{}` is not a pointer to writable memory; use role `in` or fix the type", p.role.value.word(), p.ty.value),
                    ));
                }
                if p.optional && !t.is_pointer() && !callbacks.contains(t.base.as_str()) {
                    errs.push(SpecError::at(
                        &file,
                        &p.ty,
                        format!(
                            "{whose} is marked optional but `{}` is neither a pointer nor a callback",
                            p.ty.value
                        ),
                    ));
                }
                if p.array && !t.is_pointer() {
                    errs.push(SpecError::at(
                        &file,
                        &p.ty,
                        format!(
                            "{whose} is marked `array` but `{}` is not a pointer; drop `array` or fix the type",
                            p.ty.value
                        ),
                    ));
                }
                if let (true, Some(len)) = (p.array, &p.len) {
                    errs.push(SpecError::at(
                        &file,
                        len,
                        format!("{whose} has both `array` and `len`; `array` is for an array whose count no parameter holds, so drop one"),
                    ));
                }
                if let Some(len) = &p.len {
                    if !t.is_pointer() {
                        errs.push(SpecError::at(
                            &file,
                            len,
                            format!("{whose} has `len` but `{}` is not a pointer", p.ty.value),
                        ));
                    }
                    if !param_names.contains(&len.value.as_str()) {
                        errs.push(SpecError::at(
                            &file,
                            len,
                            format!("{whose} takes its length from `{}`, but `{name}` has no such parameter (it has: {})", len.value, param_names.join(", ")),
                        ));
                    } else if len.value == p.name {
                        errs.push(SpecError::at(
                            &file,
                            len,
                            format!("{whose} cannot be its own length"),
                        ));
                    }
                }
            }
            for e in &func.errors {
                if !results.is_empty() && !results.contains(e.value.as_str()) {
                    errs.push(SpecError::at(
                        &file,
                        e,
                        format!(
                            "`{name}` documents error `{}`, which is not a value of {result_enum}",
                            e.value
                        ),
                    ));
                }
            }
        }
    }

    // The error catalogue covers every CUresult exactly once.
    let mut catalogued = BTreeSet::new();
    for e in &specs.errors.errors {
        if !catalogued.insert(e.name.value.as_str()) {
            errs.push(SpecError::at(
                &errors_file,
                &e.name,
                format!("`{}` is catalogued twice", e.name.value),
            ));
        }
        if !results.is_empty() && !results.contains(e.name.value.as_str()) {
            errs.push(SpecError::at(
                &errors_file,
                &e.name,
                format!("`{}` is not a value of {result_enum}", e.name.value),
            ));
        }
        if e.summary.trim().is_empty() {
            errs.push(SpecError::at(
                &errors_file,
                &e.name,
                format!("`{}` has an empty summary", e.name.value),
            ));
        }
    }
    for r in &results {
        if !catalogued.contains(r) {
            errs.push(SpecError {
                file: errors_file.clone(),
                line: 1,
                col: 1,
                message: format!("{result_enum} value `{r}` has no catalogue entry; add one"),
            });
        }
    }
    errs
}
