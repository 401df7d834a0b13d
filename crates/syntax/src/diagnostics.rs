//! ERROR and MISSING nodes of a tree, as plain data.

use std::ops::Range;

use tree_sitter::{Node, Tree};

/// What tree-sitter could not fit into the grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyntaxDiagnosticKind {
    /// An `ERROR` node: text the parser skipped.
    Error,
    /// A `MISSING` node: a token the parser invented, named here.
    Missing(String),
}

/// One ERROR or MISSING node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxDiagnostic {
    /// Bytes of the node (empty for MISSING).
    pub range: Range<usize>,
    /// 1-based line of the start.
    pub line: usize,
    /// What it is.
    pub kind: SyntaxDiagnosticKind,
}

/// Collects every outermost ERROR node and every MISSING node, in source order.
///
/// Only subtrees that report `has_error` are visited, so a clean file costs one check.
pub fn collect(tree: &Tree) -> Vec<SyntaxDiagnostic> {
    let mut out = Vec::new();
    let root = tree.root_node();
    if root.has_error() {
        visit(root, &mut out);
    }
    out
}

fn visit(node: Node<'_>, out: &mut Vec<SyntaxDiagnostic>) {
    let diagnostic = |kind| SyntaxDiagnostic {
        range: node.byte_range(),
        line: node.start_position().row + 1,
        kind,
    };
    if node.is_missing() {
        out.push(diagnostic(SyntaxDiagnosticKind::Missing(
            node.kind().to_owned(),
        )));
        return;
    }
    if node.is_error() {
        out.push(diagnostic(SyntaxDiagnosticKind::Error));
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        if child.has_error() {
            visit(child, out);
        }
    }
}
