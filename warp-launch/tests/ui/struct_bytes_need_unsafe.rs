use warp_launch::StructValue;

// Raw struct bytes may hold an array_t's device address, which nothing
// could keep alive or check: making a value from bytes is `unsafe`.
fn main() {
    let _ = StructValue::from_bytes("Params", &[0u8; 20]);
}
