//! What the caller of a launcher does before its call that the call needs: the
//! declarations of the names it passes (an options struct, a hardware-info struct,
//! the aliases of a runner's type) and the statements that set them up, with the
//! fields of a struct the file defines bound to the runner's problem by role.
//!
//! Invariant: a statement that reads one of the caller's own parameters (`argv`) or
//! returns is never copied; everything copied is the caller's text as written.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::through::Binding;

/// One top-level statement of the caller before its call.
#[derive(Debug, Clone)]
struct Statement {
    text: String,
    line: usize,
    kind: &'static str,
    /// Names it declares, with the declared type (for a variable).
    declares: Vec<(String, String)>,
    names: Vec<String>,
}

/// The caller's statements the call needs, to copy in order, and the bindings they got.
pub(crate) struct Setup {
    pub body: String,
    pub bindings: Vec<Binding>,
}

/// The statements of `caller` before byte `before` that the names in `seeds` need (to
/// a fixed point), each followed by the problem bindings of the variables it declares.
/// Err names a seed that is one of the caller's parameters.
pub(crate) fn setup(
    parsed: &Parsed,
    caller: Node<'_>,
    before: usize,
    seeds: &[String],
    file: &str,
) -> Result<Setup, String> {
    let params = crate::tree::parameter_names(parsed, caller);
    if let Some(p) = seeds.iter().find(|s| params.contains(s)) {
        return Err(format!(
            "the call passes `{p}`, a parameter of its caller, which a reproducer does not have"
        ));
    }
    let statements = statements(parsed, caller, before);
    let variables: Vec<String> = statements
        .iter()
        .flat_map(|s| s.declares.iter().filter(|(_, t)| !t.is_empty()))
        .map(|(v, _)| v.clone())
        .collect();
    let mut needed: Vec<String> = seeds.to_vec();
    let mut kept = vec![false; statements.len()];
    loop {
        let mut grew = false;
        for (s, k) in statements.iter().zip(kept.iter_mut()) {
            if *k || s.names.iter().any(|n| params.contains(n)) {
                continue;
            }
            let declares = s.declares.iter().any(|(d, _)| needed.contains(d));
            // A statement that works on a needed variable (`hw_info.sm_count = …`,
            // `options.tensor_a.resize(…)`).
            let uses = s.kind == "expression_statement"
                && s.names
                    .iter()
                    .any(|n| needed.contains(n) && variables.contains(n));
            if declares || uses {
                *k = true;
                grew = true;
                for n in &s.names {
                    if !needed.contains(n) {
                        needed.push(n.clone());
                    }
                }
            }
        }
        if !grew {
            break;
        }
    }
    let mut body = String::new();
    let mut bindings = Vec::new();
    for (s, _) in statements.iter().zip(&kept).filter(|(_, k)| **k) {
        body.push_str(&format!(
            "  // kwb-extract: {file}:{}\n  {}\n",
            s.line, s.text
        ));
        for (variable, ty) in &s.declares {
            for (field, role, value) in fields(parsed, ty, variable) {
                body.push_str(&format!(
                    "  {variable}.{field} = {value};  // kwb-extract: bound to the problem\n"
                ));
                bindings.push(Binding {
                    param: format!("{variable}.{field}"),
                    role: role.to_owned(),
                    value,
                    from: format!(
                        "a field of the caller's `{variable}` (`{ty}`), by name and type (a guess)"
                    ),
                });
            }
        }
    }
    Ok(Setup { body, bindings })
}

/// The fields of struct `ty` (defined in the file) that hold the problem: (field,
/// role, C++ value).
fn fields(parsed: &Parsed, ty: &str, variable: &str) -> Vec<(String, &'static str, String)> {
    let name = ty
        .trim()
        .trim_start_matches("const ")
        .split('<')
        .next()
        .unwrap_or(ty)
        .trim();
    let Some(fields) = kwb_syntax::struct_fields(parsed, name) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (field, declaration) in fields {
        let words: Vec<&str> = kwb_syntax::identifiers(&declaration).collect();
        let arithmetic = !declaration.contains('*')
            && words
                .iter()
                .any(|w| crate::kernel::integer_type(&[w]) || matches!(*w, "float" | "double"));
        let cast = |v: &str| format!("static_cast<decltype({variable}.{field})>({v})");
        let bound = match field.as_str() {
            "m" | "M" if arithmetic => Some(("m", cast("kwb_p->M"))),
            "n" | "N" if arithmetic => Some(("n", cast("kwb_p->N"))),
            "k" | "K" if arithmetic => Some(("k", cast("kwb_p->K"))),
            "alpha" if arithmetic => Some(("alpha", cast("kwb_p->alpha"))),
            "beta" if arithmetic => Some(("beta", cast("kwb_p->beta"))),
            "problem_size" if declaration.contains("GemmCoord") => Some((
                "m, n, k",
                format!(
                    "decltype({variable}.{field})(static_cast<int>(kwb_p->M), static_cast<int>(kwb_p->N), static_cast<int>(kwb_p->K))"
                ),
            )),
            _ => None,
        };
        if let Some((role, value)) = bound {
            out.push((field, role, value));
        }
    }
    out
}

/// The top-level statements of `function` before byte `before` (a conditional block's
/// first branch counts as top level), that a setup may copy: declarations, aliases
/// and expression statements.
fn statements(parsed: &Parsed, function: Node<'_>, before: usize) -> Vec<Statement> {
    let src = &parsed.source;
    let mut out = Vec::new();
    for n in crate::tree::top_statements(function, before) {
        if !matches!(
            n.kind(),
            "declaration" | "alias_declaration" | "type_definition" | "expression_statement"
        ) {
            continue;
        }
        let text = crate::tree::as_written(parsed, n).to_owned();
        let names: Vec<String> = kwb_syntax::identifiers(&strip_literals(&text))
            .map(str::to_owned)
            .collect();
        if names.iter().any(|w| w == "return") {
            continue;
        }
        let declares = match n.kind() {
            "declaration" => {
                let ty = n
                    .child_by_field_name("type")
                    .map(|t| src[t.byte_range()].replace("typename", " "))
                    .unwrap_or_default();
                let ty = ty.split_whitespace().collect::<Vec<_>>().join(" ");
                let mut c = n.walk();
                n.children_by_field_name("declarator", &mut c)
                    .filter_map(|d| {
                        let t = &src[d.byte_range()];
                        let head = t.split(['=', '(', '{', '[']).next().unwrap_or(t);
                        kwb_syntax::identifiers(head)
                            .last()
                            .map(|v| (v.to_owned(), ty.clone()))
                    })
                    .collect()
            }
            "alias_declaration" | "type_definition" => n
                .child_by_field_name("name")
                .or_else(|| n.child_by_field_name("declarator"))
                .map(|d| (src[d.byte_range()].trim().to_owned(), String::new()))
                .into_iter()
                .collect(),
            _ => Vec::new(),
        };
        out.push(Statement {
            text,
            line: crate::tree::line_of(src, n.start_byte()),
            kind: n.kind(),
            declares,
            names,
        });
    }
    out
}

/// `text` with its string and character literals blanked, so their words are not
/// taken for names.
fn strip_literals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in text.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
                out.push(' ');
            }
            None => {
                if c == '"' || c == '\'' {
                    quote = Some(c);
                    out.push(' ');
                } else {
                    out.push(c);
                }
            }
        }
    }
    out
}
