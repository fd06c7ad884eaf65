//! `cargo xtask gpu-bundle`: everything the GPU machine needs to run the GPU
//! tests and benchmarks, in one folder (`gpu-bundle/`): release test and bench
//! binaries, the test kernels compiled by nvcc 13.0 (PTX ISA 9.0 and sm_90
//! cubin), and `run.sh`, which runs each binary with `--include-ignored` and
//! ends with one summary line `N passed, M failed`.

use std::path::Path;
use std::process::Command;

use regex::Regex;

use crate::{Result, provision};

const RUN_SH: &str = r#"#!/usr/bin/env bash
# Runs every test binary of the bundle with the GPU tests included; the last
# line is the summary: `N passed, M failed`.
cd "$(dirname "$0")"
export SDK_TEST_KERNELS="$PWD/kernels"
passed=0; failed=0
for t in bin/*; do
  echo "== $t"
  out=$("./$t" --include-ignored --test-threads=1 --nocapture 2>&1)
  echo "$out"
  p=$(echo "$out" | sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' | awk '{p+=$1; f+=$2} END {print p+0, f+0}')
  passed=$((passed + ${p% *})); failed=$((failed + ${p#* }))
  if ! echo "$out" | grep -q '^test result: '; then failed=$((failed + 1)); echo "!! $t did not report a result"; fi
done
for e in examples/*; do
  echo "== $e"
  if "./$e"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
for b in benches/*; do
  [ -e "$b" ] || continue
  echo "== $b"
  "./$b" || failed=$((failed + 1))
done
echo "gpu-bundle: $passed passed, $failed failed"
"#;

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Compiles `tests/kernels/kernels.cu` into `dir` as PTX and sm_90 cubin.
pub fn compile_kernels(root: &Path, dir: &Path) -> Result<()> {
    let nvcc = provision::nvcc()?;
    std::fs::create_dir_all(dir)?;
    let src = root.join("tests/kernels/kernels.cu");
    for (flag, name) in [("-ptx", "kernels.ptx"), ("-cubin", "kernels.cubin")] {
        run(Command::new(&nvcc)
            .args(["-arch=sm_90", "-O3", flag])
            .arg(&src)
            .arg("-o")
            .arg(dir.join(name)))?;
    }
    Ok(())
}

/// Builds the bundle in `gpu-bundle/`.
pub fn build(root: &Path) -> Result<()> {
    let out = root.join("gpu-bundle");
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    for d in ["bin", "examples", "benches", "kernels"] {
        std::fs::create_dir_all(out.join(d))?;
    }
    let kernels = root.join("target/kernels");
    compile_kernels(root, &kernels)?;
    for name in ["kernels.ptx", "kernels.cubin"] {
        std::fs::copy(kernels.join(name), out.join("kernels").join(name))?;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let json = run(Command::new(&cargo).current_dir(root).args([
        "test",
        "--release",
        "--no-run",
        "--message-format=json",
        "-p",
        "sdk-tests",
        "-p",
        "cuda-api",
        "-p",
        "cuda-sys",
    ]))?;
    let exe = Regex::new(r#""executable":"([^"]+)""#)?;
    let mut count = 0;
    for line in json
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains("\"test\":true"))
    {
        let Some(c) = exe.captures(line) else {
            continue;
        };
        let path = Path::new(&c[1]);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Only the cross-crate tests: unit tests and the ABI probe need no GPU
        // (they run in CI) and look for files of this checkout.
        if !(name.starts_with("gpu_") || name.starts_with("loader-")) {
            continue;
        }
        std::fs::copy(path, out.join("bin").join(&name))?;
        count += 1;
    }
    run(Command::new(&cargo).current_dir(root).args([
        "build",
        "--release",
        "-p",
        "sdk-tests",
        "--examples",
    ]))?;
    let example = "device_count";
    std::fs::copy(
        root.join("target/release/examples").join(example),
        out.join("examples").join(example),
    )?;
    let bench_json = run(Command::new(&cargo).current_dir(root).args([
        "bench",
        "--no-run",
        "--message-format=json",
        "-p",
        "sdk-tests",
    ]))?;
    for line in bench_json.lines().filter(|l| {
        l.contains("\"reason\":\"compiler-artifact\"") && l.contains("\"kind\":[\"bench\"]")
    }) {
        if let Some(c) = exe.captures(line) {
            let path = Path::new(&c[1]);
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            std::fs::copy(
                path,
                out.join("benches")
                    .join(name.split('-').next().unwrap_or(&name)),
            )?;
        }
    }
    let run_sh = out.join("run.sh");
    std::fs::write(&run_sh, RUN_SH)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&run_sh, std::fs::Permissions::from_mode(0o755))?;
    }
    println!(
        "xtask gpu-bundle: {count} test binaries, kernels and run.sh in {}; carry it and run `bash gpu-bundle/run.sh`",
        out.display()
    );
    Ok(())
}
