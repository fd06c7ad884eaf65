// Test kernels for tests/tests/gpu_cluster.rs: thread-block clusters and
// programmatic dependent launch (compute capability 9.0). Built by
// `cargo xtask gpu-bundle` with nvcc 13.0 into PTX and sm_90 cubin.
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// What one block saw of its cluster, six words per block (the block's
// linear index in the grid, x fastest):
// [rank in the cluster, blocks in the cluster, cluster.x, cluster.y,
//  cluster.z, the value the next block of the cluster wrote into its own
//  shared memory (distributed shared memory)]. The value is rank * 10 + 1.
// Read from the PTX special registers so the launch's cluster is what is
// checked. Writes out[block] only: bound it by the grid's blocks.
__device__ void report_cluster(unsigned int (*out)[6]) {
    __shared__ unsigned int mine;
    cg::cluster_group cluster = cg::this_cluster();
    unsigned int rank, blocks, cx, cy, cz;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(blocks));
    asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(cx));
    asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(cy));
    asm volatile("mov.u32 %0, %%cluster_nctaid.z;" : "=r"(cz));
    if (threadIdx.x == 0) mine = rank * 10 + 1;
    cluster.sync();
    unsigned int next = *cluster.map_shared_rank(&mine, (rank + 1) % blocks);
    // No block may leave while another still reads its shared memory.
    cluster.sync();
    if (threadIdx.x == 0) {
        unsigned int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        out[b][0] = rank;
        out[b][1] = blocks;
        out[b][2] = cx;
        out[b][3] = cy;
        out[b][4] = cz;
        out[b][5] = next;
    }
}

extern "C" __global__ void cluster_id(unsigned int (*out)[6]) { report_cluster(out); }

// The same, compiled with clusters of 2x1x1 blocks.
extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_fixed(unsigned int (*out)[6]) {
    report_cluster(out);
}

// The first kernel of a programmatic pair: lets its dependent start at once
// (griddepcontrol.launch_dependents), then spins ~`spin` clocks and writes
// data[i] = 3 * i + 1 for i < n. Block 0 records when it ends (globaltimer,
// ns) in end[0].
extern "C" __global__ void pdl_primary(unsigned int *data, unsigned int n,
                                       unsigned long long spin,
                                       unsigned long long *end) {
    asm volatile("griddepcontrol.launch_dependents;");
    long long t0 = clock64();
    while ((unsigned long long)(clock64() - t0) < spin) {
    }
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        data[i] = 3 * i + 1;
    }
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        end[0] = t;
    }
}

// The second kernel: block 0 records when it starts in start[0] (before the
// wait: the first kernel does not use `start`), then every block waits for the
// first kernel (griddepcontrol.wait, in every block, before reading), then
// writes out[i] = data[i] + 1.
extern "C" __global__ void pdl_secondary(const unsigned int *data, unsigned int *out,
                                         unsigned int n, unsigned long long *start) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        start[0] = t;
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = data[i] + 1;
    }
}
