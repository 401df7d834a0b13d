//! Launch sites: `callee<<<grid, block, smem, stream>>>(args)`, with the callee
//! resolved through a local alias (`auto kernel = gemm<BM, BN>; kernel<<<…>>>`).

use std::ops::Range;

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::scan::{close, split_top, template_id};

/// One `<<<…>>>` launch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Launch {
    /// 1-based line of the `<<<`.
    pub line: usize,
    /// Byte of the `<<<`.
    #[serde(skip)]
    pub at: usize,
    /// The callee as written (`kernel`, `sgemm_tiled<kTile>`).
    pub callee: String,
    /// The kernel it resolves to, and its template arguments as written (through a
    /// local `auto NAME = KERNEL<ARGS>;` when the callee is such a name).
    pub kernel: String,
    pub template_args: Vec<String>,
    /// Where the alias was, when there was one: `auto kernel = …` at this line.
    pub alias_line: Option<usize>,
    /// grid, block, dynamic shared memory, stream (as many as written).
    pub config: Vec<String>,
    /// The call's arguments.
    pub args: Vec<String>,
    /// Bytes of the function the launch is in.
    #[serde(skip)]
    pub function: Option<Range<usize>>,
    /// Byte where the callee starts.
    #[serde(skip)]
    pub callee_at: usize,
    /// Bytes of the argument list, its parentheses included.
    #[serde(skip)]
    pub args_range: Range<usize>,
}

/// Every launch in `parsed`, in source order. `<<<` inside comments and strings is
/// skipped.
pub fn launches(parsed: &Parsed) -> Vec<Launch> {
    let src = &parsed.source;
    let root = parsed.tree.root_node();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = src[from..].find("<<<").map(|i| i + from) {
        from = at + 3;
        let node = root.descendant_for_byte_range(at, at + 1);
        if node.is_some_and(|n| {
            matches!(
                n.kind(),
                "comment" | "string_literal" | "raw_string_literal"
            )
        }) {
            continue;
        }
        let Some(end) = src[at + 3..].find(">>>").map(|i| i + at + 3) else {
            continue;
        };
        let config = split_top(&src[at + 3..end]);
        let after = end + 3;
        let Some(open) = src[after..]
            .find(|c: char| !c.is_whitespace())
            .map(|i| i + after)
            .filter(|&i| src.as_bytes()[i] == b'(')
        else {
            continue;
        };
        let Some(close_at) = close(src, open) else {
            continue;
        };
        let args = split_top(&src[open + 1..close_at - 1]);
        let Some((callee_at, callee)) = callee_before(src, at) else {
            continue;
        };
        let function = node.and_then(crate::tree::enclosing_function);
        let line = src[..at].matches('\n').count() + 1;
        let (kernel, template_args, alias_line) = resolve(parsed, function, &callee, at);
        out.push(Launch {
            line,
            at,
            callee,
            kernel,
            template_args,
            alias_line,
            config,
            args,
            function: function.map(|f| f.byte_range()),
            callee_at,
            args_range: open..close_at,
        });
    }
    out
}

/// The callee text ending right before `at`, and its first byte: a (qualified) name,
/// optionally with template arguments.
fn callee_before(src: &str, at: usize) -> Option<(usize, String)> {
    let bytes = src.as_bytes();
    let mut end = at;
    while end > 0 && bytes[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    let mut start = end;
    if start > 0 && bytes[start - 1] == b'>' {
        // Walk back to the matching '<'.
        let mut depth = 0;
        while start > 0 {
            start -= 1;
            match bytes[start] {
                b'>' => depth += 1,
                b'<' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        if depth != 0 {
            return None;
        }
    }
    while start > 0
        && (bytes[start - 1].is_ascii_alphanumeric()
            || bytes[start - 1] == b'_'
            || bytes[start - 1] == b':')
    {
        start -= 1;
    }
    let text = src[start..end].trim();
    let first = start + (src[start..end].len() - src[start..end].trim_start().len());
    template_id(text).map(|_| (first, text.to_owned()))
}

/// The kernel and template arguments behind `callee`: itself, or the value of a
/// local `auto NAME = KERNEL<ARGS>;` (or `= &KERNEL<ARGS>`) declared before `at`.
fn resolve(
    parsed: &Parsed,
    function: Option<Node<'_>>,
    callee: &str,
    at: usize,
) -> (String, Vec<String>, Option<usize>) {
    let (name, args) = template_id(callee).unwrap_or_else(|| (callee.to_owned(), Vec::new()));
    if !args.is_empty() {
        return (name, args, None);
    }
    let Some(function) = function else {
        return (name, args, None);
    };
    let best = crate::tree::initializer(parsed, function, &name, at)
        .map(|v| (v.start_byte(), parsed.source[v.byte_range()].to_owned()));
    match best {
        Some((start, value)) => {
            let value = value.trim().trim_start_matches('&').trim();
            match template_id(value) {
                Some((kernel, args)) => {
                    let line = parsed.source[..start].matches('\n').count() + 1;
                    (kernel, args, Some(line))
                }
                None => (name, args, None),
            }
        }
        None => (name, args, None),
    }
}
