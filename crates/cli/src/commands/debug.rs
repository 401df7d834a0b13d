//! Debug commands for bug reports: `dump-tree` and `query`.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use miette::Report;
use streaming_iterator::StreamingIterator;
use tree_sitter::{Query, QueryCursor};

use crate::input::{DEFAULT_MAX_BYTES, read_source};
use crate::{exit, render};

/// Prints the tree of the masked text, one node per line with its field name and
/// 1-based line:column, and the blanks the pre-pass made.
pub fn dump_tree(file: &Path) -> i32 {
    let source = match read_source(file, DEFAULT_MAX_BYTES) {
        Ok(s) => s,
        Err(e) => {
            render::error(Report::new(e));
            return exit::INPUT;
        }
    };
    let parsed = kwb_syntax::parse(&source);
    let mut out = String::new();
    let mut cursor = parsed.tree.walk();
    let mut depth = 0usize;
    loop {
        let node = cursor.node();
        if node.is_named() || node.is_missing() {
            let field = cursor
                .field_name()
                .map(|f| format!("{f}: "))
                .unwrap_or_default();
            let start = node.start_position();
            let end = node.end_position();
            let marker = if node.is_missing() { "MISSING " } else { "" };
            let _ = write!(
                out,
                "{:indent$}{field}{marker}{} [{}:{} - {}:{}]",
                "",
                node.kind(),
                start.row + 1,
                start.column + 1,
                end.row + 1,
                end.column + 1,
                indent = depth * 2
            );
            if node.child_count() == 0 {
                let text = parsed.masked_text(node);
                let text: String = text.chars().take(60).collect();
                let _ = write!(out, " {text:?}");
            }
            out.push('\n');
        }
        if cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                let _ = writeln!(out, "; {} blanks", parsed.blanks.len());
                for blank in &parsed.blanks {
                    let line = source[..blank.range.start].matches('\n').count() + 1;
                    let _ = writeln!(out, ";   line {line}: {:?}", blank.kind);
                }
                return match std::io::stdout().lock().write_all(out.as_bytes()) {
                    Ok(()) => exit::OK,
                    Err(_) => exit::INTERNAL,
                };
            }
            depth -= 1;
        }
    }
}

/// Runs a query and prints `line:column @capture text` for every capture.
pub fn query(query_path: &Path, file: &Path) -> i32 {
    let (query_text, source) = match (
        read_source(query_path, DEFAULT_MAX_BYTES),
        read_source(file, DEFAULT_MAX_BYTES),
    ) {
        (Ok(q), Ok(s)) => (q, s),
        (Err(e), _) | (_, Err(e)) => {
            render::error(Report::new(e));
            return exit::INPUT;
        }
    };
    let query = match Query::new(&kwb_syntax::language(), &query_text) {
        Ok(q) => q,
        Err(e) => {
            render::error(miette::miette!(
                code = "kwb::cli::bad_query",
                help = "`kwb dump-tree FILE` shows the node kinds and field names",
                "query does not compile at row {}, column {}: {}",
                e.row + 1,
                e.column + 1,
                e.message.lines().next().unwrap_or("")
            ));
            return exit::INPUT;
        }
    };
    let parsed = kwb_syntax::parse(&source);
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(&query, parsed.tree.root_node(), parsed.masked.as_bytes());
    let mut out = String::new();
    while let Some(m) = matches.next() {
        for capture in m.captures {
            let node = capture.node;
            let start = node.start_position();
            let text = parsed.text(node).lines().next().unwrap_or("").trim();
            let _ = writeln!(
                out,
                "{}:{} @{} {}",
                start.row + 1,
                start.column + 1,
                query.capture_names()[capture.index as usize],
                text
            );
        }
    }
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Ok(()) => exit::OK,
        Err(_) => exit::INTERNAL,
    }
}
