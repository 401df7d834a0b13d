//! Epilogue operators: alpha applied twice, beta·C dropped, the stored value doubled.

use std::ops::Range;

use kwb_edit::Indel;
use kwb_sites::{Kernel, Site, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use super::{
    Planted, accumulators, arithmetic, collect, declared, enclosing, function_node, identifiers,
    integral, planted, root, sites, text,
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

/// The kernel's epilogue stores to memory (`D[i] = v;`, `*p = cvt(v0, v1);`), each
/// once: an assignment with `=` whose target is a subscript or a dereference, not an
/// accumulator or a local computed from one (an update of a register). Each comes with
/// its statement, target and stored value.
struct Store<'t> {
    statement: Node<'t>,
    left: Node<'t>,
    right: Node<'t>,
}

/// A kernel's accumulator-reading epilogue: its function, accumulators, the locals
/// computed from them, and its stores to memory.
struct Epilogue<'t> {
    function: Node<'t>,
    accumulators: Vec<String>,
    locals: Vec<String>,
    stores: Vec<Store<'t>>,
}

/// `k`'s epilogue, when it has a body and an accumulator.
fn epilogue_of<'t>(parsed: &'t Parsed, k: &Kernel) -> Option<Epilogue<'t>> {
    let function = function_node(parsed, k)?;
    let accumulators = accumulators(k);
    if accumulators.is_empty() {
        return None;
    }
    let locals = derived(parsed, function, &accumulators);
    let stores = memory_stores(parsed, k, &accumulators, &locals);
    Some(Epilogue {
        function,
        accumulators,
        locals,
        stores,
    })
}

fn memory_stores<'t>(
    parsed: &'t Parsed,
    k: &Kernel,
    accumulators: &[String],
    locals: &[String],
) -> Vec<Store<'t>> {
    let mut out: Vec<Store<'t>> = Vec::new();
    for s in sites(k, SiteKind::Epilogue) {
        let Some(statement) = enclosing(parsed, &s.range, &["expression_statement"]) else {
            continue;
        };
        if out.iter().any(|o| o.statement.id() == statement.id())
            || !k.range.contains(&statement.start_byte())
        {
            continue;
        }
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
        let target = root(left).map(|r| text(parsed, r).to_owned());
        if op.kind() == "="
            && matches!(left.kind(), "subscript_expression" | "pointer_expression")
            && !target.is_some_and(|t| accumulators.contains(&t) || locals.contains(&t))
        {
            out.push(Store {
                statement,
                left,
                right,
            });
        }
    }
    out
}

/// In each epilogue store of an accumulator-derived value to memory, the value doubled
/// through its plain-typed reads.
pub(super) fn store_scaled(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    let Some(e) = epilogue_of(parsed, k) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for store in &e.stores {
        let mut indels = Vec::new();
        doubled(
            parsed,
            e.function,
            store.right,
            &e.accumulators,
            &e.locals,
            &mut indels,
        );
        if !indels.is_empty() {
            out.push(planted(Stage::Epilogue, "store-scaled", k, indels));
        }
    }
    out
}

/// Whether an identifier is the function a call or a template instance names
/// (`static_cast` of `static_cast<size_t>(row)`), not a value it reads.
fn is_callee(id: Node<'_>) -> bool {
    id.parent().is_some_and(|p| {
        let field = match p.kind() {
            "call_expression" => "function",
            "template_function" => "name",
            _ => return false,
        };
        p.child_by_field_name(field)
            .is_some_and(|f| f.id() == id.id())
    })
}

/// Where a function's epilogue may start: the end of its last mainloop, or its start
/// when it has none (an epilogue functor).
fn after_mainloops(parsed: &Parsed, k: &Kernel, function: Node<'_>) -> usize {
    super::mainloops(parsed, k)
        .iter()
        .map(|l| l.end_byte())
        .max()
        .unwrap_or(function.start_byte())
}

/// The terms of a sum chain (`a + b * c + d`: `a`, `b * c`, `d`), through parentheses.
fn terms<'t>(node: Node<'t>, out: &mut Vec<Node<'t>>) {
    let node = if node.kind() == "parenthesized_expression" {
        node.named_child(0).unwrap_or(node)
    } else {
        node
    };
    if node.kind() == "binary_expression"
        && node.child_by_field_name("operator").map(|o| o.kind()) == Some("+")
        && let (Some(l), Some(r)) = (
            node.child_by_field_name("left"),
            node.child_by_field_name("right"),
        )
    {
        terms(l, out);
        terms(r, out);
    } else {
        out.push(node);
    }
}

/// The pairs of integer names a function indexes a matrix with: `(r, c)` wherever it
/// writes `r * ld + c` (in any order, in a longer sum, through casts and parentheses),
/// or declares `r = x / n` and `c = x % n` of one `x`.
fn index_pairs(parsed: &Parsed, function: Node<'_>) -> Vec<(String, String)> {
    // The one name an expression reads, casts and called functions aside
    // (`static_cast<size_t>(row)` reads `row`).
    let single = |n: Node<'_>| -> Option<String> {
        let mut names = Vec::new();
        identifiers(n, &parsed.source, &mut |id, t| {
            if !is_callee(id) {
                names.push(t.to_owned());
            }
        });
        names.dedup();
        (names.len() == 1).then(|| names.remove(0))
    };
    let is_op = |n: Node<'_>, op: &str| {
        n.kind() == "binary_expression"
            && n.child_by_field_name("operator").map(|o| o.kind()) == Some(op)
    };
    let mut out: Vec<(String, String)> = Vec::new();
    let push = |pair: (String, String), out: &mut Vec<(String, String)>| {
        if pair.0 != pair.1 && !out.contains(&pair) {
            out.push(pair);
        }
    };
    let mut sums = Vec::new();
    collect(function, "binary_expression", &mut sums);
    for sum in sums {
        // Each chain once, from its outermost `+`.
        if !is_op(sum, "+") || sum.parent().is_some_and(|p| is_op(p, "+")) {
            continue;
        }
        let mut parts = Vec::new();
        terms(sum, &mut parts);
        let columns: Vec<String> = parts.iter().filter_map(|&t| single(t)).collect();
        for product in parts.iter().filter(|t| is_op(**t, "*")) {
            let factors = ["left", "right"].map(|f| product.child_by_field_name(f));
            for row in factors.into_iter().flatten().filter_map(single) {
                for column in &columns {
                    push((row.clone(), column.clone()), &mut out);
                }
            }
        }
    }
    // `r = x / n; c = x % n;`
    let mut declarators = Vec::new();
    collect(function, "init_declarator", &mut declarators);
    let split = |op: &str| -> Vec<(String, String)> {
        declarators
            .iter()
            .filter_map(|d| {
                let name = d.child_by_field_name("declarator")?;
                let value = d.child_by_field_name("value")?;
                let value = if value.kind() == "parenthesized_expression" {
                    value.named_child(0)?
                } else {
                    value
                };
                if !is_op(value, op) {
                    return None;
                }
                let of = value.child_by_field_name("left")?;
                Some((text(parsed, name).to_owned(), text(parsed, of).to_owned()))
            })
            .collect()
    };
    for (row, x) in split("/") {
        for (column, y) in split("%") {
            if x == y {
                push((row.clone(), column), &mut out);
            }
        }
    }
    out
}

/// In the epilogue, a vector read beside the accumulator (`bias[col]`, `scale[row]`)
/// indexed along the other axis (`bias[row]`). The vector is a parameter or a member
/// (memory the kernel is given), indexed by one integer name that, with another, indexes
/// a matrix elsewhere in the function (`D[row * ldd + col]`); the mutant reads it at
/// that other name. Reads after the function's last mainloop only (a function with no
/// mainloop: one that holds epilogue sites, such as an epilogue functor).
pub(super) fn bias_axis(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    let Some(function) = function_node(parsed, k) else {
        return Vec::new();
    };
    if sites(k, SiteKind::Epilogue).next().is_none() {
        return Vec::new();
    }
    let after = after_mainloops(parsed, k, function);
    let pairs = index_pairs(parsed, function);
    let accumulators = accumulators(k);
    // The epilogue's statements, and the names they read: a vector read beside the
    // accumulator is in one of them, or sets a name one of them reads (`b = bias[o];`
    // before `y[..] = acc + b;`). A barrier or a scale read elsewhere is not.
    let kinds = ["expression_statement", "declaration"];
    let epilogue: Vec<Node<'_>> = sites(k, SiteKind::Epilogue)
        .filter_map(|s| enclosing(parsed, &s.range, &kinds))
        .collect();
    let mut read_there: Vec<&str> = Vec::new();
    for st in &epilogue {
        identifiers(*st, &parsed.source, &mut |id, _| {
            if !is_callee(id) {
                read_there.push(text(parsed, id));
            }
        });
    }
    let beside = |read: Node<'_>| {
        let Some(st) = enclosing(parsed, &read.byte_range(), &kinds) else {
            return false;
        };
        if epilogue.iter().any(|e| e.id() == st.id()) {
            return true;
        }
        // The name the statement sets.
        let set = st.named_child(0).and_then(|e| match e.kind() {
            "assignment_expression" => e.child_by_field_name("left"),
            _ => st
                .child_by_field_name("declarator")
                .and_then(|d| d.child_by_field_name("declarator").or(Some(d))),
        });
        set.filter(|n| n.kind() == "identifier")
            .is_some_and(|n| read_there.contains(&text(parsed, n)))
    };
    let mut reads = Vec::new();
    collect(function, "subscript_expression", &mut reads);
    let mut out = Vec::new();
    for read in reads {
        if read.start_byte() < after || !beside(read) {
            continue;
        }
        let (Some(vector), Some(index)) = (
            read.child_by_field_name("argument"),
            read.child_by_field_name("indices").and_then(|l| {
                (l.named_child_count() == 1)
                    .then(|| l.named_child(0))
                    .flatten()
            }),
        ) else {
            continue;
        };
        if !matches!(vector.kind(), "identifier" | "field_expression")
            || index.kind() != "identifier"
        {
            continue;
        }
        // Read as a value, not written.
        let written = read.parent().is_some_and(|p| {
            p.kind() == "assignment_expression"
                && p.child_by_field_name("left").map(|l| l.id()) == Some(read.id())
        });
        let Some(name) = root(vector).map(|r| text(parsed, r)) else {
            continue;
        };
        if written || accumulators.iter().any(|a| a == name) {
            continue;
        }
        // Memory the kernel is given: a pointer parameter or member.
        // A member (declared outside the function) or a pointer.
        let given = declared(parsed, function, name, read.start_byte())
            .is_none_or(|d| d.declarator.kind() == "pointer_declarator");
        if !given {
            continue;
        }
        let at = text(parsed, index);
        let is_integer = |n: &str| {
            declared(parsed, function, n, read.start_byte()).is_some_and(|d| integral(parsed, d.ty))
        };
        if !is_integer(at) {
            continue;
        }
        let other = pairs.iter().find_map(|(r, c)| {
            if r == at {
                Some(c)
            } else if c == at {
                Some(r)
            } else {
                None
            }
        });
        let Some(other) = other.filter(|o| is_integer(o)) else {
            continue;
        };
        out.push(planted(
            Stage::Epilogue,
            "bias-axis",
            k,
            vec![Indel::replace(index.byte_range(), other.clone())],
        ));
    }
    out
}

/// In an index sum `r * ld + c` (a longer sum too) of two integer names, the indels that
/// swap them (`c * ld + r`).
fn swapped_index<'t>(
    parsed: &Parsed,
    function: Node<'t>,
    index: Node<'t>,
    at: usize,
) -> Option<Vec<Indel>> {
    let mut parts = Vec::new();
    terms(index, &mut parts);
    let is_integer = |n: Node<'t>| {
        let name = text(parsed, n);
        n.kind() == "identifier"
            && declared(parsed, function, name, at).is_some_and(|d| integral(parsed, d.ty))
    };
    // The one identifier of an expression through casts (`size_t(row)`, `(size_t)row`,
    // `static_cast<size_t>(row)`).
    let name_in = |n: Node<'t>| -> Option<Node<'t>> {
        let mut found = Vec::new();
        identifiers(n, &parsed.source, &mut |id, _| {
            if !is_callee(id) {
                found.push(id);
            }
        });
        (found.len() == 1)
            .then(|| found[0])
            .filter(|&i| is_integer(i))
    };
    let column = parts.iter().find_map(|&t| name_in(t))?;
    let row = parts
        .iter()
        .filter(|t| {
            t.kind() == "binary_expression"
                && t.child_by_field_name("operator").map(|o| o.kind()) == Some("*")
        })
        // `row * ld`: a leading dimension, not a literal step (`j * 8`).
        .filter(|p| {
            p.child_by_field_name("right")
                .is_some_and(|ld| ld.kind() != "number_literal")
        })
        .find_map(|p| name_in(p.child_by_field_name("left")?))?;
    let (r, c) = (text(parsed, row), text(parsed, column));
    (r != c).then(|| {
        vec![
            Indel::replace(row.byte_range(), c.to_owned()),
            Indel::replace(column.byte_range(), r.to_owned()),
        ]
    })
}

/// The index expression of a store's destination: `D[e]`, `&D[e]`, `D + e` through
/// casts and dereferences; the sum itself for pointer arithmetic.
fn destination_index<'t>(left: Node<'t>) -> Option<Node<'t>> {
    match left.kind() {
        "subscript_expression" => {
            let indices = left.child_by_field_name("indices")?;
            (indices.named_child_count() == 1).then(|| indices.named_child(0))?
        }
        "binary_expression" => {
            (left.child_by_field_name("operator").map(|o| o.kind()) == Some("+")).then(|| {
                // `D + e`: the index is `e`; in a longer chain (`D + r * ld + c`) the
                // whole chain, whose pointer term is no integer name.
                let pointer = left.child_by_field_name("left");
                match pointer.map(|p| p.kind()) {
                    Some("identifier" | "field_expression") => {
                        left.child_by_field_name("right").unwrap_or(left)
                    }
                    _ => left,
                }
            })
        }
        "pointer_expression" | "parenthesized_expression" | "cast_expression" => destination_index(
            left.child_by_field_name("argument")
                .or_else(|| left.child_by_field_name("value"))
                .or_else(|| left.named_child(left.named_child_count().checked_sub(1)?))?,
        ),
        "call_expression" => {
            destination_index(left.child_by_field_name("arguments")?.named_child(0)?)
        }
        _ => None,
    }
}

/// In each epilogue store of an accumulator-derived value, the row and the column of
/// its destination's index swapped: `D[row * ldd + col]` becomes `D[col * ldd + row]`.
/// An index held in a local declared after the mainloop (`size_t off = row * N + col;
/// … D + off`) is swapped at its declaration.
pub(super) fn store_transposed(parsed: &Parsed, k: &Kernel) -> Vec<Planted> {
    let Some(e) = epilogue_of(parsed, k) else {
        return Vec::new();
    };
    let after = after_mainloops(parsed, k, e.function);
    let mut out = Vec::new();
    for &Store {
        statement, left, ..
    } in &e.stores
    {
        let Some(index) = destination_index(left) else {
            continue;
        };
        let at = statement.start_byte();
        // An index local: its declaration, when it comes after the mainloop.
        let index = if index.kind() == "identifier" {
            let Some(value) = declared(parsed, e.function, text(parsed, index), at)
                .and_then(|d| d.value)
                .filter(|v| v.start_byte() >= after)
            else {
                continue;
            };
            value
        } else {
            index
        };
        if let Some(indels) = swapped_index(parsed, e.function, index, at) {
            out.push(planted(Stage::Epilogue, "store-transposed", k, indels));
        }
    }
    out
}
