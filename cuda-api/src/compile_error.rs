//! What a run-time compile says when it fails: [`CompileError`] (NVRTC's
//! log read into `file:line` diagnostics, the options and the NVRTC
//! version) and [`PtxRefused`] (PTX asked of an NVRTC newer than the
//! driver), for [`Program`](crate::Program). A leaf: `error` names these
//! types, and they import only `target`.

use std::fmt;

use crate::target::PtxIsa;

/// `13050` → `13.5`.
fn cuda_version(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// One diagnostic of NVRTC's log: `kernel.cu(3): error: expected a ";"`.
/// NVRTC's logs name a line, never a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file: the program's name, or a header's include name.
    pub file: String,
    /// The line, from 1.
    pub line: u32,
    /// `error`, `warning #550-D`, `catastrophic error`, ...
    pub severity: String,
    /// The message, without the location and severity.
    pub message: String,
}

impl Diagnostic {
    /// True for errors (`error`, `error #20-D`, `catastrophic error`), not
    /// warnings or remarks.
    pub fn is_error(&self) -> bool {
        self.severity.contains("error")
    }

    /// Reads every `file(line): severity: message` line of an NVRTC log;
    /// other lines (the source line echoed, the caret, the summary) are
    /// skipped.
    ///
    /// ```
    /// let log = "k.cu(3): error: expected a \";\"\n  x = 1\n  ^\n\n1 error detected in the compilation of \"k.cu\".\n";
    /// let d = cuda_api::Diagnostic::parse_log(log);
    /// assert_eq!(d.len(), 1);
    /// assert_eq!((d[0].file.as_str(), d[0].line), ("k.cu", 3));
    /// assert_eq!(d[0].to_string(), "k.cu:3: error: expected a \";\"");
    /// ```
    pub fn parse_log(log: &str) -> Vec<Diagnostic> {
        log.lines().filter_map(Diagnostic::parse_line).collect()
    }

    fn parse_line(line: &str) -> Option<Diagnostic> {
        // The file name may hold parentheses: the location is the last
        // `(digits): ` before the severity.
        let (head, rest) = line.split_once("): ")?;
        let open = head.rfind('(')?;
        let (file, digits) = (&head[..open], &head[open + 1..]);
        if file.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (severity, message) = rest.split_once(": ")?;
        let severity = severity.trim();
        let kind = severity.split_whitespace().next().unwrap_or("");
        if !["error", "warning", "remark", "catastrophic", "fatal"].contains(&kind) {
            return None;
        }
        Some(Diagnostic {
            file: file.to_string(),
            line: digits.parse().ok()?,
            severity: severity.to_string(),
            message: message.trim().to_string(),
        })
    }
}

/// `file:line: severity: message`.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file, self.line, self.severity, self.message
        )
    }
}

/// NVRTC could not compile a [`Program`](crate::Program).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompileError {
    /// The program's name (the file name its diagnostics use).
    pub program: String,
    /// The loaded NVRTC's version, e.g. 13050 for 13.5.
    pub nvrtc_version: u32,
    /// Every option passed to `nvrtcCompileProgram`, the architecture
    /// included.
    pub options: Vec<String>,
    /// NVRTC's whole log.
    pub log: String,
    /// The log's `file:line` diagnostics, in order.
    pub diagnostics: Vec<Diagnostic>,
}

impl CompileError {
    /// Reads `log` into diagnostics.
    pub fn new(program: String, nvrtc_version: u32, options: Vec<String>, log: String) -> Self {
        let diagnostics = Diagnostic::parse_log(&log);
        CompileError {
            program,
            nvrtc_version,
            options,
            log,
            diagnostics,
        }
    }

    /// The first error of the log, if NVRTC named one.
    pub fn first_error(&self) -> Option<&Diagnostic> {
        self.diagnostics.iter().find(|d| d.is_error())
    }

    /// How many errors the log names.
    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NVRTC {} could not compile program `{}`",
            cuda_version(self.nvrtc_version),
            self.program
        )?;
        match self.first_error() {
            Some(d) => {
                write!(f, ": {d}")?;
                let n = self.error_count();
                if n > 1 {
                    write!(
                        f,
                        " (and {} more error{})",
                        n - 1,
                        if n > 2 { "s" } else { "" }
                    )?;
                }
                write!(f, "; fix the source at {}:{}", d.file, d.line)?;
            }
            None => match self
                .log
                .lines()
                .map(str::trim)
                .find(|l| l.contains("error"))
            {
                // An error with no file:line is about the options.
                Some(line) => write!(f, ": {line}; check the options")?,
                None => f.write_str("; read its log below")?,
            },
        }
        write!(f, " (options: {})", self.options.join(" "))?;
        let log = self.log.trim_end();
        if !log.is_empty() {
            write!(f, "\nNVRTC log:\n{log}")?;
        }
        Ok(())
    }
}

/// The same message as `Display`.
impl fmt::Debug for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// PTX was asked of an NVRTC newer than the driver: NVRTC writes PTX of its
/// own ISA, which the driver's JIT would refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PtxRefused {
    /// The program's name.
    pub program: String,
    /// The loaded NVRTC's version, e.g. 13050.
    pub nvrtc_version: u32,
    /// The PTX ISA that NVRTC writes, where known.
    pub nvrtc_isa: Option<PtxIsa>,
    /// The driver's CUDA version, e.g. 13000.
    pub driver_version: i32,
    /// The newest PTX ISA the driver takes, where known.
    pub driver_isa: Option<PtxIsa>,
}

impl fmt::Display for PtxRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let isa = |i: &Option<PtxIsa>| match i {
            Some(i) => format!(" (PTX ISA {i})"),
            None => String::new(),
        };
        write!(
            f,
            "Program `{}`: PTX refused: the loaded NVRTC {}{} is newer than the CUDA {} driver{}, whose JIT would refuse its PTX; \
             ask for a cubin (Output::Cubin, the default here), load an NVRTC no newer than the driver (CUDA_SYS_NVRTC_LIBRARY), or update the driver",
            self.program,
            cuda_version(self.nvrtc_version),
            isa(&self.nvrtc_isa),
            cuda_version(self.driver_version.max(0) as u32),
            isa(&self.driver_isa),
        )
    }
}
