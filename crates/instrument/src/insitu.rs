//! `--insitu`: each `<<<…>>>` launch statement of one kernel also goes through
//! `kwb_insitu::launch` (kwb-runtime's `kwb_insitu.cuh`, inlined at the top), which
//! makes the same launch and, for the one launch `kwb diagnose … -- CMD` chose, first
//! runs it on kwb's inputs inside the user's process (see the header).
//!
//! `gemm<T><<<g, b, s, st>>>(x, y, n);` becomes, on the same line,
//!
//! ```text
//! { kwb_insitu::launch("gemm", "gemm<T>", __FILE__, __LINE__, (g),
//!     [&](auto&&... kwb_a) { gemm<T><<<g, b, s, st>>>(kwb_a...); }, x, y, n);
//!   if (false) gemm<T><<<g, b, s, st>>>(x, y, n); }
//! ```
//!
//! Invariants: only insertions, each between kwb's markers, so `strip` gives the
//! original back byte for byte; the user's statement stays whole (behind `if (false)`,
//! still compiled, never run), so the arguments are evaluated once, by the call (the
//! launch configuration, which the copy in the lambda holds, at each launch it makes,
//! and the grid once more, for launch.txt); the
//! braces keep an unbraced `if`/`else` around the launch what it was; the insertions
//! stay on the launch's line and the header is followed by `#line 1`, so `__LINE__`,
//! `__FILE__` and nvcc's messages name the user's file and lines. A launch that is not
//! a statement of its own (`return k<<<…>>>(…)`, a comma expression) is left alone and
//! named in a note.

use kwb_edit::TextEdit;
use kwb_extract::Launch;

use crate::InstrumentError;
use crate::markers::{strip, wrap};
use crate::plan::c_string;

/// A source with its launches of one kernel rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    pub text: String,
    /// The 1-based lines of the launches rewritten.
    pub lines: Vec<usize>,
    /// Launches of the kernel left as they are, and why.
    pub notes: Vec<String>,
}

/// The last `::` component of a name: how a launch names the kernel is matched.
fn simple(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name).trim()
}

/// Rewrites every launch statement of `kernel` in `source`; `file_name` is what
/// `#line` names. kwb insertions already in `source` (a trace build's probes and
/// runtime) are kept: the launches are found in the original and each insertion goes
/// after whatever kwb inserted at its place, so a traced unit can run in place too and
/// `strip` still gives the original back. No launch of it is
/// [`InstrumentError::NoLaunch`].
pub fn insitu(source: &str, kernel: &str, file_name: &str) -> Result<Rewritten, InstrumentError> {
    let original = strip(source)?;
    let parsed = kwb_syntax::parse(&original);
    let name = crate::markers::original_name(source).unwrap_or_else(|| file_name.to_owned());
    let mut builder = Insertions::default();
    let mut lines = Vec::new();
    let mut notes = Vec::new();
    for launch in kwb_extract::launches(&parsed) {
        if simple(&launch.kernel) != simple(kernel) {
            continue;
        }
        let Some(end) = statement_end(&parsed, &launch) else {
            notes.push(format!(
                "line {}: this launch of `{kernel}` is not a statement of its own, so it is not run on kwb's inputs",
                launch.line
            ));
            continue;
        };
        let src = &parsed.source;
        let callee = &src[launch.callee_at..launch.at];
        let close = src[launch.at..]
            .find(">>>")
            .map(|i| launch.at + i + 3)
            .unwrap_or(launch.at);
        let launch_text = &src[launch.callee_at..close];
        let args = &src[launch.args_range.start + 1..launch.args_range.end - 1];
        let more = if args.trim().is_empty() {
            String::new()
        } else {
            format!(", {args}")
        };
        let prefix = format!(
            "{{ kwb_insitu::launch(\"{}\", \"{}\", __FILE__, __LINE__, {}, [&](auto&&... kwb_a) {{ {}(kwb_a...); }}{more}); if (false) ",
            c_string(simple(&launch.kernel)),
            c_string(callee.trim()),
            grid(launch.config.first().map_or("1", String::as_str)),
            launch_text.trim_end(),
        );
        // Keep the user's line numbers: a launch written over several lines is copied
        // onto one line inside the insertion, its comments left out.
        builder.insert(launch.callee_at, wrap(&one_line(&prefix)));
        builder.insert(end, wrap(" }"));
        lines.push(launch.line);
    }
    if lines.is_empty() {
        return Err(InstrumentError::NoLaunch {
            kernel: kernel.to_owned(),
            notes: if notes.is_empty() {
                "the file has no `<<<…>>>` launch of it".to_owned()
            } else {
                notes.join("; ")
            },
        });
    }
    builder.insert(
        0,
        wrap(&format!(
            "{}\n#line 1 \"{}\"\n",
            kwb_runtime::INSITU_HEADER.trim_end(),
            c_string(&name)
        )),
    );
    let mut edit = TextEdit::builder();
    let places = source_offsets(source);
    for (at, text) in builder.0 {
        edit.insert(places[at], text);
    }
    let (text, _) = edit.finish()?.apply(source)?;
    Ok(Rewritten { text, lines, notes })
}

/// The launch's grid as an argument of `kwb_insitu::launch`, which states it in
/// launch.txt: an expression in parentheses, a braced list (`{gx, gy}`) as `dim3(gx,
/// gy)`. Like the launch's copy in the lambda, it is evaluated again at the call.
fn grid(text: &str) -> String {
    let text = text.trim();
    match text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        Some(inner) => format!("dim3({})", inner.trim()),
        None => format!("({text})"),
    }
}

/// Insertions at offsets of the original, in the order made.
#[derive(Default)]
struct Insertions(Vec<(usize, String)>);

impl Insertions {
    fn insert(&mut self, at: usize, text: String) {
        self.0.push((at, text));
    }
}

/// For each offset of `strip(source)` (and its end), the offset in `source` after every
/// kwb span that stands there.
fn source_offsets(source: &str) -> Vec<usize> {
    use crate::markers::{CLOSE, OPEN};
    let mut places = Vec::with_capacity(source.len() + 1);
    let mut at = 0;
    loop {
        // Past every span that starts here.
        while source[at..].starts_with(OPEN) {
            let close = source[at..]
                .find(CLOSE)
                .map_or(source.len(), |c| at + c + CLOSE.len());
            at = close;
        }
        places.push(at);
        if at >= source.len() {
            return places;
        }
        at += 1;
    }
}

/// `text` on one line: comments blanked (string and character literals kept as they
/// are), line breaks made spaces.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                out.push(c);
                while let Some(d) = chars.next() {
                    out.push(d);
                    if d == '\\' {
                        if let Some(e) = chars.next() {
                            out.push(e);
                        }
                    } else if d == c {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                while chars.peek().is_some_and(|d| *d != '\n') {
                    chars.next();
                }
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for d in chars.by_ref() {
                    if last == '*' && d == '/' {
                        break;
                    }
                    last = d;
                }
                out.push(' ');
            }
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The byte after the `;` that ends the launch's statement, where the launch is the
/// whole of an expression statement; `None` otherwise.
fn statement_end(parsed: &kwb_syntax::Parsed, launch: &Launch) -> Option<usize> {
    let src = &parsed.source;
    let after = launch.args_range.end;
    let semicolon = after + src[after..].find(|c: char| !c.is_whitespace())?;
    if src.as_bytes()[semicolon] != b';' {
        return None;
    }
    let root = parsed.tree.root_node();
    let mut node = root.descendant_for_byte_range(launch.callee_at, launch.callee_at + 1)?;
    while node.kind() != "expression_statement" {
        node = node.parent()?;
    }
    (node.start_byte() == launch.callee_at && node.end_byte() == semicolon + 1)
        .then_some(semicolon + 1)
}

#[cfg(test)]
mod tests {
    use super::grid;

    #[test]
    fn the_grid_is_passed_as_an_expression_and_a_braced_list_as_a_dim3() {
        assert_eq!(grid(" (n + 255) / 256 "), "((n + 255) / 256)");
        assert_eq!(grid("dim3(gx, gy)"), "(dim3(gx, gy))");
        assert_eq!(grid("{gx, gy}"), "dim3(gx, gy)");
    }
}
