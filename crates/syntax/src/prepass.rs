//! The offset-preserving pre-pass: blank what tree-sitter-cpp cannot parse.
//!
//! A small lexer walks the text, skipping comments, string and character literals and
//! preprocessor lines, and blanks (every byte but `\n` becomes a space):
//! - identifiers listed in the [`MacroTable`] (with their `( … )` for `call` entries);
//! - CUDA launch configurations `<<< … >>>`, so `k<<<g, b>>>(x)` parses as a call;
//! - the skipped branch of `#if 0` (dead code is not a site).
//!
//! Invariant: the output has exactly the length of the input and the same newlines.

use std::ops::Range;

use crate::{MacroShape, MacroTable};

/// What a blanked range held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlankKind {
    /// A macro or CUDA keyword from the table, by name.
    Macro(String),
    /// A `#pragma` line.
    Pragma,
    /// A `<<< … >>>` launch configuration.
    Launch,
    /// Text inside `#if 0` (including the directive lines).
    DeadCode,
    /// A directive, or a branch after the first, of an `#if` that split a statement
    /// (see [`Conditionals::FirstBranch`]).
    InactiveBranch,
    /// The name of an explicit operator call (`this->operator++()`,
    /// `operator()(x)`), which tree-sitter-cpp cannot parse.
    OperatorCall,
    /// A `= {}` initializer or a `= {…}` default argument, which tree-sitter-cpp
    /// rejects on parameters.
    EmptyDefault,
}

/// One blanked range of the original text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blank {
    /// Bytes of the original text.
    pub range: Range<usize>,
    /// What was there.
    pub kind: BlankKind,
}

/// The pre-pass output.
pub struct Masked {
    /// Same length as the input; blanks are spaces.
    pub text: String,
    /// Blanked ranges in source order, disjoint.
    pub blanks: Vec<Blank>,
}

/// How the pre-pass treats `#if`/`#else` conditionals other than `#if 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conditionals {
    /// Leave them to tree-sitter, which parses each branch as a unit.
    Keep,
    /// Keep only the first branch of each conditional and blank the directives, for
    /// code whose branches split a statement (`} #if X else if … #endif`).
    FirstBranch,
}

/// Runs the pre-pass.
pub fn mask(source: &str, table: &MacroTable, mode: Conditionals) -> Masked {
    let bytes = source.as_bytes();
    let mut blanks: Vec<Blank> = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' => {
                line_start = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' | b'\x0c' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let at_line_start = std::mem::replace(&mut line_start, false);
        if b == b'#' && at_line_start {
            let end = directive_end(bytes, i);
            if let Some(dead) = dead_branch(bytes, i, end) {
                blanks.push(Blank {
                    range: dead.clone(),
                    kind: BlankKind::DeadCode,
                });
                i = dead.end;
                line_start = true;
                continue;
            }
            if directive(bytes, i, end).0 == "pragma" {
                // `#pragma unroll` may sit between a loop header and its unbraced
                // body, where tree-sitter-cpp accepts no directive.
                blanks.push(Blank {
                    range: i..end,
                    kind: BlankKind::Pragma,
                });
                i = end;
                continue;
            }
            if mode == Conditionals::FirstBranch {
                let name = directive(bytes, i, end).0;
                let range = match name {
                    "if" | "ifdef" | "ifndef" | "endif" => Some(i..end),
                    "else" | "elif" | "elifdef" | "elifndef" => Some(i..branch_end(bytes, end)),
                    _ => None,
                };
                if let Some(range) = range {
                    i = range.end;
                    blanks.push(Blank {
                        range,
                        kind: BlankKind::InactiveBranch,
                    });
                    continue;
                }
            }
            i = end;
            continue;
        }
        if let Some(end) = skip_comment_or_literal(bytes, i) {
            i = end;
            continue;
        }
        if b == b'_' || b.is_ascii_alphabetic() {
            let start = i;
            while i < bytes.len() && (bytes[i] == b'_' || bytes[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            // A raw string literal R"( … )" or a prefixed literal u8"…".
            if i < bytes.len() && bytes[i] == b'"' && is_literal_prefix(&source[start..i]) {
                i = skip_string(bytes, i, source[start..i].ends_with('R'));
                continue;
            }
            let name = &source[start..i];
            if name == "operator" {
                if let Some(range) = explicit_operator_call(bytes, start, i) {
                    i = range.end;
                    blanks.push(Blank {
                        range,
                        kind: BlankKind::OperatorCall,
                    });
                }
                continue;
            }
            match table.get(name) {
                None => {}
                Some(MacroShape::Word) => blanks.push(Blank {
                    range: start..i,
                    kind: BlankKind::Macro(name.to_owned()),
                }),
                Some(MacroShape::Pragma) => blanks.push(Blank {
                    range: start..i,
                    kind: BlankKind::Pragma,
                }),
                Some(MacroShape::Qualifier) if qualified_name_follows(bytes, i) => {
                    blanks.push(Blank {
                        range: start..i,
                        kind: BlankKind::Macro(name.to_owned()),
                    });
                }
                Some(MacroShape::Qualifier) => {}
                Some(shape) => {
                    let end = match next_code_byte(bytes, i) {
                        Some(open) if bytes[open] == b'(' => {
                            balanced_end(bytes, open, b'(', b')').unwrap_or(i)
                        }
                        _ => i,
                    };
                    let first = match shape {
                        MacroShape::TemplateParam => preceding_comma(bytes, start).unwrap_or(start),
                        _ => start,
                    };
                    let applies = match shape {
                        MacroShape::BraceCall => {
                            end > i && next_code_byte(bytes, end).is_some_and(|b| bytes[b] == b'{')
                        }
                        _ => true,
                    };
                    if applies {
                        blanks.push(Blank {
                            range: first..end,
                            kind: BlankKind::Macro(name.to_owned()),
                        });
                        i = end;
                    }
                }
            }
            continue;
        }
        if b == b'='
            && let Some(end) = empty_default(bytes, i)
        {
            blanks.push(Blank {
                range: i..end,
                kind: BlankKind::EmptyDefault,
            });
            i = end;
            continue;
        }
        if bytes[i..].starts_with(b"<<<")
            && let Some(end) = launch_end(bytes, i)
        {
            blanks.push(Blank {
                range: i..end,
                kind: BlankKind::Launch,
            });
            i = end;
            continue;
        }
        i += 1;
    }
    let mut text = bytes.to_vec();
    for blank in &blanks {
        for byte in &mut text[blank.range.clone()] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    }
    let text = String::from_utf8(text).expect("blanking whole ranges to ASCII keeps UTF-8");
    Masked { text, blanks }
}

/// The end (exclusive, at the `\n` or EOF) of the preprocessor line at `start`,
/// following `\` continuations and block comments.
fn directive_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => return i,
            b'\\' if bytes.get(i + 1) == Some(&b'\n') => i += 2,
            b'\\' if bytes.get(i + 1) == Some(&b'\r') && bytes.get(i + 2) == Some(&b'\n') => i += 3,
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = skip_block_comment(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    i
}

/// The directive name and its argument text, e.g. (`if`, `0`).
fn directive(bytes: &[u8], start: usize, end: usize) -> (&str, &str) {
    let text = std::str::from_utf8(&bytes[start + 1..end]).unwrap_or("");
    let text = text.trim_start();
    let name_len = text
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(text.len());
    let (name, rest) = text.split_at(name_len);
    let rest = rest.split("//").next().unwrap_or("");
    let rest = rest.split("/*").next().unwrap_or("");
    (name, rest.trim())
}

/// For an `#if 0` directive at `start`, the range to blank: from the directive through
/// its `#else`/`#elif` line (whose branch stays), or through its `#endif` line.
fn dead_branch(bytes: &[u8], start: usize, end: usize) -> Option<Range<usize>> {
    let (name, arg) = directive(bytes, start, end);
    let arg = arg.trim_matches(|c| c == '(' || c == ')' || c == ' ');
    if name != "if" || !(arg == "0" || arg == "false") {
        return None;
    }
    let mut depth = 0usize;
    let mut i = end;
    let mut line_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if b == b' ' || b == b'\t' || b == b'\r' {
            i += 1;
            continue;
        }
        if b == b'#' && line_start {
            let line_end = directive_end(bytes, i);
            match directive(bytes, i, line_end).0 {
                "if" | "ifdef" | "ifndef" => depth += 1,
                "endif" if depth == 0 => return Some(start..line_end),
                "endif" => depth -= 1,
                "else" | "elif" | "elifdef" | "elifndef" if depth == 0 => {
                    return Some(start..line_end);
                }
                _ => {}
            }
            i = line_end;
            continue;
        }
        line_start = false;
        i = skip_comment_or_literal(bytes, i).unwrap_or(i + 1);
    }
    Some(start..bytes.len())
}

/// For an `#else`/`#elif` whose line ends at `end`, the end of the `#endif` line that
/// closes its conditional.
fn branch_end(bytes: &[u8], end: usize) -> usize {
    let mut depth = 0usize;
    let mut i = end;
    let mut line_start = true;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if b == b' ' || b == b'\t' || b == b'\r' {
            i += 1;
            continue;
        }
        if b == b'#' && line_start {
            let line_end = directive_end(bytes, i);
            match directive(bytes, i, line_end).0 {
                "if" | "ifdef" | "ifndef" => depth += 1,
                "endif" if depth == 0 => return line_end,
                "endif" => depth -= 1,
                _ => {}
            }
            i = line_end;
            continue;
        }
        line_start = false;
        i = skip_comment_or_literal(bytes, i).unwrap_or(i + 1);
    }
    bytes.len()
}

/// If a comment or literal starts at `i`, the index just past it.
fn skip_comment_or_literal(bytes: &[u8], i: usize) -> Option<usize> {
    match (bytes[i], bytes.get(i + 1)) {
        (b'/', Some(b'/')) => {
            let mut j = i;
            while j < bytes.len() && bytes[j] != b'\n' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            Some(j.min(bytes.len()))
        }
        (b'/', Some(b'*')) => Some(skip_block_comment(bytes, i)),
        (b'"', _) => Some(skip_string(bytes, i, false)),
        (b'\'', _) => {
            // A digit separator (1'000) is not a character literal.
            if i > 0 && bytes[i - 1].is_ascii_hexdigit() && is_in_number(bytes, i) {
                return Some(i + 1);
            }
            Some(skip_quoted(bytes, i, b'\''))
        }
        _ => None,
    }
}

fn is_in_number(bytes: &[u8], i: usize) -> bool {
    let mut j = i;
    while j > 0 && (bytes[j - 1].is_ascii_alphanumeric() || bytes[j - 1] == b'\'') {
        j -= 1;
    }
    bytes[j].is_ascii_digit()
}

fn skip_block_comment(bytes: &[u8], i: usize) -> usize {
    let mut j = i + 2;
    while j + 1 < bytes.len() {
        if bytes[j] == b'*' && bytes[j + 1] == b'/' {
            return j + 2;
        }
        j += 1;
    }
    bytes.len()
}

fn skip_quoted(bytes: &[u8], i: usize, quote: u8) -> usize {
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'\n' => return j,
            b if b == quote => return j + 1,
            _ => j += 1,
        }
    }
    bytes.len()
}

/// Skips a string literal whose opening quote is at `i`; `raw` for `R"delim( … )delim"`.
fn skip_string(bytes: &[u8], i: usize, raw: bool) -> usize {
    if !raw {
        return skip_quoted(bytes, i, b'"');
    }
    let Some(open) = bytes[i..].iter().position(|&b| b == b'(').map(|p| i + p) else {
        return skip_quoted(bytes, i, b'"');
    };
    let mut closing = Vec::with_capacity(open - i + 1);
    closing.push(b')');
    closing.extend_from_slice(&bytes[i + 1..open]);
    closing.push(b'"');
    bytes[open..]
        .windows(closing.len())
        .position(|w| w == closing.as_slice())
        .map_or(bytes.len(), |p| open + p + closing.len())
}

fn is_literal_prefix(prefix: &str) -> bool {
    matches!(
        prefix,
        "R" | "L" | "u" | "U" | "u8" | "LR" | "uR" | "UR" | "u8R"
    )
}

/// The first index at or after `i` that is not whitespace or a comment.
fn next_code_byte(bytes: &[u8], mut i: usize) -> Option<usize> {
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'/' if matches!(bytes.get(i + 1), Some(b'/') | Some(b'*')) => {
                i = skip_comment_or_literal(bytes, i)?;
            }
            _ => return Some(i),
        }
    }
    None
}

/// For the `operator` keyword at `start..name_end` used as an explicit call, the range
/// to blank: a leading `->`/`.`, the keyword, the operator token and, when empty, its
/// `()` argument list. `None` for operator declarations and conversion operators.
fn explicit_operator_call(bytes: &[u8], start: usize, name_end: usize) -> Option<Range<usize>> {
    let before = bytes[..start]
        .iter()
        .rposition(|b| !b.is_ascii_whitespace());
    let first = match before {
        Some(p) if bytes[p] == b'.' => p,
        Some(p) if bytes[p] == b'>' && p > 0 && bytes[p - 1] == b'-' => p - 1,
        Some(p) if matches!(bytes[p], b';' | b'{' | b'}' | b'(' | b',' | b'=') => start,
        _ => return None,
    };
    let token = next_code_byte(bytes, name_end)?;
    let token_end = if bytes[token..].starts_with(b"()") {
        token + 2
    } else {
        let len = bytes[token..]
            .iter()
            .take_while(|b| b"+-*/%^&|~!=<>[]".contains(b))
            .count();
        if len == 0 {
            return None;
        }
        token + len
    };
    let open = next_code_byte(bytes, token_end)?;
    if bytes[open] != b'(' {
        return None;
    }
    let close = next_code_byte(bytes, open + 1)?;
    let end = if bytes[close] == b')' {
        close + 1
    } else {
        token_end
    };
    // `x.operator()(a)` keeps `(a)` so the call reads `x(a)`; a bare `operator()(a)`
    // keeps `(a)` as a parenthesised expression.
    Some(first.min(start)..end)
}

/// The end of `= {}` when the `=` at `i` is an assignment-like `=` followed by an
/// empty brace pair, or by a braced list that ends a parameter (`p = {1, 2})`).
fn empty_default(bytes: &[u8], i: usize) -> Option<usize> {
    let previous = i.checked_sub(1).map(|p| bytes[p]);
    if matches!(
        previous,
        Some(b'=' | b'!' | b'<' | b'>' | b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|' | b'^')
    ) {
        return None;
    }
    let open = next_code_byte(bytes, i + 1)?;
    if bytes[open] != b'{' {
        return None;
    }
    let close = next_code_byte(bytes, open + 1)?;
    if bytes[close] == b'}' {
        return Some(close + 1);
    }
    // A braced default argument `T p = {a, b})`: the list is followed by `)` or `,`.
    let end = balanced_end(bytes, open, b'{', b'}')?;
    let after = next_code_byte(bytes, end)?;
    matches!(bytes[after], b')' | b',').then_some(end)
}

/// The index of a `,` that precedes `start` with only whitespace between.
fn preceding_comma(bytes: &[u8], start: usize) -> Option<usize> {
    let before = bytes[..start]
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())?;
    (bytes[before] == b',').then_some(before)
}

/// Whether a `::`-qualified name (`A::b`, `A<T>::b`, `::a::b`) starts after `i`.
fn qualified_name_follows(bytes: &[u8], i: usize) -> bool {
    let Some(mut j) = next_code_byte(bytes, i) else {
        return false;
    };
    if bytes[j..].starts_with(b"::") {
        return true;
    }
    if !(bytes[j] == b'_' || bytes[j].is_ascii_alphabetic()) {
        return false;
    }
    let word = j;
    while j < bytes.len() && (bytes[j] == b'_' || bytes[j].is_ascii_alphanumeric()) {
        j += 1;
    }
    let Some(mut k) = next_code_byte(bytes, j) else {
        return false;
    };
    if &bytes[word..j] == b"decltype" && bytes[k] == b'(' {
        let Some(end) = balanced_end(bytes, k, b'(', b')') else {
            return false;
        };
        return next_code_byte(bytes, end).is_some_and(|after| bytes[after..].starts_with(b"::"));
    }
    if bytes[k] == b'<' {
        let Some(end) = balanced_end(bytes, k, b'<', b'>') else {
            return false;
        };
        match next_code_byte(bytes, end) {
            Some(after) => k = after,
            None => return false,
        }
    }
    bytes[k..].starts_with(b"::")
}

/// The index just past the bracket that closes the one at `open`.
fn balanced_end(bytes: &[u8], open: usize, left: u8, right: u8) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < bytes.len() {
        if let Some(end) = skip_comment_or_literal(bytes, i) {
            i = end;
            continue;
        }
        let b = bytes[i];
        if b == left {
            depth += 1;
        } else if b == right {
            depth -= 1;
            if depth == 0 {
                return Some(i + 1);
            }
        } else if b == b';' {
            return None;
        }
        i += 1;
    }
    None
}

/// The index just past the `>>>` that closes the launch configuration at `open`.
fn launch_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0isize;
    let mut i = open + 3;
    while i < bytes.len() {
        if let Some(end) = skip_comment_or_literal(bytes, i) {
            i = end;
            continue;
        }
        match bytes[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b';' => return None,
            b'>' if depth == 0 && bytes[i..].starts_with(b">>>") => return Some(i + 3),
            _ => {}
        }
        if depth < 0 {
            return None;
        }
        i += 1;
    }
    None
}
