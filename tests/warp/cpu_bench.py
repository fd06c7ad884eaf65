"""Warp 1.19.0's own CPU device on the CPU benchmark's kernels (the peer of
tests/corpus/benches/cpu.rs): saxpy over N elements and add2d over R x C,
compiled by Warp for a generic x86-64 (cpu_compiler_flags "", the target
warp-build compiles for), timed as the median of ROUNDS launches after a
warm-up. Prints one JSON object: {"saxpy_ns_per_elem": f, "add2d_ns_per_elem": f}.

Usage: PYTHONPATH=<warp-lang 1.19.0> python3 cpu_bench.py N R C ROUNDS
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    n, rows, cols, rounds = (int(a) for a in sys.argv[1:5])
    sys.dont_write_bytecode = True
    import numpy as np
    import warp as wp

    wp.config.quiet = True
    wp.config.cpu_compiler_flags = ""
    wp.init()
    sys.path.insert(0, HERE)
    import kernels

    x = wp.array(np.linspace(-1.0, 1.0, n, dtype=np.float32), device="cpu")
    y = wp.zeros(n, dtype=wp.float32, device="cpu")
    a = wp.array(np.ones((rows, cols), dtype=np.float32), device="cpu")
    b = wp.array(np.ones((rows, cols), dtype=np.float32), device="cpu")
    out = wp.zeros((rows, cols), dtype=wp.float32, device="cpu")

    def median(f):
        f()
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        times.sort()
        return times[len(times) // 2]

    t_saxpy = median(lambda: wp.launch(kernels.saxpy, dim=n, inputs=[2.0, x, y], device="cpu"))
    t_add = median(lambda: wp.launch(kernels.add2d, dim=(rows, cols), inputs=[a, b, out], device="cpu"))
    print(json.dumps({"saxpy_ns_per_elem": t_saxpy * 1e9 / n, "add2d_ns_per_elem": t_add * 1e9 / (rows * cols)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
