//! The kernel map: tree-sitter queries (`grammars/queries/`) and a few structural
//! rules turn a parsed CUDA/CUTLASS file into typed sites per kernel-like function.
//!
//! Pipeline of [`kernel_map`]: run the patterns once over the tree; give each hit to
//! the innermost function holding it; classify copies by direction; add calls of
//! same-file MMA and load wrappers; then, per function, find the K mainloops, the
//! operands and accumulators the MMAs use (following local definitions back to the
//! shared-memory tensor for descriptor operands), and the epilogue statements that
//! read the accumulator after the mainloop.

mod copies;
mod decls;
mod error;
mod fields;
mod fma;
mod functions;
mod index;
mod line_site;
mod mainloop;
mod mma;
mod model;
mod names;
mod patterns;
mod ptx_slots;
mod report;

pub use error::SitesError;
pub use functions::template_parameters;
pub use line_site::{LineSite, sites_of_line};
pub use model::{Confidence, Kernel, KernelMap, MmaArguments, Site, SiteKind, TemplateParam};
pub use names::is_accumulator_name;
pub use patterns::{BUILTIN as BUILTIN_QUERIES, Pattern, builtin as builtin_pattern};

use kwb_syntax::{Blank, Parsed};
use tree_sitter::Node;

/// Blanks inside `node` and those just before it, separated from it only by blanks
/// and whitespace (attribute macros stand before the node tree-sitter built).
pub(crate) fn blanks_around<'p>(parsed: &'p Parsed, node: Node<'_>) -> &'p [Blank] {
    let leading = parsed.leading_blanks(node.start_byte());
    let first = parsed
        .blanks
        .partition_point(|b| b.range.end <= node.start_byte())
        - leading.len();
    let end = parsed
        .blanks
        .partition_point(|b| b.range.start < node.end_byte());
    &parsed.blanks[first..end.max(first)]
}

/// Builds the kernel map of a parsed file with the built-in patterns and `user`'s.
pub fn kernel_map(parsed: &Parsed, user: &[Pattern]) -> KernelMap {
    report::build(parsed, user)
}

#[cfg(test)]
mod tests;
