//! Automatic differentiation: the [`Tape`] that records launches and runs
//! their backward kernels, and a finite-difference gradient check.

mod copy_adjoint;
mod tape;

pub use tape::{GradientCheck, Recording, Tape, check_gradients};
