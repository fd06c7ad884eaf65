//! CUDA C kernels compiled in `build.rs` by `warp_build::CudaBuild` (NVRTC
//! from pinned wheels, no CUDA toolkit), with the typed launchers it
//! generates, and their CPU references.
//!
//! - [`kernels::reduce`]: `reduce_sum`, a sum over a whole array in one
//!   cooperative launch (blocks fold their slices, the grid synchronises,
//!   block 0 folds the partial sums);
//! - [`kernels::histogram`]: `histogram<64>` and `histogram<256>` (template
//!   instances by name expression), and `count_at_least` (a CUB block
//!   reduction);
//! - [`kernels::axpy`]: `axpy` and `gather`, written against
//!   `warp_launch.h`: `axpy`'s accesses are proven, so its launcher is safe
//!   and checks them on every launch; `gather` indexes with data, so its
//!   launcher is `unsafe` ([`proven`]).

/// The generated images and launchers (`$OUT_DIR/cuda/kernels.rs`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod kernels {
    include!(concat!(env!("OUT_DIR"), "/cuda/kernels.rs"));
}

pub mod proven;

use cuda_api::{CudaResult, Extent, Library, TypedKernel};

/// The block size `reduce_sum` is compiled for (`REDUCE_BLOCK`).
pub const REDUCE_BLOCK: u32 = 256;

/// `reduce_sum`, declared with its bounds: `x` holds `n` elements,
/// `partial` one per block, `out` one; blocks of [`REDUCE_BLOCK`] threads.
///
/// # Errors
///
/// The library has no such kernel, or a bound is refused.
pub fn reduce_sum(library: &Library) -> CudaResult<kernels::reduce::ReduceSum> {
    use kernels::reduce::ReduceSum as K;
    // SAFETY: reduce_sum reads x[i] for i < n (a grid-stride loop), writes
    // partial[b] for each block b and reads it back after the grid barrier,
    // writes out[0], and keeps one float per warp of a REDUCE_BLOCK-thread
    // block in static shared memory.
    unsafe {
        K::declare(library, |k: TypedKernel<_>| {
            k.bound(K::X, Extent::Param(K::N))?
                .bound(K::PARTIAL, Extent::Blocks)?
                .bound(K::OUT, Extent::Elements(1))?
                .fixed_block(REDUCE_BLOCK)
        })
    }
}

/// `histogram<BINS>` (64 or 256 bins), declared with its bounds: `data`
/// holds `n` bytes, `bins` the instance's bins.
///
/// # Errors
///
/// As for [`reduce_sum`].
pub fn histogram64(library: &Library) -> CudaResult<kernels::histogram::Histogram64> {
    use kernels::histogram::Histogram64 as K;
    // SAFETY: the kernel reads data[i] for i < n and adds into bins[b] for
    // b < 64; its shared copy has 64 bins, any block size.
    unsafe {
        K::declare(library, |k: TypedKernel<_>| {
            k.bound(K::DATA, Extent::Param(K::N))?
                .bound(K::BINS, Extent::Elements(64))
        })
    }
}

/// `histogram<256>`, as [`histogram64`] with 256 bins.
///
/// # Errors
///
/// As for [`reduce_sum`].
pub fn histogram256(library: &Library) -> CudaResult<kernels::histogram::Histogram256> {
    use kernels::histogram::Histogram256 as K;
    // SAFETY: as histogram64, with 256 bins.
    unsafe {
        K::declare(library, |k: TypedKernel<_>| {
            k.bound(K::DATA, Extent::Param(K::N))?
                .bound(K::BINS, Extent::Elements(256))
        })
    }
}

/// The CPU reference of `reduce_sum`, summed in `f64`.
pub fn cpu_sum(x: &[f32]) -> f64 {
    x.iter().map(|&v| f64::from(v)).sum()
}

/// The CPU reference of `histogram<bins>`: byte `v` counts in bin
/// `v * bins / 256`.
pub fn cpu_histogram(data: &[u8], bins: usize) -> Vec<u32> {
    let mut out = vec![0u32; bins];
    for &v in data {
        out[usize::from(v) * bins / 256] += 1;
    }
    out
}

/// Bytes of a fixed pseudo-random sequence (a 32-bit LCG), for tests.
pub fn test_bytes(n: usize, seed: u32) -> Vec<u8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 24) as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references() {
        assert_eq!(cpu_sum(&[1.0, 2.5, -0.5]), 3.0);
        let h = cpu_histogram(&[0, 3, 4, 255, 128], 64);
        assert_eq!((h[0], h[1], h[32], h[63]), (2, 1, 1, 1));
        assert_eq!(h.iter().sum::<u32>(), 5);
    }

    #[test]
    fn the_build_compiled_every_kernel_and_marked_the_grid_barrier() {
        use kernels::{histogram, reduce};
        // Read from the compiled PTX by the build step: a constant, so a
        // wrong verdict fails to compile this test.
        const {
            assert!(reduce::ReduceSum::GRID_SYNC, "reduce_sum calls grid.sync()");
            assert!(!histogram::Histogram64::GRID_SYNC);
            assert!(!histogram::CountAtLeast::GRID_SYNC);
        }
        assert_eq!(histogram::Histogram64::SYMBOL, "_Z9histogramILj64EEvPKhjPj");
        let files: Vec<&str> = reduce::IMAGES.images().iter().map(|(f, _)| *f).collect();
        assert_eq!(
            files,
            [
                "reduce.sm_80.cubin",
                "reduce.sm_90.cubin",
                "reduce.compute_80.ptx"
            ]
        );
        // CUB of CUDA 12.0 needs a C++ library NVRTC 12.0 lacks: cubins only.
        let files: Vec<&str> = histogram::IMAGES.images().iter().map(|(f, _)| *f).collect();
        assert_eq!(files, ["histogram.sm_80.cubin", "histogram.sm_90.cubin"]);
        // The image choice per device, without a GPU: an H100 gets its
        // cubin, an RTX 4090 (8.9) the sm_80 one, a 12.0 GPU the PTX.
        use cuda_api::ComputeCapability as Cc;
        assert_eq!(
            reduce::IMAGES.choose_for(Cc::new(9, 0), 13000).unwrap(),
            "reduce.sm_90.cubin"
        );
        assert_eq!(
            reduce::IMAGES.choose_for(Cc::new(8, 9), 13000).unwrap(),
            "reduce.sm_80.cubin"
        );
        assert_eq!(
            reduce::IMAGES.choose_for(Cc::new(12, 0), 13000).unwrap(),
            "reduce.compute_80.ptx"
        );
        assert!(histogram::IMAGES.choose_for(Cc::new(12, 0), 13000).is_err());
    }

    #[test]
    fn the_warp_launch_kernels_got_their_verdicts_from_the_build() {
        use kernels::axpy;
        // Constants the build wrote: `axpy` is proven (safe `launch`),
        // `gather` is not (only `unsafe` `launch_unchecked`).
        const {
            assert!(axpy::Axpy::PROVEN);
            assert!(!axpy::Gather::PROVEN);
        }
        let files: Vec<&str> = axpy::IMAGES.images().iter().map(|(f, _)| *f).collect();
        assert_eq!(
            files,
            [
                "axpy.sm_80.cubin",
                "axpy.sm_90.cubin",
                "axpy.compute_80.ptx"
            ]
        );
        // The embedded text declares the same kernels at run time, without a GPU.
        let specs =
            warp_launch::CudaModule::declarations(axpy::MODULE.name(), axpy::MODULE.source())
                .unwrap();
        let verdicts: Vec<(&str, bool)> = specs
            .iter()
            .map(|s| {
                let proven = matches!(
                    s.accesses(warp_launch::Pass::Forward),
                    warp_launch::Accesses::Checked(_)
                );
                (s.name(), proven)
            })
            .collect();
        assert_eq!(verdicts, [("axpy", true), ("gather", false)]);
        assert_eq!(axpy::MODULE.warning(), None);
        // Without a GPU the load is refused, not a panic.
        assert!(axpy::load(warp_launch::Device::Cpu).is_err());
    }
}

/// What [`run_on_gpu`] found.
#[derive(Debug)]
pub struct GpuReport {
    /// The image each file's load chose.
    pub images: Vec<&'static str>,
    /// The GPU's sum and the CPU's.
    pub sum: (f32, f64),
    /// The largest cooperative grid of `reduce_sum` on this device.
    pub max_grid: u32,
    /// The GPU's 64- and 256-bin histograms and the CPU's.
    pub histograms: [(Vec<u32>, Vec<u32>); 2],
    /// The refusal of a cooperative grid one block past the co-resident limit.
    pub too_large: String,
    /// The refusal of a launch whose `n` is past the buffer.
    pub past_bound: String,
}

/// Runs every kernel on GPU `ordinal` against its CPU reference, and two
/// launches the declared bounds refuse.
///
/// # Errors
///
/// Any CUDA failure on the way, or a refused launch that was not refused.
pub fn run_on_gpu(ordinal: i32) -> CudaResult<GpuReport> {
    use cuda_api::{Context, CudaDevice, DeviceBuffer, LaunchConfig, Stream};
    let device = CudaDevice::get(ordinal)?;
    let ctx = Context::primary(&device)?;
    let stream = Stream::new(&ctx)?;
    let (reduce_lib, reduce_image) = kernels::reduce::load(&device)?;
    let (hist_lib, hist_image) = kernels::histogram::load(&device)?;

    let x: Vec<f32> = test_bytes(1 << 20, 7)
        .iter()
        .map(|&b| f32::from(b) / 255.0)
        .collect();
    let n = x.len() as u32;
    let reduce = reduce_sum(&reduce_lib)?;
    let max_grid = reduce
        .function()
        .max_cooperative_grid(&ctx, REDUCE_BLOCK, 0)?;
    let grid = max_grid.min(n.div_ceil(REDUCE_BLOCK)).max(1);
    let d_x = DeviceBuffer::from_slice(&ctx, &x)?;
    let mut partial = DeviceBuffer::<f32>::zeroed(&ctx, max_grid as usize + 1)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&ctx, 1)?;
    reduce.launch_cooperative(
        &stream,
        LaunchConfig::new(grid, REDUCE_BLOCK),
        &d_x,
        &mut partial,
        &mut out,
        n,
    )?;
    stream.synchronize()?;
    let sum = (out.to_vec()?[0], cpu_sum(&x));

    let too_large = reduce
        .launch_cooperative(
            &stream,
            LaunchConfig::new(max_grid + 1, REDUCE_BLOCK),
            &d_x,
            &mut partial,
            &mut out,
            n,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| "NOT REFUSED".into());
    let past_bound = reduce
        .launch_cooperative(
            &stream,
            LaunchConfig::new(grid, REDUCE_BLOCK),
            &d_x,
            &mut partial,
            &mut out,
            n + 1,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| "NOT REFUSED".into());

    let data = test_bytes(3 << 20, 11);
    let d_data = DeviceBuffer::from_slice(&ctx, &data)?;
    let mut b64 = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
    let mut b256 = DeviceBuffer::<u32>::zeroed(&ctx, 256)?;
    let cfg = LaunchConfig::new(120, 256);
    histogram64(&hist_lib)?.launch(&stream, cfg, &d_data, data.len() as u32, &mut b64)?;
    histogram256(&hist_lib)?.launch(&stream, cfg, &d_data, data.len() as u32, &mut b256)?;
    stream.synchronize()?;
    Ok(GpuReport {
        images: vec![reduce_image, hist_image],
        sum,
        max_grid,
        histograms: [
            (b64.to_vec()?, cpu_histogram(&data, 64)),
            (b256.to_vec()?, cpu_histogram(&data, 256)),
        ],
        too_large,
        past_bound,
    })
}
