//! The declarations carried to the load: the compile derives a module's
//! declarations (parameters and access rules) once, with the prover
//! warp-launch loads modules with, and writes them beside the module
//! (`wp_<module>.rules.json`), so that `AotModule::from_embedded` and
//! `AotModule::load` read them instead of reading the source again. The
//! file names the source, metadata and prover it was derived from; a load
//! that sees other ones derives again.

use std::path::Path;

use crate::error::BuildError;

/// The prover that derives the declarations (part of the stamp: a new
/// prover derives again); empty when none is built in.
#[cfg(any(feature = "launchers", feature = "cuda-c"))]
pub(crate) const PROVER: &str = warp_proof::PROVER_ID;
/// The prover that derives the declarations: none is built in.
#[cfg(not(any(feature = "launchers", feature = "cuda-c")))]
pub(crate) const PROVER: &str = "";

/// The file name of module `module`'s carried declarations.
pub(crate) fn file_name(module: &str) -> String {
    format!("wp_{module}.rules.json")
}

/// Derives the declarations of module `module` in `dir` and writes them
/// there; the file's name, or `None` when the prover cannot declare the
/// module (the load then reports why, as it would without the file) or is
/// not built in (neither feature `launchers` nor `cuda-c`).
///
/// # Errors
///
/// [`BuildError::Io`] when the source, metadata or the file cannot be read
/// or written.
pub(crate) fn write(dir: &Path, module: &str) -> Result<Option<String>, BuildError> {
    #[cfg(any(feature = "launchers", feature = "cuda-c"))]
    {
        use crate::error::io;
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read_to_string(&path).map_err(io("reading", &path))
        };
        let (cu, meta) = (format!("wp_{module}.cu"), format!("wp_{module}.meta"));
        let (text, meta_text) = (read(&cu)?, read(&meta)?);
        let decls = match warp_proof::declarations(&text, &cu, &meta_text, &meta) {
            Ok(d) => d,
            Err(e) => {
                log::info!("warp-build: {module}: no carried declarations ({e})");
                return Ok(None);
            }
        };
        let name = file_name(module);
        let path = dir.join(&name);
        let carried = warp_proof::carry_declarations(&decls, &text, &meta_text);
        std::fs::write(&path, carried).map_err(io("writing", &path))?;
        Ok(Some(name))
    }
    #[cfg(not(any(feature = "launchers", feature = "cuda-c")))]
    {
        let _ = (dir, module);
        Ok(None)
    }
}
