//! Facts read from the header text itself, where bindgen's output does not
//! carry them: API groups, `#define` renames to ABI symbols, per-thread
//! variants, and the versions in `cudaTypedefs.h`'s `PFN_` names.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

/// One `\defgroup` of `cuda.h`.
#[derive(Debug, Clone)]
pub struct Group {
    /// e.g. `CUDA_MEM`.
    pub name: String,
    /// e.g. `Memory Management`.
    pub title: String,
}

/// What the header text says.
#[derive(Debug, Default)]
pub struct HeaderFacts {
    /// Groups in header order.
    pub groups: Vec<Group>,
    /// API name → index into `groups`, for every `CUresult CUDAAPI` declaration
    /// outside the header's internal-versioning blocks.
    pub decl_group: BTreeMap<String, usize>,
    /// API name → ABI symbol in a default build.
    pub renames: BTreeMap<String, String>,
    /// API name → per-thread-default-stream symbol.
    pub per_thread: BTreeMap<String, String>,
}

/// Lines of `text` with a flag saying whether they sit inside an
/// `#if defined(__CUDA_API_VERSION_INTERNAL)` block (or its `#else`, negated).
fn lines_outside_internal(text: &str) -> Vec<(usize, &str, bool)> {
    let mut stack: Vec<bool> = Vec::new(); // per #if: is this branch internal-only
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix('#') {
            let d = rest.trim_start();
            if d.starts_with("if") {
                stack.push(d.starts_with("if defined(__CUDA_API_VERSION_INTERNAL)"));
            } else if d.starts_with("else") || d.starts_with("elif") {
                if let Some(top) = stack.last_mut() {
                    *top = false;
                }
            } else if d.starts_with("endif") {
                stack.pop();
            }
        }
        out.push((i, line, stack.iter().any(|x| *x)));
    }
    out
}

/// Reads groups, declarations and renames from `cuda.h`.
pub fn scan_cuda_h(text: &str) -> HeaderFacts {
    let defgroup = Regex::new(r"\\defgroup\s+(\w+)\s+(.+?)\s*$").unwrap();
    let decl = Regex::new(r"\bCUresult\s+CUDAAPI\s+(\w+)\s*\(").unwrap();
    let rename =
        Regex::new(r"^\s*#define\s+(cu\w+)\s+(?:__CUDA_API_(PTDS|PTSZ)\((\w+)\)|(cu\w+))\s*$")
            .unwrap();
    let mut facts = HeaderFacts::default();
    let mut in_ptds_block = false;
    // Per line: (internal?, current group index).
    let mut line_info: Vec<(bool, Option<usize>)> = Vec::new();
    for (_, line, internal) in lines_outside_internal(text) {
        if line
            .trim_start()
            .starts_with("#if defined(__CUDA_API_PER_THREAD_DEFAULT_STREAM)")
        {
            in_ptds_block = true;
        } else if in_ptds_block && line.trim_start().starts_with("#endif") {
            in_ptds_block = false;
        }
        if !internal {
            if let Some(c) = defgroup.captures(line) {
                facts.groups.push(Group {
                    name: c[1].to_string(),
                    title: c[2].to_string(),
                });
            }
            if let Some(c) = rename.captures(line) {
                let api = c[1].to_string();
                if let Some(kind) = c.get(2) {
                    let target = c[3].to_string();
                    let suffix = if kind.as_str() == "PTDS" {
                        "_ptds"
                    } else {
                        "_ptsz"
                    };
                    facts
                        .per_thread
                        .insert(api.clone(), format!("{target}{suffix}"));
                    if !in_ptds_block {
                        facts.renames.insert(api, target);
                    }
                } else if let Some(t) = c.get(4) {
                    facts.renames.insert(api, t.as_str().to_string());
                }
            }
        }
        line_info.push((internal, facts.groups.len().checked_sub(1)));
    }
    // Declarations may span lines (`CUresult CUDAAPI\ncuLinkCreate(`).
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    for c in decl.captures_iter(text) {
        let at = c.get(1).map(|m| m.start()).unwrap_or(0);
        let line = line_starts.partition_point(|&s| s <= at).saturating_sub(1);
        if let Some(&(false, Some(g))) = line_info.get(line) {
            facts.decl_group.entry(c[1].to_string()).or_insert(g);
        }
    }
    facts
}

/// The API name of ABI symbol `symbol`: a name that `#define`s to it and is
/// declared inside a `\defgroup` (the header's own spelling), else the
/// symbol itself when it is declared in one; with the group's index. `None`
/// when no such declaration exists (the caller notes and skips it).
///
/// CUDA 12.x defines both `cuStreamGetCaptureInfo` and
/// `cuStreamGetCaptureInfo_v2` as `cuStreamGetCaptureInfo_v2` but declares
/// only the first in a group; 13.0 has one name per symbol.
pub fn api_name(facts: &HeaderFacts, symbol: &str) -> Option<(String, usize)> {
    facts
        .renames
        .iter()
        .filter(|(_, sym)| sym.as_str() == symbol)
        .map(|(api, _)| api.as_str())
        .chain(std::iter::once(symbol))
        .find_map(|c| facts.decl_group.get(c).map(|g| (c.to_string(), *g)))
}

/// Versions named by `cudaTypedefs.h`'s `PFN_<name>_v<version>` typedefs.
#[derive(Debug, Default)]
pub struct PfnVersions {
    /// API name → versions outside the internal block (the current ABI).
    pub current: BTreeMap<String, BTreeSet<u32>>,
    /// API name → per-thread (`_ptds`/`_ptsz`) versions.
    pub per_thread: BTreeMap<String, BTreeSet<u32>>,
    /// (API name, version) → number of parameters, for the per-thread versions.
    pub per_thread_arity: BTreeMap<(String, u32), usize>,
    /// API name → every version, legacy ones included.
    pub all: BTreeMap<String, BTreeSet<u32>>,
    /// (API name, version) → number of parameters of that ABI, for the
    /// current versions.
    pub arity: BTreeMap<(String, u32), usize>,
}

impl PfnVersions {
    /// The current ABI version to ask `cuGetProcAddress` for when calling
    /// `proc` with `params` parameters: the newest current version of that
    /// arity. A name can have ABIs of different arities (CUDA 13.0's
    /// `cuCtxGetDevice` is `(device)` at 2000 and `(device, ctx)` at 13000,
    /// the latter declared as `cuCtxGetDevice_v2`); asking for the newest
    /// regardless would call a two-parameter function with one argument.
    pub fn version_for(&self, proc: &str, params: usize) -> Option<u32> {
        let versions = self.current.get(proc)?;
        versions
            .iter()
            .rev()
            .find(|v| self.arity.get(&(proc.to_string(), **v)) == Some(&params))
            .or_else(|| versions.last())
            .copied()
    }
}

impl PfnVersions {
    /// The newest per-thread (`_ptds`/`_ptsz`) version of `proc` with
    /// `params` parameters (13.5's `cuLaunchHostFunc` has a 3-parameter
    /// `_ptsz` at 10000 and a 4-parameter one at 13010).
    pub fn per_thread_version_for(&self, proc: &str, params: usize) -> Option<u32> {
        self.per_thread
            .get(proc)?
            .iter()
            .rev()
            .find(|v| self.per_thread_arity.get(&(proc.to_string(), **v)) == Some(&params))
            .copied()
    }

    /// Like [`PfnVersions::version_for`], for ABI symbol `symbol`: where
    /// several current versions have that arity (13.5's `cuGraphAddNode` at
    /// 12030 and 13040, declared as `cuGraphAddNode_v2` and
    /// `cuGraphAddNode_v3`), the symbol's `_vN` suffix picks the N-th of all
    /// the name's versions (no suffix: the first).
    pub fn version_for_symbol(&self, symbol: &str, params: usize) -> Option<u32> {
        let proc = proc_name(symbol);
        let same_arity: Vec<u32> = self
            .current
            .get(proc)?
            .iter()
            .copied()
            .filter(|v| self.arity.get(&(proc.to_string(), *v)) == Some(&params))
            .collect();
        if same_arity.len() > 1 {
            let ordinal = symbol
                .strip_prefix(proc)
                .and_then(|rest| rest.strip_prefix("_v"))
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(1);
            if let Some(v) = self
                .all
                .get(proc)
                .and_then(|all| all.iter().nth(ordinal.checked_sub(1)?))
                .filter(|v| same_arity.contains(v))
            {
                return Some(*v);
            }
        }
        self.version_for(proc, params)
    }
}

/// Reads the `PFN_` typedef names of `cudaTypedefs.h`.
pub fn scan_typedefs_h(text: &str) -> PfnVersions {
    let pfn = Regex::new(
        r"typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*PFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\s*\)\s*\(([^;]*)\)\s*;",
    )
    .unwrap();
    let mut v = PfnVersions::default();
    for (_, line, internal) in lines_outside_internal(text) {
        for c in pfn.captures_iter(line) {
            let name = c[1].to_string();
            let Ok(ver) = c[2].parse::<u32>() else {
                continue;
            };
            v.all.entry(name.clone()).or_default().insert(ver);
            if internal {
                continue;
            }
            let params = c[4].trim();
            let arity = if params.is_empty() || params == "void" {
                0
            } else {
                params.matches(',').count() + 1
            };
            if c.get(3).is_some() {
                v.per_thread_arity.insert((name.clone(), ver), arity);
                v.per_thread.entry(name).or_default().insert(ver);
            } else {
                v.arity.insert((name.clone(), ver), arity);
                v.current.entry(name).or_default().insert(ver);
            }
        }
    }
    v
}

/// Whether the header defines `KIND NAME { … }` (a tagged struct, union or enum).
pub fn has_tag(text: &str, kind: &str, name: &str) -> bool {
    Regex::new(&format!(r"\b{kind}\s+{}\s*\{{", regex::escape(name)))
        .map(|r| r.is_match(text))
        .unwrap_or(false)
}

/// The name `cuGetProcAddress` knows a symbol by: the symbol without its
/// `_vN` ABI suffix (`cuMemAlloc_v2` → `cuMemAlloc`).
pub fn proc_name(symbol: &str) -> &str {
    match symbol.rfind("_v") {
        Some(i) if symbol[i + 2..].chars().all(|c| c.is_ascii_digit()) && i + 2 < symbol.len() => {
            &symbol[..i]
        }
        _ => symbol,
    }
}

/// The header's `#define CUDA_VERSION` (12080 for CUDA 12.8), if present.
pub fn cuda_version(cuda_h: &str) -> Option<u32> {
    cuda_h.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("#define CUDA_VERSION")?;
        rest.trim().parse().ok()
    })
}

/// `3020` → `"3.2"`, `12050` → `"12.5"`.
pub fn version_string(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// The codes listed under `\return` in a doc comment, in order.
pub fn documented_errors(doc: &str) -> Vec<String> {
    let code = Regex::new(r"::(CUDA_[A-Z0-9_]+)").unwrap();
    let Some(start) = doc.find("\\return") else {
        return Vec::new();
    };
    let rest = &doc[start + "\\return".len()..];
    let end = rest.find('\\').unwrap_or(rest.len());
    let mut out: Vec<String> = Vec::new();
    for c in code.captures_iter(&rest[..end]) {
        let name = c[1].to_string();
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// `\param NAME - text` lines of a doc comment.
pub fn param_docs(doc: &str) -> BTreeMap<String, String> {
    let re = Regex::new(r"\\param\s+(\w+)\s*-?\s*(.*)").unwrap();
    doc.lines()
        .filter_map(|l| re.captures(l).map(|c| (c[1].to_string(), c[2].to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The construct that stopped the import of CUDA 12.8's header: two API
    /// names for one symbol, only one of them declared in a group.
    const CUDA_12_CAPTURE_INFO: &str = r#"
#define cuStreamGetCaptureInfo              __CUDA_API_PTSZ(cuStreamGetCaptureInfo_v2)
#define cuStreamGetCaptureInfo_v2           __CUDA_API_PTSZ(cuStreamGetCaptureInfo_v2)
/**
 * \defgroup CUDA_STREAM Stream Management
 * @{
 */
CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out);
CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out);
/** @} */
CUresult CUDAAPI cuOutsideAnyGroup(int x);
"#;

    #[test]
    fn a_symbol_with_two_api_names_takes_the_declared_one() {
        let f = scan_cuda_h(CUDA_12_CAPTURE_INFO);
        assert_eq!(
            api_name(&f, "cuStreamGetCaptureInfo_v2"),
            Some(("cuStreamGetCaptureInfo".to_string(), 0))
        );
        assert_eq!(
            api_name(&f, "cuStreamGetCaptureInfo_v3"),
            Some(("cuStreamGetCaptureInfo_v3".to_string(), 0))
        );
        assert_eq!(api_name(&f, "cuNotDeclared"), None);
    }

    #[test]
    fn return_list_stops_at_next_command() {
        let doc = " \\return\n ::CUDA_SUCCESS,\n ::CUDA_ERROR_INVALID_VALUE\n \\notefnerr\n \\sa ::CUDA_ERROR_NOT_READY";
        assert_eq!(
            documented_errors(doc),
            ["CUDA_SUCCESS", "CUDA_ERROR_INVALID_VALUE"]
        );
    }

    #[test]
    fn renames_and_per_thread_variants() {
        let h = "#define cuMemAlloc cuMemAlloc_v2\n#define cuMemcpyHtoD __CUDA_API_PTDS(cuMemcpyHtoD_v2)\n\
                 #if defined(__CUDA_API_PER_THREAD_DEFAULT_STREAM)\n#define cuMemcpy __CUDA_API_PTDS(cuMemcpy)\n#endif\n\
                 /** \\defgroup CUDA_MEM Memory Management\n */\nCUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n);\n\
                 #if defined(__CUDA_API_VERSION_INTERNAL)\nCUresult CUDAAPI cuOld(int);\n#endif\n";
        let f = scan_cuda_h(h);
        assert_eq!(f.renames["cuMemAlloc"], "cuMemAlloc_v2");
        assert_eq!(f.renames["cuMemcpyHtoD"], "cuMemcpyHtoD_v2");
        assert_eq!(f.per_thread["cuMemcpyHtoD"], "cuMemcpyHtoD_v2_ptds");
        assert_eq!(f.per_thread["cuMemcpy"], "cuMemcpy_ptds");
        assert!(!f.renames.contains_key("cuMemcpy"));
        assert_eq!(f.groups[f.decl_group["cuMemAlloc"]].name, "CUDA_MEM");
        assert!(!f.decl_group.contains_key("cuOld"));
    }

    #[test]
    fn pfn_versions() {
        let t = "typedef CUresult (CUDAAPI *PFN_cuMemAlloc_v3020)(CUdeviceptr_v2 *dptr, size_t bytesize);\n\
                 typedef CUresult (CUDAAPI *PFN_cuMemcpyHtoD_v7000_ptds)(int);\n\
                 #if defined(__CUDA_API_VERSION_INTERNAL)\n    typedef CUresult (CUDAAPI *PFN_cuMemAlloc_v2000)(int);\n#endif\n";
        let v = scan_typedefs_h(t);
        assert_eq!(
            v.current["cuMemAlloc"].iter().copied().collect::<Vec<_>>(),
            [3020]
        );
        assert_eq!(v.all["cuMemAlloc"].first(), Some(&2000));
        assert_eq!(v.per_thread["cuMemcpyHtoD"].first(), Some(&7000));
        // One name, two ABIs of different arity (CUDA 13.0's cuCtxGetDevice):
        // each declaration is resolved at the version of its own arity.
        let t = "typedef CUresult (CUDAAPI *PFN_cuCtxGetDevice_v2000)(CUdevice_v1 *device);\n\
                 typedef CUresult (CUDAAPI *PFN_cuCtxGetDevice_v13000)(CUdevice *device, CUcontext ctx);\n\
                 typedef CUresult (CUDAAPI *PFN_cuCtxSynchronize_v2000)(void);\n";
        let v = scan_typedefs_h(t);
        assert_eq!(v.version_for("cuCtxGetDevice", 1), Some(2000));
        assert_eq!(v.version_for("cuCtxGetDevice", 2), Some(13000));
        assert_eq!(v.version_for("cuCtxSynchronize", 0), Some(2000));
        assert_eq!(version_string(12050), "12.5");
        // 13.5: two ABIs of one arity, told apart by the symbol's suffix.
        let t = "typedef CUresult (CUDAAPI *PFN_cuGraphAddNode_v12020)(CUgraphNode *a, CUgraph b, size_t n);\n\
                 typedef CUresult (CUDAAPI *PFN_cuGraphAddNode_v12030)(CUgraphNode *a, CUgraph b, const CUgraphEdgeData *e, size_t n);\n\
                 typedef CUresult (CUDAAPI *PFN_cuGraphAddNode_v13040)(CUgraphNode *a, CUgraph b, const CUgraphEdgeData *e, size_t n);\n";
        let v = scan_typedefs_h(t);
        assert_eq!(v.version_for_symbol("cuGraphAddNode_v2", 4), Some(12030));
        assert_eq!(v.version_for_symbol("cuGraphAddNode_v3", 4), Some(13040));
        assert_eq!(v.version_for_symbol("cuGraphAddNode", 3), Some(12020));
        let t = "typedef CUresult (CUDAAPI *PFN_cuLaunchHostFunc_v10000_ptsz)(CUstream s, CUhostFn f, void *u);\n\
                 typedef CUresult (CUDAAPI *PFN_cuLaunchHostFunc_v13010_ptsz)(CUstream s, CUhostFn f, void *u, unsigned int m);\n";
        let v = scan_typedefs_h(t);
        assert_eq!(v.per_thread_version_for("cuLaunchHostFunc", 3), Some(10000));
        assert_eq!(v.per_thread_version_for("cuLaunchHostFunc", 4), Some(13010));
    }
}
