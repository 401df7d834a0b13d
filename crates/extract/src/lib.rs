//! Track B's extraction: the exact instantiation of a kernel, out of the file that
//! launches it, as a self-contained reproducer.
//!
//! Given a file and a kernel (or a template spec), kwb-extract finds the launch site
//! (`NAME<ARGS><<<…>>>(…)`, or a local `auto k = NAME<ARGS>; k<<<…>>>`), folds each
//! template argument to a value with the constants in scope (file and namespace
//! `constexpr`s, `#define`s, `-D`s, the launching function's `constexpr` locals),
//! and slices the file: the kernel and every top-level item it needs (by name, to a
//! fixed point; preprocessor lines, `using namespace` and `static_assert`s always),
//! copied verbatim with the lines they came from. Host code the kernel does not use
//! (the launcher, `main`) is left out. The reproducer ends with C-ABI entry points
//! that launch the instantiation, so a runner needs no C++ name mangling.
//!
//! What cannot be resolved is named: an argument that leans on a name only the
//! launching function defines is an error, never a guess.

mod accumulator;
mod adapter;
mod aliases;
mod codegen;
pub mod compile_db;
mod constants;
mod deduce;
mod descriptors;
mod emit;
mod error;
mod fold;
mod host;
mod items;
mod kernel;
mod launch;
pub mod manifest;
mod scan;
mod standalone;
mod task;
mod through;
mod tree;

pub use crate::descriptors::{Descriptor, Field};
pub use crate::emit::{ENTRY, KERNEL_SYMBOL};
pub use crate::error::ExtractError;
pub use crate::fold::{Constants, Unfolded};
pub use crate::host::{
    CONFIG, ENCODE_PREFIX, Encoder, HostEntries, PROBLEM_STRUCT, ParamsEntries,
    field as problem_field,
};
pub use crate::kernel::{KernelDef, Param, role};
pub use crate::launch::{Launch, launches};
pub use crate::standalone::MAIN_MACRO;
pub use crate::task::{
    SCRATCH_BYTES, TASKS_BYTES, TASKS_FILL, TaskEntries, TaskField, TaskRequest,
};
pub use crate::through::maps::{LAUNCHED_MAPS, WRAPPED as LAUNCH_ENTRIES_WRAPPED, WRAPPER};
pub use crate::through::{Binding, Layout, RENAMED_MAIN, THROUGH_ENTRY, Through};
pub use kwb_sites::TemplateParam;
use kwb_syntax::Parsed;

/// What to extract.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The kernel's name (its launch site gives the instantiation).
    pub kernel: Option<String>,
    /// `NAME<ARGS…>`: the instantiation itself (arguments folded like a launch's).
    pub template: Option<String>,
    /// `-D NAME=VALUE` (a bare `-D NAME` is 1).
    pub defines: Vec<(String, String)>,
    /// The file's name as the reproducer cites it.
    pub file_name: String,
    /// For a device function a megakernel dispatches to: how to build its task list.
    pub task: TaskRequest,
    /// `--bind NAME=VALUE`: a parameter of the launcher a reproducer calls.
    pub binds: Vec<(String, String)>,
    /// `--layout A=km,B=kn,D=nm`: the operands' layouts, over the launcher's contract.
    pub layout: Option<String>,
    /// Reproduce through the launcher even where the kernel's own arguments could
    /// be built.
    pub through: bool,
    /// The kernel alone, never through its launcher: an instantiation or argument
    /// kwb cannot build is an error.
    pub alone: bool,
    /// `--instance N`: the Nth (from 1) of the distinct instantiations the file's
    /// launch sites use, in source order; the kernel alone.
    pub instance: Option<usize>,
}

/// One template argument.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TemplateArg {
    pub name: String,
    /// `type` or `non-type`.
    pub kind: String,
    /// As written at the launch (or the spec, or the parameter's default).
    pub written: String,
    /// Its integer value, for a non-type argument that folds.
    #[serde(default)]
    pub value: Option<i64>,
    /// What the reproducer instantiates with.
    pub emitted: String,
    /// Why a non-type argument has no value (it is then emitted as written).
    #[serde(default)]
    pub unfolded: Option<String>,
}

impl TemplateArg {
    /// The argument `text` for the parameter `p`: a non-type argument folded with
    /// `constants` where it folds (a `bool` emitted as `true`/`false`), else as written.
    pub(crate) fn folded(constants: &Constants, p: &TemplateParam, text: String) -> TemplateArg {
        let (value, unfolded) = if p.kind == "non-type" {
            match constants.fold(&text) {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(e.to_string())),
            }
        } else {
            (None, None)
        };
        let emitted = match (value, p.ty.as_deref()) {
            (Some(v), Some("bool")) => (v != 0).to_string(),
            (Some(v), _) => v.to_string(),
            (None, _) => text.clone(),
        };
        TemplateArg {
            name: p.name.clone(),
            kind: p.kind.to_owned(),
            written: text,
            value,
            emitted,
            unfolded,
        }
    }
}

/// One launch-configuration value (grid, block, shared memory, stream).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ConfigValue {
    /// `grid`, `block`, `smem` or `stream`.
    pub role: String,
    pub written: String,
    #[serde(default)]
    pub value: Option<i64>,
    /// Where a local variable holds it: its declaration, as written.
    #[serde(default)]
    pub declared: Option<String>,
}

/// The result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Extraction {
    pub kernel: KernelDef,
    /// The qualified name the reproducer refers to the kernel by.
    pub qualified: String,
    pub instantiation: String,
    pub args: Vec<TemplateArg>,
    pub launch: Option<Launch>,
    pub config: Vec<ConfigValue>,
    /// Lines of the file copied into the reproducer, as (first, last) per item.
    pub copied: Vec<(usize, usize)>,
    /// The file's TMA descriptor constructions, their parameters resolved.
    pub descriptors: Vec<Descriptor>,
    /// The reproducer's host entry points (launch configuration, descriptors).
    pub host: HostEntries,
    /// The reproducer's source.
    #[serde(skip)]
    pub repro: String,
    /// The type the file's MMAs accumulate in (`f16`, `f32`), where it names any.
    #[serde(default)]
    pub accumulator: Option<String>,
    /// The precision the MMA reads A and B at where it is below their type's (`tf32`:
    /// a tensor-op GEMM on `float` operands).
    #[serde(default)]
    pub mma_input: Option<String>,
}

/// Extracts the instantiation `request` names from `source`: the kernel alone where
/// kwb can build each of its arguments, else (or with `through`) through the
/// launcher that reaches it.
pub fn extract(source: &str, request: &Request) -> Result<Extraction, ExtractError> {
    let parsed = kwb_syntax::parse(source);
    // `extern "C" __global__ void K(…);` and a launch: the kernel is compiled in another
    // translation unit, which no reproducer of this file holds. Say so, rather than
    // that the file has none or a reproducer that cannot link.
    let named = match (&request.template, &request.kernel) {
        (Some(spec), _) => scan::template_id(spec).map(|(n, _)| n),
        (None, Some(k)) => Some(k.clone()),
        (None, None) => None,
    };
    if let Some(name) = named {
        let short = name.rsplit("::").next().unwrap_or(&name).to_owned();
        if let Some(line) = kernel::declared(&parsed, &short) {
            let map = kwb_sites::kernel_map(&parsed, &[]);
            if kernel::find(&parsed, &map, &name).is_empty() {
                return Err(ExtractError::DefinedElsewhere {
                    name,
                    line,
                    definers: String::new(),
                });
            }
        }
    }
    let mut x = route(&parsed, request)?;
    // What the route read off the instantiation, else what the file's MMAs say.
    if x.accumulator.is_none() {
        x.accumulator = accumulator::of(source).map(str::to_owned);
    }
    Ok(x)
}

/// The `__global__` definitions of `name` in `source` (a name with `::` matches its
/// last part), each with its parameters' roles: what a run in the user's own process
/// pairs with the values its launch passed.
pub fn kernel_definitions(source: &str, name: &str) -> Vec<KernelDef> {
    let parsed = kwb_syntax::parse(source);
    let map = kwb_sites::kernel_map(&parsed, &[]);
    kernel::find(&parsed, &map, name)
}

/// The extraction by the route the request and the kernel allow.
fn route(parsed: &Parsed, request: &Request) -> Result<Extraction, ExtractError> {
    let via = |why: &str| -> Option<Result<Extraction, ExtractError>> {
        if request.template.is_some() {
            return None;
        }
        let name = request.kernel.as_deref()?;
        let map = kwb_sites::kernel_map(parsed, &[]);
        let (def, qualified) = match kernel::find(parsed, &map, name).into_iter().next() {
            Some(def) => {
                let qualified = emit::qualified_name(parsed, &def);
                (def, qualified)
            }
            // A library kernel the file names by a type (CUTLASS 2.x's `using Gemm =
            // cutlass::gemm::device::Gemm<…>` inside the launcher): the launcher that
            // names it runs it.
            None => (kernel::named_only(name), name.to_owned()),
        };
        Some(through::extract(parsed, def, qualified, request, why))
    };
    if request.through || request.layout.is_some() {
        // A layout is the launcher's contract: it is honoured through the launcher.
        return via(if request.through {
            "asked for with --through"
        } else {
            "a layout was given with --layout"
        })
        .unwrap_or(Err(ExtractError::NothingAsked));
    }
    // A library GEMM a launcher runs on Arguments it builds from its own buffers.
    let harness = |name: &str| -> Option<Result<Extraction, ExtractError>> {
        if request.template.is_some() {
            return None;
        }
        through::harness::extract(parsed, name, request)
    };
    if request.alone || request.instance.is_some() {
        return match alone(parsed, request) {
            Err(e @ (ExtractError::UnknownKernel { .. } | ExtractError::LocalAdapter { .. }))
                if !request.alone =>
            {
                request
                    .kernel
                    .as_deref()
                    .and_then(harness)
                    .unwrap_or(Err(e))
            }
            r => r,
        };
    }
    match alone(parsed, request) {
        Ok(x) => match gaps(&x) {
            gaps if gaps.is_empty() => Ok(x),
            gaps => {
                let why = format!("the kernel alone would need {}", gaps.join("; "));
                match via(&why) {
                    Some(Ok(t)) => Ok(t),
                    Some(Err(e)) => {
                        let mut x = x;
                        match request.kernel.as_deref().and_then(harness) {
                            Some(Ok(h)) => return Ok(h),
                            Some(Err(refused)) => x.host.unavailable.push(format!(
                                "a reproducer through the program's own harness: {refused}"
                            )),
                            None => {}
                        }
                        x.host
                            .unavailable
                            .push(format!("a reproducer through the launcher: {e}"));
                        Ok(x)
                    }
                    None => Ok(x),
                }
            }
        },
        Err(e)
            if matches!(
                e,
                ExtractError::UnknownKernel { .. }
                    | ExtractError::LocalAdapter { .. }
                    | ExtractError::NoLaunch { .. }
                    | ExtractError::AmbiguousLaunch { .. }
                    | ExtractError::Deduced { .. }
                    | ExtractError::MissingArgument { .. }
                    | ExtractError::Unresolved { .. }
            ) =>
        {
            match via(&e.to_string()) {
                Some(Ok(t)) => Ok(t),
                // Where the kernel is the file's own, the launcher's parameters are what
                // stops it; where the name is no kernel of the file, the name is.
                Some(Err(
                    through @ (ExtractError::Unbound { .. } | ExtractError::BadLayout { .. }),
                )) if !matches!(
                    e,
                    ExtractError::UnknownKernel { .. } | ExtractError::LocalAdapter { .. }
                ) =>
                {
                    Err(through)
                }
                // A library GEMM's alias whose launcher makes its own operands: say so,
                // rather than that the file has no kernel.
                _ => match (&e, request.kernel.as_deref()) {
                    (
                        ExtractError::UnknownKernel { .. } | ExtractError::LocalAdapter { .. },
                        Some(name),
                    ) => match harness(name) {
                        Some(r) => r,
                        None if matches!(e, ExtractError::UnknownKernel { .. }) => {
                            Err(adapter::own_buffers(parsed, name).unwrap_or(e))
                        }
                        None => Err(e),
                    },
                    _ => Err(e),
                },
            }
        }
        Err(e) => Err(e),
    }
}

/// What a runner could not build for the kernel alone: the parameters no entry
/// point fills, and a missing launch configuration.
fn gaps(x: &Extraction) -> Vec<String> {
    let h = &x.host;
    if h.params.is_some() || h.tasks.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for p in &x.kernel.params {
        let filled = match p.role.as_str() {
            "A" | "B" | "C" | "D" | "bias" | "m" | "n" | "k" => true,
            "leading-dimension" => problem_field(p).is_ok(),
            "alpha" | "beta" => p.declaration.contains("float") || p.declaration.contains("double"),
            "tma-descriptor" => h.encoders.iter().any(|e| e.param == p.name),
            _ => false,
        };
        if !filled {
            out.push(format!("`{}` (role {}) built", p.declaration, p.role));
        }
    }
    if h.config.is_none() {
        out.push("a launch configuration".to_owned());
    }
    out
}

/// The kernel alone, its instantiation from a launch site or `--template`.
fn alone(parsed: &Parsed, request: &Request) -> Result<Extraction, ExtractError> {
    let (name, spec_args) = match (&request.template, &request.kernel) {
        (Some(spec), _) => scan::template_id(spec)
            .map(|(n, a)| (n, Some(a)))
            .ok_or_else(|| ExtractError::BadTemplate(spec.clone()))?,
        (None, Some(k)) => (k.clone(), None),
        (None, None) => return Err(ExtractError::NothingAsked),
    };
    let map = kwb_sites::kernel_map(parsed, &[]);
    let defs = kernel::find(parsed, &map, &name);
    let Some(def) = defs.first().cloned() else {
        if spec_args.is_none()
            && let Some(found) = adapter::pick(parsed, &name)
        {
            return adapter::extract(parsed, &found, request);
        }
        if let Some((alias, written, function, line)) = adapter::local(parsed, &name) {
            return Err(ExtractError::LocalAdapter {
                alias,
                written,
                function,
                line,
            });
        }
        let adapters = adapter::names(parsed);
        let adapters = if adapters.is_empty() {
            String::new()
        } else {
            format!(
                "; library kernels behind an adapter (--kernel ALIAS): {}",
                adapters.join(", ")
            )
        };
        // A device function the file's kernels call: say where it runs.
        let short = name.rsplit("::").next().unwrap_or(&name);
        if let Some((_, template_params)) =
            task::device_function(parsed, &task::global_ranges(&map), short)
        {
            return task::extract(parsed, &map, request, short, &template_params, spec_args);
        }
        return Err(ExtractError::UnknownKernel {
            name,
            available: match kernel::all(&map) {
                names if names.is_empty() => {
                    format!("none: this file defines no __global__ function{adapters}")
                }
                names => format!("{}{adapters}", names.join(", ")),
            },
        });
    };
    let short = def.name.clone();
    let all_launches: Vec<Launch> = launches(parsed)
        .into_iter()
        .filter(|l| l.kernel.rsplit("::").next() == Some(short.as_str()))
        .collect();
    let mut file = constants::file_scope(parsed, &request.defines);
    let descriptors = descriptors::descriptors(parsed, &file);
    // The launch: the one the spec's arguments match, or the only one.
    let mut codegen_line = None;
    let (launch, written): (Option<Launch>, Vec<String>) = match spec_args {
        Some(args) => {
            // A launch written with the same arguments gives the launch configuration.
            let matching = all_launches
                .iter()
                .find(|l| l.template_args == args)
                .cloned();
            (matching, args)
        }
        None => {
            let mut distinct: Vec<&Launch> = Vec::new();
            for l in &all_launches {
                if !distinct.iter().any(|d| d.template_args == l.template_args) {
                    distinct.push(l);
                }
            }
            // No launch site: a string naming the instantiation (a JIT's name
            // expression, a code generator's text) gives its arguments.
            let strings = codegen::named(parsed, &short);
            let mut named: Vec<&codegen::Named> = Vec::new();
            for s in &strings {
                if !named.iter().any(|n| n.args == s.args) {
                    named.push(s);
                }
            }
            match distinct.as_slice() {
                [] if def.template_params.iter().all(|p| p.default.is_some()) => (None, Vec::new()),
                [] => match named.as_slice() {
                    [one] => {
                        codegen_line = Some(one.line);
                        (None, one.args.clone())
                    }
                    [] => return Err(ExtractError::NoLaunch { kernel: short }),
                    many => {
                        return Err(ExtractError::AmbiguousLaunch {
                            kernel: short,
                            launches: many
                                .iter()
                                .map(|n| {
                                    format!(
                                        "the string at line {}: <{}>",
                                        n.line,
                                        n.args.join(", ")
                                    )
                                })
                                .collect::<Vec<_>>()
                                .join("; "),
                        });
                    }
                },
                [one] if request.instance.is_none_or(|n| n == 1) => {
                    ((*one).clone().into(), one.template_args.clone())
                }
                many => {
                    let listed = many
                        .iter()
                        .enumerate()
                        .map(|(i, l)| {
                            format!(
                                "{}: line {}: <{}>",
                                i + 1,
                                l.line,
                                l.template_args.join(", ")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; ");
                    match request.instance {
                        Some(n) if (1..=many.len()).contains(&n) => {
                            let l = many[n - 1];
                            (l.clone().into(), l.template_args.clone())
                        }
                        Some(n) => {
                            return Err(ExtractError::NoInstance {
                                kernel: short,
                                given: n,
                                launches: listed,
                            });
                        }
                        None => {
                            return Err(ExtractError::AmbiguousLaunch {
                                kernel: short,
                                launches: listed,
                            });
                        }
                    }
                }
            }
        }
    };
    let at = launch
        .as_ref()
        .and_then(|l| Some((l.function.clone()?, l.at)));
    let local_names = at
        .as_ref()
        .map(|(f, before)| constants::local_names(parsed, f, *before))
        .unwrap_or_default();
    if let Some((f, before)) = &at {
        constants::locals(parsed, f, *before, &mut file);
    }
    if written.len() > def.template_params.len() {
        return Err(ExtractError::TooManyArguments {
            kernel: short,
            given: written.len(),
            declared: def.template_params.len(),
        });
    }
    let mut args = Vec::new();
    for (i, p) in def.template_params.iter().enumerate() {
        // A launch that names no template argument leaves them to deduction from the
        // call's arguments: a type parameter is read off the argument's declared type.
        let deduced = match (&launch, written.get(i)) {
            (Some(l), None) if l.template_args.is_empty() && p.kind == "type" => l
                .function
                .as_ref()
                .and_then(|f| crate::tree::function_at(parsed, f))
                .and_then(|f| deduce::deduce(parsed, f, l.at, &p.name, &def.params, &l.args)),
            _ => None,
        };
        if let Some(ty) = deduced {
            args.push(TemplateArg {
                name: p.name.clone(),
                kind: p.kind.to_owned(),
                written: "(deduced from the launch's arguments)".to_owned(),
                value: None,
                emitted: ty,
                unfolded: None,
            });
            continue;
        }
        let Some(text) = written.get(i).cloned().or_else(|| p.default.clone()) else {
            if let Some(l) = launch.as_ref().filter(|l| l.template_args.is_empty()) {
                return Err(ExtractError::Deduced {
                    kernel: short,
                    line: l.line,
                    param: p.name.clone(),
                });
            }
            return Err(ExtractError::MissingArgument {
                kernel: short,
                param: p.name.clone(),
            });
        };
        let arg = TemplateArg::folded(&file, p, text);
        if arg.value.is_none()
            && let Some(local) =
                scan::identifiers(&arg.written).find(|w| local_names.iter().any(|l| l == w))
        {
            return Err(ExtractError::Unresolved {
                param: p.name.clone(),
                written: arg.written.clone(),
                name: local.to_owned(),
                why: arg
                    .unfolded
                    .unwrap_or_else(|| "it is not an integer".to_owned()),
            });
        }
        args.push(arg);
    }
    let qualified = emit::qualified_name(parsed, &def);
    let instantiation = if def.template_params.is_empty() {
        qualified.clone()
    } else {
        format!(
            "{qualified}<{}>",
            args.iter()
                .map(|a| a.emitted.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let config = launch
        .as_ref()
        .map(|l| emit::config(parsed, l, &file))
        .unwrap_or_default();
    let all_items = items::items(parsed);
    let mut roots = vec![short.clone()];
    for a in &args {
        roots.extend(scan::identifiers(&a.emitted).map(str::to_owned));
    }
    let host = launch
        .as_ref()
        .map(|l| host::host(parsed, l, &def.params, &request.file_name))
        .unwrap_or_default();
    roots.extend(host.roots.iter().cloned());
    let kept = items::slice(parsed, &all_items, &roots);
    let mut header = emit::header(request, &instantiation, launch.as_ref(), &args);
    if let Some(line) = codegen_line {
        header.push_str(&format!(
            "// as a string of {} names it at line {line} (no launch site: give the launch\n// configuration to the runner)\n",
            request.file_name
        ));
    }
    let (mut repro, copied) = emit::repro(
        parsed,
        &all_items,
        &kept,
        &request.file_name,
        &header,
        &emit::entry_points(&instantiation, None),
    );
    let mut host_entries = host.entries;
    if !host.text.is_empty() {
        repro.push('\n');
        repro.push_str(&host.text);
        match standalone::standalone(&def.params, &host_entries) {
            Ok(main) => {
                repro.push_str(&main);
                host_entries.main = Some(MAIN_MACRO.to_owned());
            }
            Err(why) => host_entries
                .unavailable
                .push(format!("main() behind {MAIN_MACRO}: {why}")),
        }
    }
    Ok(Extraction {
        kernel: def,
        qualified,
        instantiation,
        args,
        launch,
        config,
        copied,
        descriptors,
        host: host_entries,
        repro,
        accumulator: None,
        mma_input: None,
    })
}

#[cfg(test)]
mod tests;
