//! Launch configuration and the rules a launch must satisfy, checked before
//! the driver sees it. Everything here is pure logic over device and function
//! limits, so it is tested with real limits as values, without a GPU.

use std::fmt;

/// Three dimensions of a grid or block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// x extent.
    pub x: u32,
    /// y extent.
    pub y: u32,
    /// z extent.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }
    /// `x * y * z`, or `None` when it overflows `u64`.
    pub fn product(self) -> Option<u64> {
        (self.x as u64)
            .checked_mul(self.y as u64)?
            .checked_mul(self.z as u64)
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::new(x, 1, 1)
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3::new(x, y, 1)
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3::new(x, y, z)
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.x, self.y, self.z)
    }
}

/// Most blocks in a thread-block cluster that every device with clusters
/// schedules (CUDA calls this the portable cluster size). A kernel may ask
/// for more with [`Function::allow_non_portable_cluster_size`](crate::Function::allow_non_portable_cluster_size)
/// (up to 16 on compute capability 9.0), see
/// [Thread Block Clusters](https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#thread-block-clusters).
pub const PORTABLE_CLUSTER_SIZE: u32 = 8;

/// Grid, block and dynamic shared memory of one launch, with the launch
/// attributes that go with them (thread-block clusters, programmatic
/// dependent launch). Every field is checked before the driver sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// Blocks per thread-block cluster (compute capability 9.0 and later):
    /// the blocks of one cluster run at once on one GPU processing cluster
    /// and can read each other's shared memory. `None` launches without a
    /// cluster attribute (a kernel compiled with `__cluster_dims__` still
    /// gets its compile-time clusters). Every grid extent must be a
    /// multiple of the cluster's.
    pub cluster: Option<Dim3>,
    /// Programmatic dependent launch (compute capability 9.0 and later):
    /// the kernel may start while the kernel queued before it on the stream
    /// is still running, and waits for it inside the kernel. Only kernels
    /// declared with [`DynKernel::allow_programmatic_launch`](crate::DynKernel::allow_programmatic_launch)
    /// may be launched so; others are refused with
    /// [`LaunchError::ProgrammaticNotDeclared`].
    pub programmatic: bool,
}

impl LaunchConfig {
    /// A configuration with no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
            cluster: None,
            programmatic: false,
        }
    }
    /// With `bytes` of dynamic shared memory per block.
    pub fn with_shared_mem(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }
    /// With thread-block clusters of `cluster` blocks (see
    /// [`LaunchConfig::cluster`]); checked at launch against the device, the
    /// grid, the kernel's cluster limits and `cuOccupancyMaxActiveClusters`.
    pub fn with_cluster(mut self, cluster: impl Into<Dim3>) -> Self {
        self.cluster = Some(cluster.into());
        self
    }
    /// As a programmatic dependent launch (see [`LaunchConfig::programmatic`]).
    pub fn with_programmatic_launch(mut self) -> Self {
        self.programmatic = true;
        self
    }
    /// A 1-D configuration covering `n` elements with `block` threads per block
    /// (at least one block).
    pub fn for_elements(n: u32, block: u32) -> Self {
        let block = block.max(1);
        LaunchConfig::new(n.div_ceil(block).max(1), block)
    }

    /// The driver's form of this configuration for `cuLaunchKernelEx` and
    /// the occupancy queries, on `stream` (null: none) with the launch
    /// attributes `attrs`, which must outlive the driver call.
    pub(crate) fn to_driver(
        self,
        stream: cuda_sys::CUstream,
        attrs: &mut [cuda_sys::CUlaunchAttribute],
    ) -> cuda_sys::CUlaunchConfig {
        cuda_sys::CUlaunchConfig {
            gridDimX: self.grid.x,
            gridDimY: self.grid.y,
            gridDimZ: self.grid.z,
            blockDimX: self.block.x,
            blockDimY: self.block.y,
            blockDimZ: self.block.z,
            sharedMemBytes: self.shared_mem_bytes,
            hStream: stream,
            attrs: attrs.as_mut_ptr(),
            numAttrs: attrs.len() as u32,
        }
    }
}

/// What the device allows, queried once per device
/// ([`CudaDevice::limits`](crate::CudaDevice::limits)). Fields may be added in
/// later releases; to pass limits as values (in tests, or to reason about a
/// device that is not present) start from [`DeviceLimits::new`] and set the
/// fields that differ.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceLimits {
    /// Device name, for messages.
    pub name: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Whether `CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH` is set.
    pub cooperative_launch: bool,
    /// Maximum block extent per axis.
    pub max_block: Dim3,
    /// Maximum grid extent per axis.
    pub max_grid: Dim3,
    /// `(major, minor)` compute capability, e.g. `(9, 0)`.
    pub compute_capability: (u32, u32),
    /// Whether `CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH` is set (thread-block
    /// clusters; compute capability 9.0 and later).
    pub cluster_launch: bool,
    /// Threads per warp (`CU_DEVICE_ATTRIBUTE_WARP_SIZE`; 32 on every
    /// device so far).
    pub warp_size: u32,
    /// Most threads in one block (`CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`).
    pub max_threads_per_block: u32,
    /// Most threads resident on one SM
    /// (`CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR`; 2048 on an H200).
    pub max_threads_per_sm: u32,
}

impl DeviceLimits {
    /// Limits for a device named `name` with `sm_count` SMs and compute
    /// capability `(major, minor)`; the other fields take the values every
    /// device of compute capability 7.0 to 9.0 reports (blocks of at most
    /// 1024 threads and 1024 x 1024 x 64, grids of at most
    /// (2^31 - 1) x 65535 x 65535, warps of 32, 2048 threads per SM,
    /// cooperative launches; clusters from 9.0). Set the fields that differ.
    pub fn new(name: impl Into<String>, sm_count: u32, compute_capability: (u32, u32)) -> Self {
        DeviceLimits {
            name: name.into(),
            sm_count,
            cooperative_launch: true,
            max_block: Dim3::new(1024, 1024, 64),
            max_grid: Dim3::new(2147483647, 65535, 65535),
            compute_capability,
            cluster_launch: compute_capability.0 >= 9,
            warp_size: 32,
            max_threads_per_block: 1024,
            max_threads_per_sm: 2048,
        }
    }
}

/// The block size with the most resident threads per SM, and the grid that
/// fills the device at that size ([`Function::max_potential_block_size`](crate::Function::max_potential_block_size)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PotentialBlockSize {
    /// Threads per block (0 when no block size fits, as CUDA answers).
    pub block_threads: u32,
    /// Blocks that fill the device at once: resident blocks per SM times
    /// the SMs (`minGridSize` in CUDA; 0 when no block size fits).
    pub min_grid_blocks: u32,
    /// Dynamic shared memory per block at that block size, in bytes.
    pub shared_mem_bytes: u32,
}

/// `cudaOccupancyMaxPotentialBlockSizeVariableSMem`'s search, over device
/// and function limits and an occupancy function: block sizes from the
/// largest the kernel may run (`min(device, function, block_limit)`; a
/// `block_limit` of 0 means none) down in warp-size steps, each with its
/// dynamic shared memory (`shared_mem(threads)`), keeping the first size
/// with the most resident threads per SM (`threads x occupancy(threads,
/// bytes)`), and stopping early at the SM's thread limit. A size whose
/// shared memory exceeds what the function may get counts as occupancy 0
/// and is never asked.
///
/// # Errors
///
/// The first error of `occupancy`.
pub(crate) fn max_potential_block_size<E>(
    device: &DeviceLimits,
    func: &FunctionLimits,
    block_limit: u32,
    mut shared_mem: impl FnMut(u32) -> u64,
    mut occupancy: impl FnMut(u32, u32) -> Result<u32, E>,
) -> Result<PotentialBlockSize, E> {
    let granularity = device.warp_size.max(1);
    let max_block = device.max_threads_per_block.min(func.max_threads_per_block);
    let limit = match block_limit {
        0 => max_block,
        l => l.min(max_block),
    };
    let mut best = PotentialBlockSize {
        block_threads: 0,
        min_grid_blocks: 0,
        shared_mem_bytes: 0,
    };
    let mut best_threads = 0u64;
    let mut aligned = limit.div_ceil(granularity).saturating_mul(granularity);
    while aligned > 0 {
        let threads = aligned.min(limit);
        let smem = shared_mem(threads);
        let blocks = match u32::try_from(smem) {
            Ok(b) if b <= func.max_dynamic_shared_bytes => occupancy(threads, b)?,
            _ => 0,
        };
        let resident = u64::from(threads) * u64::from(blocks);
        if resident > best_threads {
            best = PotentialBlockSize {
                block_threads: threads,
                min_grid_blocks: blocks.saturating_mul(device.sm_count),
                // Fits: checked against the function's limit above.
                shared_mem_bytes: smem as u32,
            };
            best_threads = resident;
        }
        if best_threads == u64::from(device.max_threads_per_sm) {
            break;
        }
        aligned -= granularity;
    }
    Ok(best)
}

/// What one function allows, queried once per function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionLimits {
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`: registers and the device limit combined.
    pub max_threads_per_block: u32,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: the dynamic shared memory it may get.
    pub max_dynamic_shared_bytes: u32,
}

/// What one function allows for thread-block clusters in one context at one
/// block size and dynamic shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterLimits {
    /// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`: whether the
    /// function may be launched with clusters of more than
    /// [`PORTABLE_CLUSTER_SIZE`] blocks.
    pub non_portable_allowed: bool,
    /// The cluster dimensions the kernel was compiled with
    /// (`__cluster_dims__`, `CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH` ...),
    /// `None` when it was compiled without.
    pub required: Option<Dim3>,
    /// The largest cluster (blocks) the device can run for this function at
    /// this block size and shared memory (`cuOccupancyMaxPotentialClusterSize`;
    /// on an H200 8, or 16 once non-portable sizes are allowed); for a kernel
    /// compiled with a cluster, that cluster's size.
    pub max_size: u32,
}

/// A launch refused before it reached the driver.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchError {
    /// A module's function launched on a stream of another context.
    ContextMismatch {
        /// Kernel name.
        kernel: String,
        /// The context the function was loaded in (its device).
        function_context: String,
        /// The stream's context (its device).
        stream_context: String,
    },
    /// A grid or block extent is zero.
    ZeroDimension {
        /// Kernel name.
        kernel: String,
        /// `grid.x`, `block.z`, …
        axis: &'static str,
    },
    /// A grid or block extent exceeds the device's maximum for that axis.
    DimensionTooLarge {
        /// Kernel name.
        kernel: String,
        /// `grid.y`, `block.x`, …
        axis: &'static str,
        /// Value given.
        value: u32,
        /// Device maximum.
        max: u32,
        /// Device name.
        device: String,
    },
    /// More threads per block than this function can run.
    BlockTooLarge {
        /// Kernel name.
        kernel: String,
        /// Threads per block requested.
        threads: u64,
        /// The function's maximum.
        max: u32,
    },
    /// More dynamic shared memory than this function can get.
    SharedMemoryTooLarge {
        /// Kernel name.
        kernel: String,
        /// Bytes requested.
        requested: u32,
        /// Bytes available to this function.
        max: u32,
    },
    /// The grid's block count overflows what a launch can express.
    GridTooLarge {
        /// Kernel name.
        kernel: String,
        /// The grid.
        grid: Dim3,
    },
    /// The device cannot launch cooperative kernels.
    CooperativeNotSupported {
        /// Kernel name.
        kernel: String,
        /// Device name.
        device: String,
    },
    /// More blocks than can be resident at once, which a cooperative grid needs.
    CooperativeLaunchTooLarge {
        /// Kernel name.
        kernel: String,
        /// Blocks requested.
        blocks: u64,
        /// Most blocks that can be resident: `per_sm * sm_count`.
        max_blocks: u64,
        /// Resident blocks per SM at this block size and shared memory.
        per_sm: u32,
        /// SMs on the device.
        sm_count: u32,
        /// Device name.
        device: String,
        /// Threads per block.
        threads: u64,
        /// Dynamic shared memory per block.
        shared_mem_bytes: u32,
    },
    /// A buffer shorter than a bound declared with the kernel
    /// ([`Bound`](crate::Bound)): the kernel would index past its end.
    BufferTooShort {
        /// Kernel name.
        kernel: String,
        /// Zero-based parameter index.
        index: usize,
        /// Parameter name (or `#index`).
        name: String,
        /// The buffer's length in elements.
        len: u64,
        /// What the bound measures, e.g. "the grid's blocks".
        extent: String,
        /// Its value for this launch.
        needed: u64,
        /// What to do.
        hint: String,
    },
    /// A cluster launch on a device without thread-block clusters.
    ClusterNotSupported {
        /// Kernel name.
        kernel: String,
        /// Device name.
        device: String,
        /// The device's compute capability (clusters need 9.0 or later).
        compute_capability: (u32, u32),
    },
    /// A grid extent that is not a multiple of the cluster's.
    ClusterDoesNotDivideGrid {
        /// Kernel name.
        kernel: String,
        /// `x`, `y` or `z`.
        axis: &'static str,
        /// The grid's extent on that axis.
        grid: u32,
        /// The cluster's extent on that axis.
        cluster: u32,
    },
    /// A cluster with more blocks than the kernel may have on this device.
    ClusterTooLarge {
        /// Kernel name.
        kernel: String,
        /// The cluster asked for.
        cluster: Dim3,
        /// Its blocks.
        size: u64,
        /// The most blocks allowed.
        max: u32,
        /// Whether the kernel allows non-portable sizes (above
        /// [`PORTABLE_CLUSTER_SIZE`]).
        non_portable_allowed: bool,
        /// Device name.
        device: String,
    },
    /// A cluster other than the one the kernel was compiled with.
    ClusterMismatch {
        /// Kernel name.
        kernel: String,
        /// The cluster asked for.
        cluster: Dim3,
        /// The kernel's compile-time cluster (`__cluster_dims__`).
        required: Dim3,
    },
    /// Not even one cluster of this shape fits on the device at this block
    /// size and shared memory (`cuOccupancyMaxActiveClusters` is 0).
    ClusterDoesNotFit {
        /// Kernel name.
        kernel: String,
        /// The cluster asked for.
        cluster: Dim3,
        /// Threads per block.
        threads: u64,
        /// Dynamic shared memory per block.
        shared_mem_bytes: u32,
        /// Device name.
        device: String,
    },
    /// A programmatic dependent launch of a kernel not declared to wait for
    /// the work before it.
    ProgrammaticNotDeclared {
        /// Kernel name.
        kernel: String,
    },
    /// A programmatic dependent launch on a device below compute capability 9.0.
    ProgrammaticNotSupported {
        /// Kernel name.
        kernel: String,
        /// Device name.
        device: String,
        /// The device's compute capability.
        compute_capability: (u32, u32),
    },
    /// A grid of more blocks than the kernel's declaration allows
    /// ([`DynKernel::max_grid`](crate::DynKernel::max_grid)).
    GridAboveDeclared {
        /// Kernel name.
        kernel: String,
        /// The grid.
        grid: Dim3,
        /// Its blocks.
        blocks: u64,
        /// The most blocks declared.
        max: u64,
    },
    /// A block other than the one the kernel's declaration fixes
    /// ([`DynKernel::fixed_block`](crate::DynKernel::fixed_block)).
    BlockNotDeclared {
        /// Kernel name.
        kernel: String,
        /// The block asked for.
        block: Dim3,
        /// The declared block.
        required: Dim3,
    },
    /// Less dynamic shared memory than the kernel's declaration needs for
    /// this launch ([`DynKernel::shared_mem`](crate::DynKernel::shared_mem)).
    SharedMemoryBelowDeclared {
        /// Kernel name.
        kernel: String,
        /// Bytes the launch gives.
        given: u32,
        /// The declared rule, in words.
        rule: String,
        /// Bytes the rule asks for at this launch.
        needed: u64,
    },
    /// A declared extent ([`Extent`](crate::Extent)) whose value overflows
    /// 64 bits for this launch: refused rather than wrapped.
    ExtentOverflow {
        /// Kernel name.
        kernel: String,
        /// The extent, in words.
        extent: String,
    },
    /// A bounded parameter given a raw pointer, whose length is unknown.
    BufferUnknown {
        /// Kernel name.
        kernel: String,
        /// Zero-based parameter index.
        index: usize,
        /// Parameter name (or `#index`).
        name: String,
        /// What the bound measures.
        extent: String,
    },
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::ContextMismatch {
                kernel,
                function_context,
                stream_context,
            } => write!(
                f,
                "launch of '{kernel}' refused: the kernel was loaded in the context of {function_context} but the stream belongs to the context of {stream_context}; launch on a stream of the module's context, or load the image as a Library, whose kernels run in any context"
            ),
            LaunchError::ZeroDimension { kernel, axis } => {
                write!(
                    f,
                    "launch of '{kernel}' has {axis} = 0; every grid and block extent must be at least 1"
                )
            }
            LaunchError::DimensionTooLarge {
                kernel,
                axis,
                value,
                max,
                device,
            } => {
                write!(
                    f,
                    "launch of '{kernel}' has {axis} = {value} but {device} allows at most {max}; use at most {max}"
                )
            }
            LaunchError::BlockTooLarge {
                kernel,
                threads,
                max,
            } => write!(
                f,
                "launch of '{kernel}' asks for {threads} threads per block but the kernel can run at most {max} (its registers and the device limit); use at most {max}"
            ),
            LaunchError::SharedMemoryTooLarge {
                kernel,
                requested,
                max,
            } => write!(
                f,
                "launch of '{kernel}' asks for {requested} B of dynamic shared memory per block but the kernel can get at most {max} B; ask for less, or raise the kernel's limit with set_max_dynamic_shared_memory"
            ),
            LaunchError::GridTooLarge { kernel, grid } => {
                write!(
                    f,
                    "launch of '{kernel}' has a grid of {grid} blocks, more than a launch can count; use a smaller grid"
                )
            }
            LaunchError::CooperativeNotSupported { kernel, device } => write!(
                f,
                "cooperative launch of '{kernel}' refused: {device} does not support cooperative launches (CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0); use a plain launch"
            ),
            LaunchError::CooperativeLaunchTooLarge {
                kernel,
                blocks,
                max_blocks,
                per_sm,
                sm_count,
                device,
                threads,
                shared_mem_bytes,
            } => write!(
                f,
                "cooperative launch of '{kernel}' asks for {blocks} blocks but at most {max_blocks} can be resident on {device} ({per_sm} per SM x {sm_count} SMs at {threads} threads, {shared_mem_bytes} B dynamic shared memory); use at most {max_blocks} blocks or ask cuda_api for the largest cooperative grid (TypedKernel::max_cooperative_grid)"
            ),
            LaunchError::BufferTooShort {
                kernel,
                index,
                name,
                len,
                extent,
                needed,
                hint,
            } => write!(
                f,
                "launch of '{kernel}' refused: argument {index} ('{name}') has {len} element(s) but the kernel's declared bound needs at least {extent} = {needed}; {hint}"
            ),
            LaunchError::BufferUnknown {
                kernel,
                index,
                name,
                extent,
            } => write!(
                f,
                "launch of '{kernel}' refused: argument {index} ('{name}') must hold at least {extent} (a declared bound) but was given a raw pointer, whose length is unknown; pass the buffer or a view (`&buffer`, `&mut buffer`)"
            ),
            LaunchError::GridAboveDeclared {
                kernel,
                grid,
                blocks,
                max,
            } => write!(
                f,
                "launch of '{kernel}' refused: the grid {grid} has {blocks} blocks but the kernel is declared safe for at most {max} (max_grid); launch at most {max} blocks"
            ),
            LaunchError::BlockNotDeclared {
                kernel,
                block,
                required,
            } => write!(
                f,
                "launch of '{kernel}' refused: the block is {block} but the kernel is written for blocks of exactly {required} (fixed_block); launch blocks of {required}"
            ),
            LaunchError::SharedMemoryBelowDeclared {
                kernel,
                given,
                rule,
                needed,
            } => write!(
                f,
                "launch of '{kernel}' refused: it gets {given} B of dynamic shared memory per block but its declaration needs {rule} = {needed} B; give at least {needed} B (LaunchConfig::with_shared_mem)"
            ),
            LaunchError::ExtentOverflow { kernel, extent } => write!(
                f,
                "launch of '{kernel}' refused: the declared extent {extent} overflows 64 bits for this launch; pass smaller lengths or launch a smaller grid"
            ),
            LaunchError::ClusterNotSupported {
                kernel,
                device,
                compute_capability: (major, minor),
            } => write!(
                f,
                "cluster launch of '{kernel}' refused: {device} (compute capability {major}.{minor}) has no thread-block clusters, which need compute capability 9.0 or later (CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH); launch without a cluster"
            ),
            LaunchError::ClusterDoesNotDivideGrid {
                kernel,
                axis,
                grid,
                cluster,
            } => {
                write!(
                    f,
                    "cluster launch of '{kernel}' refused: grid.{axis} = {grid} is not a multiple of cluster.{axis} = {cluster}; use a grid.{axis} that is"
                )?;
                if let Some(r) = grid.checked_rem(*cluster) {
                    let down = grid - r;
                    let up = u64::from(down) + u64::from(*cluster);
                    match down {
                        0 => write!(f, " (e.g. {up})")?,
                        _ => write!(f, " (e.g. {down} or {up})")?,
                    }
                }
                Ok(())
            }
            LaunchError::ClusterTooLarge {
                kernel,
                cluster,
                size,
                max,
                non_portable_allowed,
                device,
            } => {
                write!(
                    f,
                    "cluster launch of '{kernel}' refused: a cluster of {cluster} is {size} blocks but "
                )?;
                if !non_portable_allowed && *max == PORTABLE_CLUSTER_SIZE {
                    write!(
                        f,
                        "the portable maximum is {max} and the kernel does not allow non-portable sizes; use at most {max} blocks, or allow larger clusters with Function::allow_non_portable_cluster_size (compute capability 9.0 allows up to 16)"
                    )
                } else {
                    write!(
                        f,
                        "{device} runs at most {max} blocks per cluster for this kernel at this block size and shared memory (cuOccupancyMaxPotentialClusterSize); use at most {max} blocks per cluster"
                    )
                }
            }
            LaunchError::ClusterMismatch {
                kernel,
                cluster,
                required,
            } => write!(
                f,
                "cluster launch of '{kernel}' refused: the kernel was compiled with clusters of {required} (__cluster_dims__) but the launch asks for {cluster}; ask for {required} or for no cluster"
            ),
            LaunchError::ClusterDoesNotFit {
                kernel,
                cluster,
                threads,
                shared_mem_bytes,
                device,
            } => write!(
                f,
                "cluster launch of '{kernel}' refused: not one cluster of {cluster} blocks of {threads} threads with {shared_mem_bytes} B dynamic shared memory each fits on {device} at once (cuOccupancyMaxActiveClusters is 0); use a smaller cluster, fewer threads or less shared memory"
            ),
            LaunchError::ProgrammaticNotDeclared { kernel } => write!(
                f,
                "programmatic dependent launch of '{kernel}' refused: the kernel is not declared to wait for the work queued before it (cudaGridDependencySynchronize / griddepcontrol.wait); declare it with allow_programmatic_launch if it does, or launch without programmatic"
            ),
            LaunchError::ProgrammaticNotSupported {
                kernel,
                device,
                compute_capability: (major, minor),
            } => write!(
                f,
                "programmatic dependent launch of '{kernel}' refused: {device} has compute capability {major}.{minor} but programmatic dependent launch needs 9.0 or later; launch without programmatic"
            ),
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for LaunchError {}

/// Checks that no grid or block extent is zero; needs no facts, so it runs
/// before any driver query.
pub(crate) fn check_nonzero(kernel: &str, cfg: &LaunchConfig) -> Result<(), LaunchError> {
    let axes = [
        ("grid.x", cfg.grid.x),
        ("grid.y", cfg.grid.y),
        ("grid.z", cfg.grid.z),
        ("block.x", cfg.block.x),
        ("block.y", cfg.block.y),
        ("block.z", cfg.block.z),
    ];
    match axes.iter().find(|(_, v)| *v == 0) {
        Some((axis, _)) => Err(LaunchError::ZeroDimension {
            kernel: kernel.to_string(),
            axis,
        }),
        None => Ok(()),
    }
}

/// Checks a block size and dynamic shared memory against the function's own
/// limits (no device facts, no occupancy): what must hold before occupancy
/// can even be asked.
pub(crate) fn check_block(
    kernel: &str,
    func: &FunctionLimits,
    block_threads: u64,
    shared_mem_bytes: u32,
) -> Result<(), LaunchError> {
    if block_threads == 0 {
        return Err(LaunchError::ZeroDimension {
            kernel: kernel.to_string(),
            axis: "block",
        });
    }
    if block_threads > func.max_threads_per_block as u64 {
        return Err(LaunchError::BlockTooLarge {
            kernel: kernel.to_string(),
            threads: block_threads,
            max: func.max_threads_per_block,
        });
    }
    if shared_mem_bytes > func.max_dynamic_shared_bytes {
        return Err(LaunchError::SharedMemoryTooLarge {
            kernel: kernel.to_string(),
            requested: shared_mem_bytes,
            max: func.max_dynamic_shared_bytes,
        });
    }
    Ok(())
}

/// The grid's block count when every check of [`check_shape`] passes, and
/// `None` when one fails: the same checks made without building an error,
/// so a launch's common case runs few instructions and no error code. A
/// caller that gets `None` asks [`check_shape`] for the error (see
/// [`shape_blocks`]).
#[inline]
pub(crate) fn shape_fits(
    device: &DeviceLimits,
    func: &FunctionLimits,
    cfg: &LaunchConfig,
) -> Option<u64> {
    let (g, b, d) = (cfg.grid, cfg.block, device);
    // `&` rather than `&&`: every comparison is cheap, and one branch at the
    // end predicts better than twelve.
    let nonzero = (g.x != 0) & (g.y != 0) & (g.z != 0) & (b.x != 0) & (b.y != 0) & (b.z != 0);
    let within = (g.x <= d.max_grid.x)
        & (g.y <= d.max_grid.y)
        & (g.z <= d.max_grid.z)
        & (b.x <= d.max_block.x)
        & (b.y <= d.max_block.y)
        & (b.z <= d.max_block.z);
    let threads = b.product()?;
    let blocks = g.product()?;
    let fits = (threads <= u64::from(func.max_threads_per_block))
        & (cfg.shared_mem_bytes <= func.max_dynamic_shared_bytes);
    (nonzero & within & fits).then_some(blocks)
}

/// [`shape_fits`], and when it fails [`check_shape`]'s error: what a
/// launch calls.
#[inline]
pub(crate) fn shape_blocks(
    kernel: &str,
    device: &DeviceLimits,
    func: &FunctionLimits,
    cfg: &LaunchConfig,
) -> Result<u64, LaunchError> {
    match shape_fits(device, func, cfg) {
        Some(blocks) => Ok(blocks),
        None => check_shape(kernel, device, func, cfg),
    }
}

/// Checks a launch against the device and function limits, without
/// occupancy; returns the grid's block count. Zero extents come first, then
/// the device's per-axis limits, then the function's own limits. Launches
/// reach it through [`shape_blocks`], only when a check fails.
#[cold]
#[inline(never)]
pub(crate) fn check_shape(
    kernel: &str,
    device: &DeviceLimits,
    func: &FunctionLimits,
    cfg: &LaunchConfig,
) -> Result<u64, LaunchError> {
    check_nonzero(kernel, cfg)?;
    let axes = [
        ("grid.x", cfg.grid.x, device.max_grid.x),
        ("grid.y", cfg.grid.y, device.max_grid.y),
        ("grid.z", cfg.grid.z, device.max_grid.z),
        ("block.x", cfg.block.x, device.max_block.x),
        ("block.y", cfg.block.y, device.max_block.y),
        ("block.z", cfg.block.z, device.max_block.z),
    ];
    for (axis, value, max) in axes {
        if value > max {
            return Err(LaunchError::DimensionTooLarge {
                kernel: kernel.to_string(),
                axis,
                value,
                max,
                device: device.name.clone(),
            });
        }
    }
    let threads = cfg.block.product().unwrap_or(u64::MAX);
    check_block(kernel, func, threads, cfg.shared_mem_bytes)?;
    cfg.grid.product().ok_or_else(|| LaunchError::GridTooLarge {
        kernel: kernel.to_string(),
        grid: cfg.grid,
    })
}

/// Checks a cooperative grid of `blocks` blocks against device support and
/// `per_sm` resident blocks per SM (the occupancy at this block size and
/// shared memory) times the SM count.
pub(crate) fn check_cooperative(
    kernel: &str,
    device: &DeviceLimits,
    cfg: &LaunchConfig,
    blocks: u64,
    per_sm: u32,
) -> Result<(), LaunchError> {
    if !device.cooperative_launch {
        return Err(LaunchError::CooperativeNotSupported {
            kernel: kernel.to_string(),
            device: device.name.clone(),
        });
    }
    let max_blocks = per_sm as u64 * device.sm_count as u64;
    if blocks > max_blocks {
        return Err(LaunchError::CooperativeLaunchTooLarge {
            kernel: kernel.to_string(),
            blocks,
            max_blocks,
            per_sm,
            sm_count: device.sm_count,
            device: device.name.clone(),
            threads: cfg.block.product().unwrap_or(u64::MAX),
            shared_mem_bytes: cfg.shared_mem_bytes,
        });
    }
    Ok(())
}

/// Checks a launch against the device and function limits: [`check_shape`],
/// then, when `cooperative` holds the occupancy (resident blocks per SM),
/// [`check_cooperative`] (the tests' model of a launch's checks).
#[cfg(test)]
pub(crate) fn check_launch(
    kernel: &str,
    device: &DeviceLimits,
    func: &FunctionLimits,
    cfg: &LaunchConfig,
    cooperative: Option<u32>,
) -> Result<(), LaunchError> {
    let blocks = check_shape(kernel, device, func, cfg)?;
    if let Some(per_sm) = cooperative {
        check_cooperative(kernel, device, cfg, blocks, per_sm)?;
    }
    Ok(())
}

/// Checks what a cluster launch needs before any cluster query: a device
/// with clusters, no zero cluster extent, and a grid that is a multiple of
/// the cluster on every axis. Returns the cluster's block count.
///
/// # Errors
///
/// [`LaunchError::ClusterNotSupported`], [`LaunchError::ZeroDimension`]
/// (`cluster.x`, ...) or [`LaunchError::ClusterDoesNotDivideGrid`].
pub(crate) fn check_cluster_shape(
    kernel: &str,
    device: &DeviceLimits,
    cfg: &LaunchConfig,
    cluster: Dim3,
) -> Result<u64, LaunchError> {
    if !device.cluster_launch || device.compute_capability.0 < 9 {
        return Err(LaunchError::ClusterNotSupported {
            kernel: kernel.to_string(),
            device: device.name.clone(),
            compute_capability: device.compute_capability,
        });
    }
    let axes = [
        ("x", cfg.grid.x, cluster.x),
        ("y", cfg.grid.y, cluster.y),
        ("z", cfg.grid.z, cluster.z),
    ];
    for (axis, grid, c) in axes {
        if c == 0 {
            return Err(LaunchError::ZeroDimension {
                kernel: kernel.to_string(),
                axis: match axis {
                    "x" => "cluster.x",
                    "y" => "cluster.y",
                    _ => "cluster.z",
                },
            });
        }
        if grid % c != 0 {
            return Err(LaunchError::ClusterDoesNotDivideGrid {
                kernel: kernel.to_string(),
                axis,
                grid,
                cluster: c,
            });
        }
    }
    // Each extent divides a grid extent, so the product fits in u64.
    Ok(cluster.product().unwrap_or(u64::MAX))
}

/// Checks a cluster against the kernel's own cluster limits: its
/// compile-time cluster (if any), the portable size unless the kernel
/// allows non-portable sizes, and the largest cluster the device runs for
/// it at this block size and shared memory.
///
/// # Errors
///
/// [`LaunchError::ClusterMismatch`] or [`LaunchError::ClusterTooLarge`].
pub(crate) fn check_cluster_size(
    kernel: &str,
    device: &DeviceLimits,
    limits: &ClusterLimits,
    cluster: Dim3,
) -> Result<(), LaunchError> {
    if let Some(required) = limits.required
        && required != cluster
    {
        return Err(LaunchError::ClusterMismatch {
            kernel: kernel.to_string(),
            cluster,
            required,
        });
    }
    let size = cluster.product().unwrap_or(u64::MAX);
    let max = if limits.non_portable_allowed {
        limits.max_size
    } else {
        limits.max_size.min(PORTABLE_CLUSTER_SIZE)
    };
    if size > u64::from(max) {
        return Err(LaunchError::ClusterTooLarge {
            kernel: kernel.to_string(),
            cluster,
            size,
            max,
            non_portable_allowed: limits.non_portable_allowed,
            device: device.name.clone(),
        });
    }
    Ok(())
}

/// Whether [`check_cluster_shape`], [`check_cluster_size`] and
/// [`check_cluster_fit`] all pass for `cluster`, without building an
/// error: a repeated cluster launch's common case. `false` sends the
/// caller to those checks for the error.
#[inline]
pub(crate) fn cluster_fits(
    device: &DeviceLimits,
    limits: &ClusterLimits,
    cfg: &LaunchConfig,
    cluster: Dim3,
    active_clusters: u32,
) -> bool {
    let (g, c) = (cfg.grid, cluster);
    if !device.cluster_launch || device.compute_capability.0 < 9 || c.x == 0 || c.y == 0 || c.z == 0
    {
        return false;
    }
    let divides = (g.x % c.x == 0) & (g.y % c.y == 0) & (g.z % c.z == 0);
    let max = if limits.non_portable_allowed {
        limits.max_size
    } else {
        limits.max_size.min(PORTABLE_CLUSTER_SIZE)
    };
    let Some(size) = c.product() else {
        return false;
    };
    divides
        & limits.required.is_none_or(|r| r == c)
        & (size <= u64::from(max))
        & (active_clusters != 0)
}

/// Checks that at least one cluster fits on the device at once:
/// `active_clusters` is `cuOccupancyMaxActiveClusters` for this cluster,
/// block size and shared memory.
///
/// # Errors
///
/// [`LaunchError::ClusterDoesNotFit`] when `active_clusters` is 0.
pub(crate) fn check_cluster_fit(
    kernel: &str,
    device: &DeviceLimits,
    cfg: &LaunchConfig,
    cluster: Dim3,
    active_clusters: u32,
) -> Result<(), LaunchError> {
    if active_clusters == 0 {
        return Err(LaunchError::ClusterDoesNotFit {
            kernel: kernel.to_string(),
            cluster,
            threads: cfg.block.product().unwrap_or(u64::MAX),
            shared_mem_bytes: cfg.shared_mem_bytes,
            device: device.name.clone(),
        });
    }
    Ok(())
}

/// Checks the cluster of `cfg` (none: nothing to check) in the order a
/// launch does: [`check_cluster_shape`], [`check_cluster_size`],
/// [`check_cluster_fit`].
///
/// # Errors
///
/// The first of their errors.
#[cfg(test)]
pub(crate) fn check_cluster(
    kernel: &str,
    device: &DeviceLimits,
    limits: &ClusterLimits,
    cfg: &LaunchConfig,
    active_clusters: u32,
) -> Result<(), LaunchError> {
    let Some(cluster) = cfg.cluster else {
        return Ok(());
    };
    check_cluster_shape(kernel, device, cfg, cluster)?;
    check_cluster_size(kernel, device, limits, cluster)?;
    check_cluster_fit(kernel, device, cfg, cluster, active_clusters)
}

/// Checks that the device can launch programmatically dependent kernels
/// (compute capability 9.0 and later) when `cfg` asks for it.
///
/// # Errors
///
/// [`LaunchError::ProgrammaticNotSupported`].
pub(crate) fn check_programmatic(
    kernel: &str,
    device: &DeviceLimits,
    cfg: &LaunchConfig,
) -> Result<(), LaunchError> {
    if cfg.programmatic && device.compute_capability.0 < 9 {
        return Err(LaunchError::ProgrammaticNotSupported {
            kernel: kernel.to_string(),
            device: device.name.clone(),
            compute_capability: device.compute_capability,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The H200 on the GPU machine (DESIGN.md section 5): 132 SMs, cooperative launch.
    fn h200() -> DeviceLimits {
        DeviceLimits {
            name: "NVIDIA H200".into(),
            sm_count: 132,
            cooperative_launch: true,
            max_block: Dim3::new(1024, 1024, 64),
            max_grid: Dim3::new(2147483647, 65535, 65535),
            compute_capability: (9, 0),
            cluster_launch: true,
            warp_size: 32,
            max_threads_per_block: 1024,
            max_threads_per_sm: 2048,
        }
    }

    #[test]
    fn the_value_constructor_gives_the_h200_for_its_name_sms_and_capability() {
        assert_eq!(DeviceLimits::new("NVIDIA H200", 132, (9, 0)), h200());
        let a100 = DeviceLimits::new("NVIDIA A100", 108, (8, 0));
        assert!(!a100.cluster_launch);
    }

    /// An H200-like occupancy model for a kernel of 64 registers per thread
    /// with `smem_per_thread` bytes of dynamic shared memory per thread:
    /// 65536 registers, 228 KiB of shared memory (1 KiB reserved per block),
    /// 32 blocks and 2048 threads per SM, registers allocated per warp in
    /// units of 256.
    fn occupancy(threads: u32, smem: u32) -> Result<u32, ()> {
        let warps = threads.div_ceil(32);
        let regs_per_warp = (64 * 32u32).div_ceil(256) * 256;
        let by_regs = 65536 / (warps * regs_per_warp);
        let by_threads = 2048 / (warps * 32);
        let by_smem = (228 * 1024) / (smem + 1024);
        Ok(by_regs.min(by_threads).min(by_smem).min(32))
    }

    #[test]
    fn the_potential_block_size_follows_the_runtime_search() {
        let f = FunctionLimits {
            max_threads_per_block: 1024,
            max_dynamic_shared_bytes: 227 * 1024,
        };
        // No shared memory: registers allow 1024 threads per SM at any block
        // size that divides 1024; the search starts at 1024 and keeps the
        // first best (1024 threads x 1 block), so the answer is 1024 with
        // 132 blocks to fill the device.
        let p = max_potential_block_size(&h200(), &f, 0, |_| 0, occupancy).unwrap();
        assert_eq!(
            p,
            PotentialBlockSize {
                block_threads: 1024,
                min_grid_blocks: 132,
                shared_mem_bytes: 0,
            }
        );
        // 64 bytes per thread: at 1024 threads a block needs 64 KiB + 1 KiB
        // reserved, 3 blocks fit in 228 KiB but registers allow one (1024
        // threads); at 992 threads registers still allow one. No size gives
        // more than 1024 resident threads, so the first, 1024, is kept.
        let p = max_potential_block_size(&h200(), &f, 0, |t| u64::from(t) * 64, occupancy).unwrap();
        assert_eq!((p.block_threads, p.shared_mem_bytes), (1024, 65536));
        // A limit of 1000 threads starts at 1000 (not a warp multiple, as the
        // runtime does): one block, 1000 resident; 992 to 544 threads fit one
        // block too (fewer threads); 512 threads fit two blocks (16 warps of
        // 2048 registers, 33 KiB each): 1024 resident, the best.
        let p =
            max_potential_block_size(&h200(), &f, 1000, |t| u64::from(t) * 64, occupancy).unwrap();
        assert_eq!(
            (p.block_threads, p.min_grid_blocks, p.shared_mem_bytes),
            (512, 264, 32768)
        );
        // 256 bytes per thread: 1024 threads need 257 KiB, more than the
        // function may get, and count as 0 without a query; 864 threads need
        // and 992 to 928 likewise; 896 threads need 224 KiB + 1 KiB reserved:
        // one block, 896 resident. Below, 448 threads give two blocks (896),
        // 224 threads four (896), 288 threads three (864): none more, so the
        // first, 896, is kept.
        let mut asked = Vec::new();
        let p = max_potential_block_size(
            &h200(),
            &f,
            0,
            |t| u64::from(t) * 256,
            |t, s| {
                asked.push(t);
                occupancy(t, s)
            },
        )
        .unwrap();
        assert!(!asked.contains(&1024) && !asked.contains(&928), "{asked:?}");
        assert_eq!(asked[0], 896, "{asked:?}");
        assert_eq!(
            p,
            PotentialBlockSize {
                block_threads: 896,
                min_grid_blocks: 132,
                shared_mem_bytes: 229376,
            }
        );
        // A device of 1536 threads per SM (compute capability 8.6) with a
        // function limited to 768 threads: the search starts at 768.
        let mut ga102 = DeviceLimits::new("NVIDIA RTX A6000", 84, (8, 6));
        ga102.max_threads_per_sm = 1536;
        let f768 = FunctionLimits {
            max_threads_per_block: 768,
            ..f
        };
        let p = max_potential_block_size(&ga102, &f768, 0, |_| 0, |t, _| Ok::<_, ()>(1536 / t))
            .unwrap();
        assert_eq!((p.block_threads, p.min_grid_blocks), (768, 168));
        // No size fits (every block's shared memory too large): 0 and 0.
        let p = max_potential_block_size(&h200(), &f, 0, |_| u64::MAX, occupancy).unwrap();
        assert_eq!((p.block_threads, p.min_grid_blocks), (0, 0));
        // An occupancy error is passed on.
        assert_eq!(
            max_potential_block_size(&h200(), &f, 0, |_| 0, |_, _| Err::<u32, _>("e")),
            Err("e")
        );
    }

    /// An extent near one of the edges a check compares with, a small
    /// one, or any: the draws of the fast checks' differential tests.
    fn extent(r: &mut fastrand::Rng, max: u32) -> u32 {
        let edges = [
            0,
            1,
            2,
            3,
            8,
            max.saturating_sub(1),
            max,
            max.saturating_add(1),
            u32::MAX,
        ];
        match r.u32(0..8) {
            0 => r.u32(..),
            1..=4 => r.u32(1..5),
            _ => edges[r.usize(0..edges.len())],
        }
    }

    /// How many draws of a differential test passed and failed the full
    /// checks: both must be common, or the test proves nothing of one side.
    #[derive(Default)]
    struct Tally {
        passed: u32,
        failed: u32,
    }
    impl Tally {
        fn add(&mut self, passed: bool) {
            if passed {
                self.passed += 1;
            } else {
                self.failed += 1;
            }
        }
        fn assert_both_above(&self, n: u32) {
            let Tally { passed, failed } = self;
            assert!(
                *passed > n && *failed > n,
                "{passed} passed, {failed} failed"
            );
        }
    }

    #[test]
    fn the_fast_shape_check_passes_exactly_what_check_shape_passes() {
        let mut r = fastrand::Rng::with_seed(7);
        // The H200, and a forged device whose limits let every product
        // overflow.
        let forged = DeviceLimits {
            max_block: Dim3::new(u32::MAX, u32::MAX, u32::MAX),
            max_grid: Dim3::new(u32::MAX, u32::MAX, u32::MAX),
            ..h200()
        };
        let mut tally = Tally::default();
        for i in 0..200_000 {
            let d = if i % 3 == 0 { forged.clone() } else { h200() };
            let func = FunctionLimits {
                max_threads_per_block: extent(&mut r, 1024),
                max_dynamic_shared_bytes: extent(&mut r, 48 * 1024),
            };
            let cfg = LaunchConfig {
                grid: Dim3::new(
                    extent(&mut r, d.max_grid.x),
                    extent(&mut r, d.max_grid.y),
                    extent(&mut r, d.max_grid.z),
                ),
                block: Dim3::new(
                    extent(&mut r, d.max_block.x),
                    extent(&mut r, d.max_block.y),
                    extent(&mut r, d.max_block.z),
                ),
                shared_mem_bytes: extent(&mut r, func.max_dynamic_shared_bytes),
                ..LaunchConfig::new(1, 1)
            };
            let slow = check_shape("k", &d, &func, &cfg).ok();
            assert_eq!(
                shape_fits(&d, &func, &cfg),
                slow,
                "{cfg:?} {func:?} on {}",
                d.name
            );
            assert_eq!(shape_blocks("k", &d, &func, &cfg).ok(), slow);
            tally.add(slow.is_some());
        }
        // Both outcomes were drawn often, so neither side is vacuous.
        tally.assert_both_above(5_000);
    }

    #[test]
    fn the_fast_cluster_check_passes_exactly_what_the_cluster_checks_pass() {
        let mut r = fastrand::Rng::with_seed(11);
        let mut tally = Tally::default();
        for i in 0..200_000 {
            let mut d = h200();
            match i % 7 {
                0 => d.cluster_launch = false,
                1 => d.compute_capability = (8, 9),
                _ => {}
            }
            let cluster = Dim3::new(extent(&mut r, 8), extent(&mut r, 4), extent(&mut r, 2));
            let limits = ClusterLimits {
                non_portable_allowed: r.bool(),
                required: (r.u32(0..4) == 0).then_some(if r.bool() {
                    cluster
                } else {
                    Dim3::new(2, 1, 1)
                }),
                max_size: extent(&mut r, 16),
            };
            let grid = Dim3::new(
                cluster
                    .x
                    .wrapping_mul(extent(&mut r, 4))
                    .max(extent(&mut r, 3)),
                extent(&mut r, 4),
                extent(&mut r, 2),
            );
            let cfg = LaunchConfig {
                grid,
                cluster: Some(cluster),
                ..LaunchConfig::new(1, 128)
            };
            let active = extent(&mut r, 2);
            let slow = check_cluster("k", &d, &limits, &cfg, active).is_ok();
            assert_eq!(
                cluster_fits(&d, &limits, &cfg, cluster, active),
                slow,
                "{cfg:?} {limits:?} active {active} on cc {:?}, clusters {}",
                d.compute_capability,
                d.cluster_launch
            );
            tally.add(slow);
        }
        tally.assert_both_above(2_000);
    }

    /// A 256-thread kernel that fits 8 blocks per SM (measured on the H200).
    const COOP_SUM: FunctionLimits = FunctionLimits {
        max_threads_per_block: 1024,
        max_dynamic_shared_bytes: 48 * 1024,
    };

    fn coop(blocks: u32) -> Result<(), LaunchError> {
        check_launch(
            "coop_sum",
            &h200(),
            &COOP_SUM,
            &LaunchConfig::new(blocks, 256),
            Some(8),
        )
    }

    #[test]
    fn the_largest_cooperative_grid_is_accepted() {
        assert_eq!(coop(1056), Ok(()));
    }

    #[test]
    fn one_block_more_is_refused_with_the_numbers() {
        let e = coop(1057).unwrap_err();
        insta::assert_snapshot!(e.to_string());
        assert!(matches!(
            e,
            LaunchError::CooperativeLaunchTooLarge {
                blocks: 1057,
                max_blocks: 1056,
                per_sm: 8,
                sm_count: 132,
                ..
            }
        ));
    }

    #[test]
    fn plain_launches_are_not_limited_by_occupancy() {
        assert_eq!(
            check_launch(
                "k",
                &h200(),
                &COOP_SUM,
                &LaunchConfig::new(100_000, 256),
                None
            ),
            Ok(())
        );
    }

    #[test]
    fn devices_without_cooperative_launch_refuse() {
        let mut d = h200();
        d.cooperative_launch = false;
        let e = check_launch(
            "coop_sum",
            &d,
            &COOP_SUM,
            &LaunchConfig::new(1, 256),
            Some(8),
        )
        .unwrap_err();
        insta::assert_snapshot!(e.to_string());
    }

    #[test]
    fn zero_dimensions_are_refused() {
        let e = check_launch(
            "k",
            &h200(),
            &COOP_SUM,
            &LaunchConfig::new((4, 0), 32),
            None,
        )
        .unwrap_err();
        assert_eq!(
            e,
            LaunchError::ZeroDimension {
                kernel: "k".into(),
                axis: "grid.y"
            }
        );
        let e = check_launch(
            "k",
            &h200(),
            &COOP_SUM,
            &LaunchConfig::new(4, (32, 1, 0)),
            None,
        )
        .unwrap_err();
        assert_eq!(
            e,
            LaunchError::ZeroDimension {
                kernel: "k".into(),
                axis: "block.z"
            }
        );
    }

    #[test]
    fn blocks_larger_than_the_function_allows_are_refused() {
        let f = FunctionLimits {
            max_threads_per_block: 512,
            ..COOP_SUM
        };
        let e =
            check_launch("heavy", &h200(), &f, &LaunchConfig::new(1, (32, 32)), None).unwrap_err();
        insta::assert_snapshot!(e.to_string());
        let e = check_launch(
            "k",
            &h200(),
            &COOP_SUM,
            &LaunchConfig::new(1, (1, 1, 65)),
            None,
        )
        .unwrap_err();
        assert!(matches!(
            e,
            LaunchError::DimensionTooLarge {
                axis: "block.z",
                value: 65,
                max: 64,
                ..
            }
        ));
    }

    #[test]
    fn too_much_dynamic_shared_memory_is_refused() {
        let cfg = LaunchConfig::new(1, 256).with_shared_mem(48 * 1024 + 1);
        let e = check_launch("coop_sum", &h200(), &COOP_SUM, &cfg, Some(8)).unwrap_err();
        insta::assert_snapshot!(e.to_string());
    }

    #[test]
    fn zero_blocks_come_before_any_limit() {
        // A zero block with an oversized grid: the zero is named first.
        let cfg = LaunchConfig::new((1, 70000), (0, 1, 1));
        let e = check_launch("k", &h200(), &COOP_SUM, &cfg, Some(8)).unwrap_err();
        assert!(
            matches!(
                e,
                LaunchError::ZeroDimension {
                    axis: "block.x",
                    ..
                }
            ),
            "{e}"
        );
        assert!(check_block("k", &COOP_SUM, 0, 0).is_err());
        // __launch_bounds__(128) at 256 threads is refused by the function's own limit.
        let lb128 = FunctionLimits {
            max_threads_per_block: 128,
            ..COOP_SUM
        };
        let e = check_block("lb128", &lb128, 256, 0).unwrap_err();
        insta::assert_snapshot!(e.to_string());
    }

    #[test]
    fn grid_limits_per_axis() {
        let e = check_launch(
            "k",
            &h200(),
            &COOP_SUM,
            &LaunchConfig::new((1, 65536), 1),
            None,
        )
        .unwrap_err();
        insta::assert_snapshot!(e.to_string());
    }

    #[test]
    fn elements_round_up_to_whole_blocks() {
        assert_eq!(
            LaunchConfig::for_elements(1000, 256).grid,
            Dim3::new(4, 1, 1)
        );
        assert_eq!(LaunchConfig::for_elements(0, 256).grid, Dim3::new(1, 1, 1));
        assert_eq!(Dim3::new(u32::MAX, u32::MAX, u32::MAX).product(), None);
        assert_eq!(
            Dim3::new(u32::MAX, 2, 1).product(),
            Some(2 * u32::MAX as u64)
        );
    }

    /// The H200's cluster facts for a small kernel: 8 blocks portable; 16
    /// once non-portable sizes are allowed (cuOccupancyMaxPotentialClusterSize).
    const PORTABLE: ClusterLimits = ClusterLimits {
        non_portable_allowed: false,
        required: None,
        max_size: 8,
    };
    const NON_PORTABLE: ClusterLimits = ClusterLimits {
        non_portable_allowed: true,
        required: None,
        max_size: 16,
    };

    fn cluster(
        limits: &ClusterLimits,
        grid: impl Into<Dim3>,
        cluster: impl Into<Dim3>,
        active: u32,
    ) -> Result<(), LaunchError> {
        let cfg = LaunchConfig::new(grid, 128).with_cluster(cluster);
        check_cluster("cluster_id", &h200(), limits, &cfg, active)
    }

    #[test]
    fn clusters_at_the_h200_limits_are_accepted() {
        assert_eq!(cluster(&PORTABLE, 64, 8, 16), Ok(()));
        assert_eq!(cluster(&PORTABLE, (4, 4), (2, 4), 16), Ok(()));
        assert_eq!(cluster(&NON_PORTABLE, 64, 16, 7), Ok(()));
        assert_eq!(cluster(&NON_PORTABLE, (8, 4, 2), (2, 4, 2), 7), Ok(()));
        // No cluster: nothing to check, whatever the facts say.
        let plain = LaunchConfig::new(7, 128);
        assert_eq!(check_cluster("k", &h200(), &PORTABLE, &plain, 0), Ok(()));
    }

    #[test]
    fn one_block_past_the_portable_size_is_refused() {
        let e = cluster(&PORTABLE, 64, (16, 1, 1), 16).unwrap_err();
        assert_eq!(
            e,
            LaunchError::ClusterTooLarge {
                kernel: "cluster_id".into(),
                cluster: Dim3::new(16, 1, 1),
                size: 16,
                max: 8,
                non_portable_allowed: false,
                device: "NVIDIA H200".into(),
            }
        );
        insta::assert_snapshot!(e.to_string());
        let e = cluster(&PORTABLE, 72, (9, 1, 1), 16).unwrap_err();
        assert!(
            matches!(
                e,
                LaunchError::ClusterTooLarge {
                    size: 9,
                    max: 8,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn one_block_past_the_non_portable_size_is_refused() {
        let e = cluster(&NON_PORTABLE, 68, (17, 1, 1), 7).unwrap_err();
        assert!(
            matches!(
                e,
                LaunchError::ClusterTooLarge {
                    size: 17,
                    max: 16,
                    non_portable_allowed: true,
                    ..
                }
            ),
            "{e}"
        );
        insta::assert_snapshot!(e.to_string());
        // The size is the product of the extents.
        let e = cluster(&NON_PORTABLE, (8, 8), (4, 8), 7).unwrap_err();
        assert!(
            matches!(e, LaunchError::ClusterTooLarge { size: 32, .. }),
            "{e}"
        );
    }

    #[test]
    fn a_grid_that_is_not_a_multiple_of_the_cluster_is_refused() {
        let e = cluster(&PORTABLE, (8, 10), (2, 4), 16).unwrap_err();
        assert_eq!(
            e,
            LaunchError::ClusterDoesNotDivideGrid {
                kernel: "cluster_id".into(),
                axis: "y",
                grid: 10,
                cluster: 4,
            }
        );
        insta::assert_snapshot!(e.to_string());
        let e = cluster(&PORTABLE, 3, 4, 16).unwrap_err();
        assert!(e.to_string().contains("(e.g. 4)"), "{e}");
        // A hand-made error with a zero cluster still prints.
        let odd = LaunchError::ClusterDoesNotDivideGrid {
            kernel: "k".into(),
            axis: "x",
            grid: 3,
            cluster: 0,
        };
        assert!(odd.to_string().contains("cluster.x = 0"));
    }

    #[test]
    fn zero_cluster_extents_are_refused() {
        let e = cluster(&PORTABLE, 8, (2, 0, 1), 16).unwrap_err();
        assert_eq!(
            e,
            LaunchError::ZeroDimension {
                kernel: "cluster_id".into(),
                axis: "cluster.y"
            }
        );
    }

    #[test]
    fn devices_without_clusters_refuse_before_anything_else() {
        let mut a100 = h200();
        a100.name = "NVIDIA A100".into();
        a100.compute_capability = (8, 0);
        a100.cluster_launch = false;
        // The grid is not a multiple either: the device is named first.
        let cfg = LaunchConfig::new(3, 128).with_cluster(2);
        let e = check_cluster("cluster_id", &a100, &PORTABLE, &cfg, 16).unwrap_err();
        assert!(
            matches!(
                e,
                LaunchError::ClusterNotSupported {
                    compute_capability: (8, 0),
                    ..
                }
            ),
            "{e}"
        );
        insta::assert_snapshot!(e.to_string());
    }

    #[test]
    fn a_compile_time_cluster_must_be_matched() {
        let fixed = ClusterLimits {
            required: Some(Dim3::new(2, 1, 1)),
            ..PORTABLE
        };
        assert_eq!(cluster(&fixed, 8, 2, 16), Ok(()));
        let e = cluster(&fixed, 8, 4, 16).unwrap_err();
        assert_eq!(
            e,
            LaunchError::ClusterMismatch {
                kernel: "cluster_id".into(),
                cluster: Dim3::new(4, 1, 1),
                required: Dim3::new(2, 1, 1),
            }
        );
    }

    #[test]
    fn a_cluster_that_never_fits_is_refused() {
        let cfg = LaunchConfig::new(16, 1024)
            .with_shared_mem(200 * 1024)
            .with_cluster(8);
        let e = check_cluster("cluster_id", &h200(), &PORTABLE, &cfg, 0).unwrap_err();
        assert!(
            matches!(
                e,
                LaunchError::ClusterDoesNotFit {
                    threads: 1024,
                    shared_mem_bytes: 204800,
                    ..
                }
            ),
            "{e}"
        );
        insta::assert_snapshot!(e.to_string());
    }

    #[test]
    fn programmatic_launches_need_compute_capability_9() {
        let cfg = LaunchConfig::new(1, 32).with_programmatic_launch();
        assert_eq!(check_programmatic("k", &h200(), &cfg), Ok(()));
        let mut a100 = h200();
        a100.compute_capability = (8, 0);
        let e = check_programmatic("k", &a100, &cfg).unwrap_err();
        assert!(
            matches!(
                e,
                LaunchError::ProgrammaticNotSupported {
                    compute_capability: (8, 0),
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            check_programmatic("k", &a100, &LaunchConfig::new(1, 32)),
            Ok(())
        );
    }
}
