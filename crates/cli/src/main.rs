//! `kwb`: localize wrong numbers in CUDA/CUTLASS GEMM kernels.
//!
//! This binary holds argument parsing, rendering and exit codes only; the work
//! happens in the library crates.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use kwb_cli::commands;

#[derive(Parser)]
#[command(
    name = "kwb",
    version,
    about = "kernel white-box: localize wrong numbers in CUDA/CUTLASS GEMM kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The kernel map: mainloop, MMA, operands, accumulator, loads, epilogue, TMA
    /// descriptors and syncs of every kernel-like function
    Sites(commands::sites::Args),
    /// Read a trace written by an instrumented build
    #[command(subcommand)]
    Trace(TraceCommand),
    /// Track B's controlled inputs: write a rung's operands, check a kernel's output
    #[command(subcommand)]
    Ladder(LadderCommand),
    /// Track B: build a kwb-extract reproducer and run it on the controlled-input
    /// ladder on the GPU; exit 5 on a failed rung, 6 on a hang, 7 without a GPU
    Run(commands::run::Args),
    /// The GPU half of `kwb run`, started by it in its own process
    #[command(hide = true)]
    RunWorker {
        /// The job file `kwb run` wrote
        job: PathBuf,
    },
    /// ERROR/MISSING counts of parsing every C++/CUDA file under a directory
    ParseStats(commands::parse_stats::Args),
    /// Debug: print the syntax tree kwb sees (macros blanked), for bug reports
    #[command(next_help_heading = "Debug")]
    DumpTree {
        /// Source file
        file: PathBuf,
    },
    /// Debug: run a tree-sitter query over a file and print every capture
    Query {
        /// Query file (.scm)
        query: PathBuf,
        /// Source file
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum LadderCommand {
    /// Write a rung's operands (and its answer) as .npy files, to feed a kernel
    Write(commands::ladder::WriteArgs),
    /// Compare a kernel's output (.npy, M x N) with the rung's answer; exit 5 on a
    /// mismatch
    Check(commands::ladder::CheckArgs),
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Per site and K tile: values seen, absmax, NaN/Inf counts, first values
    Show(commands::trace::ShowArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Sites(args) => commands::sites::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::RunWorker { job } => commands::run::worker(job),
        Command::ParseStats(args) => commands::parse_stats::run(args),
        Command::Trace(TraceCommand::Show(args)) => commands::trace::show(args),
        Command::Ladder(LadderCommand::Write(args)) => commands::ladder::write(args),
        Command::Ladder(LadderCommand::Check(args)) => commands::ladder::check(args),
        Command::DumpTree { file } => commands::debug::dump_tree(&file),
        Command::Query { query, file } => commands::debug::query(&query, &file),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
