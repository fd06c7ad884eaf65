# A 1-D kernel whose block_dim is 1 that reads one array and writes another:
# its backward pass adds into the adjoint of `x`, so a launcher that takes
# Warp's CPU "contiguous" specialization for a strided adjoint (packed
# forward arrays) writes the gradient outside that adjoint's view. Added by
# warp-launch beside the attack modules of ../shared/attacks/warp/.
import warp as wp


@wp.kernel
def contig_copy(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i]


contig_copy.options["block_dim"] = 1
