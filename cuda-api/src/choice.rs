//! Choosing, among several images of one module (a cubin per GPU
//! architecture, PTX, fatbins), the one a device can run.
//!
//! The rule, in order (NVIDIA's compatibility rules, see the
//! [CUDA compatibility guide](https://docs.nvidia.com/deploy/cuda-compatibility/)
//! and the [PTX ISA release notes](https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes)):
//! 1. a cubin for exactly the device's compute capability;
//! 2. else a cubin of the same major version and a lower minor one (binary
//!    compatibility holds within a major version, upwards), the highest such;
//! 3. else a fatbin (the driver picks inside it);
//! 4. else PTX whose target is not above the device and whose ISA version the
//!    driver can compile (its JIT takes PTX up to the ISA of its own CUDA
//!    release), the highest target;
//! 5. else [`NoImageError`], listing every image held and what the device and
//!    driver would need.

use std::fmt;

use crate::device::{CudaDevice, driver_version};
use crate::error::{CudaError, CudaResult};
use crate::image::{self, ImageError, ImageKind};
use crate::module::max_ptx_isa;

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

/// How well an image fits, higher is better; `None`: it does not run.
type Score<'a> = dyn Fn(&ImageTarget) -> Option<(u32, u32, u32)> + 'a;

/// Chooses the image of `images` (labels and targets) that a device of
/// compute capability `device` runs with a driver of CUDA version
/// `driver_version`, by the rule in order: exact cubin, cubin of the same
/// major and a lower minor, fatbin, PTX the driver's JIT compiles. Returns
/// the chosen index.
///
/// ```
/// use cuda_api::{ComputeCapability as Cc, ImageTarget, PtxIsa, choose_image};
/// let images = [
///     ("a.sm80.cubin", ImageTarget::Cubin { arch: Cc::new(8, 0) }),
///     ("a.sm90.cubin", ImageTarget::Cubin { arch: Cc::new(9, 0) }),
///     ("a.sm100.cubin", ImageTarget::Cubin { arch: Cc::new(10, 0) }),
///     ("a.sm75.ptx", ImageTarget::Ptx { target: Cc::new(7, 5), isa: PtxIsa::new(9, 4) }),
/// ];
/// // An H200 (9.0) on a CUDA 13.0 driver gets the sm_90 cubin,
/// assert_eq!(choose_image(&images, Cc::new(9, 0), 13000), Ok(1));
/// // an RTX 4090 (8.9) the sm_80 one,
/// assert_eq!(choose_image(&images, Cc::new(8, 9), 13000), Ok(0));
/// // and a 12.0 GPU nothing on that driver (the PTX is ISA 9.4, the JIT takes 9.0).
/// let e = choose_image(&images, Cc::new(12, 0), 13000).unwrap_err();
/// assert!(e.to_string().contains("PTX ISA 9.4"));
/// ```
///
/// # Errors
///
/// [`NoImageError`] when no image fits, listing each image and why it does
/// not run.
pub fn choose_image<S: AsRef<str>>(
    images: &[(S, ImageTarget)],
    device: ComputeCapability,
    driver_version: i32,
) -> Result<usize, NoImageError> {
    let driver_max_isa = PtxIsa::accepted_by(driver_version);
    let best = |score: &Score<'_>| {
        images
            .iter()
            .enumerate()
            .filter_map(|(i, (_, t))| score(t).map(|s| (s, i)))
            // The highest score; among equals, the first offered.
            .max_by(|(a, i), (b, j)| a.cmp(b).then(j.cmp(i)))
            .map(|(_, i)| i)
    };
    let exact =
        best(&|t| matches!(t, ImageTarget::Cubin { arch } if *arch == device).then_some((0, 0, 0)));
    let lower = || {
        best(&|t| match t {
            ImageTarget::Cubin { arch }
                if arch.major == device.major && arch.minor < device.minor =>
            {
                Some((arch.minor, 0, 0))
            }
            _ => None,
        })
    };
    let fatbin = || best(&|t| matches!(t, ImageTarget::Fatbin).then_some((0, 0, 0)));
    let ptx = || {
        best(&|t| match t {
            ImageTarget::Ptx { target, isa }
                if *target <= device && driver_max_isa.is_none_or(|m| *isa <= m) =>
            {
                Some((target.major * 10 + target.minor, isa.major, isa.minor))
            }
            _ => None,
        })
    };
    exact
        .or_else(lower)
        .or_else(fatbin)
        .or_else(ptx)
        .ok_or_else(|| NoImageError {
            device,
            driver_version,
            driver_max_isa,
            images: images
                .iter()
                .map(|(l, t)| (l.as_ref().to_string(), *t))
                .collect(),
        })
}

impl CudaDevice {
    /// Chooses which of `images` (labels and targets) this device runs with
    /// the installed driver, by [`choose_image`]'s rule.
    ///
    /// # Errors
    ///
    /// [`CudaError::NoImage`] when none fits (the message lists each image
    /// and why it does not run); [`CudaError::Driver`] when the device's
    /// compute capability or the driver version cannot be read.
    pub fn choose_image<S: AsRef<str>>(&self, images: &[(S, ImageTarget)]) -> CudaResult<usize> {
        let (major, minor) = self.compute_capability()?;
        let cc = ComputeCapability::new(major.max(0) as u32, minor.max(0) as u32);
        choose_image(images, cc, driver_version()?).map_err(CudaError::NoImage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/tests/images/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    const CUBINS: [(&str, u32, u32); 6] = [
        ("one.sm75.cubin", 7, 5),
        ("one.sm80.cubin", 8, 0),
        ("one.sm86.cubin", 8, 6),
        ("one.sm90.cubin", 9, 0),
        ("one.sm100.cubin", 10, 0),
        ("one.sm120.cubin", 12, 0),
    ];

    #[test]
    fn nvcc_images_say_what_they_were_compiled_for() {
        for (file, major, minor) in CUBINS {
            assert_eq!(
                ImageTarget::of(&fixture(file)).unwrap(),
                ImageTarget::Cubin {
                    arch: ComputeCapability::new(major, minor)
                },
                "{file}"
            );
        }
        assert_eq!(
            ImageTarget::of(&fixture("one.compute75.ptx")).unwrap(),
            ImageTarget::Ptx {
                target: ComputeCapability::new(7, 5),
                isa: PtxIsa::new(9, 0)
            }
        );
    }

    /// Warp's NVRTC (CUDA 13.4) writes `.nv.merc.*` sections into sm_100
    /// and newer cubins: their sh_info is a merc symbol index or count, not
    /// a section index (this small module's has 71 with 59 sections).
    #[test]
    fn warps_sm100_cubins_with_merc_sections_are_read() {
        assert_eq!(
            ImageTarget::of(&fixture("warp_tape.sm100.cubin")).unwrap(),
            ImageTarget::Cubin {
                arch: ComputeCapability::new(10, 0)
            }
        );
    }

    #[test]
    fn an_old_format_cubin_keeps_its_arch_in_the_low_byte() {
        let mut cubin = fixture("one.sm86.cubin");
        cubin[7] = 0x33;
        cubin[48..52].copy_from_slice(&0x0056_0556u32.to_le_bytes());
        assert_eq!(
            ImageTarget::of(&cubin).unwrap(),
            ImageTarget::Cubin {
                arch: ComputeCapability::new(8, 6)
            }
        );
    }

    fn targets(files: &[&str]) -> Vec<(String, ImageTarget)> {
        files
            .iter()
            .map(|f| (f.to_string(), ImageTarget::of(&fixture(f)).unwrap()))
            .collect()
    }

    fn pick(images: &[(String, ImageTarget)], cc: (u32, u32), driver: i32) -> Option<&str> {
        choose_image(images, ComputeCapability::new(cc.0, cc.1), driver)
            .ok()
            .map(|i| images[i].0.as_str())
    }

    /// Real devices: T4 7.5, A100 8.0, A10/RTX 3090 8.6, Orin 8.7, L4/RTX
    /// 4090 8.9, H100/H200 9.0, B200 10.0, B300 10.3, RTX 5090 12.0, DGX
    /// Spark 12.1.
    #[test]
    fn the_rule_over_real_compute_capabilities() {
        let all = targets(&[
            "one.sm75.cubin",
            "one.sm80.cubin",
            "one.sm86.cubin",
            "one.sm90.cubin",
            "one.sm100.cubin",
            "one.sm120.cubin",
            "one.compute75.ptx",
        ]);
        let expect = [
            ((7, 5), "one.sm75.cubin"),
            ((8, 0), "one.sm80.cubin"),
            ((8, 6), "one.sm86.cubin"),
            ((8, 7), "one.sm86.cubin"),
            ((8, 9), "one.sm86.cubin"),
            ((9, 0), "one.sm90.cubin"),
            ((10, 0), "one.sm100.cubin"),
            ((10, 3), "one.sm100.cubin"),
            ((11, 0), "one.compute75.ptx"),
            ((12, 0), "one.sm120.cubin"),
            ((12, 1), "one.sm120.cubin"),
        ];
        for (cc, file) in expect {
            assert_eq!(pick(&all, cc, 13000), Some(file), "device {cc:?}");
        }
        // The order images are offered in does not matter.
        let mut reversed = all.clone();
        reversed.reverse();
        for (cc, file) in expect {
            assert_eq!(pick(&reversed, cc, 13000), Some(file), "device {cc:?}");
        }
    }

    #[test]
    fn a_cubin_never_crosses_a_major_version() {
        let images = targets(&["one.sm80.cubin", "one.sm100.cubin", "one.sm120.cubin"]);
        // 9.0 cannot run 8.0 nor 10.0 code; 10.3 runs 10.0's, 11.0 nothing.
        assert_eq!(pick(&images, (9, 0), 13000), None);
        assert_eq!(pick(&images, (10, 3), 13000), Some("one.sm100.cubin"));
        assert_eq!(pick(&images, (11, 0), 13000), None);
        // A lower minor only: 8.6 never runs on 8.0.
        assert_eq!(pick(&targets(&["one.sm86.cubin"]), (8, 0), 13000), None);
    }

    #[test]
    fn ptx_runs_where_the_jit_takes_its_isa() {
        let isa = |major, minor| ImageTarget::Ptx {
            target: ComputeCapability::new(7, 5),
            isa: PtxIsa::new(major, minor),
        };
        let one = |t| vec![("k.ptx".to_string(), t)];
        // CUDA 12.4 takes 8.4, 12.8 takes 8.7, 13.0 takes 9.0.
        for (driver, ok, too_new) in [
            (12040, isa(8, 4), isa(8, 5)),
            (12080, isa(8, 7), isa(8, 8)),
            (13000, isa(9, 0), isa(9, 4)),
        ] {
            assert_eq!(pick(&one(ok), (9, 0), driver), Some("k.ptx"), "{driver}");
            assert_eq!(pick(&one(too_new), (9, 0), driver), None, "{driver}");
        }
        // PTX for a higher target than the device does not run.
        let sm100 = ImageTarget::Ptx {
            target: ComputeCapability::new(10, 0),
            isa: PtxIsa::new(9, 0),
        };
        assert_eq!(pick(&one(sm100), (9, 0), 13000), None);
        // A cubin beats PTX; the highest PTX target wins among PTX.
        let mut images = targets(&["one.compute75.ptx", "one.sm90.cubin"]);
        assert_eq!(pick(&images, (9, 0), 13000), Some("one.sm90.cubin"));
        images.push((
            "k.sm86.ptx".into(),
            ImageTarget::Ptx {
                target: ComputeCapability::new(8, 6),
                isa: PtxIsa::new(9, 0),
            },
        ));
        assert_eq!(pick(&images, (8, 9), 13000), Some("k.sm86.ptx"));
    }

    /// The H200 case of the issue: sm_80 and sm_100 cubins and Warp's PTX
    /// (ISA 9.4) on a 9.0 device with a CUDA 13.0 driver.
    #[test]
    fn nothing_fits_names_every_image_and_both_versions() {
        let images = vec![
            (
                "wp_kernels.sm80.cubin".to_string(),
                ImageTarget::Cubin {
                    arch: ComputeCapability::new(8, 0),
                },
            ),
            (
                "wp_kernels.sm100.cubin".to_string(),
                ImageTarget::Cubin {
                    arch: ComputeCapability::new(10, 0),
                },
            ),
            (
                "wp_kernels.sm75.ptx".to_string(),
                ImageTarget::Ptx {
                    target: ComputeCapability::new(7, 5),
                    isa: PtxIsa::new(9, 4),
                },
            ),
        ];
        let e = choose_image(&images, ComputeCapability::new(9, 0), 13000).unwrap_err();
        assert_eq!(e.driver_max_isa, Some(PtxIsa::new(9, 0)));
        insta::assert_snapshot!(e.to_string());
    }

    #[test]
    fn images_that_are_not_images_are_refused() {
        assert!(ImageTarget::of(b"").is_err());
        let e = ImageTarget::of(b".version 9.0\n.address_size 64\n").unwrap_err();
        assert!(e.to_string().contains(".target"), "{e}");
        let mut cubin = fixture("one.sm90.cubin");
        cubin[48..52].copy_from_slice(&0u32.to_le_bytes());
        cubin[7] = 0x33;
        let e = ImageTarget::of(&cubin).unwrap_err();
        assert!(e.to_string().contains("e_flags"), "{e}");
    }
}
