//! The module metadata Warp writes beside a compiled module
//! (`wp_<module>.meta`), read with `serde_json`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::SourceError;

/// Module metadata Warp writes beside the compiled module (`wp_<module>.meta`).
///
/// Warp 1.19.0 writes one JSON object, keys sorted, with
/// `"<kernel name>_smem_bytes": <int>` for every forward and backward kernel:
/// the dynamic shared memory the kernel needs, which Warp sets as the
/// kernel's `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` at load and
/// passes as `sharedMemBytes` on every launch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Meta {
    /// Dynamic shared memory bytes by kernel name (e.g.
    /// `saxpy_cuda_kernel_forward`), from the `*_smem_bytes` keys.
    pub smem_bytes: BTreeMap<String, u32>,
    /// Every other key with its JSON value (none in Warp 1.19.0's output).
    pub other: BTreeMap<String, Value>,
}

impl Meta {
    /// Dynamic shared memory bytes for the kernel with this exact name.
    pub fn shared_memory_bytes(&self, kernel: &str) -> Option<u32> {
        self.smem_bytes.get(kernel).copied()
    }
}

const SMEM_SUFFIX: &str = "_smem_bytes";
/// Deepest nesting kept in [`Meta::other`] (Warp writes none at all).
const MAX_JSON_DEPTH: usize = 64;

/// The entries of the top-level object in file order, repeated keys kept,
/// each value as its text in the file (so that its line can be found).
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = Entries<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object (`{`) at the start of the .meta file")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(Object)
    }
}

/// A `serde_json` error as a [`SourceError`]: its line, and its message
/// without the location `serde_json` appends (the file and line lead).
fn json_error(file: &str, e: &serde_json::Error) -> SourceError {
    let full = e.to_string();
    let located = format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&located).unwrap_or(&full);
    SourceError::new(
        file,
        e.line().max(1),
        format!("{message} (column {})", e.column()),
    )
}

/// Parses a Warp `.meta` file (JSON). `file` is used only in error messages.
///
/// # Errors
///
/// A [`SourceError`] naming `file` and the line when the text is not one JSON
/// object, a key repeats, a value is nested deeper than 64 levels, or a
/// `*_smem_bytes` value is not an integer from 0 to `u32::MAX`.
pub fn parse_meta(text: &str, file: &str) -> Result<Meta, SourceError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let Entries(entries) = Entries::deserialize(&mut de).map_err(|e| json_error(file, &e))?;
    de.end().map_err(|e| {
        SourceError::new(
            file,
            e.line().max(1),
            "unexpected text after the JSON object",
        )
    })?;
    let mut meta = Meta::default();
    // Lines of the values, counted once through the text: the values come
    // in file order.
    let (mut seen, mut line) = (0usize, 1usize);
    for (key, raw) in entries {
        let at = (raw.get().as_ptr() as usize)
            .checked_sub(text.as_ptr() as usize)
            .filter(|&at| at >= seen && at <= text.len())
            .unwrap_or(seen);
        line += text.as_bytes()[seen..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        seen = at;
        if meta.other.contains_key(&key)
            || key
                .strip_suffix(SMEM_SUFFIX)
                .is_some_and(|k| meta.smem_bytes.contains_key(k))
        {
            return Err(SourceError::new(
                file,
                line,
                format!("key \"{key}\" appears twice"),
            ));
        }
        let value: Value = serde_json::from_str(raw.get())
            .map_err(|e| SourceError::new(file, line, format!("the value of \"{key}\": {e}")))?;
        if depth(&value) > MAX_JSON_DEPTH {
            return Err(SourceError::new(
                file,
                line,
                format!(
                    "the value of \"{key}\" is JSON nested deeper than {MAX_JSON_DEPTH} levels"
                ),
            ));
        }
        match key.strip_suffix(SMEM_SUFFIX) {
            Some(kernel) => {
                let Some(bytes) = value.as_u64().and_then(|n| u32::try_from(n).ok()) else {
                    return Err(SourceError::new(
                        file,
                        line,
                        format!(
                            "\"{key}\" must be a whole number of bytes from 0 to {}, found {}",
                            u32::MAX,
                            describe(&value)
                        ),
                    ));
                };
                meta.smem_bytes.insert(kernel.to_owned(), bytes);
            }
            None => {
                meta.other.insert(key, value);
            }
        }
    }
    Ok(meta)
}

/// How deep `v` nests (a scalar is 0). `serde_json` refuses input nested
/// deeper than 128 levels, which bounds the recursion.
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(entries) => 1 + entries.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::parse_cu;

    const FIXTURE_CU: &str = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.cu");
    const FIXTURE_META: &str = include_str!("../../../warp-launch/tests/fixtures/wp_kernels.meta");
    const CU: &str = "wp_kernels.cu";

    #[test]
    fn fixture_meta() {
        let meta = parse_meta(FIXTURE_META, "wp_kernels.meta").unwrap();
        assert_eq!(meta.smem_bytes.len(), 20);
        assert!(meta.other.is_empty());
        assert_eq!(
            meta.shared_memory_bytes("saxpy_cuda_kernel_forward"),
            Some(0)
        );
        assert_eq!(
            meta.shared_memory_bytes("lean_fill_cuda_kernel_backward"),
            Some(0)
        );
        assert_eq!(meta.shared_memory_bytes("nope"), None);
        // Every kernel in the source has an entry.
        let src = parse_cu(FIXTURE_CU, CU).unwrap();
        for k in &src.kernels {
            assert!(meta.smem_bytes.contains_key(&k.name), "{}", k.name);
        }
    }

    #[test]
    fn meta_errors_and_other_keys() {
        let m = parse_meta(
            "{\"a_smem_bytes\": 48,\n \"note\": {\"x\": [1, \"\\u0041\", null, true]}}",
            "m.meta",
        )
        .unwrap();
        assert_eq!(m.shared_memory_bytes("a"), Some(48));
        assert_eq!(
            m.other.get("note"),
            Some(&serde_json::json!({"x": [1, "A", null, true]}))
        );

        let e = parse_meta("{\"a_smem_bytes\": 1,\n\"b_smem_bytes\": -4}", "m.meta").unwrap_err();
        assert_eq!(e.to_string().split(": ").next(), Some("m.meta:2"));
        assert!(e.message().contains("\"b_smem_bytes\""), "{e}");
        assert!(e.message().contains("-4"), "{e}");
        let e = parse_meta("{\"a_smem_bytes\": 1.5}", "m.meta").unwrap_err();
        assert!(e.message().contains("whole number"), "{e}");
        let e = parse_meta("{\"a_smem_bytes\": 4294967296}", "m.meta").unwrap_err();
        assert!(e.message().contains("4294967295"), "{e}");
        let e = parse_meta("{\"a_smem_bytes\": \"3\"}", "m.meta").unwrap_err();
        assert!(e.message().contains("the string \"3\""), "{e}");
        let e = parse_meta("{\"a_smem_bytes\": 1,\n\n\"a_smem_bytes\": 2}", "m.meta").unwrap_err();
        assert_eq!(e.line(), 3);
        assert!(e.message().contains("twice"), "{e}");
        let e = parse_meta("{\"k\": 1,\n\"k\": 1}", "m.meta").unwrap_err();
        assert_eq!(e.line(), 2);
        assert!(e.message().contains("twice"), "{e}");
        let e = parse_meta("[1]", "m.meta").unwrap_err();
        assert!(e.message().contains("JSON object"), "{e}");
        let e = parse_meta("{\"a\": 1} x", "m.meta").unwrap_err();
        assert!(e.message().contains("after the JSON object"), "{e}");
        let e = parse_meta("{\"a\" 1}", "m.meta").unwrap_err();
        assert!(e.message().contains("`:`"), "{e}");
        assert!(e.to_string().starts_with("m.meta:1: "), "{e}");
        let e = parse_meta("{\n\"a\": 1,\n\"b\" 2}", "m.meta").unwrap_err();
        assert_eq!(e.line(), 3, "{e}");
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(100), "]".repeat(100));
        let e = parse_meta(&deep, "m.meta").unwrap_err();
        assert!(e.message().contains("nested deeper"), "{e}");
        // Deeper than serde_json's own limit: refused, never a stack overflow.
        let deeper = format!("{{\"a\": {}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse_meta(&deeper, "m.meta").is_err());
    }

    #[test]
    fn bad_text_never_panics() {
        for text in [
            "",
            "{",
            "{\"a\"",
            "{\"a\":",
            "\"open",
            "é",
            "{\"a\": 1,}",
            "/* open",
            "extern \"C\" __global__ void k(int a) {}",
        ] {
            assert!(parse_meta(text, "x.meta").is_err(), "{text}");
        }
        for cut in 0..FIXTURE_META.len() {
            let _ = parse_meta(&FIXTURE_META[..cut], "x.meta");
        }
    }
}
