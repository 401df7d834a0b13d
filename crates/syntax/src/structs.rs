//! The structs and classes a file defines: found by name, their data members in
//! declaration order, and whether they declare a constructor. Shared by the
//! instrumenter (a task's tile origin field) and the extractor (a task's fields, a
//! launcher's task constructions).

use tree_sitter::Node;

use crate::Parsed;

/// The definition (with a body) of the struct or class `name` (its last `::`
/// component), if the file has one.
pub fn find_struct<'t>(parsed: &'t Parsed, name: &str) -> Option<Node<'t>> {
    let src = &parsed.source;
    let short = name.rsplit("::").next().unwrap_or(name).trim();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if matches!(n.kind(), "struct_specifier" | "class_specifier")
            && n.child_by_field_name("name")
                .is_some_and(|x| &src[x.byte_range()] == short)
            && n.child_by_field_name("body").is_some()
        {
            return Some(n);
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    None
}

/// The data members of the struct or class `name`, in declaration order, as (name,
/// declaration: `const int* p`); member functions are not among them. None when the
/// file does not define it.
pub fn struct_fields(parsed: &Parsed, name: &str) -> Option<Vec<(String, String)>> {
    let src = &parsed.source;
    let body = find_struct(parsed, name)?.child_by_field_name("body")?;
    let mut fields = Vec::new();
    let mut cursor = body.walk();
    for f in body.named_children(&mut cursor) {
        if f.kind() != "field_declaration" {
            continue;
        }
        let Some(ty) = f.child_by_field_name("type") else {
            continue;
        };
        // Qualifiers before the type (`const`) belong to every declarator.
        let head = src[f.start_byte()..ty.end_byte()].trim();
        let mut c = f.walk();
        for d in f.children_by_field_name("declarator", &mut c) {
            if d.kind() == "function_declarator" {
                continue;
            }
            let text = &src[d.byte_range()];
            if let Some(field) = crate::identifiers(text).last() {
                fields.push((field.to_owned(), format!("{head} {}", text.trim())));
            }
        }
    }
    Some(fields)
}

/// Whether the struct or class `name` declares a constructor.
pub fn has_constructor(parsed: &Parsed, name: &str) -> bool {
    let src = &parsed.source;
    let short = name.rsplit("::").next().unwrap_or(name).trim();
    let Some(body) = find_struct(parsed, name).and_then(|s| s.child_by_field_name("body")) else {
        return false;
    };
    let mut stack = vec![body];
    while let Some(m) = stack.pop() {
        if m.kind() == "function_declarator"
            && m.child_by_field_name("declarator")
                .is_some_and(|d| src[d.byte_range()].trim() == short)
        {
            return true;
        }
        let mut cursor = m.walk();
        stack.extend(m.named_children(&mut cursor));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_in_order_without_member_functions_and_constructors_seen() {
        let parsed = crate::parse(
            "namespace n { struct Task { const int* p, q; float beta; void f(); Task(int t); }; }\nstruct Plain { int a; };\n",
        );
        assert_eq!(
            struct_fields(&parsed, "n::Task").unwrap(),
            [
                ("p".to_owned(), "const int * p".to_owned()),
                ("q".to_owned(), "const int q".to_owned()),
                ("beta".to_owned(), "float beta".to_owned()),
            ]
        );
        assert!(has_constructor(&parsed, "Task"));
        assert!(!has_constructor(&parsed, "Plain"));
        assert!(struct_fields(&parsed, "Missing").is_none());
    }
}
