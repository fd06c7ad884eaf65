//! What a kernel is given: the owned, reusable argument block of a
//! [`DynKernel`] ([`ArgBlock`]), filled with values one by one (scalars,
//! `#[repr(C)]` structs, device pointers, buffers), each checked against the
//! declared parameter type and laid out at the offsets the driver reports;
//! the values a block accepts ([`DynArg`]); and the key that seals the
//! argument traits. A
//! block is allocated once; setting values and relaunching it allocate
//! nothing.

use std::any::type_name;
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use super::decl::Decl;
use crate::error::{ArgError, CudaError, CudaResult};
use crate::memory::{
    BufferUse, ConstDevicePtr, DeviceBuffer, DevicePtr, DeviceRepr, DeviceView, DeviceViewMut,
};
use crate::params::{ParamRepr, ParamType, label, short_type_name};

// Sealed on purpose: the traits' methods name these types, but no one
// outside cuda-api may name (or make) them.
#[allow(unnameable_types)]
pub(crate) mod sealed {
    /// The key to the argument traits' methods: only cuda-api can make one,
    /// so no one else can implement the traits or call their methods (which
    /// would hand out device pointers detached from their borrows).
    #[derive(Clone, Copy, Debug)]
    pub struct Token(pub(crate) ());

    /// Why a value cannot be passed for a parameter: the hint of
    /// [`ArgError::Type`](crate::ArgError::Type). Returned by the sealed
    /// argument traits' hidden methods only.
    #[derive(Debug)]
    pub struct Mismatch(pub String);
}
pub(crate) use sealed::{Mismatch, Token};

/// A value that can be passed as one run-time kernel argument for as long
/// as `'a`: a [`ParamRepr`] by value, or a buffer or view by reference
/// (`&` for a read-only pointer parameter, `&mut` for a writable one).
///
/// Implemented by cuda-api only: its methods take a key no one else can
/// make, so no other type can write bytes into a pointer parameter.
pub trait DynArg<'a> {
    /// Writes the value for a parameter of type `ty` into `dst` (exactly
    /// `ty.size()` bytes), or says why it does not fit.
    #[doc(hidden)]
    fn write(&self, token: Token, ty: &ParamType, dst: &mut [u8]) -> CudaResult<(), Mismatch>;
    /// What the value is, for messages.
    #[doc(hidden)]
    fn describe(&self, token: Token) -> String;
    /// The buffer behind a pointer argument.
    #[doc(hidden)]
    fn into_buffer(self, _token: Token) -> Option<BufferUse<'a>>
    where
        Self: Sized,
    {
        None
    }
}

fn write_value<T: Copy>(v: &T, dst: &mut [u8]) {
    debug_assert_eq!(dst.len(), size_of::<T>());
    // SAFETY: `dst` holds size_of::<T>() bytes (the declared size, checked
    // equal to T's by `accepts`); the copy is bytewise, so alignment is moot.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (v as *const T).cast::<u8>(),
            dst.as_mut_ptr(),
            size_of::<T>(),
        )
    }
}

fn type_hint(ty: &ParamType) -> String {
    if ty.is_opaque() {
        format!(
            "the parameter is an opaque {} B type: set its bytes with ArgBlock::set_bytes",
            ty.size()
        )
    } else {
        format!("pass a {}", ty.name())
    }
}

impl<'a, T: ParamRepr> DynArg<'a> for T {
    fn write(&self, _: Token, ty: &ParamType, dst: &mut [u8]) -> CudaResult<(), Mismatch> {
        if ty.accepts::<T>() {
            write_value(self, dst);
            Ok(())
        } else {
            Err(Mismatch(type_hint(ty)))
        }
    }
    fn describe(&self, _: Token) -> String {
        short_type_name(type_name::<T>())
    }
}

fn write_pointer<T: 'static>(
    raw: u64,
    writable: bool,
    ty: &ParamType,
    dst: &mut [u8],
) -> CudaResult<(), Mismatch> {
    if ty.accepts::<ConstDevicePtr<T>>() || (writable && ty.accepts::<DevicePtr<T>>()) {
        write_value(&raw, dst);
        Ok(())
    } else if ty.accepts::<DevicePtr<T>>() {
        Err(Mismatch(
            "the kernel may write through this parameter: pass the buffer as `&mut`".into(),
        ))
    } else {
        Err(Mismatch(type_hint(ty)))
    }
}

macro_rules! buffer_arg {
    ($([$a:lifetime $(, $lt:lifetime)?] $arg:ty, $what:literal, $writable:expr, $addr:ident;)*) => {$(
        impl<$a, $($lt,)? T: DeviceRepr> DynArg<$a> for $arg {
            fn write(&self, _: Token, ty: &ParamType, dst: &mut [u8]) -> CudaResult<(), Mismatch> {
                write_pointer::<T>(self.$addr(), $writable, ty, dst)
            }
            fn describe(&self, _: Token) -> String {
                format!(concat!($what, "<{}>"), short_type_name(type_name::<T>()))
            }
            fn into_buffer(self, _: Token) -> Option<BufferUse<$a>> {
                Some(self.buffer_use())
            }
        }
    )*};
}

buffer_arg! {
    ['a] &'a DeviceBuffer<T>, "&DeviceBuffer", false, device_address;
    ['a] &'a mut DeviceBuffer<T>, "&mut DeviceBuffer", true, device_address;
    ['a, 'v] &'a DeviceView<'v, T>, "&DeviceView", false, addr;
    ['a, 'v] &'a mut DeviceViewMut<'v, T>, "&mut DeviceViewMut", true, addr;
}

/// A copy of an [`ArgBlock`]'s parameter space with the pointers the driver
/// reads (`kernelParams`), for a graph node: the pointers address the
/// copy's own heap storage, which moves with it.
pub(crate) struct ParamCopy {
    storage: Box<[u128]>,
    ptrs: Box<[*mut c_void]>,
}

// SAFETY: the pointers address the copy's own heap storage, which moves with it.
unsafe impl Send for ParamCopy {}

impl ParamCopy {
    /// The pointer array, for `CUDA_KERNEL_NODE_PARAMS::kernelParams`.
    pub(crate) fn ptrs(&mut self) -> *mut *mut c_void {
        let _ = &self.storage;
        self.ptrs.as_mut_ptr()
    }
}

/// The arguments of one kernel, laid out as its parameter space, owned and
/// reusable. Values borrowed by reference (buffers) must live for `'a`;
/// values pushed by copy (numbers, structs, device pointers) make a
/// `ArgBlock<'static>` that can be stored and relaunched.
pub struct ArgBlock<'a> {
    decl: Arc<Decl>,
    storage: Box<[u128]>,
    pub(super) ptrs: Box<[*mut c_void]>,
    set: Box<[bool]>,
    /// The buffer behind each argument that has one.
    pub(super) uses: Box<[Option<BufferUse<'a>>]>,
    /// Their lengths, for the bound checks.
    pub(super) lens: Box<[Option<usize>]>,
    unset: usize,
    next: usize,
    _borrow: PhantomData<&'a ()>,
}

// SAFETY: the pointers address the block's own heap storage, which moves with it.
unsafe impl Send for ArgBlock<'_> {}
// SAFETY: shared access only reads the storage.
unsafe impl Sync for ArgBlock<'_> {}

impl fmt::Debug for ArgBlock<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArgBlock")
            .field("kernel", &self.decl.name)
            .field("params", &self.set.len())
            .field("unset", &self.unset)
            .finish()
    }
}

impl<'a> ArgBlock<'a> {
    pub(super) fn new(decl: Arc<Decl>) -> Self {
        let words = decl.space.div_ceil(16).max(1);
        let mut storage = vec![0u128; words].into_boxed_slice();
        let base = storage.as_mut_ptr().cast::<u8>();
        let ptrs = decl
            .layout
            .iter()
            // SAFETY: every slot lies inside the storage (offset + size <= space).
            .map(|s| unsafe { base.add(s.offset) }.cast::<c_void>())
            .collect();
        ArgBlock {
            storage,
            ptrs,
            set: vec![false; decl.params.len()].into_boxed_slice(),
            uses: vec![None; decl.params.len()].into_boxed_slice(),
            lens: vec![None; decl.params.len()].into_boxed_slice(),
            unset: decl.params.len(),
            next: 0,
            decl,
            _borrow: PhantomData,
        }
    }

    /// The kernel's name.
    pub fn kernel(&self) -> &str {
        &self.decl.name
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether the kernel takes no parameters.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Whether every parameter has a value.
    pub fn is_complete(&self) -> bool {
        self.unset == 0
    }

    fn slot_bytes(&mut self, index: usize) -> &mut [u8] {
        let slot = self.decl.layout[index];
        // SAFETY: the slot lies inside the storage (checked when the block was made).
        unsafe {
            std::slice::from_raw_parts_mut(
                self.storage.as_mut_ptr().cast::<u8>().add(slot.offset),
                slot.size,
            )
        }
    }

    fn mark(&mut self, index: usize) {
        if !self.set[index] {
            self.set[index] = true;
            self.unset -= 1;
        }
    }

    fn check_index(&self, index: usize) -> CudaResult<()> {
        if index < self.set.len() {
            Ok(())
        } else {
            Err(ArgError::NoSuchIndex {
                kernel: self.decl.name.clone(),
                index,
                count: self.set.len(),
            }
            .into())
        }
    }

    /// Sets the next parameter (after the last one pushed or set by index).
    ///
    /// # Errors
    ///
    /// [`ArgError::TooMany`] (in [`CudaError::Argument`]) when every parameter
    /// has already been pushed; otherwise as for [`ArgBlock::set`].
    pub fn push(&mut self, value: impl DynArg<'a>) -> CudaResult<&mut Self> {
        if self.next >= self.set.len() {
            return Err(ArgError::TooMany {
                kernel: self.decl.name.clone(),
                count: self.set.len(),
            }
            .into());
        }
        self.set(self.next, value)
    }

    /// Sets parameter `index`.
    ///
    /// # Errors
    ///
    /// [`ArgError::NoSuchIndex`] for an index past the last parameter, or
    /// [`ArgError::Type`] when the value does not fit the declared parameter
    /// type (the message says what to pass instead), both in
    /// [`CudaError::Argument`].
    pub fn set(&mut self, index: usize, value: impl DynArg<'a>) -> CudaResult<&mut Self> {
        self.check_index(index)?;
        let decl = self.decl.clone();
        let p = &decl.params[index];
        if let Err(Mismatch(hint)) = value.write(Token(()), &p.ty, self.slot_bytes(index)) {
            return Err(CudaError::from(ArgError::Type {
                kernel: decl.name.clone(),
                index,
                name: label(index, &p.name),
                expected: p.ty.name().to_string(),
                given: value.describe(Token(())),
                hint,
            }));
        }
        let used = value.into_buffer(Token(()));
        self.lens[index] = used.map(|b| b.len);
        self.uses[index] = used;
        self.mark(index);
        self.next = index + 1;
        Ok(self)
    }

    /// The index of the parameter called `name`.
    ///
    /// # Errors
    ///
    /// [`ArgError::NoSuchName`] (in [`CudaError::Argument`]) listing the
    /// parameters the kernel has.
    pub fn index_of(&self, name: &str) -> CudaResult<usize> {
        self.decl
            .params
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| {
                ArgError::NoSuchName {
                    kernel: self.decl.name.clone(),
                    name: name.to_string(),
                    known: self
                        .decl
                        .params
                        .iter()
                        .enumerate()
                        .map(|(i, p)| label(i, &p.name))
                        .collect(),
                }
                .into()
            })
    }

    /// Sets the parameter called `name`.
    ///
    /// # Errors
    ///
    /// As for [`ArgBlock::index_of`] and [`ArgBlock::set`].
    pub fn set_by_name(&mut self, name: &str, value: impl DynArg<'a>) -> CudaResult<&mut Self> {
        let index = self.index_of(name)?;
        self.set(index, value)
    }

    /// Sets parameter `index` to raw bytes (for opaque struct parameters
    /// known only at run time); only the size is checked.
    ///
    /// # Errors
    ///
    /// [`ArgError::NoSuchIndex`] for an index past the last parameter, or
    /// [`ArgError::Size`] when `bytes` is not the parameter's size, both in
    /// [`CudaError::Argument`].
    ///
    /// # Safety
    ///
    /// The bytes must be a valid value of the parameter's C type, and any
    /// device addresses inside must stay valid for every launch of the block
    /// and, when the block is launched into a graph ([`crate::Capture::launch`],
    /// [`crate::CudaGraphExec::update_kernel`]), for as long as the graph or
    /// executable graph holding the copy may run.
    pub unsafe fn set_bytes(&mut self, index: usize, bytes: &[u8]) -> CudaResult<&mut Self> {
        self.check_index(index)?;
        let slot = self.decl.layout[index];
        if bytes.len() != slot.size {
            return Err(ArgError::Size {
                kernel: self.decl.name.clone(),
                index,
                name: label(index, &self.decl.params[index].name),
                expected: slot.size,
                given: bytes.len(),
            }
            .into());
        }
        self.slot_bytes(index).copy_from_slice(bytes);
        self.uses[index] = None;
        self.lens[index] = None;
        self.mark(index);
        self.next = index + 1;
        Ok(self)
    }

    /// The bytes of parameter `index` as set so far.
    ///
    /// # Errors
    ///
    /// [`ArgError::NoSuchIndex`] (in [`CudaError::Argument`]) for an index past
    /// the last parameter.
    pub fn bytes(&self, index: usize) -> CudaResult<&[u8]> {
        self.check_index(index)?;
        let slot = self.decl.layout[index];
        // SAFETY: the slot lies inside the storage.
        Ok(unsafe {
            std::slice::from_raw_parts(
                self.storage.as_ptr().cast::<u8>().add(slot.offset),
                slot.size,
            )
        })
    }

    /// The allocations behind the block's buffer arguments.
    pub(crate) fn allocations(&self) -> impl Iterator<Item = &'a crate::memory::Allocation> + '_ {
        self.uses.iter().filter_map(|b| b.and_then(|b| b.alloc))
    }

    /// A copy of the parameter space, and one pointer per parameter into
    /// the copy (the `kernelParams` array the driver reads).
    pub(crate) fn copy_params(&self) -> ParamCopy {
        let mut storage = self.storage.clone();
        let base = storage.as_mut_ptr().cast::<u8>();
        let ptrs = self
            .decl
            .layout
            .iter()
            // SAFETY: every slot lies inside the storage (offset + size <= space).
            .map(|s| unsafe { base.add(s.offset) }.cast::<c_void>())
            .collect();
        ParamCopy { storage, ptrs }
    }

    pub(super) fn ready_for(&self, decl: &Arc<Decl>) -> CudaResult<()> {
        if self.decl.id != decl.id {
            return Err(ArgError::WrongKernel {
                kernel: decl.name.clone(),
                block_kernel: self.decl.name.clone(),
            }
            .into());
        }
        if self.unset > 0 {
            let index = self.set.iter().position(|s| !s).unwrap_or(0);
            return Err(ArgError::Missing {
                kernel: decl.name.clone(),
                index,
                name: label(index, &decl.params[index].name),
                missing: self.unset,
            }
            .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{Param, ParamSlot, check_params};

    /// saxpy(float a, const float* x, float* y, unsigned n) as the driver lays it out.
    fn saxpy() -> ArgBlock<'static> {
        let params: Vec<Param> = vec![
            Param::of::<f32>("a"),
            Param::of::<ConstDevicePtr<f32>>("x"),
            Param::of::<DevicePtr<f32>>("y"),
            Param::of::<u32>("n"),
        ];
        let layout: Vec<ParamSlot> = [(0, 4), (8, 8), (16, 8), (24, 4)]
            .iter()
            .map(|&(offset, size)| ParamSlot { offset, size })
            .collect();
        check_params("saxpy", &params, &layout).unwrap();
        ArgBlock::new(Arc::new(Decl {
            id: 7,
            name: "saxpy".into(),
            params: params.into(),
            layout: layout.into(),
            space: 28,
            rules: Default::default(),
        }))
    }

    #[test]
    fn values_land_at_the_driver_offsets() {
        let mut b = saxpy();
        assert!(!b.is_complete());
        // SAFETY: made-up addresses in a test block that is never launched.
        let (x, y) = unsafe {
            (
                DevicePtr::<f32>::from_raw(0x1000),
                DevicePtr::<f32>::from_raw(0x2000),
            )
        };
        b.push(2.5f32)
            .unwrap()
            .push(x)
            .unwrap()
            .push(y)
            .unwrap()
            .push(9u32)
            .unwrap();
        assert!(b.is_complete());
        assert_eq!(b.bytes(0).unwrap(), 2.5f32.to_ne_bytes());
        assert_eq!(b.bytes(1).unwrap(), 0x1000u64.to_ne_bytes());
        assert_eq!(b.bytes(2).unwrap(), 0x2000u64.to_ne_bytes());
        assert_eq!(b.bytes(3).unwrap(), 9u32.to_ne_bytes());
        // The pointer array the driver reads points at those offsets.
        let base = b.storage.as_ptr() as usize;
        let offsets: Vec<usize> = b.ptrs.iter().map(|p| *p as usize - base).collect();
        assert_eq!(offsets, [0, 8, 16, 24]);
        b.set_by_name("n", 11u32).unwrap();
        assert_eq!(b.bytes(3).unwrap(), 11u32.to_ne_bytes());
        assert_eq!(b.ready_for(&b.decl.clone()), Ok(()));
    }

    #[test]
    fn every_argument_error_names_kernel_parameter_and_remedy() {
        let mut b = saxpy();
        let e = b.push(2.5f64).unwrap_err();
        insta::assert_snapshot!("wrong_type", e.to_string());
        // SAFETY: made-up addresses, refused before anything is written.
        let (p8u, p8f) = unsafe {
            (
                ConstDevicePtr::<u32>::from_raw(8),
                ConstDevicePtr::<f32>::from_raw(8),
            )
        };
        let e = b.set(1, p8u).unwrap_err();
        insta::assert_snapshot!("wrong_element", e.to_string());
        let e = b.set(2, p8f).unwrap_err();
        insta::assert_snapshot!("read_only_for_writable", e.to_string());
        let e = b.set(4, 1u32).unwrap_err();
        insta::assert_snapshot!("no_such_index", e.to_string());
        let e = b.set_by_name("z", 1u32).unwrap_err();
        insta::assert_snapshot!("no_such_name", e.to_string());
        // SAFETY: the size is checked and refused before anything is written.
        let e = unsafe { b.set_bytes(3, &[0u8; 8]) }.unwrap_err();
        insta::assert_snapshot!("raw_size", e.to_string());
        b.set(0, 1.0f32).unwrap();
        let e = b.ready_for(&b.decl.clone()).unwrap_err();
        insta::assert_snapshot!("missing", e.to_string());
        let other = saxpy();
        let mut foreign = Decl {
            id: 8,
            name: "other".into(),
            params: other.decl.params.clone(),
            layout: other.decl.layout.clone(),
            space: 28,
            rules: Default::default(),
        };
        foreign.name = "scale".into();
        let e = b.ready_for(&Arc::new(foreign)).unwrap_err();
        insta::assert_snapshot!("wrong_kernel", e.to_string());
        let mut full = saxpy();
        for i in 0..4 {
            // SAFETY: plain numbers for every slot of a test block that is never launched.
            unsafe {
                full.set_bytes(i, &vec![0u8; full.decl.layout[i].size])
                    .unwrap()
            };
        }
        let e = full.push(1u32).unwrap_err();
        insta::assert_snapshot!("too_many", e.to_string());
    }

    #[test]
    fn read_only_pointer_parameters_take_writable_ones() {
        let mut b = saxpy();
        // SAFETY: a made-up address in a test block that is never launched.
        b.set(1, unsafe { DevicePtr::<f32>::from_raw(0x40) })
            .unwrap();
        assert_eq!(b.bytes(1).unwrap(), 0x40u64.to_ne_bytes());
    }
}
