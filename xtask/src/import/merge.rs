//! Merging the specs imported from several pinned releases into one set:
//! the union of their functions, enums (and values), records, handles,
//! typedefs, callbacks and constants. The newest header's declaration of an
//! item wins; an item no longer declared by the newest header keeps the
//! declaration of the last header that has it and says where it went
//! (`removed`). Every `since`, `removed` and earlier ABI is computed from the
//! headers; none is written by hand.

use std::collections::{BTreeMap, BTreeSet};

use crate::spec::model::*;

/// The specs of one pinned release, as the importer built them from its header.
#[derive(Debug)]
pub struct ReleaseSpecs {
    /// The release, e.g. `"12.0"`.
    pub release: &'static str,
    /// Its specs (annotations already carried over from the existing specs).
    pub specs: Specs,
}

pub use crate::spec::release::{release_key, release_number};

/// Where an item is present: the first and last release index.
fn span(present: &[bool]) -> Option<(usize, usize)> {
    let first = present.iter().position(|p| *p)?;
    let last = present.iter().rposition(|p| *p)?;
    Some((first, last))
}

/// `since` (when not the oldest release) and `removed` (when not in the
/// newest) of an item present in releases `first..=last`.
fn dates(releases: &[&'static str], first: usize, last: usize) -> (Option<String>, Option<String>) {
    let since = (first > 0).then(|| releases[first].to_string());
    let removed = releases.get(last + 1).map(|r| r.to_string());
    (since, removed)
}

/// The union of one keyed list over the releases (oldest first): the
/// newest declaration of each name, in the newest release's order, then the
/// items later releases dropped, each from the last release that has it.
/// `set` receives each item with its `since` and `removed`; `skip` names
/// items that must not be added as removed ones (declared under another
/// kind in the newest release).
fn union<T: Clone>(
    releases: &[&'static str],
    lists: &[&[T]],
    name: impl Fn(&T) -> &str,
    skip: &BTreeSet<String>,
    mut set: impl FnMut(&mut T, usize, Option<String>, Option<String>),
) -> Vec<T> {
    let mut out: Vec<(T, usize)> = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, list) in lists.iter().enumerate().rev() {
        for item in list.iter() {
            let n = name(item).to_string();
            if seen.contains(&n) || (i + 1 < lists.len() && skip.contains(&n)) {
                continue;
            }
            seen.insert(n);
            out.push((item.clone(), i));
        }
    }
    out.into_iter()
        .map(|(mut item, from)| {
            let n = name(&item).to_string();
            let present: Vec<bool> = lists
                .iter()
                .map(|l| l.iter().any(|x| name(x) == n))
                .collect();
            let (first, last) = span(&present).unwrap_or((from, from));
            let (since, removed) = dates(releases, first, last);
            set(&mut item, from, since, removed);
            item
        })
        .collect()
}

/// A function's C parameter types, for comparing ABIs (names do not matter:
/// 13.5 renamed `cuDevSmResourceSplitByCount`'s `remaining` to `remainder`).
fn signature(f: &Function) -> String {
    f.params
        .iter()
        .map(|p| p.ty.value.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A function's C parameter list with names, as recorded in `abi:`.
fn parameter_list(f: &Function) -> String {
    f.params
        .iter()
        .map(|p| format!("{} {}", p.ty.value, p.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The fields that older layouts of a record had and its layout of release
/// `from` (the newest having it) lacks, by name and C type: each run of
/// consecutive releases declaring the record with a field of that name and
/// type, unless the run lasts to `from`. A run ends at the first release
/// declaring the record without it (or not declaring the record: a gap),
/// which is its `removed`; its `since` is its first release, when later
/// than the record's. In the order the runs ended, then in the order they
/// began (a header's declaration order).
fn earlier_fields<'a>(
    releases: &[&'static str],
    layout: &dyn Fn(usize) -> Option<&'a Record>,
    from: usize,
) -> Vec<EarlierField> {
    let Some(record_first) = (0..=from).find(|i| layout(*i).is_some()) else {
        return Vec::new();
    };
    // Open runs: (name, type, first release), in declaration order.
    let mut open: Vec<(String, String, usize)> = Vec::new();
    let mut out = Vec::new();
    for i in record_first..=from {
        let now: Vec<(String, String)> = layout(i)
            .map(|y| {
                y.fields
                    .iter()
                    .map(|f| (f.name.clone(), f.ty.value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let (ended, kept): (Vec<_>, Vec<_>) = open
            .into_iter()
            .partition(|(n, t, _)| !now.iter().any(|(m, u)| m == n && u == t));
        open = kept;
        out.extend(ended.into_iter().map(|(name, ty, first)| EarlierField {
            name,
            ty: str(ty),
            since: (first > record_first).then(|| releases[first].to_string()),
            removed: releases[i].to_string(),
            moved_to: None,
        }));
        for (n, t) in now {
            if !open.iter().any(|(m, u, _)| *m == n && *u == t) {
                open.push((n, t, i));
            }
        }
    }
    out
}

/// Merges the releases' specs (oldest first) into one set.
pub fn merge(all: &[ReleaseSpecs]) -> Specs {
    let releases: Vec<&'static str> = all.iter().map(|r| r.release).collect();
    let newest = &all[all.len() - 1].specs;

    // Functions, by group file.
    let by_name: Vec<BTreeMap<&str, (&str, &GroupFile, &Function)>> = all
        .iter()
        .map(|r| {
            r.specs
                .functions()
                .map(|(file, g, f)| (f.name.value.as_str(), (file, g, f)))
                .collect()
        })
        .collect();
    let mut groups: Vec<(String, GroupFile)> = newest.groups.clone();
    let mut seen: BTreeSet<String> = newest
        .functions()
        .map(|(_, _, f)| f.name.value.clone())
        .collect();
    for i in (0..all.len().saturating_sub(1)).rev() {
        for (file, g, f) in all[i].specs.functions() {
            if !seen.insert(f.name.value.clone()) {
                continue;
            }
            let at = match groups.iter().position(|(n, _)| n == file) {
                Some(at) => at,
                None => {
                    groups.push((
                        file.to_string(),
                        GroupFile {
                            functions: Vec::new(),
                            ..g.clone()
                        },
                    ));
                    groups.len() - 1
                }
            };
            groups[at].1.functions.push(f.clone());
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, g) in &mut groups {
        for f in &mut g.functions {
            let name = f.name.value.clone();
            let present: Vec<bool> = by_name
                .iter()
                .map(|m| m.contains_key(name.as_str()))
                .collect();
            let Some((first, last)) = span(&present) else {
                continue;
            };
            // `since`: the oldest of the versions the headers give it
            // (`cudaTypedefs.h`'s `PFN_` versions, its ABI versions) that
            // falls after the last pinned release without it and not after
            // the first with it; else that first release. (`cuCtxCreate_v4`
            // is first declared by 12.8's header, at ABI 12050: 12.5, though
            // `cuCtxCreate` itself dates from 2.0.)
            let lower = first.checked_sub(1).map(|i| release_key(releases[i]));
            let upper = release_key(releases[first]);
            f.since = (first..=last)
                .filter_map(|i| by_name[i].get(name.as_str()))
                .flat_map(|(_, _, x)| {
                    let abi = [Some(x.proc_version), x.per_thread_version]
                        .into_iter()
                        .flatten()
                        .map(crate::import::header::version_string);
                    x.since.clone().into_iter().chain(abi)
                })
                .filter(|s| release_key(s) <= upper && lower.is_none_or(|l| release_key(s) > l))
                .chain(std::iter::once(releases[first].to_string()))
                .min_by_key(|s| release_key(s));
            f.removed = releases.get(last + 1).map(|r| r.to_string());
            let current = (f.symbol.clone(), f.proc_version, signature(f));
            let mut abi: Vec<ReleaseAbi> = Vec::new();
            let mut prev: Option<(String, u32, String)> = None;
            for (i, m) in by_name.iter().enumerate().take(last + 1).skip(first) {
                let Some((_, _, x)) = m.get(name.as_str()) else {
                    prev = None;
                    continue;
                };
                let this = (x.symbol.clone(), x.proc_version, signature(x));
                // Same symbol and parameters at a newer version is no earlier
                // ABI: that header's `cudaTypedefs.h` lacked the function's
                // `PFN_` (12.8 and `cuLibraryGetKernelCount`), so the importer
                // fell back to the header's own version.
                let no_earlier_abi =
                    this.0 == current.0 && this.2 == current.2 && this.1 >= current.1;
                if !no_earlier_abi && prev.as_ref() != Some(&this) {
                    abi.push(ReleaseAbi {
                        release: releases[i].to_string(),
                        symbol: this.0.clone(),
                        proc_version: this.1,
                        params: (this.2 != current.2).then(|| parameter_list(x)),
                    });
                }
                prev = Some(this);
            }
            f.abi = abi;
        }
    }

    // Types, file by file (callbacks.yaml, constants.yaml, …).
    let newest_type_names: BTreeSet<String> = newest
        .handles()
        .map(|x| x.name.value.clone())
        .chain(newest.typedefs().map(|x| x.name.value.clone()))
        .chain(newest.enums().map(|x| x.name.value.clone()))
        .chain(newest.records().map(|x| x.name.value.clone()))
        .chain(newest.callbacks().map(|x| x.name.value.clone()))
        .chain(newest.constants().map(|x| x.name.value.clone()))
        .collect();
    let files: BTreeSet<String> = all
        .iter()
        .flat_map(|r| r.specs.types.iter().map(|(n, _)| n.clone()))
        .collect();
    let mut types = Vec::new();
    for file in files {
        let per: Vec<TypesFile> = all
            .iter()
            .map(|r| {
                r.specs
                    .types
                    .iter()
                    .find(|(n, _)| *n == file)
                    .map(|(_, t)| t.clone())
                    .unwrap_or_default()
            })
            .collect();
        let skip = &newest_type_names;
        let t = TypesFile {
            handles: union(
                &releases,
                &per.iter().map(|t| t.handles.as_slice()).collect::<Vec<_>>(),
                |x| &x.name.value,
                skip,
                |x, _, s, r| (x.since, x.removed) = (s, r),
            ),
            typedefs: union(
                &releases,
                &per.iter()
                    .map(|t| t.typedefs.as_slice())
                    .collect::<Vec<_>>(),
                |x| &x.name.value,
                skip,
                |x, _, s, r| (x.since, x.removed) = (s, r),
            ),
            enums: union(
                &releases,
                &per.iter().map(|t| t.enums.as_slice()).collect::<Vec<_>>(),
                |x| &x.name.value,
                skip,
                |x, _, s, r| {
                    (x.since, x.removed) = (s, r);
                    let versions: Vec<&[EnumValue]> = per
                        .iter()
                        .map(|t| {
                            t.enums
                                .iter()
                                .find(|e| e.name.value == x.name.value)
                                .map(|e| e.values.as_slice())
                                .unwrap_or(&[])
                        })
                        .collect();
                    x.values = union(
                        &releases,
                        &versions,
                        |v| &v.name.value,
                        &BTreeSet::new(),
                        |v, _, s, r| (v.since, v.removed) = (s, r),
                    );
                    // A value as old as its enum needs no `since` of its own.
                    let enum_since = x.since.clone();
                    for v in &mut x.values {
                        if v.since == enum_since {
                            v.since = None;
                        }
                    }
                },
            ),
            records: union(
                &releases,
                &per.iter().map(|t| t.records.as_slice()).collect::<Vec<_>>(),
                |x| &x.name.value,
                skip,
                |x, from, s, r| {
                    (x.since, x.removed) = (s, r);
                    let layout =
                        |i: usize| per[i].records.iter().find(|y| y.name.value == x.name.value);
                    for field in &mut x.fields {
                        // Walk back from the release the record comes from
                        // while the field is there with the same type.
                        let mut first = from;
                        while first > 0
                            && layout(first - 1).is_some_and(|y| {
                                y.fields
                                    .iter()
                                    .any(|g| g.name == field.name && g.ty.value == field.ty.value)
                            })
                        {
                            first -= 1;
                        }
                        let record_first = (0..=from).find(|i| layout(*i).is_some()).unwrap_or(0);
                        field.since = (first > record_first).then(|| releases[first].to_string());
                    }
                    x.earlier_fields = earlier_fields(&releases, &layout, from);
                    // A field now declared inside an unnamed member.
                    for e in &mut x.earlier_fields {
                        if x.fields.iter().any(|f| f.name == e.name) {
                            continue;
                        }
                        e.moved_to = x
                            .fields
                            .iter()
                            .find(|f| {
                                per[from].records.iter().any(|y| {
                                    y.name.value == f.ty.value
                                        && y.c_path.as_deref().is_some_and(|p| p.ends_with(".*"))
                                        && y.fields
                                            .iter()
                                            .any(|g| g.name == e.name && g.ty.value == e.ty.value)
                                })
                            })
                            .map(|f| f.name.clone());
                    }
                },
            ),
            callbacks: union(
                &releases,
                &per.iter()
                    .map(|t| t.callbacks.as_slice())
                    .collect::<Vec<_>>(),
                |x| &x.name.value,
                skip,
                |x, _, s, r| (x.since, x.removed) = (s, r),
            ),
            constants: union(
                &releases,
                &per.iter()
                    .map(|t| t.constants.as_slice())
                    .collect::<Vec<_>>(),
                |x| &x.name.value,
                skip,
                |x, _, s, r| (x.since, x.removed) = (s, r),
            ),
        };
        types.push((file, t));
    }

    // Values and forced alignments that older headers give otherwise.
    let earlier = |current: i64, per_release: &dyn Fn(usize) -> Option<i64>| -> Vec<ReleaseValue> {
        (0..all.len().saturating_sub(1))
            .filter_map(|i| {
                per_release(i)
                    .filter(|v| *v != current)
                    .map(|value| ReleaseValue {
                        release: releases[i].to_string(),
                        value,
                    })
            })
            .collect()
    };
    for (file, t) in &mut types {
        let per = |i: usize| {
            all[i]
                .specs
                .types
                .iter()
                .find(|(n, _)| n == file)
                .map(|(_, t)| t)
        };
        for e in &mut t.enums {
            for v in &mut e.values {
                v.earlier = earlier(v.value, &|i| {
                    per(i)?
                        .enums
                        .iter()
                        .find(|x| x.name.value == e.name.value)?
                        .values
                        .iter()
                        .find(|x| x.name.value == v.name.value)
                        .map(|x| x.value)
                });
            }
        }
        for c in &mut t.constants {
            c.earlier = earlier(c.value, &|i| {
                per(i)?
                    .constants
                    .iter()
                    .find(|x| x.name.value == c.name.value)
                    .map(|x| x.value)
            });
        }
        for r in &mut t.records {
            r.earlier_align = earlier(i64::from(r.align.unwrap_or(0)), &|i| {
                per(i)?
                    .records
                    .iter()
                    .find(|x| x.name.value == r.name.value)
                    .map(|x| i64::from(x.align.unwrap_or(0)))
            });
        }
    }

    let errors = ErrorCatalogue {
        errors: union(
            &releases,
            &all.iter()
                .map(|r| r.specs.errors.errors.as_slice())
                .collect::<Vec<_>>(),
            |e| &e.name.value,
            &BTreeSet::new(),
            |_, _, _, _| {},
        ),
    };
    Specs {
        groups,
        types,
        errors,
        warp: newest.warp.clone(),
    }
}

/// How many `CUresult CUDAAPI` functions each release declares, from the
/// merged specs' `since` / `removed` and the first release declaring each.
pub fn functions_per_release(specs: &Specs, releases: &[&str]) -> Vec<(String, usize)> {
    releases
        .iter()
        .map(|r| {
            let n = specs
                .functions()
                .filter(|(_, _, f)| present_in(f, r, releases))
                .count();
            (r.to_string(), n)
        })
        .collect()
}

/// Whether the header of pinned release `r` declares `f`.
pub fn present_in(f: &Function, r: &str, releases: &[&str]) -> bool {
    let k = release_key(r);
    // The first pinned release declaring it: the first not before `since`.
    let first = releases.iter().find(|x| {
        f.since
            .as_deref()
            .is_none_or(|s| release_key(x) >= release_key(s))
    });
    let after_first = first.is_some_and(|x| k >= release_key(x));
    let before_removed = f.removed.as_deref().is_none_or(|x| k < release_key(x));
    after_first && before_removed
}
