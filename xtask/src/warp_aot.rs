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

/// The usage line of the task.
pub const USAGE: &str =
    "warp-aot [FILE] [--arch 80,90] [--block-dim N] [--out DIR] [--embed] [--no-cpu]";

/// The parsed command line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// The Python file or package (default: the test module).
    pub file: Option<PathBuf>,
    /// `--arch`: the architectures (default: warp-build's, every one Warp compiles from sm_75 up).
    pub archs: Option<Vec<u32>>,
    /// `--block-dim`.
    pub block_dim: Option<u32>,
    /// `--out`.
    pub out: Option<PathBuf>,
    /// `--embed`: also write `<out>/<module>.rs`.
    pub embed: bool,
    /// `--no-cpu`: no CPU code (no C++ compiler needed).
    pub no_cpu: bool,
}

/// Parses the arguments after `warp-aot`; unknown flags are errors.
pub fn parse(args: &[String]) -> Result<Args> {
    let mut parsed = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| {
                    format!("warp-aot: {name} needs a value\nusage: cargo xtask {USAGE}").into()
                })
        };
        match flag {
            "--arch" => {
                let v = value("--arch")?;
                let archs: std::result::Result<Vec<u32>, _> = v
                    .split(',')
                    .map(|a| {
                        let a = a.trim();
                        a.strip_prefix("sm_").unwrap_or(a).parse::<u32>()
                    })
                    .collect();
                parsed.archs = Some(archs.map_err(|_| {
                    format!("warp-aot: --arch {v:?}: give a comma-separated list such as 80,90")
                })?);
            }
            "--block-dim" => {
                let v = value("--block-dim")?;
                parsed.block_dim = Some(v.parse().map_err(|_| {
                    format!("warp-aot: --block-dim {v:?}: give a number of threads such as 256")
                })?);
            }
            "--out" => parsed.out = Some(PathBuf::from(value("--out")?)),
            "--embed" if inline.is_none() => parsed.embed = true,
            "--no-cpu" if inline.is_none() => parsed.no_cpu = true,
            f if f.starts_with('-') => {
                return Err(
                    format!("warp-aot: unknown flag {arg:?}\nusage: cargo xtask {USAGE}").into(),
                );
            }
            _ if parsed.file.is_none() => parsed.file = Some(PathBuf::from(arg)),
            _ => {
                return Err(format!(
                    "warp-aot: one FILE only, got {:?} and {arg:?}\nusage: cargo xtask {USAGE}",
                    parsed.file.as_deref().unwrap_or(Path::new(""))
                )
                .into());
            }
        }
    }
    Ok(parsed)
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

/// Runs the task.
pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let args = parse(args)?;
    let file = args
        .file
        .clone()
        .unwrap_or_else(|| root.join("tests/warp/kernels.py"));
    let out = out_dir(root, &args);
    let mut module = WarpModule::new(&file);
    module
        .out_dir(&out)
        .embed(args.embed)
        .cpu(!args.no_cpu)
        .cargo_metadata(false);
    if let Some(archs) = &args.archs {
        module.archs(archs.iter().copied());
    }
    if let Some(b) = args.block_dim {
        module.block_dim(b);
    }
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

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_flags_and_refuses_unknown_ones() {
        assert_eq!(parse(&[]).unwrap(), Args::default());
        let a = parse(&args(&[
            "k.py",
            "--arch",
            "80,sm_90",
            "--block-dim=128",
            "--out",
            "o",
            "--embed",
            "--no-cpu",
        ]))
        .unwrap();
        assert_eq!(
            a,
            Args {
                file: Some("k.py".into()),
                archs: Some(vec![80, 90]),
                block_dim: Some(128),
                out: Some("o".into()),
                embed: true,
                no_cpu: true,
            }
        );
        let e = parse(&args(&["--archs", "80"])).unwrap_err().to_string();
        assert!(e.contains("unknown flag \"--archs\""), "{e}");
        let e = parse(&args(&["--arch"])).unwrap_err().to_string();
        assert!(e.contains("--arch needs a value"), "{e}");
        let e = parse(&args(&["--arch", "ninety"])).unwrap_err().to_string();
        assert!(e.contains("comma-separated"), "{e}");
        let e = parse(&args(&["a.py", "b.py"])).unwrap_err().to_string();
        assert!(e.contains("one FILE only"), "{e}");
        let e = parse(&args(&["--embed=yes"])).unwrap_err().to_string();
        assert!(e.contains("unknown flag"), "{e}");
    }

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
