//! A process where no CUDA driver loads (this binary re-run as a child with
//! `CUDA_SYS_DRIVER_LIBRARY` naming a library that does not exist, so the
//! result is the same on a machine with a GPU): the default device is
//! `"cpu"` (Warp's rule), a launch that names no device runs there, and a
//! launch on `cuda:0` says which kernel could not run and how to run it on
//! the CPU (on 38e7deb a launch without `.device("cpu")` failed with a
//! driver-not-found error naming no kernel).

use std::process::Command;

use warp_launch::{
    Array, Device, Error, Kernel, KernelSpec, MemoryKind, Pass, TypedArg, cpu_each_fn,
};

const CHILD: &str = "WARP_LAUNCH_NO_DRIVER_CHILD";
const MISSING: &str = "/nonexistent/libcuda-for-this-test.so.1";

fn scale() -> Kernel {
    KernelSpec::new("scale_rows", 2)
        .value::<f32>("s")
        .array::<f32>("x", 2)
        .declare()
        .unwrap()
        .with_cpu(
            cpu_each_fn(|args, each| {
                each.run(|t| {
                    let s: f32 = args.value(0)?;
                    let x = args.array::<f32>(1)?;
                    let ij = t.tid2();
                    x.set(ij, s * x.get(ij)?)
                })
            }),
            None,
        )
}

/// In the parent: runs the test `name` in a child without a driver and
/// asserts it passed, returning `false`; in the child, `true` (run the body).
fn in_child_without_driver(name: &str) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture"])
        .env(CHILD, "1")
        .env("CUDA_SYS_DRIVER_LIBRARY", MISSING)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the child failed:\n{text}");
    assert!(text.contains("1 passed"), "the child did not run:\n{text}");
    false
}

#[test]
fn without_a_driver_launches_default_to_the_cpu_and_cuda_launches_say_how_to_run_there() {
    if !in_child_without_driver(
        "without_a_driver_launches_default_to_the_cpu_and_cuda_launches_say_how_to_run_there",
    ) {
        return;
    }
    assert!(!warp_launch::cuda_available());
    assert_eq!(Device::current(), Device::Cpu);

    // No .device(): the default device, the CPU.
    let k = scale();
    let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    k.launch([2, 3]).inputs((2.0f32, &x)).run().unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
    // A positional launch with no array to infer a device from: the default.
    let k0 = KernelSpec::new("nothing", 1)
        .value::<f32>("v")
        .declare()
        .unwrap()
        .with_cpu(cpu_each_fn(|_, each| each.run(|_| Ok(()))), None);
    k0.launch_args(Pass::Forward, 4, None, &[TypedArg::value(&1.0f32)])
        .unwrap();

    // On cuda:0: the kernel, the device, the library tried and the way out.
    let err = k
        .launch([2, 3])
        .inputs((2.0f32, &x))
        .device("cuda:0")
        .run()
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, Error::NoDriver { kernel, device: Device::Cuda(0), tried }
            if kernel == "scale_rows" && tried.iter().any(|(p, _)| p == MISSING)),
        "{msg}"
    );
    for part in ["'scale_rows'", "cuda:0", MISSING, ".device(\"cpu\")"] {
        assert!(msg.contains(part), "'{part}' missing from: {msg}");
    }
}

/// Without a driver, an array on `cuda:0` fails before any launch: the
/// message names the call, the device, the library tried, and suggests
/// `"cpu"` (before, it was cuda-api's driver-not-found error, naming the
/// libraries but not the CPU).
#[test]
fn without_a_driver_a_cuda_array_says_to_make_it_on_the_cpu() {
    if !in_child_without_driver("without_a_driver_a_cuda_array_says_to_make_it_on_the_cpu") {
        return;
    }
    let err = Array::zeros::<f32>("cuda:0", &[4]).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, Error::NoDriverForArray { call: "Array::zeros", device: Device::Cuda(0),
            memory: MemoryKind::Device, tried } if tried.iter().any(|(p, _)| p == MISSING)),
        "{msg}"
    );
    for part in [
        "Array::zeros: device memory for cuda:0",
        MISSING,
        "make the array on \"cpu\" instead of \"cuda:0\" (Array::zeros(\"cpu\", ..))",
        "CUDA_SYS_DRIVER_LIBRARY",
    ] {
        assert!(msg.contains(part), "'{part}' missing from: {msg}");
    }
    // Every constructor goes through the same allocation.
    let msg = Array::from_slice("cuda:0", &[1.0f32, 2.0], &[2])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("on \"cpu\" instead of \"cuda:0\""), "{msg}");
    // Page-locked memory for the CPU needs the driver too: plain host memory does not.
    let msg = Array::zeros_in::<f32>("cpu", &[4], MemoryKind::PinnedHost)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("page-locked host memory for cpu")
            && msg.contains("plain host memory on \"cpu\" (MemoryKind::Device"),
        "{msg}"
    );
    assert_eq!(
        Array::zeros::<f32>("cpu", &[4])
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [0.0; 4]
    );
}
