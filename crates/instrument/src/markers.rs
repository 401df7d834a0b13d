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

/// The name of the file an instrumented `text` was made from: the `#line 1 "NAME"`
/// directive that ends kwb's first insertion (the runtime header), its C escapes
/// undone. `None` for a text kwb did not instrument. Instrumenting an instrumented file
/// keeps this name, so `#line` and the site table still point at the original.
pub fn original_name(text: &str) -> Option<String> {
    let start = text.find(OPEN)? + OPEN.len();
    let span = &text[start..start + text[start..].find(CLOSE)?];
    let quoted = span.rsplit_once("\n#line 1 \"")?.1;
    let mut name = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(name),
            '\\' => match chars.next()? {
                'n' => name.push('\n'),
                other => name.push(other),
            },
            c => name.push(c),
        }
    }
    None
}
