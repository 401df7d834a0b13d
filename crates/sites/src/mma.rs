//! What an MMA issue consumes: its A/B operands and its C/D accumulator.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fields::Field;

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
#[derive(Clone, Default)]
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
    let Some(arguments) = call.field("arguments") else {
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
    // Operands are numbered outputs first, then inputs, as the template's `%N` counts.
    let outputs = asm
        .field("output_operands")
        .map_or(0, |l| asm_operand_count(l));
    let operands = |field: &str, first: usize| -> Vec<(usize, &str, &str, Node<'t>)> {
        let Some(list) = asm.field(field) else {
            return Vec::new();
        };
        let mut cursor = list.walk();
        list.named_children(&mut cursor)
            .filter(|n| n.kind().ends_with("_operand"))
            .enumerate()
            .filter_map(|(i, operand)| {
                let constraint = operand.field("constraint")?;
                let node = base(operand.field("value")?)?;
                Some((
                    first + i,
                    masked[constraint.byte_range()].trim_matches('"'),
                    &masked[node.byte_range()],
                    node,
                ))
            })
            .collect()
    };
    // tcgen05.mma's operands by position (D's address in tensor memory is an integer
    // register, as are A's and B's descriptors, so the constraint cannot tell them
    // apart): read from the template.
    let template = asm.field("assembly_code").map(|t| &masked[t.byte_range()]);
    let umma = template.and_then(tcgen05_operands);
    // A register-fed MMA's A and B registers by where its template puts them.
    let placed = template
        .filter(|_| umma.is_none())
        .and_then(crate::ptx_slots::slots);
    let mut roles = Roles::default();
    let mut seen: HashSet<&str> = HashSet::new();
    // Outputs are the accumulator (D, and C when it is read-write "+f").
    for (_, _, name, node) in operands("output_operands", 0) {
        if seen.insert(name) {
            roles.accumulators.push(node);
        }
    }
    // Inputs: floating-point ones are C; integer/pointer registers are A then B
    // (mma.sync fragments, wgmma descriptors), named ones by their letter.
    let mut unnamed = Vec::new();
    for (index, constraint, name, node) in operands("input_operands", outputs) {
        if !seen.insert(name) {
            continue;
        }
        if let Some(u) = &umma {
            // D's address is not a value of the accumulator: the map reads the
            // accumulator where a tcgen05.ld brings it back (an address read after the
            // mainloop, `tmem_dealloc(tmem, …)`, is no epilogue).
            if u.d == index {
                continue;
            }
            if let Some(letter) = [(u.a, 'A'), (u.b, 'B')]
                .into_iter()
                .find_map(|(i, l)| (i == Some(index)).then_some(l))
            {
                roles.operands.push((letter, node));
                continue;
            }
        }
        if let Some((a, b)) = &placed {
            if a.contains(&index) {
                roles.operands.push(('A', node));
                continue;
            }
            if b.contains(&index) {
                roles.operands.push(('B', node));
                continue;
            }
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
    // Where the template names A and B, an operand it does not place is not guessed
    // into either by its order.
    if umma.is_some() || placed.is_some() {
        unnamed.clear();
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

/// How many operands an asm operand list holds.
fn asm_operand_count(list: Node<'_>) -> usize {
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter(|n| n.kind().ends_with("_operand"))
        .count()
}

/// The asm operand numbers (`%N`) a `tcgen05.mma` of `template` takes as D, A and B:
/// `tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, …` (D's tensor-memory address
/// first, in brackets; A a descriptor, or `[…]` in tensor memory; B a descriptor). A
/// register the template itself fills before the MMA (`mov.b32 ta, %2;`, `add.u32 blo,
/// %1, 768;`, `mov.b64 db, {blo, dhi};`) is followed back to the `%N` it is made from: a
/// pair from its first half, an update of itself (`add.u32 ta, ta, 8;`) to the value
/// before it. `None` for A or B where the template does not show it.
fn tcgen05_operands(template: &str) -> Option<Tcgen05Operands> {
    let text = crate::ptx_slots::instructions(template);
    let statements: Vec<&str> = text
        .split(';')
        .map(|s| s.trim().trim_start_matches('{').trim())
        .collect();
    // (statement index, register defined, its first source)
    let mut defs: Vec<(usize, &str, &str)> = Vec::new();
    for (i, statement) in statements.iter().enumerate() {
        let Some((opcode, operands)) = statement.split_once(char::is_whitespace) else {
            continue;
        };
        let op = opcode.split('.').next().unwrap_or("");
        if !matches!(
            op,
            "mov"
                | "add"
                | "sub"
                | "or"
                | "and"
                | "xor"
                | "shl"
                | "shr"
                | "cvt"
                | "cvta"
                | "mul"
                | "mad"
        ) {
            continue;
        }
        let mut parts = operands.splitn(2, ',');
        if let (Some(to), Some(from)) = (parts.next(), parts.next()) {
            let from = if from.trim_start().starts_with('{') {
                from.trim()
            } else {
                from.split(',').next().unwrap_or("").trim()
            };
            defs.push((i, to.trim(), from));
        }
    }
    let resolve = |token: &str, before: usize| -> Option<usize> {
        let (mut token, mut before) = (token.trim(), before);
        for _ in 0..8 {
            token = token.trim_start_matches('[').trim_end_matches(']').trim();
            token = token
                .trim_start_matches('{')
                .split(',')
                .next()
                .unwrap_or("")
                .trim_end_matches('}')
                .trim();
            if let Some(number) = token.strip_prefix('%') {
                return number.parse().ok();
            }
            // The last definition before, that is not an update of itself.
            let &(at, _, from) = defs.iter().rev().find(|(at, to, from)| {
                *at < before
                    && *to == token
                    && !from
                        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .any(|word| word == token)
            })?;
            (token, before) = (from, at);
        }
        None
    };
    let (index, statement) = statements
        .iter()
        .enumerate()
        .find(|(_, s)| s.contains("tcgen05.mma"))?;
    let at = statement.find("tcgen05.mma")?;
    let rest = &statement[at..];
    let operands: Vec<&str> = rest[rest.find(char::is_whitespace)?..]
        .split(',')
        .map(str::trim)
        .collect();
    // D must be a bracketed address: anything else is not the form this reads.
    if !operands.first()?.starts_with('[') {
        return None;
    }
    Some(Tcgen05Operands {
        d: resolve(operands.first()?, index)?,
        a: operands.get(1).and_then(|t| resolve(t, index)),
        b: operands.get(2).and_then(|t| resolve(t, index)),
    })
}

/// The asm operand numbers a `tcgen05.mma` takes as D, A and B.
#[derive(Debug, PartialEq, Eq)]
struct Tcgen05Operands {
    d: usize,
    a: Option<usize>,
    b: Option<usize>,
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

/// The roles of the MMA issues that are not calls (inline asm, scalar accumulates),
/// read once per issue and scope: the map asks for them two or three times, and a
/// wgmma's asm has up to a few hundred operands.
#[derive(Default)]
pub struct Memo<'t> {
    /// By (issue node id, address of the scope it was read in).
    roles: RefCell<HashMap<(usize, usize), Roles<'t>>>,
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
    memo: &Memo<'t>,
) -> Roles<'t> {
    let is_call = mma.kind() == "call_expression";
    if !is_call {
        // Inline asm and scalar accumulates do not depend on the table.
        let key = (mma.id(), std::ptr::from_ref(scope) as usize);
        if let Some(known) = memo.roles.borrow().get(&key) {
            return known.clone();
        }
        let found = roles(mma, parsed, scope);
        memo.roles.borrow_mut().insert(key, found.clone());
        return found;
    }
    if let Some(function) = mma.field("function")
        && let Some(params) = table.get(crate::names::callee_name(function, &parsed.masked))
        && let Some(arguments) = mma.field("arguments")
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
pub fn parameter_roles<'t>(
    function: Node<'t>,
    mmas: &[Node<'t>],
    parsed: &Parsed,
    scope: &Scope<'t>,
    table: &ParamRoles,
    memo: &Memo<'t>,
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
        let roles = roles_with(mma, parsed, scope, table, memo);
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
    let mut current = function.field("declarator")?;
    loop {
        if current.kind() == "function_declarator" {
            return current.field("parameters");
        }
        current = current
            .field("declarator")
            .or_else(|| current.named_child(0))?;
    }
}

#[cfg(test)]
mod tests {
    use super::{PTX_MMA, ptx_instruction};

    #[test]
    fn tcgen05_operands_are_read_by_position_through_the_templates_moves() {
        use super::{Tcgen05Operands, tcgen05_operands};
        // CUTLASS's UMMA atom: D, A and B descriptors straight from the operands.
        let ss = r#""tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p; \n\t""#;
        assert_eq!(
            tcgen05_operands(ss),
            Some(Tcgen05Operands {
                d: 0,
                a: Some(1),
                b: Some(2)
            })
        );
        // A in tensor memory, B's descriptor made inside the template from a pair.
        let ts = r#""{\n\t" ".reg .b32 blo, dhi, ta;\n\t" "mov.b32 ta, %2;\n\t" "mov.b32 blo, %1;\n\t" "mov.b64 db, {blo, dhi};\n\t" "@leader tcgen05.mma.cta_group::1.kind::f16 [%0], [ta], db, id, p0;\n\t" "}""#;
        assert_eq!(
            tcgen05_operands(ts),
            Some(Tcgen05Operands {
                d: 0,
                a: Some(2),
                b: Some(1)
            })
        );
        // Registers made by arithmetic and updated in place (`add.u32 ta, ta, 8;`
        // after the first MMA): followed to the value before the update.
        let add = r#""add.u32 ta, %2, 48;\n\t" "add.u32 blo, %1, 768;\n\t" "mov.b64 db, {blo, dhi};\n\t" "@leader tcgen05.mma.cta_group::1.kind::f16 [%0], [ta], db, id, p0;\n\t" "add.u32 ta, ta, 8;\n\t" "@leader tcgen05.mma.cta_group::1.kind::f16 [%0], [ta], db, id, p1;\n\t""#;
        assert_eq!(
            tcgen05_operands(add),
            Some(Tcgen05Operands {
                d: 0,
                a: Some(2),
                b: Some(1)
            })
        );
        // Not tcgen05.mma, or D not an address: nothing read.
        assert_eq!(
            tcgen05_operands(
                r#""wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0}, %1, %2;""#
            ),
            None
        );
        assert_eq!(
            tcgen05_operands(r#""tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64 [%0];""#),
            None
        );
    }

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
