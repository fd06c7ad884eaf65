//! `specs/warp/abi.yaml` is consistent, and an inconsistent copy is refused
//! with the position of the entry at fault.

use xtask::provision;
use xtask::spec::warp::{WarpAbi, validate};

const FILE: &str = "specs/warp/abi.yaml";

fn spec_text() -> String {
    std::fs::read_to_string(provision::workspace_root().join(FILE)).expect("the Warp spec exists")
}

fn problems(text: &str) -> Vec<String> {
    let abi: WarpAbi = serde_saphyr::from_str(text).expect("the Warp spec parses");
    validate(&abi, FILE).iter().map(|e| e.to_string()).collect()
}

#[test]
fn the_warp_spec_is_consistent() {
    assert_eq!(problems(&spec_text()), Vec::<String>::new());
}

#[test]
fn a_size_that_is_not_rows_times_cols_times_scalar_is_refused() {
    let text = spec_text();
    let bad = text.replacen(
        "cpp: \"wp::vec_t<3, wp::float32>\", aliases: [\"wp::vec3f\", \"wp::vec3\"], size: 12",
        "cpp: \"wp::vec_t<3, wp::float32>\", aliases: [\"wp::vec3f\", \"wp::vec3\"], size: 16",
        1,
    );
    assert_ne!(bad, text, "the test edits the vec3f entry");
    let p = problems(&bad);
    assert_eq!(p.len(), 1, "{p:?}");
    let line = text
        .lines()
        .position(|l| l.contains("name: vec3f,"))
        .expect("vec3f is in the spec")
        + 1;
    assert!(
        p[0].starts_with(&format!("{FILE}:{line}:")) && p[0].contains("`vec3f`: size 16"),
        "{}",
        p[0]
    );
}

#[test]
fn a_field_layout_that_disagrees_with_the_stated_size_is_refused() {
    let bad = spec_text().replacen("  size: 56\n", "  size: 64\n", 1);
    let p = problems(&bad);
    assert!(
        p.iter()
            .any(|e| e.contains("array_t: the fields lay out to size 56")),
        "{p:?}"
    );
}
