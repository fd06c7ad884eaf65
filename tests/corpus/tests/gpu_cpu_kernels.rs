//! One Warp module, compiled once by warp-build for sm_90 and for the CPU,
//! run on `cuda:0` and on `"cpu"` from the same program: every case of the
//! Warp test module `tests/warp/kernels.py` and its tape give equal results
//! on both devices (within 1e-5 relative: NVRTC contracts multiply-adds into
//! FMAs where the CPU build does not), and the CPU results equal Warp's own
//! CPU device bit for bit. Inputs and Warp's results come from the GPU
//! bundle's data (`SDK_WARP_DATA`, written by `tests/warp/build.py`).

use sdk_tests::warp::{arg_from, array_from, compare, data_dir, manifest, storage_bytes};
use serde_json::Value as Json;
use warp_corpus::kernels::KERNELS;
use warp_launch::{AotModule, Arg, Array, Device, Tape};

fn dims(v: &Json) -> Vec<i64> {
    v.as_array()
        .expect("dim")
        .iter()
        .map(|e| e.as_i64().expect("int"))
        .collect()
}

/// Runs `case` on `device` and returns its outputs' bytes, by argument name.
fn run_case(module: &AotModule, case: &Json, device: Device) -> Vec<(String, Vec<u8>)> {
    let dir = data_dir();
    let name = case["name"].as_str().expect("name");
    let kernel = module
        .kernel(case["kernel"].as_str().expect("kernel"))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let specs = case["args"].as_array().expect("args");
    let args: Vec<Arg> = specs.iter().map(|a| arg_from(&dir, device, a)).collect();
    kernel
        .launch(dims(&case["dim"]))
        .inputs(args.clone())
        .device(device)
        .run()
        .unwrap_or_else(|e| panic!("{name} on {device}: {e}"));
    specs
        .iter()
        .zip(&args)
        .filter(|(s, _)| s["expected_file"].as_str().is_some())
        .map(|(s, a)| {
            (
                s["name"].as_str().expect("name").to_string(),
                storage_bytes(a.as_array().expect("array")),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn one_module_gives_equal_results_on_cuda_and_on_the_cpu() {
    let dir = data_dir();
    let m = manifest(&dir);
    let module = AotModule::from_embedded(&KERNELS).expect("module");
    let (mut outputs, mut bit_exact) = (0, 0);
    for case in m["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let cuda = run_case(&module, case, Device::Cuda(0));
        let cpu = run_case(&module, case, Device::Cpu);
        let specs = case["args"].as_array().expect("args");
        for ((arg, g), (_, c)) in cuda.iter().zip(&cpu) {
            let spec = specs
                .iter()
                .find(|s| s["name"] == arg.as_str())
                .expect("spec");
            let dtype =
                warp_launch::DType::by_name(spec["dtype"].as_str().expect("dtype")).expect("dtype");
            compare(dtype, g, c, 1e-5)
                .unwrap_or_else(|e| panic!("{name}: '{arg}' cuda:0 vs cpu: {e}"));
            let want = std::fs::read(dir.join(spec["expected_file"].as_str().expect("file")))
                .expect("expected file");
            assert!(
                c == &want,
                "{name}: '{arg}' on cpu differs from Warp's CPU device"
            );
            outputs += 1;
            bit_exact += usize::from(g == c);
        }
    }
    println!(
        "cuda vs cpu: {outputs} outputs of {} cases equal on cuda:0 and cpu (bit-exact: {bit_exact}, others within 1e-5), and the cpu ones equal Warp's CPU device bit for bit",
        m["cases"].as_array().map_or(0, Vec::len)
    );
    assert!(outputs >= 15, "only {outputs} outputs compared");
}

/// The tape case on `device`: every array's values and gradients.
fn tape(module: &AotModule, device: Device) -> Vec<(String, Vec<u8>, Option<Vec<u8>>)> {
    let dir = data_dir();
    let m = manifest(&dir);
    let case = &m["tape_cases"][0];
    let arrays: Vec<(String, Array)> = case["arrays"]
        .as_object()
        .expect("arrays")
        .iter()
        .map(|(id, a)| {
            let arr = array_from(&dir, device, a, "file");
            let arr = if a["requires_grad"].as_bool().expect("bool") {
                arr.with_grad().expect("grad")
            } else {
                arr
            };
            (id.clone(), arr)
        })
        .collect();
    let find = |id: &str| arrays.iter().find(|(i, _)| i == id).expect("id").1.clone();
    let mut t = Tape::new();
    {
        let _rec = t.recording();
        for l in case["launches"].as_array().expect("launches") {
            let kernel = module
                .kernel(l["kernel"].as_str().expect("kernel"))
                .unwrap();
            let args: Vec<Arg> = l["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| match a.get("array").and_then(Json::as_str) {
                    Some(id) => Arg::Array(find(id)),
                    None => arg_from(&dir, device, a),
                })
                .collect();
            kernel
                .launch(dims(&l["dim"]))
                .inputs(args)
                .device(device)
                .run()
                .unwrap();
        }
    }
    t.backward(&find(case["loss"].as_str().expect("loss")))
        .unwrap();
    arrays
        .iter()
        .map(|(id, a)| (id.clone(), storage_bytes(a), a.grad().map(storage_bytes)))
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_tape_gives_equal_gradients_on_cuda_and_on_the_cpu() {
    let module = AotModule::from_embedded(&KERNELS).expect("module");
    let cuda = tape(&module, Device::Cuda(0));
    let cpu = tape(&module, Device::Cpu);
    let f32s = warp_launch::DType::FLOAT32;
    let mut grads = 0;
    for ((id, gv, gg), (_, cv, cg)) in cuda.iter().zip(&cpu) {
        compare(f32s, gv, cv, 1e-5).unwrap_or_else(|e| panic!("{id}: {e}"));
        if let (Some(gg), Some(cg)) = (gg, cg) {
            compare(f32s, gg, cg, 1e-5).unwrap_or_else(|e| panic!("{id}.grad: {e}"));
            grads += 1;
        }
    }
    println!("cuda vs cpu: the tape's values and {grads} gradients equal on cuda:0 and cpu");
    assert!(grads >= 2);
}
