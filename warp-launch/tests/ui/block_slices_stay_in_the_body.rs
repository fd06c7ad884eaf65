// A block body's slices are references into array memory that the launch
// guards only while the body runs: none can be kept beyond the call.
use std::sync::Mutex;

use warp_launch::cpu_block_fn;

static KEPT: Mutex<Option<&'static mut [f32]>> = Mutex::new(None);

fn main() {
    let _body = cpu_block_fn(|_block, args| {
        let y = args.slice_mut::<f32>(0)?;
        *KEPT.lock().unwrap() = Some(y);
        Ok(())
    });
}
