//! The accumulator as the transpose of its own tile of A·Bᵀ.
//!
//! An MMA handed B's tile as A and A's tile as B computes, on a square tile at origin
//! (m0, n0), `acc(m0 + i, n0 + j) = Σ_k B(n0 + i, k) · A(m0 + j, k) = P(m0 + j, n0 + i)`:
//! every value is right, each at the other's place across the tile's diagonal. No
//! count of K slices (the loop) and no other K offset (a load) makes that pattern on
//! `wide_int` inputs, so it names operands fed the wrong way round even where no
//! operand was probed.
//!
//! Invariant: judged only from cells with coordinates in the problem's frame (the
//! caller's shift), one value each, every one held to `P` at its mirrored place; the
//! tile's origin is the smallest (m, n) of the cells, so the traced cells must be one
//! CTA's square tile.

use kwb_runtime::Trace;

use crate::matrix::Product;
use crate::slice_counts::cells;

/// The final accumulator held to its tile's transpose.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TransposedTile {
    /// Accumulator values after the mainloop.
    pub cells: usize,
    /// Of them, equal to `P` at the mirrored place.
    pub matched: usize,
    /// Why nothing was judged, when nothing was.
    pub unjudged: Option<String>,
}

impl TransposedTile {
    /// Every value is its tile's transpose.
    pub fn explains(&self) -> bool {
        self.unjudged.is_none() && self.cells > 0 && self.matched == self.cells
    }

    /// One line for the evidence.
    pub fn describe(&self) -> String {
        match &self.unjudged {
            Some(why) => format!("the accumulator as its tile's transpose: not judged ({why})"),
            None => format!(
                "the accumulator as its tile's transpose: {} of {} values equal A·Bᵀ mirrored across the tile's diagonal",
                self.matched, self.cells
            ),
        }
    }
}

/// `trace`'s final accumulator, moved by `shift` into the problem's frame, against the
/// transpose of its square tile of `product`.
pub fn transposed_tile(trace: &Trace, product: &Product, shift: (i64, i64)) -> TransposedTile {
    let unjudged = |why: String| TransposedTile {
        unjudged: Some(why),
        ..TransposedTile::default()
    };
    let cells = match cells(trace, shift, (product.m, product.n)) {
        Ok(c) if !c.is_empty() => c,
        Ok(_) => return unjudged("no accumulator after the mainloop".to_owned()),
        Err(why) => return unjudged(why),
    };
    let (m0, n0) = (
        cells.iter().map(|c| c.0).min().unwrap_or(0),
        cells.iter().map(|c| c.1).min().unwrap_or(0),
    );
    let (m1, n1) = (
        cells.iter().map(|c| c.0).max().unwrap_or(0),
        cells.iter().map(|c| c.1).max().unwrap_or(0),
    );
    if m1 - m0 != n1 - n0 {
        return unjudged(format!(
            "the traced tile is {} × {}, not square",
            m1 - m0 + 1,
            n1 - n0 + 1
        ));
    }
    let matched = cells
        .iter()
        .filter(|&&(m, n, v)| {
            let (mm, nn) = (m0 + (n - n0), n0 + (m - m0));
            product.matches(mm as i64, nn as i64, v as f32)
        })
        .count();
    TransposedTile {
        cells: cells.len(),
        matched,
        unjudged: None,
    }
}
