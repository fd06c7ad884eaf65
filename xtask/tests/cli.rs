//! `cargo xtask`'s command line, run as the built binary (issue 21: a
//! misspelt flag was ignored and the task ran; now it is an error that names
//! the flag meant, with a non-zero exit, and every task has `--help`).

use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("the xtask binary runs")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn codegen_with_a_misspelt_check_fails_and_names_check() {
    let out = xtask(&["codegen", "--chek"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("unexpected argument '--chek'"), "{stderr}");
    assert!(
        stderr.contains("a similar argument exists: '--check'"),
        "{stderr}"
    );
    // Nothing ran: the task prints its own line only when it runs.
    assert!(!stdout.contains("codegen"), "{stdout}");
}

#[test]
fn an_unknown_task_fails_and_names_the_nearest() {
    let out = xtask(&["gpu-bundel"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a similar subcommand exists: 'gpu-bundle'"),
        "{stderr}"
    );
}

#[test]
fn help_lists_every_task_and_each_task_has_its_own() {
    for args in [&["help"][..], &["--help"], &[]] {
        let out = xtask(args);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{args:?}: {stderr}");
        for task in [
            "codegen",
            "import",
            "gpu-bundle",
            "candle-test",
            "test",
            "fuzz",
            "warp-aot",
            "warp-install",
            "warp-other-versions",
            "public-api",
        ] {
            assert!(stdout.contains(&format!("  {task} ")), "{args:?}: {stdout}");
        }
    }
    for (task, flag) in [
        ("codegen", "--check"),
        ("import", "--check"),
        ("fuzz", "--seconds <N>"),
        ("warp-aot", "--no-cpu"),
        ("public-api", "--all"),
        ("test", "[ARGS]..."),
        ("gpu-bundle", "--no-candle"),
        ("candle-test", "Usage: cargo xtask candle-test"),
        ("warp-install", "Usage: cargo xtask warp-install"),
        ("warp-other-versions", "--check"),
    ] {
        for args in [[task, "--help"], ["help", task]] {
            let out = xtask(&args);
            let (stdout, stderr) = text(&out);
            assert!(out.status.success(), "{args:?}: {stderr}");
            assert!(stdout.contains(flag), "{args:?}: {stdout}");
        }
    }
}
