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
extern "C" __global__ void __launch_bounds__(256) coop_sum(const unsigned int *in, unsigned long long *partial,
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

// Writes each of its 15 scalar parameters (mixed sizes, so offsets need
// padding) into out[0..15] as doubles: a 16-parameter kernel.
extern "C" __global__ void params16(double *out, signed char a1, short a2, int a3, long long a4, float a5, double a6, unsigned char a7, unsigned short a8, unsigned int a9, unsigned long long a10, signed char a11, short a12, int a13, long long a14, float a15) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    out[0] = (double)a1;
    out[1] = (double)a2;
    out[2] = (double)a3;
    out[3] = (double)a4;
    out[4] = (double)a5;
    out[5] = (double)a6;
    out[6] = (double)a7;
    out[7] = (double)a8;
    out[8] = (double)a9;
    out[9] = (double)a10;
    out[10] = (double)a11;
    out[11] = (double)a12;
    out[12] = (double)a13;
    out[13] = (double)a14;
    out[14] = (double)a15;
}

// Writes each of its 39 scalar parameters (mixed sizes, so offsets need
// padding) into out[0..39] as doubles: a 40-parameter kernel.
extern "C" __global__ void params40(double *out, signed char a1, short a2, int a3, long long a4, float a5, double a6, unsigned char a7, unsigned short a8, unsigned int a9, unsigned long long a10, signed char a11, short a12, int a13, long long a14, float a15, double a16, unsigned char a17, unsigned short a18, unsigned int a19, unsigned long long a20, signed char a21, short a22, int a23, long long a24, float a25, double a26, unsigned char a27, unsigned short a28, unsigned int a29, unsigned long long a30, signed char a31, short a32, int a33, long long a34, float a35, double a36, unsigned char a37, unsigned short a38, unsigned int a39) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    out[0] = (double)a1;
    out[1] = (double)a2;
    out[2] = (double)a3;
    out[3] = (double)a4;
    out[4] = (double)a5;
    out[5] = (double)a6;
    out[6] = (double)a7;
    out[7] = (double)a8;
    out[8] = (double)a9;
    out[9] = (double)a10;
    out[10] = (double)a11;
    out[11] = (double)a12;
    out[12] = (double)a13;
    out[13] = (double)a14;
    out[14] = (double)a15;
    out[15] = (double)a16;
    out[16] = (double)a17;
    out[17] = (double)a18;
    out[18] = (double)a19;
    out[19] = (double)a20;
    out[20] = (double)a21;
    out[21] = (double)a22;
    out[22] = (double)a23;
    out[23] = (double)a24;
    out[24] = (double)a25;
    out[25] = (double)a26;
    out[26] = (double)a27;
    out[27] = (double)a28;
    out[28] = (double)a29;
    out[29] = (double)a30;
    out[30] = (double)a31;
    out[31] = (double)a32;
    out[32] = (double)a33;
    out[33] = (double)a34;
    out[34] = (double)a35;
    out[35] = (double)a36;
    out[36] = (double)a37;
    out[37] = (double)a38;
    out[38] = (double)a39;
}

// A 16-byte-aligned struct parameter after an int: the driver puts it at
// offset 16, so a Rust declaration with 4-byte alignment is refused.
struct __align__(16) vec4_t { float x, y, z, w; };
extern "C" __global__ void aligned_struct(int n, vec4_t v, float *out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = v.x * n; out[1] = v.y * n; out[2] = v.z * n; out[3] = v.w * n;
    }
}

// At most 128 threads per block: 256 is impossible at any grid size.
extern "C" __global__ void __launch_bounds__(128) bounded128(unsigned int *out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// Waits about `cycles` clock cycles, then writes out[i] = i + 1 for i < n
// (grid-stride): a kernel that is still running when the host moves on.
extern "C" __global__ void spin_write(unsigned int *out, unsigned int n, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = i + 1;
    }
}

// The launch facts real CUDA C kernels trust, each stated in the Rust
// declaration (tests/tests/gpu_args.rs) rather than in a comment:

// out[i] = row_ptr[i + 1] - row_ptr[i] for i < n: a CSR row pointer holds
// n + 1 entries.
extern "C" __global__ void csr_row_lengths(const int *row_ptr, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = row_ptr[i + 1] - row_ptr[i];
}

// partial[blockIdx.x * k + j] = blockIdx.x for j < k: k values per block.
extern "C" __global__ void per_block(unsigned int *partial, unsigned int k) {
    for (unsigned int j = threadIdx.x; j < k; j += blockDim.x) {
        partial[blockIdx.x * k + j] = blockIdx.x;
    }
}

// Transposes each 1024-element tile of `in` into `out` through a padded
// (blockDim.x + 1) x blockDim.y tile of floats in dynamic shared memory, and
// counts the tile in tiles_done[blockIdx.x], a table of 64 entries. Written
// for blocks of exactly 32 x 32 threads and at most 64 blocks.
__device__ unsigned int tiles_done[64];
extern "C" __global__ void tile_transpose(const float *in, float *out) {
    extern __shared__ float tile[];
    unsigned int tx = threadIdx.x, ty = threadIdx.y, w = blockDim.x + 1;
    unsigned int base = blockIdx.x * 1024;
    tile[ty * w + tx] = in[base + ty * 32 + tx];
    __syncthreads();
    out[base + ty * 32 + tx] = tile[tx * w + ty];
    if (tx == 0 && ty == 0) atomicAdd(&tiles_done[blockIdx.x], 1u);
}

// v[i] *= 2 for i < n, over float4 values: a float buffer viewed as a
// quarter as many float4.
extern "C" __global__ void scale4(float4 *v, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float4 a = v[i];
        v[i] = make_float4(2.0f * a.x, 2.0f * a.y, 2.0f * a.z, 2.0f * a.w);
    }
}
