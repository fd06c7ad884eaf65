// A dtype cannot be built outside warp-launch: every dtype is an entry of
// Warp's table, so its size, alignment and scalar agree (a user-built dtype
// with a scalar size of 32 made `Value::convert` panic).
use warp_launch::DType;
use warp_launch::{Kind, Scalar};

fn main() {
    let fake: &'static DType = Box::leak(Box::new(DType {
        name: "fake",
        cpp: "fake",
        aliases: &[],
        kind: Kind::Scalar,
        scalar: Scalar::Int32,
        rows: 1,
        cols: 1,
        size: 32,
        align: 4,
    }));
    let _ = warp_launch::Value::of(1i32).convert(fake);
}
