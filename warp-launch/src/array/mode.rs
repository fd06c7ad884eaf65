//! The access modes a launch checks arrays under (Warp's), as values; the
//! checks themselves are in `access`.

use std::fmt;

/// How a launch checks that each array is reachable from the launch device
/// (Warp's array access modes). Every mode refuses memory the launch device
/// is known not to reach (ordinary host memory for a CUDA kernel, device
/// memory for the CPU or for another device without peer access; see
/// the module notes), so no mode lets safe code hand a kernel memory it
/// cannot reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AccessMode {
    /// No driver query: only what is known without asking the driver is
    /// refused (the memory kind and the device that allocated it).
    Relaxed,
    /// Ask the driver where each allocation lives and refuse what the launch
    /// device cannot reach; warn once per pattern where it cannot tell.
    #[default]
    Checked,
    /// Every array must live on the launch device.
    Strict,
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AccessMode::Relaxed => "RELAXED",
            AccessMode::Checked => "CHECKED",
            AccessMode::Strict => "STRICT",
        })
    }
}
