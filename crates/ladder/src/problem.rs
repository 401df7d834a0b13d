//! The GEMM a rung runs: `D (M x N) = alpha * A (M x K) · B (K x N) + beta * C
//! [+ bias]`, the element types, and the host reference in f64.

use serde::Serialize;

use crate::dtype::Dtype;
use crate::error::LadderError;
use crate::rung::Operands;

/// One GEMM problem.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    /// The type A and B hold.
    pub input: Dtype,
    /// The type D is stored in.
    pub output: Dtype,
    /// The type the kernel accumulates in (f32 unless a runner knows otherwise): the
    /// tolerance for random inputs grows with its rounding.
    pub accumulator: Dtype,
    /// The significand bits (the implicit one counted) the MMA reads A and B with,
    /// where fewer than their type's (a tf32 MMA on f32 operands: 11); None: their
    /// type's. The tolerance for random inputs grows with the rounding.
    pub mma_precision: Option<i32>,
    /// The elementwise function the epilogue applies to `alpha·A·B + beta·C [+ bias]`.
    pub activation: Activation,
    /// Whether the kernel's conversion to the output type saturates to its largest
    /// finite value (the hardware's f32 to fp8 `cvt.rn.satfinite`, as CUTLASS's
    /// epilogues convert) rather than overflowing to NaN or infinity.
    pub output_saturates: bool,
    /// Whether the GEMM adds a bias vector broadcast along M (`bias[n]` to every
    /// output of column n): a kernel or launcher that takes one.
    pub bias: bool,
}

/// An elementwise function an epilogue applies to its linear combination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    #[default]
    Identity,
    /// max(0, x).
    Relu,
}

impl Activation {
    /// By the name a manifest gives (`relu`); None for a name kwb does not model.
    pub fn named(name: &str) -> Option<Activation> {
        match name {
            "identity" | "none" => Some(Activation::Identity),
            "relu" => Some(Activation::Relu),
            _ => None,
        }
    }

    pub fn apply(self, v: f64) -> f64 {
        match self {
            Activation::Identity => v,
            // NaN stays NaN: a kernel's NaN must not pass as a clamped 0.
            Activation::Relu if v < 0.0 => 0.0,
            Activation::Relu => v,
        }
    }
}

impl Problem {
    /// `v` as the kernel's output conversion leaves it: saturated where the kernel's
    /// conversion saturates (NaN kept), not yet rounded.
    pub fn saturated(&self, v: f64) -> f64 {
        let max = self.output.max_finite();
        if self.output_saturates && !v.is_nan() {
            v.clamp(-max, max)
        } else {
            v
        }
    }

    /// A problem of this shape with alpha 1, beta 0; errors when a dimension is 0.
    pub fn new(
        m: usize,
        n: usize,
        k: usize,
        input: Dtype,
        output: Dtype,
    ) -> Result<Problem, LadderError> {
        if m == 0 || n == 0 || k == 0 {
            return Err(LadderError::Empty { m, n, k });
        }
        Ok(Problem {
            m,
            n,
            k,
            alpha: 1.0,
            beta: 0.0,
            input,
            output,
            accumulator: Dtype::F32,
            mma_precision: None,
            activation: Activation::Identity,
            output_saturates: false,
            bias: false,
        })
    }

    /// `D = alpha * A·B + beta * C [+ bias]` in f64, from the logical (row-major)
    /// operands as the kernel sees them (already rounded to the input type).
    pub fn reference(&self, o: &Operands) -> Vec<f64> {
        let (a, b, c) = (&o.a, &o.b, &o.c);
        let (m, n, k) = (self.m, self.n, self.k);
        let mut d = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f64;
                for p in 0..k {
                    acc += f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
                }
                let c_term = c.get(i * n + j).map_or(0.0, |v| f64::from(*v));
                d[i * n + j] = f64::from(self.alpha) * acc + f64::from(self.beta) * c_term;
                if self.bias {
                    d[i * n + j] += o.bias.get(j).map_or(0.0, |v| f64::from(*v));
                }
                d[i * n + j] = self.activation.apply(d[i * n + j]);
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_is_alpha_ab_plus_beta_c() {
        let mut p = Problem::new(2, 2, 3, Dtype::F32, Dtype::F32).unwrap();
        p.alpha = 2.0;
        p.beta = 0.5;
        let mut o = Operands {
            a: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            b: vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0],
            c: vec![2.0, 2.0, 2.0, 2.0],
            bias: vec![10.0, 20.0],
        };
        // A·B = [[4, 5], [10, 11]]; the bias is added only to a problem that has one.
        assert_eq!(p.reference(&o), vec![9.0, 11.0, 21.0, 23.0]);
        p.bias = true;
        assert_eq!(p.reference(&o), vec![19.0, 31.0, 31.0, 43.0]);
        o.bias.clear();
        assert_eq!(p.reference(&o), vec![9.0, 11.0, 21.0, 23.0]);
        // An epilogue's ReLU clamps the negative outputs, NaN kept.
        p.alpha = -1.0;
        p.activation = Activation::Relu;
        assert_eq!(p.reference(&o), vec![0.0, 0.0, 0.0, 0.0]);
        p.alpha = 1.0;
        p.beta = -10.0;
        assert_eq!(p.reference(&o), vec![0.0, 0.0, 0.0, 0.0]);
        assert!(Activation::Relu.apply(f64::NAN).is_nan());
        assert!(Problem::new(0, 1, 1, Dtype::F32, Dtype::F32).is_err());
    }
}
