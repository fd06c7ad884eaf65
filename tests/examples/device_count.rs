//! Calls `cuInit` and `cuDeviceGetCount` through cuda-sys's run-time loader and
//! prints what it finds: the devices, or why the driver could not be used.
//!
//! `cargo run -p sdk-tests --example device_count`

use std::ffi::c_char;

use cuda_sys::*;

fn main() -> std::process::ExitCode {
    // SAFETY: plain value argument.
    let r = unsafe { cuInit(0) };
    if !r.is_success() {
        match loader::resolve("cuInit") {
            Err(e) => println!("driver unavailable: {e}"),
            Ok(_) => println!("cuInit failed: {r}"),
        }
        return std::process::ExitCode::from(2);
    }
    let mut count = 0;
    // SAFETY: valid out-pointer.
    let r = unsafe { cuDeviceGetCount(&mut count) };
    if !r.is_success() {
        println!("cuDeviceGetCount failed: {r}");
        return std::process::ExitCode::FAILURE;
    }
    let mut version = 0;
    // SAFETY: valid out-pointer.
    unsafe { cuDriverGetVersion(&mut version) };
    println!(
        "driver CUDA {}.{}: {count} device(s)",
        version / 1000,
        (version % 1000) / 10
    );
    for ordinal in 0..count {
        let mut dev = 0;
        let mut name = [0 as c_char; 256];
        // SAFETY: valid out-pointers; the name buffer's length is passed.
        unsafe {
            cuDeviceGet(&mut dev, ordinal);
            cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev);
        }
        // SAFETY: the driver writes a NUL-terminated string into the buffer.
        let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
        println!("device {ordinal}: {}", name.to_string_lossy());
    }
    std::process::ExitCode::SUCCESS
}
