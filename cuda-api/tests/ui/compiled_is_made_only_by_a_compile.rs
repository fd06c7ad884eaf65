// A `Compiled` image comes only from NVRTC or a checked cache entry: safe
// code cannot make one from bytes.
fn main() {
    let _ = cuda_api::Compiled { image: vec![0u8; 4] };
}
