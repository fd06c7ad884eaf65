//! What every kernel of a module shares while it is declared: the structs
//! (each resolved once), the Python signatures Warp copies into the source,
//! the kernels' lines and the compiled block size.

use crate::hash::HashMap;
use std::sync::Arc;

use crate::abi::DType;
use crate::signature::{ParamKind, StructType};
use crate::source::{Source, SourceKernel, SourceStruct};

/// What every kernel of one module shares: the structs by name (resolved
/// once each), Python signatures by kernel key, kernel lines, the compiled
/// block size. Built in one pass over the source.
pub(crate) struct ModuleContext<'a> {
    pub(super) text: &'a str,
    pub(super) src: &'a Source,
    pub(super) structs: HashMap<&'a str, &'a SourceStruct>,
    pub(super) resolved: std::sync::Mutex<HashMap<String, (Arc<StructType>, usize)>>,
    pub(super) signatures: HashMap<&'a str, &'a str>,
    /// Byte offset of the start of every line (index = line - 1).
    pub(super) line_starts: Vec<usize>,
    /// Every kernel's line, sorted.
    pub(super) kernel_lines: Vec<usize>,
    pub(super) block_dim: Option<u32>,
}

impl<'a> ModuleContext<'a> {
    pub(crate) fn new(text: &'a str, src: &'a Source) -> ModuleContext<'a> {
        let mut structs = HashMap::default();
        for s in &src.structs {
            structs.entry(s.name.as_str()).or_insert(s);
        }
        let mut signatures = HashMap::default();
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i + 1);
            }
        }
        for line in text.lines() {
            let code = line.trim_start();
            if let Some(rest) = code.strip_prefix("// def ")
                && let Some((key, _)) = rest.split_once('(')
            {
                signatures.entry(key).or_insert(code);
            }
        }
        let mut kernel_lines: Vec<usize> = src.kernels.iter().map(|k| k.line).collect();
        kernel_lines.sort_unstable();
        ModuleContext {
            text,
            src,
            structs,
            resolved: Default::default(),
            signatures,
            line_starts,
            kernel_lines,
            block_dim: tile_block_dim(text),
        }
    }

    /// The text of kernel `k` (the lines after its name up to the next
    /// kernel's).
    pub(super) fn body_of(&self, k: &SourceKernel) -> &'a str {
        let end = match self.kernel_lines.binary_search(&k.line) {
            Ok(i) => self.kernel_lines[i..]
                .iter()
                .copied()
                .find(|&l| l > k.line)
                .unwrap_or(usize::MAX),
            Err(_) => usize::MAX,
        };
        self.lines_after(k.line, end)
    }

    /// The text of lines `from + 1 .. to` (1-based `from` is the kernel's
    /// line; `to` the next kernel's), as `index_arity` reads them.
    fn lines_after(&self, from: usize, to: usize) -> &'a str {
        let start = self
            .line_starts
            .get(from)
            .copied()
            .unwrap_or(self.text.len());
        let end = to
            .checked_sub(1)
            .and_then(|l| self.line_starts.get(l).copied())
            .unwrap_or(self.text.len())
            .max(start);
        self.text.get(start..end).unwrap_or("")
    }
}

/// The block size Warp compiled the module for (`#define WP_TILE_BLOCK_DIM N`).
fn tile_block_dim(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("#define WP_TILE_BLOCK_DIM "))
        .and_then(|v| v.trim().parse().ok())
}

/// The module's resolved structs, locked (never held across a call).
fn lock<'c>(
    ctx: &'c ModuleContext<'_>,
) -> std::sync::MutexGuard<'c, HashMap<String, (Arc<StructType>, usize)>> {
    ctx.resolved.lock().unwrap_or_else(|p| p.into_inner())
}

/// Deepest struct nesting accepted (a parameter's struct is level 0).
const MAX_STRUCT_DEPTH: usize = 16;

/// A C++ type of a Warp-generated source as a parameter kind. Each struct
/// is resolved once per module (an `Arc` shared by every use), so nested
/// structs cost their size, not the number of paths to them.
pub(super) fn resolve(
    cpp: &str,
    ctx: &ModuleContext<'_>,
    depth: usize,
) -> Result<ParamKind, String> {
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
    if let Some(s) = ctx.structs.get(cpp) {
        let too_deep =
            || format!("struct '{cpp}' nests too deeply (more than {MAX_STRUCT_DEPTH} levels)");
        if let Some((st, height)) = lock(ctx).get(cpp).cloned() {
            // `height` levels of structs from this one down.
            if depth + height > MAX_STRUCT_DEPTH + 1 {
                return Err(too_deep());
            }
            return Ok(ParamKind::Struct(st));
        }
        if depth > MAX_STRUCT_DEPTH {
            return Err(too_deep());
        }
        let mut height = 1;
        let mut fields = Vec::with_capacity(s.fields.len());
        for f in &s.fields {
            let kind = resolve(&f.cpp_type, ctx, depth + 1)
                .map_err(|m| format!("in struct '{cpp}': {m}"))?;
            if let ParamKind::Struct(inner) = &kind
                && let Some(&(_, h)) = lock(ctx).get(inner.name.as_str())
            {
                height = height.max(h + 1);
            }
            fields.push((f.name.clone(), kind));
        }
        let st = Arc::new(StructType::new(s.name.clone(), fields));
        // Kernels are declared on several threads: the first resolution
        // of a struct is the one every use shares.
        let st = lock(ctx)
            .entry(cpp.to_string())
            .or_insert((st, height))
            .0
            .clone();
        return Ok(ParamKind::Struct(st));
    }
    Err(format!(
        "type '{cpp}' is not one this crate reads (wp::array_t<T>, a Warp scalar, vector or matrix, or a struct defined in the file)"
    ))
}
