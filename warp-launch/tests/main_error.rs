//! The documented `fn main() -> warp_launch::Result<()>` pattern prints the
//! error's message, not its structure: std prints `Error: {e:?}` when
//! `main` returns `Err(e)`, and `Debug` of [`warp_launch::Error`] is its
//! `Display`.
//!
//! This test has no harness: it is such a `main`. Run plainly, it starts
//! itself again with [`CHILD`] set, and checks the child's exit status and
//! stderr; the child's `main` returns the error of a failing CPU launch.

use std::process::Command;

use warp_launch::{Array, Device, KernelSpec, cpu_each_fn};

const CHILD: &str = "WARP_LAUNCH_MAIN_ERROR_CHILD";

fn main() -> warp_launch::Result<()> {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let out = Command::new(std::env::current_exe().expect("the test binary's path"))
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs again");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    let expected = "Error: kernel 'shift' (forward) on \"cpu\", thread [3] (wp.tid()): \
                    argument 1 'y': index [4] is outside the array of shape [4]; ";
    assert!(
        stderr.starts_with(expected),
        "stderr does not start with the message:\n{stderr}"
    );
    for debug in ["CpuIndex(", "CpuIndexError {", "kernel: \""] {
        assert!(!stderr.contains(debug), "{debug:?} in stderr:\n{stderr}");
    }
    println!("main_error: a main returning warp_launch::Error prints its message: ok");
    Ok(())
}

/// A program as a user writes it: `y[i + 1] = x[i]` on the CPU, which
/// fails on the last thread.
fn child() -> warp_launch::Result<()> {
    let shift = KernelSpec::new("shift", 1)
        .array::<f32>("x", 1)
        .array::<f32>("y", 1)
        .declare()?
        .with_cpu(
            cpu_each_fn(|args, each| {
                each.run(|t| {
                    let v = args.array::<f32>(0)?.get(t.tid())?;
                    args.array::<f32>(1)?.set(t.tid() + 1, v)
                })
            }),
            None,
        );
    let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0, 3.0, 4.0], &[4])?;
    let y = Array::zeros::<f32>(Device::Cpu, &[4])?;
    shift.launch(4).device("cpu").inputs((&x, &y)).run()?;
    Ok(())
}
