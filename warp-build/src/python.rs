//! Finding a Python that imports Warp 1.19.0, installing it when none does,
//! and running the compile script.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::{BuildError, io, pip_command};
use crate::{ENV_CACHE, ENV_CACHE_DIR, ENV_PYTHONPATH, PIP_REQUIREMENTS, WARP_VERSION};

/// Reports the interpreter's version and which warp-lang and numpy its
/// `sys.path` finds first, without importing them (fast).
const PROBE: &str = r#"
import importlib.metadata as m, importlib.util as u, json, sys, sysconfig
r = {"python": ".".join(map(str, sys.version_info[:3])), "warp": None, "numpy": None,
     "pip": u.find_spec("pip") is not None,
     "abi": sys.implementation.cache_tag + getattr(sys, "abiflags", "") + "-" + sysconfig.get_platform()}
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
    /// What the wheels pip picks depend on: the implementation and version
    /// (`cpython-312`), ABI flags and platform (`linux-x86_64`).
    #[serde(default)]
    abi: String,
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

/// The settings that decide where Warp is installed, read once from the
/// environment ([`CacheEnv::from_env`]) or given as values (tests).
#[derive(Debug, Clone, Default)]
pub(crate) struct CacheEnv {
    /// `WARP_BUILD_CACHE`: `off` installs into each target directory.
    pub cache: Option<OsString>,
    /// `WARP_BUILD_CACHE_DIR`: the directory of the shared installs.
    pub cache_dir: Option<OsString>,
    /// Whether the interpreter was chosen by the user (`WARP_BUILD_PYTHON`
    /// or `WarpModule::python`): its Warp is its own business, so the shared
    /// cache is not used.
    pub python_chosen: bool,
    /// The user's cache directory (`dirs::cache_dir()`: `$XDG_CACHE_HOME`,
    /// else `$HOME/.cache` on Linux, `~/Library/Caches` on macOS, the local
    /// application data folder on Windows).
    pub user_cache: Option<PathBuf>,
}

impl CacheEnv {
    /// The settings of this process.
    pub fn from_env(python_chosen: bool) -> CacheEnv {
        CacheEnv {
            cache: std::env::var_os(ENV_CACHE),
            cache_dir: std::env::var_os(ENV_CACHE_DIR),
            python_chosen,
            user_cache: dirs::cache_dir(),
        }
    }
}

/// Where warp-build installs Warp when the interpreter does not import it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// The install shared by every crate and target directory of this user:
    /// `<cache>/1.19.0-<hash>`.
    Shared(PathBuf),
    /// `<target>/warp-build/python`, removed by `cargo clean`; the reason
    /// the shared install is not used.
    Target(&'static str),
}

/// `1.19.0-<hash>`: the name of a shared install, pinned by the Warp version
/// and a hash of the exact pip requirements and of what the wheels depend
/// on (`abi`: Python implementation and version, ABI flags, platform).
pub(crate) fn install_name(abi: &str) -> String {
    let mut hasher = Sha256::new();
    for requirement in PIP_REQUIREMENTS {
        hasher.update(requirement.as_bytes());
        hasher.update(b"\n");
    }
    hasher.update(abi.as_bytes());
    let hash: String = hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{WARP_VERSION}-{hash}")
}

/// Chooses where Warp is installed: `WARP_BUILD_CACHE=off` or an interpreter
/// of the user's own choosing put it in the target directory; else
/// `WARP_BUILD_CACHE_DIR/<name>`, else `<user cache>/warp-build/<name>`
/// (the target directory when the user has no cache directory).
pub(crate) fn choose_place(env: &CacheEnv, name: &str) -> Result<Place, BuildError> {
    if let Some(value) = env.cache.as_deref().filter(|v| !v.is_empty()) {
        if value.eq_ignore_ascii_case("off") {
            return Ok(Place::Target("WARP_BUILD_CACHE=off"));
        }
        return Err(BuildError::InvalidEnv {
            var: ENV_CACHE,
            value: value.to_string_lossy().into_owned(),
            allowed: "`off` installs Warp into each target directory; unset, it is installed \
                      once per user (into WARP_BUILD_CACHE_DIR or the user's cache directory)"
                .into(),
        });
    }
    if env.python_chosen {
        return Ok(Place::Target(
            "the interpreter is your own (WARP_BUILD_PYTHON or WarpModule::python)",
        ));
    }
    if let Some(dir) = env.cache_dir.as_deref().filter(|v| !v.is_empty()) {
        let dir = Path::new(dir);
        if !dir.is_absolute() {
            return Err(BuildError::InvalidEnv {
                var: ENV_CACHE_DIR,
                value: dir.display().to_string(),
                allowed: "an absolute directory (a build script runs in its package's directory)"
                    .into(),
            });
        }
        return Ok(Place::Shared(dir.join(name)));
    }
    match &env.user_cache {
        Some(cache) if cache.is_absolute() => {
            Ok(Place::Shared(cache.join("warp-build").join(name)))
        }
        _ => Ok(Place::Target(
            "the user has no cache directory (no HOME); set WARP_BUILD_CACHE_DIR",
        )),
    }
}

/// Finds an interpreter that imports Warp 1.19.0 and numpy: with
/// `WARP_BUILD_PYTHONPATH` when set (it must hold them), else as it is,
/// else with the install [`choose_place`] picks, installing it there with
/// pip once.
pub(crate) fn find(
    exe: PathBuf,
    origin: &'static str,
    python_chosen: bool,
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
    let (install, once) = match choose_place(
        &CacheEnv::from_env(python_chosen),
        &install_name(&ambient.abi),
    )? {
        Place::Shared(dir) => (dir, "once per user and machine".to_string()),
        Place::Target(why) => {
            let Some(target) = target_dir(out_dir) else {
                return Err(BuildError::NoTargetDir {
                    out_dir: out_dir.to_path_buf(),
                });
            };
            (
                target.join("warp-build").join("python"),
                format!("once per target directory: {why}"),
            )
        }
    };
    let mut complete = |dir: &Path| -> Result<bool, BuildError> {
        if !dir.is_dir() {
            return Ok(false);
        }
        let mut with = python.clone();
        with.pythonpath = Some(dir.to_path_buf());
        Ok(with.probe()?.has_warp())
    };
    if !ambient.pip && !complete(&install)? {
        return Err(BuildError::PipMissing {
            python: python.exe.clone(),
            target: install,
        });
    }
    let mut run_pip = |staging: &Path| pip_install(&python, staging, &install);
    let mut say = |line: &str| {
        if cargo_warnings {
            crate::notice::warn_once(line);
        } else {
            log::info!("{line}");
        }
    };
    let installed = install_once(
        &install,
        &warp_note(&once),
        &mut complete,
        &mut run_pip,
        &mut say,
    )?;
    python.pythonpath = Some(install);
    if installed == Installed::Already {
        // `complete` found Warp there.
        return Ok(python);
    }
    let probe = python.probe()?;
    if probe.has_warp() {
        Ok(python)
    } else {
        Err(not_found(&python, &probe))
    }
}

/// What an install is, for the line [`install_once`] says about it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InstallNote<'a> {
    /// What is installed (`Warp 1.19.0, numpy and NVRTC 12.0`).
    pub label: &'a str,
    /// Roughly how big and how long (`about 525 MB, about a minute`).
    pub size: &'a str,
    /// How often (`once per user and machine`).
    pub once: &'a str,
}

/// The note of warp-build's Warp install, `once` as [`choose_place`] decided.
fn warp_note(once: &str) -> InstallNote<'_> {
    InstallNote {
        label: WARP_LABEL,
        size: "about 525 MB, about a minute",
        once,
    }
}

/// What the Warp install holds, for its messages.
const WARP_LABEL: &str = "Warp 1.19.0, numpy and NVRTC 12.0";

/// What [`install_once`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Installed {
    /// The install was complete already (or another build completed it while
    /// this one waited for the lock): nothing was said.
    Already,
    /// This call installed it, in this many seconds.
    Now(f64),
}

/// Makes `dir` a complete install, once, however many builds (processes or
/// threads) ask at the same time: when `complete(dir)` is false, it takes
/// the lock file `<dir>.lock`, checks again (another build may have finished
/// while this one waited), removes a broken `dir` and stale staging
/// directories, runs `install` into `<dir>.partial-<pid>-<n>` and renames
/// that to `dir`. A `dir` therefore exists only complete. `say` gets one
/// line when the install is done (what, where, how long), and nothing when
/// nothing is installed.
pub(crate) fn install_once(
    dir: &Path,
    what: &InstallNote<'_>,
    complete: &mut dyn FnMut(&Path) -> Result<bool, BuildError>,
    install: &mut dyn FnMut(&Path) -> Result<(), BuildError>,
    say: &mut dyn FnMut(&str),
) -> Result<Installed, BuildError> {
    if complete(dir)? {
        return Ok(Installed::Already);
    }
    let (parent, name) = match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(name)) => (parent, name.to_string_lossy().into_owned()),
        _ => {
            return Err(BuildError::Io {
                action: "installing into",
                path: dir.to_path_buf(),
                error: std::io::Error::other("not a directory path with a parent and a name"),
            });
        }
    };
    std::fs::create_dir_all(parent).map_err(io("creating directory", parent))?;
    let lock_path = parent.join(format!("{name}.lock"));
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io("opening the lock file", &lock_path))?;
    log::debug!("warp-build: waiting for the lock {}", lock_path.display());
    // fs4's lock (flock / LockFileEx), named in full: std's inherent
    // `File::lock` needs Rust 1.89. Released when `lock` is dropped.
    fs4::FileExt::lock(&lock).map_err(io("locking", &lock_path))?;
    if complete(dir)? {
        return Ok(Installed::Already);
    }
    if dir.exists() {
        log::info!(
            "warp-build: {} does not hold {}; reinstalling",
            dir.display(),
            what.label
        );
        std::fs::remove_dir_all(dir).map_err(io("removing", dir))?;
    }
    // Under the lock no other build stages: any staging directory left is
    // from a build that was killed.
    let prefix = format!("{name}.partial-");
    if let Ok(entries) = std::fs::read_dir(parent) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    static STAGING: AtomicUsize = AtomicUsize::new(0);
    let staging = parent.join(format!(
        "{prefix}{}-{}",
        std::process::id(),
        STAGING.fetch_add(1, Ordering::Relaxed)
    ));
    // Cargo shows a build script's warnings only when it ends: the line
    // before the install is for the log, the one after it for the user.
    log::info!(
        "warp-build: installing {} into {} ({}, {})",
        what.label,
        dir.display(),
        what.size,
        what.once
    );
    let start = Instant::now();
    let installed = install(&staging).and_then(|()| {
        std::fs::rename(&staging, dir).map_err(io("moving the install into place at", dir))
    });
    if let Err(error) = installed {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(error);
    }
    let seconds = start.elapsed().as_secs_f64();
    say(&format!(
        "warp-build: installed {} into {} in {seconds:.0} s ({}, {}); later builds reuse it",
        what.label,
        dir.display(),
        what.size,
        what.once
    ));
    drop(lock);
    Ok(Installed::Now(seconds))
}

fn not_found(python: &Python, probe: &Probe) -> BuildError {
    BuildError::WarpNotFound {
        python: python.exe.clone(),
        pythonpath: python.pythonpath.clone().unwrap_or_default(),
        found: probe.warp.clone(),
        numpy: probe.numpy.is_some(),
    }
}

/// `python -m pip install --target <staging> warp-lang==1.19.0 numpy==2.2.6
/// nvidia-cuda-nvrtc-cu12==12.0.76`
/// (the command a failure names has `install`, where it ends up).
fn pip_install(python: &Python, staging: &Path, install: &Path) -> Result<(), BuildError> {
    pip_install_into(
        python,
        staging,
        pip_command(&python.exe, install),
        PIP_REQUIREMENTS,
    )
}

/// `python -m pip install --target <staging> <requirements>`; on failure,
/// [`BuildError::PipFailed`] naming `command` (the same install, as a user
/// would run it).
pub(crate) fn pip_install_into(
    python: &Python,
    staging: &Path,
    command: String,
    requirements: &[&str],
) -> Result<(), BuildError> {
    log::info!("warp-build: running {command} (into {})", staging.display());
    let mut cmd = Command::new(&python.exe);
    cmd.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "--target",
    ])
    .arg(staging)
    .args(requirements);
    let out: Output = cmd.output().map_err(|error| BuildError::PythonNotFound {
        python: python.exe.clone(),
        origin: python.origin,
        error,
    })?;
    if !out.status.success() {
        let mut output = tail(&out.stdout);
        output.push('\n');
        output.push_str(&tail(&out.stderr));
        return Err(BuildError::PipFailed {
            command,
            status: out.status,
            output: output.trim().to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier, Mutex};

    fn env(
        cache: Option<&str>,
        cache_dir: Option<&str>,
        chosen: bool,
        user: Option<&str>,
    ) -> CacheEnv {
        CacheEnv {
            cache: cache.map(OsString::from),
            cache_dir: cache_dir.map(OsString::from),
            python_chosen: chosen,
            user_cache: user.map(PathBuf::from),
        }
    }

    #[test]
    fn the_shared_install_is_in_the_user_cache_by_default() {
        let name = install_name("cpython-312-linux-x86_64");
        assert_eq!(
            choose_place(&env(None, None, false, Some("/home/u/.cache")), &name).unwrap(),
            Place::Shared(PathBuf::from("/home/u/.cache/warp-build").join(&name))
        );
        // Empty values count as unset.
        assert_eq!(
            choose_place(&env(Some(""), Some(""), false, Some("/c")), &name).unwrap(),
            Place::Shared(PathBuf::from("/c/warp-build").join(&name))
        );
    }

    #[test]
    fn the_cache_dir_variable_replaces_the_user_cache() {
        let name = install_name("abi");
        assert_eq!(
            choose_place(
                &env(None, Some("/ci/warp"), false, Some("/home/u/.cache")),
                &name
            )
            .unwrap(),
            Place::Shared(PathBuf::from("/ci/warp").join(&name))
        );
        let err = choose_place(&env(None, Some("rel/dir"), false, None), &name).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("WARP_BUILD_CACHE_DIR=\"rel/dir\"") && msg.contains("absolute"),
            "{msg}"
        );
    }

    #[test]
    fn off_or_a_chosen_python_installs_into_the_target_directory() {
        let name = install_name("abi");
        for off in ["off", "OFF"] {
            assert_eq!(
                choose_place(&env(Some(off), Some("/ci/warp"), false, Some("/c")), &name).unwrap(),
                Place::Target("WARP_BUILD_CACHE=off")
            );
        }
        assert!(matches!(
            choose_place(&env(None, Some("/ci/warp"), true, Some("/c")), &name).unwrap(),
            Place::Target(why) if why.contains("WARP_BUILD_PYTHON")
        ));
        // No user cache directory (no HOME): the target directory.
        assert!(matches!(
            choose_place(&env(None, None, false, None), &name).unwrap(),
            Place::Target(why) if why.contains("WARP_BUILD_CACHE_DIR")
        ));
        let msg = choose_place(&env(Some("on"), None, false, Some("/c")), &name)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("WARP_BUILD_CACHE=\"on\"") && msg.contains("`off`"),
            "{msg}"
        );
    }

    #[test]
    fn the_install_name_pins_the_version_requirements_and_abi() {
        let a = install_name("cpython-312-linux-x86_64");
        assert!(
            a.starts_with("1.19.0-") && a.len() == "1.19.0-".len() + 16,
            "{a}"
        );
        assert_eq!(a, install_name("cpython-312-linux-x86_64"));
        assert_ne!(a, install_name("cpython-313-linux-x86_64"));
        assert_ne!(a, install_name("cpython-312-macosx-14.0-arm64"));
    }

    /// A fake installer: writes two files into the staging directory, slowly.
    fn fake_install(staging: &Path, calls: &Mutex<usize>) -> Result<(), BuildError> {
        *calls.lock().unwrap() += 1;
        std::fs::create_dir_all(staging.join("warp")).unwrap();
        std::fs::write(
            staging.join("warp").join("__init__.py"),
            "version = '1.19.0'",
        )
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        std::fs::write(staging.join("numpy.txt"), "2.2.6").unwrap();
        Ok(())
    }

    fn fake_complete(dir: &Path) -> Result<bool, BuildError> {
        Ok(dir.join("warp").join("__init__.py").is_file() && dir.join("numpy.txt").is_file())
    }

    #[test]
    fn two_builds_racing_end_with_one_complete_install() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("cache").join("1.19.0-abc");
        let calls = Arc::new(Mutex::new(0usize));
        let start = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (dir, calls, start) = (dir.clone(), calls.clone(), start.clone());
                std::thread::spawn(move || {
                    let mut said = Vec::new();
                    start.wait();
                    let outcome = install_once(
                        &dir,
                        &warp_note("once per user and machine"),
                        &mut fake_complete,
                        &mut |staging: &Path| fake_install(staging, &calls),
                        &mut |line: &str| said.push(line.to_string()),
                    );
                    (outcome.map_err(|e| e.to_string()), said)
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(
            *calls.lock().unwrap(),
            1,
            "one build installed, the other waited"
        );
        let installs = results
            .iter()
            .filter(|(r, _)| matches!(r, Ok(Installed::Now(_))))
            .count();
        let reuses = results
            .iter()
            .filter(|(r, _)| matches!(r, Ok(Installed::Already)))
            .count();
        assert_eq!((installs, reuses), (1, 1), "{results:?}");
        assert!(fake_complete(&dir).unwrap());
        // Only the install and its lock file are left: no staging directory.
        let mut left: Vec<String> = std::fs::read_dir(dir.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["1.19.0-abc", "1.19.0-abc.lock"]);
        // The one that installed said so once; the one that waited, nothing.
        let mut said: Vec<usize> = results.iter().map(|(_, s)| s.len()).collect();
        said.sort();
        assert_eq!(said, [0, 1]);
    }

    #[test]
    fn the_first_install_says_what_and_how_long_and_later_builds_say_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("1.19.0-abc");
        let calls = Mutex::new(0usize);
        let mut first = Vec::new();
        let outcome = install_once(
            &dir,
            &warp_note("once per user and machine"),
            &mut fake_complete,
            &mut |staging: &Path| fake_install(staging, &calls),
            &mut |line: &str| first.push(line.to_string()),
        )
        .unwrap();
        assert!(
            matches!(outcome, Installed::Now(s) if s >= 0.2),
            "{outcome:?}"
        );
        // One line, after the install: Cargo shows a build script's
        // warnings only when it ends, so a line before would add nothing.
        assert_eq!(first.len(), 1, "{first:?}");
        let shown = dir.display().to_string();
        assert!(
            first[0].contains("installed Warp 1.19.0, numpy and NVRTC 12.0 into")
                && first[0].contains(&shown)
                && first[0].contains("525 MB")
                && first[0].contains("once per user and machine")
                && first[0].contains(" s (")
                && first[0].ends_with("later builds reuse it"),
            "{}",
            first[0]
        );
        let mut second = Vec::new();
        let outcome = install_once(
            &dir,
            &warp_note("once per user and machine"),
            &mut fake_complete,
            &mut |_: &Path| panic!("a second build must not install"),
            &mut |line: &str| second.push(line.to_string()),
        )
        .unwrap();
        assert_eq!(outcome, Installed::Already);
        assert!(second.is_empty(), "{second:?}");
        assert_eq!(*calls.lock().unwrap(), 1);
    }

    #[test]
    fn a_broken_install_and_stale_staging_are_replaced_and_a_failed_one_leaves_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("1.19.0-abc");
        // A half-written install (not by install_once) and a killed build's staging.
        std::fs::create_dir_all(dir.join("warp")).unwrap();
        std::fs::create_dir_all(root.path().join("1.19.0-abc.partial-1-0")).unwrap();
        let failing = install_once(
            &dir,
            &warp_note("once"),
            &mut fake_complete,
            &mut |staging: &Path| {
                std::fs::create_dir_all(staging).unwrap();
                Err(BuildError::Io {
                    action: "testing",
                    path: staging.to_path_buf(),
                    error: std::io::Error::other("pip failed"),
                })
            },
            &mut |_: &str| {},
        );
        assert!(failing.is_err());
        let left: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["1.19.0-abc.lock"], "no broken install, no staging");
        let calls = Mutex::new(0usize);
        let outcome = install_once(
            &dir,
            &warp_note("once"),
            &mut fake_complete,
            &mut |staging: &Path| fake_install(staging, &calls),
            &mut |_: &str| {},
        )
        .unwrap();
        assert!(matches!(outcome, Installed::Now(_)));
        assert!(fake_complete(&dir).unwrap());
    }
}
