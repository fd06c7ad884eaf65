"""Compile tests/warp/kernels.py with whatever warp-lang is importable (another
release than 1.19.0), as build.py compiles it with 1.19.0, for the version-check
fixtures of warp-launch (warp-launch/tests/fixtures/other-warp/<version>/).

Usage (run by `cargo xtask warp-other-versions`, which installs each release
with pip into target/warp-other/<version> and puts it first on PYTHONPATH):

    python3 tests/warp/other_version.py OUT_DIR

Writes OUT_DIR/wp_kernels.{cu,meta,sm90.cubin} and prints the Warp version.
"""

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    import warp as wp

    wp.config.kernel_cache_dir = str(out.parent / f"kernel-cache-{wp.__version__}")
    wp.config.quiet = True
    wp.init()
    sys.dont_write_bytecode = True
    sys.path.insert(0, str(HERE))
    import kernels  # noqa: E402

    if out.exists():
        shutil.rmtree(out)
    wp.compile_aot_module(kernels, arch=90, module_dir=str(out), use_ptx=False, strip_hash=True)
    print(wp.__version__, sorted(p.name for p in out.iterdir()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
