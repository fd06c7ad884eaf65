//! Loading a module written by Warp's `wp.compile_aot_module(module,
//! arch=[..], module_dir=DIR, strip_hash=True)`, from its directory or
//! compiled into the program: the kernels' parameters come from the
//! generated `wp_<module>.cu`, dynamic shared memory from
//! `wp_<module>.meta`, the CUDA code from the image chosen for each device
//! among `wp_<module>.sm<arch>.cubin` and `.ptx` (on its first use there), the
//! CPU code from what the compile step linked into the program
//! ([`EmbeddedModule::cpu`]). No Python at run time, and no driver until a
//! CUDA device is used.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use cuda_api::{ImageTarget, Library};

use crate::cpu::{CpuKernel, EmbeddedCpu, NativeKernel, is_elementwise};
use crate::device::{Device, PerDevice};
use crate::error::{Error, Result};
use crate::images::{self, Candidate, EmbeddedModule};
use crate::launch::kernel::DeferredCuda;
use crate::launch::{Kernel, KernelSpec};
use crate::signature::{Pass, Unproven};

pub use warp_proof::WARP_VERSION;

/// A loaded Warp AOT module: its kernels by key.
///
/// Loading reads the source once (every kernel's parameters and access
/// rules, checked) and binds the module's CPU code, if it has any (each
/// kernel's argument layout checked against its declaration), without
/// touching the CUDA driver: a machine without a GPU loads a module, lists
/// its kernels and runs them on `"cpu"`. The CUDA image is chosen and
/// loaded when a CUDA device first needs it (a kernel's first CUDA launch,
/// [`Kernel::cuda_function`], [`AotModule::image`]), and each kernel's CUDA
/// functions are declared against the driver's parameter layout on the
/// kernel's first CUDA use, once, so a module of many kernels costs the
/// parse, not one declaration per kernel.
pub struct AotModule {
    name: String,
    /// The directory, or `embedded module '<name>'`.
    origin: String,
    /// The images, loaded on first CUDA use.
    images: Arc<ModuleImages>,
    kernels: BTreeMap<String, LazyKernel>,
    /// Whether the module has CPU code.
    cpu: bool,
}

/// A module's CUDA images: their bytes and targets (read at load, no
/// driver), the one chosen for each device, and each image's library,
/// loaded on the first use by a device that chose it (on a host with GPUs
/// of two architectures, each loads its own image; devices of one
/// architecture share the library).
struct ModuleImages {
    origin: String,
    candidates: Vec<Candidate<'static>>,
    targets: Vec<ImageTarget>,
    /// The index of the image chosen for each device.
    chosen: PerDevice<usize>,
    /// Each image's library, once a device chose and loaded it.
    libraries: Box<[OnceLock<Library>]>,
}

impl ModuleImages {
    /// The file name of the image chosen for device `ordinal`, and its
    /// library, chosen and loaded now if they are not yet (a failure is not
    /// kept: the next call tries again).
    fn library(&self, ordinal: i32) -> Result<(&str, &Library)> {
        // The PTX fallback is one of the candidates: warp-build compiles it
        // at build time with NVRTC 12.0 (PTX ISA 8.0, any driver from CUDA
        // 12.0 on), so no device pays for a compile here. A module whose
        // kernels call MathDx has none (see `README.md`, "Which image runs").
        images::check_any(&self.origin, &self.candidates)?;
        let chosen = *self.chosen.get_or_make(ordinal, || {
            images::choose(&self.origin, &self.candidates, &self.targets, ordinal)
        })?;
        let slot = &self.libraries[chosen];
        let library = match slot.get() {
            Some(l) => l,
            None => {
                let library =
                    Library::from_image(&self.candidates[chosen].bytes).map_err(Error::from)?;
                // Another thread may have loaded it meanwhile: one library wins.
                slot.get_or_init(|| library)
            }
        };
        Ok((&self.candidates[chosen].file, library))
    }
}

/// A kernel of a loaded module: its declaration read from the source, its
/// CPU implementation (bound at load), and the kernel once made (on first
/// use).
struct LazyKernel {
    forward: String,
    backward: Option<String>,
    spec: KernelSpec,
    cpu: Option<CpuKernel>,
    kernel: OnceLock<Kernel>,
}

impl fmt::Debug for AotModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AotModule")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .field(
                "images",
                &self
                    .images
                    .chosen
                    .made()
                    .map(|(d, i)| (d, &self.images.candidates[*i].file))
                    .collect::<Vec<_>>(),
            )
            .field("cpu", &self.cpu)
            .field("kernels", &self.kernels.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        error,
    })
}

fn read_text(path: &Path) -> Result<String> {
    String::from_utf8(read(path)?).map_err(|_| Error::Source {
        file: path.display().to_string(),
        line: 0,
        message: "not UTF-8 text; is this a Warp-generated file?".into(),
    })
}

fn list(dir: &Path) -> Result<Vec<String>> {
    let rd = std::fs::read_dir(dir).map_err(|error| Error::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let mut names: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

impl AotModule {
    /// Loads the one module in `dir` (the directory holds one `wp_*.cu`).
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// use warp_launch::AotModule;
    /// // SAFETY: target/warp-aot/aot is one output of wp.compile_aot_module
    /// // that nothing else writes.
    /// let module = unsafe { AotModule::load("target/warp-aot/aot") }?;
    /// # Ok(()) }
    /// ```
    ///
    /// Without `unsafe` it does not compile:
    ///
    /// ```compile_fail,E0133
    /// let module = warp_launch::AotModule::load("target/warp-aot/aot");
    /// ```
    ///
    /// # Safety
    ///
    /// As [`AotModule::load_named`]'s: the module's files in `dir` come
    /// from one Warp compile.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when `dir` or its files cannot be read, [`Error::Source`] when it holds no
    /// single `wp_*.cu` or the source or `.meta` cannot be read as Warp's output (the message
    /// names the file and line); see [`AotModule::load_named`].
    pub unsafe fn load(dir: impl AsRef<Path>) -> Result<AotModule> {
        let dir = dir.as_ref();
        let modules: Vec<String> = list(dir)?
            .into_iter()
            .filter_map(|n| {
                n.strip_prefix("wp_")?
                    .strip_suffix(".cu")
                    .map(str::to_string)
            })
            .collect();
        match modules.as_slice() {
            // SAFETY: the caller's promise, for the directory's one module.
            [one] => unsafe { Self::load_named(dir, one) },
            _ => Err(Error::Source {
                file: dir.display().to_string(),
                line: 0,
                message: format!(
                    "expected one Warp module (wp_<name>.cu) in the directory, found {}: {modules:?}; use AotModule::load_named(dir, name)",
                    modules.len()
                ),
            }),
        }
    }

    /// Loads module `name` from `dir` (`wp_<name>.cu`, `.meta`, and the
    /// images `wp_<name>.sm<arch>.cubin` and `.ptx`).
    ///
    /// The images are read here (and each cubin's ELF header checked
    /// against its file name); the one a CUDA device runs is chosen and
    /// loaded on the module's first use on that device, for each device on
    /// its own (a host with an H200 and an RTX 5090 runs the sm_90 cubin on
    /// the one and the sm_120 cubin on the other), by
    /// [`cuda_api::choose_image`]'s rule: the cubin of the device's compute
    /// capability, else a cubin of the same major version and a lower minor
    /// (never an architecture-specific `sm_XYa` one, which runs on exactly
    /// its compute capability; a family `sm_XYf` one runs on its family),
    /// else PTX the driver's JIT compiles; [`AotModule::image_on`] says
    /// which. A directory holds no CPU
    /// code (that is linked into the program: [`AotModule::from_embedded`]),
    /// so its kernels run on `"cpu"` only with a Rust implementation
    /// ([`Kernel::with_cpu`]).
    ///
    /// Each kernel's parameters and array access rules come from the
    /// generated source (see [`KernelSpec::accesses`]): a kernel whose every
    /// array access is indexed by thread coordinates or constants launches
    /// safely with those checks; any other is refused by safe launches and
    /// runs only through the `unsafe`
    /// [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked).
    /// Every kernel's declaration is read and checked here; its CUDA
    /// functions are declared against the driver on its first CUDA use, so
    /// the load costs the parse.
    ///
    /// # Safety
    ///
    /// `wp_<name>.cu`, `wp_<name>.meta` and every image `wp_<name>.sm*`
    /// in `dir` come from one Warp compile (`wp.compile_aot_module`,
    /// `warp_launch::build`, `cargo xtask warp-aot`), and stay so while this
    /// call reads them. The access rules that make launches safe are read
    /// from the source, and the code that runs is the images': a source
    /// edited or replaced after the compile (two kernels' bodies swapped,
    /// say) gives rules that the code does not keep, and a launch that
    /// passes as safe writes outside its arrays. No file in the directory
    /// can prove the pairing: whoever can write the source can write a
    /// digest beside it. So, as a dynamic library's
    /// [`libloading::Library::new`](https://docs.rs/libloading/latest/libloading/struct.Library.html#method.new),
    /// loading trusts the directory, and the caller vouches for it. The
    /// checks that do run (Warp's version, each cubin's header against its
    /// file name) catch mistakes, not forgeries. A module compiled into the
    /// program loads safely: [`AotModule::from_embedded`].
    ///
    /// Native code and preambles: a directory warp-build wrote holds
    /// `wp_<name>.facts.json`, what Warp's own objects said at compile time
    /// (which kernels reach a `@wp.func_native` function, through any chain
    /// of `@wp.func` calls, and whether the module has a user preamble);
    /// such kernels are unproven ([`Error::Unproven`] on safe launches).
    /// The facts file is one of the module's files, under the promise
    /// above.
    ///
    /// Carried declarations: a directory warp-build wrote also holds
    /// `wp_<name>.rules.json`, the declarations (parameters and access
    /// rules) warp-build derived from this source when it compiled it. They
    /// are used instead of reading the source again only when they name
    /// exactly this source and metadata (lengths and 64-bit hashes) and
    /// this build of the prover; otherwise the source is read as without
    /// them. The file is one of the module's files, under the promise
    /// above: the stamp catches a stale file, not a forged one. A directory without it (Warp's own `compile_aot_module`
    /// writes none) has no such facts, and no text can stand in for them
    /// (a snippet can begin with the comment Warp's own functions begin
    /// with): for it the caller also promises that no kernel reaches native
    /// code and the module has no user preamble.
    ///
    /// # Errors
    ///
    /// Besides unreadable or malformed files: a module not written by Warp
    /// [`WARP_VERSION`] (its generated header or `.meta` keys differ from
    /// 1.19.0's) is refused, naming both versions as far as they are
    /// known; a cubin whose ELF header disagrees with its file name:
    /// [`Error::Source`]. A module compiled in a mode this crate does not
    /// model (deterministic mode, thread block clusters, ...):
    /// [`Error::Unmodelled`], naming the feature, the kernel and the line.
    /// No image for the device ([`Error::Cuda`] holding
    /// [`CudaError::NoImage`](crate::CudaError::NoImage), which lists every
    /// image and what the device and driver need), no driver, or no image
    /// at all ([`Error::Source`]) are reported by the first CUDA use.
    pub unsafe fn load_named(dir: impl AsRef<Path>, name: &str) -> Result<AotModule> {
        let dir = dir.as_ref();
        let cu_path = dir.join(format!("wp_{name}.cu"));
        let meta_path = dir.join(format!("wp_{name}.meta"));
        let text = read_text(&cu_path)?;
        let meta_text = read_text(&meta_path)?;
        let facts_path = dir.join(crate::facts::file_name(name));
        let facts = match facts_path.is_file() {
            true => Some((read_text(&facts_path)?, facts_path.display().to_string())),
            false => None,
        };
        let rules_path = dir.join(rules_file_name(name));
        let rules = match rules_path.is_file() {
            true => Some((read_text(&rules_path)?, rules_path.display().to_string())),
            false => None,
        };
        let images = images::read_dir_images(dir, &list(dir)?, name)?;
        Self::load_parts(
            &dir.display().to_string(),
            name,
            (&text, &cu_path.display().to_string()),
            (&meta_text, &meta_path.display().to_string()),
            (
                facts.as_ref().map(|(t, f)| (t.as_str(), f.as_str())),
                rules.as_ref().map(|(t, f)| (t.as_str(), f.as_str())),
            ),
            images,
            None,
        )
    }

    /// Loads a module compiled into the program (see [`EmbeddedModule`]):
    /// no file is read. Its CUDA image is chosen for the device as
    /// [`AotModule::load_named`] does, on first CUDA use, and loaded from
    /// memory (`cuLibraryLoadData`). Its CPU code ([`EmbeddedModule::cpu`])
    /// is bound here: each kernel's argument struct, as the compiled code
    /// lays it out, must be the one its declaration gives; its kernels then
    /// run on `"cpu"` (a kernel the compile step could not build for the
    /// CPU is refused there with [`Error::CpuUnsupported`]).
    ///
    /// Safe, unlike loading a directory: that the source, images and CPU
    /// code belong together was promised once, when the module was built
    /// by the `unsafe` [`EmbeddedModule::new`] (as `warp-build`'s
    /// generated code does), and the value cannot be re-paired since.
    ///
    /// # Errors
    ///
    /// As [`AotModule::load_named`], except for file errors; and for the
    /// CPU code: [`Error::CpuLayout`] for a kernel whose compiled argument
    /// struct differs from its declaration (naming the field and both
    /// offsets), [`Error::CpuCode`] for CPU code of a kernel the source does
    /// not declare, a declared kernel the CPU code neither runs nor lists as
    /// unsupported, or an argument struct of another field count.
    pub fn from_embedded(module: &EmbeddedModule) -> Result<AotModule> {
        let name = module.name();
        let origin = format!("embedded module '{name}'");
        let facts_file = format!("{origin}/{}", crate::facts::file_name(name));
        let rules_file = format!("{origin}/{}", rules_file_name(name));
        let images: Vec<Candidate<'static>> = module
            .images()
            .iter()
            .map(|i| Candidate {
                file: i.file.to_string(),
                bytes: Cow::Borrowed(i.bytes),
            })
            .collect();
        Self::load_parts(
            &origin,
            name,
            (module.source(), &format!("{origin}/wp_{name}.cu")),
            (module.meta(), &format!("{origin}/wp_{name}.meta")),
            (
                module.facts().map(|t| (t, facts_file.as_str())),
                module.rules().map(|t| (t, rules_file.as_str())),
            ),
            images,
            module.cpu(),
        )
    }

    /// The common path of directories and embedded modules: declarations
    /// carried by the build for this source, else from the source (the
    /// Warp version checked first either way), the compile's facts, the images'
    /// targets (read from their bytes), and the CPU code bound to the
    /// declarations. No driver call.
    fn load_parts(
        origin: &str,
        name: &str,
        (text, cu_file): (&str, &str),
        (meta_text, meta_file): (&str, &str),
        (facts, rules): (Beside<'_>, Beside<'_>),
        candidates: Vec<Candidate<'static>>,
        cpu: Option<&EmbeddedCpu>,
    ) -> Result<AotModule> {
        let mut decls = declarations_carried(rules, (text, cu_file), (meta_text, meta_file))?;
        let cpu_unproven = apply_facts(name, &mut decls, facts)?;
        let targets = images::targets(origin, &candidates)?;
        let mut kernels: BTreeMap<String, LazyKernel> = BTreeMap::new();
        let mut atomics = HashMap::new();
        for d in decls {
            atomics.insert(d.key.clone(), d.atomics);
            kernels.insert(
                d.key,
                LazyKernel {
                    forward: d.forward,
                    backward: d.backward,
                    spec: d.spec,
                    cpu: None,
                    kernel: OnceLock::new(),
                },
            );
        }
        let module = format!("Warp module '{name}' ({origin})");
        if let Some(cpu) = cpu {
            bind_cpu(&module, cpu, &mut kernels, &atomics, &cpu_unproven)?;
        }
        Ok(AotModule {
            name: name.to_string(),
            origin: origin.to_string(),
            images: Arc::new(ModuleImages {
                origin: origin.to_string(),
                libraries: candidates.iter().map(|_| OnceLock::new()).collect(),
                candidates,
                targets,
                chosen: PerDevice::new(),
            }),
            kernels,
            cpu: cpu.is_some(),
        })
    }

    /// The file name of the image chosen for this thread's current CUDA
    /// device ([`Device::current`]: the innermost
    /// [`ScopedDevice`](crate::ScopedDevice), else the current context's
    /// device, else `cuda:0`), e.g. `wp_kernels.sm90.cubin`: chosen and
    /// loaded now if no kernel of the module was used on that device yet.
    /// [`AotModule::image_on`] names the device.
    ///
    /// # Errors
    ///
    /// As [`AotModule::image_on`].
    pub fn image(&self) -> Result<&str> {
        self.image_on(Device::current())
    }

    /// The file name of the image chosen for `device` (`"cpu"` counts as
    /// `cuda:0`), chosen and loaded now if no kernel of the module was used
    /// on that device yet. Each device gets its own choice: on a host with
    /// an H200 (9.0) and an RTX 5090 (12.0), a module compiled for both
    /// runs `wp_<name>.sm90.cubin` on the one and `wp_<name>.sm120.cubin`
    /// on the other.
    ///
    /// # Errors
    ///
    /// [`Error::Cuda`] without a driver or device, or with
    /// [`CudaError::NoImage`](crate::CudaError::NoImage) when no image runs
    /// on the device (listing them); [`Error::NoSuchDevice`] for an ordinal
    /// the driver does not have; [`Error::Source`] for a module without
    /// images; the driver's refusal of the image as [`Error::Cuda`].
    pub fn image_on(&self, device: Device) -> Result<&str> {
        self.images
            .library(device.ordinal().unwrap_or(0))
            .map(|(file, _)| file)
    }

    /// Whether the module has CPU code (compiled from Warp's generated C++
    /// and linked into the program): its kernels run on `"cpu"`, except
    /// those the compile step could not build for the CPU.
    pub fn has_cpu_code(&self) -> bool {
        self.cpu
    }

    /// The module's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Kernel `key` (the Python function's name), with its CPU code if the
    /// module has it. No driver call: the kernel's CUDA forward function is
    /// declared against the driver's parameter layout on its first CUDA
    /// use (the backward function on the first CUDA adjoint launch), and
    /// that use reports a missing driver, image or function, or a layout
    /// that differs from the declaration read from the source. Later calls
    /// return the same kernel (a reference-count increment).
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchKernel`] when the module has no kernel `key` (the message lists the
    /// kernels it has).
    pub fn kernel(&self, key: &str) -> Result<Kernel> {
        let Some(lazy) = self.kernels.get(key) else {
            return Err(Error::NoSuchKernel {
                module: format!("Warp module '{}' ({})", self.name, self.origin),
                kernel: key.to_string(),
                known: self.kernels.keys().cloned().collect(),
            });
        };
        if let Some(k) = lazy.kernel.get() {
            return Ok(k.clone());
        }
        let images = self.images.clone();
        let deferred = DeferredCuda {
            library: Arc::new(move |ordinal| images.library(ordinal).map(|(_, l)| l.clone())),
            forward: lazy.forward.clone(),
            backward: lazy.backward.clone(),
        };
        // SAFETY: the declaration (parameter types and access rules) was
        // read from the source that Warp 1.19.0 (checked at load) compiled
        // into this module's images and CPU code in one compile: the
        // promise of `EmbeddedModule::new` or of the caller of the unsafe
        // `load_named`, the only two ways a module is made. The driver's
        // layout confirms counts, sizes and offsets on first use; the CPU
        // code's layout was checked at load.
        let kernel = unsafe {
            lazy.spec
                .clone()
                .declare_deferred(Some(deferred), lazy.cpu.clone())
        }?;
        // Another thread may have declared it meanwhile: one kernel wins.
        Ok(lazy.kernel.get_or_init(|| kernel).clone())
    }

    /// Whether kernel `key`'s CUDA forward function has been declared
    /// against the driver (by its first CUDA use).
    pub fn is_declared(&self, key: &str) -> bool {
        self.kernels
            .get(key)
            .and_then(|k| k.kernel.get())
            .is_some_and(Kernel::is_cuda_declared)
    }

    /// Every kernel's key.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.kernels.keys().map(String::as_str)
    }
}

/// Binds a module's CPU code to its declarations: each kernel's entry
/// points to the kernel of its key (its compiled argument layout checked
/// against the declaration), each unsupported kernel to its reason; every
/// declared kernel must be one or the other, and every key declared.
fn bind_cpu(
    module: &str,
    cpu: &EmbeddedCpu,
    kernels: &mut BTreeMap<String, LazyKernel>,
    atomics: &HashMap<String, bool>,
    unproven: &HashMap<String, Unproven>,
) -> Result<()> {
    let code_err = |kernel: &str, message: String| Error::CpuCode {
        module: module.to_string(),
        kernel: kernel.to_string(),
        message,
    };
    let known = |kernels: &BTreeMap<String, LazyKernel>| {
        kernels.keys().cloned().collect::<Vec<_>>().join(", ")
    };
    for entry in cpu.kernels() {
        let key = entry.key();
        let listed = known(kernels);
        let Some(lazy) = kernels.get_mut(key) else {
            return Err(code_err(
                key,
                format!(
                    "the source declares no kernel '{key}' (it declares {listed}); the CPU code was compiled from another Warp output than the source: rebuild the module"
                ),
            ));
        };
        if lazy.cpu.is_some() {
            return Err(code_err(
                key,
                "the CPU code lists the kernel twice; rebuild the module".into(),
            ));
        }
        let spec = &lazy.spec;
        let elementwise = is_elementwise(
            spec.kernel_dim(),
            spec.accesses(Pass::Forward),
            atomics.get(key).copied().unwrap_or(true),
        );
        let native = NativeKernel::bind(
            module,
            key,
            spec.params(),
            entry,
            cpu.take_assert(),
            elementwise,
        )?;
        if lazy.backward.is_some() != native.has_backward() {
            log::debug!(
                "warp-launch: {module}: kernel '{key}': the CUDA source {} a backward kernel, the CPU code {}",
                if lazy.backward.is_some() {
                    "has"
                } else {
                    "has no"
                },
                if native.has_backward() {
                    "has one"
                } else {
                    "has none"
                }
            );
        }
        lazy.cpu = Some(CpuKernel::Native(
            native.with_unproven(unproven.get(key).cloned()),
        ));
    }
    for &(key, why) in cpu.unsupported() {
        let listed = known(kernels);
        let Some(lazy) = kernels.get_mut(key) else {
            return Err(code_err(
                key,
                format!(
                    "listed as CPU-unsupported, but the source declares no kernel '{key}' (it declares {listed}); rebuild the module"
                ),
            ));
        };
        if lazy.cpu.is_some() {
            return Err(code_err(
                key,
                "listed both with CPU entry points and as CPU-unsupported; rebuild the module"
                    .into(),
            ));
        }
        lazy.cpu = Some(CpuKernel::Unsupported(why.to_string()));
    }
    if let Some((key, _)) = kernels.iter().find(|(_, k)| k.cpu.is_none()) {
        return Err(code_err(
            key,
            "the source declares the kernel, but the CPU code neither runs it nor lists it as unsupported; the CPU code was compiled from another Warp output than the source: rebuild the module".into(),
        ));
    }
    Ok(())
}

/// One forward kernel of a module, declared from the source
/// ([`warp_proof::declarations`]), its declaration a [`KernelSpec`].
#[derive(Debug)]
pub(crate) struct Declared {
    pub key: String,
    pub forward: String,
    pub backward: Option<String>,
    pub spec: KernelSpec,
    /// Whether the forward body uses atomics (`wp::atomic_*`).
    pub atomics: bool,
}

/// [`crate::facts::apply`] to the declarations of module `module`: their
/// CUDA verdicts applied, each kernel's unproven CPU verdict returned.
pub(crate) fn apply_facts(
    module: &str,
    decls: &mut [Declared],
    facts: Option<(&str, &str)>,
) -> Result<HashMap<String, Unproven>> {
    crate::facts::apply(
        module,
        decls.iter_mut().map(|d| (d.key.as_str(), &mut d.spec)),
        facts,
    )
}

/// Everything `load_named` needs before the image: the Warp version check,
/// the parsed source and metadata, and every forward kernel's declaration
/// (warp-proof's reader). Linear in the size of the files.
pub(crate) fn declarations(
    text: &str,
    cu_file: &str,
    meta_text: &str,
    meta_file: &str,
) -> Result<Vec<Declared>> {
    declared(warp_proof::declarations(
        text, cu_file, meta_text, meta_file,
    )?)
}

/// The declarations the build carried (`(text, file)` of
/// `wp_<name>.rules.json`) when they were derived from exactly this source
/// and metadata by this prover; else derived from the source
/// ([`declarations`]).
fn declarations_carried(
    carried: Option<(&str, &str)>,
    (text, cu_file): (&str, &str),
    (meta_text, meta_file): (&str, &str),
) -> Result<Vec<Declared>> {
    if let Some((rules, rules_file)) = carried
        && let Some(d) =
            warp_proof::carried_declarations(rules, rules_file, text, cu_file, meta_text)?
    {
        return declared(d);
    }
    declarations(text, cu_file, meta_text, meta_file)
}

/// A file beside a module's source, as `(text, file name)`, when it has one
/// (the compile's facts, the carried declarations).
type Beside<'a> = Option<(&'a str, &'a str)>;

/// The file name of module `name`'s carried declarations
/// (`wp_<name>.rules.json`, written by warp-build).
pub(crate) fn rules_file_name(name: &str) -> String {
    format!("wp_{name}.rules.json")
}

fn declared(decls: Vec<warp_proof::Declared>) -> Result<Vec<Declared>> {
    Ok(decls
        .into_iter()
        .map(|d| Declared {
            key: d.key,
            forward: d.forward,
            backward: d.backward,
            spec: KernelSpec::from_decl(d.decl),
            atomics: d.atomics,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::{Accesses, ParamKind};

    const CU: &str = include_str!("../tests/fixtures/wp_kernels.cu");
    const META: &str = include_str!("../tests/fixtures/wp_kernels.meta");

    /// The forward accesses of kernel `key` as module `m` declared it.
    fn forward_accesses(m: &AotModule, key: &str) -> Accesses {
        m.kernels[key].spec.accesses(Pass::Forward).clone()
    }

    /// The fixture's declarations as derived, and forged ones that would
    /// pass any launch of saxpy (its forward accesses emptied).
    fn derived_and_forged() -> (Vec<warp_proof::Declared>, Vec<warp_proof::Declared>) {
        let derived =
            warp_proof::declarations(CU, "wp_kernels.cu", META, "wp_kernels.meta").unwrap();
        let mut forged = derived.clone();
        forged
            .iter_mut()
            .find(|d| d.key == "saxpy")
            .unwrap()
            .decl
            .forward = Accesses::Checked(Vec::new());
        (derived, forged)
    }

    #[test]
    fn carried_declarations_are_used_for_their_own_source_only() {
        let (derived, forged) = derived_and_forged();
        let real = spec("saxpy").accesses(Pass::Forward).clone();
        assert!(
            matches!(&real, Accesses::Checked(a) if !a.is_empty()),
            "{real:?}"
        );
        let load = |rules: String| {
            let rules: &'static str = rules.leak();
            // SAFETY: no image and no CPU code (never launched); the rules
            // are the test's subject.
            let m =
                unsafe { EmbeddedModule::new("kernels", CU, META, &[], None).with_rules(rules) };
            AotModule::from_embedded(&m).unwrap()
        };
        // Stamped for this source: used as they are (the promise of
        // `with_rules` is what keeps them honest).
        let own = load(warp_proof::carry_declarations(&forged, CU, META));
        assert_eq!(
            forward_accesses(&own, "saxpy"),
            Accesses::Checked(Vec::new())
        );
        // Stamped for a source one comment apart, or other metadata: not
        // used; the source is read and saxpy keeps its rules.
        let other = CU.replacen("y[i] = a * x[i] + y[i]", "y[i] = a * x[i] + y[j]", 1);
        assert!(other != CU);
        for stale in [
            warp_proof::carry_declarations(&forged, &other, META),
            warp_proof::carry_declarations(&forged, CU, &format!("{META}\n")),
        ] {
            assert_eq!(forward_accesses(&load(stale), "saxpy"), real);
        }
        // The honest file: every kernel as derived.
        let honest = load(warp_proof::carry_declarations(&derived, CU, META));
        for d in &derived {
            let (a, b) = (&honest.kernels[&d.key].spec, spec(&d.key));
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{}", d.key);
        }
    }

    #[test]
    fn a_directory_with_carried_declarations_loads_them_and_a_broken_file_is_named() {
        let dir = std::env::temp_dir().join(format!("carried-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("wp_kernels.cu"), CU).unwrap();
        std::fs::write(dir.join("wp_kernels.meta"), META).unwrap();
        let (derived, forged) = derived_and_forged();
        let rules = dir.join("wp_kernels.rules.json");
        std::fs::write(&rules, warp_proof::carry_declarations(&forged, CU, META)).unwrap();
        // SAFETY: never launched; the directory holds the fixture's files
        // and rules stamped for them.
        let m = unsafe { AotModule::load(&dir) }.unwrap();
        assert_eq!(forward_accesses(&m, "saxpy"), Accesses::Checked(Vec::new()));
        // A file cut short: refused, naming it and the fix.
        let text = warp_proof::carry_declarations(&derived, CU, META);
        std::fs::write(&rules, &text[..text.len() / 2]).unwrap();
        // SAFETY: as above.
        let e = unsafe { AotModule::load(&dir) }.unwrap_err().to_string();
        assert!(
            e.contains("wp_kernels.rules.json") && e.contains("rebuild"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn spec(key: &str) -> KernelSpec {
        declarations(CU, "wp_kernels.cu", META, "wp_kernels.meta")
            .unwrap()
            .into_iter()
            .find(|d| d.key == key)
            .unwrap()
            .spec
    }

    fn describe(s: &KernelSpec) -> Vec<String> {
        s.params()
            .iter()
            .map(|p| format!("{}: {}", p.name, p.kind.describe()))
            .collect()
    }

    #[test]
    fn fixture_kernels_resolve_to_declarations() {
        insta::assert_debug_snapshot!("saxpy", describe(&spec("saxpy")));
        insta::assert_debug_snapshot!("use_struct", describe(&spec("use_struct")));
        insta::assert_debug_snapshot!("transform", describe(&spec("transform")));
        insta::assert_debug_snapshot!("lean_fill", describe(&spec("lean_fill")));
        assert!(!spec("lean_fill").is_grid_stride());
        assert!(spec("saxpy").is_grid_stride());
        let us = spec("use_struct");
        let ParamKind::Struct(st) = &us.params()[0].kind else {
            panic!("use_struct's first parameter is a struct");
        };
        // float32 at 0, vec3f at 4, int32 at 16: 20 bytes, 4-aligned.
        assert_eq!(
            st.fields.iter().map(|f| f.offset).collect::<Vec<_>>(),
            vec![0, 4, 16]
        );
        assert_eq!((st.size, st.align), (20, 4));
    }

    #[test]
    fn warp_kernels_keep_the_block_size_they_were_compiled_for() {
        assert_eq!(spec("saxpy").fixed_block_dim(), Some(256));
    }

    use crate::proof_tests::{is_child, run_in_child, timed};
    use std::time::Duration;

    /// The fixture's header and its `Params` struct: what a Warp 1.19.0
    /// source starts with.
    fn header() -> &'static str {
        &CU[..CU.find("extern \"C\" __global__").unwrap()]
    }

    /// A module whose kernel takes a struct nested `depth` deep, each level
    /// holding two of the level below (2^depth paths to the leaf).
    fn struct_nest(depth: usize) -> String {
        let mut text = header().to_string();
        text.push_str("struct S0_00000000\n{\n    wp::float32 a;\n    wp::float32 b;\n};\n");
        for d in 1..depth {
            text.push_str(&format!(
                "struct S{d}_00000000\n{{\n    S{p}_00000000 a;\n    S{p}_00000000 b;\n}};\n",
                p = d - 1
            ));
        }
        text.push_str(&format!(
            "extern \"C\" __global__ void nest_cuda_kernel_forward(\n    wp::launch_bounds_t<1> dim,\n    S{}_00000000 var_p,\n    wp::array_t<wp::float32> var_x)\n{{\n}}\n",
            depth - 1
        ));
        text
    }

    #[test]
    fn big_modules_child() {
        if !is_child() {
            return;
        }
        let nest = struct_nest(17);
        let d = timed("depth-17 struct nest (16 below the parameter)", || {
            declarations(&nest, "n.cu", "{}", "n.meta").unwrap()
        });
        let ParamKind::Struct(st) = &d[0].spec.params()[0].kind else {
            panic!("a struct parameter");
        };
        // 2 floats at the bottom, doubled 16 times.
        assert_eq!(st.size, 8 << 16);
        let e = declarations(&struct_nest(18), "n.cu", "{}", "n.meta").unwrap_err();
        assert!(e.to_string().contains("nests too deeply"), "{e}");

        let start = CU
            .find("extern \"C\" __global__ void saxpy_cuda_kernel_forward")
            .unwrap();
        let end = CU
            .find("extern \"C\" __global__ void add2d_cuda_kernel_forward")
            .unwrap();
        let saxpy = &CU[start..end];
        let mut text = CU[..start].to_string();
        let mut meta = String::from("{");
        let mut i = 0;
        while text.len() < 1 << 20 {
            text.push_str(&saxpy.replace("saxpy", &format!("saxpy{i}")));
            meta.push_str(&format!(
                "\"saxpy{i}_cuda_kernel_backward_smem_bytes\": 0, \"saxpy{i}_cuda_kernel_forward_smem_bytes\": 0, "
            ));
            i += 1;
        }
        meta.push_str("\"x_smem_bytes\": 0}");
        let d = timed("1 MB of kernels", || {
            declarations(&text, "big.cu", &meta, "big.meta").unwrap()
        });
        // The 8 kernels before saxpy in the fixture, then the copies.
        assert_eq!(d.len(), i + 8);
        assert!(
            d.iter()
                .filter(|d| d.key.starts_with("saxpy"))
                .all(|d| d.backward.is_some()
                    && matches!(d.spec.accesses(crate::Pass::Forward), Accesses::Checked(l) if l.len() == 2))
        );
    }

    #[test]
    fn nested_structs_and_one_megabyte_modules_declare_in_under_a_second() {
        run_in_child("aot::tests::big_modules_child", Duration::from_secs(60));
    }

    /// What `AotModule::load` does before the image for the 64-kernel
    /// module of `tests/warp/many.py` (written by `tests/warp/build.py` into
    /// `target/warp-aot/many`, or `$SDK_WARP_DATA/many`): the median of 11
    /// runs. Run with
    /// `cargo test --release -p warp-launch --lib declarations_of_64 -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing, and needs the compiled many/ module"]
    fn declarations_of_64_kernels_time() {
        let data = std::env::var_os("SDK_WARP_DATA").map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/warp-aot"),
            std::path::PathBuf::from,
        );
        let dir = data.join("many");
        let text = std::fs::read_to_string(dir.join("wp_many.cu")).unwrap();
        let meta = std::fs::read_to_string(dir.join("wp_many.meta")).unwrap();
        let mut ms: Vec<f64> = (0..11)
            .map(|_| {
                let t = std::time::Instant::now();
                let d = declarations(&text, "wp_many.cu", &meta, "wp_many.meta").unwrap();
                assert_eq!(d.len(), 64);
                // Every kernel of many.py launches safely (its accesses are rules).
                assert!(d.iter().all(|d| {
                    matches!(d.spec.accesses(crate::Pass::Forward), Accesses::Checked(_))
                        && matches!(d.spec.accesses(crate::Pass::Adjoint), Accesses::Checked(_))
                }));
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        println!(
            "declarations of 64 kernels ({} KB of source): median {:.2} ms, min {:.2} ms",
            text.len() / 1024,
            ms[5],
            ms[0]
        );
    }

    /// Real output of other releases (`cargo xtask warp-other-versions`
    /// compiles `tests/warp/kernels.py` with each): 1.16.0's is refused at
    /// the first header line that differs, naming 1.19.0 and that line;
    /// 1.17.0's and 1.18.0's are byte for byte 1.19.0's, so nothing can
    /// refuse them, and they load.
    #[test]
    fn real_output_of_other_warp_releases() {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let other = fixtures.join("other-warp");
        // SAFETY: the fixtures are one Warp compile each (never launched here).
        let e = unsafe { AotModule::load_named(other.join("1.16.0"), "kernels") }
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1.16.0/wp_kernels.cu:13: not written by Warp 1.19.0"),
            "{e}"
        );
        assert!(
            e.contains("line 13 of the module header is `// avoid namespacing of float type"),
            "{e}"
        );
        assert!(
            e.contains("where Warp 1.19.0 writes `#define builtin_tid1d()"),
            "{e}"
        );
        for v in ["1.17.0", "1.18.0"] {
            for f in ["wp_kernels.cu", "wp_kernels.meta"] {
                assert!(
                    std::fs::read(other.join(v).join(f)).unwrap()
                        == std::fs::read(fixtures.join(f)).unwrap(),
                    "Warp {v}'s {f} now differs from 1.19.0's: make the version check refuse it"
                );
            }
            // SAFETY: as above.
            let m = unsafe { AotModule::load_named(other.join(v), "kernels") }
                .unwrap_or_else(|e| panic!("{v}: {e}"));
            assert!(m.keys().count() >= 10, "{v}");
        }
    }

    #[test]
    fn load_refuses_another_warp_version_before_the_image() {
        let dir = std::env::temp_dir().join(format!("wl-version-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let older = CU.replace("// Allow PTXAS to spill", "// Let PTXAS spill");
        std::fs::write(dir.join("wp_m.cu"), older).unwrap();
        std::fs::write(dir.join("wp_m.meta"), META).unwrap();
        // No image: the version check must come first.
        // SAFETY: the load is refused before any kernel is made.
        let e = unsafe { AotModule::load(&dir) }.unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.contains("not written by Warp 1.19.0"), "{e}");
    }
}
