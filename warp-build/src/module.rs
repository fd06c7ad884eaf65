//! [`WarpModule`], the builder, and [`Compiled`], what a compile produced.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{BuildError, WarpStage, io};
use crate::python::{self, Python, tail};
use crate::stamp::{self, Stamp};
use crate::{
    ENV_ARCHS, ENV_CACHE, ENV_CACHE_DIR, ENV_PYTHON, ENV_PYTHONPATH, WARP_VERSION, cpu_library,
    embed,
};

/// The Python side of the compile step, run with `python -c`.
const SCRIPT: &str = include_str!("compile.py");

/// The code that writes the embedding file and the CPU entry points: part
/// of the stamp, so that a warp-build that writes them differently
/// recompiles.
const GENERATORS: [&str; 4] = [
    include_str!("embed.rs"),
    include_str!("cpu_shim.rs"),
    include_str!("cpu_parse.rs"),
    // The C++ compile's flags.
    include_str!("cpu_library.rs"),
];

/// Warp's default block dimension.
const DEFAULT_BLOCK_DIM: u32 = 256;
/// The most threads a CUDA block may have.
const MAX_BLOCK_DIM: u32 = 1024;

/// A Warp module to compile ahead of time: a Python file of Warp kernels, or
/// a package directory (with `__init__.py`) whose `__init__` defines them.
///
/// Warp's own AOT compiler (`wp.compile_aot_module`, warp-lang 1.19.0) runs
/// in Python, without a GPU: one cubin per architecture and, by default, PTX
/// for the lowest one, plus the generated CUDA source and metadata that
/// `warp_launch::AotModule` reads. See the [crate docs](crate) for the
/// environment variables and where Warp comes from.
///
/// ```no_run
/// // build.rs, in `main`:
/// let compiled = warp_build::WarpModule::new("kernels.py")
///     .archs([80, 90])
///     .embed(true)
///     .compile()
///     .unwrap_or_else(|e| panic!("{e}"));
/// // The crate then does
/// // include!(concat!(env!("OUT_DIR"), "/warp/kernels/kernels.rs"));
/// assert_eq!(compiled.static_name(), "KERNELS");
/// ```
#[derive(Debug, Clone)]
pub struct WarpModule {
    source: PathBuf,
    archs: Option<Vec<u32>>,
    ptx: bool,
    block_dim: u32,
    out_dir: Option<PathBuf>,
    embed: bool,
    cpu: bool,
    cargo_metadata: Option<bool>,
    python: Option<PathBuf>,
}

impl WarpModule {
    /// A module from `source`: a `.py` file or a package directory. A
    /// relative path is taken from the current directory (a build script
    /// runs in its package's directory).
    pub fn new(source: impl Into<PathBuf>) -> WarpModule {
        WarpModule {
            source: source.into(),
            archs: None,
            ptx: true,
            block_dim: DEFAULT_BLOCK_DIM,
            out_dir: None,
            embed: false,
            cpu: true,
            cargo_metadata: None,
            python: None,
        }
    }

    /// The GPU architectures to compile cubins for (`80` is sm_80). Default:
    /// every architecture Warp 1.19.0's NVRTC compiles, from sm_75 up.
    /// `WARP_BUILD_ARCHS` (for example `90,80`) overrides this list.
    pub fn archs(&mut self, archs: impl IntoIterator<Item = u32>) -> &mut WarpModule {
        self.archs = Some(archs.into_iter().collect());
        self
    }

    /// Whether to also write PTX for the lowest architecture, the image a
    /// driver can compile for a GPU no cubin fits (default `true`): Warp's
    /// `.cu` compiled by NVRTC 12.0 to PTX ISA 8.0, which drivers from CUDA
    /// 12.0 on take (none for a module calling MathDx). It needs
    /// `nvidia-cuda-nvrtc-cu12==12.0.76` beside warp-lang (warp-build's
    /// own install has it); without it the compile fails saying so.
    pub fn ptx(&mut self, ptx: bool) -> &mut WarpModule {
        self.ptx = ptx;
        self
    }

    /// The block dimension the module is compiled for (Warp's `block_dim`
    /// module option, `WP_TILE_BLOCK_DIM` in the generated source; default
    /// 256). A Warp module runs only at the block dimension it was compiled for.
    pub fn block_dim(&mut self, block_dim: u32) -> &mut WarpModule {
        self.block_dim = block_dim;
        self
    }

    /// Where to write the output (default `$OUT_DIR/warp/<module>`).
    pub fn out_dir(&mut self, dir: impl Into<PathBuf>) -> &mut WarpModule {
        self.out_dir = Some(dir.into());
        self
    }

    /// Whether to also write `<out_dir>/<module>.rs`, a documented
    /// `pub static <MODULE>: warp_launch::EmbeddedModule` holding the source,
    /// metadata and every image (`include_str!` / `include_bytes!`), to
    /// `include!` in the crate (default `false`).
    pub fn embed(&mut self, embed: bool) -> &mut WarpModule {
        self.embed = embed;
        self
    }

    /// Whether to also compile the module for the CPU (default `true`: one
    /// kernel source for both devices).
    ///
    /// Warp writes its generated C++ (`wp_<module>.cpp`); warp-build adds
    /// `wp_<module>.cpu.cpp`, the C entry points `warp_launch` calls
    /// (`wpl_<module>__<kernel>__forward`, `__backward`, `__layout`), and
    /// compiles both with its small CPU runtime into the static library
    /// `<out_dir>/cpu/libwpl_<module>.a`, with the [`cc`](https://docs.rs/cc)
    /// crate: a C++17 compiler is needed, g++ 9 or newer or clang 10 or newer
    /// (`CXX` picks one), with `-O3 -ffp-contract=off -DNDEBUG` (Warp's release build), no
    /// `-ffast-math` and no `-march`: the instruction set is that of Cargo's
    /// target (`CARGO_CFG_TARGET_FEATURE`, which `-C target-cpu` and
    /// `-C target-feature` set: `-mavx2`, `-mfma`, ... for x86), never the
    /// build machine's, so that the code runs wherever the program runs and
    /// rounds as written. In a
    /// build script the library is linked into the crate (cargo metadata).
    /// Kernels that use tiles or other cooperative block code get no CPU
    /// entry points ([`Compiled::cpu_unsupported`] says which and why).
    /// `.cpu(false)` skips all of it: no C++ compiler needed.
    ///
    /// Module names become C symbol names: two crates linked into one binary
    /// must not both compile CPU code for modules of the same name.
    pub fn cpu(&mut self, cpu: bool) -> &mut WarpModule {
        self.cpu = cpu;
        self
    }

    /// Whether to print `cargo:rerun-if-changed` for every source file and
    /// `cargo:rerun-if-env-changed` for the variables read, and the cargo
    /// lines that link the CPU code (default: only in a build script, that is
    /// when `OUT_DIR`, `TARGET` and `HOST` are set).
    pub fn cargo_metadata(&mut self, emit: bool) -> &mut WarpModule {
        self.cargo_metadata = Some(emit);
        self
    }

    /// The Python interpreter to run (default: `WARP_BUILD_PYTHON`, else
    /// `python3`); set here, it wins over `WARP_BUILD_PYTHON`.
    pub fn python(&mut self, python: impl Into<PathBuf>) -> &mut WarpModule {
        self.python = Some(python.into());
        self
    }

    /// Compiles the module, or reuses the last compile in the output
    /// directory when its stamp matches (same sources, options, Warp version
    /// and script) and its files exist.
    ///
    /// # Errors
    ///
    /// [`BuildError`]: a bad option or `WARP_BUILD_ARCHS`; a source that is
    /// not a `.py` file or package; no output directory; no Python 3.10+, no
    /// Warp 1.19.0 and no pip to install it, or pip failing (each message
    /// says what to install and the command); Warp failing to import the
    /// module or to compile a kernel (with Warp's message); file errors.
    pub fn compile(&self) -> Result<Compiled, BuildError> {
        let source = self.source()?;
        let archs = self.resolved_archs()?;
        if !(1..=MAX_BLOCK_DIM).contains(&self.block_dim) {
            return Err(BuildError::InvalidOption {
                param: "block_dim",
                value: self.block_dim.to_string(),
                allowed: format!("1 to {MAX_BLOCK_DIM} threads (CUDA's limit per block)"),
            });
        }
        let module = source.module.clone();
        let out_dir = self.resolved_out_dir(&module)?;
        let metadata = self.cargo_metadata.unwrap_or_else(in_build_script);
        if metadata {
            for var in [
                ENV_ARCHS,
                ENV_PYTHON,
                ENV_PYTHONPATH,
                ENV_CACHE,
                ENV_CACHE_DIR,
            ] {
                crate::cargo_instruction(format_args!("rerun-if-env-changed={var}"));
            }
            if source.is_package {
                crate::cargo_instruction(format_args!(
                    "rerun-if-changed={}",
                    source.path.display()
                ));
            }
            for f in &source.files {
                crate::cargo_instruction(format_args!("rerun-if-changed={}", f.display()));
            }
        }

        let key = format!(
            "module={module}\nsource={}\narchs={archs:?}\nptx={} ({})\nblock_dim={}\nembed={}\ncpu={}\nout_dir={}\nwarp={WARP_VERSION}\nscript={SCRIPT}\nprover={}\nruntime={}\ncpu_flags={:?}\ngenerators={GENERATORS:?}",
            source.path.display(),
            self.ptx,
            crate::NVRTC_WHEEL,
            self.block_dim,
            self.embed,
            self.cpu,
            out_dir.display(),
            crate::rules::PROVER,
            if self.cpu { cpu_library::RUNTIME } else { "" },
            if self.cpu {
                cpu_library::cargo_target_flags()
            } else {
                Vec::new()
            },
        );
        let embed_name = self.embed.then(|| format!("{module}.rs"));

        if let Some(old) = stamp::read(&out_dir) {
            let mut sources = source.files.clone();
            sources.extend(old.sources.iter().cloned());
            let outputs_exist = old
                .files
                .iter()
                .chain(old.embed.iter())
                .chain(old.cpu_lib.iter())
                .all(|f| out_dir.join(f).is_file());
            if outputs_exist
                && old.embed == embed_name
                && stamp::hash(&key, &sources).as_deref() == Some(old.hash.as_str())
            {
                log::debug!("warp-build: {module}: up to date in {}", out_dir.display());
                emit_extra_sources(metadata, &source.files, &old.sources);
                if metadata && old.cpu_lib.is_some() {
                    cpu_library::print_link(&module, &out_dir);
                }
                return Ok(Compiled::from_stamp(out_dir, module, old, true));
            }
        }

        stamp::remove(&out_dir)?;
        let (exe, origin, chosen) = interpreter(self.python.as_deref());
        let python = python::find(exe, origin, chosen, &out_dir, metadata)?;
        let target = python::target_dir(&out_dir);
        let mut summary = run_script(&python, &source, &archs, self, &out_dir, target.as_deref())?;
        if self.ptx
            && let Some(&arch) = summary.archs.first()
            && let Some(file) = crate::ptx::compile(
                &out_dir,
                &module,
                &summary.warp_dir,
                summary.nvrtc_dir.as_deref(),
                (summary.fast_math, summary.fuse_fp),
                arch,
            )?
        {
            summary.files.push(file);
            summary.files.sort();
            summary.ptx_arch = Some(arch);
        }

        if let Some(file) = crate::rules::write(&out_dir, &module)? {
            summary.files.push(file);
            summary.files.sort();
        }

        let cpu = if self.cpu {
            Some(cpu_library::build(
                &module,
                &out_dir,
                &summary.warp_dir,
                metadata,
            )?)
        } else {
            None
        };
        let cpu_kernels = cpu.as_ref().map(|c| c.kernels.as_slice());

        let embed_path = out_dir.join(format!("{module}.rs"));
        if self.embed {
            let doc = embed_doc(&module, &source.path, &summary, cpu_kernels);
            let text = embed::generate(&module, &out_dir, &summary.files, cpu_kernels, &doc)?;
            std::fs::write(&embed_path, text).map_err(io("writing", &embed_path))?;
        } else if embed_path.is_file() {
            std::fs::remove_file(&embed_path).map_err(io("removing", &embed_path))?;
        }

        let mut sources = source.files.clone();
        sources.extend(summary.sources.iter().cloned());
        let hash = stamp::hash(&key, &sources).ok_or_else(|| BuildError::Source {
            path: source.path.clone(),
            problem: "a source file could not be read after the compile (was it removed?)".into(),
        })?;
        let stamp = Stamp {
            hash,
            archs: summary.archs,
            ptx_arch: summary.ptx_arch,
            block_dim: self.block_dim,
            files: summary.files,
            kernels: summary.kernels,
            sources: summary.sources,
            embed: embed_name,
            cpu_lib: cpu.as_ref().and_then(|c| {
                c.lib
                    .strip_prefix(&out_dir)
                    .ok()
                    .map(|p| p.to_string_lossy().into_owned())
            }),
            cpu_kernels: cpu_kernels
                .unwrap_or_default()
                .iter()
                .filter(|k| k.unsupported.is_none())
                .map(|k| k.key.clone())
                .collect(),
            cpu_unsupported: cpu_kernels
                .unwrap_or_default()
                .iter()
                .filter_map(|k| Some((k.key.clone(), k.unsupported.clone()?)))
                .collect(),
        };
        stamp::write(&out_dir, &stamp)?;
        emit_extra_sources(metadata, &source.files, &stamp.sources);
        log::info!(
            "warp-build: compiled {module} for {:?} into {}",
            stamp.archs,
            out_dir.display()
        );
        Ok(Compiled::from_stamp(out_dir, module, stamp, false))
    }

    /// The compile step without the CPU library: the same Warp compile as
    /// [`WarpModule::compile`] (its script and request, CPU code included,
    /// no PTX; the archs given, whatever `WARP_BUILD_ARCHS` says), into the output directory, then warp-build's CPU entry
    /// points (`wp_<module>.cpu.cpp`) and runtime
    /// (`wp_<module>.cpu_runtime.cpp`) written beside Warp's files, not
    /// compiled. No stamp and Warp's kernel cache in the output directory:
    /// every call compiles. For the differential fuzzer
    /// ([`crate::fuzzing`]).
    pub(crate) fn compile_sources(&self) -> Result<HostSources, BuildError> {
        let source = self.source()?;
        // The archs given, not `WARP_BUILD_ARCHS`: one cubin is enough here.
        let archs = self.archs.clone();
        let module = source.module.clone();
        let out_dir = self.resolved_out_dir(&module)?;
        stamp::remove(&out_dir)?;
        let (exe, origin, chosen) = interpreter(self.python.as_deref());
        let python = python::find(exe, origin, chosen, &out_dir, false)?;
        let mut options = self.clone();
        options.cpu = true;
        // Warp's kernel cache in the output directory (no target directory
        // given), not the target directory's shared one: every call compiles
        // afresh, and many generated modules leave nothing behind there.
        let summary = run_script(&python, &source, &archs, &options, &out_dir, None)?;
        let warp_cpp = out_dir.join(format!("wp_{module}.cpp"));
        let text = std::fs::read_to_string(&warp_cpp).map_err(io("reading", &warp_cpp))?;
        let kernels = crate::cpu_parse::parse(&text).map_err(|problem| BuildError::CpuSource {
            module: module.clone(),
            path: warp_cpp.clone(),
            problem,
        })?;
        let shim = out_dir.join(format!("wp_{module}.cpu.cpp"));
        std::fs::write(&shim, crate::cpu_shim::generate(&module, &text, &kernels))
            .map_err(io("writing", &shim))?;
        let runtime = out_dir.join(format!("wp_{module}.cpu_runtime.cpp"));
        std::fs::write(&runtime, cpu_library::RUNTIME).map_err(io("writing", &runtime))?;
        Ok(HostSources {
            module,
            dir: out_dir,
            warp_dir: summary.warp_dir,
            kernels: kernels
                .into_iter()
                .map(|k| HostKernel {
                    key: k.key,
                    dim: k.dim,
                    fields: k.fields,
                    unsupported: k.unsupported,
                })
                .collect(),
        })
    }

    fn source(&self) -> Result<Source, BuildError> {
        let bad = |problem: String| BuildError::Source {
            path: self.source.clone(),
            problem,
        };
        let path = if self.source.is_absolute() {
            self.source.clone()
        } else {
            std::env::current_dir()
                .map_err(io("reading the current directory for", &self.source))?
                .join(&self.source)
        };
        let path = path.canonicalize().map_err(|e| {
            bad(format!(
                "{e}; give a .py file of Warp kernels or a package directory holding __init__.py"
            ))
        })?;
        let (module, is_package, files) = if path.is_dir() {
            if !path.join("__init__.py").is_file() {
                return Err(bad(
                    "a directory without __init__.py is not a Python package; add one that defines \
                     (or imports) the kernels, or give the .py file"
                        .into(),
                ));
            }
            let mut files = Vec::new();
            py_files(&path, &mut files)?;
            files.sort();
            (file_name(&path), true, files)
        } else if path.extension().is_some_and(|e| e == "py") {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (stem, false, vec![path.clone()])
        } else {
            return Err(bad(
                "not a .py file: give a .py file of Warp kernels or a package directory".into(),
            ));
        };
        let valid = module
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && module
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(bad(format!(
                "{module:?} is not a Python module name (letters, digits and `_`, not starting with \
                 a digit); rename the file or directory"
            )));
        }
        Ok(Source {
            path,
            module,
            is_package,
            files,
        })
    }

    fn resolved_archs(&self) -> Result<Option<Vec<u32>>, BuildError> {
        let mut archs = match std::env::var(ENV_ARCHS) {
            Ok(value) if !value.trim().is_empty() => {
                let parsed: Option<Vec<u32>> = value
                    .split(',')
                    .map(|a| {
                        let a = a.trim();
                        let a = a.strip_prefix("sm_").unwrap_or(a);
                        a.parse().ok()
                    })
                    .collect();
                Some(parsed.ok_or_else(|| BuildError::InvalidEnv {
                    var: ENV_ARCHS,
                    value: value.clone(),
                    allowed: "a comma-separated list of architectures such as `90,80` or `sm_90,sm_80`"
                        .into(),
                })?)
            }
            _ => self.archs.clone(),
        };
        if let Some(list) = &mut archs {
            list.sort_unstable();
            list.dedup();
            if list.is_empty() {
                return Err(BuildError::InvalidOption {
                    param: "archs",
                    value: "[]".into(),
                    allowed: "at least one architecture (such as 90 for sm_90); leave archs unset \
                              for every one Warp supports from sm_75 up"
                        .into(),
                });
            }
        }
        Ok(archs)
    }

    fn resolved_out_dir(&self, module: &str) -> Result<PathBuf, BuildError> {
        let dir = match (&self.out_dir, std::env::var_os("OUT_DIR")) {
            (Some(d), _) => d.clone(),
            (None, Some(o)) => PathBuf::from(o).join("warp").join(module),
            (None, None) => {
                return Err(BuildError::NoOutDir {
                    module: module.to_string(),
                });
            }
        };
        std::fs::create_dir_all(&dir).map_err(io("creating directory", &dir))?;
        dir.canonicalize().map_err(io("resolving", &dir))
    }
}

/// The source, resolved.
#[derive(Debug)]
struct Source {
    /// Absolute path of the file or package directory.
    path: PathBuf,
    module: String,
    is_package: bool,
    /// Every `.py` file of the source (the file, or all in the package).
    files: Vec<PathBuf>,
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Every `.py` file under `dir`, skipping `__pycache__` and hidden directories.
fn py_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), BuildError> {
    for entry in std::fs::read_dir(dir).map_err(io("reading directory", dir))? {
        let entry = entry.map_err(io("reading directory", dir))?;
        let path = entry.path();
        let name = file_name(&path);
        if path.is_dir() {
            if name != "__pycache__" && !name.starts_with('.') {
                py_files(&path, out)?;
            }
        } else if name.ends_with(".py") {
            out.push(path);
        }
    }
    Ok(())
}

/// The interpreter to run and where that choice came from: `explicit`, else
/// `WARP_BUILD_PYTHON`, else `python3`.
/// The flag is whether the user chose it (then the shared Warp install is
/// not used).
fn interpreter(explicit: Option<&Path>) -> (PathBuf, &'static str, bool) {
    match (explicit, std::env::var_os(ENV_PYTHON)) {
        (Some(p), _) => (p.to_path_buf(), "set with WarpModule::python", true),
        (None, Some(p)) if !p.is_empty() => (PathBuf::from(p), "from WARP_BUILD_PYTHON", true),
        _ => (
            PathBuf::from("python3"),
            "the default; set WARP_BUILD_PYTHON to change it",
            false,
        ),
    }
}

/// A Python interpreter that imports Warp 1.19.0 and numpy, found (or
/// provisioned with pip) exactly as [`WarpModule::compile`] finds it: for a
/// build script that runs a Warp script of its own.
///
/// ```no_run
/// // build.rs, in `main`:
/// let out_dir = std::env::var_os("OUT_DIR").unwrap();
/// let python = warp_build::WarpPython::find(&out_dir).unwrap_or_else(|e| panic!("{e}"));
/// let status = python.command().arg("my_script.py").status();
/// ```
#[derive(Debug, Clone)]
pub struct WarpPython {
    python: Python,
}

impl WarpPython {
    /// Finds the interpreter (`WARP_BUILD_PYTHON`, else `python3`) and where
    /// it imports Warp from (`WARP_BUILD_PYTHONPATH`, else its own packages,
    /// else the shared install `<cache>/warp-build/1.19.0-<hash>`, or
    /// `<target>/warp-build/python` as the [crate docs](crate) say, the
    /// target directory found above `out_dir`; installed there with pip on
    /// first use). In a build script it prints
    /// `cargo:rerun-if-env-changed` for the `WARP_BUILD_*` variables it reads.
    ///
    /// # Errors
    ///
    /// As [`WarpModule::compile`] for finding Python: no Python 3.10+, no
    /// Warp 1.19.0 and no pip to install it, pip failing, or no target
    /// directory above `out_dir` to install into (each message says what to
    /// install or set).
    pub fn find(out_dir: impl AsRef<Path>) -> Result<WarpPython, BuildError> {
        let metadata = in_build_script();
        if metadata {
            for var in [ENV_PYTHON, ENV_PYTHONPATH, ENV_CACHE, ENV_CACHE_DIR] {
                crate::cargo_instruction(format_args!("rerun-if-env-changed={var}"));
            }
        }
        let (exe, origin, chosen) = interpreter(None);
        let python = python::find(exe, origin, chosen, out_dir.as_ref(), metadata)?;
        Ok(WarpPython { python })
    }

    /// A command running the interpreter, with `PYTHONPATH` set so that it
    /// imports Warp 1.19.0 (no arguments yet).
    pub fn command(&self) -> std::process::Command {
        self.python.command()
    }

    /// The interpreter's path (as given, or `python3`).
    pub fn exe(&self) -> &Path {
        &self.python.exe
    }

    /// The directory put first on `PYTHONPATH` (`WARP_BUILD_PYTHONPATH`, the
    /// shared install or the target directory's), or `None` when the
    /// interpreter imports Warp from its own packages.
    pub fn pythonpath(&self) -> Option<&Path> {
        self.python.pythonpath.as_deref()
    }
}

fn in_build_script() -> bool {
    ["OUT_DIR", "TARGET", "HOST"]
        .iter()
        .all(|v| std::env::var_os(v).is_some())
}

fn emit_extra_sources(metadata: bool, primary: &[PathBuf], extra: &[PathBuf]) {
    if metadata {
        for f in extra.iter().filter(|f| !primary.contains(f)) {
            crate::cargo_instruction(format_args!("rerun-if-changed={}", f.display()));
        }
    }
}

/// The compile script's summary (see `compile.py`).
#[derive(Debug, Deserialize)]
struct Summary {
    ok: bool,
    #[serde(default)]
    stage: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_type: String,
    #[serde(default)]
    supported_archs: Vec<u32>,
    #[serde(default)]
    block_dim: u32,
    #[serde(default)]
    archs: Vec<u32>,
    #[serde(default)]
    ptx_arch: Option<u32>,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    kernels: Vec<String>,
    #[serde(default)]
    sources: Vec<PathBuf>,
    #[serde(default)]
    warp_dir: PathBuf,
    #[serde(default)]
    nvrtc_dir: Option<PathBuf>,
    #[serde(default)]
    fast_math: bool,
    #[serde(default)]
    fuse_fp: bool,
}

fn run_script(
    python: &Python,
    source: &Source,
    archs: &Option<Vec<u32>>,
    options: &WarpModule,
    out_dir: &Path,
    target: Option<&Path>,
) -> Result<Summary, BuildError> {
    let cache = match target {
        Some(t) => t.join("warp-build").join("kernel-cache"),
        None => out_dir.join(".warp-cache"),
    };
    let exclude: Vec<&Path> = target
        .into_iter()
        .chain(python.pythonpath.as_deref())
        .collect();
    let request = serde_json::json!({
        "source": source.path,
        "module": source.module,
        "archs": archs,
        "block_dim": options.block_dim,
        "cpu": options.cpu,
        "out_dir": out_dir,
        "kernel_cache_dir": cache,
        "exclude": exclude,
        "warp_version": WARP_VERSION,
    });
    log::debug!(
        "warp-build: running {} for {}",
        python.exe.display(),
        source.path.display()
    );
    let out = python
        .command()
        .args(["-B", "-c", SCRIPT])
        .arg(request.to_string())
        .output()
        .map_err(|error| BuildError::PythonNotFound {
            python: python.exe.clone(),
            origin: python.origin,
            error,
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines() {
        log::debug!("warp-build: python: {line}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let script_error = |problem: String| BuildError::Script {
        python: python.exe.clone(),
        module: source.module.clone(),
        status: out.status,
        problem,
        stderr: tail(&out.stderr),
    };
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| script_error("printed no summary".into()))?;
    let summary: Summary = serde_json::from_str(line)
        .map_err(|e| script_error(format!("printed a summary that does not parse ({e})")))?;
    if !summary.ok {
        if summary.stage == "arch" {
            let requested = archs.as_deref().unwrap_or_default();
            return Err(BuildError::UnsupportedArch {
                module: source.module.clone(),
                unsupported: requested
                    .iter()
                    .copied()
                    .filter(|a| !summary.supported_archs.contains(a))
                    .collect(),
                supported: summary.supported_archs,
            });
        }
        return Err(BuildError::Warp {
            module: source.module.clone(),
            source_path: source.path.clone(),
            stage: WarpStage::from_script(&summary.stage),
            error_type: summary.error_type,
            message: summary.error,
        });
    }
    Ok(summary)
}

fn embed_doc(
    module: &str,
    source: &Path,
    summary: &Summary,
    cpu: Option<&[crate::cpu_parse::CpuKernel]>,
) -> String {
    let archs: Vec<String> = summary.archs.iter().map(|a| format!("sm_{a}")).collect();
    let ptx = summary
        .ptx_arch
        .map(|a| format!(" and PTX for sm_{a}"))
        .unwrap_or_default();
    let cpu = match cpu {
        None => "No CPU code (compiled with `cpu(false)`).".to_string(),
        Some(kernels) => {
            let on: Vec<&str> = kernels
                .iter()
                .filter(|k| k.unsupported.is_none())
                .map(|k| k.key.as_str())
                .collect();
            let off: Vec<&str> = kernels
                .iter()
                .filter(|k| k.unsupported.is_some())
                .map(|k| k.key.as_str())
                .collect();
            let mut text = format!(
                "CPU code (Warp's generated C++, linked as `libwpl_{module}.a`) for: {}.",
                if on.is_empty() {
                    "none".to_string()
                } else {
                    on.join(", ")
                }
            );
            if !off.is_empty() {
                text.push_str(&format!(
                    " Not on the CPU (cooperative tile code): {}.",
                    off.join(", ")
                ));
            }
            text
        }
    };
    format!(
        "The Warp module `{module}`, compiled ahead of time by Warp {WARP_VERSION} from `{}`\n\
         (block_dim {}): cubins for {}{ptx}; kernels: {}.\n{cpu}\n\n\
         Load it with `warp_launch::AotModule::from_embedded(&{})`.",
        source.display(),
        summary.block_dim,
        archs.join(", "),
        summary.kernels.join(", "),
        embed::static_name(module),
    )
}

/// What a compile produced: the output directory, the module's name, its
/// files, the generated Rust file, and whether the last compile was reused.
#[derive(Debug, Clone)]
pub struct Compiled {
    dir: PathBuf,
    module: String,
    stamp: Stamp,
    reused: bool,
}

impl Compiled {
    fn from_stamp(dir: PathBuf, module: String, stamp: Stamp, reused: bool) -> Compiled {
        Compiled {
            dir,
            module,
            stamp,
            reused,
        }
    }

    /// The output directory (absolute): what `warp_launch::AotModule::load` reads.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The module's name (the file stem or package directory name).
    pub fn module(&self) -> &str {
        &self.module
    }

    /// Every file of the compile (`wp_<module>.cu`, `.meta`, `.facts.json`,
    /// `.sm<arch>.cubin`, `.sm<arch>.ptx`), as absolute paths, by name.
    pub fn files(&self) -> Vec<PathBuf> {
        self.stamp.files.iter().map(|f| self.dir.join(f)).collect()
    }

    /// The generated `<module>.rs` when embedding.
    pub fn embed_file(&self) -> Option<PathBuf> {
        self.stamp.embed.as_ref().map(|f| self.dir.join(f))
    }

    /// The name of the static in the generated file (`kernels` -> `KERNELS`).
    pub fn static_name(&self) -> String {
        embed::static_name(&self.module)
    }

    /// Whether nothing ran: the stamp matched and the outputs existed.
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// The architectures of the cubins, ascending.
    pub fn archs(&self) -> &[u32] {
        &self.stamp.archs
    }

    /// The architecture of the PTX, when PTX was written.
    pub fn ptx_arch(&self) -> Option<u32> {
        self.stamp.ptx_arch
    }

    /// The block dimension the module was compiled for.
    pub fn block_dim(&self) -> u32 {
        self.stamp.block_dim
    }

    /// The kernels the module defines.
    pub fn kernels(&self) -> &[String] {
        &self.stamp.kernels
    }

    /// Every `.py` file of the user's that the compile read (the source, and
    /// modules beside it that it imported).
    pub fn sources(&self) -> &[PathBuf] {
        &self.stamp.sources
    }

    /// The static library of the module's CPU code
    /// (`<dir>/cpu/libwpl_<module>.a`), when it was compiled for the CPU
    /// ([`WarpModule::cpu`]).
    pub fn cpu_lib(&self) -> Option<PathBuf> {
        self.stamp.cpu_lib.as_ref().map(|f| self.dir.join(f))
    }

    /// The kernels with CPU entry points (empty without CPU code).
    pub fn cpu_kernels(&self) -> &[String] {
        &self.stamp.cpu_kernels
    }

    /// The kernels compiled for the CPU without entry points, each with the
    /// reason (they need Warp's cooperative block runtime: tiles).
    pub fn cpu_unsupported(&self) -> &[(String, String)] {
        &self.stamp.cpu_unsupported
    }
}

/// What [`crate::fuzzing::compile_for_host`] wrote: a module's CPU code
/// with warp-build's entry points.
#[derive(Clone, Debug)]
pub struct HostSources {
    /// The module's name (`wp_<module>.*`).
    pub module: String,
    /// The output directory holding Warp's files and the entry points.
    pub dir: PathBuf,
    /// The imported `warp` package (its `native/` holds Warp's headers).
    pub warp_dir: PathBuf,
    /// Every kernel of Warp's CPU code, in file order.
    pub kernels: Vec<HostKernel>,
}

/// One kernel of Warp's CPU code, as warp-build's entry points see it.
#[derive(Clone, Debug)]
pub struct HostKernel {
    /// The kernel's key: the entry point is
    /// `wpl_<module>__<key>__forward(const void* bounds, void* args, size_t first, size_t last)`.
    pub key: String,
    /// `N` of `wp::launch_bounds_t<N>`.
    pub dim: u32,
    /// The fields of `wp_args_<key>`, in order.
    pub fields: Vec<String>,
    /// Why it has no CPU entry points, or `None`.
    pub unsupported: Option<String>,
}
