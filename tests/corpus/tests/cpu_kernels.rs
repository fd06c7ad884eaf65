//! Warp's own CPU code for the Warp test module `tests/warp/kernels.py`,
//! compiled by warp-build with the system C++ compiler and linked into this
//! crate, run on warp-launch's `"cpu"` device: every case of the module and
//! its tape case give exactly Warp's CPU results (computed at build time by
//! `tests/warp/build.py --cpu`, both for a generic x86-64). No GPU.

use std::path::Path;

use sdk_tests::warp::{arg_from, array_from, manifest, storage_bytes};
use serde_json::Value as Json;
use warp_corpus::KERNELS_REF_DIR;
use warp_corpus::kernels::KERNELS;
use warp_launch::{AotModule, Arg, Array, Device, Tape};

fn dims(v: &Json) -> Vec<i64> {
    v.as_array()
        .expect("dim")
        .iter()
        .map(|e| e.as_i64().expect("int"))
        .collect()
}

/// Bit for bit, or the first differing element.
fn same_bytes(what: &str, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let i = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
    Err(format!(
        "{what}: {} bytes, {} expected; first difference at byte {i}",
        got.len(),
        want.len()
    ))
}

#[test]
fn every_case_of_kernels_py_equals_warps_cpu_bit_for_bit() {
    let dir = Path::new(KERNELS_REF_DIR);
    let m = manifest(dir);
    let module = AotModule::from_embedded(&KERNELS).expect("the module loads without a GPU");
    let mut compared = 0;
    let mut kernels = std::collections::BTreeSet::new();
    for case in m["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let key = case["kernel"].as_str().expect("kernel");
        let kernel = module.kernel(key).unwrap_or_else(|e| panic!("{name}: {e}"));
        let specs = case["args"].as_array().expect("args");
        let args: Vec<Arg> = specs
            .iter()
            .map(|a| arg_from(dir, Device::Cpu, a))
            .collect();
        kernel
            .launch(dims(&case["dim"]))
            .inputs(args.clone())
            .device(Device::Cpu)
            .run()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for (spec, arg) in specs.iter().zip(&args) {
            let Some(file) = spec["expected_file"].as_str() else {
                continue;
            };
            let want = std::fs::read(dir.join(file)).expect("expected file");
            let a = arg.as_array().expect("array argument");
            same_bytes(
                &format!("{name}: argument '{}'", spec["name"]),
                &storage_bytes(a),
                &want,
            )
            .unwrap_or_else(|e| panic!("{e}"));
            compared += 1;
        }
        kernels.insert(key.to_string());
        println!(
            "{name}: {key} over {:?} on cpu: equal to Warp's CPU bit for bit",
            case["dim"]
        );
    }
    println!(
        "cpu: {} cases of {} kernels, {compared} outputs equal to Warp's CPU device bit for bit",
        m["cases"].as_array().map_or(0, Vec::len),
        kernels.len()
    );
    assert!(compared >= 15, "only {compared} outputs compared");
}

#[test]
fn the_tape_gives_warps_gradients_on_the_cpu_bit_for_bit() {
    let dir = Path::new(KERNELS_REF_DIR);
    let m = manifest(dir);
    let module = AotModule::from_embedded(&KERNELS).expect("the module loads without a GPU");
    let cases = m["tape_cases"].as_array().expect("tape_cases");
    let mut grads = 0;
    let mut kernels = std::collections::BTreeSet::new();
    for case in cases {
        let name = case["name"].as_str().expect("name");
        grads += tape_case(dir, &module, case, &mut kernels);
        println!("{name}: values and gradients equal to Warp's CPU tape bit for bit");
    }
    println!(
        "cpu tape: {} cases of {} kernels ({}), {grads} gradients equal to Warp's tape on its CPU device bit for bit",
        cases.len(),
        kernels.len(),
        kernels.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    // chain_tape and one case per kernels.py kernel with a float array.
    assert!(cases.len() >= 6, "only {} tape cases", cases.len());
    for k in [
        "saxpy",
        "add2d",
        "use_struct",
        "normalize_scale",
        "transform",
        "chain_sin",
        "chain_loss",
    ] {
        assert!(kernels.contains(k), "no tape case runs {k}");
    }
}

/// Runs one tape case of the manifest on `"cpu"` (its launches recorded,
/// then backward from its loss or its seeds) and compares every array's
/// values and gradient with Warp's; the number of gradients compared.
fn tape_case(
    dir: &Path,
    module: &AotModule,
    case: &Json,
    kernels: &mut std::collections::BTreeSet<String>,
) -> usize {
    let name = case["name"].as_str().expect("name");
    let arrays: Vec<(String, Array)> = case["arrays"]
        .as_object()
        .expect("arrays")
        .iter()
        .map(|(id, a)| {
            let arr = array_from(dir, Device::Cpu, a, "file");
            let arr = if a["requires_grad"].as_bool().expect("bool") {
                arr.with_grad().expect("grad")
            } else {
                arr
            };
            (id.clone(), arr)
        })
        .collect();
    let find = |id: &str| {
        arrays
            .iter()
            .find(|(i, _)| i == id)
            .expect("array id")
            .1
            .clone()
    };
    let launches = case["launches"].as_array().expect("launches");
    let mut tape = Tape::new();
    {
        let _rec = tape.recording();
        for l in launches {
            let key = l["kernel"].as_str().expect("kernel");
            let kernel = module.kernel(key).unwrap();
            let args: Vec<Arg> = l["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| match a.get("array").and_then(Json::as_str) {
                    Some(id) => Arg::Array(find(id)),
                    None => arg_from(dir, Device::Cpu, a),
                })
                .collect();
            kernel
                .launch(dims(&l["dim"]))
                .inputs(args)
                .device(Device::Cpu)
                .run()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            kernels.insert(key.to_string());
        }
    }
    assert_eq!(tape.launches().len(), launches.len(), "{name}");
    match case["seeds"].as_object() {
        Some(seeds) => {
            let seeds: Vec<(Array, Array)> = seeds
                .iter()
                .map(|(id, spec)| (find(id), array_from(dir, Device::Cpu, spec, "file")))
                .collect();
            let pairs: Vec<(&Array, &Array)> = seeds.iter().map(|(o, s)| (o, s)).collect();
            tape.backward_with(&pairs)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        None => tape
            .backward(&find(case["loss"].as_str().expect("loss")))
            .unwrap_or_else(|e| panic!("{name}: {e}")),
    }
    let mut grads = 0;
    for (id, a) in &arrays {
        let spec = &case["arrays"][id];
        let want = std::fs::read(dir.join(spec["expected_file"].as_str().expect("file"))).unwrap();
        same_bytes(&format!("{name}: {id}"), &storage_bytes(a), &want)
            .unwrap_or_else(|e| panic!("{e}"));
        if let Some(g) = spec["grad_expected_file"].as_str() {
            let want = std::fs::read(dir.join(g)).unwrap();
            same_bytes(
                &format!("{name}: {id}.grad"),
                &storage_bytes(a.grad().expect("grad")),
                &want,
            )
            .unwrap_or_else(|e| panic!("{e}"));
            grads += 1;
        }
    }
    assert!(grads >= 2, "{name}: only {grads} gradients compared");
    grads
}

/// The entry points walk the coordinates of 2- to 4-D launches instead of
/// dividing each task index (`warp-build`'s cursor): every thread must still
/// see its own coordinates, on one thread and when the launch is split
/// across threads at task indices that fall inside a row (2^18 work items or
/// more, shapes prime to the thread count).
#[test]
fn large_2d_and_4d_launches_see_every_coordinate_serial_and_threaded() {
    let module = AotModule::from_embedded(&KERNELS).expect("module");
    let index4d = module.kernel("index4d").expect("index4d");
    let add2d = module.kernel("add2d").expect("add2d");
    let shape4 = [3usize, 37, 41, 59];
    let n4: usize = shape4.iter().product();
    let (rows, cols) = (517usize, 509usize);
    assert!(n4 >= 1 << 18 && rows * cols >= 1 << 18);
    let av: Vec<f32> = (0..rows * cols).map(|v| (v % 1013) as f32 * 0.25).collect();
    let bv: Vec<f32> = (0..rows * cols).map(|v| (v % 769) as f32 - 300.0).collect();
    let a = Array::from_slice(Device::Cpu, &av, &[rows, cols]).expect("a");
    let b = Array::from_slice(Device::Cpu, &bv, &[rows, cols]).expect("b");
    for threads in [1, 3] {
        warp_launch::set_cpu_threads(threads);
        let out4 = Array::zeros::<i32>(Device::Cpu, &shape4).expect("out4");
        index4d
            .launch(shape4.map(|d| d as i64))
            .inputs((&out4,))
            .device(Device::Cpu)
            .run()
            .expect("index4d");
        let got = out4.to_vec::<i32>().expect("out4");
        if let Some(bad) = (0..n4).find(|&t| got[t] != t as i32) {
            panic!(
                "{threads} thread(s): index4d element {bad} holds {}",
                got[bad]
            );
        }
        let out = Array::zeros::<f32>(Device::Cpu, &[rows, cols]).expect("out");
        add2d
            .launch([rows as i64, cols as i64])
            .inputs((&a, &b, &out))
            .device(Device::Cpu)
            .run()
            .expect("add2d");
        let got = out.to_vec::<f32>().expect("out");
        for t in 0..rows * cols {
            let want = 2.0f32 * av[t] + bv[t];
            assert_eq!(
                got[t].to_bits(),
                want.to_bits(),
                "{threads} thread(s): add2d element ({}, {})",
                t / cols,
                t % cols
            );
        }
    }
    warp_launch::set_cpu_threads(0);
}

#[test]
fn the_tape_matches_warps_tape_for_copies_retain_grad_nested_structs_and_host_steps() {
    let dir = Path::new(KERNELS_REF_DIR);
    let m = manifest(dir);
    let module =
        AotModule::from_embedded(&warp_corpus::tape::TAPE).expect("the module loads without a GPU");
    let grads = sdk_tests::warp_tape::run_tape_parity(dir, &m, &module, Device::Cpu, None);
    println!("cpu tape parity: {grads} gradients equal to Warp's tape bit for bit");
    assert!(grads >= 18, "only {grads} gradients compared");
}

/// `launch_adjoint` takes `None` for the adjoint of an input that needs no
/// gradient, as Warp's `adj_inputs` does: the backward kernel gets a null
/// array and Warp's backward code (`adj_address`, `adj_atomic_add`) then
/// adds into the input's own gradient if it has one, else nowhere.
#[test]
fn an_adjoint_of_none_is_a_null_array_as_in_warp() {
    use sdk_tests::launchers::kernels::Kernels;
    use warp_launch::TypedArray;
    let module = AotModule::from_embedded(&KERNELS).expect("module");
    let k = Kernels::new(&module).expect("launchers");
    let ones = || TypedArray::<f32, 1>::from_slice("cpu", &[1.0; 4], [4]).unwrap();
    let x = TypedArray::<f32, 1>::from_slice("cpu", &[1.0, 2.0, 3.0, 4.0], [4]).unwrap();
    let y = TypedArray::<f32, 1>::zeros("cpu", [4]).unwrap();
    // y = a * x + y: with an adjoint for x, it receives a * adj_y.
    let adj_x = TypedArray::<f32, 1>::zeros("cpu", [4]).unwrap();
    k.saxpy
        .launch_adjoint(4, 3.0, &x, &y, 0.0, Some(&adj_x), Some(&ones()))
        .unwrap();
    assert_eq!(adj_x.to_vec().unwrap(), vec![3.0; 4]);
    // None, and x has no gradient: nothing is written (adj_x keeps its sum).
    k.saxpy
        .launch_adjoint(4, 3.0, &x, &y, 0.0, None, Some(&ones()))
        .unwrap();
    assert_eq!(adj_x.to_vec().unwrap(), vec![3.0; 4]);
    // None, and x has a gradient: Warp's backward code adds into it.
    let xg = x.clone().with_grad().unwrap();
    k.saxpy
        .launch_adjoint(4, 3.0, &xg, &y, 0.0, None, Some(&ones()))
        .unwrap();
    assert_eq!(xg.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0; 4]);
}

/// A `wp.struct` holding an array (`access.py`'s `Holder`, read by
/// `through_struct`) on `"cpu"` with Warp's compiled CPU code: the value
/// keeps its array alive after every other handle is dropped, a value that
/// does not hold the struct's arrays is refused, and the safe launch runs
/// where `dim` fits the held array and is refused (`Error::OutOfBounds`,
/// `h.data`) where it does not (issue 36: accesses through a struct are
/// read as the held array's).
#[test]
fn a_struct_holding_an_array_keeps_it_alive_and_is_checked() {
    use sdk_tests::launchers::access::{Access, Holder};
    use warp_corpus::access::ACCESS;
    use warp_launch::{Error, ParamKind, Pass, StructType, StructValue, TypedArg, TypedArray};
    let module = AotModule::from_embedded(&ACCESS).expect("module");
    let k = Access::new(&module).expect("launchers");
    let out = TypedArray::<f32, 1>::zeros("cpu", [4]).unwrap();
    let data = TypedArray::<f32, 1>::from_slice("cpu", &[1.0, 2.0, 3.0, 4.0], [4]).unwrap();
    let h = Holder {
        data: data.clone(),
        scale: 2.0,
    };
    let e = k.through_struct.launch(5, &h, &out).unwrap_err();
    assert!(
        matches!(&e, Error::OutOfBounds(b) if b.param == "h.data" && b.needed == 5),
        "{e}"
    );
    assert_eq!(out.to_vec().unwrap(), vec![0.0; 4]);

    // The value holds the only handle of its array.
    let value = h.to_value().unwrap();
    drop(h);
    drop(data);
    // Memory a freed array would give back is taken and overwritten.
    let junk = TypedArray::<f32, 1>::from_slice("cpu", &[-9.0; 4], [4]).unwrap();
    let args = [TypedArg::from(&value), (&out).into()];
    k.through_struct
        .kernel()
        .launch_args(Pass::Forward, 4, None, &args)
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![2.0, 4.0, 6.0, 8.0]);
    drop(junk);

    // The launcher makes the value itself.
    let h = Holder {
        data: TypedArray::from_slice("cpu", &[1.0; 4], [4]).unwrap(),
        scale: 0.5,
    };
    k.through_struct.launch(4, &h, &out).unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![0.5; 4]);

    // A value of a struct of the same name and size without its array
    // field: its bytes where `data`'s array_t sits are not an array the
    // launch checked, so it is refused, even unchecked.
    let ty = Holder::warp_type();
    let forged_ty = StructType::new(
        ty.name.clone(),
        vec![("data".into(), ParamKind::Value(warp_launch::DType::MAT44F))],
    );
    assert_eq!(forged_ty.size, ty.size);
    let forged = StructValue::with_arrays(&forged_ty, vec![0xff; ty.size], vec![]).unwrap();
    let args = [TypedArg::from(&forged), (&out).into()];
    // SAFETY: refused before any launch.
    let e = unsafe {
        k.through_struct
            .kernel()
            .launch_args_unchecked(Pass::Forward, 4, None, &args)
    }
    .unwrap_err();
    assert!(matches!(&e, Error::Argument(a) if a.param == "h"), "{e}");
    // The wrong arrays for the struct's fields are refused when made.
    let ints = TypedArray::<i32, 1>::zeros("cpu", [4]).unwrap();
    let e =
        StructValue::with_arrays(&ty, vec![0; ty.size], vec![ints.as_array().clone()]).unwrap_err();
    assert!(matches!(e, Error::StructArrays { .. }), "{e}");

    // Where the held array lives is checked as an array argument's is: on a
    // GPU, gpu_roads' struct hazards (host memory and memory of another
    // context for a CUDA launch, on every road); without one,
    // `launch::bind`'s `a_struct_held_array_is_checked_for_the_launch_device`.
}

/// A float16 value through its typed launcher (`half::f16`, warp-launch's
/// `half` feature) into Warp's compiled CPU code (`kinds.py`'s
/// `half_value`: `out[i] = wp.float32(h)`): Warp reads exactly the bits
/// passed, so each result is the float16's exact value, as on Warp's CPU.
#[test]
fn a_float16_value_reaches_warps_cpu_code_bit_for_bit() {
    use sdk_tests::launchers::kinds::Kinds;
    use warp_corpus::kinds::KINDS;
    use warp_launch::TypedArray;
    use warp_launch::half::f16;
    let module = AotModule::from_embedded(&KINDS).expect("module");
    let k = Kinds::new(&module).expect("launchers");
    let out = TypedArray::<f32, 1>::zeros("cpu", [3]).unwrap();
    for bits in [0x3c00u16, 0xc500, 0x7bff, 0x0001, 0x8000, 0x3555] {
        let h = f16::from_bits(bits);
        k.half_value.launch(3, h, &out).unwrap();
        for v in out.to_vec().unwrap() {
            assert_eq!(v.to_bits(), h.to_f32().to_bits(), "{bits:#06x}");
        }
    }
}
