//! The errors of kwb-toolchain.

use std::path::PathBuf;

/// Everything that can go wrong while finding or running the toolchain.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum Error {
    #[error("no cache folder: KWB_CACHE_DIR, XDG_CACHE_HOME and HOME are all unset")]
    #[diagnostic(
        code(kwb::toolchain::no_cache_dir),
        help("set KWB_CACHE_DIR to a writable folder")
    )]
    NoCacheDir,

    #[error("nvcc not found")]
    #[diagnostic(
        code(kwb::toolchain::nvcc_not_found),
        help("run `cargo xtask setup`, or set KWB_CUDA_HOME")
    )]
    NvccNotFound,

    #[error("{var} has no bin/nvcc: {}", home.display())]
    #[diagnostic(
        code(kwb::toolchain::bad_cuda_home),
        help("point {var} at a CUDA home that holds bin/nvcc, or unset it")
    )]
    BadCudaHome { var: &'static str, home: PathBuf },

    #[error("no cuobjdump next to nvcc in {}", bin.display())]
    #[diagnostic(
        code(kwb::toolchain::cuobjdump_not_found),
        help(
            "install cuobjdump into that CUDA home, or run `cargo xtask setup` and set KWB_CUDA_HOME"
        )
    )]
    CuobjdumpNotFound { bin: PathBuf },

    #[error("CUTLASS headers not found")]
    #[diagnostic(
        code(kwb::toolchain::cutlass_not_found),
        help("run `cargo xtask setup`, or set KWB_CUTLASS_DIR")
    )]
    CutlassNotFound,

    #[error("KWB_CUTLASS_DIR has no cutlass/ and cute/: {}", dir.display())]
    #[diagnostic(
        code(kwb::toolchain::bad_cutlass_dir),
        help("point KWB_CUTLASS_DIR at the `include` folder of a CUTLASS checkout")
    )]
    BadCutlassDir { dir: PathBuf },

    #[error("cannot run {tool}: {}", program.display())]
    #[diagnostic(
        code(kwb::toolchain::spawn),
        help("check that the file exists and is executable, or run `cargo xtask setup`")
    )]
    Spawn {
        tool: &'static str,
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{tool} failed ({status})")]
    #[diagnostic(
        code(kwb::toolchain::tool_failed),
        help("read {tool}'s messages below")
    )]
    ToolFailed {
        tool: &'static str,
        status: std::process::ExitStatus,
        #[source]
        stderr: Stderr,
    },

    #[error("{tool} printed output that is not UTF-8")]
    #[diagnostic(
        code(kwb::toolchain::not_utf8),
        help("check the input file's encoding; kwb reads UTF-8 only")
    )]
    NotUtf8 { tool: &'static str },

    #[error("unexpected output from {tool}: {output}")]
    #[diagnostic(
        code(kwb::toolchain::unexpected_output),
        help("check that {tool} belongs to a CUDA toolchain, or run `cargo xtask setup`")
    )]
    UnexpectedOutput { tool: &'static str, output: String },

    #[error("nvcc would run `{character}` in {what} {} through its own shell", path.display())]
    #[diagnostic(
        code(kwb::toolchain::unsafe_path),
        help(
            "nvcc hands paths to its sub-steps inside a shell's double quotes, where $, ` and \" act; kwb never lets a path do that: move or rename it"
        )
    )]
    UnsafePath {
        what: &'static str,
        path: PathBuf,
        character: char,
    },

    #[error("cannot write {}", path.display())]
    #[diagnostic(
        code(kwb::toolchain::io),
        help("check that the folder exists and is writable")
    )]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What a failed tool wrote to stderr, kept whole; the source of
/// [`Error::ToolFailed`], so that reports print it under the short message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Stderr(pub String);
