//! The binaries kwb ships and the clap command each parses with: what completions
//! and man pages are generated from.

use clap::{CommandFactory, ValueEnum};

use crate::commands::{extract, instrument};

/// The binaries a completion script can be for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Binary {
    Kwb,
    KwbInstrument,
    KwbExtract,
}

/// The clap command of `binary`.
pub fn command(binary: Binary) -> clap::Command {
    match binary {
        Binary::Kwb => crate::cli::Cli::command(),
        Binary::KwbInstrument => instrument::Args::command(),
        Binary::KwbExtract => extract::Args::command(),
    }
}

/// Every binary's clap command, by its name.
pub fn all() -> Vec<clap::Command> {
    vec![
        crate::cli::Cli::command(),
        instrument::Args::command(),
        extract::Args::command(),
        nvcc_command(),
    ]
}

/// `kwb-nvcc` passes its arguments through to nvcc unparsed; this command describes
/// it for its man page only.
pub fn nvcc_command() -> clap::Command {
    clap::Command::new("kwb-nvcc")
        .version(env!("CARGO_PKG_VERSION"))
        .about("The precompile hook: instrument a CUDA translation unit inside a real build (CMake, Make, PyTorch extensions, JITs)")
        .long_about(format!(
            "As a compiler launcher: `kwb-nvcc nvcc ARGS…` (CMAKE_CUDA_COMPILER_LAUNCHER=kwb-nvcc, NVCC=\"kwb-nvcc nvcc\"). \
             As a drop-in nvcc: set KWB_NVCC_REAL to the real nvcc and call kwb-nvcc with nvcc's arguments (PYTORCH_NVCC, a JIT's compiler path).\n\n\
             Without KWB_TRACE it runs the real nvcc with the same arguments and environment and writes no file of its own. \
             With KWB_TRACE='key=value;…' (or KWB_TRACE=@FILE, one pair a line) it instruments the translation unit and the headers that hold a targeted site \
             into a cached overlay folder put first on the include path, adds -DKWB_TRACE and compiles; #line keeps nvcc's messages on the original files. \
             With KWB_INSITU_KERNEL=NAME (kwb diagnose --kernel NAME -- CMD sets it) it rewrites that kernel's launch statements so the program can run one on kwb's inputs and compiles without -DKWB_TRACE. \
             Keys: {}. An unknown key, a target that is not in the translation unit or a missing real nvcc fails the build (exit 2) rather than building without probes.",
            kwb_hook::spec::KEYS
        ))
        .arg(
            clap::Arg::new("nvcc-args")
                .value_name("ARGS")
                .num_args(0..)
                .trailing_var_arg(true)
                .allow_hyphen_values(true)
                .help("The real nvcc (as a launcher) and its arguments, passed through"),
        )
}
