//! A kernel's output against a rung's answer: exact for closed-form rungs, with a
//! tolerance for random ones; NaN and Inf counted apart and never passing; the first
//! mismatch and the largest error per output tile.

use serde::Serialize;

use crate::error::LadderError;
use crate::problem::Problem;
use crate::rung::Rung;

/// The largest |output - answer| of each tile of the output (row-major tiles of
/// `tile.0 x tile.1`, the kernel's CTA tile), infinite where a tile holds a NaN or
/// Inf or a non-finite answer differs: where a defect lives (one tile, a row band, the
/// last K tile's columns, every tile) is its first clue.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TileGrid {
    pub tile: (usize, usize),
    pub rows: usize,
    pub cols: usize,
    pub max_error: Vec<f64>,
}

/// The verdict of one rung.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub rung: String,
    /// Compared exactly (the answer rounded to the output type).
    pub exact: bool,
    /// The absolute tolerance (0 when exact).
    pub tolerance: f64,
    pub pass: bool,
    /// Outputs further than the tolerance from the answer (NaN and Inf included).
    pub mismatches: usize,
    /// The first mismatch in row-major order, as (m, n).
    pub first_mismatch: Option<(usize, usize)>,
    /// The largest |output - answer| over finite outputs.
    pub max_abs: f64,
    /// ||output - answer|| / ||answer|| over finite outputs.
    pub rel_l2: f64,
    /// sum |output| / sum |answer|: an N-times over-amplified output reads N.
    pub ratio: f64,
    pub nan: usize,
    pub inf: usize,
    pub tiles: TileGrid,
}

/// The absolute tolerance of `rung`: 0 for closed forms; for random inputs a few
/// output ulps of the peak plus accumulation-order noise growing with sqrt(K): 1e-5
/// per sqrt(K) for an f32 accumulator, two of the accumulator's unit roundoffs for a
/// narrower one (f16 sums drift by about 2^-11 of the partial sums per step).
fn tolerance(rung: Rung, problem: &Problem, answer: &[f64]) -> f64 {
    if rung.exact_in(problem) {
        return 0.0;
    }
    let peak = answer.iter().fold(0.0f64, |p, v| p.max(v.abs()));
    let per_step = 1e-5f64.max(2f64.powi(-problem.accumulator.precision() + 1));
    // Operands read at fewer bits than they hold: each product of two uniform
    // [-1, 1) values off by up to two of the MMA's input ulps, summed over K.
    let inputs = match problem.mma_precision {
        Some(p) if p < problem.input.precision() => {
            f64::from(problem.alpha.abs()) * 2f64.powi(-p + 2) * (problem.k as f64).sqrt()
        }
        _ => 0.0,
    };
    peak * 2f64.powi(-problem.output.precision() + 2)
        + per_step * (problem.k as f64).sqrt() * (peak + 1.0)
        + inputs
}

/// Compares `output` (M x N, row-major, as read back and widened to f32) with the
/// `answer` of `rung` (the f64 reference of its operands), by output tiles of `tile`.
pub fn compare(
    rung: Rung,
    problem: &Problem,
    answer: &[f64],
    output: &[f32],
    tile: (usize, usize),
) -> Result<Comparison, LadderError> {
    let (m, n) = (problem.m, problem.n);
    if output.len() != m * n || answer.len() != m * n {
        return Err(LadderError::OutputSize {
            got: output.len().min(answer.len()),
            expected: m * n,
        });
    }
    let tile = (tile.0.max(1), tile.1.max(1));
    let (rows, cols) = (m.div_ceil(tile.0), n.div_ceil(tile.1));
    let mut grid = vec![0.0f64; rows * cols];
    let tol = tolerance(rung, problem, answer);
    let exact = rung.exact_in(problem);
    let (mut mismatches, mut nan, mut inf) = (0, 0, 0);
    let mut first = None;
    let (mut max_abs, mut err2, mut ref2, mut sum_out, mut sum_ref) = (0.0f64, 0.0, 0.0, 0.0, 0.0);
    for i in 0..m {
        for j in 0..n {
            let got = f64::from(output[i * n + j]);
            let answer_ij = problem.saturated(answer[i * n + j]);
            let want = if exact {
                f64::from(problem.output.round(answer_ij as f32))
            } else {
                answer_ij
            };
            let cell = &mut grid[(i / tile.0) * cols + j / tile.1];
            if got.is_nan() || got.is_infinite() {
                if got.is_nan() {
                    nan += 1;
                } else {
                    inf += 1;
                }
                mismatches += 1;
                first.get_or_insert((i, j));
                *cell = f64::INFINITY;
                continue;
            }
            let d = (got - want).abs();
            max_abs = max_abs.max(d);
            err2 += d * d;
            ref2 += want * want;
            sum_out += got.abs();
            sum_ref += want.abs();
            *cell = cell.max(d);
            if d.is_nan() || d > tol {
                mismatches += 1;
                first.get_or_insert((i, j));
            }
        }
    }
    Ok(Comparison {
        rung: rung.name(),
        exact,
        tolerance: tol,
        pass: mismatches == 0,
        mismatches,
        first_mismatch: first,
        max_abs,
        rel_l2: if ref2 > 0.0 {
            (err2 / ref2).sqrt()
        } else {
            err2.sqrt()
        },
        ratio: if sum_ref > 0.0 {
            sum_out / sum_ref
        } else if sum_out > 0.0 {
            f64::INFINITY
        } else {
            1.0
        },
        nan,
        inf,
        tiles: TileGrid {
            tile,
            rows,
            cols,
            max_error: grid,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Dtype;

    /// A host GEMM of the operands with a planted defect: `skip` leaves out K slice
    /// `skip` (a dropped pipeline stage), `scale` multiplies the result.
    fn kernel(p: &Problem, a: &[f32], b: &[f32], skip: Option<usize>, scale: f32) -> Vec<f32> {
        let mut d = vec![0.0f32; p.m * p.n];
        for i in 0..p.m {
            for j in 0..p.n {
                let mut acc = 0.0f32;
                for q in (0..p.k).filter(|q| Some(*q) != skip) {
                    acc += a[i * p.k + q] * b[q * p.n + j];
                }
                d[i * p.n + j] = p.output.round(acc * p.alpha * scale);
            }
        }
        d
    }

    fn run(rung: Rung, p: &Problem, skip: Option<usize>, scale: f32) -> Comparison {
        let o = rung.operands(p).unwrap();
        let answer = p.reference(&o);
        compare(
            rung,
            p,
            &answer,
            &kernel(p, &o.a, &o.b, skip, scale),
            (4, 4),
        )
        .unwrap()
    }

    fn problem() -> Problem {
        Problem::new(8, 8, 16, Dtype::Bf16, Dtype::Bf16).unwrap()
    }

    #[test]
    fn a_correct_kernel_passes_every_rung() {
        let p = problem();
        for rung in [
            "zeros",
            "ones",
            "seq-identity",
            "onehot-k:3",
            "small-int:2",
            "random:2",
        ] {
            let c = run(Rung::parse(rung).unwrap(), &p, None, 1.0);
            assert!(c.pass, "{rung}: {c:?}");
            if c.exact {
                assert_eq!(c.ratio, 1.0, "{rung}");
            } else {
                assert!((c.ratio - 1.0).abs() < 0.01, "{rung}: {}", c.ratio);
            }
        }
    }

    #[test]
    fn a_doubled_output_reads_ratio_two_everywhere() {
        let c = run(Rung::Ones, &problem(), None, 2.0);
        assert!(!c.pass);
        assert_eq!(c.ratio, 2.0);
        assert_eq!(c.mismatches, 64);
        assert_eq!(c.first_mismatch, Some((0, 0)));
        assert!(c.tiles.max_error.iter().all(|e| *e == 16.0));
    }

    #[test]
    fn onehot_finds_the_dropped_k_slice_ones_only_counts() {
        let p = problem();
        // Dropping K slice 3: ones shows K - 1, onehot-k:3 shows zeros where B's row 3
        // is not, onehot-k:4 passes (the slice it selects is there).
        assert!(!run(Rung::Ones, &p, Some(3), 1.0).pass);
        let hit = run(Rung::OnehotK { k0: 3 }, &p, Some(3), 1.0);
        assert!(!hit.pass && hit.ratio == 0.0, "{hit:?}");
        assert!(run(Rung::OnehotK { k0: 4 }, &p, Some(3), 1.0).pass);
    }

    #[test]
    fn nan_and_inf_never_pass_and_mark_their_tile() {
        let p = problem();
        let o = Rung::Ones.operands(&p).unwrap();
        let answer = p.reference(&o);
        let mut out: Vec<f32> = answer.iter().map(|v| *v as f32).collect();
        out[5 * 8 + 6] = f32::NAN;
        out[0] = f32::INFINITY;
        let c = compare(Rung::Ones, &p, &answer, &out, (4, 4)).unwrap();
        assert_eq!((c.nan, c.inf, c.mismatches), (1, 1, 2));
        assert_eq!(c.first_mismatch, Some((0, 0)));
        assert_eq!(
            c.tiles.max_error,
            vec![f64::INFINITY, 0.0, 0.0, f64::INFINITY]
        );
        assert!(compare(Rung::Ones, &p, &answer, &out[1..], (4, 4)).is_err());
    }

    #[test]
    fn an_f16_accumulator_widens_the_random_tolerance() {
        let mut p = Problem::new(4, 4, 1024, Dtype::F16, Dtype::F16).unwrap();
        let answer = vec![30.0; 16];
        let f32_tol = tolerance(Rung::Random { seed: 1 }, &p, &answer);
        p.accumulator = Dtype::F16;
        let f16_tol = tolerance(Rung::Random { seed: 1 }, &p, &answer);
        assert!(f16_tol > 10.0 * f32_tol, "{f16_tol} vs {f32_tol}");
        // Still far below the outputs: a dropped K tile (about a quarter of 30) shows.
        assert!(f16_tol < 3.0, "{f16_tol}");
        assert_eq!(tolerance(Rung::Ones, &p, &answer), 0.0);
    }

    #[test]
    fn operands_read_at_fewer_bits_widen_the_random_tolerance() {
        let mut p = Problem::new(64, 64, 1024, Dtype::F32, Dtype::F32).unwrap();
        let answer = vec![1.0; 64 * 64];
        let f32_tol = tolerance(Rung::Random { seed: 1 }, &p, &answer);
        p.mma_precision = Some(11);
        let tf32_tol = tolerance(Rung::Random { seed: 1 }, &p, &answer);
        assert!(tf32_tol > 5.0 * f32_tol, "{f32_tol} {tf32_tol}");
        assert_eq!(tolerance(Rung::Ones, &p, &answer), 0.0);
        // A type that holds no more bits than the MMA reads is unchanged.
        let mut q = Problem::new(64, 64, 1024, Dtype::Bf16, Dtype::F32).unwrap();
        let before = tolerance(Rung::Random { seed: 1 }, &q, &answer);
        q.mma_precision = Some(11);
        assert_eq!(tolerance(Rung::Random { seed: 1 }, &q, &answer), before);
    }

    #[test]
    fn a_saturating_output_conversion_is_compared_saturated() {
        let mut p = Problem::new(1, 2, 1, Dtype::E4m3, Dtype::E4m3).unwrap();
        let answer = [2048.5, -1000.0];
        let out = [448.0f32, -448.0];
        let unsaturated = compare(Rung::Ones, &p, &answer, &out, (1, 1)).unwrap();
        assert!(!unsaturated.pass);
        p.output_saturates = true;
        let saturated = compare(Rung::Ones, &p, &answer, &out, (1, 1)).unwrap();
        assert!(saturated.pass, "{saturated:?}");
        // A kernel that wrote less than the saturated answer still fails.
        let low = compare(Rung::Ones, &p, &answer, &[256.0, -448.0], (1, 1)).unwrap();
        assert!(!low.pass);
    }

    #[test]
    fn random_is_compared_within_a_tolerance() {
        let p = problem();
        let o = Rung::Random { seed: 9 }.operands(&p).unwrap();
        let answer = p.reference(&o);
        let mut out: Vec<f32> = answer
            .iter()
            .map(|v| Dtype::Bf16.round(*v as f32))
            .collect();
        let c = compare(Rung::Random { seed: 9 }, &p, &answer, &out, (8, 8)).unwrap();
        assert!(c.pass && c.tolerance > 0.0, "{c:?}");
        out[9] += 1.0;
        assert!(
            !compare(Rung::Random { seed: 9 }, &p, &answer, &out, (8, 8))
                .unwrap()
                .pass
        );
    }
}
