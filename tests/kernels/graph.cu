// Test kernels for the CUDA graph tests (tests/tests/gpu_graph.rs).
// Built by `cargo xtask gpu-bundle` with nvcc 13.0 into PTX and sm_90 cubin.
#include <cuda_runtime.h>

// data[i] += step for i < n.
extern "C" __global__ void add_step(int *data, int step, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] += step;
}

// The body of a while node: one thread appends *counter to log, counts it
// down, and keeps the loop going while it is above zero.
extern "C" __global__ void count_down(cudaGraphConditionalHandle handle, unsigned int *counter,
                                      unsigned int *log, unsigned int len) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned int c = *counter;
        if (c > 0 && c <= len) log[c - 1] = c;
        if (c > 0) c -= 1;
        *counter = c;
        cudaGraphSetConditional(handle, c > 0 ? 1u : 0u);
    }
}

// Sets an if node's condition from a device flag.
extern "C" __global__ void set_condition(cudaGraphConditionalHandle handle, const int *flag) {
    if (blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(handle, *flag != 0 ? 1u : 0u);
}
