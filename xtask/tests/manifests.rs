//! Every crate of the workspace is one people can depend on (issue 21, at
//! 38e7deb `rust-version` sat in `[workspace.package]` and no crate
//! inherited it): each declares its minimum Rust version, license,
//! repository and description; none declares a version below what its own
//! dependencies declare; the published ones (cuda-sys, cuda-api, warp-build,
//! warp-proof, warp-launch) carry a readme and docs.rs metadata, and name their
//! workspace dependencies with a version (`cargo package` needs it).
//!
//! The rule (the machines carry one toolchain, so no build with the minimum
//! runs): the libraries need Rust 1.88 (let-chains), the workspace's
//! `rust-version`, which they inherit; xtask needs 1.89 (serde-saphyr 2.2).
//! Read from `cargo metadata`, which resolves the inheritance.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// The workspace's minimum Rust version.
const MSRV: (u32, u32, u32) = (1, 88, 0);

/// The crates published to crates.io.
const PUBLISHED: &[&str] = &[
    "cuda-sys",
    "cuda-api",
    "warp-build",
    "warp-proof",
    "warp-launch",
];

fn metadata() -> Value {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

fn version(v: &str) -> (u32, u32, u32) {
    let mut it = v.split('.').map(|p| p.parse::<u32>().expect("a number"));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

#[test]
fn every_crate_declares_its_msrv_and_package_metadata() {
    let m = metadata();
    let members: BTreeSet<&str> = m["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let packages: BTreeMap<&str, &Value> = m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p))
        .collect();
    // Each package's dependencies that are built for it (normal and build;
    // dev ones only for the package itself, when its tests build).
    let nodes: BTreeMap<&str, &Value> = m["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let deps_of = |id: &str, with_dev: bool| -> Vec<&str> {
        nodes[id]["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| with_dev || k["kind"].as_str() != Some("dev"))
            })
            .map(|d| d["pkg"].as_str().unwrap())
            .collect()
    };
    let mut problems = Vec::new();
    let mut published_seen = BTreeSet::new();
    for id in &members {
        let p = packages[id];
        let name = p["name"].as_str().unwrap();
        let Some(rv) = s(p, "rust_version") else {
            problems.push(format!(
                "{name}: no rust-version (add `rust-version.workspace = true`)"
            ));
            continue;
        };
        if version(rv) < MSRV {
            problems.push(format!(
                "{name}: rust-version {rv} is below the workspace's 1.88 (the code uses let-chains)"
            ));
        }
        for key in ["license", "repository", "description"] {
            if s(p, key).is_none() {
                problems.push(format!("{name}: no {key} (inherit it from the workspace)"));
            }
        }
        // Every dependency it builds, transitively, declares no higher minimum.
        let mut seen = BTreeSet::new();
        let mut todo = deps_of(id, true);
        while let Some(d) = todo.pop() {
            if !seen.insert(d) {
                continue;
            }
            todo.extend(deps_of(d, false));
            if let Some(drv) = s(packages[d], "rust_version")
                && version(drv) > version(rv)
            {
                problems.push(format!(
                    "{name}: rust-version {rv}, but its dependency {} {} needs {drv}",
                    packages[d]["name"].as_str().unwrap(),
                    packages[d]["version"].as_str().unwrap()
                ));
            }
        }
        let published = p["publish"].as_array().is_none_or(|a| !a.is_empty());
        assert_eq!(
            published,
            PUBLISHED.contains(&name),
            "{name}: publish = false unless it is one of {PUBLISHED:?}"
        );
        if !published {
            continue;
        }
        published_seen.insert(name);
        if rv != "1.88" {
            problems.push(format!(
                "{name}: a library declares the workspace's 1.88, not {rv}"
            ));
        }
        if s(p, "readme").is_none() {
            problems.push(format!("{name}: no readme"));
        }
        // Every feature documented: `all-features = true`, or (warp-launch,
        // whose `candle-cuda` runs nvcc at compile time) every feature but
        // those that need a CUDA toolkit, listed.
        let docs = &p["metadata"]["docs"]["rs"];
        let listed = docs["features"].as_array().map(|l| {
            let l: Vec<&str> = l.iter().filter_map(Value::as_str).collect();
            p["features"]
                .as_object()
                .unwrap()
                .keys()
                .all(|f| f == "default" || f.ends_with("-cuda") || l.contains(&f.as_str()))
        });
        if docs["all-features"] != Value::Bool(true) && listed != Some(true) {
            problems.push(format!(
                "{name}: no [package.metadata.docs.rs] all-features = true (or a features list naming every feature but the *-cuda ones)"
            ));
        }
        for d in p["dependencies"].as_array().unwrap() {
            if d.get("path").is_some_and(|p| !p.is_null())
                && d["kind"].as_str() != Some("dev")
                && d["req"].as_str() == Some("*")
            {
                problems.push(format!(
                    "{name}: its dependency {} has a path but no version (cargo package refuses it)",
                    d["name"].as_str().unwrap()
                ));
            }
        }
    }
    assert_eq!(published_seen.len(), PUBLISHED.len(), "{published_seen:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The workspace's own `rust-version` is the minimum this test holds the
/// libraries to.
#[test]
fn the_workspace_declares_1_88() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let text = std::fs::read_to_string(root).unwrap();
    let section = text
        .split("[workspace.package]")
        .nth(1)
        .expect("a [workspace.package] table");
    let section = section.split("\n[").next().unwrap();
    assert!(
        section
            .lines()
            .any(|l| l.trim() == "rust-version = \"1.88\""),
        "{section}"
    );
}

/// xtask generates cuda-sys, cuda-api and warp-proof's ABI tables, so its
/// own build never includes them (warp-build's `ptx-fallback`, which needs
/// the first two, stays off for it): a broken generated file can always be
/// regenerated.
#[test]
fn xtask_never_depends_on_the_crates_it_generates() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "xtask",
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.lines().any(|l| l.starts_with("warp-build ")), "{tree}");
    let generated: Vec<&str> = tree
        .lines()
        .filter(|l| {
            ["cuda-sys ", "cuda-api ", "warp-proof ", "warp-launch "]
                .iter()
                .any(|c| l.starts_with(c))
        })
        .collect();
    assert!(generated.is_empty(), "xtask depends on {generated:?}");
}
