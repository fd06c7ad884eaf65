//! Writing `wp_<module>.cpu.cpp`: Warp's generated CPU code wrapped so that
//! several modules link into one binary, plus the `extern "C"` functions
//! warp-launch calls (`wpl_<module>__<key>__forward`, `__backward`,
//! `__layout`).
//!
//! Isolation: Warp's headers (`builtin.h`, `deterministic.h`) and Warp's
//! file are included inside `namespace wpl_<module>`, so every C++ symbol
//! they define (inline functions that read `WP_TILE_BLOCK_DIM`, user
//! functions, struct helpers) is mangled with the module's name; a global
//! alias `namespace wp = wpl_<module>::wp` keeps Warp's `::wp::` references
//! working. `crt.h` and `cpu_block_runtime.h` are included first at global
//! scope: they only declare C functions (`sinf`, `_wp_assert`,
//! `wp_cpu_run_block`, ...) that all modules share. Warp's own `extern "C"`
//! entry points (`<key>_cpu_forward`, declared `WP_API`) get internal
//! linkage: `WP_API` is redefined as `static` before Warp's file (they sit in
//! `extern "C" { }` blocks, where `static` is allowed), and being unused they
//! are dropped by the compiler.

use std::fmt::Write as _;

use crate::cpu_parse::CpuKernel;

/// The symbol prefix of `module`'s functions (`wpl_<module>__<key>__`).
/// The loop over task indices `[first, last)` calling `kernel` (Warp's
/// `<key>_cpu_kernel_{forward,backward}` template) with `args`. For a 1-D
/// kernel whose domain folds no extra dimension (`coord_mult == 1`) and
/// whose arrays are all packed (`packed`, a C++ condition: every array's
/// first stride is its element size), Warp's linear specialization
/// (`<true>`: `wp.tid()` is the task index, no division, and every 1-D
/// array's stride is taken to be its element size), as Warp's CPU launcher
/// selects once outside its task loop; otherwise the general one
/// (`<false>`). Warp's condition covers the 1-D arrays, forward and
/// adjoint; this one every array: never weaker.
fn task_loop(dim: u32, kernel: &str, args: &str, packed: &str) -> String {
    let general =
        format!("for (size_t i = first; i < last; ++i) {kernel}<false>(bounds, i, {args});");
    if dim == 1 {
        format!(
            "if (bounds.coord_mult == 1 && ({packed})) {{\n        for (size_t i = first; i < last; ++i) {kernel}<true>(bounds, i, {args});\n    }} else {{\n        {general}\n    }}"
        )
    } else {
        // One thread per coordinate: walk the coordinates in order and hand
        // each to `launch_coord` through the cursor (no division per thread).
        format!(
            "if (bounds.coord_mult == 1 && first < last) {{\n        \
             wp::wpl_cursor_t& cursor = wp::wpl_cursor;\n        \
             wp::launch_coord_t coord = wp::wpl_launch_coord<{dim}>(first, bounds);\n        \
             for (size_t i = first; i < last; ++i) {{\n            \
             cursor.index = i;\n            \
             cursor.coord = coord;\n            \
             {kernel}<false>(bounds, i, {args});\n            \
             wp::wpl_next_coord<{dim}>(coord, bounds);\n        \
             }}\n        \
             cursor.index = ~(size_t)0;\n    \
             }} else {{\n        {general}\n    }}"
        )
    }
}

/// `wp::launch_coord` for 2 to 4 dimensions, declared after Warp's headers
/// and before Warp's kernels: the unravelling of a task index into thread
/// coordinates that `wp.tid()` does for every thread. Warp's `tid` calls
/// `launch_coord` unqualified, so these non-template overloads, visible
/// where its kernels are instantiated, are chosen over Warp's template; they
/// give the same coordinates.
///
/// The entry points run the task indices of a plain launch (one thread per
/// coordinate) in order, so they keep the coordinates themselves and step
/// them forward (`wpl_next_coord`), and publish the current index and
/// coordinates in a per-thread cursor that `launch_coord` answers from
/// without dividing. Where the kernel body is inlined into the loop (small
/// kernels, where the division costs most) the compiler keeps the cursor in
/// registers. Any other index (tiled launches, or a cursor not set) is
/// unravelled by division: 32-bit when the index fits in 32 bits, as LLVM
/// does for Warp's own CPU build, 64-bit otherwise. A division per thread
/// made the 2-D `add2d` 2.8x slower in C++ on this project's 2-core AMD
/// machines (7.0 against 2.5 ns per element) and slower than Warp's own
/// CPU device.
const LAUNCH_COORD: &str = "// wp::launch_coord from the entry points' cursor, else by division (warp-build).
namespace wp {
struct wpl_cursor_t
{
    size_t index;
    launch_coord_t coord;
};
static thread_local wpl_cursor_t wpl_cursor = { ~(size_t)0, { 0, 0, 0, 0 } };
template <int N> inline launch_coord_t wpl_launch_coord(size_t linear, const launch_bounds_t<N>& bounds)
{
    if (linear == wpl_cursor.index)
        return wpl_cursor.coord;
    launch_coord_t coord = { 0, 0, 0, 0 };
    if (bounds.coord_mult > 1)
        linear /= bounds.coord_mult;
    if (linear <= 0xffffffffu) {
        uint32_t l = (uint32_t)linear;
        if constexpr (N > 3) { coord.l = l % bounds.shape[3]; l /= bounds.shape[3]; }
        if constexpr (N > 2) { coord.k = l % bounds.shape[2]; l /= bounds.shape[2]; }
        if constexpr (N > 1) { coord.j = l % bounds.shape[1]; l /= bounds.shape[1]; }
        coord.i = l;
        return coord;
    }
    if constexpr (N > 3) { coord.l = linear % bounds.shape[3]; linear /= bounds.shape[3]; }
    if constexpr (N > 2) { coord.k = linear % bounds.shape[2]; linear /= bounds.shape[2]; }
    if constexpr (N > 1) { coord.j = linear % bounds.shape[1]; linear /= bounds.shape[1]; }
    coord.i = linear;
    return coord;
}
// The coordinates after `c` in a launch of one thread per coordinate.
template <int N> inline void wpl_next_coord(launch_coord_t& c, const launch_bounds_t<N>& b)
{
    if constexpr (N > 3) { uint32_t l = (uint32_t)c.l + 1; if (l < b.shape[3]) { c.l = (int)l; return; } c.l = 0; }
    if constexpr (N > 2) { uint32_t k = (uint32_t)c.k + 1; if (k < b.shape[2]) { c.k = (int)k; return; } c.k = 0; }
    uint32_t j = (uint32_t)c.j + 1;
    if (j < b.shape[1]) { c.j = (int)j; return; }
    c.j = 0;
    c.i = (int)((uint32_t)c.i + 1);
}
inline launch_coord_t launch_coord(size_t linear, const launch_bounds_t<2>& b) { return wpl_launch_coord<2>(linear, b); }
inline launch_coord_t launch_coord(size_t linear, const launch_bounds_t<3>& b) { return wpl_launch_coord<3>(linear, b); }
inline launch_coord_t launch_coord(size_t linear, const launch_bounds_t<4>& b) { return wpl_launch_coord<4>(linear, b); }
}  // namespace wp
";

/// `wpl_packed(x)`: whether an argument is no array or an array whose first
/// stride is its element size (the condition of Warp's contiguous CPU
/// specialization, which replaces a 1-D array's stride by the element
/// size).
const PACKED: &str = "// Whether an argument is no array, or an array whose first stride is its element size (warp-build).
template <typename T> inline bool wpl_packed(const wp::array_t<T>& a) { return a.strides[0] == (int)sizeof(T); }
template <typename T> inline bool wpl_packed(const T&) { return true; }
";

/// The C++ condition that every field of the argument structs `structs`
/// (`a`, and `adj` for a backward pass) is packed ([`PACKED`]).
fn packed(fields: &[String], structs: &[&str]) -> String {
    let all: Vec<String> = structs
        .iter()
        .flat_map(|s| fields.iter().map(move |f| format!("wpl_packed({s}->{f})")))
        .collect();
    if all.is_empty() {
        "true".into()
    } else {
        all.join(" & ")
    }
}

pub(crate) fn symbol(module: &str, key: &str, what: &str) -> String {
    format!("wpl_{module}__{key}__{what}")
}

/// The `#define` lines Warp's file starts with (before its first
/// `#include`): they configure the headers and must precede them.
fn prelude(warp_cpp: &str) -> Vec<&str> {
    warp_cpp
        .lines()
        .take_while(|l| !l.trim_start().starts_with("#include"))
        .filter(|l| l.trim_start().starts_with("#define"))
        .collect()
}

/// The text of `wp_<module>.cpu.cpp` for Warp's file `wp_<module>.cpp`
/// (`warp_cpp`, its text) and its parsed kernels.
pub(crate) fn generate(module: &str, warp_cpp: &str, kernels: &[CpuKernel]) -> String {
    let ns = format!("wpl_{module}");
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// @generated by warp-build: the CPU entry points of the Warp module `{module}`\n\
         // (Warp's generated C++ is wp_{module}.cpp, included below); do not edit.\n"
    );
    for line in prelude(warp_cpp) {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(
        s,
        "\n// C declarations shared by every module (global scope).\n\
         #include \"crt.h\"\n\
         #include \"cpu_block_runtime.h\"\n\
         \n\
         // Everything C++ of this module lives in namespace {ns}.\n\
         namespace {ns} {{ namespace wp {{}} }}\n\
         namespace wp = {ns}::wp;\n\
         \n\
         #if defined(__GNUC__)\n\
         #pragma GCC diagnostic push\n\
         #pragma GCC diagnostic ignored \"-Wunused-function\"\n\
         #pragma GCC diagnostic ignored \"-Winvalid-offsetof\"\n\
         #endif\n\
         \n\
         namespace {ns} {{\n\
         #include \"builtin.h\"\n\
         #include \"deterministic.h\"\n\
         {LAUNCH_COORD}\
         {PACKED}\
         // Warp's entry points (extern \"C\" {{ WP_API void <key>_cpu_forward(...) }}): internal linkage.\n\
         #undef WP_API\n\
         #define WP_API static\n\
         #include \"wp_{module}.cpp\"\n"
    );
    for k in kernels.iter().filter(|k| k.unsupported.is_none()) {
        let key = &k.key;
        let n = k.dim;
        let args = format!("wp_args_{key}");
        let _ = writeln!(
            s,
            "\n// {key}: wp::launch_bounds_t<{n}>, {args} {{ {} }}\n\
             extern \"C\" void {fwd}(const void* dim, void* args, size_t first, size_t last)\n\
             {{\n    \
                 const wp::launch_bounds_t<{n}>& bounds = *static_cast<const wp::launch_bounds_t<{n}>*>(dim);\n    \
                 {args}* a = static_cast<{args}*>(args);\n    \
                 {loop}\n\
             }}",
            k.fields.join(", "),
            fwd = symbol(module, key, "forward"),
            loop = task_loop(
                n,
                &format!("{key}_cpu_kernel_forward"),
                "a",
                &packed(&k.fields, &["a"])
            ),
        );
        if k.backward {
            let _ = writeln!(
                s,
                "\nextern \"C\" void {bwd}(const void* dim, void* args, void* adj_args, size_t first, size_t last)\n\
                 {{\n    \
                     const wp::launch_bounds_t<{n}>& bounds = *static_cast<const wp::launch_bounds_t<{n}>*>(dim);\n    \
                     {args}* a = static_cast<{args}*>(args);\n    \
                     {args}* adj = static_cast<{args}*>(adj_args);\n    \
                     {loop}\n\
                 }}",
                bwd = symbol(module, key, "backward"),
                loop = task_loop(
                    n,
                    &format!("{key}_cpu_kernel_backward"),
                    "a, adj",
                    &packed(&k.fields, &["a", "adj"])
                ),
            );
        }
        let mut values = vec![format!("sizeof({args})"), format!("alignof({args})")];
        values.extend(
            k.fields
                .iter()
                .map(|f| format!("__builtin_offsetof({args}, {f})")),
        );
        let _ = writeln!(
            s,
            "\nextern \"C\" size_t {layout}(size_t* out, size_t cap)\n\
             {{\n    \
                 const size_t values[] = {{ {} }};\n    \
                 const size_t count = sizeof(values) / sizeof(values[0]);\n    \
                 for (size_t i = 0; i < count && i < cap; ++i)\n        \
                     out[i] = values[i];\n    \
                 return count;\n\
             }}",
            values.join(", "),
            layout = symbol(module, key, "layout"),
        );
    }
    for k in kernels.iter() {
        if let Some(why) = &k.unsupported {
            let _ = writeln!(s, "\n// {}: no CPU entry points: {why}", k.key);
        }
    }
    let _ = writeln!(
        s,
        "\n}}  // namespace {ns}\n\n\
         #if defined(__GNUC__)\n\
         #pragma GCC diagnostic pop\n\
         #endif"
    );
    s
}
