//! The facts warp-build's compile step records beside a module
//! (`wp_<module>.facts.json`): what Warp's own objects said, at compile
//! time, about the code they generated. Comment markers in the generated
//! text cannot tell Warp's code from the user's (a `@wp.func_native`
//! snippet may begin with the line Warp's functions begin with), so which
//! kernels reach native code or carry a preamble comes from here, never
//! from reading the text.
//!
//! The file is written by warp-build's `compile.py` from the
//! `ModuleBuilder` of each codegen Warp ran (one for CUDA, one for the
//! CPU):
//!
//! - per device: whether the module has a non-blank user preamble
//!   (`ModuleBuildOptions(extra_cuda_preamble=...)` or
//!   `extra_cpu_preamble`, its own or merged by Warp from another module),
//!   every `@wp.func_native` function the codegen emitted (of any module),
//!   and the native C++ types the kernels use;
//! - per kernel: every chain of `@wp.func` calls from the kernel to a
//!   native function, per device, and whether its CPU code is its CUDA
//!   code's body line for line (`cpu_body`: `null`, or where they differ).
//!
//! [`Facts::verdict`] turns them into the kernel's verdict on a device.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::SourceError;
use crate::signature::Unproven;

/// The facts file's format number this reader takes.
const FORMAT: u32 = 1;

/// The code a kernel runs: CUDA (the `.cu` the rules are read from) or the
/// CPU (Warp's `.cpp`, compiled by warp-build).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// The CUDA images (cubin, PTX), compiled from the `.cu`.
    Cuda,
    /// The CPU code, compiled from Warp's `.cpp`.
    Cpu,
}

/// One `@wp.func_native` function Warp emitted into a module.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NativeFunction {
    /// The Python function's name.
    pub function: String,
    /// The Warp module it was defined in.
    pub module: String,
    /// Its C++ name in the generated code (e.g. `poke_0`).
    pub symbol: String,
}

/// What one codegen (CUDA or CPU) put into a module beside Warp's own code.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceFacts {
    /// A non-blank user preamble (`extra_cuda_preamble` /
    /// `extra_cpu_preamble`).
    pub preamble: bool,
    /// Every native function emitted.
    pub native: Vec<NativeFunction>,
    /// Native C++ types the kernels use.
    pub native_types: Vec<String>,
}

impl DeviceFacts {
    /// Whether any user C++ is in the module's text.
    fn has_user_code(&self) -> bool {
        self.preamble || !self.native.is_empty() || !self.native_types.is_empty()
    }
}

/// What the compile step found for one kernel.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelFacts {
    /// The chains of `@wp.func` calls from the kernel to a native function
    /// in the CUDA code (each ends with the native function).
    pub cuda: Vec<Vec<String>>,
    /// The same in the CPU code (`None`: no CPU code).
    pub cpu: Option<Vec<Vec<String>>>,
    /// `None` when the CPU code's body is the CUDA code's line for line,
    /// else where they differ.
    pub cpu_body: Option<String>,
}

/// The facts of one module ([`parse_facts`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Facts {
    format: u32,
    /// The Warp version that generated the module.
    pub warp_version: String,
    /// The module's name.
    pub module: String,
    /// What the CUDA codegen emitted.
    pub cuda: DeviceFacts,
    /// What the CPU codegen emitted (`None`: no CPU code).
    pub cpu: Option<DeviceFacts>,
    /// Each kernel by key.
    pub kernels: BTreeMap<String, KernelFacts>,
}

/// Parses a facts file. `file` is used only in error messages.
///
/// # Errors
///
/// A [`SourceError`] for text that is not the JSON warp-build writes (a
/// missing or unknown key, another format number), naming the file and
/// line.
pub fn parse_facts(text: &str, file: &str) -> Result<Facts, SourceError> {
    let facts: Facts = serde_json::from_str(text).map_err(|e| {
        SourceError::new(
            file,
            e.line().max(1),
            format!("not a warp-build facts file: {e}"),
        )
    })?;
    if facts.format != FORMAT {
        return Err(SourceError::new(
            file,
            1,
            format!(
                "facts format {} is not the format {FORMAT} this reader takes: rebuild the module with this release's warp-build",
                facts.format
            ),
        ));
    }
    Ok(facts)
}

impl Facts {
    /// Checks that these are the facts of module `module`, written with
    /// the Warp release this crate reads ([`crate::WARP_VERSION`]): facts
    /// from another compile must not decide a module's verdicts.
    ///
    /// # Errors
    ///
    /// A [`SourceError`] at line 1 of `file` naming both modules or both
    /// releases, and saying to rebuild the module.
    pub fn check_module(&self, module: &str, file: &str) -> Result<(), SourceError> {
        if self.module != module {
            return Err(SourceError::new(
                file,
                1,
                format!(
                    "the facts are module '{}'s, not '{module}'s: the files come from different compiles; rebuild the module",
                    self.module
                ),
            ));
        }
        if self.warp_version != crate::WARP_VERSION {
            return Err(SourceError::new(
                file,
                1,
                format!(
                    "the facts were written by Warp {}, the module needs Warp {}: rebuild the module",
                    self.warp_version,
                    crate::WARP_VERSION
                ),
            ));
        }
        Ok(())
    }

    /// Why kernel `key` has no proof on `target`, or `None` when the
    /// facts leave its access rules (read from the `.cu`) standing there.
    /// `file` names the facts file in the verdict's location.
    ///
    /// A kernel is unproven on a device when the module's code for it holds
    /// user C++ (a preamble, a native function, a native type: C++ that no
    /// access analysis reads and that can change what every line after it
    /// means, a reached native function naming its chain of calls), and on
    /// `"cpu"` also when its CPU body is not its CUDA body, when the module
    /// has no CPU facts, or when the facts do not list the kernel.
    pub fn verdict(&self, key: &str, target: Target, file: &str) -> Option<Unproven> {
        let unproven = |reason: String| {
            Some(Unproven {
                param: String::new(),
                location: format!("{file} (what Warp's objects said at compile time)"),
                reason,
            })
        };
        let Some(kernel) = self.kernels.get(key) else {
            return unproven(format!(
                "the compile step's facts do not list kernel '{key}' (they list {}): rebuild the module with warp-build",
                self.kernels.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        };
        let (device, chains, what) = match target {
            Target::Cuda => (Some(&self.cuda), Some(&kernel.cuda), "CUDA"),
            Target::Cpu => (self.cpu.as_ref(), kernel.cpu.as_ref(), "CPU"),
        };
        let (Some(device), Some(chains)) = (device, chains) else {
            return unproven(
                "the module was compiled without CPU code facts: rebuild it with warp-build".into(),
            );
        };
        if let Some(reason) = user_code(device, chains, what) {
            return unproven(reason);
        }
        match (&kernel.cpu_body, target) {
            (Some(differs), Target::Cpu) => unproven(format!(
                "Warp's CPU code for the kernel is not its CUDA code ({differs}), and the access rules were read from the CUDA code"
            )),
            _ => None,
        }
    }
}

/// Why a kernel whose module's `what` code holds `device`'s user C++ has
/// no proof (the first native chain it reaches named first), or `None`.
fn user_code(device: &DeviceFacts, chains: &[Vec<String>], what: &str) -> Option<String> {
    let native_named = |name: &str| device.native.iter().find(|n| n.function == name);
    if let Some(chain) = chains.first() {
        let last = chain.last().map_or("", String::as_str);
        let detail = native_named(last).map_or(String::new(), |n| {
            format!(" (module '{}', C++ `{}`)", n.module, n.symbol)
        });
        let how = match chain.len() {
            0 | 1 => "directly".to_string(),
            _ => format!("through {}", chain.join(" -> ")),
        };
        return Some(format!(
            "it calls native code, the @wp.func_native function `{last}`{detail}, {how}: C++ that no access analysis reads"
        ));
    }
    if !device.has_user_code() {
        return None;
    }
    let mut held = Vec::new();
    if device.preamble {
        held.push(format!(
            "a user preamble (ModuleBuildOptions(extra_{}_preamble=...))",
            what.to_lowercase()
        ));
    }
    for n in &device.native {
        held.push(format!(
            "the @wp.func_native function `{}` (module '{}', C++ `{}`)",
            n.function, n.module, n.symbol
        ));
    }
    if !device.native_types.is_empty() {
        held.push(format!(
            "native C++ types ({})",
            device.native_types.join(", ")
        ));
    }
    Some(format!(
        "the module's {what} code holds {}: user C++ that no access analysis reads and that can change what the kernel's generated code means",
        held.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "wp_m.facts.json";

    fn facts(cuda: &str, cpu: &str, kernel: &str) -> String {
        format!(
            r#"{{"format": 1, "warp_version": "1.19.0", "module": "m", "cuda": {cuda}, "cpu": {cpu}, "kernels": {{"k": {kernel}}}}}"#
        )
    }

    const CLEAN: &str = r#"{"preamble": false, "native": [], "native_types": []}"#;
    const POKE: &str = r#"{"preamble": false, "native": [{"function": "poke", "module": "wrp_native", "symbol": "poke_0"}], "native_types": []}"#;
    const PREAMBLE: &str = r#"{"preamble": true, "native": [], "native_types": []}"#;
    const PLAIN: &str = r#"{"cuda": [], "cpu": [], "cpu_body": null}"#;

    fn verdict(text: &str, key: &str, target: Target) -> Option<String> {
        parse_facts(text, FILE)
            .unwrap()
            .verdict(key, target, FILE)
            .map(|u| u.reason)
    }

    #[test]
    fn clean_kernels_keep_their_rules_on_both_devices() {
        let text = facts(CLEAN, CLEAN, PLAIN);
        assert_eq!(verdict(&text, "k", Target::Cuda), None);
        assert_eq!(verdict(&text, "k", Target::Cpu), None);
    }

    #[test]
    fn a_direct_call_of_native_code_says_so() {
        let kernel = r#"{"cuda": [["poke"]], "cpu": [["poke"]], "cpu_body": null}"#;
        let why = verdict(&facts(POKE, POKE, kernel), "k", Target::Cuda).unwrap();
        assert!(
            why.contains("`poke` (module 'wrp_native', C++ `poke_0`), directly"),
            "{why}"
        );
    }

    #[test]
    fn a_reached_native_function_names_its_chain() {
        let kernel =
            r#"{"cuda": [["helper", "poke"]], "cpu": [["helper", "poke"]], "cpu_body": null}"#;
        let text = facts(POKE, POKE, kernel);
        for target in [Target::Cuda, Target::Cpu] {
            let why = verdict(&text, "k", target).unwrap();
            assert!(why.contains("`poke`"), "{why}");
            assert!(why.contains("helper -> poke"), "{why}");
            assert!(why.contains("C++ `poke_0`"), "{why}");
        }
    }

    #[test]
    fn native_code_or_a_preamble_anywhere_in_the_module_unproves_every_kernel() {
        let why = verdict(&facts(POKE, CLEAN, PLAIN), "k", Target::Cuda).unwrap();
        assert!(why.contains("@wp.func_native function `poke`"), "{why}");
        assert_eq!(verdict(&facts(POKE, CLEAN, PLAIN), "k", Target::Cpu), None);
        // A CPU preamble: unproven on "cpu" only.
        let text = facts(CLEAN, PREAMBLE, PLAIN);
        assert_eq!(verdict(&text, "k", Target::Cuda), None);
        let why = verdict(&text, "k", Target::Cpu).unwrap();
        assert!(why.contains("extra_cpu_preamble"), "{why}");
    }

    #[test]
    fn a_cpu_body_other_than_the_cuda_body_unproves_the_kernel_on_cpu() {
        let kernel = r#"{"cuda": [], "cpu": [], "cpu_body": "line 3 of the forward body differs"}"#;
        let text = facts(CLEAN, CLEAN, kernel);
        assert_eq!(verdict(&text, "k", Target::Cuda), None);
        let why = verdict(&text, "k", Target::Cpu).unwrap();
        assert!(why.contains("line 3 of the forward body differs"), "{why}");
    }

    #[test]
    fn unknown_kernels_and_missing_cpu_facts_are_unproven() {
        let text = facts(
            CLEAN,
            "null",
            r#"{"cuda": [], "cpu": null, "cpu_body": null}"#,
        );
        assert_eq!(verdict(&text, "k", Target::Cuda), None);
        assert!(
            verdict(&text, "k", Target::Cpu)
                .unwrap()
                .contains("without CPU")
        );
        let why = verdict(&text, "other", Target::Cuda).unwrap();
        assert!(
            why.contains("'other'") && why.contains("they list k"),
            "{why}"
        );
    }

    #[test]
    fn malformed_facts_are_errors_naming_the_file() {
        for bad in [
            "",
            "{}",
            &facts(CLEAN, CLEAN, PLAIN).replace("\"format\": 1", "\"format\": 2"),
            &facts(CLEAN, CLEAN, PLAIN).replace("\"preamble\": false", "\"preamble\": 1"),
            &facts(CLEAN, CLEAN, PLAIN).replace("\"cpu_body\"", "\"cpu_bodies\""),
        ] {
            let e = parse_facts(bad, FILE).unwrap_err();
            assert_eq!(e.file(), FILE, "{bad}");
        }
    }
}
