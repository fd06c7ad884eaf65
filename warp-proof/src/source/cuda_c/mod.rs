//! Hand-written CUDA C kernels against `warp_launch.h`, proven from a
//! written-down grammar.
//!
//! A Warp-generated body is read by [`super::accesses`], which knows the
//! forms Warp writes. A hand-written body may be any C++, so this reader
//! parses a small grammar, and a kernel with anything outside it is
//! [`Accesses::Unproven`], naming `file:line` and the construct (the
//! kernel still loads; only the `unsafe` unchecked launch runs it). Inside
//! the grammar the only memory a body reaches is an array parameter
//! through `wl::index(a, ...)` or an atomic on `wl::address(a, ...)`, each
//! index a thread coordinate, the work-item index, `blockIdx.x` or an
//! integer constant, plus its own scalars, vectors and matrices; those
//! indices are the access rules every launch checks.
//!
//! Three layers, each a module:
//!
//! - [`lex`]: the tokens, refusing whatever could make a compiler see other
//!   tokens (backslashes and `??` anywhere, comments included; digraphs,
//!   `'`, string prefixes and raw strings, a byte-order mark, a lone
//!   carriage return; non-ASCII outside comments; a `#` that is not the
//!   first thing on its line, and any directive but the three below).
//! - [`parse`]: the grammar, with a scope for every block: every name
//!   resolves, and none hides another (a parameter, a local, a CUDA
//!   built-in variable, a built-in function, a header name, a kernel).
//! - [`emit`]: the tokens printed back, line for line: that text, not the
//!   user's, is what NVRTC compiles, so nothing the reader skipped (a
//!   comment) reaches the compiler.
//!
//! The grammar (EBNF; `"..."` are tokens; `NAME` a name that is not a
//! keyword; `INT` a decimal or hexadecimal integer, suffixes `u`, `l`,
//! `ll`; `DIM` the first parameter's name; `W` a work-item index and `C`
//! coordinates in scope; `A` an array parameter):
//!
//! ```text
//! file        = { directive } , include , { directive | kernel } ;
//! include     = "#include" ( "\"warp_launch.h\"" | "<warp_launch.h>" ) ;   (* alone on its line *)
//! directive   = include | "#pragma once" ;
//! kernel      = "extern" "\"C\"" { "__global__" | "void" | bounds_attr } NAME
//!               "(" bounds_param { "," param } ")" body ;           (* __global__ and void once each *)
//! bounds_attr = "__launch_bounds__" "(" INT [ "," INT [ "," INT ] ] ")" ;
//! bounds_param= [ "const" ] "wl" "::" "launch_bounds_t" "<" ( "1" | "2" | "3" | "4" ) ">" NAME ;
//! param       = [ "const" ] ( "wl" "::" "array_t" "<" value_type ">" | value_type ) NAME ;
//! value_type  = "wl" "::" WARP_TYPE | c_scalar ;   (* float32, vec3f, mat33f, ...; float, int, unsigned long long, ... *)
//! body        = "{" [ lean_head ] { statement } "}" ;
//! lean_head   = [ "const" ] "size_t" W "=" "wl" "::" "lean_index" "(" ")" ";"
//!               "if" "(" W ">=" DIM "." "size" ")" "return" ";" ;
//! statement   = "{" { statement } "}" | ";" | declaration ";" | coord_decl | expression ";"
//!             | "if" "(" expression ")" statement [ "else" statement ]
//!             | "while" "(" expression ")" statement
//!             | "do" statement "while" "(" expression ")" ";"
//!             | [ "#pragma unroll" [ INT ] ] "for" "(" [ declaration | expression ] ";"
//!               [ expression ] ";" [ expression ] ")" statement
//!             | "WL_GRID_STRIDE_LOOP" "(" W "," DIM ")" statement
//!             | ( "break" | "continue" | "return" ) ";" ;
//! coord_decl  = [ "const" ] "wl" "::" "coord_t" C "=" "wl" "::" "coord" "(" W "," DIM ")" ";" ;
//! declaration = [ "__shared__" ] [ "const" ] ( value_type | "auto" ) NAME [ "=" assignment ] ;
//!                                   (* one declarator; __shared__: a scalar, no initialiser *)
//! expression  = assignment ;                                  (* no comma operator *)
//! assignment  = lvalue ASSIGN_OP assignment | conditional ;   (* = += -= *= /= %= &= |= ^= <<= >>= *)
//! lvalue      = ( NAME | index ) { component } ;              (* NAME: a mutable local or by-value parameter *)
//! conditional = binary [ "?" expression ":" assignment ] ;
//! binary      = unary { BINARY_OP unary } ;                   (* || && | ^ & == != < > <= >= << >> + - * / %, C's precedence *)
//! unary       = ( "-" | "+" | "!" | "~" ) unary | ( "++" | "--" ) lvalue
//!             | "(" c_scalar ")" unary | "sizeof" "(" ( value_type | expression ) ")" | postfix ;
//! postfix     = primary [ "++" | "--" ] ;                     (* on an lvalue *)
//! primary     = INT | FLOAT | "true" | "false" | "(" expression ")" | NAME { component } | W
//!             | C "." ( "i" | "j" | "k" | "l" ) | DIM "." "size" | DIM "." "shape" "[" INT "]"
//!             | ( "threadIdx" | "blockIdx" | "blockDim" | "gridDim" ) "." ( "x" | "y" | "z" ) | "warpSize"
//!             | index { component } | CALL "(" [ assignment { "," assignment } ] ")"
//!             | ATOMIC "(" atomic_target { "," assignment } ")" | c_scalar_word "(" assignment ")" ;
//! index       = "wl" "::" "index" "(" A "," axis { "," axis } ")" ;          (* 1 to 4 axes *)
//! atomic_target = "wl" "::" "address" "(" A "," axis { "," axis } ")" | "&" SHARED_SCALAR ;
//! axis        = atom | ( "int" | "size_t" | "unsigned" ) "(" atom ")" | "(" ( "int" | "size_t" | "unsigned" ) ")" atom ;
//! atom        = C "." ( "i" | "j" | "k" | "l" ) | W | "blockIdx" "." "x" | [ "-" ] INT ;
//!                                   (* |INT| <= i32::MAX; no "-" inside size_t or unsigned *)
//! component   = "." "c" "[" INT "]" | "." "data" "[" INT "]" "[" INT "]" ;
//!                                   (* of a value whose declared type is a vector / matrix (not auto), below its extents *)
//! ```
//!
//! `CALL` is one of [`vocabulary::CALLS`] (arithmetic, warp vote and
//! shuffle, barriers, clocks: none takes an address), `ATOMIC` one of
//! [`vocabulary::ATOMICS`]. The work-item index, the coordinates, the
//! launch bounds and the built-in variables are not lvalues, so nothing
//! writes them; arrays appear only as the first argument of `wl::index` /
//! `wl::address`, so nothing copies or aliases them. `NVRTC` warnings on
//! a proven kernel are refusals too (`CudaModule::compile`).

mod emit;
mod lex;
mod parse;
mod vocabulary;

use std::collections::BTreeMap;

use super::{SourceError, SourceParam, parse_cu};
use crate::abi::DType;
use crate::signature::{Accesses, Unproven};
use parse::{KernelRead, ParamType, Refusal};

/// A refusal of the reader that the differential fuzzer's own test turns
/// off, to show that the fuzzer finds the hole it leaves
/// (`warp_launch::fuzzing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weaken {
    /// Nothing turned off: the reader as `CudaModule` uses it.
    Nothing,
    /// Assignments to a thread coordinate's field (`c.i += n;`) pass.
    CoordinateWrites,
}

/// One hand-written kernel: its parameters as spelled, the launch shape it
/// has, and what a launch checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaCKernel {
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
    /// The rules, or the first construct outside the grammar.
    pub accesses: Accesses,
    /// Dimensions of each array parameter, from the number of indices the
    /// body uses with it (where it is indexed).
    pub ndims: BTreeMap<String, u8>,
}

/// A whole text as read: its kernels, and the re-emission NVRTC compiles
/// (`None` when the text does not lex: every kernel is then unproven, and
/// the text is compiled as given).
#[derive(Debug, Clone)]
pub struct CudaCText {
    /// Every `extern "C" __global__` kernel, in file order.
    pub kernels: Vec<CudaCKernel>,
    /// The text NVRTC compiles: the tokens as read, printed back line for
    /// line (`None` when the text does not lex).
    pub emitted: Option<String>,
}

/// Reads every `extern "C" __global__` kernel of a hand-written CUDA C
/// text, with what a launch can check of each.
///
/// # Errors
///
/// A [`SourceError`] naming `file` and the line where a kernel's head or
/// parameters do not parse as declarations.
pub fn read_text(text: &str, file: &str, weaken: Weaken) -> Result<CudaCText, SourceError> {
    let lexed = lex::lex(text);
    // The declarations come from the tokens as read, even past a refusal
    // (every kernel is then unproven, and only its parameters matter).
    let tokens_text = emit::emit(&lexed);
    let source = parse_cu(&tokens_text, file)?;
    let emitted = lexed.refusal.is_none().then_some(tokens_text);
    let (reads, whole) = match &lexed.refusal {
        Some((line, why)) => (
            Vec::new(),
            Some(Refusal {
                line: *line,
                why: why.clone(),
                param: String::new(),
            }),
        ),
        None => parse::parse(&lexed.tokens, weaken),
    };
    let kernels = source
        .kernels
        .iter()
        .map(|k| {
            let read = reads.iter().find(|r| r.name == k.name);
            let accesses = verdict(file, k.line, &k.params, whole.as_ref(), read);
            CudaCKernel {
                name: k.name.clone(),
                line: k.line,
                params: k.params.clone(),
                kernel_dim: bounds_dim(&k.params),
                lean: read.is_some_and(|r| r.lean),
                accesses,
                ndims: read.map(|r| r.ndims.clone()).unwrap_or_default(),
            }
        })
        .collect();
    Ok(CudaCText { kernels, emitted })
}

/// The verdict for one declared kernel: the whole text's refusal, the
/// grammar's reading of it, or the disagreement between the two readings
/// of its head.
fn verdict(
    file: &str,
    line: usize,
    params: &[SourceParam],
    whole: Option<&Refusal>,
    read: Option<&KernelRead>,
) -> Accesses {
    let unproven = |r: &Refusal| {
        Accesses::Unproven(Unproven {
            param: r.param.clone(),
            location: format!("{file}:{}", r.line),
            reason: format!("{} (outside the grammar of hand-written kernels)", r.why),
        })
    };
    if let Some(r) = whole {
        return unproven(r);
    }
    let Some(read) = read else {
        return unproven(&Refusal {
            line,
            why: "the kernel's head is outside the grammar".into(),
            param: String::new(),
        });
    };
    if !same_head(params, &read.params) {
        return unproven(&Refusal {
            line,
            why: "the kernel's parameters read differently as a declaration and in the grammar"
                .into(),
            param: String::new(),
        });
    }
    match &read.body {
        Ok(rules) => Accesses::Checked(rules.clone()),
        Err(r) => unproven(r),
    }
}

/// Whether the declaration's parameters are the grammar's: the same names
/// and the same types.
fn same_head(declared: &[SourceParam], read: &[parse::HeadParam]) -> bool {
    declared.len() == read.len()
        && declared.iter().zip(read).all(|(d, r)| {
            d.name == r.name
                && match r.ty {
                    ParamType::Bounds(n) => bounds_dim(std::slice::from_ref(d)) == Some(n),
                    ParamType::Array(t) => array_element(&d.cpp_type)
                        .and_then(dtype_of)
                        .is_some_and(|e| e.name == t.name),
                    ParamType::Value(t) => {
                        array_element(&d.cpp_type).is_none()
                            && dtype_of(&d.cpp_type).is_some_and(|e| e.name == t.name)
                    }
                }
        })
}

/// `N` of a first parameter `wl::launch_bounds_t<N>` (1 to 4).
fn bounds_dim(params: &[SourceParam]) -> Option<usize> {
    let t = params.first()?.cpp_type.trim_start_matches("const ");
    let t = t.trim_start_matches("::");
    let n: usize = t
        .strip_prefix("wl::launch_bounds_t<")?
        .strip_suffix('>')?
        .parse()
        .ok()?;
    (1..=4).contains(&n).then_some(n)
}

/// C's spellings of fixed-size integers, as Warp's scalar names (`long`
/// is not here: its size depends on the platform).
const C_INTEGERS: &[(&str, &str)] = &[
    ("signed char", "int8_t"),
    ("char", "int8_t"),
    ("unsigned char", "uint8_t"),
    ("short", "int16_t"),
    ("short int", "int16_t"),
    ("signed short", "int16_t"),
    ("unsigned short", "uint16_t"),
    ("unsigned short int", "uint16_t"),
    ("signed", "int32_t"),
    ("signed int", "int32_t"),
    ("unsigned", "uint32_t"),
    ("unsigned int", "uint32_t"),
    ("long long", "int64_t"),
    ("long long int", "int64_t"),
    ("signed long long", "int64_t"),
    ("unsigned long long", "uint64_t"),
    ("unsigned long long int", "uint64_t"),
];

/// The Warp dtype a spelled scalar, vector or matrix type names (`wl::`
/// read as Warp's `wp::`, C's fixed-size integers as Warp's, a leading
/// `const` dropped).
pub fn dtype_of(cpp: &str) -> Option<&'static DType> {
    let t = cpp.trim_start_matches("const ").trim_start_matches("::");
    let t = C_INTEGERS
        .iter()
        .find(|(c, _)| *c == t)
        .map_or(t, |(_, w)| w);
    DType::by_cpp(&t.replace("wl::", "wp::"))
}

/// The element type of `wl::array_t<T>` (as spelled by the reader; a
/// `const` in front is allowed: the parameter is still passed by value).
pub fn array_element(cpp: &str) -> Option<&str> {
    cpp.trim_start_matches("const ")
        .trim_start_matches("::")
        .strip_prefix("wl::array_t<")?
        .strip_suffix('>')
}
