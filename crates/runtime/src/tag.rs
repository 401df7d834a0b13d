//! Instantiation tags: the 32-bit FNV-1a hash of a gate's text.
//!
//! The instrumenter stores `tag(gate)` in every probe of that gate, and
//! `kwb::tag_of` in the header computes the same value at compile time, so a record
//! can be traced back to the gate (`REDUCTION_SIZE == 6144`) that enabled it.

/// The gate of a probe the user gave no `--gate`: enabled in every instantiation.
pub const UNGATED: &str = "true";

/// The instantiation tag of a gate text (FNV-1a, 32 bits, over its UTF-8 bytes).
pub const fn tag(gate: &str) -> u32 {
    let bytes = gate.as_bytes();
    let mut hash: u32 = 0x811c_9dc5;
    let mut i = 0;
    while i < bytes.len() {
        hash = (hash ^ bytes[i] as u32).wrapping_mul(0x0100_0193);
        i += 1;
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::tag;

    #[test]
    fn matches_the_headers_static_asserts() {
        // kwb_trace.cuh asserts the same two values at compile time.
        assert_eq!(tag(""), 0x811c_9dc5);
        assert_eq!(tag("a"), 0xe40c_292c);
        assert!(crate::HEADER.contains("tag_of(\"a\") == 0xe40c292cu"));
    }

    #[test]
    fn differs_between_gates() {
        assert_ne!(tag("REDUCTION_SIZE == 6144"), tag("REDUCTION_SIZE == 2048"));
    }
}
