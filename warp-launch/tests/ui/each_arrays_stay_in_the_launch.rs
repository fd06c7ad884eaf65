// A `cpu_each_fn` body decodes its arrays once per launch, but cannot keep
// one beyond the launch (its memory may be freed after): the array borrows
// the launch's arguments.
use std::cell::RefCell;

use warp_launch::{CpuArray, cpu_each_fn};

thread_local! {
    static KEPT: RefCell<Option<CpuArray<'static, f32>>> = const { RefCell::new(None) };
}

fn main() {
    let _body = cpu_each_fn(|args, each| {
        let x = args.array::<f32>(0)?;
        KEPT.with(|k| *k.borrow_mut() = Some(x));
        each.run(|_| Ok(()))
    });
}
