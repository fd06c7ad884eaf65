//! The rooms rule (DESIGN.md §6, "Rooms by concept"): no file-level `use`
//! circle between any two files of cuda-api, warp-launch, warp-proof,
//! warp-build or xtask (cuda-sys is left out: its generated bindings and
//! their loader name each other); cuda-api's `error.rs` and its plain
//! values import nothing back. See `xtask::use_circles`.

use std::path::{Path, PathBuf};

use xtask::use_circles::{check_crate, rooms_of_dir};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// The crates whose every file is checked against every other (each
/// sub-folder opened; see `xtask::use_circles::check_crate`).
#[test]
fn no_crate_but_cuda_sys_has_a_file_level_use_circle() {
    for src in [
        "warp-launch/src",
        "warp-proof/src",
        "warp-build/src",
        "xtask/src",
    ] {
        let problems =
            check_crate(&root().join(src), &[]).unwrap_or_else(|e| panic!("{src} parses: {e}"));
        assert!(
            problems.is_empty(),
            "{src}: {} file-level `use` circle(s); make the imports run one way (move the \
             shared item into a leaf file both can import):\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
}

#[test]
fn error_and_the_value_types_of_cuda_api_import_nothing_back() {
    let rooms = rooms_of_dir(&root().join("cuda-api/src"), &[], &[]).expect("cuda-api/src parses");
    // Plain values: launch shapes and limits, images and their targets, what
    // a run-time compile reports (NVRTC's diagnostics, PTX refused).
    let leaves = ["compile_error.rs", "image.rs", "launch.rs", "target.rs"];
    for leaf in leaves.iter().copied().chain(["error.rs"]) {
        let imports: Vec<&String> = rooms[leaf].keys().collect();
        assert!(
            imports.iter().all(|r| leaves.contains(&r.as_str())),
            "{leaf} imports {imports:?}; it may import only the leaves {leaves:?}, which import \
             nothing that imports it back"
        );
    }
}

#[test]
fn the_cpu_room_uses_only_leaves_of_launch() {
    // launch/ calls the CPU runner (prepare.rs) and keeps a kernel's CPU
    // body (kernel.rs); cpu/ uses only files of launch/ that import no other
    // file of launch/ and nothing of cpu/.
    let rooms = rooms_of_dir(&root().join("warp-launch/src"), &[], &["launch"])
        .expect("warp-launch/src parses");
    assert!(
        rooms["launch/prepare.rs"].contains_key("cpu/"),
        "the rule reads prepare.rs's call of the CPU runner: {:?}",
        rooms["launch/prepare.rs"]
    );
    for (to, names) in &rooms["cpu/"] {
        let Some(file) = to.strip_prefix("launch/") else {
            continue;
        };
        let back: Vec<&String> = rooms[to]
            .keys()
            .filter(|r| r.starts_with("launch/") || *r == "cpu/")
            .collect();
        assert!(
            back.is_empty(),
            "cpu/ uses {names:?} of launch/{file}, which imports {back:?}; cpu/ may use only \
             leaves of launch/: move what it needs into one"
        );
    }
}
