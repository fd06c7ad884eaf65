//! Warp 1.19.0's own examples, end to end on the GPU through the typed
//! launchers generated from them, equal to Warp's CPU device.
//!
//! `tests/warp/corpus.py` (run by `tests/warp/build.py`, which
//! `cargo xtask gpu-bundle` runs) compiled every example's Warp modules for
//! sm_90 into `<data>/corpus/<example>/<module>/` and ran the launch
//! sequences of eight examples on Warp's CPU device, recording every launch
//! (kernel, dims, argument values) and each array argument's content before
//! and after it (`<data>/corpus/cases/`). Here each module is loaded
//! (`AotModule::load`), its checked-in typed launchers
//! (`gpu_corpus/<example>/<module>.rs`, kept equal to the generator's output
//! by `cargo test -p warp-corpus --test drift`) take their kernels, and the
//! launches run in the same order on the same data: before each launch,
//! every array argument that does not already hold the CPU's content (a
//! previous launch that matched only within a tolerance, or work the example
//! did between launches such as `zero_()`) is uploaded, so each comparison
//! covers one launch. After each launch every array argument is compared
//! with the CPU's content after it: bit for bit where the kernel only moves
//! data or computes with integers, else within a tolerance stated per
//! kernel ([`tolerance`]).
//!
//! Kernels whose array accesses the launch cannot check (computed indices:
//! stencils, clamped lookups) are refused by their safe typed launcher
//! (`Error::Unproven`): the test asserts that refusal for exactly the
//! kernels listed in [`UNPROVEN`], then runs them through the same typed
//! launcher's `unsafe` `launch_unchecked` with the same arguments.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use sdk_tests::warp::data_dir;
use serde_json::Value as Json;
use warp_launch::{AotModule, Array, DType, Device, Element, Error, TypedArray};

// The launchers are generated (prettyplease formats them); the test uses
// only some of each module's methods.
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_wave/example_wave.rs"]
mod example_wave;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_fluid/example_fluid.rs"]
mod example_fluid;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_fdtd_3d/example_fdtd_3d.rs"]
mod example_fdtd_3d;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_graph_capture/example_graph_capture.rs"]
mod example_graph_capture;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_tile_fft/example_tile_fft.rs"]
mod example_tile_fft;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_tile_convolution/example_tile_convolution.rs"]
mod example_tile_convolution;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_tile_filtering/example_tile_filtering.rs"]
mod example_tile_filtering;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "gpu_corpus/example_alloc_tracker/example_alloc_tracker.rs"]
mod example_alloc_tracker;

/// Kernels whose safe launch is refused: an array indexed by a computed
/// index (a neighbour, a clamped or interpolated position) or passed to a
/// function. Their typed launcher must return `Error::Unproven`.
const UNPROVEN: &[(&str, &str)] = &[
    ("example_wave", "wave_solve"),
    ("example_fluid", "advect"),
    ("example_fluid", "divergence"),
    ("example_fluid", "pressure_apply"),
    ("example_fluid", "pressure_solve"),
    ("example_fdtd_3d", "update_h"),
    ("example_fdtd_3d", "update_e"),
    ("example_fdtd_3d", "extract_e_x_center_plane"),
];

/// How a kernel's GPU result must match Warp's CPU result.
#[derive(Clone, Copy, Debug)]
enum Tol {
    /// Bit for bit.
    Exact,
    /// Each float element within `rel` times the largest magnitude in the
    /// CPU's array (integers and bools still bit for bit).
    Rel(f64),
}

/// NVRTC contracts `a * b + c` into one FMA (`--fmad=true`, Warp's
/// `fuse_fp`), Warp's CPU compiler (LLVM) fuses other pairs or none: results
/// of float arithmetic may differ in the last bits.
const FMA: &str = "float arithmetic: NVRTC and Warp's CPU compiler (LLVM) contract different multiply-adds into FMAs";

/// The tolerance of each kernel the cases launch, and why.
fn tolerance(module: &str, kernel: &str) -> (Tol, &'static str) {
    match (module, kernel) {
        ("example_wave", "grid_update") => (Tol::Exact, "moves heights into vertices"),
        ("example_wave", "wave_displace") => (
            Tol::Rel(1e-5),
            "mag * sin(t): CUDA's sinf and the CPU's libm may differ in the last bit",
        ),
        ("example_wave", "wave_solve") => (Tol::Rel(1e-5), FMA),
        ("example_fluid", "init") => (
            Tol::Exact,
            "integer coordinates: the squares, their sum and the correctly rounded sqrt are exact; stores constants",
        ),
        ("example_fluid", _) => (Tol::Rel(1e-5), FMA),
        ("example_fdtd_3d", "increment_timestep") => (Tol::Exact, "integer increment"),
        ("example_fdtd_3d", "extract_e_x_center_plane") => (Tol::Exact, "copies a plane"),
        ("example_fdtd_3d", "update_h") => (Tol::Rel(1e-5), FMA),
        ("example_fdtd_3d", "update_e") => (
            Tol::Rel(1e-2),
            "the point source's envelope 1 - exp(-(t/3)^2) at t = 0.018 to 0.09 cancels: one ulp of expf \
             (CUDA's is within 2 ulp, the CPU's libm within 1) is 1e-3 of the result at the source cell, \
             the largest value of the field after the first steps; elsewhere FMA contraction as above",
        ),
        ("example_fdtd_3d", "compute_em_energy") => (
            Tol::Rel(1e-4),
            "two sums over 128^3 cells: 256-thread tile sums and atomic adds in any order on the GPU, one thread a block on Warp's CPU; float addition is not associative",
        ),
        ("example_graph_capture", "slide") => (
            Tol::Exact,
            "one float addition per element, correctly rounded on both",
        ),
        ("example_graph_capture", "fbm") => (Tol::Rel(1e-5), FMA),
        ("example_alloc_tracker", "enforce_ground") => (
            Tol::Exact,
            "moves values and multiplies once (|v| * restitution): correctly rounded on both",
        ),
        ("example_alloc_tracker", _) => (Tol::Rel(1e-6), FMA),
        ("example_tile_fft" | "example_tile_convolution" | "example_tile_filtering", _) => (
            Tol::Rel(1e-12),
            "float64 FFTs: cuFFTDx (libmathdx, linked into Warp's cubin) on the GPU and Warp's own FFT on the CPU round differently",
        ),
        _ => panic!("no tolerance stated for {module}.{kernel}"),
    }
}

// -- the recorded cases -------------------------------------------------------------------

struct ArrayInfo {
    dtype: &'static DType,
    shape: Vec<usize>,
    bytes: usize,
}

struct State {
    array: usize,
    base: Option<usize>,
    /// (offset in the array, length, offset in the blob)
    runs: Vec<(usize, usize, usize)>,
}

enum ArgRec {
    Array(usize),
    Value(&'static DType, Vec<u8>),
}

struct LaunchRec {
    module: String,
    kernel: String,
    dim: Vec<i64>,
    tiled: bool,
    block_dim: u64,
    args: Vec<ArgRec>,
    before: Vec<(usize, usize)>,
    after: Vec<(usize, usize)>,
}

struct Case {
    example: String,
    note: String,
    /// module -> (directory, block dim)
    modules: BTreeMap<String, (PathBuf, u64)>,
    arrays: Vec<ArrayInfo>,
    states: Vec<State>,
    launches: Vec<LaunchRec>,
    blob: Vec<u8>,
    host_launches: Vec<String>,
}

fn usize_of(v: &Json) -> usize {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}")) as usize
}

fn pairs(v: &Json) -> Vec<(usize, usize)> {
    v.as_array()
        .expect("pairs")
        .iter()
        .map(|p| (usize_of(&p[0]), usize_of(&p[1])))
        .collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn dtype(name: &str) -> &'static DType {
    DType::by_name(name).unwrap_or_else(|| panic!("unknown dtype {name}"))
}

impl Case {
    fn load(corpus: &Path, c: &Json) -> Case {
        let example = c["example"].as_str().expect("example").to_string();
        let blob_path = corpus.join(c["blob"].as_str().expect("blob"));
        let blob =
            std::fs::read(&blob_path).unwrap_or_else(|e| panic!("{}: {e}", blob_path.display()));
        let modules = c["modules"]
            .as_object()
            .expect("modules")
            .iter()
            .map(|(m, v)| {
                let dir = corpus.join(v["dir"].as_str().expect("dir"));
                (
                    m.clone(),
                    (dir, v["block_dim"].as_u64().expect("block_dim")),
                )
            })
            .collect();
        let arrays = c["arrays"]
            .as_array()
            .expect("arrays")
            .iter()
            .map(|a| ArrayInfo {
                dtype: dtype(a["dtype"].as_str().expect("dtype")),
                shape: a["shape"]
                    .as_array()
                    .expect("shape")
                    .iter()
                    .map(usize_of)
                    .collect(),
                bytes: usize_of(&a["bytes"]),
            })
            .collect();
        let states = c["states"]
            .as_array()
            .expect("states")
            .iter()
            .map(|s| State {
                array: usize_of(&s["array"]),
                base: s["base"].as_u64().map(|b| b as usize),
                runs: s["runs"]
                    .as_array()
                    .expect("runs")
                    .iter()
                    .map(|r| (usize_of(&r[0]), usize_of(&r[1]), usize_of(&r[2])))
                    .collect(),
            })
            .collect();
        let launches = c["launches"]
            .as_array()
            .expect("launches")
            .iter()
            .map(|l| LaunchRec {
                module: l["module"].as_str().expect("module").to_string(),
                kernel: l["kernel"].as_str().expect("kernel").to_string(),
                dim: l["dim"]
                    .as_array()
                    .expect("dim")
                    .iter()
                    .map(|d| d.as_i64().expect("dim"))
                    .collect(),
                tiled: l["tiled"].as_bool().expect("tiled"),
                block_dim: l["block_dim"].as_u64().expect("block_dim"),
                args: l["args"]
                    .as_array()
                    .expect("args")
                    .iter()
                    .map(|a| match a["kind"].as_str().expect("kind") {
                        "array" => ArgRec::Array(usize_of(&a["array"])),
                        _ => ArgRec::Value(
                            dtype(a["dtype"].as_str().expect("dtype")),
                            hex(a["bytes_hex"].as_str().expect("bytes_hex")),
                        ),
                    })
                    .collect(),
                before: pairs(&l["before"]),
                after: pairs(&l["after"]),
            })
            .collect();
        let host_launches = c["host_launches"]
            .as_array()
            .expect("host_launches")
            .iter()
            .map(|h| format!("{}: {}", h["kernel"], h["reason"]))
            .collect();
        Case {
            example,
            note: c["note"].as_str().unwrap_or_default().to_string(),
            modules,
            arrays,
            states,
            launches,
            blob,
            host_launches,
        }
    }
}

// -- replaying a case ---------------------------------------------------------------------

/// The typed launchers of every module the cases use.
struct Modules {
    wave: example_wave::ExampleWave,
    fluid: example_fluid::ExampleFluid,
    fdtd: example_fdtd_3d::ExampleFdtd3d,
    graph: example_graph_capture::ExampleGraphCapture,
    fft: example_tile_fft::ExampleTileFft,
    conv: example_tile_convolution::ExampleTileConvolution,
    filter: example_tile_filtering::ExampleTileFiltering,
    particles: example_alloc_tracker::ExampleAllocTracker,
}

impl Modules {
    fn load(cases: &[Case]) -> Modules {
        let mut loaded: HashMap<&str, AotModule> = HashMap::new();
        for case in cases {
            for (name, (dir, _)) in &case.modules {
                let m = AotModule::load(dir)
                    .unwrap_or_else(|e| panic!("{}: {name}: {e}", case.example));
                assert_eq!(
                    m.image().unwrap_or_else(|e| panic!("{name}: {e}")),
                    format!("wp_{name}.sm90.cubin"),
                    "{name}"
                );
                loaded.insert(name.as_str(), m);
            }
        }
        let m = |name: &str| {
            loaded
                .get(name)
                .unwrap_or_else(|| panic!("no case loads module {name}"))
        };
        Modules {
            wave: example_wave::ExampleWave::new(m("example_wave")).expect("example_wave"),
            fluid: example_fluid::ExampleFluid::new(m("example_fluid")).expect("example_fluid"),
            fdtd: example_fdtd_3d::ExampleFdtd3d::new(m("example_fdtd_3d"))
                .expect("example_fdtd_3d"),
            graph: example_graph_capture::ExampleGraphCapture::new(m("example_graph_capture"))
                .expect("example_graph_capture"),
            fft: example_tile_fft::ExampleTileFft::new(m("example_tile_fft"))
                .expect("example_tile_fft"),
            conv: example_tile_convolution::ExampleTileConvolution::new(m(
                "example_tile_convolution",
            ))
            .expect("example_tile_convolution"),
            filter: example_tile_filtering::ExampleTileFiltering::new(m("example_tile_filtering"))
                .expect("example_tile_filtering"),
            particles: example_alloc_tracker::ExampleAllocTracker::new(m("example_alloc_tracker"))
                .expect("example_alloc_tracker"),
        }
    }
}

/// The GPU's arrays of one case and which recorded state each holds.
struct Replay<'c> {
    case: &'c Case,
    arrays: Vec<Array>,
    holds: Vec<Option<usize>>,
    /// The last state rebuilt per array.
    memo: HashMap<usize, (usize, Vec<u8>)>,
}

impl<'c> Replay<'c> {
    fn new(case: &'c Case, device: Device) -> Replay<'c> {
        let arrays = case
            .arrays
            .iter()
            .map(|a| {
                let arr = Array::zeros_dtype(device, a.dtype, &a.shape).expect("allocate");
                assert_eq!(arr.to_bytes().expect("read").len(), a.bytes);
                arr
            })
            .collect();
        Replay {
            case,
            arrays,
            holds: vec![None; case.arrays.len()],
            memo: HashMap::new(),
        }
    }

    /// The bytes of recorded state `sid`: its base's (zeros for none) with its runs applied.
    fn state(&mut self, sid: usize) -> Vec<u8> {
        let array = self.case.states[sid].array;
        let mut chain = vec![sid];
        let mut start = vec![0u8; self.case.arrays[array].bytes];
        let mut cur = self.case.states[sid].base;
        while let Some(b) = cur {
            if let Some((m, bytes)) = self.memo.get(&array)
                && *m == b
            {
                start = bytes.clone();
                break;
            }
            chain.push(b);
            cur = self.case.states[b].base;
        }
        for &s in chain.iter().rev() {
            let st = &self.case.states[s];
            assert_eq!(st.array, array, "state {s} belongs to another array");
            for &(off, len, at) in &st.runs {
                start[off..off + len].copy_from_slice(&self.case.blob[at..at + len]);
            }
        }
        self.memo.insert(array, (sid, start.clone()));
        start
    }

    /// Uploads every array argument that does not hold its state before `l`.
    fn prepare(&mut self, l: &LaunchRec) {
        for &(a, sid) in &l.before {
            if self.holds[a] != Some(sid) {
                let bytes = self.state(sid);
                self.arrays[a]
                    .storage()
                    .copy_from_host(self.arrays[a].offset(), &bytes)
                    .expect("upload");
                self.holds[a] = Some(sid);
            }
        }
    }

    /// Argument `i` of `l`, an array, typed as the launcher wants it.
    fn a<T: Element, const N: usize>(&self, l: &LaunchRec, i: usize) -> TypedArray<T, N> {
        match &l.args[i] {
            ArgRec::Array(a) => self.arrays[*a]
                .typed::<T, N>()
                .unwrap_or_else(|e| panic!("{}: argument {i}: {e}", l.kernel)),
            ArgRec::Value(..) => panic!("{}: argument {i} is a value", l.kernel),
        }
    }

    /// Argument `i` of `l`, a value, as the Rust type the launcher takes.
    fn v<T: Element>(&self, l: &LaunchRec, i: usize) -> T {
        match &l.args[i] {
            ArgRec::Value(d, bytes) => {
                assert_eq!(T::DTYPE.name, d.name, "{}: argument {i}", l.kernel);
                assert_eq!(
                    bytes.len(),
                    std::mem::size_of::<T>(),
                    "{}: argument {i}",
                    l.kernel
                );
                // SAFETY: `bytes` holds size_of::<T>() bytes (checked), and an
                // `Element` type is plain numbers, valid for every bit pattern.
                unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
            }
            ArgRec::Array(_) => panic!("{}: argument {i} is an array", l.kernel),
        }
    }

    /// Compares every array argument with the CPU's state after `l`.
    fn check(&mut self, l: &LaunchRec, tol: Tol) -> Result<Option<f64>, String> {
        let mut worst: Option<f64> = None;
        for &(a, sid) in &l.after {
            let want = self.state(sid);
            let got = self.arrays[a].to_bytes().map_err(|e| e.to_string())?;
            let diff = compare(self.case.arrays[a].dtype, &got, &want, tol)
                .map_err(|e| format!("array {a} ({}): {e}", self.case.arrays[a].dtype.name))?;
            self.holds[a] = if diff.is_none() { Some(sid) } else { None };
            if let Some(d) = diff {
                worst = Some(worst.map_or(d, |w: f64| w.max(d)));
            }
        }
        Ok(worst)
    }
}

/// `None` when `got` equals `want` bit for bit, else the largest difference
/// relative to the largest magnitude of `want` (an error past `tol`).
fn compare(dtype: &DType, got: &[u8], want: &[u8], tol: Tol) -> Result<Option<f64>, String> {
    if got.len() != want.len() {
        return Err(format!("{} bytes, {} expected", got.len(), want.len()));
    }
    if got == want {
        return Ok(None);
    }
    let size = dtype.scalar.size();
    let float = matches!(dtype.scalar.name(), "float32" | "float64");
    let rel = match tol {
        Tol::Rel(r) if float => r,
        _ => {
            let i = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
            return Err(format!(
                "differs at byte {i} (element {}) and must be bit-exact",
                i / dtype.size
            ));
        }
    };
    let value = |b: &[u8]| -> f64 {
        if size == 4 {
            f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64
        } else {
            f64::from_le_bytes(b.try_into().expect("8 bytes"))
        }
    };
    let scale = want
        .chunks(size)
        .map(value)
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let mut worst = 0.0f64;
    for (i, (g, w)) in got.chunks(size).zip(want.chunks(size)).enumerate() {
        if g == w {
            continue;
        }
        let (gv, wv) = (value(g), value(w));
        let d = (gv - wv).abs();
        // A NaN difference (NaN on one side only) fails too.
        if d.is_nan() || d > rel * scale {
            return Err(format!(
                "scalar {i}: GPU {gv:e}, Warp's CPU {wv:e}: |difference| {d:e} > {rel:e} x {scale:e} (the largest |value|)"
            ));
        }
        worst = worst.max(if scale > 0.0 { d / scale } else { 0.0 });
    }
    Ok(Some(worst))
}

/// How a launch ran.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ran {
    /// Through the typed launcher's safe `launch` (or `launch_tiled`).
    Typed,
    /// The safe typed launcher refused it (`Error::Unproven`); run through
    /// the same launcher's `unsafe` `launch_unchecked`.
    Unchecked,
}

/// A typed launcher's call and how it ran; `a i` passes argument `i` as a
/// typed array, `v i` as a value. `unproven` marks a kernel of
/// [`UNPROVEN`]: its safe `launch` must refuse it, then its
/// `launch_unchecked` runs it with the same arguments.
macro_rules! call {
    (unproven $k:expr, $r:expr, $l:expr; $($kind:ident $i:literal),* $(,)?) => {{
        let k = &$k;
        assert!(
            UNPROVEN.contains(&($l.module.as_str(), $l.kernel.as_str())),
            "{}.{} is not listed as unproven",
            $l.module,
            $l.kernel
        );
        let refused = k.launch($l.dim.clone(), $(call!(@$kind $r, $l, $i)),*);
        assert!(
            matches!(refused, Err(Error::Unproven(_))),
            "{}.{}: the safe typed launcher must refuse it: {refused:?}",
            $l.module,
            $l.kernel
        );
        // SAFETY: the arguments are the example's own arrays (same shapes,
        // contents and dims as its launch on Warp's CPU device, which these
        // are copies of); every index these kernels compute stays inside
        // them for those shapes: example_wave's and example_fluid's lookups
        // clamp to the grid, example_fluid's and example_fdtd_3d's
        // neighbours (i + 1, j - 1, ...) are guarded by the borders, and the
        // fdtd center plane's y index (63) is below the 128 of its axis.
        let r = unsafe { k.launch_unchecked(None, $l.dim.clone(), $(call!(@$kind $r, $l, $i)),*) };
        (r, Ran::Unchecked)
    }};
    ($k:expr, $method:ident, $r:expr, $l:expr; $($kind:ident $i:literal),* $(,)?) => {{
        let k = &$k;
        (k.$method($l.dim.clone(), $(call!(@$kind $r, $l, $i)),*), Ran::Typed)
    }};
    (@a $r:expr, $l:expr, $i:literal) => { &$r.a($l, $i) };
    (@v $r:expr, $l:expr, $i:literal) => { $r.v($l, $i) };
}

/// Runs `l` through its typed launcher: `launch` or `launch_tiled`, or for
/// the kernels of [`UNPROVEN`], `launch_unchecked` after `launch` refused.
fn run(m: &Modules, r: &Replay<'_>, l: &LaunchRec) -> Ran {
    let (result, ran) = match (l.module.as_str(), l.kernel.as_str(), l.tiled) {
        ("example_wave", "wave_displace", false) => call!(m.wave.wave_displace, launch, r, l;
            a 0, a 1, v 2, v 3, v 4, v 5, v 6, v 7, v 8),
        ("example_wave", "wave_solve", false) => call!(unproven m.wave.wave_solve, r, l;
            a 0, a 1, v 2, v 3, v 4, v 5, v 6, v 7),
        ("example_wave", "grid_update", false) => call!(m.wave.grid_update, launch, r, l; a 0, a 1),
        ("example_fluid", "init", false) => call!(m.fluid.init, launch, r, l; a 0, a 1, v 2, v 3),
        ("example_fluid", "integrate", false) => {
            call!(m.fluid.integrate, launch, r, l; a 0, a 1, v 2)
        }
        ("example_fluid", "divergence", false) => {
            call!(unproven m.fluid.divergence, r, l; a 0, a 1)
        }
        ("example_fluid", "pressure_solve", false) => call!(unproven m.fluid.pressure_solve, r, l;
            a 0, a 1, a 2),
        ("example_fluid", "pressure_apply", false) => call!(unproven m.fluid.pressure_apply, r, l;
            a 0, a 1),
        ("example_fluid", "advect", false) => call!(unproven m.fluid.advect, r, l;
            a 0, a 1, a 2, a 3, v 4),
        ("example_fdtd_3d", "update_h", false) => call!(unproven m.fdtd.update_h, r, l;
            a 0, a 1, a 2, a 3, a 4, a 5, a 6, a 7),
        ("example_fdtd_3d", "update_e", false) => call!(unproven m.fdtd.update_e, r, l;
            a 0, a 1, a 2, a 3, a 4, a 5, a 6, a 7, a 8),
        ("example_fdtd_3d", "increment_timestep", false) => {
            call!(m.fdtd.increment_timestep, launch, r, l;
            a 0)
        }
        ("example_fdtd_3d", "compute_em_energy", false) => {
            call!(m.fdtd.compute_em_energy, launch, r, l;
            a 0, a 1, a 2, a 3, a 4, a 5, a 6, a 7)
        }
        ("example_fdtd_3d", "extract_e_x_center_plane", false) => call!(
            unproven m.fdtd.extract_e_x_center_plane, r, l; a 0, v 1, a 2),
        ("example_graph_capture", "slide", false) => call!(m.graph.slide, launch, r, l; a 0, v 1),
        ("example_graph_capture", "fbm", false) => call!(m.graph.fbm, launch, r, l;
            v 0, v 1, v 2, a 3, a 4, a 5),
        ("example_tile_fft", "fft_tiled", true) => {
            call!(m.fft.fft_tiled, launch_tiled, r, l; a 0, a 1)
        }
        ("example_tile_convolution", "conv_tiled", true) => {
            call!(m.conv.conv_tiled, launch_tiled, r, l;
            a 0, a 1)
        }
        ("example_tile_filtering", "conv_tiled", true) => {
            call!(m.filter.conv_tiled, launch_tiled, r, l;
            a 0, a 1, a 2)
        }
        ("example_alloc_tracker", "apply_gravity", false) => {
            call!(m.particles.apply_gravity, launch, r, l;
            a 0, v 1)
        }
        ("example_alloc_tracker", "integrate", false) => call!(m.particles.integrate, launch, r, l;
            a 0, a 1, v 2),
        ("example_alloc_tracker", "enforce_ground", false) => {
            call!(m.particles.enforce_ground, launch, r, l;
            a 0, a 1, v 2)
        }
        (module, kernel, tiled) => panic!("no typed call for {module}.{kernel} (tiled: {tiled})"),
    };
    result.unwrap_or_else(|e| panic!("{}.{} ({ran:?}): {e}", l.module, l.kernel));
    ran
}

/// Per kernel: launches, how many matched bit for bit, the largest relative
/// difference of the others, and how it ran.
#[derive(Default)]
struct Tally {
    launches: usize,
    exact: usize,
    worst: f64,
    typed: usize,
    unchecked: usize,
}

fn load_cases(corpus: &Path) -> (Vec<Case>, Json) {
    let path = corpus.join("cases/manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (written by tests/warp/build.py: run cargo xtask gpu-bundle)",
            path.display()
        )
    });
    let m: Json = serde_json::from_str(&text).expect("cases/manifest.json parses");
    let cases = m["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| Case::load(corpus, c))
        .collect();
    (cases, m)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn warp_examples_run_through_typed_launchers_equal_to_warps_cpu() {
    let corpus = data_dir().join("corpus");
    let (cases, cases_manifest) = load_cases(&corpus);
    assert!(cases.len() >= 5, "only {} cases", cases.len());
    let device = Device::Cuda(0);
    let modules = Modules::load(&cases);
    let mut tally: BTreeMap<(String, String), Tally> = BTreeMap::new();
    let mut launches = 0usize;
    for case in &cases {
        let mut replay = Replay::new(case, device);
        for (n, l) in case.launches.iter().enumerate() {
            let (_, block_dim) = case.modules[&l.module];
            assert_eq!(
                l.block_dim, block_dim,
                "{} launch {n}: {} ran with block_dim {} but the module is compiled for {block_dim}",
                case.example, l.kernel, l.block_dim
            );
            let (tol, _) = tolerance(&l.module, &l.kernel);
            replay.prepare(l);
            let ran = run(&modules, &replay, l);
            let diff = replay.check(l, tol).unwrap_or_else(|e| {
                panic!(
                    "{} launch {n} ({}.{} over {:?}): {e}",
                    case.example, l.module, l.kernel, l.dim
                )
            });
            let t = tally
                .entry((l.module.clone(), l.kernel.clone()))
                .or_default();
            t.launches += 1;
            match diff {
                None => t.exact += 1,
                Some(d) => t.worst = t.worst.max(d),
            }
            match ran {
                Ran::Typed => t.typed += 1,
                Ran::Unchecked => t.unchecked += 1,
            }
            launches += 1;
        }
        println!(
            "{}: {} launches equal Warp's CPU results ({})",
            case.example,
            case.launches.len(),
            case.note
        );
        for h in &case.host_launches {
            println!("  not replayed (ran on the CPU only, its effect uploaded): {h}");
        }
    }
    println!("per kernel (tolerance: |GPU - CPU| <= rel x the largest |CPU value| of the array):");
    let (mut bit_exact, mut within) = (Vec::new(), Vec::new());
    for ((module, kernel), t) in &tally {
        let (tol, why) = tolerance(module, kernel);
        let how = if t.unchecked > 0 {
            format!(
                "{} through the typed launch_unchecked (the safe launch refused it: unproven)",
                t.unchecked
            )
        } else {
            format!("{} through the typed launch", t.typed)
        };
        let name = format!("{module}.{kernel}");
        if t.exact == t.launches {
            println!("  {name}: {} launches, bit-exact, {how}", t.launches);
            bit_exact.push(name);
        } else {
            println!(
                "  {name}: {} launches, {} bit-exact, largest difference {:.2e} of the largest value, within {tol:?} ({why}), {how}",
                t.launches, t.exact, t.worst
            );
            within.push(name);
        }
    }
    let checked_kernels = tally.values().filter(|t| t.unchecked == 0).count();
    println!(
        "corpus: {} examples, {} kernels launched, all equal Warp's CPU results (bit-exact: {}, within tolerance: {})",
        cases.len(),
        tally.len(),
        bit_exact.len(),
        within.len()
    );
    println!(
        "corpus: {launches} launches, every one through a typed launcher: {checked_kernels} kernels through the checked launch, {} unproven ones refused by it and run through their unsafe launch_unchecked; examples: {} ({})",
        tally.len() - checked_kernels,
        cases.len(),
        cases
            .iter()
            .map(|c| c.example.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let refused: BTreeSet<(String, String)> = tally
        .iter()
        .filter(|(_, t)| t.unchecked > 0)
        .map(|(k, _)| k.clone())
        .collect();
    let want: BTreeSet<(String, String)> = UNPROVEN
        .iter()
        .map(|(m, k)| (m.to_string(), k.to_string()))
        .collect();
    assert_eq!(refused, want, "the kernels the typed launchers refused");
    print_skipped(&corpus, &cases_manifest, &cases);
}

/// What the corpus compiled but does not run here, and what it skipped, with
/// the reasons `corpus.py` recorded.
fn print_skipped(corpus: &Path, cases_manifest: &Json, cases: &[Case]) {
    let path = corpus.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let m: Json = serde_json::from_str(&text).expect("manifest.json parses");
    let run: BTreeSet<&str> = cases.iter().map(|c| c.example.as_str()).collect();
    println!("skipped:");
    for nr in cases_manifest["not_run"].as_array().into_iter().flatten() {
        println!("  {} (no reference run): {}", nr["example"], nr["reason"]);
    }
    for e in m["examples"].as_array().expect("examples") {
        let file = e["file"].as_str().unwrap_or_default();
        let example = e["example"].as_str().unwrap_or_default();
        if let Some(reason) = e["skip_reason"].as_str() {
            println!("  {file}: {reason}");
        }
        for s in e["skipped"].as_array().into_iter().flatten() {
            println!(
                "  {file}: kernel {}: {}",
                s["kernel"].as_str().or(s["module"].as_str()).unwrap_or("?"),
                s["reason"].as_str().unwrap_or_default()
            );
        }
        for module in e["modules"].as_array().into_iter().flatten() {
            for k in module["kernels"].as_array().into_iter().flatten() {
                if k["takes_ids"].as_bool() == Some(true) {
                    println!(
                        "  {file}: kernel {}: compile-only, takes ids of {} objects ({})",
                        k["kernel"].as_str().unwrap_or_default(),
                        k["id_kinds"],
                        k["id_params"]
                    );
                }
            }
        }
        if !run.contains(example) && e["modules"].as_array().is_some_and(|m| !m.is_empty()) {
            println!("  {file}: compiled (its launchers compile in warp-corpus), no reference run");
        }
    }
}
