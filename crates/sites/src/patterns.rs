//! Site patterns: the tree-sitter queries of `grammars/queries/`, and users' own.
//!
//! The built-in files are concatenated into one query, compiled once, and run in one
//! pass over the tree. A capture named after a [`SiteKind`] marks a site; `@copy`
//! marks a copy that [`crate::copies`] classifies, `@descriptor-alias` the name of
//! an alias of a TMA descriptor type; captures starting with `_` only feed predicates.

use std::sync::OnceLock;

use kwb_syntax::Parsed;
use miette::{NamedSource, SourceSpan};
use streaming_iterator::StreamingIterator;
use tree_sitter::{Node, Query, QueryCursor};

use crate::{SiteKind, SitesError};

/// The built-in query files, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    ("mma.scm", include_str!("../../../grammars/queries/mma.scm")),
    (
        "operand_load.scm",
        include_str!("../../../grammars/queries/operand_load.scm"),
    ),
    (
        "tma_descriptor.scm",
        include_str!("../../../grammars/queries/tma_descriptor.scm"),
    ),
    (
        "sync.scm",
        include_str!("../../../grammars/queries/sync.scm"),
    ),
    (
        "epilogue.scm",
        include_str!("../../../grammars/queries/epilogue.scm"),
    ),
];

/// What a capture marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A site of this kind.
    Site(SiteKind),
    /// A copy whose direction decides its kind.
    Copy,
    /// A scalar multiply-accumulate candidate that [`crate::fma`] decides.
    Accumulate,
    /// The name of an alias of a TMA descriptor type.
    DescriptorAlias,
}

/// One compiled query with the meaning of each of its captures.
pub struct Pattern {
    /// Where it came from (`mma.scm`, or the user's path).
    pub origin: String,
    query: Query,
    marks: Vec<Option<Mark>>,
}

/// A node a pattern marked.
#[derive(Clone, Copy, Debug)]
pub struct Hit<'t> {
    /// What it marks.
    pub mark: Mark,
    /// The node.
    pub node: Node<'t>,
    /// Whether a user pattern found it.
    pub user: bool,
}

impl Pattern {
    /// Compiles `source`; `origin` names it in errors.
    pub fn compile(origin: &str, source: &str) -> Result<Pattern, SitesError> {
        let query =
            Query::new(&kwb_syntax::language(), source).map_err(|e| SitesError::BadQuery {
                message: e.message.lines().next().unwrap_or("").to_owned(),
                src: NamedSource::new(origin, source.to_owned()),
                span: SourceSpan::from(
                    e.offset.min(source.len())..(e.offset + 1).min(source.len()),
                ),
            })?;
        let marks: Vec<Option<Mark>> = query
            .capture_names()
            .iter()
            .map(|name| match *name {
                "copy" => Some(Mark::Copy),
                "accumulate" => Some(Mark::Accumulate),
                "descriptor-alias" => Some(Mark::DescriptorAlias),
                other => SiteKind::from_name(other).map(Mark::Site),
            })
            .collect();
        if marks.iter().all(Option::is_none) {
            return Err(SitesError::NoSiteCapture {
                src: NamedSource::new(origin, source.to_owned()),
            });
        }
        Ok(Pattern {
            origin: origin.to_owned(),
            query,
            marks,
        })
    }

    /// Capture names that are neither a site kind, `copy`, `accumulate`,
    /// `descriptor-alias`, nor `_`-prefixed.
    pub fn unknown_captures(&self) -> Vec<&str> {
        self.query
            .capture_names()
            .iter()
            .zip(&self.marks)
            .filter(|(name, mark)| mark.is_none() && !name.starts_with('_'))
            .map(|(name, _)| *name)
            .collect()
    }
}

/// The built-in patterns, compiled once per process.
pub fn builtin() -> &'static Pattern {
    static BUILT: OnceLock<Pattern> = OnceLock::new();
    BUILT.get_or_init(|| {
        let text: String = BUILTIN
            .iter()
            .map(|(_, t)| *t)
            .collect::<Vec<_>>()
            .join("\n");
        Pattern::compile("grammars/queries", &text)
            .expect("built-in queries compile (checked by a unit test)")
    })
}

/// Runs the built-in patterns and then `user`, returning hits in no set order.
pub fn run<'t>(parsed: &'t Parsed, user: &[Pattern]) -> Vec<Hit<'t>> {
    let mut hits = Vec::new();
    run_one(builtin(), parsed, false, &mut hits);
    for pattern in user {
        run_one(pattern, parsed, true, &mut hits);
    }
    hits
}

fn run_one<'t>(pattern: &Pattern, parsed: &'t Parsed, user: bool, hits: &mut Vec<Hit<'t>>) {
    let mut cursor = QueryCursor::new();
    let root = parsed.tree.root_node();
    let mut matches = cursor.matches(&pattern.query, root, parsed.masked.as_bytes());
    while let Some(m) = matches.next() {
        for capture in m.captures {
            if let Some(mark) = pattern.marks[capture.index as usize] {
                hits.push(Hit {
                    mark,
                    node: capture.node,
                    user,
                });
            }
        }
    }
}
