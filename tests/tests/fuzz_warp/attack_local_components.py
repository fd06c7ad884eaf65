# Kept by the Warp fuzzer: ../shared/attacks/warp/local_components.py (issue 36), replayed first with
# the launches of attack_local_components.case.
# Warp kernels whose generated code indexes a local vector or a shape with a
# kernel parameter. Warp checks these indices only in debug builds (NDEBUG
# unset); release builds, as warp-build makes them, index the thread's stack.
import warp as wp


@wp.kernel
def vec_local_write(out: wp.array(dtype=wp.vec3), k: int, val: float):
    i = wp.tid()
    v = wp.vec3(1.0, 2.0, 3.0)
    v[k] = val  # k = 2**28: a write far outside v
    out[i] = v


@wp.kernel
def shape_index(x: wp.array(dtype=float), out: wp.array(dtype=int), k: int):
    i = wp.tid()
    out[i] = x.shape[k]  # k = 5: reads past the 4 dims of the shape
