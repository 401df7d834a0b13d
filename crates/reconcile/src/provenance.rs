//! Where each traced operand value came from: runs of [`UNIT`] values along K looked
//! up by content in the operand matrix, and per warp the K slices each row met.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use kwb_runtime::{Kind, Trace};

use crate::matrix::Matrix;
use crate::ranges::Ranges;

/// Values per looked-up run: one 16-byte chunk of 16-bit elements, the unit TMA,
/// cp.async and ldmatrix move and every shared-memory swizzle permutes.
pub const UNIT: usize = 8;

/// A run of [`UNIT`] traced values believed consecutive along K within one row.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub record: u32,
    pub warp: u32,
    pub values: [f32; UNIT],
    /// The traced (row, first k) when the probe knew its coordinates: row is m for
    /// operand A, n for operand B, both possibly local to a warp or a tile.
    pub coords: Option<(i32, i32)>,
    /// The element index of the first value: the raw position in a shared tile, or
    /// the fragment element a [`Cut::Steps`] unit follows.
    pub element: u32,
}

/// How a kind's values were cut into runs along K.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cut {
    /// By each value's (row, k) coordinates: register fragments with coordinates.
    Coordinates,
    /// Aligned 16-byte chunks in element order: a shared tile read as it lies.
    #[default]
    RawOrder,
    /// One fragment element followed across the records of one warp, site and K
    /// tile, in the order they were written: a fragment probed once a k step (a
    /// SIMT kernel's `a_frag[i]`, one k a record) holds its row's consecutive k there.
    Steps,
}

impl Cut {
    /// Each unit's K order is the kernel's own (coordinates, or steps in issue
    /// order), not a position in memory.
    pub fn ordered(self) -> bool {
        self != Cut::RawOrder
    }

    /// How the values were read, for the evidence.
    pub fn describe(self) -> &'static str {
        match self {
            Cut::Coordinates => "register fragments with coordinates",
            Cut::RawOrder => "shared tile in raw order",
            Cut::Steps => "register fragments followed across their k steps",
        }
    }
}

/// The units of a kind, with what was left out or noticed on the way.
#[derive(Debug, Clone, Default)]
pub struct Units {
    pub units: Vec<Unit>,
    /// How they were cut.
    pub cut: Cut,
    /// Runs of padding rows (at or past the record's row bound), not kept.
    pub padding: usize,
    /// Values that shared their (row, k) with another value of the same record: the
    /// probe's coordinates could not tell two MMA tiles (or two accumulator sets)
    /// apart. They are told apart by order (the n-th value at a coordinate joins the
    /// n-th layer), which keeps each run within one tile.
    pub collided: usize,
}

/// Cuts the full-tile values of `kind`'s records into [`Unit`]s: by row and k where
/// every value of a record has coordinates (aligned runs of 8 consecutive k), by
/// element index otherwise (aligned 16-byte chunks of a shared tile in raw order).
/// Runs of rows at or past the record's row bound (padding rows) are left out.
pub fn units_of(trace: &Trace, kind: Kind) -> Units {
    let mut by_record: BTreeMap<u32, Vec<&kwb_runtime::TileValue>> = BTreeMap::new();
    for v in &trace.tiles {
        let Some(record) = trace.records.get(v.record as usize) else {
            continue;
        };
        if record.kind() == Some(kind) {
            by_record.entry(v.record).or_default().push(v);
        }
    }
    let row_of = |v: &kwb_runtime::TileValue| if kind == Kind::OperandB { v.n } else { v.m };
    let mut out = Units::default();
    for (record_index, mut values) in by_record {
        let record = &trace.records[record_index as usize];
        let unit = |values: [f32; UNIT], coords, element| Unit {
            record: record_index,
            warp: record.warp,
            values,
            coords,
            element,
        };
        if values.iter().all(|v| row_of(v) >= 0 && v.k >= 0) {
            values.sort_by_key(|v| v.element);
            // (row, layer) -> k -> (value, element); layer = earlier values at (row, k).
            let mut layers: HashMap<(i32, i32), u32> = HashMap::new();
            let mut rows: BTreeMap<(i32, u32), BTreeMap<i32, (f32, u32)>> = BTreeMap::new();
            for v in &values {
                let layer = layers.entry((row_of(v), v.k)).or_insert(0);
                if *layer > 0 {
                    out.collided += 1;
                }
                rows.entry((row_of(v), *layer))
                    .or_default()
                    .insert(v.k, (v.value, v.element));
                *layer += 1;
            }
            for ((row, _), ks) in rows {
                for (&k, &(_, element)) in ks.iter().filter(|(k, _)| *k % UNIT as i32 == 0) {
                    let Some(run) = run_of(|i| ks.get(&(k + i as i32)).map(|x| x.0)) else {
                        continue;
                    };
                    if row >= record.row_bound {
                        out.padding += 1;
                        continue;
                    }
                    out.units.push(unit(run, Some((row, k)), element));
                }
            }
        } else {
            let by_element: BTreeMap<u32, f32> =
                values.iter().map(|v| (v.element, v.value)).collect();
            for &e in by_element.keys().filter(|e| **e as usize % UNIT == 0) {
                if let Some(run) = run_of(|i| by_element.get(&(e + i as u32)).copied()) {
                    out.units.push(unit(run, None, e));
                }
            }
        }
    }
    if !out.units.is_empty() && out.units.iter().all(|u| u.coords.is_some()) {
        out.cut = Cut::Coordinates;
    }
    out
}

/// Cuts `kind`'s values into [`Cut::Steps`] units: a fragment probed once a k step
/// holds one k of each of its rows a record, so its runs along K lie across records.
/// Per warp, site and K tile, the records (in the order the warp wrote them) are
/// taken [`UNIT`] at a time, steps 0..8, 8..16, …, and each element's values across
/// one such chunk are a unit, keyed by the chunk's first record; elements whose runs
/// are equal within a chunk (lanes holding the same row) give one unit. Only groups whose
/// records hold values without coordinates, all the same elements, are cut; steps
/// past the last whole chunk are left out.
///
/// Invariant: a unit holds one element's values from [`UNIT`] consecutive records of
/// one warp, site and K tile, in record order, and no two units of a chunk are equal.
pub fn step_units_of(trace: &Trace, kind: Kind) -> Units {
    let mut per_record: BTreeMap<u32, Vec<(u32, f32)>> = BTreeMap::new();
    for v in &trace.tiles {
        let Some(record) = trace.records.get(v.record as usize) else {
            continue;
        };
        if record.kind() != Some(kind) {
            continue;
        }
        if v.k >= 0 && (v.m >= 0 || v.n >= 0) {
            // Values with coordinates are cut by them (`units_of`).
            return Units::default();
        }
        per_record
            .entry(v.record)
            .or_default()
            .push((v.element, v.value));
    }
    // (warp, site, k tile) -> its records in the order written.
    let mut groups: BTreeMap<(u32, u32, i32), Vec<u32>> = BTreeMap::new();
    for (&index, values) in per_record.iter_mut() {
        values.sort_by_key(|(e, _)| *e);
        let r = &trace.records[index as usize];
        groups
            .entry((r.warp, r.site, r.k_tile))
            .or_default()
            .push(index);
    }
    let mut out = Units {
        cut: Cut::Steps,
        ..Units::default()
    };
    for ((warp, _, _), records) in groups {
        let elements: Vec<u32> = per_record[&records[0]].iter().map(|(e, _)| *e).collect();
        let same = records.iter().all(|r| {
            let values = &per_record[r];
            values.len() == elements.len() && values.iter().zip(&elements).all(|(v, e)| v.0 == *e)
        });
        if !same {
            continue;
        }
        for chunk in records.chunks_exact(UNIT) {
            let mut seen = HashSet::new();
            for (slot, &element) in elements.iter().enumerate() {
                let mut values = [0.0; UNIT];
                for (value, record) in values.iter_mut().zip(chunk) {
                    *value = per_record[record][slot].1;
                }
                // Lanes that hold the same row (a SIMT thread grid broadcasts each
                // row to a column of threads) consumed one run: counted once.
                if !seen.insert(key(&values)) {
                    continue;
                }
                out.units.push(Unit {
                    record: chunk[0],
                    warp,
                    values,
                    coords: None,
                    element,
                });
            }
        }
    }
    out
}

fn run_of(get: impl Fn(usize) -> Option<f32>) -> Option<[f32; UNIT]> {
    let mut run = [0.0; UNIT];
    for (i, slot) in run.iter_mut().enumerate() {
        *slot = get(i)?;
    }
    Some(run)
}

/// The bits a run is keyed by (-0 and +0 alike).
fn key(values: &[f32]) -> [u32; UNIT] {
    let mut k = [0; UNIT];
    for (slot, v) in k.iter_mut().zip(values) {
        *slot = if *v == 0.0 { 0 } else { v.to_bits() };
    }
    k
}

/// Every aligned run of [`UNIT`] values along K of an operand matrix, by content.
pub struct ProvenanceIndex {
    runs: HashMap<[u32; UNIT], Vec<(u32, u32)>>,
    /// The matrix, for runs at other offsets ([`ProvenanceIndex::shifted`]).
    matrix: Matrix,
    /// K slices (of [`UNIT`]) per row.
    pub slices: usize,
    /// The matrix's rows.
    pub rows: usize,
}

impl ProvenanceIndex {
    pub fn new(matrix: &Matrix) -> ProvenanceIndex {
        let slices = matrix.cols / UNIT;
        let mut runs: HashMap<[u32; UNIT], Vec<(u32, u32)>> = HashMap::new();
        for r in 0..matrix.rows {
            let row = matrix.row(r);
            for s in 0..slices {
                runs.entry(key(&row[s * UNIT..(s + 1) * UNIT]))
                    .or_default()
                    .push((r as u32, s as u32));
            }
        }
        ProvenanceIndex {
            runs,
            slices,
            rows: matrix.rows,
            matrix: matrix.clone(),
        }
    }

    /// The runs of `rows` that start at a k no multiple of [`UNIT`], by content, with
    /// their (row, first k): where a load's K offset is off by part of a slice, its
    /// runs are found here and nowhere in [`ProvenanceIndex::find`]. `None` where
    /// that would index more than [`SHIFTED_LIMIT`] runs.
    pub fn shifted(&self, rows: &BTreeSet<u32>) -> Option<HashMap<[u32; UNIT], (u32, u32)>> {
        let cols = self.matrix.cols;
        if rows.len().saturating_mul(cols) > SHIFTED_LIMIT || cols < UNIT {
            return None;
        }
        let mut out = HashMap::new();
        for &r in rows.iter().filter(|r| (**r as usize) < self.matrix.rows) {
            let row = self.matrix.row(r as usize);
            for k in (0..=cols - UNIT).filter(|k| k % UNIT != 0) {
                out.entry(key(&row[k..k + UNIT])).or_insert((r, k as u32));
            }
        }
        Some(out)
    }

    /// The (row, K slice) pairs holding exactly these values.
    pub fn find(&self, values: &[f32; UNIT]) -> &[(u32, u32)] {
        self.runs.get(&key(values)).map_or(&[], Vec::as_slice)
    }
}

/// The most runs [`ProvenanceIndex::shifted`] indexes (rows × K).
pub const SHIFTED_LIMIT: usize = 1 << 22;

/// Where one unit came from: (row, K slice) of the operand matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub row: u32,
    pub slice: u32,
}

/// What the operand probes consumed, checked against the operand matrix.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct OperandReport {
    /// Runs of 8 values looked up, and how many were found in the input.
    pub units: usize,
    pub located: usize,
    /// Runs found nowhere in the input, apart from all-zero runs (counted apart:
    /// zeros are what padding rows and out-of-bounds fill hold).
    pub unmatched: usize,
    pub unmatched_zero: usize,
    /// Runs of the input found at a k that is no multiple of 8 (not counted in
    /// `unmatched`): a load's K offset off by part of a slice.
    pub shifted: usize,
    /// The k offset (mod 8) most of them start at.
    pub shift: Option<u32>,
    /// The rows the shifted runs were found in.
    pub shifted_rows: Ranges,
    /// Runs of padding rows (at or past the probe's row bound), not looked up.
    pub padding: usize,
    /// Warps whose probes were read.
    pub warps: usize,
    /// The rows (m of A, n of B) the warps consumed over the whole K loop.
    pub rows: Ranges,
    /// How often a row meets each K slice in a correct run (the mode per warp, 1
    /// unless a probe reads the same stage twice).
    pub times: u32,
    /// K slices (of 8) a consumed row never met, met more often, or less often.
    pub k_never: Ranges,
    pub k_extra: Ranges,
    pub k_short: Ranges,
    /// Rows met at a few K slices only (another row's data fed in), and those slices.
    pub stray_rows: Ranges,
    pub stray_k: Ranges,
    /// Located units with their raw position, for [`crate::arrangement`].
    #[serde(skip)]
    pub raw: Vec<(u32, Located)>,
    /// How the units were cut: by coordinates or k steps (a register fragment), or
    /// in raw order (a shared tile read as it lies).
    pub cut: Cut,
    /// Values whose coordinates another value of the record shared (see
    /// [`Units::collided`]).
    pub collided: usize,
    /// Per warp, the K slices its MMAs consumed per row, counted from the probes'
    /// steps (each record's width in K slices), against the slices of K: a correct K
    /// loop consumes a whole multiple of them. `(warp, consumed, slices)` of the
    /// warps where it does not.
    pub steps_off: Vec<(u32, usize, usize)>,
}

impl OperandReport {
    /// Enough units were found in the input for the layout to be taken as read
    /// right: at least half of those that are not all zeros. Below that the probe's
    /// values are in an order this model cannot cut into K runs, and nothing is
    /// concluded from them. Runs of zeros are left out of the count: they are what
    /// out-of-bounds fill and padding hold (a map whose bounds cut K short fills most of
    /// a tile with them), and their place says nothing of the order the rest lies in.
    pub fn readable(&self) -> bool {
        let found = self.located + self.shifted;
        found > 0 && found * 2 >= self.units - self.unmatched_zero
    }

    /// Every consumed row met every K slice equally often, from the input only.
    pub fn clean(&self) -> bool {
        self.unmatched == 0
            && self.unmatched_zero == 0
            && self.shifted == 0
            && self.k_never.is_empty()
            && self.k_extra.is_empty()
            && self.k_short.is_empty()
            && self.stray_rows.is_empty()
    }

    /// Only all-zero runs are out of place, and every slice of every consumed row
    /// was still met: padding rows or out-of-bounds fill could explain them. (Zeros
    /// in place of real slices are not padding.)
    pub fn zeros_only(&self) -> bool {
        self.unmatched_zero > 0
            && self.unmatched == 0
            && self.shifted == 0
            && self.k_extra.is_empty()
            && self.k_never.is_empty()
            && self.k_short.is_empty()
            && self.stray_rows.is_empty()
    }

    /// The K loop consumed a wrong number of K slices, and nothing else is out of
    /// place: every consumed run is the right row's, and either a slice is met too
    /// often or never, not both, or there were more steps than slices and every slice
    /// was met at least once (most twice, the rest once: an MMA issued twice on the
    /// operands of its own step) — each MMA got the operands of its own step, there
    /// are just too many or too few steps (the accumulate stage's loop count). A load
    /// that feeds a wrong tile changes which slices are met, never how many steps.
    pub fn loop_count_only(&self) -> bool {
        if self.steps_off.is_empty()
            || self.unmatched != 0
            || self.unmatched_zero != 0
            || self.shifted != 0
            || !self.stray_rows.is_empty()
        {
            return false;
        }
        let more_steps = self
            .steps_off
            .iter()
            .all(|(_, consumed, slices)| consumed > slices);
        (more_steps && self.k_never.is_empty())
            || (self.k_short.is_empty() && (self.k_extra.is_empty() != self.k_never.is_empty()))
    }

    /// One line: what is wrong, in k (not slices) and rows.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        // A raw-order tile's steps are counted from its located runs, so where runs of
        // zeros stand in for slices (out-of-bounds fill) the count misses them.
        let steps = self
            .steps_off
            .first()
            .filter(|_| self.cut.ordered() || self.unmatched_zero == 0);
        if let Some((_, consumed, slices)) = steps {
            parts.push(format!(
                "the K loop consumed {} k per row where K is {} ({} of {} warps)",
                consumed * UNIT,
                slices * UNIT,
                self.steps_off.len(),
                self.warps
            ));
        }
        let k = |r: &Ranges| r.scaled(UNIT as i64);
        if !self.k_never.is_empty() {
            parts.push(format!("k {} never consumed", k(&self.k_never)));
        }
        if !self.k_extra.is_empty() {
            parts.push(format!(
                "k {} consumed more than {} time(s)",
                k(&self.k_extra),
                self.times
            ));
        }
        if !self.k_short.is_empty() {
            parts.push(format!("k {} consumed too rarely", k(&self.k_short)));
        }
        if !self.stray_rows.is_empty() {
            parts.push(format!(
                "rows {} (not this tile's) fed in at k {}",
                self.stray_rows,
                k(&self.stray_k)
            ));
        }
        if self.shifted > 0 {
            parts.push(format!(
                "{} of {} runs of 8 values are the input's, but starting {} k past an 8-aligned slice (a K offset off by part of a slice)",
                self.shifted,
                self.units,
                self.shift.map_or("off".to_owned(), |d| d.to_string())
            ));
        }
        if self.unmatched > 0 {
            parts.push(format!(
                "{} of {} runs of 8 values are no slice of the input",
                self.unmatched, self.units
            ));
        }
        if self.unmatched_zero > 0 {
            parts.push(format!(
                "{} runs of 8 zeros that are no slice of the input",
                self.unmatched_zero
            ));
        }
        if parts.is_empty() {
            format!(
                "rows {}: every K slice consumed {} time(s), all from the input ({} runs of 8 located{})",
                self.rows,
                self.times,
                self.located,
                if self.padding > 0 {
                    format!("; {} runs of padding rows left out", self.padding)
                } else {
                    String::new()
                }
            )
        } else {
            // Rows whose every run was shifted are named by where those runs lie.
            let rows = if self.rows.0.is_empty() {
                &self.shifted_rows
            } else {
                &self.rows
            };
            format!("rows {}: {}", rows, parts.join("; "))
        }
    }
}

/// A record's warp, the local K slices its units with coordinates (or k steps) span, and for
/// raw-order units the rows they were located in and how many were located.
type Width = (u32, BTreeSet<i64>, BTreeSet<u32>, usize);

/// Locates every unit in `index` and checks, per warp, that each consumed row met
/// every K slice equally often.
pub fn check_operand(cut: &Units, index: &ProvenanceIndex) -> OperandReport {
    let units = &cut.units;
    let mut report = OperandReport {
        units: units.len(),
        padding: cut.padding,
        collided: cut.collided,
        cut: cut.cut,
        ..OperandReport::default()
    };
    // A record's width: the K slices one row of it spans (distinct local k slices of
    // its units with coordinates; located units per located row in raw order).
    let mut width: BTreeMap<u32, Width> = BTreeMap::new();
    // Ambiguous runs take the candidate whose row the record's unique runs favour.
    let mut favoured: HashMap<u32, HashMap<u32, usize>> = HashMap::new();
    for u in units {
        if let [only] = index.find(&u.values) {
            *favoured
                .entry(u.record)
                .or_default()
                .entry(only.0)
                .or_default() += 1;
        }
    }
    // Per warp: row -> count per K slice.
    let mut per_warp: BTreeMap<u32, BTreeMap<u32, Vec<u32>>> = BTreeMap::new();
    // Per (warp, row): the records it was located in.
    let mut row_records: HashMap<(u32, u32), BTreeSet<u32>> = HashMap::new();
    let mut unmatched: Vec<&Unit> = Vec::new();
    // (warp, local row) of the runs located in the input, and of the zero runs found
    // nowhere: a zero run in a row whose other runs are the input's sits past its K
    // (in a record of its own where one record holds one MMA's k: K = 520 in k8
    // steps of 32-wide tiles).
    let mut located_rows: BTreeSet<(u32, i32)> = BTreeSet::new();
    let mut zero_rows: Vec<Option<(u32, i32)>> = Vec::new();
    for u in units {
        let found = index.find(&u.values);
        let pick = found.iter().max_by_key(|(row, _)| {
            favoured
                .get(&u.record)
                .and_then(|f| f.get(row))
                .copied()
                .unwrap_or(0)
        });
        let w = width
            .entry(u.record)
            .or_insert_with(|| (u.warp, Default::default(), Default::default(), 0));
        // Zeros found nowhere (padding past an edge) are no K step.
        let padding = pick.is_none() && u.values.iter().all(|v| *v == 0.0);
        // A Steps unit's record stands for its chunk of UNIT k steps: one K slice of
        // each row.
        let local_slice = match (u.coords, cut.cut) {
            (Some((_, k)), _) => Some(i64::from(k) / UNIT as i64),
            (None, Cut::Steps) => Some(0),
            (None, _) => None,
        };
        if let Some(slice) = local_slice
            && !padding
        {
            w.1.insert(slice);
        }
        let Some(&(row, slice)) = pick else {
            if u.values.iter().all(|v| *v == 0.0) {
                report.unmatched_zero += 1;
                zero_rows.push(u.coords.map(|(row, _)| (u.warp, row)));
            } else {
                report.unmatched += 1;
                unmatched.push(u);
            }
            continue;
        };
        report.located += 1;
        if let Some((local, _)) = u.coords {
            located_rows.insert((u.warp, local));
        }
        if local_slice.is_none() {
            w.2.insert(row);
            w.3 += 1;
            report.raw.push((u.element, Located { row, slice }));
        }
        per_warp
            .entry(u.warp)
            .or_default()
            .entry(row)
            .or_insert_with(|| vec![0; index.slices])[slice as usize] += 1;
        row_records
            .entry((u.warp, row))
            .or_default()
            .insert(u.record);
    }
    report.warps = per_warp.len();
    shifted_runs(&mut report, &unmatched, &per_warp, index);
    // K slices consumed per row, per warp, from the records' widths.
    let record_width = |(_, ks, rows, located): &Width| {
        if ks.is_empty() {
            located / rows.len().max(1)
        } else {
            ks.len()
        }
    };
    let mut consumed: BTreeMap<u32, usize> = BTreeMap::new();
    for w in width.values() {
        *consumed.entry(w.0).or_default() += record_width(w);
    }
    let mut modes = HashMap::<u32, usize>::new();
    for (warp, rows) in &per_warp {
        let steps = consumed.get(warp).copied().unwrap_or(0);
        if index.slices > 0 && steps % index.slices != 0 {
            report.steps_off.push((*warp, steps, index.slices));
        }
        // How often a correct loop meets each slice: the steps over the slices.
        let times = ((steps as f64 / index.slices.max(1) as f64).round() as u32).max(1);
        // Main rows took at least half as many runs as the busiest row; the rest
        // are strays (another row's data fed in at a few slices).
        let busiest = rows
            .values()
            .map(|c| c.iter().sum::<u32>())
            .max()
            .unwrap_or(0);
        let main: Vec<(&u32, &Vec<u32>)> = rows
            .iter()
            .filter(|(_, c)| c.iter().sum::<u32>() * 2 >= busiest)
            .collect();
        for (row, counts) in rows {
            let is_main = main.iter().any(|(r, _)| *r == row);
            if !is_main {
                report.stray_rows.insert(i64::from(*row));
                for (s, _) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
                    report.stray_k.insert(s as i64);
                }
                continue;
            }
            report.rows.insert(i64::from(*row));
            // How often this row's own records say it meets each slice: where a warp's
            // records hold different rows (the B fragments of `j` and `j + 1` probed
            // apart), the warp's steps over-count any one row's.
            let own: usize = row_records
                .get(&(*warp, *row))
                .map(|records| {
                    records
                        .iter()
                        .filter_map(|r| width.get(r))
                        .map(record_width)
                        .sum()
                })
                .unwrap_or(0);
            let own = ((own as f64 / index.slices.max(1) as f64).round() as u32).max(1);
            let expected = if own < times && counts.iter().all(|c| *c == own) {
                own
            } else {
                times
            };
            // The count the report names: the one most rows are held to.
            *modes.entry(expected).or_default() += 1;
            for (s, &c) in counts.iter().enumerate() {
                let s = s as i64;
                match c {
                    0 => report.k_never.insert(s),
                    c if c > expected => report.k_extra.insert(s),
                    c if c < expected => report.k_short.insert(s),
                    _ => {}
                }
            }
        }
    }
    report.times = modes
        .into_iter()
        .max_by_key(|(c, n)| (*n, std::cmp::Reverse(*c)))
        .map_or(1, |(c, _)| c);
    // A tile with more row slots than the problem has rows (BATCH < MMA_N): once every
    // row of the input is consumed at every slice, from the input only, the zero runs
    // left over fill slots no row of the input can take: padding rows, not a wrong
    // load. (A K loop's count may still be off: that is not the zeros' doing.)
    let every_row = index.rows > 0 && (0..index.rows as i64).all(|r| report.rows.0.contains(&r));
    // A K edge the tiles pass (K = 520 in tiles of 32): where every row the records
    // hold met every K slice exactly as often as the loop's steps say, and each zero
    // run lies in a row (of its warp's records) whose other runs are the input's, the zeros
    // displaced no value of the input: fill past K, not a wrong load. (A zero run in a
    // row with no run of the input may be that row's data lost: not this.)
    let complete = !report.rows.0.is_empty()
        && report.k_short.0.is_empty()
        && report.k_extra.0.is_empty()
        && report.steps_off.is_empty()
        && zero_rows
            .iter()
            .all(|z| z.is_some_and(|z| located_rows.contains(&z)));
    if (every_row || complete)
        && report.unmatched_zero > 0
        && report.unmatched == 0
        && report.k_never.is_empty()
        && report.stray_rows.is_empty()
    {
        report.padding += report.unmatched_zero;
        report.units -= report.unmatched_zero;
        report.unmatched_zero = 0;
    }
    report
}

/// Looks the `unmatched` runs up at the k offsets no multiple of 8 of the rows the
/// other runs were found in (every row where none were): each found is moved from
/// `unmatched` to `shifted`, and the offset most start at is kept. Only for runs in
/// the kernel's own K order ([`Cut::ordered`]): a shared tile's raw order is memory's,
/// where a layout may legitimately put a run's halves side by side.
fn shifted_runs(
    report: &mut OperandReport,
    unmatched: &[&Unit],
    per_warp: &BTreeMap<u32, BTreeMap<u32, Vec<u32>>>,
    index: &ProvenanceIndex,
) {
    if unmatched.is_empty() || !report.cut.ordered() {
        return;
    }
    let mut rows: BTreeSet<u32> = per_warp.values().flat_map(|r| r.keys().copied()).collect();
    if rows.is_empty() {
        rows = (0..index.rows as u32).collect();
    }
    let Some(shifted) = index.shifted(&rows) else {
        return;
    };
    let mut offsets: BTreeMap<u32, usize> = BTreeMap::new();
    for u in unmatched {
        if let Some(&(row, k)) = shifted.get(&key(&u.values)) {
            report.unmatched -= 1;
            report.shifted += 1;
            report.shifted_rows.insert(i64::from(row));
            *offsets.entry(k % UNIT as u32).or_default() += 1;
        }
    }
    report.shift = offsets
        .into_iter()
        .max_by_key(|(d, n)| (*n, std::cmp::Reverse(*d)))
        .map(|(d, _)| d);
}
