//! What the last immediate positional launch of a kernel checked, kept with
//! the argument block it filled ([`TypedBlock`]), so that the next launch
//! with the same arrays, domain, device, stream context and access mode
//! skips the checks whose answer cannot have changed.
//!
//! A typed launcher in a simulation loop launches the same kernel with the
//! same arrays again and again; only its scalars change. Every check of an
//! array argument (dtype, dimensions, where it lives, the kernel's access
//! rules against its shape and the launch domain) is a function of facts
//! that never change for one [`Array`] value: its storage (an allocation's
//! memory kind, owner and context are fixed when it is made), its offset,
//! dtype, dimensions, shape, strides, device and gradient. So is the
//! argument's `array_t`. [`ArrayKey`] records those facts; an argument that
//! matches its key was already checked and its bytes are already in the
//! block. Scalars are written on every launch, their sizes compared. So
//! are by-value structs that hold no arrays: their name, size and
//! whether their maker vouched for them are compared, and their bytes too
//! when an access rule reads an array's extents out of them.
//!
//! The key holds a [`Weak`] reference to the storage: it keeps only the
//! storage's reference-count header alive (never its memory), so no other
//! storage can take that address while the key exists, and comparing
//! addresses cannot mistake a new array for a freed one. Peer access, the
//! one global fact the checks read, is only ever enabled, never disabled, so
//! a launch it allowed stays allowed.

use std::sync::{Arc, Weak};

use cuda_api::{ArgBlock, CheckedConfig, LaunchConfig};

use super::domain;
use crate::abi::DType;
use crate::array::{AccessMode, Array, Storage};
use crate::device::Device;

/// The facts of one array argument its checks and its `array_t` depend on.
pub(crate) struct ArrayKey {
    storage: Weak<Storage>,
    offset: usize,
    dtype: &'static DType,
    shape: [usize; domain::MAX_DIMS],
    strides: [isize; domain::MAX_DIMS],
    ndim: usize,
    device: Device,
    /// The gradient's storage and offset (its address goes into `array_t`).
    grad: Option<(Weak<Storage>, usize)>,
    /// Warp's `retain_grad` (a flag of the `array_t`).
    retain_grad: bool,
}

impl ArrayKey {
    fn of(a: &Array) -> ArrayKey {
        let mut shape = [0; domain::MAX_DIMS];
        let mut strides = [0; domain::MAX_DIMS];
        let n = a.ndim().min(domain::MAX_DIMS);
        shape[..n].copy_from_slice(&a.shape()[..n]);
        strides[..n].copy_from_slice(&a.strides()[..n]);
        ArrayKey {
            storage: Arc::downgrade(a.storage()),
            offset: a.offset(),
            dtype: a.dtype(),
            shape,
            strides,
            ndim: a.ndim(),
            device: a.device(),
            grad: a.grad().map(|g| (Arc::downgrade(g.storage()), g.offset())),
            retain_grad: a.retain_grad(),
        }
    }

    /// Whether `a` is the array this key was made from, as far as a launch
    /// can tell (the same storage, view and gradient).
    fn matches(&self, a: &Array) -> bool {
        let n = self.ndim;
        let (shape, strides) = (a.shape(), a.strides());
        if !std::ptr::eq(Weak::as_ptr(&self.storage), Arc::as_ptr(a.storage()))
            || self.offset != a.offset()
            || !std::ptr::eq(self.dtype, a.dtype())
            || n != shape.len()
            || n != strides.len()
            || self.device != a.device()
            || self.retain_grad != a.retain_grad()
        {
            return false;
        }
        // Element by element: at most four, no call to a memory compare.
        for i in 0..n {
            if self.shape[i] != shape[i] || self.strides[i] != strides[i] {
                return false;
            }
        }
        match (&self.grad, a.grad()) {
            (None, None) => true,
            (Some((s, o)), Some(g)) => {
                std::ptr::eq(Weak::as_ptr(s), Arc::as_ptr(g.storage())) && *o == g.offset()
            }
            _ => false,
        }
    }
}

/// One argument slot of a remembered launch.
pub(crate) enum Slot {
    /// An array that passed every check, its `array_t` in the block.
    Array(ArrayKey),
    /// A scalar, vector or matrix of this many bytes (written every launch).
    Value(usize),
    /// Warp's `None` for an array: a null `array_t` in the block.
    Null,
    /// A by-value struct holding no arrays (written every launch).
    Struct(StructKey),
}

/// The facts a by-value struct argument's checks depend on: its name and
/// size (matched against the parameter's struct), whether it was vouched
/// for, and its bytes when the kernel's access rules read extents out of
/// them (an array field's `array_t`).
pub(crate) struct StructKey {
    name: Box<str>,
    len: usize,
    vouched: bool,
    bytes: Option<Box<[u8]>>,
}

impl StructKey {
    fn matches(&self, s: &super::bind::StructRef<'_>) -> bool {
        s.held().is_empty()
            && s.bytes().len() == self.len
            && s.vouched() == self.vouched
            && *s.name() == *self.name
            && self.bytes.as_deref().is_none_or(|b| b == s.bytes())
    }
}

/// A positional launch that passed every check and was queued.
pub(crate) struct Memo {
    dim: [i64; domain::MAX_DIMS],
    dims: usize,
    how: How,
    device: Device,
    mode: AccessMode,
    /// The address of the stream's context (the device's primary one,
    /// checked; retained for the whole process, so its handle is never reused).
    ctx: usize,
    /// The launch shape the plan gave (a domain of size 0 is not kept).
    cfg: LaunchConfig,
    /// `cfg` checked once for the kernel in the stream's context
    /// ([`cuda_api::DynKernel::check_config`]): a remembered launch does
    /// not check it again.
    checked: Option<CheckedConfig>,
    slots: Vec<Slot>,
}

impl Memo {
    /// The memo of a launch `q` that passed every check, its slots kept in
    /// `slots` (emptied first). `rules_read(i)` says whether an access
    /// rule reads extents out of argument `i`'s struct bytes. Launches
    /// with a struct argument holding arrays are not remembered: `Err`
    /// gives the slots back.
    pub(crate) fn of(
        q: &Query<'_, '_>,
        cfg: LaunchConfig,
        checked: Option<CheckedConfig>,
        mut slots: Vec<Slot>,
        rules_read: impl Fn(usize) -> bool,
    ) -> Result<Memo, Vec<Slot>> {
        use super::bind::TypedArg;
        slots.clear();
        if q.dim.len() > domain::MAX_DIMS {
            return Err(slots);
        }
        for (i, a) in q.args.iter().enumerate() {
            match a {
                TypedArg::Array(a) => slots.push(Slot::Array(ArrayKey::of(a))),
                TypedArg::Null => slots.push(Slot::Null),
                TypedArg::Value(b) => slots.push(Slot::Value(b.len())),
                TypedArg::Struct(s) if s.held().is_empty() => slots.push(Slot::Struct(StructKey {
                    name: s.name().into(),
                    len: s.bytes().len(),
                    vouched: s.vouched(),
                    bytes: rules_read(i).then(|| s.bytes().into()),
                })),
                TypedArg::Struct(_) => {
                    slots.clear();
                    return Err(slots);
                }
            }
        }
        let mut dim = [0; domain::MAX_DIMS];
        dim[..q.dim.len()].copy_from_slice(q.dim);
        Ok(Memo {
            dim,
            dims: q.dim.len(),
            how: q.how,
            device: q.device,
            mode: q.mode,
            ctx: q.ctx,
            cfg,
            checked,
            slots,
        })
    }

    /// Whether `q` has exactly this launch's arrays, value sizes, domain,
    /// device, access mode and stream context.
    pub(crate) fn matches(&self, q: &Query<'_, '_>) -> bool {
        use super::bind::TypedArg;
        if self.dims != q.dim.len()
            || self.how != q.how
            || self.device != q.device
            || self.mode != q.mode
            || self.ctx != q.ctx
            || self.slots.len() != q.args.len()
        {
            return false;
        }
        for (i, &e) in q.dim.iter().enumerate() {
            if self.dim[i] != e {
                return false;
            }
        }
        self.slots.iter().zip(q.args).all(|(s, a)| match (s, a) {
            (Slot::Array(k), TypedArg::Array(a)) => k.matches(a),
            (Slot::Null, TypedArg::Null) => true,
            (Slot::Value(n), TypedArg::Value(b)) => b.len() == *n,
            (Slot::Struct(k), TypedArg::Struct(s)) => k.matches(s),
            _ => false,
        })
    }
}

/// How a positional launch treats its domain and the kernel's access
/// rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct How {
    /// `wp.launch_tiled`: the block size is appended to the domain.
    pub tiled: bool,
    /// The access rules are skipped (the caller's promise).
    pub unchecked: bool,
}

impl How {
    /// A checked launch over the domain as given.
    pub const PLAIN: How = How {
        tiled: false,
        unchecked: false,
    };
    /// A checked tiled launch.
    pub const TILED: How = How {
        tiled: true,
        unchecked: false,
    };
    /// A launch without the access rules.
    pub const UNCHECKED: How = How {
        tiled: false,
        unchecked: true,
    };
}

/// The launch facts a memo is compared with.
pub(crate) struct Query<'q, 'a> {
    pub dim: &'q [i64],
    pub how: How,
    pub device: Device,
    pub mode: AccessMode,
    pub ctx: usize,
    pub args: &'q [super::bind::TypedArg<'a>],
}

/// An argument block for positional launches, with what its last launch
/// checked (`None` until a launch succeeds, and after one that changed it
/// and failed).
pub(crate) struct TypedBlock {
    pub block: ArgBlock<'static>,
    pub memo: Option<Memo>,
    /// Storage for the next memo's slots (reused: no allocation once the
    /// kernel's parameter count was seen).
    spare_slots: Vec<Slot>,
}

impl TypedBlock {
    pub(crate) fn new(block: ArgBlock<'static>) -> TypedBlock {
        TypedBlock {
            block,
            memo: None,
            spare_slots: Vec::new(),
        }
    }

    /// The launch shape of the remembered launch, when there is one on
    /// `device` (the stream is resolved only then: the device's default
    /// stream is known to exist).
    pub(crate) fn remembered(&self, device: Device) -> Option<LaunchConfig> {
        self.memo
            .as_ref()
            .filter(|m| m.device == device)
            .map(|m| m.cfg)
    }

    /// The remembered launch's configuration as checked for its kernel
    /// and context, if it was ([`Memo`]'s `checked`).
    pub(crate) fn checked(&self) -> Option<&CheckedConfig> {
        self.memo.as_ref().and_then(|m| m.checked.as_ref())
    }

    /// Whether the remembered launch had exactly these arrays, value
    /// sizes, domain, device, access mode and stream context (so every
    /// check of the arrays and the domain passed for them, and their bytes
    /// are in the block).
    pub(crate) fn remembers(&self, q: &Query<'_, '_>) -> bool {
        self.memo.as_ref().is_some_and(|m| m.matches(q))
    }

    /// Forgets the remembered launch (before the block is rewritten).
    pub(crate) fn forget(&mut self) {
        if let Some(mut m) = self.memo.take() {
            m.slots.clear();
            self.spare_slots = m.slots;
        }
    }

    /// Remembers a launch that passed every check and was queued with the
    /// launch shape `cfg` (`rules_read` as for [`Memo::of`]).
    pub(crate) fn remember(
        &mut self,
        q: &Query<'_, '_>,
        cfg: LaunchConfig,
        checked: Option<CheckedConfig>,
        rules_read: impl Fn(usize) -> bool,
    ) {
        self.forget();
        let slots = std::mem::take(&mut self.spare_slots);
        match Memo::of(q, cfg, checked, slots, rules_read) {
            Ok(m) => self.memo = Some(m),
            Err(slots) => self.spare_slots = slots,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::bind::TypedArg;
    use cuda_api::LaunchConfig;

    fn cfg() -> LaunchConfig {
        LaunchConfig::new((4, 1, 1), (256, 1, 1))
    }

    fn query<'q, 'a>(dim: &'q [i64], args: &'q [TypedArg<'a>]) -> Query<'q, 'a> {
        Query {
            dim,
            how: How::PLAIN,
            device: Device::Cuda(0),
            mode: AccessMode::Checked,
            ctx: 0x1000,
            args,
        }
    }

    fn memo(q: &Query<'_, '_>) -> Memo {
        match Memo::of(q, cfg(), None, Vec::new(), |_| false) {
            Ok(m) => m,
            Err(_) => panic!("a launch of arrays and values is remembered"),
        }
    }

    #[test]
    fn the_same_arrays_domain_and_value_sizes_match() -> crate::Result<()> {
        let x = Array::zeros::<f32>("cpu", &[1024])?;
        let y = Array::zeros::<f32>("cpu", &[1024])?;
        let (a, b) = (2.0f32, 3.0f32);
        let m = memo(&query(
            &[1024],
            &[TypedArg::value(&a), (&x).into(), (&y).into()],
        ));
        // Another value of the same size, and a clone of each array (the
        // same storage and view), still match.
        let (x2, y2) = (x.clone(), y.clone());
        assert!(m.matches(&query(
            &[1024],
            &[TypedArg::value(&b), (&x2).into(), (&y2).into()]
        )));
        Ok(())
    }

    #[test]
    fn anything_a_check_reads_breaks_the_match() -> crate::Result<()> {
        let x = Array::zeros::<f32>("cpu", &[1024])?;
        let y = Array::zeros::<f32>("cpu", &[1024])?;
        let a = 2.0f32;
        let d = 2.0f64;
        let args = [TypedArg::value(&a), (&x).into(), (&y).into()];
        let m = memo(&query(&[1024], &args));
        let other = |q: Query<'_, '_>| assert!(!m.matches(&q));
        // Another domain, tiling, device, access mode or stream context.
        other(query(&[1025], &args));
        other(query(&[1024, 1], &args));
        other(Query {
            how: How::TILED,
            ..query(&[1024], &args)
        });
        other(Query {
            how: How::UNCHECKED,
            ..query(&[1024], &args)
        });
        other(Query {
            device: Device::Cuda(1),
            ..query(&[1024], &args)
        });
        other(Query {
            mode: AccessMode::Relaxed,
            ..query(&[1024], &args)
        });
        other(Query {
            ctx: 0x2000,
            ..query(&[1024], &args)
        });
        // Another value size, swapped or other arrays, views of the same
        // memory (offset, shape, strides), a gradient, another count.
        other(query(
            &[1024],
            &[TypedArg::value(&d), (&x).into(), (&y).into()],
        ));
        other(query(
            &[1024],
            &[TypedArg::value(&a), (&y).into(), (&x).into()],
        ));
        let z = Array::zeros::<f32>("cpu", &[1024])?;
        other(query(
            &[1024],
            &[TypedArg::value(&a), (&z).into(), (&y).into()],
        ));
        let tail = x.slice(0, 1..1024)?;
        other(query(
            &[1024],
            &[TypedArg::value(&a), (&tail).into(), (&y).into()],
        ));
        let head = x.slice(0, 0..512)?;
        other(query(
            &[1024],
            &[TypedArg::value(&a), (&head).into(), (&y).into()],
        ));
        let strided = x.slice_step(0, 0..1024, 2)?;
        other(query(
            &[1024],
            &[TypedArg::value(&a), (&strided).into(), (&y).into()],
        ));
        let square = x.reshape(&[32, 32])?;
        other(query(
            &[1024],
            &[TypedArg::value(&a), (&square).into(), (&y).into()],
        ));
        let with_grad = x.clone().with_grad()?;
        other(query(
            &[1024],
            &[TypedArg::value(&a), (&with_grad).into(), (&y).into()],
        ));
        other(query(&[1024], &args[..2]));
        // Warp's retain_grad is a flag of the array_t the block holds.
        let m = memo(&query(
            &[1024],
            &[TypedArg::value(&a), (&with_grad).into(), (&y).into()],
        ));
        let retained = with_grad.clone().with_retain_grad(true)?;
        assert!(!m.matches(&query(
            &[1024],
            &[TypedArg::value(&a), (&retained).into(), (&y).into()],
        )));
        Ok(())
    }

    #[test]
    fn a_new_array_never_matches_a_freed_one() -> crate::Result<()> {
        let y = Array::zeros::<f32>("cpu", &[64])?;
        let x = Array::zeros::<f32>("cpu", &[64])?;
        let m = memo(&query(&[64], &[(&x).into(), (&y).into()]));
        let old = Arc::as_ptr(x.storage());
        drop(x);
        // The key's weak reference keeps the storage's header allocated,
        // so no new storage can take its address.
        for _ in 0..64 {
            let x = Array::zeros::<f32>("cpu", &[64])?;
            assert_ne!(Arc::as_ptr(x.storage()), old);
            assert!(!m.matches(&query(&[64], &[(&x).into(), (&y).into()])));
        }
        Ok(())
    }

    #[test]
    fn by_value_structs_are_remembered_by_name_size_and_voucher() -> crate::Result<()> {
        let x = Array::zeros::<f32>("cpu", &[8])?;
        // SAFETY: the bytes are only compared, never launched.
        let s = unsafe { crate::StructValue::from_bytes("Params", &[0u8; 4]) };
        let args = [(&x).into(), (&s).into()];
        let m = match Memo::of(&query(&[8], &args), cfg(), None, Vec::new(), |_| false) {
            Ok(m) => m,
            Err(_) => panic!("a struct without arrays is remembered"),
        };
        // Other bytes of the same struct match: no rule reads them.
        // SAFETY: as above.
        let other = unsafe { crate::StructValue::from_bytes("Params", &[7u8; 4]) };
        assert!(m.matches(&query(&[8], &[(&x).into(), (&other).into()])));
        // Another name, another size, or not vouched for: checked again.
        // SAFETY: as above.
        let renamed = unsafe { crate::StructValue::from_bytes("Other", &[0u8; 4]) };
        assert!(!m.matches(&query(&[8], &[(&x).into(), (&renamed).into()])));
        // SAFETY: as above.
        let longer = unsafe { crate::StructValue::from_bytes("Params", &[0u8; 8]) };
        assert!(!m.matches(&query(&[8], &[(&x).into(), (&longer).into()])));
        let st = Arc::new(crate::signature::StructType::new(
            "Params",
            vec![(
                "v".into(),
                crate::signature::ParamKind::Value(DType::FLOAT32),
            )],
        ));
        let plain = crate::StructValue::with_arrays(&st, vec![0; 4], Vec::new())?;
        assert!(!m.matches(&query(&[8], &[(&x).into(), (&plain).into()])));
        // A value in place of the struct: checked again.
        let v = [0u8; 4];
        assert!(!m.matches(&query(&[8], &[(&x).into(), TypedArg::Value(&v)])));
        Ok(())
    }

    #[test]
    fn struct_bytes_an_access_rule_reads_must_be_the_same() -> crate::Result<()> {
        let x = Array::zeros::<f32>("cpu", &[8])?;
        // SAFETY: the bytes are only compared, never launched.
        let s = unsafe { crate::StructValue::from_bytes("Params", &[1u8; 4]) };
        let args = [(&x).into(), (&s).into()];
        let m = match Memo::of(&query(&[8], &args), cfg(), None, Vec::new(), |i| i == 1) {
            Ok(m) => m,
            Err(_) => panic!("a struct without arrays is remembered"),
        };
        assert!(m.matches(&query(&[8], &args)));
        // SAFETY: as above.
        let other = unsafe { crate::StructValue::from_bytes("Params", &[2u8; 4]) };
        assert!(!m.matches(&query(&[8], &[(&x).into(), (&other).into()])));
        Ok(())
    }

    #[test]
    fn structs_holding_arrays_are_not_remembered() -> crate::Result<()> {
        let x = Array::zeros::<f32>("cpu", &[8])?;
        let st = Arc::new(crate::signature::StructType::new(
            "Holder",
            vec![(
                "data".into(),
                crate::signature::ParamKind::Array {
                    dtype: DType::FLOAT32,
                    ndim: None,
                },
            )],
        ));
        let s = crate::StructValue::with_arrays(&st, vec![0; st.size], vec![x.clone()])?;
        let args = [(&x).into(), (&s).into()];
        assert!(Memo::of(&query(&[8], &args), cfg(), None, Vec::new(), |_| false).is_err());
        Ok(())
    }
}
