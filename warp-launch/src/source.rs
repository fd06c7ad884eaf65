//! Reading what Warp's ahead-of-time compile writes: the CUDA source
//! (`wp_<module>.cu`) and the module metadata (`wp_<module>.meta`).
//!
//! The driver reports only the sizes and offsets of a kernel's parameters, so
//! the parameter *types* come from the source Warp generated. Warp 1.19.0 emits
//! every CUDA kernel as
//!
//! ```text
//! extern "C" __global__ void saxpy_cuda_kernel_forward(
//!     wp::launch_bounds_t<1> dim,
//!     wp::float32 var_a,
//!     wp::array_t<wp::float32> var_x,
//!     wp::array_t<wp::float32> var_y)
//! {
//! ```
//!
//! optionally with `__launch_bounds__(..)`, `WP_CLUSTER_DIMS(..)` before
//! `__global__` and `WP_MAXNREG(..)` before the name, and every `wp.struct` as
//! a C++ `struct <Key>_<8 hex> { <type> <field>; ... }` followed by member
//! functions. [`parse_cu`] returns the kernels with their parameters in order
//! and the structs with their fields in order; [`parse_meta`] returns the
//! per-kernel dynamic shared memory sizes.
//!
//! The reader is a small C++ tokenizer, not a compiler: it skips comments,
//! string literals and preprocessor lines, and understands exactly the forms
//! Warp emits. Only `extern "C" ... __global__` functions are kernels; Warp's
//! CPU entry points (`extern "C" { WP_API void <key>_cpu_forward(...) }`) are
//! not. Nothing here panics on malformed input: every problem is a
//! [`SourceError`] naming the file and line.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use crate::kernel::{Accesses, ArrayAccess, AxisIndex, Unproven};

/// Everything [`parse_cu`] found in one Warp-generated CUDA source file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Source {
    /// Every `extern "C" __global__` function, in file order.
    pub kernels: Vec<SourceKernel>,
    /// Every top-level `struct NAME { ... }` definition, in file order.
    pub structs: Vec<SourceStruct>,
    /// 1-based line of the first place the file builds an array (Warp's
    /// `wp.array(ptr=...)`: `wp::array_t<T>(ptr, ...)`) or calls a builtin
    /// that dereferences a `uint64` handle (`wp::mesh_*`, `wp::bvh_*`,
    /// `wp::hash_grid_*`, `wp::volume_*`): memory no launch can check, in
    /// any function of the file.
    pub raw_addresses: Option<usize>,
}

impl Source {
    /// The kernel with this exact (mangled) name, e.g. `saxpy_cuda_kernel_forward`.
    pub fn kernel(&self, name: &str) -> Option<&SourceKernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// The struct with this exact C++ name, e.g. `Params_acca3b2c` (the
    /// spelling kernel parameters use).
    pub fn struct_named(&self, name: &str) -> Option<&SourceStruct> {
        self.structs.iter().find(|s| s.name == name)
    }
}

/// One CUDA kernel (`extern "C" __global__ void NAME(...)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceKernel {
    /// The symbol name, e.g. `saxpy_cuda_kernel_forward`.
    pub name: String,
    /// The parameters in declaration order, the launch bounds first.
    pub params: Vec<SourceParam>,
    /// 1-based line of the kernel's name.
    pub line: usize,
    /// Which loop shape the body has (decides the grid Warp launches).
    pub body: KernelBody,
    /// How the body indexes its array parameters: the facts a launch
    /// checks, or the first access no launch can check. An access is
    /// checkable when it is one of Warp's array builtins (`wp::address`,
    /// `wp::array_store`, `wp::atomic_*`, their `wp::adj_*` forms) on an
    /// array parameter, every index a `wp.tid()` coordinate (a variable
    /// assigned only by `builtin_tid*d`) or an integer constant; reading
    /// `.shape`/`.ndim` and `wp::len` is harmless; anything else (views,
    /// copies, calls, computed indices, arrays not passed as parameters)
    /// makes the body [`Accesses::Unproven`].
    pub accesses: Accesses,
}

/// The loop shape of a kernel body, as Warp's code generator writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KernelBody {
    /// `for (size_t _idx = ...; _idx < dim.size; _idx += ...)`: the default;
    /// launched on a 1-D grid that `max_blocks` may cap.
    GridStride,
    /// `const size_t _idx = ...; if (_idx >= dim.size) return;`: a kernel
    /// built with `grid_stride=False`; launched on a 3-D grid, one thread per
    /// index, and `max_blocks > 0` is refused.
    Lean,
    /// A body with neither form (not a Warp-generated launch kernel).
    Other,
    /// A declaration without a body (`...);`).
    Declaration,
}

/// Forward or backward half of a Warp kernel, from the name suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `<key>_cuda_kernel_forward`.
    Forward,
    /// `<key>_cuda_kernel_backward`: forward parameters, then one adjoint per
    /// parameter.
    Backward,
}

const FORWARD_SUFFIX: &str = "_cuda_kernel_forward";
const BACKWARD_SUFFIX: &str = "_cuda_kernel_backward";

impl SourceKernel {
    /// Whether this is the forward or backward kernel, from Warp's name
    /// suffix; `None` for any other name.
    pub fn direction(&self) -> Option<Direction> {
        if self.name.ends_with(FORWARD_SUFFIX) {
            Some(Direction::Forward)
        } else if self.name.ends_with(BACKWARD_SUFFIX) {
            Some(Direction::Backward)
        } else {
            None
        }
    }

    /// The Warp kernel key: the name without `_cuda_kernel_forward` /
    /// `_cuda_kernel_backward` (the whole name when neither suffix is there).
    pub fn key(&self) -> &str {
        self.name
            .strip_suffix(FORWARD_SUFFIX)
            .or_else(|| self.name.strip_suffix(BACKWARD_SUFFIX))
            .unwrap_or(&self.name)
    }

    /// `N` of the first parameter when it is `wp::launch_bounds_t<N>`.
    pub fn launch_ndim(&self) -> Option<usize> {
        let first = self.params.first()?;
        let n = first
            .cpp_type
            .strip_prefix("wp::launch_bounds_t<")?
            .strip_suffix('>')?;
        n.parse().ok()
    }
}

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceParam {
    /// The spelled name: `dim`, `var_<label>` or `adj_<label>` in Warp's output.
    pub name: String,
    /// The type with whitespace removed except between two words, e.g.
    /// `wp::array_t<wp::float32>`, `wp::vec_t<3,wp::float32>`,
    /// `wp::launch_bounds_t<1>`, `Params_acca3b2c`, `const float*`.
    pub cpp_type: String,
    /// 1-based line where the parameter starts.
    pub line: usize,
}

impl SourceParam {
    /// The Warp argument label: the name without its `var_` / `adj_` prefix.
    pub fn label(&self) -> &str {
        self.name
            .strip_prefix("var_")
            .or_else(|| self.name.strip_prefix("adj_"))
            .unwrap_or(&self.name)
    }

    /// Whether the name marks an adjoint (`adj_<label>`).
    pub fn is_adjoint(&self) -> bool {
        self.name.starts_with("adj_")
    }
}

/// One `struct NAME { ... };` definition (how Warp emits a `wp.struct`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceStruct {
    /// The C++ name, e.g. `Params_acca3b2c` (Warp's key plus 8 hex digits
    /// of the struct's hash; kept even with `strip_hash=True`).
    pub name: String,
    /// The data members in declaration order (C layout order).
    pub fields: Vec<SourceField>,
    /// 1-based line of the struct's name.
    pub line: usize,
}

impl SourceStruct {
    /// The Warp struct key: the name without a trailing `_` plus 8 hex digits
    /// (the whole name when it has no such suffix).
    pub fn warp_key(&self) -> &str {
        struct_key(&self.name)
    }
}

/// A Warp struct's key from its generated name: the name without a
/// trailing `_` plus 8 hex digits (the whole name when it has no such
/// suffix).
pub fn struct_key(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((key, hash))
            if !key.is_empty()
                && hash.len() == 8
                && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            key
        }
        _ => name,
    }
}

/// One data member of a [`SourceStruct`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceField {
    /// The member name. An empty `wp.struct` has a single `char _dummy_`.
    pub name: String,
    /// The type, spelled as in [`SourceParam::cpp_type`].
    pub cpp_type: String,
    /// 1-based line of the member.
    pub line: usize,
}

/// A problem reading a `.cu` or `.meta` file: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceError {
    file: String,
    line: usize,
    message: String,
}

impl SourceError {
    fn new(file: &str, line: usize, message: impl Into<String>) -> Self {
        SourceError {
            file: file.to_owned(),
            line,
            message: message.into(),
        }
    }

    /// The file name given to the parser.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based line of the problem.
    pub fn line(&self) -> usize {
        self.line
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for SourceError {}

// ---------------------------------------------------------------------------
// Tokenizer

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokKind {
    Word,
    Number,
    Str,
    Punct,
}

#[derive(Debug, Clone)]
struct Tok<'a> {
    kind: TokKind,
    text: &'a str,
    line: usize,
}

fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Splits C++ text into tokens, dropping whitespace, comments and
/// preprocessor lines. Every slice boundary is next to an ASCII byte or at a
/// whole `char`, so slicing never splits a UTF-8 sequence.
fn tokenize<'a>(text: &'a str, file: &str) -> Result<Vec<Tok<'a>>, SourceError> {
    let bytes = text.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let mut at_line_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            line += 1;
            i += 1;
            at_line_start = true;
            continue;
        }
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if b == b'#' && at_line_start {
            // Preprocessor line, with backslash continuations.
            while i < bytes.len() && bytes[i] != b'\n' {
                if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'\n') {
                    line += 1;
                    i += 1;
                }
                i += 1;
            }
            continue;
        }
        at_line_start = false;
        if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            let start_line = line;
            i += 2;
            loop {
                if i + 1 >= bytes.len() {
                    return Err(SourceError::new(
                        file,
                        start_line,
                        "unterminated /* comment",
                    ));
                }
                if bytes[i] == b'*' && bytes[i + 1] == b'/' {
                    i += 2;
                    break;
                }
                if bytes[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            continue;
        }
        if b == b'"' || b == b'\'' {
            let start = i;
            let start_line = line;
            i += 1;
            loop {
                match bytes.get(i) {
                    None | Some(b'\n') => {
                        return Err(SourceError::new(
                            file,
                            start_line,
                            "unterminated string or character literal",
                        ));
                    }
                    Some(b'\\') => i += 2,
                    Some(&c) if c == b => {
                        i += 1;
                        break;
                    }
                    Some(_) => i += 1,
                }
            }
            let end = i.min(bytes.len());
            toks.push(Tok {
                kind: TokKind::Str,
                text: &text[start..end],
                line: start_line,
            });
            continue;
        }
        if is_word_start(b) {
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            toks.push(Tok {
                kind: TokKind::Word,
                text: &text[start..i],
                line,
            });
            continue;
        }
        if b.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (is_word_byte(bytes[i]) || bytes[i] == b'.') {
                i += 1;
            }
            toks.push(Tok {
                kind: TokKind::Number,
                text: &text[start..i],
                line,
            });
            continue;
        }
        if b == b':' && bytes.get(i + 1) == Some(&b':') {
            toks.push(Tok {
                kind: TokKind::Punct,
                text: &text[i..i + 2],
                line,
            });
            i += 2;
            continue;
        }
        // Any other character (ASCII punctuation or a whole non-ASCII char).
        let len = text[i..].chars().next().map_or(1, char::len_utf8);
        toks.push(Tok {
            kind: TokKind::Punct,
            text: &text[i..i + len],
            line,
        });
        i += len;
    }
    Ok(toks)
}

/// Joins type tokens: a single space only between two words/numbers.
fn spell(toks: &[Tok<'_>]) -> String {
    let mut out = String::new();
    let mut prev_word = false;
    for t in toks {
        let word = matches!(t.kind, TokKind::Word | TokKind::Number);
        if word && prev_word {
            out.push(' ');
        }
        out.push_str(t.text);
        prev_word = word;
    }
    out
}

/// Attribute-like macros Warp (or CUDA) writes between `extern "C"` and the
/// parameter list; their parenthesised arguments are not the parameter list.
const ATTRIBUTE_MACROS: &[&str] = &[
    "__launch_bounds__",
    "__cluster_dims__",
    "__maxnreg__",
    "WP_CLUSTER_DIMS",
    "WP_MAXNREG",
];

/// No matching bracket.
const UNMATCHED: usize = usize::MAX;

/// For every `(`, `[` and `{`, the index of the bracket of the same kind
/// that closes it (`UNMATCHED` when none does, and for every other token):
/// one pass, so that skipping a bracketed span costs nothing however often
/// it is asked for.
fn match_brackets(toks: &[Tok<'_>]) -> Vec<usize> {
    let mut close = vec![UNMATCHED; toks.len()];
    let mut stacks: [Vec<usize>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for (i, t) in toks.iter().enumerate() {
        if t.kind != TokKind::Punct {
            continue;
        }
        match t.text {
            "(" => stacks[0].push(i),
            "[" => stacks[1].push(i),
            "{" => stacks[2].push(i),
            ")" | "]" | "}" => {
                let k = match t.text {
                    ")" => 0,
                    "]" => 1,
                    _ => 2,
                };
                if let Some(open) = stacks[k].pop() {
                    close[open] = i;
                }
            }
            _ => {}
        }
    }
    close
}

/// Index just past the bracket that closes the one at `open` (same kind,
/// other kinds ignored); `None` when unbalanced. Constant time.
fn skip_balanced(close: &[usize], open: usize) -> Option<usize> {
    match close.get(open) {
        Some(&c) if c != UNMATCHED => Some(c + 1),
        _ => None,
    }
}

fn is_punct(t: Option<&Tok<'_>>, s: &str) -> bool {
    matches!(t, Some(t) if t.kind == TokKind::Punct && t.text == s)
}

fn is_word(t: Option<&Tok<'_>>, s: &str) -> bool {
    matches!(t, Some(t) if t.kind == TokKind::Word && t.text == s)
}

/// Splits `toks` at commas outside `<>`, `()`, `[]`, `{}`.
fn split_top_level_commas<'t, 'a>(toks: &'t [Tok<'a>]) -> Vec<&'t [Tok<'a>]> {
    let mut parts = Vec::new();
    let mut depth = 0i64;
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        if t.kind != TokKind::Punct {
            continue;
        }
        match t.text {
            "<" | "(" | "[" | "{" => depth += 1,
            ">" | ")" | "]" | "}" => depth -= 1,
            "," if depth == 0 => {
                parts.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&toks[start..]);
    parts
}

/// Parses `TYPE NAME` (a parameter or a data member).
fn parse_declaration(
    toks: &[Tok<'_>],
    file: &str,
    fallback_line: usize,
    what: &str,
) -> Result<(String, String, usize), SourceError> {
    let Some(first) = toks.first() else {
        return Err(SourceError::new(
            file,
            fallback_line,
            format!("empty {what} (two commas in a row, or a trailing comma)"),
        ));
    };
    let line = first.line;
    let mut depth = 0i64;
    for t in toks {
        if t.kind == TokKind::Str {
            return Err(SourceError::new(
                file,
                t.line,
                format!("cannot parse {what}: unexpected literal {}", t.text),
            ));
        }
        if t.kind == TokKind::Punct {
            match t.text {
                "<" => depth += 1,
                ">" => depth -= 1,
                "::" | "*" | "&" => {}
                "," if depth > 0 => {}
                other => {
                    return Err(SourceError::new(
                        file,
                        t.line,
                        format!(
                            "cannot parse {what} `{}`: unexpected `{other}` (Warp writes `TYPE NAME`)",
                            spell(toks)
                        ),
                    ));
                }
            }
        }
        if depth < 0 {
            return Err(SourceError::new(
                file,
                t.line,
                format!("cannot parse {what} `{}`: unbalanced `>`", spell(toks)),
            ));
        }
    }
    if depth != 0 {
        return Err(SourceError::new(
            file,
            line,
            format!("cannot parse {what} `{}`: unbalanced `<`", spell(toks)),
        ));
    }
    let (name_tok, ty) = match toks.split_last() {
        Some((last, rest)) if last.kind == TokKind::Word && !rest.is_empty() => (last, rest),
        _ => {
            return Err(SourceError::new(
                file,
                line,
                format!(
                    "cannot parse {what} `{}`: expected a type followed by a name",
                    spell(toks)
                ),
            ));
        }
    };
    // The type must not end in a scope operator, and must hold a word.
    let ends_badly = matches!(ty.last(), Some(t) if t.kind == TokKind::Punct && (t.text == "::" || t.text == "<" || t.text == ","));
    if ends_badly || !ty.iter().any(|t| t.kind == TokKind::Word) {
        return Err(SourceError::new(
            file,
            line,
            format!(
                "cannot parse {what} `{}`: expected a type followed by a name",
                spell(toks)
            ),
        ));
    }
    Ok((name_tok.text.to_owned(), spell(ty), line))
}

/// Parses the C++ source Warp generated for a module (`wp_<module>.cu`).
///
/// Returns every `extern "C" ... __global__ void NAME(...)` kernel with its
/// parameters in order, and every top-level `struct NAME { ... }` with its data
/// members in order. `file` is used only in error messages.
///
/// # Errors
///
/// A [`SourceError`] naming `file` and the line when a kernel's head or
/// parameter list is not in a form Warp writes (a parameter that is not
/// `TYPE NAME`, an empty parameter, unbalanced brackets, a missing `void` or
/// name), when a struct body is unterminated, or when a comment or literal is
/// unterminated.
pub fn parse_cu(text: &str, file: &str) -> Result<Source, SourceError> {
    let toks = tokenize(text, file)?;
    let close = match_brackets(&toks);
    let mut source = Source {
        raw_addresses: raw_address_line(&toks),
        ..Source::default()
    };
    // Stack of open braces: true for an `extern "C" {` linkage block, whose
    // contents are still top level; `inner` counts the other (non-linkage)
    // braces on it, so "at top level" is `inner == 0` (constant time).
    let mut braces: Vec<bool> = Vec::new();
    let mut inner = 0usize;
    // Whether the current top-level statement has a `template` word.
    let mut templated = false;
    let mut i = 0usize;
    while i < toks.len() {
        let top = inner == 0;
        let t = &toks[i];
        if t.kind == TokKind::Punct {
            match t.text {
                "{" => {
                    braces.push(false);
                    inner += 1;
                    i += 1;
                    continue;
                }
                "}" => {
                    match braces.pop() {
                        None => return Err(SourceError::new(file, t.line, "unbalanced `}`")),
                        Some(false) => inner -= 1,
                        Some(true) => {}
                    }
                    i += 1;
                    if inner == 0 {
                        templated = false;
                    }
                    continue;
                }
                ";" if top => {
                    i += 1;
                    templated = false;
                    continue;
                }
                _ => {}
            }
        }
        if t.kind == TokKind::Word && t.text == "template" {
            templated = true;
        }
        if !top || t.kind != TokKind::Word {
            i += 1;
            continue;
        }
        if t.text == "extern" && toks.get(i + 1).is_some_and(|n| n.text == "\"C\"") {
            if is_punct(toks.get(i + 2), "{") {
                braces.push(true);
                i += 3;
                templated = false;
                continue;
            }
            match parse_extern_function(&toks, &close, i + 2, file)? {
                Some((kernel, next)) => {
                    source.kernels.push(kernel);
                    i = next;
                }
                None => i += 2,
            }
            templated = false;
            continue;
        }
        if t.text == "struct" {
            let named = toks.get(i + 1).is_some_and(|n| n.kind == TokKind::Word);
            if named && is_punct(toks.get(i + 2), "{") && !templated {
                let (st, next) = parse_struct(&toks, &close, i + 1, file)?;
                source.structs.push(st);
                i = next;
                continue;
            }
        }
        i += 1;
    }
    if !braces.is_empty() {
        let line = toks.last().map_or(1, |t| t.line);
        return Err(SourceError::new(
            file,
            line,
            "unbalanced `{` at end of file",
        ));
    }
    Ok(source)
}

/// Parses what follows `extern "C"` at `start`. Returns `None` when it is not
/// a `__global__` function (so not a CUDA kernel), else the kernel and the
/// index after its body or `;`.
fn parse_extern_function(
    toks: &[Tok<'_>],
    close: &[usize],
    start: usize,
    file: &str,
) -> Result<Option<(SourceKernel, usize)>, SourceError> {
    // Head: words and attribute macros up to the name followed by `(`.
    let mut i = start;
    let mut global = false;
    let mut void = false;
    let head_line = toks.get(start).map_or(0, |t| t.line);
    let name_idx = loop {
        let Some(t) = toks.get(i) else {
            return Ok(None);
        };
        if t.kind != TokKind::Word {
            // `extern "C" int x;`, `extern "C" T* f(...)` etc.: not a kernel.
            if global {
                return Err(SourceError::new(
                    file,
                    t.line,
                    format!(
                        "cannot parse __global__ function head: unexpected `{}` (expected `void NAME(`)",
                        t.text
                    ),
                ));
            }
            return Ok(None);
        }
        if is_punct(toks.get(i + 1), "(") {
            if ATTRIBUTE_MACROS.contains(&t.text) {
                match skip_balanced(close, i + 1) {
                    Some(next) => {
                        i = next;
                        continue;
                    }
                    None => {
                        return Err(SourceError::new(
                            file,
                            t.line,
                            format!("unbalanced `(` after {}", t.text),
                        ));
                    }
                }
            }
            break i;
        }
        match t.text {
            "__global__" => global = true,
            "void" => void = true,
            _ => {}
        }
        i += 1;
    };
    if !global {
        return Ok(None);
    }
    let name_tok = &toks[name_idx];
    if !void {
        return Err(SourceError::new(
            file,
            name_tok.line.max(head_line),
            format!(
                "__global__ function `{}` does not return void; Warp kernels are `void`",
                name_tok.text
            ),
        ));
    }
    let open = name_idx + 1;
    let Some(close_end) = skip_balanced(close, open) else {
        return Err(SourceError::new(
            file,
            name_tok.line,
            format!(
                "parameter list of kernel `{}` is not closed by `)`",
                name_tok.text
            ),
        ));
    };
    let inner = &toks[open + 1..close_end - 1];
    let kernel_ctx = format!("parameter of kernel `{}`", name_tok.text);
    let mut params = Vec::new();
    let empty = inner.is_empty() || (inner.len() == 1 && is_word(inner.first(), "void"));
    if !empty {
        for part in split_top_level_commas(inner) {
            let fallback = part.first().map_or(toks[close_end - 1].line, |t| t.line);
            let (name, cpp_type, line) = parse_declaration(part, file, fallback, &kernel_ctx)?;
            params.push(SourceParam {
                name,
                cpp_type,
                line,
            });
        }
    }
    // Body or declaration.
    let (body, accesses, next) = match toks.get(close_end) {
        Some(t) if t.kind == TokKind::Punct && t.text == ";" => {
            (KernelBody::Declaration, Accesses::default(), close_end + 1)
        }
        Some(t) if t.kind == TokKind::Punct && t.text == "{" => {
            let Some(end) = skip_balanced(close, close_end) else {
                return Err(SourceError::new(
                    file,
                    t.line,
                    format!("body of kernel `{}` is not closed by `}}`", name_tok.text),
                ));
            };
            let accesses = analyse_body(toks, close, close_end + 1, end - 1, &params, file);
            (classify_body(&toks[close_end..end]), accesses, end)
        }
        other => {
            let line = other.map_or(toks[close_end - 1].line, |t| t.line);
            return Err(SourceError::new(
                file,
                line,
                format!(
                    "expected `{{` or `;` after the parameter list of kernel `{}`",
                    name_tok.text
                ),
            ));
        }
    };
    Ok(Some((
        SourceKernel {
            name: name_tok.text.to_owned(),
            params,
            line: name_tok.line,
            body,
            accesses,
        },
        next,
    )))
}

// ---------------------------------------------------------------------------
// Array accesses

/// Warp builtins that index an array: the name, how many value arguments
/// follow the indices, and whether the adjoint form (`adj_<name>`) ends
/// with an `adj_ret` argument. The forward form is `(array, indices...,
/// values...)`; the adjoint form is the forward arguments, then one adjoint
/// per forward argument (the array's adjoint at the same place), then
/// `adj_ret` if the function returns a value.
const ACCESS_CALLS: &[(&str, usize, bool)] = &[
    ("address", 0, true),
    ("array_store", 1, false),
    ("atomic_add", 1, true),
    ("atomic_sub", 1, true),
    ("atomic_min", 1, true),
    ("atomic_max", 1, true),
    ("atomic_and", 1, true),
    ("atomic_or", 1, true),
    ("atomic_xor", 1, true),
    ("atomic_exch", 1, true),
    ("atomic_cas", 2, true),
];

/// Warp's array types; one followed by `(` or `{` after its template
/// arguments builds an array (possibly from a raw address).
const ARRAY_TYPES: &[&str] = &[
    "array_t",
    "indexedarray_t",
    "fabricarray_t",
    "indexedfabricarray_t",
];

/// Prefixes of Warp builtins that dereference a `uint64` handle (meshes,
/// BVHs, hash grids, volumes).
const HANDLE_PREFIXES: &[&str] = &[
    "mesh_",
    "bvh_",
    "hash_grid_",
    "volume_",
    "tile_bvh_",
    "tile_mesh_",
];

/// Integer types a constant index may have.
const INT_TYPES: &[&str] = &[
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "int", "long",
    "short", "size_t", "unsigned",
];

/// Whether `toks[i]` is an array type followed by template arguments and
/// then `(` or `{`: an array built in the code. Looks at most 64 tokens
/// ahead (longer template arguments count as a construction).
fn builds_array(toks: &[Tok<'_>], i: usize) -> bool {
    let t = &toks[i];
    if t.kind != TokKind::Word || !ARRAY_TYPES.contains(&t.text) || !is_punct(toks.get(i + 1), "<")
    {
        return false;
    }
    let mut depth = 0usize;
    for j in i + 1..toks.len().min(i + 65) {
        match toks[j].text {
            "<" => depth += 1,
            ">" => {
                depth -= 1;
                if depth == 0 {
                    return is_punct(toks.get(j + 1), "(") || is_punct(toks.get(j + 1), "{");
                }
            }
            _ => {}
        }
    }
    true
}

/// Line of the first place the token stream builds an array (e.g. Warp's
/// `wp.array(ptr=...)`) or calls a builtin that dereferences a handle.
fn raw_address_line(toks: &[Tok<'_>]) -> Option<usize> {
    (0..toks.len()).find_map(|i| {
        let t = &toks[i];
        if t.kind != TokKind::Word {
            return None;
        }
        let handle = i >= 2
            && toks[i - 1].text == "::"
            && toks[i - 2].text == "wp"
            && HANDLE_PREFIXES
                .iter()
                .any(|p| t.text.strip_prefix("adj_").unwrap_or(t.text).starts_with(p));
        (handle || builds_array(toks, i)).then_some(t.line)
    })
}

/// What one name in a kernel body is known to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fact {
    /// Component `k` of `wp.tid()` (assigned only by `builtin_tid*`).
    Tid(usize),
    /// A `const` integer.
    Const(i64),
    /// Assigned in more than one way.
    Conflict,
}

fn note(facts: &mut HashMap<String, Fact>, name: &str, fact: Fact) {
    facts
        .entry(name.to_owned())
        .and_modify(|f| {
            if *f != fact {
                *f = Fact::Conflict;
            }
        })
        .or_insert(fact);
}

/// The arguments of the call whose `(` is at `open` (its `)` at
/// `close[open]`), split at top-level commas; nested brackets are skipped
/// in constant time, so every token is looked at by one call only.
fn call_args(toks: &[Tok<'_>], close: &[usize], open: usize) -> Option<Vec<(usize, usize)>> {
    let end = *close.get(open)?;
    if end == UNMATCHED {
        return None;
    }
    let mut args = Vec::new();
    let mut start = open + 1;
    let mut j = open + 1;
    while j < end {
        let t = &toks[j];
        if t.kind == TokKind::Punct {
            match t.text {
                "(" | "[" | "{" => {
                    j = skip_balanced(close, j)?;
                    continue;
                }
                "," => {
                    args.push((start, j));
                    start = j + 1;
                }
                _ => {}
            }
        }
        j += 1;
    }
    if start < end || !args.is_empty() {
        args.push((start, end));
    }
    Some(args)
}

/// A short text of the code around token `at` (its line, at most 24
/// tokens either side), for messages.
fn code_around(toks: &[Tok<'_>], at: usize) -> String {
    let line = toks[at].line;
    let mut from = at;
    while from > 0 && at - from < 24 && toks[from - 1].line == line {
        from -= 1;
    }
    let mut to = at + 1;
    while to < toks.len() && to - at < 24 && toks[to].line == line {
        to += 1;
    }
    spell(&toks[from..to])
}

/// Reads how a kernel body (tokens `start..end`) indexes its array
/// parameters.
///
/// An access is checkable when it is one of Warp's array builtins
/// (`wp::address`, `wp::array_store`, `wp::atomic_*`, or their `wp::adj_*`
/// forms in the backward kernel) applied to an array parameter, with every
/// index either a thread coordinate (a variable assigned only by
/// `builtin_tid*d`, never assigned again, never address-taken) or an
/// integer constant (`const` integer variable or literal). Reading an
/// array's `.shape` / `.ndim`, and `wp::len`, is harmless. Any other use of
/// an array parameter (a view, a copy, another function, a field other than
/// `shape`/`ndim`), any index built otherwise (from data, arithmetic, a
/// loop), and any array access to something that is not an array parameter
/// (a view, a struct's array, an array built from an address) makes the
/// body [`Accesses::Unproven`], naming the first such place.
fn analyse_body(
    toks: &[Tok<'_>],
    close: &[usize],
    start: usize,
    end: usize,
    params: &[SourceParam],
    file: &str,
) -> Accesses {
    let unproven = |param: &str, line: usize, reason: String| {
        Accesses::Unproven(Unproven {
            param: param.to_owned(),
            location: format!("{file}:{line}"),
            reason,
        })
    };
    let kernel_dim = params
        .first()
        .and_then(|p| p.cpp_type.strip_prefix("wp::launch_bounds_t<"))
        .and_then(|n| n.strip_suffix('>'))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1);
    let mut arrays: HashMap<&str, (&str, bool)> = HashMap::new();
    for p in params {
        if p.cpp_type.starts_with("wp::array_t<") {
            arrays.insert(p.name.as_str(), (p.label(), p.is_adjoint()));
        } else if p.cpp_type.contains("array") {
            return unproven(
                p.label(),
                p.line,
                format!(
                    "parameter '{}' is a {}; only wp::array_t accesses are analysed",
                    p.label(),
                    p.cpp_type
                ),
            );
        }
    }
    let body = &toks[start.min(toks.len())..end.min(toks.len())];
    let at = |j: usize| body.get(j);
    let text_at = |j: usize| body.get(j).map_or("", |t| t.text);

    let local_close = close_local(close, start, body.len());
    // Pass 1: what each name holds, and which names are written.
    let mut facts: HashMap<String, Fact> = HashMap::new();
    // Positions of names whose `=` is their tid or const definition.
    let mut defining: HashSet<usize> = HashSet::new();
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word {
            continue;
        }
        if t.text == "builtin_tid1d" {
            if j >= 2 && text_at(j - 1) == "=" && at(j - 2).is_some_and(|n| n.kind == TokKind::Word)
            {
                note(&mut facts, body[j - 2].text, Fact::Tid(0));
                defining.insert(j - 2);
            }
            continue;
        }
        if let Some(n) = t
            .text
            .strip_prefix("builtin_tid")
            .and_then(|r| r.strip_suffix('d'))
            .and_then(|n| n.parse::<usize>().ok())
        {
            // builtin_tidNd(a, b, ...): the names receive the coordinates.
            if let Some(args) = call_args(body, &local_close, j + 1) {
                for (c, &(a, b)) in args.iter().enumerate().take(n) {
                    if b == a + 1 && body[a].kind == TokKind::Word {
                        note(&mut facts, body[a].text, Fact::Tid(c));
                    }
                }
            }
            continue;
        }
        if t.text == "const" {
            // const TYPE NAME = [-]NUMBER ;
            let mut k = j + 1;
            let mut last_type_word = "";
            while k < body.len().min(j + 16) && !is_punct(at(k + 1), "=") {
                if body[k].kind == TokKind::Word {
                    last_type_word = body[k].text;
                }
                k += 1;
            }
            let name_ok =
                at(k).is_some_and(|n| n.kind == TokKind::Word) && is_punct(at(k + 1), "=");
            if !name_ok || !INT_TYPES.contains(&last_type_word) {
                continue;
            }
            let (neg, num) = if text_at(k + 2) == "-" {
                (true, k + 3)
            } else {
                (false, k + 2)
            };
            let value = at(num)
                .filter(|n| n.kind == TokKind::Number)
                .and_then(|n| n.text.parse::<i64>().ok())
                .filter(|_| is_punct(at(num + 1), ";"));
            if let Some(v) = value {
                note(
                    &mut facts,
                    body[k].text,
                    Fact::Const(if neg { -v } else { v }),
                );
                defining.insert(k);
            }
        }
    }
    let mut written: HashSet<&str> = HashSet::new();
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word || defining.contains(&j) {
            continue;
        }
        let (n1, n2, n3) = (text_at(j + 1), text_at(j + 2), text_at(j + 3));
        let prev = |k: usize| if j >= k { text_at(j - k) } else { "" };
        let assigned = (n1 == "=" && n2 != "=")
            || (matches!(n1, "+" | "-" | "*" | "/" | "%" | "&" | "|" | "^") && n2 == "=")
            || (matches!(n1, "<" | ">") && n2 == n1 && n3 == "=")
            || (n1 == "+" && n2 == "+")
            || (n1 == "-" && n2 == "-");
        let touched = prev(1) == "&"
            || (prev(1) == "+" && prev(2) == "+")
            || (prev(1) == "-" && prev(2) == "-")
            || (prev(1) == "(" && prev(2).contains("assign"));
        if assigned || touched {
            written.insert(t.text);
        }
    }
    let index_of = |a: usize, b: usize| -> std::result::Result<AxisIndex, String> {
        let arg = &body[a..b];
        match arg {
            [n] if n.kind == TokKind::Number => n
                .text
                .parse::<i64>()
                .map(AxisIndex::Constant)
                .map_err(|_| format!("the index {} is not a decimal integer", n.text)),
            [m, n] if m.text == "-" && n.kind == TokKind::Number => n
                .text
                .parse::<i64>()
                .map(|v| AxisIndex::Constant(-v))
                .map_err(|_| format!("the index -{} is not a decimal integer", n.text)),
            [w] if w.kind == TokKind::Word => {
                let fact = facts.get(w.text);
                if fact.is_some() && written.contains(w.text) {
                    return Err(format!(
                        "the index `{}` is assigned again in the kernel (a loop variable or a changed value)",
                        w.text
                    ));
                }
                match fact {
                    Some(Fact::Tid(k)) if *k < kernel_dim => Ok(AxisIndex::Thread(*k)),
                    Some(Fact::Tid(k)) => Err(format!(
                        "the index `{}` is thread coordinate {k} of a kernel with {kernel_dim}",
                        w.text
                    )),
                    Some(Fact::Const(c)) => Ok(AxisIndex::Constant(*c)),
                    _ => Err(format!(
                        "the index `{}` is computed (from data or arithmetic), not a thread coordinate or a constant",
                        w.text
                    )),
                }
            }
            _ => Err(format!("the index `{}` is an expression", spell(arg))),
        }
    };

    // Pass 2: Warp's array builtins.
    let mut accesses: Vec<ArrayAccess> = Vec::new();
    let mut seen: HashSet<(String, bool, Vec<AxisIndex>, bool)> = HashSet::new();
    let mut handled: HashSet<usize> = HashSet::new();
    let mut first_bad: Option<(usize, String, String)> = None;
    let mut bad = |pos: usize, param: &str, reason: String| {
        if first_bad.as_ref().is_none_or(|(p, _, _)| pos < *p) {
            first_bad = Some((pos, param.to_owned(), reason));
        }
    };
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word {
            continue;
        }
        if builds_array(body, j) {
            bad(
                j,
                "",
                format!(
                    "`{}` builds an array in the kernel (from a raw address or another array)",
                    code_around(body, j)
                ),
            );
            continue;
        }
        let is_call =
            j >= 2 && text_at(j - 1) == "::" && text_at(j - 2) == "wp" && is_punct(at(j + 1), "(");
        if !is_call {
            continue;
        }
        if t.text == "len" {
            if let Some(args) = call_args(body, &local_close, j + 1)
                && let [(a, b)] = args[..]
                && b == a + 1
                && arrays.contains_key(body[a].text)
            {
                handled.insert(a);
            }
            continue;
        }
        let (name, adjoint_form) = match t.text.strip_prefix("adj_") {
            Some(n) => (n, true),
            None => (t.text, false),
        };
        let Some(&(_, values, ret)) = ACCESS_CALLS.iter().find(|c| c.0 == name) else {
            continue;
        };
        let Some(args) = call_args(body, &local_close, j + 1) else {
            continue;
        };
        let n = args.len();
        let k = if adjoint_form {
            let primal = n.checked_sub(usize::from(ret)).filter(|p| p % 2 == 0);
            primal.and_then(|p| (p / 2).checked_sub(1 + values))
        } else {
            n.checked_sub(1 + values)
        };
        // k == 0 is the pointer form (`atomic_add(T* p, v)`): not an array.
        let Some(k) = k.filter(|k| (1..=4).contains(k)) else {
            continue;
        };
        let mut slots = vec![args[0]];
        if adjoint_form {
            slots.push(args[1 + k + values]);
        }
        let mut indices = Vec::with_capacity(k);
        let mut index_error = None;
        for &(a, b) in &args[1..=k] {
            match index_of(a, b) {
                Ok(i) => indices.push(i),
                Err(e) => {
                    index_error = Some(e);
                    break;
                }
            }
        }
        for &(a, b) in &slots {
            let single = b == a + 1 && body[a].kind == TokKind::Word;
            let target = if single {
                arrays.get(body[a].text).copied()
            } else {
                None
            };
            let Some((label, adjoint)) = target else {
                bad(
                    a,
                    "",
                    format!(
                        "`{}` indexes `{}`, which is not an array parameter (a view, an array field of a struct, or an array built in the kernel)",
                        code_around(body, j),
                        spell(&body[a..b])
                    ),
                );
                continue;
            };
            handled.insert(a);
            if let Some(e) = &index_error {
                bad(
                    a,
                    label,
                    format!("`{}` indexes '{label}': {e}", code_around(body, j)),
                );
                continue;
            }
            let null_ok = adjoint_form;
            let key = (label.to_owned(), adjoint, indices.clone(), null_ok);
            if seen.insert(key) {
                accesses.push(ArrayAccess {
                    param: label.to_owned(),
                    adjoint,
                    indices: indices.clone(),
                    null_ok,
                    line: body[a].line,
                });
            }
        }
    }
    // Pass 3: every other use of an array parameter.
    for (j, t) in body.iter().enumerate() {
        if t.kind != TokKind::Word || handled.contains(&j) {
            continue;
        }
        let Some(&(label, _)) = arrays.get(t.text) else {
            continue;
        };
        if text_at(j + 1) == "." && matches!(text_at(j + 2), "shape" | "ndim") {
            continue;
        }
        bad(
            j,
            label,
            format!(
                "`{}` uses array '{label}' in a way a launch cannot check (a view, a copy, a call of another function, or a field other than shape)",
                code_around(body, j)
            ),
        );
    }
    match first_bad {
        Some((pos, param, reason)) => unproven(&param, body[pos].line, reason),
        None => Accesses::Checked(accesses),
    }
}

/// The bracket table of `toks[start..start + len]`, indices relative to
/// `start` (a bracket closed outside the span counts as unmatched).
fn close_local(close: &[usize], start: usize, len: usize) -> Vec<usize> {
    close[start..start + len]
        .iter()
        .map(|&c| {
            if c == UNMATCHED || c < start || c - start >= len {
                UNMATCHED
            } else {
                c - start
            }
        })
        .collect()
}

/// Finds Warp's `_idx` declaration: `for (size_t _idx` or `const size_t _idx`.
fn classify_body(body: &[Tok<'_>]) -> KernelBody {
    for w in body.windows(4) {
        let texts = [w[0].text, w[1].text, w[2].text, w[3].text];
        if texts == ["for", "(", "size_t", "_idx"] {
            return KernelBody::GridStride;
        }
        if texts[1..] == ["const", "size_t", "_idx"] {
            return KernelBody::Lean;
        }
    }
    KernelBody::Other
}

/// Parses `NAME { members }` starting at the name; returns the struct and the
/// index after its closing brace.
fn parse_struct(
    toks: &[Tok<'_>],
    close: &[usize],
    name_idx: usize,
    file: &str,
) -> Result<(SourceStruct, usize), SourceError> {
    let name_tok = &toks[name_idx];
    let open = name_idx + 1;
    let Some(end) = skip_balanced(close, open) else {
        return Err(SourceError::new(
            file,
            name_tok.line,
            format!("struct `{}` is not closed by `}}`", name_tok.text),
        ));
    };
    let body = &toks[open + 1..end - 1];
    let what = format!("member of struct `{}`", name_tok.text);
    let mut fields = Vec::new();
    let mut j = 0;
    let mut member_start = 0;
    while j < body.len() {
        let t = &body[j];
        if t.kind == TokKind::Punct && t.text == "{" {
            // A member function body (or nested aggregate): skip it; the
            // member ends here.
            j = skip_balanced(close, open + 1 + j).map_or(body.len(), |e| e - open - 1);
            member_start = j;
            continue;
        }
        if t.kind == TokKind::Punct && t.text == ";" {
            let member = &body[member_start..j];
            if is_data_member(member) {
                let (fname, cpp_type, line) = parse_declaration(member, file, t.line, &what)?;
                fields.push(SourceField {
                    name: fname,
                    cpp_type,
                    line,
                });
            }
            j += 1;
            member_start = j;
            continue;
        }
        j += 1;
    }
    Ok((
        SourceStruct {
            name: name_tok.text.to_owned(),
            fields,
            line: name_tok.line,
        },
        end,
    ))
}

/// A member that is a plain data declaration: no parentheses, no initializer,
/// no storage keywords or access labels.
fn is_data_member(member: &[Tok<'_>]) -> bool {
    if member.is_empty() {
        return false;
    }
    !member.iter().any(|t| {
        (t.kind == TokKind::Punct && matches!(t.text, "(" | ")" | "=" | ":" | "{" | "}"))
            || (t.kind == TokKind::Word
                && matches!(
                    t.text,
                    "static" | "typedef" | "using" | "friend" | "template" | "constexpr"
                ))
    })
}

// ---------------------------------------------------------------------------
// .meta

/// Module metadata Warp writes beside the compiled module (`wp_<module>.meta`).
///
/// Warp 1.19.0 writes one JSON object, keys sorted, with
/// `"<kernel name>_smem_bytes": <int>` for every forward and backward kernel:
/// the dynamic shared memory the kernel needs, which Warp sets as the
/// kernel's `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` at load and
/// passes as `sharedMemBytes` on every launch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Meta {
    /// Dynamic shared memory bytes by kernel name (e.g.
    /// `saxpy_cuda_kernel_forward`), from the `*_smem_bytes` keys.
    pub smem_bytes: BTreeMap<String, u32>,
    /// Every other key, kept as parsed (none in Warp 1.19.0's output).
    pub other: BTreeMap<String, MetaValue>,
}

impl Meta {
    /// Dynamic shared memory bytes for the kernel with this exact name.
    pub fn shared_memory_bytes(&self, kernel: &str) -> Option<u32> {
        self.smem_bytes.get(kernel).copied()
    }
}

/// A JSON value from a `.meta` file other than a shared memory size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaValue {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, as written.
    Number(String),
    /// A string, unescaped.
    String(String),
    /// An array.
    Array(Vec<MetaValue>),
    /// An object, keys in file order.
    Object(Vec<(String, MetaValue)>),
}

const SMEM_SUFFIX: &str = "_smem_bytes";
const MAX_JSON_DEPTH: usize = 64;

/// Parses a Warp `.meta` file (JSON). `file` is used only in error messages.
///
/// # Errors
///
/// A [`SourceError`] naming `file` and the line when the text is not one JSON
/// object, a key repeats, or a `*_smem_bytes` value is not an integer from 0
/// to `u32::MAX`.
pub fn parse_meta(text: &str, file: &str) -> Result<Meta, SourceError> {
    let mut p = JsonParser {
        bytes: text.as_bytes(),
        text,
        pos: 0,
        line: 1,
        file,
        entry_lines: Vec::new(),
    };
    p.skip_ws();
    let start_line = p.line;
    if p.peek() != Some(b'{') {
        return Err(p.error("expected a JSON object (`{`) at the start of the .meta file"));
    }
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos < p.bytes.len() {
        return Err(p.error("unexpected text after the JSON object"));
    }
    let MetaValue::Object(entries) = value else {
        return Err(SourceError::new(file, start_line, "expected a JSON object"));
    };
    let mut meta = Meta::default();
    for (key, value, line) in p
        .entry_lines
        .drain(..)
        .zip(entries)
        .map(|(l, (k, v))| (k, v, l))
    {
        if meta.other.contains_key(&key)
            || key
                .strip_suffix(SMEM_SUFFIX)
                .is_some_and(|k| meta.smem_bytes.contains_key(k))
        {
            return Err(SourceError::new(
                file,
                line,
                format!("key \"{key}\" appears twice"),
            ));
        }
        match key.strip_suffix(SMEM_SUFFIX) {
            Some(kernel) => {
                let bytes = match &value {
                    MetaValue::Number(n) => n.parse::<u32>().ok(),
                    _ => None,
                };
                let Some(bytes) = bytes else {
                    return Err(SourceError::new(
                        file,
                        line,
                        format!(
                            "\"{key}\" must be a whole number of bytes from 0 to {}, found {}",
                            u32::MAX,
                            describe(&value)
                        ),
                    ));
                };
                meta.smem_bytes.insert(kernel.to_owned(), bytes);
            }
            None => {
                meta.other.insert(key, value);
            }
        }
    }
    Ok(meta)
}

fn describe(v: &MetaValue) -> String {
    match v {
        MetaValue::Null => "null".into(),
        MetaValue::Bool(b) => b.to_string(),
        MetaValue::Number(n) => n.clone(),
        MetaValue::String(s) => format!("the string {s:?}"),
        MetaValue::Array(_) => "an array".into(),
        MetaValue::Object(_) => "an object".into(),
    }
}

struct JsonParser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    line: usize,
    file: &'a str,
    /// Line of each key of the outermost object, in order.
    entry_lines: Vec<usize>,
}

impl JsonParser<'_> {
    fn error(&self, message: impl Into<String>) -> SourceError {
        SourceError::new(self.file, self.line, message)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b) = self.peek() {
            match b {
                b'\n' => self.line += 1,
                b' ' | b'\t' | b'\r' => {}
                _ => return,
            }
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<MetaValue, SourceError> {
        if depth > MAX_JSON_DEPTH {
            return Err(self.error(format!("JSON nested deeper than {MAX_JSON_DEPTH} levels")));
        }
        self.skip_ws();
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                let mut entries = Vec::new();
                self.skip_ws();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(MetaValue::Object(entries));
                }
                loop {
                    self.skip_ws();
                    let line = self.line;
                    if self.peek() != Some(b'"') {
                        return Err(self.error("expected a string key in the JSON object"));
                    }
                    let key = self.string()?;
                    self.skip_ws();
                    if self.peek() != Some(b':') {
                        return Err(self.error(format!("expected `:` after key \"{key}\"")));
                    }
                    self.pos += 1;
                    let v = self.value(depth + 1)?;
                    if depth == 0 {
                        self.entry_lines.push(line);
                    }
                    entries.push((key, v));
                    self.skip_ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(MetaValue::Object(entries));
                        }
                        _ => return Err(self.error("expected `,` or `}` in the JSON object")),
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                self.skip_ws();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Ok(MetaValue::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.skip_ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(MetaValue::Array(items));
                        }
                        _ => return Err(self.error("expected `,` or `]` in the JSON array")),
                    }
                }
            }
            Some(b'"') => Ok(MetaValue::String(self.string()?)),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
                Ok(MetaValue::Number(self.text[start..self.pos].to_owned()))
            }
            Some(b't') if self.bytes[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(MetaValue::Bool(true))
            }
            Some(b'f') if self.bytes[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(MetaValue::Bool(false))
            }
            Some(b'n') if self.bytes[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Ok(MetaValue::Null)
            }
            Some(_) => Err(self.error("expected a JSON value")),
            None => Err(self.error("unexpected end of the .meta file")),
        }
    }

    /// A string at `pos` (which is `"`), unescaped.
    fn string(&mut self) -> Result<String, SourceError> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b == b'\n' {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[start..self.pos]);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let esc = self.bytes.get(self.pos + 1).copied();
                    self.pos += 2;
                    match esc {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'/') => out.push('/'),
                        Some(b'n') => out.push('\n'),
                        Some(b't') => out.push('\t'),
                        Some(b'r') => out.push('\r'),
                        Some(b'b') => out.push('\u{8}'),
                        Some(b'f') => out.push('\u{c}'),
                        Some(b'u') => {
                            let hex = self
                                .text
                                .get(self.pos..self.pos + 4)
                                .and_then(|h| u32::from_str_radix(h, 16).ok());
                            let Some(code) = hex else {
                                return Err(self.error("bad \\u escape in a JSON string"));
                            };
                            self.pos += 4;
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        }
                        _ => return Err(self.error("bad escape in a JSON string")),
                    }
                }
                _ => return Err(self.error("unterminated JSON string")),
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Set in a child test process started by [`run_in_child`].
    pub(crate) const CHILD_ENV: &str = "WARP_LAUNCH_TEST_CHILD";

    /// Whether this process is a child started by [`run_in_child`].
    pub(crate) fn is_child() -> bool {
        std::env::var_os(CHILD_ENV).is_some()
    }

    /// Runs test `name` of this test binary in a child process and fails
    /// if it fails or runs longer than `limit` (then it is killed): a
    /// regression to super-linear time fails instead of hanging the run.
    pub(crate) fn run_in_child(name: &str, limit: Duration) {
        let exe = std::env::current_exe().unwrap();
        let mut child = std::process::Command::new(exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let out = child.wait_with_output().unwrap();
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(status.success(), "child test {name} failed:\n{text}");
                assert!(
                    text.contains("1 passed"),
                    "child test {name} did not run:\n{text}"
                );
                return;
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("child test {name} ran longer than {limit:?}: super-linear time?");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Parses `text` and fails if it takes a second or more.
    pub(crate) fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        let took = start.elapsed();
        println!("{what}: {took:?}");
        assert!(took < Duration::from_secs(1), "{what} took {took:?}");
        out
    }

    const FIXTURE_CU: &str = include_str!("../tests/fixtures/wp_kernels.cu");
    const FIXTURE_META: &str = include_str!("../tests/fixtures/wp_kernels.meta");
    const CU: &str = "wp_kernels.cu";

    fn params(k: &SourceKernel) -> Vec<(&str, &str)> {
        k.params
            .iter()
            .map(|p| (p.name.as_str(), p.cpp_type.as_str()))
            .collect()
    }

    #[test]
    fn fixture_kernel_names() {
        let src = parse_cu(FIXTURE_CU, CU).unwrap();
        let mut names: Vec<&str> = src.kernels.iter().map(|k| k.name.as_str()).collect();
        names.sort_unstable();
        let mut expected = Vec::new();
        for key in [
            "add2d",
            "chain_loss",
            "chain_sin",
            "count_visits",
            "index4d",
            "lean_fill",
            "normalize_scale",
            "saxpy",
            "transform",
            "use_struct",
        ] {
            expected.push(format!("{key}_cuda_kernel_backward"));
            expected.push(format!("{key}_cuda_kernel_forward"));
        }
        expected.sort_unstable();
        assert_eq!(names, expected);
        // No CPU entry points, and file order as Warp wrote it.
        assert_eq!(src.kernels[0].name, "count_visits_cuda_kernel_forward");
        assert_eq!(src.kernels[0].line, 111);
    }

    #[test]
    fn fixture_saxpy() {
        let src = parse_cu(FIXTURE_CU, CU).unwrap();
        let fwd = src.kernel("saxpy_cuda_kernel_forward").unwrap();
        assert_eq!(
            params(fwd),
            [
                ("dim", "wp::launch_bounds_t<1>"),
                ("var_a", "wp::float32"),
                ("var_x", "wp::array_t<wp::float32>"),
                ("var_y", "wp::array_t<wp::float32>"),
            ]
        );
        assert_eq!(fwd.line, 997);
        assert_eq!(fwd.params[1].line, 999);
        assert_eq!(fwd.direction(), Some(Direction::Forward));
        assert_eq!(fwd.key(), "saxpy");
        assert_eq!(fwd.launch_ndim(), Some(1));
        assert_eq!(fwd.body, KernelBody::GridStride);

        let bwd = src.kernel("saxpy_cuda_kernel_backward").unwrap();
        assert_eq!(
            params(bwd),
            [
                ("dim", "wp::launch_bounds_t<1>"),
                ("var_a", "wp::float32"),
                ("var_x", "wp::array_t<wp::float32>"),
                ("var_y", "wp::array_t<wp::float32>"),
                ("adj_a", "wp::float32"),
                ("adj_x", "wp::array_t<wp::float32>"),
                ("adj_y", "wp::array_t<wp::float32>"),
            ]
        );
        assert_eq!(bwd.direction(), Some(Direction::Backward));
        assert!(bwd.params[4].is_adjoint());
        assert_eq!(bwd.params[4].label(), "a");
        assert_eq!(bwd.params[1].label(), "a");
    }

    #[test]
    fn fixture_dims_vectors_matrices() {
        let src = parse_cu(FIXTURE_CU, CU).unwrap();
        let ndim = |n: &str| src.kernel(n).unwrap().launch_ndim();
        assert_eq!(ndim("add2d_cuda_kernel_forward"), Some(2));
        assert_eq!(ndim("index4d_cuda_kernel_forward"), Some(4));
        assert_eq!(ndim("lean_fill_cuda_kernel_backward"), Some(2));
        assert_eq!(
            params(src.kernel("index4d_cuda_kernel_forward").unwrap()),
            [
                ("dim", "wp::launch_bounds_t<4>"),
                ("var_out", "wp::array_t<wp::int32>")
            ]
        );
        assert_eq!(
            params(src.kernel("transform_cuda_kernel_forward").unwrap()),
            [
                ("dim", "wp::launch_bounds_t<1>"),
                ("var_m", "wp::mat_t<3,3,wp::float32>"),
                ("var_t", "wp::array_t<wp::mat_t<3,3,wp::float32>>"),
                ("var_v", "wp::array_t<wp::vec_t<3,wp::float32>>"),
                ("var_out", "wp::array_t<wp::vec_t<3,wp::float32>>"),
            ]
        );
        assert_eq!(
            params(src.kernel("normalize_scale_cuda_kernel_forward").unwrap()),
            [
                ("dim", "wp::launch_bounds_t<1>"),
                ("var_v", "wp::array_t<wp::vec_t<3,wp::float32>>"),
                ("var_s", "wp::float32"),
                ("var_out", "wp::array_t<wp::vec_t<3,wp::float32>>"),
            ]
        );
    }

    #[test]
    fn fixture_lean_and_grid_stride_bodies() {
        let src = parse_cu(FIXTURE_CU, CU).unwrap();
        for k in &src.kernels {
            let expected = if k.key() == "lean_fill" {
                KernelBody::Lean
            } else {
                KernelBody::GridStride
            };
            assert_eq!(k.body, expected, "{}", k.name);
        }
    }

    #[test]
    fn fixture_struct() {
        let src = parse_cu(FIXTURE_CU, CU).unwrap();
        assert_eq!(src.structs.len(), 1);
        let s = &src.structs[0];
        assert_eq!(s.name, "Params_acca3b2c");
        assert_eq!(s.warp_key(), "Params");
        assert_eq!(s.line, 54);
        let fields: Vec<(&str, &str)> = s
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.cpp_type.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("scale", "wp::float32"),
                ("offset", "wp::vec_t<3,wp::float32>"),
                ("count", "wp::int32"),
            ]
        );
        let k = src.kernel("use_struct_cuda_kernel_backward").unwrap();
        assert_eq!(
            params(k),
            [
                ("dim", "wp::launch_bounds_t<1>"),
                ("var_p", "Params_acca3b2c"),
                ("var_x", "wp::array_t<wp::vec_t<3,wp::float32>>"),
                ("var_out", "wp::array_t<wp::vec_t<3,wp::float32>>"),
                ("adj_p", "Params_acca3b2c"),
                ("adj_x", "wp::array_t<wp::vec_t<3,wp::float32>>"),
                ("adj_out", "wp::array_t<wp::vec_t<3,wp::float32>>"),
            ]
        );
        assert!(src.struct_named(&k.params[1].cpp_type).is_some());
    }

    #[test]
    fn fixture_meta() {
        let meta = parse_meta(FIXTURE_META, "wp_kernels.meta").unwrap();
        assert_eq!(meta.smem_bytes.len(), 20);
        assert!(meta.other.is_empty());
        assert_eq!(
            meta.shared_memory_bytes("saxpy_cuda_kernel_forward"),
            Some(0)
        );
        assert_eq!(
            meta.shared_memory_bytes("lean_fill_cuda_kernel_backward"),
            Some(0)
        );
        assert_eq!(meta.shared_memory_bytes("nope"), None);
        // Every kernel in the source has an entry.
        let src = parse_cu(FIXTURE_CU, CU).unwrap();
        for k in &src.kernels {
            assert!(meta.smem_bytes.contains_key(&k.name), "{}", k.name);
        }
    }

    #[test]
    fn attributes_cpu_entry_points_comments_and_line_directives() {
        let text = r#"// header { not a brace
#define X(a) a
struct Empty_0123abcd
{
    char _dummy_;

    Empty_0123abcd() = default;
};
template <typename T> struct Tmpl { T t; };
extern "C" {
WP_API void k_cpu_forward(wp::launch_bounds_t<1> *dim, wp_args_k *_wp_args) { }
}
#line 12 "x.py"
extern "C" __launch_bounds__(256, 1) WP_CLUSTER_DIMS(2, 1, 1) __global__ void WP_MAXNREG(64) k_cuda_kernel_forward(
#line 12 "x.py"
    wp::launch_bounds_t<3> dim,
    /* a comment, with a comma */ const wp::float32 * var_p,
    unsigned int var_u,
    wp::indexedarray_t<wp::vec_t<2, wp::float64>> var_i)
{
    const char* s = "} {";
    const size_t _idx = 0;
}
extern "C" __global__ void decl_only(void);
extern "C" __global__ void noparams() { }
extern "C" __device__ int helper(int x) { return x; }
"#;
        let src = parse_cu(text, "t.cu").unwrap();
        let names: Vec<&str> = src.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["k_cuda_kernel_forward", "decl_only", "noparams"]);
        let k = &src.kernels[0];
        assert_eq!(k.line, 14);
        assert_eq!(k.body, KernelBody::Lean);
        assert_eq!(
            params(k),
            [
                ("dim", "wp::launch_bounds_t<3>"),
                ("var_p", "const wp::float32*"),
                ("var_u", "unsigned int"),
                ("var_i", "wp::indexedarray_t<wp::vec_t<2,wp::float64>>"),
            ]
        );
        assert_eq!(k.params[1].line, 17);
        assert_eq!(src.kernels[1].body, KernelBody::Declaration);
        assert!(src.kernels[1].params.is_empty());
        assert_eq!(src.kernels[2].body, KernelBody::Other);
        assert_eq!(src.structs.len(), 1);
        assert_eq!(src.structs[0].warp_key(), "Empty");
        assert_eq!(src.structs[0].fields[0].name, "_dummy_");
        assert_eq!(src.structs[0].fields[0].cpp_type, "char");
    }

    fn err(text: &str) -> SourceError {
        parse_cu(text, "bad.cu").unwrap_err()
    }

    #[test]
    fn bad_parameter_names_file_and_line() {
        let e = err(
            "extern \"C\" __global__ void k(\n    wp::launch_bounds_t<1> dim,\n    wp::float32)\n{ }\n",
        );
        assert_eq!((e.file(), e.line()), ("bad.cu", 3));
        let shown = e.to_string();
        assert!(shown.starts_with("bad.cu:3: "), "{shown}");
        assert!(shown.contains("kernel `k`"), "{shown}");
        assert!(
            shown.contains("expected a type followed by a name"),
            "{shown}"
        );
    }

    #[test]
    fn bad_parameter_forms() {
        // empty parameter
        let e = err("extern \"C\" __global__ void k(int a,\n , int b) {}");
        assert_eq!(e.line(), 2);
        assert!(e.message().contains("empty parameter"), "{e}");
        // trailing comma
        let e = err("extern \"C\" __global__ void k(int a,\n) {}");
        assert!(e.message().contains("empty parameter"), "{e}");
        // default value
        let e = err("extern \"C\" __global__ void k(\nint a = 3) {}");
        assert_eq!(e.line(), 2);
        assert!(e.message().contains("unexpected `=`"), "{e}");
        // array declarator
        let e = err("extern \"C\" __global__ void k(int a[4]) {}");
        assert!(e.message().contains("unexpected `[`"), "{e}");
        // unbalanced template
        let e = err("extern \"C\" __global__ void k(wp::array_t<int a) {}");
        assert!(e.message().contains("unbalanced"), "{e}");
        // unclosed list
        let e = err("extern \"C\" __global__ void k(int a\n");
        assert!(e.message().contains("not closed"), "{e}");
        // not void
        let e = err("\n\nextern \"C\" __global__ int k(int a) {}");
        assert_eq!(e.line(), 3);
        assert!(e.message().contains("does not return void"), "{e}");
        // missing body or ;
        let e = err("extern \"C\" __global__ void k(int a) extern");
        assert!(e.message().contains("expected `{` or `;`"), "{e}");
        // literal in a parameter
        let e = err("extern \"C\" __global__ void k(int \"a\") {}");
        assert!(e.message().contains("literal"), "{e}");
    }

    #[test]
    fn bad_text_never_panics() {
        for text in [
            "",
            "extern",
            "extern \"C\"",
            "extern \"C\" __global__",
            "extern \"C\" __global__ void",
            "extern \"C\" __global__ void k",
            "extern \"C\" __global__ void k(",
            "extern \"C\" __global__ void __launch_bounds__(",
            "struct S {",
            "struct S { int a; ",
            "}",
            "/* open",
            "\"open",
            "é extern \"C\" __global__ void k(int é) {}",
            "extern \"C\" __global__ void k(::) {}",
            "extern \"C\" __global__ void k(wp:: a) {}",
            "extern \"C\" __global__ void k(int a>) {}",
        ] {
            let _ = parse_cu(text, "x.cu");
            let _ = parse_meta(text, "x.meta");
        }
        // Every prefix of the real fixture parses or fails cleanly.
        for cut in (0..FIXTURE_CU.len()).step_by(61) {
            if FIXTURE_CU.is_char_boundary(cut) {
                let _ = parse_cu(&FIXTURE_CU[..cut], "x.cu");
            }
        }
        for cut in 0..FIXTURE_META.len() {
            let _ = parse_meta(&FIXTURE_META[..cut], "x.meta");
        }
        let e = err("/* open\n\n");
        assert_eq!(e.line(), 1);
        assert!(e.message().contains("unterminated"));
        let e = err("struct S {\n int a;\n");
        assert!(e.message().contains("not closed"), "{e}");
    }

    #[test]
    fn meta_errors_and_other_keys() {
        let m = parse_meta(
            "{\"a_smem_bytes\": 48,\n \"note\": {\"x\": [1, \"\\u0041\", null, true]}}",
            "m.meta",
        )
        .unwrap();
        assert_eq!(m.shared_memory_bytes("a"), Some(48));
        assert_eq!(
            m.other.get("note"),
            Some(&MetaValue::Object(vec![(
                "x".into(),
                MetaValue::Array(vec![
                    MetaValue::Number("1".into()),
                    MetaValue::String("A".into()),
                    MetaValue::Null,
                    MetaValue::Bool(true),
                ])
            )]))
        );

        let e = parse_meta("{\"a_smem_bytes\": 1,\n\"b_smem_bytes\": -4}", "m.meta").unwrap_err();
        assert_eq!(e.to_string().split(": ").next(), Some("m.meta:2"));
        assert!(e.message().contains("\"b_smem_bytes\""), "{e}");
        assert!(e.message().contains("-4"), "{e}");
        let e = parse_meta("{\"a_smem_bytes\": 1.5}", "m.meta").unwrap_err();
        assert!(e.message().contains("whole number"), "{e}");
        let e = parse_meta("{\"a_smem_bytes\": 4294967296}", "m.meta").unwrap_err();
        assert!(e.message().contains("4294967295"), "{e}");
        let e = parse_meta("{\"a_smem_bytes\": 1,\n\n\"a_smem_bytes\": 2}", "m.meta").unwrap_err();
        assert_eq!(e.line(), 3);
        assert!(e.message().contains("twice"), "{e}");
        let e = parse_meta("[1]", "m.meta").unwrap_err();
        assert!(e.message().contains("JSON object"), "{e}");
        let e = parse_meta("{\"a\": 1} x", "m.meta").unwrap_err();
        assert!(e.message().contains("after the JSON object"), "{e}");
        let e = parse_meta("{\"a\" 1}", "m.meta").unwrap_err();
        assert!(e.message().contains("`:`"), "{e}");
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(100), "]".repeat(100));
        let e = parse_meta(&deep, "m.meta").unwrap_err();
        assert!(e.message().contains("nested deeper"), "{e}");
    }

    const ACCESS_CU: &str = include_str!("../tests/fixtures/wp_access.cu");

    fn accesses<'s>(src: &'s Source, name: &str) -> &'s Accesses {
        &src.kernel(name).unwrap().accesses
    }

    fn checked(a: &Accesses) -> Vec<(&str, bool, &[AxisIndex], bool)> {
        let Accesses::Checked(list) = a else {
            panic!("expected checked accesses, got {a:?}");
        };
        list.iter()
            .map(|a| (a.param.as_str(), a.adjoint, a.indices.as_slice(), a.null_ok))
            .collect()
    }

    use AxisIndex::{Constant as C, Thread as T};

    #[test]
    fn every_kernel_of_kernels_py_has_checkable_accesses() {
        let src = parse_cu(FIXTURE_CU, CU).unwrap();
        assert_eq!(src.raw_addresses, None);
        for k in &src.kernels {
            assert!(
                matches!(k.accesses, Accesses::Checked(ref l) if !l.is_empty()),
                "{}: {:?}",
                k.name,
                k.accesses
            );
        }
        let f = |n: &str| checked(accesses(&src, n));
        assert_eq!(
            f("saxpy_cuda_kernel_forward"),
            [
                ("x", false, &[T(0)][..], false),
                ("y", false, &[T(0)][..], false)
            ]
        );
        assert_eq!(
            f("add2d_cuda_kernel_forward"),
            [
                ("a", false, &[T(0), T(1)][..], false),
                ("b", false, &[T(0), T(1)][..], false),
                ("out", false, &[T(0), T(1)][..], false)
            ]
        );
        // index4d reads out.shape: harmless.
        assert_eq!(
            f("index4d_cuda_kernel_forward"),
            [("out", false, &[T(0), T(1), T(2), T(3)][..], false)]
        );
        // atomic_add(loss, 0, ...): a constant index.
        assert_eq!(
            f("chain_loss_cuda_kernel_forward"),
            [
                ("y", false, &[T(0)][..], false),
                ("loss", false, &[C(0)][..], false)
            ]
        );
        assert_eq!(
            f("count_visits_cuda_kernel_forward"),
            [("count", false, &[T(0)][..], false)]
        );
        // The struct parameter is not an array; its x and out are.
        assert_eq!(
            f("use_struct_cuda_kernel_forward"),
            [
                ("x", false, &[T(0)][..], false),
                ("out", false, &[T(0)][..], false)
            ]
        );
        assert_eq!(
            f("lean_fill_cuda_kernel_forward"),
            [("out", false, &[T(0), T(1)][..], false)]
        );
        // Backward: the adjoint forms reach the primal (its grad) and the
        // adjoint array, both guarded by a null test; the replayed forward
        // reads are not guarded.
        assert_eq!(
            f("count_visits_cuda_kernel_backward"),
            [
                ("count", false, &[T(0)][..], true),
                ("count", true, &[T(0)][..], true)
            ]
        );
        assert_eq!(
            f("chain_loss_cuda_kernel_backward"),
            [
                ("y", false, &[T(0)][..], false),
                ("loss", false, &[C(0)][..], true),
                ("loss", true, &[C(0)][..], true),
                ("y", false, &[T(0)][..], true),
                ("y", true, &[T(0)][..], true)
            ]
        );
        let Accesses::Checked(l) = accesses(&src, "saxpy_cuda_kernel_forward") else {
            unreachable!()
        };
        assert_eq!((l[0].line, l[1].line), (1027, 1030));
    }

    #[test]
    fn access_fixture_checkable_kernels() {
        let src = parse_cu(ACCESS_CU, "wp_access.cu").unwrap();
        let f = |n: &str| checked(accesses(&src, n));
        assert_eq!(
            f("fill_cuda_kernel_forward"),
            [("x", false, &[T(0)][..], false)]
        );
        // x[0], x[-1] and x.shape[0].
        assert_eq!(
            f("ends_cuda_kernel_forward"),
            [
                ("x", false, &[C(0)][..], false),
                ("x", false, &[C(-1)][..], false),
                ("out", false, &[T(0)][..], false)
            ]
        );
        // out[j, i]: the second coordinate indexes axis 0.
        assert_eq!(
            f("transpose_cuda_kernel_forward"),
            [
                ("a", false, &[T(0), T(1)][..], false),
                ("out", false, &[T(1), T(0)][..], false)
            ]
        );
        assert_eq!(
            f("guarded_cuda_kernel_forward"),
            [("x", false, &[T(0)][..], false)]
        );
    }

    #[test]
    fn access_fixture_unproven_kernels_name_parameter_and_line() {
        let src = parse_cu(ACCESS_CU, "wp_access.cu").unwrap();
        for (kernel, param, line, says) in [
            ("gather", "x", 192, "`var_2` is computed"),
            ("shifted", "x", 595, "`var_2` is computed"),
            ("row_sum", "a", 706, "`var_8` is computed"),
            ("call_func", "x", 1028, "first_0(var_x)"),
            ("row_view", "a", 290, "wp::view(var_a,var_0)"),
            ("through_struct", "", 1112, "not an array parameter"),
        ] {
            for dir in ["forward", "backward"] {
                let name = format!("{kernel}_cuda_kernel_{dir}");
                let Accesses::Unproven(u) = accesses(&src, &name) else {
                    panic!("{name} should be unproven: {:?}", accesses(&src, &name));
                };
                assert_eq!(u.param, param, "{name}");
                assert!(u.reason.contains(says), "{name}: {}", u.reason);
                if dir == "forward" {
                    assert_eq!(u.location, format!("wp_access.cu:{line}"), "{name}");
                }
            }
        }
    }

    fn one_kernel(body: &str) -> Accesses {
        let text = format!(
            "extern \"C\" __global__ void k(wp::launch_bounds_t<2> dim, wp::array_t<wp::float32> var_x, wp::uint64 var_p)\n{{\n{body}\n}}\n"
        );
        let src = parse_cu(&text, "k.cu").unwrap();
        src.kernels[0].accesses.clone()
    }

    #[test]
    fn indices_that_change_or_escape_are_unproven() {
        let ok = "wp::int32 var_0; var_0 = builtin_tid1d(); wp::array_store(var_x, var_0, var_v);";
        assert!(matches!(one_kernel(ok), Accesses::Checked(ref l) if l.len() == 1));
        for (body, says) in [
            // a loop writes the coordinate back
            (
                "var_0 = builtin_tid1d(); wp::assign(var_0, var_3); wp::array_store(var_x, var_0, var_v);",
                "assigned again",
            ),
            (
                "var_0 = builtin_tid1d(); var_0 += 1; wp::address(var_x, var_0);",
                "assigned again",
            ),
            (
                "var_0 = builtin_tid1d(); var_0++; wp::address(var_x, var_0);",
                "assigned again",
            ),
            (
                "var_0 = builtin_tid1d(); f(&var_0); wp::address(var_x, var_0);",
                "assigned again",
            ),
            // a tid and a constant under one name
            (
                "var_0 = builtin_tid1d(); const wp::int32 var_0 = 3; wp::address(var_x, var_0);",
                "computed",
            ),
            // a coordinate the kernel does not have
            (
                "builtin_tid4d(var_0, var_1, var_2, var_3); wp::address(var_x, var_3);",
                "thread coordinate 3",
            ),
            // expressions
            (
                "var_0 = builtin_tid1d(); wp::address(var_x, var_0 + 1);",
                "expression",
            ),
            // a copy, a field, a raw address
            ("var_5 = var_x;", "cannot check"),
            ("var_5 = var_x.data;", "cannot check"),
            (
                "var_2 = wp::array_t<wp::float32>(var_p, var_n); wp::address(var_2, var_0);",
                "builds an array",
            ),
            // an array the kernel did not get as a parameter
            (
                "var_0 = builtin_tid1d(); wp::array_store(var_9, var_0, var_v);",
                "not an array parameter",
            ),
        ] {
            match one_kernel(body) {
                Accesses::Unproven(u) => assert!(u.reason.contains(says), "{body}: {}", u.reason),
                other => panic!("{body}: expected unproven, got {other:?}"),
            }
        }
        // Shape reads, len, comparisons and untouched constants are fine.
        let fine = "builtin_tid2d(var_0, var_1); const wp::int32 var_2 = 7; var_3 = (var_0 <= var_2); var_4 = &(var_x.shape); var_5 = wp::len(var_x); wp::atomic_cas(var_x, var_1, var_0, var_2, var_9); wp::atomic_add(var_x, var_2, var_9);";
        assert_eq!(
            checked(&one_kernel(fine)),
            [
                ("x", false, &[T(1), T(0)][..], false),
                ("x", false, &[C(7)][..], false)
            ]
        );
    }

    #[test]
    fn raw_addresses_are_found_anywhere() {
        let f = |t: &str| parse_cu(t, "r.cu").unwrap().raw_addresses;
        assert_eq!(
            f("static void g(wp::uint64 p) {\n var_1 = wp::mesh_get_point(p, 0); }"),
            Some(2)
        );
        assert_eq!(
            f("void g() {\n\n var_2 = wp::array_t<wp::float32>(var_p, var_n); }"),
            Some(3)
        );
        assert_eq!(f("struct S { wp::array_t<wp::float32> data; };"), None);
        assert_eq!(f(FIXTURE_CU), None);
    }

    /// Texts of about 1 MB that were slow on 38e7deb, and depth floods.
    fn big_inputs() -> Vec<(&'static str, String)> {
        const MB: usize = 1 << 20;
        let fill = |unit: &str| unit.repeat(MB / unit.len() + 1);
        let start = FIXTURE_CU
            .find("extern \"C\" __global__ void saxpy_cuda_kernel_forward")
            .unwrap();
        let end = FIXTURE_CU
            .find("extern \"C\" __global__ void add2d_cuda_kernel_forward")
            .unwrap();
        let saxpy = &FIXTURE_CU[start..end];
        let mut kernels = FIXTURE_CU[..start].to_string();
        let mut i = 0;
        while kernels.len() < MB {
            kernels.push_str(&saxpy.replace("saxpy", &format!("saxpy{i}")));
            i += 1;
        }
        let n = MB / 16;
        vec![
            ("repeated kernels", kernels),
            ("extern \"C\" { flood", fill("extern \"C\" {\n")),
            (
                "balanced extern \"C\" { }",
                format!("{}{}", "extern \"C\" {\n".repeat(n), "}\n".repeat(n)),
            ),
            ("struct flood", fill("struct ")),
            (
                "template struct flood",
                format!("template <typename T> {}", fill("struct ")),
            ),
            ("struct S { flood", fill("struct S {\n")),
            (
                "nested attribute macros",
                format!("{}{}", "extern \"C\" WP_MAXNREG(".repeat(n), ")".repeat(n)),
            ),
            (
                "parenthesised parameters",
                format!("extern \"C\" __global__ void k({}", "(".repeat(MB)),
            ),
            (
                "kernel body floods",
                format!(
                    "extern \"C\" __global__ void k(wp::launch_bounds_t<1> dim, wp::array_t<wp::float32> var_x) {{ {} {} {} {} }}",
                    "wp::address(".repeat(n / 4),
                    "builtin_tid2d(var_0, ".repeat(n / 4),
                    "wp::array_t<".repeat(n / 4),
                    "const wp::int32 ".repeat(n / 4),
                ),
            ),
            (
                "kernel body of accesses",
                format!(
                    "extern \"C\" __global__ void k(wp::launch_bounds_t<1> dim, wp::array_t<wp::float32> var_x) {{ var_0 = builtin_tid1d(); {} }}",
                    "wp::array_store(var_x, var_0, var_v); var_x.shape = var_1; ".repeat(n / 4),
                ),
            ),
            (
                "meta",
                format!(
                    "{{{}\"a_smem_bytes\": 1}}",
                    "\"k\": [1, 2, {\"x\": null}],\n".repeat(n / 2)
                ),
            ),
        ]
    }

    #[test]
    fn big_inputs_child() {
        if !is_child() {
            return;
        }
        for (what, text) in big_inputs() {
            println!("{what}: {} bytes", text.len());
            timed(what, || {
                let _ = parse_cu(&text, "big.cu");
                let _ = parse_meta(&text, "big.meta");
            });
        }
        let src = parse_cu(&big_inputs()[0].1, "big.cu").unwrap();
        assert!(src.kernels.len() > 400, "{}", src.kernels.len());
    }

    #[test]
    fn one_megabyte_inputs_parse_in_under_a_second_each() {
        run_in_child("source::tests::big_inputs_child", Duration::from_secs(60));
    }
}
