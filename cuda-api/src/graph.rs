//! CUDA graphs, safely: work captured from a stream ([`Stream::capture`])
//! or assembled from other graphs ([`CudaGraph::add_child_graph`], conditional
//! [`CudaGraph::add_if`] / [`CudaGraph::add_while`] nodes, or nested ones built in
//! place with [`CudaGraph::add_if_with`] / [`CudaGraph::add_while_with`]), instantiated into a
//! [`CudaGraphExec`] that is launched or uploaded on a stream, and whose kernel
//! nodes can be changed in place ([`CudaGraphExec::update_kernel`]) with the
//! checks of a launch.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, c_char};
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cuda_sys::{
    CU_GRAPH_COND_ASSIGN_DEFAULT, CUDA_CONDITIONAL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS, CUgraph,
    CUgraphConditionalHandle, CUgraphConditionalNodeType, CUgraphExec, CUgraphNode,
    CUgraphNodeParams, CUgraphNodeType, CUstreamCaptureMode, CUstreamCaptureStatus,
};

use crate::context::Context;
use crate::driver;
use crate::error::{CudaError, CudaResult};
use crate::kernel::args::ParamCopy;
use crate::kernel::{ArgBlock, DynKernel};
use crate::launch::{Dim3, LaunchConfig};
use crate::memory::Allocation;
use crate::stream::Stream;

/// Which other CUDA calls a stream capture forbids while it runs
/// (`CUstreamCaptureMode`): calls that could wait for or free memory the
/// captured work is meant to use fail instead of running out of order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureMode {
    /// Such calls fail on every thread while the capture runs.
    Global,
    /// Such calls fail on the capturing thread only (the usual choice).
    ThreadLocal,
    /// No call is forbidden: the caller orders them itself.
    Relaxed,
}

impl CaptureMode {
    fn raw(self) -> CUstreamCaptureMode {
        match self {
            CaptureMode::Global => CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
            CaptureMode::ThreadLocal => CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            CaptureMode::Relaxed => CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        }
    }
}

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// An owned `CUgraph`, destroyed on drop.
struct RawGraph {
    raw: CUgraph,
}

// SAFETY: a graph handle may be used from any thread; every use goes
// through the `Mutex` in `Shared`, which serialises them as the driver asks.
unsafe impl Send for RawGraph {}

/// A graph and what every holder of it needs: shared by a [`CudaGraph`] and the
/// [`CudaGraphExec`]s made from it (their kernel nodes are the graph's).
struct Shared {
    id: u64,
    ctx: Context,
    graph: Mutex<RawGraph>,
    /// False for a conditional node's body graph, which the node owns
    /// ([`ConditionalBody`]).
    owned: bool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let raw = self.graph.get_mut().unwrap_or_else(|p| p.into_inner()).raw;
        let r = self.ctx.bind().and_then(|_| {
            // SAFETY: we own the graph; every executable graph made from it
            // holds this `Shared` and is gone, so this is the last use.
            unsafe { driver::graph_destroy(raw) }
        });
        if let Err(e) = r {
            self.ctx.report_release_error("graph", &e);
        }
    }
}

impl Shared {
    fn new(raw: CUgraph, ctx: Context, id: u64) -> Arc<Shared> {
        Arc::new(Shared {
            id,
            ctx,
            graph: Mutex::new(RawGraph { raw }),
            owned: true,
        })
    }

    /// A graph the driver owns (a conditional node's body), never destroyed
    /// through this handle.
    fn borrowed(raw: CUgraph, ctx: Context) -> Arc<Shared> {
        Arc::new(Shared {
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            ctx,
            graph: Mutex::new(RawGraph { raw }),
            owned: false,
        })
    }

    /// The graph, locked (the driver does not synchronise graph objects).
    /// A panic while it was held left no half-made state behind, so a
    /// poisoned lock is taken as it is.
    fn lock(&self) -> MutexGuard<'_, RawGraph> {
        self.graph.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn check_node(&self, call: &str, what: &str, node: &GraphNode) -> CudaResult<()> {
        if node.graph == self.id {
            Ok(())
        } else {
            Err(CudaError::invalid_argument(
                call,
                what,
                format!(
                    "node {:p} belongs to graph #{} but this is graph #{}; pass a node of this graph",
                    node.raw, node.graph, self.id
                ),
            ))
        }
    }

    fn check_context(&self, call: &str, what: &str, other: &Context) -> CudaResult<()> {
        if other == &self.ctx {
            Ok(())
        } else {
            Err(CudaError::invalid_argument(
                call,
                what,
                format!(
                    "it belongs to {other} but the graph to {}; every kernel of a graph runs in one context",
                    self.ctx
                ),
            ))
        }
    }

    fn kernel_nodes(&self) -> CudaResult<Vec<KernelNode>> {
        let g = self.lock();
        self.ctx.bind()?;
        // SAFETY: the graph is live while `self` is, and locked.
        let count = unsafe { driver::graph_get_nodes(g.raw, None) }?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut nodes: Vec<CUgraphNode> = vec![std::ptr::null_mut(); count];
        // SAFETY: as above; `nodes` holds `count` entries.
        let count = unsafe { driver::graph_get_nodes(g.raw, Some(&mut nodes)) }?;
        nodes.truncate(count);
        let mut out = Vec::new();
        for raw in nodes {
            // SAFETY: `raw` is a node of the locked, live graph.
            if unsafe { driver::graph_node_get_type(raw) }?
                != CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL
            {
                continue;
            }
            // SAFETY: as above, and a kernel node.
            let p = unsafe { driver::graph_kernel_node_get_params(raw) }?;
            out.push(KernelNode {
                node: GraphNode {
                    raw,
                    graph: self.id,
                },
                name: kernel_name(&p)?,
                config: LaunchConfig {
                    grid: Dim3::new(p.gridDimX, p.gridDimY, p.gridDimZ),
                    block: Dim3::new(p.blockDimX, p.blockDimY, p.blockDimZ),
                    shared_mem_bytes: p.sharedMemBytes,
                    // The node parameters do not carry launch attributes.
                    cluster: None,
                    programmatic: false,
                },
            });
        }
        Ok(out)
    }
}

/// The name of the function a kernel node runs, from the driver.
fn kernel_name(p: &CUDA_KERNEL_NODE_PARAMS) -> CudaResult<String> {
    let mut name: *const c_char = std::ptr::null();
    if p.kern.is_null() {
        // SAFETY: `func` is the live function of a node of a live graph;
        // `name` is a valid out-pointer.
        unsafe { driver::func_get_name(&mut name, p.func) }?;
    } else {
        // SAFETY: as above, for the node's library kernel.
        unsafe { driver::kernel_get_name(&mut name, p.kern) }?;
    }
    if name.is_null() {
        return Ok(String::new());
    }
    // SAFETY: the driver returned a NUL-terminated string it keeps alive
    // as long as the function; it is copied at once.
    Ok(unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned())
}

/// One node of a [`CudaGraph`]: a handle to name it as a dependency, or (for a
/// kernel node) to update it in an executable graph. It is meaningful only
/// for the graph that made it; other graphs refuse it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct GraphNode {
    raw: CUgraphNode,
    graph: u64,
}

// SAFETY: a node handle is an identifier; the driver is only given it
// under its graph's lock, after checking that it is that graph's.
unsafe impl Send for GraphNode {}
// SAFETY: as above.
unsafe impl Sync for GraphNode {}

impl fmt::Debug for GraphNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GraphNode({:p} of graph #{})", self.raw, self.graph)
    }
}

/// A kernel node of a graph, as the driver reports it.
#[derive(Debug, Clone)]
pub struct KernelNode {
    node: GraphNode,
    name: String,
    config: LaunchConfig,
}

impl KernelNode {
    /// The node.
    pub fn node(&self) -> GraphNode {
        self.node
    }

    /// The name of the function it runs (the mangled name for a C++ kernel).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its grid, block and dynamic shared memory (launch attributes such
    /// as a cluster are not reported: `cluster` is `None`).
    pub fn config(&self) -> LaunchConfig {
        self.config
    }
}

/// The condition of a conditional node ([`CudaGraph::add_if`],
/// [`CudaGraph::add_while`]): a value kernels of the graph set on the device
/// (`cudaGraphSetConditional`), created by [`CudaGraph::condition`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Condition {
    raw: CUgraphConditionalHandle,
    graph: u64,
}

impl fmt::Debug for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Condition({:#x} of graph #{})", self.raw, self.graph)
    }
}

impl Condition {
    /// The handle, to pass to a kernel of the graph (a
    /// `cudaGraphConditionalHandle`, 8 bytes) that sets the condition with
    /// `cudaGraphSetConditional`. The driver defines that call only for
    /// kernels of the graph that made the handle (or of its child graphs).
    pub fn raw(&self) -> u64 {
        self.raw
    }
}

/// The driver functions conditional nodes need. The loader resolves each at
/// the CUDA version the specs record for it, and a driver without one gives
/// [`CudaError::NotSupported`] naming the function and that version.
const CONDITIONAL_FUNCTIONS: [&str; 2] = ["cuGraphConditionalHandleCreate", "cuGraphAddNode"];

const IF: CUgraphConditionalNodeType = CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_IF;
const WHILE: CUgraphConditionalNodeType = CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_WHILE;

fn require_conditional_nodes() -> CudaResult<()> {
    for f in CONDITIONAL_FUNCTIONS {
        cuda_sys::loader::resolve(f)?;
    }
    Ok(())
}

/// A CUDA graph of work in one context, borrowing the buffers its kernels
/// use for `'a`. Made by [`Stream::capture`] or [`CudaGraph::new`]; run
/// after [`CudaGraph::instantiate`].
///
/// # What ties a graph to its buffers
///
/// A graph replays the device addresses it was given, long after the call
/// that gave them. So a graph borrows every buffer its kernels use for its
/// whole life: a [`CudaGraph<'a>`] and the [`CudaGraphExec<'a>`] made from it hold
/// the buffers of the [`ArgBlock<'a>`]s launched into them (borrowed for
/// `'a`, `&mut` where a kernel writes), and every launch of the executable
/// graph notes that it uses them ([`Allocation::record_use`]), so host reads
/// and frees wait for it. While a stream is being captured, work queued on
/// it by any other way than the [`Capture`] (a plain launch, an asynchronous
/// copy, an event recorded on it that another stream could wait for) is
/// refused: it would enter the graph with borrows that end before the graph.
///
/// Graph and executable-graph handles are released in that order (the
/// executable graph first); the driver finishes a launch that is still
/// running before it frees an executable graph. See NVIDIA's
/// [graph management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html)
/// and [stream capture](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
/// reference.
pub struct CudaGraph<'a> {
    shared: Arc<Shared>,
    /// Every buffer a node uses, once each.
    uses: Vec<&'a Allocation>,
}

impl fmt::Debug for CudaGraph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaGraph")
            .field("id", &self.shared.id)
            .field("context", &self.shared.ctx)
            .field("buffers", &self.uses.len())
            .finish()
    }
}

fn add_uses<'a>(list: &mut Vec<&'a Allocation>, more: impl IntoIterator<Item = &'a Allocation>) {
    for a in more {
        if !list.iter().any(|b| std::ptr::eq(*b, a)) {
            list.push(a);
        }
    }
}

impl<'a> CudaGraph<'a> {
    /// An empty graph in `ctx` (`cuGraphCreate`), to fill with child graphs
    /// and conditional nodes.
    ///
    /// # Errors
    ///
    /// A driver error (binding `ctx`, creating the graph).
    pub fn new(ctx: &Context) -> CudaResult<CudaGraph<'a>> {
        ctx.bind()?;
        let raw = driver::graph_create(0)?;
        Ok(CudaGraph {
            shared: Shared::new(
                raw,
                ctx.clone(),
                NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            ),
            uses: Vec::new(),
        })
    }

    /// The context its kernels run in.
    pub fn context(&self) -> &Context {
        &self.shared.ctx
    }

    /// The kernel nodes at the graph's top level (not those inside child
    /// graphs or conditional bodies), each with the name of its function
    /// and its configuration, in the driver's order.
    ///
    /// # Errors
    ///
    /// A driver error listing the nodes or reading one.
    pub fn kernel_nodes(&self) -> CudaResult<Vec<KernelNode>> {
        self.shared.kernel_nodes()
    }

    fn raw_deps(&self, call: &str, deps: &[GraphNode]) -> CudaResult<Vec<CUgraphNode>> {
        deps.iter()
            .enumerate()
            .map(|(i, d)| {
                self.shared
                    .check_node(call, &format!("deps[{i}]"), d)
                    .map(|_| d.raw)
            })
            .collect()
    }

    /// Adds a node that runs a copy of `child` (taken now: later changes to
    /// `child` do not reach this graph) after every node of `deps`. The
    /// graph then borrows `child`'s buffers too.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] when `child` is of another context or a
    /// node of `deps` of another graph; a driver error.
    pub fn add_child_graph(
        &mut self,
        child: &CudaGraph<'a>,
        deps: &[GraphNode],
    ) -> CudaResult<GraphNode> {
        self.add_child_graph_as("CudaGraph::add_child_graph", child, deps)
    }

    fn add_child_graph_as(
        &mut self,
        call: &str,
        child: &CudaGraph<'a>,
        deps: &[GraphNode],
    ) -> CudaResult<GraphNode> {
        self.shared
            .check_context(call, "child", &child.shared.ctx)?;
        let deps = self.raw_deps(call, deps)?;
        let g = self.shared.lock();
        let c = child.shared.lock();
        self.shared.ctx.bind()?;
        // SAFETY: both graphs are live and locked (distinct: `child` is
        // borrowed while `self` is borrowed mutably); `deps` are nodes of
        // this graph (checked above).
        let raw = unsafe { driver::graph_add_child_graph_node(g.raw, &deps, c.raw) }?;
        drop((c, g));
        add_uses(&mut self.uses, child.uses.iter().copied());
        Ok(GraphNode {
            raw,
            graph: self.shared.id,
        })
    }

    /// A new condition for conditional nodes of this graph
    /// (`cuGraphConditionalHandleCreate`): with `Some(v)`, every launch of
    /// the graph starts with the value `v`; with `None`, the value is set
    /// only by kernels (and starts at 0).
    ///
    /// # Errors
    ///
    /// [`CudaError::NotSupported`] when the driver has no conditional nodes
    /// (they came with CUDA 12.3; the error names the function and the
    /// version); a driver error.
    pub fn condition(&mut self, default: Option<u32>) -> CudaResult<Condition> {
        require_conditional_nodes()?;
        let g = self.shared.lock();
        self.shared.ctx.bind()?;
        let flags = if default.is_some() {
            CU_GRAPH_COND_ASSIGN_DEFAULT
        } else {
            0
        };
        // SAFETY: the graph is live and locked; the context is live while `self` is.
        let raw = unsafe {
            driver::graph_conditional_handle_create(
                g.raw,
                self.shared.ctx.raw(),
                default.unwrap_or(0),
                flags,
            )
        }?;
        Ok(Condition {
            raw,
            graph: self.shared.id,
        })
    }

    /// Adds a node that runs a copy of `body` once when `cond` is non-zero
    /// at that point, after every node of `deps`.
    ///
    /// # Errors
    ///
    /// As [`CudaGraph::add_while`].
    pub fn add_if(
        &mut self,
        cond: &Condition,
        body: &CudaGraph<'a>,
        deps: &[GraphNode],
    ) -> CudaResult<GraphNode> {
        self.add_copied("CudaGraph::add_if", IF, cond, body, deps)
    }

    /// Adds a node that runs a copy of `body` again and again while `cond`
    /// is non-zero (checked before each run), after every node of `deps`.
    /// A kernel of `body` must eventually set the condition to 0.
    ///
    /// `body` is embedded as a child graph, and the driver refuses a child
    /// graph that holds conditional nodes: to nest an if or a while inside
    /// the body, build it in place with [`CudaGraph::add_while_with`].
    ///
    /// # Errors
    ///
    /// [`CudaError::NotSupported`] when the driver has no conditional nodes;
    /// [`CudaError::InvalidArgument`] when `cond` or a node of `deps` is of
    /// another graph, or `body` of another context; a driver error (the
    /// driver refuses bodies with node kinds conditional bodies cannot hold:
    /// kernel, empty, memset, memcpy, child-graph and conditional nodes are
    /// allowed, and a child graph may not hold conditional nodes).
    pub fn add_while(
        &mut self,
        cond: &Condition,
        body: &CudaGraph<'a>,
        deps: &[GraphNode],
    ) -> CudaResult<GraphNode> {
        self.add_copied("CudaGraph::add_while", WHILE, cond, body, deps)
    }

    /// Adds an if node after every node of `deps` and lets `build` fill its
    /// body in place: what `build` adds to the [`ConditionalBody`] runs once
    /// when `cond` is non-zero at that point. Unlike [`CudaGraph::add_if`],
    /// the body may hold conditional nodes (an if or a while nested inside
    /// it), whose conditions the body makes ([`ConditionalBody::condition`])
    /// and kernels inside the body set. The graph then borrows the buffers
    /// of everything added to the body.
    ///
    /// # Errors
    ///
    /// As [`CudaGraph::add_while_with`].
    pub fn add_if_with<E: From<CudaError>>(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'a, 'id>) -> Result<(), E>,
    ) -> Result<GraphNode, E> {
        self.add_conditional("CudaGraph::add_if_with", IF, cond, deps, build)
    }

    /// Adds a while node after every node of `deps` and lets `build` fill
    /// its body in place: what `build` adds to the [`ConditionalBody`] runs
    /// again and again while `cond` is non-zero (checked before each run).
    /// The body may hold conditional nodes (see [`CudaGraph::add_if_with`]).
    ///
    /// ```no_run
    /// # fn main() -> cuda_api::CudaResult<()> {
    /// // GPU. A while loop whose body runs `step` and then, when a flag of
    /// // the body is set, `step` once more. `step` stands for a captured
    /// // graph (`Stream::capture`) whose kernels clear `outer` when the loop
    /// // is done and set `inner` (each through `Condition::raw` passed to
    /// // the kernel, which calls `cudaGraphSetConditional`).
    /// use cuda_api::{CudaDevice, CudaGraph};
    /// let ctx = CudaDevice::get(0)?.primary_context()?;
    /// let step = CudaGraph::new(&ctx)?;
    /// let mut graph = CudaGraph::new(&ctx)?;
    /// let outer = graph.condition(Some(1))?;
    /// graph.add_while_with(&outer, &[], |body| -> cuda_api::CudaResult<()> {
    ///     let first = body.add_child_graph(&step, &[])?;
    ///     let inner = body.condition(Some(0))?;
    ///     body.add_if(&inner, &step, &[first])?;
    ///     Ok(())
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`CudaError::NotSupported`] when the driver has no conditional nodes;
    /// [`CudaError::InvalidArgument`] when `cond` or a node of `deps` is of
    /// another graph; a driver error adding the node; `build`'s error. On
    /// any error the node is removed again, with what `build` added.
    pub fn add_while_with<E: From<CudaError>>(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'a, 'id>) -> Result<(), E>,
    ) -> Result<GraphNode, E> {
        self.add_conditional("CudaGraph::add_while_with", WHILE, cond, deps, build)
    }

    /// A conditional node whose body is a copy of `body`.
    fn add_copied(
        &mut self,
        call: &str,
        kind: CUgraphConditionalNodeType,
        cond: &Condition,
        body: &CudaGraph<'a>,
        deps: &[GraphNode],
    ) -> CudaResult<GraphNode> {
        self.shared.check_context(call, "body", &body.shared.ctx)?;
        self.add_conditional(call, kind, cond, deps, |b| {
            b.graph.add_child_graph_as(call, body, &[]).map(|_| ())
        })
    }

    fn add_conditional<E: From<CudaError>>(
        &mut self,
        call: &str,
        kind: CUgraphConditionalNodeType,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'a, 'id>) -> Result<(), E>,
    ) -> Result<GraphNode, E> {
        require_conditional_nodes()?;
        if cond.graph != self.shared.id {
            return Err(CudaError::invalid_argument(
                call,
                "cond",
                format!(
                    "the condition was made by graph #{} but this is graph #{}; make it with the condition() of the graph or conditional body that gets the node",
                    cond.graph, self.shared.id
                ),
            )
            .into());
        }
        let deps = self.raw_deps(call, deps)?;
        // Held while `build` fills the body (the body graph is part of this
        // graph); `build` cannot reach this graph, which is borrowed mutably.
        let g = self.shared.lock();
        self.shared.ctx.bind()?;
        let mut params = CUgraphNodeParams {
            type_: CUgraphNodeType::CU_GRAPH_NODE_TYPE_CONDITIONAL,
            ..Default::default()
        };
        params.anon1.conditional = CUDA_CONDITIONAL_NODE_PARAMS {
            handle: cond.raw,
            type_: kind,
            size: 1,
            // An output: the driver points it at its own array of body graphs.
            phGraph_out: std::ptr::null_mut(),
            ctx: self.shared.ctx.raw(),
        };
        // SAFETY: the graph is live and locked; `deps` are its nodes; the
        // parameters are a conditional node's with one body; the handle is
        // this graph's (checked above) and the context live.
        let raw = unsafe { driver::graph_add_node(g.raw, &deps, None, &mut params) }?;
        // SAFETY: the union holds the conditional parameters written above,
        // which the driver completed: `phGraph_out` now points to its array
        // of `size` (1) body graphs, owned by the node.
        let out = unsafe { params.anon1.conditional.phGraph_out };
        let body_graph = if out.is_null() {
            std::ptr::null_mut()
        } else {
            // SAFETY: a non-null pointer to the driver's array of one graph.
            unsafe { *out }
        };
        let built = if body_graph.is_null() {
            Err(CudaError::invalid_argument(
                call,
                "body",
                "the driver returned no body graph for the conditional node".into(),
            )
            .into())
        } else {
            // The driver made `body_graph` for the node, which owns it (and
            // destroys it with the node); the handle given to `build` never
            // destroys it and cannot outlive this call: `ConditionalBody` has
            // no constructor of its own, and its brand `'id`, universal in
            // `build`'s bound, gives it a type no other body has (so `build`
            // cannot swap it with another graph's) and no outer variable
            // can name (so `build` cannot store it).
            let mut body = ConditionalBody {
                graph: CudaGraph {
                    shared: Shared::borrowed(body_graph, self.shared.ctx.clone()),
                    uses: Vec::new(),
                },
                _brand: PhantomData,
            };
            build(&mut body).map(|()| body.graph.uses)
        };
        match built {
            Ok(uses) => {
                drop(g);
                add_uses(&mut self.uses, uses);
                Ok(GraphNode {
                    raw,
                    graph: self.shared.id,
                })
            }
            Err(e) => {
                let _ = self.shared.ctx.bind();
                // SAFETY: the node was just added and is not handed out; the
                // body handle is gone, and nodes and conditions of the body
                // carry its graph id, which no other graph accepts.
                let _ = unsafe { driver::graph_destroy_node(raw) };
                drop(g);
                Err(e)
            }
        }
    }

    /// Instantiates the graph (`cuGraphInstantiate`) as it is now.
    ///
    /// # Errors
    ///
    /// A driver error (for example a graph the driver cannot run).
    pub fn instantiate(&self) -> CudaResult<CudaGraphExec<'a>> {
        let g = self.shared.lock();
        self.shared.ctx.bind()?;
        // SAFETY: the graph is live and locked.
        let raw = unsafe { driver::graph_instantiate(g.raw, 0) }?;
        drop(g);
        Ok(CudaGraphExec {
            exec: RawExec {
                raw,
                ctx: self.shared.ctx.clone(),
            },
            shared: self.shared.clone(),
            uses: self.uses.clone(),
            updated: HashMap::new(),
        })
    }
}

/// The body graph of a conditional node while [`CudaGraph::add_if_with`] or
/// [`CudaGraph::add_while_with`] (or the same calls on a body, to nest)
/// builds it in place. The node owns the graph; this handle lives only as
/// long as the call. Nodes and conditions made here belong to the body:
/// a nested conditional node's condition is made by [`ConditionalBody::condition`]
/// and set by a kernel inside this body (before the nested node), and a
/// nested while's body sets it again at its end.
///
/// # The brand `'id`
///
/// `'a` is the borrow of the buffers, as for [`CudaGraph<'a>`]. `'id` names
/// one build closure: each `*_with` call hands its closure a body of a fresh
/// `'id` that the closure must accept for every lifetime
/// (`for<'id> FnOnce(&mut ConditionalBody<'a, 'id>)`), and the body is
/// invariant in `'id`. So no two bodies share a type, not even bodies of two
/// graphs built in closures nested one in the other, and no type outside the
/// closure can hold one. Without it, `&mut ConditionalBody<'a>` of one
/// graph's closure could be swapped (`std::mem::swap`) with that of another
/// graph's closure: after the other graph was dropped, the handle left in the
/// first closure named a destroyed body graph, and the driver accepted nodes
/// added to it. The brand settles which handle is which at compile time
/// (`tests/ui/conditional_body_stays_in_its_graph.rs`); nodes and
/// conditions, which are `Copy` values without it, are still checked at run
/// time to belong to the graph or body they are given to.
///
/// Closures need no annotation: `|body| { .. }` passed to a `*_with` call
/// gets the brand from the call. A function that takes a body names both
/// lifetimes, for example `fn fill(body: &mut ConditionalBody<'_, '_>)`.
pub struct ConditionalBody<'a, 'id> {
    graph: CudaGraph<'a>,
    /// The brand: invariant, so `'id` neither grows nor shrinks to match
    /// another closure's.
    _brand: PhantomData<fn(&'id ()) -> &'id ()>,
}

impl fmt::Debug for ConditionalBody<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConditionalBody")
            .field("id", &self.graph.shared.id)
            .field("context", &self.graph.shared.ctx)
            .field("buffers", &self.graph.uses.len())
            .finish()
    }
}

impl<'a> ConditionalBody<'a, '_> {
    /// The context its kernels run in (the conditional node's).
    pub fn context(&self) -> &Context {
        &self.graph.shared.ctx
    }

    /// A new condition for conditional nodes of this body, as
    /// [`CudaGraph::condition`].
    ///
    /// # Errors
    ///
    /// As [`CudaGraph::condition`].
    pub fn condition(&mut self, default: Option<u32>) -> CudaResult<Condition> {
        self.graph.condition(default)
    }

    /// Adds a copy of `child` (which may not hold conditional nodes) after
    /// every node of `deps`, as [`CudaGraph::add_child_graph`].
    ///
    /// # Errors
    ///
    /// As [`CudaGraph::add_child_graph`].
    pub fn add_child_graph(
        &mut self,
        child: &CudaGraph<'a>,
        deps: &[GraphNode],
    ) -> CudaResult<GraphNode> {
        self.graph
            .add_child_graph_as("ConditionalBody::add_child_graph", child, deps)
    }

    /// A nested if node whose body is a copy of `body`, as
    /// [`CudaGraph::add_if`].
    ///
    /// # Errors
    ///
    /// As [`CudaGraph::add_while`].
    pub fn add_if(
        &mut self,
        cond: &Condition,
        body: &CudaGraph<'a>,
        deps: &[GraphNode],
    ) -> CudaResult<GraphNode> {
        self.graph
            .add_copied("ConditionalBody::add_if", IF, cond, body, deps)
    }

    /// A nested while node whose body is a copy of `body`, as
    /// [`CudaGraph::add_while`].
    ///
    /// # Errors
    ///
    /// As [`CudaGraph::add_while`].
    pub fn add_while(
        &mut self,
        cond: &Condition,
        body: &CudaGraph<'a>,
        deps: &[GraphNode],
    ) -> CudaResult<GraphNode> {
        self.graph
            .add_copied("ConditionalBody::add_while", WHILE, cond, body, deps)
    }

    /// A nested if node built in place, as [`CudaGraph::add_if_with`].
    ///
    /// # Errors
    ///
    /// As [`CudaGraph::add_while_with`].
    pub fn add_if_with<E: From<CudaError>>(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'a, 'id>) -> Result<(), E>,
    ) -> Result<GraphNode, E> {
        self.graph
            .add_conditional("ConditionalBody::add_if_with", IF, cond, deps, build)
    }

    /// A nested while node built in place, as [`CudaGraph::add_while_with`].
    ///
    /// # Errors
    ///
    /// As [`CudaGraph::add_while_with`].
    pub fn add_while_with<E: From<CudaError>>(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'a, 'id>) -> Result<(), E>,
    ) -> Result<GraphNode, E> {
        self.graph
            .add_conditional("ConditionalBody::add_while_with", WHILE, cond, deps, build)
    }
}

/// An owned `CUgraphExec`, destroyed on drop (before the graph it came from).
struct RawExec {
    raw: CUgraphExec,
    ctx: Context,
}

// SAFETY: an executable graph may be used from any thread, one at a time:
// `CudaGraphExec` is `Send` but not `Sync`.
unsafe impl Send for RawExec {}

impl Drop for RawExec {
    fn drop(&mut self) {
        let r = self.ctx.bind().and_then(|_| {
            // SAFETY: we own the executable graph and destroy it once; the
            // driver lets a launch of it that is still running finish.
            unsafe { driver::graph_exec_destroy(self.raw) }
        });
        if let Err(e) = r {
            self.ctx.report_release_error("executable graph", &e);
        }
    }
}

/// The arguments a kernel node was given by [`CudaGraphExec::update_kernel`].
struct NodeArgs<'a> {
    _params: ParamCopy,
    uses: Vec<&'a Allocation>,
}

/// An instantiated graph: launched or uploaded on a stream of its context,
/// kernel nodes updated in place. Borrows the buffers its graph does for
/// `'a`, and those given to updates.
pub struct CudaGraphExec<'a> {
    // Field order is drop order: the executable graph goes first, then the
    // graph (and its nodes), then the argument copies.
    exec: RawExec,
    shared: Arc<Shared>,
    uses: Vec<&'a Allocation>,
    /// Per updated node (by handle address): the arguments last given.
    updated: HashMap<usize, NodeArgs<'a>>,
}

impl fmt::Debug for CudaGraphExec<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaGraphExec")
            .field("graph", &self.shared.id)
            .field("context", &self.shared.ctx)
            .field("buffers", &self.uses.len())
            .field("updated_nodes", &self.updated.len())
            .finish()
    }
}

impl<'a> CudaGraphExec<'a> {
    /// The context its kernels run in.
    pub fn context(&self) -> &Context {
        &self.shared.ctx
    }

    /// The kernel nodes of the graph it was instantiated from (see
    /// [`CudaGraph::kernel_nodes`]).
    ///
    /// # Errors
    ///
    /// As [`CudaGraph::kernel_nodes`].
    pub fn kernel_nodes(&self) -> CudaResult<Vec<KernelNode>> {
        self.shared.kernel_nodes()
    }

    fn check_stream(&self, call: &str, stream: &Stream) -> CudaResult<()> {
        stream.refuse_if_capturing(|| call.to_string())?;
        self.shared.check_context(call, "stream", stream.context())
    }

    /// Runs the graph on `stream` (`cuGraphLaunch`), after the work queued
    /// there; every buffer it uses is noted as in use
    /// ([`Allocation::record_use`]).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] for a stream of another context, or one
    /// being captured; [`CudaError::Lent`] when a buffer is lent
    /// ([`Allocation::lend`]); a driver error (kept as the context's sticky
    /// error when it is one).
    pub fn launch(&self, stream: &Stream) -> CudaResult<()> {
        self.check_stream("CudaGraphExec::launch", stream)?;
        let ctx = &self.shared.ctx;
        ctx.bind()?;
        let uses = || {
            self.uses
                .iter()
                .chain(self.updated.values().flat_map(|n| &n.uses))
        };
        for a in uses() {
            a.refuse_if_lent(|| "CudaGraphExec::launch".into())?;
        }
        for a in uses() {
            // Noted in the stream's context, which for page-locked and
            // managed memory of another context is remembered and waited
            // for by host reads and the free.
            a.record_use_in(stream.context())?;
        }
        // SAFETY: the executable graph is live while `self` is; the stream
        // is borrowed and of the graph's context (checked), which is current.
        unsafe { driver::graph_launch(self.exec.raw, stream.raw()) }.map_err(|e| ctx.note(e))
    }

    /// Uploads the graph to the device ahead of its first launch
    /// (`cuGraphUpload`), ordered on `stream`, so that launch starts sooner.
    ///
    /// # Errors
    ///
    /// As [`CudaGraphExec::launch`].
    pub fn upload(&self, stream: &Stream) -> CudaResult<()> {
        self.check_stream("CudaGraphExec::upload", stream)?;
        let ctx = &self.shared.ctx;
        ctx.bind()?;
        // SAFETY: as in `launch`; an upload runs no kernel.
        unsafe { driver::graph_upload(self.exec.raw, stream.raw()) }.map_err(|e| ctx.note(e))
    }

    /// Makes kernel node `node` run `kernel` with `cfg` and `args` from the
    /// next launch on, without instantiating again
    /// (`cuGraphExecKernelNodeSetParams`). The new arguments are checked as
    /// a launch checks them (the block is the kernel's and complete, the
    /// declared bounds, the configuration against the device's and the
    /// function's limits, the function's and every buffer's context); the
    /// argument bytes are copied and kept, and the buffers borrowed, as long
    /// as this executable graph. The graph itself is not changed.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] for a node of another graph or not a
    /// kernel node, or a buffer of another context; the launch checks'
    /// errors ([`CudaError::Argument`], [`CudaError::Launch`]); a driver error when
    /// the driver refuses the change (for example another context's
    /// function: instantiate a new graph then). On any error the node keeps
    /// its previous parameters.
    pub fn update_kernel(
        &mut self,
        node: &GraphNode,
        kernel: &DynKernel,
        cfg: LaunchConfig,
        args: &ArgBlock<'a>,
    ) -> CudaResult<()> {
        const CALL: &str = "CudaGraphExec::update_kernel";
        if cfg.cluster.is_some() || cfg.programmatic {
            return Err(CudaError::invalid_argument(
                CALL,
                "cfg",
                "an in-place update sets a node's grid, block, shared memory and arguments, not launch attributes (cluster, programmatic launch); leave them unset, or capture the graph again with the new attributes".into(),
            ));
        }
        self.shared.check_node(CALL, "node", node)?;
        let ctx = &self.shared.ctx;
        let g = self.shared.lock();
        ctx.bind()?;
        // SAFETY: the node is of this graph (checked above), which never
        // removes nodes and is live and locked.
        let ty = unsafe { driver::graph_node_get_type(node.raw) }?;
        if ty != CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
            return Err(CudaError::invalid_argument(
                CALL,
                "node",
                format!(
                    "{node:?} is a {ty:?} node, not a kernel node; pass a node from kernel_nodes() or Capture::launch"
                ),
            ));
        }
        kernel.check_node(ctx, &cfg, args)?;
        let mut params = args.copy_params();
        let func = kernel.function();
        let handle = func.launch_handle();
        let library = func.home_context().is_none();
        let p = CUDA_KERNEL_NODE_PARAMS {
            func: if library {
                std::ptr::null_mut()
            } else {
                handle
            },
            gridDimX: cfg.grid.x,
            gridDimY: cfg.grid.y,
            gridDimZ: cfg.grid.z,
            blockDimX: cfg.block.x,
            blockDimY: cfg.block.y,
            blockDimZ: cfg.block.z,
            sharedMemBytes: cfg.shared_mem_bytes,
            kernelParams: params.ptrs(),
            extra: std::ptr::null_mut(),
            kern: if library {
                handle.cast()
            } else {
                std::ptr::null_mut()
            },
            ctx: if library {
                ctx.raw()
            } else {
                std::ptr::null_mut()
            },
        };
        // SAFETY: the executable graph is live; the node is a kernel node of
        // the graph it was made from (checked above); the function is of the
        // graph's context (checked by `check_node`), the values were checked
        // against its declaration, and the pointers address `params`, which
        // this executable graph keeps.
        unsafe { driver::graph_exec_kernel_node_set_params(self.exec.raw, node.raw, &p) }
            .map_err(|e| {
                e.with_context(|| {
                    format!(
                        "updating a kernel node to '{}' in place; the driver refuses some changes (another context's function, or one the node's kind cannot take): instantiate the changed graph instead",
                        kernel.name()
                    )
                })
            })?;
        drop(g);
        self.updated.insert(
            node.raw as usize,
            NodeArgs {
                _params: params,
                uses: args.allocations().collect(),
            },
        );
        Ok(())
    }
}

/// Work queued while [`Stream::capture`] captures a stream: the closure's
/// handle on the stream. Kernels launched through it become nodes of the
/// graph, which borrows their buffers for `'a`.
pub struct Capture<'a> {
    /// A second handle on the captured stream, the only one that may queue
    /// work while the capture runs.
    stream: Stream,
    graph: u64,
    uses: RefCell<Vec<&'a Allocation>>,
    /// `'a` is fixed by the graph made: it may not shrink to fit shorter
    /// borrows.
    _invariant: PhantomData<fn(&'a ()) -> &'a ()>,
}

impl fmt::Debug for Capture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capture")
            .field("stream", &self.stream)
            .field("graph", &self.graph)
            .finish()
    }
}

impl<'a> Capture<'a> {
    /// The handle through which captured work is queued.
    pub(crate) fn queue(&self) -> &Stream {
        &self.stream
    }

    /// The context of the captured stream.
    pub fn context(&self) -> &Context {
        self.stream.context()
    }

    /// Launches `kernel` into the graph with the checks of
    /// [`DynKernel::launch`]; returns its node.
    ///
    /// # Errors
    ///
    /// The errors of [`DynKernel::launch`]; a driver error reading the node
    /// (the capture was invalidated).
    pub fn launch(
        &self,
        kernel: &DynKernel,
        cfg: LaunchConfig,
        args: &ArgBlock<'a>,
    ) -> CudaResult<GraphNode> {
        self.launch_impl(kernel, cfg, args, false)
    }

    /// Launches a cooperative grid into the graph (see
    /// [`DynKernel::launch_cooperative`]); returns its node.
    ///
    /// # Errors
    ///
    /// As [`Capture::launch`], and the cooperative checks.
    pub fn launch_cooperative(
        &self,
        kernel: &DynKernel,
        cfg: LaunchConfig,
        args: &ArgBlock<'a>,
    ) -> CudaResult<GraphNode> {
        self.launch_impl(kernel, cfg, args, true)
    }

    fn launch_impl(
        &self,
        kernel: &DynKernel,
        cfg: LaunchConfig,
        args: &ArgBlock<'a>,
        cooperative: bool,
    ) -> CudaResult<GraphNode> {
        kernel.launch_impl(&self.stream, &cfg, args, cooperative)?;
        add_uses(&mut self.uses.borrow_mut(), args.allocations());
        let raw = self.last_node(kernel.name())?;
        Ok(GraphNode {
            raw,
            graph: self.graph,
        })
    }

    /// The node the last launch added: the stream's one dependency now.
    fn last_node(&self, kernel: &str) -> CudaResult<CUgraphNode> {
        let mut deps: *const CUgraphNode = std::ptr::null();
        // SAFETY: the stream is live; the driver writes a pointer to its own
        // array, valid until the next capture call on the stream, of which
        // one element is read below; no edge data is asked for.
        let (status, _, _, n) = unsafe {
            driver::stream_get_capture_info(self.stream.raw(), &mut deps, std::ptr::null_mut())
        }?;
        if status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
            || n != 1
            || deps.is_null()
        {
            return Err(CudaError::invalid_argument(
                format!("Capture::launch of '{kernel}'"),
                "stream",
                format!(
                    "expected the launch as the captured stream's one dependency, but the driver reports {n} (capture status {status:?}); capture one stream, launching only through the Capture"
                ),
            ));
        }
        // SAFETY: `n` is 1 and the pointer non-null (checked above).
        Ok(unsafe { *deps })
    }
}

/// Ends a capture however the closure left it (also when it panics), and
/// releases the stream for other work.
struct CaptureGuard<'s> {
    stream: &'s Stream,
    begun: bool,
}

impl CaptureGuard<'_> {
    /// Ends the capture: the graph, owned, or the driver's error.
    fn end(&mut self) -> CudaResult<CUgraph> {
        self.begun = false;
        self.stream.context().bind()?;
        // SAFETY: the capture on this live stream was begun by `Stream::capture`.
        unsafe { driver::stream_end_capture(self.stream.raw()) }
    }
}

impl Drop for CaptureGuard<'_> {
    fn drop(&mut self) {
        if self.begun
            && let Ok(g) = self.end()
            && !g.is_null()
        {
            // SAFETY: the graph was just made by the capture and is not used again.
            let _ = unsafe { driver::graph_destroy(g) };
        }
        self.stream.set_capturing(false);
    }
}

impl Stream {
    /// Captures the work `f` queues through its [`Capture`] into a new
    /// [`CudaGraph`] (`cuStreamBeginCapture` .. `cuStreamEndCapture`), in `mode`.
    /// Nothing runs: the graph runs when instantiated and launched. The
    /// graph borrows the buffers of the argument blocks launched into it
    /// for `'a`. While `f` runs, work queued on this stream any other way
    /// (through this handle, its clones, or any other handle on the same
    /// driver stream, such as [`Stream::borrow_raw`]'s: launches,
    /// [`Stream::scope`], [`Event::record`](crate::Event::record)) is
    /// refused, as is work on a stream that joined the capture by waiting
    /// for one of its events: each enqueue asks the driver
    /// ([`Stream::capture_state`]). If `f` fails or
    /// panics, the capture is ended and its graph destroyed.
    ///
    /// # Errors
    ///
    /// `f`'s error; [`CudaError::InvalidArgument`] for the legacy default
    /// stream or a stream already being captured; a driver error beginning
    /// or ending the capture (for example one invalidated by a call the
    /// mode forbids).
    pub fn capture<'a, E: From<CudaError>>(
        &self,
        mode: CaptureMode,
        f: impl FnOnce(&Capture<'a>) -> std::result::Result<(), E>,
    ) -> std::result::Result<CudaGraph<'a>, E> {
        const CALL: &str = "Stream::capture";
        if self.raw().is_null() {
            return Err(CudaError::invalid_argument(
                CALL,
                "stream",
                "the legacy default stream cannot be captured; capture a stream made by Stream::new".into(),
            )
            .into());
        }
        if !self.set_capturing(true) {
            return Err(CudaError::invalid_argument(
                CALL,
                "stream",
                "the stream is already being captured; end that capture first".into(),
            )
            .into());
        }
        let mut guard = CaptureGuard {
            stream: self,
            begun: false,
        };
        let ctx = self.context().clone();
        ctx.bind()?;
        // SAFETY: the stream is live while `self` is borrowed, and of `ctx`,
        // which is current; the guard ends the capture.
        unsafe { driver::stream_begin_capture(self.raw(), mode.raw()) }?;
        guard.begun = true;
        // The driver's id of this capture: the alias below queues into it.
        let id = self.capture_state()?.unwrap_or(0);
        let capture = Capture {
            stream: self.alias_for_capture(id),
            graph: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            uses: RefCell::new(Vec::new()),
            _invariant: PhantomData,
        };
        let r = f(&capture);
        let ended = guard.end();
        drop(guard);
        // Owned from here: a graph made on a failed capture is dropped (destroyed) below.
        let graph = ended.map(|raw| CudaGraph {
            shared: Shared::new(raw, ctx, capture.graph),
            uses: capture.uses.into_inner(),
        });
        r?;
        Ok(graph?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_modes_map_to_the_driver_values_by_name() {
        assert_eq!(
            CaptureMode::Global.raw().variant_name(),
            Some("CU_STREAM_CAPTURE_MODE_GLOBAL")
        );
        assert_eq!(
            CaptureMode::ThreadLocal.raw().variant_name(),
            Some("CU_STREAM_CAPTURE_MODE_THREAD_LOCAL")
        );
        assert_eq!(
            CaptureMode::Relaxed.raw().variant_name(),
            Some("CU_STREAM_CAPTURE_MODE_RELAXED")
        );
    }

    #[test]
    fn the_conditional_gate_names_functions_the_specs_know_from_cuda_12_3() {
        for f in CONDITIONAL_FUNCTIONS {
            let symbol = cuda_sys::loader::symbol(f)
                .unwrap_or_else(|| panic!("{f} is not in the generated symbol table"));
            let (_, version) = symbol.target();
            assert!(version >= 12030, "{f}: ABI version {version}");
        }
    }
}
