//! CudaBuild on this machine: real NVRTC 13.0 and 12.0 from the pinned
//! wheels (installed into the shared cache on first use), no GPU.
#![cfg(feature = "cuda-c")]

use warp_build::{CudaBuild, CudaBuildError};

/// These tests name their architectures: CI's `WARP_BUILD_ARCHS` (which
/// overrides them, as a user's would) is removed once, before any test
/// reads the environment (every test calls this first).
fn without_arch_override() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: every test of this binary waits here before it reads the
        // environment, and nothing else in the process reads it meanwhile.
        unsafe { std::env::remove_var("WARP_BUILD_ARCHS") }
    });
}

const GOOD: &str = r#"
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void scale(float* a, unsigned int n, float s) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= s * FACTOR;
}
extern "C" __global__ void synced(int* a) {
    cg::this_grid().sync();
    a[0] = 1;
}
template <typename T> __global__ void fill(T* a, T v) { a[threadIdx.x] = v; }
"#;

#[test]
fn a_cu_file_compiles_to_cubins_and_ptx_with_launchers_and_is_reused() {
    without_arch_override();
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("k.cu");
    std::fs::write(&cu, GOOD).unwrap();
    let out = dir.path().join("out");
    let mut b = CudaBuild::new();
    b.file(&cu)
        .archs(["80", "90a"])
        .define("FACTOR", Some("2.0f"))
        .name_expression(&cu, "fill<double>")
        .out_dir(&out);
    let built = b.compile().unwrap();
    assert!(!built.reused());
    let f = &built.files()[0];
    assert_eq!(
        f.images,
        ["k.sm_80.cubin", "k.sm_90a.cubin", "k.compute_80.ptx"]
    );
    let ptx = std::fs::read_to_string(out.join("k.compute_80.ptx")).unwrap();
    assert!(ptx.contains(".version 8.0"), "NVRTC 12.0's ISA");
    let names: Vec<(&str, bool)> = f
        .kernels
        .iter()
        .map(|k| (k.type_name.as_str(), k.grid_sync))
        .collect();
    assert_eq!(
        names,
        [("Scale", false), ("Synced", true), ("FillDouble", false)]
    );
    assert_eq!(f.kernels[2].symbol, "_Z4fillIdEvPT_S0_");
    assert_eq!(f.kernels[2].params[0].2, "::cuda_api::DevicePtr<f64>");
    let rust = std::fs::read_to_string(built.rust_file()).unwrap();
    assert!(rust.contains("pub struct Synced") && rust.contains("pub fn launch_cooperative"));
    assert!(
        b.compile().unwrap().reused(),
        "same inputs: nothing compiled"
    );
    std::fs::write(&cu, GOOD.replace("*= s", "+= s")).unwrap();
    assert!(
        !b.compile().unwrap().reused(),
        "a changed source recompiles"
    );
}

#[test]
fn an_nvrtc_error_names_the_file_and_line() {
    without_arch_override();
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("bad.cu");
    std::fs::write(
        &cu,
        "extern \"C\" __global__ void k(float* a) {\n\n    a[0] = undefined_name;\n}\n",
    )
    .unwrap();
    let err = CudaBuild::new()
        .file(&cu)
        .archs(["80"])
        .out_dir(dir.path().join("out"))
        .compile()
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, CudaBuildError::Compile { .. }), "{msg}");
    let at = format!(
        "{}:3: error: identifier \"undefined_name\" is undefined",
        cu.canonicalize().unwrap().display()
    );
    assert!(
        msg.contains(&at)
            && msg.contains("warp_build::CudaBuild::compile")
            && msg.contains("sm_80"),
        "{msg}"
    );
}

#[test]
fn a_parameter_type_without_a_mapping_is_refused_at_its_line() {
    without_arch_override();
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("s.cu");
    std::fs::write(
        &cu,
        "struct P { float a; };\n\nextern \"C\" __global__ void k(P p, float* o) { o[0] = p.a; }\n",
    )
    .unwrap();
    let mut b = CudaBuild::new();
    b.file(&cu)
        .archs(["80"])
        .ptx(false)
        .out_dir(dir.path().join("out"));
    let msg = b.compile().unwrap_err().to_string();
    assert!(
        msg.contains("s.cu:3: kernel `k`: parameter `p` has C type `P`")
            && msg.contains("map_type"),
        "{msg}"
    );
    assert!(b.map_type("P", "[f32; 1]").compile().is_ok());
}

#[test]
fn bad_architectures_are_refused_with_what_is_allowed() {
    without_arch_override();
    let msg = CudaBuild::new()
        .file("x.cu")
        .archs(["70"])
        .compile()
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("`archs` is \"70\"") && msg.contains("sm_75"),
        "{msg}"
    );
}
