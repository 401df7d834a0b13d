//! A reproducer through the user's own launcher: bind at the host API boundary, not
//! at the kernel's ABI. Where the kernel takes what kwb cannot build (CuTe layouts
//! and tilers by value, an epilogue functor, a TMA map a helper returns, template
//! arguments the call deduces), the launcher already turns pointers, sizes, leading
//! dimensions and scalars into all of it. The reproducer is the whole translation
//! unit, verbatim, with `main` renamed, and one C entry point that calls the
//! outermost launcher on the path from `main` down to the launch with the runner's
//! buffers and sizes (`calls.rs` finds the path, `bind.rs` binds each parameter).
//!
//! Invariant: the file's text is copied unchanged except for the name of `main`;
//! what the entry adds is the caller's declarations its arguments need (copied as
//! written, with their lines) and the bound values, so the reproducer compiles
//! whenever the file does and the entry's arguments do.

mod bind;
pub(crate) mod calls;
pub(crate) mod harness;
mod layout;
pub(crate) mod maps;

use kwb_syntax::Parsed;

pub use bind::Binding;
pub use layout::Layout;

use crate::error::ExtractError;
use crate::host::{HostEntries, PROBLEM_STRUCT};
use crate::kernel::{KernelDef, Param};
use crate::{Extraction, Request};

/// `int kwb_launch_problem(const kwb_problem*, void* stream)`: calls the launcher
/// with the problem's buffers and sizes on `stream` and waits for it; returns the
/// `cudaError_t` of the launch (or of the wait).
pub const THROUGH_ENTRY: &str = "kwb_launch_problem";

/// What `main` is renamed to.
pub const RENAMED_MAIN: &str = "kwb_user_main";

/// The manifest's account of a reproducer through the launcher.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Through {
    /// The C entry point.
    pub entry: String,
    /// The functions from the one the entry calls down to the one naming the kernel.
    pub path: Vec<String>,
    /// The call the entry makes, as emitted.
    pub call: String,
    /// The line of the caller's call it copies (in `main`), or of the launcher.
    pub line: usize,
    pub bindings: Vec<Binding>,
    pub layout: Layout,
    /// alpha and beta where the launcher takes none: the values it computes with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f32>,
    /// The elementwise function the epilogue applies to `alpha·A·B + beta·C` (`relu`),
    /// where it applies one: the runner's answer applies it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation: Option<String>,
    /// Whether the output conversion saturates to the type's largest finite value (a
    /// library epilogue's fp8 conversion): the runner's answer saturates too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_saturates: bool,
    /// What the reproducer holds of the file.
    pub unit: String,
}

/// Extracts `def` through the launcher that reaches it.
pub(crate) fn extract(
    parsed: &Parsed,
    def: KernelDef,
    qualified: String,
    request: &Request,
    why: &str,
) -> Result<Extraction, ExtractError> {
    let graph = calls::Graph::new(parsed, &def.range);
    let launching = graph.launching(parsed, &def.name);
    if launching.is_empty() {
        return Err(ExtractError::NoLauncher {
            kernel: def.name.clone(),
            why: format!("no function of this file names `{}`", def.name),
        });
    }
    let Some(path) = graph.path(&launching) else {
        return Err(ExtractError::NoLauncher {
            kernel: def.name.clone(),
            why: format!(
                "{} name it, and each is called from a function that main does not reach",
                launching
                    .iter()
                    .map(|i| format!("`{}`", graph.functions[*i].name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };
    // The outermost function that binds, down the path: a wrapper that makes its own
    // buffers (`test(M, N, K)`) or takes a framework's tensors (`op(TensorView input)`)
    // gives way to the function it calls with pointers. Where none binds, the
    // innermost parameter that stopped one is named: the launcher nearest the kernel.
    let mut first_error = None;
    let mut innermost_unbound = None;
    for start in 0..path.functions.len() {
        let call = if start == 0 {
            path.call.clone()
        } else {
            graph.call_between(path.functions[start - 1], path.functions[start])
        };
        let sub = calls::Path {
            functions: path.functions[start..].to_vec(),
            call,
        };
        match at(parsed, &graph, &sub, &def, &qualified, request, why) {
            Ok(x) => return Ok(x),
            Err(e @ ExtractError::Unbound { .. }) => {
                innermost_unbound = Some(e);
            }
            Err(e @ ExtractError::Operands { .. }) => {
                first_error.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(innermost_unbound
        .or(first_error)
        .unwrap_or(ExtractError::NoLauncher {
            kernel: def.name.clone(),
            why: "the path to the launch is empty".to_owned(),
        }))
}

/// The reproducer that calls `path`'s first function (with the arguments of
/// `path.call`, where there is one).
fn at(
    parsed: &Parsed,
    graph: &calls::Graph,
    path: &calls::Path,
    def: &KernelDef,
    qualified: &str,
    request: &Request,
    why: &str,
) -> Result<Extraction, ExtractError> {
    let source = &parsed.source;
    let top = &graph.functions[path.functions[0]];
    // A layout the user gives is read first: a malformed one is the first thing to say.
    let given_layout = request
        .layout
        .as_ref()
        .map(|text| {
            Layout::parse(text).map_err(|why| ExtractError::BadLayout {
                layout: text.clone(),
                why,
            })
        })
        .transpose()?;
    let file_aliases = crate::aliases::all(parsed);
    // The caller's statements before its call: aliases, choices, sizes.
    let caller = path.call.as_ref().and_then(|c| {
        let f = &graph.functions[c.caller];
        let node = crate::tree::function_at(parsed, &f.range)?;
        Some((
            f,
            crate::host::statements(parsed, node, c.range.start),
            crate::tree::parameter_names(parsed, node),
        ))
    });
    let statements: &[crate::host::Statement] = caller.as_ref().map_or(&[], |c| &c.1);
    let declared = |name: &str| -> Option<String> {
        let s = statements
            .iter()
            .find(|s| s.declares.iter().any(|d| d == name))?;
        let first = s.declares.first()?;
        let at = token(&s.text, first)?;
        Some(s.text[..at].trim().to_owned())
    };
    let local_alias = |ty: &str| -> String {
        let mut t = ty.trim().to_owned();
        for _ in 0..8 {
            let Some(s) = statements
                .iter()
                .find(|s| s.declares.contains(&t) && s.text.trim_start().starts_with("using"))
            else {
                break;
            };
            match s.text.split_once('=') {
                Some((_, v)) => t = v.trim().trim_end_matches(';').trim().to_owned(),
                None => break,
            }
        }
        crate::aliases::resolve(&file_aliases, &t)
    };
    let call_line = path.call.as_ref().map(|c| c.line);
    let mut bindings = Vec::new();
    let mut launcher_params = Vec::new();
    let mut chars: (Option<char>, Option<char>) = (None, None);
    let mut args: Vec<String> = Vec::new();
    let mut assigns: Vec<(String, String)> = Vec::new();
    for (i, p) in top.params.iter().enumerate() {
        let (declaration, default) = bind::split_default(&p.declaration);
        let arg = path.call.as_ref().and_then(|c| c.args.get(i)).cloned();
        let user = request
            .binds
            .iter()
            .find(|(n, _)| n == &p.name)
            .map(|(_, v)| v.clone());
        let mut flowed: Option<String> = None;
        let role: String = match &user {
            // A value for a transpose character or an activation keeps its role, so
            // the layout follows the character given.
            Some(v) => bind::bound_role(v)
                .unwrap_or(match bind::guess(p) {
                    r @ ("trans-a" | "trans-b" | "activation") => r,
                    _ => "as-called",
                })
                .to_owned(),
            None => match bind::guess(p) {
                // No name says it: how it flows into the kernel's parameters may.
                "as-called" => match flows(parsed, graph, path, def, i) {
                    Some((role, kernel_param)) => {
                        flowed = Some(kernel_param);
                        role.to_owned()
                    }
                    None => "as-called".to_owned(),
                },
                g => g.to_owned(),
            },
        };
        if arg.is_none() && user.is_none() && default.is_some() && role != "stream" {
            break;
        }
        let ty = declaration[..declaration.len().saturating_sub(p.name.len())].trim();
        let templated =
            kwb_syntax::identifiers(ty).any(|w| top.template_params.iter().any(|t| t == w));
        let from = match (&user, call_line) {
            (Some(_), _) => "--bind".to_owned(),
            (None, _) if flowed.is_some() => format!(
                "it flows into the kernel's `{}` (a guess)",
                flowed.as_deref().unwrap_or("")
            ),
            (None, _) if matches!(role.as_str(), "as-called" | "trans-a" | "trans-b") => call_line
                .map_or_else(
                    || "name and type".to_owned(),
                    |l| format!("the call at line {l}"),
                ),
            _ => "name and type (a guess)".to_owned(),
        };
        let unbound = |role: &str, why: String| ExtractError::Unbound {
            function: top.name.clone(),
            param: p.name.clone(),
            role: role.to_owned(),
            why,
            suggestion: suggestion(top, &p.name),
        };
        let mut element = None;
        let mut ld_field: Option<&'static str> = None;
        let value = match role.as_str() {
            "A" | "B" | "C" | "D" | "bias" => {
                let written = p.element.clone().filter(|_| !templated);
                let e = match written {
                    Some(e) => e,
                    None => arg
                        .as_deref()
                        .and_then(|a| bind::element_of_argument(a, &declared))
                        .ok_or_else(|| {
                            unbound(
                                &role,
                                "its element type is a template parameter and the caller's argument does not show it".to_owned(),
                            )
                        })?,
                };
                element = Some(local_alias(&e));
                format!("({e}*)(kwb_p->{role})")
            }
            "stream" => "static_cast<cudaStream_t>(kwb_stream)".to_owned(),
            "activation" if user.is_none() => "false".to_owned(),
            "trans-a" | "trans-b" | "as-called" | "activation" => {
                let v = user.clone().or_else(|| arg.clone()).ok_or_else(|| {
                    unbound(&role, "no call in the file passes it a value".to_owned())
                })?;
                if role != "as-called" {
                    let name = kwb_syntax::identifiers(&v).next().unwrap_or("");
                    let decl = statements
                        .iter()
                        .find(|s| s.declares.iter().any(|d| d == name))
                        .map(|s| s.text.as_str());
                    let c = bind::character(&v, decl);
                    if role == "trans-a" {
                        chars.0 = c;
                    } else {
                        chars.1 = c;
                    }
                }
                v
            }
            other => {
                // A leading dimension whose name says no operand belongs to the
                // operand just before it (`const float* At, int ldat`), as in BLAS.
                let field = bind::problem_field(other, &p.name)
                    .or_else(|| {
                        (other == "leading-dimension")
                            .then(|| bindings.last())
                            .flatten()
                            .and_then(|b: &Binding| match b.role.as_str() {
                                "A" => Some("lda"),
                                "B" => Some("ldb"),
                                "C" => Some("ldc"),
                                "D" => Some("ldd"),
                                _ => None,
                            })
                    })
                    .ok_or_else(|| {
                        unbound(
                            other,
                            "a leading dimension of no operand kwb knows".to_owned(),
                        )
                    })?;
                ld_field = Some(field);
                let cast = if !templated {
                    crate::host::cast_type(&Param {
                        declaration: declaration.to_owned(),
                        ..p.clone()
                    })
                    .trim_end_matches('&')
                    .trim_start_matches("const ")
                    .trim()
                    .to_owned()
                } else if let Some(a) = &arg {
                    format!("std::decay_t<decltype({a})>")
                } else {
                    return Err(unbound(
                        other,
                        "its type is a template parameter and no call shows it".to_owned(),
                    ));
                };
                format!("static_cast<{cast}>(kwb_p->{field})")
            }
        };
        let plan_role = match role.as_str() {
            "lda" | "ldb" | "ldc" | "ldd" => "leading-dimension",
            "trans-a" | "trans-b" | "as-called" | "stream" | "activation" => "other",
            r => r,
        };
        launcher_params.push(Param {
            // A leading dimension under the field's own name, so a runner pads the
            // operand it belongs to.
            name: match (role.as_str(), ld_field) {
                (r @ ("lda" | "ldb" | "ldc" | "ldd"), _) => r.to_owned(),
                (_, Some(f)) => f.to_owned(),
                _ => p.name.clone(),
            },
            declaration: declaration.to_owned(),
            role: plan_role.to_owned(),
            element,
        });
        bindings.push(Binding {
            param: p.name.clone(),
            role: role.clone(),
            value: value.clone(),
            from,
        });
        // A bound value the caller passes in a variable of its own is assigned to that
        // variable, so what the caller derives from it (a workspace size from M and N)
        // follows the problem; the call then passes the variable as written.
        let bound = !matches!(
            role.as_str(),
            "trans-a" | "trans-b" | "as-called" | "activation" | "stream"
        ) && user.is_none();
        match arg.as_deref().map(str::trim) {
            Some(a) if bound && assignable(statements, a) => {
                assigns.push((a.to_owned(), value));
                args.push(a.to_owned());
            }
            _ => args.push(value),
        }
    }
    // A variable bound to two different values is passed the values instead.
    let twice: Vec<String> = assigns
        .iter()
        .filter(|(v, x)| assigns.iter().any(|(w, y)| w == v && y != x))
        .map(|(v, _)| v.clone())
        .collect();
    if !twice.is_empty() {
        for (arg, b) in args.iter_mut().zip(&bindings) {
            if twice.contains(arg) {
                *arg = b.value.clone();
            }
        }
        assigns.retain(|(v, _)| !twice.contains(v));
    }
    assigns.dedup();
    let has = |roles: &[&str]| bindings.iter().any(|b| roles.contains(&b.role.as_str()));
    let missing: Vec<&str> = [("A", &["A"][..]), ("B", &["B"]), ("C or D", &["C", "D"])]
        .iter()
        .filter(|(_, roles)| !has(roles))
        .map(|(name, _)| *name)
        .collect();
    if !missing.is_empty() {
        return Err(ExtractError::Operands {
            function: top.name.clone(),
            missing: missing.join(", "),
            suggestion: top
                .params
                .iter()
                .map(|p| format!("--bind {}=…", p.name))
                .collect::<Vec<_>>()
                .join(" "),
        });
    }
    // The caller's statements the call needs, to a fixed point: the declarations of
    // the names it passes, and the statements that write an unbound one (`cudaMalloc(&ws,
    // bytes)`) unless they read the caller's own parameters (`sscanf(argv[1], …, &m)`).
    let caller_params: &[String] = caller.as_ref().map_or(&[], |c| &c.2);
    let names_of = |text: &str| -> Vec<String> {
        let text = problem_fields_blanked(text);
        kwb_syntax::identifiers(&text).map(str::to_owned).collect()
    };
    let keep = |args: &[String], assigns: &[(String, String)]| {
        let mut needed: Vec<String> = args.iter().flat_map(|a| names_of(a)).collect();
        let assigned: Vec<&str> = assigns.iter().map(|(v, _)| v.as_str()).collect();
        let mut kept = vec![false; statements.len()];
        loop {
            let mut grew = false;
            for (s, k) in statements.iter().zip(kept.iter_mut()) {
                if *k {
                    continue;
                }
                let declares = s.declares.iter().any(|d| needed.contains(d));
                let writes = s.declares.is_empty()
                    && s.writes
                        .iter()
                        .any(|w| needed.contains(w) && !assigned.contains(&w.as_str()))
                    && !names_of(&s.text).iter().any(|n| caller_params.contains(n));
                if declares || writes {
                    *k = true;
                    grew = true;
                    needed.extend(names_of(&s.text));
                }
            }
            if !grew {
                break;
            }
        }
        (kept, needed)
    };
    // A bound variable whose declaration reads the caller's parameters (`int lda =
    // M;` in a `test(M, N, K)`) cannot be copied: its value is passed instead.
    let (kept, needed) = loop {
        let (kept, needed) = keep(&args, &assigns);
        let unreadable: Vec<String> = statements
            .iter()
            .zip(&kept)
            .filter(|(s, k)| **k && names_of(&s.text).iter().any(|n| caller_params.contains(n)))
            .flat_map(|(s, _)| s.declares.iter().cloned())
            .filter(|d| assigns.iter().any(|(v, _)| v == d))
            .collect();
        if unreadable.is_empty() {
            break (kept, needed);
        }
        for (arg, b) in args.iter_mut().zip(&bindings) {
            if unreadable.contains(arg) {
                *arg = b.value.clone();
            }
        }
        assigns.retain(|(v, _)| !unreadable.contains(v));
    };
    if let Some(name) = caller_params.iter().find(|p| needed.contains(p)) {
        let user_of = bindings
            .iter()
            .find(|b| b.from != "--bind" && kwb_syntax::identifiers(&b.value).any(|w| w == name))
            .map_or_else(|| top.params[0].name.clone(), |b| b.param.clone());
        return Err(ExtractError::Unbound {
            function: top.name.clone(),
            param: user_of.clone(),
            role: "as-called".to_owned(),
            why: format!(
                "its value in the caller depends on the caller's parameter `{name}`, which a reproducer does not have"
            ),
            suggestion: suggestion(top, &user_of),
        });
    }
    let layout = match (given_layout, chars) {
        (Some(given), _) => given,
        (None, (Some(a), Some(b))) => Layout::blas(a, b),
        _ => {
            // The strides the functions on the way give their CuTe tensors.
            let bodies: Vec<(&str, &[Param])> = path
                .functions
                .iter()
                .map(|i| {
                    let f = &graph.functions[*i];
                    (&source[f.range.clone()], f.params.as_slice())
                })
                .collect();
            let texts: Vec<&str> = bodies.iter().map(|(b, _)| *b).collect();
            let resolve = |t: &str| crate::aliases::resolve(&file_aliases, t);
            layout::layout_from_strides(&bodies)
                .or_else(|| layout::layout_from_bounds(&bodies, &launcher_params))
                .or_else(|| layout::layout_from_templates(&texts, &resolve))
                .unwrap_or_default()
        }
    };
    // What the launcher takes no parameter for is its own contract: no alpha is 1, no
    // beta is 1 when it adds a C (a residual) and 0 when it has none.
    let alpha = (!has(&["alpha"])).then_some(1.0);
    let beta = (!has(&["beta"])).then_some(if has(&["C"]) { 1.0 } else { 0.0 });
    // The entry is at namespace scope: a call written inside a namespace names its
    // callee with the namespaces the callee is in.
    let qualified_top = qualified_function(parsed, top);
    let function = match &path.call {
        None => qualified_top,
        Some(c) if !c.function.contains("::") => match qualified_top.rsplit_once("::") {
            Some((namespaces, _)) => format!("{namespaces}::{}", c.function),
            None => c.function.clone(),
        },
        Some(c) => c.function.clone(),
    };
    let call = format!("{function}({})", args.join(", "));
    let file = &request.file_name;
    let mut body = String::new();
    for (s, _) in statements
        .iter()
        .zip(&kept)
        .filter(|(s, k)| **k || s.always)
    {
        body.push_str(&format!(
            "  // kwb-extract: {file}:{}\n  {}\n",
            s.line, s.text
        ));
        for (variable, value) in assigns.iter().filter(|(v, _)| s.declares.contains(v)) {
            body.push_str(&format!(
                "  {variable} = static_cast<std::decay_t<decltype({variable})>>({value});  // kwb-extract: bound to the problem\n"
            ));
        }
    }
    body.push_str(&format!(
        "  // kwb-extract: {}\n  {call};\n",
        match call_line {
            Some(l) => format!("the call at {file}:{l}, its arguments bound to the problem"),
            None => format!(
                "{}, at {file}:{}, its parameters bound to the problem",
                top.name, top.line
            ),
        }
    ));
    // The unit: the file as written, main renamed.
    let mut text = String::new();
    let main = graph.functions.iter().find(|f| f.name == "main");
    let unit = match main {
        Some(_) => format!("the whole translation unit of {file}, `main` renamed `{RENAMED_MAIN}`"),
        None => format!("the whole translation unit of {file}"),
    };
    text.push_str(&format!(
        "// kwb-extract: a reproducer of `{}` through its launcher `{}` ({why}).\n// It holds {unit};\n// the entry point `{THROUGH_ENTRY}` at its end calls {} with the runner's problem.\n#line 1 \"{file}\"\n",
        def.name,
        top.name,
        path.functions
            .iter()
            .map(|i| graph.functions[*i].name.as_str())
            .collect::<Vec<_>>()
            .join(" -> "),
    ));
    let renamed = main.and_then(|m| main_name_range(parsed, m));
    match renamed {
        Some(r) => {
            text.push_str(&source[..r.start]);
            text.push_str(RENAMED_MAIN);
            text.push_str(&source[r.end..]);
        }
        None => text.push_str(source),
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let line = text.matches('\n').count() + 2;
    text.push_str(&format!(
        "\n#line {line} \"repro.cu\"\n// ---- kwb-extract: the runner's entry point ----\n#include <cuda_runtime.h>\n#include <type_traits>\n{PROBLEM_STRUCT}\nextern \"C\" int {THROUGH_ENTRY}(const kwb_problem* kwb_p, void* kwb_stream) {{\n  (void)kwb_p;\n  (void)kwb_stream;\n{body}  cudaError_t kwb_status = cudaGetLastError();\n  if (kwb_status != cudaSuccess) return static_cast<int>(kwb_status);\n  return static_cast<int>(cudaDeviceSynchronize());\n}}\n"
    ));
    // The maps the launcher builds reach the kernel only: read them at its launch.
    if let Some(capture) = maps::capture_section(def) {
        text.push('\n');
        text.push_str(&capture);
    }
    let lines = source.matches('\n').count() + 1;
    let through = Through {
        entry: THROUGH_ENTRY.to_owned(),
        path: path
            .functions
            .iter()
            .map(|i| graph.functions[*i].name.clone())
            .collect(),
        call,
        line: call_line.unwrap_or(top.line),
        bindings,
        layout,
        alpha,
        beta,
        activation: None,
        output_saturates: false,
        unit,
    };
    let instantiation = format!(
        "{qualified} (as {}() at {file}:{} instantiates it)",
        top.name, through.line
    );
    Ok(whole_unit(
        def.clone(),
        qualified,
        instantiation,
        lines,
        launcher_params,
        through,
        text,
    ))
}

/// An extraction whose reproducer holds the whole translation unit (`lines` long) and
/// an entry that runs it through its launcher (`through`).
pub(crate) fn whole_unit(
    kernel: KernelDef,
    qualified: &str,
    instantiation: String,
    lines: usize,
    launcher: Vec<Param>,
    through: Through,
    repro: String,
) -> Extraction {
    Extraction {
        kernel,
        qualified: qualified.to_owned(),
        instantiation,
        args: Vec::new(),
        launch: None,
        config: Vec::new(),
        copied: vec![(1, lines)],
        descriptors: Vec::new(),
        host: HostEntries {
            launcher,
            through: Some(through),
            ..HostEntries::default()
        },
        repro,
        accumulator: None,
        mma_input: None,
    }
}

/// The role launcher parameter `index` of `path`'s first function takes from the kernel
/// parameter it reaches: passed by name down the path's calls and into the kernel's
/// `<<<…>>>` launch, where the kernel's parameter has a role by its own name and type.
/// The role and the kernel parameter's name.
fn flows(
    parsed: &Parsed,
    graph: &calls::Graph,
    path: &calls::Path,
    def: &KernelDef,
    index: usize,
) -> Option<(&'static str, String)> {
    let mut name = graph.functions[path.functions[0]]
        .params
        .get(index)?
        .name
        .clone();
    for pair in path.functions.windows(2) {
        let call = graph.call_between(pair[0], pair[1])?;
        let at = call.args.iter().position(|a| a.trim() == name)?;
        name = graph.functions[pair[1]].params.get(at)?.name.clone();
    }
    let last = &graph.functions[*path.functions.last()?];
    let launch = crate::launch::launches(parsed).into_iter().find(|l| {
        l.function.as_ref() == Some(&last.range)
            && l.kernel.rsplit("::").next() == Some(def.name.as_str())
    })?;
    let at = launch.args.iter().position(|a| a.trim() == name)?;
    let kernel_param = def.params.get(at)?;
    match bind::guess(kernel_param) {
        "as-called" | "stream" | "trans-a" | "trans-b" | "activation" => None,
        role => Some((role, kernel_param.name.clone())),
    }
}

/// Whether `arg` is a variable the caller declares (at its top level, not `const`),
/// which a binding can assign.
fn assignable(statements: &[crate::host::Statement], arg: &str) -> bool {
    if kwb_syntax::identifiers(arg).collect::<Vec<_>>() != [arg] {
        return false;
    }
    statements.iter().any(|s| {
        let head = s.text.trim_start();
        s.declares.iter().any(|d| d == arg)
            && !head.starts_with("const")
            && !head.starts_with("constexpr")
            && !head.starts_with("static const")
            && !head.starts_with("using")
            && !head.starts_with("typedef")
            && !s.text[..token(&s.text, arg).unwrap_or(0)].contains('&')
    })
}

/// `text` with every `kwb_p->FIELD` blanked, so the problem's field names are not
/// taken for the caller's names.
fn problem_fields_blanked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("kwb_p->") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 7..];
        let end = after
            .find(|c: char| !(c == '_' || c.is_ascii_alphanumeric()))
            .unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The byte offset of `name` as a whole token in `text`.
fn token(text: &str, name: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(name).map(|i| i + from) {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c == '_' || c.is_ascii_alphanumeric());
        if !word(before) && !word(after) {
            return Some(i);
        }
        from = i + name.len();
    }
    None
}

/// A ready `--bind` line for `function`'s parameter `param`, with kwb's guesses for
/// the others.
fn suggestion(function: &calls::Function, param: &str) -> String {
    let guess = |p: &Param| -> String {
        match bind::guess(p) {
            "A" => "A".to_owned(),
            "B" => "B".to_owned(),
            "C" => "C".to_owned(),
            "D" => "D".to_owned(),
            "m" => "M".to_owned(),
            "n" => "N".to_owned(),
            "k" => "K".to_owned(),
            "alpha" => "alpha".to_owned(),
            "beta" => "beta".to_owned(),
            "leading-dimension" => bind::problem_field("leading-dimension", &p.name)
                .unwrap_or("?")
                .to_owned(),
            _ => "?".to_owned(),
        }
    };
    function
        .params
        .iter()
        .filter(|p| p.name == param || bind::guess(p) != "stream")
        .filter(|p| p.name == param || guess(p) != "?")
        .map(|p| {
            format!(
                "--bind {}={}",
                p.name,
                if p.name == param {
                    "VALUE".to_owned()
                } else {
                    guess(p)
                }
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `function`'s name qualified by the namespaces around it.
fn qualified_function(parsed: &Parsed, function: &calls::Function) -> String {
    let mut parts = vec![function.name.clone()];
    let mut node = crate::tree::function_at(parsed, &function.range);
    while let Some(n) = node {
        if n.kind() == "namespace_definition"
            && let Some(name) = n.child_by_field_name("name")
        {
            parts.push(parsed.source[name.byte_range()].trim().to_owned());
        }
        node = n.parent();
    }
    parts.reverse();
    parts.join("::")
}

/// The bytes of the name in `main`'s declarator.
fn main_name_range(parsed: &Parsed, main: &calls::Function) -> Option<std::ops::Range<usize>> {
    let node = crate::tree::function_at(parsed, &main.range)?;
    let name = crate::tree::function_declarator(node)?.child_by_field_name("declarator")?;
    (parsed.source[name.byte_range()].trim() == "main").then(|| name.byte_range())
}

#[cfg(test)]
mod tests;
