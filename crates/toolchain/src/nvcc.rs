//! Running nvcc and cuobjdump.
//!
//! Every tool is spawned directly with [`std::process::Command`], one argument per
//! argument, never through a shell. The toolchain's `bin` folder goes first on the
//! child's `PATH`, so that nvcc finds its own helpers and `cuobjdump -sass` finds
//! `nvdisasm`. The pip toolchain's `nvcc.profile` already adds its `include` and
//! `include/cccl` folders, so no extra `-I` is needed for it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Error, Result, Stderr, Toolchain};

/// The flags of one nvcc invocation, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileFlags {
    /// The GPU architecture, passed as `-arch=<arch>`, e.g. `sm_90a`.
    pub arch: String,
    /// The C++ standard, passed as `-std=<std>`, e.g. `c++17`.
    pub std: String,
    /// Include folders, each passed as `-I <dir>`, in order.
    pub includes: Vec<PathBuf>,
    /// Macro definitions, each passed as `-D<define>`: `NAME` or `NAME=value`.
    pub defines: Vec<String>,
    /// Further arguments, passed last, as they are.
    pub extra: Vec<String>,
    /// Whether an object or executable also carries PTX. nvcc's `-arch=sm_90a` embeds
    /// the `compute_90a` PTX and, since CUDA 13, compiles the portable `compute_90`
    /// PTX too: a second front-end pass, about a sixth of a CUTLASS build. `false`
    /// passes `-gencode=arch=compute_90a,code=sm_90a` instead: the `sm_90a` SASS
    /// alone, for a build that only runs on (or is only inspected for) that GPU. An
    /// `arch` that is not `sm_*` is passed as `-arch` either way; `-cubin` and `-E`
    /// compile one pass regardless.
    pub ptx: bool,
}

impl Default for CompileFlags {
    /// Hopper (`sm_90a`) and C++17, which CUTLASS 4 needs; no includes or defines.
    fn default() -> Self {
        CompileFlags {
            arch: "sm_90a".to_owned(),
            std: "c++17".to_owned(),
            includes: Vec::new(),
            defines: Vec::new(),
            extra: Vec::new(),
            ptx: true,
        }
    }
}

/// The version of the toolchain's nvcc, e.g. `13.5.37`.
pub fn nvcc_version(toolchain: &Toolchain) -> Result<String> {
    let mut command = tool_command(toolchain, &toolchain.nvcc);
    command.arg("--version");
    let output = run("nvcc", command)?;
    parse_version(&output)
        .map(str::to_owned)
        .ok_or_else(|| Error::UnexpectedOutput {
            tool: "nvcc",
            output: output.trim().to_owned(),
        })
}

/// Preprocesses `file` with `nvcc -E` and returns the preprocessed text. With one
/// `-arch` this is the device pass: `__CUDA_ARCH__` is defined (900 for `sm_90a`).
pub fn preprocess(toolchain: &Toolchain, file: &Path, flags: &CompileFlags) -> Result<String> {
    paths_safe(file, None, flags)?;
    let mut command = tool_command(toolchain, &toolchain.nvcc);
    command.arg("-E").args(flag_args(flags)).arg(file);
    run("nvcc", command)
}

/// Compiles `file` into the object file `out` with `nvcc -c`. On failure the error
/// holds everything nvcc wrote to stderr.
pub fn compile_object(
    toolchain: &Toolchain,
    file: &Path,
    flags: &CompileFlags,
    out: &Path,
) -> Result<()> {
    compile(toolchain, file, flags, out, &["-c"])
}

/// Compiles and links `file` into the executable `out` (nvcc links the CUDA runtime
/// statically by default). On failure the error holds nvcc's stderr.
pub fn compile_executable(
    toolchain: &Toolchain,
    file: &Path,
    flags: &CompileFlags,
    out: &Path,
) -> Result<()> {
    compile(toolchain, file, flags, out, &[])
}

/// Compiles and links `file` into the shared library `out` (position-independent
/// host code, the CUDA runtime linked statically), for a runner that loads it with
/// `dlopen`. On failure the error holds nvcc's stderr.
pub fn compile_shared_library(
    toolchain: &Toolchain,
    file: &Path,
    flags: &CompileFlags,
    out: &Path,
) -> Result<()> {
    compile(
        toolchain,
        file,
        flags,
        out,
        &["-shared", "-Xcompiler", "-fPIC"],
    )
}

/// Compiles the device code of `file` into the PTX `out` (`nvcc -ptx`): what ptxas is
/// given, for comparing two builds where ptxas itself varies. On failure the error
/// holds nvcc's stderr.
pub fn compile_ptx(
    toolchain: &Toolchain,
    file: &Path,
    flags: &CompileFlags,
    out: &Path,
) -> Result<()> {
    compile(toolchain, file, flags, out, &["-ptx"])
}

/// Compiles the device code of `file` into the cubin `out` (`nvcc -cubin`), for a
/// runner that loads it as a module. On failure the error holds nvcc's stderr.
pub fn compile_cubin(
    toolchain: &Toolchain,
    file: &Path,
    flags: &CompileFlags,
    out: &Path,
) -> Result<()> {
    compile(toolchain, file, flags, out, &["-cubin"])
}

/// Refuses a path nvcc would hand to a shell with a character that acts inside its
/// double quotes (`$`, a backquote, `"`, a backslash): nvcc runs its sub-steps through
/// `sh -c`, so such a path would run a command or break the quoting.
pub fn shell_safe(what: &'static str, path: &Path) -> Result<()> {
    let text = path.to_string_lossy();
    match text.chars().find(|c| matches!(c, '$' | '`' | '"' | '\\')) {
        Some(character) => Err(Error::UnsafePath {
            what,
            path: path.to_path_buf(),
            character,
        }),
        None => Ok(()),
    }
}

/// [`shell_safe`] on every path an nvcc run is handed: the source, the output and
/// the include folders.
fn paths_safe(file: &Path, out: Option<&Path>, flags: &CompileFlags) -> Result<()> {
    shell_safe("the source", file)?;
    if let Some(out) = out {
        shell_safe("the output", out)?;
    }
    for include in &flags.includes {
        shell_safe("the include folder", include)?;
    }
    Ok(())
}

fn compile(
    toolchain: &Toolchain,
    file: &Path,
    flags: &CompileFlags,
    out: &Path,
    mode: &[&str],
) -> Result<()> {
    paths_safe(file, Some(out), flags)?;
    let mut command = tool_command(toolchain, &toolchain.nvcc);
    command
        .args(mode)
        .args(flag_args(flags))
        .arg(file)
        .arg("-o")
        .arg(out);
    run("nvcc", command).map(drop)
}

/// The SASS of every kernel in the object file `object`, from `cuobjdump -sass`.
pub fn sass(toolchain: &Toolchain, object: &Path) -> Result<String> {
    let mut command = tool_command(toolchain, &toolchain.cuobjdump);
    command.arg("-sass").arg(object);
    run("cuobjdump", command)
}

/// The instructions of `cuobjdump -sass` output, one per line, without their addresses
/// and encodings: what two builds are compared by, since nvcc objects are not
/// bit-reproducible but their SASS is.
pub fn sass_instructions(sass: &str) -> String {
    sass.lines()
        .filter_map(|line| {
            let (address, rest) = line.trim().strip_prefix("/*")?.split_once("*/")?;
            // The trailing `/* 0x… */` is the instruction's encoding.
            let instruction = rest.rsplit_once("/*").map_or(rest, |(text, _)| text);
            address
                .chars()
                .all(|c| c.is_ascii_hexdigit())
                .then(|| instruction.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The resources of every kernel in `binary` (an object or executable), from
/// `cuobjdump -res-usage`: per function, registers, stack, shared, local (spill)
/// and constant memory.
pub fn resource_usage(toolchain: &Toolchain, binary: &Path) -> Result<String> {
    let mut command = tool_command(toolchain, &toolchain.cuobjdump);
    command.arg("-res-usage").arg(binary);
    run("cuobjdump", command)
}

/// The nvcc arguments for `flags`, one element per argument.
fn flag_args(flags: &CompileFlags) -> Vec<OsString> {
    let arch = match flags.arch.strip_prefix("sm_") {
        Some(number) if !flags.ptx => format!("-gencode=arch=compute_{number},code=sm_{number}"),
        _ => format!("-arch={}", flags.arch),
    };
    let mut args = vec![arch.into(), format!("-std={}", flags.std).into()];
    for include in &flags.includes {
        args.push("-I".into());
        args.push(include.into());
    }
    args.extend(
        flags
            .defines
            .iter()
            .map(|define| format!("-D{define}").into()),
    );
    args.extend(flags.extra.iter().map(OsString::from));
    args
}

/// A command for `program` whose `PATH` starts with the toolchain's `bin` folder.
fn tool_command(toolchain: &Toolchain, program: &Path) -> Command {
    let mut command = Command::new(program);
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(toolchain.bin().to_owned()).chain(std::env::split_paths(&inherited));
    // A folder holding the path separator cannot be put on PATH; keep the inherited one.
    if let Ok(path) = std::env::join_paths(dirs) {
        command.env("PATH", path);
    }
    command
}

/// Runs `command` to completion and returns its stdout.
fn run(tool: &'static str, mut command: Command) -> Result<String> {
    let output = command.output().map_err(|source| Error::Spawn {
        tool,
        program: PathBuf::from(command.get_program()),
        source,
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr)
            .trim_end()
            .to_owned();
        return Err(Error::ToolFailed {
            tool,
            status: output.status,
            stderr: Stderr(stderr),
        });
    }
    String::from_utf8(output.stdout).map_err(|_| Error::NotUtf8 { tool })
}

/// The version in `nvcc --version`'s `Cuda compilation tools, release 13.5, V13.5.37`.
fn parse_version(text: &str) -> Option<&str> {
    let line = text.lines().find(|line| line.contains("release"))?;
    let (_, version) = line.rsplit_once(", V")?;
    let version = version.trim();
    (!version.is_empty()).then_some(version)
}

#[cfg(test)]
mod tests {

    #[test]
    fn sass_instructions_drop_addresses_and_encodings() {
        let dump = "\t\tFunction : k\n        /*0000*/                   LDC R1, c[0x0][0x28] ;          /* 0x00000a00ff017b82 */\n                                                                     /* 0x000fe40000000800 */\n        /*0010*/                   EXIT ;                          /* 0x000000000000794d */\n";
        assert_eq!(sass_instructions(dump), "LDC R1, c[0x0][0x28] ;\nEXIT ;");
    }
    use super::*;

    #[test]
    fn flag_args_in_order() {
        let flags = CompileFlags {
            includes: vec!["/a b".into(), "/c".into()],
            defines: vec!["X".into(), "Y=1".into()],
            extra: vec!["-lineinfo".into()],
            ..CompileFlags::default()
        };
        let expected: Vec<OsString> = [
            "-arch=sm_90a",
            "-std=c++17",
            "-I",
            "/a b",
            "-I",
            "/c",
            "-DX",
            "-DY=1",
            "-lineinfo",
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        assert_eq!(flag_args(&flags), expected);
    }

    #[test]
    fn sass_only_builds_name_the_one_gpu_code() {
        let sass_only = |arch: &str| {
            let flags = CompileFlags {
                arch: arch.to_owned(),
                ptx: false,
                ..CompileFlags::default()
            };
            flag_args(&flags)[0].clone()
        };
        assert_eq!(sass_only("sm_90a"), "-gencode=arch=compute_90a,code=sm_90a");
        assert_eq!(sass_only("sm_80"), "-gencode=arch=compute_80,code=sm_80");
        // A virtual architecture has no SASS to keep alone.
        assert_eq!(sass_only("compute_90"), "-arch=compute_90");
    }

    #[test]
    fn parses_nvcc_version() {
        let text = "nvcc: NVIDIA (R) Cuda compiler driver\n\
                    Copyright (c) 2005-2026 NVIDIA Corporation\n\
                    Cuda compilation tools, release 13.5, V13.5.37\n\
                    Build cuda_13.5.r13.5/compiler.39125733_0\n";
        assert_eq!(parse_version(text), Some("13.5.37"));
        assert_eq!(parse_version("nvcc: something else\n"), None);
    }

    #[test]
    fn child_path_starts_with_the_toolchain_bin() {
        let toolchain = Toolchain {
            home: "/cuda".into(),
            nvcc: "/cuda/bin/nvcc".into(),
            cuobjdump: "/cuda/bin/cuobjdump".into(),
            nvdisasm: None,
            source: crate::Discovery::KwbCudaHome,
        };
        let command = tool_command(&toolchain, &toolchain.cuobjdump);
        let path = command
            .get_envs()
            .find(|(name, _)| *name == "PATH")
            .and_then(|(_, value)| value)
            .expect("PATH is set");
        assert_eq!(
            std::env::split_paths(path).next(),
            Some(PathBuf::from("/cuda/bin"))
        );
    }

    #[test]
    fn missing_tool_is_a_spawn_error() {
        let temp = tempfile::tempdir().unwrap();
        let toolchain = Toolchain {
            home: temp.path().into(),
            nvcc: temp.path().join("bin/nvcc"),
            cuobjdump: temp.path().join("bin/cuobjdump"),
            nvdisasm: None,
            source: crate::Discovery::KwbCudaHome,
        };
        let err = nvcc_version(&toolchain).unwrap_err();
        assert!(matches!(err, Error::Spawn { tool: "nvcc", .. }), "{err:?}");
    }

    #[test]
    fn a_path_nvcc_would_expand_is_refused_before_nvcc_runs() {
        let toolchain = Toolchain {
            home: "/nonexistent".into(),
            nvcc: "/nonexistent/bin/nvcc".into(),
            cuobjdump: "/nonexistent/bin/cuobjdump".into(),
            nvdisasm: None,
            source: crate::Discovery::KwbCudaHome,
        };
        let flags = CompileFlags::default();
        for bad in ["a$(touch pwned)/k.cu", "a`id`.cu", "a\"b.cu", "a\\b.cu"] {
            let err =
                compile_object(&toolchain, Path::new(bad), &flags, Path::new("k.o")).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::UnsafePath {
                        what: "the source",
                        ..
                    }
                ),
                "{bad}: {err:?}"
            );
        }
        let mut with_include = flags.clone();
        with_include.includes.push("inc$HOME".into());
        let err = compile_object(
            &toolchain,
            Path::new("k.cu"),
            &with_include,
            Path::new("k.o"),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                Error::UnsafePath {
                    what: "the include folder",
                    ..
                }
            ),
            "{err:?}"
        );
        // `nvcc -E` gets the same check as a compile.
        let err = preprocess(&toolchain, Path::new("k.cu"), &with_include).unwrap_err();
        assert!(
            matches!(
                err,
                Error::UnsafePath {
                    what: "the include folder",
                    ..
                }
            ),
            "{err:?}"
        );
        // Spaces, semicolons and single quotes are safe: nvcc quotes them.
        let err = compile_object(
            &toolchain,
            Path::new("my dir; 'x'/k.cu"),
            &flags,
            Path::new("k.o"),
        )
        .unwrap_err();
        assert!(matches!(err, Error::Spawn { .. }), "{err:?}");
    }
}
