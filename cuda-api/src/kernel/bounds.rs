//! Buffer bounds ([`Bound`], [`Extent`]): the relation between a launch and
//! the buffers a kernel indexes, stated with the kernel's declaration and
//! checked at every launch.

use std::fmt;

use crate::error::{CudaError, CudaResult};
use crate::launch::{LaunchConfig, LaunchError};
use crate::params::{Param, label};

/// A quantity, fixed by a launch, that a buffer's length must reach.
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
    /// A fixed number of elements.
    Elements(u64),
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Extent::Threads => f.write_str("the grid's threads"),
            Extent::Blocks => f.write_str("the grid's blocks"),
            Extent::Param(i) => write!(f, "the value of argument {i}"),
            Extent::Elements(n) => write!(f, "{n} element(s)"),
        }
    }
}

/// The buffer passed for pointer parameter `buffer` (an index) must hold at
/// least `at_least` elements of its type: the relation between a launch and
/// the buffers a kernel indexes, stated with the kernel's declaration and
/// checked at every launch.
///
/// Declaring a kernel's parameter types is `unsafe` ([`Module::kernel`],
/// [`DynKernel::declare`]); what the declaration promises includes where the
/// kernel reads and writes: *whenever every [`Bound`] declared on the kernel
/// holds, the kernel touches only memory inside the buffers passed for its
/// pointer parameters*. Most kernels index with the thread or block index and
/// with length arguments, so they state that relation as bounds, and the
/// launch checks it with the lengths of the buffers it is given:
///
/// - `input[i]` for every thread `i`: `Bound::new(0, Extent::Threads)`;
/// - `partial[blockIdx.x]`: `Bound::new(1, Extent::Blocks)`;
/// - `if (i < n) y[i] = …` with `n` parameter 3: `Bound::new(2, Extent::Param(3))`;
/// - `out[0]`: `Bound::new(2, Extent::Elements(1))`.
///
/// A bounded parameter must be given a buffer or view (`&buffer`,
/// `&mut buffer`), whose length the launch knows; a raw pointer there is
/// refused. A launch that breaks a bound is a [`LaunchError::BufferTooShort`]
/// naming the kernel, the parameter, the length, the extent and its value.
///
/// [`Module::kernel`]: crate::Module::kernel
/// [`DynKernel::declare`]: crate::DynKernel::declare
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

/// A declared bound, resolved against the parameter list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    bound: Bound,
    int: Option<IntParam>,
}

impl Resolved {
    pub(crate) fn bound(&self) -> Bound {
        self.bound
    }
}

/// Checks `bounds` against the declared `params` of kernel `kernel`: each
/// bounded parameter is a pointer, each `Extent::Param` an integer.
pub(crate) fn resolve(
    kernel: &str,
    params: &[Param],
    bounds: &[Bound],
) -> CudaResult<Vec<Resolved>> {
    let bad = |what: String| {
        CudaError::invalid_argument("Bound", "bound", format!("kernel '{kernel}': {what}"))
    };
    bounds
        .iter()
        .map(|b| {
            let p = params.get(b.buffer).ok_or_else(|| {
                bad(format!(
                    "a bound names parameter {} but the kernel has {} parameter(s); name a pointer parameter by its index",
                    b.buffer,
                    params.len()
                ))
            })?;
            if !p.ty.name().contains("DevicePtr<") {
                return Err(bad(format!(
                    "parameter {} is a {}, not a device pointer; bounds apply to pointer parameters",
                    label(b.buffer, &p.name),
                    p.ty.name()
                )));
            }
            let int = match b.at_least {
                Extent::Param(i) => {
                    let q = params.get(i).ok_or_else(|| {
                        bad(format!(
                            "a bound reads parameter {i} but the kernel has {} parameter(s)",
                            params.len()
                        ))
                    })?;
                    Some(IntParam::of(q).ok_or_else(|| {
                        bad(format!(
                            "a bound reads parameter {} as a length but it is a {}; use an integer parameter",
                            label(i, &q.name),
                            q.ty.name()
                        ))
                    })?)
                }
                _ => None,
            };
            Ok(Resolved { bound: *b, int })
        })
        .collect()
}

/// Checks every bound of a launch: `lens[i]` is the length (elements) of the
/// buffer given for parameter `i` (`None` for a raw pointer or a value),
/// `values[i]` points to parameter `i`'s bytes.
///
/// # Safety
///
/// Each `values[i]` of an `Extent::Param(i)` bound must point to the bytes
/// of an integer of the resolved size.
pub(crate) unsafe fn check(
    kernel: &str,
    params: &[Param],
    bounds: &[Resolved],
    cfg: &LaunchConfig,
    lens: &[Option<usize>],
    values: &[*mut std::ffi::c_void],
) -> std::result::Result<(), LaunchError> {
    for r in bounds {
        let i = r.bound.buffer;
        let needed = match (r.bound.at_least, r.int) {
            (Extent::Threads, _) => cfg
                .grid
                .product()
                .and_then(|g| cfg.block.product().and_then(|b| g.checked_mul(b)))
                .unwrap_or(u64::MAX),
            (Extent::Blocks, _) => cfg.grid.product().unwrap_or(u64::MAX),
            (Extent::Elements(n), _) => n,
            // SAFETY: the caller guarantees the parameter's bytes.
            (Extent::Param(j), Some(int)) => unsafe { int.read(values[j].cast::<u8>()) },
            (Extent::Param(_), None) => u64::MAX,
        };
        match lens.get(i).copied().flatten() {
            None => {
                return Err(LaunchError::BufferUnknown {
                    kernel: kernel.to_string(),
                    index: i,
                    name: label(i, &params[i].name),
                    extent: r.bound.at_least.to_string(),
                });
            }
            Some(len) if (len as u64) < needed => {
                let hint = match r.bound.at_least {
                    Extent::Threads | Extent::Blocks => " or launch a smaller grid",
                    Extent::Param(_) => " or pass a smaller length",
                    _ => "",
                };
                return Err(LaunchError::BufferTooShort {
                    kernel: kernel.to_string(),
                    index: i,
                    name: label(i, &params[i].name),
                    len: len as u64,
                    extent: r.bound.at_least.to_string(),
                    needed,
                    hint: format!("pass a buffer of at least {needed} elements{hint}"),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
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

    fn bounds() -> Vec<Resolved> {
        resolve(
            "coop_sum",
            &coop_sum(),
            &[
                Bound::new(0, Extent::Param(3)),
                Bound::new(1, Extent::Blocks),
                Bound::new(2, Extent::Elements(1)),
            ],
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
        unsafe { check("coop_sum", &coop_sum(), &bounds(), &cfg, &lens, &values) }
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
        // `n` larger than the input is refused too, with the value read from the argument.
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
        let b = resolve(
            "k",
            &params,
            &[
                Bound::new(0, Extent::Threads),
                Bound::new(0, Extent::Param(1)),
            ],
        )
        .unwrap();
        let mut n = -5i32;
        let values = [std::ptr::null_mut(), (&mut n as *mut i32).cast()];
        let cfg = LaunchConfig::new((4, 2, 1), (32, 2, 1));
        // SAFETY: parameter 1 points to an i32.
        let e = unsafe { check("k", &params, &b, &cfg, &[Some(511), None], &values) }.unwrap_err();
        assert!(
            matches!(e, LaunchError::BufferTooShort { needed: 512, .. }),
            "{e}"
        );
        // SAFETY: as above.
        unsafe { check("k", &params, &b, &cfg, &[Some(512), None], &values) }.unwrap();
    }

    #[test]
    fn bounds_on_values_or_with_non_integer_lengths_are_refused_at_declaration() {
        let p = coop_sum();
        let e = resolve("coop_sum", &p, &[Bound::new(3, Extent::Threads)]).unwrap_err();
        assert!(e.to_string().contains("not a device pointer"), "{e}");
        let e = resolve("coop_sum", &p, &[Bound::new(0, Extent::Param(1))]).unwrap_err();
        assert!(e.to_string().contains("use an integer parameter"), "{e}");
        let e = resolve("coop_sum", &p, &[Bound::new(9, Extent::Threads)]).unwrap_err();
        assert!(e.to_string().contains("has 4 parameter(s)"), "{e}");
    }
}
