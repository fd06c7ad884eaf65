//! The run-time loader reports a missing driver as a value: which library
//! paths were tried and why each failed. No GPU or driver needed: the test
//! points the loader at a library that cannot exist.

use cuda_sys::{CUresult, cuDeviceGetCount, cuInit, loader};

#[test]
fn missing_driver_is_an_error_value_naming_the_paths_tried() {
    let bogus = "/nonexistent/cuda-sdk-test/libcuda.so.1";
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe { std::env::set_var(loader::LIBRARY_ENV, bogus) };
    // SAFETY: plain value / valid out-pointer.
    assert_eq!(unsafe { cuInit(0) }, CUresult::CUDA_ERROR_NOT_FOUND);
    let mut n = -1;
    assert_eq!(
        // SAFETY: a valid out-pointer to a local.
        unsafe { cuDeviceGetCount(&mut n) },
        CUresult::CUDA_ERROR_NOT_FOUND
    );
    assert_eq!(n, -1, "nothing was called");
    match loader::resolve("cuInit") {
        Err(e @ loader::LoaderError::LibraryNotFound { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(bogus), "{msg}");
            assert!(msg.contains(loader::LIBRARY_ENV), "{msg}");
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
    assert!(
        CUresult::CUDA_ERROR_NOT_FOUND
            .to_string()
            .starts_with("CUDA_ERROR_NOT_FOUND (500): ")
    );
    assert!(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS.is_sticky());
    assert!(!CUresult::CUDA_ERROR_INVALID_VALUE.is_sticky());
    assert_eq!(CUresult(123456).name(), None);
    assert!(CUresult(123456).to_string().contains("123456"));
}
