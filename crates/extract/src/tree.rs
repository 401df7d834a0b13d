//! Walks inside one function: its nodes before a byte, in source order, and the
//! initializer of a local.

use kwb_syntax::Parsed;
use tree_sitter::Node;

/// The function definition around `node`.
pub fn enclosing_function(node: Node<'_>) -> Option<Node<'_>> {
    let mut n = Some(node);
    while let Some(x) = n {
        if x.kind() == "function_definition" {
            return Some(x);
        }
        n = x.parent();
    }
    None
}

/// The `function_declarator` of the function definition `function`, under its
/// pointer, reference and qualifier declarators.
pub fn function_declarator(function: Node<'_>) -> Option<Node<'_>> {
    let mut d = function.child_by_field_name("declarator")?;
    while d.kind() != "function_declarator" {
        d = d.child_by_field_name("declarator")?;
    }
    Some(d)
}

/// The last part of the name the function definition `function` declares
/// (`encode` of `tma_2d<…>::encode`).
pub fn function_name<'s>(parsed: &'s Parsed, function: Node<'_>) -> Option<&'s str> {
    let name = function_declarator(function)?.child_by_field_name("declarator")?;
    let text = &parsed.source[name.byte_range()];
    Some(text.rsplit("::").next().unwrap_or(text).trim())
}

/// The names of the parameters of the function definition `function`, in order
/// (empty strings for unnamed ones).
pub fn parameter_names(parsed: &Parsed, function: Node<'_>) -> Vec<String> {
    let Some(list) =
        function_declarator(function).and_then(|d| d.child_by_field_name("parameters"))
    else {
        return Vec::new();
    };
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter(|p| p.kind().ends_with("parameter_declaration"))
        .map(|p| {
            // The innermost declarator under pointers, references and arrays.
            let mut d = p.child_by_field_name("declarator");
            while let Some(node) = d {
                if node.kind() == "identifier" {
                    return parsed.source[node.byte_range()].to_owned();
                }
                d = node
                    .child_by_field_name("declarator")
                    .or_else(|| node.named_child(node.named_child_count().saturating_sub(1)));
                if d == Some(node) {
                    break;
                }
            }
            String::new()
        })
        .collect()
}

/// The 0-based byte where 1-based line `line` of `source` starts.
pub fn line_start(source: &str, line: usize) -> usize {
    match line {
        0 | 1 => 0,
        n => source
            .match_indices('\n')
            .nth(n - 2)
            .map_or(source.len(), |(i, _)| i + 1),
    }
}

/// The function definition at bytes `range`.
pub fn function_at<'t>(parsed: &'t Parsed, range: &std::ops::Range<usize>) -> Option<Node<'t>> {
    parsed
        .tree
        .root_node()
        .descendant_for_byte_range(range.start, range.end)
}

/// The named nodes of `function` that end before byte `before`, in source order.
pub fn nodes_before(function: Node<'_>, before: usize) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![function];
    while let Some(n) = stack.pop() {
        if n.end_byte() <= before {
            out.push(n);
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|n| n.start_byte());
    out
}

/// The value of the last declaration of `name` (`T name = v`, `T name[2] = {…}`) in
/// `function` before byte `before`.
pub fn initializer<'t>(
    parsed: &Parsed,
    function: Node<'t>,
    name: &str,
    before: usize,
) -> Option<Node<'t>> {
    nodes_before(function, before)
        .into_iter()
        .rev()
        .filter(|n| n.kind() == "init_declarator")
        .filter(|n| {
            n.child_by_field_name("declarator").is_some_and(|d| {
                let text = &parsed.source[d.byte_range()];
                text.split('[').next().unwrap_or(text).trim() == name
            })
        })
        .find_map(|n| n.child_by_field_name("value"))
}

/// The 1-based line of byte `at` in `source`.
pub fn line_of(source: &str, at: usize) -> usize {
    source[..at.min(source.len())].matches('\n').count() + 1
}

/// Every function definition of the file, in source order.
pub fn function_definitions<'t>(parsed: &'t Parsed) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "function_definition" {
            out.push(n);
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|f| f.start_byte());
    out
}

/// The text of statement `n` as written: from the keywords the pre-pass blanked before
/// it (`typename`), trimmed.
pub fn as_written<'s>(parsed: &'s Parsed, n: Node<'_>) -> &'s str {
    let start = parsed
        .leading_blanks(n.start_byte())
        .first()
        .map_or(n.start_byte(), |b| b.range.start);
    parsed.source[start..n.end_byte()].trim()
}

/// The statements of `function`'s body that end before byte `before`, and those of a
/// conditional block's first branch (`#if defined(ARCH_SUPPORTED)` around a whole
/// body), in source order.
pub fn top_statements(function: Node<'_>, before: usize) -> Vec<Node<'_>> {
    let Some(body) = function.child_by_field_name("body") else {
        return Vec::new();
    };
    let mut top = Vec::new();
    let mut pending = vec![body];
    while let Some(block) = pending.pop() {
        let mut cursor = block.walk();
        for n in block.named_children(&mut cursor) {
            if n.start_byte() >= before {
                break;
            }
            match n.kind() {
                "preproc_if" | "preproc_ifdef" => pending.push(n),
                "preproc_else" | "preproc_elif" | "preproc_elifdef" => {}
                _ => top.push(n),
            }
        }
    }
    top.sort_by_key(|n| n.start_byte());
    top.retain(|n| n.end_byte() <= before);
    top
}
