//! A `__global__` function's definition: its template parameters and parameters.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::scan::split_top;

/// A template parameter as declared.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TemplateParam {
    pub name: String,
    /// `type` (`class T`, `typename T`) or `non-type` (`int BM`).
    pub kind: &'static str,
    /// The declared type of a non-type parameter.
    pub ty: Option<String>,
    pub default: Option<String>,
}

/// One parameter of the kernel, as written (`const __nv_bfloat16* __restrict__ A`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Param {
    pub name: String,
    pub declaration: String,
    /// What a runner must pass, read from the name and type (a guess, named as one):
    /// `A`, `B`, `C`, `D`, `bias` (pointers), `tma-descriptor`, `m`, `n`, `k`,
    /// `leading-dimension`, `alpha`, `beta`, or `pointer`/`scalar`/`other`.
    pub role: String,
    /// The element type of a pointer (`__nv_bfloat16`, `float`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
}

/// The role and pointer element type of a parameter from its declaration.
pub fn role(name: &str, declaration: &str) -> (&'static str, Option<String>) {
    let ty = declaration[..declaration.len().saturating_sub(name.len())].trim();
    let words: Vec<&str> = crate::scan::identifiers(ty)
        .filter(|w| {
            !matches!(
                *w,
                "const" | "volatile" | "__restrict__" | "__restrict" | "__grid_constant__"
            )
        })
        .collect();
    let element = (ty.contains('*'))
        .then(|| words.join(" "))
        .filter(|e| !e.is_empty());
    if ty.contains("CUtensorMap") {
        return ("tma-descriptor", None);
    }
    let lower = name.to_ascii_lowercase();
    if element.is_some() {
        let role = match lower.trim_start_matches("ptr_").trim_start_matches("d_") {
            "a" | "mat_a" | "a_ptr" | "x" | "input" | "in" => "A",
            "b" | "mat_b" | "b_ptr" | "w" | "weight" | "weights" => "B",
            "c" | "mat_c" | "c_ptr" | "src" => "C",
            "d" | "mat_d" | "d_ptr" | "out" | "output" | "y" | "dst" => "D",
            "bias" => "bias",
            _ => "pointer",
        };
        return (role, element);
    }
    let integer = words.iter().any(|w| {
        matches!(
            *w,
            "int"
                | "long"
                | "unsigned"
                | "size_t"
                | "int32_t"
                | "int64_t"
                | "uint32_t"
                | "uint64_t"
        )
    });
    let floating = words
        .iter()
        .any(|w| matches!(*w, "float" | "double" | "half" | "__half"));
    let role = match (name, integer, floating) {
        ("M" | "m", true, _) => "m",
        ("N" | "n", true, _) => "n",
        ("K" | "k", true, _) => "k",
        (_, true, _) if lower.starts_with("ld") => "leading-dimension",
        (_, _, true) if lower == "alpha" => "alpha",
        (_, _, true) if lower == "beta" => "beta",
        (_, true, _) | (_, _, true) => "scalar",
        _ => "other",
    };
    (role, None)
}

/// A kernel definition.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KernelDef {
    pub name: String,
    /// 1-based line of the definition (its `template` line when it has one).
    pub line: usize,
    pub template_params: Vec<TemplateParam>,
    pub params: Vec<Param>,
    /// Bytes of the function definition.
    #[serde(skip)]
    pub range: std::ops::Range<usize>,
}

/// The `__global__` definitions of `name` (a name with `::` matches its last part).
pub fn find(parsed: &Parsed, name: &str) -> Vec<KernelDef> {
    let short = name.rsplit("::").next().unwrap_or(name);
    let mut out = Vec::new();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "function_definition"
            && let Some(def) = definition(parsed, n)
            && def.name == short
        {
            out.push(def);
            continue;
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|d| d.line);
    out
}

/// Every `__global__` function's name, for a message.
pub fn all(parsed: &Parsed) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "function_definition"
            && let Some(def) = definition(parsed, n)
        {
            out.push(def.name);
            continue;
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort();
    out.dedup();
    out
}

fn definition(parsed: &Parsed, function: Node<'_>) -> Option<KernelDef> {
    let template = function
        .parent()
        .filter(|p| p.kind() == "template_declaration");
    let start = template.unwrap_or(function);
    let head_end = function
        .child_by_field_name("body")
        .map_or(function.end_byte(), |b| b.start_byte());
    let from = crate::items::blanked_start(parsed, start.start_byte());
    if !parsed.source[from..head_end].contains("__global__") {
        return None;
    }
    let mut d = function.child_by_field_name("declarator")?;
    while d.kind() != "function_declarator" {
        d = d.child_by_field_name("declarator")?;
    }
    let name_node = d.child_by_field_name("declarator")?;
    let name = parsed.source[name_node.byte_range()]
        .rsplit("::")
        .next()?
        .trim()
        .to_owned();
    let params = d
        .child_by_field_name("parameters")
        .map(|p| {
            let text = &parsed.source[p.start_byte() + 1..p.end_byte().saturating_sub(1)];
            split_top(text)
                .into_iter()
                .filter(|p| !p.is_empty() && p != "void")
                .map(|declaration| {
                    let name = last_identifier(&declaration);
                    let declaration = squeeze(&declaration);
                    let (role, element) = role(&name, &declaration);
                    Param {
                        name,
                        declaration,
                        role: role.to_owned(),
                        element,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let template_params = template
        .and_then(|t| t.child_by_field_name("parameters"))
        .map(|list| {
            let text = &parsed.source[list.start_byte() + 1..list.end_byte().saturating_sub(1)];
            split_top(text).iter().map(|p| template_param(p)).collect()
        })
        .unwrap_or_default();
    Some(KernelDef {
        name,
        line: parsed.source[..from].matches('\n').count() + 1,
        template_params,
        params,
        range: function.byte_range(),
    })
}

fn template_param(text: &str) -> TemplateParam {
    let (decl, default) = match split_default(text) {
        Some((d, v)) => (d, Some(v)),
        None => (text.trim().to_owned(), None),
    };
    let name = last_identifier(&decl);
    let head = decl[..decl.len() - name.len()].trim().to_owned();
    let is_type = matches!(head.as_str(), "class" | "typename")
        || head.ends_with("class")
        || head.ends_with("typename");
    TemplateParam {
        name,
        kind: if is_type { "type" } else { "non-type" },
        ty: (!is_type && !head.is_empty()).then_some(head),
        default,
    }
}

/// `int BM = 128` → ("int BM", "128"), at the first `=` outside brackets.
fn split_default(text: &str) -> Option<(String, String)> {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            '=' if depth == 0 => {
                return Some((text[..i].trim().to_owned(), text[i + 1..].trim().to_owned()));
            }
            _ => {}
        }
    }
    None
}

fn last_identifier(text: &str) -> String {
    let trimmed = text.trim_end_matches(|c: char| c == ']' || c.is_ascii_digit() || c == '[');
    crate::scan::identifiers(trimmed)
        .last()
        .unwrap_or("")
        .to_owned()
}

fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
