//! Conditional CUDA graphs: Warp's `wp.capture_if` and `wp.capture_while`
//! on top of cuda-api's conditional nodes ([`cuda_api::CudaGraph::add_if_with`],
//! [`cuda_api::CudaGraph::add_while_with`]), nested as Warp's are: the body
//! of an if or a while is a list of steps, themselves launches, ifs or
//! whiles, built in place into the conditional node's body graph
//! ([`cuda_api::ConditionalBody`]). The condition is element 0 of an int32
//! array on the device, as in Warp: nonzero is true. A small kernel of
//! warp-launch's own (`conditional/set_condition.cu`, embedded as PTX)
//! reads it into the node's condition before an `if` node and before and
//! after every pass of a `while` body, inside the graph that holds the node
//! (for a nested node, the enclosing body), so kernels of the body end the
//! loop by writing 0 into the array.

use std::sync::OnceLock;

use cuda_api::{
    CaptureMode, Condition, ConditionalBody, CudaGraph, CudaResult, GraphNode, Library, Stream,
};

use crate::abi::DType;
use crate::array::Array;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::launch::prepare;
use crate::launch::{Kernel, KernelSpec, Launch};

/// `conditional/set_condition.cu` compiled by nvcc 13.0 (see its header).
const SET_CONDITION_PTX: &str = include_str!("conditional/set_condition.ptx");
/// Its one kernel.
const SET_CONDITION: &str = "warp_launch_set_condition";

/// One step of a graph made by [`Graph::build`] (or of a program run on the
/// host by [`run_steps`]): a launch, or Warp's `capture_if` /
/// `capture_while` over further steps, which nest (a while inside an if, an
/// if inside a while body, a while inside a while).
///
/// On the CPU device, the same steps run on the host ([`run_steps`]): a
/// while loop whose body picks one of two kernels by a flag a kernel sets.
///
/// ```
/// use warp_launch::{Array, Device, GraphStep, KernelSpec, cpu_each_fn, run_steps};
/// # fn main() -> warp_launch::Result<()> {
/// // count_down(counter, cond, flag): counter[0] -= 1; flag[0] = counter[0] % 2;
/// // cond[0] = 0 when counter[0] reaches 0.
/// let count_down = KernelSpec::new("count_down", 1)
///     .array::<i32>("counter", 1)
///     .array::<i32>("cond", 1)
///     .array::<i32>("flag", 1)
///     .declare()?
///     .with_cpu(
///         cpu_each_fn(|a, each| {
///             let (counter, cond, flag) =
///                 (a.array::<i32>(0)?, a.array::<i32>(1)?, a.array::<i32>(2)?);
///             each.run(|_| {
///                 let c = counter.get(0)? - 1;
///                 counter.set(0, c)?;
///                 flag.set(0, c % 2)?;
///                 if c == 0 {
///                     cond.set(0, 0)?;
///                 }
///                 Ok(())
///             })
///         }),
///         None,
///     );
/// // add(x, v): x[i] += v.
/// let add = KernelSpec::new("add", 1)
///     .array::<i32>("x", 1)
///     .value::<i32>("v")
///     .declare()?
///     .with_cpu(
///         cpu_each_fn(|a, each| {
///             let (x, v) = (a.array::<i32>(0)?, a.value::<i32>(1)?);
///             each.run(|t| x.set(t.tid(), x.get(t.tid())? + v))
///         }),
///         None,
///     );
/// let cpu = Device::Cpu;
/// let ints = |v: &[i32]| Array::from_slice(cpu, v, &[v.len()]);
/// let (counter, cond, flag) = (ints(&[5])?, ints(&[1])?, ints(&[0])?);
/// let (odd, even) = (ints(&[0; 4])?, ints(&[0; 4])?);
/// let count = count_down.launch(1).inputs((&counter, &cond, &flag)).device("cpu");
/// // SAFETY: count_down touches element 0 of each array only.
/// let count = unsafe { count.unchecked() }.record_cmd()?;
/// let steps = vec![GraphStep::capture_while(
///     &cond,
///     vec![
///         count.into(),
///         GraphStep::capture_if(
///             &flag,
///             vec![add.launch(4).inputs((&odd, 1)).device("cpu").record_cmd()?.into()],
///             vec![add.launch(4).inputs((&even, 10)).device("cpu").record_cmd()?.into()],
///         ),
///     ],
/// )];
/// run_steps(&steps)?;
/// // Five passes: the counter came down to 3 and 1 (odd), and 4, 2 and 0.
/// assert_eq!(odd.to_vec::<i32>()?, vec![2; 4]);
/// assert_eq!(even.to_vec::<i32>()?, vec![30; 4]);
/// # Ok(()) }
/// ```
#[derive(Debug)]
// A graph is described once and built once: a boxed launch would cost
// an allocation per step for nothing.
#[allow(clippy::large_enum_variant)]
pub enum GraphStep {
    /// A launch, after the steps before it.
    Launch(Launch),
    /// Warp's `wp.capture_if(condition, on_true, on_false)`: `on_true`'s
    /// steps when element 0 of `condition` (int32) is nonzero when the
    /// step is reached, else `on_false`'s.
    If {
        /// An int32 array of at least one element on the graph's device.
        condition: Array,
        /// What runs when the condition holds.
        on_true: Vec<GraphStep>,
        /// What runs otherwise.
        on_false: Vec<GraphStep>,
    },
    /// Warp's `wp.capture_while(condition, body)`: `body`'s steps again
    /// and again while element 0 of `condition` (int32) is nonzero, checked
    /// before each pass; a launch of the body ends the loop by writing 0.
    While {
        /// An int32 array of at least one element on the graph's device.
        condition: Array,
        /// What runs on each pass.
        body: Vec<GraphStep>,
    },
}

impl GraphStep {
    /// Warp's `wp.capture_if(condition, on_true, on_false)` as a step. Each
    /// branch is a list of steps (`vec![launch.into(), GraphStep::capture_while(..)]`);
    /// an empty list is no branch.
    ///
    /// ```
    /// use warp_launch::{Array, Device, GraphStep};
    /// # fn main() -> warp_launch::Result<()> {
    /// let cond = Array::from_slice(Device::Cpu, &[0i32], &[1])?;
    /// let inner = Array::from_slice(Device::Cpu, &[0i32], &[1])?;
    /// let step = GraphStep::capture_if(&cond, vec![GraphStep::capture_while(&inner, vec![])], vec![]);
    /// assert!(matches!(&step, GraphStep::If { on_true, .. } if on_true.len() == 1));
    /// # Ok(()) }
    /// ```
    pub fn capture_if(
        condition: &Array,
        on_true: impl IntoIterator<Item = GraphStep>,
        on_false: impl IntoIterator<Item = GraphStep>,
    ) -> GraphStep {
        GraphStep::If {
            condition: condition.clone(),
            on_true: on_true.into_iter().collect(),
            on_false: on_false.into_iter().collect(),
        }
    }

    /// Warp's `wp.capture_while(condition, body)` as a step. The body is a
    /// list of steps, which may hold further ifs and whiles.
    ///
    /// ```
    /// use warp_launch::{Array, Device, GraphStep};
    /// # fn main() -> warp_launch::Result<()> {
    /// let cond = Array::from_slice(Device::Cpu, &[1i32], &[1])?;
    /// let step = GraphStep::capture_while(&cond, vec![]);
    /// assert!(matches!(step, GraphStep::While { body, .. } if body.is_empty()));
    /// # Ok(()) }
    /// ```
    pub fn capture_while(
        condition: &Array,
        body: impl IntoIterator<Item = GraphStep>,
    ) -> GraphStep {
        GraphStep::While {
            condition: condition.clone(),
            body: body.into_iter().collect(),
        }
    }

    /// The lists of steps inside this one, each with its name in a step
    /// path ("if on_true", "if on_false", "while body").
    fn branches(&self) -> Vec<(&'static str, &[GraphStep])> {
        match self {
            GraphStep::Launch(_) => Vec::new(),
            GraphStep::If {
                on_true, on_false, ..
            } => vec![("if on_true", on_true), ("if on_false", on_false)],
            GraphStep::While { body, .. } => vec![("while body", body)],
        }
    }

    fn condition(&self) -> Option<&Array> {
        match self {
            GraphStep::Launch(_) => None,
            GraphStep::If { condition, .. } | GraphStep::While { condition, .. } => Some(condition),
        }
    }
}

impl From<Launch> for GraphStep {
    fn from(l: Launch) -> GraphStep {
        GraphStep::Launch(l)
    }
}

/// The path of step `i` of a list: `step 2` at the top, `step 2 > while
/// body step 0` inside step 2's body.
fn step_path(parent: Option<(&str, &str)>, i: usize) -> String {
    match parent {
        None => format!("step {i}"),
        Some((path, branch)) => format!("{path} > {branch} step {i}"),
    }
}

/// Visits every step of `steps` and of the lists inside them, depth first,
/// with its path.
fn visit(
    steps: &[GraphStep],
    parent: Option<(&str, &str)>,
    f: &mut dyn FnMut(&str, &GraphStep) -> Result<()>,
) -> Result<()> {
    for (i, step) in steps.iter().enumerate() {
        let path = step_path(parent, i);
        f(&path, step)?;
        for (branch, inner) in step.branches() {
            visit(inner, Some((&path, branch)), f)?;
        }
    }
    Ok(())
}

/// Element 0 of a condition array, read on the host (waiting for the
/// work that writes it, as any read of the array does).
fn read_condition(call: &'static str, path: &str, condition: &Array) -> Result<bool> {
    check_condition(call, path, condition, None)?;
    let first = condition.slice(0, 0..1)?;
    Ok(first.to_vec::<i32>()?.first().is_some_and(|&v| v != 0))
}

/// Warp's `wp.capture_while(condition, body)` outside a graph capture: runs
/// `body` again and again while element 0 of `condition` (an int32 array
/// on any device) is nonzero, read on the host before each pass; returns
/// how many passes ran. The same program as a [`GraphStep::While`] of a
/// graph, run on the host (and on the CPU device); `body` may run further
/// `run_while` / `run_if` calls (nesting), or steps with [`run_steps`].
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
    while read_condition("run_while", "", condition)? {
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
    let took = read_condition("run_if", "", condition)?;
    if took {
        on_true()?
    } else {
        on_false()?
    }
    Ok(took)
}

/// Runs `steps` in order on the host, as Warp runs `capture_if` /
/// `capture_while` outside a capture: each launch with
/// [`Launch::launch`] (on its device: the CPU device runs it on this
/// thread), each condition read on the host when its step is reached
/// (waiting for the work that writes it), nested steps as they come. The
/// same program as [`Graph::build`] of `steps` on a GPU, and the way to run
/// it on the CPU device (conditions may be on any device here). Every
/// condition is checked before anything runs.
///
/// See [`GraphStep`] for an example.
///
/// # Errors
///
/// [`Error::Shape`] naming the step path (`step 2 > while body step 0`)
/// when a condition is not an int32 array of at least one element; the
/// errors of the launches and of reading the conditions.
pub fn run_steps(steps: &[GraphStep]) -> Result<()> {
    const CALL: &str = "run_steps";
    visit(steps, None, &mut |path, step| match step.condition() {
        Some(c) => check_condition(CALL, path, c, None),
        None => Ok(()),
    })?;
    run_list(steps, None)
}

fn run_list(steps: &[GraphStep], parent: Option<(&str, &str)>) -> Result<()> {
    const CALL: &str = "run_steps";
    for (i, step) in steps.iter().enumerate() {
        match step {
            GraphStep::Launch(l) => l.launch()?,
            GraphStep::If {
                condition,
                on_true,
                on_false,
            } => {
                let path = step_path(parent, i);
                if read_condition(CALL, &path, condition)? {
                    run_list(on_true, Some((&path, "if on_true")))?;
                } else {
                    run_list(on_false, Some((&path, "if on_false")))?;
                }
            }
            GraphStep::While { condition, body } => {
                let path = step_path(parent, i);
                while read_condition(CALL, &path, condition)? {
                    run_list(body, Some((&path, "while body")))?;
                }
            }
        }
    }
    Ok(())
}

/// Checks a condition array: int32, at least one element, and on `device`
/// when one is given (a graph's); `path` names the step (empty for none).
fn check_condition(
    call: &'static str,
    path: &str,
    a: &Array,
    device: Option<Device>,
) -> Result<()> {
    let problem = if !std::ptr::eq(a.dtype(), DType::INT32) {
        format!("holds {}", a.dtype().name)
    } else if a.is_empty() {
        "has no element".to_string()
    } else if let Some(d) = device
        && a.device() != d
    {
        format!("is on {}", a.device())
    } else {
        return Ok(());
    };
    let at = if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    };
    let (wanted, dev) = match device {
        Some(d) => (format!(" on the graph's device {d}"), d),
        None => (String::new(), a.device()),
    };
    Err(Error::Shape {
        call,
        message: format!(
            "{at}the condition array {problem}, but a condition is element 0 of an int32 array of at least one element{wanted}; make it with Array::zeros::<i32>({dev}, &[1])"
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

/// Captures `launches` in order on `stream` into a graph, each checked for
/// the stream's context (the graph's).
fn capture(stream: &Stream, launches: &[Launch]) -> Result<CudaGraph<'static>> {
    stream.capture(CaptureMode::ThreadLocal, |c| -> Result<()> {
        for l in launches {
            prepare::capture_node(c, l.graph_parts(c.context(), "Graph::build")?)?;
        }
        Ok(())
    })
}

/// A graph nodes are added to: the top-level graph, or a conditional
/// node's body being built in place.
trait Target {
    fn add_child(&mut self, g: &CudaGraph<'static>, deps: &[GraphNode]) -> CudaResult<GraphNode>;
    fn new_condition(&mut self) -> CudaResult<Condition>;
    fn add_if_in(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'static, 'id>) -> Result<()>,
    ) -> Result<GraphNode>;
    fn add_while_in(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'static, 'id>) -> Result<()>,
    ) -> Result<GraphNode>;
}

impl Target for CudaGraph<'static> {
    fn add_child(&mut self, g: &CudaGraph<'static>, deps: &[GraphNode]) -> CudaResult<GraphNode> {
        self.add_child_graph(g, deps)
    }
    fn new_condition(&mut self) -> CudaResult<Condition> {
        self.condition(None)
    }
    fn add_if_in(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'static, 'id>) -> Result<()>,
    ) -> Result<GraphNode> {
        self.add_if_with(cond, deps, build)
    }
    fn add_while_in(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'static, 'id>) -> Result<()>,
    ) -> Result<GraphNode> {
        self.add_while_with(cond, deps, build)
    }
}

impl Target for ConditionalBody<'static, '_> {
    fn add_child(&mut self, g: &CudaGraph<'static>, deps: &[GraphNode]) -> CudaResult<GraphNode> {
        self.add_child_graph(g, deps)
    }
    fn new_condition(&mut self) -> CudaResult<Condition> {
        self.condition(None)
    }
    fn add_if_in(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'static, 'id>) -> Result<()>,
    ) -> Result<GraphNode> {
        self.add_if_with(cond, deps, build)
    }
    fn add_while_in(
        &mut self,
        cond: &Condition,
        deps: &[GraphNode],
        build: impl for<'id> FnOnce(&mut ConditionalBody<'static, 'id>) -> Result<()>,
    ) -> Result<GraphNode> {
        self.add_while_with(cond, deps, build)
    }
}

/// The dependencies of the next node: the last one added, if any.
fn deps(last: Option<GraphNode>) -> Vec<GraphNode> {
    last.into_iter().collect()
}

/// What building a graph of steps needs at every level, and every launch
/// the graph holds.
struct Builder<'s> {
    stream: &'s Stream,
    device: Device,
    /// The condition kernel, when some step is conditional.
    setter: Option<Kernel>,
    kept: Vec<Launch>,
}

impl Builder<'_> {
    fn set_launch(&self, cond: &Condition, array: &Array, invert: bool) -> Result<Launch> {
        let setter = match &self.setter {
            Some(k) => k.clone(),
            None => setter()?,
        };
        set_launch(&setter, cond, array, invert, self.device)
    }

    /// Adds `steps` to `g` in a chain after `last`, consecutive launches as
    /// one child graph, then `tail` (launches appended to the last run);
    /// returns the last node added (`last` when none was).
    fn steps<T: Target>(
        &mut self,
        g: &mut T,
        steps: Vec<GraphStep>,
        mut last: Option<GraphNode>,
        tail: Vec<Launch>,
    ) -> Result<Option<GraphNode>> {
        let mut run = Vec::new();
        for step in steps {
            match step {
                GraphStep::Launch(l) => run.push(l),
                GraphStep::If {
                    condition,
                    on_true,
                    on_false,
                } => {
                    last = self.launches(g, std::mem::take(&mut run), last)?;
                    last = self.add_if(g, &condition, on_true, on_false, last)?;
                }
                GraphStep::While { condition, body } => {
                    last = self.launches(g, std::mem::take(&mut run), last)?;
                    last = Some(self.add_while(g, &condition, body, last)?);
                }
            }
        }
        run.extend(tail);
        self.launches(g, run, last)
    }

    /// Adds `launches` as one child graph after `last`.
    fn launches<T: Target>(
        &mut self,
        g: &mut T,
        launches: Vec<Launch>,
        last: Option<GraphNode>,
    ) -> Result<Option<GraphNode>> {
        if launches.is_empty() {
            return Ok(last);
        }
        let c = capture(self.stream, &launches)?;
        let node = g.add_child(&c, &deps(last))?;
        self.kept.extend(launches);
        Ok(Some(node))
    }

    /// An if: one node per branch that has steps, each on its own
    /// condition made in `g` and set by a launch in `g` before the first
    /// (both are read before either branch runs: a branch may write the
    /// array).
    fn add_if<T: Target>(
        &mut self,
        g: &mut T,
        condition: &Array,
        on_true: Vec<GraphStep>,
        on_false: Vec<GraphStep>,
        last: Option<GraphNode>,
    ) -> Result<Option<GraphNode>> {
        let mut branches = Vec::new();
        let mut setters = Vec::new();
        for (body, invert) in [(on_true, false), (on_false, true)] {
            if body.is_empty() {
                continue;
            }
            let cond = g.new_condition()?;
            setters.push(self.set_launch(&cond, condition, invert)?);
            branches.push((cond, body));
        }
        let mut last = self.launches(g, setters, last)?;
        for (cond, body) in branches {
            let node = g.add_if_in(&cond, &deps(last), |b| {
                self.steps(b, body, None, Vec::new()).map(|_| ())
            })?;
            last = Some(node);
        }
        Ok(last)
    }

    /// A while: its condition made in `g`, set by a launch in `g` before
    /// the node and by one at the end of every pass of the body.
    fn add_while<T: Target>(
        &mut self,
        g: &mut T,
        condition: &Array,
        body: Vec<GraphStep>,
        last: Option<GraphNode>,
    ) -> Result<GraphNode> {
        let cond = g.new_condition()?;
        let before = self.set_launch(&cond, condition, false)?;
        let last = self.launches(g, vec![before], last)?;
        g.add_while_in(&cond, &deps(last), |b| {
            let after = self.set_launch(&cond, condition, false)?;
            self.steps(b, body, None, vec![after]).map(|_| ())
        })
    }
}

impl Graph {
    /// Builds and instantiates a graph of `steps` in order on `stream` (a
    /// created stream, not the legacy default stream, of the launches'
    /// device): launches, and Warp's `capture_if` / `capture_while` over
    /// further steps ([`GraphStep`], nested to any depth), whose conditions
    /// the device reads from their int32 arrays every time the graph runs.
    /// Nested ifs and whiles are built in place into the enclosing
    /// conditional node's body graph, with their conditions set by launches
    /// inside that body. Needs a driver with conditional graph nodes (CUDA
    /// 12.3 or later). The graph owns the launches and the condition
    /// arrays, and belongs to `stream`'s context: every launch (the steps',
    /// and those setting the conditions) must have been checked for it. Its
    /// launches lie inside child graphs, so [`Graph::update`]
    /// refuses them ([`Error::GraphNodeMissing`]): build again to change
    /// one. [`run_steps`] runs the same steps on the host.
    ///
    /// ```no_run
    /// use warp_launch::{AotModule, Array, Device, Graph, GraphStep, Stream};
    /// # fn main() -> warp_launch::Result<()> {
    /// // tests/warp/conditional.py compiled by Warp: add_value(x, v) adds v to
    /// // every x[i]; count_down(counter, cond, log) counts counter[0] down
    /// // and writes cond[0] = 0 when it reaches zero.
    /// // SAFETY: the directory is one wp.compile_aot_module output, unchanged.
    /// let module = unsafe { AotModule::load("target/warp-aot/conditional") }?;
    /// let gpu = Device::Cuda(0);
    /// let stream = Stream::new(&gpu.context()?)?;
    /// let (counter, cond) = (Array::from_slice(gpu, &[5i32], &[1])?, Array::from_slice(gpu, &[1i32], &[1])?);
    /// let (log, x) = (Array::zeros::<i32>(gpu, &[8])?, Array::zeros::<i32>(gpu, &[4])?);
    /// let (inner, inner_cond) = (Array::zeros::<i32>(gpu, &[1])?, Array::zeros::<i32>(gpu, &[1])?);
    /// let count_down = module.kernel("count_down")?;
    /// let count = |counter: &Array, cond: &Array| {
    ///     let b = count_down.launch(1).inputs((counter, cond, &log));
    ///     // SAFETY: count_down touches counter[0], cond[0] and log[c - 1] for 0 < c <= 8 only.
    ///     unsafe { b.unchecked() }.record_cmd()
    /// };
    /// let add = |a: &Array, v: i32| module.kernel("add_value")?.launch(a.len()).inputs((a, v)).record_cmd();
    /// // Five outer passes, each arming an inner loop of three passes.
    /// let graph = Graph::build(&stream, vec![GraphStep::capture_while(
    ///     &cond,
    ///     vec![
    ///         add(&inner, 3)?.into(),
    ///         add(&inner_cond, 1)?.into(),
    ///         GraphStep::capture_while(&inner_cond, vec![add(&x, 1)?.into(), count(&inner, &inner_cond)?.into()]),
    ///         count(&counter, &cond)?.into(),
    ///     ],
    /// )])?;
    /// graph.launch(&stream)?;
    /// stream.synchronize()?;
    /// assert_eq!(x.to_vec::<i32>()?, vec![15; 4]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::DefaultStreamCapture`] for the legacy default stream,
    /// [`Error::StreamDevice`] for a launch on another device than the
    /// stream's, [`Error::StreamContext`] for a stream of another context
    /// than the one the launches were checked for (a context of its own on
    /// their device, not its primary context), [`Error::Shape`] for a
    /// condition that is not an int32 array of at least one element on that
    /// device (each naming the step path, `step 2 > while body step 0`),
    /// [`Error::CpuGraphNode`] for a CPU launch, [`Error::Cuda`] when the
    /// driver has no conditional nodes or refuses the capture, a node or the
    /// instantiation.
    pub fn build(stream: &Stream, steps: Vec<GraphStep>) -> Result<Graph> {
        const CALL: &str = "Graph::build";
        let device = Device::from(stream.context().device());
        if stream.raw().is_null() {
            return Err(Error::DefaultStreamCapture);
        }
        let mut conditional = false;
        visit(&steps, None, &mut |path, step| {
            match step {
                GraphStep::Launch(l) if l.device() != device => {
                    return Err(Error::StreamDevice {
                        launch: format!("{CALL}: {path}: launch of kernel '{}'", l.kernel().name()),
                        stream: device,
                        device: l.device(),
                    });
                }
                GraphStep::Launch(_) => {}
                GraphStep::If { condition, .. } | GraphStep::While { condition, .. } => {
                    check_condition(CALL, path, condition, Some(device))?;
                    conditional = true;
                }
            }
            Ok(())
        })?;
        let mut b = Builder {
            stream,
            device,
            setter: if conditional { Some(setter()?) } else { None },
            kept: Vec::new(),
        };
        let mut top = CudaGraph::new(stream.context())?;
        b.steps(&mut top, steps, None, Vec::new())?;
        let exec = top.instantiate()?;
        Ok(Graph::from_parts(exec, top, b.kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host forms: the same count-down program as the GPU test, with a
    /// Warp-style kernel on the CPU device clearing the condition.
    #[test]
    fn run_while_and_run_if_read_the_condition_before_each_pass() {
        use crate::cpu::cpu_each_fn;
        let count_down = KernelSpec::new("count_down", 1)
            .array::<i32>("counter", 1)
            .array::<i32>("cond", 1)
            .declare()
            .unwrap()
            .with_cpu(
                cpu_each_fn(|args, each| {
                    each.run(|_| {
                        let (counter, cond) = (args.array::<i32>(0)?, args.array::<i32>(1)?);
                        let c = counter.get(0)? - 1;
                        counter.set(0, c)?;
                        if c == 0 {
                            cond.set(0, 0)?;
                        }
                        Ok(())
                    })
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
        assert!(check_condition("t", "step 0", &ok, Some(Device::Cpu)).is_ok());
        let float = Array::from_slice(Device::Cpu, &[1.0f32], &[1]).unwrap();
        let e = check_condition("Graph::build", "step 2", &float, Some(Device::Cpu)).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("Graph::build") && msg.contains("step 2: ") && msg.contains("float32"),
            "{msg}"
        );
        let empty = Array::zeros::<i32>(Device::Cpu, &[0]).unwrap();
        let msg = check_condition("t", "", &empty, None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("has no element"), "{msg}");
        let msg = check_condition("t", "step 1", &ok, Some(Device::Cuda(0)))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("is on cpu") && msg.contains("cuda:0"), "{msg}");
        assert!(
            check_condition("t", "", &ok, None).is_ok(),
            "the host forms take a condition on any device"
        );
    }

    /// A Rust CPU kernel: `counter[0] -= 1` (not below 0), `flag[0] =
    /// counter[0] % 2`, `log[counter] = old counter`, and `cond[0] = 0` when the
    /// counter reaches 0 (Warp's `count_down` of `tests/warp/conditional.py`
    /// with a parity flag).
    fn count_down() -> Kernel {
        KernelSpec::new("count_down", 1)
            .array::<i32>("counter", 1)
            .array::<i32>("cond", 1)
            .array::<i32>("flag", 1)
            .declare()
            .unwrap()
            .with_cpu(
                crate::cpu::cpu_each_fn(|args, each| {
                    each.run(|_| {
                        let (counter, cond, flag) = (
                            args.array::<i32>(0)?,
                            args.array::<i32>(1)?,
                            args.array::<i32>(2)?,
                        );
                        let c = (counter.get(0)? - 1).max(0);
                        counter.set(0, c)?;
                        flag.set(0, c % 2)?;
                        if c == 0 {
                            cond.set(0, 0)?;
                        }
                        Ok(())
                    })
                }),
                None,
            )
    }

    /// A Rust CPU kernel: `x[i] += v` (Warp's `add_value`).
    fn add_value() -> Kernel {
        KernelSpec::new("add_value", 1)
            .array::<i32>("x", 1)
            .value::<i32>("v")
            .declare()
            .unwrap()
            .with_cpu(
                crate::cpu::cpu_each_fn(|args, each| {
                    each.run(|t| {
                        let x = args.array::<i32>(0)?;
                        x.set(t.tid(), x.get(t.tid())? + args.value::<i32>(1)?)
                    })
                }),
                None,
            )
    }

    fn ints(v: &[i32]) -> Array {
        Array::from_slice(Device::Cpu, v, &[v.len()]).unwrap()
    }

    fn add(k: &Kernel, x: &Array, v: i32) -> GraphStep {
        k.launch(x.len())
            .inputs((x, v))
            .device("cpu")
            .record_cmd()
            .unwrap()
            .into()
    }

    fn count(k: &Kernel, counter: &Array, cond: &Array, flag: &Array) -> GraphStep {
        let b = k.launch(1).inputs((counter, cond, flag)).device("cpu");
        // SAFETY: the Rust body touches element 0 of each array only.
        unsafe { b.unchecked() }.record_cmd().unwrap().into()
    }

    /// The host path of nested steps on the CPU device: a while whose body
    /// holds an if picking one of two kernels by a flag a kernel of the
    /// body sets, run twice (5 passes, then 4).
    #[test]
    fn run_steps_runs_an_if_nested_in_a_while_body() {
        let (cd, av) = (count_down(), add_value());
        let (counter, cond, flag) = (ints(&[5]), ints(&[1]), ints(&[0]));
        let (odd, even, passes) = (ints(&[0; 3]), ints(&[0; 3]), ints(&[0]));
        let steps = vec![
            add(&av, &passes, 100),
            GraphStep::capture_while(
                &cond,
                vec![
                    count(&cd, &counter, &cond, &flag),
                    add(&av, &passes, 1),
                    GraphStep::capture_if(
                        &flag,
                        vec![add(&av, &odd, 1)],
                        vec![add(&av, &even, 10)],
                    ),
                ],
            ),
        ];
        run_steps(&steps).unwrap();
        // The counter after each pass: 4 3 2 1 0 -> odd twice, even three times.
        assert_eq!(
            odd.to_vec::<i32>().unwrap(),
            vec![2; 3],
            "odd after 5 passes (3, 1)"
        );
        assert_eq!(
            even.to_vec::<i32>().unwrap(),
            vec![30; 3],
            "even after 5 passes (4, 2, 0)"
        );
        assert_eq!(passes.to_vec::<i32>().unwrap(), vec![105], "100 + 5 passes");
        assert_eq!(cond.to_vec::<i32>().unwrap(), vec![0]);
        // Again with the counter at 4: 3 2 1 0 -> two odd, two even.
        counter.copy_from_slice(&[4i32]).unwrap();
        cond.copy_from_slice(&[1i32]).unwrap();
        run_steps(&steps).unwrap();
        assert_eq!(
            odd.to_vec::<i32>().unwrap(),
            vec![4; 3],
            "odd: 2 + 2 (3, 1)"
        );
        assert_eq!(
            even.to_vec::<i32>().unwrap(),
            vec![50; 3],
            "even: 30 + 20 (2, 0)"
        );
        assert_eq!(
            passes.to_vec::<i32>().unwrap(),
            vec![209],
            "105 + 100 + 4 passes"
        );
    }

    /// A while inside a while: the outer body arms the inner loop (counter
    /// 3, condition 1) on every pass, so the inner body runs 3 times per
    /// outer pass; run twice (4 outer passes, then 2).
    #[test]
    fn run_steps_runs_a_while_nested_in_a_while() {
        let (cd, av) = (count_down(), add_value());
        let (outer, outer_cond) = (ints(&[4]), ints(&[1]));
        let (inner, inner_cond, flag) = (ints(&[0]), ints(&[0]), ints(&[0]));
        let (x, outer_passes) = (ints(&[0; 5]), ints(&[0]));
        let steps = vec![GraphStep::capture_while(
            &outer_cond,
            vec![
                add(&av, &inner, 3),
                add(&av, &inner_cond, 1),
                GraphStep::capture_while(
                    &inner_cond,
                    vec![add(&av, &x, 1), count(&cd, &inner, &inner_cond, &flag)],
                ),
                add(&av, &outer_passes, 1),
                count(&cd, &outer, &outer_cond, &flag),
            ],
        )];
        run_steps(&steps).unwrap();
        assert_eq!(
            x.to_vec::<i32>().unwrap(),
            vec![12; 5],
            "4 outer passes x 3 inner"
        );
        assert_eq!(outer_passes.to_vec::<i32>().unwrap(), vec![4]);
        assert_eq!(
            inner.to_vec::<i32>().unwrap(),
            vec![0],
            "inner counter after its loop"
        );
        outer.copy_from_slice(&[2i32]).unwrap();
        outer_cond.copy_from_slice(&[1i32]).unwrap();
        run_steps(&steps).unwrap();
        assert_eq!(
            x.to_vec::<i32>().unwrap(),
            vec![18; 5],
            "12 + 2 outer passes x 3 inner"
        );
        assert_eq!(outer_passes.to_vec::<i32>().unwrap(), vec![6]);
    }

    /// Every nested step has a path, depth first; a bad condition deep
    /// inside is refused by its path before anything runs.
    #[test]
    fn nested_conditions_are_checked_by_step_path_before_anything_runs() {
        let av = add_value();
        let (cond, x) = (ints(&[1]), ints(&[0; 2]));
        let float = Array::from_slice(Device::Cpu, &[1.0f32], &[1]).unwrap();
        let steps = vec![
            add(&av, &x, 1),
            GraphStep::capture_if(
                &cond,
                vec![add(&av, &x, 1)],
                vec![GraphStep::capture_while(
                    &cond,
                    vec![
                        add(&av, &x, 1),
                        GraphStep::capture_if(&float, vec![], vec![]),
                    ],
                )],
            ),
        ];
        let mut paths = Vec::new();
        visit(&steps, None, &mut |path, _| {
            paths.push(path.to_string());
            Ok(())
        })
        .unwrap();
        assert_eq!(
            paths,
            [
                "step 0",
                "step 1",
                "step 1 > if on_true step 0",
                "step 1 > if on_false step 0",
                "step 1 > if on_false step 0 > while body step 0",
                "step 1 > if on_false step 0 > while body step 1",
            ]
        );
        let msg = run_steps(&steps).unwrap_err().to_string();
        assert!(
            msg.contains("run_steps")
                && msg.contains(
                    "step 1 > if on_false step 0 > while body step 1: the condition array holds float32"
                ),
            "{msg}"
        );
        assert_eq!(x.to_vec::<i32>().unwrap(), vec![0; 2], "nothing ran");
        let empty = Array::zeros::<i32>(Device::Cpu, &[0]).unwrap();
        let msg = run_steps(&[GraphStep::capture_while(
            &cond,
            [GraphStep::capture_while(&empty, [])],
        )])
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("step 0 > while body step 0: the condition array has no element"),
            "{msg}"
        );
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
