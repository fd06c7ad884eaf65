//! The declarations read from Warp's output: array dimensions, unknown
//! types, access rules and the version checks.

use std::collections::BTreeMap;

use super::*;

const CU: &str = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.cu");
const META: &str = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.meta");

fn decl(key: &str) -> KernelDecl {
    declarations(CU, "wp_kernels.cu", META, "wp_kernels.meta")
        .unwrap()
        .into_iter()
        .find(|d| d.key == key)
        .unwrap()
        .decl
}

fn ndim_hints_of(text: &str, key: &str) -> BTreeMap<String, u8> {
    let src = parse_cu(text, "x.cu").unwrap();
    let ctx = ModuleContext::new(text, &src);
    ctx.signatures
        .get(key)
        .map(|l| ndim_hints(l, key))
        .unwrap_or_default()
}

#[test]
fn warp_kernels_keep_the_block_size_they_were_compiled_for() {
    assert_eq!(decl("saxpy").block_dim, Some(256));
}

#[test]
fn ndim_comes_from_the_python_signature() {
    let h = ndim_hints_of(CU, "lean_fill");
    assert_eq!(h.get("out"), Some(&2));
    let h = ndim_hints_of(CU, "index4d");
    assert_eq!(h.get("out"), Some(&4));
    let h = ndim_hints_of(CU, "saxpy");
    assert_eq!((h.get("x"), h.get("y")), (Some(&1), Some(&1)));
    // Warp's subscript annotations.
    let h = ndim_hints(
        "// def k(a: wp.array[float], b: wp.array[wp.vec3, Literal[2]], c: wp.array3d[float], d: wp.array[float, 4], e: wp.array[float, x]):",
        "k",
    );
    assert_eq!(
        h.into_iter().collect::<Vec<_>>(),
        [
            ("a".into(), 1),
            ("b".into(), 2),
            ("c".into(), 3),
            ("d".into(), 4)
        ]
    );
    // Parameters are split with source's tokenizer: a `)` or `,` in a
    // string does not end or split one (the old character splitter read
    // one parameter named `b"], b` here, and lost `c`).
    let h = ndim_hints(
        r#"// def k(s: Literal[")", "a,b"], b: wp.array2d(dtype=float), c: wp.array(dtype=float, ndim=3)):"#,
        "k",
    );
    assert_eq!(
        h.into_iter().collect::<Vec<_>>(),
        [("b".into(), 2), ("c".into(), 3)]
    );
    // add2d's signature spans lines, so the body's indexing decides.
    assert!(ndim_hints_of(CU, "add2d").is_empty());
    let add2d = decl("add2d");
    assert!(
        add2d
            .params
            .iter()
            .all(|p| matches!(p.kind, ParamKind::Array { ndim: Some(2), .. }))
    );
}

#[test]
fn unknown_types_are_errors_naming_file_and_line() {
    let text = "extern \"C\" __global__ void k_cuda_kernel_forward(\n    wp::launch_bounds_t<1> dim,\n    wp::indexedarray_t<wp::float32> var_x)\n{\n}\n";
    let src = parse_cu(text, "x.cu").unwrap();
    let e = declare_kernel(
        &src.kernels[0],
        None,
        &ModuleContext::new(text, &src),
        "x.cu",
    )
    .unwrap_err();
    insta::assert_snapshot!("unknown_type", e.to_string());
}

#[test]
fn access_rules_reach_the_declarations() {
    let text = include_str!("../../../warp-launch/tests/fixtures/wp_access.cu");
    let meta = include_str!("../../../warp-launch/tests/fixtures/wp_access.meta");
    let d = declarations(text, "wp_access.cu", meta, "wp_access.meta").unwrap();
    let get = |k: &str| &d.iter().find(|d| d.key == k).unwrap().decl;
    assert!(matches!(get("fill").accesses(Pass::Forward), Accesses::Checked(l) if l.len() == 1));
    assert!(matches!(get("fill").accesses(Pass::Adjoint), Accesses::Checked(l) if l.len() == 2));
    for k in ["gather", "shifted", "row_sum", "call_func", "row_view"] {
        assert!(
            matches!(get(k).accesses(Pass::Forward), Accesses::Unproven(_)),
            "{k}"
        );
    }
    // A struct holding an array: its accesses are the held array's
    // (`h.data`); the backward kernel, through the struct's adjoint, is
    // unproven.
    let Accesses::Checked(l) = get("through_struct").accesses(Pass::Forward) else {
        panic!("through_struct is proven");
    };
    assert_eq!(l[0].param, "h.data");
    let Accesses::Unproven(u) = get("through_struct").accesses(Pass::Adjoint) else {
        panic!("through_struct's backward kernel is unproven");
    };
    assert_eq!(u.param, "h");
    assert!(u.reason.contains("held arrays"), "{}", u.reason);
    // Every kernel of kernels.py is checkable.
    for d in declarations(CU, "wp_kernels.cu", META, "wp_kernels.meta").unwrap() {
        assert!(
            matches!(d.decl.accesses(Pass::Forward), Accesses::Checked(_)),
            "{}",
            d.key
        );
        assert!(
            matches!(d.decl.accesses(Pass::Adjoint), Accesses::Checked(_)),
            "{}",
            d.key
        );
    }
    // A module that builds arrays from raw addresses: every kernel.
    let raw = CU.replacen(
        "var_0 = builtin_tid1d();",
        "var_0 = builtin_tid1d(); var_9 = wp::array_t<wp::float32>(var_p, var_n);",
        1,
    );
    for d in declarations(&raw, "raw.cu", META, "wp_kernels.meta").unwrap() {
        assert!(
            matches!(d.decl.accesses(Pass::Forward), Accesses::Unproven(_)),
            "{}",
            d.key
        );
    }
}

#[test]
fn modules_of_other_warp_versions_are_refused() {
    assert!(version::check_warp_version(CU, "wp_kernels.cu").is_ok());
    // Without the bfloat16 define, and with another block size.
    let plain = CU
        .strip_prefix("#define WP_NO_BFLOAT16\n")
        .unwrap()
        .replace("WP_TILE_BLOCK_DIM 256", "WP_TILE_BLOCK_DIM 64");
    assert!(version::check_warp_version(&plain, "x.cu").is_ok());
    // A header without the WP_ENABLE_SMEM_SPILLING block (as 1.16.0's).
    let older = CU.replace(
        "// Allow PTXAS to spill registers into shared memory.",
        "// (an older header)",
    );
    let e = version::check_warp_version(&older, "old.cu")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("old.cu:37: not written by Warp 1.19.0"),
        "{e}"
    );
    assert!(
        e.contains("is `// (an older header) CUDA Toolkit 13.0`"),
        "{e}"
    );
    assert!(e.contains("warp-lang==1.19.0"), "{e}");
    let e =
        version::check_warp_version("extern \"C\" __global__ void k() {}", "bare.cu").unwrap_err();
    assert!(e.to_string().contains("not written by Warp 1.19.0"), "{e}");
    // .meta keys Warp 1.19.0 does not write; a version key, if present.
    let meta = |t: &str| parse_meta(t, "m.meta").unwrap();
    assert!(version::check_meta_version(&meta(META), "m.meta").is_ok());
    assert!(version::check_meta_version(&meta("{\"warp_version\": \"1.19.0\"}"), "m.meta").is_ok());
    let e =
        version::check_meta_version(&meta("{\"warp_version\": \"1.20.0\"}"), "m.meta").unwrap_err();
    assert!(
        e.to_string().contains("Warp 1.20.0") && e.to_string().contains("Warp 1.19.0"),
        "{e}"
    );
    let e = version::check_meta_version(&meta("{\"k_block_dim\": 256}"), "m.meta").unwrap_err();
    assert!(e.to_string().contains("\"k_block_dim\""), "{e}");
}
