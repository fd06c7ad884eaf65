//! The image validator (`cuda_api::check_image`) on real images compiled by
//! the pinned nvcc 13.0 (`tests/fixtures/images/README.md`), every
//! truncation of them and many seeded corruptions: it never panics, every
//! truncation is refused, the untouched images are accepted. No GPU needed.

use cuda_api::{ImageKind, check_image};

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
    (
        "add_one.G.fatbin",
        include_bytes!("fixtures/images/add_one.G.fatbin"),
        ImageKind::Fatbin,
    ),
];

/// `add_one.zstd.fatbin` with its zstd-compressed cubin's e_shoff set far
/// past the end, recompressed (`fixtures/images/corrupt_zstd.py`): the
/// compressed stream is valid, its content is not.
const ZSTD_BAD_SHOFF: &[u8] = include_bytes!("fixtures/images/add_one.zstd.bad_shoff.fatbin");

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
        assert_eq!(check_image(bytes), Ok(*kind), "{name}");
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
            let e = check_image(cut).expect_err(&format!("{name} cut to {len} bytes was accepted"));
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
        let r = check_image(&ptx[..len]);
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
            let r = std::panic::catch_unwind(|| check_image(&v));
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
        let e = check_image(&v).expect_err(what);
        assert!(e.to_string().contains("refused the image"), "{what}: {e}");
    }
    // Section 3 (.symtab)'s size, far past the end.
    let shoff = u64::from_le_bytes(cubin[40..48].try_into().unwrap()) as usize;
    let mut v = cubin.to_vec();
    set(&mut v, shoff + 3 * 64 + 32, 8, 1 << 20);
    let e = check_image(&v).unwrap_err();
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
        let e = check_image(&v).expect_err(what);
        assert!(e.len == v.len(), "{what}: {e}");
    }
}

#[test]
fn nested_cubin_corruption_in_a_fatbin_is_refused() {
    let (_, fatbin, _) = FIXTURES[1];
    // The first entry's ELF starts at 16 + 64.
    let mut v = fatbin.to_vec();
    set(&mut v, 80 + 40, 8, 1 << 40);
    let e = check_image(&v).unwrap_err();
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

/// The fatbin's entries as (offset of the entry header in the image, header
/// size, kind, flags, compressed size, decompressed size).
fn entries(fatbin: &[u8]) -> Vec<(usize, usize, u16, u64, usize, u64)> {
    let le = |at: usize, n: usize| {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&fatbin[at..at + n]);
        u64::from_le_bytes(b)
    };
    let header = le(6, 2) as usize;
    let end = header + le(8, 8) as usize;
    let mut at = header;
    let mut out = Vec::new();
    while at < end {
        let hs = le(at + 4, 4) as usize;
        out.push((
            at,
            hs,
            le(at, 2) as u16,
            le(at + 40, 8),
            le(at + 16, 4) as usize,
            le(at + 56, 8),
        ));
        at += hs + le(at + 8, 8) as usize;
    }
    out
}

const ZSTD: u64 = 0x8000;

/// The fixtures hold what their names say: nvcc 13's zstd-compressed cubin
/// (kind 2) and PTX (kind 1) entries, in the `-Xfatbin -compress-all` and
/// the `-G` fixtures.
#[test]
fn the_zstd_fixtures_hold_zstd_compressed_cubin_and_ptx_entries() {
    for (name, bytes, _) in FIXTURES {
        if !(name.contains("zstd") || name.contains(".G.")) {
            continue;
        }
        let e = entries(bytes);
        let kinds: Vec<u16> = e.iter().map(|e| e.2).collect();
        assert_eq!(kinds, [2, 1], "{name}");
        for (at, _, kind, flags, ..) in e {
            assert_eq!(flags & 0xa000, ZSTD, "{name}: entry at {at} (kind {kind})");
        }
    }
}

/// A zstd-compressed cubin whose compressed stream is valid but whose ELF
/// is broken is refused, naming the entry and the ELF problem (at 38e7deb,
/// and before this change, only the zstd frame and block headers were
/// walked, so this image went to the driver).
#[test]
fn a_broken_cubin_inside_a_zstd_entry_is_refused() {
    let e = entries(ZSTD_BAD_SHOFF);
    let (at, hs, kind, flags, ..) = e[0];
    assert_eq!((kind, flags & ZSTD), (2, ZSTD));
    let err =
        check_image(ZSTD_BAD_SHOFF).expect_err("the broken zstd-compressed cubin was accepted");
    assert_eq!(err.offset, at + hs, "{err}");
    assert!(
        err.problem.contains("fatbin entry 0 (decompressed"),
        "{err}"
    );
    assert!(err.problem.contains("section header table"), "{err}");
    assert!(err.to_string().contains("refused the image"), "{err}");
    // The same through the public loader, before any driver is loaded.
    let msg = match cuda_api::Library::from_image(ZSTD_BAD_SHOFF) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("loaded"),
    };
    assert!(
        msg.starts_with("Library::from_image: refused the image"),
        "{msg}"
    );
}

/// Bytes changed inside the compressed blocks (block headers kept) are
/// decompressed: the decoder's errors are refusals naming the entry, never
/// panics; at 38e7deb every one of these was accepted.
#[test]
fn corruptions_inside_zstd_blocks_are_decompressed_and_refused() {
    let (_, fatbin, _) = FIXTURES[2];
    let (at, hs, _, _, csz, _) = entries(fatbin)[0];
    let stream = at + hs;
    // The frame header (magic, descriptor, 2-byte content size) and the first
    // block header take 10 bytes; corrupt the block bodies after them.
    let mut refused = 0;
    let mut decoder_errors = 0;
    for i in stream + 10..stream + csz {
        for value in [0x00, 0xff] {
            let mut v = fatbin.to_vec();
            if v[i] == value {
                continue;
            }
            v[i] = value;
            if let Err(e) = check_image(&v) {
                refused += 1;
                assert!(e.problem.starts_with("fatbin entry 0"), "{e}");
                assert!(e.offset >= stream && e.offset <= stream + csz, "{e}");
                decoder_errors += usize::from(e.problem.contains("zstd block"));
            }
        }
    }
    assert!(refused > csz / 2, "{refused} refused");
    assert!(decoder_errors > 0, "no decoder error among {refused}");
}

/// A fatbin with one zstd-compressed PTX entry made of `frame`, stating
/// `decompressed` bytes.
fn fatbin_with_zstd_ptx(frame: &[u8], decompressed: u64) -> Vec<u8> {
    let padded = frame.len().div_ceil(8) * 8;
    let mut v = Vec::new();
    v.extend_from_slice(&0xBA55_ED50u32.to_le_bytes());
    v.extend_from_slice(&1u16.to_le_bytes());
    v.extend_from_slice(&16u16.to_le_bytes());
    v.extend_from_slice(&(64 + padded as u64).to_le_bytes());
    let mut h = [0u8; 64];
    h[0..2].copy_from_slice(&1u16.to_le_bytes());
    h[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
    h[4..8].copy_from_slice(&64u32.to_le_bytes());
    h[8..16].copy_from_slice(&(padded as u64).to_le_bytes());
    h[16..20].copy_from_slice(&(frame.len() as u32).to_le_bytes());
    h[40..48].copy_from_slice(&(ZSTD | 0x11).to_le_bytes());
    h[56..64].copy_from_slice(&decompressed.to_le_bytes());
    v.extend_from_slice(&h);
    v.extend_from_slice(frame);
    v.resize(16 + 64 + padded, 0);
    v
}

/// A zstd frame without a content size (window 1 KiB) of `blocks` RLE
/// blocks of 1024 bytes of `.`, the last one marked last.
fn rle_frame(blocks: usize) -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00];
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let h = last | 1 << 1 | 1024 << 3;
        f.extend_from_slice(&h.to_le_bytes()[..3]);
        f.push(b'.');
    }
    f
}

/// The decompressed size stated in the entry caps decompression: a frame
/// that makes more is refused once it passes the cap (a zip bomb), one that
/// states more than its blocks can make is refused before decoding, and a
/// window far larger than the content is refused (at 38e7deb all three were
/// accepted: only the headers were walked).
#[test]
fn zstd_output_is_capped_at_the_stated_size() {
    // 64 blocks make 64 KiB; the entry says 4 KiB.
    let e = check_image(&fatbin_with_zstd_ptx(&rle_frame(64), 4096)).unwrap_err();
    assert!(
        e.problem
            .contains("decompresses to more than the stated 4096 bytes"),
        "{e}"
    );
    // One block can make 1 KiB, not the stated 4 GiB.
    let e = check_image(&fatbin_with_zstd_ptx(&rle_frame(1), 1 << 32)).unwrap_err();
    assert!(
        e.problem
            .contains("can make at most 1024 bytes, not the stated 4294967296"),
        "{e}"
    );
    // Exactly the stated size, all dots: decompressed, then refused as PTX
    // (no NUL, no .version), which shows the content was checked.
    let e = check_image(&fatbin_with_zstd_ptx(&rle_frame(4), 4096)).unwrap_err();
    assert!(e.problem.contains("(decompressed, at byte"), "{e}");
    // A 2 TiB window for 4 KiB of content.
    let mut f = rle_frame(4);
    f[5] = 31 << 3;
    let e = check_image(&fatbin_with_zstd_ptx(&f, 4096)).unwrap_err();
    assert!(e.problem.contains("window"), "{e}");
}

/// Seed 0x17 of `gpu_images`' random corruptions set section header 0's
/// `sh_offset` to 0xffffffff (with code and constant bytes changed too):
/// the image passed the check and crashed `cuModuleLoadData` on the H200
/// with SIGSEGV. ELF requires header 0 to be all zero; every section's
/// offset lies inside the file; alignments are sane.
#[test]
fn section_headers_the_driver_follows_without_a_size_are_checked_too() {
    let (_, cubin, _) = FIXTURES[0];
    let shoff = u64::from_le_bytes(cubin[40..48].try_into().unwrap()) as usize;
    check_image(cubin).unwrap();
    let mut v = cubin.to_vec();
    set(&mut v, shoff + 24, 4, 0xffff_ffff);
    let e = check_image(&v).unwrap_err();
    assert!(
        e.to_string().contains("section header 0 (SHN_UNDEF)"),
        "{e}"
    );
    assert_eq!(e.offset, shoff + 24, "{e}");
    // The NOBITS section (13 in this cubin) has no bytes, but its offset still must lie in the file.
    let mut v = cubin.to_vec();
    set(&mut v, shoff + 13 * 64 + 24, 8, 1 << 40);
    let e = check_image(&v).unwrap_err();
    assert!(e.to_string().contains("lies past the end"), "{e}");
    let mut v = cubin.to_vec();
    set(&mut v, shoff + 12 * 64 + 48, 8, 1 << 40);
    let e = check_image(&v).unwrap_err();
    assert!(e.to_string().contains("sh_addralign"), "{e}");
}

/// The seeded corruptions of `gpu_images::child_loads_random_corruptions`
/// (same generator) that passed the check and then crashed
/// `cuModuleLoadData` with SIGSEGV on the H200 (found by the GPU test and a
/// probe over 600 seeds): header 0's sh_offset (0x17), a symbol index in a
/// `.nv.info` record (0x2c), sh_info of the NOBITS section (0x36) and of a
/// `.nv.info.<fn>` section (0x4c). Each is refused now.
#[test]
fn the_corruptions_that_crashed_the_driver_are_refused() {
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
    let (_, cubin, _) = FIXTURES[0];
    for seed in [0x17u64, 0x2c, 0x36, 0x4c] {
        let mut rng = Rng(seed);
        let mut v = cubin.to_vec();
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
        let e = check_image(&v).expect_err(&format!("seed {seed:#x}"));
        eprintln!("seed {seed:#x}: {e}");
    }
}
