"""64 small distinct Warp kernels in one module, for the load-time benchmark
(`AotModule::load` of a module of at least 50 kernels) and the lazy-declaration tests.

Compiled ahead of time by build.py (``build_many``) into OUT_DIR/many (module ``many``).
Four families of 16 kernels each, with different parameter lists, dimensions, dtypes and
constants, so that every kernel is its own function with its own parameter layout. Every
array access is indexed by ``wp.tid()`` coordinates, so each kernel launches safely.
This file was written by a short Python loop (kept in its history, not here); edit it by
hand if a kernel changes.
"""

import warp as wp


@wp.kernel
def axpb_00(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 0.0


@wp.kernel
def axpb_01(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 1.0


@wp.kernel
def axpb_02(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 2.0


@wp.kernel
def axpb_03(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 3.0


@wp.kernel
def axpb_04(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 4.0


@wp.kernel
def axpb_05(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 5.0


@wp.kernel
def axpb_06(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 6.0


@wp.kernel
def axpb_07(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 7.0


@wp.kernel
def axpb_08(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 8.0


@wp.kernel
def axpb_09(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 9.0


@wp.kernel
def axpb_10(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 10.0


@wp.kernel
def axpb_11(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 11.0


@wp.kernel
def axpb_12(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 12.0


@wp.kernel
def axpb_13(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 13.0


@wp.kernel
def axpb_14(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 14.0


@wp.kernel
def axpb_15(a: wp.float32, x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = a * x[i] + 15.0


@wp.kernel
def add2d_00(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 1.0 + b[i, j]


@wp.kernel
def add2d_01(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 2.0 + b[i, j]


@wp.kernel
def add2d_02(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 3.0 + b[i, j]


@wp.kernel
def add2d_03(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 4.0 + b[i, j]


@wp.kernel
def add2d_04(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 5.0 + b[i, j]


@wp.kernel
def add2d_05(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 6.0 + b[i, j]


@wp.kernel
def add2d_06(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 7.0 + b[i, j]


@wp.kernel
def add2d_07(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 8.0 + b[i, j]


@wp.kernel
def add2d_08(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 9.0 + b[i, j]


@wp.kernel
def add2d_09(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 10.0 + b[i, j]


@wp.kernel
def add2d_10(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 11.0 + b[i, j]


@wp.kernel
def add2d_11(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 12.0 + b[i, j]


@wp.kernel
def add2d_12(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 13.0 + b[i, j]


@wp.kernel
def add2d_13(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 14.0 + b[i, j]


@wp.kernel
def add2d_14(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 15.0 + b[i, j]


@wp.kernel
def add2d_15(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = a[i, j] * 16.0 + b[i, j]


@wp.kernel
def fill_00(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 0


@wp.kernel
def fill_01(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 1


@wp.kernel
def fill_02(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 2


@wp.kernel
def fill_03(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 3


@wp.kernel
def fill_04(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 4


@wp.kernel
def fill_05(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 5


@wp.kernel
def fill_06(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 6


@wp.kernel
def fill_07(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 7


@wp.kernel
def fill_08(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 8


@wp.kernel
def fill_09(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 9


@wp.kernel
def fill_10(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 10


@wp.kernel
def fill_11(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 11


@wp.kernel
def fill_12(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 12


@wp.kernel
def fill_13(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 13


@wp.kernel
def fill_14(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 14


@wp.kernel
def fill_15(value: wp.int32, step: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = value + step * i + 15


@wp.kernel
def vec_00(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 0.0


@wp.kernel
def vec_01(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 1.0


@wp.kernel
def vec_02(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 2.0


@wp.kernel
def vec_03(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 3.0


@wp.kernel
def vec_04(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 4.0


@wp.kernel
def vec_05(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 5.0


@wp.kernel
def vec_06(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 6.0


@wp.kernel
def vec_07(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 7.0


@wp.kernel
def vec_08(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 8.0


@wp.kernel
def vec_09(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 9.0


@wp.kernel
def vec_10(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 10.0


@wp.kernel
def vec_11(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 11.0


@wp.kernel
def vec_12(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 12.0


@wp.kernel
def vec_13(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 13.0


@wp.kernel
def vec_14(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 14.0


@wp.kernel
def vec_15(s: wp.float32, offset: wp.vec3, v: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = v[i] * s + offset * 15.0
