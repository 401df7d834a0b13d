//! Accumulator probes: after each K tile of a consumer mainloop (with a counter
//! declared before the loop) and once where the accumulator is complete — after the
//! loop, a peeled last K tile, or a fold of partial accumulator sets. Either kind may
//! be left out; the K-tile counter is kept whenever operand probes need it.

use crate::tile::TILE;
use std::ops::Range;

use kwb_sites::{Kernel, Site, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::cute;
use crate::emit::Emitter;
use crate::fragments::{self, Role};
use crate::nodes::{declaration_point, enclosing_function, is_integer_scalar, line_of, names};
use crate::plan::{ProbeInfo, consumer_loop};

/// A K-tile counter: the mainloop's bytes and the counter's name.
pub(crate) type Counter = (Range<usize>, String);

/// What to insert at each consumer mainloop.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Want {
    /// The accumulator after each K tile.
    pub per_k_tile: bool,
    /// The accumulator where it is complete.
    pub complete: bool,
    /// The K-tile counter, for operand probes in the loop, even without a per-K-tile
    /// probe.
    pub counter: bool,
}

/// The block a statement is in, through any preprocessor conditional around it (a
/// mainloop inside `#if 1 … #endif`, as the CuTe tutorials write it).
fn enclosing_block(statement: Node<'_>) -> Option<Node<'_>> {
    std::iter::successors(statement.parent(), |p| p.parent())
        .find(|p| !p.kind().starts_with("preproc_"))
        .filter(|p| p.kind() == "compound_statement")
}

/// Inserts the accumulator probes of `kernel`; returns the K-tile counters it
/// declared, for operand probes inside the same loops.
pub(crate) fn probe(
    em: &mut Emitter<'_>,
    kernel: &Kernel,
    gate: &str,
    rows: Option<&str>,
    want: Want,
) -> Vec<Counter> {
    let mut counters = Vec::new();
    let parsed = em.parsed;
    let root = parsed.tree.root_node();
    // An object that wraps the accumulator (`GmmaFP8Accumulation accumulation(accum,
    // …)`) stands for the accumulator it holds; its own name is kept as the wrapper.
    let mut wrappers: Vec<String> = Vec::new();
    let accumulators: Vec<(String, Node<'_>)> = kernel
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Accumulator)
        .filter_map(|s| {
            let name = declared_name(root, s, parsed)?;
            let decl = root.descendant_for_byte_range(s.range.start, s.range.end)?;
            Some(match held_accumulator(parsed, decl, &name) {
                Some(held) => {
                    wrappers.push(name);
                    (held, decl)
                }
                None => (name, decl),
            })
        })
        .collect();
    let probing = want.per_k_tile || want.complete;
    // An integer scalar is an index the map took for the accumulator, not one.
    let (accumulators, indices): (Vec<_>, Vec<_>) = accumulators
        .into_iter()
        .partition(|(_, decl)| !is_integer_scalar(parsed, *decl));
    for (name, _) in indices.iter().filter(|_| probing) {
        em.note(format!(
            "{}: `{name}` is an integer scalar, not an accumulator; not probed",
            kernel.name
        ));
    }
    let Some((acc, _)) = accumulators.first() else {
        if probing && parsed.source.contains("tcgen05.mma") {
            em.note(format!(
                "{}: the accumulator is in tensor memory (UMMA): probed where the epilogue loads it (tcgen05.ld), not per K tile",
                kernel.name
            ));
        } else if probing {
            em.note(format!(
                "{}: no accumulator in the kernel map; no accumulator probe",
                kernel.name
            ));
        }
        return counters;
    };
    let wait = completion_wait(parsed, kernel);
    if let Some((_, why)) = wait.as_ref().filter(|_| probing) {
        em.note(format!("{}: {why}", kernel.name));
    }
    let wait = wait.map_or(String::new(), |(code, _)| code);
    let layout = em.layouts.accumulator(&kernel.name);
    let layout_coords =
        fragments::probe_args(layout, Role::Accumulator, rows, em.tile_dims.of(acc));
    if probing && rows.is_some() && layout.is_none() {
        em.note(format!(
            "{}: the layout of the accumulator `{acc}` is not one kwb knows; --rows does not filter it",
            kernel.name
        ));
    }
    // Consecutive consumer mainloops of one block (CUTLASS's prologue-MMA loop, then
    // its mainloop) are one K sequence: one counter, one final probe after the last.
    let loops: Vec<(Node<'_>, &Site)> = kernel
        .sites
        .iter()
        .filter(|s| consumer_loop(s))
        .filter_map(|s| {
            Some((
                root.descendant_for_byte_range(s.range.start, s.range.end)?,
                s,
            ))
        })
        .collect();
    let mut counter_of_block: Vec<(usize, String)> = Vec::new();
    for (i, (node, site)) in loops.iter().enumerate() {
        let node = *node;
        // The accumulator must be declared where the probes go: a parameter of the
        // function, or a declaration before the loop in a block around it.
        let Some(acc) = accumulators
            .iter()
            .find(|(_, decl)| in_scope(*decl, node))
            .map(|(name, _)| name.as_str())
        else {
            em.note(format!(
                "{}: the accumulator `{acc}` is not in scope at the mainloop at line {}; no accumulator probe there",
                kernel.name, site.line
            ));
            continue;
        };
        let Some(body) = node
            .child_by_field_name("body")
            .filter(|b| b.kind() == "compound_statement")
        else {
            em.note(format!(
                "{}: the mainloop at line {} has no braces; no per-K-tile probe",
                kernel.name, site.line
            ));
            continue;
        };
        // Without a fragment layout kwb knows, a CuTe accumulator's coordinates come
        // from the partition that made it.
        let coords = if layout_coords.is_empty() {
            enclosing_function(node)
                .and_then(|f| cute::coords(parsed, f, acc, node.start_byte(), 'C'))
                .map_or(String::new(), |c| {
                    let bound = rows.map_or("kwb::all_rows".to_owned(), |r| format!("({r})"));
                    format!(", {bound}, kwb::Axis::M, {c}")
                })
        } else {
            layout_coords.clone()
        };
        let block = enclosing_block(node).map(|p| p.id());
        let last_of_block = loops[i + 1..]
            .iter()
            .all(|(other, _)| enclosing_block(*other).map(|p| p.id()) != block || block.is_none());
        let id = em.next_id();
        let (k_tile, bump) = match block.filter(|_| want.per_k_tile || want.counter) {
            Some(b) => {
                let counter = match counter_of_block.iter().find(|(x, _)| *x == b) {
                    Some((_, c)) => c.clone(),
                    None => {
                        let counter = format!("kwb_kt_{id}");
                        // An MMA before the first loop (a peeled first K tile) is tile 0.
                        let first = u32::from(peeled_before(kernel, node));
                        em.insert(
                            declaration_point(parsed, node),
                            &format!("[[maybe_unused]] int {counter} = {first}; "),
                        );
                        counter_of_block.push((b, counter.clone()));
                        counter
                    }
                };
                counters.push((node.byte_range(), counter.clone()));
                (counter.clone(), format!(" ++{counter};"))
            }
            None => ("-1".to_owned(), String::new()),
        };
        if want.per_k_tile {
            let id = em.next_id();
            let site_arg = em.site(id, "Accumulator");
            em.gate_before(
                body.end_byte() - 1,
                gate,
                &format!(
                    "{wait}kwb::probe({site_arg}, kwb::Kind::Accumulator, kwb_tag, {k_tile}, {TILE}, {acc}{coords});{bump}"
                ),
            );
            em.record(ProbeInfo {
                id,
                kernel: kernel.name.clone(),
                what: format!("accumulator `{acc}` after each K tile"),
                line: body.end_position().row + 1,
                text: site.text.clone(),
            });
        } else if want.counter && !bump.is_empty() {
            em.gate_before(body.end_byte() - 1, gate, bump.trim_start());
        }
        if !last_of_block || !want.complete {
            continue;
        }
        let (after, folded) = final_point(parsed, kernel, node, acc, &wrappers);
        // After a fold of partial sets into one (`acc[0][j] += acc[s][j]`), the set it
        // folds into is what the epilogue gets: the probe records that set alone, so
        // the others (partial sums by design) do not read as a wrong accumulator.
        let consumed = folded.and_then(|set| {
            // The set's own dimensions are the array's less the leading one; a fold
            // along a dimension that picks an MMA tile is no fold of sets.
            let inner = |d: Option<usize>| match d {
                Some(d) => d.checked_sub(1).map(Some),
                None => Some(None),
            };
            let dims = em.tile_dims.of(acc);
            let dims = fragments::Dims {
                m: inner(dims.m)?,
                n: inner(dims.n)?,
            };
            let coords = if !layout_coords.is_empty() {
                fragments::probe_args(layout, Role::Accumulator, rows, dims)
            } else if coords.is_empty() {
                String::new()
            } else {
                // CuTe coordinates describe the whole tensor: keep it whole.
                return None;
            };
            Some((format!("{acc}[{set}]"), coords))
        });
        let (probed, probed_coords, what) = match &consumed {
            Some((slice, c)) => (
                slice.as_str(),
                c.as_str(),
                format!("accumulator set `{slice}` after the fold of `{acc}`"),
            ),
            None => (
                acc,
                coords.as_str(),
                format!("accumulator `{acc}` after the mainloop"),
            ),
        };
        let id = em.next_id();
        let site_arg = em.site(id, "Accumulator");
        em.gate_after(
            after,
            gate,
            &format!(
                "{wait}kwb::probe({site_arg}, kwb::Kind::Accumulator, kwb_tag, -1, {TILE}, {probed}{probed_coords});"
            ),
        );
        em.record(ProbeInfo {
            id,
            kernel: kernel.name.clone(),
            what,
            line: line_of(parsed, after),
            text: site.text.clone(),
        });
    }
    counters
}

/// Whether the declaration `decl` is visible at `place` (and after it, in the same
/// block): a parameter of the function around `place`, or a declaration that ends
/// before `place` in a block that holds it.
fn in_scope(decl: Node<'_>, place: Node<'_>) -> bool {
    let mut ancestor = decl.parent();
    while let Some(a) = ancestor {
        match a.kind() {
            "parameter_list" => {
                let mut f = a.parent();
                while let Some(x) = f {
                    if x.kind() == "function_definition" {
                        return x.start_byte() <= place.start_byte()
                            && place.end_byte() <= x.end_byte();
                    }
                    f = x.parent();
                }
                return false;
            }
            "compound_statement" => {
                return decl.end_byte() <= place.start_byte()
                    && a.start_byte() <= place.start_byte()
                    && place.end_byte() <= a.end_byte();
            }
            _ => ancestor = a.parent(),
        }
    }
    false
}

/// Whether an MMA is issued in the mainloop's block before it (a peeled first K
/// tile), so the loop's first iteration is K tile 1.
fn peeled_before(kernel: &Kernel, mainloop: Node<'_>) -> bool {
    let Some(block) = mainloop.parent() else {
        return false;
    };
    kernel.sites.iter().any(|s| {
        s.kind == SiteKind::Mma
            && block.start_byte() <= s.range.start
            && s.range.end <= mainloop.start_byte()
    })
}

/// Where the accumulator is complete: the end of the mainloop, or of the last
/// statement after it that still accumulates — one issuing an MMA (a peeled last K
/// tile) or one folding partial accumulators into it (`acc[0][i] += acc[s][i]`).
/// Scaling (`acc[i] *= alpha`) is the epilogue's and does not count. With it, the
/// leading index of the set every fold writes (`0`), when they all write one set
/// named by an integer literal. A statement after the mainloop that still works on an
/// object wrapping the accumulator (`accumulation.promote_residue_if_needed()`, which
/// adds its last partial sum into `accum`) counts too.
fn final_point(
    parsed: &Parsed,
    kernel: &Kernel,
    mainloop: Node<'_>,
    acc: &str,
    wrappers: &[String],
) -> (usize, Option<String>) {
    let mut end = mainloop.end_byte();
    for site in kernel.sites.iter().filter(|s| s.kind == SiteKind::Mma) {
        if site.range.start >= end {
            end = statement_end(mainloop, site.range.end).unwrap_or(end);
        }
    }
    let Some(parent) = mainloop.parent() else {
        return (end, None);
    };
    let mut cursor = parent.walk();
    let mut targets: Vec<Option<String>> = Vec::new();
    for sibling in parent.named_children(&mut cursor) {
        if sibling.start_byte() < mainloop.end_byte() {
            continue;
        }
        let folds = folds_into(parsed, sibling, acc);
        let wraps = wrappers
            .iter()
            .any(|w| names(&parsed.masked[sibling.byte_range()], w));
        if !folds.is_empty() || wraps {
            end = end.max(sibling.end_byte());
        }
        targets.extend(folds);
    }
    let set = match targets.split_first() {
        Some((first @ Some(_), rest)) if rest.iter().all(|t| t == first) => first.clone(),
        _ => None,
    };
    (end, set)
}

/// The accumulations into `acc` from `acc` itself in `node` (`acc[0][j] += acc[s][j]`,
/// `acc = acc + other`): for each, the integer literal that leads the written
/// element's subscripts (`0`), or `None` when it has none.
fn folds_into(parsed: &Parsed, node: Node<'_>, acc: &str) -> Vec<Option<String>> {
    let mut found = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == "assignment_expression"
            && let (Some(left), Some(op), Some(right)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("operator"),
                n.child_by_field_name("right"),
            )
        {
            let left_text = &parsed.masked[left.byte_range()];
            let right_text = &parsed.masked[right.byte_range()];
            let accumulates = op.kind() == "+=" || (op.kind() == "=" && right_text.contains('+'));
            if accumulates && names(left_text, acc) && names(right_text, acc) {
                found.push(leading_literal(left_text, acc));
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    found
}

/// `L` of `acc[L]…` where `L` is a decimal integer literal and more subscripts follow
/// (an element of one set, not a set of scalars).
fn leading_literal(text: &str, acc: &str) -> Option<String> {
    let rest = text.trim().strip_prefix(acc)?.trim_start();
    let body = rest.strip_prefix('[')?;
    let close = body.find(']')?;
    let index = body[..close].trim();
    let more = body[close + 1..].trim_start().starts_with('[');
    (more && !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
        .then(|| index.to_owned())
}

/// The end of the statement (a sibling of `mainloop`) that contains byte `at`.
fn statement_end(mainloop: Node<'_>, at: usize) -> Option<usize> {
    let parent = mainloop.parent()?;
    let mut cursor = parent.walk();
    parent
        .named_children(&mut cursor)
        .find(|c| c.start_byte() <= at && at <= c.end_byte())
        .map(|c| c.end_byte())
}

/// The wait a probe needs before reading a complete accumulator, and why.
fn completion_wait(parsed: &Parsed, kernel: &Kernel) -> Option<(String, String)> {
    let text = &parsed.source[kernel.range.clone()];
    let wgmma = text.contains("warpgroup_wait")
        || text.contains("wgmma")
        || kernel
            .sites
            .iter()
            .any(|s| s.kind == SiteKind::Mma && s.text.contains("wgmma"));
    if !wgmma {
        return None;
    }
    let code = if text.contains("warpgroup_wait") {
        "cute::warpgroup_wait<0>(); ".to_owned()
    } else {
        "kwb::wgmma_wait_all(); ".to_owned()
    };
    Some((
        code,
        "wgmma accumulators are complete only after wait_group 0: the probe waits for it when enabled".to_owned(),
    ))
}

/// The name an accumulator site declares.
/// The accumulator an object declared at `decl` as `name` wraps, where it is built from
/// one (`GmmaFP8Accumulation accumulation(accum, interval, k_blocks)`: the MMA is handed
/// a temporary through `accumulation()`, promoted into `accum`, whose values are the
/// accumulator's, and the object itself is no value a probe can read). `None` where
/// `name` is declared otherwise.
fn held_accumulator(parsed: &Parsed, decl: Node<'_>, name: &str) -> Option<String> {
    let mut stack = vec![decl];
    while let Some(n) = stack.pop() {
        if n.kind() == "init_declarator"
            && n.child_by_field_name("declarator")
                .is_some_and(|d| &parsed.masked[d.byte_range()] == name)
        {
            let first = n
                .child_by_field_name("value")
                .filter(|v| v.kind() == "argument_list")?
                .named_child(0)
                .filter(|a| a.kind() == "identifier")?;
            let held = &parsed.masked[first.byte_range()];
            return (held != name && kwb_sites::is_accumulator_name(held)).then(|| held.to_owned());
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    None
}

pub(crate) fn declared_name(root: Node<'_>, site: &Site, parsed: &Parsed) -> Option<String> {
    let note = site.note.as_deref()?;
    let name = note.rsplit('`').nth(1)?;
    let node = root.descendant_for_byte_range(site.range.start, site.range.end)?;
    parsed.source[node.byte_range()]
        .contains(name)
        .then(|| name.to_owned())
}
