//! The attack modules of `tests/warp/attacks/` on `"cpu"`, compiled by
//! warp-build with their CPU code (Warp's generated C++): no GPU.
//!
//! - `native_poke`: native code (a `@wp.func_native` snippet that begins
//!   with the comment Warp's own functions begin with) makes the kernel
//!   unproven from the compile step's facts: its safe launch is refused,
//!   naming the kernel, the native function and the unchecked way.
//! - `local_components`: a local vector component and `x.shape[k]` indexed
//!   by a parameter: unproven, refused.
//! - `contiguous_cpu`, `contiguous_views`: Warp's contiguous CPU path is
//!   taken only for packed arrays: a reversed, a strided and a
//!   strided-adjoint view are written only inside the view.

use std::sync::Arc;

use sdk_tests::warp::refused_as_unproven;
use warp_corpus::attacks::{contiguous_cpu, contiguous_views, local_components, native_poke};
use warp_launch::{AotModule, Array, DType, Pass};

fn cpu_array(values: &[f32]) -> Array {
    Array::from_slice("cpu", values, &[values.len()]).unwrap()
}

#[test]
fn native_code_is_unproven_on_cpu_from_warps_facts() {
    let m = AotModule::from_embedded(&native_poke::NATIVE_POKE).unwrap();
    let x = cpu_array(&[0.0; 4]);
    let target = cpu_array(&[0.0; 1]);
    let addr = target.data_address();
    let shown = refused_as_unproven(
        m.kernel("native_poke")
            .unwrap()
            .launch(4)
            .inputs((&x, addr, 5.0f32))
            .device("cpu")
            .run(),
    );
    println!("{shown}");
    for part in [
        "kernel 'native_poke'",
        "@wp.func_native function `poke` (module 'native_poke', C++ `poke_0`), directly",
        "C++ `poke_0`",
        "launch_unchecked",
        "debug mode is no guard",
    ] {
        assert!(shown.contains(part), "{part}: {shown}");
    }
    // Nothing ran: the snippet's write did not happen.
    assert_eq!(target.to_vec::<f32>().unwrap(), [0.0]);
    assert_eq!(x.to_vec::<f32>().unwrap(), [0.0; 4]);
}

#[test]
fn local_components_and_shapes_indexed_by_a_parameter_are_unproven_on_cpu() {
    let m = AotModule::from_embedded(&local_components::LOCAL_COMPONENTS).unwrap();
    let out = Array::zeros_dtype("cpu", DType::VEC3F, &[4]).unwrap();
    let shown = refused_as_unproven(
        m.kernel("vec_local_write")
            .unwrap()
            .launch(4)
            .inputs((&out, 1i32 << 28, 1.0f32))
            .device("cpu")
            .run(),
    );
    println!("{shown}");
    assert!(shown.contains("kernel 'vec_local_write'"), "{shown}");
    assert!(shown.contains("with `var_k`, not a constant"), "{shown}");
    let x = cpu_array(&[0.0; 4]);
    let ints = Array::zeros::<i32>("cpu", &[4]).unwrap();
    let shown = refused_as_unproven(
        m.kernel("shape_index")
            .unwrap()
            .launch(4)
            .inputs((&x, &ints, 5i32))
            .device("cpu")
            .run(),
    );
    assert!(shown.contains("kernel 'shape_index'"), "{shown}");
    assert!(shown.contains("wp::shape_t"), "{shown}");
}

/// `base`'s values: 7 where `written` says, 0 elsewhere.
fn only_inside(base: &Array, written: impl Fn(usize) -> bool, value: f32) {
    let v = base.to_vec::<f32>().unwrap();
    for (i, &got) in v.iter().enumerate() {
        let want = if written(i) { value } else { 0.0 };
        assert_eq!(got, want, "element {i} of {v:?}");
    }
}

#[test]
fn the_contiguous_cpu_path_writes_a_strided_view_only_inside_it() {
    let m = AotModule::from_embedded(&contiguous_cpu::CONTIGUOUS_CPU).unwrap();
    let k = m.kernel("contig_fill").unwrap();
    let base = cpu_array(&[0.0; 48]);
    let view = base.slice_step(0, 0..48, 3).unwrap();
    assert_eq!(view.shape(), [16]);
    k.launch(16).inputs(&view).device("cpu").run().unwrap();
    only_inside(&base, |i| i % 3 == 0, 7.0);
    // A packed array still runs (Warp's contiguous path).
    let packed = cpu_array(&[0.0; 16]);
    k.launch(16).inputs(&packed).device("cpu").run().unwrap();
    only_inside(&packed, |_| true, 7.0);
}

#[test]
fn the_contiguous_cpu_path_writes_a_reversed_view_only_inside_it() {
    let m = AotModule::from_embedded(&contiguous_cpu::CONTIGUOUS_CPU).unwrap();
    let base = cpu_array(&[0.0; 48]);
    // Elements 31 down to 16 of `base`.
    let reversed = Array::from_parts(
        Arc::clone(base.storage()),
        "cpu",
        31 * 4,
        DType::FLOAT32,
        &[16],
        &[-4],
    )
    .unwrap();
    m.kernel("contig_fill")
        .unwrap()
        .launch(16)
        .inputs(&reversed)
        .device("cpu")
        .run()
        .unwrap();
    only_inside(&base, |i| (16..32).contains(&i), 7.0);
}

#[test]
fn the_contiguous_cpu_path_writes_a_strided_adjoint_only_inside_it() {
    let m = AotModule::from_embedded(&contiguous_views::CONTIGUOUS_VIEWS).unwrap();
    let k = m.kernel("contig_copy").unwrap();
    // Packed forward arrays, a packed adj_y and a strided adj_x: the
    // backward pass adds adj_y[i] into adj_x[i].
    let x = cpu_array(&[0.0; 16]);
    let y = cpu_array(&[0.0; 16]);
    let adj_y = cpu_array(&[1.0; 16]);
    let base = cpu_array(&[0.0; 48]);
    let adj_x = base.slice_step(0, 0..48, 3).unwrap();
    k.launch(16)
        .inputs((&x, &y))
        .adj_inputs((&adj_x, &adj_y))
        .pass(Pass::Adjoint)
        .device("cpu")
        .run()
        .unwrap();
    only_inside(&base, |i| i % 3 == 0, 1.0);
    // All packed: the forward copy runs (Warp's contiguous path).
    let x = cpu_array(&[2.0; 16]);
    k.launch(16).inputs((&x, &y)).device("cpu").run().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0; 16]);
}
