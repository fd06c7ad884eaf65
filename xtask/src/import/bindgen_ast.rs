//! Runs bindgen over the real `cuda.h` and reads its output (with `syn`) into
//! plain facts: functions, handles, typedefs, enums, records, callbacks and
//! constants, each with C types in the specs' spelling.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::{Fields, ForeignItem, Item, Type};

use crate::Result;
use crate::ctype::{BUILTINS, CType};
use crate::spec::model::*;

/// A function as bindgen saw it.
#[derive(Debug, Clone)]
pub struct RawFunction {
    /// The declared (ABI) name, e.g. `cuMemAlloc_v2`.
    pub symbol: String,
    /// `(name, C type)` per parameter.
    pub params: Vec<(String, String)>,
    /// The raw doc comment.
    pub doc: String,
}

/// Everything the importer takes from bindgen.
#[derive(Debug, Default)]
pub struct RawHeader {
    /// `CUresult`-returning functions in header order.
    pub functions: Vec<RawFunction>,
    /// The type model.
    pub types: TypesFile,
}

/// Runs bindgen on `cuda.h` in `include_dir`.
pub fn run_bindgen(
    include_dir: &Path,
    libclang_dir: &Path,
    builtin_include: Option<&Path>,
) -> Result<String> {
    run_bindgen_on(include_dir, "cuda.h", libclang_dir, builtin_include)
}

/// Runs bindgen on the header `header` (`cuda.h`, `nvrtc.h`) in
/// `include_dir`, keeping only what that file declares.
#[cfg(feature = "import")]
pub fn run_bindgen_on(
    include_dir: &Path,
    header: &str,
    libclang_dir: &Path,
    builtin_include: Option<&Path>,
) -> Result<String> {
    // SAFETY: xtask is single-threaded at this point; clang-sys reads the
    // variable when it loads libclang below.
    unsafe { std::env::set_var("LIBCLANG_PATH", libclang_dir) };
    let mut builder = bindgen::Builder::default()
        .header(include_dir.join(header).to_string_lossy())
        .clang_arg(format!("-I{}", include_dir.display()))
        .allowlist_file(format!(r".*[/\\]{}", regex::escape(header)))
        .default_enum_style(bindgen::EnumVariation::NewType {
            is_bitfield: false,
            is_global: false,
        })
        .prepend_enum_name(false)
        .generate_comments(true)
        .layout_tests(false)
        .derive_debug(false)
        .derive_default(false)
        .derive_copy(true)
        .formatter(bindgen::Formatter::None);
    if let Some(dir) = builtin_include {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder.generate().map_err(|e| {
        format!(
            "bindgen could not parse {}: {e}",
            include_dir.join(header).display()
        )
    })?;
    Ok(bindings.to_string())
}

/// Without the `import` feature xtask has no bindgen: `cargo xtask import`
/// runs xtask again with it (see `xtask::cli`), so this is not reached.
#[cfg(not(feature = "import"))]
pub fn run_bindgen_on(
    include_dir: &Path,
    header: &str,
    _libclang_dir: &Path,
    _builtin_include: Option<&Path>,
) -> Result<String> {
    Err(format!(
        "xtask was built without its `import` feature (bindgen), so it cannot read {}; \
         run `cargo xtask import`, which builds xtask with it",
        include_dir.join(header).display()
    )
    .into())
}

fn doc_of(attrs: &[syn::Attribute]) -> String {
    let mut out = String::new();
    for a in attrs {
        if a.path().is_ident("doc")
            && let syn::Meta::NameValue(nv) = &a.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            out.push_str(&s.value());
            out.push('\n');
        }
    }
    out
}

/// bindgen appends `_` to names that are Rust keywords; give back the C name.
fn c_name(rust: &str) -> String {
    crate::names::unescape(rust).to_string()
}

/// Converts a bindgen Rust type into the specs' C spelling.
fn c_type(ty: &Type, renames: &BTreeMap<String, String>) -> Result<CType> {
    match ty {
        Type::Ptr(p) => {
            let mut inner = c_type(&p.elem, renames)?;
            let pointee_const = p.const_token.is_some();
            if let Some(last) = inner.ptrs.last_mut() {
                *last = pointee_const;
            } else {
                inner.base_const = pointee_const;
            }
            inner.ptrs.push(false);
            Ok(inner)
        }
        Type::Array(a) => {
            let mut inner = c_type(&a.elem, renames)?;
            let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(n),
                ..
            }) = &a.len
            else {
                return Err(
                    format!("array length is not a literal: {}", quote::quote!(#ty)).into(),
                );
            };
            inner.dims.insert(0, n.base10_parse()?);
            Ok(inner)
        }
        Type::Path(p) => {
            let last = p
                .path
                .segments
                .last()
                .ok_or("empty type path")?
                .ident
                .to_string();
            let base = match last.as_str() {
                "c_void" => "void".to_string(),
                "c_char" => "char".into(),
                "c_schar" => "signed char".into(),
                "c_uchar" => "unsigned char".into(),
                "c_short" => "short".into(),
                "c_ushort" => "unsigned short".into(),
                "c_int" => "int".into(),
                "c_uint" => "unsigned int".into(),
                "c_long" => "long".into(),
                "c_ulong" => "unsigned long".into(),
                "c_longlong" => "long long".into(),
                "c_ulonglong" => "unsigned long long".into(),
                other => match BUILTINS.iter().find(|(_, r)| *r == other) {
                    Some((c, _)) => c.to_string(),
                    None => renames
                        .get(other)
                        .cloned()
                        .unwrap_or_else(|| other.to_string()),
                },
            };
            Ok(CType {
                base,
                base_const: false,
                ptrs: Vec::new(),
                dims: Vec::new(),
            })
        }
        other => Err(format!(
            "unsupported type in bindgen output: {}",
            quote::quote!(#other)
        )
        .into()),
    }
}

/// A callback's return type and `(name, type)` parameters.
type CallbackShape = (String, Vec<(String, String)>);

fn callback_of(ty: &Type, renames: &BTreeMap<String, String>) -> Result<Option<CallbackShape>> {
    let Type::Path(p) = ty else { return Ok(None) };
    let Some(seg) = p.path.segments.last() else {
        return Ok(None);
    };
    if seg.ident != "Option" {
        return Ok(None);
    }
    let syn::PathArguments::AngleBracketed(args) = &seg.arguments else {
        return Ok(None);
    };
    let Some(syn::GenericArgument::Type(Type::BareFn(f))) = args.args.first() else {
        return Ok(None);
    };
    let ret = match &f.output {
        syn::ReturnType::Default => "void".to_string(),
        syn::ReturnType::Type(_, t) => c_type(t, renames)?.to_string(),
    };
    let mut params = Vec::new();
    for (i, a) in f.inputs.iter().enumerate() {
        let name = a
            .name
            .as_ref()
            .map(|(n, _)| c_name(&n.to_string()))
            .unwrap_or_else(|| format!("arg{i}"));
        params.push((name, c_type(&a.ty, renames)?.to_string()));
    }
    Ok(Some((ret, params)))
}

/// Reads bindgen's output of `cuda.h` into facts: see [`read_api`].
pub fn read(bindings: &str) -> Result<RawHeader> {
    read_api(bindings, "CUresult")
}

/// Reads bindgen's output into facts; the functions are those returning
/// `result` (`CUresult`, `nvrtcResult`). Anonymous records (`X__bindgen_ty_N`)
/// are renamed after the field that holds them and get a `c_path`. A
/// parameter declared as a function pointer in place (`nvrtcSetFlowCallback`'s
/// `int (*callback)(void *, void *)`) becomes a callback type named
/// `FUNCTION_PARAM`, as anonymous records are named after their field.
pub fn read_api(bindings: &str, result: &str) -> Result<RawHeader> {
    let file = syn::parse_file(bindings)?;
    // First pass: anonymous record names → readable names and C paths.
    let mut renames: BTreeMap<String, String> = BTreeMap::new();
    let mut paths: BTreeMap<String, String> = BTreeMap::new();
    let mut record_fields: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for item in &file.items {
        let (name, fields) = match item {
            Item::Struct(s) => match &s.fields {
                Fields::Named(n) => (s.ident.to_string(), &n.named),
                _ => continue,
            },
            Item::Union(u) => (u.ident.to_string(), &u.fields.named),
            _ => continue,
        };
        let list = fields
            .iter()
            .map(|f| {
                let ty = &f.ty;
                (
                    f.ident.as_ref().map(|i| i.to_string()).unwrap_or_default(),
                    quote::quote!(#ty).to_string().replace(' ', ""),
                )
            })
            .collect();
        record_fields.push((name, list));
    }
    // Resolve in order: bindgen emits the anonymous children before their parent,
    // so iterate until no more names change.
    loop {
        let mut changed = false;
        for (parent, fields) in &record_fields {
            let parent_name = renames
                .get(parent)
                .cloned()
                .unwrap_or_else(|| parent.clone());
            let parent_path = paths
                .get(parent)
                .cloned()
                .unwrap_or_else(|| parent_name.clone());
            for (field, ty) in fields {
                let anon = ty.rsplit("::").next().unwrap_or(ty).to_string();
                if !anon.contains("__bindgen_ty_") {
                    continue;
                }
                let (new, path) = if let Some(n) = field.strip_prefix("__bindgen_anon_") {
                    (format!("{parent_name}_anon{n}"), format!("{parent_path}.*"))
                } else {
                    (
                        format!("{parent_name}_{}", c_name(field)),
                        format!("{parent_path}.{}", c_name(field)),
                    )
                };
                if renames.get(&anon) != Some(&new) || paths.get(&anon) != Some(&path) {
                    renames.insert(anon.clone(), new);
                    paths.insert(anon, path);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let rn = |s: &str| renames.get(s).cloned().unwrap_or_else(|| s.to_string());

    let mut raw = RawHeader::default();
    let mut opaque: BTreeSet<String> = BTreeSet::new();
    let mut enum_index: BTreeMap<String, usize> = BTreeMap::new();
    for item in &file.items {
        match item {
            Item::Struct(s) if matches!(s.fields, Fields::Named(ref n) if n.named.len() == 1 && n.named[0].ident.as_ref().is_some_and(|i| i == "_unused")) =>
            {
                opaque.insert(s.ident.to_string());
            }
            Item::Struct(s) if matches!(s.fields, Fields::Unnamed(_)) => {
                let Fields::Unnamed(u) = &s.fields else {
                    unreachable!()
                };
                let repr = match c_type(&u.unnamed[0].ty, &renames)?.base.as_str() {
                    "unsigned int" | "uint32_t" => "u32",
                    "int" | "int32_t" => "i32",
                    "unsigned long long" | "uint64_t" => "u64",
                    "long long" | "int64_t" => "i64",
                    other => {
                        return Err(format!(
                            "enum {} has an unexpected representation `{other}`",
                            s.ident
                        )
                        .into());
                    }
                }
                .to_string();
                enum_index.insert(s.ident.to_string(), raw.types.enums.len());
                raw.types.enums.push(Enum {
                    name: str(s.ident.to_string()),
                    repr,
                    typedef_only: false,
                    summary: None,
                    values: Vec::new(),
                    since: None,
                    removed: None,
                });
            }
            Item::Struct(s) => {
                let Fields::Named(n) = &s.fields else {
                    continue;
                };
                let mut r = record(
                    &s.ident.to_string(),
                    RecordKind::Struct,
                    n.named.iter(),
                    &renames,
                    &paths,
                )?;
                r.align = forced_align(&s.attrs);
                raw.types.records.push(r);
            }
            Item::Union(u) => {
                let mut r = record(
                    &u.ident.to_string(),
                    RecordKind::Union,
                    u.fields.named.iter(),
                    &renames,
                    &paths,
                )?;
                r.align = forced_align(&u.attrs);
                raw.types.records.push(r);
            }
            Item::Use(u) => {
                // `pub use self::cudaError_enum as CUresult;`
                if let syn::UseTree::Path(p) = &u.tree
                    && let syn::UseTree::Rename(r) = &*p.tree
                {
                    raw.types.typedefs.push(Typedef {
                        name: str(r.rename.to_string()),
                        ty: str(r.ident.to_string()),
                        since: None,
                        removed: None,
                    });
                }
            }
            Item::Type(t) => {
                let name = t.ident.to_string();
                if let Some((ret, params)) = callback_of(&t.ty, &renames)? {
                    raw.types.callbacks.push(Callback {
                        name: str(name),
                        returns: str(ret),
                        params: params
                            .into_iter()
                            .map(|(n, ty)| CallbackParam {
                                name: n,
                                ty: str(ty),
                            })
                            .collect(),
                        since: None,
                        removed: None,
                    });
                    continue;
                }
                let ct = c_type(&t.ty, &renames)?;
                if ct.ptrs.len() == 1
                    && !ct.base_const
                    && ct.dims.is_empty()
                    && opaque.contains(&ct.base)
                {
                    raw.types.handles.push(Handle {
                        name: str(name),
                        opaque: ct.base,
                        since: None,
                        removed: None,
                    });
                } else {
                    raw.types.typedefs.push(Typedef {
                        name: str(name),
                        ty: str(ct.to_string()),
                        since: None,
                        removed: None,
                    });
                }
            }
            Item::Const(c) => {
                let ty = c_type(&c.ty, &renames)?.to_string();
                let value = enum_literal(&c.expr)
                    .ok_or_else(|| format!("constant {} is not an integer literal", c.ident))?;
                raw.types.constants.push(Constant {
                    name: str(c.ident.to_string()),
                    ty,
                    value,
                    since: None,
                    removed: None,
                    earlier: Vec::new(),
                });
            }
            Item::ForeignMod(m) => {
                for fi in &m.items {
                    let ForeignItem::Fn(f) = fi else { continue };
                    let returns_result = matches!(&f.sig.output, syn::ReturnType::Type(_, t) if quote::quote!(#t).to_string() == result);
                    if !returns_result {
                        continue;
                    }
                    let mut params = Vec::new();
                    for a in &f.sig.inputs {
                        let syn::FnArg::Typed(pt) = a else { continue };
                        let syn::Pat::Ident(id) = &*pt.pat else {
                            continue;
                        };
                        let name = c_name(&id.ident.to_string());
                        if let Some((ret, cb)) = callback_of(&pt.ty, &renames)? {
                            let ty = format!("{}_{name}", f.sig.ident);
                            raw.types.callbacks.push(Callback {
                                name: str(ty.clone()),
                                returns: str(ret),
                                params: cb
                                    .into_iter()
                                    .map(|(n, ty)| CallbackParam {
                                        name: n,
                                        ty: str(ty),
                                    })
                                    .collect(),
                                since: None,
                                removed: None,
                            });
                            params.push((name, ty));
                            continue;
                        }
                        params.push((name, c_type(&pt.ty, &renames)?.to_string()));
                    }
                    raw.functions.push(RawFunction {
                        symbol: f.sig.ident.to_string(),
                        params,
                        doc: doc_of(&f.attrs),
                    });
                }
            }
            _ => {}
        }
    }
    // bindgen emits an enum's `impl` with its values before the struct.
    for item in &file.items {
        let Item::Impl(imp) = item else { continue };
        let Type::Path(p) = &*imp.self_ty else {
            continue;
        };
        let name = p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        let Some(&idx) = enum_index.get(&name) else {
            continue;
        };
        for it in &imp.items {
            let syn::ImplItem::Const(c) = it else {
                continue;
            };
            let value = enum_literal(&c.expr)
                .ok_or_else(|| format!("enum value {}::{} is not a literal", name, c.ident))?;
            raw.types.enums[idx].values.push(EnumValue {
                name: str(c.ident.to_string()),
                value,
                since: None,
                removed: None,
                earlier: Vec::new(),
            });
        }
    }
    // Anonymous records are renamed; make sure no reference to an old name survives.
    for r in &mut raw.types.records {
        r.name = str(rn(&r.name.value));
    }
    Ok(raw)
}

fn record<'a>(
    name: &str,
    kind: RecordKind,
    fields: impl Iterator<Item = &'a syn::Field>,
    renames: &BTreeMap<String, String>,
    paths: &BTreeMap<String, String>,
) -> Result<Record> {
    let mut out = Vec::new();
    for f in fields {
        let fname = f.ident.as_ref().map(|i| i.to_string()).unwrap_or_default();
        let fname = match fname.strip_prefix("__bindgen_anon_") {
            Some(n) => format!("anon{n}"),
            None => c_name(&fname),
        };
        out.push(Field {
            name: fname,
            ty: str(c_type(&f.ty, renames)?.to_string()),
            since: None,
        });
    }
    Ok(Record {
        name: str(renames
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())),
        kind,
        c_name: None,
        align: None,
        earlier_align: Vec::new(),
        c_path: paths.get(name).cloned(),
        summary: None,
        fields: out,
        earlier_fields: Vec::new(),
        since: None,
        removed: None,
    })
}

/// `#[repr(C, align(N))]` → `Some(N)`.
fn forced_align(attrs: &[syn::Attribute]) -> Option<u32> {
    let re = regex::Regex::new(r"align\s*\(\s*(\d+)\s*\)").ok()?;
    attrs
        .iter()
        .filter(|a| a.path().is_ident("repr"))
        .find_map(|a| {
            let text = quote::quote!(#a).to_string();
            re.captures(&text).and_then(|c| c[1].parse().ok())
        })
}

fn enum_literal(e: &syn::Expr) -> Option<i64> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) => i.base10_parse::<i64>().ok(),
        syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => enum_literal(expr).map(|v| -v),
        syn::Expr::Call(c) => c.args.first().and_then(enum_literal),
        syn::Expr::Paren(p) => enum_literal(&p.expr),
        syn::Expr::Cast(c) => enum_literal(&c.expr),
        _ => None,
    }
}
