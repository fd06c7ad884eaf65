//! The checked-in launchers compiled into this crate (as a build script's
//! `include!` does), called with the right arguments: it compiles. It is a
//! module of the `launchers_compile` test binary, so that binary's build is
//! the check. It does not launch (that needs a GPU: the GPU tests do).

#[allow(dead_code)]
#[path = "../../src/launchers/kernels.rs"]
mod kernels;
#[allow(dead_code)]
#[path = "../../src/launchers/tiles.rs"]
mod tiles;
#[allow(dead_code)]
#[path = "../../src/launchers/kinds.rs"]
mod kinds;

use warp_launch::{AotModule, Device, Launch, Stream, Tape, TypedArray};

fn run(module: &AotModule, stream: &Stream) -> warp_launch::Result<Launch> {
    let k = kernels::Kernels::new(module)?;
    let dev = Device::Cuda(0);
    let x = TypedArray::<f32, 1>::from_slice(dev, &[1.0, 2.0, 3.0, 4.0], [4])?.with_grad()?;
    let y = TypedArray::<f32, 1>::zeros(dev, [4])?.with_grad()?;
    let grid = TypedArray::<f32, 2>::zeros(dev, [4, 8])?;
    let points = TypedArray::<[f32; 3], 1>::zeros(dev, [4])?;
    let frames = TypedArray::<[[f32; 3]; 3], 1>::zeros(dev, [4])?;
    let counts = TypedArray::<i32, 4>::zeros(dev, [2, 2, 2, 2])?;

    k.saxpy.launch(4, 2.0, &x, &y)?;
    k.saxpy.launch_on(stream, 4, 2.0, &x, &y)?;
    k.saxpy.launch_adjoint(4, 2.0, &x, &y, 0.0, Some(&x), None)?;
    k.add2d.launch([4, 8], &grid, &grid, &grid)?;
    k.index4d.launch([2, 2, 2, 2], &counts)?;
    let p = kernels::Params {
        scale: 2.0,
        offset: [1.0, 0.0, 0.0],
        count: 3,
    };
    k.use_struct.launch(4, &p, &points, &points)?;
    k.transform
        .launch(4, [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], &frames, &points, &points)?;
    let mut tape = Tape::new();
    tape.record(|| k.chain_sin.launch(4, &x, 1.5, &y))?;

    let t = kinds::Kinds::new(module)?;
    let outer = kinds::Outer {
        count: 2,
        weights: [1.0, 2.0, 3.0],
        ..Default::default()
    };
    let out = TypedArray::<f64, 1>::zeros(dev, [4])?;
    t.mixed.launch(4, &outer, [[1.0; 2]; 2], [0.0, 0.0, 0.0, 1.0], [0.0; 7], true, -1, 3, &out)?;
    let named = TypedArray::<i32, 1>::zeros(dev, [4])?;
    let unsigned = TypedArray::<u32, 1>::zeros(dev, [4])?;
    t.names.launch(4, &named, 7, 9, &unsigned)?;

    let tl = tiles::Tiles::new(module)?;
    tl.scale_tiles.launch_tiled([5, 4], &grid, 0.5, &grid)?;

    k.saxpy.record(4, 2.0, &x, &y)
}

fn main() {
    let _ = run as fn(&AotModule, &Stream) -> warp_launch::Result<Launch>;
}
