//! End-to-end: the loader finds the real driver and answers through it.

use cuda_sys::{
    CUresult, cuDeviceGet, cuDeviceGetCount, cuDeviceGetName, cuDriverGetVersion, cuInit, loader,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn driver_loads_and_reports_devices() {
    // SAFETY: plain values and valid out-pointers throughout.
    let r = unsafe { cuInit(0) };
    assert_eq!(
        r,
        CUresult::CUDA_SUCCESS,
        "cuInit: {r}; loader: {:?}",
        loader::resolve("cuInit").err()
    );
    let mut version = 0;
    // SAFETY: a valid out-pointer to a local.
    assert!(unsafe { cuDriverGetVersion(&mut version) }.is_success());
    assert!(version >= 13000, "driver supports CUDA {version}");
    let mut count = 0;
    // SAFETY: a valid out-pointer to a local.
    assert!(unsafe { cuDeviceGetCount(&mut count) }.is_success());
    assert!(count >= 1);
    let mut dev = 0;
    // SAFETY: a valid out-pointer to a local and a plain ordinal.
    assert!(unsafe { cuDeviceGet(&mut dev, 0) }.is_success());
    let mut name = [0 as std::ffi::c_char; 128];
    // SAFETY: the buffer holds the 128 bytes passed as its length.
    assert!(unsafe { cuDeviceGetName(name.as_mut_ptr(), 128, dev) }.is_success());
    // SAFETY: the driver wrote a NUL-terminated name into the buffer.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with("NVIDIA"), "{name}");
    eprintln!("driver {version}, {count} device(s), device 0: {name}");
    // Every entry point of the specs the driver has resolves through cuGetProcAddress or dlsym.
    let d = loader::driver().expect("driver loaded");
    assert!(d.version.is_some());
}

/// Every entry of the generated function table resolves on this driver,
/// except functions newer than the driver (named, with the version they need).
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_symbol_of_the_table_resolves() {
    let d = loader::driver().expect("driver loaded");
    let version = d.version.expect("driver version") as u32;
    let (mut ok, mut newer) = (0, Vec::new());
    let mut failed = Vec::new();
    let mut older = Vec::new();
    for s in cuda_sys::SYMBOLS.iter() {
        match s.resolve() {
            Ok(p) => {
                assert!(!p.is_null());
                ok += 1;
            }
            Err(loader::LoaderError::SymbolNotFound { needs_version, .. })
                if needs_version > version =>
            {
                newer.push(format!("{} (needs {needs_version})", s.name()))
            }
            // A name only CUDA 12.x headers declare (cuCtxCreate_v3, ...): a
            // newer driver need not keep it.
            Err(e) if s.removed().is_some_and(|r| r <= version) => {
                older.push(format!("{}: {e}", s.name()))
            }
            Err(e) => failed.push(format!("{}: {e}", s.name())),
        }
    }
    eprintln!(
        "{ok} of {} symbols resolve on driver {version}; {} are newer than it: {newer:?}; {} names of older headers only do not: {older:?}",
        cuda_sys::SYMBOLS.len(),
        newer.len(),
        older.len()
    );
    assert!(
        failed.is_empty(),
        "symbols that should resolve but do not: {failed:#?}"
    );
    assert!(ok > 400, "only {ok} symbols resolved");
}

/// Names with ABIs of two arities (CUDA 13.0: `cuCtxGetDevice(device)` at
/// 2000 and `(device, ctx)` at 13000, likewise `cuCtxSynchronize` and
/// `cuStreamGetCtx`) must be resolved at the version of the declaration we
/// call; the newest would read a missing argument (a crash, seen on the H200).
#[test]
#[ignore = "needs a CUDA GPU"]
fn functions_with_two_abis_are_called_with_their_own() {
    let dev = cuda_api::CudaDevice::get(0).unwrap();
    let ctx = cuda_api::Context::primary(&dev).unwrap();
    ctx.bind().unwrap();
    assert_eq!(cuda_api::driver::ctx_get_device().unwrap(), 0);
    cuda_api::driver::ctx_synchronize().unwrap();
    let stream = cuda_api::Stream::new(&ctx).unwrap();
    assert_eq!(
        // SAFETY: `stream` is alive for the whole call.
        unsafe { cuda_api::driver::stream_get_ctx(stream.raw()) }.unwrap(),
        ctx.raw()
    );
    for name in ["cuCtxGetDevice", "cuCtxSynchronize", "cuStreamGetCtx"] {
        let s = cuda_sys::SYMBOLS.iter().find(|s| s.name() == name).unwrap();
        println!("{name} resolves as {:?}", s.target());
    }
}
