//! What an MMA issue consumes: its A/B operands and its C/D accumulator.

use std::collections::HashSet;

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::decls::Scope;
use crate::names::{base_identifier, is_accumulator_name, operand_letter};

/// The PTX MMA instructions whose inline asm `grammars/queries/mma.scm` matches, as the
/// first components of their names.
const PTX_MMA: [&str; 4] = ["wgmma.mma_async", "tcgen05.mma", "wmma.mma", "mma.sync"];

/// The PTX MMA instruction an inline-asm template issues, as written there
/// (`wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16`, shape and types with it),
/// the first one where it issues several; None when the template names none of
/// [`PTX_MMA`] as a whole word (`wmma.mma.sync` is not read as `mma.sync`).
pub fn ptx_instruction(template: &str) -> Option<&str> {
    let part = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':');
    PTX_MMA
        .iter()
        .filter_map(|name| {
            template
                .match_indices(name)
                .find(|(at, _)| !template[..*at].chars().next_back().is_some_and(part))
        })
        .map(|(at, _)| at)
        .min()
        .map(|at| {
            let end = template[at..]
                .find(|c: char| !part(c))
                .map_or(template.len(), |e| at + e);
            &template[at..end]
        })
}

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
        "assignment_expression" | "init_declarator" => scalar_roles(mma, parsed, &base),
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
    // With trailing arguments (`warp_mma(accum, a, b, accum, warp_tile_offset)`), the
    // form holds where D and C name the same accumulator.
    let same = |i: usize, j: usize| names[i].is_some() && text(names[i]) == text(names[j]);
    let positional: Option<(usize, usize, &[usize])> = match (first_is_mma, args.len()) {
        (true, 4) => Some((1, 2, &[3])),
        (true, 5) => Some((2, 3, &[1, 4])),
        (false, 4) => Some((1, 2, &[0, 3])),
        (true, n) if n > 5 && same(1, 4) => Some((2, 3, &[1, 4])),
        (false, n) if n > 4 && same(0, 3) => Some((1, 2, &[0, 3])),
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
    // (constraint, base name, node) of each operand with a variable in it, the text
    // borrowed from the masked source: a wgmma's asm has up to a few hundred operands,
    // and a CuTe header thousands of such asms.
    let masked = parsed.masked.as_str();
    let operands = |field: &str| -> Vec<(&str, &str, Node<'t>)> {
        let Some(list) = asm.child_by_field_name(field) else {
            return Vec::new();
        };
        let mut cursor = list.walk();
        list.named_children(&mut cursor)
            .filter_map(|operand| {
                let constraint = operand.child_by_field_name("constraint")?;
                let node = base(operand.child_by_field_name("value")?)?;
                Some((
                    masked[constraint.byte_range()].trim_matches('"'),
                    &masked[node.byte_range()],
                    node,
                ))
            })
            .collect()
    };
    let mut roles = Roles::default();
    let mut seen: HashSet<&str> = HashSet::new();
    // Outputs are the accumulator (D, and C when it is read-write "+f").
    for (_, name, node) in operands("output_operands") {
        if seen.insert(name) {
            roles.accumulators.push(node);
        }
    }
    // Inputs: floating-point ones are C; integer/pointer registers are A then B
    // (mma.sync fragments, wgmma descriptors), named ones by their letter.
    let mut unnamed = Vec::new();
    for (constraint, name, node) in operands("input_operands") {
        if !seen.insert(name) {
            continue;
        }
        if constraint.contains('f') || constraint.contains('d') {
            roles.accumulators.push(node);
        } else if constraint.contains('n') {
            continue;
        } else if let Some(letter) = operand_letter(name) {
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

/// `acc += As[i][k] * Bs[k][j]` (or `acc = fma(a, b, acc)`, see [`crate::fma`]): the
/// target accumulates, the factors are A and B.
fn scalar_roles<'t>(
    assignment: Node<'t>,
    parsed: &Parsed,
    base: &dyn Fn(Node<'t>) -> Option<Node<'t>>,
) -> Roles<'t> {
    let mut roles = Roles::default();
    let Some(acc) = crate::fma::accumulation(assignment, &parsed.masked) else {
        return roles;
    };
    if let Some(target) = base(acc.target) {
        roles.accumulators.push(target);
    }
    for (letter, factor) in ['A', 'B'].into_iter().zip(acc.factors) {
        if let Some(node) = base(factor) {
            roles.operands.push((letter, node));
        }
    }
    roles
}

/// What one parameter of a function is to the MMAs the function issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Accumulator,
    Operand(char),
}

/// Per function name: the parameters (by position) that reach an MMA as its
/// accumulator or an operand — how a helper such as `mma_k_tile(float (&acc)[…], …)`
/// is read from its call sites.
pub type ParamRoles = std::collections::BTreeMap<String, Vec<(usize, Role)>>;

/// Roles at an MMA issue: from the callee's parameters when `mma` calls a function
/// of `table`, else from the issue itself.
pub fn roles_with<'t>(
    mma: Node<'t>,
    parsed: &Parsed,
    scope: &Scope<'t>,
    table: &ParamRoles,
) -> Roles<'t> {
    if mma.kind() == "call_expression"
        && let Some(function) = mma.child_by_field_name("function")
        && let Some(params) = table.get(crate::names::callee_name(function, &parsed.masked))
        && let Some(arguments) = mma.child_by_field_name("arguments")
    {
        let is_local = |name: &str| scope.has(name);
        let mut cursor = arguments.walk();
        let args: Vec<Node<'t>> = arguments
            .named_children(&mut cursor)
            .filter(|n| n.kind() != "comment")
            .collect();
        let mut roles = Roles::default();
        for &(index, role) in params {
            let Some(base) = args
                .get(index)
                .and_then(|&a| base_identifier(a, &parsed.masked, &is_local))
            else {
                continue;
            };
            match role {
                Role::Accumulator => roles.accumulators.push(base),
                Role::Operand(letter) => roles.operands.push((letter, base)),
            }
        }
        return roles;
    }
    roles(mma, parsed, scope)
}

/// The parameters of `function` that the MMA issues `mmas` inside it use, by position.
pub fn parameter_roles(
    function: Node<'_>,
    mmas: &[Node<'_>],
    parsed: &Parsed,
    scope: &Scope<'_>,
    table: &ParamRoles,
) -> Vec<(usize, Role)> {
    let Some(parameters) = parameter_list(function) else {
        return Vec::new();
    };
    let mut cursor = parameters.walk();
    let params: Vec<usize> = parameters
        .named_children(&mut cursor)
        .filter(|p| p.kind().ends_with("parameter_declaration"))
        .map(|p| p.id())
        .collect();
    let mut out = Vec::new();
    for &mma in mmas {
        let roles = roles_with(mma, parsed, scope, table);
        let named = roles
            .accumulators
            .iter()
            .map(|&n| (Role::Accumulator, n))
            .chain(roles.operands.iter().map(|&(l, n)| (Role::Operand(l), n)));
        for (role, node) in named {
            let Some(decl) = scope.lookup(&parsed.masked[node.byte_range()], node.start_byte())
            else {
                continue;
            };
            if let Some(index) = params.iter().position(|&id| id == decl.node.id())
                && !out.contains(&(index, role))
            {
                out.push((index, role));
            }
        }
    }
    out.sort_by_key(|&(index, _)| index);
    out
}

fn parameter_list(function: Node<'_>) -> Option<Node<'_>> {
    let mut current = function.child_by_field_name("declarator")?;
    loop {
        if current.kind() == "function_declarator" {
            return current.child_by_field_name("parameters");
        }
        current = current
            .child_by_field_name("declarator")
            .or_else(|| current.named_child(0))?;
    }
}

#[cfg(test)]
mod tests {
    use super::{PTX_MMA, ptx_instruction};

    #[test]
    fn the_instruction_is_read_whole_from_the_template() {
        let wgmma = r#"asm volatile("{\n" "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " "{%0, %1}, %32, %33, p, 1, 1, 0, 0;\n" "}\n" : "+f"(d[0]))"#;
        assert_eq!(
            ptx_instruction(wgmma),
            Some("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16")
        );
        let mma = "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, ...\");";
        assert_eq!(
            ptx_instruction(mma),
            Some("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
        );
        // wmma's own name, not the mma.sync inside it.
        assert_eq!(
            ptx_instruction("asm(\"wmma.mma.sync.aligned.row.col.m16n16k16.f32.f16.f16.f32 ...\")"),
            Some("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f16.f16.f32")
        );
        assert_eq!(
            ptx_instruction("asm volatile(\"tcgen05.mma.cta_group::1.kind::f16 [%0], ...\")"),
            Some("tcgen05.mma.cta_group::1.kind::f16")
        );
        assert_eq!(
            ptx_instruction("asm volatile(\"wgmma.fence.sync.aligned;\")"),
            None
        );
    }

    #[test]
    fn the_instructions_are_the_ones_the_mma_query_matches() {
        let query = include_str!("../../../grammars/queries/mma.scm");
        for name in PTX_MMA {
            assert!(
                query.contains(&name.replace('.', "\\\\.")),
                "{name} is not in mma.scm's inline-PTX pattern"
            );
        }
    }
}
