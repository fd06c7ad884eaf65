//! The one-launch-road rule (DESIGN.md §4, "One road, one owner, one trust
//! root"): `warp-launch` starts kernel work only in its preparation module,
//! `warp-launch/src/launch/prepare.rs`, where each check a launch makes
//! lives once.
//!
//! [`launch_entries`] parses a source file with `syn` and reports every call
//! that starts kernel work outside that module:
//! - a method call `.launch(..)`, `.launch_cooperative(..)` or
//!   `.launch_checked(..)` with two or more
//!   arguments: cuda-api's `DynKernel::launch(stream, cfg, block)`,
//!   `TypedKernel::launch(stream, cfg, args)` and a capture's
//!   `launch(kernel, cfg, block)`, which makes a graph's kernel node
//!   (warp-launch's own builder, `kernel.launch(dim)`, and replays,
//!   `graph.launch(stream)`, take one);
//! - `.update_kernel(..)`, which rewrites a kernel node of an instantiated graph;
//! - a call of the CPU runner, a path ending in `cpu::run`.
//!
//! Test code (`#[cfg(test)]` items and `#[test]` functions) is not checked.

use std::path::Path;

use quote::ToTokens;
use syn::visit::Visit;

use crate::Result;
use crate::layers::{Finding, scan_dir};

/// The preparation module, relative to `warp-launch/src`: the only file
/// allowed to start kernel work.
pub const PREPARATION_MODULE: &str = "launch/prepare.rs";

/// Method names that start kernel work when called with two or more
/// arguments.
const LAUNCH_METHODS: &[&str] = &["launch", "launch_cooperative", "launch_checked"];

/// Every call in the Rust source `src` that starts kernel work, as
/// `(enclosing items, what)` pairs in source order.
///
/// # Errors
///
/// The source does not parse as a Rust file (the message has `syn`'s reason).
pub fn launch_entries(src: &str) -> Result<Vec<(String, String)>> {
    let file = syn::parse_file(src).map_err(|e| format!("not a Rust file: {e}"))?;
    let mut v = Finder::default();
    v.visit_file(&file);
    Ok(v.found)
}

/// Every call that starts kernel work in the `.rs` files under `src` (a
/// `warp-launch/src`) but its preparation module, with paths shown
/// relative to `shown_from`.
///
/// # Errors
///
/// A file that cannot be read or does not parse.
pub fn check_dir(src: &Path, shown_from: &Path) -> Result<Vec<Finding>> {
    scan_dir(
        src,
        shown_from,
        |p| p == Path::new(PREPARATION_MODULE),
        launch_entries,
    )
}

#[derive(Default)]
struct Finder {
    within: Vec<String>,
    found: Vec<(String, String)>,
}

/// Whether `attrs` mark test code: `#[test]` or `#[cfg(test)]`.
pub(crate) fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
    })
}

impl Finder {
    fn report(&mut self, what: String) {
        self.found.push((self.within.join(" / "), what));
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if is_test(&m.attrs) {
            return;
        }
        self.within.push(format!("mod {}", m.ident));
        syn::visit::visit_item_mod(self, m);
        self.within.pop();
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        self.within.push(format!("fn {}", f.sig.ident));
        syn::visit::visit_item_fn(self, f);
        self.within.pop();
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if is_test(&i.attrs) {
            return;
        }
        let ty = i.self_ty.to_token_stream().to_string();
        self.within.push(format!("impl {ty}"));
        syn::visit::visit_item_impl(self, i);
        self.within.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        self.within.push(format!("fn {}", f.sig.ident));
        syn::visit::visit_impl_item_fn(self, f);
        self.within.pop();
    }

    fn visit_expr_method_call(&mut self, c: &'ast syn::ExprMethodCall) {
        let name = c.method.to_string();
        if (LAUNCH_METHODS.contains(&name.as_str()) && c.args.len() >= 2) || name == "update_kernel"
        {
            self.report(format!(".{name}(..) with {} argument(s)", c.args.len()));
        }
        syn::visit::visit_expr_method_call(self, c);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            let segs: Vec<String> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            if segs.len() >= 2 && segs[segs.len() - 2] == "cpu" && segs[segs.len() - 1] == "run" {
                self.report(format!("{}(..)", segs.join("::")));
            }
        }
        syn::visit::visit_expr_call(self, c);
    }
}
