//! A Warp module's images (a cubin per GPU architecture, PTX), read from a
//! directory or compiled into the program, and the choice of the one the
//! device runs.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

use cuda_api::{ArchVariant, ComputeCapability, CudaDevice, ImageTarget};

use crate::error::{Error, Result};

/// A Warp module compiled into the program: its generated source, metadata,
/// images and CPU code, as one Warp compile wrote them. Written by the
/// compile step (`warp_launch::build::WarpModule::embed`, feature `build`)
/// into `OUT_DIR`; loaded with [`AotModule::from_embedded`](crate::AotModule::from_embedded).
///
/// # The trust root
///
/// A launch is safe because of access rules read from the source (every
/// array index a kernel uses is a thread coordinate or a constant, see
/// [`KernelSpec::accesses`](crate::KernelSpec::accesses)); the code that
/// runs is the images' and the CPU entry points'. The rules hold for that
/// code only if both came out of one compile of one Warp module. Nothing
/// at run time can check that: a source with two kernels' bodies swapped
/// reads as well as the genuine one, and a cubin or a C function does not
/// say which source it came from. So the pairing is a promise, made in one
/// place: [`EmbeddedModule::new`] is `unsafe` and takes the source, the
/// metadata, the images and the CPU code together. The fields are private,
/// so safe code cannot take a value the promise was made for and put
/// another source (or other images, or other CPU code) beside its parts.
///
/// The parts need no promise of their own about the source. An
/// [`EmbeddedImage`] is a file name and bytes, and safe to build: the
/// bytes are checked as an image before the driver reads them, and an
/// image is paired with access rules only by this constructor.
/// [`EmbeddedCpu`](crate::EmbeddedCpu) and
/// [`EmbeddedCpuKernel`](crate::EmbeddedCpuKernel) are `unsafe` to build
/// for what the function pointers are (which kernel's entry points, over
/// which argument layout), which is a promise about the functions alone;
/// which source they run is, again, this constructor's promise.
///
/// A module read from a directory carries the same promise, made by the
/// caller of the `unsafe` [`AotModule::load`](crate::AotModule::load).
///
/// ```
/// use warp_launch::{EmbeddedImage, EmbeddedModule};
/// // What the generated file holds, in short (the real one includes the files).
/// // SAFETY: in the real file the source, metadata and image are the files
/// // of one Warp compile; this one is never launched.
/// static KERNELS: EmbeddedModule = unsafe {
///     EmbeddedModule::new(
///         "kernels",
///         "/* wp_kernels.cu */",
///         "{}",
///         &[EmbeddedImage { file: "wp_kernels.sm90.cubin", bytes: b"\x7fELF" }],
///         None,
///     )
/// };
/// assert_eq!(KERNELS.images()[0].file, "wp_kernels.sm90.cubin");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedModule {
    name: &'static str,
    source: &'static str,
    meta: &'static str,
    images: &'static [EmbeddedImage],
    cpu: Option<&'static crate::cpu::EmbeddedCpu>,
    facts: Option<&'static str>,
    rules: Option<&'static str>,
}

impl EmbeddedModule {
    /// Module `name` (`wp_<name>.cu`): its generated CUDA source
    /// (`wp_<name>.cu`), its metadata (`wp_<name>.meta`), its images, each
    /// under the file name Warp gave it (`wp_<name>.sm<arch>.cubin`,
    /// `wp_<name>.sm<arch>.ptx`), and its CPU code (`None`: the module was
    /// compiled without it, and its kernels run on `"cpu"` only with a
    /// Rust implementation, [`Kernel::with_cpu`](crate::Kernel::with_cpu)).
    ///
    /// Usable in a `static`: `warp-build` writes one per module.
    ///
    /// # Safety
    ///
    /// `source`, `meta`, every image and the CPU code come from one Warp
    /// compile of module `name`: the images were compiled by Warp from
    /// exactly this `source` (and its module options, which `meta`
    /// records), and the CPU entry points from the C++ Warp generated in
    /// the same compile, with the same kernels. Loading checks what can be
    /// checked (Warp's version, the images' headers, each CPU kernel's
    /// argument layout against the source's declaration), but not that a
    /// kernel's code does what the source says: access rules read from
    /// another source would make an out-of-bounds launch pass as safe.
    /// `warp-build` generates the call with all five from one output
    /// directory, and adds the compile's facts
    /// ([`EmbeddedModule::with_facts`]).
    ///
    /// Without facts, the caller also promises what the facts would tell:
    /// that no kernel of the module reaches native code
    /// (`@wp.func_native`, through any chain of `@wp.func` calls) or
    /// carries a user preamble (`extra_cuda_preamble`,
    /// `extra_cpu_preamble`, also merged from another module), and that
    /// the CPU code runs each kernel's CUDA body (no `.cpp` is read here).
    /// No text can show that: a snippet may begin with the lines Warp's
    /// own functions begin with.
    pub const unsafe fn new(
        name: &'static str,
        source: &'static str,
        meta: &'static str,
        images: &'static [EmbeddedImage],
        cpu: Option<&'static crate::cpu::EmbeddedCpu>,
    ) -> Self {
        EmbeddedModule {
            name,
            source,
            meta,
            images,
            cpu,
            facts: None,
            rules: None,
        }
    }

    /// The same module with the facts warp-build's compile step recorded
    /// beside it (`wp_<name>.facts.json`: what Warp's own objects said, at
    /// compile time, about native code, preambles and the CPU code). A
    /// kernel the facts leave unproven is refused by safe launches, on
    /// every device or on `"cpu"` only ([`Error::Unproven`](crate::Error::Unproven)),
    /// and runs through `unsafe` unchecked launches.
    ///
    /// # Safety
    ///
    /// `facts` come from the same Warp compile as the module's source,
    /// images and CPU code ([`EmbeddedModule::new`]'s promise, extended
    /// to them): facts of another compile could say "no native code" of a
    /// module that has some.
    pub const unsafe fn with_facts(mut self, facts: &'static str) -> Self {
        self.facts = Some(facts);
        self
    }

    /// The same module with the declarations warp-build derived from its
    /// source when it compiled it (`wp_<name>.rules.json`, written by
    /// `warp_proof::carry_declarations`): [`AotModule::from_embedded`](crate::AotModule::from_embedded)
    /// reads them instead of reading the source again, when they name
    /// exactly this source and metadata (lengths and 64-bit hashes) and the
    /// prover this program was built with; otherwise it reads the source.
    ///
    /// # Safety
    ///
    /// `rules` were written by `carry_declarations` for this module's
    /// source and metadata ([`EmbeddedModule::new`]'s promise, extended to
    /// them): the stamp they carry catches a stale file, not a forged one,
    /// and forged rules would make an out-of-bounds launch pass as safe.
    pub const unsafe fn with_rules(mut self, rules: &'static str) -> Self {
        self.rules = Some(rules);
        self
    }

    /// The carried declarations, `wp_<name>.rules.json` (`None`: made
    /// without them; the load reads the source).
    pub const fn rules(&self) -> Option<&'static str> {
        self.rules
    }

    /// The compile step's facts, `wp_<name>.facts.json` (`None`: made
    /// without them, see [`EmbeddedModule::new`]'s Safety section).
    pub const fn facts(&self) -> Option<&'static str> {
        self.facts
    }

    /// The module's name (`wp_<name>.cu`).
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The generated CUDA source, `wp_<name>.cu`.
    pub const fn source(&self) -> &'static str {
        self.source
    }

    /// The metadata, `wp_<name>.meta`.
    pub const fn meta(&self) -> &'static str {
        self.meta
    }

    /// The images, each under the file name Warp gave it
    /// (`wp_<name>.sm<arch>.cubin`, `wp_<name>.sm<arch>.ptx`).
    pub const fn images(&self) -> &'static [EmbeddedImage] {
        self.images
    }

    /// The module's CPU code, compiled from Warp's generated C++ and linked
    /// into the program (`None`: the module was compiled without it, and
    /// its kernels run on `"cpu"` only with a Rust implementation,
    /// [`Kernel::with_cpu`](crate::Kernel::with_cpu)).
    pub const fn cpu(&self) -> Option<&'static crate::cpu::EmbeddedCpu> {
        self.cpu
    }
}

/// One image of an [`EmbeddedModule`]: a file name and bytes. Safe to
/// build, with public fields: an image on its own promises nothing about a
/// source (its bytes are checked as an image before the driver reads them),
/// and it is paired with a source only by the `unsafe`
/// [`EmbeddedModule::new`].
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

/// Reads every image's target from its bytes (no driver call): a cubin
/// whose architecture differs from its file name is refused, and so is one
/// that records an `a` or `f` target its file name lacks; an `a` or `f`
/// file name counts where the cubin records no suffix. An empty list
/// is no error here (a module may have only CPU code); [`check_any`] reports it
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
        let target = match target {
            ImageTarget::Cubin { arch, variant } => {
                let (named, named_variant) = named_arch(&c.file).unzip();
                if named != Some(arch) {
                    return Err(file_err(
                        &c.file,
                        format!(
                            "the cubin's ELF header says {}, its file name another architecture; \
                             the file was renamed or replaced: recompile the module",
                            arch.sm()
                        ),
                    ));
                }
                ImageTarget::Cubin {
                    arch,
                    variant: cubin_variant(arch, variant, named_variant)
                        .map_err(|m| file_err(&c.file, m))?,
                }
            }
            other => other,
        };
        targets.push(target);
    }
    Ok(targets)
}

/// The architecture and suffix a Warp image's file name gives
/// (`wp_<name>.sm100a.cubin`: 10.0, architecture-specific).
fn named_arch(file: &str) -> Option<(ComputeCapability, ArchVariant)> {
    let (_, rest) = file.rsplit_once(".sm")?;
    let (arch, _) = rest.split_once('.')?;
    ArchVariant::parse_sm(arch)
}

/// A cubin's suffix from what it records (`recorded`, the `-arch` option
/// ptxas noted in it) and its file name (`named`): a cubin that records
/// none takes its name's (an `a` or `f` name narrows where it runs, so
/// believing it is safe); one that records `a` or `f` must be named so,
/// else the file was renamed.
fn cubin_variant(
    arch: ComputeCapability,
    recorded: ArchVariant,
    named: Option<ArchVariant>,
) -> std::result::Result<ArchVariant, String> {
    let named = named.unwrap_or_default();
    match recorded {
        ArchVariant::Generic => Ok(named),
        r if r == named => Ok(r),
        r => Err(format!(
            "the cubin was compiled for {sm}{} (the -arch ptxas recorded in it), its file name \
             says {sm}{}; the file was renamed or replaced: recompile the module",
            r.suffix(),
            named.suffix(),
            sm = arch.sm(),
        )),
    }
}

/// Refuses a module without images, before any driver call: its first
/// CUDA use says so rather than that the driver is missing.
pub(crate) fn check_any(origin: &str, candidates: &[Candidate<'_>]) -> Result<()> {
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
    Ok(())
}

/// Chooses the image CUDA device `ordinal` runs (see
/// [`cuda_api::choose_image`] for the rule) among `candidates` (at least
/// one: [`check_any`]), whose targets [`targets`] read, and returns its
/// index.
pub(crate) fn choose(
    origin: &str,
    candidates: &[Candidate<'_>],
    targets: &[ImageTarget],
    ordinal: i32,
) -> Result<usize> {
    let named: Vec<(&str, ImageTarget)> = candidates
        .iter()
        .zip(targets)
        .map(|(c, t)| (c.file.as_str(), *t))
        .collect();
    let device = CudaDevice::get(ordinal)?;
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

    fn cubin(file: &'static str, fixture: &str) -> Candidate<'static> {
        let path = format!(
            "{}/../cuda-api/tests/images/{fixture}",
            env!("CARGO_MANIFEST_DIR")
        );
        Candidate {
            file: file.to_string(),
            bytes: Cow::Owned(std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))),
        }
    }

    /// The suffix comes from the cubin where it records one, else from the
    /// file name; a cubin renamed to drop or change its suffix is refused.
    #[test]
    fn a_cubins_suffix_comes_from_its_record_or_its_name() {
        let variant = |c: &Candidate<'_>| match targets("dir", std::slice::from_ref(c)) {
            Ok(t) => match t[0] {
                ImageTarget::Cubin { variant, .. } => Ok(variant),
                other => panic!("{other}"),
            },
            Err(e) => Err(e.to_string()),
        };
        let ok = [
            (
                "wp_k.sm100a.cubin",
                "one.sm100a.cubin",
                ArchVariant::Specific,
            ),
            ("wp_k.sm100f.cubin", "one.sm100f.cubin", ArchVariant::Family),
            ("wp_k.sm100.cubin", "one.sm100.cubin", ArchVariant::Generic),
            // Records nothing (Warp's NVRTC cubin): the name says.
            (
                "wp_k.sm100a.cubin",
                "warp_tape.sm100.cubin",
                ArchVariant::Specific,
            ),
        ];
        for (file, fixture, expect) in ok {
            assert_eq!(
                variant(&cubin(file, fixture)),
                Ok(expect),
                "{file} from {fixture}"
            );
        }
        for (file, fixture) in [
            ("wp_k.sm100.cubin", "one.sm100a.cubin"),
            ("wp_k.sm100f.cubin", "one.sm100a.cubin"),
            ("wp_k.sm100a.cubin", "one.sm100f.cubin"),
        ] {
            let e = variant(&cubin(file, fixture)).unwrap_err();
            assert!(
                e.contains(&format!("dir/{file}")) && e.contains("renamed or replaced"),
                "{e}"
            );
        }
        let e = variant(&cubin("wp_k.sm103f.cubin", "one.sm100f.cubin")).unwrap_err();
        assert!(e.contains("ELF header says sm_100"), "{e}");
    }

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
