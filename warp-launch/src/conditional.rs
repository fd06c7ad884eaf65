//! Conditional CUDA graphs: Warp's `wp.capture_if` and `wp.capture_while`
//! on top of cuda-api's conditional nodes ([`cuda_api::CudaGraph::add_if`],
//! [`cuda_api::CudaGraph::add_while`]). The condition is element 0 of an
//! int32 array on the device, as in Warp: nonzero is true. A small kernel
//! of warp-launch's own (`conditional/set_condition.cu`, embedded as PTX)
//! reads it into the node's condition before an `if` node and before and
//! after every pass of a `while` body, so kernels of the body end the loop
//! by writing 0 into the array.

use std::sync::OnceLock;

use cuda_api::{CaptureMode, Condition, CudaGraph, GraphNode, Library, Stream};

use crate::abi::DType;
use crate::array::Array;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::launch::{Kernel, KernelSpec, Launch};

/// `conditional/set_condition.cu` compiled by nvcc 13.0 (see its header).
const SET_CONDITION_PTX: &str = include_str!("conditional/set_condition.ptx");
/// Its one kernel.
const SET_CONDITION: &str = "warp_launch_set_condition";

/// One step of a graph made by [`Graph::build`]: a launch, or Warp's
/// `capture_if` / `capture_while` over launches.
///
/// ```
/// use warp_launch::{Array, Device, GraphStep};
/// # fn main() -> warp_launch::Result<()> {
/// let cond = Array::from_slice(Device::Cpu, &[1i32], &[1])?;
/// let step = GraphStep::capture_while(&cond, vec![]);
/// assert!(matches!(step, GraphStep::While { .. }));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub enum GraphStep {
    /// A launch, after the steps before it.
    Launch(Launch),
    /// Warp's `wp.capture_if(condition, on_true, on_false)`: `on_true`'s
    /// launches when element 0 of `condition` (int32) is nonzero when the
    /// step is reached, else `on_false`'s.
    If {
        /// An int32 array of at least one element on the graph's device.
        condition: Array,
        /// What runs when the condition holds.
        on_true: Vec<Launch>,
        /// What runs otherwise.
        on_false: Vec<Launch>,
    },
    /// Warp's `wp.capture_while(condition, body)`: `body`'s launches again
    /// and again while element 0 of `condition` (int32) is nonzero, checked
    /// before each pass; a launch of the body ends the loop by writing 0.
    While {
        /// An int32 array of at least one element on the graph's device.
        condition: Array,
        /// What runs on each pass.
        body: Vec<Launch>,
    },
}

impl GraphStep {
    /// Warp's `wp.capture_if(condition, on_true, on_false)` as a step.
    ///
    /// ```
    /// use warp_launch::{Array, Device, GraphStep};
    /// # fn main() -> warp_launch::Result<()> {
    /// let cond = Array::from_slice(Device::Cpu, &[0i32], &[1])?;
    /// let step = GraphStep::capture_if(&cond, vec![], vec![]);
    /// assert!(matches!(step, GraphStep::If { .. }));
    /// # Ok(()) }
    /// ```
    pub fn capture_if(condition: &Array, on_true: Vec<Launch>, on_false: Vec<Launch>) -> GraphStep {
        GraphStep::If {
            condition: condition.clone(),
            on_true,
            on_false,
        }
    }

    /// Warp's `wp.capture_while(condition, body)` as a step.
    ///
    /// ```
    /// use warp_launch::{Array, Device, GraphStep};
    /// # fn main() -> warp_launch::Result<()> {
    /// let cond = Array::from_slice(Device::Cpu, &[1i32], &[1])?;
    /// let step = GraphStep::capture_while(&cond, vec![]);
    /// assert!(matches!(step, GraphStep::While { body, .. } if body.is_empty()));
    /// # Ok(()) }
    /// ```
    pub fn capture_while(condition: &Array, body: Vec<Launch>) -> GraphStep {
        GraphStep::While {
            condition: condition.clone(),
            body,
        }
    }

    fn launches(&self) -> Box<dyn Iterator<Item = &Launch> + '_> {
        match self {
            GraphStep::Launch(l) => Box::new(std::iter::once(l)),
            GraphStep::If {
                on_true, on_false, ..
            } => Box::new(on_true.iter().chain(on_false)),
            GraphStep::While { body, .. } => Box::new(body.iter()),
        }
    }
}

impl From<Launch> for GraphStep {
    fn from(l: Launch) -> GraphStep {
        GraphStep::Launch(l)
    }
}

/// Element 0 of a condition array, read on the host (waiting for the
/// work that writes it, as any read of the array does).
fn read_condition(call: &'static str, condition: &Array) -> Result<bool> {
    check_condition(call, 0, condition, condition.device())?;
    let first = condition.slice(0, 0..1)?;
    Ok(first.to_vec::<i32>()?.first().is_some_and(|&v| v != 0))
}

/// Warp's `wp.capture_while(condition, body)` outside a graph capture: runs
/// `body` again and again while element 0 of `condition` (an int32 array
/// on any device) is nonzero, read on the host before each pass; returns
/// how many passes ran. The same program as a [`GraphStep::While`] of a
/// graph, run on the host (and on the CPU device).
///
/// ```
/// use warp_launch::{Array, Device, run_while};
/// # fn main() -> warp_launch::Result<()> {
/// let cond = Array::from_slice(Device::Cpu, &[1i32], &[1])?;
/// let mut left = 3;
/// let passes = run_while(&cond, || {
///     left -= 1;
///     if left == 0 {
///         cond.copy_from_slice(&[0i32])?;
///     }
///     Ok(())
/// })?;
/// assert_eq!(passes, 3);
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`Error::Shape`] when `condition` is not an int32 array of at least one
/// element; the errors of reading it and `body`'s.
pub fn run_while(condition: &Array, mut body: impl FnMut() -> Result<()>) -> Result<usize> {
    let mut passes = 0;
    while read_condition("run_while", condition)? {
        body()?;
        passes += 1;
    }
    Ok(passes)
}

/// Warp's `wp.capture_if(condition, on_true, on_false)` outside a graph
/// capture: runs `on_true` when element 0 of `condition` (an int32 array
/// on any device) is nonzero, read on the host now, else `on_false`;
/// returns which ran. The same program as a [`GraphStep::If`] of a graph,
/// run on the host (and on the CPU device).
///
/// ```
/// use warp_launch::{Array, Device, run_if};
/// # fn main() -> warp_launch::Result<()> {
/// let cond = Array::from_slice(Device::Cpu, &[-2i32], &[1])?;
/// let mut ran = "";
/// let took = run_if(&cond, || { ran = "true"; Ok(()) }, || Ok(()))?;
/// assert!(took);
/// assert_eq!(ran, "true"); // any nonzero value is true
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`Error::Shape`] when `condition` is not an int32 array of at least one
/// element; the errors of reading it and of the branch that runs.
pub fn run_if(
    condition: &Array,
    on_true: impl FnOnce() -> Result<()>,
    on_false: impl FnOnce() -> Result<()>,
) -> Result<bool> {
    let took = read_condition("run_if", condition)?;
    if took {
        on_true()?
    } else {
        on_false()?
    }
    Ok(took)
}

/// Checks a condition array: int32, at least one element, on `device`.
fn check_condition(call: &'static str, step: usize, a: &Array, device: Device) -> Result<()> {
    let problem = if !std::ptr::eq(a.dtype(), DType::INT32) {
        format!("holds {}", a.dtype().name)
    } else if a.is_empty() {
        "has no element".to_string()
    } else if a.device() != device {
        format!("is on {}", a.device())
    } else {
        return Ok(());
    };
    Err(Error::Shape {
        call,
        message: format!(
            "step {step}: the condition array {problem}, but a condition is element 0 of an int32 array of at least one element on the graph's device {device}; make it with Array::zeros::<i32>({device}, &[1])"
        ),
    })
}

/// warp-launch's condition kernel, loaded once per process.
fn setter() -> Result<Kernel> {
    static SETTER: OnceLock<Kernel> = OnceLock::new();
    if let Some(k) = SETTER.get() {
        return Ok(k.clone());
    }
    let library = Library::from_image(SET_CONDITION_PTX.as_bytes())?;
    let spec = KernelSpec::new(SET_CONDITION, 1)
        .value::<u64>("handle")
        .array::<i32>("condition", 1)
        .value::<i32>("invert");
    // SAFETY: set_condition.cu declares exactly these parameters after
    // launch_bounds_t<1>: an unsigned 64-bit handle, an array_t<int32> and
    // an int (the driver's layout is checked against them here).
    let k = unsafe { spec.load_cuda(&library, SET_CONDITION, None) }?;
    Ok(SETTER.get_or_init(|| k).clone())
}

/// A launch of the condition kernel setting `cond` from `array[0]`
/// (negated with `invert`).
fn set_launch(
    setter: &Kernel,
    cond: &Condition,
    array: &Array,
    invert: bool,
    device: Device,
) -> Result<Launch> {
    let b = setter
        .launch(1)
        .inputs((cond.raw(), array, i32::from(invert)))
        .device(device);
    // SAFETY: the kernel reads element 0 of `array` from one thread, and
    // `array` is an int32 array of at least one element on `device`
    // (`check_condition`).
    unsafe { b.unchecked() }.record_cmd()
}

/// Captures `launches` in order on `stream` into a graph.
fn capture(stream: &Stream, launches: &[Launch]) -> Result<CudaGraph<'static>> {
    stream.capture(CaptureMode::ThreadLocal, |c| -> Result<()> {
        for l in launches {
            if l.plan().size == 0 {
                continue;
            }
            let (kernel, cfg, block, cooperative) = l.graph_parts()?;
            if cooperative {
                c.launch_cooperative(kernel, cfg, block)?;
            } else {
                c.launch(kernel, cfg, block)?;
            }
        }
        Ok(())
    })
}

/// The graph being built: its nodes in a chain, and every launch it holds.
struct Builder<'s> {
    stream: &'s Stream,
    device: Device,
    top: CudaGraph<'static>,
    last: Option<GraphNode>,
    kept: Vec<Launch>,
}

impl Builder<'_> {
    fn deps(&self) -> Vec<GraphNode> {
        self.last.into_iter().collect()
    }

    /// Adds `launches` as one child graph after the last node.
    fn add_launches(&mut self, launches: Vec<Launch>) -> Result<GraphNode> {
        let g = capture(self.stream, &launches)?;
        let node = self.top.add_child_graph(&g, &self.deps())?;
        self.kept.extend(launches);
        self.last = Some(node);
        Ok(node)
    }

    fn add_if(
        &mut self,
        setter: &Kernel,
        condition: &Array,
        on_true: Vec<Launch>,
        on_false: Vec<Launch>,
    ) -> Result<()> {
        // Both conditions are read before either branch runs (a branch may
        // write the array).
        let yes = self.top.condition(None)?;
        let mut setters = vec![set_launch(setter, &yes, condition, false, self.device)?];
        let no = if on_false.is_empty() {
            None
        } else {
            let no = self.top.condition(None)?;
            setters.push(set_launch(setter, &no, condition, true, self.device)?);
            Some(no)
        };
        self.add_launches(setters)?;
        for (cond, body) in [(Some(yes), on_true), (no, on_false)] {
            let Some(cond) = cond else { continue };
            if body.is_empty() {
                continue;
            }
            let g = capture(self.stream, &body)?;
            self.last = Some(self.top.add_if(&cond, &g, &self.deps())?);
            self.kept.extend(body);
        }
        Ok(())
    }

    fn add_while(
        &mut self,
        setter: &Kernel,
        condition: &Array,
        mut body: Vec<Launch>,
    ) -> Result<()> {
        let cond = self.top.condition(None)?;
        let before = set_launch(setter, &cond, condition, false, self.device)?;
        self.add_launches(vec![before])?;
        body.push(set_launch(setter, &cond, condition, false, self.device)?);
        let g = capture(self.stream, &body)?;
        self.last = Some(self.top.add_while(&cond, &g, &self.deps())?);
        self.kept.extend(body);
        Ok(())
    }
}

impl Graph {
    /// Builds and instantiates a graph of `steps` in order on `stream` (a
    /// created stream, not the legacy default stream, of the launches'
    /// device): launches, and Warp's `capture_if` / `capture_while` over
    /// launches ([`GraphStep`]), whose conditions the device reads from
    /// their int32 arrays every time the graph runs. Needs a driver with
    /// conditional graph nodes (CUDA 12.3 or later). The graph owns the
    /// launches and the condition arrays. Its launches lie inside child
    /// graphs, so [`Graph::update`] refuses them
    /// ([`Error::GraphNodeMissing`]): build again to change one.
    ///
    /// ```no_run
    /// use warp_launch::{AotModule, Array, Device, Graph, GraphStep, Stream};
    /// # fn main() -> warp_launch::Result<()> {
    /// // tests/warp/conditional.py compiled by Warp: add_value(x, v) adds v to
    /// // every x[i]; count_down(counter, cond, log) counts counter[0] down
    /// // and writes cond[0] = 0 when it reaches zero.
    /// let module = AotModule::load("target/warp-aot/conditional")?;
    /// let gpu = Device::Cuda(0);
    /// let stream = Stream::new(&gpu.context()?)?;
    /// let (counter, cond) = (Array::from_slice(gpu, &[5i32], &[1])?, Array::from_slice(gpu, &[1i32], &[1])?);
    /// let (log, x) = (Array::zeros::<i32>(gpu, &[8])?, Array::zeros::<i32>(gpu, &[4])?);
    /// let count_down = module.kernel("count_down")?;
    /// let count = count_down.launch(1).inputs((&counter, &cond, &log));
    /// // SAFETY: count_down touches counter[0], cond[0] and log[c - 1] for 0 < c <= 8 only.
    /// let count = unsafe { count.unchecked() }.record_cmd()?;
    /// let add = module.kernel("add_value")?.launch(4).inputs((&x, 1i32)).record_cmd()?;
    /// let graph = Graph::build(&stream, vec![GraphStep::capture_while(&cond, vec![add, count])])?;
    /// graph.launch(&stream)?;
    /// stream.synchronize()?;
    /// assert_eq!(x.to_vec::<i32>()?, vec![5; 4]); // five passes
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::DefaultStreamCapture`] for the legacy default stream,
    /// [`Error::StreamDevice`] for a launch on another device than the
    /// stream's, [`Error::Shape`] for a condition that is not an int32 array
    /// of at least one element on that device, [`Error::CpuGraphNode`] for a
    /// CPU launch, [`Error::Cuda`] when the driver has no conditional nodes
    /// or refuses the capture, a node or the instantiation.
    pub fn build(stream: &Stream, steps: Vec<GraphStep>) -> Result<Graph> {
        const CALL: &str = "Graph::build";
        let device = Device::from(stream.context().device());
        if stream.raw().is_null() {
            return Err(Error::DefaultStreamCapture);
        }
        let mut conditional = false;
        for (i, step) in steps.iter().enumerate() {
            if let Some(l) = step.launches().find(|l| l.device() != device) {
                return Err(Error::StreamDevice {
                    launch: format!("{CALL}: step {i}: launch of kernel '{}'", l.kernel().name()),
                    stream: device,
                    device: l.device(),
                });
            }
            if let GraphStep::If { condition, .. } | GraphStep::While { condition, .. } = step {
                check_condition(CALL, i, condition, device)?;
                conditional = true;
            }
        }
        let setter = if conditional { Some(setter()?) } else { None };
        let mut b = Builder {
            stream,
            device,
            top: CudaGraph::new(stream.context())?,
            last: None,
            kept: Vec::new(),
        };
        let mut run = Vec::new();
        for step in steps {
            let step = match step {
                GraphStep::Launch(l) => {
                    run.push(l);
                    continue;
                }
                other => other,
            };
            if !run.is_empty() {
                b.add_launches(std::mem::take(&mut run))?;
            }
            let Some(setter) = &setter else { continue };
            match step {
                GraphStep::If {
                    condition,
                    on_true,
                    on_false,
                } => b.add_if(setter, &condition, on_true, on_false)?,
                GraphStep::While { condition, body } => b.add_while(setter, &condition, body)?,
                GraphStep::Launch(_) => {}
            }
        }
        if !run.is_empty() {
            b.add_launches(run)?;
        }
        let exec = b.top.instantiate()?;
        Ok(Graph::from_parts(exec, b.top, b.kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host forms: the same count-down program as the GPU test, with a
    /// Warp-style kernel on the CPU device clearing the condition.
    #[test]
    fn run_while_and_run_if_read_the_condition_before_each_pass() {
        use crate::launch::cpu_fn;
        let count_down = KernelSpec::new("count_down", 1)
            .array::<i32>("counter", 1)
            .array::<i32>("cond", 1)
            .declare()
            .unwrap()
            .with_cpu(
                cpu_fn(|_, args| {
                    let (counter, cond) = (args.array::<i32>(0)?, args.array::<i32>(1)?);
                    let c = counter.get(0)? - 1;
                    counter.set(0, c)?;
                    if c == 0 {
                        cond.set(0, 0)?;
                    }
                    Ok(())
                }),
                None,
            );
        let counter = Array::from_slice(Device::Cpu, &[5i32], &[1]).unwrap();
        let cond = Array::from_slice(Device::Cpu, &[1i32, 7], &[2]).unwrap();
        let passes = run_while(&cond, || {
            let b = count_down.launch(1).inputs((&counter, &cond)).device("cpu");
            // SAFETY: the Rust body touches element 0 of each array only.
            unsafe { b.unchecked() }.run()
        })
        .unwrap();
        assert_eq!(passes, 5);
        assert_eq!(counter.to_vec::<i32>().unwrap(), vec![0]);
        assert_eq!(
            run_while(&cond, || Ok(())).unwrap(),
            0,
            "condition 0: no pass"
        );
        let mut which = Vec::new();
        for v in [3, 0, -1] {
            cond.copy_from_slice(&[v, 7]).unwrap();
            let branch = std::cell::Cell::new("");
            let took = run_if(
                &cond,
                || {
                    branch.set("true");
                    Ok(())
                },
                || {
                    branch.set("false");
                    Ok(())
                },
            );
            which.push((took.unwrap(), branch.get()));
        }
        assert_eq!(
            which,
            vec![(true, "true"), (false, "false"), (true, "true")]
        );
        let float = Array::from_slice(Device::Cpu, &[1.0f32], &[1]).unwrap();
        let e = run_while(&float, || Ok(())).unwrap_err().to_string();
        assert!(e.contains("run_while") && e.contains("float32"), "{e}");
    }

    #[test]
    fn conditions_are_int32_arrays_with_an_element_on_the_graphs_device() {
        let ok = Array::from_slice(Device::Cpu, &[1i32], &[1]).unwrap();
        assert!(check_condition("t", 0, &ok, Device::Cpu).is_ok());
        let float = Array::from_slice(Device::Cpu, &[1.0f32], &[1]).unwrap();
        let e = check_condition("Graph::build", 2, &float, Device::Cpu).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("Graph::build") && msg.contains("step 2") && msg.contains("float32"),
            "{msg}"
        );
        let empty = Array::zeros::<i32>(Device::Cpu, &[0]).unwrap();
        let msg = check_condition("t", 0, &empty, Device::Cpu)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("has no element"), "{msg}");
        let msg = check_condition("t", 1, &ok, Device::Cuda(0))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("is on cpu") && msg.contains("cuda:0"), "{msg}");
    }

    /// The embedded PTX declares the kernel with the parameter layout the
    /// declaration promises: launch_bounds_t<1> (24 B), u64, array_t (56 B), int.
    #[test]
    fn the_condition_kernel_has_warps_parameter_layout() {
        let ptx = SET_CONDITION_PTX;
        assert!(ptx.contains(".version 8.3"), "PTX ISA 8.3 (CUDA 12.3)");
        assert!(ptx.contains(&format!(".visible .entry {SET_CONDITION}(")));
        for p in [
            "param_0[24]",
            ".u64 warp_launch_set_condition_param_1",
            "param_2[56]",
            ".u32 warp_launch_set_condition_param_3",
        ] {
            assert!(ptx.contains(p), "{p}");
        }
        assert!(ptx.contains("call.uni") && ptx.contains("cudaGraphSetConditional"));
        assert_eq!(
            cuda_api::check_image(ptx.as_bytes()).unwrap(),
            cuda_api::ImageKind::Ptx,
            "the loader's image check accepts it"
        );
    }
}
