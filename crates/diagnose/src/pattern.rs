//! The shape of the error over the output: which outputs of a rung are wrong, and
//! what that set looks like. A defect leaves a signature there before anyone reads a
//! line of the kernel: one factor everywhere (alpha applied twice), a K tile counted
//! twice (the ratio is 1 + BK/K), a band of rows (padding, a box clamp), a period
//! (a swizzle), a transpose, one CTA tile (the scheduler or tile coordinates), or
//! nothing regular.

use serde::Serialize;

use crate::place::WrongTiles;

/// One rung's output against its answer, row-major M x N.
#[derive(Clone, Copy, Debug)]
pub struct ErrorGrid<'a> {
    pub m: usize,
    pub n: usize,
    /// The reduction length (for the K-residue reading).
    pub k: usize,
    pub output: &'a [f32],
    pub answer: &'a [f64],
    /// The kernel's CTA tile (rows, columns).
    pub tile: (usize, usize),
    /// An output is wrong when |output - answer| > tolerance (0: exact), or when it is
    /// NaN or Inf and the answer is not the same.
    pub tolerance: f64,
    /// The output type's relative rounding (2^-8 for bf16's 8-bit significand): two
    /// outputs scaled by one factor differ in their ratio by up to about twice it.
    pub rounding: f64,
}

/// What the set of wrong outputs looks like.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "pattern", rename_all = "kebab-case")]
pub enum Pattern {
    /// No output is wrong.
    None,
    /// Every output is its answer times one factor.
    Uniform { factor: f64 },
    /// Every output is its answer times 1 + extra_k / K: |extra_k| more (or fewer)
    /// products along K, a whole K tile counted twice or dropped (the last one, when
    /// the loop's bound or the pipeline's tail is off).
    KResidue { factor: f64, extra_k: i64 },
    /// Every output is wrong, by no one factor (NaN everywhere, garbage).
    Everywhere,
    /// The output is the answer transposed.
    Transposed,
    /// Only outputs of one CTA tile are wrong.
    OneTile { tile_row: usize, tile_col: usize },
    /// Whole rows are wrong, the others right (padding rows, a box clamp).
    RowBand { rows: Vec<(usize, usize)> },
    /// Whole columns are wrong, the others right.
    ColumnBand { cols: Vec<(usize, usize)> },
    /// The wrong rows or columns recur with a period (a swizzle, an interleave).
    Periodic { axis: Axis, period: usize },
    /// Nothing regular.
    Scattered { fraction: f64 },
}

/// An output axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    M,
    N,
}

impl Pattern {
    /// The label a report prints.
    pub fn label(&self) -> String {
        match self {
            Pattern::None => "none".to_owned(),
            Pattern::Uniform { factor } => format!("uniform {factor:.4}x"),
            Pattern::KResidue { factor, extra_k } => format!(
                "K residue: {extra_k:+} products along K ({factor:.4}x: a K tile counted twice or dropped)"
            ),
            Pattern::Everywhere => "everywhere (no one factor)".to_owned(),
            Pattern::Transposed => "transposed".to_owned(),
            Pattern::OneTile { tile_row, tile_col } => {
                format!("one tile (tile row {tile_row}, tile column {tile_col})")
            }
            Pattern::RowBand { rows } => format!("row band (rows {})", spans(rows)),
            Pattern::ColumnBand { cols } => format!("column band (columns {})", spans(cols)),
            Pattern::Periodic { axis, period } => {
                format!("periodic along {axis:?} with period {period}")
            }
            Pattern::Scattered { fraction } => {
                format!("scattered ({:.1}% of outputs)", fraction * 100.0)
            }
        }
    }
}

fn spans(ranges: &[(usize, usize)]) -> String {
    ranges
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}..={b}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The classification of one rung's error.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Classified {
    pub pattern: Pattern,
    /// Wrong outputs.
    pub wrong: usize,
    /// Wrong outputs that are NaN or Inf.
    pub non_finite: usize,
    /// The CTA tiles that hold them.
    pub tiles: WrongTiles,
}

/// K steps a residue is read in: a K tile of any kernel kwb knows is a multiple.
const K_QUANTUM: i64 = 8;
/// Relative spread under which ratios count as one factor (at least; more where the
/// output type rounds coarser).
const SAME_FACTOR: f64 = 1e-3;
/// Share of a row's (column's) outputs that must be wrong for it to be a wrong row.
const WHOLE_LINE: f64 = 0.9;

impl ErrorGrid<'_> {
    fn wrong(&self, i: usize) -> bool {
        let (o, a) = (f64::from(self.output[i]), self.answer[i]);
        if !o.is_finite() || !a.is_finite() {
            return !(o == a || (o.is_nan() && a.is_nan()));
        }
        (o - a).abs() > self.tolerance
    }
}

/// Classifies the wrong outputs of `grid`.
pub fn classify(grid: &ErrorGrid<'_>) -> Classified {
    let (m, n) = (grid.m, grid.n);
    let total = m * n;
    assert!(
        grid.output.len() >= total && grid.answer.len() >= total,
        "an error grid holds M x N outputs and answers"
    );
    let wrong: Vec<bool> = (0..total).map(|i| grid.wrong(i)).collect();
    let count = wrong.iter().filter(|w| **w).count();
    let non_finite = (0..total)
        .filter(|&i| wrong[i] && !grid.output[i].is_finite())
        .count();
    let pattern = pattern(grid, &wrong, count);
    Classified {
        pattern,
        wrong: count,
        non_finite,
        tiles: WrongTiles::of(m, n, grid.tile, &wrong),
    }
}

fn pattern(grid: &ErrorGrid<'_>, wrong: &[bool], count: usize) -> Pattern {
    let (m, n) = (grid.m, grid.n);
    if count == 0 {
        return Pattern::None;
    }
    if let Some(p) = one_factor(grid, wrong, count) {
        return p;
    }
    if transposed(grid, wrong) {
        return Pattern::Transposed;
    }
    if count == m * n {
        return Pattern::Everywhere;
    }
    let (bm, bn) = (grid.tile.0.max(1), grid.tile.1.max(1));
    let tiles = m.div_ceil(bm) * n.div_ceil(bn);
    if tiles > 1 {
        let mut first = None;
        let mut one = true;
        for i in (0..m * n).filter(|&i| wrong[i]) {
            let t = (i / n / bm, i % n / bn);
            match first {
                None => first = Some(t),
                Some(f) if f != t => {
                    one = false;
                    break;
                }
                _ => {}
            }
        }
        if let (true, Some((tile_row, tile_col))) = (one, first) {
            return Pattern::OneTile { tile_row, tile_col };
        }
    }
    let row_wrong: Vec<usize> = (0..m)
        .map(|r| (0..n).filter(|&c| wrong[r * n + c]).count())
        .collect();
    // Counted row by row, so a large grid is read in order.
    let mut col_wrong = vec![0usize; n];
    for row in wrong.chunks(n.max(1)).take(m) {
        for (count, &w) in col_wrong.iter_mut().zip(row) {
            *count += usize::from(w);
        }
    }
    let whole_rows: Vec<bool> = row_wrong
        .iter()
        .map(|&w| w as f64 >= WHOLE_LINE * n as f64)
        .collect();
    let whole_cols: Vec<bool> = col_wrong
        .iter()
        .map(|&w| w as f64 >= WHOLE_LINE * m as f64)
        .collect();
    // Wrong outputs only in whole wrong rows (or columns), and not all of them.
    let rows_explain = row_wrong
        .iter()
        .zip(&whole_rows)
        .all(|(&w, &whole)| w == 0 || whole);
    let cols_explain = col_wrong
        .iter()
        .zip(&whole_cols)
        .all(|(&w, &whole)| w == 0 || whole);
    if rows_explain && whole_rows.iter().any(|w| !w) {
        if let Some(period) = period(&whole_rows) {
            return Pattern::Periodic {
                axis: Axis::M,
                period,
            };
        }
        return Pattern::RowBand {
            rows: ranges(&whole_rows),
        };
    }
    if cols_explain && whole_cols.iter().any(|w| !w) {
        if let Some(period) = period(&whole_cols) {
            return Pattern::Periodic {
                axis: Axis::N,
                period,
            };
        }
        return Pattern::ColumnBand {
            cols: ranges(&whole_cols),
        };
    }
    // Partial rows or columns that still recur with a period (a swizzle moves chunks
    // of every row): the indicator of rows (columns) holding any wrong output.
    let any_rows: Vec<bool> = row_wrong.iter().map(|&w| w > 0).collect();
    let any_cols: Vec<bool> = col_wrong.iter().map(|&w| w > 0).collect();
    if any_cols.iter().any(|w| !w) {
        if let Some(period) = period(&any_cols) {
            return Pattern::Periodic {
                axis: Axis::N,
                period,
            };
        }
    }
    if any_rows.iter().any(|w| !w) {
        if let Some(period) = period(&any_rows) {
            return Pattern::Periodic {
                axis: Axis::M,
                period,
            };
        }
    }
    // Whole rows (columns) of the wrong set that repeat, a few cells aside: a swizzle's
    // diagonal stripes, where every row holds wrong outputs.
    let fraction = count as f64 / (m * n) as f64;
    if (MIXED..=1.0 - MIXED).contains(&fraction) {
        for (axis, period) in [
            (Axis::M, line_period(wrong, m, n, Axis::M)),
            (Axis::N, line_period(wrong, m, n, Axis::N)),
        ] {
            if let Some(period) = period {
                return Pattern::Periodic { axis, period };
            }
        }
    }
    Pattern::Scattered { fraction }
}

/// The share of outputs that must be wrong, and right, for a repeating arrangement of
/// whole lines to mean something.
const MIXED: f64 = 0.05;
/// The share of cells that may break a line period.
const PERIOD_SLACK: f64 = 0.01;

/// The smallest power-of-two period (2 to 256, at most half the extent) with which the
/// rows (axis M) or columns (axis N) of the wrong set repeat, up to PERIOD_SLACK of the
/// cells compared.
fn line_period(wrong: &[bool], m: usize, n: usize, axis: Axis) -> Option<usize> {
    let lines = match axis {
        Axis::M => m,
        Axis::N => n,
    };
    (1..=8)
        .map(|e| 1usize << e)
        .take_while(|p| *p <= lines / 2)
        .find(|&p| {
            // Row-major either way, so a large grid is read in order.
            let (rows, cols, shift) = match axis {
                Axis::M => (m - p, n, p * n),
                Axis::N => (m, n - p, p),
            };
            let budget = (PERIOD_SLACK * (rows * cols) as f64) as usize;
            let mut differ = 0usize;
            for r in 0..rows {
                for c in 0..cols {
                    let at = r * n + c;
                    if wrong[at] != wrong[at + shift] {
                        differ += 1;
                        if differ > budget {
                            return false;
                        }
                    }
                }
            }
            true
        })
}

/// Every output wrong by one factor of its (nonzero, finite) answer: Uniform, or
/// KResidue when the factor is 1 + e/K with e a whole number of K steps, at most a
/// quarter of K (a tile or a few, not a scale).
fn one_factor(grid: &ErrorGrid<'_>, wrong: &[bool], count: usize) -> Option<Pattern> {
    // Ratios of rounded outputs to exact answers spread by the output's rounding.
    let same = SAME_FACTOR.max(4.0 * grid.rounding);
    let mut first: Option<f64> = None;
    let (mut sum, mut nonzero) = (0.0f64, 0usize);
    for (i, &is_wrong) in wrong.iter().enumerate().take(grid.m * grid.n) {
        let a = grid.answer[i];
        if a == 0.0 || !a.is_finite() {
            continue;
        }
        // Every output with a nonzero answer is wrong, by the same factor.
        if !is_wrong {
            return None;
        }
        let r = f64::from(grid.output[i]) / a;
        let f = *first.get_or_insert(r);
        if !r.is_finite() || (r - f).abs() > same * f.abs() {
            return None;
        }
        sum += r;
        nonzero += 1;
    }
    // ... and only those.
    if nonzero == 0 || nonzero != count {
        return None;
    }
    let factor = sum / nonzero as f64;
    let k = grid.k as f64;
    let extra = (factor - 1.0) * k;
    let steps = (extra / K_QUANTUM as f64).round() as i64;
    let extra_k = steps * K_QUANTUM;
    let on_grid = (extra - extra_k as f64).abs() <= SAME_FACTOR * k.max(1.0) * factor.abs();
    if grid.k > 0 && steps != 0 && on_grid && (extra_k.unsigned_abs() as f64) <= k / 4.0 {
        return Some(Pattern::KResidue { factor, extra_k });
    }
    Some(Pattern::Uniform { factor })
}

/// The output equals the answer transposed wherever it is wrong (square problems).
fn transposed(grid: &ErrorGrid<'_>, wrong: &[bool]) -> bool {
    let n = grid.n;
    if grid.m != n || n < 2 {
        return false;
    }
    (0..n * n).filter(|&i| wrong[i]).all(|i| {
        let (r, c) = (i / n, i % n);
        (f64::from(grid.output[i]) - grid.answer[c * n + r]).abs() <= grid.tolerance
    })
}

/// The smallest period p (2 <= p <= len / 2) with which `set` repeats, when the set
/// is neither empty nor everything and at least two periods show.
fn period(set: &[bool]) -> Option<usize> {
    let len = set.len();
    if set.iter().all(|&b| b) || set.iter().all(|&b| !b) {
        return None;
    }
    (2..=len / 2).find(|&p| (0..len - p).all(|i| set[i] == set[i + p]))
}

/// The runs of `true` in `set`, as inclusive (first, last) pairs.
fn ranges(set: &[bool]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, &b) in set.iter().enumerate() {
        match (b, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i - 1));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, set.len() - 1));
    }
    out
}
