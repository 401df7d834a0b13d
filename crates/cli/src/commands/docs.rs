//! `kwb completions SHELL [--bin NAME]` and `kwb man --out DIR`: shell completions
//! and man pages generated from the same clap definitions the binaries parse with,
//! so they cannot drift from the options.

use std::path::PathBuf;

use clap::{CommandFactory, ValueEnum};
use miette::Report;

use crate::commands::{extract, instrument};
use crate::error::CliError;
use crate::{exit, render};

/// The binaries a completion script can be for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Binary {
    Kwb,
    KwbInstrument,
    KwbExtract,
}

#[derive(clap::Args)]
pub struct CompletionArgs {
    /// The shell
    shell: clap_complete::Shell,
    /// The binary the script completes
    #[arg(long = "bin", value_enum, default_value = "kwb")]
    binary: Binary,
}

#[derive(clap::Args)]
pub struct ManArgs {
    /// The folder to write the pages into (section 1, one file per command; created
    /// if missing)
    #[arg(long, short = 'o', value_name = "DIR")]
    out: PathBuf,
}

/// Every binary's clap command, by its name.
fn commands() -> Vec<clap::Command> {
    vec![
        crate::cli::Cli::command(),
        instrument::Args::command(),
        extract::Args::command(),
        nvcc_command(),
    ]
}

/// `kwb-nvcc` passes its arguments through to nvcc unparsed; this command describes
/// it for its man page only.
fn nvcc_command() -> clap::Command {
    clap::Command::new("kwb-nvcc")
        .version(env!("CARGO_PKG_VERSION"))
        .about("The precompile hook: instrument a CUDA translation unit inside a real build (CMake, Make, PyTorch extensions, JITs)")
        .long_about(format!(
            "As a compiler launcher: `kwb-nvcc nvcc ARGS…` (CMAKE_CUDA_COMPILER_LAUNCHER=kwb-nvcc, NVCC=\"kwb-nvcc nvcc\"). \
             As a drop-in nvcc: set KWB_NVCC_REAL to the real nvcc and call kwb-nvcc with nvcc's arguments (PYTORCH_NVCC, a JIT's compiler path).\n\n\
             Without KWB_TRACE it runs the real nvcc with the same arguments and environment and writes no file of its own. \
             With KWB_TRACE='key=value;…' (or KWB_TRACE=@FILE, one pair a line) it instruments the translation unit and the headers that hold a targeted site \
             into a cached overlay folder put first on the include path, adds -DKWB_TRACE and compiles; #line keeps nvcc's messages on the original files. \
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

pub fn completions(args: &CompletionArgs) -> i32 {
    let mut command = match args.binary {
        Binary::Kwb => crate::cli::Cli::command(),
        Binary::KwbInstrument => instrument::Args::command(),
        Binary::KwbExtract => extract::Args::command(),
    };
    let name = command.get_name().to_owned();
    clap_complete::generate(args.shell, &mut command, name, &mut std::io::stdout());
    exit::OK
}

pub fn man(args: &ManArgs) -> i32 {
    let mut pages: Vec<(String, Vec<u8>)> = Vec::new();
    for command in commands() {
        let name = command.get_name().to_owned();
        if let Err(e) = page(&name, &command, &mut pages) {
            render::error(Report::new(CliError::Unwritable {
                path: args.out.join(format!("{name}.1")),
                source: e,
            }));
            return exit::INTERNAL;
        }
    }
    if let Err(source) = std::fs::create_dir_all(&args.out) {
        render::error(Report::new(CliError::Unwritable {
            path: args.out.clone(),
            source,
        }));
        return exit::INPUT;
    }
    // Every page or none.
    let files: Vec<_> = pages
        .iter()
        .map(|(file, bytes)| (args.out.join(file), bytes))
        .collect();
    if let Err((path, source)) = crate::output::write_all_atomically(&files) {
        render::error(Report::new(CliError::Unwritable { path, source }));
        return exit::INPUT;
    }
    let names: Vec<&str> = pages.iter().map(|(f, _)| f.as_str()).collect();
    println!(
        "wrote {} man pages in {}: {}",
        pages.len(),
        args.out.display(),
        names.join(", ")
    );
    exit::OK
}

/// The page of `command` named `name`, then one per visible subcommand
/// (`kwb-run.1`), depth first.
fn page(
    name: &str,
    command: &clap::Command,
    pages: &mut Vec<(String, Vec<u8>)>,
) -> std::io::Result<()> {
    let command = command.clone().name(name.to_owned());
    let mut bytes = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut bytes)?;
    pages.push((format!("{name}.1"), bytes));
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        page(&format!("{name}-{}", sub.get_name()), sub, pages)?;
    }
    Ok(())
}
