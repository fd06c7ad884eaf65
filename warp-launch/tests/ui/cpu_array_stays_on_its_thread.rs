// A CPU kernel cannot hand an array to another thread: writes from two
// threads to one array would race.
use warp_launch::{KernelSpec, cpu_each_fn};

fn main() {
    let _k = KernelSpec::new("k", 1).array::<f32>("x", 1).declare().unwrap().with_cpu(
        cpu_each_fn(|args, each| each.run(|_| {
            let x = args.array::<f32>(0)?;
            std::thread::spawn(move || x.set(0, 1.0));
            Ok(())
        })),
        None,
    );
}
