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
//! the file's own encoding function for a type (`tma(A, TYPE)`, or `tma(A)` for the
//! type the launcher encodes that field's map with: `registration.rs`), or any C++
//! expression. The dispatch field gets the case label.
//!
//! Invariant: every field the instantiation reads through its task parameter is the
//! dispatch field or bound; a field it does not read is zero. A read field without a
//! binding is an error that names it, never a default.

mod codegen;
mod find;
mod registration;

use kwb_sites::KernelMap;
use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::error::ExtractError;
use crate::kernel::{KernelDef, Param};
use crate::{Extraction, Request, TemplateArg};
use codegen::{Generate, encoding, field, generate, suggest, tma_binding};
use find::{Call, calls, dispatch, fields_read, same_argument, task_variable};
pub(crate) use find::{device_function, global_ranges};
use kwb_syntax::struct_fields;

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

/// The struct field a binding's key names: `inputs` of `inputs[0].base_ptr`.
fn top_field(key: &str) -> &str {
    key.split(['.', '[', '-']).next().unwrap_or(key).trim()
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

/// The reproducer of the device function `short` (a task a `__global__` kernel of the
/// file dispatches to; its template parameters `template_params`), at the
/// instantiation `spec_args` names or its only one.
pub(crate) fn extract(
    parsed: &Parsed,
    map: &KernelMap,
    request: &Request,
    short: &str,
    template_params: &[kwb_sites::TemplateParam],
    spec_args: Option<Vec<String>>,
) -> Result<Extraction, ExtractError> {
    let src = &parsed.source;
    let last = |n: &str| n.rsplit("::").next().unwrap_or(n).trim().to_owned();
    let globals: Vec<Node<'_>> = global_ranges(map)
        .iter()
        .filter_map(|r| node_of(parsed, r))
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
    // The fields the task reads: in the call's arguments, and through the task where
    // the call passes it whole (to the device function and its helpers).
    let read = fields_read(parsed, call.node, &d.variable);
    // TMA bindings go through the file's own encoding function.
    let descriptors = crate::descriptors::descriptors(parsed, &constants);
    let encoding = match request
        .task
        .bindings
        .iter()
        .find(|(_, v)| v.starts_with("tma("))
    {
        Some((key, value)) => {
            let functions: Vec<Node<'_>> = descriptors
                .iter()
                .filter_map(|desc| {
                    let at = crate::tree::line_start(src, desc.line);
                    parsed
                        .tree
                        .root_node()
                        .descendant_for_byte_range(at, at)
                        .and_then(crate::tree::enclosing_function)
                })
                .collect();
            Some(
                encoding(parsed, &functions).map_err(|why| ExtractError::BadTaskBinding {
                    binding: format!("{key}={value}"),
                    why,
                })?,
            )
        }
        None => None,
    };
    // `tma(OPERAND)`: the type the launcher encodes the field's map with.
    let mut resolved = request.task.bindings.clone();
    for (key, value) in &mut resolved {
        let Some(operand) = value
            .trim()
            .strip_prefix("tma(")
            .and_then(|v| v.strip_suffix(')'))
            .map(str::trim)
            .filter(|o| matches!(*o, "A" | "B" | "C" | "D"))
        else {
            continue;
        };
        let function = encoding.as_ref().map_or("encode", |e| e.function.as_str());
        let ty = registration::launcher_type(
            parsed,
            &constants,
            &task_type,
            &fields,
            (&d.field, &d.value),
            key,
            function,
        )
        .map_err(|why| ExtractError::BadTaskBinding {
            binding: format!("{key}={value}"),
            why: format!("the type of the launcher's encoding: {why}"),
        })?;
        *value = format!("tma({operand}, {ty})");
    }
    let bindings = &resolved;
    for (f, v) in bindings {
        if !fields.iter().any(|(n, _)| *n == top_field(f)) {
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
    // Every field, and every unbound one named at once.
    let mut task_fields = Vec::new();
    let mut unbound: Vec<(String, String)> = Vec::new();
    for (n, decl) in &fields {
        // Bindings of a member of the field (`inputs[0].base_ptr=A`) write it piece by
        // piece; the element type behind such a path is not read off the struct.
        let paths: Vec<&(String, String)> = bindings
            .iter()
            .filter(|(key, _)| top_field(key) == n && key != n)
            .collect();
        if !paths.is_empty() {
            for (key, value) in paths {
                task_fields.push(TaskField {
                    name: key.clone(),
                    declaration: decl.clone(),
                    how: "bound".to_owned(),
                    value: value.clone(),
                    role: matches!(value.as_str(), "A" | "B" | "C" | "D" | "bias")
                        .then(|| value.clone()),
                    element: None,
                });
            }
            continue;
        }
        match field((n, decl), read.contains(n), &d, bindings)? {
            Some(f) => task_fields.push(f),
            None => unbound.push((n.clone(), decl.clone())),
        }
    }
    if let Some((first, declaration)) = unbound.first() {
        return Err(ExtractError::UnboundTaskField {
            function: short.to_owned(),
            field: first.clone(),
            declaration: declaration.clone(),
            all: unbound
                .iter()
                .map(|(n, d)| format!("`{n}` (`{d}`)"))
                .collect::<Vec<_>>()
                .join(", "),
            suggestion: unbound
                .iter()
                .map(|(n, d)| format!("--task '{n}={}'", suggest(n, d)))
                .collect::<Vec<_>>()
                .join(" "),
        });
    }
    let tile = request.task.tile.ok_or_else(|| {
        task_list(
            format!("no --task-tile: the output tile one `{short}` task computes is needed to lay the tasks over the output"),
            "give it as ROWS,COLUMNS, e.g. --task-tile 16,64",
        )
    })?;
    let ctas = request.task.ctas.unwrap_or(1).max(1);
    for f in &task_fields {
        if f.value.starts_with("tma(") && tma_binding(&f.value).is_none() {
            return Err(ExtractError::BadTaskBinding {
                binding: format!("{}={}", f.name, f.value),
                why: "write it as tma(OPERAND, TYPE), or tma(OPERAND) for the type the launcher encodes it with; OPERAND one of A, B, C, D".to_owned(),
            });
        }
    }
    // The kernel's parameters: the list, its length, zeroed scratch for other pointers.
    let mut count = None;
    let mut scratch = Vec::new();
    for p in &mut kernel.params {
        if p.name == list {
            p.role = "task-list".to_owned();
        } else if p.element.is_none()
            && matches!(
                p.role.as_str(),
                "scalar" | "m" | "n" | "k" | "leading-dimension"
            )
            && !p.declaration.contains("float")
            && !p.declaration.contains("double")
            && count.is_none()
        {
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
        descriptors,
        host,
        repro,
        accumulator: None,
        mma_input: None,
    })
}
