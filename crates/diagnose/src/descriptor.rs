//! The static TMA descriptor check: each map the launcher encodes, its dims and
//! strides written in terms of the launcher's own parameters (the encoder's
//! parameters bound to the call's arguments), held to the canonical map of the operand
//! it covers. In kwb's problem an operand is K-major (A: M x K, B: N x K, each row
//! `ld` elements apart), so its map's innermost dimension is K, the next the rows, and
//! the row pitch is `ld` elements. A map that names the rows innermost, or takes its
//! pitch from the width K, differs from that canonical map.
//!
//! [`DescriptorIssue::received`] makes the same issue of a map the kernel received
//! (kwb-gpu decodes it and holds it to the buffer it covers).
//!
//! Only what the text shows is judged: a map whose call, operand or extents cannot be
//! read back to launcher parameters yields no finding, never a guessed one.

use serde::Serialize;

use crate::tensormap::MapDiff;

/// One map the launcher encodes, as the extraction read it.
#[derive(Clone, Copy, Debug)]
pub struct EncodedMap<'a> {
    /// The kernel parameter it fills.
    pub param: &'a str,
    /// The launcher's call that encodes it, e.g. `encode_kmajor_map(&tmap_a, A, M, K, lda, BM)`.
    pub call: &'a str,
    /// The line of the encoding (`cuTensorMapEncodeTiled`).
    pub line: usize,
    /// The parameter names of the function that encodes it.
    pub function_params: &'a [String],
    /// `globalDim` and `globalStrides` as written there (innermost first).
    pub dims: &'a [String],
    pub strides: &'a [String],
}

/// A map that differs from the canonical one: read from the source (the static
/// check), or from the bytes the kernel received (`kwb run`'s dynamic check, no line).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DescriptorIssue {
    pub param: String,
    /// The operand it covers (A or B; `none` for a received map that points at none of
    /// the run's buffers).
    pub operand: String,
    /// The line of the encoding; None for a map the kernel received (kwb run's
    /// dynamic check), which has none.
    pub line: Option<usize>,
    /// dims or strides; for a received map, the [`MapDiff`] field (`strides[0]`,
    /// `address`, `dtype`, `box_dim[0]`, `swizzle`, ...).
    pub field: &'static str,
    /// What the map holds, in the launcher's names (a received map: its value).
    pub found: String,
    /// What the canonical map holds (a received map: a clause that says it, and what
    /// the difference means).
    pub expected: String,
}

impl DescriptorIssue {
    /// The issue of a difference `diff` that the map `param`, as the kernel received it
    /// and covering `operand`, has from that operand's canonical map, or a rule of a
    /// well-formed map it breaks.
    pub fn received(param: &str, operand: &str, diff: &MapDiff) -> DescriptorIssue {
        let e = &diff.expected;
        // A rule states a range or a condition; an expectation is a value.
        let rule = e.contains(' ') || e.contains('=');
        let clause = match diff.field {
            _ if rule => format!("a well-formed map has {e}"),
            "address" => format!("{operand}'s buffer starts at {e}"),
            "strides[0]" => format!("{operand}'s rows are {e} bytes apart"),
            _ => format!("{operand}'s canonical map has {e}"),
        };
        DescriptorIssue {
            param: param.to_owned(),
            operand: operand.to_owned(),
            line: None,
            field: diff.field,
            found: diff.got.clone(),
            expected: format!("{clause}: {}", diff.why),
        }
    }

    /// One sentence.
    pub fn describe(&self) -> String {
        match self.line {
            None => format!(
                "`{}` (operand {}): the map the kernel received has {} {{{}}} where {}",
                self.param, self.operand, self.field, self.found, self.expected
            ),
            Some(line) => format!(
                "`{}` (operand {}, line {line}): {} {{{}}} where a K-major operand's map has {{{}}}",
                self.param, self.operand, self.field, self.found, self.expected
            ),
        }
    }
}

/// The maps of `maps` that differ from their operand's canonical map. `launcher` holds
/// the launcher's parameters as (name, role): roles `A`, `B`, `m`, `n`, `k`,
/// `leading-dimension`, as kwb-extract reads them.
pub fn check_descriptors(
    maps: &[EncodedMap<'_>],
    launcher: &[(&str, &str)],
) -> Vec<DescriptorIssue> {
    let mut out = Vec::new();
    for map in maps {
        out.extend(check_one(map, launcher));
    }
    out
}

fn check_one(map: &EncodedMap<'_>, launcher: &[(&str, &str)]) -> Vec<DescriptorIssue> {
    let role_of = |name: &str| launcher.iter().find(|(n, _)| *n == name).map(|(_, r)| *r);
    let Some(args) = call_args(map.call) else {
        return Vec::new();
    };
    if args.len() != map.function_params.len() || map.dims.len() != 2 || map.strides.is_empty() {
        return Vec::new();
    }
    // The encoder's parameters bound to the call's arguments (`&x` is x).
    let bind = |word: &str| -> String {
        map.function_params
            .iter()
            .position(|p| p == word)
            .map_or(word.to_owned(), |i| {
                args[i].trim_start_matches('&').trim().to_owned()
            })
    };
    let Some(operand) = args
        .iter()
        .map(|a| a.trim_start_matches('&').trim())
        .find(|a| matches!(role_of(a), Some("A" | "B")))
    else {
        return Vec::new();
    };
    let rows_role = if role_of(operand) == Some("A") {
        "m"
    } else {
        "n"
    };
    let pitch = args
        .iter()
        .map(|a| a.trim())
        .find(|a| role_of(a) == Some("leading-dimension"));
    // The roles an expression names, through the binding.
    let roles = |expr: &str| -> Vec<&str> {
        identifiers(expr)
            .iter()
            .filter_map(|w| role_of(&bind(w)))
            .collect()
    };
    let show = |exprs: &[String]| -> String {
        exprs
            .iter()
            .map(|e| {
                identifiers(e)
                    .iter()
                    .fold(e.clone(), |text, w| replace_word(&text, w, &bind(w)))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let names = |role: &str| {
        launcher
            .iter()
            .find(|(n, r)| *r == role && args.iter().any(|a| a.trim() == *n))
            .map_or(role.to_uppercase(), |(n, _)| (*n).to_owned())
    };
    let mut issues = Vec::new();
    let (inner, outer) = (roles(&map.dims[0]), roles(&map.dims[1]));
    if inner.contains(&rows_role) && outer.contains(&"k") && !inner.contains(&"k") {
        issues.push(DescriptorIssue {
            param: map.param.to_owned(),
            operand: operand.to_owned(),
            line: Some(map.line),
            field: "dims",
            found: show(map.dims),
            expected: format!("{}, {}", names("k"), names(rows_role)),
        });
    }
    let stride = roles(&map.strides[0]);
    if let Some(ld) = pitch
        && stride.contains(&"k")
        && !stride.contains(&"leading-dimension")
    {
        issues.push(DescriptorIssue {
            param: map.param.to_owned(),
            operand: operand.to_owned(),
            line: Some(map.line),
            field: "strides",
            found: show(&map.strides[..1]),
            expected: format!("{ld} * sizeof(element)"),
        });
    }
    issues
}

/// The top-level arguments of `callee(...)`.
fn call_args(call: &str) -> Option<Vec<String>> {
    let open = call.find('(')?;
    let close = call.rfind(')')?;
    let inner = call.get(open + 1..close)?;
    let mut args = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' | '>' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                args.push(inner[start..i].trim().to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner.trim().is_empty() {
        args.push(inner[start..].trim().to_owned());
    }
    Some(args)
}

fn identifiers(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else if !word.is_empty() {
            if !word.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                out.push(word.clone());
            }
            word.clear();
        }
    }
    out
}

/// `text` with the whole word `from` replaced by `to`.
fn replace_word(text: &str, from: &str, to: &str) -> String {
    if from == to {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once('\0')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        out.push_str(if word == from { to } else { &word });
        word.clear();
        if c != '\0' {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod received_tests {
    use super::*;

    fn diff(field: &'static str, got: &str, expected: &str, why: &str) -> MapDiff {
        MapDiff {
            field,
            got: got.to_owned(),
            expected: expected.to_owned(),
            why: why.to_owned(),
        }
    }

    #[test]
    fn a_received_map_s_difference_reads_as_the_operand_s_layout_or_a_rule() {
        let pitch = DescriptorIssue::received(
            "tmap_a",
            "A",
            &diff(
                "strides[0]",
                "2048",
                "2176",
                "the pitch is 1024 elements where 1088 are expected",
            ),
        );
        assert_eq!(
            pitch.describe(),
            "`tmap_a` (operand A): the map the kernel received has strides[0] {2048} where A's rows are 2176 bytes apart: the pitch is 1024 elements where 1088 are expected"
        );
        let rule = DescriptorIssue::received(
            "tmap_b",
            "B",
            &diff(
                "swizzle",
                "256-byte inner box",
                "<= 128 bytes",
                "the box's inner extent exceeds the swizzle span",
            ),
        );
        assert!(
            rule.describe()
                .ends_with("where a well-formed map has <= 128 bytes: the box's inner extent exceeds the swizzle span"),
            "{}",
            rule.describe()
        );
    }
}
