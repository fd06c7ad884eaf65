//! Tests of warp-proof's readers that need this crate's side (the
//! declarations a module load makes, `AotModule::load`, `Error`'s
//! messages), moved here with the readers' move to warp-proof (issue 35),
//! and the helpers of tests that time a parse in a child process.

use std::time::{Duration, Instant};

use crate::aot::declarations;
use crate::error::Error;
use crate::signature::{Accesses, AxisIndex, Pass};
use crate::source::WarpFeature;

/// Set in a child test process started by [`run_in_child`].
pub(crate) const CHILD_ENV: &str = "WARP_LAUNCH_TEST_CHILD";

/// Whether this process is a child started by [`run_in_child`].
pub(crate) fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Runs test `name` of this test binary in a child process and fails
/// if it fails or runs longer than `limit` (then it is killed): a
/// regression to super-linear time fails instead of hanging the run.
pub(crate) fn run_in_child(name: &str, limit: Duration) {
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(status.success(), "child test {name} failed:\n{text}");
            assert!(
                text.contains("1 passed"),
                "child test {name} did not run:\n{text}"
            );
            return;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child test {name} ran longer than {limit:?}: super-linear time?");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Parses `text` and fails if it takes a second or more.
pub(crate) fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    println!("{what}: {took:?}");
    assert!(took < Duration::from_secs(1), "{what} took {took:?}");
    out
}

// warp-proof's source/modes.rs: the modes Warp compiles in, refused or read.

/// Warp 1.19.0's output for `tests/warp/modes.py`, module by module.
macro_rules! fixture {
    ($name:literal) => {
        (
            include_str!(concat!("../tests/fixtures/modes/wp_", $name, ".cu")),
            include_str!(concat!("../tests/fixtures/modes/wp_", $name, ".meta")),
            concat!("wp_", $name, ".cu"),
        )
    };
}

fn refusal((cu, meta, file): (&str, &str, &str)) -> Error {
    match declarations(cu, file, meta, "m.meta") {
        Err(e) => e,
        Ok(d) => panic!("{file}: loaded {} kernels", d.len()),
    }
}

#[test]
fn unmodelled_modes_are_refused_naming_feature_kernel_file_and_line() {
    for ((cu, meta, file), feature, kernel, line) in [
        (
            fixture!("modes_deterministic"),
            WarpFeature::Deterministic,
            "scatter",
            59,
        ),
        (
            fixture!("modes_cluster"),
            WarpFeature::Cluster { ctas: 2 },
            "clustered",
            55,
        ),
        (
            fixture!("modes_external"),
            WarpFeature::ExternalConstantParams,
            "external",
            105,
        ),
        (
            fixture!("modes_small_bounds"),
            WarpFeature::LaunchBounds {
                max_threads: 128,
                block_dim: 256,
            },
            "small_bounds",
            55,
        ),
    ] {
        let e = refusal((cu, meta, file));
        let Error::Unmodelled(u) = &e else {
            panic!("{file}: expected Error::Unmodelled, got {e}");
        };
        assert_eq!(
            (u.feature, u.kernel.as_str(), u.file.as_str(), u.line),
            (feature, kernel, file, line)
        );
        insta::assert_snapshot!(kernel, e.to_string());
    }
    // The deterministic counter kernel is refused at its own parameters.
    let (cu, meta, file) = fixture!("modes_deterministic");
    let at = cu
        .find("extern \"C\" __global__ void compact_cuda_kernel_forward")
        .unwrap();
    let only_compact = format!("{}{}", cu[..at].replace("_wp_det_", "wp_det_"), &cu[at..]);
    let Error::Unmodelled(u) = refusal((&only_compact, meta, file)) else {
        panic!("compact is deterministic too");
    };
    assert_eq!((u.kernel.as_str(), u.line), ("compact", 165));
}

#[test]
fn harmless_modes_load_with_their_access_rules() {
    let (cu, meta, file) = fixture!("modes_harmless");
    let d = declarations(cu, file, meta, "m.meta").unwrap();
    let keys: Vec<(&str, bool)> = d
        .iter()
        .map(|d| (d.key.as_str(), d.backward.is_some()))
        .collect();
    assert_eq!(
        keys,
        [
            ("forward_only", false),
            ("few_registers", true),
            ("spills", true),
            ("bounded", true),
            ("generic_scale", true)
        ]
    );
    for d in &d {
        let Accesses::Checked(rules) = d.spec.accesses(Pass::Forward) else {
            panic!("{}: {:?}", d.key, d.spec.accesses(Pass::Forward));
        };
        assert!(
            rules
                .iter()
                .all(|r| r.param == "x" && r.indices == [AxisIndex::Thread(0)]),
            "{}: {rules:?}",
            d.key
        );
        assert_eq!(d.spec.fixed_block_dim(), Some(256));
    }
    // mode="debug" (and lineinfo): #line directives between the lines the analysis reads.
    let (cu, meta, file) = fixture!("modes_debug");
    assert!(cu.lines().filter(|l| l.starts_with("#line ")).count() > 20);
    let d = declarations(cu, file, meta, "m.meta").unwrap();
    let Accesses::Checked(rules) = d[0].spec.accesses(Pass::Forward) else {
        panic!("debug_fill: {:?}", d[0].spec.accesses(Pass::Forward));
    };
    assert_eq!(
        (
            d[0].key.as_str(),
            rules[0].indices.as_slice(),
            rules[0].line
        ),
        ("debug_fill", &[AxisIndex::Thread(0)][..], 87)
    );
    // Two overloads of a generic kernel: one kernel each, keyed with its hash.
    let (cu, meta, file) = fixture!("modes_overloads_9fbfda6");
    let d = declarations(cu, file, meta, "m.meta").unwrap();
    let got: Vec<(&str, String)> = d
        .iter()
        .map(|d| (d.key.as_str(), d.spec.params()[1].kind.describe()))
        .collect();
    assert_eq!(
        got,
        [
            ("overloaded_9e921ea2", "a float64 value".to_string()),
            ("overloaded_f1803e4b", "a float32 value".to_string())
        ]
    );
}

/// Found by Warp's own `example_fdtd_3d` (module option
/// `enable_backward=False` and `@wp.func`s): the adjoint stubs Warp
/// writes were taken for native code, and every kernel was unproven.
#[test]
fn adjoint_stubs_of_a_forward_only_module_are_generated_code() {
    let (cu, meta, file) = fixture!("modes_forward_only");
    assert!(cu.contains("// reverse mode disabled"), "{file}");
    let d = declarations(cu, file, meta, "m.meta").unwrap();
    assert_eq!(d.len(), 1, "{file}");
    let Accesses::Checked(rules) = d[0].spec.accesses(Pass::Forward) else {
        panic!("{file}: {:?}", d[0].spec.accesses(Pass::Forward));
    };
    assert!(!rules.is_empty(), "{file}: halve_all indexes x by thread");
}

/// Native code and preambles come from the compile step's facts, never
/// from the text: Warp 1.19.0's output for `tests/warp/attacks/native_poke.py`
/// reads as proven (its snippet begins with the comment Warp's own
/// functions begin with), and its facts make the kernel unproven on both
/// devices, naming the native function. Facts of another module are
/// refused. (warp-proof's `facts` tests cover preambles and CPU bodies.)
#[test]
fn native_code_makes_a_kernel_unproven_from_the_facts_not_the_text() {
    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/attacks/");
    let read = |f: &str| std::fs::read_to_string(format!("{DIR}{f}")).unwrap();
    let (cu, meta, facts) = (
        read("wp_native_poke.cu"),
        read("wp_native_poke.meta"),
        read("wp_native_poke.facts.json"),
    );
    let mut d = declarations(&cu, "wp_native_poke.cu", &meta, "m.meta").unwrap();
    assert!(
        matches!(d[0].spec.accesses(Pass::Forward), Accesses::Checked(_)),
        "the text alone: {:?}",
        d[0].spec.accesses(Pass::Forward)
    );
    let file = "wp_native_poke.facts.json";
    let cpu = crate::aot::apply_facts("native_poke", &mut d, Some((&facts, file))).unwrap();
    for pass in [Pass::Forward, Pass::Adjoint] {
        let Accesses::Unproven(u) = d[0].spec.accesses(pass) else {
            panic!("{:?}", d[0].spec.accesses(pass));
        };
        assert!(u.location.starts_with(file), "{}", u.location);
        assert!(u.reason.contains("`poke`"), "{}", u.reason);
        assert!(u.reason.contains("C++ `poke_0`"), "{}", u.reason);
    }
    assert!(cpu["native_poke"].reason.contains("`poke`"));
    let e = crate::aot::apply_facts("other", &mut d, Some((&facts, file))).unwrap_err();
    assert!(e.to_string().contains("module 'native_poke's"), "{e}");
    let e = crate::aot::apply_facts("native_poke", &mut d, Some(("{}", file))).unwrap_err();
    assert!(e.to_string().contains(file), "{e}");
}

#[test]
fn load_refuses_an_unmodelled_mode_before_the_image() {
    let dir = std::env::temp_dir().join(format!("wl-modes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cu, meta, _) = fixture!("modes_cluster");
    std::fs::write(dir.join("wp_m.cu"), cu).unwrap();
    std::fs::write(dir.join("wp_m.meta"), meta).unwrap();
    // No image: the mode check must come first.
    // SAFETY: the load is refused before any kernel is made.
    let e = unsafe { crate::AotModule::load(&dir) }.unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        matches!(&e, Error::Unmodelled(u) if u.feature == WarpFeature::Cluster { ctas: 2 }),
        "{e}"
    );
}
