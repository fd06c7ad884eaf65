//! Wrong arguments to the generated launchers do not compile.

#[test]
fn wrong_arguments_fail_to_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
