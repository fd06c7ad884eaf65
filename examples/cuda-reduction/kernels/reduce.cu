// A sum over a whole array in one launch, in the manner of NVIDIA's
// reductionMultiBlockCG sample (written anew for this example): every block
// folds a grid-stride slice of the input into one partial sum with warp
// reductions, the grid synchronises, and block 0 folds the partial sums.
//
// The grid synchronisation makes this a cooperative kernel: its blocks must
// all be resident at once, which only a cooperative launch guarantees.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

#ifndef REDUCE_BLOCK
#define REDUCE_BLOCK 256
#endif

// The sum of one block's values, in thread 0 (others get an unspecified
// value). `scratch` holds one float per warp.
__device__ float block_sum(cg::thread_block block, float value, float* scratch) {
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    value = cg::reduce(warp, value, cg::plus<float>());
    if (warp.thread_rank() == 0) {
        scratch[warp.meta_group_rank()] = value;
    }
    block.sync();
    float total = 0.0f;
    if (warp.meta_group_rank() == 0) {
        unsigned int warps = warp.meta_group_size();
        total = warp.thread_rank() < warps ? scratch[warp.thread_rank()] : 0.0f;
        total = cg::reduce(warp, total, cg::plus<float>());
    }
    return total;
}

// out[0] = x[0] + ... + x[n-1]; `partial` holds one float per block.
// Launch with blocks of REDUCE_BLOCK threads, cooperatively.
extern "C" __global__ void __launch_bounds__(REDUCE_BLOCK)
reduce_sum(const float* x, float* partial, float* out, unsigned int n) {
    __shared__ float scratch[REDUCE_BLOCK / 32];
    cg::grid_group grid = cg::this_grid();
    cg::thread_block block = cg::this_thread_block();

    float mine = 0.0f;
    for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) {
        mine += x[i];
    }
    float sum = block_sum(block, mine, scratch);
    if (block.thread_rank() == 0) {
        partial[grid.block_rank()] = sum;
    }

    grid.sync();

    if (grid.block_rank() == 0) {
        float folded = 0.0f;
        for (unsigned int b = block.thread_rank(); b < grid.num_blocks(); b += block.size()) {
            folded += partial[b];
        }
        block.sync();
        float total = block_sum(block, folded, scratch);
        if (block.thread_rank() == 0) {
            out[0] = total;
        }
    }
}
