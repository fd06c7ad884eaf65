//! Compiles Warp 1.19.0's own examples and generates typed launchers for
//! every module compiled.
//!
//! 1. `tests/warp/corpus.py` (run by the interpreter warp-build finds, Warp
//!    installed with pip once per user when Python cannot import it, see
//!    the warp-build crate docs) imports every example of the wheel's `warp/examples` without
//!    running its main, and compiles each Warp module holding kernels for
//!    sm_90 into `<dir>/corpus/<example>/<module>/`, with
//!    `<dir>/corpus/manifest.json` saying what was compiled, what was skipped
//!    and why. `<dir>` is `<target>/warp-corpus/<key>`, the key a hash of
//!    `corpus.py` and of the interpreter and `PYTHONPATH` it runs with: the
//!    builds of one checkout (`cargo test`, `cargo clippy`, `cargo doc` each
//!    run this script) compile the corpus once. `WARP_BUILD_ARCHS` does not
//!    apply: the corpus is compiled for sm_90 only (the H200 runs it; the
//!    point here is the generated Rust).
//! 2. warp-launch's launcher generator reads each module's `wp_<module>.cu`
//!    and writes `OUT_DIR/launchers/<example>/<module>.rs`.
//! 3. `OUT_DIR/corpus.rs` includes each in `pub mod <example>` (the module
//!    named as the example) or `pub mod <example>::<module>` (another
//!    module of the example); `src/lib.rs` includes that, so building the
//!    crate compiles every launcher.
//! 4. For `tests/cpu_corpus.rs`: warp-build compiles the Warp modules of
//!    [`CPU_EXAMPLES`] and [`TILE_EXAMPLES`] again, with their CPU code
//!    (linked into the crate, each embedding file included in its
//!    `pub mod <example>`), into `<target>/warp-corpus-cpu/<example>`; their
//!    `wp_<example>.cu` must equal the corpus's. `corpus.py --cases
//!    --only=<CPU_EXAMPLES>` records the examples' launch sequences on Warp's
//!    CPU device into `<target>/warp-corpus-cpu-cases/<key>` (cached like the
//!    corpus). `OUT_DIR/cpu-build-time.txt` says how long both took.

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use serde_json::Value as Json;
use warp_build::{Launchers, WarpPython};

/// The banner line every corpus launcher file carries (the copies checked in
/// under `tests/tests/gpu_corpus/` must be byte-identical to the output here).
const BANNER_NOTE: &str = "Warp 1.19.0's own example, compiled by tests/warp/corpus.py; copies under tests/tests/gpu_corpus/ are checked by `cargo test -p warp-corpus --test drift` (WARP_CORPUS_BLESS=1 rewrites them).";

/// The examples whose launch sequences `tests/cpu_corpus.rs` replays on
/// `"cpu"`: compiled again here by warp-build with their CPU code (embedded,
/// linked into this crate), and their sequences recorded on Warp's CPU
/// device by `corpus.py --cases --only=...`.
const CPU_EXAMPLES: [&str; 5] = [
    "example_wave",
    "example_fluid",
    "example_fdtd_3d",
    "example_graph_capture",
    "example_alloc_tracker",
];

/// Examples whose kernels are all tile code: compiled by warp-build with
/// CPU code too, which lists each kernel as CPU-unsupported with the reason
/// (`tests/cpu_corpus.rs` asserts the refusal).
const TILE_EXAMPLES: [&str; 3] = [
    "example_tile_fft",
    "example_tile_convolution",
    "example_tile_filtering",
];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("warp-corpus build script: {e}");
            ExitCode::FAILURE
        }
    }
}

fn env_path(var: &str) -> Result<PathBuf, String> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .ok_or_else(|| format!("{var} is not set (run by cargo)"))
}

/// The Cargo target directory: `CARGO_TARGET_DIR` when absolute, else the
/// directory holding `CACHEDIR.TAG` above `OUT_DIR`.
fn target_dir(out: &Path) -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Ok(dir);
    }
    out.ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            format!(
                "no Cargo target directory (CACHEDIR.TAG) above {}",
                out.display()
            )
        })
}

/// Runs corpus.py with `args` into `<target>/<cache>/<key>` unless a
/// previous build did; returns that directory's `corpus/`.
fn compile_corpus(
    script: &Path,
    out: &Path,
    cache: &str,
    args: &[String],
) -> Result<PathBuf, Box<dyn Error>> {
    let python = WarpPython::find(out)?;
    let mut cmd = python.command();
    let text = std::fs::read(script).map_err(|e| format!("{}: {e}", script.display()))?;
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    python.exe().hash(&mut h);
    for (k, v) in cmd.get_envs() {
        (k, v).hash(&mut h);
    }
    args.hash(&mut h);
    let root = target_dir(out)?.join(cache);
    let key = format!("{:016x}", h.finish());
    let dir = root.join(&key);
    if dir.join("corpus/manifest.json").is_file() {
        return Ok(dir.join("corpus"));
    }
    let staging = root.join(format!("{key}.partial-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    std::fs::create_dir_all(&staging)?;
    // Cargo's job count for build scripts: the examples compile in that many
    // Python processes (corpus.py caps it at 8; with `--cases`, one).
    let jobs = std::env::var("NUM_JOBS").unwrap_or_else(|_| "1".into());
    let shown = std::iter::once(format!("--jobs={jobs}"))
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let started = Instant::now();
    let output = cmd
        .arg("-B")
        .arg(script)
        .arg(&staging)
        .arg(format!("--jobs={jobs}"))
        .args(args)
        .output()
        .map_err(|e| format!("running {}: {e}", python.exe().display()))?;
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(format!(
            "{} -B {} {} {shown} failed ({}):\n{}\n{}",
            python.exe().display(),
            script.display(),
            staging.display(),
            output.status,
            tail(&output.stdout),
            tail(&output.stderr)
        )
        .into());
    }
    std::fs::write(
        staging.join("corpus/build-time.txt"),
        format!(
            "corpus.py {shown}: {:.1} s\n",
            started.elapsed().as_secs_f64()
        ),
    )?;
    // Warp's kernel cache is not part of the corpus.
    let _ = std::fs::remove_dir_all(staging.join(".warp-cache"));
    // Corpora of older corpus.py versions go.
    for e in std::fs::read_dir(&root)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.len() == 16 && name != key {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    if let Err(e) = std::fs::rename(&staging, &dir) {
        let _ = std::fs::remove_dir_all(&staging);
        // Another build finished the same corpus first: use it.
        if !dir.join("corpus/manifest.json").is_file() {
            return Err(format!("moving {} to {}: {e}", staging.display(), dir.display()).into());
        }
    }
    Ok(dir.join("corpus"))
}

/// The Warp test modules `tests/warp/kernels.py`, `tests/warp/tape.py`,
/// `tests/warp/access.py`, `tests/warp/kinds.py` and the attack modules of
/// `tests/warp/attacks/` for the CPU tests:
/// compiled by warp-build with its CPU code (linked into this crate,
/// embedded as `OUT_DIR/warp/{kernels,tape,access,kinds}/*.rs`), and their cases and tape cases run on
/// Warp's own CPU device by `tests/warp/build.py --cpu` into
/// `OUT_DIR/kernels-ref` (the references of `tests/cpu_kernels.rs`).
fn compile_kernels(manifest_dir: &Path, out: &Path) -> Result<(), Box<dyn Error>> {
    // kernels.py, tape.py (the programs of build.py's tape_parity cases),
    // access.py (a struct holding an array) and kinds.py (a float16 value),
    // the last two run on "cpu" by `tests/cpu_kernels.rs`.
    // The attack modules (`tests/warp/attacks/`): native code, local
    // components and shapes, and Warp's contiguous CPU path on views.
    let attacks = [
        "attacks/native_poke",
        "attacks/local_components",
        "attacks/contiguous_cpu",
        "attacks/contiguous_views",
    ];
    // The proofs of issue 36's item 5: modulo indices (`modulo.py`) and
    // arrays held in structs (`held.py`).
    let proofs = ["modulo", "held"];
    for module in ["kernels", "tape", "access", "kinds"]
        .into_iter()
        .chain(attacks)
        .chain(proofs)
    {
        let source = manifest_dir.join(format!("../warp/{module}.py"));
        warp_build::WarpModule::new(&source)
            .archs([90])
            .ptx(false)
            .embed(true)
            .out_dir(out.join(format!("warp/{module}")))
            .compile()?;
    }
    let script = manifest_dir.join("../warp/build.py");
    println!("cargo:rerun-if-changed={}", script.display());
    let refs = out.join("kernels-ref");
    let python = WarpPython::find(out)?;
    let output = python
        .command()
        .arg("-B")
        .arg(&script)
        .arg("--cpu")
        .arg(&refs)
        .output()
        .map_err(|e| format!("running {}: {e}", python.exe().display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} -B {} --cpu {} failed ({}):\n{}\n{}",
            python.exe().display(),
            script.display(),
            refs.display(),
            output.status,
            tail(&output.stdout),
            tail(&output.stderr)
        )
        .into());
    }
    let _ = std::fs::remove_dir_all(refs.join(".warp-cache"));
    Ok(())
}

/// Compiles the Warp module of each example of [`CPU_EXAMPLES`] and
/// [`TILE_EXAMPLES`] with warp-build (CPU code embedded and linked), at the
/// block dimension corpus.py compiled it with, into
/// `<target>/warp-corpus-cpu/<example>`,
/// and checks that Warp's CUDA source there equals the corpus's (so the
/// launchers generated from the corpus declare these modules' kernels).
/// Returns each example's embedding file and the name of its static.
fn compile_cpu_examples(
    manifest: &Json,
    corpus: &Path,
    out: &Path,
) -> Result<BTreeMap<String, (PathBuf, String)>, Box<dyn Error>> {
    let examples_root = PathBuf::from(field(manifest, "examples_root")?);
    // In the target directory, not OUT_DIR: `cargo clippy` runs this script
    // with another OUT_DIR than `cargo build`; warp-build's stamp makes the
    // second run reuse the first's output (and link it again).
    let cache = target_dir(out)?.join("warp-corpus-cpu");
    let mut jobs = Vec::new();
    for name in CPU_EXAMPLES.iter().chain(&TILE_EXAMPLES) {
        let example = manifest["examples"]
            .as_array()
            .ok_or("manifest: no examples")?
            .iter()
            .find(|e| e["example"].as_str() == Some(name))
            .ok_or_else(|| format!("manifest: no example {name}"))?;
        let [module] = example["modules"].as_array().map_or(&[][..], Vec::as_slice) else {
            return Err(format!("manifest: {name}: not exactly one Warp module").into());
        };
        if field(module, "module")? != *name {
            return Err(
                format!("manifest: {name}: its Warp module is not named as the example").into(),
            );
        }
        let block_dim = module["block_dim"]
            .as_u64()
            .and_then(|b| u32::try_from(b).ok())
            .ok_or_else(|| format!("manifest: {name}: no block_dim"))?;
        jobs.push((
            name.to_string(),
            examples_root.join(field(example, "file")?),
            block_dim,
            corpus
                .join(field(module, "dir")?)
                .join(format!("wp_{name}.cu")),
        ));
    }
    let threads = std::env::var("NUM_JOBS")
        .ok()
        .and_then(|j| j.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, jobs.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, file, block_dim, corpus_cu)) = jobs.get(i) else {
                        break;
                    };
                    let r = compile_cpu_example(name, file, *block_dim, corpus_cu, &cache);
                    results
                        .lock()
                        .expect("no thread panics")
                        .push((name.clone(), r));
                }
            });
        }
    });
    let mut embeds = BTreeMap::new();
    for (name, r) in results.into_inner().expect("no thread panics") {
        embeds.insert(name, r?);
    }
    Ok(embeds)
}

fn compile_cpu_example(
    name: &str,
    file: &Path,
    block_dim: u32,
    corpus_cu: &Path,
    cache: &Path,
) -> Result<(PathBuf, String), String> {
    let compiled = warp_build::WarpModule::new(file)
        .archs([90])
        .ptx(false)
        .block_dim(block_dim)
        .cpu(true)
        .embed(true)
        .out_dir(cache.join(name))
        .compile()
        .map_err(|e| format!("{name}: {e}"))?;
    let cu = compiled.dir().join(format!("wp_{name}.cu"));
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    if read(&cu)? != read(corpus_cu)? {
        return Err(format!(
            "{name}: warp-build's {} differs from the corpus's {} (the launchers' source): \
             not the same module",
            cu.display(),
            corpus_cu.display()
        ));
    }
    let embed = compiled
        .embed_file()
        .ok_or_else(|| format!("{name}: no embedding file"))?;
    Ok((embed, compiled.static_name()))
}

fn run() -> Result<(), Box<dyn Error>> {
    let manifest_dir = env_path("CARGO_MANIFEST_DIR")?;
    let out = env_path("OUT_DIR")?;
    compile_kernels(&manifest_dir, &out)?;
    let script = manifest_dir.join("../warp/corpus.py");
    println!("cargo:rerun-if-changed={}", script.display());
    let corpus = compile_corpus(&script, &out, "warp-corpus", &[])?;

    let manifest_path = corpus.join("manifest.json");
    let manifest: Json = serde_json::from_str(
        &std::fs::read_to_string(&manifest_path)
            .map_err(|e| format!("reading {}: {e}", manifest_path.display()))?,
    )
    .map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let python_root = PathBuf::from(field(&manifest, "python_root")?);
    let examples_root = PathBuf::from(field(&manifest, "examples_root")?);
    let started = Instant::now();
    let embeds = compile_cpu_examples(&manifest, &corpus, &out)?;
    let compile_time = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let only = format!("--only={}", CPU_EXAMPLES.join(","));
    let cases = compile_corpus(
        &script,
        &out,
        "warp-corpus-cpu-cases",
        &["--cases".into(), only],
    )?;
    std::fs::write(
        out.join("cpu-build-time.txt"),
        format!(
            "warp-build, {} examples with their CPU code: {compile_time:.1} s\n\
             corpus.py --cases for {} examples (or reused): {:.1} s\n",
            embeds.len(),
            CPU_EXAMPLES.len(),
            started.elapsed().as_secs_f64()
        ),
    )?;

    let mut rs = String::from(
        "// @generated by tests/corpus/build.rs: one module per Warp example, holding the launchers of\n\
         // the Warp module named as the example and one submodule per other Warp module.\n",
    );
    writeln!(
        rs,
        "/// Where the build script compiled the corpus: `<example>/<module>/wp_<module>.{{cu,meta,sm90.cubin}}`\n\
         /// and `manifest.json`.\npub const CORPUS_DIR: &str = {:?};",
        corpus.display().to_string()
    )?;
    writeln!(
        rs,
        "/// Where the build script recorded the launch sequences of [`CPU_EXAMPLES`] on Warp's CPU device\n\
         /// (`corpus.py --cases`): `cases/manifest.json` and `cases/<example>.bin`.\n\
         pub const CPU_CASES_DIR: &str = {:?};\n\
         /// The examples compiled with their CPU code whose launch sequences are recorded.\n\
         pub const CPU_EXAMPLES: [&str; {}] = {CPU_EXAMPLES:?};\n\
         /// The tile examples compiled with their CPU code (every kernel CPU-unsupported).\n\
         pub const TILE_EXAMPLES: [&str; {}] = {TILE_EXAMPLES:?};",
        cases.display().to_string(),
        CPU_EXAMPLES.len(),
        TILE_EXAMPLES.len(),
    )?;
    // (path of the module's launchers, directory under the corpus, module struct)
    let mut loads: Vec<(String, String, String)> = Vec::new();
    for example in manifest["examples"]
        .as_array()
        .ok_or("manifest: no examples")?
    {
        let name = field(example, "example")?;
        let file = field(example, "file")?;
        let list = example["modules"]
            .as_array()
            .ok_or("manifest: no modules")?;
        if list.is_empty() {
            continue;
        }
        writeln!(rs, "/// `warp/examples/{file}`.\npub mod {name} {{")?;
        for module in list {
            let mname = field(module, "module")?;
            let dir = corpus.join(field(module, "dir")?);
            let text = Launchers::from_dir(&dir, mname)?
                .python_source(examples_root.join(file))
                .source_root(&python_root)
                .banner_note(BANNER_NOTE)
                .generate()?;
            let path = out.join("launchers").join(name).join(format!("{mname}.rs"));
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // The module struct comes first in the generated file.
            let ty = text
                .lines()
                .find_map(|l| l.strip_prefix("pub struct "))
                .and_then(|l| l.split([' ', '{']).next())
                .ok_or_else(|| format!("{}: no module struct", path.display()))?
                .to_string();
            let rust_path = if mname == name {
                format!("{name}::{ty}")
            } else {
                format!("{name}::{mname}::{ty}")
            };
            loads.push((
                rust_path,
                field(module, "dir")?.to_string(),
                format!("{name}/{mname}"),
            ));
            std::fs::write(&path, text)?;
            let include = format!("include!({:?});", path.display().to_string());
            if mname == name {
                writeln!(rs, "    {include}")?;
            } else {
                writeln!(
                    rs,
                    "    /// Warp module `{mname}`.\n    pub mod {mname} {{\n        {include}\n    }}"
                )?;
            }
        }
        if let Some((embed, _)) = embeds.get(name) {
            writeln!(rs, "    include!({:?});", embed.display().to_string())?;
        }
        rs.push_str("}\n");
    }
    rs.push_str(
        "/// Loads every module of the corpus from `corpus` (laid out as [`CORPUS_DIR`]) with\n\
         /// `AotModule::load` and makes its typed launchers (each kernel's `check_signature`):\n\
         /// `(\"<example>/<module>\", the outcome)` per module. Needs a CUDA device.\n\
         ///\n\
         /// # Safety\n\
         ///\n\
         /// Each module directory under `corpus` holds one Warp compile, unchanged (as\n\
         /// `tests/warp/corpus.py` writes it): `AotModule::load`'s contract.\n\
         pub unsafe fn load_every_module(corpus: &::std::path::Path) -> ::std::vec::Vec<(&'static str, ::warp_launch::Result<()>)> {\n\
         \x20   // SAFETY: the caller's promise, for each module directory.\n\
         \x20   let load = |dir: &str| unsafe { ::warp_launch::AotModule::load(corpus.join(dir)) };\n\
         \x20   ::std::vec![\n",
    );
    for (ty, dir, name) in &loads {
        writeln!(
            rs,
            "        ({name:?}, load({dir:?}).and_then(|m| {ty}::new(&m)).map(|_| ())),"
        )?;
    }
    rs.push_str("    ]\n}\n");
    rs.push_str(
        "/// The module of an example of [`CPU_EXAMPLES`] or [`TILE_EXAMPLES`] as warp-build compiled it,\n\
         /// with its CPU code (`None` for another name).\n\
         pub fn embedded(example: &str) -> ::core::option::Option<&'static ::warp_launch::EmbeddedModule> {\n\
         \x20   match example {\n",
    );
    for (name, (_, stat)) in &embeds {
        writeln!(
            rs,
            "        {name:?} => ::core::option::Option::Some(&{name}::{stat}),"
        )?;
    }
    rs.push_str("        _ => ::core::option::Option::None,\n    }\n}\n");
    std::fs::write(out.join("corpus.rs"), rs)?;
    Ok(())
}

fn field<'a>(v: &'a Json, key: &str) -> Result<&'a str, String> {
    v[key]
        .as_str()
        .ok_or_else(|| format!("manifest: missing string field {key:?} in {v}"))
}

/// The last 30 lines of a process's output.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
