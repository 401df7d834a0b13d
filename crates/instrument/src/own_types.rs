//! A file's own `<stdint.h>` names: NVRTC-style generated kernels declare them
//! themselves, sometimes as other types than the system's, which kwb's runtime (it
//! includes `<cstdint>`) would then redeclare. The renames that keep both.

use kwb_syntax::Parsed;

/// The `<stdint.h>` names a file may define for itself (NVRTC-style generated kernels:
/// `typedef unsigned long long uint64_t;` at file scope, with no system header), each
/// with the type the system's `<cstdint>` gives it (glibc, LP64: the host nvcc builds
/// for here), spelled as [`builtin_integer`] spells it.
const STDINT_NAMES: [(&str, &str); 10] = [
    ("int8_t", "signed char"),
    ("uint8_t", "unsigned char"),
    ("int16_t", "short"),
    ("uint16_t", "unsigned short"),
    ("int32_t", "int"),
    ("uint32_t", "unsigned int"),
    ("int64_t", "long"),
    ("uint64_t", "unsigned long"),
    ("intptr_t", "long"),
    ("uintptr_t", "unsigned long"),
];

/// A builtin integer type's one spelling (`short int` and `signed short` are `short`,
/// `unsigned long long int` is `unsigned long long`); `None` for anything else (a
/// typedef name, `__int64`, a qualifier).
pub(crate) fn builtin_integer(text: &str) -> Option<String> {
    let (mut signed, mut unsigned, mut longs, mut short, mut char, mut int) =
        (false, false, 0, false, false, false);
    for word in text.split_whitespace() {
        match word {
            "signed" => signed = true,
            "unsigned" => unsigned = true,
            "long" => longs += 1,
            "short" => short = true,
            "char" => char = true,
            "int" => int = true,
            _ => return None,
        }
    }
    if (signed && unsigned) || longs > 2 || (short as u8 + char as u8 + (longs > 0) as u8) > 1 {
        return None;
    }
    if char && int {
        return None;
    }
    let sign = if unsigned { "unsigned " } else { "" };
    let base = match (char, short, longs) {
        (true, _, _) if signed => return Some("signed char".to_owned()),
        (true, _, _) => "char",
        (_, true, _) => "short",
        (_, _, 1) => "long",
        (_, _, 2) => "long long",
        _ if int || signed || unsigned => "int",
        _ => return None,
    };
    Some(format!("{sign}{base}"))
}

/// Where a file's own file-scope typedef of a `<stdint.h>` name would redeclare the
/// system's as another type (`typedef unsigned long long uint64_t;` against glibc's
/// `unsigned long`), the insertion that renames those names: `#define NAME
/// kwb_own_NAME` for each, placed just before the first such typedef and followed by a
/// `#line` back to it. kwb's runtime, inserted first, includes `<cstdint>`; renamed, the
/// file's own names keep its types in its typedefs and every use after them, while the
/// headers it includes before them keep the system's names. A typedef of the system's
/// own type (a file that also includes `<cstdint>` may repeat it) is left alone, and so
/// is one inside a preprocessor conditional. `None` where nothing conflicts.
pub(crate) fn own_integer_types(parsed: &Parsed, file: &str) -> Option<(usize, String)> {
    let root = parsed.tree.root_node();
    let mut cursor = root.walk();
    let mut names: Vec<&str> = Vec::new();
    let mut first: Option<tree_sitter::Node> = None;
    for child in root.children(&mut cursor) {
        if child.kind() != "type_definition" {
            continue;
        }
        let own = child
            .child_by_field_name("type")
            .and_then(|t| builtin_integer(parsed.text(t)));
        let mut declarators = child.walk();
        for d in child.children_by_field_name("declarator", &mut declarators) {
            let name = parsed.text(d).trim();
            let Some((known, system)) = STDINT_NAMES.iter().find(|(n, _)| *n == name) else {
                continue;
            };
            if own.as_deref() == Some(*system) || names.contains(known) {
                continue;
            }
            names.push(known);
            first.get_or_insert(child);
        }
    }
    let first = first?;
    let at = first.start_byte();
    let line_start = parsed.source[..at].rfind('\n').map_or(0, |p| p + 1);
    let lead = if parsed.source[line_start..at].trim().is_empty() {
        ""
    } else {
        "\n"
    };
    let defines: String = names
        .iter()
        .map(|n| format!("#define {n} kwb_own_{n}\n"))
        .collect();
    let line = first.start_position().row + 1;
    Some((at, format!("{lead}{defines}#line {line} \"{file}\"\n")))
}
