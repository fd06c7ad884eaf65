//! A second build prints nothing of ours: the first installs the CUDA
//! wheels into a fresh cache and says so once; the second (and a third)
//! show no warning.

use std::process::Command;

fn build(target: &std::path::Path, cache: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO"))
        .args(["build", "-p", "cuda-reduction-example", "--lib"])
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
    // Its own target directory (the one running this test is locked).
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("quiet-build");
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
