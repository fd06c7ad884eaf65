//! Helpers for the `warp-launch` tests: the reference data that
//! `tests/warp/build.py` writes with Warp 1.19.0 (AOT module, inputs and
//! Warp's CPU results, `manifest.json`), turned into arrays and arguments;
//! and CPU implementations of the Warp test kernels.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;
use warp_launch::{
    AotModule, Arg, Array, CpuFn, DType, Device, Kernel, Storage, StructValue, Value, cpu_each_fn,
};

/// The directory `tests/warp/build.py` wrote: `SDK_WARP_DATA` (set by the
/// GPU bundle's run.sh), else `target/warp-aot` (written by
/// `cargo xtask gpu-bundle`).
pub fn data_dir() -> PathBuf {
    match std::env::var_os("SDK_WARP_DATA") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/warp-aot"),
    }
}

/// Runs every case of the manifest (`cases`) with `module`'s kernels on
/// `device` and compares each output with Warp's CPU result; returns how
/// many outputs were compared. Panics, naming the case and argument, on a
/// failed launch or a difference.
pub fn run_cases(dir: &Path, m: &Json, module: &AotModule, device: Device) -> usize {
    let mut checked = 0;
    for case in m["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let kernel = module
            .kernel(case["kernel"].as_str().expect("kernel"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let specs = case["args"].as_array().expect("args");
        let args: Vec<Arg> = specs.iter().map(|a| arg_from(dir, device, a)).collect();
        let dim: Vec<i64> = case["dim"]
            .as_array()
            .expect("dim")
            .iter()
            .map(|e| e.as_i64().expect("int"))
            .collect();
        kernel
            .launch(dim)
            .inputs(args.clone())
            .device(device)
            .block_dim(case["block_dim"].as_u64().expect("block_dim") as u32)
            .max_blocks(case["max_blocks"].as_i64().expect("max_blocks"))
            .run()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for (spec, arg) in specs.iter().zip(&args) {
            let Some(file) = spec["expected_file"].as_str() else {
                continue;
            };
            let want = std::fs::read(dir.join(file)).expect("expected file");
            let a = arg.as_array().expect("array argument");
            compare(a.dtype(), &storage_bytes(a), &want, 1e-5)
                .unwrap_or_else(|e| panic!("{name}: argument '{}': {e}", spec["name"]));
            checked += 1;
        }
        println!(
            "{name}: {} over {:?}: matches Warp",
            kernel.name(),
            case["dim"]
        );
    }
    checked
}

/// The parsed `manifest.json`.
pub fn manifest(dir: &Path) -> Json {
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap_or_else(|e| {
        panic!(
            "{}/manifest.json: {e} (run cargo xtask gpu-bundle)",
            dir.display()
        )
    });
    serde_json::from_str(&text).expect("manifest.json parses")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn usizes(v: &Json) -> Vec<usize> {
    v.as_array()
        .expect("list")
        .iter()
        .map(|e| e.as_u64().expect("int") as usize)
        .collect()
}

/// An array on `device` holding the bytes of `file` (the whole backing
/// storage) viewed with the manifest's dtype, shape, byte strides and offset.
pub fn array_from(dir: &Path, device: Device, a: &Json, file_key: &str) -> Array {
    let dtype = DType::by_name(a["dtype"].as_str().expect("dtype")).expect("known dtype");
    let bytes = std::fs::read(dir.join(a[file_key].as_str().expect("file"))).expect("array file");
    let base = Array::zeros::<u8>(device, &[bytes.len().max(1)]).unwrap();
    base.copy_from_slice(&bytes).unwrap();
    let shape = usizes(&a["shape"]);
    let strides: Vec<isize> = usizes(&a["strides"])
        .into_iter()
        .map(|s| s as isize)
        .collect();
    let offset = a.get("offset").and_then(Json::as_u64).unwrap_or(0) as usize;
    Array::from_parts(
        Arc::clone(base.storage()),
        device,
        offset,
        dtype,
        &shape,
        &strides,
    )
    .unwrap()
}

/// The whole storage of `a` as bytes.
pub fn storage_bytes(a: &Array) -> Vec<u8> {
    let s: &Storage = a.storage();
    let mut out = vec![0u8; s.bytes()];
    s.copy_to_host(0, &mut out).unwrap();
    out
}

/// The argument a manifest entry describes (arrays from their files).
pub fn arg_from(dir: &Path, device: Device, a: &Json) -> Arg {
    match a["kind"].as_str().expect("kind") {
        "array" => Arg::Array(array_from(dir, device, a, "file")),
        "scalar" => {
            let dtype = DType::by_name(a["dtype"].as_str().unwrap()).unwrap();
            Arg::Value(Value::from_bytes(dtype, &hex(a["bytes_hex"].as_str().unwrap())).unwrap())
        }
        // SAFETY: the test module's structs (tests/warp/kernels.py) hold
        // numbers only, no device addresses.
        "struct" => Arg::Struct(unsafe {
            StructValue::from_bytes(
                a["native_name"].as_str().unwrap(),
                &hex(a["bytes_hex"].as_str().unwrap()),
            )
        }),
        k => panic!("unknown kind {k}"),
    }
}

/// Compares bytes of dtype `dtype` as numbers: floats within `rel`
/// relative (or 1e-6 absolute), everything else exactly. Returns the first
/// mismatch.
pub fn compare(dtype: &DType, got: &[u8], want: &[u8], rel: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} bytes vs {} expected", got.len(), want.len()));
    }
    let scalar = dtype.scalar.size();
    for (i, (g, w)) in got.chunks(scalar).zip(want.chunks(scalar)).enumerate() {
        let (gv, wv) = match (dtype.scalar.name(), scalar) {
            ("float32", 4) => (
                f32::from_le_bytes(g.try_into().unwrap()) as f64,
                f32::from_le_bytes(w.try_into().unwrap()) as f64,
            ),
            ("float64", 8) => (
                f64::from_le_bytes(g.try_into().unwrap()),
                f64::from_le_bytes(w.try_into().unwrap()),
            ),
            _ => {
                if g != w {
                    return Err(format!("scalar {i}: {g:?} vs {w:?}"));
                }
                continue;
            }
        };
        if (gv - wv).abs() > rel * wv.abs().max(1e-6 / rel.max(1e-12)).min(f64::MAX)
            && (gv - wv).abs() > 1e-6
        {
            return Err(format!("scalar {i}: {gv} vs {wv}"));
        }
    }
    Ok(())
}

/// CPU implementations of the Warp test kernels `chain_sin` (y = sin(x) * a)
/// and `chain_loss` (loss += y * y), forward and backward, with the
/// parameter order of `tests/warp/kernels.py`.
pub fn chain_cpu() -> [(CpuFn, CpuFn); 2] {
    let sin_fwd = cpu_each_fn(|args, each| {
        each.run(|t| {
            let i = t.tid();
            let a: f32 = args.value(1)?;
            args.array::<f32>(2)?
                .set(i, args.array::<f32>(0)?.get(i)?.sin() * a)
        })
    });
    let sin_bwd = cpu_each_fn(|args, each| {
        each.run(|t| {
            // adjoints follow the forward parameters: adj_x (3), adj_a (4), adj_y (5)
            let i = t.tid();
            let a: f32 = args.value(1)?;
            let x = args.array::<f32>(0)?.get(i)?;
            let gy = args.array::<f32>(5)?.get(i)?;
            args.array::<f32>(3)?.add(i, gy * a * x.cos())
        })
    });
    let loss_fwd = cpu_each_fn(|args, each| {
        each.run(|t| {
            let y = args.array::<f32>(0)?.get(t.tid())?;
            args.array::<f32>(1)?.add(0, y * y)
        })
    });
    let loss_bwd = cpu_each_fn(|args, each| {
        each.run(|t| {
            // adj_y (2), adj_loss (3)
            let i = t.tid();
            let y = args.array::<f32>(0)?.get(i)?;
            let gl = args.array::<f32>(3)?.get(0)?;
            args.array::<f32>(2)?.add(i, 2.0 * y * gl)
        })
    });
    [(sin_fwd, sin_bwd), (loss_fwd, loss_bwd)]
}

/// `kernel` with the CPU implementation `imp` added.
pub fn with_cpu(kernel: &Kernel, imp: &(CpuFn, CpuFn)) -> Kernel {
    kernel.with_cpu(imp.0.clone(), Some(imp.1.clone()))
}

/// The CUDA C kernels of `tests/kernels/warp_header.cu` (written against
/// `warp_launch.h`), declared: `wl_scale2d`, `wl_fill4d`, `wl_lean_add`
/// (lean), `wl_grid_sum` (cooperative) and `wl_spin_fill` (slow).
pub struct HeaderKernels {
    /// `a[i, j] *= s`.
    pub scale2d: Kernel,
    /// `out[i, j, k, l] = linear index`.
    pub fill4d: Kernel,
    /// `v[i] += d` (lean).
    pub lean_add: Kernel,
    /// `out[0] = sum(x)` with a grid sync; `partial` has one element per block.
    pub grid_sum: Kernel,
    /// `out[i] = i + 1` after waiting about `cycles` clock cycles.
    pub spin_fill: Kernel,
}

/// Loads `warp_header.cubin` from the kernels directory and declares its
/// kernels.
pub fn header_kernels() -> warp_launch::Result<HeaderKernels> {
    use warp_launch::{AxisIndex, KernelSpec};
    let lib = cuda_api::Library::from_file(crate::kernels_dir().join("warp_header.cubin"))?;
    // SAFETY: the declarations are the kernels' parameter lists in
    // tests/kernels/warp_header.cu (bounds first, then these, in order),
    // and their access rules are the kernels' indexing there: scale2d
    // a[c.i, c.j], fill4d out[c.i, c.j, c.k, c.l], lean_add v[c.i] (after
    // `idx < dim.size`), grid_sum x[idx] (idx < size), partial[blockIdx.x]
    // (1-D grid) and out[0], spin_fill out[c.i].
    unsafe {
        Ok(HeaderKernels {
            scale2d: KernelSpec::new("wl_scale2d", 2)
                .array::<f32>("a", 2)
                .value::<f32>("s")
                .indexed_by_thread("a")
                .load_cuda(&lib, "wl_scale2d", None)?,
            fill4d: KernelSpec::new("wl_fill4d", 4)
                .array::<i32>("out", 4)
                .indexed_by_thread("out")
                .load_cuda(&lib, "wl_fill4d", None)?,
            lean_add: KernelSpec::new("wl_lean_add", 1)
                .array::<[f32; 3]>("v", 1)
                .value::<[f32; 3]>("d")
                .grid_stride(false)
                .indexed_by_thread("v")
                .load_cuda(&lib, "wl_lean_add", None)?,
            grid_sum: KernelSpec::new("wl_grid_sum", 1)
                .array::<f32>("x", 1)
                .array::<f32>("partial", 1)
                .array::<f32>("out", 1)
                .access("x", &[AxisIndex::WorkItem])
                .access("partial", &[AxisIndex::Block])
                .access("out", &[AxisIndex::Constant(0)])
                .load_cuda(&lib, "wl_grid_sum", None)?,
            spin_fill: KernelSpec::new("wl_spin_fill", 1)
                .array::<i32>("out", 1)
                .value::<i64>("cycles")
                .indexed_by_thread("out")
                .load_cuda(&lib, "wl_spin_fill", None)?,
        })
    }
}

/// The message of a safe launch refused as unproven (`Error::Unproven`).
/// Panics when the launch ran, or was refused for another reason.
pub fn refused_as_unproven(r: warp_launch::Result<()>) -> String {
    match r {
        Err(e @ warp_launch::Error::Unproven(_)) => e.to_string(),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(()) => panic!("the safe launch ran"),
    }
}

/// The 64-kernel module `many/` in the forms a load bench times: its
/// embedded static without and with carried declarations (as warp-build's
/// generated static holds them), and a copy of the directory with
/// `wp_many.rules.json` beside the files (as warp-build writes it) under
/// `std::env::temp_dir()`, which the caller removes.
pub struct ManyForms {
    /// The directory Warp's own compile wrote (no carried declarations).
    pub warp_dir: PathBuf,
    /// The copy with the carried declarations.
    pub built_dir: PathBuf,
    /// The files in memory, without carried declarations.
    pub plain: warp_launch::EmbeddedModule,
    /// The files in memory with the carried declarations.
    pub carried: warp_launch::EmbeddedModule,
}

/// Module `name` of `<data>/<dir>` (`wp_<name>.cu`, `.meta`, `.sm90.cubin`)
/// held in memory as warp-build's generated static holds it: without and
/// with the declarations the build derives, and their text (what
/// warp-build writes as `wp_<name>.rules.json`).
pub fn embedded(
    dir: &str,
    name: &'static str,
) -> (
    warp_launch::EmbeddedModule,
    warp_launch::EmbeddedModule,
    &'static str,
) {
    use warp_launch::{EmbeddedImage, EmbeddedModule};
    let dir = data_dir().join(dir);
    let file = |ext: &str| format!("wp_{name}.{ext}");
    let read = |ext: &str| std::fs::read(dir.join(file(ext))).unwrap();
    let text = |ext: &str| -> &'static str { String::from_utf8(read(ext)).unwrap().leak() };
    let images: &'static [EmbeddedImage] = vec![EmbeddedImage {
        file: file("sm90.cubin").leak(),
        bytes: read("sm90.cubin").leak(),
    }]
    .leak();
    let (cu, meta) = (text("cu"), text("meta"));
    // What warp-build derives and writes beside the module.
    let decls = warp_proof::declarations(cu, &file("cu"), meta, &file("meta")).unwrap();
    let rules: &'static str = warp_proof::carry_declarations(&decls, cu, meta).leak();
    // SAFETY: the files of one Warp compile (tests/warp/build.py).
    let plain = unsafe { EmbeddedModule::new(name, cu, meta, images, None) };
    // SAFETY: as above; `rules` were derived from `cu` and `meta`.
    let carried = unsafe { plain.with_rules(rules) };
    (plain, carried, rules)
}

/// [`ManyForms`] of `<data>/many`; `tag` names the directory copy.
pub fn many_forms(tag: &str) -> ManyForms {
    let dir = data_dir().join("many");
    let (plain, carried, rules) = embedded("many", "many");
    let built = std::env::temp_dir().join(format!("{tag}-many-{}", std::process::id()));
    std::fs::create_dir_all(&built).unwrap();
    for f in ["cu", "meta", "sm90.cubin"] {
        let name = format!("wp_many.{f}");
        std::fs::copy(dir.join(&name), built.join(&name)).unwrap();
    }
    std::fs::write(built.join("wp_many.rules.json"), rules).unwrap();
    ManyForms {
        warp_dir: dir,
        built_dir: built,
        plain,
        carried,
    }
}

/// The raw driver arguments of Warp's AOT `saxpy` forward kernel
/// (`launch_bounds_t<1>`, `float a`, `array_t<float> x`, `array_t<float> y`)
/// over `n` elements: the bytes the benches' raw baselines pass to
/// `cuLaunchKernel`.
pub struct RawSaxpy {
    bounds: warp_launch::LaunchBounds1,
    a: f32,
    x: warp_launch::ArrayT,
    y: warp_launch::ArrayT,
}

impl RawSaxpy {
    /// The arguments of `y = a * x + y` over the first `n` elements.
    pub fn new(n: usize, a: f32, x: &Array, y: &Array) -> RawSaxpy {
        RawSaxpy {
            bounds: warp_launch::LaunchBounds1 {
                shape: [n as u32],
                size: n,
                coord_mult: 1,
                ..warp_launch::LaunchBounds1::default()
            },
            a,
            x: x.abi(),
            y: y.abi(),
        }
    }

    /// The launch bounds of the `n` elements.
    pub fn bounds(&self) -> warp_launch::LaunchBounds1 {
        self.bounds
    }

    /// A pointer to each argument, as `cuLaunchKernel` takes them: valid
    /// while `self` is neither moved nor dropped.
    pub fn params(&mut self) -> [*mut std::ffi::c_void; 4] {
        [
            (&raw mut self.bounds).cast(),
            (&raw mut self.a).cast(),
            (&raw mut self.x).cast(),
            (&raw mut self.y).cast(),
        ]
    }
}

/// The `CUkernel` of Warp's AOT saxpy forward function in `lib`
/// (`cuLibraryGetKernel`), for the raw first-launch baselines.
pub fn saxpy_kernel(lib: &cuda_api::Library) -> cuda_sys::CUkernel {
    let mut kernel: cuda_sys::CUkernel = std::ptr::null_mut();
    // SAFETY: a live library and a NUL-terminated name.
    let r = unsafe {
        cuda_sys::cuLibraryGetKernel(
            &mut kernel,
            lib.raw(),
            c"saxpy_cuda_kernel_forward".as_ptr(),
        )
    };
    assert!(r.is_success(), "cuLibraryGetKernel: {r:?}");
    kernel
}

/// How long [`settle`] lets the GPU idle before a first launch is timed.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(2);

/// What both harnesses do right before timing a first launch, ours and
/// the raw driver's alike: synchronise `stream`, then sleep [`SETTLE`].
///
/// The driver's lazy load of a fresh function (inside the first launch)
/// took about 40 µs longer on an H100 when the host had just spent a
/// millisecond or more on other work (a module load) than when the launch
/// came right after the previous GPU work (`profile first`, 2026-12-06).
/// A first launch is only comparable when both roads start from the same
/// idle time, so each gets the same wait; the load itself is timed on its
/// own line.
pub fn settle(stream: &cuda_api::Stream) {
    stream
        .synchronize()
        .expect("stream synchronisation before a first launch");
    std::thread::sleep(SETTLE);
}
