//! The compile step's facts applied to a module's declarations: a kernel
//! whose CUDA code reaches native code or carries a user preamble is
//! unproven ([`Accesses::Unproven`], for every device: its CPU launches use
//! the same rules), and a kernel whose CPU code is not proven by the facts
//! (user C++ in the CPU code, or a CPU body other than the CUDA body) is
//! unproven on `"cpu"` only (the verdict goes with its CPU code).
//!
//! A module without facts (a directory Warp's own `compile_aot_module`
//! wrote, an [`EmbeddedModule`](crate::EmbeddedModule) built without
//! [`EmbeddedModule::with_facts`](crate::EmbeddedModule::with_facts)) is
//! taken as its `unsafe` loader's caller vouched for it: that no kernel
//! reaches native code or carries a preamble, and that its CPU code runs
//! the CUDA source's bodies.

use std::collections::HashMap;

use warp_proof::{Facts, Target, parse_facts};

use crate::error::{Result, src_err};
use crate::launch::KernelSpec;
use crate::signature::{Accesses, Unproven};

/// The file name of module `name`'s facts (`wp_<name>.facts.json`).
pub(crate) fn file_name(name: &str) -> String {
    format!("wp_{name}.facts.json")
}

/// Reads the facts `(text, file)` of module `module` and applies their
/// CUDA verdicts to `decls` (each forward kernel's key and declaration);
/// returns each kernel's CPU verdict (only the unproven ones). No facts:
/// nothing changes.
///
/// # Errors
///
/// [`Error::Source`] for facts that do not parse, or that name another
/// module or Warp release.
pub(crate) fn apply<'d>(
    module: &str,
    decls: impl Iterator<Item = (&'d str, &'d mut KernelSpec)>,
    facts: Option<(&str, &str)>,
) -> Result<HashMap<String, Unproven>> {
    let Some((text, file)) = facts else {
        return Ok(HashMap::new());
    };
    let facts = read(module, text, file)?;
    let mut cpu = HashMap::new();
    for (key, spec) in decls {
        if let Some(u) = facts.verdict(key, Target::Cuda, file) {
            *spec = spec
                .clone()
                .with_accesses(Accesses::Unproven(u.clone()), Accesses::Unproven(u));
        }
        if let Some(u) = facts.verdict(key, Target::Cpu, file) {
            cpu.insert(key.to_owned(), u);
        }
    }
    Ok(cpu)
}

/// The facts of `module`, checked to be its own and of this Warp release.
fn read(module: &str, text: &str, file: &str) -> Result<Facts> {
    let facts = parse_facts(text, file).map_err(src_err)?;
    facts.check_module(module, file).map_err(src_err)?;
    Ok(facts)
}
