//! Each record's CTA tile origin (`tile_m`, `tile_n`): the kernel's own locals that
//! hold the first output row and column of its tile, named as in
//! `grammars/tile_origins.txt` and computed from `blockIdx`
//! (`const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;`).
//!
//! Invariant: a probe names a local only where it is in scope (declared before the
//! probe, in a block that holds it), so the probe compiles wherever the kernel does;
//! everywhere else the record says -1.

use std::ops::Range;
use std::sync::OnceLock;

use kwb_syntax::Parsed;

use crate::nodes::enclosing;

/// What the probe texts write for the tile origin; [`Origins::text`] replaces it.
pub(crate) const TILE: &str = "/*kwb:tile*/-1, -1";

const TABLE: &str = include_str!("../../../grammars/tile_origins.txt");

/// The names of the table, per axis (m, n).
fn names() -> &'static (Vec<String>, Vec<String>) {
    static NAMES: OnceLock<(Vec<String>, Vec<String>)> = OnceLock::new();
    NAMES.get_or_init(|| {
        let (mut m, mut n) = (Vec::new(), Vec::new());
        for line in TABLE.lines().map(str::trim) {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("m") => m.extend(words.map(str::to_owned)),
                Some("n") => n.extend(words.map(str::to_owned)),
                _ => {}
            }
        }
        (m, n)
    })
}

/// One local holding an origin.
#[derive(Debug, Clone)]
struct Origin {
    /// 0 for m, 1 for n.
    axis: usize,
    name: String,
    /// The block it is declared in, and where its declaration ends.
    scope: Range<usize>,
    after: usize,
}

/// The origin locals of the functions instrumented.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origins(Vec<Origin>);

impl Origins {
    /// Adds the origin locals of the function definition at `range`.
    pub fn add(&mut self, parsed: &Parsed, range: &Range<usize>) {
        let Some(function) = parsed
            .tree
            .root_node()
            .descendant_for_byte_range(range.start, range.end)
        else {
            return;
        };
        let src = &parsed.source;
        let (m, n) = names();
        let mut stack = vec![function];
        while let Some(node) = stack.pop() {
            if node.kind() == "init_declarator"
                && let (Some(d), Some(v)) = (
                    node.child_by_field_name("declarator"),
                    node.child_by_field_name("value"),
                )
                && src[v.byte_range()].contains("blockIdx")
            {
                let name = src[d.byte_range()].trim();
                let axis = if m.iter().any(|x| x == name) {
                    Some(0)
                } else if n.iter().any(|x| x == name) {
                    Some(1)
                } else {
                    None
                };
                if let (Some(axis), Some(scope)) = (axis, enclosing(node, "compound_statement")) {
                    let declaration = node.parent().unwrap_or(node);
                    self.0.push(Origin {
                        axis,
                        name: name.to_owned(),
                        scope: scope.byte_range(),
                        after: declaration.end_byte(),
                    });
                }
            }
            let mut cursor = node.walk();
            stack.extend(node.named_children(&mut cursor));
        }
    }

    /// `text` with [`TILE`] replaced by the origin locals in scope at byte `at`.
    pub fn text(&self, text: &str, at: usize) -> String {
        if !text.contains(TILE) {
            return text.to_owned();
        }
        let axis = |a: usize| {
            self.0
                .iter()
                .filter(|o| o.axis == a && o.after <= at && o.scope.contains(&at))
                .max_by_key(|o| o.after)
                .map_or_else(
                    || "-1".to_owned(),
                    |o| format!("static_cast<int>({})", o.name),
                )
        };
        text.replace(TILE, &format!("{}, {}", axis(0), axis(1)))
    }
}
