//! Warp's own kernels on warp-launch's `"cpu"` device: the Warp test
//! module's `saxpy` (1-D, 4M elements) and `add2d` (2-D, 2048 x 2048), Warp's
//! CPU code compiled by warp-build (generic x86-64, `-O3`), serially and on
//! every core (`set_cpu_threads`), against a hand-written Rust `saxpy` on
//! `"cpu"` (a `cpu_each_fn` closure, per element) and Warp 1.19.0's own
//! CPU device on the same machine with the same target flags
//! (`tests/warp/cpu_bench.py`, run with `WARP_BUILD_PYTHONPATH`'s Warp when
//! set). Medians of 15 launches after a warm-up; the serial runs and Warp's
//! take turns for five rounds and the summary gives the medians of the
//! rounds.
//!
//! `cargo bench -p warp-corpus --bench cpu`

use std::process::Command;
use std::time::Instant;

use warp_corpus::kernels::KERNELS;
use warp_launch::{AotModule, Array, Device, Kernel, cpu_each_fn, set_cpu_threads};

const N: usize = 1 << 22;
const ROWS: usize = 2048;
const COLS: usize = 2048;
const ROUNDS: usize = 15;

fn median(mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// Warp's CPU device on the same kernels: (saxpy, add2d) ns per element.
fn warp_peer() -> Result<(f64, f64), String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../warp/cpu_bench.py");
    let mut cmd = Command::new(std::env::var("WARP_BUILD_PYTHON").unwrap_or("python3".into()));
    if let Some(p) = std::env::var_os("WARP_BUILD_PYTHONPATH") {
        cmd.env("PYTHONPATH", p);
    }
    let out = cmd
        .args([
            script,
            &N.to_string(),
            &ROWS.to_string(),
            &COLS.to_string(),
            &ROUNDS.to_string(),
        ])
        .output()
        .map_err(|e| format!("running python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cpu_bench.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    // Warp prints its own lines first; the figures are the last line.
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|e| format!("{e}: {line}"))?;
    Ok((
        v["saxpy_ns_per_elem"].as_f64().ok_or("no saxpy figure")?,
        v["add2d_ns_per_elem"].as_f64().ok_or("no add2d figure")?,
    ))
}

/// The bench's arrays: saxpy's `x` and `y`, add2d's `a`, `b` and `out`.
struct Data {
    x: Array,
    y: Array,
    a: Array,
    b: Array,
    out: Array,
}

impl Data {
    fn new() -> Data {
        let xs: Vec<f32> = (0..N).map(|i| i as f32 / N as f32).collect();
        let ones = vec![1.0f32; ROWS * COLS];
        Data {
            x: Array::from_slice(Device::Cpu, &xs, &[N]).expect("x"),
            y: Array::zeros::<f32>(Device::Cpu, &[N]).expect("y"),
            a: Array::from_slice(Device::Cpu, &ones, &[ROWS, COLS]).expect("a"),
            b: Array::from_slice(Device::Cpu, &ones, &[ROWS, COLS]).expect("b"),
            out: Array::zeros::<f32>(Device::Cpu, &[ROWS, COLS]).expect("out"),
        }
    }

    /// (saxpy, add2d) ns per element, medians of `ROUNDS` launches.
    fn times(&self, saxpy: &Kernel, add2d: &Kernel) -> (f64, f64) {
        let s = median(|| {
            saxpy
                .launch(N)
                .inputs((2.0f32, &self.x, &self.y))
                .device(Device::Cpu)
                .run()
                .expect("saxpy")
        });
        let a = median(|| {
            add2d
                .launch([ROWS as i64, COLS as i64])
                .inputs((&self.a, &self.b, &self.out))
                .device(Device::Cpu)
                .run()
                .expect("add2d")
        });
        (s * 1e9 / N as f64, a * 1e9 / (ROWS * COLS) as f64)
    }
}

fn main() {
    let module = AotModule::from_embedded(&KERNELS).expect("module");
    let saxpy = module.kernel("saxpy").expect("saxpy");
    let add2d = module.kernel("add2d").expect("add2d");
    let data = Data::new();
    let (x, y) = (&data.x, &data.y);
    let threads = warp_launch::cpu_threads();

    // On every core first, then serial.
    set_cpu_threads(0);
    let (saxpy_threaded, add_threaded) = data.times(&saxpy, &add2d);

    // Serial runs and Warp's CPU device take turns (five rounds), so that
    // both see the same state of this shared machine; each round allocates
    // its arrays afresh (as each of Warp's runs, a new process, does): these
    // kernels stream memory, and where their pages land moves a run by up
    // to 1.7x. Medians of the rounds.
    set_cpu_threads(1);
    let mut ours = (Vec::new(), Vec::new());
    let mut peer: Result<(Vec<f64>, Vec<f64>), String> = Ok((Vec::new(), Vec::new()));
    for _ in 0..5 {
        let (s, a) = Data::new().times(&saxpy, &add2d);
        ours.0.push(s);
        ours.1.push(a);
        if let Ok((s, a)) = &mut peer {
            match warp_peer() {
                Ok((ws, wa)) => {
                    s.push(ws);
                    a.push(wa);
                }
                Err(e) => peer = Err(e),
            }
        }
    }
    let mid = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (saxpy_serial, add_serial) = (mid(ours.0), mid(ours.1));
    let peer = peer.map(|(s, a)| (mid(s), mid(a)));

    // The same saxpy written by hand in Rust (a per-element closure,
    // its arguments decoded once per launch).
    let rust = saxpy.with_cpu(
        cpu_each_fn(|args, each| {
            let a: f32 = args.value(0)?;
            let (x, y) = (args.array::<f32>(1)?, args.array::<f32>(2)?);
            each.run(|t| {
                let i = t.tid();
                y.set(i, a * x.get(i)? + y.get(i)?)
            })
        }),
        None,
    );
    let saxpy_rust = median(|| {
        rust.launch(N)
            .inputs((2.0f32, x, y))
            .device(Device::Cpu)
            .run()
            .expect("rust saxpy")
    }) * 1e9
        / N as f64;

    let gps = |ns: f64| 1.0 / ns;
    println!(
        "bench cpu: saxpy ({N} elements): Warp's CPU code serial {saxpy_serial:.3} ns/element ({:.2} G elements/s), threaded ({threads} threads) {saxpy_threaded:.3} ns/element, hand-written Rust cpu_each_fn {saxpy_rust:.3} ns/element",
        gps(saxpy_serial)
    );
    println!(
        "bench cpu: add2d ({ROWS} x {COLS}): Warp's CPU code serial {add_serial:.3} ns/element ({:.2} G elements/s), threaded ({threads} threads) {add_threaded:.3} ns/element",
        gps(add_serial)
    );
    match peer {
        Ok((w_saxpy, w_add)) => println!(
            "bench cpu summary: serial vs Warp 1.19.0's CPU device (same machine, generic x86-64): saxpy {:.2}x faster ({saxpy_serial:.3} vs {w_saxpy:.3} ns/element), add2d {:.2}x faster ({add_serial:.3} vs {w_add:.3} ns/element); threaded ({threads} threads) saxpy {:.2}x, add2d {:.2}x serial; hand-written Rust saxpy {:.1}x slower than Warp's CPU code",
            w_saxpy / saxpy_serial,
            w_add / add_serial,
            saxpy_serial / saxpy_threaded,
            add_serial / add_threaded,
            saxpy_rust / saxpy_serial
        ),
        Err(e) => println!(
            "bench cpu summary: Warp's CPU device not measured ({e}); threaded ({threads} threads) saxpy {:.2}x, add2d {:.2}x serial",
            saxpy_serial / saxpy_threaded,
            add_serial / add_threaded
        ),
    }
}
