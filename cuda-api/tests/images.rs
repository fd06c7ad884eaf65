//! The image validator (`cuda_api::image::check`) on real images compiled by
//! the pinned nvcc 13.0 (`tests/fixtures/images/README.md`), every
//! truncation of them and many seeded corruptions: it never panics, every
//! truncation is refused, the untouched images are accepted. No GPU needed.

use cuda_api::image::{ImageKind, check};

const FIXTURES: &[(&str, &[u8], ImageKind)] = &[
    (
        "add_one.sm_90.cubin",
        include_bytes!("fixtures/images/add_one.sm_90.cubin"),
        ImageKind::Cubin,
    ),
    (
        "add_one.fatbin",
        include_bytes!("fixtures/images/add_one.fatbin"),
        ImageKind::Fatbin,
    ),
    (
        "add_one.zstd.fatbin",
        include_bytes!("fixtures/images/add_one.zstd.fatbin"),
        ImageKind::Fatbin,
    ),
    (
        "add_one.lz4.fatbin",
        include_bytes!("fixtures/images/add_one.lz4.fatbin"),
        ImageKind::Fatbin,
    ),
    (
        "add_one.ptx",
        include_bytes!("fixtures/images/add_one.ptx"),
        ImageKind::Ptx,
    ),
];

/// A small deterministic generator (SplitMix64).
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

#[test]
fn untouched_fixtures_are_accepted() {
    for (name, bytes, kind) in FIXTURES {
        assert_eq!(check(bytes), Ok(*kind), "{name}");
    }
}

#[test]
fn every_truncation_is_refused() {
    for (name, bytes, _) in FIXTURES {
        // PTX text cut anywhere is still text; the binaries are cut anywhere.
        if name.ends_with(".ptx") {
            continue;
        }
        for len in 0..bytes.len() {
            let cut = &bytes[..len];
            let e = check(cut).expect_err(&format!("{name} cut to {len} bytes was accepted"));
            assert!(e.offset <= bytes.len(), "{name}[..{len}]: {e}");
        }
    }
}

#[test]
fn ptx_truncations_before_the_version_are_refused_and_none_panic() {
    let (_, ptx, _) = FIXTURES[4];
    let at = ptx
        .windows(8)
        .position(|w| w == b".version")
        .expect("the fixture has a .version");
    for len in 0..ptx.len() {
        let r = check(&ptx[..len]);
        if len < at + 9 {
            assert!(r.is_err(), "PTX cut to {len} bytes was accepted");
        }
    }
}

#[test]
fn seeded_corruptions_never_panic() {
    let mut rng = Rng(0x1234_5678);
    let mut refused = 0usize;
    let mut total = 0usize;
    for (name, bytes, _) in FIXTURES {
        for _ in 0..3000 {
            let mut v = bytes.to_vec();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(v.len());
                match rng.below(4) {
                    0 => v[i] ^= 1 << rng.below(8),
                    1 => v[i] = rng.next() as u8,
                    2 => v[i] = [0, 0xff, 0x7f, 0x80][rng.below(4)],
                    _ => {
                        // A 32-bit field set to a large value.
                        let end = (i + 4).min(v.len());
                        for b in &mut v[i..end] {
                            *b = 0xff;
                        }
                    }
                }
            }
            total += 1;
            let r = std::panic::catch_unwind(|| check(&v));
            match r {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => refused += 1,
                Err(_) => panic!("check panicked on a corruption of {name}"),
            }
        }
    }
    // Many corruptions hit bytes the driver does not follow (code, text);
    // those are accepted. Header corruptions are refused.
    assert!(refused > total / 10, "{refused} of {total} refused");
}

/// Sets the little-endian field of `width` bytes at `at`.
fn set(v: &mut [u8], at: usize, width: usize, value: u64) {
    v[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
}

#[test]
fn header_corruptions_are_refused_at_their_offset() {
    let (_, cubin, _) = FIXTURES[0];
    let cases: &[(&str, usize, usize, u64)] = &[
        ("e_machine", 18, 2, 62),
        ("e_shoff", 40, 8, 1 << 40),
        ("e_phoff", 32, 8, u64::MAX - 8),
        ("e_shnum", 60, 2, 0xffff),
        ("e_shstrndx", 62, 2, 999),
        ("e_shentsize", 58, 2, 32),
    ];
    for (what, at, width, value) in cases {
        let mut v = cubin.to_vec();
        set(&mut v, *at, *width, *value);
        let e = check(&v).expect_err(what);
        assert!(e.to_string().contains("refused the image"), "{what}: {e}");
    }
    // Section 3 (.symtab)'s size, far past the end.
    let shoff = u64::from_le_bytes(cubin[40..48].try_into().unwrap()) as usize;
    let mut v = cubin.to_vec();
    set(&mut v, shoff + 3 * 64 + 32, 8, 1 << 20);
    let e = check(&v).unwrap_err();
    assert_eq!(e.offset, shoff + 3 * 64 + 24, "{e}");

    let (_, fatbin, _) = FIXTURES[1];
    for (what, at, width, value) in [
        ("magic", 0usize, 4usize, 0x1234u64),
        ("version", 4, 2, 2),
        ("header size", 6, 2, 8),
        ("payload size", 8, 8, 1 << 30),
        ("entry kind", 16, 2, 7),
        ("entry header size", 20, 4, 0xffff_fff0),
        ("entry payload size", 24, 8, 1 << 33),
    ] {
        let mut v = fatbin.to_vec();
        set(&mut v, at, width, value);
        let e = check(&v).expect_err(what);
        assert!(e.len == v.len(), "{what}: {e}");
    }
}

#[test]
fn nested_cubin_corruption_in_a_fatbin_is_refused() {
    let (_, fatbin, _) = FIXTURES[1];
    // The first entry's ELF starts at 16 + 64.
    let mut v = fatbin.to_vec();
    set(&mut v, 80 + 40, 8, 1 << 40);
    let e = check(&v).unwrap_err();
    assert!(e.offset >= 80, "{e}");
    assert!(e.problem.contains("section header table"), "{e}");
}

/// Through the public loader, with no GPU or driver: the check runs before
/// the driver is loaded, so a truncated image is refused here too (at
/// 38e7deb it went to the driver, here "driver not found", on a GPU a crash).
#[test]
fn library_from_image_refuses_truncations_before_loading_the_driver() {
    for (name, bytes, _) in &FIXTURES[..4] {
        for len in [0, 3, 16, 63, 64, bytes.len() / 2, bytes.len() - 1] {
            let e = match cuda_api::Library::from_image(&bytes[..len]) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{name} cut to {len} bytes loaded"),
            };
            assert!(
                e.starts_with("Library::from_image: refused the image"),
                "{name}[..{len}]: {e}"
            );
        }
    }
}
