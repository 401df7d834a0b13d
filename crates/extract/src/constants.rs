//! The integer constants in scope of a launch: `constexpr` declarations at file or
//! namespace scope, `#define`s, the user's `-D`s, and the launching function's own
//! `constexpr` locals before the launch.

use std::ops::Range;

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fold::Constants;

/// Constants at file and namespace scope, then `defines` (the command line wins).
pub fn file_scope(parsed: &Parsed, defines: &[(String, String)]) -> Constants {
    let mut c = Constants::default();
    let mut stack = vec![parsed.tree.root_node()];
    let mut found: Vec<(usize, String, String)> = Vec::new();
    while let Some(n) = stack.pop() {
        match n.kind() {
            "function_definition"
            | "template_declaration"
            | "struct_specifier"
            | "class_specifier" => continue,
            "declaration" => collect(parsed, n, &mut found),
            "enum_specifier" => enumerators(parsed, n, &mut found),
            "preproc_def" => {
                if let (Some(name), Some(value)) = (
                    n.child_by_field_name("name"),
                    n.child_by_field_name("value"),
                ) {
                    found.push((
                        n.start_byte(),
                        parsed.source[name.byte_range()].to_owned(),
                        parsed.source[value.byte_range()].to_owned(),
                    ));
                }
            }
            _ => {}
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    found.sort();
    for (_, name, value) in found {
        c.define(&name, &value);
    }
    for (name, value) in defines {
        c.define(name, value);
    }
    c
}

/// `constexpr` locals of the function at `function` declared before byte `before`,
/// added to `c` (they shadow file-scope names). Returns their names.
pub fn locals(
    parsed: &Parsed,
    function: &Range<usize>,
    before: usize,
    c: &mut Constants,
) -> Vec<String> {
    let mut found = Vec::new();
    for n in nodes_in(parsed, function, before) {
        if n.kind() == "declaration" {
            collect(parsed, n, &mut found);
        }
    }
    found.sort();
    found
        .into_iter()
        .map(|(_, name, value)| {
            c.define(&name, &value);
            name
        })
        .collect()
}

/// Names every declaration in the function at `function` declares before `before`
/// (any type: the names a template argument must not lean on in a standalone file),
/// its parameters included.
pub fn local_names(parsed: &Parsed, function: &Range<usize>, before: usize) -> Vec<String> {
    let mut out = Vec::new();
    for n in nodes_in(parsed, function, before) {
        let name = match n.kind() {
            "init_declarator" | "alias_declaration" | "type_definition" => n
                .child_by_field_name("declarator")
                .or_else(|| n.child_by_field_name("name"))
                .map(|d| parsed.source[d.byte_range()].trim().to_owned()),
            "parameter_declaration" => n.child_by_field_name("declarator").and_then(|d| {
                crate::scan::identifiers(&parsed.source[d.byte_range()])
                    .last()
                    .map(str::to_owned)
            }),
            _ => None,
        };
        out.extend(name);
    }
    out
}

/// The nodes of the function at bytes `function` that end before `before`.
fn nodes_in<'t>(parsed: &'t Parsed, function: &Range<usize>, before: usize) -> Vec<Node<'t>> {
    crate::tree::function_at(parsed, function)
        .map(|f| crate::tree::nodes_before(f, before))
        .unwrap_or_default()
}

/// An enum's enumerators with their values (explicit, or one past the previous).
fn enumerators(parsed: &Parsed, node: Node<'_>, found: &mut Vec<(usize, String, String)>) {
    let Some(body) = node.child_by_field_name("body") else {
        return;
    };
    let mut next = "0".to_owned();
    let mut cursor = body.walk();
    for e in body.named_children(&mut cursor) {
        let Some(name) = e.child_by_field_name("name") else {
            continue;
        };
        let value = e.child_by_field_name("value").map_or(next.clone(), |v| {
            parsed.source[v.byte_range()].trim().to_owned()
        });
        next = format!("({value}) + 1");
        found.push((
            e.start_byte(),
            parsed.source[name.byte_range()].to_owned(),
            value,
        ));
    }
}

fn collect(parsed: &Parsed, decl: Node<'_>, found: &mut Vec<(usize, String, String)>) {
    let text = &parsed.source[decl.byte_range()];
    let head = text.split('=').next().unwrap_or("");
    if !crate::scan::identifiers(head).any(|w| w == "constexpr") {
        return;
    }
    let mut cursor = decl.walk();
    for d in decl.children_by_field_name("declarator", &mut cursor) {
        if d.kind() == "init_declarator"
            && let (Some(name), Some(value)) = (
                d.child_by_field_name("declarator"),
                d.child_by_field_name("value"),
            )
        {
            let value_text = parsed.source[value.byte_range()].trim();
            // `{128}` initializers.
            let value_text = value_text
                .strip_prefix('{')
                .and_then(|v| v.strip_suffix('}'))
                .unwrap_or(value_text);
            found.push((
                d.start_byte(),
                parsed.source[name.byte_range()].trim().to_owned(),
                value_text.to_owned(),
            ));
        }
    }
}
