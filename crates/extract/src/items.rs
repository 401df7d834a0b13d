//! The top-level items of a file (namespaces opened up), what names each defines,
//! and the slice of them a kernel needs.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::scan::identifiers;

/// One top-level item, or a namespace holding more.
#[derive(Debug, Clone)]
pub struct Item {
    /// Bytes of the item, with its trailing `;` when the grammar leaves it out
    /// (`struct S {…};`) and the comments right above it.
    pub range: Range<usize>,
    /// 1-based first and last line of the item itself (without those comments).
    pub lines: (usize, usize),
    /// Names it defines (function, type, alias, variable, enumerator, macro).
    pub defines: Vec<String>,
    /// Kept whatever the kernel uses: preprocessor lines, `using namespace`,
    /// `static_assert`.
    pub always: bool,
    /// A scope opened up: a namespace, or an `#if`/`#ifdef` block without `#else`.
    pub scope: Option<Scope>,
}

/// The items of a namespace or a conditional block, with the text that opens and
/// closes it, so a reproducer keeps only the members it needs inside the same scope.
#[derive(Debug, Clone)]
pub struct Scope {
    /// `namespace a {`, `#if defined(X)`.
    pub open: String,
    /// `}  // namespace a`, `#endif  // defined(X)`.
    pub close: String,
    pub items: Vec<Item>,
}

/// The items of `parsed`'s translation unit.
pub fn items(parsed: &Parsed) -> Vec<Item> {
    children(parsed, parsed.tree.root_node())
}

fn children(parsed: &Parsed, parent: Node<'_>) -> Vec<Item> {
    let src = parsed.source.as_bytes();
    let mut out = Vec::new();
    let mut cursor = parent.walk();
    // A conditional block's condition (or macro name) is not one of its items.
    let condition = ["condition", "name"]
        .iter()
        .filter(|_| matches!(parent.kind(), "preproc_if" | "preproc_ifdef"))
        .filter_map(|f| parent.child_by_field_name(f))
        .map(|n| n.id())
        .collect::<Vec<_>>();
    let nodes: Vec<Node<'_>> = parent
        .named_children(&mut cursor)
        .filter(|n| !condition.contains(&n.id()))
        .collect();
    let mut comment_start: Option<usize> = None;
    for node in nodes {
        if node.kind() == "comment" {
            // A comment leads the next item when it starts its own line (a trailing
            // `}  // namespace x` does not) and no blank line separates them.
            let line_start = parsed.source[..node.start_byte()]
                .rfind('\n')
                .map_or(0, |i| i + 1);
            if parsed.source[line_start..node.start_byte()]
                .trim()
                .is_empty()
            {
                comment_start.get_or_insert(node.start_byte());
            } else {
                comment_start = None;
            }
            continue;
        }
        let own = blanked_start(parsed, node.start_byte());
        let start = match comment_start.take() {
            Some(c) if !has_blank_line(&parsed.source[c..own]) => c,
            _ => own,
        };
        let mut end = node.end_byte();
        // The `;` after a struct/enum/class specifier is a sibling token.
        let rest = &parsed.source[end..];
        let ws = rest.len() - rest.trim_start().len();
        if matches!(
            node.kind(),
            "struct_specifier" | "class_specifier" | "enum_specifier" | "union_specifier"
        ) && src.get(end + ws) == Some(&b';')
        {
            end += ws + 1;
        }
        let end_row = if node.end_position().column == 0 {
            node.end_position().row
        } else {
            node.end_position().row + 1
        };
        let lines = (
            parsed.source[..own].matches('\n').count() + 1,
            end_row.max(node.start_position().row + 1),
        );
        // A namespace, or `#if COND … #endif` (no `#else`) holding more than
        // preprocessor lines: its members are items of their own, kept inside the same
        // scope, so a harness behind the same `#if` stays out.
        if let Some(scope) = scope(parsed, node) {
            out.push(Item {
                range: start..end,
                lines,
                defines: Vec::new(),
                always: false,
                scope: Some(scope),
            });
            continue;
        }
        let text = &parsed.source[node.byte_range()];
        let always = node.kind().starts_with("preproc_")
            || node.kind() == "using_declaration" && text.contains("namespace")
            || node.kind() == "static_assert_declaration"
            || text.trim_start().starts_with("static_assert");
        out.push(Item {
            range: start..end,
            lines,
            defines: defines(parsed, node),
            always,
            scope: None,
        });
    }
    out
}

/// `node` opened up as a scope, when it is a namespace or a conditional block worth
/// opening (no `#else`, and a member that is not a preprocessor line).
fn scope(parsed: &Parsed, node: Node<'_>) -> Option<Scope> {
    if node.kind() == "namespace_definition" {
        let body = node.child_by_field_name("body")?;
        let open = parsed.source[node.start_byte()..body.start_byte() + 1].to_owned();
        let close = format!("}}  // {}", open.trim_end().trim_end_matches('{').trim());
        return Some(Scope {
            open,
            close,
            items: children(parsed, body),
        });
    }
    if !matches!(node.kind(), "preproc_if" | "preproc_ifdef")
        || node.child_by_field_name("alternative").is_some()
    {
        return None;
    }
    let items = children(parsed, node);
    if !items.iter().any(|m| !m.always || m.scope.is_some()) {
        return None;
    }
    let open = parsed.source[node.byte_range()]
        .lines()
        .next()
        .unwrap_or("")
        .trim_end()
        .to_owned();
    let close = match open.split_once(char::is_whitespace) {
        Some((_, cond)) => format!("#endif  // {}", cond.trim()),
        None => "#endif".to_owned(),
    };
    Some(Scope { open, close, items })
}

/// Whether `text` holds a line with nothing but whitespace between two others.
fn has_blank_line(text: &str) -> bool {
    let lines: Vec<&str> = text.split('\n').collect();
    lines.len() > 2
        && lines[1..lines.len() - 1]
            .iter()
            .any(|l| l.trim().is_empty())
}

/// Where an item really starts: back over what the parser saw as blanks but the
/// source holds (CUDA keywords and macros the pre-pass blanked, like `__global__`
/// or `CUTE_HOST_DEVICE` before a function).
fn blanked_start(parsed: &Parsed, start: usize) -> usize {
    parsed
        .leading_blanks(start)
        .first()
        .map_or(start, |b| b.range.start)
}

/// The names `node` defines.
fn defines(parsed: &Parsed, node: Node<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let text = |n: Node<'_>| parsed.source[n.byte_range()].to_owned();
    match node.kind() {
        "template_declaration" => {
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                if child.kind() != "template_parameter_list" {
                    out.extend(defines(parsed, child));
                }
            }
        }
        "function_definition" | "declaration" | "field_declaration" => {
            if let Some(ty) = node.child_by_field_name("type") {
                out.extend(defines(parsed, ty));
            }
            let mut cursor = node.walk();
            for d in node.children_by_field_name("declarator", &mut cursor) {
                if let Some(name) = declared_name(parsed, d) {
                    out.push(name);
                }
            }
        }
        "struct_specifier"
        | "class_specifier"
        | "union_specifier"
        | "alias_declaration"
        | "type_definition"
        | "preproc_def"
        | "preproc_function_def"
        | "concept_definition"
        | "namespace_alias_definition" => {
            if let Some(name) = node.child_by_field_name("name") {
                out.push(last_segment(&text(name)));
            }
            if node.kind() == "type_definition" {
                let mut cursor = node.walk();
                for d in node.children_by_field_name("declarator", &mut cursor) {
                    out.push(last_segment(&text(d)));
                }
            }
        }
        "enum_specifier" => {
            if let Some(name) = node.child_by_field_name("name") {
                out.push(last_segment(&text(name)));
            }
            if let Some(body) = node.child_by_field_name("body") {
                let mut cursor = body.walk();
                for e in body.named_children(&mut cursor) {
                    if let Some(name) = e.child_by_field_name("name") {
                        out.push(text(name));
                    }
                }
            }
        }
        _ => {}
    }
    out
}

/// The identifier a declarator declares (through pointers, references, arrays,
/// init-declarators and function declarators; `A::f` gives `f`).
fn declared_name(parsed: &Parsed, mut d: Node<'_>) -> Option<String> {
    loop {
        match d.kind() {
            "identifier" | "field_identifier" | "type_identifier" | "operator_name"
            | "destructor_name" => return Some(parsed.source[d.byte_range()].to_owned()),
            "qualified_identifier" => {
                return Some(last_segment(&parsed.source[d.byte_range()]));
            }
            _ => d = d.child_by_field_name("declarator")?,
        }
    }
}

fn last_segment(text: &str) -> String {
    text.rsplit("::").next().unwrap_or(text).trim().to_owned()
}

/// Marks the items `roots` names need: the items defining them, then every item
/// defining a name a kept item uses, to a fixed point. Always-kept items count as
/// kept. Returns the kept items' start bytes.
pub fn slice(parsed: &Parsed, items: &[Item], roots: &[String]) -> BTreeSet<usize> {
    let mut flat: Vec<&Item> = Vec::new();
    fn walk<'i>(items: &'i [Item], out: &mut Vec<&'i Item>) {
        for item in items {
            match &item.scope {
                Some(scope) => walk(&scope.items, out),
                None => out.push(item),
            }
        }
    }
    walk(items, &mut flat);
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, item) in flat.iter().enumerate() {
        for name in &item.defines {
            by_name.entry(name.as_str()).or_default().push(i);
        }
    }
    let mut kept: BTreeSet<usize> = BTreeSet::new();
    let mut work: Vec<usize> = Vec::new();
    for (i, item) in flat.iter().enumerate() {
        if item.always {
            work.push(i);
        }
    }
    for root in roots {
        if let Some(ids) = by_name.get(root.as_str()) {
            work.extend(ids);
        }
    }
    let code = without_comments(parsed);
    while let Some(i) = work.pop() {
        if !kept.insert(i) {
            continue;
        }
        // The source, not the masked text (macro arguments such as
        // `__launch_bounds__(kThreads)` name things too), without its comments.
        let text = &code[flat[i].range.clone()];
        for word in identifiers(text) {
            if let Some(ids) = by_name.get(word) {
                work.extend(ids.iter().filter(|j| !kept.contains(j)));
            }
        }
    }
    kept.into_iter().map(|i| flat[i].range.start).collect()
}

/// The source with every comment blanked (same length, same lines).
fn without_comments(parsed: &Parsed) -> String {
    let mut bytes = parsed.source.clone().into_bytes();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "comment" {
            for b in &mut bytes[n.byte_range()] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
            continue;
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
    // Only ASCII bytes were replaced, each by a space: still UTF-8 where the source
    // was, except inside a comment's multi-byte characters, which are now spaces too.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}
