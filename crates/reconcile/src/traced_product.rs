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
    /// The accumulator had no coordinates and was matched as a multiset: sorted,
    /// value for value, against the product of every traced A row and B row.
    pub multiset: bool,
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
        if self.multiset {
            return format!(
                "the traced operands' product: the accumulator has no coordinates; sorted, {} of its {} values equal the product of every traced A row and B row over the K the operands show",
                self.matched, self.cells
            );
        }
        format!(
            "the traced operands' product: {} of {} accumulator values checked over the K the operands show{frame}, {} equal to it",
            self.checked, self.cells, self.matched
        )
    }
}

fn format_shift((dm, dn): (i64, i64)) -> String {
    format!("moved by ({dm}, {dn})")
}

/// Whether two recorded values are the same: the same bits, or both zero (a +0 and a
/// -0 are one value to a product).
fn same_value(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x == 0.0 && y == 0.0)
}

/// The operand `kind`'s values keyed by (row, (K tile, k)), less padding rows; `Err`
/// when two values at one key disagree.
fn traced(trace: &Trace, kind: Kind) -> Result<Traced, String> {
    let mut out = Traced::new();
    for v in &trace.tiles {
        let Some(r) = trace.records.get(v.record as usize) else {
            continue;
        };
        if r.kind() != Some(kind) {
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
                if !same_value(*e.get(), v.value) {
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

/// The final accumulator values (K tile -1, rows below the row bound).
enum Finals {
    /// By (m, n), where every value has coordinates.
    Cells(HashMap<(i32, i32), f32>),
    /// In raw register order, where none has.
    Values(Vec<f32>),
}

/// The final accumulator values; `Err` when a cell holds two different values or
/// only some values have coordinates.
fn finals(trace: &Trace) -> Result<Finals, String> {
    let mut cells: HashMap<(i32, i32), f32> = HashMap::new();
    let mut raw: Vec<f32> = Vec::new();
    for v in &trace.tiles {
        let Some(r) = trace.records.get(v.record as usize) else {
            continue;
        };
        if r.kind() != Some(Kind::Accumulator) || r.k_tile >= 0 || v.m >= r.row_bound {
            continue;
        }
        if v.m < 0 || v.n < 0 {
            raw.push(v.value);
            continue;
        }
        let old = cells.insert((v.m, v.n), v.value);
        if old.is_some_and(|o| !same_value(o, v.value)) {
            return Err(format!(
                "accumulator cell ({}, {}) holds more than one value (accumulator sets the probe could not tell apart)",
                v.m, v.n
            ));
        }
    }
    match (cells.is_empty(), raw.is_empty()) {
        (false, false) => Err("only some accumulator values have coordinates".to_owned()),
        (true, _) => Ok(Finals::Values(raw)),
        (false, true) => Ok(Finals::Cells(cells)),
    }
}

/// `Σ a(key) · b(key)` over the keys both rows hold, with the bound `Σ |a · b|` and
/// whether every value is an integer; `None` when the rows' keys differ.
fn dot(a: &BTreeMap<(i32, i32), f32>, b: &BTreeMap<(i32, i32), f32>) -> Option<(f64, f64, bool)> {
    if a.len() != b.len() || !a.keys().eq(b.keys()) {
        return None;
    }
    Some(a.values().zip(b.values()).fold(
        (0.0_f64, 0.0_f64, true),
        |(sum, bound, integral), (x, y)| {
            let p = f64::from(*x) * f64::from(*y);
            (
                sum + p,
                bound + p.abs(),
                integral && x.fract() == 0.0 && y.fract() == 0.0,
            )
        },
    ))
}

/// Below this bound an integer dot product's every fp32 partial sum is exact.
const EXACT_BOUND: f64 = 16_777_216.0;

/// Whether fp32 accumulator value `v` can be a K-term dot product `want` of bound
/// `bound`: equal when every partial sum is exact, within the fp32 accumulation bound
/// otherwise (the rule of [`crate::Product::matches`]).
fn agrees(v: f32, want: f64, bound: f64, integral: bool, terms: usize) -> bool {
    if integral && bound < EXACT_BOUND {
        f64::from(v) == want
    } else {
        (f64::from(v) - want).abs() <= terms as f64 * 2f64.powi(-24) * bound
    }
}

/// The operand values a full trace shows at their coordinates, read from its tiles
/// once for every check below; an operand whose values contradict each other holds why.
pub struct TracedOperands {
    a: Result<Traced, String>,
    b: Result<Traced, String>,
}

impl TracedOperands {
    /// Operands A and B of `trace`'s full-tile values.
    pub fn of(trace: &Trace) -> TracedOperands {
        TracedOperands {
            a: traced(trace, Kind::OperandA),
            b: traced(trace, Kind::OperandB),
        }
    }

    /// Checks `trace`'s final accumulator against the product of these operand values.
    ///
    /// - With coordinates, cell by cell. The operands' rows are taken in the
    ///   accumulator's frame, or else moved so their smallest rows meet the
    ///   accumulator's smallest (m, n): a probe may record operands local to a tile and
    ///   the accumulator global, or the other way round.
    /// - Without (a register fragment the probe could give no coordinates), as
    ///   multisets: the accumulator's values must be exactly the values of the traced
    ///   rows' product, every traced A row by every traced B row. Only an exact product
    ///   (integer values, every partial sum exact) is matched this way. Row order does
    ///   not show in a multiset, but which k meets which does, and that is what an
    ///   operand's runs along K are judged by.
    pub fn product(&self, trace: &Trace) -> TracedProduct {
        match self.both() {
            Ok((a, b)) => against(a, b, trace),
            Err(why) => unjudged(why),
        }
    }

    /// Both operands' values, or why one cannot be used.
    fn both(&self) -> Result<(&Traced, &Traced), String> {
        let (a, b) = match (&self.a, &self.b) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(why), _) | (_, Err(why)) => return Err(why.clone()),
        };
        if a.is_empty() || b.is_empty() {
            return Err("an operand has no values with coordinates".to_owned());
        }
        Ok((a, b))
    }

    /// Checks `trace`'s final accumulator against the product of these operands with
    /// their roles exchanged: cell (m, n) against row `n0 + (m − m0)` of B times row
    /// `m0 + (n − n0)` of A, each operand's rows moved to the accumulator's as
    /// [`TracedOperands::product`] moves them. Where this explains the accumulator and
    /// the plain product does not, the MMA was given B's tile in A's place and A's in
    /// B's: it multiplied the right values, fed the wrong way round. A multiset reads
    /// the same either way round (`a · b = b · a`), so only an accumulator with
    /// coordinates is judged.
    pub fn swapped_product(&self, trace: &Trace) -> TracedProduct {
        let (a, b) = match self.both() {
            Ok(both) => both,
            Err(why) => return unjudged(why),
        };
        match finals(trace) {
            Ok(Finals::Cells(cells)) if !cells.is_empty() => by_cells(b, a, &cells),
            Ok(Finals::Cells(_)) => unjudged("no accumulator after the mainloop".to_owned()),
            Ok(Finals::Values(_)) => unjudged(
                "the accumulator has no coordinates, and a product's multiset does not show which operand was which".to_owned(),
            ),
            Err(why) => unjudged(why),
        }
    }

    /// Whether every traced value of operand `kind` is the input's element at `k · rows +
    /// row` of `matrix` (stored `[rows, K]`): the operand read as if stored `[K, rows]`,
    /// its two dimensions swapped (a row-major layout tag on a column-major operand, or
    /// the other way round). Each K tile's k are taken relative to its smallest, and the
    /// tile must match at some offset along K, each tile at its own: so whether a probe's
    /// k is global or local to its K tile, and whatever index a peeled first tile has,
    /// does not matter. False when the operand has no values with coordinates.
    pub fn read_swapped(&self, kind: Kind, matrix: &Matrix) -> bool {
        let operand = if kind == Kind::OperandB {
            &self.b
        } else {
            &self.a
        };
        let Ok(values) = operand else {
            return false;
        };
        // K tile -> (row, k relative to the tile's smallest k, value).
        let mut tiles: BTreeMap<i32, Vec<(i64, i64, f32)>> = BTreeMap::new();
        for (&row, ks) in values {
            for (&(t, k), &v) in ks {
                tiles
                    .entry(t)
                    .or_default()
                    .push((i64::from(row), i64::from(k), v));
            }
        }
        if tiles.is_empty() {
            return false;
        }
        let rows = matrix.rows as i64;
        let depth = matrix.cols as i64;
        let at = |row: i64, k: i64| {
            usize::try_from(k * rows + row)
                .ok()
                .filter(|_| (0..rows).contains(&row) && (0..depth).contains(&k))
                .and_then(|i| matrix.data.get(i))
        };
        let mut offsets = BTreeSet::new();
        for tile in tiles.values_mut() {
            let low = tile.iter().map(|e| e.1).min().unwrap_or(0);
            for e in tile.iter_mut() {
                e.1 -= low;
            }
            let span = tile.iter().map(|e| e.1).max().unwrap_or(0);
            let fits = |o: i64| {
                tile.iter()
                    .all(|&(row, k, v)| at(row, o + k).is_some_and(|&x| same_value(x, v)))
            };
            match (0..depth - span).find(|&o| fits(o)) {
                Some(o) if offsets.insert(o) => {}
                _ => return false,
            }
        }
        true
    }
}

/// A product that judged nothing, and why.
fn unjudged(why: String) -> TracedProduct {
    TracedProduct {
        unjudged: Some(why),
        ..TracedProduct::default()
    }
}

/// `trace`'s final accumulator against the product of rows `a` and `b`: cell by cell
/// where it has coordinates ([`by_cells`]), as a multiset where it has none
/// ([`by_multiset`]).
fn against(a: &Traced, b: &Traced, trace: &Trace) -> TracedProduct {
    match finals(trace) {
        Ok(Finals::Cells(cells)) if !cells.is_empty() => by_cells(a, b, &cells),
        Ok(Finals::Values(values)) if !values.is_empty() => by_multiset(a, b, values),
        Ok(_) => TracedProduct {
            unjudged: Some("no accumulator after the mainloop".to_owned()),
            ..TracedProduct::default()
        },
        Err(why) => TracedProduct {
            unjudged: Some(why),
            ..TracedProduct::default()
        },
    }
}

fn by_cells(a: &Traced, b: &Traced, cells: &HashMap<(i32, i32), f32>) -> TracedProduct {
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
    let moved = (first_key(a) - first(&rows_m), first_key(b) - first(&rows_n));
    let shift = if covered(0, 0) {
        (0, 0)
    } else if covered(moved.0, moved.1) {
        moved
    } else {
        return TracedProduct {
            unjudged: Some(
                "the operands' rows do not cover the accumulator's, in its frame or moved to it"
                    .to_owned(),
            ),
            ..TracedProduct::default()
        };
    };
    let mut out = TracedProduct {
        cells: cells.len(),
        shift,
        ..TracedProduct::default()
    };
    for (&(m, n), &v) in cells {
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

fn by_multiset(a: &Traced, b: &Traced, values: Vec<f32>) -> TracedProduct {
    let cells = a.len() * b.len();
    let unjudged = |why: String| TracedProduct {
        cells: values.len(),
        unjudged: Some(why),
        multiset: true,
        ..TracedProduct::default()
    };
    if values.len() != cells {
        return unjudged(format!(
            "the accumulator has no coordinates and {} values, where the rows' product has {cells}",
            values.len()
        ));
    }
    let mut want = Vec::with_capacity(cells);
    for row_a in a.values() {
        for row_b in b.values() {
            match dot(row_a, row_b) {
                Some((v, bound, true)) if bound < EXACT_BOUND => want.push(v),
                Some(_) => {
                    return unjudged(
                        "the accumulator has no coordinates and the rows' product is not exact in fp32, so it cannot be matched as a multiset".to_owned(),
                    );
                }
                None => {
                    return unjudged("the operand rows cover different K".to_owned());
                }
            }
        }
    }
    multiset_match(values, want)
}

/// Accumulator `values` (no coordinates) against the exact products `want`, as
/// multisets: both sorted, value for value.
fn multiset_match(mut values: Vec<f32>, mut want: Vec<f64>) -> TracedProduct {
    want.sort_by(f64::total_cmp);
    values.sort_by(f32::total_cmp);
    let matched = values
        .iter()
        .zip(&want)
        .filter(|(v, w)| f64::from(**v) == **w)
        .count();
    TracedProduct {
        cells: want.len(),
        checked: want.len(),
        matched,
        multiset: true,
        ..TracedProduct::default()
    }
}

/// The k an MMA reads at logical k of row `row` of a K-major tile (rows of 64 16-bit
/// values, one 128-byte line each) whose swizzle is not the one it was written with,
/// none and 128-byte: chunk j (8 values) of each 64-wide K tile comes from chunk
/// j ^ (row % 8). Its own inverse.
pub fn swizzle_swapped_k(row: usize, k: usize) -> usize {
    k / 64 * 64 + ((k % 64 / 8) ^ (row % 8)) * 8 + k % 8
}

/// The final accumulator against the product of the inputs read the way an MMA reads a
/// K-major tile (rows of 64 16-bit values, one 128-byte line each) written with one
/// swizzle and read with another, none and 128-byte: chunk j (8 values) of row r comes
/// from chunk j ^ (r % 8) of its line, in every 64-wide K tile. (The permutation is its
/// own inverse, so written unswizzled and read swizzled, or the other way round, give
/// the same reading.) `rows_a` and `rows_b` are the input rows the traced CTA consumed
/// (m of A, n of B, as the operands' provenance located them). They are held to the
/// accumulator as [`TracedOperands::product`] holds the traced operands: at its
/// coordinates where it has them (in the inputs' frame, or moved to it), else as a
/// multiset, and then only where the product is exact in fp32.
pub fn check_swizzle_mismatch(
    trace: &Trace,
    a: &Matrix,
    b: &Matrix,
    rows_a: &[usize],
    rows_b: &[usize],
) -> TracedProduct {
    let unjudged = |why: &str| TracedProduct {
        unjudged: Some(why.to_owned()),
        ..TracedProduct::default()
    };
    if a.cols != b.cols || a.cols % 64 != 0 {
        return unjudged("K is not whole 64-wide tiles of one 128-byte line a row");
    }
    if rows_a.iter().any(|&r| r >= a.rows) || rows_b.iter().any(|&r| r >= b.rows) {
        return unjudged("a consumed row is past the input");
    }
    // Each consumed row as the MMA reads it, keyed like a traced operand (one K tile).
    let read = |m: &Matrix, rows: &[usize]| -> Option<Traced> {
        rows.iter()
            .map(|&r| {
                let row = m.row(r);
                let ks = (0..m.cols)
                    .map(|k| Some(((0, i32::try_from(k).ok()?), row[swizzle_swapped_k(r, k)])))
                    .collect::<Option<BTreeMap<_, _>>>()?;
                Some((i32::try_from(r).ok()?, ks))
            })
            .collect()
    };
    let (Some(read_a), Some(read_b)) = (read(a, rows_a), read(b, rows_b)) else {
        return unjudged("a consumed row or k is past what a coordinate holds");
    };
    if read_a.is_empty() || read_b.is_empty() {
        return unjudged("no consumed rows");
    }
    against(&read_a, &read_b, trace)
}
