//! float16 and bfloat16 bits to and from float32, for the values handed to
//! kernels and the gradients the tape adds on the host: float32 to either
//! rounds to nearest, ties to even, as Warp's (numpy's) conversions do.

/// The value of IEEE binary16 bits `h` (exact).
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match exp {
        // Zero and subnormals: man * 2^-24, exact in float32.
        0 => {
            let v = man as f32 * f32::from_bits(0x3380_0000);
            return if sign == 0 { v } else { -v };
        }
        // Infinities and NaNs (payload kept).
        0x1f => sign | 0x7f80_0000 | (man << 13),
        // Normals: the exponent rebiased from 15 to 127.
        e => sign | ((e + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// `f` rounded to IEEE binary16 bits: to nearest, ties to even; past the
/// largest finite value (65504, halfway to the next power included) to an
/// infinity; a NaN stays a (quiet) NaN.
pub(crate) fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let a = x & 0x7fff_ffff;
    if a > 0x7f80_0000 {
        return sign | 0x7e00 | ((a >> 13) & 0x3ff) as u16;
    }
    if a >= 0x477f_f000 {
        // 65520 and above (infinity included).
        return sign | 0x7c00;
    }
    if a < 0x3880_0000 {
        // Below 2^-14: a subnormal (or zero) of binary16, man * 2^-24
        // (1024 * 2^-24 when it rounds up to the smallest normal, which
        // has those very bits).
        let scaled = f32::from_bits(a) * f32::from_bits(0x4b80_0000); // * 2^24, exact
        return sign | scaled.round_ties_even() as u16;
    }
    let exp = (a >> 23) - 112;
    let man = a & 0x7f_ffff;
    let mut h = (exp << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        // A carry out of the mantissa steps the exponent, as it should.
        h += 1;
    }
    sign | h as u16
}

/// The value of bfloat16 bits `h` (exact: the top half of a float32).
pub(crate) fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// `f` rounded to bfloat16 bits: to nearest, ties to even (overflowing to
/// an infinity); a NaN stays a (quiet) NaN.
pub(crate) fn f32_to_bf16(f: f32) -> u16 {
    let u = f.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return ((u >> 16) | 0x0040) as u16;
    }
    let rounded = u.wrapping_add(0x7fff + ((u >> 16) & 1));
    (rounded >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float16_conversions_round_to_nearest_even() {
        // Every finite float16 survives the trip through float32, and the
        // float32 halfway between two neighbours rounds to the even one.
        for bits in 0u16..=0xffff {
            let v = f16_to_f32(bits);
            if v.is_nan() {
                assert!(f16_to_f32(f32_to_f16(v)).is_nan(), "{bits:#06x}");
                continue;
            }
            assert_eq!(f32_to_f16(v), bits, "{bits:#06x} = {v}");
            let next = bits.wrapping_add(1);
            if bits & 0x7fff < 0x7bff && bits != 0x7fff {
                let mid = (f64::from(v) + f64::from(f16_to_f32(next))) / 2.0;
                let want = if bits & 1 == 0 { bits } else { next };
                assert_eq!(f32_to_f16(mid as f32), want, "halfway after {bits:#06x}");
            }
        }
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(-1e9), 0xfc00);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(
            f32_to_f16(2f32.powi(-25)),
            0,
            "a tie below the least subnormal goes to 0"
        );
        assert_eq!(
            f32_to_f16(3.0 * 2f32.powi(-25)),
            2,
            "1.5 ulp rounds to 2 ulp (even)"
        );
    }

    #[test]
    fn bfloat16_conversions_round_to_nearest_even() {
        for bits in 0u16..=0xffff {
            let v = bf16_to_f32(bits);
            if v.is_nan() {
                assert!(bf16_to_f32(f32_to_bf16(v)).is_nan(), "{bits:#06x}");
                continue;
            }
            assert_eq!(f32_to_bf16(v), bits, "{bits:#06x} = {v}");
        }
        // bfloat16 keeps 8 significant bits: 256 + 1 is a tie (to 256),
        // 256 + 3 a tie (to 260), 256 + 1.5 rounds to 258.
        assert_eq!(bf16_to_f32(f32_to_bf16(257.0)), 256.0);
        assert_eq!(bf16_to_f32(f32_to_bf16(259.0)), 260.0);
        assert_eq!(bf16_to_f32(f32_to_bf16(257.5)), 258.0);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80, "rounds up to infinity");
        // A NaN whose top mantissa bits are zero stays a NaN.
        assert!(bf16_to_f32(f32_to_bf16(f32::from_bits(0x7f80_0001))).is_nan());
    }
}
