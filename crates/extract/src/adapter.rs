//! Library kernels behind a host-side adapter (`grammars/adapters.toml`): the file
//! declares `using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;`
//! and a launcher that builds `Gemm::Arguments`, but defines no `__global__`
//! function. The reproducer keeps the alias chain verbatim, launches the adapter's
//! kernel with its cluster shape, and fills the kernel's one parameter, the Params
//! blob, with the adapter's own host code (`can_implement`, `initialize`, `params()`)
//! from the launcher's own Arguments, its parameters bound from `kwb_problem`.
//!
//! Invariant: nothing of the Arguments is written by kwb; the launcher's statements
//! that build them are copied as written (defects included), and a name the copy
//! cannot bind is named in the manifest, never guessed.

use std::sync::OnceLock;

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::error::ExtractError;
use crate::host::{CONFIG, HostEntries, Launcher, ParamsEntries};
use crate::kernel::{KernelDef, Param};
use crate::{Extraction, Request};

/// One adapter of `grammars/adapters.toml`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Adapter {
    pub template: String,
    pub kernel: String,
    pub params: String,
    pub arguments: String,
    pub can_implement: String,
    pub workspace_size: String,
    pub initialize: String,
    pub params_of: String,
    pub ok: String,
    pub status_string: String,
    pub grid: String,
    pub block: String,
    pub smem: String,
    pub cluster_static: String,
    pub cluster: String,
}

#[derive(serde::Deserialize)]
struct Table {
    adapter: Vec<Adapter>,
}

/// The adapters kwb knows.
pub fn table() -> &'static [Adapter] {
    static TABLE: OnceLock<Vec<Adapter>> = OnceLock::new();
    TABLE.get_or_init(|| {
        toml::from_str::<Table>(include_str!("../../../grammars/adapters.toml"))
            .map(|t| t.adapter)
            .unwrap_or_default()
    })
}

/// `FILL` of [`ParamsEntries`].
pub const FILL: &str = "kwb_params";
/// `SIZE` of [`ParamsEntries`].
pub const SIZE: &str = "kwb_params_size";
/// `WORKSPACE` of [`ParamsEntries`].
pub const WORKSPACE: &str = "kwb_workspace_size";

/// An adapter alias in a file.
#[derive(Debug, Clone)]
pub struct Found<'t> {
    /// The alias (`Gemm`).
    pub alias: String,
    /// What it aliases, as written.
    pub written: String,
    /// The adapter's template argument (`GemmKernel`).
    pub argument: String,
    pub adapter: &'static Adapter,
    pub node: Node<'t>,
}

impl Adapter {
    fn expand(&self, pattern: &str, alias: &str) -> String {
        pattern.replace("{adapter}", alias)
    }

    /// Whether `written` (a template-id) names this adapter.
    fn matches(&self, written: &str) -> bool {
        let name = written.split('<').next().unwrap_or("").trim();
        let name = name.strip_prefix("::").unwrap_or(name);
        !name.is_empty() && (self.template == name || self.template.ends_with(&format!("::{name}")))
    }
}

/// Every alias of an adapter in the file, in source order.
pub fn found(parsed: &Parsed) -> Vec<Found<'_>> {
    crate::aliases::all(parsed)
        .into_iter()
        // A member alias (`struct Runner { using Gemm = …; }`) is not the file's: the
        // reproducer cannot name it at namespace scope.
        .filter(|(_, _, node)| enclosing_class(parsed, *node).is_none())
        .filter_map(|(alias, written, node)| {
            let adapter = table().iter().find(|a| a.matches(&written))?;
            let argument = written
                .split_once('<')
                .and_then(|(_, rest)| rest.rsplit_once('>'))
                .map(|(inner, _)| inner.trim().to_owned())?;
            Some(Found {
                alias,
                written,
                argument,
                adapter,
                node,
            })
        })
        .collect()
}

/// The adapter `name` picks: its alias, the kernel type it wraps, or the kernel it
/// launches when the file has one adapter.
pub fn pick<'t>(parsed: &'t Parsed, name: &str) -> Option<Found<'t>> {
    let all = found(parsed);
    let short = name.rsplit("::").next().unwrap_or(name).trim();
    if let Some(f) = all.iter().find(|f| f.alias == short || f.argument == short) {
        return Some(f.clone());
    }
    match all.as_slice() {
        [one]
            if one
                .adapter
                .kernel
                .split('<')
                .next()
                .is_some_and(|k| k.rsplit("::").next() == Some(short)) =>
        {
            Some(one.clone())
        }
        _ => None,
    }
}

/// The name of the class or struct whose body holds `node`, if one does.
fn enclosing_class(parsed: &Parsed, node: Node<'_>) -> Option<String> {
    let mut n = node.parent();
    while let Some(x) = n {
        if matches!(x.kind(), "class_specifier" | "struct_specifier")
            && x.child_by_field_name("body").is_some()
        {
            return Some(
                x.child_by_field_name("name")
                    .map_or("a class", |c| parsed.source[c.byte_range()].trim())
                    .to_owned(),
            );
        }
        n = x.parent();
    }
    None
}

/// Every alias declaration named `name` (its last `::` part), at any scope, in source
/// order: (the node, what it aliases with whitespace squeezed).
fn aliases_named<'t>(parsed: &'t Parsed, name: &str) -> Vec<(Node<'t>, String)> {
    let short = name.rsplit("::").next().unwrap_or(name).trim();
    let mut out = Vec::new();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "alias_declaration"
            && let (Some(alias), Some(ty)) =
                (n.child_by_field_name("name"), n.child_by_field_name("type"))
            && parsed.source[alias.byte_range()].trim() == short
        {
            out.push((n, squeeze(&parsed.source[ty.byte_range()])));
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|(n, _)| n.start_byte());
    out
}

fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An adapter alias named `name` declared inside a function body or a class, which
/// [`found`] does not read: (alias, what it aliases, the function or class, its line).
pub fn local(parsed: &Parsed, name: &str) -> Option<(String, String, String, usize)> {
    let short = name.rsplit("::").next().unwrap_or(name).trim();
    aliases_named(parsed, name)
        .into_iter()
        .find_map(|(n, written)| {
            let scope = crate::tree::enclosing_function(n)
                .and_then(|f| crate::tree::function_name(parsed, f).map(str::to_owned))
                .or_else(|| enclosing_class(parsed, n))?;
            table().iter().any(|a| a.matches(&written)).then(|| {
                (
                    short.to_owned(),
                    written,
                    scope,
                    crate::tree::line_of(&parsed.source, n.start_byte()),
                )
            })
        })
}

/// Why library GEMM `name` (an alias of `cutlass::gemm::device::…` or of an adapter of
/// the table, at any scope) cannot be reproduced here: the launch that runs it (an
/// object of its type, or of a template parameter, whose `initialize`, `run` or call
/// operator is invoked) is in a launcher that builds its own operands. None where no
/// such alias is named `name`.
pub fn own_buffers(parsed: &Parsed, name: &str) -> Option<ExtractError> {
    let short = name.rsplit("::").next().unwrap_or(name).trim();
    let (template, line) = aliases_named(parsed, name)
        .into_iter()
        .find_map(|(n, written)| {
            let template = written.split('<').next().unwrap_or("").trim().to_owned();
            (template.contains("gemm::device::") || table().iter().any(|a| a.matches(&written)))
                .then(|| {
                    (
                        template,
                        crate::tree::line_of(&parsed.source, n.start_byte()),
                    )
                })
        })?;
    let functions = crate::tree::function_definitions(parsed);
    let launch = functions.iter().find_map(|f| {
        let text = &parsed.source[f.byte_range()];
        // The function's own template parameters, which a caller may bind to `short`.
        let params: Vec<&str> = f
            .parent()
            .filter(|p| p.kind() == "template_declaration")
            .and_then(|p| p.child_by_field_name("parameters"))
            .map(|l| kwb_syntax::identifiers(&parsed.source[l.byte_range()]).collect())
            .unwrap_or_default();
        let mut inner = vec![*f];
        while let Some(n) = inner.pop() {
            if n.kind() == "declaration"
                && let (Some(ty), Some(d)) = (n.child_by_field_name("type"), n.child_by_field_name("declarator"))
            {
                let ty = squeeze(&parsed.source[ty.byte_range()].replace("typename", " "));
                let object = kwb_syntax::identifiers(&parsed.source[d.byte_range()]).next();
                if (ty == short || ty.ends_with(&format!("::{short}")) || params.contains(&ty.as_str()))
                    && let Some(object) = object
                {
                    for call in [".initialize(", ".run(", "("] {
                        let wanted = format!("{object}{call}");
                        if let Some(at) = word_at(text, &wanted) {
                            let fname = crate::tree::function_name(parsed, *f).unwrap_or("a function");
                            return Some(format!(
                                "it is run by `{wanted}…)` in `{fname}` (line {}), which builds the operands it passes itself",
                                crate::tree::line_of(&parsed.source, f.start_byte() + at)
                            ));
                        }
                    }
                }
            }
            let mut cursor = n.walk();
            inner.extend(n.named_children(&mut cursor));
        }
        None
    });
    Some(ExtractError::OwnBuffers {
        alias: short.to_owned(),
        written: format!("{template}<…>"),
        line,
        launch: launch
            .unwrap_or_else(|| "no function of this file runs an object of its type".to_owned()),
    })
}

/// The first offset of `wanted` in `text` not preceded by a character of a name (so
/// `op.run(` is not found in `gemm_op.run(`).
fn word_at(text: &str, wanted: &str) -> Option<usize> {
    text.match_indices(wanted).map(|(i, _)| i).find(|&i| {
        !text[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c == '_' || c.is_ascii_alphanumeric())
    })
}

/// The adapter aliases of a file, for a message.
pub fn names(parsed: &Parsed) -> Vec<String> {
    found(parsed)
        .into_iter()
        .map(|f| format!("{} (= {})", f.alias, f.written))
        .collect()
}

/// The launcher's declaration of the adapter's Arguments: (its function, the
/// declaration, the variable).
fn arguments<'t>(
    parsed: &'t Parsed,
    found: &Found<'_>,
) -> Result<(Node<'t>, Node<'t>, String), ExtractError> {
    let wanted = format!("{}::{}", found.alias, found.adapter.arguments);
    let mut hits = Vec::new();
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "declaration"
            && let Some(d) = n.child_by_field_name("declarator")
        {
            let ty: String = parsed.source[n.start_byte()..d.start_byte()]
                .replace("typename", " ")
                .split_whitespace()
                .filter(|w| !matches!(*w, "const" | "static"))
                .collect();
            let head = &parsed.source[d.byte_range()];
            let head = head.split(['=', '(', '{', '[']).next().unwrap_or(head);
            if (ty == wanted || ty.ends_with(&format!("::{wanted}")))
                && let Some(f) = crate::tree::enclosing_function(n)
                && let Some(var) = kwb_syntax::identifiers(head).last()
            {
                hits.push((f, n, var.to_owned()));
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    hits.sort_by_key(|(_, n, _)| n.start_byte());
    match hits.len() {
        0 => Err(ExtractError::NoArguments {
            alias: found.alias.clone(),
            wanted,
        }),
        1 => Ok(hits.remove(0)),
        _ => Err(ExtractError::AmbiguousArguments {
            wanted,
            lines: hits
                .iter()
                .map(|(_, n, _)| crate::tree::line_of(&parsed.source, n.start_byte()).to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// The reproducer of the adapter `found` picks in `parsed`.
pub fn extract(
    parsed: &Parsed,
    found: &Found<'_>,
    request: &Request,
) -> Result<Extraction, ExtractError> {
    let a = found.adapter;
    let alias = found.alias.as_str();
    let x = |pattern: &str| a.expand(pattern, alias);
    let (function, declaration, variable) = arguments(parsed, found)?;
    let file = &request.file_name;
    let line = crate::tree::line_of(&parsed.source, declaration.start_byte());
    let launcher = Launcher::new(parsed, function, declaration.end_byte(), file);
    let instantiation = x(&a.kernel);
    let params_type = x(&a.params);
    let mut host = HostEntries {
        launcher: launcher.params.clone(),
        ..HostEntries::default()
    };
    let mut roots = vec![found.alias.clone()];
    let mut text = crate::host::preamble(parsed, function, file);
    text.push_str("#include <cstring>\n");
    match launcher.body(std::slice::from_ref(&variable), &[]) {
        Ok((body, used)) => {
            roots.extend(used);
            let args = "kwb_args";
            let y = |pattern: &str| {
                x(pattern)
                    .replace("{args}", args)
                    .replace("{op}", "kwb_op")
                    .replace("{workspace}", "kwb_workspace")
                    .replace("{status}", "kwb_status")
            };
            text.push_str(&format!(
                "\n// The launcher's {}::{} ({file}:{line}).\nstatic auto kwb_arguments(const kwb_problem* kwb_p) {{\n{body}  return {variable};\n}}\n",
                alias, a.arguments
            ));
            text.push_str(&format!(
                "\nextern \"C\" unsigned long long {SIZE}() {{\n  return sizeof({params_type});\n}}\n\
                 \nextern \"C\" int {WORKSPACE}(const kwb_problem* kwb_p, unsigned long long* kwb_bytes) {{\n  \
                 const auto {args} = kwb_arguments(kwb_p);\n  \
                 *kwb_bytes = static_cast<unsigned long long>({workspace_size});\n  return 0;\n}}\n\
                 \n// The Params blob, from the adapter's own host code.\n\
                 extern \"C\" int {FILL}(const kwb_problem* kwb_p, void* kwb_workspace, void* kwb_out,\n                      const char** kwb_why) {{\n  \
                 const auto {args} = kwb_arguments(kwb_p);\n  \
                 auto kwb_status = {can_implement};\n  \
                 if (kwb_status != {ok}) {{\n    *kwb_why = {status_string};\n    return 1;\n  }}\n  \
                 {alias} kwb_op;\n  \
                 kwb_status = {initialize};\n  \
                 if (kwb_status != {ok}) {{\n    *kwb_why = {status_string};\n    return 2;\n  }}\n  \
                 std::memcpy(kwb_out, &{params_of}, sizeof({params_type}));\n  return 0;\n}}\n\
                 \nextern \"C\" int {CONFIG}(const kwb_problem* kwb_p, unsigned* kwb_grid, unsigned* kwb_block,\n                          unsigned long long* kwb_smem) {{\n  \
                 const auto {args} = kwb_arguments(kwb_p);\n  \
                 const dim3 kwb_grid_value = {grid};\n  \
                 const dim3 kwb_block_value = {block};\n  \
                 kwb_grid[0] = kwb_grid_value.x;\n  kwb_grid[1] = kwb_grid_value.y;\n  kwb_grid[2] = kwb_grid_value.z;\n  \
                 kwb_block[0] = kwb_block_value.x;\n  kwb_block[1] = kwb_block_value.y;\n  kwb_block[2] = kwb_block_value.z;\n  \
                 *kwb_smem = static_cast<unsigned long long>({smem});\n  return 0;\n}}\n",
                workspace_size = y(&a.workspace_size),
                can_implement = y(&a.can_implement),
                ok = a.ok,
                status_string = y(&a.status_string),
                initialize = y(&a.initialize),
                params_of = y(&a.params_of),
                grid = y(&a.grid),
                block = y(&a.block),
                smem = y(&a.smem),
            ));
            host.config = Some(CONFIG.to_owned());
            host.params = Some(ParamsEntries {
                adapter: format!("{alias} = {}", found.written),
                fill: FILL.to_owned(),
                size: SIZE.to_owned(),
                workspace: WORKSPACE.to_owned(),
                // On one line, its `//` comments dropped.
                arguments: parsed.source[parsed
                    .leading_blanks(declaration.start_byte())
                    .first()
                    .map_or(declaration.start_byte(), |b| b.range.start)
                    ..declaration.end_byte()]
                    .lines()
                    .map(|l| l.split("//").next().unwrap_or(l))
                    .flat_map(str::split_whitespace)
                    .collect::<Vec<_>>()
                    .join(" "),
                line,
            });
        }
        Err(why) => host.unavailable.push(format!(
            "{FILL}: the launcher's Arguments at line {line}: {why}"
        )),
    }
    let kernel_param = Param {
        name: "params".to_owned(),
        declaration: format!("{params_type} const params"),
        role: "params".to_owned(),
        element: None,
    };
    let all_items = crate::items::items(parsed);
    let kept = crate::items::slice(parsed, &all_items, &roots);
    let launch = format!(
        "static_assert({}, \"kwb: a cluster shape chosen at run time is not reproduced\");\n  \
         cudaLaunchConfig_t config{{}};\n  \
         config.gridDim = grid;\n  config.blockDim = block;\n  config.dynamicSmemBytes = smem;\n  config.stream = stream;\n  \
         // The adapter's cluster shape.\n  \
         const dim3 cluster = {};\n  \
         cudaLaunchAttribute attribute[1];\n  \
         attribute[0].id = cudaLaunchAttributeClusterDimension;\n  \
         attribute[0].val.clusterDim.x = cluster.x;\n  attribute[0].val.clusterDim.y = cluster.y;\n  attribute[0].val.clusterDim.z = cluster.z;\n  \
         config.attrs = attribute;\n  config.numAttrs = 1;\n  \
         return cudaLaunchKernelExC(&config, kernel, args);",
        x(&a.cluster_static),
        x(&a.cluster),
    );
    let entries = format!(
        "// kwb-extract: the kernel is the one {} launches ({file}:{}); its one\n\
         // parameter is the Params blob `{FILL}` fills below.\n{}",
        found.written,
        crate::tree::line_of(&parsed.source, found.node.start_byte()),
        crate::emit::entry_points(&instantiation, Some(&launch)),
    );
    let (mut repro, copied) = crate::emit::repro(
        parsed,
        &all_items,
        &kept,
        file,
        &crate::emit::header(request, &instantiation, None, &[]),
        &entries,
    );
    if host.params.is_some() {
        repro.push('\n');
        repro.push_str(&text);
        match crate::standalone::standalone(std::slice::from_ref(&kernel_param), &host) {
            Ok(main) => {
                repro.push_str(&main);
                host.main = Some(crate::MAIN_MACRO.to_owned());
            }
            Err(why) => host
                .unavailable
                .push(format!("main() behind {}: {why}", crate::MAIN_MACRO)),
        }
    }
    let kernel = KernelDef {
        name: instantiation
            .split('<')
            .next()
            .unwrap_or(&instantiation)
            .rsplit("::")
            .next()
            .unwrap_or("")
            .to_owned(),
        line: crate::tree::line_of(&parsed.source, found.node.start_byte()),
        template_params: Vec::new(),
        params: vec![kernel_param],
        range: found.node.byte_range(),
    };
    Ok(Extraction {
        kernel,
        qualified: instantiation
            .split('<')
            .next()
            .unwrap_or(&instantiation)
            .to_owned(),
        instantiation,
        args: Vec::new(),
        launch: None,
        config: Vec::new(),
        copied,
        descriptors: crate::descriptors::descriptors(
            parsed,
            &crate::constants::file_scope(parsed, &request.defines),
        ),
        host,
        repro,
        accumulator: None,
        mma_input: None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_adapter_table_reads_and_names_the_alias_in_its_code() {
        // A table that does not read would silently know no adapter.
        let table: super::Table =
            toml::from_str(include_str!("../../../grammars/adapters.toml")).unwrap();
        assert!(!table.adapter.is_empty());
        for a in &table.adapter {
            for pattern in [&a.kernel, &a.params, &a.grid, &a.block, &a.smem, &a.cluster] {
                assert!(pattern.contains("{adapter}"), "{}: {pattern}", a.template);
            }
            assert!(a.initialize.contains("{op}") && a.initialize.contains("{args}"));
        }
        assert_eq!(super::table().len(), table.adapter.len());
        let parsed = kwb_syntax::parse(
            "using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;\nusing Other = std::vector<int>;\n",
        );
        let found = super::found(&parsed);
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].alias.as_str(), found[0].argument.as_str()),
            ("Gemm", "GemmKernel")
        );
        assert!(super::pick(&parsed, "GemmKernel").is_some());
        assert!(super::pick(&parsed, "cutlass::device_kernel").is_some());
        assert!(super::pick(&parsed, "Other").is_none());
    }
}
