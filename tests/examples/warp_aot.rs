//! Loads a directory written by Warp's `wp.compile_aot_module` and lists
//! its kernels with their parameters, as `warp-launch` read them from the
//! generated source and checked them against the driver's layout.
//!
//! `cargo run -p sdk-tests --example warp_aot -- DIR` (default:
//! `$SDK_WARP_DATA/aot`, else `target/warp-aot/aot`: run it after
//! `cargo xtask warp-aot`, which compiles `tests/warp/kernels.py` there).
//! Needs no GPU: loading reads and checks the declarations; the driver is
//! first used by a CUDA launch.
//!
//! DIR must hold the files of one Warp compile, unchanged: the launches'
//! safety rests on the source and the images belonging together, which
//! loading cannot check (`AotModule::load` is `unsafe`).

use std::process::ExitCode;

use warp_launch::AotModule;

fn main() -> ExitCode {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| sdk_tests::warp::data_dir().join("aot"));
    // SAFETY: the example's contract (module doc): DIR is one Warp compile.
    let module = match unsafe { AotModule::load(&dir) } {
        Ok(m) => m,
        Err(e) => {
            eprintln!("warp_aot: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("Warp module '{}' from {}:", module.name(), dir.display());
    for key in module.keys() {
        let Ok(k) = module.kernel(key) else { continue };
        let params: Vec<String> = k
            .params()
            .iter()
            .map(|p| format!("{}: {}", p.name, p.kind.describe()))
            .collect();
        println!(
            "  {key} ({}-D, {}{}): {}",
            k.kernel_dim(),
            if k.is_grid_stride() {
                "grid-stride"
            } else {
                "lean"
            },
            if k.has_backward() {
                ", with backward"
            } else {
                ""
            },
            params.join("; ")
        );
    }
    ExitCode::SUCCESS
}
