//! Typed launchers from a build script (feature `launchers`, on by
//! default): warp-proof's generator over the module a compile step wrote.

use std::path::PathBuf;

pub use warp_proof::{LauncherError, Launchers};

use crate::Compiled;

impl Compiled {
    /// The launcher generator over this module, with the Python files the
    /// compile read (for the launchers' docs) and, when the compile
    /// embedded the images, the static that holds them (the module struct
    /// then gets `from_embedded`).
    ///
    /// # Errors
    ///
    /// [`LauncherError::Io`] when the module's source or metadata cannot
    /// be read.
    pub fn launchers(&self) -> Result<Launchers, LauncherError> {
        let mut l = Launchers::from_dir(self.dir(), self.module())?;
        l.python_sources(self.sources());
        if self.embed_file().is_some() {
            l.embedded_static(self.static_name());
        }
        Ok(l)
    }
}

/// The one call a build script makes after compiling a module: writes the
/// launchers of `compiled` to `<compiled.dir()>/<module>_launchers.rs`
/// (`$OUT_DIR/warp/<module>/<module>_launchers.rs` by default), Python
/// files named relative to the crate (`CARGO_MANIFEST_DIR`), and returns
/// the path. The crate then does
/// `include!(concat!(env!("OUT_DIR"), "/warp/kernels/kernels_launchers.rs"));`
/// and depends on warp-launch, whose types the launchers take.
///
/// ```no_run
/// // build.rs, with warp-build in [build-dependencies] (the launchers
/// // need Warp's compile, so this example runs in a build script only):
/// use warp_build::{WarpModule, write_launchers};
/// let compiled = WarpModule::new("kernels.py").embed(true).compile().unwrap_or_else(|e| panic!("{e}"));
/// write_launchers(&compiled).unwrap_or_else(|e| panic!("{e}"));
/// ```
///
/// # Errors
///
/// Those of [`Compiled::launchers`] and [`Launchers::write`].
pub fn write_launchers(compiled: &Compiled) -> Result<PathBuf, LauncherError> {
    let mut l = compiled.launchers()?;
    if let Some(root) = std::env::var_os("CARGO_MANIFEST_DIR") {
        l.source_root(root);
    }
    let path = compiled
        .dir()
        .join(format!("{}_launchers.rs", compiled.module()));
    l.write(&path)?;
    log::info!(
        "warp-build: wrote the launchers of {} to {}",
        compiled.module(),
        path.display()
    );
    Ok(path)
}
