//! Compiling a module's CPU code into a static library with the `cc` crate:
//! `wp_<module>.cpu.cpp` (which includes Warp's `wp_<module>.cpp`) and
//! warp-build's CPU runtime, against Warp's headers in `<warp>/native`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cpu_parse::{self, CpuKernel};
use crate::cpu_shim;
use crate::error::{BuildError, io};

/// warp-build's CPU runtime (`_wp_assert`, `wpl_take_assert`,
/// `wp_cpu_run_block`, the lane queries; all weak).
pub(crate) const RUNTIME: &str = include_str!("cpu_runtime.cpp");

/// The library name of `module`'s CPU code (`wpl_<module>`, the file
/// `libwpl_<module>.a`).
pub(crate) fn lib_name(module: &str) -> String {
    format!("wpl_{module}")
}

/// The directory the library and its objects are written to.
pub(crate) fn lib_dir(out_dir: &Path) -> PathBuf {
    out_dir.join("cpu")
}

/// What compiling a module's CPU code produced.
#[derive(Debug)]
pub(crate) struct CpuOutput {
    /// The static library.
    pub lib: PathBuf,
    /// Every kernel, parsed.
    pub kernels: Vec<CpuKernel>,
}

/// Reads Warp's `wp_<module>.cpp` in `out_dir`, writes
/// `wp_<module>.cpu.cpp` and the runtime beside it, and compiles both into
/// `<out_dir>/cpu/libwpl_<module>.a`. With `metadata` (in a build script)
/// prints the cargo lines that link it.
pub(crate) fn build(
    module: &str,
    out_dir: &Path,
    warp_dir: &Path,
    metadata: bool,
) -> Result<CpuOutput, BuildError> {
    let warp_cpp = out_dir.join(format!("wp_{module}.cpp"));
    let text = std::fs::read_to_string(&warp_cpp).map_err(io("reading", &warp_cpp))?;
    let kernels = cpu_parse::parse(&text).map_err(|problem| BuildError::CpuSource {
        module: module.to_string(),
        path: warp_cpp.clone(),
        problem,
    })?;
    let shim = out_dir.join(format!("wp_{module}.cpu.cpp"));
    std::fs::write(&shim, cpu_shim::generate(module, &text, &kernels))
        .map_err(io("writing", &shim))?;
    let runtime = out_dir.join(format!("wp_{module}.cpu_runtime.cpp"));
    std::fs::write(&runtime, RUNTIME).map_err(io("writing", &runtime))?;

    let dir = lib_dir(out_dir);
    std::fs::create_dir_all(&dir).map_err(io("creating directory", &dir))?;
    let name = lib_name(module);
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .opt_level(3)
        .flag("-ffp-contract=off")
        // Warp's release build: its `assert`s (bounds checks in array
        // accesses, which record a failure but do not stop the access)
        // compile to nothing; the launch-shape rule is what keeps CPU
        // kernels inside their arrays.
        .define("NDEBUG", None)
        // Warp's headers and generated code are not ours to clean up.
        .warnings(false)
        .extra_warnings(false)
        .flag("-w")
        .include(warp_dir.join("native"))
        .out_dir(&dir)
        .cpp_link_stdlib(None)
        .cargo_metadata(metadata)
        .cargo_warnings(metadata)
        .file(&shim)
        .file(&runtime);
    let target = std::env::var("TARGET").ok();
    if target.is_none() {
        let host = host_triple();
        build.target(&host).host(&host);
    }
    if std::env::var_os("HOST").is_none() {
        build.host(&host_triple());
    }
    if std::env::var_os("DEBUG").is_none() {
        build.debug(false);
    }

    let compiler = build
        .try_get_compiler()
        .map(|t| t.path().to_path_buf())
        .map_err(|e| BuildError::CpuCompilerMissing {
            module: module.to_string(),
            compiler: PathBuf::from("c++"),
            problem: e.to_string(),
        })?;
    if let Err(error) = Command::new(&compiler).arg("--version").output() {
        return Err(BuildError::CpuCompilerMissing {
            module: module.to_string(),
            compiler,
            problem: error.to_string(),
        });
    }
    log::debug!(
        "warp-build: compiling {} with {}",
        shim.display(),
        compiler.display()
    );
    build.try_compile(&name).map_err(|e| {
        let problem = e.to_string();
        if problem.starts_with("ToolNotFound") {
            BuildError::CpuCompilerMissing {
                module: module.to_string(),
                compiler: compiler.clone(),
                problem,
            }
        } else {
            BuildError::CpuCompile {
                module: module.to_string(),
                compiler: compiler.clone(),
                path: shim.clone(),
                problem,
            }
        }
    })?;
    if metadata {
        print_stdlib(target.as_deref());
    }
    Ok(CpuOutput {
        lib: dir.join(format!("lib{name}.a")),
        kernels,
    })
}

/// Prints the cargo lines that link `module`'s library (already built in
/// `out_dir`): for a compile that reused the last one.
pub(crate) fn print_link(module: &str, out_dir: &Path) {
    crate::cargo_instruction(format_args!(
        "rustc-link-search=native={}",
        lib_dir(out_dir).display()
    ));
    crate::cargo_instruction(format_args!("rustc-link-lib=static={}", lib_name(module)));
    print_stdlib(std::env::var("TARGET").ok().as_deref());
}

/// The C++ standard library Warp's code links against (its exception
/// handling): `CXXSTDLIB` when set (empty: none), else the target's default,
/// as the `cc` crate chooses it.
fn print_stdlib(target: Option<&str>) {
    crate::cargo_instruction(format_args!("rerun-if-env-changed=CXXSTDLIB"));
    let lib = match std::env::var("CXXSTDLIB") {
        Ok(v) => (!v.is_empty()).then_some(v),
        Err(_) => {
            let t = target.unwrap_or_default();
            if t.contains("msvc") {
                None
            } else if t.contains("apple") || t.contains("freebsd") || t.contains("openbsd") {
                Some("c++".into())
            } else if t.contains("android") {
                Some("c++_shared".into())
            } else {
                Some("stdc++".into())
            }
        }
    };
    if let Some(lib) = lib {
        crate::cargo_instruction(format_args!("rustc-link-lib={lib}"));
    }
}

/// The host's target triple: `rustc -vV`'s `host:` line (`RUSTC` when
/// set), else one assembled from the running binary's architecture and OS.
fn host_triple() -> String {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let from_rustc = Command::new(rustc).arg("-vV").output().ok().and_then(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
    });
    from_rustc.unwrap_or_else(|| {
        let arch = std::env::consts::ARCH;
        match std::env::consts::OS {
            "macos" => format!("{arch}-apple-darwin"),
            "windows" => format!("{arch}-pc-windows-msvc"),
            os => format!("{arch}-unknown-{os}-gnu"),
        }
    })
}
