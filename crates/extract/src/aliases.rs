//! The file's type aliases (`using X = T;`, `typedef T X;`) outside functions, to
//! read a launcher's element types through them (`ElementA` is `cutlass::bfloat16_t`).

use kwb_syntax::Parsed;
use tree_sitter::Node;

/// Every alias outside a function body: (name, aliased type as written, node).
pub fn all(parsed: &Parsed) -> Vec<(String, String, Node<'_>)> {
    let mut out = Vec::new();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "function_definition" => continue,
            "alias_declaration" => {
                if let (Some(name), Some(ty)) =
                    (n.child_by_field_name("name"), n.child_by_field_name("type"))
                {
                    out.push((
                        parsed.source[name.byte_range()].trim().to_owned(),
                        squeeze(&parsed.source[ty.byte_range()]),
                        n,
                    ));
                }
            }
            "type_definition" => {
                if let (Some(name), Some(ty)) = (
                    n.child_by_field_name("declarator"),
                    n.child_by_field_name("type"),
                ) {
                    out.push((
                        parsed.source[name.byte_range()].trim().to_owned(),
                        squeeze(&parsed.source[ty.byte_range()]),
                        n,
                    ));
                }
            }
            _ => {}
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|(_, _, n)| n.start_byte());
    out
}

/// `ty` with every alias of `aliases` (the file's, from [`all`]) it is followed through
/// (at most 8 steps, so a cycle ends); a type that is no alias comes back as written.
pub fn resolve(aliases: &[(String, String, Node<'_>)], ty: &str) -> String {
    let mut current = ty.trim().to_owned();
    for _ in 0..8 {
        let short = current.strip_prefix("::").unwrap_or(&current);
        match aliases.iter().find(|(name, _, _)| name == short) {
            Some((_, value, _)) if value != &current => current = value.clone(),
            _ => break,
        }
    }
    current
}

/// `text` on one line, its comments dropped (`Swizzle, // <-- the only difference`
/// between two template arguments is no part of the type).
fn squeeze(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        match (rest.find("//"), rest.find("/*")) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                out.push(' ');
                rest = rest[l..].find('\n').map_or("", |e| &rest[l + e..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                out.push(' ');
                rest = rest[b + 2..]
                    .find("*/")
                    .map_or("", |e| &rest[b + 2 + e + 2..]);
            }
            _ => {
                out.push_str(rest);
                rest = "";
            }
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn element_types_are_read_through_aliases() {
        let parsed = kwb_syntax::parse(
            "namespace {\nusing ElementA = cutlass::bfloat16_t;\nusing Input = ElementA;\ntypedef float Acc;\n}\nvoid f() { using Local = int; }\n",
        );
        let aliases = super::all(&parsed);
        assert_eq!(super::resolve(&aliases, "Input"), "cutlass::bfloat16_t");
        assert_eq!(super::resolve(&aliases, "Acc"), "float");
        assert_eq!(super::resolve(&aliases, "Local"), "Local");
        assert_eq!(super::resolve(&aliases, "__nv_bfloat16"), "__nv_bfloat16");
    }

    #[test]
    fn comments_inside_an_alias_are_no_part_of_its_type() {
        let parsed = kwb_syntax::parse(
            "using G = Gemm<\n  float, /* A */ Swizzle, // <-- the only difference\n  Stages>;\n",
        );
        let aliases = super::all(&parsed);
        assert_eq!(
            super::resolve(&aliases, "G"),
            "Gemm< float, Swizzle, Stages>"
        );
    }
}
