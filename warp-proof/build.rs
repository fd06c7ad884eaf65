//! The prover's identity (`WARP_PROOF_ID`): a hash of every file under
//! `src/`. Declarations carried from a build (`carry_declarations`) name
//! it, and a reader of another identity derives them again rather than
//! trust rules another prover wrote.

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    println!("cargo:rerun-if-changed={}", src.display());
    let mut all = Vec::new();
    files(&src, &mut all);
    all.sort();
    // FNV-1a, 64 bits, over each path (relative to src/) and its bytes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for p in &all {
        let rel = p.strip_prefix(&src).unwrap_or(p);
        eat(rel.to_string_lossy().as_bytes());
        eat(&[0]);
        eat(&std::fs::read(p).unwrap_or_default());
        eat(&[0]);
    }
    println!("cargo:rustc-env=WARP_PROOF_ID={h:016x}");
}
