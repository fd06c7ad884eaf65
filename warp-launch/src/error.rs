//! Errors of `warp-launch`: every message names the call or kernel, the
//! parameter, what was expected and what was given, and says what to do.

use std::fmt;
use std::path::PathBuf;

use crate::domain::DimError;

/// Result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A device string that is not `"cpu"`, `"cuda"` or `"cuda:N"`.
    BadDevice {
        /// The string given.
        given: String,
    },
    /// A CUDA ordinal beyond the devices present.
    NoSuchDevice {
        /// The device asked for.
        device: String,
        /// How many CUDA devices there are.
        count: i32,
    },
    /// A shape, slice or copy that does not fit.
    Shape {
        /// The call.
        call: &'static str,
        /// What does not fit, and what to do.
        message: String,
    },
    /// Memory that could not be allocated (the allocator refused, or the
    /// size cannot be laid out).
    Alloc {
        /// The call.
        call: &'static str,
        /// Bytes requested.
        bytes: usize,
        /// Where they were asked for (`"host memory"`, ...).
        memory: String,
    },
    /// A typed access with a Rust type that is not the array's dtype.
    ElementType {
        /// The call.
        call: &'static str,
        /// The array's dtype.
        array: &'static str,
        /// The dtype the Rust type stands for.
        requested: &'static str,
        /// The Rust type.
        rust: &'static str,
    },
    /// The launch domain or grid cannot be built.
    Dim {
        /// The kernel.
        kernel: String,
        /// Why.
        error: DimError,
    },
    /// The wrong number of arguments.
    ArgumentCount {
        /// The kernel.
        kernel: String,
        /// Which list: `"inputs + outputs"` or `"adj_inputs + adj_outputs"`.
        list: &'static str,
        /// Parameters the kernel declares, in order.
        expected: Vec<String>,
        /// Arguments given.
        given: usize,
    },
    /// An argument that does not match its parameter.
    Argument(Box<ArgumentError>),
    /// An array the launch device cannot reach under the access mode.
    Access(Box<AccessError>),
    /// A parameter name or index that the kernel does not have.
    NoSuchParam {
        /// The kernel.
        kernel: String,
        /// The name or index asked for.
        given: String,
        /// The parameters the kernel has.
        known: Vec<String>,
    },
    /// A kernel that a module does not hold, or that is not declared for a use.
    NoSuchKernel {
        /// Where it was looked for.
        module: String,
        /// The kernel asked for.
        kernel: String,
        /// The kernels there are.
        known: Vec<String>,
    },
    /// A launch that the kernel or device cannot do (adjoint without a
    /// backward kernel, a CPU launch without a CPU implementation, ...).
    Unsupported {
        /// The kernel.
        kernel: String,
        /// What cannot be done, and what to do.
        message: String,
    },
    /// A Warp-generated source or `.meta` file this crate cannot read.
    Source {
        /// The file.
        file: String,
        /// 1-based line (0 when the file as a whole is at fault).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A file that cannot be read.
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// An error from `cuda-api` (driver calls, declarations, launches).
    Cuda(cuda_api::Error),
    /// A CPU launch or host copy that would wait forever for an array held
    /// by another thread that waits, in turn, for an array this thread
    /// holds (see [`crate::storage`]).
    WouldDeadlock {
        /// The call.
        call: &'static str,
        /// Which wait, and what to do.
        message: String,
    },
    /// A launch whose domain (or arguments) would take the kernel outside
    /// an array it indexes: refused before the driver sees it.
    OutOfBounds(Box<BoundsError>),
    /// A kernel whose array accesses no launch can check: safe launches are
    /// refused; `unsafe` [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked)
    /// runs it.
    Unproven(Box<UnprovenError>),
}

/// A launch refused by an array access rule ([`Error::OutOfBounds`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundsError {
    /// The kernel.
    pub kernel: String,
    /// The array parameter (`adj_` prefixed for an adjoint).
    pub param: String,
    /// The array's axis.
    pub axis: usize,
    /// How the kernel indexes that axis (`None`: it does not index it, but
    /// reads elements, so the axis must not be empty).
    pub index: Option<crate::kernel::AxisIndex>,
    /// The launch domain as given.
    pub dim: Vec<i64>,
    /// How many positions the index covers on the axis (the launch
    /// extent, size or block count; for a constant, the extent it needs).
    pub needed: u64,
    /// The array's shape (empty for a null array).
    pub shape: Vec<usize>,
    /// 1-based line of the access in the generated source (0 if declared
    /// in Rust).
    pub line: usize,
}

/// A kernel whose accesses cannot be checked ([`Error::Unproven`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnprovenError {
    /// The kernel.
    pub kernel: String,
    /// Whether the backward kernel is the one refused.
    pub adjoint: bool,
    /// Where and why.
    pub unproven: crate::kernel::Unproven,
}

/// An argument that does not match its parameter ([`Error::Argument`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError {
    /// The kernel.
    pub kernel: String,
    /// Position among the kernel's parameters (0 = first after the bounds;
    /// adjoints follow the forward parameters).
    pub index: usize,
    /// The parameter's name (`adj_` prefixed for adjoints).
    pub param: String,
    /// What the parameter takes.
    pub expected: String,
    /// What was given.
    pub given: String,
    /// What to do.
    pub hint: String,
}

/// An array the launch device cannot reach ([`Error::Access`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessError {
    /// The kernel.
    pub kernel: String,
    /// The parameter.
    pub param: String,
    /// The access mode in force.
    pub mode: crate::device::AccessMode,
    /// The launch device.
    pub launch: String,
    /// Where the array lives, and why it is refused.
    pub reason: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadDevice { given } => write!(
                f,
                "'{given}' is not a device; use \"cpu\", \"cuda\" (cuda:0) or \"cuda:N\" with N a device ordinal"
            ),
            Error::NoSuchDevice { device, count } => write!(
                f,
                "{device} does not exist: this machine has {count} CUDA device(s); use cuda:0 to cuda:{}",
                count - 1
            ),
            Error::Shape { call, message } => write!(f, "{call}: {message}"),
            Error::Alloc {
                call,
                bytes,
                memory,
            } => write!(
                f,
                "{call}: cannot allocate {bytes} B of {memory}: the allocator refused; use a smaller array or free memory first"
            ),
            Error::ElementType {
                call,
                array,
                requested,
                rust,
            } => write!(
                f,
                "{call}: the array holds {array} but {rust} stands for {requested}; use the Rust type of {array}"
            ),
            Error::Dim { kernel, error } => write!(f, "launch of kernel '{kernel}': {error}"),
            Error::ArgumentCount {
                kernel,
                list,
                expected,
                given,
            } => write!(
                f,
                "kernel '{kernel}' takes {} argument(s) in {list} ({}) but {given} were given; pass one per parameter, in order",
                expected.len(),
                expected.join(", ")
            ),
            Error::Argument(a) => write!(
                f,
                "kernel '{}', argument {} '{}': expected {}, given {}; {}",
                a.kernel, a.index, a.param, a.expected, a.given, a.hint
            ),
            Error::Access(a) => write!(
                f,
                "kernel '{}', argument '{}': access mode {} refuses it for a launch on {}: {}",
                a.kernel, a.param, a.mode, a.launch, a.reason
            ),
            Error::NoSuchParam {
                kernel,
                given,
                known,
            } => write!(
                f,
                "kernel '{kernel}' has no parameter {given}; its parameters are: {}",
                known.join(", ")
            ),
            Error::NoSuchKernel {
                module,
                kernel,
                known,
            } => write!(
                f,
                "{module} has no kernel '{kernel}'; it has: {}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
            Error::Unsupported { kernel, message } if kernel.is_empty() => f.write_str(message),
            Error::Unsupported { kernel, message } => write!(f, "kernel '{kernel}': {message}"),
            Error::Source {
                file,
                line,
                message,
            } => {
                if *line > 0 {
                    write!(f, "{file}:{line}: {message}")
                } else {
                    write!(f, "{file}: {message}")
                }
            }
            Error::Io { path, error } => write!(f, "cannot read {}: {error}", path.display()),
            Error::Cuda(e) => write!(f, "{e}"),
            Error::WouldDeadlock { call, message } => {
                write!(f, "{call}: refused, it would deadlock: {message}")
            }
            Error::OutOfBounds(b) => {
                let extent = b.shape.get(b.axis).copied().unwrap_or(0);
                let what = if b.shape.is_empty() {
                    "a null array (no elements)".to_string()
                } else {
                    format!("shape {:?}, extent {extent} on axis {}", b.shape, b.axis)
                };
                write!(
                    f,
                    "launch of kernel '{}' over dim {:?} refused: it would index array '{}' out of bounds on axis {}: ",
                    b.kernel, b.dim, b.param, b.axis
                )?;
                match b.index {
                    Some(crate::kernel::AxisIndex::Thread(k)) => write!(
                        f,
                        "the kernel indexes that axis with thread coordinate {k} (wp.tid()), which runs to {} (launch extent {}), but the array has {what}; launch over at most {extent} on dimension {k}, or pass a larger array",
                        b.needed.saturating_sub(1),
                        b.needed
                    ),
                    Some(crate::kernel::AxisIndex::WorkItem) => write!(
                        f,
                        "the kernel indexes that axis with the linear work-item index, which runs to {} (launch size {}), but the array has {what}; launch at most {extent} work items, or pass a larger array",
                        b.needed.saturating_sub(1),
                        b.needed
                    ),
                    Some(crate::kernel::AxisIndex::Block) => write!(
                        f,
                        "the kernel indexes that axis with the block index, which runs to {} ({} blocks), but the array has {what}; launch fewer blocks (max_blocks, block_dim) or pass a larger array",
                        b.needed.saturating_sub(1),
                        b.needed
                    ),
                    Some(crate::kernel::AxisIndex::Constant(c)) => write!(
                        f,
                        "the kernel indexes that axis with the constant {c}, but the array has {what}; pass an array with at least {} element(s) on axis {}",
                        b.needed, b.axis
                    ),
                    None => write!(
                        f,
                        "the kernel reads elements of the array but it has {what}; pass an array with no empty axis"
                    ),
                }?;
                if b.line > 0 {
                    write!(f, " (access at line {} of the generated source)", b.line)?;
                }
                Ok(())
            }
            Error::Unproven(u) => {
                let who = if u.unproven.param.is_empty() {
                    String::new()
                } else {
                    format!(" (parameter '{}')", u.unproven.param)
                };
                write!(
                    f,
                    "kernel '{}'{}: no safe launch: at {}{who}: {}; no launch can check that it stays inside its arrays. If it does for your arguments, launch with `unsafe {{ kernel.launch(dim).inputs(..).unchecked() }}` (read LaunchBuilder::unchecked's Safety section); a module compiled with Warp's bounds checks (wp.config.mode = \"debug\") stops an out-of-bounds access with a device assert (which ends the CUDA context) instead of corrupting memory",
                    u.kernel,
                    if u.adjoint { " (backward)" } else { "" },
                    u.unproven.location,
                    u.unproven.reason
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { error, .. } => Some(error),
            Error::Cuda(e) => Some(e),
            Error::Dim { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl From<cuda_api::Error> for Error {
    fn from(e: cuda_api::Error) -> Self {
        Error::Cuda(e)
    }
}
