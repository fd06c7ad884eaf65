//! Shapes of the generated thin layer that need no GPU: the signatures of the
//! four functions whose edge data is optional, and slices sharing one count
//! refused before the driver is called. (The count helper itself,
//! `shared_len`, is tested in `src/error.rs`.)

use cuda_api::CudaError;
use cuda_api::driver;
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
