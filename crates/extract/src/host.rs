//! The reproducer's host entry points: what a runner would otherwise transcribe from
//! the launcher by hand. `kwb_config` gives the launch's grid, block and dynamic
//! shared memory for a problem; `kwb_encode_<param>` fills a kernel's `CUtensorMap`
//! parameter the way the launcher does. Each is the launcher's own code copied
//! verbatim (the top-level declarations before the launch that the result needs, to a
//! fixed point, `using` directives always), with the launcher's parameters bound from
//! one fixed struct, `kwb_problem`, whose layout is part of the runner's ABI.
//!
//! Invariant: an entry point is written only when every name its code needs is a
//! top-level declaration before the launch, a launcher parameter `kwb_problem` can
//! bind, or something outside the launcher (a file item, which the slice then keeps);
//! otherwise the manifest says which name stopped it.

use std::collections::BTreeSet;

use kwb_syntax::Parsed;
use tree_sitter::Node;

use crate::kernel::Param;
use crate::launch::Launch;

/// `int kwb_config(const kwb_problem*, unsigned grid[3], unsigned block[3],
/// unsigned long long* smem)`: 0 on success.
pub const CONFIG: &str = "kwb_config";
/// `int kwb_encode_<param>(const kwb_problem*, void* map)` (a 128-byte,
/// 64-byte-aligned `CUtensorMap`): 0 on success, else the launcher's own status.
pub const ENCODE_PREFIX: &str = "kwb_encode_";

/// The problem a runner passes, in C++. Its layout is the runner's ABI: pointers
/// first, then 64-bit integers, then the scalars.
pub const PROBLEM_STRUCT: &str = "struct kwb_problem {\n  const void* A;\n  const void* B;\n  const void* C;\n  void* D;\n  const void* bias;\n  long long M, N, K;\n  long long lda, ldb, ldc, ldd;\n  float alpha, beta;\n};\n";

/// What the reproducer's host half offers a runner (the manifest's `[host]`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntries {
    /// The configuration function, when the launch's grid, block and shared memory
    /// could be written from the launcher's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// One per `CUtensorMap` kernel parameter the launcher's code fills.
    #[serde(default)]
    pub encoders: Vec<Encoder>,
    /// What could not be written, and why.
    #[serde(default)]
    pub unavailable: Vec<String>,
    /// The macro that compiles repro.cu's own `main()` (the all-ones rung, alone),
    /// when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main: Option<String>,
    /// The launcher's parameters with their roles: the operands' element types and
    /// leading dimensions a runner must honour even where the kernel takes neither.
    #[serde(default)]
    pub launcher: Vec<Param>,
    /// For a library kernel behind an adapter: the entry points that build its
    /// Params blob with the adapter's own host code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<ParamsEntries>,
    /// For a task of a megakernel: the entry points that build its task list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<crate::task::TaskEntries>,
    /// For a reproducer through the user's launcher: its one entry point, the
    /// bindings and the operands' layouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<crate::through::Through>,
}

/// `int FILL(const kwb_problem*, void* workspace, void* out, const char** why)`
/// writes the kernel's Params (`SIZE()` bytes, 64-byte aligned) from the launcher's
/// own Arguments through the adapter (0 on success; 1 the adapter refused the
/// problem, 2 its initialize failed; `why` its status text);
/// `int WORKSPACE(const kwb_problem*, unsigned long long* bytes)` gives the device
/// workspace it needs, which the runner allocates zeroed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamsEntries {
    /// The adapter, as the file declares it (`Gemm = cutlass::gemm::device::…<GemmKernel>`).
    pub adapter: String,
    pub fill: String,
    pub size: String,
    pub workspace: String,
    /// The launcher's Arguments declaration the blob is built from, and its line.
    pub arguments: String,
    pub line: usize,
}

/// One descriptor-filling entry point.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Encoder {
    /// The kernel parameter it fills.
    pub param: String,
    /// The C-ABI function.
    pub function: String,
    /// The launcher's code it runs, as written.
    pub call: String,
    /// Its line in the file.
    pub line: usize,
}

/// The host half: the entries, their C++ text, and the names the text needs from
/// the file's top-level items.
#[derive(Debug, Clone, Default)]
pub struct Host {
    pub entries: HostEntries,
    pub text: String,
    pub roots: Vec<String>,
}

/// A top-level statement of the launcher before the launch.
pub(crate) struct Statement {
    pub(crate) declares: Vec<String>,
    /// Names a statement that is not a declaration writes (`x = …`, `x.f = …`,
    /// `++x`, `f(&x)`), inside an `if constexpr` too: it is copied when one of them
    /// is needed, so a value the launcher adjusts after declaring it is reproduced.
    pub(crate) writes: Vec<String>,
    pub(crate) text: String,
    pub(crate) line: usize,
    /// `using namespace …;`: always copied.
    pub(crate) always: bool,
}

/// The launcher as the entry points see it: its parameters (element types through
/// the file's aliases) and its top-level statements before byte `before`.
pub(crate) struct Launcher<'a> {
    file: &'a str,
    pub(crate) params: Vec<Param>,
    statements: Vec<Statement>,
    /// Every name the launcher declares before the launch, nested blocks included.
    locals: Vec<String>,
}

impl<'a> Launcher<'a> {
    pub(crate) fn new(
        parsed: &Parsed,
        function: Node<'_>,
        before: usize,
        file: &'a str,
    ) -> Launcher<'a> {
        let mut params = crate::kernel::params_of(parsed, function).unwrap_or_default();
        if params.iter().any(|p| p.element.is_some()) {
            let aliases = crate::aliases::all(parsed);
            for p in &mut params {
                if let Some(e) = &p.element {
                    p.element = Some(crate::aliases::resolve(&aliases, e));
                }
            }
        }
        Launcher {
            file,
            params,
            statements: statements(parsed, function, before),
            locals: crate::constants::local_names(parsed, &function.byte_range(), before),
        }
    }
}

/// The host entry points for `launch` (in a function of `parsed`), whose kernel has
/// `kernel_params`.
pub fn host(parsed: &Parsed, launch: &Launch, kernel_params: &[Param], file: &str) -> Host {
    let mut host = Host::default();
    let Some(function) = launch
        .function
        .as_ref()
        .and_then(|f| crate::tree::function_at(parsed, f))
    else {
        host.entries
            .unavailable
            .push("the launch is not inside a function".to_owned());
        return host;
    };
    let launcher = Launcher::new(parsed, function, launch.at, file);
    let mut text = preamble(parsed, function, file);
    text.push_str(
        "template <class F>\nstatic int kwb_status(F&& f) {\n  \
         if constexpr (std::is_void_v<decltype(f())>) {\n    f();\n    return 0;\n  } else {\n    \
         return static_cast<int>(f());\n  }\n}\n",
    );
    let mut roots = BTreeSet::new();
    // The configuration.
    let config: Vec<(&str, &String)> = ["grid", "block", "smem"]
        .into_iter()
        .zip(&launch.config)
        .collect();
    let targets: Vec<String> = config.iter().map(|(_, w)| (*w).clone()).collect();
    match launcher.body(&targets, &[]) {
        Ok((body, used)) => {
            roots.extend(used);
            let mut tail = String::new();
            for (role, written) in &config {
                match *role {
                    "smem" => tail.push_str(&format!(
                        "  *kwb_smem = static_cast<unsigned long long>({written});\n"
                    )),
                    _ => {
                        let out = format!("kwb_{role}");
                        let v = format!("kwb_{role}_value");
                        tail.push_str(&format!(
                            "  const dim3 {v} = dim3({written});\n  {out}[0] = {v}.x;\n  {out}[1] = {v}.y;\n  {out}[2] = {v}.z;\n"
                        ));
                    }
                }
            }
            if config.len() < 3 {
                tail.push_str("  *kwb_smem = 0;\n");
            }
            text.push_str(&format!(
                "\nextern \"C\" int {CONFIG}(const kwb_problem* kwb_p, unsigned* kwb_grid, unsigned* kwb_block,\n                          unsigned long long* kwb_smem) {{\n{body}{tail}  return 0;\n}}\n"
            ));
            host.entries.config = Some(CONFIG.to_owned());
        }
        Err(why) => host.entries.unavailable.push(format!("{CONFIG}: {why}")),
    }
    // The descriptors.
    for (param, arg) in kernel_params.iter().zip(&launch.args) {
        if param.role != "tma-descriptor" {
            continue;
        }
        let function_name = format!("{ENCODE_PREFIX}{}", param.name);
        let variable = arg.trim().trim_start_matches('&').trim().to_owned();
        let Some((call, line)) = filling_call(parsed, function, launch.at, &variable) else {
            host.entries.unavailable.push(format!(
                "{function_name}: no call in the launcher takes `&{variable}`"
            ));
            continue;
        };
        match launcher.body(std::slice::from_ref(&call), std::slice::from_ref(&variable)) {
            Ok((body, used)) => {
                roots.extend(used);
                text.push_str(&format!(
                    "\nextern \"C\" int {function_name}(const kwb_problem* kwb_p, void* kwb_map) {{\n{body}  \
                     CUtensorMap& {variable} = *static_cast<CUtensorMap*>(kwb_map);\n  \
                     // kwb-extract: {file}:{line}\n  return kwb_status([&] {{ return {call}; }});\n}}\n"
                ));
                host.entries.encoders.push(Encoder {
                    param: param.name.clone(),
                    function: function_name,
                    call,
                    line,
                });
            }
            Err(why) => host
                .entries
                .unavailable
                .push(format!("{function_name}: {why}")),
        }
    }
    host.entries.launcher = launcher.params.clone();
    host.text = text;
    host.roots = roots.into_iter().collect();
    host
}

/// The head of the host half: where its code comes from, and `kwb_problem`.
pub(crate) fn preamble(parsed: &Parsed, function: Node<'_>, file: &str) -> String {
    format!(
        "// kwb-extract: host entry points, each the launcher's own code ({file}:{}) with its\n\
         // parameters bound from kwb_problem, so a runner transcribes nothing.\n\
         #include <type_traits>\n\n{PROBLEM_STRUCT}\n",
        crate::tree::line_of(&parsed.source, function.start_byte()),
    )
}

impl Launcher<'_> {
    /// The bindings and copied statements that `targets` need (`excluded` names are
    /// declared by the caller), and every identifier they use.
    pub(crate) fn body(
        &self,
        targets: &[String],
        excluded: &[String],
    ) -> Result<(String, Vec<String>), String> {
        let mut needed: BTreeSet<String> = targets
            .iter()
            .flat_map(|t| kwb_syntax::identifiers(t).map(str::to_owned))
            .collect();
        let mut kept = vec![false; self.statements.len()];
        loop {
            let mut grew = false;
            for (i, s) in self.statements.iter().enumerate() {
                let wanted = s.always
                    || s.declares
                        .iter()
                        .chain(&s.writes)
                        .any(|d| needed.contains(d) && !excluded.contains(d));
                if !kept[i] && wanted {
                    kept[i] = true;
                    grew = true;
                    needed.extend(kwb_syntax::identifiers(&s.text).map(str::to_owned));
                }
            }
            if !grew {
                break;
            }
        }
        let declared: BTreeSet<&str> = self
            .statements
            .iter()
            .zip(&kept)
            .filter(|(_, k)| **k)
            .flat_map(|(s, _)| s.declares.iter().map(String::as_str))
            .collect();
        let mut body = String::new();
        for p in self.params.iter().filter(|p| needed.contains(&p.name)) {
            if declared.contains(p.name.as_str()) || excluded.contains(&p.name) {
                continue;
            }
            body.push_str(&format!("  {}\n", binding(p)?));
        }
        for name in &needed {
            let is_param = self.params.iter().any(|p| &p.name == name);
            if !is_param
                && !declared.contains(name.as_str())
                && !excluded.contains(name)
                && self.locals.contains(name)
            {
                return Err(format!(
                    "`{name}` is declared inside a block of the launcher, not at its top level"
                ));
            }
        }
        for (s, _) in self.statements.iter().zip(&kept).filter(|(_, k)| **k) {
            body.push_str(&format!(
                "  // kwb-extract: {}:{}\n  {}\n",
                self.file, s.line, s.text
            ));
        }
        let local: BTreeSet<&str> = self
            .params
            .iter()
            .map(|p| p.name.as_str())
            .chain(declared.iter().copied())
            .collect();
        let used = needed
            .iter()
            .filter(|n| !local.contains(n.as_str()))
            .cloned()
            .collect();
        Ok((body, used))
    }
}

/// The declaration binding launcher parameter `p` from `kwb_p`.
fn binding(p: &Param) -> Result<String, String> {
    let ty = p.declaration[..p.declaration.len().saturating_sub(p.name.len())].trim();
    if ty.contains("cudaStream_t") || ty.contains("CUstream") {
        return Ok(format!("{} = nullptr;", p.declaration));
    }
    let field = field(p).map_err(|role| {
        format!(
            "launcher parameter `{}` (`{}`, role {role}) has no field in kwb_problem",
            p.name, p.declaration
        )
    })?;
    Ok(format!(
        "{} = ({})(kwb_p->{field});",
        p.declaration.trim_end(),
        cast_type(p)
    ))
}

/// The type of parameter `p` as a cast can name it (no `__restrict__`).
pub fn cast_type(p: &Param) -> String {
    p.declaration[..p.declaration.len().saturating_sub(p.name.len())]
        .split_whitespace()
        .filter(|w| !matches!(*w, "__restrict__" | "__restrict" | "__grid_constant__"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `kwb_problem` field that fills parameter `p`, or its role when none does.
pub fn field(p: &Param) -> Result<&'static str, String> {
    Ok(match p.role.as_str() {
        "A" => "A",
        "B" => "B",
        "C" => "C",
        "D" => "D",
        "bias" => "bias",
        "m" => "M",
        "n" => "N",
        "k" => "K",
        "alpha" => "alpha",
        "beta" => "beta",
        "leading-dimension" => match p
            .name
            .to_ascii_lowercase()
            .trim_start_matches("ld")
            .trim_start_matches('_')
        {
            "a" => "lda",
            "b" => "ldb",
            "c" => "ldc",
            "d" => "ldd",
            _ => return Err("leading-dimension (of no operand kwb_problem knows)".to_owned()),
        },
        role => return Err(role.to_owned()),
    })
}

/// The top-level declarations of `function`'s body before byte `before`.
pub(crate) fn statements(parsed: &Parsed, function: Node<'_>, before: usize) -> Vec<Statement> {
    let mut out = Vec::new();
    for n in crate::tree::top_statements(function, before) {
        let text = crate::tree::as_written(parsed, n).to_owned();
        let mut writes = Vec::new();
        let (declares, always) = match n.kind() {
            "declaration" => {
                let mut c = n.walk();
                let names = n
                    .children_by_field_name("declarator", &mut c)
                    .filter_map(|d| {
                        let t = &parsed.source[d.byte_range()];
                        let head = t.split(['=', '(', '{', '[']).next().unwrap_or(t);
                        kwb_syntax::identifiers(head).last().map(str::to_owned)
                    })
                    .collect();
                (names, false)
            }
            "alias_declaration" | "type_definition" => {
                let name = n
                    .child_by_field_name("name")
                    .or_else(|| n.child_by_field_name("declarator"))
                    .map(|d| parsed.source[d.byte_range()].trim().to_owned());
                (name.into_iter().collect(), false)
            }
            "using_declaration" => (Vec::new(), text.contains("namespace")),
            "expression_statement" | "if_statement" => {
                writes = written_names(parsed, n);
                if writes.is_empty() {
                    continue;
                }
                (Vec::new(), false)
            }
            _ => continue,
        };
        out.push(Statement {
            declares,
            writes,
            line: crate::tree::line_of(&parsed.source, n.start_byte()),
            text,
            always,
        });
    }
    out
}

/// The names statement `n` writes: the root of every assignment's or increment's
/// target, and every `&x` handed to a call (an output argument).
fn written_names(parsed: &Parsed, n: Node<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![n];
    while let Some(x) = stack.pop() {
        let target = match x.kind() {
            "assignment_expression" => x.child_by_field_name("left"),
            "update_expression" => x.child_by_field_name("argument"),
            "pointer_expression" if parsed.source[x.byte_range()].starts_with('&') => {
                x.child_by_field_name("argument")
            }
            _ => None,
        };
        if let Some(t) = target
            && let Some(root) = kwb_syntax::identifiers(&parsed.source[t.byte_range()]).next()
            && !out.iter().any(|o| o == root)
        {
            out.push(root.to_owned());
        }
        let mut cursor = x.walk();
        stack.extend(x.named_children(&mut cursor));
    }
    out
}

/// The call before byte `before` in `function` that takes `&variable` as an
/// argument: its text and line.
fn filling_call(
    parsed: &Parsed,
    function: Node<'_>,
    before: usize,
    variable: &str,
) -> Option<(String, usize)> {
    let wanted = format!("&{variable}");
    crate::tree::nodes_before(function, before)
        .into_iter()
        .filter(|n| n.kind() == "call_expression")
        .find(|call| {
            call.child_by_field_name("arguments").is_some_and(|args| {
                let mut c = args.walk();
                args.named_children(&mut c).any(|a| {
                    parsed.source[a.byte_range()]
                        .chars()
                        .filter(|c| !c.is_whitespace())
                        .collect::<String>()
                        == wanted
                })
            })
        })
        .map(|call| {
            (
                parsed.source[call.byte_range()]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
                crate::tree::line_of(&parsed.source, call.start_byte()),
            )
        })
}
