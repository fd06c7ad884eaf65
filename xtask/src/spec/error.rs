//! A problem in a spec file, with its position, and all of them.

use std::fmt;

/// One problem in one spec file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// Path as shown to the user, e.g. `specs/functions/mem.yaml`.
    pub file: String,
    /// 1-based line (0 when unknown).
    pub line: u64,
    /// 1-based column (0 when unknown).
    pub col: u64,
    /// What is wrong and what to do.
    pub message: String,
}

impl SpecError {
    /// An error at a spanned value's position.
    pub fn at<T>(file: &str, at: &serde_saphyr::Spanned<T>, message: impl Into<String>) -> Self {
        SpecError {
            file: file.to_string(),
            line: at.referenced.line(),
            col: at.referenced.column(),
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// All problems found, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.0 {
            writeln!(f, "{e}")?;
        }
        write!(
            f,
            "{} error(s) in the specs; no file was written",
            self.0.len()
        )
    }
}

impl std::error::Error for SpecErrors {}
