//! CUDA graphs of [`Launch`]es: a sequence of launches captured on a stream
//! into a graph and instantiated; replayed with one `cuGraphLaunch`; and a
//! launch's parameters updated in the instantiated graph
//! (`cuGraphExecKernelNodeSetParams`) without capturing again.
//!
//! The driver updates a kernel node in place when the function and context
//! stay the same; grid, block, shared memory and every argument may change.
//! It refuses other changes, and [`Graph::update`] then says so and leaves
//! the graph as it was (re-capture to change the function).

use std::fmt;

use cuda_api::sys::{
    CUgraph, CUgraphExec, CUgraphNode, CUstreamCaptureMode, CUstreamCaptureStatus,
};
use cuda_api::{Context, Stream};

use crate::command::Launch;
use crate::device::Device;
use crate::error::{Error, Result};

/// An instantiated CUDA graph of launches, which it owns (their arrays stay
/// alive as long as the graph).
pub struct Graph {
    graph: CUgraph,
    exec: CUgraphExec,
    nodes: Vec<Option<CUgraphNode>>,
    launches: Vec<Launch>,
    ctx: Context,
}

// SAFETY: graph handles may be used from any thread; `&mut self` methods
// serialise updates.
unsafe impl Send for Graph {}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("launches", &self.launches.len())
            .field("context", &self.ctx)
            .finish()
    }
}

impl Graph {
    /// Captures `launches`, in order, on `stream` (a created stream, not the
    /// legacy default stream, of the launches' device) into a graph and
    /// instantiates it. Launches of size 0 add no node.
    pub fn capture(stream: &Stream, launches: Vec<Launch>) -> Result<Graph> {
        let ctx = stream.context().clone();
        let device = Device::from(ctx.device());
        if stream.raw().is_null() {
            return Err(Error::DefaultStreamCapture);
        }
        if let Some(l) = launches.iter().find(|l| l.device() != device) {
            return Err(Error::StreamDevice {
                launch: format!("Graph::capture: launch of kernel '{}'", l.kernel().name()),
                stream: device,
                device: l.device(),
            });
        }
        ctx.bind()?;
        // SAFETY: `stream` is borrowed, so its handle is live, and it is a
        // stream of `ctx`, which is current.
        unsafe {
            cuda_api::driver::stream_begin_capture(
                stream.raw(),
                CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        }?;
        let mut nodes = Vec::with_capacity(launches.len());
        let mut failed = None;
        for l in &launches {
            if l.plan().size == 0 {
                nodes.push(None);
                continue;
            }
            if let Err(e) = l.launch_on(stream) {
                failed = Some(e);
                break;
            }
            match last_node(stream) {
                Ok(n) => nodes.push(Some(n)),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // SAFETY: as above; the capture begun there ends here.
        let graph = unsafe { cuda_api::driver::stream_end_capture(stream.raw()) };
        if let Some(e) = failed {
            if let Ok(g) = graph {
                // SAFETY: the graph was just made by the capture and is not used again.
                let _ = unsafe { cuda_api::driver::graph_destroy(g) };
            }
            return Err(e);
        }
        let graph = graph?;
        // SAFETY: `graph` was just made by the capture and is destroyed only
        // with the returned `Graph` (or below).
        let exec = match unsafe { cuda_api::driver::graph_instantiate(graph, 0) } {
            Ok(x) => x,
            Err(e) => {
                // SAFETY: as above.
                let _ = unsafe { cuda_api::driver::graph_destroy(graph) };
                return Err(e.into());
            }
        };
        Ok(Graph {
            graph,
            exec,
            nodes,
            launches,
            ctx,
        })
    }

    /// Runs the whole graph on `stream` (of the graph's context).
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        if stream.context() != &self.ctx {
            return Err(Error::StreamContext {
                launch: "Graph::launch".into(),
                stream: stream.context().to_string(),
                expected: self.ctx.to_string(),
            });
        }
        self.ctx.bind()?;
        for l in &self.launches {
            l.note_uses();
        }
        // SAFETY: `self.exec` lives as long as `self`; `stream` is borrowed and
        // belongs to the graph's context (checked above), which is current.
        Ok(unsafe { cuda_api::driver::graph_launch(self.exec, stream.raw()) }?)
    }

    /// The launches, in capture order.
    pub fn launches(&self) -> &[Launch] {
        &self.launches
    }

    /// Changes launch `index` with `change` (its setters check as usual),
    /// then updates its node in the instantiated graph. If the change fails
    /// its checks, or the driver refuses the update, the launch and the
    /// graph keep their previous parameters and the error says why.
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
        let params = changed.kernel_node_params(&self.ctx)?;
        self.ctx.bind()?;
        // SAFETY: `exec` and `node` are live handles of this graph; the
        // parameters point into `changed`'s argument block, which the graph
        // keeps (below) for as long as the node may run.
        unsafe { cuda_api::driver::graph_exec_kernel_node_set_params(self.exec, node, &params) }
            .map_err(|error| Error::GraphUpdate {
                index,
                kernel: changed.kernel().name().to_string(),
                error: Box::new(error),
            })?;
        self.launches[index] = changed;
        Ok(())
    }
}

/// The node a launch just added to a capturing stream: the stream's only
/// current dependency.
fn last_node(stream: &Stream) -> Result<CUgraphNode> {
    let mut deps: *const CUgraphNode = std::ptr::null();
    let mut edges: *const cuda_api::sys::CUgraphEdgeData = std::ptr::null();
    // SAFETY: a live stream; the driver writes pointers to its own arrays,
    // valid until the next capture call on the stream; we read one element.
    let (status, _, _, n) =
        unsafe { cuda_api::driver::stream_get_capture_info(stream.raw(), &mut deps, &mut edges) }?;
    if status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE || n != 1 || deps.is_null()
    {
        return Err(Error::CaptureNodes {
            count: n,
            status: format!("{status:?}"),
        });
    }
    // SAFETY: n == 1 and the pointer is non-null.
    Ok(unsafe { *deps })
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: we own both handles and release them once.
        unsafe {
            let _ = cuda_api::driver::graph_exec_destroy(self.exec);
            let _ = cuda_api::driver::graph_destroy(self.graph);
        }
    }
}
