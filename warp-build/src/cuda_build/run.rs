//! The compile of a [`CudaBuild`]: options resolved, the stamp checked,
//! NVRTC run per file and architecture, the Rust file written.

use std::path::{Path, PathBuf};

use heck::ToSnakeCase;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::{CudaBuildError, diagnostics, io};
use super::generate;
use super::names::type_name;
use super::nvrtc::Library;
use super::record::{CudaFile, CudaKernel};
use super::signature;
use super::toolkit::{self, Compiler, Toolkit};
use super::wl_kernels;
use super::{CudaBuild, CudaCompiled, MIN_ARCH};

/// The generated Rust file's name.
pub(crate) const RUST_FILE: &str = "kernels.rs";
/// The stamp's name.
const STAMP: &str = "cuda-build.stamp";

/// What the last compile was made from and wrote.
#[derive(Debug, Serialize, Deserialize)]
struct Stamp {
    hash: String,
    files: Vec<CudaFile>,
}

/// A resolved architecture: `90`, `90a`.
fn parse_arch(a: &str) -> Option<(u32, String)> {
    let a = a.trim();
    let a = a.strip_prefix("sm_").unwrap_or(a);
    let (digits, suffix) = match a.strip_suffix('a').or_else(|| a.strip_suffix('f')) {
        Some(d) => (d, &a[d.len()..]),
        None => (a, ""),
    };
    let n: u32 = digits.parse().ok()?;
    (n >= MIN_ARCH && digits.len() >= 2).then(|| (n, format!("{n}{suffix}")))
}

fn archs(build: &CudaBuild) -> Result<Vec<(u32, String)>, CudaBuildError> {
    let (list, from_env) = match std::env::var(crate::ENV_ARCHS) {
        Ok(v) if !v.trim().is_empty() => (v.split(',').map(str::to_string).collect(), true),
        _ if build.archs.is_empty() => (vec!["80".to_string(), "90".to_string()], false),
        _ => (build.archs.clone(), false),
    };
    let mut out = Vec::new();
    for a in &list {
        let parsed = parse_arch(a).ok_or_else(|| {
            let allowed = format!(
                "architectures from sm_{MIN_ARCH} up, as `90`, `sm_90`, `90a` or `100f`, comma-separated"
            );
            if from_env {
                CudaBuildError::InvalidEnv { var: crate::ENV_ARCHS, value: list.join(","), allowed }
            } else {
                CudaBuildError::InvalidOption { param: "archs", value: format!("{a:?}"), allowed }
            }
        })?;
        out.push(parsed);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn out_dir(build: &CudaBuild) -> Result<PathBuf, CudaBuildError> {
    let dir = match (&build.out_dir, std::env::var_os("OUT_DIR")) {
        (Some(d), _) => d.clone(),
        (None, Some(o)) => PathBuf::from(o).join("cuda"),
        (None, None) => {
            return Err(CudaBuildError::InvalidOption {
                param: "out_dir",
                value: "unset, and OUT_DIR is unset (not in a build script)".into(),
                allowed: "a directory: call CudaBuild::out_dir, or run from build.rs".into(),
            });
        }
    };
    std::fs::create_dir_all(&dir).map_err(io("creating directory", &dir))?;
    dir.canonicalize().map_err(io("resolving", &dir))
}

/// Every file under the include directories (the headers a `.cu` may read).
fn include_files(dirs: &[PathBuf], out: &mut Vec<PathBuf>) {
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                include_files(&[p], out);
            } else {
                out.push(p);
            }
        }
    }
}

/// The hash of everything that decides the output.
fn hash(key: &str, files: &[PathBuf]) -> Result<String, CudaBuildError> {
    let mut h = Sha256::new();
    h.update(key.as_bytes());
    for f in files {
        let bytes = std::fs::read(f).map_err(io("reading", f))?;
        h.update(f.to_string_lossy().as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn sources(build: &CudaBuild) -> Result<Vec<PathBuf>, CudaBuildError> {
    build
        .files
        .iter()
        .map(|f| {
            f.canonicalize().map_err(|e| CudaBuildError::Io {
                action: "finding the .cu file",
                path: f.clone(),
                error: e,
            })
        })
        .collect()
}

pub(crate) fn compile(build: &CudaBuild) -> Result<CudaCompiled, CudaBuildError> {
    let archs = archs(build)?;
    let files = sources(build)?;
    let dir = out_dir(build)?;
    let metadata = ["OUT_DIR", "TARGET", "HOST"]
        .iter()
        .all(|v| std::env::var_os(v).is_some());
    let mut watched = files.clone();
    include_files(&build.include_dirs, &mut watched);
    if metadata {
        for v in toolkit::ENV_VARS.iter().chain([&crate::ENV_ARCHS]) {
            crate::cargo_instruction(format_args!("rerun-if-env-changed={v}"));
        }
        for f in files.iter().chain(&build.include_dirs) {
            crate::cargo_instruction(format_args!("rerun-if-changed={}", f.display()));
        }
    }
    let key = format!(
        "cuda-build 1\narchs={archs:?}\ndefines={:?}\noptions={:?}\nnames={:?}\ntypes={:?}\nptx={}\nwheels={:?}\nenv={:?}\ngenerator={}",
        build.defines,
        build.options,
        build.names,
        build.types,
        !build.no_ptx,
        toolkit::CUDA_WHEELS,
        toolkit::ENV_VARS.map(std::env::var_os),
        [
            include_str!("generate.rs"),
            include_str!("signature.rs"),
            include_str!("grid_sync.rs"),
            include_str!("wl_kernels.rs"),
            include_str!("wl_launchers.rs"),
            warp_proof::WARP_LAUNCH_H,
        ]
        .concat(),
    );
    let hash = hash(&key, &watched)?;
    if let Some(old) = read_stamp(&dir)
        && old.hash == hash
        && old
            .files
            .iter()
            .flat_map(|f| &f.images)
            .all(|i| dir.join(i).is_file())
        && dir.join(RUST_FILE).is_file()
    {
        log::debug!("warp-build: CUDA C in {} is up to date", dir.display());
        return Ok(CudaCompiled {
            dir,
            files: old.files,
            reused: true,
        });
    }
    let _ = std::fs::remove_file(dir.join(STAMP));
    let tk = toolkit::find(&dir, &mut |line| crate::notice::warn_once(line))?;
    log::info!("warp-build: compiling CUDA C with {}", tk.origin);
    let mut out = Vec::new();
    for f in &files {
        out.push(compile_file(build, f, &archs, &tk, &dir)?);
    }
    let text = generate::file(&out, &dir)?;
    let rust = dir.join(RUST_FILE);
    std::fs::write(&rust, text).map_err(io("writing", &rust))?;
    let stamp = Stamp { hash, files: out };
    let path = dir.join(STAMP);
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&stamp).unwrap_or_default(),
    )
    .map_err(io("writing", &path))?;
    Ok(CudaCompiled {
        dir,
        files: stamp.files,
        reused: false,
    })
}

fn read_stamp(dir: &Path) -> Option<Stamp> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(STAMP)).ok()?).ok()
}

/// NVRTC's options for `target` with `compiler`'s headers.
fn options(build: &CudaBuild, target: &str, compiler: &Compiler) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture={target}"),
        "--std=c++17".to_string(),
    ];
    for d in build.include_dirs.iter().chain(&compiler.include) {
        o.push(format!("--include-path={}", d.display()));
    }
    for (n, v) in &build.defines {
        o.push(match v {
            Some(v) => format!("--define-macro={n}={v}"),
            None => format!("--define-macro={n}"),
        });
    }
    o.extend(build.options.iter().cloned());
    o
}

fn open(compiler: &Compiler, what: &str) -> Result<Library, CudaBuildError> {
    Library::open(&compiler.nvrtc).map_err(|problem| CudaBuildError::Toolkit {
        problem: format!(
            "the NVRTC {what} at {} does not load: {problem}",
            compiler.nvrtc.display()
        ),
        remedy: format!(
            "delete that install to have it reinstalled, or set {} to a working NVRTC",
            toolkit::ENV_NVRTC
        ),
    })
}

fn nvrtc_name(lib: &Library) -> String {
    format!(
        "NVRTC {}.{}",
        lib.version() / 1000,
        lib.version() % 1000 / 10
    )
}

fn compile_file(
    build: &CudaBuild,
    path: &Path,
    archs: &[(u32, String)],
    tk: &Toolkit,
    dir: &Path,
) -> Result<CudaFile, CudaBuildError> {
    let text = std::fs::read_to_string(path).map_err(io("reading", path))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = path
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A file that includes warp_launch.h is read as warp-launch reads it;
    // NVRTC compiles the reader's re-emission with that header alone.
    let wl = if wl_kernels::includes_warp_launch(&text) {
        Some(wl_kernels::read(path, &text)?)
    } else {
        None
    };
    let header_dir = match &wl {
        Some(_) => Some(write_header(dir)?),
        None => None,
    };
    let compiled_text = wl.as_ref().map_or(text.as_str(), |w| w.emitted.as_str());
    let names = if wl.is_some() {
        Vec::new()
    } else {
        names_of(build, path)
    };
    let nvrtc = open(&tk.cubin, "for cubins")?;
    let display = path.display().to_string();
    let warned = std::cell::RefCell::new(None);
    let run = |lib: &Library, target: &str, compiler: &Compiler, cubin: bool| {
        let opts = match &header_dir {
            Some(h) => wl_options(target, compiler, h),
            None => options(build, target, compiler),
        };
        let out = lib
            .compile(&display, compiled_text, &opts, &names, cubin)
            .map_err(|f| CudaBuildError::Compile {
                file: path.to_path_buf(),
                target: target.into(),
                nvrtc: nvrtc_name(lib).into(),
                result: f.result.into(),
                diagnostics: diagnostics(&f.log),
                log: f.log.into(),
            })?;
        if header_dir.is_some() && warned.borrow().is_none() {
            *warned.borrow_mut() = wl_kernels::first_warning(&out.log);
        }
        Ok(out)
    };
    let mut images = Vec::new();
    let mut lowered = Vec::new();
    for (_, arch) in archs {
        let out = run(&nvrtc, &format!("sm_{arch}"), &tk.cubin, true)?;
        if !out.log.trim().is_empty() {
            log::info!("warp-build: {file_name} for sm_{arch}: {}", out.log.trim());
        }
        lowered = out.lowered;
        let name = format!("{stem}.sm_{arch}.cubin");
        std::fs::write(dir.join(&name), &out.image).map_err(io("writing", dir.join(&name)))?;
        images.push(name);
    }
    let lowest = archs.first().map_or(MIN_ARCH, |a| a.0);
    // The PTX the grid-barrier scan reads: NVRTC 13's, for the lowest arch.
    let scan = run(&nvrtc, &format!("compute_{lowest}"), &tk.cubin, false)?;
    let syncing = super::grid_sync::grid_syncing(&String::from_utf8_lossy(&scan.image));
    let no_ptx = if build.no_ptx {
        Some("the build asked for none (`ptx(false)`)".to_string())
    } else {
        ptx_fallback(tk, &run, &stem, &file_name, lowest, dir, &mut images)?
    };
    let warning = warned.into_inner();
    let (kernels, source) = match wl {
        Some(w) => {
            let source = format!("{stem}.read.cu");
            std::fs::write(dir.join(&source), &text).map_err(io("writing", dir.join(&source)))?;
            (
                wl_launchers_of(path, w, &file_name, warning.as_ref(), &syncing)?,
                Some(source),
            )
        }
        None => (
            kernels(build, path, &text, &names, &lowered, &syncing)?,
            None,
        ),
    };
    Ok(CudaFile {
        name: file_name,
        module: stem.to_snake_case(),
        images,
        kernels,
        no_ptx,
        source,
        warning,
    })
}

/// The directory holding `warp_launch.h` (warp-proof's copy of the
/// generated header, the one warp-launch compiles with at run time).
fn write_header(dir: &Path) -> Result<PathBuf, CudaBuildError> {
    let h = dir.join("warp-launch-include");
    std::fs::create_dir_all(&h).map_err(io("creating directory", &h))?;
    let file = h.join("warp_launch.h");
    if std::fs::read_to_string(&file).ok().as_deref() != Some(warp_proof::WARP_LAUNCH_H) {
        std::fs::write(&file, warp_proof::WARP_LAUNCH_H).map_err(io("writing", &file))?;
    }
    Ok(h)
}

/// NVRTC's options for a `warp_launch.h` file: the target, the header's
/// directory and the compiler's own headers (for `<stdint.h>`), none of
/// the build's defines, include directories or options, which could change
/// what the proven text means.
fn wl_options(target: &str, compiler: &Compiler, header_dir: &Path) -> Vec<String> {
    let mut o = vec![format!("--gpu-architecture={target}")];
    for d in std::iter::once(header_dir).chain(compiler.include.iter().map(PathBuf::as_path)) {
        o.push(format!("--include-path={}", d.display()));
    }
    o
}

/// The launchers of a `warp_launch.h` file's kernels.
fn wl_launchers_of(
    path: &Path,
    w: wl_kernels::WlText,
    file_name: &str,
    warning: Option<&(usize, String)>,
    syncing: &std::collections::BTreeSet<String>,
) -> Result<Vec<CudaKernel>, CudaBuildError> {
    let mut read = w.kernels;
    if let Some(warning) = warning {
        wl_kernels::demote(&mut read, file_name, warning);
    }
    read.into_iter()
        .map(|(name, line, k)| {
            if syncing.contains(&name) {
                return Err(CudaBuildError::Signature {
                    file: path.to_path_buf(),
                    line,
                    kernel: name,
                    problem: "its compiled code synchronises the grid, which warp-launch's launches of warp_launch.h kernels do not do cooperatively; move it to a .cu file without warp_launch.h, whose launcher has launch_cooperative".into(),
                });
            }
            Ok(CudaKernel {
                type_name: type_name(&name),
                expression: name.clone(),
                symbol: name,
                params: k
                    .params
                    .iter()
                    .map(|p| (p.name.clone(), p.c_type.clone(), p.rust.clone()))
                    .collect(),
                grid_sync: false,
                warp_launch: Some(k),
            })
        })
        .collect()
}

type Run<'a> =
    dyn Fn(&Library, &str, &Compiler, bool) -> Result<super::nvrtc::Output, CudaBuildError> + 'a;

/// The NVRTC 12.0 PTX of the file for `compute_<lowest>`, added to
/// `images`; or why there is none (said once, as a warning).
fn ptx_fallback(
    tk: &Toolkit,
    run: &Run<'_>,
    stem: &str,
    file_name: &str,
    lowest: u32,
    dir: &Path,
    images: &mut Vec<String>,
) -> Result<Option<String>, CudaBuildError> {
    let Some(ptx) = &tk.ptx else {
        let why = format!(
            "no NVRTC 12.0 ({} is set without {})",
            toolkit::ENV_NVRTC,
            toolkit::ENV_NVRTC_PTX
        );
        crate::notice::warn_once(&format!(
            "warp-build: {file_name} gets no PTX fallback: {why}"
        ));
        return Ok(Some(why));
    };
    let lib = open(ptx, "12.0 for the PTX fallback")?;
    match run(&lib, &format!("compute_{lowest}"), ptx, false) {
        Ok(out) => {
            let name = format!("{stem}.compute_{lowest}.ptx");
            std::fs::write(dir.join(&name), &out.image).map_err(io("writing", dir.join(&name)))?;
            images.push(name);
            Ok(None)
        }
        Err(CudaBuildError::Compile {
            diagnostics,
            result,
            nvrtc,
            ..
        }) => {
            let first = diagnostics
                .iter()
                .find(|d| d.severity.contains("error"))
                .map_or_else(|| result.to_string(), ToString::to_string);
            let why = format!("{nvrtc} cannot compile it ({first})");
            crate::notice::warn_once(&format!(
                "warp-build: {file_name} gets no PTX fallback, only its cubins: {why}; GPUs none of \
                 them fits cannot run it"
            ));
            Ok(Some(why))
        }
        Err(e) => Err(e),
    }
}

fn names_of(build: &CudaBuild, path: &Path) -> Vec<String> {
    build
        .names
        .iter()
        .filter(|(f, _)| f.canonicalize().is_ok_and(|c| c == path))
        .flat_map(|(_, n)| n.iter().cloned())
        .collect()
}

/// The launchers: every `extern "C"` kernel, then each name expression.
fn kernels(
    build: &CudaBuild,
    path: &Path,
    text: &str,
    names: &[String],
    lowered: &[String],
    syncing: &std::collections::BTreeSet<String>,
) -> Result<Vec<CudaKernel>, CudaBuildError> {
    let heads = signature::heads(text);
    let mut out = Vec::new();
    let mut add = |head: &signature::Head,
                   expr: &str,
                   symbol: &str,
                   params: Vec<(String, String)>| {
        let mut mapped = Vec::new();
        for (c, n) in params {
            let rust = signature::rust_type(&c, &build.types).ok_or_else(|| CudaBuildError::Signature {
                file: path.to_path_buf(),
                line: head.line,
                kernel: expr.to_string(),
                problem: format!(
                    "parameter `{n}` has C type `{c}`, which maps to no Rust type: pointers to C scalars \
                     (const or not), C scalars of fixed size (int, unsigned int, float, size_t, int64_t, ...), \
                     and struct types mapped with CudaBuild::map_type are read"
                ),
            })?;
            mapped.push((n, c, rust));
        }
        out.push(CudaKernel {
            expression: expr.to_string(),
            symbol: symbol.to_string(),
            type_name: type_name(expr),
            params: mapped,
            grid_sync: syncing.contains(symbol),
            warp_launch: None,
        });
        Ok::<(), CudaBuildError>(())
    };
    for h in heads.iter().filter(|h| h.extern_c && h.template.is_empty()) {
        add(h, &h.name, &h.name, h.params.clone())?;
    }
    for (expr, symbol) in names.iter().zip(lowered) {
        let (base, args) = signature::split_expression(expr);
        let Some(h) = heads.iter().find(|h| h.name == base) else {
            return Err(CudaBuildError::Signature {
                file: path.to_path_buf(),
                line: 0,
                kernel: expr.clone(),
                problem: format!(
                    "no __global__ function `{base}` in the file's text to read the parameters of"
                ),
            });
        };
        add(h, expr, symbol, signature::instantiate(h, &args))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_parse_with_their_variants() {
        assert_eq!(parse_arch("sm_90a"), Some((90, "90a".to_string())));
        assert_eq!(parse_arch("100f"), Some((100, "100f".to_string())));
        assert_eq!(parse_arch("80"), Some((80, "80".to_string())));
        assert_eq!(parse_arch("70"), None, "below sm_75");
        assert_eq!(parse_arch("9x"), None);
    }
}
