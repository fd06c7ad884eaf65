"""Warp kernels for the warp-launch tests: one module, compiled ahead of time by build.py.

Every kernel here is non-generic (concrete dtypes) so that ``strip_hash=True`` gives
stable names: ``<key>_cuda_kernel_forward`` / ``<key>_cuda_kernel_backward``.
"""

import warp as wp


@wp.struct
class Params:
    """Passed by value: a float, a vec3 and an int (C layout: 4 + 12 + 4 = 20 bytes)."""

    scale: wp.float32
    offset: wp.vec3
    count: wp.int32


# (1) 1-D saxpy, grid-stride (the default).
@wp.kernel
def saxpy(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + y[i]


# (2) 2-D kernel over (i, j): out[i, j] = 2 * a[i, j] + b[i, j].
@wp.kernel
def add2d(
    a: wp.array2d(dtype=wp.float32),
    b: wp.array2d(dtype=wp.float32),
    out: wp.array2d(dtype=wp.float32),
):
    i, j = wp.tid()
    out[i, j] = 2.0 * a[i, j] + b[i, j]


# (3) 4-D kernel: every thread writes its linear index.
@wp.kernel
def index4d(out: wp.array4d(dtype=wp.int32)):
    i, j, k, l = wp.tid()
    n1 = out.shape[1]
    n2 = out.shape[2]
    n3 = out.shape[3]
    out[i, j, k, l] = ((i * n1 + j) * n2 + k) * n3 + l


# (4) A wp.struct parameter passed by value.
@wp.kernel
def use_struct(p: Params, x: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = p.scale * x[i] + p.offset * wp.float32(p.count)


# (5a) vec3 in / out: normalize and scale.
@wp.kernel
def normalize_scale(v: wp.array(dtype=wp.vec3), s: wp.float32, out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = wp.normalize(v[i]) * s


# (5b) mat33 transform of vec3 points.
@wp.kernel
def transform(m: wp.mat33, t: wp.array(dtype=wp.mat33), v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = m * (t[i] * v[i])


# (6) A lean kernel: one thread per index, no grid-stride loop; refuses max_blocks > 0 on CUDA.
@wp.kernel(grid_stride=False)
def lean_fill(value: wp.int32, out: wp.array2d(dtype=wp.int32)):
    i, j = wp.tid()
    out[i, j] = value + i * 1000 + j


# (7) A two-kernel differentiable chain for a tape test.
@wp.kernel
def chain_sin(x: wp.array(dtype=wp.float32), a: wp.float32, y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * a


@wp.kernel
def chain_loss(y: wp.array(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i])


# (8) Count visits, for max_blocks tests: every index must be visited exactly once.
@wp.kernel
def count_visits(count: wp.array(dtype=wp.int32)):
    i = wp.tid()
    wp.atomic_add(count, i, 1)
