//! Where the launcher registers a task's descriptors. `--task FIELD=tma(OPERAND)` (no
//! type) binds a descriptor field the way the file's own host code fills it for tasks
//! of the dispatched type: the task construction (`Task{TASK_LINEAR_UP, …,
//! &b.maps[1], …}`, `Task t = {…}`, `tasks.push_back({…})` on a vector of tasks, or
//! field by field: `t.type = …; t.weight = …;`) gives the field's element of a map
//! array, the copy into that array
//! (`cudaMemcpyAsync(b.maps, host_maps, …)`) the host array, and the encoding call that
//! writes that element (`UpTmas::Weight::encode(encode, &host_maps[1], b.w_up)`), in
//! the `if constexpr` branch the build's `-D`s select, the type. A defect in how the
//! launcher encodes a task's map is then in the reproducer too.
//!
//! Invariant: a type comes back only when every construction of a task of the type
//! points the field at the same element and exactly one live encoding call writes it;
//! anything else is an error that says which step found what.

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::fold::Constants;

/// The copies a launcher moves host arrays to the device with: (callee, destination
/// argument, source argument).
const COPIES: [(&str, usize, usize); 4] = [
    ("cudaMemcpy", 0, 1),
    ("cudaMemcpyAsync", 0, 1),
    ("cuMemcpyHtoD", 0, 1),
    ("cuMemcpyHtoDAsync", 0, 1),
];

/// The (field, value) pairs one task construction gives, and its line.
type Built = (Vec<(String, String)>, usize);

/// What a task construction writes into one field: an element of an array.
struct Element {
    array: String,
    index: i64,
}

/// The type whose `encode_fn` the launcher calls for `field` of tasks of
/// `task_type` whose `dispatch_field` is `label`. `fields` are the struct's fields in
/// declaration order.
pub(crate) fn launcher_type(
    parsed: &Parsed,
    constants: &Constants,
    task_type: &str,
    fields: &[(String, String)],
    (dispatch_field, label): (&str, &str),
    field: &str,
    encode_fn: &str,
) -> Result<String, String> {
    let src = &parsed.source;
    let root = parsed.tree.root_node();
    let tail = |t: &str| t.rsplit("::").next().unwrap_or(t).trim().to_owned();
    // 1. The constructions of tasks of the dispatched type, and the field's value in each:
    // brace initializers, and tasks written field by field.
    let mut values: Vec<(String, usize)> = Vec::new();
    // A brace list of a type with a constructor is the constructor's arguments, not
    // the fields in order: only its designated fields are read then.
    let positional = if kwb_syntax::has_constructor(parsed, task_type) {
        &[][..]
    } else {
        fields
    };
    let mut built: Vec<Built> = constructions(parsed, root, task_type)
        .into_iter()
        .map(|init| {
            (
                initialized(parsed, init, positional),
                crate::tree::line_of(src, init.start_byte()),
            )
        })
        .collect();
    built.extend(assigned(parsed, root, task_type));
    for (given, line) in built {
        let Some((_, kind)) = given.iter().find(|(f, _)| f == dispatch_field) else {
            continue;
        };
        if tail(kind) != tail(label) {
            continue;
        }
        if let Some((_, v)) = given.iter().find(|(f, _)| f == field) {
            values.push((v.clone(), line));
        }
    }
    if values.is_empty() {
        return Err(format!(
            "the file constructs no `{task_type}` with `{dispatch_field}` {label} that sets `{field}` (a `{task_type}{{…}}` in the launcher)"
        ));
    }
    // 2. The element of a map array they point it at.
    let mut element: Option<Element> = None;
    for (value, line) in &values {
        let e = element_of(value, constants).ok_or_else(|| {
            format!("line {line} sets `{field}` to `{value}`, not to an element of a map array (`&maps[i]`)")
        })?;
        if let Some(seen) = &element
            && (seen.array != e.array || seen.index != e.index)
        {
            return Err(format!(
                "the launcher points `{field}` at `{}[{}]` and at `{}[{}]`; bind it with tma(OPERAND, TYPE)",
                seen.array, seen.index, e.array, e.index
            ));
        }
        element = Some(e);
    }
    let Element { array, index } = element.expect("one value at least");
    // 3. The host array copied into it.
    let hosts = host_arrays(parsed, root, &array);
    let host = match hosts.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(format!(
                "no cudaMemcpy copies a host array into `{array}`, where the launcher points `{field}`"
            ));
        }
        many => {
            return Err(format!(
                "the launcher copies {} into `{array}`; bind `{field}` with tma(OPERAND, TYPE)",
                many.iter()
                    .map(|h| format!("`{h}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ));
        }
    };
    // 4. The encoding calls that write host[index], in the branches the -Ds keep.
    let mut live = Vec::new();
    let mut undecided = Vec::new();
    for call in calls_writing(parsed, root, &host, index, constants) {
        let Some(function) = call.child_by_field_name("function") else {
            continue;
        };
        let callee = src[function.byte_range()].replace("template", " ");
        let callee: String = callee.split_whitespace().collect();
        let Some(ty) = callee.strip_suffix(&format!("::{encode_fn}")) else {
            continue;
        };
        let line = crate::tree::line_of(src, call.start_byte());
        match branch_live(parsed, call, constants) {
            Some(true) => live.push((ty.to_owned(), line)),
            Some(false) => {}
            None => undecided.push((ty.to_owned(), line)),
        }
    }
    match (live.as_slice(), undecided.as_slice()) {
        ([(ty, _)], []) => Ok(ty.clone()),
        ([], []) => Err(format!(
            "no `…::{encode_fn}` call writes `{host}[{index}]`, which the launcher copies to `{array}[{index}]` for `{field}`"
        )),
        _ => Err(format!(
            "the launcher writes `{host}[{index}]` with {}; bind `{field}` with tma(OPERAND, TYPE)",
            live.iter()
                .chain(&undecided)
                .map(|(ty, line)| format!("`{ty}` (line {line})"))
                .collect::<Vec<_>>()
                .join(" and ")
        )),
    }
}

/// Tasks written field by field (`Task t; t.type = TASK_X; t.w = &maps[1];`, or
/// `tasks[i].type = …` on an array of tasks): per function and written object, the
/// (field, value) assignments and the line of the first one.
fn assigned(
    parsed: &Parsed,
    root: Node<'_>,
    task_type: &str,
) -> Vec<(Vec<(String, String)>, usize)> {
    let src = &parsed.source;
    // Variables declared as tasks (or arrays and vectors of them), per function.
    let mut declared: Vec<(usize, String)> = Vec::new();
    let mut writes: Vec<(usize, String, String, String, usize)> = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        let function = || crate::tree::enclosing_function(n).map_or(0, |f| f.start_byte());
        if n.kind() == "declaration"
            && let Some(ty) = n.child_by_field_name("type")
            && kwb_syntax::identifiers(&src[ty.byte_range()]).any(|w| w == task_type)
        {
            let mut cursor = n.walk();
            for d in n.children_by_field_name("declarator", &mut cursor) {
                let head = &src[d.byte_range()];
                let head = head.split(['=', '[', '{', '(']).next().unwrap_or(head);
                if let Some(name) = kwb_syntax::identifiers(head).last() {
                    declared.push((function(), name.to_owned()));
                }
            }
        }
        if n.kind() == "assignment_expression"
            && let (Some(left), Some(right)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("right"),
            )
            && left.kind() == "field_expression"
            && let (Some(object), Some(field)) = (
                left.child_by_field_name("argument"),
                left.child_by_field_name("field"),
            )
        {
            writes.push((
                function(),
                src[object.byte_range()].split_whitespace().collect(),
                src[field.byte_range()].trim().to_owned(),
                src[right.byte_range()].trim().to_owned(),
                n.start_byte(),
            ));
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    writes.sort_by_key(|w| w.4);
    // Per (function, object written): what it is given, from its first line on.
    let mut groups: Vec<((usize, String), Built)> = Vec::new();
    for (function, object, field, value, at) in writes {
        // The variable written: `t` of `t`, `tasks` of `tasks[i]`.
        let variable = object.split('[').next().unwrap_or(&object).to_owned();
        if !declared
            .iter()
            .any(|(f, v)| *f == function && *v == variable)
        {
            continue;
        }
        let key = (function, object);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, (given, _))) => given.push((field, value)),
            None => groups.push((key, (vec![(field, value)], crate::tree::line_of(src, at)))),
        }
    }
    groups.into_iter().map(|(_, built)| built).collect()
}

/// The brace initializers that construct a `task_type`: `Task{…}`, `Task t = {…}`, and
/// `{…}` pushed onto a `std::vector<Task>` (`tasks.push_back({…})`).
fn constructions<'t>(parsed: &Parsed, root: Node<'t>, task_type: &str) -> Vec<Node<'t>> {
    let src = &parsed.source;
    let named = |n: Node<'_>| {
        kwb_syntax::identifiers(&src[n.byte_range()])
            .filter(|w| !matches!(*w, "const" | "struct" | "static"))
            .last()
            == Some(task_type)
    };
    let mut out = Vec::new();
    // Vectors of tasks: their names.
    let mut vectors: Vec<String> = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind() == "declaration"
            && let Some(ty) = n.child_by_field_name("type")
            && src[ty.byte_range()].contains("vector")
            && kwb_syntax::identifiers(&src[ty.byte_range()]).any(|w| w == task_type)
        {
            let mut cursor = n.walk();
            for d in n.children_by_field_name("declarator", &mut cursor) {
                let head = &src[d.byte_range()];
                let head = head.split(['=', '{', '(']).next().unwrap_or(head);
                if let Some(name) = kwb_syntax::identifiers(head).last() {
                    vectors.push(name.to_owned());
                }
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "call_expression" => {
                if let (Some(f), Some(args)) = (
                    n.child_by_field_name("function"),
                    n.child_by_field_name("arguments"),
                ) && f.kind() == "field_expression"
                    && let (Some(object), Some(method)) = (
                        f.child_by_field_name("argument"),
                        f.child_by_field_name("field"),
                    )
                    && matches!(&src[method.byte_range()], "push_back" | "emplace_back")
                    && vectors.iter().any(|v| v == src[object.byte_range()].trim())
                    && let Some(list) = args.named_child(0)
                    && list.kind() == "initializer_list"
                {
                    out.push(list);
                }
            }
            "compound_literal_expression" => {
                if let (Some(ty), Some(value)) = (
                    n.child_by_field_name("type"),
                    n.child_by_field_name("value"),
                ) && named(ty)
                    && value.kind() == "initializer_list"
                {
                    out.push(value);
                }
            }
            "declaration" => {
                if let Some(ty) = n.child_by_field_name("type")
                    && named(ty)
                {
                    let mut cursor = n.walk();
                    for d in n.children_by_field_name("declarator", &mut cursor) {
                        if let Some(value) = d.child_by_field_name("value")
                            && value.kind() == "initializer_list"
                        {
                            out.push(value);
                        }
                    }
                }
            }
            _ => {}
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|n| n.start_byte());
    out
}

/// (field, value text) of each element of an initializer list: by designator
/// (`.field = v`) or by position in `fields`.
fn initialized(
    parsed: &Parsed,
    list: Node<'_>,
    fields: &[(String, String)],
) -> Vec<(String, String)> {
    let src = &parsed.source;
    let mut out = Vec::new();
    let mut cursor = list.walk();
    let items: Vec<Node<'_>> = list
        .named_children(&mut cursor)
        .filter(|n| n.kind() != "comment")
        .collect();
    for (i, item) in items.iter().enumerate() {
        if item.kind() == "initializer_pair" {
            let (Some(d), Some(v)) = (
                item.child_by_field_name("designator"),
                item.child_by_field_name("value"),
            ) else {
                continue;
            };
            let name = src[d.byte_range()]
                .trim_start_matches('.')
                .trim()
                .to_owned();
            out.push((name, src[v.byte_range()].trim().to_owned()));
        } else if let Some((name, _)) = fields.get(i) {
            out.push((name.clone(), src[item.byte_range()].trim().to_owned()));
        }
    }
    out
}

/// `&X[I]` or `X + I` with I folding to an integer.
fn element_of(value: &str, constants: &Constants) -> Option<Element> {
    let value = value.trim();
    if let Some(rest) = value.strip_prefix('&') {
        let rest = rest.trim();
        let open = rest.find('[')?;
        let inner = rest[open + 1..].strip_suffix(']')?;
        let index = constants.fold(inner).ok()?;
        return Some(Element {
            array: rest[..open].trim().to_owned(),
            index,
        });
    }
    let (array, index) = value.split_once('+')?;
    Some(Element {
        array: array.trim().to_owned(),
        index: constants.fold(index).ok()?,
    })
}

/// The host arrays copies move into `array`: the sources of `cudaMemcpy(array, H, …)`,
/// each once, in source order.
fn host_arrays(parsed: &Parsed, root: Node<'_>, array: &str) -> Vec<String> {
    let src = &parsed.source;
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind() == "call_expression"
            && let (Some(f), Some(args)) = (
                n.child_by_field_name("function"),
                n.child_by_field_name("arguments"),
            )
            && let Some((_, to, from)) = COPIES
                .iter()
                .find(|(name, _, _)| src[f.byte_range()].trim() == *name)
        {
            let mut cursor = args.walk();
            let args: Vec<&str> = args
                .named_children(&mut cursor)
                .map(|a| src[a.byte_range()].trim())
                .collect();
            if args.get(*to).is_some_and(|d| plain(d) == array)
                && let Some(source) = args.get(*from)
                && !out.iter().any(|(_, h)| h == plain(source))
            {
                out.push((n.start_byte(), plain(source).to_owned()));
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort();
    out.into_iter().map(|(_, h)| h).collect()
}

/// An array argument without `&` and `.data()`.
fn plain(arg: &str) -> &str {
    let arg = arg.trim().trim_start_matches('&').trim();
    arg.strip_suffix(".data()").unwrap_or(arg).trim()
}

/// The calls with an argument `&host[index]` or `host + index`.
fn calls_writing<'t>(
    parsed: &Parsed,
    root: Node<'t>,
    host: &str,
    index: i64,
    constants: &Constants,
) -> Vec<Node<'t>> {
    let src = &parsed.source;
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.kind() == "call_expression"
            && let Some(args) = n.child_by_field_name("arguments")
        {
            let mut cursor = args.walk();
            let hits = args.named_children(&mut cursor).any(|a| {
                element_of(&src[a.byte_range()], constants)
                    .is_some_and(|e| e.array == host && e.index == index)
            });
            if hits {
                out.push(n);
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.named_children(&mut cursor));
    }
    out.sort_by_key(|n| n.start_byte());
    out
}

/// Whether every `if constexpr` around `node` keeps the branch it is in: Some(false)
/// when one discards it, None when a condition does not fold.
fn branch_live(parsed: &Parsed, node: Node<'_>, constants: &Constants) -> Option<bool> {
    let src = &parsed.source;
    let mut child = node;
    let mut parent = node.parent();
    let mut live = Some(true);
    while let Some(p) = parent {
        if p.kind() == "if_statement"
            && src[p.byte_range()].starts_with("if constexpr")
            && let Some(condition) = p.child_by_field_name("condition")
        {
            let text = src[condition.byte_range()].trim();
            let text = text
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .unwrap_or(text);
            let in_consequence = p
                .child_by_field_name("consequence")
                .is_some_and(|c| c.byte_range().contains(&child.start_byte()));
            match constants.fold(text) {
                Ok(v) if (v != 0) != in_consequence => return Some(false),
                Ok(_) => {}
                Err(_) => live = None,
            }
        }
        child = p;
        parent = p.parent();
    }
    live
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAUNCHER: &str = r#"
enum class Defect { none, up_weight_desc };
constexpr Defect kDefect = Defect::KWB_DEFECT;
enum TaskType { TASK_UP = 1, TASK_DOWN = 2 };
struct Task { int type; int col; const CUtensorMap* in; const CUtensorMap* w; };
static void launch(EncodeFn encode, Buffers& b) {
  CUtensorMap host_maps[4];
  if constexpr (kDefect == Defect::up_weight_desc)
    DownTmas::Weight::encode(encode, &host_maps[1], b.w_up);
  else
    UpTmas::Weight::encode(encode, &host_maps[1], b.w_up);
  UpTmas::Input::encode(encode, &host_maps[0], b.x);
  DownTmas::Weight::encode(encode, host_maps + 3, b.w_down);
  Task tasks[8];
  for (int i = 0; i < 4; ++i) tasks[i] = Task{TASK_UP, i, &b.maps[0], &b.maps[1]};
  for (int i = 0; i < 4; ++i) tasks[4 + i] = Task{.type = TASK_DOWN, .col = i, .in = &b.maps[2], .w = b.maps + 3};
  cudaMemcpyAsync(b.maps, host_maps, sizeof(host_maps), cudaMemcpyHostToDevice, 0);
}
"#;

    fn fields() -> Vec<(String, String)> {
        ["type", "col", "in", "w"]
            .iter()
            .map(|f| ((*f).to_owned(), String::new()))
            .collect()
    }

    /// The type for `field` of `label` tasks in `launcher`, built with KWB_DEFECT=`defect`.
    fn resolve_in(
        launcher: &str,
        defect: &str,
        label: &str,
        field: &str,
    ) -> Result<String, String> {
        let parsed = kwb_syntax::parse(launcher);
        let constants =
            crate::constants::file_scope(&parsed, &[("KWB_DEFECT".to_owned(), defect.to_owned())]);
        launcher_type(
            &parsed,
            &constants,
            "Task",
            &fields(),
            ("type", label),
            field,
            "encode",
        )
    }

    fn resolve(defect: &str, label: &str, field: &str) -> Result<String, String> {
        resolve_in(LAUNCHER, defect, label, field)
    }

    #[test]
    fn the_launcher_s_encoding_call_gives_the_type_in_the_live_branch() {
        assert_eq!(resolve("none", "TASK_UP", "w").unwrap(), "UpTmas::Weight");
        assert_eq!(
            resolve("up_weight_desc", "TASK_UP", "w").unwrap(),
            "DownTmas::Weight"
        );
        assert_eq!(resolve("none", "TASK_UP", "in").unwrap(), "UpTmas::Input");
        // Designated initializers and `array + i`.
        assert_eq!(
            resolve("none", "TASK_DOWN", "w").unwrap(),
            "DownTmas::Weight"
        );
    }

    /// Tasks written field by field, and pushed onto a vector as brace lists.
    #[test]
    fn tasks_assigned_field_by_field_or_pushed_are_read_too() {
        let launcher = r#"
struct Task { int type; int col; const CUtensorMap* in; const CUtensorMap* w; };
static void launch(EncodeFn encode, Buffers& b) {
  CUtensorMap host_maps[4];
  UpTmas::Weight::encode(encode, &host_maps[1], b.w_up);
  DownTmas::Weight::encode(encode, &host_maps[3], b.w_down);
  UpTmas::Input::encode(encode, &host_maps[0], b.x);
  Task tasks[8];
  for (int i = 0; i < 4; ++i) {
    tasks[i].type = TASK_UP;
    tasks[i].w = &b.maps[1];
  }
  std::vector<Task> more;
  more.push_back({TASK_DOWN, 0, &b.maps[0], &b.maps[3]});
  Task other;
  other.w = &b.maps[0];
  cudaMemcpy(b.maps, host_maps, sizeof(host_maps), cudaMemcpyHostToDevice);
}
"#;
        let resolve = |label: &str, field: &str| resolve_in(launcher, "none", label, field);
        assert_eq!(resolve("TASK_UP", "w").unwrap(), "UpTmas::Weight");
        assert_eq!(resolve("TASK_DOWN", "w").unwrap(), "DownTmas::Weight");
        assert_eq!(resolve("TASK_DOWN", "in").unwrap(), "UpTmas::Input");
    }

    /// A task type with a constructor: its brace lists are the constructor's
    /// arguments, so only designated fields count; two host arrays copied into the
    /// maps are named, not chosen between.
    #[test]
    fn constructors_and_two_sources_are_not_guessed() {
        let launcher = r#"
struct Task { int type; int col; const CUtensorMap* in; const CUtensorMap* w;
  Task(int t, const CUtensorMap* m) : type(t), col(0), in(m), w(m) {} };
static void launch(EncodeFn encode, Buffers& b) {
  CUtensorMap host_maps[4], spare[4];
  UpTmas::Weight::encode(encode, &host_maps[1], b.w_up);
  tasks[0] = Task{TASK_UP, &b.maps[1]};
  cudaMemcpy(b.maps, host_maps, sizeof(host_maps), cudaMemcpyHostToDevice);
}
"#;
        let e = resolve_in(launcher, "none", "TASK_UP", "w").unwrap_err();
        assert!(e.contains("constructs no `Task`"), "{e}");
        let two = format!(
            "{LAUNCHER}\nvoid again(Buffers& b) {{ cudaMemcpy(b.maps, spare, 64, cudaMemcpyHostToDevice); }}\n"
        );
        let e = resolve_in(&two, "none", "TASK_UP", "w").unwrap_err();
        assert!(
            e.contains("copies `host_maps` and `spare` into `b.maps`"),
            "{e}"
        );
    }

    #[test]
    fn what_the_launcher_does_not_show_is_said() {
        // maps[2] is copied but nothing encodes host_maps[2].
        let e = resolve("none", "TASK_DOWN", "in").unwrap_err();
        assert!(
            e.contains("no `…::encode` call writes `host_maps[2]`"),
            "{e}"
        );
        // No construction of a task of that type.
        let e = resolve("none", "TASK_OTHER", "w").unwrap_err();
        assert!(e.contains("constructs no `Task`"), "{e}");
        // A field set to something that is no map element.
        let e = resolve("none", "TASK_UP", "col").unwrap_err();
        assert!(e.contains("not to an element of a map array"), "{e}");
        // A condition that does not fold: both calls named.
        let e = resolve("unknown_defect", "TASK_UP", "w").unwrap_err();
        assert!(
            e.contains("`DownTmas::Weight` (line 9) and `UpTmas::Weight` (line 11)"),
            "{e}"
        );
    }
}
