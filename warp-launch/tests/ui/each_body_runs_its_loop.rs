// A `cpu_each_fn` body must hand its element closure to `EachThread::run`:
// `Ran`, the only value it may return, comes from that call alone.
use warp_launch::cpu_each_fn;

fn main() {
    let _body = cpu_each_fn(|args, _each| {
        let _a: f32 = args.value(0)?;
        Ok(())
    });
}
