//! The GPU tests' CUDA C kernels (`tests/kernels/*.cu`, compiled by nvcc
//! for the GPU bundle) also compile at run time with NVRTC 13.0 through
//! `cuda_api::Program`, every kernel present in the PTX: the step towards
//! GPU tests that carry no nvcc output (issue 30, item 5). No GPU: NVRTC
//! needs only its library (`CUDA_SYS_NVRTC_LIBRARY`), the CUDA 13.0 headers
//! (`CUDA_RELEASE_INCLUDE_DIRS`) and CCCL's (`CUDA_CCCL_INCLUDE_DIR`:
//! `cooperative_groups.h` includes `<nv/target>`), all three set by
//! `cargo xtask test` from pinned wheels.

use std::path::{Path, PathBuf};

use cuda_api::{ComputeCapability, Program};

/// The pinned CUDA 13.0 include directory `cargo xtask test` passes.
fn cuda_13_include() -> Option<PathBuf> {
    let dirs = std::env::var("CUDA_RELEASE_INCLUDE_DIRS").ok()?;
    dirs.split(';')
        .find_map(|e| e.strip_prefix("13.0="))
        .map(PathBuf::from)
}

/// The `extern "C" __global__ void` kernels a CUDA C text defines (an
/// attribute with arguments between `void` and the name, such as
/// `__launch_bounds__(256)` or `__cluster_dims__(2, 1, 1)`, skipped).
fn kernel_names(text: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = Vec::new();
    for (at, _) in text.match_indices("extern \"C\" __global__ void ") {
        let mut rest = text[at + "extern \"C\" __global__ void ".len()..].trim_start();
        let mut name = ident(rest);
        while name.starts_with("__") && rest[name.len()..].trim_start().starts_with('(') {
            let close = rest.find(')').expect("closed attribute");
            rest = rest[close + 1..].trim_start();
            name = ident(rest);
        }
        names.push(name);
    }
    names
}

#[test]
fn every_test_kernel_file_compiles_with_nvrtc() {
    let (Some(_), Some(cuda), Some(cccl)) = (
        std::env::var_os(cuda_sys::nvrtc::LIBRARY_ENV),
        cuda_13_include(),
        std::env::var_os("CUDA_CCCL_INCLUDE_DIR"),
    ) else {
        eprintln!(
            "skipped: CUDA_SYS_NVRTC_LIBRARY, CUDA_RELEASE_INCLUDE_DIRS and CUDA_CCCL_INCLUDE_DIR are set by `cargo xtask test`"
        );
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header =
        std::fs::read_to_string(root.join("../warp-launch/include/warp_launch.h")).unwrap();
    let mut total = 0;
    // Not here: graph.cu calls the device runtime's cudaGraphSetConditional
    // (NVRTC output would need linking with cudadevrt), and image_fixture.cu
    // is about nvcc's own output (the image tests).
    for file in ["kernels.cu", "warp_header.cu", "cluster.cu"] {
        let text = std::fs::read_to_string(root.join("kernels").join(file)).unwrap();
        let compiled = Program::new(file, text.as_str())
            .header("warp_launch.h", header.as_str())
            .option(format!("--include-path={}", cuda.display()))
            // CUDA 13 keeps CCCL under `include/cccl` (nvcc adds it itself).
            .option(format!("--include-path={}", PathBuf::from(&cccl).display()))
            .option(format!(
                "--include-path={}",
                PathBuf::from(&cccl).join("cccl").display()
            ))
            .option("-std=c++17")
            .arch(ComputeCapability::new(9, 0))
            .cache(false)
            .compile()
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let ptx = compiled.ptx().expect("PTX without a driver");
        let names = kernel_names(&text);
        assert!(!names.is_empty(), "{file}: no kernels found");
        for k in &names {
            assert!(ptx.contains(&format!(".entry {k}(")), "{file}: {k} missing");
        }
        total += names.len();
        let v = compiled.nvrtc_version();
        println!(
            "{file}: {} kernels compiled by NVRTC {}.{}",
            names.len(),
            v / 1000,
            v % 1000 / 10
        );
    }
    println!("every_test_kernel_file_compiles_with_nvrtc: {total} kernels");
}
