//! The adjoint of a copy recorded by a [`Tape`] on a CUDA device
//! (warp-launch's own `copy_adjoint` kernels, queued on the copy's stream):
//! `src.grad += dst.grad` over strided views of up to four axes for float32,
//! float16 (added in float32 and rounded to nearest even, not overwritten),
//! float64 (with a destination that retains its gradient), bfloat16, int32
//! (wrapping) and vec3f (the floating-point ones through two backward
//! passes, so the sums accumulate); and copies from the CPU into CUDA memory and between two
//! devices (added on the host; the second test skips with one GPU).
//! Every value is read back from the GPU. The float16 expectations are
//! what Warp 1.19.0's own tape computes for the same program on its CPU
//! device (and numpy's float16 sums of float32 sums); warp-launch's CPU
//! unit test `float16_copy_adjoints_over_4d_views_give_warps_numbers`
//! checks the host path against the same numbers.
//!
//! `#[ignore = "needs a CUDA GPU"]`; the GPU bundle runs them.

use warp_launch::{Array, DType, Device, Stream, Tape};

fn gpu() -> (Device, Stream) {
    let gpu = Device::Cuda(0);
    let stream = Stream::new(&gpu.context().expect("cuda:0 context")).expect("stream");
    (gpu, stream)
}

/// The float16 bits of `v`, which must be a normal float16 or zero.
fn f16_bits(v: f32) -> u16 {
    if v == 0.0 {
        return 0;
    }
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    assert!(
        (1..31).contains(&exp) && b & 0x1fff == 0,
        "{v} is not a normal float16"
    );
    sign | ((exp as u16) << 10) | ((b >> 13) & 0x3ff) as u16
}

/// The value of float16 bits `h` (normal or zero).
fn f16_value(h: u16) -> f32 {
    let exp = u32::from((h >> 10) & 0x1f);
    if exp == 0 {
        assert_eq!(h & 0x3ff, 0, "subnormal float16 {h:#06x} in a test value");
        return if h & 0x8000 == 0 { 0.0 } else { -0.0 };
    }
    let bits = (u32::from(h >> 15) << 31) | ((exp + 112) << 23) | (u32::from(h & 0x3ff) << 13);
    f32::from_bits(bits)
}

/// The bfloat16 bits of `v`, which must be a bfloat16.
fn bf16_bits(v: f32) -> u16 {
    assert_eq!(v.to_bits() & 0xffff, 0, "{v} is not a bfloat16");
    (v.to_bits() >> 16) as u16
}

/// Writes float16 `values` (row-major) into `a` (float16, contiguous).
fn set_f16(a: &Array, values: &[f32]) {
    let bits: Vec<u16> = values.iter().map(|&v| f16_bits(v)).collect();
    a.view(DType::UINT16)
        .unwrap()
        .copy_from_slice(&bits)
        .unwrap();
}

fn get_f16(a: &Array) -> Vec<f32> {
    let bits = a.view(DType::UINT16).unwrap().to_vec::<u16>().unwrap();
    bits.into_iter().map(f16_value).collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn float32_copy_adjoint_of_a_transposed_source_on_the_copys_stream() {
    let (gpu, stream) = gpu();
    let x = Array::from_slice(gpu, &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .unwrap()
        .with_grad()
        .unwrap();
    let xt = x.transpose(0, 1).unwrap();
    let y = Array::zeros::<f32>(gpu, &[3, 2])
        .unwrap()
        .with_grad()
        .unwrap();
    let mut tape = Tape::new();
    // Queued on `stream`: the adjoint is queued there too.
    tape.record(|| y.assign_on(&xt, &stream)).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(tape.gradients().len(), 2, "{tape:?}");
    let gx = x.grad().unwrap();
    let gy = y.grad().unwrap();
    gx.copy_from_slice(&[0.5f32, 0.0, 0.0, 0.0, 0.0, 0.25])
        .unwrap();
    // y.grad[i][j] flows into x.grad[j][i].
    gy.copy_from_slice(&[10.0f32, 40.0, 20.0, 50.0, 30.0, 60.0])
        .unwrap();
    tape.backward_with(&[]).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        gx.to_vec::<f32>().unwrap(),
        [10.5, 20.0, 30.0, 40.0, 50.0, 60.25],
        "x.grad after one backward: [0.5, 0, 0, 0, 0, 0.25] + y.grad transposed [10, 20, 30, 40, 50, 60]"
    );
    assert_eq!(
        gy.to_vec::<f32>().unwrap(),
        [0.0; 6],
        "y.grad consumed (zeroed) by the adjoint"
    );
    gy.copy_from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
        .unwrap();
    tape.backward_with(&[]).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(
        gx.to_vec::<f32>().unwrap(),
        [11.5, 23.0, 35.0, 42.0, 54.0, 66.25],
        "x.grad after two: accumulated, + [1, 3, 5, 2, 4, 6]"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn float16_copy_adjoint_adds_over_4d_strided_views_and_rounds_to_even() {
    let (gpu, _) = gpu();
    // x: [2, 1, 2, 6] float16, copied from every other element of its last
    // axis (a [2, 1, 2, 3] view, strides 24, 24, 12, 4 bytes) into the
    // transpose of y: [2, 1, 3, 2] float16 seen as [2, 1, 2, 3].
    let x = Array::zeros_dtype(gpu, DType::FLOAT16, &[2, 1, 2, 6])
        .unwrap()
        .with_grad()
        .unwrap();
    let y = Array::zeros_dtype(gpu, DType::FLOAT16, &[2, 1, 3, 2])
        .unwrap()
        .with_grad()
        .unwrap();
    let xs = x.slice_step(3, 0..6, 2).unwrap();
    let yt = y.transpose(2, 3).unwrap();
    assert!(!xs.is_contiguous() && !yt.is_contiguous());
    set_f16(&x, &(0..24).map(|i| i as f32).collect::<Vec<_>>());
    let mut tape = Tape::new();
    tape.record(|| yt.assign(&xs)).unwrap();
    assert_eq!(
        get_f16(&y),
        [
            0.0, 6.0, 2.0, 8.0, 4.0, 10.0, 12.0, 18.0, 14.0, 20.0, 16.0, 22.0
        ],
        "the forward copy"
    );
    let gx = x.grad().unwrap();
    let gy = y.grad().unwrap();
    // x.grad = 0, 1, ..., 23 but 2048 first; y.grad = 0, 0.25, ... but 3
    // first: 2048 + 3 = 2051 is a tie between float16s 2050 and 2052, and
    // rounds to the even 2052 (an overwrite would give 3).
    let mut xg: Vec<f32> = (0..24).map(|i| i as f32).collect();
    xg[0] = 2048.0;
    set_f16(gx, &xg);
    let mut yg: Vec<f32> = (0..12).map(|i| i as f32 * 0.25).collect();
    yg[0] = 3.0;
    set_f16(gy, &yg);
    tape.backward_with(&[]).unwrap();
    assert_eq!(
        get_f16(gx),
        [
            2052.0, 1.0, 2.5, 3.0, 5.0, 5.0, 6.25, 7.0, 8.75, 9.0, 11.25, 11.0, 13.5, 13.0, 16.0,
            15.0, 18.5, 17.0, 19.75, 19.0, 22.25, 21.0, 24.75, 23.0
        ],
        "x.grad after one backward (what Warp 1.19.0's tape gives for the same program on its CPU device)"
    );
    assert_eq!(get_f16(gy), [0.0; 12], "y.grad consumed by the adjoint");
    set_f16(gy, &[1.0; 12]);
    tape.backward_with(&[]).unwrap();
    assert_eq!(
        get_f16(gx),
        [
            2052.0, 1.0, 3.5, 3.0, 6.0, 5.0, 7.25, 7.0, 9.75, 9.0, 12.25, 11.0, 14.5, 13.0, 17.0,
            15.0, 19.5, 17.0, 20.75, 19.0, 23.25, 21.0, 25.75, 23.0
        ],
        "x.grad after two: accumulated (+1 on every element the view reaches; 2052 + 1 is a tie: 2052)"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn float64_copy_adjoint_into_a_destination_that_retains_its_gradient() {
    let (gpu, _) = gpu();
    let x = Array::from_slice(gpu, &[0.0f64; 8], &[8])
        .unwrap()
        .with_grad()
        .unwrap();
    let xs = x.slice_step(0, 0..8, 2).unwrap();
    let y = Array::zeros::<f64>(gpu, &[4])
        .unwrap()
        .with_grad()
        .unwrap()
        .with_retain_grad(true)
        .unwrap();
    let mut tape = Tape::new();
    tape.record(|| y.assign(&xs)).unwrap();
    let gx = x.grad().unwrap();
    gx.copy_from_slice(&[0.5f64; 8]).unwrap();
    y.grad()
        .unwrap()
        .copy_from_slice(&[1.0f64, 2.0, 3.0, 4.0])
        .unwrap();
    tape.backward_with(&[]).unwrap();
    tape.backward_with(&[]).unwrap();
    assert_eq!(
        gx.to_vec::<f64>().unwrap(),
        [2.5, 0.5, 4.5, 0.5, 6.5, 0.5, 8.5, 0.5],
        "x.grad[2k] = 0.5 + 2 * y.grad[k] (y retains its gradient, so both passes add it)"
    );
    assert_eq!(
        y.grad().unwrap().to_vec::<f64>().unwrap(),
        [1.0, 2.0, 3.0, 4.0],
        "y.grad retained"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bfloat16_int32_and_vec3f_copy_adjoints_on_the_device() {
    let (gpu, _) = gpu();
    let pair = |dtype| {
        let make = || {
            Array::zeros_dtype(gpu, dtype, &[3])
                .unwrap()
                .with_grad()
                .unwrap()
        };
        (make(), make())
    };
    let u16s = |a: &Array| a.view(DType::UINT16).unwrap();

    // bfloat16: 256 + 3 is a tie between 258 and 260 (to 260, the even).
    let (x, y) = pair(DType::BFLOAT16);
    let mut tape = Tape::new();
    tape.record(|| y.assign(&x)).unwrap();
    let bits = |v: &[f32]| v.iter().map(|&v| bf16_bits(v)).collect::<Vec<_>>();
    u16s(x.grad().unwrap())
        .copy_from_slice(&bits(&[1.5, 256.0, -1.0]))
        .unwrap();
    u16s(y.grad().unwrap())
        .copy_from_slice(&bits(&[0.25, 3.0, 0.25]))
        .unwrap();
    tape.backward_with(&[]).unwrap();
    u16s(y.grad().unwrap())
        .copy_from_slice(&bits(&[0.25, 1.0, 0.25]))
        .unwrap();
    tape.backward_with(&[]).unwrap();
    let got: Vec<f32> = u16s(x.grad().unwrap())
        .to_vec::<u16>()
        .unwrap()
        .into_iter()
        .map(|b| f32::from_bits(u32::from(b) << 16))
        .collect();
    assert_eq!(
        got,
        [2.0, 260.0, -0.5],
        "bfloat16 x.grad after two backward passes: 1.5+0.25+0.25, 256+3 (tie: 260)+1 (tie: 260), -1+0.25+0.25"
    );

    // int32: added modulo 2^32, as Warp's kernels add.
    let (x, y) = pair(DType::INT32);
    let mut tape = Tape::new();
    tape.record(|| y.assign(&x)).unwrap();
    x.grad()
        .unwrap()
        .copy_from_slice(&[1i32, i32::MAX, -5])
        .unwrap();
    y.grad().unwrap().copy_from_slice(&[2i32, 1, 5]).unwrap();
    tape.backward_with(&[]).unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<i32>().unwrap(),
        [3, i32::MIN, 0],
        "int32 x.grad: 1+2, MAX+1 wraps to MIN, -5+5"
    );

    // vec3f: component by component.
    let x = Array::from_slice(gpu, &[[0.0f32; 3]; 2], &[2])
        .unwrap()
        .with_grad()
        .unwrap();
    let y = Array::zeros::<[f32; 3]>(gpu, &[2])
        .unwrap()
        .with_grad()
        .unwrap();
    let mut tape = Tape::new();
    tape.record(|| y.assign(&x)).unwrap();
    x.grad()
        .unwrap()
        .copy_from_slice(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]])
        .unwrap();
    y.grad()
        .unwrap()
        .copy_from_slice(&[[0.5f32, 0.25, 0.125], [10.0, 20.0, 30.0]])
        .unwrap();
    tape.backward_with(&[]).unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<[f32; 3]>().unwrap(),
        [[1.5, 2.25, 3.125], [14.0, 25.0, 36.0]],
        "vec3f x.grad"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn copy_adjoint_from_the_cpu_into_cuda_memory_adds_on_the_host() {
    let (gpu, _) = gpu();
    let x = Array::from_slice(Device::Cpu, &[1.0f32, 2.0], &[2])
        .unwrap()
        .with_grad()
        .unwrap();
    let y = Array::zeros::<f32>(gpu, &[2]).unwrap().with_grad().unwrap();
    let mut tape = Tape::new();
    tape.record(|| y.assign(&x)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 2.0]);
    x.grad().unwrap().copy_from_slice(&[0.5f32, 0.5]).unwrap();
    let seed = Array::from_slice(gpu, &[3.0f32, 4.0], &[2]).unwrap();
    tape.backward_with(&[(&y, &seed)]).unwrap();
    tape.backward_with(&[(&y, &seed)]).unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<f32>().unwrap(),
        [6.5, 8.5],
        "cpu x.grad = 0.5 + 2 * [3, 4] after two seeded passes"
    );
    assert_eq!(y.grad().unwrap().to_vec::<f32>().unwrap(), [0.0, 0.0]);
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn copy_adjoint_between_two_devices_adds_on_the_host() {
    let test = "copy_adjoint_between_two_devices_adds_on_the_host";
    let n = cuda_api::CudaDevice::count().unwrap_or(0);
    if n < 2 {
        sdk_tests::skip(
            test,
            &format!("this machine has {n} CUDA device(s); the test needs two"),
        );
        return;
    }
    let x = Array::from_slice(Device::Cuda(0), &[1.0f32, 2.0, 3.0], &[3])
        .unwrap()
        .with_grad()
        .unwrap();
    let y = Array::zeros::<f32>(Device::Cuda(1), &[3])
        .unwrap()
        .with_grad()
        .unwrap();
    let mut tape = Tape::new();
    tape.record(|| y.assign(&x)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    x.grad()
        .unwrap()
        .copy_from_slice(&[0.25f32, 0.5, 0.75])
        .unwrap();
    y.grad()
        .unwrap()
        .copy_from_slice(&[10.0f32, 20.0, 30.0])
        .unwrap();
    tape.backward_with(&[]).unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<f32>().unwrap(),
        [10.25, 20.5, 30.75],
        "cuda:0 x.grad = [0.25, 0.5, 0.75] + cuda:1 y.grad [10, 20, 30]"
    );
    assert_eq!(y.grad().unwrap().to_vec::<f32>().unwrap(), [0.0; 3]);
}
