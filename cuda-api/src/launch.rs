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

/// Grid, block and dynamic shared memory of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A configuration with no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
        }
    }
    /// With `bytes` of dynamic shared memory per block.
    pub fn with_shared_mem(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }
    /// A 1-D configuration covering `n` elements with `block` threads per block
    /// (at least one block).
    pub fn for_elements(n: u32, block: u32) -> Self {
        let block = block.max(1);
        LaunchConfig::new(n.div_ceil(block).max(1), block)
    }
}

/// What the device allows, queried once per device.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// What one function allows, queried once per function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionLimits {
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`: registers and the device limit combined.
    pub max_threads_per_block: u32,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`: the dynamic shared memory it may get.
    pub max_dynamic_shared_bytes: u32,
}

/// A launch refused before it reached the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
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
                "cooperative launch of '{kernel}' asks for {blocks} blocks but at most {max_blocks} can be resident on {device} ({per_sm} per SM x {sm_count} SMs at {threads} threads, {shared_mem_bytes} B dynamic shared memory); use at most {max_blocks} blocks or ask cuda_api for the largest cooperative grid (Kernel::max_cooperative_grid)"
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
        }
    }
}

impl std::error::Error for LaunchError {}

/// Checks that no grid or block extent is zero; needs no facts, so it runs
/// before any driver query.
pub fn check_nonzero(kernel: &str, cfg: &LaunchConfig) -> Result<(), LaunchError> {
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
pub fn check_block(
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

/// Checks a launch against the device and function limits, without
/// occupancy; returns the grid's block count. Zero extents come first, then
/// the device's per-axis limits, then the function's own limits.
pub fn check_shape(
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
pub fn check_cooperative(
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
/// [`check_cooperative`].
pub fn check_launch(
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
        }
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
}
