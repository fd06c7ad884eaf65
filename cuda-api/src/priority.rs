//! Stream priorities: the range a context allows
//! ([`Context::stream_priority_range`]) and the check that keeps a priority
//! inside it. The driver clamps a priority outside the range without a word;
//! cuda-api refuses it instead, naming the range
//! ([`CudaError::PriorityOutOfRange`]). See
//! [`cuCtxGetStreamPriorityRange`](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html).

use std::fmt;

use crate::context::Context;
use crate::driver;
use crate::error::{CudaError, CudaResult};

/// The stream priorities a context allows. Lower numbers are higher
/// priorities: `greatest <= least`, and work of a stream of higher priority
/// is scheduled first where both wait. On an H200 the range is 0 (least,
/// the default of [`Stream::new`](crate::Stream::new)) to -5 (greatest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PriorityRange {
    /// The lowest priority (the largest number), the default.
    pub least: i32,
    /// The highest priority (the smallest number).
    pub greatest: i32,
}

impl PriorityRange {
    /// Whether `priority` lies in the range (ends included).
    pub fn contains(&self, priority: i32) -> bool {
        self.greatest <= priority && priority <= self.least
    }

    /// Refuses a priority outside the range.
    ///
    /// # Errors
    ///
    /// [`CudaError::PriorityOutOfRange`] naming `priority`, the range and `device`.
    pub fn check(&self, priority: i32, device: &str) -> CudaResult<()> {
        if self.contains(priority) {
            return Ok(());
        }
        Err(CudaError::PriorityOutOfRange {
            priority,
            least: self.least,
            greatest: self.greatest,
            device: device.to_string(),
        })
    }
}

impl fmt::Display for PriorityRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (greatest) to {} (least)", self.greatest, self.least)
    }
}

impl Context {
    /// The stream priorities this context allows
    /// (`cuCtxGetStreamPriorityRange`).
    ///
    /// # Errors
    ///
    /// A driver failure (or the context failing to become current).
    pub fn stream_priority_range(&self) -> CudaResult<PriorityRange> {
        self.bind()?;
        let (least, greatest) = driver::ctx_get_stream_priority_range()?;
        Ok(PriorityRange { least, greatest })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The H200's range (driver CUDA 13.0).
    const H200: PriorityRange = PriorityRange {
        least: 0,
        greatest: -5,
    };

    #[test]
    fn both_ends_are_inside() {
        assert!(H200.contains(0));
        assert!(H200.contains(-5));
        assert!(H200.contains(-2));
        assert_eq!(H200.check(-5, "NVIDIA H200"), Ok(()));
    }

    #[test]
    fn one_past_either_end_is_refused_with_the_range() {
        for p in [1, -6, i32::MIN, i32::MAX] {
            let e = H200.check(p, "NVIDIA H200").unwrap_err();
            assert_eq!(
                e,
                CudaError::PriorityOutOfRange {
                    priority: p,
                    least: 0,
                    greatest: -5,
                    device: "NVIDIA H200".into()
                }
            );
        }
        let msg = H200.check(-6, "NVIDIA H200").unwrap_err().to_string();
        insta::assert_snapshot!(msg);
    }
}
