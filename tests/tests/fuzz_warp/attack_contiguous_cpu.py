# Kept by the Warp fuzzer: ../shared/attacks/warp/contiguous_cpu.py (issue 36), replayed first with
# the launches of attack_contiguous_cpu.case.
# A 1-D kernel whose block_dim is 1. For the CPU, Warp then also emits its
# "contiguous" specialization, which assumes a packed array (it replaces the
# array's stride by the element size). Warp's own CPU launcher takes that
# path only when the stride already equals the element size; a launcher that
# takes it whenever the domain is linear writes a reversed or strided view as
# if it were packed: outside the view.
import warp as wp


@wp.kernel
def contig_fill(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = 7.0


contig_fill.options["block_dim"] = 1
