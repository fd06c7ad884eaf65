//! The grammar's parser: a recursive descent over the tokens of
//! [`super::lex`], with a scope for every block, that either derives a
//! kernel's access rules or stops at the first construct outside the
//! grammar (its line and what it is).

use std::collections::BTreeMap;

use super::lex::{Kind, Token, int_value};
use super::vocabulary::{
    ATOMICS, BUILTIN_VARS, CALLS, HEADER_NAMES, INDEX_CASTS, INT_WORDS, KEYWORDS, SCALAR_WORDS,
    reserved,
};
use super::{Weaken, dtype_of};
use crate::abi::{DType, Kind as DKind};
use crate::signature::{AccessTarget, ArrayAccess, AxisIndex};

/// The first construct outside the grammar: its line, what it is, and the
/// array parameter it concerns (empty when none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub line: usize,
    pub why: String,
    pub param: String,
}

type Parsed<T> = Result<T, Refusal>;

/// One parameter as the grammar reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ParamType {
    /// `wl::launch_bounds_t<N>`.
    Bounds(usize),
    /// `wl::array_t<T>`.
    Array(&'static DType),
    /// A scalar, vector or matrix by value.
    Value(&'static DType),
}

/// A parameter: its name, line, type, and whether it is `const`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HeadParam {
    pub name: String,
    pub line: usize,
    pub ty: ParamType,
    pub constant: bool,
}

/// One kernel as the grammar reads it: its head, and its rules or the
/// first construct outside the grammar.
#[derive(Clone, Debug)]
pub(crate) struct KernelRead {
    pub name: String,
    pub params: Vec<HeadParam>,
    pub lean: bool,
    pub body: Result<Vec<ArrayAccess>, Refusal>,
    pub ndims: BTreeMap<String, u8>,
}

/// The kernels of a text, and the first top-level construct outside the
/// grammar (every kernel is then unproven).
pub(crate) fn parse(tokens: &[Token], weaken: Weaken) -> (Vec<KernelRead>, Option<Refusal>) {
    let close = match_brackets(tokens);
    let mut kernels: Vec<KernelRead> = Vec::new();
    let mut pos = 0;
    let mut included = false;
    while pos < tokens.len() {
        let t = &tokens[pos];
        if t.kind == Kind::Directive {
            if t.text.starts_with("#include") {
                included = true;
            } else if t.text != "#pragma once" {
                return (
                    kernels,
                    Some(refusal(t.line, format!("`{}` outside a body", t.text))),
                );
            }
            pos += 1;
            continue;
        }
        if !included {
            return (
                kernels,
                Some(refusal(
                    t.line,
                    "a kernel before `#include \"warp_launch.h\"`".into(),
                )),
            );
        }
        let mut p = Parser {
            toks: tokens,
            pos,
            weaken,
            scopes: Vec::new(),
            rules: Vec::new(),
            ndims: BTreeMap::new(),
            bounds: String::new(),
            ndim: 1,
            lean: false,
            kernel_names: kernels.iter().map(|k| k.name.clone()).collect(),
        };
        let head = match p.head() {
            Ok(h) => h,
            Err(r) => return (kernels, Some(r)),
        };
        let open = p.pos;
        let Some(&end) = close.get(open).filter(|&&e| e != usize::MAX) else {
            return (
                kernels,
                Some(refusal(tokens[open].line, "an unclosed `{`".into())),
            );
        };
        let body = p.body().and_then(|()| {
            if p.pos == end + 1 {
                Ok(std::mem::take(&mut p.rules))
            } else {
                Err(refusal(
                    tokens[open].line,
                    "the body's braces do not match".into(),
                ))
            }
        });
        kernels.push(KernelRead {
            name: head.name,
            params: head.params,
            lean: p.lean,
            body,
            ndims: std::mem::take(&mut p.ndims),
        });
        pos = end + 1;
    }
    (kernels, None)
}

fn refusal(line: usize, why: String) -> Refusal {
    Refusal {
        line,
        why,
        param: String::new(),
    }
}

/// For every bracket token, the index of its partner (`usize::MAX` when
/// unmatched).
fn match_brackets(toks: &[Token]) -> Vec<usize> {
    let mut close = vec![usize::MAX; toks.len()];
    let mut stack: Vec<usize> = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text.as_str() {
            "(" | "[" | "{" => stack.push(i),
            ")" | "]" | "}" => {
                let want = match t.text.as_str() {
                    ")" => "(",
                    "]" => "[",
                    _ => "{",
                };
                if let Some(&o) = stack.last()
                    && toks[o].text == want
                {
                    stack.pop();
                    close[o] = i;
                    close[i] = o;
                }
            }
            _ => {}
        }
    }
    close
}

/// What a name in scope holds.
#[derive(Clone, Copy, Debug)]
enum Sym {
    /// The launch bounds parameter.
    Bounds,
    /// An array parameter.
    Array(&'static DType),
    /// A by-value parameter or a local: its dtype when it has one (`auto`
    /// has none), whether it may be assigned, whether it is `__shared__`.
    Var {
        dtype: Option<&'static DType>,
        mutable: bool,
        shared: bool,
    },
    /// The work-item index of the header's loop or the lean head.
    WorkItem,
    /// The coordinates of `wl::coord`.
    Coord,
}

/// What an expression is, as far as the grammar cares: where it starts and
/// whether it may be assigned.
#[derive(Clone, Copy, Debug)]
struct Operand {
    start: usize,
    assignable: bool,
}

struct Head {
    name: String,
    params: Vec<HeadParam>,
}

struct Parser<'t> {
    toks: &'t [Token],
    pos: usize,
    weaken: Weaken,
    scopes: Vec<Vec<(String, Sym)>>,
    rules: Vec<ArrayAccess>,
    ndims: BTreeMap<String, u8>,
    bounds: String,
    ndim: usize,
    lean: bool,
    kernel_names: Vec<String>,
}

const ASSIGN_OPS: &[&str] = &[
    "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=",
];

/// Binary operators by precedence, loosest first.
const BINARY: &[&[&str]] = &[
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", ">", "<=", ">="],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/", "%"],
];

impl<'t> Parser<'t> {
    // ---- tokens ----

    fn text(&self, k: usize) -> &'t str {
        self.toks.get(self.pos + k).map_or("", |t| t.text.as_str())
    }

    fn kind(&self, k: usize) -> Option<Kind> {
        self.toks.get(self.pos + k).map(|t| t.kind)
    }

    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(1, |t| t.line)
    }

    fn is(&self, s: &str) -> bool {
        self.text(0) == s && self.kind(0) != Some(Kind::Str)
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.is(s) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn fail<T>(&self, why: impl Into<String>) -> Parsed<T> {
        Err(refusal(self.line(), why.into()))
    }

    /// `what` was expected here.
    fn expected<T>(&self, what: &str) -> Parsed<T> {
        let here = match self.toks.get(self.pos) {
            Some(t) => format!("`{}`", t.text),
            None => "the end of the text".to_string(),
        };
        self.fail(format!("{here} where the grammar has {what}"))
    }

    fn expect(&mut self, s: &str) -> Parsed<()> {
        if self.eat(s) {
            Ok(())
        } else {
            self.expected(&format!("`{s}`"))
        }
    }

    fn name(&mut self) -> Parsed<(String, usize)> {
        match self.toks.get(self.pos) {
            Some(t) if t.kind == Kind::Word && !KEYWORDS.contains(&t.text.as_str()) => {
                self.pos += 1;
                Ok((t.text.clone(), t.line))
            }
            _ => self.expected("a name"),
        }
    }

    fn int(&mut self) -> Parsed<i64> {
        match self.toks.get(self.pos) {
            Some(t) if t.kind == Kind::Number => match int_value(&t.text) {
                Some(v) => {
                    self.pos += 1;
                    Ok(v)
                }
                None => self.expected("an integer"),
            },
            _ => self.expected("an integer"),
        }
    }

    /// The tokens from `start` to here, spelled.
    fn spell(&self, start: usize) -> String {
        spell(&self.toks[start..self.pos.min(self.toks.len()).max(start)])
    }

    // ---- names ----

    fn lookup(&self, name: &str) -> Option<Sym> {
        self.scopes
            .iter()
            .rev()
            .find_map(|s| s.iter().rev().find(|(n, _)| n == name).map(|(_, s)| *s))
    }

    /// Defines `name` in the innermost scope; refuses a name that hides or
    /// repeats any other.
    fn define(&mut self, name: &str, line: usize, sym: Sym) -> Parsed<()> {
        let clash = if self.lookup(name).is_some() {
            Some("a name already in scope")
        } else if BUILTIN_VARS.contains(&name) {
            Some("a CUDA built-in variable")
        } else if HEADER_NAMES.contains(&name) || reserved(name) {
            Some("a name of the header or the implementation")
        } else if CALLS.contains(&name) || ATOMICS.contains(&name) {
            Some("a built-in function")
        } else if INT_WORDS.contains(&name)
            || SCALAR_WORDS.contains(&name)
            || KEYWORDS.contains(&name)
            || INDEX_CASTS.contains(&name)
        {
            Some("a type or a keyword")
        } else if self.kernel_names.iter().any(|k| k == name) {
            Some("a kernel")
        } else {
            None
        };
        if let Some(what) = clash {
            return Err(refusal(
                line,
                format!("`{name}` is defined again: it is {what}, and no name may hide another"),
            ));
        }
        self.scopes
            .last_mut()
            .expect("a scope is open")
            .push((name.to_string(), sym));
        Ok(())
    }

    // ---- types ----

    /// A scalar, vector or matrix type at the cursor: its dtype (`None` for
    /// a C scalar with no Warp dtype, e.g. `long`), or `None` when no type
    /// starts here (the cursor does not move).
    fn value_type(&mut self) -> Parsed<Option<Option<&'static DType>>> {
        if self.is("wl") && self.text(1) == "::" {
            let name = self.text(2);
            if name == "array_t" || name == "launch_bounds_t" || name == "coord_t" {
                return Ok(None);
            }
            let Some(d) = dtype_of(&format!("wl::{name}")) else {
                return Ok(None);
            };
            self.pos += 3;
            return Ok(Some(Some(d)));
        }
        if SCALAR_WORDS.contains(&self.text(0)) && self.kind(0) == Some(Kind::Word) {
            let w = self.text(0);
            self.pos += 1;
            return Ok(Some(dtype_of(w)));
        }
        let start = self.pos;
        while INT_WORDS.contains(&self.text(0)) && self.kind(0) == Some(Kind::Word) {
            self.pos += 1;
        }
        if self.pos == start {
            return Ok(None);
        }
        let spelled = self.toks[start..self.pos]
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        if !c_integer(&spelled) {
            self.pos = start;
            return self.fail(format!("the type `{spelled}`"));
        }
        Ok(Some(dtype_of(&spelled)))
    }

    // ---- the head ----

    fn head(&mut self) -> Parsed<Head> {
        if !(self.eat("extern") && self.kind(0) == Some(Kind::Str) && self.text(0) == "\"C\"") {
            return self.fail(format!(
                "`{}` at top level: only `extern \"C\" __global__ void` kernels, `#include \"warp_launch.h\"` and `#pragma once` are read (helper functions, globals and templates are not)",
                self.text(0)
            ));
        }
        self.pos += 1;
        let (mut global, mut void) = (false, false);
        loop {
            if !global && self.eat("__global__") {
                global = true;
            } else if !void && self.eat("void") {
                void = true;
            } else if self.eat("__launch_bounds__") {
                self.launch_bounds()?;
            } else {
                break;
            }
        }
        if !global || !void {
            return self.expected("`__global__ void` (a kernel)");
        }
        let (name, line) = self.name()?;
        if CALLS.contains(&name.as_str())
            || ATOMICS.contains(&name.as_str())
            || BUILTIN_VARS.contains(&name.as_str())
            || HEADER_NAMES.contains(&name.as_str())
            || reserved(&name)
            || self.kernel_names.contains(&name)
        {
            return Err(refusal(
                line,
                format!(
                    "the kernel name `{name}` is a built-in, a header name or another kernel's"
                ),
            ));
        }
        self.expect("(")?;
        self.scopes.push(Vec::new());
        let mut params = Vec::new();
        loop {
            params.push(self.param(params.is_empty())?);
            if self.eat(")") {
                break;
            }
            self.expect(",")?;
        }
        if !self.is("{") {
            return self.expected("the kernel's body `{`");
        }
        Ok(Head { name, params })
    }

    /// `(INT [, INT [, INT]])` after `__launch_bounds__`.
    fn launch_bounds(&mut self) -> Parsed<()> {
        self.expect("(")?;
        for n in 0..3 {
            if self.int()? < 0 {
                return self.fail("a negative `__launch_bounds__` value");
            }
            if n == 2 || !self.eat(",") {
                break;
            }
        }
        self.expect(")")
    }

    /// One parameter; the first must be the launch bounds.
    fn param(&mut self, first: bool) -> Parsed<HeadParam> {
        let line = self.line();
        let constant = self.eat("const");
        let ty = if self.is("wl")
            && self.text(1) == "::"
            && (self.text(2) == "launch_bounds_t" || self.text(2) == "array_t")
        {
            let bounds = self.text(2) == "launch_bounds_t";
            self.pos += 3;
            self.expect("<")?;
            let ty = if bounds {
                let n = self.int()?;
                if !(1..=4).contains(&n) {
                    return self.fail(format!("`wl::launch_bounds_t<{n}>` (N is 1 to 4)"));
                }
                ParamType::Bounds(n as usize)
            } else {
                match self.value_type()? {
                    Some(Some(d)) => ParamType::Array(d),
                    _ => return self.expected("an element type (a Warp scalar, vector or matrix)"),
                }
            };
            self.expect(">")?;
            ty
        } else {
            match self.value_type()? {
                Some(Some(d)) => ParamType::Value(d),
                _ => {
                    return self.expected(
                        "a parameter type (`wl::array_t<T>`, a Warp scalar, vector or matrix)",
                    );
                }
            }
        };
        let (name, name_line) = self.name()?;
        if first != matches!(ty, ParamType::Bounds(_)) {
            return Err(refusal(
                name_line,
                "the launch bounds `wl::launch_bounds_t<N>` come first, and only first".into(),
            ));
        }
        let sym = match ty {
            ParamType::Bounds(n) => {
                self.bounds = name.clone();
                self.ndim = n;
                Sym::Bounds
            }
            ParamType::Array(d) => Sym::Array(d),
            ParamType::Value(d) => Sym::Var {
                dtype: Some(d),
                mutable: !constant,
                shared: false,
            },
        };
        self.define(&name, name_line, sym)?;
        Ok(HeadParam {
            name,
            line,
            ty,
            constant,
        })
    }

    // ---- statements ----

    /// The kernel's body: an optional lean head, then statements.
    fn body(&mut self) -> Parsed<()> {
        self.expect("{")?;
        self.scopes.push(Vec::new());
        if self.lean_head()? {
            self.lean = true;
        }
        while !self.is("}") {
            if self.pos >= self.toks.len() {
                return self.expected("`}`");
            }
            self.statement()?;
        }
        self.pos += 1;
        self.scopes.pop();
        Ok(())
    }

    /// `[const] size_t W = wl::lean_index(); if (W >= DIM.size) return;`
    /// as the body's first statement.
    fn lean_head(&mut self) -> Parsed<bool> {
        let c = usize::from(self.is("const"));
        if !(self.text(c) == "size_t"
            && self.text(c + 2) == "="
            && self.text(c + 3) == "wl"
            && self.text(c + 5) == "lean_index")
        {
            return Ok(false);
        }
        self.pos += c + 1;
        let (w, line) = self.name()?;
        for s in ["=", "wl", "::", "lean_index", "(", ")", ";", "if", "("] {
            self.expect(s)?;
        }
        let ok = self.text(0) == w
            && self.text(1) == ">="
            && self.text(2) == self.bounds
            && self.text(3) == "."
            && self.text(4) == "size"
            && self.text(5) == ")"
            && self.text(6) == "return"
            && self.text(7) == ";";
        if !ok {
            return self.fail(format!(
                "`wl::lean_index()` must be followed by `if ({w} >= {}.size) return;`",
                self.bounds
            ));
        }
        self.pos += 8;
        self.define(&w, line, Sym::WorkItem)?;
        Ok(true)
    }

    fn block(&mut self) -> Parsed<()> {
        self.expect("{")?;
        self.scopes.push(Vec::new());
        while !self.is("}") {
            if self.pos >= self.toks.len() {
                return self.expected("`}`");
            }
            self.statement()?;
        }
        self.pos += 1;
        self.scopes.pop();
        Ok(())
    }

    /// A statement in a scope of its own (the body of `if`, a loop).
    fn scoped_statement(&mut self) -> Parsed<()> {
        self.scopes.push(Vec::new());
        let r = self.statement();
        self.scopes.pop();
        r
    }

    fn statement(&mut self) -> Parsed<()> {
        if self.kind(0) == Some(Kind::Directive) {
            let t = &self.toks[self.pos];
            if !t.text.starts_with("#pragma unroll") {
                return self.fail(format!("`{}` inside a body", t.text));
            }
            self.pos += 1;
            if !self.is("for") {
                return self.expected("a `for` loop after `#pragma unroll`");
            }
            return self.statement();
        }
        match self.text(0) {
            "{" => self.block(),
            ";" => {
                self.pos += 1;
                Ok(())
            }
            "if" => {
                self.pos += 1;
                self.expect("(")?;
                self.expression()?;
                self.expect(")")?;
                self.scoped_statement()?;
                if self.eat("else") {
                    self.scoped_statement()?;
                }
                Ok(())
            }
            "while" => {
                self.pos += 1;
                self.expect("(")?;
                self.expression()?;
                self.expect(")")?;
                self.scoped_statement()
            }
            "do" => {
                self.pos += 1;
                self.scoped_statement()?;
                self.expect("while")?;
                self.expect("(")?;
                self.expression()?;
                self.expect(")")?;
                self.expect(";")
            }
            "for" => self.for_loop(),
            "break" | "continue" | "return" => {
                self.pos += 1;
                self.expect(";")
            }
            "WL_GRID_STRIDE_LOOP" => self.grid_stride_loop(),
            "switch" | "case" | "default" | "goto" => self.fail(format!(
                "`{}`: no `switch`, `case`, `goto` or labels (a jump could enter a loop past its index)",
                self.text(0)
            )),
            _ => {
                if self.declaration_starts() {
                    self.declaration()?;
                } else {
                    self.expression()?;
                }
                self.expect(";")
            }
        }
    }

    fn for_loop(&mut self) -> Parsed<()> {
        self.pos += 1;
        self.expect("(")?;
        self.scopes.push(Vec::new());
        if !self.is(";") {
            if self.declaration_starts() {
                self.declaration()?;
            } else {
                self.expression()?;
            }
        }
        self.expect(";")?;
        if !self.is(";") {
            self.expression()?;
        }
        self.expect(";")?;
        if !self.is(")") {
            self.expression()?;
        }
        self.expect(")")?;
        self.scoped_statement()?;
        self.scopes.pop();
        Ok(())
    }

    /// `WL_GRID_STRIDE_LOOP(W, DIM) statement`.
    fn grid_stride_loop(&mut self) -> Parsed<()> {
        self.pos += 1;
        self.expect("(")?;
        let (w, line) = self.name()?;
        self.expect(",")?;
        if !(self.text(0) == self.bounds && self.text(1) == ")") {
            return self.fail(format!(
                "`WL_GRID_STRIDE_LOOP` over something other than the launch bounds `{}`",
                self.bounds
            ));
        }
        self.pos += 2;
        self.scopes.push(Vec::new());
        self.define(&w, line, Sym::WorkItem)?;
        let r = self.scoped_statement();
        self.scopes.pop();
        r
    }

    fn declaration_starts(&self) -> bool {
        let t = self.text(0);
        matches!(t, "const" | "__shared__" | "auto")
            || (self.kind(0) == Some(Kind::Word)
                && (INT_WORDS.contains(&t) || SCALAR_WORDS.contains(&t)))
            || (t == "wl" && self.text(1) == "::" && {
                let n = self.text(2);
                n == "coord_t"
                    || n == "array_t"
                    || n == "launch_bounds_t"
                    || dtype_of(&format!("wl::{n}")).is_some()
            })
    }

    /// `[__shared__] [const] T NAME [= expr]`, or the coordinate
    /// definition `[const] wl::coord_t C = wl::coord(W, DIM)`.
    fn declaration(&mut self) -> Parsed<()> {
        let start = self.pos;
        let shared = self.eat("__shared__");
        let constant = self.eat("const");
        if self.is("wl") && self.text(1) == "::" && self.text(2) == "coord_t" {
            if shared {
                return self.fail("a `__shared__` coordinate");
            }
            self.pos += 3;
            let (c, line) = self.name()?;
            for s in ["=", "wl", "::", "coord", "("] {
                self.expect(s)?;
            }
            let w = self.text(0);
            let ok = matches!(self.lookup(w), Some(Sym::WorkItem))
                && self.text(1) == ","
                && self.text(2) == self.bounds
                && self.text(3) == ")";
            if !ok {
                return self.fail(format!(
                    "`wl::coord` of something other than a work-item index and the launch bounds `{}`",
                    self.bounds
                ));
            }
            self.pos += 4;
            return self.define(&c, line, Sym::Coord);
        }
        let dtype = if self.eat("auto") {
            if shared {
                return self.fail("a `__shared__ auto` variable");
            }
            None
        } else {
            match self.value_type()? {
                Some(d) => d,
                None => {
                    let ty = if self.is("wl") {
                        format!("wl::{}", self.text(2))
                    } else {
                        self.text(0).to_string()
                    };
                    return self.fail(format!(
                        "the type `{ty}` of a local: a local is a scalar, vector or matrix (no arrays, pointers, references, structs)"
                    ));
                }
            }
        };
        let (name, line) = match self.name() {
            Ok(n) => n,
            Err(_) => {
                let what = self.text(0);
                return self.fail(format!(
                    "`{what}` after the type `{}`: a declaration names one variable (no pointers, references or parenthesised declarators)",
                    self.spell(start)
                ));
            }
        };
        if self.eat("=") {
            if shared {
                return self.fail(format!(
                    "the `__shared__` variable `{name}` has an initialiser"
                ));
            }
            self.assignment()?;
        } else if constant {
            return self.fail(format!("the constant `{name}` has no initialiser"));
        }
        if !self.is(";") {
            return self.fail(format!(
                "`{}` after the declaration of `{name}`: one declarator each, `=` to initialise (no `,` lists, brace initialisers, arrays or functions)",
                self.text(0)
            ));
        }
        self.define(
            &name,
            line,
            Sym::Var {
                dtype,
                mutable: !constant,
                shared,
            },
        )
    }

    // ---- expressions ----

    /// An expression without the comma operator.
    fn expression(&mut self) -> Parsed<Operand> {
        let e = self.assignment()?;
        if self.is(",") {
            return self.fail("the comma operator");
        }
        Ok(e)
    }

    fn assignment(&mut self) -> Parsed<Operand> {
        let lhs = self.conditional()?;
        if ASSIGN_OPS.contains(&self.text(0)) && self.kind(0) == Some(Kind::Punct) {
            if !lhs.assignable {
                return self.fail(format!(
                    "the assignment to `{}`: only a mutable local, a by-value parameter, `wl::index(...)` and their constant components are assigned",
                    self.spell(lhs.start)
                ));
            }
            self.pos += 1;
            self.assignment()?;
            return Ok(Operand {
                start: lhs.start,
                assignable: false,
            });
        }
        Ok(lhs)
    }

    fn conditional(&mut self) -> Parsed<Operand> {
        let c = self.binary(0)?;
        if self.eat("?") {
            self.expression()?;
            self.expect(":")?;
            self.assignment()?;
            return Ok(value(c.start));
        }
        Ok(c)
    }

    fn binary(&mut self, level: usize) -> Parsed<Operand> {
        if level == BINARY.len() {
            return self.unary();
        }
        let lhs = self.binary(level + 1)?;
        let mut any = false;
        while self.kind(0) == Some(Kind::Punct) && BINARY[level].contains(&self.text(0)) {
            self.pos += 1;
            self.binary(level + 1)?;
            any = true;
        }
        Ok(if any { value(lhs.start) } else { lhs })
    }

    fn unary(&mut self) -> Parsed<Operand> {
        let start = self.pos;
        match self.text(0) {
            "-" | "+" | "!" | "~" if self.kind(0) == Some(Kind::Punct) => {
                self.pos += 1;
                self.unary()?;
                Ok(value(start))
            }
            "++" | "--" => {
                self.pos += 1;
                let e = self.unary()?;
                if !e.assignable {
                    return self.fail(format!(
                        "`{}`: only a mutable local, a by-value parameter and `wl::index(...)` are incremented",
                        self.spell(start)
                    ));
                }
                Ok(value(start))
            }
            "*" | "&" => self.fail(format!(
                "a unary `{}` (a pointer or a reference)",
                self.text(0)
            )),
            "(" if self.cast_follows() => {
                self.pos += 1;
                self.value_type()?;
                self.expect(")")?;
                self.unary()?;
                Ok(value(start))
            }
            "sizeof" => {
                self.pos += 1;
                self.expect("(")?;
                let before = self.pos;
                if self.value_type()?.is_none() {
                    self.pos = before;
                    self.expression()?;
                }
                self.expect(")")?;
                Ok(value(start))
            }
            _ => self.postfix(),
        }
    }

    /// Whether `(` at the cursor opens a C-style cast to a scalar type:
    /// type words and then `)` (`(float(n) + x)` is a parenthesised
    /// expression that starts with a functional cast).
    fn cast_follows(&self) -> bool {
        let word = |k: usize| self.kind(k) == Some(Kind::Word);
        if word(1) && SCALAR_WORDS.contains(&self.text(1)) {
            return self.text(2) == ")";
        }
        let mut k = 1;
        while word(k) && INT_WORDS.contains(&self.text(k)) {
            k += 1;
        }
        k > 1 && self.text(k) == ")"
    }

    /// A primary and what may follow it: `++`/`--` on an lvalue. A call,
    /// subscript or member after it is outside the grammar.
    fn postfix(&mut self) -> Parsed<Operand> {
        let e = self.primary()?;
        let what = self.spell(e.start);
        match self.text(0) {
            "++" | "--" if !e.assignable => self.fail(format!(
                "`{what}{}`: only a mutable local, a by-value parameter and `wl::index(...)` are incremented",
                self.text(0)
            )),
            "++" | "--" => {
                self.pos += 1;
                Ok(value(e.start))
            }
            "(" => self.fail(format!(
                "a call of `{what}`: only `NAME(...)` of the listed built-ins is a call"
            )),
            "[" => self.fail(format!(
                "a subscript of `{what}`: only `wl::index` reaches an array, and only constant components (`.c[K]`, `.data[R][C]`) are subscripted"
            )),
            "." | "->" | ".*" | "->*" => self.fail(format!(
                "the member `{what}{}{}`",
                self.text(0),
                self.text(1)
            )),
            _ => Ok(e),
        }
    }

    fn primary(&mut self) -> Parsed<Operand> {
        let start = self.pos;
        let Some(t) = self.toks.get(self.pos) else {
            return self.expected("an expression");
        };
        match t.kind {
            Kind::Number => {
                self.pos += 1;
                return Ok(value(start));
            }
            Kind::Str => return self.fail(format!("the string {} (a pointer)", t.text)),
            Kind::Directive => return self.fail(format!("`{}` inside an expression", t.text)),
            Kind::Punct => {
                if self.eat("(") {
                    self.expression()?;
                    self.expect(")")?;
                    // A parenthesised expression is a value: `(x) = 1` is
                    // outside the grammar.
                    return Ok(value(start));
                }
                return self.expected("an expression");
            }
            Kind::Word => {}
        }
        let w = t.text.as_str();
        match w {
            "true" | "false" => {
                self.pos += 1;
                return Ok(value(start));
            }
            "wl" if self.text(1) == "::" => {
                let what = self.text(2);
                if what == "index" && self.text(3) == "(" {
                    self.pos += 3;
                    let dtype = self.access()?;
                    self.components(Some(dtype))?;
                    return Ok(Operand {
                        start,
                        assignable: true,
                    });
                }
                return self.fail(format!(
                    "`wl::{what}` here: a body uses `wl::index(a, ...)`, `wl::address(a, ...)` as an atomic's first argument, `wl::coord` and `wl::lean_index` in their statements, and the header's types"
                ));
            }
            "threadIdx" | "blockIdx" | "blockDim" | "gridDim" => {
                self.pos += 1;
                self.expect(".")?;
                if !matches!(self.text(0), "x" | "y" | "z") {
                    return self.expected(&format!("`x`, `y` or `z` of `{w}`"));
                }
                self.pos += 1;
                return Ok(value(start));
            }
            "warpSize" => {
                self.pos += 1;
                return Ok(value(start));
            }
            _ => {}
        }
        if CALLS.contains(&w) && self.text(1) == "(" {
            self.pos += 2;
            if !self.eat(")") {
                loop {
                    self.assignment()?;
                    if self.eat(")") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            return Ok(value(start));
        }
        if ATOMICS.contains(&w) && self.text(1) == "(" {
            self.pos += 2;
            self.atomic_target(w)?;
            while self.eat(",") {
                self.assignment()?;
            }
            self.expect(")")?;
            return Ok(value(start));
        }
        if (INT_WORDS.contains(&w) || SCALAR_WORDS.contains(&w)) && self.text(1) == "(" {
            self.pos += 2;
            self.assignment()?;
            self.expect(")")?;
            return Ok(value(start));
        }
        self.named(start, w)
    }

    /// A name at the cursor that is not a built-in: a parameter or a local
    /// in scope, read as its kind allows.
    fn named(&mut self, start: usize, w: &'t str) -> Parsed<Operand> {
        let Some(sym) = self.lookup(w) else {
            let why = if CALLS.contains(&w) || ATOMICS.contains(&w) {
                format!(
                    "`{w}` not followed by `(`: a built-in function is called only as `{w}(...)`"
                )
            } else if KEYWORDS.contains(&w) {
                format!("`{w}`: outside the grammar")
            } else if self.text(1) == "(" {
                format!(
                    "a call of `{w}`: only the arithmetic, shuffle, barrier and atomic built-ins, casts and `wl::index`/`wl::address` are calls of the grammar"
                )
            } else {
                format!("`{w}` is not a name in scope (a parameter or a local declared before)")
            };
            return self.fail(why);
        };
        self.pos += 1;
        match sym {
            Sym::Var { dtype, mutable, .. } => {
                self.components(dtype)?;
                Ok(Operand {
                    start,
                    assignable: mutable,
                })
            }
            Sym::WorkItem => Ok(value(start)),
            Sym::Coord => {
                self.expect(".")?;
                if !matches!(self.text(0), "i" | "j" | "k" | "l") {
                    return self.expected(&format!("a coordinate `{w}.i`, `.j`, `.k` or `.l`"));
                }
                self.pos += 1;
                Ok(Operand {
                    start,
                    assignable: self.weaken == Weaken::CoordinateWrites,
                })
            }
            Sym::Bounds => {
                self.expect(".")?;
                if self.eat("size") {
                    return Ok(value(start));
                }
                if self.eat("shape") {
                    self.expect("[")?;
                    let k = self.int()?;
                    if !(0..self.ndim as i64).contains(&k) {
                        self.pos -= 1;
                        return self.fail(format!(
                            "`{w}.shape[{k}]` is past the launch's {} dimension(s)",
                            self.ndim
                        ));
                    }
                    self.expect("]")?;
                    return Ok(value(start));
                }
                self.expected(&format!("`{w}.size` or `{w}.shape[K]`"))
            }
            Sym::Array(_) => Err(Refusal {
                line: self.toks[start].line,
                why: format!(
                    "the array `{w}` used other than as the first argument of `wl::index` or `wl::address`"
                ),
                param: w.to_string(),
            }),
        }
    }

    /// Constant components after a value of `dtype`: `.c[K]` of a vector,
    /// `.data[R][C]` of a matrix, each below its extent. The dtype left
    /// (`None` once a component is taken).
    fn components(&mut self, dtype: Option<&'static DType>) -> Parsed<Option<&'static DType>> {
        let Some(d) = dtype else { return Ok(None) };
        if !self.is(".") {
            return Ok(Some(d));
        }
        let sub = |p: &mut Self, limit: u8| -> Parsed<()> {
            p.expect("[")?;
            let k = p.int()?;
            if !(0..i64::from(limit)).contains(&k) {
                p.pos -= 1;
                return p.fail(format!(
                    "the subscript `[{k}]`: a constant component is below its extent {limit}"
                ));
            }
            p.expect("]")
        };
        match (self.text(1), d.kind) {
            ("c", DKind::Vector) => {
                self.pos += 2;
                sub(self, d.rows)?;
            }
            ("data", DKind::Matrix) => {
                self.pos += 2;
                sub(self, d.rows)?;
                sub(self, d.cols)?;
            }
            _ => {
                return self.fail(format!(
                    "the member `.{}` of a `{}`: read are `.c[K]` of a vector and `.data[R][C]` of a matrix",
                    self.text(1),
                    d.name
                ));
            }
        }
        Ok(None)
    }

    /// An atomic's first argument: `wl::address(a, ...)` (a rule) or `&s`
    /// of a `__shared__` scalar.
    fn atomic_target(&mut self, op: &str) -> Parsed<()> {
        if self.is("wl") && self.text(1) == "::" && self.text(2) == "address" && self.text(3) == "("
        {
            self.pos += 3;
            self.access()?;
            return Ok(());
        }
        if self.is("&")
            && let Some(Sym::Var {
                shared: true,
                mutable: true,
                dtype,
            }) = self.lookup(self.text(1))
            && dtype.is_none_or(|d| d.kind == DKind::Scalar)
            && self.kind(1) == Some(Kind::Word)
        {
            self.pos += 2;
            return Ok(());
        }
        self.fail(format!(
            "`{op}` on something other than `wl::address(array, ...)` or `&s` of a `__shared__` scalar"
        ))
    }

    /// `(a, i [, j [, k [, l]]])` of `wl::index` / `wl::address`: a rule
    /// for array `a`; its element dtype.
    fn access(&mut self) -> Parsed<&'static DType> {
        let line = self.line();
        self.expect("(")?;
        let a = self.text(0);
        let dtype = match (self.kind(0), self.lookup(a)) {
            (Some(Kind::Word), Some(Sym::Array(d))) if self.text(1) == "," => d,
            _ => {
                return self.fail(format!(
                    "`{a}` is not an array parameter followed by its indices"
                ));
            }
        };
        let array = a.to_string();
        self.pos += 2;
        let mut indices = Vec::new();
        loop {
            indices.push(self.index(&array)?);
            if self.eat(")") {
                break;
            }
            self.expect(",")?;
        }
        if indices.len() > 4 {
            return Err(Refusal {
                line,
                why: format!("{} indices (1 to 4 are read)", indices.len()),
                param: array,
            });
        }
        let nd = self.ndims.entry(array.clone()).or_insert(0);
        *nd = (*nd).max(indices.len() as u8);
        self.rules.push(ArrayAccess {
            param: array,
            target: AccessTarget::Param,
            indices,
            null_ok: false,
            line,
        });
        Ok(dtype)
    }

    /// One index: a coordinate, the work-item index, `blockIdx.x` or an
    /// integer constant, bare or in an `int`/`size_t`/`unsigned` cast.
    fn index(&mut self, array: &str) -> Parsed<AxisIndex> {
        let start = self.pos;
        let (casted, unsigned) =
            if self.is("(") && INDEX_CASTS.contains(&self.text(1)) && self.text(2) == ")" {
                let unsigned = self.text(1) != "int";
                self.pos += 3;
                (false, unsigned)
            } else if INDEX_CASTS.contains(&self.text(0))
                && self.kind(0) == Some(Kind::Word)
                && self.text(1) == "("
            {
                let unsigned = self.text(0) != "int";
                self.pos += 2;
                (true, unsigned)
            } else {
                (false, false)
            };
        // A negative constant in an unsigned cast changes sign twice (NVRTC
        // warns): outside the grammar.
        let index = self
            .index_atom()
            .filter(|i| !(unsigned && matches!(i, AxisIndex::Constant(c) if *c < 0)));
        let closed = !casted || self.eat(")");
        match index {
            Some(i) if closed && (self.is(",") || self.is(")")) => Ok(i),
            _ => {
                // Spell the whole argument for the message.
                let mut depth = 0i32;
                self.pos = start;
                while let Some(t) = self.toks.get(self.pos) {
                    match t.text.as_str() {
                        "(" => depth += 1,
                        ")" if depth == 0 => break,
                        ")" => depth -= 1,
                        "," if depth == 0 => break,
                        _ => {}
                    }
                    self.pos += 1;
                }
                let spelled = self.spell(start);
                Err(Refusal {
                    line: self.toks.get(start).map_or(1, |t| t.line),
                    why: format!(
                        "the index `{spelled}` of `{array}` is not a thread coordinate (`c.i` of `wl::coord`), the work-item index, `blockIdx.x` or an integer constant"
                    ),
                    param: array.to_string(),
                })
            }
        }
    }

    fn index_atom(&mut self) -> Option<AxisIndex> {
        let neg = self.is("-") && self.kind(1) == Some(Kind::Number);
        if neg || self.kind(0) == Some(Kind::Number) {
            self.pos += usize::from(neg);
            let v = int_value(self.text(0))?;
            self.pos += 1;
            // The header takes `int` indices: a constant past `i32` would
            // wrap.
            if v > i64::from(i32::MAX) {
                return None;
            }
            return Some(AxisIndex::Constant(if neg { -v } else { v }));
        }
        let w = self.text(0);
        if self.kind(0) != Some(Kind::Word) {
            return None;
        }
        if w == "blockIdx" && self.text(1) == "." && self.text(2) == "x" {
            self.pos += 3;
            return Some(AxisIndex::Block);
        }
        match self.lookup(w)? {
            Sym::WorkItem => {
                self.pos += 1;
                Some(AxisIndex::WorkItem)
            }
            Sym::Coord if self.text(1) == "." => {
                let k = ["i", "j", "k", "l"]
                    .iter()
                    .position(|f| *f == self.text(2))?;
                self.pos += 3;
                Some(if k < self.ndim {
                    AxisIndex::Thread(k)
                } else {
                    AxisIndex::Constant(0)
                })
            }
            _ => None,
        }
    }
}

/// A value: not assignable, no components.
fn value(start: usize) -> Operand {
    Operand {
        start,
        assignable: false,
    }
}

/// Whether a run of C integer words is a type C has (`unsigned long long
/// int`, `short`, `signed char`), each word at most as often as C allows.
fn c_integer(spelled: &str) -> bool {
    let words: Vec<&str> = spelled.split(' ').collect();
    let count = |w: &str| words.iter().filter(|x| **x == w).count();
    let signs = count("unsigned") + count("signed");
    let (short, long, int, char) = (count("short"), count("long"), count("int"), count("char"));
    signs <= 1
        && int <= 1
        && long <= 2
        && short <= 1
        && char <= 1
        && !(short > 0 && (long > 0 || char > 0))
        && !(char > 0 && (long > 0 || int > 0))
}

/// Tokens spelled as written compactly: a space only between two names
/// or numbers.
pub(crate) fn spell(toks: &[Token]) -> String {
    let mut s = String::new();
    let mut prev: Option<Kind> = None;
    for t in toks {
        let wordy = |k: Option<Kind>| matches!(k, Some(Kind::Word | Kind::Number));
        if wordy(prev) && wordy(Some(t.kind)) {
            s.push(' ');
        }
        s.push_str(&t.text);
        prev = Some(t.kind);
    }
    s
}
