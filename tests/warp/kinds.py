"""Warp kernels for warp-launch's launcher generator: the parameter types a typed launcher
maps to Rust (scalars of every width, bool, vectors, matrices, quaternions, transforms,
nested structs with padding, Rust keywords and the launchers' own names as parameter
names, arrays whose dimensions Warp's output does not show, a float16 value through half's
f16), and the kernels it makes no launcher for (an array of a dtype without a Rust element type).

Usage (no GPU needed; Warp compiles with its bundled NVRTC):

    PYTHONPATH=target/cuda-cache/warp-py python3 tests/warp/kinds.py warp-launch/tests/fixtures

Writes OUT_DIR/wp_kinds.cu and OUT_DIR/wp_kinds.meta (the cubin is compiled too, then
deleted). The checked-in launchers `tests/src/launchers/kinds.rs` are generated from them;
build.py compiles the module (module name ``kinds``) with its cubin into OUT_DIR/kinds for
the GPU test of the launchers (`gpu_launchers`).
"""

import shutil
import sys
from pathlib import Path

import warp as wp


@wp.struct
class Inner:
    """A byte then a double: 7 bytes of padding between them (C layout: 16 bytes)."""

    flag: wp.uint8
    value: wp.float64


@wp.struct
class Outer:
    """A nested struct, a short (6 bytes of padding after it) and a vec3d: 48 bytes."""

    inner: Inner
    count: wp.int16
    weights: wp.vec3d


# Every by-value kind: a nested struct, a double matrix, a quaternion, a transform, a bool,
# a 64-bit and an 8-bit integer.
@wp.kernel(module="kinds")
def mixed(
    o: Outer,
    m: wp.mat22d,
    q: wp.quatf,
    t: wp.transformf,
    on: wp.bool,
    big: wp.int64,
    small: wp.int8,
    out: wp.array(dtype=wp.float64),
):
    i = wp.tid()
    v = o.inner.value * wp.float64(o.count) + m[0, 1] + o.weights[2]
    v = v + wp.float64(q[3]) + wp.float64(t[0]) + wp.float64(big) + wp.float64(small)
    if on:
        out[i] = v


# Parameter names that are Rust keywords, or the launchers' own `dim` and `stream`.
@wp.kernel(module="kinds")
def names(type: wp.array(dtype=wp.int32), match: wp.int32, dim: wp.uint32, stream: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    type[i] = match
    stream[i] = dim


# A multi-line signature (Warp copies only its first line) and an array the body never
# indexes: nothing in Warp's output shows its dimensions.
@wp.kernel(module="kinds")
def shape_only(
    a: wp.array3d(dtype=wp.float32),
    out: wp.array(dtype=wp.int32),
):
    i = wp.tid()
    out[i] = a.shape[0]


# Integer vectors and matrices of floats in arrays, unsigned and 64-bit element types.
@wp.kernel(module="kinds")
def elements(
    ids: wp.array2d(dtype=wp.vec3i),
    frames: wp.array(dtype=wp.mat44f),
    counts: wp.array(dtype=wp.uint64),
    bytes_: wp.array(dtype=wp.uint8),
):
    i, j = wp.tid()
    wp.atomic_add(counts, i, wp.uint64(ids[i, j][0]))
    bytes_[i] = wp.uint8(frames[i][0, 0])


# A float16 value: half's f16 (warp-launch's `half` feature).
@wp.kernel(module="kinds")
def half_value(h: wp.float16, out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = wp.float32(h)


# No launcher: warp-launch has no element type for arrays of quaternions.
@wp.kernel(module="kinds")
def quat_array(q: wp.array(dtype=wp.quatf), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = q[i][3]


# Kernel names that are Rust prelude names in UpperCamelCase (`Ok`, `Clone`): the generated
# code spells every path in full, so they shadow nothing it uses.
@wp.kernel(module="kinds")
def ok(flags: wp.array(dtype=wp.int32)):
    i = wp.tid()
    flags[i] = 1


@wp.kernel(module="kinds")
def clone(src: wp.array(dtype=wp.float32), dst: wp.array(dtype=wp.float32)):
    i = wp.tid()
    dst[i] = src[i]


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: kinds.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".warp-work-kinds"
    wp.config.kernel_cache_dir = str(work / "cache")
    wp.config.quiet = True
    wp.init()
    if wp.__version__ != "1.19.0":
        print(f"kinds.py: expected warp-lang 1.19.0, found {wp.__version__}", file=sys.stderr)
        return 1
    d = work / "kinds"
    wp.compile_aot_module("kinds", arch=90, module_dir=str(d), use_ptx=False, strip_hash=True)
    for f in sorted(d.iterdir()):
        if f.suffix in (".cu", ".meta"):
            shutil.copy(f, out / f.name)
            print("wrote", out / f.name)
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
