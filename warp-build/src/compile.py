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

Beside Warp's files it writes wp_<module>.facts.json, what Warp's own objects say about
the code it generated (read from the ModuleBuilder of each codegen, not from the text):

    {"format": 1, "warp_version": str, "module": str,
     "cuda": DEVICE, "cpu": DEVICE | null,
     "kernels": {KEY: {"cuda": [CHAIN], "cpu": [CHAIN] | null, "cpu_body": null | str}}}
    DEVICE = {"preamble": bool (a non-blank extra_cuda_preamble / extra_cpu_preamble, the
                  module's own or merged from another module),
              "native": [NATIVE] (every @wp.func_native function the codegen emitted),
              "native_types": [str] (native C++ types the kernels use)}
    NATIVE = {"function": str, "module": str, "symbol": str (its C++ name)}
    CHAIN = [str]: the @wp.func calls from the kernel down to a native function (its last)
    cpu_body: null when the CPU code of the kernel is the CUDA code's body line for line
        (see same_body), else where and how they differ.

PTX is not Warp's to write here: warp-build compiles the .cu with NVRTC 12.0 itself.
    {"ok": false, "stage": "import" | "version" | "arch" | "compile" | "facts" | "output" | "internal",
     "error": str, "error_type": str, "supported_archs": [int] (stage "arch" only)}
"""

import json
import os
import re
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


class Codegens:
    """The ModuleBuilder of every codegen Warp runs while this is installed: the objects
    that generated the text, so the facts come from them and not from reading the text."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.builders = {}
        self.original = ctx.ModuleBuilder.codegen
        original = self.original
        builders = self.builders

        def codegen(builder, device):
            source = original(builder, device)
            builders["cpu" if device == "cpu" else "cuda"] = builder
            return source

        ctx.ModuleBuilder.codegen = codegen

    def restore(self):
        self.ctx.ModuleBuilder.codegen = self.original


def is_native(func):
    return any(getattr(func, a, None) is not None for a in ("native_snippet", "adj_native_snippet", "replay_snippet"))


def callees(func_or_kernel):
    """The user functions a kernel's or function's generated code calls: its direct calls
    and, for each, the custom gradient and replay functions Warp emits with it."""
    adj = getattr(func_or_kernel, "adj", None)
    out = []
    for f in list(getattr(adj, "called_user_functions", {}) or {}):
        out.append(f)
        for extra in ("custom_grad_func", "custom_replay_func"):
            g = getattr(f, extra, None)
            if g is not None:
                out.append(g)
    return out


def native_chains(kernel):
    """Every chain of calls from `kernel` to a native function, breadth first, each
    function visited once."""
    chains = []
    seen = set()
    queue = [(f, [f.key]) for f in callees(kernel)]
    while queue:
        f, path = queue.pop(0)
        if id(f) in seen:
            continue
        seen.add(id(f))
        if is_native(f):
            chains.append(path)
            continue
        queue.extend((g, path + [g.key]) for g in callees(f))
    return chains


def device_facts(builder, device):
    preamble = builder.options.get("extra_cpu_preamble" if device == "cpu" else "extra_cuda_preamble", "") or ""
    native = [
        {"function": f.key, "module": getattr(getattr(f, "module", None), "name", ""), "symbol": f.native_func}
        for f in builder.functions
        if is_native(f)
    ]
    native_types = sorted(str(getattr(t, "__name__", t)) for t in getattr(builder, "native_types", {}))
    return {"preamble": bool(preamble.strip()), "native": native, "native_types": native_types}


def kernel_key(ctx_codegen, kernel):
    return ctx_codegen.cuda_kernel_forward_name(kernel)[: -len("_cuda_kernel_forward")]


def function_lines(lines, head):
    """The lines of the function whose head line is `head` (`NAME(`) up to its closing
    `}` at column 0, or None."""
    try:
        start = lines.index(head)
    except ValueError:
        return None
    for end in range(start, len(lines)):
        if lines[end] == "}":
            return lines[start : end + 1]
    return None


def significant(lines):
    """Lines as compared: leading and trailing blanks removed, blank lines dropped."""
    return [line.strip() for line in lines if line.strip()]


def cuda_body(fn):
    """(parameters, body) of a CUDA kernel: the `TYPE NAME` of each parameter after the
    launch bounds, and the lines after Warp's `wp::tile_shared_storage_t::init();` up to
    the close of the grid-stride loop (or of the function, for a lean kernel)."""
    sig = significant(fn)
    try:
        open_body = sig.index("{")
        init = sig.index("wp::tile_shared_storage_t::init();")
    except ValueError:
        return None
    params = [p.rstrip(",)") for p in sig[1:open_body]]
    body = sig[init + 1 : -1]
    if any(line.startswith("for (size_t _idx") for line in sig[open_body:init]):
        if not body or body[-1] != "}":
            return None
        body = body[:-1]
    return params, body


def cpu_body(fn):
    """(parameters, body) of Warp's CPU kernel template: the `TYPE NAME` of each argument
    variable (`TYPE var_x = _wp_args->x;`) and the lines after them up to the function's
    close."""
    sig = significant(fn)
    try:
        first = sig.index("static constexpr bool wp_linear_tid = wp_linear_contiguous;")
    except ValueError:
        return None
    params = []
    i = contiguous_prologue(sig, first + 1)
    if i is None:
        return None
    while i < len(sig) and (sig[i].startswith("//") or " = _wp_args->" in sig[i] or " = _wp_adj_args->" in sig[i]):
        if not sig[i].startswith("//"):
            decl, _, field = sig[i].rstrip(";").partition(" = ")
            name = decl.rsplit(" ", 1)[-1]
            expect = ("_wp_adj_args->" if name.startswith("adj_") else "_wp_args->") + name.split("_", 1)[1]
            if field != expect:
                return None
            params.append(decl)
        i += 1
    # The comment lines that open the body (`//---------`, `// primal vars`) belong to it.
    while i > first + 1 and sig[i - 1].startswith("//"):
        i -= 1
    return params, sig[i:-1]


CONTIGUOUS_LINES = [
    re.compile(r"wp_args_\w+ wp_contiguous_(adj_)?args;"),
    re.compile(r"if constexpr \(wp_linear_contiguous\)"),
    re.compile(r"\{"),
    re.compile(r"wp_contiguous_(adj_)?args = \*_wp_(adj_)?args;"),
    re.compile(r"wp_contiguous_(adj_)?args\.\w+\.strides\[0\] = sizeof\([\w:<>, ]+\);"),
    re.compile(r"_wp_(adj_)?args = &wp_contiguous_(adj_)?args;"),
    re.compile(r"\}"),
]


def contiguous_prologue(sig, i):
    """The index after Warp's contiguous-array prologue of a 1-D CPU kernel (a copy of the
    arguments whose arrays get the element size as their stride when the template's
    wp_linear_contiguous is true; warp-build runs that specialization only for packed
    arrays), or `i` when there is none; None for a prologue of another form."""
    if i >= len(sig) or not CONTIGUOUS_LINES[0].fullmatch(sig[i]):
        return i
    stage = 0
    while i < len(sig):
        line = sig[i]
        matched = next((n for n in range(stage, len(CONTIGUOUS_LINES)) if CONTIGUOUS_LINES[n].fullmatch(line)), None)
        if matched is None:
            return None
        stage = matched
        i += 1
        if stage == len(CONTIGUOUS_LINES) - 1:
            return i
    return None


def same_body(cu_lines, cpp_lines, key, direction):
    """None when the CPU function of kernel `key` is the CUDA function's body line for line,
    else why not. Lines are compared without their indentation; a CUDA `continue;` may be
    a CPU `return;` (Warp's `return` in a kernel: the next work item of the grid-stride loop
    on CUDA, the end of the task on the CPU: the CPU runs a prefix of what CUDA runs). A
    line ending in a backslash (a line splice) is never equal."""
    cu = function_lines(cu_lines, f'extern "C" __global__ void {key}_cuda_kernel_{direction}(')
    cpp = function_lines(cpp_lines, f"static void {key}_cpu_kernel_{direction}(")
    if cu is None and cpp is None and direction == "backward":
        return None  # no backward pass (enable_backward=False): nothing to compare
    if cu is None or cpp is None:
        return f"the {'CUDA' if cu is None else 'CPU'} {direction} function was not found in Warp's output"
    a, b = cuda_body(cu) or (None, None), cpu_body(cpp) or (None, None)
    if a[0] is None or b[0] is None:
        return f"the {direction} function is not in the form Warp 1.19.0 writes"
    if a[0][1:] != b[0]:
        return f"the {direction} functions take different arguments ({a[0][1:]} in the .cu, {b[0]} in the .cpp)"
    if len(a[1]) != len(b[1]):
        return f"the {direction} bodies differ in length ({len(a[1])} lines in the .cu, {len(b[1])} in the .cpp)"
    for n, (x, y) in enumerate(zip(a[1], b[1])):
        if x.endswith("\\") or y.endswith("\\"):
            return f"line {n + 1} of the {direction} body ends in a line splice"
        if x != y and not (x == "continue;" and y == "return;"):
            return f"line {n + 1} of the {direction} body differs: `{x}` in the .cu, `{y}` in the .cpp"
    return None


def shared_code(lines, stop):
    """The functions and structs Warp emits before the kernels: the lines after its cast
    macros up to the first line starting with one of `stop`, without `struct wp_args_*`
    (the CPU's argument structs)."""
    try:
        start = lines.index("#define adj_int(x, adj_x, adj_ret) adj_cast_int(x, adj_x, adj_ret)")
    except ValueError:
        return None
    out = []
    for line in lines[start + 1 :]:
        if line.startswith(stop):
            break
        out.append(line)
    return significant(out)


def function_head(line):
    """A line of the functions before the kernels, compared without `CUDA_CALLABLE` after a
    head's `static`: Warp writes its generated functions with it for CUDA and without it for
    the CPU, and its headers define it as nothing outside CUDA (a native snippet keeps it on
    both)."""
    if line.startswith("static CUDA_CALLABLE "):
        return "static " + line[len("static CUDA_CALLABLE ") :]
    return line


def facts(ctx, codegen, module, out_dir, builders):
    """The facts file's content (see the module docstring)."""
    cuda = builders.get("cuda")
    if cuda is None:
        raise RuntimeError("Warp generated the CUDA code without a ModuleBuilder warp-build could see")
    cpu = builders.get("cpu")
    out = {
        "format": 1,
        "warp_version": None,
        "module": module,
        "cuda": device_facts(cuda, "cuda"),
        "cpu": device_facts(cpu, "cpu") if cpu is not None else None,
        "kernels": {},
    }
    read = lambda ext: open(os.path.join(out_dir, f"wp_{module}.{ext}"), encoding="utf-8").read().splitlines()
    cu_lines = read("cu")
    cpp_lines = read("cpp") if cpu is not None else None
    shared_differs = None
    if cpp_lines is not None:
        a = shared_code(cu_lines, ('extern "C" __global__',))
        b = shared_code(cpp_lines, ("struct wp_args_", "template <bool wp_linear_contiguous>"))
        if a is None or b is None or list(map(function_head, a)) != list(map(function_head, b)):
            shared_differs = "the functions and structs before the kernels differ between the .cu and the .cpp"
    cpu_chains = {kernel_key(codegen, k): native_chains(k) for k in cpu.kernels} if cpu is not None else {}
    for k in cuda.kernels:
        key = kernel_key(codegen, k)
        entry = {"cuda": native_chains(k), "cpu": cpu_chains.get(key), "cpu_body": None}
        if cpp_lines is not None:
            entry["cpu_body"] = shared_differs or same_body(cu_lines, cpp_lines, key, "forward")
            if entry["cpu_body"] is None:
                entry["cpu_body"] = same_body(cu_lines, cpp_lines, key, "backward")
        out["kernels"][key] = entry
    return out


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

    import warp._src.codegen as codegen
    import warp._src.context as ctx

    codegens = Codegens(ctx)
    try:
        wp.set_module_options({"block_dim": int(req["block_dim"])}, mod)
        wp.compile_aot_module(mod, arch=archs, module_dir=out_dir, use_ptx=False, strip_hash=True)
        if req.get("cpu"):
            compile_cpu(wp, mod, module, out_dir)
    except Exception as e:
        return fail("compile", str(e), type(e).__name__, sources=sources)
    finally:
        codegens.restore()
    try:
        found = facts(ctx, codegen, module, out_dir, codegens.builders)
    except Exception as e:
        return fail("facts", "".join(traceback.format_exception(e)).rstrip(), type(e).__name__, sources=sources)
    found["warp_version"] = wp.__version__
    with open(os.path.join(out_dir, f"wp_{module}.facts.json"), "w", encoding="utf-8") as f:
        json.dump(found, f, indent=1, sort_keys=True)
        f.write("\n")

    files = sorted(n for n in os.listdir(out_dir) if n.startswith(prefix))
    expected = [f"wp_{module}.cu", f"wp_{module}.meta", f"wp_{module}.facts.json"] + [f"wp_{module}.sm{a}.cubin" for a in archs]
    if req.get("cpu"):
        expected.append(f"wp_{module}.cpp")
    missing = [n for n in expected if n not in files]
    if missing:
        return fail("output", "Warp reported success but did not write " + ", ".join(missing), sources=sources)

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
