//! Finding a Python that imports Warp 1.19.0, installing it when none does,
//! and running the compile script.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;

use crate::error::{BuildError, io, pip_command};
use crate::{ENV_PYTHONPATH, PIP_REQUIREMENTS, WARP_VERSION};

/// Reports the interpreter's version and which warp-lang and numpy its
/// `sys.path` finds first, without importing them (fast).
const PROBE: &str = r#"
import importlib.metadata as m, importlib.util as u, json, sys
r = {"python": ".".join(map(str, sys.version_info[:3])), "warp": None, "numpy": None,
     "pip": u.find_spec("pip") is not None}
for key, dist in (("warp", "warp-lang"), ("numpy", "numpy")):
    try:
        r[key] = m.version(dist)
    except Exception:
        pass
print(json.dumps(r))
"#;

#[derive(Debug, Deserialize)]
struct Probe {
    python: String,
    warp: Option<String>,
    numpy: Option<String>,
    pip: bool,
}

impl Probe {
    fn has_warp(&self) -> bool {
        self.warp.as_deref() == Some(WARP_VERSION) && self.numpy.is_some()
    }
}

/// An interpreter, and the directory to put first on `PYTHONPATH` (none when
/// the interpreter finds Warp by itself).
#[derive(Debug, Clone)]
pub(crate) struct Python {
    pub exe: PathBuf,
    pub origin: &'static str,
    pub pythonpath: Option<PathBuf>,
}

impl Python {
    /// A command running the interpreter with `PYTHONPATH` set.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.exe);
        if let Some(dir) = &self.pythonpath {
            // Ours first, then whatever PYTHONPATH already held.
            let mut paths = vec![dir.clone()];
            if let Some(old) = std::env::var_os("PYTHONPATH") {
                paths.extend(std::env::split_paths(&old));
            }
            let value =
                std::env::join_paths(&paths).unwrap_or_else(|_| OsString::from(dir.as_os_str()));
            cmd.env("PYTHONPATH", value);
        }
        cmd
    }

    fn probe(&self) -> Result<Probe, BuildError> {
        let out = self
            .command()
            .args(["-B", "-c", PROBE])
            .output()
            .map_err(|error| BuildError::PythonNotFound {
                python: self.exe.clone(),
                origin: self.origin,
                error,
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let probe: Probe = text
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| BuildError::Script {
                python: self.exe.clone(),
                module: String::new(),
                status: out.status,
                problem: "did not report its version (is it Python 3?)".into(),
                stderr: tail(&out.stderr),
            })?;
        let mut parts = probe
            .python
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if (major, minor) < (3, 10) {
            return Err(BuildError::PythonTooOld {
                python: self.exe.clone(),
                version: probe.python,
            });
        }
        Ok(probe)
    }
}

/// The last 40 lines of a process's output, as text.
pub(crate) fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The Cargo target directory: `CARGO_TARGET_DIR` when absolute, else the
/// first directory holding `CACHEDIR.TAG` above `OUT_DIR`, above `out_dir`,
/// or above the running executable.
pub(crate) fn target_dir(out_dir: &Path) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Some(dir);
    }
    let starts = [
        std::env::var_os("OUT_DIR").map(PathBuf::from),
        Some(out_dir.to_path_buf()),
        std::env::current_exe().ok(),
    ];
    starts.into_iter().flatten().find_map(|start| {
        start
            .ancestors()
            .find(|d| d.join("CACHEDIR.TAG").is_file())
            .map(Path::to_path_buf)
    })
}

/// Finds an interpreter that imports Warp 1.19.0 and numpy: with
/// `WARP_BUILD_PYTHONPATH` when set (it must hold them), else as it is,
/// else with `<target>/warp-build/python`, installing them there with pip
/// once.
pub(crate) fn find(
    exe: PathBuf,
    origin: &'static str,
    out_dir: &Path,
    cargo_warnings: bool,
) -> Result<Python, BuildError> {
    let mut python = Python {
        exe,
        origin,
        pythonpath: None,
    };
    if let Some(dir) = std::env::var_os(ENV_PYTHONPATH).filter(|v| !v.is_empty()) {
        python.pythonpath = Some(PathBuf::from(dir));
        let probe = python.probe()?;
        if probe.has_warp() {
            return Ok(python);
        }
        return Err(not_found(&python, &probe));
    }
    let ambient = python.probe()?;
    if ambient.has_warp() {
        log::debug!(
            "warp-build: {} imports warp-lang {WARP_VERSION}",
            python.exe.display()
        );
        return Ok(python);
    }
    let Some(target) = target_dir(out_dir) else {
        return Err(BuildError::NoTargetDir {
            out_dir: out_dir.to_path_buf(),
        });
    };
    let install = target.join("warp-build").join("python");
    python.pythonpath = Some(install.clone());
    if install.is_dir() {
        let probe = python.probe()?;
        if probe.has_warp() {
            return Ok(python);
        }
        log::info!(
            "warp-build: {} does not hold warp-lang {WARP_VERSION} and numpy; reinstalling",
            install.display()
        );
        std::fs::remove_dir_all(&install).map_err(io("removing", &install))?;
    }
    if !ambient.pip {
        return Err(BuildError::PipMissing {
            python: python.exe.clone(),
            target: install,
        });
    }
    pip_install(&python, &install, cargo_warnings)?;
    let probe = python.probe()?;
    if probe.has_warp() {
        Ok(python)
    } else {
        Err(not_found(&python, &probe))
    }
}

fn not_found(python: &Python, probe: &Probe) -> BuildError {
    BuildError::WarpNotFound {
        python: python.exe.clone(),
        pythonpath: python.pythonpath.clone().unwrap_or_default(),
        found: probe.warp.clone(),
        numpy: probe.numpy.is_some(),
    }
}

/// `python -m pip install --target <install> warp-lang==1.19.0 numpy==2.2.6`,
/// into a directory beside `install` that is renamed to it when complete
/// (two builds installing at once do not see each other's half-done work).
fn pip_install(python: &Python, install: &Path, cargo_warnings: bool) -> Result<(), BuildError> {
    let parent = install.parent().unwrap_or(install);
    std::fs::create_dir_all(parent).map_err(io("creating directory", parent))?;
    let staging = parent.join(format!("python.partial-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io("removing", &staging))?;
    }
    let command = pip_command(&python.exe, install);
    let message = format!("warp-build: installing Warp for the kernel compile step: {command}");
    log::info!("{message}");
    if cargo_warnings {
        crate::cargo_instruction(format_args!("warning={message}"));
    }
    let mut cmd = Command::new(&python.exe);
    cmd.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "--target",
    ])
    .arg(&staging)
    .args(PIP_REQUIREMENTS);
    let out: Output = cmd.output().map_err(|error| BuildError::PythonNotFound {
        python: python.exe.clone(),
        origin: python.origin,
        error,
    })?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        let mut output = tail(&out.stdout);
        output.push('\n');
        output.push_str(&tail(&out.stderr));
        return Err(BuildError::PipFailed {
            command,
            status: out.status,
            output: output.trim().to_string(),
        });
    }
    if let Err(error) = std::fs::rename(&staging, install) {
        let _ = std::fs::remove_dir_all(&staging);
        // A build that installed at the same time finished first: use its install.
        if !install.is_dir() {
            return Err(BuildError::Io {
                action: "moving the Warp install into place at",
                path: install.to_path_buf(),
                error,
            });
        }
    }
    Ok(())
}
