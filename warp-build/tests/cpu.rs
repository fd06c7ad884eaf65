//! The CPU side of a compile, against the real Warp 1.19.0 and the host's
//! C++ compiler (no GPU): Warp's generated C++ for tests/warp/kernels.py,
//! compiled by warp-build with `cc` into a static library per module; two
//! modules with the same kernel keys linked into one program that runs
//! `saxpy` on host memory; tile kernels listed as unsupported.
//!
//! Needs Python with Warp (found as warp-build finds it), a C++17 compiler
//! (`c++`) and `nm`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use warp_build::{Compiled, WarpModule};

/// One Warp compile at a time: they share the install and the kernel cache.
static WARP: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    WARP.lock().unwrap_or_else(|e| e.into_inner())
}

fn warp_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/warp")
        .join(name)
}

/// Compiles `source` (copied into `dir` as `<module>.py`) for sm_90 and the CPU.
fn compile(dir: &Path, source: &str, module: &str, block_dim: u32) -> Compiled {
    let src = dir.join(format!("{module}.py"));
    std::fs::copy(warp_source(source), &src).unwrap();
    WarpModule::new(&src)
        .archs([90])
        .ptx(false)
        .block_dim(block_dim)
        .out_dir(dir.join(module))
        .cargo_metadata(false)
        .compile()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The symbols `nm` lists for `lib`: (type letter, name).
fn symbols(lib: &Path) -> Vec<(char, String)> {
    let out = Command::new("nm")
        .arg(lib)
        .output()
        .unwrap_or_else(|e| panic!("running nm (binutils) on {}: {e}", lib.display()));
    assert!(out.status.success(), "nm {}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace().rev();
            let name = parts.next()?;
            let kind = parts.next()?.chars().next()?;
            Some((kind, name.to_string()))
        })
        .filter(|(k, _)| k.is_ascii_alphabetic())
        .collect()
}

/// External symbols the library defines (not weak): `T`, `D`, `B`, `R`, ...
fn strong_definitions(lib: &Path) -> BTreeSet<String> {
    symbols(lib)
        .into_iter()
        .filter(|(k, _)| k.is_ascii_uppercase() && !matches!(k, 'U' | 'W' | 'V' | 'w' | 'v'))
        .map(|(_, n)| n)
        .collect()
}

fn weak_definitions(lib: &Path) -> BTreeSet<String> {
    symbols(lib)
        .into_iter()
        .filter(|(k, _)| matches!(k, 'W' | 'V'))
        .map(|(_, n)| n)
        .collect()
}

const MAIN: &str = r#"
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

extern "C" {
void wpl_kernels__saxpy__forward(const void* dim, void* args, size_t first, size_t last);
size_t wpl_kernels__saxpy__layout(size_t* out, size_t cap);
void wpl_kernels__saxpy__backward(const void* dim, void* args, void* adj, size_t first, size_t last);
void wpl_other__saxpy__forward(const void* dim, void* args, size_t first, size_t last);
size_t wpl_other__saxpy__layout(size_t* out, size_t cap);
void _wp_assert(const char* message, const char* file, unsigned line);
const char* wpl_take_assert(void);
}

// Warp's launch_bounds_t<1> and array_t<float> (warp/native/builtin.h, array.h).
struct bounds1 { uint32_t shape[1]; size_t size; size_t coord_mult; };
struct array1 { float* data; float* grad; int shape[4]; int strides[4]; uint16_t ndim; uint16_t flags; };

static array1 array(float* data, int n) {
    array1 a;
    memset(&a, 0, sizeof(a));
    a.data = data;
    a.shape[0] = n;
    a.strides[0] = sizeof(float);
    a.ndim = 1;
    return a;
}

// Packs wp_args_saxpy { float a; array_t<float> x; array_t<float> y; } at the offsets the layout gives.
static void pack(unsigned char* buf, const size_t* layout, float a, array1 x, array1 y) {
    memcpy(buf + layout[2], &a, sizeof(a));
    memcpy(buf + layout[3], &x, sizeof(x));
    memcpy(buf + layout[4], &y, sizeof(y));
}

int main() {
    size_t layout[8];
    size_t n = wpl_kernels__saxpy__layout(layout, 8);
    size_t small = wpl_kernels__saxpy__layout(layout, 1);
    printf("layout %zu values (cap 1: %zu): size %zu align %zu offsets %zu %zu %zu\n",
           n, small, layout[0], layout[1], layout[2], layout[3], layout[4]);
    size_t other[8];
    wpl_other__saxpy__layout(other, 8);

    const int N = 1000;
    float x[N], y[N], y2[N];
    for (int i = 0; i < N; ++i) { x[i] = (float)i; y[i] = 1.0f; y2[i] = 1.0f; }
    bounds1 dim = { { (uint32_t)N }, (size_t)N, 1 };
    alignas(16) unsigned char args[256] = {0};
    pack(args, layout, 2.0f, array(x, N), array(y, N));
    wpl_kernels__saxpy__forward(&dim, args, 0, 600);
    wpl_kernels__saxpy__forward(&dim, args, 600, N);
    alignas(16) unsigned char args2[256] = {0};
    pack(args2, other, 3.0f, array(x, N), array(y2, N));
    wpl_other__saxpy__forward(&dim, args2, 0, N);
    int bad = 0;
    for (int i = 0; i < N; ++i) {
        if (y[i] != 2.0f * (float)i + 1.0f) ++bad;
        if (y2[i] != 3.0f * (float)i + 1.0f) ++bad;
    }
    printf("saxpy y[999] %g other y[999] %g mismatches %d\n", y[999], y2[999], bad);

    // Backward: adj_x += a * adj_y, adj_a += sum x * adj_y (adjoints in a second struct).
    float adj_x[N], adj_y[N];
    for (int i = 0; i < N; ++i) { adj_x[i] = 0.0f; adj_y[i] = 1.0f; }
    alignas(16) unsigned char adj[256] = {0};
    pack(adj, layout, 0.0f, array(adj_x, N), array(adj_y, N));
    wpl_kernels__saxpy__backward(&dim, args, adj, 0, N);
    printf("backward adj_x[7] %g\n", adj_x[7]);

    printf("assert before: %s\n", wpl_take_assert() ? "set" : "null");
    _wp_assert("first", "k.py", 3);
    _wp_assert("second", "k.py", 4);
    const char* a = wpl_take_assert();
    printf("assert: %s\n", a ? a : "null");
    printf("assert after: %s\n", wpl_take_assert() ? "set" : "null");
    return bad == 0 ? 0 : 1;
}
"#;

#[test]
fn two_modules_with_the_same_kernels_link_into_one_program_and_run_saxpy() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let a = compile(tmp.path(), "kernels.py", "kernels", 256);
    let b = compile(tmp.path(), "kernels.py", "other", 128);

    for c in [&a, &b] {
        let names: Vec<String> = c
            .files()
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let cpp = format!("wp_{}.cpp", c.module());
        assert!(names.contains(&cpp), "{names:?}");
        assert!(!names.iter().any(|n| n.ends_with(".o")), "{names:?}");
        assert!(c.dir().join(format!("wp_{}.cpu.cpp", c.module())).is_file());
        let lib = c.cpu_lib().expect("a CPU library");
        assert_eq!(
            lib,
            c.dir().join(format!("cpu/libwpl_{}.a", c.module())),
            "library path"
        );
        assert!(lib.is_file(), "{}", lib.display());
        assert!(c.cpu_unsupported().is_empty(), "{:?}", c.cpu_unsupported());
        for k in ["saxpy", "add2d", "index4d", "chain_sin", "count_visits"] {
            assert!(
                c.cpu_kernels().iter().any(|n| n == k),
                "{k} in {:?}",
                c.cpu_kernels()
            );
        }
        assert_eq!(c.cpu_kernels().len(), c.kernels().len());
    }

    // No external symbol defined by one module is defined by the other: each
    // is a wpl_<module>__ entry point or C++ code in namespace wpl_<module>.
    let (la, lb) = (a.cpu_lib().unwrap(), b.cpu_lib().unwrap());
    let (sa, sb) = (strong_definitions(&la), strong_definitions(&lb));
    let shared: Vec<&String> = sa.intersection(&sb).collect();
    assert!(shared.is_empty(), "defined by both: {shared:?}");
    for (module, defs) in [("kernels", &sa), ("other", &sb)] {
        let c_prefix = format!("wpl_{module}__");
        let cxx = format!("{}wpl_{module}", format!("wpl_{module}").len());
        for s in defs {
            assert!(
                s.starts_with(&c_prefix) || s.contains(&cxx),
                "{module}: external symbol {s} is not the module's own"
            );
        }
        assert!(defs.contains(&format!("wpl_{module}__saxpy__forward")));
        assert!(defs.contains(&format!("wpl_{module}__saxpy__backward")));
        assert!(defs.contains(&format!("wpl_{module}__saxpy__layout")));
        // Warp's own entry points have internal linkage (here: dropped).
        assert!(!defs.contains("saxpy_cpu_forward"), "{defs:?}");
    }
    // The runtime: weak in both.
    for lib in [&la, &lb] {
        let weak = weak_definitions(lib);
        for f in [
            "_wp_assert",
            "wpl_take_assert",
            "wp_cpu_run_block",
            "wp_cpu_get_thread_idx",
            "wp_cpu_get_active_count",
            "wp_cpu_get_first_active_lane",
            "wp_cpu_tile_sync",
        ] {
            assert!(weak.contains(f), "{f} weak in {}: {weak:?}", lib.display());
        }
    }

    // Both libraries in one program: it links (one runtime) and runs saxpy.
    let main = tmp.path().join("main.cpp");
    std::fs::write(&main, MAIN).unwrap();
    let exe = tmp.path().join("main");
    let out = Command::new("c++")
        .arg("-std=c++17")
        .arg(&main)
        .arg(&la)
        .arg(&lb)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("running c++: {e}"));
    assert!(
        out.status.success(),
        "linking: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert_eq!(
        stdout,
        "layout 5 values (cap 1: 5): size 120 align 8 offsets 0 8 64\n\
         saxpy y[999] 1999 other y[999] 2998 mismatches 0\n\
         backward adj_x[7] 2\n\
         assert before: null\n\
         assert: k.py:3: first\n\
         assert after: null\n"
    );
}

#[test]
fn tile_kernels_are_listed_as_unsupported_and_the_rest_still_compiles() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let c = compile(tmp.path(), "tiles.py", "tiles", 64);
    let lib = c.cpu_lib().expect("a CPU library");
    assert!(lib.is_file());
    let unsupported: Vec<&str> = c
        .cpu_unsupported()
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    for k in [
        "scale_tiles",
        "row_sums",
        "total_sum",
        "scale_shared",
        "shifted_rows",
        "scale_unchecked",
    ] {
        assert!(unsupported.contains(&k), "{k} in {unsupported:?}");
    }
    for (k, why) in c.cpu_unsupported() {
        assert!(why.contains("cooperative block runtime"), "{k}: {why}");
        assert!(why.contains("`wp::tile"), "{k}: {why}");
    }
    assert!(c.cpu_kernels().is_empty(), "{:?}", c.cpu_kernels());
    // Nothing of the module is external but the runtime (weak): no entry points.
    let strong = strong_definitions(&lib);
    assert!(
        strong.iter().all(|s| s.contains("11wpl_tiles")),
        "{strong:?}"
    );
}

#[test]
fn cpu_false_compiles_no_cpu_code() {
    let _g = lock();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("kernels.py");
    std::fs::copy(warp_source("kernels.py"), &src).unwrap();
    let c = WarpModule::new(&src)
        .archs([90])
        .ptx(false)
        .cpu(false)
        .out_dir(tmp.path().join("out"))
        .cargo_metadata(false)
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.cpu_lib(), None);
    assert!(c.cpu_kernels().is_empty());
    let names: Vec<String> = c
        .files()
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // Sources, facts, carried declarations and cubins only
    // (WARP_BUILD_ARCHS, as CI sets it, may add architectures): no
    // wp_kernels.cpp, no CPU library.
    let mut want = vec![
        "wp_kernels.cu".to_string(),
        "wp_kernels.facts.json".to_string(),
        "wp_kernels.meta".to_string(),
        "wp_kernels.rules.json".to_string(),
    ];
    want.extend(c.archs().iter().map(|a| format!("wp_kernels.sm{a}.cubin")));
    want.sort();
    let mut names = names;
    names.sort();
    assert_eq!(names, want);
    assert!(!names.iter().any(|n| n.ends_with(".cpp")));
    assert!(!c.dir().join("cpu").exists());
}
