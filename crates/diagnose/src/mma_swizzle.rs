//! The shared-memory swizzle an MMA's operand descriptors read a tile with, as the
//! source spells it (`grammars/mma_swizzle.txt`: a hand-built GMMA descriptor's layout
//! bits, CuTe's layout types and atoms). A TMA map that writes the tile with another
//! swizzle is well formed on its own, so only this expectation can catch it.
//!
//! Invariant: an expectation comes only from the text, and only when every line that
//! names a swizzle names the same one; a file that names two gives none.

use crate::tensormap::Swizzle;

/// The table shipped in `grammars/mma_swizzle.txt`.
const TABLE: &str = include_str!("../../../grammars/mma_swizzle.txt");

/// The swizzle the MMA reads with, and the line that says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmaSwizzle {
    pub swizzle: Swizzle,
    /// 1-based.
    pub line: usize,
    /// That line, trimmed.
    pub text: String,
}

/// The table's (swizzle, text without whitespace) rows.
fn rows() -> Vec<(Swizzle, String)> {
    TABLE
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let (name, text) = l.split_once(char::is_whitespace)?;
            let swizzle = match name {
                "none" => Swizzle::None,
                "32B" => Swizzle::B32,
                "64B" => Swizzle::B64,
                "128B" => Swizzle::B128,
                _ => return None,
            };
            Some((swizzle, squeeze(text)))
        })
        .collect()
}

fn squeeze(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

fn word(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `pattern` occurs in `line` (both without whitespace) as a whole: not the
/// tail of a longer name or number (`31ull << 62` is no `1ull << 62`).
fn contains(line: &str, pattern: &str) -> bool {
    let first = pattern.chars().next();
    let last = pattern.chars().next_back();
    line.match_indices(pattern).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + pattern.len()..].chars().next();
        let joins_before = word(first) && word(before);
        let joins_after = word(last) && word(after);
        !joins_before && !joins_after
    })
}

/// The swizzle `source` says its MMA reads shared-memory operands with: Some only
/// when the lines that name one all name the same (the first such line is given).
pub fn mma_swizzle(source: &str) -> Option<MmaSwizzle> {
    let rows = rows();
    let mut found: Option<MmaSwizzle> = None;
    for (i, raw) in source.lines().enumerate() {
        let code = raw.split("//").next().unwrap_or_default();
        let line = squeeze(code);
        for (swizzle, pattern) in &rows {
            if !contains(&line, pattern) {
                continue;
            }
            match &found {
                None => {
                    found = Some(MmaSwizzle {
                        swizzle: *swizzle,
                        line: i + 1,
                        text: raw.trim().to_owned(),
                    });
                }
                Some(f) if f.swizzle != *swizzle => return None,
                Some(_) => {}
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_built_gmma_descriptor_names_its_swizzle() {
        let src = "__device__ uint64_t desc(uint32_t a) {\n  uint64_t d = a >> 4;\n  d |= uint64_t(1) << 62;  // swizzle mode: 128B\n  return d;\n}\n";
        let s = mma_swizzle(src).expect("one swizzle");
        assert_eq!((s.swizzle, s.line), (Swizzle::B128, 3));
        assert_eq!(s.text, "d |= uint64_t(1) << 62;  // swizzle mode: 128B");
    }

    #[test]
    fn cute_atoms_and_layout_types_name_theirs() {
        let atom = "using SmemLayoutAtom = GMMA::Layout_K_SW64_Atom<half_t>;";
        assert_eq!(mma_swizzle(atom).unwrap().swizzle, Swizzle::B64);
        let ty = "desc.bitfield.layout_type_ = uint8_t(GMMA::LayoutType::INTERLEAVE);";
        assert_eq!(mma_swizzle(ty).unwrap().swizzle, Swizzle::None);
    }

    #[test]
    fn two_swizzles_a_comment_or_a_longer_number_give_no_expectation() {
        let two = "using A = GMMA::Layout_K_SW128_Atom<T>;\nusing B = GMMA::Layout_K_SW32_Atom<T>;";
        assert_eq!(mma_swizzle(two), None);
        assert_eq!(mma_swizzle("// d |= uint64_t(1) << 62;"), None);
        assert_eq!(mma_swizzle("d |= 31ull << 62;"), None);
        assert_eq!(mma_swizzle("d |= 1ull << 621;"), None);
        // The same swizzle twice is one expectation, at its first line.
        let same = "x |= 1ull << 62;\ny |= uint64_t(1) << 62;";
        assert_eq!(mma_swizzle(same).unwrap().line, 1);
    }

    #[test]
    fn every_row_of_the_table_is_read() {
        let rows = rows();
        let data = TABLE
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .count();
        assert_eq!(rows.len(), data);
    }
}
