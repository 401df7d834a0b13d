//! Tile contexts: where the code that holds the probes has no tile origin in scope
//! because its caller holds the work tile's coordinate (a CUTLASS 3.x kernel calls
//! `collective_mainloop.mma(…)` with `blk_coord` and `blk_shape` as locals), a
//! `kwb::tile_context` before the call records the origin once per warp, and one after
//! its statement ends it. The trace reader gives the origin to the warp's records in
//! between that have none. The calls are the `context` lines of
//! `grammars/tile_origins.txt`.
//!
//! Invariant: a context names only locals declared before the call in a block that
//! holds it, so it compiles wherever the kernel does. It is not behind the user's gate
//! (the kernel's template rarely has the gated parameter): it holds no values, carries
//! the ungated tag, and the reader uses it only to place records.

use std::ops::Range;

use tree_sitter::Node;

use crate::emit::Emitter;
use crate::nodes::{block_statement, declaration_point, enclosing, enclosing_function, first_line};
use crate::plan::{ProbeInfo, function_name};
use crate::tile::{ContextCall, table};

/// Inserts a tile context around every call of the table in the file, or only in
/// `within` (the byte ranges of the kernels asked for) when given.
pub(crate) fn probe(em: &mut Emitter<'_>, within: Option<&[Range<usize>]>) {
    let parsed = em.parsed;
    let contexts = &table().contexts;
    if contexts.is_empty() {
        return;
    }
    let mut calls = Vec::new();
    collect(
        parsed.tree.root_node(),
        &parsed.source,
        contexts,
        &mut calls,
    );
    let tag = kwb_runtime::tag(kwb_runtime::UNGATED);
    let mut done: Vec<usize> = Vec::new();
    for (call, context) in calls {
        if within.is_some_and(|ranges| !ranges.iter().any(|r| r.contains(&call.start_byte()))) {
            continue;
        }
        let Some(statement) = block_statement(call) else {
            continue;
        };
        if done.contains(&statement.id()) {
            continue;
        }
        let line = statement.start_position().row + 1;
        let function = enclosing_function(call);
        let name = function_name(parsed, function);
        let missing: Vec<&str> = [&context.coord, &context.shape]
            .into_iter()
            .filter(|local| !declared_before(parsed, function, local, call.start_byte()))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            em.note(format!(
                "{name}: the call of `{}` at line {line} has no `{}` in scope; its collective's records carry no tile origin",
                context.callee,
                missing.join("` or `")
            ));
            continue;
        }
        done.push(statement.id());
        let id = em.next_id();
        let (coord, shape) = (&context.coord, &context.shape);
        let axis = |a: usize| {
            format!(
                "static_cast<int>(cute::get<{a}>({coord})) * static_cast<int>(cute::size<{a}>({shape}))"
            )
        };
        em.probe(
            declaration_point(parsed, statement),
            "true",
            &format!(
                "kwb::tile_context({id}, 0x{tag:08x}u, {}, {});",
                axis(0),
                axis(1)
            ),
            ProbeInfo {
                id,
                kernel: name,
                what: format!(
                    "tile context: each warp's work tile origin, get<i>({coord}) * size<i>({shape}), for its records in the call of `{}` at line {line} that have none (ended after the call)",
                    context.callee
                ),
                line,
                text: first_line(parsed, statement),
            },
        );
        em.gate_after(
            statement.end_byte(),
            "true",
            &format!("kwb::tile_context({id}, 0x{tag:08x}u, -1, -1);"),
        );
    }
}

/// Every call under `node` whose callee, without spaces, is one of `contexts`.
fn collect<'t, 'c>(
    node: Node<'t>,
    source: &str,
    contexts: &'c [ContextCall],
    out: &mut Vec<(Node<'t>, &'c ContextCall)>,
) {
    if node.kind() == "call_expression"
        && let Some(function) = node.child_by_field_name("function")
    {
        let callee: String = source[function.byte_range()]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if let Some(context) = contexts.iter().find(|c| c.callee == callee) {
            out.push((node, context));
        }
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect(child, source, contexts, out);
    }
}

/// Whether `function` declares `name` (`auto name = …;`) before byte `at`, in a block
/// that holds `at`.
fn declared_before(
    parsed: &kwb_syntax::Parsed,
    function: Option<Node<'_>>,
    name: &str,
    at: usize,
) -> bool {
    let Some(function) = function else {
        return false;
    };
    let mut stack = vec![function];
    while let Some(node) = stack.pop() {
        if node.start_byte() >= at {
            continue;
        }
        if node.kind() == "init_declarator"
            && node.end_byte() <= at
            && node
                .child_by_field_name("declarator")
                .is_some_and(|d| parsed.source[d.byte_range()].trim() == name)
            && enclosing(node, "compound_statement").is_some_and(|b| b.byte_range().contains(&at))
        {
            return true;
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    false
}
