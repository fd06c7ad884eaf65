//! Entry points for `cargo xtask fuzz` and the fuzz test in `tests/`: each
//! takes arbitrary bytes, returns nothing and never panics. Not part of the
//! API; the names stay stable for the fuzzer.

/// The image validator ([`crate::check_image`]) on arbitrary bytes.
pub fn image(data: &[u8]) {
    let _ = crate::check_image(data);
}
