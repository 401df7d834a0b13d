//! Writing a reproducer folder, shared by `kwb-extract` and `kwb diagnose`: what to
//! extract and how the production build compiles it (the [`Target`] arguments), and
//! the folder itself: `repro.cu`, `kwb.toml`, `build.sh`, `includes.txt` and the
//! headers repro.cu includes from beside FILE.
//!
//! Invariant: FILE is only read; each output file is written to a temporary file and
//! renamed into place, all of them or none.

use std::path::{Path, PathBuf};

use kwb_extract::manifest::{Build, Manifest};
use kwb_extract::{ExtractError, Extraction, Request};
use miette::Report;

use crate::input::{DEFAULT_MAX_BYTES, read_source};
use crate::{exit, render};

/// What to extract and how the production build compiles it: the arguments
/// kwb-extract and kwb diagnose share.
#[derive(clap::Args)]
pub struct Target {
    /// The source that defines and launches the kernel (none with `kwb diagnose …
    /// -- CMD`, where the program's own build compiles it)
    pub file: Option<PathBuf>,
    /// The kernel: its launch site in FILE gives the template arguments
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
    /// The instantiation itself, e.g. 'gemm_mma_sync<128, 128, 32, 3>' (arguments may
    /// name the file's constants and -D macros)
    #[arg(long, value_name = "NAME<ARGS>")]
    template: Option<String>,
    /// A macro for folding and for the build: NAME or NAME=VALUE
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    defines: Vec<String>,
    /// An include folder for the build (FILE's own folder is always added)
    #[arg(short = 'I', value_name = "DIR")]
    includes: Vec<PathBuf>,
    /// The production build's compile_commands.json: FILE's entry gives the includes,
    /// defines, standard, architecture and code-generation flags (-D, -I, --std and
    /// --arch given here come on top)
    #[arg(short = 'p', long = "compile-commands", value_name = "JSON")]
    compile_commands: Option<PathBuf>,
    /// A build log that shows the production nvcc command (a JIT system's log, a
    /// verbose make transcript): the command naming FILE, else the log's only nvcc
    /// command, gives the flags as -p would (relative paths from the current folder)
    #[arg(long, value_name = "LOG", conflicts_with = "compile_commands")]
    flags_from: Option<PathBuf>,
    /// A code-generation flag of the production build, passed to nvcc as given
    /// (`--nvcc-flag=--expt-relaxed-constexpr`, as CUTLASS's own build passes); on top
    /// of those -p or --flags-from give
    #[arg(long = "nvcc-flag", value_name = "FLAG", allow_hyphen_values = true)]
    nvcc_flags: Vec<String>,
    /// The C++ standard of the build [default: the database's, else c++17]
    #[arg(long)]
    std: Option<String>,
    /// The GPU architecture of the build [default: the database's first, else sm_90a]
    #[arg(long)]
    arch: Option<String>,
    /// For a task of a megakernel (a device function the kernel dispatches to from a
    /// task list): a field of the tasks kwb builds, FIELD=VALUE. VALUE is an operand
    /// (A, B, C, D, bias), a problem scalar (alpha, beta, M, N, K), the task's output
    /// tile origin (m0, n0), a TMA descriptor of an operand encoded by the file's own
    /// encoding function for a type (tma(A, TYPE)) or for the type the launcher
    /// encodes the field's map with for tasks of this type (tma(A)), or a C++
    /// expression
    #[arg(long = "task", value_name = "FIELD=VALUE")]
    task: Vec<String>,
    /// For a task of a megakernel: the output tile one task computes, ROWS,COLUMNS
    #[arg(long, value_name = "ROWS,COLUMNS", value_parser = parse_tile)]
    task_tile: Option<(i64, i64)>,
    /// For a task of a megakernel: CTAs of the launch [default: 1, one CTA runs every
    /// task in turn, so what a task leaves for the next is exercised]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    task_ctas: Option<u32>,
    /// A parameter of the launcher a reproducer through the launcher calls,
    /// NAME=VALUE. VALUE is an operand (A, B, C, D, bias), a problem field (M, N, K,
    /// lda, ldb, ldc, ldd, alpha, beta) or a C++ expression. With `kwb diagnose … -- CMD`: a
    /// parameter of the kernel and its role (A, B, C, D, bias, M, N, K, lda, ldb,
    /// ldc, ldd, alpha, beta), where its name does not say
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    bind: Vec<String>,
    /// The operands' layouts, each operand's dimensions with the contiguous one last:
    /// A=mk|km, B=nk|kn, C and D=mn|nm (e.g. A=km,B=kn,D=nm) [default: the launcher's
    /// contract (BLAS transpose characters), else A and B K-contiguous, D row-major]
    #[arg(long, value_name = "A=..,B=..,D=..")]
    layout: Option<String>,
    /// Reproduce through the launcher (the whole file, main renamed, and an entry that
    /// calls the launcher) even where the kernel's own arguments could be built
    #[arg(long, conflicts_with = "alone")]
    through: bool,
    /// The kernel alone, never through its launcher
    #[arg(long)]
    alone: bool,
    /// The Nth (from 1) of the instantiations the file's launch sites use, where
    /// they use several (the kernel alone), or of the calls that run a library GEMM
    /// through the program's own harness [default: the one the launcher `main` calls
    /// reaches; a harness's first call]
    #[arg(long, value_name = "N", conflicts_with_all = ["template", "through"])]
    instance: Option<usize>,
}

fn parse_tile(text: &str) -> Result<(i64, i64), String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    match parts.as_slice() {
        [r, c] => match (r.parse::<i64>(), c.parse::<i64>()) {
            (Ok(r), Ok(c)) if r > 0 && c > 0 => Ok((r, c)),
            _ => Err(format!("`{text}`: two positive integers, ROWS,COLUMNS")),
        },
        _ => Err(format!("`{text}`: write it as ROWS,COLUMNS, e.g. 16,64")),
    }
}

impl Target {
    /// The kernel's name: `--kernel`, else the name `--template` instantiates.
    pub fn kernel_name(&self) -> Option<String> {
        self.kernel.clone().or_else(|| {
            self.template
                .as_deref()
                .map(|t| t.split('<').next().unwrap_or(t).trim().to_owned())
        })
    }

    /// `--bind` as given, each split at its first `=` (`None` for one without).
    pub fn bindings(&self) -> Vec<Option<(String, String)>> {
        self.bind
            .iter()
            .map(|b| {
                b.split_once('=')
                    .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            })
            .collect()
    }

    /// `--bind` as written.
    pub fn bindings_raw(&self) -> &[String] {
        &self.bind
    }

    /// `--layout` as given.
    pub fn layout(&self) -> Option<&str> {
        self.layout.as_deref()
    }
}

/// Extracts `target` into `output` (repro.cu, kwb.toml, build.sh: all three or none).
/// A failure is rendered on stderr and returned as the exit code.
pub fn extract_to(target: &Target, output: &Path) -> Result<Extraction, i32> {
    let Some(file) = target.file.as_deref() else {
        render::error(Report::msg(
            "which file? name the source that defines and launches the kernel",
        ));
        return Err(exit::INPUT);
    };
    let source = match read_source(file, DEFAULT_MAX_BYTES) {
        Ok(s) => s,
        Err(e) => {
            render::error(Report::new(e));
            return Err(exit::INPUT);
        }
    };
    const FILES: [&str; 4] = ["repro.cu", "kwb.toml", "build.sh", "includes.txt"];
    if let Some(path) = FILES
        .iter()
        .map(|name| output.join(name))
        .find(|path| crate::output::same_file(file, path))
    {
        render::error(Report::msg(format!(
            "{} would overwrite the input file; choose another output folder",
            path.display()
        )));
        return Err(exit::INPUT);
    }
    let read_flags = |path: &PathBuf, from_log: bool| {
        std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                if from_log {
                    let here = std::env::current_dir().unwrap_or_default();
                    kwb_extract::compile_db::flags_from_log(&text, file, &here)
                } else {
                    kwb_extract::compile_db::flags_for(&text, file)
                }
                .map_err(|e| e.to_string())
            })
    };
    let source_of_flags = target
        .compile_commands
        .as_ref()
        .map(|p| (p, false))
        .or(target.flags_from.as_ref().map(|p| (p, true)));
    let db_flags = match source_of_flags {
        None => kwb_extract::compile_db::BuildFlags::default(),
        Some((path, from_log)) => match read_flags(path, from_log) {
            Ok(f) => f,
            Err(why) => {
                render::error(Report::msg(format!("{}: {why}", path.display())));
                return Err(exit::INPUT);
            }
        },
    };
    let defines: Vec<(String, String)> = db_flags
        .defines
        .iter()
        .chain(&target.defines)
        .map(|d| match d.split_once('=') {
            Some((n, v)) => (n.trim().to_owned(), v.trim().to_owned()),
            None => (d.trim().to_owned(), "1".to_owned()),
        })
        .collect();
    let mut bindings = Vec::new();
    for b in &target.task {
        match b.split_once('=') {
            Some((f, v)) if !f.trim().is_empty() && !v.trim().is_empty() => {
                bindings.push((f.trim().to_owned(), v.trim().to_owned()));
            }
            _ => {
                render::error(Report::new(ExtractError::BadTaskBinding {
                    binding: b.clone(),
                    why: "write it as FIELD=VALUE".to_owned(),
                }));
                return Err(exit::INPUT);
            }
        }
    }
    let mut binds = Vec::new();
    for b in &target.bind {
        match b.split_once('=') {
            Some((n, v)) if !n.trim().is_empty() && !v.trim().is_empty() => {
                binds.push((n.trim().to_owned(), v.trim().to_owned()));
            }
            _ => {
                render::error(Report::msg(format!(
                    "--bind {b}: write it as NAME=VALUE (a launcher parameter and an operand, a problem field or a C++ expression)"
                )));
                return Err(exit::INPUT);
            }
        }
    }
    let request = Request {
        binds,
        layout: target.layout.clone(),
        through: target.through,
        alone: target.alone,
        instance: target.instance,
        kernel: target.kernel.clone(),
        template: target.template.clone(),
        defines: defines.clone(),
        file_name: file.display().to_string(),
        task: kwb_extract::TaskRequest {
            bindings,
            tile: target.task_tile,
            ctas: target.task_ctas,
        },
    };
    let x = match kwb_extract::extract(&source, &request) {
        Ok(x) => x,
        Err(e) => {
            // A kernel compiled in another translation unit: name the files beside
            // this one that define it.
            let e = match e {
                ExtractError::DefinedElsewhere { name, line, .. } => {
                    let definers = definers_beside(file, &name);
                    ExtractError::DefinedElsewhere {
                        name,
                        line,
                        definers,
                    }
                }
                e => e,
            };
            let code = match e {
                ExtractError::UnknownKernel { .. }
                | ExtractError::DefinedElsewhere { .. }
                | ExtractError::NoArguments { .. }
                | ExtractError::LocalAdapter { .. }
                | ExtractError::OwnBuffers { .. }
                | ExtractError::Harness { .. } => exit::NO_KERNEL,
                _ => exit::INPUT,
            };
            render::error(Report::new(e));
            return Err(code);
        }
    };
    let mut includes: Vec<PathBuf> = file.parent().map(Path::to_path_buf).into_iter().collect();
    includes.extend(db_flags.includes.iter().map(PathBuf::from));
    includes.extend(target.includes.iter().cloned());
    let includes: Vec<String> = includes
        .iter()
        .map(|p| {
            let p = if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            };
            p.canonicalize()
                .unwrap_or_else(|_| p.to_path_buf())
                .display()
                .to_string()
        })
        .collect();
    let build = Build {
        std: target
            .std
            .clone()
            .or(db_flags.std.clone())
            .unwrap_or_else(|| "c++17".to_owned()),
        arch: target
            .arch
            .clone()
            .or(db_flags.arches.first().cloned())
            .unwrap_or_else(|| "sm_90a".to_owned()),
        defines: defines.iter().map(|(n, v)| format!("{n}={v}")).collect(),
        includes,
        other: db_flags
            .other
            .iter()
            .chain(&target.nvcc_flags)
            .cloned()
            .collect(),
        from: match source_of_flags {
            None => "command line".to_owned(),
            Some((p, false)) => format!("{} and the command line", p.display()),
            Some((p, true)) => format!("the build log {} and the command line", p.display()),
        },
    };
    let mut script_build = build.clone();
    // A reproducer that reads its kernel's maps at the launch links in front of the
    // runtime's launch entries (ignored by a `-c` build).
    if x.repro.contains(kwb_extract::WRAPPER) {
        for symbol in kwb_extract::LAUNCH_ENTRIES_WRAPPED {
            script_build.other.push(format!("-Xlinker=--wrap={symbol}"));
        }
    }
    let script = build_script(&script_build);
    let include_list: String = build.includes.iter().map(|i| format!("{i}\n")).collect();
    let toml_text = Manifest::new(&x, &request.file_name, build).to_toml();
    // The headers the reproducer includes from beside the source travel with it.
    let headers = file
        .parent()
        .map(|folder| {
            let folder = if folder.as_os_str().is_empty() {
                Path::new(".")
            } else {
                folder
            };
            crate::local_headers::local_headers(folder, &x.repro)
        })
        .unwrap_or_default();
    // All the files or none.
    let mut files: Vec<(PathBuf, &String)> = FILES
        .iter()
        .map(|name| output.join(name))
        .zip([&x.repro, &toml_text, &script, &include_list])
        .collect();
    files.extend(headers.iter().map(|(path, text)| (output.join(path), text)));
    let written = std::fs::create_dir_all(output).and_then(|()| {
        for (path, _) in &files {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
        }
        crate::output::write_all_atomically(&files).map_err(|(_, e)| e)?;
        make_executable(&output.join("build.sh"))
    });
    if let Err(source) = written {
        render::error(Report::new(crate::error::CliError::Unwritable {
            path: output.to_path_buf(),
            source,
        }));
        return Err(exit::INPUT);
    }
    Ok(x)
}

/// `build.sh`: nvcc with the extraction's flags, every argument single-quoted. It names
/// no path of the machine that wrote it: the include folders are this folder (the
/// local headers are copied in) and `KWB_INCLUDES` (colon-separated), else the lines
/// of `includes.txt` (the folders the reproducer was written with).
fn build_script(b: &Build) -> String {
    let mut flags = vec![format!("-std={}", b.std), format!("-arch={}", b.arch)];
    // The production build's optimization level, else -O3.
    if !b.other.iter().any(|o| o.starts_with("-O")) {
        flags.push("-O3".to_owned());
    }
    flags.extend(b.other.iter().cloned());
    flags.extend(b.defines.iter().map(|d| format!("-D{d}")));
    let quoted: Vec<String> = flags.iter().map(|f| quote(f)).collect();
    format!(
        "#!/bin/sh\n# build.sh: compiles repro.cu with the flags kwb-extract was given (NVCC overrides the compiler;\n# extra arguments are passed on, e.g. ./build.sh -cubin -o repro.cubin). Include folders: this\n# one (the headers repro.cu includes from beside its source are copied here), then\n# KWB_INCLUDES (colon-separated, where the include roots are on this machine), else the\n# folders in includes.txt, as they were where the reproducer was written.\nset -eu\nset -f\ncd \"$(dirname \"$0\")\"\nif [ \"$#\" -eq 0 ]; then set -- -c -o repro.o; fi\nfor kwb_flag in {}; do set -- \"$@\" \"$kwb_flag\"; done\nset -- \"$@\" -I.\nif [ -n \"${{KWB_INCLUDES:-}}\" ]; then\n  kwb_ifs=$IFS; IFS=:\n  for kwb_dir in $KWB_INCLUDES; do set -- \"$@\" \"-I$kwb_dir\"; done\n  IFS=$kwb_ifs\nelif [ -f includes.txt ]; then\n  while IFS= read -r kwb_dir; do [ -z \"$kwb_dir\" ] || set -- \"$@\" \"-I$kwb_dir\"; done < includes.txt\nfi\nexec \"${{NVCC:-nvcc}}\" repro.cu \"$@\"\n",
        quoted.join(" ")
    )
}

/// `text` as one shell word: single quotes, with `'` written `'\''`.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(unix)]
fn make_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut p = std::fs::metadata(path)?.permissions();
    p.set_mode(p.mode() | 0o111);
    std::fs::set_permissions(path, p)
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}

/// The files in `file`'s folder that define the `__global__` function `name` (a
/// `name(` whose parameter list is followed by a body), as the sentence a refusal
/// carries. Only the folder itself is read, sources of at most 8 MB.
fn definers_beside(file: &Path, name: &str) -> String {
    let short = name.rsplit("::").next().unwrap_or(name);
    let folder = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut found: Vec<String> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|p| p != file)
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "cu" | "cuh" | "h" | "hpp" | "cpp" | "cc"))
        })
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() <= 8 << 20))
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|text| defines_kernel(&text, short)))
        .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_owned))
        .collect();
    found.sort();
    match found.as_slice() {
        [] => "No file beside this one defines it; find the one that does. ".to_owned(),
        [one] => format!("`{one}`, beside this file, defines it. "),
        many => format!(
            "Files beside this one that define it: {}. ",
            many.iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Whether `text` defines the `__global__` function `name`: an occurrence of
/// `name(` after which a `{` comes before any `;`.
fn defines_kernel(text: &str, name: &str) -> bool {
    if !text.contains("__global__") {
        return false;
    }
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            return false;
        }
        let rest = text[at + name.len()..].trim_start();
        rest.starts_with('(')
            && rest
                .find(['{', ';'])
                .is_some_and(|i| rest.as_bytes()[i] == b'{')
    })
}
