//! compile.py's comparison of Warp's CPU code with its CUDA code
//! (`same_body`), run by the interpreter on Warp 1.19.0's real output for
//! the attack modules (`warp-launch/tests/fixtures/attacks/`): equal bodies
//! pass, and an edited CPU body, an edited contiguous prologue or a line
//! splice is found, naming the line. Needs `python3` (no Warp: the
//! comparison reads text only).

use std::path::Path;
use std::process::Command;

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../warp-launch/tests/fixtures/attacks"
);

/// `same_body(cu, cpp, key, direction)` of compile.py: `None` when equal,
/// else its reason.
fn same_body(cu: &str, cpp: &str, key: &str, direction: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.cu"), cu).unwrap();
    std::fs::write(dir.path().join("a.cpp"), cpp).unwrap();
    let script = format!(
        "import sys, json\nsys.path.insert(0, {src:?})\nimport compile as c\n\
         read = lambda n: open(n, encoding='utf-8').read().splitlines()\n\
         print(json.dumps(c.same_body(read(sys.argv[1]), read(sys.argv[2]), {key:?}, {direction:?})))",
        src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src")
            .display()
            .to_string(),
    );
    let out = Command::new("python3")
        .arg("-B")
        .arg("-c")
        .arg(script)
        .arg(dir.path().join("a.cu"))
        .arg(dir.path().join("a.cpp"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(FIXTURES).join(name)).unwrap()
}

#[test]
fn warps_cpu_bodies_equal_its_cuda_bodies() {
    for (module, keys) in [
        ("native_poke", &["native_poke"][..]),
        ("local_components", &["vec_local_write", "shape_index"][..]),
        ("contiguous_cpu", &["contig_fill"][..]),
    ] {
        let cu = fixture(&format!("wp_{module}.cu"));
        let cpp = fixture(&format!("wp_{module}.cpp"));
        for key in keys {
            for direction in ["forward", "backward"] {
                assert_eq!(
                    same_body(&cu, &cpp, key, direction),
                    None,
                    "{key} {direction}"
                );
            }
        }
    }
}

#[test]
fn an_edited_cpu_body_is_found_with_its_line() {
    let cu = fixture("wp_contiguous_cpu.cu");
    let cpp = fixture("wp_contiguous_cpu.cpp");
    for (from, to, says) in [
        (
            "    wp::array_store(var_x, var_0, var_1);",
            "    wp::array_store(var_x, var_0 + 1, var_1);",
            "of the forward body differs: `wp::array_store(var_x, var_0, var_1);` in the .cu",
        ),
        (
            "wp_contiguous_args.x.strides[0] = sizeof(wp::float32);",
            "wp_contiguous_args.x.strides[0] = 1;",
            "not in the form Warp 1.19.0 writes",
        ),
        (
            "    wp::int32 var_0;",
            "    wp::int32 var_0; \\",
            "line splice",
        ),
        (
            "    wp::array_t<wp::float32> var_x = _wp_args->x;",
            "    wp::array_t<wp::float64> var_x = _wp_args->x;",
            "take different arguments",
        ),
    ] {
        let edited = cpp.replacen(from, to, 1);
        assert_ne!(edited, cpp, "{from}");
        let why = same_body(&cu, &edited, "contig_fill", "forward")
            .unwrap_or_else(|| panic!("{to}: found equal"));
        assert!(why.contains(says), "{to}: {why}");
    }
    // A CPU `continue;` where CUDA has `return;` is no prefix: refused.
    let cu_return = cu.replacen(
        "        wp::array_store(var_x, var_0, var_1);",
        "        wp::array_store(var_x, var_0, var_1);\n        return;",
        1,
    );
    let cpp_continue = cpp.replacen(
        "    wp::array_store(var_x, var_0, var_1);",
        "    wp::array_store(var_x, var_0, var_1);\n    continue;",
        1,
    );
    assert!(same_body(&cu_return, &cpp_continue, "contig_fill", "forward").is_some());
    // The other way is what Warp writes for a kernel's `return`.
    let cu_continue = cu.replacen(
        "        wp::array_store(var_x, var_0, var_1);",
        "        wp::array_store(var_x, var_0, var_1);\n        continue;",
        1,
    );
    let cpp_return = cpp.replacen(
        "    wp::array_store(var_x, var_0, var_1);",
        "    wp::array_store(var_x, var_0, var_1);\n    return;",
        1,
    );
    assert_eq!(
        same_body(&cu_continue, &cpp_return, "contig_fill", "forward"),
        None
    );
}

/// One Warp compile at a time (they share the install and the kernel
/// cache), as in `compile.rs`.
static WARP: std::sync::Mutex<()> = std::sync::Mutex::new(());

const NATIVES: &str = r#"
import warp as wp

POKE = """//---------
    *(float*)(addr) = val;
"""


@wp.func_native(POKE, "//---------\n")
def poke(addr: wp.uint64, val: float): ...


@wp.func
def helper(addr: wp.uint64, val: float):
    poke(addr, val)
"#;

const CHAIN: &str = r#"
import warp as wp
import natives

PREAMBLE = PREAMBLE_VALUE
if PREAMBLE:
    wp.set_module_options({"extra_build_options": wp.ModuleBuildOptions(extra_cpu_preamble=PREAMBLE)})


@wp.func
def outer(addr: wp.uint64, val: float):
    natives.helper(addr, val)


@wp.kernel
def via_chain(x: wp.array(dtype=float), addr: wp.uint64):
    i = wp.tid()
    x[i] = 1.0
    outer(addr, 2.0)


@wp.kernel
def plain(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = 1.0
"#;

/// The facts warp-build writes for `chain.py` (with `preamble` as its CPU
/// preamble, Python text), compiled with its CPU code.
fn chain_facts(preamble: &str) -> serde_json::Value {
    let _g = WARP.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("natives.py"), NATIVES).unwrap();
    let src = tmp.path().join("chain.py");
    std::fs::write(&src, CHAIN.replace("PREAMBLE_VALUE", preamble)).unwrap();
    let c = warp_build::WarpModule::new(&src)
        .archs([90])
        .ptx(false)
        .cpu(true)
        .out_dir(tmp.path().join("out"))
        .cargo_metadata(false)
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&std::fs::read_to_string(c.dir().join("wp_chain.facts.json")).unwrap())
        .unwrap()
}

/// Warp's objects say which kernel reaches native code of another module
/// through two `@wp.func`s, on both devices; a CPU preamble is the CPU's
/// only.
#[test]
fn native_code_through_a_chain_of_functions_of_another_module_and_a_cpu_preamble() {
    use serde_json::json;
    let f = chain_facts("\"\"");
    let native = json!([{"function": "poke", "module": "natives", "symbol": "poke_0"}]);
    for device in ["cuda", "cpu"] {
        assert_eq!(f[device]["native"], native, "{device}: {f}");
        assert_eq!(f[device]["preamble"], false, "{device}");
        assert_eq!(
            f["kernels"]["via_chain"][device],
            json!([["outer", "helper", "poke"]]),
            "{device}: {f}"
        );
        assert_eq!(f["kernels"]["plain"][device], json!([]), "{device}");
    }
    assert_eq!(f["kernels"]["plain"]["cpu_body"], serde_json::Value::Null);
    let f = chain_facts("\"// a CPU preamble\\n\"");
    assert_eq!(f["cpu"]["preamble"], true, "{f}");
    assert_eq!(f["cuda"]["preamble"], false, "{f}");
}
