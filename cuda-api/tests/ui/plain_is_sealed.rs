// Only cuda-api's own plain types (primitive numbers and arrays of them) may
// be viewed as other types: a struct with padding cannot opt in, not even
// with `unsafe impl`.
use cuda_api::{DeviceRepr, Plain};

#[derive(Clone, Copy)]
#[repr(C)]
struct Padded {
    a: u8,
    b: u32,
}

// SAFETY: (wrongly) claimed plain; the point is that it does not compile.
unsafe impl DeviceRepr for Padded {}
// SAFETY: as above.
unsafe impl Plain for Padded {}

fn main() {}
