//! Every byte this crate hands to Warp's kernel ABI, or reads back from it,
//! in one place and in one byte order: **little-endian**, the byte order of
//! NVIDIA GPUs (and of every host CUDA supports: x86-64, AArch64,
//! ppc64le). The launch bounds, `array_t`, scalar values and the bytes of
//! Rust values and structs are all encoded here; the layouts (offsets,
//! sizes) come from the generated ABI types and [`crate::signature`].
//!
//! Element data is copied between host and device memory as it lies in
//! host memory, so the host must be little-endian too; a big-endian target
//! does not compile.

use std::mem::offset_of;

use super::element::{Element, WarpStruct};
use super::{ArrayT, LaunchBounds1, LaunchBounds2, LaunchBounds3, LaunchBounds4, Scalar};

#[cfg(not(target_endian = "little"))]
compile_error!(
    "warp-launch passes host bytes to the GPU as they are, and GPUs are little-endian: build for a little-endian target"
);

/// Largest `launch_bounds_t<N>` (N = 3 or 4), in bytes.
pub(crate) const LAUNCH_BOUNDS_MAX_BYTES: usize = size_of::<LaunchBounds4>();

/// `launch_bounds_t<N>` (N = `ndim`, 1 to 4; above 4 reads as 4) as the
/// kernel receives it: `shape[..N]`, `size` and `coord_mult` each at its
/// offset in the generated type, padding zero. The first
/// `size_of::<LaunchBoundsN>()` bytes are the struct; the rest are zero.
pub(crate) fn launch_bounds(
    ndim: usize,
    shape: &[u32; 4],
    size: usize,
    coord_mult: usize,
) -> [u8; LAUNCH_BOUNDS_MAX_BYTES] {
    let mut out = [0u8; LAUNCH_BOUNDS_MAX_BYTES];
    let mut put = |at: usize, b: &[u8]| out[at..at + b.len()].copy_from_slice(b);
    macro_rules! fields {
        ($t:ident, $n:literal) => {{
            for (i, e) in shape[..$n].iter().enumerate() {
                put(offset_of!($t, shape) + 4 * i, &e.to_le_bytes());
            }
            put(offset_of!($t, size), &(size as u64).to_le_bytes());
            put(
                offset_of!($t, coord_mult),
                &(coord_mult as u64).to_le_bytes(),
            );
        }};
    }
    match ndim {
        1 => fields!(LaunchBounds1, 1),
        2 => fields!(LaunchBounds2, 2),
        3 => fields!(LaunchBounds3, 3),
        _ => fields!(LaunchBounds4, 4),
    }
    out
}

/// `wp::array_t<T>` as the kernel receives it: each field at its offset in
/// the generated type, padding zero (a struct's padding bytes are
/// uninitialised and must not be read).
pub(crate) fn array_t(a: &ArrayT) -> [u8; size_of::<ArrayT>()] {
    let mut out = [0u8; size_of::<ArrayT>()];
    let mut put = |at: usize, b: &[u8]| out[at..at + b.len()].copy_from_slice(b);
    put(offset_of!(ArrayT, data), &a.data.to_le_bytes());
    put(offset_of!(ArrayT, grad), &a.grad.to_le_bytes());
    for i in 0..4 {
        put(offset_of!(ArrayT, shape) + 4 * i, &a.shape[i].to_le_bytes());
        put(
            offset_of!(ArrayT, strides) + 4 * i,
            &a.strides[i].to_le_bytes(),
        );
    }
    put(offset_of!(ArrayT, ndim), &a.ndim.to_le_bytes());
    put(offset_of!(ArrayT, flags), &a.flags.to_le_bytes());
    out
}

/// The `array_t` in `bytes` (exactly `size_of::<ArrayT>()` of them, as
/// [`array_t`] writes them); `None` for another length.
pub(crate) fn array_t_from(bytes: &[u8]) -> Option<ArrayT> {
    if bytes.len() != size_of::<ArrayT>() {
        return None;
    }
    let get = |at: usize, n: usize| bytes.get(at..at + n);
    let u64_at = |at| get(at, 8)?.try_into().ok().map(u64::from_le_bytes);
    let i32_at = |at| get(at, 4)?.try_into().ok().map(i32::from_le_bytes);
    let u16_at = |at| get(at, 2)?.try_into().ok().map(u16::from_le_bytes);
    let mut a = ArrayT {
        data: u64_at(offset_of!(ArrayT, data))?,
        grad: u64_at(offset_of!(ArrayT, grad))?,
        ndim: u16_at(offset_of!(ArrayT, ndim))?,
        flags: u16_at(offset_of!(ArrayT, flags))?,
        ..ArrayT::default()
    };
    for i in 0..4 {
        a.shape[i] = i32_at(offset_of!(ArrayT, shape) + 4 * i)?;
        a.strides[i] = i32_at(offset_of!(ArrayT, strides) + 4 * i)?;
    }
    Some(a)
}

/// The bytes of elements as they lie in memory (little-endian, see the
/// module).
pub(crate) fn element_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `Element` types are plain data of their dtype's size with no
    // padding (every byte initialised); the view covers exactly `data`.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), size_of_val(data)) }
}

/// The element whose bytes are `bytes`; `None` unless there are exactly
/// `size_of::<T>()` of them.
pub(crate) fn element_from<T: Element>(bytes: &[u8]) -> Option<T> {
    if bytes.len() != size_of::<T>() {
        return None;
    }
    // SAFETY: `bytes` holds `size_of::<T>()` bytes and every bit pattern of
    // that size is a valid `T` (the `Element` contract); the read copies
    // them without assuming alignment.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// The bytes of a struct with a Warp struct's layout.
pub(crate) fn struct_bytes<S: WarpStruct>(value: &S) -> &[u8] {
    // SAFETY: `WarpStruct` types are `repr(C)` plain data without padding
    // (the trait's contract), so every byte is initialised; the view covers
    // exactly `value`.
    unsafe { std::slice::from_raw_parts((value as *const S).cast::<u8>(), size_of::<S>()) }
}

/// A float scalar (`float16` as its bits are not decoded: `None`) or an
/// integer scalar as `f64`; `None` for a byte count that is not the
/// scalar's size.
pub(crate) fn float_of(scalar: Scalar, b: &[u8]) -> Option<f64> {
    Some(match scalar {
        Scalar::Float32 => f32::from_le_bytes(b.try_into().ok()?).into(),
        Scalar::Float64 => f64::from_le_bytes(b.try_into().ok()?),
        Scalar::Float16 => return None,
        s => int_of(s, b)? as f64,
    })
}

/// An integer scalar (bool as 0/1) as `i128`; `None` for a float scalar or
/// a byte count that is not the scalar's size.
pub(crate) fn int_of(scalar: Scalar, b: &[u8]) -> Option<i128> {
    Some(match scalar {
        Scalar::Int8 => i8::from_le_bytes(b.try_into().ok()?).into(),
        Scalar::UInt8 | Scalar::Bool => u8::from_le_bytes(b.try_into().ok()?).into(),
        Scalar::Int16 => i16::from_le_bytes(b.try_into().ok()?).into(),
        Scalar::UInt16 => u16::from_le_bytes(b.try_into().ok()?).into(),
        Scalar::Int32 => i32::from_le_bytes(b.try_into().ok()?).into(),
        Scalar::UInt32 => u32::from_le_bytes(b.try_into().ok()?).into(),
        Scalar::Int64 => i64::from_le_bytes(b.try_into().ok()?).into(),
        Scalar::UInt64 => u64::from_le_bytes(b.try_into().ok()?).into(),
        _ => return None,
    })
}

/// The bits of a `float16` scalar; `None` for another byte count.
pub(crate) fn half_bits(b: &[u8]) -> Option<u16> {
    Some(u16::from_le_bytes(b.try_into().ok()?))
}

/// `x` as a float scalar's bytes (`float16` from its bits `half`, which
/// the caller rounds); `None` for an integer scalar.
pub(crate) fn float_bytes(
    scalar: Scalar,
    x: f64,
    half: impl FnOnce(f32) -> u16,
) -> Option<Vec<u8>> {
    Some(match scalar {
        Scalar::Float32 => (x as f32).to_le_bytes().to_vec(),
        Scalar::Float64 => x.to_le_bytes().to_vec(),
        Scalar::Float16 => half(x as f32).to_le_bytes().to_vec(),
        _ => return None,
    })
}

/// `i` as the first `size` bytes of its two's complement (the caller
/// checks that it fits the integer scalar of that size).
pub(crate) fn int_bytes(i: i128, size: usize) -> Option<Vec<u8>> {
    i.to_le_bytes().get(..size).map(<[u8]>::to_vec)
}

/// The elements of a `float32` or `float64` array's bytes as `f64`
/// (`scalar` other than `Float64` reads `float32`).
pub(crate) fn floats_of(scalar: Scalar, b: &[u8]) -> Vec<f64> {
    match scalar {
        Scalar::Float64 => b
            .chunks_exact(8)
            .filter_map(|c| Some(f64::from_le_bytes(c.try_into().ok()?)))
            .collect(),
        _ => b
            .chunks_exact(4)
            .filter_map(|c| Some(f32::from_le_bytes(c.try_into().ok()?).into()))
            .collect(),
    }
}

/// `v` as the bytes of a `float64` array, or of a `float32` one for any
/// other `scalar`.
pub(crate) fn floats_bytes(scalar: Scalar, v: &[f64]) -> Vec<u8> {
    match scalar {
        Scalar::Float64 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        _ => v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_t_bytes_are_little_endian_and_round_trip() {
        let a = ArrayT {
            data: 0x0102_0304_0506_0708,
            grad: 0x1000,
            shape: [3, 4, 0, 0],
            strides: [16, 4, 0, 0],
            ndim: 2,
            flags: 1,
            ..ArrayT::default()
        };
        let b = array_t(&a);
        assert_eq!(b[0..8], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(b[16..20], [3, 0, 0, 0]);
        assert_eq!(b[32..36], [16, 0, 0, 0]);
        assert_eq!(b[48..52], [2, 0, 1, 0]);
        assert_eq!(b[52..], [0; 4]);
        assert_eq!(array_t_from(&b), Some(a));
        assert_eq!(array_t_from(&b[1..]), None);
    }

    #[test]
    fn scalars_and_elements() {
        assert_eq!(float_of(Scalar::Float32, &2.5f32.to_le_bytes()), Some(2.5));
        assert_eq!(float_of(Scalar::Int16, &(-3i16).to_le_bytes()), Some(-3.0));
        assert_eq!(float_of(Scalar::Float64, &[0; 4]), None);
        assert_eq!(
            int_of(Scalar::UInt64, &u64::MAX.to_le_bytes()),
            Some(u64::MAX.into())
        );
        assert_eq!(int_of(Scalar::Float32, &[0; 4]), None);
        assert_eq!(half_bits(&[0x00, 0x3c]), Some(0x3c00));
        assert_eq!(
            float_bytes(Scalar::Float16, 1.0, |_| 0x3c00),
            Some(vec![0x00, 0x3c])
        );
        assert_eq!(float_bytes(Scalar::Int32, 1.0, |_| 0), None);
        assert_eq!(int_bytes(-2, 2), Some(vec![0xfe, 0xff]));
        assert_eq!(int_bytes(1, 17), None);
        let f = [1.0f32, -2.0];
        assert_eq!(element_bytes(&f), [0, 0, 128, 63, 0, 0, 0, 192]);
        assert_eq!(element_from::<f32>(&element_bytes(&f)[4..]), Some(-2.0));
        assert_eq!(element_from::<f32>(&[0; 3]), None);
        let v = floats_of(Scalar::Float32, &floats_bytes(Scalar::Float32, &[0.5, 3.0]));
        assert_eq!(v, [0.5, 3.0]);
        let v = floats_of(Scalar::Float64, &floats_bytes(Scalar::Float64, &[0.1]));
        assert_eq!(v, [0.1]);
    }
}
