//! `cargo xtask import` for `nvrtc.h`: the NVRTC specs in `specs/nvrtc/`,
//! merged from one pinned `nvidia-cuda-nvrtc` wheel per release of the
//! `cuda.h` set ([`provision::PINNED_NVRTC`]), by the same bindgen reading,
//! type handling and merge as `cuda.h`.
//!
//! What differs from `cuda.h`: functions return `nvrtcResult`; their group is
//! the `\ingroup` of their doc comment; their `\return` list spells codes
//! `\link #nvrtcResult NVRTC_… \endlink`; `nvrtc.h` has no version macro
//! and no `cudaTypedefs.h` (the wheel's version names the release, and a
//! function's `proc_version` is the release of its `since`: the NVRTC
//! version the loader needs before it looks the symbol up); deprecation is
//! the `__DEPRECATED__(…)` before a declaration. `nvrtcGetErrorString`
//! returns a string, not an `nvrtcResult`, and is left out (noted): the
//! `nvrtcResult` catalogue (`specs/nvrtc/errors.yaml`) names every code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use regex::Regex;

use super::{annotate, bindgen_ast, header, merge};
use crate::ctype::CType;
use crate::spec::model::*;
use crate::spec::{load, write};
use crate::{Result, provision};

/// The result type of NVRTC's functions.
pub const RESULT: &str = "nvrtcResult";

/// Imports every pinned `nvrtc.h` into `specs_dir` (`specs/nvrtc`); with
/// `check`, writes nothing and fails when the specs' facts differ.
pub fn run(specs_dir: &Path, check: bool) -> Result<()> {
    let old = if specs_dir.join("errors.yaml").exists() {
        Some(load::load_dir(specs_dir).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let libclang = provision::libclang_dir()?;
    let builtin = provision::cc_builtin_include_dir();
    let mut per_release = Vec::new();
    let mut declared: Vec<BTreeSet<String>> = Vec::new();
    for r in provision::PINNED_NVRTC {
        let version = r.wheel.split("==").nth(1).unwrap_or("");
        if !version.starts_with(&format!("{}.", r.release)) {
            return Err(format!(
                "{} is no wheel of CUDA {}; fix PINNED_NVRTC",
                r.wheel, r.release
            )
            .into());
        }
        let include = provision::nvrtc_include_dir(r)?;
        let text = std::fs::read_to_string(include.join("nvrtc.h"))?;
        println!(
            "xtask import: parsing {} with bindgen ...",
            include.join("nvrtc.h").display()
        );
        let bindings =
            bindgen_ast::run_bindgen_on(&include, "nvrtc.h", &libclang, builtin.as_deref())?;
        let raw = bindgen_ast::read_api(&bindings, RESULT)?;
        let (specs, notes) = build(&raw, &text, old.as_ref())?;
        let names: BTreeSet<String> = specs
            .functions()
            .map(|(_, _, f)| f.name.value.clone())
            .collect();
        let in_header = declared_functions(&text);
        if names != in_header {
            return Err(format!(
                "CUDA {} ({}): nvrtc.h declares {} `nvrtcResult` functions in C ({}), {} were imported ({})",
                r.release,
                r.wheel,
                in_header.len(),
                in_header.iter().cloned().collect::<Vec<_>>().join(", "),
                names.len(),
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            )
            .into());
        }
        println!(
            "xtask import: {} (CUDA {}, {}): {} `nvrtcResult` functions, {} enums, {} records, {} handles, {} callbacks, {} constants, {} nvrtcResult codes",
            include.join("nvrtc.h").display(),
            r.release,
            r.wheel,
            names.len(),
            specs.enums().count(),
            specs.records().count(),
            specs.handles().count(),
            specs.callbacks().count(),
            specs.constants().count(),
            specs.errors.errors.len()
        );
        for n in &notes {
            println!("  note: {n}");
        }
        declared.push(names);
        per_release.push(merge::ReleaseSpecs {
            release: r.release,
            specs,
        });
    }
    let mut new = merge::merge(&per_release);
    let releases: Vec<&str> = per_release.iter().map(|r| r.release).collect();
    date_functions(&mut new, releases[0]);
    let mut wrong = Vec::new();
    for (r, names) in releases.iter().zip(&declared) {
        let placed: BTreeSet<String> = new
            .functions()
            .filter(|(_, _, f)| merge::present_in(f, r, &releases))
            .map(|(_, _, f)| f.name.value.clone())
            .collect();
        for n in placed.symmetric_difference(names) {
            wrong.push(format!(
                "CUDA {r}: {n} is {} nvrtc.h but the specs' since/removed say otherwise",
                if names.contains(n) { "in" } else { "not in" }
            ));
        }
    }
    if !wrong.is_empty() {
        return Err(format!(
            "the merged NVRTC specs disagree with the headers:\n  {}",
            wrong.join("\n  ")
        )
        .into());
    }
    println!(
        "xtask import: `nvrtcResult` functions per release: {}; {} in the merged NVRTC specs",
        merge::functions_per_release(&new, &releases)
            .iter()
            .map(|(r, n)| format!("CUDA {r}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        new.functions().count()
    );
    if let Some(old) = &old {
        for line in super::type_diff(old, &new) {
            println!("  {line}");
        }
    }
    let files = write::render_specs_with(&new, write::NVRTC_SPEC_BANNER)?;
    write::apply(specs_dir, &files, check, "cargo xtask import")
}

/// Every function's `proc_version` becomes the release of its `since` (the
/// oldest pinned release when it is in all of them): the NVRTC version the
/// loader needs before it looks the symbol up. Earlier ABIs (a parameter
/// list that changed) are dated by their release.
pub fn date_functions(specs: &mut Specs, oldest: &str) {
    for (_, g) in &mut specs.groups {
        for f in &mut g.functions {
            let since = f.since.clone().unwrap_or_else(|| oldest.to_string());
            f.proc_version = merge::release_number(&since);
            for a in &mut f.abi {
                a.proc_version = merge::release_number(&a.release);
            }
        }
    }
}

/// The names of the `nvrtcResult` functions `nvrtc.h` declares for C (its
/// C++-only helpers, inside `#if … __cplusplus` and `#if NVRTC_GET_TYPE_NAME`
/// blocks, left out).
pub fn declared_functions(text: &str) -> BTreeSet<String> {
    let decl = Regex::new(r"^\s*nvrtcResult\s+(nvrtc\w+)\s*\(").unwrap();
    let mut stack: Vec<bool> = Vec::new();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix('#') {
            let d = rest.trim_start();
            if d.starts_with("if") {
                stack.push(d.contains("__cplusplus") || d.contains("NVRTC_GET_TYPE_NAME"));
            } else if d.starts_with("endif") {
                stack.pop();
            }
            continue;
        }
        if stack.iter().any(|c| *c) {
            continue;
        }
        if let Some(c) = decl.captures(line) {
            out.insert(c[1].to_string());
        }
    }
    out
}

/// `\defgroup NAME Title` of `nvrtc.h`, in header order.
pub fn groups(text: &str) -> Vec<header::Group> {
    let re = Regex::new(r"\\defgroup\s+(\w+)\s+(.+?)\s*$").unwrap();
    text.lines()
        .filter_map(|l| {
            re.captures(l).map(|c| header::Group {
                name: c[1].to_string(),
                title: c[2].to_string(),
            })
        })
        .collect()
}

/// The `\ingroup` of a doc comment.
pub fn ingroup(doc: &str) -> Option<String> {
    let re = Regex::new(r"\\ingroup\s+(\w+)").unwrap();
    re.captures(doc).map(|c| c[1].to_string())
}

/// The codes listed under `\return` in an NVRTC doc comment, in order.
pub fn documented_errors(doc: &str) -> Vec<String> {
    let code = Regex::new(r"\b(NVRTC_(?:SUCCESS|ERROR_[A-Z0-9_]+))\b").unwrap();
    let Some(start) = doc.find("\\return") else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for (i, line) in doc[start + "\\return".len()..].lines().enumerate() {
        let t = line.trim_start().trim_start_matches('*').trim_start();
        // The list ends at the next command (`\see`, `\note`), not at `\link`.
        if i > 0 && t.starts_with('\\') && !t.starts_with("\\link") {
            break;
        }
        for c in code.captures_iter(line) {
            if !out.contains(&c[1].to_string()) {
                out.push(c[1].to_string());
            }
        }
    }
    out
}

/// `\param [in] NAME …` / `[out]` of a doc comment: the direction the
/// header gives each parameter.
pub fn param_directions(doc: &str) -> BTreeMap<String, String> {
    let re = Regex::new(r"\\param\s*\[([a-z, ]+)\]\s*(\w+)").unwrap();
    doc.lines()
        .filter_map(|l| {
            re.captures(l)
                .map(|c| (c[2].to_string(), c[1].replace(' ', "")))
        })
        .collect()
}

/// Whether the header marks `name` `__DEPRECATED__` or its doc says so.
fn deprecated(text: &str, name: &str, doc: &str) -> bool {
    let re = Regex::new(&format!(
        r"__DEPRECATED__\([^)]*\)\s*nvrtcResult\s+{}\s*\(",
        regex::escape(name)
    ))
    .unwrap();
    re.is_match(text) || doc.contains("\\deprecated") || doc.contains("DEPRECATION NOTICE")
}

/// Builds one release's NVRTC specs from bindgen's reading of `nvrtc.h` and
/// its text, keeping the annotations of `old`. Returns notes on what was
/// left out.
pub(crate) fn build(
    raw: &bindgen_ast::RawHeader,
    text: &str,
    old: Option<&Specs>,
) -> Result<(Specs, Vec<String>)> {
    let mut notes = Vec::new();
    if text.contains("nvrtcGetErrorString(") {
        notes.push("left out nvrtcGetErrorString: it returns a string, not an nvrtcResult; specs/nvrtc/errors.yaml names every code".to_string());
    }
    let old_fns: BTreeMap<&str, &Function> = old
        .map(|o| {
            o.functions()
                .map(|(_, _, f)| (f.name.value.as_str(), f))
                .collect()
        })
        .unwrap_or_default();
    let old_groups: BTreeMap<&str, &GroupFile> = old
        .map(|o| {
            o.groups
                .iter()
                .map(|(_, g)| (g.group.as_str(), g))
                .collect()
        })
        .unwrap_or_default();
    let groups = groups(text);
    let mut by_group: BTreeMap<usize, Vec<Function>> = BTreeMap::new();
    for rf in &raw.functions {
        let Some(gi) = ingroup(&rf.doc).and_then(|g| groups.iter().position(|x| x.name == g))
        else {
            notes.push(format!(
                "skipped {}: its doc names no \\defgroup of nvrtc.h",
                rf.symbol
            ));
            continue;
        };
        let mut f = Function {
            name: str(rf.symbol.clone()),
            symbol: rf.symbol.clone(),
            per_thread_symbol: None,
            per_thread_version: None,
            // Dated by `date_functions` after the merge; the oldest release
            // here keeps the merge from seeing an ABI change per release.
            proc_version: merge::release_number(provision::PINNED_NVRTC[0].release),
            since: None,
            removed: None,
            abi: Vec::new(),
            deprecated: deprecated(text, &rf.symbol, &rf.doc),
            rust_name: None,
            safety: Safety::Unsafe,
            summary: None,
            safety_doc: None,
            params: rf
                .params
                .iter()
                .map(|(n, t)| Param {
                    name: n.clone(),
                    ty: str(t.clone()),
                    role: serde_saphyr::Spanned::new(
                        Role::In,
                        serde_saphyr::Location::UNKNOWN,
                        serde_saphyr::Location::UNKNOWN,
                    ),
                    len: None,
                    optional: false,
                    rust_name: None,
                    fixed: None,
                    boolean: false,
                    array: false,
                })
                .collect(),
            errors: documented_errors(&rf.doc).into_iter().map(str).collect(),
        };
        match old_fns.get(rf.symbol.as_str()) {
            Some(o) => annotate::keep(&mut f, o),
            None => propose(&mut f, &param_directions(&rf.doc)),
        }
        by_group.entry(gi).or_default().push(f);
    }
    let mut files = Vec::new();
    for (gi, functions) in by_group {
        let g = &groups[gi];
        files.push((
            format!("{}.yaml", g.name),
            GroupFile {
                group: g.name.clone(),
                title: g.title.clone(),
                summary: old_groups
                    .get(g.name.as_str())
                    .and_then(|o| o.summary.clone()),
                functions,
            },
        ));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut types = super::header_types(&raw.types, text, old);
    // No empty type files (nvrtc.h declares no plain typedef).
    types.retain(|(_, t)| {
        !(t.handles.is_empty()
            && t.typedefs.is_empty()
            && t.enums.is_empty()
            && t.records.is_empty()
            && t.callbacks.is_empty()
            && t.constants.is_empty())
    });
    let result = types
        .iter()
        .flat_map(|(_, t)| t.enums.iter())
        .find(|e| e.name.value == RESULT)
        .ok_or("nvrtc.h has no nvrtcResult")?;
    let old_errors: BTreeMap<&str, &ErrorEntry> = old
        .map(|o| {
            o.errors
                .errors
                .iter()
                .map(|e| (e.name.value.as_str(), e))
                .collect()
        })
        .unwrap_or_default();
    let errors = ErrorCatalogue {
        errors: result
            .values
            .iter()
            .map(|v| ErrorEntry {
                name: str(v.name.value.clone()),
                summary: old_errors
                    .get(v.name.value.as_str())
                    .map(|e| e.summary.clone())
                    .unwrap_or_else(|| {
                        annotate::humanize_error(
                            v.name
                                .value
                                .trim_start_matches("NVRTC_ERROR_")
                                .trim_start_matches("NVRTC_"),
                        )
                    }),
                sticky: false,
            })
            .collect(),
    };
    Ok((
        Specs {
            groups: files,
            types,
            errors,
            warp: None,
        },
        notes,
    ))
}

/// Proposed annotations for a new function: the header's `[out]` on a
/// writable pointer makes it `out` (`[in,out]`: `inout`); the rest stay
/// `in`. To be reviewed by hand.
fn propose(f: &mut Function, directions: &BTreeMap<String, String>) {
    for p in &mut f.params {
        let writable = CType::parse(&p.ty.value)
            .ok()
            .is_some_and(|t| t.is_pointer() && !t.pointee_is_const());
        let role = match directions.get(&p.name).map(String::as_str) {
            Some("out") if writable => Role::Out,
            Some("in,out" | "inout") if writable => Role::Inout,
            _ => Role::In,
        };
        p.role = serde_saphyr::Spanned::new(
            role,
            serde_saphyr::Location::UNKNOWN,
            serde_saphyr::Location::UNKNOWN,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
#ifdef __cplusplus
extern "C" {
#endif
/**
 * \defgroup compilation Compilation
 */
/**
 * \ingroup compilation
 * \param   [in]  prog CUDA Runtime Compilation program.
 * \param   [out] ptxSizeRet Size of the generated PTX.
 * \return
 *   - \link #nvrtcResult NVRTC_SUCCESS \endlink
 *   - \link #nvrtcResult NVRTC_ERROR_INVALID_INPUT \endlink
 *
 * \see     ::nvrtcGetPTX NVRTC_ERROR_COMPILATION
 */
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *ptxSizeRet);
__DEPRECATED__("gone")
nvrtcResult nvrtcGetNVVMSize(nvrtcProgram prog, size_t *nvvmSizeRet);
#ifdef __cplusplus
}
#endif
#if defined(__cplusplus)
template <typename T>
nvrtcResult nvrtcGetTypeName(std::string *result)
{ return NVRTC_SUCCESS; }
#endif
"#;

    #[test]
    fn declared_functions_leave_out_the_cplusplus_helpers() {
        let names: Vec<String> = declared_functions(SAMPLE).into_iter().collect();
        assert_eq!(names, ["nvrtcGetNVVMSize", "nvrtcGetPTXSize"]);
    }

    #[test]
    fn the_return_list_ends_at_the_next_command() {
        let doc = SAMPLE.split("/**").nth(2).unwrap();
        assert_eq!(
            documented_errors(doc),
            ["NVRTC_SUCCESS", "NVRTC_ERROR_INVALID_INPUT"]
        );
        assert_eq!(ingroup(doc).as_deref(), Some("compilation"));
        let dirs = param_directions(doc);
        assert_eq!(dirs["prog"], "in");
        assert_eq!(dirs["ptxSizeRet"], "out");
    }

    #[test]
    fn deprecation_is_the_macro_before_the_declaration() {
        assert!(deprecated(SAMPLE, "nvrtcGetNVVMSize", ""));
        assert!(!deprecated(SAMPLE, "nvrtcGetPTXSize", ""));
    }
}
