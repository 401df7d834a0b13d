//! The rungs: the inputs each one feeds the kernel, rounded to the input type.

use serde::Serialize;

use crate::error::LadderError;
use crate::problem::Problem;

/// One rung of the ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "rung")]
pub enum Rung {
    /// A = B = C = bias = 0: D = 0.
    Zeros,
    /// A = B = C = bias = 1: every output is alpha * K + beta (+ 1 with a bias).
    Ones,
    /// A(m, k) = a sequence of small integers, B = the identity (K x N, ones where
    /// k == n), C = bias = 0: D(m, n) = alpha * A(m, n) for n < K, else 0. A wrong,
    /// shifted or transposed tile shows where it lands.
    SeqIdentity,
    /// A(m, k) = 1 where k == K0, else 0; B(k, n) small integers, C = bias = 0:
    /// D(m, n) = alpha * B(K0, n). A dropped or repeated K slice (or pipeline stage)
    /// holding K0 shows.
    OnehotK { k0: usize },
    /// Integers in [-2, 2] from a seeded generator (A, B, then C and bias): fp32
    /// sums are exact for K up to 2^21. A transposed C or a bias broadcast along the
    /// wrong axis shows here.
    SmallInt { seed: u64 },
    /// Integers in [-8, 8] from a seeded generator (A, B, then C and bias): every run
    /// of 8 values along a row is all but unique, so a full trace (`--full-tile`) read
    /// against these operands says where each consumed value came from. Exact in every
    /// input type kwb runs (e4m3 holds the integers to 16); fp32 sums are exact for K up
    /// to 2^18. Not on the default ladder: kwb diagnose records its full trace on it.
    WideInt { seed: u64 },
    /// A and B uniform in [-1, 1) from a seeded generator; C and the bias the same
    /// times the scale of an output ([`random_scale`]), so a C or a bias added
    /// wrongly moves outputs by more than the tolerance they are compared with.
    Random { seed: u64 },
    /// Real data the user dumped (their operands, rounded to the input type), last on
    /// the ladder: compared with the tolerance of `random`. Its operands come from
    /// the files, never from a generator.
    Dump,
}

/// The scale of C and the bias on the random rung: the largest power of two at most
/// the RMS of a dot product of two uniform [-1, 1) vectors of length `k` (sqrt(k) / 3),
/// and at least 1. A power of two, so the scaled values stay exact in the input type.
pub fn random_scale(k: usize) -> f32 {
    let rms = (k as f64).sqrt() / 3.0;
    let mut scale = 1.0f64;
    while scale * 2.0 <= rms {
        scale *= 2.0;
    }
    scale as f32
}

/// The logical operands of a rung, row-major (A: M x K, B: K x N, C: M x N, bias: N),
/// each value already rounded to the problem's input type. C counts only where beta
/// is not 0, the bias only where the problem has one.
#[derive(Clone, Debug, PartialEq)]
pub struct Operands {
    pub a: Vec<f32>,
    pub b: Vec<f32>,
    pub c: Vec<f32>,
    pub bias: Vec<f32>,
}

/// A small deterministic generator (SplitMix64): the same seed, the same inputs, on
/// every machine.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// An integer in [-r, r].
    fn integer(&mut self, r: i64) -> f32 {
        (self.next() % (2 * r as u64 + 1)) as f32 - r as f32
    }
    /// A float in [-1, 1).
    fn uniform(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// The sequence of seq-identity: integers in [-32, 32], period 65 along a row, so a
/// shift by whole rows or columns of a tile changes the values (and every value is
/// exact in bf16 and f16).
fn seq(m: usize, k: usize) -> f32 {
    ((m * 7 + k) % 65) as f32 - 32.0
}

/// B(k, n) of onehot-k: integers in [-8, 8] that differ along k and n.
fn onehot_b(k: usize, n: usize) -> f32 {
    ((k * 3 + n) % 17) as f32 - 8.0
}

impl Rung {
    /// Parses `zeros`, `ones`, `seq-identity`, `onehot-k:K0`, `small-int[:SEED]`,
    /// `wide-int[:SEED]`, `random[:SEED]` (seed 1 by default).
    pub fn parse(text: &str) -> Result<Rung, LadderError> {
        let (name, arg) = text
            .trim()
            .split_once(':')
            .map_or((text.trim(), None), |(n, a)| (n, Some(a)));
        let number = |a: Option<&str>, default: u64| -> Result<u64, LadderError> {
            a.map_or(Ok(default), |a| {
                a.parse()
                    .map_err(|_| LadderError::UnknownRung(text.to_owned()))
            })
        };
        match name {
            "zeros" if arg.is_none() => Ok(Rung::Zeros),
            "ones" if arg.is_none() => Ok(Rung::Ones),
            "seq-identity" if arg.is_none() => Ok(Rung::SeqIdentity),
            "onehot-k" => Ok(Rung::OnehotK {
                k0: number(arg, 0)? as usize,
            }),
            "small-int" => Ok(Rung::SmallInt {
                seed: number(arg, 1)?,
            }),
            "wide-int" => Ok(Rung::WideInt {
                seed: number(arg, 1)?,
            }),
            "random" => Ok(Rung::Random {
                seed: number(arg, 1)?,
            }),
            _ => Err(LadderError::UnknownRung(text.to_owned())),
        }
    }

    /// The rung's name as `parse` reads it.
    pub fn name(self) -> String {
        match self {
            Rung::Zeros => "zeros".to_owned(),
            Rung::Ones => "ones".to_owned(),
            Rung::SeqIdentity => "seq-identity".to_owned(),
            Rung::OnehotK { k0 } => format!("onehot-k:{k0}"),
            Rung::SmallInt { seed } => format!("small-int:{seed}"),
            Rung::WideInt { seed } => format!("wide-int:{seed}"),
            Rung::Random { seed } => format!("random:{seed}"),
            Rung::Dump => "dump".to_owned(),
        }
    }

    /// Whether the answer is exact (compared without tolerance) in an f32
    /// accumulator.
    pub fn exact(self) -> bool {
        !matches!(self, Rung::Random { .. } | Rung::Dump)
    }

    /// Whether the answer is exact in `problem`'s accumulator: an integer rung whose
    /// partial sums, at their likely peak, stay below 2^bits (every partial sum an
    /// exact integer). Ones sum to K; one-hot and sequence×identity have one nonzero
    /// product a sum; the seeded integer rungs walk randomly, so their peak is taken
    /// as five standard deviations of the walk, `5 · sqrt(K) · rms(a·b)` (small-int:
    /// rms 2, wide-int: 24). In f16 (11 bits) at K = 1024 small-int stays exact
    /// (320) and wide-int does not (3840): its sums round, and are compared within
    /// a tolerance.
    pub fn exact_in(self, problem: &Problem) -> bool {
        if !self.exact() {
            return false;
        }
        let walk = |rms: f64| 5.0 * (problem.k as f64).sqrt() * rms;
        let peak = match self {
            Rung::Ones => problem.k as f64,
            Rung::SmallInt { .. } => walk(2.0),
            Rung::WideInt { .. } => walk(24.0),
            // One nonzero product a sum (a small integer), or none.
            _ => 0.0,
        };
        peak < 2f64.powi(problem.accumulator.precision())
    }

    /// The rung's answer in closed form, when it has one (zeros, ones, seq-identity,
    /// onehot-k): what `problem.reference` of its operands gives (its activation
    /// included), without the O(M·N·K) sum. A test holds the two equal.
    pub fn answer(self, problem: &Problem) -> Option<Vec<f64>> {
        let (m, n, k) = (problem.m, problem.n, problem.k);
        let alpha = f64::from(problem.alpha);
        let bias = if problem.bias { 1.0 } else { 0.0 };
        let mut d = vec![0.0; m * n];
        match self {
            Rung::Zeros => {}
            Rung::Ones => d.fill(alpha * k as f64 + f64::from(problem.beta) + bias),
            Rung::SeqIdentity => {
                for i in 0..m {
                    for j in 0..n.min(k) {
                        d[i * n + j] = alpha * f64::from(problem.input.round(seq(i, j)));
                    }
                }
            }
            Rung::OnehotK { k0 } if k0 < k => {
                for row in d.chunks_mut(n) {
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = alpha * f64::from(onehot_b(k0, j));
                    }
                }
            }
            _ => return None,
        }
        for v in &mut d {
            *v = problem.activation.apply(*v);
        }
        Some(d)
    }

    /// The operands of this rung for `problem`.
    pub fn operands(self, problem: &Problem) -> Result<Operands, LadderError> {
        let (m, n, k) = (problem.m, problem.n, problem.k);
        let round = |v: f32| problem.input.round(v);
        let mut a = vec![0.0; m * k];
        let mut b = vec![0.0; k * n];
        let mut c = vec![0.0; m * n];
        let mut bias = vec![0.0; n];
        match self {
            Rung::Zeros => {}
            Rung::Ones => {
                a.fill(1.0);
                b.fill(1.0);
                c.fill(1.0);
                bias.fill(1.0);
            }
            Rung::SeqIdentity => {
                for i in 0..m {
                    for p in 0..k {
                        // Rounded: e4m3 holds the integers past 16 only even.
                        a[i * k + p] = round(seq(i, p));
                    }
                }
                for p in 0..k.min(n) {
                    b[p * n + p] = 1.0;
                }
            }
            Rung::OnehotK { k0 } => {
                if k0 >= k {
                    return Err(LadderError::OnehotOutOfRange { k0, k });
                }
                for i in 0..m {
                    a[i * k + k0] = 1.0;
                }
                for p in 0..k {
                    for j in 0..n {
                        b[p * n + j] = onehot_b(p, j);
                    }
                }
            }
            Rung::SmallInt { seed } => {
                let mut g = SplitMix(seed);
                for v in a.iter_mut().chain(&mut b).chain(&mut c).chain(&mut bias) {
                    *v = g.integer(2);
                }
            }
            Rung::WideInt { seed } => {
                let mut g = SplitMix(seed);
                for v in a.iter_mut().chain(&mut b).chain(&mut c).chain(&mut bias) {
                    *v = g.integer(8);
                }
            }
            Rung::Random { seed } => {
                let mut g = SplitMix(seed);
                for v in a.iter_mut().chain(&mut b) {
                    *v = round(g.uniform());
                }
                let scale = random_scale(k);
                for v in c.iter_mut().chain(&mut bias) {
                    *v = round(g.uniform() * scale);
                }
            }
            Rung::Dump => return Err(LadderError::DumpHasNoGenerator),
        }
        Ok(Operands { a, b, c, bias })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Dtype;

    fn problem(m: usize, n: usize, k: usize) -> Problem {
        Problem::new(m, n, k, Dtype::Bf16, Dtype::Bf16).unwrap()
    }

    #[test]
    fn rungs_parse_and_print() {
        for text in [
            "zeros",
            "ones",
            "seq-identity",
            "onehot-k:5",
            "small-int:7",
            "wide-int:2",
            "random:3",
        ] {
            assert_eq!(Rung::parse(text).unwrap().name(), text);
        }
        assert_eq!(
            Rung::parse("small-int").unwrap(),
            Rung::SmallInt { seed: 1 }
        );
        assert!(Rung::parse("ones:2").is_err());
        assert!(Rung::parse("dump").is_err());
        assert!(Rung::parse("onehot-k:x").is_err());
    }

    #[test]
    fn closed_forms_hold_on_the_reference() {
        let p = problem(5, 6, 4);
        let d = |r: Rung| {
            let o = r.operands(&p).unwrap();
            p.reference(&o)
        };
        assert!(d(Rung::Ones).iter().all(|v| *v == 4.0));
        // With beta and a bias, ones gives alpha * K + beta + 1.
        let mut q = p.clone();
        (q.alpha, q.beta, q.bias) = (2.0, 0.5, true);
        let o = Rung::Ones.operands(&q).unwrap();
        assert!(q.reference(&o).iter().all(|v| *v == 9.5));
        assert!(d(Rung::Zeros).iter().all(|v| *v == 0.0));
        // seq-identity: D(m, n) = A(m, n) for n < K, 0 beyond.
        let s = d(Rung::SeqIdentity);
        for i in 0..5 {
            for j in 0..6 {
                let want = if j < 4 { f64::from(seq(i, j)) } else { 0.0 };
                assert_eq!(s[i * 6 + j], want);
            }
        }
        // onehot-k: every row is B's row K0.
        let o = Rung::OnehotK { k0: 2 }.operands(&p).unwrap();
        let h = p.reference(&o);
        for i in 0..5 {
            for j in 0..6 {
                assert_eq!(h[i * 6 + j], f64::from(o.b[2 * 6 + j]));
            }
        }
        assert!(Rung::OnehotK { k0: 4 }.operands(&p).is_err());
    }

    #[test]
    fn closed_form_answers_equal_the_reference() {
        for (m, n, k) in [(5, 6, 4), (7, 3, 9), (16, 16, 16), (1, 40, 2)] {
            for (alpha, beta, bias, input) in [
                (1.0, 0.0, false, Dtype::Bf16),
                (2.0, 0.5, true, Dtype::Bf16),
                (-3.0, 2.0, false, Dtype::Bf16),
                // e4m3 holds the sequence's odd integers past 16 rounded.
                (2.0, 0.0, false, Dtype::E4m3),
            ] {
                let mut p = problem(m, n, k);
                (p.alpha, p.beta, p.bias, p.input) = (alpha, beta, bias, input);
                // An epilogue's ReLU (alpha -3 makes outputs negative) in both.
                for activation in [crate::Activation::Identity, crate::Activation::Relu] {
                    p.activation = activation;
                    for r in [
                        Rung::Zeros,
                        Rung::Ones,
                        Rung::SeqIdentity,
                        Rung::OnehotK { k0: 0 },
                        Rung::OnehotK { k0: k - 1 },
                    ] {
                        let o = r.operands(&p).unwrap();
                        assert_eq!(
                            r.answer(&p),
                            Some(p.reference(&o)),
                            "{r:?} {m}x{n}x{k} {activation:?}"
                        );
                    }
                }
                assert_eq!(Rung::OnehotK { k0: k }.answer(&p), None);
                assert_eq!(Rung::SmallInt { seed: 1 }.answer(&p), None);
                assert_eq!(Rung::Random { seed: 1 }.answer(&p), None);
            }
        }
    }

    #[test]
    fn seeded_rungs_repeat_and_stay_in_range() {
        let p = problem(8, 8, 8);
        let a = Rung::SmallInt { seed: 3 }.operands(&p).unwrap();
        assert_eq!(a, Rung::SmallInt { seed: 3 }.operands(&p).unwrap());
        for v in [&a.a, &a.b, &a.c, &a.bias] {
            assert!(
                v.iter()
                    .all(|v| (-2.0..=2.0).contains(v) && v.fract() == 0.0)
            );
        }
        // C and the bias are not constant, so a transposed C or a bias broadcast
        // along the wrong axis changes the answer.
        assert!(a.c.iter().any(|v| *v != a.c[0]) && a.bias.iter().any(|v| *v != a.bias[0]));
        let r = Rung::Random { seed: 3 }.operands(&p).unwrap();
        assert!(
            r.a.iter()
                .all(|v| (-1.0..1.0).contains(v) && Dtype::Bf16.round(*v) == *v)
        );
        // C and the bias at an output's scale: for K = 8, sqrt(8) / 3 < 1, so 1.
        assert!(r.bias.iter().all(|v| (-1.0..1.0).contains(v)));
        assert_eq!(
            [random_scale(8), random_scale(1024), random_scale(6144)],
            [1.0, 8.0, 16.0]
        );
        let wide = problem(4, 8, 6144);
        let r = Rung::Random { seed: 3 }.operands(&wide).unwrap();
        assert!(r.bias.iter().all(|v| (-16.0..16.0).contains(v)));
        assert!(r.bias.iter().any(|v| v.abs() >= 1.0));
        assert_ne!(r, Rung::Random { seed: 4 }.operands(&p).unwrap());
    }

    /// wide-int is what a full trace is read against: integers in [-8, 8], exact in
    /// e4m3 (the narrowest input type), and its runs of 8 values along a row of A
    /// almost never repeat, which is what provenance needs.
    #[test]
    fn wide_int_is_exact_in_every_input_type_and_its_runs_are_all_but_unique() {
        let p = problem(64, 8, 512);
        let w = Rung::WideInt { seed: 1 }.operands(&p).unwrap();
        assert_eq!(w, Rung::WideInt { seed: 1 }.operands(&p).unwrap());
        for v in w.a.iter().chain(&w.b).chain(&w.c).chain(&w.bias) {
            assert!((-8.0..=8.0).contains(v) && v.fract() == 0.0);
            for t in [Dtype::E4m3, Dtype::F16, Dtype::Bf16] {
                assert_eq!(t.round(*v), *v, "{v} in {t:?}");
            }
        }
        assert!(w.a.iter().any(|v| v.abs() > 2.0), "wider than small-int");
        let mut runs: Vec<&[f32]> = w.a.chunks(512).flat_map(|row| row.windows(8)).collect();
        let total = runs.len();
        runs.sort_by(|x, y| x.partial_cmp(y).unwrap());
        runs.dedup();
        assert!(
            runs.len() * 1000 >= total * 999,
            "{} of {total}",
            runs.len()
        );
        assert!(Rung::WideInt { seed: 1 }.exact());
        assert_eq!(Rung::WideInt { seed: 1 }.answer(&p), None);
    }

    /// An f16 accumulator holds small-int's sums exactly at K = 1024 but not
    /// wide-int's, nor ones past K = 2048; f32 holds them all.
    #[test]
    fn an_integer_rung_is_exact_only_where_the_accumulator_holds_its_sums() {
        let mut p = problem(64, 64, 1024);
        let (small, wide) = (Rung::SmallInt { seed: 1 }, Rung::WideInt { seed: 1 });
        assert!(small.exact_in(&p) && wide.exact_in(&p) && Rung::Ones.exact_in(&p));
        p.accumulator = Dtype::F16;
        assert!(small.exact_in(&p) && !wide.exact_in(&p) && Rung::Ones.exact_in(&p));
        assert!(Rung::OnehotK { k0: 3 }.exact_in(&p));
        assert!(!Rung::Random { seed: 1 }.exact_in(&p));
        p.k = 4096;
        assert!(!Rung::Ones.exact_in(&p) && Rung::SeqIdentity.exact_in(&p));
    }
}
