//! The layer rule (DESIGN.md §6, "Layers"): `warp-launch` stands on
//! `cuda-api`'s safe types only and never names the thin layer
//! (`cuda_api::driver`) or the raw bindings (`cuda_api::sys`, the `cuda_sys`
//! crate).
//!
//! [`raw_layer_names`] parses a source file with `syn` and reports every place
//! that names them: a path in code, types, patterns or attributes
//! (`cuda_api::driver::ctx_get_current()`), a `use` tree however it is written
//! (`use cuda_api::{driver, Stream}`, `use cuda_api::sys as raw`,
//! `use cuda_api::{self as api}` followed by `api::sys::…`), a glob import of
//! `cuda_api` (it brings `driver` and `sys` into scope), and the tokens of
//! macro calls (`format!("{:?}", cuda_api::sys::CUresult::…)`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit::Visit;

use crate::Result;

/// The crate whose raw modules are off limits.
pub const SAFE_CRATE: &str = "cuda_api";

/// `cuda_api`'s modules that are off limits: the thin layer and the raw bindings.
pub const RAW_MODULES: &[&str] = &["driver", "sys"];

/// Crates that are raw bindings themselves.
pub const RAW_CRATES: &[&str] = &["cuda_sys"];

/// One place that names the raw layer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The file, relative to the directory [`check_dir`] shows paths from.
    pub file: String,
    /// The enclosing items, outermost first (`impl Device / fn current`).
    pub within: String,
    /// What names the raw layer, as written (`use cuda_api::sys::{…}`).
    pub what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.within.is_empty() {
            write!(f, "{}: {}", self.file, self.what)
        } else {
            write!(f, "{} (in {}): {}", self.file, self.within, self.what)
        }
    }
}

/// Every place in the Rust source `src` that names the raw layer, as
/// `(enclosing items, what)` pairs in source order.
///
/// # Errors
///
/// The source does not parse as a Rust file (the message has `syn`'s reason).
pub fn raw_layer_names(src: &str) -> Result<Vec<(String, String)>> {
    let file = syn::parse_file(src).map_err(|e| format!("not a Rust file: {e}"))?;
    let mut aliases = Aliases::default();
    aliases.visit_file(&file);
    let mut roots: BTreeSet<String> = aliases.0;
    roots.insert(SAFE_CRATE.to_string());
    let mut v = Finder {
        roots,
        within: Vec::new(),
        found: Vec::new(),
    };
    v.visit_file(&file);
    Ok(v.found)
}

/// Checks every `*.rs` file under `dir`, in path order; files are shown
/// relative to `shown_from` (the workspace root, say).
///
/// # Errors
///
/// A file cannot be read or does not parse; the message names the file.
pub fn check_dir(dir: &Path, shown_from: &Path) -> Result<Vec<Finding>> {
    scan_dir(dir, shown_from, |_| false, raw_layer_names)
}

/// Runs `scan` (a source's text in, `(enclosing items, what)` pairs out)
/// over every `*.rs` file under `dir` but those `skip` names (a path
/// relative to `dir`), in path order; files are shown relative to
/// `shown_from`. The walk of the layer rule and of the launch-road rule
/// (`crate::roads`).
///
/// # Errors
///
/// A file cannot be read, or `scan` fails on it; the message names the file.
pub fn scan_dir(
    dir: &Path,
    shown_from: &Path,
    skip: impl Fn(&Path) -> bool,
    scan: impl Fn(&str) -> Result<Vec<(String, String)>>,
) -> Result<Vec<Finding>> {
    let mut files = Vec::new();
    rs_files(dir, &mut files)?;
    files.sort();
    let mut out = Vec::new();
    for path in files {
        if path.strip_prefix(dir).is_ok_and(&skip) {
            continue;
        }
        let src = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let shown = path
            .strip_prefix(shown_from)
            .unwrap_or(&path)
            .display()
            .to_string();
        let found = scan(&src).map_err(|e| format!("{shown}: {e}"))?;
        out.extend(found.into_iter().map(|(within, what)| Finding {
            file: shown.clone(),
            within,
            what,
        }));
    }
    Ok(out)
}

/// The `*.rs` files under `dir`, recursively.
///
/// # Errors
///
/// A directory cannot be read.
pub fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for e in entries {
        let p = e?.path();
        if p.is_dir() {
            rs_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// Names under which `cuda_api` itself is known in a file:
/// `use cuda_api as api;`, `use cuda_api::{self as api};`,
/// `extern crate cuda_api as api;`.
#[derive(Default)]
struct Aliases(BTreeSet<String>);

impl<'ast> Visit<'ast> for Aliases {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        for (segments, rename, _) in flatten(&u.tree) {
            let is_crate = matches!(segments.as_slice(), [c] if c == SAFE_CRATE)
                || matches!(segments.as_slice(), [c, s] if c == SAFE_CRATE && s == "self");
            if is_crate && let Some(r) = rename {
                self.0.insert(r);
            }
        }
    }

    fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
        if e.ident == SAFE_CRATE
            && let Some((_, r)) = &e.rename
        {
            self.0.insert(r.to_string());
        }
    }
}

/// One flattened `use` path: its segments (a leading `::` dropped), the name
/// it is imported as, and whether it ends in a glob.
pub(crate) type UsePath = (Vec<String>, Option<String>, bool);

/// Every path a `use` tree imports.
pub(crate) fn flatten(tree: &syn::UseTree) -> Vec<UsePath> {
    fn go(t: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UsePath>) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                go(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut s = prefix.clone();
                s.push(n.ident.to_string());
                out.push((s, None, false));
            }
            syn::UseTree::Rename(r) => {
                let mut s = prefix.clone();
                s.push(r.ident.to_string());
                out.push((s, Some(r.rename.to_string()), false));
            }
            syn::UseTree::Glob(_) => out.push((prefix.clone(), None, true)),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    go(t, prefix, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    go(tree, &mut Vec::new(), &mut out);
    out
}

struct Finder {
    roots: BTreeSet<String>,
    within: Vec<String>,
    found: Vec<(String, String)>,
}

impl Finder {
    /// Whether a sequence of path segments names the raw layer: `cuda_sys`
    /// anywhere, or `cuda_api` (or an alias of it) followed by `driver`/`sys`.
    fn names_raw(&self, segments: &[String]) -> bool {
        segments.iter().any(|s| RAW_CRATES.contains(&s.as_str()))
            || segments
                .windows(2)
                .any(|w| self.roots.contains(&w[0]) && RAW_MODULES.contains(&w[1].as_str()))
    }

    fn report(&mut self, what: String) {
        self.found.push((self.within.join(" / "), what));
    }

    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            if let TokenTree::Group(g) = &tts[i] {
                self.scan_tokens(g.stream());
            }
            if let TokenTree::Ident(id) = &tts[i] {
                let id = id.to_string();
                if RAW_CRATES.contains(&id.as_str()) {
                    self.report(format!("`{id}` inside a macro call"));
                } else if self.roots.contains(&id)
                    && let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(next)) =
                        (tts.get(i + 1), tts.get(i + 2), tts.get(i + 3))
                    && a.as_char() == ':'
                    && b.as_char() == ':'
                {
                    match next {
                        TokenTree::Ident(m) if RAW_MODULES.contains(&m.to_string().as_str()) => {
                            self.report(format!("`{id}::{m}` inside a macro call"));
                        }
                        TokenTree::Group(g)
                            if g.stream().into_iter().any(|t| {
                                matches!(&t, TokenTree::Ident(m)
                                    if RAW_MODULES.contains(&m.to_string().as_str()))
                            }) =>
                        {
                            self.report(format!(
                                "`{id}::{{…}}` naming a raw module inside a macro call"
                            ));
                        }
                        _ => {}
                    }
                }
            }
            i += 1;
        }
    }

    fn enter(&mut self, what: String) {
        self.within.push(what);
    }
}

fn tokens_text(t: &impl ToTokens) -> String {
    let s = t.to_token_stream().to_string();
    // `quote` spaces every token; close up the path separators for reading.
    s.replace(" :: ", "::").replace(":: ", "::")
}

macro_rules! scoped {
    ($self:ident, $what:expr, $body:expr) => {{
        $self.enter($what);
        $body;
        $self.within.pop();
    }};
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let paths = flatten(&u.tree);
        let bad = paths.iter().any(|(segments, _, glob)| {
            self.names_raw(segments)
                || (*glob && segments.last().is_some_and(|l| self.roots.contains(l)))
        });
        if bad {
            let mut shown = u.clone();
            shown.attrs.clear();
            let file = syn::File {
                shebang: None,
                attrs: Vec::new(),
                items: vec![syn::Item::Use(shown)],
            };
            let text = prettyplease::unparse(&file);
            self.report(text.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }

    fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
        if RAW_CRATES.contains(&e.ident.to_string().as_str()) {
            self.report(tokens_text(e));
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if self.names_raw(&segments) {
            self.report(tokens_text(p));
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.scan_tokens(m.tokens.clone());
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        scoped!(
            self,
            format!("fn {}", f.sig.ident),
            syn::visit::visit_item_fn(self, f)
        )
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        scoped!(
            self,
            format!("fn {}", f.sig.ident),
            syn::visit::visit_impl_item_fn(self, f)
        )
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        scoped!(
            self,
            format!("fn {}", f.sig.ident),
            syn::visit::visit_trait_item_fn(self, f)
        )
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = &i.self_ty;
        scoped!(
            self,
            format!("impl {}", tokens_text(ty)),
            syn::visit::visit_item_impl(self, i)
        )
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        scoped!(
            self,
            format!("mod {}", m.ident),
            syn::visit::visit_item_mod(self, m)
        )
    }

    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        scoped!(
            self,
            format!("struct {}", s.ident),
            syn::visit::visit_item_struct(self, s)
        )
    }

    fn visit_item_enum(&mut self, e: &'ast syn::ItemEnum) {
        scoped!(
            self,
            format!("enum {}", e.ident),
            syn::visit::visit_item_enum(self, e)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(src: &str) -> Vec<String> {
        raw_layer_names(src)
            .unwrap()
            .into_iter()
            .map(|(_, w)| w)
            .collect()
    }

    #[test]
    fn every_spelling_of_the_raw_layer_is_found() {
        for src in [
            "use cuda_api::driver;",
            "use cuda_api::{driver, Stream};",
            "use cuda_api::{Stream, sys::{CUdeviceptr}};",
            "use ::cuda_api::sys::CUresult;",
            "use cuda_api::sys as raw;",
            "use cuda_api::*;",
            "use cuda_api as api; fn f() { api::driver::init(0); }",
            "use cuda_api::{self as api}; fn f() -> api::sys::CUresult { todo!() }",
            "extern crate cuda_api as ca; fn f() { let _ = ca::sys::CUresult::CUDA_SUCCESS; }",
            "fn f() { cuda_api::driver::ctx_get_current(); }",
            "fn f(x: cuda_api::sys::CUstream) {}",
            "struct S { p: Vec<cuda_api::sys::CUdeviceptr> }",
            "impl T for S { type X = cuda_api::sys::CUstream; }",
            "fn f() { println!(\"{:?}\", cuda_api::sys::CUresult::CUDA_SUCCESS); }",
            "fn f() { let _ = cuda_sys::cuInit(0); }",
        ] {
            assert!(!found(src).is_empty(), "not found in: {src}");
        }
    }

    #[test]
    fn safe_names_and_look_alikes_pass() {
        for src in [
            "use cuda_api::{Stream, Context};",
            "use cuda_api::MemoryKind;",
            "use crate::driver;",
            "mod sys {} fn f() { sys::x(); driver::y(); }",
            "fn f() { let s = \"cuda_api::driver\"; }",
            "/// Not [`cuda_api::driver`], which is the thin layer.\nfn f() {}",
            "fn f() { other::driver::x(); }",
        ] {
            assert!(found(src).is_empty(), "{src}: {:?}", found(src));
        }
    }

    #[test]
    fn findings_name_the_enclosing_item() {
        let got = raw_layer_names(
            "impl Device { fn current() { let _ = cuda_api::driver::ctx_get_current(); } }",
        )
        .unwrap();
        assert_eq!(
            got,
            vec![(
                "impl Device / fn current".to_string(),
                "cuda_api::driver::ctx_get_current".to_string()
            )]
        );
    }
}
