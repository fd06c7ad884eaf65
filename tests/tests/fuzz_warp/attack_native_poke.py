# Kept by the Warp fuzzer: ../shared/attacks/warp/native_poke.py (issue 36), replayed first with
# the launches of attack_native_poke.case.
# Module `wrp_native`: a @wp.func_native snippet whose first line is
# `//---------`, the line that warp-launch's native-code detector
# (source/modes.rs, native_code) takes for Warp's generated functions.
import warp as wp

POKE = """//---------
    *(float*)(addr) = val;
"""
ADJ = """//---------
"""


@wp.func_native(POKE, ADJ)
def poke(addr: wp.uint64, val: float): ...


@wp.kernel
def native_poke(x: wp.array(dtype=float), addr: wp.uint64, val: float):
    i = wp.tid()
    x[i] = 1.0
    poke(addr, val)
