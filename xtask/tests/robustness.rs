//! xtask never panics or hangs on its input: every name that becomes Rust is
//! checked with its spec position, symbolic links under `specs/` are not
//! followed, and Warp ABI spec errors carry real positions. Each of these
//! failed at 38e7deb (a panic "not a valid Ident", a traversal that never
//! ended, errors at line 0).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use xtask::codegen;
use xtask::spec::load::{load_dir, load_sources};
use xtask::spec::warp::{WarpAbi, validate};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/good/specs")
}

/// The good fixture with one edit, loaded and (if it loads) generated;
/// a panic anywhere fails the test with the edit named.
fn load_and_generate(path: &str, from: &str, to: &str) -> Result<(), String> {
    let mut sources = Vec::new();
    for rel in ["errors.yaml", "types/types.yaml", "functions/demo.yaml"] {
        let mut text = std::fs::read_to_string(fixture_dir().join(rel)).unwrap();
        if rel == path {
            assert!(text.contains(from), "edit `{from}` must apply to {rel}");
            text = text.replacen(from, to, 1);
        }
        sources.push((format!("specs/{rel}"), text));
    }
    let r = std::panic::catch_unwind(|| match load_sources(&sources) {
        Ok(specs) => codegen::generate(&specs)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    });
    r.unwrap_or_else(|_| panic!("xtask panicked on the edit `{from}` -> `{to}` in {path}"))
}

/// The first line of `text` containing `needle`, 1-based.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

/// `line_needle` names the line the error must point at; a leading `+`
/// means the line after it (a name without its own position is reported at
/// the next value of its entry, its `type:`).
#[track_caller]
fn refused_at(path: &str, from: &str, to: &str, line_needle: &str, message: &str) {
    let e = load_and_generate(path, from, to).expect_err("the bad name was accepted");
    let edited = std::fs::read_to_string(fixture_dir().join(path))
        .unwrap()
        .replacen(from, to, 1);
    let line = match line_needle.strip_prefix('+') {
        Some(n) => line_of(&edited, n) + 1,
        None => line_of(&edited, line_needle),
    };
    let want = format!("specs/{path}:{line}:");
    assert!(
        e.lines()
            .any(|l| l.starts_with(&want) && l.contains(message)),
        "expected an error at {want} containing `{message}`, got:\n{e}"
    );
}

#[test]
fn names_that_are_not_identifiers_are_errors_with_positions() {
    refused_at(
        "functions/demo.yaml",
        "- name: cuScalarIn\n",
        "- name: cu Scalar In\n",
        "cu Scalar In",
        "not a Rust identifier",
    );
    refused_at(
        "functions/demo.yaml",
        "  - name: flags\n    type: unsigned int\n",
        "  - name: fl ags\n    type: unsigned int\n",
        "+  - name: fl ags",
        "parameter `fl ags` is not a C identifier",
    );
    refused_at(
        "functions/demo.yaml",
        "  rust_name: memcpy_htod\n",
        "  rust_name: memcpy htod\n",
        "- name: cuMemcpyHtoD",
        "not a Rust identifier",
    );
    refused_at(
        "types/types.yaml",
        "- name: CUstream\n",
        "- name: CU stream\n",
        "CU stream",
        "handle `CU stream` is not a C identifier",
    );
    refused_at(
        "types/types.yaml",
        "  - name: x\n    type: unsigned int\n",
        "  - name: x x\n    type: unsigned int\n",
        "+  - name: x x",
        "field `x x` is not a C identifier",
    );
    refused_at(
        "types/types.yaml",
        "  - name: CUDA_ERROR_INVALID_VALUE\n",
        "  - name: 1CUDA_ERROR_INVALID_VALUE\n",
        "1CUDA_ERROR_INVALID_VALUE",
        "is not a C identifier",
    );
    refused_at(
        "types/types.yaml",
        "- name: CU_FIXTURE_LIMIT\n",
        "- name: CU-FIXTURE-LIMIT\n",
        "CU-FIXTURE-LIMIT",
        "constant `CU-FIXTURE-LIMIT` is not a C identifier",
    );
}

#[test]
fn a_param_rust_name_override_is_checked() {
    let e = load_and_generate(
        "functions/demo.yaml",
        "  - name: bytesize\n    type: size_t\n",
        "  - name: bytesize\n    rust_name: byte size\n    type: size_t\n",
    )
    .expect_err("a rust_name with a space was accepted");
    assert!(
        e.contains("rust_name `byte size` is not a Rust identifier"),
        "{e}"
    );
}

/// Runs `load_dir(SPECS_DIR)` when set: the child half of the symlink test.
#[test]
fn child_loads_a_spec_dir() {
    let Some(dir) = std::env::var_os("XTASK_ROBUSTNESS_SPECS_DIR") else {
        return;
    };
    match load_dir(Path::new(&dir)) {
        Ok(_) => println!("child: loaded"),
        Err(e) => println!("child: refused\n{e}"),
    }
}

#[test]
fn a_symlink_loop_under_specs_ends_with_an_error() {
    let tmp = std::env::temp_dir().join(format!("xtask-symlink-{}", std::process::id()));
    let specs = tmp.join("specs");
    let _ = std::fs::remove_dir_all(&tmp);
    for rel in ["errors.yaml", "types/types.yaml", "functions/demo.yaml"] {
        let to = specs.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(fixture_dir().join(rel), to).unwrap();
    }
    // Two links back to the top: following them branches without end.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("..", specs.join("functions/up")).unwrap();
        std::os::unix::fs::symlink("..", specs.join("types/up")).unwrap();
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_loads_a_spec_dir", "--nocapture"])
        .env("XTASK_ROBUSTNESS_SPECS_DIR", &specs)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        use std::io::Read;
        o.read_to_string(&mut out).ok();
    }
    std::fs::remove_dir_all(&tmp).ok();
    let status = status.expect("loading a spec dir with a symlink loop did not end within 20 s");
    assert!(status.success(), "{out}");
    assert!(out.contains("child: refused"), "{out}");
    assert!(
        out.contains("specs/functions/up:0:0: is a symbolic link, which is not followed"),
        "{out}"
    );
}

const WARP: &str = "specs/warp/abi.yaml";

fn warp_text() -> String {
    std::fs::read_to_string(xtask::provision::workspace_root().join(WARP)).unwrap()
}

/// The Warp spec with one edit: its problems, each `file:line:col: message`.
fn warp_problems(from: &str, to: &str) -> (String, Vec<String>) {
    let text = warp_text();
    assert!(text.contains(from), "edit `{from}` must apply");
    let bad = text.replacen(from, to, 1);
    let abi: WarpAbi = serde_saphyr::from_str(&bad).expect("the edited Warp spec parses");
    let p = validate(&abi, WARP).iter().map(|e| e.to_string()).collect();
    (bad, p)
}

#[test]
fn warp_abi_errors_carry_real_positions() {
    for (from, to, needle, message) in [
        (
            "  dims: [1, 2, 3, 4]\n",
            "  dims: [1, 2, 3]\n",
            "  dims: [1, 2, 3]",
            "launch_bounds.dims is",
        ),
        (
            "  sizes: [24, 24, 32, 32]\n",
            "  sizes: [24, 24, 32]\n",
            "  sizes: [24, 24, 32]",
            "launch_bounds.sizes has 3 entries",
        ),
        (
            "  sizes: [24, 24, 32, 32]\n",
            "  sizes: [24, 24, 32, 40]\n",
            "  sizes: [24, 24, 32, 40]",
            "launch_bounds_t<4>: the fields lay out to size 32",
        ),
        (
            "  size: 56\n",
            "  size: 64\n",
            "  size: 64",
            "array_t: the fields lay out to size 56",
        ),
        (
            "  - name: LAUNCH_MAX_DIMS\n",
            "  - name: LAUNCH_DIMS\n",
            "  - name: LAUNCH_DIMS",
            "constant LAUNCH_MAX_DIMS is missing",
        ),
        (
            "  rust_prefix: LaunchBounds\n",
            "  rust_prefix: Launch Bounds\n",
            "  rust_prefix: Launch Bounds",
            "launch_bounds.rust_prefix `Launch Bounds` is not a Rust identifier",
        ),
        (
            "  rust_name: ArrayT\n",
            "  rust_name: Array T\n",
            "  rust_name: Array T",
            "array.rust_name `Array T` is not a Rust identifier",
        ),
    ] {
        let (bad, problems) = warp_problems(from, to);
        let line = line_of(&bad, needle);
        let want = format!("{WARP}:{line}:");
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(&want) && p.contains(message)),
            "edit `{to}`: expected `{message}` at {want}, got {problems:#?}"
        );
        assert!(
            problems
                .iter()
                .all(|p| !p.starts_with(&format!("{WARP}:0:"))),
            "edit `{to}`: an error at line 0: {problems:#?}"
        );
    }
}

/// A huge `LAUNCH_MAX_DIMS` is one short error: at 38e7deb the expected
/// dims were listed in full (`u64::MAX` made it allocate 16 GB and die; a
/// million gives a 7 MB message, harmless to test).
#[test]
fn a_huge_launch_max_dims_gives_a_short_error() {
    let (_, problems) = warp_problems(
        "    value: 4\n    doc: Most launch dimensions",
        "    value: 1000000\n    doc: Most launch dimensions",
    );
    let p = problems
        .iter()
        .find(|p| p.contains("launch_bounds.dims is"))
        .unwrap_or_else(|| panic!("{problems:#?}"));
    assert!(p.len() < 2000, "a {}-byte message", p.len());
}
