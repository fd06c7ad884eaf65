//! [`ImageSet`]: the images of one module compiled into the program (a
//! cubin per GPU architecture, PTX), and the one a device runs.

use crate::choice::choose_image;
use crate::device::{CudaDevice, driver_version};
use crate::error::{CudaError, CudaResult};
use crate::module::Library;
use crate::target::{ComputeCapability, ImageTarget};

/// The images of one module, each under its file name, as a build step
/// (`warp_build::CudaBuild`) embeds them: usable in a `static`. Loading
/// reads each image's header ([`ImageTarget::of`]), picks the one the
/// device runs by [`choose_image`]'s rule (exact cubin, same major lower
/// minor, fatbin, PTX the driver's JIT takes) and loads it as a
/// context-independent [`Library`]. Safe: every image is checked before
/// the driver reads it, and none is paired with any promise about a kernel.
///
/// ```
/// use cuda_api::{ComputeCapability as Cc, ImageSet};
/// static EMPTY: ImageSet = ImageSet::new("k.cu", &[]);
/// assert_eq!(EMPTY.name(), "k.cu");
/// // No image runs anywhere: the error lists what was held.
/// assert!(EMPTY.choose_for(Cc::new(9, 0), 13000).is_err());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ImageSet {
    name: &'static str,
    images: &'static [(&'static str, &'static [u8])],
}

impl ImageSet {
    /// The images of module `name` (its source file, for messages), each
    /// as (file name, bytes).
    pub const fn new(
        name: &'static str,
        images: &'static [(&'static str, &'static [u8])],
    ) -> ImageSet {
        ImageSet { name, images }
    }

    /// The module's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The images, as (file name, bytes).
    pub const fn images(&self) -> &'static [(&'static str, &'static [u8])] {
        self.images
    }

    /// The file name of the image a device of compute capability `cc`
    /// runs with a driver of CUDA version `driver` (`13000` for 13.0); no
    /// GPU needed.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidImage`] naming the file when an image's header
    /// does not read; [`CudaError::NoImage`] listing every image and why it
    /// does not run when none fits.
    pub fn choose_for(&self, cc: ComputeCapability, driver: i32) -> CudaResult<&'static str> {
        let targets = self.targets()?;
        let i = choose_image(&targets, cc, driver).map_err(CudaError::NoImage)?;
        Ok(self.images[i].0)
    }

    /// Chooses the image `device` runs and loads it: the library and the
    /// chosen file's name.
    ///
    /// # Errors
    ///
    /// As for [`ImageSet::choose_for`]; the driver's failure to read the
    /// device or to load the image.
    pub fn load(&self, device: &CudaDevice) -> CudaResult<(Library, &'static str)> {
        let (major, minor) = device.compute_capability()?;
        let cc = ComputeCapability::new(major.max(0) as u32, minor.max(0) as u32);
        let file = self.choose_for(cc, driver_version()?)?;
        let bytes = self
            .images
            .iter()
            .find(|(f, _)| *f == file)
            .map(|(_, b)| *b)
            .unwrap_or_default();
        Ok((Library::from_image(bytes)?, file))
    }

    fn targets(&self) -> CudaResult<Vec<(&'static str, ImageTarget)>> {
        self.images
            .iter()
            .map(|(file, bytes)| {
                ImageTarget::of(bytes)
                    .map(|t| (*file, with_variant(t, file)))
                    .map_err(|mut e| {
                        e.problem = format!("{} of module {}: {}", file, self.name, e.problem);
                        CudaError::InvalidImage(e)
                    })
            })
            .collect()
    }
}

/// A cubin whose header does not say `a` or `f` gets the variant its file
/// name says (`k.sm_90a.cubin`).
fn with_variant(target: ImageTarget, file: &str) -> ImageTarget {
    match target {
        ImageTarget::Cubin { arch, variant } if variant == crate::ArchVariant::Generic => {
            let named = file
                .split('.')
                .find_map(crate::ArchVariant::parse_sm)
                .filter(|(cc, _)| *cc == arch)
                .map_or(variant, |(_, v)| v);
            ImageTarget::Cubin {
                arch,
                variant: named,
            }
        }
        other => other,
    }
}
