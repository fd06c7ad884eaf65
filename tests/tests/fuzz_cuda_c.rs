//! Differential fuzzing of the CUDA C proof reader (`CudaModule`'s): its
//! proofs are checked against what real compilers do with the text.
//!
//! Random kernels inside the reader's grammar, and mutations across it
//! (one class per attack of `/work/shared/attacks/cuda-c/` and more of their
//! kind, plus blind token edits), are read by
//! `warp_launch::fuzzing::cuda_c_read`. For every text it proves:
//!
//! 1. NVRTC compiles the reader's re-emission (the text `CudaModule`
//!    compiles, with any unproven kernel of it blanked out, lines kept)
//!    against `warp_launch.h`, when `CUDA_SYS_NVRTC_LIBRARY`
//!    names one (else a SKIPPED line says so); an error or a warning is a
//!    failure for a generated or planted text (a proven text compiles
//!    cleanly); a blind token edit that NVRTC refuses is counted (the
//!    reader's grammar is not C++'s type system, and `CudaModule` refuses
//!    such a text at its compile);
//! 2. g++ compiles it, in a batch with others, against the host build of
//!    the header (`tests/fuzz-host/warp_launch.h`: every `wl::address`
//!    checked against its array's allocation, member arrays with checked
//!    subscripts) with AddressSanitizer;
//! 3. random launches (extents, block sizes, block caps, array shapes a
//!    little off, large and negative values) are put to the safe launch's
//!    checks (`warp_launch::fuzzing::cuda_c_accepts`); each one accepted
//!    runs on the host over the grid the launch would run, every thread in
//!    turn. An address outside its array, or an AddressSanitizer report, is
//!    a FAILURE: the text and the case are saved as
//!    `FUZZ_OUT/cuda-c/fail-<hash>.cu` and `.case`.
//!
//! A panic of the reader or of the launch checks is a failure too (the
//! text saved likewise).
//!
//! Texts kept in `tests/fuzz-regressions/cuda-c/*.cu` run first (with the
//! attacks' launch, `dim` [16], arrays of 16 per axis, values 16 or 21,
//! and the launch of a `.case` beside them): a failure is kept by copying
//! its `fail-<hash>.cu` and `.case` there as `fuzz-<name>.cu` and
//! `fuzz-<name>.case` (`tests/tests/cuda_c_attacks.rs` takes `fuzz-*`
//! names as kept fuzzer texts).
//!
//! Environment: `FUZZ_SEED` (default 1), `FUZZ_CASES` (generated texts,
//! default 1200 in release, about a minute on two cores, and 150 in a
//! debug build (`cargo xtask test`'s short pass); `cargo xtask fuzz
//! --target cuda-c --seconds S` asks for 20 a second), `FUZZ_OUT` (default
//! `target/fuzz`), `FUZZ_CUDA_C_MIX` (`clean`, or one attack class such as
//! `coordinate-write`, for every text; default: all mixed),
//! `FUZZ_CUDA_C_VERBOSE` (print a planted kernel the reader proved, per
//! class), `CXX` (default `g++`). One line sums a run up:
//! `fuzz cuda-c: N texts, P proven, K kernels compiled by NVRTC, L
//! launches run on the host, F failures`.

#[path = "../../xtask/src/fuzz/engine.rs"]
mod engine;
#[path = "fuzz_cuda_c/generate.rs"]
mod generate;
#[path = "fuzz_cuda_c/host.rs"]
mod host;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use engine::Rng;
use generate::{Attack, Generator, Mix, Origin, Text};
use host::{Axis, Batch, HostCase, KernelInfo, Outcome, Param};
use warp_launch::fuzzing::{HostLaunch, Weaken, cuda_c_accepts, cuda_c_read};

/// The device header NVRTC compiles proven texts against.
const HEADER: &str = include_str!("../../warp-launch/include/warp_launch.h");

/// Generated texts in a default run: 1200 in release (`cargo xtask fuzz`,
/// CI's fixed pass), 150 in a debug build (the short pass of `cargo xtask
/// test`).
const DEFAULT_CASES: usize = if cfg!(debug_assertions) { 150 } else { 1200 };

/// Launches tried per proven kernel.
const LAUNCHES_PER_KERNEL: usize = 6;

/// Proven texts per host batch (one g++ compile each).
const BATCH_TEXTS: usize = 60;

/// Most array elements a case allocates, and most threads it runs.
const MAX_ELEMENTS: usize = 1 << 18;
const MAX_THREADS: u64 = 1 << 16;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

/// What one run does.
struct Config {
    seed: u64,
    cases: usize,
    out: PathBuf,
    weaken: Weaken,
    mix: Mix,
    regressions: bool,
}

impl Config {
    fn from_env(weaken: Weaken, mix: Mix, cases: usize, regressions: bool) -> Config {
        fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
            std::env::var(name).ok().and_then(|s| s.trim().parse().ok())
        }
        let out =
            std::env::var_os("FUZZ_OUT").map_or_else(|| root().join("target/fuzz"), PathBuf::from);
        Config {
            seed: var("FUZZ_SEED").unwrap_or(1),
            cases,
            out: if out.is_absolute() {
                out
            } else {
                root().join(out)
            },
            weaken,
            mix,
            regressions,
        }
    }
}

/// One launch asked of `cuda_c_accepts`, and run when accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Launch {
    dim: Vec<i64>,
    block_dim: u32,
    max_blocks: u64,
    shapes: Vec<Option<Vec<usize>>>,
    values: Vec<i64>,
}

impl Launch {
    /// The launch as one line (`FUZZ_OUT/cuda-c/*.case`, and the `.case`
    /// beside a kept regression text).
    fn spell(&self, kernel: &str) -> String {
        let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
        let params: Vec<String> = self
            .shapes
            .iter()
            .zip(&self.values)
            .map(|(s, v)| match s {
                Some(s) => format!("A{}", list(s)),
                None => format!("V{v}"),
            })
            .collect();
        format!(
            "launch kernel={kernel} dim={} block_dim={} max_blocks={} params={}",
            self.dim
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.block_dim,
            self.max_blocks,
            params.join(",")
        )
    }

    /// Reads a line [`Launch::spell`] wrote: the kernel and the launch.
    fn parse(line: &str) -> Option<(String, Launch)> {
        let mut kernel = None;
        let mut l = Launch {
            dim: Vec::new(),
            block_dim: 1,
            max_blocks: 0,
            shapes: Vec::new(),
            values: Vec::new(),
        };
        for field in line.strip_prefix("launch ")?.split_whitespace() {
            let (k, v) = field.split_once('=')?;
            match k {
                "kernel" => kernel = Some(v.to_string()),
                "dim" => {
                    l.dim = v
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::parse)
                        .collect::<Result<_, _>>()
                        .ok()?
                }
                "block_dim" => l.block_dim = v.parse().ok()?,
                "max_blocks" => l.max_blocks = v.parse().ok()?,
                "params" => {
                    for p in v.split(',').filter(|s| !s.is_empty()) {
                        if let Some(s) = p.strip_prefix('A') {
                            l.shapes.push(Some(
                                s.split('x')
                                    .map(str::parse)
                                    .collect::<Result<_, _>>()
                                    .ok()?,
                            ));
                            l.values.push(0);
                        } else {
                            l.shapes.push(None);
                            l.values.push(p.strip_prefix('V')?.parse().ok()?);
                        }
                    }
                }
                _ => return None,
            }
        }
        Some((kernel?, l))
    }
}

/// A case sent to the host, with what a failure report needs.
struct Sent {
    text: usize,
    kernel: String,
    launch: Launch,
    plan: HostLaunch,
    line: String,
}

/// A text in the current batch.
struct Held {
    text: String,
    emitted: String,
    origin: Origin,
}

/// A batch on its way through the host compiler.
struct Job {
    batch: Batch,
    held: Vec<Held>,
    sent: HashMap<u64, Sent>,
    dir: PathBuf,
}

/// Counts of one run.
#[derive(Default)]
struct Stats {
    texts: usize,
    read_errors: usize,
    proven_texts: usize,
    proven_kernels: usize,
    unproven_kernels: usize,
    /// Clean texts the reader did not prove (its grammar is meant to hold
    /// them): count and the first reasons.
    clean_unproven: usize,
    clean_reasons: Vec<String>,
    nvrtc_compiled: usize,
    nvrtc_skipped: bool,
    /// Proven token-edited texts NVRTC refused (safe: `CudaModule` refuses them).
    nvrtc_refused_edits: Vec<String>,
    host_refused_edits: usize,
    launches_asked: usize,
    launches_accepted: usize,
    launches_run: usize,
    hangs: usize,
    traps: usize,
    /// Texts and proven texts by origin.
    by_origin: BTreeMap<&'static str, (usize, usize)>,
    /// Kernels with an attack planted that the reader proved, by class,
    /// with the planted kernel of the first.
    planted_proven: BTreeMap<&'static str, (usize, String)>,
}

/// One run's result.
struct Run {
    stats: Stats,
    failures: Vec<String>,
    out_of_range: usize,
}

/// The fuzzer: generated texts through the reader, NVRTC, the launch checks
/// and the host.
struct Fuzzer {
    cfg: Config,
    rng: Rng,
    stats: Stats,
    failures: Vec<String>,
    out_of_range: usize,
    batch: Batch,
    held: Vec<Held>,
    sent: HashMap<u64, Sent>,
    next_case: u64,
    batches: usize,
    pending: Option<std::thread::JoinHandle<(Job, Result<host::Built, String>)>>,
    nvrtc: bool,
}

impl Fuzzer {
    fn new(cfg: Config) -> Fuzzer {
        let rng = Rng(cfg.seed ^ 0xC0DA_C0DE_F022_0001);
        Fuzzer {
            cfg,
            rng,
            stats: Stats::default(),
            failures: Vec::new(),
            out_of_range: 0,
            batch: Batch::default(),
            held: Vec::new(),
            sent: HashMap::new(),
            next_case: 0,
            batches: 0,
            pending: None,
            nvrtc: std::env::var_os("CUDA_SYS_NVRTC_LIBRARY").is_some(),
        }
    }

    fn dir(&self) -> PathBuf {
        self.cfg.out.join("cuda-c")
    }

    fn run(mut self) -> Run {
        self.stats.nvrtc_skipped = !self.nvrtc;
        // A report of an earlier run would read as this one's.
        let _ = std::fs::remove_file(self.dir().join("failures.txt"));
        if !self.nvrtc {
            eprintln!(
                "fuzz cuda-c: SKIPPED the NVRTC compile of proven texts: CUDA_SYS_NVRTC_LIBRARY is not set (cargo xtask test sets it)"
            );
        }
        if self.cfg.regressions {
            for kept in regressions() {
                let t = Text {
                    text: kept.text.clone(),
                    origin: Origin::Regression,
                    attacked: None,
                };
                self.text(&t, Some(&kept));
            }
            self.flush();
            self.drain();
        }
        let mut generator = Generator::new(self.cfg.mix);
        for _ in 0..self.cfg.cases {
            let t = generator.text(&mut self.rng);
            self.text(&t, None);
            if self.held.len() >= BATCH_TEXTS {
                self.flush();
            }
        }
        self.flush();
        self.drain();
        if !self.failures.is_empty() {
            let all = self.dir().join("failures.txt");
            let _ = std::fs::write(&all, self.failures.join("\n\n========\n\n"));
            eprintln!(
                "fuzz cuda-c: every failure's report is in {}",
                all.display()
            );
        }
        Run {
            stats: self.stats,
            failures: self.failures,
            out_of_range: self.out_of_range,
        }
    }

    /// Reads one text; a proven one is compiled by NVRTC and its launches
    /// join the batch (a kept text's with the attacks' launch and its own).
    fn text(&mut self, t: &Text, kept: Option<&Kept>) {
        self.stats.texts += 1;
        let entry = self.stats.by_origin.entry(t.origin.name()).or_default();
        entry.0 += 1;
        let weaken = self.cfg.weaken;
        let read = std::panic::catch_unwind(|| cuda_c_read(&t.text, weaken));
        let read = match read {
            Ok(Ok(r)) => r,
            Err(panic) => {
                let why = panic_message(panic.as_ref());
                self.fail(&t.text, None, format!("the reader panicked: {why}"));
                return;
            }
            Ok(Err(e)) => {
                self.stats.read_errors += 1;
                if t.origin == Origin::Clean {
                    self.clean_unproven(format!("read error: {e}"), &t.text);
                }
                return;
            }
        };
        let proven: Vec<String> = read
            .kernels
            .iter()
            .filter(|(_, v)| v.is_ok())
            .map(|(n, _)| n.clone())
            .collect();
        self.stats.proven_kernels += proven.len();
        if let Some(k) = &t.attacked
            && proven.contains(k)
        {
            let e = self
                .stats
                .planted_proven
                .entry(t.origin.name())
                .or_insert_with(|| (0, t.text.clone()));
            e.0 += 1;
        }
        self.stats.unproven_kernels += read.kernels.len() - proven.len();
        if t.origin == Origin::Clean {
            for (_, v) in &read.kernels {
                if let Err(why) = v {
                    self.clean_unproven(why.clone(), &t.text);
                }
            }
        }
        if proven.is_empty() {
            return;
        }
        self.stats.proven_texts += 1;
        self.stats.by_origin.entry(t.origin.name()).or_default().1 += 1;
        let Some(emitted) = read.emitted else {
            self.fail(
                &t.text,
                None,
                "the reader proved a kernel of a text it has no re-emission of (`emitted` is None)"
                    .into(),
            );
            return;
        };
        // The proven kernels of the re-emission, the others blanked: an
        // unproven kernel may be anything, and `CudaModule` refuses a text
        // that does not compile anyway.
        let names: Vec<&str> = proven.iter().map(String::as_str).collect();
        let Some(host_text) = host::only_kernels(&emitted, &names) else {
            self.fail(&t.text, None, format!("the proven kernels {names:?} are not found whole in the re-emission:\n{emitted}"));
            return;
        };
        if self.nvrtc && !self.nvrtc_compiles(t, &host_text, names.len()) {
            return;
        }
        if !self.batch.fits(&names) {
            self.flush();
        }
        let text_index = self.batch.add_text(&host_text);
        self.held.push(Held {
            text: t.text.clone(),
            emitted: emitted.clone(),
            origin: t.origin,
        });
        for name in &proven {
            let Some(info) = host::kernel_info(&emitted, name) else {
                self.fail(&t.text, None, format!("kernel `{name}`: its head does not read as the host driver needs (a proven kernel's head is the grammar's)"));
                continue;
            };
            let kernel = self.batch.add_kernel(text_index, info.clone());
            let mut launches: Vec<Launch> = (0..LAUNCHES_PER_KERNEL)
                .map(|_| random_launch(&mut self.rng, &info))
                .collect();
            if let Some(kept) = kept {
                launches.insert(0, attack_launch(&info));
                if let Some((k, l)) = &kept.launch
                    && k == name
                {
                    launches.insert(0, l.clone());
                }
            }
            for launch in launches {
                self.ask(&t.text, text_index, kernel, &info, launch);
            }
        }
    }

    /// Compiles a proven text's re-emission (its proven kernels) with
    /// NVRTC; false (after recording why) when it does not compile cleanly.
    fn nvrtc_compiles(&mut self, t: &Text, emitted: &str, kernels: usize) -> bool {
        let compiled = cuda_api::Program::new("fuzz.cu", emitted)
            .header("warp_launch.h", HEADER)
            .arch(cuda_api::ComputeCapability::new(9, 0))
            .cache(false)
            .compile();
        let problem = match &compiled {
            Err(e) => Some(format!("NVRTC refuses the text the reader proved:\n{e}")),
            Ok(c) if c.log().contains("warning") => Some(format!(
                "NVRTC warns on the text the reader proved:\n{}",
                c.log()
            )),
            Ok(_) => None,
        };
        self.stats.nvrtc_compiled += kernels;
        match problem {
            None => true,
            Some(why) if t.origin == Origin::TokenMutated => {
                if self.stats.nvrtc_refused_edits.len() < 3 {
                    self.stats
                        .nvrtc_refused_edits
                        .push(format!("{why}\n--- text ---\n{}", t.text));
                } else {
                    self.stats.nvrtc_refused_edits.push(String::new());
                }
                false
            }
            Some(why) => {
                let msg = format!(
                    "{why}\n({} text)\n--- emitted ---\n{emitted}",
                    t.origin.name()
                );
                self.fail(&t.text, None, msg);
                false
            }
        }
    }

    /// Asks the launch checks about one launch; an accepted one joins the
    /// batch's cases.
    fn ask(
        &mut self,
        text: &str,
        text_index: usize,
        kernel: usize,
        info: &KernelInfo,
        launch: Launch,
    ) {
        self.stats.launches_asked += 1;
        let weaken = self.cfg.weaken;
        let accepted = std::panic::catch_unwind(|| {
            cuda_c_accepts(
                text,
                weaken,
                &info.name,
                &launch.dim,
                launch.block_dim,
                launch.max_blocks,
                &launch.shapes,
            )
        });
        let accepted = match accepted {
            Ok(a) => a,
            Err(panic) => {
                let why = panic_message(panic.as_ref());
                let case = launch.spell(&info.name);
                self.fail(
                    text,
                    Some(&case),
                    format!("the launch checks panicked: {why}\n{case}"),
                );
                return;
            }
        };
        let Ok(plan) = accepted else { return };
        self.stats.launches_accepted += 1;
        if plan.ndim != info.n_dims {
            self.fail(text, Some(&launch.spell(&info.name)), format!("the launch of `{}` plans launch_bounds_t<{}> for a kernel of launch_bounds_t<{}>", info.name, plan.ndim, info.n_dims));
            return;
        }
        let threads = plan
            .grid
            .iter()
            .chain(&plan.block)
            .map(|&x| u64::from(x))
            .product::<u64>();
        let iterations = threads.max(plan.size as u64);
        if iterations > MAX_THREADS {
            return;
        }
        let id = self.next_case;
        self.next_case += 1;
        let mut line = format!(
            "{id} {kernel} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            plan.grid[0],
            plan.grid[1],
            plan.grid[2],
            plan.block[0],
            plan.block[1],
            plan.block[2],
            plan.shape[0],
            plan.shape[1],
            plan.shape[2],
            plan.shape[3],
            plan.size,
            plan.coord_mult,
            info.params.len()
        );
        for (k, (_, p)) in info.params.iter().enumerate() {
            match (p, launch.shapes.get(k)) {
                (Param::Array(_), Some(Some(s))) => {
                    let mut e = [0usize; 4];
                    for (d, x) in s.iter().take(4).enumerate() {
                        e[d] = *x;
                    }
                    let _ = write!(
                        line,
                        " 1 {} {} {} {} {}",
                        s.len().min(4),
                        e[0],
                        e[1],
                        e[2],
                        e[3]
                    );
                }
                _ => {
                    let _ = write!(line, " 0 {}", launch.values.get(k).copied().unwrap_or(0));
                }
            }
        }
        self.batch.cases.push(HostCase {
            id,
            line: line.clone(),
        });
        self.sent.insert(
            id,
            Sent {
                text: text_index,
                kernel: info.name.clone(),
                launch,
                plan,
                line,
            },
        );
    }

    /// Starts compiling the batch (on a thread of its own, so the next
    /// batch is generated meanwhile) and finishes the one before.
    fn flush(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let job = Job {
            batch: std::mem::take(&mut self.batch),
            held: std::mem::take(&mut self.held),
            sent: std::mem::take(&mut self.sent),
            dir: self.dir().join(format!("work-{}", self.batches % 2)),
        };
        self.batches += 1;
        let include = root().join("tests/fuzz-host");
        let handle = std::thread::spawn(move || {
            let built = host::build(&job.batch, &job.dir, &include);
            (job, built)
        });
        if let Some(previous) = self.pending.replace(handle) {
            self.finish(previous);
        }
    }

    /// Waits for the batch compiling, if any, and finishes it.
    fn drain(&mut self) {
        if let Some(p) = self.pending.take() {
            self.finish(p);
        }
    }

    /// Runs a compiled batch's cases and judges them.
    fn finish(&mut self, handle: std::thread::JoinHandle<(Job, Result<host::Built, String>)>) {
        let (job, built) = handle.join().expect("the host build thread");
        let Job {
            batch,
            held,
            sent,
            dir,
        } = job;
        let built = match built {
            Ok(b) => b,
            Err(e) => {
                self.failures.push(format!("host build: {e}"));
                return;
            }
        };
        let mut skip = Vec::new();
        for (k, why) in &built.refused {
            skip.push(*k);
            if held[*k].origin == Origin::TokenMutated && !self.nvrtc {
                // No NVRTC to say whether the edit is C++ at all.
                self.stats.host_refused_edits += 1;
            } else {
                let h = &held[*k];
                let nvrtc = if self.nvrtc {
                    "NVRTC compiles cleanly"
                } else {
                    "NVRTC was not asked about"
                };
                let msg = format!(
                    "g++ refuses a proven {} text that {nvrtc} (the host header lacks something the grammar allows, or the text is no C++): {why}\n--- emitted ---\n{}",
                    h.origin.name(),
                    h.emitted
                );
                let text = h.text.clone();
                self.fail(&text, None, msg);
            }
        }
        let cases: Vec<HostCase> = batch
            .cases
            .iter()
            .filter(|c| sent.get(&c.id).is_some_and(|s| !skip.contains(&s.text)))
            .cloned()
            .collect();
        if cases.is_empty() {
            return;
        }
        let results = match host::run(&built.exe, &cases, &dir) {
            Ok(r) => r,
            Err(e) => {
                self.failures.push(format!("host run: {e}"));
                return;
            }
        };
        let mut ids: Vec<&u64> = results.keys().collect();
        ids.sort();
        for id in ids {
            let (outcome, report) = &results[id];
            let s = &sent[id];
            match outcome {
                Outcome::Pass => self.stats.launches_run += 1,
                Outcome::Skipped => {}
                Outcome::Hang => {
                    self.stats.launches_run += 1;
                    self.stats.hangs += 1;
                }
                Outcome::Trap(_) => {
                    self.stats.launches_run += 1;
                    self.stats.traps += 1;
                }
                Outcome::OutOfRange | Outcome::Asan => {
                    self.stats.launches_run += 1;
                    self.out_of_range += 1;
                    let h = &held[s.text];
                    let what = if *outcome == Outcome::Asan {
                        "AddressSanitizer report"
                    } else {
                        "out-of-range address"
                    };
                    let msg = format!(
                        "{what} in a launch the safe launch accepts, of kernel `{}` ({} text):\n{}\n{}\nplan: {:?}\n--- emitted ---\n{}",
                        s.kernel,
                        h.origin.name(),
                        s.launch.spell(&s.kernel),
                        report
                            .iter()
                            .take(12)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join("\n"),
                        s.plan,
                        h.emitted
                    );
                    let text = h.text.clone();
                    let case = format!("{}\nhost case: {}", s.launch.spell(&s.kernel), s.line);
                    self.fail(&text, Some(&case), msg);
                }
                Outcome::Driver(why) => self.failures.push(format!(
                    "the host driver failed on case `{}`: {why}\n{}",
                    s.line,
                    report.join("\n")
                )),
            }
        }
    }

    /// A clean text the reader does not prove.
    fn clean_unproven(&mut self, why: String, text: &str) {
        self.stats.clean_unproven += 1;
        // One example of each reason (its words, without the line).
        let key: String = why
            .split_once(": ")
            .map_or(why.as_str(), |(_, r)| r)
            .chars()
            .take(40)
            .collect();
        if self.stats.clean_reasons.len() < 8
            && !self.stats.clean_reasons.iter().any(|r| r.contains(&key))
        {
            let line = why
                .strip_prefix("fuzz.cu:")
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| text.lines().nth(n.wrapping_sub(1)))
                .unwrap_or("");
            self.stats
                .clean_reasons
                .push(format!("{why}\n    at: {}", line.trim()));
        }
    }

    /// Records a failure; saves the text (and the case) under `FUZZ_OUT/cuda-c/`.
    fn fail(&mut self, text: &str, case: Option<&str>, message: String) {
        let name = format!("fail-{:016x}", engine::hash(text.as_bytes()));
        let dir = self.dir();
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(format!("{name}.cu")), text);
        let mut saved = dir.join(format!("{name}.cu")).display().to_string();
        if let Some(c) = case {
            let _ = std::fs::write(dir.join(format!("{name}.case")), format!("{c}\n"));
            saved.push_str(" (and .case)");
        }
        self.failures
            .push(format!("{message}\nsaved: {saved}\n--- text ---\n{text}"));
    }
}

/// The message of a caught panic.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// A kept regression text, with the launch of the `.case` beside it (the
/// kernel's name and the launch).
struct Kept {
    text: String,
    launch: Option<(String, Launch)>,
}

/// The kept regression texts, each with the launch of the `.case` beside it.
fn regressions() -> Vec<Kept> {
    let dir = root().join("tests/fuzz-regressions/cuda-c");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "cu"))
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    assert!(
        !paths.is_empty(),
        "no regression texts in {}",
        dir.display()
    );
    paths
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let launch = std::fs::read_to_string(p.with_extension("case"))
                .ok()
                .and_then(|c| c.lines().next().and_then(Launch::parse));
            Kept { text, launch }
        })
        .collect()
}

/// The attacks' launch: `dim` [16] (1 on further axes), arrays of 16 per
/// axis they are indexed on, values 16 (composites 21, addresses 4096).
fn attack_launch(info: &KernelInfo) -> Launch {
    let mut dim = vec![16i64];
    dim.resize(info.n_dims, 1);
    let mut shapes = Vec::new();
    let mut values = Vec::new();
    for (name, p) in &info.params {
        match p {
            Param::Array(_) => {
                let nd = info
                    .accesses
                    .get(name)
                    .and_then(|a| a.iter().map(Vec::len).max())
                    .unwrap_or(1)
                    .clamp(1, 4);
                shapes.push(Some(vec![16; nd]));
                values.push(0);
            }
            Param::Value(ty) => {
                shapes.push(None);
                values.push(match value_kind(ty) {
                    ValueKind::Composite => 21,
                    ValueKind::Address => 4096,
                    _ => 16,
                });
            }
            Param::Bounds(_) => {
                shapes.push(None);
                values.push(0);
            }
        }
    }
    Launch {
        dim,
        block_dim: 256,
        max_blocks: 0,
        shapes,
        values,
    }
}

/// What a value parameter's type takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    Int,
    Unsigned,
    Wide,
    Address,
    Float,
    Composite,
}

fn value_kind(ty: &str) -> ValueKind {
    let t = ty.replace(' ', "");
    if t.contains("vec")
        || t.contains("mat")
        || t.contains("quat")
        || t.contains("transform")
        || t.contains("spatial")
    {
        ValueKind::Composite
    } else if t.contains("float") || t.contains("double") || t.contains("half") {
        ValueKind::Float
    } else if t.contains("unsignedlonglong") || t.contains("uint64") {
        ValueKind::Address
    } else if t.contains("longlong") || t.contains("int64") {
        ValueKind::Wide
    } else if t.contains("unsigned") || t.contains("uint") {
        ValueKind::Unsigned
    } else {
        ValueKind::Int
    }
}

/// A random value for a parameter of this kind.
fn random_value(rng: &mut Rng, kind: ValueKind) -> i64 {
    let pick = |rng: &mut Rng, xs: &[i64]| xs[rng.below(xs.len())];
    match kind {
        ValueKind::Int => pick(
            rng,
            &[
                0,
                1,
                2,
                3,
                5,
                16,
                100,
                1000,
                -1,
                -2,
                -16,
                -1000,
                i64::from(i32::MAX),
                i64::from(i32::MIN),
                7,
                31,
            ],
        ),
        ValueKind::Unsigned => pick(rng, &[0, 1, 2, 3, 16, 100, 1000, i64::from(u32::MAX), 64]),
        ValueKind::Wide => pick(
            rng,
            &[0, 1, 2, 16, 1000, -1, -16, 1 << 40, -(1 << 40), i64::MAX],
        ),
        ValueKind::Address => pick(rng, &[0, 1, 16, 4096, 1 << 40, 8]),
        ValueKind::Float => pick(rng, &[0, 1, 2, 16, -1, 1000, 3]),
        ValueKind::Composite => pick(rng, &[0, 1, 2, 16, 21, -1]),
    }
}

/// A random launch of a kernel: extents (sometimes more or fewer than its
/// dimensions, rarely 0), a block size, a block cap, array shapes sized
/// to what its accesses need (sometimes one extent short, another
/// dimensionality, or smaller than the launch), values.
fn random_launch(rng: &mut Rng, info: &KernelInfo) -> Launch {
    let nd = match rng.below(12) {
        0 => (info.n_dims + 1).min(4),
        1 => info.n_dims.saturating_sub(1),
        _ => info.n_dims,
    };
    let extent = |rng: &mut Rng| -> i64 {
        match rng.below(16) {
            0 => 0,
            1..=4 => 1 + rng.below(4) as i64,
            5..=8 => [5, 7, 8, 16, 17, 31, 32, 33][rng.below(8)],
            9 => [64, 100, 255, 256, 257][rng.below(5)],
            _ => 1 + rng.below(12) as i64,
        }
    };
    let mut dim: Vec<i64> = (0..nd).map(|_| extent(rng)).collect();
    while dim.iter().product::<i64>() > 4096 {
        let k = rng.below(dim.len());
        dim[k] = (dim[k] / 2).max(1);
    }
    let block_dim = match rng.below(10) {
        0..=5 => [1, 2, 3, 4, 7, 8, 16, 32][rng.below(8)],
        6..=8 => [32, 64, 128, 256][rng.below(4)],
        _ => 1 + rng.below(256) as u32,
    };
    let max_blocks = if rng.below(3) == 0 {
        1 + rng.below(3) as u64
    } else {
        0
    };
    // What the accesses need, axis by axis (the grid's blocks estimated).
    let size = dim.iter().product::<i64>().max(0) as usize;
    let kept = |a: usize| -> usize {
        if a < info.n_dims {
            dim.get(a).copied().unwrap_or(1).max(0) as usize
        } else {
            1
        }
    };
    let mut blocks = size.div_ceil(block_dim as usize).max(1);
    if max_blocks > 0 {
        blocks = blocks.min(max_blocks as usize);
    }
    let mut shapes = Vec::new();
    let mut values = Vec::new();
    for (name, p) in &info.params {
        match p {
            Param::Array(_) => {
                let accesses = info.accesses.get(name).cloned().unwrap_or_default();
                let used = accesses.iter().map(Vec::len).max().unwrap_or(0);
                let ndim = if used == 0 || rng.below(12) == 0 {
                    1 + rng.below(4)
                } else {
                    used.min(4)
                };
                let mut shape: Vec<usize> = (0..ndim)
                    .map(|d| {
                        accesses
                            .iter()
                            .filter_map(|a| a.get(d))
                            .map(|ax| match *ax {
                                Axis::Coord(a) => kept(a),
                                Axis::Work => size,
                                Axis::Block => blocks,
                                Axis::Const(v) if v >= 0 => v as usize + 1,
                                Axis::Const(v) => v.unsigned_abs() as usize,
                                Axis::Other => 1,
                            })
                            .max()
                            .unwrap_or_else(|| 1 + rng.below(4))
                    })
                    .collect();
                match rng.below(8) {
                    0 => {
                        let k = rng.below(ndim);
                        shape[k] = shape[k].saturating_sub(1);
                    }
                    1 => {
                        let k = rng.below(ndim);
                        shape[k] += 1 + rng.below(3);
                    }
                    2 => {
                        let k = rng.below(ndim);
                        shape[k] = rng.below(shape[k] + 2);
                    }
                    _ => {}
                }
                // An array's extents fit an `int` (warp-launch's arrays refuse
                // more), and a case allocates at most MAX_ELEMENTS.
                for e in &mut shape {
                    *e = (*e).min(i32::MAX as usize);
                }
                while shape.iter().fold(1usize, |a, &e| a.saturating_mul(e)) > MAX_ELEMENTS {
                    let k = rng.below(ndim);
                    shape[k] = (shape[k] / 2).max(1);
                }
                shapes.push(Some(shape));
                values.push(0);
            }
            Param::Value(ty) => {
                shapes.push(None);
                values.push(random_value(rng, value_kind(ty)));
            }
            Param::Bounds(_) => {
                shapes.push(None);
                values.push(0);
            }
        }
    }
    Launch {
        dim,
        block_dim,
        max_blocks,
        shapes,
        values,
    }
}

/// Prints a run's summary (and the first failures); the summary line.
fn report(name: &str, run: &Run, seconds: f64) -> String {
    let s = &run.stats;
    // The weakened run says so in its summary: its failures are expected.
    let who = if name.starts_with("Weaken::Nothing") {
        String::new()
    } else {
        format!(" ({name}, failures expected)")
    };
    let line = format!(
        "fuzz cuda-c{who}: {} texts, {} proven, {} kernels compiled by NVRTC{}, {} launches run on the host, {} failures",
        s.texts,
        s.proven_texts,
        s.nvrtc_compiled,
        if s.nvrtc_skipped {
            " (SKIPPED: no CUDA_SYS_NVRTC_LIBRARY)"
        } else {
            ""
        },
        s.launches_run,
        run.failures.len()
    );
    eprintln!("{line}");
    eprintln!(
        "fuzz cuda-c ({name}): {:.1} s; {} read errors, {} kernels proven, {} unproven; {} launches asked, {} accepted; {} hangs, {} traps; {} proven token edits NVRTC refused, {} the host refused",
        seconds,
        s.read_errors,
        s.proven_kernels,
        s.unproven_kernels,
        s.launches_asked,
        s.launches_accepted,
        s.hangs,
        s.traps,
        s.nvrtc_refused_edits.len(),
        s.host_refused_edits
    );
    let origins: Vec<String> = s
        .by_origin
        .iter()
        .map(|(o, (n, p))| format!("{o} {p}/{n}"))
        .collect();
    eprintln!(
        "fuzz cuda-c: proven/texts by origin: {}",
        origins.join(", ")
    );
    if s.clean_unproven > 0 {
        eprintln!(
            "fuzz cuda-c: {} kernels of clean texts unproven (the generator's grammar and the reader's differ); one of each reason:",
            s.clean_unproven
        );
        for r in &s.clean_reasons {
            eprintln!("  {}", r.replace('\n', "\n  "));
        }
    }
    if !s.planted_proven.is_empty() {
        let list: Vec<String> = s
            .planted_proven
            .iter()
            .map(|(c, (n, _))| format!("{c} {n}"))
            .collect();
        eprintln!(
            "fuzz cuda-c: planted kernels the reader proved (in its grammar, or a hole the launches must show): {}",
            list.join(", ")
        );
        if std::env::var_os("FUZZ_CUDA_C_VERBOSE").is_some() {
            for (c, (_, text)) in &s.planted_proven {
                eprintln!("--- {c} ---\n{text}");
            }
        }
    }
    for r in s
        .nvrtc_refused_edits
        .iter()
        .filter(|r| !r.is_empty())
        .take(1)
    {
        eprintln!(
            "fuzz cuda-c: a proven token edit NVRTC refused (safe):\n  {}",
            r.replace('\n', "\n  ")
        );
    }
    line
}

#[test]
fn fuzz_cuda_c() {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let mix = match std::env::var("FUZZ_CUDA_C_MIX") {
        Ok(m) => Mix::parse(&m).unwrap_or_else(|| {
            panic!("FUZZ_CUDA_C_MIX={m}: not `default`, `clean` or an attack class")
        }),
        Err(_) => Mix::Default,
    };
    let cfg = Config::from_env(Weaken::Nothing, mix, cases, true);
    let start = Instant::now();
    let run = Fuzzer::new(cfg).run();
    report("Weaken::Nothing", &run, start.elapsed().as_secs_f64());
    assert!(
        run.stats.launches_run > 0 || cases == 0,
        "no launch ran on the host"
    );
    // A reader that refuses what the generator writes leaves the fuzzer
    // nothing to check: most clean texts must be proven.
    let (clean, proven) = run.stats.by_origin.get("clean").copied().unwrap_or((0, 0));
    assert!(
        proven * 2 >= clean,
        "the reader proves only {proven} of {clean} clean texts (reasons above): the fuzzer checks little"
    );
    assert!(
        run.failures.is_empty(),
        "fuzz cuda-c: {} failures; the first:\n{}",
        run.failures.len(),
        run.failures[0]
    );
}

#[test]
fn the_fuzzer_catches_a_weakened_refusal() {
    // The reader with coordinate writes let through, and every text with a
    // coordinate write planted: the fuzzer must find an address out of range.
    let mut cfg = Config::from_env(
        Weaken::CoordinateWrites,
        Mix::Focus(Attack::CoordinateWrite),
        24,
        false,
    );
    // Its holes are saved apart from a real run's failures.
    cfg.out = cfg.out.join("weakened");
    let start = Instant::now();
    let run = Fuzzer::new(cfg).run();
    report(
        "Weaken::CoordinateWrites",
        &run,
        start.elapsed().as_secs_f64(),
    );
    assert!(
        run.out_of_range > 0,
        "the fuzzer found no out-of-range address with coordinate writes let through ({} launches run)",
        run.stats.launches_run
    );
}

#[test]
fn the_host_header_has_every_name_of_the_device_header() {
    let host = std::fs::read_to_string(root().join("tests/fuzz-host/warp_launch.h"))
        .expect("the host header");
    // The names of namespace `wl` (NVRTC's own integer typedefs before it
    // come from the C library on the host).
    let wl = HEADER
        .split_once("namespace wl {")
        .map_or(HEADER, |(_, w)| w);
    let missing: Vec<&str> = wl
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("using ")
                .and_then(|r| r.split(" =").next())
                .or_else(|| {
                    l.strip_prefix("typedef ")
                        .and_then(|r| r.trim_end_matches(';').rsplit(' ').next())
                })
                .or_else(|| {
                    l.strip_prefix("template <")
                        .and_then(|r| r.split("> struct ").nth(1))
                        .and_then(|r| r.split(' ').next())
                })
                .or_else(|| l.strip_prefix("struct ").and_then(|r| r.split(' ').next()))
        })
        .filter(|name| {
            !host.contains(&format!("using {name} ="))
                && !host.contains(&format!(" {name};"))
                && !host.contains(&format!("struct {name} "))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "names of warp_launch.h missing from the host build: {missing:?}"
    );
}

#[test]
fn a_saved_case_reads_back_as_its_launch() {
    let launch = Launch {
        dim: vec![16, 3],
        block_dim: 32,
        max_blocks: 2,
        shapes: vec![Some(vec![16, 4]), None, Some(vec![7])],
        values: vec![0, -21, 0],
    };
    let line = launch.spell("k7");
    assert_eq!(
        Launch::parse(&line),
        Some(("k7".to_string(), launch)),
        "{line}"
    );
    assert_eq!(Launch::parse("launch kernel=k dim=16 block_dim=x"), None);
}
