//! Errors of `warp-launch`: every message names the call or kernel, the
//! parameter, what was expected and what was given, and says what to do.

use std::fmt;
use std::path::PathBuf;

use crate::device::id::Device;
use crate::launch::domain::DimError;
use crate::signature::Pass;
use warp_proof::UnmodelledError;

/// Result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
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
    /// A kernel whose declared parameters are not the ones a typed
    /// launcher expects ([`crate::Kernel::check_signature`]).
    Signature {
        /// The kernel.
        kernel: String,
        /// Position of the first parameter that differs.
        index: usize,
        /// What the kernel declares there (`'name': kind`).
        declared: String,
        /// What the launcher expects there.
        expected: String,
    },
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
    /// A kernel without the CUDA function a launch on a CUDA device needs:
    /// a CPU-only kernel, or a forward-only one launched for its adjoint.
    NoCudaFunction {
        /// The kernel.
        kernel: String,
        /// The function asked for.
        pass: Pass,
    },
    /// A kernel without the CPU implementation a launch on the CPU device
    /// needs (none at all, or no backward function for an adjoint launch).
    NoCpuFunction {
        /// The kernel.
        kernel: String,
        /// The function asked for.
        pass: Pass,
    },
    /// A stream of another device than the launch's.
    StreamDevice {
        /// The launch (`kernel 'name'`) or call.
        launch: String,
        /// The stream's device.
        stream: Device,
        /// The launch's device.
        device: Device,
    },
    /// A stream of another CUDA context than the one the launch (or graph)
    /// was checked for, where its arrays live.
    StreamContext {
        /// The launch (`kernel 'name'`) or call.
        launch: String,
        /// The stream's context.
        stream: String,
        /// The context it must belong to.
        expected: String,
    },
    /// A safe setter on a launch built with the `unsafe`
    /// [`LaunchBuilder::unchecked`](crate::LaunchBuilder::unchecked).
    UncheckedSetter {
        /// The kernel.
        kernel: String,
        /// The setter (`set_dim`, ...).
        setter: &'static str,
    },
    /// A `block_dim` other than the one the kernel was compiled for.
    CompiledBlockDim {
        /// The kernel.
        kernel: String,
        /// The block size asked for.
        given: u32,
        /// The block size it was compiled for (Warp's `WP_TILE_BLOCK_DIM`).
        compiled: u32,
    },
    /// A kernel that works on tiles ([`AxisIndex::Tile`](crate::AxisIndex::Tile)
    /// rules) launched over a domain that leaves a block partly empty: its
    /// threads meet at barriers, so every block must run whole.
    PartialTileBlock {
        /// The kernel.
        kernel: String,
        /// The launch domain as given.
        dim: Vec<i64>,
        /// Work items of the domain.
        size: u64,
        /// Threads per block.
        block_dim: u32,
    },
    /// [`MaxBlocks::Resident`](crate::MaxBlocks::Resident) for a lean kernel.
    ResidentLean {
        /// The kernel.
        kernel: String,
    },
    /// [`MaxBlocks::Resident`](crate::MaxBlocks::Resident) where no block
    /// of this size is resident on the device (an occupancy of 0).
    NoResidentGrid {
        /// The kernel.
        kernel: String,
        /// Threads per block.
        block_dim: u32,
    },
    /// A CPU launch given to a CUDA graph.
    CpuGraphNode {
        /// The kernel.
        kernel: String,
    },
    /// A kernel declaration no kernel can have ([`KernelSpec`](crate::KernelSpec)):
    /// refused when the kernel is made, not at its first launch.
    Declaration(Box<DeclarationError>),
    /// A kernel declared with a `wp.tid()` arity outside 1 to 4.
    KernelDim {
        /// The kernel.
        kernel: String,
        /// The arity declared.
        given: usize,
    },
    /// An array access rule of a declaration that does not fit its kernel.
    AccessRule(Box<AccessRuleError>),
    /// An array that needs a gradient and has none.
    NoGradient {
        /// The call.
        call: &'static str,
        /// Which array.
        array: String,
    },
    /// A loss for [`Tape::backward`](crate::Tape::backward) or
    /// [`check_gradients`](crate::check_gradients) that is not one element.
    LossShape {
        /// The call.
        call: &'static str,
        /// The loss's shape.
        shape: Vec<usize>,
    },
    /// A loss that is not a float32 or float64 scalar array.
    LossDType {
        /// The call.
        call: &'static str,
        /// The loss's dtype.
        dtype: &'static str,
    },
    /// An input of [`check_gradients`](crate::check_gradients) that is not a
    /// contiguous float32/float64 scalar array with a gradient.
    GradientInput {
        /// Its position in `inputs`.
        index: usize,
        /// The array, described.
        array: String,
    },
    /// A CUDA-only operation asked of a device that is not a CUDA device.
    NotCuda {
        /// The call.
        call: &'static str,
        /// The device given.
        device: Device,
    },
    /// Memory from elsewhere (a raw pointer, a cudarc slice, a DLPack
    /// tensor, a candle tensor) that cannot be an array as given, or an
    /// array that cannot be handed out as one: the dtype, shape, strides,
    /// device or extent does not match.
    Interop {
        /// The call.
        call: &'static str,
        /// What does not match (`"dtype"`, `"shape"`, `"strides"`,
        /// `"device"`, `"extent"`, `"overlap"` for memory that overlaps a
        /// tracked array's storage without lying inside it, ...).
        what: &'static str,
        /// What was given, what was expected, and what to do.
        message: String,
    },
    /// Work refused on an array whose memory is lent to cudarc
    /// ([`Array::to_cudarc`](crate::Array::to_cudarc)) while the
    /// `CudarcSlice` lives: cudarc's work on it cannot be ordered with this
    /// crate's (see [`cuda_api::Allocation::lend`]).
    Lent {
        /// The call refused (a launch names its kernel).
        call: String,
        /// The array, described (which argument or operand it is).
        array: String,
    },
    /// A struct value's arrays that do not fit its `wp.struct`
    /// ([`StructValue::with_arrays`](crate::StructValue::with_arrays)).
    StructArrays {
        /// The call.
        call: &'static str,
        /// The struct's name.
        structure: String,
        /// The field (`inner.data` for a nested struct's), or the count.
        field: String,
        /// What the struct takes there.
        expected: String,
        /// What was given.
        given: String,
    },
    /// The legacy default stream given to a graph capture.
    DefaultStreamCapture,
    /// A launch index a graph does not have.
    NoSuchLaunch {
        /// The call.
        call: &'static str,
        /// The index asked for.
        index: usize,
        /// Launches the graph has.
        count: usize,
    },
    /// A graph update of a launch that had size 0 when captured (no node).
    GraphNodeMissing {
        /// The launch's index.
        index: usize,
        /// Its kernel.
        kernel: String,
    },
    /// A graph update that would give a launch size 0 (a node cannot be
    /// removed by an update).
    GraphNodeEmpty {
        /// The launch's index.
        index: usize,
        /// Its kernel.
        kernel: String,
    },
    /// A graph node update the driver refused.
    GraphUpdate {
        /// The launch's index.
        index: usize,
        /// Its kernel.
        kernel: String,
        /// Why cuda-api refused the update (its checks or the driver).
        error: Box<cuda_api::CudaError>,
    },
    /// A Warp module compiled in a mode, or holding a kernel feature, that
    /// this crate's launch does not model (deterministic mode, thread block
    /// clusters, external entry points, launch bounds below the block
    /// size): refused when the module is loaded, never launched wrongly.
    Unmodelled(Box<UnmodelledError>),
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
    Cuda(cuda_api::CudaError),
    /// A launch on a CUDA device in a process where no CUDA driver loads
    /// (on a machine without a GPU, a launch that names no device runs on
    /// the CPU instead: [`Device::current`]).
    NoDriver {
        /// The kernel.
        kernel: String,
        /// The CUDA device the launch was for.
        device: Device,
        /// Each driver library path tried, with why it failed.
        tried: Vec<(String, String)>,
    },
    /// An array on a CUDA device (or in page-locked or managed memory) made
    /// in a process where no CUDA driver loads: refused before any launch,
    /// naming the way to the CPU.
    NoDriverForArray {
        /// The call (`Array::zeros`).
        call: &'static str,
        /// The device the array was for.
        device: Device,
        /// The memory asked for.
        memory: cuda_api::MemoryKind,
        /// Each driver library path tried, with why it failed.
        tried: Vec<(String, String)>,
    },
    /// A CPU launch or host copy that would wait forever for an array held
    /// by another thread that waits, in turn, for an array this thread
    /// holds (see [`Storage`](crate::Storage)).
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
    /// A kernel's compiled CPU code lays out its argument struct
    /// (`wp_args_<key>`) otherwise than its declaration says.
    CpuLayout(Box<CpuLayoutError>),
    /// A module's CPU code does not match its declarations: a kernel key
    /// the source does not declare, a declared kernel the CPU code neither
    /// runs nor lists as unsupported, or a layout it cannot report.
    CpuCode {
        /// The module (`Warp module 'name' (origin)`).
        module: String,
        /// The kernel.
        kernel: String,
        /// What does not match, and what to do.
        message: String,
    },
    /// A kernel whose module has CPU code, but not for this kernel: the
    /// compile step could not build it for the CPU (tile code, cooperative
    /// lane functions).
    CpuUnsupported {
        /// The kernel.
        kernel: String,
        /// Why, as the compile step recorded it.
        reason: String,
    },
    /// A kernel's Rust CPU implementation indexed an array outside its
    /// shape ([`CpuArray::get`](crate::CpuArray::get), `set`, `add`).
    CpuIndex(Box<CpuIndexError>),
    /// A kernel assertion (`assert` in the kernel) failed during a launch
    /// on `"cpu"`.
    KernelAssert {
        /// The kernel.
        kernel: String,
        /// Forward or backward.
        pass: Pass,
        /// The assertion's message (Warp's text, file and line).
        message: String,
    },
}

/// A field of a kernel's argument struct whose offset in the compiled CPU
/// code differs from the declaration's ([`Error::CpuLayout`]); `field` is
/// `sizeof` or `alignof` when the struct's size or alignment differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuLayoutError {
    /// The module (`Warp module 'name' (origin)`).
    pub module: String,
    /// The kernel.
    pub kernel: String,
    /// The parameter, or `sizeof` / `alignof`.
    pub field: String,
    /// The offset (size, alignment) the declaration gives.
    pub declared: usize,
    /// The offset (size, alignment) the compiled code reports.
    pub compiled: usize,
}

/// A kernel declaration no kernel can have ([`Error::Declaration`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclarationError {
    /// The kernel (empty for [`DeclarationProblem::EmptyKernelName`]).
    pub kernel: String,
    /// What is wrong.
    pub problem: DeclarationProblem,
}

/// What is wrong with a kernel declaration ([`DeclarationError`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeclarationProblem {
    /// The kernel's name is empty.
    EmptyKernelName,
    /// A parameter's name is empty.
    EmptyParamName {
        /// Its position.
        index: usize,
    },
    /// Two parameters of one name, or one named as another's adjoint
    /// (`adj_<name>`, the name its adjoint takes in backward launches).
    DuplicateParam {
        /// Position of the first.
        first: usize,
        /// Its name.
        first_name: String,
        /// Position of the second.
        index: usize,
        /// Its name.
        name: String,
    },
    /// An array of 0 dimensions or more than Warp's
    /// [`ARRAY_MAX_DIMS`](crate::ARRAY_MAX_DIMS).
    ArrayDims {
        /// The parameter's position.
        index: usize,
        /// Its name.
        name: String,
        /// The dimensions declared.
        ndim: u8,
    },
}

/// An index outside an array in a kernel's Rust CPU implementation
/// ([`Error::CpuIndex`]): which kernel, function, parameter and thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuIndexError {
    /// The kernel.
    pub kernel: String,
    /// The function running (forward or backward).
    pub pass: Pass,
    /// Position of the array parameter (adjoints follow the forward
    /// parameters).
    pub param_index: usize,
    /// The parameter's name (`adj_` prefixed for an adjoint).
    pub param: String,
    /// The thread's coordinates (`wp.tid()`).
    pub thread: Vec<i32>,
    /// The index asked for.
    pub index: Vec<i32>,
    /// The array's shape (empty for a null array).
    pub shape: Vec<usize>,
}

/// A launch refused by an array access rule ([`Error::OutOfBounds`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundsError {
    /// The kernel.
    pub kernel: String,
    /// The array parameter (`adj_` prefixed for an adjoint), or an array a
    /// struct parameter holds (`h.data`).
    pub param: String,
    /// The array's axis.
    pub axis: usize,
    /// How the kernel indexes that axis (`None`: it does not index it, but
    /// reads elements, so the axis must not be empty).
    pub index: Option<crate::signature::AxisIndex>,
    /// The launch domain as given.
    pub dim: Vec<i64>,
    /// How many positions the index covers on the axis (the launch
    /// extent, size or block count; for a constant, the extent it needs;
    /// for a tile, its last index; for a modulo, the extent that divides,
    /// or 1 when that extent is 0).
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
    /// The function refused (forward or backward).
    pub pass: Pass,
    /// Where and why.
    pub unproven: crate::signature::Unproven,
}

/// An array access rule that does not fit its kernel's declaration
/// ([`Error::AccessRule`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRuleError {
    /// The kernel.
    pub kernel: String,
    /// The parameter the rule names.
    pub param: String,
    /// What is wrong.
    pub problem: AccessRuleProblem,
}

/// What is wrong with an access rule ([`AccessRuleError`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccessRuleProblem {
    /// The kernel has no parameter of that name.
    NoSuchParam {
        /// The parameters it has.
        known: Vec<String>,
    },
    /// The parameter is not an array.
    NotAnArray {
        /// What it takes.
        kind: String,
    },
    /// A rule with no index or more than 4, or one that does not match the
    /// array's declared dimensions.
    IndexCount {
        /// Indices given.
        given: usize,
        /// The array's declared dimensions, when known.
        ndim: Option<u8>,
    },
    /// A thread coordinate the kernel's `wp.tid()` does not have.
    NoSuchCoordinate {
        /// The coordinate named.
        coordinate: usize,
        /// Coordinates `wp.tid()` has.
        kernel_dim: usize,
    },
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
    pub mode: crate::array::AccessMode,
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
            Error::Signature {
                kernel,
                index,
                declared,
                expected,
            } => write!(
                f,
                "kernel '{kernel}': parameter {index} is {declared} but the typed launcher expects {expected}; the launcher was generated from another build of the module: regenerate it from the module's wp_<module>.cu, or load the module it was generated for"
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
            Error::NoCudaFunction {
                kernel,
                pass: Pass::Forward,
            } => write!(
                f,
                "kernel '{kernel}' has no CUDA function (a CPU-only kernel), so it cannot run on a CUDA device; launch it on \"cpu\" or load its CUDA image (KernelSpec::load_cuda, AotModule)"
            ),
            Error::NoCudaFunction {
                kernel,
                pass: Pass::Adjoint,
            } => write!(
                f,
                "kernel '{kernel}' has no backward CUDA function, so its adjoint cannot run on a CUDA device; compile it with enable_backward or load its backward function (KernelSpec::load_cuda)"
            ),
            Error::NoCpuFunction {
                kernel,
                pass: Pass::Forward,
            } => write!(
                f,
                "kernel '{kernel}' has no CPU implementation, so it cannot run on \"cpu\"; compile its Warp module with CPU code (warp_launch::build, embedded), add one with Kernel::with_cpu, or launch on a cuda device"
            ),
            Error::NoCpuFunction {
                kernel,
                pass: Pass::Adjoint,
            } => write!(
                f,
                "kernel '{kernel}': its CPU implementation has no backward function, so its adjoint cannot run on \"cpu\"; give one to Kernel::with_cpu"
            ),
            Error::StreamDevice {
                launch,
                stream,
                device,
            } => write!(
                f,
                "{launch}: the stream belongs to {stream} but the launch is on {device}; pass a stream of {device} or launch on the stream's device"
            ),
            Error::StreamContext {
                launch,
                stream,
                expected,
            } => write!(
                f,
                "{launch}: the stream belongs to {stream} but it was checked for {expected}, where its arrays live; pass a stream of that context (Device::context)"
            ),
            Error::UncheckedSetter { kernel, setter } => write!(
                f,
                "kernel '{kernel}': Launch::{setter}: this launch was built with the unsafe LaunchBuilder::unchecked, so a safe setter cannot keep its promise; change it inside `unsafe {{ launch.edit_unchecked(|l| ...) }}`, or record a new launch"
            ),
            Error::CompiledBlockDim {
                kernel,
                given,
                compiled,
            } => write!(
                f,
                "kernel '{kernel}': block_dim {given} was asked, but the kernel was compiled for block_dim {compiled} (Warp's WP_TILE_BLOCK_DIM): its shared tile storage has one slot per thread of {compiled}, so other block sizes are unsafe; launch with block_dim {compiled}, or compile the module with block_dim={given}"
            ),
            Error::PartialTileBlock {
                kernel,
                dim,
                size,
                block_dim,
            } => write!(
                f,
                "kernel '{kernel}' works on tiles: the threads of a block load, reduce and store a tile together and wait for each other at barriers, so every block must run whole; the domain {dim:?} has {size} work items, not a multiple of block_dim {block_dim}; launch it with Kernel::launch_tiled (Warp's wp.launch_tiled: the block dimension {block_dim} is appended to the domain), or over a domain whose size is a multiple of {block_dim}"
            ),
            Error::ResidentLean { kernel } => write!(
                f,
                "kernel '{kernel}': MaxBlocks::Resident caps a grid-stride loop, but the kernel is lean (one thread per index, no loop); launch it without max_blocks"
            ),
            Error::NoResidentGrid { kernel, block_dim } => write!(
                f,
                "kernel '{kernel}': MaxBlocks::Resident found no resident block of {block_dim} threads (occupancy 0); use a smaller block_dim or less shared memory"
            ),
            Error::CpuGraphNode { kernel } => write!(
                f,
                "kernel '{kernel}': a CPU launch cannot be a CUDA graph node; build it for a cuda device"
            ),
            Error::Declaration(d) => {
                let kernel = &d.kernel;
                match &d.problem {
                    DeclarationProblem::EmptyKernelName => f.write_str(
                        "KernelSpec: the kernel name is empty; name the kernel as its source does (Warp's key, e.g. \"saxpy\"): messages, modules and launchers find kernels by name",
                    ),
                    DeclarationProblem::EmptyParamName { index } => write!(
                        f,
                        "KernelSpec of kernel '{kernel}': parameter {index} has an empty name; name each parameter as the kernel's source does (launches find parameters by name)"
                    ),
                    DeclarationProblem::DuplicateParam {
                        first,
                        first_name,
                        index,
                        name,
                    } => {
                        write!(f, "KernelSpec of kernel '{kernel}': parameter {index} '{name}' ")?;
                        if first_name == name {
                            write!(f, "has the name of parameter {first}")?;
                        } else {
                            write!(
                                f,
                                "clashes with parameter {first} '{first_name}' (the adjoint of a parameter 'x' is named 'adj_x')"
                            )?;
                        }
                        f.write_str("; give each parameter its own name, as the kernel's source does (set_param_by_name, access rules and messages find parameters by name)")
                    }
                    DeclarationProblem::ArrayDims { index, name, ndim } => write!(
                        f,
                        "KernelSpec of kernel '{kernel}': parameter {index} '{name}' is declared as an array of {ndim} dimension(s), but Warp's arrays have 1 to {max} (ARRAY_MAX_DIMS = {max}); declare the dimensions the kernel's array_t has (1 to {max})",
                        max = crate::abi::ARRAY_MAX_DIMS
                    ),
                }
            }
            Error::KernelDim { kernel, given } => write!(
                f,
                "kernel '{kernel}': wp.tid() has 1 to 4 coordinates but the declaration says {given}; declare 1 to 4"
            ),
            Error::AccessRule(r) => {
                write!(f, "kernel '{}': access rule for '{}': ", r.kernel, r.param)?;
                match &r.problem {
                    AccessRuleProblem::NoSuchParam { known } => write!(
                        f,
                        "the kernel has no parameter '{}' (it has: {}); declare the parameter before its rule",
                        r.param,
                        known.join(", ")
                    ),
                    AccessRuleProblem::NotAnArray { kind } => write!(
                        f,
                        "the parameter takes {kind}, not an array; rules are for arrays"
                    ),
                    AccessRuleProblem::IndexCount { given, ndim } => write!(
                        f,
                        "{given} index(es) given; give 1 to 4 (one per indexed axis{})",
                        if ndim.is_none() {
                            "; indexed_by_thread needs the array's dimensions: declare it with KernelSpec::array"
                        } else {
                            ""
                        }
                    ),
                    AccessRuleProblem::NoSuchCoordinate {
                        coordinate,
                        kernel_dim,
                    } => write!(
                        f,
                        "thread coordinate {coordinate} does not exist: the kernel's wp.tid() has {kernel_dim} coordinate(s)"
                    ),
                }
            }
            Error::NoGradient { call, array } => write!(
                f,
                "{call}: the {array} has no gradient; create it with .with_grad()"
            ),
            Error::LossShape { call, shape } => write!(
                f,
                "{call}: the loss has shape {shape:?} but must be one element (a scalar loss, as in Warp); \
                 reduce it to one element (a sum kernel), or seed the gradients of chosen outputs with \
                 Tape::backward_with"
            ),
            Error::LossDType { call, dtype } => write!(
                f,
                "{call}: the loss is {dtype} but must be float32 or float64; reduce it to a float scalar array"
            ),
            Error::GradientInput { index, array } => write!(
                f,
                "check_gradients: input {index} ({array}) must be a contiguous float32/float64 scalar array with a gradient; pass such arrays (.with_grad())"
            ),
            Error::NotCuda { call, device } => write!(
                f,
                "{call}: {device} is not a CUDA device, and this needs one (a CUDA context, stream or peer access); use a cuda:N device"
            ),
            Error::Interop {
                call,
                what,
                message,
            } => write!(f, "{call}: {what}: {message}"),
            Error::Lent { call, array } => write!(
                f,
                "{call}: {array} is lent to cudarc (Array::to_cudarc), whose work on it cannot be ordered with this crate's, so no work is queued on it while the CudarcSlice lives; drop the slice first (later work then waits for cudarc's), or copy the array"
            ),
            Error::StructArrays {
                call,
                structure,
                field,
                expected,
                given,
            } => write!(
                f,
                "{call}: struct '{structure}', {field}: takes {expected}, given {given}; pass one array per array field of the struct, in field order (a nested struct's fields where it sits), each of its field's dtype and dimensions"
            ),
            Error::DefaultStreamCapture => f.write_str(
                "Graph::capture: the legacy default stream cannot be captured; use Stream::new",
            ),
            Error::NoSuchLaunch { call, index, count } => write!(
                f,
                "{call}: the graph has {count} launches, so there is no launch {index}; use an index below {count}"
            ),
            Error::GraphNodeMissing { index, kernel } => write!(
                f,
                "Graph::update: launch {index} ('{kernel}') had size 0 when captured and has no node; re-capture the graph"
            ),
            Error::GraphNodeEmpty { index, kernel } => write!(
                f,
                "Graph::update: launch {index} ('{kernel}') would have size 0, and a node cannot be removed by an update; re-capture the graph"
            ),
            Error::GraphUpdate {
                index,
                kernel,
                error,
            } => write!(
                f,
                "Graph::update: launch {index} ('{kernel}') cannot be updated in place: {error}; fix the new arguments or re-capture the graph"
            ),
            // "{file}:{line}: kernel '{kernel}' was compiled {feature}"
            Error::Unmodelled(u) => write!(f, "{u}"),
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
            Error::NoDriver {
                kernel,
                device,
                tried,
            } => {
                write!(
                    f,
                    "launch of '{kernel}' on {device}: no CUDA driver could be loaded ({}); to run it on the \
                     CPU, launch with .device(\"cpu\") and arrays on \"cpu\" (or name no device: without \
                     a driver the default device is \"cpu\"), else install the NVIDIA driver or set \
                     CUDA_SYS_DRIVER_LIBRARY to libcuda.so",
                    TriedLibraries(tried)
                )
            }
            Error::NoDriverForArray {
                call,
                device,
                memory,
                tried,
            } => {
                let instead = if device.is_cuda() {
                    format!(
                        "make the array on \"cpu\" instead of \"{device}\" ({call}(\"cpu\", ..)) and launch on \
                         \"cpu\""
                    )
                } else {
                    format!(
                        "make it in plain host memory on \"cpu\" (MemoryKind::Device, as {call}(\"cpu\", ..) \
                         does) instead of {memory}"
                    )
                };
                write!(
                    f,
                    "{call}: {memory} for {device}: no CUDA driver could be loaded ({}); without a GPU, \
                     {instead}, else install the NVIDIA driver or set CUDA_SYS_DRIVER_LIBRARY to libcuda.so",
                    TriedLibraries(tried)
                )
            }
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
                    Some(crate::signature::AxisIndex::Thread(k)) => write!(
                        f,
                        "the kernel indexes that axis with thread coordinate {k} (wp.tid()), which runs to {} (launch extent {}), but the array has {what}; launch over at most {extent} on dimension {k}, or pass a larger array",
                        b.needed.saturating_sub(1),
                        b.needed
                    ),
                    Some(crate::signature::AxisIndex::WorkItem) => write!(
                        f,
                        "the kernel indexes that axis with the linear work-item index, which runs to {} (launch size {}), but the array has {what}; launch at most {extent} work items, or pass a larger array",
                        b.needed.saturating_sub(1),
                        b.needed
                    ),
                    Some(crate::signature::AxisIndex::Block) => write!(
                        f,
                        "the kernel indexes that axis with the block index, which runs to {} ({} blocks), but the array has {what}; launch fewer blocks (max_blocks, block_dim) or pass a larger array",
                        b.needed.saturating_sub(1),
                        b.needed
                    ),
                    Some(crate::signature::AxisIndex::Constant(c)) => write!(
                        f,
                        "the kernel indexes that axis with the constant {c}, but the array has {what}; pass an array with at least {} element(s) on axis {}",
                        b.needed, b.axis
                    ),
                    Some(crate::signature::AxisIndex::Tile {
                        thread,
                        scale,
                        offset,
                        len,
                    }) => write!(
                        f,
                        "the kernel loads or stores a tile of {len} on that axis from {}, whose last index {} does not fit Warp's 32-bit tile index (at most {}: past it the tile's bounds check wraps around); launch over a smaller domain",
                        match thread {
                            Some(k) =>
                                format!("{scale} * thread coordinate {k} + {offset} (wp.tid())"),
                            None => format!("{offset}"),
                        },
                        b.needed,
                        i32::MAX
                    ),
                    Some(crate::signature::AxisIndex::Modulo { axis }) if axis == b.axis => write!(
                        f,
                        "the kernel indexes the array modulo its extent on axis {axis} (`x % a.shape[{axis}]`), but the array has {what}: a modulo by 0 is undefined (on the CPU the process dies of SIGFPE); pass an array with at least 1 element on axis {axis}",
                    ),
                    Some(crate::signature::AxisIndex::Modulo { axis }) => write!(
                        f,
                        "the kernel indexes that axis modulo the array's extent on axis {axis} (`x % a.shape[{axis}]`), which reaches {}, but the array has {what}; pass an array whose axis {} is at least as long as its axis {axis}",
                        b.needed.saturating_sub(1),
                        b.axis
                    ),
                    // A rule of a kind this crate does not know (warp-proof's
                    // enums are `#[non_exhaustive]`; its version is pinned).
                    Some(index) => write!(
                        f,
                        "the kernel indexes that axis with {index}, which needs {} position(s), but the array has {what}",
                        b.needed
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
            Error::CpuLayout(l) => write!(
                f,
                "{}: kernel '{}': the compiled CPU code has the argument struct wp_args_{} with {} {} where the declaration read from the source gives {}; the CPU code was compiled from another Warp output than the source: rebuild the module (CPU code and source in one compile step)",
                l.module,
                l.kernel,
                l.kernel,
                match l.field.as_str() {
                    "sizeof" | "alignof" => l.field.clone(),
                    f => format!("field '{f}' at offset"),
                },
                l.compiled,
                l.declared
            ),
            Error::CpuCode {
                module,
                kernel,
                message,
            } => write!(f, "{module}: CPU code of kernel '{kernel}': {message}"),
            Error::CpuUnsupported { kernel, reason } => write!(
                f,
                "kernel '{kernel}' cannot run on \"cpu\": the compile step built no CPU code for it ({reason}); launch it on a cuda device, or give it a Rust implementation with Kernel::with_cpu"
            ),
            Error::CpuIndex(c) => {
                write!(
                    f,
                    "kernel '{}' ({}) on \"cpu\", thread {:?} (wp.tid()): argument {} '{}': index {:?} is outside ",
                    c.kernel, c.pass, c.thread, c.param_index, c.param, c.index
                )?;
                if c.shape.is_empty() {
                    f.write_str("a null array (None: no elements); pass an array, or test for None in the kernel")
                } else if c.index.len() != c.shape.len() {
                    write!(
                        f,
                        "the array of shape {:?}: it has {} dimension(s) but the index has {} coordinate(s); index with {}",
                        c.shape,
                        c.shape.len(),
                        c.index.len(),
                        c.shape.len()
                    )
                } else {
                    write!(
                        f,
                        "the array of shape {:?}; index each axis from 0 to below its extent: launch over a domain that fits the array, or pass a larger one",
                        c.shape
                    )
                }
            }
            Error::KernelAssert {
                kernel,
                pass,
                message,
            } => write!(
                f,
                "kernel '{kernel}' ({pass}) on \"cpu\": assertion failed: {message}; the launch ran to its end, so its outputs are not to be trusted"
            ),
            Error::Unproven(u) => {
                let who = if u.unproven.param.is_empty() {
                    String::new()
                } else {
                    format!(" (parameter '{}')", u.unproven.param)
                };
                write!(
                    f,
                    "kernel '{}'{}: no safe launch: at {}{who}: {}; no launch can check that it stays inside its arrays. If it does for your arguments, launch it unchecked: a typed launcher's `unsafe` `launch_unchecked`, or `unsafe {{ kernel.launch(dim).inputs(..).unchecked() }}` (read LaunchBuilder::unchecked's Safety section; Warp's debug mode is no guard: it does not check shapes, native code or preambles)",
                    u.kernel,
                    if u.pass == Pass::Adjoint {
                        " (backward)"
                    } else {
                        ""
                    },
                    u.unproven.location,
                    u.unproven.reason
                )
            }
        }
    }
}

/// The driver libraries tried, with why each failed: `path: why; path: why`.
struct TriedLibraries<'a>(&'a [(String, String)]);

impl fmt::Display for TriedLibraries<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (path, why)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{path}: {why}")?;
        }
        Ok(())
    }
}

impl Error {
    /// An allocation's error: a driver that cannot be loaded becomes
    /// [`Error::NoDriverForArray`], naming the call and the way to the CPU.
    pub(crate) fn for_allocation(
        self,
        call: &'static str,
        device: Device,
        memory: cuda_api::MemoryKind,
    ) -> Error {
        match self {
            Error::Cuda(cuda_api::CudaError::DriverNotFound { tried }) => Error::NoDriverForArray {
                call,
                device,
                memory,
                tried,
            },
            e => e,
        }
    }

    /// This launch's error: a driver that cannot be loaded becomes
    /// [`Error::NoDriver`], naming the kernel and the way to the CPU.
    pub(crate) fn for_launch(self, kernel: &str, device: Device) -> Error {
        match self {
            Error::Cuda(cuda_api::CudaError::DriverNotFound { tried }) if device.is_cuda() => {
                Error::NoDriver {
                    kernel: kernel.to_string(),
                    device,
                    tried,
                }
            }
            e => e,
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { error, .. } => Some(error),
            Error::Cuda(e) => Some(e),
            Error::Dim { error, .. } => Some(error),
            Error::GraphUpdate { error, .. } => Some(&**error),
            _ => None,
        }
    }
}

impl From<cuda_api::CudaError> for Error {
    fn from(e: cuda_api::CudaError) -> Self {
        Error::Cuda(e)
    }
}

/// A reader's refusal of a source text, as [`Error::Source`].
pub(crate) fn src_err(e: warp_proof::SourceError) -> Error {
    Error::Source {
        file: e.file().to_string(),
        line: e.line(),
        message: e.message().to_string(),
    }
}

/// warp-proof's refusal of a mode a launch does not model.
impl From<warp_proof::DeclareError> for Error {
    fn from(e: warp_proof::DeclareError) -> Self {
        match e {
            warp_proof::DeclareError::Source(e) => src_err(e),
            warp_proof::DeclareError::Unmodelled(e) => Error::Unmodelled(Box::new(e)),
            other => Error::Source {
                file: String::new(),
                line: 0,
                message: other.to_string(),
            },
        }
    }
}

impl From<UnmodelledError> for Error {
    fn from(e: UnmodelledError) -> Self {
        Error::Unmodelled(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::Array;
    use crate::autodiff::{Tape, check_gradients};

    /// Each typed refusal names what it refuses (kernel, parameter, value,
    /// limit) and says what to do.
    #[test]
    fn typed_errors_name_kernel_value_and_remedy() {
        let k = || "saxpy".to_string();
        let cases: Vec<(Error, &[&str])> = vec![
            (
                Error::NoCudaFunction {
                    kernel: k(),
                    pass: Pass::Adjoint,
                },
                &["'saxpy'", "backward CUDA function", "enable_backward"],
            ),
            (
                Error::NoCpuFunction {
                    kernel: k(),
                    pass: Pass::Forward,
                },
                &["'saxpy'", "no CPU implementation", "Kernel::with_cpu"],
            ),
            (
                Error::StreamDevice {
                    launch: "launch of kernel 'saxpy'".into(),
                    stream: Device::Cuda(1),
                    device: Device::Cuda(0),
                },
                &["'saxpy'", "cuda:1", "cuda:0", "pass a stream of cuda:0"],
            ),
            (
                Error::CompiledBlockDim {
                    kernel: k(),
                    given: 128,
                    compiled: 256,
                },
                &[
                    "'saxpy'",
                    "block_dim 128",
                    "block_dim 256",
                    "WP_TILE_BLOCK_DIM",
                ],
            ),
            (
                Error::ResidentLean { kernel: k() },
                &[
                    "'saxpy'",
                    "MaxBlocks::Resident",
                    "lean",
                    "without max_blocks",
                ],
            ),
            (
                Error::NoResidentGrid {
                    kernel: k(),
                    block_dim: 1024,
                },
                &["'saxpy'", "1024 threads", "smaller block_dim"],
            ),
            (
                Error::KernelDim {
                    kernel: k(),
                    given: 5,
                },
                &["'saxpy'", "says 5", "1 to 4"],
            ),
            (
                Error::AccessRule(Box::new(AccessRuleError {
                    kernel: k(),
                    param: "x".into(),
                    problem: AccessRuleProblem::NoSuchCoordinate {
                        coordinate: 2,
                        kernel_dim: 1,
                    },
                })),
                &["'saxpy'", "'x'", "coordinate 2", "1 coordinate(s)"],
            ),
            (
                Error::NotCuda {
                    call: "Device::context",
                    device: Device::Cpu,
                },
                &["Device::context", "cpu", "cuda:N"],
            ),
            (
                Error::NoSuchLaunch {
                    call: "Graph::update",
                    index: 7,
                    count: 3,
                },
                &["Graph::update", "3 launches", "launch 7", "below 3"],
            ),
        ];
        for (e, parts) in cases {
            let shown = e.to_string();
            for p in parts {
                assert!(shown.contains(p), "{p:?} not in {shown:?}");
            }
        }
    }

    /// The tape's refusals are typed: a loss without a gradient, a loss
    /// that is not a float array, an input check_gradients cannot perturb.
    #[test]
    fn tape_refusals_are_typed() {
        let loss = Array::zeros::<f32>(Device::Cpu, &[1]).unwrap();
        let e = Tape::new().backward(&loss).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::NoGradient {
                    call: "Tape::backward",
                    ..
                }
            ),
            "{e}"
        );
        let int_loss = Array::zeros::<i32>(Device::Cpu, &[1])
            .unwrap()
            .with_grad()
            .unwrap();
        let e = Tape::new().backward(&int_loss).unwrap_err();
        assert!(matches!(&e, Error::LossDType { dtype: "int32", .. }), "{e}");
        let x = Array::zeros::<f32>(Device::Cpu, &[2])
            .unwrap()
            .with_grad()
            .unwrap();
        let no_grad = Array::zeros::<f32>(Device::Cpu, &[2]).unwrap();
        let loss = loss.with_grad().unwrap();
        let e = check_gradients(&[&x, &no_grad], &loss, 1e-3, || Ok(())).unwrap_err();
        assert!(matches!(&e, Error::GradientInput { index: 1, .. }), "{e}");
        assert!(e.to_string().contains("input 1"), "{e}");
        // A loss of three elements: Warp takes one-element losses only (on
        // 8f769ee backward seeded all three and check_gradients answered
        // max_abs 6.0 for this case).
        let loss3 = Array::zeros::<f32>(Device::Cpu, &[3])
            .unwrap()
            .with_grad()
            .unwrap();
        let e = Tape::new().backward(&loss3).unwrap_err();
        assert!(
            matches!(&e, Error::LossShape { call: "Tape::backward", shape } if shape == &[3]),
            "{e}"
        );
        assert!(e.to_string().contains("backward_with"), "{e}");
        let e = check_gradients(&[&x], &loss3, 1e-3, || Ok(())).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::LossShape {
                    call: "check_gradients",
                    ..
                }
            ),
            "{e}"
        );
        // backward_with: an output without a gradient is refused.
        let e = Tape::new()
            .backward_with(&[(&no_grad, &no_grad)])
            .unwrap_err();
        assert!(
            matches!(
                &e,
                Error::NoGradient {
                    call: "Tape::backward_with",
                    ..
                }
            ),
            "{e}"
        );
    }
}
