//! The warp-tape example: Warp kernels compiled by `build.rs` for several GPU
//! architectures and embedded in this binary, run forward and backward
//! through warp-launch's tape, with no Python and no kernel files at run time.
//! The kernels are launched through the typed launchers `build.rs` generated
//! (`Kernels`: `scaled_sin.launch(n, &x, a, &y)` takes exactly the kernel's
//! argument types, checked by the compiler).
//!
//! `loss = sum((a * sin(x))^2)`, so `d loss / d x = a^2 * sin(2x)`: the
//! gradient the tape computes is checked against that closed form. Then the
//! same on a 2-D domain (`i, j = wp.tid()`): `loss2 = sum(a u^2 + u)`, whose
//! gradient is `2 a u + 1`. The last line is a summary; a failure exits with
//! status 1 and the error's message.
//!
//! The same kernels also run on the CPU: `build.rs` compiled Warp's CPU code
//! for them with the system C++ compiler and linked it in, so the device is
//! the only thing that changes.
//!
//! `cargo run -p warp-tape-example --release` (on `cuda:0`; without a GPU
//! driver it prints the driver-not-found error), or
//! `cargo run -p warp-tape-example --release -- cpu` (on the CPU, no GPU
//! needed).

use std::process::ExitCode;

use warp_launch::{AotModule, Device, Tape, TypedArray};

// `pub static KERNELS: warp_launch::EmbeddedModule`, written by build.rs.
include!(concat!(env!("OUT_DIR"), "/warp/kernels/kernels.rs"));
// `pub struct Kernels { scaled_sin: ScaledSin, sum_squares: SumSquares }`, the
// typed launchers build.rs generated from Warp's output.
include!(concat!(
    env!("OUT_DIR"),
    "/warp/kernels/kernels_launchers.rs"
));

/// Elements: not a multiple of the block size, so the last block is partial.
const N: usize = 100_003;
/// The scale `a`.
const A: f32 = 1.5;
/// Largest accepted |gradient - closed form| (the gradient is at most A^2).
const GRAD_TOLERANCE: f64 = 1e-4;
/// Largest accepted relative error of the loss (an f32 atomic sum).
const LOSS_TOLERANCE: f64 = 1e-3;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn run(dev: Device) -> Result<String> {
    let module = AotModule::from_embedded(&KERNELS)?;
    // Each launcher checks once that the module's kernel takes its parameters.
    let kernels = Kernels::new(&module)?;

    let xs: Vec<f32> = (0..N).map(|i| -3.0 + 6.0 * i as f32 / N as f32).collect();
    let x = TypedArray::<f32, 1>::from_slice(dev, &xs, [N])?.with_grad()?;
    let y = TypedArray::<f32, 1>::zeros(dev, [N])?.with_grad()?;
    let loss = TypedArray::<f32, 1>::zeros(dev, [1])?.with_grad()?;

    // Forward, recorded: y = a sin(x); loss += y * y.
    let mut tape = Tape::new();
    tape.record(|| -> warp_launch::Result<()> {
        kernels.scaled_sin.launch(N, &x, A, &y)?;
        kernels.sum_squares.launch(N, &y, &loss)
    })?;
    // Backward: loss.grad = 1, then each kernel's adjoint in reverse order.
    tape.backward(&loss)?;

    let a = f64::from(A);
    let ys = y.to_vec()?;
    let mut loss_exact = 0.0f64;
    let mut y_err = 0.0f64;
    for (xi, yi) in xs.iter().zip(&ys) {
        let exact = a * f64::from(*xi).sin();
        loss_exact += exact * exact;
        y_err = y_err.max((f64::from(*yi) - exact).abs());
    }
    let loss_value = f64::from(loss.to_vec()?[0]);
    let grad = x.grad().ok_or("x has no gradient")?.to_vec::<f32>()?;
    let grad_err = xs
        .iter()
        .zip(&grad)
        .map(|(xi, gi)| (f64::from(*gi) - a * a * (2.0 * f64::from(*xi)).sin()).abs())
        .fold(0.0f64, f64::max);

    if y_err > GRAD_TOLERANCE {
        return Err(
            format!("forward: max |y - a sin x| = {y_err:e} exceeds {GRAD_TOLERANCE:e}").into(),
        );
    }
    let loss_rel = (loss_value - loss_exact).abs() / loss_exact;
    if loss_rel > LOSS_TOLERANCE {
        return Err(format!(
            "loss {loss_value} differs from the closed form {loss_exact} by {loss_rel:e} (relative), \
             more than {LOSS_TOLERANCE:e}"
        )
        .into());
    }
    if grad_err > GRAD_TOLERANCE {
        return Err(format!(
            "backward: max |d loss/dx - a^2 sin 2x| = {grad_err:e} exceeds {GRAD_TOLERANCE:e}"
        )
        .into());
    }
    let grid_err = grid(dev, &kernels)?;
    let code = match dev {
        Device::Cpu => "Warp's CPU code compiled by build.rs".to_string(),
        _ => format!(
            "image {} of {} embedded",
            module.image()?,
            KERNELS.images().len()
        ),
    };
    Ok(format!(
        "warp-tape: {N} elements on {dev}, loss {loss_value:.6e} (closed form {loss_exact:.6e}), max |grad error| \
         {grad_err:.2e}; {ROWS}x{COLS} grid: max |grad error| {grid_err:.2e}; {code}"
    ))
}

/// Rows and columns of the 2-D part: neither a multiple of the other.
const ROWS: usize = 301;
const COLS: usize = 517;

/// The 2-D part: over a `ROWS` x `COLS` domain (`i, j = wp.tid()`),
/// `v = a u^2 + u` and `loss2 = sum(v)`, so `d loss2 / d u = 2 a u + 1`.
/// Returns the largest |gradient - closed form|.
fn grid(dev: Device, kernels: &Kernels) -> Result<f64> {
    let us: Vec<f32> = (0..ROWS * COLS)
        .map(|k| ((k % 97) as f32 - 48.0) / 16.0)
        .collect();
    let u = TypedArray::<f32, 2>::from_slice(dev, &us, [ROWS, COLS])?.with_grad()?;
    let v = TypedArray::<f32, 2>::zeros(dev, [ROWS, COLS])?.with_grad()?;
    let loss = TypedArray::<f32, 1>::zeros(dev, [1])?.with_grad()?;
    let mut tape = Tape::new();
    tape.record(|| -> warp_launch::Result<()> {
        kernels.square_plus.launch([ROWS, COLS], &u, A, &v)?;
        kernels.sum2d.launch([ROWS, COLS], &v, &loss)
    })?;
    tape.backward(&loss)?;
    let grad = u.grad().ok_or("u has no gradient")?.to_vec::<f32>()?;
    let a = f64::from(A);
    let err = us
        .iter()
        .zip(&grad)
        .map(|(ui, gi)| (f64::from(*gi) - (2.0 * a * f64::from(*ui) + 1.0)).abs())
        .fold(0.0f64, f64::max);
    if err > GRAD_TOLERANCE {
        return Err(format!(
            "2-D backward: max |d loss2/du - (2 a u + 1)| = {err:e} exceeds {GRAD_TOLERANCE:e}"
        )
        .into());
    }
    Ok(err)
}

fn main() -> ExitCode {
    let dev = match std::env::args().nth(1).as_deref().map(str::parse::<Device>) {
        None => Device::Cuda(0),
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            eprintln!("warp-tape: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(dev) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("warp-tape: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    /// The build's PTX fallback is NVRTC 12.0's: ISA 8.0, which every driver
    /// from CUDA 12.0 on compiles, for the lowest architecture built.
    #[test]
    fn the_embedded_ptx_is_isa_8_0() {
        let ptx: Vec<_> = super::KERNELS
            .images()
            .iter()
            .filter(|i| i.file.ends_with(".ptx"))
            .collect();
        assert_eq!(ptx.len(), 1, "one PTX fallback");
        let text = std::str::from_utf8(ptx[0].bytes).unwrap();
        let version = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(".version "))
            .unwrap();
        assert_eq!(version.trim(), "8.0", "{}", ptx[0].file);
        assert!(text.contains("release 12.0"), "written by NVRTC 12.0");
    }

    /// What the fallback is for: a GPU no cubin fits runs the PTX on every
    /// driver from CUDA 12.0 on (Warp's own PTX, ISA 9.4, would need a CUDA
    /// 13.4 driver), and a GPU a cubin fits still gets its cubin.
    #[test]
    fn a_gpu_without_a_cubin_runs_the_fallback_on_a_cuda_12_0_driver() {
        use cuda_api::{ComputeCapability as Cc, ImageTarget, choose_image};
        let images: Vec<(&str, ImageTarget)> = super::KERNELS
            .images()
            .iter()
            .map(|i| (i.file, ImageTarget::of(i.bytes).unwrap()))
            .collect();
        let ptx = images
            .iter()
            .position(|(f, _)| f.ends_with(".ptx"))
            .unwrap();
        // A compute capability the build has no cubin for, below none of
        // the cubins' majors: only PTX can run there.
        let future = Cc::new(13, 0);
        for driver in [12000, 12080, 13000] {
            assert_eq!(
                choose_image(&images, future, driver),
                Ok(ptx),
                "driver {driver}"
            );
        }
        let h200 = choose_image(&images, Cc::new(9, 0), 12000).unwrap();
        assert!(images[h200].0.ends_with(".cubin"), "{}", images[h200].0);
    }
}
