//! Row-major matrices of the inputs and the host product.

/// A row-major `rows × cols` matrix of f32. For an operand, a row is one m (A) or
/// one n (B) and the columns run along K, so `A` is `[M, K]` and `B` is `[N, K]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    /// `rows * cols` values; element (r, c) is `data[r * cols + c]`.
    pub data: Vec<f32>,
}

impl Matrix {
    /// A matrix over `data`, or `None` when the length is not `rows * cols`.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Option<Matrix> {
        (rows.checked_mul(cols)? == data.len()).then_some(Matrix { rows, cols, data })
    }

    /// Row `r`.
    pub fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }

    /// Columns `range` of every row (for an operand, that stretch of K).
    pub fn columns(&self, range: std::ops::Range<usize>) -> Matrix {
        let range = range.start.min(self.cols)..range.end.min(self.cols);
        let data = (0..self.rows)
            .flat_map(|r| self.row(r)[range.clone()].iter().copied())
            .collect();
        Matrix {
            rows: self.rows,
            cols: range.len(),
            data,
        }
    }

    /// Integers in [-8, 8] (what the suite harness's `wide_int` input holds) from a
    /// fixed xorshift of `seed`: an input whose runs of 8 values are all but unique,
    /// for synthetic runs and tests of the model.
    pub fn wide_int(rows: usize, cols: usize, seed: u64) -> Matrix {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let data = (0..rows * cols)
            .map(|_| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                (s.wrapping_mul(0x2545_F491_4F6C_DD1D) % 17) as f32 - 8.0
            })
            .collect();
        Matrix { rows, cols, data }
    }
}

/// The product `P = A·Bᵀ` (`P(m, n) = Σ_k A(m, k) B(n, k)`) in f64, with what each
/// cell may be off by in the kernel's accumulator of `bits` significand bits:
///
/// - nothing when every input is an integer and every cell's `Σ_k |A(m, k) B(n, k)|`
///   stays below 2^bits (then every partial sum is exact);
/// - in f32 (24 bits), `K · 2⁻²⁴ · Σ_k |A B|`, what an accumulation in any order may
///   add;
/// - in a narrower accumulator (f16: 11, bf16: 8), whose rounding that worst case
///   would make meaningless (half of every sum at K = 1024 in f16), the drift of a
///   sum rounded at every step: `2^(1-bits) · sqrt(K) · max_k |S_k|`, `S_k` the
///   partial sums in K order. That is four times the standard deviation of K
///   roundings of half an ulp each, and a K tile dropped or doubled moves a sum by
///   far more.
#[derive(Debug, Clone)]
pub struct Product {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    values: Vec<f64>,
    /// Per cell, the absolute difference an accumulator value may have from the
    /// value (0 when exact).
    tolerances: Vec<f64>,
    exact: bool,
    bits: i32,
}

impl Product {
    /// `a·bᵀ` as an f32 accumulator holds it, or `None` when their K differ.
    pub fn of(a: &Matrix, b: &Matrix) -> Option<Product> {
        Product::accumulated(a, b, 24)
    }

    /// `a·bᵀ` as an accumulator of `bits` significand bits (the implicit one counted:
    /// f32 24, f16 11, bf16 8) holds it, or `None` when their K differ.
    pub fn accumulated(a: &Matrix, b: &Matrix, bits: i32) -> Option<Product> {
        if a.cols != b.cols {
            return None;
        }
        let bits = bits.clamp(2, 24);
        let (m, n, k) = (a.rows, b.rows, a.cols);
        let mut values = vec![0.0; m * n];
        let mut bounds = vec![0.0; m * n];
        let mut peaks = vec![0.0; m * n];
        for i in 0..m {
            let ar = a.row(i);
            for j in 0..n {
                let br = b.row(j);
                let (mut s, mut t, mut peak) = (0.0_f64, 0.0_f64, 0.0_f64);
                for (x, y) in ar.iter().zip(br) {
                    let p = f64::from(*x) * f64::from(*y);
                    s += p;
                    t += p.abs();
                    peak = peak.max(s.abs());
                }
                values[i * n + j] = s;
                bounds[i * n + j] = t;
                peaks[i * n + j] = peak;
            }
        }
        let integral = a.data.iter().chain(&b.data).all(|v| v.fract() == 0.0);
        let exact = integral && bounds.iter().all(|&t| t < 2f64.powi(bits));
        let tolerances = if exact {
            vec![0.0; m * n]
        } else if bits >= 24 {
            bounds
                .iter()
                .map(|t| k as f64 * 2f64.powi(-24) * t)
                .collect()
        } else {
            let drift = 2f64.powi(1 - bits) * (k as f64).sqrt();
            peaks.iter().map(|p| drift * p).collect()
        };
        Some(Product {
            m,
            n,
            k,
            values,
            tolerances,
            exact,
            bits,
        })
    }

    /// `P(m, n)`, or `None` outside the product.
    pub fn get(&self, m: i64, n: i64) -> Option<f64> {
        self.index(m, n).map(|i| self.values[i])
    }

    /// Whether an accumulator value `v` can be `P(m, n)`: equal when every partial
    /// sum is exact, within the cell's tolerance otherwise.
    pub fn matches(&self, m: i64, n: i64, v: f32) -> bool {
        let Some(i) = self.index(m, n) else {
            return false;
        };
        let want = self.values[i];
        if self.exact {
            f64::from(v) == want
        } else {
            (f64::from(v) - want).abs() <= self.tolerances[i]
        }
    }

    /// Whether every partial sum of every cell is exact in the accumulator.
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// The accumulator's significand bits this product is compared in.
    pub fn bits(&self) -> i32 {
        self.bits
    }

    /// How values are compared, for the evidence: "exactly", "within the fp32
    /// accumulation bound", "within an f16 accumulator's drift".
    pub fn compared(&self) -> String {
        if self.exact {
            "exactly".to_owned()
        } else if self.bits >= 24 {
            "within the fp32 accumulation bound".to_owned()
        } else {
            format!(
                "within the drift of a {}-bit accumulator (f16: 11, bf16: 8)",
                self.bits
            )
        }
    }

    fn index(&self, m: i64, n: i64) -> Option<usize> {
        let (m, n) = (usize::try_from(m).ok()?, usize::try_from(n).ok()?);
        (m < self.m && n < self.n).then(|| m * self.n + n)
    }
}
