//! What the corpus of Warp 1.19.0's own examples holds, read from the
//! manifest `tests/warp/corpus.py` wrote in the build script and from the
//! launchers the generator wrote: every kernel of every example that
//! imports has a typed launcher or a stated reason, and what was skipped
//! was skipped for a reason these tests accept.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value as Json;
use warp_corpus::{CORPUS_DIR, LAUNCHERS_DIR};

fn manifest() -> Json {
    let path = Path::new(CORPUS_DIR).join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("manifest.json parses")
}

fn examples(m: &Json) -> &Vec<Json> {
    m["examples"].as_array().expect("examples")
}

fn s<'a>(v: &'a Json, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("no {key} in {v}"))
}

fn launchers(example: &str, module: &str) -> String {
    let path = Path::new(LAUNCHERS_DIR)
        .join(example)
        .join(format!("{module}.rs"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The kernels the module struct holds (`pub <key>: <Type>,`) and those its
/// docs list as having no typed launcher (`/// - \`<key>\`: <reason>`).
fn generated_kernels(text: &str) -> (BTreeSet<String>, Vec<(String, String)>) {
    let mut with = BTreeSet::new();
    let mut without = Vec::new();
    let mut in_list = false;
    for line in text.lines() {
        if line.starts_with("/// Kernels without a typed launcher") {
            in_list = true;
            continue;
        }
        if in_list {
            match line.strip_prefix("/// - `") {
                Some(rest) => {
                    let (key, reason) = rest.split_once("`: ").expect("- `key`: reason");
                    without.push((key.to_string(), reason.to_string()));
                }
                None => in_list = false,
            }
        }
        if let Some(field) = line.strip_prefix("    pub ")
            && let Some((name, _)) = field.split_once(": ")
            && !name.contains(' ')
            && !name.contains('(')
        {
            with.insert(name.to_string());
        }
    }
    (with, without)
}

#[test]
fn every_kernel_of_an_imported_example_has_a_launcher_or_a_reason() {
    let m = manifest();
    let (mut kernels, mut launchers_made, mut no_launcher) = (0, 0, Vec::new());
    for e in examples(&m) {
        let example = s(e, "example");
        for module in e["modules"].as_array().expect("modules") {
            let name = s(module, "module");
            let text = launchers(example, name);
            let (with, without) = generated_kernels(&text);
            for k in module["kernels"].as_array().expect("kernels") {
                let key = s(k, "kernel");
                kernels += 1;
                if with.contains(key) {
                    launchers_made += 1;
                } else {
                    let reason = without
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, r)| r.clone())
                        .unwrap_or_else(|| {
                            panic!("{example}/{name}: kernel {key} has no launcher and no reason in the generated docs")
                        });
                    no_launcher.push(format!("{example}/{name}/{key}: {reason}"));
                }
            }
        }
    }
    let total = m["totals"]["kernels"].as_u64().expect("totals.kernels") as usize;
    assert_eq!(kernels, total);
    // Warp 1.19.0's examples: 74 kernels in 33 modules are compiled (see corpus.py's output).
    assert!(kernels >= 70, "only {kernels} kernels compiled");
    println!(
        "warp-corpus: {kernels} kernels, {launchers_made} typed launchers, {} without:",
        no_launcher.len()
    );
    for n in &no_launcher {
        println!("  {n}");
    }
    // Every kernel gets a launcher (issue 31: float16 arrays through half's
    // f16, structs holding arrays through `StructValue::with_arrays`); a
    // kernel refused again would show here with the generator's reason.
    assert!(
        no_launcher.is_empty(),
        "kernels without a launcher:\n{}",
        no_launcher.join("\n")
    );
    assert_eq!(launchers_made, kernels);
}

#[test]
fn examples_are_skipped_only_for_optional_packages() {
    let m = manifest();
    let mut skipped = Vec::new();
    for e in examples(&m) {
        if e["imported"].as_bool() == Some(false) {
            let reason = s(e, "skip_reason");
            assert!(
                reason.starts_with("optional package missing"),
                "{}: {reason}",
                s(e, "file")
            );
            skipped.push(format!("{}: {reason}", s(e, "file")));
        }
    }
    let imported = examples(&m).len() - skipped.len();
    println!("{imported} examples imported; skipped:");
    for line in &skipped {
        println!("  {line}");
    }
    // core/example_wave.py and its peers need numpy and Warp only.
    assert!(imported >= 40, "only {imported} examples imported");
}

#[test]
fn kernel_skips_are_generic_or_foreign() {
    let m = manifest();
    for e in examples(&m) {
        for skip in e["skipped"].as_array().expect("skipped") {
            let reason = s(skip, "reason");
            assert!(
                reason.starts_with("generic kernel without overloads")
                    || reason.starts_with("imported from "),
                "{}: {skip}",
                s(e, "example")
            );
        }
    }
}

#[test]
fn kernels_taking_object_ids_are_found_in_the_generated_source() {
    let m = manifest();
    let mut found = BTreeSet::new();
    for e in examples(&m) {
        for module in e["modules"].as_array().expect("modules") {
            for k in module["kernels"].as_array().expect("kernels") {
                if k["takes_ids"].as_bool() == Some(true) {
                    let params: Vec<&str> = k["id_params"]
                        .as_array()
                        .expect("id_params")
                        .iter()
                        .map(|p| p.as_str().expect("name"))
                        .collect();
                    let kinds: Vec<&str> = k["id_kinds"]
                        .as_array()
                        .expect("id_kinds")
                        .iter()
                        .map(|p| p.as_str().expect("kind"))
                        .collect();
                    found.insert(format!(
                        "{}.{}({}: {})",
                        s(e, "example"),
                        s(k, "kernel"),
                        params.join(","),
                        kinds.join(",")
                    ));
                }
            }
        }
    }
    // Read from Warp 1.19.0's examples: a hash grid in example_dem and
    // example_sph, a volume in example_nvdb, meshes in example_sample_mesh and
    // (through wp.tile_map of a function) example_tile_mcgp.
    let want: BTreeSet<String> = [
        "example_dem.apply_forces(grid: hash_grid)",
        "example_nvdb.simulate(volume: volume)",
        "example_sample_mesh.sample_mesh(mesh: mesh)",
        "example_sph.compute_density(grid: hash_grid)",
        "example_sph.get_acceleration(grid: hash_grid)",
        "example_tile_mcgp.sphere_walk(mesh_id: mesh)",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(found, want);
}

#[test]
fn launchers_name_python_files_relative_to_the_wheel() {
    let m = manifest();
    let root = s(&m, "python_root");
    for e in examples(&m) {
        for module in e["modules"].as_array().expect("modules") {
            let text = launchers(s(e, "example"), s(module, "module"));
            assert!(
                !text.contains(root),
                "{}: an absolute path in the generated launchers",
                s(module, "module")
            );
            if text.contains("pub struct") && text.contains("Defined at") {
                assert!(
                    text.contains(&format!("Defined at `warp/examples/{}:", s(e, "file"))),
                    "{}: the launchers do not name warp/examples/{}",
                    s(module, "module"),
                    s(e, "file")
                );
            }
        }
    }
}
