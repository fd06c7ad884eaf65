"""Warp compile modes and kernel features that change the generated code or the launch
contract, one small module each, for the tests of warp-proof's `source/modes.rs`.

Usage (no GPU needed; Warp compiles with its bundled NVRTC):

    PYTHONPATH=target/cuda-cache/warp-py python3 tests/warp/modes.py warp-launch/tests/fixtures/modes

Writes OUT_DIR/wp_<module>.cu and .meta for each module below (the cubins are compiled
too, then deleted: the tests read the source only). What each shows, and what
warp-launch does with it, is in the table of `warp-proof/src/source/modes.rs`.
"""

import shutil
import sys
from pathlib import Path
from typing import Any

import warp as wp

# -- refused at load -------------------------------------------------------------------


# Deterministic mode (a module option): an atomic scatter and an atomic counter.
@wp.kernel(module="modes_deterministic")
def scatter(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    wp.atomic_add(out, 0, x[i])


@wp.kernel(module="modes_deterministic")
def compact(x: wp.array(dtype=wp.float32), count: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    if x[i] > 0.0:
        slot = wp.atomic_add(count, 0, 1)
        out[slot] = x[i]


# Thread block clusters.
@wp.kernel(module="modes_cluster", cluster_dim=2)
def clustered(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] + 1.0


@wp.struct
class Params:
    x: wp.array(dtype=wp.float32)
    s: wp.float32


# An external entry point (OptiX-style): its argument lives in __constant__ memory.
@wp.kernel(module="modes_external", entry_point_abi="external_constant_params", enable_backward=False)
def external(p: Params):
    p.x[0] = p.s


# Launch bounds below the module's block_dim (256): never launchable.
@wp.kernel(module="modes_small_bounds", launch_bounds=(128, 2))
def small_bounds(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] + 1.0


# -- harmless ---------------------------------------------------------------------------


@wp.kernel(module="modes_harmless", launch_bounds=256)
def bounded(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] + 1.0


@wp.kernel(module="modes_harmless", cuda_max_registers=32)
def few_registers(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] + 1.0


@wp.kernel(module="modes_harmless", enable_cuda_smem_spilling=True)
def spills(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] + 1.0


@wp.kernel(module="modes_harmless", enable_backward=False)
def forward_only(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = x[i] + 1.0


@wp.kernel(module="modes_harmless")
def generic_scale(x: wp.array(dtype=Any), s: Any):
    i = wp.tid()
    x[i] = x[i] * s


wp.overload(generic_scale, {"x": wp.array(dtype=wp.float32), "s": wp.float32})


# enable_backward=False as a module option with a @wp.func: Warp still writes the function's
# adjoint, as a stub whose body is one comment (as in Warp's own example_fdtd_3d); it is
# generated code, not native code.
@wp.func
def halve(v: wp.float32) -> wp.float32:
    return 0.5 * v


@wp.kernel(module="modes_forward_only")
def halve_all(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = halve(x[i])


# mode="debug" (a module option): the same .cu as lineinfo=True, with #line directives.
@wp.kernel(module="modes_debug")
def debug_fill(x: wp.array(dtype=wp.float32), v: wp.float32):
    i = wp.tid()
    x[i] = v


# A generic kernel with two overloads: needs strip_hash=False (hash-suffixed names).
@wp.kernel(module="modes_overloads")
def overloaded(x: wp.array(dtype=Any), s: Any):
    i = wp.tid()
    x[i] = x[i] * s


wp.overload(overloaded, {"x": wp.array(dtype=wp.float32), "s": wp.float32})
wp.overload(overloaded, {"x": wp.array(dtype=wp.float64), "s": wp.float64})

# -- native code: loaded, every kernel unproven -------------------------------------------


@wp.func_native("out[tid] = x * 2.0f;")
def twice_into(x: wp.float32, out: wp.array(dtype=wp.float32), tid: wp.int32): ...


@wp.kernel(module="modes_native")
def use_native(out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    twice_into(1.5, out, i)


@wp.kernel(module="modes_native")
def plain_in_native(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = 1.0


@wp.kernel(module="modes_preamble")
def plain_in_preamble(x: wp.array(dtype=wp.float32)):
    i = wp.tid()
    x[i] = 1.0


MODULES = {
    "modes_deterministic": {"deterministic": wp.DeterministicMode.RUN_TO_RUN},
    "modes_cluster": {},
    "modes_external": {},
    "modes_small_bounds": {},
    "modes_harmless": {},
    "modes_forward_only": {"enable_backward": False},
    "modes_debug": {"mode": "debug"},
    "modes_overloads": {"strip_hash": False},
    "modes_native": {},
    "modes_preamble": {
        "extra_build_options": wp.ModuleBuildOptions(
            extra_cuda_preamble="__device__ inline float helper(float x) { return 2.0f * x; }\n"
        )
    },
}


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: modes.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".warp-work"
    wp.config.kernel_cache_dir = str(work / "cache")
    wp.config.quiet = True
    wp.init()
    if wp.__version__ != "1.19.0":
        print(f"modes.py: expected warp-lang 1.19.0, found {wp.__version__}", file=sys.stderr)
        return 1
    for name, options in MODULES.items():
        options = dict(options)
        strip_hash = options.pop("strip_hash", True)
        if options:
            wp.set_module_options(options, name)
        d = work / name
        wp.compile_aot_module(name, arch=90, module_dir=str(d), use_ptx=False, strip_hash=strip_hash)
        for f in sorted(d.iterdir()):
            if f.suffix in (".cu", ".meta"):
                shutil.copy(f, out / f.name)
                print("wrote", out / f.name)
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
