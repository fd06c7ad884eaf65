//! Warp ABI proof: the generated probe (tests/abi/warp_probe.cpp) is compiled
//! with the C++ compiler twice, against Warp 1.19.0's own headers
//! (`WARP_NATIVE_INCLUDE_DIR`, set by `cargo xtask test`) and against our
//! `warp-launch/include/warp_launch.h`, then run. Every size, alignment,
//! offset, constant and alias it prints from Warp's headers must equal what
//! `warp-launch`'s generated Rust items compile to, and our header must print
//! exactly what Warp's does, including the coordinates its `coord` helper
//! computes and the element offsets its `address` helper computes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use warp_launch::{DTYPES, Kind};

type Facts = BTreeMap<(String, String), i64>;

fn warp_include_dir() -> PathBuf {
    let Some(dir) = std::env::var_os("WARP_NATIVE_INCLUDE_DIR") else {
        panic!(
            "WARP_NATIVE_INCLUDE_DIR is not set: run this test through `cargo xtask test` \
             (it fetches the pinned warp-lang==1.19.0 headers and sets the variable), \
             or point the variable at a directory holding warp/native/builtin.h"
        );
    };
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("warp/native/builtin.h").is_file(),
        "WARP_NATIVE_INCLUDE_DIR={} has no warp/native/builtin.h; run `cargo xtask test`",
        dir.display()
    );
    dir
}

/// Compiles and runs the probe with `include` and `defines`; its facts.
fn run_probe(name: &str, include: &Path, defines: &[&str]) -> Facts {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out_dir = root.join("../target/warp-abi-probe");
    std::fs::create_dir_all(&out_dir).unwrap();
    let target = std::env::var("TARGET").unwrap_or_else(|_| "x86_64-unknown-linux-gnu".into());
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cpp(true)
        .target(&target)
        .host(&target)
        .opt_level(0)
        .out_dir(&out_dir)
        .get_compiler();
    let exe = out_dir.join(name);
    let mut cmd = compiler.to_command();
    cmd.arg("-std=c++17")
        .arg(format!("-I{}", include.display()));
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    let output = cmd
        .arg(root.join("abi/warp_probe.cpp"))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("the C++ compiler runs");
    assert!(
        output.status.success(),
        "warp_probe.cpp ({name}) does not compile against {}: a spelling or name in specs/warp/abi.yaml is not in the header:\n{}",
        include.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let run = Command::new(&exe).output().expect("the probe runs");
    assert!(
        run.status.success(),
        "the {name} probe failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let mut facts = Facts::new();
    for line in String::from_utf8(run.stdout).unwrap().lines() {
        let mut it = line.split('\t');
        let (Some(kind), Some(key), Some(value), None) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            panic!("bad probe line {line:?}")
        };
        let value = value
            .parse::<i64>()
            .unwrap_or_else(|e| panic!("bad value in {line:?}: {e}"));
        let previous = facts.insert((kind.to_string(), key.to_string()), value);
        assert!(previous.is_none(), "the probe printed {kind} {key} twice");
    }
    facts
}

fn count(facts: &Facts, kind: &str) -> usize {
    facts.keys().filter(|(k, _)| k == kind).count()
}

#[test]
fn warp_abi_of_warp_headers_equals_generated_rust_and_our_header() {
    let warp = run_probe("warp_probe_warp", &warp_include_dir(), &["WL_PROBE_WARP"]);
    let ours_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../warp-launch/include");
    let ours = run_probe("warp_probe_ours", &ours_dir, &[]);

    let rust_list = sdk_tests::generated::warp_abi::facts();
    let rust_len = rust_list.len();
    let rust: Facts = rust_list
        .into_iter()
        .map(|(k, n, v)| ((k.to_string(), n), v))
        .collect();
    assert_eq!(rust.len(), rust_len, "duplicate keys in the Rust facts");

    let mut mismatches = Vec::new();
    // Layout facts: Warp's header against the Rust side, both ways.
    for (key, wv) in warp
        .iter()
        .filter(|((k, _), _)| k != "coord" && k != "address")
    {
        match rust.get(key) {
            Some(rv) if rv == wv => {}
            Some(rv) => {
                mismatches.push(format!("{} {}: Warp {wv}, warp-launch {rv}", key.0, key.1))
            }
            None => mismatches.push(format!(
                "{} {}: printed from Warp's headers but not in warp-launch",
                key.0, key.1
            )),
        }
    }
    for key in rust.keys().filter(|k| !warp.contains_key(*k)) {
        mismatches.push(format!(
            "{} {}: in warp-launch but not printed from Warp's headers",
            key.0, key.1
        ));
    }
    // Everything, coordinates and element offsets included: our header against Warp's.
    for (key, wv) in &warp {
        match ours.get(key) {
            Some(ov) if ov == wv => {}
            Some(ov) => mismatches.push(format!(
                "{} {}: Warp {wv}, warp_launch.h {ov}",
                key.0, key.1
            )),
            None => mismatches.push(format!(
                "{} {}: missing from warp_launch.h's probe",
                key.0, key.1
            )),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} Warp ABI mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert_eq!(ours.len(), warp.len(), "both probes print the same keys");

    // The probe covers every struct and every dtype of the table.
    assert_eq!(
        count(&warp, "size"),
        DTYPES.len() + 5,
        "sizes: every dtype, 4 launch bounds, array_t"
    );
    let aliases: usize = DTYPES.iter().map(|d| d.aliases.len()).sum();
    assert_eq!(count(&warp, "same"), aliases);
    assert!(count(&warp, "coord") > 1000 && count(&warp, "address") > 100);
    eprintln!(
        "Warp ABI: {} sizes, {} alignments, {} offsets, {} constants, {} aliases equal Warp's headers; \
         warp_launch.h agrees on those and on {} coordinates and {} element offsets",
        count(&warp, "size"),
        count(&warp, "align"),
        count(&warp, "offset"),
        count(&warp, "value"),
        count(&warp, "same"),
        count(&warp, "coord"),
        count(&warp, "address"),
    );
}

#[test]
fn warp_abi_dtype_table_is_consistent() {
    for d in DTYPES.iter() {
        assert_eq!(
            d.size,
            d.rows as usize * d.cols as usize * d.scalar.size(),
            "{}: size is rows * cols * scalar size",
            d.name
        );
        assert_eq!(
            d.align,
            d.scalar.size(),
            "{}: aligned as its scalar",
            d.name
        );
        if d.kind == Kind::Scalar {
            assert_eq!(
                d.scalar.name(),
                d.name,
                "a scalar dtype is named as its scalar"
            );
        }
    }
    let first_composite = DTYPES.iter().position(|d| d.kind != Kind::Scalar).unwrap();
    assert!(
        DTYPES[first_composite..]
            .iter()
            .all(|d| d.kind != Kind::Scalar),
        "scalars come first"
    );
}
