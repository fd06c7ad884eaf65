//! A spec value of the wrong type is reported with the file, the entry (the
//! function, record, enum value, error code, Warp constant) by name and the
//! field: at 38e7deb the message said only `invalid u32`. Each case is the
//! real spec file under `specs/` with one value changed.

use std::path::{Path, PathBuf};

use xtask::spec::load::{SEPARATE_SETS, load_sources};

fn specs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .join("specs")
}

/// Every real spec file of the driver's set as `(specs/REL, text)` (the
/// separate sets such as `specs/nvrtc/` left out, as `load_dir` does).
fn real_specs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut dirs = vec![specs_dir()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let separate = d == specs_dir()
                && SEPARATE_SETS.contains(&e.file_name().to_string_lossy().as_ref());
            if p.is_dir() && !separate {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                let rel = p.strip_prefix(specs_dir()).unwrap().to_string_lossy();
                out.push((format!("specs/{rel}"), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out
}

/// Loads the real specs with `from` replaced by `to` in `file` and returns
/// the one error line.
#[track_caller]
fn error_for(file: &str, from: &str, to: &str) -> String {
    let mut sources = real_specs();
    let text = &mut sources
        .iter_mut()
        .find(|(f, _)| f == file)
        .unwrap_or_else(|| panic!("no {file}"))
        .1;
    assert!(text.contains(from), "{file} has no `{from}`");
    *text = text.replacen(from, to, 1);
    let e = load_sources(&sources).expect_err("the wrong type was accepted");
    assert_eq!(e.0.len(), 1, "{e}");
    e.0[0].to_string()
}

#[test]
fn the_real_specs_load() {
    load_sources(&real_specs()).expect("specs/ loads");
}

#[test]
fn a_wrong_value_type_names_file_entry_and_field() {
    for (file, from, to, line, wants) in [
        (
            "specs/functions/device.yaml",
            "proc_version: 2000",
            "proc_version: abc",
            11,
            &[
                "function `cuDeviceGet`",
                "field `proc_version` (`abc`)",
                "invalid u32",
            ][..],
        ),
        (
            "specs/functions/event.yaml",
            "per_thread_version: 7000",
            "per_thread_version: [7000]",
            35,
            &["function `cuEventRecord`", "field `per_thread_version`"],
        ),
        (
            "specs/functions/checkpoint.yaml",
            "    optional: true",
            "    optional: sometimes",
            66,
            &[
                "function `cuCheckpointProcessLock`",
                "parameter `args`",
                "field `optional` (`sometimes`)",
            ],
        ),
        (
            "specs/functions/device.yaml",
            "    role: out",
            "    role: sideways",
            20,
            &[
                "function `cuDeviceGet`",
                "parameter `device`",
                "field `role` (`sideways`)",
                "unknown variant `sideways`",
            ],
        ),
        (
            "specs/types/records.yaml",
            "  align: 128",
            "  align: wide",
            903,
            &[
                "record `CUtensorMap_st`",
                "field `align` (`wide`)",
                "invalid u32",
            ],
        ),
        (
            "specs/types/enums.yaml",
            "value: 0\n",
            "value: zero\n",
            22,
            &[
                "enum `CUctx_flags_enum`",
                "value `CU_CTX_SCHED_AUTO`",
                "field `value` (`zero`)",
                "invalid i64",
            ],
        ),
        (
            "specs/errors.yaml",
            "  sticky: true\n",
            "  sticky: yes please\n",
            136,
            &["error `CUDA_ERROR_CONTAINED`", "field `sticky`"],
        ),
        (
            "specs/warp/abi.yaml",
            "value: 4",
            "value: four",
            17,
            &[
                "constant `LAUNCH_MAX_DIMS`",
                "field `value` (`four`)",
                "invalid u64",
            ],
        ),
    ] {
        let e = error_for(file, from, to);
        assert!(e.starts_with(&format!("{file}:{line}:")), "{e}");
        for want in wants {
            assert!(e.contains(want), "`{to}`: no `{want}` in: {e}");
        }
    }
}

#[test]
fn an_unknown_field_names_its_entry() {
    let e = error_for(
        "specs/functions/device.yaml",
        "  safety: safe\n",
        "  safety: safe\n  colour: red\n",
    );
    assert!(
        e.starts_with("specs/functions/device.yaml:14:3: function `cuDeviceGet`, field `colour`"),
        "{e}"
    );
    assert!(
        e.contains("unknown field `colour`, expected one of name"),
        "{e}"
    );
}

/// An `earlier_fields` entry is checked like a field: its C type must name a
/// defined type, and `moved_to` a field of its record.
#[test]
fn an_earlier_field_is_checked() {
    let e = error_for(
        "specs/types/records.yaml",
        "    type: cuuint64_t[8]\n    removed: \"13.5\"",
        "    type: cuuint65_t[8]\n    removed: \"13.5\"",
    );
    assert!(e.starts_with("specs/types/records.yaml:"), "{e}");
    assert!(
        e.contains("earlier field `CUcheckpointCheckpointArgs_st.reserved` (removed 13.5)")
            && e.contains("no type `cuuint65_t` is defined"),
        "{e}"
    );
    let e = error_for(
        "specs/types/records.yaml",
        "    moved_to: anon1",
        "    moved_to: anon7",
    );
    assert!(
        e.contains("earlier field `CUmemLocation_st.id` (removed 13.5) has moved_to `anon7`")
            && e.contains("record `CUmemLocation_st` has no field `anon7`"),
        "{e}"
    );
}
