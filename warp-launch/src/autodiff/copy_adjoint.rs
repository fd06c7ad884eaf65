//! The adjoint of a recorded copy on a CUDA device: `src.grad += dst.grad`
//! by one of warp-launch's own kernels (`copy_adjoint.cu`, embedded as
//! PTX), queued on a stream, with no host round trip: stream-ordered
//! with the backward launches.
//!
//! One kernel per component type: float16 and bfloat16 are added in
//! float32 and rounded to nearest (ties to even), as Warp adds them;
//! float32 and float64 in their own precision; integers modulo 2^bits
//! (signed ones wrap the same way). Vectors, matrices, quaternions and
//! transforms are added component by component. Both gradients are views
//! of up to four axes with any byte strides (the kernel walks each
//! element's index through both views' strides).

use std::sync::OnceLock;

use cuda_api::{LaunchConfig, Library, MemoryKind, Stream, TypedKernel};

use crate::abi::Scalar;
use crate::array::Array;
use crate::error::{Error, Result};

/// `copy_adjoint.cu` compiled by nvcc 13.0 (see its header).
const PTX: &str = include_str!("copy_adjoint.ptx");

/// The kernels, in the order of [`kernel_index`].
const KERNELS: [&str; 8] = [
    "warp_launch_copy_adjoint_f16",
    "warp_launch_copy_adjoint_bf16",
    "warp_launch_copy_adjoint_f32",
    "warp_launch_copy_adjoint_f64",
    "warp_launch_copy_adjoint_u8",
    "warp_launch_copy_adjoint_u16",
    "warp_launch_copy_adjoint_u32",
    "warp_launch_copy_adjoint_u64",
];

/// The kernels' parameters (see `copy_adjoint.cu`): the accumulated
/// view's address, the added view's address, the shape padded to four
/// axes with leading 1s, both views' byte strides padded with leading 0s,
/// the number of components and the components per element.
type Signature = (u64, u64, [i64; 4], [i64; 4], [i64; 4], u64, u32);

/// Threads per block (the kernels loop over the grid's stride).
const BLOCK: u32 = 256;
/// Most blocks a launch uses (each thread then handles several
/// components).
const MAX_GRID: u64 = 4096;

/// The call named in errors.
const CALL: &str = "Tape::backward (the adjoint of a recorded copy)";

/// The kernel for components of `scalar`, `None` for bool (not added).
fn kernel_index(scalar: Scalar) -> Option<usize> {
    Some(match scalar {
        Scalar::Float16 => 0,
        Scalar::BFloat16 => 1,
        Scalar::Float32 => 2,
        Scalar::Float64 => 3,
        Scalar::Int8 | Scalar::UInt8 => 4,
        Scalar::Int16 | Scalar::UInt16 => 5,
        Scalar::Int32 | Scalar::UInt32 => 6,
        Scalar::Int64 | Scalar::UInt64 => 7,
        _ => return None,
    })
}

/// One launch's arguments, apart from the addresses.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    /// Index into [`KERNELS`].
    kernel: usize,
    shape: [i64; 4],
    acc_strides: [i64; 4],
    add_strides: [i64; 4],
    /// Elements times components per element.
    count: u64,
    components: u32,
}

/// The launch that adds `add` into `acc` (same dtype and shape, any
/// strides): refuses what the kernels cannot add.
fn plan(acc: &Array, add: &Array) -> Result<Plan> {
    let dtype = acc.dtype();
    let kernel = kernel_index(dtype.scalar).filter(|_| std::ptr::eq(dtype, add.dtype()));
    let Some(kernel) = kernel.filter(|_| acc.shape() == add.shape() && acc.ndim() <= 4) else {
        return Err(Error::Shape {
            call: CALL,
            message: format!(
                "adding the gradient of {} {:?} into the gradient of {} {:?} needs one dtype other than bool and one shape of at most 4 axes; a copy records only arrays of one dtype and shape",
                add.dtype().name,
                add.shape(),
                dtype.name,
                acc.shape()
            ),
        });
    };
    let mut plan = Plan {
        kernel,
        shape: [1; 4],
        acc_strides: [0; 4],
        add_strides: [0; 4],
        count: 0,
        components: u32::from(dtype.rows) * u32::from(dtype.cols),
    };
    let pad = 4 - acc.ndim();
    let too_large = || Error::Shape {
        call: CALL,
        message: format!(
            "the gradient of {} {:?} (strides {:?}) does not fit the kernel's 64-bit indices",
            dtype.name,
            acc.shape(),
            acc.strides()
        ),
    };
    for (k, &n) in acc.shape().iter().enumerate() {
        plan.shape[pad + k] = i64::try_from(n).map_err(|_| too_large())?;
        plan.acc_strides[pad + k] = i64::try_from(acc.strides()[k]).map_err(|_| too_large())?;
        plan.add_strides[pad + k] = i64::try_from(add.strides()[k]).map_err(|_| too_large())?;
    }
    plan.count = u64::try_from(acc.len())
        .ok()
        .and_then(|n| n.checked_mul(u64::from(plan.components)))
        .ok_or_else(too_large)?;
    Ok(plan)
}

/// Refuses `a` unless it is device memory of `stream`'s context.
fn check_device_memory(a: &Array, stream: &Stream, which: &str) -> Result<()> {
    match a.storage().allocation() {
        Some(alloc)
            if alloc.kind() == MemoryKind::Device && alloc.context() == stream.context() =>
        {
            Ok(())
        }
        Some(alloc) if alloc.kind() == MemoryKind::Device => Err(Error::StreamContext {
            launch: format!(
                "{CALL}: kernel '{}' for {which}",
                "warp_launch_copy_adjoint"
            ),
            stream: stream.context().to_string(),
            expected: alloc.context().to_string(),
        }),
        _ => Err(Error::NotCuda {
            call: CALL,
            device: a.device(),
        }),
    }
}

/// The kernels, loaded once per process (a context-less library: the
/// driver loads it into each context on its first launch there).
fn kernels() -> Result<&'static [TypedKernel<Signature>]> {
    static KERNELS_LOADED: OnceLock<Vec<TypedKernel<Signature>>> = OnceLock::new();
    if let Some(k) = KERNELS_LOADED.get() {
        return Ok(k);
    }
    crate::device::Device::ensure_context()?;
    let library = Library::from_image(PTX.as_bytes())?;
    let mut loaded = Vec::with_capacity(KERNELS.len());
    for name in KERNELS {
        // SAFETY: copy_adjoint.cu declares every kernel with exactly these
        // parameters: two unsigned 64-bit addresses, three structs of four
        // long longs, an unsigned 64-bit count and an unsigned int (the
        // driver's layout is checked against them here).
        loaded.push(unsafe { library.kernel::<Signature>(name) }?);
    }
    Ok(KERNELS_LOADED.get_or_init(|| loaded))
}

/// Queues `acc += add` on `stream` (same dtype and shape, any strides; both
/// in device memory of `stream`'s context), and notes both as used there
/// (their frees and host reads wait for it).
///
/// # Errors
///
/// [`Error::Shape`] for other dtypes or shapes, or bool; [`Error::NotCuda`]
/// for memory that is not CUDA device memory; [`Error::StreamContext`] for
/// device memory of another context than the stream's; [`Error::Cuda`] when
/// the kernels do not load or the launch fails.
pub(crate) fn add_on(acc: &Array, add: &Array, stream: &Stream) -> Result<()> {
    let plan = plan(acc, add)?;
    check_device_memory(acc, stream, "the source's gradient")?;
    check_device_memory(add, stream, "the destination's gradient")?;
    if plan.count == 0 {
        return Ok(());
    }
    let kernel = &kernels()?[plan.kernel];
    let grid = plan.count.div_ceil(u64::from(BLOCK)).min(MAX_GRID);
    // `grid` is at most MAX_GRID, which fits.
    let cfg = LaunchConfig::new(u32::try_from(grid).unwrap_or(1), BLOCK);
    crate::launch::prepare::enqueue_own(
        kernel,
        stream,
        cfg,
        (
            acc.data_address(),
            add.data_address(),
            plan.shape,
            plan.acc_strides,
            plan.add_strides,
            plan.count,
            plan.components,
        ),
        CALL,
        &[
            (acc, "the source's gradient"),
            (add, "the destination's gradient"),
        ],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;

    /// What the kernel does with `plan`, on the bytes of two host storages:
    /// the same index walk as `add_into` in copy_adjoint.cu, for float32.
    fn walk_f32(plan: &Plan, acc: &mut [u8], acc_at: usize, add: &[u8], add_at: usize) {
        for i in 0..plan.count {
            let c = u64::from(plan.components);
            let mut e = i / c;
            let comp = ((i % c) * 4) as i64;
            let (mut a, mut b) = (comp, comp);
            for k in (0..4).rev() {
                let n = plan.shape[k] as u64;
                let j = (e % n) as i64;
                e /= n;
                a += j * plan.acc_strides[k];
                b += j * plan.add_strides[k];
            }
            let a = acc_at + a as usize;
            let b = add_at + b as usize;
            let x = f32::from_le_bytes(acc[a..a + 4].try_into().unwrap());
            let y = f32::from_le_bytes(add[b..b + 4].try_into().unwrap());
            acc[a..a + 4].copy_from_slice(&(x + y).to_le_bytes());
        }
    }

    #[test]
    fn every_kernel_the_code_loads_is_in_the_ptx_with_its_parameters() {
        for name in KERNELS {
            let entry = format!(".visible .entry {name}(");
            let at = PTX
                .find(&entry)
                .unwrap_or_else(|| panic!("copy_adjoint.ptx has no entry {name}"));
            let params: Vec<&str> = PTX[at..]
                .lines()
                .skip(1)
                .take_while(|l| !l.starts_with(')'))
                .map(str::trim)
                .collect();
            let want = [
                format!(".param .u64 {name}_param_0,"),
                format!(".param .u64 {name}_param_1,"),
                format!(".param .align 8 .b8 {name}_param_2[32],"),
                format!(".param .align 8 .b8 {name}_param_3[32],"),
                format!(".param .align 8 .b8 {name}_param_4[32],"),
                format!(".param .u64 {name}_param_5,"),
                format!(".param .u32 {name}_param_6"),
            ];
            assert_eq!(params, want, "parameters of {name} in copy_adjoint.ptx");
        }
        assert_eq!(PTX.matches(".visible .entry ").count(), KERNELS.len());
        // Loadable by a driver of CUDA 12.0 on, and JIT-compiled for any
        // GPU from Turing (sm_75, nvcc 13's oldest) on.
        assert!(
            PTX.contains("\n.version 8.0\n.target sm_75\n"),
            "PTX header"
        );
        assert_eq!(
            cuda_api::check_image(PTX.as_bytes()).unwrap(),
            cuda_api::ImageKind::Ptx,
            "the loader's image check accepts it"
        );
    }

    /// The checked-in PTX is what the pinned nvcc 13.0.88 makes of the .cu
    /// (with the header's `.version` lowered as the .cu's header says).
    /// Needs that nvcc: `$NVCC`, or the pinned set xtask installs under
    /// `target/cuda-cache/nvcc`.
    #[test]
    #[ignore = "needs nvcc 13.0.88 (NVCC or target/cuda-cache/nvcc)"]
    fn the_ptx_is_what_nvcc_makes_of_the_cu() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let nvcc = std::env::var_os("NVCC").map_or_else(
            || dir.join("../target/cuda-cache/nvcc/nvidia/cu13/bin/nvcc"),
            std::path::PathBuf::from,
        );
        let out = std::env::temp_dir().join(format!("copy_adjoint_{}.ptx", std::process::id()));
        let status = std::process::Command::new(&nvcc)
            .args(["-ptx", "-arch=compute_75", "-O3"])
            .arg(dir.join("src/autodiff/copy_adjoint.cu"))
            .arg("-o")
            .arg(&out)
            .status()
            .unwrap_or_else(|e| panic!("running {}: {e}", nvcc.display()));
        assert!(status.success(), "{} failed: {status}", nvcc.display());
        let made = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        let lowered = made.replacen("\n.version 9.0\n", "\n.version 8.0\n", 1);
        assert!(lowered != made, "nvcc's PTX has no `.version 9.0` line");
        assert!(
            lowered == PTX,
            "copy_adjoint.ptx differs from what nvcc makes of copy_adjoint.cu; regenerate it as the .cu's header says"
        );
    }

    #[test]
    fn one_kernel_per_component_type_and_bool_refused() {
        assert_eq!(kernel_index(Scalar::Float16), Some(0));
        assert_eq!(kernel_index(Scalar::BFloat16), Some(1));
        assert_eq!(kernel_index(Scalar::Int8), kernel_index(Scalar::UInt8));
        assert_eq!(kernel_index(Scalar::Int64), Some(7));
        assert_eq!(kernel_index(Scalar::Bool), None);
        let b = Array::zeros_dtype(Device::Cpu, crate::DType::BOOL, &[2]).unwrap();
        let e = plan(&b, &b).unwrap_err().to_string();
        assert!(
            e.contains("other than bool") && e.contains("bool [2]"),
            "{e}"
        );
    }

    #[test]
    fn plans_pad_to_four_axes_and_walk_strided_views() {
        // acc: the transpose of a 3x2 array (strides 4, 8); add: every
        // other column of a 2x6 array (strides 24, 8).
        let acc_base =
            Array::from_slice(Device::Cpu, &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
        let acc = acc_base.transpose(0, 1).unwrap();
        let add_base = Array::from_slice(
            Device::Cpu,
            &(0..12).map(|i| i as f32 * 10.0).collect::<Vec<_>>(),
            &[2, 6],
        )
        .unwrap();
        let add = add_base.slice_step(1, 0..6, 2).unwrap();
        let p = plan(&acc, &add).unwrap();
        assert_eq!(
            p,
            Plan {
                kernel: 2,
                shape: [1, 1, 2, 3],
                acc_strides: [0, 0, 4, 8],
                add_strides: [0, 0, 24, 8],
                count: 6,
                components: 1,
            }
        );
        let mut acc_bytes = acc_base.to_bytes().unwrap();
        let add_bytes = add_base.to_bytes().unwrap();
        walk_f32(&p, &mut acc_bytes, acc.offset(), &add_bytes, add.offset());
        let got: Vec<f32> = acc_bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        // acc[i][j] (= base[j][i]) += add_base[i][2j].
        assert_eq!(got, [1.0, 62.0, 23.0, 84.0, 45.0, 106.0]);
    }

    #[test]
    fn plans_count_components_of_vectors() {
        let a = Array::zeros::<[f32; 3]>(Device::Cpu, &[2, 1, 2, 2]).unwrap();
        let p = plan(&a, &a).unwrap();
        assert_eq!((p.count, p.components), (24, 3));
        assert_eq!(p.shape, [2, 1, 2, 2]);
        assert_eq!(p.acc_strides, [48, 48, 24, 12]);
        let other = Array::zeros::<[f32; 3]>(Device::Cpu, &[2, 1, 2, 1]).unwrap();
        let e = plan(&a, &other).unwrap_err().to_string();
        assert!(
            e.contains("[2, 1, 2, 1]") && e.contains("[2, 1, 2, 2]"),
            "{e}"
        );
    }
}
