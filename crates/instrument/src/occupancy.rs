//! The occupancy floor of a trace build: the edit of a kernel's declaration that lets
//! a build with `KWB_TRACE` and `KWB_TRACE_MAX_REGS=R` (the original's register count,
//! `ptxas -v`) keep the CTAs an SM that R registers a thread give.
//!
//! Probes add registers, and ptxas, free under a kernel's `__launch_bounds__(T, 1)` to
//! use up to 64K / T a thread, takes more than it needs once they are there: a kernel
//! that ran two CTAs an SM at 58 registers can come out at 102 and run one, twice as
//! slow, while 80 would have held the same code without a spill. The floor tells ptxas
//! the occupancy to keep:
//! - `__launch_bounds__(T, B)` (or `(T, B, C)`) becomes
//!   `__launch_bounds__(T, KWB_MIN_CTAS((T), B))` (T in parentheses, so that a comma
//!   of its template arguments does not split the macro's arguments; B is the
//!   variadic rest, given back as it is);
//! - `__launch_bounds__(T)` becomes `__launch_bounds__(T KWB_MORE_CTAS((T)))`;
//! - a kernel without launch bounds gains `KWB_MAXNREG` before its name (CUDA does not
//!   allow both on one kernel);
//! - a kernel that caps its registers itself (`__maxnreg__`) is left as it is.
//!
//! Invariant: without `KWB_TRACE` and `KWB_TRACE_MAX_REGS` the macros (kwb_trace.cuh)
//! give back the declaration's own tokens (`B`, nothing, nothing), so the build is the
//! original's; every inserted byte sits between kwb's markers, so `--strip` removes it.

use kwb_sites::Kernel;
use kwb_syntax::{BlankKind, Parsed};

use crate::emit::Emitter;

/// Inserts the occupancy floor into the declaration of `kernel`, a `__global__`
/// function; nothing for any other function, or where the declaration cannot be read.
pub(crate) fn floor(em: &mut Emitter<'_>, kernel: &Kernel) {
    if kernel.role != "global" {
        return;
    }
    let parsed = em.parsed;
    let Some(name) = name_start(parsed, kernel) else {
        return;
    };
    // The keywords and attribute macros between the definition's start (or the
    // blanks right before it) and the kernel's name.
    let from = parsed
        .leading_blanks(kernel.range.start)
        .first()
        .map_or(kernel.range.start, |b| b.range.start);
    let attributes = parsed.blanks_in(from..name);
    let named = |macro_name: &str| {
        attributes
            .iter()
            .find(|b| matches!(&b.kind, BlankKind::Macro(m) if m == macro_name))
    };
    if named("__maxnreg__").is_some() {
        return;
    }
    match named("__launch_bounds__") {
        Some(bounds) => {
            let Some(args) = arguments(&parsed.source, bounds.range.clone()) else {
                return;
            };
            let threads = parsed.source[args[0].clone()].trim().to_owned();
            match args.get(1) {
                Some(min) => {
                    let own = trimmed(&parsed.source, min.clone());
                    em.insert(own.start, &format!("KWB_MIN_CTAS(({threads}), "));
                    em.insert(own.end, ")");
                }
                None => {
                    let end = trimmed(&parsed.source, args[0].clone()).end;
                    em.insert(end, &format!(" KWB_MORE_CTAS(({threads}))"));
                }
            }
        }
        None => em.insert(name, "KWB_MAXNREG "),
    }
    em.note(format!(
        "{}: its declaration holds the occupancy floor: build the trace with -DKWB_TRACE_MAX_REGS=N, N the original's registers a thread (ptxas -v; kwb-nvcc's KWB_TRACE=max-regs=auto reads it and names a kernel the trace build spills in), to keep the CTAs an SM those give",
        kernel.name
    ));
}

/// The byte where the kernel's name starts (its declarator's innermost name).
fn name_start(parsed: &Parsed, kernel: &Kernel) -> Option<usize> {
    let root = parsed.tree.root_node();
    let mut node = root.descendant_for_byte_range(kernel.range.start, kernel.range.end)?;
    while node.kind() != "function_definition" {
        node = node.parent()?;
    }
    let mut declarator = node.child_by_field_name("declarator")?;
    while declarator.kind() != "function_declarator" {
        declarator = declarator.child_by_field_name("declarator")?;
    }
    Some(declarator.child_by_field_name("declarator")?.start_byte())
}

/// The argument ranges of the call-shaped blank `range` (`__launch_bounds__(a, b)`),
/// split at its top-level commas. A `<` right after a name opens template arguments
/// (`Op<A, B>::kThreads`); one after a space is a comparison. `None` when it has no
/// parenthesised list, its brackets do not match, or an argument is empty.
fn arguments(source: &str, range: std::ops::Range<usize>) -> Option<Vec<std::ops::Range<usize>>> {
    let text = &source[range.clone()];
    let open = range.start + text.find('(')?;
    let close = range.start + text.rfind(')')?;
    let mut args = Vec::new();
    let mut closers: Vec<char> = Vec::new();
    let mut start = open + 1;
    let mut previous = ' ';
    for (i, c) in source[open + 1..close].char_indices() {
        let at = open + 1 + i;
        match c {
            '(' => closers.push(')'),
            '[' => closers.push(']'),
            '{' => closers.push('}'),
            '<' if previous.is_alphanumeric() || previous == '_' => closers.push('>'),
            ')' | ']' | '}' if closers.pop() != Some(c) => return None,
            '>' if closers.last() == Some(&'>') => {
                closers.pop();
            }
            ',' if closers.is_empty() => {
                args.push(start..at);
                start = at + 1;
            }
            _ => {}
        }
        previous = c;
    }
    args.push(start..close);
    (closers.is_empty() && args.iter().all(|a| !source[a.clone()].trim().is_empty()))
        .then_some(args)
}

/// `range` without the whitespace at either end.
fn trimmed(source: &str, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let text = &source[range.clone()];
    let start = range.start + (text.len() - text.trim_start().len());
    let end = range.end - (text.len() - text.trim_end().len());
    start..end.max(start)
}

#[cfg(test)]
mod tests {
    use super::arguments;

    fn split(text: &str) -> Vec<&str> {
        arguments(text, 0..text.len())
            .unwrap()
            .into_iter()
            .map(|r| text[r].trim())
            .collect()
    }

    #[test]
    fn arguments_split_at_top_level_commas() {
        assert_eq!(split("__launch_bounds__(128, 2)"), ["128", "2"]);
        assert_eq!(
            split("__launch_bounds__(Op<A, B>::kThreads, f(1, 2))"),
            ["Op<A, B>::kThreads", "f(1, 2)"]
        );
        assert_eq!(split("__launch_bounds__(kThreads)"), ["kThreads"]);
        assert_eq!(
            split("__launch_bounds__(a < b ? 256 : 128, 2)"),
            ["a < b ? 256 : 128", "2"]
        );
        assert!(arguments("__launch_bounds__(f(1, 2)", 0..25).is_none());
        assert!(arguments("__launch_bounds__(, 2)", 0..22).is_none());
        assert!(arguments("__launch_bounds__", 0..17).is_none());
    }
}
