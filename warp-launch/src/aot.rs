//! Loading a directory written by Warp's `wp.compile_aot_module(module,
//! arch=90, module_dir=DIR, use_ptx=False, strip_hash=True)`: the kernels'
//! parameters come from the generated `wp_<module>.cu`, dynamic shared
//! memory from `wp_<module>.meta`, the code from `wp_<module>.sm<arch>.cubin`
//! (or `.ptx`). No Python at run time.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuda_api::Library;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, KernelSpec, ParamKind, StructType};
use crate::source::{self, Direction, KernelBody, Source, SourceKernel};

/// A loaded Warp AOT module: its kernels by key.
pub struct AotModule {
    name: String,
    dir: PathBuf,
    kernels: BTreeMap<String, Kernel>,
}

impl fmt::Debug for AotModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AotModule")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("kernels", &self.kernels.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        error,
    })
}

fn read_text(path: &Path) -> Result<String> {
    String::from_utf8(read(path)?).map_err(|_| Error::Source {
        file: path.display().to_string(),
        line: 0,
        message: "not UTF-8 text; is this a Warp-generated file?".into(),
    })
}

fn list(dir: &Path) -> Result<Vec<String>> {
    let rd = std::fs::read_dir(dir).map_err(|error| Error::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let mut names: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

impl AotModule {
    /// Loads the one module in `dir` (the directory holds one `wp_*.cu`).
    pub fn load(dir: impl AsRef<Path>) -> Result<AotModule> {
        let dir = dir.as_ref();
        let modules: Vec<String> = list(dir)?
            .into_iter()
            .filter_map(|n| {
                n.strip_prefix("wp_")?
                    .strip_suffix(".cu")
                    .map(str::to_string)
            })
            .collect();
        match modules.as_slice() {
            [one] => Self::load_named(dir, one),
            _ => Err(Error::Source {
                file: dir.display().to_string(),
                line: 0,
                message: format!(
                    "expected one Warp module (wp_<name>.cu) in the directory, found {}: {modules:?}; use AotModule::load_named(dir, name)",
                    modules.len()
                ),
            }),
        }
    }

    /// Loads module `name` from `dir` (`wp_<name>.cu`, `.meta`, and the
    /// image: `wp_<name>.sm<arch>.cubin`, else `.ptx`).
    pub fn load_named(dir: impl AsRef<Path>, name: &str) -> Result<AotModule> {
        let dir = dir.as_ref();
        let cu_path = dir.join(format!("wp_{name}.cu"));
        let meta_path = dir.join(format!("wp_{name}.meta"));
        let cu_file = cu_path.display().to_string();
        let text = read_text(&cu_path)?;
        let src = source::parse_cu(&text, &cu_file).map_err(src_err)?;
        let meta = source::parse_meta(&read_text(&meta_path)?, &meta_path.display().to_string())
            .map_err(src_err)?;
        let image = find_image(dir, name)?;
        let library = Library::from_image(&read(&image)?).map_err(Error::from)?;
        let mut kernels = BTreeMap::new();
        for k in src
            .kernels
            .iter()
            .filter(|k| k.direction() == Some(Direction::Forward))
        {
            let key = k.key().to_string();
            let backward = src
                .kernels
                .iter()
                .find(|b| b.direction() == Some(Direction::Backward) && b.key() == key);
            let spec = spec_of(k, &src, &text, &cu_file)?.shared_mem(
                meta.shared_memory_bytes(&k.name).unwrap_or(0),
                backward
                    .and_then(|b| meta.shared_memory_bytes(&b.name))
                    .unwrap_or(0),
            );
            // SAFETY: the declaration was read from the source that Warp
            // compiled into this directory's image, kernel by kernel; the
            // driver's layout confirms counts, sizes and offsets.
            let kernel =
                unsafe { spec.load_cuda(&library, &k.name, backward.map(|b| b.name.as_str())) }?;
            kernels.insert(key, kernel);
        }
        Ok(AotModule {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            kernels,
        })
    }

    /// The module's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Kernel `key` (the Python function's name).
    pub fn kernel(&self, key: &str) -> Result<Kernel> {
        self.kernels
            .get(key)
            .cloned()
            .ok_or_else(|| Error::NoSuchKernel {
                module: format!("Warp module '{}' in {}", self.name, self.dir.display()),
                kernel: key.to_string(),
                known: self.kernels.keys().cloned().collect(),
            })
    }

    /// Every kernel's key.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.kernels.keys().map(String::as_str)
    }
}

fn src_err(e: source::SourceError) -> Error {
    Error::Source {
        file: e.file().to_string(),
        line: e.line(),
        message: e.message().to_string(),
    }
}

fn find_image(dir: &Path, name: &str) -> Result<PathBuf> {
    let prefix = format!("wp_{name}.");
    let names = list(dir)?;
    let pick = |ext: &str| {
        names
            .iter()
            .filter(|n| n.starts_with(&prefix) && n.ends_with(ext))
            .max()
            .map(|n| dir.join(n))
    };
    pick(".cubin").or_else(|| pick(".ptx")).ok_or_else(|| Error::Source {
        file: dir.display().to_string(),
        line: 0,
        message: format!(
            "no image for module '{name}' (wp_{name}.sm<arch>.cubin or .ptx); compile it with wp.compile_aot_module(..., use_ptx=False)"
        ),
    })
}

/// The declaration of forward kernel `k`: `launch_bounds_t<N>` first, then
/// each parameter resolved to an array, value or struct type.
pub(crate) fn spec_of(
    k: &SourceKernel,
    src: &Source,
    text: &str,
    file: &str,
) -> Result<KernelSpec> {
    let err = |line: usize, message: String| Error::Source {
        file: file.to_string(),
        line,
        message,
    };
    let ndim = k.launch_ndim().ok_or_else(|| {
        err(
            k.line,
            format!(
                "kernel '{}' does not start with a wp::launch_bounds_t<N> parameter; not a Warp kernel",
                k.name
            ),
        )
    })?;
    let mut spec = KernelSpec::new(k.key(), ndim).grid_stride(k.body != KernelBody::Lean);
    if let Some(n) = tile_block_dim(text) {
        spec = spec.compiled_block_dim(n);
    }
    let mut hints = ndim_hints(text, k.key());
    let end = src
        .kernels
        .iter()
        .map(|o| o.line)
        .filter(|&l| l > k.line)
        .min()
        .unwrap_or(usize::MAX);
    for p in &k.params[1..] {
        if !hints.contains_key(p.label())
            && let Some(n) = index_arity(text, k.line, end, &p.name)
        {
            hints.insert(p.label().to_string(), n);
        }
    }
    for p in &k.params[1..] {
        let kind = resolve(&p.cpp_type, src, 0).map_err(|m| {
            err(
                p.line,
                format!("parameter '{}' of kernel '{}': {m}", p.label(), k.key()),
            )
        })?;
        let kind = match kind {
            ParamKind::Array { dtype, .. } => ParamKind::Array {
                dtype,
                ndim: hints.get(p.label()).copied(),
            },
            other => other,
        };
        spec = spec.param(p.label(), kind);
    }
    Ok(spec)
}

/// The block size Warp compiled the module for (`#define WP_TILE_BLOCK_DIM N`).
fn tile_block_dim(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("#define WP_TILE_BLOCK_DIM "))
        .and_then(|v| v.trim().parse().ok())
}

/// A C++ type of a Warp-generated source as a parameter kind.
fn resolve(cpp: &str, src: &Source, depth: usize) -> Result<ParamKind, String> {
    if let Some(inner) = cpp
        .strip_prefix("wp::array_t<")
        .and_then(|s| s.strip_suffix('>'))
    {
        let dtype = DType::by_cpp(inner).ok_or_else(|| {
            format!("array element type '{inner}' is not a Warp dtype this crate knows")
        })?;
        return Ok(ParamKind::Array { dtype, ndim: None });
    }
    if let Some(d) = DType::by_cpp(cpp) {
        return Ok(ParamKind::Value(d));
    }
    if let Some(s) = src.struct_named(cpp) {
        if depth > 16 {
            return Err(format!("struct '{cpp}' nests too deeply"));
        }
        let fields = s
            .fields
            .iter()
            .map(|f| resolve(&f.cpp_type, src, depth + 1).map(|k| (f.name.clone(), k)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| format!("in struct '{cpp}': {m}"))?;
        return Ok(ParamKind::Struct(Arc::new(StructType::new(
            s.name.clone(),
            fields,
        ))));
    }
    Err(format!(
        "type '{cpp}' is not one this crate reads (wp::array_t<T>, a Warp scalar, vector or matrix, or a struct defined in the file)"
    ))
}

/// Array dimensions from the Python signature Warp copies into the source
/// as a comment (`// def key(a: wp.array2d(dtype=...), ...):`), when it is
/// on one line; arrays it cannot read stay unknown.
fn ndim_hints(text: &str, key: &str) -> BTreeMap<String, u8> {
    let mut out = BTreeMap::new();
    let needle = format!("// def {key}(");
    let Some(line) = text.lines().find(|l| l.trim_start().starts_with(&needle)) else {
        return out;
    };
    let sig = line
        .trim_start()
        .trim_start_matches(&needle[..needle.len() - 1]);
    let Some(sig) = sig.split("):").next() else {
        return out;
    };
    let sig = sig.trim_start_matches('(');
    // split on top-level commas
    let (mut depth, mut start, mut parts) = (0i32, 0usize, Vec::new());
    for (i, c) in sig.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&sig[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&sig[start..]);
    for p in parts {
        let Some((name, ann)) = p.split_once(':') else {
            continue;
        };
        let ann = ann.trim();
        let n = if let Some(rest) = ann.strip_prefix("wp.array") {
            if let Some(d) = rest.chars().next().and_then(|c| c.to_digit(10)) {
                Some(d as u8)
            } else if rest.starts_with('(') {
                match rest.split("ndim=").nth(1) {
                    Some(v) => v
                        .chars()
                        .next()
                        .and_then(|c| c.to_digit(10))
                        .map(|d| d as u8),
                    None => Some(1),
                }
            } else {
                None
            }
        } else {
            None
        };
        if let Some(n) = n {
            out.insert(name.trim().to_string(), n);
        }
    }
    out
}

/// Array dimensions from how the kernel body (lines `from..to`) indexes
/// parameter `var`: `wp::address(var, i, j)` takes one index per dimension,
/// `wp::array_store(var, i, j, value)` one per dimension and a value. Only
/// when every such call agrees.
fn index_arity(text: &str, from: usize, to: usize, var: &str) -> Option<u8> {
    let mut found: Option<usize> = None;
    for line in text.lines().skip(from).take(to.saturating_sub(from + 1)) {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        for (call, extra) in [("wp::address(", 1usize), ("wp::array_store(", 2)] {
            let mut rest = code;
            while let Some(at) = rest.find(call) {
                rest = &rest[at + call.len()..];
                let Some(close) = rest.find(')') else { break };
                let args: Vec<&str> = rest[..close].split(',').map(str::trim).collect();
                if args.first() != Some(&var) || args.len() <= extra {
                    continue;
                }
                let n = args.len() - extra;
                if found.is_some_and(|f| f != n) {
                    return None;
                }
                found = Some(n);
            }
        }
    }
    found.filter(|n| (1..=4).contains(n)).map(|n| n as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CU: &str = include_str!("../tests/fixtures/wp_kernels.cu");

    fn spec(key: &str) -> KernelSpec {
        let src = source::parse_cu(CU, "wp_kernels.cu").unwrap();
        let k = src
            .kernels
            .iter()
            .find(|k| k.key() == key && k.direction() == Some(Direction::Forward))
            .unwrap();
        spec_of(k, &src, CU, "wp_kernels.cu").unwrap()
    }

    fn describe(s: &KernelSpec) -> Vec<String> {
        s.params()
            .iter()
            .map(|p| format!("{}: {}", p.name, p.kind.describe()))
            .collect()
    }

    #[test]
    fn fixture_kernels_resolve_to_declarations() {
        insta::assert_debug_snapshot!("saxpy", describe(&spec("saxpy")));
        insta::assert_debug_snapshot!("use_struct", describe(&spec("use_struct")));
        insta::assert_debug_snapshot!("transform", describe(&spec("transform")));
        insta::assert_debug_snapshot!("lean_fill", describe(&spec("lean_fill")));
        assert!(!spec("lean_fill").is_grid_stride());
        assert!(spec("saxpy").is_grid_stride());
        let us = spec("use_struct");
        let ParamKind::Struct(st) = &us.params()[0].kind else {
            panic!("use_struct's first parameter is a struct");
        };
        // float32 at 0, vec3f at 4, int32 at 16: 20 bytes, 4-aligned.
        assert_eq!(
            st.fields.iter().map(|f| f.offset).collect::<Vec<_>>(),
            vec![0, 4, 16]
        );
        assert_eq!((st.size, st.align), (20, 4));
    }

    #[test]
    fn warp_kernels_keep_the_block_size_they_were_compiled_for() {
        assert_eq!(tile_block_dim(CU), Some(256));
        assert_eq!(spec("saxpy").fixed_block_dim(), Some(256));
    }

    #[test]
    fn ndim_comes_from_the_python_signature() {
        let h = ndim_hints(CU, "lean_fill");
        assert_eq!(h.get("out"), Some(&2));
        let h = ndim_hints(CU, "index4d");
        assert_eq!(h.get("out"), Some(&4));
        let h = ndim_hints(CU, "saxpy");
        assert_eq!((h.get("x"), h.get("y")), (Some(&1), Some(&1)));
        // add2d's signature spans lines, so the body's indexing decides.
        assert!(ndim_hints(CU, "add2d").is_empty());
        let add2d = spec("add2d");
        assert!(
            add2d
                .params()
                .iter()
                .all(|p| matches!(p.kind, ParamKind::Array { ndim: Some(2), .. }))
        );
    }

    #[test]
    fn unknown_types_are_errors_naming_file_and_line() {
        let text = "extern \"C\" __global__ void k_cuda_kernel_forward(\n    wp::launch_bounds_t<1> dim,\n    wp::indexedarray_t<wp::float32> var_x)\n{\n}\n";
        let src = source::parse_cu(text, "x.cu").unwrap();
        let e = spec_of(&src.kernels[0], &src, text, "x.cu").unwrap_err();
        insta::assert_snapshot!("unknown_type", e.to_string());
    }
}
