//! The accumulator against the product of the operand values the trace itself shows.
//!
//! [`crate::locate_accumulators`] holds the accumulator to the product of the
//! *inputs*. When an operand's values are no slice of the input, that cannot say
//! whether the kernel read the operand in another layout or the probe put wrong
//! coordinates on what it read. The product of the *traced* operands can: if every
//! final accumulator value is `Σ A_t(m, k) · B_t(n, k)` over the values the operand
//! probes recorded at those coordinates, the MMA multiplied exactly what the probes
//! show, where they show it, so the probes' coordinates are the MMA's.
//!
//! Keys are (row, K tile, k) with the record's K tile, so the check holds whether a
//! probe's k is global or local to its K tile. Values recorded more than once at one
//! key (several warps reading one shared tile) must agree; where they do not, or where
//! an accumulator cell has more than one value (accumulator sets the probe could not
//! tell apart), nothing is judged.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kwb_runtime::{Kind, Trace};

use crate::matrix::Matrix;

/// An operand as traced: row (m of A, n of B) → (K tile, k) → value.
type Traced = BTreeMap<i32, BTreeMap<(i32, i32), f32>>;

/// The final accumulator checked against the product of the traced operands.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TracedProduct {
    /// Accumulator values after the mainloop (one per cell).
    pub cells: usize,
    /// Cells whose row of A and row of B were both traced over the same K keys.
    pub checked: usize,
    /// Checked cells equal to the traced operands' product (exactly when every
    /// partial sum is exact in fp32, within the fp32 accumulation bound otherwise).
    pub matched: usize,
    /// The shift from the accumulator's (m, n) to the operands' rows: (0, 0) when
    /// both are in one frame.
    pub shift: (i64, i64),
    /// Why nothing was judged, when nothing was.
    pub unjudged: Option<String>,
}

impl TracedProduct {
    /// Every accumulator value is the product of the traced operands at its
    /// coordinates: the MMA consumed what the operand probes show, where they show
    /// it.
    pub fn explains(&self) -> bool {
        self.unjudged.is_none()
            && self.cells > 0
            && self.checked == self.cells
            && self.matched == self.cells
    }

    /// One line for the evidence.
    pub fn describe(&self) -> String {
        if let Some(why) = &self.unjudged {
            return format!("the traced operands' product: not judged ({why})");
        }
        let frame = if self.shift == (0, 0) {
            String::new()
        } else {
            format!(
                ", with the operands' rows {} from the accumulator's coordinates",
                format_shift(self.shift)
            )
        };
        format!(
            "the traced operands' product: {} of {} accumulator values checked over the K the operands show{frame}, {} equal to it",
            self.checked, self.cells, self.matched
        )
    }
}

fn format_shift((dm, dn): (i64, i64)) -> String {
    format!("moved by ({dm}, {dn})")
}

/// The operand `kind`'s values keyed by (row, (K tile, k)), less padding rows; `Err`
/// when two values at one key disagree.
fn traced(trace: &Trace, kind: Kind) -> Result<Traced, String> {
    let mut out = Traced::new();
    for v in &trace.tiles {
        let Some(r) = trace.records.get(v.record as usize) else {
            continue;
        };
        if r.kind() != Some(kind) || r.k_tile < 0 {
            continue;
        }
        let row = if kind == Kind::OperandB { v.n } else { v.m };
        if row < 0 || v.k < 0 || row >= r.row_bound {
            continue;
        }
        let slot = out.entry(row).or_default().entry((r.k_tile, v.k));
        match slot {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(v.value);
            }
            std::collections::btree_map::Entry::Occupied(e) => {
                if e.get().to_bits() != v.value.to_bits() && !(*e.get() == 0.0 && v.value == 0.0) {
                    return Err(format!(
                        "operand {} holds two values at row {row}, K tile {}, k {}",
                        if kind == Kind::OperandB { 'B' } else { 'A' },
                        r.k_tile,
                        v.k
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// The final accumulator values (K tile -1, rows below the row bound) by (m, n);
/// `Err` when a cell holds two different values.
fn final_cells(trace: &Trace) -> Result<HashMap<(i32, i32), f32>, String> {
    let mut out: HashMap<(i32, i32), f32> = HashMap::new();
    for v in &trace.tiles {
        let Some(r) = trace.records.get(v.record as usize) else {
            continue;
        };
        if r.kind() != Some(Kind::Accumulator) || r.k_tile >= 0 || v.m >= r.row_bound {
            continue;
        }
        if v.m < 0 || v.n < 0 {
            return Err("the accumulator has no coordinates".to_owned());
        }
        let old = out.insert((v.m, v.n), v.value);
        if old.is_some_and(|o| o.to_bits() != v.value.to_bits()) {
            return Err(format!(
                "accumulator cell ({}, {}) holds more than one value (accumulator sets the probe could not tell apart)",
                v.m, v.n
            ));
        }
    }
    Ok(out)
}

/// `Σ a(key) · b(key)` over the keys both rows hold, with the bound `Σ |a · b|` and
/// whether every value is an integer; `None` when the rows' keys differ.
fn dot(a: &BTreeMap<(i32, i32), f32>, b: &BTreeMap<(i32, i32), f32>) -> Option<(f64, f64, bool)> {
    if a.len() != b.len() || !a.keys().eq(b.keys()) {
        return None;
    }
    let (mut sum, mut bound, mut integral) = (0.0_f64, 0.0_f64, true);
    for (x, y) in a.values().zip(b.values()) {
        let p = f64::from(*x) * f64::from(*y);
        sum += p;
        bound += p.abs();
        integral &= x.fract() == 0.0 && y.fract() == 0.0;
    }
    Some((sum, bound, integral))
}

/// Whether fp32 accumulator value `v` can be a K-term dot product `want` of bound
/// `bound`: equal when every partial sum is exact, within the fp32 accumulation bound
/// otherwise (the rule of [`crate::Product::matches`]).
fn agrees(v: f32, want: f64, bound: f64, integral: bool, terms: usize) -> bool {
    if integral && bound < 16_777_216.0 {
        f64::from(v) == want
    } else {
        (f64::from(v) - want).abs() <= terms as f64 * 2f64.powi(-24) * bound
    }
}

/// Checks the final accumulator against the product of the operand values the trace
/// shows. The operands' rows are taken in the accumulator's frame, or else moved so
/// their smallest rows meet the accumulator's smallest (m, n): a probe may record
/// operands local to a tile and the accumulator global, or the other way round.
pub fn check_traced_product(trace: &Trace) -> TracedProduct {
    let unjudged = |why: String| TracedProduct {
        unjudged: Some(why),
        ..TracedProduct::default()
    };
    let (a, b, cells) = match (
        traced(trace, Kind::OperandA),
        traced(trace, Kind::OperandB),
        final_cells(trace),
    ) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => return unjudged(why),
    };
    if a.is_empty() || b.is_empty() {
        return unjudged("an operand has no values with coordinates".to_owned());
    }
    if cells.is_empty() {
        return unjudged("no accumulator after the mainloop".to_owned());
    }
    let rows_m: BTreeSet<i32> = cells.keys().map(|c| c.0).collect();
    let rows_n: BTreeSet<i32> = cells.keys().map(|c| c.1).collect();
    let covered = |dm: i64, dn: i64| {
        rows_m
            .iter()
            .all(|m| a.contains_key(&((i64::from(*m) + dm) as i32)))
            && rows_n
                .iter()
                .all(|n| b.contains_key(&((i64::from(*n) + dn) as i32)))
    };
    let first = |s: &BTreeSet<i32>| i64::from(*s.first().unwrap_or(&0));
    let first_key = |t: &Traced| i64::from(*t.keys().next().unwrap_or(&0));
    let moved = (
        first_key(&a) - first(&rows_m),
        first_key(&b) - first(&rows_n),
    );
    let shift = if covered(0, 0) {
        (0, 0)
    } else if covered(moved.0, moved.1) {
        moved
    } else {
        return unjudged(
            "the operands' rows do not cover the accumulator's, in its frame or moved to it"
                .to_owned(),
        );
    };
    let mut out = TracedProduct {
        cells: cells.len(),
        shift,
        ..TracedProduct::default()
    };
    for (&(m, n), &v) in &cells {
        let row_a = &a[&((i64::from(m) + shift.0) as i32)];
        let row_b = &b[&((i64::from(n) + shift.1) as i32)];
        if let Some((want, bound, integral)) = dot(row_a, row_b) {
            out.checked += 1;
            if agrees(v, want, bound, integral, row_a.len()) {
                out.matched += 1;
            }
        }
    }
    out
}

/// Whether every traced value of operand `kind` is the input's element at `k · rows +
/// row` of `matrix` (stored `[rows, K]`): the operand read as if stored `[K, rows]`,
/// its two dimensions swapped (a row-major layout tag on a column-major operand, or
/// the other way round). A probe's k is taken as global where a later K tile's k
/// passes the first tile's width, else as local to its K tile. False when the operand
/// has no values with coordinates.
pub fn read_swapped(trace: &Trace, kind: Kind, matrix: &Matrix) -> bool {
    let Ok(values) = traced(trace, kind) else {
        return false;
    };
    let keys = || values.values().flat_map(|ks| ks.keys());
    let width = keys()
        .filter(|(t, _)| *t == 0)
        .map(|(_, k)| i64::from(*k) + 1)
        .max();
    let Some(width) = width else {
        return false;
    };
    let global = keys().any(|(t, k)| *t > 0 && i64::from(*k) >= width);
    let rows = matrix.rows as i64;
    values.iter().all(|(&row, ks)| {
        ks.iter().all(|(&(t, k), &v)| {
            let k = if global {
                i64::from(k)
            } else {
                i64::from(t) * width + i64::from(k)
            };
            let at = k * rows + i64::from(row);
            usize::try_from(at)
                .ok()
                .and_then(|i| matrix.data.get(i))
                .is_some_and(|x| x.to_bits() == v.to_bits() || (*x == 0.0 && v == 0.0))
        })
    }) && !values.is_empty()
}
