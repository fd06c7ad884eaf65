//! The tape: launches recorded while a [`Tape`] records on this thread,
//! replayed backward (their backward kernels, in reverse order, with the
//! arrays' gradients) by [`Tape::backward`]; and a finite-difference
//! gradient check.

use std::marker::PhantomData;

use crate::abi::{Kind, Scalar, Value, encode};
use crate::array::Array;
use crate::error::{Error, Result};
use crate::launch::{Arg, Launch, StructValue, record};
use crate::signature::{ParamKind, StructType};

/// Records launches and runs them backward (Warp's `wp.Tape`).
#[derive(Debug, Default)]
pub struct Tape {
    launches: Vec<Launch>,
}

/// Recording in progress: launches made on this thread while it is the
/// innermost live guard are added to its tape when it is dropped.
///
/// Each guard has an id and removes its own entry when dropped, so guards
/// may be dropped in any order: a launch goes to the most recent guard
/// still alive. The guard stays on the thread that made it (it is neither
/// `Send` nor `Sync`): recording is per thread. Forgetting a guard
/// (`std::mem::forget`) leaks its recording, and later launches on the
/// thread go to it while it is the innermost.
#[must_use = "recording stops when this guard is dropped"]
pub struct Recording<'t> {
    tape: &'t mut Tape,
    id: u64,
    /// Not `Send` or `Sync`: the entry lives in this thread's state.
    _thread: PhantomData<*const ()>,
}

impl Recording<'_> {
    /// The guard's id, unique among this thread's guards.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Recording<'_> {
    fn drop(&mut self) {
        self.tape.launches.extend(record::close(self.id));
    }
}

impl Tape {
    /// An empty tape.
    pub fn new() -> Tape {
        Tape::default()
    }

    /// Starts recording on this thread until the guard is dropped.
    pub fn recording(&mut self) -> Recording<'_> {
        let id = record::open();
        Recording {
            tape: self,
            id,
            _thread: PhantomData,
        }
    }

    /// Records the launches `f` makes on this thread.
    pub fn record<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let _rec = self.recording();
        f()
    }

    /// The recorded launches, in order.
    pub fn launches(&self) -> &[Launch] {
        &self.launches
    }

    /// Seeds `loss`'s gradient with one and runs the recorded launches'
    /// backward kernels in reverse order, each with its forward arguments
    /// followed by one adjoint per parameter: the array's gradient (a null
    /// array when it has none), zero for values and structs. As in Warp,
    /// the loss is one element (a scalar loss); to start from the gradients
    /// of outputs with more elements, seed them with
    /// [`Tape::backward_with`].
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

    /// The recorded launches' backward kernels, in reverse order.
    fn run_adjoints(&self) -> Result<()> {
        for launch in self.launches.iter().rev() {
            let adjoints = launch
                .kernel()
                .params()
                .iter()
                .zip(launch.args())
                .map(|(p, a)| adjoint_for(&p.kind, a))
                .collect();
            launch.adjoint_of(adjoints)?.launch()?;
        }
        Ok(())
    }

    /// Zeroes the gradient of every array the recorded launches use.
    ///
    /// # Errors
    ///
    /// The errors of [`Array::zero`](crate::Array::zero) for a gradient.
    pub fn zero(&self) -> Result<()> {
        for l in &self.launches {
            for a in l.args() {
                if let Some(g) = a.as_array().and_then(Array::grad) {
                    g.zero()?;
                }
            }
        }
        Ok(())
    }

    /// Zeroes the gradients and forgets the recording.
    ///
    /// # Errors
    ///
    /// The errors of [`Tape::zero`].
    pub fn reset(&mut self) -> Result<()> {
        self.zero()?;
        self.launches.clear();
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
    }
}

/// Warp's adjoint of a struct argument: array fields become their
/// gradients (the array with `data` set to its `grad`, or a null array),
/// every other field zero.
fn struct_adjoint(st: &StructType, arg: &Arg) -> StructValue {
    use crate::abi::ArrayT;
    let mut out = vec![0u8; st.size];
    if let Arg::Struct(v) = arg
        && v.bytes().len() == st.size
    {
        for f in &st.fields {
            if let ParamKind::Array { .. } = f.kind {
                let n = size_of::<ArrayT>();
                let Some(src) = v.bytes().get(f.offset..f.offset + n) else {
                    continue;
                };
                let Some(mut a) = encode::array_t_from(src) else {
                    continue;
                };
                if a.grad == 0 {
                    a = ArrayT::default();
                } else {
                    a.data = a.grad;
                    a.grad = 0;
                }
                out[f.offset..f.offset + n].copy_from_slice(&encode::array_t(&a));
            }
        }
    }
    // SAFETY: the addresses are the gradients the forward value's array_t's
    // name; whoever made that value (`StructValue::from_bytes`) promised
    // them live for the backward launches too.
    unsafe { StructValue::from_bytes(&st.name, &out) }
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
