//! Entry points for `cargo xtask fuzz` and the fuzz test in `tests/`: each
//! takes arbitrary bytes, returns nothing and never panics. Not part of the
//! API; the names stay stable for the fuzzer.

use crate::source;

/// Reads bytes as a Warp-generated `.cu` (`source::parse_cu`) and, when
/// that succeeds, declares each forward kernel as `AotModule::load` does
/// (no GPU, no image).
pub fn cu(data: &[u8]) {
    warp_proof::fuzz_cu(data);
}

/// Reads bytes as a Warp `.meta` file (`source::parse_meta`) and asks it
/// for a kernel's shared memory.
pub fn meta(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(m) = source::parse_meta(&text, "fuzz.meta") {
        let _ = m.shared_memory_bytes("k_cuda_kernel_forward");
    }
}

pub use crate::source::cuda_c::Weaken;

/// What the CUDA C reader makes of a text ([`cuda_c_read`]).
#[derive(Clone, Debug)]
pub struct CudaCRead {
    /// The text NVRTC compiles: the reader's re-emission of the tokens it
    /// read (no comments; each token on its own line, so line numbers are
    /// the text's), or `None` when the text does not lex (every kernel is
    /// then unproven and `CudaModule` compiles the text as given).
    pub emitted: Option<String>,
    /// Each kernel's name and verdict: `Ok(())` when proven, else
    /// `Err("file:line: reason")`.
    pub kernels: Vec<(String, Result<(), String>)>,
}

/// Reads `text` (file name `fuzz.cu`) as `CudaModule` does, with the
/// refusal `weaken` names turned off. `Err` when the text does not lex or
/// a kernel's head does not parse (the message `CudaModule` gives).
///
/// # Errors
///
/// The reader's error message.
pub fn cuda_c_read(text: &str, weaken: Weaken) -> Result<CudaCRead, String> {
    let read = crate::source::cuda_c::read_text(text, "fuzz.cu", weaken)
        .map_err(|e| crate::aot::src_err(e).to_string())?;
    let kernels = read
        .kernels
        .iter()
        .map(|k| {
            let verdict = match &k.accesses {
                crate::signature::Accesses::Checked(_) => Ok(()),
                crate::signature::Accesses::Unproven(u) => {
                    Err(format!("{}: {}", u.location, u.reason))
                }
            };
            (k.name.clone(), verdict)
        })
        .collect();
    Ok(CudaCRead {
        emitted: read.emitted,
        kernels,
    })
}

/// The grid a checked launch runs ([`cuda_c_accepts`]): what the host
/// build of a kernel must emulate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostLaunch {
    /// Blocks in `x`, `y`, `z` (`gridDim`).
    pub grid: [u32; 3],
    /// Threads per block in `x`, `y`, `z` (`blockDim`).
    pub block: [u32; 3],
    /// `launch_bounds_t<N>::shape` (the first `ndim` entries are used).
    pub shape: [u32; 4],
    /// `N` of `launch_bounds_t<N>`.
    pub ndim: usize,
    /// `launch_bounds_t<N>::size`.
    pub size: usize,
    /// `launch_bounds_t<N>::coord_mult`.
    pub coord_mult: usize,
}

/// Whether the safe launch of `kernel` (read from `text` as by
/// [`cuda_c_read`]) over `dim`, `block_dim` threads a block and at most
/// `max_blocks` blocks (0: no cap) passes every check a launch makes before
/// the driver, on arrays of the given `shapes` (one entry per parameter
/// after the launch bounds: the array's shape, `None` for a value). `Ok`
/// holds the grid it would run.
///
/// # Errors
///
/// The launch's refusal (or the reader's error) as text.
pub fn cuda_c_accepts(
    text: &str,
    weaken: Weaken,
    kernel: &str,
    dim: &[i64],
    block_dim: u32,
    max_blocks: u64,
    shapes: &[Option<Vec<usize>>],
) -> Result<HostLaunch, String> {
    let specs =
        crate::cuda_c::declarations_weakened(text, "fuzz.cu", weaken).map_err(|e| e.to_string())?;
    let spec = specs
        .into_iter()
        .find(|s| s.name() == kernel)
        .ok_or_else(|| format!("no kernel `{kernel}`"))?;
    let k = spec.declare().map_err(|e| e.to_string())?;
    crate::launch::check_host(&k, dim, block_dim, max_blocks, shapes)
        .map(|p| HostLaunch {
            grid: p.grid,
            block: p.block,
            shape: p.bounds.shape,
            ndim: p.bounds.ndim,
            size: p.bounds.size,
            coord_mult: p.bounds.coord_mult,
        })
        .map_err(|e| e.to_string())
}
