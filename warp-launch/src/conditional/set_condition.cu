// One of warp-launch's own device kernels (the others are the copy
// adjoint's, autodiff/copy_adjoint.cu): sets the condition of a CUDA graph's
// conditional node (Warp's capture_if / capture_while) from element 0 of an
// int32 array, with the parameter layout of a Warp kernel of one launch
// dimension (launch_bounds_t<1>, then the arguments), so warp-launch declares
// and launches it like any Warp kernel.
//
// set_condition.ptx (embedded by conditional.rs) is this file compiled by the pinned nvcc 13.0.88:
//   nvcc -ptx -arch=compute_75 -O3 set_condition.cu -o set_condition.ptx
// with the header's `.version 9.0` lowered to `.version 8.3` (CUDA 12.3, the
// first with conditional nodes; the body uses nothing newer), checked with
//   ptxas -arch=sm_75 set_condition.ptx -o /dev/null
#include <cuda_runtime.h>

struct bounds1 {  // Warp's launch_bounds_t<1>: 24 bytes
    unsigned int shape[1];
    unsigned long long size;
    unsigned long long coord_mult;
};

struct array_i32 {  // Warp's array_t<int32>: 56 bytes
    int *data;
    int *grad;
    int shape[4];
    int strides[4];
    unsigned short ndim;
    unsigned short flags;
};

// condition = (cond[0] != 0), or its negation when invert != 0.
extern "C" __global__ void warp_launch_set_condition(bounds1 dim, unsigned long long handle,
                                                     array_i32 cond, int invert) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && dim.size > 0) {
        bool set = (cond.data[0] != 0) != (invert != 0);
        cudaGraphSetConditional((cudaGraphConditionalHandle)handle, set ? 1u : 0u);
    }
}
