//! A sorted, disjoint set of indels and the one pass that applies it.

use std::ops::Range;

use crate::{EditError, Indel, SourceMap, source_map::Replacement};

/// A set of [`Indel`]s against one original text.
///
/// Invariants, established by [`TextEditBuilder::finish`]:
/// - the indels are sorted by `delete.start`, and among equal starts an insertion
///   (empty `delete`) comes before the deletion that starts there;
/// - they are disjoint: each indel's `delete.end` is at most the next one's
///   `delete.start`, so no byte is deleted twice and no insertion falls strictly inside
///   a deleted range;
/// - insertions at the same offset keep the order in which they were added (pass
///   order);
/// - no indel is a no-op.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextEdit {
    indels: Vec<Indel>,
}

/// Collects indels in pass order; [`TextEditBuilder::finish`] checks and sorts them.
#[derive(Debug, Clone, Default)]
pub struct TextEditBuilder {
    indels: Vec<Indel>,
}

impl TextEdit {
    /// An empty builder.
    pub fn builder() -> TextEditBuilder {
        TextEditBuilder::default()
    }

    /// Whether the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        self.indels.is_empty()
    }

    /// The number of indels.
    pub fn len(&self) -> usize {
        self.indels.len()
    }

    /// The indels in application order (see the type's invariants).
    pub fn iter(&self) -> std::slice::Iter<'_, Indel> {
        self.indels.iter()
    }

    /// Both edits as one; on equal offsets `self`'s insertions come first.
    pub fn union(self, other: TextEdit) -> Result<TextEdit, EditError> {
        let mut indels = self.indels;
        indels.extend(other.indels);
        TextEditBuilder { indels }.finish()
    }

    /// Applies the edit to `text` in one left-to-right pass.
    ///
    /// Returns the new text and a [`SourceMap`] between it and `text`. Fails without
    /// a partial result if a range ends past `text` or splits a UTF-8 character.
    pub fn apply(&self, text: &str) -> Result<(String, SourceMap), EditError> {
        for indel in &self.indels {
            check_against(&indel.delete, text)?;
        }
        let inserted: usize = self.indels.iter().map(|i| i.insert.len()).sum();
        let deleted: usize = self.indels.iter().map(|i| i.delete.len()).sum();
        let mut output = String::with_capacity(text.len() + inserted - deleted);
        let mut replacements = Vec::with_capacity(self.indels.len());
        let mut cursor = 0;
        for indel in &self.indels {
            output.push_str(&text[cursor..indel.delete.start]);
            let start = output.len();
            output.push_str(&indel.insert);
            replacements.push(Replacement {
                original: indel.delete.clone(),
                output: start..output.len(),
            });
            cursor = indel.delete.end;
        }
        output.push_str(&text[cursor..]);
        let map = SourceMap::new(replacements, text.len(), output.len());
        Ok((output, map))
    }
}

impl<'a> IntoIterator for &'a TextEdit {
    type Item = &'a Indel;
    type IntoIter = std::slice::Iter<'a, Indel>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl TextEditBuilder {
    /// Inserts `text` before the byte at `offset`.
    pub fn insert(&mut self, offset: usize, text: impl Into<String>) -> &mut Self {
        self.push(Indel::insert(offset, text))
    }

    /// Deletes the bytes of `range`.
    pub fn delete(&mut self, range: Range<usize>) -> &mut Self {
        self.push(Indel::delete(range))
    }

    /// Replaces the bytes of `range` with `text`.
    pub fn replace(&mut self, range: Range<usize>, text: impl Into<String>) -> &mut Self {
        self.push(Indel::replace(range, text))
    }

    /// Adds one indel after those added so far.
    pub fn push(&mut self, indel: Indel) -> &mut Self {
        self.indels.push(indel);
        self
    }

    /// Sorts the indels and checks that they are disjoint.
    ///
    /// No-op indels are dropped. Bounds and character boundaries depend on the text
    /// and are checked by [`TextEdit::apply`].
    pub fn finish(&mut self) -> Result<TextEdit, EditError> {
        let mut indels = std::mem::take(&mut self.indels);
        if let Some(bad) = indels.iter().find(|i| i.delete.start > i.delete.end) {
            return Err(EditError::InvertedRange {
                range: bad.delete.clone(),
            });
        }
        indels.retain(|i| !i.is_noop());
        // Keep each indel's pass position so that an overlap names the earlier first.
        let mut order: Vec<usize> = (0..indels.len()).collect();
        // A stable sort: equal keys (insertions at one offset) keep pass order.
        order.sort_by_key(|&i| (indels[i].delete.start, indels[i].delete.end));
        // In this order two indels conflict exactly when the earlier one ends after
        // the later one starts, and any conflict implies one between neighbours.
        for pair in order.windows(2) {
            let (a, b) = (&indels[pair[0]], &indels[pair[1]]);
            if a.delete.end > b.delete.start {
                let (first, second) = if pair[0] < pair[1] { (a, b) } else { (b, a) };
                return Err(EditError::Overlap {
                    first: first.delete.clone(),
                    second: second.delete.clone(),
                });
            }
        }
        let mut slots: Vec<Option<Indel>> = indels.into_iter().map(Some).collect();
        let indels = order.iter().filter_map(|&i| slots[i].take()).collect();
        Ok(TextEdit { indels })
    }
}

/// Checks that `range` lies within `text` and on character boundaries.
fn check_against(range: &Range<usize>, text: &str) -> Result<(), EditError> {
    if range.end > text.len() {
        return Err(EditError::OutOfBounds {
            range: range.clone(),
            len: text.len(),
        });
    }
    match [range.start, range.end]
        .into_iter()
        .find(|&offset| !text.is_char_boundary(offset))
    {
        Some(offset) => Err(EditError::NotCharBoundary {
            range: range.clone(),
            offset,
        }),
        None => Ok(()),
    }
}
