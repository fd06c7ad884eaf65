//! [`EmbeddedCudaModule`]: a `warp_launch.h` CUDA C text and its images,
//! compiled into the program by a build step and loaded with
//! [`CudaModule::from_embedded`](crate::CudaModule::from_embedded).

use crate::ImageSet;

/// One CUDA C file written against `warp_launch.h`, compiled by a build
/// step (`warp_build::CudaBuild` writes one per such file): its text as
/// read, its images (a cubin per architecture, PTX), and the first warning
/// NVRTC printed while compiling it, if any (a text NVRTC warns about
/// proves no kernel, as with [`CudaModule::compile`](crate::CudaModule::compile)).
/// Usable in a `static`.
///
/// ```
/// use warp_launch::EmbeddedCudaModule;
/// static IMAGES: warp_launch::ImageSet = warp_launch::ImageSet::new("scale.cu", &[]);
/// // SAFETY: this text is never loaded (there is no image); a build step
/// // pairs a text with the images it compiled from exactly that text.
/// static SCALE: EmbeddedCudaModule =
///     unsafe { EmbeddedCudaModule::new("scale.cu", "#include \"warp_launch.h\"\n", &IMAGES, None) };
/// assert_eq!(SCALE.name(), "scale.cu");
/// assert!(SCALE.warning().is_none());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedCudaModule {
    name: &'static str,
    source: &'static str,
    images: &'static ImageSet,
    warning: Option<(usize, &'static str)>,
}

impl EmbeddedCudaModule {
    /// The file `name` (used in messages), its text `source`, the images
    /// compiled from it, and NVRTC's first warning about it (`(line,
    /// text)`, `None` when the compile printed none).
    ///
    /// # Safety
    ///
    /// Every image in `images` was compiled from exactly the text the
    /// CUDA C reader re-emits for `source` (`warp_proof::cuda_c::read_text`'s
    /// `emitted`, or `source` itself when that is `None`), with the
    /// `warp_launch.h` of this crate's version and no option, define,
    /// include directory or other header that changes what the text means;
    /// and `warning` is the first warning that compile printed. The access
    /// rules a launch checks are read from `source`: code compiled from
    /// another text would let an out-of-bounds launch pass as safe.
    /// `warp_build::CudaBuild` generates the call with what it compiled.
    pub const unsafe fn new(
        name: &'static str,
        source: &'static str,
        images: &'static ImageSet,
        warning: Option<(usize, &'static str)>,
    ) -> EmbeddedCudaModule {
        EmbeddedCudaModule {
            name,
            source,
            images,
            warning,
        }
    }

    /// The file's name, as messages show it.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The text the declarations are read from.
    pub const fn source(&self) -> &'static str {
        self.source
    }

    /// The images compiled from it.
    pub const fn images(&self) -> &'static ImageSet {
        self.images
    }

    /// NVRTC's first warning about the text at build time: its line and text.
    pub const fn warning(&self) -> Option<(usize, &'static str)> {
        self.warning
    }
}
