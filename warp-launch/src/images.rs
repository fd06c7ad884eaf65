//! A Warp module's images (a cubin per GPU architecture, PTX), read from a
//! directory or compiled into the program, and the choice of the one the
//! device runs.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

use cuda_api::{CudaDevice, ImageTarget};

use crate::error::{Error, Result};

/// A Warp module compiled into the program: its generated source, metadata
/// and images, as `include_str!`/`include_bytes!` give them. Written by the
/// compile step (`warp_launch::build::WarpModule::embed`, feature `build`)
/// into `OUT_DIR`; loaded with [`AotModule::from_embedded`](crate::AotModule::from_embedded).
///
/// ```
/// use warp_launch::{EmbeddedImage, EmbeddedModule};
/// // What the generated file holds, in short (the real one includes the files).
/// static KERNELS: EmbeddedModule = EmbeddedModule {
///     name: "kernels",
///     source: "/* wp_kernels.cu */",
///     meta: "{}",
///     images: &[EmbeddedImage { file: "wp_kernels.sm90.cubin", bytes: b"\x7fELF" }],
///     cpu: None,
/// };
/// assert_eq!(KERNELS.images[0].file, "wp_kernels.sm90.cubin");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedModule {
    /// The module's name (`wp_<name>.cu`).
    pub name: &'static str,
    /// The generated CUDA source, `wp_<name>.cu`.
    pub source: &'static str,
    /// The metadata, `wp_<name>.meta`.
    pub meta: &'static str,
    /// The images, each under the file name Warp gave it
    /// (`wp_<name>.sm<arch>.cubin`, `wp_<name>.sm<arch>.ptx`).
    pub images: &'static [EmbeddedImage],
    /// The module's CPU code, compiled from Warp's generated C++ and linked
    /// into the program (`None`: the module was compiled without it, and
    /// its kernels run on `"cpu"` only with a Rust implementation,
    /// [`Kernel::with_cpu`](crate::Kernel::with_cpu)).
    pub cpu: Option<&'static crate::cpu::EmbeddedCpu>,
}

/// One image of an [`EmbeddedModule`].
#[derive(Clone, Copy)]
pub struct EmbeddedImage {
    /// The file name Warp gave it, e.g. `wp_kernels.sm90.cubin`.
    pub file: &'static str,
    /// The image's bytes.
    pub bytes: &'static [u8],
}

impl fmt::Debug for EmbeddedImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedImage")
            .field("file", &self.file)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// An image of a module before the choice: its file name and bytes.
pub(crate) struct Candidate<'a> {
    pub file: String,
    pub bytes: Cow<'a, [u8]>,
}

/// Whether `file` is one of module `name`'s images, Warp's naming:
/// `wp_<name>.sm<arch>[a|f].cubin` or `.ptx`.
pub(crate) fn is_image_of(file: &str, name: &str) -> bool {
    let Some(rest) = file
        .strip_prefix("wp_")
        .and_then(|r| r.strip_prefix(name))
        .and_then(|r| r.strip_prefix(".sm"))
    else {
        return false;
    };
    let Some((arch, ext)) = rest.split_once('.') else {
        return false;
    };
    let digits = arch.trim_end_matches(['a', 'f']);
    (ext == "cubin" || ext == "ptx")
        && digits.len() >= 2
        && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Reads module `name`'s images in `dir` (sorted by file name).
pub(crate) fn read_dir_images(
    dir: &Path,
    names: &[String],
    name: &str,
) -> Result<Vec<Candidate<'static>>> {
    names
        .iter()
        .filter(|f| is_image_of(f, name))
        .map(|f| {
            let path = dir.join(f);
            let bytes = std::fs::read(&path).map_err(|error| Error::Io { path, error })?;
            Ok(Candidate {
                file: f.clone(),
                bytes: Cow::Owned(bytes),
            })
        })
        .collect()
}

/// The device images are chosen for: the current CUDA device of this
/// thread, else device 0.
fn target_device() -> Result<CudaDevice> {
    match CudaDevice::current()? {
        Some(d) => Ok(d),
        None => Ok(CudaDevice::get(0)?),
    }
}

/// Reads every image's target from its bytes (no driver call): a cubin
/// whose architecture differs from its file name is refused. An empty list
/// is no error here (a module may have only CPU code); [`choose`] reports it
/// when a CUDA device asks for an image.
pub(crate) fn targets(origin: &str, candidates: &[Candidate<'_>]) -> Result<Vec<ImageTarget>> {
    let file_err = |file: &str, message: String| Error::Source {
        file: format!("{origin}/{file}"),
        line: 0,
        message,
    };
    let mut targets = Vec::with_capacity(candidates.len());
    for c in candidates {
        let target = ImageTarget::of(&c.bytes).map_err(|e| file_err(&c.file, e.to_string()))?;
        if let ImageTarget::Cubin { arch } = target {
            let named = c
                .file
                .rsplit_once(".sm")
                .and_then(|(_, r)| r.split_once('.'))
                .map(|(a, _)| a.trim_end_matches(['a', 'f']));
            if named != Some(&format!("{}{}", arch.major, arch.minor)) {
                return Err(file_err(
                    &c.file,
                    format!(
                        "the cubin's ELF header says {}, its file name another architecture; \
                         the file was renamed or replaced: recompile the module",
                        arch.sm()
                    ),
                ));
            }
        }
        targets.push(target);
    }
    Ok(targets)
}

/// Chooses the image the target device runs (see [`cuda_api::choose_image`]
/// for the rule) among `candidates`, whose targets [`targets`] read, and
/// returns its index.
pub(crate) fn choose(
    origin: &str,
    candidates: &[Candidate<'_>],
    targets: &[ImageTarget],
) -> Result<usize> {
    if candidates.is_empty() {
        return Err(Error::Source {
            file: origin.to_string(),
            line: 0,
            message: "no image (wp_<module>.sm<arch>.cubin or .ptx) to run on a CUDA device; \
                      compile the module for CUDA with warp_launch::build (feature `build`), \
                      `cargo xtask warp-aot`, or wp.compile_aot_module(..., arch=[...], \
                      strip_hash=True)"
                .into(),
        });
    }
    let named: Vec<(&str, ImageTarget)> = candidates
        .iter()
        .zip(targets)
        .map(|(c, t)| (c.file.as_str(), *t))
        .collect();
    let device = target_device()?;
    let chosen = device.choose_image(&named)?;
    log::debug!(
        "warp-launch: {origin}: chose {} ({}) of {} image(s) for device {}",
        named[chosen].0,
        named[chosen].1,
        named.len(),
        device.ordinal()
    );
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_follow_warps_naming() {
        for ok in [
            "wp_kernels.sm90.cubin",
            "wp_kernels.sm100.cubin",
            "wp_kernels.sm75.ptx",
            "wp_kernels.sm90a.cubin",
            "wp_kernels.sm100f.ptx",
        ] {
            assert!(is_image_of(ok, "kernels"), "{ok}");
        }
        for not in [
            "wp_kernels.cu",
            "wp_kernels.meta",
            "wp_kernels.o",
            "wp_kernels_x.sm90.cubin",
            "wp_kernel.sm90.cubin",
            "wp_kernels.sm9.cubin",
            "wp_kernels.smxx.cubin",
            "wp_kernels.sm90.cubin.bak",
        ] {
            assert!(!is_image_of(not, "kernels"), "{not}");
        }
    }
}
