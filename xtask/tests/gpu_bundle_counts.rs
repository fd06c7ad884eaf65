//! The GPU bundle's `run.sh` counts a test that could not run on the machine
//! as skipped, not passed (issue 21: on one GPU the four two-GPU tests
//! printed "skipped" and were counted in `40 passed, 0 failed`).
//!
//! The test runs the real `run.sh` (`xtask::bundle::run_sh`) on a bundle
//! whose one test binary is this one: run by `run.sh` (with
//! `GPU_BUNDLE_COUNTS_CHILD` set) its tests pass, fail and skip as their names
//! say, and libtest's real output goes through `run.sh`'s counting.

use std::path::Path;
use std::process::Command;

const CHILD: &str = "GPU_BUNDLE_COUNTS_CHILD";

fn child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// The line `sdk_tests::skip` prints (checked against it below).
fn skip(test: &str, why: &str) {
    println!("SKIPPED: {test}: {why}");
}

#[test]
fn a_passes() {
    assert_eq!(1 + 1, 2);
}

#[test]
#[ignore = "runs as a child of run_sh_counts_skips_as_skipped"]
fn b_skips_as_a_two_gpu_test_does_on_one_gpu() {
    if !child() {
        return;
    }
    skip(
        "b_skips_as_a_two_gpu_test_does_on_one_gpu",
        "this machine has 1 CUDA device(s); the test needs two",
    );
}

#[test]
#[ignore = "runs as a child of run_sh_counts_skips_as_skipped"]
fn c_fails() {
    assert!(!child(), "fails on purpose in the bundle");
}

#[test]
#[ignore = "runs as a child of run_sh_counts_skips_as_skipped"]
fn d_skips_as_well() {
    if child() {
        skip(
            "d_skips_as_well",
            "runs only as another test's child process",
        );
    }
}

/// Runs `run.sh` on a bundle of one test binary (this one, which runs
/// `tests` when filtered) and one example, and returns its output.
fn run_bundle(filter: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path();
    for d in ["bin", "examples", "benches"] {
        std::fs::create_dir(bundle.join(d)).unwrap();
    }
    // A wrapper that runs this binary with the filter and run.sh's flags.
    let exe = std::env::current_exe().unwrap();
    let wrapper = format!(
        "#!/usr/bin/env bash\nexec {:?} {} \"$@\"\n",
        exe,
        filter.join(" ")
    );
    write_exec(&bundle.join("bin/counts"), &wrapper);
    write_exec(&bundle.join("examples/ok"), "#!/usr/bin/env bash\nexit 0\n");
    std::fs::write(bundle.join("run.sh"), xtask::bundle::run_sh()).unwrap();
    let out = Command::new("bash")
        .arg(bundle.join("run.sh"))
        .env(CHILD, "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write_exec(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn run_sh_counts_skips_as_skipped() {
    if child() {
        return;
    }
    // This binary's four tests above, then the example: 1 + 1 passed.
    let out = run_bundle(&[
        "--skip",
        "run_sh_",
        "--skip",
        "count_results_",
        "--skip",
        "the_bundles_",
    ]);
    assert!(
        out.contains("test b_skips_as_a_two_gpu_test_does_on_one_gpu ... SKIPPED: "),
        "{out}"
    );
    assert!(
        out.contains("test result: FAILED. 3 passed; 1 failed"),
        "{out}"
    );
    assert!(
        out.contains("== bin/counts: 1 passed, 1 failed, 2 skipped"),
        "{out}"
    );
    assert_eq!(
        out.lines().last(),
        Some("gpu-bundle: 2 passed, 1 failed, 2 skipped"),
        "{out}"
    );
}

/// `count_results` alone, on this binary's real output run in parallel
/// (the `SKIPPED:` line then starts its line) and on a crash.
#[test]
fn count_results_in_parallel_and_on_a_crash() {
    if child() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(&exe)
        .args(["--include-ignored", "--nocapture", "--test-threads=4"])
        .args([
            "--skip",
            "run_sh_",
            "--skip",
            "count_results_",
            "--skip",
            "the_bundles_",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(count(&text), "1 1 2", "{text}");
    // No `test result:` line: one failure.
    assert_eq!(count("Segmentation fault (core dumped)\n"), "0 1 0");
}

fn count(text: &str) -> String {
    use std::io::Write;
    let mut bash = Command::new("bash")
        .arg("-c")
        .arg(format!("{}\ncount_results", xtask::bundle::COUNT_SH))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    bash.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = bash.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The tests of the bundle skip through `sdk_tests::skip`, which prints the
/// line counted here; each early return of a test that cannot run calls it.
#[test]
fn the_bundles_tests_skip_through_sdk_tests_skip() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lib = std::fs::read_to_string(root.join("tests/src/lib.rs")).unwrap();
    assert!(
        lib.contains(
            "pub fn skip(test: &str, why: &str) {\n    println!(\"SKIPPED: {test}: {why}\");"
        ),
        "sdk_tests::skip prints another line than this test's skip"
    );
    for (file, calls) in [
        ("gpu_two.rs", 1),
        ("gpu_images.rs", 1),
        ("gpu_sticky.rs", 1),
    ] {
        let text = std::fs::read_to_string(root.join("tests/tests").join(file)).unwrap();
        assert_eq!(text.matches("sdk_tests::skip(").count(), calls, "{file}");
    }
}

/// `run.sh --sanitize` (issue 37): a failing test's panic lines are
/// printed, and a binary the tool reports as ending before its first CUDA
/// call is reported as such, not counted as an error. compute-sanitizer is
/// not on this machine; `COMPUTE_SANITIZER` points at a script that runs
/// the binary and prints the tool's frame lines as compute-sanitizer 13.0
/// words them (the banner, the summary, and the line for a program that
/// makes no CUDA call), so what is tested is `run.sh`'s reading of them.
#[test]
fn run_sh_sanitize_prints_panics_and_reports_binaries_without_cuda_calls() {
    if child() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path();
    std::fs::create_dir(bundle.join("bin")).unwrap();
    let exe = std::env::current_exe().unwrap();
    // This binary's `a_passes` and `c_fails` (which fails as a child).
    write_exec(
        &bundle.join("bin/gpu_counts-1"),
        &format!(
            "#!/usr/bin/env bash\nexec {exe:?} --skip run_sh_ --skip count_results_ --skip the_bundles_ --skip b_ --skip d_ \"$@\"\n"
        ),
    );
    write_exec(
        &bundle.join("bin/gpu_nocall-1"),
        "#!/usr/bin/env bash\necho 'test result: ok. 1 passed; 0 failed; 0 ignored'\n",
    );
    let tool = bundle.join("sanitizer");
    write_exec(
        &tool,
        "#!/usr/bin/env bash\nwhile [ \"${1#--}\" != \"$1\" ]; do shift 2; done\necho '========= COMPUTE-SANITIZER'\n\"$@\"\ncase \"$1\" in\n  *nocall*) echo '========= Target application terminated before first instrumented API call' ;;\n  *) echo '========= ERROR SUMMARY: 0 errors' ;;\nesac\n",
    );
    std::fs::write(bundle.join("run.sh"), xtask::bundle::run_sh()).unwrap();
    let out = Command::new("bash")
        .arg(bundle.join("run.sh"))
        .args(["--sanitize", "memcheck"])
        .env(CHILD, "1")
        .env("COMPUTE_SANITIZER", &tool)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.contains(
            "sanitize memcheck gpu_nocall-1: no CUDA call (nothing instrumented) | test result: ok."
        ),
        "{out}"
    );
    assert!(out.contains("---- c_fails stdout ----"), "{out}");
    assert!(out.contains("fails on purpose in the bundle"), "{out}");
    // The failing test is the one error; the binary without CUDA calls is none.
    assert_eq!(
        out.lines().last(),
        Some("gpu-bundle sanitize: 1 errors"),
        "{out}"
    );
}
