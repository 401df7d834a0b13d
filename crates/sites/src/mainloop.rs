//! The K-tile loop: which loop around the MMAs (consumer) or the loads (producer)
//! runs over K, and whether the first K tile is peeled before it.

use std::collections::BTreeMap;

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fields::Field;

use crate::Confidence;
use crate::names::{LoopHeader, loop_header};

const LOOPS: [&str; 4] = [
    "for_statement",
    "while_statement",
    "do_statement",
    "for_range_loop",
];

/// A mainloop the map reports.
pub struct Mainloop<'t> {
    /// The loop statement.
    pub node: Node<'t>,
    /// How sure.
    pub confidence: Confidence,
    /// Why, and what it holds.
    pub note: String,
    /// Whether it issues MMAs (a consumer) rather than only loads (a producer).
    pub consumer: bool,
}

/// What the search starts from, within one function.
pub struct Seeds<'a, 't> {
    /// MMA issues (direct or through a wrapper).
    pub mma: &'a [Node<'t>],
    /// Calls of functions that run MMAs inside loops of their own, with the name.
    pub mma_callers: &'a [(Node<'t>, String)],
    /// Global→shared loads.
    pub loads: &'a [Node<'t>],
}

/// Finds the mainloops of the function `function`.
pub fn find<'t>(function: Node<'t>, seeds: &Seeds<'_, 't>, parsed: &Parsed) -> Vec<Mainloop<'t>> {
    let mut tiles: BTreeMap<usize, Mainloop<'t>> = BTreeMap::new();
    let mut blocks: Vec<Node<'t>> = Vec::new();
    let mut others: Vec<Node<'t>> = Vec::new();
    let mut loose: Vec<Node<'t>> = Vec::new();
    for &mma in seeds.mma {
        let loops = enclosing_loops(mma, function, parsed);
        if let Some(&(tile, _)) = loops.iter().rev().find(|(_, h)| *h == LoopHeader::KTile) {
            // A k loop that loads nothing, inside a loop that loads the tiles, is the
            // inner loop of classic shared-memory tiling; the loading loop runs over K.
            let loading = loops
                .iter()
                .filter(|(l, h)| {
                    *h != LoopHeader::Excluded && contains(*l, tile) && l.id() != tile.id()
                })
                .find(|(l, _)| {
                    // Loads in the same branch as the k loop: a warp-specialized
                    // kernel's producer branch loads inside the same persistent loop
                    // but is not this tile's loading step.
                    !seeds.loads.iter().any(|x| contains(tile, *x))
                        && seeds
                            .loads
                            .iter()
                            .any(|x| contains(*l, *x) && same_branch(*x, tile))
                });
            let (node, note) = match loading {
                Some(&(outer, _)) => (
                    outer,
                    format!(
                        "loop over K tiles: loads each tile, then runs the k loop at line {}",
                        tile.start_position().row + 1
                    ),
                ),
                None => (tile, "loop over K tiles around the MMA".to_owned()),
            };
            tiles.entry(node.start_byte()).or_insert(Mainloop {
                node,
                confidence: Confidence::High,
                note,
                consumer: true,
            });
        } else if let Some(&(block, _)) = loops.iter().rev().find(|(_, h)| *h == LoopHeader::KBlock)
        {
            blocks.push(block);
        } else if let Some(&(other, _)) = loops.iter().rev().find(|(_, h)| *h == LoopHeader::Other)
        {
            others.push(other);
        } else {
            loose.push(mma);
        }
    }
    for (call, name) in seeds.mma_callers {
        let loops = enclosing_loops(*call, function, parsed);
        if let Some(&(tile, _)) = loops.iter().rev().find(|(_, h)| *h == LoopHeader::KTile) {
            tiles.entry(tile.start_byte()).or_insert(Mainloop {
                node: tile,
                confidence: Confidence::Medium,
                note: format!("loop over K tiles; calls `{name}`, which issues the MMAs"),
                consumer: true,
            });
        }
    }
    // A k-block loop or a lone MMA before a K-tile loop is the peeled first K tile;
    // after one, the peeled last K tile.
    let mut peeled = Vec::new();
    for node in blocks.iter().chain(&loose) {
        let line = node.start_position().row + 1;
        let later = tiles
            .values()
            .find(|t| t.node.start_byte() >= node.end_byte());
        let earlier = tiles
            .values()
            .rev()
            .find(|t| t.node.end_byte() <= node.start_byte());
        match (later, earlier) {
            (Some(tile), _) => peeled.push((
                tile.node.start_byte(),
                format!("; first K tile peeled before the loop (line {line})"),
            )),
            (None, Some(tile)) => peeled.push((
                tile.node.start_byte(),
                format!("; last K tile peeled after the loop (line {line})"),
            )),
            (None, None) if LOOPS.contains(&node.kind()) => {
                // A k-block loop inside a loop over the pipeline's stages (DeepGEMM's
                // `for s < kNumInnerStages { wait; for k < BLOCK_K / WGMMA::K … }`):
                // the stage loop walks the K tiles.
                let stages = enclosing_loops(*node, function, parsed)
                    .into_iter()
                    .rev()
                    .find(|(l, h)| *h == LoopHeader::Other && over_stages(header(*l, parsed)));
                let (loop_node, note) = match stages {
                    Some((outer, _)) => (
                        outer,
                        format!(
                            "loop over the pipeline's stages, one K tile each, around the k-block loop at line {line}"
                        ),
                    ),
                    None => (
                        *node,
                        "loop over k blocks; no K-tile loop encloses it in this function"
                            .to_owned(),
                    ),
                };
                tiles.entry(loop_node.start_byte()).or_insert(Mainloop {
                    node: loop_node,
                    confidence: Confidence::Medium,
                    note,
                    consumer: true,
                });
            }
            (None, None) => {}
        }
    }
    for (tile, note) in peeled {
        if let Some(t) = tiles.get_mut(&tile)
            && !t.note.contains(&note)
        {
            t.note.push_str(&note);
        }
    }
    for other in others {
        if tiles
            .values()
            .any(|t| contains(t.node, other) || contains(other, t.node))
            || over_fragments(header(other, parsed))
        {
            continue;
        }
        tiles.entry(other.start_byte()).or_insert(Mainloop {
            node: other,
            confidence: Confidence::Low,
            note: "encloses the MMA; its header names no K variable".to_owned(),
            consumer: true,
        });
    }
    for &load in seeds.loads {
        let loops = enclosing_loops(load, function, parsed);
        // A producer walks K by tiles, or by the pipeline's stages when a caller holds
        // the loop over K (DeepGEMM's `for s < kNumInnerStages` inside the step it
        // hands to `launch_k_iterations`).
        let by_tiles = loops.iter().rev().find(|(_, h)| *h == LoopHeader::KTile);
        let by_stages = || {
            loops.iter().rev().find(|(l, h)| {
                let text = header(*l, parsed);
                // `stage < kStages - 1`: the pipeline's prologue, not a walk over K.
                *h == LoopHeader::Other
                    && over_stages(text)
                    && !text.split_whitespace().collect::<String>().contains("-1")
            })
        };
        let Some(&(tile, _)) = by_tiles.or_else(by_stages) else {
            continue;
        };
        if tiles
            .values()
            .any(|t| contains(t.node, tile) || contains(tile, t.node))
        {
            continue;
        }
        // Loads that run in sequence before the consumer loop are its prologue; a
        // producer loop in another branch (a warp-specialized producer) is not.
        let prologue = tiles.values().any(|t| {
            t.consumer && t.node.start_byte() >= tile.end_byte() && sequential(tile, t.node)
        });
        if prologue {
            continue;
        }
        tiles.insert(
            tile.start_byte(),
            Mainloop {
                node: tile,
                confidence: Confidence::High,
                note: "producer loop over K tiles: issues the global→shared loads".to_owned(),
                consumer: false,
            },
        );
    }
    tiles.into_values().collect()
}

/// Loops over K tiles that hand each tile to a callable the function receives
/// (`for (k_iter = 0; k_iter < kNumIterations; ++k_iter) func(k_iter, …)`): the K loop
/// of a kernel whose step (the MMAs or the loads) lives in a lambda its caller passes.
pub fn callback_loops<'t>(
    function: Node<'t>,
    parsed: &Parsed,
    is_parameter: &dyn Fn(&str) -> bool,
) -> Vec<Mainloop<'t>> {
    let mut out = Vec::new();
    let mut stack = vec![function];
    while let Some(node) = stack.pop() {
        if LOOPS.contains(&node.kind()) && loop_header(header(node, parsed)) == LoopHeader::KTile {
            let body = node.field("body");
            let mut calls = Vec::new();
            if let Some(body) = body {
                collect_calls(body, &mut calls);
            }
            let callee = calls.iter().find_map(|c| {
                let f = c.field("function")?;
                let name = &parsed.masked[f.byte_range()];
                (f.kind() == "identifier" && is_parameter(name)).then(|| name.to_owned())
            });
            if let Some(callee) = callee {
                out.push(Mainloop {
                    node,
                    confidence: Confidence::Low,
                    note: format!(
                        "loop over K tiles: hands each tile to `{callee}`, the step its caller passes"
                    ),
                    consumer: false,
                });
                continue;
            }
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    out
}

fn collect_calls<'t>(node: Node<'t>, out: &mut Vec<Node<'t>>) {
    if node.kind() == "call_expression" {
        out.push(node);
    }
    if node.kind() == "lambda_expression" {
        return;
    }
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        collect_calls(child, out);
    }
}

/// Loops around `node` inside `function`, innermost first, with their header class.
fn enclosing_loops<'t>(
    node: Node<'t>,
    function: Node<'t>,
    parsed: &Parsed,
) -> Vec<(Node<'t>, LoopHeader)> {
    let mut out = Vec::new();
    let mut current = node.parent();
    while let Some(n) = current {
        if n.id() == function.id() {
            break;
        }
        if LOOPS.contains(&n.kind()) {
            out.push((n, loop_header(header(n, parsed))));
        }
        current = n.parent();
    }
    out
}

/// The header of a loop: everything before its body (for `do`, the condition).
pub fn header<'p>(node: Node<'_>, parsed: &'p Parsed) -> &'p str {
    if node.kind() == "do_statement" {
        return node
            .field("condition")
            .map_or("", |c| &parsed.masked[c.byte_range()]);
    }
    let end = node
        .field("body")
        .map_or(node.end_byte(), |b| b.start_byte());
    &parsed.masked[node.start_byte()..end]
}

/// Whether `outer` contains `inner` (or is it).
pub fn contains(outer: Node<'_>, inner: Node<'_>) -> bool {
    outer.start_byte() <= inner.start_byte() && inner.end_byte() <= outer.end_byte()
}

/// Whether no loop between `node` and `function` runs over K tiles (k-block and M/N
/// fragment loops are fine): the function is one MMA step, not a GEMM with a K
/// mainloop of its own.
pub fn no_k_tile_loop(node: Node<'_>, function: Node<'_>, parsed: &Parsed) -> bool {
    enclosing_loops(node, function, parsed)
        .iter()
        .all(|(_, header)| *header != LoopHeader::KTile)
}

/// Whether a loop header walks the M/N fragments of one MMA step (`m <
/// MmaIterations::kRow`, `mma_n < MMA_N`): not a loop over K. (An MMA prologue loop
/// does walk K tiles, and stays: the trace counts its tiles.)
fn over_fragments(header: &str) -> bool {
    crate::names::identifiers(header).any(|i| {
        matches!(
            i.to_ascii_lowercase().as_str(),
            "m" | "n" | "mma_m" | "mma_n" | "krow" | "kcolumn"
        )
    })
}

/// Whether a loop header counts the pipeline's stages (`s < kNumInnerStages`,
/// `stage < num_stages`).
fn over_stages(header: &str) -> bool {
    crate::names::identifiers(header).any(|i| {
        let lower = i.to_ascii_lowercase();
        lower.ends_with("stages") || lower == "stage_count"
    })
}

/// Whether neither of two statements sits in a branch the other does not: the
/// lowest block holding both reaches each without an `if` or `switch`.
fn same_branch(a: Node<'_>, b: Node<'_>) -> bool {
    sequential(a, b) && sequential(b, a)
}

/// Whether control flows from `first` to `later` without choosing a branch: no `if`
/// or `switch` stands between `first` and their lowest common ancestor, which is a
/// block.
fn sequential(first: Node<'_>, later: Node<'_>) -> bool {
    let mut current = first.parent();
    while let Some(n) = current {
        if contains(n, later) {
            return n.kind() == "compound_statement";
        }
        if matches!(
            n.kind(),
            "if_statement" | "switch_statement" | "case_statement"
        ) {
            return false;
        }
        current = n.parent();
    }
    false
}
