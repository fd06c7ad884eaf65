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
pub mod merge;
pub mod nvrtc;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::spec::model::*;
use crate::spec::{load, write};
use crate::{Result, provision};

/// Runs the importer against `specs_dir`. With `check`, writes nothing and
/// fails when the specs' facts differ from the headers.
///
/// With `CUDA_HOME` / `CUDA_PATH` set, that one header is imported (or, with
/// `check`, compared: every difference is listed). Otherwise every pinned
/// release ([`provision::PINNED_RELEASES`]) is imported and the specs are
/// their merge (see [`merge`]); then the pinned `nvrtc.h` set into
/// `specs/nvrtc/` (see [`nvrtc`]).
pub fn run(specs_dir: &Path, check: bool) -> Result<()> {
    let old = if specs_dir.join("errors.yaml").exists() {
        Some(load::load_dir(specs_dir).map_err(|e| e.to_string())?)
    } else {
        None
    };
    if std::env::var_os("CUDA_HOME").is_some() || std::env::var_os("CUDA_PATH").is_some() {
        let include = provision::cuda_include_dir()?;
        let one = import_header(&include, old.as_ref(), "from CUDA_HOME/CUDA_PATH")?;
        if one.spec_count != one.header_count {
            let msg = format!(
                "the header declares {} functions but {} were imported",
                one.header_count, one.spec_count
            );
            if !check {
                return Err(format!("{msg}; nothing written").into());
            }
            println!("  note: {msg}");
        }
        if let Some(old) = &old {
            for line in diff_summary(old, &one.specs) {
                println!("  {line}");
            }
        }
        let files = write::render_specs(&one.specs)?;
        return write::apply(specs_dir, &files, check, "cargo xtask import");
    }

    let mut per_release = Vec::new();
    let mut declared: Vec<BTreeSet<String>> = Vec::new();
    for r in provision::PINNED_RELEASES {
        let include = provision::release_include_dir(r)?;
        let one = import_header(&include, old.as_ref(), r.wheel)?;
        let version = header::cuda_version(&one.cuda_h);
        if version != Some(merge::release_number(r.release)) {
            return Err(format!(
                "{} ({}) declares CUDA_VERSION {:?}, not CUDA {}; fix PINNED_RELEASES",
                include.join("cuda.h").display(),
                r.wheel,
                version,
                r.release
            )
            .into());
        }
        if one.spec_count != one.header_count {
            return Err(format!(
                "CUDA {} ({}): the header declares {} functions but {} were imported",
                r.release, r.wheel, one.header_count, one.spec_count
            )
            .into());
        }
        declared.push(
            one.specs
                .functions()
                .map(|(_, _, f)| f.name.value.clone())
                .collect(),
        );
        per_release.push(merge::ReleaseSpecs {
            release: r.release,
            specs: one.specs,
        });
    }
    println!(
        "xtask import: merging {} releases ({}) ...",
        per_release.len(),
        per_release
            .iter()
            .map(|r| r.release)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let new = merge::merge(&per_release);
    let releases: Vec<&str> = per_release.iter().map(|r| r.release).collect();
    // Every release's header against the merged specs: the functions that
    // `since` / `removed` place in that release are exactly those it declares.
    let mut wrong = Vec::new();
    for (r, names) in releases.iter().zip(&declared) {
        let placed: BTreeSet<String> = new
            .functions()
            .filter(|(_, _, f)| merge::present_in(f, r, &releases))
            .map(|(_, _, f)| f.name.value.clone())
            .collect();
        for n in placed.difference(names) {
            wrong.push(format!(
                "CUDA {r}: the specs place {n} in it but its header does not declare it"
            ));
        }
        for n in names.difference(&placed) {
            wrong.push(format!(
                "CUDA {r}: its header declares {n} but the specs' since/removed leave it out"
            ));
        }
    }
    if !wrong.is_empty() {
        return Err(format!(
            "the merged specs disagree with the headers:\n  {}",
            wrong.join("\n  ")
        )
        .into());
    }
    let counts = merge::functions_per_release(&new, &releases);
    println!(
        "xtask import: `CUresult CUDAAPI` functions per release: {}; {} in the merged specs",
        counts
            .iter()
            .map(|(r, n)| format!("CUDA {r}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        new.functions().count()
    );
    if let Some(old) = &old {
        for line in diff_summary(old, &new) {
            println!("  {line}");
        }
    }
    let files = write::render_specs(&new)?;
    write::apply(specs_dir, &files, check, "cargo xtask import")?;
    nvrtc::run(&specs_dir.join("nvrtc"), check)
}

/// One header, imported.
struct Imported {
    specs: Specs,
    cuda_h: String,
    spec_count: usize,
    header_count: usize,
}

/// Imports the `cuda.h` / `cudaTypedefs.h` in `include`, keeping `old`'s
/// annotations; prints what it read.
fn import_header(include: &Path, old: Option<&Specs>, pinned: &str) -> Result<Imported> {
    let libclang = provision::libclang_dir()?;
    let builtin = provision::cc_builtin_include_dir();
    let cuda_h = std::fs::read_to_string(include.join("cuda.h"))?;
    let typedefs_h = std::fs::read_to_string(include.join("cudaTypedefs.h"))?;
    println!(
        "xtask import: parsing {} with bindgen (libclang in {}) ...",
        include.join("cuda.h").display(),
        libclang.display()
    );
    let bindings = bindgen_ast::run_bindgen(include, &libclang, builtin.as_deref())?;
    let raw = bindgen_ast::read(&bindings)?;
    let facts = header::scan_cuda_h(&cuda_h);
    let pfn = header::scan_typedefs_h(&typedefs_h);
    let (new, notes) = build(&raw, &cuda_h, &facts, &pfn, old)?;

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
    let source = match header::cuda_version(&cuda_h) {
        Some(v) => format!("CUDA {}", header::version_string(v)),
        None => "unknown CUDA version".to_string(),
    };
    println!(
        "xtask import: {} ({source}, {pinned}): {spec_count} `CUresult CUDAAPI` functions imported, {header_count} declared in the header; \
         {} enums, {} records, {} handles, {} typedefs, {} callbacks, {} constants, {} CUresult codes",
        include.join("cuda.h").display(),
        new.enums().count(),
        new.records().count(),
        new.handles().count(),
        new.typedefs().count(),
        new.callbacks().count(),
        new.constants().count(),
        new.errors.errors.len(),
    );
    for n in &notes {
        println!("  note: {n}");
    }
    Ok(Imported {
        specs: new,
        cuda_h,
        spec_count,
        header_count,
    })
}

/// Builds the new specs from header facts, keeping annotations from `old`.
/// Returns notes on what was skipped (a declaration outside any
/// `\defgroup`, a second declaration of one API name), so that a header of
/// another CUDA release is compared instead of refused at its first surprise.
pub(crate) fn build(
    raw: &bindgen_ast::RawHeader,
    cuda_h: &str,
    facts: &header::HeaderFacts,
    pfn: &header::PfnVersions,
    old: Option<&Specs>,
) -> Result<(Specs, Vec<String>)> {
    let mut notes = Vec::new();
    let mut seen: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
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

    let header_version = header::cuda_version(cuda_h).unwrap_or(13000);
    let mut by_group: BTreeMap<usize, Vec<Function>> = BTreeMap::new();
    for rf in &raw.functions {
        let Some((api, group)) = header::api_name(facts, &rf.symbol) else {
            notes.push(format!(
                "skipped {}: declared outside any \\defgroup",
                rf.symbol
            ));
            continue;
        };
        if !seen.insert(api.clone()) {
            notes.push(format!(
                "skipped a second declaration of {api} (symbol {})",
                rf.symbol
            ));
            continue;
        }
        let group_name = &facts.groups[group].name;
        let proc = header::proc_name(&rf.symbol).to_string();
        // A function `cudaTypedefs.h` has no `PFN_` for (12.4's
        // `cuLibraryGetKernelCount`) is asked for at the header's own version.
        let proc_version = pfn
            .version_for_symbol(&rf.symbol, rf.params.len())
            .unwrap_or(header_version);
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
            pfn.per_thread_version_for(&proc, rf.params.len())
                .or_else(|| pfn.per_thread.get(&proc).and_then(|v| v.last().copied()))
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
            removed: None,
            abi: Vec::new(),
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
                    array: false,
                })
                .collect(),
            errors,
        };
        match old_fns.get(api.as_str()) {
            Some(o) => annotate::keep(&mut f, o),
            None => {
                annotate::propose(&mut f, &header::param_docs(&rf.doc));
                let base = header::proc_name(&api);
                if base != api
                    && let Some(sibling) = old_fns.get(base)
                {
                    annotate::inherit(&mut f, sibling);
                }
            }
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

    let split = header_types(&raw.types, cuda_h, old);

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
    Ok((
        Specs {
            groups,
            types: split,
            errors,
            // The importer reads cuda.h only; the Warp ABI spec is kept as it is.
            warp: old.and_then(|o| o.warp.clone()),
        },
        notes,
    ))
}

/// The type files of one header's types (`raw`, from bindgen), with what
/// bindgen's output lacks taken from the header's text: unsigned `#define`
/// literals, `#undef`ed macros dropped, typedef-only enums, the C names of
/// records without a tag; summaries kept from `old`.
pub(crate) fn header_types(
    raw: &TypesFile,
    header: &str,
    old: Option<&Specs>,
) -> Vec<(String, TypesFile)> {
    let mut types = raw.clone();
    // A macro the header `#undef`s after using it (13.5's
    // `RESOURCE_ABI_VERSION`) is no constant of its API.
    // bindgen evaluates `~0u` as the `int` -1; C's value is unsigned.
    let unsigned_literal = regex::Regex::new(r"\b(0x[0-9a-fA-F]+|\d+)[uU]\b").unwrap();
    for c in &mut types.constants {
        let define = format!("#define {}", c.name.value);
        let unsigned = header.lines().any(|l| {
            l.trim().strip_prefix(&define).is_some_and(|rest| {
                rest.starts_with([' ', '\t']) && unsigned_literal.is_match(rest)
            })
        });
        if unsigned && c.value < 0 && c.value >= i64::from(i32::MIN) {
            c.value = i64::from(c.value as i32 as u32);
            c.ty = "uint32_t".to_string();
        }
    }
    types.constants.retain(|c| {
        !header
            .lines()
            .any(|l| l.trim().strip_prefix("#undef").map(str::trim) == Some(c.name.value.as_str()))
    });
    for e in &mut types.enums {
        e.typedef_only = !header::has_tag(header, "enum", &e.name.value);
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
        if header::has_tag(header, kw, &name) {
            continue;
        }
        // A record declared inside another: bindgen's name is `Parent_Tag`.
        let nested = name
            .match_indices('_')
            .map(|(i, _)| &name[i + 1..])
            .find(|tag| !tag.is_empty() && header::has_tag(header, kw, tag));
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
    vec![
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
    ]
}

/// Added, removed and changed names between two keyed lists, as lines.
fn keyed_diff<T>(
    what: &str,
    old: &BTreeMap<String, T>,
    new: &BTreeMap<String, T>,
    changed: impl Fn(&T, &T) -> Option<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for k in new.keys().filter(|k| !old.contains_key(*k)) {
        out.push(format!("added {what} {k}"));
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        out.push(format!("removed {what} {k}"));
    }
    for (k, n) in new {
        if let Some(o) = old.get(k)
            && let Some(why) = changed(o, n)
        {
            out.push(format!("changed {what} {k}: {why}"));
        }
    }
    out
}

/// What changed in enums (and their values), records (and their fields),
/// handles, typedefs, callbacks and constants.
pub fn type_diff(old: &Specs, new: &Specs) -> Vec<String> {
    let mut out = Vec::new();
    let values = |s: &Specs| -> BTreeMap<String, i64> {
        s.enums()
            .flat_map(|e| {
                e.values
                    .iter()
                    .map(move |v| (format!("{}::{}", e.name.value, v.name.value), v.value))
            })
            .collect()
    };
    let enums = |s: &Specs| -> BTreeMap<String, ()> {
        s.enums().map(|e| (e.name.value.clone(), ())).collect()
    };
    out.extend(keyed_diff("enum", &enums(old), &enums(new), |_, _| None));
    // Values of enums present in both.
    let (eo, en) = (enums(old), enums(new));
    let in_both = |k: &String| {
        let e = k.split("::").next().unwrap_or_default();
        eo.contains_key(e) && en.contains_key(e)
    };
    let vo: BTreeMap<String, i64> = values(old)
        .into_iter()
        .filter(|(k, _)| in_both(k))
        .collect();
    let vn: BTreeMap<String, i64> = values(new)
        .into_iter()
        .filter(|(k, _)| in_both(k))
        .collect();
    out.extend(keyed_diff("enum value", &vo, &vn, |a, b| {
        (a != b).then(|| format!("{a} -> {b}"))
    }));
    let records = |s: &Specs| -> BTreeMap<String, Vec<String>> {
        s.records()
            .map(|r| {
                (
                    r.name.value.clone(),
                    r.fields
                        .iter()
                        .map(|f| format!("{} {}", f.ty.value, f.name))
                        .collect(),
                )
            })
            .collect()
    };
    out.extend(keyed_diff(
        "record",
        &records(old),
        &records(new),
        |a, b| {
            if a == b {
                return None;
            }
            let added: Vec<&String> = b.iter().filter(|f| !a.contains(f)).collect();
            let removed: Vec<&String> = a.iter().filter(|f| !b.contains(f)).collect();
            Some(format!(
                "fields added [{}], removed [{}]",
                added
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                removed
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        },
    ));
    // Removed and retyped fields (of records in both; added and removed
    // records are listed above).
    let earlier = |s: &Specs| -> BTreeMap<String, String> {
        s.records()
            .map(|r| {
                let list: Vec<String> = r.earlier_fields.iter().map(earlier_field).collect();
                (r.name.value.clone(), format!("[{}]", list.join(", ")))
            })
            .collect()
    };
    let (fo, fnew) = (earlier(old), earlier(new));
    for (k, b) in &fnew {
        if let Some(a) = fo.get(k)
            && a != b
        {
            out.push(format!("changed earlier fields of record {k}: {a} -> {b}"));
        }
    }
    let aliases = |s: &Specs| -> BTreeMap<String, String> {
        s.typedefs()
            .map(|t| (t.name.value.clone(), t.ty.value.clone()))
            .chain(
                s.handles()
                    .map(|h| (h.name.value.clone(), format!("handle to {}", h.opaque))),
            )
            .chain(s.callbacks().map(|c| {
                let ps: Vec<&str> = c.params.iter().map(|p| p.ty.value.as_str()).collect();
                (
                    c.name.value.clone(),
                    format!("{} (*)({})", c.returns.value, ps.join(", ")),
                )
            }))
            .collect()
    };
    out.extend(keyed_diff("type", &aliases(old), &aliases(new), |a, b| {
        (a != b).then(|| format!("{a} -> {b}"))
    }));
    let constants = |s: &Specs| -> BTreeMap<String, i64> {
        s.constants()
            .map(|c| (c.name.value.clone(), c.value))
            .collect()
    };
    out.extend(keyed_diff(
        "constant",
        &constants(old),
        &constants(new),
        |a, b| (a != b).then(|| format!("{a} -> {b}")),
    ));
    out
}

/// `unsigned char[64] reserved (since 12.4; not in 13.5)`: an earlier
/// field, its C type and releases, for messages.
pub fn earlier_field(e: &EarlierField) -> String {
    format!(
        "{} {} ({}not in {}{})",
        e.ty.value,
        e.name,
        e.since
            .as_deref()
            .map(|s| format!("since {s}; "))
            .unwrap_or_default(),
        e.removed,
        e.moved_to
            .as_deref()
            .map(|m| format!("; now in {m}"))
            .unwrap_or_default()
    )
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
    out.extend(type_diff(old, new));
    if out.is_empty() {
        out.push("no change in the header's facts".into());
    }
    out
}
