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

/// A proven kernel (indices are thread coordinates) and an unproven one
/// (an index read from data), in the proof grammar.
const WL: &str = r#"#include "warp_launch.h"
extern "C" __global__ void axpy(wl::launch_bounds_t<1> dim, wl::array_t<float> x,
                                wl::array_t<float> y, float a) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        wl::index(y, c.i) = a * wl::index(x, c.i) + wl::index(y, c.i);
    }
}
extern "C" __global__ void gather(wl::launch_bounds_t<1> dim, wl::array_t<float> x,
                                  wl::array_t<int> indices, wl::array_t<float> out) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        wl::index(out, c.i) = wl::index(x, wl::index(indices, c.i));
    }
}
"#;

/// The `impl` block of launcher `ty` in the generated text.
fn impl_of<'a>(rust: &'a str, ty: &str) -> &'a str {
    let start = rust
        .find(&format!("impl {ty} {{"))
        .unwrap_or_else(|| panic!("no impl {ty} in:\n{rust}"));
    let rest = &rust[start..];
    let end = rest[1..].find("\n    impl ").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

#[test]
fn a_proven_warp_launch_kernel_gets_a_safe_launcher_and_an_unproven_one_only_unsafe() {
    without_arch_override();
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("wl.cu");
    std::fs::write(&cu, WL).unwrap();
    let out = dir.path().join("out");
    let mut b = CudaBuild::new();
    // A define the proven text must not see (it would change what the
    // tokens mean): a warp_launch.h file is compiled without it.
    b.file(&cu)
        .archs(["80"])
        .define("wl", Some("oops"))
        .out_dir(&out);
    let built = b.compile().unwrap();
    let f = &built.files()[0];
    assert_eq!(f.source.as_deref(), Some("wl.read.cu"));
    assert_eq!(f.images, ["wl.sm_80.cubin", "wl.compute_80.ptx"]);
    assert_eq!(f.warning, None);
    let axpy = f.kernels[0].warp_launch.as_ref().unwrap();
    let gather = f.kernels[1].warp_launch.as_ref().unwrap();
    assert_eq!(axpy.unproven, None, "thread coordinates are proven");
    let why = gather.unproven.as_deref().expect("an index from data");
    assert!(why.starts_with("wl.cu:"), "{why}");
    let x = &axpy.params[0];
    assert_eq!((x.rust.as_str(), x.array), ("f32", Some(Some(1))));

    let rust = std::fs::read_to_string(built.rust_file()).unwrap();
    let safe = impl_of(&rust, "Axpy");
    assert!(
        safe.contains("pub fn launch(") && safe.contains("pub fn launch_on("),
        "{safe}"
    );
    assert!(!safe.contains("unsafe fn"), "{safe}");
    assert!(
        safe.contains("x: &::warp_launch::TypedArray<f32, 1usize>") && safe.contains("a: f32"),
        "{safe}"
    );
    let unsafe_ = impl_of(&rust, "Gather");
    assert!(
        unsafe_.contains("pub unsafe fn launch_unchecked<")
            && unsafe_.contains("pub unsafe fn launch_unchecked_on<")
            && !unsafe_.contains("pub fn launch")
            && !unsafe_.contains("pub fn launch_on("),
        "{unsafe_}"
    );
    // The reason is in the launcher's docs.
    let doc_line = rust
        .lines()
        .find(|l| l.contains("The `warp_launch.h` kernel `gather("))
        .unwrap();
    assert!(
        doc_line.contains("not proven") && doc_line.contains(why),
        "{doc_line}"
    );
    assert!(rust.contains("EmbeddedCudaModule::new"), "{rust}");
    assert_eq!(
        std::fs::read_to_string(out.join("wl.read.cu")).unwrap(),
        WL,
        "the embedded text is the file's"
    );
}

#[test]
fn a_warp_launch_kernel_nvrtc_warns_about_is_not_proven() {
    without_arch_override();
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("warned.cu");
    // `unused` is declared and never read: NVRTC warns (#177-D).
    let text = WL.replace(
        "wl::coord_t c = wl::coord(idx, dim);\n        wl::index(y",
        "wl::coord_t c = wl::coord(idx, dim);\n        int unused = 1;\n        wl::index(y",
    );
    assert_ne!(text, WL);
    std::fs::write(&cu, &text).unwrap();
    let mut b = CudaBuild::new();
    b.file(&cu)
        .archs(["80"])
        .ptx(false)
        .out_dir(dir.path().join("out"));
    let built = b.compile().unwrap();
    let f = &built.files()[0];
    let (line, warning) = f.warning.clone().expect("NVRTC warns");
    assert_eq!(line, 6, "{warning}");
    let axpy = f.kernels[0].warp_launch.as_ref().unwrap();
    let why = axpy.unproven.as_deref().expect("demoted by the warning");
    assert!(
        why.contains("NVRTC warns") && why.contains("warned.cu:6"),
        "{why}"
    );
}

#[test]
fn a_warp_launch_kernel_without_launch_bounds_is_refused_at_its_line() {
    without_arch_override();
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("raw.cu");
    std::fs::write(
        &cu,
        "#include \"warp_launch.h\"\n\nextern \"C\" __global__ void k(float* o) { o[0] = 1.0f; }\n",
    )
    .unwrap();
    let mut b = CudaBuild::new();
    b.file(&cu)
        .archs(["80"])
        .ptx(false)
        .out_dir(dir.path().join("out"));
    let msg = b.compile().unwrap_err().to_string();
    assert!(
        msg.contains("warp_build::CudaBuild::compile")
            && msg.contains("raw.cu:3: kernel `k`")
            && msg.contains("wl::launch_bounds_t<N>"),
        "{msg}"
    );
}

#[test]
fn a_macro_in_a_warp_launch_file_leaves_every_kernel_unproven() {
    without_arch_override();
    let dir = tempfile::tempdir().unwrap();
    let cu = dir.path().join("macro.cu");
    // A macro could change what the tokens mean: the reader refuses the
    // whole text, NVRTC compiles it as written, and no kernel is safe.
    let text = WL.replace(
        "#include \"warp_launch.h\"\n",
        "#include \"warp_launch.h\"\n#define c_i c.i\n",
    );
    std::fs::write(&cu, &text).unwrap();
    let mut b = CudaBuild::new();
    b.file(&cu)
        .archs(["80"])
        .ptx(false)
        .out_dir(dir.path().join("out"));
    let built = b.compile().unwrap();
    for k in &built.files()[0].kernels {
        let why = k.warp_launch.as_ref().unwrap().unproven.as_deref();
        assert!(
            why.is_some_and(|w| w.contains("macro.cu:2")),
            "{}: {why:?}",
            k.expression
        );
    }
    let rust = std::fs::read_to_string(built.rust_file()).unwrap();
    assert!(!impl_of(&rust, "Axpy").contains("pub fn launch"), "{rust}");
}
