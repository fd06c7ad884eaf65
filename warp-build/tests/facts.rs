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
