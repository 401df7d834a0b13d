//! Where a library GEMM object is launched, and the calls that reach that launch.
//!
//! A launcher is a function (free, a function template, or a member of a class or
//! class template) that declares an object of a library GEMM type (through an alias,
//! its own template parameter, or its class template's) and hands it Arguments:
//! `OBJ.initialize(ARGS, …)`, `OBJ.run(ARGS, …)` or `OBJ(ARGS, …)`. An instance is one
//! call of the launcher elsewhere in the file (`run<Gemm>(options)`,
//! `runner.run(options, hw_info)`), which says what the object's type is.
//!
//! Invariant: the launch is the first such call in the launcher's body in source
//! order; what the launcher does after it is never part of a reproducer.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use super::library;
use crate::scan::split_top;

/// A function that launches a library GEMM object.
#[derive(Debug, Clone)]
pub(crate) struct Launcher<'t> {
    pub node: Node<'t>,
    pub name: String,
    /// Its template parameters' names, when it is a function template.
    pub template_params: Vec<String>,
    /// The class whose member it is: (name, its template parameters' names).
    pub class: Option<(String, Vec<String>)>,
    pub object: String,
    /// The object's type as declared (`typename` dropped).
    pub object_type: String,
    /// The launch call.
    pub launch: Node<'t>,
    /// Its first argument: the Arguments.
    pub arguments: String,
    /// The statement of the body (a direct child, or one of a conditional block's
    /// first branch) that holds the launch.
    pub statement: Node<'t>,
}

/// One call of a launcher.
#[derive(Debug, Clone)]
pub(crate) struct Instance<'t> {
    pub launcher: Launcher<'t>,
    pub caller: Node<'t>,
    pub caller_name: String,
    pub call: Node<'t>,
    /// The call's function as written (`run<DeviceGemmStreamK>`, `runner.run`).
    pub function: String,
    pub args: Vec<String>,
    /// For a member call: the object and its type as the caller declares it.
    pub receiver: Option<(String, String)>,
    /// The library GEMM type the launch runs, as this call binds it (`Gemm`,
    /// `DeviceGemmStreamK`), and fully resolved.
    pub gemm: String,
    pub resolved: String,
    pub line: usize,
}

impl Instance<'_> {
    /// How a list names it.
    pub fn describe(&self, parsed: &Parsed) -> String {
        format!(
            "`{}` runs `{}` (line {})",
            squeeze(&parsed.source[self.call.byte_range()]),
            self.gemm,
            self.line
        )
    }
}

pub(crate) fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The class or struct whose body holds `node`: (its node, its name).
fn enclosing_class<'t>(parsed: &Parsed, node: Node<'t>) -> Option<(Node<'t>, String)> {
    let mut n = node.parent();
    while let Some(x) = n {
        if x.kind() == "function_definition" {
            return None;
        }
        if matches!(x.kind(), "class_specifier" | "struct_specifier")
            && x.child_by_field_name("body").is_some()
        {
            let name = x.child_by_field_name("name")?;
            return Some((x, parsed.source[name.byte_range()].trim().to_owned()));
        }
        n = x.parent();
    }
    None
}

/// The names of the template parameters of the template declaration around `node`.
fn template_params_of(parsed: &Parsed, node: Node<'_>) -> Vec<String> {
    node.parent()
        .filter(|p| p.kind() == "template_declaration")
        .map(|t| crate::through::calls::template_names(parsed, t))
        .unwrap_or_default()
}

/// Every alias declared anywhere in `node`: (name, what it aliases).
pub(crate) fn aliases_in(parsed: &Parsed, node: Node<'_>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == "alias_declaration"
            && let (Some(name), Some(ty)) =
                (n.child_by_field_name("name"), n.child_by_field_name("type"))
        {
            out.push((
                parsed.source[name.byte_range()].trim().to_owned(),
                squeeze(&parsed.source[ty.byte_range()]),
            ));
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out
}

/// `t` followed through the aliases of a function's body (`locals`, first) and the
/// file's, at most 8 steps each (a cycle ends).
pub(crate) fn resolve_in(
    locals: &[(String, String)],
    file: &[(String, String, Node<'_>)],
    t: &str,
) -> String {
    let mut t = t.trim().trim_start_matches("typename ").trim().to_owned();
    for _ in 0..8 {
        let s = t.strip_prefix("::").unwrap_or(&t).to_owned();
        match locals.iter().find(|(n, _)| *n == s) {
            Some((_, v)) if *v != t => t = v.clone(),
            _ => break,
        }
    }
    crate::aliases::resolve(file, &t)
}

/// The launchers of the file.
pub(crate) fn launchers(parsed: &Parsed) -> Vec<Launcher<'_>> {
    let file_aliases = crate::aliases::all(parsed);
    let src = &parsed.source;
    let mut out = Vec::new();
    for f in crate::tree::function_definitions(parsed) {
        let Some(body) = f.child_by_field_name("body") else {
            continue;
        };
        let Some(name) = crate::tree::function_name(parsed, f) else {
            continue;
        };
        if name == "main" {
            continue;
        }
        let class = enclosing_class(parsed, f).map(|(c, n)| (n, template_params_of(parsed, c)));
        let template_params = template_params_of(parsed, f);
        // Objects declared in the body, in order: (name, type).
        let mut objects: Vec<(String, String)> = Vec::new();
        let mut calls: Vec<Node<'_>> = Vec::new();
        let mut stack = vec![body];
        while let Some(n) = stack.pop() {
            if n.kind() == "declaration"
                && let (Some(ty), Some(d)) = (
                    n.child_by_field_name("type"),
                    n.child_by_field_name("declarator"),
                )
                && let Some(object) = kwb_syntax::identifiers(&src[d.byte_range()]).next()
            {
                let ty = squeeze(&src[ty.byte_range()].replace("typename", " "));
                objects.push((object.to_owned(), ty));
            }
            if n.kind() == "call_expression" {
                calls.push(n);
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
        calls.sort_by_key(|c| c.start_byte());
        let launch = calls.iter().find_map(|call| {
            let function = call.child_by_field_name("function")?;
            let args = call.child_by_field_name("arguments")?;
            let text = squeeze(&src[function.byte_range()]);
            let object = ["initialize", "run"]
                .iter()
                .find_map(|m| text.strip_suffix(&format!(".{m}")))
                .unwrap_or(&text)
                .trim();
            let (_, ty) = objects.iter().find(|(o, _)| o == object)?;
            let inner = &src[args.byte_range()];
            let inner = inner
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .unwrap_or(inner);
            let first = split_top(inner).into_iter().next()?.trim().to_owned();
            if first.is_empty() {
                return None;
            }
            Some((*call, object.to_owned(), ty.clone(), first))
        });
        let Some((launch, object, object_type, arguments)) = launch else {
            continue;
        };
        // A type the launch can run: a template parameter (bound by the call) or a
        // name that resolves to a library GEMM.
        let param = template_params.contains(&object_type)
            || class
                .as_ref()
                .is_some_and(|(_, p)| p.contains(&object_type));
        if !param {
            let resolved = crate::aliases::resolve(&file_aliases, &object_type);
            if library::gemm(&resolved).is_none() {
                continue;
            }
        }
        let Some(statement) = top_statement(body, launch) else {
            continue;
        };
        out.push(Launcher {
            node: f,
            name: name.to_owned(),
            template_params,
            class,
            object,
            object_type,
            launch,
            arguments,
            statement,
        });
    }
    out
}

/// The ancestor of `node` that is a statement of `body` (directly, or inside its
/// conditional blocks).
fn top_statement<'t>(body: Node<'t>, node: Node<'t>) -> Option<Node<'t>> {
    let mut n = node;
    loop {
        let parent = n.parent()?;
        if parent.id() == body.id() {
            return Some(n);
        }
        if matches!(parent.kind(), "preproc_if" | "preproc_ifdef")
            && !matches!(n.kind(), "preproc_else" | "preproc_elif")
        {
            // A statement of the block is top level when the block is.
            let mut p = parent;
            let mut top = true;
            while let Some(pp) = p.parent() {
                if pp.id() == body.id() {
                    break;
                }
                if !matches!(pp.kind(), "preproc_if" | "preproc_ifdef") {
                    top = false;
                    break;
                }
                p = pp;
            }
            if top {
                return Some(n);
            }
        }
        n = parent;
    }
}

/// Every call of a launcher in `launchers` from another function, whose library GEMM
/// (as the call binds it, or any alias on its way to the library template) is
/// `wanted`; in source order.
pub(crate) fn instances<'t>(
    parsed: &'t Parsed,
    launchers: &[Launcher<'t>],
    wanted: &str,
) -> Vec<Instance<'t>> {
    let src = &parsed.source;
    let short = wanted.rsplit("::").next().unwrap_or(wanted).trim();
    let file_aliases = crate::aliases::all(parsed);
    let mut out = Vec::new();
    for caller in crate::tree::function_definitions(parsed) {
        let Some(body) = caller.child_by_field_name("body") else {
            continue;
        };
        let caller_name = crate::tree::function_name(parsed, caller)
            .unwrap_or("")
            .to_owned();
        let locals = aliases_in(parsed, body);
        let resolve = |t: &str| resolve_in(&locals, &file_aliases, t);
        // The chain of names from `t` to the library template.
        let chain = |t: &str| -> Vec<String> {
            let mut out = vec![t.trim().to_owned()];
            let mut cur = t.trim().to_owned();
            for _ in 0..8 {
                let next = {
                    let s = cur.strip_prefix("::").unwrap_or(&cur).to_owned();
                    locals
                        .iter()
                        .find(|(n, _)| *n == s)
                        .map(|(_, v)| v.clone())
                        .or_else(|| {
                            file_aliases
                                .iter()
                                .find(|(n, _, _)| *n == s)
                                .map(|(_, v, _)| v.clone())
                        })
                };
                match next {
                    Some(v) if v != cur => {
                        out.push(v.clone());
                        cur = v;
                    }
                    _ => break,
                }
            }
            out
        };
        // Locals the caller declares: (name, type).
        let mut declared: Vec<(String, String)> = Vec::new();
        let mut calls = Vec::new();
        let mut stack = vec![body];
        while let Some(n) = stack.pop() {
            if n.kind() == "declaration"
                && let Some(ty) = n.child_by_field_name("type")
            {
                let ty = squeeze(&src[ty.byte_range()].replace("typename", " "));
                let mut c = n.walk();
                for d in n.children_by_field_name("declarator", &mut c) {
                    if let Some(v) = kwb_syntax::identifiers(&src[d.byte_range()]).next() {
                        declared.push((v.to_owned(), ty.clone()));
                    }
                }
            }
            if n.kind() == "call_expression" {
                calls.push(n);
            }
            let mut cursor = n.walk();
            stack.extend(n.named_children(&mut cursor));
        }
        calls.sort_by_key(|c| c.start_byte());
        for call in calls {
            let (Some(function), Some(args)) = (
                call.child_by_field_name("function"),
                call.child_by_field_name("arguments"),
            ) else {
                continue;
            };
            let text = squeeze(&src[function.byte_range()]);
            let inner = &src[args.byte_range()];
            let inner = inner
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .unwrap_or(inner);
            let args: Vec<String> = split_top(inner)
                .into_iter()
                .map(|a| a.trim().to_owned())
                .filter(|a| !a.is_empty())
                .collect();
            for l in launchers {
                if l.node.id() == caller.id() {
                    continue;
                }
                let (receiver, template_args) = match &l.class {
                    Some((class, _)) => {
                        let Some((object, method)) = text.rsplit_once('.') else {
                            continue;
                        };
                        if method.trim() != l.name {
                            continue;
                        }
                        let object = object.trim();
                        let Some((_, ty)) = declared.iter().find(|(v, _)| v == object) else {
                            continue;
                        };
                        let class_name = ty.split('<').next().unwrap_or(ty).trim();
                        if class_name.rsplit("::").next() != Some(class.as_str()) {
                            continue;
                        }
                        let targs = library::template_id(ty).map(|(_, a)| a).unwrap_or_default();
                        (Some((object.to_owned(), ty.clone())), targs)
                    }
                    None => {
                        if text.contains('.') || text.contains("->") {
                            continue;
                        }
                        let head = text.split('<').next().unwrap_or(&text).trim();
                        if head.rsplit("::").next() != Some(l.name.as_str()) {
                            continue;
                        }
                        let targs = library::template_id(&text)
                            .map(|(_, a)| a)
                            .unwrap_or_default();
                        (None, targs)
                    }
                };
                // The object's type, as this call binds it.
                let bound =
                    if let Some(i) = l.template_params.iter().position(|p| *p == l.object_type) {
                        match template_args.get(i) {
                            Some(a) => a.clone(),
                            None => continue,
                        }
                    } else if let Some(i) = l
                        .class
                        .as_ref()
                        .and_then(|(_, p)| p.iter().position(|p| *p == l.object_type))
                    {
                        match template_args.get(i) {
                            Some(a) => a.clone(),
                            None => continue,
                        }
                    } else {
                        l.object_type.clone()
                    };
                let resolved = resolve(&bound);
                if library::gemm(&resolved).is_none() {
                    continue;
                }
                let names = chain(&bound);
                if !names.iter().any(|n| {
                    let n = n.split('<').next().unwrap_or(n).trim();
                    n.rsplit("::").next() == Some(short)
                }) {
                    continue;
                }
                out.push(Instance {
                    launcher: l.clone(),
                    caller,
                    caller_name: caller_name.clone(),
                    call,
                    function: text.clone(),
                    args: args.clone(),
                    receiver: receiver.clone(),
                    gemm: bound,
                    resolved,
                    line: crate::tree::line_of(src, call.start_byte()),
                });
            }
        }
    }
    out.sort_by_key(|i| i.call.start_byte());
    out
}
