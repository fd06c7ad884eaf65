//! The merged specs across the pinned releases (CUDA 12.0, 12.4, 12.8, 13.0,
//! 13.5): what each release declares, what each added and removed, the
//! earlier ABIs, and the types' dates, as snapshots of the real `specs/`.
//! `cargo xtask import --check` compares the same facts with the headers.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use xtask::import::merge::{functions_per_release, present_in, release_key};
use xtask::provision::{PINNED_RELEASES, workspace_root};
use xtask::spec::{load, model::Specs};

fn specs() -> Specs {
    load::load_dir(&workspace_root().join("specs"))
        .unwrap_or_else(|e| panic!("specs/ must load:\n{e}"))
}

fn releases() -> Vec<&'static str> {
    PINNED_RELEASES.iter().map(|r| r.release).collect()
}

fn declared(specs: &Specs, release: &str, releases: &[&str]) -> BTreeSet<String> {
    specs
        .functions()
        .filter(|(_, _, f)| present_in(f, release, releases))
        .map(|(_, _, f)| f.name.value.clone())
        .collect()
}

#[test]
fn functions_declared_by_each_release() {
    let specs = specs();
    let releases = releases();
    let counts = functions_per_release(&specs, &releases);
    // The numbers `cargo xtask import` printed from the headers themselves.
    assert_eq!(
        counts,
        [
            ("12.0".to_string(), 380),
            ("12.4".to_string(), 429),
            ("12.8".to_string(), 447),
            ("13.0".to_string(), 449),
            ("13.5".to_string(), 492),
        ]
    );
    assert_eq!(specs.functions().count(), 506, "the union of all five");
    let mut text = String::new();
    let mut before = BTreeSet::new();
    for r in &releases {
        let now = declared(&specs, r, &releases);
        let added: Vec<&String> = now.difference(&before).collect();
        let removed: Vec<&String> = before.difference(&now).collect();
        writeln!(text, "CUDA {r}: {} functions", now.len()).unwrap();
        if !before.is_empty() {
            writeln!(text, "  added ({}): {added:?}", added.len()).unwrap();
            writeln!(text, "  removed ({}): {removed:?}", removed.len()).unwrap();
        }
        before = now;
    }
    insta::assert_snapshot!(text);
}

#[test]
fn every_function_has_since_and_removed_ones_name_the_release() {
    let specs = specs();
    let releases = releases();
    for (_, _, f) in specs.functions() {
        let since = f
            .since
            .as_deref()
            .unwrap_or_else(|| panic!("{} has no since", f.name.value));
        assert!(
            release_key(since) <= release_key(releases[releases.len() - 1]),
            "{}: since {since} is after the newest pinned release",
            f.name.value
        );
        if let Some(r) = &f.removed {
            assert!(
                releases.contains(&r.as_str()),
                "{}: removed {r} is no pinned release",
                f.name.value
            );
            assert!(release_key(r) > release_key(since), "{}", f.name.value);
        }
        // Every function is declared by at least one pinned header.
        assert!(
            releases.iter().any(|r| present_in(f, r, &releases)),
            "{} is declared by no pinned header",
            f.name.value
        );
    }
}

#[test]
fn earlier_abis() {
    let specs = specs();
    let mut text = String::new();
    for (_, _, f) in specs.functions() {
        for a in &f.abi {
            writeln!(
                text,
                "{} (now {}@{}): CUDA {}: {}@{}{}",
                f.name.value,
                f.symbol,
                f.proc_version,
                a.release,
                a.symbol,
                a.proc_version,
                if a.params.is_some() {
                    ", other parameters"
                } else {
                    ""
                }
            )
            .unwrap();
        }
    }
    insta::assert_snapshot!(text);
}

#[test]
fn type_dates() {
    let specs = specs();
    let releases = releases();
    let mut text = String::new();
    for r in &releases {
        let since = |s: &Option<String>| s.as_deref() == Some(*r);
        let enums = specs.enums().filter(|e| since(&e.since)).count();
        let values = specs
            .enums()
            .flat_map(|e| e.values.iter())
            .filter(|v| since(&v.since))
            .count();
        let records = specs.records().filter(|x| since(&x.since)).count();
        let fields = specs
            .records()
            .flat_map(|x| x.fields.iter())
            .filter(|f| since(&f.since))
            .count();
        let constants = specs.constants().filter(|c| since(&c.since)).count();
        // Fields of older records this release removed or gave another type.
        let gone_fields = specs
            .records()
            .flat_map(|x| x.earlier_fields.iter())
            .filter(|e| e.removed == *r)
            .count();
        let removed_records: Vec<&str> = specs
            .records()
            .filter(|x| since(&x.removed))
            .map(|x| x.name.value.as_str())
            .collect();
        let removed_values: Vec<&str> = specs
            .enums()
            .flat_map(|e| e.values.iter())
            .filter(|v| since(&v.removed))
            .map(|v| v.name.value.as_str())
            .collect();
        writeln!(
            text,
            "CUDA {r}: new: {enums} enums, {values} values of older enums, {records} records, \
             {fields} fields of older records, {constants} constants; \
             {gone_fields} fields removed or retyped, \
             removed records {removed_records:?}, removed values {removed_values:?}"
        )
        .unwrap();
    }
    // Records that grew: fields newer than the record.
    for x in specs.records() {
        let grown: Vec<String> = x
            .fields
            .iter()
            .filter_map(|f| f.since.as_ref().map(|s| format!("{} ({s})", f.name)))
            .collect();
        if !grown.is_empty() {
            writeln!(text, "{} grew: {}", x.name.value, grown.join(", ")).unwrap();
        }
    }
    insta::assert_snapshot!(text);
}

/// Fields older headers had that a record's newest layout lacks (removed),
/// or declared with another C type (retyped), from `earlier_fields`; each
/// entry's releases are consistent with the record's and the field's.
#[test]
fn removed_and_retyped_fields() {
    let specs = specs();
    let releases = releases();
    let at = |r: &str| {
        releases
            .iter()
            .position(|x| *x == r)
            .unwrap_or_else(|| panic!("{r} is no pinned release"))
    };
    let mut text = String::new();
    let (mut removed, mut retyped) = (0, 0);
    for x in specs.records() {
        let record_first = x.since.as_deref().map_or(0, at);
        let record_end = x.removed.as_deref().map_or(releases.len(), at);
        for e in &x.earlier_fields {
            let first = e.since.as_deref().map_or(record_first, at);
            let end = at(&e.removed);
            assert!(
                record_first <= first && first < end && end < record_end,
                "{}.{}: since {:?} / removed {} outside the record's releases",
                x.name.value,
                e.name,
                e.since,
                e.removed
            );
            let now = x.fields.iter().find(|f| f.name == e.name);
            if let Some(f) = now {
                assert_ne!(f.ty.value, e.ty.value, "{}.{}", x.name.value, e.name);
                assert!(e.moved_to.is_none(), "{}.{}", x.name.value, e.name);
                retyped += 1;
            } else {
                removed += 1;
            }
            writeln!(
                text,
                "{}.{}: {} in CUDA {}..{}, {}",
                x.name.value,
                e.name,
                e.ty.value,
                releases[first],
                releases[end - 1],
                match now {
                    Some(f) => format!("type changed in {} (now {})", e.removed, f.ty.value),
                    None => match &e.moved_to {
                        Some(m) => format!("moved into the unnamed member {m} in {}", e.removed),
                        None => format!("removed in {}", e.removed),
                    },
                }
            )
            .unwrap();
        }
    }
    writeln!(text, "{removed} removed, {retyped} retyped").unwrap();
    insta::assert_snapshot!(text);
}

/// `specs/nvrtc/`: what each pinned `nvrtc.h` declares (the counts
/// `cargo xtask import` printed from the headers), each function's
/// `proc_version` is its `since` (the NVRTC version the loader gates it
/// on), and the driver's specs do not take in NVRTC's.
#[test]
fn nvrtc_functions_and_codes_of_each_release() {
    use xtask::import::merge::release_number;
    use xtask::provision::PINNED_NVRTC;
    let nvrtc = load::load_dir(&workspace_root().join("specs").join("nvrtc"))
        .unwrap_or_else(|e| panic!("specs/nvrtc/ must load:\n{e}"));
    let releases: Vec<&str> = PINNED_NVRTC.iter().map(|r| r.release).collect();
    assert_eq!(releases, self::releases(), "one NVRTC wheel per release");
    let counts = functions_per_release(&nvrtc, &releases);
    assert_eq!(
        counts,
        [
            ("12.0".to_string(), 20),
            ("12.4".to_string(), 20),
            ("12.8".to_string(), 25),
            ("13.0".to_string(), 23),
            ("13.5".to_string(), 28),
        ]
    );
    for (_, _, f) in nvrtc.functions() {
        let since = f.since.as_deref().expect("every NVRTC function has since");
        assert_eq!(f.proc_version, release_number(since), "{}", f.name.value);
    }
    let mut text = String::new();
    let mut before = BTreeSet::new();
    for r in &releases {
        let now = declared(&nvrtc, r, &releases);
        let added: Vec<&String> = now.difference(&before).collect();
        let removed: Vec<&String> = before.difference(&now).collect();
        writeln!(text, "CUDA {r}: {} functions", now.len()).unwrap();
        if !before.is_empty() {
            writeln!(text, "  added ({}): {added:?}", added.len()).unwrap();
            writeln!(text, "  removed ({}): {removed:?}", removed.len()).unwrap();
        }
        before = now;
    }
    writeln!(text, "nvrtcResult codes:").unwrap();
    for e in nvrtc.enums().filter(|e| e.name.value == "nvrtcResult") {
        for v in &e.values {
            let since = v.since.as_deref().unwrap_or("12.0");
            writeln!(text, "  {} = {} (since {since})", v.name.value, v.value).unwrap();
        }
    }
    insta::assert_snapshot!(text);
    let driver = specs();
    assert!(
        driver
            .functions()
            .all(|(_, _, f)| !f.name.value.starts_with("nvrtc")),
        "specs/ must not load specs/nvrtc/ into the driver's set"
    );
}
