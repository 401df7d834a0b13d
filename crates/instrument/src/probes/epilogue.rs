//! Epilogue probes: the values each global store of the epilogue writes, so a trace
//! can tell "accumulator right, output wrong" (an epilogue defect) from a defect
//! upstream of the accumulator.
//!
//! A store is an assignment through a pointer or into an array that is not a
//! per-thread register (`*dst = …`, `D[i] = …`), or an epilogue call whose last
//! argument is the destination tensor (`axpby(alpha, acc, beta, tCgC)`). The probe
//! reads, in order of preference: the epilogue values the store's right side names
//! (`v0`, `v1`, before rounding to the output type), probed before the store; the
//! destination tensor or element itself, read back after the store by the same
//! thread. Each probe appends one record per warp each time the store runs.

use crate::tile::TILE;
use kwb_sites::{Kernel, SiteKind};
use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::cute;
use crate::emit::Emitter;
use crate::nodes::{
    block_statement, declaration_point, enclosing_function, identifiers, innermost_declarator,
    local_arrays,
};
use crate::plan::ProbeInfo;
use crate::probes::accumulator::declared_name;

/// Inserts the epilogue probes of `kernel`.
pub(crate) fn probe(em: &mut Emitter<'_>, kernel: &Kernel, gate: &str) {
    let parsed = em.parsed;
    let root = parsed.tree.root_node();
    let Some(function) = root.descendant_for_byte_range(kernel.range.start, kernel.range.end)
    else {
        return;
    };
    let body = function.child_by_field_name("body").unwrap_or(function);
    let registers: Vec<String> = local_arrays(parsed, body)
        .into_iter()
        .chain(
            kernel
                .sites
                .iter()
                .filter(|s| s.kind == SiteKind::Accumulator)
                .filter_map(|s| declared_name(root, s, parsed)),
        )
        .collect();
    let epilogue: Vec<Node<'_>> = kernel
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::Epilogue)
        .filter_map(|s| root.descendant_for_byte_range(s.range.start, s.range.end))
        .collect();
    let values = epilogue_values(parsed, &epilogue, &registers);
    let mut done: Vec<usize> = Vec::new();
    for node in epilogue {
        let Some(statement) = block_statement(node) else {
            continue;
        };
        if done.contains(&statement.id()) {
            continue;
        }
        let Some(store) = store_of(parsed, node, &registers) else {
            continue;
        };
        done.push(statement.id());
        let id = em.next_id();
        let site = em.site(id, "Epilogue");
        let line = node.start_position().row + 1;
        let text = parsed.source[node.byte_range()].trim().to_owned();
        match store {
            Store::Assign {
                left,
                right,
                element,
            } => {
                // The store alone in a guard's or loop's unbraced body (`if (m < M
                // && n < N) D[m * N + n] = acc[i];`) is read back inside braces kwb
                // adds around it, so only a store that runs is read.
                let body_of_guard = unbraced_body(node).filter(|b| statement.id() != b.id());
                let read_back = element
                    && (statement.byte_range() == node.byte_range() || body_of_guard.is_some());
                // A local value stored whole where the store cannot be read back (`float4
                // out; out.x = …; *reinterpret_cast<float4*>(c) = out;`) is the
                // epilogue's value, whoever filled it.
                let stored = parsed.masked[right.clone()].trim().to_owned();
                let local = if read_back {
                    None
                } else {
                    stored_local(parsed, body, &stored, statement.start_byte())
                };
                let whole = (local == Some(Local::Floating)).then_some(&stored);
                let named: Vec<&String> = dedup(
                    values
                        .iter()
                        .filter(|v| identifiers(&parsed.masked[right.clone()]).any(|w| w == *v))
                        .chain(whole),
                );
                if !named.is_empty() {
                    let list: Vec<&str> = named.iter().map(|v| v.as_str()).collect();
                    let shown: Vec<String> = named.iter().map(|v| format!("`{v}`")).collect();
                    em.probe(
                        declaration_point(parsed, statement),
                        gate,
                        &format!(
                            "kwb::probe_values({site}, kwb::Kind::Epilogue, kwb_tag, -1, {TILE}, {});",
                            list.join(", ")
                        ),
                        ProbeInfo {
                            id,
                            kernel: kernel.name.clone(),
                            what: format!("epilogue values {} as the store at line {line} writes them (before rounding to the output type)", shown.join(", ")),
                            line: statement.start_position().row + 1,
                            text,
                        },
                    );
                    continue;
                }
                // An integer local packing the output's narrow values (`uint2 pk` of
                // four bf16 stored through `reinterpret_cast<uint2*>(y + i)`): its bytes
                // read as the element type of the output it is stored into.
                let element = (local == Some(Local::Integer))
                    .then(|| {
                        enclosing_function(statement).and_then(|f| {
                            output_element(parsed, f, node_at(node, &left), statement.start_byte())
                        })
                    })
                    .flatten();
                if let Some(element) = element {
                    em.probe(
                        declaration_point(parsed, statement),
                        gate,
                        &format!(
                            "kwb::probe_as<{element}>({site}, kwb::Kind::Epilogue, kwb_tag, -1, {TILE}, {stored});"
                        ),
                        ProbeInfo {
                            id,
                            kernel: kernel.name.clone(),
                            what: format!("epilogue values `{stored}` read as `{element}`, the output's element type, as the store at line {line} writes them"),
                            line: statement.start_position().row + 1,
                            text,
                        },
                    );
                    continue;
                }
                if !read_back {
                    em.note(format!(
                        "{}: the store at line {line} names no epilogue value and cannot be read back; not probed",
                        kernel.name
                    ));
                    continue;
                }
                let destination = parsed.source[left].to_owned();
                let end = body_of_guard.map_or(statement.end_byte(), |b| b.end_byte());
                if let Some(b) = body_of_guard {
                    em.insert(b.start_byte(), "{ ");
                }
                em.gate_after(
                    end,
                    gate,
                    &format!(
                        "kwb::probe_value({site}, kwb::Kind::Epilogue, kwb_tag, -1, {TILE}, {destination});"
                    ),
                );
                if body_of_guard.is_some() {
                    em.insert(end, " }");
                }
                em.record(ProbeInfo {
                    id,
                    kernel: kernel.name.clone(),
                    what: format!("the output element `{destination}` read back after the store at line {line}"),
                    line,
                    text,
                });
            }
            Store::Call { destination } => {
                // A CuTe output partition: its coordinates from the partition itself.
                let coords = enclosing_function(statement)
                    .and_then(|f| {
                        cute::coords(parsed, f, &destination, statement.start_byte(), 'C')
                    })
                    .map_or(String::new(), |c| {
                        format!(", kwb::all_rows, kwb::Axis::M, {c}")
                    });
                em.gate_after(
                    statement.end_byte(),
                    gate,
                    &format!(
                        "kwb::probe({site}, kwb::Kind::Epilogue, kwb_tag, -1, {TILE}, {destination}{coords});"
                    ),
                );
                em.record(ProbeInfo {
                    id,
                    kernel: kernel.name.clone(),
                    what: format!(
                        "the output tensor `{destination}` read back after the epilogue call at line {line}"
                    ),
                    line,
                    text,
                });
            }
        }
    }
}

/// What a local stored whole holds: a value of a floating type, or of an integer
/// type (`uint2 pk; … *dst = pk;`: packed narrow values, which a probe of its own type
/// would record as integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Local {
    Floating,
    Integer,
}

/// Whether `name` is a local variable of `body` that holds a value (not a pointer,
/// reference or array), declared before byte `before`, and of which kind of type.
fn stored_local(parsed: &Parsed, body: Node<'_>, name: &str, before: usize) -> Option<Local> {
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || name.is_empty() {
        return None;
    }
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if n.start_byte() >= before {
            continue;
        }
        if n.kind() == "declaration" {
            let integer = n
                .child_by_field_name("type")
                .is_some_and(|t| integer_type(&parsed.masked[t.byte_range()]));
            let mut cursor = n.walk();
            for declarator in n.children_by_field_name("declarator", &mut cursor) {
                let plain = match declarator.kind() {
                    "init_declarator" => declarator.child_by_field_name("declarator"),
                    _ => Some(declarator),
                };
                if plain.is_some_and(|d| {
                    d.kind() == "identifier" && &parsed.masked[d.byte_range()] == name
                }) {
                    return Some(if integer {
                        Local::Integer
                    } else {
                        Local::Floating
                    });
                }
            }
            continue;
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
    None
}

/// Whether a type's text names an integer type (`int`, `uint2`, `uint32_t`, `size_t`).
fn integer_type(text: &str) -> bool {
    let ty = text.to_ascii_lowercase();
    ["int", "char", "short", "long", "size_t", "bool"]
        .iter()
        .any(|w| ty.contains(w))
}

/// `range`'s node within `store`.
fn node_at<'t>(store: Node<'t>, range: &std::ops::Range<usize>) -> Node<'t> {
    store
        .descendant_for_byte_range(range.start, range.end)
        .unwrap_or(store)
}

/// The element type of the output a store's left side `left` writes into: the pointee
/// type of the first pointer it names (outside a cast's type), a parameter or a local
/// of `function` declared before byte `before`, where that type is no integer or
/// `void` (`__nv_bfloat16* y` in `*reinterpret_cast<uint2*>(y + i) = pk`).
fn output_element(
    parsed: &Parsed,
    function: Node<'_>,
    left: Node<'_>,
    before: usize,
) -> Option<String> {
    let mut names = Vec::new();
    let mut stack = vec![left];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "template_argument_list" => continue,
            "identifier" => names.push(parsed.masked[n.byte_range()].to_owned()),
            _ => {}
        }
        let mut cursor = n.walk();
        let children: Vec<Node<'_>> = n.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    let pointers = pointer_declarations(parsed, function, before);
    names.iter().find_map(|name| {
        pointers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, ty)| ty.clone())
    })
}

/// The pointers `function` declares before byte `before` (its parameters and locals)
/// whose pointee type is no integer or `void`: (name, pointee type).
fn pointer_declarations(
    parsed: &Parsed,
    function: Node<'_>,
    before: usize,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![function];
    while let Some(n) = stack.pop() {
        if n.start_byte() >= before {
            continue;
        }
        if matches!(n.kind(), "parameter_declaration" | "declaration")
            && let Some(ty) = n.child_by_field_name("type")
        {
            let ty = parsed.masked[ty.byte_range()].trim().to_owned();
            let mut cursor = n.walk();
            for declarator in n.children_by_field_name("declarator", &mut cursor) {
                let declarator = match declarator.kind() {
                    "init_declarator" => declarator.child_by_field_name("declarator"),
                    _ => Some(declarator),
                };
                let Some(d) = declarator.filter(|d| d.kind() == "pointer_declarator") else {
                    continue;
                };
                // One level of pointer: `T* p`, not `T** p`.
                let inner = d.child_by_field_name("declarator");
                if inner.is_some_and(|i| i.kind() == "identifier")
                    && !integer_type(&ty)
                    && ty != "void"
                    && let Some(i) = inner
                {
                    out.push((parsed.masked[i.byte_range()].to_owned(), ty.clone()));
                }
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out
}

/// The statement of the store `node` when it is the whole unbraced body of an `if`,
/// `else` or loop (where code kwb adds beside it needs braces to stay in that body);
/// `None` when it sits in a block.
fn unbraced_body(node: Node<'_>) -> Option<Node<'_>> {
    let own = std::iter::successors(Some(node), |n| n.parent())
        .take(3)
        .find(|n| n.kind() == "expression_statement")?;
    let parent = own.parent()?;
    matches!(
        parent.kind(),
        "if_statement"
            | "else_clause"
            | "for_statement"
            | "for_range_loop"
            | "while_statement"
            | "do_statement"
    )
    .then_some(own)
}

/// What a store statement writes.
enum Store {
    /// `LEFT = RIGHT;` through a pointer or into memory; `element` when LEFT is a
    /// plain subscript that can be read back (`D[row * N + col]`).
    Assign {
        left: std::ops::Range<usize>,
        right: std::ops::Range<usize>,
        element: bool,
    },
    /// An epilogue call whose last argument, a plain name, is the destination.
    Call { destination: String },
}

/// The store `node` (an epilogue site) performs, if it is one.
fn store_of(parsed: &Parsed, node: Node<'_>, registers: &[String]) -> Option<Store> {
    let expression = if node.kind() == "expression_statement" {
        node.named_child(0)?
    } else {
        node
    };
    match expression.kind() {
        "assignment_expression" => {
            let left = expression.child_by_field_name("left")?;
            let right = expression.child_by_field_name("right")?;
            let (root, through_pointer) = root_of(left);
            let local =
                root.is_some_and(|r| registers.iter().any(|x| x == &parsed.masked[r.clone()]));
            let memory = through_pointer || (left.kind() == "subscript_expression" && !local);
            if !memory || local {
                return None;
            }
            let element = left.kind() == "subscript_expression" && free_of_effects(parsed, left);
            Some(Store::Assign {
                left: left.byte_range(),
                right: right.byte_range(),
                element,
            })
        }
        "call_expression" => {
            let arguments = expression.child_by_field_name("arguments")?;
            let count = arguments.named_child_count();
            let last = arguments.named_child(count.checked_sub(1)?)?;
            let name = &parsed.masked[last.byte_range()];
            let plain = last.kind() == "identifier" && !registers.iter().any(|r| r == name);
            (count >= 2 && plain).then(|| Store::Call {
                destination: name.to_owned(),
            })
        }
        _ => None,
    }
}

/// Whether evaluating `node` again (to read a stored element back) has no effect and
/// gives the same place: no assignment, increment or `new`, and no call but a type
/// conversion (`size_t(t)`, `static_cast<int64_t>(m)`; a C cast is no call).
fn free_of_effects(parsed: &Parsed, node: Node<'_>) -> bool {
    let mut cursor = node.walk();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "assignment_expression"
            | "update_expression"
            | "new_expression"
            | "delete_expression"
            | "co_await_expression" => return false,
            "call_expression" if !conversion(parsed, n) => return false,
            _ => {}
        }
        stack.extend(n.named_children(&mut cursor));
    }
    true
}

/// A call that only converts its argument to a type: `size_t(t)`, `int64_t(m)`,
/// `static_cast<size_t>(m)`.
fn conversion(parsed: &Parsed, call: Node<'_>) -> bool {
    let Some(function) = call.child_by_field_name("function") else {
        return false;
    };
    let text = &parsed.masked[function.byte_range()];
    match function.kind() {
        "primitive_type" | "sized_type_specifier" => true,
        "identifier" | "type_identifier" => text.ends_with("_t"),
        "template_function" => function.child_by_field_name("name").is_some_and(|name| {
            matches!(
                &parsed.masked[name.byte_range()],
                "static_cast" | "reinterpret_cast" | "const_cast"
            )
        }),
        _ => false,
    }
}

/// The identifier an lvalue is rooted at, and whether it writes through a pointer
/// (`*p`, `*reinterpret_cast<T*>(D + off)`, `p->x`).
fn root_of(left: Node<'_>) -> (Option<std::ops::Range<usize>>, bool) {
    let mut node = left;
    let mut through_pointer = false;
    loop {
        match node.kind() {
            "identifier" => return (Some(node.byte_range()), through_pointer),
            "pointer_expression" => {
                through_pointer = true;
                match node.child_by_field_name("argument") {
                    Some(a) => node = a,
                    None => return (None, true),
                }
            }
            "subscript_expression" | "field_expression" => {
                if node.kind() == "field_expression"
                    && node
                        .child_by_field_name("operator")
                        .is_some_and(|o| o.kind() == "->")
                {
                    through_pointer = true;
                }
                match node.child_by_field_name("argument") {
                    Some(a) => node = a,
                    None => return (None, through_pointer),
                }
            }
            "parenthesized_expression" => match node.named_child(0) {
                Some(a) => node = a,
                None => return (None, through_pointer),
            },
            _ => return (None, through_pointer),
        }
    }
}

/// The scalar values the epilogue computes from the accumulator: the names its
/// declarations declare (`float v0 = alpha * acc[i]`).
fn epilogue_values(parsed: &Parsed, epilogue: &[Node<'_>], registers: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for node in epilogue.iter().filter(|n| n.kind() == "declaration") {
        let mut cursor = node.walk();
        for declarator in node.children_by_field_name("declarator", &mut cursor) {
            let inner = innermost_declarator(declarator);
            if inner.kind() != "identifier" {
                continue;
            }
            // A side input (`const float scale = …;`, a bias read): its initializer
            // names neither the accumulator's registers nor an earlier value, so it is
            // what a store combines with the values, not what it stores.
            let side_input = declarator.child_by_field_name("value").is_some_and(|v| {
                !identifiers(&parsed.masked[v.byte_range()])
                    .any(|w| registers.iter().chain(&names).any(|r| r == w))
            });
            if !side_input {
                names.push(parsed.masked[inner.byte_range()].to_owned());
            }
        }
    }
    names
}

fn dedup<'a>(items: impl Iterator<Item = &'a String>) -> Vec<&'a String> {
    let mut out: Vec<&String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}
