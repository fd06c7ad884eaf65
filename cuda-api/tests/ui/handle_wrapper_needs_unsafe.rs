// A made-up handle, or one kept after its owner is dropped, can crash the
// process inside the driver: every thin wrapper taking a raw handle is
// `unsafe`, so safe code cannot call one.
use cuda_api::Stream;
use cuda_api::driver;
use cuda_sys::{CUfunction, CUstream};

fn made_up_stream() {
    let _ = driver::stream_synchronize(0x1234 as CUstream);
}

fn stream_after_drop(s: Stream) {
    let r = s.raw();
    drop(s);
    let _ = driver::stream_synchronize(r);
}

fn made_up_function() {
    let _ = driver::func_get_attribute(
        cuda_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        0x10 as CUfunction,
    );
}

fn made_up_graph() {
    let _ = driver::graph_clone(0x20 as cuda_sys::CUgraph);
}

fn made_up_device_address() {
    let _ = driver::mem_get_address_range(0xdead_0000);
}

fn main() {}
