//! The parameter layout each kernel of a cubin declares in its own
//! `.nv.info.<kernel>` section, read without the driver.
//!
//! A kernel's attribute records (see [`nv_info`](super::cubin::nv_info) for their
//! framing) hold one `EIATTR_KPARAM_INFO` record per parameter (attribute
//! `0x17`, 12 bytes: a table index, the parameter's ordinal, its byte
//! offset, and a flags word whose top 14 bits are its size in bytes) and
//! one `EIATTR_CBANK_PARAM_SIZE` record (attribute `0x19`, a 2-byte value:
//! the bytes of all parameters). A layout is given only when these agree
//! with each other: ordinals 0 to n−1 each once, each parameter after the
//! one before it with less than 16 bytes of padding between them, and the
//! last one ending where the total says. Anything else (a 14-bit size that
//! wrapped, a record missing) gives no layout for that kernel, and the
//! caller asks the driver instead.

use super::cubin::{ElfHeader, SHT_CUDA_INFO, Sections, elf_header, section_table};
use super::region::Region;

/// One parameter's byte offset and size. (Plain numbers: the image reader
/// imports nothing of the crate's parameter types, which import the error
/// type that imports this file's.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Byte offset.
    pub(crate) offset: usize,
    /// Size in bytes.
    pub(crate) size: usize,
}

/// `EIATTR_KPARAM_INFO`: one parameter's ordinal, offset and size.
const KPARAM_INFO: u8 = 0x17;
/// `EIATTR_CBANK_PARAM_SIZE`: the bytes of all parameters.
const CBANK_PARAM_SIZE: u8 = 0x19;
/// The record format with a 2-byte value in the header.
const FORMAT_HALF: u8 = 3;
/// The record format with a 2-byte size and that many bytes.
const FORMAT_SIZED: u8 = 4;
/// The most padding the layout allows between two parameters (alignment
/// up to 16 bytes); more means a size field that wrapped.
const MAX_PADDING: usize = 15;

/// The parameter layouts a cubin's kernels declare, sorted by kernel name.
#[derive(Debug, Clone, Default)]
pub(crate) struct CubinLayouts(Vec<(String, Vec<Slot>)>);

impl CubinLayouts {
    /// The layout kernel `name` declares, if the cubin gave a consistent one.
    pub(crate) fn get(&self, name: &str) -> Option<&[Slot]> {
        let i = self
            .0
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()?;
        Some(&self.0[i].1)
    }
}

/// The layouts of every kernel of `image` when it is an ELF cubin (none for
/// a fatbin, PTX or an image this cannot read).
pub(crate) fn cubin_layouts(image: &[u8]) -> CubinLayouts {
    if !image.starts_with(b"\x7fELF") {
        return CubinLayouts::default();
    }
    let r = Region::whole(image);
    let Ok(header) = elf_header(&r, "cubin") else {
        return CubinLayouts::default();
    };
    let Ok(sections) = section_table(&r, &header) else {
        return CubinLayouts::default();
    };
    let mut out: Vec<_> = kernels(&sections, &header)
        .filter_map(|(name, records)| Some((name, layout(&records)?)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    CubinLayouts(out)
}

/// Each `.nv.info.<kernel>` section: the kernel's name and its records.
fn kernels<'s, 'a>(
    sections: &'s Sections<'a>,
    header: &ElfHeader,
) -> impl Iterator<Item = (String, Region<'a>)> + 's {
    let names = sections
        .list
        .get(usize::from(header.shstrndx))
        .and_then(|s| sections.bytes_of(s).ok());
    sections.list.iter().filter_map(move |s| {
        if s.kind != SHT_CUDA_INFO {
            return None;
        }
        let name = c_str(names?.bytes, s.name as usize)?;
        let kernel = name.strip_prefix(".nv.info.")?;
        if kernel.is_empty() {
            return None;
        }
        Some((kernel.to_string(), sections.bytes_of(s).ok()?))
    })
}

/// The NUL-terminated UTF-8 string at `at` of `table`.
fn c_str(table: &[u8], at: usize) -> Option<&str> {
    let rest = table.get(at..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// The layout one kernel's records declare, if they agree with each other.
fn layout(records: &Region<'_>) -> Option<Vec<Slot>> {
    let mut params: Vec<(u16, Slot)> = Vec::new();
    let mut total = None;
    let mut at = 0u64;
    let what = "a parameter record";
    while at < records.len() as u64 {
        let format = records.u8(at, what).ok()?;
        let attr = records.u8(at + 1, what).ok()?;
        let half = records.u16(at + 2, what).ok()?;
        let body = if format == FORMAT_SIZED {
            u64::from(half)
        } else {
            0
        };
        match (format, attr) {
            (FORMAT_SIZED, KPARAM_INFO) if half == 12 => {
                let ordinal = records.u16(at + 8, what).ok()?;
                let offset = usize::from(records.u16(at + 10, what).ok()?);
                let size = (records.u32(at + 12, what).ok()? >> 18) as usize;
                params.push((ordinal, Slot { offset, size }));
            }
            (FORMAT_HALF, CBANK_PARAM_SIZE) => total = Some(usize::from(half)),
            (1..=4, _) => {}
            _ => return None,
        }
        at += 4 + body;
    }
    params.sort_by_key(|p| p.0);
    consistent(&params, total)
}

/// The slots in ordinal order when they tile the parameter space as a
/// compiler lays it out and end at `total`.
fn consistent(params: &[(u16, Slot)], total: Option<usize>) -> Option<Vec<Slot>> {
    let mut end = 0usize;
    for (i, (ordinal, slot)) in params.iter().enumerate() {
        let gap = slot.offset.checked_sub(end)?;
        if usize::from(*ordinal) != i || slot.size == 0 || gap > MAX_PADDING {
            return None;
        }
        end = slot.offset + slot.size;
    }
    (total.unwrap_or(0) == end).then(|| params.iter().map(|p| p.1).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(offset: usize, size: usize) -> Slot {
        Slot { offset, size }
    }

    /// One `KPARAM_INFO` record.
    fn kparam(ordinal: u16, offset: u16, size: u32) -> Vec<u8> {
        let mut r = vec![FORMAT_SIZED, KPARAM_INFO, 12, 0, 0, 0, 0, 0];
        r.extend(ordinal.to_le_bytes());
        r.extend(offset.to_le_bytes());
        r.extend(((size << 18) | 0x1f000).to_le_bytes());
        r
    }

    fn total(bytes: u16) -> Vec<u8> {
        let mut r = vec![FORMAT_HALF, CBANK_PARAM_SIZE];
        r.extend(bytes.to_le_bytes());
        r
    }

    fn parse(records: &[u8]) -> Option<Vec<Slot>> {
        layout(&Region::whole(records))
    }

    #[test]
    fn records_in_any_order_give_the_layout_in_ordinal_order() {
        // As nvcc writes them: last parameter first.
        let r = [kparam(1, 8, 4), kparam(0, 0, 8), total(12)].concat();
        assert_eq!(parse(&r), Some(vec![slot(0, 8), slot(8, 4)]));
        assert_eq!(parse(&total(0)), Some(vec![]));
        assert_eq!(parse(&[]), Some(vec![]));
    }

    #[test]
    fn records_that_disagree_give_no_layout() {
        // The total says more than the parameters hold: one is missing.
        assert_eq!(parse(&[kparam(0, 0, 8), total(12)].concat()), None);
        // An ordinal twice, or one skipped.
        let twice = [kparam(0, 0, 8), kparam(0, 8, 4), total(12)].concat();
        assert_eq!(parse(&twice), None);
        let skipped = [kparam(0, 0, 8), kparam(2, 8, 4), total(12)].concat();
        assert_eq!(parse(&skipped), None);
        // Overlapping parameters, or a gap no alignment explains (a size of
        // 16 KiB or more wraps the 14-bit field).
        let overlap = [kparam(0, 0, 8), kparam(1, 4, 8), total(12)].concat();
        assert_eq!(parse(&overlap), None);
        let wrapped = [kparam(0, 0, 16384 + 8), kparam(1, 16392, 4)].concat();
        let wrapped = [wrapped, total(16396)].concat();
        assert_eq!(parse(&wrapped), None);
        // A zero size, an unknown record format, a record cut short.
        assert_eq!(parse(&[kparam(0, 0, 0), total(0)].concat()), None);
        assert_eq!(parse(&[9, 0x17, 0, 0]), None);
        assert_eq!(parse(&kparam(0, 0, 8)[..10]), None);
    }

    const ADD_ONE_CUBIN: &[u8] = include_bytes!("../../tests/fixtures/images/add_one.sm_90.cubin");

    #[test]
    fn nvccs_cubin_gives_each_kernels_layout() {
        // add_one(int *data, unsigned int n), compiled by the pinned nvcc 13.0.88
        // (cuobjdump -elf: ordinal 0 at 0 of 8 bytes, ordinal 1 at 8 of 4).
        let l = cubin_layouts(ADD_ONE_CUBIN);
        assert_eq!(l.0.len(), 1, "{l:?}");
        assert_eq!(l.get("add_one"), Some(&[slot(0, 8), slot(8, 4)][..]));
        assert_eq!(l.get("add_on"), None);
        // Fatbins and PTX give none: the driver is asked for those.
        let fatbin = include_bytes!("../../tests/fixtures/images/add_one.fatbin");
        assert!(cubin_layouts(fatbin).0.is_empty());
        let ptx = include_bytes!("../../tests/fixtures/images/add_one.ptx");
        assert!(cubin_layouts(ptx).0.is_empty());
    }

    #[test]
    fn corrupted_cubins_never_panic_and_give_only_consistent_layouts() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for len in (0..ADD_ONE_CUBIN.len()).step_by(7) {
            cubin_layouts(&ADD_ONE_CUBIN[..len]);
        }
        for _ in 0..3000 {
            let mut b = ADD_ONE_CUBIN.to_vec();
            for _ in 0..1 + next() % 4 {
                let at = (next() % b.len() as u64) as usize;
                b[at] = next() as u8;
            }
            for (_, layout) in &cubin_layouts(&b).0 {
                let mut end = 0;
                for s in layout.iter() {
                    assert!(s.size > 0 && s.offset >= end && s.offset - end <= MAX_PADDING);
                    end = s.offset + s.size;
                }
            }
        }
    }

    #[test]
    fn padding_for_alignment_is_allowed() {
        // A 4-byte int, then an 8-byte pointer aligned to 8.
        let r = [kparam(0, 0, 4), kparam(1, 8, 8), total(16)].concat();
        assert_eq!(parse(&r), Some(vec![slot(0, 4), slot(8, 8)]));
    }
}
