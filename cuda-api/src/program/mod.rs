//! CUDA C++ compiled at run time by NVRTC: [`Program`] (source, name,
//! headers, options and name expressions in) gives a [`Compiled`] image (PTX
//! or a cubin for one architecture, and the lowered names), cached on disk
//! ([`cache`](self::cache)); [`Linker`] links PTX and cubins with the
//! driver's `cuLink*`.

pub(crate) mod cache;
mod link;

use std::ffi::{CStr, CString, c_char};
use std::path::PathBuf;

use cuda_sys::nvrtc::nvrtcProgram;
use cuda_sys::nvrtc::nvrtcResult;

use crate::context::Context;
use crate::device::{CudaDevice, driver_version};
use crate::error::{CudaError, CudaResult};
use crate::module::{Library, Module};
use crate::nvrtc;
use crate::target::{ComputeCapability, PtxIsa, ptx_isa_written_by};

pub use crate::compile_error::{CompileError, Diagnostic, PtxRefused};
pub use cache::{CACHE_ENV, CacheOutcome};
pub use link::Linker;

/// What a [`Program`] compiles to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Output {
    /// PTX text for `compute_XY`, compiled by the driver's JIT when loaded:
    /// runs on that architecture and every later one, on a driver whose JIT
    /// takes the PTX ISA of the NVRTC that wrote it.
    Ptx,
    /// A cubin for `sm_XY`: machine code, loaded without a JIT, on GPUs of
    /// that major version and a minor version at least as high.
    Cubin,
}

impl Output {
    /// Chooses what to compile to, from the loaded NVRTC's version, the
    /// driver's CUDA version (when known) and what was asked (`None`: the
    /// default). NVRTC writes PTX of its own ISA only, so when NVRTC is newer
    /// than the driver (the PTX ISA its release writes is newer than the
    /// driver's JIT takes, by [`PtxIsa::accepted_by`]; where either is
    /// unknown, its CUDA version is higher), the default is a cubin and PTX is refused, naming both
    /// versions. Otherwise, and when the driver is unknown (no GPU), the
    /// default is PTX.
    ///
    /// ```
    /// use cuda_api::Output;
    /// // NVRTC 13.5 with a CUDA 13.0 driver: a cubin; PTX refused.
    /// assert_eq!(Output::choose(13050, Some(13000), None).unwrap(), Output::Cubin);
    /// let e = Output::choose(13050, Some(13000), Some(Output::Ptx)).unwrap_err();
    /// assert!(e.to_string().contains("NVRTC 13.5"), "{e}");
    /// assert!(e.to_string().contains("CUDA 13.0 driver"), "{e}");
    /// // NVRTC 13.0 with a CUDA 13.5 driver: PTX.
    /// assert_eq!(Output::choose(13000, Some(13050), None).unwrap(), Output::Ptx);
    /// ```
    ///
    /// # Errors
    ///
    /// [`PtxRefused`] (its `program` empty: [`Program::compile`] fills it)
    /// when PTX is asked of an NVRTC newer than the driver.
    pub fn choose(
        nvrtc_version: u32,
        driver_version: Option<i32>,
        requested: Option<Output>,
    ) -> Result<Output, PtxRefused> {
        let Some(driver) = driver_version else {
            return Ok(requested.unwrap_or(Output::Ptx));
        };
        // What NVRTC writes: known only for a release in the table (a later
        // one may write a newer ISA); what the driver takes: the newest ISA
        // of its release or the last one before it (a lower bound).
        let nvrtc_isa = ptx_isa_written_by(nvrtc_version as i32);
        let driver_isa = PtxIsa::accepted_by(driver);
        let too_new = match (nvrtc_isa, driver_isa) {
            (Some(n), Some(d)) => n > d,
            _ => nvrtc_version as i64 > driver as i64,
        };
        match requested {
            Some(Output::Ptx) if too_new => Err(PtxRefused {
                program: String::new(),
                nvrtc_version,
                nvrtc_isa,
                driver_version: driver,
                driver_isa,
            }),
            Some(o) => Ok(o),
            None if too_new => Ok(Output::Cubin),
            None => Ok(Output::Ptx),
        }
    }
}

/// Where a [`Program`] keeps its results.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CachePolicy {
    /// [`CACHE_ENV`], else the user's cache directory, checked private.
    Default,
    /// No cache.
    Off,
    /// A directory the caller vouches for ([`Program::cache_dir`]).
    Trusted(PathBuf),
    /// A directory checked as the default one is (tests of the check).
    #[cfg(test)]
    Checked(PathBuf),
}

/// CUDA C++ source to compile with NVRTC at run time.
///
/// Set the target with [`Program::for_device`] (its compute capability and
/// the driver's version) or [`Program::arch`] (works without a GPU), then
/// [`Program::compile`]. The loaded NVRTC is the one
/// [`cuda_sys::nvrtc::library`] opens (`CUDA_SYS_NVRTC_LIBRARY` picks one).
///
/// # The cache
///
/// Results are kept on disk, one file per compile, named by the SHA-256 of
/// everything that decides NVRTC's output: its version, the output kind, the
/// name, the source, the headers, the options (the architecture included)
/// and the name expressions. [`Compiled::cache`] says what happened. The
/// directory is [`CACHE_ENV`] (a directory, or `off`), else the user's cache
/// directory (`~/.cache/cuda-api/nvrtc` on Linux); [`Program::cache`]`(false)`
/// turns it off for one program.
///
/// The cache is a trust root. An entry is handed back as the compiled output
/// of this source, and kernels declared on it are launched with the bounds
/// the *source* justifies: whoever writes the directory decides what runs.
/// So:
///
/// - every entry stores the SHA-256 of its contents (the image, the lowered
///   names, the log), checked on every read: a truncated or corrupted entry
///   is compiled again and replaced ([`CacheOutcome::Replaced`]);
/// - the safe roads (the default directory and [`CACHE_ENV`], which only
///   this process's environment sets: `std::env::set_var` is `unsafe`) read
///   a directory only when, on Unix, it and the entry belong to the
///   effective user, are no symbolic links, and have no group or other write
///   bit; otherwise the cache is skipped ([`CacheOutcome::Off`], with a
///   warning through `log`). The directory is made with mode 0700, entries
///   with 0600, written to a temporary file and renamed into place;
/// - any other directory is [`Program::cache_dir`], `unsafe`.
///
/// # Safety
///
/// Reading a cache directory that others can write is the caller's promise
/// ([`Program::cache_dir`]): the content hash detects corruption, not an
/// attacker, who can store a matching hash with any image.
///
/// ```no_run
/// use cuda_api::{Context, CudaDevice, Program};
/// # fn main() -> cuda_api::CudaResult<()> {
/// let dev = CudaDevice::get(0)?;
/// let ctx = Context::primary(&dev)?;
/// let src = r#"
/// template <typename T>
/// __global__ void scale(T *x, T a, unsigned n) {
///     unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
///     if (i < n) x[i] *= a;
/// }"#;
/// let compiled = Program::new("scale.cu", src)
///     .name_expression("scale<float>")
///     .for_device(&dev)?
///     .compile()?;
/// let module = compiled.load(&ctx)?;
/// let scale = module.function(compiled.lowered_name("scale<float>")?)?;
/// # let _ = scale; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Program {
    name: String,
    source: String,
    headers: Vec<(String, String)>,
    options: Vec<String>,
    name_expressions: Vec<String>,
    arch: Option<ComputeCapability>,
    driver_version: Option<i32>,
    output: Option<Output>,
    cache: CachePolicy,
}

impl Program {
    /// A program named `name` (the file name its diagnostics use, e.g.
    /// `kernel.cu`) holding `source`.
    pub fn new(name: impl Into<String>, source: impl Into<String>) -> Self {
        Program {
            name: name.into(),
            source: source.into(),
            headers: Vec::new(),
            options: Vec::new(),
            name_expressions: Vec::new(),
            arch: None,
            driver_version: None,
            output: None,
            cache: CachePolicy::Default,
        }
    }

    /// A header the source can `#include "name"`, with its text.
    pub fn header(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.headers.push((name.into(), text.into()));
        self
    }

    /// An NVRTC option, e.g. `-std=c++17`, `--use_fast_math`, `-DN=4`. The
    /// architecture is set with [`Program::arch`] or [`Program::for_device`],
    /// never as an option.
    pub fn option(mut self, option: impl Into<String>) -> Self {
        self.options.push(option.into());
        self
    }

    /// A name expression, e.g. `scale<float>` or `&kernel`, whose lowered
    /// (mangled) name [`Compiled::lowered_name`] gives after the compile:
    /// how a template instantiation is found and kept.
    pub fn name_expression(mut self, expression: impl Into<String>) -> Self {
        self.name_expressions.push(expression.into());
        self
    }

    /// Compiles for compute capability `cc`; the driver is unknown, so the
    /// default output is PTX (see [`Output::choose`]) unless
    /// [`Program::driver_version`] says which driver will load it.
    pub fn arch(mut self, cc: ComputeCapability) -> Self {
        self.arch = Some(cc);
        self
    }

    /// The CUDA version of the driver that will load the result (as
    /// [`driver_version`](crate::driver_version) gives it, e.g. 13000), for
    /// the choice of [`Output`].
    pub fn driver_version(mut self, version: i32) -> Self {
        self.driver_version = Some(version);
        self
    }

    /// Compiles for `device`: its compute capability, and the installed
    /// driver's version for the choice of [`Output`].
    ///
    /// # Errors
    ///
    /// A driver error when the device's attributes or the driver version
    /// cannot be read.
    pub fn for_device(self, device: &CudaDevice) -> CudaResult<Self> {
        let (major, minor) = device.compute_capability()?;
        let driver = driver_version()?;
        Ok(self
            .arch(ComputeCapability::new(major as u32, minor as u32))
            .driver_version(driver))
    }

    /// Asks for PTX or a cubin instead of the default (see [`Output::choose`]).
    pub fn output(mut self, output: Output) -> Self {
        self.output = Some(output);
        self
    }

    /// Turns the on-disk cache on (the default: [`CACHE_ENV`], else the
    /// user's cache directory) or off for this program.
    pub fn cache(mut self, on: bool) -> Self {
        self.cache = if on {
            CachePolicy::Default
        } else {
            CachePolicy::Off
        };
        self
    }

    /// Keeps results in `dir` (made if missing), without the ownership and
    /// permission checks the default directory gets; each entry's content
    /// hash is still checked on read.
    ///
    /// # Safety
    ///
    /// Everyone who can write to `dir` is trusted: an entry there is handed
    /// back as the compiled output of this program's source, and kernels
    /// declared on it (an `unsafe` promise about what the source does) are
    /// launched with the bounds the source justifies. A writer who stores an
    /// entry with a matching key and content hash makes any code run as
    /// this program: the hash detects corruption, not an attacker. See
    /// [`Program`]'s section on the cache for the whole contract.
    pub unsafe fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache = CachePolicy::Trusted(dir.into());
        self
    }

    /// The program's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compiles the program (or reads it from the cache): PTX or a cubin for
    /// the target, the lowered name of each name expression, and NVRTC's log.
    ///
    /// # Errors
    ///
    /// - [`CudaError::InvalidArgument`] for no target (neither
    ///   [`Program::arch`] nor [`Program::for_device`]), an architecture
    ///   given as an option, or a NUL byte in the source, a name, a header or
    ///   an option;
    /// - [`CudaError::NvrtcUnavailable`] when no NVRTC loads (what to install);
    /// - [`CudaError::PtxRefused`] for PTX asked of an NVRTC newer than the
    ///   driver;
    /// - [`CudaError::Compile`] when NVRTC refuses the source or an option:
    ///   its log as `file:line` diagnostics, the options and its version;
    /// - [`CudaError::Nvrtc`] for any other NVRTC failure.
    pub fn compile(&self) -> CudaResult<Compiled> {
        let call = "Program::compile";
        let arch = self.arch.ok_or_else(|| {
            CudaError::invalid_argument(
                call,
                "target",
                format!(
                    "program `{}` has no target architecture; call .for_device(&device) or .arch(ComputeCapability::new(9, 0)) first",
                    self.name
                ),
            )
        })?;
        if let Some(o) = self.options.iter().find(|o| is_arch_option(o)) {
            return Err(CudaError::invalid_argument(
                call,
                "options",
                format!(
                    "program `{}`: the option `{o}` sets the architecture, which Program chooses with the output; use .arch(ComputeCapability) or .for_device(&device) instead",
                    self.name
                ),
            ));
        }
        let (major, minor) = nvrtc::version()?;
        let nvrtc_version = (major * 1000 + minor * 10) as u32;
        let output =
            Output::choose(nvrtc_version, self.driver_version, self.output).map_err(|mut e| {
                e.program = self.name.clone();
                CudaError::PtxRefused(e)
            })?;
        let mut options = self.options.clone();
        options.push(match output {
            Output::Ptx => format!("--gpu-architecture=compute_{}{}", arch.major, arch.minor),
            Output::Cubin => format!("--gpu-architecture=sm_{}{}", arch.major, arch.minor),
        });

        let key = cache::Key {
            nvrtc_version,
            output,
            name: &self.name,
            source: &self.source,
            headers: &self.headers,
            options: &options,
            name_expressions: &self.name_expressions,
        };
        let dir = match &self.cache {
            CachePolicy::Off => None,
            CachePolicy::Default => cache::default_dir(),
            CachePolicy::Trusted(d) => Some(cache::Dir::trusted(d.clone())),
            #[cfg(test)]
            CachePolicy::Checked(d) => Some(cache::Dir::checked(d.clone())),
        };
        let mut outcome = CacheOutcome::Off;
        if let Some(dir) = &dir {
            match dir.read(&key) {
                cache::Read::Hit(entry) => {
                    return Ok(Compiled::from_entry(
                        self,
                        entry,
                        output,
                        arch,
                        nvrtc_version,
                        CacheOutcome::Hit,
                    ));
                }
                cache::Read::Miss => outcome = CacheOutcome::Miss,
                cache::Read::Corrupt(why) => {
                    log::warn!(
                        "cuda-api: NVRTC cache entry for program `{}` refused ({why}); compiling again",
                        self.name
                    );
                    outcome = CacheOutcome::Replaced;
                }
                cache::Read::Untrusted(why) => {
                    log::warn!(
                        "cuda-api: NVRTC cache not used for program `{}`: {why}",
                        self.name
                    );
                }
            }
        }
        let entry = self.run_nvrtc(&options, output, nvrtc_version)?;
        if let Some(dir) = &dir
            && outcome != CacheOutcome::Off
            && let Err(why) = dir.write(&key, &entry)
        {
            log::warn!(
                "cuda-api: NVRTC cache entry for program `{}` not written: {why}",
                self.name
            );
        }
        Ok(Compiled::from_entry(
            self,
            entry,
            output,
            arch,
            nvrtc_version,
            outcome,
        ))
    }

    /// Creates, compiles and reads an NVRTC program.
    fn run_nvrtc(
        &self,
        options: &[String],
        output: Output,
        nvrtc_version: u32,
    ) -> CudaResult<cache::Entry> {
        let call = "Program::compile";
        let c = |text: &str, what: &str| {
            CString::new(text).map_err(|_| {
                CudaError::invalid_argument(
                    call,
                    what,
                    format!("program `{}`: the {what} holds a NUL byte", self.name),
                )
            })
        };
        let source = c(&self.source, "source")?;
        let name = c(&self.name, "name")?;
        let header_texts = self
            .headers
            .iter()
            .map(|(_, t)| c(t, "header"))
            .collect::<CudaResult<Vec<_>>>()?;
        let header_names = self
            .headers
            .iter()
            .map(|(n, _)| c(n, "header name"))
            .collect::<CudaResult<Vec<_>>>()?;
        let c_options = options
            .iter()
            .map(|o| c(o, "option"))
            .collect::<CudaResult<Vec<_>>>()?;
        let expressions = self
            .name_expressions
            .iter()
            .map(|e| c(e, "name expression"))
            .collect::<CudaResult<Vec<_>>>()?;
        let ptrs = |v: &[CString]| v.iter().map(|s| s.as_ptr()).collect::<Vec<*const c_char>>();
        let (texts, names, opts) = (ptrs(&header_texts), ptrs(&header_names), ptrs(&c_options));

        // SAFETY: the header texts and names are arrays of live C strings
        // of the same length, alive for the call.
        let raw = unsafe {
            nvrtc::create_program(
                &source,
                Some(&name),
                Some(&texts).filter(|t| !t.is_empty()).map(|t| t.as_slice()),
                Some(&names).filter(|t| !t.is_empty()).map(|t| t.as_slice()),
            )
        }?;
        let prog = Handle(raw);
        for e in &expressions {
            // SAFETY: `prog` is live (destroyed only by `Handle`'s drop).
            unsafe { nvrtc::add_name_expression(prog.0, e) }?;
        }
        // SAFETY: `prog` is live; `opts` holds live C strings.
        let compiled = unsafe { nvrtc::compile_program(prog.0, Some(&opts)) };
        let log = prog.log()?;
        match compiled {
            Ok(()) => {}
            Err(CudaError::Nvrtc { code, .. })
                if code == nvrtcResult::NVRTC_ERROR_COMPILATION
                    || code == nvrtcResult::NVRTC_ERROR_INVALID_OPTION =>
            {
                return Err(CudaError::Compile(Box::new(CompileError::new(
                    self.name.clone(),
                    nvrtc_version,
                    options.to_vec(),
                    log,
                ))));
            }
            Err(e) => return Err(e),
        }
        let image = match output {
            Output::Ptx => {
                // SAFETY: `prog` is live.
                let size = unsafe { nvrtc::get_ptx_size(prog.0) }?;
                let mut buf = vec![0u8; size.max(1)];
                // SAFETY: `buf` holds the size NVRTC gave.
                unsafe { nvrtc::get_ptx(prog.0, buf.as_mut_ptr().cast()) }?;
                // The PTX text without its NUL.
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                buf.truncate(end);
                buf
            }
            Output::Cubin => {
                // SAFETY: `prog` is live.
                let size = unsafe { nvrtc::get_cubin_size(prog.0) }?;
                let mut buf = vec![0u8; size];
                if size > 0 {
                    // SAFETY: `buf` holds the size NVRTC gave.
                    unsafe { nvrtc::get_cubin(prog.0, buf.as_mut_ptr().cast()) }?;
                }
                buf
            }
        };
        let mut lowered = Vec::with_capacity(expressions.len());
        for (text, e) in self.name_expressions.iter().zip(&expressions) {
            let mut ptr: *const c_char = std::ptr::null();
            // SAFETY: `prog` is live and compiled; `ptr` is a local out-pointer.
            unsafe { nvrtc::get_lowered_name(prog.0, e, &mut ptr) }?;
            if ptr.is_null() {
                return Err(CudaError::Nvrtc {
                    call: "nvrtcGetLoweredName",
                    code: nvrtcResult::NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID,
                });
            }
            // SAFETY: NVRTC returned a NUL-terminated name owned by `prog`,
            // which is alive; it is copied before `prog` is destroyed.
            let name = unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned();
            lowered.push((text.clone(), name));
        }
        Ok(cache::Entry {
            image,
            lowered,
            log,
        })
    }
}

/// True for an option naming the target architecture.
fn is_arch_option(option: &str) -> bool {
    let o = option.trim();
    o == "-arch"
        || o.starts_with("-arch=")
        || o.starts_with("-arch ")
        || o.starts_with("--gpu-architecture")
}

/// An NVRTC program handle, destroyed when dropped.
struct Handle(nvrtcProgram);

impl Handle {
    /// NVRTC's log of the last compile.
    fn log(&self) -> CudaResult<String> {
        // SAFETY: the handle is live.
        let size = unsafe { nvrtc::get_program_log_size(self.0) }?;
        let mut buf = vec![0u8; size.max(1)];
        // SAFETY: `buf` holds the size NVRTC gave.
        unsafe { nvrtc::get_program_log(self.0, buf.as_mut_ptr().cast()) }?;
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvrtcCreateProgram and is destroyed
        // once, here.
        if let Err(e) = unsafe { nvrtc::destroy_program(&mut self.0) } {
            log::warn!("cuda-api: an NVRTC program was not destroyed: {e}");
        }
    }
}

/// What a [`Program`] compiled to: PTX or a cubin for one architecture, the
/// lowered names of its name expressions, and NVRTC's log (warnings).
#[derive(Debug, Clone)]
pub struct Compiled {
    program: String,
    image: Vec<u8>,
    output: Output,
    arch: ComputeCapability,
    nvrtc_version: u32,
    lowered: Vec<(String, String)>,
    log: String,
    cache: CacheOutcome,
}

impl Compiled {
    fn from_entry(
        program: &Program,
        entry: cache::Entry,
        output: Output,
        arch: ComputeCapability,
        nvrtc_version: u32,
        cache: CacheOutcome,
    ) -> Self {
        Compiled {
            program: program.name.clone(),
            image: entry.image,
            output,
            arch,
            nvrtc_version,
            lowered: entry.lowered,
            log: entry.log,
            cache,
        }
    }

    /// The image: PTX text (without a NUL) or cubin bytes.
    pub fn image(&self) -> &[u8] {
        &self.image
    }

    /// The PTX text, when the output is PTX.
    pub fn ptx(&self) -> Option<&str> {
        match self.output {
            Output::Ptx => std::str::from_utf8(&self.image).ok(),
            Output::Cubin => None,
        }
    }

    /// PTX or cubin.
    pub fn output(&self) -> Output {
        self.output
    }

    /// The architecture compiled for.
    pub fn arch(&self) -> ComputeCapability {
        self.arch
    }

    /// The version of the NVRTC that compiled it, e.g. 13000.
    pub fn nvrtc_version(&self) -> u32 {
        self.nvrtc_version
    }

    /// NVRTC's log (warnings; empty for a clean compile).
    pub fn log(&self) -> &str {
        &self.log
    }

    /// Whether it came from the cache, and what the cache did.
    pub fn cache(&self) -> CacheOutcome {
        self.cache
    }

    /// The lowered (mangled) name of a name expression registered with
    /// [`Program::name_expression`], for [`Module::function`] or
    /// [`Module::kernel`].
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] naming the expressions registered when
    /// `expression` is not one of them.
    pub fn lowered_name(&self, expression: &str) -> CudaResult<&str> {
        self.lowered
            .iter()
            .find(|(e, _)| e == expression)
            .map(|(_, l)| l.as_str())
            .ok_or_else(|| {
                let known: Vec<&str> = self.lowered.iter().map(|(e, _)| e.as_str()).collect();
                CudaError::invalid_argument(
                    "Compiled::lowered_name",
                    "expression",
                    format!(
                        "program `{}` registered no name expression `{expression}` (it has {known:?}); add it with Program::name_expression before compiling",
                        self.program
                    ),
                )
            })
    }

    /// Loads the image into `ctx` ([`Module::from_image`]).
    ///
    /// # Errors
    ///
    /// As for [`Module::from_image`].
    pub fn load(&self, ctx: &Context) -> CudaResult<Module> {
        Module::from_image(ctx, &self.image)
    }

    /// Loads the image as a context-less [`Library`] ([`Library::from_image`]).
    ///
    /// # Errors
    ///
    /// As for [`Library::from_image`].
    pub fn load_library(&self) -> CudaResult<Library> {
        Library::from_image(&self.image)
    }
}

#[cfg(test)]
mod tests;
