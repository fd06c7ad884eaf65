//! The command line of `cargo xtask`, parsed with `clap` (derive): every task
//! a subcommand with its own flags and `--help`; an unknown task or flag is an
//! error that suggests the nearest name (`codegen --chek`: "a similar argument
//! exists: '--check'") and exits with status 2.

use std::path::Path;
use std::process::Command;

use clap::{Parser, Subcommand};

use crate::{Result, bundle, candle, codegen, fuzz, provision, public_api, warp_aot};

/// `cargo xtask <task>`: the generator and the developer tasks of the
/// workspace.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "The generator and developer tasks of the CUDA launch SDK workspace",
    after_help = "Data flows one way: cuda.h -> `import` -> specs/ -> `codegen` -> cuda-sys, cuda-api's \
                  thin layer, warp-launch's ABI. `cargo xtask <task> --help` describes each task."
)]
pub struct Cli {
    /// The task; none prints this help.
    #[command(subcommand)]
    pub task: Option<Task>,
}

/// The tasks.
#[derive(Debug, PartialEq, Subcommand)]
pub enum Task {
    /// Generate cuda-sys, cuda-api's thin layer, warp-launch's ABI (and the ABI probes) from specs/.
    Codegen {
        /// Write nothing; fail, naming the files, if the generated code is stale.
        #[arg(long)]
        check: bool,
    },
    /// Refresh specs/ from the real cuda.h of every pinned release (CUDA 12.0, 12.4, 12.8, 13.0, 13.5), merged, keeping hand annotations.
    ///
    /// Each release's cuda.h and cudaTypedefs.h come from a wheel pinned by
    /// exact version (nvidia-cuda-runtime-cu12==12.0.107, ==12.4.127, ==12.8.90,
    /// nvidia-cuda-runtime==13.0.96, ==13.5.37; fetched with pip into
    /// target/cuda-cache); with CUDA_HOME or CUDA_PATH set, only that header is
    /// read and compared. libclang from LIBCLANG_PATH, the system, or the wheel
    /// libclang==18.1.1.
    Import {
        /// Write nothing; fail if the specs' facts differ from the headers (listing each difference).
        #[arg(long)]
        check: bool,
    },
    /// Build gpu-bundle/: release test binaries, benchmarks, nvcc 13.0 kernels, Warp data and run.sh.
    ///
    /// Carry gpu-bundle/ (or target/pack/gpu-bundle.tgz) to a GPU machine and run
    /// `bash gpu-bundle/run.sh`; its last line is `gpu-bundle: N passed, M failed, K skipped`.
    /// Includes `bin/gpu_candle-*`, the candle CUDA interop test of tests/candle-interop
    /// (its first build compiles candle's CUDA kernels with nvcc: minutes).
    GpuBundle {
        /// Leave out the candle CUDA interop test (tests/candle-interop).
        #[arg(long)]
        no_candle: bool,
    },
    /// Build the candle CUDA interop test (tests/candle-interop, outside the workspace) and print its path.
    ///
    /// Release, not run: candle's CUDA kernels are compiled for sm_90 by the
    /// pinned nvcc 13.0; the CUDA libraries are linked from pinned wheels and a
    /// libcuda stub, and found at run time under /usr/local/cuda/lib64.
    CandleTest,
    /// Provision the pinned cuda.h and Warp headers, then run `cargo test --workspace ARGS..`.
    ///
    /// Every argument after `test` goes to `cargo test --workspace` as given,
    /// `--` included: `cargo xtask test -- warp_abi`, `cargo xtask test --release`.
    #[command(disable_help_flag = true)]
    Test {
        /// Print this help (only as the first argument; later ones go to cargo test).
        #[arg(long, short = 'h', action = clap::ArgAction::Help)]
        help: Option<bool>,
        /// Arguments for `cargo test --workspace`.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
    /// Bounded mutation fuzzing (stable Rust) of the spec loader, the image validator and Warp's .cu/.meta readers; differential fuzzing of the CUDA C proof reader and the Warp proof.
    ///
    /// The `spec` target runs in this process; `image`, `warp-cu` and
    /// `warp-meta` in `cargo test --release -p sdk-tests --test fuzz`.
    /// Crashing and hanging inputs are saved under `target/fuzz/<target>/`
    /// and fail the task. `cuda-c` runs `cargo test --release -p sdk-tests
    /// --test fuzz_cuda_c`: kernels the CUDA C reader proves are compiled by
    /// NVRTC and g++ (AddressSanitizer) and launched on the CPU; an access
    /// outside an array fails the task (`target/fuzz/cuda-c/fail-*`). `warp`
    /// runs `cargo test --release -p sdk-tests --test fuzz_warp`: generated
    /// Warp modules are compiled by warp-build's compile step (Python with Warp
    /// 1.19.0), and accepted launches of the kernels the proof proves run Warp's
    /// CPU code with every access recorded (g++, AddressSanitizer); an access
    /// outside an argument's view fails the task (`target/fuzz/warp/fail-*`).
    #[command(allow_negative_numbers = true)]
    Fuzz {
        /// Seconds per target, from 0 to 86400 (cuda-c: 20 generated texts a second; warp: a module of 24 kernels per 5 s).
        #[arg(long, value_name = "N", default_value = "10", value_parser = parse_seconds)]
        seconds: f64,
        /// Fuzz only this target (default: every one).
        #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(fuzz::TARGETS))]
        target: Option<String>,
        /// The random seed (default: the time in seconds).
        #[arg(long, value_name = "N")]
        seed: Option<u64>,
    },
    /// Compile a Python file or package of Warp kernels ahead of time with Warp 1.19.0 (through warp-build).
    ///
    /// A cubin per arch (default: every arch Warp compiles from sm_75 up;
    /// WARP_BUILD_ARCHS overrides --arch; no PTX: the NVRTC 12.0 fallback is
    /// warp-build's `ptx-fallback` feature, which xtask leaves out), and with --embed
    /// the Rust code that embeds them; also Warp's C++ for the CPU, compiled
    /// with the host's C++ compiler into `<out>/cpu/libwpl_<module>.a` (--no-cpu:
    /// none). Warp is installed with pip once per user (as warp-build does) when not
    /// importable (see `warp-install`). No FILE: tests/warp/kernels.py into target/warp-aot/aot, the
    /// module the Warp examples load; else `target/warp-aot/<stem>`.
    WarpAot(warp_aot::Args),
    /// Install Warp 1.19.0 and numpy for the kernel compile step where every build looks, once.
    ///
    /// What a build script's first Warp compile would do (about 525 MB with
    /// pip, about a minute): into the shared install
    /// `<cache>/warp-build/1.19.0-<hash>` (WARP_BUILD_CACHE_DIR replaces
    /// `<cache>/warp-build`; WARP_BUILD_CACHE=off or WARP_BUILD_PYTHON:
    /// target/warp-build/python), nothing when Python already imports it.
    /// Prints the directory.
    WarpInstall,
    /// Compile tests/warp/kernels.py with other warp-lang releases (1.16.0, 1.17.0, 1.18.0).
    ///
    /// Each is installed with pip once into target/warp-other/VERSION;
    /// their `wp_kernels.cu` and `.meta` are written to
    /// warp-launch/tests/fixtures/other-warp/VERSION/, the fixtures of
    /// warp-launch's Warp version check. --check (the drift task) only
    /// compares a fresh compile with the fixtures.
    WarpOtherVersions {
        /// Compare instead of writing; fail if a fixture differs.
        #[arg(long)]
        check: bool,
    },
    /// List each library crate's public items with every path that reaches them.
    ///
    /// One line of counts per crate, then the items reachable by two or more
    /// paths (--all: every item and module).
    PublicApi {
        /// List every item and module, not only those reachable by two or more paths.
        #[arg(long)]
        all: bool,
        /// Crate directories (default: cuda-api, warp-proof and warp-launch).
        #[arg(value_name = "CRATE_DIR")]
        crates: Vec<String>,
    },
}

/// `--seconds`: a finite number of seconds from 0 to 86400.
fn parse_seconds(v: &str) -> std::result::Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (0.0..=86_400.0).contains(s))
        .ok_or_else(|| format!("give a number of seconds per target from 0 to 86400, not {v:?}"))
}

/// Runs the task `cli` names (none: prints the help).
///
/// # Errors
///
/// The task's own error.
pub fn run(cli: Cli) -> Result<()> {
    let root = provision::workspace_root();
    let specs = root.join("specs");
    match cli.task {
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
            Ok(())
        }
        Some(Task::Codegen { check }) => codegen::run(&root, &specs, check),
        Some(Task::Import { check }) => import_task(&root, &specs, check),
        Some(Task::GpuBundle { no_candle }) => bundle::build(&root, !no_candle),
        Some(Task::CandleTest) => {
            let exe = candle::build_test(&root)?;
            println!("xtask candle-test: {}", exe.display());
            Ok(())
        }
        Some(Task::Test { args, .. }) => test(&root, &args),
        Some(Task::Fuzz {
            seconds,
            target,
            seed,
        }) => {
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(1)
            });
            fuzz::run(&root, seconds, target.as_deref(), seed)
        }
        Some(Task::WarpAot(args)) => warp_aot::run(&root, &args),
        Some(Task::WarpInstall) => warp_aot::install(&root),
        Some(Task::WarpOtherVersions { check }) => crate::warp_other::run(&root, check),
        Some(Task::PublicApi { all, crates }) => public_api::run(&root, all, &crates),
    }
}

/// `import`: xtask built with its `import` feature (bindgen) runs the
/// importer.
#[cfg(feature = "import")]
fn import_task(_root: &Path, specs: &Path, check: bool) -> Result<()> {
    crate::import::run(specs, check)
}

/// `import` without bindgen built in: runs `cargo run --package xtask
/// --features import -- import [--check]`, which builds bindgen on first use
/// (codegen and the other tasks never build it).
#[cfg(not(feature = "import"))]
fn import_task(root: &Path, _specs: &Path, check: bool) -> Result<()> {
    const AGAIN: &str = "XTASK_IMPORT_FEATURE_RUN";
    if std::env::var_os(AGAIN).is_some() {
        return Err("xtask was run with `--features import` but has no bindgen".into());
    }
    println!(
        "xtask import: building xtask with its `import` feature (bindgen, clang-sys) and running it ..."
    );
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args([
        "run",
        "--package",
        "xtask",
        "--features",
        "import",
        "--",
        "import",
    ])
    .env(AGAIN, "1")
    .current_dir(root);
    if check {
        cmd.arg("--check");
    }
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo to build the importer: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the importer failed ({status}); its messages are above").into())
    }
}

/// Provisions the pinned headers, then runs the workspace tests with
/// `CUDA_INCLUDE_DIR` (the newest cuda.h), `CUDA_RELEASE_INCLUDE_DIRS`
/// (`12.0=DIR;...`: every pinned release's), `NVRTC_RELEASE_INCLUDE_DIRS`
/// (the same for `nvrtc.h`) and `WARP_NATIVE_INCLUDE_DIR`
/// (Warp's `warp/native/*.h`) pointing at them (the ABI tests compile
/// against them), `CUDA_SYS_NVRTC_LIBRARY` at the pinned NVRTC 13.0's
/// library (unless set), so the NVRTC tests compile for real, and
/// `CUDA_CCCL_INCLUDE_DIR` at the pinned CCCL headers (NVRTC compiling the
/// test kernels, whose `cooperative_groups.h` needs them).
fn test(root: &Path, extra: &[String]) -> Result<()> {
    let include = provision::cuda_include_dir()?;
    let warp_include = provision::warp_native_include_dir()?;
    // The older pinned releases' headers, for their ABI probes.
    let mut releases = Vec::new();
    for r in provision::PINNED_RELEASES {
        releases.push(format!(
            "{}={}",
            r.release,
            provision::release_include_dir(r)?.display()
        ));
    }
    let mut nvrtc = Vec::new();
    for r in provision::PINNED_NVRTC {
        nvrtc.push(format!(
            "{}={}",
            r.release,
            provision::nvrtc_include_dir(r)?.display()
        ));
    }
    let cccl = provision::cccl_include_dir()?;
    let nvrtc_lib = match std::env::var_os("CUDA_SYS_NVRTC_LIBRARY") {
        Some(set) => std::path::PathBuf::from(set),
        None => provision::nvrtc_library_dir()?,
    };
    println!(
        "xtask test: cargo test --workspace {} (CUDA_INCLUDE_DIR={}, WARP_NATIVE_INCLUDE_DIR={}, CUDA_SYS_NVRTC_LIBRARY={})",
        extra.join(" "),
        include.display(),
        warp_include.display(),
        nvrtc_lib.display()
    );
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["test", "--workspace"])
        .args(extra)
        .env("CUDA_SYS_NVRTC_LIBRARY", &nvrtc_lib)
        .env("CUDA_CCCL_INCLUDE_DIR", &cccl)
        .env("CUDA_INCLUDE_DIR", &include)
        .env("CUDA_RELEASE_INCLUDE_DIRS", releases.join(";"))
        .env("NVRTC_RELEASE_INCLUDE_DIRS", nvrtc.join(";"))
        .env("WARP_NATIVE_INCLUDE_DIR", &warp_include)
        .current_dir(root)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo test --workspace failed ({status})").into())
    }
}

/// Parses `argv` (the program name first). `test`'s arguments are the ones
/// after the task name as given: clap drops a `--` that comes first, which
/// `cargo test` needs to tell its own flags from the test binaries'.
///
/// # Errors
///
/// An unknown task, an unknown flag (with the nearest known one suggested),
/// a bad value; also `--help` and `help`, whose "error" is the help text
/// (`clap::Error::exit` prints either and exits with the right status).
pub fn parse_from<I, T>(argv: I) -> std::result::Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    let mut cli = Cli::try_parse_from(&argv)?;
    if let Some(Task::Test { args, .. }) = &mut cli.task
        && let Some(at) = argv.iter().skip(1).position(|a| a == "test")
    {
        *args = argv[at + 2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
    }
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use clap::error::ErrorKind;

    use super::*;

    fn parse(args: &[&str]) -> std::result::Result<Option<Task>, clap::Error> {
        parse_from(std::iter::once("cargo xtask").chain(args.iter().copied())).map(|c| c.task)
    }

    fn error(args: &[&str]) -> clap::Error {
        match parse(args) {
            Ok(task) => panic!("{args:?} parsed as {task:?}"),
            Err(e) => e,
        }
    }

    const TASKS: &[&str] = &[
        "codegen",
        "import",
        "gpu-bundle",
        "test",
        "fuzz",
        "warp-aot",
        "public-api",
    ];

    #[test]
    fn a_misspelt_flag_is_an_error_naming_the_flag_it_resembles() {
        // Issue 21: `cargo xtask codegen --chek` rewrote the files and exited 0.
        let e = error(&["codegen", "--chek"]);
        assert_eq!(e.kind(), ErrorKind::UnknownArgument);
        let text = e.render().to_string();
        assert!(text.contains("'--chek'"), "{text}");
        assert!(
            text.contains("similar argument exists: '--check'"),
            "{text}"
        );
        assert_eq!(e.exit_code(), 2);
        for args in [
            &["import", "--chekc"][..],
            &["public-api", "--al"],
            &["warp-aot", "--archs", "80"],
            &["warp-aot", "--embed=yes"],
            &["gpu-bundle", "--release"],
            &["fuzz", "--second", "1"],
        ] {
            let e = error(args);
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::UnknownArgument | ErrorKind::TooManyValues
                ),
                "{args:?}: {e}"
            );
        }
    }

    #[test]
    fn an_unknown_task_is_an_error_naming_the_task_it_resembles() {
        let e = error(&["codgen"]);
        assert_eq!(e.kind(), ErrorKind::InvalidSubcommand);
        let text = e.render().to_string();
        assert!(
            text.contains("similar subcommand exists: 'codegen'"),
            "{text}"
        );
        assert_eq!(error(&["--check"]).kind(), ErrorKind::UnknownArgument);
    }

    #[test]
    fn every_task_has_help_and_help_lists_every_task() {
        for task in TASKS {
            for flag in ["--help", "-h"] {
                let e = error(&[task, flag]);
                assert_eq!(e.kind(), ErrorKind::DisplayHelp, "{task} {flag}");
                assert_eq!(e.exit_code(), 0);
                let text = e.render().to_string();
                assert!(
                    text.contains(&format!("Usage: cargo xtask {task}")),
                    "{task} {flag}: {text}"
                );
            }
            let e = error(&["help", task]);
            assert_eq!(e.kind(), ErrorKind::DisplayHelp, "help {task}");
        }
        for args in [&["help"][..], &["--help"], &["-h"]] {
            let e = error(args);
            assert_eq!(e.kind(), ErrorKind::DisplayHelp);
            let text = e.render().to_string();
            for task in TASKS {
                assert!(text.contains(&format!("  {task} ")), "{task}: {text}");
            }
        }
        assert_eq!(parse(&[]).unwrap(), None);
        let text = error(&["codegen", "--help"]).render().to_string();
        assert!(text.contains("--check"), "{text}");
    }

    #[test]
    fn check_flags_and_plain_tasks() {
        assert_eq!(
            parse(&["codegen"]).unwrap(),
            Some(Task::Codegen { check: false })
        );
        assert_eq!(
            parse(&["codegen", "--check"]).unwrap(),
            Some(Task::Codegen { check: true })
        );
        assert_eq!(
            parse(&["import", "--check"]).unwrap(),
            Some(Task::Import { check: true })
        );
        assert_eq!(
            parse(&["gpu-bundle"]).unwrap(),
            Some(Task::GpuBundle { no_candle: false })
        );
        assert_eq!(
            parse(&["gpu-bundle", "--no-candle"]).unwrap(),
            Some(Task::GpuBundle { no_candle: true })
        );
        assert_eq!(parse(&["candle-test"]).unwrap(), Some(Task::CandleTest));
    }

    fn test_args(args: &[&str]) -> Vec<String> {
        match parse(args).unwrap() {
            Some(Task::Test { args, .. }) => args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn test_hands_its_arguments_to_cargo_test_as_given() {
        assert!(test_args(&["test"]).is_empty());
        assert_eq!(test_args(&["test", "--", "warp_abi"]), ["--", "warp_abi"]);
        assert_eq!(
            test_args(&["test", "--release", "--", "--nocapture"]),
            ["--release", "--", "--nocapture"]
        );
        assert_eq!(
            test_args(&["test", "-p", "xtask", "--lib", "--", "--help"]),
            ["-p", "xtask", "--lib", "--", "--help"]
        );
        // `--help` after another argument is cargo test's.
        assert_eq!(
            test_args(&["test", "warp_abi", "--help"]),
            ["warp_abi", "--help"]
        );
        assert_eq!(error(&["test", "--help"]).kind(), ErrorKind::DisplayHelp);
        // `test` as an argument is not the task name.
        assert_eq!(test_args(&["test", "test"]), ["test"]);
    }

    #[test]
    fn fuzz_flags() {
        let Some(Task::Fuzz {
            seconds,
            target,
            seed,
        }) = parse(&["fuzz"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((seconds, target, seed), (10.0, None, None));
        let Some(Task::Fuzz {
            seconds,
            target,
            seed,
        }) = parse(&[
            "fuzz",
            "--seconds",
            "2.5",
            "--target",
            "warp-cu",
            "--seed=7",
        ])
        .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (seconds, target.as_deref(), seed),
            (2.5, Some("warp-cu"), Some(7))
        );
        for bad in ["-1", "86401", "inf", "NaN", "ten"] {
            let text = error(&["fuzz", "--seconds", bad]).render().to_string();
            assert!(text.contains("from 0 to 86400"), "{bad}: {text}");
        }
        let text = error(&["fuzz", "--target", "imag"]).render().to_string();
        assert!(text.contains("similar value exists: 'image'"), "{text}");
        assert!(
            text.contains("spec, image, warp-cu, warp-meta, cuda-c, warp"),
            "{text}"
        );
        let Some(Task::Fuzz { target, .. }) = parse(&["fuzz", "--target", "cuda-c"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(target.as_deref(), Some("cuda-c"));
        let Some(Task::Fuzz {
            seconds,
            target,
            seed,
        }) = parse(&[
            "fuzz",
            "--target",
            "warp",
            "--seconds",
            "120",
            "--seed",
            "1",
        ])
        .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (seconds, target.as_deref(), seed),
            (120.0, Some("warp"), Some(1))
        );
        let text = error(&["fuzz", "--target", "wrp"]).render().to_string();
        assert!(text.contains("similar value exists: 'warp'"), "{text}");
        assert_eq!(
            error(&["fuzz", "--seed", "-3"]).kind(),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            error(&["fuzz", "--seconds"]).kind(),
            ErrorKind::InvalidValue
        );
    }

    #[test]
    fn warp_other_versions_flags() {
        assert_eq!(
            parse(&["warp-other-versions"]).unwrap(),
            Some(Task::WarpOtherVersions { check: false })
        );
        assert_eq!(
            parse(&["warp-other-versions", "--check"]).unwrap(),
            Some(Task::WarpOtherVersions { check: true })
        );
    }

    #[test]
    fn warp_aot_flags() {
        assert_eq!(
            parse(&["warp-aot"]).unwrap(),
            Some(Task::WarpAot(warp_aot::Args::default()))
        );
        assert_eq!(
            parse(&[
                "warp-aot",
                "k.py",
                "--arch",
                "80,sm_90",
                "--block-dim=128",
                "--out",
                "o",
                "--embed",
                "--no-cpu",
            ])
            .unwrap(),
            Some(Task::WarpAot(warp_aot::Args {
                file: Some("k.py".into()),
                archs: Some(warp_aot::Archs(vec![80, 90])),
                block_dim: Some(128),
                out: Some("o".into()),
                embed: true,
                no_cpu: true,
            }))
        );
        assert_eq!(
            error(&["warp-aot", "--arch"]).kind(),
            ErrorKind::InvalidValue
        );
        let text = error(&["warp-aot", "--arch", "ninety"])
            .render()
            .to_string();
        assert!(text.contains("comma-separated"), "{text}");
        assert_eq!(
            error(&["warp-aot", "a.py", "b.py"]).kind(),
            ErrorKind::UnknownArgument
        );
    }

    #[test]
    fn public_api_flags() {
        assert_eq!(
            parse(&["public-api"]).unwrap(),
            Some(Task::PublicApi {
                all: false,
                crates: vec![]
            })
        );
        assert_eq!(
            parse(&["public-api", "--all", "cuda-sys", "warp-build"]).unwrap(),
            Some(Task::PublicApi {
                all: true,
                crates: vec!["cuda-sys".into(), "warp-build".into()]
            })
        );
    }
}
