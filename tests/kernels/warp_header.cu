// CUDA C kernels written against warp-launch's header (warp_launch.h), with
// Warp's kernel ABI: launch bounds first, arrays as wl::array_t<T> by value.
// Built by `cargo xtask gpu-bundle` (nvcc 13.0, -I warp-launch/include).
#include <cooperative_groups.h>

#include "warp_launch.h"

// a[i, j] *= s over a 2-D domain (grid-stride).
extern "C" __global__ void wl_scale2d(wl::launch_bounds_t<2> dim, wl::array_t<wl::float32> a, wl::float32 s) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        wl::index(a, c.i, c.j) *= s;
    }
}

// out[i, j, k, l] = the linear index of (i, j, k, l) (grid-stride).
extern "C" __global__ void wl_fill4d(wl::launch_bounds_t<4> dim, wl::array_t<wl::int32> out) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        int lin = ((c.i * int(dim.shape[1]) + c.j) * int(dim.shape[2]) + c.k) * int(dim.shape[3]) + c.l;
        wl::index(out, c.i, c.j, c.k, c.l) = lin;
    }
}

// v[i] += d, one thread per index (lean: no loop).
extern "C" __global__ void wl_lean_add(wl::launch_bounds_t<1> dim, wl::array_t<wl::vec3f> v, wl::vec3f d) {
    size_t idx = wl::lean_index();
    if (idx >= dim.size) return;
    wl::coord_t c = wl::coord(idx, dim);
    wl::vec3f& e = wl::index(v, c.i);
    for (int k = 0; k < 3; ++k) e.c[k] += d.c[k];
}

// out[0] = sum of x, in one cooperative launch: each block reduces its
// grid-stride share into partial[block], the grid synchronises, and block 0
// adds the partial sums. partial needs one element per block.
extern "C" __global__ void wl_grid_sum(wl::launch_bounds_t<1> dim, wl::array_t<wl::float32> x,
                                       wl::array_t<wl::float32> partial, wl::array_t<wl::float32> out) {
    namespace cg = cooperative_groups;
    __shared__ float block_sum;
    if (threadIdx.x == 0) block_sum = 0.0f;
    __syncthreads();
    float mine = 0.0f;
    WL_GRID_STRIDE_LOOP(idx, dim) { mine += wl::index(x, int(idx)); }
    atomicAdd(&block_sum, mine);
    __syncthreads();
    if (threadIdx.x == 0) wl::index(partial, int(blockIdx.x)) = block_sum;
    cg::this_grid().sync();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float total = 0.0f;
        for (unsigned b = 0; b < gridDim.x; ++b) total += wl::index(partial, int(b));
        wl::index(out, 0) = total;
    }
}

// Waits about `cycles` clock cycles, then writes out[i] = i + 1 (grid-stride):
// a launch still running when the host moves on (ordering tests).
extern "C" __global__ void wl_spin_fill(wl::launch_bounds_t<1> dim, wl::array_t<wl::int32> out, wl::int64 cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        wl::index(out, c.i) = c.i + 1;
    }
}
