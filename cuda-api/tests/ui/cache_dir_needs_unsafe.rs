// A cache directory other than the checked default is trusted: whoever
// writes it decides what runs, so choosing one is an `unsafe` promise.
use cuda_api::{ComputeCapability, Program};

fn main() {
    let _ = Program::new("k.cu", "__global__ void k() {}")
        .arch(ComputeCapability::new(9, 0))
        .cache_dir("/tmp/shared-cache");
}
