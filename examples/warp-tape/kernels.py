"""The Warp kernels of the warp-tape example: y = sin(x) * a, then loss = sum(y * y).

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
