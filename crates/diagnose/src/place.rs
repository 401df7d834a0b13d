//! Where evidence holds: the CTA tiles a rung's output got wrong, and the region of
//! the output a trace's CTA computed. A trace of one CTA speaks for that CTA's tile
//! only, so a reading that joins a trace to an output check ("operands and
//! accumulator right, output wrong: the epilogue") holds only where the wrong outputs
//! and the traced tile meet.

use kwb_runtime::{Kind, Trace};
use serde::Serialize;

/// The CTA tiles of an `m` x `n` output with wrong values in them.
///
/// Invariant: every entry of `wrong` names a tile inside the grid (row < rows(),
/// column < cols()) once, with a count > 0, in row-major order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WrongTiles {
    pub m: usize,
    pub n: usize,
    /// The CTA tile (rows, columns).
    pub tile: (usize, usize),
    /// (tile row, tile column, wrong outputs in it).
    pub wrong: Vec<(usize, usize, usize)>,
}

/// A rectangle of the output, half-open: rows `m0..m1`, columns `n0..n1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    pub m0: i64,
    pub m1: i64,
    pub n0: i64,
    pub n1: i64,
}

/// Where the wrong outputs lie against a traced region.
#[derive(Clone, Debug, PartialEq)]
pub enum Located {
    /// Some wrong output lies in the traced region (or every tile is wrong, so the
    /// traced CTA's tile is wrong wherever it lies).
    Inside,
    /// The traced region holds no wrong output; the first wrong tile is named.
    Outside { first: Region },
    /// The traced region is unknown and only some tiles are wrong.
    Unknown,
}

impl WrongTiles {
    /// The wrong tiles of `wrong` (row-major, `m` x `n`, one flag per output).
    pub fn of(m: usize, n: usize, tile: (usize, usize), wrong: &[bool]) -> WrongTiles {
        let (bm, bn) = (tile.0.max(1), tile.1.max(1));
        let cols = n.div_ceil(bn);
        let mut counts = vec![0usize; m.div_ceil(bm) * cols];
        for (i, _) in wrong.iter().enumerate().take(m * n).filter(|(_, w)| **w) {
            counts[(i / n / bm) * cols + i % n / bn] += 1;
        }
        let wrong = counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(t, c)| (t / cols, t % cols, *c))
            .collect();
        WrongTiles {
            m,
            n,
            tile: (bm, bn),
            wrong,
        }
    }

    pub fn rows(&self) -> usize {
        self.m.div_ceil(self.tile.0.max(1))
    }

    pub fn cols(&self) -> usize {
        self.n.div_ceil(self.tile.1.max(1))
    }

    /// Every tile holds a wrong output.
    pub fn all(&self) -> bool {
        !self.wrong.is_empty() && self.wrong.len() == self.rows() * self.cols()
    }

    /// The output region of tile (`row`, `col`).
    fn region(&self, row: usize, col: usize) -> Region {
        let (bm, bn) = self.tile;
        Region {
            m0: (row * bm) as i64,
            m1: ((row + 1) * bm).min(self.m) as i64,
            n0: (col * bn) as i64,
            n1: ((col + 1) * bn).min(self.n) as i64,
        }
    }

    /// Where these wrong tiles lie against `traced` (None: not known).
    pub fn locate(&self, traced: Option<&Region>) -> Located {
        if self.all() {
            return Located::Inside;
        }
        let Some(r) = traced else {
            return Located::Unknown;
        };
        let mut first = None;
        for &(row, col, _) in &self.wrong {
            let t = self.region(row, col);
            if t.meets(r) {
                return Located::Inside;
            }
            first.get_or_insert(t);
        }
        match first {
            Some(first) => Located::Outside { first },
            // Nothing wrong at all: nothing lies inside.
            None => Located::Outside { first: *r },
        }
    }

    /// The union of `self` and `other` (the same grid), or `None` when the grids differ.
    pub fn union(&self, other: &WrongTiles) -> Option<WrongTiles> {
        if (self.m, self.n, self.tile) != (other.m, other.n, other.tile) {
            return None;
        }
        let mut wrong = self.wrong.clone();
        for &(r, c, k) in &other.wrong {
            match wrong.iter_mut().find(|(wr, wc, _)| (*wr, *wc) == (r, c)) {
                Some(w) => w.2 = w.2.max(k),
                None => wrong.push((r, c, k)),
            }
        }
        wrong.sort_unstable();
        Some(WrongTiles {
            m: self.m,
            n: self.n,
            tile: self.tile,
            wrong,
        })
    }
}

impl Region {
    pub fn meets(&self, other: &Region) -> bool {
        self.m0 < other.m1 && other.m0 < self.m1 && self.n0 < other.n1 && other.n0 < self.n1
    }

    /// `m0..m1 x n0..n1` for the reports.
    pub fn describe(&self) -> String {
        format!(
            "rows {}..{}, columns {}..{}",
            self.m0, self.m1, self.n0, self.n1
        )
    }
}

/// The output tile the traced CTA computed, as its records name it: the tile origin
/// every accumulator and epilogue record carries, as a one-output region (the tile
/// that holds it is the CTA's). None when no record names an origin or the records
/// name several (a trace of more than one CTA).
pub fn traced_origin(trace: &Trace) -> Option<Region> {
    let mut origin = None;
    for r in trace
        .records
        .iter()
        .filter(|r| matches!(r.kind(), Some(Kind::Accumulator | Kind::Epilogue)))
    {
        if r.tile_m < 0 || r.tile_n < 0 {
            return None;
        }
        let here = (i64::from(r.tile_m), i64::from(r.tile_n));
        match origin {
            None => origin = Some(here),
            Some(o) if o != here => return None,
            Some(_) => {}
        }
    }
    origin.map(|(m, n)| Region {
        m0: m,
        m1: m + 1,
        n0: n,
        n1: n + 1,
    })
}

/// How an output check that found the output wrong bears on a trace of `region`:
/// `Ok(())` when a wrong output lies in the traced tile (or every tile is wrong),
/// else why the trace's reading cannot be joined to it.
pub fn joinable(output: &crate::stage::OutputCheck, region: Option<&Region>) -> Result<(), String> {
    let Some(tiles) = &output.wrong_tiles else {
        return Err(
            "the check does not say which tiles are wrong, so the traced tile may be right"
                .to_owned(),
        );
    };
    match tiles.locate(region) {
        Located::Inside => Ok(()),
        Located::Outside { first } => Err(format!(
            "the traced tile ({}) holds no wrong output; the first wrong tile is {}",
            region.map_or("?".to_owned(), Region::describe),
            first.describe()
        )),
        Located::Unknown => Err(format!(
            "{} of {} tiles are wrong and the trace does not say which tile its CTA computed",
            tiles.wrong.len(),
            tiles.rows() * tiles.cols()
        )),
    }
}
