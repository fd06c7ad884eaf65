//! Values of a dtype passed by value ([`Value`]): scalars, vectors and
//! matrices, and their conversions by Warp's rule for numbers.

use std::fmt;

use super::element::Element;
use super::encode;
use super::half::f32_to_f16;

use super::{DTYPES, DType, Kind, Scalar};

/// Largest value in bytes that a [`Value`] holds inline (a `mat44f`);
/// larger dtypes (double matrices, spatial matrices) are shared on the heap.
pub const INLINE_VALUE_BYTES: usize = 64;

#[derive(Clone)]
enum Bytes {
    Inline([u8; INLINE_VALUE_BYTES]),
    Heap(std::sync::Arc<[u8]>),
}

/// One value of a dtype, passed to a kernel by value (a scalar, vector or
/// matrix parameter). Cheap to clone.
#[derive(Clone)]
pub struct Value {
    dtype: &'static DType,
    bytes: Bytes,
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Value({}, {:?})", self.dtype.name, self.bytes())
    }
}

impl Value {
    /// The value of `v`.
    #[inline]
    pub fn of<T: Element>(v: T) -> Value {
        Value::with(T::DTYPE, encode::element_bytes(std::slice::from_ref(&v)))
    }

    #[inline(always)]
    fn with(dtype: &'static DType, raw: &[u8]) -> Value {
        let bytes = if raw.len() <= INLINE_VALUE_BYTES {
            let mut b = [0u8; INLINE_VALUE_BYTES];
            b[..raw.len()].copy_from_slice(raw);
            Bytes::Inline(b)
        } else {
            Bytes::Heap(raw.into())
        };
        Value { dtype, bytes }
    }

    /// A value of `dtype` from its bytes (`dtype.size` of them).
    pub fn from_bytes(dtype: &'static DType, raw: &[u8]) -> Option<Value> {
        if raw.len() != dtype.size {
            return None;
        }
        Some(Value::with(dtype, raw))
    }

    /// Its dtype.
    #[inline]
    pub fn dtype(&self) -> &'static DType {
        self.dtype
    }

    /// Its bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Inline(b) => &b[..self.dtype.size.min(INLINE_VALUE_BYTES)],
            Bytes::Heap(b) => b,
        }
    }

    /// The value converted to `to` by the rule for values known at run time
    /// (Warp's, for a Python number passed for a scalar parameter): any
    /// integer to any integer type when it fits, any number to a
    /// floating-point type, rounded to nearest (precision may be lost);
    /// infinities and NaN pass as themselves. `None` when it cannot be:
    /// not a scalar, an integer out of the target's range, a float for an
    /// integer type, or a finite number that the float type cannot hold (it
    /// would become infinity: `1e40` for `float32`, `70000` for `float16`).
    /// Never a panic: every dtype comes from the closed table [`DTYPES`],
    /// and sizes are checked again here.
    pub fn convert(&self, to: &'static DType) -> Option<Value> {
        self.try_convert(to).ok()
    }

    /// [`Value::convert`], with why it cannot be.
    pub(crate) fn try_convert(&self, to: &'static DType) -> Result<Value, Refusal> {
        if std::ptr::eq(to, self.dtype) {
            return Ok(self.clone());
        }
        if self.dtype.kind != Kind::Scalar || to.kind != Kind::Scalar {
            return Err(Refusal::Kind);
        }
        let out: Vec<u8> = match to.scalar {
            Scalar::Float32 | Scalar::Float64 | Scalar::Float16 => {
                let x = encode::float_of(self.dtype.scalar, self.bytes()).ok_or(Refusal::Kind)?;
                let out = encode::float_bytes(to.scalar, x, f32_to_f16).ok_or(Refusal::Kind)?;
                if x.is_finite() && !float_is_finite(to.scalar, &out) {
                    return Err(Refusal::Overflow {
                        value: x,
                        max: float_max(to.scalar),
                    });
                }
                out
            }
            s => {
                let i = self.as_i128().ok_or(Refusal::Kind)?;
                let range = |lo: i128, hi: i128| ((lo..=hi).contains(&i), lo, hi);
                let (ok, lo, hi) = match s {
                    Scalar::Int8 => range(i8::MIN.into(), i8::MAX.into()),
                    Scalar::UInt8 | Scalar::Bool => range(0, u8::MAX.into()),
                    Scalar::Int16 => range(i16::MIN.into(), i16::MAX.into()),
                    Scalar::UInt16 => range(0, u16::MAX.into()),
                    Scalar::Int32 => range(i32::MIN.into(), i32::MAX.into()),
                    Scalar::UInt32 => range(0, u32::MAX.into()),
                    Scalar::Int64 => range(i64::MIN.into(), i64::MAX.into()),
                    Scalar::UInt64 => range(0, u64::MAX.into()),
                    _ => return Err(Refusal::Kind),
                };
                if !ok {
                    return Err(Refusal::Range { lo, hi });
                }
                encode::int_bytes(i, to.size).ok_or(Refusal::Kind)?
            }
        };
        Value::from_bytes(to, &out).ok_or(Refusal::Kind)
    }

    /// The value as text: its components, e.g. `300`, `2.5` or `[1, 0, 0]`.
    pub fn show(&self) -> String {
        let n = self.dtype.scalar.size();
        let parts: Vec<String> = self
            .bytes()
            .chunks(n)
            .map(|c| match self.dtype.scalar {
                // Shown at the precision it has: 0.1f32 as `0.1`.
                Scalar::Float32 => encode::float_of(Scalar::Float32, c)
                    .map_or("?".into(), |x| (x as f32).to_string()),
                Scalar::Float64 => {
                    encode::float_of(Scalar::Float64, c).map_or("?".into(), |x| x.to_string())
                }
                Scalar::Float16 => {
                    encode::half_bits(c).map_or("?".into(), |h| format!("0x{h:04x} (half)"))
                }
                s => {
                    let one = Value::from_bytes(scalar_dtype(s), c);
                    one.and_then(|v| v.as_i128())
                        .map_or("?".into(), |i| i.to_string())
                }
            })
            .collect();
        if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        }
    }

    /// The value as an integer, if its dtype is an integer scalar.
    fn as_i128(&self) -> Option<i128> {
        if self.dtype.kind != Kind::Scalar {
            return None;
        }
        encode::int_of(self.dtype.scalar, self.bytes())
    }
}

/// Why [`Value::try_convert`] refuses a conversion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Refusal {
    /// Not scalar to scalar, or a float for an integer type.
    Kind,
    /// An integer outside the target's range `lo..=hi`.
    Range {
        /// The smallest value the target holds.
        lo: i128,
        /// The largest value the target holds.
        hi: i128,
    },
    /// A finite number beyond the float type's largest finite value `max`:
    /// it would become infinity.
    Overflow {
        /// The value given.
        value: f64,
        /// The largest finite value of the target.
        max: f64,
    },
}

/// Whether the float scalar `out` (bytes of `scalar`) is finite.
fn float_is_finite(scalar: Scalar, out: &[u8]) -> bool {
    match scalar {
        // The exponent bits all set: infinity or NaN.
        Scalar::Float16 => encode::half_bits(out).is_some_and(|h| h & 0x7c00 != 0x7c00),
        s => encode::float_of(s, out).is_some_and(f64::is_finite),
    }
}

/// The largest finite value of a float scalar.
fn float_max(scalar: Scalar) -> f64 {
    match scalar {
        Scalar::Float16 => 65504.0,
        Scalar::Float32 => f32::MAX.into(),
        _ => f64::MAX,
    }
}

/// The scalar dtype of `s`.
fn scalar_dtype(s: Scalar) -> &'static DType {
    DTYPES
        .iter()
        .find(|d| d.kind == Kind::Scalar && d.scalar == s)
        .unwrap_or(&DTYPES[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Warp's bits: 1.0 is 0x3c00 in float16, 0x3f80 in bfloat16.
    #[cfg(feature = "half")]
    #[test]
    fn half_values_have_warps_bits() {
        assert_eq!(Value::of(half::f16::ONE).bytes(), 0x3c00u16.to_le_bytes());
        assert_eq!(Value::of(half::bf16::ONE).bytes(), 0x3f80u16.to_le_bytes());
    }

    #[test]
    fn every_dtype_fits_a_value_and_is_found_by_its_spellings() {
        for d in DTYPES.iter() {
            let v = Value::from_bytes(d, &vec![7u8; d.size]).unwrap();
            assert_eq!(v.bytes(), vec![7u8; d.size], "{}", d.name);
            assert_eq!(DType::by_name(d.name), Some(d));
            assert_eq!(DType::by_cpp(d.cpp), Some(d), "{}", d.cpp);
            assert_eq!(d.size, d.components() * d.scalar.size(), "{}", d.name);
        }
    }

    /// `convert` is total: every pair of dtypes and several bit patterns
    /// give a value of the target's size or `None`, never a panic.
    #[test]
    fn convert_is_total_over_the_table() {
        for from in DTYPES.iter() {
            for fill in [0u8, 1, 0x7f, 0x80, 0xff] {
                let v = Value::from_bytes(from, &vec![fill; from.size]).unwrap();
                for to in DTYPES.iter() {
                    if let Some(c) = v.convert(to) {
                        assert_eq!(c.bytes().len(), to.size, "{from} -> {to}");
                        assert!(std::ptr::eq(c.dtype(), to));
                    }
                }
                let _ = v.show();
            }
        }
    }

    #[test]
    fn numbers_convert_as_warp_converts_python_numbers() {
        let f32t = DType::FLOAT32;
        let i32t = DType::INT32;
        let u8t = DType::UINT8;
        assert_eq!(
            Value::of(2.5f64).convert(f32t).unwrap().bytes(),
            2.5f32.to_le_bytes()
        );
        assert_eq!(
            Value::of(7i64).convert(f32t).unwrap().bytes(),
            7f32.to_le_bytes()
        );
        assert_eq!(
            Value::of(7i64).convert(i32t).unwrap().bytes(),
            7i32.to_le_bytes()
        );
        assert!(Value::of(300i32).convert(u8t).is_none());
        assert!(Value::of(-1i32).convert(u8t).is_none());
        assert!(Value::of(1.5f64).convert(i32t).is_none());
        assert!(Value::of([1f32, 2., 3.]).convert(f32t).is_none());
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(-2.0), 0xc000);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(1e9), 0x7c00);
    }

    /// A finite number that the float type cannot hold is refused (it
    /// would become infinity); the largest ones that round to a finite
    /// value, infinities and NaN pass.
    #[test]
    fn finite_numbers_that_overflow_a_float_type_are_refused() {
        let f32t = DType::FLOAT32;
        let f16t = DType::FLOAT16;
        assert_eq!(
            Value::of(1e40f64).try_convert(f32t).unwrap_err(),
            Refusal::Overflow {
                value: 1e40,
                max: f32::MAX.into()
            }
        );
        assert!(Value::of(-1e40f64).convert(f32t).is_none());
        assert_eq!(
            Value::of(3.0e38f64).convert(f32t).unwrap().bytes(),
            3.0e38f32.to_le_bytes()
        );
        assert_eq!(
            Value::of(f64::from(f32::MAX))
                .convert(f32t)
                .unwrap()
                .bytes(),
            f32::MAX.to_le_bytes()
        );
        assert_eq!(
            Value::of(f64::INFINITY).convert(f32t).unwrap().bytes(),
            f32::INFINITY.to_le_bytes()
        );
        let nan = Value::of(f64::NAN).convert(f32t).unwrap();
        assert!(f32::from_le_bytes(nan.bytes().try_into().unwrap()).is_nan());
        // float16: 65504 is its largest finite value; 65520 rounds to infinity.
        assert_eq!(
            Value::of(65504.0f32).convert(f16t).unwrap().bytes(),
            0x7bffu16.to_le_bytes()
        );
        assert!(matches!(
            Value::of(65520.0f32).try_convert(f16t),
            Err(Refusal::Overflow { max: 65504.0, .. })
        ));
        assert!(Value::of(70000i32).convert(f16t).is_none());
        assert!(Value::of(1e40f64).convert(f16t).is_none());
        assert_eq!(
            Value::of(f32::NEG_INFINITY).convert(f16t).unwrap().bytes(),
            0xfc00u16.to_le_bytes()
        );
        // Integers: the range is reported.
        assert_eq!(
            Value::of(300i32).try_convert(DType::UINT8).unwrap_err(),
            Refusal::Range { lo: 0, hi: 255 }
        );
    }
}
