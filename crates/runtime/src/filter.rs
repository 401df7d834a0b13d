//! The runtime filter, `kwb::Filter` in `kwb_trace.cuh`.
//!
//! The filter lives in the traced module's `__constant__` memory under the symbol
//! [`symbols::FILTER`](crate::symbols::FILTER). Probes outside it return before doing
//! any work. A host program sets it with `kwb::set_filter`; kwb's own runner writes
//! [`Filter::to_le_bytes`] to the symbol between launches.

use serde::Serialize;

use crate::layout::{Le, mirror};

/// The size of the filter in bytes.
pub const FILTER_SIZE: usize = 24;

mirror! {
    /// Which probes record: one CTA or all, and a range of K tiles.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
    pub struct Filter {
        /// The CTA's x to record; -1: every CTA.
        pub cta_x: i32,
        /// The CTA's y to record; -1: every CTA.
        pub cta_y: i32,
        /// The CTA's z to record; -1: every CTA.
        pub cta_z: i32,
        /// The first K tile to record.
        pub k_begin: i32,
        /// One past the last K tile to record; probes outside the K loop always pass.
        pub k_end: i32,
        /// 0 turns every probe off.
        pub on: u32,
    }
}

const _: () = assert!(std::mem::size_of::<Filter>() == FILTER_SIZE);

impl Filter {
    /// Every CTA and every K tile: the filter a traced module starts with unless
    /// its build set `KWB_TRACE_CTA_*` or `KWB_TRACE_K_*`.
    pub const ALL: Filter = Filter {
        cta_x: -1,
        cta_y: -1,
        cta_z: -1,
        k_begin: 0,
        k_end: i32::MAX,
        on: 1,
    };

    /// No probe records.
    pub const OFF: Filter = Filter {
        on: 0,
        ..Filter::ALL
    };

    /// Only the CTA at (x, y, z), every K tile.
    pub fn cta(x: i32, y: i32, z: i32) -> Filter {
        Filter {
            cta_x: x,
            cta_y: y,
            cta_z: z,
            ..Filter::ALL
        }
    }

    /// The same CTAs, only the K tiles in `range`.
    pub fn k_tiles(self, range: std::ops::Range<i32>) -> Filter {
        Filter {
            k_begin: range.start,
            k_end: range.end,
            ..self
        }
    }

    /// Encodes the filter as the device lays it out.
    pub fn to_le_bytes(&self) -> [u8; FILTER_SIZE] {
        let mut out = [0; FILTER_SIZE];
        let words = [
            self.cta_x.to_le_bytes(),
            self.cta_y.to_le_bytes(),
            self.cta_z.to_le_bytes(),
            self.k_begin.to_le_bytes(),
            self.k_end.to_le_bytes(),
            self.on.to_le_bytes(),
        ];
        for (chunk, word) in out.chunks_exact_mut(4).zip(words) {
            chunk.copy_from_slice(&word);
        }
        out
    }

    /// Decodes a filter read back from the device.
    pub fn from_le_bytes(bytes: &[u8; FILTER_SIZE]) -> Filter {
        let mut le = Le::new(bytes);
        Filter {
            cta_x: le.i32(),
            cta_y: le.i32(),
            cta_z: le.i32(),
            k_begin: le.i32(),
            k_end: le.i32(),
            on: le.u32(),
        }
    }
}

impl Default for Filter {
    fn default() -> Self {
        Filter::ALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let filter = Filter::cta(1, 0, 0).k_tiles(2..5);
        let bytes = filter.to_le_bytes();
        assert_eq!(&bytes[12..16], 2_i32.to_le_bytes());
        assert_eq!(Filter::from_le_bytes(&bytes), filter);
    }

    #[test]
    fn all_matches_the_header_defaults() {
        assert_eq!(
            Filter::ALL.to_le_bytes()[..4],
            (-1_i32).to_le_bytes(),
            "KWB_TRACE_CTA_X defaults to -1"
        );
        assert_eq!(Filter::default(), Filter::ALL);
        assert_eq!(Filter::OFF.on, 0);
    }
}
