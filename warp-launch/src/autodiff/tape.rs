//! The tape: launches, copies and host steps recorded while a [`Tape`]
//! records on this thread, replayed backward (their backward kernels and
//! adjoints, in reverse order, with the arrays' gradients) by
//! [`Tape::backward`]; and a finite-difference gradient check.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Add;

use cuda_api::{Context, MemoryKind, Stream};

use super::copy_adjoint;
use crate::abi::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use crate::abi::{Kind, Scalar, Value, encode};
use crate::array::Array;
use crate::error::{Error, Result};
use crate::launch::bind::HeldArray;
use crate::launch::record::{BackwardFn, Recorded};
use crate::launch::{Arg, Launch, StructValue, record};
use crate::signature::{ParamKind, StructType};

/// One recorded operation, in order.
enum Op {
    /// `launches[i]`.
    Launch(usize),
    /// A copy (both arrays with gradients).
    Copy(Box<CopyStep>),
    /// A host step's backward and the arrays whose gradients it uses.
    Func(BackwardFn, Vec<Array>),
}

/// A recorded copy of `src` into `dst`, on `stream` if it named one.
struct CopyStep {
    src: Array,
    dst: Array,
    stream: Option<Stream>,
}

/// Records launches, array copies and host steps, and runs them backward
/// (Warp's `wp.Tape`).
///
/// A copy between two arrays with gradients ([`Array::copy_from`],
/// [`Array::assign_on`], ...) is recorded with its adjoint, as Warp's
/// `wp.copy` is: backward adds the destination's gradient into the
/// source's (any strides, up to four axes; vectors and matrices component
/// by component; float16 and bfloat16 added in float32 and rounded to
/// nearest even, integers modulo 2^bits), then zeroes the destination's
/// unless it [retains it](Array::retain_grad). When both gradients are
/// device memory of one CUDA context, this is a kernel of warp-launch's
/// and a memset, queued on the stream the copy was queued on (else the
/// device's current stream, [`Device::stream`](crate::Device::stream)) and
/// ordered with the device's current stream both ways: no host wait, no
/// copy through the host. Otherwise (the CPU, page-locked or managed
/// memory, two devices) the sum is made on the host, synchronously. Bool
/// gradients, gradients of another dtype or shape, and overlapping
/// gradients are copied over the source's instead (Warp's fallback, with a
/// warning).
///
/// ```
/// use warp_launch::{Array, Device, Tape};
/// # fn main() -> warp_launch::Result<()> {
/// let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0], &[2])?.with_grad()?;
/// let y = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
/// let mut tape = Tape::new();
/// // A copy inside a recording is recorded with its adjoint, as wp.copy is.
/// tape.record(|| y.copy_from(&x))?;
/// let seed = Array::from_slice(Device::Cpu, &[3.0f32, 4.0], &[2])?;
/// tape.backward_with(&[(&y, &seed)])?;
/// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![3.0, 4.0]);
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct Tape {
    launches: Vec<Launch>,
    ops: Vec<Op>,
}

impl fmt::Debug for Tape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let copies = self.ops.iter().filter(|o| matches!(o, Op::Copy(_))).count();
        let funcs = self
            .ops
            .iter()
            .filter(|o| matches!(o, Op::Func(..)))
            .count();
        f.debug_struct("Tape")
            .field("launches", &self.launches)
            .field("copies", &copies)
            .field("funcs", &funcs)
            .finish()
    }
}

/// Recording in progress: launches and copies made on this thread while it
/// is the innermost live guard are added to its tape when it is dropped.
///
/// Each guard has an id and removes its own entry when dropped, so guards
/// may be dropped in any order: a launch goes to the most recent guard
/// still alive. The guard stays on the thread that made it (it is neither
/// `Send` nor `Sync`): recording is per thread. Forgetting a guard
/// (`std::mem::forget`) leaks its recording, and later launches on the
/// thread go to it while it is the innermost.
///
/// ```
/// use warp_launch::{Array, Device, Tape};
/// # fn main() -> warp_launch::Result<()> {
/// let x = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
/// let y = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
/// let mut tape = Tape::new();
/// {
///     let _rec = tape.recording();
///     y.copy_from(&x)?;
/// }
/// assert_eq!(tape.gradients().len(), 2);
/// # Ok(()) }
/// ```
#[must_use = "recording stops when this guard is dropped"]
pub struct Recording<'t> {
    tape: &'t mut Tape,
    id: u64,
    /// Not `Send` or `Sync`: the entry lives in this thread's state.
    _thread: PhantomData<*const ()>,
}

impl Recording<'_> {
    /// The guard's id, unique among this thread's guards.
    ///
    /// ```
    /// use warp_launch::Tape;
    /// let (mut a, mut b) = (Tape::new(), Tape::new());
    /// let (ra, rb) = (a.recording(), b.recording());
    /// assert_ne!(ra.id(), rb.id());
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// [`Tape::record_func`] in the middle of a recording: the host step
    /// takes its place between the launches and copies recorded before and
    /// after it.
    ///
    /// ```
    /// use warp_launch::{Array, Device, Tape};
    /// # fn main() -> warp_launch::Result<()> {
    /// let x = Array::zeros::<f32>(Device::Cpu, &[1])?.with_grad()?;
    /// let mut tape = Tape::new();
    /// {
    ///     let rec = tape.recording();
    ///     let g = x.grad().unwrap().clone();
    ///     rec.record_func(move || g.copy_from_slice(&[5.0f32]), &[&x])?;
    /// }
    /// tape.backward_with(&[])?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![5.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Tape::record_func`].
    pub fn record_func(
        &self,
        backward: impl Fn() -> Result<()> + Send + Sync + 'static,
        arrays: &[&Array],
    ) -> Result<()> {
        let arrays = func_arrays("Recording::record_func", arrays)?;
        record::record_in(self.id, Recorded::Func(Box::new(backward), arrays));
        Ok(())
    }
}

impl Drop for Recording<'_> {
    fn drop(&mut self) {
        for op in record::close(self.id) {
            self.tape.push(op);
        }
    }
}

/// The arrays of a host step: each must have a gradient (as Warp requires).
fn func_arrays(call: &'static str, arrays: &[&Array]) -> Result<Vec<Array>> {
    arrays
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if a.grad().is_none() {
                return Err(Error::NoGradient {
                    call,
                    array: format!("arrays[{i}] {a:?} (make it with Array::with_grad)"),
                });
            }
            Ok((*a).clone())
        })
        .collect()
}

impl Tape {
    /// An empty tape.
    ///
    /// ```
    /// assert!(warp_launch::Tape::new().launches().is_empty());
    /// ```
    pub fn new() -> Tape {
        Tape::default()
    }

    fn push(&mut self, op: Recorded) {
        match op {
            Recorded::Launch(l) => {
                self.ops.push(Op::Launch(self.launches.len()));
                self.launches.push(l);
            }
            Recorded::Copy { src, dst, stream } => {
                self.ops
                    .push(Op::Copy(Box::new(CopyStep { src, dst, stream })));
            }
            Recorded::Func(f, arrays) => self.ops.push(Op::Func(f, arrays)),
        }
    }

    /// Starts recording on this thread until the guard is dropped.
    ///
    /// ```
    /// let mut tape = warp_launch::Tape::new();
    /// let rec = tape.recording();
    /// drop(rec);
    /// assert!(tape.launches().is_empty());
    /// ```
    pub fn recording(&mut self) -> Recording<'_> {
        let id = record::open();
        Recording {
            tape: self,
            id,
            _thread: PhantomData,
        }
    }

    /// Records the launches and copies `f` makes on this thread.
    ///
    /// ```
    /// use warp_launch::{Array, Device, Tape};
    /// # fn main() -> warp_launch::Result<()> {
    /// let x = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
    /// let y = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
    /// let mut tape = Tape::new();
    /// tape.record(|| y.copy_from(&x))?;
    /// assert_eq!(tape.gradients().len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn record<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let _rec = self.recording();
        f()
    }

    /// Warp's `tape.record_func(backward, arrays)`: records a host step
    /// whose backward pass is `backward`, run in its place (reverse order)
    /// by [`Tape::backward`]. `arrays` are the arrays whose gradients it
    /// uses: [`Tape::zero`] zeroes them and [`Tape::gradients`] lists them.
    /// Within a recording, use [`Recording::record_func`].
    ///
    /// ```
    /// use warp_launch::{Array, Device, Tape};
    /// # fn main() -> warp_launch::Result<()> {
    /// // A host step y = 3 x, with its own backward: x.grad += 3 y.grad.
    /// let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0], &[2])?.with_grad()?;
    /// let y = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
    /// let v: Vec<f32> = x.to_vec::<f32>()?.iter().map(|v| 3.0 * v).collect();
    /// y.copy_from_slice(&v)?;
    /// let mut tape = Tape::new();
    /// let (gx, gy) = (x.grad().unwrap().clone(), y.grad().unwrap().clone());
    /// tape.record_func(
    ///     move || {
    ///         let add: Vec<f32> = gx.to_vec::<f32>()?.iter().zip(gy.to_vec::<f32>()?)
    ///             .map(|(a, b)| a + 3.0 * b).collect();
    ///         gx.copy_from_slice(&add)
    ///     },
    ///     &[&x, &y],
    /// )?;
    /// let ones = Array::from_slice(Device::Cpu, &[1.0f32, 1.0], &[2])?;
    /// tape.backward_with(&[(&y, &ones)])?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![3.0, 3.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NoGradient`] for an array of `arrays` without a gradient
    /// (Warp raises there too); nothing is recorded then.
    pub fn record_func(
        &mut self,
        backward: impl Fn() -> Result<()> + Send + Sync + 'static,
        arrays: &[&Array],
    ) -> Result<()> {
        let arrays = func_arrays("Tape::record_func", arrays)?;
        self.ops.push(Op::Func(Box::new(backward), arrays));
        Ok(())
    }

    /// The recorded launches, in order.
    ///
    /// ```
    /// assert!(warp_launch::Tape::new().launches().is_empty());
    /// ```
    pub fn launches(&self) -> &[Launch] {
        &self.launches
    }

    /// Warp's `tape.gradients`: every array with a gradient that the tape
    /// uses, once each, in the order first recorded: the array arguments
    /// of the recorded launches, both sides of recorded copies, and the
    /// arrays of host steps. Each one's gradient ([`Array::grad`]) is what
    /// [`Tape::backward`] computes into and [`Tape::zero`] zeroes. (Arrays
    /// inside struct arguments are reached only through the struct's bytes
    /// and are not listed.)
    ///
    /// ```
    /// use warp_launch::{Array, Device, Tape};
    /// # fn main() -> warp_launch::Result<()> {
    /// let x = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
    /// let y = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
    /// let plain = Array::zeros::<f32>(Device::Cpu, &[2])?;
    /// let mut tape = Tape::new();
    /// tape.record(|| -> warp_launch::Result<()> {
    ///     y.copy_from(&x)?;
    ///     plain.copy_from(&x) // no gradient on `plain`: not recorded
    /// })?;
    /// let listed = tape.gradients();
    /// // A copy lists its destination, then its source (as Warp's wp.copy).
    /// assert_eq!(listed.len(), 2);
    /// assert_eq!(listed[0].data_address(), y.data_address());
    /// assert_eq!(listed[1].data_address(), x.data_address());
    /// # Ok(()) }
    /// ```
    pub fn gradients(&self) -> Vec<Array> {
        let mut out: Vec<Array> = Vec::new();
        let mut add = |a: &Array| {
            let Some(g) = a.grad() else { return };
            let same = |b: &Array| {
                b.grad().map(Array::data_address) == Some(g.data_address())
                    && b.shape() == a.shape()
                    && b.strides() == a.strides()
            };
            if !out.iter().any(same) {
                out.push(a.clone());
            }
        };
        for op in &self.ops {
            match op {
                Op::Launch(i) => {
                    for a in self.launches[*i].args() {
                        if let Some(a) = a.as_array() {
                            add(a);
                        }
                    }
                }
                Op::Copy(c) => {
                    add(&c.dst);
                    add(&c.src);
                }
                Op::Func(_, arrays) => arrays.iter().for_each(&mut add),
            }
        }
        out
    }

    /// Seeds `loss`'s gradient with one and runs the recorded launches'
    /// backward kernels in reverse order, each with its forward arguments
    /// followed by one adjoint per parameter: the array's gradient (a null
    /// array when it has none), zero for values and structs. As in Warp,
    /// the loss is one element (a scalar loss); to start from the gradients
    /// of outputs with more elements, seed them with
    /// [`Tape::backward_with`].
    ///
    /// ```
    /// use warp_launch::{Array, Device, Tape};
    /// # fn main() -> warp_launch::Result<()> {
    /// let x = Array::from_slice(Device::Cpu, &[2.0f32], &[1])?.with_grad()?;
    /// let loss = Array::zeros::<f32>(Device::Cpu, &[1])?.with_grad()?;
    /// let mut tape = Tape::new();
    /// tape.record(|| loss.copy_from(&x))?; // loss = x
    /// tape.backward(&loss)?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![1.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NoGradient`] when `loss` has no gradient, [`Error::LossShape`]
    /// when it is not one element, [`Error::LossDType`] when it is not
    /// float32/float64, [`Error::NoCudaFunction`] / [`Error::NoCpuFunction`]
    /// when a recorded kernel has no backward function for its device, and
    /// any error of a launch ([`LaunchBuilder::run`](crate::LaunchBuilder::run))
    /// or of writing memory.
    pub fn backward(&self, loss: &Array) -> Result<()> {
        let Some(grad) = loss.grad() else {
            return Err(Error::NoGradient {
                call: "Tape::backward",
                array: "loss array".into(),
            });
        };
        if loss.len() != 1 {
            return Err(Error::LossShape {
                call: "Tape::backward",
                shape: loss.shape().to_vec(),
            });
        }
        fill_ones(grad)?;
        self.run_adjoints()
    }

    /// Warp's `tape.backward(grads={out: seed, ...})`: copies each seed into
    /// its output's gradient (any shape; the seed has the gradient's dtype
    /// and shape), then runs the recorded launches' backward kernels in
    /// reverse order as [`Tape::backward`] does.
    ///
    /// ```
    /// use warp_launch::{Array, Device, Tape};
    /// # fn main() -> warp_launch::Result<()> {
    /// let x = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
    /// let y = Array::zeros::<f32>(Device::Cpu, &[2])?.with_grad()?;
    /// let mut tape = Tape::new();
    /// tape.record(|| y.copy_from(&x))?;
    /// let seed = Array::from_slice(Device::Cpu, &[0.5f32, -1.0], &[2])?;
    /// tape.backward_with(&[(&y, &seed)])?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.5, -1.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NoGradient`] for an output without a gradient, the errors of
    /// [`Array::copy_from`](crate::Array::copy_from) for a seed of another
    /// dtype or shape, and those of [`Tape::backward`]'s launches.
    pub fn backward_with(&self, grads: &[(&Array, &Array)]) -> Result<()> {
        for (i, (out, seed)) in grads.iter().enumerate() {
            let Some(grad) = out.grad() else {
                return Err(Error::NoGradient {
                    call: "Tape::backward_with",
                    array: format!("output {i}"),
                });
            };
            grad.copy_from(seed)?;
        }
        self.run_adjoints()
    }

    /// The recorded operations' adjoints, in reverse order.
    fn run_adjoints(&self) -> Result<()> {
        for op in self.ops.iter().rev() {
            match op {
                Op::Launch(i) => {
                    let launch = &self.launches[*i];
                    let adjoints = launch
                        .kernel()
                        .params()
                        .iter()
                        .zip(launch.args())
                        .map(|(p, a)| adjoint_for(&p.kind, a))
                        .collect();
                    launch.adjoint_of(adjoints)?.launch()?;
                }
                Op::Copy(c) => adj_copy(&c.src, &c.dst, c.stream.as_ref())?,
                Op::Func(f, _) => f()?,
            }
        }
        Ok(())
    }

    /// Zeroes the gradient of every array [`Tape::gradients`] lists.
    ///
    /// ```
    /// use warp_launch::{Array, Device, Tape};
    /// # fn main() -> warp_launch::Result<()> {
    /// let x = Array::zeros::<f32>(Device::Cpu, &[1])?.with_grad()?;
    /// let y = Array::zeros::<f32>(Device::Cpu, &[1])?.with_grad()?;
    /// let mut tape = Tape::new();
    /// tape.record(|| y.copy_from(&x))?;
    /// x.grad().unwrap().copy_from_slice(&[2.0f32])?;
    /// tape.zero()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of [`Array::zero`](crate::Array::zero) for a gradient.
    pub fn zero(&self) -> Result<()> {
        for a in self.gradients() {
            if let Some(g) = a.grad() {
                g.zero()?;
            }
        }
        Ok(())
    }

    /// Zeroes the gradients and forgets the recording.
    ///
    /// ```
    /// use warp_launch::{Array, Device, Tape};
    /// # fn main() -> warp_launch::Result<()> {
    /// let x = Array::zeros::<f32>(Device::Cpu, &[1])?.with_grad()?;
    /// let y = Array::zeros::<f32>(Device::Cpu, &[1])?.with_grad()?;
    /// let mut tape = Tape::new();
    /// tape.record(|| y.copy_from(&x))?;
    /// tape.reset()?;
    /// assert!(tape.gradients().is_empty());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of [`Tape::zero`].
    pub fn reset(&mut self) -> Result<()> {
        self.zero()?;
        self.launches.clear();
        self.ops.clear();
        Ok(())
    }
}

fn adjoint_for(kind: &ParamKind, arg: &Arg) -> Arg {
    match (kind, arg) {
        (ParamKind::Array { .. }, Arg::Array(a)) => {
            a.grad().map_or(Arg::Null, |g| Arg::Array(g.clone()))
        }
        (ParamKind::Array { .. }, _) => Arg::Null,
        (ParamKind::Value(d), _) => {
            Value::from_bytes(d, &vec![0u8; d.size]).map_or(Arg::Null, Arg::Value)
        }
        (ParamKind::Struct(st), arg) => Arg::Struct(struct_adjoint(st, arg)),
        // A kind this crate does not know (warp-proof's enums are
        // `#[non_exhaustive]`): no adjoint.
        _ => Arg::Null,
    }
}

/// Warp's adjoint of a struct argument (`Tape.get_adjoint`): array fields
/// become their gradients (the array with `data` set to its `grad`, or a
/// null array), nested struct fields their own adjoints (recursively, as
/// Warp does), every other field zero.
fn struct_adjoint(st: &StructType, arg: &Arg) -> StructValue {
    let mut out = vec![0u8; st.size];
    let mut grads = Vec::new();
    if let Arg::Struct(v) = arg
        && v.bytes().len() == st.size
    {
        struct_adjoint_bytes(st, v.bytes(), &mut out);
        // The gradients of the arrays the value holds: kept alive by the
        // adjoint value, and noted by the backward launch.
        grads = v
            .held()
            .iter()
            .filter_map(|h| {
                h.array.grad().map(|g| HeldArray {
                    offset: h.offset,
                    path: h.path.clone(),
                    array: g.clone(),
                })
            })
            .collect();
    }
    // The addresses are the gradients the forward value's array_t's name:
    // those of the arrays a checked value holds (`StructValue::with_arrays`),
    // kept alive here, or those whoever made the value with the `unsafe`
    // `StructValue::from_bytes` promised live for the backward launches too.
    StructValue::vouched_with(&st.name, &out, grads)
}

/// Writes the adjoint of struct value `src` (of type `st`) into `out`
/// (zeroed, of the same size).
fn struct_adjoint_bytes(st: &StructType, src: &[u8], out: &mut [u8]) {
    use crate::abi::ArrayT;
    for f in &st.fields {
        match &f.kind {
            ParamKind::Array { .. } => {
                let n = size_of::<ArrayT>();
                let Some(bytes) = src.get(f.offset..f.offset + n) else {
                    continue;
                };
                let Some(mut a) = encode::array_t_from(bytes) else {
                    continue;
                };
                if a.grad == 0 {
                    a = ArrayT::default();
                } else {
                    // The adjoint is the gradient array itself: its flags
                    // are its own (none), not the forward array's.
                    a.data = a.grad;
                    a.grad = 0;
                    a.flags = 0;
                }
                if let Some(dst) = out.get_mut(f.offset..f.offset + n) {
                    dst.copy_from_slice(&encode::array_t(&a));
                }
            }
            ParamKind::Struct(inner) => {
                let range = f.offset..f.offset + inner.size;
                if let (Some(s), Some(o)) = (src.get(range.clone()), out.get_mut(range)) {
                    struct_adjoint_bytes(inner, s, o);
                }
            }
            // Values, and kinds this crate does not know (warp-proof's
            // enums are `#[non_exhaustive]`): zero.
            _ => {}
        }
    }
}

/// Warp's `adj_copy` for a recorded copy of `src` into `dst` (same dtype
/// and shape, any strides, both with gradients): for an addable dtype (any
/// but bool) and gradients that do not overlap, `src.grad += dst.grad`
/// (float16 and bfloat16 added in float32 and rounded to nearest, ties to
/// even; integers wrap), then `dst.grad` is zeroed unless `dst` retains its
/// gradient (the copy overwrote `dst`, so what flowed into it is consumed);
/// otherwise, as Warp's fallback, `dst.grad` is copied over `src.grad`
/// (with a warning).
///
/// When both gradients are device memory of one CUDA context, the sum is a
/// kernel of warp-launch's ([`copy_adjoint`]) and the zeroing a memset,
/// both queued on the stream the copy was queued on (else the device's
/// current stream), ordered after the work on the device's current stream
/// and before what is queued there next (Warp's `ScopedStream` with
/// `sync_enter` and `sync_exit`): no host wait, no host copy.
/// Otherwise (CPU arrays, page-locked or managed memory, two devices) both
/// gradients are read to the host, added there and written back,
/// synchronously.
fn adj_copy(src: &Array, dst: &Array, stream: Option<&Stream>) -> Result<()> {
    let (Some(gs), Some(gd)) = (src.grad(), dst.grad()) else {
        return Ok(());
    };
    let scalar = gs.dtype().scalar;
    let addable =
        scalar != Scalar::Bool && std::ptr::eq(gs.dtype(), gd.dtype()) && gs.shape() == gd.shape();
    if !addable || overlap(gs, gd) {
        log::warn!(
            "Tape::backward: the adjoint of a recorded copy of {src:?} into {dst:?} overwrites the source's gradient (dtype {} not added, or overlapping gradients), as Warp's fallback does",
            gs.dtype().name
        );
        return gs.assign(gd);
    }
    // The kernel adds each element from its own thread: a source gradient
    // whose elements share bytes is added on the host, one after another.
    if let Some(ctx) = one_device_context(gs, gd).filter(|_| !self_overlapping(gs)) {
        return adj_copy_on_device(gs, gd, dst.retain_grad(), &ctx, stream);
    }
    // Both gradients in logical element order (views gathered), added on
    // the host, and written back through the source gradient's own layout.
    let mut sum = gs.to_bytes()?;
    add_elements(scalar, &mut sum, &gd.to_bytes()?);
    if gs.is_contiguous() {
        gs.storage().copy_from_host(gs.offset(), &sum)?;
    } else {
        let staged = Array::zeros_dtype(crate::Device::Cpu, gs.dtype(), gs.shape())?;
        staged.storage().copy_from_host(0, &sum)?;
        gs.assign(&staged)?;
    }
    if !dst.retain_grad() {
        gd.zero()?;
    }
    Ok(())
}

/// The context whose device memory holds both `a` and `b`, if one does.
fn one_device_context(a: &Array, b: &Array) -> Option<Context> {
    let (Some(x), Some(y)) = (a.storage().allocation(), b.storage().allocation()) else {
        return None;
    };
    (x.kind() == MemoryKind::Device && y.kind() == MemoryKind::Device && x.context() == y.context())
        .then(|| x.context().clone())
}

/// [`adj_copy`]'s stream-ordered form for gradients in device memory of
/// `ctx`: on `recorded` (the copy's stream) when it is of `ctx`, else on
/// the device's current stream (or `ctx`'s default stream when that is of
/// another context).
fn adj_copy_on_device(
    gs: &Array,
    gd: &Array,
    retain: bool,
    ctx: &Context,
    recorded: Option<&Stream>,
) -> Result<()> {
    let device = crate::Device::from(ctx.device());
    let current = device.stream()?;
    let current = if current.context() == ctx {
        current
    } else {
        ctx.default_stream()
    };
    let same = |a: &Stream, b: &Stream| a.raw() == b.raw() && a.context() == b.context();
    let stream = match recorded {
        Some(s) if s.context() == ctx => s.clone(),
        _ => current.clone(),
    };
    let other = !same(&stream, &current);
    if other {
        // After the adjoints already queued on the current stream.
        stream.wait_stream(&current)?;
    }
    copy_adjoint::add_on(gs, gd, &stream)?;
    if !retain {
        gd.zero_on(&stream)?;
    }
    if other {
        // Before the adjoints queued next on the current stream.
        current.wait_stream(&stream)?;
    }
    Ok(())
}

/// Whether the bytes the two views reach may overlap, as Warp judges it
/// (`_address_ranges_overlap`): a view with a stride that is not positive
/// (on an axis of more than one element) may; else two views of one
/// storage whose spans, from lowest to highest byte, intersect.
fn overlap(a: &Array, b: &Array) -> bool {
    let positive = |x: &Array| {
        x.shape()
            .iter()
            .zip(x.strides())
            .all(|(&n, &s)| n <= 1 || s > 0)
    };
    if !positive(a) || !positive(b) {
        return true;
    }
    if !a.storage().shares_bytes_with(b.storage()) || a.is_empty() || b.is_empty() {
        return false;
    }
    // By address: two handles of one memory overlap as one does.
    let span = |x: &Array| {
        let first = x.data_address() as i128;
        let (mut lo, mut hi) = (first, first);
        for (&n, &s) in x.shape().iter().zip(x.strides()) {
            let reach = s as i128 * (n as i128 - 1);
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        (lo, hi + x.dtype().size as i128)
    };
    let ((alo, ahi), (blo, bhi)) = (span(a), span(b));
    alo < bhi && blo < ahi
}

/// Whether two elements of the view may share bytes: with its axes of more
/// than one element ordered by stride, some stride is shorter than the
/// bytes the axes inside it span.
fn self_overlapping(a: &Array) -> bool {
    let mut axes: Vec<(usize, usize)> = a
        .shape()
        .iter()
        .zip(a.strides())
        .filter(|&(&n, _)| n > 1)
        .map(|(&n, &s)| (n, s.unsigned_abs()))
        .collect();
    axes.sort_by_key(|&(_, s)| s);
    let mut inner = a.dtype().size;
    for (n, s) in axes {
        if s < inner {
            return true;
        }
        inner = s.saturating_mul(n - 1).saturating_add(inner);
    }
    false
}

/// `acc += add`, component by component, both little-endian `scalar`s
/// (integers wrap, as in Warp's kernels; float16 and bfloat16 are added in
/// float32 and rounded to nearest, ties to even, as Warp adds them).
fn add_elements(scalar: Scalar, acc: &mut [u8], add: &[u8]) {
    macro_rules! add_as {
        ($t:ty, $op:ident) => {{
            const N: usize = size_of::<$t>();
            for (a, b) in acc.chunks_exact_mut(N).zip(add.chunks_exact(N)) {
                let (Ok(x), Ok(y)) = (<[u8; N]>::try_from(&*a), <[u8; N]>::try_from(b)) else {
                    continue;
                };
                let v = <$t>::from_le_bytes(x).$op(<$t>::from_le_bytes(y));
                a.copy_from_slice(&v.to_le_bytes());
            }
        }};
    }
    macro_rules! add_half {
        ($to_f32:ident, $from_f32:ident) => {{
            for (a, b) in acc.chunks_exact_mut(2).zip(add.chunks_exact(2)) {
                let (Ok(x), Ok(y)) = (<[u8; 2]>::try_from(&*a), <[u8; 2]>::try_from(b)) else {
                    continue;
                };
                let sum = $to_f32(u16::from_le_bytes(x)) + $to_f32(u16::from_le_bytes(y));
                a.copy_from_slice(&$from_f32(sum).to_le_bytes());
            }
        }};
    }
    match scalar {
        Scalar::Float16 => add_half!(f16_to_f32, f32_to_f16),
        Scalar::BFloat16 => add_half!(bf16_to_f32, f32_to_bf16),
        Scalar::Float32 => add_as!(f32, add),
        Scalar::Float64 => add_as!(f64, add),
        Scalar::Int8 => add_as!(i8, wrapping_add),
        Scalar::UInt8 => add_as!(u8, wrapping_add),
        Scalar::Int16 => add_as!(i16, wrapping_add),
        Scalar::UInt16 => add_as!(u16, wrapping_add),
        Scalar::Int32 => add_as!(i32, wrapping_add),
        Scalar::UInt32 => add_as!(u32, wrapping_add),
        Scalar::Int64 => add_as!(i64, wrapping_add),
        Scalar::UInt64 => add_as!(u64, wrapping_add),
        _ => {}
    }
}

fn fill_ones(a: &Array) -> Result<()> {
    let d = a.dtype();
    if d.kind != Kind::Scalar || !matches!(d.scalar, Scalar::Float32 | Scalar::Float64) {
        return Err(Error::LossDType {
            call: "Tape::backward",
            dtype: d.name,
        });
    }
    if !a.is_contiguous() {
        return Err(Error::Shape {
            call: "Tape::backward",
            message: "the loss gradient is not contiguous; use a contiguous loss array".into(),
        });
    }
    write_floats(a, &vec![1.0; a.len()])
}

/// The elements of a float32/float64 array as `f64`.
fn read_floats(a: &Array) -> Result<Vec<f64>> {
    Ok(encode::floats_of(a.dtype().scalar, &a.to_bytes()?))
}

/// Writes `v` into a contiguous float32/float64 array.
fn write_floats(a: &Array, v: &[f64]) -> Result<()> {
    let b = encode::floats_bytes(a.dtype().scalar, v);
    a.storage().copy_from_host(a.offset(), &b)
}

/// The result of [`check_gradients`]: the largest differences between the
/// tape's gradients and central finite differences.
///
/// ```
/// let r = warp_launch::GradientCheck { max_abs: 0.0, max_rel: 0.0, compared: 3 };
/// assert_eq!(r.compared, 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradientCheck {
    /// Largest absolute difference.
    pub max_abs: f64,
    /// Largest difference relative to max(|fd|, |tape|, 1e-6)... reported
    /// as |a-b| / max(|a|, |b|, 1e-6).
    pub max_rel: f64,
    /// Elements compared.
    pub compared: usize,
}

/// Compares the gradients a tape computes for `inputs` (float32/float64
/// arrays with gradients) with central finite differences of `loss`.
/// `forward` runs the computation (it is called once under a tape, then
/// twice per input element with the element perturbed by `eps`); `loss`
/// must be a one-element float array with a gradient.
///
/// ```
/// use warp_launch::{Array, Device, check_gradients};
/// # fn main() -> warp_launch::Result<()> {
/// let x = Array::from_slice(Device::Cpu, &[0.5f64], &[1])?.with_grad()?;
/// let loss = Array::zeros::<f64>(Device::Cpu, &[1])?.with_grad()?;
/// // loss = x, through a copy the tape records with its adjoint.
/// let report = check_gradients(&[&x], &loss, 1e-3, || loss.copy_from(&x))?;
/// assert_eq!(report.compared, 1);
/// assert!(report.max_abs < 1e-9, "{report:?}");
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`Error::LossDType`] when `loss` is not a one-element float array, [`Error::NoGradient`]
/// when it or an input has no gradient, [`Error::GradientInput`] for an input that is not a
/// float array; any error of `forward`, of the tape's backward pass, or of reading and writing
/// the arrays.
pub fn check_gradients(
    inputs: &[&Array],
    loss: &Array,
    eps: f64,
    mut forward: impl FnMut() -> Result<()>,
) -> Result<GradientCheck> {
    for (index, a) in inputs.iter().enumerate() {
        if !a.dtype().is_float()
            || a.dtype().kind != Kind::Scalar
            || a.grad().is_none()
            || !a.is_contiguous()
        {
            return Err(Error::GradientInput {
                index,
                array: format!("{a:?}"),
            });
        }
    }
    if loss.len() != 1 {
        return Err(Error::LossShape {
            call: "check_gradients",
            shape: loss.shape().to_vec(),
        });
    }
    let mut tape = Tape::new();
    loss.zero()?;
    tape.record(&mut forward)?;
    tape.backward(loss)?;
    let mut report = GradientCheck {
        max_abs: 0.0,
        max_rel: 0.0,
        compared: 0,
    };
    for a in inputs {
        let analytic = read_floats(a.grad().unwrap_or(a))?;
        let mut x = read_floats(a)?;
        for i in 0..x.len() {
            let x0 = x[i];
            x[i] = x0 + eps;
            write_floats(a, &x)?;
            loss.zero()?;
            forward()?;
            let up = read_floats(loss)?[0];
            x[i] = x0 - eps;
            write_floats(a, &x)?;
            loss.zero()?;
            forward()?;
            let down = read_floats(loss)?[0];
            x[i] = x0;
            write_floats(a, &x)?;
            let fd = (up - down) / (2.0 * eps);
            let d = (fd - analytic[i]).abs();
            report.max_abs = report.max_abs.max(d);
            report.max_rel = report
                .max_rel
                .max(d / fd.abs().max(analytic[i].abs()).max(1e-6));
            report.compared += 1;
        }
    }
    loss.zero()?;
    forward()?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::abi::{ARRAY_FLAG_RETAIN_GRAD, ArrayT, DType};
    use crate::device::Device;
    use crate::signature::StructField;

    fn array_field(name: &str, offset: usize) -> StructField {
        StructField {
            name: name.into(),
            kind: ParamKind::Array {
                dtype: DType::FLOAT32,
                ndim: Some(1),
            },
            offset,
        }
    }

    /// Warp's `Tape.get_adjoint` recurses into nested structs: an array two
    /// structs deep gets its gradient as the adjoint (data = its grad, no
    /// grad, no flags), an array without a gradient a null array, values 0.
    #[test]
    fn struct_adjoints_recurse_into_nested_structs() {
        // Inner { x: array_t (0..56), w: float32 (56..60) } padded to 64;
        // Outer { inner: Inner (0..64), y: array_t (64..120) }.
        let inner = Arc::new(StructType {
            name: "Inner_00000000".into(),
            fields: vec![
                array_field("x", 0),
                StructField {
                    name: "w".into(),
                    kind: ParamKind::Value(DType::FLOAT32),
                    offset: 56,
                },
            ],
            size: 64,
            align: 8,
        });
        let outer = StructType {
            name: "Outer_00000000".into(),
            fields: vec![
                StructField {
                    name: "inner".into(),
                    kind: ParamKind::Struct(inner),
                    offset: 0,
                },
                array_field("y", 64),
            ],
            size: 120,
            align: 8,
        };
        let x = Array::zeros::<f32>(Device::Cpu, &[4])
            .unwrap()
            .with_grad()
            .unwrap()
            .with_retain_grad(true)
            .unwrap();
        let y = Array::zeros::<f32>(Device::Cpu, &[4]).unwrap();
        let mut bytes = vec![0u8; 120];
        bytes[0..56].copy_from_slice(&encode::array_t(&x.abi()));
        bytes[56..60].copy_from_slice(&0.75f32.to_le_bytes());
        bytes[64..120].copy_from_slice(&encode::array_t(&y.abi()));
        assert_eq!(x.abi().flags, ARRAY_FLAG_RETAIN_GRAD);
        // SAFETY: the addresses are x's and y's, alive for the test; nothing launches.
        let value = unsafe { StructValue::from_bytes(&outer.name, &bytes) };
        let adj = struct_adjoint(&outer, &Arg::Struct(value));
        let ax = encode::array_t_from(&adj.bytes()[0..56]).unwrap();
        let g = x.grad().unwrap();
        assert_eq!(ax.data, g.data_address(), "x's adjoint is its gradient");
        assert_eq!((ax.grad, ax.flags), (0, 0));
        assert_eq!(ax.shape, x.abi().shape);
        assert_eq!(&adj.bytes()[56..64], &[0u8; 8], "value fields are zero");
        let ay = encode::array_t_from(&adj.bytes()[64..120]).unwrap();
        assert_eq!(ay, ArrayT::default(), "no gradient: a null array");
    }

    /// Warp refuses `record_func` arrays without a gradient and
    /// `retain_grad` without one; a copy adjoint consumes the destination's
    /// gradient unless it retains it; a copy without gradients is not
    /// recorded; nested recordings keep their own copies.
    #[test]
    fn record_func_retain_grad_and_copies_follow_warp() {
        let plain = Array::zeros::<f32>(Device::Cpu, &[2]).unwrap();
        let mut tape = Tape::new();
        let e = tape.record_func(|| Ok(()), &[&plain]).unwrap_err();
        assert!(
            matches!(&e, Error::NoGradient { call: "Tape::record_func", array } if array.starts_with("arrays[0]")),
            "{e}"
        );
        let e = plain.clone().with_retain_grad(true).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NoGradient {
                    call: "Array::with_retain_grad",
                    ..
                }
            ),
            "{e}"
        );
        assert!(plain.clone().with_retain_grad(false).is_ok());

        for retain in [false, true] {
            let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0], &[2])
                .unwrap()
                .with_grad()
                .unwrap();
            let y = Array::zeros::<f32>(Device::Cpu, &[2])
                .unwrap()
                .with_grad()
                .unwrap()
                .with_retain_grad(retain)
                .unwrap();
            let mut tape = Tape::new();
            tape.record(|| -> Result<()> {
                y.copy_from(&x)?;
                plain.copy_from(&x) // no gradient on `plain`: not recorded
            })
            .unwrap();
            assert_eq!(tape.gradients().len(), 2);
            x.grad().unwrap().copy_from_slice(&[10.0f32, 20.0]).unwrap();
            let seed = Array::from_slice(Device::Cpu, &[1.0f32, 2.0], &[2]).unwrap();
            tape.backward_with(&[(&y, &seed)]).unwrap();
            // Added to what the source's gradient held, as Warp's adj_copy.
            assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![11.0, 22.0]);
            let want = if retain {
                vec![1.0, 2.0]
            } else {
                vec![0.0, 0.0]
            };
            assert_eq!(
                y.grad().unwrap().to_vec::<f32>().unwrap(),
                want,
                "retain {retain}"
            );
        }

        // Nested recordings: a copy goes to the innermost one.
        let x = Array::zeros::<f32>(Device::Cpu, &[1])
            .unwrap()
            .with_grad()
            .unwrap();
        let y = Array::zeros::<f32>(Device::Cpu, &[1])
            .unwrap()
            .with_grad()
            .unwrap();
        let (mut outer, mut inner) = (Tape::new(), Tape::new());
        {
            let _o = outer.recording();
            inner.record(|| y.copy_from(&x)).unwrap();
            x.copy_from(&y).unwrap();
        }
        assert_eq!((outer.gradients().len(), inner.gradients().len()), (2, 2));
        assert!(format!("{outer:?}").contains("copies: 1"), "{outer:?}");
    }

    #[test]
    fn assign_and_strided_copies_are_recorded_as_copy_from_is() {
        // `assign` (any strides) goes through the same hook as `copy_from`:
        // a transposed source's gradient receives the destination's,
        // element by element in the source's own layout.
        let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
            .unwrap()
            .with_grad()
            .unwrap();
        let xt = x.transpose(0, 1).unwrap();
        let y = Array::zeros::<f32>(Device::Cpu, &[3, 2])
            .unwrap()
            .with_grad()
            .unwrap();
        // As Warp's wp.copy, the source's gradient travels with the values.
        x.grad()
            .unwrap()
            .copy_from_slice(&[0.5f32, 0.0, 0.0, 0.0, 0.0, 0.25])
            .unwrap();
        y.assign(&xt).unwrap();
        assert_eq!(
            y.grad().unwrap().to_vec::<f32>().unwrap(),
            vec![0.5, 0.0, 0.0, 0.0, 0.0, 0.25]
        );
        x.grad().unwrap().zero().unwrap();
        let mut tape = Tape::new();
        tape.record(|| y.assign(&xt)).unwrap();
        assert_eq!(
            y.to_vec::<f32>().unwrap(),
            vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
        );
        assert_eq!(tape.gradients().len(), 2, "{tape:?}");
        let seed = Array::from_slice(
            Device::Cpu,
            &[10.0f32, 40.0, 20.0, 50.0, 30.0, 60.0],
            &[3, 2],
        )
        .unwrap();
        tape.backward_with(&[(&y, &seed)]).unwrap();
        assert_eq!(
            x.grad().unwrap().to_vec::<f32>().unwrap(),
            vec![10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
        );
        assert_eq!(y.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.0; 6]);
    }

    #[test]
    fn a_copy_on_another_thread_is_not_recorded_by_this_threads_tape() {
        // Copies reach recordings through one process-wide recorder
        // (`array::set_copy_recorder`), which keeps a copy only in the
        // recording open on the thread that copies.
        let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0], &[2])
            .unwrap()
            .with_grad()
            .unwrap();
        let y = Array::zeros::<f32>(Device::Cpu, &[2])
            .unwrap()
            .with_grad()
            .unwrap();
        let mut tape = Tape::new();
        tape.record(|| std::thread::scope(|s| s.spawn(|| y.assign(&x)).join().unwrap()))
            .unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        assert!(tape.gradients().is_empty(), "{tape:?}");
        // The same copy on the recording thread is kept.
        tape.record(|| y.assign(&x)).unwrap();
        assert_eq!(tape.gradients().len(), 2, "{tape:?}");
    }

    #[test]
    fn copy_adjoints_add_integers_wrapping_and_floats() {
        let mut acc = [1i32, i32::MAX]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>();
        let add = [2i32, 1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>();
        add_elements(Scalar::Int32, &mut acc, &add);
        assert_eq!(acc[..4], 3i32.to_le_bytes());
        assert_eq!(acc[4..], i32::MIN.to_le_bytes());
        let mut f = 1.5f64.to_le_bytes().to_vec();
        add_elements(Scalar::Float64, &mut f, &0.25f64.to_le_bytes());
        assert_eq!(f, 1.75f64.to_le_bytes());
    }

    /// binary16 bits of `v` (exactly representable) for tests.
    fn h(v: f32) -> u16 {
        let b = f32_to_f16(v);
        assert_eq!(f16_to_f32(b), v, "{v} is not a float16");
        b
    }

    #[test]
    fn half_copy_adjoints_add_in_float32_and_round() {
        // float16: 1.5 + 0.25 = 1.75 (exact); 2048 + 1 and 2048 + 3 are
        // ties between float16s 2 apart (to 2048 and 2052, the even ones).
        let bytes = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>();
        let mut acc = bytes(&[h(1.5), h(2048.0), h(2048.0), h(-3.0)]);
        add_elements(
            Scalar::Float16,
            &mut acc,
            &bytes(&[h(0.25), h(1.0), h(3.0), h(0.5)]),
        );
        assert_eq!(acc, bytes(&[h(1.75), h(2048.0), h(2052.0), h(-2.5)]));
        let b = |v: f32| f32_to_bf16(v);
        let mut acc = bytes(&[b(1.5), b(256.0), b(256.0)]);
        add_elements(
            Scalar::BFloat16,
            &mut acc,
            &bytes(&[b(0.25), b(1.0), b(3.0)]),
        );
        assert_eq!(acc, bytes(&[b(1.75), b(256.0), b(260.0)]));
    }

    /// A float16 array of `shape` holding `values` (row-major), with a
    /// gradient.
    fn f16_array(values: &[f32], shape: &[usize]) -> Array {
        let a = Array::zeros_dtype(Device::Cpu, crate::DType::FLOAT16, shape).unwrap();
        a.view(crate::DType::UINT16)
            .unwrap()
            .copy_from_slice(&values.iter().map(|&v| h(v)).collect::<Vec<_>>())
            .unwrap();
        a.with_grad().unwrap()
    }

    fn f16_values(a: &Array) -> Vec<f32> {
        a.view(crate::DType::UINT16)
            .unwrap()
            .to_vec::<u16>()
            .unwrap()
            .into_iter()
            .map(f16_to_f32)
            .collect()
    }

    #[test]
    fn float16_copy_adjoints_accumulate_through_strided_views() {
        // x (2x3 float16) copied transposed into y (3x2); backward twice:
        // the source's gradient accumulates (it is not overwritten), and
        // the destination's is consumed each time.
        let x = f16_array(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let xt = x.transpose(0, 1).unwrap();
        let y = f16_array(&[0.0; 6], &[3, 2]);
        let mut tape = Tape::new();
        tape.record(|| y.assign(&xt)).unwrap();
        assert_eq!(f16_values(&y), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let gx = x.grad().unwrap();
        gx.view(crate::DType::UINT16)
            .unwrap()
            .copy_from_slice(&[h(0.5), 0, 0, 0, 0, h(2048.0)])
            .unwrap();
        let seed = |v: &[f32]| {
            y.grad()
                .unwrap()
                .view(crate::DType::UINT16)
                .unwrap()
                .copy_from_slice(&v.iter().map(|&v| h(v)).collect::<Vec<_>>())
                .unwrap();
        };
        // y.grad[i][j] flows into x.grad[j][i].
        seed(&[10.0, 40.0, 20.0, 50.0, 30.0, 3.0]);
        tape.backward_with(&[]).unwrap();
        assert_eq!(
            f16_values(gx),
            [10.5, 20.0, 30.0, 40.0, 50.0, 2052.0],
            "x.grad after one backward (2048 + 3 rounds to 2052)"
        );
        assert_eq!(f16_values(y.grad().unwrap()), [0.0; 6], "y.grad consumed");
        seed(&[0.25, 1.0, 0.5, 1.0, 0.75, 1.0]);
        tape.backward_with(&[]).unwrap();
        assert_eq!(
            f16_values(gx),
            [10.75, 20.5, 30.75, 41.0, 51.0, 2052.0],
            "x.grad after two (2052 + 1 is a tie between 2052 and 2054: 2052)"
        );
    }

    #[test]
    fn float16_copy_adjoints_over_4d_views_give_warps_numbers() {
        // The program of gpu_copy_adjoint's float16 test on the CPU: every
        // other element of x's last axis copied into y's transpose; the
        // expected gradients are what Warp 1.19.0's own tape computes for
        // wp.copy(y.transpose((0, 1, 3, 2)), x[:, :, :, ::2]) on its CPU
        // device with the same gradients.
        let x = f16_array(
            &(0..24).map(|i| i as f32).collect::<Vec<_>>(),
            &[2, 1, 2, 6],
        );
        let y = f16_array(&[0.0; 12], &[2, 1, 3, 2]);
        let xs = x.slice_step(3, 0..6, 2).unwrap();
        let yt = y.transpose(2, 3).unwrap();
        let mut tape = Tape::new();
        tape.record(|| yt.assign(&xs)).unwrap();
        let set = |a: &Array, v: &[f32]| {
            a.view(crate::DType::UINT16)
                .unwrap()
                .copy_from_slice(&v.iter().map(|&v| h(v)).collect::<Vec<_>>())
                .unwrap();
        };
        let mut xg: Vec<f32> = (0..24).map(|i| i as f32).collect();
        xg[0] = 2048.0;
        set(x.grad().unwrap(), &xg);
        let mut yg: Vec<f32> = (0..12).map(|i| i as f32 * 0.25).collect();
        yg[0] = 3.0;
        set(y.grad().unwrap(), &yg);
        tape.backward_with(&[]).unwrap();
        assert_eq!(
            f16_values(x.grad().unwrap()),
            [
                2052.0, 1.0, 2.5, 3.0, 5.0, 5.0, 6.25, 7.0, 8.75, 9.0, 11.25, 11.0, 13.5, 13.0,
                16.0, 15.0, 18.5, 17.0, 19.75, 19.0, 22.25, 21.0, 24.75, 23.0
            ]
        );
        assert_eq!(f16_values(y.grad().unwrap()), [0.0; 12]);
        set(y.grad().unwrap(), &[1.0; 12]);
        tape.backward_with(&[]).unwrap();
        assert_eq!(
            f16_values(x.grad().unwrap()),
            [
                2052.0, 1.0, 3.5, 3.0, 6.0, 5.0, 7.25, 7.0, 9.75, 9.0, 12.25, 11.0, 14.5, 13.0,
                17.0, 15.0, 19.5, 17.0, 20.75, 19.0, 23.25, 21.0, 25.75, 23.0
            ]
        );
    }

    #[test]
    fn bfloat16_copy_adjoints_accumulate_on_the_host() {
        let x = Array::zeros_dtype(Device::Cpu, crate::DType::BFLOAT16, &[4])
            .unwrap()
            .with_grad()
            .unwrap();
        let y = Array::zeros_dtype(Device::Cpu, crate::DType::BFLOAT16, &[4])
            .unwrap()
            .with_grad()
            .unwrap();
        let mut tape = Tape::new();
        tape.record(|| y.assign(&x)).unwrap();
        let bits = |v: &[f32]| v.iter().map(|&v| f32_to_bf16(v)).collect::<Vec<_>>();
        let u16s = |a: &Array| a.view(crate::DType::UINT16).unwrap();
        u16s(x.grad().unwrap())
            .copy_from_slice(&bits(&[1.0, 256.0, 256.0, -1.0]))
            .unwrap();
        u16s(y.grad().unwrap())
            .copy_from_slice(&bits(&[0.5, 1.0, 3.0, 0.25]))
            .unwrap();
        tape.backward_with(&[]).unwrap();
        let got: Vec<f32> = u16s(x.grad().unwrap())
            .to_vec::<u16>()
            .unwrap()
            .into_iter()
            .map(bf16_to_f32)
            .collect();
        assert_eq!(got, [1.5, 256.0, 260.0, -0.75]);
    }

    #[test]
    fn overlapping_views_are_detected_by_their_spans() {
        let a = Array::zeros::<f32>(Device::Cpu, &[4, 4]).unwrap();
        let col0 = a.slice(1, 0..1).unwrap();
        let col1 = a.slice(1, 1..2).unwrap();
        let row3 = a.slice(0, 3..4).unwrap();
        // Columns interleave in memory: their spans intersect (refused as
        // overlapping, as Warp's range check does); disjoint rows do not.
        assert!(overlap(&col0, &col1));
        assert!(overlap(&col0, &row3));
        assert!(!overlap(
            &a.slice(0, 0..2).unwrap(),
            &a.slice(0, 2..4).unwrap()
        ));
        let b = Array::zeros::<f32>(Device::Cpu, &[4, 4]).unwrap();
        assert!(!overlap(&a, &b));
        // Views do not share bytes among their own elements, whatever
        // their strides; a zero stride (a broadcast) does.
        assert!(!self_overlapping(&a));
        assert!(!self_overlapping(&a.transpose(0, 1).unwrap()));
        assert!(!self_overlapping(&a.slice_step(1, 0..4, 2).unwrap()));
        let s = a.storage().clone();
        let wide = |shape: &[usize], strides: &[isize]| {
            Array::from_parts(
                s.clone(),
                Device::Cpu,
                0,
                crate::DType::FLOAT32,
                shape,
                strides,
            )
            .unwrap()
        };
        assert!(
            self_overlapping(&wide(&[4, 4], &[4, 4])),
            "rows one element apart"
        );
        assert!(self_overlapping(&wide(&[3], &[0])), "a broadcast");
        assert!(
            !self_overlapping(&wide(&[1, 4], &[0, 4])),
            "a zero stride on one element"
        );
        assert!(
            overlap(&wide(&[3], &[0]), &b),
            "Warp routes a broadcast to its fallback"
        );
    }
}
