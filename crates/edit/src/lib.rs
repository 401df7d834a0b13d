//! Source edits as plain data, applied in one place.
//!
//! An [`Indel`] deletes a byte range of the *original* text and inserts a string in its
//! place (rust-analyzer's `Indel`). A [`TextEdit`] is a set of indels that is sorted and
//! free of overlaps; it is built with [`TextEditBuilder`], which reports overlapping
//! edits as [`EditError::Overlap`] instead of silently dropping one of them.
//!
//! [`TextEdit::apply`] walks the text once, left to right, and returns the new text
//! together with a [`SourceMap`] (ruff's `SourceMap`) that translates byte offsets and
//! lines of the output back to the original and the other way round.
//!
//! Every offset handed to this crate is a byte offset into the original text, as
//! tree-sitter's `byte_range` and miette's `SourceSpan` use. The crate parses nothing
//! and does no IO.

mod error;
mod indel;
mod source_map;
mod text_edit;

pub use error::EditError;
pub use indel::Indel;
pub use source_map::{Mapped, SourceMap};
pub use text_edit::{TextEdit, TextEditBuilder};

#[cfg(test)]
mod tests;
