//! Where a task of a megakernel is in the source: the device function's calls in the
//! kernels, the dispatch that reaches each call, the task variable and its struct, and
//! the fields the instantiation reads through its task parameter.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fold::Constants;
use crate::kernel::Param;

/// A call of the device function inside a `__global__` function.
pub(crate) struct Call<'t> {
    pub node: Node<'t>,
    pub kernel: Node<'t>,
    /// The template arguments as written.
    pub args: Vec<String>,
    pub line: usize,
}

/// Every call of `name` (a `name<ARGS>(…)` or `name(…)`) inside `kernels` (function
/// definitions), in source order.
pub(crate) fn calls<'t>(parsed: &'t Parsed, kernels: &[Node<'t>], name: &str) -> Vec<Call<'t>> {
    let src = &parsed.source;
    let mut out = Vec::new();
    for &kernel in kernels {
        let mut stack = vec![kernel];
        while let Some(n) = stack.pop() {
            if n.kind() == "call_expression"
                && let Some(f) = n.child_by_field_name("function")
            {
                let (callee, args) = match f.kind() {
                    "template_function" => (
                        f.child_by_field_name("name")
                            .map(|x| &src[x.byte_range()])
                            .unwrap_or(""),
                        f.child_by_field_name("arguments")
                            .map(|a| {
                                let t = &src[a.byte_range()];
                                crate::scan::split_top(&t[1..t.len().saturating_sub(1)])
                            })
                            .unwrap_or_default(),
                    ),
                    "identifier" | "qualified_identifier" => (&src[f.byte_range()], Vec::new()),
                    _ => ("", Vec::new()),
                };
                if callee.rsplit("::").next() == Some(name) {
                    out.push(Call {
                        node: n,
                        kernel,
                        args,
                        line: n.start_position().row + 1,
                    });
                }
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
    }
    out.sort_by_key(|c| c.node.start_byte());
    out
}

/// How the kernel reaches the call: the task variable, its dispatch field and value.
pub(crate) struct Dispatch {
    /// The variable the dispatch reads (`task`).
    pub variable: String,
    pub field: String,
    /// The case label (`TASK_LINEAR_DOWN`).
    pub value: String,
}

/// The `case VALUE:` of a `switch (VAR.FIELD)` around `call`, or the
/// `if (VAR.FIELD == VALUE)` whose branch holds it.
pub(crate) fn dispatch(parsed: &Parsed, call: Node<'_>) -> Option<Dispatch> {
    let src = &parsed.source;
    let member = |n: Node<'_>| -> Option<(String, String)> {
        let mut n = n;
        while matches!(n.kind(), "condition_clause" | "parenthesized_expression") {
            n = n.named_child(0)?;
        }
        (n.kind() == "field_expression").then_some(())?;
        let var = n.child_by_field_name("argument")?;
        let field = n.child_by_field_name("field")?;
        Some((
            src[var.byte_range()].to_owned(),
            src[field.byte_range()].to_owned(),
        ))
    };
    let mut node = call.parent();
    while let Some(n) = node {
        match n.kind() {
            "case_statement" => {
                let value = n.child_by_field_name("value")?;
                let mut s = n.parent();
                while let Some(x) = s {
                    if x.kind() == "switch_statement" {
                        let (variable, field) = member(x.child_by_field_name("condition")?)?;
                        return Some(Dispatch {
                            variable,
                            field,
                            value: src[value.byte_range()].trim().to_owned(),
                        });
                    }
                    s = x.parent();
                }
                return None;
            }
            "if_statement" => {
                let mut c = n.child_by_field_name("condition")?;
                while matches!(c.kind(), "condition_clause" | "parenthesized_expression") {
                    c = c.named_child(0)?;
                }
                if c.kind() == "binary_expression"
                    && c.child_by_field_name("operator")
                        .is_some_and(|o| &src[o.byte_range()] == "==")
                {
                    let (l, r) = (
                        c.child_by_field_name("left")?,
                        c.child_by_field_name("right")?,
                    );
                    let (m, v) = match (member(l), member(r)) {
                        (Some(m), None) => (m, r),
                        (None, Some(m)) => (m, l),
                        _ => return None,
                    };
                    return Some(Dispatch {
                        variable: m.0,
                        field: m.1,
                        value: src[v.byte_range()].trim().to_owned(),
                    });
                }
            }
            "function_definition" => return None,
            _ => {}
        }
        node = n.parent();
    }
    None
}

/// The declaration of the local `variable` in `kernel`: its type (qualifiers
/// dropped) and the kernel parameter its initializer indexes (`tasks` of
/// `const Task task = tasks[t];`).
pub(crate) fn task_variable(
    parsed: &Parsed,
    kernel: Node<'_>,
    variable: &str,
    params: &[Param],
) -> Option<(String, String)> {
    let src = &parsed.source;
    let mut stack = vec![kernel];
    while let Some(n) = stack.pop() {
        if n.kind() == "declaration"
            && let Some(ty) = n.child_by_field_name("type")
        {
            let mut cursor = n.walk();
            for d in n.children_by_field_name("declarator", &mut cursor) {
                let declared = d.child_by_field_name("declarator").unwrap_or(d);
                let name = kwb_syntax::identifiers(&src[declared.byte_range()]).last();
                if name != Some(variable) {
                    continue;
                }
                let value = d
                    .child_by_field_name("value")
                    .map(|v| &src[v.byte_range()])
                    .unwrap_or("");
                let list =
                    kwb_syntax::identifiers(value).find(|w| params.iter().any(|p| p.name == *w))?;
                let ty = src[ty.byte_range()].trim();
                return Some((ty.to_owned(), list.to_owned()));
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    None
}

/// The fields read through the variable `param` in `root` (`param.f`, `param->f`)
/// and through the functions of the file `root` passes `param` to (`g(param)`,
/// `g(&param)`, `g(*param)`: the function's parameter at that position, to any depth),
/// in first-use order. `root` is a task's call (its arguments read fields, its callee
/// reads the task it is passed) or a function's body.
pub(crate) fn fields_read(parsed: &Parsed, root: Node<'_>, param: &str) -> Vec<String> {
    let mut found: Vec<(usize, String)> = Vec::new();
    let mut seen: Vec<(usize, String)> = Vec::new();
    read_through(parsed, root, param, &mut found, &mut seen);
    found.sort();
    found.into_iter().map(|(_, n)| n).collect()
}

fn read_through(
    parsed: &Parsed,
    root: Node<'_>,
    param: &str,
    found: &mut Vec<(usize, String)>,
    seen: &mut Vec<(usize, String)>,
) {
    let src = &parsed.source;
    if seen.contains(&(root.start_byte(), param.to_owned())) {
        return;
    }
    seen.push((root.start_byte(), param.to_owned()));
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind() == "field_expression"
            && n.child_by_field_name("argument")
                .is_some_and(|a| &src[a.byte_range()] == param)
            && let Some(f) = n.child_by_field_name("field")
        {
            let name = src[f.byte_range()].to_owned();
            if !found.iter().any(|(_, x)| *x == name) {
                found.push((n.start_byte(), name));
            }
        }
        if n.kind() == "call_expression"
            && let (Some(callee), Some(args)) = (
                n.child_by_field_name("function"),
                n.child_by_field_name("arguments"),
            )
        {
            let text = &src[args.byte_range()];
            let passed = crate::scan::split_top(&text[1..text.len().saturating_sub(1)])
                .iter()
                .position(|a| a.trim().trim_start_matches(['&', '*']).trim() == param);
            let name = callee
                .child_by_field_name("name")
                .map_or(&src[callee.byte_range()], |x| &src[x.byte_range()]);
            let short = name.rsplit("::").next().unwrap_or(name).trim();
            if let Some(i) = passed
                && let Some((helper, _)) = device_function(parsed, &[], short)
                && let Some(p) = crate::kernel::params_of(parsed, helper)
                    .unwrap_or_default()
                    .get(i)
                && let Some(body) = helper.child_by_field_name("body")
            {
                read_through(parsed, body, &p.name, found, seen);
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
}

/// The byte ranges of the map's `__global__` functions.
pub(crate) fn global_ranges(map: &kwb_sites::KernelMap) -> Vec<std::ops::Range<usize>> {
    map.kernels
        .iter()
        .filter(|k| k.role == "global")
        .map(|k| k.range.clone())
        .collect()
}

/// The definition of the function `short` (its last name part) that is not a
/// `__global__`, with its template parameters.
pub(crate) fn device_function<'t>(
    parsed: &'t Parsed,
    globals: &[std::ops::Range<usize>],
    short: &str,
) -> Option<(Node<'t>, Vec<kwb_sites::TemplateParam>)> {
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "function_definition" {
            let named = crate::tree::function_name(parsed, n) == Some(short);
            // A kernel of the map is not a device function.
            let at = crate::tree::function_declarator(n).map_or(n.start_byte(), |d| d.start_byte());
            let global = globals.iter().any(|r| r.contains(&at));
            if named && !global {
                let params = n
                    .parent()
                    .filter(|p| p.kind() == "template_declaration")
                    .map(|p| kwb_sites::template_parameters(p, parsed, "function"))
                    .unwrap_or_default();
                return Some((n, params));
            }
            continue;
        }
        let mut cursor = n.walk();
        let children: Vec<Node<'_>> = n.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    None
}

/// The integer value of a template argument, for matching a spec to a call.
pub(crate) fn same_argument(constants: &Constants, a: &str, b: &str) -> bool {
    match (constants.fold(a), constants.fold(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => {
            let squeeze = |t: &str| t.split_whitespace().collect::<String>();
            squeeze(a) == squeeze(b)
        }
    }
}
