//! The environment overrides. This binary holds one test, so setting
//! variables races with nothing.

use std::path::Path;

use warp_build::{BuildError, ENV_ARCHS, ENV_PYTHON, WarpModule};

fn set(var: &str, value: Option<&str>) {
    // SAFETY: this test binary runs one test on one thread; nothing else
    // reads or writes the environment while it runs.
    unsafe {
        match value {
            Some(v) => std::env::set_var(var, v),
            None => std::env::remove_var(var),
        }
    }
}

#[test]
fn environment_overrides() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/warp/kernels.py");
    let tmp = tempfile::tempdir().unwrap();
    let mut module = WarpModule::new(&kernels);
    module
        .archs([80])
        .ptx(false)
        .out_dir(tmp.path())
        .cargo_metadata(false);

    // Without the variable the builder's list counts; an empty one is refused.
    set(ENV_ARCHS, None);
    let err = WarpModule::new(&kernels)
        .archs([])
        .out_dir(tmp.path())
        .compile()
        .unwrap_err();
    assert!(err.to_string().contains("archs = []"), "{err}");

    // A list that does not parse.
    set(ENV_ARCHS, Some("90,eighty"));
    let err = module.compile().unwrap_err();
    assert!(matches!(err, BuildError::InvalidEnv { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("WARP_BUILD_ARCHS=\"90,eighty\"") && msg.contains("`90,80`"),
        "{msg}"
    );

    // An interpreter that does not exist: the error says what to install.
    set(ENV_ARCHS, Some("sm_90"));
    set(ENV_PYTHON, Some("/nonexistent/python3"));
    let err = module.compile().unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, BuildError::PythonNotFound { .. }), "{msg}");
    assert!(
        msg.contains("/nonexistent/python3 (from WARP_BUILD_PYTHON)")
            && msg.contains("Python 3.10 or newer with pip")
            && msg.contains("apt-get install python3 python3-pip"),
        "{msg}"
    );

    // An architecture Warp's NVRTC does not compile: the error lists those it does.
    set(ENV_PYTHON, None);
    set(ENV_ARCHS, Some("90, 61"));
    let err = module.compile().unwrap_err();
    let msg = err.to_string();
    match &err {
        BuildError::UnsupportedArch {
            unsupported,
            supported,
            ..
        } => {
            assert_eq!(unsupported, &[61]);
            assert!(supported.contains(&90) && supported.contains(&75), "{msg}");
        }
        _ => panic!("{msg}"),
    }
    assert!(msg.contains("sm_61") && msg.contains("75,80,86"), "{msg}");

    // WARP_BUILD_ARCHS wins over WarpModule::archs.
    set(ENV_ARCHS, Some("sm_90"));
    let compiled = module.compile().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(compiled.archs(), [90]);
    assert!(compiled.dir().join("wp_kernels.sm90.cubin").is_file());
    assert!(!compiled.dir().join("wp_kernels.sm80.cubin").exists());
    set(ENV_ARCHS, None);
}
