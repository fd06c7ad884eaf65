//! A small bounded mutation fuzzer on stable Rust, with no dependencies.
//!
//! Seeds are mutated (truncate, flip, overwrite with interesting values,
//! delete, duplicate, splice with another seed, insert or repeat tokens of
//! the input's language), each input runs under `catch_unwind` and a
//! watchdog: a panicking input is saved as `crash-<hash>` and a hanging
//! one (over the per-input limit) as `hang-<hash>` under the output
//! directory, and the run is reported. The input under test is also kept
//! in `current`, so an abort (a stack overflow, a signal) that kills the
//! process leaves it behind.
//!
//! This file is shared: xtask uses it for its in-process spec target
//! (`xtask/src/fuzz/mod.rs`), and `tests/tests/fuzz.rs` includes it by path
//! for the targets behind cuda-api's and warp-launch's `fuzzing` entry
//! points (xtask may not depend on those crates).

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// SplitMix64: small, fast, deterministic for a seed.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// One target: its name, seed inputs, tokens of its input language, and the
/// function under test (takes any bytes, must not panic or hang).
pub struct Target<'a> {
    /// Name, also the directory under the output directory.
    pub name: &'a str,
    /// Seed inputs (real, valid inputs).
    pub seeds: Vec<Vec<u8>>,
    /// Tokens inserted or repeated by mutations.
    pub tokens: &'a [&'a [u8]],
    /// The function under test.
    pub run: &'a dyn Fn(&[u8]),
}

/// Bounds of a run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Wall-clock budget for the target.
    pub time: Duration,
    /// Most inputs to run (the untouched seeds first).
    pub iterations: u64,
    /// Per-input limit; an input running longer is a hang.
    pub input_limit: Duration,
    /// Random seed of the mutations.
    pub seed: u64,
    /// Where `<target>/crash-*`, `hang-*` and `current` go.
    pub out_dir: PathBuf,
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Target name.
    pub target: String,
    /// Inputs run.
    pub runs: u64,
    /// Saved panicking inputs, with the panic message.
    pub crashes: Vec<(PathBuf, String)>,
    /// Longest time one input took.
    pub slowest: Duration,
    /// Seconds spent.
    pub elapsed: Duration,
}

impl Report {
    /// One line (plus one per crash) for a person.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "fuzz {}: {} inputs in {:.1} s, slowest {:.1} ms, {} crash(es)",
            self.target,
            self.runs,
            self.elapsed.as_secs_f64(),
            self.slowest.as_secs_f64() * 1e3,
            self.crashes.len()
        );
        for (p, m) in &self.crashes {
            s.push_str(&format!("\n  crash: {} ({m})", p.display()));
        }
        s
    }
}

/// FNV-1a of the bytes: a stable file name for an input.
pub fn hash(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

const INTERESTING_U32: &[u32] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
];

/// One to four stacked mutations of `input` (never longer than `max_len`).
pub fn mutate(
    rng: &mut Rng,
    input: &[u8],
    seeds: &[Vec<u8>],
    tokens: &[&[u8]],
    max_len: usize,
) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(11) {
            // Truncate.
            0 => v.truncate(rng.below(len + 1)),
            // Flip a bit.
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            // A random byte.
            2 if len > 0 => {
                let i = rng.below(len);
                v[i] = rng.next_u64() as u8;
            }
            // An interesting little-endian 32- or 64-bit value.
            3 if len > 0 => {
                let i = rng.below(len);
                let x = u64::from(INTERESTING_U32[rng.below(INTERESTING_U32.len())]);
                let x = if rng.below(2) == 0 { x } else { x << 32 | x };
                let width = if rng.below(2) == 0 { 4 } else { 8 };
                for (k, b) in x.to_le_bytes()[..width].iter().enumerate() {
                    if let Some(slot) = v.get_mut(i + k) {
                        *slot = *b;
                    }
                }
            }
            // Delete a range.
            4 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                v.drain(a..b);
            }
            // Duplicate a range.
            5 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(256)).min(len);
                let chunk = v[a..b].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, chunk);
            }
            // Splice with another seed: our prefix, its suffix.
            6 if !seeds.is_empty() => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            // Insert a token.
            7 | 8 if !tokens.is_empty() => {
                let t = tokens[rng.below(tokens.len())];
                let at = rng.below(len + 1);
                v.splice(at..at, t.iter().copied());
            }
            // Repeat a token many times (super-linear behaviour shows up here).
            9 if !tokens.is_empty() => {
                let t = tokens[rng.below(tokens.len())];
                let n = 1 + rng.below(2000);
                let at = rng.below(len + 1);
                let rep: Vec<u8> = t.iter().copied().cycle().take(t.len() * n).collect();
                v.splice(at..at, rep);
            }
            // Overwrite a range with a token.
            _ if !tokens.is_empty() && len > 0 => {
                let t = tokens[rng.below(tokens.len())];
                let at = rng.below(len);
                let end = (at + t.len()).min(len);
                v.splice(at..end, t.iter().copied());
            }
            _ => {}
        }
        v.truncate(max_len);
    }
    v
}

/// The input under test and when it started (read by the watchdog).
type Current = Arc<Mutex<Option<(Instant, Vec<u8>)>>>;

/// The message of the last panic on this process (set by our hook).
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

/// Runs `target` within `config`'s bounds. A hanging input ends the process
/// (exit code 3) after it is saved, since a running thread cannot be stopped.
pub fn run(target: &Target<'_>, config: &Config) -> Report {
    let dir = config.out_dir.join(target.name);
    let _ = std::fs::create_dir_all(&dir);
    let current_path = dir.join("current");
    // Kept open: one positioned write per input, no open/close.
    let mut current_file = std::fs::File::create(&current_path).ok();
    let max_len = target.seeds.iter().map(Vec::len).max().unwrap_or(0) * 2 + 4096;

    // Watchdog: the input under test and when it started.
    let current: Current = Arc::new(Mutex::new(None));
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let current = Arc::clone(&current);
        let done = Arc::clone(&done);
        let dir = dir.clone();
        let limit = config.input_limit;
        let name = target.name.to_string();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                let guard = current.lock().unwrap_or_else(|p| p.into_inner());
                if let Some((start, input)) = guard.as_ref()
                    && start.elapsed() > limit
                {
                    let path = dir.join(format!("hang-{:016x}", hash(input)));
                    let _ = std::fs::write(&path, input);
                    eprintln!(
                        "fuzz {name}: an input ran longer than {} ms (hang); saved as {}",
                        limit.as_millis(),
                        path.display()
                    );
                    let _ = std::io::stderr().flush();
                    std::process::exit(3);
                }
            }
        })
    };

    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let mut m = LAST_PANIC.lock().unwrap_or_else(|p| p.into_inner());
        *m = info.to_string();
    }));

    let mut rng = Rng(config.seed ^ hash(target.name.as_bytes()));
    let mut report = Report {
        target: target.name.to_string(),
        ..Report::default()
    };
    let start = Instant::now();
    let mut last: Vec<u8> = Vec::new();
    let mut i = 0u64;
    while i < config.iterations && (i < target.seeds.len() as u64 || start.elapsed() < config.time)
    {
        let input = if (i as usize) < target.seeds.len() {
            target.seeds[i as usize].clone()
        } else if !last.is_empty() && rng.below(4) == 0 {
            mutate(&mut rng, &last, &target.seeds, target.tokens, max_len)
        } else if target.seeds.is_empty() {
            mutate(&mut rng, &[], &target.seeds, target.tokens, max_len)
        } else {
            let s = &target.seeds[rng.below(target.seeds.len())];
            mutate(&mut rng, s, &target.seeds, target.tokens, max_len)
        };
        if let Some(f) = current_file.as_mut() {
            use std::io::Seek;
            let _ = f
                .seek(std::io::SeekFrom::Start(0))
                .and_then(|_| f.write_all(&input))
                .and_then(|_| f.set_len(input.len() as u64));
        }
        let t0 = Instant::now();
        *current.lock().unwrap_or_else(|p| p.into_inner()) = Some((t0, input.clone()));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (target.run)(&input)));
        *current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        report.slowest = report.slowest.max(t0.elapsed());
        if r.is_err() {
            let path = dir.join(format!("crash-{:016x}", hash(&input)));
            let _ = std::fs::write(&path, &input);
            let mut msg = LAST_PANIC.lock().map(|m| m.clone()).unwrap_or_default();
            if let Some((cut, _)) = msg.char_indices().nth(300) {
                msg.truncate(cut);
                msg.push_str("...");
            }
            if report.crashes.iter().all(|(p, _)| *p != path) {
                report.crashes.push((path, msg));
            }
        }
        last = input;
        i += 1;
    }
    report.runs = i;
    report.elapsed = start.elapsed();
    done.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    std::panic::set_hook(previous_hook);
    drop(current_file);
    let _ = std::fs::remove_file(&current_path);
    report
}

/// Reads every regular file directly under `dir` as a seed (sorted by name).
pub fn seeds_from(dir: &Path, ext: &[&str]) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .into_iter()
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| ext.contains(&e))
        })
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

impl Config {
    /// A config from the environment: `FUZZ_SECONDS` (per target, default
    /// `seconds`), `FUZZ_ITERATIONS` (default `iterations`), `FUZZ_SEED`
    /// (default 1), `FUZZ_INPUT_MS` (per-input limit, default 2000) and
    /// `FUZZ_OUT` (default `out_dir`).
    pub fn from_env(seconds: f64, iterations: u64, out_dir: PathBuf) -> Config {
        fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
            std::env::var(name).ok().and_then(|s| s.trim().parse().ok())
        }
        let seconds: f64 = var("FUZZ_SECONDS").unwrap_or(seconds);
        Config {
            time: Duration::from_secs_f64(seconds.clamp(0.0, 86_400.0)),
            iterations: var("FUZZ_ITERATIONS").unwrap_or(iterations),
            input_limit: Duration::from_millis(var("FUZZ_INPUT_MS").unwrap_or(2000)),
            seed: var("FUZZ_SEED").unwrap_or(1),
            out_dir: std::env::var_os("FUZZ_OUT")
                .map(PathBuf::from)
                .unwrap_or(out_dir),
        }
    }
}

/// Whether `name` is selected by `FUZZ_TARGET` (unset or empty: all).
pub fn selected(name: &str) -> bool {
    match std::env::var("FUZZ_TARGET") {
        Ok(t) if !t.is_empty() => t.split(',').any(|t| t.trim() == name),
        _ => true,
    }
}
