//! The markers around every inserted span, and `strip`, which removes them.
//!
//! Invariant: every byte kwb inserts lies between an [`OPEN`] and the next
//! [`CLOSE`], and neither marker occurs in user code, so removing each marked span
//! restores the original byte for byte (`strip(instrument(x)) == x`).

use crate::InstrumentError;

/// Opens an inserted span.
pub const OPEN: &str = "/*kwb:{*/";
/// Closes an inserted span.
pub const CLOSE: &str = "/*}:kwb*/";

/// Wraps inserted text in the markers.
pub fn wrap(text: &str) -> String {
    debug_assert!(!text.contains(OPEN) && !text.contains(CLOSE));
    format!("{OPEN}{text}{CLOSE}")
}

/// Whether `text` holds any kwb insertion.
pub fn is_instrumented(text: &str) -> bool {
    text.contains(OPEN)
}

/// Removes every marked span. An unmatched marker is an error naming its offset, and
/// nothing is returned, so a damaged file is never half-stripped.
pub fn strip(text: &str) -> Result<String, InstrumentError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    while let Some(open) = text[rest..].find(OPEN).map(|p| rest + p) {
        if let Some(stray) = text[rest..open].find(CLOSE) {
            return Err(InstrumentError::UnmatchedMarker {
                offset: rest + stray,
            });
        }
        let Some(close) = text[open + OPEN.len()..]
            .find(CLOSE)
            .map(|p| open + OPEN.len() + p)
        else {
            return Err(InstrumentError::UnmatchedMarker { offset: open });
        };
        if text[open + OPEN.len()..close].contains(OPEN) {
            return Err(InstrumentError::UnmatchedMarker { offset: open });
        }
        out.push_str(&text[rest..open]);
        rest = close + CLOSE.len();
    }
    if let Some(stray) = text[rest..].find(CLOSE) {
        return Err(InstrumentError::UnmatchedMarker {
            offset: rest + stray,
        });
    }
    out.push_str(&text[rest..]);
    Ok(out)
}
