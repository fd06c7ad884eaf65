"""warp-build's compile step: Warp 1.19.0 compiles one module ahead of time.

Run by the warp-build crate as `python -B -c <this file> REQUEST_JSON`. REQUEST_JSON:

    {"source": abs path of a .py file or a package directory,
     "module": the module name (file stem or directory name),
     "archs": [int] or null (null: every arch Warp's NVRTC compiles from sm_75 up),
     "block_dim": int,
     "cpu": bool (also Warp's generated C++ for the CPU, wp_<module>.cpp),
     "out_dir": abs path,
     "kernel_cache_dir": abs path (Warp's kernel cache, kept out of $HOME),
     "exclude": [abs path] (directories whose modules are not the user's sources),
     "warp_version": "1.19.0"}

Everything Warp or the user's module prints goes to stderr; stdout carries one JSON
object, the summary:

    {"ok": true, "warp_version": str, "module": str, "block_dim": int, "archs": [int],
     "files": [file name in out_dir], "kernels": [key],
     "sources": [abs path of every .py file of the user's that was imported],
     "warp_dir": abs path of the imported warp package (its native/ holds the headers),
     "nvrtc_dir": abs path of the directory holding NVRTC 12.0's libnvrtc (the
         nvidia-cuda-nvrtc-cu12 wheel beside warp-lang) or null,
     "fast_math": bool, "fuse_fp": bool (the module's options, for the PTX fallback)}

PTX is not Warp's to write here: warp-build compiles the .cu with NVRTC 12.0 itself.
    {"ok": false, "stage": "import" | "version" | "arch" | "compile" | "output" | "internal",
     "error": str, "error_type": str, "supported_archs": [int] (stage "arch" only)}
"""

import json
import os
import sys
import traceback


def fail(stage, message, error_type="", **extra):
    return {"ok": False, "stage": stage, "error": message, "error_type": error_type, **extra}


def under(path, root):
    path = os.path.abspath(path)
    root = os.path.abspath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def import_source(source, module):
    import importlib.util

    if os.path.isdir(source):
        init = os.path.join(source, "__init__.py")
        spec = importlib.util.spec_from_file_location(module, init, submodule_search_locations=[source])
        root = source
        # Sibling packages and modules of the package resolve as they would for its users.
        sys.path.insert(0, os.path.dirname(source))
    else:
        spec = importlib.util.spec_from_file_location(module, source)
        root = os.path.dirname(source)
        sys.path.insert(0, root)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    return mod, root


def user_sources(root, exclude):
    found = set()
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if not f or not f.endswith(".py"):
            continue
        f = os.path.abspath(f)
        if under(f, root) and not any(under(f, e) for e in exclude):
            found.add(f)
    return sorted(found)


def compile_cpu(wp, mod, module, out_dir):
    """Warp's generated C++ for the CPU: wp_<module>.cpp. warp-build compiles it itself
    (with the `cc` crate), so the object Warp's own LLVM builds beside it is removed.
    Empty cpu_compiler_flags: portable code generation (no -march=native, no warning)."""
    meta = os.path.join(out_dir, f"wp_{module}.meta")
    with open(meta, "rb") as f:
        cuda_meta = f.read()
    wp.set_module_options({"cpu_compiler_flags": ""}, mod)
    wp.compile_aot_module(mod, device="cpu", module_dir=out_dir, strip_hash=True)
    # The CUDA compile's metadata stays the module's .meta (the CPU compile rewrites it).
    with open(meta, "wb") as f:
        f.write(cuda_meta)
    prefix = f"wp_{module}."
    for name in os.listdir(out_dir):
        if name.startswith(prefix) and name.endswith(".o"):
            os.remove(os.path.join(out_dir, name))


def run(req):
    # The working directory (a crate's manifest directory under cargo) is not a source of modules.
    sys.path[:] = [p for p in sys.path if p not in ("", ".")]
    sys.dont_write_bytecode = True

    import warp as wp

    if wp.__version__ != req["warp_version"]:
        return fail(
            "version",
            f"warp-lang {wp.__version__} was imported from {os.path.dirname(wp.__file__)}, "
            f"but warp-build needs warp-lang {req['warp_version']}",
        )
    wp.config.kernel_cache_dir = req["kernel_cache_dir"]
    wp.config.quiet = True
    wp.init()

    from warp._src.context import runtime

    supported = sorted(int(a) for a in runtime.nvrtc_supported_archs)
    archs = req["archs"]
    if archs is None:
        archs = [a for a in supported if a >= 75]
    else:
        unknown = [a for a in archs if a not in supported]
        if unknown:
            return fail(
                "arch",
                f"Warp {wp.__version__}'s NVRTC does not compile for "
                + ", ".join(f"sm_{a}" for a in unknown),
                supported_archs=supported,
            )
    archs = sorted(set(archs))

    module = req["module"]
    try:
        mod, root = import_source(req["source"], module)
    except Exception as e:  # the user's file raised: report it with its traceback
        return fail("import", "".join(traceback.format_exception(e)).rstrip(), type(e).__name__)

    exclude = list(req["exclude"]) + [os.path.dirname(os.path.dirname(os.path.abspath(wp.__file__)))]
    sources = user_sources(root, exclude)

    out_dir = req["out_dir"]
    os.makedirs(out_dir, exist_ok=True)
    prefix = f"wp_{module}."
    for name in os.listdir(out_dir):
        if name.startswith(prefix):
            os.remove(os.path.join(out_dir, name))

    try:
        wp.set_module_options({"block_dim": int(req["block_dim"])}, mod)
        wp.compile_aot_module(mod, arch=archs, module_dir=out_dir, use_ptx=False, strip_hash=True)
        if req.get("cpu"):
            compile_cpu(wp, mod, module, out_dir)
    except Exception as e:
        return fail("compile", str(e), type(e).__name__, sources=sources)

    files = sorted(n for n in os.listdir(out_dir) if n.startswith(prefix))
    expected = [f"wp_{module}.cu", f"wp_{module}.meta"] + [f"wp_{module}.sm{a}.cubin" for a in archs]
    if req.get("cpu"):
        expected.append(f"wp_{module}.cpp")
    missing = [n for n in expected if n not in files]
    if missing:
        return fail("output", "Warp reported success but did not write " + ", ".join(missing), sources=sources)

    import warp._src.context as ctx

    options = wp.get_module_options(mod)
    kernels = sorted(
        k.key for k in vars(mod).values() if isinstance(k, ctx.Kernel) and k.module.name == module
    )
    return {
        "ok": True,
        "warp_version": wp.__version__,
        "module": module,
        "block_dim": int(req["block_dim"]),
        "archs": archs,
        "files": files,
        "kernels": kernels,
        "sources": sources,
        "warp_dir": os.path.dirname(os.path.abspath(wp.__file__)),
        "nvrtc_dir": nvrtc_dir(),
        "fast_math": bool(options.get("fast_math", False)),
        "fuse_fp": bool(options.get("fuse_fp", True)),
    }


def nvrtc_dir():
    """The directory of the nvidia-cuda-nvrtc-cu12 wheel's libnvrtc, or None."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia.cuda_nvrtc")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for sub in ("lib", "bin"):
            d = os.path.join(root, sub)
            if os.path.isdir(d):
                return os.path.abspath(d)
    return None


def main():
    req = json.loads(sys.argv[1])
    # Warp's banner and warnings, and whatever the user's module prints, go to stderr
    # (also output written by native code to file descriptor 1): stdout is the summary.
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        try:
            summary = run(req)
        except Exception as e:
            summary = fail("internal", "".join(traceback.format_exception(e)).rstrip(), type(e).__name__)
        sys.stdout.flush()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    sys.stdout.write(json.dumps(summary) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
