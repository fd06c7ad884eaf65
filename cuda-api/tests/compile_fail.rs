//! Safe code cannot call a thin-layer wrapper that takes a raw handle
//! (`tests/ui/handle_wrapper_needs_unsafe.rs`). The typed launch API refuses, at compile time, arguments that do not fit
//! the declared parameter types: a value of another type, and `&buffer`
//! where the kernel may write (`DevicePtr<T>` needs `&mut buffer`). Device
//! pointers detached from a buffer's borrow are made only in `unsafe` code
//! (`tests/ui/detached_device_pointers_need_unsafe.rs`), and the key to the
//! argument traits' methods cannot be named outside cuda-api
//! (`tests/ui/argument_traits_key_is_private.rs`). A conditional node's body
//! handle cannot leave the call that builds it, nor be swapped with a nested
//! one (`tests/ui/conditional_body_stays_in_its_call.rs`), nor with the body
//! of another graph built in a nested closure, directly or through an outer
//! variable (`tests/ui/conditional_body_stays_in_its_graph.rs`: each build
//! closure has its own brand lifetime). Only cuda-api's plain types may be
//! viewed as other types (`tests/ui/plain_is_sealed.rs`). A `Program`'s
//! cache directory other than the checked default is chosen only in
//! `unsafe` code, and a `Compiled` cannot be built from bytes
//! (`tests/ui/cache_dir_needs_unsafe.rs`,
//! `tests/ui/compiled_is_made_only_by_a_compile.rs`).

#[test]
fn typed_launches_refuse_wrong_arguments_at_compile_time() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
