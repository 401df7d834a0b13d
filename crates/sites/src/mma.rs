//! What an MMA issue consumes: its A/B operands and its C/D accumulator.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::decls::Scope;
use crate::names::{base_identifier, is_accumulator_name, operand_letter};

/// The variables an MMA reads and writes, as identifier nodes at the issue site.
#[derive(Default)]
pub struct Roles<'t> {
    /// A and B operands with their letter.
    pub operands: Vec<(char, Node<'t>)>,
    /// The accumulator (C and D).
    pub accumulators: Vec<Node<'t>>,
}

/// Roles of the arguments of an MMA call or inline-asm statement.
pub fn roles<'t>(mma: Node<'t>, parsed: &Parsed, scope: &Scope<'t>) -> Roles<'t> {
    let is_local = |name: &str| scope.has(name);
    let base = |n: Node<'t>| base_identifier(n, &parsed.masked, &is_local);
    match mma.kind() {
        "gnu_asm_expression" => asm_roles(mma, parsed, &base),
        "call_expression" => call_roles(mma, parsed, &base),
        "assignment_expression" => scalar_roles(mma, parsed, &base),
        _ => Roles::default(),
    }
}

fn call_roles<'t>(
    call: Node<'t>,
    parsed: &Parsed,
    base: &dyn Fn(Node<'t>) -> Option<Node<'t>>,
) -> Roles<'t> {
    let Some(arguments) = call.child_by_field_name("arguments") else {
        return Roles::default();
    };
    let mut cursor = arguments.walk();
    let args: Vec<Node<'t>> = arguments
        .named_children(&mut cursor)
        .filter(|n| n.kind() != "comment")
        .collect();
    let names: Vec<Option<Node<'t>>> = args.iter().map(|&a| base(a)).collect();
    let text =
        |n: Option<Node<'t>>| n.map_or(String::new(), |n| parsed.masked[n.byte_range()].to_owned());
    let mut roles = Roles::default();
    let first_is_mma = text(names.first().copied().flatten())
        .to_ascii_lowercase()
        .contains("mma");
    // Positional forms: gemm(mma, A, B, C), gemm(mma, D, A, B, C), warp_mma(D, A, B, C).
    let positional: Option<(usize, usize, &[usize])> = match (first_is_mma, args.len()) {
        (true, 4) => Some((1, 2, &[3])),
        (true, 5) => Some((2, 3, &[1, 4])),
        (false, 4) => Some((1, 2, &[0, 3])),
        _ => None,
    };
    match positional {
        Some((a, b, cs)) if names_fit(&names, a, b, cs, &text) => {
            if let Some(n) = names[a] {
                roles.operands.push(('A', n));
            }
            if let Some(n) = names[b] {
                roles.operands.push(('B', n));
            }
            for &c in cs {
                if let Some(n) = names[c] {
                    roles.accumulators.push(n);
                }
            }
        }
        _ => {
            // By name: accumulators and A/B fragments, whatever the order (wrappers).
            for n in names.iter().flatten() {
                let name = text(Some(*n));
                if is_accumulator_name(&name) {
                    roles.accumulators.push(*n);
                } else if let Some(letter) = operand_letter(&name) {
                    roles.operands.push((letter, *n));
                }
            }
        }
    }
    roles
}

/// A positional reading is rejected when a name contradicts it (an accumulator name
/// in an operand slot), as in `collective_mainloop.mma(pipeline, state, accum, …)`.
fn names_fit<'t>(
    names: &[Option<Node<'t>>],
    a: usize,
    b: usize,
    cs: &[usize],
    text: &dyn Fn(Option<Node<'t>>) -> String,
) -> bool {
    let operand_ok = |i: usize| !is_accumulator_name(&text(names[i]));
    let acc_ok = |i: usize| operand_letter(&text(names[i])).is_none();
    operand_ok(a) && operand_ok(b) && cs.iter().all(|&c| acc_ok(c))
}

fn asm_roles<'t>(
    asm: Node<'t>,
    parsed: &Parsed,
    base: &dyn Fn(Node<'t>) -> Option<Node<'t>>,
) -> Roles<'t> {
    // (constraint, base name, node) of each operand with a variable in it.
    let operands = |field: &str| -> Vec<(String, String, Node<'t>)> {
        let Some(list) = asm.child_by_field_name(field) else {
            return Vec::new();
        };
        let mut cursor = list.walk();
        list.named_children(&mut cursor)
            .filter_map(|operand| {
                let constraint = operand.child_by_field_name("constraint")?;
                let node = base(operand.child_by_field_name("value")?)?;
                Some((
                    parsed.masked[constraint.byte_range()]
                        .trim_matches('"')
                        .to_owned(),
                    parsed.masked[node.byte_range()].to_owned(),
                    node,
                ))
            })
            .collect()
    };
    let mut roles = Roles::default();
    let mut seen: Vec<String> = Vec::new();
    // Outputs are the accumulator (D, and C when it is read-write "+f").
    for (_, name, node) in operands("output_operands") {
        if !seen.contains(&name) {
            seen.push(name);
            roles.accumulators.push(node);
        }
    }
    // Inputs: floating-point ones are C; integer/pointer registers are A then B
    // (mma.sync fragments, wgmma descriptors), named ones by their letter.
    let mut unnamed = Vec::new();
    for (constraint, name, node) in operands("input_operands") {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name.clone());
        if constraint.contains('f') || constraint.contains('d') {
            roles.accumulators.push(node);
        } else if constraint.contains('n') {
            continue;
        } else if let Some(letter) = operand_letter(&name) {
            roles.operands.push((letter, node));
        } else {
            unnamed.push(node);
        }
    }
    let have: Vec<char> = roles.operands.iter().map(|(l, _)| *l).collect();
    let mut missing = ['A', 'B'].into_iter().filter(|l| !have.contains(l));
    for node in unnamed {
        match missing.next() {
            Some(letter) => roles.operands.push((letter, node)),
            None => break,
        }
    }
    roles
}

/// `acc += As[i][k] * Bs[k][j]`: the left side accumulates, the factors are A and B.
fn scalar_roles<'t>(
    assignment: Node<'t>,
    parsed: &Parsed,
    base: &dyn Fn(Node<'t>) -> Option<Node<'t>>,
) -> Roles<'t> {
    let _ = parsed;
    let mut roles = Roles::default();
    if let Some(left) = assignment.child_by_field_name("left").and_then(base) {
        roles.accumulators.push(left);
    }
    if let Some(product) = assignment.child_by_field_name("right") {
        for (letter, field) in [('A', "left"), ('B', "right")] {
            if let Some(node) = product.child_by_field_name(field).and_then(base) {
                roles.operands.push((letter, node));
            }
        }
    }
    roles
}
