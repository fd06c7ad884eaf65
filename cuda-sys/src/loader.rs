//! Run-time loading of the driver library and its entry points.
//!
//! The library is opened once, on the first call of any driver function. Each
//! entry point is resolved on its own first call: through `cuGetProcAddress_v2`
//! (at the ABI version recorded in the specs) where the driver has it,
//! otherwise by its exported symbol name. Failures are values, never panics.

use std::ffi::{CStr, c_void};
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// Why the driver or one of its functions is unavailable.
#[derive(Clone, PartialEq, Eq)]
pub enum LoaderError {
    /// No driver library could be opened.
    LibraryNotFound {
        /// Each path tried with the loader's message for it.
        tried: Vec<(String, String)>,
    },
    /// The library is loaded but lacks a function at the needed version.
    SymbolNotFound {
        /// The C API name, e.g. `cuMemAlloc`.
        function: String,
        /// The ABI symbol, e.g. `cuMemAlloc_v2`.
        symbol: String,
        /// The CUDA version of the ABI we need, e.g. 3020.
        needs_version: u32,
        /// The installed driver's CUDA version from `cuDriverGetVersion`, if known.
        driver_version: Option<i32>,
    },
    /// No function of that name is in the generated table.
    UnknownFunction(String),
}

fn version(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

impl fmt::Display for LoaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoaderError::LibraryNotFound { tried } => {
                write!(f, "the CUDA driver library could not be loaded (tried ")?;
                for (i, (path, why)) in tried.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{path}: {why}")?;
                }
                write!(
                    f,
                    "); install the NVIDIA driver, or set {LIBRARY_ENV} to the path of libcuda"
                )
            }
            LoaderError::SymbolNotFound {
                function,
                symbol,
                needs_version,
                driver_version,
            } => {
                write!(
                    f,
                    "the CUDA driver has no `{function}` (symbol `{symbol}`, ABI of CUDA {})",
                    version(*needs_version)
                )?;
                match driver_version {
                    Some(d) => write!(
                        f,
                        "; the installed driver supports CUDA {}; update the driver to one supporting CUDA {} or later",
                        version(*d as u32),
                        version(*needs_version)
                    ),
                    None => write!(f, "; update the NVIDIA driver"),
                }
            }
            LoaderError::UnknownFunction(name) => {
                write!(f, "`{name}` is not a driver function known to cuda-sys")
            }
        }
    }
}

/// The same message as `Display`, so that `fn main() -> Result<(), E>`, `unwrap`, `anyhow` and
/// `eyre` print the readable message (the fields stay public for matching).
impl fmt::Debug for LoaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for LoaderError {}

/// Environment variable naming the driver library to load instead of the default.
pub const LIBRARY_ENV: &str = "CUDA_SYS_DRIVER_LIBRARY";

/// The library names tried, in order, when [`LIBRARY_ENV`] is unset.
#[cfg(windows)]
pub const LIBRARY_NAMES: &[&str] = &["nvcuda.dll"];
/// The library names tried, in order, when [`LIBRARY_ENV`] is unset.
#[cfg(not(windows))]
pub const LIBRARY_NAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];

type GetProcAddress =
    unsafe extern "C" fn(*const std::ffi::c_char, *mut *mut c_void, i32, u64, *mut i32) -> i32;
type DriverGetVersion = unsafe extern "C" fn(*mut i32) -> i32;

/// The opened driver library.
pub struct Driver {
    lib: libloading::Library,
    get_proc_address: Option<GetProcAddress>,
    /// `cuDriverGetVersion`, if the driver answers it.
    pub version: Option<i32>,
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("version", &self.version)
            .field("has_get_proc_address", &self.get_proc_address.is_some())
            .finish()
    }
}

static DRIVER: OnceLock<Result<Driver, LoaderError>> = OnceLock::new();

/// Opens the driver library on first use and returns it, or why it could not be opened.
pub fn driver() -> Result<&'static Driver, LoaderError> {
    DRIVER.get_or_init(open).as_ref().map_err(Clone::clone)
}

fn open() -> Result<Driver, LoaderError> {
    let names: Vec<String> = match std::env::var(LIBRARY_ENV) {
        Ok(p) if !p.is_empty() => vec![p],
        _ => LIBRARY_NAMES.iter().map(|s| s.to_string()).collect(),
    };
    let mut tried = Vec::new();
    for name in names {
        // SAFETY: loading the NVIDIA driver runs its initialisers, which have no
        // preconditions on the caller.
        match unsafe { libloading::Library::new(&name) } {
            Ok(lib) => {
                // SAFETY: the symbols' types are those of cuda.h (CUDA 12.0+ for cuGetProcAddress_v2).
                let get_proc_address =
                    unsafe { lib.get::<GetProcAddress>(b"cuGetProcAddress_v2\0") }
                        .ok()
                        .map(|s| *s);
                // SAFETY: as above: `cuDriverGetVersion(int *)` as in cuda.h.
                let get_version = unsafe { lib.get::<DriverGetVersion>(b"cuDriverGetVersion\0") }
                    .ok()
                    .map(|s| *s);
                let version = get_version.and_then(|f| {
                    let mut v = 0;
                    // SAFETY: `v` is a valid out-pointer.
                    (unsafe { f(&mut v) } == 0).then_some(v)
                });
                return Ok(Driver {
                    lib,
                    get_proc_address,
                    version,
                });
            }
            Err(e) => {
                let detail = std::error::Error::source(&e)
                    .map(|s| format!("{e}: {s}"))
                    .unwrap_or_else(|| e.to_string());
                tried.push((name, detail));
            }
        }
    }
    Err(LoaderError::LibraryNotFound { tried })
}

/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM` / `..._PER_THREAD_DEFAULT_STREAM`.
const PROC_FLAGS: u64 = if cfg!(feature = "per-thread-default-stream") {
    2
} else {
    1
};

/// One driver entry point: where it comes from and, once resolved, its address.
pub struct Symbol {
    name: &'static str,
    proc_name: &'static CStr,
    symbol: &'static CStr,
    version: u32,
    per_thread_symbol: Option<&'static CStr>,
    per_thread_version: u32,
    since: u32,
    removed: u32,
    older: &'static [(&'static CStr, u32)],
    resolved_version: AtomicU32,
    ptr: AtomicPtr<c_void>,
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Symbol")
            .field("name", &self.name)
            .field("symbol", &self.symbol)
            .field("version", &self.version)
            .finish()
    }
}

impl Symbol {
    /// A table entry (used by the generated code).
    pub const fn new(
        name: &'static str,
        proc_name: &'static CStr,
        symbol: &'static CStr,
        version: u32,
        per_thread_symbol: Option<&'static CStr>,
        per_thread_version: u32,
    ) -> Symbol {
        Symbol {
            name,
            proc_name,
            symbol,
            version,
            per_thread_symbol,
            per_thread_version,
            since: 0,
            removed: 0,
            older: &[],
            resolved_version: AtomicU32::new(0),
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The same entry with the releases that declare it (used by the
    /// generated code): `since`, the first CUDA version with it (12040 for
    /// 12.4; 0 when unknown), and `removed`, the first pinned release whose
    /// `cuda.h` no longer declares it (0 when the newest still does).
    pub const fn dated(mut self, since: u32, removed: u32) -> Symbol {
        self.since = since;
        self.removed = removed;
        self
    }

    /// The same entry with the earlier ABIs a driver older than `version`
    /// is asked for instead (used by the generated code): `(symbol,
    /// cuGetProcAddress version)`, newest first, only those with the same C
    /// parameter list as the current ABI.
    pub const fn older_abis(mut self, older: &'static [(&'static CStr, u32)]) -> Symbol {
        self.older = older;
        self
    }

    /// The earlier ABIs with the same parameter list, newest first (see
    /// [`Symbol::older_abis`]).
    pub fn older(&self) -> &'static [(&'static CStr, u32)] {
        self.older
    }

    /// The `cuGetProcAddress` version of the ABI this entry was resolved at
    /// (the current one, or an older one on an older driver); `None` before
    /// it is resolved.
    pub fn resolved_version(&self) -> Option<u32> {
        match self.resolved_version.load(Ordering::Acquire) {
            0 => None,
            v => Some(v),
        }
    }

    /// The first CUDA version with this function, e.g. 12040; `None` when unknown.
    pub fn since(&self) -> Option<u32> {
        (self.since != 0).then_some(self.since)
    }

    /// The first pinned CUDA release whose `cuda.h` no longer declares this
    /// function (its declaration is then the last header's that had it);
    /// `None` while the newest pinned header declares it.
    pub fn removed(&self) -> Option<u32> {
        (self.removed != 0).then_some(self.removed)
    }

    /// The ABI (symbol, `cuGetProcAddress` version) to ask a driver of CUDA
    /// version `driver_version` (`cuDriverGetVersion`; `None`: unknown) for:
    /// the current one when the driver's CUDA version reaches it, else the
    /// newest earlier ABI with the same parameter list that it reaches;
    /// `None` when there is none (the call returns `NotSupported`).
    pub fn abi_for(&self, driver_version: Option<i32>) -> Option<(&'static CStr, u32)> {
        let (symbol, version) = self.target();
        let Some(d) = driver_version else {
            return Some((symbol, version));
        };
        if d >= version as i32 {
            return Some((symbol, version));
        }
        // The per-thread variants of older ABIs are not recorded.
        if cfg!(feature = "per-thread-default-stream") && self.per_thread_symbol.is_some() {
            return None;
        }
        self.older.iter().copied().find(|(_, v)| d >= *v as i32)
    }

    /// The C API name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The ABI symbol this build resolves, and the CUDA version of that ABI.
    pub fn target(&self) -> (&'static CStr, u32) {
        match (
            cfg!(feature = "per-thread-default-stream"),
            self.per_thread_symbol,
        ) {
            (true, Some(s)) => (s, self.per_thread_version),
            _ => (self.symbol, self.version),
        }
    }

    /// The entry point's address, resolving it on first use; `None` when unavailable.
    #[inline]
    pub fn get(&self) -> Option<*mut c_void> {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return Some(p);
        }
        self.resolve_first()
    }

    /// The first-use half of [`Symbol::get`], kept out of line so that the
    /// resolved case (every call but the first) inlines into each driver
    /// function: it showed as its own symbol in launch profiles before.
    #[cold]
    #[inline(never)]
    fn resolve_first(&self) -> Option<*mut c_void> {
        self.resolve().ok()
    }

    /// Resolves the entry point, or says why it is unavailable.
    pub fn resolve(&self) -> Result<*mut c_void, LoaderError> {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return Ok(p);
        }
        let d = driver()?;
        // A driver older than the ABI this build calls is not asked for it:
        // it may hand out an older ABI of the same name, whose parameters
        // differ from this declaration's. An older ABI with the same
        // parameter list is asked for instead, where the specs record one.
        let Some((symbol, version)) = self.abi_for(d.version) else {
            let (symbol, version) = self.target();
            return Err(LoaderError::SymbolNotFound {
                function: self.name.to_string(),
                symbol: symbol.to_string_lossy().into_owned(),
                needs_version: version,
                driver_version: d.version,
            });
        };
        let mut found: *mut c_void = std::ptr::null_mut();
        if let Some(gpa) = d.get_proc_address {
            let mut status = 0i32;
            // SAFETY: valid C string and out-pointers; the signature is cuda.h's.
            let r = unsafe {
                gpa(
                    self.proc_name.as_ptr(),
                    &mut found,
                    version as i32,
                    PROC_FLAGS,
                    &mut status,
                )
            };
            if r != 0 || status != 0 {
                found = std::ptr::null_mut();
            }
        }
        if found.is_null() {
            // SAFETY: only the address is taken; it is called with cuda.h's signature.
            if let Ok(s) = unsafe { d.lib.get::<*mut c_void>(symbol.to_bytes_with_nul()) } {
                found = *s;
            }
        }
        if found.is_null() {
            return Err(LoaderError::SymbolNotFound {
                function: self.name.to_string(),
                symbol: symbol.to_string_lossy().into_owned(),
                needs_version: version,
                driver_version: d.version,
            });
        }
        self.resolved_version.store(version, Ordering::Release);
        self.ptr.store(found, Ordering::Release);
        Ok(found)
    }
}

/// Looks up a driver function by its C name (`"cuMemAlloc"`) and resolves it:
/// `Ok` with its address, or the reason it is unavailable (no library, the
/// paths tried; or no symbol, the version needed and the driver's).
pub fn resolve(function: &str) -> Result<*mut c_void, LoaderError> {
    symbol(function)
        .ok_or_else(|| LoaderError::UnknownFunction(function.to_string()))?
        .resolve()
}

/// The table entry of a driver function, by C name.
pub fn symbol(function: &str) -> Option<&'static Symbol> {
    let table = &crate::generated::functions::SYMBOLS;
    table
        .binary_search_by(|s| s.name.cmp(function))
        .ok()
        .map(|i| &table[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_complete() {
        let t = &crate::generated::functions::SYMBOLS;
        assert!(
            t.windows(2).all(|w| w[0].name < w[1].name),
            "SYMBOLS must be sorted for binary search"
        );
        assert_eq!(
            symbol("cuLaunchCooperativeKernel").map(|s| s.name()),
            Some("cuLaunchCooperativeKernel")
        );
        let (sym, ver) = symbol("cuMemAlloc")
            .expect("cuMemAlloc is specified")
            .target();
        if !cfg!(feature = "per-thread-default-stream") {
            assert_eq!((sym.to_str().unwrap(), ver), ("cuMemAlloc_v2", 3020));
        }
        // The gate: a function newer than the driver is never asked for; an
        // older ABI with the same parameters is, where there is one.
        let new = symbol("cuTensorMapSetAllocationClass").expect("a 13.5 function");
        assert_eq!(new.since(), Some(13050));
        assert_eq!(new.abi_for(Some(13000)), None);
        assert_eq!(
            new.abi_for(Some(13050)),
            Some((c"cuTensorMapSetAllocationClass", 13050))
        );
        if !cfg!(feature = "per-thread-default-stream") {
            let elapsed = symbol("cuEventElapsedTime").expect("specified");
            assert_eq!(
                elapsed.abi_for(Some(13000)),
                Some((c"cuEventElapsedTime_v2", 12080))
            );
            assert_eq!(
                elapsed.abi_for(Some(12040)),
                Some((c"cuEventElapsedTime", 2000))
            );
        }
        // cuCtxCreate_v4 (12050) has other parameters than 12.0's
        // cuCtxCreate_v2: a 12.4 driver gets NotSupported, not the old ABI.
        let create = symbol("cuCtxCreate").expect("specified");
        assert_eq!(create.abi_for(Some(12040)), None);
        assert_eq!(create.abi_for(None), Some((c"cuCtxCreate_v4", 12050)));
        let removed = symbol("cuCtxCreate_v3").expect("a 12.x-only name");
        assert_eq!(removed.removed(), Some(13000));
        assert!(matches!(
            resolve("cuNoSuchFunction"),
            Err(LoaderError::UnknownFunction(_))
        ));
    }

    #[test]
    fn messages_name_what_is_missing() {
        let e = LoaderError::SymbolNotFound {
            function: "cuCtxCreate".into(),
            symbol: "cuCtxCreate_v4".into(),
            needs_version: 12050,
            driver_version: Some(12040),
        };
        assert_eq!(
            e.to_string(),
            "the CUDA driver has no `cuCtxCreate` (symbol `cuCtxCreate_v4`, ABI of CUDA 12.5); the installed driver supports CUDA 12.4; update the driver to one supporting CUDA 12.5 or later"
        );
        let e = LoaderError::LibraryNotFound {
            tried: vec![("libcuda.so.1".into(), "not found".into())],
        };
        assert!(e.to_string().contains("libcuda.so.1: not found"));
    }

    /// `Debug` prints the message, as `Display` does: what
    /// `fn main() -> Result<(), LoaderError>` and `unwrap` show.
    #[test]
    fn debug_is_the_message() {
        let e = resolve("cuNoSuchFunction").unwrap_err();
        assert_eq!(format!("{e:?}"), format!("{e}"));
        assert!(format!("{e:?}").contains("`cuNoSuchFunction` is not a driver function"));
        assert!(!format!("{e:?}").contains("UnknownFunction("));
    }
}
