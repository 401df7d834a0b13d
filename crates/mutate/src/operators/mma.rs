//! MMA operators: a K tile dropped, an MMA issued twice, the accumulator not zeroed.

use kwb_edit::Indel;
use kwb_sites::{Kernel, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use super::{
    Planted, accumulators, collect, declared, enclosing, function_node, loop_condition, mainloops,
    planted, root, sites, text,
};
use crate::Stage;

pub(super) fn k_tile_dropped(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    sites(k, SiteKind::Mainloop)
        .filter(|s| !s.note.as_deref().is_some_and(|n| n.starts_with("producer")))
        .filter_map(|s| {
            let (_, condition) = loop_condition(parsed, s)?;
            let op = condition.child_by_field_name("operator")?;
            let right = condition.child_by_field_name("right")?;
            let bound = text(parsed, right);
            let shorter = match op.kind() {
                "<" | "<=" | "!=" => format!("({bound}) - 1"),
                ">" | ">=" => format!("({bound}) + 1"),
                _ => return None,
            };
            Some(planted(
                Stage::Mma,
                "k-tile-dropped",
                k,
                vec![Indel::replace(right.byte_range(), shorter)],
            ))
        })
        .collect()
}

pub(super) fn mma_twice(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    sites(k, SiteKind::Mma)
        .filter_map(|s| {
            let statement = enclosing(parsed, &s.range, &["expression_statement"])?;
            // Only a statement of the function itself, not one the site merely names.
            if !k.range.contains(&statement.start_byte()) {
                return None;
            }
            // In braces, so a statement that is an `if`'s or a loop's body stays its
            // body, twice.
            let issue = text(parsed, statement);
            Some(planted(
                Stage::Mma,
                "mma-twice",
                k,
                vec![Indel::replace(
                    statement.byte_range(),
                    format!("{{ {issue} {issue} }}"),
                )],
            ))
        })
        .collect()
}

/// Whether an expression is a literal zero (`0`, `0.f`, `{}`, `float(0)`).
pub(super) fn zero(parsed: &Parsed, node: Node<'_>) -> bool {
    zero_text(text(parsed, node))
}

fn zero_text(written: &str) -> bool {
    let t: String = written.chars().filter(|c| !c.is_whitespace()).collect();
    let literal = |v: &str| {
        matches!(
            v,
            "0" | "0u" | "0.f" | "0.F" | "0.0f" | "0.0F" | "0.0" | "0.f0" | "0ll" | "0l"
        )
    };
    literal(&t)
        || t == "{}"
        || t.strip_prefix('{')
            .and_then(|r| r.strip_suffix('}'))
            .is_some_and(|inner| inner.split(',').all(|v| literal(v) || v.is_empty()))
        || t.ends_with(')')
            && t.rfind('(')
                .is_some_and(|open| literal(&t[open + 1..t.len() - 1]))
}

/// A statement that zeroes an accumulator: the accumulator's name (`None` for a
/// `ScaleOut::Zero`, which names the MMA, not the tensor) and the edit that undoes it.
fn zeroing<'t>(
    parsed: &Parsed,
    statement: Node<'t>,
    accumulators: &[String],
) -> Option<(Option<String>, Indel)> {
    let expression = statement.named_child(0)?;
    let removed = Indel::replace(statement.byte_range(), ";".to_owned());
    let is_acc =
        |n: Node<'_>| root(n).is_some_and(|r| accumulators.iter().any(|a| a == text(parsed, r)));
    match expression.kind() {
        "call_expression" => {
            let function = text(parsed, expression.child_by_field_name("function")?);
            let name = function.rsplit([':', '.']).next().unwrap_or(function);
            let arguments = expression.child_by_field_name("arguments")?;
            let first = arguments.named_child(0)?;
            let target = if first.kind() == "pointer_expression" {
                first.child_by_field_name("argument")?
            } else {
                first
            };
            let zeroes = match name {
                "clear" => arguments.named_child_count() == 1,
                "fill" | "fill_fragment" | "memset" => {
                    arguments.named_child(1).is_some_and(|v| zero(parsed, v))
                }
                _ => false,
            };
            let name = text(parsed, root(target)?).to_owned();
            (zeroes && is_acc(target)).then_some((Some(name), removed))
        }
        "assignment_expression" => {
            let left = expression.child_by_field_name("left")?;
            let right = expression.child_by_field_name("right")?;
            let op = expression.child_by_field_name("operator")?;
            if op.kind() != "=" {
                return None;
            }
            let field = left.child_by_field_name("field");
            if left.kind() == "field_expression"
                && field.is_some_and(|f| text(parsed, f) == "accumulate_")
                && text(parsed, right).ends_with("ScaleOut::Zero")
            {
                let end = right.end_byte();
                return Some((None, Indel::replace(end - 4..end, "One".to_owned())));
            }
            let name = text(parsed, root(left)?).to_owned();
            (zero(parsed, right) && is_acc(left)).then_some((Some(name), removed))
        }
        _ => None,
    }
}

/// The zeroing of the accumulator undone, only in a persistent kernel (see the module
/// doc): the zeroing is in a loop around the mainloop, and the accumulator is declared
/// and zeroed before that loop, so the next tile accumulates onto the previous one.
pub(super) fn accumulator_not_zeroed(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    let Some(function) = function_node(parsed, k) else {
        return Vec::new();
    };
    let accumulators = accumulators(k);
    let loops = mainloops(parsed, k);
    if accumulators.is_empty() || loops.is_empty() {
        return Vec::new();
    }
    let mut statements = Vec::new();
    collect(function, "expression_statement", &mut statements);
    let zeroings: Vec<(Node<'_>, Option<String>, Indel)> = statements
        .into_iter()
        .filter_map(|s| {
            let (acc, indel) = zeroing(parsed, s, &accumulators)?;
            Some((s, acc, indel))
        })
        .collect();
    let mut out = Vec::new();
    for (statement, acc, indel) in &zeroings {
        let inside = |l: &Node<'_>| l.byte_range().contains(&statement.start_byte());
        if loops.iter().any(inside) {
            continue;
        }
        // The innermost loop around the zeroing that also holds a mainloop.
        let mut up = statement.parent();
        let tiles = loop {
            let Some(node) = up else { break None };
            if matches!(
                node.kind(),
                "for_statement" | "while_statement" | "do_statement"
            ) && loops
                .iter()
                .any(|l| l.id() != node.id() && node.byte_range().contains(&l.start_byte()))
            {
                break Some(node);
            }
            up = node.parent();
        };
        let Some(tiles) = tiles else { continue };
        let carried = |name: &str| {
            let Some(d) = declared(parsed, function, name, tiles.start_byte()) else {
                return false;
            };
            let initialized = d.value.is_some_and(|v| zero(parsed, v))
                || d.braces.is_some_and(|b| zero_text(&parsed.source[b]));
            let zeroed_before = zeroings
                .iter()
                .any(|(s, a, _)| a.as_deref() == Some(name) && s.end_byte() <= tiles.start_byte());
            initialized || zeroed_before
        };
        let ok = match acc {
            Some(name) => carried(name),
            None => accumulators.iter().any(|a| carried(a)),
        };
        if ok {
            out.push(planted(
                Stage::Mma,
                "accumulator-not-zeroed",
                k,
                vec![indel.clone()],
            ));
        }
    }
    out
}
