//! `cargo xtask public-api`: every public item of a library crate and every
//! path it is reachable by, read from the sources with `syn`.
//!
//! The walk starts at `src/lib.rs`, loads each `mod` from its file (or takes
//! it inline), and follows public modules and `pub use` re-exports (renames,
//! groups, globs, `self`/`super`/`crate` paths; a path whose first segment is
//! no name of the crate is another crate's). An item is anything a path can
//! end at: a `fn`, type, trait, `const`, `static`, exported macro, or
//! another crate's item re-exported; modules are listed apart. Items marked
//! `#[doc(hidden)]` or `#[cfg(test)]` are left out; `#[cfg(feature = ..)]`
//! items are in. Methods and enum variants are not items here: they are
//! reached through their type.
//!
//! The rule this serves (issue 15, "one path per public item"): each public
//! item has exactly one public path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::Result;

/// What a public item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A function.
    Fn,
    /// A struct.
    Struct,
    /// An enum.
    Enum,
    /// A union.
    Union,
    /// A trait.
    Trait,
    /// A type alias.
    Type,
    /// A constant.
    Const,
    /// A static.
    Static,
    /// A `#[macro_export]` macro.
    Macro,
    /// A module of this crate.
    Mod,
    /// Another crate, re-exported (`pub use cuda_sys as sys`).
    Crate,
    /// An item of another crate, re-exported (`pub use cuda_api::Stream`).
    External,
    /// An item a macro defines: not in the source as written, but named by a
    /// `pub use` (which compiles only if the item is public where it is).
    MacroMade,
}

impl Kind {
    /// The keyword shown in listings.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Fn => "fn",
            Kind::Struct => "struct",
            Kind::Enum => "enum",
            Kind::Union => "union",
            Kind::Trait => "trait",
            Kind::Type => "type",
            Kind::Const => "const",
            Kind::Static => "static",
            Kind::Macro => "macro",
            Kind::Mod => "mod",
            Kind::Crate => "crate",
            Kind::External => "extern",
            Kind::MacroMade => "item (made by a macro)",
        }
    }

    fn is_module(self) -> bool {
        matches!(self, Kind::Mod | Kind::Crate)
    }
}

/// What a name resolves to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Target {
    /// An item defined in module `module` (an index into [`Crate::modules`]).
    Item {
        module: usize,
        name: String,
        kind: Kind,
    },
    /// A module of this crate.
    Module(usize),
    /// Another crate's path (`cuda_sys`, `cuda_api::Stream`).
    External(String),
}

#[derive(Debug)]
struct Def {
    name: String,
    kind: Kind,
    public: bool,
    /// For `mod`: the module's index.
    module: Option<usize>,
}

#[derive(Debug)]
struct Use {
    /// The path, `self`/`super`/`crate` included; a leading `::` is kept as "::".
    segments: Vec<String>,
    /// The name it is imported as; `None` for a glob.
    name: Option<String>,
    public: bool,
}

#[derive(Debug)]
struct Module {
    /// The module's path from the crate root, by definition (`generated::driver`).
    path: Vec<String>,
    parent: Option<usize>,
    /// Its file begins with `// @generated`.
    generated: bool,
    defs: Vec<Def>,
    uses: Vec<Use>,
}

/// A library crate read from its sources.
#[derive(Debug)]
pub struct Crate {
    /// The crate's name as paths spell it (`cuda_api`).
    pub name: String,
    modules: Vec<Module>,
}

/// One public item and every public path to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// What it is.
    pub kind: Kind,
    /// Where it is defined, as a path (`cuda_api::args::ArgBlock`), or the
    /// other crate's path for a re-export.
    pub defined: String,
    /// Every public path, sorted (`cuda_api::ArgBlock`, `cuda_api::args::ArgBlock`).
    pub paths: Vec<String>,
    /// Defined in a file marked `// @generated`.
    pub generated: bool,
}

/// The public surface of one crate.
#[derive(Debug, Clone, Default)]
pub struct Surface {
    /// Items that are not modules, by defining path.
    pub items: Vec<Item>,
    /// Public modules (this crate's and re-exported crates), by defining path.
    pub modules: Vec<Item>,
}

impl Surface {
    /// Items reachable by two or more paths.
    pub fn by_two_paths(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(|i| i.paths.len() > 1)
    }

    /// Items not reachable at the crate root (`krate::Name`).
    pub fn only_through_modules(&self) -> impl Iterator<Item = &Item> {
        self.items
            .iter()
            .filter(|i| i.paths.iter().all(|p| p.matches("::").count() > 1))
    }

    /// One line of counts: items written by hand and items in generated
    /// modules apart, each with how many are reachable by two or more paths
    /// and how many only through module paths, then the public modules.
    pub fn summary(&self, krate: &str) -> String {
        let count = |generated: bool| {
            let items: Vec<&Item> = self
                .items
                .iter()
                .filter(|i| i.generated == generated)
                .collect();
            let two = items.iter().filter(|i| i.paths.len() > 1).count();
            let only_mod = items
                .iter()
                .filter(|i| i.paths.iter().all(|p| p.matches("::").count() > 1))
                .count();
            format!(
                "{} ({two} by two or more paths, {only_mod} only through module paths)",
                items.len()
            )
        };
        format!(
            "{krate}: {} public items; hand-written {}; generated {}; {} public modules ({} by two or more paths)",
            self.items.len(),
            count(false),
            count(true),
            self.modules.len(),
            self.modules.iter().filter(|m| m.paths.len() > 1).count(),
        )
    }
}

fn is_hidden_or_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let doc_hidden = a.path().is_ident("doc")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string().trim() == "hidden");
        let cfg_test = a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string().trim() == "test");
        doc_hidden || cfg_test
    })
}

fn has_attr(attrs: &[syn::Attribute], name: &str) -> bool {
    attrs.iter().any(|a| a.path().is_ident(name))
}

/// The value of `#[path = "..."]`.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn is_pub(v: &syn::Visibility) -> bool {
    matches!(v, syn::Visibility::Public(_))
}

/// Where a source file comes from: the disk, or (in tests) a map.
pub trait Sources {
    /// The text of `path`, or `None` when there is no such file.
    fn read(&self, path: &Path) -> Option<String>;
}

/// Files on disk.
pub struct Disk;

impl Sources for Disk {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

impl Sources for BTreeMap<PathBuf, String> {
    fn read(&self, path: &Path) -> Option<String> {
        self.get(path).cloned()
    }
}

impl Crate {
    /// Reads the crate whose root file is `lib_rs`; `name` is the crate's
    /// name as paths spell it (`cuda_api`).
    ///
    /// # Errors
    ///
    /// A module file is missing or does not parse; the message names the file
    /// (and the `mod` declaration for a missing one).
    pub fn load(name: &str, lib_rs: &Path, sources: &dyn Sources) -> Result<Crate> {
        let mut c = Crate {
            name: name.to_string(),
            modules: Vec::new(),
        };
        let text = sources
            .read(lib_rs)
            .ok_or_else(|| format!("cannot read {}", lib_rs.display()))?;
        let file = syn::parse_file(&text)
            .map_err(|e| format!("{}: does not parse: {e}", lib_rs.display()))?;
        let dir = lib_rs.parent().unwrap_or(Path::new("")).to_path_buf();
        c.add_module(
            Vec::new(),
            None,
            text.starts_with("// @generated"),
            &file.items,
            lib_rs,
            &dir,
            sources,
        )?;
        c.add_macro_made_items();
        Ok(c)
    }

    /// Adds, as public items, the names that a `pub use` takes from one of
    /// this crate's modules where no item of that name is written (a macro
    /// made it). Re-exporting an item that is not public does not compile,
    /// so such an item is public in its module.
    fn add_macro_made_items(&mut self) {
        let mut made: BTreeSet<(usize, String)> = BTreeSet::new();
        for (mi, m) in self.modules.iter().enumerate() {
            for u in m.uses.iter().filter(|u| u.public && u.name.is_some()) {
                let Some((last, prefix)) = u.segments.split_last() else {
                    continue;
                };
                if prefix.is_empty() || last == "self" {
                    continue;
                }
                let mut guard = BTreeSet::new();
                for t in self.resolve(mi, prefix, &mut guard) {
                    if let Target::Module(owner) = t
                        && self.lookup(owner, last, false, &mut guard).is_empty()
                    {
                        made.insert((owner, last.clone()));
                    }
                }
            }
        }
        for (owner, name) in made {
            self.modules[owner].defs.push(Def {
                name,
                kind: Kind::MacroMade,
                public: true,
                module: None,
            });
        }
    }

    /// Adds a module with `items`, read from `file`; its child modules' files
    /// are under `dir`. Returns its index.
    #[allow(clippy::too_many_arguments)]
    fn add_module(
        &mut self,
        path: Vec<String>,
        parent: Option<usize>,
        generated: bool,
        items: &[syn::Item],
        file: &Path,
        dir: &Path,
        sources: &dyn Sources,
    ) -> Result<usize> {
        let me = self.modules.len();
        self.modules.push(Module {
            path: path.clone(),
            parent,
            generated,
            defs: Vec::new(),
            uses: Vec::new(),
        });
        for item in items {
            let (name, kind, vis, attrs) = match item {
                syn::Item::Fn(i) => (i.sig.ident.to_string(), Kind::Fn, &i.vis, &i.attrs),
                syn::Item::Struct(i) => (i.ident.to_string(), Kind::Struct, &i.vis, &i.attrs),
                syn::Item::Enum(i) => (i.ident.to_string(), Kind::Enum, &i.vis, &i.attrs),
                syn::Item::Union(i) => (i.ident.to_string(), Kind::Union, &i.vis, &i.attrs),
                syn::Item::Trait(i) => (i.ident.to_string(), Kind::Trait, &i.vis, &i.attrs),
                syn::Item::Type(i) => (i.ident.to_string(), Kind::Type, &i.vis, &i.attrs),
                syn::Item::Const(i) => (i.ident.to_string(), Kind::Const, &i.vis, &i.attrs),
                syn::Item::Static(i) => (i.ident.to_string(), Kind::Static, &i.vis, &i.attrs),
                syn::Item::Macro(m) => {
                    if let Some(id) = &m.ident
                        && has_attr(&m.attrs, "macro_export")
                        && !is_hidden_or_test(&m.attrs)
                    {
                        // Exported macros live at the crate root.
                        self.modules[0].defs.push(Def {
                            name: id.to_string(),
                            kind: Kind::Macro,
                            public: true,
                            module: None,
                        });
                    }
                    continue;
                }
                syn::Item::Use(u) => {
                    if is_hidden_or_test(&u.attrs) {
                        continue;
                    }
                    let mut flat = Vec::new();
                    let lead = u.leading_colon.is_some().then(|| "::".to_string());
                    flatten(&u.tree, &mut lead.into_iter().collect(), &mut flat);
                    for (segments, name) in flat {
                        self.modules[me].uses.push(Use {
                            segments,
                            name,
                            public: is_pub(&u.vis),
                        });
                    }
                    continue;
                }
                syn::Item::ExternCrate(e) => {
                    let name = e
                        .rename
                        .as_ref()
                        .map_or(e.ident.to_string(), |(_, r)| r.to_string());
                    self.modules[me].uses.push(Use {
                        segments: vec!["::".into(), e.ident.to_string()],
                        name: Some(name),
                        public: is_pub(&e.vis),
                    });
                    continue;
                }
                syn::Item::Mod(m) => {
                    if is_hidden_or_test(&m.attrs) {
                        continue;
                    }
                    let name = m.ident.to_string();
                    let mut child_path = path.clone();
                    child_path.push(name.clone());
                    let idx = match &m.content {
                        Some((_, inner)) => {
                            let child_dir = dir.join(&name);
                            self.add_module(
                                child_path,
                                Some(me),
                                generated,
                                inner,
                                file,
                                &child_dir,
                                sources,
                            )?
                        }
                        None => {
                            let candidates: Vec<PathBuf> = match path_attr(&m.attrs) {
                                Some(p) => vec![file.parent().unwrap_or(dir).join(p)],
                                None => vec![
                                    dir.join(format!("{name}.rs")),
                                    dir.join(&name).join("mod.rs"),
                                ],
                            };
                            let found = candidates
                                .iter()
                                .find_map(|p| sources.read(p).map(|t| (p.clone(), t)));
                            let Some((child_file, text)) = found else {
                                return Err(format!(
                                    "{}: `mod {name};` has no file (looked for {})",
                                    file.display(),
                                    candidates
                                        .iter()
                                        .map(|p| p.display().to_string())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                )
                                .into());
                            };
                            let parsed = syn::parse_file(&text).map_err(|e| {
                                format!("{}: does not parse: {e}", child_file.display())
                            })?;
                            let child_dir = if child_file.ends_with("mod.rs") {
                                child_file.parent().unwrap_or(dir).to_path_buf()
                            } else {
                                dir.join(&name)
                            };
                            self.add_module(
                                child_path,
                                Some(me),
                                text.starts_with("// @generated"),
                                &parsed.items,
                                &child_file,
                                &child_dir,
                                sources,
                            )?
                        }
                    };
                    self.modules[me].defs.push(Def {
                        name,
                        kind: Kind::Mod,
                        public: is_pub(&m.vis),
                        module: Some(idx),
                    });
                    continue;
                }
                _ => continue,
            };
            if is_hidden_or_test(attrs) {
                continue;
            }
            self.modules[me].defs.push(Def {
                name,
                kind,
                public: is_pub(vis),
                module: None,
            });
        }
        Ok(me)
    }

    fn def_target(&self, module: usize, d: &Def) -> Target {
        match d.module {
            Some(m) => Target::Module(m),
            None => Target::Item {
                module,
                name: d.name.clone(),
                kind: d.kind,
            },
        }
    }

    /// What `name` means inside `module` (`public_only`: as seen from
    /// outside, through `module::name`).
    fn lookup(
        &self,
        module: usize,
        name: &str,
        public_only: bool,
        guard: &mut BTreeSet<(usize, String)>,
    ) -> Vec<Target> {
        if !guard.insert((module, name.to_string())) {
            return Vec::new();
        }
        let m = &self.modules[module];
        let mut out: Vec<Target> = m
            .defs
            .iter()
            .filter(|d| d.name == name && (d.public || !public_only))
            .map(|d| self.def_target(module, d))
            .collect();
        for u in &m.uses {
            if public_only && !u.public {
                continue;
            }
            match &u.name {
                Some(n) if n == name => out.extend(self.resolve(module, &u.segments, guard)),
                None => {
                    for t in self.resolve(module, &u.segments, guard) {
                        match t {
                            Target::Module(g) => out.extend(self.lookup(g, name, true, guard)),
                            Target::External(p) => {
                                out.push(Target::External(format!("{p}::{name}")))
                            }
                            Target::Item { .. } => {}
                        }
                    }
                }
                _ => {}
            }
        }
        guard.remove(&(module, name.to_string()));
        out.sort();
        out.dedup();
        out
    }

    /// What a `use` path means inside `module`.
    fn resolve(
        &self,
        module: usize,
        segments: &[String],
        guard: &mut BTreeSet<(usize, String)>,
    ) -> Vec<Target> {
        let Some((first, rest)) = segments.split_first() else {
            return Vec::new();
        };
        let mut current: Vec<Target> = match first.as_str() {
            "crate" => vec![Target::Module(0)],
            "self" => vec![Target::Module(module)],
            "super" => match self.modules[module].parent {
                Some(p) => vec![Target::Module(p)],
                None => Vec::new(),
            },
            "::" => match rest.split_first() {
                Some((krate, tail)) => {
                    let mut t = vec![Target::External(krate.clone())];
                    for s in tail {
                        t = self.step(&t, s, guard);
                    }
                    return t;
                }
                None => Vec::new(),
            },
            name => {
                let local = self.lookup(module, name, false, guard);
                if local.is_empty() {
                    vec![Target::External(name.to_string())]
                } else {
                    local
                }
            }
        };
        for s in rest {
            current = self.step(&current, s, guard);
        }
        current
    }

    fn step(
        &self,
        from: &[Target],
        seg: &str,
        guard: &mut BTreeSet<(usize, String)>,
    ) -> Vec<Target> {
        let mut out = Vec::new();
        for t in from {
            match t {
                Target::Module(m) if seg == "self" => out.push(Target::Module(*m)),
                Target::Module(m) if seg == "super" => {
                    out.extend(self.modules[*m].parent.map(Target::Module))
                }
                Target::Module(m) => out.extend(self.lookup(*m, seg, false, guard)),
                Target::External(p) if seg == "self" => out.push(Target::External(p.clone())),
                Target::External(p) => out.push(Target::External(format!("{p}::{seg}"))),
                Target::Item { .. } => {}
            }
        }
        out
    }

    /// The names a module shows to the outside, each with what it means.
    fn exports(&self, module: usize) -> Vec<(String, Target)> {
        self.exports_from(module, &mut BTreeSet::new())
    }

    /// [`Crate::exports`], not entering a module in `seen` again (glob cycles).
    fn exports_from(&self, module: usize, seen: &mut BTreeSet<usize>) -> Vec<(String, Target)> {
        if !seen.insert(module) {
            return Vec::new();
        }
        let m = &self.modules[module];
        let mut names: BTreeSet<String> = m
            .defs
            .iter()
            .filter(|d| d.public)
            .map(|d| d.name.clone())
            .collect();
        for u in m.uses.iter().filter(|u| u.public) {
            match &u.name {
                Some(n) if n != "_" => {
                    names.insert(n.clone());
                }
                None => {
                    for t in self.resolve(module, &u.segments, &mut BTreeSet::new()) {
                        if let Target::Module(g) = t {
                            names.extend(self.exports_from(g, seen).into_iter().map(|(n, _)| n));
                        }
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        for n in names {
            for t in self.lookup(module, &n, true, &mut BTreeSet::new()) {
                out.push((n.clone(), t));
            }
        }
        out
    }

    fn defined_path(&self, t: &Target) -> (String, Kind, bool) {
        let join = |m: usize, tail: Option<&str>| {
            let mut p = vec![self.name.clone()];
            p.extend(self.modules[m].path.iter().cloned());
            p.extend(tail.map(str::to_string));
            p.join("::")
        };
        match t {
            Target::Item { module, name, kind } => (
                join(*module, Some(name)),
                *kind,
                self.modules[*module].generated,
            ),
            Target::Module(m) => (join(*m, None), Kind::Mod, self.modules[*m].generated),
            Target::External(p) => {
                let kind = if p.contains("::") {
                    Kind::External
                } else {
                    Kind::Crate
                };
                (p.clone(), kind, false)
            }
        }
    }

    /// Every public item and module with its public paths.
    pub fn surface(&self) -> Surface {
        let mut paths: BTreeMap<Target, BTreeSet<String>> = BTreeMap::new();
        // Depth-first over public modules; a module already on the way down
        // is not entered again (re-export cycles).
        let mut stack = vec![(0usize, self.name.clone(), vec![0usize])];
        while let Some((m, at, on_way)) = stack.pop() {
            for (name, t) in self.exports(m) {
                let p = format!("{at}::{name}");
                if let Target::Module(child) = t
                    && !on_way.contains(&child)
                    && on_way.len() < 16
                {
                    let mut way = on_way.clone();
                    way.push(child);
                    stack.push((child, p.clone(), way));
                }
                paths.entry(t).or_default().insert(p);
            }
        }
        let mut s = Surface::default();
        for (t, ps) in paths {
            let (defined, kind, generated) = self.defined_path(&t);
            let item = Item {
                kind,
                defined,
                paths: ps.into_iter().collect(),
                generated,
            };
            if kind.is_module() {
                s.modules.push(item);
            } else {
                s.items.push(item);
            }
        }
        s.items.sort_by(|a, b| a.defined.cmp(&b.defined));
        s.modules.sort_by(|a, b| a.defined.cmp(&b.defined));
        s
    }
}

/// Flattens a `use` tree into (path, imported-as) pairs; a glob has no name.
fn flatten(
    t: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    match t {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut s = prefix.clone();
            s.push(n.ident.to_string());
            // `use a::b::{self}` imports `b`.
            let name = if n.ident == "self" {
                prefix.last().cloned().unwrap_or_default()
            } else {
                n.ident.to_string()
            };
            out.push((s, Some(name)));
        }
        syn::UseTree::Rename(r) => {
            let mut s = prefix.clone();
            s.push(r.ident.to_string());
            out.push((s, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten(t, prefix, out);
            }
        }
    }
}

/// The library crates `cargo xtask public-api` lists by default: (directory,
/// crate name).
pub const CRATES: &[(&str, &str)] = &[
    ("cuda-api", "cuda_api"),
    ("warp-proof", "warp_proof"),
    ("warp-launch", "warp_launch"),
];

/// Reads the library crate in `root/dir` (its `src/lib.rs`).
///
/// # Errors
///
/// As [`Crate::load`].
pub fn load_workspace_crate(root: &Path, dir: &str) -> Result<Crate> {
    let name = dir.replace('-', "_");
    Crate::load(&name, &root.join(dir).join("src/lib.rs"), &Disk)
}

/// `cargo xtask public-api [--all] [CRATE_DIR..]`: for each crate directory
/// of `dirs` (none: [`CRATES`]), one line of counts, then every item
/// reachable by two or more paths with its paths (`all`: every item and
/// module).
///
/// # Errors
///
/// A crate cannot be read (see [`Crate::load`]).
pub fn run(root: &Path, all: bool, dirs: &[String]) -> Result<()> {
    let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
    let dirs: Vec<&str> = if dirs.is_empty() {
        CRATES.iter().map(|(d, _)| *d).collect()
    } else {
        dirs
    };
    let mut summaries = Vec::new();
    for dir in dirs {
        let c = load_workspace_crate(root, dir)?;
        let s = c.surface();
        println!("{}", s.summary(&c.name));
        let shown: Vec<&Item> = if all {
            s.modules.iter().chain(&s.items).collect()
        } else {
            s.by_two_paths()
                .chain(s.modules.iter().filter(|m| m.paths.len() > 1))
                .collect()
        };
        for i in shown {
            let gen_mark = if i.generated { " (generated)" } else { "" };
            println!("  {} {}{gen_mark}", i.kind.word(), i.defined);
            for p in &i.paths {
                println!("      {p}");
            }
        }
        summaries.push(s.summary(&c.name));
    }
    if summaries.len() > 1 {
        println!();
        for s in summaries {
            println!("{s}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn krate(files: &[(&str, &str)]) -> Surface {
        let map: BTreeMap<PathBuf, String> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect();
        Crate::load("k", Path::new("src/lib.rs"), &map)
            .unwrap()
            .surface()
    }

    fn paths_of<'a>(s: &'a Surface, defined: &str) -> Vec<&'a str> {
        s.items
            .iter()
            .chain(&s.modules)
            .find(|i| i.defined == defined)
            .map(|i| i.paths.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    #[test]
    fn re_exports_give_items_second_paths() {
        let s = krate(&[
            (
                "src/lib.rs",
                "pub mod a; mod hidden_mod; pub use a::{Thing, f as g}; pub use hidden_mod::Only;\n\
                 pub use other_crate::Ext; pub use other_crate as oc;\n\
                 #[doc(hidden)] pub mod fuzz; #[cfg(test)] mod tests;",
            ),
            (
                "src/a.rs",
                "pub struct Thing; pub fn f() {} fn private() {} pub(crate) fn pc() {}",
            ),
            ("src/hidden_mod.rs", "pub struct Only;"),
            ("src/fuzz.rs", "pub fn fuzz() {}"),
        ]);
        assert_eq!(paths_of(&s, "k::a::Thing"), ["k::Thing", "k::a::Thing"]);
        assert_eq!(paths_of(&s, "k::a::f"), ["k::a::f", "k::g"]);
        assert_eq!(paths_of(&s, "k::hidden_mod::Only"), ["k::Only"]);
        assert_eq!(paths_of(&s, "other_crate::Ext"), ["k::Ext"]);
        assert_eq!(paths_of(&s, "other_crate"), ["k::oc"]);
        assert!(paths_of(&s, "k::a::private").is_empty());
        assert!(paths_of(&s, "k::a::pc").is_empty());
        assert!(paths_of(&s, "k::fuzz::fuzz").is_empty());
        assert_eq!(s.by_two_paths().count(), 2);
        assert_eq!(s.only_through_modules().count(), 0);
        assert_eq!(s.items.len(), 4);
    }

    #[test]
    fn nested_files_groups_globs_super_and_module_re_exports() {
        let s = krate(&[
            (
                "src/lib.rs",
                "mod inner; pub use inner::deep; pub use self::inner::deep::*;\n\
                 pub mod inline { pub use super::inner::deep::{self as d2}; pub enum E {} }",
            ),
            ("src/inner/mod.rs", "pub mod deep;"),
            ("src/inner/deep.rs", "pub const C: u8 = 1; pub trait T {}"),
        ]);
        // `C` by the module re-export, the glob, and `inline::d2`.
        assert_eq!(
            paths_of(&s, "k::inner::deep::C"),
            ["k::C", "k::deep::C", "k::inline::d2::C"]
        );
        assert_eq!(paths_of(&s, "k::inner::deep"), ["k::deep", "k::inline::d2"]);
        assert_eq!(paths_of(&s, "k::inline::E"), ["k::inline::E"]);
        assert_eq!(s.only_through_modules().count(), 1);
    }

    #[test]
    fn items_made_by_a_macro_are_found_through_their_re_export() {
        let s = krate(&[
            ("src/lib.rs", "pub mod m; pub use m::Made;"),
            ("src/m.rs", "make!(Made);"),
        ]);
        assert_eq!(paths_of(&s, "k::m::Made"), ["k::Made", "k::m::Made"]);
        assert_eq!(s.items[0].kind, Kind::MacroMade);
    }

    #[test]
    fn a_missing_module_file_is_an_error_naming_it() {
        let map: BTreeMap<PathBuf, String> =
            [(PathBuf::from("src/lib.rs"), "pub mod gone;".to_string())].into();
        let e = Crate::load("k", Path::new("src/lib.rs"), &map).unwrap_err();
        assert!(e.to_string().contains("`mod gone;` has no file"), "{e}");
        assert!(e.to_string().contains("src/gone.rs"), "{e}");
    }
}
