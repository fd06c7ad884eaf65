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

/// x86 target features (rustc's names) whose GCC/Clang `-m` flag means
/// the same instruction set, with the flag's name where it differs. Only
/// these are passed on; other features (and other architectures, whose
/// baseline the compiler's target already gives) add no flag.
const X86_FEATURES: &[(&str, &str)] = &[
    ("sse3", "sse3"),
    ("ssse3", "ssse3"),
    ("sse4.1", "sse4.1"),
    ("sse4.2", "sse4.2"),
    ("popcnt", "popcnt"),
    ("avx", "avx"),
    ("avx2", "avx2"),
    ("fma", "fma"),
    ("f16c", "f16c"),
    ("bmi1", "bmi"),
    ("bmi2", "bmi2"),
    ("lzcnt", "lzcnt"),
    ("movbe", "movbe"),
    ("avx512f", "avx512f"),
    ("avx512bw", "avx512bw"),
    ("avx512cd", "avx512cd"),
    ("avx512dq", "avx512dq"),
    ("avx512vl", "avx512vl"),
];

/// The C++ flags that give the CPU code the instruction set of Cargo's
/// target: `features` is `CARGO_CFG_TARGET_FEATURE` (comma-separated, every
/// feature enabled for the target, including those implied by
/// `-C target-cpu`), `arch` is `CARGO_CFG_TARGET_ARCH`. Never `-march`:
/// the library runs wherever the Rust code it links into runs (a bundle is
/// built on one machine and run on another), no further. `-mfma` does not
/// change results: the build keeps `-ffp-contract=off`, so no multiply and
/// add are fused unless the source asks.
pub(crate) fn target_feature_flags(arch: &str, features: &str) -> Vec<String> {
    if !matches!(arch, "x86" | "x86_64") {
        return Vec::new();
    }
    let on: Vec<&str> = features.split(',').map(str::trim).collect();
    X86_FEATURES
        .iter()
        .filter(|(rust, _)| on.contains(rust))
        .map(|(_, cc)| format!("-m{cc}"))
        .collect()
}

/// [`target_feature_flags`] of the target Cargo builds for (none outside a
/// build script, where no `CARGO_CFG_*` variable is set: the compiler's
/// default target).
pub(crate) fn cargo_target_flags() -> Vec<String> {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    target_feature_flags(
        &var("CARGO_CFG_TARGET_ARCH"),
        &var("CARGO_CFG_TARGET_FEATURE"),
    )
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
    // The instruction set of Cargo's target (`-C target-cpu`,
    // `-C target-feature`), as the Rust code around it gets.
    for flag in cargo_target_flags() {
        build.flag(&flag);
    }
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

#[cfg(test)]
mod tests {
    use super::target_feature_flags;

    #[test]
    fn cpu_features_come_from_the_cargo_target_and_never_from_the_build_machine() {
        // x86-64 baseline (the default target): nothing beyond the compiler's default.
        assert!(target_feature_flags("x86_64", "fxsr,sse,sse2").is_empty());
        // `-C target-cpu=x86-64-v3`: its features, in a fixed order.
        let v3 = "avx,avx2,bmi1,bmi2,cmpxchg16b,f16c,fma,fxsr,lzcnt,movbe,popcnt,sse,sse2,sse3,sse4.1,sse4.2,ssse3,xsave";
        assert_eq!(
            target_feature_flags("x86_64", v3),
            [
                "-msse3", "-mssse3", "-msse4.1", "-msse4.2", "-mpopcnt", "-mavx", "-mavx2",
                "-mfma", "-mf16c", "-mbmi", "-mbmi2", "-mlzcnt", "-mmovbe"
            ]
        );
        // AVX-512 as rustc names it.
        let flags = target_feature_flags("x86_64", "avx512f,avx512vl,crt-static");
        assert_eq!(flags, ["-mavx512f", "-mavx512vl"]);
        // Never -march (native or any other), never fast-math.
        for f in target_feature_flags("x86_64", v3) {
            assert!(!f.starts_with("-march") && !f.contains("fast-math"), "{f}");
        }
        // Other architectures: the target's baseline.
        assert!(target_feature_flags("aarch64", "neon,fp-armv8,sve").is_empty());
        assert!(target_feature_flags("", "").is_empty());
    }
}
