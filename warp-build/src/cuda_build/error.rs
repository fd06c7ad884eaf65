//! [`CudaBuildError`]: why a CUDA C build stopped, and what to do.

use std::fmt;
use std::path::PathBuf;

/// The call every message names.
const CALL: &str = "warp_build::CudaBuild::compile";

/// One NVRTC diagnostic at a line of a `.cu` file (or a header it includes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDiagnostic {
    /// The file NVRTC names (the `.cu` file's path, or a header's).
    pub file: String,
    /// The line, from 1 (0 when NVRTC gave none).
    pub line: u32,
    /// `error`, `warning` or `catastrophic error`.
    pub severity: String,
    /// The message.
    pub message: String,
}

impl fmt::Display for CudaDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file, self.line, self.severity, self.message
        )
    }
}

/// Why [`CudaBuild::compile`](crate::CudaBuild::compile) failed. Every
/// message names the call, the file, option or variable, the value, and
/// what to do.
#[non_exhaustive]
pub enum CudaBuildError {
    /// A builder option is out of range.
    InvalidOption {
        /// The option (`archs`, `define`, `name_expression`).
        param: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// An environment variable does not parse or names nothing.
    InvalidEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// No NVRTC or headers to compile with.
    Toolkit {
        /// What went wrong.
        problem: String,
        /// What to do.
        remedy: String,
    },
    /// NVRTC refused a `.cu` file.
    Compile {
        /// The `.cu` file.
        file: PathBuf,
        /// The target (`sm_90`, `compute_80`).
        target: Box<str>,
        /// The NVRTC that compiled (`NVRTC 13.0`).
        nvrtc: Box<str>,
        /// NVRTC's result.
        result: Box<str>,
        /// The diagnostics read from NVRTC's log, at their lines.
        diagnostics: Vec<CudaDiagnostic>,
        /// The log as NVRTC wrote it.
        log: Box<str>,
    },
    /// A kernel's signature could not be mapped to Rust types.
    Signature {
        /// The `.cu` file.
        file: PathBuf,
        /// The line of the kernel's head.
        line: u32,
        /// The kernel (or name expression).
        kernel: String,
        /// What is wrong, and what to do.
        problem: String,
    },
    /// A file could not be read or written.
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
}

impl fmt::Display for CudaBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaBuildError::InvalidOption {
                param,
                value,
                allowed,
            } => write!(f, "{CALL}: option `{param}` is {value}; allowed: {allowed}"),
            CudaBuildError::InvalidEnv {
                var,
                value,
                allowed,
            } => write!(
                f,
                "{CALL}: {var}={value:?} is not usable; set it to {allowed}"
            ),
            CudaBuildError::Toolkit { problem, remedy } => {
                write!(f, "{CALL}: no CUDA C compiler: {problem}; {remedy}")
            }
            CudaBuildError::Compile {
                file,
                target,
                nvrtc,
                result,
                diagnostics,
                log,
            } => {
                write!(
                    f,
                    "{CALL}: {nvrtc} could not compile {} for {target} ({result}); fix the source at the \
                     lines below",
                    file.display()
                )?;
                if diagnostics.is_empty() {
                    write!(f, ":\n{}", log.trim_end())
                } else {
                    for d in diagnostics {
                        write!(f, "\n{d}")?;
                    }
                    Ok(())
                }
            }
            CudaBuildError::Signature {
                file,
                line,
                kernel,
                problem,
            } => write!(
                f,
                "{CALL}: {}:{line}: kernel `{kernel}`: {problem}",
                file.display()
            ),
            CudaBuildError::Io {
                action,
                path,
                error,
            } => write!(f, "{CALL}: {action} {}: {error}", path.display()),
        }
    }
}

/// The same message as `Display`, so that `unwrap` and `main` print it.
impl fmt::Debug for CudaBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for CudaBuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CudaBuildError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// An I/O error on `path` while doing `action`.
pub(crate) fn io(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> CudaBuildError {
    let path = path.into();
    move |error| CudaBuildError::Io {
        action,
        path,
        error,
    }
}

/// The diagnostics of an NVRTC log: lines `FILE(LINE): SEVERITY: TEXT`
/// (NVRTC's form; `SEVERITY` may carry a number, `error #20`).
pub(crate) fn diagnostics(log: &str) -> Vec<CudaDiagnostic> {
    log.lines()
        .filter_map(|l| {
            let (head, message) = l.split_once("): ")?;
            let (file, line) = head.rsplit_once('(')?;
            let line: u32 = line.parse().ok()?;
            let (severity, message) = message.split_once(": ")?;
            let severity = severity.split(" #").next().unwrap_or(severity).trim();
            if !severity.ends_with("error") && severity != "warning" {
                return None;
            }
            Some(CudaDiagnostic {
                file: file.to_string(),
                line,
                severity: severity.to_string(),
                message: message.trim().to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvrtc_log_lines_become_file_line_diagnostics() {
        let log = "/src/k.cu(12): error: identifier \"y\" is undefined\n\
                   /src/k.cu(3): warning #177-D: variable \"z\" was declared but never referenced\n\
                   \n1 error detected in the compilation of \"/src/k.cu\".\n\
                   /inc/cub/util.cuh(37): catastrophic error: cannot open source file \"utility\"\n";
        let d = diagnostics(log);
        assert_eq!(d.len(), 3, "{d:?}");
        assert_eq!(
            d[0].to_string(),
            "/src/k.cu:12: error: identifier \"y\" is undefined"
        );
        assert_eq!((d[1].line, d[1].severity.as_str()), (3, "warning"));
        assert_eq!(d[2].severity, "catastrophic error");
        assert!(diagnostics("nvrtc: error: invalid value for --gpu-architecture").is_empty());
    }
}
