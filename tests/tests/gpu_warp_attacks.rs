//! The attack modules of `tests/warp/attacks/` on cuda:0 (issue 36): Warp
//! 1.19.0's output for them (sm_90 cubin, `.cu`, `.meta` and warp-build's
//! facts, checked in under `warp-launch/tests/fixtures/attacks/` and
//! embedded here, so the GPU bundle needs no checkout) loads, and the safe
//! launch of every attack kernel is refused with `Error::Unproven` before
//! anything runs: native code from the compile step's facts, a local
//! vector component and `x.shape[k]` indexed by a parameter from the
//! reader. The unchecked launch is not tried: it writes where its caller
//! says.

use sdk_tests::warp::refused_as_unproven;
use warp_launch::{AotModule, Array, DType, Device, EmbeddedImage, EmbeddedModule};

const DEV: Device = Device::Cuda(0);

/// The module of `tests/warp/attacks/<name>.py` as checked in under
/// `warp-launch/tests/fixtures/attacks/`: source, metadata, sm_90 cubin and
/// facts.
macro_rules! attack_module {
    ($name:literal) => {{
        // SAFETY: the source, metadata, image and facts are the files of
        // one warp-build compile of tests/warp/attacks/<name>.py.
        unsafe {
            EmbeddedModule::new(
                $name,
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../warp-launch/tests/fixtures/attacks/wp_",
                    $name,
                    ".cu"
                )),
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../warp-launch/tests/fixtures/attacks/wp_",
                    $name,
                    ".meta"
                )),
                &[EmbeddedImage {
                    file: concat!("wp_", $name, ".sm90.cubin"),
                    bytes: include_bytes!(concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/../warp-launch/tests/fixtures/attacks/wp_",
                        $name,
                        ".sm90.cubin"
                    )),
                }],
                None,
            )
            .with_facts(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../warp-launch/tests/fixtures/attacks/wp_",
                $name,
                ".facts.json"
            )))
        }
    }};
}

static NATIVE_POKE: EmbeddedModule = attack_module!("native_poke");
static LOCAL_COMPONENTS: EmbeddedModule = attack_module!("local_components");

#[test]
#[ignore = "needs a CUDA GPU"]
fn native_code_is_unproven_on_cuda_from_warps_facts() {
    let m = AotModule::from_embedded(&NATIVE_POKE).unwrap();
    let x = Array::zeros::<f32>(DEV, &[4]).unwrap();
    let target = Array::zeros::<f32>(DEV, &[1]).unwrap();
    let shown = refused_as_unproven(
        m.kernel("native_poke")
            .unwrap()
            .launch(4)
            .inputs((&x, target.data_address(), 5.0f32))
            .device(DEV)
            .run(),
    );
    for part in ["kernel 'native_poke'", "`poke`", "launch_unchecked"] {
        assert!(shown.contains(part), "{part}: {shown}");
    }
    assert_eq!(target.to_vec::<f32>().unwrap(), [0.0]);
    assert_eq!(x.to_vec::<f32>().unwrap(), [0.0; 4]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn local_components_and_shapes_indexed_by_a_parameter_are_unproven_on_cuda() {
    let m = AotModule::from_embedded(&LOCAL_COMPONENTS).unwrap();
    let out = Array::zeros_dtype(DEV, DType::VEC3F, &[4]).unwrap();
    let shown = refused_as_unproven(
        m.kernel("vec_local_write")
            .unwrap()
            .launch(4)
            .inputs((&out, 1i32 << 28, 1.0f32))
            .device(DEV)
            .run(),
    );
    assert!(shown.contains("with `var_k`, not a constant"), "{shown}");
    let x = Array::zeros::<f32>(DEV, &[4]).unwrap();
    let ints = Array::zeros::<i32>(DEV, &[4]).unwrap();
    let shown = refused_as_unproven(
        m.kernel("shape_index")
            .unwrap()
            .launch(4)
            .inputs((&x, &ints, 5i32))
            .device(DEV)
            .run(),
    );
    assert!(shown.contains("wp::shape_t"), "{shown}");
    assert_eq!(ints.to_vec::<i32>().unwrap(), [0; 4]);
}
