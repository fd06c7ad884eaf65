// The proof that a `cpu_each_fn` body ran its loop belongs to its launch:
// one kept from another launch's `run` is not accepted.
use std::cell::RefCell;

use warp_launch::{Ran, cpu_each_fn};

thread_local! {
    static KEPT: RefCell<Option<Ran<'static>>> = const { RefCell::new(None) };
}

fn main() {
    let _body = cpu_each_fn(|_args, each| {
        let ran = each.run(|_| Ok(()))?;
        KEPT.with(|k| *k.borrow_mut() = Some(ran));
        Ok(KEPT.with(|k| k.borrow_mut().take()).unwrap())
    });
}
