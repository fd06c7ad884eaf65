//! On a GPU: every module of the corpus loads (`AotModule::load` of its sm_90
//! cubin) and every generated launcher takes its kernel (`check_signature`
//! against the parameters the runtime reads from the same source), kernels
//! taking object ids included (loaded, not run).
//!
//! The corpus is `$SDK_WARP_DATA/corpus` (written by `tests/warp/build.py`,
//! carried by `cargo xtask gpu-bundle`), else the one this crate's build
//! script compiled.

use std::path::PathBuf;

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_corpus_module_loads_and_its_launchers_take_their_kernels() {
    let dir = std::env::var_os("SDK_WARP_DATA")
        .map(|d| PathBuf::from(d).join("corpus"))
        .unwrap_or_else(|| PathBuf::from(warp_corpus::CORPUS_DIR));
    // SAFETY: the corpus that tests/warp/corpus.py wrote: one Warp compile
    // per module directory.
    let results = unsafe { warp_corpus::load_every_module(&dir) };
    let mut failed = Vec::new();
    for (module, r) in &results {
        match r {
            Ok(()) => println!("{module}: loaded, launchers made"),
            Err(e) => failed.push(format!("{module}: {e}")),
        }
    }
    println!(
        "corpus: {} of {} modules loaded with their typed launchers from {}",
        results.len() - failed.len(),
        results.len(),
        dir.display()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(results.len() >= 30, "only {} modules", results.len());
}
