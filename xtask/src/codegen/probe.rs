//! Renders the ABI probe: a C program compiled against the real `cuda.h` that
//! prints the size, alignment and field offsets of every record, the size of
//! every alias and enum, and the value of every enumerator and constant; and
//! the Rust table of the same facts computed from `cuda-sys`. Every function
//! declaration of the specs is also assigned from the header's function, so a
//! wrong parameter type or count fails the probe's compilation.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::Result;
use crate::ctype::CType;
use crate::import::merge::{present_in, release_key};
use crate::names::escape;
use crate::spec::model::*;

/// How C reaches a record: the expression for its type (when it has one), and
/// the access prefix from a root record (for anonymous records).
struct CAccess {
    /// `struct CUDA_MEMCPY2D_st`, or the root type for anonymous records.
    root: String,
    /// Member path from the root (`res.array.`), empty for named records.
    prefix: String,
    /// Whether the record itself can be named in `sizeof` (false for unnamed members).
    sizable: bool,
}

fn c_type_name(r: &Record) -> String {
    match (&r.c_name, r.kind) {
        (Some(c), _) => c.clone(),
        (None, RecordKind::Struct) => format!("struct {}", r.name.value),
        (None, RecordKind::Union) => format!("union {}", r.name.value),
    }
}

fn access(r: &Record, by_name: &BTreeMap<&str, &Record>) -> CAccess {
    match &r.c_path {
        None => CAccess {
            root: c_type_name(r),
            prefix: String::new(),
            sizable: true,
        },
        Some(path) => {
            let mut parts = path.split('.');
            let root_name = parts.next().unwrap_or_default();
            let root = by_name
                .get(root_name)
                .map(|x| c_type_name(x))
                .unwrap_or_else(|| root_name.to_string());
            let steps: Vec<&str> = parts.collect();
            let sizable = steps.last() != Some(&"*");
            let prefix: String = steps
                .iter()
                .filter(|s| **s != "*")
                .map(|s| format!("{s}."))
                .collect();
            CAccess {
                root,
                prefix,
                sizable,
            }
        }
    }
}

/// The C expression for the offset of `field` inside record `r`.
fn c_offset(r: &Record, field: &Field, by_name: &BTreeMap<&str, &Record>) -> String {
    let a = access(r, by_name);
    let member = |f: &Field| -> String {
        // An unnamed member is reached through its first field.
        if let (Some(rest), Ok(t)) = (f.name.strip_prefix("anon"), CType::parse(&f.ty.value))
            && rest.chars().all(|c| c.is_ascii_digit())
            && let Some(first) = by_name
                .get(t.base.as_str())
                .and_then(|inner| inner.fields.first())
        {
            return first.name.clone();
        }
        f.name.clone()
    };
    let base = match r.fields.first() {
        Some(first) if !a.prefix.is_empty() || r.c_path.is_some() => {
            format!(" - offsetof({}, {}{})", a.root, a.prefix, member(first))
        }
        _ => String::new(),
    };
    format!(
        "(long long)(offsetof({}, {}{}){base})",
        a.root,
        a.prefix,
        member(field)
    )
}

/// The specs without what the newest pinned header no longer declares
/// (`removed`): the probe compiles against the newest header.
fn current_only(specs: &Specs) -> Specs {
    let mut s = specs.clone();
    for (_, g) in &mut s.groups {
        g.functions.retain(|f| f.removed.is_none());
    }
    for (_, t) in &mut s.types {
        t.handles.retain(|x| x.removed.is_none());
        t.typedefs.retain(|x| x.removed.is_none());
        t.enums.retain(|x| x.removed.is_none());
        for e in &mut t.enums {
            e.values.retain(|v| v.removed.is_none());
        }
        t.records.retain(|x| x.removed.is_none());
        t.callbacks.retain(|x| x.removed.is_none());
        t.constants.retain(|x| x.removed.is_none());
    }
    s
}

/// Whether an item with `since` / `removed` is in the pinned header of `release`.
fn in_release(since: &Option<String>, removed: &Option<String>, release: &str) -> bool {
    let k = release_key(release);
    since.as_deref().is_none_or(|s| release_key(s) <= k)
        && removed.as_deref().is_none_or(|r| release_key(r) > k)
}

/// The specs' items that the header of an older pinned `release` declares
/// exactly as cuda-sys does: records (and their fields) of that release
/// with no field added, removed or retyped since, enums and values, aliases, constants, and the
/// functions whose parameters have not changed since (no `abi:` entry with
/// other `params`).
fn as_in_release(specs: &Specs, release: &str) -> Specs {
    let mut s = specs.clone();
    let here =
        |since: &Option<String>, removed: &Option<String>| in_release(since, removed, release);
    for (_, g) in &mut s.groups {
        g.functions.retain(|f| {
            present_in(f, release, &PINNED)
                && f.removed.is_none()
                && f.abi.iter().all(|a| a.params.is_none())
        });
    }
    for (_, t) in &mut s.types {
        t.handles.retain(|x| here(&x.since, &x.removed));
        t.typedefs.retain(|x| here(&x.since, &x.removed));
        t.enums.retain(|x| here(&x.since, &x.removed));
        for e in &mut t.enums {
            e.values.retain(|v| here(&v.since, &v.removed));
        }
        t.records
            .retain(|x| here(&x.since, &x.removed) && !x.layout_differs_in(release, &PINNED));
        t.callbacks.retain(|x| here(&x.since, &x.removed));
        t.constants.retain(|x| here(&x.since, &x.removed));
    }
    // An alias of a record that grew since (or of such an alias) has the
    // record's newer size: leave it out with the record.
    let kept: std::collections::BTreeSet<String> =
        s.records().map(|r| r.name.value.clone()).collect();
    let mut grown: std::collections::BTreeSet<String> = specs
        .records()
        .map(|r| r.name.value.clone())
        .filter(|n| !kept.contains(n))
        .collect();
    loop {
        let more: Vec<String> = s
            .typedefs()
            .filter(|t| {
                let target =
                    t.ty.value
                        .trim_start_matches("struct ")
                        .trim_start_matches("union ");
                grown.contains(target) && !grown.contains(&t.name.value)
            })
            .map(|t| t.name.value.clone())
            .collect();
        if more.is_empty() {
            break;
        }
        grown.extend(more);
    }
    for (_, t) in &mut s.types {
        t.typedefs.retain(|x| !grown.contains(&x.name.value));
    }
    // An anonymous record is reached through its parent: keep it only with it.
    let names: std::collections::BTreeSet<String> =
        s.records().map(|r| r.name.value.clone()).collect();
    for (_, t) in &mut s.types {
        t.records.retain(|r| {
            r.c_path
                .as_deref()
                .is_none_or(|p| names.contains(p.split('.').next().unwrap_or_default()))
        });
    }
    s
}

/// The pinned releases, oldest first.
const PINNED: [&str; 5] = ["12.0", "12.4", "12.8", "13.0", "13.5"];

/// The header a probe compiles against.
#[derive(Debug, Clone, Copy)]
pub struct ProbeHeader {
    /// The file `#include`d: `cuda.h`, `nvrtc.h`.
    pub file: &'static str,
    /// A pointer to one of its functions, declared: `CUresult (CUDAAPI *p)`.
    pub function_pointer: &'static str,
    /// The stem of the probe files: `probe` (`tests/abi/probe.c`,
    /// `probe_12.0.c`), `nvrtc_probe`.
    pub stem: &'static str,
}

/// `cuda.h`'s probe.
pub const CUDA_H: ProbeHeader = ProbeHeader {
    file: "cuda.h",
    function_pointer: "CUresult (CUDAAPI *p)",
    stem: "probe",
};

/// `nvrtc.h`'s probe.
pub const NVRTC_H: ProbeHeader = ProbeHeader {
    file: "nvrtc.h",
    function_pointer: "nvrtcResult (*p)",
    stem: "nvrtc_probe",
};

/// The probes of `nvrtc.h`: `tests/abi/nvrtc_probe.c` for the newest pinned
/// release and `nvrtc_probe_<release>.c` for each older one.
pub fn nvrtc_c_probes(specs: &Specs) -> Result<Vec<(String, String)>> {
    let current = current_only(specs);
    let mut out = vec![(
        "tests/abi/nvrtc_probe.c".to_string(),
        render_c_probe_of(
            &current,
            &current,
            "the newest pinned nvrtc.h",
            None,
            NVRTC_H,
        )?,
    )];
    out.extend(older_probes(specs, NVRTC_H)?);
    Ok(out)
}

/// `tests/abi/probe_<release>.c` for each older pinned release: what
/// `as_in_release` keeps, compiled against that release's header.
pub fn c_probes_of_older_releases(specs: &Specs) -> Result<Vec<(String, String)>> {
    older_probes(specs, CUDA_H)
}

fn older_probes(specs: &Specs, h: ProbeHeader) -> Result<Vec<(String, String)>> {
    PINNED[..PINNED.len() - 1]
        .iter()
        .map(|r| {
            Ok((
                format!("tests/abi/{}_{r}.c", h.stem),
                render_c_probe_of(
                    &as_in_release(specs, r),
                    specs,
                    &format!("CUDA {r}'s {}", h.file),
                    Some(r),
                    h,
                )?,
            ))
        })
        .collect()
}

/// `tests/abi/probe.c`: every item the newest pinned header declares.
pub fn c_probe(specs: &Specs) -> Result<String> {
    let current = current_only(specs);
    render_c_probe(&current, &current, "the newest pinned cuda.h", None)
}

/// The kind a fact is printed under: `value`, or `value@12.0` for a value
/// the specs record as different in that older release (checked against the
/// specs' `earlier`, not against cuda-sys).
fn kind(base: &str, release: Option<&str>, earlier: &[ReleaseValue]) -> String {
    match release {
        Some(r) if earlier.iter().any(|e| e.release == r) => format!("{base}@{r}"),
        _ => base.to_string(),
    }
}

/// The probe of `specs`; records are looked up in `all` (an anonymous
/// record is reached through its first field, which an older release has
/// even when the record gained members since).
fn render_c_probe(
    specs: &Specs,
    all: &Specs,
    header: &str,
    release: Option<&str>,
) -> Result<String> {
    render_c_probe_of(specs, all, header, release, CUDA_H)
}

/// Callback types the importer named after a parameter declared as a
/// function pointer in place (`nvrtcSetFlowCallback_callback`): the header
/// has no such name, so the probe declares it from the specs, as a typedef.
fn in_place_callbacks(specs: &Specs) -> Result<String> {
    let mut out = String::new();
    for c in specs.callbacks() {
        let in_place = specs.functions().any(|(_, _, f)| {
            f.params.iter().any(|p| {
                p.ty.value == c.name.value && c.name.value == format!("{}_{}", f.name.value, p.name)
            })
        });
        if !in_place {
            continue;
        }
        let params = c
            .params
            .iter()
            .map(|p| CType::parse(&p.ty.value).map(|t| t.declare("").trim_end().to_string()))
            .collect::<std::result::Result<Vec<_>, _>>()?
            .join(", ");
        writeln!(
            out,
            "typedef {} (*{})({params}); /* declared in place in the header */",
            c.returns.value, c.name.value
        )?;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

fn render_c_probe_of(
    specs: &Specs,
    all: &Specs,
    header: &str,
    release: Option<&str>,
    h: ProbeHeader,
) -> Result<String> {
    let by_name: BTreeMap<&str, &Record> =
        all.records().map(|r| (r.name.value.as_str(), r)).collect();
    let mut body = String::new();
    for r in specs.records() {
        let a = access(r, &by_name);
        let n = &r.name.value;
        if a.sizable {
            let expr = if a.prefix.is_empty() {
                a.root.clone()
            } else {
                format!(
                    "__typeof__((({}*)0)->{})",
                    a.root,
                    a.prefix.trim_end_matches('.')
                )
            };
            writeln!(
                body,
                "    printf(\"size {n} %lld\\n\", (long long)sizeof({expr}));"
            )?;
            let align = kind("align", release, &r.earlier_align);
            // An older header without a forced alignment: nothing recorded to compare.
            let unforced = release.is_some_and(|rel| {
                r.earlier_align
                    .iter()
                    .any(|e| e.release == rel && e.value == 0)
            });
            if !unforced {
                writeln!(
                    body,
                    "    printf(\"{align} {n} %lld\\n\", (long long)_Alignof({expr}));"
                )?;
            }
        }
        for f in &r.fields {
            writeln!(
                body,
                "    printf(\"offset {n}.{} %lld\\n\", {});",
                f.name,
                c_offset(r, f, &by_name)
            )?;
        }
    }
    for e in specs.enums() {
        let n = &e.name.value;
        let t = if e.typedef_only {
            n.clone()
        } else {
            format!("enum {n}")
        };
        writeln!(
            body,
            "    printf(\"size {n} %lld\\n\", (long long)sizeof({t}));"
        )?;
        for v in &e.values {
            writeln!(
                body,
                "    printf(\"{1} {0} %lld\\n\", (long long){0});",
                v.name.value,
                kind("value", release, &v.earlier)
            )?;
        }
    }
    for n in specs
        .typedefs()
        .map(|t| &t.name.value)
        .chain(specs.handles().map(|h| &h.name.value))
        .chain(specs.callbacks().map(|c| &c.name.value))
    {
        writeln!(
            body,
            "    printf(\"size {n} %lld\\n\", (long long)sizeof({n}));"
        )?;
    }
    for c in specs.constants() {
        writeln!(
            body,
            "    printf(\"{1} {0} %lld\\n\", (long long){0});",
            c.name.value,
            kind("value", release, &c.earlier)
        )?;
    }
    let layouts = match release {
        Some(rel) => earlier_field_checks(all, rel, &by_name)?,
        None => String::new(),
    };
    let mut sigs = String::new();
    let mut fns: Vec<&Function> = specs.functions().map(|(_, _, f)| f).collect();
    fns.sort_by(|a, b| a.name.value.cmp(&b.name.value));
    for f in fns {
        let params = if f.params.is_empty() {
            "void".to_string()
        } else {
            f.params
                .iter()
                .map(|p| CType::parse(&p.ty.value).map(|t| t.declare(&p.name)))
                .collect::<std::result::Result<Vec<_>, _>>()?
                .join(", ")
        };
        writeln!(
            sigs,
            "    {{ {}({params}); (void)sizeof(p = {}); }}",
            h.function_pointer, f.name.value
        )?;
    }
    Ok(format!(
        "// @generated by cargo xtask codegen from specs/; do not edit.\n\
         // ABI probe: compiled against {header} by tests/tests/abi.rs.\n\
         #include <stddef.h>\n#include <stdio.h>\n#include <{}>\n\n{}\
         /* Each specified signature must match the header's declaration exactly\n   \
         (compiled with -Werror=incompatible-pointer-types); `sizeof` keeps the\n   \
         assignment unevaluated, so nothing needs the driver to link. */\n\
         void check_signatures(void) {{\n{sigs}}}\n\n{layouts}\
         int main(void) {{\n{body}    return 0;\n}}\n",
        h.file,
        in_place_callbacks(all)?
    ))
}

/// For an older pinned `release`: a compile-time check that each field the
/// specs' `earlier_fields` place in that release's header (removed or
/// retyped since) is declared there with that C type. Fields whose type is
/// an anonymous record (no C name) are left out.
fn earlier_field_checks(
    all: &Specs,
    release: &str,
    by_name: &BTreeMap<&str, &Record>,
) -> Result<String> {
    let mut out = String::new();
    for r in all.records() {
        if !in_release(&r.since, &r.removed, release) {
            continue;
        }
        let a = access(r, by_name);
        for e in &r.earlier_fields {
            if !in_release(&e.since, &Some(e.removed.clone()), release) {
                continue;
            }
            let mut t = CType::parse(&e.ty.value)?;
            if let Some(x) = by_name.get(t.base.as_str()) {
                if x.c_path.is_some() {
                    continue;
                }
                t.base = c_type_name(x);
            }
            writeln!(
                out,
                "_Static_assert(__builtin_types_compatible_p(__typeof__((({}*)0)->{}{}), {}), \
                 \"CUDA {release}: {}.{} is {}\");",
                a.root,
                a.prefix,
                e.name,
                t.declare("").trim_end(),
                r.name.value,
                e.name,
                e.ty.value
            )?;
        }
    }
    if out.is_empty() {
        return Ok(out);
    }
    Ok(format!(
        "/* Fields this header has that the newest lacks or types otherwise\n   \
         (the specs' `earlier_fields`), with their C types. */\n{out}\n"
    ))
}

/// `tests/src/generated/abi.rs`: the same facts computed from `cuda-sys`:
/// `facts` of the newest header's items, `older_facts` of the items only
/// older headers declare (for the older releases' probes).
pub fn rust_expectations(specs: &Specs) -> Result<TokenStream> {
    rust_expectations_of(specs, quote!(cuda_sys))
}

/// The same for the items of `module` (`cuda_sys::nvrtc` for NVRTC's specs).
pub fn rust_expectations_of(specs: &Specs, module: TokenStream) -> Result<TokenStream> {
    let current = fact_rows(&current_only(specs))?;
    let all = fact_rows(specs)?;
    let current_keys: std::collections::BTreeSet<String> =
        current.iter().map(|(k, _)| k.clone()).collect();
    let older: Vec<&TokenStream> = all
        .iter()
        .filter(|(k, _)| !current_keys.contains(k))
        .map(|(_, t)| t)
        .collect();
    let rows: Vec<&TokenStream> = current.iter().map(|(_, t)| t).collect();
    let count = rows.len();
    let mut release_rows = Vec::new();
    let mut push = |base: &str, name: &str, earlier: &[ReleaseValue]| {
        for e in earlier
            .iter()
            .filter(|e| !(base == "align" && e.value == 0))
        {
            let k = format!("{base}@{}", e.release);
            let v = e.value;
            release_rows.push(quote! { (#k, #name, #v) });
        }
    };
    for e in specs.enums() {
        for v in &e.values {
            push("value", &v.name.value, &v.earlier);
        }
    }
    for c in specs.constants() {
        push("value", &c.name.value, &c.earlier);
    }
    for r in specs.records() {
        push("align", &r.name.value, &r.earlier_align);
    }
    Ok(quote! {
        use #module::*;

        /// Number of facts in [`facts`].
        pub const FACT_COUNT: usize = #count;

        /// `(kind, name, value)` for every layout fact and value the ABI probe
        /// also prints from the real header: `size`, `align` and `offset` of records,
        /// `size` of enums and aliases, `value` of enumerators and constants.
        pub fn facts() -> ::std::vec::Vec<(&'static str, &'static str, i64)> {
            ::std::vec![ #(#rows),* ]
        }

        /// The same facts for the items only older pinned headers declare
        /// (`removed` in the specs), which the older releases' probes print.
        #[allow(deprecated)]
        pub fn older_facts() -> ::std::vec::Vec<(&'static str, &'static str, i64)> {
            ::std::vec![ #(#older),* ]
        }

        /// The values and forced alignments the specs record as different in
        /// an older release (`earlier`, `earlier_align`), as `("value@12.0",
        /// name, value)`: what that release's probe prints for them.
        pub fn release_facts() -> ::std::vec::Vec<(&'static str, &'static str, i64)> {
            ::std::vec![ #(#release_rows),* ]
        }
    })
}

/// One row per fact: `("kind name", tokens)`.
fn fact_rows(specs: &Specs) -> Result<Vec<(String, TokenStream)>> {
    let by_name: BTreeMap<&str, &Record> = specs
        .records()
        .map(|r| (r.name.value.as_str(), r))
        .collect();
    let mut rows = Vec::new();
    for r in specs.records() {
        let n = &r.name.value;
        let t = format_ident!("{}", escape(n));
        if access(r, &by_name).sizable {
            rows.push((
                format!("size {n}"),
                quote! { ("size", #n, ::core::mem::size_of::<#t>() as i64) },
            ));
            rows.push((
                format!("align {n}"),
                quote! { ("align", #n, ::core::mem::align_of::<#t>() as i64) },
            ));
        }
        for f in &r.fields {
            let key = format!("{n}.{}", f.name);
            let fi = format_ident!("{}", escape(&f.name));
            rows.push((
                format!("offset {key}"),
                quote! { ("offset", #key, ::core::mem::offset_of!(#t, #fi) as i64) },
            ));
        }
    }
    for e in specs.enums() {
        let n = &e.name.value;
        let t = format_ident!("{}", escape(n));
        rows.push((
            format!("size {n}"),
            quote! { ("size", #n, ::core::mem::size_of::<#t>() as i64) },
        ));
        for v in &e.values {
            let vn = &v.name.value;
            let vi = format_ident!("{}", vn);
            rows.push((
                format!("value {n}::{vn}"),
                quote! { ("value", #vn, #t::#vi.0 as i64) },
            ));
        }
    }
    for n in specs
        .typedefs()
        .map(|t| &t.name.value)
        .chain(specs.handles().map(|h| &h.name.value))
        .chain(specs.callbacks().map(|c| &c.name.value))
    {
        let t = format_ident!("{}", escape(n));
        rows.push((
            format!("size {n}"),
            quote! { ("size", #n, ::core::mem::size_of::<#t>() as i64) },
        ));
    }
    for c in specs.constants() {
        let n = &c.name.value;
        let ci = format_ident!("{}", n);
        rows.push((format!("value {n}"), quote! { ("value", #n, #ci as i64) }));
    }
    Ok(rows)
}
