//! `cargo xtask warp-aot [FILE] [--arch 80,90] [--block-dim N] [--out DIR] [--embed] [--no-cpu]`:
//! Warp's AOT compile of a Python file or package of kernels, through
//! `warp-build` (the same step a user's build script runs), CPU code included
//! (Warp's generated C++ compiled into `<out>/cpu/libwpl_<module>.a` with the
//! host's C++ compiler) unless `--no-cpu`.
//!
//! Without FILE it compiles the test module `tests/warp/kernels.py` into
//! `target/warp-aot/aot`, the directory the Warp examples in
//! `tests/examples` load.

use std::path::{Path, PathBuf};

use warp_build::WarpModule;

use crate::Result;

/// The parsed command line (`cargo xtask warp-aot --help`).
#[derive(Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Args {
    /// The Python file or package of Warp kernels (default: tests/warp/kernels.py).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The architectures, comma-separated (80,90 or sm_80,sm_90; default: every one Warp compiles from sm_75 up).
    #[arg(long = "arch", value_name = "80,90", value_parser = parse_archs)]
    pub archs: Option<Archs>,
    /// Threads per block.
    #[arg(long, value_name = "N")]
    pub block_dim: Option<u32>,
    /// The output directory (default: target/warp-aot/aot for the test module, else `target/warp-aot/<stem>`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also write `<out>/<module>.rs`, the Rust code that embeds the module.
    #[arg(long)]
    pub embed: bool,
    /// No CPU code (no C++ compiler needed).
    #[arg(long)]
    pub no_cpu: bool,
}

/// The architectures of `--arch` (a newtype: clap reads a `Vec` as a list
/// of occurrences, this is one comma-separated value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archs(pub Vec<u32>);

/// `--arch`: a comma-separated list such as `80,90` or `sm_80,sm_90`.
fn parse_archs(v: &str) -> std::result::Result<Archs, String> {
    v.split(',')
        .map(|a| {
            let a = a.trim();
            a.strip_prefix("sm_").unwrap_or(a).parse::<u32>()
        })
        .collect::<std::result::Result<Vec<u32>, _>>()
        .map(Archs)
        .map_err(|_| format!("give a comma-separated list such as 80,90, not {v:?}"))
}

/// The output directory: `--out`, else `target/warp-aot/aot` for the test
/// module, else `target/warp-aot/<file stem>`.
fn out_dir(root: &Path, args: &Args) -> PathBuf {
    if let Some(out) = &args.out {
        return out.clone();
    }
    match &args.file {
        None => root.join("target/warp-aot/aot"),
        Some(f) => {
            let stem = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "module".into());
            root.join("target/warp-aot").join(stem)
        }
    }
}

/// `cargo xtask warp-install`: finds or installs Warp 1.19.0 exactly as a
/// build script's compile does, and says where it is.
pub fn install(root: &Path) -> Result<()> {
    println!(
        "xtask warp-install: finding Warp 1.19.0, installing it with pip if needed (about 525 MB, \
         about a minute, once) ..."
    );
    let started = std::time::Instant::now();
    let python = warp_build::WarpPython::find(root.join("target"))?;
    let secs = started.elapsed().as_secs_f64();
    match python.pythonpath() {
        Some(dir) => println!(
            "xtask warp-install: {} imports Warp 1.19.0 from {} ({secs:.0} s)",
            python.exe().display(),
            dir.display()
        ),
        None => println!(
            "xtask warp-install: {} imports Warp 1.19.0 from its own packages: nothing to install",
            python.exe().display()
        ),
    }
    Ok(())
}

/// Runs the task.
pub fn run(root: &Path, args: &Args) -> Result<()> {
    let file = args
        .file
        .clone()
        .unwrap_or_else(|| root.join("tests/warp/kernels.py"));
    let out = out_dir(root, args);
    let mut module = WarpModule::new(&file);
    // Cubins only: the PTX fallback is warp-build's `ptx-fallback` feature
    // (NVRTC through cuda-api), which xtask does not build.
    module
        .out_dir(&out)
        .ptx(false)
        .embed(args.embed)
        .cpu(!args.no_cpu)
        .cargo_metadata(false);
    if let Some(Archs(archs)) = &args.archs {
        module.archs(archs.iter().copied());
    }
    if let Some(b) = args.block_dim {
        module.block_dim(b);
    }
    println!(
        "xtask warp-aot: compiling {} with Warp 1.19.0 into {} ...",
        file.display(),
        out.display()
    );
    let c = module.compile()?;
    let archs: Vec<String> = c.archs().iter().map(|a| format!("sm_{a}")).collect();
    let ptx = c
        .ptx_arch()
        .map(|a| format!(" + PTX sm_{a}"))
        .unwrap_or_default();
    println!(
        "xtask warp-aot: module {} ({} kernels) for {}{ptx}, block_dim {}: {} files in {}{}{}",
        c.module(),
        c.kernels().len(),
        archs.join(", "),
        c.block_dim(),
        c.files().len(),
        c.dir().display(),
        c.embed_file()
            .map(|f| format!(", embedding code {}", f.display()))
            .unwrap_or_default(),
        if c.reused() {
            " (up to date, nothing ran)"
        } else {
            ""
        },
    );
    match c.cpu_lib() {
        Some(lib) => {
            println!(
                "xtask warp-aot: CPU code for {} kernels in {}",
                c.cpu_kernels().len(),
                lib.display()
            );
            for (key, why) in c.cpu_unsupported() {
                println!("xtask warp-aot: not on the CPU: {key}: {why}");
            }
        }
        None => println!("xtask warp-aot: no CPU code (--no-cpu)"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_output_is_the_examples_directory() {
        let root = Path::new("/r");
        assert_eq!(
            out_dir(root, &Args::default()),
            Path::new("/r/target/warp-aot/aot")
        );
        let custom = Args {
            file: Some("dir/tape.py".into()),
            ..Args::default()
        };
        assert_eq!(out_dir(root, &custom), Path::new("/r/target/warp-aot/tape"));
    }
}
