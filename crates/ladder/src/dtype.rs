//! The element types of GEMM inputs and outputs, and rounding to them (round to
//! nearest even, as the device converts).

use serde::Serialize;

/// An element type of the kernel's inputs or outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    F16,
    Bf16,
}

impl Dtype {
    /// The name `--dtype` takes: `f32`, `f16`, `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }

    /// Bits of significand precision (with the implicit bit): 24, 11, 8.
    pub fn precision(self) -> i32 {
        match self {
            Dtype::F32 => 24,
            Dtype::F16 => 11,
            Dtype::Bf16 => 8,
        }
    }

    /// `v` rounded to this type and back to f32 (round to nearest, ties to even;
    /// overflow to infinity; NaN stays NaN).
    pub fn round(self, v: f32) -> f32 {
        match self {
            Dtype::F32 => v,
            Dtype::Bf16 => bf16_round(v),
            Dtype::F16 => f16_round(v),
        }
    }
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
