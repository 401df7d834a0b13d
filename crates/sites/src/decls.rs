//! Local declarations of a function, for resolving what an MMA argument names.

use kwb_syntax::{BlankKind, Parsed};
use tree_sitter::Node;

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
        let mut scope = Scope { decls };
        scope.propagate_shared(parsed);
        scope
    }

    /// The declaration of `name` in effect at byte `at`: the last one before it, else
    /// the first one after it.
    pub fn lookup(&self, name: &str, at: usize) -> Option<&Decl<'t>> {
        let mut before = None;
        for decl in self.decls.iter().filter(|d| d.name == name) {
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
        self.decls.iter().any(|d| d.name == name)
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
            let by_name = |name: &str, decls: &[Decl<'_>]| {
                decls[..i]
                    .iter()
                    .rev()
                    .find(|d| d.name == name)
                    .is_some_and(|d| d.shared)
            };
            let from_shared = text.contains("smem")
                || text.contains("shared")
                || crate::names::identifiers(text).any(|ident| {
                    by_name(ident, &self.decls)
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
            let value = declarator.child_by_field_name("value").map(|v| {
                if v.kind() == "argument_list" {
                    v.named_child(0).unwrap_or(v)
                } else {
                    v
                }
            });
            (declarator.child_by_field_name("declarator"), value)
        } else {
            (Some(declarator), None)
        };
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
                node = node
                    .child_by_field_name("declarator")
                    .or_else(|| node.named_child(0))?;
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
    let function = value.child_by_field_name("function")?;
    let callee = crate::names::callee_name(function, &parsed.masked);
    let descriptor =
        callee.starts_with("make_fragment_") || callee.to_ascii_lowercase().contains("desc");
    if !descriptor {
        return None;
    }
    let arguments = value.child_by_field_name("arguments")?;
    let first = arguments.named_child(0)?;
    let is_local = |n: &str| scope.has(n);
    let base = base_identifier(first, &parsed.masked, &is_local)?;
    let target = scope.lookup(&parsed.masked[base.byte_range()], base.start_byte())?;
    (target.node != decl.node).then_some(target)
}
