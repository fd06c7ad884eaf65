//! `cargo xtask warp-other-versions [--check]`: compiles
//! `tests/warp/kernels.py` with other warp-lang releases than 1.19.0, as
//! `tests/warp/build.py` compiles it with 1.19.0, and keeps the generated
//! `wp_kernels.cu` and `.meta` as the fixtures of warp-launch's version check
//! (`warp-launch/tests/fixtures/other-warp/<version>/`). Each release is
//! installed with pip once, into `target/warp-other/<version>` (numpy comes
//! from the Warp 1.19.0 install, after it on `PYTHONPATH`). CI runs none of
//! this: the fixtures are checked in, and `--check` (the drift task) says
//! whether a fresh compile still writes them (in any kernel order: Warp
//! 1.16.0's changes from run to run).

use std::path::Path;
use std::process::Command;

use crate::Result;

/// The releases compiled. 1.16.0's header differs from 1.19.0's at line 13;
/// 1.17.0's and 1.18.0's `.cu` and `.meta` of `kernels.py` are byte for byte
/// 1.19.0's (see warp-launch/tests/fixtures/other-warp/README.md). Releases
/// before 1.16 cannot compile `kernels.py` (1.10.1: no `grid_stride`).
pub const VERSIONS: &[&str] = &["1.16.0", "1.17.0", "1.18.0"];

/// The files kept per release.
const FILES: &[&str] = &["wp_kernels.cu", "wp_kernels.meta"];

/// Runs the task: writes the fixtures, or with `check` compares them.
pub fn run(root: &Path, check: bool) -> Result<()> {
    let warp = warp_build::WarpPython::find(root.join("target"))?;
    let mut drifted = Vec::new();
    for version in VERSIONS {
        let install = root.join("target/warp-other").join(version);
        if !install.join("warp/__init__.py").is_file() {
            println!(
                "xtask warp-other-versions: installing warp-lang=={version} with pip into {} ...",
                install.display()
            );
            shown(
                Command::new(warp.exe())
                    .args(["-m", "pip", "install", "--quiet", "--no-deps", "--target"])
                    .arg(&install)
                    .arg(format!("warp-lang=={version}")),
            )?;
        }
        let out = root.join("target/warp-other/out").join(version);
        let mut path = std::ffi::OsString::from(install.as_os_str());
        if let Some(p) = warp.pythonpath() {
            path.push(":");
            path.push(p);
        }
        println!("xtask warp-other-versions: Warp {version} compiles tests/warp/kernels.py ...");
        shown(
            Command::new(warp.exe())
                .env("PYTHONPATH", &path)
                .arg(root.join("tests/warp/other_version.py"))
                .arg(&out),
        )?;
        let fixtures = root
            .join("warp-launch/tests/fixtures/other-warp")
            .join(version);
        std::fs::create_dir_all(&fixtures)?;
        for file in FILES {
            let fresh = std::fs::read(out.join(file))?;
            let kept = fixtures.join(file);
            if check {
                let same = std::fs::read(&kept)
                    .ok()
                    .is_some_and(|k| canonical(file, &k) == canonical(file, &fresh));
                if !same {
                    drifted.push(kept.display().to_string());
                }
            } else {
                std::fs::write(&kept, &fresh)?;
            }
        }
    }
    if !drifted.is_empty() {
        return Err(format!(
            "xtask warp-other-versions --check: these fixtures differ from a fresh compile: {}; \
             run `cargo xtask warp-other-versions` and review the diff",
            drifted.join(", ")
        )
        .into());
    }
    println!(
        "xtask warp-other-versions: {} for Warp {}",
        if check {
            "fixtures up to date"
        } else {
            "fixtures written"
        },
        VERSIONS.join(", ")
    );
    Ok(())
}

/// What the drift check compares: Warp 1.16.0 writes its kernels (in the
/// `.cu` and the `.meta`) in an order that changes from run to run, so a
/// `.cu` is its header (up to the first kernel) and its lines as a sorted
/// list, a `.meta` its JSON object (keys sorted).
fn canonical(file: &str, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if file.ends_with(".meta") {
        return serde_json::from_str::<std::collections::BTreeMap<String, serde_json::Value>>(
            &text,
        )
        .map(|m| format!("{m:?}"))
        .unwrap_or_else(|_| text.into_owned());
    }
    let header: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("extern \"C\""))
        .collect();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    format!("{}\n--\n{}", header.join("\n"), lines.join("\n"))
}

/// Runs `cmd` with its output shown.
fn shown(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status}); its messages are above").into())
    }
}
