//! Warnings a build script shows once.
//!
//! Cargo keeps a build script's output and, on every later build that does
//! not run the script again, shows its `cargo:warning` lines again: an
//! "installed Warp in 28 s" would follow a user through every no-op build
//! until some source changed. So a warning comes with a stamp: the file
//! `$OUT_DIR/warp-build.notice`, written by the run that warns and watched
//! with `cargo:rerun-if-changed`. Cargo reruns a build script when a watched
//! file is newer than the start of its last run, and this one was written
//! during it: the next build runs the script once more (its compiles are
//! cached, so it costs a second or so), that run warns about nothing and
//! watches no stamp, and the builds after it are silent no-ops.

use std::path::PathBuf;
use std::sync::Once;

/// The stamp's file name in `OUT_DIR`.
pub(crate) const NOTICE_FILE: &str = "warp-build.notice";

/// Shows `line` to the user as a `cargo:warning` of this build script run
/// only (logged as well); outside a build script (no `OUT_DIR`), only logs.
pub(crate) fn warn_once(line: &str) {
    log::warn!("{line}");
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    crate::cargo_instruction(format_args!("warning={line}"));
    static STAMPED: Once = Once::new();
    STAMPED.call_once(|| {
        let stamp = out_dir.join(NOTICE_FILE);
        match std::fs::write(
            &stamp,
            b"written by the build script run that last warned\n",
        ) {
            Ok(()) => {
                crate::cargo_instruction(format_args!("rerun-if-changed={}", stamp.display()));
            }
            Err(e) => log::warn!(
                "warp-build: cannot write {} ({e}); Cargo may show this warning again",
                stamp.display()
            ),
        }
    });
}
