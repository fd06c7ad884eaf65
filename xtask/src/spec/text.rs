//! Strings of the specs that remember where they were written.

use serde_saphyr::Spanned;

/// A string that remembers where in its spec file it was written.
pub type Str = Spanned<String>;

/// Makes a [`Str`] with no position (for values the importer creates).
pub fn str(s: impl Into<String>) -> Str {
    Spanned::new(
        s.into(),
        serde_saphyr::Location::UNKNOWN,
        serde_saphyr::Location::UNKNOWN,
    )
}
