//! Where evidence holds: the CTA tiles a rung's output got wrong, and the region of
//! the output a trace's CTA computed. A trace of one CTA speaks for that CTA's tile
//! only, so a reading that joins a trace to an output check ("operands and
//! accumulator right, output wrong: the epilogue") holds only where the wrong outputs
//! and the traced tile meet.

use kwb_runtime::{Kind, Trace};
use serde::Serialize;

/// Edge of the blocks [`WrongTiles`] also keeps its flags in: no CTA tile of a kernel
/// kwb knows is smaller, so a block wrong in every place means every CTA tile is wrong
/// whatever the real tile is.
pub const BLOCK: usize = 16;

/// The CTA tiles of an `m` x `n` output with wrong values in them.
///
/// Invariant: every entry of `wrong` names a tile inside the grid (row < rows(),
/// column < cols()) once, with a count > 0, in row-major order; `blocks` holds one
/// flag per [`BLOCK`] x [`BLOCK`] block of the output (row-major), set where the
/// block holds a wrong output. Where `tile_known` is false the tile is a guess, and
/// only the blocks say where the wrong outputs are.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WrongTiles {
    pub m: usize,
    pub n: usize,
    /// The CTA tile (rows, columns).
    pub tile: (usize, usize),
    /// The tile is the kernel's (from its template arguments or task table), not a
    /// default.
    pub tile_known: bool,
    /// (tile row, tile column, wrong outputs in it).
    pub wrong: Vec<(usize, usize, usize)>,
    #[serde(skip)]
    blocks: Vec<bool>,
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
    /// The wrong tiles of `wrong` (row-major, `m` x `n`, one flag per output), over
    /// the kernel's own CTA `tile`.
    pub fn of(m: usize, n: usize, tile: (usize, usize), wrong: &[bool]) -> WrongTiles {
        let (bm, bn) = (tile.0.max(1), tile.1.max(1));
        let cols = n.div_ceil(bn);
        let mut counts = vec![0usize; m.div_ceil(bm) * cols];
        let block_cols = n.div_ceil(BLOCK);
        let mut blocks = vec![false; m.div_ceil(BLOCK) * block_cols];
        for (i, _) in wrong.iter().enumerate().take(m * n).filter(|(_, w)| **w) {
            counts[(i / n / bm) * cols + i % n / bn] += 1;
            blocks[(i / n / BLOCK) * block_cols + i % n / BLOCK] = true;
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
            tile_known: true,
            wrong,
            blocks,
        }
    }

    /// The same wrong outputs seen in the transposed output (`n` x `m`): what a
    /// kernel that computes `Dᵀ = B·Aᵀ` (swap-AB) holds in its own frame.
    pub fn transposed(&self) -> WrongTiles {
        let (rows_b, cols_b) = (self.m.div_ceil(BLOCK), self.n.div_ceil(BLOCK));
        let mut blocks = vec![false; rows_b * cols_b];
        for (i, flag) in self.blocks.iter().enumerate() {
            // Block (r, c) of the output is block (c, r) of its transpose.
            let (r, c) = (i / cols_b.max(1), i % cols_b.max(1));
            if let Some(b) = blocks.get_mut(c * rows_b + r) {
                *b = *flag;
            }
        }
        let mut wrong: Vec<(usize, usize, usize)> =
            self.wrong.iter().map(|&(r, c, n)| (c, r, n)).collect();
        wrong.sort_unstable();
        WrongTiles {
            m: self.n,
            n: self.m,
            tile: (self.tile.1, self.tile.0),
            tile_known: self.tile_known,
            wrong,
            blocks,
        }
    }

    /// These tiles with the tile marked a guess (a default, not the kernel's).
    pub fn with_tile_guessed(self) -> WrongTiles {
        WrongTiles {
            tile_known: false,
            ..self
        }
    }

    pub fn rows(&self) -> usize {
        self.m.div_ceil(self.tile.0.max(1))
    }

    pub fn cols(&self) -> usize {
        self.n.div_ceil(self.tile.1.max(1))
    }

    /// Every [`BLOCK`] x [`BLOCK`] block holds a wrong output, so every CTA tile does,
    /// whatever the kernel's tile is.
    pub fn all(&self) -> bool {
        !self.blocks.is_empty() && self.blocks.iter().all(|b| *b)
    }

    /// Some wrong output certainly lies in `r`: a block that holds one lies wholly
    /// inside `r` (a block cut by `r`'s edge may hold its wrong output outside).
    fn meets(&self, r: &Region) -> bool {
        self.wrong_blocks().any(|b| r.contains(&b))
    }

    /// The regions of the blocks that hold a wrong output, row-major.
    fn wrong_blocks(&self) -> impl Iterator<Item = Region> + '_ {
        let block_cols = self.n.div_ceil(BLOCK);
        self.blocks
            .iter()
            .enumerate()
            .filter(|(_, w)| **w)
            .map(move |(i, _)| {
                let (br, bc) = (i / block_cols, i % block_cols);
                Region {
                    m0: (br * BLOCK) as i64,
                    m1: ((br + 1) * BLOCK).min(self.m) as i64,
                    n0: (bc * BLOCK) as i64,
                    n1: ((bc + 1) * BLOCK).min(self.n) as i64,
                }
            })
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

    /// Where these wrong outputs lie against `traced` (None: not known). A
    /// one-output region is a tile origin: with the kernel's tile known it stands for
    /// the tile that starts there; with the tile a guess it holds too little to find
    /// a wrong output in, and only a wrong output in every block places it.
    pub fn locate(&self, traced: Option<&Region>) -> Located {
        if self.all() {
            return Located::Inside;
        }
        let Some(r) = traced else {
            return Located::Unknown;
        };
        let origin = is_origin(r);
        let r = self.extent(r);
        if self.meets(&r) {
            return Located::Inside;
        }
        if origin && !self.tile_known {
            return Located::Unknown;
        }
        let first = if self.tile_known {
            self.wrong
                .first()
                .map(|&(row, col, _)| self.region(row, col))
        } else {
            self.wrong_blocks().next()
        };
        Located::Outside {
            first: first.unwrap_or(r),
        }
    }

    /// The traced region `r` as far as these tiles can place it: a tile origin (a
    /// one-output region) stands for the kernel's tile that starts there when the tile
    /// is known; anything else is itself.
    pub fn extent(&self, r: &Region) -> Region {
        if is_origin(r) && self.tile_known {
            Region {
                m0: r.m0,
                m1: (r.m0 + self.tile.0 as i64).min(self.m as i64),
                n0: r.n0,
                n1: (r.n0 + self.tile.1 as i64).min(self.n as i64),
            }
        } else {
            *r
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
            tile_known: self.tile_known && other.tile_known,
            wrong,
            blocks: self
                .blocks
                .iter()
                .zip(&other.blocks)
                .map(|(a, b)| *a || *b)
                .collect(),
        })
    }
}

/// A one-output region: a tile origin, not an extent.
fn is_origin(r: &Region) -> bool {
    r.m1 - r.m0 == 1 && r.n1 - r.n0 == 1
}

impl Region {
    /// `other` lies wholly inside `self`.
    pub fn contains(&self, other: &Region) -> bool {
        self.m0 <= other.m0 && other.m1 <= self.m1 && self.n0 <= other.n0 && other.n1 <= self.n1
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
            region.map_or("?".to_owned(), |r| tiles.extent(r).describe()),
            first.describe()
        )),
        Located::Unknown => Err(format!(
            "{} of {} tiles are wrong and the trace does not say which tile its CTA computed",
            tiles.wrong.len(),
            tiles.rows() * tiles.cols()
        )),
    }
}
