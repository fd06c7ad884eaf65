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
//! The launches' argument blocks hold the device addresses of their arrays;
//! the graph keeps the launches (and so the arrays) alive for as long as its
//! executable graph, which it releases first.

use std::fmt;

use cuda_api::{CaptureMode, CudaGraphExec, GraphNode, Stream};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::Launch;

/// An instantiated CUDA graph of launches, which it owns (their arrays stay
/// alive as long as the graph).
pub struct Graph {
    // Field order is drop order: the executable graph and the graph go
    // before the launches whose arrays they use.
    exec: CudaGraphExec<'static>,
    graph: cuda_api::CudaGraph<'static>,
    nodes: Vec<Option<GraphNode>>,
    launches: Vec<Launch>,
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
    /// for the legacy default stream, [`Error::StreamContext`] / [`Error::StreamDevice`] when
    /// `stream` is not of the launches' context, [`Error::Cuda`] when capture or instantiation
    /// fails.
    pub fn capture(stream: &Stream, launches: Vec<Launch>) -> Result<Graph> {
        let device = Device::from(stream.context().device());
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
        let mut nodes = Vec::with_capacity(launches.len());
        let graph = stream.capture(CaptureMode::ThreadLocal, |c| -> Result<()> {
            for l in &launches {
                if l.plan().size == 0 {
                    nodes.push(None);
                    continue;
                }
                let (kernel, cfg, block, cooperative) = l.graph_parts()?;
                let node = if cooperative {
                    c.launch_cooperative(kernel, cfg, block)?
                } else {
                    c.launch(kernel, cfg, block)?
                };
                nodes.push(Some(node));
            }
            Ok(())
        })?;
        let exec = graph.instantiate()?;
        Ok(Graph {
            exec,
            graph,
            nodes,
            launches,
        })
    }

    /// A graph from its parts (the conditional graphs of
    /// [`Graph::build`]): its launches have no node of their own to update
    /// (`None`), their nodes lying inside child graphs.
    pub(crate) fn from_parts(
        exec: CudaGraphExec<'static>,
        graph: cuda_api::CudaGraph<'static>,
        launches: Vec<Launch>,
    ) -> Graph {
        Graph {
            exec,
            graph,
            nodes: vec![None; launches.len()],
            launches,
        }
    }

    /// Runs the whole graph on `stream` (of the graph's context).
    ///
    /// # Errors
    ///
    /// [`Error::StreamContext`] when `stream` is not of the graph's context, [`Error::Cuda`]
    /// when the driver refuses the launch.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        if stream.context() != self.graph.context() {
            return Err(Error::StreamContext {
                launch: "Graph::launch".into(),
                stream: stream.context().to_string(),
                expected: self.graph.context().to_string(),
            });
        }
        for l in &self.launches {
            l.note_uses();
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
        let (kernel, cfg, block, _) = changed.graph_parts()?;
        self.exec
            .update_kernel(&node, kernel, cfg, block)
            .map_err(|error| Error::GraphUpdate {
                index,
                kernel: changed.kernel().name().to_string(),
                error: Box::new(error),
            })?;
        // The executable graph holds a copy of `changed`'s arguments, whose
        // arrays `changed` keeps alive from here on.
        self.launches[index] = changed;
        Ok(())
    }
}
