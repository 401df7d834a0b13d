//! Sets of integers shown as ranges: `0..64, 128..192`.

use std::collections::BTreeSet;
use std::fmt;

/// A set of integers, printed as half-open ranges of consecutive members.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Ranges(pub BTreeSet<i64>);

impl Ranges {
    pub fn insert(&mut self, v: i64) {
        self.0.insert(v);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The members `other` does not hold.
    pub fn without(&self, other: &Ranges) -> Ranges {
        Ranges(self.0.difference(&other.0).copied().collect())
    }

    /// The half-open ranges `[start, end)` of consecutive members, in order.
    pub fn spans(&self) -> Vec<(i64, i64)> {
        let mut out: Vec<(i64, i64)> = Vec::new();
        for &v in &self.0 {
            match out.last_mut() {
                Some((_, end)) if *end == v => *end = v + 1,
                _ => out.push((v, v + 1)),
            }
        }
        out
    }

    /// The spans with each bound multiplied by `scale` (K slices of 8 to k).
    pub fn scaled(&self, scale: i64) -> String {
        let spans = self.spans();
        let shown: Vec<String> = spans
            .iter()
            .take(6)
            .map(|(a, b)| format!("{}..{}", a * scale, b * scale))
            .collect();
        let mut text = shown.join(", ");
        if spans.len() > 6 {
            text.push_str(&format!(" and {} more", spans.len() - 6));
        }
        text
    }
}

impl fmt::Display for Ranges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.scaled(1))
    }
}

impl Extend<i64> for Ranges {
    fn extend<I: IntoIterator<Item = i64>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl FromIterator<i64> for Ranges {
    fn from_iter<I: IntoIterator<Item = i64>>(iter: I) -> Ranges {
        Ranges(iter.into_iter().collect())
    }
}
