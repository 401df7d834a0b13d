//! Function definitions: names, roles, template parameters, and local declarations.

use kwb_syntax::{BlankKind, Parsed};
use tree_sitter::Node;

use crate::fields::Field;

use crate::TemplateParam;
use crate::index::{Context, Index};

/// A function definition and what the kernel map needs to know of it.
pub struct Function<'t> {
    /// The `function_definition` node.
    pub node: Node<'t>,
    /// Its body.
    pub body: Option<Node<'t>>,
    /// Name as declared.
    pub name: String,
    /// The last component of the name (`CollectiveMma::mma` → `mma`).
    pub simple_name: String,
    /// `global`, `device`, `host` or `unknown` (no execution-space keyword).
    pub role: &'static str,
    /// Template parameters in scope.
    pub template_params: Vec<TemplateParam>,
}

/// Every function definition of the index, in source order.
pub fn collect<'t>(index: &Index<'t>, parsed: &Parsed) -> Vec<Function<'t>> {
    index
        .functions
        .iter()
        .zip(&index.contexts)
        .map(|(&node, context)| describe(node, context, parsed))
        .collect()
}

fn describe<'t>(node: Node<'t>, context: &Context<'t>, parsed: &Parsed) -> Function<'t> {
    let declarator = function_declarator(node);
    let name_node = declarator.and_then(|d| d.field("declarator"));
    let name = name_node
        .map(|n| {
            parsed.masked[n.byte_range()]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let simple_name = name
        .rsplit("::")
        .next()
        .unwrap_or(&name)
        .split('<')
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    // A member defined in its class is named with the class: `AffineBias::operator()`.
    let name = match context.class.and_then(|c| c.field("name")) {
        Some(class) if !name.contains("::") => {
            let class = parsed.masked[class.byte_range()]
                .split('<')
                .next()
                .unwrap_or("")
                .trim();
            format!("{class}::{name}")
        }
        _ => name,
    };
    let mut template_params = Vec::new();
    if let Some(parent) = context
        .parent
        .filter(|p| p.kind() == "template_declaration")
    {
        template_params.extend(template_parameters(parent, parsed, "function"));
    }
    if let Some(class_template) = context
        .class
        .and(context.class_parent)
        .filter(|p| p.kind() == "template_declaration")
    {
        template_params.extend(template_parameters(class_template, parsed, "class"));
    }
    Function {
        node,
        body: node.field("body"),
        name,
        simple_name,
        role: role(node, parsed),
        template_params,
    }
}

/// The `function_declarator` of a definition (through pointer, reference and
/// attribute declarators; an ERROR node's own child).
pub(crate) fn function_declarator(node: Node<'_>) -> Option<Node<'_>> {
    if node.is_error() {
        let mut cursor = node.walk();
        return node
            .named_children(&mut cursor)
            .find(|c| c.kind() == "function_declarator");
    }
    let mut current = node.field("declarator")?;
    loop {
        if current.kind() == "function_declarator" {
            return Some(current);
        }
        current = current
            .field("declarator")
            .or_else(|| current.named_child(0))?;
    }
}

/// The execution space, from keywords and macros blanked just before or inside the
/// function's head (a `template <…>` line may stand between).
fn role(node: Node<'_>, parsed: &Parsed) -> &'static str {
    let head_end = node
        .field("body")
        .map_or(node.end_byte(), |b| b.start_byte());
    // Macros before the node too.
    let start = parsed
        .leading_blanks(node.start_byte())
        .first()
        .map_or(node.start_byte(), |b| b.range.start);
    let mut role = "unknown";
    for blank in parsed.blanks_in(start..head_end) {
        let BlankKind::Macro(name) = &blank.kind else {
            continue;
        };
        match name.as_str() {
            "__global__" | "CUTLASS_GLOBAL" | "CUTE_GLOBAL" => return "global",
            "__device__"
            | "CUTLASS_DEVICE"
            | "CUTE_DEVICE"
            | "CUTLASS_HOST_DEVICE"
            | "CUTE_HOST_DEVICE" => role = "device",
            "__host__" | "CUTLASS_HOST" | "CUTE_HOST" if role == "unknown" => role = "host",
            _ => {}
        }
    }
    role
}

/// The parameters of the `template_declaration` `declaration`, `scope` naming whose
/// they are (`function`, `class`).
pub fn template_parameters(
    declaration: Node<'_>,
    parsed: &Parsed,
    scope: &'static str,
) -> Vec<TemplateParam> {
    let Some(list) = declaration.field("parameters") else {
        return Vec::new();
    };
    let text = |n: Option<Node<'_>>| n.map(|n| squash(&parsed.source[n.byte_range()]));
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter(|p| p.kind() != "comment")
        .map(|param| {
            let (kind, name, ty, default) = match param.kind() {
                "type_parameter_declaration" => ("type", param.named_child(0), None, None),
                "optional_type_parameter_declaration" => (
                    "type",
                    param.field("name"),
                    None,
                    param.field("default_type"),
                ),
                "variadic_type_parameter_declaration" | "variadic_parameter_declaration" => {
                    ("pack", last_identifier(param), None, None)
                }
                "template_template_parameter_declaration" => {
                    ("template", last_identifier(param), None, None)
                }
                "optional_parameter_declaration" => (
                    "non-type",
                    param.field("declarator"),
                    param.field("type"),
                    param.field("default_value"),
                ),
                _ => (
                    "non-type",
                    param.field("declarator"),
                    param.field("type"),
                    None,
                ),
            };
            TemplateParam {
                name: text(name).unwrap_or_default(),
                kind,
                ty: text(ty),
                default: text(default),
                scope,
            }
        })
        .collect()
}

fn last_identifier(node: Node<'_>) -> Option<Node<'_>> {
    let mut found = None;
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        if matches!(child.kind(), "type_identifier" | "identifier") {
            found = Some(child);
        }
    }
    found
}

fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
