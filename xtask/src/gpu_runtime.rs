//! `cargo xtask gpu-runtime`: the trace runtime checked on a GPU. Builds
//! tests/gpu/runtime_check.cu with `-DKWB_TRACE` (once with the default buffer, once
//! with a buffer of 4 records in one shard, once recording absmax only, once with no
//! samples, whose records are written whole, once folding every call into the summary
//! table, once into a screen, once into a screen through each site's `kwb::Fold`
//! (`KWB_CHECK_FOLDS`), once with records in mapped host memory, once claiming every record with its
//! own atomic (no leases), once so with a buffer of 4 records, once keeping full
//! tiles), runs it with `KWB_TRACE_OUT`,
//! decodes
//! the trace and compares every record with the statistics below, worked out by
//! hand from the formulas in that file: counts before and after the row filter,
//! minimum, maximum, absmax, NaN and Inf counts, and the sampled values with their
//! coordinates. It covers the quick tally and its fall-back to the full one, packed
//! and element-wise tile reads, a pipeline stage read by a warpgroup as kwb-instrument
//! probes an SS-mode MMA's operands (`kwb::probe_shared_stage`: a quarter a warp, or
//! in a screen with folds every thread of the warpgroup at once; whole, a warpgroup's
//! own rows with `kwb::own_part`, and a part of a tile split among the consumer
//! warpgroups with `kwb::split_part`; both operands at once with
//! `kwb::probe_shared_stage_pair`), the row filter, a
//! partial warp, buffer overflow, and every value of every probe in the full-tile
//! build. Each build first runs a kernel of other records and resets the buffer: none
//! of them may be left in the trace. Last, tests/gpu/values_check.cu checks the value
//! model: probes of packed pairs and quads, fp8, WMMA and static-size fragments, arrays
//! of them, several values at once and a tile of pairs, each site's statistics as its
//! values make them, and a type no model reads named by a NotProbed record.

use std::path::{Path, PathBuf};
use std::process::Command;

use kwb_runtime::{Kind, Trace, TraceRecord};
use kwb_toolchain::CompileFlags;

use crate::kernels::tools;
use crate::{Failure, Result};

/// What one site's record must hold.
#[derive(Clone)]
struct Expect {
    site: u32,
    kind: Kind,
    records: usize,
    k_tile: Option<i32>,
    count: u32,
    seen: u32,
    vmin: f32,
    vmax: f32,
    absmax: f32,
    nans: u32,
    infs: u32,
    mask: u32,
    /// (value, m, n, k) of each sampled slot.
    samples: Vec<(f32, i32, i32, i32)>,
    /// Whether the quick tally decides the record (every value counts and is finite):
    /// then a `KWB_TRACE_MINMAX=0` build records no minimum and maximum.
    quick: bool,
}

const FULL: u32 = u32::MAX;

/// Slots sampled with unknown coordinates.
fn plain(values: impl IntoIterator<Item = f32>) -> Vec<(f32, i32, i32, i32)> {
    values.into_iter().map(|v| (v, -1, -1, -1)).collect()
}

fn expectations() -> Vec<Expect> {
    let lanes = 0..8u8;
    let mut all = vec![
        // v = (lane * 16 + i) * 0.5 - 100 over 32 lanes x 16: -100 ..= 155.5; the
        // samples are element 0 of lanes 0..8. Once per warp; k_tile = warp.
        Expect {
            site: 0,
            kind: Kind::Accumulator,
            records: 2,
            k_tile: None,
            count: 512,
            seen: 512,
            vmin: -100.0,
            vmax: 155.5,
            absmax: 155.5,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain(lanes.clone().map(|l| f32::from(l) * 8.0 - 100.0)),
        },
        // Site 0's values with +Inf at index 0, -Inf at 1, NaN at 511: finite range
        // -99 ..= 155; every value counts.
        Expect {
            site: 1,
            kind: Kind::OperandA,
            records: 1,
            k_tile: Some(0),
            count: 512,
            seen: 512,
            vmin: -99.0,
            vmax: 155.0,
            absmax: 155.0,
            nans: 1,
            infs: 2,
            mask: FULL,
            quick: false,
            samples: plain(
                std::iter::once(f32::INFINITY).chain((1..8u8).map(|l| f32::from(l) * 8.0 - 100.0)),
            ),
        },
        // 1.0 on lanes < 20 (the rows that count), 1000 on the rest.
        Expect {
            site: 2,
            kind: Kind::OperandB,
            records: 1,
            k_tile: Some(1),
            count: 320,
            seen: 512,
            vmin: 1.0,
            vmax: 1.0,
            absmax: 1.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: false,
            samples: lanes.clone().map(|l| (1.0, i32::from(l), -1, 0)).collect(),
        },
        // tile[i] = i % 64 - 32, 1024 values, packed reads.
        Expect {
            site: 3,
            kind: Kind::OperandA,
            records: 1,
            k_tile: Some(3),
            count: 1024,
            seen: 1024,
            vmin: -32.0,
            vmax: 31.0,
            absmax: 32.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain((0..8u8).map(|i| f32::from(i) - 32.0)),
        },
        // The same tile with NaN at 777 and -Inf at 100.
        Expect {
            site: 4,
            kind: Kind::OperandA,
            records: 1,
            k_tile: Some(4),
            count: 1024,
            seen: 1024,
            vmin: -32.0,
            vmax: 31.0,
            absmax: 32.0,
            nans: 1,
            infs: 1,
            mask: FULL,
            quick: false,
            samples: plain((0..8u8).map(|i| f32::from(i) - 32.0)),
        },
        // tile[1..1002], element-wise: the range is whole, samples start at -31.
        Expect {
            site: 5,
            kind: Kind::OperandA,
            records: 1,
            k_tile: Some(5),
            count: 1001,
            seen: 1001,
            vmin: -32.0,
            vmax: 31.0,
            absmax: 32.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain((1..9u8).map(|i| f32::from(i) - 32.0)),
        },
        // Lanes 0..20 only, v = lane + i * 0.25 for i < 4.
        Expect {
            site: 6,
            kind: Kind::Epilogue,
            records: 1,
            k_tile: None,
            count: 80,
            seen: 80,
            vmin: 0.0,
            vmax: 19.75,
            absmax: 19.75,
            nans: 0,
            infs: 0,
            mask: 0x000f_ffff,
            quick: true,
            samples: plain(lanes.clone().map(f32::from)),
        },
        // halves[i] = i * 0.5, 256 values, packed.
        Expect {
            site: 7,
            kind: Kind::OperandB,
            records: 1,
            k_tile: Some(7),
            count: 256,
            seen: 256,
            vmin: 0.0,
            vmax: 127.5,
            absmax: 127.5,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain((0..8u8).map(|i| f32::from(i) * 0.5)),
        },
        // The tile as 32 x 32 (m, k), rows < 5 counting: 160 values spanning the range.
        Expect {
            site: 8,
            kind: Kind::OperandA,
            records: 1,
            k_tile: Some(8),
            count: 160,
            seen: 1024,
            vmin: -32.0,
            vmax: 31.0,
            absmax: 32.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: false,
            samples: (0..8u8)
                .map(|i| (f32::from(i) - 32.0, 0, -1, i32::from(i)))
                .collect(),
        },
        // acc[2][3][4] in the m16n8k16 C layout, v = m * 100 + n, rows < 20 counting:
        // every row of m tile 0 (384 values), rows 16..20 of tile 1 (lanes 0..16,
        // e < 2: 96 values); samples element 0 of lanes 0..8 at (lane / 4, lane % 4 * 2).
        Expect {
            site: 10,
            kind: Kind::Accumulator,
            records: 1,
            k_tile: Some(10),
            count: 480,
            seen: 768,
            vmin: 0.0,
            vmax: 1923.0,
            absmax: 1923.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: false,
            samples: (0..8_i32)
                .map(|l| {
                    let (m, n) = (l / 4, (l % 4) * 2);
                    ((m * 100 + n) as f32, m, n, -1)
                })
                .collect(),
        },
        // bf16 v = lane * 16 + i - 256 in packed registers: -256 ..= 255; the
        // samples are element 0 of lanes 0..8.
        Expect {
            site: 11,
            kind: Kind::OperandA,
            records: 1,
            k_tile: Some(11),
            count: 512,
            seen: 512,
            vmin: -256.0,
            vmax: 255.0,
            absmax: 256.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain(lanes.clone().map(|l| f32::from(l) * 16.0 - 256.0)),
        },
        // Site 11's values with +Inf at element 2, NaN at 53, -Inf at 511: the
        // largest finite value is 254.
        Expect {
            site: 12,
            kind: Kind::OperandB,
            records: 1,
            k_tile: Some(12),
            count: 512,
            seen: 512,
            vmin: -256.0,
            vmax: 254.0,
            absmax: 256.0,
            nans: 1,
            infs: 2,
            mask: FULL,
            quick: false,
            samples: plain(lanes.clone().map(|l| f32::from(l) * 16.0 - 256.0)),
        },
        // half v = (lane * 16 + i) * 0.25 in packed registers: 0 ..= 127.75.
        Expect {
            site: 13,
            kind: Kind::OperandA,
            records: 1,
            k_tile: Some(13),
            count: 512,
            seen: 512,
            vmin: 0.0,
            vmax: 127.75,
            absmax: 127.75,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain(lanes.clone().map(|l| f32::from(l) * 4.0)),
        },
        // Sites 11 and 12's fragments as operands A and B of one probe_as_pair.
        Expect {
            site: 14,
            kind: Kind::OperandA,
            records: 1,
            k_tile: Some(14),
            count: 512,
            seen: 512,
            vmin: -256.0,
            vmax: 255.0,
            absmax: 256.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain(lanes.clone().map(|l| f32::from(l) * 16.0 - 256.0)),
        },
        Expect {
            site: 15,
            kind: Kind::OperandB,
            records: 1,
            k_tile: Some(14),
            count: 512,
            seen: 512,
            vmin: -256.0,
            vmax: 254.0,
            absmax: 256.0,
            nans: 1,
            infs: 2,
            mask: FULL,
            quick: false,
            samples: plain(lanes.clone().map(|l| f32::from(l) * 16.0 - 256.0)),
        },
        // v = -(lane * 16 + i) - 1: all negative, absmax from the minimum.
        Expect {
            site: 9,
            kind: Kind::Accumulator,
            records: 1,
            k_tile: None,
            count: 512,
            seen: 512,
            vmin: -512.0,
            vmax: -1.0,
            absmax: 512.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain(lanes.map(|l| -f32::from(l) * 16.0 - 1.0)),
        },
        // stage_check: a warp's quarter of stage x (512 values: -32 ..= 31, two NaN
        // and two -Inf), four records; the first values of each quarter are -32...
        Expect {
            site: 17,
            kind: Kind::OperandA,
            records: 4,
            k_tile: Some(17),
            count: 512,
            seen: 512,
            vmin: -32.0,
            vmax: 31.0,
            absmax: 32.0,
            nans: 2,
            infs: 2,
            mask: FULL,
            quick: false,
            samples: plain((0..8u8).map(|i| f32::from(i) - 32.0)),
        },
        // A warp's quarter of the second half of stage y (256 values: -16 ..= 15.5).
        Expect {
            site: 18,
            kind: Kind::OperandB,
            records: 4,
            k_tile: Some(18),
            count: 256,
            seen: 256,
            vmin: -16.0,
            vmax: 15.5,
            absmax: 16.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain((0..8u8).map(|i| f32::from(i) * 0.5 - 16.0)),
        },
        // share_check: each consumer warpgroup's own half of stage a (1024 values), a
        // warp's quarter of it (256: -32 ..= 31); none of stage 0's NaN or past it.
        Expect {
            site: 19,
            kind: Kind::OperandA,
            records: 8,
            k_tile: Some(19),
            count: 256,
            seen: 256,
            vmin: -32.0,
            vmax: 31.0,
            absmax: 32.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain((0..8u8).map(|i| f32::from(i) - 32.0)),
        },
        // Half of stage b (512 values) a warpgroup, a warp's quarter of that (128).
        Expect {
            site: 20,
            kind: Kind::OperandB,
            records: 8,
            k_tile: Some(20),
            count: 128,
            seen: 128,
            vmin: -16.0,
            vmax: 15.5,
            absmax: 16.0,
            nans: 0,
            infs: 0,
            mask: FULL,
            quick: true,
            samples: plain((0..8u8).map(|i| f32::from(i) * 0.5 - 16.0)),
        },
    ];
    // share_check's two reads again as one probe_shared_stage_pair call at K tile 21
    // (sites 21 and 22): the same records.
    let pair: Vec<Expect> = all
        .iter()
        .filter(|e| e.site == 19 || e.site == 20)
        .map(|e| Expect {
            site: e.site + 2,
            k_tile: Some(21),
            ..e.clone()
        })
        .collect();
    all.extend(pair);
    all
}

/// Differences between one record and its expectation, as text; `minmax`: the build
/// records minimum and maximum.
fn check_record(r: &TraceRecord, e: &Expect, minmax: bool, samples: bool) -> Vec<String> {
    let mut bad = Vec::new();
    let mut field = |name: &str, got: String, want: String| {
        if got != want {
            bad.push(format!("site {} {name}: got {got}, want {want}", e.site));
        }
    };
    field(
        "kind",
        format!("{:?}", r.kind()),
        format!("{:?}", Some(e.kind)),
    );
    field(
        "tag",
        r.tag.to_string(),
        kwb_runtime::tag("runtime_check").to_string(),
    );
    if let Some(k) = e.k_tile {
        field("k_tile", r.k_tile.to_string(), k.to_string());
    } else if e.site == 0 {
        field("k_tile", r.k_tile.to_string(), r.warp.to_string());
    } else {
        field("k_tile", r.k_tile.to_string(), "-1".to_owned());
    }
    field("count", r.count.to_string(), e.count.to_string());
    field("seen", r.seen.to_string(), e.seen.to_string());
    let (vmin, vmax) = if minmax || !e.quick {
        (e.vmin, e.vmax)
    } else {
        (f32::NAN, f32::NAN)
    };
    field("vmin", r.vmin.to_string(), vmin.to_string());
    field("vmax", r.vmax.to_string(), vmax.to_string());
    field("absmax", r.absmax.to_string(), e.absmax.to_string());
    field("nan_count", r.nan_count.to_string(), e.nans.to_string());
    field("inf_count", r.inf_count.to_string(), e.infs.to_string());
    field(
        "active_mask",
        format!("{:#x}", r.active_mask),
        format!("{:#x}", e.mask),
    );
    let want: &[(f32, i32, i32, i32)] = if samples { &e.samples } else { &[] };
    field("nvalues", r.nvalues.to_string(), want.len().to_string());
    let got: Vec<_> = (0..r.nvalues as usize)
        .map(|i| (r.values[i], r.value_m[i], r.value_n[i], r.value_k[i]))
        .collect();
    field("samples", format!("{got:?}"), format!("{want:?}"));
    for i in r.nvalues as usize..kwb_runtime::RECORD_VALUES {
        if (r.values[i], r.value_m[i], r.value_n[i], r.value_k[i]) != (0.0, -1, -1, -1) {
            bad.push(format!("site {}: empty slot {i} is not cleared", e.site));
        }
    }
    bad
}

/// One build of the check and what its trace must show.
struct Build {
    name: &'static str,
    defines: &'static [&'static str],
    /// Records kept and dropped (None: every expected record, none dropped).
    overflow: Option<(usize, u64)>,
    /// Records carry minimum and maximum (not a `KWB_TRACE_MINMAX=0` build).
    minmax: bool,
    /// Every value is kept too (`KWB_TRACE_FULL`): the tile section is checked.
    full: bool,
    /// Records carry samples (not a `KWB_TRACE_VALUES=0` build, whose records the
    /// warp writes whole in one coalesced store).
    samples: bool,
    /// Probes fold into the summary table (`KWB_TRACE_SUMMARY`): no records; the
    /// summary section is checked instead.
    summary: bool,
}

const BUILDS: [Build; 11] = [
    Build {
        name: "default buffer",
        defines: &[],
        overflow: None,
        minmax: true,
        full: false,
        samples: true,
        summary: false,
    },
    Build {
        name: "4-record buffer",
        defines: &["KWB_TRACE_CAPACITY=4", "KWB_TRACE_SHARDS=1"],
        overflow: Some((4, 53)),
        minmax: true,
        full: false,
        samples: true,
        summary: false,
    },
    Build {
        name: "absmax only",
        defines: &["KWB_TRACE_MINMAX=0"],
        overflow: None,
        minmax: false,
        full: false,
        samples: true,
        summary: false,
    },
    Build {
        name: "no values, absmax only",
        defines: &["KWB_TRACE_VALUES=0", "KWB_TRACE_MINMAX=0"],
        overflow: None,
        minmax: false,
        full: false,
        samples: false,
        summary: false,
    },
    Build {
        name: "summary",
        defines: &["KWB_TRACE_SUMMARY"],
        overflow: Some((0, 0)),
        minmax: false,
        full: false,
        samples: false,
        summary: true,
    },
    Build {
        name: "screen",
        defines: &["KWB_TRACE_SCREEN"],
        overflow: Some((0, 0)),
        minmax: false,
        full: false,
        samples: false,
        summary: true,
    },
    Build {
        name: "screen, folds",
        defines: &["KWB_TRACE_SCREEN", "KWB_CHECK_FOLDS"],
        overflow: Some((0, 0)),
        minmax: false,
        full: false,
        samples: false,
        summary: true,
    },
    Build {
        name: "mapped records",
        defines: &["KWB_TRACE_MAPPED"],
        overflow: None,
        minmax: true,
        full: false,
        samples: true,
        summary: false,
    },
    Build {
        name: "no leases",
        defines: &["KWB_TRACE_LEASE=0"],
        overflow: None,
        minmax: true,
        full: false,
        samples: true,
        summary: false,
    },
    // Without leases the cursor, not a drop count, says what was dropped.
    Build {
        name: "4-record buffer, no leases",
        defines: &[
            "KWB_TRACE_CAPACITY=4",
            "KWB_TRACE_SHARDS=1",
            "KWB_TRACE_LEASE=0",
        ],
        overflow: Some((4, 53)),
        minmax: true,
        full: false,
        samples: true,
        summary: false,
    },
    // Leases of at most 5 records: warp 0's claims (13 single records, then a pair)
    // take leases of 1, 2, 4, 5 and 5 slots, and the pair leaves the last lease's two
    // slots unwritten ahead of the partial warp's record (claimed with an atomic), so
    // the flush's renumbering of tile values past an empty slot is checked.
    Build {
        name: "full tiles",
        defines: &["KWB_TRACE_FULL", "KWB_TRACE_LEASE=5"],
        overflow: None,
        minmax: true,
        full: true,
        samples: true,
        summary: false,
    },
];

/// Element `e` of a site's full tile as tests/gpu/runtime_check.cu made it: its value
/// and (m, n, k).
fn tile_value(site: u32, e: u32) -> (f32, [i32; 3]) {
    let none = [-1, -1, -1];
    let ef = e as f32;
    let tile = |i: u32| (i % 64) as f32 - 32.0;
    match site {
        0 => (ef * 0.5 - 100.0, none),
        1 => match e {
            0 => (f32::INFINITY, none),
            1 => (f32::NEG_INFINITY, none),
            511 => (f32::NAN, none),
            _ => (ef * 0.5 - 100.0, none),
        },
        2 => {
            let (lane, i) = ((e / 16) as i32, (e % 16) as i32);
            (if lane < 20 { 1.0 } else { 1000.0 }, [lane, -1, i])
        }
        3 => (tile(e), none),
        4 => match e {
            777 => (f32::NAN, none),
            100 => (f32::NEG_INFINITY, none),
            _ => (tile(e), none),
        },
        5 => (tile(e + 1), none),
        6 => ((e / 4) as f32 + (e % 4) as f32 * 0.25, none),
        7 => (ef * 0.5, none),
        8 => (tile(e), [(e / 32) as i32, -1, (e % 32) as i32]),
        9 => (-ef - 1.0, none),
        11 | 14 => (ef - 256.0, none),
        12 | 15 => match e {
            2 => (f32::INFINITY, none),
            53 => (f32::NAN, none),
            511 => (f32::NEG_INFINITY, none),
            _ => (ef - 256.0, none),
        },
        13 => (ef * 0.25, none),
        // A quarter of stage x (from a multiple of 256) and of stage y's second half.
        17 => match e % 256 {
            77 => (f32::NAN, none),
            200 => (f32::NEG_INFINITY, none),
            _ => (tile(e), none),
        },
        18 | 20 | 22 => ((e % 64) as f32 * 0.5 - 16.0, none),
        // A warp's quarter of its warpgroup's own rows (from a multiple of 256).
        19 | 21 => (tile(e), none),
        10 => {
            let (lane, i) = ((e / 24) as i32, (e % 24) as i32);
            let (t, el) = (i / 4, i % 4);
            let m = 16 * (t / 3) + lane / 4 + 8 * (el / 2);
            let n = 8 * (t % 3) + (lane % 4) * 2 + el % 2;
            ((m * 100 + n) as f32, [m, n, -1])
        }
        _ => (f32::NAN, none),
    }
}

/// Every problem of the tile section: each record holds exactly its `seen` values,
/// elements 0.., each the value and coordinates its site made.
fn judge_tiles(trace: &Trace) -> Vec<String> {
    let mut problems = Vec::new();
    let mut by_record = vec![Vec::new(); trace.records.len()];
    for v in &trace.tiles {
        by_record[v.record as usize].push(v);
    }
    for (r, values) in trace.records.iter().zip(&mut by_record) {
        values.sort_by_key(|v| v.element);
        let elements: Vec<u32> = values.iter().map(|v| v.element).collect();
        if elements != (0..r.seen).collect::<Vec<_>>() {
            problems.push(format!(
                "site {}: tile elements are not 0..{} ({} values)",
                r.site,
                r.seen,
                values.len()
            ));
            continue;
        }
        for v in values.iter() {
            let (want, coords) = tile_value(r.site, v.element);
            if v.value.to_string() != want.to_string() || [v.m, v.n, v.k] != coords {
                problems.push(format!(
                    "site {} element {}: got {} at {:?}, want {want} at {coords:?}",
                    r.site,
                    v.element,
                    v.value,
                    [v.m, v.n, v.k]
                ));
                break;
            }
        }
    }
    if trace.tile_dropped != 0 {
        problems.push(format!("{} tile values dropped", trace.tile_dropped));
    }
    problems
}

pub fn run(root: &Path, out: &Path) -> Result {
    // Only nvcc: the checks include no CUTLASS header.
    let toolchain = match kwb_toolchain::toolchain(&kwb_toolchain::Env::from_process()) {
        Ok(toolchain) => toolchain,
        Err(_) => tools()?.0,
    };
    let dir = root.join("target/gpu-runtime");
    std::fs::create_dir_all(&dir).map_err(|e| Failure(format!("{}: {e}", dir.display())))?;
    let header = dir.join(kwb_runtime::HEADER_NAME);
    std::fs::write(&header, kwb_runtime::HEADER)
        .map_err(|e| Failure(format!("{}: {e}", header.display())))?;
    let source = root.join("tests/gpu/runtime_check.cu");
    let expect = expectations();
    let mut report = String::new();
    let mut failures = 0;
    for (index, build) in BUILDS.iter().enumerate() {
        let binary = dir.join(format!("runtime_check.{index}"));
        let flags = CompileFlags {
            includes: vec![dir.clone()],
            defines: std::iter::once(kwb_runtime::ENABLE_MACRO)
                .chain(build.defines.iter().copied())
                .map(str::to_owned)
                .collect(),
            ..CompileFlags::default()
        };
        kwb_toolchain::compile_executable(&toolchain, &source, &flags, &binary)?;
        let trace = run_check(&binary, &dir.join(format!("runtime_check.{index}.trace")))?;
        let mut problems = judge(&trace, &expect, build);
        if build.summary {
            let screen = build.defines.contains(&"KWB_TRACE_SCREEN");
            let folded = build.defines.contains(&"KWB_CHECK_FOLDS");
            problems.extend(judge_summary(&trace, &expect, screen, folded));
        } else if !trace.summary.is_empty() {
            problems.push(format!(
                "{} summary entries in a build without a summary",
                trace.summary.len()
            ));
        }
        if build.full {
            problems.extend(judge_tiles(&trace));
        } else if !trace.tiles.is_empty() {
            problems.push(format!(
                "{} tile values in a build without them",
                trace.tiles.len()
            ));
        }
        report.push_str(&format!(
            "{}: {} records, {} dropped, {} tile values, {} summary entries: {}\n",
            build.name,
            trace.records.len(),
            trace.dropped,
            trace.tiles.len(),
            trace.summary.len(),
            if problems.is_empty() { "ok" } else { "FAILED" }
        ));
        for p in &problems {
            report.push_str(&format!("  {p}\n"));
        }
        failures += problems.len();
    }
    // The value model: tests/gpu/values_check.cu, one build.
    let source = root.join("tests/gpu/values_check.cu");
    let binary = dir.join("values_check");
    let flags = CompileFlags {
        includes: vec![dir.clone()],
        defines: vec![kwb_runtime::ENABLE_MACRO.to_owned()],
        ..CompileFlags::default()
    };
    kwb_toolchain::compile_executable(&toolchain, &source, &flags, &binary)?;
    let trace = run_check(&binary, &dir.join("values_check.trace"))?;
    let problems = judge_values(&trace);
    report.push_str(&format!(
        "value model: {} records: {}\n",
        trace.records.len(),
        if problems.is_empty() { "ok" } else { "FAILED" }
    ));
    for p in &problems {
        report.push_str(&format!("  {p}\n"));
    }
    failures += problems.len();
    print!("{report}");
    std::fs::write(out, &report).map_err(|e| Failure(format!("{}: {e}", out.display())))?;
    if failures == 0 {
        Ok(())
    } else {
        Err(Failure(format!("{failures} runtime checks failed")))
    }
}

/// Every problem of values_check's trace: each site's one record holds the count,
/// minimum, maximum and absmax its values make (tests/gpu/values_check.cu, worked out
/// by hand), and site 5, whose type no model reads, is a NotProbed record naming it.
fn judge_values(trace: &Trace) -> Vec<String> {
    // (site, kind, count, min, max, absmax)
    let want: [(u32, Kind, u32, f32, f32, f32); 7] = [
        (0, Kind::Epilogue, 64, -62.0, 31.0, 62.0),
        (1, Kind::OperandA, 256, 0.0, 255.0, 255.0),
        (2, Kind::Accumulator, 512, -2.0, 1.0, 2.0),
        (3, Kind::OperandB, 64, -7.0, 7.0, 7.0),
        (4, Kind::Accumulator, 128, 0.0, 127.0, 127.0),
        (6, Kind::Epilogue, 128, -31.0, 31.0, 31.0),
        (7, Kind::OperandA, 128, -63.0, 63.0, 63.0),
    ];
    let mut problems = Vec::new();
    for (site, kind, count, vmin, vmax, absmax) in want {
        let records: Vec<&TraceRecord> = trace.records.iter().filter(|r| r.site == site).collect();
        let [r] = records.as_slice() else {
            problems.push(format!("site {site}: {} records, want 1", records.len()));
            continue;
        };
        let got = (
            r.kind(),
            r.count,
            r.vmin,
            r.vmax,
            r.absmax,
            r.nan_count,
            r.inf_count,
        );
        let expected = (Some(kind), count, vmin, vmax, absmax, 0, 0);
        if format!("{got:?}") != format!("{expected:?}") {
            problems.push(format!(
                "site {site}: (kind, count, min, max, absmax, NaN, Inf) {got:?}, want {expected:?}"
            ));
        }
    }
    let unprobed: Vec<(u32, Option<String>)> = trace
        .records
        .iter()
        .filter(|r| r.kind() == Some(Kind::NotProbed))
        .map(|r| (r.site, r.unprobed_type()))
        .collect();
    if unprobed != [(5, Some("Opaque".to_owned()))] {
        problems.push(format!(
            "NotProbed records {unprobed:?}, want site 5 naming `Opaque`"
        ));
    }
    problems
}

fn run_check(binary: &Path, trace: &PathBuf) -> Result<Trace> {
    let _ = std::fs::remove_file(trace);
    let output = Command::new(binary)
        .env(kwb_runtime::OUT_ENV, trace)
        .output()
        .map_err(|e| Failure(format!("{}: {e}", binary.display())))?;
    if !output.status.success() {
        return Err(Failure(format!(
            "{} failed: {}",
            binary.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let bytes = std::fs::read(trace).map_err(|e| Failure(format!("{}: {e}", trace.display())))?;
    kwb_runtime::decode(&bytes).map_err(|e| Failure(format!("{}: {e}", trace.display())))
}

/// A summed field of a summary entry.
type EntryField = fn(&kwb_runtime::SummaryEntry) -> u64;

/// Every problem of a summary build's table: each site of the one-CTA check folded
/// (its records' counts summed, its absmax, CTA (0, 0, 0) for the peak and for the
/// first NaN or Inf where there is one), and summary_grid's site 16 over 30 CTAs. A
/// `screen` (`KWB_TRACE_SCREEN`) has one row per site, every K tile folded into it;
/// `folded` (`KWB_CHECK_FOLDS`: every probe passes its site's kwb::Fold) counts no calls
/// (0 in every row) and every other figure the same.
fn judge_summary(trace: &Trace, expect: &[Expect], screen: bool, folded: bool) -> Vec<String> {
    let mut bad = Vec::new();
    let tag = kwb_runtime::tag("runtime_check");
    let mut check = |what: String, got: String, want: String| {
        if got != want {
            bad.push(format!("summary {what}: got {got}, want {want}"));
        }
    };
    check(
        "grid".into(),
        format!("{:?}", trace.summary_grid),
        "[5, 3, 2]".into(),
    );
    check(
        "K-tile rows".into(),
        trace.summary_k_tiles.to_string(),
        if screen {
            "1".to_owned()
        } else {
            kwb_runtime::DEFAULT_SUMMARY_K_TILES.to_string()
        },
    );
    // Site 64 is past the table's sites (32 by default, the build sets none): CTA (0, 0,
    // 0)'s two warps, one call each.
    check(
        "dropped".into(),
        trace.summary_dropped.to_string(),
        "2".into(),
    );
    for e in expect {
        let rows: Vec<_> = trace.summary.iter().filter(|r| r.site == e.site).collect();
        let n = e.records as u64;
        let sum = |f: EntryField| rows.iter().map(|r| f(r)).sum::<u64>();
        let site = |what: &str| format!("site {} {what}", e.site);
        let calls = if folded { 0 } else { n };
        check(
            site("probes"),
            sum(|r| r.probes).to_string(),
            calls.to_string(),
        );
        // Each sum is the expected record's figure once per record.
        let sums: [(&str, EntryField, u32); 4] = [
            ("count", |r| r.count, e.count),
            ("seen", |r| r.seen, e.seen),
            ("NaN", |r| r.nan_count, e.nans),
            ("Inf", |r| r.inf_count, e.infs),
        ];
        for (what, field, per_record) in sums {
            check(
                site(what),
                sum(field).to_string(),
                (n * u64::from(per_record)).to_string(),
            );
        }
        let absmax = rows.iter().map(|r| r.absmax).fold(0.0_f32, f32::max);
        check(site("absmax"), absmax.to_string(), e.absmax.to_string());
        // Site 0 is probed at K tile = warp (0 and 1); the others at one K tile.
        let k_tiles: Vec<i32> = rows.iter().map(|r| r.k_tile).collect();
        let want_k: Vec<i32> = match e.k_tile {
            _ if screen => vec![-1],
            Some(k) => vec![k],
            None if e.site == 0 => vec![0, 1],
            None => vec![-1],
        };
        check(
            site("K tiles"),
            format!("{k_tiles:?}"),
            format!("{want_k:?}"),
        );
        for r in &rows {
            check(
                site("kind"),
                format!("{:?}", r.kind()),
                format!("{:?}", Some(e.kind)),
            );
            check(site("tag"), r.tag.to_string(), tag.to_string());
            let k_end = if screen { i32::MAX } else { r.k_tile + 1 };
            check(site("k_end"), r.k_end.to_string(), k_end.to_string());
            check(
                site("peak CTA"),
                format!("{:?}", r.peak_cta()),
                "Some([0, 0, 0])".into(),
            );
            let bad_cta = (e.nans + e.infs > 0).then_some([0_u32, 0, 0]);
            check(
                site("first bad CTA"),
                format!("{:?}", r.bad_cta()),
                format!("{bad_cta:?}"),
            );
        }
    }
    // Site 16: 30 CTAs x 2 warps x 32 lanes x 4 values in each of two rows.
    let grid: Vec<_> = trace.summary.iter().filter(|r| r.site == 16).collect();
    if screen {
        // Both K tiles (0 and 300) in the one row.
        match grid.as_slice() {
            [r] => {
                let what = |field: &str| format!("screen site 16 {field}");
                let calls = if folded { "0" } else { "120" };
                check(what("probes"), r.probes.to_string(), calls.into());
                check(what("count"), r.count.to_string(), "15360".into());
                check(what("absmax"), r.absmax.to_string(), 1920.0_f32.to_string());
                check(
                    what("peak CTA"),
                    format!("{:?}", r.peak_cta()),
                    "Some([4, 2, 1])".into(),
                );
                check(what("NaN"), r.nan_count.to_string(), "4".into());
                check(
                    what("first bad CTA"),
                    format!("{:?}", r.bad_cta()),
                    "Some([3, 0, 1])".into(),
                );
                check(
                    what("K tiles"),
                    format!("{}..{}", r.k_tile, r.k_end),
                    format!("-1..{}", i32::MAX),
                );
            }
            rows => bad.push(format!("screen site 16: {} rows, want 1", rows.len())),
        }
    } else {
        judge_summary_k_tiles(&grid, &mut check);
    }
    let sites: Vec<u32> = expect.iter().map(|e| e.site).chain([16]).collect();
    for r in &trace.summary {
        if !sites.contains(&r.site) {
            bad.push(format!(
                "summary: an entry for site {}, which no probe called",
                r.site
            ));
        }
    }
    bad
}

/// The per-K-tile rows of summary_grid's site 16 (not a screen): K tile 0 and the
/// table's last row, which holds K tile 300.
fn judge_summary_k_tiles(
    grid: &[&kwb_runtime::SummaryEntry],
    check: &mut impl FnMut(String, String, String),
) {
    let row = |k: i32| grid.iter().find(|r| r.k_tile == k);
    // K tile 300 lands in the table's last row, which starts at its rows less 2.
    let last_row = kwb_runtime::DEFAULT_SUMMARY_K_TILES as i32 - 2;
    match (row(0), row(last_row)) {
        (Some(first), Some(last)) => {
            for (r, name, absmax) in [(first, "K tile 0", 960.0_f32), (last, "last row", 1920.0)] {
                let what = |field: &str| format!("site 16 {name} {field}");
                check(what("probes"), r.probes.to_string(), "60".into());
                check(what("count"), r.count.to_string(), "7680".into());
                check(what("absmax"), r.absmax.to_string(), absmax.to_string());
                // The largest |v| is CTA 29's, (4, 2, 1); K tile 0's NaNs (lane 5 of
                // both warps of CTAs 18 and 22) do not count towards it.
                check(
                    what("peak CTA"),
                    format!("{:?}", r.peak_cta()),
                    "Some([4, 2, 1])".into(),
                );
            }
            check(
                "site 16 K tile 0 NaN".into(),
                first.nan_count.to_string(),
                "4".into(),
            );
            check(
                "site 16 K tile 0 first bad CTA".into(),
                format!("{:?}", first.bad_cta()),
                "Some([3, 0, 1])".into(),
            );
            check(
                "site 16 last row k_end".into(),
                last.k_end.to_string(),
                i32::MAX.to_string(),
            );
            check(
                "site 16 last row NaN".into(),
                last.nan_count.to_string(),
                "0".into(),
            );
            check(
                "site 16 last row bad CTA".into(),
                format!("{:?}", last.bad_cta()),
                "None".into(),
            );
        }
        // Rows at K tile 0 and at the last row (which holds K tile 300).
        _ => check(
            "site 16 rows at K tiles".into(),
            format!("{:?}", grid.iter().map(|r| r.k_tile).collect::<Vec<_>>()),
            format!("[0, {last_row}]"),
        ),
    }
}

/// Every problem of a trace against the expectations.
fn judge(trace: &Trace, expect: &[Expect], build: &Build) -> Vec<String> {
    let overflow = build.overflow;
    let mut problems = Vec::new();
    let total: usize = expect.iter().map(|e| e.records).sum();
    let (kept, dropped) = overflow.unwrap_or((total, 0));
    if trace.records.len() != kept || trace.dropped != dropped {
        problems.push(format!(
            "{} records and {} dropped, want {kept} and {dropped}",
            trace.records.len(),
            trace.dropped
        ));
    }
    for e in expect {
        let records: Vec<_> = trace.records.iter().filter(|r| r.site == e.site).collect();
        if overflow.is_none() && records.len() != e.records && !build.summary {
            problems.push(format!(
                "site {}: {} records, want {}",
                e.site,
                records.len(),
                e.records
            ));
        }
        for r in records {
            problems.extend(check_record(r, e, build.minmax, build.samples));
        }
    }
    problems
}
