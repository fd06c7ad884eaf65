//! The stamp: what the last compile into an output directory was made from
//! (a SHA-256 of the sources, the options, the Warp version and the script)
//! and what it wrote. A compile whose inputs hash the same, and whose
//! outputs all exist, is skipped.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{BuildError, io};

/// The stamp's file name in the output directory.
pub(crate) const STAMP_FILE: &str = "warp-build.stamp";

/// What a compile was made from and what it wrote.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// Hex SHA-256 of the inputs ([`hash`]).
    pub hash: String,
    /// The architectures of the cubins.
    pub archs: Vec<u32>,
    /// The architecture of the PTX, if any.
    pub ptx_arch: Option<u32>,
    /// The block dimension the module was compiled for.
    pub block_dim: u32,
    /// The output files Warp wrote (names in the output directory).
    pub files: Vec<String>,
    /// The kernels of the module.
    pub kernels: Vec<String>,
    /// Every `.py` file of the user's the compile read.
    pub sources: Vec<PathBuf>,
    /// The generated Rust file's name, when embedding.
    pub embed: Option<String>,
    /// The CPU code's static library (path in the output directory), when
    /// compiled for the CPU.
    #[serde(default)]
    pub cpu_lib: Option<String>,
    /// The kernels with CPU entry points.
    #[serde(default)]
    pub cpu_kernels: Vec<String>,
    /// The kernels without, and why.
    #[serde(default)]
    pub cpu_unsupported: Vec<(String, String)>,
}

/// SHA-256 over `key` (the options, the Warp version, the script) and the
/// path and content of every file in `sources`; `None` when one cannot be read.
pub(crate) fn hash(key: &str, sources: &[PathBuf]) -> Option<String> {
    let mut sources = sources.to_vec();
    sources.sort();
    sources.dedup();
    let mut h = Sha256::new();
    h.update(b"warp-build stamp 1\n");
    h.update((key.len() as u64).to_le_bytes());
    h.update(key.as_bytes());
    for path in &sources {
        let content = std::fs::read(path).ok()?;
        let name = path.to_string_lossy();
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((content.len() as u64).to_le_bytes());
        h.update(&content);
    }
    Some(
        h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
    )
}

/// The stamp in `dir`, if there is one that parses.
pub(crate) fn read(dir: &Path) -> Option<Stamp> {
    let text = std::fs::read_to_string(dir.join(STAMP_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes `stamp` into `dir`.
pub(crate) fn write(dir: &Path, stamp: &Stamp) -> Result<(), BuildError> {
    let path = dir.join(STAMP_FILE);
    let text = serde_json::to_string_pretty(stamp).unwrap_or_default();
    std::fs::write(&path, text + "\n").map_err(io("writing", path))
}

/// Removes the stamp in `dir` (before a compile: a failed one leaves none).
pub(crate) fn remove(dir: &Path) -> Result<(), BuildError> {
    let path = dir.join(STAMP_FILE);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", path)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_follows_content_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.py");
        std::fs::write(&a, "x = 1\n").unwrap();
        let h1 = hash("k", std::slice::from_ref(&a)).unwrap();
        assert_eq!(h1.len(), 64);
        assert_eq!(hash("k", &[a.clone(), a.clone()]).unwrap(), h1);
        assert_ne!(hash("k2", std::slice::from_ref(&a)).unwrap(), h1);
        std::fs::write(&a, "x = 2\n").unwrap();
        assert_ne!(hash("k", std::slice::from_ref(&a)).unwrap(), h1);
        assert_eq!(hash("k", &[dir.path().join("missing.py")]), None);
    }
}
