"""Warp kernels reading and writing arrays held in a `wp.struct` (issue 36, item 5): accesses
through a struct parameter's arrays are proven as the held arrays' own (`p.a`, `p.b`), and each
launch checks them against the arrays the struct value holds.

Compiled by warp-build (tests/corpus/build.rs) with its CPU code; Warp's output is checked in as
``warp-launch/tests/fixtures/wp_held.{cu,meta,sm90.cubin,facts.json}`` for the reader's tests, the
typed launchers (``tests/src/launchers/held.rs``) and the GPU bundle.
"""

import warp as wp


@wp.struct
class Pair:
    """Two held arrays and a value."""

    a: wp.array(dtype=wp.float32)
    b: wp.array2d(dtype=wp.float32)
    s: wp.float32


@wp.struct
class Outer:
    """A struct holding a struct that holds arrays."""

    inner: Pair
    k: wp.int32


@wp.func
def first_of(p: Pair):
    return p.a[0]


# Proven: reads p.a[i], writes p.b[i, j] and out[i, j].
@wp.kernel
def scale_pair(p: Pair, out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    p.b[i, j] = p.a[i] * p.s
    out[i, j] = p.b[i, j] + 1.0


# Proven: the histogram index into a held array, modulo its own extent (Warp reads the shape
# through the field's pointer, `&(var_2->shape)`).
@wp.kernel
def held_hist(p: Pair):
    i = wp.tid()
    p.a[i % p.a.shape[0]] += 1.0


# Unproven: the struct is passed to a function (which indexes its array).
@wp.kernel
def pass_struct(p: Pair, out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = first_of(p)


# Unproven: an array held in a nested struct.
@wp.kernel
def nested(o: Outer, out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = o.inner.a[i]


# Unproven: an index read from data into a held array.
@wp.kernel
def held_gather(p: Pair, idx: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = p.a[idx[i]]
