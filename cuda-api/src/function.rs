//! Untyped kernel handles ([`Function`]) with their facts cached per context:
//! the `CUfunction` in that context, its block-size and shared-memory limits,
//! occupancy answers, and the parameter layout. The one launch path of the
//! crate lives here.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cuda_sys::{
    CUfunction, CUfunction_attribute, CUkernel, CUlaunchAttribute, CUlaunchAttributeID, CUresult,
};

use crate::context::Context;
use crate::driver;
use crate::error::{CudaError, CudaResult};
use crate::launch::{
    ClusterLimits, DeviceLimits, Dim3, FunctionLimits, LaunchConfig, LaunchError,
    PotentialBlockSize, check_block, check_cluster_fit, check_cluster_shape, check_cluster_size,
    check_cooperative, check_nonzero, check_programmatic, check_shape, cluster_fits, shape_blocks,
};
use crate::params::ParamSlot;
use crate::stream::Stream;

/// Keeps the image a function lives in loaded (held, never read): the
/// inner part of its module or library, or what the caller of
/// [`Function::from_raw`] hands in.
pub(crate) type Owner = Arc<dyn std::any::Any + Send + Sync>;

#[derive(Clone, Copy)]
enum Handle {
    /// A function of a module, usable only in `home`.
    Function(CUfunction),
    /// A context-less kernel of a library, resolved per context.
    Kernel(CUkernel),
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

/// What the driver answered for one cluster question, keyed by the block,
/// the shared memory and (for the active-cluster count) the cluster.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClusterQuestion {
    /// `cuOccupancyMaxPotentialClusterSize`.
    MaxSize { block: Dim3, smem: u32 },
    /// `cuOccupancyMaxActiveClusters`.
    Active {
        block: Dim3,
        smem: u32,
        cluster: Dim3,
    },
}

/// The last few cluster answers (question, value), and the next slot to overwrite.
type ClusterAnswers = ([Option<(ClusterQuestion, u32)>; 8], usize);

/// A function's cluster facts in one context, queried on its first cluster
/// launch (plain launches never ask).
struct ClusterFacts {
    /// The compile-time cluster (`__cluster_dims__`), if any.
    required: Option<Dim3>,
    /// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`, as last set.
    non_portable: AtomicBool,
    /// Occupancy answers for a few configurations, without heap use.
    answers: Mutex<ClusterAnswers>,
    /// Both answers for the last configuration checked, read without a
    /// lock (a launch loop repeats one configuration).
    last: LastCluster,
}

/// The two cluster answers (largest cluster, active clusters) of the last
/// configuration (block, shared memory, cluster) a launch checked: a
/// sequence lock over plain atomics, so a repeated launch reads them with
/// loads and compares, no lock and no read-modify-write. Writers hold
/// [`ClusterFacts::answers`]' lock, so only one writes at a time.
#[derive(Default)]
struct LastCluster {
    /// Odd while a writer is between its stores; bumped by 2 per write.
    seq: AtomicU64,
    /// Block x, y, z, shared memory, cluster x, y, z, the largest cluster,
    /// the active clusters, and 1 when the entry holds an answer.
    words: [AtomicU32; 10],
}

impl LastCluster {
    /// The key words of a configuration.
    fn key(block: Dim3, smem: u32, cluster: Dim3) -> [u32; 7] {
        [
            block.x, block.y, block.z, smem, cluster.x, cluster.y, cluster.z,
        ]
    }

    /// The answers kept for `key`, if the last configuration was this one
    /// and no writer was storing meanwhile.
    /// Each word is compared where it is loaded: copying the words into
    /// an array and comparing that as one slice made the compiler store
    /// them 4 bytes at a time and load them back 16 at a time, a
    /// store-forwarding stall that `perf annotate` put at a third of the
    /// cluster check's samples.
    #[inline]
    fn get(&self, key: [u32; 7]) -> Option<(u32, u32)> {
        let s1 = self.seq.load(Ordering::Acquire);
        let w = |i: usize| self.words[i].load(Ordering::Relaxed);
        let same = (0..7).fold((s1 & 1 == 0) & (w(9) == 1), |same, i| {
            same & (w(i) == key[i])
        });
        let answers = (w(7), w(8));
        std::sync::atomic::fence(Ordering::Acquire);
        (same & (self.seq.load(Ordering::Relaxed) == s1)).then_some(answers)
    }

    /// Stores `words` (with `answers`' lock held by the caller).
    fn store(&self, words: [u32; 10]) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        for (a, w) in self.words.iter().zip(words) {
            a.store(w, Ordering::Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

impl ClusterFacts {
    fn answer(&self, q: ClusterQuestion) -> Option<u32> {
        let a = self.answers.lock().ok()?;
        a.0.iter().flatten().find(|(k, _)| *k == q).map(|(_, v)| *v)
    }
    fn remember(&self, q: ClusterQuestion, v: u32) {
        if let Ok(mut a) = self.answers.lock() {
            let next = a.1;
            a.0[next] = Some((q, v));
            a.1 = (next + 1) % a.0.len();
        }
    }
    fn forget(&self) {
        if let Ok(mut a) = self.answers.lock() {
            *a = ([None; 8], 0);
            self.last.store([0; 10]);
        }
    }
    /// Keeps the answers of the configuration a launch just checked.
    fn keep_last(&self, key: [u32; 7], max_size: u32, active: u32) {
        if let Ok(_a) = self.answers.lock() {
            let mut w = [0; 10];
            w[..7].copy_from_slice(&key);
            (w[7], w[8], w[9]) = (max_size, active, 1);
            self.last.store(w);
        }
    }
}

/// What is known of a function in one context, queried once. It holds the
/// context itself, not only its handle: while the facts live the context
/// (and a primary context's retain) does too, so the handle cannot be
/// recycled for a context in which `func` means nothing.
struct Facts {
    ctx: Context,
    func: CUfunction,
    max_threads_per_block: u32,
    /// Changed by `set_max_dynamic_shared_memory`.
    dynamic_smem: AtomicU32,
    /// The last occupancy answer, packed (threads << 48 | shared memory <<
    /// 16 | blocks per SM; 0 when none): read without a lock.
    last_occupancy: AtomicU64,
    occupancy: Mutex<OccupancyCache>,
    /// Cluster facts, queried on the first cluster launch.
    cluster: OnceLock<ClusterFacts>,
}

// SAFETY: the handles are plain driver handles usable from any thread; the rest is synchronised.
unsafe impl Send for Facts {}
// SAFETY: as above.
unsafe impl Sync for Facts {}

impl Facts {
    fn limits(&self) -> FunctionLimits {
        FunctionLimits {
            max_threads_per_block: self.max_threads_per_block,
            max_dynamic_shared_bytes: self.dynamic_smem.load(Ordering::Relaxed),
        }
    }
}

/// A kernel handle (`CUfunction` from a module, or `CUkernel` from a library)
/// with its name and cached facts. A library's kernel is validated in each
/// context with that context's device limits; a module's function belongs to
/// the module's context and is refused on a stream of another.
pub struct Function {
    handle: Handle,
    name: String,
    home: Option<Context>,
    _owner: Owner,
    /// Facts in the first context used (the common case: one lookup, no lock).
    first: OnceLock<Arc<Facts>>,
    /// Facts in further contexts.
    others: Mutex<Vec<Arc<Facts>>>,
    layout: OnceLock<Arc<[ParamSlot]>>,
    /// The layout the cubin declares for this kernel, not yet checked
    /// against the driver.
    declared: Option<Arc<[ParamSlot]>>,
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
    /// Wraps a `CUfunction` loaded elsewhere (for example by cudarc) in
    /// `ctx`, keeping `owner` (whatever keeps its module loaded) alive.
    ///
    /// # Safety
    ///
    /// `raw` must be a live function named `name`, loaded in `ctx`, that
    /// `owner` keeps loaded.
    pub unsafe fn from_raw(
        raw: CUfunction,
        name: &str,
        ctx: &Context,
        owner: Arc<dyn std::any::Any + Send + Sync>,
    ) -> Self {
        Self::new(Handle::Function(raw), name, Some(ctx.clone()), owner, None)
    }

    /// A module's function; `declared` is the parameter layout its cubin
    /// declares, if any ([`Function::param_layout`] checks it).
    pub(crate) fn from_module(
        raw: CUfunction,
        name: &str,
        ctx: &Context,
        owner: Owner,
        declared: Option<Arc<[ParamSlot]>>,
    ) -> Self {
        Self::new(
            Handle::Function(raw),
            name,
            Some(ctx.clone()),
            owner,
            declared,
        )
    }

    /// A library's kernel; `declared` as for [`Function::from_module`].
    pub(crate) fn from_kernel(
        raw: CUkernel,
        name: &str,
        owner: Owner,
        declared: Option<Arc<[ParamSlot]>>,
    ) -> Self {
        Self::new(Handle::Kernel(raw), name, None, owner, declared)
    }

    fn new(
        handle: Handle,
        name: &str,
        home: Option<Context>,
        owner: Owner,
        declared: Option<Arc<[ParamSlot]>>,
    ) -> Self {
        Function {
            handle,
            name: name.to_string(),
            home,
            _owner: owner,
            first: OnceLock::new(),
            others: Mutex::new(Vec::new()),
            layout: OnceLock::new(),
            declared,
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The context a module's function was loaded in (`None` for a
    /// library's kernel, which runs in any context).
    pub fn home_context(&self) -> Option<&Context> {
        self.home.as_ref()
    }

    /// The handle to pass as `f` to the launch functions: the `CUfunction`, or
    /// the `CUkernel` cast to one (the driver accepts both).
    pub fn launch_handle(&self) -> CUfunction {
        match self.handle {
            Handle::Function(f) => f,
            Handle::Kernel(k) => k.cast(),
        }
    }

    fn err(&self, e: CudaError) -> CudaError {
        e.with_context(|| format!("kernel '{}'", self.name))
    }

    /// Refuses a context other than a module function's own, before any driver call.
    #[inline]
    pub(crate) fn check_context(&self, ctx: &Context) -> CudaResult<()> {
        match &self.home {
            Some(home) if home != ctx => Err(self.context_mismatch(home, ctx)),
            _ => Ok(()),
        }
    }

    /// The refusal of [`Function::check_context`].
    #[cold]
    #[inline(never)]
    fn context_mismatch(&self, home: &Context, ctx: &Context) -> CudaError {
        LaunchError::ContextMismatch {
            kernel: self.name.clone(),
            function_context: home.to_string(),
            stream_context: ctx.to_string(),
        }
        .into()
    }

    /// The `CUfunction` that runs this kernel in `ctx`: a module's own
    /// function, or for a library kernel the context's function for it
    /// (queried once per context and cached). For graph kernel nodes and
    /// other driver calls that take a `CUfunction`.
    ///
    /// # Errors
    ///
    /// [`LaunchError::ContextMismatch`] for a module's function asked for in
    /// another context than its module's; for a library kernel, the driver's
    /// failure to give the context's function (`cuKernelGetFunction`).
    pub fn function_in(&self, ctx: &Context) -> CudaResult<CUfunction> {
        self.check_context(ctx)?;
        ctx.bind()?;
        self.with_facts(ctx, |facts| Ok(facts.func))
    }

    /// Runs `f` with the facts of this function in `ctx` (bound by the caller).
    #[inline]
    fn with_facts<R>(
        &self,
        ctx: &Context,
        f: impl FnOnce(&Facts) -> CudaResult<R>,
    ) -> CudaResult<R> {
        if let Some(facts) = self.first.get()
            && facts.ctx == *ctx
        {
            return f(facts);
        }
        let facts = self.facts_slow(ctx)?;
        f(&facts)
    }

    #[cold]
    fn facts_slow(&self, ctx: &Context) -> CudaResult<Arc<Facts>> {
        let mut others = self.others.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = others.iter().find(|f| f.ctx == *ctx) {
            return Ok(f.clone());
        }
        let facts = Arc::new(self.resolve(ctx)?);
        match self.first.set(facts.clone()) {
            Ok(()) => {}
            Err(_) if self.first.get().is_some_and(|f| f.ctx == *ctx) => {
                return Ok(self.first.get().cloned().unwrap_or(facts));
            }
            Err(_) => others.push(facts.clone()),
        }
        Ok(facts)
    }

    fn resolve(&self, ctx: &Context) -> CudaResult<Facts> {
        self.check_context(ctx)?;
        ctx.bind()?;
        let func = match self.handle {
            Handle::Function(f) => f,
            Handle::Kernel(k) => {
                // SAFETY: `k` belongs to a library kept loaded by `self`, and
                // `ctx` (checked against it above) is current.
                unsafe { driver::kernel_get_function(k) }.map_err(|e| self.err(e))?
            }
        };
        let attr = |a| {
            // SAFETY: `func` is a function of a module or library kept loaded
            // by `self`, resolved in the current context.
            unsafe { driver::func_get_attribute(a, func) }
                .map(|v| v as u32)
                .map_err(|e| self.err(e))
        };
        Ok(Facts {
            ctx: ctx.clone(),
            func,
            max_threads_per_block: attr(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            )?,
            dynamic_smem: AtomicU32::new(attr(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            )?),
            last_occupancy: AtomicU64::new(0),
            occupancy: Mutex::new(OccupancyCache::default()),
            cluster: OnceLock::new(),
        })
    }

    /// An attribute of the function in `ctx` (uncached).
    ///
    /// # Errors
    ///
    /// [`LaunchError::ContextMismatch`] for a context other than the module's,
    /// or the driver's failure of `cuFuncGetAttribute` naming the kernel.
    pub fn attribute(&self, ctx: &Context, attr: CUfunction_attribute) -> CudaResult<i32> {
        self.with_facts(ctx, |f| {
            ctx.bind()?;
            // SAFETY: `f.func` was resolved for `ctx`, which is current, and
            // its module or library is kept loaded by `self`.
            unsafe { driver::func_get_attribute(attr, f.func) }.map_err(|e| self.err(e))
        })
    }

    /// The limits launches in `ctx` are checked against.
    ///
    /// # Errors
    ///
    /// [`LaunchError::ContextMismatch`] for a context other than the module's,
    /// or the driver's failure while the function's attributes are read (once
    /// per context).
    pub fn limits(&self, ctx: &Context) -> CudaResult<FunctionLimits> {
        self.with_facts(ctx, |f| Ok(f.limits()))
    }

    /// Allows up to `bytes` of dynamic shared memory per block in `ctx`
    /// (above the 48 KiB default).
    ///
    /// # Errors
    ///
    /// [`LaunchError::ContextMismatch`] for a context other than the module's,
    /// or the driver's failure of `cuFuncSetAttribute` (for example more bytes
    /// than the device allows per block) naming the kernel.
    pub fn set_max_dynamic_shared_memory(&self, ctx: &Context, bytes: u32) -> CudaResult<()> {
        self.with_facts(ctx, |f| {
            ctx.bind()?;
            let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            // SAFETY: `f.func` was resolved for `ctx`, which is current, and
            // its module or library is kept loaded by `self`.
            unsafe { driver::func_set_attribute(f.func, attr, bytes as i32) }
                .map_err(|e| self.err(e))?;
            // SAFETY: as above.
            let max = unsafe { driver::func_get_attribute(attr, f.func) }
                .map_err(|e| self.err(e))? as u32;
            f.dynamic_smem.store(max, Ordering::Relaxed);
            Ok(())
        })
    }

    fn occupancy_of(
        &self,
        facts: &Facts,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> CudaResult<u32> {
        check_block(
            &self.name,
            &facts.limits(),
            block_threads as u64,
            shared_mem_bytes,
        )?;
        let key = (u64::from(block_threads) << 48) | (u64::from(shared_mem_bytes) << 16);
        let packable = block_threads < 1 << 16;
        let last = facts.last_occupancy.load(Ordering::Relaxed);
        if packable && last != 0 && last & !0xffff == key {
            return Ok((last & 0xffff) as u32);
        }
        let cache = |c: &Mutex<OccupancyCache>| {
            c.lock()
                .ok()
                .and_then(|c| c.get(block_threads, shared_mem_bytes))
        };
        let remember = |v: u32| {
            if packable && v <= 0xffff {
                facts
                    .last_occupancy
                    .store(key | u64::from(v), Ordering::Relaxed);
            }
            v
        };
        if let Some(v) = cache(&facts.occupancy) {
            return Ok(remember(v));
        }
        // SAFETY: `facts.func` was resolved for the current context and its
        // module or library is kept loaded by `self`.
        let v = unsafe {
            driver::occupancy_max_active_blocks_per_multiprocessor(
                facts.func,
                block_threads as i32,
                shared_mem_bytes as usize,
            )
        }
        .map_err(|e| self.err(e))? as u32;
        if let Ok(mut c) = facts.occupancy.lock() {
            c.put(block_threads, shared_mem_bytes, v);
        }
        Ok(remember(v))
    }

    /// Resident blocks per SM in `ctx` at `block_threads` threads and
    /// `shared_mem_bytes` of dynamic shared memory (cached per pair). A
    /// configuration the function cannot launch at all (a block of 0 threads,
    /// more threads than its `__launch_bounds__` or registers allow, more
    /// shared memory than it may get) is a [`LaunchError`] saying which,
    /// checked before the driver is asked.
    ///
    /// # Errors
    ///
    /// A [`LaunchError`] for a configuration the function cannot launch
    /// (`ZeroDimension`, `BlockTooLarge`, `SharedMemoryTooLarge`),
    /// [`LaunchError::ContextMismatch`] for a context other than the module's,
    /// or the driver's failure of the occupancy query.
    pub fn occupancy(
        &self,
        ctx: &Context,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> CudaResult<u32> {
        self.with_facts(ctx, |f| {
            ctx.bind()?;
            self.occupancy_of(f, block_threads, shared_mem_bytes)
        })
    }

    /// The largest cooperative grid (blocks) in `ctx` for this block size and
    /// dynamic shared memory: resident blocks per SM times the SMs of the
    /// context's device. Refuses impossible configurations as
    /// [`Function::occupancy`] does.
    ///
    /// # Errors
    ///
    /// As for [`Function::occupancy`], or the driver's failure to read the
    /// device's SM count.
    pub fn max_cooperative_grid(
        &self,
        ctx: &Context,
        block_threads: u32,
        shared_mem_bytes: u32,
    ) -> CudaResult<u32> {
        Ok(self.occupancy(ctx, block_threads, shared_mem_bytes)? * ctx.device().sm_count()?)
    }

    /// The 1-D block size with the most resident threads per SM in `ctx`,
    /// the grid that fills the device at that size, and the dynamic shared
    /// memory `shared_mem(threads)` the kernel needs at each size: what
    /// `cudaOccupancyMaxPotentialBlockSizeVariableSMem` answers, computed
    /// here over [`Function::occupancy`] (the driver's
    /// `cuOccupancyMaxPotentialBlockSize` takes a C callback without a user
    /// pointer, through which a Rust closure cannot pass). Block sizes go
    /// from the largest the kernel and the device allow (at most
    /// `block_limit`, 0 for no limit) down in warp-size steps; the first with
    /// the most resident threads wins. A size whose shared memory exceeds
    /// what the function may get is skipped.
    ///
    /// # Errors
    ///
    /// [`LaunchError::ContextMismatch`] for a context other than the
    /// module's, the driver's failure to read the device's limits, or of an
    /// occupancy query.
    pub fn max_potential_block_size(
        &self,
        ctx: &Context,
        block_limit: u32,
        shared_mem: impl FnMut(u32) -> u64,
    ) -> CudaResult<PotentialBlockSize> {
        let device = ctx.device().limits()?;
        self.with_facts(ctx, |f| {
            ctx.bind()?;
            crate::launch::max_potential_block_size(
                device,
                &f.limits(),
                block_limit,
                shared_mem,
                |threads, bytes| self.occupancy_of(f, threads, bytes),
            )
        })
    }

    /// The cluster facts of `facts` (queried once; the context is bound).
    fn cluster_facts<'f>(&self, facts: &'f Facts) -> CudaResult<&'f ClusterFacts> {
        if let Some(c) = facts.cluster.get() {
            return Ok(c);
        }
        use CUfunction_attribute as A;
        let attr = |a| {
            // SAFETY: `facts.func` was resolved for the current context and
            // its module or library is kept loaded by `self`.
            unsafe { driver::func_get_attribute(a, facts.func) }
                .map(|v| v.max(0) as u32)
                .map_err(|e| self.err(e))
        };
        let required = Dim3::new(
            attr(A::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)?,
            attr(A::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT)?,
            attr(A::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH)?,
        );
        let non_portable = attr(A::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)? != 0;
        Ok(facts.cluster.get_or_init(|| ClusterFacts {
            // The driver reports 0 for each extent when none was compiled in.
            required: (required.x != 0).then_some(required),
            non_portable: AtomicBool::new(non_portable),
            answers: Mutex::new(([None; 8], 0)),
            last: LastCluster::default(),
        }))
    }

    /// Asks the driver an occupancy question about clusters (cached).
    fn cluster_query(
        &self,
        facts: &Facts,
        cf: &ClusterFacts,
        cfg: &LaunchConfig,
        q: ClusterQuestion,
    ) -> CudaResult<u32> {
        if let Some(v) = cf.answer(q) {
            return Ok(v);
        }
        let mut attr = CUlaunchAttribute {
            id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
            ..Default::default()
        };
        let cluster = match q {
            ClusterQuestion::Active { cluster, .. } => Some(cluster),
            ClusterQuestion::MaxSize { .. } => None,
        };
        if let Some(c) = cluster {
            attr.value.clusterDim.x = c.x;
            attr.value.clusterDim.y = c.y;
            attr.value.clusterDim.z = c.z;
        }
        let n = usize::from(cluster.is_some());
        let config = cfg.to_driver(
            std::ptr::null_mut(),
            &mut std::slice::from_mut(&mut attr)[..n],
        );
        // SAFETY: `facts.func` was resolved for the current context and its
        // module or library is kept loaded by `self`; `config` points only
        // at `attr`, alive for the call, and names no stream.
        let v = unsafe {
            match q {
                ClusterQuestion::MaxSize { .. } => {
                    driver::occupancy_max_potential_cluster_size(facts.func, &config)
                }
                ClusterQuestion::Active { .. } => {
                    driver::occupancy_max_active_clusters(facts.func, &config)
                }
            }
        }
        .map_err(|e| self.err(e))?
        .max(0) as u32;
        cf.remember(q, v);
        Ok(v)
    }

    fn cluster_limits_of(
        &self,
        facts: &Facts,
        cf: &ClusterFacts,
        cfg: &LaunchConfig,
    ) -> CudaResult<ClusterLimits> {
        let max_size = match cf.required {
            // A kernel compiled with its cluster runs with that one only;
            // whether it fits is asked next (cuOccupancyMaxActiveClusters).
            Some(r) => u32::try_from(r.product().unwrap_or(u64::MAX)).unwrap_or(u32::MAX),
            None => {
                let q = ClusterQuestion::MaxSize {
                    block: cfg.block,
                    smem: cfg.shared_mem_bytes,
                };
                self.cluster_query(facts, cf, cfg, q)?
            }
        };
        Ok(ClusterLimits {
            non_portable_allowed: cf.non_portable.load(Ordering::Relaxed),
            required: cf.required,
            max_size,
        })
    }

    /// Checks the cluster of a launch. Returns the active-cluster count and
    /// whether the launch must carry the cluster attribute: not for a
    /// kernel compiled with this very cluster (`__cluster_dims__`), which
    /// the driver applies anyway. The configuration the last launch checked
    /// is answered from [`LastCluster`], and every check is made again with
    /// those answers ([`cluster_fits`], without building an error); any
    /// other case, and any failure, goes to [`Function::check_cluster_slow`].
    #[inline]
    fn check_cluster_launch(
        &self,
        facts: &Facts,
        device: &DeviceLimits,
        cfg: &LaunchConfig,
        cluster: Dim3,
    ) -> CudaResult<(u32, bool)> {
        if let Some(cf) = facts.cluster.get()
            && let Some((max_size, active)) =
                cf.last
                    .get(LastCluster::key(cfg.block, cfg.shared_mem_bytes, cluster))
        {
            let limits = ClusterLimits {
                non_portable_allowed: cf.non_portable.load(Ordering::Relaxed),
                required: cf.required,
                max_size,
            };
            if cluster_fits(device, &limits, cfg, cluster, active) {
                return Ok((active, cf.required.is_none()));
            }
        }
        self.check_cluster_slow(facts, device, cfg, cluster)
    }

    /// [`Function::check_cluster_launch`] with its errors, cheapest check
    /// first: device and grid (no query), then the kernel's cluster limits,
    /// then whether one cluster fits (each driver answer cached).
    #[cold]
    #[inline(never)]
    fn check_cluster_slow(
        &self,
        facts: &Facts,
        device: &DeviceLimits,
        cfg: &LaunchConfig,
        cluster: Dim3,
    ) -> CudaResult<(u32, bool)> {
        check_cluster_shape(&self.name, device, cfg, cluster)?;
        let cf = self.cluster_facts(facts)?;
        let key = LastCluster::key(cfg.block, cfg.shared_mem_bytes, cluster);
        if let Some((max_size, active)) = cf.last.get(key) {
            // The same configuration as the last launch checked: the same
            // driver answers, every check made again with them.
            let limits = ClusterLimits {
                non_portable_allowed: cf.non_portable.load(Ordering::Relaxed),
                required: cf.required,
                max_size,
            };
            check_cluster_size(&self.name, device, &limits, cluster)?;
            check_cluster_fit(&self.name, device, cfg, cluster, active)?;
            return Ok((active, cf.required.is_none()));
        }
        let limits = self.cluster_limits_of(facts, cf, cfg)?;
        check_cluster_size(&self.name, device, &limits, cluster)?;
        let q = ClusterQuestion::Active {
            block: cfg.block,
            smem: cfg.shared_mem_bytes,
            cluster,
        };
        let active = self.cluster_query(facts, cf, cfg, q)?;
        check_cluster_fit(&self.name, device, cfg, cluster, active)?;
        cf.keep_last(key, limits.max_size, active);
        Ok((active, cf.required.is_none()))
    }

    /// What this function allows for thread-block clusters in `ctx` at the
    /// block size and dynamic shared memory of `cfg`: its compile-time
    /// cluster, whether non-portable sizes are allowed, and the largest
    /// cluster the device runs for it (`cuOccupancyMaxPotentialClusterSize`).
    ///
    /// # Errors
    ///
    /// [`LaunchError::ClusterNotSupported`] on a device without clusters,
    /// the block and shared-memory errors of [`Function::occupancy`], or a
    /// driver failure.
    pub fn cluster_limits(&self, ctx: &Context, cfg: &LaunchConfig) -> CudaResult<ClusterLimits> {
        self.with_facts(ctx, |facts| {
            ctx.bind()?;
            let device = ctx.device().limits()?;
            let one = LaunchConfig {
                cluster: Some(Dim3::new(1, 1, 1)),
                ..*cfg
            };
            check_cluster_shape(&self.name, device, &one, Dim3::new(1, 1, 1))?;
            let threads = cfg.block.product().unwrap_or(u64::MAX);
            check_block(&self.name, &facts.limits(), threads, cfg.shared_mem_bytes)?;
            let cf = self.cluster_facts(facts)?;
            self.cluster_limits_of(facts, cf, cfg)
        })
    }

    /// How many clusters of `cfg.cluster` can run at once in `ctx` at the
    /// block size and shared memory of `cfg` (`cuOccupancyMaxActiveClusters`),
    /// after the checks a cluster launch makes.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `cfg` has no cluster; the launch
    /// checks' [`LaunchError`]s (a cluster that does not fit at all is
    /// [`LaunchError::ClusterDoesNotFit`]); a driver failure.
    pub fn max_active_clusters(&self, ctx: &Context, cfg: &LaunchConfig) -> CudaResult<u32> {
        let Some(cluster) = cfg.cluster else {
            return Err(CudaError::invalid_argument(
                format!("Function::max_active_clusters of '{}'", self.name),
                "cfg",
                "the configuration has no cluster; set one with LaunchConfig::with_cluster".into(),
            ));
        };
        check_nonzero(&self.name, cfg)?;
        self.check_context(ctx)?;
        ctx.bind()?;
        let device = ctx.device().limits()?;
        self.with_facts(ctx, |facts| {
            check_shape(&self.name, device, &facts.limits(), cfg)?;
            Ok(self.check_cluster_launch(facts, device, cfg, cluster)?.0)
        })
    }

    /// Allows (or forbids again) clusters of more than
    /// [`PORTABLE_CLUSTER_SIZE`](crate::PORTABLE_CLUSTER_SIZE) blocks for
    /// this function in `ctx`
    /// (`CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`); compute
    /// capability 9.0 runs up to 16.
    ///
    /// # Errors
    ///
    /// [`LaunchError::ClusterNotSupported`] on a device without clusters, or
    /// a driver failure.
    pub fn allow_non_portable_cluster_size(&self, ctx: &Context, allow: bool) -> CudaResult<()> {
        self.with_facts(ctx, |facts| {
            ctx.bind()?;
            let device = ctx.device().limits()?;
            let one = LaunchConfig::new(1, 1).with_cluster(1);
            check_cluster_shape(&self.name, device, &one, Dim3::new(1, 1, 1))?;
            let cf = self.cluster_facts(facts)?;
            let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED;
            // SAFETY: `facts.func` was resolved for `ctx`, which is current,
            // and its module or library is kept loaded by `self`.
            unsafe { driver::func_set_attribute(facts.func, attr, i32::from(allow)) }
                .map_err(|e| self.err(e))?;
            cf.non_portable.store(allow, Ordering::Relaxed);
            cf.forget();
            Ok(())
        })
    }

    /// `(offset, size)` in bytes of each parameter, found once.
    ///
    /// For a kernel of a cubin image, the layout is the one the cubin
    /// declares (read when the image was loaded, its records checked
    /// against each other and against the total they state), confirmed by
    /// one driver query: the last parameter's offset and size. The driver
    /// reads the same records, so the one query catches a reader that
    /// disagrees with it; any disagreement falls back to asking the driver
    /// for every parameter. For PTX and fatbin images, and for functions
    /// from elsewhere ([`Function::from_raw`]), the driver is asked for each
    /// parameter, and for the one past the last.
    ///
    /// # Errors
    ///
    /// The driver's failure of `cuFuncGetParamInfo` / `cuKernelGetParamInfo`
    /// naming the kernel (the driver needs CUDA 12.4 or later for it), or of
    /// making the module's context current.
    pub fn param_layout(&self) -> CudaResult<Arc<[ParamSlot]>> {
        if let Some(l) = self.layout.get() {
            return Ok(l.clone());
        }
        if let Some(home) = &self.home {
            home.bind()?;
        }
        // A library kernel: its function in the current context first.
        // Asked before the function is loaded there, the driver loads the
        // kernel for the parameter query and then again for the context
        // (a first launch paid both, about 1.7x the raw driver's first
        // launch on an H100); loaded first, the queries are cheap, and
        // the launch that follows finds the function cached.
        let func = match self.handle {
            Handle::Function(f) => Some(f),
            Handle::Kernel(_) => match Context::current()? {
                Some(ctx) if self.check_context(&ctx).is_ok() => {
                    Some(self.with_facts(&ctx, |facts| Ok(facts.func))?)
                }
                _ => None,
            },
        };
        let query = |i: usize| {
            // SAFETY: the function or kernel belongs to a module or library
            // kept loaded by `self`; its home context (if any) is current,
            // and a library kernel's `func` is its function in the current
            // context (resolved just above).
            unsafe {
                match (func, self.handle) {
                    (Some(f), _) => driver::func_get_param_info(f, i),
                    (None, Handle::Kernel(k)) => driver::kernel_get_param_info(k, i),
                    (None, Handle::Function(f)) => driver::func_get_param_info(f, i),
                }
            }
        };
        if let Some(declared) = &self.declared
            && driver_confirms(&query, declared).map_err(|e| self.err(e))?
        {
            return Ok(self.layout.get_or_init(|| declared.clone()).clone());
        }
        let mut out = Vec::new();
        // The driver allows up to 32 KiB of parameters: at most 32764 one-byte ones.
        for i in 0..=32768 {
            match query(i) {
                Ok((offset, size)) => out.push(ParamSlot { offset, size }),
                // Past the last parameter the driver answers CUDA_ERROR_INVALID_VALUE.
                Err(CudaError::Driver(d)) if d.code == CUresult::CUDA_ERROR_INVALID_VALUE => break,
                Err(e) => return Err(self.err(e)),
            }
        }
        Ok(self.layout.get_or_init(|| out.into()).clone())
    }

    /// The layout this kernel's cubin declares (read when the image was
    /// loaded, not yet confirmed by the driver); `None` for PTX and fatbin
    /// images, functions from elsewhere, and a cubin whose records for this
    /// kernel disagree with each other. [`Function::param_layout`] uses it
    /// once the driver confirms it.
    pub fn declared_param_layout(&self) -> Option<&[ParamSlot]> {
        self.declared.as_deref()
    }

    /// The configuration checks of [`Function::launch_raw`] for launches in
    /// `ctx`, without launching ([`crate::DynKernel::check_config`]): the
    /// function's context, extents and shared memory against the device's
    /// and the function's limits, and for a cooperative launch whether the
    /// grid fits. The function's driver handle in `ctx`.
    pub(crate) fn check_config(
        &self,
        ctx: &Context,
        cfg: &LaunchConfig,
        cooperative: bool,
    ) -> CudaResult<CUfunction> {
        self.with_checked(ctx, cfg, cooperative, |_, facts| Ok(facts.func))
    }

    /// The checks of [`Function::check_config`], then `f` with the
    /// device's limits and the function's facts in `ctx` (made current):
    /// the function's context, extents and limits, then for a cooperative
    /// launch whether the grid fits. [`Function::launch_raw`] launches from
    /// inside `f`.
    #[inline]
    fn with_checked<R>(
        &self,
        ctx: &Context,
        cfg: &LaunchConfig,
        cooperative: bool,
        f: impl FnOnce(&DeviceLimits, &Facts) -> CudaResult<R>,
    ) -> CudaResult<R> {
        self.check_context(ctx)?;
        ctx.bind()?;
        let limits = ctx.device().limits()?;
        self.with_facts(ctx, |facts| {
            let blocks = shape_blocks(&self.name, limits, &facts.limits(), cfg)?;
            if cooperative {
                let threads = cfg.block.product().unwrap_or(u64::MAX) as u32;
                let per_sm = self.occupancy_of(facts, threads, cfg.shared_mem_bytes)?;
                check_cooperative(&self.name, limits, cfg, blocks, per_sm)?;
            }
            f(limits, facts)
        })
    }

    /// Launches `func` with a configuration [`Function::check_config`]
    /// passed: whether the driver captures the stream is still asked, the
    /// stream's context made current, and the launch queued (plain, or
    /// cooperative when `cooperative`).
    ///
    /// # Safety
    ///
    /// As for [`Function::launch_raw`]; and `func` is this function's
    /// handle in `stream`'s context, for which `cfg` passed
    /// [`Function::check_config`] with `cooperative`, with no cluster and
    /// no programmatic launch.
    #[inline]
    pub(crate) unsafe fn launch_prechecked(
        &self,
        stream: &Stream,
        func: CUfunction,
        cfg: &LaunchConfig,
        params: *mut *mut c_void,
        cooperative: bool,
    ) -> CudaResult<()> {
        stream.refuse_if_capturing(|| format!("launch of '{}'", self.name))?;
        stream.context().bind()?;
        // SAFETY: the caller's promise for `func`, `cfg` and `params`; the
        // stream's context is current.
        unsafe { self.launch_plain(stream, func, cfg, params, cooperative) }
    }

    /// Queues `func` with a checked configuration without cluster or
    /// programmatic attributes: plain, or cooperative when `cooperative`.
    ///
    /// # Safety
    ///
    /// As for [`Function::launch_ex`], with `stream`'s context current.
    #[inline]
    unsafe fn launch_plain(
        &self,
        stream: &Stream,
        func: CUfunction,
        cfg: &LaunchConfig,
        params: *mut *mut c_void,
        cooperative: bool,
    ) -> CudaResult<()> {
        let mut attrs = [CUlaunchAttribute::default()];
        if cooperative {
            attrs[0].id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attrs[0].value.cooperative = 1;
        }
        let n = usize::from(cooperative);
        // SAFETY: the caller's promise for `func`, `cfg` and `params`.
        unsafe { self.launch_ex(stream, func, cfg, &mut attrs[..n], params) }
    }

    /// `cuLaunchKernelEx` of `func` on `stream` (whose context is current)
    /// with `cfg` and the launch attributes `attrs`; a failure is noted as
    /// the context's sticky error when it is one.
    ///
    /// # Safety
    ///
    /// `func` is this function's handle in `stream`'s context, `cfg` and
    /// `attrs` were checked for it, and `params` holds one valid pointer per
    /// parameter to a value of its type.
    #[inline]
    unsafe fn launch_ex(
        &self,
        stream: &Stream,
        func: CUfunction,
        cfg: &LaunchConfig,
        attrs: &mut [CUlaunchAttribute],
        params: *mut *mut c_void,
    ) -> CudaResult<()> {
        let config = cfg.to_driver(stream.raw(), attrs);
        // SAFETY: the caller's promise; `attrs` outlives the call.
        let r = unsafe { driver::launch_kernel_ex(&config, func, params, std::ptr::null_mut()) };
        let ctx = stream.context();
        r.map_err(|e| {
            ctx.note(
                e.with_context(|| format!("kernel '{}' on {}", self.name, ctx.device().name())),
            )
        })
    }

    /// Validates and launches with raw parameter pointers: the launch path
    /// of the crate (besides `Function::launch_prechecked`, for a
    /// configuration checked once by [`crate::DynKernel::check_config`]), plain or
    /// cooperative, with the launch attributes of
    /// `cfg` (cluster, programmatic dependent launch). Checks run cheapest
    /// first: whether the driver captures the stream (one query), the
    /// function's context, then zero extents with the device's and the
    /// function's limits (cached), then,
    /// for a cooperative launch, occupancy times SMs (cached), then for a
    /// cluster launch the device, the grid, the kernel's cluster limits and
    /// `cuOccupancyMaxActiveClusters` (cached), then for a programmatic
    /// launch the device's compute capability. Whether the kernel may be
    /// launched programmatically is the caller's to check
    /// ([`DynKernel::allow_programmatic_launch`](crate::DynKernel::allow_programmatic_launch)).
    /// A stream being captured into a graph ([`Stream::capture`]) is
    /// refused: launch into a graph through its [`Capture`](crate::Capture).
    ///
    /// # Errors
    ///
    /// The [`LaunchError`] of the first check that fails, a stream being
    /// captured ([`CudaError::InvalidArgument`]), or the driver's failure (noted
    /// as the context's sticky error when it is one).
    ///
    /// # Safety
    ///
    /// `params` must hold one valid pointer per kernel parameter, each to a
    /// value of that parameter's type. When `cfg.programmatic` is set, every
    /// block of the kernel must wait for the grids before it
    /// (`cudaGridDependencySynchronize`, PTX `griddepcontrol.wait`) before it
    /// touches memory that earlier work on the stream uses, and before it
    /// exits.
    #[inline]
    pub unsafe fn launch_raw(
        &self,
        stream: &Stream,
        cfg: &LaunchConfig,
        params: *mut *mut c_void,
        cooperative: bool,
    ) -> CudaResult<()> {
        stream.refuse_if_capturing(|| format!("launch of '{}'", self.name))?;
        let ctx = stream.context();
        // The checks of a configuration, as a prepared launch makes them
        // once (`check_config`): context, extents, limits, cooperative fit.
        self.with_checked(ctx, cfg, cooperative, |limits, facts| {
            if cfg.cluster.is_none() && !cfg.programmatic {
                // SAFETY: the configuration was checked for `facts.func`,
                // this function in the stream's context, made current
                // above; the caller vouches for `params`.
                return unsafe { self.launch_plain(stream, facts.func, cfg, params, cooperative) };
            }
            // SAFETY: the configuration checks above passed; the caller's
            // promise for `params`.
            unsafe { self.launch_with_attributes(stream, limits, facts, cfg, params, cooperative) }
        })
    }

    /// The rest of [`Function::launch_raw`] for a cluster or programmatic
    /// launch: the launch attributes' own checks, then the launch with
    /// them. Kept out of the plain launch's code.
    ///
    /// # Safety
    ///
    /// As for [`Function::launch_raw`], after its configuration checks
    /// with `limits` (the stream's device's) and `facts` (this function's
    /// in the stream's context, which is current).
    #[inline(never)]
    unsafe fn launch_with_attributes(
        &self,
        stream: &Stream,
        limits: &DeviceLimits,
        facts: &Facts,
        cfg: &LaunchConfig,
        params: *mut *mut c_void,
        cooperative: bool,
    ) -> CudaResult<()> {
        // One entry point for every kind: cuLaunchKernelEx, with the
        // attributes asked for. On the H200 its raw cost was 0.977x to
        // 0.995x that of cuLaunchCooperativeKernel across runs.
        let mut attrs = [CUlaunchAttribute::default(); 3];
        let mut n = 0;
        if cooperative {
            attrs[n].id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attrs[n].value.cooperative = 1;
            n += 1;
        }
        if let Some(cluster) = cfg.cluster
            && self.check_cluster_launch(facts, limits, cfg, cluster)?.1
        {
            attrs[n].id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attrs[n].value.clusterDim.x = cluster.x;
            attrs[n].value.clusterDim.y = cluster.y;
            attrs[n].value.clusterDim.z = cluster.z;
            n += 1;
        }
        if cfg.programmatic {
            check_programmatic(&self.name, limits, cfg)?;
            attrs[n].id =
                CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attrs[n].value.programmaticStreamSerializationAllowed = 1;
            n += 1;
        }
        // SAFETY: validated configuration and attributes; the function
        // is this context's; the caller vouches for `params` (and, for a
        // programmatic launch, for the kernel's wait).
        unsafe { self.launch_ex(stream, facts.func, cfg, &mut attrs[..n], params) }
    }
}

/// Whether `query` (the driver's answer for one parameter index) gives the
/// cubin's `declared` layout at its last parameter, or for a kernel
/// without parameters refuses parameter 0 as past the end.
fn driver_confirms(
    query: &impl Fn(usize) -> CudaResult<(usize, usize)>,
    declared: &[ParamSlot],
) -> CudaResult<bool> {
    let last = declared.len().checked_sub(1);
    match (query(last.unwrap_or(0)), last) {
        (Ok((offset, size)), Some(i)) => Ok(declared[i] == ParamSlot { offset, size }),
        (Ok(_), None) => Ok(false),
        (Err(CudaError::Driver(d)), _) if d.code == CUresult::CUDA_ERROR_INVALID_VALUE => {
            Ok(last.is_none())
        }
        (Err(e), _) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DriverError;

    /// The indices a test driver was asked.
    type Asked = std::rc::Rc<std::cell::RefCell<Vec<usize>>>;

    /// A driver answering `layout` for parameter queries, past its end
    /// `CUDA_ERROR_INVALID_VALUE`; and the indices asked.
    fn driver(
        layout: &[(usize, usize)],
    ) -> (impl Fn(usize) -> CudaResult<(usize, usize)> + '_, Asked) {
        let asked = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let log = asked.clone();
        let q = move |i: usize| {
            log.borrow_mut().push(i);
            layout.get(i).copied().ok_or_else(|| {
                CudaError::Driver(DriverError::new(
                    "cuKernelGetParamInfo",
                    CUresult::CUDA_ERROR_INVALID_VALUE,
                ))
            })
        };
        (q, asked)
    }

    fn slots(l: &[(usize, usize)]) -> Vec<ParamSlot> {
        l.iter()
            .map(|&(offset, size)| ParamSlot { offset, size })
            .collect()
    }

    #[test]
    fn a_declared_layout_is_confirmed_by_one_query_of_its_last_parameter() {
        let saxpy = [(0, 24), (24, 4), (32, 56), (88, 56)];
        let (q, asked) = driver(&saxpy);
        assert!(driver_confirms(&q, &slots(&saxpy)).unwrap());
        assert_eq!(*asked.borrow(), vec![3], "one query, the last parameter");
        // No parameters: the driver must refuse parameter 0.
        let (q, asked) = driver(&[]);
        assert!(driver_confirms(&q, &[]).unwrap());
        assert_eq!(*asked.borrow(), vec![0]);
    }

    #[test]
    fn a_declared_layout_the_driver_disagrees_with_is_not_used() {
        let real = [(0, 8), (8, 4)];
        // The last parameter's size or offset differs.
        for forged in [[(0, 8), (8, 8)], [(0, 8), (12, 4)]] {
            let (q, _) = driver(&real);
            assert!(!driver_confirms(&q, &slots(&forged)).unwrap(), "{forged:?}");
        }
        // More parameters declared than the driver has.
        let (q, _) = driver(&real);
        assert!(!driver_confirms(&q, &slots(&[(0, 8), (8, 4), (16, 8)])).unwrap());
        // None declared, but the driver has one.
        let (q, _) = driver(&real);
        assert!(!driver_confirms(&q, &[]).unwrap());
        // Another driver error is passed on, not taken as an answer.
        let q = |_| {
            Err(CudaError::Driver(DriverError::new(
                "cuKernelGetParamInfo",
                CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED,
            )))
        };
        assert!(driver_confirms(&q, &slots(&real)).is_err());
    }

    fn words(key: [u32; 7], max_size: u32, active: u32) -> [u32; 10] {
        let mut w = [0; 10];
        w[..7].copy_from_slice(&key);
        (w[7], w[8], w[9]) = (max_size, active, 1);
        w
    }

    #[test]
    fn the_last_cluster_answers_are_given_for_their_configuration_only() {
        let last = LastCluster::default();
        let key = LastCluster::key(Dim3::new(256, 1, 1), 0, Dim3::new(2, 1, 1));
        assert_eq!(last.get(key), None, "nothing kept yet");
        last.store(words(key, 8, 66));
        assert_eq!(last.get(key), Some((8, 66)));
        // Another block, shared memory or cluster is not answered.
        for other in [
            LastCluster::key(Dim3::new(128, 1, 1), 0, Dim3::new(2, 1, 1)),
            LastCluster::key(Dim3::new(256, 1, 1), 1024, Dim3::new(2, 1, 1)),
            LastCluster::key(Dim3::new(256, 1, 1), 0, Dim3::new(1, 2, 1)),
        ] {
            assert_eq!(last.get(other), None, "{other:?}");
        }
        // Forgotten (the non-portable attribute changed): no answer.
        last.store([0; 10]);
        assert_eq!(last.get(key), None);
    }

    #[test]
    fn a_reader_never_sees_one_configurations_key_with_anothers_answers() {
        // Writers store configurations whose answers are a function of the
        // key while readers check every answer they get: a torn read would
        // pair a key with another configuration's answers. Eight keys, so
        // that a reader's key is the stored one often; each reader runs
        // until it has checked 10,000 answers, or for 30 s on a machine too
        // busy to give it that many (CI's two cores run other tests beside
        // this one; a fixed count of tries once ended with fewer than 100).
        let last = LastCluster::default();
        let lock = Mutex::new(());
        let key = |n: u32| LastCluster::key(Dim3::new(n, 1, 1), n * 7, Dim3::new(n % 4 + 1, 1, 1));
        let stop = AtomicBool::new(false);
        let seen = AtomicU64::new(0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        std::thread::scope(|s| {
            for w in 0..2u32 {
                let (last, lock, stop) = (&last, &lock, &stop);
                s.spawn(move || {
                    let mut n = w;
                    while !stop.load(Ordering::Relaxed) {
                        let _g = lock.lock().unwrap();
                        last.store(words(key(n % 8), n % 8 * 3, n % 8 * 5));
                        n += 1;
                    }
                });
            }
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut i = 0u32;
                        while seen.load(Ordering::Relaxed) < 10_000
                            && (!i.is_multiple_of(1024) || std::time::Instant::now() < deadline)
                        {
                            if let Some((m, a)) = last.get(key(i % 8)) {
                                assert_eq!((m, a), (i % 8 * 3, i % 8 * 5));
                                seen.fetch_add(1, Ordering::Relaxed);
                            }
                            i = i.wrapping_add(1);
                        }
                    })
                })
                .collect();
            let done: Vec<_> = readers.into_iter().map(|r| r.join()).collect();
            stop.store(true, Ordering::Relaxed);
            assert!(done.iter().all(Result::is_ok), "a reader saw a torn entry");
        });
        // The readers were answered (a cache that never answers would pass
        // the check above).
        assert!(
            seen.load(Ordering::Relaxed) >= 100,
            "{} answers in 30 s",
            seen.load(Ordering::Relaxed)
        );
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
