//! An operand that holds the other operand's values in some K steps.
//!
//! An MMA call handed B's tile as its A operand (the arguments exchanged in one of a
//! kernel's MMA calls, a pointer to the wrong stage array) consumes runs of B's rows
//! where A's were due. On `wide_int` inputs a run of 8 values is all but unique, so
//! each run of the probed operand is looked up in both inputs: runs of its own input
//! in some steps and of the other's in others is no consistent frame (a swap-AB
//! kernel exchanges the operands in every step, and is read in its own frame before
//! this). Zero runs are left out: they are what padding and out-of-bounds fill hold.
//!
//! Invariant: a run counts as the other input's only when the other input holds it
//! and the operand's own does not, so a value both hold never makes an exchange.

use crate::provenance::{ProvenanceIndex, Units};

/// Where the runs of one probed operand are found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Exchange {
    /// Runs that are not all zeros.
    pub runs: usize,
    /// Of them, found in the operand's own input only.
    pub own: usize,
    /// Found in the other input only.
    pub other: usize,
    /// Found in neither.
    pub neither: usize,
}

impl Exchange {
    /// Some steps fed the operand's own input and others the other input's, and
    /// (almost) every run is one or the other: at least 1 in 20 runs each way, at
    /// most 1 in 20 in neither.
    pub fn mixed(&self) -> bool {
        self.runs > 0
            && self.own * 20 >= self.runs
            && self.other * 20 >= self.runs
            && self.neither * 20 <= self.runs
    }

    /// One line for the evidence.
    pub fn describe(&self) -> String {
        format!(
            "{} of {} runs of 8 are its own input's, {} the other input's, {} neither's",
            self.own, self.runs, self.other, self.neither
        )
    }
}

/// `units` of one operand looked up in its own input's index and the other's.
pub fn check_exchange(units: &Units, own: &ProvenanceIndex, other: &ProvenanceIndex) -> Exchange {
    let mut out = Exchange::default();
    for u in units
        .units
        .iter()
        .filter(|u| u.values.iter().any(|v| *v != 0.0))
    {
        out.runs += 1;
        match (
            own.find(&u.values).is_empty(),
            other.find(&u.values).is_empty(),
        ) {
            (false, _) => out.own += 1,
            (true, false) => out.other += 1,
            (true, true) => out.neither += 1,
        }
    }
    out
}
