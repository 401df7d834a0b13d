//! The reproducer's text and the launch configuration.

use std::collections::BTreeSet;

use kwb_syntax::Parsed;

use crate::fold::Constants;
use crate::items::Item;
use crate::launch::Launch;
use crate::{ConfigValue, Request, TemplateArg};

/// The C-ABI entry point every reproducer defines:
/// `cudaError_t kwb_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void** args)`.
pub const ENTRY: &str = "kwb_launch";
/// The C-ABI function returning the instantiation's address (`const void*`), for
/// `cudaFuncGetAttributes` and friends.
pub const KERNEL_SYMBOL: &str = "kwb_kernel";

/// The kernel's name qualified by the named namespaces around its definition (an
/// anonymous namespace adds nothing).
pub fn qualified_name(parsed: &Parsed, def: &crate::KernelDef) -> String {
    let mut parts = vec![def.name.clone()];
    let mut node = parsed
        .tree
        .root_node()
        .descendant_for_byte_range(def.range.start, def.range.end);
    while let Some(n) = node {
        if n.kind() == "namespace_definition"
            && let Some(name) = n.child_by_field_name("name")
        {
            parts.push(parsed.source[name.byte_range()].to_owned());
        }
        node = n.parent();
    }
    parts.reverse();
    parts.join("::")
}

/// grid, block, shared memory and stream of a launch, folded where they fold, with
/// the declaration of a local that holds them.
pub fn config(parsed: &Parsed, launch: &Launch, constants: &Constants) -> Vec<ConfigValue> {
    const ROLES: [&str; 4] = ["grid", "block", "smem", "stream"];
    // The launching function's declarations before the launch, with the name each
    // declares first.
    let declarations: Vec<(&str, String)> = launch
        .function
        .as_ref()
        .and_then(|f| crate::tree::function_at(parsed, f))
        .map(|f| crate::tree::nodes_before(f, launch.at))
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.kind() == "declaration")
        .flat_map(|n| {
            let text = parsed.source[n.byte_range()]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let mut cursor = n.walk();
            n.children_by_field_name("declarator", &mut cursor)
                .filter_map(|d| kwb_syntax::identifiers(&parsed.source[d.byte_range()]).next())
                .map(|name| (name, text.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    launch
        .config
        .iter()
        .zip(ROLES)
        .map(|(written, role)| ConfigValue {
            role: role.to_owned(),
            written: written.clone(),
            value: constants.fold(written).ok(),
            declared: declarations
                .iter()
                .rev()
                .find(|(name, _)| name == written)
                .map(|(_, text)| text.clone()),
        })
        .collect()
}

/// The reproducer: `header`, the kept items verbatim (each under the lines it came
/// from, namespaces reopened around kept members), and the entry points. Also the
/// copied line ranges.
pub fn repro(
    parsed: &Parsed,
    items: &[Item],
    kept: &BTreeSet<usize>,
    file: &str,
    header: &str,
    entries: &str,
) -> (String, Vec<(usize, usize)>) {
    let mut out = header.to_owned();
    out.push_str(
        "// Everything below up to the entry points is copied verbatim from the file, each block\n// under the lines it came from; what the kernel does not use is left out.\n\n",
    );
    let mut copied = Vec::new();
    emit_items(parsed, items, kept, file, &mut out, &mut copied);
    out.push_str(entries);
    (out, copied)
}

/// The reproducer's header: where it comes from, the instantiation, its launch and
/// template arguments, the `-D`s.
pub fn header(
    request: &Request,
    instantiation: &str,
    launch: Option<&Launch>,
    args: &[TemplateArg],
) -> String {
    let file = &request.file_name;
    let mut out = String::new();
    out.push_str(&format!(
        "// repro.cu: written by kwb-extract from {file}.\n// The instantiation: {instantiation}\n"
    ));
    if let Some(l) = launch {
        out.push_str(&format!(
            "// as launched at {file}:{} (`{}<<<{}>>>`)\n",
            l.line,
            l.callee,
            l.config.join(", ")
        ));
    }
    for a in args {
        let how = match (&a.value, &a.unfolded) {
            (Some(v), _) if a.written.trim() != v.to_string() => {
                format!("{} = {} (`{}`)", a.name, a.emitted, a.written)
            }
            (None, Some(why)) => format!("{} = {} (not folded: {why})", a.name, a.emitted),
            _ => format!("{} = {}", a.name, a.emitted),
        };
        out.push_str(&format!("//   {how}\n"));
    }
    if !request.defines.is_empty() {
        let d: Vec<String> = request
            .defines
            .iter()
            .map(|(n, v)| format!("-D{n}={v}"))
            .collect();
        out.push_str(&format!("// with {}\n", d.join(" ")));
    }
    out
}

/// The entry points of a `__global__` instantiation: its address, and a launch of it
/// (`launch` the statement that launches `kernel` with `config`, when not a plain
/// `cudaLaunchKernel`).
pub fn entry_points(instantiation: &str, launch: Option<&str>) -> String {
    let launch =
        launch.unwrap_or("return cudaLaunchKernel(kernel, grid, block, args, smem, stream);");
    format!(
        "// kwb-extract: entry points with C linkage, so a runner needs no name mangling.\n\
         extern \"C\" const void* {KERNEL_SYMBOL}() {{\n  return reinterpret_cast<const void*>(&{instantiation});\n}}\n\n\
         extern \"C\" cudaError_t {ENTRY}(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,\n                                  void** args) {{\n  \
         const void* kernel = {KERNEL_SYMBOL}();\n  \
         if (smem > 48 * 1024) {{\n    \
         const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,\n                                               static_cast<int>(smem));\n    \
         if (e != cudaSuccess) return e;\n  }}\n  \
         {launch}\n}}\n"
    )
}

fn emit_items(
    parsed: &Parsed,
    items: &[Item],
    kept: &BTreeSet<usize>,
    file: &str,
    out: &mut String,
    copied: &mut Vec<(usize, usize)>,
) {
    for item in items {
        match &item.scope {
            Some(scope) => {
                if !any_kept(&scope.items, kept) {
                    continue;
                }
                out.push_str(&format!(
                    "// kwb-extract: {file}:{}\n{}\n\n",
                    item.lines.0,
                    scope.open.trim_end()
                ));
                emit_items(parsed, &scope.items, kept, file, out, copied);
                out.push_str(&format!("{}\n\n", scope.close));
            }
            None if kept.contains(&item.range.start) => {
                let (a, b) = item.lines;
                out.push_str(&format!(
                    "// kwb-extract: {file}:{}\n",
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}-{b}")
                    }
                ));
                out.push_str(parsed.source[item.range.clone()].trim_end());
                out.push_str("\n\n");
                copied.push(item.lines);
            }
            None => {}
        }
    }
}

fn any_kept(items: &[Item], kept: &BTreeSet<usize>) -> bool {
    items.iter().any(|i| match &i.scope {
        Some(scope) => any_kept(&scope.items, kept),
        None => kept.contains(&i.range.start),
    })
}
