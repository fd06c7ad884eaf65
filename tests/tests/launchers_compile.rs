//! Compile-time checks of the checked-in typed launchers
//! (`tests/src/launchers/`): wrong arguments do not compile, and rustc's
//! message names the parameter (the launchers are compiled into each test
//! crate, as a build script's `include!` compiles them into a user's crate,
//! so rustc shows the parameter's declaration). `TRYBUILD=overwrite`
//! rewrites the `.stderr` files after a change of rustc or the launchers.

#[test]
fn wrong_arguments_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.pass("tests/launchers_ui/pass.rs");
    t.compile_fail("tests/launchers_ui/fail_*.rs");
}
