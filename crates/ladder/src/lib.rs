//! Track B's controlled-input ladder, on the host: for a GEMM `D = alpha * A·B +
//! beta * C`, the inputs of each rung (already rounded to the kernel's input type),
//! the answer they must give, and the comparison of a kernel's output with it.
//!
//! Rungs with a closed-form answer are compared exactly (the answer rounded to the
//! output type, integers throughout, so any difference is a defect, not noise):
//! `zeros`, `ones` (every output is `alpha * K + beta`, + 1 with a bias), `seq-identity` (A a sequence of
//! small integers, B the identity: the output is A itself, the recipe for spotting a
//! wrong or transposed tile), `onehot-k:K0` (A selects the single K slice `K0`: a
//! dropped or duplicated K slice or pipeline stage shows), `small-int:SEED`
//! (integers in [-2, 2]: fp32 sums are exact). `random:SEED` is compared with a
//! documented tolerance. NaN and Inf are counted apart and never pass. Every
//! comparison reports the first mismatch and a per-tile grid of the largest error.
//!
//! No IO, no GPU: the runner (`kwb run`) launches the kernel and hands its output here.

mod compare;
mod dtype;
mod error;
mod problem;
mod rung;

pub use crate::compare::{Comparison, TileGrid, compare};
pub use crate::dtype::Dtype;
pub use crate::error::LadderError;
pub use crate::problem::{Activation, Problem};
pub use crate::rung::{Operands, Rung};
