//! Which site a source line belongs to. A sanitizer names the line of a faulting
//! access; the stage is that of the site holding the line. A line no site holds (the
//! `cp.async` inside a load helper) is followed up the calls of the function that
//! holds it, to the call that is a site (`load_tile_async(sA + …)`, an operand load).
//!
//! Invariant: only kinds that belong to one stage answer (loads, operands, the MMA,
//! the accumulator, the epilogue, a TMA descriptor); a mainloop or a barrier spans
//! or orders every stage and never does, and a line of a function whose sites span
//! several stages is not followed to its callers (a kernel's barrier is no launch's). A line whose calls lead to sites of
//! different kinds answers every kind found, and the caller decides.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fields::Field;

use crate::functions::{self, Function};
use crate::index::Index;
use crate::names::callee_name;
use crate::{KernelMap, SiteKind};

/// How many calls up a line is followed.
const MAX_CALLS: usize = 4;

/// A site that holds a line, directly or through calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineSite {
    pub kind: SiteKind,
    /// The site's first line (1-based).
    pub line: usize,
    /// The site's source line, trimmed.
    pub text: String,
    /// The calls followed from the line to the site, innermost first: the function
    /// called and the line of its call.
    pub via: Vec<(String, usize)>,
}

/// The sites that hold `line` (1-based) of the file `map` was built from: the sites of
/// stage-bearing kinds whose lines hold it, else those holding a call of the function
/// that holds it (up to [`MAX_CALLS`] calls up). Empty when none does. One entry per
/// kind, the nearest first.
pub fn sites_of_line(parsed: &Parsed, map: &KernelMap, line: usize) -> Vec<LineSite> {
    let index = Index::build(&parsed.tree, &[]);
    let functions = functions::collect(&index, parsed);
    let mut found: Vec<LineSite> = Vec::new();
    let mut frontier: Vec<(usize, Vec<(String, usize)>)> = vec![(line, Vec::new())];
    let mut seen_functions: Vec<usize> = Vec::new();
    for _ in 0..=MAX_CALLS {
        let mut next = Vec::new();
        for (at, via) in frontier {
            let direct = holding(map, at);
            if !direct.is_empty() {
                for (kind, site_line, text) in direct {
                    if !found.iter().any(|f| f.kind == kind) {
                        found.push(LineSite {
                            kind,
                            line: site_line,
                            text,
                            via: via.clone(),
                        });
                    }
                }
                continue;
            }
            // A line of a function whose sites span several stages (a kernel's
            // barrier or loop header) is that function's own: no stage. A helper of
            // one stage (a load wrapper) or of none is followed to its callers.
            if map
                .kernels
                .iter()
                .any(|k| k.line <= at && at <= k.end_line && stages_of(k) > 1)
            {
                continue;
            }
            let Some(f) = innermost_function(&functions, at) else {
                continue;
            };
            if seen_functions.contains(&f) {
                continue;
            }
            seen_functions.push(f);
            let name = &functions[f].simple_name;
            if name.is_empty() {
                continue;
            }
            for (g, held) in index.held.iter().enumerate() {
                if g == f {
                    continue;
                }
                for call in &held.calls {
                    if calls(*call, name, parsed) {
                        let mut via = via.clone();
                        via.push((name.clone(), call.start_position().row + 1));
                        next.push((call.start_position().row + 1, via));
                    }
                }
            }
        }
        if !found.is_empty() || next.is_empty() {
            break;
        }
        frontier = next;
    }
    found
}

/// The stage-bearing sites whose lines hold `line`, in order of precedence: a TMA
/// descriptor, a load, the epilogue, an operand, the MMA, the accumulator.
fn holding(map: &KernelMap, line: usize) -> Vec<(SiteKind, usize, String)> {
    const ORDER: [SiteKind; 6] = [
        SiteKind::TmaDescriptor,
        SiteKind::OperandLoad,
        SiteKind::Epilogue,
        SiteKind::Operand,
        SiteKind::Mma,
        SiteKind::Accumulator,
    ];
    let mut out: Vec<(SiteKind, usize, String)> = map
        .kernels
        .iter()
        .filter(|k| k.line <= line && line <= k.end_line)
        .flat_map(|k| &k.sites)
        .filter(|s| ORDER.contains(&s.kind) && s.line <= line && line <= s.end_line)
        .map(|s| (s.kind, s.line, s.text.clone()))
        .collect();
    out.sort_by_key(|(kind, ..)| ORDER.iter().position(|k| k == kind));
    out.dedup_by_key(|(kind, ..)| *kind);
    out
}

/// How many stages the sites of `kernel` belong to (an operand with its loads, the
/// accumulator with the MMA).
fn stages_of(kernel: &crate::Kernel) -> usize {
    let mut stages: Vec<SiteKind> = kernel
        .sites
        .iter()
        .filter_map(|s| match s.kind {
            SiteKind::Operand | SiteKind::OperandLoad => Some(SiteKind::OperandLoad),
            SiteKind::Accumulator | SiteKind::Mma => Some(SiteKind::Mma),
            SiteKind::Epilogue | SiteKind::TmaDescriptor => Some(s.kind),
            SiteKind::Mainloop | SiteKind::Sync => None,
        })
        .collect();
    stages.sort_by_key(|k| k.name());
    stages.dedup();
    stages.len()
}

/// The innermost function definition holding `line`.
fn innermost_function(functions: &[Function<'_>], line: usize) -> Option<usize> {
    functions
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            let (first, last) = (
                f.node.start_position().row + 1,
                f.node.end_position().row + 1,
            );
            first <= line && line <= last
        })
        .min_by_key(|(_, f)| f.node.end_byte() - f.node.start_byte())
        .map(|(i, _)| i)
}

/// Whether `call` (a `call_expression`) calls a function named `name`.
fn calls(call: Node<'_>, name: &str, parsed: &Parsed) -> bool {
    call.field("function")
        .is_some_and(|f| callee_name(f, &parsed.masked) == name)
}
