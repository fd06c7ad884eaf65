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

/// PTX as tokens: names (letters, digits, `_`, `$`, `%`, `.`) and single
/// punctuation characters, comments left out. Line breaks do not matter:
/// NVRTC splits a `call` over several lines.
fn tokens(ptx: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = ptx.as_bytes();
    let mut i = 0;
    let name = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'%' | b'.');
    while i < bytes.len() {
        let b = bytes[i];
        if ptx[i..].starts_with("//") {
            i = ptx[i..].find('\n').map_or(bytes.len(), |e| i + e);
        } else if ptx[i..].starts_with("/*") {
            i = ptx[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |e| i + 2 + e + 2);
        } else if b.is_ascii_whitespace() {
            i += 1;
        } else if name(b) {
            let start = i;
            while i < bytes.len() && name(bytes[i]) {
                i += 1;
            }
            out.push(&ptx[start..i]);
        } else {
            // One character (ASCII in PTX; any other byte is passed over).
            let len = ptx[i..].chars().next().map_or(1, char::len_utf8);
            out.push(&ptx[i..i + len]);
            i += len;
        }
    }
    out
}

/// The index after the group that opens at `tokens[at]` (a `(`), or `at`
/// when no group opens there.
fn skip_group(tokens: &[&str], at: usize) -> usize {
    if tokens.get(at) != Some(&"(") {
        return at;
    }
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(at) {
        match *t {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// Each function of `ptx` by name: whether it is an entry, what it calls,
/// and whether it reads the workspace registers (or calls through a
/// register, whose target is unknown) itself.
fn functions(ptx: &str) -> BTreeMap<String, (bool, BTreeSet<String>, bool)> {
    let t = tokens(ptx);
    let mut funcs: BTreeMap<String, (bool, BTreeSet<String>, bool)> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut i = 0;
    while i < t.len() {
        let tok = t[i];
        if tok == ".entry" || tok == ".func" {
            // `.func (.param .b32 retval) name(...)`: the return group first.
            let at = skip_group(&t, i + 1);
            let Some(name) = t.get(at) else { break };
            funcs.entry((*name).to_string()).or_default().0 |= tok == ".entry";
            current = Some((*name).to_string());
            i = at + 1;
            continue;
        }
        if let Some(name) = &current {
            let f = funcs.entry(name.clone()).or_default();
            if tok == "%envreg1" || tok == "%envreg2" {
                f.2 = true;
            }
            if tok == "call" || tok.starts_with("call.") {
                // `call.uni (retval), callee, (args);`
                let mut at = skip_group(&t, i + 1);
                if t.get(at) == Some(&",") {
                    at += 1;
                }
                match t.get(at) {
                    Some(c) if c.starts_with('%') => f.2 = true,
                    Some(c) => {
                        f.1.insert((*c).to_string());
                    }
                    None => {}
                }
            }
        }
        i += 1;
    }
    funcs
}

/// The `.entry` names of `ptx` that reach a grid barrier.
pub(crate) fn grid_syncing(ptx: &str) -> BTreeSet<String> {
    let funcs = functions(ptx);
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

    /// NVRTC writes a call over several lines, and calls through a
    /// register: a split call is followed, an indirect one counts as
    /// reaching the barrier (its target is unknown).
    #[test]
    fn split_and_indirect_calls() {
        let ptx = "\
.func _Z4gsyncv()\n{\n\tmov.u32 %r8, %envreg2; // grid workspace\n\tret;\n}\n\
.visible .entry split(\n)\n{\n\t{ // callseq 0, 0\n\tcall.uni \n\t_Z4gsyncv, \n\t(\n\t);\n\t}\n\tret;\n}\n\
.visible .entry indirect(\n)\n{\n\tcall (retval0), %rd4, (param0), prototype_0;\n\tret;\n}\n\
.visible .entry commented(\n)\n{\n\t// mov.u32 %r1, %envreg1;\n\tret;\n}\n";
        let found: Vec<String> = grid_syncing(ptx).into_iter().collect();
        assert_eq!(found, ["indirect", "split"]);
    }
}
