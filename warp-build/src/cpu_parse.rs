//! Reading Warp's generated CPU code (`wp_<module>.cpp`): its kernels (key,
//! launch dimension, whether a backward exists, the fields of `wp_args_<key>`
//! in order) and which of them need Warp's cooperative block runtime.
//!
//! The generated file is plain C++ of a fixed shape: top-level `struct
//! wp_args_<key> { ... };`, `template <bool wp_linear_contiguous> static void
//! <key>_cpu_kernel_forward(wp::launch_bounds_t<N> dim, ...)` (and
//! `_backward`), user functions, and `extern "C" { ... }` entry points. The
//! parser strips comments and literals, then splits the file into top-level
//! items by brace depth.

use std::collections::{BTreeMap, BTreeSet};

/// One kernel of the module, as Warp generated it for the CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CpuKernel {
    /// The kernel's key (`saxpy`): `wp_args_<key>`, `<key>_cpu_kernel_forward`.
    pub key: String,
    /// The launch dimension N of `wp::launch_bounds_t<N>` (1 to 4).
    pub dim: u32,
    /// Whether `<key>_cpu_kernel_backward` exists.
    pub backward: bool,
    /// The fields of `wp_args_<key>`, in order.
    pub fields: Vec<String>,
    /// Why the kernel cannot run lane by lane (it needs Warp's cooperative
    /// block runtime), or `None` when it can.
    pub unsupported: Option<String>,
}

/// Every kernel in Warp's generated CPU code, in file order.
///
/// # Errors
///
/// A description of what is not as Warp 1.19.0 writes it (a kernel without
/// its `wp_args_` struct, a launch dimension that does not parse).
pub(crate) fn parse(text: &str) -> Result<Vec<CpuKernel>, String> {
    let code = strip(text);
    let items = top_level(&code);

    let mut structs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut functions: BTreeMap<String, Function> = BTreeMap::new();
    for item in &items {
        let head = item.head.trim();
        if head.starts_with("extern") || head.starts_with("namespace") {
            continue;
        }
        if let Some(key) = head
            .strip_prefix("struct ")
            .map(str::trim)
            .and_then(|n| n.strip_prefix("wp_args_"))
        {
            structs.insert(key.trim().to_string(), fields(&item.body));
            continue;
        }
        if let Some(name) = function_name(head) {
            // Overloads of a user function: one entry, every body.
            let f = functions
                .entry(name.to_string())
                .or_insert_with(|| Function {
                    head: head.to_string(),
                    body: String::new(),
                });
            f.body.push_str(&item.body);
            f.body.push('\n');
        }
    }

    let mut kernels = Vec::new();
    for (name, f) in &functions {
        let Some(key) = name.strip_suffix("_cpu_kernel_forward") else {
            continue;
        };
        let dim = launch_dim(&f.head).ok_or_else(|| {
            format!(
                "`{name}` does not take a `wp::launch_bounds_t<N> dim` with N from 1 to 4 \
                 (its declaration: `{}`)",
                f.head
            )
        })?;
        let fields = structs
            .get(key)
            .cloned()
            .ok_or_else(|| format!("kernel `{key}` has `{name}` but no `struct wp_args_{key}`"))?;
        let backward_name = format!("{key}_cpu_kernel_backward");
        let backward = functions.contains_key(&backward_name);
        let mut unsupported = None;
        for (pass, fname) in [
            ("forward", name.as_str()),
            ("backward", backward_name.as_str()),
        ] {
            if let Some(f) = functions.get(fname)
                && let Some(why) = cooperative(&f.body, &functions, &mut BTreeSet::new())
            {
                unsupported = Some(format!(
                    "its {pass} code uses Warp's cooperative block runtime ({why}); tile kernels \
                     run on the CPU through Warp's fiber scheduler, which warp-launch does not \
                     link: launch it on a GPU"
                ));
                break;
            }
        }
        kernels.push(CpuKernel {
            key: key.to_string(),
            dim,
            backward,
            fields,
            unsupported,
        });
    }
    // File order (the map sorted them by name): by position of the struct.
    kernels.sort_by_key(|k| {
        text.find(&format!("struct wp_args_{} ", k.key))
            .or_else(|| text.find(&format!("struct wp_args_{}\n", k.key)))
            .unwrap_or(usize::MAX)
    });
    Ok(kernels)
}

/// A top-level function definition: its declaration and body.
#[derive(Debug)]
struct Function {
    head: String,
    body: String,
}

/// What in `body` (or a function it calls, transitively) needs the
/// cooperative runtime, if anything: the first such name.
fn cooperative(
    body: &str,
    functions: &BTreeMap<String, Function>,
    seen: &mut BTreeSet<String>,
) -> Option<String> {
    for (i, word) in words(body) {
        let qualified = body[..i].ends_with("wp::");
        let name = if qualified {
            format!("wp::{word}")
        } else {
            word.to_string()
        };
        let tile_builtin = qualified
            && (word.starts_with("tile")
                || word.starts_with("adj_tile")
                || word.starts_with("untile")
                || word.starts_with("adj_untile")
                || word.starts_with("wp_block_shared"));
        let runtime = word.starts_with("wp_cpu_")
            || word.starts_with("WP_TILE_")
            || word == "__syncthreads"
            || word == "tile_shared_storage_t";
        if tile_builtin || runtime {
            return Some(format!("`{name}`"));
        }
        if !qualified
            && let Some(f) = functions.get(word)
            && seen.insert(word.to_string())
            && let Some(why) = cooperative(&f.body, functions, seen)
        {
            return Some(format!("{why} in `{word}`"));
        }
    }
    None
}

/// Identifiers of `code` with their byte offsets.
fn words(code: &str) -> impl Iterator<Item = (usize, &str)> {
    let bytes = code.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let c = bytes[i];
            if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                return Some((start, &code[start..i]));
            }
            if c.is_ascii_digit() {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                continue;
            }
            i += 1;
        }
        None
    })
}

/// The function name of a declaration: the identifier before the first `(`,
/// when the declaration has a parameter list and is not a macro or struct.
fn function_name(head: &str) -> Option<&str> {
    if head.starts_with('#') || head.starts_with("struct") || head.starts_with("class") {
        return None;
    }
    let open = head.find('(')?;
    let before = head[..open].trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let name = &before[start..];
    (!name.is_empty()).then_some(name)
}

/// N of the first `launch_bounds_t<N>` in `head`.
fn launch_dim(head: &str) -> Option<u32> {
    let rest = &head[head.find("launch_bounds_t<")? + "launch_bounds_t<".len()..];
    let n: u32 = rest[..rest.find('>')?].trim().parse().ok()?;
    (1..=4).contains(&n).then_some(n)
}

/// The field names of a struct body, in order: the last identifier of each
/// `;`-terminated declaration.
fn fields(body: &str) -> Vec<String> {
    body.split(';')
        .filter_map(|decl| {
            let decl = decl.split('[').next().unwrap_or("").trim();
            let end = decl.trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            let start = end
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &end[start..];
            (!decl.is_empty() && !name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// A top-level item: the text before its `{` (from the end of the previous
/// item) and the text between its braces.
#[derive(Debug)]
struct Item {
    head: String,
    body: String,
}

/// The brace-delimited top-level items of `code` (comments and literals
/// already stripped). Preprocessor lines end an item's head.
fn top_level(code: &str) -> Vec<Item> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut head_start = 0;
    let mut body_start = 0;
    let mut head = String::new();
    for (i, c) in code.char_indices() {
        match c {
            '{' => {
                if depth == 0 {
                    head = code[head_start..i].to_string();
                    body_start = i + 1;
                }
                depth += 1;
            }
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    // The declaration is what follows the last `;`, `}` or
                    // preprocessor line before the brace.
                    let decl = head
                        .lines()
                        .rev()
                        .take_while(|l| !l.trim_start().starts_with('#'))
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect::<Vec<_>>()
                        .join("\n");
                    let decl = decl.rsplit(';').next().unwrap_or("").trim().to_string();
                    items.push(Item {
                        head: decl,
                        body: code[body_start..i].to_string(),
                    });
                    head_start = i + 1;
                }
            }
            ';' if depth == 0 => head_start = i + 1,
            _ => {}
        }
    }
    items
}

/// `text` with comments removed and string and character literals emptied
/// (`"..."` becomes `""`), so that braces and names inside them do not count.
pub(crate) fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
                out.push(' ');
            }
            '"' | '\'' => {
                out.push(c);
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == c {
                        break;
                    } else if d == '\n' {
                        out.push('\n');
                    }
                }
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../warp-launch/tests/fixtures")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn kernel<'a>(kernels: &'a [CpuKernel], key: &str) -> &'a CpuKernel {
        kernels
            .iter()
            .find(|k| k.key == key)
            .unwrap_or_else(|| panic!("{key} in {kernels:?}"))
    }

    /// Warp 1.19.0's CPU output for tests/warp/kernels.py: every kernel, in
    /// file order, with its struct's fields and dimension; none cooperative.
    #[test]
    fn parses_warps_cpu_code_for_the_test_kernels() {
        let text = fixture("wp_kernels.cpp");
        let kernels = parse(&text).unwrap();
        let keys: Vec<&str> = kernels.iter().map(|k| k.key.as_str()).collect();
        // The same kernels, in the same order, as the CUDA fixture's forward kernels.
        let cu = fixture("wp_kernels.cu");
        let cu_keys: Vec<&str> = cu
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                let rest = l.strip_prefix("extern \"C\" __global__ void ")?;
                rest.split('(').next()?.strip_suffix("_cuda_kernel_forward")
            })
            .collect();
        assert_eq!(keys, cu_keys);
        assert!(
            kernels.iter().all(|k| k.unsupported.is_none()),
            "{kernels:?}"
        );
        assert!(kernels.iter().all(|k| k.backward));
        let saxpy = kernel(&kernels, "saxpy");
        assert_eq!(saxpy.fields, ["a", "x", "y"]);
        assert_eq!(saxpy.dim, 1);
        assert_eq!(kernel(&kernels, "add2d").dim, 2);
        assert_eq!(kernel(&kernels, "index4d").dim, 4);
        assert_eq!(kernel(&kernels, "count_visits").fields, ["count"]);
    }

    /// Warp 1.19.0's CPU output for tests/warp/tiles.py (block_dim 64):
    /// every kernel uses tiles, and each is refused with the builtin named.
    #[test]
    fn tile_kernels_of_warps_cpu_code_are_unsupported() {
        let text = fixture("wp_tiles.cpp");
        let kernels = parse(&text).unwrap();
        assert!(kernels.len() >= 6, "{kernels:?}");
        for k in &kernels {
            let why = k.unsupported.as_deref().unwrap_or_else(|| panic!("{k:?}"));
            assert!(why.contains("`wp::tile"), "{why}");
            assert!(why.contains("forward"), "{why}");
        }
        assert!(
            kernel(&kernels, "row_sums")
                .unsupported
                .as_deref()
                .unwrap()
                .contains("`wp::tile_register_t`")
                || kernel(&kernels, "row_sums")
                    .unsupported
                    .as_deref()
                    .unwrap()
                    .contains("`wp::tile_load`")
        );
    }

    /// A kernel that reaches tile code only through a user function is
    /// refused too; one whose function does not is not.
    #[test]
    fn cooperative_code_is_found_through_user_functions() {
        let text = "struct wp_args_k { wp::float32 a; };\n\
            static CUDA_CALLABLE void helper_0(int x) { wp::tile_sync<64>(); }\n\
            static CUDA_CALLABLE void plain_0(int x) { x = 1; }\n\
            static CUDA_CALLABLE void outer_0(int x) { helper_0(x); }\n\
            template <bool wp_linear_contiguous>\n\
            static void k_cpu_kernel_forward(wp::launch_bounds_t<2> dim, size_t task_index, wp_args_k *_wp_args)\n\
            { plain_0(1); outer_0(2); }\n\
            struct wp_args_j { wp::float32 a; };\n\
            template <bool wp_linear_contiguous>\n\
            static void j_cpu_kernel_forward(wp::launch_bounds_t<1> dim, size_t task_index, wp_args_j *_wp_args)\n\
            { plain_0(1); /* wp::tile_load */ const char* s = \"wp::tile_load\"; }\n";
        let kernels = parse(text).unwrap();
        assert_eq!(kernels.len(), 2);
        let k = kernel(&kernels, "k");
        assert_eq!(k.dim, 2);
        assert!(!k.backward);
        assert_eq!(
            k.unsupported.as_deref(),
            Some(
                "its forward code uses Warp's cooperative block runtime (`wp::tile_sync` in \
                 `helper_0` in `outer_0`); tile kernels run on the CPU through Warp's fiber \
                 scheduler, which warp-launch does not link: launch it on a GPU"
            )
        );
        assert_eq!(kernel(&kernels, "j").unsupported, None);
    }

    #[test]
    fn a_kernel_without_its_struct_is_an_error() {
        let text = "template <bool wp_linear_contiguous>\n\
            static void k_cpu_kernel_forward(wp::launch_bounds_t<1> dim, size_t i, wp_args_k *a) { }\n";
        let e = parse(text).unwrap_err();
        assert!(e.contains("no `struct wp_args_k`"), "{e}");
    }

    #[test]
    fn comments_and_literals_hide_braces() {
        let code = strip("a { // b { \"}\"\n x = \"{\\\"\"; c = '}'; /* { */ }");
        assert_eq!(code, "a { \n x = \"\"; c = '';   }");
        let items = top_level(&code);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].head, "a");
    }

    #[test]
    fn fields_are_the_last_identifiers() {
        assert_eq!(
            fields("\n wp::float32 a;\n wp::array_t<wp::vec_t<3, wp::float32>> x;\n int y[4];\n"),
            ["a", "x", "y"]
        );
        assert_eq!(fields("\n"), Vec::<String>::new());
    }

    #[test]
    fn names_and_dims() {
        assert_eq!(
            function_name(
                "template <bool wp_linear_contiguous>\nstatic void k_cpu_kernel_forward(\n wp::launch_bounds_t<3> dim, size_t i)"
            ),
            Some("k_cpu_kernel_forward")
        );
        assert_eq!(launch_dim("f(wp::launch_bounds_t<3> dim)"), Some(3));
        assert_eq!(launch_dim("f(wp::launch_bounds_t<5> dim)"), None);
        assert_eq!(function_name("#define X(a) a"), None);
    }
}
