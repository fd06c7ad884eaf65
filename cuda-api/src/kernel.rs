//! Kernels: untyped [`Function`]s with cached facts, and typed [`Kernel`]s
//! whose launches are safe once their parameter types are declared.

use std::any::type_name;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cuda_sys::{
    CUfunction, CUfunction_attribute, CUkernel, CUlaunchAttribute, CUlaunchAttributeID,
    CUlaunchConfig, CUresult,
};

use crate::device::Device;
use crate::driver;
use crate::error::{Error, Result, SignatureError};
use crate::launch::{FunctionLimits, LaunchConfig, check_launch};
use crate::memory::{DeviceBuffer, DevicePtr, DeviceRepr, DeviceView};
use crate::module::{LibraryInner, ModuleInner};
use crate::stream::Stream;

/// Most parameters a typed kernel may declare.
pub const MAX_PARAMS: usize = 16;

/// Keeps the image a function lives in loaded (held, never read).
#[derive(Clone)]
#[allow(dead_code)]
pub(crate) enum Owner {
    Module(Arc<ModuleInner>),
    Library(Arc<LibraryInner>),
    Foreign(Arc<dyn std::any::Any + Send + Sync>),
}

#[derive(Clone, Copy)]
enum Handle {
    Function(CUfunction),
    Kernel(CUkernel),
}

/// Facts about a function in one context, queried once.
#[derive(Debug, Clone, Copy)]
struct Facts {
    func: CUfunction,
    limits: FunctionLimits,
}

/// What is resolved once per function; the dynamic shared memory limit lives
/// in `Function::dynamic_smem` alone, since `set_max_dynamic_shared_memory` changes it.
#[derive(Debug, Clone, Copy)]
struct Resolved {
    func: CUfunction,
    max_threads_per_block: u32,
}

/// Occupancy answers for a few (block size, shared memory) pairs, without heap use.
#[derive(Default)]
struct OccupancyCache {
    entries: [(u32, u32, u32); 8],
    used: usize,
    next: usize,
}

impl OccupancyCache {
    fn get(&self, block: u32, smem: u32) -> Option<u32> {
        self.entries[..self.used]
            .iter()
            .find(|(b, s, _)| *b == block && *s == smem)
            .map(|e| e.2)
    }
    fn put(&mut self, block: u32, smem: u32, per_sm: u32) {
        self.entries[self.next] = (block, smem, per_sm);
        self.next = (self.next + 1) % self.entries.len();
        self.used = (self.used + 1).min(self.entries.len());
    }
}

/// A kernel handle (`CUfunction` from a module, or `CUkernel` from a library)
/// with its name, attributes, occupancy and parameter layout. Every fact used
/// to validate a launch is queried once and cached.
pub struct Function {
    handle: Handle,
    name: String,
    _owner: Owner,
    facts: OnceLock<Resolved>,
    dynamic_smem: AtomicU32,
    occupancy: Mutex<OccupancyCache>,
}

// SAFETY: function handles may be used from any thread; the caches are synchronised.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .finish()
    }
}

impl Function {
    /// Wraps a `CUfunction` loaded elsewhere (for example by cudarc), keeping
    /// `owner` (whatever keeps its module loaded) alive.
    ///
    /// # Safety
    ///
    /// `raw` must be a live function named `name` that `owner` keeps loaded.
    pub unsafe fn from_raw(
        raw: CUfunction,
        name: &str,
        owner: Arc<dyn std::any::Any + Send + Sync>,
    ) -> Self {
        Self::from_function(raw, name, Owner::Foreign(owner))
    }

    pub(crate) fn from_function(raw: CUfunction, name: &str, owner: Owner) -> Self {
        Self::new(Handle::Function(raw), name, owner)
    }

    pub(crate) fn from_kernel(raw: CUkernel, name: &str, owner: Owner) -> Self {
        Self::new(Handle::Kernel(raw), name, owner)
    }

    fn new(handle: Handle, name: &str, owner: Owner) -> Self {
        Function {
            handle,
            name: name.to_string(),
            _owner: owner,
            facts: OnceLock::new(),
            dynamic_smem: AtomicU32::new(0),
            occupancy: Mutex::new(OccupancyCache::default()),
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The handle to pass as `f` to the launch functions: the `CUfunction`, or
    /// the `CUkernel` cast to one (the driver accepts both).
    pub fn launch_handle(&self) -> CUfunction {
        match self.handle {
            Handle::Function(f) => f,
            Handle::Kernel(k) => k.cast(),
        }
    }

    /// The `CUfunction` in the current context (for a `CUkernel`, through
    /// `cuKernelGetFunction`), cached with the launch limits.
    #[inline]
    fn facts(&self) -> Result<Facts> {
        let r = match self.facts.get() {
            Some(r) => *r,
            None => self.resolve()?,
        };
        Ok(Facts {
            func: r.func,
            limits: FunctionLimits {
                max_threads_per_block: r.max_threads_per_block,
                max_dynamic_shared_bytes: self.dynamic_smem.load(Ordering::Relaxed),
            },
        })
    }

    #[cold]
    fn resolve(&self) -> Result<Resolved> {
        let func = match self.handle {
            Handle::Function(f) => f,
            Handle::Kernel(k) => driver::kernel_get_function(k).map_err(|e| self.context(e))?,
        };
        let attr = |a| {
            driver::func_get_attribute(a, func)
                .map(|v| v as u32)
                .map_err(|e| self.context(e))
        };
        let max_threads_per_block =
            attr(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
        let dynamic = attr(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?;
        // Only the thread that fills the cell records the limit, so a later
        // set_max_dynamic_shared_memory is never overwritten by a racing first use.
        Ok(*self.facts.get_or_init(|| {
            self.dynamic_smem.store(dynamic, Ordering::Relaxed);
            Resolved {
                func,
                max_threads_per_block,
            }
        }))
    }

    fn context(&self, e: Error) -> Error {
        e.with_context(|| format!("kernel '{}'", self.name))
    }

    /// An attribute of the function (uncached).
    pub fn attribute(&self, attr: CUfunction_attribute) -> Result<i32> {
        let f = self.facts()?.func;
        driver::func_get_attribute(attr, f).map_err(|e| self.context(e))
    }

    /// The limits launches of this function are checked against.
    pub fn limits(&self) -> Result<FunctionLimits> {
        Ok(self.facts()?.limits)
    }

    /// Allows up to `bytes` of dynamic shared memory per block (above the 48 KiB default).
    pub fn set_max_dynamic_shared_memory(&self, bytes: u32) -> Result<()> {
        let facts = self.facts()?;
        let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        driver::func_set_attribute(facts.func, attr, bytes as i32).map_err(|e| self.context(e))?;
        let max = driver::func_get_attribute(attr, facts.func).map_err(|e| self.context(e))? as u32;
        self.dynamic_smem.store(max, Ordering::Relaxed);
        Ok(())
    }

    /// Resident blocks per SM at `block_threads` threads and `shared_mem_bytes`
    /// of dynamic shared memory (cached per pair).
    pub fn occupancy(&self, block_threads: u32, shared_mem_bytes: u32) -> Result<u32> {
        if let Some(v) = self
            .occupancy
            .lock()
            .ok()
            .and_then(|c| c.get(block_threads, shared_mem_bytes))
        {
            return Ok(v);
        }
        let func = self.facts()?.func;
        let v = driver::occupancy_max_active_blocks_per_multiprocessor(
            func,
            block_threads as i32,
            shared_mem_bytes as usize,
        )
        .map_err(|e| self.context(e))? as u32;
        if let Ok(mut c) = self.occupancy.lock() {
            c.put(block_threads, shared_mem_bytes, v);
        }
        Ok(v)
    }

    /// `(offset, size)` in bytes of each parameter, from the driver.
    pub fn param_layout(&self) -> Result<Vec<(usize, usize)>> {
        let mut out = Vec::new();
        // The driver allows up to 32 KiB of parameters; stop well past any real count.
        for i in 0..=8192 {
            let r = match self.handle {
                Handle::Function(f) => driver::func_get_param_info(f, i),
                Handle::Kernel(k) => driver::kernel_get_param_info(k, i),
            };
            match r {
                Ok(v) => out.push(v),
                // Past the last parameter the driver answers CUDA_ERROR_INVALID_VALUE.
                Err(Error::Driver(d)) if d.code == CUresult::CUDA_ERROR_INVALID_VALUE => {
                    return Ok(out);
                }
                Err(e) => return Err(self.context(e)),
            }
        }
        Ok(out)
    }

    /// The largest cooperative grid (blocks) for this block size and dynamic
    /// shared memory on `device`: resident blocks per SM times SMs.
    pub fn max_cooperative_grid(
        &self,
        device: &Device,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        Ok(self.occupancy(block_threads, shared_mem_bytes)? * device.sm_count()?)
    }

    /// Validates and launches with raw parameter pointers; one path for plain
    /// and cooperative launches.
    ///
    /// # Safety
    ///
    /// `params` must hold one valid pointer per kernel parameter, each to a
    /// value of that parameter's type.
    pub unsafe fn launch_raw(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        params: *mut *mut c_void,
        cooperative: bool,
    ) -> Result<()> {
        let ctx = stream.context();
        ctx.bind()?;
        let device = ctx.device();
        let limits = device.limits()?;
        let facts = self.facts()?;
        let per_sm = if cooperative {
            let threads = cfg.block.product().unwrap_or(u64::MAX);
            // An oversized block is reported by check_launch; occupancy only for sane sizes.
            if threads <= facts.limits.max_threads_per_block as u64
                && cfg.shared_mem_bytes <= facts.limits.max_dynamic_shared_bytes
            {
                Some(self.occupancy(threads as u32, cfg.shared_mem_bytes)?)
            } else {
                Some(0)
            }
        } else {
            None
        };
        check_launch(&self.name, limits, &facts.limits, cfg, per_sm)?;
        // One entry point for both kinds: cuLaunchKernelEx, with the cooperative
        // attribute when asked. On the H200 its raw cost was 0.977x to 0.995x
        // that of cuLaunchCooperativeKernel across runs (tests/benches/launch.rs).
        let mut attr = CUlaunchAttribute {
            id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
            ..Default::default()
        };
        attr.value.cooperative = 1;
        let config = CUlaunchConfig {
            gridDimX: cfg.grid.x,
            gridDimY: cfg.grid.y,
            gridDimZ: cfg.grid.z,
            blockDimX: cfg.block.x,
            blockDimY: cfg.block.y,
            blockDimZ: cfg.block.z,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: stream.raw(),
            attrs: &mut attr,
            numAttrs: u32::from(cooperative),
        };
        // SAFETY: validated configuration; `attr` outlives the call; the caller vouches for `params`.
        let r = unsafe {
            driver::launch_kernel_ex(&config, self.launch_handle(), params, std::ptr::null_mut())
        };
        r.map_err(|e| e.with_context(|| format!("kernel '{}' on {}", self.name, device.name())))
    }
}

/// A Rust type that is, byte for byte, one kernel parameter.
///
/// # Safety
///
/// The type must be plain data with the size and layout of the C parameter it stands for.
pub unsafe trait KernelParam: Copy + 'static {}

macro_rules! kernel_param {
    ($($t:ty),*) => { $( // SAFETY: primitives are passed by value with their own layout.
        unsafe impl KernelParam for $t {} )* };
}
kernel_param!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);
// SAFETY: a device pointer is one 8-byte address.
unsafe impl<T: 'static> KernelParam for DevicePtr<T> {}
// SAFETY: arrays of parameters are laid out as the C array.
unsafe impl<T: KernelParam, const N: usize> KernelParam for [T; N] {}

/// A value that can be passed for a parameter of type `P` (a `&DeviceBuffer<T>`
/// for a `DevicePtr<T>`, a number for itself).
pub trait KernelArg<P: KernelParam> {
    /// The parameter value.
    fn to_param(&self) -> P;
}

impl<P: KernelParam> KernelArg<P> for P {
    fn to_param(&self) -> P {
        *self
    }
}
impl<T: DeviceRepr> KernelArg<DevicePtr<T>> for &DeviceBuffer<T> {
    fn to_param(&self) -> DevicePtr<T> {
        self.as_ptr()
    }
}
impl<T: DeviceRepr> KernelArg<DevicePtr<T>> for &mut DeviceBuffer<T> {
    fn to_param(&self) -> DevicePtr<T> {
        self.as_ptr()
    }
}
impl<T: DeviceRepr> KernelArg<DevicePtr<T>> for &DeviceView<'_, T> {
    fn to_param(&self) -> DevicePtr<T> {
        self.as_ptr()
    }
}

/// A kernel's parameter list as a tuple of [`KernelParam`] types.
///
/// # Safety
///
/// Implemented here for tuples; `pointers` must write one pointer per element.
pub unsafe trait KernelSignature: Copy + 'static {
    /// Number of parameters.
    const COUNT: usize;
    /// Size and Rust type name of parameter `i`.
    fn param(i: usize) -> Option<(usize, &'static str)>;
    /// Writes a pointer to each element into `out`.
    fn pointers(&self, out: &mut [*mut c_void; MAX_PARAMS]);
}

/// Arguments that can be passed for signature `S`.
pub trait KernelArgs<S: KernelSignature> {
    /// The parameter values.
    fn pack(&self) -> S;
}

macro_rules! signatures {
    ($( ($($P:ident $A:ident $i:tt),*) )*) => {$(
        // SAFETY: one pointer per tuple element, each to that element.
        unsafe impl<$($P: KernelParam),*> KernelSignature for ($($P,)*) {
            const COUNT: usize = <[&str]>::len(&[$(stringify!($P)),*]);
            fn param(i: usize) -> Option<(usize, &'static str)> {
                let table: &[(usize, &'static str)] = &[$((size_of::<$P>(), type_name::<$P>())),*];
                table.get(i).copied()
            }
            #[allow(unused_variables)]
            fn pointers(&self, out: &mut [*mut c_void; MAX_PARAMS]) {
                $( out[$i] = (&self.$i as *const $P).cast_mut().cast(); )*
            }
        }
        impl<$($P: KernelParam, $A: KernelArg<$P>),*> KernelArgs<($($P,)*)> for ($($A,)*) {
            #[allow(clippy::unused_unit)]
            fn pack(&self) -> ($($P,)*) {
                ($(self.$i.to_param(),)*)
            }
        }
    )*};
}

signatures! {
    ()
    (P0 A0 0)
    (P0 A0 0, P1 A1 1)
    (P0 A0 0, P1 A1 1, P2 A2 2)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10, P11 A11 11)
}

/// Checks a declared signature against the driver's parameter layout.
pub fn check_signature<S: KernelSignature>(
    kernel: &str,
    layout: &[(usize, usize)],
) -> Result<(), SignatureError> {
    if layout.len() != S::COUNT {
        return Err(SignatureError::Count {
            kernel: kernel.to_string(),
            expected: layout.len(),
            declared: S::COUNT,
        });
    }
    for (index, (_, size)) in layout.iter().enumerate() {
        let (declared, declared_type) = S::param(index).unwrap_or((0, "?"));
        if declared != *size {
            return Err(SignatureError::Size {
                kernel: kernel.to_string(),
                index,
                expected: *size,
                declared,
                declared_type,
            });
        }
    }
    Ok(())
}

/// A kernel with declared parameter types `S`: launches are safe.
pub struct Kernel<S: KernelSignature> {
    func: Function,
    _sig: PhantomData<fn(S)>,
}

impl<S: KernelSignature> std::fmt::Debug for Kernel<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.func.name)
            .field("signature", &type_name::<S>())
            .finish()
    }
}

impl<S: KernelSignature> Kernel<S> {
    /// Declares `func` to take `S`, checking count and sizes against the driver.
    ///
    /// # Safety
    ///
    /// Each type in `S` must be the kernel's real parameter type at that position.
    pub unsafe fn declare(func: Function) -> Result<Self> {
        let layout = func.param_layout()?;
        check_signature::<S>(&func.name, &layout)?;
        Ok(Kernel {
            func,
            _sig: PhantomData,
        })
    }

    /// The untyped function (attributes, occupancy, limits).
    pub fn function(&self) -> &Function {
        &self.func
    }

    /// Launches on `stream` after checking the configuration.
    pub fn launch(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: impl KernelArgs<S>,
    ) -> Result<()> {
        self.launch_impl(stream, &cfg, &args.pack(), false)
    }

    /// Launches a cooperative grid on `stream` (its blocks may synchronise with
    /// each other) after checking device support, occupancy times SMs, block
    /// size and shared memory.
    pub fn launch_cooperative(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: impl KernelArgs<S>,
    ) -> Result<()> {
        self.launch_impl(stream, &cfg, &args.pack(), true)
    }

    #[inline]
    fn launch_impl(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        packed: &S,
        cooperative: bool,
    ) -> Result<()> {
        let mut ptrs = [std::ptr::null_mut::<c_void>(); MAX_PARAMS];
        packed.pointers(&mut ptrs);
        // SAFETY: the declaration checked count and sizes and the caller of
        // `declare` vouched for the types; `ptrs` points into `packed`, alive
        // until the driver has copied the values during the call.
        unsafe {
            self.func
                .launch_raw(stream, cfg, ptrs.as_mut_ptr(), cooperative)
        }
    }

    /// The largest cooperative grid (blocks) for `block_threads` threads and
    /// `shared_mem_bytes` per block on the stream's device.
    pub fn max_cooperative_grid(
        &self,
        stream: &Stream,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> Result<u32> {
        stream.context().bind()?;
        self.func
            .max_cooperative_grid(stream.context().device(), block_threads, shared_mem_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Saxpy = (DevicePtr<f32>, DevicePtr<f32>, f32, u32);

    #[test]
    fn signature_matches_layout() {
        assert_eq!(
            check_signature::<Saxpy>("saxpy", &[(0, 8), (8, 8), (16, 4), (20, 4)]),
            Ok(())
        );
    }

    #[test]
    fn wrong_count_and_size_are_named() {
        let e = check_signature::<Saxpy>("saxpy", &[(0, 8), (8, 8), (16, 4)]).unwrap_err();
        insta::assert_snapshot!("count", e.to_string());
        let e = check_signature::<Saxpy>("saxpy", &[(0, 8), (8, 8), (16, 8), (24, 4)]).unwrap_err();
        insta::assert_snapshot!("size", e.to_string());
    }

    #[test]
    fn packing_points_at_each_value() {
        let packed: Saxpy = (
            DevicePtr::from_raw(0x1000),
            DevicePtr::from_raw(0x2000),
            2.5,
            7,
        )
            .pack();
        let mut ptrs = [std::ptr::null_mut(); MAX_PARAMS];
        packed.pointers(&mut ptrs);
        // SAFETY: the pointers point into `packed`.
        unsafe {
            assert_eq!(*(ptrs[0] as *const u64), 0x1000);
            assert_eq!(*(ptrs[1] as *const u64), 0x2000);
            assert_eq!(*(ptrs[2] as *const f32), 2.5);
            assert_eq!(*(ptrs[3] as *const u32), 7);
        }
        assert!(ptrs[4].is_null());
        assert_eq!(<Saxpy as KernelSignature>::COUNT, 4);
    }

    #[test]
    fn occupancy_cache_is_bounded() {
        let mut c = OccupancyCache::default();
        for b in 0..20 {
            c.put(b, 0, b * 2);
        }
        assert_eq!(c.get(19, 0), Some(38));
        assert_eq!(c.get(0, 0), None);
    }
}
