"""Warp 1.19.0's own examples as a corpus of kernels no one here wrote.

Usage (no GPU needed; NVRTC compiles for sm_90 ahead of time, Warp's CPU
device computes the reference results):

    PYTHONPATH=target/cuda-cache/warp-py python3 tests/warp/corpus.py OUT_DIR [--cases] [--only=EXAMPLE,...] [--jobs=N]

``--jobs=N`` compiles in N processes (not with ``--cases``, which needs the examples
imported in one process); ``--only`` limits the corpus to the examples named.

For every example file under ``warp/examples/{core,optim,tile,fem,geometry,
interop,distributed}`` of the installed wheel, this imports the file (its
``if __name__ == "__main__"`` block does not run), collects the Warp kernels
defined in it, and compiles each Warp module holding them with
``wp.compile_aot_module(module, arch=[90], use_ptx=False, strip_hash=True)``
into ``OUT_DIR/corpus/<example>/<module>/``, at the block dimension the example
launches that module's kernels with (Warp's default 256 when it names none).
Only Warp, numpy and the standard library are importable (other site-packages
are taken off ``sys.path``): an example whose import fails for want of an
optional package (usd, Pillow, torch, jax, cupy, mpi4py, ...) is recorded as
skipped with the package's name, whatever the interpreter has installed.
``build.py`` calls :func:`build_corpus` with ``cases=True``; the ``warp-corpus``
crate's build script runs this file without ``--cases``.

Writes (paths in the manifest are relative to OUT_DIR/corpus):

    corpus/<example>/<module>/wp_<module>.{cu,meta,sm90.cubin}
    corpus/manifest.json
    corpus/cases/...            (with --cases; see build_cases below)

corpus/manifest.json:

    {"warp_version": "1.19.0", "arch": 90,
     "python_root": abs path (holds warp/), "examples_root": abs path (python_root/warp/examples),
     "example_dirs": [str], "skipped_dirs": {dir: reason}, "sys_path_dropped": [str],
     "examples": [{"example": str, "file": "core/example_wave.py",
                   "imported": bool, "skip_reason": str | null,
                   "modules": [MODULE], "skipped": [SKIP],
                   "unresolved_block_dims": [str],   # launches whose kernel or block dim
                                                     # the source does not name statically
                   "config_changes": {setting: value}}],   # wp.config the import changed
     "totals": {"examples": int, "imported": int, "modules": int, "kernels": int,
                "kernels_with_ids": int, "skipped_kernels": int}}
    MODULE = {"module": str, "dir": "<example>/<module>", "block_dim": int,
              "block_dim_from": str, "kernels": [KERNEL]}
    KERNEL = {"kernel": str, "line": int, "params": [PARAM], "launch_ndim": int,
              "takes_ids": bool, "id_params": [str], "id_kinds": [str]}
    PARAM  = {"name": str, "type": str (Warp's type_repr), "kind": "array" | "struct" | "value",
              "dtype": str, "ndim": int (arrays only)}
    SKIP   = {"module": str | null, "kernel": str | null, "reason": str}

``takes_ids`` is true when the kernel's generated forward function reaches a
``wp::mesh_*``, ``wp::volume_*``, ``wp::hash_grid_*`` or ``wp::bvh_*`` builtin
(directly, through the user functions it calls, or through a function it hands
to ``wp.tile_map``) with a first argument (the object id) that comes from one of
its parameters, or reaches one at all and takes a ``uint64`` or a struct: such a kernel needs a ``wp.Mesh`` / ``wp.Volume`` /
``wp.HashGrid`` / ``wp.Bvh`` that only Warp's runtime builds, so it is
compile-only. ``id_params`` names those parameters (``p.field`` for a struct
field) and ``id_kinds`` the builtin families.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Subdirectories of warp/examples that hold examples, in order.
EXAMPLE_DIRS = ["core", "optim", "tile", "fem", "geometry", "interop", "distributed"]
SKIPPED_DIRS = {
    "benchmarks": "benchmarks, not examples: they time Warp against other frameworks",
    "assets": "data files (meshes, volumes, images), no Python",
}
ARCH = 90
DEFAULT_BLOCK_DIM = 256

# The builtin families whose first argument is the id of an object only Warp's runtime builds.
ID_CALL = re.compile(r"\bwp::(mesh|volume|hash_grid|bvh)_\w+\s*\(")


def quiet_environment() -> None:
    """No windows, no interactive backends, no bytecode beside Warp's examples."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("PYGLET_HEADLESS", "1")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    sys.dont_write_bytecode = True


def only_warp_and_numpy(wp) -> list[str]:
    """Drops from ``sys.path`` every directory of third-party packages but the ones holding Warp
    and numpy, so that the corpus is what imports "without optional packages" whatever else the
    interpreter has installed (an example that imports Pillow or usd-core is skipped here even
    where they are installed). Returns the directories dropped."""
    import numpy
    import sysconfig

    keep = {str(Path(m.__file__).resolve().parent.parent) for m in (wp, numpy)}
    stdlib = {str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "platstdlib")}
    dropped = []
    kept = []
    for p in sys.path:
        rp = str(Path(p or ".").resolve())
        third_party = any(part in ("site-packages", "dist-packages") for part in Path(rp).parts)
        if rp in keep or rp == str(HERE) or (not third_party and (rp in stdlib or rp.startswith(tuple(stdlib)))):
            kept.append(p)
        elif third_party or p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
            dropped.append(p)
        else:
            kept.append(p)
    sys.path[:] = kept
    return dropped


def examples_root(wp) -> Path:
    return Path(wp.__file__).resolve().parent / "examples"


def example_files(wp) -> list[tuple[str, Path]]:
    root = examples_root(wp)
    files = []
    for sub in EXAMPLE_DIRS:
        for f in sorted((root / sub).glob("*.py")):
            if f.name == "__init__.py":
                continue
            files.append((sub, f))
    names = [f.stem for _, f in files]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise RuntimeError(f"corpus.py: example names are not unique across {EXAMPLE_DIRS}: {dup}")
    return files


# -- importing one example ------------------------------------------------------------------


def config_snapshot(wp) -> dict:
    """Warp's global settings (``wp.config``) that plain values hold. Some examples change them
    at import (``wp.config.enable_backward = False``); a Warp module takes its defaults from
    them when it is created, so each example is imported and compiled with the settings it set
    and the next one starts from the original settings again."""
    return {
        k: v
        for k, v in vars(wp.config).items()
        if not k.startswith("_") and isinstance(v, (bool, int, float, str, type(None)))
    }


def config_restore(wp, snapshot: dict) -> None:
    for k, v in snapshot.items():
        if getattr(wp.config, k) != v:
            setattr(wp.config, k, v)


def import_example(name: str, path: Path):
    """Imports ``path`` as module ``name`` (so ``__name__ != "__main__"``: its main does not run).

    Returns (module, None) or (None, reason)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    saved_argv = sys.argv
    sys.argv = [str(path)]
    try:
        spec.loader.exec_module(mod)
    except ImportError as e:
        del sys.modules[name]
        missing = getattr(e, "name", None)
        if isinstance(e, ModuleNotFoundError) and missing:
            return None, f"optional package missing: {missing.split('.')[0]} (ModuleNotFoundError: {e})"
        return None, f"optional package missing (ImportError: {e})"
    except Exception as e:  # recorded, and the Rust tests refuse anything but ImportError
        del sys.modules[name]
        return None, f"import raised {type(e).__name__}: {e}"
    finally:
        sys.argv = saved_argv
    return mod, None


def own_kernels(wp, name: str) -> dict:
    """Every Warp module holding a kernel whose Python function is defined in example ``name``:
    {module name: (Module, [Kernel])}. Kernels a module keeps from another example under the same
    module name (``@wp.kernel(module="dft_kernels")`` in two examples) are listed too; the caller
    refuses such a module."""
    from warp._src.context import user_modules

    found = {}
    for mname, module in list(user_modules.items()):
        mine = [k for k in module.kernels.values() if getattr(k.func, "__module__", None) == name]
        if mine:
            found[mname] = (module, list(module.kernels.values()))
    return found


def foreign_kernels(wp, mod, name: str) -> list[tuple[str, str]]:
    """Kernels the example's namespace holds but does not define: (key, where they come from)."""
    import warp._src.context as ctx

    out = []
    for value in vars(mod).values():
        if isinstance(value, ctx.Kernel) and getattr(value.func, "__module__", None) != name:
            out.append((value.key, value.func.__module__))
    return sorted(set(out))


# -- block dims -----------------------------------------------------------------------------


def launch_block_dims(wp, mod, path: Path) -> tuple[dict, list]:
    """The ``block_dim=`` of every ``wp.launch`` / ``wp.launch_tiled`` call in the example's
    source whose kernel and block dim resolve in the module's namespace:
    {kernel key: {block dims}}, and the calls that did not resolve (as text)."""
    import warp._src.context as ctx

    tree = ast.parse(path.read_text(), str(path))
    found: dict[str, set[int]] = {}
    unresolved = []
    namespace = dict(vars(mod))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        fname = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
        if fname not in ("launch", "launch_tiled"):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        kexpr = kw.get("kernel", node.args[0] if node.args else None)
        bexpr = kw.get("block_dim")
        if kexpr is None:
            continue
        kernel = None
        try:
            kernel = eval(compile(ast.Expression(kexpr), str(path), "eval"), namespace)  # noqa: S307
        except Exception:
            pass
        if bexpr is None:
            bd = DEFAULT_BLOCK_DIM
        else:
            try:
                bd = int(eval(compile(ast.Expression(bexpr), str(path), "eval"), namespace))  # noqa: S307
            except Exception:
                bd = None
        if isinstance(kernel, ctx.Kernel) and bd is not None:
            found.setdefault(kernel.key, set()).add(bd)
        elif bexpr is not None:
            unresolved.append(f"line {node.lineno}: {ast.unparse(kexpr)} block_dim={ast.unparse(bexpr)}")
    return found, unresolved


# Launches whose kernel or block dim the source does not name statically: which module they
# launch, and with which block dim (read from the example's source).
BLOCK_DIM_OVERRIDES = {
    # launch_tiled(kernel, ..., block_dim=BLOCK_DIM) with kernel = fft_tiled or ifft_tiled
    ("example_fft_poisson_navier_stokes_2d", "dft_kernels"): "BLOCK_DIM",
    ("example_navier_stokes_perturbation", "dft_kernels"): "BLOCK_DIM",
}


def module_block_dim(mod, example: str, mname: str, kernels, launches) -> tuple[int, str]:
    """The block dim to compile module ``mname`` with, and where it came from."""
    override = BLOCK_DIM_OVERRIDES.get((example, mname))
    if override is not None:
        return int(eval(override, dict(vars(mod)))), f"override: {override} in the example"  # noqa: S307
    dims = set()
    for k in kernels:
        dims |= launches.get(k.key, set())
    if len(dims) == 1:
        bd = dims.pop()
        return bd, f"block_dim={bd} at the example's launches" if bd != DEFAULT_BLOCK_DIM else "Warp's default"
    if not dims:
        return DEFAULT_BLOCK_DIM, "Warp's default (no launch of these kernels in the example's source)"
    raise RuntimeError(
        f"corpus.py: {example}: module {mname}'s kernels are launched with several block dims {sorted(dims)}; "
        "a Warp AOT module runs at one: add it to BLOCK_DIM_OVERRIDES"
    )


# -- reading the generated source -----------------------------------------------------------


def _split_args(text: str) -> list[str]:
    """Top-level comma split of a C argument list."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _calls(body: str):
    """(callee, [argument text]) of every call in ``body`` whose callee is an identifier."""
    for m in re.finditer(r"((?:wp::)?[A-Za-z_]\w*)\s*\(", body):
        start = m.end()
        depth = 1
        i = start
        while i < len(body) and depth:
            if body[i] == "(":
                depth += 1
            elif body[i] == ")":
                depth -= 1
            i += 1
        yield m.group(1), _split_args(body[start : i - 1])


def _functions(cu: str) -> dict:
    """Every function definition in the generated source: {name: (param names, body)}."""
    funcs = {}
    pattern = re.compile(
        r"^(?:static CUDA_CALLABLE|extern \"C\" __global__)\s+[^\n(]*?\b([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{",
        re.M,
    )
    heads = list(pattern.finditer(cu))
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(cu)
        params = [re.findall(r"[A-Za-z_]\w*", p)[-1] for p in _split_args(m.group(2)) if p.strip()]
        body = "\n".join(line.split("//")[0] for line in cu[m.end() : end].splitlines())
        funcs[m.group(1)] = (params, body)
    return funcs


def _aliases(body: str, roots: dict) -> dict:
    """Variables of ``body`` that hold a root's value: {var: root label}. ``roots`` maps a
    variable to its label; ``var_x = var_r;``, ``var_x = var_r.field;``, ``var_x = &var_r...;`` and
    ``wp::copy``/``wp::load``/``wp::address``/``wp::extract`` of them propagate."""
    found = dict(roots)
    assign = re.compile(
        r"\b(var_\w+)\s*=\s*(?:wp::(?:copy|load|address|extract)\s*\()?\s*&?\s*(var_\w+)((?:\.\w+)*)"
    )
    changed = True
    while changed:
        changed = False
        for m in assign.finditer(body):
            dst, src, fields = m.group(1), m.group(2), m.group(3)
            if src in found and dst not in found:
                label = found[src] + fields if fields and "." not in found[src] else found[src]
                found[dst] = label
                changed = True
    return found


def _id_targets(callee: str, args: list[str], reach: dict) -> list[tuple[str, set[str]]]:
    """The arguments of one call that must be object ids, with the builtin families they reach:
    the first argument of an id builtin; the arguments of a user function at the positions that
    reach one; and a user function passed by name (``wp::tile_map(walk_0, a, b)``) applied to
    the arguments after it."""
    fam = ID_CALL.match(callee + "(")
    if fam:
        return [(args[0], {fam.group(1)})] if args else []
    if callee in reach:
        return [(args[i], fams) for i, fams in reach[callee].items() if i < len(args)]
    for j, a in enumerate(args):
        if a in reach:
            rest = args[j + 1 :]
            return [(rest[i], fams) for i, fams in reach[a].items() if i < len(rest)]
    return []


def _reaches(funcs: dict, name: str, seen=None) -> set[str]:
    """The id builtin families function ``name`` calls, directly or through the user functions
    it names (whatever their arguments)."""
    seen = set() if seen is None else seen
    if name in seen:
        return set()
    seen.add(name)
    _, body = funcs[name]
    fams = {m.group(1) for m in ID_CALL.finditer(body)}
    for tok in set(re.findall(r"\b[A-Za-z_]\w*\b", body)):
        if tok in funcs and tok != name:
            fams |= _reaches(funcs, tok, seen)
    return fams


def id_uses(cu: str, kernel_key: str) -> tuple[list[str], list[str], bool]:
    """For kernel ``kernel_key``: the parameters (``name`` or ``name.field``) whose values reach
    the id argument of a mesh / volume / hash grid / BVH builtin in its forward function
    (through copies, struct fields and user functions), the families reached, and whether the
    forward function reaches such a builtin at all (whatever the argument)."""
    funcs = _functions(cu)
    # Which parameter positions of each user function reach an id argument: a fixed point.
    reach: dict[str, dict[int, set[str]]] = {f: {} for f in funcs}
    changed = True
    while changed:
        changed = False
        for fname, (params, body) in funcs.items():
            alias = _aliases(body, {p: str(i) for i, p in enumerate(params)})
            for callee, args in _calls(body):
                for a, fams in _id_targets(callee, args, reach):
                    for tok in re.findall(r"var_\w+", a):
                        if tok in alias:
                            have = reach[fname].setdefault(int(alias[tok].split(".")[0]), set())
                            if not fams <= have:
                                have |= fams
                                changed = True
    fwd = f"{kernel_key}_cuda_kernel_forward"
    if fwd not in funcs:
        raise RuntimeError(f"corpus.py: no {fwd} in the generated source")
    params, body = funcs[fwd]
    alias = _aliases(body, {p: p[len("var_") :] for p in params if p.startswith("var_")})
    names, kinds = set(), set()
    for callee, args in _calls(body):
        for a, fams in _id_targets(callee, args, reach):
            for tok in re.findall(r"var_\w+", a):
                if tok in alias:
                    names.add(alias[tok])
                    kinds |= fams
    return sorted(names), sorted(kinds), bool(_reaches(funcs, fwd))


# -- describing kernels ---------------------------------------------------------------------


def describe_params(wp, kernel) -> list[dict]:
    from warp._src import codegen
    from warp._src import types as wt

    params = []
    for a in kernel.adj.args:
        t = a.type
        d = {"name": a.label, "type": wt.type_repr(t)}
        if wt.is_array(t):
            d.update(kind="array", dtype=wt.type_repr(t.dtype), ndim=t.ndim)
        elif isinstance(t, codegen.Struct):
            d.update(kind="struct", dtype=t.key)
        else:
            d.update(kind="value", dtype=wt.type_repr(t))
        params.append(d)
    return params


def kernel_line(kernel) -> int:
    try:
        return int(kernel.func.__code__.co_firstlineno)
    except AttributeError:
        return 0


# -- the corpus -----------------------------------------------------------------------------


def compile_example(wp, sub: str, path: Path, corpus: Path) -> dict:
    name = path.stem
    entry = {
        "example": name,
        "file": f"{sub}/{path.name}",
        "imported": False,
        "skip_reason": None,
        "modules": [],
        "skipped": [],
    }
    mod, reason = import_example(name, path)
    if mod is None:
        entry["skip_reason"] = reason
        return entry
    entry["imported"] = True
    for key, origin in foreign_kernels(wp, mod, name):
        entry["skipped"].append(
            {"module": None, "kernel": key, "reason": f"imported from {origin}, not defined here (compiled there)"}
        )
    found = own_kernels(wp, name)
    if not found:
        entry["skip_reason"] = (
            "no Warp kernel is defined at import (warp.fem builds its kernels from integrands at run time)"
            if sub == "fem"
            else "no Warp kernel is defined at import"
        )
        return entry
    launches, unresolved = launch_block_dims(wp, mod, path)
    entry["unresolved_block_dims"] = unresolved
    for mname, (module, kernels) in sorted(found.items()):
        foreign = [k.key for k in kernels if getattr(k.func, "__module__", None) != name]
        if foreign:
            entry["skipped"].append(
                {"module": mname, "kernel": None, "reason": f"module also holds kernels of another example: {foreign}"}
            )
            continue
        compilable = []
        for k in sorted(kernels, key=lambda k: k.key):
            if k.is_generic and not k.overloads:
                entry["skipped"].append(
                    {
                        "module": mname,
                        "kernel": k.key,
                        "reason": "generic kernel without overloads: nothing to compile ahead of time "
                        "(Warp specializes it for the argument types of each launch)",
                    }
                )
            elif k.is_generic and len(k.overloads) > 1:
                entry["skipped"].append(
                    {
                        "module": mname,
                        "kernel": k.key,
                        "reason": f"generic kernel with {len(k.overloads)} overloads: strip_hash=True cannot "
                        "name them apart",
                    }
                )
            else:
                compilable.append(k)
        if not compilable:
            continue
        if len(compilable) != len(kernels):
            multi = [k.key for k in kernels if k.is_generic and len(k.overloads) > 1]
            if multi:
                entry["skipped"].append(
                    {
                        "module": mname,
                        "kernel": None,
                        "reason": f"not compiled: strip_hash=True fails for the overloaded generic kernels {multi}",
                    }
                )
                continue
        block_dim, block_from = module_block_dim(mod, name, mname, compilable, launches)
        rel = f"{name}/{mname}"
        out = corpus / rel
        if out.exists():
            shutil.rmtree(out)
        wp.set_module_options({"block_dim": block_dim}, module)
        started = time.perf_counter()
        try:
            wp.compile_aot_module(module, arch=[ARCH], module_dir=str(out), use_ptx=False, strip_hash=True)
        except Exception as e:
            entry["skipped"].append(
                {"module": mname, "kernel": None, "reason": f"compile_aot_module raised {type(e).__name__}: {e}"}
            )
            if out.exists():
                shutil.rmtree(out)
            continue
        cu = (out / f"wp_{mname}.cu").read_text()
        described = []
        for k in compilable:
            kk = next(iter(k.overloads.values())) if k.is_generic else k
            ids, kinds, reaches = id_uses(cu, k.key)
            params = describe_params(wp, kk)
            # Conservative: a kernel that reaches an id builtin and takes a uint64 or a struct
            # takes ids even where the data flow above lost the track.
            maybe_id = any(p["dtype"] == "uint64" or p["kind"] == "struct" for p in params)
            described.append(
                {
                    "kernel": k.key,
                    "line": kernel_line(k),
                    "params": params,
                    "launch_ndim": getattr(kk.adj, "kernel_dim", None),
                    "takes_ids": bool(ids) or (reaches and maybe_id),
                    "id_params": ids,
                    "id_kinds": kinds,
                }
            )
        entry["modules"].append(
            {"module": mname, "dir": rel, "block_dim": block_dim, "block_dim_from": block_from, "kernels": described}
        )
        print(f"corpus: {name}/{mname}: {len(described)} kernels, block_dim {block_dim}, "
              f"{time.perf_counter() - started:.1f} s")
    # A later example that registers kernels under the same Warp module name (two examples use
    # module="dft_kernels") gets a fresh module; these kernels keep theirs for the reference runs.
    from warp._src.context import user_modules

    for mname in found:
        user_modules.pop(mname, None)
    return entry


def compile_examples(wp, corpus: Path, files: list[tuple[str, Path]]) -> list[dict]:
    """Imports and compiles each example of ``files`` into ``corpus`` (in this process)."""
    baseline = config_snapshot(wp)
    entries = []
    for sub, path in files:
        try:
            entry = compile_example(wp, sub, path, corpus)
        finally:
            entry_config = config_snapshot(wp)
            config_restore(wp, baseline)
        entry["config_changes"] = {k: v for k, v in entry_config.items() if baseline.get(k) != v}
        entries.append(entry)
        n = sum(len(m["kernels"]) for m in entry["modules"])
        status = f"{len(entry['modules'])} modules, {n} kernels" if entry["imported"] else "skipped"
        print(f"corpus: {entry['file']}: {status}" + (f" ({entry['skip_reason']})" if entry["skip_reason"] else ""))
    return entries


def _cost(sub: str, path: Path) -> int:
    """A rough compile time, to share the examples between workers: tile kernels (and the
    examples that FFT with tiles) take NVRTC several seconds a module, the others under one."""
    if sub == "tile" or "fft" in path.stem or "navier_stokes_perturbation" in path.stem:
        return 8
    return 1


def compile_in_workers(corpus: Path, files: list[tuple[str, Path]], jobs: int) -> list[dict]:
    """Compiles the examples in ``jobs`` processes (``corpus.py OUT --part=N --only=...``), each
    importing its share, and returns the entries in the order of ``files``."""
    import subprocess

    shares: list[list[str]] = [[] for _ in range(jobs)]
    load = [0] * jobs
    for sub, path in sorted(files, key=lambda f: -_cost(*f)):
        w = load.index(min(load))
        shares[w].append(path.stem)
        load[w] += _cost(sub, path)
    procs = []
    for n, share in enumerate(shares):
        if not share:
            continue
        cmd = [sys.executable, "-B", str(Path(__file__).resolve()), str(corpus.parent), f"--part={n}"]
        cmd.append("--only=" + ",".join(share))
        procs.append((n, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    entries = {}
    failed = []
    for n, proc in procs:
        output, _ = proc.communicate()
        sys.stdout.write(output)
        part = corpus / f"manifest.part{n}.json"
        if proc.returncode != 0 or not part.is_file():
            failed.append(f"worker {n} exited with {proc.returncode}:\n{output[-4000:]}")
            continue
        for e in json.loads(part.read_text()):
            entries[e["example"]] = e
        part.unlink()
    if failed:
        raise RuntimeError("corpus.py: " + "\n".join(failed))
    return [entries[path.stem] for _, path in files]


def compile_corpus(wp, out: Path, only: set[str] | None = None, jobs: int = 1) -> dict:
    """Compiles every example's modules (or those named in ``only``) into ``out/corpus`` and
    writes ``out/corpus/manifest.json``; with ``jobs`` > 1 in that many processes (the reference
    cases need the examples imported here: build.py compiles in this process)."""
    quiet_environment()
    dropped = only_warp_and_numpy(wp)
    corpus = out / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    corpus.mkdir(parents=True)
    files = [(sub, path) for sub, path in example_files(wp) if only is None or path.stem in only]
    started = time.perf_counter()
    if jobs > 1:
        examples = compile_in_workers(corpus, files, jobs)
    else:
        examples = compile_examples(wp, corpus, files)
    kernels = [k for e in examples for m in e["modules"] for k in m["kernels"]]
    manifest = {
        "warp_version": wp.__version__,
        "arch": ARCH,
        # Where the examples are on this machine (not in any checked-in output): ``file`` below
        # is relative to examples_root, which is python_root/warp/examples.
        "python_root": str(examples_root(wp).parent.parent),
        "examples_root": str(examples_root(wp)),
        "example_dirs": EXAMPLE_DIRS,
        "skipped_dirs": SKIPPED_DIRS,
        # Directories of other third-party packages taken off sys.path (only_warp_and_numpy).
        "sys_path_dropped": dropped,
        "examples": examples,
        "totals": {
            "examples": len(examples),
            "imported": sum(e["imported"] for e in examples),
            "modules": sum(len(e["modules"]) for e in examples),
            "kernels": len(kernels),
            "kernels_with_ids": sum(k["takes_ids"] for k in kernels),
            "skipped_kernels": sum(1 for e in examples for s in e["skipped"] if s["kernel"]),
        },
    }
    (corpus / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    t = manifest["totals"]
    print(
        f"corpus: {t['examples']} examples, {t['imported']} imported, {t['modules']} modules, "
        f"{t['kernels']} kernels ({t['kernels_with_ids']} take object ids) in {corpus}, "
        f"{time.perf_counter() - started:.1f} s with {jobs} process(es)"
    )
    return manifest


# -- reference cases: the examples' own launch sequences on Warp's CPU device ----------------
#
# Layout (paths relative to OUT_DIR/corpus):
#
#     cases/manifest.json
#     cases/<example>.bin      the array states of the case, back to back
#
# cases/manifest.json:
#
#     {"warp_version": "1.19.0", "cases": [CASE], "not_run": [{"example": str, "reason": str}]}
#     CASE   = {"example": str, "note": str,
#               "modules": {module: {"dir": "<example>/<module>", "block_dim": int}},
#               "blob": "cases/<example>.bin",
#               "arrays": [{"dtype": str, "shape": [int], "strides": [int bytes], "bytes": int}],
#               "states": [STATE], "launches": [LAUNCH],
#               "host_launches": [{"kernel": str, "reason": str}]}
#     STATE  = {"array": int, "base": int | null, "runs": [[offset, length, blob_offset]]}
#              an array's whole content: the base state's bytes (zeros when null) with each run
#              of ``length`` bytes at ``offset`` replaced by the blob's bytes at ``blob_offset``
#     LAUNCH = {"module": str, "kernel": str, "dim": [int], "tiled": bool, "block_dim": int,
#               "args": [ARG], "before": [[array, state]], "after": [[array, state]]}
#              ``dim`` is as the example passed it (``launch_tiled`` appends the block dim);
#              ``before``/``after``: every array argument's state before and after Warp's CPU
#              ran the launch (whatever ran between launches, ``zero_()``, ``fill_()``, a
#              launch of a kernel outside the corpus, shows in the next ``before``).
#     ARG    = {"name": str, "kind": "array", "array": int}
#            | {"name": str, "kind": "value", "dtype": str, "bytes_hex": str}
#              the value's bytes as Warp packs them for the kernel


class _Graph:
    """A captured sequence of launches, replayed by the recorder's ``capture_launch``."""

    def __init__(self):
        self.launches = []


class Recorder:
    """Runs an example's launches on Warp's CPU device and records each one: the kernel, the
    dims, the argument values, and every array argument's content before and after."""

    def __init__(self, wp, example: str, compiled: dict):
        self.wp = wp
        self.example = example
        self.compiled = compiled  # id(Kernel) -> (module name, kernel key)
        self.arrays = {}  # (ptr, dtype, shape) -> index
        self.array_info = []
        self.known = {}  # array index -> (state, bytes)
        self.states = []
        self.blob = bytearray()
        self.launches = []
        self.host_launches = []
        self.capturing = None
        # Per recorded launch: the kernel object and the argument values as given (for the tape).
        self.py_launches = []
        # Per array index: its bytes when first seen (the tape program's inputs).
        self.first_bytes = {}

    # -- array states --------------------------------------------------------------------

    def array_index(self, arr) -> int:
        from warp._src import types as wt

        if not arr.is_contiguous:
            raise RuntimeError(f"corpus.py: {self.example}: a non-contiguous array argument is not recorded")
        key = (arr.ptr, wt.type_repr(arr.dtype), tuple(arr.shape))
        for (ptr, _, _), i in self.arrays.items():
            if ptr == arr.ptr and (ptr, key[1], key[2]) != key:
                raise RuntimeError(f"corpus.py: {self.example}: two array arguments share storage {ptr:#x}")
        if key not in self.arrays:
            self.arrays[key] = len(self.array_info)
            self.array_info.append(
                {"dtype": key[1], "shape": list(arr.shape), "strides": list(arr.strides), "bytes": arr.capacity}
            )
        return self.arrays[key]

    def state(self, index: int, data: bytes) -> int:
        import numpy as np

        prev = self.known.get(index)
        if prev is not None and prev[1] == data:
            return prev[0]
        base_bytes = prev[1] if prev is not None else bytes(len(data))
        a = np.frombuffer(base_bytes, np.uint8)
        b = np.frombuffer(data, np.uint8)
        diff = np.flatnonzero(a != b)
        runs = []
        if diff.size:
            # Runs of changed bytes, merging gaps shorter than 64 bytes.
            breaks = np.flatnonzero(np.diff(diff) > 64)
            starts = np.concatenate(([diff[0]], diff[breaks + 1]))
            ends = np.concatenate((diff[breaks], [diff[-1]])) + 1
            for s0, e0 in zip(starts.tolist(), ends.tolist()):
                runs.append([s0, e0 - s0, len(self.blob)])
                self.blob += data[s0:e0]
        check = bytearray(base_bytes)
        for off, n, at in runs:
            check[off : off + n] = self.blob[at : at + n]
        if bytes(check) != data:
            raise RuntimeError(f"corpus.py: {self.example}: a recorded state does not rebuild its array")
        self.states.append({"array": index, "base": prev[0] if prev is not None else None, "runs": runs})
        sid = len(self.states) - 1
        self.known[index] = (sid, data)
        return sid

    # -- launches ------------------------------------------------------------------------

    def launch(self, real, tiled, kernel, dim, inputs=(), outputs=(), block_dim=None, **kw):
        wp = self.wp
        if self.capturing is not None:
            self.capturing.launches.append((tiled, kernel, dim, list(inputs), list(outputs), block_dim, kw))
            return None
        values = list(inputs) + list(outputs)
        where = self.compiled.get(id(kernel))
        reason = None
        if where is None:
            reason = "kernel not in the corpus (defined at run time or in Warp)"
        elif kw.get("adjoint") or kw.get("adj_inputs") or kw.get("adj_outputs"):
            reason = "adjoint launch"
        elif kw.get("record_cmd"):
            reason = "record_cmd launch"
        elif kw.get("max_blocks"):
            reason = "max_blocks launch"
        if reason is not None:
            self.host_launches.append({"kernel": kernel.key, "reason": reason})
            args = {"block_dim": block_dim} if block_dim is not None else {}
            return real(kernel, dim=dim, inputs=inputs, outputs=outputs, **args, **kw)
        from warp._src.context import pack_arg
        from warp._src import types as wt

        args = []
        arrays = []
        for param, value in zip(kernel.adj.args, values):
            if wt.is_array(param.type):
                i = self.array_index(value)
                args.append({"name": param.label, "kind": "array", "array": i})
                arrays.append((i, value))
            else:
                packed = pack_arg(kernel, param.type, param.label, value, "cpu")
                args.append(
                    {"name": param.label, "kind": "value", "dtype": wt.type_repr(param.type), "bytes_hex": bytes(packed).hex()}
                )
        if len(values) != len(kernel.adj.args):
            raise RuntimeError(f"corpus.py: {self.example}: {kernel.key} launched with {len(values)} arguments")
        for i, a in arrays:
            self.first_bytes.setdefault(i, a.numpy().tobytes())
        before = _unique([[i, self.state(i, a.numpy().tobytes())] for i, a in arrays])
        run_kw = dict(kw)
        if block_dim is not None:
            run_kw["block_dim"] = block_dim
        result = real(kernel, dim=dim, inputs=inputs, outputs=outputs, device="cpu", **run_kw)
        wp.synchronize_device("cpu")
        after = _unique([[i, self.state(i, a.numpy().tobytes())] for i, a in arrays])
        dims = [int(d) for d in dim] if isinstance(dim, (list, tuple)) else [int(dim)]
        self.py_launches.append((kernel, tiled, list(values), block_dim))
        self.launches.append(
            {
                "module": where[0],
                "kernel": where[1],
                "dim": dims,
                "tiled": tiled,
                "block_dim": int(block_dim) if block_dim is not None else DEFAULT_BLOCK_DIM,
                "args": args,
                "before": before,
                "after": after,
            }
        )
        return result

    def capture_launch(self, graph, stream=None):
        for tiled, kernel, dim, inputs, outputs, block_dim, kw in graph.launches:
            real = self._real_tiled if tiled else self._real_launch
            self.launch(real, tiled, kernel, dim, inputs, outputs, block_dim, **kw)

    # -- patching Warp's launch functions --------------------------------------------------

    def __enter__(self):
        wp = self.wp
        self._saved = {n: getattr(wp, n) for n in ("launch", "launch_tiled", "ScopedCapture", "capture_launch")}
        self._real_launch = self._saved["launch"]
        self._real_tiled = self._saved["launch_tiled"]
        recorder = self

        def launch(kernel, dim, inputs=(), outputs=(), *rest, block_dim=None, **kw):
            if rest:
                raise RuntimeError(f"corpus.py: {recorder.example}: positional launch arguments after outputs")
            kw.pop("device", None)
            return recorder.launch(recorder._real_launch, False, kernel, dim, inputs, outputs, block_dim, **kw)

        def launch_tiled(kernel, dim=None, inputs=(), outputs=(), block_dim=None, **kw):
            kw.pop("device", None)
            return recorder.launch(recorder._real_tiled, True, kernel, dim, inputs, outputs, block_dim, **kw)

        class ScopedCapture:
            def __init__(self, *a, **k):
                self.graph = None

            def __enter__(self):
                recorder.capturing = _Graph()
                return self

            def __exit__(self, *exc):
                self.graph, recorder.capturing = recorder.capturing, None
                return False

        wp.launch = launch
        wp.launch_tiled = launch_tiled
        wp.ScopedCapture = ScopedCapture
        wp.capture_launch = self.capture_launch
        self._device = wp.ScopedDevice("cpu")
        self._device.__enter__()
        return self

    def __exit__(self, *exc):
        self._device.__exit__(*exc)
        for n, v in self._saved.items():
            setattr(self.wp, n, v)
        return False

    def case(self, note: str, modules: dict) -> dict:
        return {
            "example": self.example,
            "note": note,
            "modules": modules,
            "blob": f"cases/{self.example}.bin",
            "arrays": self.array_info,
            "states": self.states,
            "launches": self.launches,
            "host_launches": self.host_launches,
        }


# -- the tape: the first launches of a case, forward and backward under Warp's tape ---------
#
# CASE gains "tape" (or "tape_not_run": why): the first TAPE_LAUNCHES recorded launches
# replayed as one program on Warp's CPU device under wp.Tape: every array starts from its
# content when the case first passed it (work between launches is not repeated), float
# arrays with requires_grad; then tape.backward(grads=...) with a seed of its own for every
# float array. TAPE = {"launches": int, "blob": "cases/<example>.tape.bin",
#   "seeds": [[array, blob_offset]], "values": [[array, blob_offset]], "grads": [[array, blob_offset]]}
# (each an array's whole content, its "bytes" long).

TAPE_LAUNCHES = 24


def is_float_dtype(wp, dtype) -> bool:
    from warp._src import types as wt

    return wt.type_scalar_type(dtype) in (wp.float16, wp.float32, wp.float64)


def tape_case(wp, rec, example: str):
    """Runs the first TAPE_LAUNCHES launches of ``rec`` under Warp's tape (see above); the TAPE
    entry and its blob."""
    import numpy as np

    rng = np.random.default_rng(7)
    blob = bytearray()

    def put(data: bytes) -> int:
        at = len(blob)
        blob.extend(data)
        return at

    arrays = {}
    n = min(len(rec.launches), TAPE_LAUNCHES)
    tape = wp.Tape()
    with wp.ScopedDevice("cpu"), tape:
        for l, (kernel, tiled, values, block_dim) in zip(rec.launches[:n], rec.py_launches[:n]):
            inputs = []
            for a, v in zip(l["args"], values):
                if a["kind"] != "array":
                    inputs.append(v)
                    continue
                i = a["array"]
                if i not in arrays:
                    info = rec.array_info[i]
                    arr = wp.empty(shape=tuple(info["shape"]), dtype=v.dtype, device="cpu",
                                   requires_grad=is_float_dtype(wp, v.dtype))
                    raw = np.frombuffer(rec.first_bytes[i], np.uint8)
                    arr.numpy().view(np.uint8).reshape(-1)[:] = raw
                    arrays[i] = arr
                inputs.append(arrays[i])
            kw = {"block_dim": block_dim} if block_dim is not None else {}
            launch = wp.launch_tiled if tiled else wp.launch
            launch(kernel, dim=l["dim"], inputs=inputs, device="cpu", **kw)
    seeds, seeded = {}, []
    for i, arr in sorted(arrays.items()):
        if arr.requires_grad:
            shape = arr.numpy().shape
            seed = wp.array(rng.uniform(-1.0, 1.0, size=shape).astype(arr.numpy().dtype), dtype=arr.dtype, device="cpu")
            seeds[arr] = seed
            seeded.append([i, put(seed.numpy().tobytes())])
    if not seeded:
        return None, bytes(blob)
    tape.backward(grads=seeds)
    wp.synchronize_device("cpu")
    values = [[i, put(arr.numpy().tobytes())] for i, arr in sorted(arrays.items())]
    grads = [[i, put(arr.grad.numpy().tobytes())] for i, arr in sorted(arrays.items()) if arr.requires_grad]
    entry = {"launches": n, "blob": f"cases/{example}.tape.bin", "seeds": seeded, "values": values, "grads": grads}
    return entry, bytes(blob)


def _unique(pairs):
    seen, out = set(), []
    for i, s in pairs:
        if i not in seen:
            seen.add(i)
            out.append([i, s])
    return out


# What each chosen example runs: its own code where it has an Example class (with fewer
# substeps or iterations than its defaults, to keep the data small), else its __main__
# block's launches with the same data. Each returns a note for the manifest.


def drive_wave(wp, m):
    ex = m.Example(stage_path=None)
    ex.sim_substeps = 2
    ex.step()
    ex.step()
    return "Example(stage_path=None): 2 frames of 2 substeps (the example runs 16), 128 x 128 grid"


def drive_fluid(wp, m):
    ex = m.Example()
    # The example captures 100 pressure iterations; 4 show the same sequence.
    ex.iterations = 4
    with wp.ScopedCapture() as capture:
        ex.pressure_iterations()
    ex.graph = capture.graph
    ex.sim_substeps = 1
    ex.step()
    ex.step()
    return "Example(): 2 frames of 1 substep (the example runs 2) with 4 pressure iterations (it runs 100), 256 x 128 grid"


def drive_fdtd_3d(wp, m):
    ex = m.Example()
    for frame in range(3):
        ex.step_and_render_frame(frame)
    ex._check_em_energy(3)
    ex.e_x_center_plane()
    return "Example(): 3 timesteps on the 128^3 grid, then the energy diagnostic and the E_x center plane"


def drive_graph_capture(wp, m):
    ex = m.Example()
    ex.step()
    ex.step()
    return "Example(): 2 frames, each slide and the captured 16 fbm octaves, 128 x 128"


def drive_tile_fft(wp, m):
    import numpy as np

    x_h = np.ones((m.TILE_M, m.TILE_N, 2), dtype=np.float64)
    x_h[:, :, 1] = 0
    y_h = 3 * np.ones((m.TILE_M, m.TILE_N, 2), dtype=np.float64)
    x_wp = wp.array2d(x_h, dtype=wp.vec2d)
    y_wp = wp.array2d(y_h, dtype=wp.vec2d)
    wp.launch_tiled(m.fft_tiled, dim=[1, 1], inputs=[x_wp], outputs=[y_wp], block_dim=m.BLOCK_DIM)
    return "the __main__ block's launch and data"


def drive_tile_convolution(wp, m):
    import numpy as np

    rng = np.random.default_rng(42)
    x_h = rng.standard_normal((m.TILE_M, m.TILE_N, 2), dtype=np.float64)
    y_h = np.zeros_like(x_h)
    x_wp = wp.array2d(x_h, dtype=wp.vec2d)
    y_wp = wp.array2d(y_h, dtype=wp.vec2d)
    wp.launch_tiled(m.conv_tiled, dim=[1, 1], inputs=[x_wp], outputs=[y_wp], block_dim=m.BLOCK_DIM)
    return "the __main__ block's launch and data"


def drive_tile_filtering(wp, m):
    import numpy as np

    rng = np.random.default_rng(42)
    t = np.linspace(0, 2 * np.pi, m.TILE_N, dtype=np.float64)
    x = np.sin(t) + 0.5 * rng.random(m.TILE_N, dtype=np.float64)
    f = np.ones_like(x)
    freq = np.fft.fftfreq(m.TILE_N)
    f[np.abs(freq) > 0.05] = 0.0
    f[np.abs(freq) <= 0.05] = 1.0
    x_h = np.zeros((m.TILE_M, m.TILE_N, 2), dtype=np.float64)
    f_h = np.zeros_like(x_h)
    y_h = np.zeros_like(f_h)
    x_h[:, :, 0] = x
    f_h[:, :, 0] = f
    x_wp = wp.array2d(x_h, dtype=wp.vec2d)
    f_wp = wp.array2d(f_h, dtype=wp.vec2d)
    y_wp = wp.array2d(y_h, dtype=wp.vec2d)
    wp.launch_tiled(m.conv_tiled, dim=[1, 1], inputs=[x_wp, f_wp], outputs=[y_wp], block_dim=m.BLOCK_DIM)
    return "the __main__ block's launch and data"


def drive_alloc_tracker(wp, m):
    import numpy as np

    # Its readback staging buffer is pinned host memory, which needs CUDA: allocated plain here
    # (no kernel uses it).
    zeros = wp.zeros
    wp.zeros = lambda *a, pinned=False, **k: zeros(*a, **k)
    try:
        sim = m.ParticleSim(1024, "cpu")
    finally:
        wp.zeros = zeros
    sim.dt = 0.05
    for _ in range(15):
        sim.step()
    y = sim.positions.numpy()[:, 1]
    if not (y == 0.0).any():
        raise RuntimeError("corpus.py: example_alloc_tracker: no particle reached the ground")
    return (
        "ParticleSim(1024) (the example simulates 200000; its pinned staging buffer unpinned) with dt 0.05 "
        "(it steps 1/60): 15 steps, "
        f"{int((y == 0.0).sum())} particles end on the ground (enforce_ground's branch runs)"
    )


DRIVERS = {
    "example_wave": drive_wave,
    "example_fluid": drive_fluid,
    "example_fdtd_3d": drive_fdtd_3d,
    "example_graph_capture": drive_graph_capture,
    "example_tile_fft": drive_tile_fft,
    "example_tile_convolution": drive_tile_convolution,
    "example_tile_filtering": drive_tile_filtering,
    "example_alloc_tracker": drive_alloc_tracker,
}


def build_cases(wp, out: Path, manifest: dict) -> dict:
    """Runs each example of DRIVERS on Warp's CPU device through a Recorder and writes
    ``out/corpus/cases``. The examples must have been imported and compiled by
    :func:`compile_corpus` in this process (their kernels are the compiled ones)."""
    corpus = out / "corpus"
    cases_dir = corpus / "cases"
    if cases_dir.exists():
        shutil.rmtree(cases_dir)
    cases_dir.mkdir(parents=True)
    cases, not_run = [], []
    by_name = {e["example"]: e for e in manifest["examples"]}
    for name, drive in DRIVERS.items():
        entry = by_name.get(name)
        if entry is None or not entry["imported"]:
            not_run.append({"example": name, "reason": entry["skip_reason"] if entry else "not in the corpus"})
            continue
        mod = sys.modules[name]
        compiled, modules = {}, {}
        for m in entry["modules"]:
            modules[m["module"]] = {"dir": m["dir"], "block_dim": m["block_dim"]}
            for k in m["kernels"]:
                if k["takes_ids"]:
                    raise RuntimeError(f"corpus.py: {name}: {k['kernel']} takes object ids; no reference run")
        from warp._src.context import Kernel

        for value in vars(mod).values():
            if isinstance(value, Kernel) and value.module.name in modules:
                compiled[id(value)] = (value.module.name, value.key)
        started = time.perf_counter()
        baseline = config_snapshot(wp)
        config_restore(wp, {**baseline, **entry.get("config_changes", {})})
        try:
            with Recorder(wp, name, compiled) as rec:
                note = drive(wp, mod)
        finally:
            config_restore(wp, baseline)
        (cases_dir / f"{name}.bin").write_bytes(bytes(rec.blob))
        case = rec.case(note, modules)
        if entry.get("config_changes", {}).get("enable_backward") is False:
            case["tape_not_run"] = "the example sets wp.config.enable_backward = False: no adjoint kernels"
        else:
            config_restore(wp, {**baseline, **entry.get("config_changes", {})})
            try:
                tape, tape_blob = tape_case(wp, rec, name)
            finally:
                config_restore(wp, baseline)
            if tape is None:
                case["tape_not_run"] = "no float array among the first launches"
            else:
                (cases_dir / f"{name}.tape.bin").write_bytes(tape_blob)
                case["tape"] = tape
        cases.append(case)
        print(
            f"corpus: case {name}: {len(rec.launches)} launches of {len({l['kernel'] for l in rec.launches})} kernels, "
            f"{len(rec.blob)} bytes of states, {time.perf_counter() - started:.1f} s"
        )
    doc = {"warp_version": wp.__version__, "cases": cases, "not_run": not_run}
    (cases_dir / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def build_corpus(wp, out: Path, cases: bool, only: set[str] | None = None, jobs: int = 1) -> None:
    """The corpus (and, with ``cases``, the reference cases) under ``out/corpus``."""
    if cases:
        jobs = 1
    manifest = compile_corpus(wp, out, only, jobs)
    if cases:
        build_cases(wp, out, manifest)


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {a.split("=")[0]: a.partition("=")[2] for a in sys.argv[1:] if a.startswith("--")}
    if len(args) != 1 or set(flags) - {"--cases", "--only", "--jobs", "--part"}:
        print("usage: corpus.py OUT_DIR [--cases] [--only=EXAMPLE,...] [--jobs=N]", file=sys.stderr)
        return 2
    only = set(flags["--only"].split(",")) if "--only" in flags else None
    jobs = max(1, min(8, int(flags.get("--jobs") or 1)))
    out = Path(args[0]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    quiet_environment()
    import warp as wp

    if wp.__version__ != "1.19.0":
        print(f"corpus.py: expected warp-lang 1.19.0, found {wp.__version__}", file=sys.stderr)
        return 1
    wp.config.kernel_cache_dir = str(out / ".warp-cache")
    wp.config.quiet = True
    # References on Warp's CPU device for a generic x86-64, as build.py computes them.
    wp.config.cpu_compiler_flags = ""
    wp.init()
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    try:
        if "--part" in flags:
            # A worker of compile_in_workers: its share, into the directory the parent made.
            corpus = out / "corpus"
            only_warp_and_numpy(wp)
            files = [(sub, p) for sub, p in example_files(wp) if only is not None and p.stem in only]
            entries = compile_examples(wp, corpus, files)
            (corpus / f"manifest.part{int(flags['--part'])}.json").write_text(json.dumps(entries))
            return 0
        build_corpus(wp, out, "--cases" in flags, only, jobs)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
