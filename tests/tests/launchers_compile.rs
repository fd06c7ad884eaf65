//! Compile-time checks of the checked-in typed launchers
//! (`tests/src/launchers/`): wrong arguments do not compile, and rustc's
//! message names the parameter (the launchers are compiled into each test
//! crate, as a build script's `include!` compiles them into a user's crate,
//! so rustc shows the parameter's declaration). `TRYBUILD=overwrite`
//! rewrites the `.stderr` files after a change of rustc or the launchers.
//!
//! The right arguments compile: `launchers_ui/pass.rs` is a module of this
//! test binary (below), so building the binary is that check. It is not a
//! trybuild `pass` case, because one `pass` case makes trybuild build and
//! link every case instead of only checking them (this test took 84 s
//! of CI with the `pass` case, 14 s without it).

// `rustfmt::skip`: rustfmt would follow this module into the generated
// launchers it includes, which `prettyplease` formats (the drift test
// compares them byte for byte with the generator's output).
#[allow(dead_code)]
#[rustfmt::skip]
#[path = "launchers_ui/pass.rs"]
mod pass;

#[test]
fn wrong_arguments_do_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/launchers_ui/fail_*.rs");
}
