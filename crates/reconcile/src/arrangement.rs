//! How operand chunks lie in a shared tile read in raw order.

use crate::provenance::{Located, UNIT};

/// The arrangement of 16-byte chunks in a shared tile whose 128-byte lines each
/// hold 8 chunks of one row (a K-major tile 64 16-bit values deep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrangement {
    /// Chunk j of a line holds K slice j of its row.
    Unswizzled,
    /// Chunk j of line l holds K slice j ^ (l % 8): the 128-byte swizzle
    /// (CU_TENSOR_MAP_SWIZZLE_128B, wgmma's 128B layout).
    Swizzle128,
    /// Neither, or too few chunks to tell.
    Other,
}

impl Arrangement {
    pub fn describe(self) -> &'static str {
        match self {
            Arrangement::Unswizzled => "unswizzled (chunk j of each 128-byte line holds K slice j)",
            Arrangement::Swizzle128 => {
                "128-byte swizzled (chunk j of line l holds K slice j ^ (l % 8))"
            }
            Arrangement::Other => "neither unswizzled nor 128-byte swizzled",
        }
    }
}

/// Reads the arrangement from located chunks with their element index: a pattern
/// holds when every chunk on a line with l % 8 != 0 (where the two differ) follows it.
pub fn arrangement(raw: &[(u32, Located)]) -> Arrangement {
    let (mut plain, mut swizzled, mut telling) = (0, 0, 0);
    for (element, at) in raw {
        let chunk = *element as usize / UNIT;
        let (line, slot) = (chunk / 8, chunk % 8);
        if line % 8 == 0 {
            continue;
        }
        telling += 1;
        let slice = at.slice as usize % 8;
        if slice == slot {
            plain += 1;
        }
        if slice == slot ^ (line % 8) {
            swizzled += 1;
        }
    }
    if telling < 8 {
        Arrangement::Other
    } else if plain == telling {
        Arrangement::Unswizzled
    } else if swizzled == telling {
        Arrangement::Swizzle128
    } else {
        Arrangement::Other
    }
}
