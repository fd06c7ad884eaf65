//! The layer rule (DESIGN.md §6): `warp-launch` names no item of
//! `cuda_api::driver` or `cuda_api::sys` (nor the `cuda_sys` crate), however
//! the path or `use` tree is written. See `xtask::layers`. Below it,
//! `warp-proof` (the readers of kernel text and the access rules) has no GPU
//! code at all: no driver or CUDA crate in its build.

use std::path::{Path, PathBuf};

use xtask::layers::check_dir;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

fn warp_launch_src() -> PathBuf {
    root().join("warp-launch/src")
}

#[test]
fn every_warp_launch_source_parses() {
    // The check below is only as good as the parse: every file must be read.
    check_dir(&warp_launch_src(), &root()).expect("every warp-launch/src file parses");
}

#[test]
fn warp_launch_names_no_raw_cuda_layer() {
    let found = check_dir(&warp_launch_src(), &root()).expect("warp-launch/src parses");
    let list: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert!(
        found.is_empty(),
        "warp-launch names cuda-api's raw layer in {} places; make what it needs a safe \
         cuda-api feature and use that:\n{}",
        found.len(),
        list.join("\n")
    );
}

/// The GPU crates warp-proof must not build on: the driver's bindings, the
/// safe API, cudarc, and candle (`candle-*`, whose CUDA tensors need nvcc).
const GPU_CRATES: &[&str] = &["cuda-sys", "cuda-api", "cudarc"];

/// The crate names in `package`'s normal dependency tree (itself first),
/// from `cargo tree` with `extra` flags.
fn tree_names(package: &str, extra: &[&str]) -> Vec<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// warp-proof sits below warp-launch and below every GPU layer (issue 35):
/// its normal dependencies, every feature on, include none of them, so it
/// builds and its proofs run where no driver or toolkit is.
#[test]
fn warp_proof_depends_on_no_gpu_crate() {
    let names = tree_names("warp-proof", &["--all-features"]);
    assert!(names.iter().any(|n| n == "warp-proof"), "{names:?}");
    let gpu: Vec<&String> = names
        .iter()
        .filter(|n| GPU_CRATES.contains(&n.as_str()) || n.starts_with("candle"))
        .collect();
    assert!(gpu.is_empty(), "warp-proof depends on {gpu:?}");
}

/// warp-launch stands on warp-proof (the layer below it), which never
/// depends back on warp-launch, nor on warp-build (the compile step, which
/// may use it at build time).
#[test]
fn warp_launch_stands_on_warp_proof() {
    assert!(
        tree_names("warp-launch", &[])
            .iter()
            .any(|n| n == "warp-proof"),
        "warp-launch depends on warp-proof"
    );
    assert!(
        !tree_names("warp-proof", &[])
            .iter()
            .any(|n| n == "warp-launch" || n == "warp-build"),
        "warp-proof depends on warp-launch or warp-build (it sits below both)"
    );
}
