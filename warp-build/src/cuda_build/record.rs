//! What a [`CudaBuild`](super::CudaBuild) records of each `.cu` file and
//! kernel (in its stamp), and generates the launchers from.

use serde::{Deserialize, Serialize};

use super::wl_kernels::WlKernel;

/// One kernel's launcher, as recorded in the stamp.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaKernel {
    /// The name in the source or the name expression (`histogram<64>`).
    pub expression: String,
    /// The symbol in the image (the lowered name of a template instance).
    pub symbol: String,
    /// The Rust type of the launcher (`Histogram64`).
    pub type_name: String,
    /// The parameters: C name, C type, Rust type.
    pub params: Vec<(String, String, String)>,
    /// Whether the compiled code reaches a grid barrier: then the launcher
    /// has only `launch_cooperative`.
    pub grid_sync: bool,
    /// For a kernel of a file that includes `warp_launch.h`: its launcher
    /// over warp-launch's `Kernel` (safe when proven).
    pub warp_launch: Option<WlKernel>,
}

/// One `.cu` file's output, as recorded in the stamp.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaFile {
    /// The file's name (`reduce.cu`).
    pub name: String,
    /// The Rust module (`reduce`).
    pub module: String,
    /// The images, file names in the output directory.
    pub images: Vec<String>,
    /// The kernels.
    pub kernels: Vec<CudaKernel>,
    /// Why the file has no PTX fallback, when it has none.
    pub no_ptx: Option<String>,
    /// For a file that includes `warp_launch.h`: the copy of its text in
    /// the output directory, which the program embeds and reads its
    /// kernels' declarations from.
    pub source: Option<String>,
    /// NVRTC's first warning about a `warp_launch.h` file (line, text):
    /// none of its kernels is then proven.
    pub warning: Option<(usize, String)>,
}
