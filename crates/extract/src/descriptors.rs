//! TMA descriptor constructions: every `cuTensorMapEncodeTiled`-shaped call (through
//! any function pointer: twelve arguments, the second a `CU_TENSOR_MAP_DATA_TYPE_*`),
//! its parameters resolved through the local arrays and variables that hold them, and
//! the changes made to those before the call — applied when an `if constexpr`
//! guard folds true with the `-D`s given, listed when it cannot be decided.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fold::Constants;
use crate::scan::{close, split_top};

/// One field of a descriptor.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Field {
    /// The argument as the call writes it.
    pub written: String,
    /// What it holds: the elements of a local array's initializer, or a local
    /// variable's initial value, after the changes that apply.
    pub values: Vec<String>,
    /// The same folded to integers where every element folds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folded: Option<Vec<i64>>,
    /// Changes made before the call: `line N: text`, with whether they apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
}

/// One descriptor construction.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Descriptor {
    pub line: usize,
    /// The function it is in.
    pub function: String,
    /// That function's parameter names, in order (what a call's arguments bind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub function_params: Vec<String>,
    pub data_type: Field,
    pub rank: Field,
    pub global_address: Field,
    pub global_dims: Field,
    pub global_strides: Field,
    pub box_dims: Field,
    pub element_strides: Field,
    pub interleave: Field,
    pub swizzle: Field,
    pub l2_promotion: Field,
    pub oob_fill: Field,
}

/// Every descriptor construction of `parsed`.
pub fn descriptors(parsed: &Parsed, constants: &Constants) -> Vec<Descriptor> {
    let src = &parsed.source;
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(hit) = src[from..]
        .find("CU_TENSOR_MAP_DATA_TYPE_")
        .map(|i| i + from)
    {
        from = hit + 1;
        // The call around it: the innermost `(` before it that encloses it.
        let Some(open) = enclosing_paren(src, hit) else {
            continue;
        };
        let Some(end) = close(src, open) else {
            continue;
        };
        let args = split_top(&src[open + 1..end - 1]);
        if args.len() != 12 || !args[1].starts_with("CU_TENSOR_MAP_DATA_TYPE_") {
            continue;
        }
        from = end;
        let function = parsed
            .tree
            .root_node()
            .descendant_for_byte_range(open, open + 1)
            .and_then(crate::tree::enclosing_function);
        let name = function
            .and_then(|f| f.child_by_field_name("declarator"))
            .map(|d| {
                let text = &src[d.byte_range()];
                text.split('(').next().unwrap_or(text).trim().to_owned()
            })
            .unwrap_or_default();
        let function_params = function
            .map(|f| crate::tree::parameter_names(parsed, f))
            .unwrap_or_default();
        let field = |arg: &String| resolve(parsed, function, arg, open, constants);
        out.push(Descriptor {
            line: src[..open].matches('\n').count() + 1,
            function: name,
            function_params,
            data_type: field(&args[1]),
            rank: field(&args[2]),
            global_address: field(&args[3]),
            global_dims: field(&args[4]),
            global_strides: field(&args[5]),
            box_dims: field(&args[6]),
            element_strides: field(&args[7]),
            interleave: field(&args[8]),
            swizzle: field(&args[9]),
            l2_promotion: field(&args[10]),
            oob_fill: field(&args[11]),
        });
    }
    out
}

fn enclosing_paren(src: &str, at: usize) -> Option<usize> {
    let bytes = src.as_bytes();
    let mut depth = 0;
    let mut i = at;
    while i > 0 {
        i -= 1;
        match bytes[i] {
            b')' => depth += 1,
            b'(' if depth == 0 => return Some(i),
            b'(' => depth -= 1,
            b';' | b'{' | b'}' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// The field an argument gives: a local array or variable declared before `before`
/// in `function` (its initializer, then the changes to it), or the argument itself.
fn resolve(
    parsed: &Parsed,
    function: Option<Node<'_>>,
    arg: &str,
    before: usize,
    constants: &Constants,
) -> Field {
    let arg = arg.trim();
    let name = arg.trim_start_matches('&').trim();
    let plain = !name.is_empty() && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric());
    let mut values = vec![arg.to_owned()];
    let mut changes = Vec::new();
    if plain && let Some(f) = function {
        if let Some(init) = crate::tree::initializer(parsed, f, name, before) {
            let init = parsed.source[init.byte_range()].trim();
            values = match init.strip_prefix('{').and_then(|i| i.strip_suffix('}')) {
                Some(list) => split_top(list),
                None => vec![init.to_owned()],
            };
        }
        for (line, guard, target, value) in assignments(parsed, f, name, before) {
            let applies = match &guard {
                None => Some(true),
                Some(g) if g.constexpr => constants.fold(&g.condition).ok().map(|v| v != 0),
                Some(_) => None,
            };
            let how = match (&guard, applies) {
                (None, _) => "applies".to_owned(),
                (Some(g), Some(true)) => format!("applies: `{}` holds", g.condition),
                (Some(g), Some(false)) => format!("does not apply: `{}` is false", g.condition),
                (Some(g), None) => format!("undecided: `{}` is not known here", g.condition),
            };
            changes.push(format!("line {line}: {target} = {value} ({how})"));
            if applies == Some(true) {
                match target.strip_prefix(name).map(str::trim) {
                    Some("") => values = vec![value.clone()],
                    Some(index) => {
                        let i = index
                            .strip_prefix('[')
                            .and_then(|x| x.strip_suffix(']'))
                            .and_then(|x| constants.fold(x).ok())
                            .and_then(|i| usize::try_from(i).ok());
                        if let Some(slot) = i.and_then(|i| values.get_mut(i)) {
                            *slot = value.clone();
                        }
                    }
                    None => {}
                }
            }
        }
    }
    let folded = values
        .iter()
        .map(|v| constants.fold(strip_casts(v)).ok())
        .collect::<Option<Vec<i64>>>();
    Field {
        written: arg.to_owned(),
        values,
        folded,
        changes,
    }
}

/// `cuuint64_t(x)` / `cuuint32_t(x)` / `static_cast<T>(x)` → `x` (one level).
fn strip_casts(text: &str) -> &str {
    let t = text.trim();
    for prefix in [
        "cuuint64_t(",
        "cuuint32_t(",
        "uint64_t(",
        "uint32_t(",
        "int(",
    ] {
        if let Some(inner) = t.strip_prefix(prefix).and_then(|r| r.strip_suffix(')')) {
            return inner.trim();
        }
    }
    if let Some(rest) = t.strip_prefix("static_cast<")
        && let Some(open) = rest.find(">(")
        && let Some(inner) = rest[open + 2..].strip_suffix(')')
    {
        return inner.trim();
    }
    t
}

/// The condition guarding a statement.
struct Guard {
    condition: String,
    constexpr: bool,
}

/// Assignments `name = v` / `name[i] = v` in `function` before `before`, in order:
/// (line, the `if` guarding it, the target as written, the value).
fn assignments(
    parsed: &Parsed,
    function: Node<'_>,
    name: &str,
    before: usize,
) -> Vec<(usize, Option<Guard>, String, String)> {
    let mut out = Vec::new();
    for n in crate::tree::nodes_before(function, before) {
        if n.kind() == "assignment_expression"
            && let (Some(left), Some(right)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("right"),
            )
        {
            let target = parsed.source[left.byte_range()].trim().to_owned();
            let base = target.split('[').next().unwrap_or("").trim();
            if base == name {
                out.push((
                    n.start_position().row + 1,
                    guard(parsed, n),
                    target,
                    parsed.source[right.byte_range()].trim().to_owned(),
                ));
            }
        }
    }
    out
}

/// The innermost `if` whose consequence holds `node`.
fn guard(parsed: &Parsed, node: Node<'_>) -> Option<Guard> {
    let mut n = node;
    while let Some(p) = n.parent() {
        if p.kind() == "if_statement" {
            let condition = p.child_by_field_name("condition")?;
            let in_consequence = p.child_by_field_name("consequence").is_some_and(|c| {
                c.start_byte() <= node.start_byte() && node.end_byte() <= c.end_byte()
            });
            let text = parsed.source[condition.byte_range()].trim();
            let text = text
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .unwrap_or(text);
            let constexpr =
                parsed.source[p.start_byte()..condition.start_byte()].contains("constexpr");
            let condition = if in_consequence {
                text.trim().to_owned()
            } else {
                format!("!({})", text.trim())
            };
            return Some(Guard {
                condition,
                constexpr,
            });
        }
        if p.kind() == "function_definition" {
            return None;
        }
        n = p;
    }
    None
}
