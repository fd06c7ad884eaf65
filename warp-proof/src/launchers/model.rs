//! What the launchers are made of: every forward kernel of a module with
//! its parameters typed for Rust, the `wp.struct`s they take laid out as
//! Warp lays them out, the documentation facts (Python signature, where
//! the kernel is defined, what it writes, what its launches check), and
//! the kernels no launcher is made for, with the reason. Read from the
//! same declarations `AotModule::load` makes (`aot::declarations`), so a
//! module the loader refuses is refused here too, with the same message.

use std::collections::BTreeMap;

use crate::hash::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use proc_macro2::Span;
use syn::Ident;

use super::elements::{ELEMENT_TYPES, HALF_ELEMENT_TYPES};
use crate::abi::{DType, Kind, Scalar};
use crate::declare::{DeclareError, Declared, declarations, ndim_hints};
use crate::signature::{Accesses, AxisIndex, ParamKind, StructType, Unproven};
use crate::source::effects::{Effect, Effects, kernel_effects};
use crate::source::{self, Source};

/// A Python source file of the module: how docs name it, and its text.
#[derive(Debug, Clone)]
pub(super) struct PythonFile {
    pub shown: String,
    pub text: String,
}

/// The inputs of one generation.
pub(super) struct Input<'a> {
    pub module: &'a str,
    pub cu_file: &'a str,
    pub cu_text: &'a str,
    pub meta_file: &'a str,
    pub meta_text: &'a str,
    pub python: &'a [PythonFile],
    /// The static holding the module's embedded images, if any.
    pub embedded: Option<&'a str>,
    /// The compile step's facts (`wp_<module>.facts.json`: file, text),
    /// when the directory has them.
    pub facts: Option<(&'a str, &'a str)>,
}

/// A scalar, vector or matrix passed by value (or held by a struct).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ValueTy {
    /// One scalar, its Rust type.
    Scalar(&'static str),
    /// `[S; n]`: vectors, quaternions, transforms.
    Vector(&'static str, usize),
    /// `[[S; cols]; rows]`, row-major.
    Matrix(&'static str, usize, usize),
}

impl ValueTy {
    /// The Rust type for `d` (every scalar has one).
    pub fn of(d: &'static DType) -> ValueTy {
        let s = scalar_type(d.scalar);
        match d.kind {
            Kind::Scalar => ValueTy::Scalar(s),
            Kind::Matrix => ValueTy::Matrix(s, usize::from(d.rows), usize::from(d.cols)),
            _ => ValueTy::Vector(s, d.components()),
        }
    }

    /// The Rust type as source text (`f32`, `[f32; 3]`, `[[f32; 3]; 3]`).
    pub fn text(self) -> String {
        match self {
            ValueTy::Scalar(s) => s.to_string(),
            ValueTy::Vector(s, n) => format!("[{s}; {n}]"),
            ValueTy::Matrix(s, r, c) => format!("[[{s}; {c}]; {r}]"),
        }
    }
}

/// The Rust type of a Warp scalar: the half-precision ones are `half`'s
/// types through warp-launch's re-export (its `half` feature).
fn scalar_type(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "bool",
        Scalar::Int8 => "i8",
        Scalar::UInt8 => "u8",
        Scalar::Int16 => "i16",
        Scalar::UInt16 => "u16",
        Scalar::Int32 => "i32",
        Scalar::UInt32 => "u32",
        Scalar::Int64 => "i64",
        Scalar::UInt64 => "u64",
        Scalar::Float32 => "f32",
        Scalar::Float64 => "f64",
        Scalar::Float16 => "::warp_launch::half::f16",
        Scalar::BFloat16 => "::warp_launch::half::bf16",
    }
}

/// The `Element` type (warp-launch's) of arrays of `d`, as source text.
fn element_type(d: &'static DType) -> Option<&'static str> {
    ELEMENT_TYPES
        .iter()
        .chain(HALF_ELEMENT_TYPES)
        .find(|(e, _)| std::ptr::eq(*e, d))
        .map(|(_, t)| *t)
}

/// The name of `d`'s constant (`DType::FLOAT32`).
pub(super) fn dtype_const(d: &'static DType) -> String {
    d.name.to_uppercase()
}

/// A parameter's Rust type.
#[derive(Debug, Clone)]
pub(super) enum ParamTy {
    Value(&'static DType, ValueTy),
    Array {
        dtype: &'static DType,
        /// The element type as source text.
        element: &'static str,
        /// Known dimensions, else a const generic parameter named `generic`.
        ndim: Option<u8>,
        generic: Ident,
    },
    /// Index into [`Model::structs`].
    Struct(usize),
}

/// One parameter of a launcher.
#[derive(Debug, Clone)]
pub(super) struct Param {
    /// Warp's name.
    pub name: String,
    pub ident: Ident,
    pub adj_ident: Ident,
    pub kind: ParamKind,
    pub ty: ParamTy,
    pub effect: Option<Effect>,
}

/// A field of a generated struct.
#[derive(Debug, Clone)]
pub(super) enum FieldTy {
    Value(&'static DType, ValueTy),
    /// An array: its dtype, element type (source text) and dimensions
    /// (from the Python class; `None`: an untyped `Array`).
    Array {
        dtype: &'static DType,
        element: &'static str,
        ndim: Option<u8>,
    },
    /// Index into [`Model::structs`].
    Struct(usize),
    /// `n` bytes of padding.
    Pad(usize),
}

#[derive(Debug, Clone)]
pub(super) struct Field {
    /// Warp's name (empty for padding).
    pub name: String,
    pub ident: Ident,
    pub ty: FieldTy,
    pub offset: usize,
}

/// A `wp.struct`, as a `#[repr(C)]` Rust struct.
#[derive(Debug, Clone)]
pub(super) struct StructModel {
    pub ty: Arc<StructType>,
    pub ident: Ident,
    /// Line of the struct in the generated source.
    pub cu_line: Option<usize>,
    pub fields: Vec<Field>,
    /// Whether it holds an array, itself or in a nested struct: then it
    /// is no `WarpStruct` but a struct of typed arrays and values that
    /// makes a checked `StructValue` (`to_value`).
    pub holds_arrays: bool,
}

/// The Python `def` of a kernel.
#[derive(Debug, Clone)]
pub(super) struct PythonDef {
    /// `def name(...):`, on one line.
    pub signature: String,
    /// Whether `signature` is only the first line of a longer one (Warp's
    /// comment copies one line; the file was not given).
    pub truncated: bool,
    /// The file (as shown) and line, when known.
    pub file: Option<String>,
    pub line: Option<usize>,
}

/// One kernel with a launcher.
#[derive(Debug, Clone)]
pub(super) struct KernelModel {
    pub key: String,
    pub ident: Ident,
    pub field: Ident,
    pub params: Vec<Param>,
    pub has_backward: bool,
    pub tiled: bool,
    pub lean: bool,
    pub python: Option<PythonDef>,
    pub cu_line: usize,
    /// Why safe launches are refused, if they are.
    pub unproven: Option<Unproven>,
    /// Why safe launches of the backward kernel are refused, if they are
    /// and the forward ones are not.
    pub unproven_backward: Option<Unproven>,
    /// The checked accesses of the forward kernel, for docs.
    pub checks: Vec<String>,
}

/// A kernel without a launcher, and why.
#[derive(Debug, Clone)]
pub(super) struct Skipped {
    pub key: String,
    pub reason: String,
}

/// Everything the renderer needs.
#[derive(Debug, Clone)]
pub(super) struct Model {
    pub module: String,
    pub module_ident: Ident,
    pub cu_file: String,
    pub block_dim: Option<u32>,
    pub kernels: Vec<KernelModel>,
    pub skipped: Vec<Skipped>,
    pub structs: Vec<StructModel>,
    pub embedded: Option<String>,
}

/// Rust's keywords in any edition (strict and reserved), which a Warp
/// name may be: they become raw identifiers (`r#type`).
const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if",
    "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static",
    "struct", "trait", "true", "type", "unsafe", "use", "where", "while", "async", "await", "dyn",
    "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized",
    "virtual", "yield", "try", "gen",
];

/// Keywords that cannot be raw identifiers.
const NOT_RAW: &[&str] = &["self", "Self", "super", "crate", "_"];

/// A Rust identifier for the Warp name `name`, not in `taken` (which it
/// joins): a name with capitals becomes `snake_case` (`X` → `x`, `dX` →
/// `d_x`, as Rust names values), a keyword becomes raw, anything else
/// invalid or taken gets `_` appended until it is free.
pub(super) fn ident(name: &str, taken: &mut HashSet<String>) -> Ident {
    use heck::ToSnakeCase;
    let snake;
    let name = if name.chars().any(|c| c.is_ascii_uppercase()) {
        snake = name.to_snake_case();
        snake.as_str()
    } else {
        name
    };
    let mut base: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
        base.insert(0, '_');
    }
    if NOT_RAW.contains(&base.as_str()) {
        base.push('_');
    }
    while taken.contains(&base) {
        base.push('_');
    }
    taken.insert(base.clone());
    if KEYWORDS.contains(&base.as_str()) {
        Ident::new_raw(&base, Span::call_site())
    } else {
        Ident::new(&base, Span::call_site())
    }
}

/// An `UpperCamelCase` type name for `name`, not in `taken`: `suffix` is
/// appended on a clash, then a number.
fn type_ident(name: &str, suffix: &str, taken: &mut HashSet<String>) -> Ident {
    use heck::ToUpperCamelCase;
    let mut base: String = name
        .to_upper_camel_case()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
        base.insert_str(0, suffix);
    }
    if taken.contains(&base) || NOT_RAW.contains(&base.as_str()) {
        base.push_str(suffix);
    }
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{base}{n}");
        n += 1;
    }
    taken.insert(candidate.clone());
    Ident::new(&candidate, Span::call_site())
}

/// The lines of a text, and the text of lines by number.
struct Lines<'a>(Vec<&'a str>);

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        Lines(text.lines().collect())
    }
    /// Line `n` (1-based).
    fn get(&self, n: usize) -> Option<&'a str> {
        n.checked_sub(1).and_then(|i| self.0.get(i).copied())
    }
}

/// Warp's copy of a kernel's `def` line inside its body: `// def
/// name(...):   <L n>` between line `from` and `to` (exclusive).
fn def_comment(cu: &Lines<'_>, from: usize, to: usize) -> Option<(String, Option<usize>)> {
    (from..to.min(cu.0.len() + 1)).find_map(|n| {
        let code = cu.get(n)?.trim_start().strip_prefix("// def ")?;
        let (text, line) = match code.rsplit_once("<L ") {
            Some((t, l)) => (t, l.trim_end().strip_suffix('>')?.parse().ok()),
            None => (code, None),
        };
        Some((format!("def {}", text.trim_end()), line))
    })
}

/// The name of the function a `def ...` line defines.
fn def_name(def: &str) -> Option<&str> {
    let rest = def.strip_prefix("def ")?;
    let end = rest.find('(')?;
    Some(rest[..end].trim())
}

/// The whole `def name(...):` starting at 1-based `line` of `text`, on
/// one line with whitespace collapsed, when that line defines `name`.
fn python_def_at(text: &str, line: usize, name: &str) -> Option<String> {
    let lines = Lines::new(text);
    let first = lines.get(line)?.trim_start();
    let after = first.strip_prefix("def ")?.trim_start();
    if !after.starts_with(name) || !after[name.len()..].trim_start().starts_with('(') {
        return None;
    }
    let mut out = String::new();
    let mut depth = 0i32;
    let mut opened = false;
    for n in line..line + 200 {
        let l = lines.get(n)?;
        let l = if n == line { l.trim_start() } else { l };
        let mut quote: Option<char> = None;
        for c in l.chars() {
            if let Some(q) = quote {
                out.push(c);
                if c == q {
                    quote = None;
                }
                continue;
            }
            match c {
                '#' => break,
                '\'' | '"' => quote = Some(c),
                '(' | '[' | '{' => {
                    depth += 1;
                    opened = true;
                }
                ')' | ']' | '}' => depth -= 1,
                _ => {}
            }
            out.push(c);
            if opened && depth == 0 && c == ':' {
                return Some(tidy_signature(&out));
            }
        }
        out.push(' ');
    }
    None
}

/// `def f( a: x,\n    b: y,\n):` as `def f(a: x, b: y):`.
fn tidy_signature(s: &str) -> String {
    let mut out = String::new();
    for word in s.split_whitespace() {
        if !out.is_empty() && !out.ends_with('(') && !word.starts_with(')') {
            out.push(' ');
        }
        out.push_str(word);
    }
    out.replace(",)", ")")
}

/// Where `name` is defined among `files`: at `hint` (Warp's `<L n>`) in
/// one of them, else the one place a file defines it.
fn find_def(files: &[PythonFile], name: &str, hint: Option<usize>) -> Option<(usize, usize)> {
    if let Some(line) = hint {
        let at: Vec<usize> = (0..files.len())
            .filter(|&i| python_def_at(&files[i].text, line, name).is_some())
            .collect();
        if let [one] = at.as_slice() {
            return Some((*one, line));
        }
    }
    let mut found = Vec::new();
    for (i, f) in files.iter().enumerate() {
        for (n, l) in f.text.lines().enumerate() {
            let l = l.trim_start();
            if let Some(rest) = l.strip_prefix("def ")
                && let Some(after) = rest.trim_start().strip_prefix(name)
                && after.trim_start().starts_with('(')
            {
                found.push((i, n + 1));
            }
        }
    }
    match found.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// The rule of one access as text: `x[thread coordinate 0]`.
fn describe_access(param: &str, indices: &[AxisIndex]) -> String {
    let idx: Vec<String> = indices
        .iter()
        .map(|i| match i {
            AxisIndex::Thread(k) => format!("tid {k}"),
            AxisIndex::WorkItem => "work item".into(),
            AxisIndex::Block => "block".into(),
            AxisIndex::Constant(c) => c.to_string(),
            AxisIndex::Tile {
                thread,
                scale,
                offset,
                len,
            } => {
                let start = match thread {
                    Some(k) if *offset == 0 => format!("{scale} * tid {k}"),
                    Some(k) => format!("{scale} * tid {k} + {offset}"),
                    None => offset.to_string(),
                };
                format!("tile of {len} from {start}")
            }
            AxisIndex::Modulo { axis } => format!("mod shape[{axis}]"),
        })
        .collect();
    format!("{param}[{}]", idx.join(", "))
}

/// Makes the kernels the compile step's facts do not prove on CUDA
/// unproven, as warp-launch's load does: a kernel reaching native code or
/// carrying a preamble gets no safe launcher. No facts: nothing changes
/// (the loader's `unsafe` contract covers such a module).
fn apply_facts(input: &Input<'_>, declared: &mut [Declared]) -> Result<(), DeclareError> {
    let Some((file, text)) = input.facts else {
        return Ok(());
    };
    let facts = crate::source::parse_facts(text, file)?;
    facts.check_module(input.module, file)?;
    for d in declared.iter_mut() {
        if let Some(u) = facts.verdict(&d.key, crate::source::Target::Cuda, file) {
            d.decl.forward = Accesses::Unproven(u.clone());
            d.decl.backward = Accesses::Unproven(u);
        }
    }
    Ok(())
}

/// Builds the model of `input`.
pub(super) fn build(input: &Input<'_>) -> Result<Model, DeclareError> {
    let declared = declarations(
        input.cu_text,
        input.cu_file,
        input.meta_text,
        input.meta_file,
    )?;
    let src: Source = source::parse_cu(input.cu_text, input.cu_file)?;
    let effects = kernel_effects(input.cu_text, input.cu_file, &src)?;
    let cu = Lines::new(input.cu_text);
    let mut kernel_lines: Vec<usize> = src.kernels.iter().map(|k| k.line).collect();
    kernel_lines.sort_unstable();
    let struct_lines: HashMap<&str, usize> = src
        .structs
        .iter()
        .map(|s| (s.name.as_str(), s.line))
        .collect();
    let block_dim = input.cu_text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("#define WP_TILE_BLOCK_DIM ")
            .and_then(|v| v.trim().parse().ok())
    });

    let mut declared: Vec<Declared> = declared;
    apply_facts(input, &mut declared)?;
    declared.sort_by(|a, b| a.key.cmp(&b.key));

    // Type names: kernels first, then structs, then the module.
    let mut types: HashSet<String> = HashSet::default();
    let mut fields: HashSet<String> = HashSet::default();
    let mut structs = StructTable::default();
    let mut kernels = Vec::new();
    let mut skipped = Vec::new();
    let kernel_idents: Vec<Ident> = declared
        .iter()
        .map(|d| type_ident(&d.key, "Kernel", &mut types))
        .collect();

    for (d, kident) in declared.iter().zip(kernel_idents) {
        let Some(sk) = src.kernels.iter().find(|k| k.name == d.forward) else {
            continue;
        };
        let next_line = kernel_lines
            .iter()
            .copied()
            .find(|&l| l > sk.line)
            .unwrap_or(usize::MAX);
        let python = def_comment(&cu, sk.line, next_line).map(|(comment, hint)| {
            let name = def_name(&comment).unwrap_or(&d.key).to_string();
            match find_def(input.python, &name, hint) {
                Some((file, line)) => {
                    let full = python_def_at(&input.python[file].text, line, &name);
                    PythonDef {
                        truncated: false,
                        signature: full.unwrap_or(comment),
                        file: Some(input.python[file].shown.clone()),
                        line: Some(line),
                    }
                }
                None => PythonDef {
                    truncated: !comment.trim_end().ends_with(':'),
                    signature: comment,
                    file: None,
                    line: hint,
                },
            }
        });
        let mut ndim_from_python = BTreeMap::new();
        if let Some(p) = python.as_ref().filter(|p| !p.truncated)
            && let Some(name) = def_name(&p.signature)
        {
            let line = format!("// {}", p.signature);
            ndim_from_python = ndim_hints(&line, name);
        }
        let no_effects = Effects::default();
        let eff = effects.get(&d.forward).unwrap_or(&no_effects);

        let mut names: HashSet<String> = ["dim", "stream"].map(String::from).into_iter().collect();
        let mut generics: HashSet<String> = HashSet::default();
        let mut params = Vec::new();
        let mut skip: Option<String> = None;
        for p in d.decl.params.iter() {
            let ty = match &p.kind {
                ParamKind::Value(dt) => ParamTy::Value(dt, ValueTy::of(dt)),
                ParamKind::Array { dtype, ndim } => match element_type(dtype) {
                    Some(element) => ParamTy::Array {
                        dtype,
                        element,
                        ndim: ndim
                            .or_else(|| ndim_from_python.get(&p.name).copied())
                            .or_else(|| ndim_from_rules(d, &p.name)),
                        generic: const_ident(&p.name, &mut generics),
                    },
                    None => {
                        skip = Some(format!(
                            "parameter `{}` is an array of `{}`, a dtype warp-launch has no `Element` type for (so no `TypedArray` of it)",
                            p.name, dtype.name
                        ));
                        break;
                    }
                },
                ParamKind::Struct(st) => {
                    match structs.add(st, &struct_lines, input.python, &mut types) {
                        Ok(i) => ParamTy::Struct(i),
                        Err(why) => {
                            skip = Some(format!("parameter `{}` is {why}", p.name));
                            break;
                        }
                    }
                }
            };
            params.push(Param {
                name: p.name.clone(),
                ident: ident(&p.name, &mut names),
                adj_ident: Ident::new("_", Span::call_site()),
                kind: p.kind.clone(),
                ty,
                effect: eff.arrays.get(&p.name).cloned(),
            });
        }
        if let Some(reason) = skip {
            skipped.push(Skipped {
                key: d.key.clone(),
                reason,
            });
            continue;
        }
        for p in &mut params {
            p.adj_ident = ident(&format!("adj_{}", p.name), &mut names);
        }
        let unproven = match d.decl.accesses(crate::Pass::Forward) {
            Accesses::Unproven(u) => Some(u.clone()),
            Accesses::Checked(_) => None,
        };
        let unproven_backward = match d.decl.accesses(crate::Pass::Adjoint) {
            Accesses::Unproven(u) if unproven.is_none() && d.backward.is_some() => Some(u.clone()),
            _ => None,
        };
        let mut checks: Vec<String> = Vec::new();
        if let Accesses::Checked(list) = d.decl.accesses(crate::Pass::Forward) {
            for a in list {
                let s = describe_access(&a.param, &a.indices);
                if !checks.contains(&s) {
                    checks.push(s);
                }
            }
        }
        kernels.push(KernelModel {
            key: d.key.clone(),
            field: ident(&d.key, &mut fields),
            ident: kident,
            params,
            has_backward: d.backward.is_some(),
            tiled: eff.tiles,
            lean: !d.decl.grid_stride,
            python,
            cu_line: sk.line,
            unproven,
            unproven_backward,
            checks,
        });
    }
    let module_ident = type_ident(input.module, "Module", &mut types);
    Ok(Model {
        module: input.module.to_string(),
        module_ident,
        cu_file: input.cu_file.to_string(),
        block_dim,
        kernels,
        skipped,
        structs: structs.list,
        embedded: input.embedded.map(str::to_string),
    })
}

/// The dimensions of array `param` from the access rules of the kernel's
/// functions: Warp indexes an array element (`wp::address`,
/// `wp::array_store`, the atomics) with exactly one index per dimension
/// (fewer would make a view), so every rule without a tile index agrees
/// on the number; `None` when there is none, or they disagree.
fn ndim_from_rules(d: &Declared, param: &str) -> Option<u8> {
    let mut found: Option<usize> = None;
    for pass in [crate::Pass::Forward, crate::Pass::Adjoint] {
        let Accesses::Checked(list) = d.decl.accesses(pass) else {
            continue;
        };
        for a in list.iter().filter(|a| a.param == param) {
            if a.indices
                .iter()
                .any(|i| matches!(i, AxisIndex::Tile { .. }))
            {
                continue;
            }
            if found.is_some_and(|n| n != a.indices.len()) {
                return None;
            }
            found = Some(a.indices.len());
        }
    }
    found
        .and_then(|n| u8::try_from(n).ok())
        .filter(|n| (1..=4).contains(n))
}

/// A const generic parameter for the dimensions of array `name`
/// (`NDIM_X` for `x`), not in `taken`.
fn const_ident(name: &str, taken: &mut HashSet<String>) -> Ident {
    let mut base: String = format!("NDIM_{name}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    while taken.contains(&base) {
        base.push('_');
    }
    taken.insert(base.clone());
    Ident::new(&base, Span::call_site())
}

/// The structs the launchers take, each once, inner structs first.
#[derive(Default)]
struct StructTable {
    list: Vec<StructModel>,
    by_name: HashMap<String, Result<usize, String>>,
}

impl StructTable {
    /// The index of `st` (added with the structs it holds), or why it
    /// cannot be a Rust struct.
    fn add(
        &mut self,
        st: &Arc<StructType>,
        lines: &HashMap<&str, usize>,
        python: &[PythonFile],
        types: &mut HashSet<String>,
    ) -> Result<usize, String> {
        if let Some(done) = self.by_name.get(&st.name) {
            return done.clone();
        }
        let result = self.make(st, lines, python, types);
        self.by_name.insert(st.name.clone(), result.clone());
        result
    }

    fn make(
        &mut self,
        st: &Arc<StructType>,
        lines: &HashMap<&str, usize>,
        python: &[PythonFile],
        types: &mut HashSet<String>,
    ) -> Result<usize, String> {
        let ndims = struct_ndims(python, st.key());
        let mut holds_arrays = false;
        let mut fields = Vec::new();
        let mut names: HashSet<String> = HashSet::default();
        let mut pads = 0usize;
        let mut at = 0usize;
        let mut pad =
            |fields: &mut Vec<Field>, names: &mut HashSet<String>, from: usize, to: usize| {
                if to > from {
                    fields.push(Field {
                        name: String::new(),
                        ident: ident(&format!("_pad{pads}"), names),
                        ty: FieldTy::Pad(to - from),
                        offset: from,
                    });
                    pads += 1;
                }
            };
        // Names first, so padding never takes a field's name.
        for f in &st.fields {
            names.insert(f.name.clone());
        }
        let mut real = Vec::new();
        let mut field_names: HashSet<String> = HashSet::default();
        for f in &st.fields {
            let ty = match &f.kind {
                ParamKind::Value(d) => FieldTy::Value(d, ValueTy::of(d)),
                ParamKind::Array { dtype, ndim } => match element_type(dtype) {
                    Some(element) => {
                        holds_arrays = true;
                        FieldTy::Array {
                            dtype,
                            element,
                            ndim: ndim.or_else(|| ndims.get(&f.name).copied()),
                        }
                    }
                    None => {
                        return Err(format!(
                            "the struct `{}` whose field `{}` is an array of `{}`, a dtype warp-launch has no `Element` type for",
                            st.key(),
                            f.name,
                            dtype.name
                        ));
                    }
                },
                ParamKind::Struct(inner) => match self.add(inner, lines, python, types) {
                    Ok(i) => {
                        holds_arrays |= self.list[i].holds_arrays;
                        FieldTy::Struct(i)
                    }
                    Err(why) => {
                        return Err(format!(
                            "the struct `{}` whose field `{}` is {why}",
                            st.key(),
                            f.name
                        ));
                    }
                },
            };
            real.push((f, ty));
        }
        for (f, ty) in real {
            pad(&mut fields, &mut names, at, f.offset);
            fields.push(Field {
                name: f.name.clone(),
                ident: ident(&f.name, &mut field_names),
                ty,
                offset: f.offset,
            });
            at = f.offset + f.kind.size();
        }
        pad(&mut fields, &mut names, at, st.size);
        let ident = type_ident(st.key(), "Struct", types);
        self.list.push(StructModel {
            ty: st.clone(),
            ident,
            cu_line: lines.get(st.name.as_str()).copied(),
            fields,
            holds_arrays,
        });
        Ok(self.list.len() - 1)
    }
}

/// The dimensions of the array fields of the Python class `key` (a
/// `@wp.struct`), read from its annotations in the one file that defines
/// it (`data: wp.array2d(dtype=float)`); fields it cannot read stay unknown.
fn struct_ndims(files: &[PythonFile], key: &str) -> BTreeMap<String, u8> {
    let mut found = Vec::new();
    for f in files {
        let lines: Vec<&str> = f.text.lines().collect();
        for (n, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            let Some(rest) = t.strip_prefix("class ") else {
                continue;
            };
            let name_end = rest.find([':', '(']).unwrap_or(rest.len());
            if rest[..name_end].trim() != key {
                continue;
            }
            let indent = l.len() - t.len();
            let mut fields = Vec::new();
            for body in &lines[n + 1..] {
                let b = body.trim_start();
                if b.is_empty() || b.starts_with('#') {
                    continue;
                }
                if body.len() - b.len() <= indent {
                    break;
                }
                // `name: annotation` (docstrings and methods have no
                // such colon before a parenthesis or quote).
                if let Some((name, ann)) = b.split_once(':')
                    && !name.is_empty()
                    && name
                        .trim()
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    let ann = ann.split('#').next().unwrap_or("").trim();
                    fields.push(format!("{}: {ann}", name.trim()));
                }
            }
            found.push(fields);
        }
    }
    match found.as_slice() {
        [fields] => ndim_hints(&format!("// def {key}({}):", fields.join(", ")), key),
        _ => BTreeMap::new(),
    }
}

/// Markdown-safe prose: brackets, angle brackets and asterisks outside
/// code spans are escaped (rustdoc would read them as links, HTML or
/// emphasis).
pub(super) fn prose(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut code = false;
    for c in s.chars() {
        if c == '`' {
            code = !code;
        } else if !code && matches!(c, '[' | ']' | '<' | '>' | '*') {
            out.push('\\');
        }
        out.push(c);
    }
    if code {
        out.push('`');
    }
    out
}

/// What a kernel does to a parameter, for docs.
pub(super) fn describe_effect(e: &Effect, cu_file: &str) -> String {
    let mut s = String::new();
    let _ = match e {
        Effect::Writes(b, l) => write!(s, "**written** (`{b}`, `{cu_file}:{l}`)"),
        Effect::Accumulates(b, l) => write!(s, "**accumulated into** (`{b}`, `{cu_file}:{l}`)"),
        Effect::MayWrite(b, l) => {
            write!(s, "passed to `{b}` (`{cu_file}:{l}`), which may write it")
        }
    };
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_avoid_keywords_and_clashes() {
        let mut taken: HashSet<String> = ["dim", "stream"].map(String::from).into_iter().collect();
        assert_eq!(ident("x", &mut taken).to_string(), "x");
        assert_eq!(ident("type", &mut taken).to_string(), "r#type");
        assert_eq!(ident("gen", &mut taken).to_string(), "r#gen");
        assert_eq!(ident("self", &mut taken).to_string(), "self_");
        assert_eq!(ident("dim", &mut taken).to_string(), "dim_");
        assert_eq!(ident("dim", &mut taken).to_string(), "dim__");
        assert_eq!(ident("X", &mut taken).to_string(), "x_");
        assert_eq!(ident("dX", &mut taken).to_string(), "d_x");
        assert_eq!(ident("A", &mut taken).to_string(), "a");
        let mut types = HashSet::default();
        assert_eq!(
            type_ident("saxpy", "Kernel", &mut types).to_string(),
            "Saxpy"
        );
        assert_eq!(
            type_ident("add2d", "Kernel", &mut types).to_string(),
            "Add2d"
        );
        assert_eq!(
            type_ident("saxpy", "Struct", &mut types).to_string(),
            "SaxpyStruct"
        );
        assert_eq!(
            type_ident("_saxpy", "Struct", &mut types).to_string(),
            "SaxpyStruct2"
        );
        assert_eq!(
            type_ident("overloaded_9e921ea2", "Kernel", &mut types).to_string(),
            "Overloaded9e921ea2"
        );
    }

    #[test]
    fn multi_line_python_signatures_are_joined() {
        let py = include_str!("../../../tests/warp/kernels.py");
        let def = python_def_at(py, 28, "add2d").unwrap();
        assert_eq!(
            def,
            "def add2d(a: wp.array2d(dtype=wp.float32), b: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):"
        );
        assert!(python_def_at(py, 27, "add2d").is_none());
        let files = [PythonFile {
            shown: "kernels.py".into(),
            text: py.into(),
        }];
        assert_eq!(find_def(&files, "add2d", Some(28)), Some((0, 28)));
        // A wrong hint (Warp writes `<L 1>` for generic kernels): the one def.
        assert_eq!(find_def(&files, "add2d", Some(1)), Some((0, 28)));
        assert_eq!(find_def(&files, "nothing", None), None);
    }

    #[test]
    fn every_dtype_constant_is_its_upper_case_name() {
        let table = include_str!("../../../warp-proof/src/abi/generated/dtypes.rs");
        for d in crate::DTYPES.iter() {
            let c = format!("pub const {}: &'static DType", dtype_const(d));
            assert!(table.contains(&c), "{c}");
        }
    }

    #[test]
    fn prose_escapes_markdown_outside_code() {
        assert_eq!(prose("x[i] and `x[i]`"), "x\\[i\\] and `x[i]`");
        assert_eq!(prose("a<b>"), "a\\<b\\>");
    }
}
