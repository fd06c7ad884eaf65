//! An image refused before the driver read it.

use std::fmt;

/// An image refused before the driver saw it: where (byte offset from the
/// start of the slice) and what is wrong.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImageError {
    /// The call that refused it, e.g. `Module::from_image`.
    pub call: &'static str,
    /// Byte offset of the problem from the start of the image.
    pub offset: usize,
    /// The image's length in bytes.
    pub len: usize,
    /// What is wrong.
    pub problem: String,
}

impl ImageError {
    pub(super) fn new(offset: usize, problem: impl Into<String>) -> Self {
        ImageError {
            call: "cuda_api::check_image",
            offset,
            len: 0,
            problem: problem.into(),
        }
    }

    /// The same error, reported for `call`.
    pub fn in_call(mut self, call: &'static str) -> Self {
        self.call = call;
        self
    }
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: refused the image ({} bytes) before the driver read it: at byte {}: {}; \
             load a .cubin, .fatbin or .ptx file exactly as nvcc (or Warp) wrote it: \
             a truncated or corrupted file must be rebuilt",
            self.call, self.len, self.offset, self.problem
        )
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for ImageError {}

/// What the image checks return.
pub(super) type Result<T> = std::result::Result<T, ImageError>;
