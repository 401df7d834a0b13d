//! Errors of this crate: edits that conflict with each other or with the text.

use std::ops::Range;

use miette::Diagnostic;
use thiserror::Error;

/// A set of edits that cannot be applied.
///
/// Ranges are byte ranges of the original text, so a caller that holds the text can
/// attach it with `miette::Report::with_source_code` and get both spans labelled.
#[derive(Debug, Clone, PartialEq, Eq, Error, Diagnostic)]
pub enum EditError {
    /// Two edits touch the same bytes: two deletions overlap, or an insertion falls
    /// strictly inside a deleted range. `first` was added before `second`.
    #[error("edits {first:?} and {second:?} overlap")]
    #[diagnostic(
        code(kwb::edit::overlap),
        help("merge the two edits into one, or move the insertion to an end of the deleted range")
    )]
    Overlap {
        #[label("first edit")]
        first: Range<usize>,
        #[label("second edit")]
        second: Range<usize>,
    },
    /// A range ends before it starts.
    #[error("edit range {range:?} ends before it starts")]
    #[diagnostic(
        code(kwb::edit::inverted_range),
        help("build ranges as `start..end` with `start <= end`")
    )]
    InvertedRange { range: Range<usize> },
    /// A range ends past the end of the text the edit is applied to.
    #[error("edit {range:?} ends past the end of the {len}-byte text")]
    #[diagnostic(
        code(kwb::edit::out_of_bounds),
        help("apply an edit to the text its offsets were taken from")
    )]
    OutOfBounds { range: Range<usize>, len: usize },
    /// A range starts or ends inside a multi-byte UTF-8 character.
    #[error("edit {range:?} splits a UTF-8 character at byte {offset}")]
    #[diagnostic(
        code(kwb::edit::not_char_boundary),
        help("take offsets from the parser's byte ranges, which fall on character boundaries")
    )]
    NotCharBoundary {
        #[label("inside a character")]
        range: Range<usize>,
        offset: usize,
    },
}
