//! One walk over the tree that files the nodes every later step needs under the
//! innermost function that holds them, so no step walks the tree again.

use tree_sitter::{Node, Tree};

/// Nodes of one function definition (nested function definitions keep their own).
#[derive(Default)]
pub struct Held<'t> {
    /// `declaration`, `parameter_declaration`, `optional_parameter_declaration`.
    pub declarations: Vec<Node<'t>>,
    /// `call_expression`.
    pub calls: Vec<Node<'t>>,
    /// `assignment_expression`.
    pub assignments: Vec<Node<'t>>,
}

/// Function definitions in source order, with what each holds and its parent.
/// ERROR nodes holding a function declarator count as functions (see `build`).
pub struct Index<'t> {
    /// `function_definition` nodes in source order.
    pub functions: Vec<Node<'t>>,
    /// The innermost enclosing function of each function, by index.
    pub parents: Vec<Option<usize>>,
    /// What each function holds.
    pub held: Vec<Held<'t>>,
}

impl<'t> Index<'t> {
    /// Walks `tree` once. Template parameter lists and lambda captures hold nothing a
    /// kernel map needs and are not entered.
    pub fn build(tree: &'t Tree) -> Index<'t> {
        let mut index = Index {
            functions: Vec::new(),
            parents: Vec::new(),
            held: Vec::new(),
        };
        let mut cursor = tree.walk();
        // (depth at which the function node sits, its index)
        let mut open: Vec<(usize, usize)> = Vec::new();
        let mut depth = 0usize;
        loop {
            let node = cursor.node();
            let mut enter = node.child_count() > 0;
            if node.is_named() {
                match node.kind() {
                    // An ERROR node that holds a function declarator is a function
                    // whose braces do not balance: keep it, so its sites are reported
                    // as partial results.
                    "function_definition" | "ERROR"
                        if node.kind() == "function_definition" || holds_declarator(node) =>
                    {
                        index.parents.push(open.last().map(|&(_, i)| i));
                        open.push((depth, index.functions.len()));
                        index.functions.push(node);
                        index.held.push(Held::default());
                    }
                    "template_parameter_list" | "lambda_capture_specifier" => enter = false,
                    kind => {
                        if let Some(&(_, f)) = open.last() {
                            let held = &mut index.held[f];
                            match kind {
                                "declaration"
                                | "parameter_declaration"
                                | "optional_parameter_declaration" => held.declarations.push(node),
                                "call_expression" => held.calls.push(node),
                                "assignment_expression" => held.assignments.push(node),
                                _ => {}
                            }
                        }
                    }
                }
            }
            if enter && cursor.goto_first_child() {
                depth += 1;
                continue;
            }
            loop {
                // Leaving this node: close the function it is.
                if open.last().is_some_and(|&(d, _)| d == depth) {
                    open.pop();
                }
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    return index;
                }
                depth -= 1;
            }
        }
    }

    /// The innermost function containing `node`.
    pub fn owner(&self, node: Node<'_>) -> Option<usize> {
        let start = node.start_byte();
        let last = self
            .functions
            .partition_point(|f| f.start_byte() <= start)
            .checked_sub(1)?;
        let mut candidate = Some(last);
        while let Some(i) = candidate {
            let f = self.functions[i];
            if f.start_byte() <= start && node.end_byte() <= f.end_byte() {
                return Some(i);
            }
            candidate = self.parents[i];
        }
        None
    }
}

fn holds_declarator(node: Node<'_>) -> bool {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .any(|c| c.kind() == "function_declarator")
}
