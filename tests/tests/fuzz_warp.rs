//! Differential fuzzing of the Warp proof: its verdicts are checked against
//! what Warp's generated CPU code does.
//!
//! Random Warp 1.19 modules (`fuzz_warp/generate.rs`: many kernels a module,
//! each from one family: plain thread indices, offsets, guards on
//! `x.shape[k]`, `i % a.shape[0]`, 2-D and 3-D domains, components of local
//! vectors, quaternions and matrices with constant and computed indices,
//! fixed-size local arrays, `@wp.func` functions receiving arrays, a
//! `wp.struct` holding arrays, views, loops, and `wp.func_native` snippets
//! and a module preamble, which must come out unproven) are compiled by
//! warp-build's compile step (`warp_launch::build::fuzzing::compile_for_host`:
//! the same Warp compile, facts and CPU entry points as a build's). The
//! proof reads each module as the loader does
//! (`warp_launch::fuzzing::WarpProof`: `warp_proof::declarations` and the
//! facts). For every kernel it proves:
//!
//! 1. random launches (domains of 1 to 4 axes, extra axes folded into
//!    `coord_mult`; arrays whose extents match the domain, are off by one,
//!    empty or of one element, null; packed, reversed and strided) are put
//!    to the safe CPU launch's checks (`WarpProof::accepts`);
//! 2. every accepted launch runs warp-build's CPU entry point of the kernel
//!    over its whole domain, compiled by g++ with AddressSanitizer and
//!    UBSan's strict bounds check against a copy of Warp's headers whose
//!    array element access records the byte address (`fuzz_warp/host.rs`);
//!    every array its own allocation;
//! 3. an access that is not one of its argument's view's elements (per
//!    element: a strided view's gaps count as outside), a local array's
//!    element past its end, a null array's, or a sanitizer's report is a
//!    FAILURE: the module and the launch are saved as
//!    `FUZZ_OUT/warp/fail-<hash>.py` and `.case`.
//!
//! A kernel reaching native code, or of a module with a preamble, that the
//! proof proves is a failure too, as is a panic of the proof or of the
//! launch checks.
//!
//! Modules kept in `tests/tests/fuzz_warp/*.py` run first, with the
//! launches of the `.case` beside them and random ones: a failure is kept
//! by copying its `fail-<hash>.py` and `.case` there (as `<name>.py` and
//! `<name>.case`; a `.case` line `unproven kernel=NAME` says the proof must
//! not prove that kernel). The modules of `../shared/attacks/warp/` are kept
//! there as `attack_*.py`.
//!
//! Environment: `FUZZ_SEED` (default 1), `FUZZ_WARP_MODULES` (generated
//! modules; default 8 in release, 1 in a debug build), `FUZZ_WARP_KERNELS`
//! (kernels a module, default 24), `FUZZ_WARP_MIX` (one family for every
//! kernel), `FUZZ_OUT` (default `target/fuzz`), `CXX` (default `g++`).
//! One line sums a run up: `fuzz warp: K kernels in M modules, P proven, L
//! launches run on the host, F failures`. It needs Python with Warp 1.19.0
//! (warp-build finds or installs it) and g++ with libasan and libubsan.

#[path = "../../xtask/src/fuzz/engine.rs"]
mod engine;
#[path = "fuzz_warp/generate.rs"]
mod generate;
#[path = "fuzz_warp/host.rs"]
mod host;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use engine::Rng;
use generate::{FAMILIES, GenKernel, Generator, PKind};
use host::{DriverKernel, HostArg, HostCase, Layout, Outcome};
use warp_launch::build::fuzzing::HostSources;
use warp_launch::fuzzing::{WarpArg, WarpParam, WarpProof, WarpWeaken};

/// Generated modules in a default run.
const DEFAULT_MODULES: usize = if cfg!(debug_assertions) { 1 } else { 8 };
/// Kernels a generated module.
const DEFAULT_KERNELS: usize = 24;
/// Launches asked per proven kernel.
const LAUNCHES_PER_KERNEL: usize = 14;
/// The architecture of the one cubin each compile writes.
const ARCH: u32 = 75;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.trim().parse().ok())
}

struct Config {
    seed: u64,
    modules: usize,
    kernels: usize,
    only: Option<&'static str>,
    out: PathBuf,
    weaken: WarpWeaken,
    regressions: bool,
}

impl Config {
    fn from_env(weaken: WarpWeaken) -> Config {
        let out =
            std::env::var_os("FUZZ_OUT").map_or_else(|| root().join("target/fuzz"), PathBuf::from);
        let only = std::env::var("FUZZ_WARP_MIX").ok().map(|m| {
            FAMILIES
                .iter()
                .copied()
                .find(|f| *f == m)
                .unwrap_or_else(|| panic!("FUZZ_WARP_MIX={m}: not one of {FAMILIES:?}"))
        });
        Config {
            seed: var("FUZZ_SEED").unwrap_or(1),
            modules: var("FUZZ_WARP_MODULES").unwrap_or(DEFAULT_MODULES),
            kernels: var("FUZZ_WARP_KERNELS").unwrap_or(DEFAULT_KERNELS),
            only,
            out: if out.is_absolute() {
                out.join("warp")
            } else {
                root().join(out).join("warp")
            },
            weaken,
            regressions: true,
        }
    }
}

#[derive(Default)]
struct Stats {
    modules: usize,
    kernels: usize,
    proven: usize,
    launches_asked: usize,
    launches_accepted: usize,
    launches_run: usize,
    proven_by_family: BTreeMap<&'static str, (usize, usize)>,
    unproven_reasons: BTreeMap<String, usize>,
}

struct Run {
    stats: Stats,
    failures: Vec<String>,
    out_of_range: usize,
}

/// A launch of a kept module (`.case` line): kernel key, domain, arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Kept {
    kernel: String,
    dim: Vec<i64>,
    args: Vec<HostArg>,
}

fn spell_arg(a: &HostArg) -> String {
    let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
    match a {
        HostArg::Value(v) => format!("V{v}"),
        HostArg::Null => "N".into(),
        HostArg::Array(l) => format!(
            "A{}:{}:{}:{}:{}",
            l.elem,
            list(&l.shape),
            l.strides
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join("x"),
            l.offset,
            l.alloc
        ),
        HostArg::Struct(f) => format!(
            "S({})",
            f.iter().map(spell_arg).collect::<Vec<_>>().join("|")
        ),
    }
}

fn parse_arg(s: &str) -> Option<HostArg> {
    fn nums<T: std::str::FromStr>(s: &str) -> Option<Vec<T>> {
        s.split('x')
            .filter(|x| !x.is_empty())
            .map(|x| x.parse().ok())
            .collect()
    }
    if let Some(v) = s.strip_prefix('V') {
        return Some(HostArg::Value(v.parse().ok()?));
    }
    if s == "N" {
        return Some(HostArg::Null);
    }
    if let Some(inner) = s.strip_prefix("S(").and_then(|r| r.strip_suffix(')')) {
        let fields: Option<Vec<HostArg>> = inner
            .split('|')
            .filter(|x| !x.is_empty())
            .map(parse_arg)
            .collect();
        return Some(HostArg::Struct(fields?));
    }
    let a = s.strip_prefix('A')?;
    let mut p = a.split(':');
    let elem = p.next()?.parse().ok()?;
    let shape = nums(p.next()?)?;
    let strides = nums(p.next()?)?;
    let offset = p.next()?.parse().ok()?;
    let alloc = p.next()?.parse().ok()?;
    Some(HostArg::Array(Layout {
        elem,
        shape,
        strides,
        offset,
        alloc,
    }))
}

impl Kept {
    fn spell(&self) -> String {
        format!(
            "launch kernel={} dim={} args={}",
            self.kernel,
            self.dim
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.args
                .iter()
                .map(spell_arg)
                .collect::<Vec<_>>()
                .join(";")
        )
    }

    fn parse(line: &str) -> Option<Kept> {
        let mut k = Kept {
            kernel: String::new(),
            dim: Vec::new(),
            args: Vec::new(),
        };
        for field in line.strip_prefix("launch ")?.split_whitespace() {
            let (key, v) = field.split_once('=')?;
            match key {
                "kernel" => k.kernel = v.to_string(),
                "dim" => {
                    k.dim = v
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::parse)
                        .collect::<Result<_, _>>()
                        .ok()?
                }
                "args" => {
                    k.args = v
                        .split(';')
                        .filter(|s| !s.is_empty())
                        .map(parse_arg)
                        .collect::<Option<_>>()?
                }
                _ => return None,
            }
        }
        (!k.kernel.is_empty()).then_some(k)
    }
}

/// What the launch checks are shown of an argument.
fn warp_arg(a: &HostArg, param: &WarpParam) -> WarpArg {
    match (a, param) {
        (HostArg::Array(l), _) => WarpArg::Array(l.shape.clone()),
        (HostArg::Null, _) => WarpArg::Null,
        (HostArg::Struct(fields), WarpParam::Struct { fields: names, .. }) => WarpArg::Struct(
            names
                .iter()
                .zip(fields)
                .filter(|((_, elem), _)| elem.is_some())
                .map(|((n, _), f)| {
                    (
                        n.clone(),
                        match f {
                            HostArg::Array(l) => Some(l.shape.clone()),
                            _ => None,
                        },
                    )
                })
                .collect(),
        ),
        _ => WarpArg::Value,
    }
}

/// A random array argument of `ndim` axes and `elem`-byte elements, its
/// extents near `dim`'s.
fn random_array(rng: &mut Rng, dim: &[i64], ndim: usize, elem: usize) -> HostArg {
    if rng.below(25) == 0 {
        return HostArg::Null;
    }
    let mut shape = Vec::new();
    for k in 0..ndim {
        let base = dim
            .get(k)
            .map_or(1 + rng.below(6), |&d| usize::try_from(d).unwrap_or(0));
        let e = match rng.below(20) {
            0..=9 => base,
            10..=12 => base + 1,
            13 | 14 => base.saturating_sub(1),
            15 => 0,
            16 => 1,
            _ => base + rng.below(4),
        };
        shape.push(e);
    }
    let scale: Vec<usize> = (0..ndim)
        .map(|_| {
            if rng.below(4) == 0 {
                2 + rng.below(2)
            } else {
                1
            }
        })
        .collect();
    let reversed: Vec<bool> = (0..ndim).map(|_| rng.below(4) == 0).collect();
    HostArg::Array(Layout::new(elem, &shape, &scale, &reversed))
}

/// A random launch of `k`: its domain and arguments.
fn random_launch(rng: &mut Rng, k: &GenKernel) -> (Vec<i64>, Vec<HostArg>) {
    const EXTENTS: &[i64] = &[0, 1, 1, 2, 3, 4, 5, 7, 8, 16];
    let mut axes = k.tid;
    if rng.below(8) == 0 {
        axes = axes.saturating_sub(1).max(1);
    }
    let mut dim: Vec<i64> = (0..axes)
        .map(|_| EXTENTS[rng.below(EXTENTS.len())])
        .collect();
    if dim.len() < 4 && rng.below(6) == 0 {
        dim.push(1 + rng.below(3) as i64);
    }
    let args = k
        .params
        .iter()
        .map(|(_, p)| match p {
            PKind::Arr { ndim, dt } => random_array(rng, &dim, *ndim, dt.size()),
            PKind::Int => HostArg::Value([-1, 0, 1, 2, 5, 16][rng.below(6)]),
            PKind::Float => HostArg::Value(1),
            PKind::Struct => HostArg::Struct(
                generate::STRUCT_FIELDS
                    .iter()
                    .map(|(_, f)| match f {
                        Some((nd, dt)) => random_array(rng, &dim, *nd, dt.size()),
                        None => HostArg::Value(1),
                    })
                    .collect(),
            ),
        })
        .collect();
    (dim, args)
}

/// A module to run: its name, text, generated kernels (empty for a kept
/// one) and kept launches.
struct Module {
    name: String,
    text: String,
    generated: Vec<GenKernel>,
    kept: Vec<Kept>,
    /// Kernels of a kept module that must not be proven (`unproven
    /// kernel=NAME` lines of its `.case`).
    must_be_unproven: Vec<String>,
    origin: String,
}

fn regressions() -> Vec<Module> {
    let dir = root().join("tests/tests/fuzz_warp");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "py"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .map(|p| {
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = std::fs::read_to_string(&p).expect("a kept module");
            let case = std::fs::read_to_string(p.with_extension("case")).unwrap_or_default();
            let must_be_unproven = case
                .lines()
                .filter_map(|l| l.strip_prefix("unproven kernel="))
                .map(|k| k.trim().to_string())
                .collect();
            let kept = case
                .lines()
                .filter(|l| l.starts_with("launch "))
                .map(|l| Kept::parse(l).unwrap_or_else(|| panic!("{}: bad line {l}", p.display())))
                .collect();
            Module {
                name: format!(
                    "reg_{}",
                    stem.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
                ),
                text,
                generated: Vec::new(),
                kept,
                must_be_unproven,
                origin: p.display().to_string(),
            }
        })
        .collect()
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

struct Fuzzer {
    cfg: Config,
    rng: Rng,
    stats: Stats,
    failures: Vec<String>,
    out_of_range: usize,
    headers: Option<PathBuf>,
    next_case: u64,
}

/// A case sent to the host, with what a failure report needs.
struct Sent {
    kernel: String,
    kept: Kept,
}

impl Fuzzer {
    fn new(cfg: Config) -> Fuzzer {
        let rng = Rng(cfg.seed ^ 0x3A4F_0000_F022_0036);
        Fuzzer {
            cfg,
            rng,
            stats: Stats::default(),
            failures: Vec::new(),
            out_of_range: 0,
            headers: None,
            next_case: 0,
        }
    }

    fn run(mut self) -> Run {
        let _ = std::fs::create_dir_all(&self.cfg.out);
        let _ = std::fs::remove_file(self.cfg.out.join("failures.txt"));
        let mut modules = Vec::new();
        if self.cfg.regressions {
            modules.extend(regressions());
        }
        let mut generator = Generator::new(self.cfg.only);
        for _ in 0..self.cfg.modules {
            let g = generator.module(&mut self.rng, self.cfg.kernels, self.cfg.seed);
            modules.push(Module {
                name: g.name,
                text: g.text,
                generated: g.kernels,
                kept: Vec::new(),
                must_be_unproven: Vec::new(),
                origin: "generated".into(),
            });
        }
        // Warp compiles the next module (Python, one core) while this one's
        // driver is built and run (g++, the other).
        let work = self.cfg.out.join("work");
        let jobs: Vec<(String, String)> = modules
            .iter()
            .map(|m| (m.name.clone(), m.text.clone()))
            .collect();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let compiler = std::thread::spawn(move || {
            for (name, text) in jobs {
                if tx.send(compile(&work, &name, &text)).is_err() {
                    break;
                }
            }
        });
        for m in modules {
            let compiled = rx
                .recv()
                .unwrap_or_else(|_| Err("the compile thread stopped".into()));
            self.module(m, compiled);
        }
        let _ = compiler.join();
        if !self.failures.is_empty() {
            let all = self.cfg.out.join("failures.txt");
            let _ = std::fs::write(&all, self.failures.join("\n\n========\n\n"));
            eprintln!("fuzz warp: every failure's report is in {}", all.display());
        }
        Run {
            stats: self.stats,
            failures: self.failures,
            out_of_range: self.out_of_range,
        }
    }

    /// Saves a failure: the module text and the launch (if any).
    fn fail(&mut self, text: &str, case: Option<&Kept>, message: String) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(text, &mut h);
        if let Some(c) = case {
            std::hash::Hash::hash(&c.spell(), &mut h);
        }
        let hash = format!("{:016x}", std::hash::Hasher::finish(&h));
        let py = self.cfg.out.join(format!("fail-{hash}.py"));
        let _ = std::fs::write(&py, text);
        if let Some(c) = case {
            let _ = std::fs::write(py.with_extension("case"), format!("{}\n", c.spell()));
        }
        self.failures
            .push(format!("FAILURE ({}):\n{message}", py.display()));
        if self.failures.len() <= 3 {
            eprintln!("fuzz warp: FAILURE ({}):\n{message}", py.display());
        }
    }

    fn module(&mut self, m: Module, compiled: Result<(PathBuf, HostSources), String>) {
        self.stats.modules += 1;
        let (out, sources) = match compiled {
            Ok(c) => c,
            Err(e) => {
                self.fail(
                    &m.text,
                    None,
                    format!("the compile step refuses the module ({}): {e}", m.origin),
                );
                return;
            }
        };
        if self.headers.is_none() {
            let dir = self.cfg.out.join("native");
            let _ = std::fs::remove_dir_all(&dir);
            if let Err(e) = host::patch_headers(&sources.warp_dir, &dir) {
                self.failures.push(format!("patching Warp's headers: {e}"));
                return;
            }
            self.headers = Some(dir);
        }
        let read = |f: &str| std::fs::read_to_string(out.join(f)).ok();
        let name = &sources.module;
        let (Some(cu), Some(meta)) = (
            read(&format!("wp_{name}.cu")),
            read(&format!("wp_{name}.meta")),
        ) else {
            self.failures.push(format!(
                "{}: no .cu or .meta after the compile",
                out.display()
            ));
            return;
        };
        let facts = read(&format!("wp_{name}.facts.json"));
        if facts.is_none() {
            self.failures.push(format!(
                "{}: the compile step wrote no facts",
                out.display()
            ));
            return;
        }
        let weaken = self.cfg.weaken;
        let proof = std::panic::catch_unwind(|| {
            WarpProof::read(name, &cu, &meta, facts.as_deref(), weaken)
        });
        let proof = match proof {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                self.fail(&m.text, None, format!("the loader refuses the module: {e}"));
                return;
            }
            Err(p) => {
                let why = panic_message(p.as_ref());
                self.fail(&m.text, None, format!("the proof panicked: {why}"));
                return;
            }
        };
        // The kernels: generated ones with their families, kept ones from
        // the proof's parameters.
        let kernels: Vec<GenKernel> = if m.generated.is_empty() {
            proof
                .kernels()
                .map(|k| GenKernel {
                    name: k.key.clone(),
                    tid: k.dim,
                    params: {
                        // Arrays have the axes of the first kept launch's.
                        let first = m.kept.iter().find(|l| l.kernel == k.key);
                        k.params
                            .iter()
                            .enumerate()
                            .map(|(j, (n, p))| {
                                let mut kind = kept_kind(p);
                                if let (PKind::Arr { ndim, .. }, Some(HostArg::Array(l))) =
                                    (&mut kind, first.and_then(|f| f.args.get(j)))
                                {
                                    *ndim = l.shape.len().clamp(1, 4);
                                }
                                (n.clone(), kind)
                            })
                            .collect()
                    },
                    family: "kept",
                    must_be_unproven: m.must_be_unproven.contains(&k.key),
                })
                .collect()
        } else {
            m.generated.clone()
        };
        let mut drivers: Vec<DriverKernel> = Vec::new();
        let mut cases: Vec<HostCase> = Vec::new();
        let mut sent: BTreeMap<u64, Sent> = BTreeMap::new();
        for gk in &kernels {
            self.stats.kernels += 1;
            let Some(read) = proof.kernels().find(|k| k.key == gk.name) else {
                self.fail(
                    &m.text,
                    None,
                    format!("kernel `{}`: not declared by the proof", gk.name),
                );
                continue;
            };
            let fam = self.stats.proven_by_family.entry(gk.family).or_default();
            fam.0 += 1;
            match &read.verdict {
                Err(why) => {
                    let short = why.split_once(": ").map_or(why.as_str(), |(_, r)| r);
                    let short: String = short.chars().take(90).collect();
                    *self.stats.unproven_reasons.entry(short).or_default() += 1;
                    continue;
                }
                Ok(()) if gk.must_be_unproven => {
                    self.fail(
                        &m.text,
                        None,
                        format!(
                            "kernel `{}` ({}) reaches native code or has a preamble, and the proof proves it",
                            gk.name, gk.family
                        ),
                    );
                    continue;
                }
                Ok(()) => {}
            }
            fam.1 += 1;
            self.stats.proven += 1;
            let Some(hk) = sources.kernels.iter().find(|h| h.key == gk.name) else {
                self.fail(&m.text, None, format!("kernel `{}`: no CPU code", gk.name));
                continue;
            };
            if hk.unsupported.is_some() {
                continue;
            }
            let names: Vec<&str> = read.params.iter().map(|(n, _)| n.as_str()).collect();
            let gen_names: Vec<&str> = gk.params.iter().map(|(n, _)| n.as_str()).collect();
            if names != gen_names {
                self.fail(
                    &m.text,
                    None,
                    format!(
                        "kernel `{}`: the proof's parameters {names:?} are not the source's {gen_names:?}",
                        gk.name
                    ),
                );
                continue;
            }
            let index = drivers.len();
            drivers.push(DriverKernel {
                key: gk.name.clone(),
                dim: hk.dim as usize,
                params: read.params.clone(),
            });
            let mut launches: Vec<Kept> = m
                .kept
                .iter()
                .filter(|k| k.kernel == gk.name)
                .cloned()
                .collect();
            for _ in 0..LAUNCHES_PER_KERNEL {
                let (dim, args) = random_launch(&mut self.rng, gk);
                launches.push(Kept {
                    kernel: gk.name.clone(),
                    dim,
                    args,
                });
            }
            for l in launches {
                self.stats.launches_asked += 1;
                let wargs: Vec<WarpArg> = l
                    .args
                    .iter()
                    .zip(&read.params)
                    .map(|(a, (_, p))| warp_arg(a, p))
                    .collect();
                let accepted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    proof.accepts(&gk.name, &l.dim, &wargs)
                }));
                let plan = match accepted {
                    Ok(Ok(p)) => p,
                    Ok(Err(_)) => continue,
                    Err(p) => {
                        let why = panic_message(p.as_ref());
                        self.fail(
                            &m.text,
                            Some(&l),
                            format!("the launch checks panicked: {why}\n{}", l.spell()),
                        );
                        continue;
                    }
                };
                self.stats.launches_accepted += 1;
                if plan.size > 1 << 16 {
                    continue;
                }
                let id = self.next_case;
                self.next_case += 1;
                cases.push(HostCase {
                    id,
                    kernel: index,
                    plan,
                    args: l.args.clone(),
                });
                sent.insert(
                    id,
                    Sent {
                        kernel: gk.name.clone(),
                        kept: l,
                    },
                );
            }
        }
        if cases.is_empty() {
            return;
        }
        let Some(include) = self.headers.clone() else {
            return;
        };
        let text = host::driver(name, &drivers);
        let exe = match host::build(&out, name, &text, &include) {
            Ok(e) => e,
            Err(e) => {
                self.fail(&m.text, None, format!("host build: {e}"));
                return;
            }
        };
        let results = match host::run(&exe, &cases) {
            Ok(r) => r,
            Err(e) => {
                self.fail(&m.text, None, format!("host run: {e}"));
                return;
            }
        };
        for (id, outcome) in results {
            self.stats.launches_run += 1;
            if let Outcome::Fail(why) = outcome {
                let s = &sent[&id];
                self.out_of_range += 1;
                let msg = format!(
                    "kernel `{}` of module {} ({}), proven, accepted launch:\n  {}\nran outside its arguments on the host:\n{why}",
                    s.kernel,
                    m.name,
                    m.origin,
                    s.kept.spell()
                );
                let kept = s.kept.clone();
                self.fail(&m.text, Some(&kept), msg);
            }
        }
    }
}

/// Writes module `name` under `work/<name>/` and compiles it there with
/// warp-build's compile step: the output directory and what it wrote.
fn compile(work: &Path, name: &str, text: &str) -> Result<(PathBuf, HostSources), String> {
    let dir = work.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let py = dir.join(format!("{name}.py"));
    std::fs::write(&py, text).map_err(|e| format!("{}: {e}", py.display()))?;
    let out = dir.join("out");
    warp_launch::build::fuzzing::compile_for_host(&py, &out, ARCH)
        .map(|s| (out, s))
        .map_err(|e| e.to_string())
}

/// A kept module's parameter as the launch generator needs it (from the
/// proof's declaration; arrays are 1-D unless a kept launch says more).
fn kept_kind(p: &WarpParam) -> PKind {
    match p {
        WarpParam::Array { size, .. } => PKind::Arr {
            ndim: 1,
            dt: if *size == 12 {
                generate::Dt::V3
            } else {
                generate::Dt::F32
            },
        },
        WarpParam::Value { dtype, .. } if dtype.starts_with("float") => PKind::Float,
        WarpParam::Value { .. } => PKind::Int,
        WarpParam::Struct { .. } => PKind::Struct,
    }
}

/// Prints a run's summary (and more detail); the summary line.
fn report(name: &str, run: &Run, seconds: f64) -> String {
    let s = &run.stats;
    let who = if name == "WarpWeaken::None" {
        String::new()
    } else {
        format!(" ({name}, failures expected)")
    };
    let line = format!(
        "fuzz warp{who}: {} kernels in {} modules, {} proven, {} launches run on the host, {} failures",
        s.kernels,
        s.modules,
        s.proven,
        s.launches_run,
        run.failures.len()
    );
    eprintln!("{line}");
    eprintln!(
        "fuzz warp ({name}): {seconds:.1} s; {} launches asked, {} accepted",
        s.launches_asked, s.launches_accepted
    );
    let fams: Vec<String> = s
        .proven_by_family
        .iter()
        .map(|(f, (n, p))| format!("{f} {p}/{n}"))
        .collect();
    eprintln!("fuzz warp: proven/kernels by family: {}", fams.join(", "));
    let mut reasons: Vec<(&String, &usize)> = s.unproven_reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1));
    for (r, n) in reasons.iter().take(8) {
        eprintln!("fuzz warp: unproven x{n}: {r}");
    }
    line
}

#[test]
fn fuzz_warp() {
    let cfg = Config::from_env(WarpWeaken::None);
    let start = Instant::now();
    let run = Fuzzer::new(cfg).run();
    report("WarpWeaken::None", &run, start.elapsed().as_secs_f64());
    assert!(run.stats.launches_run > 0, "no launch ran on the host");
    assert!(
        run.failures.is_empty(),
        "fuzz warp: {} failures; the first:\n{}",
        run.failures.len(),
        run.failures[0]
    );
}

#[test]
fn the_fuzzer_catches_a_weakened_refusal() {
    // The proof with every thread-indexed rule dropped, and only plain
    // kernels (`b[i] = a[i]`): the fuzzer must find an address out of range.
    let mut cfg = Config::from_env(WarpWeaken::DropThreadRules);
    cfg.only = Some("plain");
    cfg.modules = 1;
    cfg.kernels = 8;
    cfg.regressions = false;
    cfg.out = cfg.out.join("weakened");
    let start = Instant::now();
    let run = Fuzzer::new(cfg).run();
    report(
        "WarpWeaken::DropThreadRules",
        &run,
        start.elapsed().as_secs_f64(),
    );
    assert!(
        run.out_of_range > 0,
        "the fuzzer found no out-of-range address with thread-indexed rules dropped ({} launches run)",
        run.stats.launches_run
    );
}

#[test]
fn a_saved_case_reads_back_as_its_launch() {
    let k = Kept {
        kernel: "k3".into(),
        dim: vec![4, 2],
        args: vec![
            HostArg::Array(Layout::new(4, &[4, 2], &[1, 2], &[true, false])),
            HostArg::Null,
            HostArg::Value(-1),
            HostArg::Struct(vec![
                HostArg::Array(Layout::new(12, &[0], &[1], &[false])),
                HostArg::Value(1),
            ]),
        ],
    };
    assert_eq!(Kept::parse(&k.spell()), Some(k.clone()));
    assert_eq!(Kept::parse("launch kernel=k dim=x"), None);
}

#[test]
fn layouts_cover_their_elements_inside_their_allocation() {
    let l = Layout::new(4, &[3, 2], &[2, 1], &[true, false]);
    // Reversed first axis: element (0, 0) sits at the far end.
    assert_eq!(l.strides, vec![-16, 4]);
    assert_eq!(l.offset, 32);
    assert_eq!(l.alloc, 32 + 4 + 4);
    assert_eq!(Layout::new(4, &[0, 3], &[1, 1], &[false, false]).alloc, 0);
}

/// The host run itself, without the proof: kernels that stray each in one
/// way (a local vector's component, a `shape_t` entry, a fixed-size local
/// array's element, an array element outside a strided view, a null
/// array) run on the host, and each stray is a failure; a kernel that
/// stays inside is not.
#[test]
fn the_host_run_catches_each_kind_of_stray_access() {
    const TEXT: &str = r#"import warp as wp


@wp.kernel
def inside(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = a[i]


@wp.kernel
def vec_component(b: wp.array(dtype=float), k: int):
    i = wp.tid()
    v = wp.vec3(1.0, 2.0, 3.0)
    b[i] = v[k]


@wp.kernel
def mat_component(b: wp.array(dtype=float), k: int):
    i = wp.tid()
    m = wp.mat22(1.0, 2.0, 3.0, 4.0)
    b[i] = m[0, k]


@wp.kernel
def shape_entry(a: wp.array(dtype=float), b: wp.array(dtype=int), k: int):
    i = wp.tid()
    b[i] = a.shape[k]


@wp.kernel
def fixed_element(b: wp.array(dtype=float), k: int):
    i = wp.tid()
    arr = wp.zeros(shape=(3,), dtype=float)
    arr[k] = 1.0
    b[i] = arr[0]


@wp.kernel
def view_gap(a: wp.array(dtype=float), b: wp.array(dtype=float), k: int):
    i = wp.tid()
    b[i] = a[i + k]


@wp.kernel
def row_gap(a: wp.array2d(dtype=float), b: wp.array(dtype=float), k: int):
    i = wp.tid()
    b[i] = a[i, k]
"#;
    let out = Config::from_env(WarpWeaken::None)
        .out
        .join("host-self-test");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("the output directory");
    let py = out.join("fzw_host.py");
    std::fs::write(&py, TEXT).expect("the module");
    let sources = warp_launch::build::fuzzing::compile_for_host(&py, &out.join("out"), ARCH)
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = out.join("out");
    let read = |f: String| std::fs::read_to_string(dir.join(f)).expect("compile output");
    let name = &sources.module;
    let proof = WarpProof::read(
        name,
        &read(format!("wp_{name}.cu")),
        &read(format!("wp_{name}.meta")),
        None,
        WarpWeaken::None,
    )
    .expect("the module reads");
    let include = out.join("native");
    host::patch_headers(&sources.warp_dir, &include).expect("the headers");
    let packed = |n: usize| HostArg::Array(Layout::new(4, &[n], &[1], &[false]));
    // Every other element of 8: a view of 4.
    let strided = HostArg::Array(Layout::new(4, &[4], &[2], &[false]));
    // Rows of 3 elements 6 apart: element 3 of a row is in the gap.
    let rows = HostArg::Array(Layout::new(4, &[4, 3], &[2, 1], &[false, false]));
    let reversed = HostArg::Array(Layout::new(4, &[4], &[1], &[true]));
    // (kernel, arguments, work items, whether it strays)
    let cases: Vec<(&str, Vec<HostArg>, usize, bool)> = vec![
        ("inside", vec![strided.clone(), packed(4)], 4, false),
        ("inside", vec![reversed.clone(), reversed], 4, false),
        ("inside", vec![HostArg::Null, packed(4)], 4, true),
        ("inside", vec![packed(4), packed(3)], 4, true),
        ("vec_component", vec![packed(4), HostArg::Value(3)], 4, true),
        (
            "vec_component",
            vec![packed(4), HostArg::Value(2)],
            4,
            false,
        ),
        ("mat_component", vec![packed(4), HostArg::Value(2)], 4, true),
        (
            "shape_entry",
            vec![packed(4), packed(4), HostArg::Value(4)],
            4,
            true,
        ),
        (
            "shape_entry",
            vec![packed(4), packed(4), HostArg::Value(3)],
            4,
            false,
        ),
        ("fixed_element", vec![packed(4), HostArg::Value(3)], 4, true),
        (
            "fixed_element",
            vec![packed(4), HostArg::Value(2)],
            4,
            false,
        ),
        (
            "view_gap",
            vec![strided.clone(), packed(3), HostArg::Value(1)],
            3,
            false,
        ),
        (
            "view_gap",
            vec![strided, packed(4), HostArg::Value(1)],
            4,
            true,
        ),
        (
            "row_gap",
            vec![rows.clone(), packed(4), HostArg::Value(2)],
            4,
            false,
        ),
        ("row_gap", vec![rows, packed(1), HostArg::Value(3)], 1, true),
    ];
    let mut drivers = Vec::new();
    let mut host_cases = Vec::new();
    for (id, (key, args, size, _)) in cases.iter().enumerate() {
        let k = proof
            .kernels()
            .find(|k| k.key == *key)
            .unwrap_or_else(|| panic!("no kernel {key}"));
        let index = match drivers.iter().position(|d: &DriverKernel| d.key == *key) {
            Some(i) => i,
            None => {
                drivers.push(DriverKernel {
                    key: key.to_string(),
                    dim: 1,
                    params: k.params.clone(),
                });
                drivers.len() - 1
            }
        };
        host_cases.push(HostCase {
            id: id as u64,
            kernel: index,
            plan: warp_launch::fuzzing::WarpHostLaunch {
                ndim: 1,
                shape: [*size as u32, 0, 0, 0],
                size: *size,
                coord_mult: 1,
            },
            args: args.clone(),
        });
    }
    let exe = host::build(&dir, name, &host::driver(name, &drivers), &include)
        .unwrap_or_else(|e| panic!("{e}"));
    let results = host::run(&exe, &host_cases).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(results.len(), cases.len(), "{results:?}");
    for (id, outcome) in results {
        let (key, args, _, strays) = &cases[id as usize];
        assert_eq!(
            matches!(outcome, Outcome::Fail(_)),
            *strays,
            "{key} with {args:?}: {outcome:?}"
        );
    }
}
