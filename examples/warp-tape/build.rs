//! Compiles `kernels.py` with Warp 1.19.0 for several GPU architectures (a
//! cubin each, PTX for the lowest) and writes `$OUT_DIR/warp/kernels/kernels.rs`,
//! which embeds them, and `$OUT_DIR/warp/kernels/kernels_launchers.rs`, the
//! typed launchers of its kernels. `WARP_BUILD_ARCHS` overrides the list (CI
//! compiles `90,80`). Warp is installed with pip once per user (shared by
//! every crate and target directory) when Python cannot import it; see the
//! warp-build crate docs.

use std::process::ExitCode;

use warp_build::{WarpModule, write_launchers};

fn main() -> ExitCode {
    let compiled = WarpModule::new("kernels.py")
        .archs([75, 80, 86, 89, 90, 100, 120])
        .block_dim(256)
        .embed(true)
        .compile();
    let written = match compiled {
        Ok(compiled) => write_launchers(&compiled).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match written {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
