//! Loading spec files with source positions. Every problem is reported as
//! `specs/FILE.yaml:LINE:COL: message`.

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;

use super::model::*;
use super::validate;

/// One problem in one spec file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// Path as shown to the user, e.g. `specs/functions/mem.yaml`.
    pub file: String,
    /// 1-based line (0 when unknown).
    pub line: u64,
    /// 1-based column (0 when unknown).
    pub col: u64,
    /// What is wrong and what to do.
    pub message: String,
}

impl SpecError {
    /// An error at a spanned value's position.
    pub fn at<T>(file: &str, at: &serde_saphyr::Spanned<T>, message: impl Into<String>) -> Self {
        SpecError {
            file: file.to_string(),
            line: at.referenced.line(),
            col: at.referenced.column(),
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// All problems found, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.0 {
            writeln!(f, "{e}")?;
        }
        write!(
            f,
            "{} error(s) in the specs; no file was written",
            self.0.len()
        )
    }
}

impl std::error::Error for SpecErrors {}

fn parse<T: DeserializeOwned>(file: &str, text: &str) -> Result<T, SpecError> {
    serde_saphyr::from_str::<T>(text).map_err(|e| {
        let loc = e.location();
        let plain = e.without_snippet().to_string();
        // serde-saphyr appends its own position; ours leads the line instead.
        let message = plain
            .split(" at line ")
            .next()
            .unwrap_or(&plain)
            .trim()
            .to_string();
        SpecError {
            file: file.to_string(),
            line: loc.as_ref().map(|l| l.line()).unwrap_or(0),
            col: loc.as_ref().map(|l| l.column()).unwrap_or(0),
            message,
        }
    })
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

/// Reads every `*.yaml` under `dir` and loads it. Paths are shown as
/// `specs/…` (the directory's own name, then the relative path).
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
                visit.push(p);
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
