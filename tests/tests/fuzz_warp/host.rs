//! Running Warp's generated CPU code on the host with every array access
//! recorded: a copy of Warp's native headers whose array element access
//! (`index()` in `array.h`, under `address`, `load`, `array_store`, the
//! atomics and views) calls a recording hook, warp-build's CPU entry points
//! (`wp_<module>.cpu.cpp`) compiled with it by g++ under AddressSanitizer
//! and UBSan's strict bounds check (a component of a local vector, matrix,
//! quaternion or `shape_t` past its end stops the run), and a driver that
//! builds each case's arguments (every array its own allocation, packed,
//! reversed or strided) and runs every work item of the launch.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use warp_launch::fuzzing::{WarpHostLaunch, WarpParam};

/// The hook's declaration and the recording element access, put into the
/// copy of `array.h` after `data_at_byte_offset`.
const HOOK: &str = r#"
// warp fuzzer: every element access is recorded (tests/tests/fuzz_warp/host.rs).
extern "C" void wpl_fuzz_touch(const void* data, const int* shape, const int* strides, int ndim, const void* p, size_t n);
template <typename T> CUDA_CALLABLE inline T* wpl_fuzz_at(const array_t<T>& a, size_t byte_offset)
{
    T* p = data_at_byte_offset(a, byte_offset);
    wpl_fuzz_touch(a.data, a.shape.dims, a.strides, a.ndim, p, sizeof(T));
    return p;
}
"#;

/// Copies Warp's native headers from `warp_dir/native` to `dest` with the
/// recording hook in `array.h`.
///
/// # Errors
///
/// A file error, or `array.h` not as Warp 1.19.0 writes it.
pub fn patch_headers(warp_dir: &Path, dest: &Path) -> Result<(), String> {
    let src = warp_dir.join("native");
    copy_dir(&src, dest).map_err(|e| format!("copying {}: {e}", src.display()))?;
    let path = dest.join("array.h");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let anchor = "template <typename T> CUDA_CALLABLE inline T* grad_at_byte_offset";
    if !text.contains(anchor) {
        return Err(format!("{}: no `{anchor}`", path.display()));
    }
    let mut text = text.replacen(anchor, &format!("{HOOK}\n{anchor}"), 1);
    let mut n = 0;
    for (from, to) in [
        (
            "T& result = *data_at_byte_offset(arr, byte_offset(arr, ",
            "T& result = *wpl_fuzz_at(arr, byte_offset(arr, ",
        ),
        (
            "T& result = *data_at_byte_offset(iarr.arr, byte_offset(iarr.arr, ",
            "T& result = *wpl_fuzz_at(iarr.arr, byte_offset(iarr.arr, ",
        ),
    ] {
        n += text.matches(from).count();
        text = text.replace(from, to);
    }
    if n != 8 {
        return Err(format!(
            "{}: {n} element accesses found to record, expected 8 (4 of array_t, 4 of indexedarray_t)",
            path.display()
        ));
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn copy_dir(src: &Path, dest: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dest)?;
    for e in std::fs::read_dir(src)? {
        let e = e?;
        let to = dest.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &to)?;
        } else {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".h") || name.ends_with(".cuh") || !name.contains('.') {
                std::fs::copy(e.path(), &to)?;
            }
        }
    }
    Ok(())
}

/// One argument of a host case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostArg {
    Value(i64),
    Null,
    Array(Layout),
    Struct(Vec<HostArg>),
}

/// An array's memory: element size, extents, byte strides (negative for
/// a reversed axis), the byte offset of element 0 in its allocation and
/// the allocation's size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub elem: usize,
    pub shape: Vec<usize>,
    pub strides: Vec<i64>,
    pub offset: usize,
    pub alloc: usize,
}

impl Layout {
    /// `shape` with strides from `scale` (1: packed; more: gaps between
    /// elements) and the axes in `reversed` running backwards.
    pub fn new(elem: usize, shape: &[usize], scale: &[usize], reversed: &[bool]) -> Layout {
        let nd = shape.len();
        let mut strides = vec![0i64; nd];
        let mut s = elem as i64;
        for k in (0..nd).rev() {
            let m = scale.get(k).copied().unwrap_or(1).max(1) as i64;
            strides[k] = s * m;
            s = strides[k] * shape[k].max(1) as i64;
        }
        for (stride, rev) in strides.iter_mut().zip(reversed) {
            if *rev {
                *stride = -*stride;
            }
        }
        let empty = shape.contains(&0);
        let (mut lo, mut hi) = (0i64, 0i64);
        if !empty {
            for (&e, &stride) in shape.iter().zip(&strides) {
                let span = (e as i64 - 1) * stride;
                if span < 0 {
                    lo += span;
                } else {
                    hi += span;
                }
            }
        }
        Layout {
            elem,
            shape: shape.to_vec(),
            strides,
            offset: (-lo) as usize,
            alloc: if empty { 0 } else { (hi - lo) as usize + elem },
        }
    }
}

/// One launch to run: its domain and arguments.
#[derive(Clone, Debug)]
pub struct HostCase {
    pub id: u64,
    pub kernel: usize,
    pub plan: WarpHostLaunch,
    pub args: Vec<HostArg>,
}

fn spell_arg(s: &mut String, a: &HostArg) {
    match a {
        HostArg::Value(v) => {
            let _ = write!(s, " V {v}");
        }
        HostArg::Null => s.push_str(" N"),
        HostArg::Array(l) => {
            let mut e = [0usize; 4];
            let mut st = [0i64; 4];
            let n = l.shape.len().min(4);
            e[..n].copy_from_slice(&l.shape[..n]);
            st[..n].copy_from_slice(&l.strides[..n]);
            let _ = write!(
                s,
                " A {} {} {} {} {} {} {} {} {} {} {} {}",
                l.elem,
                l.shape.len(),
                e[0],
                e[1],
                e[2],
                e[3],
                st[0],
                st[1],
                st[2],
                st[3],
                l.offset,
                l.alloc
            );
        }
        HostArg::Struct(fields) => {
            let _ = write!(s, " S {}", fields.len());
            for f in fields {
                spell_arg(s, f);
            }
        }
    }
}

impl HostCase {
    fn line(&self) -> String {
        let p = &self.plan;
        let mut s = format!(
            "{} {} {} {} {} {} {} {} {} {}",
            self.id,
            self.kernel,
            p.ndim,
            p.shape[0],
            p.shape[1],
            p.shape[2],
            p.shape[3],
            p.size,
            p.coord_mult,
            self.args.len()
        );
        for a in &self.args {
            spell_arg(&mut s, a);
        }
        s
    }
}

/// A kernel the driver runs: its key, `N` and parameters.
pub struct DriverKernel {
    pub key: String,
    pub dim: usize,
    pub params: Vec<(String, WarpParam)>,
}

/// The argument record both halves of the driver share: plain C, for the
/// half that includes Warp's code (compiled with `WP_NO_CRT`, which declares
/// the C library itself, so no standard header may come there).
const CASE_H: &str = r#"
struct fz_param {
    char kind;
    long long v;
    void* data;
    int ndim;
    int e[4];
    int st[4];
    int nfields;
    const struct fz_param* fields;
};
"#;

/// The half of the driver with the standard library: reads the cases,
/// allocates the arrays, records the accesses, calls the runners.
const MAIN_HEAD: &str = r#"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>
#include "fz_case.h"

namespace fz {
struct P {
    char kind = 'V';
    long long v = 0;
    size_t elem = 0;
    int ndim = 0;
    int e[4] = {0, 0, 0, 0};
    long long st[4] = {0, 0, 0, 0};
    long long off = 0, alloc = 0;
    std::vector<P> fields;
};
struct View {
    char* lo;
    char* hi;
    size_t elem;
    std::unordered_set<uintptr_t> elems;
    int param;
};
static std::vector<View> views;
static std::vector<char*> allocs;
static long long current = -1;
static int fails = 0;

static bool read_p(P& p) {
    char k[4];
    if (scanf("%3s", k) != 1) return false;
    p.kind = k[0];
    if (p.kind == 'V') return scanf("%lld", &p.v) == 1;
    if (p.kind == 'N') return true;
    if (p.kind == 'A')
        return scanf("%zu %d %d %d %d %d %lld %lld %lld %lld %lld %lld", &p.elem, &p.ndim, &p.e[0], &p.e[1], &p.e[2], &p.e[3],
                     &p.st[0], &p.st[1], &p.st[2], &p.st[3], &p.off, &p.alloc) == 12;
    if (p.kind == 'S') {
        int n = 0;
        if (scanf("%d", &n) != 1 || n < 0 || n > 64) return false;
        p.fields.resize(n);
        for (auto& f : p.fields)
            if (!read_p(f)) return false;
        return true;
    }
    return false;
}

static void fail(const std::string& msg) {
    if (fails < 4) {
        printf("F %lld %s\n", current, msg.c_str());
        fflush(stdout);
    }
    ++fails;
}

// The C record of `p` (its fields in `store`), its array allocated.
static fz_param make(const P& p, int param, std::vector<std::vector<fz_param>>& store) {
    fz_param c;
    memset(&c, 0, sizeof c);
    c.kind = p.kind;
    c.v = p.v;
    if (p.kind == 'S') {
        std::vector<fz_param> f;
        for (const P& x : p.fields) f.push_back(make(x, param, store));
        store.push_back(std::move(f));
        c.nfields = (int)store.back().size();
        c.fields = store.back().data();
        return c;
    }
    if (p.kind != 'A') return c;
    size_t bytes = p.alloc > 0 ? (size_t)p.alloc : 1;
    char* base = (char*)malloc(bytes);
    for (size_t w = 0; w + 4 <= bytes; w += 4) {
        int32_t x = (int32_t)((w / 4) * 7 % 23) - 3;
        memcpy(base + w, &x, 4);
    }
    allocs.push_back(base);
    c.data = base + p.off;
    c.ndim = p.ndim;
    for (int k = 0; k < 4; ++k) {
        c.e[k] = k < p.ndim ? p.e[k] : 0;
        c.st[k] = k < p.ndim ? (int)p.st[k] : 0;
    }
    View v{base, base + bytes, p.elem, {}, param};
    long long n = 1;
    for (int k = 0; k < p.ndim; ++k) n *= p.e[k];
    for (long long l = 0; l < n; ++l) {
        long long rest = l, at = p.off;
        for (int k = p.ndim - 1; k >= 0; --k) {
            at += (rest % p.e[k]) * p.st[k];
            rest /= p.e[k];
        }
        v.elems.insert((uintptr_t)(base + at));
    }
    views.push_back(std::move(v));
    return c;
}

static void reset() {
    for (char* a : allocs) free(a);
    allocs.clear();
    views.clear();
}
}  // namespace fz

extern "C" void wpl_fuzz_touch(const void* data, const int* shape, const int* strides, int ndim, const void* p, size_t n)
{
    const char* d = (const char*)data;
    const char* q = (const char*)p;
    for (const fz::View& v : fz::views) {
        if (d >= v.lo && d < v.hi) {
            if (n != v.elem || !v.elems.count((uintptr_t)q)) {
                char msg[256];
                snprintf(msg, sizeof msg, "parameter %d: %zu byte(s) at byte offset %lld of its allocation, not one of its view's elements",
                         v.param, n, (long long)(q - v.lo));
                fz::fail(msg);
            }
            return;
        }
    }
    // Not a case's array: a local fixed-size array (its own data, shape and
    // strides), or an array the case did not pass (null, or forged).
    if (!d) {
        fz::fail("access through a null array");
        return;
    }
    long long count = 1;
    for (int k = 0; k < ndim && k < 4; ++k) count *= shape[k] > 0 ? shape[k] : 0;
    if (ndim < 1 || ndim > 4 || count > (1 << 20)) {
        fz::fail("access through an array that is no argument and no local array");
        return;
    }
    for (long long l = 0; l < count; ++l) {
        long long rest = l, at = 0;
        for (int k = ndim - 1; k >= 0; --k) {
            at += (rest % shape[k]) * strides[k];
            rest /= shape[k];
        }
        if (d + at == q) return;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "access at byte %lld of a local array of %lld element(s)", (long long)(q - d), count);
    fz::fail(msg);
}
"#;

/// The runner helpers of the half that includes Warp's code.
const KERNEL_HEAD: &str = r#"
#include "fz_case.h"
namespace fz {
template <typename T> inline void arr(wp::array_t<T>& f, const fz_param& p)
{
    f = wp::array_t<T>();
    if (p.kind != 'A') return;
    f.data = (T*)p.data;
    f.grad = nullptr;
    f.ndim = p.ndim;
    for (int k = 0; k < 4; ++k) {
        f.shape.dims[k] = p.e[k];
        f.strides[k] = p.st[k];
    }
}
template <typename T> inline void val(T& f, const fz_param& p) { f = T(p.v); }
}  // namespace fz
"#;

/// The two halves of the driver of module `module` (`(kernels, main)`):
/// Warp's code through warp-build's entry points with one runner per
/// kernel, and the reading, allocating and recording main.
pub fn driver(module: &str, kernels: &[DriverKernel]) -> (String, String) {
    let mut s = format!("#include \"wp_{module}.cpu.cpp\"\n{KERNEL_HEAD}\n");
    for (i, k) in kernels.iter().enumerate() {
        let _ = writeln!(
            s,
            "extern \"C\" void fz_run_{i}(const fz_param* p, const unsigned* shape, size_t size, size_t coord_mult)\n{{\n    wpl_{module}::wp_args_{} a{{}};",
            k.key
        );
        for (j, (name, kind)) in k.params.iter().enumerate() {
            match kind {
                WarpParam::Array { .. } => {
                    let _ = writeln!(s, "    fz::arr(a.{name}, p[{j}]);");
                }
                WarpParam::Value { .. } => {
                    let _ = writeln!(s, "    fz::val(a.{name}, p[{j}]);");
                }
                WarpParam::Struct { fields, .. } => {
                    for (f, (field, elem)) in fields.iter().enumerate() {
                        let _ = writeln!(
                            s,
                            "    if (p[{j}].nfields > {f}) fz::{}(a.{name}.{field}, p[{j}].fields[{f}]);",
                            if elem.is_some() { "arr" } else { "val" }
                        );
                    }
                }
            }
        }
        let _ = writeln!(
            s,
            "    wp::launch_bounds_t<{n}> b{{}};\n    for (int d = 0; d < {n}; ++d) b.shape[d] = shape[d];\n    b.size = size;\n    b.coord_mult = coord_mult;\n    wpl_{module}::wpl_{module}__{key}__forward(&b, &a, 0, size);\n}}\n",
            n = k.dim,
            key = k.key
        );
    }
    let mut m = String::from(MAIN_HEAD);
    for i in 0..kernels.len() {
        let _ = writeln!(
            m,
            "extern \"C\" void fz_run_{i}(const fz_param* p, const unsigned* shape, size_t size, size_t coord_mult);"
        );
    }
    m.push_str(
        "int main()\n{\n    long long id;\n    while (scanf(\"%lld\", &id) == 1) {\n        int kernel, ndim, np;\n        unsigned shape[4];\n        size_t size, coord_mult;\n        if (scanf(\"%d %d %u %u %u %u %zu %zu %d\", &kernel, &ndim, &shape[0], &shape[1], &shape[2], &shape[3], &size, &coord_mult, &np) != 9) return 3;\n        std::vector<fz::P> p(np);\n        for (auto& x : p) if (!fz::read_p(x)) return 3;\n        std::vector<std::vector<fz_param>> store;\n        std::vector<fz_param> c;\n        for (int j = 0; j < np; ++j) c.push_back(fz::make(p[j], j, store));\n        c.resize(np + 1);\n        fz::current = id;\n        fz::fails = 0;\n        printf(\"B %lld\\n\", id);\n        fflush(stdout);\n        switch (kernel) {\n",
    );
    for i in 0..kernels.len() {
        let _ = writeln!(
            m,
            "        case {i}: fz_run_{i}(c.data(), shape, size, coord_mult); break;"
        );
    }
    m.push_str(
        "        default: return 3;\n        }\n        printf(\"E %lld %d\\n\", id, fz::fails);\n        fflush(stdout);\n        fz::reset();\n    }\n    return 0;\n}\n",
    );
    (s, m)
}

/// Compiles the driver of a module in `dir` (holding warp-build's entry
/// points) against the patched headers in `include`.
///
/// # Errors
///
/// The compiler's message.
pub fn build(
    dir: &Path,
    module: &str,
    (kernels, main): &(String, String),
    include: &Path,
) -> Result<PathBuf, String> {
    let src = dir.join("fuzz_kernels.cpp");
    let main_src = dir.join("fuzz_main.cpp");
    for (path, text) in [
        (&src, kernels.as_str()),
        (&main_src, main.as_str()),
        (&dir.join("fz_case.h"), CASE_H),
    ] {
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let exe = dir.join("fuzz_driver");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let out = Command::new(&cxx)
        .args([
            "-std=c++17",
            "-O1",
            "-g0",
            "-DNDEBUG",
            "-w",
            "-fno-omit-frame-pointer",
            "-fsanitize=address,bounds-strict,integer-divide-by-zero",
            "-fno-sanitize-recover=all",
        ])
        .arg("-I")
        .arg(include)
        .arg("-I")
        .arg(dir)
        .arg(&src)
        .arg(&main_src)
        .arg(dir.join(format!("wp_{module}.cpu_runtime.cpp")))
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| format!("cannot run {cxx}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: String = err.lines().take(40).collect::<Vec<_>>().join("\n");
        return Err(format!("{cxx} refuses the driver of {module}:\n{tail}"));
    }
    Ok(exe)
}

/// What one case did on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// Accesses outside the arguments' views, or a sanitizer's report.
    Fail(String),
}

/// Runs `cases` with the driver `exe`; a process that dies (a sanitizer
/// stopped it) fails the case it was running and the rest run in a new one.
///
/// # Errors
///
/// The driver cannot run, or stops without running a case.
pub fn run(exe: &Path, cases: &[HostCase]) -> Result<Vec<(u64, Outcome)>, String> {
    let mut results: Vec<(u64, Outcome)> = Vec::new();
    let mut rest: Vec<&HostCase> = cases.iter().collect();
    while !rest.is_empty() {
        let mut input = String::new();
        for c in &rest {
            input.push_str(&c.line());
            input.push('\n');
        }
        let mut child = Command::new("timeout")
            .arg("120")
            .arg(exe)
            .env(
                "ASAN_OPTIONS",
                "detect_leaks=0:abort_on_error=0:halt_on_error=1:allocator_may_return_null=1",
            )
            .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        {
            use std::io::Write as _;
            let mut stdin = child.stdin.take().expect("piped stdin");
            let writer = std::thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            });
            let out = child
                .wait_with_output()
                .map_err(|e| format!("{}: {e}", exe.display()))?;
            let _ = writer.join();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let mut running: Option<u64> = None;
            let mut fails: Vec<(u64, String)> = Vec::new();
            let mut done = 0usize;
            for line in stdout.lines() {
                let mut w = line.splitn(3, ' ');
                let tag = w.next().unwrap_or("");
                let id: u64 = w.next().and_then(|x| x.parse().ok()).unwrap_or(u64::MAX);
                match tag {
                    "B" => running = Some(id),
                    "F" => fails.push((id, w.next().unwrap_or("").to_string())),
                    "E" => {
                        running = None;
                        done += 1;
                        let msgs: Vec<String> = fails
                            .iter()
                            .filter(|(i, _)| *i == id)
                            .map(|(_, m)| m.clone())
                            .collect();
                        results.push((
                            id,
                            if msgs.is_empty() {
                                Outcome::Pass
                            } else {
                                Outcome::Fail(msgs.join("\n"))
                            },
                        ));
                    }
                    _ => {}
                }
            }
            if out.status.success() && done == rest.len() {
                break;
            }
            let Some(dead) = running else {
                return Err(format!(
                    "{} stopped ({}) outside a case after {done} of {} case(s):\n{}",
                    exe.display(),
                    out.status,
                    rest.len(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            };
            let stderr = String::from_utf8_lossy(&out.stderr);
            let report: String = stderr.lines().take(30).collect::<Vec<_>>().join("\n");
            let mut msgs: Vec<String> = fails
                .iter()
                .filter(|(i, _)| *i == dead)
                .map(|(_, m)| m.clone())
                .collect();
            msgs.push(format!("the host run stopped ({}):\n{report}", out.status));
            results.push((dead, Outcome::Fail(msgs.join("\n"))));
            let at = rest.iter().position(|c| c.id == dead).unwrap_or(rest.len());
            rest = rest.split_off((at + 1).min(rest.len()));
        }
    }
    Ok(results)
}
