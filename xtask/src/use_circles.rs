//! The rooms rule (DESIGN.md §6, "Rooms by concept"): inside one source
//! directory, files import each other one way, never around a circle, so
//! that each file can be read standing on what it imports.
//!
//! [`rooms`] parses a directory's `.rs` files with `syn`. Each file directly
//! in the directory is a room, and so is each sub-folder (all its files
//! together, with the file of the same name: `typed.rs` and `typed/`), but
//! for the folders it is asked to open, whose files are rooms of their own
//! (`launch/kernel.rs`). An arrow runs from one room to another for every
//! path that reaches it:
//! - a `use` tree starting with `crate::`, `super::` or `self::`, however
//!   it is grouped or renamed (`use super::domain::{self, Dim}`);
//! - a path of that kind in code, types, patterns or `impl` headers
//!   (`crate::launch::domain::Dim::new`);
//! - a name that a module brings in with `use` (a face's `pub use`), which
//!   is followed to the file that defines it (`crate::CudaError` reaches
//!   cuda-api's `error.rs` through `lib.rs`).
//!
//! Not counted: faces (the directory's own `mod.rs` or `lib.rs`, and an open
//! folder's `mod.rs`: they declare the rooms and hand names on), glob
//! imports of a face (`use super::*`), visibility paths (`pub(in crate::x)`),
//! doc links, paths inside macro calls, paths that start with a name
//! imported before (`use super::prepare;` draws the arrow,
//! `prepare::run_cpu(..)` then adds nothing), and test code: `#[cfg(test)]`
//! items, `#[test]` functions and the files of a `#[cfg(test)] mod tests;`.
//!
//! [`circles`] finds the rooms that reach each other (the strongly connected
//! components of two rooms or more); [`check_crate`] reads a whole crate,
//! every folder opened, and holds its circles against a list of allowed
//! circles, each with its reason.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use syn::visit::Visit;

use crate::Result;
use crate::layers::{flatten, rs_files};
use crate::roads::is_test;

/// The arrows between a directory's rooms: room → room it imports → the
/// names it takes there (`Kernel`, `Dim::new`; the module's own name for
/// `use super::prepare;`, `prepare::*` for a glob).
pub type Rooms = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Rooms that reach each other through their imports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    /// The rooms, in name order.
    pub rooms: Vec<String>,
    /// Each arrow between two of them: `a.rs -> b.rs: Name, Other`.
    pub ties: Vec<String>,
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rooms: {}", self.rooms.len(), self.rooms.join(", "))?;
        for t in &self.ties {
            write!(f, "\n  {t}")?;
        }
        Ok(())
    }
}

/// A circle that is allowed to stay, for a reason: exactly these rooms.
#[derive(Debug, Clone, Copy)]
pub struct Allowed {
    /// The rooms, as [`Circle::rooms`] names them.
    pub rooms: &'static [&'static str],
    /// Why the circle stays (and what would break it).
    pub why: &'static str,
}

/// The rooms of the directory `dir`, which is module `module` of its crate
/// (`&[]` for a crate's `src`, `&["launch"]` for `src/launch`). The
/// sub-folders named in `open` are not one room each: each of their files
/// (and sub-folders) is a room of its own, named with the folder
/// (`launch/bind.rs`).
///
/// # Errors
///
/// A file cannot be read or does not parse; the message names the file.
pub fn rooms_of_dir(dir: &Path, module: &[&str], open: &[&str]) -> Result<Rooms> {
    let mut paths = Vec::new();
    rs_files(dir, &mut paths)?;
    paths.sort();
    let mut files = Vec::new();
    for p in paths {
        let rel = p.strip_prefix(dir).unwrap_or(&p);
        let rel = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let text =
            std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        files.push((rel, text));
    }
    rooms(&files, module, open)
}

/// The rooms of a directory given as `(path inside it, source)` pairs
/// (`kernel.rs`, `typed/tests.rs`, `mod.rs`), which is module `module` of
/// its crate, with the sub-folders `open` opened (see [`rooms_of_dir`]).
///
/// # Errors
///
/// A file does not parse; the message names it.
pub fn rooms(files: &[(String, String)], module: &[&str], open: &[&str]) -> Result<Rooms> {
    let module: Vec<String> = module.iter().map(ToString::to_string).collect();
    let names: BTreeSet<&str> = files.iter().map(|(r, _)| r.as_str()).collect();
    let mut parsed = Vec::new();
    for (rel, text) in files {
        let file = syn::parse_file(text).map_err(|e| format!("{rel}: not a Rust file: {e}"))?;
        let mut path = module.clone();
        path.extend(inner_path(rel));
        parsed.push((room_of(rel, open, &names), path, file));
    }
    // Files of `#[cfg(test)] mod x;` declarations are test code.
    let mut tests: Vec<Vec<String>> = Vec::new();
    for (_, path, file) in &parsed {
        for item in &file.items {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
                && is_test(&m.attrs)
            {
                let mut t = path.clone();
                t.push(m.ident.to_string());
                tests.push(t);
            }
        }
    }
    parsed.retain(|(_, path, _)| !tests.iter().any(|t| path.starts_with(t)));
    let mut map = Modules::default();
    for (room, path, _) in &parsed {
        map.rooms.insert(path.clone(), room.clone());
    }
    // What each file imports or re-exports under a name of its own.
    for (_, path, file) in &parsed {
        for item in &file.items {
            let syn::Item::Use(u) = item else { continue };
            if is_test(&u.attrs) {
                continue;
            }
            for (segs, rename, glob) in flatten(&u.tree) {
                let Some(abs) = map.resolve(&segs, path) else {
                    continue;
                };
                let name = rename.unwrap_or_else(|| segs[segs.len() - 1].clone());
                if !glob && name != "_" && name != "self" {
                    map.names.insert((path.clone(), name), abs);
                }
            }
        }
    }
    let mut out = Rooms::new();
    for (room, _, _) in &parsed {
        if let Some(room) = room {
            out.entry(room.clone()).or_default();
        }
    }
    for (room, path, file) in &parsed {
        let Some(from) = room else { continue };
        let mut v = Arrows {
            here: path,
            map: &map,
            found: Vec::new(),
        };
        v.visit_file(file);
        for (to, name) in v.found {
            if to != *from {
                out.entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(name);
            }
        }
    }
    Ok(out)
}

/// The room of the file `rel`: `kernel.rs`, or `typed.rs` for
/// `typed/tests.rs` beside it, or the folder `kernel/` for `kernel/args.rs`;
/// inside an `open` folder the same one level down (`launch/bind.rs`).
/// `None` for a face: the directory's own `mod.rs` or `lib.rs`, or an open
/// folder's `mod.rs`.
fn room_of(rel: &str, open: &[&str], names: &BTreeSet<&str>) -> Option<String> {
    let parts: Vec<&str> = rel.split('/').collect();
    let depth = usize::from(parts.len() > 1 && open.contains(&parts[0]));
    let prefix = parts[..depth]
        .iter()
        .map(|p| format!("{p}/"))
        .collect::<String>();
    let name = parts[depth];
    if parts.len() == depth + 1 && matches!(name, "mod.rs" | "lib.rs" | "main.rs") {
        return None;
    }
    let child = name.trim_end_matches(".rs");
    if names.contains(format!("{prefix}{child}.rs").as_str()) {
        Some(format!("{prefix}{child}.rs"))
    } else {
        Some(format!("{prefix}{child}/"))
    }
}

/// The module path of a file inside its directory: `kernel.rs` → `kernel`,
/// `typed/tests.rs` → `typed::tests`, `kernel/mod.rs` → `kernel`, and the
/// face (`mod.rs`, `lib.rs`, `main.rs`) → nothing.
fn inner_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(ToString::to_string)
        .collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    if matches!(parts.as_slice(), [f] if f == "lib" || f == "main") {
        parts.clear();
    }
    parts
}

/// The directory's modules and the names their `use` items bring in.
#[derive(Default)]
struct Modules {
    /// Module path (from the crate root) → its file's room (`None`: a face).
    rooms: BTreeMap<Vec<String>, Option<String>>,
    /// (module, name) → the path the name stands for (`pub use bind::Arg`
    /// in `launch` makes `launch::Arg` stand for `launch::bind::Arg`).
    names: BTreeMap<(Vec<String>, String), Vec<String>>,
}

impl Modules {
    /// The path from the crate root of `segs` written in module `here`:
    /// `crate::`, `self::` and `super::` paths, and paths that start with a
    /// child module of `here` (as a face writes `pub use bind::Arg`). A
    /// trailing `self` (`use a::{self}`) is dropped.
    fn resolve(&self, segs: &[String], here: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segs.split_first()?;
        let mut abs = match first.as_str() {
            "crate" => rest.to_vec(),
            "self" => [here, rest].concat(),
            "super" => {
                let mut base = here.to_vec();
                base.pop()?;
                let mut rest = rest;
                while let Some((s, r)) = rest.split_first()
                    && s == "super"
                {
                    base.pop()?;
                    rest = r;
                }
                [base.as_slice(), rest].concat()
            }
            _ => {
                let child = [here, &segs[..1]].concat();
                if !self.rooms.contains_key(&child) {
                    return None;
                }
                [here, segs].concat()
            }
        };
        if abs.last().is_some_and(|l| l == "self") {
            abs.pop();
        }
        Some(abs)
    }

    /// The room that the path `abs` (from the crate root) reaches, and the
    /// name taken there: the file of its longest known module, after
    /// following the names that modules bring in with `use`.
    fn room(&self, mut abs: Vec<String>, glob: bool) -> Option<(String, String)> {
        // A name brought in by `use` may stand for another such name; the
        // bound only stops a `use` loop that rustc would refuse anyway.
        for _ in 0..16 {
            let k = (0..=abs.len())
                .rev()
                .find(|k| self.rooms.contains_key(&abs[..*k]))?;
            if k < abs.len()
                && let Some(to) = self.names.get(&(abs[..k].to_vec(), abs[k].clone()))
            {
                abs = [to.as_slice(), &abs[k + 1..]].concat();
                continue;
            }
            let room = self.rooms[&abs[..k]].clone()?;
            let name = match (&abs[k..], abs[..k].last()) {
                ([], Some(m)) if glob => format!("{m}::*"),
                ([], Some(m)) => m.clone(),
                (rest, _) => rest.join("::"),
            };
            return Some((room, name));
        }
        None
    }
}

struct Arrows<'a> {
    here: &'a [String],
    map: &'a Modules,
    found: Vec<(String, String)>,
}

impl Arrows<'_> {
    fn reach(&mut self, segs: &[String], glob: bool) {
        let Some(abs) = self.map.resolve(segs, self.here) else {
            return;
        };
        if let Some(found) = self.map.room(abs, glob) {
            self.found.push(found);
        }
    }
}

impl<'ast> Visit<'ast> for Arrows<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if is_test(&u.attrs) {
            return;
        }
        for (segs, _, glob) in flatten(&u.tree) {
            self.reach(&segs, glob);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() >= 2 {
            self.reach(&segs, false);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_test(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

/// The circles among `rooms`: each set of two rooms or more that reach
/// each other, with the arrows between them, in name order.
#[must_use]
pub fn circles(rooms: &Rooms) -> Vec<Circle> {
    let names: Vec<&String> = rooms.keys().collect();
    let index: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let edges: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            rooms[*n]
                .keys()
                .filter_map(|t| index.get(t).copied())
                .collect()
        })
        .collect();
    let mut out: Vec<Circle> = strongly_connected(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut c| {
            c.sort_unstable();
            let set: BTreeSet<usize> = c.iter().copied().collect();
            let mut ties = Vec::new();
            for &a in &c {
                for (b, what) in &rooms[names[a]] {
                    if index.get(b).is_some_and(|i| set.contains(i)) {
                        let what: Vec<&str> = what.iter().map(String::as_str).collect();
                        ties.push(format!("{} -> {b}: {}", names[a], what.join(", ")));
                    }
                }
            }
            Circle {
                rooms: c.iter().map(|&i| names[i].clone()).collect(),
                ties,
            }
        })
        .collect();
    out.sort_by(|a, b| a.rooms.cmp(&b.rooms));
    out
}

/// Tarjan's strongly connected components of the graph `edges` (node →
/// nodes it points to).
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [Vec<usize>],
        next: usize,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.edges[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on_stack[w] => s.low[v] = s.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut c = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(c);
        }
    }
    let n = edges.len();
    let mut s = State {
        edges,
        next: 0,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// What is wrong with the circles of `rooms` against `allowed`: each circle
/// that no entry allows with exactly its rooms, and each entry that matches
/// no circle any more (a circle broken, or grown or shrunk: the list is
/// brought up to date with it).
#[must_use]
pub fn judge(rooms: &Rooms, allowed: &[Allowed]) -> Vec<String> {
    let found = circles(rooms);
    let mut problems = Vec::new();
    for c in &found {
        if !allowed.iter().any(|a| a.rooms == c.rooms.as_slice()) {
            problems.push(format!("a circle of {c}"));
        }
    }
    for a in allowed {
        if !found.iter().any(|c| a.rooms == c.rooms.as_slice()) {
            problems.push(format!(
                "the allowed circle {} is no circle any more: remove it from the list, or \
                 name the rooms of the circle that replaced it",
                a.rooms.join(", ")
            ));
        }
    }
    problems
}

/// [`judge`] of the whole crate whose source directory is `src`, file by
/// file: every sub-folder of `src` is opened (its files are rooms of their
/// own; a folder inside one is still one room).
///
/// # Errors
///
/// The directory cannot be listed, or a file cannot be read or does not
/// parse.
pub fn check_crate(src: &Path, allowed: &[Allowed]) -> Result<Vec<String>> {
    let mut folders = Vec::new();
    let entries =
        std::fs::read_dir(src).map_err(|e| format!("cannot list {}: {e}", src.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", src.display()))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            folders.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    let open: Vec<&str> = folders.iter().map(String::as_str).collect();
    Ok(judge(&rooms_of_dir(src, &[], &open)?, allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, s)| ((*p).to_string(), (*s).to_string()))
            .collect()
    }

    #[test]
    fn every_spelling_of_an_import_draws_an_arrow() {
        let r = rooms(
            &files(&[
                (
                    "mod.rs",
                    "mod a; mod b; mod c; mod d; mod e; mod f; pub use f::Face;",
                ),
                ("a.rs", "use super::b::{self, B};"),
                ("b.rs", "fn g() { crate::m::c::C::new(); }"),
                ("c.rs", "impl crate::m::d::D {}"),
                ("d.rs", "use crate::m::Face; use super::e::*;"),
                ("e.rs", ""),
                ("f.rs", "pub struct Face;"),
            ]),
            &["m"],
            &[],
        )
        .unwrap();
        let to = |from: &str| r[from].keys().cloned().collect::<Vec<_>>();
        assert_eq!(to("a.rs"), ["b.rs"]);
        assert_eq!(r["a.rs"]["b.rs"].iter().collect::<Vec<_>>(), ["B", "b"]);
        assert_eq!(to("b.rs"), ["c.rs"]);
        assert_eq!(to("c.rs"), ["d.rs"]);
        assert_eq!(to("d.rs"), ["e.rs", "f.rs"]);
        assert!(circles(&r).is_empty());
    }

    #[test]
    fn a_circle_is_found_with_its_ties_and_judged() {
        let r = rooms(
            &files(&[
                ("lib.rs", "mod a; mod b; mod c; mod k;"),
                ("a.rs", "use crate::b::B; pub struct A;"),
                ("b.rs", "use crate::k::K; pub struct B;"),
                ("c.rs", "use crate::a::A;"),
                ("k/mod.rs", "mod x;"),
                ("k/x.rs", "pub struct K(crate::a::A);"),
            ]),
            &[],
            &[],
        )
        .unwrap();
        let found = circles(&r);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].rooms, ["a.rs", "b.rs", "k/"]);
        assert_eq!(
            found[0].ties,
            ["a.rs -> b.rs: B", "b.rs -> k/: K", "k/ -> a.rs: A"]
        );
        let problems = judge(&r, &[]);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("a.rs, b.rs, k/"), "{problems:?}");
        let allowed = Allowed {
            rooms: &["a.rs", "b.rs", "k/"],
            why: "a test",
        };
        assert!(judge(&r, &[allowed]).is_empty());
        let stale = Allowed {
            rooms: &["a.rs", "c.rs"],
            why: "a test",
        };
        let problems = judge(&r, &[allowed, stale]);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("no circle any more"), "{problems:?}");
    }

    #[test]
    fn test_code_the_face_and_outside_paths_draw_nothing() {
        let r = rooms(
            &files(&[
                ("mod.rs", "mod a; mod b; mod t;"),
                (
                    "a.rs",
                    "#[cfg(test)] mod tests { use super::super::b::B; } \
                     #[cfg(test)] mod more; \
                     use super::*; use crate::other::X; use std::fmt; \
                     pub(in crate::m) fn f() {} \
                     #[test] fn t() { crate::m::b::B::new(); }",
                ),
                ("a/more.rs", "use crate::m::b::B;"),
                ("b.rs", "use super::a::f;"),
                (
                    "t.rs",
                    "fn g() { let _ = format!(\"{}\", crate::m::a::f()); }",
                ),
            ]),
            &["m"],
            &[],
        )
        .unwrap();
        assert!(r["a.rs"].is_empty(), "{r:?}");
        assert_eq!(r["b.rs"].keys().collect::<Vec<_>>(), ["a.rs"]);
        assert!(r["t.rs"].is_empty(), "{r:?}");
    }

    #[test]
    fn an_open_folder_shows_its_files_and_names_follow_the_faces() {
        let src = [
            ("lib.rs", "mod l; mod c; pub use l::Thing;"),
            ("l/mod.rs", "mod leaf; mod top; pub use leaf::Thing;"),
            ("l/leaf.rs", "pub struct Thing;"),
            ("l/top.rs", "use crate::c::run;"),
            ("c/mod.rs", "use crate::Thing; pub fn run() {}"),
        ];
        let folded = rooms(&files(&src), &[], &[]).unwrap();
        assert_eq!(circles(&folded).len(), 1, "{folded:?}");
        let open = rooms(&files(&src), &[], &["l"]).unwrap();
        assert_eq!(
            open.keys().collect::<Vec<_>>(),
            ["c/", "l/leaf.rs", "l/top.rs"]
        );
        assert_eq!(open["c/"].keys().collect::<Vec<_>>(), ["l/leaf.rs"]);
        assert_eq!(open["l/top.rs"].keys().collect::<Vec<_>>(), ["c/"]);
        assert!(circles(&open).is_empty(), "{open:?}");
    }
}
