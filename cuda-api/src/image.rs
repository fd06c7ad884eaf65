//! Checking an image (cubin, fatbin or PTX text) against its own length
//! before the driver reads it.
//!
//! Every function here stays short enough to check by reading (the
//! workspace's `clippy.toml` sets the limit).
#![deny(clippy::too_many_lines)]

use std::fmt;

mod cubin;
mod error;
mod params;
mod region;

use cubin::elf;
pub use error::ImageError;
use error::Result;
pub(crate) use params::{CubinLayouts, cubin_layouts};
use region::Region;

/// What an image was recognised as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageKind {
    /// An ELF cubin.
    Cubin,
    /// A fat binary (one or more cubin and PTX entries).
    Fatbin,
    /// PTX text.
    Ptx,
}

impl fmt::Display for ImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbin => "fatbin",
            ImageKind::Ptx => "PTX",
        })
    }
}

/// The fatbin header's magic number (`0xBA55ED50`, little-endian in the file).
pub(crate) const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// `__fatBinC_Wrapper_t`'s magic number: a struct holding a raw pointer.
const FATBINC_WRAPPER_MAGIC: u32 = 0x4662_43B1;
/// The magic of the pre-CUDA-4 fat binary format.
const OLD_FATBIN_MAGIC: u32 = 0x1EE5_5A01;

/// Largest decompressed size accepted for one compressed fatbin entry
/// (the driver allocates it before decompressing).
const MAX_DECOMPRESSED: u64 = 1 << 32;

/// Checks `image` (cubin, fatbin or PTX text) against its own length, before
/// the driver reads it, and says what it is.
///
/// `cuModuleLoadData` and `cuLibraryLoadData` take a pointer and no length:
/// the driver trusts every offset and size written inside the image. A
/// truncated or corrupted file therefore made it read past the end of the
/// buffer (on an H200, 4 of 5 such images killed the process). This function
/// reads everything the driver would follow, in Rust, against the slice:
///
/// - **cubin** (ELF): an ELF64 little-endian header for `EM_CUDA` (190); the
///   program and section header tables (offset + count × entry size inside
///   the image, entry sizes 56 and 64); every section's bytes (except
///   `SHT_NOBITS`); the section-name table and every name offset in it;
///   string tables NUL-terminated; symbol tables (entry size, string offsets,
///   section indices, a function's code inside its section); relocation
///   tables (symbol indices, target offsets); note sections and NVIDIA's
///   `.nv.info` attribute records (each record's size inside its section).
/// - **fatbin**: the header (magic `0xBA55ED50`, version 1, header size, the
///   payload size inside the image) and every entry's header (kind PTX or
///   ELF, header size, payload, the options and name fields inside the
///   header, entries tiling the payload exactly); an uncompressed ELF entry
///   is checked as a cubin and an uncompressed PTX entry as PTX text; a
///   compressed entry (the LZ format of flag `0x2000`, or zstd, flag
///   `0x8000`, which nvcc 13 uses by default for PTX entries and with
///   `-Xfatbin -compress-all`) is decompressed and its content checked
///   exactly as an uncompressed entry. Decompression is capped at the
///   entry's stated decompressed size: a stream that would produce more, or
///   less, is refused, and no more than that size is ever collected (for
///   zstd, [ruzstd](https://docs.rs/ruzstd) decodes one block at a time; the
///   frame and block headers are walked first, so that a stated size the
///   blocks cannot reach, or a window far larger than the content, is
///   refused before anything is allocated).
/// - **PTX text**: UTF-8, a `.version` directive, and no NUL before the one
///   the loader appends (one trailing NUL is allowed).
///
/// Anything else (an unknown magic number, the `__fatBinC_Wrapper_t` form
/// that holds a raw pointer to a fatbin elsewhere in memory, an empty
/// slice) is refused. What this cannot check is the meaning of the code
/// itself: an image that passes may still be refused by the driver (with an
/// error, not a crash).
///
/// # Errors
///
/// An [`ImageError`] (its `call` is `cuda_api::check_image`) naming the
/// first problem found and its byte offset.
pub fn check_image(image: &[u8]) -> std::result::Result<ImageKind, ImageError> {
    check_inner(image).map_err(|mut e| {
        e.len = image.len();
        e
    })
}

fn check_inner(image: &[u8]) -> Result<ImageKind> {
    if image.is_empty() {
        return Err(ImageError::new(
            0,
            "the image is empty (0 bytes); expected a cubin, a fatbin or PTX text",
        ));
    }
    if image.starts_with(b"\x7fELF") {
        elf(&Region::whole(image), "cubin")?;
        return Ok(ImageKind::Cubin);
    }
    let magic = Region::whole(image).u32(0, "the magic number").ok();
    match magic {
        Some(FATBIN_MAGIC) => {
            fatbin(image)?;
            Ok(ImageKind::Fatbin)
        }
        Some(FATBINC_WRAPPER_MAGIC) => Err(ImageError::new(
            0,
            "this is a __fatBinC_Wrapper_t (magic 0x466243B1), which holds a raw pointer to \
             a fatbin elsewhere in memory; pass the fatbin bytes themselves",
        )),
        Some(OLD_FATBIN_MAGIC) => Err(ImageError::new(
            0,
            "this is a pre-CUDA-4 fat binary (magic 0x1EE55A01), which is not supported; \
             rebuild it with a current nvcc",
        )),
        _ => {
            ptx(&Region::whole(image), true)?;
            Ok(ImageKind::Ptx)
        }
    }
}

// ---------------------------------------------------------------- fatbin

const FATBIN_KIND_PTX: u16 = 1;
const FATBIN_KIND_ELF: u16 = 2;
const FLAG_COMPRESSED_LZ: u64 = 0x2000;
const FLAG_COMPRESSED_ZSTD: u64 = 0x8000;

fn fatbin(image: &[u8]) -> Result<()> {
    let r = Region::whole(image);
    let version = r.u16(4, "the fatbin header's version")?;
    if version != 1 {
        return Err(r.err(4, format!("fatbin version {version} is not 1")));
    }
    let header_size = r.u16(6, "the fatbin header's size")?;
    if header_size < 16 {
        return Err(r.err(
            6,
            format!("fatbin header size {header_size} is smaller than the 16-byte header"),
        ));
    }
    let fat_size = r.u64(8, "the fatbin header's payload size")?;
    if fat_size == 0 {
        return Err(r.err(8, "the fatbin has no entries (payload size 0)"));
    }
    let payload = r.range(
        u64::from(header_size),
        fat_size,
        &format!("the fatbin payload ({fat_size} bytes after the {header_size}-byte header)"),
    )?;
    let mut at = 0u64;
    let mut n = 0usize;
    while at < payload.len() as u64 {
        at = entry(&payload, at, n)?;
        n += 1;
    }
    Ok(())
}

/// Checks the entry at `at` of the fatbin payload; returns where the next begins.
fn entry(payload: &Region<'_>, at: u64, n: usize) -> Result<u64> {
    let what = format!("fatbin entry {n}");
    let h = payload.range(at, 64, &format!("the 64-byte header of {what}"))?;
    let kind = h.u16(0, &what)?;
    let header_size = u64::from(h.u32(4, &what)?);
    let size = h.u64(8, &what)?;
    let compressed_size = u64::from(h.u32(16, &what)?);
    let options_offset = u64::from(h.u32(20, &what)?);
    let name_offset = u64::from(h.u32(32, &what)?);
    let name_len = u64::from(h.u32(36, &what)?);
    let flags = h.u64(40, &what)?;
    let decompressed_size = h.u64(56, &what)?;
    if kind != FATBIN_KIND_PTX && kind != FATBIN_KIND_ELF {
        return Err(h.err(
            0,
            format!("{what}: kind {kind} is neither PTX (1) nor cubin (2)"),
        ));
    }
    if header_size < 64 {
        return Err(h.err(
            4,
            format!("{what}: header size {header_size} is smaller than 64 bytes"),
        ));
    }
    let header = payload.range(
        at,
        header_size,
        &format!("{what}'s {header_size}-byte header"),
    )?;
    if options_offset != 0 {
        let opt_at = header.u32(options_offset, &format!("{what}'s options field"))?;
        let opt_len = header.u32(options_offset + 4, &format!("{what}'s options field"))?;
        if opt_at != 0 {
            header.range(
                u64::from(opt_at),
                u64::from(opt_len),
                &format!("{what}'s ptxas options"),
            )?;
        }
    }
    if name_offset != 0 {
        header.range(name_offset, name_len, &format!("{what}'s object name"))?;
    }
    let body_at = at.saturating_add(header_size);
    let body = payload.range(body_at, size, &format!("{what}'s {size}-byte payload"))?;
    let compression = flags & (FLAG_COMPRESSED_LZ | FLAG_COMPRESSED_ZSTD);
    if compression == 0 {
        match kind {
            FATBIN_KIND_ELF => elf(&body, &what)?,
            _ => ptx(&body, false)?,
        }
    } else {
        if compression == FLAG_COMPRESSED_LZ | FLAG_COMPRESSED_ZSTD {
            return Err(h.err(
                40,
                format!("{what}: flags {flags:#x} mark two compressions at once"),
            ));
        }
        if compressed_size == 0 || compressed_size > size {
            return Err(h.err(
                16,
                format!(
                    "{what}: compressed size {compressed_size} is 0 or larger than the {size}-byte payload"
                ),
            ));
        }
        if decompressed_size == 0 || decompressed_size > MAX_DECOMPRESSED {
            return Err(h.err(
                56,
                format!(
                    "{what}: decompressed size {decompressed_size} is 0 or larger than {MAX_DECOMPRESSED}"
                ),
            ));
        }
        let stream = body.range(0, compressed_size, &what)?;
        let out = if compression == FLAG_COMPRESSED_LZ {
            lz_decompress(&stream, decompressed_size, &what)?
        } else {
            let window = zstd_frame(&stream, decompressed_size, &what)?;
            zstd_decompress(&stream, decompressed_size, window, &what)?
        };
        let inner = Region {
            bytes: &out,
            base: stream.base,
        };
        // Offsets inside decompressed data are reported at the stream's start.
        let res = match kind {
            FATBIN_KIND_ELF => elf(&inner, &what),
            _ => ptx(&inner, false),
        };
        res.map_err(|e| {
            stream.err(
                0,
                format!(
                    "{what} (decompressed, at byte {} of its content): {}",
                    e.offset.saturating_sub(stream.base),
                    e.problem
                ),
            )
        })?;
    }
    Ok(body_at + size)
}

/// Decompresses the LZ format of fatbin flag `0x2000` with every offset
/// checked: tokens of (literal count, match length), literals, a 2-byte
/// back offset.
fn lz_decompress(s: &Region<'_>, expected: u64, what: &str) -> Result<Vec<u8>> {
    let input = s.bytes;
    let limit = usize::try_from(expected).unwrap_or(usize::MAX);
    let mut out: Vec<u8> = Vec::new();
    let mut pos = 0usize;
    let too_big = |pos: usize| {
        s.err(
            pos as u64,
            format!("{what}: the compressed stream decompresses to more than the stated {expected} bytes"),
        )
    };
    let truncated = |pos: usize| {
        s.err(
            pos as u64,
            format!("{what}: the compressed stream ends inside a token"),
        )
    };
    while pos < input.len() {
        let token = input[pos];
        let mut literals = usize::from(token >> 4);
        let mut matched = 4 + usize::from(token & 0xf);
        pos += 1;
        if literals == 0xf {
            loop {
                let b = *input.get(pos).ok_or_else(|| truncated(pos))?;
                pos += 1;
                literals = literals.saturating_add(usize::from(b));
                if b != 0xff {
                    break;
                }
            }
        }
        let lit = input
            .get(pos..pos.saturating_add(literals))
            .ok_or_else(|| truncated(pos))?;
        if out.len() + lit.len() > limit {
            return Err(too_big(pos));
        }
        out.extend_from_slice(lit);
        pos += literals;
        if pos >= input.len() {
            break;
        }
        let lo = *input.get(pos).ok_or_else(|| truncated(pos))?;
        let hi = *input.get(pos + 1).ok_or_else(|| truncated(pos))?;
        let back = usize::from(lo) | usize::from(hi) << 8;
        pos += 2;
        if matched == 0xf + 4 {
            loop {
                let b = *input.get(pos).ok_or_else(|| truncated(pos))?;
                pos += 1;
                matched = matched.saturating_add(usize::from(b));
                if b != 0xff {
                    break;
                }
            }
        }
        if back == 0 || back > out.len() {
            return Err(s.err(
                pos as u64,
                format!(
                    "{what}: a back reference of {back} bytes points before the start of the {} bytes decompressed so far",
                    out.len()
                ),
            ));
        }
        if out.len().saturating_add(matched) > limit {
            return Err(too_big(pos));
        }
        let start = out.len() - back;
        for i in 0..matched {
            let b = out[start + i];
            out.push(b);
        }
    }
    if out.len() != limit {
        return Err(s.err(
            input.len() as u64,
            format!(
                "{what}: the compressed stream decompresses to {} bytes, not the stated {expected}",
                out.len()
            ),
        ));
    }
    Ok(out)
}

/// zstd's largest block (`Block_Maximum_Size` is the smaller of this and
/// the window).
const ZSTD_MAX_BLOCK: u64 = 128 * 1024;
/// The window a zstd entry may ask for when its content is small: encoders
/// without the content size at hand use their level's default (up to 8 MiB
/// below level 20). Larger windows must be no larger than the content's
/// size rounded up to a power of two (what an encoder that knew it chose).
const ZSTD_WINDOW_FLOOR: u64 = 8 << 20;

/// Walks a zstd frame (flag `0x8000`): the frame header, then block headers
/// whose sizes must lie inside the stream, up to the last block and the
/// optional checksum; the frame's content size, where stated, must be the
/// entry's decompressed size, and the blocks must be able to produce that
/// many bytes. Returns the frame's window size (the decoder's buffer).
fn zstd_frame(s: &Region<'_>, expected: u64, what: &str) -> Result<u64> {
    let header = zstd_frame_header(s, expected, what)?;
    let window = header.window;
    let (mut at, most) = zstd_blocks(s, header.len, window.min(ZSTD_MAX_BLOCK), what)?;
    if header.checksum {
        s.range(at, 4, &format!("{what}: the zstd frame checksum"))?;
        at += 4;
    }
    if at != s.len() as u64 {
        return Err(s.err(
            at,
            format!(
                "{what}: the zstd frame ends at byte {at} but the entry states {} compressed bytes",
                s.len()
            ),
        ));
    }
    if most < expected {
        return Err(s.err(
            0,
            format!(
                "{what}: the zstd frame's blocks can make at most {most} bytes, not the stated {expected}"
            ),
        ));
    }
    Ok(window)
}

/// What a zstd frame header says.
#[derive(Debug, PartialEq, Eq)]
struct ZstdFrameHeader {
    /// Its length: the offset of the first block header.
    len: u64,
    /// The window size (the decoder's buffer).
    window: u64,
    /// Whether a 4-byte checksum follows the last block.
    checksum: bool,
}

/// The zstd frame header at the start of `s`: magic, no reserved bit, no
/// dictionary, a stated content size equal to `expected`, and a window no
/// larger than `expected` bytes of content can need.
fn zstd_frame_header(s: &Region<'_>, expected: u64, what: &str) -> Result<ZstdFrameHeader> {
    let magic = s.u32(0, &format!("{what}: the zstd frame's magic"))?;
    if magic != 0xFD2F_B528 {
        return Err(s.err(
            0,
            format!("{what}: a zstd-compressed entry does not start with a zstd frame (magic {magic:#x})"),
        ));
    }
    let fhd = s.u8(4, &format!("{what}: the zstd frame header"))?;
    if fhd & 0x08 != 0 {
        return Err(s.err(
            4,
            format!("{what}: the zstd frame header sets a reserved bit"),
        ));
    }
    let fcs_flag = fhd >> 6;
    let single_segment = fhd & 0x20 != 0;
    let checksum = fhd & 0x04 != 0;
    let dict_len = [0u64, 1, 2, 4][usize::from(fhd & 3)];
    if dict_len != 0 {
        return Err(s.err(
            4,
            format!("{what}: the zstd frame names a dictionary, which a fatbin entry cannot carry"),
        ));
    }
    let fcs_len = match (fcs_flag, single_segment) {
        (0, false) => 0u64,
        (0, true) => 1,
        (1, _) => 2,
        (2, _) => 4,
        _ => 8,
    };
    let window_descriptor = if single_segment {
        None
    } else {
        Some(s.u8(5, &format!("{what}: the zstd frame header"))?)
    };
    let at = 5 + u64::from(!single_segment) + dict_len;
    let fcs = s.range(at, fcs_len, &format!("{what}: the zstd frame header"))?;
    let content = match fcs_len {
        0 => None,
        1 => Some(u64::from(fcs.bytes[0])),
        2 => Some(u64::from(u16::from_le_bytes([fcs.bytes[0], fcs.bytes[1]])) + 256),
        4 => Some(u64::from(fcs.u32(0, what)?)),
        _ => Some(fcs.u64(0, what)?),
    };
    if let Some(c) = content
        && c != expected
    {
        return Err(s.err(
            at,
            format!("{what}: the zstd frame holds {c} bytes but the entry states {expected}"),
        ));
    }
    // A single-segment frame's window is its content size (stated, as
    // `fcs_len` is at least 1 there, and equal to `expected`).
    let window = match window_descriptor {
        None => expected,
        Some(d) => {
            let base = 1u64 << (10 + u32::from(d >> 3));
            base + (base / 8) * u64::from(d & 7)
        }
    };
    let window_cap = expected.next_power_of_two().max(ZSTD_WINDOW_FLOOR);
    if window > window_cap {
        return Err(s.err(
            5,
            format!(
                "{what}: the zstd frame asks for a {window}-byte window, more than the {window_cap} \
                 bytes that its {expected} bytes of content can need"
            ),
        ));
    }
    Ok(ZstdFrameHeader {
        len: at + fcs_len,
        window,
        checksum,
    })
}

/// The zstd blocks from `at` to the last: each one's size within the
/// limits (`block_max`: the frame's block limit) and its bytes inside `s`.
/// Returns the offset past the last block and the most the blocks can
/// produce (a raw or RLE block states its size, a compressed one makes at
/// most `block_max` bytes).
fn zstd_blocks(s: &Region<'_>, mut at: u64, block_max: u64, what: &str) -> Result<(u64, u64)> {
    let mut most = 0u64;
    loop {
        let hdr = s.array::<3>(at, &format!("{what}: a zstd block header"))?;
        let h = u32::from(hdr[0]) | u32::from(hdr[1]) << 8 | u32::from(hdr[2]) << 16;
        let last = h & 1 != 0;
        let block_type = (h >> 1) & 3;
        let block_size = u64::from(h >> 3);
        if block_size > ZSTD_MAX_BLOCK {
            return Err(s.err(
                at,
                format!("{what}: a zstd block of {block_size} bytes exceeds the 128 KiB limit"),
            ));
        }
        let (stored, produces) = match block_type {
            0 => (block_size, block_size),
            1 => (1, block_size),
            2 => (block_size, block_max),
            _ => {
                return Err(s.err(at, format!("{what}: a zstd block has the reserved type 3")));
            }
        };
        if block_type != 2 && block_size > block_max {
            return Err(s.err(
                at,
                format!(
                    "{what}: a zstd block of {block_size} bytes exceeds the frame's {block_max}-byte block limit"
                ),
            ));
        }
        most = most.saturating_add(produces);
        s.range(at + 3, stored, &format!("{what}: a zstd block"))?;
        at += 3 + stored;
        if last {
            return Ok((at, most));
        }
    }
}

/// Decompresses a zstd frame already walked by [`zstd_frame`] (which
/// returned its `window`), one block at a time, collecting at most
/// `expected` bytes: a frame that makes more is refused as soon as that is
/// seen (ruzstd keeps at most the window plus one block besides), one that
/// makes fewer, or is corrupt, is refused with the offset of the block the
/// decoder was reading.
fn zstd_decompress(s: &Region<'_>, expected: u64, window: u64, what: &str) -> Result<Vec<u8>> {
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
    use ruzstd::io::Read;

    let limit = usize::try_from(expected).map_err(|_| {
        s.err(
            0,
            format!("{what}: the decompressed size {expected} does not fit this machine's memory"),
        )
    })?;
    let decode = || -> std::result::Result<Vec<u8>, (u64, String)> {
        let mut src: &[u8] = s.bytes;
        let mut decoder = FrameDecoder::new();
        decoder.set_max_window_size(window);
        decoder
            .reset(&mut src)
            .map_err(|e| (0, format!("the zstd frame header: {e}")))?;
        let mut out: Vec<u8> = Vec::new();
        let mut block = 0usize;
        loop {
            let block_at = (s.len() - src.len()) as u64;
            let finished = decoder
                .decode_blocks(&mut src, BlockDecodingStrategy::UptoBlocks(1))
                .map_err(|e| (block_at, zstd_block_error(block, block_at, &e)))?;
            block += 1;
            // Collect what the decoder can give (all of it once finished).
            loop {
                let ready = decoder.can_collect();
                if ready == 0 {
                    break;
                }
                if ready > limit - out.len() {
                    return Err((
                        block_at,
                        format!(
                            "the zstd frame decompresses to more than the stated {expected} bytes \
                             (at least {} by block {block})",
                            out.len().saturating_add(ready)
                        ),
                    ));
                }
                let start = out.len();
                if out.capacity() < start + ready {
                    // Grow by doubling, never past the stated size.
                    let want = out.capacity().saturating_mul(2).clamp(start + ready, limit);
                    out.try_reserve_exact(want - start).map_err(|_| {
                        (
                            block_at,
                            format!("cannot allocate {want} bytes for the decompressed entry"),
                        )
                    })?;
                }
                out.resize(start + ready, 0);
                let got = decoder.read(&mut out[start..]).map_err(|e| {
                    (
                        block_at,
                        format!("collecting zstd block {block}'s bytes: {e}"),
                    )
                })?;
                out.truncate(start + got);
                if got == 0 {
                    break;
                }
            }
            if finished {
                break;
            }
        }
        if !src.is_empty() {
            return Err((
                (s.len() - src.len()) as u64,
                format!(
                    "the zstd frame ends {} bytes before the stated compressed size",
                    src.len()
                ),
            ));
        }
        if out.len() != limit {
            return Err((
                s.len() as u64,
                format!(
                    "the zstd frame decompresses to {} bytes, not the stated {expected}",
                    out.len()
                ),
            ));
        }
        Ok(out)
    };
    // ruzstd returns errors for corrupt input; a panic there (a bug) is
    // still reported as a refusal rather than unwinding into the caller.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err((at, problem))) => Err(s.err(at, format!("{what}: {problem}"))),
        Err(_) => Err(s.err(
            0,
            format!("{what}: the zstd decoder failed on this stream (an internal error in ruzstd)"),
        )),
    }
}

/// ruzstd's error for block `block` (its header at `at` in the stream), in
/// words (its own `Display` swaps "header" and "body").
fn zstd_block_error(
    block: usize,
    at: u64,
    e: &ruzstd::decoding::errors::FrameDecoderError,
) -> String {
    use ruzstd::decoding::errors::FrameDecoderError as E;
    match e {
        E::FailedToReadBlockBody(inner) => {
            format!(
                "the content of zstd block {block} (header at byte {at} of the stream) does not decode: {inner}"
            )
        }
        E::FailedToReadBlockHeader(inner) => {
            format!(
                "the header of zstd block {block} (at byte {at} of the stream) does not decode: {inner}"
            )
        }
        other => format!(
            "zstd block {block} (header at byte {at} of the stream) does not decode: {other}"
        ),
    }
}

// ---------------------------------------------------------------- PTX

/// PTX text: UTF-8 up to its NUL (or the end), with a `.version` directive.
/// `whole` says the text is the whole image: then only one trailing NUL is
/// allowed; inside a fatbin the payload is padded with NULs after the text.
fn ptx(r: &Region<'_>, whole: bool) -> Result<()> {
    let bytes = r.bytes;
    let text_len = match bytes.iter().position(|&b| b == 0) {
        Some(nul) => {
            if whole && nul + 1 != bytes.len() {
                return Err(r.err(
                    nul as u64,
                    "the PTX text holds a NUL byte before its end (the driver would stop reading there); is this a binary file?",
                ));
            }
            if !whole && bytes[nul..].iter().any(|&b| b != 0) {
                return Err(r.err(
                    nul as u64,
                    "the PTX entry holds a NUL byte followed by more text",
                ));
            }
            nul
        }
        None if whole => bytes.len(),
        None => {
            return Err(r.err(
                bytes.len() as u64,
                "the PTX entry's text is not NUL-terminated inside its payload",
            ));
        }
    };
    let text = std::str::from_utf8(&bytes[..text_len]).map_err(|e| {
        r.err(
            e.valid_up_to() as u64,
            if whole {
                "not a cubin (ELF), a fatbin (magic 0xBA55ED50) or PTX text: the bytes are not UTF-8 text; is this the right file?"
            } else {
                "the PTX entry's text is not UTF-8"
            },
        )
    })?;
    let has_version = text.lines().any(|l| {
        l.trim_start()
            .strip_prefix(".version")
            .is_some_and(|rest| rest.starts_with([' ', '\t']))
    });
    if !has_version {
        return Err(r.err(
            0,
            if whole {
                "not a cubin (ELF), a fatbin (magic 0xBA55ED50) or PTX text: no `.version` directive found; is this the right file?"
            } else {
                "the PTX entry has no `.version` directive"
            },
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cubin::*;
    use super::*;

    #[test]
    fn empty_unknown_and_wrapper_images_are_refused() {
        assert_eq!(check_image(b"").unwrap_err().offset, 0);
        assert!(check_image(b"hello").is_err());
        let wrapper = 0x4662_43B1u32.to_le_bytes();
        let e = check_image(&[&wrapper[..], &[0; 20]].concat()).unwrap_err();
        assert!(e.problem.contains("__fatBinC_Wrapper_t"), "{e}");
        assert!(check_image(b".version 9.0\n.target sm_90\n").is_ok());
        assert!(check_image(b".version 9.0\n.target sm_90\n\0").is_ok());
        let e = check_image(b".version 9.0\n\0.target sm_90\n").unwrap_err();
        assert_eq!(e.offset, 13);
    }

    #[test]
    fn lz_streams_are_checked() {
        // Literal "abcd", then a 4-byte match 4 back: "abcdabcd".
        let s = [0x40, b'a', b'b', b'c', b'd', 4, 0];
        let r = Region::whole(&s);
        assert_eq!(lz_decompress(&r, 8, "t").unwrap(), b"abcdabcd");
        assert!(lz_decompress(&r, 7, "t").is_err());
        let bad = [0x40, b'a', b'b', b'c', b'd', 5, 0];
        assert!(lz_decompress(&Region::whole(&bad), 8, "t").is_err());
    }

    // ---- The ELF passes, one test each, on a real sm_90 cubin (`readelf
    // -a` of it: 15 sections at 2464, 5 program headers at 3424, section 1
    // the section-name table, 3 the symbol table of 10 symbols linked to
    // the string table 2, 11 a relocation table for 4, 12 `.text.add_one`
    // whose function is symbol 8).

    const CUBIN: &[u8] = include_bytes!("../tests/fixtures/images/add_one.sm_90.cubin");
    const SHOFF: usize = 2464;
    const PHOFF: usize = 3424;
    const SYMTAB: usize = 0x2b8;

    /// The cubin with `width` bytes at `at` set to `value`.
    fn patched(at: usize, width: usize, value: u64) -> Vec<u8> {
        let mut v = CUBIN.to_vec();
        v[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
        v
    }

    /// Passes 1 to 3 over `image`.
    fn sections(image: &[u8]) -> Result<Sections<'_>> {
        let r = Region::whole(image);
        section_table(&r, &elf_header(&r, "cubin")?)
    }

    /// The error's offset and problem.
    fn refusal<T>(result: Result<T>) -> (usize, String) {
        match result {
            Ok(_) => panic!("expected a refusal"),
            Err(e) => (e.offset, e.problem),
        }
    }

    #[test]
    fn elf_header_reads_the_header_of_a_cuda_elf64() {
        let header = elf_header(&Region::whole(CUBIN), "cubin").unwrap();
        assert_eq!(
            header,
            ElfHeader {
                phoff: PHOFF as u64,
                phentsize: 56,
                phnum: 5,
                shoff: SHOFF as u64,
                shentsize: 64,
                shnum: 15,
                shstrndx: 1,
            }
        );
        let check = |v: &[u8]| refusal(elf_header(&Region::whole(v), "cubin"));
        assert_eq!(
            check(&patched(4, 1, 1)),
            (
                4,
                "ELF class 1 is not ELF64 (2); the driver loads 64-bit cubins".into()
            )
        );
        assert_eq!(check(&patched(5, 1, 2)).0, 5);
        assert_eq!(check(&patched(6, 1, 0)).0, 6);
        assert_eq!(
            check(&patched(18, 2, 62)),
            (
                18,
                "e_machine is 62, not EM_CUDA (190): this ELF is not a cubin".into()
            )
        );
        assert_eq!(check(&patched(52, 2, 40)).0, 52);
        let (_, problem) = check(&CUBIN[..63]);
        assert!(
            problem.contains("the 64-byte ELF header of the cubin"),
            "{problem}"
        );
    }

    #[test]
    fn program_headers_keep_every_segment_inside_the_image() {
        let r = Region::whole(CUBIN);
        let header = elf_header(&r, "cubin").unwrap();
        program_headers(&r, &header).unwrap();
        // Segment 2 (the code at 0x600) made 4 KiB long.
        let v = patched(PHOFF + 2 * 56 + 32, 8, 4096);
        let (at, problem) = refusal(program_headers(&Region::whole(&v), &header));
        assert_eq!(at, PHOFF + 2 * 56 + 8);
        assert_eq!(
            problem,
            "program header 2: segment at offset 1536 of 4096 bytes runs past the end of the 3704 bytes"
        );
        let odd = ElfHeader {
            phentsize: 32,
            ..header
        };
        assert_eq!(refusal(program_headers(&r, &odd)).0, 54);
        // No program headers: their table is not read.
        let none = ElfHeader {
            phnum: 0,
            phoff: u64::MAX,
            ..header
        };
        program_headers(&r, &none).unwrap();
    }

    #[test]
    fn section_table_checks_every_section_header() {
        let s = sections(CUBIN).unwrap();
        assert_eq!(s.list.len(), 15);
        assert_eq!((s.list[3].kind, s.list[3].link), (SHT_SYMTAB, 2));
        assert_eq!((s.list[13].kind, s.list[12].info), (SHT_NOBITS, 8));
        assert_eq!(s.table.base, SHOFF);
        let v = patched(SHOFF + 12 * 64 + 40, 4, 15);
        assert_eq!(
            refusal(sections(&v)),
            (
                SHOFF + 12 * 64 + 40,
                "section 12: sh_link 15 is not a section index (there are 15)".into()
            )
        );
        let v = patched(SHOFF + 4 * 64 + 56, 8, 1 << 20);
        let (at, problem) = refusal(sections(&v));
        assert_eq!(at, SHOFF + 4 * 64 + 56);
        assert!(problem.contains("not a sane entry size"), "{problem}");
        let v = patched(SHOFF + 4 * 64 + 32, 8, 4096);
        let (at, problem) = refusal(sections(&v));
        assert_eq!(at, SHOFF + 4 * 64 + 24);
        assert!(problem.contains("section 4: its 4096 bytes"), "{problem}");
        let (at, problem) = refusal(sections(&patched(60, 2, 0)));
        assert_eq!(at, 60);
        assert!(problem.contains("extended section numbering"), "{problem}");
        assert_eq!(refusal(sections(&patched(58, 2, 40))).0, 58);
    }

    #[test]
    fn string_tables_end_with_nul_and_hold_every_section_name() {
        sections(CUBIN).unwrap().string_tables(1).unwrap();
        let s = sections(CUBIN).unwrap();
        assert_eq!(
            refusal(s.string_tables(3)),
            (
                SHOFF + 3 * 64 + 4,
                "the section-name table (section 3) has type 0x2, not SHT_STRTAB".into()
            )
        );
        assert_eq!(
            refusal(s.string_tables(15)).1,
            "e_shstrndx 15 is not a section index (there are 15)"
        );
        // The last byte of .strtab (section 2, 0x149 bytes at 0x16e).
        let v = patched(0x16e + 0x148, 1, u64::from(b'x'));
        assert_eq!(
            refusal(sections(&v).unwrap().string_tables(1)),
            (
                0x16e + 0x148,
                "string table (section 2) does not end with a NUL".into()
            )
        );
        let v = patched(SHOFF + 4 * 64, 4, 0x107);
        assert_eq!(
            refusal(sections(&v).unwrap().string_tables(1)),
            (
                SHOFF + 4 * 64,
                "section 4: name offset 263 is outside the 263-byte section-name table".into()
            )
        );
    }

    #[test]
    fn symbol_tables_check_names_sections_and_function_extents() {
        assert_eq!(sections(CUBIN).unwrap().symbol_tables().unwrap(), [(3, 10)]);
        let v = patched(SYMTAB + 5 * 24 + 6, 2, 99);
        assert_eq!(
            refusal(sections(&v).unwrap().symbol_tables()),
            (
                SYMTAB + 5 * 24 + 6,
                "symbol 5: section index 99 does not exist (there are 15)".into()
            )
        );
        // add_one (symbol 8) made longer than its 384-byte section.
        let v = patched(SYMTAB + 8 * 24 + 16, 8, 385);
        assert_eq!(
            refusal(sections(&v).unwrap().symbol_tables()),
            (
                SYMTAB + 8 * 24 + 8,
                "function symbol 8: bytes 0..+385 lie outside its 384-byte section 12".into()
            )
        );
        let v = patched(SYMTAB + 8 * 24, 4, 0x149);
        let (at, problem) = refusal(sections(&v).unwrap().symbol_tables());
        assert_eq!(at, SYMTAB + 8 * 24);
        assert!(
            problem.contains("outside its 329-byte string table"),
            "{problem}"
        );
        let v = patched(SHOFF + 3 * 64 + 56, 8, 16);
        assert_eq!(
            refusal(sections(&v).unwrap().symbol_tables()).0,
            SHOFF + 3 * 64 + 56
        );
    }

    #[test]
    fn relocations_name_existing_symbols_and_offsets_inside_their_target() {
        let symbols = vec![(3, 10)];
        sections(CUBIN).unwrap().relocations(&symbols).unwrap();
        // The one relocation (at 0x598) names symbol 8 at offset 0x44 of
        // .debug_frame (0x68 bytes).
        let s = sections(CUBIN).unwrap();
        assert_eq!(
            refusal(s.relocations(&vec![(3, 8)])),
            (
                0x598 + 8,
                "relocation 0: symbol 8 does not exist (the table has 8)".into()
            )
        );
        assert_eq!(
            refusal(s.relocations(&vec![])),
            (
                SHOFF + 11 * 64 + 40,
                "relocation table (section 11): sh_link 3 is not a symbol table".into()
            )
        );
        let v = patched(0x598, 8, 0x68);
        assert_eq!(
            refusal(sections(&v).unwrap().relocations(&symbols)),
            (
                0x598,
                "relocation 0: offset 104 is outside its 104-byte target section 4".into()
            )
        );
    }

    #[test]
    fn section_infos_stay_inside_what_they_index_or_count() {
        let symbols = vec![(3, 10)];
        sections(CUBIN).unwrap().section_infos(&symbols).unwrap();
        let info = |section: usize, value: u64| {
            let v = patched(SHOFF + section * 64 + 44, 4, value);
            sections(&v)
                .unwrap()
                .section_infos(&symbols)
                .map_err(|e| e.problem)
        };
        // A code section's function symbol: low 24 bits; the high 8 are free.
        assert_eq!(info(12, 0x0400_0008), Ok(()));
        assert_eq!(
            info(12, 10),
            Err(
                "section 12: sh_info 10 is out of range (there are 10 symbols in its symbol table)"
                    .into()
            )
        );
        // The symbol table's local-symbol count.
        assert_eq!(info(3, 10), Ok(()));
        assert_eq!(
            info(3, 11),
            Err("section 3: sh_info 11 is out of range (there are 10 symbols)".into())
        );
        // Any other section's sh_info is a section index.
        assert_eq!(
            info(14, 15),
            Err("section 14: sh_info 15 is out of range (there are 15 sections)".into())
        );
    }

    #[test]
    fn notes_and_attributes_tile_their_sections_and_name_existing_symbols() {
        let s = sections(CUBIN).unwrap();
        s.notes_and_attributes(&vec![(3, 10)]).unwrap();
        // With no symbol table, a symbol-naming .nv.info record is refused.
        let (_, problem) = refusal(s.notes_and_attributes(&vec![]));
        assert!(problem.contains("but the symbol table has 0"), "{problem}");
        // The first note of section 5 (at 0x410) with a 4 KiB name.
        let v = patched(0x410, 4, 4096);
        let (_, problem) = refusal(sections(&v).unwrap().notes_and_attributes(&vec![(3, 10)]));
        assert!(
            problem.contains("note in section 5: name and descriptor"),
            "{problem}"
        );
    }

    /// A zstd frame of `blocks` RLE blocks of 1024 dots, with frame header
    /// descriptor `fhd` and then `header` (window descriptor, content size).
    fn zstd(fhd: u8, header: &[u8], blocks: usize) -> Vec<u8> {
        let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, fhd];
        f.extend_from_slice(header);
        for i in 0..blocks {
            let h = u32::from(i + 1 == blocks) | 1 << 1 | 1024 << 3;
            f.extend_from_slice(&h.to_le_bytes()[..3]);
            f.push(b'.');
        }
        f
    }

    #[test]
    fn zstd_frame_headers_state_window_content_and_checksum() {
        let header = |f: &[u8], expected| zstd_frame_header(&Region::whole(f), expected, "t");
        // Window descriptor 0: 1 KiB; no content size.
        assert_eq!(
            header(&zstd(0, &[0], 1), 4096).unwrap(),
            ZstdFrameHeader {
                len: 6,
                window: 1024,
                checksum: false
            }
        );
        // Single segment, 1-byte content size 100: the window is the content.
        assert_eq!(
            header(&zstd(0x24, &[100], 1), 100).unwrap(),
            ZstdFrameHeader {
                len: 6,
                window: 100,
                checksum: true
            }
        );
        let e = header(&zstd(0x20, &[100], 1), 99).unwrap_err();
        assert_eq!(
            (e.offset, e.problem.as_str()),
            (
                5,
                "t: the zstd frame holds 100 bytes but the entry states 99"
            )
        );
        let e = header(&zstd(0x08, &[0], 1), 1024).unwrap_err();
        assert_eq!(e.problem, "t: the zstd frame header sets a reserved bit");
        assert!(header(&zstd(0x01, &[0], 1), 1024).is_err());
        // A 2 TiB window for 4 KiB.
        let e = header(&zstd(0, &[31 << 3], 1), 4096).unwrap_err();
        assert!(
            e.problem.contains("2199023255552-byte window"),
            "{}",
            e.problem
        );
    }

    #[test]
    fn zstd_blocks_are_walked_to_the_last_within_their_limits() {
        let f = zstd(0, &[0], 3);
        assert_eq!(
            zstd_blocks(&Region::whole(&f), 6, 1024, "t").unwrap(),
            (18, 3072)
        );
        // Without the last block.
        assert!(zstd_blocks(&Region::whole(&f[..14]), 6, 1024, "t").is_err());
        let e = zstd_blocks(&Region::whole(&f), 6, 512, "t").unwrap_err();
        assert_eq!(
            (e.offset, e.problem.as_str()),
            (
                6,
                "t: a zstd block of 1024 bytes exceeds the frame's 512-byte block limit"
            )
        );
        let mut f = f;
        f[10] |= 3 << 1;
        let e = zstd_blocks(&Region::whole(&f), 6, 1024, "t").unwrap_err();
        assert_eq!(
            (e.offset, e.problem.as_str()),
            (10, "t: a zstd block has the reserved type 3")
        );
    }
}
