// Byte histograms in the manner of NVIDIA's histogram64/histogram256
// samples (written anew for this example): each block counts into its own
// copy of the bins in shared memory, then adds its copy into the global
// bins. One template, instantiated for 64 and 256 bins through NVRTC name
// expressions (a byte `v` falls into bin `v * BINS / 256`).
#include <cub/block/block_reduce.cuh>

template <unsigned int BINS>
__global__ void histogram(const unsigned char* data, unsigned int n, unsigned int* bins) {
    __shared__ unsigned int local[BINS];
    for (unsigned int b = threadIdx.x; b < BINS; b += blockDim.x) {
        local[b] = 0;
    }
    __syncthreads();
    unsigned int stride = blockDim.x * gridDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicAdd(&local[data[i] * BINS / 256u], 1u);
    }
    __syncthreads();
    for (unsigned int b = threadIdx.x; b < BINS; b += blockDim.x) {
        if (local[b] != 0) {
            atomicAdd(&bins[b], local[b]);
        }
    }
}

// The number of bytes of `data` at or above `threshold`, added into
// `count[0]`: a block-wide CUB reduction, then one atomic per block.
extern "C" __global__ void __launch_bounds__(256)
count_at_least(const unsigned char* data, unsigned int n, unsigned char threshold,
               unsigned long long* count) {
    using Reduce = cub::BlockReduce<unsigned int, 256>;
    __shared__ typename Reduce::TempStorage storage;
    unsigned int mine = 0;
    unsigned int stride = blockDim.x * gridDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        mine += data[i] >= threshold ? 1u : 0u;
    }
    unsigned int total = Reduce(storage).Sum(mine);
    if (threadIdx.x == 0) {
        atomicAdd(count, static_cast<unsigned long long>(total));
    }
}
