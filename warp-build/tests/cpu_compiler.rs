//! A missing C++ compiler for the CPU code is a typed error naming the
//! module, the compiler tried and what to install. This binary holds one
//! test, so setting `CXX` races with nothing.

use std::path::Path;

use warp_build::{BuildError, WarpModule};

#[test]
fn a_missing_cpp_compiler_says_what_to_install() {
    // SAFETY: this test binary runs one test on one thread; nothing else
    // reads or writes the environment while it runs.
    unsafe { std::env::set_var("CXX", "/nonexistent/bin/g++-17") };
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("kernels.py");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/warp/kernels.py"),
        &src,
    )
    .unwrap();
    let err = WarpModule::new(&src)
        .archs([90])
        .ptx(false)
        .out_dir(tmp.path().join("out"))
        .cargo_metadata(false)
        .compile()
        .unwrap_err();
    let BuildError::CpuCompilerMissing {
        module, compiler, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(module, "kernels");
    assert_eq!(compiler, Path::new("/nonexistent/bin/g++-17"));
    let text = err.to_string();
    for part in [
        "warp_build::WarpModule::compile: Warp module \"kernels\"",
        "/nonexistent/bin/g++-17 could not be run",
        "g++ 9 or newer or clang 10 or newer",
        "apt-get install g++",
        "WarpModule::cpu(false)",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }

    // Without CPU code no compiler is needed.
    let c = WarpModule::new(&src)
        .archs([90])
        .ptx(false)
        .cpu(false)
        .out_dir(tmp.path().join("out"))
        .cargo_metadata(false)
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.cpu_lib(), None);
}
