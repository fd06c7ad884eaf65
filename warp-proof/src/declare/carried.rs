//! Declarations carried from the build: `warp-build` derives a module's
//! declarations once, when it compiles the module, and writes them beside
//! its files (`wp_<module>.rules.json`); a load reads them instead of
//! reading the source again.
//!
//! What was carried is used only when it says it was derived from exactly
//! this source and metadata (their lengths and hashes) by this prover (a
//! hash of its code, [`CARRIED_FORMAT`]); any other stamp makes the reader
//! derive the declarations again, so a stale or foreign file costs time,
//! never a wrong rule. That the file was derived from the module it is
//! shipped with, by the prover it names, is the promise of whoever pairs
//! them (warp-launch's `unsafe` `EmbeddedModule::with_rules` and
//! `AotModule::load`): the stamp is a hash, not a signature.

use std::hash::Hasher;

use rustc_hash::FxHasher;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{DeclareError, Declared, version};
use crate::source::SourceError;

/// The version of the carried format; a file of another is derived again.
pub const CARRIED_FORMAT: u32 = 1;

/// The prover that derives: a hash of warp-proof's code (its build
/// script hashes `src/`). Carried declarations name it; a build tool keys
/// its own cache on it, so that a new prover derives again.
pub const PROVER_ID: &str = env!("WARP_PROOF_ID");

/// What a text is, for the stamp: its length and a 64-bit hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Fingerprint {
    len: usize,
    hash: u64,
}

impl Fingerprint {
    fn of(text: &str) -> Fingerprint {
        let mut h = FxHasher::default();
        h.write(text.as_bytes());
        Fingerprint {
            len: text.len(),
            hash: h.finish(),
        }
    }
}

/// The stamp the reader compares before reading the kernels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    format: u32,
    prover: String,
    source: Fingerprint,
    meta: Fingerprint,
}

impl Stamp {
    fn of(text: &str, meta: &str) -> Stamp {
        Stamp {
            format: CARRIED_FORMAT,
            prover: PROVER_ID.to_string(),
            source: Fingerprint::of(text),
            meta: Fingerprint::of(meta),
        }
    }
}

#[derive(Serialize)]
struct Written<'a> {
    stamp: Stamp,
    kernels: &'a [Declared],
}

#[derive(Deserialize)]
struct Read<'a> {
    stamp: Stamp,
    #[serde(borrow)]
    kernels: &'a RawValue,
}

/// The declarations [`declarations`](super::declarations) gave for source
/// `text` and metadata `meta`, as the text a build writes beside the
/// module (`wp_<module>.rules.json`), stamped with both texts and this
/// prover.
///
/// ```
/// use warp_proof::{carried_declarations, carry_declarations, declarations};
/// # let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../warp-launch/tests/fixtures");
/// # let cu = std::fs::read_to_string(format!("{dir}/wp_kernels.cu")).unwrap();
/// # let meta = std::fs::read_to_string(format!("{dir}/wp_kernels.meta")).unwrap();
/// let derived = declarations(&cu, "wp_kernels.cu", &meta, "wp_kernels.meta").unwrap();
/// let carried = carry_declarations(&derived, &cu, &meta);
/// // Read back for the same texts: the same declarations, not derived again.
/// let read = carried_declarations(&carried, "wp_kernels.rules.json", &cu, "wp_kernels.cu", &meta)
///     .unwrap()
///     .expect("the stamp matches");
/// assert_eq!(read, derived);
/// // For another source, nothing: the caller derives anew.
/// let other = cu.replacen("y[i] = a * x[i] + y[i]", "y[i] = a * x[i] + y[j]", 1);
/// assert!(carried_declarations(&carried, "wp_kernels.rules.json", &other, "wp_kernels.cu", &meta)
///     .unwrap()
///     .is_none());
/// ```
pub fn carry_declarations(decls: &[Declared], text: &str, meta: &str) -> String {
    let written = Written {
        stamp: Stamp::of(text, meta),
        kernels: decls,
    };
    // Plain data with string keys: serialising cannot fail.
    serde_json::to_string(&written).unwrap_or_default()
}

/// The declarations carried in `carried` (file `carried_file`, written by
/// [`carry_declarations`]) when its stamp names exactly source `text`
/// (file `cu_file`), metadata `meta` and this prover; `Ok(None)` when it
/// names anything else (the caller derives with
/// [`declarations`](super::declarations)). Warp's version in `text` is
/// checked as a derive checks it.
///
/// # Errors
///
/// [`DeclareError::Source`] for a source of another Warp release (naming
/// `cu_file`), and for carried text that is not what
/// [`carry_declarations`] writes, or that names a dtype this prover does
/// not know (naming `carried_file`, with the advice to rebuild).
pub fn carried_declarations(
    carried: &str,
    carried_file: &str,
    text: &str,
    cu_file: &str,
    meta: &str,
) -> Result<Option<Vec<Declared>>, DeclareError> {
    version::check_warp_version(text, cu_file)?;
    let bad = |e: serde_json::Error| {
        DeclareError::Source(SourceError::new(
            carried_file,
            e.line(),
            format!(
                "carried declarations do not read: {e}; delete the file and rebuild (warp-build writes it with the module)"
            ),
        ))
    };
    let read: Read<'_> = serde_json::from_str(carried).map_err(bad)?;
    if read.stamp != Stamp::of(text, meta) {
        return Ok(None);
    }
    serde_json::from_str(read.kernels.get())
        .map(Some)
        .map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declarations;

    const CU: &str = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.cu");
    const META: &str = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.meta");
    const FILE: &str = "wp_kernels.rules.json";

    fn derived() -> Vec<Declared> {
        declarations(CU, "wp_kernels.cu", META, "wp_kernels.meta").unwrap()
    }

    fn read(carried: &str, cu: &str, meta: &str) -> Option<Vec<Declared>> {
        carried_declarations(carried, FILE, cu, "wp_kernels.cu", meta).unwrap()
    }

    #[test]
    fn carried_declarations_read_back_as_derived() {
        let d = derived();
        assert!(d.len() > 5, "{}", d.len());
        let back = read(&carry_declarations(&d, CU, META), CU, META).unwrap();
        assert_eq!(back, d);
        // Dtypes come back as the table's entries (compared by address).
        for (a, b) in back.iter().zip(&d) {
            for (p, q) in a.decl.params.iter().zip(&b.decl.params) {
                if let (
                    crate::ParamKind::Array { dtype: x, .. },
                    crate::ParamKind::Array { dtype: y, .. },
                ) = (&p.kind, &q.kind)
                {
                    assert!(std::ptr::eq(*x, *y), "{}", x.name);
                }
            }
        }
    }

    #[test]
    fn another_source_meta_or_prover_derives_again() {
        let c = carry_declarations(&derived(), CU, META);
        // One byte of the source, the metadata, a longer source.
        let cu = CU.replacen("y[i] = a * x[i] + y[i]", "y[i] = a * x[i] + y[j]", 1);
        assert!(cu != CU);
        assert!(read(&c, &cu, META).is_none());
        assert!(read(&c, CU, &format!("{META} ")).is_none());
        assert!(read(&c, &format!("{CU}\n"), META).is_none());
        // Another prover or format.
        let other = c.replacen(PROVER_ID, "0000000000000000", 1);
        assert!(other != c);
        assert!(read(&other, CU, META).is_none());
        let other = c.replacen(
            &format!("\"format\":{CARRIED_FORMAT}"),
            &format!("\"format\":{}", CARRIED_FORMAT + 1),
            1,
        );
        assert!(other != c);
        assert!(read(&other, CU, META).is_none());
    }

    #[test]
    fn forged_or_broken_carried_text_is_an_error_naming_the_file() {
        let c = carry_declarations(&derived(), CU, META);
        // Not JSON at all.
        let e = carried_declarations("not json", FILE, CU, "wp_kernels.cu", META).unwrap_err();
        assert!(
            e.to_string().contains(FILE) && e.to_string().contains("rebuild"),
            "{e}"
        );
        // The stamp matches, the kernels are cut short.
        let cut = &c[..c.len() - 20];
        let e = carried_declarations(cut, FILE, CU, "wp_kernels.cu", META).unwrap_err();
        assert!(e.to_string().contains(FILE), "{e}");
        // A dtype this prover does not have.
        let forged = c.replacen("\"float32\"", "\"float31\"", 1);
        assert!(forged != c);
        let e = carried_declarations(&forged, FILE, CU, "wp_kernels.cu", META).unwrap_err();
        assert!(e.to_string().contains("no Warp dtype 'float31'"), "{e}");
    }

    #[test]
    fn a_source_of_another_warp_release_is_refused_as_by_a_derive() {
        let c = carry_declarations(&derived(), CU, META);
        // A header line another release writes otherwise.
        let old = CU.replacen("#define WP_NO_CRT", "#define WP_NO_CRT 1", 1);
        assert!(old != CU);
        let e = carried_declarations(&c, FILE, &old, "wp_kernels.cu", META).unwrap_err();
        let d = declarations(&old, "wp_kernels.cu", META, "wp_kernels.meta").unwrap_err();
        assert_eq!(e.to_string(), d.to_string());
    }
}
