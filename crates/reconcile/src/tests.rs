//! The host model on synthetic traces: clean runs, planted operand defects (a K
//! slice twice, a stray row, zeros), shared-tile arrangements and accumulator
//! placement.

use kwb_runtime::{Kind, RECORD_SIZE, TileValue, Trace, TraceRecord};

use super::*;

fn wide(rows: usize, cols: usize, seed: u64) -> Matrix {
    Matrix::wide_int(rows, cols, seed)
}

fn record(kind: Kind, warp: u32, k_tile: i32) -> TraceRecord {
    let mut r = TraceRecord::from_le_bytes(&[0; RECORD_SIZE]);
    r.kind = kind as u32;
    r.warp = warp;
    r.k_tile = k_tile;
    r.row_bound = i32::MAX;
    r
}

/// Builds a trace record by record: each push adds a record and its tile values.
#[derive(Default)]
struct Builder {
    trace: Trace,
}

impl Builder {
    fn push(&mut self, r: TraceRecord, values: impl IntoIterator<Item = (f32, i32, i32, i32)>) {
        let index = self.trace.records.len() as u32;
        self.trace.records.push(r);
        for (element, (value, m, n, k)) in values.into_iter().enumerate() {
            self.trace.tiles.push(TileValue {
                record: index,
                element: element as u32,
                value,
                m,
                n,
                k,
            });
        }
    }
}

/// Operand A fragments of one warp: rows `rows`, K tiles of `bk` walked in the
/// order `tiles` (tile t of the input fed at step i), with local coordinates.
fn fragments(a: &Matrix, rows: std::ops::Range<usize>, bk: usize, tiles: &[usize]) -> Trace {
    let mut b = Builder::default();
    for (step, &t) in tiles.iter().enumerate() {
        let values = rows.clone().flat_map(|m| {
            (0..bk).map(move |k| {
                let v = a.data[m * a.cols + t * bk + k];
                (v, (m - rows.start) as i32, -1, k as i32)
            })
        });
        b.push(
            record(Kind::OperandA, 0, step as i32),
            values.collect::<Vec<_>>(),
        );
    }
    b.trace
}

fn operand(trace: &Trace, a: &Matrix) -> OperandReport {
    check_operand(&units_of(trace, Kind::OperandA), &ProvenanceIndex::new(a))
}

#[test]
fn a_clean_walk_meets_every_k_slice_once() {
    let a = wide(64, 128, 1);
    let report = operand(&fragments(&a, 16..32, 32, &[0, 1, 2, 3]), &a);
    assert!(report.readable() && report.clean(), "{report:?}");
    assert_eq!(report.rows.to_string(), "16..32");
    assert_eq!(report.times, 1);
    assert_eq!(report.cut, Cut::Coordinates);
    assert!(
        report
            .describe()
            .contains("every K slice consumed 1 time(s)")
    );
}

#[test]
fn a_tile_fed_twice_shows_as_never_and_extra_k() {
    // Step 2 multiplies tile 0 again (a prefetch with the wrong K offset).
    let a = wide(64, 128, 2);
    let report = operand(&fragments(&a, 0..16, 32, &[0, 1, 0, 3]), &a);
    assert!(report.readable() && !report.clean());
    assert_eq!(report.k_never.scaled(UNIT as i64), "64..96");
    assert_eq!(report.k_extra.scaled(UNIT as i64), "0..32");
    assert!(report.describe().contains("k 64..96 never consumed"));
}

#[test]
fn records_that_hold_different_rows_are_counted_per_row() {
    // One warp's probes of two fragments apart (the B registers of n-tiles j and
    // j + 1): each K step a record of rows 0..8 and one of rows 8..16, each walking
    // K once. The warp's steps are twice any row's.
    let a = wide(64, 128, 5);
    let mut b = Builder::default();
    for step in 0..4 {
        for rows in [0..8usize, 8..16] {
            let values: Vec<_> = rows
                .flat_map(|m| (0..32).map(move |k| (m, k)))
                .map(|(m, k)| {
                    (
                        a.data[m * a.cols + step * 32 + k],
                        (m % 8) as i32,
                        -1,
                        k as i32,
                    )
                })
                .collect();
            b.push(record(Kind::OperandA, 0, step as i32), values);
        }
    }
    let report = operand(&b.trace, &a);
    assert!(report.readable() && report.clean(), "{}", report.describe());
    assert_eq!(report.rows.to_string(), "0..16");
    assert_eq!(report.times, 1, "{}", report.describe());
    // Rows 8..16 consumed at K tile 0 only: short of what their own records say.
    for v in b
        .trace
        .tiles
        .iter_mut()
        .filter(|v| v.record % 2 == 1 && v.record > 1)
    {
        v.value = a.data[(v.m as usize + 8) * a.cols + v.k as usize];
    }
    let report = operand(&b.trace, &a);
    assert!(!report.clean(), "{}", report.describe());
    // The second fragment's records holding the first's rows: an operand that reads
    // rows 0..8 twice at every slice, and no row 8..16. Alone that is no fault (which
    // rows a CTA should hold, its accumulator says).
    for v in b.trace.tiles.iter_mut().filter(|v| v.record % 2 == 1) {
        v.value = a.data[v.m as usize * a.cols + (v.record as usize / 2) * 32 + v.k as usize];
    }
    let report = operand(&b.trace, &a);
    assert_eq!(
        (report.rows.to_string(), report.times),
        ("0..8".to_owned(), 2)
    );
}

#[test]
fn another_rows_slice_is_a_stray_row() {
    // K tile 0 of rows 0..16 comes from rows 32..48 (swapped coordinates).
    let a = wide(64, 128, 3);
    let mut trace = fragments(&a, 0..16, 32, &[0, 1, 2, 3]);
    for v in trace.tiles.iter_mut().filter(|v| v.record == 0) {
        v.value = a.data[(v.m as usize + 32) * a.cols + v.k as usize];
    }
    let report = operand(&trace, &a);
    assert_eq!(report.stray_rows.to_string(), "32..48");
    assert_eq!(report.stray_k.scaled(UNIT as i64), "0..32");
    assert_eq!(report.k_never.scaled(UNIT as i64), "0..32");
}

#[test]
fn zeros_are_told_apart_from_foreign_values() {
    let a = wide(64, 128, 4);
    let mut trace = fragments(&a, 0..16, 32, &[0, 1, 2, 3]);
    for v in trace.tiles.iter_mut().filter(|v| v.record == 3 && v.m >= 8) {
        v.value = 0.0;
    }
    let report = operand(&trace, &a);
    // Zeros in place of real slices (rows 8..16 never meet K tile 3) are not padding.
    assert!(!report.zeros_only(), "{report:?}");
    assert_eq!(report.k_never.scaled(UNIT as i64), "96..128");
    // Zeros beside every real slice, in rows whose runs are all the input's (a K edge
    // the tile passes), displaced nothing: fill, left out as padding.
    let mut padded = fragments(&a, 0..16, 32, &[0, 1, 2, 3]);
    let extra: Vec<_> = (0..16)
        .flat_map(|m| (0..8).map(move |k| (0.0, m, -1, 32 + k)))
        .collect();
    let at = padded.tiles.len() as u32;
    for (i, (v, m, n, k)) in extra.into_iter().enumerate() {
        padded.tiles.push(TileValue {
            record: 3,
            element: at + i as u32,
            value: v,
            m,
            n,
            k,
        });
    }
    let report = operand(&padded, &a);
    assert!(
        report.clean() && report.padding == 16 && report.steps_off.is_empty(),
        "{report:?}"
    );
    // The same fill in a record of its own (one MMA's k step past K): the zeros lie
    // in rows the warp's other records hold the input's runs of.
    let mut own = fragments(&a, 0..16, 32, &[0, 1, 2, 3]);
    let at = own.records.len() as u32;
    own.records.push(own.records[3]);
    for m in 0..16 {
        for k in 0..8 {
            own.tiles.push(TileValue {
                record: at,
                element: (m * 8 + k) as u32,
                value: 0.0,
                m,
                n: -1,
                k,
            });
        }
    }
    let report = operand(&own, &a);
    assert!(report.clean() && report.padding == 16, "{report:?}");
    for v in trace.tiles.iter_mut().filter(|v| v.record == 3 && v.m >= 8) {
        v.value = 1000.0;
    }
    let report = operand(&trace, &a);
    assert!(!report.zeros_only() && report.unmatched > 0);
}

/// Operand fragments of one warp over a 16-row tile of an input with fewer rows: the
/// slots past the input's last row hold `fill(row, k)`.
fn padded_tile(a: &Matrix, bk: usize, fill: impl Fn(usize, usize) -> f32) -> Trace {
    let mut b = Builder::default();
    for t in 0..a.cols / bk {
        let values: Vec<_> = (0..16)
            .flat_map(|m| {
                let fill = &fill;
                (0..bk).map(move |k| {
                    let v = if m < a.rows {
                        a.data[m * a.cols + t * bk + k]
                    } else {
                        fill(m, t * bk + k)
                    };
                    (v, m as i32, -1, k as i32)
                })
            })
            .collect();
        b.push(record(Kind::OperandA, 0, t as i32), values);
    }
    b.trace
}

#[test]
fn zero_slots_past_an_input_with_fewer_rows_than_the_tile_are_padding() {
    // BATCH = 12 tokens in a 16-row MMA tile, no row bound: every token row meets
    // every slice, and the four slots past them hold zeros.
    let a = wide(12, 128, 7);
    let report = operand(&padded_tile(&a, 32, |_, _| 0.0), &a);
    assert!(report.clean(), "{report:?}");
    assert_eq!(report.padding, 4 * 128 / UNIT);
    assert_eq!(report.rows.to_string(), "0..12");
    assert!(report.describe().contains("runs of padding rows left out"));
    // A slot past the input holding anything else is no padding.
    let report = operand(&padded_tile(&a, 32, |m, k| (m * 1000 + k) as f32), &a);
    assert!(!report.clean() && report.unmatched > 0, "{report:?}");
    // Nor are zeros where a row of the input is missing: row 11 never consumed.
    let mut trace = padded_tile(&a, 32, |_, _| 0.0);
    for v in trace.tiles.iter_mut().filter(|v| v.m == 11) {
        v.value = 0.0;
    }
    let report = operand(&trace, &a);
    assert!(!report.clean() && report.unmatched_zero > 0, "{report:?}");
}

#[test]
fn padding_rows_past_the_row_bound_are_not_looked_up() {
    let a = wide(64, 128, 5);
    let mut trace = fragments(&a, 0..16, 32, &[0, 1, 2, 3]);
    for r in &mut trace.records {
        r.row_bound = 8;
    }
    for v in trace.tiles.iter_mut().filter(|v| v.m >= 8) {
        v.value = 0.0;
    }
    let report = operand(&trace, &a);
    assert!(report.clean(), "{report:?}");
    assert_eq!(report.padding, 8 * 4 * 4);
    assert_eq!(report.rows.to_string(), "0..8");
}

/// A 128-byte-per-line shared tile of rows `rows` × 64 k (K tile `t`), chunks
/// swizzled or not, read in raw order (no coordinates).
fn shared_tile(a: &Matrix, rows: std::ops::Range<usize>, t: usize, swizzle: bool) -> Vec<f32> {
    let mut out = vec![0.0; rows.len() * 64];
    for (line, m) in rows.enumerate() {
        for slice in 0..8 {
            let slot = if swizzle { slice ^ (line % 8) } else { slice };
            for i in 0..8 {
                out[line * 64 + slot * 8 + i] = a.data[m * a.cols + t * 64 + slice * 8 + i];
            }
        }
    }
    out
}

#[test]
fn shared_tiles_in_raw_order_are_located_and_their_swizzle_read() {
    let a = wide(32, 256, 6);
    for (swizzle, want) in [
        (true, Arrangement::Swizzle128),
        (false, Arrangement::Unswizzled),
    ] {
        let mut b = Builder::default();
        for t in 0..4 {
            let tile = shared_tile(&a, 0..32, t, swizzle);
            b.push(
                record(Kind::OperandA, 0, t as i32),
                tile.into_iter().map(|v| (v, -1, -1, -1)),
            );
        }
        let report = operand(&b.trace, &a);
        assert!(report.clean() && report.cut == Cut::RawOrder, "{report:?}");
        assert_eq!(arrangement(&report.raw), want);
    }
}

#[test]
fn values_in_an_order_the_model_cannot_cut_are_unreadable_not_wrong() {
    // A register fragment without coordinates: lane-major order, not K runs.
    let a = wide(32, 64, 7);
    let mut b = Builder::default();
    let values: Vec<_> = (0..32 * 64)
        .map(|i| (a.data[(i % 32) * 64 + i / 32], -1, -1, -1))
        .collect();
    b.push(record(Kind::OperandA, 0, 0), values);
    let report = operand(&b.trace, &a);
    assert!(!report.readable());
}

/// A SIMT warp's fragment of operand A probed once a k step (`a_frag[i] =
/// As[kk][ty * 4 + i]`): 32 lanes of 4 values, lane l holding rows (l / 16) * 4 to
/// (l / 16) * 4 + 3 (16 lanes a row, as a thread grid broadcasts it), one k a record,
/// `bk` steps a K tile; `feed[t]` is the input's K tile fed at step t. No coordinates.
fn simt_steps(a: &Matrix, bk: usize, feed: &[usize]) -> Trace {
    simt_steps_at(a, bk, feed.len(), |t, kk| feed[t] * bk + kk)
}

/// [`simt_steps`] over `tiles` K tiles reading k `k_of(t, kk)` at step kk of tile t.
fn simt_steps_at(
    a: &Matrix,
    bk: usize,
    tiles: usize,
    k_of: impl Fn(usize, usize) -> usize,
) -> Trace {
    let mut b = Builder::default();
    for t in 0..tiles {
        for kk in 0..bk {
            let k = k_of(t, kk);
            let values: Vec<_> = (0..32)
                .flat_map(|lane| (0..4).map(move |i| ((lane / 16) * 4 + i, k)))
                .map(|(row, k)| (a.data[row * a.cols + k], -1, -1, -1))
                .collect();
            b.push(record(Kind::OperandA, 0, t as i32), values);
        }
    }
    b.trace
}

#[test]
fn a_fragment_probed_once_a_k_step_is_read_across_its_steps() {
    let a = wide(8, 64, 11);
    let index = ProvenanceIndex::new(&a);
    let trace = simt_steps(&a, 16, &[0, 1, 2, 3]);
    // In element order the lanes' values are no K runs.
    assert!(!check_operand(&units_of(&trace, Kind::OperandA), &index).readable());
    let steps = step_units_of(&trace, Kind::OperandA);
    assert_eq!(steps.cut, Cut::Steps);
    // 4 K tiles of 2 chunks, 8 distinct rows each (the 16 lanes of a row are one run).
    assert_eq!(steps.units.len(), 4 * 2 * 8);
    let report = check_operand(&steps, &index);
    assert!(report.readable() && report.clean(), "{report:?}");
    assert_eq!(report.rows.to_string(), "0..8");
    assert_eq!(report.times, 1);
    assert!(report.steps_off.is_empty());

    // K tile 2's steps read the buffer tile 1 left (a prefetch into the wrong stage):
    // k 32..48 never consumed, k 16..32 twice.
    let report = check_operand(
        &step_units_of(&simt_steps(&a, 16, &[0, 1, 1, 3]), Kind::OperandA),
        &index,
    );
    assert!(report.readable() && !report.clean(), "{report:?}");
    assert!(!report.loop_count_only());
    assert_eq!(report.k_never.scaled(UNIT as i64).to_string(), "32..48");
    assert_eq!(report.k_extra.scaled(UNIT as i64).to_string(), "16..32");

    // Tiles after the first loaded one k further on (a prefetch's K offset off by
    // one): their runs are the input's, starting 1 k past a slice.
    let wider = wide(8, 72, 11);
    let shifted = simt_steps_at(&wider, 16, 4, |t, kk| t * 16 + kk + usize::from(t > 0));
    let report = check_operand(
        &step_units_of(&shifted, Kind::OperandA),
        &ProvenanceIndex::new(&wider),
    );
    assert!(report.readable() && !report.clean(), "{report:?}");
    assert_eq!(
        (report.shifted, report.shift, report.unmatched),
        (3 * 2 * 8, Some(1), 0)
    );
    assert!(!report.loop_count_only() && !report.zeros_only());
    assert!(
        report.describe().contains("starting 1 k past"),
        "{}",
        report.describe()
    );
    // Every tile one k further on: no run lies on a slice, and the rows are named by
    // where the shifted runs were found.
    let all = simt_steps_at(&wider, 16, 4, |t, kk| t * 16 + kk + 1);
    let report = check_operand(
        &step_units_of(&all, Kind::OperandA),
        &ProvenanceIndex::new(&wider),
    );
    assert_eq!((report.located, report.shift), (0, Some(1)), "{report:?}");
    assert!(
        report.describe().starts_with("rows 0..8: "),
        "{}",
        report.describe()
    );

    // The same run in a shared tile's raw order is memory's order: not looked for
    // at an offset.
    let mut values = [0.0; UNIT];
    values.copy_from_slice(&wider.row(2)[4..12]);
    let one = |cut| Units {
        units: vec![Unit {
            record: 0,
            warp: 0,
            values,
            coords: None,
            element: 0,
        }],
        cut,
        ..Units::default()
    };
    let wider_index = ProvenanceIndex::new(&wider);
    let raw = check_operand(&one(Cut::RawOrder), &wider_index);
    assert_eq!((raw.shifted, raw.unmatched), (0, 1));
    let steps = check_operand(&one(Cut::Steps), &wider_index);
    assert_eq!(
        (steps.shifted, steps.shift, steps.unmatched),
        (1, Some(4), 0)
    );

    // A K tile of fewer steps than a run holds no unit.
    assert!(
        step_units_of(&simt_steps(&a, 4, &[0, 1]), Kind::OperandA)
            .units
            .is_empty()
    );
}

fn accumulator_trace(
    p: &Product,
    cells: impl Iterator<Item = (i64, i64)>,
    at: (i64, i64),
    coords: bool,
) -> Trace {
    let mut b = Builder::default();
    let values: Vec<_> = cells
        .map(|(m, n)| {
            let v = p.get(m + at.0, n + at.1).unwrap() as f32;
            if coords {
                (v, m as i32, n as i32, -1)
            } else {
                (v, -1, -1, -1)
            }
        })
        .collect();
    b.push(record(Kind::Accumulator, 0, -1), values);
    b.trace
}

fn square(lo: i64, hi: i64) -> impl Iterator<Item = (i64, i64)> {
    (lo..hi).flat_map(move |m| (lo..hi).map(move |n| (m, n)))
}

#[test]
fn accumulators_are_placed_in_the_product() {
    let (a, b) = (wide(64, 96, 8), wide(64, 96, 9));
    let p = Product::of(&a, &b).unwrap();
    assert!(p.is_exact());
    // Local coordinates of a warp at (32, 16): found shifted, and right.
    let report = locate_accumulators(&accumulator_trace(&p, square(0, 16), (32, 16), true), &p);
    assert_eq!(
        report.groups[0].layers[0],
        Placement::Shifted { dm: 32, dn: 16 }
    );
    assert!(report.right() && !report.global_frame);
    // Global coordinates at their own place.
    let cells = (32..48).flat_map(|m| (16..32).map(move |n| (m, n)));
    let report = locate_accumulators(&accumulator_trace(&p, cells, (0, 0), true), &p);
    assert_eq!(report.groups[0].layers[0], Placement::AtCoordinates);
    assert!(report.right() && report.global_frame);
    // Global coordinates holding another tile: misplaced.
    let cells = (32..48).flat_map(|m| (16..32).map(move |n| (m, n)));
    let report = locate_accumulators(&accumulator_trace(&p, cells, (0, -16), true), &p);
    assert_eq!(report.misplaced(), Some((0, -16)));
    assert!(!report.right());
    // No coordinates: the multiset of a tile.
    let report = locate_accumulators(&accumulator_trace(&p, square(0, 16), (16, 32), false), &p);
    assert_eq!(
        report.groups[0].layers[0],
        Placement::Tile {
            m0: 16,
            n0: 32,
            rows: 16,
            cols: 16
        }
    );
    // One value off by one: nowhere.
    let mut trace = accumulator_trace(&p, square(0, 16), (16, 32), true);
    trace.tiles[5].value += 1.0;
    let report = locate_accumulators(&trace, &p);
    assert_eq!(report.nowhere(), 1);
    assert!(!report.right());
}

/// Two fragments of one warp with the same local coordinates (two MMA tiles the
/// probe cannot tell apart): each a tile of the product at its own place is right;
/// both the same tile is a duplicate (one fragment got the other's product).
#[test]
fn two_fragments_holding_one_tile_are_duplicates() {
    let (a, b) = (wide(64, 96, 8), wide(64, 96, 9));
    let p = Product::of(&a, &b).unwrap();
    let fragments = |second: (i64, i64)| {
        let mut t = accumulator_trace(&p, square(0, 16), (0, 16), true);
        let other = accumulator_trace(&p, square(0, 16), second, true);
        let record = t.records.len() as u32;
        t.records.extend(other.records);
        t.tiles.extend(other.tiles.into_iter().map(|mut v| {
            v.record += record;
            v
        }));
        t
    };
    let report = locate_accumulators(&fragments((0, 32)), &p);
    assert_eq!(report.layers(), (2, 2));
    assert!(report.right() && report.duplicated == 0);
    let report = locate_accumulators(&fragments((0, 16)), &p);
    assert!(report.right(), "each layer alone is a tile");
    assert_eq!(report.duplicated, 2 * 16 * 16);
}

#[test]
fn inexact_products_compare_within_the_fp32_accumulation_bound() {
    let a = Matrix::new(1, 2, vec![0.1, 0.2]).unwrap();
    let b = Matrix::new(1, 2, vec![0.3, 0.7]).unwrap();
    let p = Product::of(&a, &b).unwrap();
    assert!(!p.is_exact());
    let f32_sum = 0.1_f32 * 0.3 + 0.2 * 0.7;
    assert!(p.matches(0, 0, f32_sum));
    assert!(!p.matches(0, 0, f32_sum * 1.001));
    assert!(Product::of(&a, &Matrix::new(1, 3, vec![0.0; 3]).unwrap()).is_none());
}

#[test]
fn ranges_print_as_half_open_spans() {
    let r: Ranges = [0, 1, 2, 5, 7, 8].into_iter().collect();
    assert_eq!(r.to_string(), "0..3, 5..6, 7..9");
    assert_eq!(r.spans().len(), 3);
    assert_eq!(r.scaled(8), "0..24, 40..48, 56..72");
}

#[test]
fn a_k_loop_one_tile_too_long_or_short_is_a_loop_count_not_a_load() {
    let a = wide(64, 128, 10);
    // The last tile accumulated twice: one step too many, each step's data right.
    let twice = operand(&fragments(&a, 0..16, 32, &[0, 1, 2, 3, 3]), &a);
    assert_eq!(twice.steps_off, vec![(0, 20, 16)]);
    assert!(twice.loop_count_only(), "{twice:?}");
    assert_eq!(twice.k_extra.scaled(UNIT as i64), "96..128");
    // The last tile dropped.
    let dropped = operand(&fragments(&a, 0..16, 32, &[0, 1, 2]), &a);
    assert!(dropped.loop_count_only());
    assert_eq!(dropped.k_never.scaled(UNIT as i64), "96..128");
    // The right number of steps with a wrong tile in one: a load, not the loop.
    let wrong = operand(&fragments(&a, 0..16, 32, &[0, 1, 0, 3]), &a);
    assert!(wrong.steps_off.is_empty() && !wrong.loop_count_only());
    // Every mainloop tile issued twice, the tail once: most slices twice, the last
    // tile's once (too rarely against the mode), none never: still the loop count.
    let doubled = operand(&fragments(&a, 0..16, 32, &[0, 0, 1, 1, 2, 2, 3]), &a);
    assert_eq!(
        doubled.k_short.scaled(UNIT as i64),
        "96..128",
        "{doubled:?}"
    );
    assert!(doubled.loop_count_only(), "{doubled:?}");
    // More steps, and a tile never met while another is met too often: a wrong
    // tile was fed, not only too many.
    let stale = operand(&fragments(&a, 0..16, 32, &[0, 0, 1, 1, 1, 3]), &a);
    assert!(
        !stale.k_never.is_empty() && !stale.loop_count_only(),
        "{stale:?}"
    );
}

#[test]
fn every_row_fed_the_wrong_k_tiles_is_not_a_stray_row() {
    // Tile t % 2 at every step: each row still consumes as much as the others.
    let a = wide(64, 128, 11);
    let report = operand(&fragments(&a, 0..16, 32, &[0, 1, 0, 1]), &a);
    assert!(report.stray_rows.is_empty());
    assert_eq!(report.rows.to_string(), "0..16");
    assert_eq!(report.k_never.scaled(UNIT as i64), "64..128");
    assert_eq!(report.k_extra.scaled(UNIT as i64), "0..64");
}

#[test]
fn values_sharing_coordinates_are_told_apart_by_order() {
    // Two MMA tiles (rows 0..16 and 16..32) probed with the same local coordinates,
    // the second tile's values after the first's.
    let a = wide(64, 64, 12);
    let mut b = Builder::default();
    for (step, t) in [0usize, 1].into_iter().enumerate() {
        let values: Vec<_> = [0usize, 16]
            .into_iter()
            .flat_map(|base| {
                let a = &a;
                (0..16).flat_map(move |m| {
                    (0..32).map(move |k| {
                        (a.data[(base + m) * 64 + t * 32 + k], m as i32, -1, k as i32)
                    })
                })
            })
            .collect();
        b.push(record(Kind::OperandA, 0, step as i32), values);
    }
    let report = operand(&b.trace, &a);
    assert!(report.clean(), "{report:?}");
    assert_eq!(report.collided, 2 * 16 * 32);
    assert_eq!(report.rows.to_string(), "0..32");
}

#[test]
fn an_accumulator_with_a_second_set_is_partly_placed() {
    let (a, b) = (wide(32, 64, 13), wide(32, 64, 14));
    let p = Product::of(&a, &b).unwrap();
    let mut builder = Builder::default();
    // Layer 0: the product's tile at (0, 16); layer 1 (same coordinates): half sums.
    let tile: Vec<_> = square(0, 8)
        .map(|(m, n)| (p.get(m, n + 16).unwrap() as f32, m as i32, n as i32, -1))
        .chain(square(0, 8).map(|(m, n)| {
            (
                p.get(m, n + 16).unwrap() as f32 * 0.5 + 0.25,
                m as i32,
                n as i32,
                -1,
            )
        }))
        .collect();
    builder.push(record(Kind::Accumulator, 0, -1), tile);
    let report = locate_accumulators(&builder.trace, &p);
    assert_eq!(report.groups[0].layers.len(), 2);
    assert_eq!(report.layers(), (2, 1));
    assert!(!report.right() && report.partly() && report.nowhere() == 0);
}

/// The final accumulator of `t` against the product of its traced operands.
fn product(t: &Trace) -> TracedProduct {
    TracedOperands::of(t).product(t)
}

/// A full trace of one CTA tile (rows 0..16 of A, 0..16 of B, K = 64 in K tiles of
/// 32, k local to its K tile): operand B as the kernel read it, `read_b(n, k)` at
/// global k, operand A straight from the input, and the accumulator holding
/// `Σ A(m, k) · read_b(n, k)` plus `bump` on cell (0, 0). Operand coordinates are
/// moved by `operand_origin` from the accumulator's.
fn read_as(
    a: &Matrix,
    read_b: impl Fn(usize, usize) -> f32,
    bump: f32,
    operand_origin: i32,
) -> Trace {
    let mut t = Builder::default();
    let (bk, tiles) = (32, 2);
    for step in 0..tiles {
        for warp in 0..2 {
            // Two warps read the same tile: their values agree at every key.
            let a_vals = (0..16).flat_map(|m| {
                (0..bk).map(move |k| {
                    let v = a.data[m * a.cols + step * bk + k];
                    (v, m as i32 + operand_origin, -1, k as i32)
                })
            });
            t.push(
                record(Kind::OperandA, warp, step as i32),
                a_vals.collect::<Vec<_>>(),
            );
            let b_vals: Vec<_> = (0..16)
                .flat_map(|n| (0..bk).map(move |k| (n, k)))
                .map(|(n, k)| {
                    (
                        read_b(n, step * bk + k),
                        -1,
                        n as i32 + operand_origin,
                        k as i32,
                    )
                })
                .collect();
            t.push(record(Kind::OperandB, warp, step as i32), b_vals);
        }
    }
    let acc: Vec<_> = square(0, 16)
        .map(|(m, n)| {
            let s: f32 = (0..bk * tiles)
                .map(|k| a.data[m as usize * a.cols + k] * read_b(n as usize, k))
                .sum();
            let v = if (m, n) == (0, 0) { s + bump } else { s };
            (v, m as i32, n as i32, -1)
        })
        .collect();
    t.push(record(Kind::Accumulator, 0, -1), acc);
    t.trace
}

#[test]
fn an_accumulator_of_the_traced_operands_vouches_for_their_coordinates() {
    let a = wide(16, 64, 3);
    let b = wide(64, 64, 4);
    // B (stored [N, K]) read as if stored [K, N]: B(n, k) = b[k * N + n], with N = 64.
    let transposed = |n: usize, k: usize| b.data[k * 64 + n];
    let p = product(&read_as(&a, transposed, 0.0, 0));
    assert!(p.explains(), "{p:?}");
    assert_eq!(
        (p.cells, p.checked, p.matched, p.shift),
        (256, 256, 256, (0, 0))
    );
    assert!(p.describe().contains("256 of 256"), "{}", p.describe());
    // One cell off: the MMA did not consume what the probes show.
    let off = product(&read_as(&a, transposed, 1.0, 0));
    assert!(!off.explains());
    assert_eq!((off.checked, off.matched), (256, 255));
    // Operand coordinates in another frame (from 64) are moved to the accumulator's.
    let moved = product(&read_as(&a, transposed, 0.0, 64));
    assert!(moved.explains(), "{moved:?}");
    assert_eq!(moved.shift, (64, 64));
    assert!(moved.describe().contains("moved by (64, 64)"));
}

#[test]
fn a_traced_product_is_not_judged_on_disagreeing_or_missing_values() {
    let a = wide(16, 64, 3);
    let b = wide(64, 64, 4);
    let straight = |n: usize, k: usize| b.data[n * 64 + k];
    // Two warps that read one key differently: the probes contradict each other.
    let mut t = read_as(&a, straight, 0.0, 0);
    let first_b = t
        .tiles
        .iter()
        .position(|v| t.records[v.record as usize].kind() == Some(Kind::OperandB))
        .unwrap();
    t.tiles[first_b].value += 1.0;
    let p = product(&t);
    assert!(!p.explains());
    assert!(
        p.unjudged.as_deref().unwrap().contains("two values"),
        "{p:?}"
    );
    // No operand B at all.
    let mut no_b = read_as(&a, straight, 0.0, 0);
    let records = no_b.records.clone();
    no_b.tiles
        .retain(|v| records[v.record as usize].kind() != Some(Kind::OperandB));
    let q = product(&no_b);
    assert!(!q.explains() && q.unjudged.is_some(), "{q:?}");
    assert!(q.describe().contains("not judged"));
}

#[test]
fn an_operand_read_with_its_dimensions_swapped_is_named() {
    let a = wide(16, 64, 3);
    let b = wide(64, 64, 4);
    let swapped = read_as(&a, |n, k| b.data[k * 64 + n], 0.0, 0);
    assert!(TracedOperands::of(&swapped).read_swapped(Kind::OperandB, &b));
    assert!(!TracedOperands::of(&swapped).read_swapped(Kind::OperandA, &a));
    let straight = read_as(&a, |n, k| b.data[n * 64 + k], 0.0, 0);
    assert!(!TracedOperands::of(&straight).read_swapped(Kind::OperandB, &b));
}

#[test]
fn an_accumulator_without_coordinates_is_matched_as_a_multiset() {
    let a = wide(16, 64, 3);
    let b = wide(64, 64, 4);
    let transposed = |n: usize, k: usize| b.data[k * 64 + n];
    let strip = |mut t: Trace| {
        let records = t.records.clone();
        for v in &mut t.tiles {
            if records[v.record as usize].kind() == Some(Kind::Accumulator) {
                (v.m, v.n) = (-1, -1);
            }
        }
        // Raw register order is no order of (m, n).
        t.tiles.reverse();
        t
    };
    let p = product(&strip(read_as(&a, transposed, 0.0, 0)));
    assert!(p.explains() && p.multiset, "{p:?}");
    assert!(
        p.describe().contains("sorted, 256 of its 256"),
        "{}",
        p.describe()
    );
    // One value off, or operands moved to another frame (rows do not matter to a
    // multiset): the first fails, the second still matches.
    assert!(!product(&strip(read_as(&a, transposed, 1.0, 0))).explains());
    assert!(product(&strip(read_as(&a, transposed, 0.0, 64))).explains());
    // A K slice paired with the wrong one in B shows: the pairing along K is judged.
    let shuffled = |n: usize, k: usize| transposed(n, k ^ 1);
    let mut t = strip(read_as(&a, transposed, 0.0, 0));
    let records = t.records.clone();
    let mut i = 0;
    for v in &mut t.tiles {
        if records[v.record as usize].kind() == Some(Kind::OperandB) {
            let k = (records[v.record as usize].k_tile * 32 + v.k) as usize;
            v.value = shuffled(v.n as usize, k);
            i += 1;
        }
    }
    assert!(i > 0);
    assert!(!product(&t).explains());
    // Products that are not exact in fp32 are not matched as a multiset.
    let mut inexact = strip(read_as(&a, transposed, 0.0, 0));
    for v in &mut inexact.tiles {
        v.value *= 0.1;
    }
    let q = product(&inexact);
    assert!(!q.explains() && q.unjudged.is_some(), "{q:?}");
}

#[test]
fn a_peeled_first_k_tile_counts_and_a_swapped_read_is_found_at_any_tile_index() {
    let a = wide(16, 64, 3);
    let b = wide(64, 64, 4);
    let mut t = read_as(&a, |n, k| b.data[k * 64 + n], 0.0, 0);
    // K tile 0 as a peeled first MMA outside the loop records it (K tile -1).
    for r in &mut t.records {
        if r.kind() != Some(Kind::Accumulator) && r.k_tile == 0 {
            r.k_tile = -1;
        }
    }
    assert!(product(&t).explains());
    assert!(TracedOperands::of(&t).read_swapped(Kind::OperandB, &b));
}

/// `Σ_k x(m, π_m(k)) · y(n, π_n(k))` with π_r the 128-byte swizzle's chunk permutation
/// of row r (chunk j read from chunk j ^ (r % 8) of its 64-wide K tile), or none.
fn read_product(x: &Matrix, y: &Matrix, m: usize, n: usize, swizzled: bool) -> f32 {
    let at = |mat: &Matrix, r: usize, k: usize| {
        mat.data[r * mat.cols + if swizzled { swizzle_swapped_k(r, k) } else { k }]
    };
    (0..x.cols).map(|k| at(x, m, k) * at(y, n, k)).sum()
}

#[test]
fn an_accumulator_of_tiles_read_with_the_other_swizzle_is_recognised() {
    let a = wide(16, 128, 8);
    let b = wide(16, 128, 9);
    let rows: Vec<usize> = (0..16).collect();
    let trace = |swizzled: bool| {
        let mut t = Builder::default();
        let acc: Vec<_> = square(0, 16)
            .map(|(m, n)| {
                (
                    read_product(&a, &b, m as usize, n as usize, swizzled),
                    -1,
                    -1,
                    -1,
                )
            })
            .collect();
        t.push(record(Kind::Accumulator, 0, -1), acc);
        t.trace
    };
    let p = check_swizzle_mismatch(&trace(true), &a, &b, &rows, &rows);
    assert!(p.explains() && p.multiset, "{p:?}");
    // The product the tiles hold as written is no such reading.
    let q = check_swizzle_mismatch(&trace(false), &a, &b, &rows, &rows);
    assert!(!q.explains() && q.unjudged.is_none(), "{q:?}");
    // K not whole 64-wide tiles: nothing judged.
    let narrow = wide(16, 96, 8);
    let r = check_swizzle_mismatch(&trace(true), &narrow, &narrow, &rows, &rows);
    assert!(r.unjudged.is_some());
}

#[test]
fn the_other_swizzle_is_checked_cell_by_cell_where_the_accumulator_has_coordinates() {
    // Rows 16..32 of A and B consumed; the accumulator at (m, n) in the inputs' frame,
    // or local to the tile (0..16), is held there or moved to them.
    let a = wide(32, 128, 11);
    let b = wide(32, 128, 12);
    let rows: Vec<usize> = (16..32).collect();
    let trace = |origin: i64, bump: f32| {
        let mut t = Builder::default();
        let acc: Vec<_> = square(0, 16)
            .map(|(m, n)| {
                let v = read_product(&a, &b, 16 + m as usize, 16 + n as usize, true);
                let v = if (m, n) == (3, 4) { v + bump } else { v };
                (v, (origin + m) as i32, (origin + n) as i32, -1)
            })
            .collect();
        t.push(record(Kind::Accumulator, 0, -1), acc);
        t.trace
    };
    let p = check_swizzle_mismatch(&trace(16, 0.0), &a, &b, &rows, &rows);
    assert!(p.explains() && !p.multiset && p.shift == (0, 0), "{p:?}");
    let local = check_swizzle_mismatch(&trace(0, 0.0), &a, &b, &rows, &rows);
    assert!(local.explains() && local.shift == (16, 16), "{local:?}");
    let off = check_swizzle_mismatch(&trace(16, 1.0), &a, &b, &rows, &rows);
    assert_eq!((off.checked, off.matched), (256, 255), "{off:?}");
    assert!(!off.explains());
}

#[test]
fn tiles_mostly_zero_fill_are_still_read_and_the_missing_k_named() {
    // A map whose bounds cut K at 64: K tile 0 holds the input, tiles 1..3 only zeros
    // (out-of-bounds fill). A quarter of the runs are located; the zeros do not make
    // the tile unreadable.
    let a = wide(32, 256, 10);
    let mut b = Builder::default();
    for t in 0..4 {
        let tile = if t == 0 {
            shared_tile(&a, 0..32, t, false)
        } else {
            vec![0.0; 32 * 64]
        };
        b.push(
            record(Kind::OperandA, 0, t as i32),
            tile.into_iter().map(|v| (v, -1, -1, -1)),
        );
    }
    let report = operand(&b.trace, &a);
    assert!(report.readable() && !report.clean(), "{report:?}");
    assert_eq!(report.unmatched_zero, 3 * 32 * 8);
    let text = report.describe();
    assert!(text.contains("k 64..256 never consumed"), "{text}");
    assert!(!text.contains("the K loop consumed"), "{text}");
    // Zeros alone locate nothing: unreadable.
    let mut z = Builder::default();
    z.push(
        record(Kind::OperandA, 0, 0),
        vec![(0.0, -1, -1, -1); 32 * 64],
    );
    assert!(!operand(&z.trace, &a).readable());
}

/// A CTA whose threads stride over its 32x32 tile (CuTe's `local_partition` with a
/// 16x16 thread layout: a warp of 32 threads holds every row of two columns in each
/// 16), recorded without coordinates: no warp's values are a tile, the CTA's are.
fn strided_cta(p: &Product, at: (i64, i64), off: Option<usize>) -> Trace {
    let mut b = Builder::default();
    let mut index = 0;
    for warp in 0..8u32 {
        let mut values = Vec::new();
        for lane in 0..32i64 {
            let t = i64::from(warp) * 32 + lane;
            let (tm, tn) = (t % 16, t / 16);
            for (i, j) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                let (m, n) = (tm + 16 * i, tn + 16 * j);
                let mut v = p.get(at.0 + m, at.1 + n).unwrap() as f32;
                if off == Some(index) {
                    v += 1.0;
                }
                index += 1;
                values.push((v, -1, -1, -1));
            }
        }
        b.push(record(Kind::Accumulator, warp, -1), values);
    }
    b.trace
}

#[test]
fn warps_strided_over_the_cta_tile_are_placed_by_the_whole_cta() {
    let (a, b) = (wide(64, 96, 8), wide(64, 96, 9));
    let p = Product::of(&a, &b).unwrap();
    let report = locate_accumulators(&strided_cta(&p, (32, 0), None), &p);
    assert!(report.right(), "{report:?}");
    let tile = Placement::Tile {
        m0: 32,
        n0: 0,
        rows: 32,
        cols: 32,
    };
    assert!(report.groups.iter().all(|g| g.layers == [tile]));
    // One value wrong in one warp: the CTA's multiset breaks, so no warp is placed.
    let report = locate_accumulators(&strided_cta(&p, (32, 0), Some(77)), &p);
    assert_eq!(report.nowhere(), 8);
}

#[test]
fn a_narrow_accumulator_is_compared_within_its_drift() {
    let (a, b) = (wide(16, 1024, 5), wide(16, 1024, 6));
    let f32 = Product::of(&a, &b).unwrap();
    let f16 = Product::accumulated(&a, &b, 11).unwrap();
    assert!(f32.is_exact() && !f16.is_exact());
    assert!(f16.compared().contains("11-bit"));
    // The sum as an f16 accumulator holds it: rounded to 11 bits (to nearest, ties to
    // even) after each step, the most roundings a kernel can make.
    let rounded = |m: usize, n: usize, skip: std::ops::Range<usize>| {
        let mut s = 0.0f64;
        for k in (0..1024).filter(|k| !skip.contains(k)) {
            s += f64::from(a.data[m * 1024 + k]) * f64::from(b.data[n * 1024 + k]);
            if s != 0.0 {
                let e = s.abs().log2().floor() as i32 - 10;
                s = (s / 2f64.powi(e)).round_ties_even() * 2f64.powi(e);
            }
        }
        s as f32
    };
    let mut off_f32 = 0;
    for (m, n) in (0..16).flat_map(|m| (0..16).map(move |n| (m, n))) {
        let v = rounded(m, n, 0..0);
        assert!(
            f16.matches(m as i64, n as i64, v),
            "({m}, {n}): {v} for {:?}",
            f32.get(m as i64, n as i64)
        );
        off_f32 += usize::from(!f32.matches(m as i64, n as i64, v));
    }
    assert!(off_f32 > 0, "f16 rounding shows against the exact product");
    // A K tile of 64 dropped is no rounding.
    let dropped = (0..16)
        .flat_map(|m| (0..16).map(move |n| (m, n)))
        .filter(|&(m, n)| !f16.matches(m as i64, n as i64, rounded(m, n, 960..1024)))
        .count();
    assert!(
        dropped > 200,
        "{dropped} of 256 cells show the dropped tile"
    );
}

/// A final accumulator over cells `cells` of `acc(m, n) = Σ_k A(m, a_k(k)) B(n, k)`
/// counted `times(k)` times: the K loop a defect leaves.
fn accumulated(
    a: &Matrix,
    b: &Matrix,
    cells: impl Iterator<Item = (i64, i64)>,
    a_k: impl Fn(usize) -> Option<usize>,
    times: impl Fn(usize) -> f32,
) -> Trace {
    let mut t = Builder::default();
    let values: Vec<_> = cells
        .map(|(m, n)| {
            let v: f32 = (0..a.cols)
                .map(|k| {
                    let x = a_k(k).map_or(0.0, |ka| a.data[m as usize * a.cols + ka]);
                    times(k) * x * b.data[n as usize * b.cols + k]
                })
                .sum();
            (v, m as i32, n as i32, -1)
        })
        .collect();
    t.push(record(Kind::Accumulator, 0, -1), values);
    t.trace
}

#[test]
fn a_k_loop_that_drops_or_doubles_a_tile_is_a_sum_of_matched_slices() {
    let (a, b) = (wide(32, 128, 21), wide(32, 128, 22));
    let p = Product::of(&a, &b).unwrap();
    // The last tile of 32 k dropped.
    let t = accumulated(
        &a,
        &b,
        square(0, 32),
        Some,
        |k| if k >= 96 { 0.0 } else { 1.0 },
    );
    let c = check_slice_counts(&t, &a, &b, &p, (0, 0));
    assert_eq!(
        c.reading(),
        Some(SliceReading::LoopCount),
        "{}",
        c.describe()
    );
    assert!(
        c.describe().contains("k 96..128 never accumulated"),
        "{}",
        c.describe()
    );
    // Every step's MMA issued twice.
    let t = accumulated(&a, &b, square(0, 32), Some, |_| 2.0);
    let c = check_slice_counts(&t, &a, &b, &p, (0, 0));
    assert_eq!(
        c.reading(),
        Some(SliceReading::LoopCount),
        "{}",
        c.describe()
    );
    // A tile fed in another's place, for both operands: matched, displaced.
    let t = accumulated(&a, &b, square(0, 32), Some, |k| match k / 32 {
        0 => 0.0,
        1 => 2.0,
        _ => 1.0,
    });
    let c = check_slice_counts(&t, &a, &b, &p, (0, 0));
    assert_eq!(
        c.reading(),
        Some(SliceReading::Displaced),
        "{}",
        c.describe()
    );
    // A correct accumulator reads as no defect.
    let t = accumulated(&a, &b, square(0, 32), Some, |_| 1.0);
    let c = check_slice_counts(&t, &a, &b, &p, (0, 0));
    assert_eq!((c.reading(), c.off), (None, 0), "{}", c.describe());
}

#[test]
fn a_read_one_k_tile_ahead_is_no_sum_of_matched_slices() {
    let (a, b) = (wide(32, 128, 23), wide(32, 128, 24));
    let p = Product::of(&a, &b).unwrap();
    // A's load one tile of 32 ahead of B's; past the end it reads zeros.
    let ahead = |k: usize| (k + 32 < 128).then_some(k + 32);
    let t = accumulated(&a, &b, square(0, 32), ahead, |_| 1.0);
    let c = check_slice_counts(&t, &a, &b, &p, (0, 0));
    assert_eq!(
        c.reading(),
        Some(SliceReading::Unpaired),
        "{}",
        c.describe()
    );
    assert!(
        c.describe().contains("another k or row"),
        "{}",
        c.describe()
    );
    // Another tile's rows of A.
    let mut t = Builder::default();
    let values: Vec<_> = square(0, 16)
        .map(|(m, n)| (p.get(m + 16, n).unwrap() as f32, m as i32, n as i32, -1))
        .collect();
    t.push(record(Kind::Accumulator, 0, -1), values);
    let c = check_slice_counts(&t.trace, &a, &b, &p, (0, 0));
    assert_eq!(
        c.reading(),
        Some(SliceReading::Unpaired),
        "{}",
        c.describe()
    );
}

#[test]
fn slice_counts_judge_only_what_they_can() {
    let (a, b) = (wide(32, 128, 25), wide(32, 128, 26));
    let p = Product::of(&a, &b).unwrap();
    // Fewer cells than twice the slices.
    let t = accumulated(&a, &b, square(0, 5), Some, |_| 2.0);
    let c = check_slice_counts(&t, &a, &b, &p, (0, 0));
    assert_eq!(c.reading(), None);
    assert!(
        c.unjudged
            .as_deref()
            .unwrap()
            .contains("cells for 16 slices")
    );
    // No coordinates.
    let t = accumulator_trace(&p, square(0, 32), (0, 0), false);
    let c = check_slice_counts(&t, &a, &b, &p, (0, 0));
    assert!(
        c.unjudged
            .as_deref()
            .unwrap()
            .contains("without coordinates")
    );
    // Moved into the problem's frame by the caller's shift.
    let t = accumulated(&a, &b, square(16, 32), Some, |_| 2.0);
    let mut local = t.clone();
    for v in &mut local.tiles {
        v.m -= 16;
        v.n -= 16;
    }
    let c = check_slice_counts(&local, &a, &b, &p, (16, 16));
    assert_eq!(
        c.reading(),
        Some(SliceReading::LoopCount),
        "{}",
        c.describe()
    );
    // An inexact product is not judged.
    let half = Matrix::new(32, 128, a.data.iter().map(|v| v + 0.5).collect()).unwrap();
    let q = Product::of(&half, &b).unwrap();
    let c = check_slice_counts(&t, &half, &b, &q, (0, 0));
    assert!(c.unjudged.as_deref().unwrap().contains("not exact"));
}

/// One CTA tile of 16 × 16 over K = 32: operands A and B straight from the inputs,
/// and the accumulator `Σ A(m, k) · B(n, k)`, or with `swapped` the MMA fed B as A and
/// A as B: `Σ B(m, k) · A(n, k)`.
fn fed(a: &Matrix, b: &Matrix, swapped: bool) -> Trace {
    let mut t = Builder::default();
    let rows = |x: &Matrix, kind: Kind| {
        (0..16usize)
            .flat_map(|r| (0..32usize).map(move |k| (r, k)))
            .map(|(r, k)| {
                let v = x.data[r * x.cols + k];
                if kind == Kind::OperandA {
                    (v, r as i32, -1, k as i32)
                } else {
                    (v, -1, r as i32, k as i32)
                }
            })
            .collect::<Vec<_>>()
    };
    t.push(record(Kind::OperandA, 0, 0), rows(a, Kind::OperandA));
    t.push(record(Kind::OperandB, 0, 0), rows(b, Kind::OperandB));
    let (first, second) = if swapped { (b, a) } else { (a, b) };
    let acc: Vec<_> = square(0, 16)
        .map(|(m, n)| {
            let s: f32 = (0..32)
                .map(|k| {
                    first.data[m as usize * first.cols + k]
                        * second.data[n as usize * second.cols + k]
                })
                .sum();
            (s, m as i32, n as i32, -1)
        })
        .collect();
    t.push(record(Kind::Accumulator, 0, -1), acc);
    t.trace
}

#[test]
fn an_accumulator_of_the_operands_fed_the_wrong_way_round_is_their_swapped_product() {
    let (a, b) = (wide(16, 32, 21), wide(16, 32, 22));
    let swapped = fed(&a, &b, true);
    let operands = TracedOperands::of(&swapped);
    assert!(!operands.product(&swapped).explains());
    let p = operands.swapped_product(&swapped);
    assert!(p.explains(), "{p:?}");
    assert_eq!((p.cells, p.matched), (256, 256));
    // Fed the right way round, the swapped product does not explain it.
    let right = fed(&a, &b, false);
    let operands = TracedOperands::of(&right);
    assert!(operands.product(&right).explains());
    assert!(!operands.swapped_product(&right).explains());
}

#[test]
fn a_tile_mirrored_across_its_diagonal_is_its_transpose_and_only_a_square_one_is_judged() {
    let (a, b) = (wide(32, 64, 31), wide(32, 64, 32));
    let p = Product::of(&a, &b).unwrap();
    let tile = |rows: i64, cols: i64, mirrored: bool| {
        let mut t = Builder::default();
        let values: Vec<_> = (16..16 + rows)
            .flat_map(|m| (0..cols).map(move |n| (m, n)))
            .map(|(m, n)| {
                let v = if mirrored {
                    p.get(16 + n, m - 16).unwrap()
                } else {
                    p.get(m, n).unwrap()
                };
                (v as f32, m as i32, n as i32, -1)
            })
            .collect();
        t.push(record(Kind::Accumulator, 0, -1), values);
        t.trace
    };
    let mirrored = crate::transposed_tile(&tile(16, 16, true), &p, (0, 0));
    assert!(mirrored.explains(), "{mirrored:?}");
    assert_eq!((mirrored.cells, mirrored.matched), (256, 256));
    let right = crate::transposed_tile(&tile(16, 16, false), &p, (0, 0));
    assert!(!right.explains() && right.matched < 256, "{right:?}");
    let oblong = crate::transposed_tile(&tile(16, 8, false), &p, (0, 0));
    assert!(oblong.unjudged.as_deref().unwrap().contains("not square"));
}

#[test]
fn a_few_cells_off_every_count_are_no_unpaired_reading() {
    let few = crate::SliceCounts {
        cells: 100,
        slices: 16,
        off: 3,
        ..crate::SliceCounts::default()
    };
    assert_eq!(few.reading(), None);
    let most = crate::SliceCounts {
        off: 60,
        ..few.clone()
    };
    assert_eq!(most.reading(), Some(crate::SliceReading::Unpaired));
    let multiples = crate::SliceCounts {
        per_cell_multiples: true,
        ..most
    };
    assert_eq!(multiples.reading(), Some(crate::SliceReading::LoopCount));
}

mod exchange {
    use crate::{Exchange, Matrix, ProvenanceIndex, UNIT, Unit, Units, check_exchange};

    fn units(rows: &[(&Matrix, usize)]) -> Units {
        let mut out = Units::default();
        for (record, (m, row)) in rows.iter().enumerate() {
            for s in 0..m.cols / UNIT {
                let mut values = [0.0; UNIT];
                values.copy_from_slice(&m.row(*row)[s * UNIT..(s + 1) * UNIT]);
                out.units.push(Unit {
                    record: record as u32,
                    warp: 0,
                    values,
                    coords: None,
                    element: 0,
                });
            }
        }
        out
    }

    #[test]
    fn runs_of_both_inputs_are_mixed_and_of_one_input_are_not() {
        let (a, b) = (Matrix::wide_int(4, 64, 5), Matrix::wide_int(4, 64, 6));
        let (ia, ib) = (ProvenanceIndex::new(&a), ProvenanceIndex::new(&b));
        let mixed = check_exchange(&units(&[(&a, 0), (&a, 1), (&b, 2)]), &ia, &ib);
        assert_eq!(
            mixed,
            Exchange {
                runs: 24,
                own: 16,
                other: 8,
                neither: 0
            }
        );
        assert!(mixed.mixed());
        // Wholly the other input's (a swap-AB frame), or wholly its own: no mixture.
        assert!(!check_exchange(&units(&[(&b, 0), (&b, 1)]), &ia, &ib).mixed());
        assert!(!check_exchange(&units(&[(&a, 0), (&a, 3)]), &ia, &ib).mixed());
        // Zero runs (padding) are not counted at all.
        let zeros = Matrix::new(1, 64, vec![0.0; 64]).unwrap();
        let x = check_exchange(&units(&[(&zeros, 0), (&a, 0)]), &ia, &ib);
        assert_eq!((x.runs, x.own), (8, 8));
    }
}
