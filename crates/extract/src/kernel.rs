//! A `__global__` function's definition: its template parameters and parameters.

use kwb_sites::{Kernel, KernelMap, TemplateParam};
use kwb_syntax::Parsed;

use crate::scan::split_top;

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
    // The pointee as written, qualifiers dropped and `::` kept (`cute::bfloat16_t`).
    let element = (ty.contains('*'))
        .then(|| {
            ty.replace(['*', '&'], " ")
                .split_whitespace()
                .filter(|w| {
                    !matches!(
                        *w,
                        "const" | "volatile" | "__restrict__" | "__restrict" | "__grid_constant__"
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
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
    let integer = integer_type(&words);
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

/// Whether a declaration's type words name an integer type.
pub(crate) fn integer_type(words: &[&str]) -> bool {
    words.iter().any(|w| {
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
    })
}

/// A kernel definition.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KernelDef {
    pub name: String,
    /// 1-based line of the definition, as the kernel map gives it.
    pub line: usize,
    pub template_params: Vec<TemplateParam>,
    pub params: Vec<Param>,
    /// Bytes of the function definition.
    #[serde(skip)]
    pub range: std::ops::Range<usize>,
}

/// A kernel known only by the name the file gives it (a library kernel behind a type):
/// no definition, parameters or line.
pub fn named_only(name: &str) -> KernelDef {
    KernelDef {
        name: simple_name(name).to_owned(),
        line: 0,
        template_params: Vec::new(),
        params: Vec::new(),
        range: 0..0,
    }
}

/// The `__global__` definitions of `name` in the kernel map (a name with `::`
/// matches its last part), in source order.
pub fn find(parsed: &Parsed, map: &KernelMap, name: &str) -> Vec<KernelDef> {
    let short = simple_name(name);
    globals(map)
        .filter(|k| simple_name(&k.name) == short)
        .filter_map(|k| definition(parsed, k))
        .collect()
}

/// The line of a declaration without a body of the `__global__` function `name`
/// (`extern "C" __global__ void K(…);`), where the file has one.
pub fn declared(parsed: &Parsed, name: &str) -> Option<usize> {
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(node) = stack.pop() {
        match node.kind() {
            // Bodies hold no kernel declarations worth the walk.
            "function_definition" | "compound_statement" => continue,
            "declaration" | "field_declaration" => {
                let mut cursor = node.walk();
                let names_it = node
                    .children_by_field_name("declarator", &mut cursor)
                    .filter(|d| d.kind() == "function_declarator")
                    .filter_map(|d| d.child_by_field_name("declarator"))
                    .any(|d| simple_name(&parsed.masked[d.byte_range()]) == name);
                // `__global__` is blanked by the macro pre-pass; the source line holds it.
                let line_start = parsed.source[..node.start_byte()]
                    .rfind('\n')
                    .map_or(0, |i| i + 1);
                if names_it && parsed.source[line_start..node.end_byte()].contains("__global__") {
                    return Some(node.start_position().row + 1);
                }
                continue;
            }
            _ => {}
        }
        for k in (0..node.named_child_count()).rev() {
            if let Some(child) = node.named_child(k) {
                stack.push(child);
            }
        }
    }
    None
}

/// Every `__global__` function's name, for a message.
pub fn all(map: &KernelMap) -> Vec<String> {
    let mut out: Vec<String> = globals(map)
        .map(|k| simple_name(&k.name).to_owned())
        .collect();
    out.sort();
    out.dedup();
    out
}

fn globals(map: &KernelMap) -> impl Iterator<Item = &Kernel> {
    map.kernels.iter().filter(|k| k.role == "global")
}

fn simple_name(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name).trim()
}

/// A kernel's definition: the kernel map gives its name, line and template
/// parameters; its parameter list is read from the function declarator.
fn definition(parsed: &Parsed, kernel: &Kernel) -> Option<KernelDef> {
    let function = parsed
        .tree
        .root_node()
        .descendant_for_byte_range(kernel.range.start, kernel.range.end)?;
    let params = params_of(parsed, function)?;
    Some(KernelDef {
        name: simple_name(&kernel.name).to_owned(),
        line: kernel.line,
        template_params: kernel.template_params.clone(),
        params,
        range: kernel.range.clone(),
    })
}

/// The parameters of the function definition `function`, each with its role; `None`
/// when it has no function declarator.
pub fn params_of(parsed: &Parsed, function: tree_sitter::Node<'_>) -> Option<Vec<Param>> {
    let d = crate::tree::function_declarator(function)?;
    Some(
        d.child_by_field_name("parameters")
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
            .unwrap_or_default(),
    )
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
