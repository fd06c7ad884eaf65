//! Loading spec files with source positions. Every problem is reported as
//! `specs/FILE.yaml:LINE:COL: message`.

use std::path::Path;

use serde::de::DeserializeOwned;

pub use super::error::{SpecError, SpecErrors};
use super::model::*;
use super::validate;

fn parse<T: DeserializeOwned>(file: &str, text: &str) -> Result<T, SpecError> {
    let mut path = None;
    serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = Some(e.path().clone());
            e.into_inner()
        })
    })
    .map_err(|e| {
        let loc = e.location();
        let plain = e.without_snippet().to_string();
        // serde-saphyr appends its own position; ours leads the line instead.
        let message = plain
            .split(" at line ")
            .next()
            .unwrap_or(&plain)
            .trim()
            .to_string();
        let message = match path.as_ref().map(|p| where_in(text, p)) {
            Some(w) if !w.is_empty() => format!("{w}: {message}"),
            _ => message,
        };
        SpecError {
            file: file.to_string(),
            line: loc.as_ref().map(|l| l.line()).unwrap_or(0),
            col: loc.as_ref().map(|l| l.column()).unwrap_or(0),
            message,
        }
    })
}

/// What a list of the spec format holds, by its key (`functions:` holds
/// functions).
fn entry_kind(list: &str) -> String {
    match list {
        "params" => "parameter".into(),
        // A record's (a C struct's) fields are its members; "field" is a key.
        "fields" => "member".into(),
        "entries" => "entry".into(),
        "aliases" => "alias".into(),
        other => other.strip_suffix('s').unwrap_or(other).into(),
    }
}

/// Where in a spec document `path` (serde's path to the value that did not
/// deserialize) is, in words: each list entry by its kind and `name:`
/// (`function `cuDeviceGet``, or `functions[3]` when it has none), then
/// the field, e.g. "function `cuDeviceGet`, field `proc_version`".
pub fn where_in(text: &str, path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    // The document as plain data, to name list entries; on a syntax error
    // there is none and entries are named by their index.
    let doc: Option<serde_json::Value> = serde_saphyr::from_str(text).ok();
    let mut node = doc.as_ref();
    let mut parts: Vec<String> = Vec::new();
    let mut list: Option<String> = None;
    let mut field: Option<String> = None;
    for seg in path {
        match seg {
            Segment::Map { key } => {
                // serde-saphyr's `Spanned<T>` reads its value through a
                // field of its own (`value`, not in the document): the field
                // is the one above it.
                let in_doc = node.and_then(|n| n.get(key)).is_some();
                if field.is_some() && !in_doc && (key == "value" || key.starts_with("__")) {
                    continue;
                }
                if let Some(f) = field.take() {
                    parts.push(format!("field `{f}`"));
                }
                node = node.and_then(|n| n.get(key));
                list = Some(key.clone());
                field = Some(key.clone());
            }
            Segment::Seq { index } => {
                field = None;
                let kind = list
                    .as_deref()
                    .map(entry_kind)
                    .unwrap_or_else(|| "entry".into());
                node = node.and_then(|n| n.get(index));
                let name = node.and_then(|n| n.get("name")).and_then(|n| n.as_str());
                parts.push(match name {
                    Some(name) => format!("{kind} `{name}`"),
                    None => format!(
                        "{kind} {} of `{}`",
                        index + 1,
                        list.as_deref().unwrap_or("?")
                    ),
                });
            }
            Segment::Enum { variant } => {
                if let Some(f) = field.take() {
                    parts.push(format!("field `{f}`"));
                }
                parts.push(format!("variant `{variant}`"));
            }
            Segment::Unknown => {}
        }
    }
    if let Some(f) = field {
        parts.push(format!("field `{f}`"));
    }
    let mut out = parts.join(", ");
    match node {
        Some(serde_json::Value::String(v)) => out.push_str(&format!(" (`{v}`)")),
        Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => {
            out.push_str(&format!(" (`{v}`)"))
        }
        _ => {}
    }
    out
}

/// Loads specs from `(display path, text)` pairs: `…/errors.yaml`,
/// `…/types/*.yaml`, `…/functions/*.yaml` and `…/warp/abi.yaml` (Warp's
/// kernel ABI), then validates them.
pub fn load_sources(sources: &[(String, String)]) -> Result<Specs, SpecErrors> {
    let mut specs = Specs::default();
    let mut errors = Vec::new();
    let mut sorted: Vec<&(String, String)> = sources.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (file, text) in sorted {
        let name = file.rsplit('/').next().unwrap_or(file).to_string();
        if file.ends_with("/errors.yaml") || file == "errors.yaml" {
            match parse::<ErrorCatalogue>(file, text) {
                Ok(c) => specs.errors = c,
                Err(e) => errors.push(e),
            }
        } else if file.contains("/types/") {
            match parse::<TypesFile>(file, text) {
                Ok(t) => specs.types.push((name, t)),
                Err(e) => errors.push(e),
            }
        } else if file.ends_with("/warp/abi.yaml") || file == "warp/abi.yaml" {
            match parse::<super::warp::WarpAbi>(file, text) {
                Ok(w) => {
                    errors.extend(super::warp::validate(&w, file));
                    specs.warp = Some(w);
                }
                Err(e) => errors.push(e),
            }
        } else if file.contains("/functions/") {
            match parse::<GroupFile>(file, text) {
                Ok(g) => specs.groups.push((name, g)),
                Err(e) => errors.push(e),
            }
        } else {
            errors.push(SpecError {
                file: file.clone(),
                line: 0,
                col: 0,
                message: "not a spec location: put functions under functions/, types under types/, the CUresult catalogue in errors.yaml, and the Warp ABI in warp/abi.yaml".into(),
            });
        }
    }
    if !errors.is_empty() {
        return Err(SpecErrors(errors));
    }
    let problems = validate::validate(&specs, &display_prefix(sources));
    if problems.is_empty() {
        Ok(specs)
    } else {
        Err(SpecErrors(problems))
    }
}

/// The common directory prefix of the display paths (e.g. `specs/`).
fn display_prefix(sources: &[(String, String)]) -> String {
    sources
        .first()
        .map(|(f, _)| {
            let cut = f
                .find("/functions/")
                .or_else(|| f.find("/types/"))
                .or_else(|| f.rfind('/'));
            cut.map(|i| f[..=i].to_string()).unwrap_or_default()
        })
        .unwrap_or_default()
}

/// Directories directly under `specs/` that hold a spec set of their own,
/// loaded by their own [`load_dir`] call and skipped by the driver's:
/// `nvrtc/` (from `nvrtc.h`).
pub const SEPARATE_SETS: &[&str] = &["nvrtc"];

/// Reads every `*.yaml` under `dir` and loads it, except the
/// [`SEPARATE_SETS`] directly under it. Paths are shown as `specs/…` (the
/// directory's own name, then the relative path).
pub fn load_dir(dir: &Path) -> Result<Specs, SpecErrors> {
    let label = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "specs".into());
    let mut sources = Vec::new();
    let mut io_errors = Vec::new();
    let mut visit = vec![dir.to_path_buf()];
    while let Some(d) = visit.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) => {
                io_errors.push(SpecError {
                    file: d.display().to_string(),
                    line: 0,
                    col: 0,
                    message: format!("cannot read directory: {e}"),
                });
                continue;
            }
        };
        let mut entries: Vec<std::fs::DirEntry> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p
                .strip_prefix(dir)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            // `DirEntry::file_type` does not follow symbolic links.
            let Ok(ft) = e.file_type() else {
                io_errors.push(SpecError {
                    file: format!("{label}/{rel}"),
                    line: 0,
                    col: 0,
                    message: "cannot read its file type".into(),
                });
                continue;
            };
            if ft.is_symlink() {
                io_errors.push(SpecError {
                    file: format!("{label}/{rel}"),
                    line: 0,
                    col: 0,
                    message: "is a symbolic link, which is not followed (a link to a directory above it would loop forever); put the real file or directory under specs/".into(),
                });
            } else if ft.is_dir() {
                let separate =
                    d == dir && SEPARATE_SETS.contains(&e.file_name().to_string_lossy().as_ref());
                if !separate {
                    visit.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "yaml") {
                match std::fs::read_to_string(&p) {
                    Ok(text) => sources.push((format!("{label}/{rel}"), text)),
                    Err(e) => io_errors.push(SpecError {
                        file: format!("{label}/{rel}"),
                        line: 0,
                        col: 0,
                        message: format!("cannot read: {e}"),
                    }),
                }
            }
        }
    }
    if !io_errors.is_empty() {
        return Err(SpecErrors(io_errors));
    }
    load_sources(&sources)
}
