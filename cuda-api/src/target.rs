//! What an image is built for and what runs it, as plain values: a
//! compute capability, a PTX ISA version (and the newest one each driver
//! release compiles), an image's target, and [`NoImageError`], what
//! [`choose_image`](crate::choose_image) says when none fits. A leaf: it
//! reads images through `image` alone, so `error` can name its error.

use std::fmt;

use crate::image::{self, ImageError, ImageKind};

/// The newest PTX ISA each driver release accepts: the PTX ISA of its CUDA
/// release, from the "PTX Release History" table of NVIDIA's PTX ISA
/// release notes
/// (<https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes-ptx-release-history>,
/// which `cuda.bindings.utils.get_minimal_required_cuda_ver_from_ptx_ver`
/// also follows, up to 9.1) and, for the releases after, each release's
/// own PTX ISA document (the `docs/cuda/archive/<release>/parallel-thread-execution`
/// pages: 13.4.1's is "v9.4"). Checked against NVRTC's output: the pip
/// wheels of NVRTC 12.0.76, 12.4.127, 12.8.93 and 13.5.37 write `.version`
/// 8.0, 8.4, 8.7 and 9.5, and nvcc 13.0.88 writes 9.0. CUDA 12.6 kept 8.5;
/// 12.7 (PTX ISA 8.6) had no toolkit release, but drivers of the R565
/// branch report it.
/// 13.2 and 13.3 follow the rule every 13.x release has kept (ISA 9.N for
/// CUDA 13.N); no page of theirs was at hand to cite.
const PTX_ISA_BY_DRIVER: &[(i32, &str)] = &[
    (12000, "8.0"),
    (12010, "8.1"),
    (12020, "8.2"),
    (12030, "8.3"),
    (12040, "8.4"),
    (12050, "8.5"),
    (12060, "8.5"),
    (12070, "8.6"),
    (12080, "8.7"),
    (12090, "8.8"),
    (13000, "9.0"),
    (13010, "9.1"),
    (13020, "9.2"),
    (13030, "9.3"),
    (13040, "9.4"),
    (13050, "9.5"),
];

/// The newest PTX ISA a driver of CUDA version `driver` accepts, where known.
pub(crate) fn max_ptx_isa(driver: i32) -> Option<&'static str> {
    PTX_ISA_BY_DRIVER
        .iter()
        .rev()
        .find(|(v, _)| *v <= driver)
        .filter(|(v, _)| driver - v < 100)
        .map(|(_, isa)| *isa)
}

/// The PTX ISA that CUDA release `version` writes (its nvcc and NVRTC), for a
/// release in the table only: a later release may write a newer one.
pub(crate) fn ptx_isa_written_by(version: i32) -> Option<PtxIsa> {
    PTX_ISA_BY_DRIVER
        .iter()
        .find(|(v, _)| *v == version)
        .and_then(|(_, isa)| PtxIsa::parse(isa))
}

/// A compute capability, e.g. 9.0 for an H100/H200, 12.0 for an RTX 50 GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    /// The major version (the architecture generation).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl ComputeCapability {
    /// Compute capability `major.minor`.
    ///
    /// ```
    /// let cc = cuda_api::ComputeCapability::new(8, 9);
    /// assert_eq!(cc.to_string(), "8.9");
    /// assert_eq!(cc.sm(), "sm_89");
    /// ```
    pub const fn new(major: u32, minor: u32) -> Self {
        ComputeCapability { major, minor }
    }

    /// The architecture name nvcc uses, e.g. `sm_90`.
    pub fn sm(&self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }

    /// Reads `sm_XY`/`smXY` (the `sm` and `_` optional), e.g. `sm_90`,
    /// `sm100`, `86`. Returns `None` for anything else.
    ///
    /// ```
    /// use cuda_api::ComputeCapability;
    /// assert_eq!(ComputeCapability::parse_sm("sm100"), Some(ComputeCapability::new(10, 0)));
    /// assert_eq!(ComputeCapability::parse_sm("sm_75"), Some(ComputeCapability::new(7, 5)));
    /// assert_eq!(ComputeCapability::parse_sm("sm_9"), None);
    /// ```
    pub fn parse_sm(text: &str) -> Option<Self> {
        let digits = text.strip_prefix("sm").unwrap_or(text);
        let digits = digits.strip_prefix('_').unwrap_or(digits);
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u32 = digits.parse().ok()?;
        Some(ComputeCapability::new(n / 10, n % 10))
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A PTX ISA version (the `.version` directive), e.g. 9.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PtxIsa {
    /// The major version.
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl PtxIsa {
    /// PTX ISA `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        PtxIsa { major, minor }
    }

    /// Reads `X.Y`, e.g. `9.4`.
    ///
    /// ```
    /// assert_eq!(cuda_api::PtxIsa::parse("9.4"), Some(cuda_api::PtxIsa::new(9, 4)));
    /// assert_eq!(cuda_api::PtxIsa::parse("nine"), None);
    /// ```
    pub fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once('.')?;
        Some(PtxIsa::new(major.parse().ok()?, minor.parse().ok()?))
    }

    /// The newest PTX ISA the JIT of a driver of CUDA version
    /// `driver_version` (as [`driver_version`](crate::driver_version) gives
    /// it, e.g. 13000) compiles, from NVIDIA's PTX ISA release notes; `None`
    /// for a release this crate has no record of.
    ///
    /// ```
    /// use cuda_api::PtxIsa;
    /// assert_eq!(PtxIsa::accepted_by(13000), Some(PtxIsa::new(9, 0)));
    /// assert_eq!(PtxIsa::accepted_by(12080), Some(PtxIsa::new(8, 7)));
    /// ```
    pub fn accepted_by(driver_version: i32) -> Option<Self> {
        max_ptx_isa(driver_version).and_then(PtxIsa::parse)
    }
}

impl fmt::Display for PtxIsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Which devices a cubin of an architecture runs on, by the suffix of its
/// target (`sm_90`, `sm_90a`, `sm_100f`), after NVIDIA's feature sets
/// (CUDA Programming Guide, "Feature Availability"; the family-specific
/// set came with CUDA 12.9, see NVIDIA's blog post "NVIDIA Blackwell and
/// NVIDIA CUDA 12.9 Introduce Family-Specific Architecture Features").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[non_exhaustive]
pub enum ArchVariant {
    /// No suffix (`sm_90`): runs on devices of the same major version and
    /// an equal or higher minor one (8.0 code on 8.6, 10.0 on 10.3).
    #[default]
    Generic,
    /// `f`, family-specific (`sm_100f`): the same devices as
    /// [`ArchVariant::Generic`], the family of that major version from the
    /// cubin's minor up (`sm_100f` on 10.0 and 10.3, `sm_103f` on 10.3 only).
    Family,
    /// `a`, architecture-specific (`sm_90a`, `sm_100a`): exactly that
    /// compute capability (`sm_100a` on 10.0, not on 10.3).
    Specific,
}

impl ArchVariant {
    /// The suffix: `""`, `"f"` or `"a"`.
    pub const fn suffix(self) -> &'static str {
        match self {
            ArchVariant::Generic => "",
            ArchVariant::Family => "f",
            ArchVariant::Specific => "a",
        }
    }

    /// Reads the architecture and suffix of `sm_XY[a|f]` / `smXY[a|f]`
    /// (the `sm` and `_` optional), e.g. a Warp image's `sm100a`.
    ///
    /// ```
    /// use cuda_api::{ArchVariant, ComputeCapability as Cc};
    /// assert_eq!(ArchVariant::parse_sm("sm100a"), Some((Cc::new(10, 0), ArchVariant::Specific)));
    /// assert_eq!(ArchVariant::parse_sm("sm_120f"), Some((Cc::new(12, 0), ArchVariant::Family)));
    /// assert_eq!(ArchVariant::parse_sm("sm_90"), Some((Cc::new(9, 0), ArchVariant::Generic)));
    /// assert_eq!(ArchVariant::parse_sm("sm_90x"), None);
    /// ```
    pub fn parse_sm(text: &str) -> Option<(ComputeCapability, ArchVariant)> {
        let (digits, variant) = match text.as_bytes().last() {
            Some(b'a') => (&text[..text.len() - 1], ArchVariant::Specific),
            Some(b'f') => (&text[..text.len() - 1], ArchVariant::Family),
            _ => (text, ArchVariant::Generic),
        };
        Some((ComputeCapability::parse_sm(digits)?, variant))
    }

    /// Whether a cubin for `arch` with this suffix runs on a device of
    /// compute capability `device`.
    ///
    /// ```
    /// use cuda_api::{ArchVariant, ComputeCapability as Cc};
    /// let (b200, b300) = (Cc::new(10, 0), Cc::new(10, 3));
    /// assert!(ArchVariant::Specific.runs_on(b200, b200));
    /// assert!(!ArchVariant::Specific.runs_on(b200, b300));
    /// assert!(ArchVariant::Family.runs_on(b200, b300));
    /// assert!(!ArchVariant::Family.runs_on(b300, b200));
    /// ```
    pub fn runs_on(self, arch: ComputeCapability, device: ComputeCapability) -> bool {
        match self {
            ArchVariant::Specific => arch == device,
            ArchVariant::Generic | ArchVariant::Family => {
                arch.major == device.major && arch.minor <= device.minor
            }
        }
    }
}

/// What an image was compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageTarget {
    /// A cubin: machine code for one architecture.
    Cubin {
        /// The architecture in the ELF header.
        arch: ComputeCapability,
        /// The suffix of its target (`a`, `f` or none), as far as the
        /// cubin says it (see [`ImageTarget::of`]); where it does not, the
        /// caller may know it from the file name
        /// ([`ArchVariant::parse_sm`]).
        variant: ArchVariant,
    },
    /// PTX text, compiled by the driver's JIT at load.
    Ptx {
        /// The `.target` (the lowest architecture it runs on).
        target: ComputeCapability,
        /// The `.version`.
        isa: PtxIsa,
    },
    /// A fatbin: the driver picks the entry that fits.
    Fatbin,
}

impl ImageTarget {
    /// Reads what `image` was compiled for: a cubin's architecture from its
    /// ELF header, PTX's `.target` and `.version`. The image is checked with
    /// [`check_image`](crate::check_image) first.
    ///
    /// A cubin's suffix (`sm_100a`, `sm_100f`) is not in the ELF header of
    /// the format of CUDA 12.8 and later: ptxas of CUDA 13.0 writes the
    /// same `e_flags` for `sm_100`, `sm_100a` and `sm_100f`. It is read
    /// from the `-arch sm_XY[a|f]` option that ptxas records in the cubin's
    /// `.note.nv.tkinfo` note; the older format's `EF_CUDA_ACCELERATORS`
    /// flag (bit 11) also marks `a`. A cubin with neither reads as
    /// [`ArchVariant::Generic`].
    ///
    /// ```
    /// use cuda_api::{ComputeCapability, ImageTarget, PtxIsa};
    /// let ptx = b"//\n.version 9.0\n.target sm_75\n.address_size 64\n";
    /// assert_eq!(
    ///     ImageTarget::of(ptx).unwrap(),
    ///     ImageTarget::Ptx { target: ComputeCapability::new(7, 5), isa: PtxIsa::new(9, 0) }
    /// );
    /// ```
    ///
    /// # Errors
    ///
    /// [`ImageError`] when the image fails [`check_image`](crate::check_image),
    /// or a cubin's ELF header names no architecture, or PTX lacks a
    /// readable `.target` or `.version`.
    pub fn of(image: &[u8]) -> Result<ImageTarget, ImageError> {
        let err = |offset: usize, problem: String| ImageError {
            call: "cuda_api::ImageTarget::of",
            offset,
            len: image.len(),
            problem,
        };
        match image::check_image(image).map_err(|e| e.in_call("cuda_api::ImageTarget::of"))? {
            ImageKind::Fatbin => Ok(ImageTarget::Fatbin),
            ImageKind::Cubin => {
                // check_image has read the whole ELF64 header (64 bytes).
                let flags = u32::from_le_bytes([image[48], image[49], image[50], image[51]]);
                // OS ABI 0x41 (the format of CUDA 12.8 and later) keeps the
                // architecture in bits 8..16; the older format in bits 0..8.
                let sm = if image[7] == 0x41 {
                    (flags >> 8) & 0xff
                } else {
                    flags & 0xff
                };
                if sm < 10 {
                    return Err(err(
                        48,
                        format!(
                            "the cubin's ELF e_flags 0x{flags:08x} name no GPU architecture (sm {sm}); rebuild it with nvcc -cubin"
                        ),
                    ));
                }
                let arch = ComputeCapability::new(sm / 10, sm % 10);
                // The older format marks an architecture-specific cubin
                // (sm_90a) with EF_CUDA_ACCELERATORS, bit 11 (LLVM's
                // BinaryFormat/ELF.h); the newer one does not mark it.
                let variant = if image[7] != 0x41 && flags & 0x800 != 0 {
                    ArchVariant::Specific
                } else {
                    recorded_variant(image, arch)
                };
                Ok(ImageTarget::Cubin { arch, variant })
            }
            ImageKind::Ptx => {
                let text = String::from_utf8_lossy(&image[..image.len().min(1 << 16)]);
                let directive = |name: &str| {
                    text.lines()
                        .map(str::trim)
                        .find_map(|l| l.strip_prefix(name).map(str::trim))
                };
                let isa = directive(".version").and_then(PtxIsa::parse);
                let target = directive(".target").and_then(|t| {
                    ComputeCapability::parse_sm(t.split([',', ' ']).next().unwrap_or(t))
                });
                match (target, isa) {
                    (Some(target), Some(isa)) => Ok(ImageTarget::Ptx { target, isa }),
                    _ => Err(err(
                        0,
                        "the PTX has no readable `.version X.Y` and `.target sm_XY` directives"
                            .into(),
                    )),
                }
            }
        }
    }
}

/// The suffix of the `-arch sm_XY[a|f]` option that ptxas records in a
/// cubin's tool-info note (`.note.nv.tkinfo`, whose text holds e.g.
/// `-arch sm_100a`), where it names `arch`; [`ArchVariant::Generic`]
/// otherwise. A plain byte search: the image was checked whole before.
fn recorded_variant(image: &[u8], arch: ComputeCapability) -> ArchVariant {
    const KEY: &[u8] = b"-arch sm_";
    let digits = format!("{}{}", arch.major, arch.minor);
    image
        .windows(KEY.len())
        .enumerate()
        .filter(|(_, w)| *w == KEY)
        .find_map(|(i, _)| {
            let rest = &image[i + KEY.len()..];
            let rest = rest.strip_prefix(digits.as_bytes())?;
            // The option ends at a space or NUL; a longer number is another
            // architecture.
            let (variant, next) = match rest.first() {
                Some(b'a') => (ArchVariant::Specific, rest.get(1)),
                Some(b'f') => (ArchVariant::Family, rest.get(1)),
                other => (ArchVariant::Generic, other),
            };
            matches!(next, None | Some(b' ' | b'\0')).then_some(variant)
        })
        .unwrap_or_default()
}

impl fmt::Display for ImageTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageTarget::Cubin { arch, variant } => {
                write!(f, "{}{} cubin", arch.sm(), variant.suffix())
            }
            ImageTarget::Ptx { target, isa } => write!(f, "PTX ISA {isa} for {}", target.sm()),
            ImageTarget::Fatbin => f.write_str("fatbin"),
        }
    }
}

/// No image of a module runs on the device: what the module holds and what
/// the device and driver need.
#[derive(Clone, PartialEq, Eq)]
pub struct NoImageError {
    /// The device's compute capability.
    pub device: ComputeCapability,
    /// The driver's CUDA version, e.g. 13000.
    pub driver_version: i32,
    /// The newest PTX ISA the driver compiles, where known.
    pub driver_max_isa: Option<PtxIsa>,
    /// Every image offered: a label (e.g. its file name) and its target.
    pub images: Vec<(String, ImageTarget)>,
}

impl fmt::Display for NoImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cuda = format!(
            "CUDA {}.{}",
            self.driver_version / 1000,
            (self.driver_version % 1000) / 10
        );
        write!(
            f,
            "no image runs on this device (compute capability {}, a {cuda} driver",
            self.device
        )?;
        match self.driver_max_isa {
            Some(isa) => write!(f, " whose JIT takes PTX ISA up to {isa})")?,
            None => f.write_str(")")?,
        }
        if self.images.is_empty() {
            f.write_str(": none was offered")?;
        } else {
            f.write_str(": ")?;
            for (i, (label, target)) in self.images.iter().enumerate() {
                if i > 0 {
                    f.write_str("; ")?;
                }
                let article = if matches!(target, ImageTarget::Cubin { .. }) {
                    "an "
                } else {
                    ""
                };
                write!(
                    f,
                    "{label} is {article}{target}, {}",
                    why_not(*target, self)
                )?;
            }
        }
        write!(
            f,
            ". Compile the module for {} (a cubin for that architecture)",
            self.device.sm()
        )?;
        let too_new = self
            .images
            .iter()
            .filter_map(|(_, t)| match t {
                ImageTarget::Ptx { target, isa } if *target <= self.device => Some(*isa),
                _ => None,
            })
            .min();
        if let Some(isa) = too_new {
            match driver_for_isa(isa) {
                Some(v) => write!(
                    f,
                    ", or run on a driver of CUDA {}.{} or newer, whose JIT takes PTX ISA {isa}",
                    v / 1000,
                    (v % 1000) / 10
                )?,
                None => write!(f, ", or run on a driver whose JIT takes PTX ISA {isa}")?,
            }
        }
        Ok(())
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for NoImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for NoImageError {}

/// Why `target` does not run on the error's device and driver.
fn why_not(target: ImageTarget, e: &NoImageError) -> String {
    match target {
        ImageTarget::Cubin {
            arch,
            variant: ArchVariant::Specific,
        } => format!(
            "which is architecture-specific and runs only on compute capability {arch} exactly"
        ),
        ImageTarget::Cubin { arch, .. } if arch.major != e.device.major => format!(
            "which runs only on compute capability {}.x from {arch}",
            arch.major
        ),
        ImageTarget::Cubin { arch, .. } => {
            format!(
                "which needs compute capability {arch} or a higher {}.x",
                arch.major
            )
        }
        ImageTarget::Ptx { target, .. } if target > e.device => {
            format!("which needs compute capability {target} or higher")
        }
        ImageTarget::Ptx { isa, .. } => match e.driver_max_isa {
            Some(max) => format!("newer than the driver's JIT takes (PTX ISA up to {max})"),
            None => format!("PTX ISA {isa}, which the driver's JIT does not take"),
        },
        ImageTarget::Fatbin => "a fatbin".into(),
    }
}

/// The oldest driver (CUDA version) whose JIT takes PTX ISA `isa`, where known.
fn driver_for_isa(isa: PtxIsa) -> Option<i32> {
    (12000..=20000)
        .step_by(10)
        .find(|v| PtxIsa::accepted_by(*v).is_some_and(|m| m >= isa))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each release of the table, and the ones between: a driver takes the
    /// ISA of its own release, a patch release (12.4.1 reports 12040 too)
    /// the same; an unknown older one nothing.
    #[test]
    fn the_jit_takes_the_isa_of_its_release_up_to_cuda_13_5() {
        let expect = [
            (12000, "8.0"),
            (12020, "8.2"),
            (12040, "8.4"),
            (12060, "8.5"),
            (12070, "8.6"),
            (12080, "8.7"),
            (12090, "8.8"),
            (13000, "9.0"),
            (13010, "9.1"),
            (13020, "9.2"),
            (13030, "9.3"),
            (13040, "9.4"),
            (13050, "9.5"),
        ];
        for (driver, isa) in expect {
            assert_eq!(max_ptx_isa(driver), Some(isa), "{driver}");
            assert_eq!(PtxIsa::accepted_by(driver), PtxIsa::parse(isa), "{driver}");
        }
        assert_eq!(max_ptx_isa(11080), None);
        // A 13.x release newer than the table takes at least 13.5's ISA.
        assert_eq!(max_ptx_isa(13060), Some("9.5"));
        // Sorted, and no release takes less than the one before.
        assert!(
            PTX_ISA_BY_DRIVER
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && PtxIsa::parse(w[0].1) <= PtxIsa::parse(w[1].1))
        );
        // The oldest driver that takes Warp 1.19's PTX (ISA 9.4) is CUDA 13.4.
        assert_eq!(driver_for_isa(PtxIsa::new(9, 4)), Some(13040));
        assert_eq!(driver_for_isa(PtxIsa::new(9, 5)), Some(13050));
        assert_eq!(driver_for_isa(PtxIsa::new(9, 6)), None);
    }
}
