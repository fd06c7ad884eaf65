//! The declarations of a Warp-generated `.cu`: `extern "C" __global__`
//! kernels with their parameters, and top-level structs with their data
//! members.

use super::accesses::{analyse_body, raw_address_line};
use super::components::{Functions, user_functions};
use super::tokens::{
    Tok, TokKind, is_punct, is_word, match_brackets, skip_balanced, spell, split_top_level_commas,
    tokenize,
};
use super::{
    KernelBody, Source, SourceError, SourceField, SourceKernel, SourceParam, SourceStruct,
};
use crate::signature::Accesses;

/// Attribute-like macros Warp (or CUDA) writes between `extern "C"` and the
/// parameter list; their parenthesised arguments are not the parameter list.
const ATTRIBUTE_MACROS: &[&str] = &[
    "__launch_bounds__",
    "__cluster_dims__",
    "__maxnreg__",
    "WP_CLUSTER_DIMS",
    "WP_MAXNREG",
];

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
    let functions = user_functions(&toks, &close);
    // The kernels' bodies, analysed after the scan (in parallel).
    let mut bodies: Vec<Body> = Vec::new();
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
                Some((kernel, span, next)) => {
                    if let Some(span) = span {
                        bodies.push(Body {
                            kernel: source.kernels.len(),
                            span,
                            structs: source.structs.len(),
                        });
                    }
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
    let analysed = analyse_bodies(&toks, &close, &bodies, &source, &functions, file);
    for (b, accesses) in bodies.iter().zip(analysed) {
        source.kernels[b.kernel].accesses = accesses;
    }
    Ok(source)
}

/// A kernel body's tokens inside its braces: first and last index.
type Span = (usize, usize);

/// A kernel body waiting for its analysis: the kernel's index in
/// [`Source::kernels`], the body's token span, and how many structs the
/// source declared before it (the ones its analysis may see).
struct Body {
    kernel: usize,
    span: Span,
    structs: usize,
}

/// [`analyse_body`] of every body, in order. The analyses are independent
/// (each reads the tokens, the user functions and the structs before its
/// kernel), so a module of many kernels spreads them over the available
/// cores: loading a module of 64 kernels is mostly this analysis.
fn analyse_bodies(
    toks: &[Tok<'_>],
    close: &[usize],
    bodies: &[Body],
    source: &Source,
    functions: &Functions<'_>,
    file: &str,
) -> Vec<Accesses> {
    let one = |b: &Body| {
        let params = source.kernels[b.kernel].params.as_slice();
        let module = (functions, &source.structs[..b.structs]);
        analyse_body(toks, close, b.span, params, module, file)
    };
    // Small modules: one thread (a thread's start costs more than a
    // short kernel's analysis).
    crate::parallel::map(bodies, 8, one)
}

/// Parses what follows `extern "C"` at `start`. Returns `None` when it is not
/// a `__global__` function (so not a CUDA kernel), else the kernel and the
/// index after its body or `;`.
fn parse_extern_function(
    toks: &[Tok<'_>],
    close: &[usize],
    start: usize,
    file: &str,
) -> Result<Option<(SourceKernel, Option<Span>, usize)>, SourceError> {
    let Some(name_idx) = kernel_head(toks, close, start, file)? else {
        return Ok(None);
    };
    let name_tok = &toks[name_idx];
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
    let params = kernel_params(toks, open, close_end, name_tok.text, file)?;
    let head = (close_end, name_tok.text, params.as_slice());
    let (body, span, next) = kernel_span(toks, close, head, file)?;
    Ok(Some((
        SourceKernel {
            name: name_tok.text.to_owned(),
            params,
            line: name_tok.line,
            body,
            accesses: Accesses::default(),
        },
        span,
        next,
    )))
}

/// The head of an `extern "C"` function at `start`: words and attribute
/// macros up to the name followed by `(`. The name's index when it is a
/// `__global__ void` function; `None` when it is not `__global__`; an error
/// for a `__global__` head that is not `void NAME(`.
fn kernel_head(
    toks: &[Tok<'_>],
    close: &[usize],
    start: usize,
    file: &str,
) -> Result<Option<usize>, SourceError> {
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
    Ok(Some(name_idx))
}

/// The parameters of kernel `name`, whose parameter list opens at `open`
/// and ends just before `close_end`.
fn kernel_params(
    toks: &[Tok<'_>],
    open: usize,
    close_end: usize,
    name: &str,
    file: &str,
) -> Result<Vec<SourceParam>, SourceError> {
    let inner = &toks[open + 1..close_end - 1];
    let kernel_ctx = format!("parameter of kernel `{name}`");
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
    Ok(params)
}

/// The body or `;` of kernel `name` after its parameter list, which ends
/// just before `close_end`: the body's shape, its accesses, and the index
/// after it.
#[cfg(test)]
fn kernel_body<'t>(
    toks: &[Tok<'t>],
    close: &[usize],
    (close_end, name, params): (usize, &str, &[SourceParam]),
    module: (&Functions<'t>, &[SourceStruct]),
    file: &str,
) -> Result<(KernelBody, Accesses, usize), SourceError> {
    let (body, span, next) = kernel_span(toks, close, (close_end, name, params), file)?;
    let accesses = span.map_or_else(Accesses::default, |span| {
        analyse_body(toks, close, span, params, module, file)
    });
    Ok((body, accesses, next))
}

/// What follows a kernel's parameter list: its body's shape, the token
/// span inside its braces (to analyse; `None` for a declaration), and the
/// index after it.
fn kernel_span(
    toks: &[Tok<'_>],
    close: &[usize],
    (close_end, name, _): (usize, &str, &[SourceParam]),
    file: &str,
) -> Result<(KernelBody, Option<Span>, usize), SourceError> {
    match toks.get(close_end) {
        Some(t) if t.kind == TokKind::Punct && t.text == ";" => {
            Ok((KernelBody::Declaration, None, close_end + 1))
        }
        Some(t) if t.kind == TokKind::Punct && t.text == "{" => {
            let Some(end) = skip_balanced(close, close_end) else {
                return Err(SourceError::new(
                    file,
                    t.line,
                    format!("body of kernel `{name}` is not closed by `}}`"),
                ));
            };
            let span = (close_end + 1, end - 1);
            Ok((classify_body(&toks[close_end..end]), Some(span), end))
        }
        other => {
            let line = other.map_or(toks[close_end - 1].line, |t| t.line);
            Err(SourceError::new(
                file,
                line,
                format!("expected `{{` or `;` after the parameter list of kernel `{name}`"),
            ))
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Direction;

    const FIXTURE_CU: &str = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.cu");
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
        }
        // Every prefix of the real fixture parses or fails cleanly.
        for cut in (0..FIXTURE_CU.len()).step_by(61) {
            if FIXTURE_CU.is_char_boundary(cut) {
                let _ = parse_cu(&FIXTURE_CU[..cut], "x.cu");
            }
        }
        let e = err("/* open\n\n");
        assert_eq!(e.line(), 1);
        assert!(e.message().contains("unterminated"));
        let e = err("struct S {\n int a;\n");
        assert!(e.message().contains("not closed"), "{e}");
    }

    fn toks(text: &str) -> (Vec<Tok<'_>>, Vec<usize>) {
        let t = tokenize(text, "h.cu").unwrap();
        let close = match_brackets(&t);
        (t, close)
    }

    #[test]
    fn kernel_head_finds_the_name_of_a_global_void_function() {
        let head = |text: &str| {
            let (t, close) = toks(text);
            kernel_head(&t, &close, 0, "h.cu")
                .map(|i| i.map(|i| t[i].text.to_owned()))
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            head("__launch_bounds__(256) __global__ void WP_MAXNREG(64) k(int a) {}"),
            Ok(Some("k".into()))
        );
        // Not __global__: no kernel, whatever follows.
        assert_eq!(head("void f(int a);"), Ok(None));
        assert_eq!(head("int x;"), Ok(None));
        assert_eq!(head("{ WP_API void k_cpu_forward(); }"), Ok(None));
        let e = head("__global__ int k(int a) {}").unwrap_err();
        assert!(e.contains("does not return void"), "{e}");
        let e = head("__global__ void *k(int a) {}").unwrap_err();
        assert!(e.contains("unexpected `*`"), "{e}");
        let e = head("__global__ void WP_MAXNREG(64 k(int a) {}").unwrap_err();
        assert!(e.contains("unbalanced `(` after WP_MAXNREG"), "{e}");
    }

    #[test]
    fn kernel_params_reads_each_declaration_in_order() {
        let (t, close) = toks("k(wp::launch_bounds_t<1> dim,\n wp::array_t<wp::float32> var_x)");
        let params = kernel_params(&t, 1, close[1] + 1, "k", "h.cu").unwrap();
        let got: Vec<_> = params
            .iter()
            .map(|p| (p.name.as_str(), p.cpp_type.as_str(), p.line))
            .collect();
        assert_eq!(
            got,
            [
                ("dim", "wp::launch_bounds_t<1>", 1),
                ("var_x", "wp::array_t<wp::float32>", 2)
            ]
        );
        let (t, close) = toks("k(void)");
        assert_eq!(kernel_params(&t, 1, close[1] + 1, "k", "h.cu").unwrap(), []);
        let (t, close) = toks("k(int)");
        let e = kernel_params(&t, 1, close[1] + 1, "k", "h.cu").unwrap_err();
        assert!(e.to_string().contains("parameter of kernel `k`"), "{e}");
    }

    #[test]
    fn kernel_body_is_a_declaration_or_a_closed_body() {
        let body = |text: &str| {
            let (t, close) = toks(text);
            kernel_body(
                &t,
                &close,
                (close[1] + 1, "k", &[]),
                (&Functions::default(), &[]),
                "h.cu",
            )
            .map(|(b, a, next)| (b, a, next, t.len()))
            .map_err(|e| e.to_string())
        };
        let (shape, accesses, next, len) = body("k(); int x;").unwrap();
        assert_eq!(
            (shape, accesses, next, len),
            (KernelBody::Declaration, Accesses::default(), 4, 7)
        );
        let (shape, accesses, next, len) = body("k() { }").unwrap();
        assert_ne!(shape, KernelBody::Declaration);
        assert_eq!((accesses, next, len), (Accesses::Checked(vec![]), 5, 5));
        let e = body("k() {").unwrap_err();
        assert!(e.contains("body of kernel `k` is not closed by `}`"), "{e}");
        let e = body("k() int").unwrap_err();
        assert!(
            e.contains("expected `{` or `;` after the parameter list of kernel `k`"),
            "{e}"
        );
    }
}
