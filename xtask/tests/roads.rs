//! The one-launch-road rule (DESIGN.md §4): `warp-launch` starts kernel
//! work (cuda-api launches, graph kernel nodes through a capture, node
//! updates, the CPU runner) only in `warp-launch/src/launch/prepare.rs`.
//! See `xtask::roads`.

use std::path::{Path, PathBuf};

use xtask::roads::{check_dir, launch_entries};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

#[test]
fn warp_launch_starts_kernel_work_only_in_its_preparation_module() {
    let found =
        check_dir(&root().join("warp-launch/src"), &root()).expect("warp-launch/src parses");
    let list: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert!(
        found.is_empty(),
        "warp-launch starts kernel work outside launch/prepare.rs in {} place(s); call the \
         preparation module's function for it instead, so that every road makes the same checks:\n{}",
        found.len(),
        list.join("\n")
    );
}

#[test]
fn the_rule_sees_every_entry_and_skips_builders_replays_and_tests() {
    let src = r#"
        impl Road {
            fn direct(&self, k: &DynKernel) { k.launch(&stream, cfg, &block).unwrap(); }
            fn coop(&self) { self.k.launch_cooperative(s, cfg, b)?; }
            fn node(c: &Capture) { c.launch(kernel, cfg, block)?; }
            fn update(e: &Exec) { e.update_kernel(node, kernel, cfg, block)?; }
            fn host() { crate::cpu::run(k, body, pass, &b, &args)?; }
            fn builder(k: &Kernel) { k.launch(4).inputs(&x).run()?; }
            fn replay(g: &Graph, s: &Stream) { g.launch(s)?; }
        }
        #[cfg(test)]
        mod tests { fn t(k: &DynKernel) { k.launch(s, cfg, b).unwrap(); } }
        #[test]
        fn t2(k: &DynKernel) { k.launch(s, cfg, b).unwrap(); }
    "#;
    let found = launch_entries(src).unwrap();
    let within: Vec<&str> = found.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(
        within,
        [
            "impl Road / fn direct",
            "impl Road / fn coop",
            "impl Road / fn node",
            "impl Road / fn update",
            "impl Road / fn host"
        ],
        "{found:?}"
    );
    assert_eq!(found[4].1, "crate::cpu::run(..)");
}
