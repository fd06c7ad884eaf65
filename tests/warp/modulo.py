"""Warp kernels for modulo indices (issue 36, item 5): `x % a.shape[k]` indexing `a` with `x` never
negative is proven inside axis `k` of `a`, and the launch refuses an `a` empty on that axis (C's `%`
by 0 is undefined: SIGFPE on the CPU).

Compiled by warp-build (tests/corpus/build.rs) with its CPU code; the output is checked in under
``warp-launch/tests/fixtures/modulo/`` for the reader's tests and the GPU bundle.
"""

import warp as wp


# Proven: the histogram index, a thread coordinate modulo the array's own extent.
@wp.kernel
def hist(out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i % out.shape[0]] += 1


# Proven: both axes of a 2-d array, each modulo one of its extents.
@wp.kernel
def wrap2d(x: wp.array2d(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i, j = wp.tid()
    wp.atomic_add(out, i, x[j % x.shape[0], i % x.shape[1]])


# Proven: an unsigned value modulo the extent cast to the same unsigned type.
@wp.kernel
def wrap_unsigned(x: wp.array(dtype=wp.float32), n: wp.uint32):
    i = wp.tid()
    x[n % wp.uint32(x.shape[0])] = float(i)


# Proven, and refused for every 1-d array: axis 1 of a 1-d array has extent 0.
@wp.kernel
def wrap_axis1(out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i % out.shape[1]] += 1


# Unproven: a signed parameter may be negative (C's % keeps the dividend's sign).
@wp.kernel
def wrap_signed(out: wp.array(dtype=wp.int32), n: wp.int32):
    i = wp.tid()
    out[n % out.shape[0]] += i


# Unproven: the dividend is computed (i - 5 is negative for the first threads).
@wp.kernel
def wrap_shifted(out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[(i - 5) % out.shape[0]] += 1


# Unproven: the modulo is another array's extent.
@wp.kernel
def wrap_other(out: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i % x.shape[0]] += 1


# Unproven: a narrow unsigned cast can truncate the extent to 0 (256 as uint8).
@wp.kernel
def wrap_uint8(out: wp.array(dtype=wp.int32), n: wp.uint8):
    i = wp.tid()
    out[n % wp.uint8(out.shape[0])] += i
