//! The tape against Warp's own tape: the programs of `tests/warp/build.py`'s
//! `tape_parity` cases (copies inside a tape, `retain_grad`, arrays in
//! nested structs, a host step with its own backward and `backward(grads=)`),
//! run with warp-launch on any device and compared with what Warp 1.19.0's
//! tape computed on its CPU device for the same program.

use std::path::Path;

use serde_json::Value as Json;
use warp_launch::{
    AotModule, Arg, Array, ArrayT, Device, Kernel, ParamKind, Result, StructType, StructValue, Tape,
};

use crate::warp::{array_from, compare, storage_bytes};

/// The arrays of one case, by the manifest's ids, as the case made them:
/// with a gradient where Warp's had one, retaining it where Warp's did.
fn case_arrays(dir: &Path, spec: &Json, device: Device) -> Vec<(String, Array)> {
    spec["arrays"]
        .as_object()
        .expect("arrays")
        .iter()
        .map(|(id, a)| {
            let mut arr = array_from(dir, device, a, "file");
            if a["requires_grad"].as_bool().expect("requires_grad") {
                arr = arr.with_grad().expect("gradient");
            }
            if a["retain_grad"].as_bool().unwrap_or(false) {
                arr = arr.with_retain_grad(true).expect("retain_grad");
            }
            (id.clone(), arr)
        })
        .collect()
}

/// An `array_t` as its 56 bytes (little-endian, Warp's C layout).
fn array_t_bytes(a: &ArrayT) -> Vec<u8> {
    let mut b = Vec::with_capacity(56);
    b.extend_from_slice(&a.data.to_le_bytes());
    b.extend_from_slice(&a.grad.to_le_bytes());
    for v in a.shape.iter().chain(&a.strides) {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&a.ndim.to_le_bytes());
    b.extend_from_slice(&a.flags.to_le_bytes());
    b.extend_from_slice(&[0u8; 4]);
    b
}

/// Fills struct `st` at `out` from `field`: each array field's `array_t`,
/// each nested struct recursively, each float32 field's value.
fn fill_struct(st: &StructType, out: &mut [u8], field: &dyn Fn(&str) -> Option<FieldValue>) {
    for f in &st.fields {
        match &f.kind {
            ParamKind::Struct(inner) => {
                fill_struct(inner, &mut out[f.offset..f.offset + inner.size], field)
            }
            _ => match field(&f.name) {
                Some(FieldValue::Array(a)) => {
                    out[f.offset..f.offset + 56].copy_from_slice(&array_t_bytes(&a.abi()))
                }
                Some(FieldValue::F32(v)) => {
                    out[f.offset..f.offset + 4].copy_from_slice(&v.to_le_bytes())
                }
                None => panic!("struct {}: no value for field '{}'", st.name, f.name),
            },
        }
    }
}

enum FieldValue {
    Array(Array),
    F32(f32),
}

/// Runs case `name`'s program on `device` with `module`'s kernels and
/// returns the tape.
fn run_program(
    name: &str,
    module: &AotModule,
    device: Device,
    find: &dyn Fn(&str) -> Array,
) -> Result<Tape> {
    let kernel = |k: &str| -> Kernel { module.kernel(k).unwrap_or_else(|e| panic!("{name}: {e}")) };
    let (sin, loss_k) = (kernel("tape_sin"), kernel("tape_loss"));
    let a = 1.5f32;
    let mut tape = Tape::new();
    match name {
        "copy_tape" | "copy_retain_tape" => {
            let (x, y, z, loss) = (find("x"), find("y"), find("z"), find("loss"));
            let n = x.len();
            tape.record(|| -> Result<()> {
                sin.launch(n)
                    .inputs((&x, a))
                    .outputs(&y)
                    .device(device)
                    .run()?;
                z.copy_from(&y)?;
                loss_k
                    .launch(n)
                    .inputs(&z)
                    .outputs(&loss)
                    .device(device)
                    .run()
            })?;
            tape.backward(&loss)?;
        }
        "retain_tape" => {
            let (x, y, loss) = (find("x"), find("y"), find("loss"));
            let n = x.len();
            tape.record(|| -> Result<()> {
                sin.launch(n)
                    .inputs((&x, a))
                    .outputs(&y)
                    .device(device)
                    .run()?;
                loss_k
                    .launch(n)
                    .inputs(&y)
                    .outputs(&loss)
                    .device(device)
                    .run()
            })?;
            tape.backward(&loss)?;
        }
        "nested_tape" => {
            let (x, y, out, loss) = (find("x"), find("y"), find("out"), find("loss"));
            let n = x.len();
            let k = kernel("nested_square");
            let ParamKind::Struct(st) = &k.params()[0].kind else {
                panic!("{name}: nested_square's first parameter is not a struct");
            };
            let mut bytes = vec![0u8; st.size];
            fill_struct(st, &mut bytes, &|f| match f {
                "x" => Some(FieldValue::Array(x.clone())),
                "y" => Some(FieldValue::Array(y.clone())),
                "w" => Some(FieldValue::F32(0.75)),
                _ => None,
            });
            // SAFETY: the array_t's inside are those of `x` and `y` (and
            // their gradients), alive until the end of this function, which
            // runs the forward and backward launches.
            let outer = unsafe { StructValue::from_bytes(&st.name, &bytes) };
            tape.record(|| -> Result<()> {
                let b = k
                    .launch(n)
                    .inputs(vec![Arg::Struct(outer)])
                    .outputs(&out)
                    .device(device);
                // SAFETY: nested_square reads o.inner.x[i] and o.y[i] and
                // writes out[i] for i < n, the length of all three arrays
                // (its backward the same indices of their gradients).
                unsafe { b.unchecked() }.run()?;
                loss_k
                    .launch(n)
                    .inputs(&out)
                    .outputs(&loss)
                    .device(device)
                    .run()
            })?;
            tape.backward(&loss)?;
        }
        "func_tape" => {
            let (x, y, z, seed) = (find("x"), find("y"), find("z"), find("seed"));
            let n = x.len();
            tape.record(|| {
                sin.launch(n)
                    .inputs((&x, a))
                    .outputs(&y)
                    .device(device)
                    .run()
            })?;
            // The host step z = 2 y, and its backward y.grad += 2 z.grad.
            let twice: Vec<f32> = y.to_vec::<f32>()?.iter().map(|v| 2.0 * v).collect();
            z.copy_from_slice(&twice)?;
            let (gy, gz) = (
                y.grad().expect("y.grad").clone(),
                z.grad().expect("z.grad").clone(),
            );
            tape.record_func(
                move || {
                    let sum: Vec<f32> = gy
                        .to_vec::<f32>()?
                        .iter()
                        .zip(gz.to_vec::<f32>()?)
                        .map(|(g, h)| g + 2.0 * h)
                        .collect();
                    gy.copy_from_slice(&sum)
                },
                &[&y, &z],
            )?;
            tape.backward_with(&[(&z, &seed)])?;
        }
        other => panic!(
            "tape_parity case '{other}' has no program here: add it to tests/src/warp_tape.rs"
        ),
    }
    Ok(tape)
}

/// Runs every `tape_parity` case of the manifest `m` (written by
/// `tests/warp/build.py` into `dir`) on `device` with the kernels of
/// `module` (`tests/warp/tape.py` compiled)
/// and compares every array's values and gradient with Warp's: bit for bit
/// when `rel` is `None` (our CPU device running Warp's CPU code), else
/// within the relative tolerance `rel`; and the arrays the tape lists
/// ([`Tape::gradients`]) with those of Warp's `tape.gradients` (less the
/// arrays reached only inside struct arguments, which ours cannot list).
/// Returns how many gradients were compared; panics naming the case, the
/// array and the first difference.
pub fn run_tape_parity(
    dir: &Path,
    m: &Json,
    module: &AotModule,
    device: Device,
    rel: Option<f64>,
) -> usize {
    let cases = m["tape_parity"]
        .as_object()
        .expect("tape_parity in the manifest");
    let mut grads = 0;
    for (name, spec) in cases {
        let arrays = case_arrays(dir, spec, device);
        let find = |id: &str| -> Array {
            arrays
                .iter()
                .find(|(i, _)| i == id)
                .unwrap_or_else(|| panic!("{name}: no array '{id}'"))
                .1
                .clone()
        };
        let tape =
            run_program(name, module, device, &find).unwrap_or_else(|e| panic!("{name}: {e}"));
        let same = |what: &str, got: &Array, file: &str| {
            let want = std::fs::read(dir.join(file)).expect("expected file");
            let got = storage_bytes(got);
            let r = match rel {
                None if got == want => Ok(()),
                None => {
                    let i = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(0);
                    Err(format!(
                        "not bit for bit: first difference at byte {i} ({} vs {} bytes)",
                        got.len(),
                        want.len()
                    ))
                }
                Some(rel) => compare(warp_launch::DType::FLOAT32, &got, &want, rel),
            };
            r.unwrap_or_else(|e| {
                panic!("{name} on {device}: {what} differs from Warp's tape: {e}")
            });
        };
        for (id, a) in &arrays {
            let s = &spec["arrays"][id];
            same(id, a, s["expected_file"].as_str().expect("expected_file"));
            if let Some(g) = s["grad_expected_file"].as_str() {
                same(&format!("{id}.grad"), a.grad().expect("gradient"), g);
                grads += 1;
            }
        }
        // The listing: Warp's tape.gradients, less what only a struct reaches.
        let via_struct: &[&str] = if name == "nested_tape" {
            &["x", "y"]
        } else {
            &[]
        };
        let want: Vec<&str> = spec["gradients"]
            .as_array()
            .expect("gradients")
            .iter()
            .filter_map(Json::as_str)
            .filter(|id| !via_struct.contains(id))
            .collect();
        let mut listed: Vec<&str> = tape
            .gradients()
            .iter()
            .map(|g| {
                arrays
                    .iter()
                    .find(|(_, a)| {
                        a.grad().map(Array::data_address) == g.grad().map(Array::data_address)
                    })
                    .map_or("?", |(id, _)| id.as_str())
            })
            .collect();
        listed.sort_unstable();
        let mut want_sorted = want.clone();
        want_sorted.sort_unstable();
        assert_eq!(
            listed, want_sorted,
            "{name} on {device}: Tape::gradients() vs Warp's tape.gradients"
        );
        println!(
            "{name} on {device}: values and gradients equal to Warp's tape ({}), gradients listed {listed:?}",
            if rel.is_none() {
                "bit for bit"
            } else {
                "within tolerance"
            }
        );
    }
    assert!(cases.len() >= 5, "only {} tape_parity cases", cases.len());
    grads
}
