//! Where each traced operand value came from: runs of [`UNIT`] values along K looked
//! up by content in the operand matrix, and per warp the K slices each row met.

use std::collections::{BTreeMap, HashMap};

use kwb_runtime::{Kind, Trace};

use crate::matrix::Matrix;
use crate::ranges::Ranges;

/// Values per looked-up run: one 16-byte chunk of 16-bit elements, the unit TMA,
/// cp.async and ldmatrix move and every shared-memory swizzle permutes.
pub const UNIT: usize = 8;

/// A run of [`UNIT`] traced values believed consecutive along K within one row.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub site: u32,
    pub record: u32,
    pub warp: u32,
    pub values: [f32; UNIT],
    /// The traced (row, first k) when the probe knew its coordinates: row is m for
    /// operand A, n for operand B, both possibly local to a warp or a tile.
    pub coords: Option<(i32, i32)>,
    /// The element index of the first value (the raw position in a shared tile).
    pub element: u32,
}

/// Cuts the full-tile values of `kind`'s records into [`Unit`]s: by row and k where
/// every value of a record has coordinates (aligned runs of 8 consecutive k), by
/// element index otherwise (aligned 16-byte chunks of a shared tile in raw order).
/// Runs of rows at or past the record's row bound (padding rows) are left out; the
/// second value is how many.
pub fn units_of(trace: &Trace, kind: Kind) -> (Vec<Unit>, usize) {
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
    let mut units = Vec::new();
    let mut padding = 0;
    for (record_index, values) in by_record {
        let record = &trace.records[record_index as usize];
        let unit = |values: [f32; UNIT], coords, element| Unit {
            site: record.site,
            record: record_index,
            warp: record.warp,
            values,
            coords,
            element,
        };
        if values.iter().all(|v| row_of(v) >= 0 && v.k >= 0) {
            let mut rows: BTreeMap<i32, BTreeMap<i32, (f32, u32)>> = BTreeMap::new();
            for v in &values {
                rows.entry(row_of(v))
                    .or_default()
                    .insert(v.k, (v.value, v.element));
            }
            for (row, ks) in rows {
                for (&k, &(_, element)) in ks.iter().filter(|(k, _)| *k % UNIT as i32 == 0) {
                    let Some(run) = run_of(|i| ks.get(&(k + i as i32)).map(|x| x.0)) else {
                        continue;
                    };
                    if row >= record.row_bound {
                        padding += 1;
                        continue;
                    }
                    units.push(unit(run, Some((row, k)), element));
                }
            }
        } else {
            let by_element: BTreeMap<u32, f32> =
                values.iter().map(|v| (v.element, v.value)).collect();
            for &e in by_element.keys().filter(|e| **e as usize % UNIT == 0) {
                if let Some(run) = run_of(|i| by_element.get(&(e + i as u32)).copied()) {
                    units.push(unit(run, None, e));
                }
            }
        }
    }
    (units, padding)
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
    /// K slices (of [`UNIT`]) per row.
    pub slices: usize,
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
        }
    }

    /// The (row, K slice) pairs holding exactly these values.
    pub fn find(&self, values: &[f32; UNIT]) -> &[(u32, u32)] {
        self.runs.get(&key(values)).map_or(&[], Vec::as_slice)
    }
}

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
    /// Whether the units carried coordinates (a register fragment) or only raw
    /// order (a shared tile read as it lies).
    pub coordinates: bool,
}

impl OperandReport {
    /// Enough units were found in the input for the layout to be taken as read
    /// right: at least half. Below that the probe's values are in an order this
    /// model cannot cut into K runs, and nothing is concluded from them.
    pub fn readable(&self) -> bool {
        self.units > 0 && self.located * 2 >= self.units
    }

    /// Every consumed row met every K slice equally often, from the input only.
    pub fn clean(&self) -> bool {
        self.unmatched == 0
            && self.unmatched_zero == 0
            && self.k_never.is_empty()
            && self.k_extra.is_empty()
            && self.k_short.is_empty()
            && self.stray_rows.is_empty()
    }

    /// Only all-zero runs are out of place (padding or out-of-bounds fill could
    /// explain them).
    pub fn zeros_only(&self) -> bool {
        self.unmatched_zero > 0
            && self.unmatched == 0
            && self.k_extra.is_empty()
            && self.stray_rows.is_empty()
    }

    /// One line: what is wrong, in k (not slices) and rows.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
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
                "rows {}: every K slice consumed {} time(s), all from the input ({} runs of 8 located)",
                self.rows, self.times, self.located
            )
        } else {
            format!("rows {}: {}", self.rows, parts.join("; "))
        }
    }
}

/// Locates every unit in `index` and checks, per warp, that each consumed row met
/// every K slice equally often.
pub fn check_operand(units: &[Unit], padding: usize, index: &ProvenanceIndex) -> OperandReport {
    let mut report = OperandReport {
        units: units.len(),
        padding,
        coordinates: units.iter().all(|u| u.coords.is_some()),
        ..OperandReport::default()
    };
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
    for u in units {
        let found = index.find(&u.values);
        let pick = found.iter().max_by_key(|(row, _)| {
            favoured
                .get(&u.record)
                .and_then(|f| f.get(row))
                .copied()
                .unwrap_or(0)
        });
        let Some(&(row, slice)) = pick else {
            if u.values.iter().all(|v| *v == 0.0) {
                report.unmatched_zero += 1;
            } else {
                report.unmatched += 1;
            }
            continue;
        };
        report.located += 1;
        if u.coords.is_none() {
            report.raw.push((u.element, Located { row, slice }));
        }
        per_warp
            .entry(u.warp)
            .or_default()
            .entry(row)
            .or_insert_with(|| vec![0; index.slices])[slice as usize] += 1;
    }
    report.warps = per_warp.len();
    let mut modes = HashMap::<u32, usize>::new();
    for rows in per_warp.values() {
        // Main rows meet at least half the K slices; the rest are strays.
        let main: Vec<(&u32, &Vec<u32>)> = rows
            .iter()
            .filter(|(_, c)| c.iter().filter(|&&x| x > 0).count() * 2 >= index.slices)
            .collect();
        let mut tally = HashMap::<u32, usize>::new();
        for (_, counts) in &main {
            for &c in counts.iter().filter(|&&c| c > 0) {
                *tally.entry(c).or_default() += 1;
            }
        }
        let times = tally
            .iter()
            .max_by_key(|(c, n)| (**n, std::cmp::Reverse(**c)))
            .map_or(1, |(c, _)| *c);
        *modes.entry(times).or_default() += 1;
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
            for (s, &c) in counts.iter().enumerate() {
                let s = s as i64;
                match c {
                    0 => report.k_never.insert(s),
                    c if c > times => report.k_extra.insert(s),
                    c if c < times => report.k_short.insert(s),
                    _ => {}
                }
            }
        }
    }
    report.times = modes
        .into_iter()
        .max_by_key(|(c, n)| (*n, std::cmp::Reverse(*c)))
        .map_or(1, |(c, _)| c);
    report
}
