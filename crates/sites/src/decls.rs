//! Local declarations of a function, for resolving what an MMA argument names.

use std::collections::HashMap;

use kwb_syntax::{BlankKind, Parsed};
use tree_sitter::Node;

use crate::fields::Field;

use crate::names::{Space, base_identifier, memory_space};

/// One declared name.
#[derive(Clone, Debug)]
pub struct Decl<'t> {
    /// The name.
    pub name: String,
    /// The whole declaration (statement or parameter).
    pub node: Node<'t>,
    /// The initializer, when there is one.
    pub value: Option<Node<'t>>,
    /// Declared `__shared__`, or initialized from shared memory.
    pub shared: bool,
    /// A function parameter.
    pub parameter: bool,
}

/// The declarations of one function, in source order.
pub struct Scope<'t> {
    decls: Vec<Decl<'t>>,
    /// Indices into `decls` by name, in source order (atoms with a hundred register
    /// parameters make a linear search quadratic).
    by_name: HashMap<String, Vec<usize>>,
}

impl<'t> Scope<'t> {
    /// The parameters and local declarations among `declarations` (the declaration
    /// nodes the index filed under one function).
    pub fn of(declarations: &[Node<'t>], parsed: &Parsed) -> Scope<'t> {
        let mut decls = Vec::new();
        for &node in declarations {
            collect(node, parsed, &mut decls);
        }
        decls.sort_by_key(|d| d.node.start_byte());
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, decl) in decls.iter().enumerate() {
            by_name.entry(decl.name.clone()).or_default().push(i);
        }
        let mut scope = Scope { decls, by_name };
        scope.propagate_shared(parsed);
        scope
    }

    /// The declaration of `name` in effect at byte `at`: the last one before it, else
    /// the first one after it.
    pub fn lookup(&self, name: &str, at: usize) -> Option<&Decl<'t>> {
        let mut before = None;
        let indices = self.by_name.get(name).map_or(&[][..], Vec::as_slice);
        for decl in indices.iter().map(|&i| &self.decls[i]) {
            if decl.node.start_byte() <= at {
                before = Some(decl);
            } else {
                return before.or(Some(decl));
            }
        }
        before
    }

    /// Whether `name` is declared in this function.
    pub fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Every declaration, in source order.
    pub fn decls(&self) -> &[Decl<'t>] {
        &self.decls
    }

    fn propagate_shared(&mut self, parsed: &Parsed) {
        for i in 0..self.decls.len() {
            if self.decls[i].shared {
                continue;
            }
            let Some(value) = self.decls[i].value else {
                continue;
            };
            let text = &parsed.masked[value.byte_range()];
            // partition_fragment_A(sA) / make_fragment_like(tCsA) allocate registers.
            if text.contains("fragment") {
                continue;
            }
            // The last declaration of `name` before this one is shared.
            let earlier_shared = |name: &str| {
                self.by_name.get(name).is_some_and(|indices| {
                    indices
                        .iter()
                        .rev()
                        .find(|&&j| j < i)
                        .is_some_and(|&j| self.decls[j].shared)
                })
            };
            let from_shared = text.contains("smem")
                || text.contains("shared")
                || crate::names::identifiers(text).any(|ident| {
                    earlier_shared(ident)
                        || memory_space(ident).is_some_and(|(s, _)| s == Space::Shared)
                });
            self.decls[i].shared = from_shared;
        }
    }
}

fn collect<'t>(node: Node<'t>, parsed: &Parsed, out: &mut Vec<Decl<'t>>) {
    let shared = crate::blanks_around(parsed, node)
        .iter()
        .any(|b| matches!(&b.kind, BlankKind::Macro(name) if name == "__shared__"));
    let parameter = node.kind() != "declaration";
    let mut cursor = node.walk();
    for declarator in node.children_by_field_name("declarator", &mut cursor) {
        let (target, value) = if declarator.kind() == "init_declarator" {
            let value = declarator.field("value").map(|v| {
                if v.kind() == "argument_list" {
                    v.named_child(0).unwrap_or(v)
                } else {
                    v
                }
            });
            (declarator.field("declarator"), value)
        } else {
            (Some(declarator), None)
        };
        // `auto [tiled_mma, tCrA, tCrB] = mma_inputs;`: each name bound, all of them
        // initialized from the one value.
        if let Some(binding) = target.filter(|t| t.kind() == "structured_binding_declarator") {
            let mut names = binding.walk();
            for name in binding
                .named_children(&mut names)
                .filter(|n| n.kind() == "identifier")
            {
                out.push(Decl {
                    name: parsed.masked[name.byte_range()].to_owned(),
                    node,
                    value,
                    shared,
                    parameter,
                });
            }
            continue;
        }
        let Some(name) = target.and_then(declared_name) else {
            continue;
        };
        let name = parsed.masked[name.byte_range()].to_owned();
        let shared = shared || memory_space(&name).is_some_and(|(s, _)| s == Space::Shared);
        out.push(Decl {
            name,
            node,
            value,
            shared,
            parameter,
        });
    }
}

fn declared_name(mut node: Node<'_>) -> Option<Node<'_>> {
    loop {
        match node.kind() {
            "identifier" | "field_identifier" => return Some(node),
            "qualified_identifier" | "operator_name" | "destructor_name" => return None,
            _ => {
                node = node.field("declarator").or_else(|| node.named_child(0))?;
            }
        }
    }
}

/// Follows `name`'s initializer when it is a descriptor or fragment view of another
/// tensor (`tCrA = thr_mma.make_fragment_A(tCsA)`, `desc_a = make_smem_desc(&sA[0])`),
/// returning the viewed tensor's declaration.
pub fn viewed_tensor<'s, 't>(
    scope: &'s Scope<'t>,
    decl: &Decl<'t>,
    parsed: &Parsed,
) -> Option<&'s Decl<'t>> {
    let value = decl.value?;
    if value.kind() != "call_expression" {
        return None;
    }
    let function = value.field("function")?;
    let callee = crate::names::callee_name(function, &parsed.masked);
    let descriptor =
        callee.starts_with("make_fragment_") || callee.to_ascii_lowercase().contains("desc");
    if !descriptor {
        return None;
    }
    let arguments = value.field("arguments")?;
    let first = arguments.named_child(0)?;
    let is_local = |n: &str| scope.has(n);
    let base = base_identifier(first, &parsed.masked, &is_local)?;
    let target = scope.lookup(&parsed.masked[base.byte_range()], base.start_byte())?;
    (target.node != decl.node).then_some(target)
}

/// Follows a pointer made from the address of another declaration
/// (`MmaOperandA const* ptr_A = reinterpret_cast<MmaOperandA const*>(&A)`,
/// `float* D = (float*)&d[0]`) to that declaration: the pointer is a view of its
/// values.
pub fn address_of<'s, 't>(
    scope: &'s Scope<'t>,
    decl: &Decl<'t>,
    parsed: &Parsed,
) -> Option<&'s Decl<'t>> {
    let value = decl.value?;
    let operand = match value.kind() {
        "call_expression" => {
            let function = value.field("function")?;
            if !crate::names::callee_name(function, &parsed.masked).ends_with("_cast") {
                return None;
            }
            value.field("arguments")?.named_child(0)?
        }
        "cast_expression" => value.field("value")?,
        _ => return None,
    };
    if !parsed.masked[operand.byte_range()]
        .trim_start()
        .starts_with('&')
    {
        return None;
    }
    let is_local = |n: &str| scope.has(n);
    let base = base_identifier(operand, &parsed.masked, &is_local)?;
    let target = scope.lookup(&parsed.masked[base.byte_range()], base.start_byte())?;
    (target.node != decl.node).then_some(target)
}
