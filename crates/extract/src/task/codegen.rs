//! What a task reproducer writes: each field's value from its binding (`tma(…)`
//! descriptors through the file's own encoding function) and the C++ of the entry
//! points that build the task list and give the launch configuration.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use super::find::Dispatch;
use super::{TASKS_BYTES, TASKS_FILL, TaskField};
use crate::error::ExtractError;

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
    let mut names: Vec<String> = Vec::new();
    let mut chosen = None;
    for f in functions {
        let Some(params) = crate::kernel::params_of(parsed, *f) else {
            continue;
        };
        let Some(name) = crate::tree::function_name(parsed, *f).map(str::to_owned) else {
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
        // Where the runner reads the maps the fill encodes, as the kernel will.
        let names: Vec<String> = maps.iter().map(|(f, _, _)| f.name.clone()).collect();
        out.push_str(&crate::through::maps::storage(&names));
        out.push('\n');
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
            "  // {} = {}\n  if (const int kwb_rc = static_cast<int>({map_type}::{}({})))\n    return kwb_rc;\n  kwb_keep_map({i}, &kwb_maps[{i}]);\n",
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

/// The entry of the struct field `name` (declared `declaration`): bound, the dispatch
/// field, or unread (zero); `None` when the task reads it and no binding gives it.
pub(crate) fn field(
    (name, declaration): (&str, &str),
    read: bool,
    dispatch: &Dispatch,
    bindings: &[(String, String)],
) -> Result<Option<TaskField>, ExtractError> {
    let bound = bindings.iter().rev().find(|(f, _)| f == name);
    let (how, value) = match (bound, name == dispatch.field) {
        (Some((_, v)), _) => ("bound", v.clone()),
        (None, true) => ("dispatch", dispatch.value.clone()),
        (None, false) if read => return Ok(None),
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
    Ok(Some(TaskField {
        name: name.to_owned(),
        declaration: declaration.to_owned(),
        how: how.to_owned(),
        value,
        role,
        element,
    }))
}

/// A binding to suggest for an unbound field, from its name and type: a guess the
/// user checks, `?` where there is none.
pub(crate) fn suggest(name: &str, declaration: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if declaration.contains("CUtensorMap") {
        let operand = if has(&["weight", "w_", "_b", "b_"]) {
            "B"
        } else if has(&["out", "y_", "d_"]) {
            "D"
        } else if has(&["in", "act", "a_", "x_"]) {
            "A"
        } else {
            "?"
        };
        return format!("tma({operand}, TYPE)");
    }
    let (role, element) = crate::kernel::role(name, declaration);
    if element.is_some() {
        return match role {
            "A" | "B" | "C" | "D" | "bias" => role.to_owned(),
            _ => "?".to_owned(),
        };
    }
    match role {
        "alpha" | "beta" => role.to_owned(),
        "m" => "M".to_owned(),
        "n" => "N".to_owned(),
        "k" => "K".to_owned(),
        _ if has(&["count", "num"]) && has(&["wait", "dep", "event"]) => "0".to_owned(),
        _ if has(&["wait", "signal", "event", "dep"]) => "-1".to_owned(),
        _ if has(&["col", "n0", "n_off", "n_start"]) => "n0".to_owned(),
        _ if has(&["row", "m0", "m_off", "m_start"]) => "m0".to_owned(),
        _ => "?".to_owned(),
    }
}
