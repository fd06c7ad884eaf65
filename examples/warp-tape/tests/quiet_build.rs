//! A second build of this crate (whose build.rs compiles a Warp module with
//! warp-build's `WarpModule`) prints nothing of ours.
//!
//! Cost: the builds are `cargo check`s, which run the build script (all
//! that prints anything of ours) exactly as `cargo build` does, without
//! generating code for the dependencies. They use a target directory of
//! their own (the one running this test is locked), `quiet-examples` in
//! `CARGO_TARGET_TMPDIR`, shared with examples/cuda-reduction's quiet_build
//! test (the dependencies both examples share are checked once) and kept so
//! that later runs only rebuild what changed; the Warp install is the one `WARP_BUILD_CACHE_DIR`
//! (or the default per-user cache) already holds, not a fresh one (a fresh
//! Warp install is about 30 s of pip on its own, and the quiet-install
//! path is covered by examples/cuda-reduction's quiet_build test).
//! `WARP_BUILD_ARCHS` is inherited (CI compiles `90,80`). Each build has a
//! deadline, and the test fails (killing the build) rather than run past
//! it, so it cannot hold CI for more than about three minutes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Builds the crate into `target` within `budget`; its stderr.
fn build(target: &Path, budget: Duration) -> String {
    let log = target.join("quiet-build.stderr");
    std::fs::create_dir_all(target).unwrap();
    let mut child = Command::new(env!("CARGO"))
        .args(["check", "-p", "warp-tape-example"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > budget {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "cargo check -p warp-tape-example ran past {budget:?} (stopped); its stderr so far:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{stderr}");
    stderr
}

#[test]
fn the_second_build_prints_nothing_of_ours() {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("quiet-examples");
    // The first build may compile everything (a fresh directory) and say
    // what warp-build did; what it prints is not checked.
    let _ = build(&target, Duration::from_secs(150));
    for _ in 0..2 {
        let again = build(&target, Duration::from_secs(15));
        assert!(
            !again.contains("warning") && !again.contains("warp-build"),
            "a no-op build printed:\n{again}"
        );
    }
}
