//! Rules of the generated thin layer (`cuda_api::driver`), checked on the
//! real specs and on the checked-in code:
//!
//! - no safe wrapper takes a raw handle, a device address or other integer
//!   handle, a callback, a raw pointer, or a record holding one of those;
//! - every parameter of every public function of `cuda-api` is snake_case;
//! - every wrapper carries its C name as `#[doc(alias)]` and, returning
//!   `Result`, has an `# Errors` section.

use std::path::{Path, PathBuf};

use heck::ToSnakeCase;
use xtask::codegen::api::TypeInfo;
use xtask::ctype::CType;
use xtask::spec::load::load_dir;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

fn parse(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Why `ty` (a Rust type in a signature) carries a value safe Rust cannot
/// vouch for: a raw pointer anywhere in it, or a spec type that is a handle,
/// integer handle, callback or record holding one.
fn unchecked(ty: &syn::Type, types: &TypeInfo) -> Option<String> {
    match ty {
        syn::Type::Ptr(_) => Some("raw pointer".into()),
        syn::Type::Reference(r) => unchecked(&r.elem, types),
        syn::Type::Slice(s) => unchecked(&s.elem, types),
        syn::Type::Array(a) => unchecked(&a.elem, types),
        syn::Type::Tuple(t) => t.elems.iter().find_map(|e| unchecked(e, types)),
        syn::Type::Path(p) => {
            let last = p.path.segments.last()?;
            if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
                for a in &args.args {
                    if let syn::GenericArgument::Type(t) = a
                        && let Some(why) = unchecked(t, types)
                    {
                        return Some(why);
                    }
                }
            }
            let name = last.ident.to_string();
            let c = CType::parse(&name).ok()?;
            types.unchecked(&c).map(|u| format!("{u:?}"))
        }
        _ => None,
    }
}

#[test]
fn no_safe_wrapper_takes_a_handle_or_raw_pointer() {
    let specs = load_dir(&root().join("specs")).expect("the specs load");
    let types = TypeInfo::new(&specs);
    // The detector itself: handles, integer handles, callbacks, raw pointers
    // and records holding them are caught; plain data is not.
    for caught in [
        "CUstream",
        "CUgraphNode",
        "CUdeviceptr",
        "CUhostFn",
        "&[*mut ::core::ffi::c_void]",
        "&CUDA_LAUNCH_PARAMS",
        "Option<&[CUgraphNode]>",
    ] {
        let ty: syn::Type = syn::parse_str(caught).unwrap();
        assert!(unchecked(&ty, &types).is_some(), "{caught} must be caught");
    }
    for plain in [
        "::core::ffi::c_uint",
        "CUdevice",
        "&[CUjit_option]",
        "&CUmemLocation",
    ] {
        let ty: syn::Type = syn::parse_str(plain).unwrap();
        assert!(unchecked(&ty, &types).is_none(), "{plain} is plain data");
    }
    let file = parse(&root().join("cuda-api/src/generated/driver.rs"));
    let (mut safe, mut unsafe_, mut bad) = (0, 0, Vec::new());
    for item in &file.items {
        let syn::Item::Fn(f) = item else { continue };
        if f.sig.unsafety.is_some() {
            unsafe_ += 1;
            continue;
        }
        safe += 1;
        for input in &f.sig.inputs {
            if let syn::FnArg::Typed(pt) = input
                && let Some(why) = unchecked(&pt.ty, &types)
            {
                let pat = &pt.pat;
                bad.push(format!("{}({}): {why}", f.sig.ident, quote::quote!(#pat)));
            }
        }
    }
    println!(
        "safe wrappers with a handle or raw-pointer parameter: {} (of {safe} safe, {unsafe_} unsafe)",
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "safe wrappers that take a value safe Rust cannot vouch for:\n{}",
        bad.join("\n")
    );
    let from_specs = xtask::codegen::api::safe_wrappers_with_unchecked_params(&specs);
    assert!(from_specs.is_empty(), "{from_specs:?}");
    assert!(safe > 0 && unsafe_ > 0);
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn is_pub(v: &syn::Visibility) -> bool {
    matches!(v, syn::Visibility::Public(_))
}

fn check_sig(sig: &syn::Signature, at: &str, bad: &mut Vec<String>) {
    for input in &sig.inputs {
        let syn::FnArg::Typed(pt) = input else {
            continue;
        };
        if let syn::Pat::Ident(id) = &*pt.pat {
            let name = id.ident.to_string();
            let bare = name.trim_start_matches('_').trim_end_matches('_');
            if bare.to_snake_case() != bare {
                bad.push(format!("{at}: {}({name})", sig.ident));
            }
        }
    }
}

fn check_items(items: &[syn::Item], at: &str, bad: &mut Vec<String>) {
    for item in items {
        match item {
            syn::Item::Fn(f) if is_pub(&f.vis) => check_sig(&f.sig, at, bad),
            syn::Item::Impl(i) => {
                for ii in &i.items {
                    if let syn::ImplItem::Fn(f) = ii
                        && (is_pub(&f.vis) || i.trait_.is_some())
                    {
                        check_sig(&f.sig, at, bad);
                    }
                }
            }
            syn::Item::Trait(t) if is_pub(&t.vis) => {
                for ti in &t.items {
                    if let syn::TraitItem::Fn(f) = ti {
                        check_sig(&f.sig, at, bad);
                    }
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    check_items(inner, at, bad);
                }
            }
            _ => {}
        }
    }
}

#[test]
fn every_public_parameter_of_cuda_api_is_snake_case() {
    let mut files = Vec::new();
    rs_files(&root().join("cuda-api/src"), &mut files);
    files.sort();
    let mut bad = Vec::new();
    let mut checked = 0;
    for path in &files {
        let file = parse(path);
        let at = path
            .strip_prefix(root())
            .unwrap_or(path)
            .display()
            .to_string();
        check_items(&file.items, &at, &mut bad);
        checked += 1;
    }
    assert!(checked > 5, "cuda-api/src has its files");
    assert!(
        bad.is_empty(),
        "parameters that are not snake_case:\n{}",
        bad.join("\n")
    );
}

/// The doc text of an item: its `///` lines joined, each without the one
/// space after `///`.
fn doc_text(attrs: &[syn::Attribute]) -> String {
    let mut out = String::new();
    for a in attrs {
        if a.path().is_ident("doc")
            && let syn::Meta::NameValue(nv) = &a.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            let line = s.value();
            out.push_str(line.strip_prefix(' ').unwrap_or(&line));
            out.push('\n');
        }
    }
    out
}

/// The value of `#[doc(alias = "...")]`, if the item has one.
fn doc_alias(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| {
        let syn::Meta::List(list) = &a.meta else {
            return None;
        };
        if !list.path.is_ident("doc") {
            return None;
        }
        let nv: syn::MetaNameValue = list.parse_args().ok()?;
        if !nv.path.is_ident("alias") {
            return None;
        }
        match nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        }
    })
}

fn returns_result(sig: &syn::Signature) -> bool {
    match &sig.output {
        syn::ReturnType::Type(_, ty) => match &**ty {
            syn::Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Result"),
            _ => false,
        },
        syn::ReturnType::Default => false,
    }
}

#[test]
fn every_thin_wrapper_has_its_c_name_as_doc_alias_and_an_errors_section() {
    let file = parse(&root().join("cuda-api/src/generated/driver.rs"));
    let call = regex::Regex::new(r"\b(cu[A-Z][A-Za-z0-9_]*)\s*\(").unwrap();
    let (mut checked, mut bad) = (0, Vec::new());
    for item in &file.items {
        let syn::Item::Fn(f) = item else { continue };
        let name = f.sig.ident.to_string();
        let block = &f.block;
        let body = quote::quote!(#block).to_string();
        let called: Vec<&str> = call
            .captures_iter(&body)
            .filter_map(|c| c.get(1))
            .map(|m| m.as_str())
            .collect();
        let [c_name] = called.as_slice() else {
            bad.push(format!(
                "{name}: calls {called:?}, expected one driver function"
            ));
            continue;
        };
        match doc_alias(&f.attrs) {
            Some(a) if a == *c_name => {}
            other => bad.push(format!("{name}: doc alias {other:?}, expected {c_name:?}")),
        }
        if returns_result(&f.sig) && !doc_text(&f.attrs).contains("\n# Errors\n") {
            bad.push(format!(
                "{name}: returns Result but has no `# Errors` section"
            ));
        }
        checked += 1;
    }
    assert!(checked > 400, "driver.rs has its {checked} wrappers");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
