//! Sites of the kernel map to probe edits: `if constexpr`-gated reads of the
//! register operands, the accumulator and the epilogue's stored values, emitted as
//! one [`kwb_edit::TextEdit`] over the original text.
//!
//! Invariants:
//! - every inserted byte lies between the markers of [`markers`], so
//!   `strip(instrument(x)) == x` byte for byte;
//! - instrumenting an instrumented file first strips it, so instrumenting twice
//!   equals instrumenting once, and keeps the original's file name
//!   ([`markers::original_name`]) in `#line` and the site table;
//! - probes are single-line insertions; the runtime header inserted at the top is
//!   followed by a `#line 1` directive, so every original line keeps its number;
//! - a probe runs only when `kwb::enabled` (the `KWB_TRACE` macro) and the gate hold at
//!   compile time, so a build without `KWB_TRACE` carries no probe code.

mod cute;
mod emit;
mod error;
mod folds;
mod fragments;
mod includes;
pub mod insitu;
pub mod markers;
mod nodes;
mod occupancy;
pub mod options;
pub mod overlay;
mod own_types;
mod plan;
mod probes;
mod tile;

pub use error::InstrumentError;
pub use includes::{Include, includes};
pub use markers::{is_instrumented, strip};
pub use plan::{Config, Plan, ProbeInfo, Probes, c_string, plan};

/// Instruments `source` (stripping earlier kwb insertions first) and returns the new
/// text with the plan that produced it.
pub fn instrument(source: &str, config: &Config) -> Result<(String, Plan), InstrumentError> {
    let original = strip(source)?;
    let parsed = kwb_syntax::parse(&original);
    let map = kwb_sites::kernel_map(&parsed, &[]);
    // An instrumented input keeps the name of the file it was made from.
    let renamed = markers::original_name(source).map(|file_name| Config {
        file_name,
        ..config.clone()
    });
    let plan = plan(&parsed, &map, renamed.as_ref().unwrap_or(config))?;
    let (text, _) = plan.edit.apply(&original)?;
    Ok((text, plan))
}

#[cfg(test)]
mod tests;
