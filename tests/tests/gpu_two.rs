//! Two GPUs of one host: per-device launch facts of one library kernel, a
//! stream of one device refused for a module of the other, warp-launch on
//! `cuda:1` with STRICT and CHECKED (peer access off, then on), and a copy
//! between the two devices' arrays.
//!
//! `#[ignore = "needs two CUDA GPUs"]`; run with `--include-ignored` (the GPU
//! bundle does). With fewer than two devices each test prints
//! `SKIPPED: <test>: <why>` (`sdk_tests::skip`) and returns; the bundle's
//! run.sh counts it as skipped.

use cuda_api::{
    Context, CudaDevice, CudaError, DeviceBuffer, DevicePtr, LaunchConfig, LaunchError, Library,
    Module, Stream,
};
use warp_launch::{AccessMode, Array, Device, Error};

fn two_devices(test: &str) -> bool {
    let n = CudaDevice::count().unwrap_or(0);
    if n < 2 {
        sdk_tests::skip(
            test,
            &format!("this machine has {n} CUDA device(s); the test needs two"),
        );
    }
    n >= 2
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn one_library_kernel_on_two_devices_with_each_devices_facts() {
    if !two_devices("one_library_kernel_on_two_devices_with_each_devices_facts") {
        return;
    }
    let cubin = std::fs::read(sdk_tests::kernels_dir().join("kernels.cubin")).unwrap();
    let lib = Library::from_image(&cubin).unwrap();
    // SAFETY: add_one(int *data, unsigned int n)
    let k = unsafe { lib.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() };
    for ordinal in 0..2 {
        let dev = CudaDevice::get(ordinal).unwrap();
        let ctx = Context::primary(&dev).unwrap();
        let stream = Stream::new(&ctx).unwrap();
        let mut buf = DeviceBuffer::from_slice(&ctx, &[ordinal, 10 + ordinal]).unwrap();
        k.launch(&stream, LaunchConfig::new(1, 32), (&mut buf, 2u32))
            .unwrap();
        k.launch_cooperative(&stream, LaunchConfig::new(1, 32), (&mut buf, 2u32))
            .unwrap();
        stream.synchronize().unwrap();
        assert_eq!(buf.to_vec().unwrap(), [ordinal + 2, 12 + ordinal]);
        let f = k.function();
        let grid = f.max_cooperative_grid(&ctx, 256, 0).unwrap();
        let smem = f.limits(&ctx).unwrap().max_dynamic_shared_bytes;
        let sms = dev.limits().unwrap().sm_count;
        println!(
            "{dev}: cooperative grid at 256 threads {grid} blocks ({sms} SMs), dynamic shared memory limit {smem}"
        );
        assert_eq!(
            grid % sms,
            0,
            "the grid is a whole number of blocks per SM of this device"
        );
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn a_stream_of_one_device_is_refused_for_a_module_of_the_other() {
    if !two_devices("a_stream_of_one_device_is_refused_for_a_module_of_the_other") {
        return;
    }
    let ctx0 = Context::primary(&CudaDevice::get(0).unwrap()).unwrap();
    let ctx1 = Context::primary(&CudaDevice::get(1).unwrap()).unwrap();
    let ptx = std::fs::read_to_string(sdk_tests::kernels_dir().join("kernels.ptx")).unwrap();
    let m0 = Module::from_ptx(&ctx0, &ptx).unwrap();
    // SAFETY: add_one(int *data, unsigned int n)
    let k = unsafe { m0.kernel::<(DevicePtr<i32>, u32)>("add_one").unwrap() };
    let stream1 = Stream::new(&ctx1).unwrap();
    let mut b = DeviceBuffer::from_slice(&ctx1, &[1i32]).unwrap();
    let e = k
        .launch(&stream1, LaunchConfig::new(1, 32), (&mut b, 1u32))
        .unwrap_err();
    println!("{e}");
    assert!(
        matches!(e, CudaError::Launch(LaunchError::ContextMismatch { .. })),
        "{e}"
    );
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn warp_launch_on_cuda_1_with_strict_checked_and_peer_access() {
    if !two_devices("warp_launch_on_cuda_1_with_strict_checked_and_peer_access") {
        return;
    }
    let k = sdk_tests::warp::header_kernels().unwrap().scale2d;
    let (d0, d1) = (Device::Cuda(0), Device::Cuda(1));
    let on1 = Array::from_slice(d1, &[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    k.launch([2, 2])
        .inputs((&on1, 2.0f32))
        .device("cuda:1")
        .run()
        .unwrap();
    assert_eq!(on1.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0]);
    let on0 = Array::from_slice(d0, &[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let e = k
        .launch([2, 2])
        .inputs((&on0, 2.0f32))
        .device(d1)
        .access_mode(AccessMode::Strict)
        .run()
        .unwrap_err();
    println!("STRICT: {e}");
    assert!(matches!(e, Error::Access(_)), "{e}");
    let e = k
        .launch([2, 2])
        .inputs((&on0, 2.0f32))
        .device(d1)
        .access_mode(AccessMode::Checked)
        .run()
        .unwrap_err();
    println!("CHECKED, peer access off: {e}");
    assert!(matches!(e, Error::Access(_)), "{e}");
    let can = CudaDevice::get(1)
        .unwrap()
        .can_access_peer(&CudaDevice::get(0).unwrap())
        .unwrap();
    if !can {
        println!(
            "cuda:1 cannot access cuda:0 (cuDeviceCanAccessPeer 0): the peer-access half is not applicable here"
        );
        return;
    }
    warp_launch::enable_peer_access(d1, d0).unwrap();
    // Enabling it again is no error (the driver's "already enabled" code).
    warp_launch::enable_peer_access(d1, d0).unwrap();
    k.launch([2, 2])
        .inputs((&on0, 3.0f32))
        .device(d1)
        .access_mode(AccessMode::Checked)
        .run()
        .unwrap();
    d1.context()
        .unwrap()
        .default_stream()
        .synchronize()
        .unwrap();
    assert_eq!(on0.to_vec::<f32>().unwrap(), [3.0, 6.0, 9.0, 12.0]);
    println!("CHECKED, peer access on: cuda:1 scaled an array of cuda:0");
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn an_array_copies_between_the_two_devices() {
    if !two_devices("an_array_copies_between_the_two_devices") {
        return;
    }
    let src =
        Array::from_slice(Device::Cuda(0), &(0..1000).collect::<Vec<i32>>(), &[1000]).unwrap();
    let dst = Array::zeros::<i32>(Device::Cuda(1), &[1000]).unwrap();
    dst.copy_from(&src).unwrap();
    assert_eq!(
        dst.to_vec::<i32>().unwrap(),
        (0..1000).collect::<Vec<i32>>()
    );
    let back = Array::zeros::<i32>(Device::Cuda(0), &[1000]).unwrap();
    back.copy_from(&dst).unwrap();
    assert_eq!(
        back.to_vec::<i32>().unwrap(),
        (0..1000).collect::<Vec<i32>>()
    );
}
