//! A library GEMM reproduced through the program's own harness: the launcher makes
//! its own buffers (locals, members, globals, an options struct's fields) and runs an
//! adapter object on Arguments it builds (`gemm_op.initialize(arguments, ws)`), so no
//! parameter takes an operand. kwb interposes at that launch instead: the reproducer
//! is the whole translation unit (`main` renamed) and an entry that sets up what the
//! caller passes (its options struct with the problem's sizes, alpha and beta bound
//! to its fields), replays the launcher verbatim up to the launch, takes a copy of the
//! Arguments it would pass, writes the runner's problem into it (the table of
//! `grammars/library_gemms.toml`: sizes, operand pointers, leading dimensions, alpha,
//! beta) and runs the object on it with a workspace sized for it.
//!
//! Invariant: the file's text is unchanged but for `main`'s name; the replay is the
//! launcher's own signature and statements before its launch, as written; what the
//! Arguments hold beyond the problem (split-K slices, a scheduler, a fusion's own
//! parameters) is the user's.

mod caller;
mod launch;
mod library;

use kwb_syntax::Parsed;

use super::{Binding, Layout, RENAMED_MAIN, THROUGH_ENTRY, Through};
use crate::error::ExtractError;
use crate::host::PROBLEM_STRUCT;
use crate::kernel::Param;
use crate::{Extraction, Request};

/// The reproducer of library GEMM `name` through the harness that runs it; None
/// where no function of the file runs an object of it on Arguments (the route does
/// not apply, and the caller says why the name is no kernel).
pub(crate) fn extract(
    parsed: &Parsed,
    name: &str,
    request: &Request,
) -> Option<Result<Extraction, ExtractError>> {
    let instances = launch::instances(parsed, &launch::launchers(parsed), name);
    if instances.is_empty() {
        return None;
    }
    Some(extract_instance(parsed, name, request, &instances))
}

fn extract_instance(
    parsed: &Parsed,
    name: &str,
    request: &Request,
    instances: &[launch::Instance<'_>],
) -> Result<Extraction, ExtractError> {
    let refuse = |why: String| ExtractError::Harness {
        alias: name.to_owned(),
        why,
    };
    let listed = instances
        .iter()
        .enumerate()
        .map(|(i, x)| format!("{}: {}", i + 1, x.describe(parsed)))
        .collect::<Vec<_>>()
        .join("; ");
    let index = request.instance.unwrap_or(1);
    let Some(instance) = index.checked_sub(1).and_then(|i| instances.get(i)) else {
        return Err(ExtractError::NoInstance {
            kernel: name.to_owned(),
            given: index,
            launches: listed,
        });
    };
    let src = &parsed.source;
    let file = &request.file_name;
    let l = &instance.launcher;
    let gemm = library::gemm(&instance.resolved).ok_or_else(|| {
        refuse(format!(
            "`{}` is no library GEMM of grammars/library_gemms.toml",
            instance.resolved
        ))
    })?;

    // What the operands are, from the library's template arguments.
    let caller_aliases = launch::aliases_in(parsed, instance.caller);
    let file_aliases = crate::aliases::all(parsed);
    let resolve = |t: &str| launch::resolve_in(&caller_aliases, &file_aliases, t);
    if let Some((found, what)) = gemm.refusal(&instance.gemm, &resolve) {
        return Err(refuse(format!(
            "it is {what} (its kernel's problem shape is `{found}`), and a reproducer runs one GEMM"
        )));
    }
    let activation = library::activation(&instance.gemm, &resolve).map_err(|name| {
        refuse(format!(
            "its epilogue applies `{name}` to alpha·A·B + beta·C, which kwb's reference does not model (every rung whose outputs it changes would fail a correct program)"
        ))
    })?;
    let types = library::operand_types(&instance.gemm, &resolve);
    let layout = match &request.layout {
        Some(text) => Layout::parse(text).map_err(|why| ExtractError::BadLayout {
            layout: text.clone(),
            why,
        })?,
        None => template_layout(&types),
    };
    let mut launcher_params = Vec::new();
    for (role, t) in ["A", "B", "C", "D"].iter().zip(&types) {
        if *role == "C" && t.element.is_none() {
            continue;
        }
        let element = t.element.clone();
        launcher_params.push(Param {
            name: (*role).to_owned(),
            declaration: format!("{}* {role}", element.as_deref().unwrap_or("void")),
            role: (*role).to_owned(),
            element,
        });
    }

    // The caller's setup of what the call passes.
    let mut seeds: Vec<String> = instance
        .args
        .iter()
        .flat_map(|a| {
            kwb_syntax::identifiers(a)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    if let Some((_, ty)) = &instance.receiver {
        seeds.extend(kwb_syntax::identifiers(ty).map(str::to_owned));
    }
    let call_statement = statement_start(instance.caller, instance.call);
    let setup =
        caller::setup(parsed, instance.caller, call_statement, &seeds, file).map_err(refuse)?;

    // The replay: the launcher's signature under a new name, its statements before
    // the launch, then the launch on the problem.
    let body = l
        .node
        .child_by_field_name("body")
        .ok_or_else(|| refuse(format!("`{}` has no body", l.name)))?;
    let name_node = crate::tree::function_declarator(l.node)
        .and_then(|d| d.child_by_field_name("declarator"))
        .ok_or_else(|| refuse(format!("`{}`'s declarator is not read", l.name)))?;
    let head_start = match l.node.parent() {
        Some(p) if p.kind() == "template_declaration" => p.start_byte(),
        _ => parsed
            .leading_blanks(l.node.start_byte())
            .first()
            .map_or(l.node.start_byte(), |b| b.range.start),
    };
    let replay_name = format!("kwb_replay_{}", l.name);
    let signature = format!(
        "{}{replay_name}{}",
        &src[head_start..name_node.start_byte()],
        &src[name_node.end_byte()..body.start_byte()]
    );
    let prefix = &src[body.start_byte() + 1..l.statement.start_byte()];
    let mut open_ifs = 0;
    let mut n = l.statement.parent();
    while let Some(p) = n {
        if p.id() == body.id() {
            break;
        }
        if matches!(p.kind(), "preproc_if" | "preproc_ifdef") {
            open_ifs += 1;
        }
        n = p.parent();
    }
    let launch_line = crate::tree::line_of(src, l.launch.start_byte());
    let launch_text = launch::squeeze(&src[l.launch.byte_range()]);
    let rebind: String = gemm
        .rebind
        .replace("{args}", "kwb_args")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("    {l}\n"))
        .collect();
    let scalars = gemm.scalars.replace("{args}", "kwb_args");
    let mut checks = String::new();
    for (role, t) in ["A", "B"].iter().zip(&types) {
        if let Some(e) = &t.element {
            checks.push_str(&format!(
                "    static_assert(std::is_same<typename std::remove_cv<typename kwb_gemm::Element{role}>::type, {e}>::value, \"kwb: the library's Element{role} is not the {e} kwb-extract read off its template arguments\");\n"
            ));
        }
    }
    if request.layout.is_none() {
        for (role, t) in ["A", "B", "C"]
            .iter()
            .zip(&[&types[0], &types[1], &types[3]])
        {
            if let Some(row) = t.row_major {
                let tag = if row { "RowMajor" } else { "ColumnMajor" };
                checks.push_str(&format!(
                    "    static_assert(std::is_same<typename kwb_gemm::Layout{role}, cutlass::layout::{tag}>::value, \"kwb: the library's Layout{role} is not the {tag} kwb-extract read off its template arguments\");\n"
                ));
            }
        }
    }
    let object = &l.object;
    // Where the epilogue's arguments have no alpha and beta of their own (an epilogue
    // visitor tree's nested arguments), the caller's options fields bound to the
    // problem are what the launcher built them from, if it has both.
    let options_scalars = ["alpha", "beta"]
        .iter()
        .all(|r| setup.bindings.iter().any(|b| b.role == *r));
    let scalars_block = if options_scalars {
        format!(
            "    if (!kwb_set_scalars({scalars}, kwb_p->alpha, kwb_p->beta, 0)) {{\n      // The launcher built them from the options' alpha and beta, bound above.\n    }}\n"
        )
    } else {
        format!(
            "    if (!kwb_set_scalars({scalars}, kwb_p->alpha, kwb_p->beta, 0)) {{\n      std::fprintf(stderr, \"kwb: the epilogue's arguments (%s) have no alpha and beta to set, and the caller passes none kwb bound\\n\", \"{scalars}\");\n      throw kwb_reached{{static_cast<int>(cudaErrorNotSupported)}};\n    }}\n"
        )
    };
    let launch_block = format!(
        "  {{\n    // kwb-extract: the launch at {file}:{launch_line} (`{launch_text}`), run on the problem\n    const kwb_problem* kwb_p = kwb_harness_problem;\n    using kwb_gemm = typename std::remove_cv<typename std::remove_reference<decltype({object})>::type>::type;\n{checks}    auto kwb_args = {args};\n{rebind}{scalars_block}    size_t kwb_bytes = kwb_gemm::get_workspace_size(kwb_args);\n    void* kwb_workspace = nullptr;\n    if (kwb_bytes > 0) {{\n      if (cudaMalloc(&kwb_workspace, kwb_bytes) != cudaSuccess) throw kwb_reached{{static_cast<int>(cudaErrorMemoryAllocation)}};\n      cudaMemsetAsync(kwb_workspace, 0, kwb_bytes, kwb_harness_stream);\n    }}\n    auto kwb_status = {object}.can_implement(kwb_args);\n    if (kwb_status == cutlass::Status::kSuccess) kwb_status = {object}.initialize(kwb_args, kwb_workspace, kwb_harness_stream);\n    if (kwb_status == cutlass::Status::kSuccess) kwb_status = {object}.run(kwb_harness_stream);\n    cudaError_t kwb_error = cudaGetLastError();\n    if (kwb_error == cudaSuccess) kwb_error = cudaStreamSynchronize(kwb_harness_stream);\n    if (kwb_workspace != nullptr) cudaFree(kwb_workspace);\n    if (kwb_status != cutlass::Status::kSuccess) {{\n      std::fprintf(stderr, \"kwb: `{object}` refused the problem: %s\\n\", cutlass::cutlassGetStatusString(kwb_status));\n      throw kwb_reached{{static_cast<int>(cudaErrorInvalidValue)}};\n    }}\n    throw kwb_reached{{static_cast<int>(kwb_error)}};\n  }}\n",
        args = l.arguments,
    );
    let statement_line = crate::tree::line_of(src, body.start_byte());
    let replay = format!(
        "#line {} \"{file}\"\n{signature}{{\n#line {statement_line} \"{file}\"\n{prefix}\n{launch_block}{}}}\n",
        crate::tree::line_of(src, head_start),
        "#endif\n".repeat(open_ifs),
    );

    // The call, aimed at the replay.
    let (call, object_declaration) = match &instance.receiver {
        Some((_, ty)) => (
            format!("kwb_object.{replay_name}({})", instance.args.join(", ")),
            format!("  {ty} kwb_object;\n"),
        ),
        None => {
            let head = instance.function.split('<').next().unwrap_or("");
            let targs = &instance.function[head.len()..];
            let qualified = match head.rsplit_once("::") {
                Some((ns, _)) => format!("{ns}::{replay_name}"),
                None => replay_name.clone(),
            };
            (
                format!("{qualified}{targs}({})", instance.args.join(", ")),
                String::new(),
            )
        }
    };

    // The unit: the file as written, main renamed, with the prelude the replay needs
    // at namespace scope before the launcher's top-level item and the replay beside
    // the launcher (a member of the same class, in the same namespaces), each followed
    // by a `#line` that resumes the file's own numbering.
    let top = top_level(l.node);
    let prelude_at = top.start_byte();
    let prelude = format!(
        "// ---- kwb-extract: what the replay below needs ----\n#include <cuda_runtime.h>\n#include <cstdio>\n#include <iostream>\n#include <type_traits>\n{PROBLEM_STRUCT}struct kwb_reached {{ int status; }};\nstatic const kwb_problem* kwb_harness_problem = nullptr;\nstatic cudaStream_t kwb_harness_stream = nullptr;\ntemplate <class T> auto kwb_scalar_pointers_cleared(T& t, int) -> decltype(t.alpha_ptr = nullptr, t.beta_ptr = nullptr, void()) {{\n  t.alpha_ptr = nullptr;\n  t.beta_ptr = nullptr;\n}}\ntemplate <class T> void kwb_scalar_pointers_cleared(T&, long) {{}}\ntemplate <class T> auto kwb_set_scalars(T& t, float a, float b, int) -> decltype(t.alpha = a, t.beta = b, true) {{\n  t.alpha = static_cast<decltype(t.alpha)>(a);\n  t.beta = static_cast<decltype(t.beta)>(b);\n  // A device pointer to alpha or beta would override the values set here.\n  kwb_scalar_pointers_cleared(t, 0);\n  return true;\n}}\ntemplate <class T> bool kwb_set_scalars(T&, float, float, long) {{ return false; }}\n{}#line {} \"{file}\"\n",
        gemm.prelude,
        crate::tree::line_of(src, prelude_at),
    );
    let replay_at = l.node.end_byte();
    let replay = format!(
        "\n// ---- kwb-extract: `{}` replayed up to its launch ----\n{replay}#line {} \"{file}\"\n",
        l.name,
        crate::tree::line_of(src, replay_at),
    );
    let mut edits: Vec<(std::ops::Range<usize>, String)> = vec![
        (prelude_at..prelude_at, prelude),
        (replay_at..replay_at, replay),
    ];
    if let Some(r) = main_name_range(parsed) {
        edits.push((r, RENAMED_MAIN.to_owned()));
    }
    edits.sort_by_key(|(r, _)| (r.start, r.end));
    let mut text = String::new();
    text.push_str(&format!(
        "// kwb-extract: a reproducer of the library GEMM `{name}` through the program's own harness:\n// `{}` (line {}) runs `{}`; the entry `{THROUGH_ENTRY}` at the end replays `{}` up to its launch\n// (line {launch_line}) and runs it on the runner's problem.\n#line 1 \"{file}\"\n",
        launch::squeeze(&src[instance.call.byte_range()]),
        instance.line,
        instance.resolved,
        l.name,
    ));
    let mut at = 0;
    for (range, with) in &edits {
        text.push_str(&src[at..range.start]);
        text.push_str(with);
        at = range.end;
    }
    text.push_str(&src[at..]);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let line = text.matches('\n').count() + 2;
    text.push_str(&format!(
        "\n#line {line} \"repro.cu\"\n// ---- kwb-extract: the runner's entry point ----\nextern \"C\" int {THROUGH_ENTRY}(const kwb_problem* kwb_p, void* kwb_stream) {{\n  kwb_harness_problem = kwb_p;\n  kwb_harness_stream = static_cast<cudaStream_t>(kwb_stream);\n  // What the program prints goes to stderr: stdout is the runner's.\n  struct kwb_cout_guard {{\n    std::streambuf* old = std::cout.rdbuf(std::cerr.rdbuf());\n    ~kwb_cout_guard() {{ std::cout.rdbuf(old); }}\n  }} kwb_guard;\n  (void)kwb_guard;\n{}{object_declaration}  // kwb-extract: the call at {file}:{}\n  try {{\n    {call};\n  }} catch (const kwb_reached& kwb_r) {{\n    return kwb_r.status;\n  }}\n  std::fprintf(stderr, \"kwb: `{}` returned before its launch at {file}:{launch_line}\\n\");\n  return static_cast<int>(cudaErrorNotReady);\n}}\n",
        setup.body,
        instance.line,
        l.name,
    ));
    let mut bindings: Vec<Binding> = setup.bindings;
    bindings.push(Binding {
        param: "Arguments".to_owned(),
        role: "problem".to_owned(),
        value: format!(
            "a copy of `{}` with the problem written into it (grammars/library_gemms.toml, `{}`)",
            l.arguments, gemm.template
        ),
        from: format!("the launch at line {launch_line}"),
    });
    let unit = format!(
        "the whole translation unit of {file}, `main` renamed `{RENAMED_MAIN}`; the entry replays `{}` up to its launch (line {launch_line}) and runs it on the problem",
        l.name
    );
    let through = Through {
        entry: THROUGH_ENTRY.to_owned(),
        path: vec![instance.caller_name.clone(), l.name.clone()],
        call,
        line: instance.line,
        bindings,
        layout,
        alpha: None,
        beta: None,
        activation,
        output_saturates: gemm.saturates,
        unit,
    };
    let others = if instances.len() > 1 {
        format!(
            "; instance {index} of {} ({listed}), --instance N picks another",
            instances.len()
        )
    } else {
        String::new()
    };
    let instantiation = format!(
        "{} (run by `{}` at {file}:{}{others})",
        instance.resolved,
        launch::squeeze(&src[instance.call.byte_range()]),
        instance.line
    );
    let lines = src.matches('\n').count() + 1;
    Ok(Extraction {
        accumulator: library::accumulator(&instance.gemm, &resolve),
        mma_input: library::mma_input(&instance.gemm, &types, &resolve),
        ..super::whole_unit(
            crate::kernel::named_only(name),
            name,
            instantiation,
            lines,
            launcher_params,
            through,
            text,
        )
    })
}

/// The layouts the library's template arguments state; an operand they do not name
/// keeps the default.
fn template_layout(types: &[library::OperandTypes; 4]) -> Layout {
    let base = Layout::default();
    let pick = |row: Option<bool>, yes: &str, no: &str, default: &str| match row {
        Some(true) => yes.to_owned(),
        Some(false) => no.to_owned(),
        None => default.to_owned(),
    };
    let named = types.iter().filter(|t| t.row_major.is_some()).count();
    let d = pick(types[3].row_major, "mn", "nm", &base.d);
    Layout {
        a: pick(types[0].row_major, "mk", "km", &base.a),
        b: pick(types[1].row_major, "kn", "nk", &base.b),
        c: pick(types[2].row_major, "mn", "nm", &d),
        d,
        from: if named == 4 {
            "the library template's layout arguments (RowMajor/ColumnMajor)".to_owned()
        } else {
            format!(
                "the library template's layout arguments where they name one ({named} of 4), else the default"
            )
        },
    }
}

/// The start of the statement of `function` that holds `node`.
fn statement_start(function: tree_sitter::Node<'_>, node: tree_sitter::Node<'_>) -> usize {
    let Some(body) = function.child_by_field_name("body") else {
        return node.start_byte();
    };
    let mut n = node;
    while let Some(p) = n.parent() {
        if p.id() == body.id() || matches!(p.kind(), "preproc_if" | "preproc_ifdef") {
            return n.start_byte();
        }
        n = p;
    }
    node.start_byte()
}

/// The item at the file's top level (or the namespace at the top level) that holds
/// `node`.
fn top_level(node: tree_sitter::Node<'_>) -> tree_sitter::Node<'_> {
    let mut n = node;
    while let Some(p) = n.parent() {
        if p.kind() == "translation_unit" {
            return n;
        }
        n = p;
    }
    n
}

/// The bytes of the name in `main`'s declarator.
fn main_name_range(parsed: &Parsed) -> Option<std::ops::Range<usize>> {
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "function_definition" {
            if crate::tree::function_name(parsed, n) == Some("main") {
                let name =
                    crate::tree::function_declarator(n)?.child_by_field_name("declarator")?;
                return (parsed.source[name.byte_range()].trim() == "main")
                    .then(|| name.byte_range());
            }
            continue;
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    None
}

#[cfg(test)]
mod tests;
