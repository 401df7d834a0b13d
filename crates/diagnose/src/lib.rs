//! The stage verdict of `kwb diagnose`, as plain functions over what the two tracks
//! measured (no IO, no GPU):
//!
//! - [`judge_ones`]: the stage a Track A trace shows on the all-ones rung, from the
//!   closed forms of uniform inputs; [`judge_structured`]: the stage a full trace on
//!   integer inputs shows against kwb-reconcile's host model of the operands.
//! - [`classify`]: the shape of a rung's error over the output (one factor, a K tile
//!   counted twice, a row or column band, a period, a transpose, one CTA tile).
//! - [`judge_ladder`]: the stages the controlled-input ladder's outcomes point at
//!   (always a draft, except every rung right).
//! - [`WrongTiles`] and [`Region`]: where a rung's output is wrong and which tile a
//!   trace's CTA computed; a trace's reading joins an output check only where they
//!   meet, and a full trace that clears operands and accumulator narrows the ladder's
//!   candidates there (elimination).
//! - [`reconcile`]: the two together, VERDICT or DRAFT, with what is missing;
//!   [`nan_origin`]: the first stage and K tile with a NaN or an Inf.
//! - [`check_descriptors`]: the TMA maps a launcher encodes against the canonical map
//!   of the operand each covers.
//! - [`mma_swizzle`]: the swizzle the source's MMA reads shared-memory operands with
//!   (`grammars/mma_swizzle.txt`), for a received map's swizzle to be held to.
//! - [`decode`]: a driver-encoded `CUtensorMap` read back into its parameters
//!   (reverse-engineered layout), and [`check_map`]: those held to the expected map.
//! - [`Diagnosis`] and its renderings ([`terminal`], [`markdown`]; serialized, the
//!   JSON schema), and the heat maps ([`heat_png`], [`heat_svg`]).
//!
//! Every function returns a [`Finding`]: the stage, the stages the same evidence
//! cannot tell apart from it, VERDICT or DRAFT, and the confound that keeps a draft a
//! draft. A wrong VERDICT is the worst bug this crate can have, so every path to one
//! is unit-tested next to the confound that must turn it into a draft.

mod descriptor;
mod fault;
mod heat;
mod ladder;
mod mma_swizzle;
mod pattern;
mod picture;
mod place;
mod report;
mod stage;
mod tensormap;
mod trace_ones;
mod trace_structured;
mod verdict;

pub use crate::descriptor::{DescriptorIssue, EncodedMap, check_descriptors};
pub use crate::fault::{
    Direction, FaultAccess, FaultEvidence, Problem, Space, judge_fault, parse_memcheck,
};
pub use crate::heat::{Heat, MAX_CELLS};
pub use crate::ladder::{EpilogueInputs, RungOutcome, RungState, judge_ladder};
pub use crate::mma_swizzle::{MmaSwizzle, mma_swizzle};
pub use crate::pattern::{Axis, Classified, ErrorGrid, Pattern, classify};
pub use crate::picture::{heat_png, heat_svg};
pub use crate::place::{Located, Region, WrongTiles};
pub use crate::report::{Diagnosis, Evidence, SiteRef, headline, markdown, sites_of, terminal};
pub use crate::stage::{Cleared, Confound, Finding, OutputCheck, Stage, Status};
pub use crate::tensormap::{
    DecodeError, ExpectedMap, MapDiff, MapDtype, Swizzle, TensorMapFields, Unexplained, check_map,
    decode, encode_layout,
};
pub use crate::trace_ones::{OnesRun, judge_ones};
pub use crate::trace_structured::{StructuredRun, judge_structured};
pub use crate::verdict::{
    NanOrigin, Verdict, combine_traces, nan_origin, reconcile, with_descriptors, with_fault,
    with_unchecked_maps,
};

#[cfg(test)]
mod tests;
