//! Track A on a structured input (integers in [-8, 8], `wide_int`): the stage a full
//! trace (every value each probe looked at, `--full-tile`) shows when the operands the
//! run uploaded are at hand. All-ones cannot see a permutation of equal values; here
//! every run of 8 values is all but unique, so kwb-reconcile's host model can say
//! where each consumed value came from and which tile of A·Bᵀ each accumulator is:
//!
//! 1. operands by provenance: every consumed row meets every K slice equally often,
//!    from the input only; otherwise **operand-load/descriptor** (a DRAFT when only
//!    zeros are out of place). When the only fault is the number of K steps (right
//!    rows, slices met too often or never but not both), each MMA got its own step's
//!    operands and the K loop ran a wrong number of steps: **mma**;
//!    An operand read with coordinates that holds no slice of the input is
//!    **operand-load** when the accumulator is exactly the product of the operand
//!    values as traced (the MMA consumed what the probes show, so their coordinates
//!    are the MMA's), a DRAFT when it is not (the probe's coordinates could be wrong);
//! 2. the accumulator after the mainloop placed in A·Bᵀ: in a global frame, a tile
//!    that is the product of the rows the operands show but moved from where its
//!    coordinates put it is the tile selection (**operand-load**); a tile found
//!    nowhere with the operands right is **mma** when the operands were read with
//!    their coordinates, a DRAFT naming the **descriptor** too when read as raw shared
//!    memory, unless the accumulator is exactly the inputs' product read with the
//!    other swizzle than the tiles lie in: then the MMA's descriptor and the map that
//!    wrote the tiles disagree, **descriptor**; with no operand probed, a DRAFT
//!    ordered by the accumulator as sums over K slices: a sum of matched slices with
//!    a wrong count is the K loop (**mma** first), no such sum is A meeting B of
//!    another k or row (**operand-load** first); where some fragments are tiles and
//!    every other is one whole multiple `c` of its own tile, those were accumulated
//!    `c` times over (**mma**); two fragments on one tile, with operand rows loaded
//!    right that no fragment has a product of, are an MMA handed another fragment's
//!    registers (**mma**; a load of another fragment's rows leaves none unused);
//!    shared tiles read right under their exact product over one stretch of K that
//!    starts or ends it are the accumulate stopping early or zeroed (**mma**);
//! 3. accumulator right and the output wrong: **epilogue**.

use std::ops::Range;

use kwb_reconcile::{
    AccumulatorReport, Arrangement, Exchange, Matrix, OperandReport, Placement, Product,
    ProvenanceIndex, Ranges, SliceCounts, SliceReading, TracedOperands, TracedProduct,
    TransposedTile, UNIT, arrangement, check_exchange, check_operand, check_slice_counts,
    check_swizzle_mismatch, locate_accumulators, step_units_of, transposed_tile, units_of,
};
use kwb_runtime::{Kind, Trace};

use crate::place::{Region, WrongTiles, joinable, traced_origin};
use crate::stage::{Cleared, Confound, Finding, OUTPUT_UNCHECKED, OutputCheck, Stage, Status};

/// The structured-input run the trace was recorded on, as its output was checked.
#[derive(Clone, Debug, PartialEq)]
pub struct StructuredRun {
    /// The rung's name, for the evidence (`wide_int`).
    pub input: String,
    /// The output against its answer; `None` when nothing checked it.
    pub output: Option<OutputCheck>,
    /// The significand bits the kernel accumulates in (f32 24, f16 11): a
    /// narrower accumulator rounds the integer sums, and the accumulator is compared
    /// with A·Bᵀ within that rounding.
    pub accumulator_bits: i32,
}

/// An operand checked, or why it was not.
enum Operand {
    NotProbed,
    Unreadable(OperandReport),
    Read(OperandReport),
}

/// `kind`'s operand units checked against `index`, its input's runs: cut by
/// coordinates or raw order, or, where that cut is not readable and the k-step cut
/// is (a fragment probed once a k step, one k a record), by k steps.
fn operand(trace: &Trace, kind: Kind, index: &ProvenanceIndex) -> Operand {
    let units = units_of(trace, kind);
    let first = (!units.units.is_empty()).then(|| check_operand(&units, index));
    if let Some(report) = first.as_ref().filter(|r| r.readable()) {
        return Operand::Read(report.clone());
    }
    let steps = step_units_of(trace, kind);
    if !steps.units.is_empty() {
        let report = check_operand(&steps, index);
        if report.readable() {
            return Operand::Read(report);
        }
    }
    match first {
        Some(report) => Operand::Unreadable(report),
        None => Operand::NotProbed,
    }
}

/// The stage a full `trace` on a structured input shows, given the operands `a` (M x
/// K) and `b` (N x K) the run uploaded.
///
/// A kernel may compute `Dᵀ = B·Aᵀ` (swap-AB: a decode kernel puts the weight in the
/// MMA's A slot so the few tokens fill its N): then its MMA's A operand holds B's
/// rows and its B operand A's, and the accumulator's (m, n) are the output's (n, m).
/// Where neither traced operand is its own input's yet each is the other's, the
/// trace is judged in that frame: the inputs exchanged, the output's wrong tiles
/// transposed.
pub fn judge_structured(trace: &Trace, a: &Matrix, b: &Matrix, run: &StructuredRun) -> Finding {
    // Each input's runs, indexed once for every reading below.
    let (index_a, index_b) = (ProvenanceIndex::new(a), ProvenanceIndex::new(b));
    let own = [
        ('A', operand(trace, Kind::OperandA, &index_a)),
        ('B', operand(trace, Kind::OperandB, &index_b)),
    ];
    if let Some(swapped) = swapped_operands(trace, a, b, (&index_a, &index_b), &own) {
        let transposed = StructuredRun {
            input: run.input.clone(),
            output: run.output.as_ref().map(|o| OutputCheck {
                wrong_tiles: o.wrong_tiles.as_ref().map(WrongTiles::transposed),
                ..o.clone()
            }),
            accumulator_bits: run.accumulator_bits,
        };
        let mut f = judge_in_frame(trace, b, a, (&index_b, &index_a), swapped, &transposed);
        f.evidence.insert(
            0,
            "the MMA's A operand holds B's rows and its B operand A's (a swap-AB kernel: it computes Dᵀ = B·Aᵀ); read with the inputs exchanged and the output transposed".to_owned(),
        );
        // Right operands and accumulator with a wrong output: the store of a swap-AB
        // kernel, or an MMA fed A and B the wrong way round.
        if f.stage == Some(Stage::Epilogue) {
            f.status = Status::Draft;
            if !f.alternatives.contains(&Stage::OperandLoad) {
                f.alternatives.push(Stage::OperandLoad);
            }
            f.confound = Some(Confound::SwappedRoles);
        }
        if let Some(c) = f.cleared.as_mut() {
            std::mem::swap(&mut c.m, &mut c.n);
            if let Some(r) = c.region.as_mut() {
                *r = Region {
                    m0: r.n0,
                    m1: r.n1,
                    n0: r.m0,
                    n1: r.m1,
                };
            }
        }
        return f;
    }
    judge_in_frame(trace, a, b, (&index_a, &index_b), own, run)
}

/// An operand read with coordinates whose every run is its own row's slice of the
/// input: every consumed row meets every K slice, equally often or (a K loop's count
/// off) as a wrong number of steps would.
fn of_the_input(op: &Operand) -> bool {
    matches!(op, Operand::Read(r) if r.cut.ordered() && (r.clean() || r.loop_count_only()))
}

/// The operands read against each other's input, where the trace reads as a swap-AB
/// kernel's: neither operand's `own` reading is of its input, and each is of the
/// other input. Only for a problem whose M and N differ: the conservative reading,
/// since on a square one an MMA handed A and B the wrong way round covers the same rows.
fn swapped_operands(
    trace: &Trace,
    a: &Matrix,
    b: &Matrix,
    (index_a, index_b): (&ProvenanceIndex, &ProvenanceIndex),
    own: &[(char, Operand); 2],
) -> Option<[(char, Operand); 2]> {
    if a.rows == b.rows || own.iter().any(|(_, op)| of_the_input(op)) {
        return None;
    }
    let swapped = [
        ('A', operand(trace, Kind::OperandA, index_b)),
        ('B', operand(trace, Kind::OperandB, index_a)),
    ];
    swapped
        .iter()
        .all(|(_, op)| of_the_input(op))
        .then_some(swapped)
}

/// The first probed operand whose runs are its own input's in some steps and the
/// other input's in others ([`Exchange::mixed`]), with where its runs were found.
fn exchanged_operand(
    trace: &Trace,
    (index_a, index_b): (&ProvenanceIndex, &ProvenanceIndex),
    operands: &[(char, Operand); 2],
) -> Option<(char, Exchange)> {
    operands
        .iter()
        .filter(|(_, op)| !matches!(op, Operand::NotProbed))
        .map(|(letter, _)| {
            let (kind, own, other) = if *letter == 'A' {
                (Kind::OperandA, index_a, index_b)
            } else {
                (Kind::OperandB, index_b, index_a)
            };
            // Either cut: a fragment probed once a k step holds its K runs across
            // records.
            [units_of(trace, kind), step_units_of(trace, kind)]
                .iter()
                .map(|units| (*letter, check_exchange(units, own, other)))
                .find(|(_, x)| x.mixed())
        })
        .find_map(|x| x)
}

/// The K slices every probed operand's rows met, where that is one stretch short of
/// the whole of K and every run is the input's (none unmatched or shifted, no stray
/// row), the same for both operands; `None` where an operand could not be read.
/// A CTA's share of K that its operands and accumulator show computed right.
struct SplitShare {
    /// The stretch of K its operands cover.
    k: Range<usize>,
    /// K over that stretch.
    slices: u32,
    /// The output region its accumulator holds ([m0, m1, n0, n1]), where known.
    region: Option<[i64; 4]>,
}

fn covered_stretch(operands: &[(char, Operand); 2], slices: usize) -> Option<Range<usize>> {
    let mut found: Option<Range<usize>> = None;
    for (_, op) in operands {
        let r = match op {
            Operand::NotProbed => continue,
            Operand::Unreadable(_) => return None,
            Operand::Read(r) => r,
        };
        if r.unmatched + r.unmatched_zero + r.shifted > 0 || !r.stray_rows.is_empty() {
            return None;
        }
        let met: Vec<usize> = (0..slices)
            .filter(|s| !r.k_never.0.contains(&(*s as i64)))
            .collect();
        let (&first, &last) = (met.first()?, met.last()?);
        if last + 1 - first != met.len() || met.len() == slices {
            return None;
        }
        match &found {
            Some(f) if *f != (first..last + 1) => return None,
            _ => found = Some(first..last + 1),
        }
    }
    found
}

/// [`judge_structured`] in one frame: `operands` are A's and B's traces read against
/// `a` and `b`, whose runs `indexes` hold.
fn judge_in_frame(
    trace: &Trace,
    a: &Matrix,
    b: &Matrix,
    indexes: (&ProvenanceIndex, &ProvenanceIndex),
    operands: [(char, Operand); 2],
    run: &StructuredRun,
) -> Finding {
    let mut f = Finding::open(Vec::new());
    if trace.tile_dropped > 0 {
        f.summary = format!(
            "not judged: an incomplete trace ({} full-tile values dropped, capacity {})",
            trace.tile_dropped, trace.tile_capacity
        );
        return f;
    }
    let Some(product) = Product::accumulated(a, b, run.accumulator_bits) else {
        f.summary = "not judged: the operands have different K".to_owned();
        return f;
    };
    let input = &run.input;
    f.evidence.push(format!(
        "{} records, {} full-tile values; product {}x{}x{} compared {}",
        trace.records.len(),
        trace.tiles.len(),
        product.m,
        product.n,
        product.k,
        product.compared()
    ));

    // 1. Operands by provenance.
    let mut read_all = true;
    let mut raw_order = false;
    let mut operand_bad: Option<(char, &OperandReport)> = None;
    // An operand read with coordinates in the kernel's own (row, k) order, yet holding
    // (almost) no run of the input along K.
    let mut foreign: Option<(char, &OperandReport)> = None;
    // An operand whose K slices are each the input's, but of rows in several disjoint
    // spans, where one CTA's tile is a contiguous block of rows.
    let mut scattered: Option<(char, &OperandReport)> = None;
    let mut arrangements = Vec::new();
    for (letter, op) in &operands {
        match op {
            Operand::NotProbed => {
                read_all = false;
                f.evidence.push(format!("operand {letter}: not probed"));
            }
            Operand::Unreadable(r) => {
                read_all = false;
                if r.cut.ordered() && foreign.is_none() {
                    foreign = Some((*letter, r));
                }
                f.evidence.push(format!(
                    "operand {letter}: only {} of {} runs of 8 values found in the input: an order this model cannot cut into K runs, so nothing is concluded from it",
                    r.located, r.units
                ));
            }
            Operand::Read(r) => {
                f.evidence.push(format!(
                    "operand {letter} ({}, {} warps{}): {}",
                    r.cut.describe(),
                    r.warps,
                    if r.collided > 0 {
                        format!(
                            "; {} values shared coordinates and were told apart by order",
                            r.collided
                        )
                    } else {
                        String::new()
                    },
                    r.describe()
                ));
                if r.rows.spans().len() > 1 && scattered.is_none() {
                    scattered = Some((*letter, r));
                }
                if !r.cut.ordered() {
                    raw_order = true;
                    let layout = arrangement(&r.raw);
                    f.evidence.push(format!(
                        "operand {letter} in shared memory: {}",
                        layout.describe()
                    ));
                    arrangements.push((*letter, layout));
                }
                if !r.clean() && operand_bad.is_none() {
                    operand_bad = Some((*letter, r));
                }
            }
        }
    }

    // An operand that holds its own input's runs in some steps and the other input's
    // in others: an MMA handed the other operand's tile in those steps.
    let exchanged = exchanged_operand(trace, indexes, &operands);
    if let Some((letter, x)) = &exchanged {
        f.evidence
            .push(format!("operand {letter}: {}", x.describe()));
    }

    // 2. The accumulator after the mainloop, placed in A·Bᵀ.
    let acc = locate_accumulators(trace, &product);
    f.evidence.push(describe_accumulator(&acc));
    // Operands that cover one stretch of K only, every run the input's (a split-K
    // CTA's share of K, or a K loop cut short): the accumulator against their product
    // over that stretch, where it is a whole multiple of it.
    // Where the accumulator is exactly their product over it, and the stretch is a
    // whole share of K (1/s of it), the CTA computed a split-K partial right.
    let mut share = None;
    let partial = covered_stretch(&operands, indexes.0.slices).and_then(|range| {
        let k = range.start * UNIT..range.end * UNIT;
        let part = Product::accumulated(
            &a.columns(k.clone()),
            &b.columns(k.clone()),
            run.accumulator_bits,
        )?;
        let at = locate_accumulators(trace, &part);
        let whole = indexes.0.slices * UNIT;
        if at.right() && at.duplicated == 0 && whole % k.len() == 0 {
            f.evidence.push(format!(
                "the operands cover k {}..{} only, each run the input's, and the accumulator is exactly their product over it: 1/{} of K = {whole}, a split-K partial computed right",
                k.start,
                k.end,
                whole / k.len()
            ));
            share = Some(SplitShare {
                k: k.clone(),
                slices: (whole / k.len()) as u32,
                region: match traced_origin(trace) {
                    Some(o) => at.region_at((o.m0, o.n0)),
                    None => at.region(),
                },
            });
            return None;
        }
        let c = at.whole_multiple().or_else(|| at.multiple_of_the_rest())?;
        f.evidence.push(format!(
            "the operands cover k {}..{} only, each run the input's; over that stretch the accumulator is {c} times their product",
            k.start, k.end
        ));
        Some((k, c))
    });

    // What this CTA's evidence clears, and where: operands and accumulator exact.
    // In a local frame only the kernel's own tile origin places the accumulator, and
    // only when every value lies that far from its coordinates.
    let region = match traced_origin(trace) {
        Some(o) => acc.region_at((o.m0, o.n0)),
        None => acc.region(),
    }
    // Cut at the problem's edge: a tile larger than the problem has padding past it.
    .map(|[m0, m1, n0, n1]| Region {
        m0,
        m1: m1.min(product.m as i64),
        n0,
        n1: n1.min(product.n as i64),
    });
    // A traced run whose own output is checked and right did not show the defect:
    // its CTA being right clears nothing about a failure elsewhere (another rung, a
    // launch the traced run did not make).
    let shown_wrong = run.output.as_ref().is_none_or(OutputCheck::wrong);
    if operand_bad.is_none()
        && foreign.is_none()
        && read_all
        && acc.right()
        && acc.duplicated == 0
        && shown_wrong
    {
        f.cleared = Some(Cleared {
            stages: vec![Stage::OperandLoad, Stage::Descriptor, Stage::Mma],
            region,
            m: product.m as u64,
            n: product.n as u64,
            k: None,
        });
        if let Some(r) = &region {
            f.evidence
                .push(format!("the traced CTA's output region: {}", r.describe()));
        }
    }

    // 3. Output.
    let output_wrong = run.output.as_ref().is_some_and(OutputCheck::wrong);
    f.evidence
        .push(OutputCheck::line(run.output.as_ref(), input));

    let operand_reading = |f: &mut Finding, status: Status, summary: String| {
        f.stage = Some(Stage::OperandLoad);
        f.alternatives = vec![Stage::Descriptor];
        f.status = status;
        f.summary = summary;
    };
    if let Some((letter, x)) = exchanged {
        let other = if letter == 'A' { 'B' } else { 'A' };
        operand_reading(
            &mut f,
            Status::Verdict,
            format!(
                "operand-load (operand {letter}: {}: in some K steps the MMA was handed {other}'s tile as its {letter} operand, in others its own; no frame of the kernel's exchanges them in some steps only)",
                x.describe()
            ),
        );
    } else if let Some(share) = share.filter(|s| {
        // An output that reads as the share alone is a K loop cut short (the MMA),
        // not partials summed after it.
        let summed = run.output.as_ref().is_some_and(|o| {
            let part = 1.0 / f64::from(s.slices);
            o.wrong() && (o.ratio - part).abs() > 0.02 * part
        });
        summed && operand_bad.is_none_or(|(_, r)| r.loop_count_only())
    }) {
        // Each value the MMA met is right for this CTA's share of K, and the output,
        // which sums the shares, is wrong: what follows the accumulator loses or
        // mangles a share (the partial's store, the reduction), unless another
        // CTA's share is what is wrong.
        let confound = Confound::SplitKPartial {
            slices: share.slices,
        };
        f.stage = Some(Stage::Epilogue);
        f.alternatives = vec![Stage::Mma];
        f.status = Status::Draft;
        f.summary = format!(
            "epilogue? (this CTA's operands are exactly the input's rows over k {}..{}, 1/{} of K, and its accumulator exactly their product: a split-K partial computed right; the output on {input}, made from the partials, is wrong; {})",
            share.k.start,
            share.k.end,
            share.slices,
            confound.describe()
        );
        f.confound = Some(confound);
        f.cleared = Some(Cleared {
            stages: vec![Stage::OperandLoad, Stage::Descriptor, Stage::Mma],
            region: share.region.map(|[m0, m1, n0, n1]| Region {
                m0,
                m1: m1.min(product.m as i64),
                n0,
                n1: n1.min(product.n as i64),
            }),
            m: product.m as u64,
            n: product.n as u64,
            k: Some((share.k.start as u64, share.k.end as u64)),
        });
    } else if let Some((k, c)) = partial {
        f.stage = Some(Stage::Mma);
        f.status = Status::Verdict;
        f.factor = Some(c);
        f.summary = format!(
            "mma (the operands are exactly the input's rows over k {}..{} only, {} of K = {} (a split-K CTA's share, or a K loop cut short), and the accumulator is {c} times their product over that stretch: each MMA step was accumulated {c} times over)",
            k.start,
            k.end,
            k.len(),
            indexes.0.slices * UNIT
        );
    } else if let Some((letter, r)) = operand_bad {
        if r.loop_count_only() {
            f.stage = Some(Stage::Mma);
            f.status = Status::Verdict;
            // K consumed over K: the accumulator's share of its whole-K value.
            f.factor = r
                .steps_off
                .first()
                .filter(|(_, _, slices)| *slices > 0)
                .map(|(_, consumed, slices)| *consumed as f64 / *slices as f64);
            f.summary = format!(
                "mma (operand {letter}: {}; every run consumed is the right row's, so each MMA step got its own operands and the K loop ran a wrong number of steps: the accumulate stage)",
                r.describe()
            );
        } else if r.zeros_only() {
            operand_reading(
                &mut f,
                Status::Draft,
                format!(
                    "operand-load/descriptor (operand {letter}: {}; {})",
                    r.describe(),
                    Confound::ZerosAmongEqual.describe()
                ),
            );
            f.confound = Some(Confound::ZerosAmongEqual);
        } else {
            operand_reading(
                &mut f,
                Status::Verdict,
                format!(
                    "operand-load/descriptor (operand {letter}: {})",
                    r.describe()
                ),
            );
        }
    } else if let Some((letter, r)) = scattered.filter(|_| !acc.right()) {
        operand_reading(
            &mut f,
            Status::Verdict,
            format!(
                "operand-load/descriptor (operand {letter} holds the input's K slices, but of rows {} ({} disjoint spans), where one tile's rows are contiguous, and the accumulator is no tile of A·Bᵀ: the operand was read with another row pitch or order than it is stored in)",
                r.rows,
                r.rows.spans().len()
            ),
        );
    } else if let Some((letter, rows)) = dropped_rows(&operands, &acc).filter(|_| read_all) {
        // Every fragment a tile of A·Bᵀ, two on the same output cells, and operand
        // rows loaded right that no fragment has a product of: the registers held
        // every row, so an MMA took another fragment's registers or accumulated into
        // another fragment.
        f.stage = Some(Stage::Mma);
        f.status = Status::Verdict;
        f.summary = format!(
            "mma ({} accumulator values lie on output cells another accumulator value of the traced CTA also lies on, and operand {letter}'s rows {rows}, probed exactly the input's where the kernel loaded them, are in no accumulator value's product: every row reached the registers, so an MMA was handed another fragment's registers, or accumulated into another fragment's accumulator)",
            acc.duplicated
        );
    } else if let Some((dm, dn)) = acc.misplaced() {
        operand_reading(
            &mut f,
            Status::Verdict,
            format!(
                "operand-load/descriptor (the accumulator is exactly A·Bᵀ of the rows the operands show ({}), which is the product's tile moved by ({dm}, {dn}) from where its coordinates put it: this CTA was fed another tile's operands)",
                operand_rows(&operands)
            ),
        );
    } else if let Some((letter, r)) = foreign.filter(|_| !acc.right()) {
        // Whether the MMA multiplied what the probes show, where they show it.
        let operands_traced = TracedOperands::of(trace);
        let traced = operands_traced.product(trace);
        f.evidence.push(traced.describe());
        let (kind, matrix, rows) = if letter == 'A' {
            (Kind::OperandA, a, "M")
        } else {
            (Kind::OperandB, b, "N")
        };
        // What the operand is, as the kernel read it at its own (row, k).
        let mut what = format!(
            "no slice of the input ({} of {} runs of 8)",
            r.located, r.units
        );
        if operands_traced.read_swapped(kind, matrix) {
            what.push_str(&format!(
                " but the input read as if stored [K, {rows}] where it is stored [{rows}, K]"
            ));
        }
        if traced.explains() {
            operand_reading(
                &mut f,
                Status::Verdict,
                format!(
                    "operand-load/descriptor (operand {letter}, as the kernel reads it at its own (row, k), is {what}; the accumulator is no tile of A·Bᵀ but exactly the product of the operands as traced ({} of {} values{}), so the MMA consumed what the probes read, where they read it: the probe's coordinates are the MMA's)",
                    traced.matched,
                    traced.cells,
                    if traced.multiset {
                        ", as a multiset: the accumulator has no coordinates"
                    } else {
                        ""
                    }
                ),
            );
        } else {
            operand_reading(
                &mut f,
                Status::Draft,
                format!(
                    "operand-load/descriptor? (operand {letter}, as the kernel reads it at its own (row, k), is {what}, and the accumulator is no tile of A·Bᵀ: the kernel reads {letter} in another layout than it is stored in, unless the probe's coordinates are wrong, which this trace cannot rule out)"
                ),
            );
            f.confound = Some(Confound::ProbeCoordinates);
        }
    } else if let Some(c) = acc.multiple_of_the_rest() {
        // Every fragment met the right values; some were accumulated c times over.
        let (all, placed) = acc.layers();
        f.stage = Some(Stage::Mma);
        f.alternatives = vec![Stage::OperandLoad, Stage::Descriptor];
        f.factor = Some(c);
        f.status = if read_all {
            Status::Verdict
        } else {
            Status::Draft
        };
        if !read_all {
            f.confound = Some(Confound::OperandsNotProbed);
        }
        f.summary = format!(
            "mma ({placed} of {all} accumulator layers are tiles of A·Bᵀ and every other is {c} times its own tile{}: those fragments were accumulated {c} times over, as an MMA issued again on them or a K loop over them with a wrong count does{})",
            if read_all {
                ", with the operands exactly the input's tiles"
            } else {
                ""
            },
            if read_all {
                String::new()
            } else {
                format!("; {}", Confound::OperandsNotProbed.describe())
            }
        );
    } else if acc.partly() {
        let (all, placed) = acc.layers();
        let why = format!(
            "{placed} of {all} accumulator layers are tiles of A·Bᵀ; the others (values sharing coordinates: another accumulator set or MMA tile the probe could not tell apart) hold something the model does not predict"
        );
        if output_wrong {
            f.stage = Some(Stage::Epilogue);
            f.alternatives = vec![Stage::Mma];
            f.summary = format!("epilogue or mma (operands exact; {why}; output wrong)");
        } else if run.output.is_none() {
            f.summary = format!("operands exact on {input}; {why}; {OUTPUT_UNCHECKED}");
        } else {
            f.clean = true;
            f.summary = format!("nothing on {input} (operands and output exact; {why})");
        }
    } else if !acc.right() {
        if acc.groups.is_empty() {
            f.summary =
                "not judged: no accumulator after the mainloop in the full trace".to_owned();
        } else if read_all && !raw_order {
            // The MMA multiplied what the probes show, where they show it: then the
            // operands, each a K slice of the input, are another tile's rows.
            let operands_as_traced = TracedOperands::of(trace);
            let traced = operands_as_traced.product(trace);
            f.evidence.push(traced.describe());
            f.status = Status::Verdict;
            let swapped = (!traced.explains())
                .then(|| operands_as_traced.swapped_product(trace))
                .filter(TracedProduct::explains);
            if let Some(swapped) = swapped {
                f.evidence.push(format!(
                    "with A and B in each other's place, {}",
                    swapped.describe()
                ));
                // The values are right and so is the arithmetic: what the MMA was
                // handed as each operand is not.
                f.stage = Some(Stage::OperandLoad);
                f.alternatives = vec![Stage::Mma];
                f.summary = format!(
                    "operand-load (the operands hold the input's K slices, each once, yet {} of {} accumulator groups are no tile of A·Bᵀ; the accumulator is exactly the product of the traced operands with their roles exchanged ({} of {} values): the MMA was given B's tile as A and A's as B)",
                    acc.nowhere(),
                    acc.groups.len(),
                    swapped.matched,
                    swapped.cells
                );
            } else if traced.explains() {
                operand_reading(
                    &mut f,
                    Status::Verdict,
                    format!(
                        "operand-load/descriptor (the operands hold the input's K slices, each once, yet {} of {} accumulator groups are no tile of A·Bᵀ and the accumulator is exactly the product of the operands as traced ({} of {} values): the MMA multiplied what it was given, and it was given rows other than its tile's ({}))",
                        acc.nowhere(),
                        acc.groups.len(),
                        traced.matched,
                        traced.cells,
                        operand_rows(&operands)
                    ),
                );
            } else if let Some(why) = unmatched_pairs(&mut f, trace, a, b, &product, &acc) {
                // The MMA met values the probed tiles do not pair that way: it was
                // handed another fragment or descriptor than the operand's.
                f.stage = Some(Stage::OperandLoad);
                f.alternatives = vec![Stage::Mma, Stage::Descriptor];
                f.status = Status::Draft;
                f.summary = format!(
                    "operand-load or mma (operands are exactly the input's tiles, every K slice once, yet {} of {} accumulator groups are no tile of A·Bᵀ, {why}; the probes show the tiles, so the MMA was not handed them, unless it pairs k wrongly itself)",
                    acc.nowhere(),
                    acc.groups.len()
                );
            } else {
                f.stage = Some(Stage::Mma);
                f.summary = format!(
                    "mma (operands are exactly the input's tiles, every K slice once; {} of {} accumulator groups are no tile of A·Bᵀ)",
                    acc.nowhere(),
                    acc.groups.len()
                );
            }
        } else if read_all {
            let layouts: Vec<String> = arrangements
                .iter()
                .map(|(l, a)| format!("{l} {}", short(*a)))
                .collect();
            let swizzle = swizzle_mismatch(trace, a, b, &operands, &arrangements);
            if let Some((read_as, checked)) = swizzle.as_ref().filter(|(_, c)| c.explains()) {
                f.evidence.push(checked.describe());
                f.stage = Some(Stage::Descriptor);
                f.alternatives = vec![Stage::Mma];
                f.status = Status::Verdict;
                f.summary = format!(
                    "descriptor (operand tiles hold exactly the input's values, each K slice once, laid out in shared memory as {}; the accumulator is no tile of A·Bᵀ but exactly the product of the inputs read {read_as}, as the MMA reads a tile whose swizzle is not the one it was written with ({} of {} accumulator values): the TMA map that wrote the tiles and the MMA's shared-memory descriptor disagree on the swizzle)",
                    layouts.join(", "),
                    checked.matched,
                    checked.cells
                );
            } else {
                if let Some((_, checked)) = &swizzle {
                    f.evidence.push(format!(
                        "read with the other swizzle: {}",
                        checked.describe()
                    ));
                }
                if let Some(why) = unmatched_pairs(&mut f, trace, a, b, &product, &acc) {
                    f.stage = Some(Stage::OperandLoad);
                    f.alternatives = vec![Stage::Descriptor, Stage::Mma];
                    f.summary = format!(
                        "operand-load, descriptor or mma (operand tiles hold exactly the input's values, each K slice once, laid out in shared memory as {}; the accumulator is no tile of A·Bᵀ, nor of the inputs read with the other swizzle, {why}; the tiles lie right, so the MMA's descriptors did not hand them to it as they lie)",
                        layouts.join(", ")
                    );
                } else if let Some((t0, t1, counts)) = frame_shift(trace, &acc)
                    .map(|shift| check_slice_counts(trace, a, b, &product, shift))
                    .and_then(|c| c.stretch().map(|(t0, t1)| (t0, t1, c)))
                {
                    // The accumulator is the product over one stretch of K that starts
                    // or ends it, each slice once: the tiles met right, and the
                    // accumulate kept only part of the loop.
                    f.evidence.push(counts.describe());
                    f.stage = Some(Stage::Mma);
                    f.status = Status::Verdict;
                    let whole = indexes.0.slices;
                    f.summary = format!(
                        "mma (operand tiles hold exactly the input's values, each K slice once, laid out in shared memory as {}; the accumulator is exactly their product over k {}..{} only, each slice once, of K = {}: {})",
                        layouts.join(", "),
                        t0 * UNIT,
                        t1 * UNIT,
                        whole * UNIT,
                        if t0 == 0 {
                            "the K loop's accumulation stopped early"
                        } else {
                            "the accumulator was zeroed at a K step (an MMA issued with accumulate off, a reset) and kept only the products after it"
                        }
                    );
                } else {
                    f.stage = Some(Stage::Mma);
                    f.alternatives = vec![Stage::Descriptor];
                    f.summary = format!(
                        "mma or descriptor (operand tiles hold exactly the input's values, each K slice once, laid out in shared memory as {}; the accumulator is no tile of A·Bᵀ, nor of the inputs read with the other swizzle, and a raw-order read does not show how the MMA's descriptor reads the tile)",
                        layouts.join(", ")
                    );
                }
            }
        } else {
            // No operand to read: the accumulator itself, as sums over K slices, says
            // whether A's values met B's of the same k (the K loop's count) or not;
            // as its tile's transpose, that the MMA had A and B the wrong way round.
            let shift = frame_shift(trace, &acc);
            let counts = shift.map(|shift| {
                let c = check_slice_counts(trace, a, b, &product, shift);
                f.evidence.push(c.describe());
                c
            });
            let mirrored = shift
                .map(|shift| transposed_tile(trace, &product, shift))
                .filter(TransposedTile::explains);
            if let Some(t) = &mirrored {
                f.evidence.push(t.describe());
            }
            let reading = counts.as_ref().and_then(SliceCounts::reading);
            let (stage, alternatives, why) = match reading {
                _ if mirrored.is_some() => (
                    Stage::OperandLoad,
                    vec![Stage::Mma, Stage::Descriptor],
                    "and every value is A·Bᵀ mirrored across the tile's diagonal: the MMA was handed B's tile as A and A's as B (or the accumulator probe's m and n are each other's)",
                ),
                Some(r @ (SliceReading::Unpaired | SliceReading::Displaced)) => (
                    Stage::OperandLoad,
                    vec![Stage::Descriptor, Stage::Mma],
                    slice_words(r),
                ),
                Some(r @ SliceReading::LoopCount) => (
                    Stage::Mma,
                    vec![Stage::OperandLoad, Stage::Descriptor],
                    slice_words(r),
                ),
                None => (Stage::Mma, vec![Stage::OperandLoad, Stage::Descriptor], ""),
            };
            f.stage = Some(stage);
            f.alternatives = alternatives;
            f.confound = Some(Confound::OperandsNotProbed);
            let stages = if stage == Stage::Mma {
                "mma or operand-load/descriptor"
            } else {
                "operand-load/descriptor or mma"
            };
            f.summary = format!(
                "{stages} ({} of {} accumulator groups are no tile of A·Bᵀ{}{}; {})",
                acc.nowhere(),
                acc.groups.len(),
                if why.is_empty() { "" } else { ", " },
                why,
                Confound::OperandsNotProbed.describe()
            );
        }
    } else if acc.duplicated > 0 {
        // Every fragment a tile of A·Bᵀ, but two on the same output cells: one
        // fragment holds another's product.
        f.stage = Some(Stage::Mma);
        f.alternatives = vec![Stage::OperandLoad, Stage::Descriptor];
        f.summary = format!(
            "mma or operand-load ({} accumulator values lie on output cells another accumulator value of the traced CTA also lies on: two fragments hold one tile of A·Bᵀ, so an MMA accumulated another fragment's product, or was fed another fragment's operands{})",
            acc.duplicated,
            if read_all {
                ""
            } else {
                "; an operand was not probed, so which cannot be told"
            }
        );
    } else if let Some(output) = run.output.as_ref().filter(|_| output_wrong) {
        f.stage = Some(Stage::Epilogue);
        match joinable(output, region.as_ref()) {
            Ok(()) => {
                f.status = Status::Verdict;
                f.summary = if read_all {
                    "epilogue (operands and accumulator are exactly the input's tiles and their product; output wrong)".to_owned()
                } else {
                    "epilogue (the accumulator is exactly the input's product, each fragment its own tile; output wrong)".to_owned()
                };
            }
            Err(why) => {
                f.alternatives = vec![Stage::Mma, Stage::OperandLoad, Stage::Descriptor];
                f.confound = Some(Confound::ElsewhereThanTraced);
                f.summary = format!(
                    "epilogue? (operands and accumulator exactly the input's tiles and their product in the traced CTA; output wrong, but {why})"
                );
            }
        }
    } else if run.output.is_none() {
        f.summary = format!("operands and accumulator exact on {input}; {OUTPUT_UNCHECKED}");
    } else {
        f.clean = true;
        f.summary = format!("nothing on {input} (operands, accumulator and output exact)");
    }
    f.against_output(run.output.as_ref(), input)
}

/// Where both operand tiles lie in one known arrangement (unswizzled or 128-byte
/// swizzled), how the MMA would read them with the other, and the accumulator checked
/// against the inputs read that way, over the rows the operands' provenance located.
fn swizzle_mismatch(
    trace: &Trace,
    a: &Matrix,
    b: &Matrix,
    operands: &[(char, Operand); 2],
    arrangements: &[(char, Arrangement)],
) -> Option<(&'static str, TracedProduct)> {
    let lies = arrangements.first()?.1;
    if arrangements.len() != 2 || arrangements.iter().any(|(_, x)| *x != lies) {
        return None;
    }
    let read_as = match lies {
        Arrangement::Unswizzled => "128-byte swizzled",
        Arrangement::Swizzle128 => "unswizzled",
        Arrangement::Other => return None,
    };
    let rows = |op: &Operand| match op {
        Operand::Read(r) => Some(
            r.rows
                .0
                .iter()
                .filter_map(|&x| usize::try_from(x).ok())
                .collect::<Vec<usize>>(),
        ),
        _ => None,
    };
    let (rows_a, rows_b) = (rows(&operands[0].1)?, rows(&operands[1].1)?);
    Some((
        read_as,
        check_swizzle_mismatch(trace, a, b, &rows_a, &rows_b),
    ))
}

fn short(a: Arrangement) -> &'static str {
    match a {
        Arrangement::Unswizzled => "unswizzled",
        Arrangement::Swizzle128 => "128-byte swizzled",
        Arrangement::Other => "in another arrangement",
    }
}

fn operand_rows(operands: &[(char, Operand); 2]) -> String {
    let shown: Vec<String> = operands
        .iter()
        .filter_map(|(l, op)| match op {
            Operand::Read(r) => Some(format!("{l} rows {}", r.rows)),
            _ => None,
        })
        .collect();
    if shown.is_empty() {
        "operands not read".to_owned()
    } else {
        shown.join(", ")
    }
}

/// Where two accumulator fragments hold one tile of A·Bᵀ, an operand's rows that its
/// probes show loaded from the input and that no accumulator value holds the
/// product of (a decode tile's few real tokens among padding count too): A's
/// against the accumulator's m, B's against its n. A load that put another
/// fragment's rows in the registers leaves no such rows; an MMA handed the wrong
/// registers, or writing the wrong accumulator, does.
fn dropped_rows(
    operands: &[(char, Operand); 2],
    acc: &AccumulatorReport,
) -> Option<(char, Ranges)> {
    if acc.duplicated == 0 {
        return None;
    }
    operands.iter().find_map(|(letter, op)| {
        let Operand::Read(r) = op else { return None };
        let held = if *letter == 'A' {
            &acc.held_m
        } else {
            &acc.held_n
        };
        let dropped = r.rows.without(held);
        (!dropped.is_empty()).then_some((*letter, dropped))
    })
}

/// What a slice reading says of the accumulator, in words that follow "no tile of
/// A·Bᵀ".
fn slice_words(reading: SliceReading) -> &'static str {
    match reading {
        SliceReading::Unpaired => {
            "and no whole count per K slice makes it a sum of A's and B's products over matching k: A's values met B's of another k or row, as a load that fetches another K offset, stage or row does (or an MMA fed another fragment)"
        }
        SliceReading::Displaced => {
            "and it is a sum over matching K slices, some never met and others more than once: a step fed another step's tiles (a stage or K offset read for both operands alike)"
        }
        SliceReading::LoopCount => {
            "and it is a sum over matching K slices, some met too often or never (not both), or each cell a whole multiple of its own product: the K loop ran a wrong number of steps"
        }
    }
}

/// Where the accumulator is no sum of matched K-slice products (A(m, k) met B(n, k) of
/// its own k and row, each slice a whole number of times), why, in words; the slice
/// counts' evidence is added to `f`. `None` when it is such a sum (a loop count, or
/// right) or cannot be judged.
fn unmatched_pairs(
    f: &mut Finding,
    trace: &Trace,
    a: &Matrix,
    b: &Matrix,
    product: &Product,
    acc: &AccumulatorReport,
) -> Option<&'static str> {
    let counts = check_slice_counts(trace, a, b, product, frame_shift(trace, acc)?);
    f.evidence.push(counts.describe());
    counts
        .reading()
        .filter(|r| *r != SliceReading::LoopCount)
        .map(slice_words)
}

/// The shift from the accumulator records' coordinates to the problem's: none in a
/// global frame, or for a trace of CTA (0, 0, 0) alone (its local frame is the
/// problem's); the origin the records name in a local one. None: the frame is not
/// known, and nothing is read at coordinates that may be another tile's.
fn frame_shift(trace: &Trace, acc: &AccumulatorReport) -> Option<(i64, i64)> {
    if acc.global_frame {
        return Some((0, 0));
    }
    if let Some(o) = traced_origin(trace) {
        return Some((o.m0, o.n0));
    }
    let mut accumulators = trace
        .records
        .iter()
        .filter(|r| r.kind() == Some(Kind::Accumulator))
        .peekable();
    (accumulators.peek().is_some()
        && accumulators.all(|r| (r.cta_x, r.cta_y, r.cta_z) == (0, 0, 0)))
    .then_some((0, 0))
}

fn describe_accumulator(acc: &AccumulatorReport) -> String {
    if acc.groups.is_empty() {
        return "accumulator after the mainloop: not in the full trace".to_owned();
    }
    let count = |f: &dyn Fn(&Placement) -> bool| {
        acc.groups
            .iter()
            .flat_map(|g| &g.layers)
            .filter(|p| f(p))
            .count()
    };
    let at = count(&|p| *p == Placement::AtCoordinates);
    let shifted = count(&|p| matches!(p, Placement::Shifted { .. }));
    let tiles = count(&|p| matches!(p, Placement::Tile { .. }));
    let nowhere = count(&|p| *p == Placement::Nowhere);
    format!(
        "accumulator after the mainloop ({} groups of site x warp, {} layers, {} frame): {at} at their coordinates, {shifted} shifted (local coordinates{}), {tiles} found as a tile's multiset (no coordinates), {nowhere} no tile of A·Bᵀ",
        acc.groups.len(),
        acc.layers().0,
        if acc.global_frame { "global" } else { "local" },
        if acc.global_frame {
            "; in a global frame a shift is a wrong tile"
        } else {
            ""
        }
    )
}
