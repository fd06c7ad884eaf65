//! A short pass of the `spec` fuzz target (`cargo xtask fuzz --target spec`
//! runs it longer): mutated spec sets through the loader, the validator and
//! the generator never panic or hang. `FUZZ_SECONDS` / `FUZZ_ITERATIONS`
//! tune it (defaults 1 s / 300 inputs).

use xtask::fuzz::{self, engine};

#[test]
fn fuzz_spec_short_pass() {
    if !engine::selected("spec") {
        return;
    }
    let root = xtask::provision::workspace_root();
    let config = engine::Config::from_env(1.0, 300, root.join("target/fuzz"));
    let target = engine::Target {
        name: "spec",
        seeds: fuzz::spec_seeds(&root),
        tokens: fuzz::SPEC_TOKENS,
        run: &fuzz::spec_target,
    };
    assert_eq!(target.seeds.len(), 2, "the fixture set and the Warp spec");
    let report = engine::run(&target, &config);
    eprintln!("{}", report.summary());
    assert!(report.crashes.is_empty(), "{}", report.summary());
}
