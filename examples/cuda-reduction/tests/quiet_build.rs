//! A second build prints nothing of ours: the first installs the CUDA
//! wheels into a fresh cache and says so once; the second (and a third)
//! show no warning.
//!
//! The builds are `cargo check`s: they run the build script (the NVRTC
//! install and the kernels' compile, all that prints anything of ours)
//! exactly as `cargo build` does, without generating code for the
//! dependencies. Their target directory, `quiet-examples` under
//! `CARGO_TARGET_TMPDIR`, is the one examples/warp-tape's quiet_build test
//! uses too, so the dependencies both examples share are checked once.

use std::process::Command;

fn build(target: &std::path::Path, cache: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO"))
        .args(["check", "-p", "cuda-reduction-example", "--lib"])
        .env("CARGO_TARGET_DIR", target)
        .env("WARP_BUILD_CACHE_DIR", cache)
        .env_remove("WARP_BUILD_NVRTC")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

#[test]
fn the_second_build_prints_nothing_of_ours() {
    // A target directory of its own (the one running this test is locked),
    // shared with examples/warp-tape's quiet_build test.
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("quiet-examples");
    let target = target.as_path();
    let cache = tempfile::tempdir().unwrap();
    let first = build(target, cache.path());
    assert!(
        first.contains("warp-build: installed NVRTC 13.0"),
        "{first}"
    );
    for _ in 0..2 {
        let again = build(target, cache.path());
        assert!(!again.contains("warning"), "{again}");
    }
}
