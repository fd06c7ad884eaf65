"""The Warp kernels of the warp-tape example: y = sin(x) * a, then loss = sum(y * y);
on a 2-D grid, v = a * u * u + u, then loss2 = sum(v).

Compiled ahead of time by build.rs (warp-launch's `build` feature runs Warp's
own compiler); the Rust program runs them forward and, through the tape, backward.
"""

import warp as wp


@wp.kernel
def scaled_sin(x: wp.array(dtype=wp.float32), a: wp.float32, y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * a


@wp.kernel
def sum_squares(y: wp.array(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i])


@wp.kernel
def square_plus(u: wp.array2d(dtype=wp.float32), a: wp.float32, v: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    v[i, j] = a * u[i, j] * u[i, j] + u[i, j]


@wp.kernel
def sum2d(v: wp.array2d(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):
    i, j = wp.tid()
    wp.atomic_add(loss, 0, v[i, j])
