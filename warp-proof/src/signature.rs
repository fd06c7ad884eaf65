//! Kernel signatures: what each parameter takes (arrays, values, structs
//! with their C layout) and how a kernel indexes its arrays (the access
//! rules a launch checks). A leaf: it names only dtypes and the generated
//! ABI types, and the readers (`source` here; warp-launch's `aot`), its
//! checks (`bind`), kernels and tape build on it.

use std::fmt;

use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::abi::{ArrayT, DType};

/// What a parameter takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ParamKind {
    /// An array of `dtype` (`wp::array_t<T>`); `ndim` when the declaration
    /// knows it (Warp-generated sources do not spell it).
    Array {
        /// Element type.
        #[serde(with = "dtype_name")]
        dtype: &'static DType,
        /// Number of dimensions, when known.
        ndim: Option<u8>,
    },
    /// A scalar, vector or matrix by value.
    Value(#[serde(with = "dtype_name")] &'static DType),
    /// A `wp.struct` by value.
    Struct(#[serde(with = "shared_struct")] Arc<StructType>),
}

/// A dtype written as its Warp name and read back as the table's entry,
/// so a read declaration compares dtypes by identity as a derived one does.
mod dtype_name {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use crate::abi::DType;

    pub(super) fn serialize<S: Serializer>(d: &&'static DType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(d.name)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<&'static DType, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        DType::by_name(&name).ok_or_else(|| D::Error::custom(format!("no Warp dtype '{name}'")))
    }
}

/// A struct type written in place (serde's own `Arc` support needs its
/// `rc` feature for the whole dependency graph).
mod shared_struct {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::StructType;

    pub(super) fn serialize<S: Serializer>(t: &Arc<StructType>, s: S) -> Result<S::Ok, S::Error> {
        t.as_ref().serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Arc<StructType>, D::Error> {
        StructType::deserialize(d).map(Arc::new)
    }
}

impl ParamKind {
    /// Bytes it takes in the parameter space.
    pub fn size(&self) -> usize {
        match self {
            ParamKind::Array { .. } => size_of::<ArrayT>(),
            ParamKind::Value(d) => d.size,
            ParamKind::Struct(s) => s.size,
        }
    }

    /// Its alignment.
    pub fn align(&self) -> usize {
        match self {
            ParamKind::Array { .. } => align_of::<ArrayT>(),
            ParamKind::Value(d) => d.align,
            ParamKind::Struct(s) => s.align,
        }
    }

    /// What it takes, for messages (`an array of float32 with 2 dimension(s)`).
    pub fn describe(&self) -> String {
        match self {
            ParamKind::Array {
                dtype,
                ndim: Some(n),
            } => {
                format!("an array of {} with {n} dimension(s)", dtype.name)
            }
            ParamKind::Array { dtype, ndim: None } => format!("an array of {}", dtype.name),
            ParamKind::Value(d) => format!("{} {} value", article(d.name), d.name),
            ParamKind::Struct(s) => format!("a struct '{}'", s.name),
        }
    }

    /// The type's name in declarations given to `cuda-api` (warp-launch's).
    #[doc(hidden)]
    pub fn type_name(&self) -> String {
        match self {
            ParamKind::Array { dtype, .. } => format!("array_t<{}>", dtype.name),
            ParamKind::Value(d) => d.name.to_string(),
            ParamKind::Struct(s) => s.name.clone(),
        }
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o']) {
        "an"
    } else {
        "a"
    }
}

/// A field of a [`StructType`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StructField {
    /// The field's name.
    pub name: String,
    /// Its type.
    pub kind: ParamKind,
    /// Byte offset in the struct.
    pub offset: usize,
}

/// A `wp.struct` type: fields in order with their C layout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StructType {
    /// The struct's name.
    pub name: String,
    /// Fields in order.
    pub fields: Vec<StructField>,
    /// Size in bytes (padded to the alignment).
    pub size: usize,
    /// Alignment (the largest field alignment, at least 1).
    pub align: usize,
}

impl StructType {
    /// The name without the 8-hex-digit hash Warp appends (`Params` for
    /// `Params_acca3b2c`).
    pub fn key(&self) -> &str {
        struct_key(&self.name)
    }

    /// Lays out `fields` in order as a C compiler does.
    pub fn new(name: impl Into<String>, fields: Vec<(String, ParamKind)>) -> StructType {
        let mut offset = 0usize;
        let mut align = 1usize;
        let fields = fields
            .into_iter()
            .map(|(name, kind)| {
                let a = kind.align().max(1);
                offset = offset.next_multiple_of(a);
                align = align.max(a);
                let f = StructField { name, offset, kind };
                offset += f.kind.size();
                f
            })
            .collect();
        StructType {
            name: name.into(),
            fields,
            size: offset.next_multiple_of(align),
            align,
        }
    }
}

/// How a kernel indexes one axis of an array parameter: the facts a launch
/// checks against the launch shape and the array's extents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum AxisIndex {
    /// Component `k` of the thread coordinate (`wp.tid()`; `i, j = wp.tid()`
    /// gives components 0 and 1). It runs below the launch's extent `k`, so
    /// the launch checks `dim[k] <= extent`.
    Thread(usize),
    /// The linear work-item index (below the launch's `size`, every extent
    /// folded): the launch checks `size <= extent`.
    WorkItem,
    /// The linear block index of the grid (`blockIdx.x` of a 1-D grid): the
    /// launch checks `blocks <= extent`.
    Block,
    /// A constant; a negative one counts from the end, as Warp's `index()`
    /// does. The launch checks `-extent <= c < extent`.
    Constant(i64),
    /// A tile of `len` elements along the axis, from `scale * c + offset`
    /// where `c` is thread coordinate `thread` (0 for `None`): Warp's
    /// `wp.tile_load`, `wp.tile_store` and `wp.tile_atomic_add` into or from
    /// a register tile with bounds checks on (`tile.h`'s `tile_global_t`
    /// skips every element at or past the array's extent, so the extent is
    /// not checked here). Those checks miss a start below 0 and an index
    /// past `i32::MAX` (they add the tile coordinate in 32-bit `int`): the
    /// start is never negative here (all three terms are), and the launch
    /// checks that the last index, `scale * (dim[thread] - 1) + offset +
    /// len - 1`, fits in `i32`. A kernel with a tile rule must also run
    /// whole blocks (its threads meet at barriers): the launch refuses a
    /// domain whose size is not a multiple of the block size
    /// (warp-launch's `Error::PartialTileBlock`).
    Tile {
        /// The thread coordinate the start moves with, if any.
        thread: Option<usize>,
        /// Elements per step of the coordinate.
        scale: u32,
        /// The start for coordinate 0.
        offset: u32,
        /// The tile's extent on this axis.
        len: u32,
    },
    /// A value never below 0 modulo the indexed array's own extent on axis
    /// `axis` (Warp's `a[i % a.shape[axis]]`, `i` a thread coordinate, a
    /// constant at least 0 or an unsigned value): it lies in `[0,
    /// extent(axis))`. The launch checks that the extent on `axis` is at
    /// least 1 (a modulo by 0 is undefined: SIGFPE on the CPU) and at most
    /// the extent of the axis it indexes.
    Modulo {
        /// The axis whose extent divides.
        axis: usize,
    },
}

impl AxisIndex {
    /// Largest element index a [`AxisIndex::Tile`] reaches when its
    /// coordinate runs below `runs` (`runs` ignored without a coordinate;
    /// `runs` 0 counts as 1).
    #[doc(hidden)]
    pub fn tile_last(scale: u32, offset: u32, len: u32, runs: u64) -> u128 {
        let steps = u128::from(runs.max(1) - 1);
        u128::from(scale) * steps + u128::from(offset) + u128::from(len.max(1) - 1)
    }
}

impl fmt::Display for AxisIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisIndex::Thread(k) => write!(f, "thread coordinate {k} (wp.tid())"),
            AxisIndex::WorkItem => f.write_str("the linear work-item index"),
            AxisIndex::Block => f.write_str("the block index"),
            AxisIndex::Constant(c) => write!(f, "the constant {c}"),
            AxisIndex::Tile {
                thread,
                scale,
                offset,
                len,
            } => match thread {
                Some(k) => write!(
                    f,
                    "a tile of {len} from {scale} * thread coordinate {k} + {offset}"
                ),
                None => write!(f, "a tile of {len} from {offset}"),
            },
            AxisIndex::Modulo { axis } => {
                write!(f, "a value modulo the array's extent on axis {axis}")
            }
        }
    }
}

/// Which array of an array parameter an access indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AccessTarget {
    /// The parameter's own array.
    Param,
    /// The parameter's adjoint, `adj_<param>` (the backward kernel's).
    Adjoint,
}

/// One array access of a kernel, in a form a launch can check: the array
/// parameter, and how each of its axes is indexed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ArrayAccess {
    /// The parameter (its forward name, without Warp's `var_`/`adj_`).
    pub param: String,
    /// Which array of the parameter the access indexes: the parameter
    /// itself or its adjoint (`adj_<param>`, in the backward kernel).
    pub target: AccessTarget,
    /// One entry per indexed axis, axis 0 first (1 to 4 entries). Axes of
    /// the array beyond these must not be empty.
    pub indices: Vec<AxisIndex>,
    /// Whether a null array is skipped by the kernel (Warp's adjoint
    /// functions test `data` before touching an array); otherwise a null
    /// array counts as extent 0 on every axis.
    pub null_ok: bool,
    /// 1-based line of the access in the generated source (0 when declared
    /// in Rust).
    pub line: usize,
}

/// What a launch may assume about the array accesses of one kernel function
/// (forward or backward).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Accesses {
    /// Every array access is one of these; a launch checks each against its
    /// shape and arguments and refuses a launch that could leave an array.
    Checked(Vec<ArrayAccess>),
    /// An access no launch can check (an index read from data, computed,
    /// looped over, or an array passed on): safe launches are refused; the
    /// `unsafe` `LaunchBuilder::unchecked` of warp-launch runs it.
    Unproven(Unproven),
}

impl Default for Accesses {
    fn default() -> Self {
        Accesses::Checked(Vec::new())
    }
}

/// Why an access cannot be checked ([`Accesses::Unproven`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unproven {
    /// The parameter (forward name), or empty when the reason is not one
    /// parameter's.
    pub param: String,
    /// Where: `file:line` of the generated source, or `the declaration`.
    pub location: String,
    /// What the kernel does there.
    pub reason: String,
}

/// A named parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelParam {
    /// The name (as in the kernel's source, without Warp's `var_` prefix).
    pub name: String,
    /// What it takes.
    pub kind: ParamKind,
}

/// A Warp struct's key from its generated name: the name without a
/// trailing `_` plus 8 hex digits (the whole name when it has no such
/// suffix).
pub fn struct_key(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((key, hash))
            if !key.is_empty()
                && hash.len() == 8
                && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            key
        }
        _ => name,
    }
}

/// Which of a kernel's functions a launch runs: the forward kernel, or the
/// backward (adjoint) kernel Warp generates beside it, which takes the
/// forward parameters and then one adjoint per parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Pass {
    /// The forward kernel (`<key>_cuda_kernel_forward`).
    #[default]
    Forward,
    /// The backward kernel (`<key>_cuda_kernel_backward`).
    Adjoint,
}

impl Pass {
    /// 0 for forward, 1 for adjoint: the index of per-pass tables.
    #[doc(hidden)]
    pub fn index(self) -> usize {
        match self {
            Pass::Forward => 0,
            Pass::Adjoint => 1,
        }
    }
}

impl fmt::Display for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pass::Forward => "forward",
            Pass::Adjoint => "backward",
        })
    }
}
