//! C types as the specs spell them (`const void *`, `void *const *`,
//! `char[256]`), parsed into a small model that renders both to Rust and back
//! to C.

use std::fmt;

/// A parsed C type: a base name, its constness, pointer levels and array dimensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CType {
    /// The base type name: a C builtin (`unsigned int`, `void`, `size_t`) or a spec type.
    pub base: String,
    /// `const` on the base type.
    pub base_const: bool,
    /// Pointer levels from the base outward; `true` where that pointer itself is `const`.
    pub ptrs: Vec<bool>,
    /// Array dimensions, outermost first.
    pub dims: Vec<u64>,
}

/// C builtin type names and their Rust spelling.
pub const BUILTINS: &[(&str, &str)] = &[
    ("void", "::core::ffi::c_void"),
    ("char", "::core::ffi::c_char"),
    ("signed char", "::core::ffi::c_schar"),
    ("unsigned char", "::core::ffi::c_uchar"),
    ("short", "::core::ffi::c_short"),
    ("unsigned short", "::core::ffi::c_ushort"),
    ("int", "::core::ffi::c_int"),
    ("unsigned int", "::core::ffi::c_uint"),
    ("long", "::core::ffi::c_long"),
    ("unsigned long", "::core::ffi::c_ulong"),
    ("long long", "::core::ffi::c_longlong"),
    ("unsigned long long", "::core::ffi::c_ulonglong"),
    ("float", "f32"),
    ("double", "f64"),
    ("size_t", "usize"),
    ("int8_t", "i8"),
    ("int16_t", "i16"),
    ("int32_t", "i32"),
    ("int64_t", "i64"),
    ("uint8_t", "u8"),
    ("uint16_t", "u16"),
    ("uint32_t", "u32"),
    ("uint64_t", "u64"),
];

/// The Rust spelling of a C builtin, if `name` is one.
pub fn builtin_rust(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|(c, _)| *c == name).map(|(_, r)| *r)
}

impl CType {
    /// Parses the spec spelling. Returns a message on malformed input.
    pub fn parse(text: &str) -> Result<CType, String> {
        let mut s = text.trim();
        let mut dims = Vec::new();
        while let Some(open) = s.rfind('[') {
            let close = s[open..]
                .find(']')
                .map(|c| c + open)
                .ok_or_else(|| format!("unclosed `[` in C type `{text}`"))?;
            if close != s.len() - 1 {
                return Err(format!("unexpected text after `]` in C type `{text}`"));
            }
            let n: u64 = s[open + 1..close]
                .trim()
                .parse()
                .map_err(|_| format!("array size in C type `{text}` is not a number"))?;
            dims.insert(0, n);
            s = s[..open].trim_end();
        }
        // Split off pointer stars with their trailing `const`.
        let mut ptrs = Vec::new();
        let first_star = s.find('*');
        let (head, tail) = match first_star {
            Some(i) => (&s[..i], &s[i..]),
            None => (s, ""),
        };
        for part in tail.split('*').skip(1) {
            match part.trim() {
                "" => ptrs.push(false),
                "const" => ptrs.push(true),
                other => return Err(format!("unexpected `{other}` after `*` in C type `{text}`")),
            }
        }
        let mut words: Vec<&str> = head.split_whitespace().collect();
        let mut base_const = false;
        words.retain(|w| {
            if *w == "const" {
                base_const = true;
                false
            } else {
                true
            }
        });
        if words.is_empty() {
            return Err(format!("C type `{text}` has no base type"));
        }
        let base = words.join(" ");
        if base.contains(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ' ')) {
            return Err(format!("C type `{text}` has an invalid base type `{base}`"));
        }
        Ok(CType {
            base,
            base_const,
            ptrs,
            dims,
        })
    }

    /// Whether the outermost level (ignoring arrays) is a pointer.
    pub fn is_pointer(&self) -> bool {
        !self.ptrs.is_empty()
    }

    /// Whether the outermost pointer points to `const` data.
    pub fn pointee_is_const(&self) -> bool {
        match self.ptrs.len() {
            0 => false,
            1 => self.base_const,
            n => self.ptrs[n - 2],
        }
    }

    /// The type one pointer level down (`T *` → `T`).
    pub fn pointee(&self) -> Option<CType> {
        let mut t = self.clone();
        t.ptrs.pop()?;
        if let Some(last) = t.ptrs.last_mut() {
            *last = false;
        }
        Some(t)
    }

    /// The Rust type, with spec types resolved by `path` (e.g. prefixing `crate::`).
    pub fn to_rust(&self, path: &dyn Fn(&str) -> String) -> String {
        let mut ty = match builtin_rust(&self.base) {
            Some(r) => r.to_string(),
            None => path(&self.base),
        };
        for i in 0..self.ptrs.len() {
            let pointee_const = if i == 0 {
                self.base_const
            } else {
                self.ptrs[i - 1]
            };
            ty = format!("*{} {ty}", if pointee_const { "const" } else { "mut" });
        }
        for n in self.dims.iter().rev() {
            ty = format!("[{ty}; {n}]");
        }
        ty
    }

    /// The C declaration of `name` with this type (`char name[256]`, `void *name`).
    pub fn declare(&self, name: &str) -> String {
        let mut out = self.without_dims().to_string();
        if !out.ends_with('*') {
            out.push(' ');
        }
        out.push_str(name);
        for n in &self.dims {
            out.push_str(&format!("[{n}]"));
        }
        out
    }

    fn without_dims(&self) -> CType {
        CType {
            dims: Vec::new(),
            ..self.clone()
        }
    }
}

impl fmt::Display for CType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.base_const {
            f.write_str("const ")?;
        }
        f.write_str(&self.base)?;
        for (i, c) in self.ptrs.iter().enumerate() {
            f.write_str(if i == 0 { " *" } else { "*" })?;
            if *c {
                f.write_str("const ")?;
            }
        }
        // Drop the trailing blank of a final `*const `.
        for n in &self.dims {
            write!(f, "[{n}]")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rust(t: &str) -> String {
        CType::parse(t).unwrap().to_rust(&|n| n.to_string())
    }

    #[test]
    fn pointers_keep_their_constness() {
        assert_eq!(rust("const void *"), "*const ::core::ffi::c_void");
        assert_eq!(rust("void **"), "*mut *mut ::core::ffi::c_void");
        assert_eq!(rust("void *const *"), "*const *mut ::core::ffi::c_void");
        assert_eq!(
            rust("const char *const *"),
            "*const *const ::core::ffi::c_char"
        );
        assert_eq!(rust("CUdeviceptr *"), "*mut CUdeviceptr");
    }

    #[test]
    fn arrays_nest_outermost_first() {
        assert_eq!(rust("char[256]"), "[::core::ffi::c_char; 256]");
        assert_eq!(rust("unsigned int[3][2]"), "[[::core::ffi::c_uint; 2]; 3]");
        assert_eq!(
            CType::parse("unsigned int[3][2]").unwrap().declare("x"),
            "unsigned int x[3][2]"
        );
    }

    #[test]
    fn round_trips_through_display() {
        for t in [
            "unsigned int",
            "const void *",
            "void **",
            "void *const *",
            "char[16]",
            "CUstream *",
        ] {
            assert_eq!(CType::parse(t).unwrap().to_string().trim_end(), t);
        }
    }

    #[test]
    fn pointee_drops_one_level() {
        let t = CType::parse("const char *const *").unwrap();
        assert!(t.pointee_is_const());
        assert_eq!(t.pointee().unwrap().to_string().trim_end(), "const char *");
    }

    #[test]
    fn malformed_types_are_refused() {
        assert!(CType::parse("").is_err());
        assert!(CType::parse("int[x]").is_err());
        assert!(CType::parse("int * volatile").is_err());
    }
}
