//! What a kernel's declaration states about its launches, checked at every
//! launch before the driver sees it: buffer bounds ([`Bound`], measured by an
//! [`Extent`]) and launch-shape rules (the most blocks, an exact block, the
//! least dynamic shared memory).
//!
//! An [`Extent`] is a small sum of products of integer arguments, grid and
//! block extents and constants, stored inline (no heap), evaluated with
//! checked arithmetic: an overflow is a refusal
//! ([`LaunchError::ExtentOverflow`]), never a wrap.

use std::fmt;
use std::ops::{Add, Mul};

use crate::error::{CudaError, CudaResult};
use crate::launch::{Dim3, LaunchConfig, LaunchError};
use crate::params::{Param, label};

/// One axis of a grid or block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Axis {
    /// `x`.
    X,
    /// `y`.
    Y,
    /// `z`.
    Z,
}

impl Axis {
    fn of(self, d: Dim3) -> u32 {
        match self {
            Axis::X => d.x,
            Axis::Y => d.y,
            Axis::Z => d.z,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Axis::X => "x",
            Axis::Y => "y",
            Axis::Z => "z",
        }
    }
}

/// A quantity, fixed by a launch, that a buffer's length (in elements) or a
/// launch's dynamic shared memory (in bytes) must reach.
///
/// The simple forms name one quantity; `+` and `*` combine them (with each
/// other and with `u64` constants) into a sum of products:
///
/// - a CSR row pointer of `n + 1` entries, `n` parameter 3:
///   `Extent::Param(3) + 1`;
/// - `k` values per block: `Extent::Param(4) * Extent::Blocks`;
/// - a `(block.x + 1) x block.y` tile of 4-byte values:
///   `(Extent::Block(Axis::X) + 1) * Extent::Block(Axis::Y) * 4`.
///
/// A combination holds at most 4 terms of at most 3 factors each (plus a
/// constant factor); a larger one is refused when declared. The value is
/// computed at each launch with checked arithmetic, without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Extent {
    /// Every thread of the grid: the product of the grid's and the block's
    /// extents (one element per thread).
    Threads,
    /// Every block of the grid: the product of the grid's extents (one
    /// element per block).
    Blocks,
    /// The value of the integer parameter at this index (a length argument:
    /// `u8` to `u64`, `i8` to `i64`, `usize`, `isize`; a negative value
    /// counts as 0).
    Param(usize),
    /// A fixed number of elements (or bytes).
    Elements(u64),
    /// The threads of one block: the product of the block's extents.
    BlockThreads,
    /// The grid's extent on one axis (`gridDim.x`, ...).
    Grid(Axis),
    /// The block's extent on one axis (`blockDim.x`, ...).
    Block(Axis),
    /// A sum of products of the forms above, made with `+` and `*`.
    Expr(ExtentExpr),
}

/// One factor of a product (a parameter index in 16 bits: CUDA's parameter
/// space of at most 32764 bytes holds fewer parameters; 4 bytes keep an
/// [`Extent`] small enough to copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Atom {
    Threads,
    Blocks,
    BlockThreads,
    Grid(Axis),
    Block(Axis),
    Param(u16),
}

/// Most terms of an [`ExtentExpr`].
const MAX_TERMS: usize = 4;
/// Most factors of one term (besides its constant).
const MAX_FACTORS: usize = 3;

/// `coef` times the product of `factors` (the empty product is 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Term {
    coef: u64,
    factors: [Option<Atom>; MAX_FACTORS],
}

/// A sum of products of launch quantities and constants, made by `+` and
/// `*` on [`Extent`]s (see there); stored inline, at most 4 terms of 3
/// factors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExtentExpr {
    terms: [Option<Term>; MAX_TERMS],
    /// Set when a combination did not fit (too many terms or factors, or a
    /// constant that overflows): refused when declared.
    too_large: bool,
}

impl ExtentExpr {
    const EMPTY: ExtentExpr = ExtentExpr {
        terms: [None; MAX_TERMS],
        too_large: false,
    };

    fn term(coef: u64, atom: Option<Atom>) -> ExtentExpr {
        let mut e = ExtentExpr::EMPTY;
        e.terms[0] = Some(Term {
            coef,
            factors: [atom, None, None],
        });
        e
    }

    fn terms(&self) -> impl Iterator<Item = &Term> {
        self.terms.iter().flatten()
    }

    fn push(&mut self, t: Term) {
        // Like terms merge, so that `n + 1 + 1` stays two terms.
        if let Some(c) = self
            .terms
            .iter_mut()
            .flatten()
            .find(|c| c.factors == t.factors)
        {
            match c.coef.checked_add(t.coef) {
                Some(v) => c.coef = v,
                None => self.too_large = true,
            }
            return;
        }
        match self.terms.iter_mut().find(|s| s.is_none()) {
            Some(slot) => *slot = Some(t),
            None => self.too_large = true,
        }
    }

    fn sum(a: ExtentExpr, b: ExtentExpr) -> ExtentExpr {
        let mut out = a;
        out.too_large |= b.too_large;
        for t in b.terms() {
            out.push(*t);
        }
        out
    }

    fn product(a: ExtentExpr, b: ExtentExpr) -> ExtentExpr {
        let mut out = ExtentExpr::EMPTY;
        out.too_large = a.too_large || b.too_large;
        for x in a.terms() {
            for y in b.terms() {
                let mut t = Term {
                    coef: 0,
                    factors: x.factors,
                };
                match x.coef.checked_mul(y.coef) {
                    Some(c) => t.coef = c,
                    None => out.too_large = true,
                }
                for f in y.factors.iter().flatten() {
                    match t.factors.iter_mut().find(|s| s.is_none()) {
                        Some(slot) => *slot = Some(*f),
                        None => out.too_large = true,
                    }
                }
                out.push(t);
            }
        }
        if out.terms().next().is_none() {
            // A product with an empty sum: zero.
            out.push(Term {
                coef: 0,
                factors: [None; MAX_FACTORS],
            });
        }
        out
    }
}

impl Extent {
    /// The extent as a sum of products.
    fn expr(self) -> ExtentExpr {
        let atom = |a| ExtentExpr::term(1, Some(a));
        match self {
            Extent::Threads => atom(Atom::Threads),
            Extent::Blocks => atom(Atom::Blocks),
            Extent::BlockThreads => atom(Atom::BlockThreads),
            Extent::Grid(a) => atom(Atom::Grid(a)),
            Extent::Block(a) => atom(Atom::Block(a)),
            Extent::Param(i) => match u16::try_from(i) {
                Ok(i) => atom(Atom::Param(i)),
                Err(_) => ExtentExpr {
                    too_large: true,
                    ..ExtentExpr::EMPTY
                },
            },
            Extent::Elements(n) => ExtentExpr::term(n, None),
            Extent::Expr(e) => e,
        }
    }

    /// Every parameter index the extent reads.
    fn params(self) -> impl Iterator<Item = usize> {
        let e = self.expr();
        let mut out = [None; MAX_TERMS * MAX_FACTORS];
        for (slot, f) in out
            .iter_mut()
            .zip(e.terms().flat_map(|t| t.factors.iter().flatten()))
        {
            if let Atom::Param(i) = f {
                *slot = Some(usize::from(*i));
            }
        }
        out.into_iter().flatten()
    }

    /// Whether the extent reads nothing but the block's extents and
    /// constants (so that it can be computed for a candidate block size).
    pub(crate) fn block_only(self) -> bool {
        self.expr().terms().all(|t| {
            t.factors
                .iter()
                .flatten()
                .all(|f| matches!(f, Atom::BlockThreads | Atom::Block(_)))
        })
    }

    /// The extent's value for a launch; `None` when it overflows `u64`.
    ///
    /// # Safety
    ///
    /// For every `Extent::Param(j)` it reads, `ints[j]` is `Some` and
    /// `values[j]` points to the bytes of an integer of that kind.
    #[inline]
    unsafe fn eval(
        &self,
        cfg: &LaunchConfig,
        ints: &[Option<IntParam>],
        values: &[*mut std::ffi::c_void],
    ) -> Option<u64> {
        let atom = |a: Atom| -> Option<u64> {
            Some(match a {
                Atom::Threads => cfg.grid.product()?.checked_mul(cfg.block.product()?)?,
                Atom::Blocks => cfg.grid.product()?,
                Atom::BlockThreads => cfg.block.product()?,
                Atom::Grid(x) => u64::from(x.of(cfg.grid)),
                Atom::Block(x) => u64::from(x.of(cfg.block)),
                Atom::Param(j) => {
                    let j = usize::from(j);
                    let int = ints.get(j).copied().flatten()?;
                    let p = values.get(j)?;
                    // SAFETY: the caller guarantees the parameter's bytes.
                    unsafe { int.read(p.cast::<u8>()) }
                }
            })
        };
        let sum = |e: &ExtentExpr| -> Option<u64> {
            let mut sum = 0u64;
            for t in e.terms() {
                let mut v = t.coef;
                for f in t.factors.iter().flatten() {
                    v = v.checked_mul(atom(*f)?)?;
                }
                sum = sum.checked_add(v)?;
            }
            Some(sum)
        };
        match self {
            // The common forms, without the general loop.
            Extent::Elements(n) => Some(*n),
            Extent::Blocks => atom(Atom::Blocks),
            Extent::Threads => atom(Atom::Threads),
            Extent::Param(j) => {
                let int = ints.get(*j).copied().flatten()?;
                let p = values.get(*j)?;
                // SAFETY: the caller guarantees the parameter's bytes.
                unsafe { int.read(p.cast::<u8>()) }.into()
            }
            Extent::Expr(e) => sum(e),
            other => sum(&other.expr()),
        }
    }

    /// The value for a block of `block`, for an extent that reads only the
    /// block ([`Extent::block_only`]); `None` on overflow.
    pub(crate) fn for_block(self, block: impl Into<Dim3>) -> Option<u64> {
        let cfg = LaunchConfig::new(1, block);
        // SAFETY: an extent that reads only the block reads no parameter;
        // one that reads parameters finds `ints` empty and yields None.
        unsafe { self.eval(&cfg, &[], &[]) }
    }

    /// The extent in words, naming parameters by their declared names.
    pub(crate) fn describe(self, params: &[Param]) -> String {
        let name = |j: usize| match params.get(j) {
            Some(p) if !p.name.is_empty() => format!("argument {j} ('{}')", p.name),
            _ => format!("argument {j}"),
        };
        let atom = |a: Atom| match a {
            Atom::Threads => "the grid's threads".to_string(),
            Atom::Blocks => "the grid's blocks".to_string(),
            Atom::BlockThreads => "the block's threads".to_string(),
            Atom::Grid(x) => format!("grid.{}", x.name()),
            Atom::Block(x) => format!("block.{}", x.name()),
            Atom::Param(j) => name(usize::from(j)),
        };
        match self {
            Extent::Elements(n) => format!("{n} element(s)"),
            Extent::Param(j) => format!("the value of {}", name(j)),
            Extent::Expr(e) => {
                let mut out = String::new();
                for (k, t) in e.terms().enumerate() {
                    if k > 0 {
                        out.push_str(" + ");
                    }
                    let factors: Vec<String> =
                        t.factors.iter().flatten().map(|f| atom(*f)).collect();
                    if t.coef != 1 || factors.is_empty() {
                        out.push_str(&t.coef.to_string());
                        if !factors.is_empty() {
                            out.push_str(" x ");
                        }
                    }
                    out.push_str(&factors.join(" x "));
                }
                out
            }
            simple => match simple.expr().terms().next().and_then(|t| t.factors[0]) {
                Some(a) => atom(a),
                None => "0".to_string(),
            },
        }
    }
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(&[]))
    }
}

impl From<u64> for Extent {
    fn from(n: u64) -> Extent {
        Extent::Elements(n)
    }
}

impl Add for Extent {
    type Output = Extent;
    /// The sum of two extents.
    fn add(self, rhs: Extent) -> Extent {
        Extent::Expr(ExtentExpr::sum(self.expr(), rhs.expr()))
    }
}

impl Add<u64> for Extent {
    type Output = Extent;
    /// The extent plus a constant.
    fn add(self, rhs: u64) -> Extent {
        self + Extent::Elements(rhs)
    }
}

impl Mul for Extent {
    type Output = Extent;
    /// The product of two extents.
    fn mul(self, rhs: Extent) -> Extent {
        Extent::Expr(ExtentExpr::product(self.expr(), rhs.expr()))
    }
}

impl Mul<u64> for Extent {
    type Output = Extent;
    /// The extent times a constant.
    fn mul(self, rhs: u64) -> Extent {
        self * Extent::Elements(rhs)
    }
}

/// The buffer passed for pointer parameter `buffer` (an index) must hold at
/// least `at_least` elements of its type: the relation between a launch and
/// the buffers a kernel indexes, stated with the kernel's declaration and
/// checked at every launch.
///
/// Declaring a kernel's parameter types is `unsafe` ([`Module::kernel`],
/// [`DynKernel::declare`]); what the declaration promises includes where the
/// kernel reads and writes: *whenever every [`Bound`] and launch-shape rule
/// declared on the kernel holds, the kernel touches only memory inside the
/// buffers passed for its pointer parameters (and inside the dynamic shared
/// memory the launch gives it)*. Most kernels index with the thread or block
/// index and with length arguments, so they state that relation as bounds,
/// and the launch checks it with the lengths of the buffers it is given:
///
/// - `input[i]` for every thread `i`: `Bound::new(0, Extent::Threads)`;
/// - `partial[blockIdx.x]`: `Bound::new(1, Extent::Blocks)`;
/// - `if (i < n) y[i] = …` with `n` parameter 3: `Bound::new(2, Extent::Param(3))`;
/// - `row_ptr[row + 1]` for `row < n`: `Bound::new(0, Extent::Param(3) + 1)`;
/// - `out[0]`: `Bound::new(2, Extent::Elements(1))`.
///
/// What a kernel needs of the launch's shape is declared beside the bounds:
/// the most blocks it is safe for ([`DynKernel::max_grid`]), the one block
/// shape it is written for ([`DynKernel::fixed_block`]), the dynamic shared
/// memory it indexes ([`DynKernel::shared_mem`]).
///
/// A bounded parameter must be given a buffer or view (`&buffer`,
/// `&mut buffer`), whose length the launch knows; a raw pointer there is
/// refused. A launch that breaks a bound is a [`LaunchError::BufferTooShort`]
/// naming the kernel, the parameter, the length, the extent and its value.
///
/// [`Module::kernel`]: crate::Module::kernel
/// [`DynKernel::declare`]: crate::DynKernel::declare
/// [`DynKernel::max_grid`]: crate::DynKernel::max_grid
/// [`DynKernel::fixed_block`]: crate::DynKernel::fixed_block
/// [`DynKernel::shared_mem`]: crate::DynKernel::shared_mem
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bound {
    buffer: usize,
    at_least: Extent,
}

impl Bound {
    /// The buffer passed for parameter `buffer` holds at least `at_least` elements.
    pub const fn new(buffer: usize, at_least: Extent) -> Bound {
        Bound { buffer, at_least }
    }
    /// The bounded parameter's index.
    pub fn buffer(&self) -> usize {
        self.buffer
    }
    /// What its length must reach.
    pub fn at_least(&self) -> Extent {
        self.at_least
    }
}

/// How to read an integer parameter's value from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IntParam {
    size: usize,
    signed: bool,
}

impl IntParam {
    fn of(p: &Param) -> Option<IntParam> {
        macro_rules! kinds {
            ($($t:ty => $signed:expr),*) => {
                $( if p.ty.accepts::<$t>() {
                    return Some(IntParam { size: size_of::<$t>(), signed: $signed });
                } )*
            };
        }
        kinds!(u8 => false, u16 => false, u32 => false, u64 => false, usize => false,
               i8 => true, i16 => true, i32 => true, i64 => true, isize => true);
        None
    }

    /// The value, as a non-negative count (negative values count as 0).
    ///
    /// # Safety
    ///
    /// `ptr` must point to `self.size` readable bytes.
    unsafe fn read(self, ptr: *const u8) -> u64 {
        let mut b = [0u8; 8];
        // SAFETY: the caller guarantees `size` readable bytes; size <= 8.
        unsafe { std::ptr::copy_nonoverlapping(ptr, b.as_mut_ptr(), self.size) };
        let raw = u64::from_ne_bytes(b);
        if !self.signed {
            return raw;
        }
        let shift = 64 - 8 * self.size as u32;
        let v = ((raw << shift) as i64) >> shift;
        v.max(0) as u64
    }
}

/// What a declaration requires of a launch's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Shape {
    /// The most blocks in the grid.
    pub(crate) max_blocks: Option<u64>,
    /// The one block shape the kernel is written for.
    pub(crate) fixed_block: Option<Dim3>,
    /// The least dynamic shared memory per block, in bytes.
    pub(crate) shared_mem: Option<Extent>,
}

/// Everything a declaration requires of its launches, resolved against the
/// parameter list once: buffer bounds, launch shape, and how to read each
/// integer parameter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Rules {
    /// Whether there is anything to check (computed once, read per launch).
    active: bool,
    bounds: Vec<Bound>,
    shape: Shape,
    /// How to read parameter `i` as a length (`None`: not an integer).
    ints: Vec<Option<IntParam>>,
}

impl Rules {
    /// Whether a launch has anything to check.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        !self.active
    }

    /// The declared buffer bounds.
    pub(crate) fn bounds(&self) -> &[Bound] {
        &self.bounds
    }

    /// The declared launch shape.
    pub(crate) fn shape(&self) -> Shape {
        self.shape
    }

    /// Checks `bounds` and `shape` against the declared `params` of kernel
    /// `kernel`: each bounded parameter is a pointer, each parameter an
    /// extent reads an integer, each extent small enough.
    pub(crate) fn resolve(
        kernel: &str,
        params: &[Param],
        bounds: Vec<Bound>,
        shape: Shape,
    ) -> CudaResult<Rules> {
        let bad = |what: String| {
            CudaError::invalid_argument("Bound", "bound", format!("kernel '{kernel}': {what}"))
        };
        let ints: Vec<Option<IntParam>> = params.iter().map(IntParam::of).collect();
        let check_extent = |e: Extent| -> CudaResult<()> {
            if e.expr().too_large {
                return Err(bad(format!(
                    "the extent {} has more than {MAX_TERMS} terms, more than {MAX_FACTORS} factors in a term, a constant that overflows 64 bits, or a parameter index past 65535; state a simpler extent",
                    e.describe(params)
                )));
            }
            for j in e.params() {
                let q = params.get(j).ok_or_else(|| {
                    bad(format!(
                        "an extent reads parameter {j} but the kernel has {} parameter(s)",
                        params.len()
                    ))
                })?;
                if ints[j].is_none() {
                    return Err(bad(format!(
                        "an extent reads parameter {j} ('{}') as a length but it is a {}; use an integer parameter",
                        label(j, &q.name),
                        q.ty.name()
                    )));
                }
            }
            Ok(())
        };
        for b in &bounds {
            let p = params.get(b.buffer).ok_or_else(|| {
                bad(format!(
                    "a bound names parameter {} but the kernel has {} parameter(s); name a pointer parameter by its index",
                    b.buffer,
                    params.len()
                ))
            })?;
            if !p.ty.name().contains("DevicePtr<") {
                return Err(bad(format!(
                    "parameter {} ('{}') is a {}, not a device pointer; bounds apply to pointer parameters",
                    b.buffer,
                    label(b.buffer, &p.name),
                    p.ty.name()
                )));
            }
            check_extent(b.at_least)?;
        }
        if let Some(e) = shape.shared_mem {
            check_extent(e)?;
        }
        if shape.max_blocks == Some(0) {
            return Err(bad(
                "max_grid(0) allows no launch at all; give the most blocks the kernel is safe for (at least 1)".into(),
            ));
        }
        if let Some(b) = shape.fixed_block
            && b.product() == Some(0)
        {
            return Err(bad(format!(
                "fixed_block({b}) has a zero extent; give the block the kernel is written for"
            )));
        }
        Ok(Rules {
            active: !bounds.is_empty() || shape != Shape::default(),
            bounds,
            shape,
            ints,
        })
    }

    /// Checks a launch: the launch shape, then every bound. `lens[i]` is the
    /// length (elements) of the buffer given for parameter `i` (`None` for a
    /// raw pointer or a value), `values[i]` points to parameter `i`'s bytes.
    ///
    /// # Safety
    ///
    /// `values[j]` must point to parameter `j`'s value (of the declared type)
    /// for every parameter an extent reads.
    pub(crate) unsafe fn check(
        &self,
        kernel: &str,
        params: &[Param],
        cfg: &LaunchConfig,
        lens: &[Option<usize>],
        values: &[*mut std::ffi::c_void],
    ) -> Result<(), LaunchError> {
        let overflow = |e: Extent| LaunchError::ExtentOverflow {
            kernel: kernel.to_string(),
            extent: e.describe(params),
        };
        if let Some(required) = self.shape.fixed_block
            && cfg.block != required
        {
            return Err(LaunchError::BlockNotDeclared {
                kernel: kernel.to_string(),
                block: cfg.block,
                required,
            });
        }
        if let Some(max) = self.shape.max_blocks {
            let blocks = cfg.grid.product().unwrap_or(u64::MAX);
            if blocks > max {
                return Err(LaunchError::GridAboveDeclared {
                    kernel: kernel.to_string(),
                    grid: cfg.grid,
                    blocks,
                    max,
                });
            }
        }
        if let Some(e) = self.shape.shared_mem {
            // SAFETY: the caller's promise for the parameters an extent reads.
            let needed = unsafe { e.eval(cfg, &self.ints, values) }.ok_or_else(|| overflow(e))?;
            if u64::from(cfg.shared_mem_bytes) < needed {
                return Err(LaunchError::SharedMemoryBelowDeclared {
                    kernel: kernel.to_string(),
                    given: cfg.shared_mem_bytes,
                    rule: e.describe(params),
                    needed,
                });
            }
        }
        for b in &self.bounds {
            let i = b.buffer;
            let Some(len) = lens.get(i).copied().flatten() else {
                return Err(LaunchError::BufferUnknown {
                    kernel: kernel.to_string(),
                    index: i,
                    name: label(i, &params[i].name),
                    extent: b.at_least.describe(params),
                });
            };
            // SAFETY: the caller's promise for the parameters an extent reads.
            let needed = unsafe { b.at_least.eval(cfg, &self.ints, values) }
                .ok_or_else(|| overflow(b.at_least))?;
            if (len as u64) < needed {
                let reads_launch = b.at_least.expr().terms().any(|t| {
                    t.factors
                        .iter()
                        .flatten()
                        .any(|f| !matches!(f, Atom::Param(_)))
                });
                let reads_params = b.at_least.params().next().is_some();
                let hint = match (reads_launch, reads_params) {
                    (true, true) => " or launch a smaller grid or pass smaller lengths",
                    (true, false) => " or launch a smaller grid",
                    (false, true) => " or pass a smaller length",
                    (false, false) => "",
                };
                return Err(LaunchError::BufferTooShort {
                    kernel: kernel.to_string(),
                    index: i,
                    name: label(i, &params[i].name),
                    len: len as u64,
                    extent: b.at_least.describe(params),
                    needed,
                    hint: format!("pass a buffer of at least {needed} elements{hint}"),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{ConstDevicePtr, DevicePtr};

    fn coop_sum() -> Vec<Param> {
        vec![
            Param::of::<ConstDevicePtr<u32>>("input"),
            Param::of::<DevicePtr<u64>>("partial"),
            Param::of::<DevicePtr<u64>>("out"),
            Param::of::<u32>("n"),
        ]
    }

    fn rules(params: &[Param], bounds: &[Bound], shape: Shape) -> Rules {
        Rules::resolve("k", params, bounds.to_vec(), shape).unwrap()
    }

    fn bounds() -> Rules {
        Rules::resolve(
            "coop_sum",
            &coop_sum(),
            vec![
                Bound::new(0, Extent::Param(3)),
                Bound::new(1, Extent::Blocks),
                Bound::new(2, Extent::Elements(1)),
            ],
            Shape::default(),
        )
        .unwrap()
    }

    fn run(
        cfg: LaunchConfig,
        lens: [Option<usize>; 4],
        n: u32,
    ) -> std::result::Result<(), LaunchError> {
        let mut n = n;
        let values = [
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            (&mut n as *mut u32).cast(),
        ];
        // SAFETY: parameter 3 points to a u32.
        unsafe { bounds().check("coop_sum", &coop_sum(), &cfg, &lens, &values) }
    }

    #[test]
    fn the_readme_cooperative_grid_needs_one_partial_per_block() {
        // The H200's largest cooperative grid for this kernel: 1056 blocks of 256.
        let cfg = LaunchConfig::new(1056, 256);
        let e = run(cfg, [Some(1 << 20), Some(1), Some(1), None], 1 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "launch of 'coop_sum' refused: argument 1 ('partial') has 1 element(s) but the kernel's declared bound needs at least the grid's blocks = 1056; pass a buffer of at least 1056 elements or launch a smaller grid"
        );
        run(cfg, [Some(1 << 20), Some(1056), Some(1), None], 1 << 20).unwrap();
        // `n` larger than the input is refused too, with the value read from
        // the argument, named by its declared name.
        let e = run(cfg, [Some(10), Some(1056), Some(1), None], 11).unwrap_err();
        assert!(
            matches!(
                e,
                LaunchError::BufferTooShort {
                    needed: 11,
                    len: 10,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("needs at least the value of argument 3 ('n') = 11"),
            "{e}"
        );
    }

    #[test]
    fn raw_pointers_for_bounded_parameters_are_refused() {
        let e = run(LaunchConfig::new(1, 1), [Some(1), None, Some(1), None], 1).unwrap_err();
        assert!(matches!(e, LaunchError::BufferUnknown { .. }), "{e}");
        assert!(e.to_string().contains("'partial'"), "{e}");
    }

    #[test]
    fn threads_count_grid_times_block_and_signed_lengths_clamp_at_zero() {
        let params = vec![Param::of::<DevicePtr<f32>>("x"), Param::of::<i32>("n")];
        let b = rules(
            &params,
            &[
                Bound::new(0, Extent::Threads),
                Bound::new(0, Extent::Param(1)),
            ],
            Shape::default(),
        );
        let mut n = -5i32;
        let values = [std::ptr::null_mut(), (&mut n as *mut i32).cast()];
        let cfg = LaunchConfig::new((4, 2, 1), (32, 2, 1));
        // SAFETY: parameter 1 points to an i32.
        let e = unsafe { b.check("k", &params, &cfg, &[Some(511), None], &values) }.unwrap_err();
        assert!(
            matches!(e, LaunchError::BufferTooShort { needed: 512, .. }),
            "{e}"
        );
        // SAFETY: as above.
        unsafe { b.check("k", &params, &cfg, &[Some(512), None], &values) }.unwrap();
    }

    #[test]
    fn bounds_on_values_or_with_non_integer_lengths_are_refused_at_declaration() {
        let p = coop_sum();
        let resolve = |b: Bound| Rules::resolve("coop_sum", &p, vec![b], Shape::default());
        let e = resolve(Bound::new(3, Extent::Threads)).unwrap_err();
        assert!(e.to_string().contains("not a device pointer"), "{e}");
        let e = resolve(Bound::new(0, Extent::Param(1))).unwrap_err();
        assert!(e.to_string().contains("use an integer parameter"), "{e}");
        assert!(e.to_string().contains("'partial'"), "{e}");
        // Inside a sum too.
        let e = resolve(Bound::new(0, Extent::Param(3) + Extent::Param(1))).unwrap_err();
        assert!(e.to_string().contains("use an integer parameter"), "{e}");
        let e = resolve(Bound::new(9, Extent::Threads)).unwrap_err();
        assert!(e.to_string().contains("has 4 parameter(s)"), "{e}");
        let e = resolve(Bound::new(0, Extent::Param(7) * 2)).unwrap_err();
        assert!(e.to_string().contains("reads parameter 7"), "{e}");
        // An index past 16 bits is refused too, never read as 0.
        let e = resolve(Bound::new(0, Extent::Param(1 << 20))).unwrap_err();
        assert!(e.to_string().contains("state a simpler extent"), "{e}");
    }

    /// spmv_csr(const int* row_ptr, const int* col, const float* val,
    /// const float* x, float* y, int n): `row_ptr[row + 1]` for `row < n`.
    fn spmv() -> Vec<Param> {
        vec![
            Param::of::<ConstDevicePtr<i32>>("row_ptr"),
            Param::of::<ConstDevicePtr<i32>>("col"),
            Param::of::<ConstDevicePtr<f32>>("val"),
            Param::of::<ConstDevicePtr<f32>>("x"),
            Param::of::<DevicePtr<f32>>("y"),
            Param::of::<i32>("n"),
        ]
    }

    #[test]
    fn a_csr_row_pointer_needs_n_plus_one_entries() {
        let p = spmv();
        let r = rules(
            &p,
            &[
                Bound::new(0, Extent::Param(5) + 1),
                Bound::new(4, Extent::Param(5)),
            ],
            Shape::default(),
        );
        let mut n = 1000i32;
        let mut values = [std::ptr::null_mut(); 6];
        values[5] = (&mut n as *mut i32).cast();
        let cfg = LaunchConfig::for_elements(1000, 256);
        let lens = |rows| [Some(rows), None, None, None, Some(1000), None];
        // SAFETY: parameter 5 points to an i32.
        let e = unsafe { r.check("spmv_csr", &p, &cfg, &lens(1000), &values) }.unwrap_err();
        assert_eq!(
            e.to_string(),
            "launch of 'spmv_csr' refused: argument 0 ('row_ptr') has 1000 element(s) but the kernel's declared bound needs at least argument 5 ('n') + 1 = 1001; pass a buffer of at least 1001 elements or pass a smaller length"
        );
        // SAFETY: as above.
        unsafe { r.check("spmv_csr", &p, &cfg, &lens(1001), &values) }.unwrap();
    }

    #[test]
    fn an_argument_times_the_grid_is_checked_and_an_overflow_is_refused() {
        // partial[blockIdx.x * k + j] for j < k: k values per block.
        let p = vec![
            Param::of::<DevicePtr<f32>>("partial"),
            Param::of::<u64>("k"),
        ];
        let r = rules(
            &p,
            &[Bound::new(0, Extent::Param(1) * Extent::Blocks)],
            Shape::default(),
        );
        let mut k = 8u64;
        let values = [std::ptr::null_mut(), (&mut k as *mut u64).cast()];
        let cfg = LaunchConfig::new((66, 2), 128);
        // SAFETY: parameter 1 points to a u64.
        let e = unsafe { r.check("partials", &p, &cfg, &[Some(1055), None], &values) }.unwrap_err();
        assert!(
            matches!(
                e,
                LaunchError::BufferTooShort {
                    needed: 1056,
                    len: 1055,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains(
                "needs at least argument 1 ('k') x the grid's blocks = 1056; pass a buffer of at least 1056 elements or launch a smaller grid or pass smaller lengths"
            ),
            "{e}"
        );
        // SAFETY: as above.
        unsafe { r.check("partials", &p, &cfg, &[Some(1056), None], &values) }.unwrap();
        // k near 2^64 times 132 blocks overflows: refused, not wrapped.
        let mut k = u64::MAX / 100;
        let values = [std::ptr::null_mut(), (&mut k as *mut u64).cast()];
        // SAFETY: as above.
        let e = unsafe { r.check("partials", &p, &cfg, &[Some(usize::MAX), None], &values) }
            .unwrap_err();
        assert_eq!(
            e,
            LaunchError::ExtentOverflow {
                kernel: "partials".into(),
                extent: "argument 1 ('k') x the grid's blocks".into(),
            }
        );
        assert!(e.to_string().contains("overflows 64 bits"), "{e}");
    }

    #[test]
    fn block_extents_compose_and_large_expressions_are_refused_when_declared() {
        let e = (Extent::Block(Axis::X) + 1) * Extent::Block(Axis::Y) * 4;
        assert_eq!(e.to_string(), "4 x block.x x block.y + 4 x block.y");
        assert_eq!(e.for_block(32), Some(4 * 33));
        assert_eq!(e.for_block((32, 2)), Some(4 * 33 * 2));
        assert!(e.block_only());
        assert!(!(Extent::Param(0) + 1).block_only());
        assert_eq!((Extent::Param(0) + 1 + 1).to_string(), "argument 0 + 2");
        let p = vec![Param::of::<DevicePtr<f32>>("x"), Param::of::<u32>("n")];
        let n = Extent::Param(1);
        let big = (n + Extent::Blocks) * (n + Extent::Threads) * (n + Extent::BlockThreads);
        let e = Rules::resolve("k", &p, vec![Bound::new(0, big)], Shape::default()).unwrap_err();
        assert!(e.to_string().contains("state a simpler extent"), "{e}");
        let e = Rules::resolve(
            "k",
            &p,
            vec![Bound::new(0, Extent::Elements(u64::MAX) * 2)],
            Shape::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("overflows 64 bits"), "{e}");
    }

    /// merge(const int* a, int* out, int n): safe for a grid of at most 64
    /// blocks of exactly 32x32 threads, with 4 bytes of shared memory per
    /// thread plus one 4-byte slot per warp.
    fn merge() -> (Vec<Param>, Rules) {
        let p = vec![
            Param::of::<ConstDevicePtr<i32>>("a"),
            Param::of::<DevicePtr<i32>>("out"),
            Param::of::<i32>("n"),
        ];
        let shape = Shape {
            max_blocks: Some(64),
            fixed_block: Some(Dim3::new(32, 32, 1)),
            shared_mem: Some(Extent::BlockThreads * 4 + Extent::BlockThreads * 4),
        };
        let r = Rules::resolve("merge", &p, vec![], shape).unwrap();
        (p, r)
    }

    fn launch_merge(cfg: LaunchConfig) -> Result<(), LaunchError> {
        let (p, r) = merge();
        let mut n = 0i32;
        let values = [
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            (&mut n as *mut i32).cast(),
        ];
        // SAFETY: parameter 2 points to an i32.
        unsafe { r.check("merge", &p, &cfg, &[None, None, None], &values) }
    }

    #[test]
    fn the_grid_limit_names_the_blocks_and_the_limit() {
        let ok = LaunchConfig::new(64, (32, 32)).with_shared_mem(8192);
        launch_merge(ok).unwrap();
        let e =
            launch_merge(LaunchConfig::new((13, 5), (32, 32)).with_shared_mem(8192)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "launch of 'merge' refused: the grid 13x5x1 has 65 blocks but the kernel is declared safe for at most 64 (max_grid); launch at most 64 blocks"
        );
    }

    #[test]
    fn a_fixed_block_refuses_any_other_block() {
        let e = launch_merge(LaunchConfig::new(1, (32, 16)).with_shared_mem(8192)).unwrap_err();
        assert_eq!(
            e,
            LaunchError::BlockNotDeclared {
                kernel: "merge".into(),
                block: Dim3::new(32, 16, 1),
                required: Dim3::new(32, 32, 1),
            }
        );
        assert_eq!(
            e.to_string(),
            "launch of 'merge' refused: the block is 32x16x1 but the kernel is written for blocks of exactly 32x32x1 (fixed_block); launch blocks of 32x32x1"
        );
    }

    #[test]
    fn shared_memory_as_a_function_of_the_block_is_checked() {
        let e = launch_merge(LaunchConfig::new(1, (32, 32)).with_shared_mem(8191)).unwrap_err();
        assert!(
            matches!(
                e,
                LaunchError::SharedMemoryBelowDeclared {
                    given: 8191,
                    needed: 8192,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "launch of 'merge' refused: it gets 8191 B of dynamic shared memory per block but its declaration needs 8 x the block's threads = 8192 B; give at least 8192 B (LaunchConfig::with_shared_mem)"
        );
    }

    #[test]
    fn impossible_shapes_are_refused_at_declaration() {
        let p = vec![Param::of::<u32>("n")];
        let shape = Shape {
            max_blocks: Some(0),
            ..Shape::default()
        };
        assert!(Rules::resolve("k", &p, vec![], shape).is_err());
        let shape = Shape {
            fixed_block: Some(Dim3::new(32, 0, 1)),
            ..Shape::default()
        };
        assert!(Rules::resolve("k", &p, vec![], shape).is_err());
        let shape = Shape {
            shared_mem: Some(Extent::Param(3)),
            ..Shape::default()
        };
        assert!(Rules::resolve("k", &p, vec![], shape).is_err());
        assert!(Rules::default().is_empty());
        assert!(
            Rules::resolve("k", &p, vec![], Shape::default())
                .unwrap()
                .is_empty()
        );
        let shape = Shape {
            max_blocks: Some(1),
            ..Shape::default()
        };
        assert!(!Rules::resolve("k", &p, vec![], shape).unwrap().is_empty());
    }
}
