//! The headers a file includes, as its `#include` lines name them — what
//! `kwb-instrument --overlay` follows to find the library headers that hold a
//! kernel's sites (a CUTLASS collective, a megakernel task header).

/// One `#include` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Include {
    /// The name between the quotes or angle brackets (`cutlass/gemm/gemm.h`).
    pub name: String,
    /// `#include "…"`: looked up beside the including file first.
    pub quoted: bool,
}

/// The `#include` lines of `source`, in order. Lines inside `#if 0` are kept: an
/// include that is not compiled costs only a lookup.
pub fn includes(source: &str) -> Vec<Include> {
    source
        .lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix('#')?.trim_start();
            let rest = rest.strip_prefix("include")?.trim_start();
            let (close, quoted) = match rest.chars().next()? {
                '"' => ('"', true),
                '<' => ('>', false),
                _ => return None,
            };
            let name = rest[1..].split(close).next()?.trim();
            (!name.is_empty()).then(|| Include {
                name: name.to_owned(),
                quoted,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_spellings_and_skips_the_rest() {
        let source = "#include <cute/tensor.hpp>\n  #  include \"kwb_harness.cuh\" // x\n#include MACRO\n#define X <a.h>\nint include;\n";
        assert_eq!(
            includes(source),
            vec![
                Include {
                    name: "cute/tensor.hpp".into(),
                    quoted: false
                },
                Include {
                    name: "kwb_harness.cuh".into(),
                    quoted: true
                },
            ]
        );
    }
}
