//! One insertion, deletion or replacement of a byte range.

use std::ops::Range;

/// Deletes `delete` from the original text and inserts `insert` in its place.
///
/// `delete` is a byte range of the original text. An empty `delete` range makes the
/// indel a pure insertion at `delete.start`; an empty `insert` makes it a pure
/// deletion.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Indel {
    pub delete: Range<usize>,
    pub insert: String,
}

impl Indel {
    /// Inserts `text` before the byte at `offset`.
    pub fn insert(offset: usize, text: impl Into<String>) -> Indel {
        Indel {
            delete: offset..offset,
            insert: text.into(),
        }
    }

    /// Deletes the bytes of `range`.
    pub fn delete(range: Range<usize>) -> Indel {
        Indel {
            delete: range,
            insert: String::new(),
        }
    }

    /// Replaces the bytes of `range` with `text`.
    pub fn replace(range: Range<usize>, text: impl Into<String>) -> Indel {
        Indel {
            delete: range,
            insert: text.into(),
        }
    }

    /// Whether applying this indel changes nothing.
    pub fn is_noop(&self) -> bool {
        self.delete.is_empty() && self.insert.is_empty()
    }
}
