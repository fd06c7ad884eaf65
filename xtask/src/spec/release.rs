//! CUDA release names (`"12.4"`) as keys and numbers.

/// `"12.4"` → `(12, 4)`, for ordering releases.
pub fn release_key(r: &str) -> (u32, u32) {
    let mut it = r.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// `"12.4"` → `12040`, the form of `CUDA_VERSION` and `cuDriverGetVersion`.
pub fn release_number(r: &str) -> u32 {
    let (major, minor) = release_key(r);
    major * 1000 + minor * 10
}
