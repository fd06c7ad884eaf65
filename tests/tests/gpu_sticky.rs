//! A kernel that faults poisons its context: the error is reported as sticky,
//! and later calls on the context say it is unusable. Its own test binary,
//! since the context stays broken for the rest of the process.

use cuda_api::{Context, CudaDevice, DeviceBuffer, DevicePtr, LaunchConfig, Module, Stream};

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_faulting_kernel_is_sticky() {
    let ctx = Context::primary(&CudaDevice::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let ptx = std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx")).unwrap();
    let m = Module::from_ptx(&ctx, &ptx).unwrap();
    // SAFETY: fault(int *p)
    let k = unsafe { m.kernel::<(DevicePtr<i32>,)>("fault").unwrap() };
    k.launch(
        &stream,
        LaunchConfig::new(1, 32),
        // SAFETY: deliberately broken: the kernel writes through null, which
        // faults on the device; the test checks the sticky error that follows.
        (unsafe { DevicePtr::<i32>::null() },),
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

/// Run in a child process by `one_fault_one_line`: faults, then drops a
/// buffer, a stream, an event and a module in the broken context.
#[test]
#[ignore = "needs a CUDA GPU"]
fn child_faults_and_drops_resources() {
    if std::env::var_os("SDK_STICKY_CHILD").is_none() {
        sdk_tests::skip(
            "child_faults_and_drops_resources",
            "runs only as the child process of one_fault_one_line",
        );
        return;
    }
    // cuda-api reports failed releases through `log`; print them.
    sdk_tests::logger::log_to_stderr();
    let ctx = Context::primary(&CudaDevice::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx).unwrap();
    let event = cuda_api::Event::new(&ctx).unwrap();
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, 16).unwrap();
    let ptx = std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx")).unwrap();
    let m = Module::from_ptx(&ctx, &ptx).unwrap();
    // SAFETY: fault(int *p)
    let k = unsafe { m.kernel::<(DevicePtr<i32>,)>("fault").unwrap() };
    k.launch(
        &stream,
        LaunchConfig::new(1, 32),
        // SAFETY: deliberately broken: the kernel writes through null, which
        // faults on the device; the test checks the sticky error that follows.
        (unsafe { DevicePtr::<i32>::null() },),
    )
    .unwrap();
    let e = stream.synchronize().unwrap_err();
    assert!(e.is_sticky());
    assert_eq!(ctx.sticky_error(), Some(&e));
    drop((buf, event, stream, k, m));
    eprintln!("child: dropped");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn one_fault_one_line() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_faults_and_drops_resources",
            "--include-ignored",
            "--nocapture",
        ])
        .env("SDK_STICKY_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Each line marked as the child's: the GPU bundle's run.sh counts the
    // `test result:` lines of this binary's output, and the child's is not one.
    let marked = |text: &str| -> String { text.lines().map(|l| format!("child| {l}\n")).collect() };
    eprintln!(
        "child stderr:\n{}child stdout:\n{}",
        marked(&stderr),
        marked(&stdout)
    );
    assert!(out.status.success(), "the child test failed");
    assert!(stderr.contains("child: dropped"));
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cuda-api:"))
        .collect();
    assert_eq!(lines.len(), 1, "one fault, one line: {lines:#?}");
    assert!(
        lines[0].contains("unusable after a sticky error"),
        "{}",
        lines[0]
    );
}
