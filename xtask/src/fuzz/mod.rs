//! `cargo xtask fuzz [--seconds N] [--target NAME] [--seed N]`: a bounded
//! mutation fuzzer on stable Rust (see [`engine`]).
//!
//! Targets: `spec` (xtask's own spec loader and generator, in this
//! process), and, run by `cargo test --release -p sdk-tests --test fuzz`
//! through the crates' `#[doc(hidden)] fuzzing` entry points (xtask does not
//! depend on those crates): `image` (cuda-api's cubin/fatbin/PTX
//! validator), `warp-cu` and `warp-meta` (warp-launch's readers of Warp's
//! generated `.cu` and `.meta`). Crashing and hanging inputs are saved under
//! `target/fuzz/<target>/` and reported; the task fails when there is one.
//!
//! `cuda-c` is a differential fuzzer of the CUDA C proof reader, run by
//! `cargo test --release -p sdk-tests --test fuzz_cuda_c` (see that file):
//! generated and mutated kernels the reader proves are compiled by NVRTC and,
//! against a host build of `warp_launch.h` with AddressSanitizer, by g++, and
//! launches the safe launch accepts run on the CPU; an address outside an
//! array is saved as `target/fuzz/cuda-c/fail-*.cu` (and `.case`).
//!
//! `warp` is a differential fuzzer of the Warp proof, run by `cargo test
//! --release -p sdk-tests --test fuzz_warp` (see that file): generated Warp
//! modules are compiled by warp-build's compile step, and launches the safe
//! CPU launch accepts for the kernels the proof proves run Warp's generated
//! CPU code with every array access recorded (AddressSanitizer and UBSan's
//! strict bounds check on); an access outside an argument's view is saved as
//! `target/fuzz/warp/fail-*.py` (and `.case`).

pub mod engine;

use std::path::Path;
use std::process::Command;

use crate::Result;
use crate::codegen;
use crate::spec::load::load_sources;

/// The targets, in run order.
pub const TARGETS: &[&str] = &["spec", "image", "warp-cu", "warp-meta", "cuda-c", "warp"];

/// The targets run by `cargo test --release -p sdk-tests --test fuzz`.
const TEST_TARGETS: &[&str] = &["image", "warp-cu", "warp-meta"];

/// Generated texts per second of `--seconds` for `cuda-c`: its test runs a
/// number of texts, not a time (`FUZZ_CASES`); 20 a second is about what a
/// release build does on two cores (1200 texts in 40 to 55 s, NVRTC and
/// g++ included), so a run takes about the time asked, plus the build.
pub const CUDA_C_TEXTS_PER_SECOND: f64 = 20.0;

/// Seconds of `--seconds` per generated Warp module for `warp`: its test
/// runs a number of modules, not a time (`FUZZ_WARP_MODULES`, 24 kernels
/// each); a module's Warp compile (about 3 s), g++ build and launches
/// (about 6 s) overlap with the next module's on two cores, about 5 s a
/// module, so a run takes about the time asked, plus the build.
pub const WARP_SECONDS_PER_MODULE: f64 = 5.0;

/// The separator between files of one `spec` input.
const FILE_MARK: &str = "#@@ file ";

/// The `spec` target's function: an input is a set of spec files
/// (`#@@ file PATH` lines start each), loaded, validated and, when they
/// load, generated. Errors are fine; a panic or a hang is a finding.
pub fn spec_target(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut sources: Vec<(String, String)> = Vec::new();
    for part in text.split(FILE_MARK).skip(1) {
        let (path, body) = part.split_once('\n').unwrap_or((part, ""));
        sources.push((path.trim().to_string(), body.to_string()));
    }
    if let Ok(specs) = load_sources(&sources) {
        let _ = codegen::generate(&specs);
    }
}

/// The `spec` target's seeds: the generator's good fixture (three files)
/// and the Warp ABI spec.
pub fn spec_seeds(root: &Path) -> Vec<Vec<u8>> {
    let fixture = root.join("xtask/tests/fixtures/good/specs");
    let mut set = String::new();
    for rel in ["errors.yaml", "types/types.yaml", "functions/demo.yaml"] {
        if let Ok(t) = std::fs::read_to_string(fixture.join(rel)) {
            set.push_str(&format!("{FILE_MARK}specs/{rel}\n{t}"));
        }
    }
    let mut seeds = vec![set.into_bytes()];
    if let Ok(t) = std::fs::read_to_string(root.join("specs/warp/abi.yaml")) {
        seeds.push(format!("{FILE_MARK}specs/warp/abi.yaml\n{t}").into_bytes());
    }
    seeds
}

/// Tokens of spec YAML.
pub const SPEC_TOKENS: &[&[u8]] = &[
    b"\n",
    b"\n- ",
    b": ",
    b"  ",
    b"- name: ",
    b"name: a b\n",
    b"type: ",
    b"role: out\n",
    b"len: ",
    b"rust_name: ",
    b"[",
    b"]",
    b"{",
    b"}",
    b"&a ",
    b"*a",
    b"<<: *a\n",
    b"!!str ",
    b"'",
    b"\"",
    b"#",
    b"|\n",
    b"18446744073709551615",
    b"-1",
    b"99999999999999999999999",
    b"unsigned int *",
    b"const void *",
    b"char[16]",
    b"void",
    b"type",
    b"fn",
    b"self",
    b"1x",
    b"\xc3\xa9",
    FILE_MARK.as_bytes(),
];

/// The task (`cargo xtask fuzz`, its flags parsed by [`crate::cli`]):
/// `seconds` per target, only `target` when given (one of [`TARGETS`]),
/// mutations drawn from `seed`; runs the `spec` target here, `image`,
/// `warp-cu` and `warp-meta` in `cargo test --release -p sdk-tests --test
/// fuzz`, and `cuda-c` in `cargo test --release -p sdk-tests --test
/// fuzz_cuda_c` (`FUZZ_CASES` = `seconds` x [`CUDA_C_TEXTS_PER_SECOND`],
/// `FUZZ_SEED` = `seed`; NVRTC from `CUDA_SYS_NVRTC_LIBRARY`, else the
/// pinned one `cargo xtask test` uses, fetched on first use), and `warp` in
/// `cargo test --release -p sdk-tests --test fuzz_warp`
/// (`FUZZ_WARP_MODULES` = `seconds` / [`WARP_SECONDS_PER_MODULE`], at least
/// one; `FUZZ_SEED` = `seed`).
///
/// # Errors
///
/// An unknown target, `cargo test` cannot run, or a target found a crash or
/// a hang (the inputs are under `target/fuzz/<target>/`).
pub fn run(root: &Path, seconds: f64, target: Option<&str>, seed: u64) -> Result<()> {
    if let Some(t) = target
        && !TARGETS.contains(&t)
    {
        return Err(format!(
            "--target {t}: unknown target; the targets are {}",
            TARGETS.join(", ")
        )
        .into());
    }
    let out_dir = root.join("target/fuzz");
    let wants = |t: &str| target.is_none_or(|x| x == t);
    let mut failures = Vec::new();
    if wants("spec") {
        let config = engine::Config {
            time: std::time::Duration::from_secs_f64(seconds),
            iterations: u64::MAX,
            input_limit: std::time::Duration::from_secs(5),
            seed,
            out_dir: out_dir.clone(),
        };
        let t = engine::Target {
            name: "spec",
            seeds: spec_seeds(root),
            tokens: SPEC_TOKENS,
            run: &spec_target,
        };
        println!("fuzz: target spec in this process for {seconds} s (seed {seed}) ...");
        let report = engine::run(&t, &config);
        println!("{}", report.summary());
        if !report.crashes.is_empty() {
            failures.push("spec".to_string());
        }
    }
    let others: Vec<&str> = TEST_TARGETS.iter().copied().filter(|t| wants(t)).collect();
    if !others.is_empty() {
        println!(
            "fuzz: cargo test --release -p sdk-tests --test fuzz ({}; seed {seed})",
            others.join(", ")
        );
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "test",
                "--release",
                "-p",
                "sdk-tests",
                "--test",
                "fuzz",
                "--",
                "--nocapture",
            ])
            .env("FUZZ_SECONDS", seconds.to_string())
            .env("FUZZ_ITERATIONS", u64::MAX.to_string())
            .env("FUZZ_SEED", seed.to_string())
            .env("FUZZ_TARGET", others.join(","))
            .env("FUZZ_OUT", &out_dir)
            .current_dir(root)
            .status()
            .map_err(|e| format!("cannot run cargo test for the fuzz targets: {e}"))?;
        if !status.success() {
            failures.push(format!("{} ({status})", others.join(", ")));
        }
    }
    if wants("cuda-c") {
        let cases = (seconds * CUDA_C_TEXTS_PER_SECOND).round() as u64;
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args([
            "test",
            "--release",
            "-p",
            "sdk-tests",
            "--test",
            "fuzz_cuda_c",
            "--",
            "--nocapture",
        ])
        .env("FUZZ_CASES", cases.to_string())
        .env("FUZZ_SEED", seed.to_string())
        .env("FUZZ_OUT", &out_dir)
        .current_dir(root);
        if std::env::var_os("CUDA_SYS_NVRTC_LIBRARY").is_none() {
            match crate::provision::nvrtc_library_dir() {
                Ok(lib) => {
                    cmd.env("CUDA_SYS_NVRTC_LIBRARY", lib);
                }
                Err(e) => {
                    println!("fuzz: cuda-c without NVRTC (the pinned one is not at hand: {e})")
                }
            }
        }
        println!(
            "fuzz: cargo test --release -p sdk-tests --test fuzz_cuda_c (cuda-c: {cases} texts for {seconds} s; seed {seed})"
        );
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run cargo test for the cuda-c target: {e}"))?;
        if !status.success() {
            failures.push(format!("cuda-c ({status}; fail-* under cuda-c/)"));
        }
    }
    if wants("warp") {
        let modules = ((seconds / WARP_SECONDS_PER_MODULE).round() as u64).max(1);
        println!(
            "fuzz: cargo test --release -p sdk-tests --test fuzz_warp (warp: {modules} modules for {seconds} s; seed {seed})"
        );
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "test",
                "--release",
                "-p",
                "sdk-tests",
                "--test",
                "fuzz_warp",
                "--",
                "--nocapture",
            ])
            .env("FUZZ_WARP_MODULES", modules.to_string())
            .env("FUZZ_SEED", seed.to_string())
            .env("FUZZ_OUT", &out_dir)
            .current_dir(root)
            .status()
            .map_err(|e| format!("cannot run cargo test for the warp target: {e}"))?;
        if !status.success() {
            failures.push(format!("warp ({status}; fail-* under warp/)"));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "fuzzing found problems in: {}; the inputs are under {} (crash-*, hang-*; `current` is the input a dead process was running)",
            failures.join("; "),
            out_dir.display()
        )
        .into())
    }
}
