// Test kernels for the GPU end-to-end tests (tests/tests/gpu_api.rs).
// Built by `cargo xtask gpu-bundle` with nvcc 13.0 into PTX (ISA 9.0) and sm_90 cubin.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// y = a * x + y
extern "C" __global__ void saxpy(float a, const float *x, float *y, unsigned int n) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// Sums `in` with a grid-wide barrier: each block writes a partial sum, the
// whole grid synchronises, then block 0 adds the partials into out[0].
// Launch cooperatively with 256 threads per block.
extern "C" __global__ void coop_sum(const unsigned int *in, unsigned long long *partial,
                                    unsigned long long *out, unsigned int n) {
    cg::grid_group grid = cg::this_grid();
    __shared__ unsigned long long acc[256];
    unsigned long long mine = 0;
    for (unsigned int i = grid.thread_rank(); i < n; i += grid.size()) {
        mine += in[i];
    }
    acc[threadIdx.x] = mine;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) acc[threadIdx.x] += acc[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = acc[0];
    grid.sync();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long total = 0;
        for (unsigned int b = 0; b < gridDim.x; ++b) total += partial[b];
        out[0] = total;
    }
}

// Uses dynamic shared memory: fills it and writes its byte count.
extern "C" __global__ void smem_user(unsigned int *out) {
    extern __shared__ unsigned char buf[];
    buf[threadIdx.x] = 1;
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}

// Writes through a null pointer: an illegal address, a sticky error.
extern "C" __global__ void fault(int *p) {
    p[threadIdx.x] = 42;
}

// Increments every element (launched through a CUkernel from a library).
extern "C" __global__ void add_one(int *data, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] += 1;
}
