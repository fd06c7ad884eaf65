"""Warp tile kernels for warp-launch's `Kernel::launch_tiled` (Warp's `wp.launch_tiled`).

Compiled ahead of time by build.py (`build_tiles`) twice, with the module option
``block_dim`` 64 and 128, into OUT_DIR/tiles/bd64 and OUT_DIR/tiles/bd128 (module
``tiles``); the block_dim 64 source is also checked in as
``warp-launch/tests/fixtures/wp_tiles.cu``. Warp's CPU device computes the reference
results.

A tile kernel is launched over a domain with the block size appended (``launch_tiled``):
every thread of a block shares one ``wp.tid()`` and the block loads, reduces and stores
its tile together. The first three kernels use only register tiles, bounds-checked
loads and stores and offsets that are thread coordinates times constants: warp-launch
proves those accesses safe. The last three are ones it refuses in safe launches.
"""

import warp as wp

TILE_M = wp.constant(8)
TILE_N = wp.constant(16)
ROW = wp.constant(128)
CHUNK = wp.constant(256)


# Load + store: out = s * a, an 8 x 16 tile per block. Tiles past the array's edge
# are cut by the bounds checks of tile_load / tile_store.
@wp.kernel
def scale_tiles(a: wp.array2d(dtype=wp.float32), s: wp.float32, out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    t = wp.tile_load(a, shape=(TILE_M, TILE_N), offset=(i * TILE_M, j * TILE_N))
    wp.tile_store(out, t * s, offset=(i * TILE_M, j * TILE_N))


# Reduction: out[i] = sum of row i (at most ROW columns; the load pads with zeros).
@wp.kernel
def row_sums(a: wp.array2d(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    t = wp.tile_load(a, shape=(1, ROW), offset=(i, 0))
    s = wp.tile_sum(t)
    wp.tile_store(out, s, offset=i)


# Reduction across blocks: total[0] += sum of each CHUNK of a.
@wp.kernel
def total_sum(a: wp.array(dtype=wp.float32), total: wp.array(dtype=wp.float32)):
    i = wp.tid()
    t = wp.tile_load(a, shape=CHUNK, offset=i * CHUNK)
    wp.tile_atomic_add(total, wp.tile_sum(t), offset=0)


# Refused by safe launches: a shared-memory tile (Warp's vectorized copy indexes in 32 bits).
@wp.kernel
def scale_shared(a: wp.array2d(dtype=wp.float32), s: wp.float32, out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    t = wp.tile_load(a, shape=(TILE_M, TILE_N), offset=(i * TILE_M, j * TILE_N), storage="shared")
    wp.tile_store(out, t * s, offset=(i * TILE_M, j * TILE_N))


# Refused by safe launches: an offset that can be negative (tile loads check only the upper end).
@wp.kernel
def shifted_rows(a: wp.array2d(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    t = wp.tile_load(a, shape=(1, ROW), offset=(i - 1, 0))
    wp.tile_store(out, wp.tile_sum(t), offset=i)


# Refused by safe launches: bounds checks off.
@wp.kernel
def scale_unchecked(a: wp.array2d(dtype=wp.float32), s: wp.float32, out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    t = wp.tile_load(a, shape=(TILE_M, TILE_N), offset=(i * TILE_M, j * TILE_N), bounds_check=False)
    wp.tile_store(out, t * s, offset=(i * TILE_M, j * TILE_N), bounds_check=False)
