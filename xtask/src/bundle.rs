//! `cargo xtask gpu-bundle`: everything the GPU machine needs to run the GPU
//! tests and benchmarks, in one folder (`gpu-bundle/`): release test and bench
//! binaries, the test kernels compiled by nvcc 13.0 (PTX ISA 9.0 and sm_90
//! cubin), the examples (`examples/warp_tape` is the `warp-tape-example`
//! crate: its Warp module is embedded in the binary), and `run.sh`, which
//! runs each binary with `--include-ignored` and ends with one summary line
//! `N passed, M failed, K skipped`. A test that cannot run on the machine
//! (the two-GPU tests on one GPU; the helper tests that only run as another
//! test's child process) calls `sdk_tests::skip`, which prints
//! `SKIPPED: <test>: <why>`, and returns: libtest counts it as passed, so
//! `run.sh` counts each such line as skipped and takes it off the passed
//! ([`COUNT_SH`], tested on real libtest output by
//! `cargo test -p sdk-tests --test bundle_counts`).

use std::path::Path;
use std::process::{Command, Stdio};

use regex::Regex;

use crate::{Result, provision};

const RUN_SH: &str = r#"#!/usr/bin/env bash
# Runs every test binary of the bundle with the GPU tests included; the last
# line is the summary: `N passed, M failed, K skipped`, where a test that
# printed `SKIPPED: <test>: <why>` (it cannot run on this machine, e.g. a
# two-GPU test on one GPU) is counted as skipped, not passed.
# `run.sh --sanitize [TOOL] [BINARY...]` runs GPU test binaries under the
# toolkit's compute-sanitizer: TOOL is memcheck (with leak check),
# racecheck, synccheck, initcheck or `all` (the default: each in turn); the
# binaries default to every `bin/gpu_*` but `gpu_sticky` and `gpu_images`,
# which fault on purpose (a BINARY is a name such as `gpu_views`). Under
# initcheck, the tests that build conditional graph nodes (names holding
# `if_nodes`, `while_nodes`, `conditional` or `nested_closures`) are
# skipped, and a line says so: initcheck does not support those nodes (the
# driver logs `Unsupported node type: d`, then the launch faults with
# CUDA_ERROR_ILLEGAL_ADDRESS, which ends every later test of the binary).
# The other three tools run them. One tool
# over every binary fits a 10-minute device call; each tool's wall time is
# printed, and so are the panic lines of each failing test. A binary that
# makes no CUDA call (the tool reports it ended before the first
# instrumented call) is reported as such, not as an error. The last line
# is `gpu-bundle sanitize: N errors`.
# `run.sh --compare DIR [ROUNDS]` runs each benchmark of DIR (the bench
# binaries of another commit, built there with `cargo bench -p sdk-tests
# --no-run`) and the bundle's own of the same name in turn, ROUNDS times
# (default 3), in this one call, and prints their summary lines tagged
# `base` and `new` with the round: the ratios to raw of both builds come
# from the same machine state.
cd "$(dirname "$0")"
export SDK_TEST_KERNELS="$PWD/kernels"
export SDK_WARP_DATA="$PWD/warp"
# NVRTC for the run-time compile tests: the machine's toolkit unless set.
if [ -z "${CUDA_SYS_NVRTC_LIBRARY:-}" ] && [ -d /usr/local/cuda/lib64 ]; then
  export CUDA_SYS_NVRTC_LIBRARY=/usr/local/cuda/lib64
fi
if [ "${1:-}" = "--compare" ]; then
  base=${2:?"run.sh --compare DIR [ROUNDS]: DIR holds the other commit's bench binaries"}
  rounds=${3:-3}
  for r in $(seq 1 "$rounds"); do
    for b in benches/*; do
      name=$(basename "$b"); stem=${name%%-*}
      for other in "$base/$stem" "$base/$stem"-*; do
        [ -x "$other" ] || continue
        "$other" 2>&1 | grep -E 'summary|first launch|load of 64' | sed "s/^/compare base round $r $stem: /"
      done
      "./$b" 2>&1 | grep -E 'summary|first launch|load of 64' | sed "s/^/compare new round $r $stem: /"
    done
  done
  exit 0
fi
if [ "${1:-}" = "--sanitize" ]; then
  shift
  san=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
  tools="memcheck racecheck synccheck initcheck"
  case "${1:-all}" in
    all) [ $# -gt 0 ] && shift ;;
    memcheck|racecheck|synccheck|initcheck) tools=$1; shift ;;
  esac
  bins=()
  if [ $# -gt 0 ]; then
    for b in "$@"; do for t in bin/"$b"-*; do [ -e "$t" ] && bins+=("$t"); done; done
  else
    for t in bin/gpu_*; do
      case "${t#bin/}" in gpu_sticky-*|gpu_images-*) continue ;; esac
      bins+=("$t")
    done
  fi
  errors=0
  for tool in $tools; do
    opts="--tool $tool --report-api-errors no"
    [ "$tool" = memcheck ] && opts="$opts --leak-check full"
    skip=()
    if [ "$tool" = initcheck ]; then
      skip=(--skip if_nodes --skip while_nodes --skip conditional --skip nested_closures)
      echo "sanitize initcheck: skipping tests whose names hold if_nodes, while_nodes, conditional or nested_closures: initcheck does not support conditional graph nodes (the driver logs 'Unsupported node type: d'); memcheck, racecheck and synccheck run them"
    fi
    tool_start=$(date +%s)
    for t in "${bins[@]}"; do
      [ -e "$t" ] || continue
      out=$("$san" $opts "./$t" --include-ignored --test-threads=1 "${skip[@]}" 2>&1)
      # racecheck ends with `RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)`.
      line=$(echo "$out" | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' | tail -1)
      n=$(echo "$line" | sed -n -e 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' -e 's/.*RACECHECK SUMMARY: \([0-9]*\) hazard.*/\1/p')
      res=$(echo "$out" | grep '^test result:' | tail -1)
      if [ -z "$line" ] && echo "$out" | grep -q 'terminated before first instrumented API call'; then
        # The binary made no CUDA call (its tests need none, or skipped):
        # nothing to check, and not an error of the tool.
        line="no CUDA call (nothing instrumented)"; n=0
      fi
      echo "sanitize $tool ${t#bin/}: ${line:-no summary} | ${res:-no test result}"
      echo "$out" | grep -E '^(=========|test .* FAILED)' | grep -v 'ERROR SUMMARY\|COMPUTE-SANITIZER\|before first instrumented' | head -20
      # Each failing test's panic lines (libtest's `---- name stdout ----`
      # sections), so a failure under the tool says why.
      echo "$out" | sed -n '/^---- .* ----$/,/^failures:$/p' | grep -v '^failures:$' | head -40
      errors=$((errors + ${n:-1}))
      echo "$res" | grep -q ' 0 failed' || errors=$((errors + 1))
    done
    echo "sanitize $tool: ${#bins[@]} binaries in $(( $(date +%s) - tool_start )) s"
  done
  echo "gpu-bundle sanitize: $errors errors"
  exit 0
fi
passed=0; failed=0; skipped=0
for t in bin/*; do
  echo "== $t"
  out=$("./$t" --include-ignored --test-threads=1 --nocapture 2>&1)
  echo "$out"
  read -r p f s < <(printf '%s\n' "$out" | count_results)
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  if ! echo "$out" | grep -q '^test result: '; then echo "!! $t did not report a result"; fi
  [ "$s" -eq 0 ] || echo "== $t: $p passed, $f failed, $s skipped"
done
for e in examples/*; do
  [ -e "$e" ] || continue
  echo "== $e"
  if "./$e"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
for b in benches/*; do
  [ -e "$b" ] || continue
  echo "== $b"
  "./$b" || failed=$((failed + 1))
done
echo "gpu-bundle: $passed passed, $failed failed, $skipped skipped"
"#;

/// The counting of `run.sh` (`count_results`: one test binary's output in,
/// `PASSED FAILED SKIPPED` out), a file of its own so that a test can run it
/// on real libtest output (`cargo test -p sdk-tests --test bundle_counts`).
pub const COUNT_SH: &str = include_str!("gpu_bundle_count.sh");

/// The text of `run.sh`: [`COUNT_SH`] after the first line, then the runner.
pub fn run_sh() -> String {
    let (shebang, rest) = RUN_SH.split_once('\n').unwrap_or((RUN_SH, ""));
    format!("{shebang}\n{COUNT_SH}{rest}")
}

/// Runs `cmd` with its standard error on the terminal (cargo's and pip's
/// progress, nvcc's warnings) and returns its standard output.
fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed ({}); its messages are above", out.status).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `cmd` with its output on the terminal.
fn run_shown(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status}); its messages are above").into())
    }
}

/// Says on the terminal which step of the bundle starts.
fn step(what: impl std::fmt::Display) {
    println!("xtask gpu-bundle: {what} ...");
}

/// The kernel sources the bundle compiles (`tests/kernels/NAME.cu`), each
/// to PTX and sm_90 cubin; `warp_header` uses `warp-launch/include`.
pub const KERNEL_SOURCES: &[&str] = &["kernels", "warp_header", "graph", "cluster"];

/// Compiles every `tests/kernels/NAME.cu` of [`KERNEL_SOURCES`] into `dir`
/// as `NAME.ptx` and `NAME.cubin`.
pub fn compile_kernels(root: &Path, dir: &Path) -> Result<()> {
    let nvcc = provision::nvcc()?;
    std::fs::create_dir_all(dir)?;
    for name in KERNEL_SOURCES {
        let src = root.join("tests/kernels").join(format!("{name}.cu"));
        for ext in ["ptx", "cubin"] {
            step(format!("nvcc tests/kernels/{name}.cu -> {name}.{ext}"));
            run(Command::new(&nvcc)
                .args(["-arch=sm_90", "-O3", "-std=c++17", &format!("-{ext}")])
                .arg("-I")
                .arg(root.join("warp-launch/include"))
                .arg(&src)
                .arg("-o")
                .arg(dir.join(format!("{name}.{ext}"))))?;
        }
    }
    Ok(())
}

/// Warp and numpy for `tests/warp/build.py`, pinned.
pub const WARP_PYTHON: &[&str] = &["warp-lang==1.19.0", "numpy==2.2.6"];

/// Runs `tests/warp/build.py` (Warp compiles the test module ahead of time
/// and computes reference results on its CPU device) into `out`, installing
/// the pinned Warp and numpy with pip under `target/cuda-cache/warp-py` on
/// first use.
pub fn build_warp_data(root: &Path, out: &Path) -> Result<()> {
    let py = root.join("target/cuda-cache/warp-py");
    if !py.join("warp/__init__.py").is_file() || !py.join("numpy/__init__.py").is_file() {
        println!(
            "xtask: installing {} with pip into {} (pip shows its progress) ...",
            WARP_PYTHON.join(" "),
            py.display()
        );
        run_shown(
            Command::new("python3")
                .args(["-m", "pip", "install", "--no-deps", "--target"])
                .arg(&py)
                .args(WARP_PYTHON),
        )?;
    }
    if out.exists() {
        std::fs::remove_dir_all(out)?;
    }
    step(format!(
        "Warp compiles tests/warp/kernels.py and computes the expected results (tests/warp/build.py) into {}",
        out.display()
    ));
    run_shown(
        Command::new("python3")
            .env("PYTHONPATH", &py)
            .arg(root.join("tests/warp/build.py"))
            .arg(out),
    )?;
    // Warp's kernel cache is not needed on the GPU machine.
    let cache = out.join(".warp-cache");
    if cache.exists() {
        std::fs::remove_dir_all(cache)?;
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), target)?;
        }
    }
    Ok(())
}

/// Builds the bundle in `gpu-bundle/`; with `candle`, the candle CUDA
/// interop test too (`bin/gpu_candle-*`, see [`crate::candle`]).
pub fn build(root: &Path, candle: bool) -> Result<()> {
    let out = root.join("gpu-bundle");
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    for d in ["bin", "examples", "benches", "kernels"] {
        std::fs::create_dir_all(out.join(d))?;
    }
    let kernels = root.join("target/kernels");
    compile_kernels(root, &kernels)?;
    for name in KERNEL_SOURCES {
        for ext in ["ptx", "cubin"] {
            let file = format!("{name}.{ext}");
            std::fs::copy(kernels.join(&file), out.join("kernels").join(&file))?;
        }
    }
    build_warp_data(root, &root.join("target/warp-aot"))?;
    copy_dir(&root.join("target/warp-aot"), &out.join("warp"))?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    step("building the release test binaries (cargo test --release --no-run)");
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
        // Warp's own examples: gpu_corpus_load loads every module of the
        // corpus and makes its typed launchers (the build script compiles
        // the corpus with Warp, as build.py does for the data).
        "-p",
        "warp-corpus",
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
    if candle {
        step("building the candle CUDA interop test (tests/candle-interop, release)");
        let exe = crate::candle::build_test(root)?;
        let name = exe
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        std::fs::copy(&exe, out.join("bin").join(name))?;
        count += 1;
    }
    step("building the examples (release)");
    run_shown(Command::new(&cargo).current_dir(root).args([
        "build",
        "--release",
        "-p",
        "sdk-tests",
        "--examples",
    ]))?;
    for example in [
        "device_count",
        "warp_saxpy",
        "warp_aot",
        "warp_reduce",
        "warp_replay",
        "nvrtc_template",
    ] {
        std::fs::copy(
            root.join("target/release/examples").join(example),
            out.join("examples").join(example),
        )?;
    }
    // The example crate: a Warp module compiled by its build.rs (every
    // architecture it lists, or WARP_BUILD_ARCHS) and embedded in the binary.
    step("building warp-tape-example (release)");
    run_shown(Command::new(&cargo).current_dir(root).args([
        "build",
        "--release",
        "-p",
        "warp-tape-example",
    ]))?;
    std::fs::copy(
        root.join("target/release/warp-tape-example"),
        out.join("examples").join("warp_tape"),
    )?;
    // CUDA C compiled by its build.rs with NVRTC from pinned wheels
    // (warp_build::CudaBuild): its binary runs the kernels against CPU
    // references and the refusals, exiting non-zero on a mismatch.
    step("building cuda-reduction-example (release)");
    run_shown(Command::new(&cargo).current_dir(root).args([
        "build",
        "--release",
        "-p",
        "cuda-reduction-example",
        "--bin",
        "cuda-reduction-example",
    ]))?;
    std::fs::copy(
        root.join("target/release/cuda-reduction-example"),
        out.join("examples").join("cuda_reduction"),
    )?;
    step("building the benchmarks (release)");
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
    let run_sh_path = out.join("run.sh");
    std::fs::write(&run_sh_path, run_sh())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&run_sh_path, std::fs::Permissions::from_mode(0o755))?;
    }
    // The bundle outgrew the device tool's 64 MiB carry limit (91 MB with
    // the Warp corpus): a gzip archive of it (about a third) is carried
    // instead and unpacked on the GPU machine.
    step("packing target/pack/gpu-bundle.tgz");
    let pack = root.join("target/pack");
    std::fs::create_dir_all(&pack)?;
    run(Command::new("tar").current_dir(root).args([
        "-czf",
        "target/pack/gpu-bundle.tgz",
        "gpu-bundle",
    ]))?;
    println!(
        "xtask gpu-bundle: {count} test binaries, kernels and run.sh in {}; carry `target/pack` and run \
         `tar -xzf target/pack/gpu-bundle.tgz && bash gpu-bundle/run.sh`",
        out.display()
    );
    Ok(())
}
