//! Linking PTX, cubins and fatbins into one cubin with the driver's
//! `cuLink*` (the JIT linker, which needs a context). LTO-IR (`-dlto`) is
//! not linked: the driver stopped linking it in CUDA 12.0, and nvJitLink,
//! which does, is not imported.

use std::ffi::{CString, c_void};

use cuda_sys::{CUjit_option, CUjitInputType, CUlinkState};

use crate::context::Context;
use crate::driver;
use crate::error::{CudaError, CudaResult};
use crate::image::ImageKind;
use crate::module::{Module, prepare_owned};

/// Bytes kept for each of the linker's logs.
const LOG_BYTES: usize = 16 * 1024;

/// Links images (PTX, cubins, fatbins: for example [`Compiled`](crate::Compiled)
/// results compiled with `-rdc=true`) into one cubin for the device of a
/// context, with the driver's JIT linker (`cuLinkCreate`, `cuLinkAddData`,
/// `cuLinkComplete`).
///
/// ```no_run
/// use cuda_api::{ComputeCapability, Context, CudaDevice, Linker, Program};
/// # fn main() -> cuda_api::CudaResult<()> {
/// let dev = CudaDevice::get(0)?;
/// let ctx = Context::primary(&dev)?;
/// let lib = Program::new("lib.cu", "__device__ float twice(float x) { return 2 * x; }")
///     .option("-rdc=true").for_device(&dev)?.compile()?;
/// let main = Program::new("main.cu", r#"
///     extern __device__ float twice(float);
///     extern "C" __global__ void k(float *x) { x[threadIdx.x] = twice(x[threadIdx.x]); }"#)
///     .option("-rdc=true").for_device(&dev)?.compile()?;
/// let mut linker = Linker::new(&ctx)?;
/// linker.add(lib.image(), "lib.cu")?.add(main.image(), "main.cu")?;
/// let module = linker.load()?;
/// # let _ = module; Ok(()) }
/// ```
///
/// LTO-IR is not linked: the driver's linker stopped taking it in CUDA
/// 12.0 and nvJitLink is not imported; compile to PTX or cubin instead.
pub struct Linker {
    ctx: Context,
    state: CUlinkState,
    // The driver keeps pointers to these until the state is destroyed.
    _options: Box<[CUjit_option; 4]>,
    _values: Box<[*mut c_void; 4]>,
    error_log: Box<[u8; LOG_BYTES]>,
    info_log: Box<[u8; LOG_BYTES]>,
    // Copies of the inputs, alive as long as the state.
    inputs: Vec<(String, Vec<u64>)>,
}

// SAFETY: the link state is used only through `&mut self` (or by value), so
// never from two threads at once, and it is bound to a context, not a thread.
unsafe impl Send for Linker {}

impl std::fmt::Debug for Linker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Linker")
            .field("ctx", &self.ctx)
            .field(
                "inputs",
                &self.inputs.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

fn log_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_string()
}

impl Linker {
    /// A linker for the device of `ctx`.
    ///
    /// # Errors
    ///
    /// A driver error from `cuLinkCreate`.
    pub fn new(ctx: &Context) -> CudaResult<Linker> {
        ctx.bind()?;
        let mut error_log = Box::new([0u8; LOG_BYTES]);
        let mut info_log = Box::new([0u8; LOG_BYTES]);
        let options = Box::new([
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        ]);
        let mut values: Box<[*mut c_void; 4]> = Box::new([
            error_log.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
            info_log.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
        ]);
        // SAFETY: the option values are two buffers of LOG_BYTES and their
        // sizes, boxed and kept (with the option arrays) until the state is
        // destroyed in `Drop`.
        let state = unsafe { driver::link_create(Some(&options[..]), Some(&mut values[..])) }?;
        Ok(Linker {
            ctx: ctx.clone(),
            state,
            _options: options,
            _values: values,
            error_log,
            info_log,
            inputs: Vec::new(),
        })
    }

    /// Adds an image (PTX, cubin or fatbin, checked first by
    /// [`check_image`](crate::check_image)) named `name` in the logs.
    ///
    /// # Errors
    ///
    /// [`CudaError::InvalidImage`] for bytes that are no whole image;
    /// [`CudaError::InvalidArgument`] for a name with a NUL byte; a driver
    /// error from `cuLinkAddData` (PTX that does not compile: the JIT's log
    /// is in its context).
    pub fn add(&mut self, image: &[u8], name: &str) -> CudaResult<&mut Self> {
        let (kind, words, len) = prepare_owned(image, "Linker::add")?;
        let c_name = CString::new(name).map_err(|_| {
            CudaError::invalid_argument(
                "Linker::add",
                "name",
                format!("'{name}' contains a NUL byte"),
            )
        })?;
        let ty = match kind {
            ImageKind::Ptx => CUjitInputType::CU_JIT_INPUT_PTX,
            ImageKind::Cubin => CUjitInputType::CU_JIT_INPUT_CUBIN,
            ImageKind::Fatbin => CUjitInputType::CU_JIT_INPUT_FATBINARY,
        };
        self.ctx.bind()?;
        self.inputs.push((name.to_string(), words));
        let data = self.inputs.last().map_or(std::ptr::null_mut(), |(_, w)| {
            w.as_ptr().cast::<c_void>().cast_mut()
        });
        // SAFETY: the state is live; `data` is a checked image of `len`
        // bytes (PTX NUL-terminated), aligned, kept until the state is
        // destroyed; the driver only reads it.
        unsafe { driver::link_add_data(self.state, ty, data, len, Some(&c_name), None, None) }
            .map_err(|e| self.with_log(e, &format!("adding {kind} `{name}`")))?;
        Ok(self)
    }

    fn with_log(&self, e: CudaError, what: &str) -> CudaError {
        let error = log_text(&self.error_log[..]);
        let info = log_text(&self.info_log[..]);
        e.with_context(|| {
            let mut s = format!("Linker: {what}");
            if !error.is_empty() {
                s += &format!("; the JIT linker's error log: {error}");
            }
            if !info.is_empty() {
                s += &format!("; its info log: {info}");
            }
            s
        })
    }

    /// Links what was added into one cubin.
    ///
    /// # Errors
    ///
    /// A driver error from `cuLinkComplete` (an unresolved symbol, an
    /// image for another architecture) with the JIT linker's log.
    pub fn complete(self) -> CudaResult<Vec<u8>> {
        self.ctx.bind()?;
        let mut cubin: *mut c_void = std::ptr::null_mut();
        // SAFETY: the state is live; `cubin` is a local out-pointer.
        let size = unsafe { driver::link_complete(self.state, &mut cubin) }.map_err(|e| {
            let names: Vec<&str> = self.inputs.iter().map(|(n, _)| n.as_str()).collect();
            self.with_log(e, &format!("linking {names:?}"))
        })?;
        if cubin.is_null() {
            return Err(CudaError::invalid_argument(
                "Linker::complete",
                "inputs",
                "the driver's linker returned no image; add at least one image first".into(),
            ));
        }
        // SAFETY: the driver returned `size` bytes at `cubin`, owned by the
        // state, alive until it is destroyed (when `self` drops, after the
        // copy).
        let bytes = unsafe { std::slice::from_raw_parts(cubin.cast::<u8>(), size) }.to_vec();
        Ok(bytes)
    }

    /// Links and loads the result into the linker's context.
    ///
    /// # Errors
    ///
    /// As for [`Linker::complete`] and [`Module::from_image`].
    pub fn load(self) -> CudaResult<Module> {
        let ctx = self.ctx.clone();
        let cubin = self.complete()?;
        Module::from_image(&ctx, &cubin)
    }
}

impl Drop for Linker {
    fn drop(&mut self) {
        let r = self.ctx.bind().and_then(|_| {
            // SAFETY: the state is ours and destroyed once, here.
            unsafe { driver::link_destroy(self.state) }
        });
        if let Err(e) = r {
            self.ctx.report_release_error("link state", &e);
        }
    }
}
