//! The typed model of the YAML specs. Fields marked *fact* are written by
//! `cargo xtask import` from the header; fields marked *ours* are hand
//! annotations that the importer preserves.

use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

pub use super::text::{Str, str};

fn is_false(b: &bool) -> bool {
    !*b
}

/// `specs/functions/GROUP.yaml`: the functions of one API group of `cuda.h`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupFile {
    /// The header's `\defgroup` name, e.g. `CUDA_MEM` (fact).
    pub group: String,
    /// The group's title, e.g. `Memory Management` (fact).
    pub title: String,
    /// What the group is for, in our words (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The functions, in header order.
    pub functions: Vec<Function>,
}

/// How the safe layer may call a function (ours).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Safety {
    /// The arguments alone cannot break memory safety once typed (handles, scalars, out-values).
    Safe,
    /// The caller must uphold a contract the types cannot express.
    #[default]
    Unsafe,
}

/// One driver function.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Function {
    /// The API name a C programmer writes, e.g. `cuMemAlloc` (fact).
    pub name: Str,
    /// The ABI symbol the name resolves to, e.g. `cuMemAlloc_v2` (fact).
    pub symbol: String,
    /// The per-thread-default-stream symbol (`_ptds` / `_ptsz`), if any (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_thread_symbol: Option<String>,
    /// The version passed to `cuGetProcAddress` for the per-thread symbol (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_thread_version: Option<u32>,
    /// The CUDA version passed to `cuGetProcAddress` to get `symbol`, e.g. 3020 (fact).
    pub proc_version: u32,
    /// The CUDA release the function first appeared in, e.g. `"2.0"` (fact, where known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The first pinned release whose header no longer declares it, e.g.
    /// `"13.0"`; the entry is then that of the last header declaring it (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
    /// Earlier ABIs: where a pinned release's header resolved this name to
    /// another symbol or `cuGetProcAddress` version than `symbol` /
    /// `proc_version`, the first release of each such run (fact).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub abi: Vec<ReleaseAbi>,
    /// Whether the header marks it deprecated (fact).
    #[serde(default, skip_serializing_if = "is_false")]
    pub deprecated: bool,
    /// Rust name, where `heck`'s snake case of the name is wrong (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rust_name: Option<String>,
    /// Safety class for the safe layer (ours).
    #[serde(default)]
    pub safety: Safety,
    /// One or two sentences in our own words (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// This function's own safety contract, in our words, added to the
    /// `# Safety` section of its `unsafe` wrapper (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_doc: Option<String>,
    /// Parameters in declaration order.
    pub params: Vec<Param>,
    /// The `CUresult` codes the header documents for it (fact).
    pub errors: Vec<Str>,
}

/// The ABI a function had in earlier pinned releases (fact).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseAbi {
    /// The first pinned release with this ABI, e.g. `"12.0"`; it holds until
    /// the next entry's release, or the function's current ABI.
    pub release: String,
    /// The ABI symbol in that release, e.g. `cuCtxCreate_v2`.
    pub symbol: String,
    /// The `cuGetProcAddress` version of that symbol.
    pub proc_version: u32,
    /// The C parameter list of that ABI, when it differs from the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<String>,
}

/// A value an item had in an earlier pinned release (fact).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseValue {
    /// The pinned release, e.g. `"12.0"`.
    pub release: String,
    /// The value in that release's header.
    pub value: i64,
}

/// Direction of a parameter (ours, proposed by the importer from the header's docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Read by the driver.
    In,
    /// Written by the driver.
    Out,
    /// Read and written by the driver.
    Inout,
}

impl Role {
    /// The word used in docs.
    pub fn word(self) -> &'static str {
        match self {
            Role::In => "in",
            Role::Out => "out",
            Role::Inout => "in-out",
        }
    }
}

/// One function parameter.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Name as in the header (fact).
    pub name: String,
    /// C type in the header's spelling, e.g. `const void *` (fact).
    #[serde(rename = "type")]
    pub ty: Str,
    /// Direction (ours).
    pub role: Spanned<Role>,
    /// For a pointer to an array: the parameter holding its element count (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<Str>,
    /// A pointer that may be null (ours).
    #[serde(default, skip_serializing_if = "is_false")]
    pub optional: bool,
    /// snake_case name in the thin layer, where `heck`'s is wrong (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rust_name: Option<String>,
    /// For an `out` pointer without `len`: the driver writes exactly this many
    /// elements, returned as an array; for an `out` `char *` with `len`: the
    /// buffer size passed, the text returned as a `String` (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<u32>,
    /// An `out` integer the header documents as 0 or 1, returned as `bool` (ours).
    #[serde(default, skip_serializing_if = "is_false")]
    pub boolean: bool,
    /// A pointer to an array whose element count no parameter holds (the
    /// driver derives it from other arguments): always passed as a raw
    /// pointer, never as a single value (ours).
    #[serde(default, skip_serializing_if = "is_false")]
    pub array: bool,
}

/// The files under `specs/types/`; each file fills some of these lists.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypesFile {
    /// Opaque handle types.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handles: Vec<Handle>,
    /// Type aliases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub typedefs: Vec<Typedef>,
    /// C enums.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enums: Vec<Enum>,
    /// C structs and unions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<Record>,
    /// Function-pointer typedefs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callbacks: Vec<Callback>,
    /// `#define` constants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<Constant>,
}

/// An opaque handle: a pointer to an incomplete struct.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handle {
    /// The handle type, e.g. `CUcontext`.
    pub name: Str,
    /// The incomplete struct it points to, e.g. `CUctx_st`.
    pub opaque: String,
    /// The first pinned release whose header has it, when not the oldest
    /// pinned release (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The first pinned release whose header no longer has it (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
}

/// A type alias.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Typedef {
    /// Alias name.
    pub name: Str,
    /// Aliased C type.
    #[serde(rename = "type")]
    pub ty: Str,
    /// The first pinned release whose header has it, when not the oldest
    /// pinned release (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The first pinned release whose header no longer has it (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
}

/// A C enum.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Enum {
    /// The enum's tag name, e.g. `cudaError_enum`.
    pub name: Str,
    /// Its integer representation as compiled by the C compiler (`u32` or `i32`).
    pub repr: String,
    /// Declared only as `typedef enum { … } NAME` (no `enum NAME` tag in C).
    #[serde(default, skip_serializing_if = "is_false")]
    pub typedef_only: bool,
    /// What it is for, in our words (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Every enumerator.
    pub values: Vec<EnumValue>,
    /// The first pinned release whose header has it, when not the oldest
    /// pinned release (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The first pinned release whose header no longer has it (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
}

/// One enumerator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnumValue {
    /// Name, e.g. `CUDA_SUCCESS`.
    pub name: Str,
    /// Value.
    pub value: i64,
    /// Each older pinned release whose header gives it another value (fact).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<ReleaseValue>,
    /// The first pinned release whose header has it, when not the oldest
    /// pinned release (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The first pinned release whose header no longer has it (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
}

/// Whether a record is a struct or a union.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// `struct`.
    Struct,
    /// `union`.
    Union,
}

/// A C struct or union.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Tag name, or for an anonymous record a name we give it.
    pub name: Str,
    /// Struct or union.
    pub kind: RecordKind,
    /// How C spells this type when not `struct NAME` / `union NAME`: the typedef
    /// name of an untagged record, or the real tag of a record declared inside
    /// another (bindgen prefixes those with the parent's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c_name: Option<String>,
    /// For an anonymous record: how C reaches it, as `Parent.field.path`;
    /// a path ending in `*` is an unnamed member whose fields live in the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c_path: Option<String>,
    /// An alignment the header forces (`alignas`), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub align: Option<u32>,
    /// Each older pinned release whose header forces another alignment
    /// (`value`: bytes, 0 for none) (fact).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_align: Vec<ReleaseValue>,
    /// What it is for, in our words (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Fields in declaration order.
    pub fields: Vec<Field>,
    /// Fields an older pinned release's layout of this record had and
    /// `fields` (the newest layout) does not: a field a later header removed,
    /// or one it gave another C type (same name in `fields`, other `type`).
    /// One entry per run of releases with that name and type, in the order
    /// the runs ended (the release order of `removed`), then in the order
    /// they began (a header's declaration order) (fact).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_fields: Vec<EarlierField>,
    /// The first pinned release whose header has it, when not the oldest
    /// pinned release (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The first pinned release whose header no longer has it (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
}

/// A field of an older layout of a record that its newest layout lacks:
/// removed, or retyped when the record's `fields` has the same name (fact).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EarlierField {
    /// Field name (for an unnamed member, `anonN`).
    pub name: String,
    /// Its C type in those releases, arrays as `T[N]`.
    #[serde(rename = "type")]
    pub ty: Str,
    /// The first pinned release whose header has this field with this type,
    /// when newer than the record itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The first pinned release whose header has the record without this
    /// field, or with another type for it.
    pub removed: String,
    /// Where the newest layout declares a field of this name and type inside
    /// an unnamed member instead (`anon1` of `CUmemLocation_st` holds `id`
    /// since CUDA 13.5): that member's name. C code still reaches the field
    /// by its own name; in Rust it is behind the member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
}

impl Record {
    /// Whether the header of pinned `release` (one of `releases`, oldest
    /// first) declared this record with a layout other than its newest: a
    /// field of `fields` newer than `release`, or an `earlier_fields` entry
    /// that `release` has.
    pub fn layout_differs_in(&self, release: &str, releases: &[&str]) -> bool {
        let pos = |r: &str| releases.iter().position(|x| *x == r);
        let Some(at) = pos(release) else {
            return false;
        };
        let newer = |s: &Option<String>| s.as_deref().and_then(pos).is_some_and(|s| s > at);
        self.fields.iter().any(|f| newer(&f.since))
            || self
                .earlier_fields
                .iter()
                .any(|e| !newer(&e.since) && pos(&e.removed).is_some_and(|removed| removed > at))
    }
}

/// A record field.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// Field name (for an unnamed member, `anonN`).
    pub name: String,
    /// C type, arrays as `T[N]`.
    #[serde(rename = "type")]
    pub ty: Str,
    /// The first pinned release whose header has this field in this
    /// record with this type, when newer than the record (fact); the type
    /// older headers gave it is in the record's `earlier_fields`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// A function-pointer typedef.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Callback {
    /// Typedef name, e.g. `CUhostFn`.
    pub name: Str,
    /// Return C type (`void` for none).
    pub returns: Str,
    /// Parameters.
    pub params: Vec<CallbackParam>,
    /// The first pinned release whose header has it, when not the oldest
    /// pinned release (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The first pinned release whose header no longer has it (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
}

/// A callback parameter.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallbackParam {
    /// Name (may be empty in the header).
    pub name: String,
    /// C type.
    #[serde(rename = "type")]
    pub ty: Str,
}

/// A `#define` integer constant.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constant {
    /// Name.
    pub name: Str,
    /// C type of the value as bindgen infers it (`unsigned int`, …).
    #[serde(rename = "type")]
    pub ty: String,
    /// Value.
    pub value: i64,
    /// Each older pinned release whose header gives it another value (fact).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<ReleaseValue>,
    /// The first pinned release whose header has it, when not the oldest
    /// pinned release (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The first pinned release whose header no longer has it (fact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
}

/// `specs/errors.yaml`: our catalogue of every `CUresult`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorCatalogue {
    /// One entry per `CUresult` value.
    pub errors: Vec<ErrorEntry>,
}

/// One `CUresult` in the catalogue.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorEntry {
    /// The enumerator name, e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`.
    pub name: Str,
    /// One line in our own words.
    pub summary: String,
    /// The context cannot be used after this error; the process must be restarted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sticky: bool,
}

/// Every spec file, loaded.
#[derive(Debug, Clone, Default)]
pub struct Specs {
    /// `specs/functions/*.yaml`, keyed by file name, in name order.
    pub groups: Vec<(String, GroupFile)>,
    /// `specs/types/*.yaml`, keyed by file name, in name order.
    pub types: Vec<(String, TypesFile)>,
    /// `specs/errors.yaml`.
    pub errors: ErrorCatalogue,
    /// `specs/warp/abi.yaml`: NVIDIA Warp's kernel ABI (absent in specs
    /// sets that describe only the driver API).
    pub warp: Option<super::warp::WarpAbi>,
}

impl Specs {
    /// Every function with the file it is in.
    pub fn functions(&self) -> impl Iterator<Item = (&str, &GroupFile, &Function)> {
        self.groups
            .iter()
            .flat_map(|(file, g)| g.functions.iter().map(move |f| (file.as_str(), g, f)))
    }
    /// Every enum.
    pub fn enums(&self) -> impl Iterator<Item = &Enum> {
        self.types.iter().flat_map(|(_, t)| t.enums.iter())
    }
    /// Every record.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.types.iter().flat_map(|(_, t)| t.records.iter())
    }
    /// Every handle.
    pub fn handles(&self) -> impl Iterator<Item = &Handle> {
        self.types.iter().flat_map(|(_, t)| t.handles.iter())
    }
    /// Every typedef.
    pub fn typedefs(&self) -> impl Iterator<Item = &Typedef> {
        self.types.iter().flat_map(|(_, t)| t.typedefs.iter())
    }
    /// Every callback.
    pub fn callbacks(&self) -> impl Iterator<Item = &Callback> {
        self.types.iter().flat_map(|(_, t)| t.callbacks.iter())
    }
    /// Every constant.
    pub fn constants(&self) -> impl Iterator<Item = &Constant> {
        self.types.iter().flat_map(|(_, t)| t.constants.iter())
    }
}
