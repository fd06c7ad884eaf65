//! `cargo xtask import [--check]`: refreshes `specs/` from the real `cuda.h`.
//!
//! Facts (names, symbols, C types, enum values, record layouts, documented
//! error codes, versions, deprecation, groups) are taken from the header; hand
//! annotations (Rust names, roles, lengths, optionality, safety, summaries,
//! sticky flags) are kept from the existing specs. New items get annotations
//! proposed from the header's parameter docs, to be reviewed by hand.

mod annotate;
mod bindgen_ast;
pub mod header;

use std::collections::BTreeMap;
use std::path::Path;

use crate::spec::model::*;
use crate::spec::{load, write};
use crate::{Result, provision};

/// Runs the importer against `specs_dir`. With `check`, writes nothing and
/// fails when the specs' facts differ from the header.
pub fn run(specs_dir: &Path, check: bool) -> Result<()> {
    let include = provision::cuda_include_dir()?;
    let libclang = provision::libclang_dir()?;
    let builtin = provision::cc_builtin_include_dir();
    let cuda_h = std::fs::read_to_string(include.join("cuda.h"))?;
    let typedefs_h = std::fs::read_to_string(include.join("cudaTypedefs.h"))?;
    let bindings = bindgen_ast::run_bindgen(&include, &libclang, builtin.as_deref())?;
    let raw = bindgen_ast::read(&bindings)?;
    let facts = header::scan_cuda_h(&cuda_h);
    let pfn = header::scan_typedefs_h(&typedefs_h);

    let old = if specs_dir.join("errors.yaml").exists() {
        Some(load::load_dir(specs_dir).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let new = build(&raw, &cuda_h, &facts, &pfn, old.as_ref())?;

    let header_count = facts
        .decl_group
        .keys()
        .map(|api| {
            facts
                .renames
                .get(api)
                .cloned()
                .unwrap_or_else(|| api.clone())
        })
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let spec_count: usize = new.groups.iter().map(|(_, g)| g.functions.len()).sum();
    println!(
        "xtask import: {} ({}): {spec_count} `CUresult CUDAAPI` functions in specs, {header_count} declared in the header; \
         {} enums, {} records, {} handles, {} typedefs, {} callbacks, {} constants, {} CUresult codes",
        include.join("cuda.h").display(),
        provision::CUDA_RUNTIME_WHEEL,
        new.enums().count(),
        new.records().count(),
        new.handles().count(),
        new.typedefs().count(),
        new.callbacks().count(),
        new.constants().count(),
        new.errors.errors.len(),
    );
    if spec_count != header_count {
        return Err(format!(
            "the header declares {header_count} functions but {spec_count} were imported"
        )
        .into());
    }
    if let Some(old) = &old {
        for line in diff_summary(old, &new) {
            println!("  {line}");
        }
    }
    let files = write::render_specs(&new)?;
    write::apply(specs_dir, &files, check, "cargo xtask import")
}

/// Builds the new specs from header facts, keeping annotations from `old`.
fn build(
    raw: &bindgen_ast::RawHeader,
    cuda_h: &str,
    facts: &header::HeaderFacts,
    pfn: &header::PfnVersions,
    old: Option<&Specs>,
) -> Result<Specs> {
    // Symbol → API name.
    let mut api_of: BTreeMap<&str, &str> = BTreeMap::new();
    for (api, sym) in &facts.renames {
        api_of.insert(sym, api);
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

    let mut by_group: BTreeMap<usize, Vec<Function>> = BTreeMap::new();
    for rf in &raw.functions {
        let api = api_of
            .get(rf.symbol.as_str())
            .copied()
            .unwrap_or(rf.symbol.as_str())
            .to_string();
        let group = facts
            .decl_group
            .get(&api)
            .or_else(|| facts.decl_group.get(&rf.symbol))
            .copied()
            .ok_or_else(|| format!("{api} ({}) is declared outside any \\defgroup", rf.symbol))?;
        let group_name = &facts.groups[group].name;
        let proc = header::proc_name(&rf.symbol).to_string();
        let proc_version = pfn
            .current
            .get(&proc)
            .and_then(|v| v.last().copied())
            .unwrap_or(13000);
        let since = pfn
            .all
            .get(&api)
            .into_iter()
            .chain(pfn.all.get(&proc))
            .flatten()
            .min()
            .map(|v| header::version_string(*v));
        let per_thread_symbol = facts.per_thread.get(&api).cloned();
        let per_thread_version = per_thread_symbol.as_ref().map(|_| {
            pfn.per_thread
                .get(&proc)
                .and_then(|v| v.last().copied())
                .unwrap_or(proc_version)
                .max(proc_version)
        });
        let deprecated = rf.doc.contains("\\deprecated") || group_name.ends_with("_DEPRECATED");
        let errors = header::documented_errors(&rf.doc)
            .into_iter()
            .map(str)
            .collect();
        let mut f = Function {
            name: str(api.clone()),
            symbol: rf.symbol.clone(),
            per_thread_symbol,
            per_thread_version,
            proc_version,
            since,
            deprecated,
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
                })
                .collect(),
            errors,
        };
        match old_fns.get(api.as_str()) {
            Some(o) => annotate::keep(&mut f, o),
            None => annotate::propose(&mut f, &header::param_docs(&rf.doc)),
        }
        by_group.entry(group).or_default().push(f);
    }
    let mut groups = Vec::new();
    for (gi, functions) in by_group {
        let g = &facts.groups[gi];
        let file = format!("{}.yaml", g.name.trim_start_matches("CUDA_").to_lowercase());
        groups.push((
            file,
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
    groups.sort_by(|a, b| a.0.cmp(&b.0));

    let mut types = raw.types.clone();
    for e in &mut types.enums {
        e.typedef_only = !header::has_tag(cuda_h, "enum", &e.name.value);
    }
    for r in &mut types.records {
        if r.c_path.is_some() {
            continue;
        }
        let kw = if r.kind == RecordKind::Struct {
            "struct"
        } else {
            "union"
        };
        let name = r.name.value.clone();
        if header::has_tag(cuda_h, kw, &name) {
            continue;
        }
        // A record declared inside another: bindgen's name is `Parent_Tag`.
        let nested = name
            .match_indices('_')
            .map(|(i, _)| &name[i + 1..])
            .find(|tag| !tag.is_empty() && header::has_tag(cuda_h, kw, tag));
        r.c_name = Some(match nested {
            Some(tag) => format!("{kw} {tag}"),
            None => name,
        });
    }
    if let Some(o) = old {
        let enum_sums: BTreeMap<&str, &Option<String>> = o
            .enums()
            .map(|e| (e.name.value.as_str(), &e.summary))
            .collect();
        for e in &mut types.enums {
            if let Some(s) = enum_sums.get(e.name.value.as_str()) {
                e.summary = (*s).clone();
            }
        }
        let rec_sums: BTreeMap<&str, &Option<String>> = o
            .records()
            .map(|r| (r.name.value.as_str(), &r.summary))
            .collect();
        for r in &mut types.records {
            if let Some(s) = rec_sums.get(r.name.value.as_str()) {
                r.summary = (*s).clone();
            }
        }
    }
    let split = vec![
        (
            "callbacks.yaml".to_string(),
            TypesFile {
                callbacks: types.callbacks,
                ..Default::default()
            },
        ),
        (
            "constants.yaml".to_string(),
            TypesFile {
                constants: types.constants,
                ..Default::default()
            },
        ),
        (
            "enums.yaml".to_string(),
            TypesFile {
                enums: types.enums,
                ..Default::default()
            },
        ),
        (
            "handles.yaml".to_string(),
            TypesFile {
                handles: types.handles,
                ..Default::default()
            },
        ),
        (
            "records.yaml".to_string(),
            TypesFile {
                records: types.records,
                ..Default::default()
            },
        ),
        (
            "typedefs.yaml".to_string(),
            TypesFile {
                typedefs: types.typedefs,
                ..Default::default()
            },
        ),
    ];

    // The error catalogue: one entry per CUresult value, keeping our text.
    let cu_result = split
        .iter()
        .flat_map(|(_, t)| t.enums.iter())
        .find(|e| e.name.value == "cudaError_enum")
        .ok_or("cuda.h has no cudaError_enum")?;
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
        errors: cu_result
            .values
            .iter()
            .map(|v| match old_errors.get(v.name.value.as_str()) {
                Some(e) => ErrorEntry {
                    name: str(v.name.value.clone()),
                    summary: e.summary.clone(),
                    sticky: e.sticky,
                },
                None => ErrorEntry {
                    name: str(v.name.value.clone()),
                    summary: annotate::humanize_error(&v.name.value),
                    sticky: false,
                },
            })
            .collect(),
    };
    Ok(Specs {
        groups,
        types: split,
        errors,
        // The importer reads cuda.h only; the Warp ABI spec is kept as it is.
        warp: old.and_then(|o| o.warp.clone()),
    })
}

/// Lines describing what changed between two spec sets (facts only).
fn diff_summary(old: &Specs, new: &Specs) -> Vec<String> {
    let o: BTreeMap<&str, &Function> = old
        .functions()
        .map(|(_, _, f)| (f.name.value.as_str(), f))
        .collect();
    let n: BTreeMap<&str, &Function> = new
        .functions()
        .map(|(_, _, f)| (f.name.value.as_str(), f))
        .collect();
    let mut out = Vec::new();
    for k in n.keys().filter(|k| !o.contains_key(*k)) {
        out.push(format!("added function {k}"));
    }
    for k in o.keys().filter(|k| !n.contains_key(*k)) {
        out.push(format!("removed function {k}"));
    }
    for (k, nf) in &n {
        let Some(of) = o.get(k) else { continue };
        let sig = |f: &Function| {
            f.params
                .iter()
                .map(|p| format!("{} {}", p.ty.value, p.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if sig(of) != sig(nf) {
            out.push(format!(
                "changed parameters of {k}: ({}) -> ({})",
                sig(of),
                sig(nf)
            ));
        }
        let errs = |f: &Function| f.errors.iter().map(|e| e.value.clone()).collect::<Vec<_>>();
        if errs(of) != errs(nf) {
            out.push(format!("changed documented errors of {k}"));
        }
        if of.symbol != nf.symbol || of.proc_version != nf.proc_version {
            out.push(format!(
                "changed symbol of {k}: {}@{} -> {}@{}",
                of.symbol, of.proc_version, nf.symbol, nf.proc_version
            ));
        }
    }
    let count = |s: &Specs| {
        (
            s.enums().map(|e| e.values.len()).sum::<usize>(),
            s.records().count(),
            s.typedefs().count() + s.handles().count() + s.callbacks().count(),
            s.constants().count(),
        )
    };
    if count(old) != count(new) {
        out.push(format!(
            "type counts (enum values, records, aliases, constants): {:?} -> {:?}",
            count(old),
            count(new)
        ));
    }
    if out.is_empty() {
        out.push("no change in the header's facts".into());
    }
    out
}
