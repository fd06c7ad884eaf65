//! ABI proof against the real `cuda.h`: the generated probe (tests/abi/probe.c)
//! is compiled with the `cc` crate's compiler against the header, with
//! incompatible pointer types as errors so every specified function signature
//! is checked, then run; every size, alignment, offset and value it prints
//! must equal what `cuda-sys` compiles to.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

fn run_probe() -> BTreeMap<(String, String), i64> {
    let include = sdk_tests::cuda_include_dir().unwrap_or_else(|e| panic!("{e}"));
    run_probe_of("probe", &include)
}

/// Compiles `tests/abi/<stem>.c` against `include` and runs it.
fn run_probe_of(stem: &str, include: &std::path::Path) -> BTreeMap<(String, String), i64> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out_dir = root.join("../target/abi-probe");
    std::fs::create_dir_all(&out_dir).unwrap();
    let target = std::env::var("TARGET").unwrap_or_else(|_| "x86_64-unknown-linux-gnu".into());
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .target(&target)
        .host(&target)
        .opt_level(0)
        .out_dir(&out_dir)
        .get_compiler();
    let exe = out_dir.join(stem);
    let output = compiler
        .to_command()
        .arg("-std=gnu11")
        .arg("-Werror=incompatible-pointer-types")
        .arg("-Werror=int-conversion")
        .arg("-Wno-deprecated-declarations")
        .arg(format!("-I{}", include.display()))
        .arg(root.join(format!("abi/{stem}.c")))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("the C compiler runs");
    assert!(
        output.status.success(),
        "{stem}.c does not compile against {}: a spec's signature or type differs from the header:\n{}",
        include.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let run = Command::new(&exe).output().expect("the probe runs");
    assert!(run.status.success());
    let mut facts = BTreeMap::new();
    for line in String::from_utf8(run.stdout).unwrap().lines() {
        let mut it = line.split(' ');
        let (Some(kind), Some(name), Some(value)) = (it.next(), it.next(), it.next()) else {
            panic!("bad probe line {line}")
        };
        facts.insert(
            (kind.to_string(), name.to_string()),
            value.parse::<i64>().unwrap(),
        );
    }
    facts
}

#[test]
fn every_layout_and_value_matches_the_real_header() {
    let c = run_probe();
    let rust: BTreeMap<(String, String), i64> = sdk_tests::generated::abi::facts()
        .into_iter()
        .map(|(k, n, v)| ((k.to_string(), n.to_string()), v))
        .collect();
    assert_eq!(
        rust.len(),
        sdk_tests::generated::abi::FACT_COUNT,
        "duplicate fact names in the generated table"
    );
    let mut mismatches = Vec::new();
    for (key, cv) in &c {
        match rust.get(key) {
            Some(rv) if rv == cv => {}
            Some(rv) => mismatches.push(format!("{} {}: header {cv}, cuda-sys {rv}", key.0, key.1)),
            None => mismatches.push(format!(
                "{} {}: printed by the probe but not in cuda-sys",
                key.0, key.1
            )),
        }
    }
    for key in rust.keys().filter(|k| !c.contains_key(*k)) {
        mismatches.push(format!(
            "{} {}: in cuda-sys but not printed by the probe",
            key.0, key.1
        ));
    }
    assert!(
        mismatches.is_empty(),
        "{} ABI mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    let count = |k: &str| c.keys().filter(|(kind, _)| kind == k).count();
    eprintln!(
        "ABI: {} sizes, {} alignments, {} offsets, {} values equal the header",
        count("size"),
        count("align"),
        count("offset"),
        count("value")
    );
    assert!(
        count("offset") > 500 && count("value") > 800,
        "the probe covers every record and enum"
    );
}

/// The older pinned releases (CUDA 12.0, 12.4, 12.8, 13.0): every item the
/// specs place in that release's header unchanged since (records without a
/// newer field, values, aliases, constants, functions whose parameters have
/// not changed) has cuda-sys's size, alignment, offsets, value and signature
/// there too. The headers are those `cargo xtask import` and `cargo xtask
/// test` fetch into target/cuda-cache (or `CUDA_RELEASE_INCLUDE_DIRS`,
/// `12.0=DIR;12.4=DIR;...`).
#[test]
fn every_older_release_matches_its_header() {
    let rust: BTreeMap<(String, String), i64> = sdk_tests::generated::abi::facts()
        .into_iter()
        .chain(sdk_tests::generated::abi::older_facts())
        .chain(sdk_tests::generated::abi::release_facts())
        .map(|(k, n, v)| ((k.to_string(), n.to_string()), v))
        .collect();
    for release in ["12.0", "12.4", "12.8", "13.0"] {
        let include = sdk_tests::release_include_dir(release).unwrap_or_else(|e| panic!("{e}"));
        let c = run_probe_of(&format!("probe_{release}"), &include);
        let mut mismatches = Vec::new();
        for (key, cv) in &c {
            match rust.get(key) {
                Some(rv) if rv == cv => {}
                Some(rv) => mismatches.push(format!(
                    "{} {}: CUDA {release} header {cv}, cuda-sys {rv}",
                    key.0, key.1
                )),
                None => mismatches.push(format!(
                    "{} {}: printed by the CUDA {release} probe but not in cuda-sys",
                    key.0, key.1
                )),
            }
        }
        assert!(
            mismatches.is_empty(),
            "CUDA {release}: {} ABI mismatches:\n{}",
            mismatches.len(),
            mismatches.join("\n")
        );
        let count = |k: &str| c.keys().filter(|(kind, _)| kind == k).count();
        eprintln!(
            "ABI of CUDA {release} ({}): {} sizes, {} alignments, {} offsets, {} values equal cuda-sys",
            include.display(),
            count("size"),
            count("align"),
            count("offset"),
            count("value")
        );
        assert!(
            count("offset") > 300 && count("value") > 500,
            "the CUDA {release} probe covers the records and enums of that release"
        );
    }
}

/// `nvrtc.h` of every pinned release (CUDA 12.0 … 13.5) against
/// `cuda_sys::nvrtc`: the newest header's probe (`nvrtc_probe.c`) and each
/// older one's (`nvrtc_probe_12.0.c` …) compile with every specified
/// signature assigned from the header's function, and every size and value
/// they print equals cuda-sys's.
#[test]
fn every_pinned_nvrtc_h_matches_cuda_sys() {
    let rust: BTreeMap<(String, String), i64> = sdk_tests::generated::nvrtc_abi::facts()
        .into_iter()
        .chain(sdk_tests::generated::nvrtc_abi::older_facts())
        .chain(sdk_tests::generated::nvrtc_abi::release_facts())
        .map(|(k, n, v)| ((k.to_string(), n.to_string()), v))
        .collect();
    for release in ["12.0", "12.4", "12.8", "13.0", "13.5"] {
        let include = sdk_tests::nvrtc_include_dir(release).unwrap_or_else(|e| panic!("{e}"));
        let stem = if release == "13.5" {
            "nvrtc_probe".to_string()
        } else {
            format!("nvrtc_probe_{release}")
        };
        let c = run_probe_of(&stem, &include);
        let mut mismatches = Vec::new();
        for (key, cv) in &c {
            match rust.get(key) {
                Some(rv) if rv == cv => {}
                Some(rv) => mismatches.push(format!(
                    "{} {}: CUDA {release} nvrtc.h {cv}, cuda-sys {rv}",
                    key.0, key.1
                )),
                None => mismatches.push(format!(
                    "{} {}: printed by the CUDA {release} NVRTC probe but not in cuda-sys",
                    key.0, key.1
                )),
            }
        }
        assert!(
            mismatches.is_empty(),
            "CUDA {release} NVRTC: {} ABI mismatches:\n{}",
            mismatches.len(),
            mismatches.join("\n")
        );
        let values = c.keys().filter(|(kind, _)| kind == "value").count();
        eprintln!(
            "NVRTC ABI of CUDA {release} ({}): {} facts, {values} values equal cuda-sys",
            include.display(),
            c.len()
        );
        assert!(
            values >= 12,
            "the CUDA {release} NVRTC probe prints the nvrtcResult codes"
        );
    }
}
