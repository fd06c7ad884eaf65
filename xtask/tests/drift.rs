//! The checked-in generated files equal what the checked-in specs generate.

use xtask::{codegen, provision, spec};

#[test]
fn generated_files_are_current() {
    let root = provision::workspace_root();
    let specs = spec::load::load_dir(&root.join("specs"))
        .unwrap_or_else(|e| panic!("specs/ must load:\n{e}"));
    let mut files = codegen::generate(&specs).expect("specs/ generate");
    let nvrtc = spec::load::load_dir(&root.join("specs").join("nvrtc"))
        .unwrap_or_else(|e| panic!("specs/nvrtc/ must load:\n{e}"));
    files.extend(codegen::generate_nvrtc(&nvrtc).expect("specs/nvrtc/ generates"));
    assert!(
        files
            .iter()
            .any(|(p, _)| p == "cuda-sys/src/generated/nvrtc/functions.rs")
    );
    let stale: Vec<&str> = files
        .iter()
        .filter(|(p, text)| {
            std::fs::read_to_string(root.join(p)).ok().as_deref() != Some(text.as_str())
        })
        .map(|(p, _)| p.as_str())
        .collect();
    assert!(
        stale.is_empty(),
        "generated files differ from specs/ (and specs/nvrtc/): {stale:?}; run `cargo xtask codegen`"
    );
}
