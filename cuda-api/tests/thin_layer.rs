//! Shapes of the generated thin layer that need no GPU: optional edge data
//! (`None` passes NULL and is not counted), slices sharing one count (each
//! checked, the error names both), and the signatures of the four functions
//! whose edge data is optional.

use cuda_api::CudaError;
use cuda_api::driver;
use cuda_api::error::shared_len;
use cuda_sys::*;

#[test]
#[allow(clippy::type_complexity)] // the point is to spell out the signatures
fn the_four_edge_data_functions_take_optional_edge_data() {
    // The signatures themselves: dependencies and edge data are slices,
    // edge data an `Option` (`None` passes NULL, meaning zeroed defaults).
    let _: unsafe fn(
        CUstream,
        CUgraph,
        Option<&[CUgraphNode]>,
        Option<&[CUgraphEdgeData]>,
        CUstreamCaptureMode,
    ) -> cuda_api::CudaResult<()> = driver::stream_begin_capture_to_graph;
    let _: unsafe fn(
        CUstream,
        &[CUgraphNode],
        Option<&[CUgraphEdgeData]>,
        u32,
    ) -> cuda_api::CudaResult<()> = driver::stream_update_capture_dependencies;
    let _: unsafe fn(
        CUgraph,
        &[CUgraphNode],
        Option<&[CUgraphEdgeData]>,
        &mut CUgraphNodeParams,
    ) -> cuda_api::CudaResult<CUgraphNode> = driver::graph_add_node;
    let _: unsafe fn(
        CUgraph,
        &[CUgraphNode],
        &[CUgraphNode],
        Option<&[CUgraphEdgeData]>,
    ) -> cuda_api::CudaResult<()> = driver::graph_add_dependencies;
}

#[test]
fn none_edge_data_is_not_counted() {
    // What `graph_add_node(g, &deps, None, …)` computes before the call.
    let n: usize = shared_len(
        "cuGraphAddNode",
        "num_dependencies",
        &[("dependencies", Some(3)), ("dependency_data", None)],
    )
    .unwrap();
    assert_eq!(n, 3);
    let n: usize = shared_len(
        "cuStreamBeginCaptureToGraph",
        "num_dependencies",
        &[("dependencies", None), ("dependency_data", None)],
    )
    .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn slices_sharing_a_count_are_each_checked_and_the_error_names_both() {
    let e = shared_len::<usize>(
        "cuGraphAddDependencies",
        "num_dependencies",
        &[("from", Some(2)), ("to", Some(2)), ("edge_data", Some(1))],
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("`edge_data` has 1 elements but `from` has 2"),
        "{text}"
    );
    assert!(matches!(e, CudaError::InvalidArgument { .. }));
}

#[test]
fn mismatched_slices_are_refused_before_the_driver_is_called() {
    let a = [std::ptr::null_mut::<CUgraphNode_st>(); 2];
    let b = [std::ptr::null_mut::<CUgraphNode_st>(); 1];
    // SAFETY: the lengths differ, so the wrapper returns before it calls the
    // driver and the null graph handle is never used.
    let e =
        unsafe { driver::graph_add_dependencies(std::ptr::null_mut(), &a, &b, None) }.unwrap_err();
    assert!(
        matches!(&e, CudaError::InvalidArgument { parameter, .. } if parameter == "to"),
        "{e}"
    );
}

#[test]
fn a_count_too_large_for_the_c_type_is_refused() {
    let e = shared_len::<u8>("cuX", "count", &[("a", Some(300))]).unwrap_err();
    assert!(e.to_string().contains("does not fit"), "{e}");
}
