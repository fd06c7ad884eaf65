//! `cargo xtask <task>`: see `cargo xtask help`.

use std::process::{Command, ExitCode};

use xtask::{Result, bundle, codegen, fuzz, import, provision, public_api, warp_aot};

const HELP: &str = "\
usage: cargo xtask <task>

tasks:
  codegen [--check]   generate cuda-sys, warp-launch's ABI (and the ABI probes) from specs/; --check compares only
  import [--check]    refresh specs/ from the real cuda.h (pinned CUDA 13.0); --check compares only
  gpu-bundle          build gpu-bundle/: release test binaries, nvcc 13.0 kernels, run.sh
  test [ARGS..]       provision the pinned cuda.h and Warp headers, then run `cargo test --workspace ARGS..`
  fuzz [--seconds N] [--target NAME] [--seed N]
                      bounded mutation fuzzing (stable Rust) of the spec loader, the image validator and
                      Warp's .cu/.meta readers, N seconds per target (default 10); findings go to target/fuzz/
  warp-aot [FILE] [--arch 80,90] [--block-dim N] [--out DIR] [--embed] [--no-cpu]
                      compile a Python file or package of Warp kernels ahead of time with Warp 1.19.0
                      (through warp-build; Warp is installed with pip into target/warp-build/python
                      when not importable): a cubin per arch (default: every arch Warp compiles from
                      sm_75 up; WARP_BUILD_ARCHS overrides --arch), PTX for the lowest, and with
                      --embed the Rust code that embeds them; also Warp's C++ for the CPU, compiled with
                      the host's C++ compiler into <out>/cpu/libwpl_<module>.a (--no-cpu: none). No FILE:
                      tests/warp/kernels.py into target/warp-aot/aot, the module the Warp examples load;
                      else target/warp-aot/<stem>
  public-api [--all] [CRATE_DIR..]
                      list each library crate's public items with every path that reaches them (default
                      cuda-api and warp-launch): one line of counts, then the items reachable by two or more
                      paths (--all: every item and module)
  help                this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<()> {
    let root = provision::workspace_root();
    let specs = root.join("specs");
    let check = args.iter().any(|a| a == "--check");
    match args.first().map(String::as_str) {
        Some("codegen") => codegen::run(&root, &specs, check),
        Some("import") => import::run(&specs, check),
        Some("test") => test(&args[1..]),
        Some("gpu-bundle") => bundle::build(&root),
        Some("fuzz") => fuzz::run(&root, &args[1..]),
        Some("warp-aot") => warp_aot::run(&root, &args[1..]),
        Some("public-api") => public_api::run(&root, &args[1..]),
        Some("help") | Some("--help") | None => {
            print!("{HELP}");
            Ok(())
        }
        Some(other) => Err(format!("unknown task `{other}`\n{HELP}").into()),
    }
}

/// Provisions the pinned headers, then runs the workspace tests with
/// `CUDA_INCLUDE_DIR` (cuda.h) and `WARP_NATIVE_INCLUDE_DIR` (Warp's
/// `warp/native/*.h`) pointing at them (the ABI tests compile against them).
fn test(extra: &[String]) -> Result<()> {
    let include = provision::cuda_include_dir()?;
    let warp_include = provision::warp_native_include_dir()?;
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["test", "--workspace"])
        .args(extra)
        .env("CUDA_INCLUDE_DIR", &include)
        .env("WARP_NATIVE_INCLUDE_DIR", &warp_include)
        .current_dir(provision::workspace_root())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo test --workspace failed ({status})").into())
    }
}
