//! The element types of GEMM inputs and outputs, and rounding to them (round to
//! nearest even, as the device converts).

use serde::{Deserialize, Serialize};

/// An element type of the kernel's inputs or outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    F16,
    Bf16,
    /// fp8 e4m3 (`__nv_fp8_e4m3`, OCP "fn": no infinity, 448 the largest finite).
    E4m3,
}

impl Dtype {
    /// The name `--dtype` takes: `f32`, `f16`, `bf16`, `e4m3`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::E4m3 => "e4m3",
        }
    }

    /// Bits of significand precision (with the implicit bit): 24, 11, 8, 4.
    pub fn precision(self) -> i32 {
        match self {
            Dtype::F32 => 24,
            Dtype::F16 => 11,
            Dtype::Bf16 => 8,
            Dtype::E4m3 => 4,
        }
    }

    /// `v` rounded to this type and back to f32 (round to nearest, ties to even;
    /// overflow to infinity; NaN stays NaN).
    pub fn round(self, v: f32) -> f32 {
        match self {
            Dtype::F32 => v,
            Dtype::Bf16 => bf16_round(v),
            Dtype::F16 => f16_round(v),
            Dtype::E4m3 => e4m3_round(v),
        }
    }

    /// The largest finite value.
    pub fn max_finite(self) -> f64 {
        match self {
            Dtype::F32 => f64::from(f32::MAX),
            Dtype::F16 => 65504.0,
            Dtype::Bf16 => f64::from(f32::from_bits(0x7f7f_0000)),
            Dtype::E4m3 => 448.0,
        }
    }

    /// Bytes per element: 4, 2 or 1.
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::E4m3 => 1,
        }
    }

    /// The storage bits of `v` rounded to this type (in the low 16 bits for the
    /// 16-bit types).
    pub fn to_bits(self, v: f32) -> u32 {
        let r = self.round(v);
        match self {
            Dtype::F32 => r.to_bits(),
            Dtype::Bf16 => {
                r.to_bits() >> 16 | u32::from(r.is_nan() && r.to_bits() >> 16 & 0x7f == 0)
            }
            Dtype::F16 => f16_bits(r),
            Dtype::E4m3 => e4m3_bits(r),
        }
    }

    /// The value stored as `bits` (the low 16 bits for the 16-bit types).
    pub fn from_bits(self, bits: u32) -> f32 {
        match self {
            Dtype::F32 => f32::from_bits(bits),
            Dtype::Bf16 => f32::from_bits((bits & 0xffff) << 16),
            Dtype::F16 => f16_value(bits & 0xffff),
            Dtype::E4m3 => e4m3_value(bits & 0xff),
        }
    }

    /// Little-endian storage of `values` rounded to this type.
    pub fn encode(self, values: &[f32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(values.len() * self.bytes());
        for v in values {
            let bits = self.to_bits(*v);
            match self {
                Dtype::F32 => out.extend_from_slice(&bits.to_le_bytes()),
                Dtype::E4m3 => out.push(bits as u8),
                _ => out.extend_from_slice(&(bits as u16).to_le_bytes()),
            }
        }
        out
    }

    /// The values of little-endian storage `bytes` (a trailing partial element is
    /// ignored).
    pub fn decode(self, bytes: &[u8]) -> Vec<f32> {
        match self {
            Dtype::F32 => bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::E4m3 => bytes
                .iter()
                .map(|b| self.from_bits(u32::from(*b)))
                .collect(),
            _ => bytes
                .chunks_exact(2)
                .map(|c| self.from_bits(u32::from(u16::from_le_bytes([c[0], c[1]]))))
                .collect(),
        }
    }
}

/// The f16 bits of `v`, which is already an f16 value (or infinite or NaN).
fn f16_bits(v: f32) -> u32 {
    let sign = (v.to_bits() >> 16) & 0x8000;
    let a = v.abs();
    if a.is_nan() {
        return sign | 0x7e00;
    }
    if a.is_infinite() {
        return sign | 0x7c00;
    }
    if a == 0.0 {
        return sign;
    }
    if a < 6.103_515_6e-5 {
        // Subnormal: a multiple of 2^-24.
        return sign | (f64::from(a) * 2f64.powi(24)) as u32;
    }
    let e = a.to_bits() >> 23 & 0xff;
    let mantissa = (a.to_bits() >> 13) & 0x3ff;
    sign | ((e + 15 - 127) << 10) | mantissa
}

/// The value of f16 bits.
fn f16_value(bits: u32) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = (bits >> 10) & 0x1f;
    let m = bits & 0x3ff;
    let magnitude = match e {
        0 => m as f32 * 2f32.powi(-24),
        0x1f if m == 0 => f32::INFINITY,
        0x1f => f32::NAN,
        _ => (1.0 + m as f32 / 1024.0) * 2f32.powi(e as i32 - 15),
    };
    sign * magnitude
}

/// `v` rounded to e4m3: 3 stored significand bits, exponents -6 to 8 (subnormals
/// down to 2^-9); beyond 448 (from the halfway point 464) NaN, as an unsaturated
/// conversion gives.
fn e4m3_round(v: f32) -> f32 {
    if v.is_nan() {
        return v;
    }
    let magnitude = v.abs();
    if magnitude >= 464.0 {
        return f32::NAN;
    }
    if magnitude == 0.0 {
        return v;
    }
    let exponent = (magnitude.log2().floor() as i32).max(-6);
    let ulp = 2f64.powi(exponent - 3);
    let rounded = (f64::from(magnitude) / ulp).round_ties_even() * ulp;
    (rounded as f32).copysign(v)
}

/// The e4m3 bits of `v`, which is already an e4m3 value (or NaN).
fn e4m3_bits(v: f32) -> u32 {
    let sign = u32::from(v.is_sign_negative()) << 7;
    let a = v.abs();
    if a.is_nan() || a > 448.0 {
        return sign | 0x7f;
    }
    if a == 0.0 {
        return sign;
    }
    if a < 2f32.powi(-6) {
        return sign | (f64::from(a) * 512.0) as u32;
    }
    let e = a.log2().floor() as i32;
    let mantissa = ((f64::from(a) / 2f64.powi(e) - 1.0) * 8.0).round() as u32;
    sign | (((e + 7) as u32) << 3) | (mantissa & 7)
}

/// The value of e4m3 bits.
fn e4m3_value(bits: u32) -> f32 {
    let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = (bits >> 3) & 0xf;
    let m = bits & 7;
    let magnitude = match e {
        0 => m as f32 * 2f32.powi(-9),
        15 if m == 7 => f32::NAN,
        _ => (1.0 + m as f32 / 8.0) * 2f32.powi(e as i32 - 7),
    };
    sign * magnitude
}

fn bf16_round(v: f32) -> f32 {
    if v.is_nan() {
        return v;
    }
    let bits = v.to_bits();
    let rounding = 0x7fff + ((bits >> 16) & 1);
    f32::from_bits((bits.wrapping_add(rounding)) & 0xffff_0000)
}

fn f16_round(v: f32) -> f32 {
    if !v.is_finite() {
        return v;
    }
    let magnitude = v.abs();
    // Largest f16 is 65504; halfway to the next binade step (65520) rounds to inf.
    if magnitude >= 65520.0 {
        return f32::INFINITY.copysign(v);
    }
    // Spacing of f16 values around `magnitude`: 2^(e - 10), at least 2^-24.
    let exponent = if magnitude < 6.103_515_6e-5 {
        -14
    } else {
        magnitude.log2().floor() as i32
    };
    let ulp = 2f64.powi(exponent.max(-14) - 10);
    let scaled = f64::from(magnitude) / ulp;
    let rounded = scaled.round_ties_even() * ulp;
    (rounded as f32).copysign(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_keeps_eight_bits_and_rounds_ties_to_even() {
        assert_eq!(Dtype::Bf16.round(1.0), 1.0);
        assert_eq!(Dtype::Bf16.round(256.0), 256.0);
        assert_eq!(Dtype::Bf16.round(257.0), 256.0, "a tie to even");
        assert_eq!(Dtype::Bf16.round(259.0), 260.0);
        assert_eq!(Dtype::Bf16.round(-3.0), -3.0);
        assert!(Dtype::Bf16.round(f32::NAN).is_nan());
    }

    #[test]
    fn e4m3_keeps_three_bits_and_has_no_infinity() {
        let d = Dtype::E4m3;
        assert_eq!(d.round(1.0), 1.0);
        assert_eq!(d.round(17.0), 16.0, "a tie to even");
        assert_eq!(d.round(19.0), 20.0);
        assert_eq!(d.round(448.0), 448.0);
        assert!(d.round(464.0).is_nan());
        assert_eq!(d.round(2f32.powi(-9)), 2f32.powi(-9));
        assert_eq!(d.to_bits(1.0), 0x38);
        assert_eq!(d.to_bits(-448.0), 0xfe);
        assert!(d.from_bits(0xff).is_nan(), "the runner's fill is NaN");
        for b in 0..=0xfe_u32 {
            if b == 0x7f {
                continue;
            }
            let v = d.from_bits(b);
            assert_eq!(d.to_bits(v), b, "{b:#x} = {v}");
        }
    }

    #[test]
    fn storage_bits_round_trip() {
        for d in [Dtype::F32, Dtype::F16, Dtype::Bf16] {
            for v in [0.0, -0.0, 1.0, -2.5, 3.0e-5, 6.0e-8, 1024.0, -65504.0, 0.1] {
                let r = d.round(v);
                assert_eq!(d.from_bits(d.to_bits(v)), r, "{d:?} {v}");
                assert_eq!(d.decode(&d.encode(&[v])), vec![r]);
            }
            assert!(d.from_bits(d.to_bits(f32::NAN)).is_nan(), "{d:?}");
            assert_eq!(d.from_bits(d.to_bits(f32::INFINITY)), f32::INFINITY);
        }
        assert_eq!(Dtype::F16.to_bits(1.0), 0x3c00);
        assert_eq!(Dtype::F16.to_bits(-2.0), 0xc000);
        assert_eq!(Dtype::F16.to_bits(2f32.powi(-24)), 0x0001);
        assert_eq!(Dtype::Bf16.to_bits(1.0), 0x3f80);
        assert_eq!(
            Dtype::Bf16.encode(&[1.0, -2.0]),
            vec![0x80, 0x3f, 0x00, 0xc0]
        );
    }

    #[test]
    fn f16_rounds_to_its_grid_and_overflows() {
        assert_eq!(Dtype::F16.round(2049.0), 2048.0, "a tie to even");
        assert_eq!(Dtype::F16.round(2051.0), 2052.0);
        assert_eq!(Dtype::F16.round(0.1), 0.099_975_586);
        assert_eq!(Dtype::F16.round(70000.0), f32::INFINITY);
        assert_eq!(Dtype::F16.round(-65504.0), -65504.0);
        assert_eq!(
            Dtype::F16.round(1e-8),
            0.0,
            "below half the smallest subnormal"
        );
    }
}
