//! What this crate takes from warp-proof, the proof engine (the readers of
//! kernel text, the access-rule types), under the module paths it had here
//! before they moved there (issue 35): `crate::signature::*` and
//! `crate::source::*`. The public ones are re-exported at the crate root
//! (`lib.rs`).

/// Kernel signatures and the access rules a launch checks.
pub(crate) mod signature {
    #[cfg(test)]
    pub(crate) use warp_proof::StructField;
    pub(crate) use warp_proof::{
        AccessTarget, Accesses, ArrayAccess, AxisIndex, KernelParam, ParamKind, Pass, StructType,
        Unproven,
    };
}

/// The readers of Warp's generated `.cu` and `.meta`, and of hand-written
/// CUDA C (`cuda_c`).
pub(crate) mod source {
    #[cfg(test)]
    pub(crate) use warp_proof::WarpFeature;
    pub(crate) use warp_proof::{cuda_c, parse_meta};
}
