//! CUDA C kernels compiled in `build.rs` by `warp_build::CudaBuild` (NVRTC
//! from pinned wheels, no CUDA toolkit), with the typed launchers it
//! generates, and their CPU references.
//!
//! - [`kernels::reduce`]: `reduce_sum`, a sum over a whole array in one
//!   cooperative launch (blocks fold their slices, the grid synchronises,
//!   block 0 folds the partial sums);
//! - [`kernels::histogram`]: `histogram<64>` and `histogram<256>` (template
//!   instances by name expression), and `count_at_least` (a CUB block
//!   reduction).

/// The generated images and launchers (`$OUT_DIR/cuda/kernels.rs`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod kernels {
    include!(concat!(env!("OUT_DIR"), "/cuda/kernels.rs"));
}

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
        assert!(reduce::ReduceSum::GRID_SYNC, "reduce_sum calls grid.sync()");
        assert!(!histogram::Histogram64::GRID_SYNC);
        assert!(!histogram::CountAtLeast::GRID_SYNC);
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
}
