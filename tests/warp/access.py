"""Warp kernels for the launch-shape analysis (warp-launch `source::analyse_accesses`):
which array accesses a launch can prove in bounds from Warp's generated code.

Compiled ahead of time by build.py into OUT_DIR/access (module ``access``); the generated
``wp_access.cu`` is also checked in as ``warp-launch/tests/fixtures/wp_access.cu``.
"""

import warp as wp


@wp.struct
class Holder:
    """A struct carrying an array: accesses through it are not analysed."""

    data: wp.array(dtype=wp.float32)
    scale: wp.float32


@wp.func
def first(a: wp.array(dtype=wp.float32)):
    return a[0]


# Checkable: x[tid] = v (the audit's `fill`).
@wp.kernel
def fill(x: wp.array(dtype=wp.float32), v: wp.float32):
    i = wp.tid()
    x[i] = v


# Checkable: a constant index (last element with a negative constant) and shape reads.
@wp.kernel
def ends(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = x[0] + x[-1] + float(x.shape[0])


# Checkable: the launch's second coordinate indexes the array's first axis.
@wp.kernel
def transpose(a: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[j, i] = a[i, j]


# Not checkable: an index read from data.
@wp.kernel
def gather(idx: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = x[idx[i]]


# Not checkable: arithmetic on the thread index.
@wp.kernel
def shifted(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = x[i + 1]


# Not checkable: a loop over the array.
@wp.kernel
def row_sum(a: wp.array2d(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    s = float(0.0)
    for j in range(a.shape[1]):
        s += a[i, j]
    out[i] = s


# Not checkable: the array is passed to a function.
@wp.kernel
def call_func(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = first(x)


# Not checkable: a view of a row.
@wp.kernel
def row_view(a: wp.array2d(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    row = a[i]
    out[i] = row[0]


# Not checkable: an array inside a struct.
@wp.kernel
def through_struct(h: Holder, out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = h.data[i] * h.scale


# Checkable in the forward kernel (guarded by a shape read, but the analysis does not use guards).
@wp.kernel
def guarded(x: wp.array(dtype=wp.float32), v: wp.float32):
    i = wp.tid()
    if i < x.shape[0]:
        x[i] = v
