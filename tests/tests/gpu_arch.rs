//! The image of a Warp module chosen for the device, on a GPU. The data:
//! `tests/warp/build.py` compiles `kernels.py` with Warp 1.19.0 into
//! `multi/all` (sm_80, sm_90, sm_100 and sm_120 cubins and PTX for sm_75,
//! ISA 9.4) and `multi/no90` (sm_80 and sm_100 cubins and that PTX). On the
//! H200 (compute capability 9.0, a CUDA 13.0 driver whose JIT takes PTX ISA
//! up to 9.0) the first gives the sm_90 cubin, which computes Warp's
//! results; the second has nothing the device runs.

use std::path::Path;

use sdk_tests::warp::{data_dir, manifest, run_cases};
use warp_launch::{AotModule, CudaDevice, CudaError, Device, EmbeddedImage, EmbeddedModule, Error};

fn device_cc() -> (i32, i32) {
    CudaDevice::get(0)
        .and_then(|d| d.compute_capability())
        .expect("device 0")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_cubin_of_the_devices_architecture_is_chosen_among_four() {
    let dir = data_dir();
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let module =
        unsafe { AotModule::load(dir.join("multi/all")) }.expect("multi-arch module loads");
    let (major, minor) = device_cc();
    println!(
        "multi/all on compute capability {major}.{minor}: chose {}",
        module.image().unwrap()
    );
    if (major, minor) == (9, 0) {
        assert_eq!(module.image().unwrap(), "wp_kernels.sm90.cubin");
    }
    let checked = run_cases(&dir, &manifest(&dir), &module, Device::Cuda(0));
    assert!(checked >= 15, "only {checked} outputs compared");
    println!("multi/all: {checked} outputs equal Warp's CPU results");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_module_without_an_image_for_the_device_is_refused_naming_both_versions() {
    let dir = data_dir();
    // The declarations load without the driver; the first CUDA use (here
    // the image, then a kernel's CUDA function) reports the missing image.
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    let module =
        unsafe { AotModule::load(dir.join("multi/no90")) }.expect("multi/no90 declarations load");
    assert!(module.keys().count() > 0);
    let saxpy = module.kernel("saxpy").expect("kernels are listed");
    let e = saxpy
        .cuda_function(warp_launch::Pass::Forward)
        .map(|_| ())
        .expect_err("a kernel of multi/no90 declared on this device");
    assert!(matches!(e, Error::Cuda(CudaError::NoImage(_))), "{e:?}");
    let e = module
        .image()
        .map(str::to_string)
        .expect_err("multi/no90 loaded on this device");
    let msg = e.to_string();
    println!("multi/no90 refused: {msg}");
    let Error::Cuda(CudaError::NoImage(no)) = &e else {
        panic!("expected Error::Cuda(CudaError::NoImage), got {e:?}");
    };
    assert_eq!(no.images.len(), 3, "{msg}");
    let (major, minor) = device_cc();
    assert!(
        msg.contains(&format!("compute capability {major}.{minor}")),
        "{msg}"
    );
    // Warp's PTX (ISA 9.4) and the driver's newest ISA are both named.
    assert!(msg.contains("PTX ISA 9.4"), "{msg}");
    if let Some(max) = no.driver_max_isa {
        assert!(msg.contains(&format!("PTX ISA up to {max}")), "{msg}");
    }
    for file in [
        "wp_kernels.sm80.cubin",
        "wp_kernels.sm100.cubin",
        "wp_kernels.sm75.ptx",
    ] {
        assert!(msg.contains(file), "{file} not named: {msg}");
    }
}

/// `AotModule::from_embedded` over the same files, leaked into `'static`
/// as `include_bytes!` would give them.
///
/// # Safety
///
/// `dir` holds one Warp compile of module `kernels` (the bundle's
/// multi/all), as [`EmbeddedModule::new`] asks.
unsafe fn embedded(dir: &Path) -> EmbeddedModule {
    let leak = |f: &str| -> &'static [u8] {
        Box::leak(std::fs::read(dir.join(f)).expect(f).into_boxed_slice())
    };
    let text = |f: &str| -> &'static str {
        Box::leak(
            std::fs::read_to_string(dir.join(f))
                .expect(f)
                .into_boxed_str(),
        )
    };
    let images: Vec<EmbeddedImage> = [
        "wp_kernels.sm80.cubin",
        "wp_kernels.sm90.cubin",
        "wp_kernels.sm100.cubin",
        "wp_kernels.sm120.cubin",
        "wp_kernels.sm75.ptx",
    ]
    .into_iter()
    .map(|f| EmbeddedImage {
        file: f,
        bytes: leak(f),
    })
    .collect();
    // SAFETY: the caller's promise: the files of one Warp compile.
    unsafe {
        EmbeddedModule::new(
            "kernels",
            text("wp_kernels.cu"),
            text("wp_kernels.meta"),
            Box::leak(images.into_boxed_slice()),
            None,
        )
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_embedded_module_loads_from_memory_and_gives_warps_results() {
    let dir = data_dir();
    // SAFETY: multi/all is one Warp compile of module `kernels` (tests/warp/build.py).
    let embedded = unsafe { embedded(&dir.join("multi/all")) };
    let module = AotModule::from_embedded(&embedded).expect("embedded module loads");
    println!("embedded: chose {}", module.image().unwrap());
    if device_cc() == (9, 0) {
        assert_eq!(module.image().unwrap(), "wp_kernels.sm90.cubin");
    }
    let checked = run_cases(&dir, &manifest(&dir), &module, Device::Cuda(0));
    assert!(checked >= 15, "only {checked} outputs compared");
    println!("embedded: {checked} outputs equal Warp's CPU results");
}

/// Each device gets the image of its own architecture, chosen and loaded
/// on its first use: on a host of two architectures (an H200 and an RTX
/// 5090, say) `multi/all` runs its sm_90 cubin on the one and its sm_120
/// cubin on the other, and each gives Warp's results. On a host of one
/// architecture every device gets the same choice, each through its own
/// slot. An ordinal past the last device is refused naming the count.
#[test]
#[ignore = "needs a CUDA GPU"]
fn each_device_runs_the_image_chosen_for_its_own_architecture() {
    use cuda_api::{ComputeCapability, ImageTarget, choose_image, driver_version};
    let dir = data_dir();
    let all = dir.join("multi/all");
    // SAFETY: multi/all is one Warp compile of module `kernels` (tests/warp/build.py).
    let module = unsafe { AotModule::load(&all) }.expect("multi-arch module loads");
    let images: Vec<(String, ImageTarget)> = [
        "wp_kernels.sm80.cubin",
        "wp_kernels.sm90.cubin",
        "wp_kernels.sm100.cubin",
        "wp_kernels.sm120.cubin",
        "wp_kernels.sm75.ptx",
    ]
    .into_iter()
    .map(|f| {
        let bytes = std::fs::read(all.join(f)).expect(f);
        (f.to_string(), ImageTarget::of(&bytes).expect(f))
    })
    .collect();
    let driver = driver_version().unwrap();
    let count = CudaDevice::count().unwrap();
    let mut chosen = Vec::new();
    // The last device first: its choice must not be device 0's.
    for n in (0..count).rev() {
        let (major, minor) = CudaDevice::get(n).unwrap().compute_capability().unwrap();
        let cc = ComputeCapability::new(major as u32, minor as u32);
        let want = choose_image(&images, cc, driver).expect("an image for every device");
        let got = module.image_on(Device::Cuda(n)).unwrap().to_string();
        println!("cuda:{n} (compute capability {cc}): {got}");
        assert_eq!(got, images[want].0, "cuda:{n}");
        let checked = run_cases(&dir, &manifest(&dir), &module, Device::Cuda(n));
        assert!(checked >= 15, "cuda:{n}: only {checked} outputs compared");
        chosen.push(got);
    }
    // A kernel's function on each device comes from that device's image.
    let saxpy = module.kernel("saxpy").unwrap();
    for n in 0..count {
        saxpy
            .cuda_function_on(Device::Cuda(n), warp_launch::Pass::Forward)
            .unwrap_or_else(|e| panic!("cuda:{n}: {e}"));
    }
    let e = module
        .image_on(Device::Cuda(count))
        .map(str::to_string)
        .unwrap_err();
    assert!(
        matches!(e, Error::NoSuchDevice { count: c, .. } if c == count),
        "{e:?}"
    );
    println!("{count} device(s): {chosen:?}");
}
