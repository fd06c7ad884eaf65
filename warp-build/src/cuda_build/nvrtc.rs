//! One NVRTC library opened by path and called through its own entry
//! points, not the process's NVRTC (`cuda_sys::nvrtc::library`): a build
//! script compiles cubins with NVRTC 13 and the PTX fallback with NVRTC
//! 12.0, and may also run `WarpModule`, whose fallback makes NVRTC 12.0 the
//! process's library. Two NVRTC releases open side by side do not meet:
//! each is opened locally (`RTLD_LOCAL`) under its own soname, with the
//! builtins library of its own version.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::Path;

use cuda_sys::nvrtc::{NvrtcLoadError, nvrtcProgram, nvrtcResult};

type Create = unsafe extern "C" fn(
    *mut nvrtcProgram,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> nvrtcResult;
type Destroy = unsafe extern "C" fn(*mut nvrtcProgram) -> nvrtcResult;
type AddName = unsafe extern "C" fn(nvrtcProgram, *const c_char) -> nvrtcResult;
type CompileFn = unsafe extern "C" fn(nvrtcProgram, c_int, *const *const c_char) -> nvrtcResult;
type Size = unsafe extern "C" fn(nvrtcProgram, *mut usize) -> nvrtcResult;
type Bytes = unsafe extern "C" fn(nvrtcProgram, *mut c_char) -> nvrtcResult;
type Lowered = unsafe extern "C" fn(nvrtcProgram, *const c_char, *mut *const c_char) -> nvrtcResult;

/// The entry points a build compile calls, resolved in one library.
pub(crate) struct Library {
    lib: cuda_sys::nvrtc::Nvrtc,
    create: Create,
    destroy: Destroy,
    add_name: AddName,
    compile: CompileFn,
    log_size: Size,
    log: Bytes,
    ptx_size: Size,
    ptx: Bytes,
    cubin_size: Size,
    cubin: Bytes,
    lowered: Lowered,
}

/// What one compile gave: the image (PTX text or a cubin), NVRTC's log and
/// the lowered name of each name expression, in the order given.
#[derive(Debug)]
pub(crate) struct Output {
    pub image: Vec<u8>,
    pub log: String,
    pub lowered: Vec<String>,
}

/// A failed compile: NVRTC's result and log.
#[derive(Debug)]
pub(crate) struct Failure {
    pub result: String,
    pub log: String,
}

impl Library {
    /// Opens the NVRTC at `path` (a directory holding `libnvrtc.so.<N>`,
    /// or the library itself) and resolves its entry points.
    pub(crate) fn open(path: &Path) -> Result<Library, String> {
        let candidates: Vec<String> = if path.is_dir() {
            cuda_sys::nvrtc::LIBRARY_NAMES
                .iter()
                .map(|n| path.join(n).to_string_lossy().into_owned())
                .collect()
        } else {
            vec![path.to_string_lossy().into_owned()]
        };
        let lib = cuda_sys::nvrtc::open_from(&candidates).map_err(|e| e.to_string())?;
        let get = |name: &str| -> Result<*mut c_void, String> {
            let symbol = cuda_sys::nvrtc::symbol(name)
                .ok_or_else(|| NvrtcLoadError::UnknownFunction(name.to_string()).to_string())?;
            symbol.resolve_in(&lib).map_err(|e| e.to_string())
        };
        // SAFETY: each address was resolved for the function of that name,
        // whose signature the type it becomes copies from nvrtc.h (as
        // cuda-sys's generated declarations do).
        unsafe {
            Ok(Library {
                create: std::mem::transmute::<*mut c_void, Create>(get("nvrtcCreateProgram")?),
                destroy: std::mem::transmute::<*mut c_void, Destroy>(get("nvrtcDestroyProgram")?),
                add_name: std::mem::transmute::<*mut c_void, AddName>(get(
                    "nvrtcAddNameExpression",
                )?),
                compile: std::mem::transmute::<*mut c_void, CompileFn>(get("nvrtcCompileProgram")?),
                log_size: std::mem::transmute::<*mut c_void, Size>(get("nvrtcGetProgramLogSize")?),
                log: std::mem::transmute::<*mut c_void, Bytes>(get("nvrtcGetProgramLog")?),
                ptx_size: std::mem::transmute::<*mut c_void, Size>(get("nvrtcGetPTXSize")?),
                ptx: std::mem::transmute::<*mut c_void, Bytes>(get("nvrtcGetPTX")?),
                cubin_size: std::mem::transmute::<*mut c_void, Size>(get("nvrtcGetCUBINSize")?),
                cubin: std::mem::transmute::<*mut c_void, Bytes>(get("nvrtcGetCUBIN")?),
                lowered: std::mem::transmute::<*mut c_void, Lowered>(get("nvrtcGetLoweredName")?),
                lib,
            })
        }
    }

    /// The library's version, `major * 1000 + minor * 10`.
    pub(crate) fn version(&self) -> u32 {
        self.lib.version
    }

    /// Compiles `source` (named `name` in diagnostics) with `options`,
    /// asking for the lowered name of each of `names`; a cubin when `cubin`,
    /// else PTX.
    pub(crate) fn compile(
        &self,
        name: &str,
        source: &str,
        options: &[String],
        names: &[String],
        cubin: bool,
    ) -> Result<Output, Failure> {
        let c = |s: &str, what: &str| {
            CString::new(s).map_err(|_| Failure {
                result: "a NUL byte".into(),
                log: format!("the {what} `{}` holds a NUL byte", s.escape_debug()),
            })
        };
        let source_c = c(source, "source")?;
        let name_c = c(name, "file name")?;
        let options_c = options
            .iter()
            .map(|o| c(o, "option"))
            .collect::<Result<Vec<_>, _>>()?;
        let names_c = names
            .iter()
            .map(|n| c(n, "name expression"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut prog: nvrtcProgram = std::ptr::null_mut();
        let check = |r: nvrtcResult, call: &str| -> Result<(), Failure> {
            if r == nvrtcResult::NVRTC_SUCCESS {
                Ok(())
            } else {
                Err(Failure {
                    result: format!("{call}: {r}"),
                    log: String::new(),
                })
            }
        };
        check(
            // SAFETY: a valid out-pointer and NUL-terminated strings; no headers.
            unsafe {
                (self.create)(
                    &mut prog,
                    source_c.as_ptr(),
                    name_c.as_ptr(),
                    0,
                    std::ptr::null(),
                    std::ptr::null(),
                )
            },
            "nvrtcCreateProgram",
        )?;
        let program = Program { lib: self, prog };
        program.run(&options_c, &names_c, cubin)
    }
}

/// A created program, destroyed on drop.
struct Program<'a> {
    lib: &'a Library,
    prog: nvrtcProgram,
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: the program this value created and nothing else destroys.
        unsafe { (self.lib.destroy)(&mut self.prog) };
    }
}

impl Program<'_> {
    fn run(&self, options: &[CString], names: &[CString], cubin: bool) -> Result<Output, Failure> {
        let fail = |r: nvrtcResult, call: &str, log: String| Failure {
            result: format!("{call}: {r}"),
            log,
        };
        for n in names {
            // SAFETY: a live program and a NUL-terminated string.
            let r = unsafe { (self.lib.add_name)(self.prog, n.as_ptr()) };
            if r != nvrtcResult::NVRTC_SUCCESS {
                return Err(fail(r, "nvrtcAddNameExpression", String::new()));
            }
        }
        let ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let count = c_int::try_from(ptrs.len()).unwrap_or(c_int::MAX);
        // SAFETY: a live program and `count` valid option pointers.
        let r = unsafe { (self.lib.compile)(self.prog, count, ptrs.as_ptr()) };
        let log = self.bytes(self.lib.log_size, self.lib.log);
        let log = String::from_utf8_lossy(log.as_deref().unwrap_or_default())
            .trim_end_matches('\0')
            .to_string();
        if r != nvrtcResult::NVRTC_SUCCESS {
            return Err(fail(r, "nvrtcCompileProgram", log));
        }
        let image = if cubin {
            self.bytes(self.lib.cubin_size, self.lib.cubin)
        } else {
            self.bytes(self.lib.ptx_size, self.lib.ptx).map(|mut p| {
                // The PTX text ends with a NUL that is no part of it.
                while p.last() == Some(&0) {
                    p.pop();
                }
                p
            })
        }
        .map_err(|r| fail(r, "reading the image", log.clone()))?;
        let mut lowered = Vec::new();
        for n in names {
            let mut out: *const c_char = std::ptr::null();
            // SAFETY: a compiled program, a name expression it was given
            // and a valid out-pointer; the string NVRTC returns lives as
            // long as the program and is copied at once.
            let r = unsafe { (self.lib.lowered)(self.prog, n.as_ptr(), &mut out) };
            if r != nvrtcResult::NVRTC_SUCCESS || out.is_null() {
                return Err(fail(r, "nvrtcGetLoweredName", log));
            }
            // SAFETY: NVRTC returned a NUL-terminated string.
            lowered.push(
                unsafe { CStr::from_ptr(out) }
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        Ok(Output {
            image,
            log,
            lowered,
        })
    }

    fn bytes(&self, size: Size, get: Bytes) -> Result<Vec<u8>, nvrtcResult> {
        let mut n = 0usize;
        // SAFETY: a live program and a valid out-pointer.
        let r = unsafe { size(self.prog, &mut n) };
        if r != nvrtcResult::NVRTC_SUCCESS {
            return Err(r);
        }
        let mut buf = vec![0u8; n];
        // SAFETY: `buf` holds the `n` bytes NVRTC said it writes.
        let r = unsafe { get(self.prog, buf.as_mut_ptr().cast()) };
        if r != nvrtcResult::NVRTC_SUCCESS {
            return Err(r);
        }
        Ok(buf)
    }
}
