//! `kernels/axpy.cu`, written against `warp_launch.h`: `axpy`, whose
//! accesses the build proved (a safe launcher that checks them on every
//! launch), and `gather`, whose index comes from data (an `unsafe`
//! launcher only).

use warp_launch::{Device, Error, TypedArray};

use crate::kernels::axpy::{Axpy, Gather};

/// What [`run_proven_on_gpu`] found.
#[derive(Debug)]
pub struct ProvenReport {
    /// The image the load chose.
    pub image: &'static str,
    /// `axpy`'s result on the GPU and the CPU's.
    pub axpy: (Vec<f32>, Vec<f32>),
    /// The refusal of a safe `axpy` launch one element past `x`.
    pub past_extent: Result<(), Error>,
    /// `gather`'s result on the GPU (indices all inside `x`) and the CPU's.
    pub gather: (Vec<f32>, Vec<f32>),
}

/// The CPU reference of `axpy`: `y[i] = a * x[i] + y[i]`.
pub fn cpu_axpy(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| a * x + y).collect()
}

/// The CPU reference of `gather`: `out[i] = x[indices[i]]`.
///
/// # Panics
///
/// When an index is negative or past `x` (the GPU kernel's caller must
/// not pass such indices either; the launch is `unsafe` for that reason).
pub fn cpu_gather(x: &[f32], indices: &[i32]) -> Vec<f32> {
    indices
        .iter()
        .map(|&i| x[usize::try_from(i).expect("a non-negative index")])
        .collect()
}

/// Runs `axpy` and `gather` on GPU `ordinal` against the CPU, and a safe
/// `axpy` launch whose domain is one element past `x`, which must be
/// refused before the driver sees it.
///
/// # Errors
///
/// Any failure of the load or of a launch that should run.
pub fn run_proven_on_gpu(ordinal: i32) -> warp_launch::Result<ProvenReport> {
    let device = Device::Cuda(ordinal);
    let module = crate::kernels::axpy::load(device)?;
    let (axpy, gather) = (Axpy::new(&module)?, Gather::new(&module)?);
    let n = 10_000;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y0: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let d_x = TypedArray::<f32, 1>::from_slice(device, &x, [n])?;
    let d_y = TypedArray::<f32, 1>::from_slice(device, &y0, [n])?;
    axpy.launch(n, &d_x, &d_y, 3.0)?;
    let axpy_result = (d_y.to_vec()?, cpu_axpy(3.0, &x, &y0));

    // One element past x (y is as long): the proven rule x[i], i < dim,
    // refuses it.
    let longer = TypedArray::<f32, 1>::zeros(device, [n + 1])?;
    let past_extent = axpy.launch(n + 1, &d_x, &longer, 1.0);

    let indices: Vec<i32> = (0..n as i32).map(|i| (i * 7919) % n as i32).collect();
    let d_i = TypedArray::<i32, 1>::from_slice(device, &indices, [n])?;
    let d_out = TypedArray::<f32, 1>::zeros(device, [n])?;
    // SAFETY: every index is in 0..n, x holds n elements, and the domain
    // is n, the length of indices and out.
    unsafe { gather.launch_unchecked(n, &d_x, &d_i, &d_out)? };
    let gather_result = (d_out.to_vec()?, cpu_gather(&x, &indices));
    Ok(ProvenReport {
        image: module.image().unwrap_or("?"),
        axpy: axpy_result,
        past_extent,
        gather: gather_result,
    })
}
