//! Errors the CLI reports about its inputs.

use std::path::PathBuf;

use miette::Diagnostic;
use thiserror::Error;

/// A problem with an input file or argument.
#[derive(Debug, Error, Diagnostic)]
pub enum CliError {
    #[error("cannot read {path}: {source}")]
    #[diagnostic(code(kwb::cli::unreadable), help("check the path and its permissions"))]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write into {path}: {source}")]
    #[diagnostic(
        code(kwb::cli::unwritable),
        help("check that the folder can be created and written")
    )]
    Unwritable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no full tiles")]
    #[diagnostic(
        code(kwb::cli::no_tiles),
        help(
            "instrument with `kwb-instrument --full-tile --cta X,Y,Z`, rebuild with -DKWB_TRACE and run again"
        )
    )]
    NoTiles { path: PathBuf },
    #[error("{path} is a directory")]
    #[diagnostic(
        code(kwb::cli::is_directory),
        help("pass source files; `kwb parse-stats DIR` walks a directory")
    )]
    Directory { path: PathBuf },
    #[error("{path} is empty")]
    #[diagnostic(code(kwb::cli::empty), help("pass a CUDA/C++ source file"))]
    Empty { path: PathBuf },
    #[error("{path} looks binary (NUL byte at offset {offset})")]
    #[diagnostic(
        code(kwb::cli::binary),
        help("pass a CUDA/C++ source file, not an object or archive")
    )]
    Binary { path: PathBuf, offset: usize },
    #[error("{path} is not UTF-8 (invalid byte at offset {offset})")]
    #[diagnostic(
        code(kwb::cli::not_utf8),
        help("convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`")
    )]
    NotUtf8 { path: PathBuf, offset: usize },
    #[error("{path} is {size} bytes, over the {limit}-byte limit")]
    #[diagnostic(
        code(kwb::cli::too_large),
        help("raise the limit with --max-bytes if this really is one source file")
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("no kernel-like function in {path}")]
    #[diagnostic(
        code(kwb::cli::no_kernel),
        help(
            "kwb reports __global__ functions and functions with MMA, load, epilogue, TMA or sync sites; add a pattern with --patterns for in-house macros"
        )
    )]
    NoKernel { path: PathBuf },
    #[error(
        "no kernel-like function found in {path}, which has {regions} syntax error regions (lines {lines})"
    )]
    #[diagnostic(
        code(kwb::cli::no_kernel_in_errors),
        help(
            "a kernel inside an error region cannot be mapped: check the braces and macros near those lines (`kwb dump-tree` shows what the parser saw)"
        )
    )]
    NoKernelInErrors {
        path: PathBuf,
        regions: usize,
        lines: String,
    },
    #[error("no kernel named `{name}` in {path}")]
    #[diagnostic(code(kwb::cli::unknown_kernel), help("kernels here: {available}"))]
    UnknownKernel {
        name: String,
        path: PathBuf,
        available: String,
    },
}
