//! `cargo xtask <task>`: see `cargo xtask --help` and `cargo xtask <task> --help`.

use std::process::ExitCode;

use xtask::cli;

fn main() -> ExitCode {
    // An unknown task or flag prints clap's error (with a suggestion) and
    // exits with status 2; `--help` and `help` print the help and exit with 0.
    let parsed = cli::parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit());
    match cli::run(parsed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
