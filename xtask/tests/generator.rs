//! Snapshot tests of the generator on small fixture specs: the rendered Rust
//! and C for one function of each parameter shape, and the `file:line:col`
//! messages for broken specs.

use std::path::Path;

use xtask::codegen;
use xtask::spec::load::{load_dir, load_sources};

fn good() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/good/specs");
    let specs = load_dir(&dir).unwrap_or_else(|e| panic!("the good fixture must load:\n{e}"));
    codegen::generate(&specs).expect("the good fixture generates")
}

fn file<'a>(files: &'a [(String, String)], name: &str) -> &'a str {
    &files
        .iter()
        .find(|(p, _)| p == name)
        .unwrap_or_else(|| panic!("{name} is generated"))
        .1
}

#[test]
fn renders_types() {
    insta::assert_snapshot!(file(&good(), "cuda-sys/src/generated/types.rs"));
}

#[test]
fn renders_functions_of_each_parameter_shape() {
    insta::assert_snapshot!(file(&good(), "cuda-sys/src/generated/functions.rs"));
}

#[test]
fn renders_the_error_catalogue() {
    insta::assert_snapshot!(file(&good(), "cuda-sys/src/generated/errors.rs"));
}

#[test]
fn renders_the_abi_probe() {
    let files = good();
    insta::assert_snapshot!("probe_c", file(&files, "tests/abi/probe.c"));
    insta::assert_snapshot!("probe_rs", file(&files, "tests/src/generated/abi.rs"));
}

#[test]
fn renders_thin_layer_signatures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/good/specs");
    let specs = load_dir(&dir).unwrap();
    insta::assert_snapshot!(codegen::api::signatures(&specs).unwrap());
    insta::assert_snapshot!(
        "thin_layer_driver_rs",
        file(&good(), "cuda-api/src/generated/driver.rs")
    );
}

#[test]
fn output_is_byte_stable() {
    assert_eq!(
        good(),
        good(),
        "two runs over the same specs must give the same bytes"
    );
}

/// The good fixture with one text replacement in one file; the load's errors.
fn broken(path: &str, from: &str, to: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/good/specs");
    let mut sources = Vec::new();
    for rel in ["errors.yaml", "types/types.yaml", "functions/demo.yaml"] {
        let mut text = std::fs::read_to_string(dir.join(rel)).unwrap();
        if rel == path {
            assert!(
                text.contains(from),
                "fixture edit `{from}` must apply to {rel}"
            );
            text = text.replacen(from, to, 1);
        }
        sources.push((format!("specs/{rel}"), text));
    }
    match load_sources(&sources) {
        Ok(_) => panic!("the broken spec loaded without error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn yaml_syntax_error_has_a_position() {
    insta::assert_snapshot!(broken(
        "functions/demo.yaml",
        "  - name: flags\n",
        "  - name: [flags\n"
    ));
}

#[test]
fn unknown_field_is_refused() {
    insta::assert_snapshot!(broken(
        "functions/demo.yaml",
        "  safety: safe\n  summary: Takes",
        "  safety: safe\n  colour: red\n  summary: Takes"
    ));
}

#[test]
fn duplicate_function_is_refused() {
    insta::assert_snapshot!(broken(
        "functions/demo.yaml",
        "- name: cuOutValue\n",
        "- name: cuScalarIn\n"
    ));
}

#[test]
fn unknown_type_is_refused() {
    insta::assert_snapshot!(broken(
        "functions/demo.yaml",
        "type: CUstream\n",
        "type: CUstreem\n"
    ));
}

#[test]
fn length_must_name_a_parameter() {
    insta::assert_snapshot!(broken(
        "functions/demo.yaml",
        "len: numNodes",
        "len: nodeCount"
    ));
}

#[test]
fn array_must_be_a_pointer() {
    insta::assert_snapshot!(broken(
        "functions/demo.yaml",
        "  - name: chunk\n    type: size_t\n    role: in\n",
        "  - name: chunk\n    type: size_t\n    role: in\n    array: true\n"
    ));
}

#[test]
fn out_parameter_must_be_a_pointer() {
    insta::assert_snapshot!(broken(
        "functions/demo.yaml",
        "  - name: bytesize\n    type: size_t\n    role: in",
        "  - name: bytesize\n    type: size_t\n    role: out"
    ));
}

#[test]
fn documented_error_must_exist() {
    insta::assert_snapshot!(broken(
        "functions/demo.yaml",
        "  - CUDA_ERROR_ILLEGAL_ADDRESS\n",
        "  - CUDA_ERROR_ILEGAL_ADDRESS\n"
    ));
}

#[test]
fn every_result_code_needs_a_catalogue_entry() {
    insta::assert_snapshot!(broken(
        "errors.yaml",
        "- name: CUDA_ERROR_ILLEGAL_ADDRESS\n  summary: A kernel touched memory it may not.\n  sticky: true\n",
        ""
    ));
}

#[test]
fn a_broken_spec_writes_nothing() {
    let tmp = std::env::temp_dir().join(format!("xtask-broken-{}", std::process::id()));
    let specs = tmp.join("specs/functions");
    std::fs::create_dir_all(&specs).unwrap();
    std::fs::write(specs.join("x.yaml"), "group: G\ntitle: T\nfunctions: [\n").unwrap();
    let err = codegen::run(&tmp, &tmp.join("specs"), false).expect_err("broken specs fail");
    assert!(err.to_string().contains("specs/functions/x.yaml:"), "{err}");
    assert!(
        !tmp.join("cuda-sys").exists(),
        "no output may be written when the specs are broken"
    );
    std::fs::remove_dir_all(&tmp).ok();
}

/// NVRTC's generated raw layer, from a fixture cut from `specs/nvrtc/`:
/// a function of every release span (since 12.0, since 12.8 with an inline
/// callback type, removed in 13.0 and deprecated), the handle, the
/// `nvrtcResult` newtype and its catalogue.
fn nvrtc() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvrtc/specs");
    let specs = load_dir(&dir).unwrap_or_else(|e| panic!("the NVRTC fixture must load:\n{e}"));
    codegen::generate_nvrtc(&specs).expect("the NVRTC fixture generates")
}

#[test]
fn renders_nvrtc_types() {
    insta::assert_snapshot!(file(&nvrtc(), "cuda-sys/src/generated/nvrtc/types.rs"));
}

#[test]
fn renders_nvrtc_functions() {
    insta::assert_snapshot!(file(&nvrtc(), "cuda-sys/src/generated/nvrtc/functions.rs"));
}

#[test]
fn renders_the_nvrtc_result_catalogue() {
    insta::assert_snapshot!(file(&nvrtc(), "cuda-sys/src/generated/nvrtc/errors.rs"));
}

/// The thin layer over NVRTC, by the driver's classification and safety
/// rule: `nvrtcVersion` safe (out-values only), program handles `unsafe`,
/// slices with their shared count checked.
#[test]
fn renders_the_nvrtc_thin_layer() {
    insta::assert_snapshot!(file(&nvrtc(), "cuda-api/src/generated/nvrtc.rs"));
}
