"""Warp kernels for the conditional-graph GPU test (tests/tests/gpu_conditional.rs): compiled
ahead of time by build.py into OUT_DIR/conditional. Non-generic, so names carry no hash.
"""

import warp as wp


# The body of a while loop, one thread: logs the counter, counts it down, and clears the
# loop's condition when it reaches zero.
@wp.kernel
def count_down(counter: wp.array(dtype=wp.int32), cond: wp.array(dtype=wp.int32), log: wp.array(dtype=wp.int32)):
    c = counter[0]
    if c > 0 and c <= log.shape[0]:
        log[c - 1] = c
    if c > 0:
        c = c - 1
    counter[0] = c
    if c == 0:
        cond[0] = 0


# x[i] += v: what the branches and the loop body do to show they ran.
@wp.kernel
def add_value(x: wp.array(dtype=wp.int32), v: wp.int32):
    i = wp.tid()
    x[i] = x[i] + v


# flag[0] = counter[0] % 2: which branch an if nested in a while body takes on each pass.
@wp.kernel
def parity(counter: wp.array(dtype=wp.int32), flag: wp.array(dtype=wp.int32)):
    flag[0] = counter[0] % 2
