//! Offsets and lines of an edited text mapped back to the original and forth.

use std::ops::Range;

/// Where a byte of the output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mapped {
    /// Copied from this byte offset of the original text. The end of the output maps
    /// to the end of the original.
    Original(usize),
    /// Part of text an edit inserted; `at` is the original offset the edit starts at
    /// (the insertion point, or the start of the range it replaced).
    Inserted { at: usize },
}

/// One applied indel: `original` was replaced by the bytes at `output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replacement {
    pub(crate) original: Range<usize>,
    pub(crate) output: Range<usize>,
}

/// The correspondence between an original text and the output of one
/// [`TextEdit::apply`](crate::TextEdit::apply).
///
/// Invariants: the replacements are in text order, with both their `original` and
/// their `output` ranges disjoint and non-decreasing; between two replacements (and
/// before the first and after the last) the output is a verbatim copy of the original,
/// so offsets there differ by a constant shift.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceMap {
    replacements: Vec<Replacement>,
    original_len: usize,
    output_len: usize,
}

impl SourceMap {
    pub(crate) fn new(
        replacements: Vec<Replacement>,
        original_len: usize,
        output_len: usize,
    ) -> SourceMap {
        SourceMap {
            replacements,
            original_len,
            output_len,
        }
    }

    /// The map of a text that no edit changed.
    pub fn identity(len: usize) -> SourceMap {
        SourceMap::new(Vec::new(), len, len)
    }

    /// The length in bytes of the original text.
    pub fn original_len(&self) -> usize {
        self.original_len
    }

    /// The length in bytes of the output text.
    pub fn output_len(&self) -> usize {
        self.output_len
    }

    /// Where the output byte at `output_offset` came from.
    ///
    /// Offsets past the end of the output are treated as its end.
    pub fn to_original(&self, output_offset: usize) -> Mapped {
        let offset = output_offset.min(self.output_len);
        // Replacements whose output lies wholly before `offset`.
        let before = self
            .replacements
            .partition_point(|r| r.output.end <= offset);
        match self.replacements.get(before) {
            Some(r) if r.output.start <= offset => Mapped::Inserted {
                at: r.original.start,
            },
            _ => match before.checked_sub(1).map(|i| &self.replacements[i]) {
                Some(r) => Mapped::Original(r.original.end + (offset - r.output.end)),
                None => Mapped::Original(offset),
            },
        }
    }

    /// Where the original byte at `original_offset` lands in the output.
    ///
    /// A byte that survives maps to its copy, which follows any text inserted at its
    /// offset; so for every `o` with `to_original(o) == Mapped::Original(p)`,
    /// `to_output(p) == o`. A deleted byte maps to the start of the text that replaced
    /// it. Offsets past the end of the original are treated as its end.
    pub fn to_output(&self, original_offset: usize) -> usize {
        let offset = original_offset.min(self.original_len);
        // Replacements whose deleted range ends at or before `offset`, including
        // insertions at `offset`.
        let before = self
            .replacements
            .partition_point(|r| r.original.end <= offset);
        match self.replacements.get(before) {
            Some(r) if r.original.start <= offset => r.output.start,
            _ => match before.checked_sub(1).map(|i| &self.replacements[i]) {
                Some(r) => r.output.end + (offset - r.original.end),
                None => offset,
            },
        }
    }

    /// The 1-based original line of the 1-based `output_line`, for compiler messages.
    ///
    /// A line that starts inside inserted text maps to the line of its insertion
    /// point. `output` and `original` must be the texts this map was built from;
    /// returns `None` if their lengths disagree with the map or `output_line` is not a
    /// line of `output`.
    pub fn original_line(&self, output: &str, original: &str, output_line: usize) -> Option<usize> {
        if output.len() != self.output_len || original.len() != self.original_len {
            return None;
        }
        let line_start = match output_line {
            0 => return None,
            1 => 0,
            n => output.match_indices('\n').nth(n - 2)?.0 + 1,
        };
        let offset = match self.to_original(line_start) {
            Mapped::Original(offset) | Mapped::Inserted { at: offset } => offset,
        };
        Some(original[..offset].bytes().filter(|&b| b == b'\n').count() + 1)
    }
}
