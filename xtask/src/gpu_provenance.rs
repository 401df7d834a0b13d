//! The structured-input half of `cargo xtask gpu-trace`: the defects all-ones cannot
//! show (a K slice fed twice, another CTA's rows, a swizzle the MMA does not expect,
//! an epilogue reading C or the bias at the wrong place) are localized from a full
//! trace on inputs whose every run of 8 values is all but unique.
//!
//! Each family is instrumented with every probe kind and `--full-tile` for CTA
//! (1, 0, 0) (off the diagonal, and the megakernel's first down-projection task past
//! column 0), each variant runs `--input wide_int` (integers in [-8, 8]) with
//! `KWB_DUMP_DIR` so the harness writes the operands it uploaded, and the trace is
//! checked stage by stage against the host model of kwb-reconcile:
//!
//! 1. operands by provenance: every consumed row meets every K slice equally often,
//!    from the input only — otherwise **operand-load/descriptor** (VERDICT; DRAFT
//!    when only zeros are out of place, which padding and out-of-bounds fill also
//!    give). When the only fault is the number of K steps (every run consumed is the
//!    right row's, and slices are met too often or never but not both), each MMA got
//!    its own step's operands and the K loop ran a wrong number of steps: **mma**;
//! 2. accumulator by placement in `A·Bᵀ`: in a global coordinate frame a tile that
//!    is the product of the rows the operands show but not of the tile's own
//!    coordinates is the operand tile selection (**operand-load**); a tile found
//!    nowhere with operands right is **mma** when the operands were read with their
//!    coordinates, a DRAFT naming **descriptor** too when they were read as raw
//!    shared memory (the arrangement the MMA reads is then not seen);
//! 3. accumulator right and the harness's output wrong: **epilogue**. Where values
//!    share coordinates (the probe could not tell accumulator sets or MMA tiles
//!    apart) they are placed layer by layer; when only some layers are tiles of the
//!    product, a wrong output is a DRAFT naming epilogue and mma.

use std::path::{Path, PathBuf};

use kwb_reconcile::{
    AccumulatorReport, Arrangement, Matrix, OperandReport, Product, ProvenanceIndex, arrangement,
    check_operand, locate_accumulators, units_of,
};
use kwb_runtime::{Kind, Trace};

use crate::gpu_suite::{Ran, run_one};
use crate::gpu_trace::{Judged, Options};
use crate::suite::Variant;

/// The CTA the full trace records.
pub const CTA: [u32; 3] = [1, 0, 0];
/// The input rung of this pass.
pub const INPUT: &str = "wide_int";

/// Runs a full-trace build on `wide_int` with the operands dumped next to the trace,
/// judges it, and removes the (large) trace file unless `keep`.
pub fn trace_and_judge(b: &crate::kernels::Built<'_>, options: &Options) -> Judged {
    let stem = format!("{}.{}.{INPUT}", b.variant.family, b.variant.defect);
    let trace_path = options.out.join(format!("{stem}.trace"));
    let dump = options.out.join(format!("{stem}.inputs"));
    let _ = std::fs::remove_file(&trace_path);
    let _ = std::fs::remove_dir_all(&dump);
    let ran = match (&b.result, std::fs::create_dir_all(&dump)) {
        (Ok(_), Ok(())) => run_one(
            &b.binary,
            &["--input", INPUT],
            &[(kwb_runtime::OUT_ENV, &trace_path), ("KWB_DUMP_DIR", &dump)],
            options.timeout,
        ),
        (Err(e), _) => failed(format!(
            "build failed: {}",
            e.lines().next().unwrap_or_default()
        )),
        (_, Err(e)) => failed(format!("{}: {e}", dump.display())),
    };
    let trace = std::fs::read(&trace_path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| kwb_runtime::decode(&bytes).map_err(|e| e.to_string()));
    let judged = judge(b.variant, &ran, trace.as_ref(), &dump);
    let _ = std::fs::remove_file(&trace_path);
    judged
}

fn failed(why: String) -> Ran {
    Ran {
        rungs: Vec::new(),
        hang: false,
        error: Some(why),
        seconds: 0.0,
    }
}

fn read_matrix(path: &Path) -> Result<Matrix, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (shape, data) =
        kwb_cli::npy::read_f32(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    match shape[..] {
        [rows, cols] => Matrix::new(rows, cols, data)
            .ok_or_else(|| format!("{}: shape and data disagree", path.display())),
        _ => Err(format!("{}: not a matrix: shape {shape:?}", path.display())),
    }
}

/// An operand checked, or why it was not.
enum Operand {
    NotProbed,
    Unreadable(OperandReport),
    Read(OperandReport),
}

fn operand(trace: &Trace, kind: Kind, matrix: &Matrix) -> Operand {
    let units = units_of(trace, kind);
    if units.units.is_empty() {
        return Operand::NotProbed;
    }
    let report = check_operand(&units, &ProvenanceIndex::new(matrix));
    if report.readable() {
        Operand::Read(report)
    } else {
        Operand::Unreadable(report)
    }
}

fn judge(
    variant: &Variant,
    ran: &Ran,
    trace: std::result::Result<&Trace, &String>,
    dump: &Path,
) -> Judged {
    let (trace, rung) = match crate::gpu_trace::judgeable(variant, ran, trace, INPUT) {
        Ok(x) => x,
        Err(judged) => return judged,
    };
    let fail = Judged::failed;
    if trace.tile_dropped > 0 {
        return fail(format!(
            "incomplete trace: {} full-tile values dropped (capacity {})",
            trace.tile_dropped, trace.tile_capacity
        ));
    }
    let input = |name: &str| read_matrix(&dump.join(format!("{INPUT}.{name}.npy")));
    let (a, b) = match (input("A"), input("B")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return fail(format!("no dumped operands: {e}")),
    };
    let Some(product) = Product::of(&a, &b) else {
        return fail("the dumped operands have different K".to_owned());
    };
    let mut evidence = vec![format!(
        "CTA {:?}: {} records, {} full-tile values; product {}x{}x{} compared {}",
        CTA,
        trace.records.len(),
        trace.tiles.len(),
        product.m,
        product.n,
        product.k,
        if product.is_exact() {
            "exactly"
        } else {
            "within the fp32 accumulation bound"
        }
    )];

    // 1. Operands by provenance.
    let operands = [
        ('A', operand(trace, Kind::OperandA, &a)),
        ('B', operand(trace, Kind::OperandB, &b)),
    ];
    let mut read_all = true;
    let mut raw_order = false;
    let mut operand_bad: Option<(char, &OperandReport)> = None;
    // An operand whose probe had coordinates, read in the kernel's own (row, k)
    // order, yet holding (almost) no run of the input along K.
    let mut foreign: Option<(char, &OperandReport)> = None;
    let mut arrangements = Vec::new();
    for (letter, op) in &operands {
        match op {
            Operand::NotProbed => {
                read_all = false;
                evidence.push(format!("operand {letter}: not probed"));
            }
            Operand::Unreadable(r) => {
                read_all = false;
                if r.coordinates && foreign.is_none() {
                    foreign = Some((*letter, r));
                }
                evidence.push(format!(
                    "operand {letter}: only {} of {} runs of 8 values found in the input: an order this model cannot cut into K runs, so nothing is concluded from it",
                    r.located, r.units
                ));
            }
            Operand::Read(r) => {
                evidence.push(format!(
                    "operand {letter} ({}, {} warps{}): {}",
                    if r.coordinates {
                        "register fragments with coordinates"
                    } else {
                        "shared tile in raw order"
                    },
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
                if !r.coordinates {
                    raw_order = true;
                    let layout = arrangement(&r.raw);
                    evidence.push(format!(
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

    // 2. The accumulator after the mainloop, placed in A·Bᵀ.
    let acc = locate_accumulators(trace, &product);
    evidence.push(describe_accumulator(&acc));
    let misplaced = acc.misplaced();

    // 3. Output.
    let output_wrong = rung.mismatches > 0 || rung.nan > 0 || rung.inf > 0;
    evidence.push(format!(
        "output (harness, {INPUT}): {} mismatches, {} NaN, {} Inf, first at {:?}, ratio {}",
        rung.mismatches, rung.nan, rung.inf, rung.first_mismatch, rung.ratio
    ));

    let manifest = variant.stage.as_str();
    let operand_stage = matches!(manifest, "operand-load" | "descriptor");
    let (stage, grade, agrees) = if let Some((letter, r)) = operand_bad {
        if r.loop_count_only() {
            (
                format!(
                    "mma (operand {letter}: {}; every run consumed is the right row's, so each MMA step got its own operands and the K loop ran a wrong number of steps: the accumulate stage)",
                    r.describe()
                ),
                "VERDICT",
                manifest == "mma",
            )
        } else if r.zeros_only() {
            (
                format!(
                    "operand-load/descriptor (operand {letter}: {}; zeros only, which padding rows or out-of-bounds fill also give)",
                    r.describe()
                ),
                "DRAFT",
                operand_stage || (manifest == "none" && variant.symptom.starts_with("confound")),
            )
        } else {
            (
                format!(
                    "operand-load/descriptor (operand {letter}: {})",
                    r.describe()
                ),
                "VERDICT",
                operand_stage,
            )
        }
    } else if let Some((dm, dn)) = misplaced {
        let rows = operand_rows(&operands);
        (
            format!(
                "operand-load/descriptor (the accumulator is exactly A·Bᵀ of the rows the operands show ({rows}), which is the product's tile moved by ({dm}, {dn}) from where its coordinates put it: this CTA was fed another tile's operands)"
            ),
            "VERDICT",
            operand_stage,
        )
    } else if let Some((letter, r)) = foreign.filter(|_| !acc.right()) {
        (
            format!(
                "operand-load/descriptor? (operand {letter} read in the kernel's own logical (row, k) order holds {} of {} runs of 8 that are a slice of the input, and the accumulator is no tile of A·Bᵀ: the kernel reads {letter} in another layout than it is stored in — unless the probe's coordinates are wrong, which this trace cannot rule out)",
                r.located, r.units
            ),
            "DRAFT",
            operand_stage,
        )
    } else if acc.partly() {
        let (all, placed) = acc.layers();
        let why = format!(
            "{placed} of {all} accumulator layers are tiles of A·Bᵀ; the others (values sharing coordinates: another accumulator set or MMA tile the probe could not tell apart) hold something the model does not predict"
        );
        if output_wrong {
            (
                format!("epilogue or mma (operands exact; {why}; output wrong)"),
                "DRAFT",
                matches!(manifest, "epilogue" | "mma"),
            )
        } else {
            (
                format!("nothing on {INPUT} (operands and output exact; {why})"),
                "n/a",
                manifest == "none",
            )
        }
    } else if !acc.right() {
        if acc.groups.is_empty() {
            (
                "not judged: no accumulator after the mainloop in the full trace".to_owned(),
                "n/a",
                false,
            )
        } else if read_all && !raw_order {
            (
                format!(
                    "mma (operands are exactly the input's tiles, every K slice once; {} of {} accumulator groups are no tile of A·Bᵀ)",
                    acc.nowhere(),
                    acc.groups.len()
                ),
                "VERDICT",
                manifest == "mma",
            )
        } else if read_all {
            let layouts: Vec<String> = arrangements
                .iter()
                .map(|(l, a)| format!("{l} {}", short(*a)))
                .collect();
            (
                format!(
                    "mma or descriptor (operand tiles hold exactly the input's values, each K slice once, laid out in shared memory as {}; the accumulator is no tile of A·Bᵀ, and a raw-order read does not show how the MMA's descriptor reads the tile)",
                    layouts.join(", ")
                ),
                "DRAFT",
                matches!(manifest, "mma" | "descriptor"),
            )
        } else {
            (
                format!(
                    "mma or operand-load/descriptor ({} of {} accumulator groups are no tile of A·Bᵀ; the operands were not read, so the two cannot be told apart)",
                    acc.nowhere(),
                    acc.groups.len()
                ),
                "DRAFT",
                matches!(manifest, "mma" | "operand-load" | "descriptor"),
            )
        }
    } else if output_wrong {
        (
            "epilogue (operands and accumulator are exactly the input's tiles and their product; output wrong)"
                .to_owned(),
            "VERDICT",
            manifest == "epilogue",
        )
    } else {
        (
            format!("nothing on {INPUT} (operands, accumulator and output exact)"),
            "n/a",
            manifest == "none",
        )
    };
    Judged {
        stage,
        grade,
        agrees,
        evidence,
    }
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

fn describe_accumulator(acc: &AccumulatorReport) -> String {
    use kwb_reconcile::Placement;
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

/// The folder of the full-trace copies, next to the ones-rung copies.
pub fn traced_dir(root: &Path) -> PathBuf {
    root.join("target/traced-full")
}
