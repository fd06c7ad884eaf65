//! The launcher generator (feature `launchers`): typed Rust launchers for
//! the kernels of a Warp module, read from Warp's generated source, for
//! warp-launch. warp-build runs it from build scripts
//! (`warp_build::write_launchers`); warp-launch re-exports it as
//! `warp_launch::build::Launchers`.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::declare::{DeclareError, WARP_VERSION};

pub mod elements;
mod model;
mod render;

use model::{Input, PythonFile};

/// Generates typed launchers for the kernels of a Warp module compiled
/// ahead of time: one Rust struct per kernel whose `launch`, `launch_on`,
/// `record` and `launch_adjoint` (and, for tile kernels, `launch_tiled`)
/// take the kernel's arguments as Rust types, so wrong arguments fail to
/// compile, and one struct for the module that takes every kernel from a
/// warp-launch `AotModule`.
///
/// Read from Warp's output for the module (`wp_<module>.cu` and `.meta`),
/// with the same reader warp-launch's `AotModule::load` uses:
///
/// - scalars are their Rust types (`f32`, `i32`, `bool`, ...; `float16`
///   and `bfloat16` are `::warp_launch::half::f16` / `bf16`, which need
///   warp-launch's `half` feature where the launchers are compiled),
///   vectors, quaternions and transforms arrays of their scalar
///   (`[f32; 3]`), matrices row-major arrays of rows (`[[f32; 3]; 3]`);
/// - arrays are `&TypedArray<T, N>`: `T` the `Element`
///   type of the dtype, `N` the dimensions from the Python signature Warp
///   copies into the source (or the file, when given with
///   [`Launchers::python_source`], for signatures spanning lines), else
///   from how the kernel indexes the array; an array whose dimensions
///   nothing shows takes any number (a const generic); an adjoint array of
///   `launch_adjoint` is an `Option` (`None`: Warp's `None`, a null array);
/// - a `wp.struct` is a generated `#[repr(C)]` struct implementing
///   `WarpStruct`, its padding spelled out as fields,
///   its size, alignment and offsets asserted at compile time against the
///   layout computed from the source; a struct holding arrays (itself or
///   in a nested struct) is instead a struct of typed fields (arrays as
///   `TypedArray`s, dimensions from the Python class) whose `to_value`
///   makes the checked `StructValue` a launch takes
///   (`StructValue::with_arrays`).
///
/// No launcher is made for a kernel taking an array of a dtype with no
/// `Element` type (quaternions, transforms, ...): the module struct's docs
/// list each with the reason.
///
/// Each launcher's rustdoc shows the kernel's Python signature, where it is
/// defined (the Python file and line, and the line of Warp's CUDA), which
/// parameters it writes or accumulates into, and the access rules its
/// launches check. The output is formatted, deterministic (no time, no
/// absolute paths unless given), and begins with a banner saying it is
/// generated.
///
/// ```
/// # fn main() -> Result<(), warp_proof::LauncherError> {
/// use warp_proof::Launchers;
/// // A directory wp.compile_aot_module wrote for module `kernels` (here
/// // the workspace's fixture, with the Python file it was compiled from).
/// let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
/// let text = Launchers::from_dir(format!("{root}/warp-launch/tests/fixtures"), "kernels")?
///     .python_source(format!("{root}/tests/warp/kernels.py"))
///     .generate()?;
/// assert!(text.contains("pub struct Kernels"));
/// assert!(text.contains("pub fn launch("));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Launchers {
    module: String,
    cu_file: String,
    cu_text: String,
    meta_file: String,
    meta_text: String,
    python: Vec<PathBuf>,
    source_root: Option<PathBuf>,
    notes: Vec<String>,
    /// The static of the module's embedded images, when the compile wrote one.
    embedded: Option<String>,
    /// The compile step's facts (file name, text), when the directory has them.
    facts: Option<(String, String)>,
}

impl Launchers {
    /// The module `module` in `dir` (`wp_<module>.cu` and `wp_<module>.meta`,
    /// as `wp.compile_aot_module` writes them), with the facts warp-build's
    /// compile step writes beside them (`wp_<module>.facts.json`) when
    /// present: as at load, a kernel they do not prove on CUDA (native
    /// code, a preamble) gets only the `unsafe` `launch_unchecked`, its
    /// docs naming why.
    ///
    /// # Errors
    ///
    /// [`LauncherError::Io`] when either file cannot be read.
    pub fn from_dir(dir: impl AsRef<Path>, module: &str) -> Result<Launchers, LauncherError> {
        let dir = dir.as_ref();
        let cu_file = format!("wp_{module}.cu");
        let meta_file = format!("wp_{module}.meta");
        Ok(Launchers {
            module: module.to_string(),
            cu_text: read(&dir.join(&cu_file))?,
            meta_text: read(&dir.join(&meta_file))?,
            cu_file,
            meta_file,
            python: Vec::new(),
            source_root: None,
            notes: Vec::new(),
            embedded: None,
            facts: read_facts(dir, module)?,
        })
    }

    /// The name of the `static` of the module's embedded images (what
    /// warp-build's compile step writes with `embed(true)`): the module
    /// struct then gets `from_embedded`, loading them.
    pub fn embedded_static(&mut self, name: impl Into<String>) -> &mut Launchers {
        self.embedded = Some(name.into());
        self
    }

    /// The Python files of the module, replacing those given before.
    pub fn python_sources(&mut self, paths: &[PathBuf]) -> &mut Launchers {
        self.python = paths.to_vec();
        self
    }

    /// A Python file of the module (more than one for a package): the
    /// launchers' docs then name the file and line of each kernel, and
    /// signatures that span lines (which Warp copies only in part) are
    /// read whole from it, with their arrays' dimensions.
    pub fn python_source(&mut self, path: impl Into<PathBuf>) -> &mut Launchers {
        self.python.push(path.into());
        self
    }

    /// Python files are named relative to `root` in the docs (default:
    /// as given, or relative to the crate for warp-build's `write_launchers`).
    pub fn source_root(&mut self, root: impl Into<PathBuf>) -> &mut Launchers {
        self.source_root = Some(root.into());
        self
    }

    /// A line for the banner, e.g. the command that regenerates the file.
    pub fn banner_note(&mut self, note: impl Into<String>) -> &mut Launchers {
        self.notes.push(note.into());
        self
    }

    /// The launchers, as formatted Rust source.
    ///
    /// # Errors
    ///
    /// [`LauncherError::Io`] when a Python file cannot be read;
    /// [`LauncherError::Module`] when Warp's output cannot be read as
    /// warp-launch's `AotModule::load` reads it (another Warp
    /// version, a type it does not know, a mode it does not model: the
    /// message names the file, line and parameter);
    /// [`LauncherError::Render`] when the generated code does not parse (a
    /// bug of the generator).
    pub fn generate(&self) -> Result<String, LauncherError> {
        let root = self
            .source_root
            .as_ref()
            .and_then(|r| r.canonicalize().ok());
        let mut python = Vec::new();
        for path in &self.python {
            let text = read(path)?;
            let shown = root
                .as_ref()
                .and_then(|r| {
                    let abs = path.canonicalize().ok()?;
                    abs.strip_prefix(r).ok().map(Path::to_path_buf)
                })
                .unwrap_or_else(|| path.clone());
            let shown = shown.to_string_lossy().replace('\\', "/");
            python.push(PythonFile { shown, text });
        }
        let model = model::build(&Input {
            module: &self.module,
            cu_file: &self.cu_file,
            cu_text: &self.cu_text,
            meta_file: &self.meta_file,
            meta_text: &self.meta_text,
            python: &python,
            embedded: self.embedded.as_deref(),
            facts: self.facts.as_ref().map(|(f, t)| (f.as_str(), t.as_str())),
        })
        .map_err(|error| LauncherError::Module {
            module: self.module.clone(),
            error: Box::new(error),
        })?;
        let mut banner = vec![format!(
            "@generated by warp-launch's launcher generator from {} (Warp {WARP_VERSION}); do not edit.",
            self.cu_file
        )];
        banner.extend(self.notes.iter().cloned());
        render::render(&model, &banner).map_err(|problem| LauncherError::Render {
            module: self.module.clone(),
            problem,
        })
    }

    /// Writes the launchers to `path` (creating its directory), leaving the
    /// file untouched when it already holds them.
    ///
    /// # Errors
    ///
    /// Those of [`Launchers::generate`], and [`LauncherError::Io`] when the
    /// file or its directory cannot be written.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), LauncherError> {
        let path = path.as_ref();
        let text = self.generate()?;
        if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
            return Ok(());
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|error| LauncherError::Io {
                action: "creating the directory",
                path: dir.to_path_buf(),
                error,
            })?;
        }
        std::fs::write(path, text).map_err(|error| LauncherError::Io {
            action: "writing",
            path: path.to_path_buf(),
            error,
        })
    }
}

/// The facts warp-build's compile step wrote beside the module
/// (`wp_<module>.facts.json`), or `None` where there are none (a directory
/// Warp's own `compile_aot_module` wrote).
fn read_facts(dir: &Path, module: &str) -> Result<Option<(String, String)>, LauncherError> {
    let file = format!("wp_{module}.facts.json");
    let path = dir.join(&file);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some((file, text))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(LauncherError::Io {
            action: "reading",
            path,
            error,
        }),
    }
}

fn read(path: &Path) -> Result<String, LauncherError> {
    std::fs::read_to_string(path).map_err(|error| LauncherError::Io {
        action: "reading",
        path: path.to_path_buf(),
        error,
    })
}

/// Why launchers could not be generated.
#[non_exhaustive]
pub enum LauncherError {
    /// A file could not be read or written.
    Io {
        /// What was done (`reading`, `writing`, ...).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// Warp's output for the module cannot be read as `AotModule::load`
    /// reads it (the error says where and why).
    Module {
        /// The module.
        module: String,
        /// The reader's error.
        error: Box<DeclareError>,
    },
    /// The generated code did not parse as Rust: a bug of the generator.
    Render {
        /// The module.
        module: String,
        /// What `syn` said.
        problem: String,
    },
}

impl fmt::Display for LauncherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LauncherError::Io {
                action,
                path,
                error,
            } => write!(
                f,
                "the launcher generator (Launchers): {action} {}: {error}; the module's files are the \
                 wp_<module>.cu and wp_<module>.meta that wp.compile_aot_module (or WarpModule::compile) writes",
                path.display()
            ),
            LauncherError::Module { module, error } => write!(
                f,
                "the launcher generator (Launchers): no launchers for the Warp module '{module}', whose \
                 output AotModule::load would refuse too: {error}"
            ),
            LauncherError::Render { module, problem } => write!(
                f,
                "the launcher generator (Launchers): the code generated for the Warp module '{module}' \
                 does not parse ({problem}); this is a bug of the generator, please report it with the module"
            ),
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for LauncherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for LauncherError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LauncherError::Io { error, .. } => Some(error),
            LauncherError::Module { error, .. } => Some(error.as_ref()),
            LauncherError::Render { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests;
