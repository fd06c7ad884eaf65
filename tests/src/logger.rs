//! A logger for tests: the library crates report through `log`, and tests
//! that read those reports (the sticky-error test counts lines) install
//! this one, which writes each record to stderr as
//! `<crate>: <level>: <message>` (`cuda-api: ERROR: ...`).

use log::{LevelFilter, Log, Metadata, Record};

struct Stderr;

impl Log for Stderr {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &Record<'_>) {
        let krate = record.target().split("::").next().unwrap_or("");
        eprintln!(
            "{}: {}: {}",
            krate.replace('_', "-"),
            record.level(),
            record.args()
        );
    }

    fn flush(&self) {}
}

/// Sends every log record of the process to stderr (once; later calls and
/// a logger already installed by someone else leave things as they are).
pub fn log_to_stderr() {
    static LOGGER: Stderr = Stderr;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(LevelFilter::Trace);
    }
}
