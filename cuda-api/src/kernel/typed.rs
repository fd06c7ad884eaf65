//! Typed kernels: a tuple of [`ParamRepr`] types declared once (the one
//! `unsafe` promise), checked against the driver's layout like a run-time
//! declaration, then launched safely with values or buffers. Tuples of up to
//! [`MAX_TYPED_PARAMS`] parameters are supported; beyond that, or when the
//! parameters are known only at run time, use [`DynKernel`] and an
//! [`ArgBlock`](crate::ArgBlock).

use std::any::type_name;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use super::args::Token;
use super::bounds::Extent;
use super::dynamic::DynKernel;
use crate::context::Context;
use crate::error::CudaResult;
use crate::function::Function;
use crate::launch::{Dim3, LaunchConfig, PotentialBlockSize};
use crate::memory::{
    BufferUse, ConstDevicePtr, DeviceBuffer, DevicePtr, DeviceRepr, DeviceView, DeviceViewMut,
};
use crate::params::{Param, ParamRepr, ParamType};
use crate::stream::Stream;

/// Most parameters a typed tuple signature may have (a Warp backward kernel
/// with 20 forward parameters takes 40).
pub const MAX_TYPED_PARAMS: usize = 48;

/// A value that can be passed for a parameter of type `P`: the value itself;
/// `&DeviceBuffer<T>` (or a view) for a read-only `ConstDevicePtr<T>`;
/// `&mut DeviceBuffer<T>` (or a writable view) for a `DevicePtr<T>`.
/// Implemented by cuda-api only.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter of type `{P}`",
    label = "not accepted for a `{P}` parameter",
    note = "a writable `DevicePtr<T>` parameter takes `&mut DeviceBuffer<T>`; a read-only `ConstDevicePtr<T>` takes `&DeviceBuffer<T>` or `&mut DeviceBuffer<T>`; other parameters take a value of their own type"
)]
pub trait KernelArg<P: ParamRepr> {
    /// The parameter value.
    #[doc(hidden)]
    fn to_param(&self, token: Token) -> P;
    /// The buffer behind a pointer argument.
    #[doc(hidden)]
    fn buffer(&self, _token: Token) -> Option<BufferUse<'_>> {
        None
    }
}

impl<P: ParamRepr> KernelArg<P> for P {
    #[inline]
    fn to_param(&self, _: Token) -> P {
        *self
    }
}

macro_rules! buffer_arg {
    ($([$($lt:lifetime)?] $arg:ty => $param:ident via $addr:ident;)*) => {$(
        impl<$($lt,)? T: DeviceRepr> KernelArg<$param<T>> for $arg {
            #[inline]
            fn to_param(&self, _: Token) -> $param<T> {
                // SAFETY: the address of a borrowed buffer or view, passed to
                // a launch while the borrow lasts.
                unsafe { $param::from_raw(self.$addr()) }
            }
            #[inline]
            fn buffer(&self, _: Token) -> Option<BufferUse<'_>> {
                Some(self.buffer_use())
            }
        }
    )*};
}

buffer_arg! {
    [] &DeviceBuffer<T> => ConstDevicePtr via device_address;
    [] &mut DeviceBuffer<T> => ConstDevicePtr via device_address;
    [] &mut DeviceBuffer<T> => DevicePtr via device_address;
    ['v] &DeviceView<'v, T> => ConstDevicePtr via addr;
    ['v] &mut DeviceViewMut<'v, T> => DevicePtr via addr;
    ['v] &mut DeviceViewMut<'v, T> => ConstDevicePtr via addr;
}

impl<T: 'static> KernelArg<ConstDevicePtr<T>> for DevicePtr<T> {
    #[inline]
    fn to_param(&self, _: Token) -> ConstDevicePtr<T> {
        (*self).into()
    }
}

/// A kernel's parameter list as a tuple of [`ParamRepr`] types.
///
/// # Safety
///
/// Implemented here for tuples; `pointers` must write one pointer per
/// element, to that element, into the first `COUNT` entries of `out`
/// (the launch reads those, and only those, as initialised).
pub unsafe trait KernelSignature: Copy + 'static {
    /// Number of parameters.
    const COUNT: usize;
    /// The declared parameters (unnamed), in order.
    fn params() -> Vec<Param>;
    /// Writes a pointer to each element into the first `COUNT` entries of
    /// `out`; the others stay as they are (a launch does not clear the
    /// array first).
    fn pointers(&self, out: &mut [MaybeUninit<*mut c_void>; MAX_TYPED_PARAMS]);
}

/// Arguments that can be passed for signature `S` (a tuple of
/// [`KernelArg`]s). Implemented by cuda-api only.
pub trait KernelArgs<S: KernelSignature> {
    /// The parameter values.
    #[doc(hidden)]
    fn pack(&self, token: Token) -> S;
    /// Visits the buffer behind each argument that has one.
    #[doc(hidden)]
    fn buffers<F: FnMut(usize, BufferUse<'_>) -> CudaResult<()>>(
        &self,
        token: Token,
        f: F,
    ) -> CudaResult<()>;
}

macro_rules! signature {
    ($( ($P:ident $A:ident $i:tt) )*) => {
        // SAFETY: one pointer per tuple element, each to that element.
        unsafe impl<$($P: ParamRepr),*> KernelSignature for ($($P,)*) {
            const COUNT: usize = <[&str]>::len(&[$(stringify!($P)),*]);
            fn params() -> Vec<Param> {
                vec![$(Param::new(String::new(), ParamType::of::<$P>())),*]
            }
            #[allow(unused_variables)]
            #[inline]
            fn pointers(&self, out: &mut [MaybeUninit<*mut c_void>; MAX_TYPED_PARAMS]) {
                $( out[$i] = MaybeUninit::new((&self.$i as *const $P).cast_mut().cast()); )*
            }
        }
        impl<$($P: ParamRepr, $A: KernelArg<$P>),*> KernelArgs<($($P,)*)> for ($($A,)*) {
            #[allow(clippy::unused_unit)]
            #[inline]
            fn pack(&self, token: Token) -> ($($P,)*) {
                let _ = token;
                ($(self.$i.to_param(token),)*)
            }
            #[allow(unused_variables, unused_mut)]
            #[inline]
            fn buffers<F: FnMut(usize, BufferUse<'_>) -> CudaResult<()>>(&self, token: Token, mut f: F) -> CudaResult<()> {
                $( if let Some(b) = self.$i.buffer(token) { f($i, b)? } )*
                Ok(())
            }
        }
    };
}

/// Implements the traits for every prefix of the list: arities 0 to 48.
macro_rules! signatures {
    ([$($done:tt)*]) => { signature!($($done)*); };
    ([$($done:tt)*] $next:tt $($rest:tt)*) => {
        signature!($($done)*);
        signatures!([$($done)* $next] $($rest)*);
    };
}

signatures!([]
    (P0 A0 0) (P1 A1 1) (P2 A2 2) (P3 A3 3) (P4 A4 4) (P5 A5 5) (P6 A6 6) (P7 A7 7)
    (P8 A8 8) (P9 A9 9) (P10 A10 10) (P11 A11 11) (P12 A12 12) (P13 A13 13) (P14 A14 14) (P15 A15 15)
    (P16 A16 16) (P17 A17 17) (P18 A18 18) (P19 A19 19) (P20 A20 20) (P21 A21 21) (P22 A22 22) (P23 A23 23)
    (P24 A24 24) (P25 A25 25) (P26 A26 26) (P27 A27 27) (P28 A28 28) (P29 A29 29) (P30 A30 30) (P31 A31 31)
    (P32 A32 32) (P33 A33 33) (P34 A34 34) (P35 A35 35) (P36 A36 36) (P37 A37 37) (P38 A38 38) (P39 A39 39)
    (P40 A40 40) (P41 A41 41) (P42 A42 42) (P43 A43 43) (P44 A44 44) (P45 A45 45) (P46 A46 46) (P47 A47 47)
);

/// A kernel with declared parameter types `S`: launches are safe.
pub struct TypedKernel<S: KernelSignature> {
    dyn_kernel: DynKernel,
    _sig: PhantomData<fn(S)>,
}

impl<S: KernelSignature> std::fmt::Debug for TypedKernel<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedKernel")
            .field("name", &self.dyn_kernel.name())
            .field("signature", &type_name::<S>())
            .finish()
    }
}

impl<S: KernelSignature> TypedKernel<S> {
    /// Declares `func` to take `S`, checking count, sizes and offsets against
    /// the driver's parameter layout.
    ///
    /// # Errors
    ///
    /// As for [`DynKernel::declare`].
    ///
    /// # Safety
    ///
    /// Each type in `S` must be the kernel's real parameter type at that position.
    pub unsafe fn declare(func: Function) -> CudaResult<Self> {
        // SAFETY: the caller's promise is passed on.
        let dyn_kernel = unsafe { DynKernel::declare(func, S::params())? };
        Ok(TypedKernel {
            dyn_kernel,
            _sig: PhantomData,
        })
    }

    /// The untyped function (attributes, occupancy, limits).
    pub fn function(&self) -> &Function {
        self.dyn_kernel.function()
    }

    /// The same kernel with run-time argument blocks.
    pub fn as_dyn(&self) -> &DynKernel {
        &self.dyn_kernel
    }

    /// Adds a bound: the buffer passed for parameter `buffer` must hold at
    /// least `at_least` elements, checked at every launch (see
    /// [`Bound`](crate::Bound)). Refused when `buffer` is not a pointer parameter,
    /// or an [`Extent::Param`] names no integer parameter.
    ///
    /// # Errors
    ///
    /// As for [`DynKernel::bound`].
    pub fn bound(mut self, buffer: usize, at_least: Extent) -> CudaResult<Self> {
        self.dyn_kernel = self.dyn_kernel.bound(buffer, at_least)?;
        Ok(self)
    }

    /// Names the parameters, in order, for refusals (see
    /// [`DynKernel::names`]): `.names(&["row_ptr", "col", "val", "x", "y", "n"])`.
    ///
    /// # Errors
    ///
    /// As for [`DynKernel::names`].
    pub fn names(mut self, names: &[&str]) -> CudaResult<Self> {
        self.dyn_kernel = self.dyn_kernel.names(names)?;
        Ok(self)
    }

    /// Declares the most blocks the kernel is safe for (see
    /// [`DynKernel::max_grid`]).
    ///
    /// # Errors
    ///
    /// As for [`DynKernel::max_grid`].
    pub fn max_grid(mut self, blocks: u64) -> CudaResult<Self> {
        self.dyn_kernel = self.dyn_kernel.max_grid(blocks)?;
        Ok(self)
    }

    /// Declares the one block the kernel is written for (see
    /// [`DynKernel::fixed_block`]).
    ///
    /// # Errors
    ///
    /// As for [`DynKernel::fixed_block`].
    pub fn fixed_block(mut self, block: impl Into<Dim3>) -> CudaResult<Self> {
        self.dyn_kernel = self.dyn_kernel.fixed_block(block)?;
        Ok(self)
    }

    /// Declares the dynamic shared memory the kernel indexes, in bytes (see
    /// [`DynKernel::shared_mem`]).
    ///
    /// # Errors
    ///
    /// As for [`DynKernel::shared_mem`].
    pub fn shared_mem(mut self, bytes: Extent) -> CudaResult<Self> {
        self.dyn_kernel = self.dyn_kernel.shared_mem(bytes)?;
        Ok(self)
    }

    /// Declares that the kernel may be launched as a programmatic dependent
    /// launch (see [`DynKernel::allow_programmatic_launch`]).
    ///
    /// # Safety
    ///
    /// As for [`DynKernel::allow_programmatic_launch`]: every block of the
    /// kernel waits for the grids before it (`griddepcontrol.wait`) before
    /// it touches memory that earlier work on the stream may use, and
    /// before it exits.
    pub unsafe fn allow_programmatic_launch(mut self) -> Self {
        // SAFETY: the caller's promise is passed on.
        self.dyn_kernel = unsafe { self.dyn_kernel.allow_programmatic_launch() };
        self
    }

    /// Launches on `stream` after checking the configuration (with its
    /// cluster and programmatic dependent launch, if set).
    ///
    /// # Errors
    ///
    /// [`LaunchError::ProgrammaticNotDeclared`](crate::LaunchError::ProgrammaticNotDeclared) for a programmatic launch of a
    /// kernel not declared for one; [`LaunchError::BufferTooShort`](crate::LaunchError::BufferTooShort) when a
    /// declared [`Bound`](crate::Bound) fails; [`CudaError::InvalidArgument`](crate::CudaError::InvalidArgument)
    /// for a buffer of another context or a stream being captured; any other
    /// [`LaunchError`](crate::LaunchError) of the configuration checks (zero or too large extents,
    /// cluster, programmatic launch on an older device); or the driver's
    /// failure of the launch.
    #[inline]
    pub fn launch(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: impl KernelArgs<S>,
    ) -> CudaResult<()> {
        self.launch_impl(stream, &cfg, &args, false)
    }

    /// Launches a cooperative grid on `stream` (its blocks may synchronise with
    /// each other) after checking device support, occupancy times SMs, block
    /// size and shared memory.
    ///
    /// # Errors
    ///
    /// As for [`TypedKernel::launch`], and
    /// [`LaunchError::CooperativeNotSupported`](crate::LaunchError::CooperativeNotSupported) or
    /// [`LaunchError::CooperativeLaunchTooLarge`](crate::LaunchError::CooperativeLaunchTooLarge) when the device cannot run
    /// the grid cooperatively.
    #[inline]
    pub fn launch_cooperative(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: impl KernelArgs<S>,
    ) -> CudaResult<()> {
        self.launch_impl(stream, &cfg, &args, true)
    }

    #[inline]
    fn launch_impl(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        args: &impl KernelArgs<S>,
        cooperative: bool,
    ) -> CudaResult<()> {
        self.dyn_kernel.check_programmatic(cfg)?;
        let token = Token(());
        const {
            assert!(
                S::COUNT <= MAX_TYPED_PARAMS,
                "more parameters than MAX_TYPED_PARAMS"
            )
        };
        let packed = args.pack(token);
        // Not cleared: `pointers` writes the first `S::COUNT` entries, and
        // only those are read (clearing all 48 was a `memset` per launch).
        let mut ptrs = [MaybeUninit::<*mut c_void>::uninit(); MAX_TYPED_PARAMS];
        packed.pointers(&mut ptrs);
        // SAFETY: `KernelSignature`'s contract: the first `S::COUNT`
        // entries were written (`S::COUNT <= MAX_TYPED_PARAMS`, asserted
        // when this function is compiled for `S`).
        let ptrs: &mut [*mut c_void] =
            unsafe { std::slice::from_raw_parts_mut(ptrs.as_mut_ptr().cast(), S::COUNT) };
        let decl = self.dyn_kernel.decl();
        if decl.has_bounds() {
            // Only the first `S::COUNT` lengths are cleared and read.
            let mut lens = [MaybeUninit::<Option<usize>>::uninit(); MAX_TYPED_PARAMS];
            for l in &mut lens[..S::COUNT] {
                l.write(None);
            }
            // SAFETY: the first `S::COUNT` entries were written just above.
            let lens: &mut [Option<usize>] =
                unsafe { std::slice::from_raw_parts_mut(lens.as_mut_ptr().cast(), S::COUNT) };
            args.buffers(token, |i, b| {
                lens[i] = Some(b.len);
                Ok(())
            })?;
            // SAFETY: `ptrs` point to the packed values, whose types the
            // declaration fixed (integers where a bound reads a length).
            unsafe { decl.check_bounds(cfg, lens, ptrs) }?;
        }
        let ctx = stream.context();
        args.buffers(token, |i, b| b.enter(decl.name(), i, ctx))?;
        // SAFETY: the declaration checked count, sizes and offsets and the
        // caller of `declare` vouched for the types; `ptrs` points into
        // `packed`, alive until the driver has copied the values in the call.
        unsafe {
            self.dyn_kernel
                .function()
                .launch_raw(stream, cfg, ptrs.as_mut_ptr(), cooperative)
        }
    }

    /// Resident blocks per SM in `ctx` at `block_threads` threads and
    /// `shared_mem_bytes` of dynamic shared memory (see
    /// [`Function::occupancy`]). Like every occupancy query of the crate it
    /// takes the [`Context`] (a stream's is [`Stream::context`]): occupancy
    /// is a fact of the function on a device, not of a queue of work.
    ///
    /// # Errors
    ///
    /// As for [`Function::occupancy`].
    pub fn occupancy(
        &self,
        ctx: &Context,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> CudaResult<u32> {
        self.dyn_kernel
            .occupancy(ctx, block_threads, shared_mem_bytes)
    }

    /// The largest cooperative grid (blocks) in `ctx` for `block_threads`
    /// threads and `shared_mem_bytes` per block; an impossible
    /// configuration is a [`crate::LaunchError`] saying why.
    ///
    /// # Errors
    ///
    /// As for [`Function::max_cooperative_grid`].
    pub fn max_cooperative_grid(
        &self,
        ctx: &Context,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> CudaResult<u32> {
        self.dyn_kernel
            .max_cooperative_grid(ctx, block_threads, shared_mem_bytes)
    }

    /// The block size with the most resident threads per SM in `ctx`, with
    /// the declared shared memory (see [`DynKernel::max_potential_block_size`]).
    ///
    /// # Errors
    ///
    /// As for [`DynKernel::max_potential_block_size`].
    pub fn max_potential_block_size(
        &self,
        ctx: &Context,
        block_limit: u32,
    ) -> CudaResult<PotentialBlockSize> {
        self.dyn_kernel.max_potential_block_size(ctx, block_limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Saxpy = (f32, ConstDevicePtr<f32>, DevicePtr<f32>, u32);

    #[test]
    fn packing_points_at_each_value() {
        // SAFETY: the pointers are only packed, never launched.
        let (x, y) = unsafe {
            (
                DevicePtr::<f32>::from_raw(0x1000),
                DevicePtr::<f32>::from_raw(0x2000),
            )
        };
        let packed: Saxpy = (2.5f32, x, y, 7u32).pack(Token(()));
        let mut ptrs = [MaybeUninit::new(std::ptr::null_mut()); MAX_TYPED_PARAMS];
        packed.pointers(&mut ptrs);
        // SAFETY: every entry was initialised; the first four point into
        // `packed`.
        unsafe {
            assert_eq!(*(ptrs[0].assume_init() as *const f32), 2.5);
            assert_eq!(*(ptrs[1].assume_init() as *const u64), 0x1000);
            assert_eq!(*(ptrs[2].assume_init() as *const u64), 0x2000);
            assert_eq!(*(ptrs[3].assume_init() as *const u32), 7);
            // Only the signature's entries are written.
            assert!(ptrs[4].assume_init().is_null());
        }
        assert_eq!(<Saxpy as KernelSignature>::COUNT, 4);
    }

    #[test]
    fn the_largest_tuple_has_48_parameters() {
        type P8 = [u64; 8];
        type Big = (
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            u32,
            P8,
        );
        assert_eq!(<Big as KernelSignature>::COUNT, MAX_TYPED_PARAMS);
        let params = <Big as KernelSignature>::params();
        assert_eq!(params.len(), 48);
        assert_eq!(params[47].ty.size(), 64);
        assert_eq!(params[0].ty.size(), 4);
    }
}
