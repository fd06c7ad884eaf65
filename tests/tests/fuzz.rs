//! Bounded mutation fuzzing of the parsers behind cuda-api's and
//! warp-launch's `#[doc(hidden)] fuzzing` entry points: `image` (the
//! cubin/fatbin/PTX validator), `warp-cu` and `warp-meta` (the readers of
//! Warp's generated `.cu` and `.meta`). A short pass runs in `cargo xtask
//! test`; `cargo xtask fuzz` runs it longer in release. Environment:
//! `FUZZ_SECONDS` (per target, default 1), `FUZZ_ITERATIONS` (default
//! 3000), `FUZZ_SEED`, `FUZZ_INPUT_MS`, `FUZZ_TARGET` (comma-separated
//! names), `FUZZ_OUT` (default `target/fuzz`). Crashing and hanging inputs
//! are saved under `FUZZ_OUT/<target>/` and fail the test.

#[path = "../../xtask/src/fuzz/engine.rs"]
mod engine;

use std::path::{Path, PathBuf};

use engine::{Config, Target, seeds_from, selected};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

const IMAGE_TOKENS: &[&[u8]] = &[
    b"\x7fELF\x02\x01\x01",
    b"\x50\xed\x55\xba\x01\x00\x10\x00",
    b"\xb1\x43\x62\x46",
    b"\x28\xb5\x2f\xfd",
    b"\xbe\x00",
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x40\x00\x00\x00",
    b".version 9.0\n",
    b".target sm_90\n",
    b"\0",
];

const CU_TOKENS: &[&[u8]] = &[
    b"struct ",
    b"{",
    b"}",
    b"};\n",
    b"(",
    b")",
    b",",
    b";",
    b"<",
    b">",
    b"::",
    b"extern \"C\" {",
    b"extern \"C\" __global__ void ",
    b"_cuda_kernel_forward(",
    b"_cuda_kernel_backward(",
    b"wp::launch_bounds_t<1> dim",
    b"wp::array_t<wp::float32> ",
    b"wp::float32 ",
    b"wp::vec_t<3,wp::float32> ",
    b"wp::array_t<",
    b"wp_struct_",
    b"//",
    b"/*",
    b"*/",
    b"\"",
    b"#define ",
    b"\n",
    b"var_",
    b"[",
    b"]",
];

const META_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"_cuda_kernel_forward_smem_bytes",
    b"0",
    b"-1",
    b"4294967296",
    b"1e400",
    b"null",
    b"true",
    b"\\u0000",
];

#[test]
fn fuzz_parsers() {
    let config = Config::from_env(1.0, 3000, root().join("target/fuzz"));
    let image_dir = root().join("cuda-api/tests/fixtures/images");
    let warp_dir = root().join("warp-launch/tests/fixtures");
    let targets = [
        Target {
            name: "image",
            seeds: seeds_from(&image_dir, &["cubin", "fatbin", "ptx"]),
            tokens: IMAGE_TOKENS,
            run: &cuda_api::fuzzing::image,
        },
        Target {
            name: "warp-cu",
            seeds: seeds_from(&warp_dir, &["cu"]),
            tokens: CU_TOKENS,
            run: &warp_launch::fuzzing::cu,
        },
        Target {
            name: "warp-meta",
            seeds: seeds_from(&warp_dir, &["meta"]),
            tokens: META_TOKENS,
            run: &warp_launch::fuzzing::meta,
        },
    ];
    let mut failed = Vec::new();
    for t in targets.iter().filter(|t| selected(t.name)) {
        assert!(!t.seeds.is_empty(), "{}: no seed inputs found", t.name);
        let report = engine::run(t, &config);
        eprintln!("{}", report.summary());
        if !report.crashes.is_empty() {
            failed.push(report.summary());
        }
    }
    assert!(
        failed.is_empty(),
        "fuzzing found crashes:\n{}",
        failed.join("\n")
    );
}
