//! [`BuildError`]: everything that stops a compile, with what to do about it.

use std::fmt;
use std::path::PathBuf;

use crate::{PIP_REQUIREMENTS, WARP_VERSION};

/// Why [`WarpModule::compile`](crate::WarpModule::compile) failed.
///
/// Every message names the call, the file or setting involved, and what to
/// do (what to install and the exact command, which value is allowed).
#[non_exhaustive]
pub enum BuildError {
    /// A builder option is out of range.
    InvalidOption {
        /// The option (`block_dim`, `archs`).
        param: &'static str,
        /// Its value, as written.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// An environment variable does not parse.
    InvalidEnv {
        /// The variable (`WARP_BUILD_ARCHS`).
        var: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// The source is not a Python file or a package directory with an
    /// `__init__.py`, or its name is not a Python module name.
    Source {
        /// The source as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// No output directory: not running in a build script (no `OUT_DIR`) and
    /// none set with [`WarpModule::out_dir`](crate::WarpModule::out_dir).
    NoOutDir {
        /// The module being compiled.
        module: String,
    },
    /// The Python interpreter could not be started.
    PythonNotFound {
        /// The interpreter that was tried.
        python: PathBuf,
        /// Where its name came from (`WARP_BUILD_PYTHON`, the builder, the default).
        origin: &'static str,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// The interpreter is older than Warp needs.
    PythonTooOld {
        /// The interpreter.
        python: PathBuf,
        /// Its version (`3.8.10`).
        version: String,
    },
    /// Warp 1.19.0 is not importable from `WARP_BUILD_PYTHONPATH` (or, after
    /// installing it, from the install directory).
    WarpNotFound {
        /// The interpreter.
        python: PathBuf,
        /// The directory put on `PYTHONPATH`.
        pythonpath: PathBuf,
        /// The warp-lang version found there, if any.
        found: Option<String>,
        /// Whether numpy was found there.
        numpy: bool,
    },
    /// Warp must be installed but the interpreter has no pip.
    PipMissing {
        /// The interpreter.
        python: PathBuf,
        /// Where Warp would have been installed.
        target: PathBuf,
    },
    /// `pip install` failed.
    PipFailed {
        /// The command that ran.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The end of its output.
        output: String,
    },
    /// Warp must be installed into the target directory (`WARP_BUILD_CACHE=off`,
    /// an interpreter of the user's choosing, or no user cache directory) but
    /// no Cargo target directory was found.
    NoTargetDir {
        /// The output directory the search started from.
        out_dir: PathBuf,
    },
    /// Warp ran and reported an error: the user's module failed to import or
    /// a kernel failed to compile (the message is Warp's), or the wrong Warp
    /// was imported.
    Warp {
        /// The module.
        module: String,
        /// Its source file or package.
        source_path: PathBuf,
        /// What Warp was doing.
        stage: WarpStage,
        /// The Python exception's type (`WarpCodegenError`), when there was one.
        error_type: String,
        /// Warp's message.
        message: String,
    },
    /// The PTX fallback (NVRTC 12.0 compiling Warp's `.cu` to PTX ISA 8.0)
    /// failed.
    PtxFallback {
        /// The module.
        module: String,
        /// What failed: NVRTC 12.0 missing, its log, or the PTX's version.
        message: String,
    },
    /// Warp's NVRTC does not compile for a requested architecture.
    UnsupportedArch {
        /// The module.
        module: String,
        /// The requested architectures Warp does not compile for.
        unsupported: Vec<u32>,
        /// Those it does.
        supported: Vec<u32>,
    },
    /// The compile script ended without the summary it prints.
    Script {
        /// The interpreter.
        python: PathBuf,
        /// The module.
        module: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What went wrong reading its summary.
        problem: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// Reading or writing a file failed.
    Io {
        /// What was being done (`reading`, `creating directory`).
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// Warp's generated CPU code (`wp_<module>.cpp`) is not as Warp
    /// 1.19.0 writes it, so its entry points cannot be generated.
    CpuSource {
        /// The module.
        module: String,
        /// The file.
        path: PathBuf,
        /// What is not as expected.
        problem: String,
    },
    /// No C++ compiler was found for the module's CPU code.
    CpuCompilerMissing {
        /// The module.
        module: String,
        /// The compiler that was tried (as the `cc` crate resolved it: `CXX`,
        /// else the target's default such as `c++`).
        compiler: PathBuf,
        /// The operating system's or the `cc` crate's message.
        problem: String,
    },
    /// The C++ compiler failed on the module's CPU code.
    CpuCompile {
        /// The module.
        module: String,
        /// The compiler.
        compiler: PathBuf,
        /// The file it compiled.
        path: PathBuf,
        /// The `cc` crate's message (the compiler's own messages are printed
        /// above it in the build output).
        problem: String,
    },
    /// The generated embedding code did not parse (a bug in warp-build).
    Codegen {
        /// The module.
        module: String,
        /// The parser's message.
        problem: String,
    },
}

/// What Warp was doing when it failed ([`BuildError::Warp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WarpStage {
    /// Importing the user's module (its Python raised).
    Import,
    /// Compiling the module (code generation or NVRTC).
    Compile,
    /// Checking the imported Warp's version.
    Version,
    /// Checking the files Warp wrote.
    Output,
    /// The compile script itself failed.
    Internal,
}

impl WarpStage {
    /// The stage from the compile script's name for it.
    pub(crate) fn from_script(stage: &str) -> WarpStage {
        match stage {
            "import" => WarpStage::Import,
            "compile" => WarpStage::Compile,
            "version" => WarpStage::Version,
            "output" => WarpStage::Output,
            _ => WarpStage::Internal,
        }
    }
}

impl fmt::Display for WarpStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WarpStage::Import => "importing the module failed",
            WarpStage::Compile => "compiling failed",
            WarpStage::Version => "the wrong Warp version was imported",
            WarpStage::Output => "output files are missing",
            WarpStage::Internal => "the compile script failed",
        })
    }
}

/// The pip command that installs the pinned Warp and numpy into `target`.
pub(crate) fn pip_command(python: &std::path::Path, target: &std::path::Path) -> String {
    format!(
        "{} -m pip install --target {} {}",
        python.display(),
        target.display(),
        PIP_REQUIREMENTS.join(" ")
    )
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const CALL: &str = "warp_build::WarpModule::compile";
        match self {
            BuildError::InvalidOption {
                param,
                value,
                allowed,
            } => write!(f, "{CALL}: {param} = {value} is not allowed: {allowed}"),
            BuildError::InvalidEnv {
                var,
                value,
                allowed,
            } => write!(
                f,
                "{CALL}: environment variable {var}={value:?} does not parse: {allowed}; fix or unset it"
            ),
            BuildError::Source { path, problem } => {
                write!(f, "{CALL}: source {}: {problem}", path.display())
            }
            BuildError::NoOutDir { module } => write!(
                f,
                "{CALL}: module {module:?}: no output directory: OUT_DIR is not set (not running in a \
                 build script); set one with WarpModule::out_dir(DIR)"
            ),
            BuildError::PythonNotFound {
                python,
                origin,
                error,
            } => write!(
                f,
                "{CALL}: cannot run the Python interpreter {} ({origin}): {error}. Warp {WARP_VERSION} needs \
                 Python 3.10 or newer with pip: install it (Debian/Ubuntu: `apt-get install python3 python3-pip`) \
                 or set WARP_BUILD_PYTHON to an interpreter",
                python.display()
            ),
            BuildError::PythonTooOld { python, version } => write!(
                f,
                "{CALL}: {} is Python {version}, but warp-lang {WARP_VERSION} needs Python 3.10 or newer: \
                 install a newer Python and set WARP_BUILD_PYTHON to it",
                python.display()
            ),
            BuildError::WarpNotFound {
                python,
                pythonpath,
                found,
                numpy,
            } => {
                let what = match (found, numpy) {
                    (Some(v), _) if v != WARP_VERSION => format!("warp-lang {v}"),
                    (Some(_), false) => "warp-lang but no numpy".to_string(),
                    _ => "no warp-lang".to_string(),
                };
                write!(
                    f,
                    "{CALL}: {} with PYTHONPATH={} finds {what}, but warp-build needs warp-lang {WARP_VERSION} \
                     and numpy: install them there with `{}`, or unset WARP_BUILD_PYTHONPATH to let warp-build \
                     install them (once per user, see the warp-build docs)",
                    python.display(),
                    pythonpath.display(),
                    pip_command(python, pythonpath)
                )
            }
            BuildError::PipMissing { python, target } => write!(
                f,
                "{CALL}: warp-lang {WARP_VERSION} is not installed for {} and it has no pip to install it: \
                 install pip (Debian/Ubuntu: `apt-get install python3-pip`, or `{} -m ensurepip`), then \
                 warp-build runs `{}`; or install Warp elsewhere and set WARP_BUILD_PYTHONPATH to that directory",
                python.display(),
                python.display(),
                pip_command(python, target)
            ),
            BuildError::PipFailed {
                command,
                status,
                output,
            } => write!(
                f,
                "{CALL}: installing Warp failed: `{command}` exited with {status}; check the network and \
                 run the command by hand, or install {} elsewhere and set WARP_BUILD_PYTHONPATH to that \
                 directory. pip said:\n{output}",
                PIP_REQUIREMENTS.join(" ")
            ),
            BuildError::NoTargetDir { out_dir } => write!(
                f,
                "{CALL}: warp-lang {WARP_VERSION} must be installed into the target directory (WARP_BUILD_CACHE=off, \
                 an interpreter of your own, or no user cache directory) but no Cargo target directory was found \
                 (CARGO_TARGET_DIR is unset and no directory above {} holds CACHEDIR.TAG): set \
                 CARGO_TARGET_DIR or WARP_BUILD_CACHE_DIR, or install Warp with `python3 -m pip install --target DIR {}` and set \
                 WARP_BUILD_PYTHONPATH=DIR",
                out_dir.display(),
                PIP_REQUIREMENTS.join(" ")
            ),
            BuildError::Warp {
                module,
                source_path,
                stage,
                error_type,
                message,
            } => {
                write!(
                    f,
                    "{CALL}: Warp module {module:?} ({}): {stage}",
                    source_path.display()
                )?;
                if !error_type.is_empty() {
                    write!(f, " ({error_type})")?;
                }
                write!(f, ": {message}")
            }
            BuildError::PtxFallback { module, message } => write!(
                f,
                "{CALL}: Warp module {module:?}: the PTX fallback (NVRTC 12.0, PTX ISA {}) failed: {message}; \
                 install {} beside warp-lang, or turn the fallback off with WarpModule::ptx(false) \
                 (then only devices with a matching cubin run the module)",
                crate::PTX_ISA,
                crate::NVRTC_WHEEL
            ),
            BuildError::UnsupportedArch {
                module,
                unsupported,
                supported,
            } => {
                let sm: Vec<String> = unsupported.iter().map(|a| format!("sm_{a}")).collect();
                let ok: Vec<String> = supported.iter().map(u32::to_string).collect();
                write!(
                    f,
                    "{CALL}: Warp module {module:?}: Warp {WARP_VERSION}'s NVRTC does not compile for {}; \
                     it compiles for {} (choose among them with WarpModule::archs or WARP_BUILD_ARCHS)",
                    sm.join(", "),
                    ok.join(",")
                )
            }
            BuildError::Script {
                python,
                module,
                status,
                problem,
                stderr,
            } => write!(
                f,
                "{CALL}: Warp module {module:?}: the compile script run by {} exited with {status} and \
                 {problem}; its standard error ends with:\n{stderr}",
                python.display()
            ),
            BuildError::Io {
                action,
                path,
                error,
            } => write!(f, "{CALL}: {action} {}: {error}", path.display()),
            BuildError::CpuSource {
                module,
                path,
                problem,
            } => write!(
                f,
                "{CALL}: Warp module {module:?}: Warp's CPU code {} is not as Warp {WARP_VERSION} writes it \
                 ({problem}); compile without CPU code with WarpModule::cpu(false), and please report it",
                path.display()
            ),
            BuildError::CpuCompilerMissing {
                module,
                compiler,
                problem,
            } => write!(
                f,
                "{CALL}: Warp module {module:?}: no C++ compiler for its CPU code: {} could not be run \
                 ({problem}). Install a C++17 compiler, g++ 9 or newer or clang 10 or newer \
                 (Debian/Ubuntu: `apt-get install g++`), or set CXX to one; or compile without CPU code \
                 with WarpModule::cpu(false)",
                compiler.display()
            ),
            BuildError::CpuCompile {
                module,
                compiler,
                path,
                problem,
            } => write!(
                f,
                "{CALL}: Warp module {module:?}: {} failed to compile its CPU code {} ({problem}); the \
                 compiler's messages are above in the build output. Warp's CPU code needs a C++17 compiler, \
                 g++ 9 or newer or clang 10 or newer (set CXX to one); or compile without CPU code with \
                 WarpModule::cpu(false)",
                compiler.display(),
                path.display()
            ),
            BuildError::Codegen { module, problem } => write!(
                f,
                "{CALL}: Warp module {module:?}: the generated embedding code does not parse ({problem}); \
                 this is a warp-build bug, please report it"
            ),
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::PythonNotFound { error, .. } | BuildError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// An I/O error on `path` while doing `action`.
pub(crate) fn io(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> BuildError {
    let path = path.into();
    move |error| BuildError::Io {
        action,
        path,
        error,
    }
}

#[cfg(test)]
mod tests {
    use crate::WarpModule;

    /// `Debug` prints the message, as `Display` does, for an error of a
    /// real compile: what a build script's `.unwrap()` and
    /// `fn main() -> Result<(), BuildError>` show.
    #[test]
    fn debug_is_the_message() {
        let dir = std::env::temp_dir();
        let e = WarpModule::new("no/such/dir/kernels.py")
            .out_dir(&dir)
            .cargo_metadata(false)
            .compile()
            .unwrap_err();
        assert_eq!(format!("{e:?}"), format!("{e}"));
        assert!(
            format!("{e:?}")
                .starts_with("warp_build::WarpModule::compile: source no/such/dir/kernels.py:"),
            "{e:?}"
        );
        assert!(!format!("{e:?}").contains("Source {"), "{e:?}");
    }
}
