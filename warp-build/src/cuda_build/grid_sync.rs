//! Which kernels synchronise the whole grid, read from the compiled PTX.
//!
//! Cooperative groups' grid barrier (`this_grid().sync()`) finds its
//! workspace through the `%envreg1` / `%envreg2` registers, which the
//! driver fills only for a cooperative launch; no other code NVRTC emits
//! for a kernel reads them. A kernel reading them, itself or through a
//! function it calls (`.func`, followed through `call`), may wait for every
//! block of its grid, so it gets only a cooperative launcher. A barrier
//! the kernel builds itself (atomics and a spin loop) is not seen: that is
//! the user's promise, as any other hand-made synchronisation.

use std::collections::{BTreeMap, BTreeSet};

/// The `.entry` names of `ptx` that reach a grid barrier.
pub(crate) fn grid_syncing(ptx: &str) -> BTreeSet<String> {
    // Each function's name, whether it is an entry, what it calls, and
    // whether it reads the workspace registers itself.
    let mut funcs: BTreeMap<String, (bool, BTreeSet<String>, bool)> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in ptx.lines() {
        let l = line.trim();
        let head = l
            .strip_prefix(".visible ")
            .or_else(|| l.strip_prefix(".weak "))
            .unwrap_or(l);
        let entry = head.starts_with(".entry ");
        if entry || head.starts_with(".func ") {
            let name = head
                .split_whitespace()
                .skip(1)
                .find(|w| !w.starts_with('('))
                .map(|w| w.split('(').next().unwrap_or(w).to_string())
                .unwrap_or_default();
            funcs.entry(name.clone()).or_default().0 |= entry;
            current = Some(name);
            continue;
        }
        let Some(name) = &current else { continue };
        let f = funcs.entry(name.clone()).or_default();
        if l.contains("%envreg1") || l.contains("%envreg2") {
            f.2 = true;
        }
        if let Some(rest) = l.split_once("call").map(|(_, r)| r)
            && l.starts_with("call")
        {
            // `call.uni (retval), name, (args);` or `call name, (...)`.
            let callee = rest
                .split([',', ';', ' ', '('])
                .map(str::trim)
                .find(|w| !w.is_empty() && !w.starts_with('.') && !w.starts_with('('));
            if let Some(c) = callee {
                f.1.insert(c.to_string());
            }
        }
    }
    let reaches = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.to_string()];
        while let Some(n) = todo.pop() {
            if !seen.insert(n.clone()) {
                continue;
            }
            if let Some((_, calls, reads)) = funcs.get(&n) {
                if *reads {
                    return true;
                }
                todo.extend(calls.iter().cloned());
            }
        }
        false
    };
    funcs
        .iter()
        .filter(|(_, (entry, _, _))| *entry)
        .filter(|(n, _)| reaches(n))
        .map(|(n, _)| n.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_reaching_the_workspace_registers() {
        let ptx = "\
.func  (.param .b32 func_retval0) helper(\n\t.param .b64 p\n)\n{\n\tmov.u32 %r8, %envreg2;\n\tret;\n}\n\
.visible .entry direct(\n\t.param .u64 x\n)\n{\n\tmov.u32 %r1, %envreg1;\n\tret;\n}\n\
.visible .entry through_call(\n)\n{\n\tcall.uni (retval0), helper, (param0);\n\tret;\n}\n\
.visible .entry plain(\n)\n{\n\tbar.sync 0;\n\tret;\n}\n";
        let found: Vec<String> = grid_syncing(ptx).into_iter().collect();
        assert_eq!(found, ["direct", "through_call"]);
    }
}
