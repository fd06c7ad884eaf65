//! Errors: every failure is a value naming the call, the kernel, the
//! parameter, the limit and the value, and saying what to do.

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use cuda_sys::loader::LoaderError;
use cuda_sys::{CUlogIterator, CUresult};

use crate::compile_error::{CompileError, PtxRefused};
use crate::image::ImageError;
use crate::launch::LaunchError;
use crate::target::NoImageError;

/// An argument that does not fit the kernel's declared parameters.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgError {
    /// A value of another type than the parameter's.
    Type {
        /// Kernel name.
        kernel: String,
        /// Zero-based parameter index.
        index: usize,
        /// Parameter name (or `#index`).
        name: String,
        /// The declared type.
        expected: String,
        /// What was given.
        given: String,
        /// What to do.
        hint: String,
    },
    /// Raw bytes of another size than the parameter's.
    Size {
        /// Kernel name.
        kernel: String,
        /// Zero-based parameter index.
        index: usize,
        /// Parameter name (or `#index`).
        name: String,
        /// The parameter's size in bytes.
        expected: usize,
        /// Bytes given.
        given: usize,
    },
    /// More values pushed than the kernel has parameters.
    TooMany {
        /// Kernel name.
        kernel: String,
        /// The kernel's parameter count.
        count: usize,
    },
    /// A parameter index past the last one.
    NoSuchIndex {
        /// Kernel name.
        kernel: String,
        /// Index given.
        index: usize,
        /// The kernel's parameter count.
        count: usize,
    },
    /// A parameter name the declaration does not have.
    NoSuchName {
        /// Kernel name.
        kernel: String,
        /// Name given.
        name: String,
        /// The declared names.
        known: Vec<String>,
    },
    /// A launch with parameters not yet set.
    Missing {
        /// Kernel name.
        kernel: String,
        /// The first parameter not set.
        index: usize,
        /// Its name (or `#index`).
        name: String,
        /// How many are not set.
        missing: usize,
    },
    /// A block made for another kernel.
    WrongKernel {
        /// The kernel launched.
        kernel: String,
        /// The kernel the block was made for.
        block_kernel: String,
    },
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Type {
                kernel,
                index,
                name,
                expected,
                given,
                hint,
            } => write!(
                f,
                "kernel '{kernel}' argument {index} ('{name}') expects {expected} but was given {given}; {hint}"
            ),
            ArgError::Size {
                kernel,
                index,
                name,
                expected,
                given,
            } => write!(
                f,
                "kernel '{kernel}' argument {index} ('{name}') is {expected} bytes but {given} bytes were given; pass exactly {expected} bytes"
            ),
            ArgError::TooMany { kernel, count } => write!(
                f,
                "kernel '{kernel}' takes {count} argument(s) and all are pushed; set one by index or name to change it"
            ),
            ArgError::NoSuchIndex {
                kernel,
                index,
                count,
            } => write!(
                f,
                "kernel '{kernel}' has no argument {index}: it takes {count} (indices 0 to {})",
                count.saturating_sub(1)
            ),
            ArgError::NoSuchName {
                kernel,
                name,
                known,
            } => write!(
                f,
                "kernel '{kernel}' has no parameter named '{name}'; its parameters are: {}",
                known.join(", ")
            ),
            ArgError::Missing {
                kernel,
                index,
                name,
                missing,
            } => write!(
                f,
                "kernel '{kernel}' launched with {missing} argument(s) not set, the first being {index} ('{name}'); set every argument before launching"
            ),
            ArgError::WrongKernel {
                kernel,
                block_kernel,
            } => write!(
                f,
                "an argument block made for kernel '{block_kernel}' was given to kernel '{kernel}'; make the block with that kernel's args()"
            ),
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for ArgError {}

/// A `CUresult` other than success, with the call it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct DriverError {
    /// The driver function, e.g. `cuLaunchCooperativeKernel`.
    pub call: &'static str,
    /// The code it returned.
    pub code: CUresult,
    /// What was being done, where known: `kernel 'saxpy' on NVIDIA H200`.
    pub context: Option<String>,
    /// The lines the driver wrote to its error log for this failure (CUDA
    /// 12.9+ drivers, `cuLogsDumpToMemory`): the lines this thread logged
    /// since its previous failed call that cuda-api turned into an error,
    /// at most [`DRIVER_LOG_LINES`]. The driver's log is per process; each
    /// line names the thread that wrote it, and lines of other threads are
    /// kept for those threads' own errors. Empty on older drivers, for
    /// `CUDA_ERROR_NOT_READY` (a polled status), or when switched off with
    /// [`set_driver_log_in_errors`].
    pub driver_log: Vec<String>,
}

impl DriverError {
    /// An error from `call`.
    pub fn new(call: &'static str, code: CUresult) -> Self {
        DriverError {
            call,
            code,
            context: None,
            driver_log: Vec::new(),
        }
    }
    /// The code's name, e.g. `CUDA_ERROR_ILLEGAL_ADDRESS` (`None` if unknown to this crate).
    pub fn name(&self) -> Option<&'static str> {
        self.code.name()
    }
    /// The code's number.
    pub fn number(&self) -> u32 {
        self.code.0
    }
    /// One line on what the code means, from our catalogue.
    pub fn description(&self) -> Option<&'static str> {
        self.code.description()
    }
    /// Whether the context is unusable after this error (every later call on it fails).
    pub fn is_sticky(&self) -> bool {
        self.code.is_sticky()
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed", self.call)?;
        if let Some(c) = &self.context {
            write!(f, " ({c})")?;
        }
        match self.code.name() {
            Some(n) => write!(f, " with {n} ({})", self.code.0)?,
            None => write!(
                f,
                " with CUresult {} (unknown to cuda-api; the driver may be newer than CUDA 13.5)",
                self.code.0
            )?,
        }
        if let Some(d) = self.code.description() {
            write!(f, ": {}", d.trim_end_matches('.'))?;
        }
        if self.is_sticky() {
            f.write_str("; this error is sticky: the context is unusable and every later call on it fails, so restart the process")?;
        }
        if !self.driver_log.is_empty() {
            write!(f, "; the driver's log: {}", self.driver_log.join(" | "))?;
        }
        Ok(())
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.code)
    }
}

/// A kernel declaration that does not match the kernel's parameters.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// The kernel has a different number of parameters.
    Count {
        /// Kernel name.
        kernel: String,
        /// Parameters the driver reports.
        expected: usize,
        /// Parameters declared.
        declared: usize,
    },
    /// One parameter has a different size.
    Size {
        /// Kernel name.
        kernel: String,
        /// Zero-based parameter index.
        index: usize,
        /// Size in bytes the driver reports.
        expected: usize,
        /// Size in bytes of the declared Rust type.
        declared: usize,
        /// The declared type.
        declared_type: String,
        /// The declared parameter name (the index when none was given).
        name: String,
    },
    /// One parameter sits at a different offset than the declared types imply:
    /// the declared type has a different alignment than the kernel's.
    Offset {
        /// Kernel name.
        kernel: String,
        /// Zero-based parameter index.
        index: usize,
        /// The declared parameter name (the index when none was given).
        name: String,
        /// Byte offset the driver reports.
        expected: usize,
        /// Byte offset the declared types imply.
        declared: usize,
        /// The declared type.
        declared_type: String,
        /// Its alignment in bytes.
        declared_align: usize,
    },
}

/// `3 ('n')`, or `3` for an unnamed parameter.
fn param_desc(index: usize, name: &str) -> String {
    if name.is_empty() || name.starts_with('#') {
        index.to_string()
    } else {
        format!("{index} ('{name}')")
    }
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignatureError::Count {
                kernel,
                expected,
                declared,
            } => write!(
                f,
                "kernel '{kernel}' takes {expected} parameter(s) but was declared with {declared}; declare one Rust type per kernel parameter, in order"
            ),
            SignatureError::Size {
                kernel,
                index,
                expected,
                declared,
                declared_type,
                name,
            } => write!(
                f,
                "kernel '{kernel}' parameter {} is {expected} bytes but was declared as {declared_type} ({declared} bytes); declare a type of {expected} bytes for it",
                param_desc(*index, name)
            ),
            SignatureError::Offset {
                kernel,
                index,
                name,
                expected,
                declared,
                declared_type,
                declared_align,
            } => write!(
                f,
                "kernel '{kernel}' parameter {} is at byte offset {expected} but the declared types put it at {declared} ({declared_type}, aligned to {declared_align} B); the kernel's type has another alignment: give the Rust type the C type's alignment (for example #[repr(C, align(16))]) and check the parameters before it",
                param_desc(*index, name)
            ),
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for SignatureError {}

/// Every error of cuda-api.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CudaError {
    /// A driver call failed.
    Driver(DriverError),
    /// No driver library could be loaded.
    DriverNotFound {
        /// Each library path tried, with why it failed.
        tried: Vec<(String, String)>,
    },
    /// The installed driver lacks a function this call needs.
    NotSupported {
        /// The C function, e.g. `cuKernelGetParamInfo`.
        function: String,
        /// The CUDA version whose ABI is needed, e.g. 12040.
        needs_version: u32,
        /// The installed driver's CUDA version, if known.
        driver_version: Option<i32>,
    },
    /// The call needs a driver function that this build of cuda-sys has no
    /// entry for (its specs do not know it).
    UnknownFunction {
        /// The C function asked for.
        function: String,
    },
    /// A launch was refused before reaching the driver.
    Launch(LaunchError),
    /// A run-time argument does not fit the kernel's declared parameter.
    Argument(Box<ArgError>),
    /// A kernel declaration does not match the kernel.
    Signature(SignatureError),
    /// A PTX module targets a newer PTX ISA than the driver accepts.
    PtxTooNew {
        /// The module's `.version`, e.g. `9.5`.
        ptx_isa: String,
        /// The newest PTX ISA the driver accepts, where known, e.g. `9.0`.
        driver_max_isa: Option<String>,
        /// The driver's CUDA version, e.g. 13000.
        driver_version: Option<i32>,
    },
    /// An image (cubin, fatbin or PTX) was refused before the driver read
    /// it: truncated, corrupted, or not an image (see [`check_image`](crate::check_image)).
    /// The error names the call, the byte offset and what is wrong.
    InvalidImage(ImageError),
    /// None of a module's images runs on the device (see
    /// [`choose_image`](crate::choose_image)): the error lists each image and
    /// what the device and driver need.
    NoImage(NoImageError),
    /// A stream priority outside the range the context allows (see
    /// [`crate::PriorityRange`]); the driver would clamp it silently.
    PriorityOutOfRange {
        /// The priority asked for.
        priority: i32,
        /// The lowest priority (largest number) allowed.
        least: i32,
        /// The highest priority (smallest number) allowed.
        greatest: i32,
        /// The device, for the message.
        device: String,
    },
    /// An argument cannot be passed as given.
    InvalidArgument {
        /// The call or operation.
        call: String,
        /// The parameter.
        parameter: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// Peer access cannot be given (see [`PeerError`]).
    Peer(PeerError),
    /// The context current on the calling thread was made outside cuda-api
    /// (neither a device's primary context nor one [`crate::Context::new`]
    /// made and still holds), so [`crate::Context::current`] cannot hand
    /// out a safe handle to it.
    ForeignContext {
        /// Ordinal of the context's device.
        device: i32,
    },
    /// Work refused on memory lent to another library
    /// ([`Allocation::lend`](crate::Allocation::lend)), whose work on it
    /// cuda-api can neither see nor order.
    Lent {
        /// The call refused.
        call: String,
        /// The memory's device address.
        address: u64,
        /// Its size in bytes.
        bytes: usize,
    },
    /// An NVRTC call failed.
    Nvrtc {
        /// The C function, e.g. `nvrtcCompileProgram`.
        call: &'static str,
        /// What it returned.
        code: cuda_sys::nvrtc::nvrtcResult,
    },
    /// NVRTC, or the NVRTC function a call needs, is not available: no
    /// library loads (the libraries tried and what to install), or the loaded
    /// NVRTC is older than the function (both versions).
    NvrtcUnavailable(cuda_sys::nvrtc::NvrtcLoadError),
    /// NVRTC could not compile a [`Program`](crate::Program): its log as
    /// `file:line` diagnostics, the options and the NVRTC version.
    Compile(Box<CompileError>),
    /// PTX was asked of a [`Program`](crate::Program) while the loaded NVRTC
    /// is newer than the driver (both versions named).
    PtxRefused(PtxRefused),
}

impl CudaError {
    /// An [`CudaError::InvalidArgument`].
    pub fn invalid_argument(
        call: impl Into<String>,
        parameter: impl Into<String>,
        message: String,
    ) -> Self {
        CudaError::InvalidArgument {
            call: call.into(),
            parameter: parameter.into(),
            message,
        }
    }
    /// The driver error inside, if this is one.
    pub fn driver(&self) -> Option<&DriverError> {
        match self {
            CudaError::Driver(d) => Some(d),
            _ => None,
        }
    }
    /// Whether the context is unusable after this error.
    pub fn is_sticky(&self) -> bool {
        self.driver().is_some_and(DriverError::is_sticky)
    }
    /// Adds what was being done (kernel, device) to a driver error.
    pub fn with_context(mut self, context: impl FnOnce() -> String) -> Self {
        if let CudaError::Driver(d) = &mut self {
            d.context = Some(context());
        }
        self
    }
}

fn version(v: i64) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaError::Driver(d) => d.fmt(f),
            CudaError::DriverNotFound { tried } => LoaderError::LibraryNotFound {
                tried: tried.clone(),
            }
            .fmt(f),
            CudaError::NotSupported {
                function,
                needs_version,
                driver_version,
            } => {
                write!(
                    f,
                    "{function} needs a driver supporting CUDA {} or later",
                    version(*needs_version as i64)
                )?;
                match driver_version {
                    Some(d) => write!(
                        f,
                        ", but the installed driver supports CUDA {}; update the NVIDIA driver",
                        version(*d as i64)
                    ),
                    None => f.write_str("; update the NVIDIA driver"),
                }
            }
            CudaError::UnknownFunction { function } => write!(
                f,
                "{function} is not a driver function this build of cuda-sys knows (not in its specs); check the name, or add it to specs/ and run `cargo xtask codegen`"
            ),
            CudaError::Launch(e) => e.fmt(f),
            CudaError::Argument(e) => e.fmt(f),
            CudaError::Signature(e) => e.fmt(f),
            CudaError::InvalidImage(e) => e.fmt(f),
            CudaError::NoImage(e) => e.fmt(f),
            CudaError::PtxTooNew {
                ptx_isa,
                driver_max_isa,
                driver_version,
            } => {
                write!(
                    f,
                    "the module's PTX is ISA {ptx_isa}, newer than this driver accepts"
                )?;
                match (driver_max_isa, driver_version) {
                    (Some(m), Some(d)) => write!(
                        f,
                        " (the CUDA {} driver takes PTX ISA up to {m})",
                        version(*d as i64)
                    )?,
                    (None, Some(d)) => write!(f, " (driver CUDA {})", version(*d as i64))?,
                    _ => {}
                }
                f.write_str("; compile with an nvcc no newer than the driver, update the driver, or load cubin/fatbin instead")
            }
            CudaError::PriorityOutOfRange {
                priority,
                least,
                greatest,
                device,
            } => write!(
                f,
                "stream priority {priority} refused: {device} allows priorities from {greatest} (greatest) to {least} (least, the default), lower numbers first; use a value in {greatest}..={least}"
            ),
            CudaError::InvalidArgument {
                call,
                parameter,
                message,
            } => write!(f, "{call}: argument `{parameter}`: {message}"),
            CudaError::Peer(e) => e.fmt(f),
            CudaError::ForeignContext { device } => write!(
                f,
                "Context::current: the context current on this thread (on cuda:{device}) was made outside cuda-api, which cannot hold it safely (its maker may destroy it); make a cuda-api context current with Context::bind, or use CudaDevice::current for its device"
            ),
            CudaError::Lent {
                call,
                address,
                bytes,
            } => write!(
                f,
                "{call}: the {bytes} bytes at {address:#x} are lent to another library (Allocation::lend), whose work on them cannot be ordered with work queued here; end the loan first (drop the value that borrows them), or copy the data"
            ),
            CudaError::Nvrtc { call, code } => write!(f, "{call} failed with {code}"),
            CudaError::NvrtcUnavailable(e) => e.fmt(f),
            CudaError::Compile(e) => e.fmt(f),
            CudaError::PtxRefused(e) => e.fmt(f),
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for CudaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CudaError::Driver(d) => Some(d),
            CudaError::Launch(e) => Some(e),
            CudaError::Argument(e) => Some(&**e),
            CudaError::Signature(e) => Some(e),
            CudaError::InvalidImage(e) => Some(e),
            CudaError::NoImage(e) => Some(e),
            CudaError::Peer(e) => Some(e),
            _ => None,
        }
    }
}

impl From<LoaderError> for CudaError {
    fn from(e: LoaderError) -> Self {
        match e {
            LoaderError::LibraryNotFound { tried } => CudaError::DriverNotFound { tried },
            LoaderError::SymbolNotFound {
                function,
                needs_version,
                driver_version,
                ..
            } => CudaError::NotSupported {
                function,
                needs_version,
                driver_version,
            },
            LoaderError::UnknownFunction(function) => CudaError::UnknownFunction { function },
        }
    }
}

impl From<LaunchError> for CudaError {
    fn from(e: LaunchError) -> Self {
        CudaError::Launch(e)
    }
}

impl From<ArgError> for CudaError {
    fn from(e: ArgError) -> Self {
        CudaError::Argument(Box::new(e))
    }
}

impl From<ImageError> for CudaError {
    fn from(e: ImageError) -> Self {
        CudaError::InvalidImage(e)
    }
}

impl From<SignatureError> for CudaError {
    fn from(e: SignatureError) -> Self {
        CudaError::Signature(e)
    }
}

/// cuda-api's result type.
pub type CudaResult<T, E = CudaError> = std::result::Result<T, E>;

/// Turns a `CUresult` that `call` (a driver function's C name) returned into
/// a `CudaResult`: what every cuda-api call does, for code that calls
/// `cuda_sys` directly. Success costs one comparison.
///
/// # Errors
///
/// A failing code is [`CudaError::Driver`] naming `call`, with the lines the
/// driver logged for it ([`DriverError::driver_log`], CUDA 12.9+ drivers); a
/// `CUDA_ERROR_NOT_FOUND` caused by the loader is
/// [`CudaError::DriverNotFound`] or [`CudaError::NotSupported`].
#[inline]
pub fn check(code: CUresult, call: &'static str) -> CudaResult<()> {
    if code.is_success() {
        return Ok(());
    }
    Err(fail(code, call))
}

/// `Ok` for `NVRTC_SUCCESS`, else the error naming `call` (used by the
/// generated thin layer over NVRTC).
///
/// # Errors
///
/// [`CudaError::NvrtcUnavailable`] when cuda-sys did not call NVRTC
/// ([`cuda_sys::nvrtc::NOT_AVAILABLE`]: no library, or one older than
/// `call`), else [`CudaError::Nvrtc`] with the code.
pub fn check_nvrtc(code: cuda_sys::nvrtc::nvrtcResult, call: &'static str) -> CudaResult<()> {
    if code.is_success() {
        return Ok(());
    }
    if code == cuda_sys::nvrtc::NOT_AVAILABLE
        && let Err(e) = cuda_sys::nvrtc::require(call)
    {
        return Err(CudaError::NvrtcUnavailable(e));
    }
    Err(CudaError::Nvrtc { call, code })
}

/// The one length that several slices sharing a C count must have, converted
/// to the count's C type (used by the generated thin layer).
///
/// `slices` lists each slice's Rust parameter name with its length, `None`
/// for an optional slice passed as `None` (it is not counted). Every present
/// slice must have the length of the first; with none present the count is
/// 0.
///
/// # Errors
///
/// [`CudaError::InvalidArgument`] naming `call` and the slice whose length
/// differs (the message names both slices and both lengths), or naming
/// `count` when the length does not fit `T`.
pub(crate) fn shared_len<T: TryFrom<usize>>(
    call: &'static str,
    count: &'static str,
    slices: &[(&'static str, Option<usize>)],
) -> CudaResult<T> {
    let mut first: Option<(&str, usize)> = None;
    for &(name, len) in slices {
        let Some(len) = len else { continue };
        match first {
            None => first = Some((name, len)),
            Some((first_name, first_len)) if first_len != len => {
                return Err(CudaError::invalid_argument(
                    call,
                    name,
                    format!(
                        "`{name}` has {len} elements but `{first_name}` has {first_len}; \
                         both are counted by `{count}`, so they must have the same length"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    let len = first.map_or(0, |(_, l)| l);
    T::try_from(len).map_err(|_| {
        CudaError::invalid_argument(
            call,
            count,
            format!("the length {len} does not fit the C type of `{count}`"),
        )
    })
}

#[cold]
fn fail(code: CUresult, call: &'static str) -> CudaError {
    if code == CUresult::CUDA_ERROR_NOT_FOUND
        && let Err(e) = cuda_sys::loader::resolve(call)
    {
        return e.into();
    }
    let mut e = DriverError::new(call, code);
    // `CUDA_ERROR_NOT_READY` is a status polled for (`cuStreamQuery`,
    // `cuEventQuery`), not a failure the driver explains: no log read.
    if code != CUresult::CUDA_ERROR_NOT_READY {
        e.driver_log = driver_log_since_last_failure();
    }
    CudaError::Driver(e)
}

/// At most this many of the driver's log lines are attached to one
/// [`DriverError`] (the newest).
pub const DRIVER_LOG_LINES: usize = 8;

static DRIVER_LOG_ON: AtomicBool = AtomicBool::new(true);

/// Lines of other threads kept for them are dropped beyond this many
/// threads (the oldest first).
const DRIVER_LOG_THREADS: usize = 64;

/// What has been read of the driver's log.
struct DriverLog {
    /// Where it was read up to: the `CUlogIterator` after the last
    /// failure's lines, `None` before the first.
    at: Option<CUlogIterator>,
    /// Lines read for one thread's failure that other threads wrote, kept
    /// for those threads' next errors: (thread, its newest lines).
    pending: Vec<(u64, Vec<String>)>,
}

static DRIVER_LOG: Mutex<DriverLog> = Mutex::new(DriverLog {
    at: None,
    pending: Vec::new(),
});

/// The calling thread as the driver's log names it: the second bracketed
/// field of a line, `[04:26:32.758][140534779737792][CUDA][E] ...`, is the
/// writer's `pthread_self()` on Linux. `None` where that is not known.
fn log_thread_id() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: pthread_self has no preconditions and cannot fail.
        Some(unsafe { libc::pthread_self() } as u64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The thread a line of the driver's log names, if it has the
/// `[time][thread][...]` form.
fn line_thread(line: &str) -> Option<u64> {
    let rest = line.strip_prefix('[')?;
    let (_, rest) = rest.split_once("][")?;
    let (thread, _) = rest.split_once(']')?;
    thread.parse().ok()
}

/// Splits newly read lines between the calling thread (`me`) and the
/// others: returns `me`'s lines (those kept for it earlier first), newest
/// last, at most [`DRIVER_LOG_LINES`], and keeps the other threads' lines
/// in `pending` (at most [`DRIVER_LOG_LINES`] each, for at most
/// [`DRIVER_LOG_THREADS`] threads). Lines naming no thread, and every line
/// when `me` is unknown, go to the caller.
fn route_log_lines(
    lines: Vec<String>,
    me: Option<u64>,
    pending: &mut Vec<(u64, Vec<String>)>,
) -> Vec<String> {
    let mut mine = match me.and_then(|me| pending.iter().position(|(t, _)| *t == me)) {
        Some(i) => pending.remove(i).1,
        None => Vec::new(),
    };
    for line in lines {
        match (me, line_thread(&line)) {
            (Some(me), Some(t)) if t != me => {
                let i = match pending.iter().position(|(p, _)| *p == t) {
                    Some(i) => i,
                    None => {
                        if pending.len() == DRIVER_LOG_THREADS {
                            pending.remove(0);
                        }
                        pending.push((t, Vec::new()));
                        pending.len() - 1
                    }
                };
                let kept = &mut pending[i].1;
                kept.push(line);
                let over = kept.len().saturating_sub(DRIVER_LOG_LINES);
                kept.drain(..over);
            }
            _ => mine.push(line),
        }
    }
    let skip = mine.len().saturating_sub(DRIVER_LOG_LINES);
    mine.drain(..skip);
    mine
}

/// Switches attaching the driver's log lines to [`DriverError`]s on (the
/// default) or off.
///
/// It costs nothing on calls that succeed: only a failed call reads the log
/// (`cuLogsDumpToMemory`, one driver call), and only on a driver that has it
/// (CUDA 12.9 or later). Off, [`DriverError::driver_log`] stays empty.
/// Switched back on, it starts from the log's current end: lines the driver
/// wrote while it was off (the failures of that time, which no error read)
/// are never attached to a later error.
pub fn set_driver_log_in_errors(on: bool) {
    let was = DRIVER_LOG_ON.swap(on, Ordering::Relaxed);
    if on && !was {
        skip_driver_log_to_its_end();
    }
}

/// Moves the read position to the driver's log's current end and forgets
/// the lines kept for other threads; nothing where the driver has no log.
fn skip_driver_log_to_its_end() {
    if cuda_sys::loader::symbol("cuLogsCurrent").is_none_or(|s| s.resolve().is_err()) {
        return;
    }
    let mut state = DRIVER_LOG.lock().unwrap_or_else(|p| p.into_inner());
    let mut it: CUlogIterator = 0;
    // SAFETY: `it` is a valid out-pointer; flags must be 0.
    if unsafe { cuda_sys::cuLogsCurrent(&mut it, 0) }.is_success() {
        state.at = Some(it);
        state.pending.clear();
    }
}

/// The driver's log lines this thread wrote since its previous failure (the
/// driver keeps the newest 25600 bytes), newest last, at most
/// [`DRIVER_LOG_LINES`].
fn driver_log_since_last_failure() -> Vec<String> {
    if !DRIVER_LOG_ON.load(Ordering::Relaxed) {
        return Vec::new();
    }
    let available = |name| cuda_sys::loader::symbol(name).is_some_and(|s| s.resolve().is_ok());
    if !available("cuLogsDumpToMemory") || !available("cuLogsCurrent") {
        return Vec::new();
    }
    let mut state = DRIVER_LOG.lock().unwrap_or_else(|p| p.into_inner());
    let DriverLog { at, pending } = &mut *state;
    // The driver's log holds at most 25600 bytes, and null-terminates.
    let mut buf = vec![0u8; 25_601];
    let mut size = buf.len();
    let r = match at.as_mut() {
        // SAFETY: `it` is an iterator the driver gave out, `buf` is writable
        // for `size` bytes and `size` is a valid in/out pointer.
        Some(it) => unsafe {
            cuda_sys::cuLogsDumpToMemory(it, buf.as_mut_ptr().cast(), &mut size, 0)
        },
        None => {
            // SAFETY: a null iterator dumps the whole log; the rest as above.
            let r = unsafe {
                cuda_sys::cuLogsDumpToMemory(
                    std::ptr::null_mut(),
                    buf.as_mut_ptr().cast(),
                    &mut size,
                    0,
                )
            };
            let mut it: CUlogIterator = 0;
            // SAFETY: `it` is a valid out-pointer; flags must be 0.
            if unsafe { cuda_sys::cuLogsCurrent(&mut it, 0) }.is_success() {
                *at = Some(it);
            }
            r
        }
    };
    if !r.is_success() {
        log::debug!("cuLogsDumpToMemory failed with {r}; the error carries no driver log");
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf[..size.min(buf.len())]);
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.trim_matches(['\0', ' ', '\r']).to_string())
        .filter(|l| !l.is_empty())
        .collect();
    route_log_lines(lines, log_thread_id(), pending)
}

/// Whether the installed driver has `function` (a C name, `"cuLogsCurrent"`)
/// at the ABI this build calls: `false` when no driver loads, when the
/// driver is older than the function's ABI version (it is then never asked),
/// when it lacks the entry point, or when the name is not a driver function
/// of cuda-sys's specs. Lets a program choose a path before calling; the
/// call itself would return [`CudaError::NotSupported`].
pub fn supports(function: &str) -> bool {
    cuda_sys::loader::resolve(function).is_ok()
}

/// Like [`supports`], with the reason when the driver lacks `function`.
///
/// # Errors
///
/// [`CudaError::NotSupported`] naming the function, the CUDA version its ABI
/// needs and the driver's; [`CudaError::DriverNotFound`] with the library
/// paths tried; [`CudaError::UnknownFunction`] for a name cuda-sys does not know.
pub fn require(function: &str) -> CudaResult<()> {
    cuda_sys::loader::resolve(function)
        .map(|_| ())
        .map_err(CudaError::from)
}

/// Why peer access cannot be given.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerError {
    /// Both sides are on the same device: there is no peer to reach, the
    /// device's kernels already reach its memory.
    SameDevice {
        /// The call, e.g. `Context::enable_peer_access`.
        call: &'static str,
        /// The device's ordinal.
        device: i32,
    },
    /// The hardware or the driver does not let `from` reach `to`
    /// (`cuDeviceCanAccessPeer` says 0).
    Unsupported {
        /// Ordinal of the device whose kernels would access.
        from: i32,
        /// Ordinal of the device whose memory would be accessed.
        to: i32,
    },
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerError::SameDevice { call, device } => write!(
                f,
                "{call}: both contexts are on cuda:{device}; a device is not its own peer and its kernels reach its memory without peer access, so pass a context of another device"
            ),
            PeerError::Unsupported { from, to } => write!(
                f,
                "cuda:{from} cannot access cuda:{to}'s memory (cuDeviceCanAccessPeer says 0); copy the data to cuda:{from} or use page-locked or managed memory"
            ),
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for PeerError {}

impl From<PeerError> for CudaError {
    fn from(e: PeerError) -> Self {
        CudaError::Peer(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failing NVRTC call names the call, the code and our description;
    /// a call cuda-sys did not make ([`cuda_sys::nvrtc::NOT_AVAILABLE`])
    /// says why instead.
    #[test]
    fn nvrtc_errors_name_the_call_or_why_nvrtc_was_not_called() {
        use cuda_sys::nvrtc::{NOT_AVAILABLE, NvrtcLoadError, nvrtcResult};
        assert_eq!(
            check_nvrtc(nvrtcResult::NVRTC_SUCCESS, "nvrtcVersion"),
            Ok(())
        );
        let e =
            check_nvrtc(nvrtcResult::NVRTC_ERROR_COMPILATION, "nvrtcCompileProgram").unwrap_err();
        assert_eq!(
            e.to_string(),
            "nvrtcCompileProgram failed with NVRTC_ERROR_COMPILATION (6): The source did not compile; the program log has the diagnostics."
        );
        let e = check_nvrtc(NOT_AVAILABLE, "nvrtcNoSuchFunction").unwrap_err();
        assert_eq!(
            e,
            CudaError::NvrtcUnavailable(NvrtcLoadError::UnknownFunction(
                "nvrtcNoSuchFunction".into()
            ))
        );
        // Through the generated thin layer: where no NVRTC loads, the
        // error lists the libraries tried and what to install.
        match crate::nvrtc::version() {
            Ok((major, _)) => assert!(major >= 12),
            Err(CudaError::NvrtcUnavailable(NvrtcLoadError::LibraryNotFound { tried })) => {
                assert!(!tried.is_empty());
                let msg = crate::nvrtc::version().unwrap_err().to_string();
                assert!(msg.contains("pip install nvidia-cuda-nvrtc"), "{msg}");
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn driver_errors_name_the_call_code_and_stickiness() {
        let e = CudaError::Driver(DriverError::new(
            "cuLaunchCooperativeKernel",
            CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
        ))
        .with_context(|| "kernel 'coop_sum' on NVIDIA H200".into());
        insta::assert_snapshot!("plain", e.to_string());
        assert!(!e.is_sticky());
        let e = CudaError::Driver(DriverError::new(
            "cuStreamSynchronize",
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        ));
        insta::assert_snapshot!("sticky", e.to_string());
        assert!(e.is_sticky());
        assert!(std::error::Error::source(&e).is_some());
        let e = CudaError::Driver(DriverError::new("cuInit", CUresult(9999)));
        insta::assert_snapshot!("unknown", e.to_string());
        let mut e = DriverError::new("cuLogsDumpToMemory", CUresult::CUDA_ERROR_INVALID_VALUE);
        e.driver_log =
            vec!["[22:21:32.099][25642][CUDA][E][cuLogsDumpToMemory] buffer cannot be NULL".into()];
        insta::assert_snapshot!("with_driver_log", e.to_string());
    }

    #[test]
    fn driver_log_lines_go_to_the_thread_that_wrote_them() {
        // Lines as the H200's 13.0 driver writes them: the second field is
        // the writer's pthread_self().
        let a = 140534779737792u64;
        let b = 140120309102272u64;
        let line = |t: u64, m: &str| format!("[04:26:32.758][{t}][CUDA][E] {m}");
        assert_eq!(line_thread(&line(a, "x")), Some(a));
        assert_eq!(line_thread("buffer cannot be NULL"), None);
        assert_eq!(line_thread("[04:26:32.758][main][CUDA][E] x"), None);
        let mut pending = Vec::new();
        // b's failure reads a's line too: b gets its own, a's is kept.
        let got = route_log_lines(
            vec![
                line(a, "No CUDA context is current"),
                line(b, "buffer cannot be NULL"),
                "no thread".into(),
            ],
            Some(b),
            &mut pending,
        );
        assert_eq!(
            got,
            vec![line(b, "buffer cannot be NULL"), "no thread".to_string()]
        );
        assert_eq!(
            pending,
            vec![(a, vec![line(a, "No CUDA context is current")])]
        );
        // a's next failure gets the kept line first, then its new ones.
        let got = route_log_lines(vec![line(a, "Returning 201")], Some(a), &mut pending);
        assert_eq!(
            got,
            vec![
                line(a, "No CUDA context is current"),
                line(a, "Returning 201")
            ]
        );
        assert!(pending.is_empty(), "{pending:?}");
        // With the thread unknown, every line goes to the caller.
        let got = route_log_lines(vec![line(a, "1"), line(b, "2")], None, &mut pending);
        assert_eq!(got.len(), 2);
        // At most DRIVER_LOG_LINES per thread, the newest; at most
        // DRIVER_LOG_THREADS threads kept, the oldest dropped.
        let many: Vec<String> = (0..20).map(|i| line(a, &i.to_string())).collect();
        let got = route_log_lines(many, Some(a), &mut pending);
        assert_eq!(got.len(), DRIVER_LOG_LINES);
        assert_eq!(got.last(), Some(&line(a, "19")));
        let others: Vec<String> = (0..DRIVER_LOG_THREADS as u64 + 3)
            .flat_map(|t| (0..10).map(move |i| line(1000 + t, &i.to_string())))
            .collect();
        route_log_lines(others, Some(a), &mut pending);
        assert_eq!(pending.len(), DRIVER_LOG_THREADS);
        assert_eq!(pending[0].0, 1003, "the oldest threads are dropped first");
        assert!(pending.iter().all(|(_, l)| l.len() == DRIVER_LOG_LINES));
        assert_eq!(pending[0].1.last(), Some(&line(1003, "9")));
    }

    #[test]
    fn loader_errors_become_typed_errors() {
        let e: CudaError = LoaderError::SymbolNotFound {
            function: "cuKernelGetParamInfo".into(),
            symbol: "cuKernelGetParamInfo".into(),
            needs_version: 12040,
            driver_version: Some(12020),
        }
        .into();
        insta::assert_snapshot!(e.to_string());
        assert!(matches!(
            e,
            CudaError::NotSupported {
                needs_version: 12040,
                ..
            }
        ));
        assert!(!supports("cuMadeUp"));
        assert_eq!(
            require("cuMadeUp"),
            Err(CudaError::UnknownFunction {
                function: "cuMadeUp".into()
            })
        );
        let e: CudaError = LoaderError::UnknownFunction("cuMadeUp".into()).into();
        insta::assert_snapshot!("unknown_function", e.to_string());
        assert!(!e.to_string().contains("0.0"));
    }

    /// `Debug` prints the message, as `Display` does, for errors of real
    /// calls: what `fn main() -> Result<(), CudaError>`, `unwrap`, `anyhow`
    /// and `eyre` show.
    #[test]
    fn debug_is_the_message() {
        let image = crate::check_image(&[]).unwrap_err();
        assert_eq!(format!("{image:?}"), format!("{image}"));
        let e = CudaError::from(image);
        assert_eq!(format!("{e:?}"), format!("{e}"));
        assert!(!format!("{e:?}").contains("InvalidImage("), "{e:?}");
        let e = CudaError::from(cuda_sys::loader::resolve("cuMadeUp").unwrap_err());
        assert_eq!(format!("{e:?}"), format!("{e}"));
        assert!(format!("{e:?}").starts_with("cuMadeUp is not a driver function"));
        let e = shared_len::<u8>("cuX", "count", &[("a", Some(300))]).unwrap_err();
        assert_eq!(format!("{e:?}"), format!("{e}"));
        let e = PeerError::SameDevice {
            call: "Context::enable_peer_access",
            device: 0,
        };
        assert_eq!(format!("{e:?}"), format!("{e}"));
    }

    #[test]
    fn a_refused_use_of_lent_memory_names_the_call_the_memory_and_the_way_out() {
        let e = CudaError::Lent {
            call: "Allocation::record_use_on".into(),
            address: 0x7f00_0000_1000,
            bytes: 4096,
        };
        let m = e.to_string();
        assert!(
            m.starts_with("Allocation::record_use_on: the 4096 bytes at 0x7f0000001000 are lent"),
            "{m}"
        );
        assert!(
            m.contains("Allocation::lend") && m.contains("end the loan first"),
            "{m}"
        );
        assert!(!e.is_sticky());
    }

    #[test]
    fn success_is_ok() {
        assert_eq!(check(CUresult::CUDA_SUCCESS, "cuInit"), Ok(()));
        assert!(matches!(
            check(CUresult::CUDA_ERROR_INVALID_VALUE, "cuMemAlloc"),
            Err(CudaError::Driver(DriverError {
                call: "cuMemAlloc",
                ..
            }))
        ));
    }

    #[test]
    fn none_edge_data_is_not_counted() {
        // What `graph_add_node(g, &deps, None, …)` computes before the call.
        let n: usize = shared_len(
            "cuGraphAddNode",
            "num_dependencies",
            &[("dependencies", Some(3)), ("dependency_data", None)],
        )
        .unwrap();
        assert_eq!(n, 3);
        let n: usize = shared_len(
            "cuStreamBeginCaptureToGraph",
            "num_dependencies",
            &[("dependencies", None), ("dependency_data", None)],
        )
        .unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn slices_sharing_a_count_are_each_checked_and_the_error_names_both() {
        let e = shared_len::<usize>(
            "cuGraphAddDependencies",
            "num_dependencies",
            &[("from", Some(2)), ("to", Some(2)), ("edge_data", Some(1))],
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("`edge_data` has 1 elements but `from` has 2"),
            "{text}"
        );
        assert!(matches!(e, CudaError::InvalidArgument { .. }));
    }

    #[test]
    fn a_count_too_large_for_the_c_type_is_refused() {
        let e = shared_len::<u8>("cuX", "count", &[("a", Some(300))]).unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
    }
}
