//! Errors of this crate: only a malformed macro table can fail.

use miette::Diagnostic;
use thiserror::Error;

/// A problem with data handed to the syntax layer.
#[derive(Debug, Error, Diagnostic)]
pub enum SyntaxError {
    /// A line of a macro table does not have the `NAME SHAPE` form.
    #[error("macro table line {line}: {reason}")]
    #[diagnostic(
        code(kwb::syntax::bad_macro_table),
        help("each line is `NAME word` or `NAME call`; `#` starts a comment")
    )]
    BadMacroTable { line: usize, reason: String },
}
