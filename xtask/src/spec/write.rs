//! Rendering specs back to YAML (for the importer) and applying a set of
//! rendered files to a directory, or checking that it already matches.

use std::collections::BTreeSet;
use std::path::Path;

use super::model::*;
use crate::Result;

const SPEC_BANNER: &str = "# Merged from the cuda.h of CUDA 12.0, 12.4, 12.8, 13.0 and 13.5 by `cargo xtask import`: facts are refreshed on each\n\
# import; annotations (rust_name, role, len, optional, safety, summary, sticky) are ours and kept.\n";

fn yaml<T: serde::Serialize>(banner: &str, v: &T) -> Result<String> {
    Ok(format!("{banner}{}", serde_saphyr::to_string(v)?))
}

/// The banner of `specs/nvrtc/`'s files.
pub const NVRTC_SPEC_BANNER: &str = "# Merged from the nvrtc.h of CUDA 12.0, 12.4, 12.8, 13.0 and 13.5 by `cargo xtask import`: facts are refreshed on each\n\
# import; annotations (rust_name, role, len, optional, safety, summary) are ours and kept.\n";

/// Every spec file as `(path relative to specs/, contents)`.
pub fn render_specs(specs: &Specs) -> Result<Vec<(String, String)>> {
    render_specs_with(specs, SPEC_BANNER)
}

/// Every spec file of a set as `(path relative to its directory, contents)`,
/// each starting with `banner`.
pub fn render_specs_with(specs: &Specs, banner: &str) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (name, g) in &specs.groups {
        out.push((format!("functions/{name}"), yaml(banner, g)?));
    }
    for (name, t) in &specs.types {
        out.push((format!("types/{name}"), yaml(banner, t)?));
    }
    out.push(("errors.yaml".to_string(), yaml(banner, &specs.errors)?));
    Ok(out)
}

/// Writes `files` under `dir` and removes stale files in the directories it
/// owns; with `check`, writes nothing and fails naming the files that differ.
pub fn apply(dir: &Path, files: &[(String, String)], check: bool, command: &str) -> Result<()> {
    let owned_dirs: BTreeSet<String> = files
        .iter()
        .filter_map(|(p, _)| p.rsplit_once('/').map(|(d, _)| d.to_string()))
        .collect();
    let wanted: BTreeSet<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let mut differ = Vec::new();
    for (rel, text) in files {
        let path = dir.join(rel);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            differ.push(format!("{}/{rel}", dir.display()));
            if !check {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&path, text)?;
            }
        }
    }
    for d in &owned_dirs {
        // The extensions this directory's generated files use: any other file
        // with one of them there is stale.
        let exts: BTreeSet<&str> = files
            .iter()
            .filter(|(p, _)| p.rsplit_once('/').is_some_and(|(pd, _)| pd == d))
            .filter_map(|(p, _)| p.rsplit_once('.').map(|(_, e)| e))
            .collect();
        let Ok(entries) = std::fs::read_dir(dir.join(d)) else {
            continue;
        };
        for e in entries.flatten() {
            let rel = format!("{d}/{}", e.file_name().to_string_lossy());
            let is_ours = e
                .path()
                .extension()
                .is_some_and(|x| exts.contains(x.to_string_lossy().as_ref()));
            if is_ours && !wanted.contains(rel.as_str()) {
                differ.push(format!("{}/{rel} (stale)", dir.display()));
                if !check {
                    std::fs::remove_file(e.path())?;
                }
            }
        }
    }
    if check {
        if differ.is_empty() {
            println!(
                "{command} --check: {} files up to date in {}",
                files.len(),
                dir.display()
            );
            Ok(())
        } else {
            Err(format!(
                "{} file(s) out of date; run `{command}`:\n  {}",
                differ.len(),
                differ.join("\n  ")
            )
            .into())
        }
    } else {
        println!(
            "{command}: {} of {} files changed in {}",
            differ.len(),
            files.len(),
            dir.display()
        );
        Ok(())
    }
}
