//! Hand-written CUDA C kernels against `warp_launch.h`: which of them a
//! launch can check, read from their tokens.
//!
//! A Warp-generated body is read by [`super::accesses`], which knows the
//! forms Warp writes. A hand-written body may be any C++, so this reader
//! accepts a small, closed subset and calls everything else
//! [`Accesses::Unproven`] (the kernel still loads, and only the `unsafe`
//! unchecked launch runs it). The subset is what makes a rule sound: the
//! only memory a body can reach is an array parameter through
//! `wl::index(a, ...)` or `atomicOp(wl::address(a, ...), ...)`, with every
//! index a thread coordinate, the work-item index, the block index or an
//! integer constant, plus its own scalar locals. So a body is refused
//! (named by `file:line` and what stands there) when it has
//!
//! - a subscript `[...]` (other than `dim.shape[LITERAL]` and constant
//!   components of vectors and matrices), `->`, a unary `*` or `&` (a
//!   pointer or a reference), `<<<`, a digraph (`<:` is `[`), a backslash
//!   (universal character names, line splices) or a non-ASCII character;
//! - a call of anything but the arithmetic, warp-shuffle, barrier and
//!   atomic built-ins listed here, a cast, `wl::index` / `wl::address` /
//!   `wl::coord` / `wl::lean_index`;
//! - a word no safe body needs (`asm`, casts that reinterpret, `new`,
//!   `printf`, `extern`, `template`, ...);
//! - any other use of an array parameter, of the launch bounds, of a
//!   coordinate or of the work-item index (a copy, a write, a shadowing
//!   declaration);
//!
//! and a whole text is refused when it holds anything but kernels at top
//! level, or a preprocessor line other than `#include "warp_launch.h"`
//! and `#pragma once` / `#pragma unroll` (a macro or another header could change what every
//! token means; NVRTC has no `cooperative_groups.h` of its own, so grid
//! synchronisation is outside the subset).
//!
//! The shapes a body uses to get its thread's index are the header's:
//! `WL_GRID_STRIDE_LOOP(idx, dim)` (grid-stride) or, as the body's first
//! statement, `size_t idx = wl::lean_index(); if (idx >= dim.size) return;`
//! (lean); then `wl::coord_t c = wl::coord(idx, dim);` names the
//! coordinates `c.i`, `c.j`, `c.k`, `c.l`.

use std::collections::{BTreeMap, HashSet};

use super::accesses::{call_args, is_written};
use super::tokens::{Tok, TokKind, UNMATCHED, is_punct, is_word, match_brackets, spell, tokenize};
use super::{SourceError, SourceParam, parse_cu};
use crate::abi::{DType, Kind};
use crate::signature::{AccessTarget, Accesses, ArrayAccess, AxisIndex, Unproven};

/// One hand-written kernel: its parameters as spelled, the launch shape it
/// has, and what a launch checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CudaCKernel {
    /// The symbol name (`extern "C"`, so unmangled).
    pub name: String,
    /// 1-based line of the name.
    pub line: usize,
    /// The parameters, the launch bounds first.
    pub params: Vec<SourceParam>,
    /// `N` of `wl::launch_bounds_t<N>`, when the first parameter is one.
    pub kernel_dim: Option<usize>,
    /// Whether the body is lean (`wl::lean_index()`), else grid-stride.
    pub lean: bool,
    /// The rules, or the first place no rule covers.
    pub accesses: Accesses,
    /// Dimensions of each array parameter, from the number of indices the
    /// body uses with it (where it is indexed).
    pub ndims: BTreeMap<String, u8>,
}

/// Arithmetic, shuffle, barrier and timing built-ins a body may call: none
/// takes an address.
const CALLS: &[&str] = &[
    "sqrtf",
    "sqrt",
    "rsqrtf",
    "rsqrt",
    "cbrtf",
    "cbrt",
    "expf",
    "exp",
    "exp2f",
    "exp2",
    "expm1f",
    "logf",
    "log",
    "log2f",
    "log2",
    "log10f",
    "log10",
    "log1pf",
    "powf",
    "pow",
    "sinf",
    "sin",
    "cosf",
    "cos",
    "tanf",
    "tan",
    "asinf",
    "asin",
    "acosf",
    "acos",
    "atanf",
    "atan",
    "atan2f",
    "atan2",
    "sinhf",
    "sinh",
    "coshf",
    "cosh",
    "tanhf",
    "tanh",
    "fabsf",
    "fabs",
    "abs",
    "llabs",
    "fminf",
    "fmin",
    "fmaxf",
    "fmax",
    "min",
    "max",
    "floorf",
    "floor",
    "ceilf",
    "ceil",
    "truncf",
    "trunc",
    "roundf",
    "round",
    "rintf",
    "rint",
    "fmodf",
    "fmod",
    "fmaf",
    "fma",
    "copysignf",
    "copysign",
    "erff",
    "erf",
    "erfcf",
    "erfc",
    "hypotf",
    "hypot",
    "isnan",
    "isinf",
    "isfinite",
    "signbit",
    "__expf",
    "__logf",
    "__sinf",
    "__cosf",
    "__powf",
    "__fdividef",
    "__saturatef",
    "__popc",
    "__popcll",
    "__clz",
    "__clzll",
    "__ffs",
    "__ffsll",
    "__brev",
    "__umulhi",
    "__mulhi",
    "__float_as_int",
    "__int_as_float",
    "__float_as_uint",
    "__uint_as_float",
    "__shfl_sync",
    "__shfl_up_sync",
    "__shfl_down_sync",
    "__shfl_xor_sync",
    "__ballot_sync",
    "__any_sync",
    "__all_sync",
    "__activemask",
    "__syncthreads",
    "__syncthreads_count",
    "__syncthreads_and",
    "__syncthreads_or",
    "__syncwarp",
    "__threadfence",
    "__threadfence_block",
    "clock",
    "clock64",
];

/// Atomic built-ins: checked when their first argument is
/// `wl::address(array, ...)` or `&local`.
const ATOMICS: &[&str] = &[
    "atomicAdd",
    "atomicSub",
    "atomicExch",
    "atomicMin",
    "atomicMax",
    "atomicInc",
    "atomicDec",
    "atomicCAS",
    "atomicAnd",
    "atomicOr",
    "atomicXor",
];

/// Scalar type words: declarations (`float x = ...;`) and casts.
const SCALARS: &[&str] = &[
    "bool", "char", "short", "int", "long", "unsigned", "signed", "float", "double", "size_t",
    "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t",
    "auto", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32",
    "float64",
];

/// Words a checked body never needs: each can reach memory no rule covers
/// or change what the tokens mean.
const FORBIDDEN: &[&str] = &[
    "asm",
    "__asm__",
    "reinterpret_cast",
    "const_cast",
    "new",
    "delete",
    "malloc",
    "free",
    "memcpy",
    "memset",
    "printf",
    "extern",
    "template",
    "typedef",
    "using",
    "struct",
    "class",
    "union",
    "operator",
    "this",
    "decltype",
    "__ldg",
    "goto",
    "namespace",
];

/// CUDA's built-in variables: a body may read them, never define a name
/// that hides one (`blockIdx.x` is an index the launch checks).
const BUILTIN_VARS: &[&str] = &["threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"];

/// Preprocessor lines a text may hold.
const PREPROCESSOR: &[&str] = &[
    "#include \"warp_launch.h\"",
    "#include <warp_launch.h>",
    "#pragma once",
];

/// Reads every `extern "C" __global__` kernel of a hand-written CUDA C
/// text, with what a launch can check of each.
///
/// # Errors
///
/// A [`SourceError`] naming `file` and the line where the text does not
/// tokenize or a kernel's head or parameters do not parse.
pub(crate) fn read_cuda_c(text: &str, file: &str) -> Result<Vec<CudaCKernel>, SourceError> {
    let source = parse_cu(text, file)?;
    let toks = tokenize(text, file)?;
    let close = match_brackets(&toks);
    let (bodies, outside) = top_level(&toks, &close);
    let outside = preprocessor(text).or(outside);
    let mut out = Vec::with_capacity(source.kernels.len());
    for k in &source.kernels {
        let kernel_dim = bounds_dim(&k.params);
        let body = bodies.iter().find(|b| toks[b.0].text == k.name);
        let mut scan = BodyScan::new(file, &k.params, kernel_dim.unwrap_or(1));
        let accesses = match (&outside, body, kernel_dim) {
            (Some((line, why)), _, _) => unproven(file, "", *line, why.clone()),
            (None, None, _) => unproven(file, "", k.line, "the kernel has no body".into()),
            (None, Some(_), None) => unproven(
                file,
                "",
                k.line,
                "the first parameter is not `wl::launch_bounds_t<N>`".into(),
            ),
            (None, Some(&(_, open, end)), Some(_)) => scan.run(&toks[open + 1..end]),
        };
        out.push(CudaCKernel {
            name: k.name.clone(),
            line: k.line,
            params: k.params.clone(),
            kernel_dim,
            lean: scan.lean,
            accesses,
            ndims: scan.ndims,
        });
    }
    Ok(out)
}

/// `N` of a first parameter `wl::launch_bounds_t<N>` (1 to 4).
fn bounds_dim(params: &[SourceParam]) -> Option<usize> {
    let t = params.first()?.cpp_type.trim_start_matches("::");
    let n: usize = t
        .strip_prefix("wl::launch_bounds_t<")?
        .strip_suffix('>')?
        .parse()
        .ok()?;
    (1..=4).contains(&n).then_some(n)
}

/// The verdict for a text or body whose first uncheckable place is
/// `file:line`.
fn unproven(file: &str, param: &str, line: usize, reason: String) -> Accesses {
    Accesses::Unproven(Unproven {
        param: param.to_string(),
        location: format!("{file}:{line}"),
        reason,
    })
}

/// The first preprocessor line that is not one of [`PREPROCESSOR`].
fn preprocessor(text: &str) -> Option<Refusal> {
    text.lines().enumerate().find_map(|(n, l)| {
        let l = l.trim();
        let squeezed = l.split_whitespace().collect::<Vec<_>>().join(" ");
        // `#pragma unroll [N]` only tells the compiler how to unroll a loop.
        let unroll = squeezed == "#pragma unroll"
            || squeezed
                .strip_prefix("#pragma unroll ")
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        (l.starts_with('#') && !unroll && !PREPROCESSOR.contains(&squeezed.as_str())).then(|| {
            (
                n + 1,
                format!(
                    "preprocessor line `{l}`: only `#include \"warp_launch.h\"` and `#pragma once` are read (a macro or another header could change what the body's tokens mean)"
                ),
            )
        })
    })
}

/// A kernel at top level: its name's token, its body's `{` and `}`.
type Body = (usize, usize, usize);

/// The first place a text is refused whole: its line and why.
type Refusal = (usize, String);

/// The kernels' bodies at top level, and the first top-level item that is
/// not a kernel.
fn top_level(toks: &[Tok<'_>], close: &[usize]) -> (Vec<Body>, Option<Refusal>) {
    let mut bodies = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match kernel_at(toks, close, i) {
            Some((name, open, end)) => {
                bodies.push((name, open, end));
                i = end + 1;
            }
            None => {
                let t = &toks[i];
                let why = format!(
                    "`{}` at top level: only `extern \"C\" __global__ void` kernels are read (helper functions, globals and templates are not analysed)",
                    t.text
                );
                return (bodies, Some((t.line, why)));
            }
        }
    }
    (bodies, None)
}

/// An `extern "C" __global__ [__launch_bounds__(...)] void NAME(...) {...}`
/// at `i`: the name's index and the body's braces.
fn kernel_at(toks: &[Tok<'_>], close: &[usize], i: usize) -> Option<Body> {
    if !is_word(toks.get(i), "extern") || toks.get(i + 1)?.text != "\"C\"" {
        return None;
    }
    let (mut j, mut global) = (i + 2, false);
    loop {
        let t = toks.get(j)?;
        if t.kind != TokKind::Word {
            return None;
        }
        global |= t.text == "__global__";
        if is_punct(toks.get(j + 1), "(") {
            if t.text == "__launch_bounds__" {
                j = close.get(j + 1).copied().filter(|&c| c != UNMATCHED)? + 1;
                continue;
            }
            break;
        }
        j += 1;
    }
    if !global || !is_word(toks.get(j - 1), "void") {
        return None;
    }
    let params_end = *close.get(j + 1)?;
    let open = params_end.checked_add(1)?;
    if !is_punct(toks.get(open), "{") {
        return None;
    }
    let end = *close.get(open)?;
    (end != UNMATCHED).then_some((j, open, end))
}

/// One body under scan: what its names hold, the rules found, and the
/// first place no rule covers.
struct BodyScan<'p> {
    file: &'p str,
    params: &'p [SourceParam],
    kernel_dim: usize,
    dim: &'p str,
    work_items: HashSet<String>,
    coords: HashSet<String>,
    locals: HashSet<String>,
    rules: Vec<ArrayAccess>,
    ndims: BTreeMap<String, u8>,
    lean: bool,
    bad: Option<(String, usize, String)>,
}

impl<'p> BodyScan<'p> {
    fn new(file: &'p str, params: &'p [SourceParam], kernel_dim: usize) -> Self {
        BodyScan {
            file,
            params,
            kernel_dim,
            dim: params.first().map_or("", |p| p.name.as_str()),
            work_items: HashSet::new(),
            coords: HashSet::new(),
            locals: HashSet::new(),
            rules: Vec::new(),
            ndims: BTreeMap::new(),
            lean: false,
            bad: None,
        }
    }

    /// Whether `name` is an array parameter.
    fn is_array(&self, name: &str) -> bool {
        self.params[1..]
            .iter()
            .any(|p| p.name == name && array_element(&p.cpp_type).is_some())
    }

    /// The dtype of by-value parameter `name`, when it is a Warp scalar,
    /// vector or matrix.
    fn value_dtype(&self, name: &str) -> Option<&'static DType> {
        self.params[1..]
            .iter()
            .find(|p| p.name == name && array_element(&p.cpp_type).is_none())
            .and_then(|p| dtype_of(&p.cpp_type))
    }

    /// Whether `name` is a by-value parameter.
    fn is_value(&self, name: &str) -> bool {
        self.params[1..]
            .iter()
            .any(|p| p.name == name && array_element(&p.cpp_type).is_none())
    }

    fn refuse(&mut self, param: &str, line: usize, reason: String) {
        if self.bad.is_none() {
            self.bad = Some((param.to_string(), line, reason));
        }
    }

    /// Scans the body's tokens (between its braces): the rules, or the
    /// first place none covers.
    fn run(&mut self, body: &[Tok<'_>]) -> Accesses {
        let close = match_brackets(body);
        let mut j = 0;
        while j < body.len() && self.bad.is_none() {
            j = self.step(body, &close, j);
        }
        match self.bad.take() {
            Some((param, line, reason)) => unproven(self.file, &param, line, reason),
            None => Accesses::Checked(std::mem::take(&mut self.rules)),
        }
    }

    /// Reads one form at `j`; the index after it.
    fn step(&mut self, body: &[Tok<'_>], close: &[usize], j: usize) -> usize {
        if let Some(next) = self.index_form(body, close, j) {
            return next;
        }
        if let Some(next) = self.definition_form(body, j) {
            return next;
        }
        if let Some(next) = self.read_form(body, j) {
            return next;
        }
        if let Some(next) = self.call_form(body, close, j) {
            return next;
        }
        self.token(body, j);
        j + 1
    }

    /// `wl::index(a, ...)` and `atomicOp(wl::address(a, ...), ...)` /
    /// `atomicOp(&local, ...)` at `j`.
    fn index_form(&mut self, body: &[Tok<'_>], close: &[usize], j: usize) -> Option<usize> {
        let text = |k: usize| body.get(k).map_or("", |t| t.text);
        if text(j) == "wl" && text(j + 1) == "::" && text(j + 2) == "index" && text(j + 3) == "(" {
            if j > 0 && matches!(text(j - 1), "&" | "*") && !self.binary_before(body, j - 1) {
                self.refuse(
                    "",
                    body[j].line,
                    "the address of `wl::index(...)` is taken".into(),
                );
            }
            return Some(self.access(body, close, j + 3));
        }
        if ATOMICS.contains(&text(j)) && text(j + 1) == "(" {
            if text(j + 2) == "wl" && text(j + 3) == "::" && text(j + 4) == "address" {
                return Some(self.access(body, close, j + 5));
            }
            if text(j + 2) == "&" && self.locals.contains(text(j + 3)) && text(j + 4) == "," {
                return Some(j + 4);
            }
            self.refuse(
                "",
                body[j].line,
                format!(
                    "`{}` on something other than `wl::address(array, ...)` or `&local`",
                    text(j)
                ),
            );
        }
        None
    }

    /// The access whose argument list opens at `open` (`(a, i, j)`): a rule
    /// for array `a`. The index after the `)`.
    fn access(&mut self, body: &[Tok<'_>], close: &[usize], open: usize) -> usize {
        let line = body[open].line;
        let (Some(args), Some(&end)) = (call_args(body, close, open), close.get(open)) else {
            self.refuse("", line, "unclosed `(`".into());
            return body.len();
        };
        let array = match args.first() {
            Some(&(s, e)) if e == s + 1 && self.is_array(body[s].text) => body[s].text,
            _ => {
                let what = args
                    .first()
                    .map_or(String::new(), |&(s, e)| spell(&body[s..e]));
                self.refuse("", line, format!("`{what}` is not an array parameter"));
                return end + 1;
            }
        };
        let n = args.len() - 1;
        if !(1..=4).contains(&n) {
            self.refuse(array, line, format!("{n} indices (1 to 4 are read)"));
            return end + 1;
        }
        let mut indices = Vec::with_capacity(n);
        for &(s, e) in &args[1..] {
            match self.index(&body[s..e]) {
                Some(i) => indices.push(i),
                None => {
                    let why = format!(
                        "index `{}` of `{array}` is not a thread coordinate (`c.i` of `wl::coord`), the work-item index, `blockIdx.x` or an integer constant",
                        spell(&body[s..e])
                    );
                    self.refuse(array, line, why);
                    return end + 1;
                }
            }
        }
        let nd = self.ndims.entry(array.to_string()).or_insert(0);
        *nd = (*nd).max(u8::try_from(n).unwrap_or(4));
        self.rules.push(ArrayAccess {
            param: array.to_string(),
            target: AccessTarget::Param,
            indices,
            null_ok: false,
            line,
        });
        let element = self.params[1..]
            .iter()
            .find(|p| p.name == array)
            .and_then(|p| array_element(&p.cpp_type))
            .and_then(dtype_of);
        self.components(body, end + 1, element)
    }

    /// A constant component of the element or value before `j`:
    /// `.c[K]` of a vector (K below its length), `.data[R][C]` of a matrix
    /// (below its rows and columns); the index after it (`j` when there is
    /// none). Any other subscript is left for [`BodyScan::token`] to refuse.
    fn components(&mut self, body: &[Tok<'_>], j: usize, dtype: Option<&DType>) -> usize {
        let text = |k: usize| body.get(k).map_or("", |t| t.text);
        let Some(d) = dtype else { return j };
        let lit = |k: usize| int_literal(text(k));
        let sub = |k: usize, limit: u8| {
            text(k) == "["
                && text(k + 2) == "]"
                && lit(k + 1).is_some_and(|v| (0..i64::from(limit)).contains(&v))
        };
        match (text(j), text(j + 1), d.kind) {
            (".", "c", Kind::Vector) if sub(j + 2, d.rows) => j + 5,
            (".", "data", Kind::Matrix) if sub(j + 2, d.rows) && sub(j + 5, d.cols) => j + 8,
            _ => j,
        }
    }

    /// One index expression as an [`AxisIndex`].
    fn index(&self, toks: &[Tok<'_>]) -> Option<AxisIndex> {
        let texts: Vec<&str> = toks.iter().map(|t| t.text).collect();
        // `int(x)` and `(int)x` read as `x`.
        let inner: &[&str] = match texts.as_slice() {
            ["int" | "size_t" | "unsigned", "(", rest @ .., ")"] => rest,
            ["(", "int" | "size_t" | "unsigned", ")", rest @ ..] => rest,
            all => all,
        };
        match inner {
            [c, ".", f] if self.coords.contains(*c) => {
                let k = ["i", "j", "k", "l"].iter().position(|x| x == f)?;
                Some(if k < self.kernel_dim {
                    AxisIndex::Thread(k)
                } else {
                    AxisIndex::Constant(0)
                })
            }
            [x] if self.work_items.contains(*x) => Some(AxisIndex::WorkItem),
            ["blockIdx", ".", "x"] => Some(AxisIndex::Block),
            [n] => int_literal(n).map(AxisIndex::Constant),
            ["-", n] => int_literal(n).map(|v| AxisIndex::Constant(-v)),
            _ => None,
        }
    }

    /// The loop, lean and coordinate definitions at `j`.
    fn definition_form(&mut self, body: &[Tok<'_>], j: usize) -> Option<usize> {
        let text = |k: usize| body.get(k).map_or("", |t| t.text);
        let at =
            |k: usize, words: &[&str]| words.iter().enumerate().all(|(n, w)| text(k + n) == *w);
        // WL_GRID_STRIDE_LOOP(idx, dim)
        if text(j) == "WL_GRID_STRIDE_LOOP" && text(j + 1) == "(" && text(j + 3) == "," {
            if text(j + 4) != self.dim || text(j + 5) != ")" {
                self.refuse(
                    "",
                    body[j].line,
                    "WL_GRID_STRIDE_LOOP over something other than the kernel's launch bounds"
                        .into(),
                );
            }
            self.new_name(body, j + 2, NameKind::WorkItem);
            return Some(j + 6);
        }
        // [const] size_t idx = wl::lean_index(); if (idx >= dim.size) return;
        let s = j + usize::from(text(j) == "const");
        if text(s) == "size_t"
            && at(
                s + 2,
                &["=", "wl", "::", "lean_index", "(", ")", ";", "if", "("],
            )
        {
            let idx = text(s + 1);
            let check = at(
                s + 11,
                &[idx, ">", "=", self.dim, ".", "size", ")", "return", ";"],
            );
            if j != 0 || !check {
                self.refuse("", body[j].line, "`wl::lean_index()` must be the body's first statement, followed by `if (idx >= dim.size) return;`".into());
            }
            self.lean = true;
            self.new_name(body, s + 1, NameKind::WorkItem);
            return Some(s + 20);
        }
        // [const] wl::coord_t c = wl::coord(idx, dim);
        if at(s, &["wl", "::", "coord_t"]) && at(s + 4, &["=", "wl", "::", "coord", "("]) {
            let ok =
                self.work_items.contains(text(s + 9)) && at(s + 10, &[",", self.dim, ")", ";"]);
            if !ok {
                self.refuse(
                    "",
                    body[j].line,
                    "`wl::coord` of something other than the work-item index and the launch bounds"
                        .into(),
                );
            }
            self.new_name(body, s + 3, NameKind::Coord);
            return Some(s + 14);
        }
        // A scalar declaration: `[__shared__] [const] T name`.
        if SCALARS.contains(&text(j))
            && body.get(j + 1).is_some_and(|t| t.kind == TokKind::Word)
            && !SCALARS.contains(&text(j + 1))
            && matches!(text(j + 2), "=" | ";" | "," | ")")
        {
            self.new_name(body, j + 1, NameKind::Local);
            return Some(j + 2);
        }
        None
    }

    /// Records a name the body defines; refuses one that hides a parameter
    /// or a name the checks rely on.
    fn new_name(&mut self, body: &[Tok<'_>], j: usize, kind: NameKind) {
        let name = body[j].text;
        let taken = self.params.iter().any(|p| p.name == name)
            || BUILTIN_VARS.contains(&name)
            || (kind != NameKind::WorkItem && self.work_items.contains(name))
            || (kind != NameKind::Coord && self.coords.contains(name))
            || (kind != NameKind::Local && self.locals.contains(name));
        if taken {
            self.refuse(
                "",
                body[j].line,
                format!("`{name}` is defined again, hiding a name the checks rely on"),
            );
            return;
        }
        let set = match kind {
            NameKind::WorkItem => &mut self.work_items,
            NameKind::Coord => &mut self.coords,
            NameKind::Local => &mut self.locals,
        };
        set.insert(name.to_string());
    }

    /// Reads of the launch bounds and of coordinates at `j`
    /// (`dim.size`, `dim.shape[LITERAL]`, `c.i`); a write is refused.
    fn read_form(&mut self, body: &[Tok<'_>], j: usize) -> Option<usize> {
        let text = |k: usize| body.get(k).map_or("", |t| t.text);
        // A constant component of a by-value vector or matrix (the kernel's
        // own copy: reading and writing it stays inside it).
        if let Some(d) = self.value_dtype(text(j)) {
            let after = self.components(body, j + 1, Some(d));
            if after > j + 1 {
                return Some(after);
            }
        }
        let last = if text(j) == self.dim && text(j + 1) == "." && text(j + 2) == "size" {
            j + 2
        } else if text(j) == self.dim
            && text(j + 1) == "."
            && text(j + 2) == "shape"
            && text(j + 3) == "["
            && text(j + 5) == "]"
        {
            let k = int_literal(text(j + 4)).unwrap_or(-1);
            if !(0..self.kernel_dim as i64).contains(&k) {
                self.refuse(
                    "",
                    body[j].line,
                    format!(
                        "`{}.shape[{}]` is past the launch's {} dimensions",
                        self.dim,
                        text(j + 4),
                        self.kernel_dim
                    ),
                );
            }
            j + 5
        } else if self.coords.contains(text(j))
            && text(j + 1) == "."
            && ["i", "j", "k", "l"].contains(&text(j + 2))
        {
            j + 2
        } else {
            return None;
        };
        if is_written(body, j) || is_written(body, last) {
            self.refuse(
                "",
                body[j].line,
                format!("`{}` is written", spell(&body[j..=last])),
            );
        }
        Some(last + 1)
    }

    /// A call at `j` (`NAME(`): the allowed ones pass, the others are
    /// refused.
    fn call_form(&mut self, body: &[Tok<'_>], close: &[usize], j: usize) -> Option<usize> {
        let t = &body[j];
        if t.kind != TokKind::Word || !is_punct(body.get(j + 1), "(") {
            return None;
        }
        let prev = |k: usize| if j >= k { body[j - k].text } else { "" };
        let allowed = CALLS.contains(&t.text)
            || SCALARS.contains(&t.text)
            || matches!(
                t.text,
                "if" | "for" | "while" | "switch" | "return" | "sizeof"
            )
            || (prev(1) == "::" && prev(2) == "wl" && wl_type(t.text));
        if !allowed {
            self.refuse("", t.line, format!("call of `{}`: only the arithmetic, shuffle, barrier and atomic built-ins, casts and `wl::index`/`wl::address` are read", t.text));
            return Some(
                close
                    .get(j + 1)
                    .copied()
                    .filter(|&c| c != UNMATCHED)
                    .unwrap_or(j + 1),
            );
        }
        None
    }

    /// Whether the `*` or `&` at `j` is a binary operator: after a number,
    /// `)`, `]`, or a name that holds a value.
    fn binary_before(&self, body: &[Tok<'_>], j: usize) -> bool {
        let Some(prev) = j.checked_sub(1).map(|k| &body[k]) else {
            return false;
        };
        let member = j >= 2 && body[j - 2].text == ".";
        prev.kind == TokKind::Number
            || prev.text == ")"
            // Only the accepted subscripts (constant components,
            // `dim.shape[K]`) reach here: a value ends there.
            || prev.text == "]"
            || (prev.kind == TokKind::Word
                && (member
                    || self.locals.contains(prev.text)
                    || self.work_items.contains(prev.text)
                    || self.is_value(prev.text)
                    || matches!(
                        prev.text,
                        "threadIdx" | "blockIdx" | "blockDim" | "gridDim" | "warpSize"
                    )))
    }

    /// Any token no form above took.
    fn token(&mut self, body: &[Tok<'_>], j: usize) {
        let t = &body[j];
        let text = |k: usize| body.get(k).map_or("", |t| t.text);
        // A member's name (`threadIdx.x`, `v.x`) names no variable.
        let member = j > 0 && body[j - 1].text == ".";
        let why = match t.text {
            _ if member && t.kind == TokKind::Word => None,
            // A universal character name or a line splice can spell a name
            // this reader does not see; a non-ASCII character likewise.
            "\\" => Some("a backslash (a universal character name or a line splice)".to_string()),
            _ if !t.text.is_ascii() => Some(format!("the non-ASCII character {:?}", t.text)),
            // Digraphs: `<:` `:>` are `[` `]`, `<%` `%>` are `{` `}`, `%:` is `#`.
            "<" if matches!(text(j + 1), ":" | "::" | "%") => {
                Some("a digraph (`<:` or `<%`)".into())
            }
            ":" | "::" if text(j + 1) == ">" => Some("a digraph (`:>`)".into()),
            "%" if matches!(text(j + 1), ">" | ":" | "::") => {
                Some("a digraph (`%>` or `%:`)".into())
            }
            "[" | "]" => {
                Some("a subscript `[...]` (only `wl::index` reaches an array)".to_string())
            }
            _ if t.kind == TokKind::Str => Some(format!("the literal {} (a pointer)", t.text)),
            "-" if text(j + 1) == ">" => Some("`->` (a pointer)".into()),
            "<" if text(j + 1) == "<" && text(j + 2) == "<" => {
                Some("a kernel launch `<<<...>>>`".into())
            }
            "*" | "&"
                if !(t.text == "&"
                    && (text(j + 1) == "&"
                        || j.checked_sub(1).is_some_and(|k| body[k].text == "&")))
                    && !self.binary_before(body, j) =>
            {
                Some(format!("a unary `{}` (a pointer or a reference)", t.text))
            }
            w if FORBIDDEN.contains(&w) => Some(format!("`{w}`")),
            w if self.is_array(w) => Some(format!(
                "array `{w}` used other than as the first argument of `wl::index` or `wl::address`"
            )),
            w if w == self.dim || self.coords.contains(w) => Some(format!(
                "`{w}` used other than by the header's loop, `wl::coord` or a read of a field"
            )),
            w if (self.work_items.contains(w) || BUILTIN_VARS.contains(&w))
                && (is_written(body, j)
                    || (j > 0
                        && body[j - 1].kind == TokKind::Word
                        && body[j - 1].text != "return")) =>
            {
                Some(format!("`{w}` is written or defined again"))
            }
            "wl" if text(j + 1) == "::" && !wl_type(text(j + 2)) => {
                Some(format!("`wl::{}`", text(j + 2)))
            }
            _ => None,
        };
        if let Some(why) = why {
            let param = if self.is_array(t.text) { t.text } else { "" };
            self.refuse(param, t.line, why);
        }
    }
}

/// What a name the body defines holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NameKind {
    WorkItem,
    Coord,
    Local,
}

/// Whether `wl::NAME` is a type of the header (a scalar, vector or matrix
/// name, `coord_t`): harmless in a declaration or a cast.
fn wl_type(name: &str) -> bool {
    name == "coord_t" || crate::abi::DType::by_cpp(&format!("wp::{name}")).is_some()
}

/// C's spellings of fixed-size integers, as Warp's scalar names (`long`
/// is not here: its size depends on the platform).
const C_INTEGERS: &[(&str, &str)] = &[
    ("signed char", "int8_t"),
    ("char", "int8_t"),
    ("unsigned char", "uint8_t"),
    ("short", "int16_t"),
    ("short int", "int16_t"),
    ("unsigned short", "uint16_t"),
    ("unsigned short int", "uint16_t"),
    ("unsigned", "uint32_t"),
    ("unsigned int", "uint32_t"),
    ("long long", "int64_t"),
    ("long long int", "int64_t"),
    ("unsigned long long", "uint64_t"),
    ("unsigned long long int", "uint64_t"),
];

/// The Warp dtype a spelled scalar, vector or matrix type names (`wl::`
/// read as Warp's `wp::`, C's fixed-size integers as Warp's, a leading
/// `const` dropped).
pub(crate) fn dtype_of(cpp: &str) -> Option<&'static DType> {
    let t = cpp.trim_start_matches("const ").trim_start_matches("::");
    let t = C_INTEGERS
        .iter()
        .find(|(c, _)| *c == t)
        .map_or(t, |(_, w)| w);
    DType::by_cpp(&t.replace("wl::", "wp::"))
}

/// The element type of `wl::array_t<T>` (as spelled by the reader; a
/// `const` in front is allowed: the parameter is still passed by value).
pub(crate) fn array_element(cpp: &str) -> Option<&str> {
    cpp.trim_start_matches("const ")
        .trim_start_matches("::")
        .strip_prefix("wl::array_t<")?
        .strip_suffix('>')
}

/// A decimal or hexadecimal integer literal, suffixes `u`/`l` allowed.
fn int_literal(text: &str) -> Option<i64> {
    let t = text.trim_end_matches(['u', 'U', 'l', 'L']);
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => i64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}
