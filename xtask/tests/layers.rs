//! The layer rule (DESIGN.md §6): `warp-launch` names no item of
//! `cuda_api::driver` or `cuda_api::sys` (nor the `cuda_sys` crate), however
//! the path or `use` tree is written. See `xtask::layers`.

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
