//! The host model a Track A trace is checked against, stage by stage, when the
//! inputs are known (a controlled-input rung the harness dumped):
//!
//! - **Operands, by provenance.** Each run of 8 traced operand values along K (a
//!   16-byte chunk of a shared tile, 8 consecutive k of a register fragment row, or
//!   one element of a fragment probed once a k step, followed over 8 steps) is
//!   looked up by content in the operand matrix. On `wide_int` inputs (integers in
//!   [-8, 8]) a run is all but unique, so the lookup says which row and which K slice
//!   the kernel really fed the MMA, with no knowledge of the kernel's layout. Per warp,
//!   every row it consumes must meet every K slice equally often: a slice never met, met
//!   twice, met from a stray row, or values that are no slice of the input at all are an
//!   operand-load (or descriptor) defect, named by K range and rows.
//! - **Accumulator, by placement.** The accumulator a warp holds after the mainloop is
//!   located in the host product `A·Bᵀ`: at its recorded coordinates, at a shifted
//!   position (coordinates local to a warp or CTA), or — without coordinates — as the
//!   multiset of a tile. A tile found nowhere means the MMA/accumulate stage (or the
//!   operand arrangement it read) is wrong.
//! - **Shared-memory arrangement.** Where operand chunks carry their raw position,
//!   the arrangement they lie in (unswizzled, 128-byte swizzle) is read from where
//!   each chunk's K slice sits.
//! - **Accumulator, by the traced operands.** Where an operand is no slice of the
//!   input, the accumulator is held to the product of the operand values the trace
//!   shows at their coordinates: equal, the MMA consumed what the probes show, so
//!   their coordinates are the MMA's and the operand really was read that way.
//! - **Accumulator, by the other swizzle.** Where shared tiles lie in one swizzle and
//!   the accumulator is no tile of the product, it is held to the inputs' product
//!   read the way an MMA reads a tile written with the other swizzle: equal, the map
//!   that wrote the tiles and the MMA's descriptor disagree.
//!
//! - **Operands, exchanged.** Each run of an operand is also looked up in the other
//!   input: runs of its own input in some steps and the other's in others is an MMA
//!   handed the other operand's tile in those steps.
//! - **Accumulator, by K slices.** Where the operands were not probed and the
//!   accumulator is no tile of the product, it is held to sums of matched K-slice
//!   products (A's slice t with B's slice t) with whole counts: found, the K loop's
//!   count is what is wrong (or a step fed another step's tiles); not found, A's
//!   values met B's of another k or row.
//!
//! No IO and no GPU: the caller decodes the trace and reads the dumped inputs.

mod accumulator;
mod arrangement;
mod exchange;
mod matrix;
mod provenance;
mod ranges;
mod slice_counts;
mod traced_product;
mod transposed;

pub use crate::accumulator::{AccumulatorReport, Placement, locate_accumulators};
pub use crate::arrangement::{Arrangement, arrangement};
pub use crate::exchange::{Exchange, check_exchange};
pub use crate::matrix::{Matrix, Product};
pub use crate::provenance::{
    Cut, Located, OperandReport, ProvenanceIndex, UNIT, Unit, Units, check_operand, step_units_of,
    units_of,
};
pub use crate::ranges::Ranges;
pub use crate::slice_counts::{SliceCounts, SliceReading, check_slice_counts};
pub use crate::traced_product::{
    TracedOperands, TracedProduct, check_swizzle_mismatch, swizzle_swapped_k,
};
pub use crate::transposed::{TransposedTile, transposed_tile};

#[cfg(test)]
mod tests;
