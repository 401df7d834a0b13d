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
    /// Indexed by node kind id: whether some pattern's root node has that kind. None
    /// when a pattern's root is not one plain node kind (a wildcard, an alternation,
    /// siblings): such a query is run over the whole tree.
    roots: Option<Vec<bool>>,
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
        let roots = root_kinds(&query, source);
        Ok(Pattern {
            origin: origin.to_owned(),
            query,
            marks,
            roots,
        })
    }

    /// Indexed by node kind id: whether a pattern of this query can match a node of
    /// that kind as its root; None when some pattern's root is not a plain node kind.
    pub fn root_kinds(&self) -> Option<&[bool]> {
        self.roots.as_deref()
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

/// The node kind of each pattern's root, read from the pattern's text: the first
/// name after its opening parentheses. None when a pattern is not rooted or its root
/// is not one named node kind (`_`, `[…]`, a supertype, an anonymous node).
fn root_kinds(query: &Query, source: &str) -> Option<Vec<bool>> {
    let language = kwb_syntax::language();
    let mut roots = vec![false; language.node_kind_count()];
    for i in 0..query.pattern_count() {
        if !query.is_pattern_rooted(i) {
            return None;
        }
        let text = source
            .get(query.start_byte_for_pattern(i)..query.end_byte_for_pattern(i))?
            .trim_start_matches(|c: char| c == '(' || c.is_whitespace());
        let end = text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(text.len());
        let (name, rest) = text.split_at(end);
        if name.is_empty()
            || name == "_"
            || !rest.starts_with(|c: char| c.is_whitespace() || c == ')')
        {
            return None;
        }
        let id = language.id_for_node_kind(name, true);
        if id == 0 {
            return None;
        }
        *roots.get_mut(usize::from(id))? = true;
    }
    Some(roots)
}

/// Runs the built-in patterns and then `user`, returning hits in no set order.
/// `roots` are every node of the tree, in walk order, whose kind is marked by
/// [`Pattern::root_kinds`] of [`builtin`] (the index walk lists them).
pub fn run<'t>(parsed: &'t Parsed, roots: &[Node<'t>], user: &[Pattern]) -> Vec<Hit<'t>> {
    let mut hits = Vec::new();
    let builtin = builtin();
    match builtin.roots {
        Some(_) => run_rooted(builtin, parsed, roots, false, &mut hits),
        None => run_one(builtin, parsed, false, &mut hits),
    }
    for pattern in user {
        run_one(pattern, parsed, true, &mut hits);
    }
    hits
}

/// Matches `pattern` with each root node in turn as its root: the cursor descends
/// only as deep as a pattern begun there needs, instead of walking the whole tree
/// (thousands of asm operand and parameter lists in a CuTe MMA header).
fn run_rooted<'t>(
    pattern: &Pattern,
    parsed: &'t Parsed,
    roots: &[Node<'t>],
    user: bool,
    hits: &mut Vec<Hit<'t>>,
) {
    let mut cursor = QueryCursor::new();
    cursor.set_max_start_depth(Some(0));
    let text = parsed.masked.as_bytes();
    for &root in roots {
        let mut matches = cursor.matches(&pattern.query, root, text);
        while let Some(m) = matches.next() {
            push_captures(pattern, m, user, hits);
        }
    }
}

/// Matches `pattern` over the whole tree (user patterns, and the check that
/// [`run_rooted`] finds the same hits).
pub(crate) fn run_one<'t>(
    pattern: &Pattern,
    parsed: &'t Parsed,
    user: bool,
    hits: &mut Vec<Hit<'t>>,
) {
    let mut cursor = QueryCursor::new();
    let root = parsed.tree.root_node();
    let mut matches = cursor.matches(&pattern.query, root, parsed.masked.as_bytes());
    while let Some(m) = matches.next() {
        push_captures(pattern, m, user, hits);
    }
}

fn push_captures<'t>(
    pattern: &Pattern,
    m: &tree_sitter::QueryMatch<'_, 't>,
    user: bool,
    hits: &mut Vec<Hit<'t>>,
) {
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
