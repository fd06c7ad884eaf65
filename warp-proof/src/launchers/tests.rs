//! The generator over Warp 1.19.0's real output (the fixtures of
//! `tests/fixtures`, written by Warp from `tests/warp/*.py`).

use super::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixtures() -> PathBuf {
    root().join("warp-launch/tests/fixtures")
}

/// The launchers of fixture module `module`, with its Python file when given.
fn generate(module: &str, python: Option<&str>) -> String {
    let mut l = Launchers::from_dir(fixtures(), module).unwrap();
    if let Some(py) = python {
        l.python_source(root().join(py)).source_root(root());
    }
    l.generate().unwrap()
}

/// The docs of the item whose docs start with `header`, up to its `pub struct`.
fn item<'a>(text: &'a str, header: &str) -> &'a str {
    let start = text
        .find(header)
        .unwrap_or_else(|| panic!("no `{header}` in the output"));
    let rest = &text[start..];
    &rest[..rest.find("\npub struct").unwrap_or(rest.len())]
}

#[test]
fn tile_launchers() {
    let text = generate("tiles", Some("tests/warp/tiles.py"));
    insta::assert_snapshot!("tiles", text);
    // Every tile kernel gets the tiled launchers, forward and backward.
    for k in ["ScaleTiles", "RowSums", "TotalSum", "ScaleShared"] {
        let start = text.find(&format!("impl {k} {{")).unwrap();
        let body = &text[start..];
        let body = &body[..body[1..].find("\nimpl ").map_or(body.len(), |e| e + 1)];
        for m in [
            "pub fn launch(",
            "pub fn launch_on(",
            "pub fn record(",
            "pub fn launch_adjoint(",
            "pub fn launch_tiled(",
            "pub fn launch_tiled_on(",
            "pub fn launch_tiled_adjoint(",
        ] {
            assert!(body.contains(m), "{k} lacks {m}");
        }
        assert!(body.contains(".launch_tiled_args("), "{k}");
    }
    // The backward tile builtins are refused by safe launches: the docs say so.
    assert!(
        item(&text, "/// Typed launcher of the Warp kernel `scale_tiles`")
            .contains("Safe launches of its backward kernel are refused")
    );
}

#[test]
fn fallbacks_without_the_python_file() {
    // Without kinds.py: Warp's one-line copies of multi-line signatures, and
    // an array whose dimensions nothing in Warp's output shows.
    let text = generate("kinds", None);
    insta::assert_snapshot!("kinds_without_python", text);
    let shape_only = item(&text, "/// Typed launcher of the Warp kernel `shape_only`");
    assert!(shape_only.contains("def shape_only(\n///     ...  # (Warp copies only"));
    assert!(text.contains("pub fn launch<const NDIM_A: usize>("));
    // With it: the whole signature, and the dimensions it states.
    let with = generate("kinds", Some("tests/warp/kinds.py"));
    let shape_only = item(&with, "/// Typed launcher of the Warp kernel `shape_only`");
    assert!(
        shape_only.contains(
            "def shape_only(a: wp.array3d(dtype=wp.float32), out: wp.array(dtype=wp.int32)):"
        ),
        "{shape_only}"
    );
    assert!(shape_only.contains("Defined at `tests/warp/kinds.py:72`"));
    assert!(with.contains("a: &::warp_launch::TypedArray<f32, 3>,"));
    assert!(!with.contains("NDIM_"));
}

#[test]
fn kinds_map_to_rust_and_unsupported_kernels_are_listed() {
    let text = generate("kinds", Some("tests/warp/kinds.py"));
    for expected in [
        // Values: matrices row-major, quaternions and transforms flat, bool.
        "m: [[f64; 2]; 2],",
        "q: [f32; 4],",
        "t: [f32; 7],",
        "on: bool,",
        "big: i64,",
        "small: i8,",
        "let m = m.map(|row| row.map(f64::to_le_bytes));",
        "let on = [u8::from(on)];",
        // Arrays: element types and dimensions.
        "ids: &::warp_launch::TypedArray<[i32; 3], 2>,",
        "frames: &::warp_launch::TypedArray<[[f32; 4]; 4], 1>,",
        "counts: &::warp_launch::TypedArray<u64, 1>,",
        // Keywords are raw; the launchers' own names are renamed.
        "r#type: &::warp_launch::TypedArray<i32, 1>,",
        "r#match: i32,",
        "dim_: u32,",
        "stream_: &::warp_launch::TypedArray<u32, 1>,",
        // Nested structs with their padding spelled out and checked.
        "pub _pad0: [u8; 7],",
        "pub inner: Inner,",
        "|| ::core::mem::offset_of!(Outer, weights) != 24",
    ] {
        assert!(text.contains(expected), "missing `{expected}`");
    }
    let module = item(&text, "/// Typed launchers of the Warp module `kinds`");
    // float16 values: half's type through warp-launch's re-export.
    assert!(!module.contains("- `half_value`"), "{module}");
    let half = &text[text
        .find("impl HalfValue {")
        .expect("a launcher of half_value")..];
    assert!(half.contains("h: ::warp_launch::half::f16,"), "{half}");
    assert!(half.contains("let h = h.to_le_bytes();"), "{half}");
    assert!(
        module.contains("- `quat_array`: parameter `q` is an array of `quatf`"),
        "{module}"
    );
    assert!(text.contains("pub struct HalfValue"));
    assert!(!text.contains("pub struct QuatArray"));
}

#[test]
fn access_rules_writes_and_refusals_are_documented() {
    let text = generate("access", Some("tests/warp/access.py"));
    let module = item(&text, "/// Typed launchers of the Warp module `access`");
    // A struct holding an array: a struct of typed fields that makes a
    // checked value; its kernel's accesses through it are proven (the
    // held array's rules), so the launcher has the safe launches.
    assert!(!module.contains("- `through_struct`"), "{module}");
    let holder = &text[text.find("pub struct Holder {").expect("a Holder struct")..];
    let holder = &holder[..holder.find("\n}\n").unwrap_or(holder.len())];
    assert!(
        holder.contains("pub data: ::warp_launch::TypedArray<f32, 1>,"),
        "{holder}"
    );
    assert!(holder.contains("pub scale: f32,"), "{holder}");
    assert!(!text.contains("unsafe impl ::warp_launch::WarpStruct for Holder"));
    assert!(
        text.contains(
            "pub fn to_value(&self) -> ::warp_launch::Result<::warp_launch::StructValue>"
        )
    );
    let through = &text[text
        .find("impl ThroughStruct {")
        .expect("a launcher of through_struct")..];
    assert!(through.contains("h: &Holder,"), "{through}");
    assert!(through.contains("let h = h.to_value()?;"), "{through}");
    // Its accesses through the struct are proven: a safe launch, whose
    // rule names the held array.
    assert!(through.contains("pub fn launch("), "{through}");
    assert!(
        !through.contains("pub unsafe fn launch_unchecked("),
        "{through}"
    );
    let doc = item(
        &text,
        "/// Typed launcher of the Warp kernel `through_struct`",
    );
    assert!(doc.contains("`h.data[tid 0]`"), "{doc}");
    assert!(text.contains("/// **Safe launches of this kernel are refused** (`Error::Unproven`)"));
    let gather = item(&text, "/// Typed launcher of the Warp kernel `gather`");
    assert!(gather.contains(
        "**Safe launches of this kernel are refused** (`Error::Unproven`): at `wp_access.cu:192`"
    ));
    assert!(gather.contains(
        "- `out`: array of `float32`, 1-D (`&TypedArray<f32, 1>`), **written** (`wp::array_store`"
    ));
    assert!(gather.contains("- `idx`: array of `int32`, 1-D (`&TypedArray<i32, 1>`), read only"));
    let call = item(&text, "/// Typed launcher of the Warp kernel `call_func`");
    assert!(call.contains("passed to `first_0`"), "{call}");
    let ends = item(&text, "/// Typed launcher of the Warp kernel `ends`");
    assert!(ends.contains("`x[0]`, `x[-1]`, `out[tid 0]`"), "{ends}");
    let kernels = generate("kernels", Some("tests/warp/kernels.py"));
    let loss = item(
        &kernels,
        "/// Typed launcher of the Warp kernel `chain_loss`",
    );
    assert!(loss.contains("**accumulated into** (`wp::atomic_add`, `wp_kernels.cu:521`)"));
    assert!(
        loss.contains("Defined at `tests/warp/kernels.py:83`; Warp's CUDA at `wp_kernels.cu:486`.")
    );
}

#[test]
fn modes_fixtures_overloads_and_forward_only_kernels() {
    let modes = fixtures().join("modes");
    let text = Launchers::from_dir(&modes, "modes_overloads_9fbfda6")
        .unwrap()
        .generate()
        .unwrap();
    assert!(text.contains("pub struct Overloaded9e921ea2(::warp_launch::Kernel);"));
    assert!(text.contains("pub const NAME: &'static str = \"overloaded_9e921ea2\";"));
    // Warp's `<L 1>` of a generic kernel is not believed without the file.
    let text = Launchers::from_dir(&modes, "modes_harmless")
        .unwrap()
        .generate()
        .unwrap();
    let fwd = item(
        &text,
        "/// Typed launcher of the Warp kernel `forward_only`",
    );
    assert!(fwd.contains("no backward kernel"), "{fwd}");
    let start = text.find("impl ForwardOnly {").unwrap();
    let end = start + text[start..].find("\n}\n").unwrap();
    assert!(!text[start..end].contains("launch_adjoint"));
}

#[test]
fn modules_the_loader_refuses_are_refused_with_its_message() {
    let modes = fixtures().join("modes");
    let e = Launchers::from_dir(&modes, "modes_deterministic")
        .unwrap()
        .generate()
        .unwrap_err();
    assert!(matches!(e, LauncherError::Module { .. }));
    insta::assert_snapshot!("deterministic", e.to_string());
    let e = Launchers::from_dir(fixtures(), "nothing").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("the launcher generator (Launchers): reading "),
        "{msg}"
    );
    assert!(msg.contains("wp_nothing.cu"), "{msg}");
    let mut l = Launchers::from_dir(fixtures(), "kernels").unwrap();
    l.python_source(root().join("tests/warp/missing.py"));
    let msg = l.generate().unwrap_err().to_string();
    assert!(msg.contains("missing.py"), "{msg}");
}

#[test]
fn output_is_stable_and_written_only_when_it_changes() {
    let a = generate("kernels", Some("tests/warp/kernels.py"));
    let b = generate("kernels", Some("tests/warp/kernels.py"));
    assert_eq!(a, b);
    assert!(a.starts_with(
        "// @generated by warp-launch's launcher generator from wp_kernels.cu (Warp 1.19.0); do not edit.\n"
    ));
    assert!(!a.contains(env!("CARGO_MANIFEST_DIR")), "no absolute paths");
    let dir = std::env::temp_dir().join(format!("wl-launchers-{}", std::process::id()));
    let path = dir.join("sub/kernels_launchers.rs");
    let mut l = Launchers::from_dir(fixtures(), "kernels").unwrap();
    l.banner_note("regenerate with: make launchers");
    l.write(&path).unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("\n// regenerate with: make launchers\n"));
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    l.write(&path).unwrap();
    let after = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, "stale").unwrap();
    l.write(&path).unwrap();
    let rewritten = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(before, after, "an unchanged file is not rewritten");
    assert_eq!(rewritten, written);
}

/// The compile step's facts decide as they do at load: a kernel reaching a
/// `wp.func_native` snippet (the shared `native_poke` attack, whose snippet
/// looks like Warp's own code) gets only the unsafe launcher, its docs
/// naming the native function; without the facts file the generator
/// cannot know, and the loader's `unsafe` contract covers it.
#[test]
fn facts_make_a_kernel_reaching_native_code_unproven() {
    let attacks = fixtures().join("attacks");
    let text = Launchers::from_dir(&attacks, "native_poke")
        .unwrap()
        .generate()
        .unwrap();
    let doc = item(&text, "/// Typed launcher of the Warp kernel `native_poke`");
    assert!(
        doc.contains("Safe launches of this kernel are refused") && doc.contains("poke"),
        "{doc}"
    );
    assert!(text.contains("pub unsafe fn launch_unchecked("), "{text}");
    // The same module without its facts: proven from the `.cu` alone.
    let dir = std::env::temp_dir().join(format!("wl-facts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["wp_native_poke.cu", "wp_native_poke.meta"] {
        std::fs::copy(attacks.join(f), dir.join(f)).unwrap();
    }
    let bare = Launchers::from_dir(&dir, "native_poke")
        .unwrap()
        .generate()
        .unwrap();
    assert!(
        !item(&bare, "/// Typed launcher of the Warp kernel `native_poke`")
            .contains("Safe launches of this kernel are refused")
    );
    // Facts of another module are refused, not applied.
    std::fs::copy(
        attacks.join("wp_local_components.facts.json"),
        dir.join("wp_native_poke.facts.json"),
    )
    .unwrap();
    let e = Launchers::from_dir(&dir, "native_poke")
        .unwrap()
        .generate()
        .unwrap_err()
        .to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        e.contains("the facts are module 'local_components's, not 'native_poke's"),
        "{e}"
    );
}
