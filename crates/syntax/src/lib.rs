//! Tree-sitter setup for CUDA C++ and the offset-preserving macro pre-pass.
//!
//! [`parse`] never fails: it returns the tree, the text tree-sitter saw, and the
//! syntax diagnostics. The pre-pass blanks CUDA keywords and CUTLASS/CuTe attribute
//! macros (from `grammars/macros.txt`) to spaces, so every byte offset of the tree is
//! also an offset into the user's original text.

mod diagnostics;
mod error;
mod macros;
mod prepass;
mod structs;

pub use diagnostics::{SyntaxDiagnostic, SyntaxDiagnosticKind};
pub use error::SyntaxError;
pub use macros::{MacroShape, MacroTable};
pub use prepass::{Blank, BlankKind, Conditionals, Masked};
pub use structs::{find_struct, has_constructor, struct_fields};

use tree_sitter::{Language, Parser, Tree};

/// The identifiers in a piece of code (keywords included), in order: maximal runs of
/// `[A-Za-z0-9_]` that do not start with a digit.
pub fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
        .filter(|w| w.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic()))
}

/// The C++ grammar every kwb tree is built with.
pub fn language() -> Language {
    tree_sitter_cpp::LANGUAGE.into()
}

/// A parsed source file.
///
/// Invariant: `masked.len() == source.len()`, and `masked` differs from `source` only
/// inside the ranges of `blanks`, where every byte but `\n` became a space. Node byte
/// ranges are therefore valid in both strings.
pub struct Parsed {
    /// The user's text, unchanged.
    pub source: String,
    /// The text tree-sitter parsed.
    pub masked: String,
    /// The syntax tree of `masked`.
    pub tree: Tree,
    /// What the pre-pass blanked, in source order.
    pub blanks: Vec<Blank>,
    /// ERROR and MISSING nodes, in source order.
    pub diagnostics: Vec<SyntaxDiagnostic>,
}

impl Parsed {
    /// The text of a node as the user wrote it.
    pub fn text(&self, node: tree_sitter::Node<'_>) -> &str {
        &self.source[node.byte_range()]
    }

    /// The text of a node as tree-sitter saw it (blanked macros are spaces).
    pub fn masked_text(&self, node: tree_sitter::Node<'_>) -> &str {
        &self.masked[node.byte_range()]
    }

    /// The blanks right before byte `start`, separated from it and from each other
    /// only by whitespace, in source order: the keywords and attribute macros
    /// (`__global__`, `CUTE_HOST_DEVICE`) that stand before the node tree-sitter built.
    pub fn leading_blanks(&self, start: usize) -> &[Blank] {
        let before = self.blanks.partition_point(|b| b.range.end <= start);
        let mut first = before;
        let mut at = start;
        for (i, blank) in self.blanks[..before].iter().enumerate().rev() {
            if self.masked[blank.range.end..at].trim().is_empty() {
                at = blank.range.start;
                first = i;
            } else {
                break;
            }
        }
        &self.blanks[first..before]
    }

    /// Blanks that lie inside `range`, in source order.
    pub fn blanks_in(&self, range: std::ops::Range<usize>) -> &[Blank] {
        let start = self.blanks.partition_point(|b| b.range.start < range.start);
        let end = self.blanks.partition_point(|b| b.range.start < range.end);
        &self.blanks[start..end.max(start)]
    }

    /// Diagnostics that lie inside `range`, including a zero-width MISSING token at
    /// its very end (the `}` a function lacks sits exactly there).
    pub fn diagnostics_in(&self, range: std::ops::Range<usize>) -> &[SyntaxDiagnostic] {
        let start = self
            .diagnostics
            .partition_point(|d| d.range.start < range.start);
        let end = self.diagnostics.partition_point(|d| {
            d.range.start < range.end || (d.range.is_empty() && d.range.start == range.end)
        });
        &self.diagnostics[start..end.max(start)]
    }
}

/// Parses CUDA C++ with the built-in macro table.
pub fn parse(source: &str) -> Parsed {
    parse_with(source, MacroTable::builtin())
}

/// Parses CUDA C++ with the given macro table.
///
/// When the plain parse has syntax errors and the file has `#if` conditionals,
/// it is parsed again keeping only the first branch of each conditional
/// ([`Conditionals::FirstBranch`]); the parse with fewer diagnostics wins.
pub fn parse_with(source: &str, table: &MacroTable) -> Parsed {
    let mut parser = Parser::new();
    parser
        .set_language(&language())
        .expect("the bundled tree-sitter-cpp matches the tree-sitter ABI");
    let first = parse_masked(&mut parser, source, table, Conditionals::Keep, None);
    if first.diagnostics.is_empty() || !has_conditional(source) {
        return first;
    }
    let second = parse_masked(
        &mut parser,
        source,
        table,
        Conditionals::FirstBranch,
        Some(&first),
    );
    if second.diagnostics.len() < first.diagnostics.len() {
        second
    } else {
        first
    }
}

/// Parses `source` masked in `mode`. With `previous` (a parse of the same source in
/// another mode) the parse is incremental: the masked texts differ only where
/// directives and branches were blanked, and tree-sitter reuses the rest.
fn parse_masked(
    parser: &mut Parser,
    source: &str,
    table: &MacroTable,
    mode: Conditionals,
    previous: Option<&Parsed>,
) -> Parsed {
    let Masked { text, blanks } = prepass::mask(source, table, mode);
    let old = previous.map(|p| {
        let mut tree = p.tree.clone();
        for edit in edits(&p.masked, &text) {
            tree.edit(&edit);
        }
        tree
    });
    // Without a timeout or a cancellation flag tree-sitter always returns a tree.
    let tree = parser
        .parse(&text, old.as_ref())
        .expect("tree-sitter returns a tree when no timeout is set");
    let diagnostics = diagnostics::collect(&tree);
    Parsed {
        source: source.to_owned(),
        masked: text,
        tree,
        blanks,
        diagnostics,
    }
}

/// The same-length edits that turn `old` into `new` (which have equal lengths and
/// newlines), one per run of differing bytes.
fn edits(old: &str, new: &str) -> Vec<tree_sitter::InputEdit> {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let mut out = Vec::new();
    let mut row = 0usize;
    let mut line_start = 0usize;
    let mut i = 0usize;
    while i < a.len() {
        if a[i] == b[i] {
            if a[i] == b'\n' {
                row += 1;
                line_start = i + 1;
            }
            i += 1;
            continue;
        }
        let start = i;
        let start_point = tree_sitter::Point::new(row, start - line_start);
        while i < a.len() && a[i] != b[i] {
            i += 1;
        }
        // Only non-newline bytes differ, so the run stays on one line.
        let end_point = tree_sitter::Point::new(row, i - line_start);
        out.push(tree_sitter::InputEdit {
            start_byte: start,
            old_end_byte: i,
            new_end_byte: i,
            start_position: start_point,
            old_end_position: end_point,
            new_end_position: end_point,
        });
    }
    out
}

fn has_conditional(source: &str) -> bool {
    source.lines().any(|line| {
        let line = line.trim_start();
        line.strip_prefix('#')
            .map(str::trim_start)
            .is_some_and(|d| d.starts_with("if"))
    })
}

#[cfg(test)]
mod tests;
