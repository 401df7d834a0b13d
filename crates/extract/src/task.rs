//! A task of a megakernel: a `__device__` function instantiation that a persistent
//! `__global__` kernel dispatches to from a task list
//! (`switch (task.type) { case TASK_X: f<ARGS>(task, …); }`).
//!
//! kwb-extract reproduces it by launching that kernel verbatim on a task list that
//! holds only tasks of the dispatched type, one per output tile. The kernel's own
//! prologue, scheduling loop and cross-task state (a ring of stages, a prefetch of the
//! next task's first tile) run as in production; only the list is kwb's. Each field of
//! a task is written from a binding the user gives (`--task FIELD=VALUE`): an operand
//! (`A`, `B`, `C`, `D`, `bias`), a scalar of the problem (`alpha`, `beta`, `M`, `N`,
//! `K`), the task's tile origin (`m0`, `n0`), a TMA descriptor of an operand encoded by
//! the file's own encoding function for a type (`tma(A, TYPE)`), or any C++
//! expression. The dispatch field gets the case label.
//!
//! Invariant: every field the instantiation reads through its task parameter is the
//! dispatch field or bound; a field it does not read is zero. A read field without a
//! binding is an error that names it, never a default.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use kwb_sites::KernelMap;

use crate::error::ExtractError;
use crate::fold::Constants;
use crate::kernel::{KernelDef, Param};
use crate::{Extraction, Request, TemplateArg};

/// `int kwb_tasks_bytes(const kwb_problem*, unsigned long long* bytes, int* count)`:
/// the size of the task list's device image and the number of tasks.
pub const TASKS_BYTES: &str = "kwb_tasks_bytes";
/// `int kwb_tasks(const kwb_problem*, void* device, void* host)`: writes the image
/// (the tasks, then the descriptors they point to) into `host`, with pointers into
/// `device`, where the runner then copies it. 0 on success, else an encoder's status.
pub const TASKS_FILL: &str = "kwb_tasks";
/// Bytes of the zeroed device buffer a runner passes for each other pointer
/// parameter of the kernel (an event array, a work queue).
pub const SCRATCH_BYTES: u64 = 1 << 20;

/// What the user gave for a task reproducer.
#[derive(Debug, Clone, Default)]
pub struct TaskRequest {
    /// `FIELD=VALUE`, in order.
    pub bindings: Vec<(String, String)>,
    /// The output tile one task computes, (rows, columns).
    pub tile: Option<(i64, i64)>,
    /// CTAs of the launch (default 1: one CTA runs every task in turn, so the state a
    /// task leaves for the next one is exercised).
    pub ctas: Option<u32>,
}

/// One field of the task struct and what the reproducer writes into it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskField {
    pub name: String,
    pub declaration: String,
    /// `dispatch` (the case label), `bound` (the user's binding) or `unread` (zero:
    /// the instantiation does not read it).
    pub how: String,
    /// The value as given (`D`, `n0`, `tma(A, T)`, `-1`), or the case label.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// The operand it carries (`A`, `B`, `C`, `D`, `bias`), when bound to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The pointer's element type, when bound to an operand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
}

/// The manifest's `[host.tasks]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskEntries {
    /// The device function's instantiation, as the call writes it.
    pub function: String,
    /// Its call in the kernel, and the line.
    pub call: String,
    pub call_line: usize,
    /// The dispatch condition (`task.type == TASK_LINEAR_DOWN`).
    pub dispatch: String,
    /// The task struct.
    pub task_type: String,
    /// The kernel parameter that holds the list, and the one with its length.
    pub list: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<String>,
    /// Pointer parameters given a zeroed buffer of `scratch_bytes`.
    #[serde(default)]
    pub scratch: Vec<String>,
    pub scratch_bytes: u64,
    /// The output tile of one task, (rows, columns).
    pub tile: [i64; 2],
    pub ctas: u32,
    pub bytes: String,
    pub fill: String,
    pub fields: Vec<TaskField>,
}

impl TaskField {
    /// The field as a [`Param`], so a runner finds the operands' element types the
    /// way it does for a kernel's parameters.
    pub fn as_param(&self) -> Option<Param> {
        Some(Param {
            name: self.name.clone(),
            declaration: self.declaration.clone(),
            role: self.role.clone()?,
            element: self.element.clone(),
        })
    }
}

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

/// The fields of the struct `name` (its last `::` part), as (name, declaration).
pub(crate) fn struct_fields(parsed: &Parsed, name: &str) -> Option<Vec<(String, String)>> {
    let src = &parsed.source;
    let short = name.rsplit("::").next().unwrap_or(name);
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if matches!(n.kind(), "struct_specifier" | "class_specifier")
            && n.child_by_field_name("name")
                .is_some_and(|x| &src[x.byte_range()] == short)
            && let Some(body) = n.child_by_field_name("body")
        {
            let mut fields = Vec::new();
            let mut cursor = body.walk();
            for f in body.named_children(&mut cursor) {
                if f.kind() != "field_declaration" {
                    continue;
                }
                let Some(ty) = f.child_by_field_name("type") else {
                    continue;
                };
                // Qualifiers before the type (`const`) belong to every declarator.
                let head = src[f.start_byte()..ty.end_byte()].trim();
                let mut c = f.walk();
                for d in f.children_by_field_name("declarator", &mut c) {
                    let text = &src[d.byte_range()];
                    if let Some(field) = kwb_syntax::identifiers(text).last() {
                        fields.push((field.to_owned(), format!("{head} {}", text.trim())));
                    }
                }
            }
            return Some(fields);
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    None
}

/// The fields `function` (a definition) reads through its parameter `param`
/// (`param.f` or `param->f`), in first-use order.
pub(crate) fn fields_read(parsed: &Parsed, function: Node<'_>, param: &str) -> Vec<String> {
    let src = &parsed.source;
    let Some(body) = function.child_by_field_name("body") else {
        return Vec::new();
    };
    let mut found: Vec<(usize, String)> = Vec::new();
    let mut stack = vec![body];
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
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    found.sort();
    found.into_iter().map(|(_, n)| n).collect()
}

/// A descriptor binding `tma(OPERAND, TYPE)`.
pub(crate) fn tma_binding(value: &str) -> Option<(String, String)> {
    let inner = value.trim().strip_prefix("tma(")?.strip_suffix(')')?;
    let parts = crate::scan::split_top(inner);
    match parts.as_slice() {
        [operand, ty] if matches!(operand.as_str(), "A" | "B" | "C" | "D") => {
            Some((operand.clone(), ty.clone()))
        }
        _ => None,
    }
}

/// The file's descriptor encoding function for `tma(…)` bindings: the function that
/// holds the `cuTensorMapEncodeTiled` call, with how each of its parameters is
/// passed (`encoder`, `map`, `operand`).
pub(crate) struct Encoding {
    pub function: String,
    pub params: Vec<&'static str>,
}

/// The encoding function of the descriptor constructions in `functions` (the
/// definitions holding them), when there is exactly one and every parameter of it is
/// the driver's encoder, the map, or the global address.
pub(crate) fn encoding(parsed: &Parsed, functions: &[Node<'_>]) -> Result<Encoding, String> {
    let src = &parsed.source;
    let mut names: Vec<String> = Vec::new();
    let mut chosen = None;
    for f in functions {
        let Some(params) = crate::kernel::params_of(parsed, *f) else {
            continue;
        };
        let mut d = f.child_by_field_name("declarator");
        while let Some(x) = d {
            if x.kind() == "function_declarator" {
                break;
            }
            d = x.child_by_field_name("declarator");
        }
        let Some(name) = d
            .and_then(|d| d.child_by_field_name("declarator"))
            .map(|n| {
                src[n.byte_range()]
                    .rsplit("::")
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
        else {
            continue;
        };
        if !names.contains(&name) {
            names.push(name.clone());
            chosen = Some((name, params));
        }
    }
    let (function, params) = match (names.len(), chosen) {
        (1, Some(c)) => c,
        (0, _) | (_, None) => {
            return Err(
                "the file has no function that calls cuTensorMapEncodeTiled to encode one"
                    .to_owned(),
            );
        }
        _ => {
            return Err(format!(
                "the file encodes descriptors in several functions ({}); bind the field to a C++ expression instead",
                names.join(", ")
            ));
        }
    };
    let aliases = crate::aliases::all(parsed);
    let mut how = Vec::new();
    for p in &params {
        // Each word of the type through the file's aliases.
        let written = &p.declaration[..p.declaration.len().saturating_sub(p.name.len())];
        let ty: String = kwb_syntax::identifiers(written)
            .map(|w| crate::aliases::resolve(&aliases, w))
            .collect::<Vec<_>>()
            .join(" ");
        let kind = if ty.contains("cuTensorMapEncodeTiled") || ty.contains("PFN_cuTensorMap") {
            "encoder"
        } else if ty.contains("CUtensorMap") {
            "map"
        } else if p.element.is_some() {
            "operand"
        } else {
            return Err(format!(
                "`{function}` takes `{}`, which is not the encoder, the map or the global address",
                p.declaration
            ));
        };
        how.push(kind);
    }
    if how.iter().filter(|k| **k == "map").count() != 1
        || how.iter().filter(|k| **k == "operand").count() != 1
    {
        return Err(format!(
            "`{function}` does not take exactly one CUtensorMap* and one global address"
        ));
    }
    Ok(Encoding {
        function,
        params: how,
    })
}

/// What the generated host code needs to know.
pub(crate) struct Generate<'a> {
    pub task_type: &'a str,
    pub fields: &'a [TaskField],
    pub tile: (i64, i64),
    pub ctas: u32,
    pub encoding: Option<&'a Encoding>,
    /// `const dim3` expression of the block, and the dynamic shared memory
    /// expression with the declaration that defines it.
    pub block: &'a str,
    pub smem: &'a str,
    pub smem_declared: Option<&'a str>,
}

/// A problem scalar's `kwb_problem` member, for a binding that names one.
fn scalar(value: &str) -> Option<&'static str> {
    Some(match value {
        "alpha" => "kwb_p->alpha",
        "beta" => "kwb_p->beta",
        "M" => "kwb_p->M",
        "N" => "kwb_p->N",
        "K" => "kwb_p->K",
        "m0" => "kwb_m0",
        "n0" => "kwb_n0",
        "task" => "kwb_i",
        _ => return None,
    })
}

/// The C++ of `kwb_tasks_bytes`, `kwb_tasks` and `kwb_config`.
pub(crate) fn generate(g: &Generate<'_>) -> String {
    let (tm, tn) = g.tile;
    let maps: Vec<(&TaskField, String, String)> = g
        .fields
        .iter()
        .filter_map(|f| {
            let (operand, ty) = tma_binding(&f.value)?;
            Some((f, operand, ty))
        })
        .collect();
    let mut out = String::new();
    out.push_str(
        "// kwb-extract: the task list. One task per output tile, each field written from its\n// binding (see kwb.toml's [host.tasks]); the descriptors follow the tasks in one image.\n#include <cstring>\n\n",
    );
    out.push_str(
        "struct kwb_any_ptr {\n  const void* p;\n  template <class T>\n  operator T*() const { return static_cast<T*>(const_cast<void*>(p)); }\n};\n\n",
    );
    if !maps.is_empty() {
        out.push_str(
            "static decltype(&cuTensorMapEncodeTiled) kwb_encode_tiled() {\n  void* p = nullptr;\n  cudaDriverEntryPointQueryResult status{};\n  if (cudaGetDriverEntryPointByVersion(\"cuTensorMapEncodeTiled\", &p, 12000, cudaEnableDefault,\n                                       &status) != cudaSuccess ||\n      status != cudaDriverEntryPointSuccess)\n    return nullptr;\n  return reinterpret_cast<decltype(&cuTensorMapEncodeTiled)>(p);\n}\n\n",
        );
    }
    let ty = g.task_type;
    out.push_str(&format!(
        "static unsigned long long kwb_maps_offset(long long count) {{\n  return (static_cast<unsigned long long>(count) * sizeof({ty}) + 127ull) / 128ull * 128ull;\n}}\n\n"
    ));
    let map_bytes = if maps.is_empty() {
        String::new()
    } else {
        format!(" + {} * sizeof(CUtensorMap)", maps.len())
    };
    out.push_str(&format!(
        "extern \"C\" int {TASKS_BYTES}(const kwb_problem* kwb_p, unsigned long long* bytes, int* count) {{\n  const long long kwb_count = ((kwb_p->M + {tm} - 1) / {tm}) * ((kwb_p->N + {tn} - 1) / {tn});\n  *count = static_cast<int>(kwb_count);\n  *bytes = kwb_maps_offset(kwb_count){map_bytes};\n  return 0;\n}}\n\n"
    ));
    out.push_str(&format!(
        "extern \"C\" int {TASKS_FILL}(const kwb_problem* kwb_p, void* kwb_device, void* kwb_host) {{\n  unsigned long long kwb_bytes = 0;\n  int kwb_count = 0;\n  {TASKS_BYTES}(kwb_p, &kwb_bytes, &kwb_count);\n"
    ));
    if !maps.is_empty() {
        out.push_str(
            "  const unsigned long long kwb_at = kwb_maps_offset(kwb_count);\n  CUtensorMap* kwb_maps = reinterpret_cast<CUtensorMap*>(static_cast<char*>(kwb_host) + kwb_at);\n  const CUtensorMap* kwb_device_maps =\n      reinterpret_cast<const CUtensorMap*>(static_cast<char*>(kwb_device) + kwb_at);\n",
        );
    } else {
        out.push_str("  (void)kwb_device;\n");
    }
    for (i, (f, operand, map_type)) in maps.iter().enumerate() {
        let Some(e) = g.encoding else { break };
        let args: Vec<String> = e
            .params
            .iter()
            .map(|k| match *k {
                "encoder" => "kwb_encode_tiled()".to_owned(),
                "map" => format!("&kwb_maps[{i}]"),
                _ => format!("kwb_any_ptr{{kwb_p->{operand}}}"),
            })
            .collect();
        out.push_str(&format!(
            "  // {} = {}\n  if (const int kwb_rc = static_cast<int>({map_type}::{}({})))\n    return kwb_rc;\n",
            f.name,
            f.value,
            e.function,
            args.join(", ")
        ));
    }
    out.push_str(&format!(
        "  {ty}* kwb_list = static_cast<{ty}*>(kwb_host);\n  const long long kwb_tiles_n = (kwb_p->N + {tn} - 1) / {tn};\n  for (int kwb_i = 0; kwb_i < kwb_count; ++kwb_i) {{\n    const long long kwb_m0 = kwb_i / kwb_tiles_n * {tm}, kwb_n0 = kwb_i % kwb_tiles_n * {tn};\n    (void)kwb_m0, (void)kwb_n0;\n    {ty} kwb_t{{}};\n"
    ));
    let mut map_index = 0;
    for f in g.fields {
        if f.how == "unread" {
            continue;
        }
        let value = if tma_binding(&f.value).is_some() {
            map_index += 1;
            format!("&kwb_device_maps[{}]", map_index - 1)
        } else if f.role.is_some() {
            format!("kwb_any_ptr{{kwb_p->{}}}", f.value)
        } else if let Some(s) = scalar(&f.value) {
            s.to_owned()
        } else {
            format!("({})", f.value)
        };
        out.push_str(&format!("    kwb_t.{} = {value};\n", f.name));
    }
    out.push_str(&format!(
        "    std::memcpy(static_cast<void*>(&kwb_list[kwb_i]), &kwb_t, sizeof({ty}));\n  }}\n  return 0;\n}}\n\n"
    ));
    let declared = g
        .smem_declared
        .map(|d| format!("  {d}\n"))
        .unwrap_or_default();
    out.push_str(&format!(
        "extern \"C\" int {}(const kwb_problem* kwb_p, unsigned grid[3], unsigned block[3],\n                      unsigned long long* smem_bytes) {{\n  (void)kwb_p;\n{declared}  const dim3 kwb_block = dim3({});\n  grid[0] = {}, grid[1] = 1, grid[2] = 1;\n  block[0] = kwb_block.x, block[1] = kwb_block.y, block[2] = kwb_block.z;\n  *smem_bytes = static_cast<unsigned long long>({});\n  return 0;\n}}\n",
        crate::host::CONFIG,
        g.block,
        g.ctas,
        g.smem
    ));
    out
}

/// Checks a field binding's name against the struct and returns the field's entry.
pub(crate) fn field(
    function: &str,
    (name, declaration): (&str, &str),
    read: bool,
    dispatch: &Dispatch,
    bindings: &[(String, String)],
) -> Result<TaskField, ExtractError> {
    let bound = bindings.iter().rev().find(|(f, _)| f == name);
    let (how, value) = match (bound, name == dispatch.field) {
        (Some((_, v)), _) => ("bound", v.clone()),
        (None, true) => ("dispatch", dispatch.value.clone()),
        (None, false) if read => {
            return Err(ExtractError::UnboundTaskField {
                function: function.to_owned(),
                field: name.to_owned(),
                declaration: declaration.to_owned(),
            });
        }
        (None, false) => ("unread", String::new()),
    };
    let role = matches!(value.as_str(), "A" | "B" | "C" | "D" | "bias").then(|| value.clone());
    let element = role
        .as_ref()
        .and_then(|_| crate::kernel::role(name, declaration).1);
    if role.is_some() && element.is_none() {
        return Err(ExtractError::BadTaskBinding {
            binding: format!("{name}={value}"),
            why: format!("`{declaration}` is not a pointer, so it cannot hold an operand"),
        });
    }
    Ok(TaskField {
        name: name.to_owned(),
        declaration: declaration.to_owned(),
        how: how.to_owned(),
        value,
        role,
        element,
    })
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

/// The definition of the function `short` (its last name part) that is not a
/// `__global__`, with its template parameters.
pub(crate) fn device_function<'t>(
    parsed: &'t Parsed,
    globals: &[std::ops::Range<usize>],
    short: &str,
) -> Option<(Node<'t>, Vec<kwb_sites::TemplateParam>)> {
    let src = &parsed.source;
    let mut stack = vec![parsed.tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.kind() == "function_definition" {
            let mut d = n.child_by_field_name("declarator");
            while let Some(x) = d {
                if x.kind() == "function_declarator" {
                    break;
                }
                d = x.child_by_field_name("declarator");
            }
            let named = d
                .and_then(|d| d.child_by_field_name("declarator"))
                .is_some_and(|x| src[x.byte_range()].rsplit("::").next() == Some(short));
            // A kernel of the map is not a device function.
            let at = d.map_or(n.start_byte(), |d| d.start_byte());
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

fn node_of<'t>(parsed: &'t Parsed, range: &std::ops::Range<usize>) -> Option<Node<'t>> {
    parsed
        .tree
        .root_node()
        .descendant_for_byte_range(range.start, range.end)
}

fn task_list(what: String, help: &str) -> ExtractError {
    ExtractError::TaskList {
        what,
        help: help.to_owned(),
    }
}

/// The reproducer of the device function `name` (a task a `__global__` kernel of the
/// file dispatches to), at the instantiation `spec_args` names or its only one.
pub(crate) fn extract(
    parsed: &Parsed,
    map: &KernelMap,
    request: &Request,
    name: &str,
    spec_args: Option<Vec<String>>,
) -> Result<Extraction, ExtractError> {
    let src = &parsed.source;
    let short = name.rsplit("::").next().unwrap_or(name);
    let last = |n: &str| n.rsplit("::").next().unwrap_or(n).trim().to_owned();
    let global_ranges: Vec<std::ops::Range<usize>> = map
        .kernels
        .iter()
        .filter(|k| k.role == "global")
        .map(|k| k.range.clone())
        .collect();
    let (function, template_params) =
        device_function(parsed, &global_ranges, short).ok_or_else(|| {
            task_list(
                format!("no device function `{short}`"),
                "name it as defined",
            )
        })?;
    let globals: Vec<Node<'_>> = map
        .kernels
        .iter()
        .filter(|k| k.role == "global")
        .filter_map(|k| node_of(parsed, &k.range))
        .collect();
    let constants = crate::constants::file_scope(parsed, &request.defines);
    let all = calls(parsed, &globals, short);
    let listed = |c: &Call<'_>| format!("line {}: <{}>", c.line, c.args.join(", "));
    let call = match &spec_args {
        Some(args) => all
            .iter()
            .find(|c| {
                c.args.len() == args.len()
                    && c.args
                        .iter()
                        .zip(args)
                        .all(|(a, b)| same_argument(&constants, a, b))
            })
            .ok_or_else(|| ExtractError::NoTaskCall {
                function: short.to_owned(),
                with: format!(" with <{}>", args.join(", ")),
                calls: if all.is_empty() {
                    "none".to_owned()
                } else {
                    all.iter().map(listed).collect::<Vec<_>>().join("; ")
                },
            })?,
        None => {
            let mut distinct: Vec<&Call<'_>> = Vec::new();
            for c in &all {
                if !distinct.iter().any(|d| d.args == c.args) {
                    distinct.push(c);
                }
            }
            match distinct.as_slice() {
                [one] => *one,
                [] => {
                    return Err(ExtractError::NoTaskCall {
                        function: short.to_owned(),
                        with: String::new(),
                        calls: "none".to_owned(),
                    });
                }
                many => {
                    return Err(ExtractError::AmbiguousTaskCall {
                        function: short.to_owned(),
                        calls: many
                            .iter()
                            .map(|c| listed(c))
                            .collect::<Vec<_>>()
                            .join("; "),
                    });
                }
            }
        }
    };
    let kernel_name = map
        .kernels
        .iter()
        .find(|k| k.role == "global" && k.range.start == call.kernel.start_byte())
        .map(|k| last(&k.name))
        .unwrap_or_default();
    let mut kernel: KernelDef = crate::kernel::find(parsed, map, &kernel_name)
        .into_iter()
        .find(|k| k.range.start == call.kernel.start_byte())
        .ok_or_else(|| {
            task_list(
                format!("`{kernel_name}` has no parameter list"),
                "define it",
            )
        })?;
    if !kernel.template_params.is_empty() {
        return Err(task_list(
            format!("`{short}` runs in `{kernel_name}`, a kernel template"),
            "kwb-extract reproduces the tasks of a megakernel that is not a template",
        ));
    }
    let d = dispatch(parsed, call.node).ok_or(ExtractError::NoDispatch {
        function: short.to_owned(),
        line: call.line,
    })?;
    let (written_type, list) = task_variable(parsed, call.kernel, &d.variable, &kernel.params)
        .ok_or_else(|| {
            task_list(
                format!(
                    "the dispatch at line {} reads `{}`, which `{kernel_name}` does not declare from one of its parameters",
                    call.line, d.variable
                ),
                "kwb-extract needs the task read out of the kernel's task-list parameter (`const Task task = tasks[i];`)",
            )
        })?;
    let task_type = kwb_syntax::identifiers(&written_type)
        .filter(|w| !matches!(*w, "const" | "volatile" | "struct" | "class"))
        .last()
        .unwrap_or_default()
        .to_owned();
    let fields = struct_fields(parsed, &task_type).ok_or_else(|| {
        task_list(
            format!("the task type `{task_type}` is not a struct this file defines"),
            "kwb-extract writes the tasks field by field from the struct's definition",
        )
    })?;
    // The device function's parameter the task is passed as.
    let call_args: Vec<String> = call
        .node
        .child_by_field_name("arguments")
        .map(|a| {
            let t = &src[a.byte_range()];
            crate::scan::split_top(&t[1..t.len().saturating_sub(1)])
        })
        .unwrap_or_default();
    let params = crate::kernel::params_of(parsed, function).unwrap_or_default();
    let param = call_args
        .iter()
        .position(|a| a.trim() == d.variable)
        .and_then(|i| params.get(i))
        .map(|p| p.name.clone())
        .ok_or_else(|| {
            task_list(
                format!(
                    "the call at line {} does not pass `{}` to `{short}`",
                    call.line, d.variable
                ),
                "kwb-extract reads which fields the instantiation uses through the parameter the task is passed as",
            )
        })?;
    let read = fields_read(parsed, function, &param);
    let bindings = &request.task.bindings;
    for (f, v) in bindings {
        if !fields.iter().any(|(n, _)| n == f) {
            return Err(ExtractError::BadTaskBinding {
                binding: format!("{f}={v}"),
                why: format!(
                    "`{task_type}` has no field `{f}`; its fields: {}",
                    fields
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    let task_fields = fields
        .iter()
        .map(|(n, decl)| field(short, (n, decl), read.contains(n), &d, bindings))
        .collect::<Result<Vec<_>, _>>()?;
    let tile = request.task.tile.ok_or_else(|| {
        task_list(
            format!("no --task-tile: the output tile one `{short}` task computes is needed to lay the tasks over the output"),
            "give it as ROWS,COLUMNS, e.g. --task-tile 16,64",
        )
    })?;
    let ctas = request.task.ctas.unwrap_or(1).max(1);
    // TMA bindings go through the file's own encoding function.
    let encoding = if task_fields.iter().any(|f| tma_binding(&f.value).is_some()) {
        let functions: Vec<Node<'_>> = crate::descriptors::descriptors(parsed, &constants)
            .iter()
            .filter_map(|desc| {
                let at = src
                    .match_indices('\n')
                    .nth(desc.line.saturating_sub(1))
                    .map_or(0, |(i, _)| i);
                parsed
                    .tree
                    .root_node()
                    .descendant_for_byte_range(at, at)
                    .and_then(crate::tree::enclosing_function)
            })
            .collect();
        Some(encoding(parsed, &functions).map_err(|why| {
            ExtractError::BadTaskBinding {
                binding: task_fields
                    .iter()
                    .find(|f| tma_binding(&f.value).is_some())
                    .map(|f| format!("{}={}", f.name, f.value))
                    .unwrap_or_default(),
                why,
            }
        })?)
    } else {
        None
    };
    for f in &task_fields {
        if f.value.starts_with("tma(") && tma_binding(&f.value).is_none() {
            return Err(ExtractError::BadTaskBinding {
                binding: format!("{}={}", f.name, f.value),
                why: "write it as tma(OPERAND, TYPE), OPERAND one of A, B, C, D".to_owned(),
            });
        }
    }
    // The kernel's parameters: the list, its length, zeroed scratch for other pointers.
    let mut count = None;
    let mut scratch = Vec::new();
    for p in &mut kernel.params {
        if p.name == list {
            p.role = "task-list".to_owned();
        } else if p.element.is_none() && p.role == "scalar" && count.is_none() {
            p.role = "task-count".to_owned();
            count = Some(p.name.clone());
        } else if p.element.is_some() {
            p.role = "scratch".to_owned();
            scratch.push(p.name.clone());
        } else {
            return Err(task_list(
                format!(
                    "`{kernel_name}` takes `{}`, which is neither the task list, its length nor a pointer kwb can give a zeroed buffer",
                    p.declaration
                ),
                "kwb-extract reproduces megakernels whose parameters are the task list, its length and device buffers",
            ));
        }
    }
    // The kernel's launch gives the block and the dynamic shared memory.
    let launch = crate::launch::launches(parsed)
        .into_iter()
        .find(|l| l.kernel.rsplit("::").next() == Some(kernel_name.as_str()))
        .ok_or_else(|| ExtractError::NoLaunch {
            kernel: kernel_name.clone(),
        })?;
    let config = crate::emit::config(parsed, &launch, &constants);
    let by_role = |role: &str| config.iter().find(|c| c.role == role);
    let block = by_role("block").map_or("1".to_owned(), |c| c.written.clone());
    let (smem, smem_declared) = by_role("smem").map_or(("0".to_owned(), None), |c| {
        (c.written.clone(), c.declared.clone())
    });
    // The template arguments of the call, folded.
    let mut args = Vec::new();
    for (i, p) in template_params.iter().enumerate() {
        let written = call
            .args
            .get(i)
            .cloned()
            .or_else(|| p.default.clone())
            .unwrap_or_default();
        args.push(TemplateArg::folded(&constants, p, written));
    }
    let function_text = format!("{short}<{}>", call.args.join(", "));
    let qualified = crate::emit::qualified_name(parsed, &kernel);
    let mut roots = vec![kernel_name.clone(), task_type.clone(), short.to_owned()];
    for text in task_fields
        .iter()
        .map(|f| f.value.as_str())
        .chain([block.as_str(), smem.as_str()])
        .chain(smem_declared.as_deref())
    {
        roots.extend(kwb_syntax::identifiers(text).map(str::to_owned));
    }
    let all_items = crate::items::items(parsed);
    let kept = crate::items::slice(parsed, &all_items, &roots);
    let mut header = crate::emit::header(request, &function_text, Some(&launch), &args);
    header.push_str(&format!(
        "// a task of `{kernel_name}` (dispatched when {}.{} == {}), reproduced by launching
// `{kernel_name}` on a list of such tasks only, one per {} x {} output tile
",
        d.variable, d.field, d.value, tile.0, tile.1
    ));
    let (mut repro, copied) = crate::emit::repro(
        parsed,
        &all_items,
        &kept,
        &request.file_name,
        &header,
        &crate::emit::entry_points(&qualified, None),
    );
    repro.push('\n');
    repro.push_str(crate::host::PROBLEM_STRUCT);
    repro.push('\n');
    repro.push_str(&generate(&Generate {
        task_type: &task_type,
        fields: &task_fields,
        tile,
        ctas,
        encoding: encoding.as_ref(),
        block: &block,
        smem: &smem,
        smem_declared: smem_declared.as_deref(),
    }));
    let host = crate::host::HostEntries {
        config: Some(crate::host::CONFIG.to_owned()),
        unavailable: vec![format!(
            "main() behind {}: a task list is built for kwb run",
            crate::standalone::MAIN_MACRO
        )],
        tasks: Some(TaskEntries {
            function: function_text.clone(),
            call: src[call.node.byte_range()].to_owned(),
            call_line: call.line,
            dispatch: format!("{}.{} == {}", d.variable, d.field, d.value),
            task_type,
            list,
            count,
            scratch,
            scratch_bytes: SCRATCH_BYTES,
            tile: [tile.0, tile.1],
            ctas,
            bytes: TASKS_BYTES.to_owned(),
            fill: TASKS_FILL.to_owned(),
            fields: task_fields,
        }),
        ..Default::default()
    };
    Ok(Extraction {
        kernel,
        qualified: qualified.clone(),
        instantiation: qualified,
        args,
        launch: Some(launch),
        config,
        copied,
        descriptors: crate::descriptors::descriptors(parsed, &constants),
        host,
        repro,
    })
}
