//! Lint allowances stay next to the code that needs them: no crate of the
//! workspace silences a lint crate-wide (`#![allow(..)]` in its root), so a
//! hand-written module cannot hide behind an allowance meant for generated
//! C names.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// The lints a crate root's inner `#![allow(..)]` / `#![expect(..)]`
/// attributes silence, as written.
fn crate_wide_allowances(src: &str) -> Vec<String> {
    let file = syn::parse_file(src).expect("a crate root parses");
    file.attrs
        .iter()
        .filter(|a| matches!(a.style, syn::AttrStyle::Inner(_)))
        .filter(|a| a.path().is_ident("allow") || a.path().is_ident("expect"))
        .map(|a| {
            let meta = &a.meta;
            quote::quote!(#meta).to_string()
        })
        .collect()
}

#[test]
fn the_detector_sees_crate_wide_allowances_only() {
    let src = "#![allow(non_snake_case, clippy::all)]\n#[allow(dead_code)] mod generated {}";
    assert_eq!(crate_wide_allowances(src).len(), 1);
    assert!(crate_wide_allowances("#[allow(dead_code)] mod generated {}").is_empty());
}

#[test]
fn no_crate_root_allows_a_lint_crate_wide() {
    let mut bad = Vec::new();
    let mut roots = 0;
    for krate in [
        "cuda-sys",
        "cuda-api",
        "warp-proof",
        "warp-launch",
        "tests",
        "xtask",
    ] {
        for root_file in ["src/lib.rs", "src/main.rs"] {
            let path = root().join(krate).join(root_file);
            let Ok(src) = std::fs::read_to_string(&path) else {
                continue;
            };
            roots += 1;
            for a in crate_wide_allowances(&src) {
                bad.push(format!("{krate}/{root_file}: #![{a}]"));
            }
        }
    }
    assert!(roots >= 5, "found only {roots} crate roots");
    assert!(
        bad.is_empty(),
        "crate-wide lint allowances; scope them to the module that needs them \
         (e.g. `#[allow(..)] mod generated;`):\n{}",
        bad.join("\n")
    );
}
