//! From Warp's launch `dim` to launch bounds and a CUDA grid: pure arithmetic,
//! no GPU.
//!
//! This reproduces warp-lang 1.19.0 (`warp/_src/context.py`: `launch`,
//! `_normalize_launch_dim`, `_build_launch_bounds_from_tuple`,
//! `_validate_kernel_tid_extents`, `_lean_grid_max_blocks`; and
//! `wp_cuda_launch_kernel` in `warp/native/warp.cu`):
//!
//! - `dim` has at most 4 non-negative extents; its product is the number of
//!   work items (`size`). An empty `dim` means one work item.
//! - The kernel's own dimensionality `N` (the arity of its `wp.tid()`, the `N`
//!   of its first parameter `wp::launch_bounds_t<N>`) decides the bounds:
//!   missing trailing extents are padded with 1, extents beyond `N` are folded
//!   into `coord_mult` (threads sharing one coordinate tuple) and `size` stays
//!   the product of every extent.
//! - A **grid-stride** kernel (Warp's default) gets a 1-D grid of
//!   `ceil(size / block_dim)` blocks, capped by `max_blocks` when it is
//!   positive and always by CUDA's `gridDim.x` limit of 2^31 - 1; the
//!   kernel's loop covers every work item whatever the grid.
//! - A **lean** kernel (`@wp.kernel(grid_stride=False)`) runs one thread per
//!   work item on a 3-D grid: `x` holds at most `2^24 / block_dim` blocks, the
//!   remaining blocks go to `y` (at most 65535) and then `z` (at most 65535).
//!   It has no loop, so `max_blocks > 0` is refused.
//! - The block is always `(block_dim, 1, 1)`.
//!
//! Deliberate differences from Warp, each safer: Warp checks nothing else for a
//! launch of size 0, this module still checks `block_dim` and `max_blocks`
//! against the kernel (a configuration that fails at size 5 also fails at
//! size 0); Warp lets a positive out-of-range `block_dim` through to the driver
//! and wraps a `max_blocks` outside C `int` silently, this module refuses both;
//! a kept extent above 2^31 is refused for every kernel, where Warp skips that
//! check for kernels that provably never call `wp.tid()` (and then truncates
//! the extent to 32 bits); when `ceil(size / block_dim)` exceeds 2^31 - 1,
//! Warp's C code narrows it to `int` (wrapping, e.g. 2^43 becomes 0 and one
//! block is launched) while this module takes the intended
//! `min(blocks, 2^31 - 1)`. Thread block clusters are not modelled here.

use std::fmt;
use std::num::NonZeroU64;

/// Most extents a launch `dim` may have (`LAUNCH_MAX_DIMS` in Warp).
pub const MAX_DIMS: usize = 4;

/// Largest extent a kernel coordinate may have: `wp.tid()` returns signed
/// 32-bit coordinates, so indices run from 0 to 2^31 - 1.
pub const MAX_TID_EXTENT: u64 = 1 << 31;

/// Largest `block_dim` CUDA accepts for a 1-D block.
pub const MAX_BLOCK_DIM: u32 = 1024;

/// Threads per block Warp uses on CUDA when `block_dim` is not given (or is 0 or negative there).
pub const DEFAULT_BLOCK_DIM: u32 = 256;

/// CUDA's `gridDim.x` limit: the grid-stride cap when `max_blocks` is not set.
pub const MAX_GRID_X: u32 = i32::MAX as u32;

/// CUDA's `gridDim.y` and `gridDim.z` limit.
pub const MAX_GRID_YZ: u32 = 65_535;

/// A lean grid keeps `gridDim.x * blockDim.x` within this many threads, so the
/// kernel's 32-bit index arithmetic cannot overflow.
pub const LEAN_MAX_THREADS_X: u32 = 1 << 24;

/// What the planner needs to know about a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelShape {
    /// The kernel's dimensionality `N` (1 to 4): the `N` of its
    /// `wp::launch_bounds_t<N>` parameter, i.e. the arity of `wp.tid()`
    /// (1 when the kernel never calls it).
    pub ndim: usize,
    /// `true` for a grid-stride kernel (Warp's default), `false` for a lean
    /// one (`@wp.kernel(grid_stride=False)`).
    pub grid_stride: bool,
}

impl KernelShape {
    /// A grid-stride kernel of dimensionality `ndim`.
    #[cfg(test)]
    pub fn grid_stride(ndim: usize) -> Self {
        KernelShape {
            ndim,
            grid_stride: true,
        }
    }

    /// A lean (`grid_stride=False`) kernel of dimensionality `ndim`.
    #[cfg(test)]
    pub fn lean(ndim: usize) -> Self {
        KernelShape {
            ndim,
            grid_stride: false,
        }
    }
}

/// Warp's `launch_bounds_t<N>`, the first parameter of every kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// `N`: the kernel's dimensionality (1 to 4), not the length of `dim`.
    pub ndim: usize,
    /// The kept extents, padded with 1 up to `ndim`; entries at `ndim..`
    /// are 0 and are not part of the C struct.
    pub shape: [u32; 4],
    /// Work items: the product of every extent of `dim`, folded ones included.
    pub size: usize,
    /// Product of the extents beyond `ndim` (1 when there are none): that
    /// many consecutive work items share one coordinate tuple.
    pub coord_mult: usize,
}

impl Bounds {
    /// Builds the bounds of `dim` for a kernel of dimensionality `ndim`.
    ///
    /// # Errors
    ///
    /// [`DimError::KernelNdim`], [`DimError::TooManyDims`],
    /// [`DimError::NegativeExtent`], [`DimError::ExtentTooLarge`] (a kept
    /// extent above 2^31), [`DimError::SizeOverflow`].
    pub fn from_dim(dim: &[i64], ndim: usize) -> Result<Self, DimError> {
        if !(1..=MAX_DIMS).contains(&ndim) {
            return Err(DimError::KernelNdim { ndim });
        }
        if dim.len() > MAX_DIMS {
            return Err(DimError::TooManyDims { given: dim.len() });
        }
        let mut extents = [0u64; MAX_DIMS];
        for (axis, &extent) in dim.iter().enumerate() {
            match u64::try_from(extent) {
                Ok(e) => extents[axis] = e,
                Err(_) => return Err(DimError::NegativeExtent { axis, extent }),
            }
        }
        let extents = &extents[..dim.len()];
        let mut size: usize = 1;
        for &e in extents {
            size = usize::try_from(e)
                .ok()
                .and_then(|e| size.checked_mul(e))
                .ok_or_else(|| DimError::SizeOverflow { dim: dim.to_vec() })?;
        }
        let mut shape = [0u32; 4];
        for (axis, slot) in shape.iter_mut().enumerate().take(ndim) {
            // Missing trailing extents are padded with 1.
            let e = extents.get(axis).copied().unwrap_or(1);
            // A size-0 launch never reaches wp.tid(), so only a non-empty
            // launch is held to the coordinate limit (as Warp does).
            if size > 0 && e > MAX_TID_EXTENT {
                return Err(DimError::ExtentTooLarge {
                    axis,
                    extent: e,
                    limit: MAX_TID_EXTENT,
                });
            }
            // e <= 2^31 here unless size == 0, when the struct is never read;
            // saturate rather than wrap.
            *slot = u32::try_from(e).unwrap_or(u32::MAX);
        }
        let coord_mult = if extents.len() > ndim {
            // The product of a subset of factors of `size`: cannot overflow
            // unless size is 0, which a zero factor explains.
            extents[ndim..]
                .iter()
                .try_fold(1usize, |acc, &e| {
                    usize::try_from(e).ok().and_then(|e| acc.checked_mul(e))
                })
                .ok_or_else(|| DimError::SizeOverflow { dim: dim.to_vec() })?
        } else {
            1
        };
        Ok(Bounds {
            ndim,
            shape,
            size,
            coord_mult,
        })
    }

    /// Byte size of `launch_bounds_t<ndim>` (the generated ABI type):
    /// 24 for N = 1 or 2, 32 for N = 3 or 4.
    pub fn byte_len(&self) -> usize {
        bounds_layout(self.ndim).0
    }
}

/// Byte size and alignment of `launch_bounds_t<ndim>`, from the generated
/// ABI types (`ndim` above 4 is read as 4).
pub fn bounds_layout(ndim: usize) -> (usize, usize) {
    use crate::abi::{LaunchBounds1, LaunchBounds2, LaunchBounds3, LaunchBounds4};
    match ndim {
        1 => (size_of::<LaunchBounds1>(), align_of::<LaunchBounds1>()),
        2 => (size_of::<LaunchBounds2>(), align_of::<LaunchBounds2>()),
        3 => (size_of::<LaunchBounds3>(), align_of::<LaunchBounds3>()),
        _ => (size_of::<LaunchBounds4>(), align_of::<LaunchBounds4>()),
    }
}

/// Everything a CUDA launch of one Warp kernel needs besides its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The first kernel parameter.
    pub bounds: Bounds,
    /// Grid in blocks (`x`, `y`, `z`); `[0, 0, 0]` when `size` is 0.
    pub grid: [u32; 3],
    /// Block in threads: always `[block_dim, 1, 1]`.
    pub block: [u32; 3],
    /// Work items (same as `bounds.size`); 0 means launch nothing, as Warp
    /// does, and the caller must not call the driver.
    pub size: usize,
}

impl Plan {
    /// Whether there is nothing to launch.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Total blocks in the grid.
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&g| u64::from(g)).product()
    }
}

/// Why a `dim` / `block_dim` / `max_blocks` combination cannot be launched.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DimError {
    /// `dim` has more than 4 extents (`MAX_DIMS`).
    TooManyDims {
        /// How many extents were given.
        given: usize,
    },
    /// An extent of `dim` is negative.
    NegativeExtent {
        /// Which extent (0-based).
        axis: usize,
        /// Its value.
        extent: i64,
    },
    /// A kept extent (one the kernel's `wp.tid()` sees) is above 2^31.
    ExtentTooLarge {
        /// Which extent (0-based).
        axis: usize,
        /// Its value.
        extent: u64,
        /// The limit, 2^31 (`MAX_TID_EXTENT`).
        limit: u64,
    },
    /// The product of the extents does not fit in `usize`.
    SizeOverflow {
        /// The `dim` given.
        dim: Vec<i64>,
    },
    /// The kernel's dimensionality is not 1 to 4.
    KernelNdim {
        /// The value given.
        ndim: usize,
    },
    /// `block_dim` is 0.
    BlockDimZero,
    /// `block_dim` is above 1024 (`MAX_BLOCK_DIM`).
    BlockDimTooLarge {
        /// The value given.
        block_dim: u32,
        /// The limit.
        limit: u32,
    },
    /// `max_blocks > 0` for a lean kernel.
    LeanMaxBlocks {
        /// The value given.
        max_blocks: u64,
    },
    /// `max_blocks` is above 2^31 - 1 (`MAX_GRID_X`) (it does not fit Warp's C `int`).
    MaxBlocksTooLarge {
        /// The value given, as given.
        max_blocks: u64,
    },
    /// A tiled launch (`Kernel::launch_tiled`, Warp's `wp.launch_tiled`)
    /// over a domain of 4 extents: the block dimension would be a fifth.
    TiledTooManyDims {
        /// How many extents were given.
        given: usize,
    },
    /// A lean kernel's work does not fit its 3-D grid.
    LeanGridTooLarge {
        /// Work items.
        size: usize,
        /// Threads per block.
        block_dim: u32,
        /// Most work items a lean grid holds at this `block_dim`.
        capacity: u64,
    },
}

impl fmt::Display for DimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimError::TooManyDims { given } => write!(
                f,
                "launch dim has {given} extents but at most {MAX_DIMS} are allowed; \
                 merge extents (launch over their product) or fold the extra ones into the kernel"
            ),
            DimError::NegativeExtent { axis, extent } => write!(
                f,
                "launch dim extent {axis} is {extent}, but extents must be 0 or more; \
                 pass the number of work items along that axis"
            ),
            DimError::ExtentTooLarge {
                axis,
                extent,
                limit,
            } => write!(
                f,
                "launch dim extent {axis} is {extent}, above the limit of {limit}: wp.tid() returns \
                 signed 32-bit coordinates; split the launch, or move the excess into an extent \
                 beyond the kernel's own dimensions (those are folded into coord_mult)"
            ),
            DimError::SizeOverflow { dim } => write!(
                f,
                "launch dim {dim:?} has {} work items, more than usize can count \
                 (at most {}); launch in pieces",
                dim.iter()
                    .map(|&e| i128::from(e))
                    .try_fold(1i128, |a, e| a.checked_mul(e))
                    .map_or_else(|| "too many".to_owned(), |n| n.to_string()),
                usize::MAX
            ),
            DimError::KernelNdim { ndim } => write!(
                f,
                "kernel dimensionality is {ndim}, but Warp kernels have 1 to {MAX_DIMS} \
                 (the N of launch_bounds_t<N>); check the kernel's declaration"
            ),
            DimError::BlockDimZero => write!(
                f,
                "block_dim is 0, but a block needs 1 to {MAX_BLOCK_DIM} threads; \
                 Warp's default on CUDA is {DEFAULT_BLOCK_DIM}"
            ),
            DimError::BlockDimTooLarge { block_dim, limit } => write!(
                f,
                "block_dim is {block_dim}, above CUDA's limit of {limit} threads per block; \
                 use {limit} or fewer (Warp's default is {DEFAULT_BLOCK_DIM})"
            ),
            DimError::LeanMaxBlocks { max_blocks } => write!(
                f,
                "max_blocks is {max_blocks}, but the kernel is lean (grid_stride=False): it maps \
                 one thread to each index and has no loop, so a block cap would leave work \
                 undone; pass max_blocks <= 0, or build the kernel with grid_stride=True"
            ),
            DimError::MaxBlocksTooLarge { max_blocks } => write!(
                f,
                "max_blocks is {max_blocks}, above the limit of {MAX_GRID_X} (Warp passes it as \
                 a C int; CUDA's gridDim.x limit); pass 0 for no cap"
            ),
            DimError::TiledTooManyDims { given } => write!(
                f,
                "launch_tiled appends the block dimension to the domain, but the domain already has \
                 {given} extents and a launch takes at most {MAX_DIMS}; launch_tiled over at most \
                 {} extents (merge some: launch over their product)",
                MAX_DIMS - 1
            ),
            DimError::LeanGridTooLarge {
                size,
                block_dim,
                capacity,
            } => write!(
                f,
                "{size} work items at block_dim {block_dim} exceed the lean 3-D grid capacity of \
                 {capacity} work items; build the kernel with grid_stride=True"
            ),
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for DimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for DimError {}

/// The domain of a tiled launch (Warp's `wp.launch_tiled`): `dim` with
/// `block_dim` appended, so that the threads of one block share every
/// other coordinate. Returned inline (extents, count): no allocation.
///
/// # Errors
///
/// [`DimError::TiledTooManyDims`] when `dim` has 4 extents or more (Warp:
/// "wp.launch_tiled() requires a grid with fewer than 4 dimensions").
pub fn tiled_dim(dim: &[i64], block_dim: u32) -> Result<([i64; MAX_DIMS], usize), DimError> {
    if dim.len() >= MAX_DIMS {
        return Err(DimError::TiledTooManyDims { given: dim.len() });
    }
    let mut out = [0i64; MAX_DIMS];
    out[..dim.len()].copy_from_slice(dim);
    out[dim.len()] = i64::from(block_dim);
    Ok((out, dim.len() + 1))
}

/// Plans a launch with Warp's integer `max_blocks`: 0 or negative means no
/// cap; a positive value caps the grid of a grid-stride kernel and is refused
/// for a lean kernel.
///
/// # Errors
///
/// Every [`DimError`]: see [`plan_with`].
#[cfg(test)]
pub fn plan(
    dim: &[i64],
    kernel: KernelShape,
    block_dim: u32,
    max_blocks: i64,
) -> Result<Plan, DimError> {
    let cap = u64::try_from(max_blocks).ok().and_then(NonZeroU64::new);
    plan_with(dim, kernel, block_dim, cap)
}

/// Plans a launch: the bounds, grid and block Warp 1.19.0 would use, with
/// at most `max_blocks` blocks (`None`: no cap but CUDA's).
///
/// # Errors
///
/// [`DimError::BlockDimZero`], [`DimError::BlockDimTooLarge`],
/// [`DimError::LeanMaxBlocks`] (a cap on a lean kernel),
/// [`DimError::MaxBlocksTooLarge`] (a cap above [`MAX_GRID_X`]), the errors
/// of [`Bounds::from_dim`], and [`DimError::LeanGridTooLarge`].
pub fn plan_with(
    dim: &[i64],
    kernel: KernelShape,
    block_dim: u32,
    max_blocks: Option<NonZeroU64>,
) -> Result<Plan, DimError> {
    if block_dim == 0 {
        return Err(DimError::BlockDimZero);
    }
    if block_dim > MAX_BLOCK_DIM {
        return Err(DimError::BlockDimTooLarge {
            block_dim,
            limit: MAX_BLOCK_DIM,
        });
    }
    let cap = match max_blocks {
        None => MAX_GRID_X,
        // Checked before the range so a lean kernel always names the real reason.
        Some(n) if !kernel.grid_stride => {
            return Err(DimError::LeanMaxBlocks {
                max_blocks: n.get(),
            });
        }
        Some(n) => match u32::try_from(n.get()) {
            Ok(n) if n <= MAX_GRID_X => n,
            _ => {
                return Err(DimError::MaxBlocksTooLarge {
                    max_blocks: n.get(),
                });
            }
        },
    };
    let bounds = Bounds::from_dim(dim, kernel.ndim)?;
    let size = bounds.size;
    let block = [block_dim, 1, 1];
    if size == 0 {
        return Ok(Plan {
            bounds,
            grid: [0, 0, 0],
            block,
            size,
        });
    }
    let bd = u64::from(block_dim);
    // usize is at most 64 bits on every target Rust supports for CUDA.
    let total_blocks = (size as u64).div_ceil(bd);
    let grid = if kernel.grid_stride {
        // total_blocks >= 1 because size >= 1.
        let x = total_blocks.min(u64::from(cap));
        [u32::try_from(x).unwrap_or(cap), 1, 1]
    } else {
        let max_x = u64::from(LEAN_MAX_THREADS_X / block_dim);
        let max_yz = u64::from(MAX_GRID_YZ);
        let capacity_blocks = max_x * max_yz * max_yz;
        if total_blocks > capacity_blocks {
            return Err(DimError::LeanGridTooLarge {
                size,
                block_dim,
                capacity: capacity_blocks * bd,
            });
        }
        let gx = total_blocks.min(max_x).max(1);
        let remaining = total_blocks.div_ceil(gx);
        let gy = remaining.min(max_yz).max(1);
        let gz = remaining.div_ceil(gy).max(1);
        // All three fit in u32: gx <= 2^24, gy and gz <= 65535 (capacity checked).
        [
            u32::try_from(gx).unwrap_or(u32::MAX),
            u32::try_from(gy).unwrap_or(MAX_GRID_YZ),
            u32::try_from(gz).unwrap_or(MAX_GRID_YZ),
        ]
    };
    Ok(Plan {
        bounds,
        grid,
        block,
        size,
    })
}

/// How many blocks a grid-stride launch may use (Warp's `max_blocks`),
/// given to [`LaunchBuilder::max_blocks`](crate::LaunchBuilder::max_blocks) as a `MaxBlocks` or as Warp's
/// integer (0 or less is unlimited, a positive value a cap).
///
/// A cap is kept exactly as given, whatever its size: a launch refuses a
/// cap above CUDA's `gridDim.x` limit (2^31 - 1, which Warp passes as a C
/// `int`) with [`crate::launch::domain::DimError::MaxBlocksTooLarge`] naming the
/// value given, and a cap on a lean kernel with
/// [`crate::launch::domain::DimError::LeanMaxBlocks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum MaxBlocks {
    /// As many as the domain needs (Warp's `max_blocks=0`), up to CUDA's
    /// `gridDim.x` limit.
    #[default]
    Unlimited,
    /// At most this many (Warp's `max_blocks=N`); grid-stride loops cover
    /// the rest.
    Cap(NonZeroU64),
    /// The resident grid: blocks per SM at this block size times SMs, from
    /// the occupancy query (cached per kernel and context). Only for
    /// grid-stride kernels.
    Resident,
}

impl MaxBlocks {
    /// Warp's integer: 0 or less is [`MaxBlocks::Unlimited`], a positive
    /// value is a cap of exactly that many blocks.
    pub fn from_warp(n: i64) -> MaxBlocks {
        match u64::try_from(n).ok().and_then(NonZeroU64::new) {
            Some(n) => MaxBlocks::Cap(n),
            None => MaxBlocks::Unlimited,
        }
    }

    /// The cap a planner uses: `None` for no cap; the resident grid must
    /// have been worked out by then (`resident`).
    pub(super) fn cap<E>(
        self,
        resident: impl FnOnce() -> Result<NonZeroU64, E>,
    ) -> Result<Option<NonZeroU64>, E> {
        Ok(match self {
            MaxBlocks::Unlimited => None,
            MaxBlocks::Cap(n) => Some(n),
            MaxBlocks::Resident => Some(resident()?),
        })
    }
}

impl From<i64> for MaxBlocks {
    /// Warp's integer, as [`MaxBlocks::from_warp`].
    fn from(n: i64) -> MaxBlocks {
        MaxBlocks::from_warp(n)
    }
}

impl From<i32> for MaxBlocks {
    /// Warp's integer, as [`MaxBlocks::from_warp`].
    fn from(n: i32) -> MaxBlocks {
        MaxBlocks::from_warp(i64::from(n))
    }
}

impl From<u64> for MaxBlocks {
    /// 0 is unlimited, any other value a cap of exactly that many blocks.
    fn from(n: u64) -> MaxBlocks {
        NonZeroU64::new(n).map_or(MaxBlocks::Unlimited, MaxBlocks::Cap)
    }
}

impl From<u32> for MaxBlocks {
    /// 0 is unlimited, any other value a cap of exactly that many blocks.
    fn from(n: u32) -> MaxBlocks {
        MaxBlocks::from(u64::from(n))
    }
}

/// A launch domain: an integer or a list of extents (checked when the
/// launch is built: at most 4, none negative). Up to 4 extents are held
/// without allocating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dim {
    inline: [i64; 4],
    len: usize,
    more: Vec<i64>,
}

impl Dim {
    /// The extents.
    pub fn as_slice(&self) -> &[i64] {
        if self.len <= 4 {
            &self.inline[..self.len]
        } else {
            &self.more
        }
    }
}

impl From<&[i64]> for Dim {
    fn from(e: &[i64]) -> Dim {
        let mut inline = [0i64; 4];
        let more = if e.len() <= 4 {
            inline[..e.len()].copy_from_slice(e);
            Vec::new()
        } else {
            e.to_vec()
        };
        Dim {
            inline,
            len: e.len(),
            more,
        }
    }
}

macro_rules! dim_from_int {
    ($($t:ty),*) => { $(
        impl From<$t> for Dim {
            fn from(n: $t) -> Dim { Dim::from(&[n as i64][..]) }
        }
        impl<const N: usize> From<[$t; N]> for Dim {
            fn from(a: [$t; N]) -> Dim { a.as_slice().into() }
        }
        impl From<&[$t]> for Dim {
            fn from(a: &[$t]) -> Dim {
                if a.len() <= 4 {
                    let mut e = [0i64; 4];
                    for (d, &x) in e.iter_mut().zip(a) {
                        *d = x as i64;
                    }
                    Dim::from(&e[..a.len()])
                } else {
                    Dim::from(&a.iter().map(|&x| x as i64).collect::<Vec<_>>()[..])
                }
            }
        }
        impl From<Vec<$t>> for Dim {
            fn from(a: Vec<$t>) -> Dim { a.as_slice().into() }
        }
    )* };
}
dim_from_int!(i32, u32, usize);

impl From<i64> for Dim {
    fn from(n: i64) -> Dim {
        Dim::from(&[n][..])
    }
}
impl<const N: usize> From<[i64; N]> for Dim {
    fn from(a: [i64; N]) -> Dim {
        Dim::from(&a[..])
    }
}
impl From<Vec<i64>> for Dim {
    fn from(a: Vec<i64>) -> Dim {
        Dim::from(&a[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GS1: KernelShape = KernelShape {
        ndim: 1,
        grid_stride: true,
    };

    fn ok(dim: &[i64], k: KernelShape, bd: u32, mb: i64) -> Plan {
        match plan(dim, k, bd, mb) {
            Ok(p) => p,
            Err(e) => panic!("plan({dim:?}, {k:?}, {bd}, {mb}) failed: {e}"),
        }
    }

    /// (dim, kernel ndim, grid_stride, block_dim, max_blocks,
    ///  shape, size, coord_mult, grid)
    type Row = (
        &'static [i64],
        usize,
        bool,
        u32,
        i64,
        [u32; 4],
        usize,
        usize,
        [u32; 3],
    );

    const P31: i64 = 1 << 31;

    #[rustfmt::skip]
    const ROWS: &[Row] = &[
        // saxpy: 37 items, N=1: shape [37], size 37; ceil(37/256) = 1 block.
        (&[37], 1, true, 256, 0, [37, 0, 0, 0], 37, 1, [1, 1, 1]),
        // dim 0: size 0, Warp launches nothing (wp_cuda_launch_kernel skips dim == 0).
        (&[0], 1, true, 256, 0, [0, 0, 0, 0], 0, 1, [0, 0, 0]),
        // A zero anywhere makes size 0, even among folded extents.
        (&[5, 0], 1, true, 256, 0, [5, 0, 0, 0], 0, 0, [0, 0, 0]),
        // Empty dim: Warp's product over no extents is 1; padded to (1,).
        (&[], 1, true, 256, 0, [1, 0, 0, 0], 1, 1, [1, 1, 1]),
        // 2-D (4,5) on an N=2 kernel: size 20, one block.
        (&[4, 5], 2, true, 256, 0, [4, 5, 0, 0], 20, 1, [1, 1, 1]),
        // 4-D (2,3,4,5) on N=4: size 120, one block.
        (&[2, 3, 4, 5], 4, true, 256, 0, [2, 3, 4, 5], 120, 1, [1, 1, 1]),
        // (3,4) on an N=4 kernel: padded with 1s to (3,4,1,1); size 12.
        (&[3, 4], 4, true, 256, 0, [3, 4, 1, 1], 12, 1, [1, 1, 1]),
        // (10,3) on N=1: kept (10,), extras (3,) -> coord_mult 3, size 10*3 = 30.
        (&[10, 3], 1, true, 256, 0, [10, 0, 0, 0], 30, 3, [1, 1, 1]),
        // (2,3,4,5) on N=2: kept (2,3), coord_mult 4*5 = 20, size 6*20 = 120.
        (&[2, 3, 4, 5], 2, true, 256, 0, [2, 3, 0, 0], 120, 20, [1, 1, 1]),
        // 100000 at block 128: ceil(100000/128) = 782 (781*128 = 99968 < 100000).
        (&[100_000], 1, true, 128, 0, [100_000, 0, 0, 0], 100_000, 1, [782, 1, 1]),
        // max_blocks 7 < 782: cap = 7.
        (&[100_000], 1, true, 128, 7, [100_000, 0, 0, 0], 100_000, 1, [7, 1, 1]),
        // max_blocks 1: a single block loops over everything.
        (&[100_000], 1, true, 128, 1, [100_000, 0, 0, 0], 100_000, 1, [1, 1, 1]),
        // max_blocks -1 <= 0: no cap -> 782.
        (&[100_000], 1, true, 128, -1, [100_000, 0, 0, 0], 100_000, 1, [782, 1, 1]),
        // max_blocks 1000 > 782 needed: min(782, 1000) = 782.
        (&[100_000], 1, true, 128, 1000, [100_000, 0, 0, 0], 100_000, 1, [782, 1, 1]),
        // block_dim 1: one block per item.
        (&[5], 1, true, 1, 0, [5, 0, 0, 0], 5, 1, [5, 1, 1]),
        // block_dim 1024 (the limit): ceil(2049/1024) = 3.
        (&[2049], 1, true, 1024, 0, [2049, 0, 0, 0], 2049, 1, [3, 1, 1]),
        // Kept extent exactly 2^31 is allowed (coordinates 0..2^31-1); folded 2^20:
        // size 2^51; blocks 2^51/2^8 = 2^43 > 2^31-1, so x is capped at 2^31-1. (Warp 1.19.0's
        // C code stores 2^43 in an `int`, which wraps to 0 and launches 1 block; the loop still
        // covers the work. We take the intended min(blocks, 2^31-1).)
        (&[P31, 1 << 20], 1, true, 256, 0, [1 << 31, 0, 0, 0], 1 << 51, 1 << 20, [i32::MAX as u32, 1, 1]),
        // Folded extents are not held to 2^31: (4, 2^31+1) on N=1 -> coord_mult 2^31+1.
        (&[4, P31 + 1], 1, true, 256, 0, [4, 0, 0, 0], 4 * ((1 << 31) + 1), (1 << 31) + 1, [33_554_433, 1, 1]),
        // Lean (7,9) on N=2: 63 items, 1 block; gx = min(1, 2^24/256) = 1, remaining 1 -> (1,1,1).
        (&[7, 9], 2, false, 256, 0, [7, 9, 0, 0], 63, 1, [1, 1, 1]),
        // Lean max_blocks <= 0 is fine: -3 means "no cap".
        (&[7, 9], 2, false, 256, -3, [7, 9, 0, 0], 63, 1, [1, 1, 1]),
        // Lean 1000 items at 256: ceil = 4 blocks, all in x.
        (&[1000], 1, false, 256, 0, [1000, 0, 0, 0], 1000, 1, [4, 1, 1]),
        // Lean 2^24+1 items at 256: blocks ceil((2^24+1)/256) = 65537; max x = 2^24/256 = 65536;
        // gx = 65536, remaining ceil(65537/65536) = 2, gy 2, gz ceil(2/2) = 1.
        (&[(1 << 24) + 1], 1, false, 256, 0, [(1 << 24) + 1, 0, 0, 0], (1 << 24) + 1, 1, [65_536, 2, 1]),
        // Lean 2^51 items at 1024: blocks 2^41; max x = 2^24/2^10 = 16384 -> gx 16384;
        // remaining 2^41/2^14 = 2^27 = 134217728 > 65535 -> gy 65535;
        // gz = ceil(134217728/65535) = 2049 (65535*2048 = 134215680, 2048 short).
        (&[P31, 1 << 20], 1, false, 1024, 0, [1 << 31, 0, 0, 0], 1 << 51, 1 << 20, [16_384, 65_535, 2049]),
        // Lean at exactly the capacity: (65535, 65535, 2^24) on N=3 at 1024:
        // blocks 65535^2 * 2^24 / 2^10 = 2^14 * 65535^2; gx 2^14, remaining 65535^2,
        // gy 65535, gz 65535 (Warp's check is `blocks > capacity`, so equal passes).
        (&[65_535, 65_535, 1 << 24], 3, false, 1024, 0, [65_535, 65_535, 1 << 24, 0], 65_535 * 65_535 * (1 << 24), 1, [16_384, 65_535, 65_535]),
    ];

    #[test]
    fn table() {
        for &(dim, ndim, gs, bd, mb, shape, size, coord_mult, grid) in ROWS {
            let k = KernelShape {
                ndim,
                grid_stride: gs,
            };
            let p = ok(dim, k, bd, mb);
            let row =
                format!("dim {dim:?} ndim {ndim} grid_stride {gs} block {bd} max_blocks {mb}");
            assert_eq!(p.bounds.ndim, ndim, "{row}");
            assert_eq!(p.bounds.shape, shape, "{row}");
            assert_eq!(p.bounds.size, size, "{row}");
            assert_eq!(p.bounds.coord_mult, coord_mult, "{row}");
            assert_eq!(p.size, size, "{row}");
            assert_eq!(p.grid, grid, "{row}");
            assert_eq!(p.block, [bd, 1, 1], "{row}");
            assert_eq!(p.is_empty(), size == 0, "{row}");
            // Every plan covers its work: grid-stride by looping, lean by threads.
            if size > 0 && !gs {
                assert!(p.blocks() * u64::from(bd) >= size as u64, "{row}");
            }
        }
    }

    #[test]
    fn errors() {
        use DimError as E;
        let lean2 = KernelShape::lean(2);
        // Five extents: Warp allows at most 4 (LAUNCH_MAX_DIMS).
        assert_eq!(
            plan(&[1, 1, 1, 1, 1], GS1, 256, 0),
            Err(E::TooManyDims { given: 5 })
        );
        // Negative extent, named by axis; checked even when another extent is 0.
        assert_eq!(
            plan(&[0, -1], GS1, 256, 0),
            Err(E::NegativeExtent {
                axis: 1,
                extent: -1
            })
        );
        // Kept extent 2^31+1 > 2^31 (wp.tid() coordinate limit).
        assert_eq!(
            plan(&[P31 + 1], GS1, 256, 0),
            Err(E::ExtentTooLarge {
                axis: 0,
                extent: (1 << 31) + 1,
                limit: 1 << 31
            })
        );
        // ...also when it is a padded-to kernel axis other than 0.
        assert_eq!(
            plan(&[2, P31 + 1], KernelShape::grid_stride(2), 256, 0),
            Err(E::ExtentTooLarge {
                axis: 1,
                extent: (1 << 31) + 1,
                limit: 1 << 31
            })
        );
        // 2^31 * 2^31 * 2^31 = 2^93 work items do not fit usize.
        assert_eq!(
            plan(&[P31, P31, P31], GS1, 256, 0),
            Err(E::SizeOverflow {
                dim: vec![P31, P31, P31]
            })
        );
        // Kernel ndim outside 1..=4.
        assert_eq!(
            plan(&[1], KernelShape::grid_stride(0), 256, 0),
            Err(E::KernelNdim { ndim: 0 })
        );
        assert_eq!(
            plan(&[1], KernelShape::grid_stride(5), 256, 0),
            Err(E::KernelNdim { ndim: 5 })
        );
        // block_dim 0 and 1025.
        assert_eq!(plan(&[1], GS1, 0, 0), Err(E::BlockDimZero));
        assert_eq!(
            plan(&[1], GS1, 1025, 0),
            Err(E::BlockDimTooLarge {
                block_dim: 1025,
                limit: 1024
            })
        );
        // Lean kernel with max_blocks 5 > 0: refused (Warp: RuntimeError at launch).
        assert_eq!(
            plan(&[7, 9], lean2, 256, 5),
            Err(E::LeanMaxBlocks { max_blocks: 5 })
        );
        // ...even at size 0 (a deliberate difference: Warp checks nothing at size 0).
        assert_eq!(
            plan(&[0], lean2, 256, 5),
            Err(E::LeanMaxBlocks { max_blocks: 5 })
        );
        // ...and with the enum entry point.
        assert_eq!(
            plan_with(&[7, 9], lean2, 256, NonZeroU64::new(3)),
            Err(E::LeanMaxBlocks { max_blocks: 3 })
        );
        // max_blocks 2^31 does not fit a C int.
        assert_eq!(
            plan(&[1], GS1, 256, P31),
            Err(E::MaxBlocksTooLarge {
                max_blocks: P31 as u64
            })
        );
        // Lean 2^56 items at 1024: blocks 2^46 = 70368744177664 > capacity blocks
        // 2^14 * 65535^2 = 70366596710400; capacity in items = that * 1024.
        assert_eq!(
            plan(&[P31, 1 << 25], KernelShape::lean(1), 1024, 0),
            Err(E::LeanGridTooLarge {
                size: 1 << 56,
                block_dim: 1024,
                capacity: 70_366_596_710_400 * 1024
            })
        );
        // The same work is fine for a grid-stride kernel (capped at 2^31-1 blocks).
        assert_eq!(
            ok(&[P31, 1 << 25], GS1, 1024, 0).grid,
            [i32::MAX as u32, 1, 1]
        );
    }

    #[test]
    fn error_messages_name_value_limit_and_remedy() {
        let cases: &[(DimError, &[&str])] = &[
            (DimError::TooManyDims { given: 5 }, &["5", "at most 4"]),
            (
                DimError::NegativeExtent {
                    axis: 1,
                    extent: -3,
                },
                &["extent 1", "-3", "0 or more"],
            ),
            (
                DimError::ExtentTooLarge {
                    axis: 0,
                    extent: 3_000_000_000,
                    limit: 1 << 31,
                },
                &["3000000000", "2147483648", "wp.tid()", "split"],
            ),
            (
                DimError::SizeOverflow {
                    dim: vec![P31, P31, P31],
                },
                &["9903520314283042199192993792", "usize", "pieces"],
            ),
            (DimError::KernelNdim { ndim: 7 }, &["7", "1 to 4"]),
            (DimError::BlockDimZero, &["block_dim is 0", "1024", "256"]),
            (
                DimError::BlockDimTooLarge {
                    block_dim: 2048,
                    limit: 1024,
                },
                &["2048", "1024"],
            ),
            (
                DimError::LeanMaxBlocks { max_blocks: 5 },
                &[
                    "max_blocks is 5",
                    "lean",
                    "one thread to each index",
                    "no loop",
                    "grid_stride=True",
                ],
            ),
            (
                DimError::MaxBlocksTooLarge {
                    max_blocks: P31 as u64,
                },
                &["2147483648", "2147483647", "pass 0"],
            ),
            (
                DimError::LeanGridTooLarge {
                    size: 10,
                    block_dim: 256,
                    capacity: 9,
                },
                &["10", "256", "capacity of 9", "grid_stride=True"],
            ),
        ];
        for (e, needles) in cases {
            let s = e.to_string();
            for n in *needles {
                assert!(s.contains(n), "{s:?} lacks {n:?}");
            }
        }
    }

    /// A cap is reported as given, never narrowed: 2^40 and u64::MAX are
    /// refused naming those values; 2^31 - 1 is the largest accepted.
    #[test]
    fn caps_are_checked_as_given() {
        let cap = |n: u64| NonZeroU64::new(n);
        for big in [1u64 << 32, 1 << 40, u64::MAX] {
            let e = plan_with(&[1], GS1, 256, cap(big)).unwrap_err();
            assert_eq!(e, DimError::MaxBlocksTooLarge { max_blocks: big });
            assert!(e.to_string().contains(&big.to_string()), "{e}");
            // Refused at size 0 too.
            assert_eq!(plan_with(&[0], GS1, 256, cap(big)).unwrap_err(), e);
        }
        let p = plan_with(&[1 << 31, 4], GS1, 1, cap(MAX_GRID_X as u64)).unwrap();
        assert_eq!(p.grid, [MAX_GRID_X, 1, 1]);
        assert_eq!(plan_with(&[100], GS1, 1, cap(7)).unwrap().grid, [7, 1, 1]);
        assert_eq!(plan_with(&[100], GS1, 1, None).unwrap().grid, [100, 1, 1]);
        // Warp's integer: negative and zero are no cap.
        assert_eq!(ok(&[100], GS1, 1, -7).grid, [100, 1, 1]);
        assert_eq!(ok(&[100], GS1, 1, 0).grid, [100, 1, 1]);
    }

    #[test]
    fn bounds_bytes_match_the_c_layout() {
        let encode =
            |b: &Bounds| crate::abi::encode::launch_bounds(b.ndim, &b.shape, b.size, b.coord_mult);
        // launch_bounds_t<1>: shape[0] @0, 4 bytes padding, size @8, coord_mult @16: 24 bytes.
        let b = Bounds::from_dim(&[10, 3], 1).unwrap();
        assert_eq!(b.byte_len(), 24);
        let bytes = encode(&b);
        assert_eq!(bytes[0..4], 10u32.to_le_bytes());
        assert_eq!(bytes[4..8], [0; 4]);
        assert_eq!(bytes[8..16], 30u64.to_le_bytes());
        assert_eq!(bytes[16..24], 3u64.to_le_bytes());
        assert_eq!(bytes[24..], [0; 8]);
        // launch_bounds_t<2>: shape 8 bytes, size @8, coord_mult @16: 24 bytes.
        assert_eq!(Bounds::from_dim(&[4, 5], 2).unwrap().byte_len(), 24);
        // launch_bounds_t<3>: shape 12 bytes + 4 padding, size @16, coord_mult @24: 32 bytes.
        let b = Bounds::from_dim(&[2, 3], 3).unwrap();
        assert_eq!(b.byte_len(), 32);
        let bytes = encode(&b);
        assert_eq!(bytes[8..12], 1u32.to_le_bytes());
        assert_eq!(bytes[12..16], [0; 4]);
        assert_eq!(bytes[16..24], 6u64.to_le_bytes());
        assert_eq!(bytes[24..32], 1u64.to_le_bytes());
        // launch_bounds_t<4>: shape 16 bytes, size @16, coord_mult @24: 32 bytes.
        let b = Bounds::from_dim(&[2, 3, 4, 5], 4).unwrap();
        assert_eq!(b.byte_len(), 32);
        assert_eq!(encode(&b)[12..16], 5u32.to_le_bytes());
        assert_eq!(encode(&b)[16..24], 120u64.to_le_bytes());
    }

    #[test]
    fn tiled_domains_take_the_block_dimension_last() {
        assert_eq!(tiled_dim(&[], 64).unwrap(), ([64, 0, 0, 0], 1));
        assert_eq!(tiled_dim(&[5, 4], 64).unwrap(), ([5, 4, 64, 0], 3));
        assert_eq!(tiled_dim(&[2, 3, 7], 128).unwrap(), ([2, 3, 7, 128], 4));
        assert_eq!(
            tiled_dim(&[1, 2, 3, 4], 64),
            Err(DimError::TiledTooManyDims { given: 4 })
        );
        // A 2-D kernel over the tiled [5, 4, 64]: the block dimension is folded, 64 threads per tile.
        let (d, n) = tiled_dim(&[5, 4], 64).unwrap();
        let p = plan(&d[..n], GS1_2D, 64, 0).unwrap();
        assert_eq!(
            (p.bounds.shape, p.bounds.coord_mult, p.size, p.grid),
            ([5, 4, 0, 0], 64, 1280, [20, 1, 1])
        );
    }

    const GS1_2D: KernelShape = KernelShape {
        ndim: 2,
        grid_stride: true,
    };
}
