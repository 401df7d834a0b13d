//! Operand-load operators: the K tile fetched, the stage filled or read, the row stride.

use std::ops::Range;

use kwb_edit::Indel;
use kwb_sites::{Kernel, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use super::Planted;
use super::{
    collect, declared, enclosing, function_node, identifiers, induction, integral, k_derived,
    mainloops, planted, site_statement, sites, text,
};
use crate::Stage;

/// In each load inside a mainloop, each index derived from the loop's K step read as
/// the next step's (`(x + 1)`): the load fetches another K tile, or fills another
/// stage, than the one the MMA reads next.
pub(super) fn load_k_offset(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    let loops: Vec<(Range<usize>, Vec<&str>)> = sites(k, SiteKind::Mainloop)
        .filter_map(|s| {
            let looped = enclosing(parsed, &s.range, &["for_statement"])?;
            let var = induction(parsed, looped)?;
            Some((looped.byte_range(), k_derived(parsed, looped, var)))
        })
        .collect();
    let mut done: Vec<Range<usize>> = Vec::new();
    let mut out = Vec::new();
    for s in sites(k, SiteKind::OperandLoad) {
        let Some((_, derived)) = loops.iter().find(|(r, _)| r.contains(&s.range.start)) else {
            continue;
        };
        let Some(statement) = enclosing(parsed, &s.range, &["expression_statement"]) else {
            continue;
        };
        if done.contains(&statement.byte_range()) {
            continue;
        }
        done.push(statement.byte_range());
        let mut uses: Vec<(Range<usize>, String)> = Vec::new();
        identifiers(statement, &parsed.source, &mut |n, t| {
            if derived.contains(&t) && !uses.iter().any(|(_, u)| u == t) {
                uses.push((n.byte_range(), t.to_owned()));
            }
        });
        for (range, name) in uses {
            out.push(planted(
                Stage::OperandLoad,
                "load-k-offset",
                k,
                vec![Indel::replace(range, format!("({name} + 1)"))],
            ));
        }
    }
    out
}

/// Whether a name reads as a pipeline stage index (`read_stage`, `smem_pipe_write`).
fn stage_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    (lower.contains("stage") || lower.contains("pipe")) && !count_like(name)
}

/// Whether a name reads as a count or a constant (`K_PIPE_MAX`, `kStages`, `Stages`).
fn count_like(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let mut chars = name.chars();
    let constant = name
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    let k_prefixed =
        chars.next() == Some('k') && chars.next().is_some_and(|c| c.is_ascii_uppercase());
    constant
        || k_prefixed
        || ["max", "num", "count", "stages"]
            .iter()
            .any(|w| lower.contains(w))
}

/// Whether a name is a stage count: stage-named, count-like, not a size in bytes.
fn count_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    (lower.contains("stage") || lower.contains("pipe"))
        && count_like(name)
        && !["byte", "size", "idx", "index"]
            .iter()
            .any(|w| lower.contains(w))
}

/// Where a stage index sits: the I-th coordinate of a CuTe slice `T(_, .., x)`, or
/// arithmetic in a call's argument (`sA + stage * BM * LDS`).
enum Place<'s> {
    Slice { tensor: &'s str, coordinate: usize },
    Arithmetic,
}

/// Where `x` sits in `statement`; `None` under a subscript (a barrier array), a call on
/// an object (`tma.with(..)`, `pipeline.consumer_wait(..)`) or outside any call.
fn place<'s>(parsed: &'s Parsed, x: Node<'_>, statement: Node<'_>) -> Option<Place<'s>> {
    let mut child = x;
    let mut first = None;
    let mut in_call = false;
    while child.id() != statement.id() {
        let parent = child.parent()?;
        match parent.kind() {
            "argument_list" => {
                let call = parent.parent()?;
                let function = call.child_by_field_name("function")?;
                if !matches!(
                    function.kind(),
                    "identifier" | "qualified_identifier" | "template_function"
                ) {
                    return None;
                }
                in_call = true;
                if first.is_none() && child.id() == x.id() && function.kind() == "identifier" {
                    let mut cursor = parent.walk();
                    let arguments: Vec<Node> = parent.named_children(&mut cursor).collect();
                    let sliced = arguments
                        .iter()
                        .any(|a| a.kind() == "identifier" && text(parsed, *a) == "_");
                    if sliced {
                        let coordinate = arguments.iter().position(|a| a.id() == x.id())?;
                        first = Some(Place::Slice {
                            tensor: text(parsed, function),
                            coordinate,
                        });
                    }
                }
            }
            "call_expression"
            | "binary_expression"
            | "parenthesized_expression"
            | "cast_expression"
            | "init_declarator"
            | "expression_statement"
            | "declaration" => {}
            "assignment_expression" => {
                if parent
                    .child_by_field_name("left")
                    .is_some_and(|l| l.id() == child.id())
                {
                    return None;
                }
            }
            _ => return None,
        }
        child = parent;
    }
    match first {
        Some(p) => Some(p),
        None => in_call.then_some(Place::Arithmetic),
    }
}

/// The stage count a stage index `x` wraps at, or `None` when `x` is no stage index.
fn stage_count(
    parsed: &Parsed,
    k: &Kernel,
    function: Node<'_>,
    x: Node<'_>,
    place: &Place<'_>,
) -> Option<String> {
    let modulo = |value: Option<Node<'_>>| {
        let mut value = value?;
        while value.kind() == "parenthesized_expression" {
            value = value.named_child(0)?;
        }
        let op = value.child_by_field_name("operator")?;
        let right = value.child_by_field_name("right")?;
        (value.kind() == "binary_expression" && op.kind() == "%")
            .then(|| text(parsed, right).to_owned())
    };
    let from_modulo = match x.kind() {
        "identifier" => {
            let name = text(parsed, x);
            let d = declared(parsed, function, name, x.start_byte())?;
            let auto = d.ty.is_some_and(|t| {
                t.kind() == "placeholder_type_specifier" || text(parsed, t) == "auto"
            });
            // A `% COUNT` local that is not stage-named (`lane = tid % 32`) counts only
            // where it scales an offset (`sA + ps * BM * LDS`).
            let scales = x.parent().is_some_and(|p| {
                p.kind() == "binary_expression"
                    && p.child_by_field_name("operator")
                        .is_some_and(|o| o.kind() == "*")
            });
            let count = modulo(d.value).filter(|_| stage_name(name) || scales);
            if count.is_none()
                && !(stage_name(name)
                    && (integral(parsed, d.ty) || auto && indexed(parsed, d.value)))
            {
                return None;
            }
            if auto && count.is_none() && !indexed(parsed, d.value) {
                return None;
            }
            count
        }
        // `smem_pipe_read.index()`: a stage-named state's index.
        _ => None,
    };
    if let Some(count) = from_modulo {
        return Some(count);
    }
    if let Place::Slice { tensor, coordinate } = place {
        return Some(format!("cute::size<{coordinate}>({tensor})"));
    }
    visible_count(parsed, k, function, x.start_byte())
}

/// Whether an initializer is a state's `.index()`.
fn indexed(parsed: &Parsed, value: Option<Node<'_>>) -> bool {
    value.is_some_and(|v| index_call(parsed, v))
}

/// `state.index()` on a stage-named state (`smem_pipe_read`, `read_state`).
fn index_call(parsed: &Parsed, node: Node<'_>) -> bool {
    if node.kind() != "call_expression" {
        return false;
    }
    let (Some(function), Some(arguments)) = (
        node.child_by_field_name("function"),
        node.child_by_field_name("arguments"),
    ) else {
        return false;
    };
    let Some((object, field)) = function
        .child_by_field_name("argument")
        .zip(function.child_by_field_name("field"))
    else {
        return false;
    };
    let object = text(parsed, object).to_ascii_lowercase();
    function.kind() == "field_expression"
        && text(parsed, field) == "index"
        && arguments.named_child_count() == 0
        && ["stage", "pipe", "state"]
            .iter()
            .any(|w| object.contains(w))
}

/// A stage-count constant in scope at `at`: a local declared before it, a non-type
/// template parameter, or a field of the enclosing class.
fn visible_count(parsed: &Parsed, k: &Kernel, function: Node<'_>, at: usize) -> Option<String> {
    let mut names = Vec::new();
    identifiers(function, &parsed.source, &mut |n, t| {
        if count_name(t) && n.start_byte() < at && !names.contains(&t.to_owned()) {
            names.push(t.to_owned());
        }
    });
    // A value, not a type (`using Stages = _3;` is skipped).
    for name in names.iter().rev() {
        if declared(parsed, function, name, at).is_some_and(|d| d.ty.is_some()) {
            return Some(name.clone());
        }
    }
    if let Some(p) = k
        .template_params
        .iter()
        .find(|p| p.kind == "non-type" && count_name(&p.name))
    {
        return Some(p.name.clone());
    }
    let mut up = function.parent();
    while let Some(scope) = up {
        if scope.kind() == "field_declaration_list" {
            let mut fields = Vec::new();
            collect(scope, "field_declaration", &mut fields);
            for f in fields {
                if f.parent().is_some_and(|p| p.id() == scope.id())
                    && f.child_by_field_name("type").is_some()
                    && let Some(d) = f.child_by_field_name("declarator")
                {
                    let mut name = d;
                    while let Some(inner) = name.child_by_field_name("declarator") {
                        name = inner;
                    }
                    let name = text(parsed, name);
                    if count_name(name) && f.child_by_field_name("default_value").is_some() {
                        return Some(name.to_owned());
                    }
                }
            }
        }
        up = scope.parent();
    }
    None
}

/// The statements a stage index is read in: MMA issues, loads into shared memory in
/// the mainloop (`true`: any place), and, inside the mainloop, slices of staged
/// tensors (`false`: slices only).
fn stage_statements<'t>(parsed: &'t Parsed, k: &Kernel) -> Vec<(Node<'t>, bool)> {
    let loops = mainloops(parsed, k);
    let mut out: Vec<(Node<'t>, bool)> = Vec::new();
    let push = |out: &mut Vec<(Node<'t>, bool)>, n: Node<'t>, any: bool| {
        if !out.iter().any(|(o, _)| o.byte_range() == n.byte_range()) {
            out.push((n, any));
        }
    };
    for s in &k.sites {
        let wanted = match s.kind {
            SiteKind::Mma => true,
            SiteKind::OperandLoad => loops
                .iter()
                .any(|l| l.byte_range().contains(&s.range.start)),
            _ => false,
        };
        if wanted && let Some(statement) = site_statement(parsed, k, s) {
            push(&mut out, statement, true);
        }
    }
    for l in &loops {
        let mut inside = Vec::new();
        collect(*l, "expression_statement", &mut inside);
        collect(*l, "declaration", &mut inside);
        for n in inside {
            push(&mut out, n, false);
        }
    }
    out.sort_by_key(|(n, _)| n.start_byte());
    out
}

/// In an MMA's operands, a load into shared memory, or a staged slice in the mainloop,
/// a stage index read as the neighbouring stage, wrapped at the stage count.
pub(super) fn stage_index_off(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    let Some(function) = function_node(parsed, k) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (statement, any) in stage_statements(parsed, k) {
        let mut candidates = Vec::new();
        candidate_indices(parsed, statement, &mut candidates);
        for x in candidates {
            let Some(place) = place(parsed, x, statement) else {
                continue;
            };
            if !any && !matches!(place, Place::Slice { .. }) {
                continue;
            }
            let Some(count) = stage_count(parsed, k, function, x, &place) else {
                continue;
            };
            let index = text(parsed, x);
            out.push(planted(
                Stage::OperandLoad,
                "stage-index-off",
                k,
                vec![Indel::replace(
                    x.byte_range(),
                    format!("(({index} + 1) % {count})"),
                )],
            ));
        }
    }
    out
}

/// Identifiers and `state.index()` calls under `node`, not callees.
fn candidate_indices<'t>(parsed: &Parsed, node: Node<'t>, out: &mut Vec<Node<'t>>) {
    if node.kind() == "identifier" {
        let callee = node
            .parent()
            .and_then(|p| p.child_by_field_name("function"))
            .is_some_and(|f| f.id() == node.id());
        if !callee {
            out.push(node);
        }
        return;
    }
    if index_call(parsed, node) {
        out.push(node);
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        candidate_indices(parsed, child, out);
    }
}

/// Whether a name reads as a leading dimension or a row stride (`lda`, `ld_b`,
/// `stride_a`), not a constant (`LDS`).
fn stride_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && (lower.starts_with("ld") && lower.len() <= 8 || lower.contains("stride"))
}

/// In an operand load in the mainloop (or in a load helper that has no mainloop), a
/// leading dimension that multiplies a row read as `(ld - 1)`.
pub(super) fn operand_stride(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    let Some(function) = function_node(parsed, k) else {
        return Vec::new();
    };
    let loops = mainloops(parsed, k);
    let mut done: Vec<Range<usize>> = Vec::new();
    let mut out = Vec::new();
    for s in sites(k, SiteKind::OperandLoad) {
        if !loops.is_empty()
            && !loops
                .iter()
                .any(|l| l.byte_range().contains(&s.range.start))
        {
            continue;
        }
        let Some(statement) = site_statement(parsed, k, s) else {
            continue;
        };
        if done.contains(&statement.byte_range()) {
            continue;
        }
        done.push(statement.byte_range());
        let mut uses = Vec::new();
        identifiers(statement, &parsed.source, &mut |n, t| {
            let multiplies = n.parent().is_some_and(|p| {
                p.kind() == "binary_expression"
                    && p.child_by_field_name("operator")
                        .is_some_and(|o| o.kind() == "*")
            });
            if !multiplies {
                return;
            }
            let Some(d) = declared(parsed, function, t, n.start_byte()) else {
                return;
            };
            // `K` or `N` only as an integer parameter: a row stride the caller passed.
            let parameter = d
                .declarator
                .parent()
                .is_some_and(|p| p.kind() == "parameter_declaration");
            let named = stride_name(t) || matches!(t, "K" | "N") && parameter;
            if named && integral(parsed, d.ty) {
                uses.push(n.byte_range());
            }
        });
        for range in uses {
            let ld = &parsed.source[range.clone()];
            out.push(planted(
                Stage::OperandLoad,
                "operand-stride",
                k,
                vec![Indel::replace(range.clone(), format!("({ld} - 1)"))],
            ));
        }
    }
    out
}

/// At each MMA call that passes one A argument and one B argument, the two swapped:
/// the MMA reads B's tile as A and A's as B. Where their types or shapes differ (a
/// PTX fragment of 4 registers against one of 2, `matrix_a` against `matrix_b`) the
/// mutant does not compile and is dropped; where they agree (square tiles, pointers
/// into shared memory, CuTe views of one shape) it computes another product.
pub(super) fn ab_swapped(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    let mut out = Vec::new();
    for call in &k.mma_arguments {
        let ([a], [b]) = (call.a.as_slice(), call.b.as_slice()) else {
            continue;
        };
        // Arguments of one call are disjoint: only the same one could overlap.
        if a == b {
            continue;
        }
        // An operand passed in several arguments (`b_frag[j][0], b_frag[j][1]`) has
        // no one argument to swap.
        let Some(arguments) = enclosing(parsed, &call.call, &["call_expression"])
            .and_then(|c| c.child_by_field_name("arguments"))
        else {
            continue;
        };
        // Each argument with the first name it reads (`b_frag` of `b_frag[j][0]`).
        let roots: Vec<(Range<usize>, Option<&str>)> = arguments
            .named_children(&mut arguments.walk())
            .map(|n| {
                let mut first = None;
                identifiers(n, &parsed.source, &mut |id, _| {
                    first.get_or_insert(text(parsed, id));
                });
                (n.byte_range(), first)
            })
            .collect();
        let alone = |r: &Range<usize>| {
            let Some((_, Some(name))) = roots.iter().find(|(at, _)| at == r) else {
                return false;
            };
            roots.iter().filter(|(_, n)| *n == Some(*name)).count() == 1
        };
        if !alone(a) || !alone(b) {
            continue;
        }
        let (first, second) = if a.start < b.start { (a, b) } else { (b, a) };
        let source = |r: &Range<usize>| parsed.source[r.clone()].to_owned();
        out.push(planted(
            Stage::OperandLoad,
            "ab-swapped",
            k,
            vec![
                Indel::replace(first.clone(), source(second)),
                Indel::replace(second.clone(), source(first)),
            ],
        ));
    }
    out
}
