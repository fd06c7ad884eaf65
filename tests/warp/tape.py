"""Warp kernels for the tape-parity tests: one module, compiled ahead of time by build.py
(into OUT_DIR/tape) and by warp-corpus's build script (CPU code linked). build.py runs
each program of ``tape_parity`` with Warp's own tape on its CPU device; the Rust tests
(tests/src/warp_tape.rs) run the same programs with warp-launch's tape.

Non-generic kernels only, so ``strip_hash=True`` gives stable names.
"""

import warp as wp


# y = sin(x) * a, then loss += sum(y * y): the differentiable chain of the tape cases.
@wp.kernel
def tape_sin(x: wp.array(dtype=wp.float32), a: wp.float32, y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * a


@wp.kernel
def tape_loss(y: wp.array(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i])


# Structs nested two deep holding arrays, for the tape's struct adjoints: Warp gives every
# array inside (at any depth) its gradient array as the adjoint.
@wp.struct
class Inner:
    x: wp.array(dtype=wp.float32)
    w: wp.float32


@wp.struct
class Outer:
    inner: Inner
    y: wp.array(dtype=wp.float32)


@wp.kernel
def nested_square(o: Outer, out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = o.inner.w * o.inner.x[i] * o.inner.x[i] + o.y[i]
