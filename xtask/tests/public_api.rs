//! The public surface of the library crates, read from their sources (see
//! `xtask::public_api` and `cargo xtask public-api`).

use std::path::{Path, PathBuf};

use xtask::public_api::{CRATES, Surface, load_workspace_crate};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

fn surface(dir: &str) -> (String, Surface) {
    let c = load_workspace_crate(&root(), dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
    let s = c.surface();
    (c.name, s)
}

/// The counts, printed (no snapshot: they change with every public item);
/// the walk itself is checked on items every version of the crates has.
#[test]
fn public_surface_is_read_and_counted() {
    for (dir, name) in CRATES {
        let (krate, s) = surface(dir);
        assert_eq!(krate, *name);
        println!("{}", s.summary(&krate));
        assert!(!s.items.is_empty(), "{krate} has public items");
    }
    let (_, api) = surface("cuda-api");
    let stream = api
        .items
        .iter()
        .find(|i| i.defined.ends_with("::Stream"))
        .expect("cuda_api has a Stream");
    assert!(
        stream.paths.iter().any(|p| p == "cuda_api::Stream"),
        "{stream:?}"
    );
    let (_, warp) = surface("warp-launch");
    assert!(
        warp.items
            .iter()
            .any(|i| i.paths.iter().any(|p| p == "warp_launch::Kernel")),
        "warp_launch::Kernel is public"
    );
}

#[test]
fn no_public_item_is_reachable_by_two_paths() {
    let mut bad = Vec::new();
    for (dir, _) in CRATES {
        let (krate, s) = surface(dir);
        println!("{}", s.summary(&krate));
        for i in s
            .by_two_paths()
            .chain(s.modules.iter().filter(|m| m.paths.len() > 1))
        {
            bad.push(format!(
                "{} {}: {}",
                i.kind.word(),
                i.defined,
                i.paths.join(", ")
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} public items are reachable by two or more paths; keep one (make the module private \
         and `pub use` the item once):\n{}",
        bad.len(),
        bad.join("\n")
    );
}
