//! The launchers `tests/tests/gpu_corpus.rs` runs on the GPU are checked in
//! (sdk-tests builds without Python): under `tests/tests/gpu_corpus/<example>/<module>.rs`,
//! byte-identical to what the generator writes in this crate's build script.
//! `WARP_CORPUS_BLESS=1 cargo test -p warp-corpus --test drift` rewrites them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use warp_corpus::LAUNCHERS_DIR;

/// The examples whose launch sequences `tests/warp/corpus.py` records
/// (`DRIVERS`) and `gpu_corpus.rs` replays: all their modules are checked in.
const CHECKED_IN: &[&str] = &[
    "example_wave",
    "example_fluid",
    "example_fdtd_3d",
    "example_graph_capture",
    "example_tile_fft",
    "example_tile_convolution",
    "example_tile_filtering",
    "example_alloc_tracker",
];

fn checked_in_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/gpu_corpus")
}

fn rs_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".rs"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn checked_in_launchers_equal_the_generated_ones() {
    let bless = std::env::var_os("WARP_CORPUS_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    let mut checked = 0;
    for example in CHECKED_IN {
        let generated = Path::new(LAUNCHERS_DIR).join(example);
        let kept = checked_in_dir().join(example);
        let want = rs_files(&generated);
        assert!(
            !want.is_empty(),
            "{}: no launchers generated",
            generated.display()
        );
        if bless {
            std::fs::create_dir_all(&kept).expect("create the checked-in directory");
            for extra in rs_files(&kept).difference(&want) {
                std::fs::remove_file(kept.join(extra)).expect("remove a stale file");
            }
            for file in &want {
                std::fs::copy(generated.join(file), kept.join(file))
                    .expect("write the checked-in copy");
            }
        }
        let have = rs_files(&kept);
        if have != want {
            stale.push(format!(
                "{}: files {have:?}, generated {want:?}",
                kept.display()
            ));
        }
        for file in &want {
            let text = std::fs::read_to_string(generated.join(file)).expect("generated file");
            let path = kept.join(file);
            match std::fs::read_to_string(&path) {
                Ok(old) if old == text => checked += 1,
                _ => stale.push(format!(
                    "{} differs from the generator's output",
                    path.display()
                )),
            }
        }
    }
    let extra: Vec<String> = std::fs::read_dir(checked_in_dir())
        .expect("tests/tests/gpu_corpus")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !CHECKED_IN.contains(&n.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "{}: {extra:?} are not launchers of the examples gpu_corpus runs",
        checked_in_dir().display()
    );
    assert!(
        stale.is_empty(),
        "{}\nrun `WARP_CORPUS_BLESS=1 cargo test -p warp-corpus --test drift` and review the diff",
        stale.join("\n")
    );
    println!("{checked} checked-in launcher files equal the generator's output");
}
