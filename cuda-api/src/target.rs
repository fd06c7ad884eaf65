//! What an image is built for and what runs it, as plain values: a
//! compute capability, a PTX ISA version (and the newest one each driver
//! release compiles), an image's target, and [`NoImageError`], what
//! [`choose_image`](crate::choose_image) says when none fits. A leaf: it
//! reads images through `image` alone, so `error` can name its error.

use std::fmt;

use crate::image::{self, ImageError, ImageKind};

/// The newest PTX ISA each driver release accepts (from NVIDIA's PTX ISA release notes).
const PTX_ISA_BY_DRIVER: &[(i32, &str)] = &[
    (12000, "8.0"),
    (12010, "8.1"),
    (12020, "8.2"),
    (12030, "8.3"),
    (12040, "8.4"),
    (12050, "8.5"),
    (12060, "8.5"),
    (12080, "8.7"),
    (12090, "8.8"),
    (13000, "9.0"),
    (13010, "9.1"),
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

/// What an image was compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageTarget {
    /// A cubin: machine code for one architecture.
    Cubin {
        /// The architecture in the ELF header.
        arch: ComputeCapability,
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
                Ok(ImageTarget::Cubin {
                    arch: ComputeCapability::new(sm / 10, sm % 10),
                })
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

impl fmt::Display for ImageTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageTarget::Cubin { arch } => write!(f, "{} cubin", arch.sm()),
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
        ImageTarget::Cubin { arch } if arch.major != e.device.major => format!(
            "which runs only on compute capability {}.x from {arch}",
            arch.major
        ),
        ImageTarget::Cubin { arch } => {
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
