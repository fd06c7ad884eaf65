//! Every PTX file in the workspace (library code and test fixtures alike)
//! loads on the oldest driver the specs cover, CUDA 12.0, whose JIT takes
//! PTX ISA up to 8.0; or it is listed below with why it needs more and the
//! driver it needs (on an older driver, loading it is refused before the
//! JIT with `CudaError::PtxTooNew`, naming both versions).

use std::path::{Path, PathBuf};

use cuda_api::PtxIsa;

/// The oldest driver the specs cover (`specs/`: CUDA 12.0).
const OLDEST_DRIVER: i32 = 12000;

/// PTX newer than [`OLDEST_DRIVER`] takes: path from the workspace root,
/// the driver (CUDA version) it needs, and why.
const KNOWN_NEWER: &[(&str, i32, &str)] = &[
    (
        "warp-launch/src/conditional/set_condition.ptx",
        12030,
        "sets a conditional graph node's condition (cudaGraphSetConditional), which CUDA 12.3 \
         introduced: no older driver runs conditional nodes at all",
    ),
    (
        "cuda-api/tests/fixtures/images/add_one.ptx",
        13000,
        "a test fixture of the driver path (tests/images.rs, gpu_images), written by nvcc 13.0 \
         as it is; the H200's driver (CUDA 13.0) takes it",
    ),
    (
        "cuda-api/tests/images/one.compute75.ptx",
        13000,
        "a test fixture of the image choice (choice.rs), written by nvcc 13.0 as it is; \
         its ISA 9.0 is what those tests read",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every `*.ptx` under `dir`, skipping build output and hidden folders.
fn ptx_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Build outputs, not shipped: `target/`, and the GPU bundle that
        // `cargo xtask gpu-bundle` assembles from them.
        if name.starts_with('.') || name == "target" || name == "gpu-bundle" {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            ptx_files(&path, out);
        } else if kind.is_file() && name.ends_with(".ptx") {
            out.push(path);
        }
    }
}

fn isa_of(text: &str) -> Option<PtxIsa> {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(".version"))
        .and_then(PtxIsa::parse)
}

#[test]
fn every_shipped_ptx_loads_on_the_oldest_driver_or_says_what_it_needs() {
    let oldest = PtxIsa::accepted_by(OLDEST_DRIVER).unwrap();
    assert_eq!(oldest, PtxIsa::new(8, 0));
    let root = root();
    let mut files = Vec::new();
    ptx_files(&root, &mut files);
    files.sort();
    // The two kernels warp-launch embeds are found (the walk works).
    for needed in [
        "warp-launch/src/autodiff/copy_adjoint.ptx",
        "warp-launch/src/conditional/set_condition.ptx",
    ] {
        assert!(files.contains(&root.join(needed)), "{needed} not found");
    }
    let mut seen_known = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(file).unwrap();
        let isa = isa_of(&text).unwrap_or_else(|| panic!("{rel}: no `.version X.Y`"));
        match KNOWN_NEWER.iter().find(|(p, _, _)| *p == rel) {
            None => assert!(
                isa <= oldest,
                "{rel} is PTX ISA {isa}, newer than the CUDA 12.0 driver's JIT takes ({oldest}): \
                 compile it for ISA 8.0 (NVRTC 12.0), or list it in KNOWN_NEWER with the \
                 driver it needs and why"
            ),
            Some((_, driver, why)) => {
                assert!(!why.is_empty());
                assert!(
                    isa > oldest,
                    "{rel} is ISA {isa} now: take it off KNOWN_NEWER"
                );
                // The driver named is the first that takes it.
                let takes = PtxIsa::accepted_by(*driver).unwrap();
                assert!(
                    isa <= takes,
                    "{rel}: ISA {isa}, CUDA {driver} takes {takes}"
                );
                let before = PtxIsa::accepted_by(driver - 10);
                assert!(
                    before.is_none_or(|b| isa > b),
                    "{rel}: ISA {isa} loads on a driver older than CUDA {driver}"
                );
                seen_known.push(rel);
            }
        }
    }
    for (path, _, _) in KNOWN_NEWER {
        assert!(
            seen_known.iter().any(|s| s == path),
            "{path} is listed in KNOWN_NEWER but not in the workspace"
        );
    }
}
