//! A rung's error over the output as a heat map: |output - answer| max-pooled into at
//! most `MAX_CELLS` x `MAX_CELLS` cells, with the CTA tile grid it is drawn over.

use crate::pattern::ErrorGrid;

/// The most cells a heat map has along each axis.
pub const MAX_CELLS: usize = 256;

/// |output - answer| per cell; infinite where a cell holds a NaN or an Inf that the
/// answer does not.
#[derive(Clone, Debug, PartialEq)]
pub struct Heat {
    /// The output's shape.
    pub m: usize,
    pub n: usize,
    /// The CTA tile (rows, columns).
    pub tile: (usize, usize),
    /// Output rows and columns per cell.
    pub cell: (usize, usize),
    pub rows: usize,
    pub cols: usize,
    /// Row-major, rows x cols.
    pub values: Vec<f64>,
}

impl Heat {
    /// The heat map of `grid`.
    pub fn of(grid: &ErrorGrid<'_>) -> Heat {
        let (m, n) = (grid.m.max(1), grid.n.max(1));
        let cell = (m.div_ceil(MAX_CELLS), n.div_ceil(MAX_CELLS));
        let (rows, cols) = (m.div_ceil(cell.0), n.div_ceil(cell.1));
        let mut values = vec![0.0f64; rows * cols];
        for r in 0..grid.m {
            for c in 0..grid.n {
                let i = r * grid.n + c;
                let (o, a) = (f64::from(grid.output[i]), grid.answer[i]);
                let e = if o.is_finite() && a.is_finite() {
                    (o - a).abs()
                } else if o == a || (o.is_nan() && a.is_nan()) {
                    0.0
                } else {
                    f64::INFINITY
                };
                let at = (r / cell.0) * cols + c / cell.1;
                if e > values[at] {
                    values[at] = e;
                }
            }
        }
        Heat {
            m: grid.m,
            n: grid.n,
            tile: grid.tile,
            cell,
            rows,
            cols,
            values,
        }
    }

    /// The largest finite value (0 when none).
    pub fn peak(&self) -> f64 {
        self.values
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
    }
}
