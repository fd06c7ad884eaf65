//! A part of an image with its offset from the image's start, read with
//! bounds checks (for errors that name the byte).

use super::error::{ImageError, Result};

/// A part of the image, with its offset from the image's start (for errors).
#[derive(Clone, Copy)]
pub(super) struct Region<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) base: usize,
}

impl<'a> Region<'a> {
    pub(super) fn whole(bytes: &'a [u8]) -> Self {
        Region { bytes, base: 0 }
    }

    pub(super) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// An error at `off` within this region.
    pub(super) fn err(&self, off: u64, problem: impl Into<String>) -> ImageError {
        let off = usize::try_from(off).unwrap_or(usize::MAX);
        ImageError::new(self.base.saturating_add(off), problem)
    }

    /// `len` bytes at `off`, which must lie inside the region.
    pub(super) fn range(&self, off: u64, len: u64, what: &str) -> Result<Region<'a>> {
        let end = off.checked_add(len).ok_or_else(|| {
            self.err(
                off,
                format!("{what}: offset {off} + size {len} overflows 64 bits"),
            )
        })?;
        if end > self.len() as u64 {
            return Err(self.err(
                off,
                format!(
                    "{what} (bytes {off}..{end}) runs past the end of its {} bytes",
                    self.len()
                ),
            ));
        }
        let (s, e) = (off as usize, end as usize);
        Ok(Region {
            bytes: &self.bytes[s..e],
            base: self.base + s,
        })
    }

    pub(super) fn array<const N: usize>(&self, off: u64, what: &str) -> Result<[u8; N]> {
        let r = self.range(off, N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(r.bytes);
        Ok(a)
    }

    pub(super) fn u8(&self, off: u64, what: &str) -> Result<u8> {
        Ok(self.array::<1>(off, what)?[0])
    }
    pub(super) fn u16(&self, off: u64, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(off, what)?))
    }
    pub(super) fn u32(&self, off: u64, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(off, what)?))
    }
    pub(super) fn u64(&self, off: u64, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(off, what)?))
    }
}
