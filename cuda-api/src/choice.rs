//! Choosing, among several images of one module (a cubin per GPU
//! architecture, PTX, fatbins), the one a device can run.
//!
//! The rule, in order (NVIDIA's compatibility rules, see the
//! [CUDA compatibility guide](https://docs.nvidia.com/deploy/cuda-compatibility/)
//! and the [PTX ISA release notes](https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes)):
//! 1. a cubin for exactly the device's compute capability (of those, an
//!    architecture-specific `a` one first, then a family `f` one, then a
//!    plain one: each has at least the features of the next);
//! 2. else a cubin of the same major version and a lower minor one (binary
//!    compatibility holds within a major version, upwards), the highest such,
//!    never an `a` one (it runs on its exact compute capability only: an
//!    `sm_100a` cubin does not run on a 10.3 device, an `sm_100f` or
//!    `sm_100` one does);
//! 3. else a fatbin (the driver picks inside it);
//! 4. else PTX whose target is not above the device and whose ISA version the
//!    driver can compile (its JIT takes PTX up to the ISA of its own CUDA
//!    release), the highest target;
//! 5. else [`NoImageError`], listing every image held and what the device and
//!    driver would need.

use crate::device::{CudaDevice, driver_version};
use crate::error::{CudaError, CudaResult};
#[cfg(test)]
use crate::target::ArchVariant;
use crate::target::{ComputeCapability, ImageTarget, NoImageError, PtxIsa};

/// How well an image fits, higher is better; `None`: it does not run.
type Score<'a> = dyn Fn(&ImageTarget) -> Option<(u32, u32, u32)> + 'a;

/// Chooses the image of `images` (labels and targets) that a device of
/// compute capability `device` runs with a driver of CUDA version
/// `driver_version`, by the rule in order: exact cubin, cubin of the same
/// major and a lower minor, fatbin, PTX the driver's JIT compiles. Returns
/// the chosen index.
///
/// ```
/// use cuda_api::{ArchVariant, ComputeCapability as Cc, ImageTarget, PtxIsa, choose_image};
/// let cubin = |major, minor| ImageTarget::Cubin {
///     arch: Cc::new(major, minor),
///     variant: ArchVariant::Generic,
/// };
/// let images = [
///     ("a.sm80.cubin", cubin(8, 0)),
///     ("a.sm90.cubin", cubin(9, 0)),
///     ("a.sm100.cubin", cubin(10, 0)),
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
    let exact = best(&|t| match t {
        ImageTarget::Cubin { arch, variant } if *arch == device => Some((*variant as u32, 0, 0)),
        _ => None,
    });
    let lower = || {
        best(&|t| match t {
            ImageTarget::Cubin { arch, variant }
                if arch.minor < device.minor && variant.runs_on(*arch, device) =>
            {
                Some((arch.minor, *variant as u32, 0))
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
                    arch: ComputeCapability::new(major, minor),
                    variant: ArchVariant::Generic,
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
                arch: ComputeCapability::new(10, 0),
                variant: ArchVariant::Generic,
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
                arch: ComputeCapability::new(8, 6),
                variant: ArchVariant::Generic,
            }
        );
        // The older format's EF_CUDA_ACCELERATORS (bit 11) marks sm_90a.
        let mut cubin = fixture("one.sm90.cubin");
        cubin[7] = 0x33;
        cubin[48..52].copy_from_slice(&0x005a_0d5au32.to_le_bytes());
        assert_eq!(
            ImageTarget::of(&cubin).unwrap(),
            ImageTarget::Cubin {
                arch: ComputeCapability::new(9, 0),
                variant: ArchVariant::Specific,
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

    /// nvcc 13.0 writes the same ELF flags for `sm_100`, `sm_100a` and
    /// `sm_100f`: the suffix is read from the tool-info note.
    #[test]
    fn arch_specific_and_family_cubins_say_so() {
        let expect = [
            ("one.sm90.cubin", 9, 0, ArchVariant::Generic),
            ("one.sm90a.cubin", 9, 0, ArchVariant::Specific),
            ("one.sm100.cubin", 10, 0, ArchVariant::Generic),
            ("one.sm100a.cubin", 10, 0, ArchVariant::Specific),
            ("one.sm100f.cubin", 10, 0, ArchVariant::Family),
            ("one.sm103f.cubin", 10, 3, ArchVariant::Family),
            ("one.sm120a.cubin", 12, 0, ArchVariant::Specific),
            ("warp_tape.sm100.cubin", 10, 0, ArchVariant::Generic),
        ];
        for (file, major, minor, variant) in expect {
            let bytes = fixture(file);
            assert_eq!(
                ImageTarget::of(&bytes).unwrap(),
                ImageTarget::Cubin {
                    arch: ComputeCapability::new(major, minor),
                    variant,
                },
                "{file}"
            );
        }
        assert_eq!(
            fixture("one.sm100.cubin")[48..52],
            fixture("one.sm100a.cubin")[48..52],
            "the ELF flags do not tell sm_100a from sm_100"
        );
        assert_eq!(
            ImageTarget::of(&fixture("one.sm100f.cubin"))
                .unwrap()
                .to_string(),
            "sm_100f cubin"
        );
    }

    /// `a` only on exactly its compute capability, `f` on its family from
    /// its minor up; real cubins, devices as values: B200 10.0, B300 10.3,
    /// H200 9.0, RTX 5090 12.0, DGX Spark 12.1.
    #[test]
    fn arch_specific_cubins_run_only_where_they_can() {
        let all = targets(&[
            "one.sm90a.cubin",
            "one.sm100a.cubin",
            "one.sm100f.cubin",
            "one.sm120a.cubin",
        ]);
        assert_eq!(pick(&all, (9, 0), 13000), Some("one.sm90a.cubin"));
        assert_eq!(pick(&all, (10, 0), 13000), Some("one.sm100a.cubin"));
        // The issue's case: sm_100a does not run on a 10.3 device, sm_100f does.
        assert_eq!(pick(&all, (10, 3), 13000), Some("one.sm100f.cubin"));
        let only_a = targets(&["one.sm100a.cubin", "one.sm90a.cubin", "one.sm120a.cubin"]);
        assert_eq!(pick(&only_a, (10, 3), 13000), None);
        assert_eq!(pick(&only_a, (12, 1), 13000), None);
        assert_eq!(pick(&only_a, (12, 0), 13000), Some("one.sm120a.cubin"));
        let e = choose_image(&only_a, ComputeCapability::new(10, 3), 13000).unwrap_err();
        assert!(
            e.to_string().contains(
                "one.sm100a.cubin is an sm_100a cubin, which is architecture-specific and runs only on compute capability 10.0 exactly"
            ),
            "{e}"
        );
        // sm_103f runs on 10.3, not on 10.0; a family cubin never crosses a major.
        let f103 = targets(&["one.sm103f.cubin"]);
        assert_eq!(pick(&f103, (10, 3), 13000), Some("one.sm103f.cubin"));
        assert_eq!(pick(&f103, (10, 0), 13000), None);
        assert_eq!(pick(&f103, (12, 0), 13000), None);
        // On its exact device an `a` cubin beats `f`, which beats plain;
        // below it, `f` and plain of the same architecture are equals.
        let mixed = targets(&["one.sm100.cubin", "one.sm100f.cubin", "one.sm100a.cubin"]);
        assert_eq!(pick(&mixed, (10, 0), 13000), Some("one.sm100a.cubin"));
        assert_eq!(pick(&mixed[..2], (10, 0), 13000), Some("one.sm100f.cubin"));
        assert!(matches!(
            pick(&mixed, (10, 3), 13000),
            Some("one.sm100.cubin" | "one.sm100f.cubin")
        ));
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
                    variant: ArchVariant::Generic,
                },
            ),
            (
                "wp_kernels.sm100.cubin".to_string(),
                ImageTarget::Cubin {
                    arch: ComputeCapability::new(10, 0),
                    variant: ArchVariant::Generic,
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
