//! Accumulators a caller hands down: CUTLASS 2.x's threadblock `operator()(int
//! gemm_k_iterations, FragmentC &accum, …)` passes `accum` to `gemm_iters`, whose MMA
//! accumulates into its parameter; a hand-written kernel declares `float acc[8][4]`
//! and calls `mainloop(acc, …)`. The name the caller passes at the position of the
//! callee's accumulator parameter is the caller's accumulator. Followed up the file's
//! call graph a few levels.

use std::collections::{BTreeMap, BTreeSet};

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fields::Field;

use super::{Confidence, Found, Scope, SiteKind};
use crate::functions::{Function, function_declarator};

/// How many levels of callers are followed.
const LEVELS: usize = 3;

/// A function that accumulates into one of its parameters.
struct Taker {
    /// Its index among the file's functions.
    function: usize,
    /// The parameter's position, and how many parameters the function takes.
    position: usize,
    count: usize,
    /// The parameter's name.
    parameter: String,
}

/// Adds, to each function that passes a name where a same-file callee takes its
/// accumulator as a parameter, that name's declaration as an accumulator site.
/// `calls` holds each function's calls with the callee's last name component.
pub(super) fn add_passed_accumulators<'t, 's>(
    parsed: &Parsed,
    functions: &[Function<'t>],
    calls: &[Vec<(Node<'t>, String)>],
    scope: &dyn Fn(usize) -> &'s Scope<'t>,
    derived: &mut [Vec<Found<'t>>],
) where
    't: 's,
{
    for _ in 0..LEVELS {
        let mut takers: Vec<Taker> = Vec::new();
        for (j, sites) in derived.iter().enumerate() {
            let Some(parameters) = parameters(&functions[j]) else {
                continue;
            };
            for site in sites.iter().filter(|s| s.kind == SiteKind::Accumulator) {
                if let Some(p) = parameters.iter().position(|&q| q.id() == site.node.id()) {
                    let name = site
                        .note
                        .as_deref()
                        .and_then(|n| n.split('`').nth(1))
                        .unwrap_or_default();
                    takers.push(Taker {
                        function: j,
                        position: p,
                        count: parameters.len(),
                        parameter: name.to_owned(),
                    });
                }
            }
        }
        if takers.is_empty() {
            return;
        }
        // Takers by their simple name: a header of thousands of MMA atoms (CuTe's
        // `mma_sm90_gmma_ext.hpp`) has thousands of takers, each call looks up its own.
        let mut by_name: BTreeMap<&str, Vec<&Taker>> = BTreeMap::new();
        for taker in &takers {
            by_name
                .entry(functions[taker.function].simple_name.as_str())
                .or_default()
                .push(taker);
        }
        let mut added = false;
        for (i, function_calls) in calls.iter().enumerate() {
            let mut have: BTreeSet<usize> = derived[i]
                .iter()
                .filter(|f| f.kind == SiteKind::Accumulator)
                .map(|f| f.node.id())
                .collect();
            for (call, callee) in function_calls {
                let Some(candidates) = by_name.get(callee.as_str()) else {
                    continue;
                };
                let Some(arguments) = call.field("arguments") else {
                    continue;
                };
                let given: Vec<Node<'t>> = (0..arguments.named_child_count())
                    .filter_map(|k| arguments.named_child(k))
                    .filter(|a| a.kind() != "comment")
                    .collect();
                for taker in candidates {
                    if taker.function == i {
                        continue;
                    }
                    // Overloads: as many arguments as parameters, or fewer where the
                    // rest have defaults.
                    if given.len() > taker.count || given.len() <= taker.position {
                        continue;
                    }
                    let argument = crate::fma::strip(given[taker.position]);
                    if argument.kind() != "identifier" {
                        continue;
                    }
                    let name = &parsed.masked[argument.byte_range()];
                    let Some(decl) = scope(i).lookup(name, argument.start_byte()) else {
                        continue;
                    };
                    if !have.insert(decl.node.id()) {
                        continue;
                    }
                    let callee = &functions[taker.function];
                    let line = callee.node.start_position().row + 1;
                    derived[i].push(Found {
                        kind: SiteKind::Accumulator,
                        node: decl.node,
                        confidence: Confidence::Medium,
                        note: Some(format!(
                            "the accumulator `{name}`: passed to `{}` (line {line}), which accumulates into its parameter `{}`",
                            callee.simple_name, taker.parameter
                        )),
                    });
                    added = true;
                }
            }
        }
        if !added {
            return;
        }
    }
}

/// A definition's parameter declarations, in order.
fn parameters<'t>(function: &Function<'t>) -> Option<Vec<Node<'t>>> {
    let list = function_declarator(function.node)?.field("parameters")?;
    Some(
        (0..list.named_child_count())
            .filter_map(|k| list.named_child(k))
            .filter(|p| p.kind().ends_with("parameter_declaration"))
            .collect(),
    )
}
