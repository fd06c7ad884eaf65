"""Build Warp 1.19.0 reference data for the warp-launch tests.

Usage (no GPU needed; Warp's CPU device computes the references and NVRTC
compiles the CUDA module ahead of time):

    python3 -m pip install --target target/cuda-cache/warp-py warp-lang==1.19.0 numpy==2.2.6
    PYTHONPATH=target/cuda-cache/warp-py python3 tests/warp/build.py OUT_DIR

Writes:

    OUT_DIR/aot/wp_kernels.cu           CUDA source Warp generated for kernels.py
    OUT_DIR/aot/wp_kernels.meta         JSON: "<kernel>_cuda_kernel_{forward,backward}_smem_bytes" -> int
    OUT_DIR/aot/wp_kernels.sm90.cubin   sm_90 cubin (strip_hash=True, so names carry no hash)
    OUT_DIR/access/wp_access.{cu,meta,sm90.cubin}  access.py, for the launch-shape checks
    OUT_DIR/kinds/wp_kinds.{cu,meta,sm90.cubin}    kinds.py, for the generated launchers' GPU test
    OUT_DIR/tape/wp_tape.{cu,meta,sm90.cubin}      tape.py, for the tape-parity GPU test
    OUT_DIR/conditional/wp_conditional.{cu,meta,sm90.cubin}  conditional.py, for gpu_conditional
    OUT_DIR/multi/all/wp_kernels.{cu,meta,sm80.cubin,sm90.cubin,sm100.cubin,sm120.cubin,sm75.ptx}
    OUT_DIR/multi/no90/wp_kernels.{cu,meta,sm80.cubin,sm100.cubin,sm75.ptx}
                                        kernels.py for several architectures (the image choice)
    OUT_DIR/many/wp_many.{cu,meta,sm90.cubin}  many.py: 64 kernels, for the load-time benchmark
    OUT_DIR/cases/<case>/<arg>.bin      raw little-endian inputs (the whole backing storage)
    OUT_DIR/cases/<case>/<arg>.expected.bin (and <arg>.grad.expected.bin for tape cases)
    OUT_DIR/manifest.json               what every case launches; schema in the module docstring below
    OUT_DIR/corpus/...                  Warp's own examples compiled, and reference runs (corpus.py)

Manifest schema (all paths relative to OUT_DIR):

    {
      "warp_version": "1.19.0", "numpy_version": str, "module": "kernels",
      "aot": {"cu": str, "meta": str, "cubin": str, "arch": 90},
      "structs": {PY_NAME: {"native_name": str, "size": int,
                             "fields": [{"name", "dtype", "offset", "size"}]}},
      "kernels": {KEY: {"forward": str, "backward": str, "launch_ndim": int,
                        "grid_stride": bool,
                        "params": [{"name", "kind", "dtype", "ndim"?}]}},
      "cases": [CASE], "tape_cases": [TAPE_CASE], "tape_parity": {NAME: PARITY_CASE}
    }
    CASE = {"name": str, "kernel": KEY, "dim": [int], "block_dim": int, "max_blocks": int,
            "adjoint": false, "note": str, "args": [ARG, ...]}   # args in kernel order
    ARG (array)  = {"name", "kind": "array", "dtype", "shape": [int], "strides": [int bytes],
                    "offset": int bytes into the file's storage, "file": str,
                    "contiguous": bool, "is_output": bool, "expected_file": str | null}
                   file holds the whole backing allocation (for a strided view, the base
                   array); expected_file holds the same allocation after the launch.
    ARG (scalar) = {"name", "kind": "scalar", "dtype", "value": number | [numbers, row-major],
                    "bytes_hex": str, "is_output": false, "expected_file": null}
    ARG (struct) = {"name", "kind": "struct", "dtype": PY_NAME, "native_name": str,
                    "value": {field: number | [numbers]}, "bytes_hex": str (packed C layout),
                    "is_output": false, "expected_file": null}
    TAPE_CASE = {"name", "arrays": {ID: {"dtype", "shape", "strides", "file", "requires_grad",
                                         "expected_file", "grad_expected_file" | null}},
                 "launches": [{"kernel", "dim", "block_dim", "max_blocks",
                               "args": [ARG with "array": ID instead of file fields for arrays]}],
                 "loss": ID, "loss_grad_seed": 1.0}
    PARITY_CASE = {"note": str, "gradients": [ID] (the arrays of Warp's tape.gradients),
                   "arrays": {ID: {"dtype", "shape", "strides", "file", "requires_grad", "retain_grad",
                                   "expected_file", "grad_expected_file" | null}}}
                   one program of tape.py per NAME, run by Warp's tape on its CPU device (build_tape_parity)
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--cpu"]
    cpu_only = len(args) != len(sys.argv) - 1
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print("usage: build.py [--cpu] OUT_DIR", file=sys.stderr)
        return 2
    out = Path(args[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)

    import warp as wp

    # Keep Warp's kernel cache next to the output, not in the home directory.
    wp.config.kernel_cache_dir = str(out / ".warp-cache")
    wp.config.quiet = True
    # Warp's CPU device computes every reference for a generic x86-64 (no -march=native,
    # whose FMA contraction would depend on the build machine): the same target the CPU
    # code warp-build compiles with the system C++ compiler uses.
    wp.config.cpu_compiler_flags = ""
    wp.init()
    if wp.__version__ != "1.19.0":
        print(f"build.py: expected warp-lang 1.19.0, found {wp.__version__}", file=sys.stderr)
        return 1

    sys.dont_write_bytecode = True  # no __pycache__ beside kernels.py in the work tree
    sys.path.insert(0, str(HERE))
    import kernels  # noqa: E402

    aot = out / "aot"
    if aot.exists():
        shutil.rmtree(aot)
    artifacts = wp.compile_aot_module(kernels, arch=90, module_dir=str(aot), use_ptx=False, strip_hash=True)
    names = sorted(p.name for p in aot.iterdir())
    print("compile_aot_module returned", [str(Path(p).name) for p in artifacts], "; aot/ holds", names)

    if cpu_only:
        # --cpu: what the CPU tests need, no more: kernels.py's sources (its CUDA source
        # declares the kernels; warp-build compiles its CPU source), the cases and the tape
        # cases computed on Warp's CPU device, and the manifest.
        cases_dir = out / "cases"
        if cases_dir.exists():
            shutil.rmtree(cases_dir)
        builder = Builder(wp, kernels, out)
        builder.build_all()
        write_manifest(wp, out, builder)
        return 0

    # The launch-shape analysis module (warp-launch's access rules): compiled only.
    import access  # noqa: E402

    access_dir = out / "access"
    if access_dir.exists():
        shutil.rmtree(access_dir)
    wp.compile_aot_module(access, arch=90, module_dir=str(access_dir), use_ptx=False, strip_hash=True)

    # The tape-parity module (tests/src/warp_tape.rs runs its programs on the GPU).
    import tape  # noqa: E402

    tape_dir = out / "tape"
    if tape_dir.exists():
        shutil.rmtree(tape_dir)
    wp.compile_aot_module(tape, arch=90, module_dir=str(tape_dir), use_ptx=False, strip_hash=True)

    # The conditional-graph test's kernels (tests/tests/gpu_conditional.rs).
    import conditional  # noqa: E402

    cond_dir = out / "conditional"
    if cond_dir.exists():
        shutil.rmtree(cond_dir)
    wp.compile_aot_module(conditional, arch=90, module_dir=str(cond_dir), use_ptx=False, strip_hash=True)

    build_multi_arch(wp, kernels, out / "multi")

    cases_dir = out / "cases"
    if cases_dir.exists():
        shutil.rmtree(cases_dir)

    builder = Builder(wp, kernels, out)
    builder.build_all()
    build_tiles(wp, out)
    build_many(wp, out)
    build_kinds(wp, out)
    build_corpus(wp, out)
    write_manifest(wp, out, builder)
    return 0


def write_manifest(wp, out: Path, builder) -> None:
    """OUT_DIR/manifest.json: the module, its structs and kernels, and every case."""
    manifest = {
        "warp_version": wp.__version__,
        "numpy_version": np.__version__,
        "module": "kernels",
        "aot": {
            "cu": "aot/wp_kernels.cu",
            "meta": "aot/wp_kernels.meta",
            "cubin": "aot/wp_kernels.sm90.cubin",
            "arch": 90,
        },
        "structs": builder.struct_info(),
        "kernels": builder.kernel_info(),
        "cases": builder.cases,
        "tape_cases": builder.tape_cases,
        "tape_parity": builder.tape_parity,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    print(f"wrote {len(builder.cases)} cases and {len(builder.tape_cases)} tape cases to {out / 'manifest.json'}")


def build_multi_arch(wp, kernels, multi: Path) -> None:
    """kernels.py compiled for several architectures, for the image choice: ``all`` holds a cubin
    for sm_80, sm_90, sm_100 and sm_120 and PTX for sm_75 (ISA 9.4 from Warp's NVRTC); ``no90``
    the same without sm_90 and sm_120."""
    if multi.exists():
        shutil.rmtree(multi)
    for sub, archs in (("all", [80, 90, 100, 120]), ("no90", [80, 100])):
        d = multi / sub
        wp.compile_aot_module(kernels, arch=archs, module_dir=str(d), use_ptx=False, strip_hash=True)
        wp.compile_aot_module(kernels, arch=[75], module_dir=str(d), use_ptx=True, strip_hash=True)
        print(f"multi/{sub} holds", sorted(p.name for p in d.iterdir()))


def build_many(wp, out: Path) -> None:
    """many.py (64 small kernels, module ``many``) compiled for sm_90 into OUT_DIR/many, for
    the benchmark of ``AotModule::load`` on a module of at least 50 kernels and the first
    launch of a fresh kernel. Compiled only: no reference data."""
    sys.dont_write_bytecode = True
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import many  # noqa: E402

    d = out / "many"
    if d.exists():
        shutil.rmtree(d)
    wp.compile_aot_module(many, arch=90, module_dir=str(d), use_ptx=False, strip_hash=True)
    kernels = sum(1 for v in vars(many).values() if isinstance(v, wp._src.context.Kernel))
    print(f"many/ holds {kernels} kernels:", sorted(p.name for p in d.iterdir()))


def build_kinds(wp, out: Path) -> None:
    """kinds.py (module ``kinds``: every parameter kind a typed launcher maps to Rust) compiled
    for sm_90 into OUT_DIR/kinds, for the GPU test of the generated launchers
    (``gpu_launchers``), which computes its expected results itself. Its source is the checked-in
    fixture ``warp-launch/tests/fixtures/wp_kinds.cu``."""
    sys.dont_write_bytecode = True
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import kinds  # noqa: E402, F401 (defines the kernels of module "kinds")

    d = out / "kinds"
    if d.exists():
        shutil.rmtree(d)
    wp.compile_aot_module("kinds", arch=90, module_dir=str(d), use_ptx=False, strip_hash=True)
    print("kinds/ holds", sorted(p.name for p in d.iterdir()))


def build_tiles(wp, out: Path) -> None:
    """Tile kernels (tiles.py) for warp-launch's ``launch_tiled``: writes OUT_DIR/tiles/.

    Warp compiles module ``tiles`` twice, with the module option ``block_dim`` 64 and 128
    (a Warp AOT module runs only at the block size it was compiled for), and Warp's CPU
    device computes each case with ``wp.launch_tiled`` at both block sizes (the CPU runs
    tiles with one thread; the results must agree, and are written once). Inputs are
    multiples of 1/8 in [-8, 8], so every sum below is exact in float32 whatever the
    order of its additions: the GPU must match bit for bit.

    Writes (paths relative to OUT_DIR):

        tiles/bd<B>/wp_tiles.{cu,meta,sm90.cubin}   the module compiled with block_dim B
        tiles/cases/<case>/<arg>.bin                raw little-endian inputs
        tiles/cases/<case>/<arg>.expected.bin       outputs after Warp's CPU launch
        tiles/manifest.json

    tiles/manifest.json:

        {"warp_version": "1.19.0", "module": "tiles",
         "block_dims": {"64": "tiles/bd64", "128": "tiles/bd128"},   # module directories
         "cases": [{"name": str, "kernel": KEY,
                    "dim": [int],          # as given to launch_tiled (the block dim is appended)
                    "note": str,
                    "args": [ARG, ...]}]}  # in kernel order
        ARG (array)  = {"name", "kind": "array", "dtype", "shape": [int], "strides": [int bytes],
                        "offset": 0, "file": str, "is_output": bool, "expected_file": str | null}
        ARG (scalar) = {"name", "kind": "scalar", "dtype", "value": number, "bytes_hex": str,
                        "is_output": false, "expected_file": null}
    """
    sys.dont_write_bytecode = True
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import tiles  # noqa: E402

    root = out / "tiles"
    if root.exists():
        shutil.rmtree(root)
    block_dims = (64, 128)
    for bd in block_dims:
        wp.set_module_options({"block_dim": bd}, tiles)
        wp.compile_aot_module(tiles, arch=90, module_dir=str(root / f"bd{bd}"), use_ptx=False, strip_hash=True)

    rng = np.random.default_rng(20240616)

    def eighths(*shape):
        return (rng.integers(-64, 65, size=shape) / 8.0).astype(np.float32)

    def write(rel: str, data: bytes) -> str:
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return rel

    cases = []

    def case(name, kernel, dim, args, outputs, note):
        """args: (name, numpy array | float); arrays are float32, outputs start as given."""
        results = []
        for bd in block_dims:
            wp.set_module_options({"block_dim": bd}, tiles)
            arrays = {n: wp.array(v, dtype=wp.float32, device="cpu") for n, v in args if isinstance(v, np.ndarray)}
            inputs = [arrays.get(n, v) for n, v in args]
            wp.launch_tiled(kernel, dim=list(dim), inputs=inputs, device="cpu", block_dim=bd)
            wp.synchronize()
            results.append({n: arrays[n].numpy().tobytes() for n in outputs})
        assert results[0] == results[1], f"{name}: Warp's CPU results differ between block_dim 64 and 128"
        described = []
        for n, v in args:
            if isinstance(v, np.ndarray):
                described.append(
                    {
                        "name": n,
                        "kind": "array",
                        "dtype": "float32",
                        "shape": list(v.shape),
                        "strides": list(v.strides),
                        "offset": 0,
                        "file": write(f"tiles/cases/{name}/{n}.bin", v.tobytes()),
                        "is_output": n in outputs,
                        "expected_file": write(f"tiles/cases/{name}/{n}.expected.bin", results[0][n])
                        if n in outputs
                        else None,
                    }
                )
            else:
                described.append(
                    {
                        "name": n,
                        "kind": "scalar",
                        "dtype": "float32",
                        "value": v,
                        "bytes_hex": np.float32(v).tobytes().hex(),
                        "is_output": False,
                        "expected_file": None,
                    }
                )
        cases.append({"name": name, "kernel": kernel.key, "dim": list(dim), "note": note, "args": described})
        return results[0]

    # 37 x 50 in 8 x 16 tiles: 5 x 4 tiles, the last row and column of tiles cut by the edges.
    a = eighths(37, 50)
    got = case(
        "scale_tiles",
        tiles.scale_tiles,
        (5, 4),
        [("a", a), ("s", 0.75), ("out", np.zeros((37, 50), np.float32))],
        {"out"},
        "out = 0.75 * a; partial tiles at the edges",
    )
    assert np.frombuffer(got["out"], np.float32).reshape(37, 50).tolist() == (a * np.float32(0.75)).tolist()

    # 37 rows of 100: a 1 x 128 tile per row, zero-padded past column 100.
    a = eighths(37, 100)
    got = case(
        "row_sums",
        tiles.row_sums,
        (37,),
        [("a", a), ("out", np.zeros(37, np.float32))],
        {"out"},
        "out[i] = sum(a[i, :]); tiles wider than the rows",
    )
    assert np.frombuffer(got["out"], np.float32).tolist() == a.sum(axis=1, dtype=np.float64).tolist()

    # 1000 elements in chunks of 256: 4 blocks, the last one partial, atomically added.
    a = eighths(1000)
    got = case(
        "total_sum",
        tiles.total_sum,
        (4,),
        [("a", a), ("total", np.zeros(1, np.float32))],
        {"total"},
        "total[0] = sum(a), one tile_atomic_add per block",
    )
    assert np.frombuffer(got["total"], np.float32)[0] == a.sum(dtype=np.float64)

    manifest = {
        "warp_version": wp.__version__,
        "module": "tiles",
        "block_dims": {str(bd): f"tiles/bd{bd}" for bd in block_dims},
        "cases": cases,
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {len(cases)} tile cases for block_dim {block_dims} to {root / 'manifest.json'}")


def build_corpus(wp, out: Path) -> None:
    """Warp 1.19.0's own examples (corpus.py): every example's Warp modules compiled for sm_90
    into OUT_DIR/corpus/<example>/<module>/ with OUT_DIR/corpus/manifest.json, and the launch
    sequences of the examples in corpus.DRIVERS run on Warp's CPU device into
    OUT_DIR/corpus/cases/ (the reference data of tests/tests/gpu_corpus.rs). Runs last: it
    imports the examples, which may change Warp's global settings."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import corpus  # noqa: E402

    corpus.build_corpus(wp, out, cases=True)


def _flat(value) -> float | int | list:
    """A Warp scalar / vector / matrix value as a JSON number or flat row-major list."""
    arr = np.asarray(value)
    if arr.ndim == 0:
        return arr.item()
    return arr.reshape(-1).tolist()


class Builder:
    def __init__(self, wp, kernels, out: Path):
        self.wp = wp
        self.k = kernels
        self.out = out
        self.cases: list[dict] = []
        self.tape_cases: list[dict] = []
        self.tape_parity: dict[str, dict] = {}
        self.rng = np.random.default_rng(20240611)
        self.bases: dict[int, object] = {}

    # -- descriptions -------------------------------------------------------------------

    def dtype_name(self, t) -> str:
        from warp._src import types as wt

        if isinstance(t, self.wp._src.codegen.Struct):
            return t.key.split(".")[-1]
        return wt.type_repr(t)

    def struct_info(self) -> dict:
        s = self.k.Params
        ctype = s.ctype
        fields = []
        for name, _ in ctype._fields_:
            f = getattr(ctype, name)
            fields.append(
                {
                    "name": name,
                    "dtype": self.dtype_name(s.vars[name].type),
                    "offset": f.offset,
                    "size": f.size,
                }
            )
        return {"Params": {"native_name": s.native_name, "size": self._sizeof(ctype), "fields": fields}}

    @staticmethod
    def _sizeof(ctype) -> int:
        import ctypes

        return ctypes.sizeof(ctype)

    def kernel_info(self) -> dict:
        from warp._src import codegen, types as wt

        info = {}
        for key, kernel in sorted(self.k.__dict__.items()):
            if not isinstance(kernel, self.wp._src.context.Kernel):
                continue
            kernel.module.get_module_hash()  # resolves kernel.grid_stride and adj.kernel_dim
            params = []
            for a in kernel.adj.args:
                if wt.is_array(a.type):
                    params.append(
                        {"name": a.label, "kind": "array", "dtype": self.dtype_name(a.type.dtype), "ndim": a.type.ndim}
                    )
                elif isinstance(a.type, codegen.Struct):
                    params.append({"name": a.label, "kind": "struct", "dtype": self.dtype_name(a.type)})
                else:
                    params.append({"name": a.label, "kind": "scalar", "dtype": self.dtype_name(a.type)})
            info[kernel.key] = {
                "forward": codegen.cuda_kernel_forward_name(kernel),
                "backward": codegen.cuda_kernel_backward_name(kernel),
                "launch_ndim": kernel.adj.kernel_dim,
                "grid_stride": bool(kernel.grid_stride),
                "params": params,
            }
        return info

    # -- arrays -------------------------------------------------------------------------

    def write(self, rel: str, data: bytes) -> str:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return rel

    def view(self, base, view):
        """Register ``view`` as a strided view into ``base`` (the allocation written to the .bin file)."""
        self.bases[id(view)] = base
        return view

    def storage_of(self, arr):
        """The backing allocation of ``arr`` and the view's byte offset into it."""
        base = self.bases.get(id(arr), arr)
        return base, arr.ptr - base.ptr

    def array_arg(self, case: str, name: str, arr, before: bytes, base, offset: int, is_output: bool) -> dict:
        d = {
            "name": name,
            "kind": "array",
            "dtype": self.dtype_name(arr.dtype),
            "shape": list(arr.shape),
            "strides": list(arr.strides),
            "offset": offset,
            "file": self.write(f"cases/{case}/{name}.bin", before),
            "contiguous": bool(arr.is_contiguous),
            "is_output": is_output,
            "expected_file": None,
        }
        if is_output:
            after = base.numpy().tobytes()
            d["expected_file"] = self.write(f"cases/{case}/{name}.expected.bin", after)
        return d

    def scalar_arg(self, name: str, dtype, value) -> dict:
        from warp._src import types as wt

        if wt.type_is_value(dtype) and not wt.type_is_vector(dtype) and not wt.type_is_matrix(dtype):
            c = dtype._type_(value)
            py = value
        else:
            c = dtype(value) if not isinstance(value, dtype) else value
            py = _flat(c)
        return {
            "name": name,
            "kind": "scalar",
            "dtype": self.dtype_name(dtype),
            "value": py,
            "bytes_hex": bytes(c).hex(),
            "is_output": False,
            "expected_file": None,
        }

    def struct_arg(self, name: str, value) -> dict:
        cls = value._cls
        fields = {}
        for fname in cls.vars:
            fields[fname] = _flat(getattr(value, fname))
        return {
            "name": name,
            "kind": "struct",
            "dtype": self.dtype_name(cls),
            "native_name": cls.native_name,
            "value": fields,
            "bytes_hex": bytes(value.__ctype__()).hex(),
            "is_output": False,
            "expected_file": None,
        }

    # -- running one case -----------------------------------------------------------------

    def run(self, name: str, kernel, dim, args: list, outputs: set[str], max_blocks=0, block_dim=256, note=""):
        """args: list of (param_name, value); a value that is a Warp array is described as an array arg."""
        wp = self.wp
        before = {}
        for pname, v in args:
            if isinstance(v, wp.array):
                base, offset = self.storage_of(v)
                before[pname] = (base, offset, base.numpy().tobytes())
        # Warp's CPU device runs with block_dim 1 and ignores max_blocks: it computes the reference.
        wp.launch(kernel, dim=dim, inputs=[v for _, v in args], device="cpu", max_blocks=max_blocks)
        wp.synchronize()
        described = []
        for pname, v in args:
            if isinstance(v, wp.array):
                base, offset, raw = before[pname]
                described.append(self.array_arg(name, pname, v, raw, base, offset, pname in outputs))
            elif isinstance(getattr(v, "_cls", None), wp._src.codegen.Struct):
                described.append(self.struct_arg(pname, v))
            else:
                ptype = next(a.type for a in kernel.adj.args if a.label == pname)
                described.append(self.scalar_arg(pname, ptype, v))
        self.cases.append(
            {
                "name": name,
                "kernel": kernel.key,
                "dim": list(dim) if isinstance(dim, (list, tuple)) else [dim],
                "block_dim": block_dim,
                "max_blocks": max_blocks,
                "adjoint": False,
                "note": note,
                "args": described,
            }
        )

    def f32(self, *shape):
        return self.rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)

    # -- the cases ------------------------------------------------------------------------

    def build_all(self):
        wp, k = self.wp, self.k
        cpu = "cpu"

        # (1) saxpy: 37 elements (not a multiple of any block size); and dim 0 launches nothing.
        x = wp.array(self.f32(37), dtype=wp.float32, device=cpu)
        y = wp.array(self.f32(37), dtype=wp.float32, device=cpu)
        self.run("saxpy", k.saxpy, (37,), [("a", 2.5), ("x", x), ("y", y)], {"y"})
        x = wp.array(self.f32(5), dtype=wp.float32, device=cpu)
        y = wp.array(self.f32(5), dtype=wp.float32, device=cpu)
        self.run("saxpy_dim0", k.saxpy, (0,), [("a", 2.5), ("x", x), ("y", y)], {"y"}, note="dim 0: y unchanged")

        # (2) 2-D, contiguous; then strided views (a transposed input, a sliced input with an offset).
        a = wp.array(self.f32(4, 5), dtype=wp.float32, device=cpu)
        b = wp.array(self.f32(4, 5), dtype=wp.float32, device=cpu)
        o = wp.zeros((4, 5), dtype=wp.float32, device=cpu)
        self.run("add2d", k.add2d, (4, 5), [("a", a), ("b", b), ("out", o)], {"out"})
        a_base = wp.array(self.f32(5, 4), dtype=wp.float32, device=cpu)
        b_base = wp.array(self.f32(6, 10), dtype=wp.float32, device=cpu)
        a_t = self.view(a_base, a_base.transpose())  # shape (4, 5), strides (4, 16)
        b_s = self.view(b_base, b_base[1:5, ::2])  # shape (4, 5), strides (40, 8), offset 40 bytes
        o = wp.zeros((4, 5), dtype=wp.float32, device=cpu)
        self.run(
            "add2d_strided",
            k.add2d,
            (4, 5),
            [("a", a_t), ("b", b_s), ("out", o)],
            {"out"},
            note="a is a transposed view, b a sliced view with offset and step",
        )

        # (3) 4-D: each thread writes its linear index; then a 2-D dim padded to the kernel's 4.
        o = wp.zeros((2, 3, 4, 5), dtype=wp.int32, device=cpu)
        self.run("index4d", k.index4d, (2, 3, 4, 5), [("out", o)], {"out"})
        o = wp.zeros((3, 4, 1, 1), dtype=wp.int32, device=cpu)
        self.run("index4d_padded", k.index4d, (3, 4), [("out", o)], {"out"}, note="dim (3,4) padded to (3,4,1,1)")

        # (4) struct by value.
        p = k.Params()
        p.scale = 2.0
        p.offset = wp.vec3(1.0, -2.0, 0.5)
        p.count = 3
        xv = wp.array(self.f32(8, 3), dtype=wp.vec3, device=cpu)
        ov = wp.zeros(8, dtype=wp.vec3, device=cpu)
        self.run("use_struct", k.use_struct, (8,), [("p", p), ("x", xv), ("out", ov)], {"out"})

        # (5) vectors and matrices.
        v = wp.array(self.f32(10, 3) + 3.0, dtype=wp.vec3, device=cpu)
        ov = wp.zeros(10, dtype=wp.vec3, device=cpu)
        self.run("normalize_scale", k.normalize_scale, (10,), [("v", v), ("s", 3.0), ("out", ov)], {"out"})
        m = wp.mat33(0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0)
        t = wp.array(self.f32(6, 3, 3), dtype=wp.mat33, device=cpu)
        v = wp.array(self.f32(6, 3), dtype=wp.vec3, device=cpu)
        ov = wp.zeros(6, dtype=wp.vec3, device=cpu)
        self.run("transform", k.transform, (6,), [("m", m), ("t", t), ("v", v), ("out", ov)], {"out"})

        # (6) lean kernel (grid_stride=False).
        o = wp.zeros((7, 9), dtype=wp.int32, device=cpu)
        self.run("lean_fill", k.lean_fill, (7, 9), [("value", 5), ("out", o)], {"out"})

        # (8) visit counting for max_blocks: every index exactly once whatever the cap.
        n = 100_000
        for mb in (0, 1, 7, -1):
            c = wp.zeros(n, dtype=wp.int32, device=cpu)
            self.run(
                f"count_visits_max_blocks_{mb}".replace("-", "neg"),
                k.count_visits,
                (n,),
                [("count", c)],
                {"count"},
                max_blocks=mb,
                # The AOT module is compiled for Warp's default block_dim
                # (WP_TILE_BLOCK_DIM 256); its kernels run only at that size.
                block_dim=256,
                note="every count must be 1",
            )
        # Folded dims: a 1-D kernel launched with dim (10, 3): coord_mult 3, each i visited 3 times.
        c = wp.zeros(10, dtype=wp.int32, device=cpu)
        self.run(
            "count_visits_folded",
            k.count_visits,
            (10, 3),
            [("count", c)],
            {"count"},
            note="dim (10,3) on a 1-D kernel: shape [10], coord_mult 3, size 30; every count 3",
        )

        self.build_tape()
        self.build_adjoint_cases()
        self.build_tape_parity()

    def adjoint_case(self, case: str, kernel, dim, args: list, outputs: list, note: str):
        """One launch of `kernel` forward and backward under Warp's tape on its CPU device. args:
        (param, value) where an array is ("array", numpy data, Warp dtype), made with
        requires_grad; every output's gradient is seeded with values of its own
        (tape.backward(grads=...)). Writes each array's input, its values after the forward
        launch and its gradient after the backward one, and each seed."""
        wp = self.wp
        cpu = "cpu"
        arrays, raw, inputs = {}, {}, []
        for pname, v in args:
            if isinstance(v, tuple) and v and v[0] == "array":
                arr = wp.array(v[1], dtype=v[2], device=cpu, requires_grad=True)
                raw[pname] = arr.numpy().tobytes()
                arrays[pname] = arr
                inputs.append(arr)
            else:
                inputs.append(v)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=dim, inputs=inputs, device=cpu)
        seeds, seed_files = {}, {}
        for o in outputs:
            arr = arrays[o]
            seed = wp.array(self.f32(*arr.numpy().shape), dtype=arr.dtype, device=cpu)
            seeds[arr] = seed
            seed_files[o] = {
                "dtype": self.dtype_name(seed.dtype),
                "shape": list(seed.shape),
                "strides": list(seed.strides),
                "file": self.write(f"cases/{case}/{o}.seed.bin", seed.numpy().tobytes()),
            }
        tape.backward(grads=seeds)
        wp.synchronize()
        described = {}
        for ident, arr in arrays.items():
            described[ident] = {
                "dtype": self.dtype_name(arr.dtype),
                "shape": list(arr.shape),
                "strides": list(arr.strides),
                "file": self.write(f"cases/{case}/{ident}.bin", raw[ident]),
                "requires_grad": True,
                "expected_file": self.write(f"cases/{case}/{ident}.expected.bin", arr.numpy().tobytes()),
                "grad_expected_file": self.write(f"cases/{case}/{ident}.grad.expected.bin", arr.grad.numpy().tobytes()),
            }
        launch_args = []
        for pname, v in args:
            if pname in arrays:
                launch_args.append({"name": pname, "kind": "array", "array": pname, "is_output": pname in outputs})
            elif isinstance(getattr(v, "_cls", None), wp._src.codegen.Struct):
                launch_args.append(self.struct_arg(pname, v))
            else:
                ptype = next(a.type for a in kernel.adj.args if a.label == pname)
                launch_args.append(self.scalar_arg(pname, ptype, v))
        self.tape_cases.append(
            {
                "name": case,
                "note": note,
                "arrays": described,
                "launches": [
                    {
                        "kernel": kernel.key,
                        "dim": list(dim),
                        "block_dim": 256,
                        "max_blocks": 0,
                        "args": launch_args,
                    }
                ],
                "seeds": seed_files,
            }
        )

    def build_adjoint_cases(self):
        """Every kernel of kernels.py with a floating-point array, forward and backward on Warp's
        CPU tape (index4d, lean_fill and count_visits write integers only: no gradient)."""
        wp, k = self.wp, self.k
        f32 = self.f32
        self.adjoint_case("saxpy_adjoint", k.saxpy, (37,),
                          [("a", 2.5), ("x", ("array", f32(37), wp.float32)), ("y", ("array", f32(37), wp.float32))],
                          ["y"], "y = a x + y: adj_x = a adj_y, adj_y passes through")
        self.adjoint_case("add2d_adjoint", k.add2d, (4, 5),
                          [("a", ("array", f32(4, 5), wp.float32)), ("b", ("array", f32(4, 5), wp.float32)),
                           ("out", ("array", np.zeros((4, 5), np.float32), wp.float32))],
                          ["out"], "out = 2 a + b over a 2-D domain")
        p = k.Params()
        p.scale = 2.0
        p.offset = wp.vec3(1.0, -2.0, 0.5)
        p.count = 3
        self.adjoint_case("use_struct_adjoint", k.use_struct, (8,),
                          [("p", p), ("x", ("array", f32(8, 3), wp.vec3)),
                           ("out", ("array", np.zeros((8, 3), np.float32), wp.vec3))],
                          ["out"], "a struct by value (its adjoint is Warp's internal zeros)")
        self.adjoint_case("normalize_scale_adjoint", k.normalize_scale, (10,),
                          [("v", ("array", f32(10, 3) + 3.0, wp.vec3)), ("s", 3.0),
                           ("out", ("array", np.zeros((10, 3), np.float32), wp.vec3))],
                          ["out"], "normalize's adjoint over vec3 arrays")
        m = wp.mat33(0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0)
        self.adjoint_case("transform_adjoint", k.transform, (6,),
                          [("m", m), ("t", ("array", f32(6, 3, 3), wp.mat33)), ("v", ("array", f32(6, 3), wp.vec3)),
                           ("out", ("array", np.zeros((6, 3), np.float32), wp.vec3))],
                          ["out"], "mat33 times vec3: adjoints of a matrix array and a vector array")

    def parity_case(self, case: str, tape, arrays: dict, inputs: dict, note: str):
        """One tape_parity case: every array's input bytes (before the program), its values
        and gradient after Warp's backward pass, and which arrays Warp's tape.gradients holds."""
        wp = self.wp
        out = {}
        for ident, arr in arrays.items():
            out[ident] = {
                "dtype": self.dtype_name(arr.dtype),
                "shape": list(arr.shape),
                "strides": list(arr.strides),
                "file": self.write(f"cases/{case}/{ident}.bin", inputs[ident]),
                "requires_grad": arr.requires_grad,
                "retain_grad": bool(arr.requires_grad and arr.retain_grad),
                "expected_file": self.write(f"cases/{case}/{ident}.expected.bin", arr.numpy().tobytes()),
                "grad_expected_file": (
                    self.write(f"cases/{case}/{ident}.grad.expected.bin", arr.grad.numpy().tobytes())
                    if arr.grad is not None
                    else None
                ),
            }
        listed = [
            ident
            for ident, arr in arrays.items()
            if any(k is arr for k in tape.gradients.keys() if isinstance(k, wp.array))
        ]
        self.tape_parity[case] = {"note": note, "arrays": out, "gradients": listed}

    def build_tape_parity(self):
        """The tape against Warp's own tape on its CPU device, one program per case (the Rust
        tests run the same program: tests/src/warp_tape.rs)."""
        import tape as k  # noqa: E402 (tests/warp is on sys.path)

        wp = self.wp
        cpu = "cpu"
        n = 8
        a = 1.5

        def grad_arr(values, retain=False):
            arr = wp.array(values, dtype=wp.float32, device=cpu, requires_grad=True)
            if retain:
                arr.retain_grad = True
            return arr

        # (a) copy_tape: y = sin(x) * a; wp.copy(z, y); loss = sum(z * z). The copy is recorded
        # with its adjoint: z.grad flows into y.grad (and z.grad is consumed).
        # (b) copy_retain_tape: the same with z.retain_grad = True: z.grad is kept.
        for case, retain in (("copy_tape", False), ("copy_retain_tape", True)):
            xs = self.f32(n)
            x = grad_arr(xs)
            y = grad_arr(np.zeros(n, np.float32))
            z = grad_arr(np.zeros(n, np.float32), retain)
            loss = grad_arr(np.zeros(1, np.float32))
            inputs = {i: v.numpy().tobytes() for i, v in (("x", x), ("y", y), ("z", z), ("loss", loss))}
            tape = wp.Tape()
            with tape:
                wp.launch(k.tape_sin, dim=n, inputs=[x, a], outputs=[y], device=cpu)
                wp.copy(z, y)
                wp.launch(k.tape_loss, dim=n, inputs=[z], outputs=[loss], device=cpu)
            tape.backward(loss=loss)
            y_ref = np.sin(xs.astype(np.float64)) * a
            assert np.allclose(x.grad.numpy(), 2.0 * y_ref * a * np.cos(xs), rtol=1e-4, atol=1e-5)
            assert np.any(z.grad.numpy()) == retain
            self.parity_case(
                case,
                tape,
                {"x": x, "y": y, "z": z, "loss": loss},
                inputs,
                "tape_sin(x, 1.5) -> y; wp.copy(z, y); tape_loss(z) -> loss; backward(loss)"
                + ("; z.retain_grad = True" if retain else ""),
            )

        # (c) retain_tape: tape_sin then tape_loss with y.retain_grad = True: the array_t flag
        # keeps y.grad = 2 y where chain_tape's y.grad ends zero.
        xs = self.f32(n)
        x = grad_arr(xs)
        y = grad_arr(np.zeros(n, np.float32), True)
        loss = grad_arr(np.zeros(1, np.float32))
        inputs = {i: v.numpy().tobytes() for i, v in (("x", x), ("y", y), ("loss", loss))}
        tape = wp.Tape()
        with tape:
            wp.launch(k.tape_sin, dim=n, inputs=[x, a], outputs=[y], device=cpu)
            wp.launch(k.tape_loss, dim=n, inputs=[y], outputs=[loss], device=cpu)
        tape.backward(loss=loss)
        assert np.allclose(y.grad.numpy(), 2.0 * y.numpy(), rtol=1e-5)
        self.parity_case(
            "retain_tape",
            tape,
            {"x": x, "y": y, "loss": loss},
            inputs,
            "tape_sin(x, 1.5) -> y (retain_grad); tape_loss(y) -> loss; backward(loss)",
        )

        # (d) nested_tape: nested_square(Outer{inner: Inner{x, w = 0.75}, y}) -> out;
        # tape_loss(out) -> loss. Warp gives x (two structs deep) and y their gradients.
        xs = self.f32(n)
        x = grad_arr(xs)
        y = grad_arr(self.f32(n))
        out = grad_arr(np.zeros(n, np.float32))
        loss = grad_arr(np.zeros(1, np.float32))
        inputs = {i: v.numpy().tobytes() for i, v in (("x", x), ("y", y), ("out", out), ("loss", loss))}
        inner = k.Inner()
        inner.x = x
        inner.w = 0.75
        outer = k.Outer()
        outer.inner = inner
        outer.y = y
        tape = wp.Tape()
        with tape:
            wp.launch(k.nested_square, dim=n, inputs=[outer], outputs=[out], device=cpu)
            wp.launch(k.tape_loss, dim=n, inputs=[out], outputs=[loss], device=cpu)
        tape.backward(loss=loss)
        o = out.numpy().astype(np.float64)
        assert np.allclose(x.grad.numpy(), 2.0 * o * 2.0 * 0.75 * xs, rtol=1e-4, atol=1e-5)
        assert np.allclose(y.grad.numpy(), 2.0 * o, rtol=1e-5, atol=1e-6)
        self.parity_case(
            "nested_tape",
            tape,
            {"x": x, "y": y, "out": out, "loss": loss},
            inputs,
            "nested_square(Outer{inner: Inner{x, w: 0.75}, y}) -> out; tape_loss(out) -> loss; backward(loss)",
        )

        # (e) func_tape: chain_sin(x, 1.5) -> y; a host step z = 2 y (numpy) recorded with
        # record_func (backward: y.grad += 2 z.grad); backward(grads={z: seed}).
        xs = self.f32(n)
        seed_v = self.f32(n)
        x = grad_arr(xs)
        y = grad_arr(np.zeros(n, np.float32))
        z = grad_arr(np.zeros(n, np.float32))
        seed = wp.array(seed_v, dtype=wp.float32, device=cpu)
        inputs = {i: v.numpy().tobytes() for i, v in (("x", x), ("y", y), ("z", z), ("seed", seed))}
        tape = wp.Tape()
        with tape:
            wp.launch(k.tape_sin, dim=n, inputs=[x, a], outputs=[y], device=cpu)
        z.assign(2.0 * y.numpy())

        def host_backward():
            y.grad.assign(y.grad.numpy() + 2.0 * z.grad.numpy())

        tape.record_func(backward=host_backward, arrays=[y, z])
        tape.backward(grads={z: seed})
        assert np.allclose(x.grad.numpy(), 2.0 * seed_v * a * np.cos(xs), rtol=1e-4, atol=1e-5)
        self.parity_case(
            "func_tape",
            tape,
            {"x": x, "y": y, "z": z, "seed": seed},
            inputs,
            "tape_sin(x, 1.5) -> y; z = 2 y on the host with record_func(y.grad += 2 z.grad, [y, z]); "
            "backward(grads={z: seed})",
        )

    def build_tape(self):
        """(7) y = sin(x) * a ; loss += sum(y*y); backward with loss.grad = 1."""
        wp, k = self.wp, self.k
        cpu = "cpu"
        n = 16
        a = 1.5
        xs = self.f32(n)
        x = wp.array(xs, dtype=wp.float32, device=cpu, requires_grad=True)
        y = wp.zeros(n, dtype=wp.float32, device=cpu, requires_grad=True)
        loss = wp.zeros(1, dtype=wp.float32, device=cpu, requires_grad=True)
        raw = {"x": x.numpy().tobytes(), "y": y.numpy().tobytes(), "loss": loss.numpy().tobytes()}

        tape = wp.Tape()
        with tape:
            wp.launch(k.chain_sin, dim=n, inputs=[x, a], outputs=[y], device=cpu)
            wp.launch(k.chain_loss, dim=n, inputs=[y], outputs=[loss], device=cpu)
        tape.backward(loss=loss)
        wp.synchronize()

        # Check the reference against the closed form before writing it.
        y_ref = np.sin(xs.astype(np.float64)) * a
        assert np.allclose(y.numpy(), y_ref, rtol=1e-5, atol=1e-6)
        assert np.allclose(loss.numpy()[0], (y_ref * y_ref).sum(), rtol=1e-5)
        # y.grad held 2*y after chain_loss's backward, then chain_sin's backward consumed it: the
        # adjoint of the overwrite `y[i] = ...` zeroes y.grad when the adjoint array is y's own
        # .grad (array.h adj_array_store) and ARRAY_FLAG_RETAIN_GRAD is not set.
        assert not np.any(y.grad.numpy())
        assert np.allclose(x.grad.numpy(), 2.0 * y_ref * a * np.cos(xs), rtol=1e-4, atol=1e-5)

        case = "chain_tape"
        arrays = {}
        for ident, arr in (("x", x), ("y", y), ("loss", loss)):
            arrays[ident] = {
                "dtype": self.dtype_name(arr.dtype),
                "shape": list(arr.shape),
                "strides": list(arr.strides),
                "file": self.write(f"cases/{case}/{ident}.bin", raw[ident]),
                "requires_grad": True,
                "expected_file": self.write(f"cases/{case}/{ident}.expected.bin", arr.numpy().tobytes()),
                "grad_expected_file": self.write(f"cases/{case}/{ident}.grad.expected.bin", arr.grad.numpy().tobytes()),
            }

        def aref(name, ident, is_output):
            return {"name": name, "kind": "array", "array": ident, "is_output": is_output}

        self.tape_cases.append(
            {
                "name": case,
                "note": "forward both launches, then backward in reverse order with loss.grad = 1. "
                "Each array's array_t.grad points at its grad buffer and the adjoint argument is that same "
                "buffer; y.grad ends all zeros (chain_sin's backward consumes it), loss.grad stays 1",
                "arrays": arrays,
                "launches": [
                    {
                        "kernel": k.chain_sin.key,
                        "dim": [n],
                        "block_dim": 256,
                        "max_blocks": 0,
                        "args": [
                            aref("x", "x", False),
                            self.scalar_arg("a", wp.float32, a),
                            aref("y", "y", True),
                        ],
                    },
                    {
                        "kernel": k.chain_loss.key,
                        "dim": [n],
                        "block_dim": 256,
                        "max_blocks": 0,
                        "args": [aref("y", "y", False), aref("loss", "loss", True)],
                    },
                ],
                "loss": "loss",
                "loss_grad_seed": 1.0,
            }
        )


if __name__ == "__main__":
    sys.exit(main())
