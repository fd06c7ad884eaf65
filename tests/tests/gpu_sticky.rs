//! A kernel that faults poisons its context: the error is reported as sticky,
//! and later calls on the context say it is unusable. Its own test binary,
//! since the context stays broken for the rest of the process.

use cuda_api::{Context, Device, DeviceBuffer, DevicePtr, LaunchConfig, Module, Stream};

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_faulting_kernel_is_sticky() {
    let ctx = Context::primary(&Device::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let ptx = std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx")).unwrap();
    let m = Module::from_ptx(&ctx, &ptx).unwrap();
    // SAFETY: fault(int *p)
    let k = unsafe { m.kernel::<(DevicePtr<i32>,)>("fault").unwrap() };
    k.launch(
        &stream,
        LaunchConfig::new(1, 32),
        (DevicePtr::<i32>::null(),),
    )
    .unwrap();
    let e = stream.synchronize().unwrap_err();
    eprintln!("{e}");
    assert!(e.is_sticky(), "{e}");
    let d = e.driver().unwrap();
    assert_eq!(d.name(), Some("CUDA_ERROR_ILLEGAL_ADDRESS"));
    assert!(e.to_string().contains("the context is unusable"), "{e}");
    // Later calls on the same context fail the same way, and say so.
    let later = DeviceBuffer::from_slice(&ctx, &[1u32, 2, 3]).unwrap_err();
    eprintln!("{later}");
    assert!(later.is_sticky(), "{later}");
    assert!(
        later.to_string().contains("the context is unusable"),
        "{later}"
    );
}
