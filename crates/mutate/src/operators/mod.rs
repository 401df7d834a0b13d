//! The operators: where each stage's defect is planted, found through the kernel map
//! and the syntax tree, as byte-range edits on the original text.
//!
//! - mma, `k-tile-dropped`: the consumer mainloop's condition one step short
//!   (`k < N` becomes `k < (N) - 1`; a count-down `k > N` becomes `k > (N) + 1`). A
//!   producer loop is left alone: a load never issued leaves its consumer waiting.
//! - mma, `mma-twice`: an MMA issue statement issued twice, so its product is
//!   accumulated twice.
//! - epilogue, `alpha-twice`: `alpha` in an epilogue statement becomes
//!   `(alpha * alpha)` (a field `p.alpha` the same).
//! - epilogue, `beta-dropped`: `beta` in an epilogue statement becomes `(beta * 0)`:
//!   beta·C is dropped, its type kept.
//! - operand-load, `load-k-offset`: in a load inside the mainloop, an index derived
//!   from the loop's K step (the induction variable, or a local computed from it)
//!   becomes `(x + 1)`: another K tile is fetched, or another stage filled.
//! - descriptor, `tma-swizzle`: a `CU_TENSOR_MAP_SWIZZLE_*` in a function that makes
//!   or receives a TMA map becomes another swizzle, so the tile is written one way
//!   and read another.
//!
//! Invariant: every edit lies inside the site it mutates (or, for a loop, its
//! condition), in the original text's byte offsets.

use std::ops::Range;

use kwb_edit::Indel;
use kwb_sites::{Kernel, KernelMap, Site, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::Stage;

/// One defect at one place, before it is checked and numbered.
#[derive(Clone, Debug)]
pub struct Planted {
    pub stage: Stage,
    pub operator: &'static str,
    pub function: String,
    /// Where the edit starts (orders mutants in the file).
    pub at: usize,
    pub indels: Vec<Indel>,
}

/// Every defect of `stage` in `functions` (descriptors: in the whole file's `map`).
pub fn plant(
    parsed: &Parsed,
    map: &KernelMap,
    functions: &[&Kernel],
    stage: Stage,
) -> Vec<Planted> {
    let mut out = Vec::new();
    // Device code only: a host function's call that reads as an MMA or a load by name
    // (a launcher's `gemm(...)`) is no stage of the kernel.
    let functions: Vec<&Kernel> = functions
        .iter()
        .copied()
        .filter(|k| k.role != "host")
        .collect();
    match stage {
        Stage::Mma => {
            for k in &functions {
                out.extend(k_tile_dropped(parsed, k));
                out.extend(mma_twice(parsed, k));
            }
        }
        Stage::Epilogue => {
            for k in &functions {
                out.extend(scale_named(parsed, k, "alpha", "alpha-twice", |t| {
                    format!("({t} * {t})")
                }));
                out.extend(scale_named(parsed, k, "beta", "beta-dropped", |t| {
                    format!("({t} * 0)")
                }));
            }
        }
        Stage::OperandLoad => {
            for k in &functions {
                out.extend(load_k_offset(parsed, k));
            }
        }
        Stage::Descriptor => {
            for k in &map.kernels {
                out.extend(tma_swizzle(parsed, k));
            }
        }
    }
    out
}

fn sites(k: &Kernel, kind: SiteKind) -> impl Iterator<Item = &Site> {
    k.sites.iter().filter(move |s| s.kind == kind)
}

/// The smallest node at `range`'s start that is of one of `kinds`, walking up.
fn enclosing<'t>(parsed: &'t Parsed, range: &Range<usize>, kinds: &[&str]) -> Option<Node<'t>> {
    let mut node = parsed
        .tree
        .root_node()
        .descendant_for_byte_range(range.start, range.start)?;
    loop {
        if kinds.contains(&node.kind()) {
            return Some(node);
        }
        node = node.parent()?;
    }
}

fn text<'s>(parsed: &'s Parsed, node: Node<'_>) -> &'s str {
    &parsed.source[node.byte_range()]
}

fn planted(stage: Stage, operator: &'static str, k: &Kernel, indels: Vec<Indel>) -> Planted {
    Planted {
        stage,
        operator,
        function: k.name.clone(),
        at: indels.first().map_or(0, |i| i.delete.start),
        indels,
    }
}

/// The loop node of a mainloop site and, where it is a comparison, its condition.
fn loop_condition<'t>(parsed: &'t Parsed, site: &Site) -> Option<(Node<'t>, Node<'t>)> {
    let looped = enclosing(
        parsed,
        &site.range,
        &["for_statement", "while_statement", "do_statement"],
    )?;
    let mut condition = looped.child_by_field_name("condition")?;
    // `while (c)` holds a condition clause around the expression.
    while matches!(
        condition.kind(),
        "condition_clause" | "parenthesized_expression"
    ) {
        condition = condition.named_child(0)?;
    }
    (condition.kind() == "binary_expression").then_some((looped, condition))
}

fn k_tile_dropped(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
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

fn mma_twice(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
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
fn scale_named(
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

/// The induction variable of a `for` loop: the name its initializer declares, or the
/// one its update steps.
fn induction<'t>(parsed: &'t Parsed, looped: Node<'t>) -> Option<&'t str> {
    if let Some(init) = looped.child_by_field_name("initializer")
        && init.kind() == "declaration"
    {
        let declarator = init.child_by_field_name("declarator")?;
        let name = declarator
            .child_by_field_name("declarator")
            .unwrap_or(declarator);
        if name.kind() == "identifier" {
            return Some(text(parsed, name));
        }
    }
    let update = looped.child_by_field_name("update")?;
    let argument = update
        .child_by_field_name("argument")
        .or_else(|| update.child_by_field_name("left"))?;
    (argument.kind() == "identifier").then(|| text(parsed, argument))
}

/// The locals of a loop body derived from its induction variable `var` (declared with
/// an initializer that names `var` or another derived local, to a fixed point), `var`
/// first.
fn k_derived<'t>(parsed: &'t Parsed, looped: Node<'t>, var: &'t str) -> Vec<&'t str> {
    let mut declarations = Vec::new();
    if let Some(body) = looped.child_by_field_name("body") {
        collect(body, "init_declarator", &mut declarations);
    }
    let mut derived = vec![var];
    loop {
        let before = derived.len();
        for d in &declarations {
            let (Some(name), Some(value)) = (
                d.child_by_field_name("declarator"),
                d.child_by_field_name("value"),
            ) else {
                continue;
            };
            let name = text(parsed, name);
            if derived.contains(&name) {
                continue;
            }
            let mut uses = Vec::new();
            identifiers(value, &parsed.source, &mut |_, t| uses.push(t.to_owned()));
            if uses.iter().any(|u| derived.contains(&u.as_str())) {
                derived.push(name);
            }
        }
        if derived.len() == before {
            return derived;
        }
    }
}

fn collect<'t>(node: Node<'t>, kind: &str, out: &mut Vec<Node<'t>>) {
    if node.kind() == kind {
        out.push(node);
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect(child, kind, out);
    }
}

/// In each load inside a mainloop, each index derived from the loop's K step read as
/// the next step's (`(x + 1)`): the load fetches another K tile, or fills another
/// stage, than the one the MMA reads next.
fn load_k_offset(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
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

/// The swizzle a map is given instead of `from`.
fn other_swizzle(from: &str) -> Option<&'static str> {
    Some(match from {
        "CU_TENSOR_MAP_SWIZZLE_128B" => "CU_TENSOR_MAP_SWIZZLE_64B",
        "CU_TENSOR_MAP_SWIZZLE_64B"
        | "CU_TENSOR_MAP_SWIZZLE_32B"
        | "CU_TENSOR_MAP_SWIZZLE_NONE" => "CU_TENSOR_MAP_SWIZZLE_128B",
        _ => return None,
    })
}

/// Each swizzle enumerator in a function that makes, types or receives a TMA map (the
/// encode, where the map's fields are chosen) changed to another.
fn tma_swizzle(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    if sites(k, SiteKind::TmaDescriptor).next().is_none() {
        return Vec::new();
    }
    let Some(function) = parsed
        .tree
        .root_node()
        .descendant_for_byte_range(k.range.start, k.range.end)
    else {
        return Vec::new();
    };
    let mut swizzles = Vec::new();
    identifiers(function, &parsed.source, &mut |n, t| {
        if k.range.contains(&n.start_byte())
            && let Some(to) = other_swizzle(t)
        {
            swizzles.push((n.byte_range(), to));
        }
    });
    swizzles
        .into_iter()
        .map(|(range, to)| {
            planted(
                Stage::Descriptor,
                "tma-swizzle",
                k,
                vec![Indel::replace(range, to)],
            )
        })
        .collect()
}

fn identifiers<'t>(node: Node<'t>, source: &str, f: &mut impl FnMut(Node<'t>, &str)) {
    if node.kind() == "identifier" {
        f(node, &source[node.byte_range()]);
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        identifiers(child, source, f);
    }
}
