//! Where memory lives, peer access on one device, the primary context and
//! the current context, on a real GPU (cuda-api's safe layer, and
//! warp-launch on top of it). The two-GPU peer-access path is in
//! `gpu_two.rs` (not run on a one-GPU machine).

use cuda_api::{
    Allocation, Context, CudaDevice, CudaError, DeviceBuffer, MemoryKind, MemoryType, PeerError,
    driver, pointer_location,
};

fn device() -> CudaDevice {
    CudaDevice::get(0).expect("device 0")
}

/// Runs `f` on a new thread, where no context is current yet.
fn on_fresh_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| s.spawn(f).join().expect("the thread ran"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_page_locked_managed_and_host_memory_are_located() {
    let ctx = device().primary_context().unwrap();
    let bytes = 4096;
    let dev = Allocation::zeroed(&ctx, bytes, MemoryKind::Device).unwrap();
    let pinned = Allocation::zeroed(&ctx, bytes, MemoryKind::PinnedHost).unwrap();
    let managed = Allocation::zeroed(&ctx, bytes, MemoryKind::Managed).unwrap();

    let l = dev.location().unwrap();
    println!("device memory: {l:?}");
    assert_eq!(l.memory_type, MemoryType::Device);
    assert_eq!(l.device, Some(0));
    assert!(!l.managed);
    assert!(l.mapped, "{l:?}");
    // Cached: the second answer is the first.
    assert_eq!(dev.location().unwrap(), l);
    // An address inside the allocation is the same memory.
    let inner = pointer_location(dev.device_address() + 100).unwrap();
    assert_eq!(inner, Some(l));

    let l = pinned.location().unwrap();
    println!("page-locked memory: {l:?}");
    assert_eq!(l.memory_type, MemoryType::Host);
    assert!(!l.managed);

    let l = managed.location().unwrap();
    println!("managed memory: {l:?}");
    assert!(l.managed, "{l:?}");
    assert!(
        matches!(l.memory_type, MemoryType::Device | MemoryType::Unified),
        "{l:?}"
    );

    // A typed buffer's allocation answers the same way.
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, 16).unwrap();
    assert_eq!(
        buf.allocation().location().unwrap().memory_type,
        MemoryType::Device
    );

    // Ordinary host memory, a stack address and 0 are unknown to the driver.
    let heap = vec![0u8; bytes];
    let local = 7u64;
    for (what, address) in [
        ("heap", heap.as_ptr() as u64),
        ("stack", &raw const local as u64),
        ("null", 0),
    ] {
        let l = pointer_location(address).unwrap();
        assert_eq!(l, None, "{what} memory at {address:#x}: {l:?}");
    }

    // An empty allocation has no address: a typed error, no driver call.
    let empty = Allocation::zeroed(&ctx, 0, MemoryKind::Device).unwrap();
    let e = empty.location().unwrap_err();
    assert!(
        matches!(&e, CudaError::InvalidArgument { call, .. } if call == "Allocation::location"),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn warp_arrays_report_where_they_live() {
    use warp_launch::{Array, Device as WarpDevice};
    let a = Array::zeros::<f32>(WarpDevice::Cuda(0), &[64]).unwrap();
    let l = a.storage().location().unwrap().expect("CUDA storage");
    assert_eq!(l.memory_type, MemoryType::Device);
    assert_eq!(l.device, Some(0));
    let h = Array::zeros::<f32>(WarpDevice::Cpu, &[64]).unwrap();
    assert_eq!(h.storage().location().unwrap(), None);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_device_is_not_its_own_peer() {
    let d = device();
    // Our answer, and the driver's own for the same pair.
    assert!(!d.can_access_peer(&d).unwrap());
    assert!(!driver::device_can_access_peer(d.raw(), d.raw()).unwrap());
    let primary = d.primary_context().unwrap();
    let e = primary.enable_peer_access(&primary).unwrap_err();
    assert!(
        matches!(e, CudaError::Peer(PeerError::SameDevice { device: 0, .. })),
        "{e}"
    );
    println!("{e}");
    // A separate context on the same device is no peer either.
    let separate = Context::new(&d).unwrap();
    let e = separate.enable_peer_access(&primary).unwrap_err();
    assert!(
        matches!(e, CudaError::Peer(PeerError::SameDevice { .. })),
        "{e}"
    );
    // warp-launch says the same through its own call.
    let e =
        warp_launch::enable_peer_access(warp_launch::Device::Cuda(0), "cuda:0".parse().unwrap())
            .unwrap_err();
    assert!(e.to_string().contains("not its own peer"), "{e}");
    let n = CudaDevice::count().unwrap();
    println!(
        "{n} device(s); the two-device path is tested in gpu_two.rs only where two GPUs exist"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn one_primary_context_per_device_and_getting_it_binds_nothing() {
    on_fresh_thread(|| {
        assert!(driver::ctx_get_current().unwrap().is_null());
        let d = device();
        let a = d.primary_context().unwrap();
        // The getter made nothing current.
        assert!(driver::ctx_get_current().unwrap().is_null());
        assert!(Context::current().unwrap().is_none());
        assert!(CudaDevice::current().unwrap().is_none());
        let b = CudaDevice::get(0).unwrap().primary_context().unwrap();
        assert_eq!(a, b);
        assert!(a.is_primary());
        // Context::primary is the same context, made current.
        let c = Context::primary(&d).unwrap();
        assert_eq!(c.raw(), a.raw());
        assert_eq!(driver::ctx_get_current().unwrap(), a.raw());
        // warp-launch's device context is that one too.
        assert_eq!(warp_launch::Device::Cuda(0).context().unwrap(), a);
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_current_context_is_read_from_the_driver() {
    on_fresh_thread(|| {
        assert_eq!(Context::current().unwrap(), None);
        assert_eq!(warp_launch::Device::current(), warp_launch::Device::Cuda(0));
        let d = device();
        let primary = Context::primary(&d).unwrap();
        assert_eq!(Context::current().unwrap(), Some(primary.clone()));
        assert_eq!(CudaDevice::current().unwrap(), Some(d.clone()));

        let separate = Context::new(&d).unwrap();
        let now = Context::current().unwrap().expect("a context is current");
        assert_eq!(now, separate);
        assert!(!now.is_primary());
        assert_ne!(now, primary);

        primary.bind().unwrap();
        assert_eq!(Context::current().unwrap(), Some(primary.clone()));

        // A context made outside cuda-api is refused, not wrapped.
        // SAFETY: no creation parameters, no flags, a valid device; the
        // context is destroyed below and used by nothing else.
        let foreign = unsafe { driver::ctx_create(std::ptr::null_mut(), 0, d.raw()) }.unwrap();
        let e = Context::current().unwrap_err();
        assert!(matches!(e, CudaError::ForeignContext { device: 0 }), "{e}");
        println!("{e}");
        // Its device is still known.
        assert_eq!(CudaDevice::current().unwrap(), Some(d.clone()));
        // SAFETY: made above, destroyed once, nothing uses it.
        unsafe { driver::ctx_destroy(foreign) }.unwrap();
        primary.bind().unwrap();
        assert_eq!(Context::current().unwrap(), Some(primary));
    });
}
