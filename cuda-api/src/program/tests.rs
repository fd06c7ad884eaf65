//! CPU tests of `Program`. Those that compile need a real NVRTC: they run
//! where `CUDA_SYS_NVRTC_LIBRARY` names one (a pip wheel's `lib` directory),
//! and elsewhere say so and pass.

use super::cache::{self, Entry, Key};
use super::*;
use crate::target::{ArchVariant, ImageTarget};

fn nvrtc_or_skip() -> Option<u32> {
    if std::env::var_os(cuda_sys::nvrtc::LIBRARY_ENV).is_none() {
        eprintln!("skipped: {} is not set", cuda_sys::nvrtc::LIBRARY_ENV);
        return None;
    }
    let (major, minor) = nvrtc::version().unwrap_or_else(|e| panic!("{e}"));
    Some((major * 1000 + minor * 10) as u32)
}

const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

#[test]
fn output_is_a_pure_function_of_the_versions_and_the_request() {
    use Output::*;
    // No driver known: PTX by default, whatever is asked is given.
    assert_eq!(Output::choose(13050, None, None), Ok(Ptx));
    assert_eq!(Output::choose(13050, None, Some(Cubin)), Ok(Cubin));
    assert_eq!(Output::choose(13050, None, Some(Ptx)), Ok(Ptx));
    // NVRTC as old as, or older than, the driver: PTX by default.
    assert_eq!(Output::choose(13000, Some(13000), None), Ok(Ptx));
    assert_eq!(Output::choose(12080, Some(13000), None), Ok(Ptx));
    assert_eq!(Output::choose(12080, Some(13000), Some(Cubin)), Ok(Cubin));
    // Same PTX ISA (12.6 writes 8.5, a 12.5 driver takes 8.5): PTX loads.
    assert_eq!(Output::choose(12060, Some(12050), Some(Ptx)), Ok(Ptx));
    // NVRTC newer: a cubin by default, PTX refused naming both versions.
    assert_eq!(Output::choose(13000, Some(12080), None), Ok(Cubin));
    assert_eq!(Output::choose(13050, Some(13000), Some(Cubin)), Ok(Cubin));
    let e = Output::choose(13000, Some(12080), Some(Ptx)).unwrap_err();
    assert_eq!(
        (e.nvrtc_isa, e.driver_isa),
        (Some(PtxIsa::new(9, 0)), Some(PtxIsa::new(8, 7)))
    );
    let msg = e.to_string();
    assert!(msg.contains("NVRTC 13.0 (PTX ISA 9.0)"), "{msg}");
    assert!(msg.contains("CUDA 12.8 driver (PTX ISA 8.7)"), "{msg}");
    assert!(msg.contains("Output::Cubin"), "{msg}");
    // NVRTC 13.5 writes PTX ISA 9.5, past a CUDA 13.0 driver's 9.0.
    let e = Output::choose(13050, Some(13000), Some(Ptx)).unwrap_err();
    assert_eq!(
        (e.nvrtc_isa, e.driver_isa),
        (Some(PtxIsa::new(9, 5)), Some(PtxIsa::new(9, 0)))
    );
    assert_eq!(Output::choose(13050, Some(13000), None), Ok(Cubin));
    // An NVRTC past the ISA table (14.0) against a known driver: by version.
    let e = Output::choose(14000, Some(13000), Some(Ptx)).unwrap_err();
    assert_eq!(e.nvrtc_isa, None);
    assert!(e.to_string().contains("NVRTC 14.0"), "{e}");
    assert_eq!(Output::choose(14000, Some(13000), None), Ok(Cubin));
}

#[test]
fn nvrtc_logs_become_file_line_diagnostics() {
    let log = "kernel.cu(4): error: identifier \"bogus\" is undefined\n      bogus(1);\n      ^\n\n\
               inc/my(1).h(12): warning #550-D: variable \"x\" was set but never used\n\
               kernel.cu(9): error: expected a \";\"\n\n\
               2 errors detected in the compilation of \"kernel.cu\".\n";
    let d = Diagnostic::parse_log(log);
    assert_eq!(d.len(), 3, "{d:?}");
    assert_eq!((d[0].file.as_str(), d[0].line), ("kernel.cu", 4));
    assert_eq!(d[0].message, "identifier \"bogus\" is undefined");
    assert_eq!((d[1].file.as_str(), d[1].line), ("inc/my(1).h", 12));
    assert_eq!(d[1].severity, "warning #550-D");
    assert!(!d[1].is_error());
    let e = CompileError::new(
        "kernel.cu".into(),
        13050,
        vec!["-std=c++17".into()],
        log.into(),
    );
    assert_eq!(e.error_count(), 2);
    let msg = e.to_string();
    assert!(
        msg.starts_with(
            "NVRTC 13.5 could not compile program `kernel.cu`: kernel.cu:4: error: identifier \"bogus\" is undefined (and 1 more error); fix the source at kernel.cu:4 (options: -std=c++17)\nNVRTC log:\n"
        ),
        "{msg}"
    );
}

fn key<'a>(source: &'a str, options: &'a [String]) -> Key<'a> {
    Key {
        nvrtc_version: 13050,
        output: Output::Ptx,
        name: "k.cu",
        source,
        headers: &[],
        options,
        name_expressions: &[],
    }
}

#[test]
fn cache_keys_change_with_every_input() {
    let opts = vec!["--gpu-architecture=compute_90".to_string()];
    let base = key("a", &opts).hex();
    assert_eq!(base.len(), 64);
    assert_eq!(base, key("a", &opts).hex());
    assert_ne!(base, key("b", &opts).hex());
    let other = vec!["--gpu-architecture=compute_80".to_string()];
    assert_ne!(base, key("a", &other).hex());
    let mut k = key("a", &opts);
    k.nvrtc_version = 13000;
    assert_ne!(base, k.hex());
    let mut k = key("a", &opts);
    k.output = Output::Cubin;
    assert_ne!(base, k.hex());
    let headers = vec![("h.h".to_string(), "int x;".to_string())];
    let mut k = key("a", &opts);
    k.headers = &headers;
    assert_ne!(base, k.hex());
    let exprs = vec!["f<int>".to_string()];
    let mut k = key("a", &opts);
    k.name_expressions = &exprs;
    assert_ne!(base, k.hex());
}

#[test]
fn cache_entries_round_trip_and_any_changed_byte_is_refused() {
    let entry = Entry {
        image: b"//\n.version 9.0\n.target sm_90\n".to_vec(),
        lowered: vec![("f<int>".into(), "_Z1fIiEvv".into())],
        log: "a warning".into(),
    };
    let file = entry.to_file();
    assert_eq!(Entry::from_file(&file), Ok(entry.clone()));
    for i in 0..file.len() {
        let mut bad = file.clone();
        bad[i] ^= 0x01;
        assert!(
            Entry::from_file(&bad).is_err(),
            "byte {i} flipped was accepted"
        );
    }
    for n in 0..file.len() {
        assert!(Entry::from_file(&file[..n]).is_err(), "{n} bytes accepted");
    }
    let mut longer = file.clone();
    longer.push(0);
    assert!(Entry::from_file(&longer).is_err());
}

#[cfg(unix)]
#[test]
fn a_cache_directory_others_can_write_is_not_trusted() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(cache::private(dir.path()), Ok(()));
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let why = cache::private(dir.path()).unwrap_err();
    assert!(
        why.contains("can be written by other users (mode 777)"),
        "{why}"
    );
    assert!(why.contains(cache::CACHE_ENV), "{why}");
    // /tmp belongs to root: never this (non-root) user's.
    // SAFETY: geteuid has no preconditions.
    #[cfg(target_os = "linux")]
    if unsafe { libc::geteuid() } != 0 {
        let why = cache::private(std::path::Path::new("/")).unwrap_err();
        assert!(why.contains("belongs to user 0"), "{why}");
    }
}

#[test]
fn compile_refuses_no_target_and_an_architecture_option_before_nvrtc() {
    let e = Program::new("k.cu", SAXPY).compile().unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, CudaError::InvalidArgument { .. })
            && msg.contains("program `k.cu` has no target"),
        "{msg}"
    );
    let e = Program::new("k.cu", SAXPY)
        .arch(ComputeCapability::new(9, 0))
        .option("-arch=sm_80")
        .compile()
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("the option `-arch=sm_80` sets the architecture"),
        "{e}"
    );
}

fn uncached(p: Program) -> Program {
    p.cache(false)
}

#[test]
fn a_syntax_error_names_the_program_file_line_and_log() {
    let Some(version) = nvrtc_or_skip() else {
        return;
    };
    let src = "extern \"C\" __global__ void k(float *x) {\n    x[0] = 1.0f\n    x[1] = 2.0f;\n}\n";
    let e = uncached(Program::new("broken.cu", src))
        .arch(ComputeCapability::new(8, 0))
        .option("-std=c++17")
        .compile()
        .unwrap_err();
    let CudaError::Compile(c) = &e else {
        panic!("not a compile error: {e}")
    };
    assert_eq!(c.program, "broken.cu");
    assert_eq!(c.nvrtc_version, version);
    assert_eq!(
        c.options,
        vec![
            "-std=c++17".to_string(),
            "--gpu-architecture=compute_80".to_string()
        ]
    );
    let first = c.first_error().expect("an error in the log");
    assert_eq!(
        (first.file.as_str(), first.line),
        ("broken.cu", 3),
        "{}",
        c.log
    );
    assert!(first.message.contains("expected a \";\""), "{}", c.log);
    assert!(c.log.contains("broken.cu(3): error"), "{}", c.log);
    let msg = e.to_string();
    assert!(
        msg.contains("could not compile program `broken.cu`: broken.cu:3: error"),
        "{msg}"
    );
    assert!(msg.contains("fix the source at broken.cu:3"), "{msg}");
    assert!(
        msg.contains("options: -std=c++17 --gpu-architecture=compute_80"),
        "{msg}"
    );
}

#[test]
fn an_error_in_a_header_names_the_header() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    let e = uncached(Program::new(
        "main.cu",
        "#include \"util.h\"\n__global__ void k() {}\n",
    ))
    .header("util.h", "// util\n__device__ int one() { return 1 }\n")
    .arch(ComputeCapability::new(8, 0))
    .compile()
    .unwrap_err();
    let CudaError::Compile(c) = &e else {
        panic!("{e}")
    };
    let first = c.first_error().expect("an error");
    assert_eq!(
        (first.file.as_str(), first.line),
        ("util.h", 2),
        "{}",
        c.log
    );
}

#[test]
fn ptx_and_cubin_for_the_architecture_asked() {
    let Some(version) = nvrtc_or_skip() else {
        return;
    };
    let ptx = uncached(Program::new("saxpy.cu", SAXPY))
        .arch(ComputeCapability::new(8, 0))
        .compile()
        .unwrap();
    assert_eq!(ptx.output(), Output::Ptx);
    assert_eq!(ptx.nvrtc_version(), version);
    assert_eq!(ptx.cache(), CacheOutcome::Off);
    assert!(ptx.ptx().unwrap().contains(".entry saxpy"));
    match ImageTarget::of(ptx.image()).unwrap() {
        ImageTarget::Ptx { target, .. } => assert_eq!(target, ComputeCapability::new(8, 0)),
        t => panic!("{t:?}"),
    }
    let cubin = uncached(Program::new("saxpy.cu", SAXPY))
        .arch(ComputeCapability::new(9, 0))
        .output(Output::Cubin)
        .compile()
        .unwrap();
    assert!(cubin.ptx().is_none());
    assert!(cubin.image().starts_with(b"\x7fELF"));
    // NVRTC 12.0's cubins have sections whose sh_link names a section that
    // is no symbol table (readelf warns too), which check_image refuses.
    if version == 12000 {
        return;
    }
    assert_eq!(
        ImageTarget::of(cubin.image()).unwrap(),
        ImageTarget::Cubin {
            arch: ComputeCapability::new(9, 0),
            variant: ArchVariant::Generic,
        }
    );
    // A driver older than this NVRTC: the default is a cubin, PTX refused.
    let old = Program::new("saxpy.cu", SAXPY)
        .arch(ComputeCapability::new(9, 0))
        .driver_version(12000)
        .cache(false);
    if version > 12000 {
        assert_eq!(old.compile().unwrap().output(), Output::Cubin);
        let e = old.output(Output::Ptx).compile().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, CudaError::PtxRefused(_)), "{msg}");
        assert!(msg.starts_with("Program `saxpy.cu`: PTX refused"), "{msg}");
        assert!(msg.contains("CUDA 12.0 driver (PTX ISA 8.0)"), "{msg}");
    }
}

#[test]
fn name_expressions_give_the_lowered_names_of_template_instances() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    let src = r#"
template <typename T, int N>
__global__ void fill(T *x) { x[threadIdx.x] = T(N); }
"#;
    let c = uncached(Program::new("fill.cu", src))
        .name_expression("fill<float, 3>")
        .name_expression("fill<int, 7>")
        .arch(ComputeCapability::new(8, 0))
        .compile()
        .unwrap();
    assert_eq!(
        c.lowered_name("fill<float, 3>").unwrap(),
        "_Z4fillIfLi3EEvPT_"
    );
    assert_eq!(
        c.lowered_name("fill<int, 7>").unwrap(),
        "_Z4fillIiLi7EEvPT_"
    );
    let ptx = c.ptx().unwrap();
    assert!(ptx.contains(".entry _Z4fillIfLi3EEvPT_"), "{ptx}");
    let e = c.lowered_name("fill<double, 1>").unwrap_err().to_string();
    assert!(
        e.contains("registered no name expression `fill<double, 1>`"),
        "{e}"
    );
    // An expression that names nothing is NVRTC's compile error.
    let e = uncached(Program::new("fill.cu", src))
        .name_expression("fill<nothing>")
        .arch(ComputeCapability::new(8, 0))
        .compile()
        .unwrap_err();
    assert!(matches!(e, CudaError::Compile(_)), "{e}");
}

#[test]
fn the_second_compile_is_a_cache_hit_and_a_corrupt_entry_is_replaced() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("nvrtc");
    // SAFETY: a fresh temporary directory only this test writes.
    let program = unsafe {
        Program::new("saxpy.cu", SAXPY)
            .name_expression("saxpy")
            .arch(ComputeCapability::new(8, 0))
            .cache_dir(&cache_dir)
    };
    let first = program.compile().unwrap();
    assert_eq!(first.cache(), CacheOutcome::Miss);
    let entries: Vec<_> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let second = program.compile().unwrap();
    assert_eq!(second.cache(), CacheOutcome::Hit);
    assert_eq!(second.image(), first.image());
    assert_eq!(second.lowered_name("saxpy").unwrap(), "saxpy");
    // Another option is another entry.
    let other = program.clone().option("-DUNUSED=1").compile().unwrap();
    assert_eq!(other.cache(), CacheOutcome::Miss);

    // One changed byte of the image in the stored entry: refused on read,
    // compiled again and replaced.
    let mut bytes = std::fs::read(&entries[0]).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(&entries[0], &bytes).unwrap();
    let third = program.compile().unwrap();
    assert_eq!(third.cache(), CacheOutcome::Replaced);
    assert_eq!(third.image(), first.image());
    assert_eq!(program.compile().unwrap().cache(), CacheOutcome::Hit);
    // Turned off: NVRTC runs, nothing is read.
    assert_eq!(
        program.clone().cache(false).compile().unwrap().cache(),
        CacheOutcome::Off
    );
}

#[test]
fn the_cache_variable_picks_the_directory_or_turns_it_off() {
    let user = Some(std::path::PathBuf::from("/home/u/.cache"));
    let default = std::path::Path::new("/home/u/.cache/cuda-api/nvrtc");
    assert_eq!(cache::dir_from(None, user.clone()).unwrap().path(), default);
    assert_eq!(
        cache::dir_from(Some(" "), user.clone()).unwrap().path(),
        default
    );
    for off in ["off", "OFF", "0", "false", "no"] {
        assert!(cache::dir_from(Some(off), user.clone()).is_none(), "{off}");
    }
    assert_eq!(
        cache::dir_from(Some("/data/nvrtc"), user).unwrap().path(),
        std::path::Path::new("/data/nvrtc")
    );
    assert!(cache::dir_from(None, None).is_none());
}

#[cfg(unix)]
#[test]
fn the_safe_road_skips_a_cache_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    if nvrtc_or_skip().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("nvrtc");
    let mut program = Program::new("saxpy.cu", SAXPY).arch(ComputeCapability::new(8, 0));
    program.cache = CachePolicy::Checked(cache_dir.clone());
    assert_eq!(program.compile().unwrap().cache(), CacheOutcome::Miss);
    let mode = std::fs::metadata(&cache_dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "the cache directory is made private");
    assert_eq!(program.compile().unwrap().cache(), CacheOutcome::Hit);
    // Others may write it now: the entry is not read (NVRTC runs again).
    std::fs::set_permissions(&cache_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(program.compile().unwrap().cache(), CacheOutcome::Off);
    // Private again, but the entry itself writable by others: not read.
    std::fs::set_permissions(&cache_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let entry = std::fs::read_dir(&cache_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(program.compile().unwrap().cache(), CacheOutcome::Off);
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(program.compile().unwrap().cache(), CacheOutcome::Hit);
}

#[test]
fn an_architecture_nvrtc_does_not_know_is_a_compile_error_with_its_log() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    let e = uncached(Program::new("saxpy.cu", SAXPY))
        .arch(ComputeCapability::new(1, 0))
        .output(Output::Cubin)
        .compile()
        .unwrap_err();
    let CudaError::Compile(c) = &e else {
        panic!("{e}")
    };
    assert!(c.first_error().is_none(), "{}", c.log);
    assert_eq!(c.options, vec!["--gpu-architecture=sm_10".to_string()]);
    let msg = e.to_string();
    assert!(msg.contains("could not compile program `saxpy.cu`: nvrtc: error: invalid value for --gpu-architecture (-arch); check the options (options: --gpu-architecture=sm_10)"), "{msg}");
}

#[test]
fn relocatable_code_passes_the_image_check_the_linker_applies() {
    if nvrtc_or_skip().is_none() {
        return;
    }
    let src = "extern __device__ float twice(float);\n\
               extern \"C\" __global__ void k(float *x) { x[0] = twice(x[0]); }\n";
    for output in [Output::Cubin, Output::Ptx] {
        let c = uncached(Program::new("main.cu", src))
            .option("-rdc=true")
            .arch(ComputeCapability::new(9, 0))
            .output(output)
            .compile()
            .unwrap();
        let kind =
            crate::image::check_image(c.image()).unwrap_or_else(|e| panic!("{output:?}: {e}"));
        assert_eq!(
            kind,
            match output {
                Output::Cubin => crate::ImageKind::Cubin,
                Output::Ptx => crate::ImageKind::Ptx,
            }
        );
    }
}
