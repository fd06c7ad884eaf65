//! Compile-fail tests: what the type system must refuse.

#[test]
fn refused_at_compile_time() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
