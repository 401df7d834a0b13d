//! Errors of the kernel map: only user patterns can be wrong.

use miette::{Diagnostic, NamedSource, SourceSpan};
use thiserror::Error;

/// A problem with a pattern file.
#[derive(Debug, Error, Diagnostic)]
pub enum SitesError {
    /// The query does not compile against tree-sitter-cpp.
    #[error("pattern file does not compile: {message}")]
    #[diagnostic(
        code(kwb::sites::bad_query),
        help(
            "patterns are tree-sitter queries over tree-sitter-cpp; `kwb dump-tree FILE` shows node names"
        )
    )]
    BadQuery {
        message: String,
        #[source_code]
        src: NamedSource<String>,
        #[label("here")]
        span: SourceSpan,
    },
    /// The query captures nothing that names a site kind.
    #[error("pattern file captures no site kind")]
    #[diagnostic(
        code(kwb::sites::no_site_capture),
        help(
            "name the captured node after a kind: @mainloop @mma @operand @accumulator @operand-load @epilogue @tma-descriptor @sync"
        )
    )]
    NoSiteCapture {
        #[source_code]
        src: NamedSource<String>,
    },
}
