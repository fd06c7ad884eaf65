//! warp-build against the real Warp 1.19.0 (Python; installed once per user
//! with pip when not importable, as a user's build gets it). No GPU: Warp's NVRTC compiles. Run with `WARP_BUILD_ARCHS` unset
//! or `90,80` (as CI sets it): it overrides the architectures asked for here.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use warp_build::{BuildError, WarpModule, WarpStage};

/// One Warp compile at a time: they share the install and the kernel cache,
/// and the machine's cores.
static WARP: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    WARP.lock().unwrap_or_else(|e| e.into_inner())
}

fn test_kernels() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/warp/kernels.py")
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn compiles_two_archs_and_ptx_then_reuses_then_recompiles_a_touched_source() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("kernels.py");
    std::fs::copy(test_kernels(), &src).unwrap();
    let out = tmp.path().join("out");
    let mut module = WarpModule::new(&src);
    module
        .archs([90, 80])
        .ptx(true)
        .block_dim(128)
        .out_dir(&out)
        .embed(true)
        .cargo_metadata(false);

    let c = module.compile().unwrap_or_else(|e| panic!("{e}"));
    assert!(!c.reused());
    assert_eq!(c.module(), "kernels");
    assert_eq!(c.archs(), [80, 90]);
    assert_eq!(c.ptx_arch(), Some(80));
    assert_eq!(c.block_dim(), 128);
    assert_eq!(c.dir(), out.canonicalize().unwrap());
    let names: Vec<String> = c
        .files()
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "wp_kernels.cpp",
            "wp_kernels.cu",
            "wp_kernels.facts.json",
            "wp_kernels.meta",
            "wp_kernels.rules.json",
            "wp_kernels.sm80.cubin",
            "wp_kernels.sm80.ptx",
            "wp_kernels.sm90.cubin"
        ]
    );
    // The facts Warp's objects gave: no native code, no preamble, and each
    // kernel's CPU code is its CUDA code.
    let facts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(c.dir().join("wp_kernels.facts.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(facts["module"], "kernels");
    assert_eq!(facts["cuda"]["preamble"], false);
    assert_eq!(facts["cuda"]["native"], serde_json::json!([]));
    let kernels = facts["kernels"].as_object().unwrap();
    assert!(kernels.contains_key("saxpy"), "{facts}");
    for (key, k) in kernels {
        assert_eq!(k["cpu_body"], serde_json::Value::Null, "{key}");
        assert_eq!(k["cuda"], serde_json::json!([]), "{key}");
    }
    for k in ["saxpy", "chain_sin", "chain_loss", "count_visits"] {
        assert!(
            c.kernels().iter().any(|n| n == k),
            "{k} in {:?}",
            c.kernels()
        );
    }
    assert_eq!(c.sources(), [src.canonicalize().unwrap()]);

    // The images are what they say.
    let cubin = read(&c.dir().join("wp_kernels.sm90.cubin"));
    assert_eq!(&cubin[..4], b"\x7fELF", "sm_90 cubin is an ELF file");
    let ptx = String::from_utf8(read(&c.dir().join("wp_kernels.sm80.ptx"))).unwrap();
    let version = ptx
        .lines()
        .find_map(|l| l.trim().strip_prefix(".version "))
        .expect("PTX has a .version line");
    // The fallback is NVRTC 12.0's PTX ISA 8.0 (any driver from CUDA 12.0
    // on), not Warp's 9.4.
    assert_eq!(version.trim(), "8.0", "PTX ISA {version}");
    assert!(ptx.contains("release 12.0"), "written by NVRTC 12.0");
    assert!(ptx.contains(".target sm_80"), "PTX targets the lowest arch");
    // The block dimension reached Warp's generated source.
    let cu = String::from_utf8(read(&c.dir().join("wp_kernels.cu"))).unwrap();
    assert!(
        cu.lines()
            .any(|l| l.trim() == "#define WP_TILE_BLOCK_DIM 128"),
        "WP_TILE_BLOCK_DIM 128 in wp_kernels.cu"
    );
    assert!(cu.contains("saxpy_cuda_kernel_forward"));
    // ... and Warp's CPU code (compiled by default).
    let cpp = String::from_utf8(read(&c.dir().join("wp_kernels.cpp"))).unwrap();
    assert!(
        cpp.lines()
            .any(|l| l.trim() == "#define WP_TILE_BLOCK_DIM 128"),
        "WP_TILE_BLOCK_DIM 128 in wp_kernels.cpp"
    );
    assert!(c.cpu_lib().is_some_and(|l| l.is_file()));
    let meta: serde_json::Value =
        serde_json::from_slice(&read(&c.dir().join("wp_kernels.meta"))).unwrap();
    assert!(meta.get("saxpy_cuda_kernel_forward_smem_bytes").is_some());
    // The declarations carried to the load: what the prover derives from
    // the written source and metadata, stamped for them.
    let meta_text = String::from_utf8(read(&c.dir().join("wp_kernels.meta"))).unwrap();
    let rules = String::from_utf8(read(&c.dir().join("wp_kernels.rules.json"))).unwrap();
    let carried = warp_proof::carried_declarations(
        &rules,
        "wp_kernels.rules.json",
        &cu,
        "wp_kernels.cu",
        &meta_text,
    )
    .unwrap()
    .expect("stamped for the written source");
    let derived =
        warp_proof::declarations(&cu, "wp_kernels.cu", &meta_text, "wp_kernels.meta").unwrap();
    assert_eq!(carried, derived);

    // The embedding code parses, declares the static and names every image.
    let rs_path = c.embed_file().expect("embed file");
    assert_eq!(rs_path, c.dir().join("kernels.rs"));
    let rs = std::fs::read_to_string(&rs_path).unwrap();
    let file = syn::parse_file(&rs).unwrap_or_else(|e| panic!("{e}\n{rs}"));
    let [syn::Item::Static(cpu), syn::Item::Static(item)] = file.items.as_slice() else {
        panic!("two static items: {rs}");
    };
    assert_eq!(cpu.ident, "KERNELS_CPU");
    assert!(rs.contains("        Some(&KERNELS_CPU),\n"), "{rs}");
    // Built by the module's unsafe constructor, with the reason.
    assert!(
        rs.contains("// SAFETY: one compile produced them all")
            && rs.contains("= unsafe {\n    warp_launch::EmbeddedModule::new(\n"),
        "{rs}"
    );
    assert!(rs.contains("wpl_kernels__saxpy__forward"), "{rs}");
    assert!(
        rs.contains(".with_rules(include_str!(") && rs.contains("wp_kernels.rules.json"),
        "{rs}"
    );
    assert_eq!(item.ident, "KERNELS");
    assert_eq!(c.static_name(), "KERNELS");
    let ty = &item.ty;
    assert_eq!(
        quote::quote!(#ty).to_string(),
        "warp_launch :: EmbeddedModule"
    );
    for name in [
        "wp_kernels.sm80.cubin",
        "wp_kernels.sm90.cubin",
        "wp_kernels.sm80.ptx",
    ] {
        let abs = c.dir().join(name);
        assert!(
            rs.contains(&format!("file: \"{name}\"")),
            "{name} named in {rs}"
        );
        assert!(
            rs.contains(&format!("include_bytes!(\"{}\")", abs.display())),
            "{name} included in {rs}"
        );
    }
    assert!(rs.contains(&format!(
        "include_str!(\"{}\")",
        c.dir().join("wp_kernels.cu").display()
    )));
    assert!(
        rs.contains("sm_80, sm_90") && rs.contains("PTX for sm_80"),
        "{rs}"
    );

    // Nothing changed: nothing runs.
    let before = std::fs::metadata(c.dir().join("wp_kernels.sm90.cubin"))
        .unwrap()
        .modified()
        .unwrap();
    let again = module.compile().unwrap_or_else(|e| panic!("{e}"));
    assert!(again.reused());
    assert_eq!(again.files(), c.files());
    assert_eq!(again.kernels(), c.kernels());
    assert_eq!(again.cpu_lib(), c.cpu_lib());
    assert_eq!(again.cpu_kernels(), c.cpu_kernels());
    let after = std::fs::metadata(c.dir().join("wp_kernels.sm90.cubin"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after, "the cubin was not rewritten");

    // A changed option is a new compile; so is a touched source.
    let mut text = std::fs::read_to_string(&src).unwrap();
    text.push_str("\n# touched\n");
    std::fs::write(&src, text).unwrap();
    let touched = module.compile().unwrap_or_else(|e| panic!("{e}"));
    assert!(!touched.reused(), "a changed source recompiles");
    assert_eq!(touched.files(), c.files());
}

#[test]
fn a_package_is_compiled_and_its_imported_modules_are_tracked() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("tapekernels");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("helpers.py"),
        "import warp as wp\n\n@wp.func\ndef twice(x: float):\n    return 2.0 * x\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("__init__.py"),
        "import warp as wp\nfrom .helpers import twice\n\n@wp.kernel\n\
         def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):\n    i = wp.tid()\n    y[i] = twice(x[i])\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
    let mut module = WarpModule::new(&pkg);
    module
        .archs([90])
        .ptx(false)
        .out_dir(&out)
        .cargo_metadata(false);
    let c = module.compile().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.module(), "tapekernels");
    assert_eq!(c.kernels(), ["double"]);
    assert_eq!(c.ptx_arch(), None);
    assert_eq!(c.embed_file(), None);
    assert!(c.dir().join("wp_tapekernels.sm90.cubin").is_file());
    let mut sources: Vec<String> = c
        .sources()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    sources.sort();
    assert_eq!(sources, ["__init__.py", "helpers.py"]);
    assert!(
        !pkg.join("__pycache__").exists(),
        "no bytecode in the source tree"
    );
    let cu = std::fs::read_to_string(c.dir().join("wp_tapekernels.cu")).unwrap();
    assert!(
        cu.contains("#define WP_TILE_BLOCK_DIM 256"),
        "default block_dim"
    );

    std::fs::write(
        pkg.join("helpers.py"),
        "import warp as wp\n\n@wp.func\ndef twice(x: float):\n    return x + x\n",
    )
    .unwrap();
    assert!(!module.compile().unwrap_or_else(|e| panic!("{e}")).reused());
    assert!(module.compile().unwrap_or_else(|e| panic!("{e}")).reused());
}

#[test]
fn warp_errors_carry_warps_message() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("broken.py");
    std::fs::write(
        &src,
        "import warp as wp\n\n@wp.kernel\ndef broken(x: wp.array(dtype=float)):\n    i = wp.tid()\n    x[i] = no_such_function(x[i])\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
    let err = WarpModule::new(&src)
        .archs([90])
        .out_dir(&out)
        .cargo_metadata(false)
        .compile()
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            BuildError::Warp {
                stage: WarpStage::Compile,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("no_such_function"), "{msg}");
    assert!(msg.contains("broken.py"), "{msg}");
    assert!(
        !out.join("warp-build.stamp").exists(),
        "a failed compile leaves no stamp"
    );
}

#[test]
fn a_missing_interpreter_says_what_to_install() {
    let tmp = tempfile::tempdir().unwrap();
    let err = WarpModule::new(test_kernels())
        .archs([90])
        .out_dir(tmp.path())
        .python("/nonexistent/python3")
        .cargo_metadata(false)
        .compile()
        .unwrap_err();
    assert!(matches!(err, BuildError::PythonNotFound { .. }), "{err}");
    insta::assert_snapshot!(err.to_string());
}

#[test]
fn bad_sources_and_options_are_refused_before_python_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let python = "/nonexistent/python3"; // never reached
    let compile = |m: &mut WarpModule| {
        m.out_dir(tmp.path())
            .python(python)
            .cargo_metadata(false)
            .compile()
            .unwrap_err()
            .to_string()
    };
    let missing = compile(&mut WarpModule::new(tmp.path().join("nope.py")));
    assert!(
        missing.contains("nope.py") && missing.contains(".py file"),
        "{missing}"
    );
    let dir = tmp.path().join("pkg");
    std::fs::create_dir(&dir).unwrap();
    let no_init = compile(&mut WarpModule::new(&dir));
    assert!(no_init.contains("__init__.py"), "{no_init}");
    let txt = tmp.path().join("kernels.txt");
    std::fs::write(&txt, "").unwrap();
    assert!(compile(&mut WarpModule::new(&txt)).contains("not a .py file"));
    let dashed = tmp.path().join("my-kernels.py");
    std::fs::write(&dashed, "").unwrap();
    let name = compile(&mut WarpModule::new(&dashed));
    assert!(
        name.contains("\"my-kernels\" is not a Python module name"),
        "{name}"
    );
    let block = compile(WarpModule::new(test_kernels()).block_dim(2048));
    assert!(
        block.contains("block_dim = 2048") && block.contains("1 to 1024"),
        "{block}"
    );
}
