//! Epilogue operators: alpha applied twice, beta·C dropped, the stored value doubled.

use std::ops::Range;

use kwb_edit::Indel;
use kwb_sites::{Kernel, Site, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use super::{
    Planted, accumulators, arithmetic, collect, declared, enclosing, function_node, identifiers,
    planted, root, sites, text,
};
use crate::Stage;

/// The statement of an epilogue site (a declaration, an assignment or a call).
fn statement_of<'t>(parsed: &'t Parsed, site: &Site) -> Option<Node<'t>> {
    enclosing(
        parsed,
        &site.range,
        &["expression_statement", "declaration", "return_statement"],
    )
}

/// Every identifier or field named `name` under `node`, as the expression that names
/// it (`alpha`, `p.alpha`, `p->alpha`).
fn named<'t>(node: Node<'t>, source: &str, name: &str, out: &mut Vec<Node<'t>>) {
    let kind = node.kind();
    if matches!(kind, "identifier" | "field_identifier") && &source[node.byte_range()] == name {
        let whole = node
            .parent()
            .filter(|p| p.kind() == "field_expression" && kind == "field_identifier")
            .unwrap_or(node);
        out.push(whole);
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        named(child, source, name, out);
    }
}

/// `name` in the kernel's epilogue statements rewritten by `rewrite`, one mutant per
/// statement (every use in it).
pub(super) fn scale_named(
    parsed: &Parsed,
    k: &Kernel,
    name: &str,
    operator: &'static str,
    rewrite: impl Fn(&str) -> String,
) -> Vec<Planted> {
    let mut done: Vec<Range<usize>> = Vec::new();
    let mut out = Vec::new();
    for s in sites(k, SiteKind::Epilogue) {
        let Some(statement) = statement_of(parsed, s) else {
            continue;
        };
        if done.contains(&statement.byte_range()) || !k.range.contains(&statement.start_byte()) {
            continue;
        }
        done.push(statement.byte_range());
        let mut uses = Vec::new();
        named(statement, &parsed.source, name, &mut uses);
        if uses.is_empty() {
            continue;
        }
        let indels = uses
            .iter()
            .map(|n| Indel::replace(n.byte_range(), rewrite(text(parsed, *n))))
            .collect();
        out.push(planted(Stage::Epilogue, operator, k, indels));
    }
    out
}

/// The locals of a function computed from its accumulators (declared with an
/// initializer that reads one, or another such local, to a fixed point).
fn derived(parsed: &Parsed, function: Node<'_>, accumulators: &[String]) -> Vec<String> {
    let mut declarators = Vec::new();
    collect(function, "init_declarator", &mut declarators);
    let mut out: Vec<String> = Vec::new();
    loop {
        let before = out.len();
        for d in &declarators {
            let (Some(name), Some(value)) = (
                d.child_by_field_name("declarator"),
                d.child_by_field_name("value"),
            ) else {
                continue;
            };
            let name = text(parsed, name);
            if out.iter().any(|o| o == name) || accumulators.iter().any(|a| a == name) {
                continue;
            }
            let mut reads = false;
            identifiers(value, &parsed.source, &mut |_, t| {
                reads |= accumulators.iter().chain(out.iter()).any(|a| a == t);
            });
            if reads {
                out.push(name.to_owned());
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// Subscripts around an accumulator read (`acc[i][j]`: 2).
fn depth(node: Node<'_>) -> usize {
    match node.kind() {
        "subscript_expression" => 1 + node.child_by_field_name("argument").map_or(0, depth),
        _ => 0,
    }
}

/// The reads of `value` that double the stored value: derived scalar locals as
/// `(v + v)`, whole reads of a plain-typed accumulator as `(acc[i] * 2)`.
fn doubled(
    parsed: &Parsed,
    function: Node<'_>,
    node: Node<'_>,
    accumulators: &[String],
    locals: &[String],
    out: &mut Vec<Indel>,
) {
    let name_of = |n: Node<'_>| root(n).map(|r| text(parsed, r).to_owned());
    match node.kind() {
        "identifier" => {
            let callee = node
                .parent()
                .and_then(|p| p.child_by_field_name("function"))
                .is_some_and(|f| f.id() == node.id());
            let name = text(parsed, node);
            let local = locals.iter().any(|l| l == name);
            let acc = accumulators.iter().any(|a| a == name);
            if callee || !(local || acc) {
                return;
            }
            let Some(d) = declared(parsed, function, name, node.start_byte()) else {
                return;
            };
            if d.dimensions == 0 && arithmetic(parsed, d.ty) {
                let rewrite = if acc {
                    format!("({name} * 2)")
                } else {
                    format!("({name} + {name})")
                };
                out.push(Indel::replace(node.byte_range(), rewrite));
            }
        }
        "subscript_expression" if name_of(node).is_some_and(|n| accumulators.contains(&n)) => {
            let name = name_of(node).unwrap_or_default();
            let Some(d) = declared(parsed, function, &name, node.start_byte()) else {
                return;
            };
            if d.dimensions == depth(node) && arithmetic(parsed, d.ty) {
                out.push(Indel::replace(
                    node.byte_range(),
                    format!("({} * 2)", text(parsed, node)),
                ));
            }
        }
        // An index is no value stored.
        "subscript_argument_list" => {}
        _ => {
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                doubled(parsed, function, child, accumulators, locals, out);
            }
        }
    }
}

/// In each epilogue store of an accumulator-derived value to memory, the value doubled
/// through its plain-typed reads.
pub(super) fn store_scaled(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    let Some(function) = function_node(parsed, k) else {
        return Vec::new();
    };
    let accumulators = accumulators(k);
    if accumulators.is_empty() {
        return Vec::new();
    }
    let locals = derived(parsed, function, &accumulators);
    let mut done: Vec<Range<usize>> = Vec::new();
    let mut out = Vec::new();
    for s in sites(k, SiteKind::Epilogue) {
        let Some(statement) = enclosing(parsed, &s.range, &["expression_statement"]) else {
            continue;
        };
        if done.contains(&statement.byte_range()) || !k.range.contains(&statement.start_byte()) {
            continue;
        }
        done.push(statement.byte_range());
        let Some(store) = statement
            .named_child(0)
            .filter(|e| e.kind() == "assignment_expression")
        else {
            continue;
        };
        let (Some(left), Some(right), Some(op)) = (
            store.child_by_field_name("left"),
            store.child_by_field_name("right"),
            store.child_by_field_name("operator"),
        ) else {
            continue;
        };
        // A store to memory, not an update of a register.
        let target = root(left).map(|r| text(parsed, r).to_owned());
        if op.kind() != "="
            || !matches!(left.kind(), "subscript_expression" | "pointer_expression")
            || target.is_some_and(|t| accumulators.contains(&t) || locals.contains(&t))
        {
            continue;
        }
        let mut indels = Vec::new();
        doubled(parsed, function, right, &accumulators, &locals, &mut indels);
        if !indels.is_empty() {
            out.push(planted(Stage::Epilogue, "store-scaled", k, indels));
        }
    }
    out
}
