//! `AotModule::load` checks the image before the driver reads it: a Warp
//! module directory whose cubin is truncated or corrupted is refused with an
//! error naming the image and the byte offset, on any machine (the check
//! runs before the driver is loaded). At 38e7deb the truncated cubin went to
//! `cuLibraryLoadData` with no length (on an H200: SIGSEGV).

use std::path::{Path, PathBuf};

use warp_launch::AotModule;

/// A module directory: the Warp fixtures' `.cu` and `.meta`, and `image`
/// as its sm_90 cubin.
fn module_dir(tag: &str, image: &[u8]) -> PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = std::env::temp_dir().join(format!("wl-aot-image-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["wp_kernels.cu", "wp_kernels.meta"] {
        std::fs::copy(fixtures.join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("wp_kernels.sm90.cubin"), image).unwrap();
    dir
}

const CUBIN: &[u8] = include_bytes!("../../cuda-api/tests/fixtures/images/add_one.sm_90.cubin");

#[test]
fn a_truncated_cubin_is_refused_before_the_driver() {
    for (tag, image) in [
        ("cut", &CUBIN[..CUBIN.len() / 2]),
        ("header", &CUBIN[..40]),
        ("empty", &CUBIN[..0]),
    ] {
        let dir = module_dir(tag, image);
        // SAFETY: the load must refuse the image; no kernel is made.
        let e = unsafe { AotModule::load(&dir) }.expect_err("a truncated cubin loaded");
        std::fs::remove_dir_all(&dir).ok();
        let msg = e.to_string();
        // Refused while reading what the image was compiled for, before
        // the choice of image and before the driver.
        assert!(
            msg.contains("wp_kernels.sm90.cubin: cuda_api::ImageTarget::of: refused the image"),
            "{tag}: {msg}"
        );
        assert!(msg.contains("at byte"), "{tag}: {msg}");
    }
}

#[test]
fn a_corrupted_section_table_is_refused() {
    let mut image = CUBIN.to_vec();
    image[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes()); // e_shoff
    let dir = module_dir("shoff", &image);
    // SAFETY: the load must refuse the image; no kernel is made.
    let e = unsafe { AotModule::load(&dir) }.expect_err("a corrupted cubin loaded");
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.to_string().contains("section header table"), "{e}");
}
