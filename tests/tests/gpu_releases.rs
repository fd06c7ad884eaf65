//! The specs span CUDA 12.0 to 13.5; the H200's driver supports CUDA 13.0.
//! A function newer than the driver returns `NotSupported` without calling
//! anything, every function of the 13.0 header resolves, a record that grew
//! in 13.5 is passed to the 13.0 driver through the ABI it knows, and a
//! failed call carries the driver's own log line.

use cuda_api::{CudaError, driver};
use cuda_sys::{CUgraphNodeParams, CUgraphNodeType, CUresult, loader};

fn version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// The installed driver's CUDA version, after `cuInit`.
fn driver_version() -> i32 {
    cuda_api::init().expect("cuInit");
    cuda_api::driver_version().expect("cuDriverGetVersion")
}

/// `cuTensorMapSetAllocationClass` is new in CUDA 13.5 (ABI 13050): on an
/// older driver the call returns `NotSupported` naming both versions, and
/// the driver is never asked for the entry point.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_function_newer_than_the_driver_is_not_supported() {
    let d = driver_version();
    let name = "cuTensorMapSetAllocationClass";
    if d >= 13050 {
        sdk_tests::skip(
            "a_function_newer_than_the_driver_is_not_supported",
            &format!("the driver supports CUDA {}, which has {name}", version(d)),
        );
        return;
    }
    let symbol = loader::symbol(name).expect("in the specs");
    assert_eq!(symbol.target().1, 13050, "{name}'s ABI version");
    assert_eq!(symbol.since(), Some(13050), "{name} is first in CUDA 13.5");
    assert!(!cuda_api::supports(name), "supports({name}) on CUDA {d}");
    // SAFETY: the driver is older than the function, so nothing is called;
    // were it called, the zeroed descriptor is a local that no kernel ever
    // uses, so whatever class it gets no memory is accessed through it.
    let e = unsafe {
        let mut map: cuda_sys::CUtensorMap = std::mem::zeroed();
        driver::tensor_map_set_allocation_class(&mut map, std::mem::zeroed())
    }
    .expect_err("a 13.5 function on an older driver must fail");
    let text = e.to_string();
    println!("NotSupported message: {text}");
    match &e {
        CudaError::NotSupported {
            function,
            needs_version,
            driver_version,
        } => {
            assert_eq!(function, name);
            assert_eq!(*needs_version, 13050);
            assert_eq!(*driver_version, Some(d));
        }
        other => panic!("expected NotSupported for {name}, got {other:?}"),
    }
    assert_eq!(
        text,
        format!(
            "{name} needs a driver supporting CUDA 13.5 or later, but the installed driver supports CUDA {}; update the NVIDIA driver",
            version(d)
        )
    );
    assert_eq!(
        symbol.resolved_version(),
        None,
        "{name} must not have been resolved on a CUDA {} driver",
        version(d)
    );
    assert_eq!(cuda_api::require(name), Err(e));
}

/// Every function the CUDA 13.0 header declares resolves on a 13.0 (or
/// newer) driver, at the ABI the specs give it; functions only older headers
/// declare are tried and listed.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_function_of_the_13_0_header_resolves() {
    let d = driver_version();
    assert!(d >= 13000, "the driver supports CUDA {}", version(d));
    let in_13_0 = |s: &loader::Symbol| {
        s.since().is_some_and(|v| v <= 13000) && s.removed().is_none_or(|r| r > 13000)
    };
    let (mut ok, mut failed, mut older) = (0, Vec::new(), Vec::new());
    for s in cuda_sys::SYMBOLS.iter() {
        if in_13_0(s) {
            match s.resolve() {
                Ok(p) => {
                    assert!(!p.is_null(), "{}", s.name());
                    ok += 1;
                }
                Err(e) => failed.push(format!("{}: {e}", s.name())),
            }
        } else if s.removed().is_some() {
            older.push(format!(
                "{} (removed in {}): {}",
                s.name(),
                version(s.removed().unwrap_or(0) as i32),
                match s.resolve() {
                    Ok(_) => "resolves".to_string(),
                    Err(e) => e.to_string(),
                }
            ));
        }
    }
    println!(
        "{ok} functions of the CUDA 13.0 header resolve on driver {}; 12.x-only names: {older:#?}",
        version(d)
    );
    assert!(
        failed.is_empty(),
        "13.0 functions that do not resolve: {failed:#?}"
    );
    assert_eq!(ok, 449, "the CUDA 13.0 header declares 449 functions");
}

/// `CUgraphNodeParams` grew in CUDA 13.5 (new union members `memcpyBatch`,
/// `fabricCpyBatch`, `asBytes`; same size). The rule: cuda-sys declares the
/// newest layout, and `cuGraphAddNode` keeps the ABI its name has in the newest
/// header (`cuGraphAddNode_v2`, 12030), which a 13.0 driver has; the 13.4 ABI
/// is its own name, `cuGraphAddNode_v3`, gated like any newer function.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_grown_record_goes_through_the_abi_the_driver_knows() {
    let d = driver_version();
    let dev = cuda_api::CudaDevice::get(0).unwrap();
    let ctx = cuda_api::Context::primary(&dev).unwrap();
    ctx.bind().unwrap();
    println!(
        "CUgraphNodeParams: {} bytes (CUDA 13.5 layout) on driver {}",
        std::mem::size_of::<CUgraphNodeParams>(),
        version(d)
    );
    assert_eq!(std::mem::size_of::<CUgraphNodeParams>(), 256);
    let graph = driver::graph_create(0).unwrap();
    // SAFETY: all-zero is a valid CUgraphNodeParams.
    let mut params: CUgraphNodeParams = unsafe { std::mem::zeroed() };
    params.type_ = CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
    // SAFETY: `graph` is live; an empty node reads nothing beyond its type.
    let node = unsafe { driver::graph_add_node(graph, &[], None, &mut params) }
        .expect("cuGraphAddNode with the 13.5 layout on this driver");
    let added = loader::symbol("cuGraphAddNode").unwrap();
    assert_eq!(added.resolved_version(), Some(12030));
    // SAFETY: `node` belongs to the live `graph`.
    let ty = unsafe { driver::graph_node_get_type(node) }.unwrap();
    assert_eq!(ty, CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY);
    // SAFETY: `graph` is live; `None` asks only for the count.
    let count = unsafe { driver::graph_get_nodes(graph, None) }.unwrap();
    assert_eq!(count, 1, "nodes in the graph read back from the driver");
    if d < 13040 {
        // SAFETY: the driver is older than the function: nothing is called.
        let e = unsafe { driver::graph_add_node_v3(graph, &[], None, &mut params) }
            .expect_err("cuGraphAddNode_v3 needs CUDA 13.4");
        println!("cuGraphAddNode_v3 on driver {}: {e}", version(d));
        assert!(
            matches!(
                e,
                CudaError::NotSupported {
                    needs_version: 13040,
                    ..
                }
            ),
            "{e}"
        );
    }
    // SAFETY: `graph` is live and destroyed once.
    unsafe { driver::graph_destroy(graph) }.unwrap();
}

/// A call the driver refuses and explains in its log (the example of
/// NVIDIA's error log management guide: `cuLogsDumpToMemory` with a null
/// buffer logs "buffer cannot be NULL"): the error's message carries the line.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_driver_error_carries_the_drivers_log_line() {
    let d = driver_version();
    if d < 12090 {
        sdk_tests::skip(
            "a_driver_error_carries_the_drivers_log_line",
            &format!(
                "the driver supports CUDA {}; its log needs 12.9",
                version(d)
            ),
        );
        return;
    }
    let mut size = 64usize;
    // SAFETY: a null buffer is what is being refused; `size` is a valid pointer.
    let r = unsafe {
        cuda_sys::cuLogsDumpToMemory(std::ptr::null_mut(), std::ptr::null_mut(), &mut size, 0)
    };
    assert_ne!(r, CUresult::CUDA_SUCCESS, "a null buffer must be refused");
    let e = cuda_api::check(r, "cuLogsDumpToMemory").expect_err("refused");
    let text = e.to_string();
    println!("driver error with the driver's log: {text}");
    let d_err = e.driver().expect("a driver error");
    assert!(
        !d_err.driver_log.is_empty(),
        "the driver logged nothing for {r}: {text}"
    );
    for line in &d_err.driver_log {
        assert!(text.contains(line.as_str()), "`{line}` not in: {text}");
    }
    assert!(
        text.contains("buffer cannot be NULL"),
        "the driver's explanation is missing: {text}"
    );
    // The next failure carries only its own lines, not this one's again.
    let e2 = driver::mem_alloc(0).expect_err("a zero-byte allocation is refused");
    println!("a second failure: {e2}");
    assert!(
        !e2.to_string().contains("buffer cannot be NULL"),
        "the second error repeats the first one's log: {e2}"
    );
    // Off, errors carry no log.
    cuda_api::set_driver_log_in_errors(false);
    // SAFETY: as above.
    let r = unsafe {
        cuda_sys::cuLogsDumpToMemory(std::ptr::null_mut(), std::ptr::null_mut(), &mut size, 0)
    };
    let e3 = cuda_api::check(r, "cuLogsDumpToMemory").expect_err("refused");
    cuda_api::set_driver_log_in_errors(true);
    assert!(e3.driver().is_some_and(|x| x.driver_log.is_empty()), "{e3}");
    // Back on, the lines the driver wrote while it was off (e3's) are not
    // attached to the next failure: it carries only its own.
    let e4 = driver::mem_alloc(0).expect_err("a zero-byte allocation is refused");
    println!("the first failure after switching back on: {e4}");
    assert!(
        !e4.to_string().contains("buffer cannot be NULL"),
        "the log written while off reached a later error: {e4}"
    );
    assert!(
        e4.driver().is_some_and(|x| !x.driver_log.is_empty()),
        "the failure after switching back on carries no log: {e4}"
    );
}

/// The driver's log is per process, but each line names the thread that
/// wrote it: a failure in one thread does not take another thread's lines.
/// Thread A's raw call fails (no context is current there) and is not
/// turned into an error yet; thread B then fails and reads the log, which
/// holds A's lines too. B's error carries only B's lines, and A's error,
/// made afterwards, still carries A's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn driver_log_lines_reach_the_thread_that_wrote_them() {
    let d = driver_version();
    if d < 12090 {
        sdk_tests::skip(
            "driver_log_lines_reach_the_thread_that_wrote_them",
            &format!(
                "the driver supports CUDA {}; its log needs 12.9",
                version(d)
            ),
        );
        return;
    }
    let (failed_tx, failed_rx) = std::sync::mpsc::channel::<CUresult>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let a = std::thread::spawn(move || {
        let mut ptr = 0;
        // SAFETY: `ptr` is a valid out-pointer; no context is current on
        // this new thread, which is the failure wanted.
        let r = unsafe { cuda_sys::cuMemAlloc(&mut ptr, 64) };
        failed_tx.send(r).unwrap();
        go_rx.recv().unwrap();
        cuda_api::check(r, "cuMemAlloc")
            .expect_err("no context is current on this thread")
            .to_string()
    });
    let r_a = failed_rx.recv().unwrap();
    assert_eq!(
        r_a,
        CUresult::CUDA_ERROR_INVALID_CONTEXT,
        "cuMemAlloc on a thread without a context"
    );
    let mut size = 64usize;
    // SAFETY: a null buffer is what is being refused; `size` is a valid pointer.
    let r_b = unsafe {
        cuda_sys::cuLogsDumpToMemory(std::ptr::null_mut(), std::ptr::null_mut(), &mut size, 0)
    };
    let e_b = cuda_api::check(r_b, "cuLogsDumpToMemory")
        .expect_err("a null buffer is refused")
        .to_string();
    go_tx.send(()).unwrap();
    let e_a = a.join().unwrap();
    println!("thread B's error: {e_b}");
    println!("thread A's error, made after B read the log: {e_a}");
    assert!(
        e_b.contains("buffer cannot be NULL"),
        "B's error lacks its own line: {e_b}"
    );
    assert!(
        !e_b.contains("cuMemAlloc") && !e_b.contains("No CUDA context"),
        "B's error carries thread A's lines: {e_b}"
    );
    assert!(
        e_a.contains("Returning 201") || e_a.contains("No CUDA context"),
        "A's error lost its lines to B's read: {e_a}"
    );
    assert!(
        !e_a.contains("buffer cannot be NULL"),
        "A's error carries B's line: {e_a}"
    );
}
