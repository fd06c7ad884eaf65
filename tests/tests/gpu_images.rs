//! Truncated and corrupted images through `Module::from_image` and
//! `Library::from_image`: each is an `Err` (the validator refuses it before
//! the driver reads it, or the driver refuses it), the process lives, and a
//! valid image still loads afterwards. At 38e7deb 4 of 5 such images killed
//! the process with SIGSEGV.
//!
//! The images are the checked-in fixtures of `cuda-api/tests/fixtures/images`
//! (nvcc 13.0, sm_90 cubin, fatbins, PTX).

use cuda_api::{Context, CudaDevice, CudaError, Library, Module};
use warp_launch::AotModule;

const FIXTURES: &[(&str, &[u8])] = &[
    (
        "add_one.sm_90.cubin",
        include_bytes!("../../cuda-api/tests/fixtures/images/add_one.sm_90.cubin"),
    ),
    (
        "add_one.fatbin",
        include_bytes!("../../cuda-api/tests/fixtures/images/add_one.fatbin"),
    ),
    (
        "add_one.zstd.fatbin",
        include_bytes!("../../cuda-api/tests/fixtures/images/add_one.zstd.fatbin"),
    ),
    (
        "add_one.lz4.fatbin",
        include_bytes!("../../cuda-api/tests/fixtures/images/add_one.lz4.fatbin"),
    ),
    (
        "add_one.ptx",
        include_bytes!("../../cuda-api/tests/fixtures/images/add_one.ptx"),
    ),
    (
        "add_one.G.fatbin",
        include_bytes!("../../cuda-api/tests/fixtures/images/add_one.G.fatbin"),
    ),
];

/// SplitMix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn ctx() -> Context {
    Context::primary(&CudaDevice::get(0).expect("device 0")).expect("primary context")
}

/// Loads `image` both ways; returns how many of the two loads succeeded.
fn load_both(
    ctx: &Context,
    image: &[u8],
) -> (Result<Module, CudaError>, Result<Library, CudaError>) {
    (Module::from_image(ctx, image), Library::from_image(image))
}

fn valid_images_still_load(ctx: &Context) {
    for (name, bytes) in FIXTURES {
        let m = Module::from_image(ctx, bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        m.function("add_one")
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let l = Library::from_image(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        l.function("add_one")
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

fn set(v: &mut [u8], at: usize, width: usize, value: u64) {
    v[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn truncated_and_corrupted_images_are_errors_and_valid_ones_still_load() {
    let ctx = ctx();
    valid_images_still_load(&ctx);
    let mut refused = 0;
    for (name, bytes) in FIXTURES.iter().filter(|(n, _)| !n.ends_with(".ptx")) {
        for len in 0..bytes.len() {
            let (m, l) = load_both(&ctx, &bytes[..len]);
            for (what, r) in [("Module", m.err()), ("Library", l.err())] {
                match r {
                    Some(CudaError::InvalidImage(_)) => refused += 1,
                    Some(e) => panic!("{what} {name}[..{len}]: not InvalidImage: {e}"),
                    None => panic!("{what}::from_image loaded {name} cut to {len} bytes"),
                }
            }
        }
    }
    eprintln!("{refused} truncated loads refused");
    // Header fields the driver follows, set past the end of the image.
    let (_, cubin) = FIXTURES[0];
    let shoff = u64::from_le_bytes(cubin[40..48].try_into().unwrap()) as usize;
    let (_, fatbin) = FIXTURES[1];
    let cases: Vec<(&str, &[u8], usize, usize, u64)> = vec![
        ("cubin e_shoff", cubin, 40, 8, 1 << 40),
        ("cubin e_phoff", cubin, 32, 8, 1 << 40),
        ("cubin e_shnum", cubin, 60, 2, 0xffff),
        ("cubin e_shstrndx", cubin, 62, 2, 0x7fff),
        ("cubin .symtab size", cubin, shoff + 3 * 64 + 32, 8, 1 << 32),
        (
            "cubin .symtab offset",
            cubin,
            shoff + 3 * 64 + 24,
            8,
            1 << 32,
        ),
        ("cubin .strtab size", cubin, shoff + 2 * 64 + 32, 8, 1 << 32),
        ("fatbin payload size", fatbin, 8, 8, 1 << 32),
        ("fatbin entry header size", fatbin, 20, 4, 0xffff_0000),
        ("fatbin entry payload size", fatbin, 24, 8, 1 << 40),
        ("fatbin nested e_shoff", fatbin, 80 + 40, 8, 1 << 40),
    ];
    for (what, image, at, width, value) in cases {
        let mut v = image.to_vec();
        set(&mut v, at, width, value);
        let (m, l) = load_both(&ctx, &v);
        let m = m.err().unwrap_or_else(|| panic!("Module loaded: {what}"));
        let l = l.err().unwrap_or_else(|| panic!("Library loaded: {what}"));
        eprintln!("{what}: {m}");
        assert!(matches!(m, CudaError::InvalidImage(_)), "{what}: {m}");
        assert!(matches!(l, CudaError::InvalidImage(_)), "{what}: {l}");
    }
    // A valid zstd stream whose cubin has e_shoff far past its end
    // (`corrupt_zstd.py` beside the fixtures).
    let bad = include_bytes!("../../cuda-api/tests/fixtures/images/add_one.zstd.bad_shoff.fatbin");
    let (m, l) = load_both(&ctx, bad);
    for (what, r) in [("Module", m.err()), ("Library", l.err())] {
        match r {
            Some(CudaError::InvalidImage(e)) => eprintln!("zstd nested e_shoff: {e}"),
            Some(e) => panic!("{what}: zstd nested e_shoff: not InvalidImage: {e}"),
            None => panic!("{what}::from_image loaded the zstd nested e_shoff corruption"),
        }
    }
    valid_images_still_load(&ctx);
}

/// Seeded random corruptions of every fixture, loaded both ways in a child
/// process (so a crash is reported with the seed, not as a dead runner):
/// each load is `Ok` (the corruption hit bytes the driver does not follow,
/// e.g. code) or `Err`; the child must finish.
#[test]
#[ignore = "needs a CUDA GPU"]
fn random_corruptions_never_crash_the_process() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_loads_random_corruptions",
            "--include-ignored",
            "--nocapture",
        ])
        .env("SDK_IMAGES_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
    eprintln!(
        "child stderr (last lines):\n{}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    assert!(
        out.status.success(),
        "the child died or failed ({}); the last 'loading' line names the image",
        out.status
    );
    assert!(stderr.contains("child: done"), "the child did not finish");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn child_loads_random_corruptions() {
    if std::env::var_os("SDK_IMAGES_CHILD").is_none() {
        sdk_tests::skip(
            "child_loads_random_corruptions",
            "runs only as the child process of random_corruptions_never_crash_the_process",
        );
        return;
    }
    let ctx = ctx();
    let rounds: usize = std::env::var("SDK_IMAGES_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let (mut ok, mut refused, mut driver) = (0, 0, 0);
    for (fi, (name, bytes)) in FIXTURES.iter().enumerate() {
        for round in 0..rounds {
            let seed = (fi as u64) << 32 | round as u64;
            let mut rng = Rng(seed);
            let mut v = bytes.to_vec();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(v.len());
                match rng.below(3) {
                    0 => v[i] ^= 1 << rng.below(8),
                    1 => v[i] = rng.next() as u8,
                    _ => {
                        let end = (i + 4).min(v.len());
                        v[i..end].fill(0xff);
                    }
                }
            }
            eprintln!("loading {name} corruption seed {seed:#x}");
            let (m, l) = load_both(&ctx, &v);
            for r in [m.map(|_| ()), l.map(|_| ())] {
                match r {
                    Ok(()) => ok += 1,
                    Err(CudaError::InvalidImage(_)) => refused += 1,
                    Err(_) => driver += 1,
                }
            }
        }
    }
    valid_images_still_load(&ctx);
    eprintln!(
        "child: done: {ok} loaded, {refused} refused by the validator, {driver} refused by the driver"
    );
}

/// `AotModule::load` on the bundle's Warp module with its cubin truncated or
/// its section table corrupted: an error each time; the untouched module
/// loads afterwards.
#[test]
#[ignore = "needs a CUDA GPU"]
fn warp_aot_module_with_a_bad_cubin_is_an_error() {
    let src = sdk_tests::warp::data_dir().join("aot");
    let names: Vec<String> = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("{}: {e} (run cargo xtask gpu-bundle)", src.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let cubin_name = names
        .iter()
        .find(|n| n.ends_with(".cubin"))
        .expect("the Warp module has a cubin")
        .clone();
    let cubin = std::fs::read(src.join(&cubin_name)).unwrap();
    let mut corrupted = cubin.clone();
    corrupted[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let dir = std::env::temp_dir().join(format!("gpu-images-aot-{}", std::process::id()));
    for (what, image) in [
        ("empty", Vec::new()),
        ("64 bytes", cubin[..64].to_vec()),
        ("half", cubin[..cubin.len() / 2].to_vec()),
        ("one byte short", cubin[..cubin.len() - 1].to_vec()),
        ("e_shoff past the end", corrupted),
    ] {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for n in &names {
            let from = src.join(n);
            if from.is_file() {
                std::fs::copy(&from, dir.join(n)).unwrap();
            }
        }
        std::fs::write(dir.join(&cubin_name), &image).unwrap();
        // SAFETY: a copy of the bundle's module with its cubin damaged on purpose: the load must refuse it, and no kernel is made.
        let e = unsafe { AotModule::load(&dir) }.expect_err(what);
        eprintln!("{what}: {e}");
        assert!(e.to_string().contains("refused the image"), "{what}: {e}");
    }
    std::fs::remove_dir_all(&dir).ok();
    // SAFETY: a module directory of the bundle's Warp data: one Warp compile (tests/warp/build.py).
    unsafe { AotModule::load(&src) }.expect("the untouched Warp module still loads");
}

/// Every `.cubin` under `dir`, recursively.
fn cubins_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            cubins_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "cubin") {
            out.push(p);
        }
    }
}

/// The driver's layout of `kernel`, one query per parameter until it
/// answers `CUDA_ERROR_INVALID_VALUE`.
fn driver_layout(kernel: cuda_api::sys::CUkernel) -> Vec<cuda_api::ParamSlot> {
    let mut out = Vec::new();
    for i in 0.. {
        // SAFETY: a kernel of a library the caller keeps loaded.
        match unsafe { cuda_api::driver::kernel_get_param_info(kernel, i) } {
            Ok((offset, size)) => out.push(cuda_api::ParamSlot { offset, size }),
            Err(CudaError::Driver(d))
                if d.code == cuda_api::sys::CUresult::CUDA_ERROR_INVALID_VALUE =>
            {
                break;
            }
            Err(e) => panic!("cuKernelGetParamInfo({i}): {e}"),
        }
    }
    out
}

/// The names of every kernel of `lib`, from the driver.
fn kernel_names(lib: &Library) -> Vec<(String, cuda_api::sys::CUkernel)> {
    // SAFETY: a live library; the slice has room for its kernel count.
    unsafe {
        let n = cuda_api::driver::library_get_kernel_count(lib.raw()).unwrap();
        let mut ks = vec![std::ptr::null_mut(); n as usize];
        cuda_api::driver::library_enumerate_kernels(&mut ks, lib.raw()).unwrap();
        ks.into_iter()
            .map(|k| {
                let mut name = std::ptr::null();
                cuda_api::driver::kernel_get_name(&mut name, k).unwrap();
                let name = std::ffi::CStr::from_ptr(name)
                    .to_string_lossy()
                    .into_owned();
                (name, k)
            })
            .collect()
    }
}

/// The differential check of the cubin parameter reader
/// (`cuda-api/src/image/params.rs`): for every kernel of every cubin the
/// bundle holds (the CUDA C test kernels and each Warp module), the layout
/// the cubin declares equals the driver's, parameter by parameter, and
/// `Function::param_layout` (which confirms the declared layout with one
/// query) gives the same; a module's function too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_kernel_of_every_bundled_cubin_declares_the_layout_the_driver_gives() {
    let ctx = ctx();
    ctx.bind().unwrap();
    let mut files = Vec::new();
    cubins_under(&sdk_tests::kernels_dir(), &mut files);
    cubins_under(&sdk_tests::warp::data_dir(), &mut files);
    files.sort();
    let (mut loaded, mut kernels, mut params) = (0, 0, 0);
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        // A cubin for another architecture than this GPU's does not load
        // into a module (a library loads lazily, so it says nothing).
        let Ok(module) = Module::from_image(&ctx, &bytes) else {
            continue;
        };
        let lib = Library::from_image(&bytes).unwrap();
        loaded += 1;
        for (name, k) in kernel_names(&lib) {
            let driver = driver_layout(k);
            let f = lib.function(&name).unwrap();
            let declared = f.declared_param_layout().map(<[_]>::to_vec);
            assert_eq!(
                declared.as_ref(),
                Some(&driver),
                "{}: {name}",
                path.display()
            );
            assert_eq!(&*f.param_layout().unwrap(), &driver[..], "{name}");
            let mf = module.function(&name).unwrap();
            assert_eq!(mf.declared_param_layout(), Some(&driver[..]), "{name}");
            assert_eq!(&*mf.param_layout().unwrap(), &driver[..], "{name}");
            kernels += 1;
            params += driver.len();
        }
    }
    println!(
        "cubin layouts: {loaded} of {} cubins loaded, {kernels} kernels, {params} parameters, all as the driver gives them",
        files.len()
    );
    assert!(
        loaded >= 3 && kernels >= 20,
        "{loaded} cubins, {kernels} kernels"
    );
}
