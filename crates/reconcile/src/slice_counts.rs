//! The accumulator as a sum over K slices, when the operands were not probed.
//!
//! A K loop multiplies, at each step, a K slice of A's rows by the *same* K slice of
//! B's rows. Whatever goes wrong with its count — a tile dropped, a tile or an MMA
//! issued twice — the accumulator stays a sum of such matched products:
//! `acc(m, n) = Σ_t c_t · Σ_{k ∈ slice t} A(m, k) B(n, k)` with whole counts `c_t ≥ 0`
//! (1 everywhere in a correct run). An operand read from another K offset, another
//! stage or another row pairs A's slice with a different slice of B (or with another
//! row), and no such counts reproduce the accumulator. On `wide_int` inputs the
//! per-slice products are all but linearly independent, so least squares over the
//! traced CTA's cells finds the counts where they exist, and an exact check of every
//! cell with the rounded counts says whether they do.
//!
//! Invariant: a reading is only made from cells with coordinates in the problem's
//! frame (the caller passes the shift from the record's frame to the problem's), each
//! cell one value, with the product exact in the accumulator (integer inputs, every
//! partial sum below 2^bits); anything else is not judged.

use std::collections::HashSet;

use kwb_runtime::Trace;

use crate::accumulator::final_values;
use crate::matrix::{Matrix, Product};
use crate::provenance::UNIT;
use crate::ranges::Ranges;

/// The largest count a slice is read as (a tile issued a few times over); counts past
/// it are no loop count.
const MOST: f64 = 8.0;

/// What the counts say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SliceReading {
    /// Every slice met its own B slice, some slices too often or never, not both: the
    /// K loop ran a wrong number of steps.
    LoopCount,
    /// Matched slices, but some never met and others met more often: a step fed
    /// another step's tiles (a stage or K offset read for both operands alike).
    Displaced,
    /// No whole counts reproduce most of the accumulator's cells: A's values met B's
    /// of another K (or another row).
    Unpaired,
}

/// The final accumulator held to sums of matched K-slice products.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SliceCounts {
    /// Accumulator cells looked at, and K slices (of [`UNIT`] k) solved for.
    pub cells: usize,
    pub slices: usize,
    /// Why nothing was judged, when nothing was.
    pub unjudged: Option<String>,
    /// The whole count of each slice, where whole counts reproduce every cell.
    pub counts: Option<Vec<u32>>,
    /// Cells the rounded counts did not reproduce, where they did not.
    pub off: usize,
    /// Where no counts shared by every cell reproduce them: whether each cell is a
    /// whole multiple (0 to [`MOST`]) of its own product over K — matched pairs with a
    /// count of their own, as an MMA issued twice for some fragments and not others
    /// makes.
    pub per_cell_multiples: bool,
}

impl SliceCounts {
    /// The reading, when one was made.
    pub fn reading(&self) -> Option<SliceReading> {
        if self.unjudged.is_some() {
            return None;
        }
        let Some(counts) = &self.counts else {
            // Each cell its own whole count: matched pairs, the loop's count per
            // fragment.
            if self.per_cell_multiples {
                return Some(SliceReading::LoopCount);
            }
            // Most cells: a load of another k or row shifts every pairing, where a
            // glitch in the accumulation leaves a few cells off and reads as nothing.
            return (2 * self.off > self.cells).then_some(SliceReading::Unpaired);
        };
        let never = counts.contains(&0);
        let extra = counts.iter().any(|&c| c > 1);
        match (never, extra) {
            (true, true) => Some(SliceReading::Displaced),
            (false, false) => None,
            _ => Some(SliceReading::LoopCount),
        }
    }

    /// Where every slice counts once or never, and the ones counted are one run that
    /// starts or ends K: its slices `[t0, t1)`. A prefix is a K loop that stopped
    /// early; a suffix, an accumulator zeroed at a step (an MMA issued with
    /// accumulate off) that kept only the products after it. Either is the
    /// accumulate stage's: a tile read wrong pairs or repeats slices, it does not
    /// cut K into one stretch.
    pub fn stretch(&self) -> Option<(usize, usize)> {
        let counts = self.counts.as_ref().filter(|_| self.unjudged.is_none())?;
        if counts.iter().any(|&c| c > 1) {
            return None;
        }
        let t0 = counts.iter().position(|&c| c == 1)?;
        let t1 = counts.iter().rposition(|&c| c == 1)? + 1;
        let run = counts[t0..t1].iter().all(|&c| c == 1);
        let edge = t0 == 0 || t1 == counts.len();
        (run && edge && (t0, t1) != (0, counts.len())).then_some((t0, t1))
    }

    /// One line for the evidence.
    pub fn describe(&self) -> String {
        if let Some(why) = &self.unjudged {
            return format!("the accumulator as sums over K slices: not judged ({why})");
        }
        let Some(counts) = &self.counts else {
            if self.per_cell_multiples {
                return format!(
                    "the accumulator as sums over K slices: no counts shared by every cell reproduce it ({} of {} cells off), but each cell is a whole multiple of its own product over K: matched pairs, some fragments accumulated more or fewer times than others",
                    self.off, self.cells
                );
            }
            return format!(
                "the accumulator as sums over K slices: no whole count per slice of {} k reproduces it ({} of {} cells off with the nearest counts): A's values met B's of another k or row",
                UNIT, self.off, self.cells
            );
        };
        let spans = |pick: &dyn Fn(u32) -> bool| -> Option<String> {
            let mut r = Ranges::default();
            for (t, &c) in counts.iter().enumerate() {
                if pick(c) {
                    r.insert(t as i64);
                }
            }
            (!r.is_empty()).then(|| r.scaled(UNIT as i64))
        };
        let mut parts = Vec::new();
        if let Some(s) = spans(&|c| c == 0) {
            parts.push(format!("k {s} never accumulated"));
        }
        if let Some(s) = spans(&|c| c > 1) {
            let most = counts.iter().max().copied().unwrap_or(0);
            parts.push(format!(
                "k {s} accumulated more than once (up to {most} times)"
            ));
        }
        if parts.is_empty() {
            parts.push("every slice once".to_owned());
        }
        format!(
            "the accumulator as sums over K slices ({} cells, {} slices of {} k): each cell is a sum of A's and B's products over matching k, {}",
            self.cells,
            self.slices,
            UNIT,
            parts.join("; ")
        )
    }
}

/// Final accumulator values (K tile -1) with their cells moved by `shift` into the
/// problem's frame, less the cells at or past its edge `(m, n)` (padding rows of a tile
/// larger than the problem); `Err` when a value has no coordinates or two share a cell.
pub(crate) fn cells(
    trace: &Trace,
    shift: (i64, i64),
    edge: (usize, usize),
) -> Result<Vec<(usize, usize, f64)>, String> {
    let mut seen: HashSet<(i64, i64)> = HashSet::new();
    let mut out = Vec::new();
    for (_, v) in final_values(trace) {
        if v.m < 0 || v.n < 0 {
            return Err("accumulator values without coordinates".to_owned());
        }
        let cell = (i64::from(v.m) + shift.0, i64::from(v.n) + shift.1);
        if cell.0 < 0 || cell.1 < 0 {
            return Err("a cell outside the problem".to_owned());
        }
        if !seen.insert(cell) {
            return Err("two accumulator values share a cell".to_owned());
        }
        if cell.0 >= edge.0 as i64 || cell.1 >= edge.1 as i64 {
            continue;
        }
        out.push((cell.0 as usize, cell.1 as usize, f64::from(v.value)));
    }
    Ok(out)
}

/// The products of cell (m, n) per K slice.
fn slice_products(a: &Matrix, b: &Matrix, m: usize, n: usize, slices: usize) -> Vec<f64> {
    let (ar, br) = (a.row(m), b.row(n));
    (0..slices)
        .map(|t| {
            let end = ((t + 1) * UNIT).min(a.cols);
            (t * UNIT..end)
                .map(|k| f64::from(ar[k]) * f64::from(br[k]))
                .sum()
        })
        .collect()
}

/// Solves `g x = h` for a symmetric positive definite `g` (`n × n`, row-major) by
/// Cholesky; None when `g` is not positive definite enough to trust.
fn solve_spd(mut g: Vec<f64>, mut h: Vec<f64>, n: usize) -> Option<Vec<f64>> {
    for j in 0..n {
        let mut d = g[j * n + j];
        for p in 0..j {
            d -= g[j * n + p] * g[j * n + p];
        }
        if d.is_nan() || d <= 1e-9 * g[j * n + j].abs().max(1.0) {
            return None;
        }
        let d = d.sqrt();
        g[j * n + j] = d;
        for i in j + 1..n {
            let mut s = g[i * n + j];
            for p in 0..j {
                s -= g[i * n + p] * g[j * n + p];
            }
            g[i * n + j] = s / d;
        }
    }
    for i in 0..n {
        let mut s = h[i];
        for p in 0..i {
            s -= g[i * n + p] * h[p];
        }
        h[i] = s / g[i * n + i];
    }
    for i in (0..n).rev() {
        let mut s = h[i];
        for p in i + 1..n {
            s -= g[p * n + i] * h[p];
        }
        h[i] = s / g[i * n + i];
    }
    Some(h)
}

/// Holds the final accumulator of `trace`, its cells moved by `shift` into the
/// problem's frame, to sums of matched K-slice products of `a` (M × K) and `b`
/// (N × K) with whole counts. `product` is `a·bᵀ` as the kernel's accumulator holds
/// it: only an exact one is judged.
pub fn check_slice_counts(
    trace: &Trace,
    a: &Matrix,
    b: &Matrix,
    product: &Product,
    shift: (i64, i64),
) -> SliceCounts {
    let slices = a.cols.div_ceil(UNIT);
    let mut out = SliceCounts {
        slices,
        ..SliceCounts::default()
    };
    if !product.is_exact() {
        out.unjudged = Some("the product is not exact in the accumulator".to_owned());
        return out;
    }
    let cells = match cells(trace, shift, (a.rows, b.rows)) {
        Ok(c) => c,
        Err(why) => {
            out.unjudged = Some(why);
            return out;
        }
    };
    out.cells = cells.len();
    // Twice as many cells as unknowns, at least, to solve with.
    if slices == 0 || cells.len() < 2 * slices {
        out.unjudged = Some(format!("{} cells for {} slices of K", cells.len(), slices));
        return out;
    }
    // Solve on an even spread of at most four cells per slice; check every cell.
    let stride = (cells.len() / (4 * slices)).max(1);
    let mut g = vec![0.0; slices * slices];
    let mut h = vec![0.0; slices];
    for &(m, n, y) in cells.iter().step_by(stride) {
        let p = slice_products(a, b, m, n, slices);
        for i in 0..slices {
            if p[i] == 0.0 {
                continue;
            }
            h[i] += p[i] * y;
            for j in 0..=i {
                g[i * slices + j] += p[i] * p[j];
            }
        }
    }
    for i in 0..slices {
        for j in 0..i {
            g[j * slices + i] = g[i * slices + j];
        }
    }
    let Some(x) = solve_spd(g, h, slices) else {
        out.unjudged = Some("the slices' products are not independent on these cells".to_owned());
        return out;
    };
    // The nearest whole counts, held to every cell exactly.
    let whole: Vec<f64> = x.iter().map(|c| c.round().clamp(0.0, MOST)).collect();
    out.off = cells
        .iter()
        .filter(|&&(m, n, y)| {
            let p = slice_products(a, b, m, n, slices);
            p.iter().zip(&whole).map(|(p, c)| p * c).sum::<f64>() != y
        })
        .count();
    if out.off == 0 {
        out.counts = Some(whole.iter().map(|&c| c as u32).collect());
    } else {
        out.per_cell_multiples = cells.iter().all(|&(m, n, y)| {
            let p: f64 = slice_products(a, b, m, n, slices).iter().sum();
            if p == 0.0 {
                return y == 0.0;
            }
            let c = (y / p).round();
            (0.0..=MOST).contains(&c) && c * p == y
        });
    }
    out
}
