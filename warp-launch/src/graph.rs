//! CUDA graphs of [`Launch`]es: a sequence of launches captured on a stream
//! into a graph and instantiated; replayed with one graph launch; and a
//! launch's parameters updated in the instantiated graph without capturing
//! again. Built on cuda-api's safe graphs ([`cuda_api::Stream::capture`],
//! [`cuda_api::CudaGraphExec`]), which check each node like a launch.
//!
//! The driver updates a kernel node in place when the function's context
//! stays the same; grid, block, shared memory and every argument may change.
//! It refuses other changes, and [`Graph::update`] then says so and leaves
//! the graph as it was (re-capture to change the function).
//!
//! A graph belongs to one context, its stream's: every launch that enters
//! it is checked for that context ([`Launch`]s are checked for their
//! device's primary context, where their arrays live), and so is every
//! stream it is replayed on. Each replay notes every array the graph uses
//! as used on its stream (the list is collected once, when the graph is
//! made), so host reads of them and their frees wait for the replay, as
//! they do after a launch.
//!
//! The launches' argument blocks hold the device addresses of their arrays;
//! the graph keeps the launches (and so the arrays) alive for as long as its
//! executable graph, which it releases first. Dropping the graph while a
//! replay runs is safe: the driver lets a running replay of an executable
//! graph finish before it frees it (`cuGraphExecDestroy`), the kernel nodes
//! hold copies of the argument bytes (made when a launch is captured or a
//! node updated), and the frees of the arrays wait for the replay.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use cuda_api::{CaptureMode, CudaGraphExec, GraphNode, Stream};

use crate::abi::Value;
use crate::array::{Array, Queue, Storage};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::{Launch, check_context, prepare};

/// An instantiated CUDA graph of launches, which it owns (their arrays stay
/// alive as long as the graph).
pub struct Graph {
    // Field order is drop order: the executable graph and the graph go
    // before the launches whose arrays they use.
    exec: CudaGraphExec<'static>,
    graph: cuda_api::CudaGraph<'static>,
    nodes: Vec<Option<GraphNode>>,
    launches: Vec<Launch>,
    /// The memory of captured fills and copies ([`GraphCapture`]).
    held: Vec<Arc<Storage>>,
    /// Every CUDA allocation the graph uses (its launches' arrays and
    /// gradients, and `held`), once each: what a replay notes as used.
    uses: Vec<Arc<Storage>>,
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("launches", &self.launches.len())
            .field("context", self.graph.context())
            .finish()
    }
}

impl Graph {
    /// Captures `launches`, in order, on `stream` (a created stream, not the
    /// legacy default stream, of the launches' device) into a graph and
    /// instantiates it. Launches of size 0 add no node.
    ///
    /// # Errors
    ///
    /// [`Error::CpuGraphNode`] for a launch on the CPU device, [`Error::DefaultStreamCapture`]
    /// for the legacy default stream, [`Error::StreamDevice`] when `stream` is not of the
    /// launches' device, [`Error::StreamContext`] when it is of another context than the one
    /// they were checked for (a context of its own on that device, not its primary context),
    /// [`Error::Cuda`] when capture or instantiation fails.
    pub fn capture(stream: &Stream, launches: Vec<Launch>) -> Result<Graph> {
        Graph::capture_with(stream, |g| {
            for l in launches {
                g.launch(l)?;
            }
            Ok(())
        })
    }

    /// Captures what `f` queues through its [`GraphCapture`] (launches,
    /// and the stream-ordered array operations: zero, fill, assign), in
    /// order, on `stream` (a created stream of the launches' device) into a
    /// graph and instantiates it, as Warp's `wp.capture_begin` ..
    /// `wp.capture_end` around launches and `zero_` / `fill_` / `assign`.
    /// The graph belongs to `stream`'s context: each launch must have been
    /// checked for it. The graph keeps every array it uses alive, and each
    /// replay notes them as used on its stream, so host reads and frees
    /// wait for it.
    ///
    /// ```no_run
    /// # fn main() -> warp_launch::Result<()> {
    /// // GPU: a fill, a copy and a launch replayed as one graph launch.
    /// use warp_launch::{Array, Device, Graph, Stream, Value};
    /// let dev = Device::Cuda(0);
    /// let stream = Stream::new(&dev.context()?)?;
    /// let x = Array::zeros::<f32>(dev, &[256])?;
    /// let y = Array::zeros::<f32>(dev, &[256])?;
    /// let graph = Graph::capture_with(&stream, |g| {
    ///     g.fill(&x, &Value::of(2.0f32))?;
    ///     g.assign(&y, &x)?;
    ///     // g.launch(kernel.launch(256).inputs(...).stream(&stream).record_cmd()?)?;
    ///     Ok(())
    /// })?;
    /// graph.launch(&stream)?;
    /// stream.synchronize()?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![2.0; 256]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Graph::capture`]; `f`'s errors, among them those of
    /// [`GraphCapture`]'s operations (plain host memory cannot be captured).
    pub fn capture_with(
        stream: &Stream,
        f: impl FnOnce(&mut GraphCapture<'_>) -> Result<()>,
    ) -> Result<Graph> {
        let device = Device::from(stream.context().device());
        if stream.raw().is_null() {
            return Err(Error::DefaultStreamCapture);
        }
        let mut nodes = Vec::new();
        let mut launches = Vec::new();
        let held = RefCell::new(Vec::new());
        let graph = stream.capture(CaptureMode::ThreadLocal, |c| -> Result<()> {
            f(&mut GraphCapture {
                capture: c,
                held: &held,
                launches: &mut launches,
                nodes: &mut nodes,
                device,
            })
        })?;
        let exec = graph.instantiate()?;
        Ok(Graph::new(exec, graph, nodes, launches, held.into_inner()))
    }

    fn new(
        exec: CudaGraphExec<'static>,
        graph: cuda_api::CudaGraph<'static>,
        nodes: Vec<Option<GraphNode>>,
        launches: Vec<Launch>,
        held: Vec<Arc<Storage>>,
    ) -> Graph {
        let mut g = Graph {
            exec,
            graph,
            nodes,
            launches,
            held,
            uses: Vec::new(),
        };
        g.collect_uses();
        g
    }

    /// Lists every CUDA allocation the launches and `held` use, once each.
    fn collect_uses(&mut self) {
        let mut seen = HashSet::new();
        let all = self.launches.iter().flat_map(Launch::storages);
        self.uses = all
            .chain(&self.held)
            .filter(|s| s.allocation().is_some() && seen.insert(Arc::as_ptr(s)))
            .cloned()
            .collect();
    }

    /// A graph from its parts (the conditional graphs of
    /// [`Graph::build`]): its launches have no node of their own to update
    /// (`None`), their nodes lying inside child graphs.
    pub(crate) fn from_parts(
        exec: CudaGraphExec<'static>,
        graph: cuda_api::CudaGraph<'static>,
        launches: Vec<Launch>,
    ) -> Graph {
        let nodes = vec![None; launches.len()];
        Graph::new(exec, graph, nodes, launches, Vec::new())
    }

    /// Runs the whole graph on `stream` (of the graph's context), noting
    /// every array it uses as used on `stream`: host reads of them and
    /// their frees wait for this replay, as after a launch.
    ///
    /// # Errors
    ///
    /// [`Error::StreamContext`] when `stream` is not of the graph's context; [`Error::Lent`]
    /// when an array the graph uses is lent to cudarc; [`Error::Cuda`] when the driver
    /// refuses the launch.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        check_context(
            || "Graph::launch".into(),
            stream.context(),
            self.graph.context(),
        )?;
        // Page-locked and managed arrays: not while a CPU launch holds them
        // (see `lock_for_gpu`); held until the replay is queued.
        // Device memory takes no lock (docs/launch-profile.md).
        let _locks = if self.uses.iter().any(|s| s.host_reachable()) {
            crate::array::lock_for_gpu(self.uses.iter().map(|s| &**s), "Graph::launch")?
        } else {
            crate::array::StorageLocks::none()
        };
        for s in &self.uses {
            crate::array::note_use_on(
                s,
                stream,
                || "Graph::launch".into(),
                || format!("an array the graph uses ({s:?})"),
            )?;
        }
        Ok(self.exec.launch(stream)?)
    }

    /// The launches, in capture order.
    pub fn launches(&self) -> &[Launch] {
        &self.launches
    }

    /// Changes launch `index` with `change` (its setters check as usual),
    /// then updates its node in the instantiated graph. If the change fails
    /// its checks, or the driver refuses the update, the launch and the
    /// graph keep their previous parameters and the error says why.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchLaunch`] for an index the graph does not have,
    /// [`Error::GraphNodeMissing`] / [`Error::GraphNodeEmpty`] when the launch has no node, any
    /// check of the change (as [`Launch`]'s setters), [`Error::GraphUpdate`] when the driver
    /// refuses the update.
    pub fn update(
        &mut self,
        index: usize,
        change: impl FnOnce(&mut Launch) -> Result<()>,
    ) -> Result<()> {
        let count = self.launches.len();
        let Some(launch) = self.launches.get_mut(index) else {
            return Err(Error::NoSuchLaunch {
                call: "Graph::update",
                index,
                count,
            });
        };
        let mut changed = launch.try_clone()?;
        change(&mut changed)?;
        let Some(node) = self.nodes[index] else {
            return Err(Error::GraphNodeMissing {
                index,
                kernel: changed.kernel().name().to_string(),
            });
        };
        if changed.plan().size == 0 {
            return Err(Error::GraphNodeEmpty {
                index,
                kernel: changed.kernel().name().to_string(),
            });
        }
        let context = self.graph.context().clone();
        let parts = changed.graph_parts(&context, "Graph::update")?;
        prepare::update_node(&mut self.exec, &node, parts).map_err(|error| Error::GraphUpdate {
            index,
            kernel: changed.kernel().name().to_string(),
            error: Box::new(error),
        })?;
        // The executable graph holds a copy of `changed`'s arguments, whose
        // arrays `changed` keeps alive from here on (a replay still running
        // keeps the old ones: their frees wait for it).
        self.launches[index] = changed;
        self.collect_uses();
        Ok(())
    }
}

/// What a [`Graph::capture_with`] closure queues into the graph: launches
/// and stream-ordered array operations, in order. Each operation is the
/// one [`Array`]'s `_on` methods queue on a stream (the same function),
/// captured instead: memset and memcpy nodes.
///
/// ```no_run
/// # fn main() -> warp_launch::Result<()> {
/// // GPU: zero an accumulator, then copy a result out to page-locked host
/// // memory, every replay.
/// use warp_launch::{Array, Device, Graph, MemoryKind, Stream};
/// let stream = Stream::new(&Device::Cuda(0).context()?)?;
/// let acc = Array::zeros::<f32>("cuda:0", &[64])?;
/// let out = Array::zeros_in::<f32>("cpu", &[64], MemoryKind::PinnedHost)?;
/// let graph = Graph::capture_with(&stream, |g| {
///     g.zero(&acc)?;
///     // g.launch(...)? for the kernels that accumulate into `acc`
///     g.assign(&out, &acc)
/// })?;
/// graph.launch(&stream)?;
/// assert_eq!(out.to_vec::<f32>()?, vec![0.0; 64]); // waits for the replay
/// # Ok(()) }
/// ```
pub struct GraphCapture<'c> {
    capture: &'c cuda_api::Capture<'static>,
    held: &'c RefCell<Vec<Arc<Storage>>>,
    launches: &'c mut Vec<Launch>,
    nodes: &'c mut Vec<Option<GraphNode>>,
    device: Device,
}

impl fmt::Debug for GraphCapture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphCapture")
            .field("device", &self.device)
            .field("launches", &self.launches.len())
            .field("arrays", &self.held.borrow().len())
            .finish()
    }
}

impl GraphCapture<'_> {
    fn queue(&self) -> Queue<'_> {
        Queue::Capture {
            capture: self.capture,
            keep: self.held,
        }
    }

    /// Adds `launch` (a recorded launch of the graph's device, checked for
    /// the graph's context), which the graph keeps; launches of size 0 add
    /// no node. Its index among the graph's launches is the one
    /// [`Graph::update`] takes.
    /// Example: [`GraphCapture`], [`Graph::capture_with`].
    ///
    /// # Errors
    ///
    /// [`Error::StreamDevice`] for a launch of another device,
    /// [`Error::StreamContext`] for a launch checked for another context
    /// than the graph's (the stream's), [`Error::CpuGraphNode`] for a
    /// launch on the CPU, [`Error::Cuda`] when the capture fails.
    pub fn launch(&mut self, launch: Launch) -> Result<()> {
        if launch.device() != self.device {
            return Err(Error::StreamDevice {
                launch: format!(
                    "Graph::capture: launch of kernel '{}'",
                    launch.kernel().name()
                ),
                stream: self.device,
                device: launch.device(),
            });
        }
        let parts = launch.graph_parts(self.capture.context(), "Graph::capture_with")?;
        let node = prepare::capture_node(self.capture, parts)?;
        self.nodes.push(node);
        self.launches.push(launch);
        Ok(())
    }

    /// Captures [`Array::zero_on`]: zeroes `array` at this point of every
    /// replay.
    /// Example: [`GraphCapture`], [`Graph::capture_with`].
    ///
    /// # Errors
    ///
    /// As [`Array::zero_on`]; [`Error::Shape`] for plain host memory (use
    /// page-locked memory in graphs).
    pub fn zero(&mut self, array: &Array) -> Result<()> {
        let zeros = vec![0u8; array.dtype().size];
        crate::array::fill(array, &zeros, Some(&self.queue()), "GraphCapture::zero")
    }

    /// Captures [`Array::fill_on`]: fills `array` with `value` (taken now)
    /// at this point of every replay.
    /// Example: [`GraphCapture`], [`Graph::capture_with`].
    ///
    /// # Errors
    ///
    /// As [`Array::fill_on`]; [`Error::Shape`] for plain host memory.
    pub fn fill(&mut self, array: &Array, value: &Value) -> Result<()> {
        let bytes = crate::array::value_bytes(array, value, "GraphCapture::fill")?;
        crate::array::fill(
            array,
            bytes.bytes(),
            Some(&self.queue()),
            "GraphCapture::fill",
        )
    }

    /// Captures [`Array::assign_on`]: copies `src` into `dst` (their
    /// contents at replay time) at this point of every replay.
    /// Example: [`GraphCapture`], [`Graph::capture_with`].
    ///
    /// # Errors
    ///
    /// As [`Array::assign_on`]; [`Error::Shape`] when either is plain host
    /// memory.
    pub fn assign(&mut self, dst: &Array, src: &Array) -> Result<()> {
        crate::array::assign(dst, src, Some(&self.queue()), "GraphCapture::assign")
    }
}
