//! The reconciled verdict: what the trace and the ladder say together, and how sure
//! that is. A VERDICT needs an unconfounded trace that isolates the stage with the
//! ladder not contradicting it, or every controlled rung right (refuted); everything
//! else is a DRAFT that says what evidence is missing and what could explain it.

use kwb_runtime::{Kind, Trace};
use serde::Serialize;

use crate::descriptor::DescriptorIssue;
use crate::place::Located;
use crate::stage::{Confound, Finding, Stage, Status};

/// The first place a NaN or an Inf shows in a trace, in data-path order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NanOrigin {
    pub stage: Stage,
    /// The K tile (None: outside the K loop).
    pub k_tile: Option<i32>,
    /// The probe site.
    pub site: u32,
    /// Non-finite values there, summed over the records of that site and K tile.
    pub count: u64,
}

/// Where the first non-finite value of `trace` is: the earliest stage along the data
/// path (operands, accumulator, epilogue) with one, and there the earliest K tile.
pub fn nan_origin(trace: &Trace) -> Option<NanOrigin> {
    let order = [
        (Kind::Load, Stage::OperandLoad),
        (Kind::OperandA, Stage::OperandLoad),
        (Kind::OperandB, Stage::OperandLoad),
        (Kind::Accumulator, Stage::Mma),
        (Kind::Epilogue, Stage::Epilogue),
    ];
    for (kind, stage) in order {
        let bad = trace
            .records
            .iter()
            .filter(|r| r.kind() == Some(kind) && r.nan_count + r.inf_count > 0);
        // Records of the K loop before those after it (-1), then by K tile.
        let Some(first) = bad.min_by_key(|r| (r.k_tile < 0, r.k_tile)) else {
            continue;
        };
        let count = trace
            .records
            .iter()
            .filter(|r| r.kind() == Some(kind) && r.site == first.site && r.k_tile == first.k_tile)
            .map(|r| u64::from(r.nan_count + r.inf_count))
            .sum();
        return Some(NanOrigin {
            stage,
            k_tile: first.k_tile(),
            site: first.site,
            count,
        });
    }
    None
}

/// The reconciled stage.
///
/// Invariant: `status` is VERDICT only when (a) the trace's finding is a VERDICT for
/// `stage` and the ladder, when there is one, fails in a way that fits it, or (b)
/// `stage` is `None`, the ladder ran and every rung was right, and the trace, when
/// there is one, shows nothing wrong or only a confound, or (c) the ladder failed on
/// exact inputs in the traced CTA's tile (or in every tile) at the trace's M x N, and
/// the trace clears every stage the ladder names but `stage` (elimination).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub status: Status,
    /// `None`: no defect in this instantiation (refuted), or none found.
    pub stage: Option<Stage>,
    /// Stages the evidence cannot tell apart from `stage`.
    pub alternatives: Vec<Stage>,
    pub summary: String,
    /// A confound that explains the production symptom, or keeps the draft a draft.
    pub confound: Option<Confound>,
    /// What would turn a draft into a verdict.
    pub missing: Vec<String>,
    pub k_tile: Option<i32>,
    pub factor: Option<f64>,
}

/// What `trace` (Track A) and `ladder` (Track B) say together.
pub fn reconcile(trace: Option<&Finding>, ladder: Option<&Finding>) -> Verdict {
    let mut v = Verdict {
        status: Status::Draft,
        stage: None,
        alternatives: Vec::new(),
        summary: String::new(),
        confound: None,
        missing: Vec::new(),
        k_tile: None,
        factor: None,
    };
    let take = |v: &mut Verdict, f: &Finding| {
        v.stage = f.stage;
        v.alternatives = f.alternatives.clone();
        v.k_tile = f.k_tile;
        v.factor = f.factor;
        v.confound = f.confound.clone();
    };
    match (trace, ladder) {
        (None, None) => {
            v.summary = "no evidence: neither a trace nor a ladder run".to_owned();
            v.missing.push("a trace of the kernel (kwb-instrument) or a ladder run of its reproducer (kwb run)".to_owned());
        }
        // An isolating trace.
        (Some(t), l) if t.status == Status::Verdict && t.stage.is_some() => {
            take(&mut v, t);
            let stage = t.stage.expect("guarded");
            match l {
                Some(l) if l.clean => {
                    v.summary = format!(
                        "{} by the trace, but the reproducer passes every rung: the defect lies outside what the reproducer replays (the launcher, another instantiation), or the traced run differs from it",
                        stage.as_str()
                    );
                    v.missing
                        .push("a reproducer that fails like the traced run".to_owned());
                }
                Some(l) if l.stage.is_some() && !l.fits(Some(stage)) && !t.fits(l.stage) => {
                    v.summary = format!(
                        "{} by the trace, {} by the ladder: the two disagree",
                        stage.as_str(),
                        l.stage.map_or("none", Stage::as_str)
                    );
                    v.missing.push("a trace on the rung that fails".to_owned());
                }
                Some(_) | None => {
                    v.status = Status::Verdict;
                    v.summary = t.summary.clone();
                    if l.is_none() {
                        v.missing
                            .push("a ladder run of the reproducer (corroboration only)".to_owned());
                    }
                }
            }
        }
        // A split-K share computed right whose products the output lacks.
        (Some(t), Some(l)) if share_lost(t, l).is_some() => {
            let (k0, k1, j) = share_lost(t, l).expect("guarded");
            take(&mut v, t);
            v.status = Status::Verdict;
            v.stage = Some(Stage::Epilogue);
            v.alternatives.clear();
            v.confound = None;
            v.summary = format!(
                "epilogue (the traced CTA computed its split-K share, k {k0}..{k1}, right: operands exactly the input's, accumulator exactly their product; onehot-k:{j}, whose only products lie in that share, leaves the output with none of its answer: a share is lost after the accumulator, in the partial's store or the sum of the partials); the ladder: {}",
                l.summary
            );
        }
        // A trace that points at a stage but is confounded.
        (Some(t), l) if t.stage.is_some() => {
            take(&mut v, t);
            match l {
                Some(l) if l.clean => {
                    // Controlled inputs are right: the confound is the symptom.
                    v.status = Status::Verdict;
                    v.stage = None;
                    v.alternatives.clear();
                    v.summary = format!(
                        "refuted: every rung right; the trace's reading ({}) is explained by {}",
                        t.summary,
                        t.confound
                            .as_ref()
                            .map_or("its confound".to_owned(), Confound::describe)
                    );
                }
                Some(l) if swap_is_the_kernels(t, l) => {
                    v.status = Status::Verdict;
                    v.alternatives.clear();
                    v.confound = None;
                    v.summary = format!(
                        "{}; seq-identity is right end to end, so A and B meet in the kernel's own orientation: the swap is the kernel's (it computes Dᵀ = B·Aᵀ), not a defect; the ladder: {}",
                        t.summary, l.summary
                    );
                }
                Some(l) => {
                    v.summary = format!("{}; the ladder: {}", t.summary, l.summary);
                    if let Some(order) = ladder_order(t, l) {
                        v.stage = Some(order.stage);
                        v.alternatives = order.alternatives;
                        if order.disjoint {
                            v.summary.push_str(
                                "; the ladder's controlled inputs lead: the trace's reading is confounded and names none of its stages",
                            );
                        }
                    }
                    v.missing.push(unconfounded(t));
                }
                None => {
                    v.summary = t.summary.clone();
                    v.missing.push(unconfounded(t));
                    v.missing.push("a ladder run of the reproducer".to_owned());
                }
            }
        }
        // No stage from the trace (clean on its rung) or no trace.
        (t, Some(l)) => {
            if l.clean {
                v.status = Status::Verdict;
                v.summary = match t {
                    Some(t) if t.clean => {
                        format!("refuted: {}; the trace shows nothing wrong", l.summary)
                    }
                    _ => format!("refuted: {}", l.summary),
                };
            } else if let Some(e) = t.and_then(|t| eliminate(t, l)) {
                v.stage = e.stage;
                v.alternatives = e.alternatives;
                v.factor = l.factor;
                v.status = e.status;
                v.confound = e.confound;
                v.summary = e.summary;
                v.missing.extend(e.missing);
            } else {
                take(&mut v, l);
                v.summary = l.summary.clone();
                v.missing.push(match t {
                    Some(_) => "a trace on a rung that fails (the traced rung shows nothing wrong)"
                        .to_owned(),
                    None => {
                        "a trace of the kernel on a rung that fails (kwb-instrument)".to_owned()
                    }
                });
            }
        }
        (Some(t), None) => {
            v.summary = t.summary.clone();
            v.missing.push("a ladder run of the reproducer (a trace on all-ones cannot see a permutation of equal values)".to_owned());
        }
    }
    v
}

/// Where the trace `t` shows its CTA's split-K share right (operands and accumulator
/// over one stretch of K, with the output wrong) and the ladder `l` ran a one-hot
/// rung along a k in that stretch whose output holds none of its answer: the share's
/// start, end and that k. Those products were computed right and never reached the
/// output, so what lost them follows the accumulator; another CTA's MMA cannot explain
/// an output with none of them.
fn share_lost(t: &Finding, l: &Finding) -> Option<(u64, u64, u64)> {
    if !matches!(t.confound, Some(Confound::SplitKPartial { .. })) {
        return None;
    }
    let (k0, k1) = t.cleared.as_ref()?.k?;
    let j = l.lost_k.iter().copied().find(|j| (k0..k1).contains(j))?;
    Some((k0, k1, j))
}

/// The stages of a confounded trace's draft in the order the ladder's evidence gives.
struct LadderOrder {
    stage: Stage,
    alternatives: Vec<Stage>,
    /// The trace and the ladder name no stage in common.
    disjoint: bool,
}

/// The order of a draft from a confounded trace `t` (one with a confound: its reading
/// cannot tell its stages apart, or may be the confound's doing) beside a failing
/// ladder `l`, whose rungs ran on controlled inputs. The stages both name come first,
/// in the ladder's order, then the trace's others: e.g. an accumulator that is wrong
/// with no operand probe (mma or operand-load) under a ladder whose ones rung is right
/// (the count of products is right, the values that meet are not) reads operand-load
/// first. Where they share no stage, the ladder's stages lead and the trace's follow.
/// None, the trace's order kept: the trace is not confounded (two traces that disagree
/// keep the stronger reading), or the ladder names no stage, or every stage as equals.
fn ladder_order(t: &Finding, l: &Finding) -> Option<LadderOrder> {
    t.confound.as_ref()?;
    let traced: Vec<Stage> = t.stage.iter().chain(&t.alternatives).copied().collect();
    let laddered: Vec<Stage> = l.stage.iter().chain(&l.alternatives).copied().collect();
    // A reading that names every stage led by the epilogue names them as equals (any
    // stage; a scale lost anywhere) and orders nothing; one led by another stage is
    // ordered (ones right: the loads first, an MMA handed the wrong registers last).
    if laddered.is_empty() || (laddered.len() >= 4 && l.stage == Some(Stage::Epilogue)) {
        return None;
    }
    let shared: Vec<Stage> = laddered
        .iter()
        .filter(|s| traced.contains(s))
        .copied()
        .collect();
    let disjoint = shared.is_empty();
    let lead = if disjoint { laddered } else { shared };
    let mut order = lead.clone();
    order.extend(traced.iter().filter(|s| !lead.contains(s)));
    let (&stage, rest) = order.split_first()?;
    Some(LadderOrder {
        stage,
        alternatives: rest.to_vec(),
        disjoint,
    })
}

/// The ladder's candidate stages less those a trace cleared.
struct Elimination {
    stage: Option<Stage>,
    alternatives: Vec<Stage>,
    status: Status,
    confound: Option<Confound>,
    summary: String,
    missing: Vec<String>,
}

/// The ladder's candidates (`l` failed) less the stages the trace `t` shows right in
/// its CTA. One stage left is a VERDICT only where the ladder's wrong outputs meet the
/// traced CTA's tile (or every tile is wrong) at the trace's own M x N: there the
/// operands and accumulator are known right and the output known wrong. Elsewhere
/// the narrowed candidates stay a draft that says which tile to trace.
fn eliminate(t: &Finding, l: &Finding) -> Option<Elimination> {
    let cleared = t.cleared.as_ref()?;
    let candidates: Vec<Stage> = l
        .stage
        .iter()
        .chain(&l.alternatives)
        .filter(|s| !cleared.stages.contains(s))
        .copied()
        .collect();
    let shown = cleared
        .stages
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let names = |stages: &[Stage]| {
        stages
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let located = match &l.wrong_tiles {
        Some(w) if (w.m as u64, w.n as u64) == (cleared.m, cleared.n) => {
            w.locate(cleared.region.as_ref())
        }
        Some(w) if w.all() => Located::Inside,
        _ => Located::Unknown,
    };
    let Some((&first, rest)) = candidates.split_first() else {
        return Some(Elimination {
            stage: l.stage,
            alternatives: l.alternatives.clone(),
            status: Status::Draft,
            confound: None,
            summary: format!(
                "{}; but the full trace shows {shown} right in its CTA: the ladder and the trace disagree (the reproducer may differ from the traced build)",
                l.summary
            ),
            missing: vec![
                "a trace on the rung that fails, of a CTA whose output is wrong".to_owned(),
            ],
        });
    };
    let mut e = Elimination {
        stage: Some(first),
        alternatives: rest.to_vec(),
        status: Status::Draft,
        confound: None,
        summary: String::new(),
        missing: Vec::new(),
    };
    match located {
        Located::Inside if rest.is_empty() => {
            e.status = Status::Verdict;
            e.summary = format!(
                "{} (by elimination: the ladder names {}; the full trace shows {shown} right in its CTA{}, where the output is wrong)",
                first.as_str(),
                names(&[l.stage.into_iter().collect(), l.alternatives.clone()].concat()),
                cleared
                    .region
                    .map_or(String::new(), |r| format!(" ({})", r.describe()))
            );
        }
        Located::Inside => {
            e.summary = format!(
                "{} (the ladder's candidates less {shown}, which the full trace shows right where the output is wrong)",
                names(&candidates)
            );
            e.missing
                .push("a trace that tells the remaining stages apart".to_owned());
        }
        Located::Outside { first: wrong } => {
            e.stage = l.stage;
            e.alternatives = l.alternatives.clone();
            e.confound = Some(Confound::ElsewhereThanTraced);
            e.summary = format!(
                "{}; the full trace shows {shown} right in its CTA ({}), which the ladder has right: the wrong tiles start at {}",
                l.summary,
                cleared.region.map_or("?".to_owned(), |r| l
                    .wrong_tiles
                    .as_ref()
                    .map_or(r, |w| w.extent(&r))
                    .describe()),
                wrong.describe()
            );
            e.missing.push(format!(
                "a full trace of the CTA that computes {} (kwb-instrument --cta X,Y,Z --full-tile)",
                wrong.describe()
            ));
        }
        Located::Unknown => {
            e.confound = Some(Confound::ElsewhereThanTraced);
            e.summary = format!(
                "{}? (the ladder's candidates less {shown}, which the full trace shows right in its CTA; but {})",
                names(&candidates),
                Confound::ElsewhereThanTraced.describe()
            );
            e.missing.push(
                "a full trace whose CTA tile is known to be wrong (its records name their tile origin, or the accumulator's coordinates are global)".to_owned(),
            );
        }
    }
    Some(e)
}

/// The trace read the operands swapped ([`Confound::SwappedRoles`]: right as a
/// swap-AB kernel's, or an MMA handed A and B the wrong way round) and the ladder,
/// naming the trace's stage, passed seq-identity: `A·Bᵀ` with B the identity is A
/// itself, and an MMA fed the wrong way round gives `Aᵀ` there, so a seq-identity right
/// end to end says the swap is the kernel's own and the trace's stage stands.
fn swap_is_the_kernels(t: &Finding, l: &Finding) -> bool {
    t.confound == Some(Confound::SwappedRoles)
        && l.stage == t.stage
        && l.passing.iter().any(|r| r == "seq-identity")
}

/// What resolves the confound of `t`.
fn unconfounded(t: &Finding) -> String {
    match &t.confound {
        Some(Confound::PaddingRows { .. }) => {
            "a trace with the row bound (kwb-instrument --rows '< BATCH')".to_owned()
        }
        Some(Confound::ZerosAmongEqual) => {
            "a trace with the row bound, or the ladder's closed forms on a shape without padding"
                .to_owned()
        }
        Some(Confound::OperandsNotProbed) => {
            "a trace with operand probes (kwb-instrument --probe operands,accumulator)".to_owned()
        }
        Some(Confound::LayerMixing { .. }) => {
            "a trace pinned to one instantiation (kwb-instrument --gate 'EXPR', e.g. REDUCTION_SIZE == 6144)".to_owned()
        }
        Some(Confound::AccumulatorNotRecorded) => {
            "a trace whose accumulator probes record (kwb-instrument --probe accumulator,final; kwb trace show lists them)".to_owned()
        }
        Some(Confound::ElsewhereThanTraced) => {
            "a trace of a CTA whose output is wrong (kwb-instrument --cta X,Y,Z), with the output check's wrong tiles".to_owned()
        }
        Some(Confound::SplitKPartial { .. }) => {
            "a trace of the step that sums the split-K partials (its output stores), or of a launch with one K split".to_owned()
        }
        Some(Confound::SwappedRoles) => {
            "a trace of the epilogue's stores (kwb-instrument --probe epilogue): a swap-AB kernel stores its accumulator's (m, n) at the output's (n, m)".to_owned()
        }
        Some(Confound::ProbeCoordinates) => {
            "a full trace of the shared tile the operand is loaded into (its raw order needs no coordinates)".to_owned()
        }
        None => "an unconfounded trace".to_owned(),
    }
}

/// `v` with the static descriptor check: where the evidence fits an operand (operand-load
/// or descriptor, as the stage or among those it cannot tell apart) and a map differs
/// from its operand's canonical map, the stage is the descriptor, the other readings
/// after it, with the map named. The status stays what the evidence made it; a
/// verdict of another stage, or a refutation, is left as it is (a map may differ on
/// purpose). With no evidence at all, the check alone makes a DRAFT.
pub fn with_descriptors(mut v: Verdict, issues: &[DescriptorIssue]) -> Verdict {
    if issues.is_empty() {
        return v;
    }
    let named: Vec<String> = issues.iter().map(DescriptorIssue::describe).collect();
    // No stage from the evidence and nothing refuted (no GPU, no trace): the static
    // check is all there is, a draft.
    if v.stage.is_none() && v.status == Status::Draft {
        v.stage = Some(Stage::Descriptor);
        v.alternatives.clear();
        v.summary = format!("descriptor (from the source alone): {}", named.join("; "));
        v.missing
            .push("a ladder run or a trace that shows the operand it loads wrong".to_owned());
        return v;
    }
    let operand_stage = |s: &Stage| matches!(s, Stage::OperandLoad | Stage::Descriptor);
    let operand =
        v.stage.as_ref().is_some_and(operand_stage) || v.alternatives.iter().any(operand_stage);
    if !operand {
        return v;
    }
    // The descriptor first; operand-load and whatever else the evidence fits after it.
    let mut alternatives = vec![Stage::OperandLoad];
    for s in v.stage.iter().chain(&v.alternatives) {
        if *s != Stage::Descriptor && !alternatives.contains(s) {
            alternatives.push(*s);
        }
    }
    // Evidence that already reads as the descriptor keeps its words; any other is
    // prefixed with the stage the map check puts first.
    let reading = if v.stage == Some(Stage::Descriptor) {
        v.summary.clone()
    } else {
        format!("descriptor: {}", v.summary)
    };
    v.stage = Some(Stage::Descriptor);
    v.alternatives = alternatives;
    v.summary = format!(
        "{reading}; the map differs from the canonical one: {}",
        named.join("; ")
    );
    v
}

/// `v` for a kernel that loads its operands through TMA maps kwb could not read as
/// the kernel received them (`unchecked`): an operand read wrong is then as much the
/// map's doing (a box, dims or strides that fetch other rows or zeros) as the load
/// code's, so a VERDICT that names operand-load with the descriptor beside it is a
/// DRAFT until the maps are checked. Maps that were checked and differ already made
/// the descriptor the stage ([`with_descriptors`]).
pub fn with_unchecked_maps(mut v: Verdict, unchecked: bool) -> Verdict {
    if unchecked
        && v.status == Status::Verdict
        && v.stage == Some(Stage::OperandLoad)
        && v.alternatives.contains(&Stage::Descriptor)
    {
        v.status = Status::Draft;
        v.summary = format!(
            "{}; the kernel loads through TMA maps kwb could not read as the kernel received them, so a wrong map reads the same",
            v.summary
        );
        v.missing.push(
            "the TMA maps of A and B as the kernel received them (kwb reads maps passed as kernel parameters), held to their canonical maps".to_owned(),
        );
    }
    v
}

/// `v` with the finding of a rung whose kernel faulted ([`crate::judge_fault`]): a
/// kernel that faults computed nothing the ladder could compare, so the faulting
/// access is the evidence. It takes the verdict's place unless the other evidence
/// already isolates a stage (a VERDICT naming one), and keeps its own status.
pub fn with_fault(mut v: Verdict, fault: Option<&Finding>) -> Verdict {
    let Some(f) = fault else {
        return v;
    };
    if v.status == Status::Verdict && v.stage.is_some() {
        return v;
    }
    v.status = f.status;
    v.stage = f.stage;
    v.alternatives = f.alternatives.clone();
    v.summary = f.summary.clone();
    v.confound = None;
    v.factor = None;
    v.k_tile = None;
    v.missing.clear();
    if f.stage.is_none() {
        v.missing.push(
            "the faulting access: compute-sanitizer (memcheck) on the rung that faults, the reproducer built with -lineinfo".to_owned(),
        );
    } else if f.status == Status::Draft && f.stage == Some(Stage::Descriptor) {
        v.missing.push(
            "each TMA map's box, swizzle and global address against the shared buffer it fills (its alignment and size)".to_owned(),
        );
    } else if f.status == Status::Draft {
        v.missing.push(
            "the bounds the faulting address was computed from (a K loop's count or the load's own index)".to_owned(),
        );
    }
    v
}

/// The one trace finding to reconcile from a trace on all-ones and a full trace on
/// integer inputs: the one that isolates a stage (a VERDICT), else the one that
/// points at a stage, unless that is a ones draft only for its CTA's place and the full
/// trace clears operands and accumulator (elimination needs it), else the full trace's
/// reading. Two VERDICTs that name stages
/// neither can tell apart from the other are a conflict: the full trace's finding,
/// as a DRAFT that names both.
pub fn combine_traces(ones: Option<Finding>, full: Option<Finding>) -> Option<Finding> {
    let isolates = |f: &Finding| f.status == Status::Verdict && f.stage.is_some();
    match (ones, full) {
        (None, f) | (f, None) => f,
        (Some(o), Some(mut s)) => {
            if isolates(&s) && isolates(&o) && !s.fits(o.stage) && !o.fits(s.stage) {
                s.status = Status::Draft;
                s.summary = format!(
                    "{}; but the trace on ones says {}: the two traces disagree",
                    s.summary, o.summary
                );
                Some(s)
            } else if isolates(&s) {
                Some(s)
            } else if isolates(&o) {
                Some(o)
            } else if o.stage.is_some()
                && s.stage.is_none()
                && (s.cleared.is_none() || o.confound != Some(Confound::ElsewhereThanTraced))
            {
                // The ones trace points somewhere (a confound it names, such as
                // padding, must reach the verdict): the pointer.
                Some(o)
            } else {
                // The ones trace is a draft only because its CTA's tile is not where
                // the output is wrong, and the full trace (another CTA) clears operands
                // and accumulator: with the ladder it can eliminate stages.
                Some(s)
            }
        }
    }
}
