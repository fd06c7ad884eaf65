// Kernels written against warp_launch.h (Warp's kernel ABI): CudaBuild
// reads them as warp-launch's CudaModule does, so a kernel whose array
// accesses the reader proves gets a safe launcher, checked on every launch.
#include "warp_launch.h"

// y[i] = a * x[i] + y[i]: every index is the thread's coordinate, which a
// launch checks against both arrays' extents.
extern "C" __global__ void axpy(wl::launch_bounds_t<1> dim, wl::array_t<float> x,
                                wl::array_t<float> y, float a) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        wl::index(y, c.i) = a * wl::index(x, c.i) + wl::index(y, c.i);
    }
}

// out[i] = x[indices[i]]: an index read from data, which no launch can
// check, so its launcher is unsafe.
extern "C" __global__ void gather(wl::launch_bounds_t<1> dim, wl::array_t<float> x,
                                  wl::array_t<int> indices, wl::array_t<float> out) {
    WL_GRID_STRIDE_LOOP(idx, dim) {
        wl::coord_t c = wl::coord(idx, dim);
        wl::index(out, c.i) = wl::index(x, wl::index(indices, c.i));
    }
}
