//! NVRTC through cuda-sys's generated bindings, without a GPU: compiling to
//! PTX needs only the library. Runs where `CUDA_SYS_NVRTC_LIBRARY` names an
//! NVRTC (a file, or a directory such as a pip wheel's `nvidia/cu13/lib`,
//! whose `libnvrtc` has no RUNPATH to find its builtins); elsewhere it says
//! so and passes.

use std::ffi::{CStr, c_char};

use cuda_sys::nvrtc::*;

#[test]
fn compiles_a_kernel_to_ptx_with_the_loaded_nvrtc() {
    if std::env::var_os(LIBRARY_ENV).is_none() {
        eprintln!("skipped: {LIBRARY_ENV} is not set");
        return;
    }
    let lib = library().unwrap_or_else(|e| panic!("{e}"));
    assert!(lib.version >= 12000, "{lib:?}");
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    let r = unsafe { nvrtcVersion(&mut major, &mut minor) };
    assert_eq!(r, nvrtcResult::NVRTC_SUCCESS, "{r}");
    assert_eq!(lib.version, major as u32 * 1000 + minor as u32 * 10);
    // The gate: a function is resolved only when the loaded NVRTC is as new.
    assert_eq!(
        supports("nvrtcGetPCHHeapSize"),
        lib.version >= 12080,
        "{:?}",
        require("nvrtcGetPCHHeapSize")
    );

    let src = c"extern \"C\" __global__ void fill(float *x) { x[threadIdx.x] = 1.0f; }";
    let mut prog: nvrtcProgram = std::ptr::null_mut();
    // SAFETY: a valid out-pointer and NUL-terminated text; no headers.
    let r = unsafe {
        nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            c"fill.cu".as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, nvrtcResult::NVRTC_SUCCESS, "{r}");
    let opts = [c"--gpu-architecture=compute_80".as_ptr()];
    // SAFETY: `prog` is live; one option string.
    let r = unsafe { nvrtcCompileProgram(prog, 1, opts.as_ptr()) };
    let mut log_size = 0;
    // SAFETY: `prog` is live; a valid out-pointer.
    unsafe { nvrtcGetProgramLogSize(prog, &mut log_size) };
    let mut log = vec![0 as c_char; log_size.max(1)];
    // SAFETY: `log` holds the size NVRTC gave.
    unsafe { nvrtcGetProgramLog(prog, log.as_mut_ptr()) };
    // SAFETY: NVRTC NUL-terminates the log.
    let log = unsafe { CStr::from_ptr(log.as_ptr()) }.to_string_lossy();
    assert_eq!(r, nvrtcResult::NVRTC_SUCCESS, "{r}: {log}");
    let mut size = 0;
    // SAFETY: `prog` is live; a valid out-pointer.
    assert!(unsafe { nvrtcGetPTXSize(prog, &mut size) }.is_success());
    let mut ptx = vec![0 as c_char; size];
    // SAFETY: `ptx` holds the size NVRTC gave.
    assert!(unsafe { nvrtcGetPTX(prog, ptx.as_mut_ptr()) }.is_success());
    // SAFETY: PTX text is NUL-terminated.
    let ptx = unsafe { CStr::from_ptr(ptx.as_ptr()) }.to_string_lossy();
    assert!(ptx.contains(".entry fill"), "{ptx}");
    // SAFETY: `prog` is live and not used after.
    assert!(unsafe { nvrtcDestroyProgram(&mut prog) }.is_success());
    assert!(prog.is_null());
}

#[test]
fn results_have_names_and_our_descriptions() {
    let e = nvrtcResult::NVRTC_ERROR_COMPILATION;
    assert_eq!(e.name(), Some("NVRTC_ERROR_COMPILATION"));
    assert_eq!(
        e.to_string(),
        "NVRTC_ERROR_COMPILATION (6): The source did not compile; the program log has the diagnostics."
    );
    assert!(
        NOT_AVAILABLE
            .to_string()
            .contains("cuda_sys::nvrtc::resolve")
    );
    assert_eq!(NOT_AVAILABLE.name(), None);
}
