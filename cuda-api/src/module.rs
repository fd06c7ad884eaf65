//! Modules (PTX, cubin or fatbin loaded into a context) and libraries
//! (context-less images whose kernels are `CUkernel`s).

use std::ffi::{CString, c_void};
use std::path::Path;
use std::sync::Arc;

use cuda_sys::{CUlibrary, CUmodule, CUresult};

use crate::context::Context;
use crate::device::{driver_version, init};
use crate::driver;
use crate::error::{CudaError, CudaResult};
use crate::function::Function;
use crate::image::{self, CubinLayouts, ImageKind};
use crate::kernel::DynKernel;
use crate::kernel::{KernelSignature, TypedKernel};
use crate::params::Param;
use crate::params::ParamSlot;
use crate::target::{PtxIsa, max_ptx_isa};

/// The `.version X.Y` of a PTX text.
pub(crate) fn ptx_isa_version(ptx: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(&ptx[..ptx.len().min(4096)]).ok()?;
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(".version").map(|v| v.trim().to_string()))
}

fn is_binary(image: &[u8]) -> bool {
    image.starts_with(b"\x7fELF") || image.starts_with(&[0x50, 0xed, 0x55, 0xba])
}

/// An image ready for the driver: checked by [`check_image`](crate::check_image), PTX
/// NUL-terminated, and 8-byte aligned (the driver reads its headers as
/// 8-byte words).
enum Prepared<'a> {
    /// The caller's bytes, already aligned and terminated.
    Borrowed(&'a [u8]),
    /// A copy in 8-byte words; the zero padding ends PTX text with a NUL.
    Aligned(Vec<u64>),
}

impl Prepared<'_> {
    fn as_ptr(&self) -> *const c_void {
        match self {
            Prepared::Borrowed(b) => b.as_ptr().cast(),
            Prepared::Aligned(w) => w.as_ptr().cast(),
        }
    }

    #[cfg(test)]
    fn bytes(&self) -> Vec<u8> {
        match self {
            Prepared::Borrowed(b) => b.to_vec(),
            Prepared::Aligned(w) => w.iter().flat_map(|x| x.to_ne_bytes()).collect(),
        }
    }
}

/// Checks `image` (the error names `call`) and prepares it for the driver.
fn prepare<'a>(image: &'a [u8], call: &'static str) -> CudaResult<Prepared<'a>> {
    let kind = image::check_image(image).map_err(|e| CudaError::InvalidImage(e.in_call(call)))?;
    let needs_nul = kind == ImageKind::Ptx && image.last() != Some(&0);
    if !needs_nul && (image.as_ptr() as usize).is_multiple_of(8) {
        return Ok(Prepared::Borrowed(image));
    }
    Ok(Prepared::Aligned(words(image, needs_nul)))
}

/// `image` copied into 8-byte words, with a NUL after it when `nul`.
fn words(image: &[u8], nul: bool) -> Vec<u64> {
    let len = image.len() + usize::from(nul);
    let mut words = vec![0u64; len.div_ceil(8)];
    for (w, chunk) in words.iter_mut().zip(image.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u64::from_ne_bytes(b);
    }
    words
}

/// Checks `image` (the error names `call`) and returns its kind, an owned
/// 8-byte-aligned copy (PTX NUL-terminated) and the byte length to pass to
/// the driver (PTX's NUL included).
pub(crate) fn prepare_owned(
    image: &[u8],
    call: &'static str,
) -> CudaResult<(ImageKind, Vec<u64>, usize)> {
    let kind = image::check_image(image).map_err(|e| CudaError::InvalidImage(e.in_call(call)))?;
    let nul = kind == ImageKind::Ptx && image.last() != Some(&0);
    Ok((kind, words(image, nul), image.len() + usize::from(nul)))
}

/// Refuses PTX whose `.version` is newer than the JIT of a driver of CUDA
/// version `driver_version` takes, before the driver reads it, where the
/// table knows the driver's release (else the driver decides, and
/// [`load_error`] names its refusal the same way). A shipped PTX newer
/// than the oldest driver the specs cover (ISA 8.0, CUDA 12.0) fails here
/// on an older driver with what it needs, instead of with the JIT's code.
/// `driver_version` is asked for PTX only.
fn check_ptx_isa(image: &[u8], driver_version: impl FnOnce() -> CudaResult<i32>) -> CudaResult<()> {
    if is_binary(image) {
        return Ok(());
    }
    let driver_version = driver_version()?;
    let Some(max) = max_ptx_isa(driver_version) else {
        return Ok(());
    };
    let isa = ptx_isa_version(image);
    match (isa.as_deref().and_then(PtxIsa::parse), PtxIsa::parse(max)) {
        (Some(have), Some(takes)) if have > takes => Err(CudaError::PtxTooNew {
            ptx_isa: isa.unwrap_or_default(),
            driver_max_isa: Some(max.to_string()),
            driver_version: Some(driver_version),
        }),
        _ => Ok(()),
    }
}

/// Turns a load failure into [`CudaError::PtxTooNew`] when the PTX is too new.
fn load_error(e: CudaError, image: &[u8]) -> CudaError {
    match e.driver().map(|d| d.code) {
        Some(CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION) if !is_binary(image) => {
            let dv = driver_version().ok();
            CudaError::PtxTooNew {
                ptx_isa: ptx_isa_version(image).unwrap_or_else(|| "unknown".into()),
                driver_max_isa: dv.and_then(max_ptx_isa).map(str::to_string),
                driver_version: dv,
            }
        }
        _ => e,
    }
}

pub(crate) struct ModuleInner {
    pub(crate) raw: CUmodule,
    pub(crate) ctx: Context,
    /// The parameter layouts a cubin image declares (none for PTX or a fatbin).
    layouts: CubinLayouts,
}

// SAFETY: modules may be used from any thread.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        let r = self.ctx.bind().and_then(|_| {
            // SAFETY: we own the module and unload it once; kernels hold an Arc to it.
            unsafe { driver::module_unload(self.raw) }
        });
        if let Err(e) = r {
            self.ctx.report_release_error("module", &e);
        }
    }
}

/// Code loaded into a context: PTX, cubin or fatbin.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

impl Module {
    /// Loads an image: cubin or fatbin bytes, or PTX text.
    ///
    /// The image is checked first ([`check_image`](crate::check_image)): every offset and size
    /// the driver would follow must lie inside the slice.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidImage`] for a truncated, corrupted or unknown image
    /// (before the driver sees it); a driver error when the driver refuses
    /// it; [`CudaError::PtxTooNew`] for PTX newer than the driver.
    pub fn from_image(ctx: &Context, image: &[u8]) -> CudaResult<Module> {
        let data = prepare(image, "Module::from_image")?;
        ctx.bind()?;
        check_ptx_isa(image, driver_version)?;
        // SAFETY: `data` is a checked image (every offset and size it holds
        // lies inside it; PTX NUL-terminated) that outlives the call.
        let raw =
            unsafe { driver::module_load_data(data.as_ptr()) }.map_err(|e| load_error(e, image))?;
        Ok(Module {
            inner: Arc::new(ModuleInner {
                raw,
                ctx: ctx.clone(),
                layouts: image::cubin_layouts(image),
            }),
        })
    }

    /// Loads PTX text.
    ///
    /// # Errors
    ///
    /// As for [`Module::from_image`].
    pub fn from_ptx(ctx: &Context, ptx: &str) -> CudaResult<Module> {
        Self::from_image(ctx, ptx.as_bytes())
    }

    /// Loads an image from a file (`.ptx`, `.cubin`, `.fatbin`).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] naming the path when the file cannot be
    /// read, or as for [`Module::from_image`].
    pub fn from_file(ctx: &Context, path: impl AsRef<Path>) -> CudaResult<Module> {
        let bytes = read_image(path.as_ref(), "Module::from_file")?;
        Self::from_image(ctx, &bytes)
    }

    /// The context it is loaded in.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// The raw handle.
    pub fn raw(&self) -> CUmodule {
        self.inner.raw
    }

    /// An untyped handle to kernel `name` (for attributes, occupancy and parameter info).
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] for a name with a NUL byte, or the
    /// driver's failure of `cuModuleGetFunction` naming the kernel
    /// (`CUDA_ERROR_NOT_FOUND` when the module has no kernel of that name:
    /// check the spelling, and `extern "C"` for C++ kernels).
    pub fn function(&self, name: &str) -> CudaResult<Function> {
        let cname = c_name(name, "Module::function")?;
        self.inner.ctx.bind()?;
        // SAFETY: live module, NUL-terminated name.
        let raw = unsafe { driver::module_get_function(self.inner.raw, &cname) }
            .map_err(|e| e.with_context(|| format!("kernel '{name}'")))?;
        let layout = declared(&self.inner.layouts, name);
        Ok(Function::from_module(
            raw,
            name,
            &self.inner.ctx,
            self.inner.clone(),
            layout,
        ))
    }

    /// Declares kernel `name` with the Rust parameter types `S` (a tuple), and
    /// checks them against the parameter sizes the driver reports.
    ///
    /// # Errors
    ///
    /// As for [`Module::function`] and [`TypedKernel::declare`].
    ///
    /// # Safety
    ///
    /// This is the one promise cuda-api cannot check: each type in `S` must be
    /// what the kernel's parameter at that position really is (a `DevicePtr<f32>`
    /// for a `float*`, a `u32` for an `unsigned int`). Count and sizes are checked.
    pub unsafe fn kernel<S: KernelSignature>(&self, name: &str) -> CudaResult<TypedKernel<S>> {
        // SAFETY: the caller's promise is passed on.
        unsafe { TypedKernel::declare(self.function(name)?) }
    }

    /// Declares kernel `name` with parameters known at run time (names and
    /// types), checked against the driver's layout; launches take an
    /// [`ArgBlock`](crate::ArgBlock).
    ///
    /// # Errors
    ///
    /// As for [`Module::function`] and [`DynKernel::declare`].
    ///
    /// # Safety
    ///
    /// As for [`DynKernel::declare`].
    pub unsafe fn dyn_kernel(&self, name: &str, params: Vec<Param>) -> CudaResult<DynKernel> {
        // SAFETY: the caller's promise is passed on.
        unsafe { DynKernel::declare(self.function(name)?, params) }
    }
}

/// The parameter layout the cubin declares for kernel `name`, if any.
fn declared(layouts: &CubinLayouts, name: &str) -> Option<Arc<[ParamSlot]>> {
    let slots = layouts.get(name)?;
    Some(
        slots
            .iter()
            .map(|s| ParamSlot {
                offset: s.offset,
                size: s.size,
            })
            .collect(),
    )
}

fn read_image(path: &Path, call: &'static str) -> CudaResult<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        CudaError::invalid_argument(call, "path", format!("cannot read {}: {e}", path.display()))
    })
}

fn c_name(name: &str, call: &'static str) -> CudaResult<CString> {
    CString::new(name).map_err(|_| {
        CudaError::invalid_argument(call, "name", format!("'{name}' contains a NUL byte"))
    })
}

pub(crate) struct LibraryInner {
    pub(crate) raw: CUlibrary,
    /// The parameter layouts a cubin image declares (none for PTX or a fatbin).
    layouts: CubinLayouts,
}

// SAFETY: libraries may be used from any thread.
unsafe impl Send for LibraryInner {}
// SAFETY: as above.
unsafe impl Sync for LibraryInner {}

impl Drop for LibraryInner {
    fn drop(&mut self) {
        // SAFETY: we own the library and unload it once; kernels hold an Arc to it.
        if let Err(e) = unsafe { driver::library_unload(self.raw) } {
            crate::report_library_release_error(&e);
        }
    }
}

/// A context-less image (`cuLibraryLoadData`); its kernels are `CUkernel`s that
/// launch in whichever context their stream belongs to.
#[derive(Clone)]
pub struct Library {
    inner: Arc<LibraryInner>,
}

impl Library {
    /// Loads an image: cubin or fatbin bytes, or PTX text.
    ///
    /// The image is checked first, as for [`Module::from_image`].
    ///
    /// # Errors
    ///
    /// As for [`Module::from_image`].
    pub fn from_image(image: &[u8]) -> CudaResult<Library> {
        let data = prepare(image, "Library::from_image")?;
        init()?;
        check_ptx_isa(image, driver_version)?;
        // SAFETY: `data` is a checked image (every offset and size it holds
        // lies inside it; PTX NUL-terminated) that outlives the call; no options.
        let raw = unsafe { driver::library_load_data(data.as_ptr(), None, None, None, None) }
            .map_err(|e| load_error(e, image))?;
        Ok(Library {
            inner: Arc::new(LibraryInner {
                raw,
                layouts: image::cubin_layouts(image),
            }),
        })
    }

    /// Loads an image from a file.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] naming the path when the file cannot be
    /// read, or as for [`Library::from_image`].
    pub fn from_file(path: impl AsRef<Path>) -> CudaResult<Library> {
        let bytes = read_image(path.as_ref(), "Library::from_file")?;
        Self::from_image(&bytes)
    }

    /// The raw handle.
    pub fn raw(&self) -> CUlibrary {
        self.inner.raw
    }

    /// An untyped handle to kernel `name`.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidArgument`] for a name with a NUL byte, or the
    /// driver's failure of `cuLibraryGetKernel` naming the kernel
    /// (`CUDA_ERROR_NOT_FOUND` when the library has no kernel of that name).
    pub fn function(&self, name: &str) -> CudaResult<Function> {
        let cname = c_name(name, "Library::function")?;
        // SAFETY: live library, NUL-terminated name.
        let raw = unsafe { driver::library_get_kernel(self.inner.raw, &cname) }
            .map_err(|e| e.with_context(|| format!("kernel '{name}'")))?;
        let layout = declared(&self.inner.layouts, name);
        Ok(Function::from_kernel(raw, name, self.inner.clone(), layout))
    }

    /// Declares kernel `name` with parameter types `S`; see [`Module::kernel`].
    ///
    /// # Errors
    ///
    /// As for [`Library::function`] and [`TypedKernel::declare`].
    ///
    /// # Safety
    ///
    /// As for [`Module::kernel`].
    pub unsafe fn kernel<S: KernelSignature>(&self, name: &str) -> CudaResult<TypedKernel<S>> {
        // SAFETY: the caller's promise is passed on.
        unsafe { TypedKernel::declare(self.function(name)?) }
    }

    /// Declares kernel `name` with parameters known at run time; see [`Module::dyn_kernel`].
    ///
    /// # Errors
    ///
    /// As for [`Library::function`] and [`DynKernel::declare`].
    ///
    /// # Safety
    ///
    /// As for [`DynKernel::declare`].
    pub unsafe fn dyn_kernel(&self, name: &str, params: Vec<Param>) -> CudaResult<DynKernel> {
        // SAFETY: the caller's promise is passed on.
        unsafe { DynKernel::declare(self.function(name)?, params) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_versions_are_read_and_matched_to_drivers() {
        let ptx = b"//\n// Generated by NVIDIA NVVM Compiler\n.version 9.5\n.target sm_90\n";
        assert_eq!(ptx_isa_version(ptx).as_deref(), Some("9.5"));
        assert_eq!(max_ptx_isa(13000), Some("9.0"));
        assert_eq!(max_ptx_isa(12040), Some("8.4"));
        assert_eq!(max_ptx_isa(11080), None);
    }

    /// warp-launch's condition kernel is PTX ISA 8.3 (CUDA 12.3, the first
    /// release with conditional nodes): a 12.2 driver refuses it before
    /// the JIT, naming both versions; 12.3 takes it; an unknown release
    /// and a cubin are left to the driver.
    #[test]
    fn ptx_newer_than_the_driver_is_refused_before_the_driver() {
        let ptx = b"//\n.version 8.3\n.target sm_75\n.address_size 64\n";
        match check_ptx_isa(ptx, || Ok(12020)) {
            Err(CudaError::PtxTooNew {
                ptx_isa,
                driver_max_isa,
                driver_version,
            }) => {
                assert_eq!(ptx_isa, "8.3");
                assert_eq!(driver_max_isa.as_deref(), Some("8.2"));
                assert_eq!(driver_version, Some(12020));
            }
            other => panic!("{other:?}"),
        }
        let e = check_ptx_isa(ptx, || Ok(12000)).unwrap_err().to_string();
        assert!(e.contains("ISA 8.3") && e.contains("8.0"), "{e}");
        check_ptx_isa(ptx, || Ok(12030)).unwrap();
        check_ptx_isa(ptx, || Ok(13050)).unwrap();
        check_ptx_isa(ptx, || Ok(11080)).unwrap();
        let cubin = b"\x7fELF\x02\x01\x01";
        check_ptx_isa(cubin, || panic!("a cubin asks no driver version")).unwrap();
    }

    #[test]
    fn ptx_gets_a_nul_and_bad_images_are_refused_naming_the_call() {
        let p = prepare(b".version 9.0\n", "Module::from_image").unwrap();
        assert!(p.bytes().starts_with(b".version 9.0\n\0"));
        match prepare(b"\x7fELF\x02", "Library::from_image") {
            Err(CudaError::InvalidImage(e)) => {
                assert_eq!(e.call, "Library::from_image");
                assert!(e.to_string().contains("Library::from_image"));
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("a 5-byte ELF was accepted"),
        }
    }

    #[test]
    fn ptx_too_new_message_names_both_versions() {
        let e = CudaError::PtxTooNew {
            ptx_isa: "9.5".into(),
            driver_max_isa: Some("9.0".into()),
            driver_version: Some(13000),
        };
        insta::assert_snapshot!(e.to_string());
    }
}
