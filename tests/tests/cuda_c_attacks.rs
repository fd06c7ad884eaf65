//! The CUDA C texts that an earlier reader proved and that wrote outside
//! their arrays (`tests/fuzz-regressions/cuda-c/`, one per class of
//! `shared/attacks/cuda-c`): on the CPU, `CudaModule::declarations` calls
//! each kernel unproven, naming the line and the construct. The GPU half
//! (the safe launch refused, nothing outside the view written) is
//! `gpu_cuda_c::every_attack_text_is_refused_and_writes_nothing`.

use std::path::Path;

use warp_launch::{Accesses, CudaModule, Pass};

/// Each text, the line the refusal names, and words of its reason.
const EXPECTED: &[(&str, usize, &str)] = &[
    ("blockidx-parameter.cu", 2, "`blockIdx` is defined again"),
    ("comma-declarator-shadow.cu", 5, "one declarator each"),
    (
        "define-after-comment.cu",
        5,
        "a `#` after other text on its line",
    ),
    (
        "paren-call-memset.cu",
        4,
        "`__gen_nvvm_memset` is not a name in scope",
    ),
    ("paren-write-coordinate.cu", 5, "the assignment to `(c.i)`"),
    ("rvalue-ref-alias.cu", 5, "`&&` after the type `auto`"),
    (
        "splice-ends-block-comment.cu",
        5,
        "a backslash in a comment",
    ),
    ("switch-into-loop.cu", 4, "`switch`"),
];

fn dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz-regressions/cuda-c")
}

#[test]
fn every_attack_text_is_unproven_with_its_line_and_construct() {
    let mut wrong = Vec::new();
    for (file, line, words) in EXPECTED {
        let text = std::fs::read_to_string(dir().join(file)).unwrap();
        let specs = CudaModule::declarations(file, &text).unwrap();
        assert_eq!(specs.len(), 1, "{file}: one kernel");
        match specs[0].accesses(Pass::Forward) {
            Accesses::Unproven(u) => {
                let at = format!("{file}:{line}");
                if u.location != at || !u.reason.contains(words) {
                    wrong.push(format!(
                        "{file}: {}: {} (want {at}: {words})",
                        u.location, u.reason
                    ));
                }
            }
            Accesses::Checked(rules) => wrong.push(format!("{file}: proven: {rules:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_kept_text_is_one_of_the_expected() {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cu"))
        .collect();
    names.sort();
    let want: Vec<&str> = EXPECTED.iter().map(|e| e.0).collect();
    for n in &names {
        assert!(
            want.contains(&n.as_str()) || n.starts_with("fuzz-"),
            "{n}: a kept text without an expected refusal here"
        );
    }
    for w in want {
        assert!(names.iter().any(|n| n == w), "{w} is missing");
    }
}
