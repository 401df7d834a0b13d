use kwb_runtime::{Kind, RECORD_MAGIC, Trace, TraceRecord};

use crate::{Confound, OnesRun, OutputCheck, Stage, Status, judge_ones};

/// A record of `kind` at `k_tile` whose `count` values range over `min..=max`.
fn record(kind: Kind, k_tile: i32, min: f32, max: f32, count: u32) -> TraceRecord {
    TraceRecord {
        magic: RECORD_MAGIC,
        version: kwb_runtime::VERSION,
        site: kind as u32,
        kind: kind as u32,
        tag: 0,
        cta_x: 0,
        cta_y: 0,
        cta_z: 0,
        warp: 0,
        lane: 0,
        active_mask: u32::MAX,
        k_tile,
        tile_m: 0,
        tile_n: 0,
        row_bound: i32::MAX,
        row_axis: 0,
        count,
        absmax: min.abs().max(max.abs()),
        vmin: min,
        vmax: max,
        nan_count: 0,
        inf_count: 0,
        seen: count,
        nvalues: 0,
        values: [0.0; 8],
        value_m: [-1; 8],
        value_n: [-1; 8],
        value_k: [-1; 8],
    }
}

fn trace(records: Vec<TraceRecord>) -> Trace {
    Trace {
        sites: Vec::new(),
        records,
        dropped: 0,
        capacity: 1 << 16,
        tiles: Vec::new(),
        tile_dropped: 0,
        tile_capacity: 0,
        ..Trace::default()
    }
}

/// A clean trace of a K = 4 x 32 problem on all-ones: operands 1, the accumulator
/// 32, 64, 96, 128 after each K tile and 128 after the mainloop, the epilogue 256
/// (alpha 2).
fn clean_ones() -> Vec<TraceRecord> {
    let mut records = vec![
        record(Kind::OperandA, 0, 1.0, 1.0, 512),
        record(Kind::OperandB, 0, 1.0, 1.0, 512),
    ];
    for t in 0..4 {
        records.push(record(
            Kind::Accumulator,
            t,
            32.0 * (t + 1) as f32,
            32.0 * (t + 1) as f32,
            4096,
        ));
    }
    records.push(record(Kind::Accumulator, -1, 128.0, 128.0, 4096));
    records.push(record(Kind::Epilogue, -1, 256.0, 256.0, 4096));
    records
}

fn run(m: u64, n: u64, mismatches: u64, ratio: f64) -> OnesRun {
    OnesRun {
        m,
        n,
        k: 128,
        output: Some(OutputCheck {
            mismatches,
            nan: 0,
            inf: 0,
            ratio,
            wrong_tiles: (mismatches > 0).then(|| every_tile(m as usize, n as usize)),
        }),
        one_launch: false,
    }
}

/// Every 128 x 128 tile of an `m` x `n` output wrong.
fn every_tile(m: usize, n: usize) -> crate::WrongTiles {
    crate::WrongTiles::of(m, n, (128, 128), &vec![true; m * n])
}

#[test]
fn an_exact_trace_whose_output_nobody_checked_does_not_clear_the_epilogue() {
    let unchecked = OnesRun {
        output: None,
        ..run(256, 256, 0, 1.0)
    };
    let f = judge_ones(&trace(clean_ones()), &unchecked);
    assert_eq!((f.stage, f.clean), (None, false));
    assert!(
        f.summary.contains("the epilogue is not cleared"),
        "{}",
        f.summary
    );
    assert!(
        f.evidence
            .iter()
            .any(|l| l == "output on ones: not checked")
    );
}

#[test]
fn a_clean_trace_on_a_right_output_is_clean_and_names_no_stage() {
    let f = judge_ones(&trace(clean_ones()), &run(256, 256, 0, 1.0));
    assert_eq!(f.stage, None);
    assert!(f.clean);
    assert_eq!(f.status, Status::Draft, "ones cannot see a permutation");
    assert!(f.fits(None));
}

#[test]
fn an_output_wrong_away_from_the_traced_ctas_origin_is_no_epilogue_verdict() {
    let mut records = clean_ones();
    for r in &mut records {
        (r.tile_m, r.tile_n) = (128, 0);
    }
    // 256 x 256 in 128 x 128 tiles; only tile (1, 1) wrong.
    let wrong: Vec<bool> = (0..256 * 256)
        .map(|i| i / 256 >= 128 && i % 256 >= 128)
        .collect();
    let mut ones = run(256, 256, 16384, 1.0);
    ones.output.as_mut().unwrap().wrong_tiles =
        Some(crate::WrongTiles::of(256, 256, (128, 128), &wrong));
    let f = judge_ones(&trace(records.clone()), &ones);
    assert!(
        f.summary
            .contains("the traced tile (rows 128..256, columns 0..128) holds no wrong output"),
        "{}",
        f.summary
    );
    assert_eq!(
        (f.stage, f.status, f.confound.clone()),
        (
            Some(Stage::Epilogue),
            Status::Draft,
            Some(Confound::ElsewhereThanTraced)
        ),
        "{}",
        f.summary
    );
    // A trace of the wrong tile (1, 1) itself: the epilogue.
    for r in &mut records {
        (r.tile_m, r.tile_n) = (128, 128);
    }
    let f = judge_ones(&trace(records), &ones);
    assert_eq!(
        (f.stage, f.status),
        (Some(Stage::Epilogue), Status::Verdict),
        "{}",
        f.summary
    );
}

mod places {
    use crate::{Located, Region, WrongTiles};

    #[test]
    fn wrong_tiles_count_per_tile_and_locate_a_region() {
        // 200 x 300 in 128 x 128 tiles: 2 x 3 tiles, the last row and column partial.
        let wrong: Vec<bool> = (0..200 * 300)
            .map(|i| i == 199 * 300 + 299 || i == 5)
            .collect();
        let w = WrongTiles::of(200, 300, (128, 128), &wrong);
        assert_eq!((w.rows(), w.cols()), (2, 3));
        assert_eq!(w.wrong, vec![(0, 0, 1), (1, 2, 1)]);
        assert!(!w.all());
        let at = |m0, n0| Region {
            m0,
            m1: m0 + 1,
            n0,
            n1: n0 + 1,
        };
        assert_eq!(w.locate(Some(&at(150, 260))), Located::Inside);
        assert_eq!(
            w.locate(Some(&at(0, 130))),
            Located::Outside {
                first: Region {
                    m0: 0,
                    m1: 128,
                    n0: 0,
                    n1: 128
                }
            }
        );
        assert_eq!(w.locate(None), Located::Unknown);
        let every = WrongTiles::of(200, 300, (128, 128), &vec![true; 200 * 300]);
        assert!(every.all());
        assert_eq!(every.locate(None), Located::Inside);
        assert_eq!(w.union(&every).unwrap().wrong.len(), 6);
        let other = WrongTiles::of(200, 300, (64, 64), &wrong);
        assert_eq!(w.union(&other), None);
    }

    #[test]
    fn a_guessed_tile_places_nothing_by_an_origin_alone() {
        // Wrong in rows 64..128 only; the kernel's real tile could be 64 x 64.
        let wrong: Vec<bool> = (0..256 * 256)
            .map(|i| (64..128).contains(&(i / 256)))
            .collect();
        let guessed = WrongTiles::of(256, 256, (128, 128), &wrong).with_tile_guessed();
        let origin = Region {
            m0: 0,
            m1: 1,
            n0: 0,
            n1: 1,
        };
        // With the 128 x 128 tile known, the tile at (0, 0) holds rows 64..128.
        assert_eq!(
            WrongTiles::of(256, 256, (128, 128), &wrong).locate(Some(&origin)),
            Located::Inside
        );
        // A guess cannot say whether the CTA at (0, 0) reaches row 64.
        assert_eq!(guessed.locate(Some(&origin)), Located::Unknown);
        // A region read from the accumulator's coordinates needs no tile.
        let rows = Region {
            m0: 64,
            m1: 128,
            n0: 0,
            n1: 64,
        };
        assert_eq!(guessed.locate(Some(&rows)), Located::Inside);
        let above = Region {
            m0: 0,
            m1: 64,
            n0: 0,
            n1: 64,
        };
        assert!(matches!(
            guessed.locate(Some(&above)),
            Located::Outside { .. }
        ));
        // Every 16 x 16 block wrong: every CTA tile is, whatever its size.
        let all = WrongTiles::of(256, 256, (128, 128), &vec![true; 256 * 256]).with_tile_guessed();
        assert_eq!(all.locate(None), Located::Inside);
    }
}

/// Two invocations mixed in one ungated trace: the first layer's operands are 1, the
/// second's (the first layer's uniform output) 128; each record is uniform.
fn two_layers(tag: u32) -> Vec<TraceRecord> {
    let mut records = clean_ones();
    let mut second = record(Kind::OperandA, 0, 128.0, 128.0, 4096);
    second.warp = 1;
    records.push(second);
    for r in &mut records {
        r.tag = tag;
    }
    records
}

#[test]
fn an_ungated_trace_of_two_layers_is_a_layer_mixing_draft_not_an_operand_verdict() {
    let ungated = kwb_runtime::tag(kwb_runtime::UNGATED);
    let f = judge_ones(&trace(two_layers(ungated)), &run(256, 256, 0, 1.0));
    assert_eq!(
        (f.stage, f.status, f.confound.clone()),
        (
            Some(Stage::OperandLoad),
            Status::Draft,
            Some(Confound::LayerMixing { values: 2 })
        ),
        "{}",
        f.summary
    );
    // With every rung right, the mixing is what explains the reading: refuted.
    let l = crate::Finding {
        status: Status::Verdict,
        clean: true,
        summary: "every rung right".to_owned(),
        ..crate::Finding::open(Vec::new())
    };
    let v = crate::reconcile(Some(&f), Some(&l));
    assert_eq!(
        (v.status, v.stage),
        (Status::Verdict, None),
        "{}",
        v.summary
    );
    assert!(v.summary.contains("several layers"), "{}", v.summary);
    // A gated trace is pinned to one instantiation: the same records are a verdict.
    let gated = kwb_runtime::tag("REDUCTION_SIZE == 6144");
    let g = judge_ones(&trace(two_layers(gated)), &run(256, 256, 0, 1.0));
    assert_eq!(
        (g.stage, g.status),
        (Some(Stage::OperandLoad), Status::Verdict),
        "{}",
        g.summary
    );
    // Ungated, but one record not uniform on its own: no mixing explains that.
    let mut mixed_and_bad = two_layers(ungated);
    mixed_and_bad.last_mut().unwrap().vmin = 64.0;
    let h = judge_ones(&trace(mixed_and_bad), &run(256, 256, 0, 1.0));
    assert_eq!(h.confound, None, "{}", h.summary);
}

#[test]
fn a_clean_trace_under_a_wrong_output_is_the_epilogue() {
    let f = judge_ones(&trace(clean_ones()), &run(256, 256, 65536, 2.0));
    assert_eq!(f.stage, Some(Stage::Epilogue));
    assert_eq!(f.status, Status::Verdict);
    assert_eq!(f.factor, Some(2.0));
}

#[test]
fn a_wrong_output_over_a_trace_without_accumulator_records_is_no_epilogue_verdict() {
    // Only the epilogue's records landed (a CuTe kernel whose accumulator probes did
    // not record): nothing clears the accumulation, so the epilogue is one candidate.
    let records = vec![record(Kind::Epilogue, -1, 64.0, 64.0, 4096)];
    let f = judge_ones(&trace(records), &run(256, 256, 65536, 0.03125));
    assert_eq!(
        (f.stage, f.status, f.confound.clone()),
        (
            Some(Stage::Epilogue),
            Status::Draft,
            Some(Confound::AccumulatorNotRecorded)
        ),
        "{}",
        f.summary
    );
    assert!(f.alternatives.contains(&Stage::Mma));
    // With the accumulator recorded and exact, the same output is the epilogue's.
    let f = judge_ones(&trace(clean_ones()), &run(256, 256, 65536, 0.03125));
    assert_eq!(
        (f.stage, f.status),
        (Some(Stage::Epilogue), Status::Verdict)
    );
}

#[test]
fn an_accumulator_that_counts_a_k_tile_twice_is_the_mma_with_the_tile_and_factor() {
    let mut records = clean_ones();
    // K tile 2 added twice: 32, 64, 128, 160; 160 after the mainloop.
    records[4] = record(Kind::Accumulator, 2, 128.0, 128.0, 4096);
    records[5] = record(Kind::Accumulator, 3, 160.0, 160.0, 4096);
    records[6] = record(Kind::Accumulator, -1, 160.0, 160.0, 4096);
    let f = judge_ones(&trace(records), &run(256, 256, 65536, 1.25));
    assert_eq!(f.stage, Some(Stage::Mma));
    assert_eq!(f.status, Status::Verdict);
    assert_eq!(f.k_tile, Some(2));
    assert_eq!(f.factor, Some(128.0 / 96.0));
    assert!(
        f.summary
            .starts_with("mma (operands uniform; accumulator after K tile 2"),
        "{}",
        f.summary
    );
}

#[test]
fn a_wrong_accumulator_without_operand_probes_is_a_draft_that_names_both_stages() {
    let records: Vec<_> = clean_ones()
        .into_iter()
        .filter(|r| r.kind() == Some(Kind::Accumulator))
        .map(|mut r| {
            r.vmin *= 1.5;
            r.vmax *= 1.5;
            r
        })
        .collect();
    let f = judge_ones(&trace(records), &run(256, 256, 65536, 1.5));
    assert_eq!(f.status, Status::Draft);
    assert_eq!(f.confound, Some(Confound::OperandsNotProbed));
    assert!(f.fits(Some(Stage::Mma)) && f.fits(Some(Stage::OperandLoad)));
    assert_eq!(f.factor, Some(1.5));
}

#[test]
fn a_non_uniform_operand_is_an_operand_load_verdict_that_fits_a_descriptor_too() {
    let mut records = clean_ones();
    records[1] = record(Kind::OperandB, 0, 0.5, 1.0, 512);
    let f = judge_ones(&trace(records), &run(256, 256, 100, 0.9));
    assert_eq!(f.stage, Some(Stage::OperandLoad));
    assert_eq!(f.status, Status::Verdict);
    assert!(f.fits(Some(Stage::Descriptor)));
    assert!(!f.fits(Some(Stage::Mma)));
}

#[test]
fn zeros_among_ones_are_a_draft_padding_could_explain() {
    let mut records = clean_ones();
    records[0] = record(Kind::OperandA, 0, 0.0, 1.0, 512);
    let f = judge_ones(&trace(records), &run(256, 256, 0, 1.0));
    assert_eq!(f.status, Status::Draft);
    assert_eq!(f.confound, Some(Confound::ZerosAmongEqual));
}

/// The ones trace of a load one k off: K = 128 in 4 tiles of 32, and the last tile's
/// A holds one zero per row (the k past the end, filled). Every accumulator value
/// falls short by one product in that tile.
fn ones_with_a_k_lost_in_tile_3() -> Vec<TraceRecord> {
    let mut records = clean_ones();
    records.push(record(Kind::OperandA, 3, 0.0, 1.0, 512));
    records[5] = record(Kind::Accumulator, 3, 127.0, 127.0, 4096);
    records[6] = record(Kind::Accumulator, -1, 127.0, 127.0, 4096);
    records
}

#[test]
fn zeros_that_cost_every_accumulator_a_product_inside_whole_k_tiles_are_an_operand_load_verdict() {
    let f = judge_ones(
        &trace(ones_with_a_k_lost_in_tile_3()),
        &run(256, 256, 0, 1.0),
    );
    assert_eq!(f.stage, Some(Stage::OperandLoad));
    assert_eq!(f.status, Status::Verdict, "{}", f.summary);
    assert_eq!(f.confound, None);
    assert_eq!(f.k_tile, Some(3));
    assert!(f.fits(Some(Stage::Descriptor)));
    assert!(f.summary.contains("short by 1 product"), "{}", f.summary);
}

#[test]
fn the_in_situ_ones_trace_of_a_load_one_k_off_is_an_operand_load_verdict() {
    // Recorded on an H100 inside pytest (kernels/insitu, KWB_DEFECT=load_k_offset):
    // M 256, N 384, K 512; the output on ones was right (bf16 rounds 511 to 512).
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/traces/insitu_linear_load_k_offset_ones.trace"
    );
    let trace = kwb_runtime::decode(&std::fs::read(path).unwrap()).unwrap();
    let mut ones = run(256, 384, 0, 1.0);
    ones.k = 512;
    ones.one_launch = true;
    let f = judge_ones(&trace, &ones);
    assert_eq!(f.stage, Some(Stage::OperandLoad), "{}", f.summary);
    assert_eq!(f.status, Status::Verdict, "{}", f.summary);
    assert_eq!(f.k_tile, Some(31));
    // The same trace of a problem whose K the tiles do not cover whole stays a draft.
    ones.k = 500;
    assert_eq!(
        judge_ones(&trace, &ones).confound,
        Some(Confound::ZerosAmongEqual)
    );
}

#[test]
fn zeros_stay_a_draft_where_the_accumulator_could_be_short_for_another_reason() {
    // A whole tile's worth short: the MMA dropping tile 3 reads the same.
    let mut records = ones_with_a_k_lost_in_tile_3();
    records[5] = record(Kind::Accumulator, 3, 96.0, 96.0, 4096);
    records[6] = record(Kind::Accumulator, -1, 96.0, 96.0, 4096);
    let f = judge_ones(&trace(records), &run(256, 256, 0, 1.0));
    assert_eq!(f.confound, Some(Confound::ZerosAmongEqual), "{}", f.summary);
    // Accumulator values not one: padding rows (at nothing) beside whole real rows.
    let mut records = ones_with_a_k_lost_in_tile_3();
    records[5] = record(Kind::Accumulator, 3, 0.0, 128.0, 4096);
    let f = judge_ones(&trace(records), &run(256, 256, 0, 1.0));
    assert_eq!(f.confound, Some(Confound::ZerosAmongEqual), "{}", f.summary);
    // K = 120 in tiles of 32: the last tile reads past K, and its fill is zeros.
    let mut short_k = run(256, 256, 0, 1.0);
    short_k.k = 120;
    let f = judge_ones(&trace(ones_with_a_k_lost_in_tile_3()), &short_k);
    assert_eq!(f.confound, Some(Confound::ZerosAmongEqual), "{}", f.summary);
    // Zeros in another tile than the one the accumulator departs in.
    let mut records = ones_with_a_k_lost_in_tile_3();
    let zeros = records.len() - 1;
    records[zeros] = record(Kind::OperandA, 1, 0.0, 1.0, 512);
    let f = judge_ones(&trace(records), &run(256, 256, 0, 1.0));
    assert_eq!(f.confound, Some(Confound::ZerosAmongEqual), "{}", f.summary);
    // Zeros from tile 0 on, the shortfall in tile 3: a slot the probe reads and the
    // MMA does not, beside a shortfall of the MMA's own.
    let mut records = ones_with_a_k_lost_in_tile_3();
    records[0] = record(Kind::OperandA, 0, 0.0, 1.0, 512);
    let f = judge_ones(&trace(records), &run(256, 256, 0, 1.0));
    assert_eq!(f.confound, Some(Confound::ZerosAmongEqual), "{}", f.summary);
}

#[test]
fn an_unbounded_trace_of_a_padded_problem_is_a_draft_naming_the_padding() {
    // BATCH = 16 < MMA_N: rows 16.. of the tile are padding, and the trace counted them.
    let mut records = clean_ones();
    records[0] = record(Kind::OperandA, 0, -3.0, 1.0, 512);
    let f = judge_ones(&trace(records.clone()), &run(16, 256, 0, 1.0));
    assert_eq!(f.status, Status::Draft);
    assert_eq!(f.confound, Some(Confound::PaddingRows { m: 16, n: 256 }));
    // The same reading with the row bound is no longer confounded.
    for r in &mut records {
        r.row_bound = 16;
    }
    let bounded = judge_ones(&trace(records), &run(16, 256, 0, 1.0));
    assert_eq!(bounded.status, Status::Verdict);
    assert_eq!(bounded.stage, Some(Stage::OperandLoad));
}

/// An operand read from outside its buffer (the ladder's NaN around it) in a problem
/// with padding rows: NaN in every accumulator value the trace holds is in rows of the
/// problem, which padding rows cannot reach; NaN in some values only may be padding.
#[test]
fn an_operand_nan_that_reaches_every_accumulator_value_is_no_padding() {
    let nan_in = |mut r: TraceRecord, nan: u32| {
        r.nan_count = nan;
        r
    };
    let mut records = clean_ones();
    records[0] = nan_in(record(Kind::OperandA, 0, 0.0, 1.0, 512), 100);
    for r in records
        .iter_mut()
        .filter(|r| r.kind() == Some(Kind::Accumulator))
    {
        r.nan_count = r.count;
        (r.vmin, r.vmax) = (f32::NAN, f32::NAN);
    }
    let f = judge_ones(&trace(records.clone()), &run(300, 200, 60000, 1.0));
    assert_eq!(
        (f.stage, f.status, f.confound.clone()),
        (Some(Stage::OperandLoad), Status::Verdict, None),
        "{}",
        f.summary
    );
    // Some accumulator values finite: the NaN may be padding rows' own.
    let first = records
        .iter()
        .position(|r| r.kind() == Some(Kind::Accumulator))
        .unwrap();
    records[first].nan_count = 1000;
    records[first].vmin = 32.0;
    records[first].vmax = 32.0;
    let f = judge_ones(&trace(records.clone()), &run(300, 200, 60000, 1.0));
    assert_eq!(f.confound, Some(Confound::PaddingRows { m: 300, n: 200 }));
    // Both operands NaN: nothing says which one is not padding.
    records[first].nan_count = records[first].count;
    records[1] = nan_in(record(Kind::OperandB, 0, 0.0, 1.0, 512), 100);
    let f = judge_ones(&trace(records), &run(300, 200, 60000, 1.0));
    assert_eq!(f.confound, Some(Confound::PaddingRows { m: 300, n: 200 }));
}

/// A split-K partial kernel: each CTA sums one K slice (here a quarter), so the
/// accumulator after its mainloop is a quarter of the ones model's K, and a reduce
/// kernel sums the slices: the output is right. The short accumulator is the model
/// not fitting the kernel, not an MMA defect; with the output wrong it is one.
#[test]
fn a_short_accumulator_in_a_run_whose_output_is_right_is_set_aside() {
    let mut records = clean_ones();
    for t in 0..4 {
        let v = 8.0 * (t + 1) as f32;
        records[2 + t as usize] = record(Kind::Accumulator, t, v, v, 4096);
    }
    records[6] = record(Kind::Accumulator, -1, 32.0, 32.0, 4096);
    let wrong = judge_ones(&trace(records.clone()), &run(256, 256, 9, 0.25));
    assert_eq!(
        (wrong.stage, wrong.status),
        (Some(Stage::Mma), Status::Verdict),
        "{}",
        wrong.summary
    );
    let right = judge_ones(&trace(records.clone()), &run(256, 256, 0, 1.0));
    assert_eq!(
        (right.stage, right.clean),
        (None, true),
        "{}",
        right.summary
    );
    assert!(right.summary.contains("does not fit"), "{}", right.summary);
    assert!(
        right
            .evidence
            .iter()
            .any(|e| e.starts_with("set aside: mma")),
        "{:?}",
        right.evidence
    );
    // Nothing checked the output: the reading stands.
    let unchecked = OnesRun {
        output: None,
        ..run(256, 256, 0, 1.0)
    };
    assert_eq!(
        judge_ones(&trace(records), &unchecked).stage,
        Some(Stage::Mma)
    );
}

#[test]
fn a_nan_accumulator_is_the_mma_even_when_every_tile_before_was_right() {
    let mut records = clean_ones();
    records[6].nan_count = 3;
    let f = judge_ones(&trace(records), &run(256, 256, 3, f64::NAN));
    assert_eq!(f.stage, Some(Stage::Mma));
    assert_eq!(f.k_tile, None);
    assert!(f.summary.contains("after the mainloop"), "{}", f.summary);
}

mod patterns {
    use crate::{Axis, ErrorGrid, Pattern, classify};

    /// An M x N problem whose answer at (m, n) is 1 + m + 2n (no two outputs and no
    /// output and its transpose alike), and the output `wrong` makes of it.
    fn grid_of(
        m: usize,
        n: usize,
        k: usize,
        wrong: impl Fn(usize, usize, f64) -> f64,
    ) -> (Vec<f32>, Vec<f64>) {
        let answer: Vec<f64> = (0..m * n)
            .map(|i| (1 + i / n + 2 * (i % n)) as f64)
            .collect();
        let output = (0..m * n)
            .map(|i| wrong(i / n, i % n, answer[i]) as f32)
            .collect();
        let _ = k;
        (output, answer)
    }

    fn label(
        m: usize,
        n: usize,
        k: usize,
        tile: (usize, usize),
        wrong: impl Fn(usize, usize, f64) -> f64,
    ) -> Pattern {
        let (output, answer) = grid_of(m, n, k, wrong);
        classify(&ErrorGrid {
            m,
            n,
            k,
            output: &output,
            answer: &answer,
            tile,
            tolerance: 0.0,
            rounding: 0.0,
        })
        .pattern
    }

    #[test]
    fn a_right_output_has_no_pattern() {
        assert_eq!(label(64, 64, 256, (32, 32), |_, _, a| a), Pattern::None);
    }

    #[test]
    fn alpha_applied_twice_is_uniform_two() {
        assert_eq!(
            label(64, 64, 1024, (32, 32), |_, _, a| 2.0 * a),
            Pattern::Uniform { factor: 2.0 }
        );
    }

    #[test]
    fn a_doubled_output_rounded_to_bf16_is_still_one_factor() {
        // Values up to ~3000 need more than bf16's 8 significant bits: 2x rounds.
        let bf16 = |v: f64| {
            let q = 2f64.powi(v.abs().log2().floor() as i32 - 7);
            (v / q).round() * q
        };
        let (m, n, k) = (64, 1024, 1024);
        let (output, answer) = grid_of(m, n, k, |_, _, a| bf16(2.0 * a));
        let grid = |rounding| ErrorGrid {
            m,
            n,
            k,
            output: &output,
            answer: &answer,
            tile: (32, 32),
            tolerance: 0.0,
            rounding,
        };
        let p = classify(&grid(2f64.powi(-8))).pattern;
        assert!(
            matches!(p, Pattern::Uniform { factor } if (factor - 2.0).abs() < 1e-2),
            "{p:?}"
        );
        // Held to f32's rounding, the spread is too wide for one factor.
        assert!(!matches!(
            classify(&grid(2f64.powi(-24))).pattern,
            Pattern::Uniform { .. }
        ));
    }

    #[test]
    fn a_k_tile_counted_twice_or_dropped_is_a_k_residue() {
        let twice = label(64, 64, 1024, (32, 32), |_, _, a| a * (1.0 + 32.0 / 1024.0));
        assert!(
            matches!(twice, Pattern::KResidue { extra_k: 32, .. }),
            "{twice:?}"
        );
        let dropped = label(64, 64, 1024, (32, 32), |_, _, a| a * (1.0 - 64.0 / 1024.0));
        assert!(
            matches!(dropped, Pattern::KResidue { extra_k: -64, .. }),
            "{dropped:?}"
        );
        // Half of K again is a scale, not a tile or a few: uniform.
        let fold = label(64, 64, 6144, (32, 32), |_, _, a| a * 1.5);
        assert_eq!(fold, Pattern::Uniform { factor: 1.5 });
    }

    #[test]
    fn a_transposed_store_is_transposed() {
        let n = 48;
        let p = label(n, n, 64, (16, 16), |r, c, _| (1 + c + 2 * r) as f64);
        assert_eq!(p, Pattern::Transposed);
    }

    #[test]
    fn nan_everywhere_is_everywhere() {
        assert_eq!(
            label(64, 64, 64, (32, 32), |_, _, _| f64::NAN),
            Pattern::Everywhere
        );
    }

    #[test]
    fn one_wrong_cta_tile_is_one_tile() {
        let p = label(128, 128, 64, (64, 64), |r, c, a| {
            if r >= 64 && c < 64 { a + 1.0 } else { a }
        });
        assert_eq!(
            p,
            Pattern::OneTile {
                tile_row: 1,
                tile_col: 0
            }
        );
    }

    #[test]
    fn padding_rows_of_one_tile_are_a_row_band() {
        // BATCH = 16 of a 64-row tile: rows 16..=63 read garbage, every column.
        let p = label(
            64,
            128,
            64,
            (64, 64),
            |r, _, a| if r >= 16 { 0.0 } else { a },
        );
        assert_eq!(
            p,
            Pattern::RowBand {
                rows: vec![(16, 63)]
            }
        );
        let cols = label(
            64,
            128,
            64,
            (32, 32),
            |_, c, a| if c >= 96 { a * 3.0 } else { a },
        );
        assert_eq!(
            cols,
            Pattern::ColumnBand {
                cols: vec![(96, 127)]
            }
        );
    }

    #[test]
    fn padding_rows_in_every_tile_are_periodic() {
        let p = label(
            256,
            64,
            64,
            (64, 64),
            |r, _, a| if r % 64 >= 16 { 0.0 } else { a },
        );
        assert_eq!(
            p,
            Pattern::Periodic {
                axis: Axis::M,
                period: 64
            }
        );
    }

    #[test]
    fn a_swizzle_that_moves_some_chunks_of_every_row_is_periodic_along_n() {
        // Columns 8..16 of every 64 wrong, in half the rows: no whole row or column.
        let p = label(128, 256, 64, (128, 128), |r, c, a| {
            if c % 64 >= 8 && c % 64 < 16 && r % 2 == 1 {
                a + 5.0
            } else {
                a
            }
        });
        assert_eq!(
            p,
            Pattern::Periodic {
                axis: Axis::N,
                period: 64
            }
        );
    }

    #[test]
    fn a_swizzle_permuting_16_byte_chunks_by_row_is_periodic_along_m() {
        // Within each 64-column block, row r swaps chunks r % 8 and (r + 1) % 8:
        // diagonal stripes of wrong outputs, every row and every column holding some,
        // so only whole rows repeating (every 8) show the period.
        let (m, n) = (128, 256);
        let p = label(m, n, 64, (64, 64), |r, c, _| {
            let (block, chunk, lane) = (c / 64, (c % 64) / 8, c % 8);
            let (x, y) = (r % 8, (r + 1) % 8);
            let from_chunk = if chunk == x {
                y
            } else if chunk == y {
                x
            } else {
                chunk
            };
            (1 + r + 2 * (block * 64 + from_chunk * 8 + lane)) as f64
        });
        assert_eq!(
            p,
            Pattern::Periodic {
                axis: Axis::M,
                period: 8
            }
        );
    }

    #[test]
    fn a_few_stray_outputs_are_scattered() {
        let p = label(64, 64, 64, (32, 32), |r, c, a| {
            if (r, c) == (3, 5) || (r, c) == (40, 61) || (r, c) == (17, 30) {
                a - 1.0
            } else {
                a
            }
        });
        assert!(matches!(p, Pattern::Scattered { .. }), "{p:?}");
    }
}

mod ladder_and_verdict {
    use super::{clean_ones, record, run, trace};
    use crate::{
        Classified, Confound, EpilogueInputs, Pattern, RungOutcome, RungState, Stage, Status,
        judge_ladder, judge_ones, nan_origin, reconcile,
    };
    use kwb_runtime::Kind;

    fn rung(name: &str, state: RungState, ratio: f64, pattern: Option<Pattern>) -> RungOutcome {
        let wrong = if state == RungState::Fail { 100 } else { 0 };
        RungOutcome {
            rung: name.to_owned(),
            state,
            ratio,
            mismatches: wrong,
            non_finite: 0,
            pattern: pattern.map(|pattern| Classified {
                pattern,
                wrong,
                non_finite: 0,
                tiles: super::every_tile(256, 256),
            }),
            error: None,
        }
    }

    fn all_pass() -> Vec<RungOutcome> {
        [
            "zeros",
            "ones",
            "seq-identity",
            "onehot-k:0",
            "small-int:1",
            "random:1",
        ]
        .into_iter()
        .map(|r| rung(r, RungState::Pass, 1.0, None))
        .collect()
    }

    pub(super) fn failing(names: &[&str], ones: Option<Pattern>, ratio: f64) -> Vec<RungOutcome> {
        all_pass()
            .into_iter()
            .map(|r| {
                if names.contains(&r.rung.as_str()) {
                    let p = if r.rung == "ones" {
                        ones.clone()
                    } else {
                        Some(Pattern::Scattered { fraction: 0.5 })
                    };
                    rung(
                        &r.rung,
                        RungState::Fail,
                        if r.rung == "ones" { ratio } else { 1.0 },
                        p,
                    )
                } else {
                    r
                }
            })
            .collect()
    }

    #[test]
    fn only_the_rungs_whose_c_and_bias_vary_failing_points_at_the_epilogue_first() {
        let rungs = failing(&["small-int:1", "random:1"], None, 1.0);
        let bias = EpilogueInputs {
            c: false,
            bias: true,
        };
        let l = judge_ladder(&rungs, bias);
        assert_eq!(
            (l.stage, l.alternatives.clone()),
            (
                Some(Stage::Epilogue),
                vec![Stage::OperandLoad, Stage::Descriptor]
            ),
            "{}",
            l.summary
        );
        assert!(
            l.summary.contains("the bias added at the wrong place"),
            "{}",
            l.summary
        );
        // Without C or a bias those terms cannot be it: the values that meet are.
        let none = judge_ladder(&rungs, crate::EpilogueInputs::NONE);
        assert_eq!(none.stage, Some(Stage::OperandLoad), "{}", none.summary);
        // seq-identity failing too: an operand tile lands wrong.
        let seq = failing(&["seq-identity", "small-int:1", "random:1"], None, 1.0);
        assert_eq!(judge_ladder(&seq, bias).stage, Some(Stage::OperandLoad));
    }

    #[test]
    fn seq_identity_right_end_to_end_settles_a_swapped_reading_as_the_kernels_own() {
        // The full trace: operands and accumulator right read swapped (a swap-AB
        // kernel's, or an MMA fed the wrong way round), the output wrong.
        let swapped = crate::Finding {
            stage: Some(Stage::Epilogue),
            alternatives: vec![Stage::OperandLoad],
            confound: Some(Confound::SwappedRoles),
            summary: "epilogue (operands and accumulator exact)".to_owned(),
            ..crate::Finding::open(Vec::new())
        };
        let bias = EpilogueInputs {
            c: false,
            bias: true,
        };
        let l = judge_ladder(&failing(&["small-int:1", "random:1"], None, 1.0), bias);
        assert!(
            l.passing.contains(&"seq-identity".to_owned()),
            "{:?}",
            l.passing
        );
        let v = reconcile(Some(&swapped), Some(&l));
        assert_eq!(
            (v.status, v.stage, v.confound.clone()),
            (Status::Verdict, Some(Stage::Epilogue), None),
            "{}",
            v.summary
        );
        // seq-identity failing (an MMA fed the wrong way round transposes it): a draft.
        let seq = failing(&["seq-identity", "small-int:1", "random:1"], None, 1.0);
        let v = reconcile(Some(&swapped), Some(&judge_ladder(&seq, bias)));
        assert_eq!(v.status, Status::Draft, "{}", v.summary);
    }

    #[test]
    fn fewer_products_on_ones_fit_a_load_of_zeros_too_and_more_only_the_mma() {
        let k_residue = |extra_k| {
            failing(
                &["ones", "small-int:1", "random:1"],
                Some(Pattern::KResidue {
                    factor: 1.0 + extra_k as f64 / 512.0,
                    extra_k,
                }),
                1.0 + extra_k as f64 / 512.0,
            )
        };
        let fewer = judge_ladder(&k_residue(-64), EpilogueInputs::NONE);
        assert_eq!(fewer.stage, Some(Stage::Mma));
        assert!(fewer.fits(Some(Stage::OperandLoad)) && fewer.fits(Some(Stage::Descriptor)));
        let more = judge_ladder(&k_residue(32), EpilogueInputs::NONE);
        assert!(!more.fits(Some(Stage::OperandLoad)), "{}", more.summary);
        // A trace that isolates a load of zeros (an extent cut short) then stands.
        let load = crate::Finding {
            stage: Some(Stage::OperandLoad),
            alternatives: vec![Stage::Descriptor],
            status: Status::Verdict,
            summary: "operand-load/descriptor (k 448..512 never consumed)".to_owned(),
            ..crate::Finding::open(Vec::new())
        };
        let v = reconcile(Some(&load), Some(&fewer));
        assert_eq!(
            (v.status, v.stage),
            (Status::Verdict, Some(Stage::OperandLoad))
        );
        let v = reconcile(Some(&load), Some(&more));
        assert_eq!(v.status, Status::Draft, "{}", v.summary);
    }

    #[test]
    fn every_rung_right_refutes_with_a_verdict() {
        let l = judge_ladder(&all_pass(), crate::EpilogueInputs::NONE);
        assert!(l.clean);
        let v = reconcile(None, Some(&l));
        assert_eq!((v.status, v.stage), (Status::Verdict, None));
        assert!(v.summary.starts_with("refuted"), "{}", v.summary);
    }

    #[test]
    fn the_ladder_alone_never_gives_a_stage_verdict() {
        for (names, ones, ratio) in [
            (
                &["ones", "small-int:1", "random:1"][..],
                Some(Pattern::Uniform { factor: 2.0 }),
                2.0,
            ),
            (
                &["ones", "small-int:1", "random:1"][..],
                Some(Pattern::KResidue {
                    factor: 1.03125,
                    extra_k: 32,
                }),
                1.03125,
            ),
            (&["seq-identity", "small-int:1"][..], None, 1.0),
            (&["zeros", "ones"][..], Some(Pattern::Everywhere), f64::NAN),
            (
                &["ones"][..],
                Some(Pattern::RowBand {
                    rows: vec![(16, 63)],
                }),
                0.25,
            ),
        ] {
            let l = judge_ladder(&failing(names, ones, ratio), crate::EpilogueInputs::NONE);
            assert_eq!(l.status, Status::Draft, "{}", l.summary);
            let v = reconcile(None, Some(&l));
            assert_eq!(v.status, Status::Draft, "{}", v.summary);
            assert!(v.stage.is_some());
            assert!(!v.missing.is_empty());
        }
    }

    #[test]
    fn the_ladders_readings_name_the_stages_they_cannot_tell_apart() {
        let scale = judge_ladder(
            &failing(
                &["ones", "random:1"],
                Some(Pattern::Uniform { factor: 2.0 }),
                2.0,
            ),
            crate::EpilogueInputs::NONE,
        );
        assert!(scale.fits(Some(Stage::Epilogue)) && scale.fits(Some(Stage::Mma)));
        let residue = judge_ladder(
            &failing(
                &["ones", "random:1"],
                Some(Pattern::KResidue {
                    factor: 0.96875,
                    extra_k: -32,
                }),
                0.96875,
            ),
            crate::EpilogueInputs::NONE,
        );
        assert_eq!(residue.stage, Some(Stage::Mma));
        let permuted = judge_ladder(
            &failing(&["seq-identity", "small-int:1", "random:1"], None, 1.0),
            crate::EpilogueInputs::NONE,
        );
        assert_eq!(permuted.stage, Some(Stage::OperandLoad));
        assert!(permuted.fits(Some(Stage::Descriptor)) && permuted.fits(Some(Stage::Epilogue)));
        // An MMA handed another fragment's registers meets wrong values the right
        // number of times too: the last candidate.
        assert_eq!(permuted.alternatives.last(), Some(&Stage::Mma));
        let zeros = judge_ladder(
            &failing(&["zeros", "ones"], Some(Pattern::Everywhere), f64::NAN),
            crate::EpilogueInputs::NONE,
        );
        assert!(zeros.fits(Some(Stage::Epilogue)) && zeros.fits(Some(Stage::Mma)));
    }

    #[test]
    fn nan_on_zeros_or_a_lost_fraction_on_ones_can_be_an_operand_read_from_outside() {
        // The runner's padding holds NaN: a pitch taken for a width reads it even on zeros.
        let mut rungs = failing(
            &["zeros", "ones"],
            Some(Pattern::Scattered { fraction: 1.0 }),
            1.0,
        );
        rungs[0].non_finite = 100;
        let nan = judge_ladder(&rungs, crate::EpilogueInputs::NONE);
        assert!(
            nan.fits(Some(Stage::Descriptor)) && nan.fits(Some(Stage::Epilogue)),
            "{nan:?}"
        );
        // Finite garbage on zeros cannot come from reading the operands.
        rungs[0].non_finite = 0;
        assert!(!judge_ladder(&rungs, crate::EpilogueInputs::NONE).fits(Some(Stage::OperandLoad)));
        // A quarter of the products (part of K read as zeros) is an operand reading too;
        // twice them is not.
        let quarter = judge_ladder(
            &failing(&["ones"], Some(Pattern::Uniform { factor: 0.25 }), 0.25),
            crate::EpilogueInputs::NONE,
        );
        assert!(quarter.fits(Some(Stage::Descriptor)) && quarter.fits(Some(Stage::Mma)));
        let twice = judge_ladder(
            &failing(&["ones"], Some(Pattern::Uniform { factor: 2.0 }), 2.0),
            crate::EpilogueInputs::NONE,
        );
        assert!(!twice.fits(Some(Stage::OperandLoad)));
    }

    #[test]
    fn a_hang_is_no_stage() {
        let mut rungs = all_pass();
        rungs[1].state = RungState::Hang;
        let l = judge_ladder(&rungs, crate::EpilogueInputs::NONE);
        assert_eq!((l.stage, l.clean), (None, false));
        assert!(l.summary.contains("hung"), "{}", l.summary);
        assert_eq!(reconcile(None, Some(&l)).status, Status::Draft);
    }

    #[test]
    fn an_isolating_trace_the_ladder_agrees_with_is_a_verdict() {
        let mut records = clean_ones();
        records[5] = record(Kind::Accumulator, 3, 160.0, 160.0, 4096);
        records[6] = record(Kind::Accumulator, -1, 160.0, 160.0, 4096);
        let t = judge_ones(&trace(records), &run(256, 256, 65536, 1.25));
        let l = judge_ladder(
            &failing(
                &["ones", "random:1"],
                Some(Pattern::KResidue {
                    factor: 1.25,
                    extra_k: 32,
                }),
                1.25,
            ),
            crate::EpilogueInputs::NONE,
        );
        let v = reconcile(Some(&t), Some(&l));
        assert_eq!((v.status, v.stage), (Status::Verdict, Some(Stage::Mma)));
        assert_eq!(v.k_tile, Some(3));
    }

    #[test]
    fn an_isolating_trace_whose_reproducer_passes_everything_is_a_draft() {
        let t = judge_ones(&trace(clean_ones()), &run(256, 256, 65536, 2.0));
        assert_eq!(t.status, Status::Verdict);
        let v = reconcile(
            Some(&t),
            Some(&judge_ladder(&all_pass(), crate::EpilogueInputs::NONE)),
        );
        assert_eq!(v.status, Status::Draft);
        assert_eq!(v.stage, Some(Stage::Epilogue));
        assert!(
            v.summary.contains("outside what the reproducer replays"),
            "{}",
            v.summary
        );
    }

    #[test]
    fn a_trace_and_a_ladder_that_disagree_are_a_draft() {
        let t = judge_ones(&trace(clean_ones()), &run(256, 256, 65536, 2.0));
        // The ladder: ones right, permutations wrong: operand-load, not the epilogue...
        let mut l = judge_ladder(
            &failing(&["seq-identity"], None, 1.0),
            crate::EpilogueInputs::NONE,
        );
        // ...and suppose it could not be an epilogue at all.
        l.alternatives.retain(|s| *s != Stage::Epilogue);
        let v = reconcile(Some(&t), Some(&l));
        assert_eq!(v.status, Status::Draft);
        assert!(v.summary.contains("disagree"), "{}", v.summary);
    }

    #[test]
    fn the_padding_confound_with_every_rung_right_is_refuted_and_named() {
        let mut records = clean_ones();
        records[0] = record(Kind::OperandA, 0, -3.0, 1.0, 512);
        let t = judge_ones(&trace(records), &run(16, 256, 0, 1.0));
        assert_eq!(t.status, Status::Draft);
        let v = reconcile(
            Some(&t),
            Some(&judge_ladder(&all_pass(), crate::EpilogueInputs::NONE)),
        );
        assert_eq!((v.status, v.stage), (Status::Verdict, None));
        assert_eq!(v.confound, Some(Confound::PaddingRows { m: 16, n: 256 }));
        assert!(v.summary.contains("padding"), "{}", v.summary);
    }

    #[test]
    fn a_confounded_trace_under_a_failing_ladder_stays_a_draft_and_says_how_to_resolve_it() {
        let mut records = clean_ones();
        records[0] = record(Kind::OperandA, 0, 0.0, 1.0, 512);
        let t = judge_ones(&trace(records), &run(256, 256, 10, 0.99));
        let l = judge_ladder(
            &failing(&["seq-identity", "small-int:1"], None, 1.0),
            crate::EpilogueInputs::NONE,
        );
        let v = reconcile(Some(&t), Some(&l));
        assert_eq!(v.status, Status::Draft);
        assert_eq!(v.stage, Some(Stage::OperandLoad));
        assert!(
            v.missing.iter().any(|m| m.contains("row bound")),
            "{:?}",
            v.missing
        );
    }

    #[test]
    fn a_wrong_accumulator_without_operand_probes_follows_the_ladders_order() {
        let records: Vec<_> = clean_ones()
            .into_iter()
            .filter(|r| r.kind() == Some(Kind::Accumulator))
            .map(|mut r| {
                r.vmin *= 0.5;
                r.vmax *= 1.5;
                r
            })
            .collect();
        let t = judge_ones(&trace(records), &run(256, 256, 65536, 1.0));
        assert_eq!(t.confound, Some(Confound::OperandsNotProbed));
        assert_eq!(t.stage, Some(Stage::Mma));
        // Ones right, the permutations wrong: the values that meet, not their count.
        let l = judge_ladder(
            &failing(&["seq-identity", "small-int:1"], None, 1.0),
            crate::EpilogueInputs::NONE,
        );
        let v = reconcile(Some(&t), Some(&l));
        assert_eq!(
            (v.status, v.stage),
            (Status::Draft, Some(Stage::OperandLoad))
        );
        assert_eq!(v.alternatives, vec![Stage::Descriptor, Stage::Mma]);
        // A K residue on ones is the loop's count: the MMA stays first.
        let l = judge_ladder(
            &failing(
                &["ones", "random:1"],
                Some(Pattern::KResidue {
                    factor: 1.25,
                    extra_k: 32,
                }),
                1.25,
            ),
            crate::EpilogueInputs::NONE,
        );
        let v = reconcile(Some(&t), Some(&l));
        assert_eq!(v.stage, Some(Stage::Mma));
        // A ladder that names every stage as equals (led by the epilogue) orders
        // nothing: the trace's order stays.
        let l = judge_ladder(&failing(&["ones"], None, 0.97), crate::EpilogueInputs::NONE);
        assert_eq!(l.alternatives.len(), 3);
        let v = reconcile(Some(&t), Some(&l));
        assert_eq!(v.stage, Some(Stage::Mma));
    }

    #[test]
    fn a_confounded_trace_that_names_none_of_the_ladders_stages_follows_the_ladder() {
        let mut t = judge_ones(&trace(clean_ones()), &run(256, 256, 0, 1.0));
        t.stage = Some(Stage::OperandLoad);
        t.alternatives = vec![Stage::Descriptor];
        t.status = Status::Draft;
        t.clean = false;
        t.confound = Some(Confound::ProbeCoordinates);
        let l = judge_ladder(
            &failing(
                &["ones", "random:1"],
                Some(Pattern::Uniform { factor: 2.0 }),
                2.0,
            ),
            crate::EpilogueInputs::NONE,
        );
        let v = reconcile(Some(&t), Some(&l));
        assert_eq!((v.status, v.stage), (Status::Draft, Some(Stage::Epilogue)));
        assert_eq!(
            v.alternatives,
            vec![Stage::Mma, Stage::OperandLoad, Stage::Descriptor]
        );
        assert!(
            v.summary.contains("controlled inputs lead"),
            "{}",
            v.summary
        );
        // Not confounded (two traces that disagree): the trace's reading stays first.
        t.confound = None;
        let v = reconcile(Some(&t), Some(&l));
        assert_eq!(v.stage, Some(Stage::OperandLoad));
    }

    #[test]
    fn a_trace_alone_is_a_verdict_only_when_it_isolates() {
        let clean = judge_ones(&trace(clean_ones()), &run(256, 256, 0, 1.0));
        let v = reconcile(Some(&clean), None);
        assert_eq!((v.status, v.stage), (Status::Draft, None));
        let mut records = clean_ones();
        records[1] = record(Kind::OperandB, 0, 0.5, 1.0, 512);
        let bad = judge_ones(&trace(records), &run(256, 256, 10, 0.9));
        let v = reconcile(Some(&bad), None);
        assert_eq!(
            (v.status, v.stage),
            (Status::Verdict, Some(Stage::OperandLoad))
        );
        assert_eq!(reconcile(None, None).status, Status::Draft);
    }

    /// A full trace that shows operands and accumulator right in tile (0, 0) of a
    /// 256 x 256 output (`region`: where its CTA is known to lie).
    fn cleared(region: Option<crate::Region>) -> crate::Finding {
        crate::Finding {
            cleared: Some(crate::Cleared {
                stages: vec![Stage::OperandLoad, Stage::Descriptor, Stage::Mma],
                region,
                m: 256,
                n: 256,
                k: None,
            }),
            summary: "operands and accumulator exact".to_owned(),
            ..crate::Finding::open(Vec::new())
        }
    }

    fn tile_zero() -> Option<crate::Region> {
        Some(crate::Region {
            m0: 0,
            m1: 128,
            n0: 0,
            n1: 128,
        })
    }

    /// `failing` with each failing rung wrong in the 128 x 128 tiles `tiles` only.
    fn failing_in(names: &[&str], tiles: &[(usize, usize)]) -> Vec<RungOutcome> {
        let wrong: Vec<bool> = (0..256 * 256)
            .map(|i| tiles.contains(&(i / 256 / 128, i % 256 / 128)))
            .collect();
        failing(names, None, 1.0)
            .into_iter()
            .map(|mut r| {
                if let Some(p) = &mut r.pattern {
                    p.tiles = crate::WrongTiles::of(256, 256, (128, 128), &wrong);
                }
                r
            })
            .collect()
    }

    #[test]
    fn a_full_trace_that_clears_the_operands_and_mma_leaves_the_epilogue_where_the_ladder_fails() {
        // Ones right, integers wrong: operand-load, descriptor or a permuting epilogue.
        let l = judge_ladder(
            &failing_in(&["small-int:1", "random:1"], &[(0, 0), (1, 1)]),
            crate::EpilogueInputs::NONE,
        );
        assert_eq!(l.stage, Some(Stage::OperandLoad));
        let v = reconcile(Some(&cleared(tile_zero())), Some(&l));
        assert_eq!(
            (v.status, v.stage),
            (Status::Verdict, Some(Stage::Epilogue)),
            "{}",
            v.summary
        );
        assert!(v.summary.contains("by elimination"), "{}", v.summary);
        // Every tile wrong: wherever the traced CTA lies, its tile is wrong.
        let everywhere = judge_ladder(
            &failing(&["small-int:1"], None, 1.0),
            crate::EpilogueInputs::NONE,
        );
        let v = reconcile(Some(&cleared(None)), Some(&everywhere));
        assert_eq!(
            (v.status, v.stage),
            (Status::Verdict, Some(Stage::Epilogue))
        );
    }

    #[test]
    fn elimination_needs_the_wrong_outputs_in_the_traced_tile_on_exact_inputs() {
        // Wrong only in tile (1, 1): the trace of tile (0, 0) clears nothing there.
        let l = judge_ladder(
            &failing_in(&["small-int:1", "random:1"], &[(1, 1)]),
            crate::EpilogueInputs::NONE,
        );
        let v = reconcile(Some(&cleared(tile_zero())), Some(&l));
        assert_eq!(v.status, Status::Draft, "{}", v.summary);
        assert_eq!(v.stage, Some(Stage::OperandLoad));
        assert_eq!(v.confound, Some(Confound::ElsewhereThanTraced));
        assert!(
            v.missing
                .iter()
                .any(|m| m.contains("rows 128..256, columns 128..256")),
            "{:?}",
            v.missing
        );
        // The traced CTA's place unknown and only some tiles wrong: narrowed, a draft.
        let v = reconcile(Some(&cleared(None)), Some(&l));
        assert_eq!(
            (v.status, v.stage, v.confound.clone()),
            (
                Status::Draft,
                Some(Stage::Epilogue),
                Some(Confound::ElsewhereThanTraced)
            ),
            "{}",
            v.summary
        );
        // Only random fails: a trace on integers may not share a failure of
        // fractional values (a conversion), so nothing is joined.
        let random = judge_ladder(
            &failing(&["random:1"], None, 1.0),
            crate::EpilogueInputs::NONE,
        );
        let v = reconcile(Some(&cleared(tile_zero())), Some(&random));
        assert_eq!(v.status, Status::Draft, "{}", v.summary);
        // A ladder that only names cleared stages disagrees with the trace.
        let mma = judge_ladder(
            &failing(
                &["ones", "small-int:1"],
                Some(Pattern::KResidue {
                    factor: 1.03125,
                    extra_k: 32,
                }),
                1.03125,
            ),
            crate::EpilogueInputs::NONE,
        );
        let v = reconcile(Some(&cleared(tile_zero())), Some(&mma));
        assert_eq!(v.status, Status::Draft, "{}", v.summary);
        assert!(v.summary.contains("disagree"), "{}", v.summary);
    }

    #[test]
    fn nan_origin_is_the_first_stage_and_k_tile_with_a_non_finite_value() {
        let mut records = clean_ones();
        assert_eq!(nan_origin(&trace(records.clone())), None);
        records[5].nan_count = 7; // accumulator after K tile 3
        records[4].inf_count = 1; // after K tile 2
        records[7].nan_count = 100; // epilogue
        let origin = nan_origin(&trace(records.clone())).unwrap();
        assert_eq!(
            (origin.stage, origin.k_tile, origin.count),
            (Stage::Mma, Some(2), 1)
        );
        records[1].nan_count = 2; // operand B
        assert_eq!(
            nan_origin(&trace(records)).unwrap().stage,
            Stage::OperandLoad
        );
    }
}

mod pictures {
    use crate::picture::{base64, crc32};
    use crate::{ErrorGrid, Heat, heat_png, heat_svg};

    #[test]
    fn the_encoders_agree_with_their_standards() {
        // CRC-32 of "123456789" and the RFC 4648 examples.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
    }

    #[test]
    fn a_heat_map_pools_the_largest_error_per_cell_and_marks_non_finite_values() {
        let (m, n) = (600, 8);
        let answer = vec![1.0f64; m * n];
        let mut output = vec![1.0f32; m * n];
        output[5 * n + 3] = 4.0; // error 3 in row 5
        output[599 * n] = f32::NAN;
        let h = Heat::of(&ErrorGrid {
            m,
            n,
            k: 64,
            output: &output,
            answer: &answer,
            tile: (128, 8),
            tolerance: 0.0,
            rounding: 0.0,
        });
        assert_eq!((h.cell, h.rows, h.cols), ((3, 1), 200, 8));
        assert_eq!(h.values[n + 3], 3.0);
        assert!(h.values[199 * n].is_infinite());
        assert_eq!(h.peak(), 3.0);
        let png = heat_png(&h, "ones on gemm<128>");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let width = u32::from_be_bytes(png[16..20].try_into().unwrap()) as usize;
        let height = u32::from_be_bytes(png[20..24].try_into().unwrap()) as usize;
        // 200 x 8 cells at 2 pixels each: a 16 x 400 plot, with room for the labels.
        let (left, top) = crate::picture::plot_origin(&h);
        assert!(
            width > left + 16 && height > top + 400,
            "{width} x {height}"
        );
        // The IDAT chunk inflates to a filter byte and the RGB pixels per row: the
        // cell of row 5 (plot rows 2..4) red where column 3 is, the NaN's purple.
        let len = u32::from_be_bytes(png[33..37].try_into().unwrap()) as usize;
        assert_eq!(&png[37..41], b"IDAT");
        let raw = miniz_oxide::inflate::decompress_to_vec_zlib(&png[41..41 + len]).unwrap();
        assert_eq!(raw.len(), height * (1 + width * 3));
        let row = 1 + width * 3;
        let pixel = |y: usize, x: usize| {
            let at = (top + y) * row + 1 + (left + x) * 3;
            &raw[at..at + 3]
        };
        assert_eq!(pixel(2, 7), &[255, 0, 0]);
        assert_eq!(pixel(399, 0), &[128, 0, 128]);
        assert_eq!(pixel(2, 0), &[255, 255, 255]);
        // The title is drawn in ink above the plot.
        assert!((4..18).any(|y| (4..60).any(|x| raw[y * row + 1 + x * 3] == 40)));
        let svg = heat_svg(&h, "ones <fails>");
        assert!(svg.starts_with("<svg") && svg.contains("data:image/png;base64,iVBORw0KGgo"));
        assert!(svg.contains("ones &lt;fails&gt;"));
    }
}

mod descriptors {
    use crate::{EncodedMap, check_descriptors};

    const LAUNCHER: [(&str, &str); 7] = [
        ("M", "m"),
        ("N", "n"),
        ("K", "k"),
        ("A", "A"),
        ("lda", "leading-dimension"),
        ("B", "B"),
        ("ldb", "leading-dimension"),
    ];

    fn params() -> Vec<String> {
        ["map", "ptr", "rows", "cols", "ld", "box_rows"]
            .map(str::to_owned)
            .to_vec()
    }

    fn check(call: &str, dims: [&str; 2], stride: &str) -> Vec<String> {
        let (params, dims) = (params(), dims.map(str::to_owned));
        let strides = [stride.to_owned()];
        let map = EncodedMap {
            param: "tmap_a",
            call,
            line: 297,
            function_params: &params,
            dims: &dims,
            strides: &strides,
        };
        check_descriptors(&[map], &LAUNCHER)
            .iter()
            .map(|i| i.describe())
            .collect()
    }

    #[test]
    fn the_canonical_k_major_map_passes() {
        let call = "encode_kmajor_map(&tmap_a, A, M, K, lda, BM)";
        assert!(
            check(
                call,
                ["cuuint64_t(cols)", "cuuint64_t(rows)"],
                "cuuint64_t(ld) * sizeof(__nv_bfloat16)"
            )
            .is_empty()
        );
        let b = "encode_kmajor_map(&tmap_b, B, N, K, ldb, BN)";
        assert!(
            check(
                b,
                ["cuuint64_t(cols)", "cuuint64_t(rows)"],
                "cuuint64_t(ld) * 2"
            )
            .is_empty()
        );
    }

    #[test]
    fn a_pitch_taken_from_the_width_is_named() {
        let issues = check(
            "encode_kmajor_map(&tmap_a, A, M, K, lda, BM)",
            ["cuuint64_t(cols)", "cuuint64_t(rows)"],
            "cuuint64_t(cols) * sizeof(__nv_bfloat16)",
        );
        assert_eq!(
            issues,
            [
                "`tmap_a` (operand A, line 297): strides {cuuint64_t(K) * sizeof(__nv_bfloat16)} where a K-major operand's map has {lda * sizeof(element)}"
            ]
        );
    }

    #[test]
    fn rows_innermost_is_named() {
        let issues = check(
            "encode_kmajor_map(&tmap_b, B, N, K, ldb, BN)",
            ["cuuint64_t(rows)", "cuuint64_t(cols)"],
            "cuuint64_t(ld) * 2",
        );
        assert_eq!(
            issues,
            [
                "`tmap_a` (operand B, line 297): dims {cuuint64_t(N), cuuint64_t(K)} where a K-major operand's map has {K, N}"
            ]
        );
    }

    #[test]
    fn what_cannot_be_read_back_is_not_judged() {
        // No operand among the arguments, an argument count that does not match, a
        // template-parameter map: nothing said.
        assert!(
            check(
                "encode(&tmap_a, ptr, M, K, lda, BM)",
                ["cols", "rows"],
                "cols * 2"
            )
            .is_empty()
        );
        assert!(
            check(
                "encode_kmajor_map(&tmap_a, A, M, K)",
                ["cols", "rows"],
                "cols * 2"
            )
            .is_empty()
        );
        assert!(
            check(
                "encode_kmajor_map(&tmap_a, A, M, K, lda, BM)",
                ["kCols", "kRows"],
                "kCols * 2"
            )
            .is_empty()
        );
    }
}

mod descriptor_verdicts {
    use crate::{DescriptorIssue, Finding, Stage, Status, Verdict, reconcile, with_descriptors};

    fn issue() -> DescriptorIssue {
        DescriptorIssue {
            param: "tmap_a".to_owned(),
            operand: "A".to_owned(),
            line: Some(297),
            field: "strides",
            found: "K * 2".to_owned(),
            expected: "lda * sizeof(element)".to_owned(),
        }
    }

    fn finding(
        stage: Option<Stage>,
        alternatives: Vec<Stage>,
        status: Status,
        clean: bool,
    ) -> Finding {
        Finding {
            stage,
            alternatives,
            status,
            clean,
            summary: "evidence".to_owned(),
            ..Finding::open(Vec::new())
        }
    }

    fn with(v: Verdict) -> Verdict {
        with_descriptors(v, &[issue()])
    }

    #[test]
    fn an_operand_reading_with_a_wrong_map_is_the_descriptor_at_the_same_status() {
        let l = finding(
            Some(Stage::OperandLoad),
            vec![Stage::Descriptor, Stage::Epilogue],
            Status::Draft,
            false,
        );
        let v = with(reconcile(None, Some(&l)));
        assert_eq!(
            (v.status, v.stage),
            (Status::Draft, Some(Stage::Descriptor))
        );
        assert_eq!(v.alternatives, [Stage::OperandLoad, Stage::Epilogue]);
        assert!(v.summary.contains("tmap_a"), "{}", v.summary);
        let t = finding(
            Some(Stage::OperandLoad),
            vec![Stage::Descriptor],
            Status::Verdict,
            false,
        );
        let v = with(reconcile(Some(&t), None));
        assert_eq!(
            (v.status, v.stage),
            (Status::Verdict, Some(Stage::Descriptor))
        );
        assert!(v.summary.starts_with("descriptor: "), "{}", v.summary);
        // Evidence that already reads as the descriptor is not named twice.
        let mut d = finding(
            Some(Stage::Descriptor),
            vec![Stage::Mma],
            Status::Verdict,
            false,
        );
        d.summary = "descriptor (tiles read with another swizzle)".to_owned();
        let v = with(reconcile(Some(&d), None));
        assert!(
            v.summary.starts_with("descriptor (tiles read")
                && !v.summary.contains("descriptor: descriptor"),
            "{}",
            v.summary
        );
    }

    #[test]
    fn a_ladder_draft_that_an_operand_fits_becomes_the_descriptor_keeping_the_rest() {
        let l = finding(
            Some(Stage::Epilogue),
            vec![Stage::Mma, Stage::OperandLoad, Stage::Descriptor],
            Status::Draft,
            false,
        );
        let v = with(reconcile(None, Some(&l)));
        assert_eq!(
            (v.status, v.stage),
            (Status::Draft, Some(Stage::Descriptor))
        );
        assert_eq!(
            v.alternatives,
            [Stage::OperandLoad, Stage::Epilogue, Stage::Mma]
        );
        // A scale applied twice is no operand's doing: left alone.
        let l = finding(
            Some(Stage::Epilogue),
            vec![Stage::Mma],
            Status::Draft,
            false,
        );
        assert_eq!(with(reconcile(None, Some(&l))).stage, Some(Stage::Epilogue));
    }

    #[test]
    fn a_wrong_map_leaves_other_stages_and_refutations_alone() {
        let t = finding(Some(Stage::Mma), Vec::new(), Status::Verdict, false);
        let v = with(reconcile(Some(&t), None));
        assert_eq!(v.stage, Some(Stage::Mma));
        let l = finding(None, Vec::new(), Status::Verdict, true);
        let v = with(reconcile(None, Some(&l)));
        assert_eq!((v.status, v.stage), (Status::Verdict, None));
    }

    #[test]
    fn a_wrong_map_and_no_evidence_is_a_descriptor_draft() {
        let v = with(reconcile(None, None));
        assert_eq!(
            (v.status, v.stage),
            (Status::Draft, Some(Stage::Descriptor))
        );
        assert!(v.missing.iter().any(|m| m.contains("ladder run")));
        // Without an issue nothing changes.
        assert_eq!(with_descriptors(reconcile(None, None), &[]).stage, None);
    }
}

mod renderings {
    use super::{clean_ones, record, run, trace};
    use crate::{
        Classified, DescriptorIssue, Diagnosis, Evidence, Pattern, RungOutcome, RungState,
        judge_ladder, judge_ones, markdown, reconcile, terminal, with_descriptors,
    };
    use kwb_runtime::Kind;

    /// A diagnosis as kwb diagnose assembles it: the last K tile counted twice, traced
    /// and run on a ladder whose ones rung reads 1 + 32/128.
    fn diagnosis() -> Diagnosis {
        let mut records = clean_ones();
        records[6] = record(Kind::Accumulator, -1, 160.0, 160.0, 4096);
        let t = judge_ones(&trace(records), &run(256, 256, 65536, 1.25));
        let rungs = vec![
            RungOutcome {
                rung: "zeros".to_owned(),
                state: RungState::Pass,
                ratio: f64::NAN,
                mismatches: 0,
                non_finite: 0,
                pattern: None,
                error: None,
            },
            RungOutcome {
                rung: "ones".to_owned(),
                state: RungState::Fail,
                ratio: 1.25,
                mismatches: 65536,
                non_finite: 0,
                pattern: Some(Classified {
                    pattern: Pattern::KResidue {
                        factor: 1.25,
                        extra_k: 32,
                    },
                    wrong: 65536,
                    non_finite: 0,
                    tiles: crate::WrongTiles::of(256, 256, (128, 128), &[true; 65536]),
                }),
                error: None,
            },
        ];
        let l = judge_ladder(&rungs, crate::EpilogueInputs::NONE);
        let descriptors: Vec<DescriptorIssue> = Vec::new();
        Diagnosis {
            instantiation: "gemm_mma_sync<128, 128, 32, 3>".to_owned(),
            source: "kernels/mma_sync/gemm.cu".to_owned(),
            verdict: with_descriptors(reconcile(Some(&t), Some(&l)), &descriptors),
            evidence: vec![
                Evidence {
                    track: "trace",
                    finding: t,
                },
                Evidence {
                    track: "ladder",
                    finding: l,
                },
            ],
            rungs,
            sites: Vec::new(),
            nan_origin: None,
            descriptors,
            maps: vec![
                "map tmap_a (covers A): dims {1024, 256} strides {2048} box {64, 128} bf16 swizzle 128B: matches A".to_owned(),
            ],
            not_run: Vec::new(),
            reproduce: "kwb run DIR/repro --shape 256,256,128 --ladder zeros,ones".to_owned(),
        }
    }

    #[test]
    fn the_terminal_screen() {
        insta::assert_snapshot!(terminal(&diagnosis()));
    }

    #[test]
    fn the_markdown_report() {
        let pictures = [("ones".to_owned(), "heat-ones.svg".to_owned())];
        insta::assert_snapshot!(markdown(&diagnosis(), &pictures));
    }

    #[test]
    fn the_json_schema() {
        let json = serde_json::to_value(diagnosis()).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        insta::assert_debug_snapshot!(keys);
        insta::assert_json_snapshot!(json["verdict"]);
    }
}

mod structured {
    use kwb_reconcile::{Matrix, Product};
    use kwb_runtime::{Kind, RECORD_SIZE, TileValue, Trace, TraceRecord};

    use crate::{Stage, Status, StructuredRun, judge_structured};

    fn wide(rows: usize, cols: usize, seed: u64) -> Matrix {
        Matrix::wide_int(rows, cols, seed)
    }

    fn push(trace: &mut Trace, kind: Kind, k_tile: i32, values: Vec<(f32, i32, i32, i32)>) {
        let mut r = TraceRecord::from_le_bytes(&[0; RECORD_SIZE]);
        r.kind = kind as u32;
        r.k_tile = k_tile;
        r.row_bound = i32::MAX;
        let index = trace.records.len() as u32;
        trace.records.push(r);
        for (element, (value, m, n, k)) in values.into_iter().enumerate() {
            trace.tiles.push(TileValue {
                record: index,
                element: element as u32,
                value,
                m,
                n,
                k,
            });
        }
    }

    /// Rows 0..16 of `m` at K tile `tile` (32 wide) as a fragment's values with their
    /// coordinates (row as n where `row_is_n`); slots past an input with fewer than 16
    /// rows hold zero padding.
    fn fragment(m: &Matrix, row_is_n: bool, tile: usize) -> Vec<(f32, i32, i32, i32)> {
        (0..16)
            .flat_map(|r| (0..32).map(move |k| (r, k)))
            .map(|(r, k)| {
                let v = if r < m.rows {
                    m.data[r * m.cols + tile * 32 + k]
                } else {
                    0.0
                };
                if row_is_n {
                    (v, -1, r as i32, k as i32)
                } else {
                    (v, r as i32, -1, k as i32)
                }
            })
            .collect()
    }

    /// A full trace of one warp computing output rows 0..16, columns 0..16 of
    /// A·Bᵀ (K = 128 in tiles of 32): operand fragments per K step (tile `a_tiles[i]`
    /// of A at step i), then the accumulator at global coordinates holding the
    /// product's tile at `acc_at` (plus `acc_bump` on its first value).
    fn run(a: &Matrix, b: &Matrix, a_tiles: &[usize], acc_at: (i64, i64), acc_bump: f32) -> Trace {
        run_at(a, b, a_tiles, (0, 0), acc_at, acc_bump)
    }

    /// `run` with the accumulator's coordinates starting at `coords` and its values
    /// those of the product at `coords + acc_at`.
    fn run_at(
        a: &Matrix,
        b: &Matrix,
        a_tiles: &[usize],
        coords: (i64, i64),
        acc_at: (i64, i64),
        acc_bump: f32,
    ) -> Trace {
        let mut t = Trace::default();
        for (step, &tile) in a_tiles.iter().enumerate() {
            push(
                &mut t,
                Kind::OperandA,
                step as i32,
                fragment(a, false, tile),
            );
            push(
                &mut t,
                Kind::OperandB,
                step as i32,
                fragment(b, true, step.min(3)),
            );
        }
        let p = Product::of(a, b).unwrap();
        let mut acc: Vec<(f32, i32, i32, i32)> = (coords.0..coords.0 + 16)
            .flat_map(|m| (coords.1..coords.1 + 16).map(move |n| (m, n)))
            .map(|(m, n)| {
                let v = p.get(m + acc_at.0, n + acc_at.1).unwrap_or(0.0) as f32;
                (v, m as i32, n as i32, -1)
            })
            .collect();
        acc[0].0 += acc_bump;
        push(&mut t, Kind::Accumulator, -1, acc);
        t
    }

    fn judged(t: &Trace, a: &Matrix, b: &Matrix, mismatches: u64) -> crate::Finding {
        judge_structured(
            t,
            a,
            b,
            &StructuredRun {
                input: "wide_int".to_owned(),
                output: Some(crate::OutputCheck {
                    mismatches,
                    nan: 0,
                    inf: 0,
                    ratio: 1.0,
                    wrong_tiles: (mismatches > 0)
                        .then(|| crate::WrongTiles::of(64, 64, (64, 64), &[true; 64 * 64])),
                }),
                accumulator_bits: 24,
            },
        )
    }

    fn inputs() -> (Matrix, Matrix) {
        (wide(64, 128, 21), wide(64, 128, 22))
    }

    #[test]
    fn exact_operands_and_accumulator_with_no_output_check_leave_the_epilogue_open() {
        let (a, b) = inputs();
        let t = run(&a, &b, &[0, 1, 2, 3], (0, 0), 0.0);
        let run = StructuredRun {
            input: "wide_int".to_owned(),
            output: None,
            accumulator_bits: 24,
        };
        let f = judge_structured(&t, &a, &b, &run);
        assert_eq!((f.stage, f.clean), (None, false), "{}", f.summary);
        assert!(f.summary.contains("not cleared"), "{}", f.summary);
    }

    /// A full trace with no operand probe: the accumulator of output rows and columns
    /// 0..32 (CTA 0), each `Σ_k times(k) · A(m, a_k(k)) B(n, k)`.
    fn accumulator_only(
        a: &Matrix,
        b: &Matrix,
        a_k: impl Fn(usize) -> Option<usize>,
        times: impl Fn(usize) -> f32,
    ) -> Trace {
        let mut t = Trace::default();
        let acc = (0..32)
            .flat_map(|m| (0..32).map(move |n| (m, n)))
            .map(|(m, n)| {
                let v: f32 = (0..a.cols)
                    .map(|k| {
                        let x = a_k(k).map_or(0.0, |ka| a.data[m * a.cols + ka]);
                        times(k) * x * b.data[n * b.cols + k]
                    })
                    .sum();
                (v, m as i32, n as i32, -1)
            })
            .collect();
        push(&mut t, Kind::Accumulator, -1, acc);
        t
    }

    #[test]
    fn with_no_operand_probed_the_accumulators_k_slices_order_the_draft() {
        let (a, b) = inputs();
        // A read one K tile of 32 ahead of B (past the end: zeros).
        let ahead = |k: usize| (k + 32 < a.cols).then_some(k + 32);
        let f = judged(&accumulator_only(&a, &b, ahead, |_| 1.0), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status, f.confound.clone()),
            (
                Some(Stage::OperandLoad),
                Status::Draft,
                Some(crate::Confound::OperandsNotProbed)
            ),
            "{}",
            f.summary
        );
        assert!(f.fits(Some(Stage::Mma)), "{:?}", f.alternatives);
        assert!(f.summary.contains("another k or row"), "{}", f.summary);
        // The last K tile dropped: a sum of matched slices, the loop's count.
        let f = judged(
            &accumulator_only(&a, &b, Some, |k| if k >= 96 { 0.0 } else { 1.0 }),
            &a,
            &b,
            100,
        );
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Mma), Status::Draft),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("wrong number of steps"), "{}", f.summary);
        assert!(
            f.evidence
                .iter()
                .any(|e| e.contains("k 96..128 never accumulated")),
            "{:?}",
            f.evidence
        );
    }

    #[test]
    fn with_no_operand_probed_an_accumulator_mirrored_across_its_tile_reads_operand_load_first() {
        let (a, b) = inputs();
        let p = Product::of(&a, &b).unwrap();
        // The MMA handed B's tile as A and A's as B: cell (m, n) holds P(n, m).
        let mut t = accumulator_only(&a, &b, Some, |_| 1.0);
        for v in &mut t.tiles {
            v.value = p.get(i64::from(v.n), i64::from(v.m)).unwrap() as f32;
        }
        let f = judged(&t, &a, &b, 100);
        assert_eq!(
            (f.stage, f.status, f.confound.clone()),
            (
                Some(Stage::OperandLoad),
                Status::Draft,
                Some(crate::Confound::OperandsNotProbed)
            ),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("mirrored"), "{}", f.summary);
        assert!(f.fits(Some(Stage::Mma)), "{:?}", f.alternatives);
        // The right accumulator is no mirror: a K tile dropped still reads as the loop.
        let dropped = judged(
            &accumulator_only(&a, &b, Some, |k| if k >= 96 { 0.0 } else { 1.0 }),
            &a,
            &b,
            100,
        );
        assert_eq!(dropped.stage, Some(Stage::Mma), "{}", dropped.summary);
        assert!(!dropped.summary.contains("mirrored"), "{}", dropped.summary);
    }

    #[test]
    fn a_swap_ab_kernel_is_read_with_the_inputs_exchanged() {
        // M = 32 tokens, N = 64 features: the kernel's MMA takes B's rows as A and
        // A's as B, and its accumulator's (m, n) is the output's (n, m).
        let (a, b) = (wide(32, 128, 41), wide(64, 128, 42));
        let right = run(&b, &a, &[0, 1, 2, 3], (0, 0), 0.0);
        let f = judged(&right, &a, &b, 0);
        assert!(f.clean, "{}", f.summary);
        assert!(f.evidence[0].contains("swap-AB"), "{:?}", f.evidence);
        // One accumulator value off with exact operands: the MMA, as in any frame.
        let f = judged(&run(&b, &a, &[0, 1, 2, 3], (0, 0), 1.0), &a, &b, 1);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Mma), Status::Verdict),
            "{}",
            f.summary
        );
        // Right up to the accumulator, output wrong: the store, or an MMA handed A and
        // B the wrong way round; a draft that names both.
        let f = judged(&right, &a, &b, 100);
        assert_eq!(
            (f.stage, f.status, f.confound.clone()),
            (
                Some(Stage::Epilogue),
                Status::Draft,
                Some(crate::Confound::SwappedRoles)
            ),
            "{}",
            f.summary
        );
        assert!(f.fits(Some(Stage::OperandLoad)), "{:?}", f.alternatives);
        // The same operands read in their own frame are no swap.
        let own = judged(&run(&a, &b, &[0, 1, 2, 3], (0, 0), 0.0), &a, &b, 0);
        assert!(
            own.clean && !own.evidence[0].contains("swap-AB"),
            "{}",
            own.summary
        );
    }

    #[test]
    fn a_swap_ab_decode_kernel_with_padding_token_slots_is_read_in_its_frame() {
        // 12 tokens in the MMA's 16 N slots (BATCH < MMA_N, no row bound): slots
        // 12..16 of its B operand hold zeros, and so do the accumulator's columns there.
        let (a, b) = (wide(12, 128, 51), wide(64, 128, 52));
        let right = run(&b, &a, &[0, 1, 2, 3], (0, 0), 0.0);
        let f = judged(&right, &a, &b, 0);
        assert!(f.clean, "{}", f.summary);
        assert!(f.evidence[0].contains("swap-AB"), "{:?}", f.evidence);
        assert!(
            f.evidence
                .iter()
                .any(|e| e.contains("padding rows left out")),
            "{:?}",
            f.evidence
        );
        // The output wrong past an exact accumulator: the store (or the roles).
        let f = judged(&right, &a, &b, 100);
        assert_eq!(
            (f.stage, f.confound.clone()),
            (Some(Stage::Epilogue), Some(crate::Confound::SwappedRoles)),
            "{}",
            f.summary
        );
        // What it clears ends at the problem's edge: tokens 0..12, not the 16 slots.
        let region = f.cleared.as_ref().and_then(|c| c.region);
        assert_eq!(
            region.map(|r| (r.m0, r.m1, r.n0, r.n1)),
            Some((0, 12, 0, 16)),
            "{:?}",
            f.cleared
        );
        // A K tile met twice by both operands: the K loop, a VERDICT as in any frame.
        let twice = run(&b, &a, &[0, 1, 2, 3, 3], (0, 0), 0.0);
        let f = judged(&twice, &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Mma), Status::Verdict),
            "{}",
            f.summary
        );
        // Non-zero values in the padding slots of a tile whose real rows are all
        // there are still no slice of the input: no swap-AB frame is claimed.
        let mut stale = right.clone();
        for v in stale.tiles.iter_mut().filter(|v| v.n >= 12 && v.k >= 0) {
            v.value = 1000.0;
        }
        let f = judged(&stale, &a, &b, 100);
        assert!(!f.evidence[0].contains("swap-AB"), "{:?}", f.evidence);
    }

    #[test]
    fn one_accumulator_set_that_is_twice_its_tile_reads_as_the_mma() {
        // Two n8 tiles the probe cannot tell apart (both at n 0..8): the first holds
        // its tile of A·Bᵀ, the second twice its tile (an MMA issued twice on it).
        let (a, b) = inputs();
        let p = Product::of(&a, &b).unwrap();
        let layers = |second: f32| -> Trace {
            let mut t = run(&a, &b, &[0, 1, 2, 3], (0, 0), 0.0);
            let accumulator = t
                .records
                .iter()
                .position(|r| r.kind() == Some(Kind::Accumulator))
                .unwrap() as u32;
            t.tiles.retain(|v| v.record != accumulator);
            t.records.truncate(accumulator as usize);
            let cell = |m: i32, n: i32| p.get(i64::from(m), i64::from(n)).unwrap() as f32;
            let mut values: Vec<(f32, i32, i32, i32)> = Vec::new();
            for m in 0..16 {
                for n in 0..8 {
                    values.push((cell(m, n), m, n, -1));
                    values.push((second * cell(m, n + 8), m, n, -1));
                }
            }
            push(&mut t, Kind::Accumulator, -1, values);
            t
        };
        let f = judged(&layers(2.0), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status, f.factor),
            (Some(Stage::Mma), Status::Verdict, Some(2.0)),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("2 times its own tile"), "{}", f.summary);
        // A set at half its tile is no whole multiple: a count this reading does
        // not name.
        let f = judged(&layers(0.5), &a, &b, 100);
        assert_ne!(f.status, Status::Verdict, "{}", f.summary);
        // Both sets right and the output wrong: the epilogue, as before.
        let f = judged(&layers(1.0), &a, &b, 100);
        assert_eq!(f.stage, Some(Stage::Epilogue), "{}", f.summary);
        // The second set something else (another tile's values): no multiple, the
        // reading stays "epilogue or mma".
        let mut other = layers(1.0);
        for v in other
            .tiles
            .iter_mut()
            .filter(|v| v.k < 0 && v.m == 0 && v.n == 0 && v.element == 1)
        {
            v.value += 1.0;
        }
        let f = judged(&other, &a, &b, 100);
        assert_ne!(f.status, Status::Verdict, "{}", f.summary);
    }

    /// `run`'s trace (operands exact, rows 0..16 of each) with its accumulator cell
    /// (m, n) set to `value(m, n)`.
    fn with_accumulator(a: &Matrix, b: &Matrix, value: impl Fn(usize, usize) -> f32) -> Trace {
        let mut t = run(a, b, &[0, 1, 2, 3], (0, 0), 0.0);
        for v in &mut t.tiles {
            if t.records[v.record as usize].kind() == Some(Kind::Accumulator) {
                v.value = value(v.m as usize, v.n as usize);
            }
        }
        t
    }

    #[test]
    fn exact_operands_under_an_accumulator_of_mismatched_pairs_read_operand_load_first() {
        let (a, b) = inputs();
        let dot = |m: usize, n: usize, shift: usize| -> f32 {
            (0..128)
                .map(|k| a.data[m * 128 + k] * b.data[n * 128 + (k + shift) % 128])
                .sum()
        };
        // A(m, k) met B(n, k + 32): the MMA was handed another fragment than the
        // probed tile.
        let f = judged(&with_accumulator(&a, &b, |m, n| dot(m, n, 32)), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::OperandLoad), Status::Draft),
            "{}",
            f.summary
        );
        assert!(f.fits(Some(Stage::Mma)), "{:?}", f.alternatives);
        // The last K tile of 32 accumulated twice: matched pairs, the loop's count.
        let twice = |m: usize, n: usize| -> f32 {
            dot(m, n, 0)
                + (96..128)
                    .map(|k| a.data[m * 128 + k] * b.data[n * 128 + k])
                    .sum::<f32>()
        };
        let f = judged(&with_accumulator(&a, &b, twice), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Mma), Status::Verdict),
            "{}",
            f.summary
        );
        // The MMA of the even columns' fragments issued twice, the odd ones' once: no
        // counts every cell shares, yet each cell a whole multiple of its own product.
        let some_twice = |m: usize, n: usize| dot(m, n, 0) * if n % 2 == 0 { 2.0 } else { 1.0 };
        let f = judged(&with_accumulator(&a, &b, some_twice), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Mma), Status::Verdict),
            "{}",
            f.summary
        );
        assert!(
            f.evidence
                .iter()
                .any(|e| e.contains("whole multiple of its own product")),
            "{:?}",
            f.evidence
        );
    }

    /// `run`'s operands (rows 0..16 of A and B) under an accumulator probe that
    /// cannot tell its two n8 tiles apart: both at n 0..8, the second holding the
    /// product at columns `second + n`, and, where `b_rows_8_to_16_from` is set,
    /// B's rows 8..16 loaded from that row on instead of their own.
    fn two_n_tiles(
        a: &Matrix,
        b: &Matrix,
        second: i32,
        b_rows_8_to_16_from: Option<usize>,
    ) -> Trace {
        let mut t = Trace::default();
        for step in 0..4 {
            push(
                &mut t,
                Kind::OperandA,
                step as i32,
                fragment(a, false, step),
            );
            let mut frag = fragment(b, true, step);
            if let Some(from) = b_rows_8_to_16_from {
                for v in frag.iter_mut().filter(|v| v.2 >= 8) {
                    let row = from + v.2 as usize - 8;
                    v.0 = b.data[row * b.cols + step * 32 + v.3 as usize];
                }
            }
            push(&mut t, Kind::OperandB, step as i32, frag);
        }
        let p = Product::of(a, b).unwrap();
        let mut acc = Vec::new();
        for shift in [0, second] {
            for m in 0..16 {
                for n in 0..8 {
                    let v = p.get(m, i64::from(n + shift)).unwrap() as f32;
                    acc.push((v, m as i32, n, -1));
                }
            }
        }
        push(&mut t, Kind::Accumulator, -1, acc);
        t
    }

    #[test]
    fn a_fragment_holding_anothers_product_with_every_row_loaded_is_the_mma() {
        let (a, b) = inputs();
        // Right: the second n8 tile holds columns 8..16.
        let f = judged(&two_n_tiles(&a, &b, 8, None), &a, &b, 0);
        assert!(f.clean, "{}", f.summary);
        // The MMA of the second tile handed the first tile's B registers: B's rows
        // 8..16 were loaded and probed, and no accumulator value has their product.
        let f = judged(&two_n_tiles(&a, &b, 0, None), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Mma), Status::Verdict),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("rows 8..16"), "{}", f.summary);
        // The ladder of such a kernel: ones right, the permutations wrong. Wrong
        // values met the right number of times fit an MMA handed the wrong
        // registers, so the ladder does not contradict the trace.
        let l = crate::judge_ladder(
            &super::ladder_and_verdict::failing(
                &["seq-identity", "small-int:1", "random:1"],
                None,
                1.0,
            ),
            crate::EpilogueInputs::NONE,
        );
        let v = crate::reconcile(Some(&f), Some(&l));
        assert_eq!(
            (v.status, v.stage),
            (Status::Verdict, Some(Stage::Mma)),
            "{}",
            v.summary
        );
        // The second tile's B registers loaded with the first tile's rows: the
        // same accumulator, but no loaded row is missing from it. Not the MMA's
        // verdict.
        let f = judged(&two_n_tiles(&a, &b, 0, Some(0)), &a, &b, 100);
        assert!(
            !(f.stage == Some(Stage::Mma) && f.status == Status::Verdict),
            "{}",
            f.summary
        );
    }

    #[test]
    fn exact_operands_accumulator_and_output_are_clean() {
        let (a, b) = inputs();
        let f = judged(&run(&a, &b, &[0, 1, 2, 3], (0, 0), 0.0), &a, &b, 0);
        assert_eq!((f.stage, f.clean), (None, true), "{}", f.summary);
    }

    #[test]
    fn a_k_tile_fed_twice_is_an_operand_load_verdict() {
        let (a, b) = inputs();
        let f = judged(&run(&a, &b, &[0, 1, 0, 3], (0, 0), 0.0), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::OperandLoad), Status::Verdict),
            "{}",
            f.summary
        );
        assert!(f.fits(Some(Stage::Descriptor)));
    }

    #[test]
    fn one_step_too_many_with_each_step_right_is_the_mma() {
        let (a, b) = inputs();
        let f = judged(&run(&a, &b, &[0, 1, 2, 3, 3], (0, 0), 0.0), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Mma), Status::Verdict),
            "{}",
            f.summary
        );
    }

    #[test]
    fn another_tiles_product_at_these_coordinates_is_the_operand_tile_selection() {
        let (a, b) = inputs();
        // At global coordinates (32..48, 16..32) the product's tile 16 columns to the
        // left: this CTA computed another tile's product.
        let f = judged(
            &run_at(&a, &b, &[0, 1, 2, 3], (32, 16), (0, -16), 0.0),
            &a,
            &b,
            100,
        );
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::OperandLoad), Status::Verdict),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("moved by (0, -16)"), "{}", f.summary);
        // Coordinates local to the warp (from 0) read as a shift of the right tile.
        let local = judged(&run(&a, &b, &[0, 1, 2, 3], (16, 0), 0.0), &a, &b, 0);
        assert!(local.clean, "{}", local.summary);
        // With the accumulator at its own place but one value off: the MMA.
        let g = judged(&run(&a, &b, &[0, 1, 2, 3], (0, 0), 1.0), &a, &b, 1);
        assert_eq!(
            (g.stage, g.status),
            (Some(Stage::Mma), Status::Verdict),
            "{}",
            g.summary
        );
    }

    #[test]
    fn an_accumulator_of_the_operands_fed_the_wrong_way_round_is_an_operand_load_verdict() {
        let (a, b) = inputs();
        let p = Product::of(&a, &b).unwrap();
        // The MMA fed B's tile as A and A's as B: cell (m, n) holds P(n, m).
        let mut t = run(&a, &b, &[0, 1, 2, 3], (0, 0), 0.0);
        for v in &mut t.tiles {
            if t.records[v.record as usize].kind() == Some(Kind::Accumulator) {
                v.value = p.get(i64::from(v.n), i64::from(v.m)).unwrap() as f32;
            }
        }
        let f = judged(&t, &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::OperandLoad), Status::Verdict),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("B's tile as A"), "{}", f.summary);
        assert!(f.fits(Some(Stage::Mma)), "{:?}", f.alternatives);
    }

    /// A split-K CTA's full trace: its operands walk K tiles 0 and 1 (k 0..64 of K =
    /// 128) and its accumulator, at global coordinates, is `times` their product.
    fn split_share(a: &Matrix, b: &Matrix, times: f32) -> Trace {
        let mut t = Trace::default();
        for step in 0..2 {
            push(
                &mut t,
                Kind::OperandA,
                step as i32,
                fragment(a, false, step),
            );
            push(&mut t, Kind::OperandB, step as i32, fragment(b, true, step));
        }
        let part = Product::of(&a.columns(0..64), &b.columns(0..64)).unwrap();
        let acc = (0..16)
            .flat_map(|m| (0..16).map(move |n| (m, n)))
            .map(|(m, n)| {
                (
                    part.get(m, n).unwrap() as f32 * times,
                    m as i32,
                    n as i32,
                    -1,
                )
            })
            .collect();
        push(&mut t, Kind::Accumulator, -1, acc);
        t
    }

    #[test]
    fn a_split_k_share_accumulated_twice_is_an_mma_verdict() {
        let (a, b) = inputs();
        let f = judged(&split_share(&a, &b, 2.0), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status, f.factor),
            (Some(Stage::Mma), Status::Verdict, Some(2.0)),
            "{}: {:?}",
            f.summary,
            f.evidence
        );
        assert!(f.summary.contains("over k 0..64 only"), "{}", f.summary);
        // Accumulated once under an output that is not the share alone: a split-K
        // partial computed right, the output made after it (a draft that clears the
        // share's operands and MMA).
        let g = judged(&split_share(&a, &b, 1.0), &a, &b, 100);
        assert!(!g.summary.contains("over k 0..64 only"), "{}", g.summary);
        assert_eq!(
            (g.stage, g.status, g.confound.clone()),
            (
                Some(Stage::Epilogue),
                Status::Draft,
                Some(crate::Confound::SplitKPartial { slices: 2 })
            ),
            "{}",
            g.summary
        );
        let cleared = g.cleared.expect("the share is cleared");
        assert_eq!(cleared.k, Some((0, 64)));
        assert!(cleared.stages.contains(&Stage::Mma));
        // The output as short as the share: the K loop was cut, not summed after.
        let short = judged_with(
            &split_share(&a, &b, 1.0),
            &a,
            &b,
            crate::OutputCheck {
                mismatches: 100,
                nan: 0,
                inf: 0,
                ratio: 0.5,
                wrong_tiles: None,
            },
        );
        assert_ne!(short.stage, Some(Stage::Epilogue), "{}", short.summary);
    }

    /// A SIMT warp's full trace (`acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j])`,
    /// one k a record, no coordinates): lane l holds 4 rows of A from (l / 16) * 4
    /// and 4 of B from (l % 16) * 4, K = 128 in tiles of 16 steps; at step t the
    /// fragments read A's K tile `a_tiles[t]`; the accumulator is what they make.
    fn simt(a: &Matrix, b: &Matrix, a_tiles: &[usize]) -> Trace {
        simt_at(a, b, |step, kk| a_tiles[step] * 16 + kk)
    }

    /// [`simt`] whose A fragment at step kk of K tile t reads k `a_k(t, kk)`.
    fn simt_at(a: &Matrix, b: &Matrix, a_k: impl Fn(usize, usize) -> usize + Copy) -> Trace {
        let mut t = Trace::default();
        let lanes = |row: fn(usize, usize) -> usize, m: &Matrix, k: usize| -> Vec<_> {
            (0..32)
                .flat_map(|lane| (0..4).map(move |i| (lane, i)))
                .map(|(lane, i)| (m.data[row(lane, i) * m.cols + k], -1, -1, -1))
                .collect()
        };
        let a_row = |lane: usize, i: usize| (lane / 16) * 4 + i;
        let b_row = |lane: usize, j: usize| (lane % 16) * 4 + j;
        for step in 0..8 {
            for kk in 0..16 {
                push(
                    &mut t,
                    Kind::OperandA,
                    step as i32,
                    lanes(a_row, a, a_k(step, kk)),
                );
                push(
                    &mut t,
                    Kind::OperandB,
                    step as i32,
                    lanes(b_row, b, step * 16 + kk),
                );
            }
        }
        let acc = (0..32)
            .flat_map(|lane| (0..4).flat_map(move |i| (0..4).map(move |j| (lane, i, j))))
            .map(|(lane, i, j)| {
                let (m, n) = (a_row(lane, i), b_row(lane, j));
                let v: f32 = (0..8)
                    .flat_map(|step| (0..16).map(move |kk| (a_k(step, kk), step * 16 + kk)))
                    .map(|(ka, kb)| a.data[m * a.cols + ka] * b.data[n * b.cols + kb])
                    .sum();
                (v, -1, -1, -1)
            })
            .collect();
        push(&mut t, Kind::Accumulator, -1, acc);
        t
    }

    #[test]
    fn a_simt_fragment_fed_a_stale_stage_is_an_operand_load_verdict() {
        let (a, b) = inputs();
        let clean = judged(&simt(&a, &b, &[0, 1, 2, 3, 4, 5, 6, 7]), &a, &b, 0);
        assert!(clean.clean, "{}: {:?}", clean.summary, clean.evidence);
        assert!(
            clean
                .evidence
                .iter()
                .any(|e| e.contains("followed across their k steps")),
            "{:?}",
            clean.evidence
        );
        // Step 2 reads the buffer step 1 filled: k 32..48 never consumed.
        let f = judged(&simt(&a, &b, &[0, 1, 1, 3, 4, 5, 6, 7]), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::OperandLoad), Status::Verdict),
            "{}: {:?}",
            f.summary,
            f.evidence
        );
        assert!(
            f.summary.contains("k 32..48 never consumed"),
            "{}",
            f.summary
        );
        // Every K tile after the first loaded one k further on (the last reads the
        // input's k 127 only where it exists: clamped here).
        let g = judged(
            &simt_at(&a, &b, |step, kk| {
                (step * 16 + kk + usize::from(step > 0)).min(127)
            }),
            &a,
            &b,
            100,
        );
        assert_eq!(
            (g.stage, g.status),
            (Some(Stage::OperandLoad), Status::Verdict),
            "{}: {:?}",
            g.summary,
            g.evidence
        );
        assert!(g.summary.contains("starting 1 k past"), "{}", g.summary);
    }

    /// Output rows 0..16, columns 0..16 of the product over K = 128 of A and B as
    /// `read_a(m, k)` and `read_b(n, k)` read them, at their (m, n) or (`coords`
    /// false) with no coordinates.
    fn read_product(
        read_a: impl Fn(usize, usize) -> f32,
        read_b: impl Fn(usize, usize) -> f32,
        coords: bool,
    ) -> Vec<(f32, i32, i32, i32)> {
        (0..16)
            .flat_map(|m| (0..16).map(move |n| (m, n)))
            .map(|(m, n)| {
                let v: f32 = (0..128).map(|k| read_a(m, k) * read_b(n, k)).sum();
                if coords {
                    (v, m as i32, n as i32, -1)
                } else {
                    (v, -1, -1, -1)
                }
            })
            .collect()
    }

    /// A full trace of output rows 0..16, columns 0..16 whose operand B is the input
    /// read with its dimensions swapped (`B(n, k) = b[k * N + n]`, N = 64), K tiles of
    /// 32 with local k; the accumulator is the product of what the probes show, plus
    /// `bump` on its first value.
    fn b_swapped(a: &Matrix, b: &Matrix, bump: f32) -> Trace {
        let read_b = |n: usize, k: usize| b.data[k * 64 + n];
        let mut t = Trace::default();
        for step in 0..4 {
            let a_vals = (0..16)
                .flat_map(|m| (0..32).map(move |k| (m, k)))
                .map(|(m, k)| (a.data[m * a.cols + step * 32 + k], m as i32, -1, k as i32))
                .collect();
            push(&mut t, Kind::OperandA, step as i32, a_vals);
            let b_vals = (0..16)
                .flat_map(|n| (0..32).map(move |k| (n, k)))
                .map(|(n, k)| (read_b(n, step * 32 + k), -1, n as i32, k as i32))
                .collect();
            push(&mut t, Kind::OperandB, step as i32, b_vals);
        }
        let mut acc = read_product(|m, k| a.data[m * a.cols + k], read_b, true);
        acc[0].0 += bump;
        push(&mut t, Kind::Accumulator, -1, acc);
        t
    }

    #[test]
    fn an_operand_read_in_another_layout_is_a_verdict_when_the_mma_consumed_it() {
        let (a, b) = inputs();
        let f = judged(&b_swapped(&a, &b, 0.0), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status, f.confound),
            (Some(Stage::OperandLoad), Status::Verdict, None),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("the probe's coordinates are the MMA's"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("as if stored [K, N]"), "{}", f.summary);
        // An accumulator that is not the traced operands' product leaves the probe's
        // coordinates in doubt: a draft.
        let g = judged(&b_swapped(&a, &b, 1.0), &a, &b, 100);
        assert_eq!(
            (g.stage, g.status, g.confound),
            (
                Some(Stage::OperandLoad),
                Status::Draft,
                Some(crate::Confound::ProbeCoordinates)
            ),
            "{}",
            g.summary
        );
        assert!(
            g.evidence.iter().any(|e| e.contains("255 equal")),
            "{:?}",
            g.evidence
        );
    }

    /// A full trace whose operand tiles (rows 0..16 of A and of B, two 64-wide K tiles)
    /// lie unswizzled in shared memory and are read in raw order, and whose accumulator
    /// (no coordinates) holds, for each (m, n), the inputs' product read with each
    /// row's 16-byte chunks permuted as a 128-byte swizzle permutes them (`swizzled`)
    /// or as they lie; plus `bump` on one value.
    fn raw_tiles(a: &Matrix, b: &Matrix, swizzled: bool, bump: f32) -> Trace {
        let mut t = Trace::default();
        for step in 0..2 {
            for (kind, m) in [(Kind::OperandA, a), (Kind::OperandB, b)] {
                let tile: Vec<(f32, i32, i32, i32)> = (0..16 * 64)
                    .map(|e| (m.data[e / 64 * m.cols + step * 64 + e % 64], -1, -1, -1))
                    .collect();
                push(&mut t, kind, step as i32, tile);
            }
        }
        let at = |mat: &Matrix, r: usize, k: usize| {
            let read = if swizzled {
                kwb_reconcile::swizzle_swapped_k(r, k)
            } else {
                k
            };
            mat.data[r * mat.cols + read]
        };
        let mut acc = read_product(|m, k| at(a, m, k), |n, k| at(b, n, k), false);
        acc[5].0 += bump;
        push(&mut t, Kind::Accumulator, -1, acc);
        t
    }

    #[test]
    fn tiles_read_with_another_swizzle_than_written_are_the_descriptor() {
        let (a, b) = inputs();
        let f = judged(&raw_tiles(&a, &b, true, 0.0), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Descriptor), Status::Verdict),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("read 128-byte swizzled"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("256 of 256"), "{}", f.summary);
        // Read as written: the plain product, right.
        let right = judged(&raw_tiles(&a, &b, false, 0.0), &a, &b, 0);
        assert!(right.clean, "{}", right.summary);
        // Neither reading: the draft stands.
        let g = judged(&raw_tiles(&a, &b, true, 1.0), &a, &b, 100);
        assert_eq!(
            (g.stage, g.status),
            (Some(Stage::Mma), Status::Draft),
            "{}",
            g.summary
        );
        assert!(
            g.summary
                .contains("nor of the inputs read with the other swizzle")
        );
    }

    /// `raw_tiles`' operand tiles (unswizzled) under an accumulator with coordinates
    /// that holds the product over the k `kept` alone.
    fn raw_tiles_keeping(a: &Matrix, b: &Matrix, kept: impl Fn(usize) -> bool) -> Trace {
        let mut t = raw_tiles(a, b, false, 0.0);
        let acc = t.records.len() - 1;
        t.tiles.retain(|v| v.record as usize != acc);
        t.records.pop();
        let acc = read_product(
            |m, k| if kept(k) { a.data[m * a.cols + k] } else { 0.0 },
            |n, k| b.data[n * b.cols + k],
            true,
        );
        push(&mut t, Kind::Accumulator, -1, acc);
        t
    }

    #[test]
    fn tiles_read_right_under_the_product_of_a_stretch_of_k_that_ends_it_are_the_mma() {
        let (a, b) = inputs();
        // Zeroed at the second K tile: the products of k 64..128 alone.
        let f = judged(&raw_tiles_keeping(&a, &b, |k| k >= 64), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Mma), Status::Verdict),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("k 64..128 only"), "{}", f.summary);
        assert!(f.summary.contains("zeroed"), "{}", f.summary);
        // Stopped after the first K tile.
        let f = judged(&raw_tiles_keeping(&a, &b, |k| k < 64), &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Mma), Status::Verdict),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("stopped early"), "{}", f.summary);
        // Half of each K tile (as a descriptor's k offset could give): no stretch.
        let f = judged(&raw_tiles_keeping(&a, &b, |k| k % 64 < 32), &a, &b, 100);
        assert_ne!(f.status, Status::Verdict, "{}", f.summary);
        // A stretch inside K that touches neither end: no reading either.
        let f = judged(
            &raw_tiles_keeping(&a, &b, |k| (32..96).contains(&k)),
            &a,
            &b,
            100,
        );
        assert_ne!(f.status, Status::Verdict, "{}", f.summary);
    }

    #[test]
    fn a_right_accumulator_under_a_wrong_output_is_the_epilogue() {
        let (a, b) = inputs();
        let f = judged(&run(&a, &b, &[0, 1, 2, 3], (0, 0), 0.0), &a, &b, 256);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Epilogue), Status::Verdict),
            "{}",
            f.summary
        );
    }

    /// A check of the 64 x 64 output with only tile (`row`, `col`) of 16 x 16 wrong.
    fn wrong_in(row: usize, col: usize) -> crate::OutputCheck {
        let wrong: Vec<bool> = (0..64 * 64)
            .map(|i| (i / 64 / 16, i % 64 / 16) == (row, col))
            .collect();
        crate::OutputCheck {
            mismatches: 256,
            nan: 0,
            inf: 0,
            ratio: 1.0,
            wrong_tiles: Some(crate::WrongTiles::of(64, 64, (16, 16), &wrong)),
        }
    }

    fn judged_with(
        t: &Trace,
        a: &Matrix,
        b: &Matrix,
        output: crate::OutputCheck,
    ) -> crate::Finding {
        judge_structured(
            t,
            a,
            b,
            &StructuredRun {
                input: "wide_int".to_owned(),
                output: Some(output),
                accumulator_bits: 24,
            },
        )
    }

    #[test]
    fn a_right_traced_tile_under_an_output_wrong_elsewhere_is_no_epilogue_verdict() {
        let (a, b) = inputs();
        // The accumulator at global coordinates rows 16..32, columns 0..16: tile (1, 0).
        let t = run_at(&a, &b, &[0, 1, 2, 3], (16, 0), (0, 0), 0.0);
        let inside = judged_with(&t, &a, &b, wrong_in(1, 0));
        assert_eq!(
            (inside.stage, inside.status),
            (Some(Stage::Epilogue), Status::Verdict),
            "{}",
            inside.summary
        );
        let cleared = inside
            .cleared
            .as_ref()
            .expect("operands and accumulator right");
        assert_eq!(
            cleared.region,
            Some(crate::Region {
                m0: 16,
                m1: 32,
                n0: 0,
                n1: 16
            })
        );
        // Only tile (3, 3) wrong: the traced CTA says nothing about it.
        let outside = judged_with(&t, &a, &b, wrong_in(3, 3));
        assert_eq!(outside.status, Status::Draft, "{}", outside.summary);
        assert_eq!(outside.confound, Some(crate::Confound::ElsewhereThanTraced));
        assert!(outside.fits(Some(Stage::OperandLoad)));
        assert!(
            outside.summary.contains("rows 48..64, columns 48..64"),
            "{}",
            outside.summary
        );
        // Coordinates from 0 with no tile origin: a local frame may sit anywhere, so
        // a partial error map cannot be joined to it.
        let mut local = run(&a, &b, &[0, 1, 2, 3], (0, 0), 0.0);
        for r in &mut local.records {
            (r.tile_m, r.tile_n) = (-1, -1);
        }
        let unknown = judged_with(&local, &a, &b, wrong_in(0, 0));
        assert_eq!(unknown.status, Status::Draft, "{}", unknown.summary);
        assert_eq!(unknown.cleared.as_ref().and_then(|c| c.region), None);
        // A check that does not say where it is wrong joins nothing.
        let nowhere = judged_with(
            &t,
            &a,
            &b,
            crate::OutputCheck {
                wrong_tiles: None,
                ..wrong_in(1, 0)
            },
        );
        assert_eq!(nowhere.status, Status::Draft, "{}", nowhere.summary);
    }

    #[test]
    fn a_local_frame_is_placed_only_by_the_origin_its_records_name() {
        let (a, b) = inputs();
        // Coordinates from 0, values of the product at (16.., 0..): with the records
        // naming origin (16, 0) the region is rows 16..32; naming (32, 0) it is none
        // (the CTA holds another tile than its own).
        for (origin, region) in [
            (
                (16, 0),
                Some(crate::Region {
                    m0: 16,
                    m1: 32,
                    n0: 0,
                    n1: 16,
                }),
            ),
            ((32, 0), None),
        ] {
            let mut t = run(&a, &b, &[0, 1, 2, 3], (16, 0), 0.0);
            for r in &mut t.records {
                (r.tile_m, r.tile_n) = origin;
            }
            let f = judged_with(&t, &a, &b, wrong_in(1, 0));
            assert_eq!(
                f.cleared.as_ref().and_then(|c| c.region),
                region,
                "{origin:?}: {}",
                f.summary
            );
        }
    }

    #[test]
    fn an_incomplete_trace_or_operands_of_another_k_are_not_judged() {
        let (a, b) = inputs();
        let mut t = run(&a, &b, &[0, 1, 2, 3], (0, 0), 0.0);
        t.tile_dropped = 5;
        let f = judged(&t, &a, &b, 0);
        assert_eq!((f.stage, f.clean), (None, false));
        assert!(f.summary.starts_with("not judged"), "{}", f.summary);
        let other = wide(64, 96, 3);
        let g = judged(&run(&a, &b, &[0, 1, 2, 3], (0, 0), 0.0), &a, &other, 0);
        assert!(g.summary.contains("different K"), "{}", g.summary);
    }

    /// An MMA call handed B's tile as its A operand and A's as B in the later K
    /// steps only (one of a kernel's MMA calls with its arguments exchanged): the
    /// probes of each slot hold the other input's runs there, the accumulator the
    /// mixed sum. No frame exchanges the operands in some steps only.
    #[test]
    fn an_operand_holding_the_other_inputs_tile_in_some_steps_is_an_operand_load_verdict() {
        let (a, b) = inputs();
        let exchanged = |step: usize| step >= 2;
        let mut t = Trace::default();
        for step in 0..4 {
            let (in_a, in_b) = if exchanged(step) { (&b, &a) } else { (&a, &b) };
            push(
                &mut t,
                Kind::OperandA,
                step as i32,
                fragment(in_a, false, step),
            );
            push(
                &mut t,
                Kind::OperandB,
                step as i32,
                fragment(in_b, true, step),
            );
        }
        let acc = (0..16)
            .flat_map(|m| (0..16).map(move |n| (m, n)))
            .map(|(m, n)| {
                let v: f32 = (0..a.cols)
                    .map(|k| {
                        if exchanged(k / 32) {
                            b.data[m * b.cols + k] * a.data[n * a.cols + k]
                        } else {
                            a.data[m * a.cols + k] * b.data[n * b.cols + k]
                        }
                    })
                    .sum();
                (v, m as i32, n as i32, -1)
            })
            .collect();
        push(&mut t, Kind::Accumulator, -1, acc);
        let f = judged(&t, &a, &b, 100);
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::OperandLoad), Status::Verdict),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("handed B's tile as its A operand"),
            "{}",
            f.summary
        );
        // Every step exchanged on this square problem is no mixture: not read so.
        let mut whole = Trace::default();
        for step in 0..4 {
            push(
                &mut whole,
                Kind::OperandA,
                step as i32,
                fragment(&b, false, step),
            );
            push(
                &mut whole,
                Kind::OperandB,
                step as i32,
                fragment(&a, true, step),
            );
        }
        let f = judged(&whole, &a, &b, 100);
        assert!(!f.summary.contains("handed B's tile"), "{}", f.summary);
    }
}

mod two_traces {
    use crate::{Finding, Stage, Status, combine_traces};

    fn f(stage: Option<Stage>, status: Status, clean: bool) -> Finding {
        Finding {
            stage,
            status,
            clean,
            summary: format!("{stage:?}"),
            ..Finding::open(Vec::new())
        }
    }

    #[test]
    fn the_isolating_trace_wins_and_two_that_disagree_are_a_draft() {
        let clean_ones = f(None, Status::Draft, true);
        let operand = f(Some(Stage::OperandLoad), Status::Verdict, false);
        // Ones sees nothing, the full trace isolates the operand load.
        let c = combine_traces(Some(clean_ones.clone()), Some(operand.clone())).unwrap();
        assert_eq!(
            (c.stage, c.status),
            (Some(Stage::OperandLoad), Status::Verdict)
        );
        // Ones isolates the MMA, the full trace only draws: the ones verdict.
        let mma = f(Some(Stage::Mma), Status::Verdict, false);
        let draft = f(Some(Stage::Epilogue), Status::Draft, false);
        let c = combine_traces(Some(mma.clone()), Some(draft.clone())).unwrap();
        assert_eq!(c.stage, Some(Stage::Mma));
        // Both isolate, different stages: a draft that says so.
        let c = combine_traces(Some(mma), Some(operand)).unwrap();
        assert_eq!(c.status, Status::Draft);
        assert!(c.summary.contains("disagree"), "{}", c.summary);
        // A draft on ones against a full trace that clears operands and accumulator:
        // the clearing trace, which elimination can use.
        let clearing = Finding {
            cleared: Some(crate::Cleared {
                stages: vec![Stage::OperandLoad, Stage::Descriptor, Stage::Mma],
                region: None,
                m: 256,
                n: 256,
                k: None,
            }),
            ..f(None, Status::Draft, false)
        };
        let elsewhere = Finding {
            confound: Some(crate::Confound::ElsewhereThanTraced),
            ..draft.clone()
        };
        let c = combine_traces(Some(elsewhere), Some(clearing.clone())).unwrap();
        assert!(c.cleared.is_some(), "{}", c.summary);
        // A ones draft with a confound of its own (padding) keeps it.
        let padded = Finding {
            confound: Some(crate::Confound::PaddingRows { m: 8, n: 1024 }),
            ..draft.clone()
        };
        let c = combine_traces(Some(padded), Some(clearing.clone())).unwrap();
        assert_eq!(c.stage, Some(Stage::Epilogue));
        // A full trace that neither points nor clears leaves the ones draft.
        let c = combine_traces(Some(draft.clone()), Some(f(None, Status::Draft, false))).unwrap();
        assert_eq!(c.stage, Some(Stage::Epilogue));
        // One trace alone is itself.
        assert_eq!(
            combine_traces(Some(clean_ones.clone()), None),
            Some(clean_ones)
        );
        assert_eq!(combine_traces(None, None), None);
    }
}

mod faults {
    use crate::{
        Direction, FaultEvidence, Problem, RungOutcome, RungState, Space, Stage, Status,
        judge_fault, judge_ladder, parse_memcheck, reconcile, with_fault,
    };

    /// memcheck's report as compute-sanitizer 2025.3 writes it on an H200 (a
    /// reproducer's misaligned cp.async source; paths shortened).
    const MISALIGNED: &str = "========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at <unnamed>::cp_async_16(void *, const void *, bool)+0x14c0 in repro.cu:79
=========     by thread (64,0,0) in block (2,0,0)
=========     Access to 0x48ea008082 is misaligned
=========     and is inside the nearest allocation at 0x48ea000000 of size 524,288 bytes
=========         Device Frame: void <unnamed>::load_tile_async<(int)128, (int)32>(__nv_bfloat16 *, const __nv_bfloat16 *, int, int, int, int, int)+0x1100 in repro.cu:128
=========         Device Frame: void gemm_mma_sync<(int)128, (int)128, (int)32, (int)3>(int, int, int, float, const __nv_bfloat16 *, const __nv_bfloat16 *, float, const __nv_bfloat16 *, __nv_bfloat16 *)+0xf00 in repro.cu:221
========= 
========= Invalid __global__ read of size 16 bytes
=========     at <unnamed>::cp_async_16(void *, const void *, bool)+0x14c0 in repro.cu:79
=========     by thread (65,0,0) in block (2,0,0)
=========     Access to 0x48ea008092 is misaligned
========= ERROR SUMMARY: 129 errors
";

    /// The older form: `at 0xOFFSET in FILE:LINE:FUNCTION`.
    const SHARED_OLD: &str = "========= Invalid __shared__ write of size 16 bytes
=========     at 0x000004c0 in src/k.cu:95:gemm(const float *, float *)
=========     by thread (127,0,0) in block (3,0,0)
=========     Address 0x00012000 is out of bounds
";

    #[test]
    fn memcheck_reports_are_read_in_both_forms() {
        let a = parse_memcheck(MISALIGNED).expect("an access");
        assert_eq!(a.direction, Direction::Read);
        assert_eq!(a.space, Space::Global);
        assert_eq!(a.size, Some(16));
        assert_eq!(a.problem, Problem::Misaligned);
        assert_eq!(a.file.as_deref(), Some("repro.cu"));
        assert_eq!(a.line, Some(79));
        assert_eq!(
            a.function.as_deref(),
            Some("<unnamed>::cp_async_16(void *, const void *, bool)")
        );
        assert_eq!(
            a.frames,
            vec![("repro.cu".to_owned(), 128), ("repro.cu".to_owned(), 221)]
        );
        assert_eq!(a.address, Some(0x48_ea00_8082));
        assert_eq!(a.nearest, Some((0x48_ea00_0000, 524_288)));
        assert_eq!(a.thread, Some([64, 0, 0]));
        assert_eq!(a.block, Some([2, 0, 0]));

        let b = parse_memcheck(SHARED_OLD).expect("an access");
        assert_eq!((b.direction, b.space), (Direction::Write, Space::Shared));
        assert_eq!(b.problem, Problem::OutOfBounds);
        assert_eq!((b.file.as_deref(), b.line), (Some("src/k.cu"), Some(95)));
        assert_eq!(b.function.as_deref(), Some("gemm(const float *, float *)"));

        assert_eq!(parse_memcheck("========= ERROR SUMMARY: 0 errors\n"), None);
    }

    fn evidence(log: &str, buffer: Option<&str>, site: Option<Stage>) -> FaultEvidence {
        FaultEvidence {
            rung: "zeros".to_owned(),
            error: "kernel: misaligned address".to_owned(),
            access: parse_memcheck(log),
            buffer: buffer.map(str::to_owned),
            site: site.map(|s| (s, "k.cu:185 `load_tile_async(...)`".to_owned())),
            place: None,
            unlocated: None,
            tma_maps: Vec::new(),
        }
    }

    #[test]
    fn a_fault_is_the_stage_of_its_access() {
        // A misaligned read of A at a load site: the load's own addressing.
        let f = judge_fault(&evidence(MISALIGNED, Some("A"), Some(Stage::OperandLoad)));
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::OperandLoad), Status::Verdict),
            "{}",
            f.summary
        );
        // A shared-memory write out of bounds at a load site.
        let f = judge_fault(&evidence(SHARED_OLD, None, Some(Stage::OperandLoad)));
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::OperandLoad), Status::Verdict)
        );
        // No site holds the line: the buffer's stage, a draft.
        let f = judge_fault(&evidence(MISALIGNED, Some("A"), None));
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::OperandLoad), Status::Draft)
        );
        // The site and the buffer disagree: a draft naming both.
        let f = judge_fault(&evidence(MISALIGNED, Some("C"), Some(Stage::OperandLoad)));
        assert_eq!(f.status, Status::Draft);
        assert_eq!(f.stage, Some(Stage::OperandLoad));
        assert_eq!(f.alternatives, vec![Stage::Epilogue]);
        // Neither: no stage.
        let f = judge_fault(&evidence(SHARED_OLD, None, None));
        assert_eq!(f.stage, None);
        // Memcheck named nothing: no stage, and why.
        let f = judge_fault(&FaultEvidence {
            unlocated: Some("compute-sanitizer was not found".to_owned()),
            ..evidence("", None, None)
        });
        assert_eq!(f.stage, None);
        assert!(f.summary.contains("not found"), "{}", f.summary);
    }

    #[test]
    fn a_global_read_past_an_operands_end_could_be_the_k_loop() {
        let past = MISALIGNED
            .replace("is misaligned", "is out of bounds")
            .replace("0x48ea008082", "0x48ea080010")
            .replace(
                "and is inside the nearest",
                "and is 16 bytes after the nearest",
            );
        let f = judge_fault(&evidence(&past, Some("A"), Some(Stage::OperandLoad)));
        assert_eq!(f.status, Status::Draft, "{}", f.summary);
        assert_eq!(f.stage, Some(Stage::OperandLoad));
        assert_eq!(f.alternatives, vec![Stage::Mma]);
        // A store past D's end is the epilogue's own.
        let store = past.replace("__global__ read", "__global__ write");
        let f = judge_fault(&evidence(&store, Some("D"), Some(Stage::Epilogue)));
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Epilogue), Status::Verdict)
        );
    }

    #[test]
    fn a_faulting_rung_is_no_wrong_numbers_and_the_fault_decides() {
        let rung = |name: &str, state: RungState| RungOutcome {
            rung: name.to_owned(),
            state,
            ratio: f64::NAN,
            mismatches: 0,
            non_finite: 0,
            pattern: None,
            error: None,
        };
        // Zeros faulted (no output): the ladder names no stage (it used to read a
        // failed zeros rung as the epilogue's).
        let ladder = judge_ladder(
            &[rung("zeros", RungState::Fault)],
            crate::EpilogueInputs::NONE,
        );
        assert_eq!(ladder.stage, None, "{}", ladder.summary);
        assert!(ladder.summary.contains("faulted"));
        let fault = judge_fault(&evidence(MISALIGNED, Some("A"), Some(Stage::OperandLoad)));
        let v = with_fault(reconcile(None, Some(&ladder)), Some(&fault));
        assert_eq!(
            (v.stage, v.status),
            (Some(Stage::OperandLoad), Status::Verdict)
        );
        // A verdict the other evidence isolated stands.
        let mut isolated = reconcile(None, Some(&ladder));
        isolated.status = Status::Verdict;
        isolated.stage = Some(Stage::Mma);
        let v = with_fault(isolated, Some(&fault));
        assert_eq!(v.stage, Some(Stage::Mma));
    }

    #[test]
    fn an_unattributed_fault_in_a_kernel_fed_by_tma_maps_points_at_the_descriptor() {
        let mut e = FaultEvidence {
            rung: "zeros".to_owned(),
            error: "kwb_launch_problem returned 700 (cudaErrorIllegalAddress)".to_owned(),
            unlocated: Some("memcheck named no faulting access".to_owned()),
            ..FaultEvidence::default()
        };
        // No map: nothing to point at.
        assert_eq!(judge_fault(&e).stage, None);
        e.tma_maps = vec!["`map_a`".to_owned(), "`map_b`".to_owned()];
        let f = judge_fault(&e);
        assert_eq!(
            (f.stage, f.status, f.alternatives.clone()),
            (
                Some(Stage::Descriptor),
                Status::Draft,
                vec![Stage::OperandLoad]
            ),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("`map_a`, `map_b`"), "{}", f.summary);
        // memcheck that did not run says nothing of the TMA unit.
        e.unlocated = Some("memcheck did not run: no compute-sanitizer".to_owned());
        assert_eq!(judge_fault(&e).stage, None);
    }

    #[test]
    fn a_tma_map_the_driver_will_not_encode_is_the_descriptor() {
        let refused = |error: &str| RungOutcome {
            rung: "zeros".to_owned(),
            state: RungState::Error,
            ratio: f64::NAN,
            mismatches: 0,
            non_finite: 0,
            pattern: None,
            error: Some(error.to_owned()),
        };
        for error in [
            "encode: kwb_encode_tmap_a (for `tmap_a`) returned 1: the launcher's own encoder refused these parameters",
            "tasks: kwb_tasks returned 1: the file's own descriptor encoding refused these parameters",
        ] {
            let f = judge_ladder(&[refused(error)], crate::EpilogueInputs::NONE);
            assert_eq!(f.stage, Some(Stage::Descriptor), "{}", f.summary);
            assert_eq!(f.status, Status::Draft);
        }
        // A launch the runtime refused for another reason names no stage.
        let f = judge_ladder(
            &[refused(
                "launch: kwb_launch returned 9 (cudaErrorInvalidConfiguration)",
            )],
            crate::EpilogueInputs::NONE,
        );
        assert_eq!(f.stage, None);
    }
}

mod split_k {
    use crate::{Confound, Finding, OutputCheck, Stage, Status};

    fn mma(factor: f64) -> Finding {
        Finding {
            stage: Some(Stage::Mma),
            status: Status::Verdict,
            factor: Some(factor),
            summary: "mma (accumulator after the mainloop: 1024 (expected 4096))".to_owned(),
            ..Finding::open(Vec::new())
        }
    }

    fn output(ratio: f64) -> OutputCheck {
        OutputCheck {
            mismatches: 100,
            nan: 0,
            inf: 0,
            ratio,
            wrong_tiles: None,
        }
    }

    #[test]
    fn an_accumulator_of_one_k_split_under_an_output_it_does_not_make_is_a_partial() {
        // A quarter of K in the accumulator, the output doubled: the partials are
        // summed after it, and the sum is what is wrong.
        let f = mma(0.25).against_output(Some(&output(2.0)), "ones");
        assert_eq!(
            (f.stage, f.status),
            (Some(Stage::Epilogue), Status::Draft),
            "{}",
            f.summary
        );
        assert_eq!(f.alternatives, vec![Stage::Mma]);
        assert_eq!(f.confound, Some(Confound::SplitKPartial { slices: 4 }));
        // The output as short as the accumulator: the K loop itself lost the tiles.
        let f = mma(0.25).against_output(Some(&output(0.25)), "ones");
        assert_eq!((f.stage, f.status), (Some(Stage::Mma), Status::Verdict));
        // No whole fraction of K (a tile dropped of 32): the MMA reading stands.
        let f = mma(31.0 / 32.0).against_output(Some(&output(2.0)), "ones");
        assert_eq!((f.stage, f.status), (Some(Stage::Mma), Status::Verdict));
    }
}

mod split_k_share_lost {
    use crate::{
        Cleared, Confound, EpilogueInputs, Finding, RungOutcome, RungState, Stage, Status,
        judge_ladder, reconcile,
    };

    fn rung(name: &str, ratio: f64, mismatches: usize) -> RungOutcome {
        RungOutcome {
            rung: name.to_owned(),
            state: if mismatches > 0 {
                RungState::Fail
            } else {
                RungState::Pass
            },
            ratio,
            mismatches,
            non_finite: 0,
            pattern: None,
            error: None,
        }
    }

    fn share(k: (u64, u64)) -> Finding {
        Finding {
            stage: Some(Stage::Epilogue),
            alternatives: vec![Stage::Mma],
            confound: Some(Confound::SplitKPartial { slices: 4 }),
            cleared: Some(Cleared {
                stages: vec![Stage::OperandLoad, Stage::Descriptor, Stage::Mma],
                region: None,
                m: 128,
                n: 256,
                k: Some(k),
            }),
            summary: "epilogue? (a split-K partial computed right)".to_owned(),
            ..Finding::open(Vec::new())
        }
    }

    /// The reduction of a split-K GEMM that starts at the second partial: ones reads
    /// 3/4, and onehot-k:0's products (all in the first share) never reach the output.
    #[test]
    fn a_share_computed_right_and_missing_from_the_output_is_an_epilogue_verdict() {
        let rungs = [
            rung("zeros", f64::NAN, 0),
            rung("ones", 0.75, 32768),
            rung("onehot-k:0", 0.0, 30848),
            rung("small-int:1", 0.867, 32551),
        ];
        let ladder = judge_ladder(&rungs, EpilogueInputs::NONE);
        assert_eq!(ladder.lost_k, [0]);
        let v = reconcile(Some(&share((0, 1024))), Some(&ladder));
        assert_eq!(
            (v.stage, v.status),
            (Some(Stage::Epilogue), Status::Verdict),
            "{}",
            v.summary
        );
        assert!(v.summary.contains("k 0..1024"), "{}", v.summary);
        // The traced share does not hold the lost k: another CTA's share could be
        // what is wrong, so it stays a draft.
        let v = reconcile(Some(&share((1024, 2048))), Some(&ladder));
        assert_eq!(v.status, Status::Draft, "{}", v.summary);
        // A one-hot rung whose output holds part of its answer loses nothing whole.
        let partly = judge_ladder(
            &[rung("ones", 0.75, 32768), rung("onehot-k:0", 0.5, 30848)],
            EpilogueInputs::NONE,
        );
        assert!(partly.lost_k.is_empty());
    }
}

mod unchecked_maps {
    use crate::{Finding, Stage, Status, reconcile, with_unchecked_maps};

    #[test]
    fn an_operand_verdict_through_maps_kwb_could_not_read_is_a_draft() {
        let trace = Finding {
            stage: Some(Stage::OperandLoad),
            alternatives: vec![Stage::Descriptor],
            status: Status::Verdict,
            summary: "operand-load/descriptor (operand A: k 16..6144 never consumed)".to_owned(),
            ..Finding::open(Vec::new())
        };
        let v = reconcile(Some(&trace), None);
        assert_eq!(v.status, Status::Verdict);
        let drafted = with_unchecked_maps(v.clone(), true);
        assert_eq!(
            (drafted.stage, drafted.status),
            (Some(Stage::OperandLoad), Status::Draft)
        );
        assert!(drafted.alternatives.contains(&Stage::Descriptor));
        // Checked maps (or none at all) leave it.
        assert_eq!(with_unchecked_maps(v.clone(), false), v);
        // An MMA verdict is no operand reading: left.
        let mma = Finding {
            stage: Some(Stage::Mma),
            alternatives: Vec::new(),
            ..trace
        };
        let v = reconcile(Some(&mma), None);
        assert_eq!(with_unchecked_maps(v.clone(), true), v);
    }
}

#[test]
fn wrong_tiles_transposed_are_the_same_outputs_in_the_transposed_frame() {
    // 32 x 64 output, tiles of 16 x 32, one wrong output at (3, 40).
    let mut wrong = vec![false; 32 * 64];
    wrong[3 * 64 + 40] = true;
    let tiles = crate::WrongTiles::of(32, 64, (16, 32), &wrong);
    assert_eq!(tiles.wrong, vec![(0, 1, 1)]);
    let t = tiles.transposed();
    assert_eq!((t.m, t.n, t.tile), (64, 32, (32, 16)));
    assert_eq!(t.wrong, vec![(1, 0, 1)]);
    // The same, built in the transposed frame directly.
    let mut wrong_t = vec![false; 64 * 32];
    wrong_t[40 * 32 + 3] = true;
    assert_eq!(t, crate::WrongTiles::of(64, 32, (32, 16), &wrong_t));
}
